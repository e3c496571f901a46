//! `edit_file`'s matching and its unified diff.
//!
//! Matching follows the reference server: line endings are normalised to
//! `\n`; each edit replaces the first exact occurrence of its `oldText`; if
//! there is none, it looks for a run of lines equal to `oldText`'s lines once
//! leading and trailing whitespace is ignored, and replaces that run,
//! re-indenting the new lines to the file's indentation.

use std::time::Duration;

use similar::{ChangeTag, TextDiff};

/// One replacement.
#[derive(Debug, Clone)]
pub struct Edit {
    pub old_text: String,
    pub new_text: String,
}

/// Apply `edits` in order to `content` (already `\n`-normalised). Fails,
/// naming the edit, if an `oldText` is empty or cannot be found.
pub fn apply_edits(content: &str, edits: &[Edit], path: &str) -> Result<String, String> {
    let mut text = content.to_owned();
    for (index, edit) in edits.iter().enumerate() {
        let old = normalize_newlines(&edit.old_text);
        let new = normalize_newlines(&edit.new_text);
        let which = if edits.len() == 1 {
            "the edit".to_owned()
        } else {
            format!("edit {} of {}", index + 1, edits.len())
        };
        if old.is_empty() {
            return Err(format!(
                "{which}: `oldText` is empty; give the exact text to replace. No changes were made."
            ));
        }
        if let Some(at) = text.find(&old) {
            text.replace_range(at..at + old.len(), &new);
            continue;
        }
        match fuzzy_replace(&text, &old, &new) {
            Some(replaced) => text = replaced,
            None => {
                return Err(format!(
                    "{which}: `oldText` was not found in `{path}`, not even ignoring each line's \
                     leading and trailing whitespace. No changes were made{}. Read the file \
                     again and copy the text exactly. The `oldText` was:\n{}",
                    if index > 0 {
                        " (earlier edits were not applied either)"
                    } else {
                        ""
                    },
                    edit.old_text
                ));
            }
        }
    }
    Ok(text)
}

pub fn normalize_newlines(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// The leading whitespace of `line`.
fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// Find the first run of lines of `text` equal to `old`'s lines up to
/// surrounding whitespace; replace it with `new`'s lines, re-indented.
fn fuzzy_replace(text: &str, old: &str, new: &str) -> Option<String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let old_lines: Vec<&str> = old.split('\n').collect();
    if old_lines.len() > lines.len() {
        return None;
    }
    let start = (0..=lines.len() - old_lines.len()).find(|&i| {
        old_lines
            .iter()
            .zip(&lines[i..])
            .all(|(o, l)| o.trim() == l.trim())
    })?;
    let matched = &lines[start..start + old_lines.len()];
    let new_lines = reindent(matched, &old_lines, new);
    let mut out: Vec<&str> = Vec::with_capacity(lines.len());
    out.extend_from_slice(&lines[..start]);
    out.extend(new_lines.iter().map(String::as_str));
    out.extend_from_slice(&lines[start + old_lines.len()..]);
    Some(out.join("\n"))
}

/// Re-indent `new`'s lines for the file. The first line takes the first
/// matched line's indentation (as in the reference server). Each later line
/// whose indentation equals (or extends) the indentation of some line of
/// `oldText` gets the indentation the file has on that line instead, so
/// nested lines keep their depth even when `oldText` was indented
/// differently from the file (two spaces for four, spaces for tabs). Lines
/// with any other indentation are kept as written.
fn reindent(matched: &[&str], old_lines: &[&str], new: &str) -> Vec<String> {
    // (indentation in oldText, indentation in the file) for non-blank lines.
    let pairs: Vec<(&str, &str)> = old_lines
        .iter()
        .zip(matched)
        .filter(|(o, _)| !o.trim().is_empty())
        .map(|(o, l)| (indent(o), indent(l)))
        .collect();
    let first_indent = matched.first().map_or("", |l| indent(l));
    new.split('\n')
        .enumerate()
        .map(|(j, line)| {
            let body = line.trim_start();
            if j == 0 {
                return format!("{first_indent}{body}");
            }
            if body.is_empty() {
                return line.to_owned();
            }
            let own = indent(line);
            if let Some((_, file)) = pairs.iter().find(|(o, _)| *o == own) {
                return format!("{file}{body}");
            }
            let extended = pairs
                .iter()
                .filter(|(o, _)| !o.is_empty() && own.starts_with(o))
                .max_by_key(|(o, _)| o.len());
            match extended {
                Some((o, file)) => format!("{file}{}{body}", &own[o.len()..]),
                None => line.to_owned(),
            }
        })
        .collect()
}

