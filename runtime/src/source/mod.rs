//! Where tools come from, beyond files dropped into the tools folder: OCI
//! registries and URLs (issue: `toolcage add`, locks, signatures).
//!
//! Built so far: the parts every fetch rests on, each checked on its own —
//! source references (`reference`), content digests (`digest`), and
//! reading an OCI manifest as a Wasm artifact (`manifest`). The fetching,
//! the lock and the commands are not built yet.
//!
//! Invariants the rest will keep: a reference is parsed once, by the
//! spec's grammar, before any request; every fetched byte is checked
//! against a digest before it is kept; every size is capped before it is
//! read; a tool file's name can never leave the tools folder.

pub mod digest;
pub mod manifest;
pub mod reference;

pub use digest::Digest;
pub use reference::{OciReference, Source, check_name};
