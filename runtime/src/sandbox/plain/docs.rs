//! A component's WIT documentation: the `package-docs` custom section that
//! build tools (`wit-docs-inject`, `toolcage` authors' builds) add to a
//! component, merged into its decoded WIT so that function docs become tool
//! descriptions and type, field and case docs schema descriptions.
//!
//! The section is the WIT *package*'s metadata (a version byte, then JSON
//! keyed by the package's own world and interface names), while a decoded
//! component is a synthetic `root:component` package, so wit-parser cannot
//! apply it itself (it refuses the whole component instead). So the section
//! is cut out of the bytes before decoding ([`split`]) and merged here by
//! name, leniently: anything unexpected in it is ignored, never an error.

use serde_json::Value;
use wit_parser::{Docs, Resolve, TypeDefKind, TypeOwner, WorldId, WorldItem, WorldKey};

/// The custom section's name.
const SECTION: &str = "package-docs";

/// The largest docs section read, in bytes; a larger one is ignored (real
/// ones are a few KiB: a comment per function, type and field).
pub const MAX_DOCS_BYTES: usize = 1024 * 1024;

/// The bytes of a component without its top-level `package-docs` section,
/// and that section's contents. `None` when there is no such section (or
/// the top level does not parse as sections, which decoding then reports).
pub fn split(bytes: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut at = 8;
    while at < bytes.len() {
        let start = at;
        let id = bytes[at];
        at += 1;
        let (size, used) = leb_u32(bytes.get(at..)?)?;
        at += used;
        let end = at
            .checked_add(size as usize)
            .filter(|end| *end <= bytes.len())?;
        if id == 0 {
            let (name_len, used) = leb_u32(bytes.get(at..end)?)?;
            let name_start = at + used;
            let name_end = name_start
                .checked_add(name_len as usize)
                .filter(|e| *e <= end)?;
            if &bytes[name_start..name_end] == SECTION.as_bytes() {
                let mut rest = Vec::with_capacity(bytes.len() - (end - start));
                rest.extend_from_slice(&bytes[..start]);
                rest.extend_from_slice(&bytes[end..]);
                return Some((rest, bytes[name_end..end].to_vec()));
            }
        }
        at = end;
    }
    None
}

/// `component` with the docs of the WIT package in `wit_dir` as its
/// `package-docs` section (replacing any it had): what `toolcage
/// embed-docs` writes, so a component's WIT comments become its tools'
/// descriptions.
///
/// # Errors
///
/// The WIT does not parse, or `component` is not a component.
pub fn embed(component: &[u8], wit_dir: &std::path::Path) -> Result<Vec<u8>, String> {
    if !component.starts_with(b"\0asm\x0d\0\x01\0") {
        return Err("is not a WebAssembly component".into());
    }
    let mut resolve = Resolve::new();
    let (package, _) = resolve.push_dir(wit_dir).map_err(|error| {
        format!(
            "the WIT in `{}` does not parse: {error:#}",
            wit_dir.display()
        )
    })?;
    let data = wit_parser::PackageMetadata::extract(&resolve, package)
        .encode()
        .map_err(|error| format!("cannot encode the docs: {error:#}"))?;
    let mut out = match split(component) {
        Some((rest, _)) => rest,
        None => component.to_vec(),
    };
    let mut contents = leb(SECTION.len());
    contents.extend_from_slice(SECTION.as_bytes());
    contents.extend_from_slice(&data);
    out.push(0);
    out.extend(leb(contents.len()));
    out.extend(contents);
    Ok(out)
}

