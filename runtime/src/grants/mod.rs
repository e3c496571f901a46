//! What a tool may reach, one capability per file: directories (`files`),
//! hosts over HTTP (`network`), environment variables (`env`), values
//! through `wasi:config/store` (`config`) and the client's services
//! (`services`).
//!
//! Each grant goes through the same three steps, in the manner of
//! wasmtime-wasi's per-capability contexts:
//! 1. **Parse and validate once**, at config load (`config` reads the keys
//!    and builds the values defined here; errors name the dotted key).
//!    [`Grants`] is the result, part of a tool's `Policy`.
//! 2. **Prepare per call**, from the grant and what the call brings
//!    ([`CallContext`]: the client's roots, its services):
//!    [`Grants::prepare`] gives [`CallGrants`].
//! 3. **Apply to the call's store**: the sandbox hands the WASI context
//!    builder to [`CallGrants::apply`] (the environment) and keeps the
//!    rest in the store's state (the directories, opened when the guest
//!    first asks for them; the network gate; the client services).
//!
//! Adding a grant: a file here with its validated type and its `prepare`
//! (and `apply`, if the WASI context carries it); one field in [`Grants`]
//! and in [`CallGrants`] and one line in each of `prepare` and `apply`
//! below; its keys in `config`'s `RawPolicy`.
//!
//! Invariants:
//! - Deny by default: [`Grants::default`] and [`CallGrants::none`] reach
//!   nothing (no directory, no host, no variable, no sampling).
//! - A call's client can only narrow a grant (client roots), never widen
//!   it; nothing a component declares is read here.

pub mod config;
pub mod env;
pub mod files;
pub mod handles;
pub mod network;
pub mod services;

use std::path::PathBuf;
use std::sync::Arc;

use wasmtime_wasi::WasiCtxBuilder;

use crate::call::ClientServices;
use config::ConfigGrant;
use env::{EnvGrant, EnvVar};
use files::{EffectiveRoot, Root};
use handles::OsHandles;
use network::{NetGate, NetGrant};
use services::{ClientAccess, ServicesGrant};

/// Every capability one tool is granted, as validated from the config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Directories (`roots`), before a client narrows them.
    pub files: Vec<Root>,
    /// Hosts over HTTP and the caps on each request (`network`, `resolve`,
    /// `http_*`).
    pub network: Arc<NetGrant>,
    /// Environment variables (`env`), secrets among them.
    pub env: EnvGrant,
    /// Values for `wasi:config/store` (`config`), secrets among them.
    pub config: ConfigGrant,
    /// What the tool may ask of the client beyond elicitation
    /// (`allow_sampling`).
    pub services: ServicesGrant,
}

/// What a call brings to its tool's grants.
#[derive(Clone, Copy)]
pub struct CallContext<'a> {
    /// The tool's name, for refusal messages.
    pub tool: &'a str,
    /// The roots the client declared, if it declared any.
    pub client_roots: Option<&'a [PathBuf]>,
    /// What the caller's policy (`[[callers]]`) narrows the grants to,
    /// when it does.
    pub caller: CallerLimits<'a>,
    /// Elicitation and sampling through the client, if there is one.
    pub client: Option<&'a Arc<dyn ClientServices>>,
}

/// What a caller's policy narrows a tool's grants to (nothing, for a
/// requester without identity or an entry that does not narrow).
#[derive(Clone, Copy, Default)]
pub struct CallerLimits<'a> {
    /// The entry's name, for refusal messages.
    pub name: &'a str,
    /// The directories its calls may reach at most.
    pub roots: Option<&'a [Root]>,
    /// The hosts its calls may reach at most.
    pub hosts: Option<&'a Arc<[network::HostPattern]>>,
}

/// One tool's grants, prepared for one call.
pub struct CallGrants {
    /// The directories the call may reach: the grant narrowed by the
    /// client's roots.
    pub files: Vec<EffectiveRoot>,
    /// Its environment.
    pub env: Arc<[EnvVar]>,
    /// Its `wasi:config/store` values.
    pub config: Arc<[EnvVar]>,
    /// The `wasi:http` hooks that check and send every request.
    pub network: NetGate,
    /// The client's services, as far as the tool may use them.
    pub services: ClientAccess,
    /// The tool's secret values, scrubbed from everything the host logs.
    pub secrets: Arc<[String]>,
    /// The files, listings and connections the call holds open, under
    /// its cap (shared with `network`).
    pub handles: Arc<OsHandles>,
}

impl Grants {
    /// These grants prepared for one call.
    pub fn prepare(&self, call: CallContext<'_>) -> CallGrants {
        let secrets: Arc<[String]> = if self.config.secret_values.is_empty() {
            self.env.secrets()
        } else {
            self.secrets().map(str::to_owned).collect()
        };
        let handles = Arc::new(OsHandles::default());
        CallGrants {
            files: files::effective_roots(&self.files, call.caller.roots, call.client_roots),
            env: Arc::clone(&self.env.vars),
            config: Arc::clone(&self.config.vars),
            network: NetGate::new(
                Arc::from(call.tool),
                Arc::clone(&self.network),
                Arc::clone(&secrets),
                Arc::clone(&handles),
            )
            .narrowed(call.caller.hosts.map(|hosts| (call.caller.name, hosts))),
            services: self.services.prepare(call.client),
            secrets,
            handles,
        }
    }

    /// The secret values among the tool's variables.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        self.env
            .secret_values
            .iter()
            .chain(self.config.secret_values.iter())
            .map(String::as_str)
    }
}

impl CallGrants {
    /// Nothing at all: what loading (`describe`, listing) and serving
    /// resources and prompts run with.
    pub fn none() -> CallGrants {
        // Every instance made ahead of a call starts with these.
        static NONE: std::sync::LazyLock<Grants> = std::sync::LazyLock::new(Grants::default);
        NONE.prepare(CallContext {
            tool: "(loading or serving a resource or prompt)",
            client_roots: None,
            caller: CallerLimits::default(),
            client: None,
        })
    }

    /// Nothing but `roots` (read-only, the operator's `[resources]
    /// roots`): what a resource read runs with.
    pub fn files_only(roots: &[Root]) -> CallGrants {
        Grants {
            files: roots.to_vec(),
            ..Grants::default()
        }
        .prepare(CallContext {
            tool: "(reading a resource)",
            client_roots: None,
            caller: CallerLimits::default(),
            client: None,
        })
    }

    /// Nothing but the client's services (for elicitation and roots;
    /// never sampling): what a prompt get runs with.
    pub fn client_only(
        client: Option<&std::sync::Arc<dyn crate::call::ClientServices>>,
    ) -> CallGrants {
        Grants::default().prepare(CallContext {
            tool: "(serving a prompt)",
            client_roots: None,
            caller: CallerLimits::default(),
            client,
        })
    }

    /// Give the WASI context what it carries of these grants: the
    /// environment. The directories are not preopened here: the sandbox
    /// opens them ([`files::open`]) when the guest first asks for them.
    pub fn apply(&self, wasi: &mut WasiCtxBuilder) {
        env::apply(&self.env, wasi);
    }
}
