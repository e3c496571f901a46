//! JSON to component values and back, along a [`Shape`].
//!
//! Arguments are checked against the tool's input schema before they get
//! here, but the conversion does not rely on it: every mismatch is an
//! error that names the path and the expected type
//! (`$.options.limit: expected an integer in 0..=255, got 300`).
//! Results go the other way as JSON text, never as a `Value` tree: one
//! walk ([`write_json`]) first measures the text ([`Measure`], stopping at
//! a cap) and then, for a result that fits, writes it ([`Text`]).
//! Both directions recurse along the shape, so at most
//! [`super::shape::MAX_DEPTH`] deep.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value};
use wasmtime::component::Val;

use super::shape::{Case, Field, Int, Shape};

/// Where in the arguments a value is: rendered only for an error.
#[derive(Clone, Copy)]
pub enum At<'a> {
    /// The arguments object.
    Root,
    /// Member `name` of the parent.
    Key(&'a At<'a>, &'a str),
    /// Item `index` of the parent.
    Index(&'a At<'a>, usize),
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Root => f.write_str("$"),
            At::Key(parent, name) => {
                let plain = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                if plain {
                    write!(f, "{parent}.{name}")
                } else {
                    write!(f, "{parent}[{}]", Value::String((*name).to_owned()))
                }
            }
            At::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// A short description of a JSON value, for an error: `300`, `"abc"`,
/// `an object`.
fn got(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() <= 32 => Value::String(s.clone()).to_string(),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn mismatch(at: At<'_>, expected: &str, value: &Value) -> String {
    format!("{at}: expected {expected}, got {}", got(value))
}

/// The parameters of a function, from the arguments object.
pub fn params(
    params: &[(String, std::sync::Arc<Shape>)],
    arguments: &Map<String, Value>,
) -> Result<Vec<Val>, String> {
    if let Some(unknown) = arguments
        .keys()
        .find(|key| !params.iter().any(|(name, _)| name == *key))
    {
        let known: Vec<&str> = params.iter().map(|(name, _)| name.as_str()).collect();
        return Err(if known.is_empty() {
            format!("unknown argument `{unknown}`: the function takes no arguments")
        } else {
            format!(
                "unknown argument `{unknown}`: the function takes {}",
                known.join(", ")
            )
        });
    }
    params
        .iter()
        .map(|(name, shape)| member(At::Root, name, shape, arguments.get(name)))
        .collect()
}

/// A parameter or record field `name` of `shape`, present or not.
fn member(parent: At<'_>, name: &str, shape: &Shape, value: Option<&Value>) -> Result<Val, String> {
    let at = At::Key(&parent, name);
    match (value, shape) {
        (None, Shape::Option(_)) => Ok(Val::Option(None)),
        (None, _) => Err(format!("{at}: missing (required)")),
        (Some(value), shape) => to_val(at, shape, value),
    }
}

/// `value` as a component value of `shape`.
pub fn to_val(at: At<'_>, shape: &Shape, value: &Value) -> Result<Val, String> {
    Ok(match shape {
        Shape::Bool => Val::Bool(
            value
                .as_bool()
                .ok_or_else(|| mismatch(at, "a boolean", value))?,
        ),
        Shape::Int(int) => int_val(at, *int, value)?,
        Shape::F32 => {
            let n = float(at, value)?;
            #[allow(clippy::cast_possible_truncation)]
            let narrow = n as f32;
            if narrow.is_infinite() {
                return Err(mismatch(at, "a number within the range of f32", value));
            }
            Val::Float32(narrow)
        }
        Shape::F64 => Val::Float64(float(at, value)?),
        Shape::Char => {
            let text = value
                .as_str()
                .ok_or_else(|| mismatch(at, "a one-character string", value))?;
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Val::Char(c),
                _ => return Err(mismatch(at, "a string of exactly one character", value)),
            }
        }
        Shape::String => Val::String(
            value
                .as_str()
                .ok_or_else(|| mismatch(at, "a string", value))?
                .to_owned(),
        ),
        Shape::Bytes => Val::List(bytes(at, value)?.into_iter().map(Val::U8).collect()),
        Shape::List(item) => Val::List(items(at, item, value, None)?),
        Shape::FixedList(item, n) => Val::FixedLengthList(items(at, item, value, Some(*n))?),
        Shape::Option(inner) => match value {
            Value::Null => Val::Option(None),
            value => Val::Option(Some(Box::new(to_val(at, inner, value)?))),
        },
        Shape::Record { fields, .. } => record(at, fields, value)?,
        Shape::Tuple(shapes) => {
            let list = value
                .as_array()
                .filter(|list| list.len() == shapes.len())
                .ok_or_else(|| {
                    mismatch(at, &format!("an array of {} items", shapes.len()), value)
                })?;
            Val::Tuple(
                shapes
                    .iter()
                    .zip(list)
                    .enumerate()
                    .map(|(i, (shape, item))| to_val(At::Index(&at, i), shape, item))
                    .collect::<Result<_, _>>()?,
            )
        }
        Shape::Enum { cases, .. } => match value.as_str() {
            Some(case) if cases.iter().any(|c| c == case) => Val::Enum(case.to_owned()),
            _ => return Err(mismatch(at, &one_of(cases.iter()), value)),
        },
        Shape::Flags { names, .. } => {
            let list = value
                .as_array()
                .ok_or_else(|| mismatch(at, "an array of flag names", value))?;
            let mut set: Vec<String> = Vec::with_capacity(list.len());
            for (i, item) in list.iter().enumerate() {
                match item.as_str() {
                    Some(flag) if names.iter().any(|n| n == flag) => {
                        if set.iter().any(|f| f == flag) {
                            return Err(format!(
                                "{}: flag `{flag}` given twice",
                                At::Index(&at, i)
                            ));
                        }
                        set.push(flag.to_owned());
                    }
                    _ => return Err(mismatch(At::Index(&at, i), &one_of(names.iter()), item)),
                }
            }
            Val::Flags(set)
        }
        Shape::Variant { cases, .. } => {
            let (name, payload) = case(
                at,
                cases.iter().map(|c| (&c.name, c.shape.as_deref())),
                value,
            )?;
            Val::Variant(name, payload)
        }
        Shape::Result { ok, err } => {
            let cases = [("ok", ok.as_deref()), ("err", err.as_deref())];
            let (name, payload) = case(at, cases.iter().map(|(n, s)| (*n, *s)), value)?;
            Val::Result(if name == "ok" {
                Ok(payload)
            } else {
                Err(payload)
            })
        }
        Shape::Map(key, item) => map(at, key, item, value)?,
    })
}

fn int_val(at: At<'_>, int: Int, value: &Value) -> Result<Val, String> {
    let (min, max) = int.bounds();
    let expected = || format!("an integer in {min}..={max} ({})", int.name());
    let n: i128 = match value {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into()
            } else if let Some(u) = n.as_u64() {
                u.into()
            } else {
                // A float: an integer only when it has no fraction and is
                // within the exact range of f64 integers.
                match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 => {
                        #[allow(clippy::cast_possible_truncation)]
                        let i = f as i64;
                        i.into()
                    }
                    _ => return Err(mismatch(at, &expected(), value)),
                }
            }
        }
        _ => return Err(mismatch(at, &expected(), value)),
    };
    if n < min || n > max {
        return Err(mismatch(at, &expected(), value));
    }
    // In range, so each conversion below succeeds.
    let fits =
        |r: Result<Val, std::num::TryFromIntError>| r.map_err(|_| mismatch(at, &expected(), value));
    fits(match int {
        Int::U8 => u8::try_from(n).map(Val::U8),
        Int::U16 => u16::try_from(n).map(Val::U16),
        Int::U32 => u32::try_from(n).map(Val::U32),
        Int::U64 => u64::try_from(n).map(Val::U64),
        Int::S8 => i8::try_from(n).map(Val::S8),
        Int::S16 => i16::try_from(n).map(Val::S16),
        Int::S32 => i32::try_from(n).map(Val::S32),
        Int::S64 => i64::try_from(n).map(Val::S64),
    })
}

