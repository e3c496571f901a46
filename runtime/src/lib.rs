//! toolcage: an MCP server that runs every tool as a sandboxed WebAssembly
//! component.
//!
//! # Layout
//!
//! - [`agent`]: for agents that do not speak MCP: the tools as function
//!   declarations (OpenAI, Anthropic, Gemini).
//! - [`config`]: the operator's TOML file, parsed then validated into
//!   [`config::Config`] (limits and grants per tool, folders).
//! - [`grants`]: what a tool may reach, one capability per file (files,
//!   network, environment, client services): validated at load, prepared
//!   per call, applied to the call's store.
//! - [`call`]: the types a call produces and consumes, shared by the
//!   sandbox, dispatch and the protocol.
//! - [`sandbox`]: the only module that runs guest code; engine, linker,
//!   compile cache, per-call stores and limits, trap classification, the
//!   component kinds.
//! - [`catalog`]: loads the tools folder into an immutable
//!   [`catalog::Catalog`] (descriptors validated, schemas compiled, name
//!   clashes resolved); the [`catalog::Registry`] holds the current one.
//! - [`schema`]: tools' JSON Schemas, compiled under limits at load and
//!   validated under a step budget.
//! - [`template`]: resource URI templates, matched in linear time.
//! - [`dispatch`]: one call, end to end: argument validation, permits, the
//!   sandboxed run, output checks, the audit record.
//! - [`services`]: elicitation and sampling for tools: requests to the
//!   client (2025-x) or replay with signed state (2026-07-28).
//! - [`protocol`]: the MCP handler over rmcp; the only module that knows
//!   the wire format.
//! - [`transport`]: stdio and Streamable HTTP (behind a router), started
//!   by [`Host::serve`].
//! - [`journal`]: the call journal (one JSON line per call).
//! - [`metrics`]: the server's Prometheus metrics (calls, costs, limits,
//!   refusals, reloads, admission, tasks).
//! - [`redact`]: the scrubbing and truncation every tool-controlled text
//!   passes before a log line or a journal field.
//! - [`terminal`]: text from tools, clients and models made safe to print
//!   on a terminal (escape sequences and bidirectional overrides shown, not
//!   obeyed).
//! - [`json`]: JSON from untrusted sources, parsed under a byte budget and
//!   measured as it will be sent.
//! - [`watch`]: hot reload of the tools folder, the config file and the
//!   lock, and the files resources come from.
//! - [`source`]: installing tools from OCI registries, URLs and files
//!   (`add`, `update`, `remove`, `publish`, `[[sources]]`), every byte
//!   checked, signatures verified, locked.
//! - [`outbound`]: the host's own HTTP requests (registries, an
//!   authorization server), under the rules tools' requests follow.
//!
//! The binary (`cli/`, not part of this library) parses the command line
//! and calls [`Host::load`] and [`Host::serve`].

#![deny(missing_docs)]

pub mod agent;
pub mod alloc;
pub mod auth;
pub mod call;
pub mod catalog;
pub mod config;
pub mod dispatch;
pub mod grants;
pub mod journal;
pub mod json;
pub mod metrics;
pub mod outbound;
pub mod phases;
pub mod protocol;
pub mod redact;
pub mod sandbox;
pub mod scaffold;
pub mod schema;
pub mod services;
pub mod source;
pub mod template;
pub mod terminal;
pub mod transport;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

use crate::catalog::Registry;
use crate::config::Config;
use crate::dispatch::{Dispatcher, Lanes};
use crate::sandbox::{Sandbox, SandboxSettings};
pub use crate::transport::Transport;

/// Where things are and how they are limited; built by `main` from flags,
/// the config file and defaults, in that order of precedence.
#[derive(Debug, Clone)]
pub struct Options {
    /// The tools folder.
    pub tools_dir: PathBuf,
    /// The compile cache folder, or `None` for no cache.
    pub cache_dir: Option<PathBuf>,
    /// The validated configuration (with `cli_grants` applied).
    pub config: Config,
    /// Roots granted on the command line (`--root`), kept to re-apply when
    /// the config file is reloaded.
    pub cli_grants: Vec<config::Root>,
    /// Meter guest instructions with fuel (`--no-fuel` turns it off).
    pub fuel_metering: bool,
    /// Where calls go when the thread that read them is busy: set when the
    /// server runs on a one-thread runtime (stdio, see `main.rs`), so a
    /// lone call runs on that thread; `None` runs each call in its own task
    /// of the current (multi-thread) runtime. See `dispatch::Lanes`.
    pub spill: Option<tokio::runtime::Handle>,
}

