//! Where tools come from, beyond files dropped into the tools folder: OCI
//! registries, URLs and local files, installed by `toolcage add`, kept
//! current by `toolcage update`, fetched at start-up from `[[sources]]`,
//! and published by `toolcage publish`.
//!
//! - `reference`: source references, parsed once by the spec's grammar.
//! - `digest`: SHA-256 content digests.
//! - `manifest`: an OCI manifest read as a Wasm artifact.
//! - `credentials`: registry credentials from the standard places.
//! - `registry`: the OCI distribution client (pull, push, token auth).
//! - `keys`: the public and private keys of signatures, read from PEM.
//! - `signature`: cosign signatures, verified offline and made.
//! - `fetch`: a source's bytes, every byte checked.
//! - `lock`: the lock file, written atomically under a guard.
//! - `install`: staging, the load check, the lock, the move into place.
//! - `report`: what a component could reach, and the grants it needs.
//! - `publish`: a component pushed in the wasm OCI artifact layout.
//! - `commands`: the commands as the binary runs them.
//!
//! Invariants: a reference is parsed once, by the spec's grammar, before
//! any request; every fetched byte is checked against a digest before it
//! is kept; every size is capped before it is read; a tool file's name can
//! never leave the tools folder; nothing half-written appears in the tools
//! folder; installing never grants anything.

pub mod commands;
pub mod credentials;
pub mod digest;
pub mod fetch;
pub mod install;
pub mod keys;
pub mod lock;
pub mod manifest;
pub mod publish;
pub mod reference;
pub mod registry;
pub mod report;
pub mod signature;

pub use digest::Digest;
pub use lock::Lock;
pub use reference::{OciReference, Source, check_name};

/// The file at `path`, read whole if it holds at most `max` bytes (no more
/// than `max + 1` are ever read, whatever the file is): `Ok(None)` if it
/// does not exist.
///
/// # Errors
///
/// It cannot be read, or it is larger than `max`: the message names the
/// file and ends with `why`, what a file that large cannot be.
pub(crate) fn read_capped(
    path: &std::path::Path,
    max: u64,
    why: &str,
) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read as _;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read `{}`: {error}", path.display())),
    };
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read `{}`: {error}", path.display()))?;
    if bytes.len() as u64 > max {
        let size = if max.is_multiple_of(1024 * 1024) {
            format!("{} MiB", max / (1024 * 1024))
        } else if max.is_multiple_of(1024) {
            format!("{} KiB", max / 1024)
        } else {
            format!("{max} bytes")
        };
        return Err(format!("`{}` is larger than {size}; {why}", path.display()));
    }
    Ok(Some(bytes))
}
