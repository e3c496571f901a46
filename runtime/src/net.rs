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

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, SizeHint};
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use crate::redact::Scrub;

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

/// What a tool may reach over HTTP: the hosts of its grant, and the
/// addresses the operator pinned names to (`[tools.NAME.resolve]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetGrant {
    /// Hosts it may reach. Empty: no network at all.
    pub hosts: Vec<HostPattern>,
    /// Names connected to these addresses instead of being resolved.
    pub pinned: BTreeMap<String, Vec<IpAddr>>,
}

impl NetGrant {
    /// Parse a `resolve` table entry: a host name (as grants write it, no
    /// port, no wildcard) and the addresses to use for it.
    ///
    /// # Errors
    ///
    /// The name or an address is not valid.
    pub fn parse_pin(name: &str, addresses: &[String]) -> Result<(String, Vec<IpAddr>), String> {
        let pattern = HostPattern::parse(name)?;
        if pattern.wildcard || pattern.port.is_some() || pattern.host.parse::<IpAddr>().is_ok() {
            return Err("must be a host name, without a port or `*.`".into());
        }
        if addresses.is_empty() {
            return Err("lists no addresses".into());
        }
        let ips = addresses
            .iter()
            .map(|a| {
                a.trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .map_err(|_| format!("has `{a}`, which is not an IP address"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((pattern.host, ips))
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

/// Distinct hosts a call's record keeps; requests to more are counted as
/// `other_hosts`, so a line stays bounded however many hosts a call tries.
pub const MAX_RECORDED_HOSTS: usize = 16;

/// What one call did on the network, for the journal: bounded in size
/// whatever the call does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetRecord {
    /// Requests sent.
    pub requests: u32,
    /// Requests refused.
    pub refused: u32,
    /// Request body bytes sent.
    pub bytes_sent: u64,
    /// Response body bytes received.
    pub bytes_received: u64,
    /// Per host (`host:port`, as checked), at most [`MAX_RECORDED_HOSTS`].
    pub hosts: BTreeMap<String, HostCounts>,
    /// Requests (sent or refused) to hosts past the first
    /// [`MAX_RECORDED_HOSTS`].
    pub other_hosts: u32,
}

/// One host's share of a call's [`NetRecord`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostCounts {
    /// Requests sent to it.
    pub sent: u32,
    /// Requests to it refused.
    pub refused: u32,
    /// Why the first refusal was (`not granted`, a cap).
    pub why: Option<&'static str>,
}

impl NetRecord {
    /// Count one request to `target` (`refused` with `why`, or sent);
    /// `true` if it is the first refusal for that host (worth a log line).
    fn count(&mut self, target: &str, refused: Option<&'static str>) -> bool {
        match refused {
            Some(_) => self.refused += 1,
            None => self.requests += 1,
        }
        let known = self.hosts.contains_key(target);
        if !known && self.hosts.len() >= MAX_RECORDED_HOSTS {
            self.other_hosts += 1;
            return refused.is_some() && self.other_hosts == 1;
        }
        let counts = self.hosts.entry(target.to_owned()).or_default();
        match refused {
            Some(why) => {
                counts.refused += 1;
                counts.why.get_or_insert(why);
                counts.refused == 1
            }
            None => {
                counts.sent += 1;
                false
            }
        }
    }
}

/// Where a request goes, parsed once from its URL. What the grant is
/// checked against is exactly what is resolved, connected to, sent as
/// `Host` and verified by TLS: nothing is read twice, by two parsers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `https`.
    pub https: bool,
    /// The host, normalised.
    pub host: TargetHost,
    /// The port, explicit or the scheme's.
    pub port: u16,
}

/// A request's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetHost {
    /// An IP literal: connected to as it is, never resolved.
    Ip(IpAddr),
    /// A DNS name: lowercase ASCII, no trailing dot.
    Name(String),
}

impl Target {
    /// Parse the scheme and authority of `uri`.
    ///
    /// # Errors
    ///
    /// What about the authority is refused, for the guest's message: no
    /// host, credentials, an empty or bad port, an unbracketed IPv6
    /// address, a name that is not ASCII, a name a resolver would read as a
    /// number (`2130706433`, `0x7f.1`) or an IP address with a trailing dot.
    pub fn parse(uri: &http::Uri) -> Result<Target, String> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            other => {
                return Err(format!(
                    "the scheme `{}` is not http or https",
                    other.unwrap_or("")
                ));
            }
        };
        let authority = uri.authority().map_or("", |a| a.as_str());
        if authority.is_empty() {
            return Err("the URL has no host".into());
        }
        if authority.contains('@') {
            return Err(
                "the URL carries a user name or password (`user@host`), which toolcage never sends"
                    .into(),
            );
        }
        let (host, port) = match authority.strip_prefix('[') {
            Some(rest) => {
                let (host, after) = rest
                    .split_once(']')
                    .ok_or("the IPv6 address is not closed with `]`")?;
                let port = match after {
                    "" => None,
                    after => Some(
                        after
                            .strip_prefix(':')
                            .ok_or("junk after the IPv6 address")?,
                    ),
                };
                let ip = host
                    .parse::<std::net::Ipv6Addr>()
                    .map_err(|_| format!("`[{host}]` is not an IPv6 address"))?;
                (TargetHost::Ip(IpAddr::V6(ip)), port)
            }
            None => {
                let (host, port) = match authority.rsplit_once(':') {
                    Some((host, port)) => (host, Some(port)),
                    None => (authority, None),
                };
                if host.contains(':') {
                    return Err("an IPv6 address must be in brackets (`[::1]`)".into());
                }
                (parse_host(host)?, port)
            }
        };
        let port = match port {
            None => {
                if https {
                    443
                } else {
                    80
                }
            }
            Some(port) => parse_port(port)?,
        };
        Ok(Target { https, host, port })
    }

