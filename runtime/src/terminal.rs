//! Text from others on a terminal: what the CLI prints of a tool's
//! descriptions, logs and errors, a client's name, a model's reply.
//!
//! A terminal acts on some characters instead of showing them: an escape
//! sequence can clear the screen, move the cursor over an earlier line or
//! set the window title; a carriage return writes over the start of a
//! line; a bidirectional override shows `exe.txt` for `txt.exe`. A
//! community tool controls its description, and an operator reads it in
//! `toolcage list` before granting anything, so no such character may
//! reach the terminal from text toolcage did not write.
//!
//! Two forms, one rule ([`hidden`]): [`for_terminal`] drops them (a
//! model's prose, streamed), and [`Guard`] shows them escaped (every
//! command's output: the operator sees that something was there).

use std::borrow::Cow;
use std::io::{self, Write};

/// Whether a terminal or a log reader may act on `c` rather than show it:
/// control characters (C0, DEL and C1, line ends included) and the
/// Unicode bidirectional formatting characters. What `redact` escapes in
/// a log or journal field.
pub fn is_control_or_bidi(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// [`is_control_or_bidi`] but for line feed and tab, which a command's
/// output is made of.
pub fn hidden(c: char) -> bool {
    is_control_or_bidi(c) && c != '\n' && c != '\t'
}

/// The Unicode bidirectional formatting characters (embeddings,
/// overrides, isolates, marks).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` without what a terminal would act on ([`hidden`]).
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    if text.chars().any(hidden) {
        Cow::Owned(text.chars().filter(|&c| !hidden(c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// `text` with what a terminal would act on written out as an escape
/// (`\u{1b}`, `\r`), for one line of a message.
pub fn escaped(text: &str) -> Cow<'_, str> {
    if text.chars().any(hidden) {
        let mut out = String::with_capacity(text.len() + 8);
        push_escaped(text, Form::Text, &mut out);
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// How [`Guard`] writes a hidden character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `\u{1b}`, `\r`, as Rust writes them (and as `redact` does in the
    /// log and the journal): for text.
    Text,
    /// `\u001b`: for JSON output, where such a character can only be
    /// inside a string, so the escape means the same character and the
    /// document the same value.
    Json,
}

fn push_escaped(text: &str, form: Form, out: &mut String) {
    use std::fmt::Write as _;
    for c in text.chars() {
        if !hidden(c) {
            out.push(c);
            continue;
        }
        match form {
            Form::Text => out.extend(c.escape_default()),
            // Every hidden character is in the Basic Multilingual Plane.
            Form::Json => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
        }
    }
}

/// A writer that escapes what a terminal would act on ([`hidden`]) in
/// everything written through it, so a command's output shows it rather
/// than obeys it. Bytes that are not UTF-8 become U+FFFD; a character split
/// across two writes is held (at most 3 bytes) until its end arrives.
pub struct Guard<W: Write> {
    inner: W,
    form: Form,
    /// The start of a character whose end has not been written yet.
    carry: Vec<u8>,
}

impl<W: Write> Guard<W> {
    /// Guard `inner`, escaping in `form`.
    pub fn new(inner: W, form: Form) -> Guard<W> {
        Guard {
            inner,
            form,
            carry: Vec::new(),
        }
    }
}

impl<W: Write> Write for Guard<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Most output is printable ASCII: passed on as it is.
        if self.carry.is_empty()
            && buf
                .iter()
                .all(|&b| (0x20..0x7f).contains(&b) || b == b'\n' || b == b'\t')
        {
            self.inner.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(buf);
        let mut out = String::with_capacity(bytes.len());
        let mut rest = bytes.as_slice();
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    push_escaped(text, self.form, &mut out);
                    rest = &[];
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    push_escaped(&String::from_utf8_lossy(valid), self.form, &mut out);
                    match error.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        // A character cut short at the end of `buf`.
                        None => {
                            self.carry = after.to_vec();
                            rest = &[];
                        }
                    }
                }
            }
        }
        self.inner.write_all(out.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for Guard<W> {
    fn drop(&mut self) {
        // A character never finished.
        if !self.carry.is_empty() {
            let _ = self
                .inner
                .write_all(char::REPLACEMENT_CHARACTER.to_string().as_bytes());
        }
        let _ = self.inner.flush();
    }
}

/// Standard output, guarded in `form`.
pub fn stdout(form: Form) -> Guard<io::Stdout> {
    Guard::new(io::stdout(), form)
}

/// Standard error, guarded in `form`.
pub fn stderr(form: Form) -> Guard<io::Stderr> {
    Guard::new(io::stderr(), form)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(form: Form, writes: &[&[u8]]) -> String {
        let mut out = Vec::new();
        {
            let mut guard = Guard::new(&mut out, form);
            for bytes in writes {
                guard.write_all(bytes).expect("a Vec takes every write");
            }
        }
        String::from_utf8(out).expect("the guard writes UTF-8")
    }

    #[test]
    fn escapes_carriage_returns_and_bidi_overrides_are_shown_not_obeyed() {
        let attack = "ok\x1b[2J\u{9b}31m\r\u{202E}txt.exe\u{202C}\tdone\n";
        assert_eq!(
            through(Form::Text, &[attack.as_bytes()]),
            "ok\\u{1b}[2J\\u{9b}31m\\r\\u{202e}txt.exe\\u{202c}\tdone\n"
        );
        assert_eq!(escaped(attack), through(Form::Text, &[attack.as_bytes()]));
        assert_eq!(for_terminal(attack), "ok[2J31mtxt.exe\tdone\n");
        assert!(matches!(escaped("plain\ttext\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_keeps_its_value() {
        let value = serde_json::json!({"d": "a\u{1b}b\u{9b}c\u{202e}d\u{7f}"});
        let text = serde_json::to_string(&value).expect("a Value serializes");
        let guarded = through(Form::Json, &[text.as_bytes()]);
        assert!(!guarded.chars().any(hidden), "{guarded:?}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&guarded).expect("still JSON"),
            value
        );
    }

    #[test]
    fn a_character_split_across_writes_is_whole_and_bad_bytes_are_replaced() {
        let text = "é\u{202E}€".as_bytes();
        // Every split point, including inside each multi-byte character.
        for at in 0..=text.len() {
            let (a, b) = text.split_at(at);
            assert_eq!(through(Form::Text, &[a, b]), "é\\u{202e}€", "split at {at}");
        }
        assert_eq!(through(Form::Text, &[b"a\xffb"]), "a\u{FFFD}b");
        // A character never finished is replaced when the writer goes.
        assert_eq!(through(Form::Text, &[b"a\xe2\x82"]), "a\u{FFFD}");
        // The escape introducer of C1 split across writes is still caught.
        assert_eq!(through(Form::Text, &[b"x\xc2", b"\x9by"]), "x\\u{9b}y");
    }
}
