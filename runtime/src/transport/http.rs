//! Streamable HTTP: MCP at `POST/GET/DELETE /mcp`, behind the router
//! (`router`).
//!
//! rmcp's `StreamableHttpService` does the protocol: 2026-07-28 requests are
//! served statelessly (each request carries its version in `_meta`), older
//! clients get sessions (`Mcp-Session-Id`). It also validates `Host`
//! (DNS-rebinding protection), `Origin`, the body size and the
//! `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` headers. This module puts
//! in front of it what a network-facing server needs besides:
//!
//! - authentication (`auth`): the static bearer token or OAuth access
//!   tokens, one of them required for any bind that is not loopback (the
//!   server refuses to start without); with OAuth, the protected resource
//!   metadata at its well-known paths, and each initialize-era session
//!   bound to the caller that opened it;
//! - a cap on requests in progress: past it, `503` with `Retry-After`, never
//!   an unbounded queue;
//! - graceful shutdown: on SIGTERM/SIGINT `/readyz` turns 503 at once, the
//!   server serves on for `http.drain_delay_ms` (so a load balancer stops
//!   sending), then stops accepting, lets requests in flight finish up to a
//!   deadline, and cancels what is left;
//! - probes and metrics: `/healthz` (alive) and `/readyz` (serving, not
//!   draining) open to anyone (they say nothing else), `/metrics` (the
//!   Prometheus text format) under the same token as `/mcp` unless
//!   `http.metrics` says `open` or `off`.
//!
//! Secure defaults: the `Host` allow-list is the loopback names plus the
//! bound address; any request with an `Origin` header must match the
//! allow-list, which is empty unless configured (browsers always send
//! `Origin`; non-browser clients do not).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower_service::Service as _;

use super::router::{Auth, Body, Document, Endpoint, Reply, Router, busy, plain};
use crate::Host;
use crate::auth::{Authenticator, Caller};
use crate::config::{HttpConfig, MetricsAccess};
use crate::protocol::McpServer;

/// The MCP endpoint's path.
pub const ENDPOINT: &str = "/mcp";

/// This transport's name in the journal.
pub const NAME: &str = "http";

/// Everything the HTTP server needs besides the host: where to listen and
/// the `[http]` section of the config.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Allow-lists, token, caps and shutdown grace.
    pub config: HttpConfig,
}

impl HttpSettings {
    /// Check the settings before binding.
    ///
    /// # Errors
    ///
    /// A non-loopback address without a token or `[http.oauth]`.
    pub fn validate(&self) -> anyhow::Result<()> {
        if !self.addr.ip().is_loopback()
            && self.config.token.is_none()
            && self.config.oauth.is_none()
        {
            anyhow::bail!(
                "refusing to listen on `{}` without authentication: set `http.token_file` \
                 or `http.token_env` in the config (never on the command line), or \
                 `[http.oauth]`, or bind a loopback address such as 127.0.0.1",
                self.addr
            );
        }
        Ok(())
    }
}

