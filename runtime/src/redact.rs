//! The one step every tool-controlled text passes before it reaches a log
//! line or a journal field: secrets scrubbed, length bounded.
//!
//! A tool controls its output, its log messages, its error messages, the
//! host names it asks for and its results, and it knows the secrets it was
//! granted: anything it wants the operator's log to keep, it can put in any
//! of those. So each of them goes through [`Scrub::text`] first:
//!
//! - every granted secret (4 characters or more: shorter ones would match
//!   ordinary text) is replaced by `[secret]`, compared ASCII
//!   case-insensitively, so a secret written in other case (as a host name
//!   is, once lowercased) is caught too;
//! - control characters (newlines included) and bidirectional formatting
//!   characters are escaped (`\n`, `\u{1b}`, `\u{202e}`), so a tool cannot
//!   start a forged log line, move a terminal's cursor or reorder a line;
//! - the result is cut at a byte limit (on a character boundary, marked
//!   with `…`), so no single field can flood a log or a journal line.

use std::borrow::Cow;

/// The shortest secret searched for; a shorter one would match ordinary
/// text (it is still never logged by toolcage itself).
pub const MIN_SECRET_LEN: usize = 4;

/// The secrets of one tool, ready to scrub with.
#[derive(Debug, Clone, Default)]
pub struct Scrub<'a> {
    /// The secrets, lowercased (ASCII), longest first so that a secret
    /// containing another is replaced whole.
    secrets: Vec<Cow<'a, str>>,
}

impl<'a> Scrub<'a> {
    /// Scrub with `secrets` (those shorter than [`MIN_SECRET_LEN`] are not
    /// searched for).
    pub fn new(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut secrets: Vec<Cow<'a, str>> = secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .map(|s| {
                if s.bytes().any(|b| b.is_ascii_uppercase()) {
                    Cow::Owned(s.to_ascii_lowercase())
                } else {
                    Cow::Borrowed(s)
                }
            })
            .collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Scrub { secrets }
    }

    /// Whether there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret replaced by `[secret]` (case-insensitively),
    /// control characters escaped, and cut to at most `max` bytes: the form
    /// for a log line.
    pub fn text(&self, text: &str, max: usize) -> String {
        let replaced = self.replace(text);
        use crate::terminal::is_control_or_bidi;
        let escaped = if replaced.chars().any(is_control_or_bidi) {
            Cow::Owned(
                replaced
                    .chars()
                    .map(|c| {
                        if is_control_or_bidi(c) {
                            c.escape_default().to_string()
                        } else {
                            c.to_string()
                        }
                    })
                    .collect::<String>(),
            )
        } else {
            replaced
        };
        truncate(&escaped, max)
    }

    /// `text` with every secret replaced, at any length (for values whose
    /// size is bounded elsewhere, such as the arguments in a journal line).
    pub fn replace<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.secrets.is_empty() {
            return Cow::Borrowed(text);
        }
        // ASCII lowercasing keeps every byte offset, so a match found in the
        // lowered copy is the same range of the original.
        let lowered = text.to_ascii_lowercase();
        let mut cuts: Vec<(usize, usize)> = Vec::new();
        for secret in &self.secrets {
            let mut from = 0;
            while let Some(at) = lowered[from..].find(secret.as_ref()) {
                let start = from + at;
                let end = start + secret.len();
                if !cuts.iter().any(|&(s, e)| start < e && s < end) {
                    cuts.push((start, end));
                }
                from = end;
            }
        }
        if cuts.is_empty() {
            return Cow::Borrowed(text);
        }
        cuts.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in cuts {
            out.push_str(&text[at..start]);
            out.push_str("[secret]");
            at = end;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }
}

/// At most `max` bytes of `text`, cut on a character boundary and marked
/// with `…` when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced_in_any_case() {
        let scrub = Scrub::new(["hunter22", "Tok3n-ABC", "abc"]);
        assert_eq!(scrub.text("pw hunter22!", 100), "pw [secret]!");
        assert_eq!(
            scrub.text("HUNTER22.evil.example", 100),
            "[secret].evil.example"
        );
        assert_eq!(
            scrub.text("x tok3n-abc y Tok3n-ABC", 100),
            "x [secret] y [secret]"
        );
        // Too short to search for.
        assert_eq!(scrub.text("abc", 100), "abc");
        assert_eq!(scrub.text("nothing here", 100), "nothing here");
        // A secret inside a longer one is replaced with it, once.
        let nested = Scrub::new(["secret-key", "secret-key-2"]);
        assert_eq!(nested.text("a secret-key-2 b", 100), "a [secret] b");
    }

    #[test]
    fn control_characters_cannot_forge_a_line() {
        let scrub = Scrub::default();
        assert_eq!(
            scrub.text("a\n2026-01-01 INFO forged\u{1b}[2J", 100),
            "a\\n2026-01-01 INFO forged\\u{1b}[2J"
        );
    }

    #[test]
    fn texts_are_cut_on_character_boundaries() {
        let scrub = Scrub::default();
        assert_eq!(scrub.text("héllo", 2), "h…");
        assert_eq!(scrub.text("hi", 2), "hi");
        // Scrubbing comes first: a secret straddling the cut is still gone.
        let scrub = Scrub::new(["hunter22"]);
        assert_eq!(scrub.text("xxhunter22", 5), "xx[se…");
    }
}
