//! Every output is compared with serde_json's for the same value.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::{Value, json};

use super::*;

/// Both serialisers agree on `value`, output and error alike.
fn same<T: Serialize + ?Sized + std::fmt::Debug>(value: &T) {
    let ours = to_vec(value).map_err(|e| e.to_string());
    // Written into a `String`, the same bytes.
    assert_eq!(
        to_string(value).map(String::into_bytes).ok(),
        ours.clone().ok(),
        "to_string for {value:?}"
    );
    let theirs = serde_json::to_vec(value).map_err(|e| e.to_string());
    match (&ours, &theirs) {
        (Ok(a), Ok(b)) => assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "for {value:?}"
        ),
        (Err(_), Err(_)) => {}
        _ => panic!("for {value:?}: ours {ours:?}, serde_json's {theirs:?}"),
    }
}

/// A small deterministic generator (xorshift), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// A string mixing clean runs, every escaped byte, and multi-byte
    /// characters, at every offset from a word's start.
    fn text(&mut self) -> String {
        const PIECES: &[&str] = &[
            "a",
            "plain text ",
            "\"",
            "\\",
            "\n",
            "\r",
            "\t",
            "\u{8}",
            "\u{c}",
            "\u{0}",
            "\u{1f}",
            "\u{7f}",
            "é",
            "€",
            "😀",
            "/",
            "<>&'",
            "0123456789",
        ];
        let len = self.below(40);
        (0..len)
            .map(|_| PIECES[self.below(PIECES.len() as u64) as usize])
            .collect()
    }
    fn value(&mut self, depth: u32) -> Value {
        let kinds = if depth == 0 { 6 } else { 8 };
        match self.below(kinds) {
            0 => Value::Null,
            1 => Value::Bool(self.below(2) == 1),
            2 => json!(self.next() as i64),
            3 => json!(self.next() >> self.below(64)),
            4 => json!(f64::from_bits(self.next())),
            5 => Value::String(self.text()),
            6 => Value::Array((0..self.below(5)).map(|_| self.value(depth - 1)).collect()),
            _ => Value::Object(
                (0..self.below(5))
                    .map(|_| (self.text(), self.value(depth - 1)))
                    .collect(),
            ),
        }
    }
}

#[test]
fn every_byte_alone_and_in_every_position_of_a_word() {
    for b in 0..=0x7fu8 {
        let c = char::from(b).to_string();
        same(&c);
        for before in 0..17 {
            let text = format!("{}{c}{}", "x".repeat(before), "y".repeat(17 - before));
            same(&text);
            assert_eq!(escaped_len(&text), serde_json::to_vec(&text).unwrap().len());
        }
    }
}

#[test]
fn every_byte_at_every_position_of_every_short_length() {
    // The last word of a text is read short, padded: every length of the
    // part past the last whole word, every position in it, every ASCII
    // byte, and with a second byte to escape after it and non-ASCII text
    // around it.
    for len in 1..=17 {
        for at in 0..len {
            for b in 0..=0x7fu8 {
                let mut text: Vec<char> = "x".repeat(len).chars().collect();
                text[at] = char::from(b);
                let plain: String = text.iter().collect();
                same(&plain);
                assert_eq!(
                    escaped_len(&plain),
                    serde_json::to_vec(&plain).unwrap().len()
                );
                if at + 1 < len {
                    text[at + 1] = '"';
                }
                text[0] = if at == 0 { text[0] } else { '\u{e9}' };
                let mixed: String = text.iter().chain(['\u{1f600}'].iter()).collect();
                same(&mixed);
                assert_eq!(
                    escaped_len(&mixed),
                    serde_json::to_vec(&mixed).unwrap().len()
                );
            }
        }
    }
}

#[test]
fn generated_values_match_serde_json() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let value = rng.value(3);
        same(&value);
        if let Value::String(text) = &value {
            assert_eq!(escaped_len(text), serde_json::to_vec(text).unwrap().len());
        }
    }
}

#[test]
fn long_texts_match_serde_json() {
    let mut rng = Rng(7);
    for len in [0, 1, 7, 8, 9, 15, 16, 17, 1024, 65_537] {
        let clean = "x".repeat(len);
        same(&clean);
        assert_eq!(escaped_len(&clean), len + 2);
        let mixed: String = (0..len / 8 + 1).map(|_| rng.text()).collect();
        same(&mixed);
        assert_eq!(
            escaped_len(&mixed),
            serde_json::to_vec(&mixed).unwrap().len()
        );
    }
}

#[derive(Debug, Serialize)]
struct Unit;

