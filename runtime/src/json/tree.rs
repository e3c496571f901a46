//! A guest's structured output, parsed once into a flat tree that keeps
//! the guest's text, checked against the tool's output schema as it is,
//! and written into the reply from the tree.
//!
//! Parsed into a `serde_json::Value`, a listing's structured output took
//! about a tenth of the call's host instructions: every string and key
//! copied into its own allocation, every object a B-tree, the whole
//! serialised again for the reply and then dropped (`docs/benchmarks.md`,
//! round fifteen). Here the values sit in one `Vec` in document order,
//! strings without escapes are spans of the guest's text, and the schema
//! check reads the tree through jsonschema's custom-representation traits
//! ([`TreeJson`]).
//!
//! What the client reads is what was checked:
//! - The reply is written from the tree ([`Tree::write`]), never copied
//!   from the guest's text: no whitespace (so no line break in a stdio
//!   reply), strings escaped as serde_json escapes them, numbers as
//!   serde_json writes the number it parsed (`1E2` as `100.0`, an integer
//!   beyond 64 bits as a float), exactly the text a `Value` would have
//!   given, but with the guest's key order.
//! - A key twice in one object is refused ([`ParseError::DuplicateKey`]):
//!   parsers differ on which one counts, so a check of one could pass a
//!   client that reads the other.
//!
//! Memory: each value is charged against the budget exactly as
//! [`super::parse`] charges it for a `Value`, so a tree fits its budget
//! exactly when the `Value` would, and [`Tree::to_value`] (for callers
//! that need one) builds nothing the budget did not allow. The tree itself
//! takes far less: one [`Entry`] a value, and the bytes of strings that
//! had escapes.

use std::borrow::Cow;
use std::fmt;

use jsonschema::JsonType;
use jsonschema::json::{self as schema_json, Json, NodeIdentity};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::{ENTRIES_PER_NODE, MAP_NODE_BYTES, NODE_BYTES, ParseError};

/// Objects with more members than this get a sorted index for lookups
/// (and for finding a key twice); smaller ones are scanned.
const INDEXED_MEMBERS: usize = 16;

/// A parsed JSON document: its text, and its values in document order.
#[derive(Clone, PartialEq, Default)]
pub struct Tree {
    text: String,
    nodes: Vec<Entry>,
}

/// One value, with the key it has in its object.
#[derive(Clone, PartialEq, Debug)]
struct Entry {
    /// The member name, for a value in an object.
    key: Str,
    kind: Kind,
    /// Index of the first node after this value's own (its subtree's end).
    end: u32,
}

#[derive(Clone, PartialEq, Debug)]
enum Kind {
    Null,
    Bool(bool),
    Number(Number),
    String(Str),
    Array {
        len: u32,
    },
    Object {
        len: u32,
        /// Positions of the members, sorted by key; for large objects.
        index: Option<Box<[u32]>>,
    },
}

/// A string: a span of the text when it had no escapes, else its own.
#[derive(Clone, PartialEq, Debug)]
enum Str {
    Span { start: u32, len: u32 },
    Owned(Box<str>),
}

impl fmt::Debug for Tree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::new();
        self.write(&mut text);
        f.debug_tuple("Tree").field(&text).finish()
    }
}

/// The compact JSON text [`Tree::write`] writes.
impl fmt::Display for Tree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

impl Tree {
    /// Parse `text`, charging `budget` as [`super::parse`] would.
    ///
    /// # Errors
    ///
    /// The text is not JSON, an object has a key twice, or the parsed form
    /// would exceed the budget.
    pub fn parse(text: String, budget: usize) -> Result<Tree, ParseError> {
        // Spans are `u32`s; no result is near 4 GiB (the result limit).
        if u32::try_from(text.len()).is_err() {
            return Err(ParseError::TooLarge { budget });
        }
        let nodes = match fast::parse(&text, budget) {
            Some(nodes) => nodes,
            None => parse_serde(&text, budget)?,
        };
        Ok(Tree { text, nodes })
    }

