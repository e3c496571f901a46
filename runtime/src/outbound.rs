//! The host's own HTTP/1.1 requests (never a tool's): an authorization
//! server's keys and introspection (`auth::fetch`), and OCI registries and
//! component URLs (`source::registry`, `source::fetch`). Connections go
//! through the one outbound connector (`grants::network::open`), so they
//! follow the rules tools' requests do: exactly the address checked, TLS
//! verified against the Mozilla roots.
//!
//! Invariants:
//! - `https`, or plain `http` to a loopback host only, checked here for
//!   every URL (a redirect a caller follows included).
//! - One exchange per connection; redirects are never followed here (a
//!   caller that follows one decides, per hop, what it sends there).
//! - Every wait is bounded: connecting, the TLS handshake and the response
//!   head within the timeout, each body chunk within the timeout, and the
//!   whole body within [`Request::deadline`].
//! - A body is read up to a cap the caller gives, never further.
//! - Messages name the URL and the failure, never a header the caller set
//!   (credentials travel in headers).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};

use crate::grants::network::{Target, open};

/// `http://` (loopback only, checked by the caller's parser) or `https://`.
pub struct Request<'a> {
    /// `GET`, `HEAD`, `POST`, `PUT`.
    pub method: http::Method,
    /// An absolute URL.
    pub url: &'a str,
    /// Headers besides `Host` and `User-Agent`.
    pub headers: Vec<(http::HeaderName, String)>,
    /// The body (empty for none).
    pub body: Bytes,
    /// Connect, handshake, the response head and each body chunk, each
    /// within this.
    pub timeout: Duration,
    /// The whole exchange, body included, within this.
    pub deadline: Duration,
}

impl<'a> Request<'a> {
    /// A `GET` of `url` with no headers, every wait within `timeout`.
    pub fn get(url: &'a str, timeout: Duration) -> Self {
        Request::new(http::Method::GET, url, timeout)
    }

    /// A `method` request of `url` with no headers and no body, every wait
    /// (and the whole exchange) within `timeout`.
    pub fn new(method: http::Method, url: &'a str, timeout: Duration) -> Self {
        Request {
            method,
            url,
            headers: Vec::new(),
            body: Bytes::new(),
            timeout,
            deadline: timeout,
        }
    }

    /// With `body`.
    #[must_use]
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// With the whole exchange, body included, within `deadline` (each
    /// wait still within the timeout).
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// With header `name: value`.
    #[must_use]
    pub fn header(mut self, name: http::HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

/// A response whose body is not read yet.
pub struct Response {
    /// The status.
    pub status: http::StatusCode,
    /// The headers.
    pub headers: http::HeaderMap,
    url: String,
    body: hyper::body::Incoming,
    connection: tokio::task::JoinHandle<()>,
    timeout: Duration,
    ends: Instant,
}

impl Drop for Response {
    fn drop(&mut self) {
        self.connection.abort();
    }
}

/// Send `request`: the response head, its body unread.
///
/// # Errors
///
/// The URL is not one toolcage may reach, or connecting, the handshake
/// or the exchange failed or timed out (the message says which).
pub async fn send(request: Request<'_>) -> Result<Response, String> {
    let url = request.url;
    let started = Instant::now();
    let uri = check_url(url).map_err(|why| format!("`{url}` {why}"))?;
    let target = Target::parse(&uri).map_err(|why| format!("`{url}`: {why}"))?;
    let stream = open(&target, &BTreeMap::new(), request.timeout)
        .await
        .map_err(|error| format!("cannot connect to `{url}`: {error}"))?;
    let (mut sender, connection) = within(
        url,
        request.timeout,
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)),
    )
    .await?
    .map_err(|error| format!("cannot talk HTTP to `{url}`: {error}"))?;
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    let path = uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), ToString::to_string);
    let mut builder = http::Request::builder()
        .method(request.method)
        .uri(path)
        .header(http::header::HOST, target.authority())
        .header(
            http::header::USER_AGENT,
            concat!("toolcage/", env!("CARGO_PKG_VERSION")),
        );
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let built = builder
        .body(Full::new(request.body))
        .map_err(|_| format!("cannot build the request to `{url}`"))?;
    let response = match within(url, request.timeout, sender.send_request(built)).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => {
            connection.abort();
            return Err(format!("`{url}` failed: {error}"));
        }
        Err(error) => {
            connection.abort();
            return Err(error);
        }
    };
    let (head, body) = response.into_parts();
    Ok(Response {
        status: head.status,
        headers: head.headers,
        url: url.to_owned(),
        body,
        connection,
        timeout: request.timeout,
        ends: started + request.deadline,
    })
}