fn float(at: At<'_>, value: &Value) -> Result<f64, String> {
    value
        .as_f64()
        .ok_or_else(|| mismatch(at, "a number", value))
}

fn bytes(at: At<'_>, value: &Value) -> Result<Vec<u8>, String> {
    match value {
        Value::String(text) => BASE64
            .decode(text)
            .map_err(|error| format!("{at}: expected base64 text: {error}")),
        Value::Array(list) => list
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_u64()
                    .and_then(|b| u8::try_from(b).ok())
                    .ok_or_else(|| mismatch(At::Index(&at, i), "a byte (0..=255)", item))
            })
            .collect(),
        _ => Err(mismatch(at, "base64 text or an array of bytes", value)),
    }
}

fn items(
    at: At<'_>,
    item: &Shape,
    value: &Value,
    exactly: Option<u32>,
) -> Result<Vec<Val>, String> {
    let list = value
        .as_array()
        .ok_or_else(|| mismatch(at, "an array", value))?;
    if let Some(n) = exactly
        && list.len() != n as usize
    {
        return Err(format!(
            "{at}: expected an array of exactly {n} items, got {}",
            list.len()
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, value)| to_val(At::Index(&at, i), item, value))
        .collect()
}

fn record(at: At<'_>, fields: &[Field], value: &Value) -> Result<Val, String> {
    let object = value
        .as_object()
        .ok_or_else(|| mismatch(at, "an object", value))?;
    if let Some(unknown) = object
        .keys()
        .find(|key| !fields.iter().any(|f| f.name == **key))
    {
        return Err(format!(
            "{}: unknown field (expected {})",
            At::Key(&at, unknown),
            names(fields.iter().map(|f| &f.name))
        ));
    }
    Ok(Val::Record(
        fields
            .iter()
            .map(|f| {
                Ok((
                    f.name.clone(),
                    member(at, &f.name, &f.shape, object.get(&f.name))?,
                ))
            })
            .collect::<Result<_, String>>()?,
    ))
}

/// A variant-like value: `"case"` for a case without a payload, or
/// `{"case": payload}`.
fn case<'s, N: AsRef<str>>(
    at: At<'_>,
    cases: impl Iterator<Item = (N, Option<&'s Shape>)> + Clone,
    value: &Value,
) -> Result<(String, Option<Box<Val>>), String> {
    let expected = || {
        let list: Vec<String> = cases
            .clone()
            .map(|(name, shape)| match shape {
                None => format!("\"{}\"", name.as_ref()),
                Some(_) => format!("{{\"{}\": …}}", name.as_ref()),
            })
            .collect();
        format!("one of {}", list.join(", "))
    };
    let find = |name: &str| cases.clone().find(|(n, _)| n.as_ref() == name);
    match value {
        Value::String(name) => match find(name) {
            Some((_, None)) => Ok((name.clone(), None)),
            Some((_, Some(_))) => Err(format!(
                "{at}: case `{name}` carries a value: write {{\"{name}\": …}}"
            )),
            None => Err(mismatch(at, &expected(), value)),
        },
        Value::Object(object) if object.len() == 1 => {
            let Some((name, payload)) = object.iter().next() else {
                return Err(mismatch(at, &expected(), value));
            };
            match find(name) {
                Some((_, None)) if payload.is_null() => Ok((name.clone(), None)),
                Some((_, None)) => Err(format!(
                    "{at}: case `{name}` carries no value: write \"{name}\""
                )),
                Some((_, Some(shape))) => Ok((
                    name.clone(),
                    Some(Box::new(to_val(At::Key(&at, name), shape, payload)?)),
                )),
                None => Err(mismatch(at, &expected(), value)),
            }
        }
        _ => Err(mismatch(at, &expected(), value)),
    }
}

fn map(at: At<'_>, key: &Shape, item: &Shape, value: &Value) -> Result<Val, String> {
    if matches!(key, Shape::String) {
        let object = value
            .as_object()
            .ok_or_else(|| mismatch(at, "an object", value))?;
        return Ok(Val::Map(
            object
                .iter()
                .map(|(k, v)| Ok((Val::String(k.clone()), to_val(At::Key(&at, k), item, v)?)))
                .collect::<Result<_, String>>()?,
        ));
    }
    let list = value
        .as_array()
        .ok_or_else(|| mismatch(at, "an array of [key, value] pairs", value))?;
    Ok(Val::Map(
        list.iter()
            .enumerate()
            .map(|(i, pair)| {
                let at = At::Index(&at, i);
                match pair.as_array().map(Vec::as_slice) {
                    Some([k, v]) => Ok((
                        to_val(At::Index(&at, 0), key, k)?,
                        to_val(At::Index(&at, 1), item, v)?,
                    )),
                    _ => Err(mismatch(at, "a [key, value] pair", pair)),
                }
            })
            .collect::<Result<_, String>>()?,
    ))
}

fn one_of<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let list: Vec<String> = names.map(|n| format!("\"{n}\"")).collect();
    format!("one of {}", list.join(", "))
}

