//! Compact JSON text from any `serde::Serialize`, byte for byte what
//! `serde_json::to_vec` writes, but with strings escaped eight bytes at a
//! time.
//!
//! serde_json looks at a string one byte at a time, through a table. For
//! the text a tool returns (a file's contents, a page) that loop is most of
//! the cost of serialising it: a profile of a 1 KiB read counted 37 guest
//! instructions a byte inside a component under fuel metering, and about
//! ten a byte in the host (`docs/benchmarks.md`, round ten). Here a word
//! of eight bytes is tested at once for anything that needs escaping
//! (`"`, `\` or a control character), clean words are skipped, and a run
//! of clean text is copied whole when the next escape or the end comes.
//!
//! Everything but strings (numbers, `null`, the punctuation) is written
//! exactly as serde_json writes it, numbers by serde_json itself, so the
//! two never disagree; the tests compare them on generated values.
//! Both toolcage's host and its Rust guest SDK serialise through this.
//! No `unsafe`: a `String` is written through `push_str`, so it needs no
//! UTF-8 check at the end.

use serde::ser::{self, Error as _, Serialize};

/// serde_json's error, so that callers keep their types.
pub type Error = serde_json::Error;

/// Where JSON text goes: a `Vec<u8>` or a `String`.
pub trait Sink {
    /// Append `text`.
    fn push_text(&mut self, text: &str);
    /// Append one ASCII byte (below 0x80).
    fn push_ascii(&mut self, byte: u8);
    /// Make room for `more` bytes.
    fn reserve_more(&mut self, more: usize);
}

impl Sink for Vec<u8> {
    #[inline]
    fn push_text(&mut self, text: &str) {
        self.extend_from_slice(text.as_bytes());
    }
    #[inline]
    fn push_ascii(&mut self, byte: u8) {
        self.push(byte);
    }
    #[inline]
    fn reserve_more(&mut self, more: usize) {
        self.reserve(more);
    }
}

impl Sink for String {
    #[inline]
    fn push_text(&mut self, text: &str) {
        self.push_str(text);
    }
    #[inline]
    fn push_ascii(&mut self, byte: u8) {
        self.push(char::from(byte));
    }
    #[inline]
    fn reserve_more(&mut self, more: usize) {
        self.reserve(more);
    }
}

/// `value` as compact JSON text.
///
/// # Errors
///
/// `value`'s `Serialize` fails, or a map key is not a string, a number, a
/// boolean or a character (as with serde_json).
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(128);
    to_writer(&mut out, value)?;
    Ok(out)
}

/// [`to_vec`] as a `String`.
///
/// # Errors
///
/// As [`to_vec`].
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    let mut out = String::with_capacity(128);
    to_writer(&mut out, value)?;
    Ok(out)
}

/// Append `value` as compact JSON text to `out`. On an error, `out` may
/// hold part of it.
///
/// # Errors
///
/// As [`to_vec`].
pub fn to_writer<S: Sink, T: Serialize + ?Sized>(out: &mut S, value: &T) -> Result<(), Error> {
    value.serialize(Serializer { out })
}

/// Append `text` as a JSON string, quotes included, escaped as serde_json
/// escapes it: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, and `\u00xx` for
/// the other control characters; everything else (non-ASCII included) as
/// it is.
pub fn write_str<S: Sink>(out: &mut S, text: &str) {
    let bytes = text.as_bytes();
    out.reserve_more(bytes.len() + 2);
    out.push_ascii(b'"');
    // `text[clean..at]` is clean and not yet written; every byte that
    // needs escaping is ASCII, so `clean` and `at` are on character
    // boundaries when a run is written.
    let mut clean = 0;
    let mut at = 0;
    while at < bytes.len() {
        let flags = word_flags(word_at(bytes, at));
        if flags == 0 {
            // Past the end for a last, short word: the loop ends.
            at += 8;
            continue;
        }
        // The lowest flag is exact (see `word_flags`), the lowest bits
        // hold the first byte, and a short word's padding never flags.
        at += (flags.trailing_zeros() / 8) as usize;
        out.push_text(&text[clean..at]);
        write_escape(out, bytes[at]);
        at += 1;
        clean = at;
    }
    out.push_text(&text[clean..]);
    out.push_ascii(b'"');
}

/// The length of `text` once written by [`write_str`], quotes included.
pub fn escaped_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut total = bytes.len() + 2;
    let mut at = 0;
    while at < bytes.len() {
        let flags = word_flags(word_at(bytes, at));
        if flags == 0 {
            at += 8;
            continue;
        }
        at += (flags.trailing_zeros() / 8) as usize;
        total += usize::from(ESCAPE_LEN[usize::from(bytes[at])]) - 1;
        at += 1;
    }
    total
}