/// Serve MCP over HTTP on `addr` until `shutdown` resolves, then drain.
///
/// # Errors
///
/// The settings are invalid or the address cannot be bound.
pub async fn serve(
    host: Arc<Host>,
    addr: SocketAddr,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let settings = HttpSettings {
        addr,
        config: host.options.config.http.clone(),
    };
    settings.validate()?;
    let listener = TcpListener::bind(settings.addr)
        .await
        .with_context(|| format!("cannot listen on `{}`", settings.addr))?;
    let local = listener.local_addr()?;
    // The one line tests and operators look for; the port is real even
    // when `:0` was asked for.
    tracing::info!(addr = %local, "listening on http://{local}{ENDPOINT}");

    let http = &settings.config;
    let mut allowed_hosts = http.allowed_hosts.clone();
    for name in ["localhost", "127.0.0.1", "::1"] {
        allowed_hosts.push(name.to_owned());
    }
    if !local.ip().is_unspecified() {
        allowed_hosts.push(local.ip().to_string());
    }
    // The resource URI is how clients reach this server (through a proxy,
    // perhaps): its authority is a `Host` they send.
    if let Some(authority) = http
        .oauth
        .as_ref()
        .and_then(|oauth| oauth.resource.parse::<hyper::Uri>().ok())
        .and_then(|uri| uri.authority().map(ToString::to_string))
    {
        allowed_hosts.push(authority);
    }
    // A page the server itself serves (same scheme, host and port) is not a
    // cross-origin caller; every other origin must be configured.
    let mut allowed_origins = http.allowed_origins.clone();
    for name in ["127.0.0.1", "localhost", "[::1]"] {
        allowed_origins.push(format!("http://{name}:{}", local.port()));
    }
    let calls_cancel = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts.clone())
        .with_allowed_origins(allowed_origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(http.max_body_bytes)
        .with_json_response(true)
        .with_cancellation_token(calls_cancel.clone());
    let sessions = Arc::new(LocalSessionManager::default());
    let mcp = {
        let dispatcher = Arc::clone(&host.dispatcher);
        let notifier = Arc::clone(&host.notifier);
        let tasks = Arc::clone(&host.tasks);
        StreamableHttpService::new(
            move || {
                Ok(McpServer::new(
                    Arc::clone(&dispatcher),
                    Arc::clone(&notifier),
                    Arc::clone(&tasks),
                    NAME,
                ))
            },
            Arc::clone(&sessions),
            config,
        )
    };
    // Requests in progress, `/mcp` and the REST face together.
    let permits = Arc::new(Semaphore::new(http.max_concurrent_requests));
    let direct_hosts = allowed_hosts
        .iter()
        .filter_map(|host| Authority::allowed(host))
        .collect();
    let endpoint = Arc::new(McpEndpoint {
        permits: Arc::clone(&permits),
        answers: Arc::new(Semaphore::new(http.max_concurrent_requests)),
        budget: Arc::clone(&host.request_budget),
        max_body_bytes: http.max_body_bytes,
        body_timeout: Duration::from_millis(http.body_timeout_ms),
        sessions,
        max_sessions: http.max_sessions,
        initializing: Arc::default(),
        owners: Arc::default(),
        mcp,
        direct: McpServer::new(
            Arc::clone(&host.dispatcher),
            Arc::clone(&host.notifier),
            Arc::clone(&host.tasks),
            NAME,
        ),
        direct_hosts,
        cancel: calls_cancel.clone(),
        metrics: Arc::clone(host.dispatcher.metrics()),
        replica_name: http.replica_name.clone(),
    });
    let auth = Arc::new(Authenticator::new(http));
    // The tools are loaded (`Host::load` ran): ready until a drain starts.
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut router = Router::new(Arc::clone(&auth))
        .route(ENDPOINT, Auth::Required, endpoint)
        .route(HEALTH, Auth::Open, Arc::new(Probe(None)))
        .route(READY, Auth::Open, Arc::new(Probe(Some(Arc::clone(&ready)))));
    if http.rest.enabled {
        let rest = Arc::new(super::rest::RestEndpoint {
            dispatcher: Arc::clone(&host.dispatcher),
            permits: Arc::clone(&permits),
            budget: Arc::clone(&host.request_budget),
            max_body_bytes: http.max_body_bytes,
            body_timeout: Duration::from_millis(http.body_timeout_ms),
            allowed_origins: allowed_origins.clone(),
            cancel: calls_cancel.clone(),
        });
        router = router
            .route(
                super::rest::CAPABILITIES,
                Auth::Required,
                Arc::clone(&rest) as Arc<dyn Endpoint>,
            )
            .route(super::rest::TOOL, Auth::Required, rest);
    }
    let metrics = Arc::new(MetricsEndpoint(Arc::clone(host.dispatcher.metrics())));
    router = match http.metrics {
        MetricsAccess::Token => router.route(METRICS, Auth::Required, metrics),
        MetricsAccess::Open => router.route(METRICS, Auth::Open, metrics),
        MetricsAccess::Off => router,
    };
    if let Some(oauth) = auth.oauth() {
        oauth.start();
        let document = Arc::new(Document(bytes::Bytes::from(oauth.metadata().to_string())));
        for path in oauth.metadata_paths() {
            router = router.route(path, Auth::Open, Arc::clone(&document) as Arc<dyn Endpoint>);
        }
    }
    let router = Arc::new(router);

    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    // A connection that does not send a whole request head in time (a slow
    // client, or an idle keep-alive one) is closed.
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Duration::from_millis(http.idle_timeout_ms));
    let connections = Arc::new(Semaphore::new(http.max_connections));
    tokio::pin!(shutdown);
    // Set at SIGTERM/SIGINT: when the drain delay ends.
    let mut stop_at: Option<tokio::time::Instant> = None;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown, if stop_at.is_none() => {
                ready.store(false, std::sync::atomic::Ordering::SeqCst);
                tracing::info!(
                    drain_delay_ms = http.drain_delay_ms,
                    "draining: /readyz answers 503; serving on until the drain delay ends"
                );
                stop_at = Some(tokio::time::Instant::now() + Duration::from_millis(http.drain_delay_ms));
                continue;
            }
            () = sleep_until(stop_at), if stop_at.is_some() => break,
        };
        let Ok(slot) = Arc::clone(&connections).try_acquire_owned() else {
            host.dispatcher.metrics().rejected("connections");
            refuse_connection(&stream, http.max_connections);
            continue;
        };
        // Replies and SSE events are small writes: with Nagle's algorithm a
        // second event waits for the client's (delayed) ACK of the first.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
        }
        let router = Arc::clone(&router);
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let router = Arc::clone(&router);
            async move { Ok::<_, Infallible>(router.handle(request).await) }
        });
        let connection = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
            drop(slot);
        });
    }
    tracing::info!(
        grace_ms = http.shutdown_grace_ms,
        "shutting down: finishing requests in flight"
    );
    drop(listener);
    let grace = Duration::from_millis(http.shutdown_grace_ms);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still running at the shutdown deadline; cancelling them");
    }
    calls_cancel.cancel();
    Ok(())
}