/// The server's request budget: request text held at once, across all
/// clients and transports (`server.max_pending_request_mib`). A request
/// holds its share from when it is read until it is answered, so however
/// many clients send however much, the host holds at most this much request
/// text (and its parsed form, a small multiple of it).
pub struct RequestBudget {
    permits: Arc<tokio::sync::Semaphore>,
    /// The whole budget, in permits of [`RequestBudget::UNIT`] bytes.
    total: u32,
}

impl RequestBudget {
    /// Bytes per permit.
    pub const UNIT: usize = 1024;

    /// A budget of `bytes`.
    pub fn new(bytes: u64) -> Self {
        let total = u32::try_from(bytes / Self::UNIT as u64)
            .unwrap_or(u32::MAX)
            .clamp(1, tokio::sync::Semaphore::MAX_PERMITS as u32);
        RequestBudget {
            permits: Arc::new(tokio::sync::Semaphore::new(total as usize)),
            total,
        }
    }

    /// Permits for a message of `bytes` (at most the whole budget, so the
    /// largest message still gets in, alone).
    fn units(&self, bytes: usize) -> u32 {
        u32::try_from(bytes.div_ceil(Self::UNIT).max(1))
            .unwrap_or(u32::MAX)
            .min(self.total)
    }

    /// Hold `bytes`, waiting while others hold the budget.
    pub async fn reserve(&self, bytes: usize) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.permits)
            .acquire_many_owned(self.units(bytes))
            .await
            .ok()
    }

    /// Hold `bytes` if the budget has them now.
    pub fn try_reserve(&self, bytes: usize) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.permits)
            .try_acquire_many_owned(self.units(bytes))
            .ok()
    }
}

/// A loaded tool host: sandbox, registry and dispatcher.
pub struct Host {
    /// The options it was loaded with.
    pub options: Options,
    /// The engine and compile cache.
    pub sandbox: Arc<Sandbox>,
    /// The current tool set.
    pub registry: Arc<Registry>,
    /// Runs calls.
    pub dispatcher: Arc<Dispatcher>,
    /// Tells connected clients when the tool set changes.
    pub notifier: Arc<protocol::Notifier>,
    /// MCP tasks: calls that outlive their requests, across connections.
    pub tasks: Arc<protocol::Tasks>,
    /// Notified after every reload: the files resources come from are
    /// watched anew (`watch::resources`).
    pub resource_refresh: tokio::sync::Notify,
    /// Request text in flight, across transports.
    pub request_budget: Arc<RequestBudget>,
}

/// What the server keeps for itself of the process's open files, besides
/// its HTTP connections: journal, compile cache, watches, listeners, pipes.
const RESERVED_FILES: u64 = 256;

/// Raise the process's limit on open files and set each call's cap of open
/// handles so that every call at its cap, every HTTP connection and the
/// server's own files fit (`grants::handles`).
fn open_files_budget(config: &config::Config) {
    let calls = config.server.max_concurrent_calls;
    let connections = u64::try_from(config.http.max_connections).unwrap_or(u64::MAX);
    let budget = grants::handles::budget(calls, connections.saturating_add(RESERVED_FILES));
    if budget.short {
        tracing::warn!(
            limit = budget.process,
            max_concurrent_calls = calls,
            max_connections = connections,
            per_call = budget.per_call,
            "the process may open too few files for its calls and connections: each call may \
             still hold its minimum, so together they can exhaust it; raise `ulimit -n` (the \
             hard limit) or lower `server.max_concurrent_calls`"
        );
    } else {
        tracing::debug!(
            limit = budget.process,
            raised_from = budget.before,
            per_call = budget.per_call,
            "open files budgeted"
        );
    }
}