    /// The document's top value.
    pub fn root(&self) -> Node<'_> {
        Node { tree: self, at: 0 }
    }

    /// Whether the top value is an object.
    pub fn is_object(&self) -> bool {
        matches!(
            self.nodes.first().map(|e| &e.kind),
            Some(Kind::Object { .. })
        )
    }

    /// The document as compact JSON text (see the module docs), appended
    /// to `out`.
    pub fn write<S: toolcage_json::Sink>(&self, out: &mut S) {
        if !self.nodes.is_empty() {
            self.write_node(out, 0);
        }
    }

    /// [`Tree::write`] into a new `String`.
    pub fn to_text(&self) -> String {
        let mut text = String::with_capacity(self.text.len());
        self.write(&mut text);
        text
    }

    /// The document as a `Value` (within the budget it was parsed under).
    pub fn to_value(&self) -> Value {
        if self.nodes.is_empty() {
            return Value::Null;
        }
        self.root().value()
    }

    fn str<'s>(&'s self, s: &'s Str) -> &'s str {
        str_in(&self.text, s)
    }

    /// The positions of the values within the array or object at `at`.
    fn children(&self, at: usize) -> Children<'_> {
        Children {
            tree: self,
            next: at + 1,
            end: self.nodes.get(at).map_or(0, |e| e.end as usize),
        }
    }

    fn write_node<S: toolcage_json::Sink>(&self, out: &mut S, at: usize) {
        let Some(entry) = self.nodes.get(at) else {
            return;
        };
        match &entry.kind {
            Kind::Null => out.push_text("null"),
            Kind::Bool(true) => out.push_text("true"),
            Kind::Bool(false) => out.push_text("false"),
            // Exactly as serde_json writes it; a number always serialises.
            Kind::Number(number) => {
                let _ = toolcage_json::to_writer(out, number);
            }
            Kind::String(s) => write_string(out, &self.text, s),
            Kind::Array { .. } => {
                out.push_ascii(b'[');
                for (i, child) in self.children(at).enumerate() {
                    if i > 0 {
                        out.push_ascii(b',');
                    }
                    self.write_node(out, child);
                }
                out.push_ascii(b']');
            }
            Kind::Object { .. } => {
                out.push_ascii(b'{');
                for (i, child) in self.children(at).enumerate() {
                    if i > 0 {
                        out.push_ascii(b',');
                    }
                    if let Some(entry) = self.nodes.get(child) {
                        write_string(out, &self.text, &entry.key);
                    }
                    out.push_ascii(b':');
                    self.write_node(out, child);
                }
                out.push_ascii(b'}');
            }
        }
    }
}

/// `s`, a string of the document `text`.
fn str_in<'s>(text: &'s str, s: &'s Str) -> &'s str {
    match s {
        Str::Span { start, len } => {
            let start = *start as usize;
            text.get(start..start + *len as usize).unwrap_or("")
        }
        Str::Owned(s) => s,
    }
}

/// Write `s` as a JSON string. A span had no escapes in the text it came
/// from, and JSON text has no raw `"`, `\` or control character inside a
/// string, so a span is written as it is; what had escapes is escaped.
fn write_string<S: toolcage_json::Sink>(out: &mut S, text: &str, s: &Str) {
    match s {
        Str::Span { .. } => {
            let span = str_in(text, s);
            out.reserve_more(span.len() + 2);
            out.push_ascii(b'"');
            out.push_text(span);
            out.push_ascii(b'"');
        }
        Str::Owned(owned) => toolcage_json::write_str(out, owned),
    }
}

/// The positions of a container's values, in order.
struct Children<'a> {
    tree: &'a Tree,
    next: usize,
    end: usize,
}

impl Iterator for Children<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.next >= self.end {
            return None;
        }
        let at = self.next;
        self.next = self.tree.nodes.get(at).map_or(self.end, |e| e.end as usize);
        Some(at)
    }
}

// --- Parsing -----------------------------------------------------------------

/// A parser of JSON text into the tree that accepts only what serde_json
/// accepts, gives the same tree, and charges the same budget; anything
/// else it leaves to serde_json (the [`Builder`] below), which decides every
/// error and every case this one does not take (a key twice, a surrogate
/// escape out of its pair, deep nesting). Floats are read by serde_json
/// from the number's own text. serde_json looks at a string one
/// byte at a time through a table; here eight bytes are tested at once,
/// and most of the time of a parse is strings.
mod fast {
    use serde_json::Number;

    use super::{ENTRIES_PER_NODE, Entry, Kind, MAP_NODE_BYTES, NODE_BYTES, Str, members_index};

    /// Nesting this deep is left to serde_json (whose limit is 128).
    const MAX_DEPTH: u32 = 100;

    /// The tree's nodes, or `None` for serde_json to decide.
    pub(super) fn parse(text: &str, budget: usize) -> Option<Vec<Entry>> {
        let mut parser = Parser {
            text,
            bytes: text.as_bytes(),
            at: 0,
            left: budget,
            nodes: Vec::with_capacity(text.len() / 16 + 1),
        };
        parser.value(None, 0)?;
        parser.skip_space();
        (parser.at == parser.bytes.len()).then_some(parser.nodes)
    }