/// The eight bytes of `bytes` from `at` (`at < bytes.len()`) as a word,
/// the first in its lowest bits; fewer at the end, padded with spaces,
/// which never need escaping. Short strings (a struct's field names, a
/// listing's file names) are most of what is written: reading a short
/// word in at most three loads instead of a byte at a time took the
/// guest's escaping of a 10-entry listing (44 strings) from 20,500
/// instructions to 17,300 (docs/benchmarks.md, round ten). Inlined
/// always, as `word_flags` is: a profile of a component found them
/// called, not inlined, once per eight bytes.
#[inline(always)]
fn word_at(bytes: &[u8], at: usize) -> u64 {
    const SPACES: u64 = 0x2020_2020_2020_2020;
    let rest = bytes.get(at..).unwrap_or_default();
    if let Some(eight) = rest.get(..8) {
        return u64::from_le_bytes(eight.try_into().unwrap_or_default());
    }
    // 1 to 7 bytes: a 4-, a 2- and a 1-byte load as the length's bits say.
    let n = rest.len();
    let mut w = 0;
    let mut from = 0;
    if n & 4 != 0 {
        w = u64::from(u32::from_le_bytes(
            rest.get(..4)
                .and_then(|b| b.try_into().ok())
                .unwrap_or_default(),
        ));
        from = 4;
    }
    if n & 2 != 0 {
        let two = rest.get(from..from + 2).and_then(|b| b.try_into().ok());
        w |= u64::from(u16::from_le_bytes(two.unwrap_or_default())) << (8 * from);
        from += 2;
    }
    if n & 1 != 0 {
        w |= u64::from(rest.get(from).copied().unwrap_or_default()) << (8 * from);
    }
    w | SPACES.checked_shl(8 * n as u32).unwrap_or(0)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// A word of eight bytes with the high bit of a byte set where it may need
/// escaping (below 0x20, `"` or `\\`); zero if none does. For one test,
/// `(x - n·ONES) & !x & HIGHS` flags a byte of `x` below `n` (for `n` up to
/// 0x80): the lowest flag is always such a byte (a borrow only runs
/// upwards, from a byte that is one), the flags above it may be wrong, and
/// none is set if no byte is. A byte equal to `c` is a byte below 1 of
/// `x ^ c·ONES`.
#[inline(always)]
fn word_flags(w: u64) -> u64 {
    let below = |x: u64, n: u64| x.wrapping_sub(n * ONES) & !x;
    let quote = w ^ (u64::from(b'"') * ONES);
    let backslash = w ^ (u64::from(b'\\') * ONES);
    (below(w, 0x20) | below(quote, 1) | below(backslash, 1)) & HIGHS
}

/// How many bytes each byte takes written: 1, 2 for `\\x`, 6 for
/// `\\u00xx`.
const ESCAPE_LEN: [u8; 256] = {
    let mut table = [1; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = 6;
        b += 1;
    }
    table[0x08] = 2;
    table[0x0c] = 2;
    table[b'\n' as usize] = 2;
    table[b'\r' as usize] = 2;
    table[b'\t' as usize] = 2;
    table[b'"' as usize] = 2;
    table[b'\\' as usize] = 2;
    table
};

#[inline]
fn write_escape<S: Sink>(out: &mut S, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let letter = match b {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => {
            for ascii in [
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ] {
                out.push_ascii(ascii);
            }
            return;
        }
    };
    out.push_ascii(b'\\');
    out.push_ascii(letter);
}

/// A number (or boolean) as serde_json writes it, by serde_json itself.
fn scalar<S: Sink, T: Serialize>(out: &mut S, value: T) -> Result<(), Error> {
    // The longest is an i128 (40 bytes) or an f64 (24).
    let mut buffer = [0u8; 48];
    let mut rest = &mut buffer[..];
    serde_json::to_writer(&mut rest, &value)?;
    let written = 48 - rest.len();
    out.push_text(std::str::from_utf8(&buffer[..written]).map_err(Error::custom)?);
    Ok(())
}

/// The serialiser: everything but strings as serde_json's compact
/// formatter writes it.
struct Serializer<'a, S> {
    out: &'a mut S,
}

/// A sequence or map being written; `first` until its first item.
struct Compound<'a, S> {
    out: &'a mut S,
    first: bool,
    /// Closes an enum variant's `{"variant":` around the value.
    variant: bool,
}

