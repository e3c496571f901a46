//! The `wasi:http` hooks of one call: every request checked against the
//! grant, sent to exactly the target that was checked, under the caps and
//! timeouts, and counted for the journal.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, SizeHint};
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use super::{HostPattern, NetGrant, NetRecord, Target};
use crate::grants::handles::OsHandles;
use crate::redact::Scrub;

/// The `wasi:http` hooks of one call: the grant check, the caps, and the
/// connection itself.
pub struct NetGate {
    tool: Arc<str>,
    grant: Arc<NetGrant>,
    /// The tool's secrets, scrubbed from what is logged.
    secrets: Arc<[String]>,
    /// The caller's policy, when it narrows the hosts: its name and hosts.
    caller: Option<(Arc<str>, Arc<[HostPattern]>)>,
    record: Arc<Mutex<NetRecord>>,
    /// The call's open handles: each connection is one until it closes.
    handles: Arc<OsHandles>,
}

impl NetGate {
    /// The gate for a call of `tool` with `grant`, its connections counted
    /// in `handles`.
    pub fn new(
        tool: Arc<str>,
        grant: Arc<NetGrant>,
        secrets: Arc<[String]>,
        handles: Arc<OsHandles>,
    ) -> Self {
        NetGate {
            tool,
            grant,
            secrets,
            caller: None,
            record: Arc::default(),
            handles,
        }
    }

    /// The same gate, also limited to the hosts of the caller's policy
    /// `(name, hosts)`, if it has any: a request must be in both.
    #[must_use]
    pub fn narrowed(mut self, caller: Option<(&str, &Arc<[HostPattern]>)>) -> Self {
        self.caller = caller.map(|(name, hosts)| (Arc::from(name), Arc::clone(hosts)));
        self
    }