fn leb(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// An unsigned LEB128 `u32` at the start of `bytes`, and its length.
fn leb_u32(bytes: &[u8]) -> Option<(u32, usize)> {
    let mut value: u32 = 0;
    for (i, byte) in bytes.iter().take(5).enumerate() {
        let low = u32::from(byte & 0x7f);
        value |= low.checked_shl(7 * i as u32)?;
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Merge the section's `data` into `resolve`'s world `world`: world-level
/// functions and types by name from the package's worlds, exported
/// interfaces by their own name from the package's interfaces. Returns
/// whether the section could be read at all.
pub fn merge(resolve: &mut Resolve, world: WorldId, data: &[u8]) -> bool {
    if data.len() > MAX_DOCS_BYTES {
        return false;
    }
    let Some((&version, json)) = data.split_first() else {
        return false;
    };
    if version > 1 {
        return false;
    }
    let Ok(Value::Object(docs)) = serde_json::from_slice::<Value>(json) else {
        return false;
    };
    let worlds: Vec<&Value> = docs
        .get("worlds")
        .and_then(Value::as_object)
        .map(|w| w.values().collect())
        .unwrap_or_default();
    let interfaces = docs.get("interfaces").and_then(Value::as_object);

    let Some(w) = resolve.worlds.get(world) else {
        return true;
    };
    // World-level exports: functions from any world of the package that
    // documents them (a package usually has one world).
    let mut functions: Vec<(WorldKey, String)> = Vec::new();
    let mut exported_interfaces = Vec::new();
    for (key, item) in &w.exports {
        match item {
            WorldItem::Function(f) => functions.push((key.clone(), f.name.clone())),
            WorldItem::Interface { id, .. } => exported_interfaces.push(*id),
            WorldItem::Type { .. } => {}
        }
    }
    for (key, name) in functions {
        let found = worlds.iter().find_map(|world| {
            ["func_exports", "funcs"]
                .iter()
                .find_map(|map| function_docs(world.get(*map)?.get(&name)?))
        });
        if let (Some(found), Some(WorldItem::Function(f))) =
            (found, resolve.worlds[world].exports.get_mut(&key))
        {
            f.docs = docs_of(found);
        }
    }
    // World-level types (owned by the decoded world).
    let types: Vec<_> = resolve
        .types
        .iter()
        .filter(|(_, t)| t.owner == TypeOwner::World(world))
        .filter_map(|(id, t)| Some((id, t.name.clone()?)))
        .collect();
    for (id, name) in types {
        if let Some(meta) = worlds
            .iter()
            .find_map(|world| world.get("types")?.get(&name))
        {
            type_docs(resolve, id, meta);
        }
    }
    // Exported interfaces, by their own name.
    let Some(interfaces) = interfaces else {
        return true;
    };
    for id in exported_interfaces {
        let Some(name) = resolve.interfaces[id].name.clone() else {
            continue;
        };
        let Some(meta) = interfaces.get(&name) else {
            continue;
        };
        if let Some(text) = meta.get("docs").and_then(Value::as_str) {
            resolve.interfaces[id].docs = docs_of(text);
        }
        if let Some(funcs) = meta.get("funcs").and_then(Value::as_object) {
            for (fname, fmeta) in funcs {
                if let (Some(text), Some(f)) = (
                    function_docs(fmeta),
                    resolve.interfaces[id].functions.get_mut(fname),
                ) {
                    f.docs = docs_of(text);
                }
            }
        }
        if let Some(types) = meta.get("types").and_then(Value::as_object) {
            for (tname, tmeta) in types {
                if let Some(&tid) = resolve.interfaces[id].types.get(tname) {
                    type_docs(resolve, tid, tmeta);
                }
            }
        }
    }
    true
}

/// A function's docs: a string (the v0 format) or `{"docs": …}`.
fn function_docs(meta: &Value) -> Option<&str> {
    match meta {
        Value::String(text) => Some(text),
        Value::Object(map) => map.get("docs")?.as_str(),
        _ => None,
    }
}

fn docs_of(text: &str) -> Docs {
    Docs {
        contents: Some(text.to_owned()),
    }
}

/// A type's docs and its fields', cases' or flags' (`items`).
fn type_docs(resolve: &mut Resolve, id: wit_parser::TypeId, meta: &Value) {
    let Some(def) = resolve.types.get_mut(id) else {
        return;
    };
    if let Some(text) = meta.get("docs").and_then(Value::as_str) {
        def.docs = docs_of(text);
    }
    let Some(items) = meta.get("items").and_then(Value::as_object) else {
        return;
    };
    let item = |name: &str| items.get(name).and_then(Value::as_str).map(docs_of);
    match &mut def.kind {
        TypeDefKind::Record(record) => {
            for field in &mut record.fields {
                if let Some(docs) = item(&field.name) {
                    field.docs = docs;
                }
            }
        }
        TypeDefKind::Variant(variant) => {
            for case in &mut variant.cases {
                if let Some(docs) = item(&case.name) {
                    case.docs = docs;
                }
            }
        }
        TypeDefKind::Enum(e) => {
            for case in &mut e.cases {
                if let Some(docs) = item(&case.name) {
                    case.docs = docs;
                }
            }
        }
        TypeDefKind::Flags(flags) => {
            for flag in &mut flags.flags {
                if let Some(docs) = item(&flag.name) {
                    flag.docs = docs;
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custom(name: &str, data: &[u8]) -> Vec<u8> {
        let mut contents = vec![name.len() as u8];
        contents.extend_from_slice(name.as_bytes());
        contents.extend_from_slice(data);
        let mut section = vec![0, contents.len() as u8];
        section.extend(contents);
        section
    }

    #[test]
    fn split_cuts_out_only_the_docs_section() {
        let header = b"\0asm\x0d\0\x01\0".to_vec();
        let other = custom("name", b"x");
        let docs = custom(SECTION, b"\x01{}");
        let bytes = [header.clone(), other.clone(), docs, other.clone()].concat();
        let (rest, data) = split(&bytes).expect("has the section");
        assert_eq!(
            rest,
            [header.clone(), other.clone(), other.clone()].concat()
        );
        assert_eq!(data, b"\x01{}");
        assert!(split(&[header.clone(), other].concat()).is_none());
        // A size past the end is not followed.
        assert!(split(&[header, vec![0, 0x7f]].concat()).is_none());
    }

    #[test]
    fn leb_round_trips() {
        for n in [0usize, 1, 127, 128, 300, 624_485, u32::MAX as usize] {
            let bytes = leb(n);
            assert_eq!(leb_u32(&bytes), Some((n as u32, bytes.len())));
        }
    }

    #[test]
    fn leb_reads_multibyte_and_refuses_overlong() {
        assert_eq!(leb_u32(&[0xe5, 0x8e, 0x26]), Some((624_485, 3)));
        assert_eq!(leb_u32(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), None);
        assert_eq!(leb_u32(&[]), None);
    }

    fn world(text: &str) -> (Resolve, WorldId) {
        let mut resolve = Resolve::new();
        let package = resolve.push_str("t.wit", text).expect("parses");
        let world = resolve.select_world(&[package], Some("w")).expect("w");
        (resolve, world)
    }

    fn function_docs(resolve: &Resolve, world: WorldId) -> Option<String> {
        resolve.worlds[world]
            .exports
            .values()
            .find_map(|item| match item {
                WorldItem::Function(f) => f.docs.contents.clone(),
                _ => None,
            })
    }

    #[test]
    fn merge_sets_docs_by_name_and_ignores_what_it_cannot_read() {
        let (mut resolve, w) = world("package a:b; world w { export f: func(); }");
        // Version 1, then the package's metadata, keyed by its own world
        // name; unknown members are ignored.
        let mut data = vec![1u8];
        data.extend_from_slice(
            br#"{"worlds":{"pkg-world":{"funcs":{"f":{"docs":"Does f."}}}},"unknown":1}"#,
        );
        assert!(merge(&mut resolve, w, &data));
        assert_eq!(function_docs(&resolve, w).as_deref(), Some("Does f."));

        for bad in [&b""[..], b"\x07{}", b"\x01not json", b"\x01[1,2]"] {
            let (mut resolve, w) = world("package a:b; world w { export f: func(); }");
            assert!(!merge(&mut resolve, w, bad));
            assert_eq!(function_docs(&resolve, w), None);
        }
        let mut huge = vec![1u8];
        huge.extend(std::iter::repeat_n(b' ', MAX_DOCS_BYTES));
        let (mut resolve, w) = world("package a:b; world w { export f: func(); }");
        assert!(!merge(&mut resolve, w, &huge));
    }
}