    struct Parser<'t> {
        text: &'t str,
        bytes: &'t [u8],
        at: usize,
        left: usize,
        nodes: Vec<Entry>,
    }

    impl Parser<'_> {
        /// As the serde builder charges: `bytes` and a value.
        fn charge(&mut self, bytes: usize) -> Option<()> {
            self.left = self.left.checked_sub(bytes.saturating_add(NODE_BYTES))?;
            Some(())
        }

        fn push(&mut self, key: Option<Str>, kind: Kind) -> usize {
            let at = self.nodes.len();
            self.nodes.push(Entry {
                key: key.unwrap_or(Str::Span { start: 0, len: 0 }),
                kind,
                end: (at + 1) as u32,
            });
            at
        }

        fn skip_space(&mut self) {
            while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
                self.at += 1;
            }
        }

        fn eat(&mut self, byte: u8) -> Option<()> {
            (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
        }

        fn literal(&mut self, word: &[u8]) -> Option<()> {
            let end = self.at.checked_add(word.len())?;
            (self.bytes.get(self.at..end) == Some(word)).then(|| self.at = end)
        }

        fn value(&mut self, key: Option<Str>, depth: u32) -> Option<()> {
            self.skip_space();
            match *self.bytes.get(self.at)? {
                b'{' => self.object(key, depth + 1),
                b'[' => self.array(key, depth + 1),
                b'"' => {
                    let s = self.string()?;
                    self.charge(str_len(&s))?;
                    self.push(key, Kind::String(s));
                    Some(())
                }
                b't' => self.leaf(key, b"true", Kind::Bool(true)),
                b'f' => self.leaf(key, b"false", Kind::Bool(false)),
                b'n' => self.leaf(key, b"null", Kind::Null),
                _ => {
                    let number = self.number()?;
                    self.charge(0)?;
                    self.push(key, Kind::Number(number));
                    Some(())
                }
            }
        }

        fn leaf(&mut self, key: Option<Str>, word: &[u8], kind: Kind) -> Option<()> {
            self.literal(word)?;
            self.charge(0)?;
            self.push(key, kind);
            Some(())
        }

        fn array(&mut self, key: Option<Str>, depth: u32) -> Option<()> {
            if depth > MAX_DEPTH {
                return None;
            }
            self.at += 1;
            self.charge(0)?;
            let at = self.push(key, Kind::Array { len: 0 });
            let mut len = 0u32;
            self.skip_space();
            if self.eat(b']').is_none() {
                loop {
                    self.value(None, depth)?;
                    len += 1;
                    self.skip_space();
                    if self.eat(b',').is_some() {
                        continue;
                    }
                    self.eat(b']')?;
                    break;
                }
            }
            let end = self.nodes.len() as u32;
            let entry = self.nodes.get_mut(at)?;
            entry.kind = Kind::Array { len };
            entry.end = end;
            Some(())
        }

        fn object(&mut self, key: Option<Str>, depth: u32) -> Option<()> {
            if depth > MAX_DEPTH {
                return None;
            }
            self.at += 1;
            self.charge(0)?;
            let at = self.push(
                key,
                Kind::Object {
                    len: 0,
                    index: None,
                },
            );
            let mut len = 0u32;
            self.skip_space();
            if self.eat(b'}').is_none() {
                loop {
                    self.skip_space();
                    if self.bytes.get(self.at) != Some(&b'"') {
                        return None;
                    }
                    let name = self.string()?;
                    let node = if (len as usize).is_multiple_of(ENTRIES_PER_NODE) {
                        MAP_NODE_BYTES
                    } else {
                        0
                    };
                    len += 1;
                    self.charge(str_len(&name).saturating_add(node))?;
                    self.skip_space();
                    self.eat(b':')?;
                    self.value(Some(name), depth)?;
                    self.skip_space();
                    if self.eat(b',').is_some() {
                        continue;
                    }
                    self.eat(b'}')?;
                    break;
                }
            }
            let end = self.nodes.len();
            // A key twice is for serde_json's path to report.
            let index = if len > 1 {
                members_index(&self.nodes, self.text, at, end, len).ok()?
            } else {
                None
            };
            let entry = self.nodes.get_mut(at)?;
            entry.kind = Kind::Object { len, index };
            entry.end = end as u32;
            Some(())
        }

        /// A string at `"`: a span when it has no escapes.
        fn string(&mut self) -> Option<Str> {
            self.at += 1;
            let start = self.at;
            let stop = self.scan()?;
            if self.bytes.get(stop) == Some(&b'"') {
                self.at = stop + 1;
                return Some(Str::Span {
                    start: u32::try_from(start).ok()?,
                    len: u32::try_from(stop - start).ok()?,
                });
            }
            // An escape: the string decoded.
            let mut owned = String::with_capacity(stop - start + 16);
            owned.push_str(self.text.get(start..stop)?);
            loop {
                match self.bytes.get(self.at)? {
                    b'"' => {
                        self.at += 1;
                        return Some(Str::Owned(owned.into_boxed_str()));
                    }
                    b'\\' => {
                        self.at += 1;
                        self.escape(&mut owned)?;
                    }
                    _ => return None,
                }
                let run = self.at;
                let stop = self.scan()?;
                owned.push_str(self.text.get(run..stop)?);
            }
        }

        /// Move to the next `"`, `\` or control character, returning its
        /// position (and leaving `at` there); `None` at the end of the text.
        fn scan(&mut self) -> Option<usize> {
            let mut at = self.at;
            while let Some(chunk) = self.bytes.get(at..at + 8) {
                let word = u64::from_le_bytes(chunk.try_into().ok()?);
                let flags = special(word);
                if flags != 0 {
                    at += (flags.trailing_zeros() / 8) as usize;
                    self.at = at;
                    return Some(at);
                }
                at += 8;
            }
            while let Some(&byte) = self.bytes.get(at) {
                if byte == b'"' || byte == b'\\' || byte < 0x20 {
                    self.at = at;
                    return Some(at);
                }
                at += 1;
            }
            None
        }

        /// One escape after its `\`, appended to `out`.
        fn escape(&mut self, out: &mut String) -> Option<()> {
            let byte = *self.bytes.get(self.at)?;
            self.at += 1;
            let decoded = match byte {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let first = self.hex4()?;
                    match first {
                        0xD800..=0xDBFF => {
                            // A pair; anything else is serde_json's to judge.
                            self.literal(b"\\u")?;
                            let second = self.hex4()?;
                            if !(0xDC00..=0xDFFF).contains(&second) {
                                return None;
                            }
                            let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                            char::from_u32(code)?
                        }
                        0xDC00..=0xDFFF => return None,
                        _ => char::from_u32(first)?,
                    }
                }
                _ => return None,
            };
            out.push(decoded);
            Some(())
        }

        fn hex4(&mut self) -> Option<u32> {
            let digits = self.text.get(self.at..self.at.checked_add(4)?)?;
            if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            self.at += 4;
            u32::from_str_radix(digits, 16).ok()
        }

        /// A number, as serde_json reads it: an integer that fits 64 bits
        /// as one, anything else (a fraction, an exponent, `-0`, more
        /// digits) as the float serde_json makes of the same text.
        fn number(&mut self) -> Option<Number> {
            let first = self.at;
            let negative = self.eat(b'-').is_some();
            let start = self.at;
            let mut magnitude: Option<u64> = Some(0);
            while let Some(&digit @ b'0'..=b'9') = self.bytes.get(self.at) {
                magnitude = magnitude
                    .and_then(|m| m.checked_mul(10))
                    .and_then(|m| m.checked_add(u64::from(digit - b'0')));
                self.at += 1;
            }
            let digits = self.at - start;
            // No digits, or a leading zero before more: serde_json's error.
            if digits == 0 || (digits > 1 && self.bytes.get(start) == Some(&b'0')) {
                return None;
            }
            let mut float = false;
            if self.eat(b'.').is_some() {
                float = true;
                self.digits()?;
            }
            if let Some(b'e' | b'E') = self.bytes.get(self.at) {
                float = true;
                self.at += 1;
                if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                    self.at += 1;
                }
                self.digits()?;
            }
            match (float, negative, magnitude) {
                (false, false, Some(magnitude)) => Some(Number::from(magnitude)),
                // serde_json reads `-0` as a float (-0.0), below.
                (false, true, Some(magnitude)) if magnitude > 0 => {
                    Some(Number::from(0i64.checked_sub_unsigned(magnitude)?))
                }
                _ => {
                    // The same text alone gives the float serde_json gives
                    // it inside a document (its error, for one out of range).
                    let text = self.text.get(first..self.at)?;
                    Number::from_f64(serde_json::from_str::<f64>(text).ok()?)
                }
            }
        }

        /// One or more digits.
        fn digits(&mut self) -> Option<()> {
            let start = self.at;
            while let Some(b'0'..=b'9') = self.bytes.get(self.at) {
                self.at += 1;
            }
            (self.at > start).then_some(())
        }
    }

    /// The byte length of a string as the budget counts it.
    fn str_len(s: &Str) -> usize {
        match s {
            Str::Span { len, .. } => *len as usize,
            Str::Owned(s) => s.len(),
        }
    }

    /// A flag in the top bit of each byte of `word` that is `"`, `\` or
    /// below 0x20, exact for the lowest flagged byte (the borrows of the
    /// subtractions run only upwards from a byte that is flagged).
    fn special(word: u64) -> u64 {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        let zero_in = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
        let quote = zero_in(word ^ (ONES * u64::from(b'"')));
        let backslash = zero_in(word ^ (ONES * u64::from(b'\\')));
        let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
        quote | backslash | control
    }
}

