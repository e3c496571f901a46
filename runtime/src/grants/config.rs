//! The configuration grant: the values a tool reads through
//! `wasi:config/store` (`config` in the config file), from the same sources
//! as `env` (a literal, one of toolcage's own variables, a file's contents
//! as a secret) and under the same rules: nothing unless granted, secrets
//! scrubbed from everything the host logs or journals.
//!
//! The grant reuses [`EnvGrant`]'s representation (named values, some of
//! them secret); only where the values go differs: the store's state, read
//! by the `wasi:config/store` host (`sandbox::wasi_config`), not the WASI
//! environment.

use super::env::{EnvGrant, EnvVar};

/// The values granted to a tool for `wasi:config/store`.
pub type ConfigGrant = EnvGrant;

/// The value of `key` among `values`, if granted.
pub fn get<'a>(values: &'a [EnvVar], key: &str) -> Option<&'a str> {
    values
        .iter()
        .find(|v| v.name == key)
        .map(|v| v.value.as_str())
}
