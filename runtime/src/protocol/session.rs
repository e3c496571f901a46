//! `tools/call` on a session rmcp serves (stdio), run beside rmcp's service
//! loop rather than through it.
//!
//! rmcp's loop hands every request from task to task: from the transport's
//! reader to the loop, from the loop to a handler task it spawns, from the
//! handler back to the loop, and from the loop to a task that writes the
//! reply. On a VM each hand-off can wake the other core, and four of them
//! cost more than the sandboxed call itself (`docs/benchmarks.md`, "Calls
//! beside rmcp's loop"). A `tools/call` this path takes is instead spawned
//! once, by the transport's reader, as a task that runs the same handler
//! rmcp would run ([`Service::handle_request`], with every check rmcp makes
//! there) on a [`RequestContext`] built as rmcp builds it, with the
//! session's own [`Peer`]: so elicitation, roots, progress and log
//! notifications go to the client exactly as before, through rmcp's loop.
//! The reply is written by that same task.
//!
//! Invariant: a request this path takes gets the answer rmcp would give
//! it, or none where rmcp would send none. What rmcp's loop adds around its
//! handler is either done here the same way (the request's cancellation
//! token, cancelled by the client's `notifications/cancelled` or at the
//! session's end after a drain; no answer to a cancelled request; the token
//! cancelled once the handler returns) or cannot matter on a session that
//! passed [`SessionCalls::take`]'s checks: the task-local naming the
//! request's protocol version (only a request naming no version, or the
//! session's own, is taken, so the fallback rmcp reads when it is unset
//! gives the same version) and the marker on outbound requests naming
//! their originating request (read only by rmcp's HTTP server, never
//! written on the wire). Anything else (every other method, a session that
//! began without `initialize`, a request id already in flight here) is left
//! to rmcp unchanged.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientNotification, ClientRequest, GetExtensions as _, GetMeta as _, JsonRpcNotification,
    JsonRpcRequest, RequestId, RequestMetaObject, ServerJsonRpcMessage,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer, Service as _};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::McpServer;

/// How long calls may go on answering after the client closed its input:
/// rmcp's own drain for a closed session.
pub const CLOSED_DRAIN: Duration = Duration::from_secs(5);
/// And after the server was asked to stop: rmcp's drain for a cancelled one.
pub const STOPPED_DRAIN: Duration = Duration::from_secs(2);

/// The calls one session runs beside rmcp's loop.
pub struct SessionCalls {
    server: McpServer,
    /// Set once rmcp has finished the session's handshake.
    peer: OnceLock<Peer<RoleServer>>,
    /// Told when `peer` is set.
    opened: tokio::sync::Notify,
    /// Each call in flight, by request id, with its token and its number
    /// (a client may use a cancelled call's id again while that call ends).
    in_flight: Arc<Mutex<HashMap<RequestId, (u64, CancellationToken)>>>,
    /// The number of the next call taken.
    next: AtomicU64,
    /// Parent of every call's token: cancelled when the session ends.
    ended: CancellationToken,
    calls: TaskTracker,
    /// When the client closed its input, if it has.
    input_closed: OnceLock<Instant>,
}

impl SessionCalls {
    /// None yet: requests go to rmcp until [`SessionCalls::open`].
    pub fn new(server: McpServer) -> Self {
        SessionCalls {
            server,
            peer: OnceLock::new(),
            opened: tokio::sync::Notify::new(),
            in_flight: Arc::default(),
            next: AtomicU64::new(0),
            ended: CancellationToken::new(),
            calls: TaskTracker::new(),
            input_closed: OnceLock::new(),
        }
    }

    /// rmcp has started the session with `peer`.
    pub fn open(&self, peer: Peer<RoleServer>) {
        let _ = self.peer.set(peer);
        self.opened.notify_waiters();
    }

