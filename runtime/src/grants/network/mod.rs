//! Outbound HTTP for tools: `wasi:http` behind a per-tool allow-list.
//!
//! Every tool's linker has `wasi:http/outgoing-handler`, but each request
//! goes through [`NetGate::send_request`] first, which refuses it unless
//! its host is in the tool's grant (`network = [...]` in the config). What
//! is granted is HTTP to named hosts, nothing more: raw sockets
//! (`wasi:sockets`) and name lookup stay denied for every tool (see
//! `sandbox/store.rs`), so a grant of `api.example.com` cannot be
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

mod gate;
mod target;
mod wire;

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

pub use gate::NetGate;
pub use target::{Target, TargetHost};
pub use wire::{Stream, open};

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

/// Default cap on an outgoing HTTP request body: 4 MiB.
pub const DEFAULT_HTTP_REQUEST_KIB: u64 = 4 * 1024;
/// Default cap on an HTTP response body a tool reads: 16 MiB, the size of
/// the largest result it may return.
pub const DEFAULT_HTTP_RESPONSE_KIB: u64 = 16 * 1024;
/// Default per-request HTTP timeout (connect, first byte, between bytes):
/// 10 s.
pub const DEFAULT_HTTP_TIMEOUT_MS: u64 = 10_000;

/// What a tool may reach over HTTP: the hosts of its grant, the addresses
/// the operator pinned names to (`[tools.NAME.resolve]`), and the caps on
/// each request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetGrant {
    /// Hosts it may reach. Empty: no network at all.
    pub hosts: Vec<HostPattern>,
    /// Names connected to these addresses instead of being resolved.
    pub pinned: BTreeMap<String, Vec<IpAddr>>,
    /// Body caps and timeouts of each request.
    pub limits: NetLimits,
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

/// Caps on one tool's HTTP requests (`http_max_request_kib`,
/// `http_max_response_kib`, `http_timeout_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetLimits {
    /// Largest request body, in bytes.
    pub request_bytes: u64,
    /// Largest response body, in bytes.
    pub response_bytes: u64,
    /// Connect, first-byte and between-bytes timeout, each.
    pub timeout: Duration,
}

impl Default for NetLimits {
    fn default() -> Self {
        NetLimits {
            request_bytes: DEFAULT_HTTP_REQUEST_KIB * 1024,
            response_bytes: DEFAULT_HTTP_RESPONSE_KIB * 1024,
            timeout: Duration::from_millis(DEFAULT_HTTP_TIMEOUT_MS),
        }
    }
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
    pub(super) fn count(&mut self, target: &str, refused: Option<&'static str>) -> bool {
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