struct Builder<'t> {
    /// The text being parsed: borrowed strings are spans of it.
    text: &'t str,
    nodes: Vec<Entry>,
    left: usize,
    over: bool,
    duplicate: Option<String>,
}

impl Builder<'_> {
    /// Charge `bytes` and a value, as [`super::parse`]'s `Budgeted` does.
    fn charge<E: de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        match self.left.checked_sub(bytes.saturating_add(NODE_BYTES)) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.over = true;
                Err(E::custom("over budget"))
            }
        }
    }

    fn push(&mut self, key: Option<Str>, kind: Kind) -> usize {
        let at = self.nodes.len();
        self.nodes.push(Entry {
            key: key.unwrap_or(Str::Span { start: 0, len: 0 }),
            kind,
            end: (at + 1) as u32,
        });
        at
    }

    /// A string serde_json handed over: a span if it is part of the text.
    fn string(&self, text: &str, borrowed: bool) -> Str {
        if borrowed {
            let start = (text.as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize);
            if let (Ok(start), Ok(len)) = (u32::try_from(start), u32::try_from(text.len())) {
                return Str::Span { start, len };
            }
        }
        Str::Owned(text.into())
    }
}

/// The nodes of `text` as serde_json reads it: every error, and whatever
/// [`fast::parse`] leaves.
fn parse_serde(text: &str, budget: usize) -> Result<Vec<Entry>, ParseError> {
    let mut builder = Builder {
        text,
        nodes: Vec::with_capacity(text.len() / 16 + 1),
        left: budget,
        over: false,
        duplicate: None,
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = Build {
        builder: &mut builder,
        key: None,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end());
    match parsed {
        Ok(()) => Ok(builder.nodes),
        Err(_) if builder.over => Err(ParseError::TooLarge { budget }),
        Err(_) if builder.duplicate.is_some() => Err(ParseError::DuplicateKey(
            builder.duplicate.unwrap_or_default(),
        )),
        Err(error) => Err(ParseError::Syntax(error.to_string())),
    }
}

/// Builds one value (with the key it has in its object, if any).
struct Build<'b, 't> {
    builder: &'b mut Builder<'t>,
    key: Option<Str>,
}

impl<'de> DeserializeSeed<'de> for Build<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.builder.charge(0)?;
        self.builder.push(self.key, Kind::Bool(v));
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.builder.charge(0)?;
        self.builder.push(self.key, Kind::Number(v.into()));
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.builder.charge(0)?;
        self.builder.push(self.key, Kind::Number(v.into()));
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.builder.charge(0)?;
        // Non-finite numbers cannot come from JSON text; `null` as serde_json.
        let kind = Number::from_f64(v).map_or(Kind::Null, Kind::Number);
        self.builder.push(self.key, kind);
        Ok(())
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<(), E> {
        self.builder.charge(v.len())?;
        let s = self.builder.string(v, true);
        self.builder.push(self.key, Kind::String(s));
        Ok(())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.builder.charge(v.len())?;
        self.builder
            .push(self.key, Kind::String(Str::Owned(v.into())));
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.builder.charge(0)?;
        self.builder.push(self.key, Kind::Null);
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let builder = self.builder;
        builder.charge(0)?;
        let at = builder.push(self.key, Kind::Array { len: 0 });
        let mut len = 0u32;
        while let Some(()) = seq.next_element_seed(Build {
            builder: &mut *builder,
            key: None,
        })? {
            len += 1;
        }
        let end = builder.nodes.len() as u32;
        if let Some(entry) = builder.nodes.get_mut(at) {
            entry.kind = Kind::Array { len };
            entry.end = end;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let builder = self.builder;
        builder.charge(0)?;
        let at = builder.push(
            self.key,
            Kind::Object {
                len: 0,
                index: None,
            },
        );
        let mut len = 0u32;
        while let Some(key) = map.next_key_seed(Key {
            builder: &mut *builder,
        })? {
            let node = if (len as usize).is_multiple_of(ENTRIES_PER_NODE) {
                MAP_NODE_BYTES
            } else {
                0
            };
            len += 1;
            let bytes = match &key {
                Str::Span { len, .. } => *len as usize,
                Str::Owned(s) => s.len(),
            };
            builder.charge(bytes.saturating_add(node))?;
            map.next_value_seed(Build {
                builder: &mut *builder,
                key: Some(key),
            })?;
        }
        let end = builder.nodes.len() as u32;
        let index = members_index(&builder.nodes, builder.text, at, end as usize, len);
        if let Some(duplicate) = index.as_ref().err() {
            builder.duplicate = Some(duplicate.clone());
            return Err(de::Error::custom("duplicate key"));
        }
        if let Some(entry) = builder.nodes.get_mut(at) {
            entry.kind = Kind::Object {
                len,
                index: index.ok().flatten(),
            };
            entry.end = end;
        }
        Ok(())
    }
}

/// For the object at `at` (its members before `end`): the sorted index a
/// large one gets, or the key found twice.
fn members_index(
    nodes: &[Entry],
    text: &str,
    at: usize,
    end: usize,
    len: u32,
) -> Result<Option<Box<[u32]>>, String> {
    let next = |position: usize| nodes.get(position).map_or(end, |e| e.end as usize);
    let key = |position: usize| nodes.get(position).map_or("", |e| str_in(text, &e.key));
    if len as usize <= INDEXED_MEMBERS {
        // Each key against those after it, with no allocation.
        let mut a = at + 1;
        while a < end {
            let mut b = next(a);
            while b < end {
                if key(a) == key(b) {
                    return Err(key(a).to_owned());
                }
                b = next(b);
            }
            a = next(a);
        }
        return Ok(None);
    }
    let mut members = Vec::with_capacity(len as usize);
    let mut member = at + 1;
    while member < end {
        members.push(member as u32);
        member = next(member);
    }
    members.sort_unstable_by(|a, b| key(*a as usize).cmp(key(*b as usize)));
    if let Some(pair) = members
        .windows(2)
        .find(|pair| key(pair[0] as usize) == key(pair[1] as usize))
    {
        return Err(key(pair[0] as usize).to_owned());
    }
    Ok(Some(members.into_boxed_slice()))
}

/// A member name.
struct Key<'b, 't> {
    builder: &'b mut Builder<'t>,
}

impl<'de> DeserializeSeed<'de> for Key<'_, '_> {
    type Value = Str;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Str, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_, '_> {
    type Value = Str;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Str, E> {
        Ok(self.builder.string(v, true))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Str, E> {
        Ok(Str::Owned(v.into()))
    }
}

// --- Reading the tree, for jsonschema ----------------------------------------

/// One value of a [`Tree`].
#[derive(Clone, Copy)]
pub struct Node<'a> {
    tree: &'a Tree,
    at: usize,
}

impl<'a> Node<'a> {
    fn entry(&self) -> Option<&'a Entry> {
        self.tree.nodes.get(self.at)
    }

    fn kind(&self) -> &'a Kind {
        self.entry().map_or(&Kind::Null, |e| &e.kind)
    }

    fn at(&self, at: usize) -> Node<'a> {
        Node {
            tree: self.tree,
            at,
        }
    }

    fn key(&self) -> &'a str {
        self.entry().map_or("", |e| self.tree.str(&e.key))
    }

    /// This value as a `Value`.
    fn value(&self) -> Value {
        match self.kind() {
            Kind::Null => Value::Null,
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Number(n) => Value::Number(n.clone()),
            Kind::String(s) => Value::String(self.tree.str(s).to_owned()),
            Kind::Array { .. } => Value::Array(
                self.tree
                    .children(self.at)
                    .map(|at| self.at(at).value())
                    .collect(),
            ),
            Kind::Object { .. } => Value::Object(
                self.tree
                    .children(self.at)
                    .map(|at| {
                        let member = self.at(at);
                        (member.key().to_owned(), member.value())
                    })
                    .collect::<Map<String, Value>>(),
            ),
        }
    }

    /// Whether this value equals `expected`, numbers mathematically (as
    /// jsonschema's `const` and `enum` compare), without building a `Value`.
    fn equals(&self, expected: &Value) -> bool {
        match (self.kind(), expected) {
            (Kind::Null, Value::Null) => true,
            (Kind::Bool(a), Value::Bool(b)) => a == b,
            (Kind::Number(a), Value::Number(b)) => schema_json::cmp::equal_numbers(&a, b),
            (Kind::String(a), Value::String(b)) => self.tree.str(a) == b,
            (Kind::Array { len }, Value::Array(items)) => {
                *len as usize == items.len()
                    && self
                        .tree
                        .children(self.at)
                        .zip(items)
                        .all(|(at, item)| self.at(at).equals(item))
            }
            (Kind::Object { len, .. }, Value::Object(members)) => {
                *len as usize == members.len()
                    && self.tree.children(self.at).all(|at| {
                        let member = self.at(at);
                        members
                            .get(member.key())
                            .is_some_and(|expected| member.equals(expected))
                    })
            }
            _ => false,
        }
    }

    /// The member named `key`, if this is an object.
    fn member(&self, key: &str) -> Option<Node<'a>> {
        let Kind::Object { index, .. } = self.kind() else {
            return None;
        };
        match index {
            Some(index) => index
                .binary_search_by(|at| self.at(*at as usize).key().cmp(key))
                .ok()
                .and_then(|i| index.get(i))
                .map(|at| self.at(*at as usize)),
            None => self
                .tree
                .children(self.at)
                .map(|at| self.at(at))
                .find(|member| member.key() == key),
        }
    }
}

