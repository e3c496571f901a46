//! `wasi:config/store`, served from the call's `config` grant: a plain
//! component that reads its settings (an API key, a base URL) through it
//! gets exactly the values the operator granted, and nothing else.
//!
//! Linked under every version components import in practice (the
//! interface is still a proposal: `0.2.0-draft`, `0.2.0-rc.1`); both have
//! the same two functions. Keys and values are the operator's, so what
//! `get-all` returns is bounded by the config file; a key the guest sends
//! is bounded by the store's hostcall fuel, as every transfer is.

use wasmtime::component::{ComponentType, Linker, Lower};

use super::store::HostState;
use crate::grants::config;

/// The versions linked.
pub(super) const VERSIONS: &[&str] = &["0.2.0-draft", "0.2.0-rc.1"];

/// What `get-all` returns.
type AllValues = Result<Vec<(String, String)>, Error>;

/// `wasi:config/store`'s `error`.
#[derive(ComponentType, Lower)]
#[component(variant)]
enum Error {
    /// The store's backend failed (never, here).
    #[component(name = "upstream")]
    #[allow(dead_code)]
    Upstream(String),
    /// An I/O error (never, here).
    #[component(name = "io")]
    #[allow(dead_code)]
    Io(String),
}

/// Add `get` and `get-all` under every version in [`VERSIONS`].
pub(super) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    for version in VERSIONS {
        let mut store = linker.instance(&format!("wasi:config/store@{version}"))?;
        store.func_wrap(
            "get",
            |mut store, (key,): (String,)| -> wasmtime::Result<(Result<Option<String>, Error>,)> {
                store.data_mut().touch();
                let values = &store.data().grants.config;
                Ok((Ok(config::get(values, &key).map(str::to_owned)),))
            },
        )?;
        store.func_wrap(
            "get-all",
            |mut store, (): ()| -> wasmtime::Result<(AllValues,)> {
                store.data_mut().touch();
                let values = &store.data().grants.config;
                Ok((Ok(values
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone()))
                    .collect()),))
            },
        )?;
    }
    Ok(())
}