fn names<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let list: Vec<&str> = names.map(String::as_str).collect();
    list.join(", ")
}

/// A result's JSON passed its cap while it was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Over;

/// Where [`write_json`] puts a result's JSON: counted ([`Measure`]) or
/// kept ([`Text`]). One walk serves both, so what was measured is exactly
/// what is written.
pub trait Sink {
    /// JSON syntax or a number, as it is.
    ///
    /// # Errors
    ///
    /// [`Over`] when the sink is full.
    fn raw(&mut self, text: &str) -> Result<(), Over>;
    /// `text` as a JSON string: quoted and escaped as serde_json escapes.
    ///
    /// # Errors
    ///
    /// [`Over`] when the sink is full.
    fn string(&mut self, text: &str) -> Result<(), Over>;
    /// `bytes` (each a `Val::U8`) as a base64 JSON string.
    ///
    /// # Errors
    ///
    /// [`Over`] when the sink is full.
    fn base64(&mut self, bytes: &[Val]) -> Result<(), Over>;
}

/// The length of a result's JSON, counted without building it, and how
/// many of its bytes are `"` or `\` (each takes one more byte when the
/// JSON is itself sent as a JSON string). Stops with [`Over`] as soon as
/// the length passes `max_len`, so measuring an oversized result costs at
/// most `max_len` bytes' worth of walking and no memory.
#[derive(Debug)]
pub struct Measure {
    /// Bytes of JSON text so far.
    pub len: usize,
    /// Of those, the bytes that are `"` or `\`.
    pub specials: usize,
    max_len: usize,
}