/// Sleep until `at` (forever without one).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The liveness probe's path: 200 while the process serves.
pub const HEALTH: &str = "/healthz";

/// The readiness probe's path: 200 while the server takes requests, 503
/// from SIGTERM/SIGINT on.
pub const READY: &str = "/readyz";

/// The metrics' path.
pub const METRICS: &str = "/metrics";

/// `/healthz` (`None`) or `/readyz` (ready while the flag is set). They
/// reveal nothing but that, and cost nothing.
struct Probe(Option<Arc<std::sync::atomic::AtomicBool>>);

impl Endpoint for Probe {
    fn handle(&self, request: Request<Incoming>) -> Reply<'_> {
        let ready = self
            .0
            .as_ref()
            .is_none_or(|ready| ready.load(std::sync::atomic::Ordering::SeqCst));
        Box::pin(async move {
            if request.method() != hyper::Method::GET && request.method() != hyper::Method::HEAD {
                return plain(StatusCode::METHOD_NOT_ALLOWED, "use GET");
            }
            match (&self.0, ready) {
                (None, _) => plain(StatusCode::OK, "ok"),
                (Some(_), true) => plain(StatusCode::OK, "ready"),
                (Some(_), false) => plain(StatusCode::SERVICE_UNAVAILABLE, "draining"),
            }
        })
    }
}

/// `/metrics`: the Prometheus text format.
struct MetricsEndpoint(Arc<crate::metrics::Metrics>);