    /// The secrets of the call's tool (to scrub what is logged).
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(String::as_str)
    }

    /// What the call did so far.
    pub fn record(&self) -> NetRecord {
        lock(&self.record).clone()
    }

    /// The target of `request` if it may go out; else what to record and
    /// the message for the guest.
    fn check(&self, request: &http::Request<WasiBody>) -> Result<Target, (String, String)> {
        let tool = &self.tool;
        let target = Target::parse(request.uri()).map_err(|why| {
            (
                "(unparsable)".to_owned(),
                format!("toolcage refused a request of tool `{tool}`: {why}"),
            )
        })?;
        let host = target.host();
        let granted = self
            .grant
            .hosts
            .iter()
            .any(|p| p.matches(&host, target.port));
        if granted
            && let Some((caller, hosts)) = &self.caller
            && !hosts.iter().any(|p| p.matches(&host, target.port))
        {
            return Err((
                target.to_string(),
                format!(
                    "toolcage refused the request to `{target}`: the caller's policy \
                     (`[[callers]]` entry `{caller}`) does not include this host"
                ),
            ));
        }
        if granted {
            return Ok(target);
        }
        let message = if self.grant.hosts.is_empty() {
            format!(
                "toolcage refused the request to `{target}`: tool `{tool}` has no network grant \
                 (the operator grants hosts with `network = [\"host\"]` under `[tools.{tool}]` \
                 in the config)"
            )
        } else {
            let granted: Vec<String> = self.grant.hosts.iter().map(ToString::to_string).collect();
            format!(
                "toolcage refused the request to `{target}`: it is not in the network grant \
                 of tool `{tool}` (granted: {})",
                granted.join(", ")
            )
        };
        Err((target.to_string(), message))
    }

    /// Count a refusal; log the first for each host of the call.
    fn refused(&self, target: &str, why: &'static str) {
        if lock(&self.record).count(target, Some(why)) {
            let scrub = Scrub::new(self.secrets.iter().map(String::as_str));
            tracing::warn!(
                tool = %self.tool,
                host = %scrub.text(target, 256),
                why,
                "network request refused (later refusals of this host in this call are counted, not logged)"
            );
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn refusal(message: String) -> HttpError {
    HttpError::InternalError(Some(message))
}

type ResponseFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for NetGate {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> ResponseFuture {
        // A granted request takes its connection's place among the call's
        // open handles now (not when the future first runs); the
        // connection's task holds it until the connection closes.
        let checked = match self.check(&request) {
            Ok(target) => match self.handles.ticket() {
                Ok(ticket) => Ok((target, ticket)),
                Err(full) => {
                    let target = target.to_string();
                    let message = format!(
                        "toolcage refused the request to `{target}`: the call {full} \
                         (close some before opening more)"
                    );
                    Err((target, message, "too many open connections and files"))
                }
            },
            Err((target, message)) => Err((target, message, "not granted")),
        };
        if let Err((target, _, why)) = &checked {
            self.refused(target, why);
        }
        let tool = Arc::clone(&self.tool);
        let grant = Arc::clone(&self.grant);
        let limits = self.grant.limits;
        let record = Arc::clone(&self.record);
        Box::new(async move {
            let (target, ticket) = match checked {
                Ok(checked) => checked,
                Err((_, message, _)) => return Err(refusal(message)),
            };
            let label = target.to_string();
            lock(&record).count(&label, None);
            let cap = |direction, cap| Cap {
                direction,
                cap,
                target: label.clone(),
                tool: Arc::clone(&tool),
                record: Arc::clone(&record),
            };
            let (parts, body) = request.into_parts();
            let body = cap(Direction::Sent, limits.request_bytes).wrap(&parts.headers, body)?;
            let clamp =
                |asked: Option<Duration>| asked.map_or(limits.timeout, |d| d.min(limits.timeout));
            let timeouts = Timeouts {
                connect: clamp(options.and_then(|o| o.connect_timeout)),
                first_byte: clamp(options.and_then(|o| o.first_byte_timeout)),
                between_bytes: clamp(options.and_then(|o| o.between_bytes_timeout)),
            };
            // Connect and first byte are bounded by the timeouts; this bounds
            // the whole exchange up to the response head (resolving and TLS
            // included).
            let sent = tokio::time::timeout(
                limits.timeout.saturating_mul(2),
                send(&target, &grant, parts, body, timeouts, ticket),
            )
            .await;
            let (response, io) = match sent {
                Ok(result) => result?,
                Err(_) => return Err(HttpError::ConnectionTimeout),
            };
            let (parts, body) = response.into_parts();
            let body =
                cap(Direction::Received, limits.response_bytes).wrap(&parts.headers, body)?;
            Ok((
                http::Response::from_parts(parts, body),
                Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
            ))
        })
    }
}

/// A request's timeouts, each at most the tool's `http_timeout_ms`.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    connect: Duration,
    first_byte: Duration,
    between_bytes: Duration,
}

/// Send a checked request to exactly `target`: connect to its address (an
/// IP literal as it is; a name at its pinned addresses, else as the system
/// resolves it), TLS for `https` verified against `target`'s host, `Host`
/// set to `target`'s authority, and the URL reduced to its path.
async fn send(
    target: &Target,
    grant: &NetGrant,
    mut parts: http::request::Parts,
    body: WasiBody,
    timeouts: Timeouts,
    ticket: Arc<()>,
) -> Result<
    (
        http::Response<WasiBody>,
        impl Future<Output = Result<(), HttpError>> + Send + 'static,
    ),
    HttpError,
> {
    let stream = super::wire::open(target, &grant.pinned, timeouts.connect).await?;
    let (mut sender, connection) = tokio::time::timeout(
        timeouts.connect,
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)),
    )
    .await
    .map_err(|_| HttpError::ConnectionTimeout)??;
    // The authority checked is the authority sent; the wire carries only
    // the path (this is not a proxy request).
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), ToString::to_string);
    parts.uri = http::Uri::try_from(path).map_err(|_| HttpError::HttpRequestUriInvalid)?;
    let host = http::HeaderValue::try_from(target.authority())
        .map_err(|_| HttpError::HttpRequestUriInvalid)?;
    parts.headers.insert(http::header::HOST, host);
    let request = http::Request::from_parts(parts, body);
    // The socket lives in this task: so does its place among the call's
    // open handles.
    let connection = tokio::spawn(async move {
        let _ticket = ticket;
        connection.await
    });
    let response = tokio::time::timeout(timeouts.first_byte, sender.send_request(request))
        .await
        .map_err(|_| HttpError::ConnectionReadTimeout)?
        .map_err(HttpError::from)?;
    let between = timeouts.between_bytes.max(Duration::from_nanos(1));
    let response = response.map(|incoming| {
        Timed {
            incoming,
            between,
            sleep: Box::pin(tokio::time::sleep(between)),
        }
        .boxed_unsync()
    });
    let io = async move {
        match connection.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) if error.is_timeout() => Err(HttpError::HttpResponseTimeout),
            Ok(Err(error)) => Err(error.into()),
            Err(_) => Err(HttpError::ConnectionTerminated),
        }
    };
    Ok((response, io))
}

