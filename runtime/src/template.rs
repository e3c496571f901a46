//! Resource URI templates (RFC 6570 level 1), compiled once and matched in
//! time linear in the URI.
//!
//! A template comes from a component (untrusted) and the URI from a client
//! (untrusted), so matching must never be exponential or recurse per
//! variable. Rules, in one place:
//!
//! - `{name}` (`A-Za-z0-9_`) matches one or more characters other than
//!   `/`; everything else matches itself. A template is at most
//!   [`MAX_TEMPLATE_BYTES`] long with at most [`MAX_TEMPLATE_VARIABLES`]
//!   variables.
//! - Matching: since variables never span a `/`, the URI's `/`-separated
//!   segments align one to one with the template's (split at the `/`s of its
//!   literal text). Within a segment, each literal is placed at its leftmost
//!   possible position, the last one at the end: if any placement matches,
//!   that one does, so no search is needed, and each variable takes the
//!   shortest text that lets the rest match (earlier variables first), as
//!   a backtracking matcher trying shortest first would.
//! - The guest SDK (`guest-sdk/src/lib.rs`, `match_template`) implements the
//!   same algorithm for the variables a read receives; both are tested on
//!   the same table of cases, `guest-sdk/tests/uri-templates.txt`.

/// Longest template accepted, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 1024;
/// Most variables one template may have.
pub const MAX_TEMPLATE_VARIABLES: usize = 64;

/// A compiled template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    /// The template's `/`-separated segments.
    segments: Vec<Vec<Part>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Variable(String),
}

impl UriTemplate {
    /// Its variables' names, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.segments
            .iter()
            .flatten()
            .filter_map(|part| match part {
                Part::Variable(name) => Some(name.as_str()),
                Part::Literal(_) => None,
            })
    }

    /// Compile `template`.
    ///
    /// # Errors
    ///
    /// It is empty, too long, has too many variables, unbalanced braces, or
    /// a variable that is not level 1; the message names it.
    pub fn parse(template: &str) -> Result<UriTemplate, String> {
        if template.is_empty() {
            return Err("a resource template is empty".into());
        }
        if template.len() > MAX_TEMPLATE_BYTES {
            return Err(format!(
                "a resource template is {} bytes, over the limit of {MAX_TEMPLATE_BYTES}",
                template.len()
            ));
        }
        let shown = || template.escape_default().to_string();
        let mut segments = vec![Vec::new()];
        let mut variables = 0;
        let mut rest = template;
        while !rest.is_empty() {
            match rest.find(['{', '}']) {
                Some(at) if rest[at..].starts_with('}') => {
                    return Err(format!(
                        "resource template `{}` has an unmatched `}}`",
                        shown()
                    ));
                }
                Some(open) => {
                    push_literal(&mut segments, &rest[..open]);
                    let inner = &rest[open + 1..];
                    let Some(close) = inner.find('}') else {
                        return Err(format!(
                            "resource template `{}` has an unclosed `{{`",
                            shown()
                        ));
                    };
                    let name = &inner[..close];
                    if name.is_empty()
                        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        return Err(format!(
                            "resource template `{}` has variable `{{{}}}`; only level-1 \
                             `{{name}}` variables (A-Z, a-z, 0-9, `_`) are supported",
                            shown(),
                            name.escape_default()
                        ));
                    }
                    variables += 1;
                    if variables > MAX_TEMPLATE_VARIABLES {
                        return Err(format!(
                            "resource template `{}` has more than {MAX_TEMPLATE_VARIABLES} variables",
                            shown()
                        ));
                    }
                    if let Some(segment) = segments.last_mut() {
                        segment.push(Part::Variable(name.to_owned()));
                    }
                    rest = &inner[close + 1..];
                }
                None => {
                    push_literal(&mut segments, rest);
                    rest = "";
                }
            }
        }
        Ok(UriTemplate { segments })
    }

    /// Whether `uri` matches.
    pub fn matches(&self, uri: &str) -> bool {
        self.captures(uri).is_some()
    }

    /// The variables' values if `uri` matches, in template order.
    pub fn captures<'u>(&self, uri: &'u str) -> Option<Vec<(&str, &'u str)>> {
        let mut captures = Vec::new();
        let mut pieces = uri.split('/');
        for segment in &self.segments {
            match_segment(segment, pieces.next()?, &mut captures)?;
        }
        pieces.next().is_none().then_some(captures)
    }
}