impl Endpoint for MetricsEndpoint {
    fn handle(&self, request: Request<Incoming>) -> Reply<'_> {
        Box::pin(async move {
            if request.method() != hyper::Method::GET {
                return plain(StatusCode::METHOD_NOT_ALLOWED, "use GET");
            }
            let mut response =
                Response::new(Full::new(bytes::Bytes::from(self.0.encode())).boxed());
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
            );
            response
        })
    }
}

/// Answer a connection past `http.max_connections` with a 503 and close
/// it: one write that never waits (a client that does not read gets the
/// close alone), so refusing costs nothing per connection.
fn refuse_connection(stream: &tokio::net::TcpStream, limit: usize) {
    tracing::warn!(limit, "too many connections; refusing a new one");
    let _ = stream.try_write(
        b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: text/plain\r\n\
          content-length: 36\r\nconnection: close\r\n\r\ntoo many connections; retry shortly\n",
    );
}

/// MCP: admission (requests in progress, the body within its size and
/// time limits, the request budget, the session cap) in front of rmcp.
struct McpEndpoint {
    /// Requests in progress (`http.max_concurrent_requests`), each held
    /// until its response has been sent.
    permits: Arc<Semaphore>,
    /// Past that cap, as many slots again for reading a POST within a
    /// session that may be a client's answer (see `admit`).
    answers: Arc<Semaphore>,
    /// The server-wide request budget (shared with stdio).
    budget: Arc<crate::RequestBudget>,
    max_body_bytes: usize,
    body_timeout: Duration,
    /// rmcp's sessions, to count them.
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    /// `initialize` requests past the session check and not yet answered.
    initializing: Arc<std::sync::atomic::AtomicUsize>,
    /// Who opened each session (by [`Caller::key`]), when the server knows
    /// callers: a session is only ever used by the caller that opened it.
    owners: Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    mcp: StreamableHttpService<McpServer, LocalSessionManager>,
    /// Answers a plain 2026-07-28 `tools/call` without rmcp's per-request
    /// service (`protocol::direct`).
    direct: McpServer,
    /// The `Host`s rmcp allows (the same list it was given), for requests
    /// answered without it.
    direct_hosts: Vec<Authority>,
    /// Cancels calls in flight at shutdown (rmcp's token too).
    cancel: CancellationToken,
    /// Where admission rejections are counted.
    metrics: Arc<crate::metrics::Metrics>,
    /// What this replica's session ids start with, before a `.`.
    replica_name: Option<String>,
}

impl Endpoint for McpEndpoint {
    fn handle(&self, request: Request<Incoming>) -> Reply<'_> {
        Box::pin(self.admit(request))
    }
}

