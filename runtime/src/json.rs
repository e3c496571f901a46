//! JSON from untrusted sources, with its cost counted before it is paid.
//!
//! A guest's structured output, the schema of an elicitation it asks for, a
//! tool's descriptors: all JSON text the host parses on behalf of someone it
//! does not trust. Parsed naively, `[0,0,0,…]` takes sixteen times its text
//! in host memory, and an escaped string grows sixfold on the wire. This
//! module is the one place that parses such text, under a byte budget for
//! the parsed form, and measures strings as they will be sent.
//!
//! Rules, in one place:
//! - [`parse`] charges every value it builds against its budget before
//!   building it ([`NODE_BYTES`] per value, plus the bytes of each string and
//!   key, plus [`MAP_NODE_BYTES`] per B-tree node a map may need), and fails
//!   at the first value over budget: the parsed form never takes more host
//!   memory than the budget, whatever the text.
//! - Nesting is limited by serde_json's recursion limit (128), so parsing
//!   never recurses deeper than that.
//! - [`escaped_len`] is the length of a string once JSON-encoded (quotes and
//!   escapes included), as serde_json writes it.
//!
//! It also serialises replies ([`with_serialized`], [`to_vec`]) through a
//! buffer each thread keeps, so that a reply does not grow a fresh one.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};

/// What one parsed value costs besides its string bytes: a `Value` is 32
/// bytes, in an array's buffer that may be up to twice its length.
pub const NODE_BYTES: usize = 64;

/// What a map pays for its B-tree (serde_json's `Map` is a `BTreeMap`):
/// one node, the size of an internal node (11 keys, 11 values, 12 edges),
/// for its first entry and for every [`ENTRIES_PER_NODE`] after. A node
/// other than the root holds at least that many entries, so this bounds
/// the tree from above. A one-entry map takes a whole node: `{"a":0}`,
/// 7 bytes of text, takes over 700 bytes parsed, which a charge per value
/// alone (as this module once made) missed by ten times.
pub const MAP_NODE_BYTES: usize =
    11 * (size_of::<String>() + size_of::<Value>()) + 12 * size_of::<usize>() + 16;

/// Entries a B-tree node other than the root holds at least (`B - 1`).
pub const ENTRIES_PER_NODE: usize = 5;

/// Why untrusted JSON was not parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The text is not JSON (the parser's message, with line and column).
    #[error("{0}")]
    Syntax(String),
    /// An object has the key twice ([`parse_unique`]).
    #[error("an object has the key {0:?} twice")]
    DuplicateKey(String),
    /// Parsed, it would take more host memory than the budget.
    #[error("its parsed form would take more than {budget} bytes of host memory")]
    TooLarge {
        /// The budget, in bytes.
        budget: usize,
    },
}

/// Parse `text` into a [`Value`] whose host memory stays within `budget`
/// bytes (as counted by [`NODE_BYTES`] and string lengths).
///
/// # Errors
///
/// The text is not JSON, or its parsed form would exceed the budget.
pub fn parse(text: &str, budget: usize) -> Result<Value, ParseError> {
    parse_with(text, budget, false)
}

/// [`parse`], refusing an object with a key twice: for text whose parsed
/// form is checked and then sent on (a guest's structured output). A
/// `Value` keeps the last of the two; a client's parser may keep the
/// first, and read a value the check never saw.
///
/// # Errors
///
/// As [`parse`], or an object has a key twice.
pub fn parse_unique(text: &str, budget: usize) -> Result<Value, ParseError> {
    parse_with(text, budget, true)
}

fn parse_with(text: &str, budget: usize, unique: bool) -> Result<Value, ParseError> {
    let mut left = budget;
    let mut over = false;
    let mut duplicate = None;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Budgeted {
        left: &mut left,
        over: &mut over,
        duplicate: unique.then_some(&mut duplicate),
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value));
    match value {
        Ok(value) => Ok(value),
        // The budget error travels as a custom serde error; `over` says
        // whether it was ours.
        Err(_) if over => Err(ParseError::TooLarge { budget }),
        // Likewise `duplicate` for a key twice.
        Err(error) => Err(match duplicate {
            Some(key) => ParseError::DuplicateKey(key),
            None => ParseError::Syntax(error.to_string()),
        }),
    }
}

/// The length of a text once JSON-encoded as serde_json encodes it, quotes
/// included, counted eight bytes at a time.
pub use toolcage_json::escaped_len;