impl Response {
    /// A header's value, if it is there and is text.
    pub fn header(&self, name: http::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The declared `Content-Length`, if any.
    pub fn content_length(&self) -> Option<u64> {
        self.header(http::header::CONTENT_LENGTH)
            .and_then(|v| v.parse().ok())
    }

    /// The whole body, at most `max_bytes` (refused beyond, before reading
    /// when the length is declared).
    ///
    /// # Errors
    ///
    /// Over the cap, cut short, or too slow.
    pub async fn bytes(self, max_bytes: u64) -> Result<Bytes, String> {
        let mut body = Vec::new();
        self.each_chunk(max_bytes, |chunk| {
            body.extend_from_slice(chunk);
            Ok(())
        })
        .await?;
        Ok(Bytes::from(body))
    }

    /// Hand each chunk of the body to `sink` as it arrives, at most
    /// `max_bytes` in all. `sink` may stop the read with an error.
    ///
    /// # Errors
    ///
    /// Over the cap, cut short (fewer bytes than `Content-Length` said),
    /// too slow, or `sink`'s error.
    pub async fn each_chunk(
        mut self,
        max_bytes: u64,
        mut sink: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<u64, String> {
        let url = self.url.clone();
        let declared = self.content_length();
        if let Some(length) = declared
            && length > max_bytes
        {
            return Err(format!(
                "`{url}` sends {length} bytes, over the cap of {max_bytes}"
            ));
        }
        let mut read: u64 = 0;
        loop {
            let left = self.ends.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "`{url}` did not finish sending within the deadline ({read} bytes read)"
                ));
            }
            let frame = match tokio::time::timeout(self.timeout.min(left), self.body.frame()).await
            {
                Err(_) => {
                    return Err(format!(
                        "`{url}` stopped sending for {} ms ({read} bytes read)",
                        self.timeout.min(left).as_millis()
                    ));
                }
                Ok(None) => break,
                Ok(Some(Err(error))) => {
                    return Err(format!(
                        "`{url}`: the body was cut short after {read} bytes: {error}"
                    ));
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            read += data.len() as u64;
            if read > max_bytes {
                return Err(format!(
                    "`{url}` sent more than the cap of {max_bytes} bytes"
                ));
            }
            sink(&data)?;
        }
        if let Some(length) = declared
            && read != length
        {
            return Err(format!(
                "`{url}`: the body was cut short: {read} of {length} bytes"
            ));
        }
        Ok(read)
    }
}

async fn within<T>(
    url: &str,
    timeout: Duration,
    work: impl Future<Output = T>,
) -> Result<T, String> {
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("`{url}` did not answer within {} ms", timeout.as_millis()))
}

/// An absolute `https` URL, or `http` to a loopback host (a server on this
/// machine: a test, a local registry or authorization server); no fragment, no user name or password.
///
/// # Errors
///
/// What is wrong with it.
pub fn check_url(text: &str) -> Result<http::Uri, &'static str> {
    let uri: http::Uri = text.parse().map_err(|_| "must be an absolute URL")?;
    let host = uri.host().ok_or("must be an absolute URL, with a host")?;
    if text.contains('#') {
        return Err("must not have a fragment");
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err("must not carry a user name or password");
    }
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if is_loopback(host) => Ok(uri),
        Some("http") => Err("must use https (plain http is accepted only for a loopback host)"),
        _ => Err("must be an https URL"),
    }
}

/// `localhost`, or a loopback IP literal.
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// An address literal that is never a registry's or a CDN's: link-local
/// (`169.254.0.0/16`, `fe80::/10`: where clouds serve instance metadata
/// and credentials) and unspecified (`0.0.0.0/8`, `::`: Linux connects
/// those to the machine itself), and their IPv4-in-IPv6 forms. Private
/// ranges are not among them: a registry inside a network may hand out
/// its own addresses.
pub fn is_never_remote_literal(host: &str) -> bool {
    use std::net::IpAddr;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let v4 = |ip: std::net::Ipv4Addr| ip.is_link_local() || ip.octets()[0] == 0;
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => v4(ip),
        Ok(IpAddr::V6(ip)) => {
            ip.is_unspecified()
                || (ip.segments()[0] & 0xffc0) == 0xfe80
                || ip.to_ipv4_mapped().is_some_and(v4)
        }
        Err(_) => false,
    }
}