impl McpEndpoint {
    async fn admit(&self, request: Request<Incoming>) -> Response<Body> {
        let permit = Arc::clone(&self.permits).try_acquire_owned().ok();
        // Past the cap, a POST within a session may be a client's answer to
        // a question one of the requests in progress waits on (a
        // confirmation, an elicitation): refusing it would hold that
        // request until its client gives up. Such a POST is read, in one of
        // as many slots again, to see what it is.
        let _answer_slot = match &permit {
            Some(_) => None,
            None if request.method() == hyper::Method::POST
                && request.headers().contains_key("mcp-session-id") =>
            {
                match Arc::clone(&self.answers).try_acquire_owned() {
                    Ok(slot) => Some(slot),
                    Err(_) => return self.too_many_requests(),
                }
            }
            None => return self.too_many_requests(),
        };
        // The body, whole, within its size and time limits, before rmcp
        // parses it; it then holds its share of the request budget until
        // it is answered.
        let (parts, body) = request.into_parts();
        let limited = http_body_util::Limited::new(body, self.max_body_bytes);
        let body = match tokio::time::timeout(self.body_timeout, limited.collect()).await {
            Err(_) => {
                return plain(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time",
                );
            }
            Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
                return plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "the request body is over the limit (`http.max_body_kib`)",
                );
            }
            Ok(Err(_)) => {
                return plain(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read",
                );
            }
            Ok(Ok(collected)) => collected.to_bytes(),
        };
        let Some(permit) = permit else {
            if Message::of_request(&parts, &body).request {
                return self.too_many_requests();
            }
            // An answer or a notification: rmcp takes it at once (202).
            return match self.budget.try_reserve(body.len()) {
                Some(_budget) => self.to_rmcp(parts, body, None).await,
                None => {
                    self.metrics.rejected("request_budget");
                    busy("the server holds too many requests at once; retry shortly")
                }
            };
        };
        let Some(budget) = self.budget.try_reserve(body.len()) else {
            self.metrics.rejected("request_budget");
            return busy("the server holds too many requests at once; retry shortly");
        };
        // A request is in progress until its response has been sent: the
        // permit and the budget go with the response's body, which may
        // stream for minutes (a call waiting on a confirmation, reporting
        // progress). A `subscriptions/listen` stream is a subscription,
        // not a request in progress: it is counted until its head is sent,
        // as the GET stream of a session is, and bounded by
        // `http.max_connections`.
        let admission = Admission {
            _permit: permit,
            _budget: budget,
        };
        if self.may_answer_directly(&parts)
            && let Some(call) = self.direct.direct_call(&parts.headers, &body)
        {
            self.metrics.mcp_http("direct");
            let caller = parts.extensions.get::<Caller>().cloned();
            let cancel = self.cancel.child_token();
            // The client gone (this future dropped) stops the call, as with rmcp.
            let gone = cancel.clone().drop_guard();
            let (status, bytes) = self.direct.answer_direct(call, caller, cancel).await;
            gone.disarm();
            let mut response = Response::new(Full::new(bytes::Bytes::from(bytes)).boxed());
            *response.status_mut() = status;
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            return admission.hold(response);
        }
        // Read only here: a call answered directly has been parsed whole.
        let message = Message::of_request(&parts, &body);
        let streams = message.request && message.method.as_deref() != Some("subscriptions/listen");
        let response = self.to_rmcp(parts, body, Some(&message)).await;
        if streams {
            admission.hold(response)
        } else {
            response
        }
    }

    /// A `503` for a request past `http.max_concurrent_requests`.
    fn too_many_requests(&self) -> Response<Body> {
        self.metrics.rejected("requests_in_progress");
        busy("too many requests in progress; retry shortly")
    }

    /// Hand an admitted request to rmcp (`message`, the body read as a
    /// JSON-RPC message when it is a POST), with the session checks and
    /// the replica prefix on the way in and out.
    async fn to_rmcp(
        &self,
        parts: http::request::Parts,
        body: bytes::Bytes,
        message: Option<&Message>,
    ) -> Response<Body> {
        self.metrics.mcp_http("rmcp");
        let initialize = message.is_some_and(|m| m.method.as_deref() == Some("initialize"));
        let _initializing = match self.session_slot(&parts, initialize).await {
            Ok(slot) => slot,
            Err(response) => return response,
        };
        let owner = parts.extensions.get::<Caller>().map(Caller::key);
        // Behind a balancer, this replica's sessions start `PREFIX.`: rmcp
        // sees them without it (a session id with another replica's prefix
        // is one rmcp does not have: 404, and the client starts a new one).
        let mut parts = parts;
        if let Some(prefix) = &self.replica_name
            && let Some(unprefixed) = parts
                .headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .and_then(|id| id.strip_prefix(prefix.as_str()))
                .and_then(|id| id.strip_prefix('.'))
                .and_then(|id| hyper::header::HeaderValue::from_str(id).ok())
        {
            parts.headers.insert("mcp-session-id", unprefixed);
        }
        let session = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let (Some(owner), Some(session)) = (&owner, &session)
            && !self.owned_by(session, owner)
        {
            // As for a session that does not exist: nothing says whose it is.
            return plain(StatusCode::NOT_FOUND, "session not found");
        }
        let request = Request::from_parts(parts, Full::new(body));
        let mut mcp = self.mcp.clone();
        // Infallible: rmcp answers every request with a response.
        let mut response = match mcp.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        if let (Some(owner), None) = (owner, session)
            && let Some(opened) = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
        {
            self.record_owner(opened.to_owned(), owner).await;
        }
        if let Some(prefix) = &self.replica_name
            && let Some(prefixed) = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .and_then(|id| hyper::header::HeaderValue::from_str(&format!("{prefix}.{id}")).ok())
        {
            response.headers_mut().insert("mcp-session-id", prefixed);
        }
        response
    }

    /// Whether this request may be answered without rmcp, as far as the
    /// transport is concerned: a `POST` naming no session, without an
    /// `Origin` (a browser's request is left to rmcp's Origin check), whose
    /// one `Host` is one rmcp allows (its DNS-rebinding check, made the same
    /// way: host without brackets and case, and the port when the allowed
    /// entry names one).
    fn may_answer_directly(&self, parts: &http::request::Parts) -> bool {
        if parts.method != hyper::Method::POST
            || parts.headers.contains_key("mcp-session-id")
            || parts.headers.contains_key(hyper::header::ORIGIN)
        {
            return false;
        }
        let mut hosts = parts.headers.get_all(hyper::header::HOST).iter();
        let (Some(host), None) = (hosts.next(), hosts.next()) else {
            return false;
        };
        // The usual `Host` (a name or an IPv4 address, perhaps a port) is
        // read in place; any other shape is parsed as rmcp parses it.
        if let Some((name, port)) = plain_host(host.as_bytes()) {
            return self
                .direct_hosts
                .iter()
                .any(|allowed| allowed.admits(name, port));
        }
        let Some(host) = host
            .to_str()
            .ok()
            .and_then(|host| hyper::http::uri::Authority::try_from(host).ok())
            .map(|host| Authority::new(host.host(), host.port_u16()))
        else {
            return false;
        };
        self.direct_hosts
            .iter()
            .any(|allowed| allowed.admits(host.host.as_bytes(), host.port))
    }

    /// Whether `owner` may use `session` (a session nobody is recorded
    /// for was opened without a caller identity, which a server with
    /// callers never does; it is refused too).
    fn owned_by(&self, session: &str, owner: &str) -> bool {
        let owners = match self.owners.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        owners
            .get(session)
            .is_some_and(|recorded| recorded == owner)
    }

    /// Record who opened `session`; forget sessions that have ended once
    /// the record outgrows the session cap, so it stays bounded.
    async fn record_owner(&self, session: String, owner: String) {
        let full = {
            let owners = match self.owners.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            owners.len() >= self.max_sessions
        };
        let live: Option<std::collections::HashSet<String>> = if full {
            let sessions = self.sessions.sessions.read().await;
            Some(sessions.keys().map(ToString::to_string).collect())
        } else {
            None
        };
        let mut owners = match self.owners.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(live) = live {
            owners.retain(|id, _| live.contains(id));
        }
        owners.insert(session, owner);
    }

    /// For a request that starts an initialize-era session, a slot among
    /// `http.max_sessions` (held until rmcp has answered, by then the
    /// session counts itself); a 503 when none is free.
    async fn session_slot(
        &self,
        parts: &http::request::Parts,
        initialize: bool,
    ) -> Result<Option<InitializingGuard>, Response<Body>> {
        if parts.method != hyper::Method::POST
            || parts.headers.contains_key("mcp-session-id")
            || !initialize
        {
            return Ok(None);
        }
        use std::sync::atomic::Ordering;
        let starting = self.initializing.fetch_add(1, Ordering::SeqCst);
        let guard = InitializingGuard(Arc::clone(&self.initializing));
        let open = self.sessions.sessions.read().await.len();
        if open + starting >= self.max_sessions {
            tracing::warn!(
                limit = self.max_sessions,
                "too many sessions; refusing a new one"
            );
            self.metrics.rejected("sessions");
            return Err(busy(
                "too many sessions are open (`http.max_sessions`); retry later, or use protocol \
                 2026-07-28, which needs no session",
            ));
        }
        Ok(Some(guard))
    }
}