impl Measure {
    /// A measure that stops past `max_len` bytes.
    pub fn new(max_len: usize) -> Self {
        Measure {
            len: 0,
            specials: 0,
            max_len,
        }
    }

    fn add(&mut self, len: usize, specials: usize) -> Result<(), Over> {
        self.len = self.len.saturating_add(len);
        self.specials = self.specials.saturating_add(specials);
        if self.len > self.max_len {
            Err(Over)
        } else {
            Ok(())
        }
    }
}

impl Sink for Measure {
    fn raw(&mut self, text: &str) -> Result<(), Over> {
        let specials = text.bytes().filter(|b| matches!(b, b'"' | b'\\')).count();
        self.add(text.len(), specials)
    }

    fn string(&mut self, text: &str) -> Result<(), Over> {
        // The quotes, then per byte what serde_json writes for it.
        let (mut len, mut specials) = (text.len() + 2, 2);
        for b in text.bytes() {
            match b {
                b'"' | b'\\' => (len, specials) = (len + 1, specials + 2),
                0x08 | 0x0c | b'\n' | b'\r' | b'\t' => (len, specials) = (len + 1, specials + 1),
                0..0x20 => (len, specials) = (len + 5, specials + 1),
                _ => {}
            }
        }
        self.add(len, specials)
    }

