//! A request's target, parsed once from its URL: the one form that is
//! checked against the grant, resolved, connected to, sent as `Host` and
//! verified by TLS.

use std::fmt;
use std::net::IpAddr;

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
    pub fn authority(&self) -> String {
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
