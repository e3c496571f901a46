//! Outbound HTTP for tools: `wasi:http` behind a per-tool allow-list.
//!
//! Every tool's linker has `wasi:http/outgoing-handler`, but each request
//! goes through [`NetGate::send_request`] first, which refuses it unless
//! its host is in the tool's grant (`network = [...]` in the config). What
//! is granted is HTTP to named hosts, nothing more: raw sockets
//! (`wasi:sockets`) and name lookup stay denied for every tool (see
//! `sandbox::Sandbox::start`), so a grant of `api.example.com` cannot be
//! stretched into TCP to anything else.
//!
//! Rules, in one place:
//! - A grant entry is `host`, `host:port`, `*.domain` or `*.domain:port`;
//!   an IP literal (`127.0.0.1`, `[::1]:8080`) matches only itself. Names
//!   compare case-insensitively, without a trailing dot. An entry without a
//!   port allows the default ports only (80 and 443), so
//!   `api.example.com` does not open `api.example.com:22`.
//! - `*.example.com` matches any subdomain, at any depth, not
//!   `example.com` itself.
//! - Redirects are not followed here: a redirect is a response, and the
//!   guest's next request is checked like the first.
//! - Request and response bodies are capped (a declared `Content-Length`
//!   over the cap is refused before any byte moves; a body that grows over
//!   it fails at the cap), and each request has a timeout (connect, first
//!   byte, and between bytes, each at most the tool's `http_timeout_ms`).
//! - A refusal reaches the guest as `internal-error` with a message that
//!   names the host and the tool, so a tool can pass it on to the model; it
//!   is also logged and recorded for the call journal.

use std::fmt;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, SizeHint};
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// One entry of a tool's network grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lowercase host name without a trailing dot, or the domain after
    /// `*.` for a wildcard, or an IP literal's canonical form.
    host: String,
    /// `*.host`: any subdomain of `host`.
    wildcard: bool,
    /// The port, if the entry names one; else the default ports.
    port: Option<u16>,
}

impl HostPattern {
    /// Parse a grant entry.
    ///
    /// # Errors
    ///
    /// The entry is empty, has a scheme or a path, a bad port, a wildcard
    /// anywhere but the first label, or is a bare `*`.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("is empty".into());
        }
        if text.contains("://") || text.contains('/') {
            return Err("must be a host, optionally with `:port`, not a URL".into());
        }
        if text.contains('@') || text.contains('?') || text.contains('#') {
            return Err("must be a host, optionally with `:port`".into());
        }
        let (host, port) = split_host_port(text).ok_or("has an invalid port")?;
        let host = normalize_host(host);
        if host.is_empty() {
            return Err("has no host".into());
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(HostPattern {
                host: ip.to_string(),
                wildcard: false,
                port,
            });
        }
        let (wildcard, domain) = match host.strip_prefix("*.") {
            Some(domain) => (true, domain.to_owned()),
            None => (false, host),
        };
        if domain == "*" || domain.is_empty() {
            return Err("grants every host; name the hosts (or `*.domain`)".into());
        }
        if domain.contains('*') {
            return Err("may only use `*` as its whole first label (`*.example.com`)".into());
        }
        let valid = domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
        if !valid {
            return Err("is not a valid host name".into());
        }
        Ok(HostPattern {
            host: domain,
            wildcard,
            port,
        })
    }

    /// Whether a request to `host` (already normalised) on `port` is
    /// granted by this entry.
    fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => port == 80 || port == 443,
        };
        if !port_ok {
            return false;
        }
        if self.wildcard {
            host.len() > self.host.len() + 1
                && host.ends_with(&self.host)
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.'
        } else {
            host == self.host
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.wildcard {
            write!(f, "*.")?;
        }
        match self.port {
            Some(port) => write!(f, "{host}:{port}"),
            None => write!(f, "{host}"),
        }
    }
}

/// `host[:port]` or `[v6][:port]` split; `None` for a bad port.
fn split_host_port(text: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match text.rsplit_once(':') {
        // More than one colon without brackets: a bare IPv6 literal.
        Some((host, _)) if host.contains(':') => Some((text, None)),
        Some((host, port)) => Some((host, Some(port.parse().ok()?))),
        None => Some((text, None)),
    }
}

/// Lowercase, no trailing dot, IP literals in canonical form.
fn normalize_host(host: &str) -> String {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match host.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => host,
    }
}

/// Caps on one tool's HTTP requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetLimits {
    /// Largest request body, in bytes.
    pub request_bytes: u64,
    /// Largest response body, in bytes.
    pub response_bytes: u64,
    /// Connect, first-byte and between-bytes timeout, each.
    pub timeout: Duration,
}

/// What one call did on the network, for the journal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetRecord {
    /// Requests sent.
    pub requests: u32,
    /// Refusals, each `host:port: why`.
    pub refused: Vec<String>,
    /// Request body bytes sent.
    pub bytes_sent: u64,
    /// Response body bytes received.
    pub bytes_received: u64,
}

/// The `wasi:http` hooks of one call: the grant check and the caps.
pub struct NetGate {
    tool: Arc<str>,
    grant: Arc<[HostPattern]>,
    limits: NetLimits,
    record: Arc<Mutex<NetRecord>>,
}

impl NetGate {
    /// The gate for a call of `tool` with `grant`.
    pub fn new(tool: Arc<str>, grant: Arc<[HostPattern]>, limits: NetLimits) -> Self {
        NetGate {
            tool,
            grant,
            limits,
            record: Arc::default(),
        }
    }

    /// What the call did so far.
    pub fn record(&self) -> NetRecord {
        lock(&self.record).clone()
    }