/// Serialise `value` and hand its JSON text to `take`, from a buffer this
/// thread keeps between calls (up to [`KEPT_BUFFER_BYTES`] of it). A reply
/// serialised into a fresh `Vec` grows it several times, and each
/// `realloc` takes malloc's arena lock, which under load the other worker
/// thread often holds (`docs/benchmarks.md`, round five). Should `take`
/// serialise again, that inner call uses a buffer of its own.
///
/// # Errors
///
/// `value` cannot be serialised (`take` is not called).
pub fn with_serialized<T: serde::Serialize + ?Sized, R>(
    value: &T,
    take: impl FnOnce(&[u8]) -> R,
) -> serde_json::Result<R> {
    SCRATCH.with(|scratch| {
        let Ok(mut buffer) = scratch.try_borrow_mut() else {
            // Called from within `take`: a buffer of its own.
            return toolcage_json::to_vec(value).map(|bytes| take(&bytes));
        };
        buffer.clear();
        let serialized = toolcage_json::to_writer(&mut *buffer, value).map(|()| take(&buffer));
        if buffer.capacity() > KEPT_BUFFER_BYTES {
            *buffer = Vec::new();
        }
        serialized
    })
}

/// `value` as JSON text in a `Vec` of exactly its length (one allocation;
/// see [`with_serialized`]).
///
/// # Errors
///
/// `value` cannot be serialised.
pub fn to_vec<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    with_serialized(value, <[u8]>::to_vec)
}

/// `value` as JSON text, in one allocation of its length. A `Value`
/// always serialises (its keys are strings), so there is no error to
/// return.
pub fn value_text(value: &Value) -> String {
    with_serialized(value, |bytes| String::from_utf8_lossy(bytes).into_owned()).unwrap_or_default()
}

/// The most a serialisation buffer keeps between uses: a 16 MiB reply
/// leaves no 16 MiB buffer behind.
pub const KEPT_BUFFER_BYTES: usize = 64 * 1024;

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The length of `bytes` once base64-encoded (standard, padded), quotes
/// included.
pub fn base64_len(bytes: usize) -> usize {
    bytes.div_ceil(3) * 4 + 2
}

/// A [`Value`] deserialiser that charges `left` for everything it builds,
/// and sets `over` when it runs out (so that [`parse`] can tell its own
/// error from the parser's).
struct Budgeted<'a> {
    left: &'a mut usize,
    over: &'a mut bool,
    /// Where a key found twice goes, when that is refused.
    duplicate: Option<&'a mut Option<String>>,
}