    fn base64(&mut self, bytes: &[Val]) -> Result<(), Over> {
        self.add(crate::json::base64_len(bytes.len()), 2)
    }
}

/// A result's JSON text, written into a buffer sized by its [`Measure`].
#[derive(Debug, Default)]
pub struct Text(pub String);

impl Sink for Text {
    fn raw(&mut self, text: &str) -> Result<(), Over> {
        self.0.push_str(text);
        Ok(())
    }

    fn string(&mut self, text: &str) -> Result<(), Over> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let out = &mut self.0;
        out.push('"');
        let mut start = 0;
        for (i, b) in text.bytes().enumerate() {
            let short = match b {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                0x08 => "\\b",
                0x0c => "\\f",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0..0x20 => "",
                _ => continue,
            };
            // `b` is ASCII, so `i` is a character boundary.
            out.push_str(&text[start..i]);
            if short.is_empty() {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
            } else {
                out.push_str(short);
            }
            start = i + 1;
        }
        out.push_str(&text[start..]);
        out.push('"');
        Ok(())
    }

    fn base64(&mut self, bytes: &[Val]) -> Result<(), Over> {
        let bytes: Vec<u8> = bytes
            .iter()
            .map(|item| match item {
                Val::U8(b) => *b,
                _ => 0,
            })
            .collect();
        self.0.push('"');
        BASE64.encode_string(bytes, &mut self.0);
        self.0.push('"');
        Ok(())
    }
}

/// Write `val` (of `shape`) as JSON into `out`, compact, exactly as
/// serde_json would serialise the corresponding `Value` (object keys in
/// sorted order, a repeated map key once with its last value), without
/// building one: a lifted result can hold millions of small values, and a
/// tree of them takes many times the text's size.
///
/// # Errors
///
/// [`Over`] as soon as `out` is full; nothing more is walked.
pub fn write_json<S: Sink>(shape: &Shape, val: &Val, out: &mut S) -> Result<(), Over> {
    match (shape, val) {
        (_, Val::Bool(b)) => out.raw(if *b { "true" } else { "false" }),
        (_, Val::U8(n)) => out.raw(&n.to_string()),
        (_, Val::U16(n)) => out.raw(&n.to_string()),
        (_, Val::U32(n)) => out.raw(&n.to_string()),
        (_, Val::U64(n)) => out.raw(&n.to_string()),
        (_, Val::S8(n)) => out.raw(&n.to_string()),
        (_, Val::S16(n)) => out.raw(&n.to_string()),
        (_, Val::S32(n)) => out.raw(&n.to_string()),
        (_, Val::S64(n)) => out.raw(&n.to_string()),
        (_, Val::Float32(n)) => number(f64::from(*n), out),
        (_, Val::Float64(n)) => number(*n, out),
        (_, Val::Char(c)) => out.string(c.encode_utf8(&mut [0; 4])),
        (_, Val::String(s)) => out.string(s),
        (Shape::Bytes, Val::List(items)) => out.base64(items),
        (
            Shape::List(item) | Shape::FixedList(item, _),
            Val::List(items) | Val::FixedLengthList(items),
        ) => array(items.iter().map(|v| (&**item, v)), out),
        (Shape::Option(inner), Val::Option(value)) => match value.as_deref() {
            Some(v) => write_json(inner, v, out),
            None => out.raw("null"),
        },
        (Shape::Record { fields, .. }, Val::Record(values)) => {
            let members: Vec<(&str, &Shape, &Val)> = fields
                .iter()
                .zip(values)
                .map(|(field, (name, v))| (name.as_str(), &*field.shape, v))
                .collect();
            object(members, out)
        }
        (Shape::Tuple(shapes), Val::Tuple(values)) => {
            array(shapes.iter().map(|s| &**s).zip(values), out)
        }
        (_, Val::Enum(name)) => out.string(name),
        (_, Val::Flags(names)) => {
            out.raw("[")?;
            for (i, name) in names.iter().enumerate() {
                if i > 0 {
                    out.raw(",")?;
                }
                out.string(name)?;
            }
            out.raw("]")
        }
        (Shape::Variant { cases, .. }, Val::Variant(name, payload)) => {
            let shape = cases
                .iter()
                .find(|c| c.name == *name)
                .and_then(|c: &Case| c.shape.as_deref());
            case_json(name, shape, payload.as_deref(), out)
        }
        (Shape::Result { ok, err }, Val::Result(result)) => match result {
            Ok(payload) => case_json("ok", ok.as_deref(), payload.as_deref(), out),
            Err(payload) => case_json("err", err.as_deref(), payload.as_deref(), out),
        },
        (Shape::Map(key, item), Val::Map(pairs)) if matches!(**key, Shape::String) => {
            let mut members: Vec<(std::borrow::Cow<'_, str>, &Shape, &Val)> =
                Vec::with_capacity(pairs.len());
            for (k, v) in pairs {
                let k = match k {
                    Val::String(k) => std::borrow::Cow::Borrowed(k.as_str()),
                    other => {
                        let mut text = Text::default();
                        write_json(key, other, &mut text)?;
                        std::borrow::Cow::Owned(text.0)
                    }
                };
                members.push((k, &**item, v));
            }
            object(members, out)
        }
        (Shape::Map(key, item), Val::Map(pairs)) => {
            out.raw("[")?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                out.raw(if i > 0 { ",[" } else { "[" })?;
                write_json(key, k, out)?;
                out.raw(",")?;
                write_json(item, v, out)?;
                out.raw("]")?;
            }
            out.raw("]")
        }
        // The function's type was checked against its shape at load, and
        // wasmtime lifts results of that type; nothing else arrives.
        _ => out.raw("null"),
    }
}