/// What a POST body is, as far as admission cares.
#[derive(Debug, Default)]
struct Message {
    /// Its `method`, when it has one.
    method: Option<String>,
    /// A JSON-RPC request (a `method` and an `id`), or anything that does
    /// not read as one message; not a notification or a client's answer to
    /// the server, which rmcp accepts at once (202).
    request: bool,
}

impl Message {
    /// What the body of a request with `parts` is: a POST's is read; any
    /// other request's body is not a message.
    fn of_request(parts: &http::request::Parts, body: &[u8]) -> Message {
        if parts.method == hyper::Method::POST {
            Message::of(body)
        } else {
            Message::default()
        }
    }

    fn of(body: &[u8]) -> Message {
        /// Only the method and whether there is an id; the rest is skipped.
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            #[serde(borrow)]
            method: Option<std::borrow::Cow<'a, str>>,
            id: Option<serde::de::IgnoredAny>,
        }
        match serde_json::from_slice::<Head<'_>>(body) {
            Ok(head) => Message {
                request: head.method.is_some() && head.id.is_some(),
                method: head.method.map(std::borrow::Cow::into_owned),
            },
            Err(_) => Message {
                method: None,
                request: true,
            },
        }
    }
}

/// What admitted a request: its permit among
/// `http.max_concurrent_requests` and its share of the request budget.
struct Admission {
    /// Held, never read: dropping it releases the request.
    _permit: OwnedSemaphorePermit,
    /// Held, never read: dropping it returns the bytes.
    _budget: OwnedSemaphorePermit,
}