impl Budgeted<'_> {
    fn charge<E: de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        match self.left.checked_sub(bytes.saturating_add(NODE_BYTES)) {
            Some(left) => {
                *self.left = left;
                Ok(())
            }
            None => {
                *self.over = true;
                Err(E::custom("over budget"))
            }
        }
    }

    fn reborrow(&mut self) -> Budgeted<'_> {
        Budgeted {
            left: &mut *self.left,
            over: &mut *self.over,
            duplicate: self.duplicate.as_deref_mut(),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Budgeted<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Budgeted<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<Value, E> {
        self.charge(0)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<Value, E> {
        self.charge(0)?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<Value, E> {
        self.charge(0)?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<Value, E> {
        self.charge(0)?;
        // Non-finite numbers cannot come from JSON text; `Null` as serde_json.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<Value, E> {
        self.charge(v.len())?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(mut self, v: String) -> Result<Value, E> {
        self.charge(v.len())?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<Value, E> {
        self.charge(0)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        self.charge(0)?;
        // Gathered on the stack first: the array's buffer is then allocated
        // once, at its size, where a growing `Vec` is reallocated at its
        // fifth item and its ninth (and a `realloc` takes the lock of the
        // arena that owns the buffer, often the other worker's).
        let mut items = smallvec::SmallVec::<[Value; 8]>::new();
        while let Some(item) = seq.next_element_seed(self.reborrow())? {
            items.push(item);
        }
        Ok(Value::Array(items.into_vec()))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        self.charge(0)?;
        let mut object = Map::new();
        let mut entries = 0usize;
        while let Some(key) = map.next_key::<String>()? {
            let node = if entries.is_multiple_of(ENTRIES_PER_NODE) {
                MAP_NODE_BYTES
            } else {
                0
            };
            entries += 1;
            self.charge(key.len().saturating_add(node))?;
            // One lookup a key: a key seen before is refused (when asked)
            // or its value replaced, as serde_json's own `Value` does.
            match object.entry(key) {
                Entry::Occupied(mut seen) => {
                    if let Some(found) = self.duplicate.as_deref_mut() {
                        *found = Some(seen.key().clone());
                        return Err(de::Error::custom("duplicate key"));
                    }
                    seen.insert(map.next_value_seed(self.reborrow())?);
                }
                Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(self.reborrow())?);
                }
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialised_text_is_the_same_and_no_large_buffer_stays() {
        let values = [
            serde_json::json!({"a": [1, "two\n", null], "b": {"c": 1.5}}),
            Value::String("x".repeat(4 * KEPT_BUFFER_BYTES)),
            serde_json::json!([]),
        ];
        for value in &values {
            let expected = serde_json::to_vec(value).expect("serialisable");
            assert_eq!(to_vec(value).expect("serialisable"), expected);
            assert_eq!(
                with_serialized(value, <[u8]>::len).expect("serialisable"),
                expected.len()
            );
            assert!(SCRATCH.with_borrow(Vec::capacity) <= KEPT_BUFFER_BYTES);
        }
        assert_eq!(value_text(&values[0]), values[0].to_string());
        // Serialising again from within `take` works, with its own buffer.
        let nested = with_serialized(&values[0], |outer| {
            let inner = to_vec(&values[2]).expect("serialisable");
            (outer.to_vec(), inner)
        })
        .expect("serialisable");
        assert_eq!(
            nested,
            (
                serde_json::to_vec(&values[0]).expect("serialisable"),
                b"[]".to_vec()
            )
        );
    }

    #[test]
    fn a_value_that_cannot_be_serialised_is_an_error_and_take_is_not_called() {
        // A map with a non-string key is not JSON.
        let map = std::collections::BTreeMap::from([((1, 2), 3)]);
        let mut called = false;
        assert!(with_serialized(&map, |_| called = true).is_err());
        assert!(!called);
        assert!(to_vec(&map).is_err());
    }

    #[test]
    fn a_key_twice_is_refused_where_asked_at_any_depth() {
        let members: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
        let large = format!("{{{}, \"k7\": 0}}", members.join(", "));
        for (text, key) in [
            (r#"{"a": 1, "b": 2, "a": 3}"#, "a"),
            (r#"{"x": [{"k": 1, "k": 1}]}"#, "k"),
            (large.as_str(), "k7"),
            // Escaped or not, the same key.
            (r#"{"a": 1, "\u0061": 2}"#, "a"),
        ] {
            assert_eq!(
                parse_unique(text, usize::MAX),
                Err(ParseError::DuplicateKey(key.into())),
                "{text}"
            );
            // The plain parse keeps the last, as serde_json does.
            assert!(parse(text, usize::MAX).is_ok(), "{text}");
        }
        let unique = format!("{{{}}}", members.join(", "));
        assert_eq!(
            parse_unique(&unique, usize::MAX),
            parse(&unique, usize::MAX)
        );
        // A syntax error is still one.
        assert!(matches!(
            parse_unique(r#"{"a": 1,"#, usize::MAX),
            Err(ParseError::Syntax(_))
        ));
    }

    #[test]
    fn parses_within_the_budget_and_refuses_beyond_it() {
        let value = parse(r#"{"a": [1, "two", null, true], "b": {"c": 1.5}}"#, 4096).expect("ok");
        assert_eq!(
            value,
            serde_json::json!({"a": [1, "two", null, true], "b": {"c": 1.5}})
        );
        // A thousand zeros: 2 KB of text, 64 KB parsed.
        let zeros = format!("[{}0]", "0,".repeat(999));
        assert!(parse(&zeros, 1001 * NODE_BYTES).is_ok());
        assert_eq!(
            parse(&zeros, 1000 * NODE_BYTES),
            Err(ParseError::TooLarge {
                budget: 1000 * NODE_BYTES
            })
        );
        // Strings count their bytes.
        let long = format!("\"{}\"", "x".repeat(10_000));
        assert!(parse(&long, 10_000).is_err());
        assert!(parse(&long, 10_000 + NODE_BYTES).is_ok());
        // A map pays a B-tree node for its first entry and every fifth
        // after: a thousand one-entry maps take a thousand nodes.
        let maps = format!("[{}{{\"a\":0}}]", "{\"a\":0},".repeat(999));
        let cost = NODE_BYTES + 1000 * (3 * NODE_BYTES + MAP_NODE_BYTES + 1);
        assert!(parse(&maps, cost).is_ok());
        assert!(parse(&maps, cost - 1).is_err());
        const { assert!(MAP_NODE_BYTES >= 700) };
        let wide = format!(
            "{{{}}}",
            (0..10)
                .map(|i| format!("\"k{i}\":0"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let cost = NODE_BYTES + 2 * MAP_NODE_BYTES + 10 * (2 + 2 * NODE_BYTES);
        assert!(parse(&wide, cost).is_ok());
        assert!(parse(&wide, cost - 1).is_err());
    }

    #[test]
    fn syntax_errors_and_depth_are_the_parsers() {
        assert!(matches!(parse("{", 1 << 20), Err(ParseError::Syntax(_))));
        assert!(matches!(
            parse("[1] x", 1 << 20),
            Err(ParseError::Syntax(_))
        ));
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        match parse(&deep, usize::MAX) {
            Err(ParseError::Syntax(message)) => assert!(message.contains("recursion"), "{message}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn escaped_lengths_match_serde_json() {
        for text in [
            "",
            "plain",
            "quote\"back\\",
            "\n\t\r\u{8}\u{c}",
            "\u{1}\u{1f}",
            "é ✓",
        ] {
            let encoded = serde_json::to_string(text).expect("encode");
            assert_eq!(escaped_len(text), encoded.len(), "{text:?}");
        }
        assert_eq!(base64_len(0), 2);
        assert_eq!(base64_len(4), 10);
    }
}