impl<'a, S: Sink> Compound<'a, S> {
    fn open(out: &'a mut S, bracket: u8, variant: bool) -> Self {
        out.push_ascii(bracket);
        Compound {
            out,
            first: true,
            variant,
        }
    }

    fn separate(&mut self) {
        if !self.first {
            self.out.push_ascii(b',');
        }
        self.first = false;
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.separate();
        value.serialize(Serializer { out: self.out })
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        self.separate();
        write_str(self.out, key);
        self.out.push_ascii(b':');
        value.serialize(Serializer { out: self.out })
    }

    fn close(self, bracket: u8) -> Result<(), Error> {
        self.out.push_ascii(bracket);
        if self.variant {
            self.out.push_ascii(b'}');
        }
        Ok(())
    }
}

/// `{"variant":` before an enum variant's value.
fn open_variant<S: Sink>(out: &mut S, variant: &str) {
    out.push_ascii(b'{');
    write_str(out, variant);
    out.push_ascii(b':');
}

impl<'a, S: Sink> ser::Serializer for Serializer<'a, S> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, S>;
    type SerializeTuple = Compound<'a, S>;
    type SerializeTupleStruct = Compound<'a, S>;
    type SerializeTupleVariant = Compound<'a, S>;
    type SerializeMap = Compound<'a, S>;
    type SerializeStruct = Compound<'a, S>;
    type SerializeStructVariant = Compound<'a, S>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out.push_text(if v { "true" } else { "false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        scalar(self.out, v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        let mut seq = Compound::open(self.out, b'[', false);
        for byte in v {
            seq.separate();
            scalar(seq.out, byte)?;
        }
        seq.close(b']')
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.push_text("null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        open_variant(self.out, variant);
        value.serialize(Serializer { out: self.out })?;
        self.out.push_ascii(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a, S>, Error> {
        Ok(Compound::open(self.out, b'[', false))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound<'a, S>, Error> {
        Ok(Compound::open(self.out, b'[', false))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, S>, Error> {
        Ok(Compound::open(self.out, b'[', false))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, S>, Error> {
        open_variant(self.out, variant);
        Ok(Compound::open(self.out, b'[', true))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a, S>, Error> {
        Ok(Compound::open(self.out, b'{', false))
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'a, S>, Error> {
        Ok(Compound::open(self.out, b'{', false))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, S>, Error> {
        open_variant(self.out, variant);
        Ok(Compound::open(self.out, b'{', true))
    }
}

/// The four sequence-like compounds, which differ only in their
/// method's name.
macro_rules! sequence {
    ($($trait:ident :: $method:ident),*) => {$(
        impl<S: Sink> ser::$trait for Compound<'_, S> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close(b']')
            }
        }
    )*};
}

sequence!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl<S: Sink> ser::SerializeMap for Compound<'_, S> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.separate();
        key.serialize(KeySerializer { out: self.out })?;
        self.out.push_ascii(b':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(Serializer { out: self.out })
    }
    fn end(self) -> Result<(), Error> {
        self.close(b'}')
    }
}

/// Structs and struct variants, written as maps.
macro_rules! structure {
    ($($trait:ident),*) => {$(
        impl<S: Sink> ser::$trait for Compound<'_, S> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                self.field(key, value)
            }
            fn end(self) -> Result<(), Error> {
                self.close(b'}')
            }
        }
    )*};
}

structure!(SerializeStruct, SerializeStructVariant);

fn key_must_be_a_string() -> Error {
    Error::custom("key must be a string")
}

/// A map key: a string, or a number, boolean or character written as one
/// (serde_json's rules); anything else is an error.
struct KeySerializer<'a, S> {
    out: &'a mut S,
}

impl<S: Sink> KeySerializer<'_, S> {
    fn quoted<T: Serialize>(self, value: T) -> Result<(), Error> {
        self.out.push_ascii(b'"');
        scalar(self.out, value)?;
        self.out.push_ascii(b'"');
        Ok(())
    }
}

impl<S: Sink> ser::Serializer for KeySerializer<'_, S> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ser::Impossible<(), Error>;
    type SerializeTuple = ser::Impossible<(), Error>;
    type SerializeTupleStruct = ser::Impossible<(), Error>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = ser::Impossible<(), Error>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.quoted(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(Error::custom(
                "float key must be finite (got NaN or +/-inf)",
            ));
        }
        self.quoted(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(Error::custom(
                "float key must be finite (got NaN or +/-inf)",
            ));
        }
        self.quoted(v)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
mod tests;