impl Host {
    /// Build the sandbox and load every tool in the tools folder. A missing
    /// folder is logged and serves no tools; broken files are skipped.
    ///
    /// # Errors
    ///
    /// The engine cannot be created.
    pub async fn load(options: Options) -> anyhow::Result<Host> {
        open_files_budget(&options.config);
        let sandbox = Arc::new(
            Sandbox::new(&SandboxSettings {
                max_concurrent_calls: options.config.server.max_concurrent_calls,
                ready_instances: options.config.server.ready_instances,
                cache_dir: options.cache_dir.clone(),
                fuel_metering: options.fuel_metering,
                memory_reset: options.config.server.memory_reset,
            })
            .context("cannot create the WebAssembly engine")?,
        );
        if !options.tools_dir.is_dir() {
            tracing::warn!(
                dir = %options.tools_dir.display(),
                "the tools folder does not exist; serving no tools"
            );
        }
        // On the spill workers when there are some: the files load in
        // parallel there, not one after another on the serving thread.
        let catalog = match &options.spill {
            Some(spill) => {
                let (sandbox, dir, config) = (
                    Arc::clone(&sandbox),
                    options.tools_dir.clone(),
                    options.config.clone(),
                );
                spill
                    .spawn(async move { catalog::load_dir(&sandbox, &dir, &config, None).await })
                    .await
                    .unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()))
            }
            None => catalog::load_dir(&sandbox, &options.tools_dir, &options.config, None).await,
        };
        tracing::info!(
            dir = %options.tools_dir.display(),
            tools = catalog.tools.len(),
            files = catalog.files.len(),
            "tools loaded"
        );
        let registry = Arc::new(Registry::new(catalog));
        let lanes = match &options.spill {
            Some(spill) => Lanes::inline_first(spill.clone()),
            None => Lanes::default(),
        };
        let dispatcher = Arc::new(
            Dispatcher::new(
                Arc::clone(&sandbox),
                Arc::clone(&registry),
                Arc::new(options.config.clone()),
            )
            .with_lanes(lanes),
        );
        dispatcher
            .metrics()
            .tools_served(registry.snapshot().tools.len());
        let request_budget = Arc::new(RequestBudget::new(
            options.config.server.max_pending_request_bytes,
        ));
        Ok(Host {
            options,
            sandbox,
            registry,
            tasks: protocol::Tasks::new(Arc::clone(&dispatcher)).map_err(anyhow::Error::msg)?,
            dispatcher,
            resource_refresh: tokio::sync::Notify::new(),
            notifier: Arc::new(protocol::Notifier::default()),
            request_budget,
        })
    }

    /// Serve MCP over `transport` until its client leaves (stdio: stdin
    /// closed) or SIGTERM/SIGINT arrives, reloading tools and config as
    /// they change; then end the calls in flight (over HTTP, after letting
    /// requests finish up to the configured grace) and write the journal
    /// out. The one place every transport is started.
    ///
    /// # Errors
    ///
    /// HTTP: the settings are invalid or the address cannot be bound.
    /// Stdio: the client closed the connection before starting a session,
    /// or the transport failed.
    pub async fn serve(self: &Arc<Self>, transport: Transport) -> anyhow::Result<()> {
        // What start-up freed goes back now (each file's load gave back
        // its own thread's; this takes what was freed across threads);
        // from here freed pages wait a moment, as calls reuse them.
        crate::alloc::give_back();
        crate::alloc::serving();
        let _watch = self.watch();
        let served = match transport {
            Transport::Stdio => transport::stdio::serve(self).await,
            Transport::Http(addr) => {
                transport::http::serve(Arc::clone(self), addr, transport::shutdown_signal()).await
            }
        };
        self.dispatcher.shutdown().await;
        served
    }

    /// Start hot reload of the tools folder and the config file; `None`
    /// (logged) when the platform watcher cannot be created. Watching stops
    /// when the handle drops.
    fn watch(self: &Arc<Self>) -> Option<watch::WatchHandle> {
        let handle = match watch::watch(Arc::clone(self)) {
            Ok(handle) => handle,
            Err(error) => {
                tracing::error!(%error, "cannot watch the tools folder; hot reload is off");
                return None;
            }
        };
        match watch::resources::watch(Arc::clone(self)) {
            Ok(task) => Some(handle.with(task)),
            Err(error) => {
                tracing::error!(%error, "cannot watch the files resources come from; their subscribers will not hear of changes");
                Some(handle)
            }
        }
    }
}