    /// `Ok(())` if `request` may go out; else the message for the guest.
    fn check(&self, request: &http::Request<WasiBody>) -> Result<(), (String, String)> {
        let uri = request.uri();
        let Some(host) = uri.host() else {
            return Err((
                "(none)".into(),
                format!(
                    "toolcage refused a request of tool `{}`: the URL has no host",
                    self.tool
                ),
            ));
        };
        let host = normalize_host(host.trim_start_matches('[').trim_end_matches(']'));
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let target = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        if self.grant.iter().any(|p| p.matches(&host, port)) {
            return Ok(());
        }
        let message = if self.grant.is_empty() {
            format!(
                "toolcage refused the request to `{target}`: tool `{}` has no network grant \
                 (the operator grants hosts with `network = [\"host\"]` under `[tools.{}]` \
                 in the config)",
                self.tool, self.tool
            )
        } else {
            let granted: Vec<String> = self.grant.iter().map(ToString::to_string).collect();
            format!(
                "toolcage refused the request to `{target}`: it is not in the network grant \
                 of tool `{}` (granted: {})",
                self.tool,
                granted.join(", ")
            )
        };
        Err((target, message))
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
        let checked = self.check(&request);
        let tool = Arc::clone(&self.tool);
        let limits = self.limits;
        let record = Arc::clone(&self.record);
        Box::new(async move {
            let target = match checked {
                Ok(()) => request
                    .uri()
                    .authority()
                    .map_or_else(String::new, ToString::to_string),
                Err((target, message)) => {
                    tracing::warn!(tool = %tool, host = %target, "network request refused: not in the tool's grant");
                    lock(&record).refused.push(format!("{target}: not granted"));
                    return Err(refusal(message));
                }
            };
            lock(&record).requests += 1;
            let cap = |direction, cap| Cap {
                direction,
                cap,
                target: target.clone(),
                tool: Arc::clone(&tool),
                record: Arc::clone(&record),
            };
            let (parts, body) = request.into_parts();
            let body = cap(Direction::Sent, limits.request_bytes).wrap(&parts.headers, body)?;
            let request = http::Request::from_parts(parts, body);
            let clamp = |asked: Option<Duration>| {
                Some(asked.map_or(limits.timeout, |d| d.min(limits.timeout)))
            };
            let options = RequestOptions {
                connect_timeout: clamp(options.and_then(|o| o.connect_timeout)),
                first_byte_timeout: clamp(options.and_then(|o| o.first_byte_timeout)),
                between_bytes_timeout: clamp(options.and_then(|o| o.between_bytes_timeout)),
            };
            // Connect and first byte are bounded by the options; this bounds
            // the whole exchange up to the response head (TLS included).
            let sent = tokio::time::timeout(
                limits.timeout.saturating_mul(2),
                wasmtime_wasi_http::default_send_request(request, Some(options)),
            )
            .await;
            let (response, io) = match sent {
                Ok(result) => result?,
                Err(_) => return Err(HttpError::ConnectionTimeout),
            };
            let (parts, body) = response.into_parts();
            let body = cap(Direction::Received, limits.response_bytes)
                .wrap(&parts.headers, body.boxed_unsync())?;
            let response = http::Response::from_parts(parts, body);
            Ok((
                response,
                Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
            ))
        })
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
        lock(&self.record).refused.push(format!(
            "{}: {} body over {} bytes",
            self.target,
            self.wording().0,
            self.cap
        ));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(entry: &str, host: &str, port: u16) -> bool {
        HostPattern::parse(entry)
            .expect(entry)
            .matches(&normalize_host(host), port)
    }

    #[test]
    fn names_ports_and_wildcards() {
        assert!(allows("api.example.com", "api.example.com", 443));
        assert!(allows("api.example.com", "API.Example.com.", 80));
        assert!(!allows("api.example.com", "api.example.com", 22));
        assert!(allows("api.example.com:8443", "api.example.com", 8443));
        assert!(!allows("api.example.com:8443", "api.example.com", 443));
        assert!(!allows("api.example.com", "example.com", 443));
        assert!(!allows("api.example.com", "evilapi.example.com", 443));
        assert!(!allows("example.com", "example.com.evil.net", 443));
        assert!(allows("*.example.com", "a.b.example.com", 443));
        assert!(!allows("*.example.com", "example.com", 443));
        assert!(!allows("*.example.com", "badexample.com", 443));
        assert!(allows("*.example.com:81", "x.example.com", 81));
    }

    #[test]
    fn ip_literals_match_only_themselves() {
        assert!(allows("127.0.0.1:8080", "127.0.0.1", 8080));
        assert!(!allows("localhost:8080", "127.0.0.1", 8080));
        assert!(!allows("127.0.0.1:8080", "localhost", 8080));
        assert!(allows("[::1]:8080", "::1", 8080));
        assert!(allows("[0:0::1]", "::1", 80));
        assert!(!allows("127.0.0.1", "2130706433", 80));
    }

    #[test]
    fn bad_entries_say_why() {
        for (entry, why) in [
            ("", "empty"),
            ("*", "every host"),
            ("*.", "every host"),
            ("https://api.example.com", "not a URL"),
            ("api.example.com/path", "not a URL"),
            ("api.*.com", "first label"),
            ("api.example.com:99999", "port"),
            ("api.example.com:", "port"),
            ("a..b", "not a valid host"),
            ("user@host", "must be a host"),
        ] {
            let error = HostPattern::parse(entry).expect_err(entry);
            assert!(error.contains(why), "{entry}: {error}");
        }
        assert_eq!(
            HostPattern::parse("*.Example.COM:81")
                .expect("ok")
                .to_string(),
            "*.example.com:81"
        );
        assert_eq!(
            HostPattern::parse("[::1]:8").expect("ok").to_string(),
            "[::1]:8"
        );
    }
}