/// A number as serde_json writes it; a non-finite one has no JSON form:
/// `null`.
fn number<S: Sink>(n: f64, out: &mut S) -> Result<(), Over> {
    match serde_json::Number::from_f64(n) {
        Some(n) => out.raw(&n.to_string()),
        None => out.raw("null"),
    }
}

fn array<'v, S: Sink>(
    items: impl Iterator<Item = (&'v Shape, &'v Val)>,
    out: &mut S,
) -> Result<(), Over> {
    out.raw("[")?;
    for (i, (shape, v)) in items.enumerate() {
        if i > 0 {
            out.raw(",")?;
        }
        write_json(shape, v, out)?;
    }
    out.raw("]")
}

/// An object of `members`, as serde_json's (sorted) map writes it: keys
/// in order, a repeated key once, with the last of its values.
fn object<K: AsRef<str>, S: Sink>(
    mut members: Vec<(K, &Shape, &Val)>,
    out: &mut S,
) -> Result<(), Over> {
    // Stable, so among equal keys the last is still last.
    members.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
    out.raw("{")?;
    let mut first = true;
    for (i, (key, shape, v)) in members.iter().enumerate() {
        if members
            .get(i + 1)
            .is_some_and(|next| next.0.as_ref() == key.as_ref())
        {
            continue;
        }
        if !first {
            out.raw(",")?;
        }
        first = false;
        out.string(key.as_ref())?;
        out.raw(":")?;
        write_json(shape, v, out)?;
    }
    out.raw("}")
}

/// A variant-like value: `"case"` without a payload, `{"case": payload}`
/// with one.
fn case_json<S: Sink>(
    name: &str,
    shape: Option<&Shape>,
    payload: Option<&Val>,
    out: &mut S,
) -> Result<(), Over> {
    match (shape, payload) {
        (Some(shape), Some(payload)) => {
            out.raw("{")?;
            out.string(name)?;
            out.raw(":")?;
            write_json(shape, payload, out)?;
            out.raw("}")
        }
        _ => out.string(name),
    }
}