    /// Until [`SessionCalls::open`], or at most `limit`. The reader waits
    /// here after handing rmcp `notifications/initialized`: rmcp ends the
    /// handshake on it, and a call the reader read before the session
    /// opened would go to rmcp's loop, whose pool keys answers by id
    /// alone: a cancelled call's answer went out for the next call under
    /// its id.
    pub async fn opened(&self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            loop {
                // Created before the check: `notify_waiters` reaches a
                // `Notified` from its creation on.
                let notified = self.opened.notified();
                if self.peer.get().is_some() {
                    return;
                }
                notified.await;
            }
        })
        .await;
    }

    /// Run `request` here, handing its answer to `reply`, or give it back
    /// for rmcp to answer. Must be called on the runtime.
    // What is given back is the request passed in, moved: boxing it would
    // allocate on every call to save a copy on the rare one given back.
    #[allow(clippy::result_large_err)]
    pub fn take<R, F>(
        &self,
        mut request: JsonRpcRequest<ClientRequest>,
        reply: R,
    ) -> Result<(), JsonRpcRequest<ClientRequest>>
    where
        R: FnOnce(ServerJsonRpcMessage) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let Some(peer) = self.peer.get() else {
            return Err(request);
        };
        if !matches!(request.request, ClientRequest::CallToolRequest(_)) {
            return Err(request);
        }
        // A session that negotiated with `initialize`; a request naming no
        // other version than the one negotiated (see the invariant).
        let Some(info) = peer.peer_info() else {
            return Err(request);
        };
        if request
            .request
            .get_meta()
            .protocol_version()
            .is_some_and(|version| version != info.protocol_version)
        {
            return Err(request);
        }
        let id = request.id.clone();
        let request_ct = self.ended.child_token();
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        match self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(id.clone())
        {
            Entry::Occupied(_) => return Err(request),
            Entry::Vacant(slot) => {
                slot.insert((number, request_ct.clone()));
            }
        }
        // As rmcp builds it: the request's `_meta` and extensions moved into
        // the context, the handler's token a child of the request's. The
        // `_meta` is taken out, not through `get_meta_mut`, which for a
        // request without one allocates an extension map and an empty
        // `_meta` only to have it taken (three allocations a call).
        let mut context = RequestContext::new(id.clone(), peer.clone());
        context.ct = request_ct.child_token();
        context.meta = request
            .request
            .extensions_mut()
            .remove::<RequestMetaObject>()
            .unwrap_or_default();
        context.extensions = std::mem::take(request.request.extensions_mut());
        let server = self.server.clone();
        let in_flight = Arc::clone(&self.in_flight);
        self.calls.spawn(async move {
            crate::phases::mark(crate::phases::Phase::Handler);
            let result = server.handle_request(request.request, context).await;
            crate::phases::mark(crate::phases::Phase::Handled);
            let message = match result {
                Ok(result) => ServerJsonRpcMessage::response(result, id.clone()),
                Err(error) => ServerJsonRpcMessage::error(error, Some(id.clone())),
            };
            // A request the client cancelled is not answered.
            let token = {
                let mut in_flight = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
                match in_flight.get(&id) {
                    Some((taken, _)) if *taken == number => in_flight.remove(&id),
                    // Cancelled, and perhaps the id used again since.
                    _ => None,
                }
            };
            if let Some((_, token)) = token {
                token.cancel();
                reply(message).await;
            } else {
                tracing::debug!(%id, "dropping response for cancelled request");
            }
        });
        Ok(())
    }

    /// Take `notification` here if it is one a call taken here must see in
    /// order: `notifications/roots/list_changed`, counted before the reader
    /// reads the next line, so a call sent after it never runs on the roots
    /// it made stale (through rmcp's loop, the count would be made by a task
    /// of its own, perhaps after such a call began). Else give it back.
    pub fn take_notification(
        &self,
        notification: JsonRpcNotification<ClientNotification>,
    ) -> Result<(), JsonRpcNotification<ClientNotification>> {
        // One rmcp would route to a subscription of its own is left to it.
        match (&notification.notification, self.peer.get()) {
            (ClientNotification::RootsListChangedNotification(_), Some(peer))
                if notification
                    .notification
                    .get_meta()
                    .subscription_id()
                    .is_none() =>
            {
                self.server.roots_changed(peer);
                Ok(())
            }
            _ => Err(notification),
        }
    }

    /// The client cancelled request `id`.
    pub fn cancelled(&self, id: &RequestId) {
        let taken = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        if let Some((_, token)) = taken {
            tracing::info!(%id, "cancelled");
            token.cancel();
        }
    }

    /// The client closed its input: calls in flight have
    /// [`CLOSED_DRAIN`] from now to answer.
    pub fn input_closed(&self) {
        let _ = self.input_closed.set(Instant::now());
    }

    /// The session is over: wait for the calls in flight to answer, until
    /// `drain` after the client closed its input (or from now), then cancel
    /// those still running (their answers, if any, are still written).
    pub async fn close(&self, drain: Duration) {
        self.calls.close();
        let from = self
            .input_closed
            .get()
            .copied()
            .unwrap_or_else(Instant::now);
        let deadline = tokio::time::Instant::from_std(from + drain);
        if tokio::time::timeout_at(deadline, self.calls.wait())
            .await
            .is_err()
        {
            tracing::warn!("timed out draining in-flight responses");
        }
        self.ended.cancel();
    }
}