/// A git-style unified diff of `old` against `new` (both `\n`-normalised),
/// with the reference server's header and four lines of context, fenced in
/// a Markdown `diff` block with enough backticks not to clash with the text.
pub fn fenced_diff(old: &str, new: &str, path: &str) -> String {
    let diff = TextDiff::configure()
        .timeout(Duration::from_secs(5))
        .diff_lines(old, new);
    let mut body = format!(
        "Index: {path}\n\
         ===================================================================\n\
         --- {path}\toriginal\n\
         +++ {path}\tmodified\n"
    );
    for hunk in diff.unified_diff().context_radius(4).iter_hunks() {
        let ops = hunk.ops();
        let (Some(first), Some(last)) = (ops.first(), ops.last()) else {
            continue;
        };
        let old_range = first.old_range().start..last.old_range().end;
        let new_range = first.new_range().start..last.new_range().end;
        // Always `start,count`, with the usual quirk that an empty range
        // starts at the line before it (as the reference's diff prints).
        let start = |r: &std::ops::Range<usize>| r.start + usize::from(!r.is_empty());
        body.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            start(&old_range),
            old_range.len(),
            start(&new_range),
            new_range.len()
        ));
        for change in hunk.iter_changes() {
            body.push_str(match change.tag() {
                ChangeTag::Equal => " ",
                ChangeTag::Delete => "-",
                ChangeTag::Insert => "+",
            });
            body.push_str(change.value());
            if change.missing_newline() {
                body.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
    let mut fence = 3;
    while body.contains(&"`".repeat(fence)) {
        fence += 1;
    }
    let fence = "`".repeat(fence);
    format!("{fence}diff\n{body}{fence}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str) -> Edit {
        Edit {
            old_text: old.into(),
            new_text: new.into(),
        }
    }

    fn apply(content: &str, edits: &[Edit]) -> Result<String, String> {
        apply_edits(content, edits, "/f")
    }

    #[test]
    fn exact_replacements_apply_in_order_first_occurrence_only() {
        let out = apply("a\nb\na\n", &[edit("a", "x"), edit("b", "y")]).unwrap();
        assert_eq!(out, "x\ny\na\n");
        // Replacement text is literal (no `$&` expansion).
        assert_eq!(apply("a", &[edit("a", "$&$1")]).unwrap(), "$&$1");
    }

    #[test]
    fn whitespace_tolerant_match_keeps_the_files_indentation() {
        let file = "def f():\n    if x:\n        return 1\n    return 0\n";
        // oldText indented with two spaces per level instead of four.
        let out = apply(
            file,
            &[edit("if x:\n  return 1", "if x:\n  log()\n  return 2")],
        )
        .unwrap();
        assert_eq!(
            out,
            "def f():\n    if x:\n        log()\n        return 2\n    return 0\n"
        );
        // Tabs in the file, spaces in the edit.
        let out = apply(
            "\tif a {\n\t\tb()\n\t}",
            &[edit("if a {\n    b()\n}", "if a {\n    c()\n}")],
        )
        .unwrap();
        assert_eq!(out, "\tif a {\n\t\tc()\n\t}");
    }

    #[test]
    fn reference_cases() {
        let out = apply(
            "function test() {\n  console.log(\"hello\");\n  return true;\n}",
            &[edit(
                "  console.log(\"hello\");\n  return true;",
                "  console.log(\"world\");\n  console.log(\"test\");\n  return false;",
            )],
        )
        .unwrap();
        assert_eq!(
            out,
            "function test() {\n  console.log(\"world\");\n  console.log(\"test\");\n  return false;\n}"
        );
        let out = apply(
            "  line1\n    line2\n  line3\n",
            &[edit("line2", "modified line2")],
        )
        .unwrap();
        assert_eq!(out, "  line1\n    modified line2\n  line3\n");
    }

    #[test]
    fn missing_text_fails_and_names_the_edit() {
        let e = apply("a\nb\n", &[edit("a", "x"), edit("zzz", "y")]).unwrap_err();
        assert!(
            e.starts_with("edit 2 of 2: `oldText` was not found in `/f`"),
            "{e}"
        );
        assert!(e.ends_with("was:\nzzz"), "{e}");
        let e = apply("a", &[edit("", "x")]).unwrap_err();
        assert!(e.contains("`oldText` is empty"), "{e}");
    }

    #[test]
    fn diff_has_the_reference_header_and_hunks() {
        let d = fenced_diff(
            "line1\nline2\nline3\n",
            "line1\nmodified line2\nline3\n",
            "/t.txt",
        );
        assert_eq!(
            d,
            "```diff\nIndex: /t.txt\n\
             ===================================================================\n\
             --- /t.txt\toriginal\n+++ /t.txt\tmodified\n\
             @@ -1,3 +1,3 @@\n line1\n-line2\n+modified line2\n line3\n```\n\n"
        );
        // Backticks in the text lengthen the fence.
        let d = fenced_diff("a\n", "```\n", "/x");
        assert!(
            d.starts_with("````diff\n") && d.ends_with("````\n\n"),
            "{d}"
        );
        // One-line and empty ranges, and a missing final newline.
        let d = fenced_diff("a\nb", "a\nc", "/x");
        assert!(
            d.ends_with("@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n```\n\n"),
            "{d}"
        );
        let d = fenced_diff("", "new\n", "/x");
        assert!(d.contains("@@ -0,0 +1,1 @@\n+new\n"), "{d}");
        // No change: the header alone.
        assert!(!fenced_diff("a\n", "a\n", "/x").contains("@@"));
    }
}
