//! The transports MCP is served over: stdio (one client, the process that
//! started the server) and Streamable HTTP (many clients, behind a router
//! that gives each endpoint its own authentication rule).
//!
//! Every transport is started the same way, by [`crate::Host::serve`]: hot
//! reload is watched for the whole run, the transport serves until its
//! client leaves or a signal arrives, then the calls still running are
//! ended and the journal is written out. A transport names itself
//! ([`Transport::name`]) to the protocol layer, which records that name
//! in every journal line.
//!
//! Invariant: no transport holds an unbounded amount of anything a client
//! sends or fails to read: lines and bodies are capped, requests in flight
//! hold their share of the server's request budget, and a client that
//! stops reading stalls only itself.

pub mod http;
pub mod rest;
pub mod router;
pub mod stdio;

use std::net::SocketAddr;

/// How MCP is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Newline-delimited JSON-RPC on stdin and stdout.
    Stdio,
    /// Streamable HTTP, listening on this address.
    Http(SocketAddr),
}

impl Transport {
    /// The name the journal records for calls that came this way.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Stdio => stdio::NAME,
            Transport::Http(_) => http::NAME,
        }
    }
}

/// Resolves on SIGTERM or SIGINT.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            tracing::warn!("cannot install signal handlers; stop with SIGKILL");
            std::future::pending::<()>().await;
        }
    }
}