/// A response body that fails when no frame comes for `between`.
struct Timed {
    incoming: hyper::body::Incoming,
    between: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Body for Timed {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let deadline = tokio::time::Instant::now() + self.between;
                self.sleep.as_mut().reset(deadline);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) if error.is_timeout() => {
                Poll::Ready(Some(Err(HttpError::HttpResponseTimeout)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[derive(Clone, Copy)]
enum Direction {
    Sent,
    Received,
}

/// The cap on one body of one request, and what to say when it is hit.
struct Cap {
    direction: Direction,
    cap: u64,
    target: String,
    tool: Arc<str>,
    record: Arc<Mutex<NetRecord>>,
}

impl Cap {
    /// `body` wrapped so that it fails past the cap; refused at once when
    /// `headers` declare a longer one.
    fn wrap(self, headers: &http::HeaderMap, body: WasiBody) -> Result<WasiBody, HttpError> {
        match content_length(headers) {
            Some(length) if length > self.cap => Err(self.refuse(Some(length))),
            _ => Ok(Capped {
                inner: body,
                seen: 0,
                cap: self,
            }
            .boxed_unsync()),
        }
    }

    /// Record the refusal and build the error for the guest.
    fn refuse(&self, length: Option<u64>) -> HttpError {
        let why = match self.direction {
            Direction::Sent => "request body over the cap",
            Direction::Received => "response body over the cap",
        };
        lock(&self.record).count(&self.target, Some(why));
        self.error(length)
    }

    /// The error for the guest: which body, of which request, whose cap.
    fn error(&self, length: Option<u64>) -> HttpError {
        let (what, preposition, key) = self.wording();
        let (target, tool, cap) = (&self.target, &self.tool, self.cap);
        let size = length.map_or_else(String::new, |n| format!(" ({n} bytes)"));
        refusal(format!(
            "toolcage refused the {what} {preposition} `{target}`: its body{size} is over \
             tool `{tool}`'s cap of {cap} bytes (`{key}`)"
        ))
    }

    fn wording(&self) -> (&'static str, &'static str, &'static str) {
        match self.direction {
            Direction::Sent => ("request", "to", "http_max_request_kib"),
            Direction::Received => ("response", "from", "http_max_response_kib"),
        }
    }
}

/// A body that fails once more than its cap has passed, and counts the
/// bytes into the call's [`NetRecord`].
struct Capped {
    inner: WasiBody,
    seen: u64,
    cap: Cap,
}

impl Body for Capped {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        // Polled again after the refusal: the same error, recorded once.
        if self.seen > self.cap.cap {
            return Poll::Ready(Some(Err(self.cap.error(None))));
        }
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            let len = data.len() as u64;
            self.seen += len;
            {
                let mut record = lock(&self.cap.record);
                match self.cap.direction {
                    Direction::Sent => record.bytes_sent += len,
                    Direction::Received => record.bytes_received += len,
                }
            }
            if self.seen > self.cap.cap {
                return Poll::Ready(Some(Err(self.cap.refuse(None))));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