impl Admission {
    /// `response`, holding the admission in its body until the body ends
    /// or is dropped (the client gone, the connection closed).
    fn hold(self, response: Response<Body>) -> Response<Body> {
        response.map(|body| {
            Held {
                body,
                admission: Some(self),
            }
            .boxed()
        })
    }
}

/// A response body that keeps its request counted while it streams.
struct Held {
    body: Body,
    admission: Option<Admission>,
}

impl hyper::body::Body for Held {
    type Data = bytes::Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, Infallible>>> {
        // `BoxBody` is `Unpin`.
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = frame {
            // Sent in full: released before hyper ends the response.
            self.admission = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A host and perhaps a port, as rmcp compares them: the host without
/// brackets, in lower case.
struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    fn new(host: &str, port: Option<u16>) -> Self {
        Authority {
            host: host
                .trim_matches('[')
                .trim_matches(']')
                .to_ascii_lowercase(),
            port,
        }
    }

    /// Whether a request's `Host` of `name` (in any case) and `port` is
    /// this entry's.
    fn admits(&self, name: &[u8], port: Option<u16>) -> bool {
        self.host.as_bytes().eq_ignore_ascii_case(name)
            && self.port.is_none_or(|allowed| port == Some(allowed))
    }

    /// An `allowed_hosts` entry: an authority, or else a bare host (`::1`).
    fn allowed(entry: &str) -> Option<Self> {
        let entry = entry.trim();
        if entry.is_empty() {
            return None;
        }
        Some(match hyper::http::uri::Authority::try_from(entry) {
            Ok(authority) => Authority::new(authority.host(), authority.port_u16()),
            Err(_) => Authority::new(entry, None),
        })
    }
}

/// A `Host` value of the plain shape `NAME` or `NAME:PORT`, where NAME is
/// letters, digits, `.` and `-` and PORT a number that fits in 16 bits: its
/// name and port, as `http`'s `Authority` reads them, without the two
/// copies that parse makes. `None` for any other shape (brackets, user
/// information, an empty or oversized port), which is then parsed in full.
fn plain_host(value: &[u8]) -> Option<(&[u8], Option<u16>)> {
    let (name, port) = match value.iter().position(|&b| b == b':') {
        Some(colon) => (&value[..colon], Some(&value[colon + 1..])),
        None => (value, None),
    };
    if name.is_empty()
        || !name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    {
        return None;
    }
    let port = match port {
        None => None,
        Some(digits) => {
            if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            // Five digits or fewer: no overflow of a u32.
            let number = digits
                .iter()
                .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
            Some(u16::try_from(number).ok()?)
        }
    };
    Some((name, port))
}

/// One `initialize` in progress (see [`McpEndpoint::session_slot`]).
struct InitializingGuard(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for InitializingGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-place reading of a `Host` agrees with `http`'s parse (what
    /// rmcp compares) wherever it answers, and answers for the usual shapes.
    #[test]
    fn plain_hosts_read_as_http_reads_them() {
        let names = [
            "localhost",
            "LocalHost",
            "127.0.0.1",
            "example.com",
            "a-b.c",
            "x",
            "-",
            ".",
            "1",
            "",
            "a_b",
            "a b",
            "[::1]",
            "::1",
            "user@host",
            "h\u{e9}",
            "a/b",
            "a?b",
            "a#b",
            "%41",
        ];
        let ports = [
            None,
            Some(""),
            Some("0"),
            Some("80"),
            Some("08080"),
            Some("65535"),
            Some("65536"),
            Some("99999"),
            Some("123456"),
            Some("-1"),
            Some("+1"),
            Some("8a"),
            Some(":80"),
            Some("80:80"),
            Some(" 80"),
        ];
        let mut answered = 0;
        for name in names {
            for port in ports {
                let value = match port {
                    Some(port) => format!("{name}:{port}"),
                    None => name.to_owned(),
                };
                let Some((host, port)) = plain_host(value.as_bytes()) else {
                    continue;
                };
                answered += 1;
                let parsed = hyper::http::uri::Authority::try_from(value.as_str())
                    .unwrap_or_else(|e| panic!("`{value}` read in place, refused by http: {e}"));
                let parsed = Authority::new(parsed.host(), parsed.port_u16());
                assert_eq!(
                    (String::from_utf8_lossy(host).to_ascii_lowercase(), port),
                    (parsed.host, parsed.port),
                    "`{value}`"
                );
            }
        }
        for usual in [
            "localhost",
            "127.0.0.1:8080",
            "LOCALHOST:1",
            "example.com:65535",
        ] {
            assert!(plain_host(usual.as_bytes()).is_some(), "{usual}");
        }
        assert!(answered > 20, "{answered}");
        let allowed = Authority::allowed("localhost:8080").expect("entry");
        assert!(allowed.admits(b"LOCALHOST", Some(8080)));
        assert!(!allowed.admits(b"localhost", Some(8081)));
        assert!(!allowed.admits(b"localhost", None));
        let any_port = Authority::allowed("127.0.0.1").expect("entry");
        assert!(any_port.admits(b"127.0.0.1", None));
        assert!(any_port.admits(b"127.0.0.1", Some(1)));
        assert!(!any_port.admits(b"127.0.0.2", Some(1)));
    }

    #[test]
    fn public_binds_need_a_token() {
        let mut settings = HttpSettings {
            addr: "0.0.0.0:8080".parse().expect("addr"),
            config: HttpConfig::default(),
        };
        let error = settings.validate().expect_err("no token").to_string();
        assert!(error.contains("without authentication"), "{error}");
        settings.config.token = Some("t".into());
        assert!(settings.validate().is_ok());
        settings.addr = "127.0.0.1:0".parse().expect("addr");
        settings.config.token = None;
        assert!(settings.validate().is_ok());
    }
}