/// jsonschema's custom representation for a [`Tree`].
pub struct TreeJson;

impl Json for TreeJson {
    type Node<'a> = Node<'a>;
    type PreparedKey = String;
    type StringBuffer = Tree;

    // No value is its own descendant.
    const ACYCLIC: bool = true;

    fn prepare_key(key: &str) -> String {
        key.to_owned()
    }

    fn with_string_node<T>(buffer: &mut Tree, string: &str, f: impl FnOnce(Node<'_>) -> T) -> T {
        buffer.text.clear();
        buffer.nodes.clear();
        buffer.nodes.push(Entry {
            key: Str::Span { start: 0, len: 0 },
            kind: Kind::String(Str::Owned(string.into())),
            end: 1,
        });
        f(buffer.root())
    }
}

impl<'a> schema_json::Node<'a, TreeJson> for Node<'a> {
    type Object = Node<'a>;
    type Array = Node<'a>;
    type Number = &'a Number;

    fn as_object(&self) -> Option<Node<'a>> {
        matches!(self.kind(), Kind::Object { .. }).then_some(*self)
    }

    fn as_array(&self) -> Option<Node<'a>> {
        matches!(self.kind(), Kind::Array { .. }).then_some(*self)
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self.kind() {
            Kind::String(s) => Some(Cow::Borrowed(self.tree.str(s))),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<&'a Number> {
        match self.kind() {
            Kind::Number(n) => Some(n),
            _ => None,
        }
    }

    fn as_boolean(&self) -> Option<bool> {
        match self.kind() {
            Kind::Bool(b) => Some(*b),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self.kind(), Kind::Null)
    }

    fn json_type(&self) -> JsonType {
        match self.kind() {
            Kind::Null => JsonType::Null,
            Kind::Bool(_) => JsonType::Boolean,
            Kind::Number(_) => JsonType::Number,
            Kind::String(_) => JsonType::String,
            Kind::Array { .. } => JsonType::Array,
            Kind::Object { .. } => JsonType::Object,
        }
    }

    fn equals_value(&self, expected: &Value) -> bool {
        self.equals(expected)
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(self.value())
    }

    fn identity(&self) -> Option<NodeIdentity> {
        // Each value's entry has an address of its own while the tree
        // lives; the tree is not changed while it is checked.
        self.entry()
            .map(|entry| NodeIdentity::new(std::ptr::from_ref(entry) as usize))
    }
}