#[derive(Debug, Serialize)]
struct Newtype(String);

#[derive(Debug, Serialize)]
struct Tuple(u8, char, Option<i32>);

#[derive(Debug, Serialize)]
enum Kind {
    Unit,
    Newtype(Vec<u16>),
    Tuple(i8, f32),
    Struct {
        #[serde(rename = "we\"ird")]
        name: &'static str,
        skipped: Option<()>,
    },
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum Tagged {
    TextItem { text: String },
    Other,
}

#[derive(Debug, Serialize)]
struct Everything {
    unit: Unit,
    unit_value: (),
    newtype: Newtype,
    tuple: Tuple,
    kinds: Vec<Kind>,
    tagged: Vec<Tagged>,
    #[serde(skip_serializing_if = "Option::is_none")]
    absent: Option<u8>,
    present: Option<u8>,
    big: (i128, u128),
    floats: (f32, f64, f64, f64, f32),
    #[serde(with = "bytes")]
    bytes: Vec<u8>,
    ints_as_keys: BTreeMap<i64, bool>,
    bools_as_keys: BTreeMap<bool, u8>,
    chars_as_keys: BTreeMap<char, u8>,
    units_as_keys: BTreeMap<Key, u8>,
    flattened: HashMap<String, Value>,
}

#[derive(Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    First,
    Second,
}

mod bytes {
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }
}

#[test]
fn every_kind_of_serde_data_matches_serde_json() {
    let everything = Everything {
        unit: Unit,
        unit_value: (),
        newtype: Newtype("new\ttype".into()),
        tuple: Tuple(7, '"', None),
        kinds: vec![
            Kind::Unit,
            Kind::Newtype(vec![1, 2, 3]),
            Kind::Newtype(vec![]),
            Kind::Tuple(-1, 1.5),
            Kind::Struct {
                name: "n",
                skipped: None,
            },
        ],
        tagged: vec![
            Tagged::TextItem {
                text: "line\nline".into(),
            },
            Tagged::Other,
        ],
        absent: None,
        present: Some(0),
        big: (i128::MIN, u128::MAX),
        floats: (0.1, 1e300, -0.0, f64::NAN, f32::INFINITY),
        bytes: vec![0, 255, 34],
        ints_as_keys: [(-5, true), (7, false)].into(),
        bools_as_keys: [(true, 1), (false, 0)].into(),
        chars_as_keys: [('\n', 1), ('a', 2)].into(),
        units_as_keys: [(Key::First, 1), (Key::Second, 2)].into(),
        flattened: [("k".to_string(), json!({"a": [1, "b", null]}))].into(),
    };
    same(&everything);
    same(&Vec::<Value>::new());
    same(&json!({}));
    same(&(1u8,));
    same(&Some("x"));
    same(&None::<u8>);
}

#[test]
fn keys_that_are_not_strings_fail_as_with_serde_json() {
    #[derive(Debug, Serialize, PartialEq, Eq, Hash)]
    struct Composite(u8, u8);
    let composite: HashMap<Composite, u8> = [(Composite(1, 2), 3)].into();
    same(&composite);
    let vec_keys: BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into();
    same(&vec_keys);
    let unit_keys: BTreeMap<(), u8> = [((), 1)].into();
    same(&unit_keys);
    let option_keys: BTreeMap<Option<u8>, u8> = [(Some(1), 1)].into();
    same(&option_keys);
    let none_keys: BTreeMap<Option<u8>, u8> = [(None, 1)].into();
    same(&none_keys);
    for f in [1.5f64, f64::NAN, f64::INFINITY] {
        let mut out = Vec::new();
        let mut map = serde_json::Serializer::new(&mut out);
        let theirs = {
            use serde::ser::{SerializeMap, Serializer as _};
            let mut m = (&mut map).serialize_map(Some(1)).unwrap();
            m.serialize_entry(&f, &1).and_then(|()| m.end())
        };
        let mut ours_out = Vec::new();
        let ours = {
            use serde::ser::{SerializeMap, Serializer as _};
            let mut m = Serializer { out: &mut ours_out }
                .serialize_map(Some(1))
                .unwrap();
            m.serialize_entry(&f, &1).and_then(|()| m.end())
        };
        assert_eq!(ours.is_ok(), theirs.is_ok(), "float key {f}");
        if ours.is_ok() {
            assert_eq!(ours_out, out, "float key {f}");
        }
    }
}

#[test]
fn write_str_appends() {
    let mut out = b"[".to_vec();
    write_str(&mut out, "a\"b");
    assert_eq!(out, br#"["a\"b""#);
}