    /// The host as grants compare it: an IP's canonical form, or the name.
    pub fn host(&self) -> String {
        match &self.host {
            TargetHost::Ip(ip) => ip.to_string(),
            TargetHost::Name(name) => name.clone(),
        }
    }

    /// The `Host` header: the host (IPv6 in brackets), with the port unless
    /// it is the scheme's.
    fn authority(&self) -> String {
        let host = match &self.host {
            TargetHost::Ip(IpAddr::V6(ip)) => format!("[{ip}]"),
            _ => self.host(),
        };
        let default = if self.https { 443 } else { 80 };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            TargetHost::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
            _ => write!(f, "{}:{}", self.host(), self.port),
        }
    }
}

/// A port as written in a URL: 1 to 5 digits, 1 to 65535.
fn parse_port(text: &str) -> Result<u16, String> {
    if text.is_empty() {
        return Err("the URL has an empty port (`host:`)".into());
    }
    if text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{text}` is not a port"));
    }
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("`{text}` is not a port (1 to 65535)")),
        Ok(port) => Ok(port),
    }
}

/// An unbracketed host: an IPv4 address in dotted decimal, or a DNS name.
fn parse_host(text: &str) -> Result<TargetHost, String> {
    if let Ok(ip) = text.parse::<std::net::Ipv4Addr>() {
        return Ok(TargetHost::Ip(IpAddr::V4(ip)));
    }
    if !text.is_ascii() {
        return Err(format!(
            "the host `{}` is not ASCII; write international names in punycode (`xn--…`)",
            text.escape_default()
        ));
    }
    // One trailing dot marks a fully qualified name; the name is the same
    // without it, and it is sent and resolved without it.
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err(format!(
            "`{text}` is an IP address with a trailing dot, which resolvers read as a host name; \
             write the address without it"
        ));
    }
    let labels: Vec<&str> = name.split('.').collect();
    let valid = !name.is_empty()
        && name.len() <= 253
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !valid {
        return Err(format!(
            "`{}` is not a valid host name",
            text.escape_default()
        ));
    }
    if looks_numeric(&labels) {
        return Err(format!(
            "`{text}` looks like a numeric address, which resolvers read differently; write IP \
             addresses in dotted decimal (`127.0.0.1`)"
        ));
    }
    Ok(TargetHost::Name(name))
}

/// Whether a resolver could read `labels` as an IPv4 address (the
/// `inet_aton` forms: 1 to 4 decimal, octal or hex numbers), or the name
/// ends in an all-digit label (no top-level domain is numeric).
fn looks_numeric(labels: &[&str]) -> bool {
    let number = |label: &str| {
        let hex = label
            .strip_prefix("0x")
            .or_else(|| label.strip_prefix("0X"));
        match hex {
            Some(digits) => digits.bytes().all(|b| b.is_ascii_hexdigit()),
            None => label.bytes().all(|b| b.is_ascii_digit()),
        }
    };
    labels
        .last()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()))
        || (labels.len() <= 4 && labels.iter().all(|l| number(l)))
}

/// The `wasi:http` hooks of one call: the grant check, the caps, and the
/// connection itself.
pub struct NetGate {
    tool: Arc<str>,
    grant: Arc<NetGrant>,
    limits: NetLimits,
    /// The tool's secrets, scrubbed from what is logged.
    secrets: Arc<[String]>,
    record: Arc<Mutex<NetRecord>>,
}

impl NetGate {
    /// The gate for a call of `tool` with `grant`.
    pub fn new(
        tool: Arc<str>,
        grant: Arc<NetGrant>,
        limits: NetLimits,
        secrets: Arc<[String]>,
    ) -> Self {
        NetGate {
            tool,
            grant,
            limits,
            secrets,
            record: Arc::default(),
        }
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
        if self
            .grant
            .hosts
            .iter()
            .any(|p| p.matches(&host, target.port))
        {
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
        let checked = self.check(&request);
        if let Err((target, _)) = &checked {
            self.refused(target, "not granted");
        }
        let tool = Arc::clone(&self.tool);
        let grant = Arc::clone(&self.grant);
        let limits = self.limits;
        let record = Arc::clone(&self.record);
        Box::new(async move {
            let target = match checked {
                Ok(target) => target,
                Err((_, message)) => return Err(refusal(message)),
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
                send(&target, &grant, parts, body, timeouts),
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
) -> Result<
    (
        http::Response<WasiBody>,
        impl Future<Output = Result<(), HttpError>> + Send + 'static,
    ),
    HttpError,
> {
    let stream = connect(target, grant, timeouts.connect).await?;
    let stream: Box<dyn Stream> = if target.https {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|_| HttpError::TlsProtocolError)?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = match &target.host {
            TargetHost::Ip(ip) => rustls::pki_types::ServerName::IpAddress((*ip).into()),
            TargetHost::Name(name) => rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|_| HttpError::HttpRequestUriInvalid)?,
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tls = tokio::time::timeout(timeouts.connect, connector.connect(name, stream))
            .await
            .map_err(|_| HttpError::ConnectionTimeout)?
            .map_err(HttpError::Tls)?;
        Box::new(tls)
    } else {
        Box::new(stream)
    };
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
    let connection = tokio::spawn(connection);
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

/// A TCP or TLS stream.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Connect to `target`: its IP, or its name's pinned or resolved addresses
/// in turn, each within `timeout`.
async fn connect(
    target: &Target,
    grant: &NetGrant,
    timeout: Duration,
) -> Result<tokio::net::TcpStream, HttpError> {
    let addresses: Vec<SocketAddr> = match &target.host {
        TargetHost::Ip(ip) => vec![SocketAddr::new(*ip, target.port)],
        TargetHost::Name(name) => match grant.pinned.get(name) {
            Some(ips) => ips
                .iter()
                .map(|ip| SocketAddr::new(*ip, target.port))
                .collect(),
            None => match tokio::time::timeout(
                timeout,
                tokio::net::lookup_host((name.as_str(), target.port)),
            )
            .await
            {
                Err(_) => return Err(HttpError::DnsTimeout),
                Ok(Err(_)) => {
                    return Err(HttpError::DnsError {
                        rcode: Some("address not available".into()),
                        info_code: None,
                    });
                }
                Ok(Ok(addresses)) => addresses.collect(),
            },
        },
    };
    let mut last = HttpError::DestinationNotFound;
    for address in addresses {
        match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
                last = HttpError::ConnectionRefused;
            }
            Ok(Err(error)) => last = HttpError::Connect(error),
            Err(_) => last = HttpError::ConnectionTimeout,
        }
    }
    Err(last)
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

    fn target(url: &str) -> Result<String, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("uri: {e}"))?;
        Target::parse(&uri).map(|t| format!("{t} {}", t.authority()))
    }

    #[test]
    fn targets_are_normalised_once() {
        for (url, expected) in [
            (
                "http://api.example.com/x",
                "api.example.com:80 api.example.com",
            ),
            (
                "https://API.Example.COM./x",
                "api.example.com:443 api.example.com",
            ),
            ("http://127.0.0.1:8080/", "127.0.0.1:8080 127.0.0.1:8080"),
            ("https://[::1]:8443/", "[::1]:8443 [::1]:8443"),
            ("https://[0:0::1]/", "[::1]:443 [::1]"),
            ("http://localhost:443/", "localhost:443 localhost:443"),
            ("http://a_b.example/", "a_b.example:80 a_b.example"),
        ] {
            assert_eq!(target(url).as_deref(), Ok(expected), "{url}");
        }
    }

    #[test]
    fn authorities_read_differently_are_refused() {
        for (url, why) in [
            ("http://127.0.0.1./", "trailing dot"),
            ("http://127.0.0.1.:8080/", "trailing dot"),
            ("http://2130706433/", "numeric"),
            ("http://0x7f000001/", "numeric"),
            ("http://0x7f.1/", "numeric"),
            ("http://017700000001/", "numeric"),
            ("http://1.2.3.4.5/", "numeric"),
            ("http://example.123/", "numeric"),
            ("http://user@example.com/", "user name"),
            ("http://user:pw@example.com/", "user name"),
            ("http://example.com:/", "empty port"),
            ("http://example.com:0/", "not a port"),
            ("http://example..com/", "not a valid host"),
            ("http://exa%6dple.com/", "invalid authority"),
            ("ftp://example.com/", "not http"),
        ] {
            let error = target(url).expect_err(url);
            assert!(error.contains(why), "{url}: {error}");
        }
    }

    #[test]
    fn records_stay_bounded() {
        let mut record = NetRecord::default();
        assert!(record.count("a:80", Some("not granted")));
        assert!(!record.count("a:80", Some("not granted")));
        record.count("a:80", None);
        for i in 0..1000 {
            record.count(&format!("h{i}:80"), Some("not granted"));
        }
        assert_eq!(record.hosts.len(), MAX_RECORDED_HOSTS);
        assert_eq!(record.refused, 1002);
        assert_eq!(record.requests, 1);
        assert_eq!(record.other_hosts, 1000 - (MAX_RECORDED_HOSTS as u32 - 1));
        let a = &record.hosts["a:80"];
        assert_eq!((a.sent, a.refused, a.why), (1, 2, Some("not granted")));
    }

    #[test]
    fn pins_are_names_with_addresses() {
        assert_eq!(
            NetGrant::parse_pin("API.example.com", &["1.2.3.4".into(), "[::1]".into()]),
            Ok((
                "api.example.com".into(),
                vec!["1.2.3.4".parse().expect("ip"), "::1".parse().expect("ip")]
            ))
        );
        for (name, addresses) in [
            ("*.example.com", vec!["1.2.3.4".to_owned()]),
            ("example.com:8080", vec!["1.2.3.4".to_owned()]),
            ("127.0.0.1", vec!["1.2.3.4".to_owned()]),
            ("example.com", vec![]),
            ("example.com", vec!["example.org".to_owned()]),
        ] {
            assert!(NetGrant::parse_pin(name, &addresses).is_err(), "{name}");
        }
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