/// A member of an object, by position.
pub struct Members<'a> {
    node: Node<'a>,
    children: Children<'a>,
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, Node<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let member = self.node.at(self.children.next()?);
        Some((member.key(), member))
    }
}

impl<'a> schema_json::Object<'a, TreeJson> for Node<'a> {
    type Node = Node<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        match self.kind() {
            Kind::Object { len, .. } => *len as usize,
            _ => 0,
        }
    }

    fn get(&self, key: &String) -> Option<Node<'a>> {
        self.member(key)
    }

    fn members(&self) -> Members<'a> {
        Members {
            node: *self,
            children: self.tree.children(self.at),
        }
    }
}

/// The values of an array.
pub struct Elements<'a> {
    node: Node<'a>,
    children: Children<'a>,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Node<'a>;

    fn next(&mut self) -> Option<Node<'a>> {
        Some(self.node.at(self.children.next()?))
    }
}

impl<'a> schema_json::Array<'a, TreeJson> for Node<'a> {
    type Node = Node<'a>;
    type ElementsIter = Elements<'a>;

    fn len(&self) -> usize {
        match self.kind() {
            Kind::Array { len } => *len as usize,
            _ => 0,
        }
    }

    fn elements(&self) -> Elements<'a> {
        Elements {
            node: *self,
            children: self.tree.children(self.at),
        }
    }
}