/// Whether a request that `from` pointed to (a redirect, a token realm)
/// may go to `to`: never from `https` down to plain `http`, never from a
/// remote host to a loopback one or to a link-local or unspecified
/// address literal ([`is_never_remote_literal`]), so a remote registry or
/// server cannot make the host reach services on its own loopback or a
/// cloud's metadata service (`169.254.169.254`). A name that resolves to
/// such an address, and private addresses, are not caught here (see
/// `docs/security.md`).
///
/// # Errors
///
/// Why not, naming `to`.
pub fn may_follow(from: &str, to: &str) -> Result<(), String> {
    let shown = printable(to, 200);
    let host_of = |url: &str| {
        url.parse::<http::Uri>()
            .ok()
            .and_then(|uri| uri.host().map(str::to_owned))
    };
    if from.starts_with("https://") && to.starts_with("http://") {
        return Err(format!("`{shown}` is plain http, after https; refused"));
    }
    let loopback = |url: &str| host_of(url).is_some_and(|h| is_loopback(&h));
    if loopback(to) && !loopback(from) {
        return Err(format!(
            "`{shown}` is on this machine's loopback, named by a remote host; refused"
        ));
    }
    let never_remote = |url: &str| host_of(url).is_some_and(|h| is_never_remote_literal(&h));
    if never_remote(to) && !never_remote(from) && !loopback(from) {
        return Err(format!(
            "`{shown}` is a link-local or unspecified address, named by a remote host; refused"
        ));
    }
    Ok(())
}

/// `text` for a message: at most 80 characters, escaped, quoted.
pub fn quoted(text: &str) -> String {
    let cut: String = text.chars().take(80).flat_map(char::escape_debug).collect();
    let more = if text.chars().nth(80).is_some() {
        "…"
    } else {
        ""
    };
    format!("`{cut}{more}`")
}

/// Text from a remote party, made safe to print in a message: control
/// and bidirectional formatting characters replaced, at most `max`
/// characters.
pub fn printable(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| {
            if crate::terminal::is_control_or_bidi(c) {
                ' '
            } else {
                c
            }
        })
        .collect();
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_party_cannot_point_the_host_at_loopback_or_plain_http() {
        assert!(may_follow("https://ghcr.io/v2/x", "https://cdn.example/b").is_ok());
        assert!(may_follow("http://127.0.0.1:5000/v2/x", "http://127.0.0.1:9/b").is_ok());
        assert!(may_follow("http://localhost:5000/v2/x", "https://cdn.example/b").is_ok());
        for (from, to) in [
            ("https://ghcr.io/v2/x", "http://127.0.0.1/b"),
            ("https://ghcr.io/v2/x", "https://127.0.0.1/b"),
            ("https://ghcr.io/v2/x", "https://[::1]:8080/b"),
            ("https://ghcr.io/v2/x", "https://localhost/token"),
            ("https://ghcr.io/v2/x", "http://cdn.example/b"),
            (
                "https://ghcr.io/v2/x",
                "https://169.254.169.254/latest/meta-data",
            ),
            ("https://ghcr.io/v2/x", "https://[fe80::1]/b"),
            ("https://ghcr.io/v2/x", "https://[::ffff:169.254.169.254]/b"),
            ("https://ghcr.io/v2/x", "https://0.0.0.0/b"),
            ("https://ghcr.io/v2/x", "https://[::]/b"),
        ] {
            assert!(may_follow(from, to).is_err(), "{from} -> {to}");
        }
        // A registry inside a network may point within it (storage by a
        // private address); a test registry on loopback anywhere.
        assert!(may_follow("https://registry.corp/v2/x", "https://10.0.0.6/b").is_ok());
        assert!(may_follow("http://127.0.0.1:5000/v2/x", "https://169.254.1.1/b").is_ok());
        assert!(may_follow("https://ghcr.io/v2/x", "https://8.8.8.8/b").is_ok());
    }
}