/// Append literal `text` to the template, starting a new segment at each
/// `/`.
fn push_literal(segments: &mut Vec<Vec<Part>>, text: &str) {
    for (i, piece) in text.split('/').enumerate() {
        if i > 0 {
            segments.push(Vec::new());
        }
        if !piece.is_empty()
            && let Some(segment) = segments.last_mut()
        {
            segment.push(Part::Literal(piece.to_owned()));
        }
    }
}

/// Match one segment (no `/` in it) against `text` (no `/` either),
/// pushing the variables' values.
fn match_segment<'t, 'u>(
    parts: &'t [Part],
    text: &'u str,
    captures: &mut Vec<(&'t str, &'u str)>,
) -> Option<()> {
    let mut pos = 0;
    // Variables seen since the last literal: they share the text before
    // the next one.
    let mut pending: Vec<&'t str> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        match part {
            Part::Variable(name) => pending.push(name),
            Part::Literal(literal) if pending.is_empty() => {
                text[pos..].strip_prefix(literal.as_str())?;
                pos += literal.len();
            }
            Part::Literal(literal) => {
                let start = advance(text, pos, pending.len())?;
                let found = if i + 1 == parts.len() {
                    // The last literal ends the segment.
                    let at = text.len().checked_sub(literal.len())?;
                    (at >= start && text[at..] == **literal && text.is_char_boundary(at))
                        .then_some(at)?
                } else {
                    start + text[start..].find(literal.as_str())?
                };
                share(&pending, &text[pos..found], captures);
                pending.clear();
                pos = found + literal.len();
            }
        }
    }
    if pending.is_empty() {
        return (pos == text.len()).then_some(());
    }
    advance(text, pos, pending.len())?;
    share(&pending, &text[pos..], captures);
    Some(())
}

/// The byte offset `chars` characters after `pos`, if `text` has them.
fn advance(text: &str, pos: usize, chars: usize) -> Option<usize> {
    let mut at = pos;
    let mut iter = text[pos..].chars();
    for _ in 0..chars {
        at += iter.next()?.len_utf8();
    }
    Some(at)
}

/// Give `names` their shares of `span` (at least one character each):
/// the earlier ones one character, the last one the rest.
fn share<'t, 'u>(names: &[&'t str], span: &'u str, captures: &mut Vec<(&'t str, &'u str)>) {
    let mut rest = span;
    for (i, name) in names.iter().enumerate() {
        let take = if i + 1 == names.len() {
            rest.len()
        } else {
            rest.chars().next().map_or(0, char::len_utf8)
        };
        captures.push((name, &rest[..take]));
        rest = &rest[take..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases shared with the guest SDK's matcher.
    const CASES: &str = include_str!("../../guest-sdk/tests/uri-templates.txt");

    #[test]
    fn the_shared_cases_hold() {
        let mut checked = 0;
        for line in CASES
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let fields: Vec<&str> = line.split('\t').collect();
            let [template, uri, expected] = fields[..] else {
                panic!("bad case line: {line:?}");
            };
            let compiled = UriTemplate::parse(template).expect(template);
            let got = match compiled.captures(uri) {
                None => "no match".to_owned(),
                Some(captures) => captures
                    .iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect::<Vec<_>>()
                    .join(","),
            };
            assert_eq!(got, expected, "{template} against {uri}");
            checked += 1;
        }
        assert!(checked > 10);
    }

    #[test]
    fn bad_templates_say_why() {
        for (template, needle) in [
            ("", "empty"),
            ("a://{x", "unclosed"),
            ("a://x}", "unmatched"),
            ("a://{+x}", "level-1"),
            ("a://{}", "level-1"),
        ] {
            let error = UriTemplate::parse(template).expect_err(template);
            assert!(error.contains(needle), "{template}: {error}");
        }
        let long = format!("a://{}", "x".repeat(MAX_TEMPLATE_BYTES));
        assert!(
            UriTemplate::parse(&long)
                .expect_err("long")
                .contains("limit")
        );
        let many: String = (0..=MAX_TEMPLATE_VARIABLES)
            .map(|i| format!("{{v{i}}}"))
            .collect();
        assert!(
            UriTemplate::parse(&many)
                .expect_err("many")
                .contains("variables")
        );
    }

    #[test]
    fn adversarial_matches_are_linear() {
        // 24 adjacent variables then a literal that never comes: a
        // backtracking matcher tries every way to split the URI.
        let template: String = (0..24).map(|i| format!("{{a{i}}}")).collect::<String>() + "x";
        let compiled = UriTemplate::parse(&format!("h://{template}")).expect("ok");
        let uri = format!("h://{}", "a".repeat(100_000));
        assert!(!compiled.matches(&uri));
        assert!(compiled.matches(&format!("{uri}x")));
    }
}