#[cfg(test)]
mod tests {
    use jsonschema::json::{Array as _, Node as _, Object as _};
    use serde_json::json;

    use super::*;
    use crate::json::parse;

    const DOCUMENTS: &[&str] = &[
        r#"{"a": [1, "two\n", null, true, false], "b": {"c": 1.5, "d": -3}}"#,
        "{\n  \"z\": 1,\r\n\t\"a\": \"x\"\n}",
        r#"{"esc": "\"q\" \\ \/ \u00e9 \ud83d\ude00 \u0001", "plain": "日本"}"#,
        r#"{"n": [1E2, 1e-3, -0, 0.1, 18446744073709551615, -9223372036854775808, 123456789012345678901234567890]}"#,
        r#"{"deep": [[[[{"x": [[]]}]]]], "empty": {}, "nothing": []}"#,
        r#"[]"#,
        r#""just a string""#,
        "12",
    ];

    #[test]
    fn reads_as_serde_json_reads_and_writes_as_it_writes() {
        for text in DOCUMENTS {
            let expected: Value = serde_json::from_str(text).expect("JSON");
            let tree = Tree::parse((*text).to_owned(), usize::MAX).expect("parses");
            assert_eq!(tree.to_value(), expected, "{text}");
            assert!(tree.root().equals(&expected));
            let written = tree.to_text();
            // Compact: no line break can split a stdio reply.
            assert!(!written.contains(['\n', '\r']), "{written}");
            let reread: Value = serde_json::from_str(&written).expect("JSON");
            assert_eq!(reread, expected, "{written}");
            // With the keys in serde_json's order, the very same text.
            let sorted = Tree::parse(expected.to_string(), usize::MAX).expect("parses");
            assert_eq!(
                sorted.to_text(),
                serde_json::to_string(&expected).expect("text")
            );
        }
    }

