//! What a file is, read from its bytes before anything is compiled: a core
//! module or garbage (refused), a component of the contract, or a plain
//! component (its exports, as WIT, become tools); and which of its imports
//! the sandbox does not provide. Decoding the component's type takes
//! milliseconds where compiling a JavaScript or Python component takes tens
//! of seconds, so a file that cannot load is refused before its compile.
//!
//! Invariants:
//! - Nothing here runs or compiles guest code: it is wasmparser's
//!   validation of the component's structure and types (function bodies
//!   are not validated here; the compiler does that).
//! - A component whose type cannot be decoded here but that wasmtime
//!   accepts is still tried against the contract, so this module can only
//!   add refusals of files that would fail anyway, and plain tools.

use wit_parser::decoding::{DecodedWasm, decode};
use wit_parser::{Resolve, WorldId, WorldItem, WorldKey};

use super::LoadError;
use super::contract::Version;
use super::engine::{PROVIDED_INTERFACES, check_component_header};
use super::plain::docs;

/// The name under which a component of the contract exports its tools.
const CONTRACT_INTERFACE: &str = "toolcage:tool/tool";

/// What the bytes of a file are.
pub(super) enum Inspected {
    /// Exports `toolcage:tool/tool`, of a version this host serves (or
    /// the export's name, of a version it does not).
    Contract(Result<Version, String>),
    /// Any other component, with its WIT.
    Plain(Box<Resolve>, WorldId),
    /// A component whose type could not be decoded here (the reason);
    /// compiled and tried against the contract.
    Undecoded(String),
}

/// An import the sandbox does not provide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The import as the component names it (`wasi:config/store@0.2.0-rc.1`).
    pub name: String,
}

/// Read what `bytes` are, and which imports would not link.
pub(super) fn inspect(bytes: &[u8]) -> Result<(Inspected, Vec<Missing>), LoadError> {
    check_component_header(bytes)?;
    // The WIT docs section is merged by this module, after decoding.
    let (without_docs, docs) = match docs::split(bytes) {
        Some((rest, docs)) => (Some(rest), Some(docs)),
        None => (None, None),
    };
    let (mut resolve, world) = match decode(without_docs.as_deref().unwrap_or(bytes)) {
        Ok(DecodedWasm::Component(resolve, world)) => (resolve, world),
        Ok(DecodedWasm::WitPackage(..)) => {
            return Err(LoadError::NotAComponent(
                "is a WIT package (types only, no code), not a component".into(),
            ));
        }
        Err(error) => return Ok((Inspected::Undecoded(format!("{error:#}")), Vec::new())),
    };
    if let Some(docs) = &docs
        && !docs::merge(&mut resolve, world, docs)
    {
        tracing::warn!(
            bytes = docs.len(),
            "the component's `package-docs` section could not be read (or is over 1 MiB); its WIT docs are ignored"
        );
    }
    let Some(w) = resolve.worlds.get(world) else {
        return Ok((Inspected::Undecoded("no world".into()), Vec::new()));
    };
    // Types in a world's imports are its own type definitions, not
    // something to link.
    let missing = w
        .imports
        .iter()
        .filter(|(_, item)| !matches!(item, WorldItem::Type { .. }))
        .filter_map(|(key, _)| key_name(&resolve, key))
        .filter(|name| !provided(name))
        .map(|name| Missing { name })
        .collect();
    let contract = w
        .exports
        .keys()
        .filter_map(|key| key_name(&resolve, key))
        .find(|name| unversioned(name) == CONTRACT_INTERFACE);
    let inspected = match contract {
        Some(name) => Inspected::Contract(Version::of_export(&name).ok_or(name)),
        None => Inspected::Plain(Box::new(resolve), world),
    };
    Ok((inspected, missing))
}

/// The name of a world import or export as the component spells it: the
/// kebab name, or the interface's `ns:pkg/name@version`.
pub(super) fn key_name(resolve: &Resolve, key: &WorldKey) -> Option<String> {
    match key {
        WorldKey::Name(name) => Some(name.clone()),
        WorldKey::Interface(id) => resolve.id_of(*id),
    }
}

/// `name` without its `@version`.
pub(super) fn unversioned(name: &str) -> &str {
    name.split_once('@').map_or(name, |(name, _)| name)
}

/// Whether the sandbox's linker provides import `name` (an interface, at a
/// version it serves). A world-level function import (a bare kebab name)
/// is never provided.
fn provided(name: &str) -> bool {
    let (interface, version) = match name.split_once('@') {
        Some((interface, version)) => (interface, Some(version)),
        None => (name, None),
    };
    PROVIDED_INTERFACES.iter().any(|(provided, major)| {
        *provided == interface && version.is_none_or(|v| v.starts_with(major))
    })
}
