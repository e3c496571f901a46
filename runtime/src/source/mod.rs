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
//! - `capped`: reading a local file (a component, the lock, a key, a
//!   credentials file) up to a cap.
//!
//! Invariants: a reference is parsed once, by the spec's grammar, before
//! any request; every fetched byte is checked against a digest before it
//! is kept; every size is capped before it is read; a tool file's name can
//! never leave the tools folder; nothing half-written appears in the tools
//! folder; installing never grants anything.

pub(crate) mod capped;
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