    /// Texts near JSON: every document above and the texts in between,
    /// mutated a character at a time (a cheap, seeded generator).
    fn mutations() -> Vec<String> {
        let pieces = [
            "\"",
            "\\",
            "\\u",
            "\\ud83d",
            "\\udc00",
            "0",
            "-",
            "-0",
            "1",
            ".",
            "e",
            "E",
            "+",
            ",",
            ":",
            "{",
            "}",
            "[",
            "]",
            " ",
            "\n",
            "\u{1}",
            "\u{7f}",
            "é",
            "true",
            "nul",
            "18446744073709551616",
            "9223372036854775808",
            "\"a\":1",
            "\\n",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut texts = Vec::new();
        for seed in DOCUMENTS {
            for _ in 0..400 {
                let mut chars: Vec<char> = seed.chars().collect();
                for _ in 0..1 + next(3) {
                    let at = next(chars.len() + 1);
                    match next(3) {
                        0 if at < chars.len() => {
                            chars.remove(at);
                        }
                        1 if at < chars.len() => {
                            chars.splice(at..=at, pieces[next(pieces.len())].chars());
                        }
                        _ => {
                            chars.splice(at..at, pieces[next(pieces.len())].chars());
                        }
                    }
                }
                texts.push(chars.into_iter().collect());
            }
        }
        texts
    }

    #[test]
    fn the_fast_parser_takes_only_what_serde_json_takes_and_reads_it_alike() {
        let mut taken = 0;
        let texts = mutations();
        for text in &texts {
            for budget in [usize::MAX, 300, 2_000] {
                let serde = parse_serde(text, budget);
                if let Some(nodes) = fast::parse(text, budget) {
                    taken += 1;
                    assert!(
                        serde.as_ref().is_ok_and(|s| *s == nodes),
                        "{text:?} within {budget}"
                    );
                }
            }
        }
        // Documents with no float in them are all its own.
        for text in DOCUMENTS
            .iter()
            .filter(|text| !text.contains(['.', 'E', 'e']))
        {
            let nodes = fast::parse(text, usize::MAX);
            assert!(nodes.is_some(), "{text}");
            assert_eq!(nodes, parse_serde(text, usize::MAX).ok());
        }
        // The generator makes plenty of both.
        assert!(taken > texts.len() / 10, "{taken} of {}", texts.len());
        assert!(
            taken < texts.len() * 3 * 9 / 10,
            "{taken} of {}",
            texts.len()
        );
    }

    #[test]
    fn keeps_the_guests_key_order() {
        let tree = Tree::parse(r#"{"b": 1, "a": 2}"#.into(), usize::MAX).expect("parses");
        assert_eq!(tree.to_text(), r#"{"b":1,"a":2}"#);
    }

    #[test]
    fn fits_its_budget_exactly_when_a_value_would() {
        for text in DOCUMENTS {
            let full = usize::MAX - parse_left(text);
            for budget in [0, full / 2, full - 1, full, full + 1] {
                assert_eq!(
                    Tree::parse((*text).to_owned(), budget).is_ok(),
                    parse(text, budget).is_ok(),
                    "{text} within {budget}"
                );
            }
        }
        // What `parse` refuses for its size, this refuses as too large.
        let zeros = format!("[{}0]", "0,".repeat(999));
        assert_eq!(
            Tree::parse(zeros, 1000 * NODE_BYTES),
            Err(ParseError::TooLarge {
                budget: 1000 * NODE_BYTES
            })
        );
    }

    /// The smallest budget `parse` accepts `text` within, as what it
    /// leaves of `usize::MAX`.
    fn parse_left(text: &str) -> usize {
        let (mut low, mut high) = (0usize, 1usize << 40);
        while low < high {
            let mid = low + (high - low) / 2;
            if parse(text, mid).is_ok() {
                high = mid;
            } else {
                low = mid + 1;
            }
        }
        usize::MAX - low
    }

    #[test]
    fn a_key_twice_is_refused_at_any_depth_and_size() {
        let small = r#"{"a": 1, "b": 2, "a": 3}"#;
        let nested = r#"{"x": [{"k": 1, "k": 1}]}"#;
        let members: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
        let large = format!("{{{}, \"k7\": 0}}", members.join(", "));
        // The same key once escaped and once not is still the same key.
        let escaped = r#"{"a": 1, "\u0061": 2}"#;
        for text in [small, nested, &large, escaped] {
            assert!(
                matches!(
                    Tree::parse(text.to_owned(), usize::MAX),
                    Err(ParseError::DuplicateKey(_))
                ),
                "{text}"
            );
        }
        assert_eq!(
            Tree::parse(small.to_owned(), usize::MAX),
            Err(ParseError::DuplicateKey("a".into()))
        );
        // Unique keys in a large object are found through its index.
        let unique = format!("{{{}}}", members.join(", "));
        let tree = Tree::parse(unique, usize::MAX).expect("parses");
        let root = tree.root();
        let object = root.as_object().expect("object");
        assert_eq!(jsonschema::json::Object::len(&object), 40);
        for i in 0..40 {
            let member = object.get(&format!("k{i}")).expect("present");
            assert_eq!(member.as_number().and_then(|n| n.as_u64()), Some(i));
        }
        assert!(object.get(&"k40".to_owned()).is_none());
        assert_eq!(object.members().count(), 40);
    }

    #[test]
    fn bad_text_is_a_syntax_error() {
        for text in ["{", r#"{"a": }"#, "[1,]", "{} {}", r#""\ud800""#, "nul", ""] {
            assert!(
                matches!(
                    Tree::parse(text.to_owned(), usize::MAX),
                    Err(ParseError::Syntax(_))
                ),
                "{text}"
            );
        }
        // Nesting is limited as serde_json limits it.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(Tree::parse(deep, usize::MAX).is_err());
    }

    #[test]
    fn nodes_read_as_jsonschema_expects() {
        let text = r#"{"s": "héllo", "a": [1, {"b": null}], "t": true, "n": 2.5}"#;
        let tree = Tree::parse(text.to_owned(), usize::MAX).expect("parses");
        let root = tree.root();
        assert_eq!(root.json_type(), JsonType::Object);
        let object = root.as_object().expect("object");
        let get = |key: &str| object.get(&key.to_owned()).expect("present");
        assert_eq!(get("s").as_string().as_deref(), Some("héllo"));
        assert_eq!(get("s").string_length(), Some(5));
        assert_eq!(get("t").as_boolean(), Some(true));
        assert_eq!(get("n").as_number().and_then(|n| n.as_f64()), Some(2.5));
        let array = get("a").as_array().expect("array");
        assert_eq!(jsonschema::json::Array::len(&array), 2);
        let elements: Vec<_> = array
            .elements()
            .map(|e| e.to_value().into_owned())
            .collect();
        assert_eq!(elements, vec![json!(1), json!({"b": null})]);
        // Every node has an identity of its own.
        let ids: std::collections::HashSet<_> = object
            .members()
            .map(|(_, node)| node.identity())
            .chain(array.elements().map(|node| node.identity()))
            .collect();
        assert_eq!(ids.len(), 6);
        assert!(get("a").equals_value(&json!([1.0, {"b": null}])));
        assert!(!get("a").equals_value(&json!([1, {"b": 0}])));
        assert!(!root.equals_value(&json!({"s": "héllo"})));
    }
}
