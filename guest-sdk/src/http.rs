//! Outbound HTTP(S) for tools, over `wasi:http` (feature `http`).
//!
//! Blocking and small: [`get`] for the common case, [`Request`] for the rest
//! (method, headers, query parameters, body, timeout, caps), and a
//! [`Response`] with the whole body read into memory.
//!
//! ```no_run
//! use serde::Deserialize;
//! use toolcage_guest::http;
//!
//! #[derive(Deserialize)]
//! struct Release {
//!     tag_name: String,
//! }
//!
//! fn latest_release(repo: &str) -> Result<String, http::Error> {
//!     let response = http::Request::get(format!("https://api.github.com/repos/{repo}/releases/latest"))
//!         .header("accept", "application/vnd.github+json")
//!         .timeout(std::time::Duration::from_secs(10))
//!         .send()?
//!         .error_for_status()?;
//!     Ok(response.json::<Release>()?.tag_name)
//! }
//! # fn main() {}
//! ```
//!
//! # The operator decides where a tool may connect
//!
//! A tool reaches nothing by default. The operator grants hosts per tool in
//! toolcage's config:
//!
//! ```toml
//! [tools.latest_release]
//! network = ["api.github.com"]
//! ```
//!
//! A request to any other host fails with an [`Error`] whose text carries the
//! host's explanation verbatim; return it to the model as it is (with `?` in
//! a tool returning `Result<_, String>` or `Result<_, http::Error>`), so the
//! user learns what to grant. Redirects are followed by the tool, one request
//! per hop, and the host checks every hop against the grant: a redirect to a
//! host that is not granted fails the same way.
//!
//! # Limits
//!
//! - Response bodies are read up to [`Request::max_body_bytes`] (default
//!   [`DEFAULT_MAX_BODY_BYTES`]); a larger body is an error naming the limit.
//!   The host may enforce a smaller cap of its own.
//! - [`Request::timeout`] bounds connecting, the wait for the first byte of
//!   the response and each wait between bytes. The host enforces its own
//!   per-request timeout, and the tool's deadline still ends the whole call.
//! - `GET` and `HEAD` follow up to [`Request::max_redirects`] redirects
//!   (default [`DEFAULT_MAX_REDIRECTS`]); other methods return the redirect
//!   response itself.
//!
//! Only `http://` and `https://` URLs are accepted. The host sets `Host`
//! from the URL and refuses the hop-by-hop headers (`connection`,
//! `transfer-encoding`, `upgrade`, ...). Response bodies are not
//! decompressed, so no `accept-encoding` is sent unless you set one.
//!
//! In a native build (unit tests of a tool's logic) there is no host to ask,
//! and every request fails with [`ErrorKind::Unsupported`].

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// How many bytes of a response body [`Request::send`] reads unless told
/// otherwise: 8 MiB, far more than an API answer and small enough that a
/// runaway download fails fast instead of exhausting the tool's memory.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// How many redirects a `GET` or `HEAD` follows unless told otherwise
/// (browsers allow about 20; APIs rarely need more than one or two).
pub const DEFAULT_MAX_REDIRECTS: u32 = 5;

/// `GET url` with the defaults: follow redirects, read the body up to
/// [`DEFAULT_MAX_BODY_BYTES`]. A response with an error status (404, 500) is
/// still `Ok`; see [`Response::error_for_status`].
///
/// # Errors
///
/// The URL is not a valid `http(s)://` URL, the host refused the request
/// (the host is not granted), the request failed on the way (DNS,
/// connection, TLS, timeout), a redirect went wrong, or the body is larger
/// than the cap. The [`Error`]'s text says which and what to do.
pub fn get(url: &str) -> Result<Response, Error> {
    Request::get(url).send()
}

/// Percent-encode `text` for use as one component of a URL (a query
/// parameter's name or value, or one path segment): everything but ASCII
/// letters, digits and `-._~` is encoded, as UTF-8.
///
/// ```
/// # use toolcage_guest::http::encode_component;
/// assert_eq!(encode_component("São Paulo & co"), "S%C3%A3o%20Paulo%20%26%20co");
/// ```
pub fn encode_component(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            push_percent(&mut encoded, byte);
        }
    }
    encoded
}

/// An HTTP method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `PATCH`
    Patch,
    /// `DELETE`
    Delete,
    /// `OPTIONS`
    Options,
    /// Any other method, such as `PROPFIND` (an HTTP token).
    Other(String),
}

impl Method {
    /// The method's name, such as `GET`.
    pub fn as_str(&self) -> &str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Other(name) => name,
        }
    }

    /// Whether redirects are followed for this method (`GET` and `HEAD`:
    /// repeating them elsewhere is safe).
    fn follows_redirects(&self) -> bool {
        matches!(self, Method::Get | Method::Head)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Method {
    type Err = String;

    /// Parse a method name, case-insensitively for the standard ones.
    fn from_str(name: &str) -> Result<Self, String> {
        Ok(match name.to_ascii_uppercase().as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "PATCH" => Method::Patch,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            _ if !name.is_empty() && name.bytes().all(is_token_byte) => {
                Method::Other(name.to_owned())
            }
            _ => return Err(format!("`{name}` is not an HTTP method")),
        })
    }
}

/// An HTTP request, built step by step and sent with [`Request::send`].
///
/// ```no_run
/// # use toolcage_guest::http::Request;
/// # fn main() -> Result<(), toolcage_guest::http::Error> {
/// let response = Request::post("https://api.example.com/v1/notes")
///     .header("authorization", &format!("Bearer {}", std::env::var("API_TOKEN").unwrap_or_default()))
///     .json(&serde_json::json!({"text": "hello"}))
///     .timeout(std::time::Duration::from_secs(5))
///     .send()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Request {
    method: Method,
    url: String,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    timeout: Option<Duration>,
    max_body_bytes: usize,
    max_redirects: u32,
    /// A mistake made while building (a body that did not serialise),
    /// reported by `send` so that building stays chainable.
    deferred: Option<ErrorKind>,
}

impl Request {
    /// A request with `method` to `url`.
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Request {
            method,
            url: url.into(),
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
            timeout: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_redirects: DEFAULT_MAX_REDIRECTS,
            deferred: None,
        }
    }

    /// A `GET` request.
    pub fn get(url: impl Into<String>) -> Self {
        Request::new(Method::Get, url)
    }

    /// A `HEAD` request.
    pub fn head(url: impl Into<String>) -> Self {
        Request::new(Method::Head, url)
    }

    /// A `POST` request.
    pub fn post(url: impl Into<String>) -> Self {
        Request::new(Method::Post, url)
    }

    /// A `PUT` request.
    pub fn put(url: impl Into<String>) -> Self {
        Request::new(Method::Put, url)
    }

    /// A `DELETE` request.
    pub fn delete(url: impl Into<String>) -> Self {
        Request::new(Method::Delete, url)
    }

    /// Add a header. Names are case-insensitive; adding a name twice sends
    /// it twice.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Append `name=value` to the URL's query, percent-encoded (see
    /// [`encode_component`]).
    pub fn query(mut self, name: &str, value: &str) -> Self {
        self.query.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Send `body` as the request body (with a `content-length`).
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Send `value` as a JSON body, with `content-type: application/json`
    /// unless a content type was set.
    pub fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => {
                if !has_header(&self.headers, "content-type") {
                    self.headers
                        .push(("content-type".into(), "application/json".into()));
                }
                self.body = Some(body);
            }
            Err(error) => {
                self.deferred = Some(ErrorKind::InvalidRequest(format!(
                    "the JSON body could not be serialised: {error}"
                )));
            }
        }
        self
    }

    /// Give up if connecting, the first byte of the response, or any gap
    /// between bytes takes longer than `timeout` (each hop of a redirect
    /// separately). Without one, the host's per-request timeout applies.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Read at most `limit` bytes of the response body; a longer body is an
    /// error ([`ErrorKind::BodyTooLarge`]). Default
    /// [`DEFAULT_MAX_BODY_BYTES`].
    pub fn max_body_bytes(mut self, limit: usize) -> Self {
        self.max_body_bytes = limit;
        self
    }

    /// Follow at most `limit` redirects (`GET` and `HEAD` only); one more is
    /// an error ([`ErrorKind::TooManyRedirects`]). `0` follows none and
    /// returns the redirect response itself. Default
    /// [`DEFAULT_MAX_REDIRECTS`].
    pub fn max_redirects(mut self, limit: u32) -> Self {
        self.max_redirects = limit;
        self
    }

    /// Send the request and read the response, following redirects.
    ///
    /// # Errors
    ///
    /// As for [`get`]; also a header name or value that is not valid HTTP, or
    /// one the host does not let tools set.
    pub fn send(self) -> Result<Response, Error> {
        if let Some(kind) = self.deferred.clone() {
            return Err(Error::new(&self.url, kind));
        }
        let mut url = Url::parse(&self.url)
            .map_err(|reason| Error::new(&self.url, ErrorKind::InvalidUrl(reason)))?;
        for (name, value) in &self.query {
            url.append_query(name, value);
        }
        let mut headers = self.headers.clone();
        if !has_header(&headers, "user-agent") {
            headers.push(("user-agent".into(), USER_AGENT.into()));
        }
        if let Some(body) = &self.body
            && !has_header(&headers, "content-length")
        {
            headers.push(("content-length".into(), body.len().to_string()));
        }
        let follow = self.method.follows_redirects() && self.max_redirects > 0;
        let first_url = url.to_string();
        let mut redirects = 0;
        loop {
            let hop = Hop {
                method: &self.method,
                url: &url,
                headers: &headers,
                body: self.body.as_deref(),
                timeout: self.timeout,
                max_body_bytes: self.max_body_bytes,
                follow,
            };
            let response = transport::send(&hop)?;
            if !(follow && is_redirect(response.status)) {
                return Ok(response);
            }
            let url_text = url.to_string();
            if redirects == self.max_redirects {
                return Err(Error::new(
                    &first_url,
                    ErrorKind::TooManyRedirects {
                        limit: self.max_redirects,
                    },
                ));
            }
            let Some(location) = response.header("location") else {
                return Err(Error::new(
                    &url_text,
                    ErrorKind::BadRedirect(format!(
                        "it answered {} without a `location` header",
                        response.status
                    )),
                ));
            };
            let next = url.join(location).map_err(|reason| {
                Error::new(
                    &url_text,
                    ErrorKind::BadRedirect(format!(
                        "it redirected to `{location}`, which cannot be followed: {reason}"
                    )),
                )
            })?;
            if next.origin() != url.origin() {
                // Credentials meant for one site are not sent to another.
                headers.retain(|(name, _)| !is_credential_header(name));
            }
            url = next;
            redirects += 1;
        }
    }
}

/// What identifies requests from toolcage tools unless a tool sets its own
/// `user-agent` (some APIs refuse requests without one).
const USER_AGENT: &str = concat!("toolcage-guest/", env!("CARGO_PKG_VERSION"));

fn has_header(headers: &[(String, String)], name: &str) -> bool {
    headers
        .iter()
        .any(|(key, _)| key.eq_ignore_ascii_case(name))
}

fn is_credential_header(name: &str) -> bool {
    ["authorization", "cookie", "proxy-authorization"]
        .iter()
        .any(|credential| name.eq_ignore_ascii_case(credential))
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// One request on the wire: a `Request` at one hop of its redirects.
struct Hop<'a> {
    method: &'a Method,
    url: &'a Url,
    headers: &'a [(String, String)],
    body: Option<&'a [u8]>,
    timeout: Option<Duration>,
    max_body_bytes: usize,
    /// Redirects will be followed: a redirect's body is not read.
    follow: bool,
}

/// A response, with its body read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code, such as `200`.
    pub status: u16,
    /// The headers in the order received; names are lowercase.
    pub headers: Vec<(String, String)>,
    /// The body (empty for `HEAD`).
    pub body: Vec<u8>,
    /// The URL that answered: the request's URL after any redirects.
    pub url: String,
}

impl Response {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of header `name` (case-insensitive), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The body as text (UTF-8; invalid sequences become `�`).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON into `T`.
    ///
    /// # Errors
    ///
    /// The body is not JSON of `T`'s shape ([`ErrorKind::Json`]).
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(&self.body).map_err(|error| {
            Error::new(
                &self.url,
                ErrorKind::Json {
                    status: self.status,
                    message: error.to_string(),
                },
            )
        })
    }

    /// `Ok(self)` if the status is 2xx, else an error with the status and
    /// the start of the body ([`ErrorKind::Status`]).
    ///
    /// # Errors
    ///
    /// The status is not 2xx.
    pub fn error_for_status(self) -> Result<Self, Error> {
        if self.is_success() {
            return Ok(self);
        }
        let text = self.text();
        let excerpt = match text.char_indices().nth(STATUS_EXCERPT_CHARS) {
            Some((end, _)) => format!("{}…", &text[..end]),
            None => text,
        };
        Err(Error::new(
            &self.url,
            ErrorKind::Status {
                status: self.status,
                body: excerpt.trim().to_owned(),
            },
        ))
    }
}

/// How much of an error response's body [`Response::error_for_status`]
/// keeps: APIs explain themselves in the first few lines.
const STATUS_EXCERPT_CHARS: usize = 500;

/// Why a request failed. Its `Display` is written for a model: what went
/// wrong, with the URL, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    url: String,
    kind: ErrorKind,
}

/// The kinds of [`Error`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The URL cannot be requested (not `http(s)://`, malformed); the reason.
    InvalidUrl(String),
    /// The request cannot be built (a bad header or method); the reason.
    InvalidRequest(String),
    /// `wasi:http` reported an error while sending the request or reading
    /// the response: a refused host, DNS, connection, TLS, timeout, a cap
    /// the host enforces.
    Transport {
        /// The `wasi:http` `error-code` in WIT spelling, with its payload if
        /// any, such as `connection-refused` or `dns-error(rcode: NXDOMAIN)`.
        code: String,
        /// For `internal-error`, the host's message (toolcage explains a
        /// refused host here).
        message: Option<String>,
    },
    /// Sending the request body or reading the response body failed without
    /// a `wasi:http` error code (the host's stream error: for toolcage, a
    /// cap or a timeout it enforces while the body moves).
    Stream {
        /// The stream error's description, from the host.
        message: String,
    },
    /// More redirects than [`Request::max_redirects`] allows.
    TooManyRedirects {
        /// The limit.
        limit: u32,
    },
    /// A redirect without a usable `location`; the reason.
    BadRedirect(String),
    /// The body is longer than [`Request::max_body_bytes`] allows.
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// [`Response::error_for_status`] on a non-2xx response.
    Status {
        /// The status code.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// [`Response::json`] could not parse the body.
    Json {
        /// The response's status code.
        status: u16,
        /// The parser's message.
        message: String,
    },
    /// Not running under toolcage (a native build): there is no host to send
    /// the request.
    Unsupported,
}

impl Error {
    fn new(url: &str, kind: ErrorKind) -> Self {
        Error {
            url: url.to_owned(),
            kind,
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The URL of the request that failed: the hop that failed, after any
    /// redirects (for [`ErrorKind::TooManyRedirects`], the first URL).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The host's own message: for an `internal-error` (such as toolcage's
    /// explanation of a host the tool may not reach) or a failed body
    /// stream.
    pub fn host_message(&self) -> Option<&str> {
        match &self.kind {
            ErrorKind::Transport { message, .. } => message.as_deref(),
            ErrorKind::Stream { message } => Some(message),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = &self.url;
        match &self.kind {
            ErrorKind::InvalidUrl(reason) => write!(f, "cannot request `{url}`: {reason}"),
            ErrorKind::InvalidRequest(reason) => {
                write!(f, "cannot send the request to {url}: {reason}")
            }
            ErrorKind::Transport {
                code,
                message: Some(message),
            } => write!(
                f,
                "request to {url} failed: {message} (wasi:http error-code `{code}`)"
            ),
            ErrorKind::Transport {
                code,
                message: None,
            } => write!(
                f,
                "request to {url} failed: {} (wasi:http error-code `{code}`)",
                explain_code(code)
            ),
            ErrorKind::Stream { message } => write!(
                f,
                "request to {url} failed while a body was being transferred: {message}; try \
                 again, or ask for less data"
            ),
            ErrorKind::TooManyRedirects { limit } => write!(
                f,
                "request to {url} was redirected more than {limit} times; the address may \
                 redirect in a loop, use the final address directly"
            ),
            ErrorKind::BadRedirect(reason) => {
                write!(
                    f,
                    "request to {url} could not follow its redirect: {reason}"
                )
            }
            ErrorKind::BodyTooLarge { limit } => write!(
                f,
                "the response from {url} is larger than the limit of {limit} bytes \
                 (max_body_bytes); ask for less data, such as a smaller page or a narrower query"
            ),
            ErrorKind::Status { status, body } if body.is_empty() => {
                write!(f, "{url} answered HTTP {status}")
            }
            ErrorKind::Status { status, body } => {
                write!(f, "{url} answered HTTP {status}: {body}")
            }
            ErrorKind::Json { status, message } => write!(
                f,
                "the response from {url} (HTTP {status}) is not the expected JSON: {message}"
            ),
            ErrorKind::Unsupported => write!(
                f,
                "cannot request {url}: HTTP needs the toolcage host (this is a native build)"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for String {
    fn from(error: Error) -> String {
        error.to_string()
    }
}

/// What a `wasi:http` error code means, and what to do, for the model.
fn explain_code(code: &str) -> &'static str {
    let name = code.split('(').next().unwrap_or(code);
    match name {
        "dns-timeout" => "looking up the host name timed out; try again later",
        "dns-error" | "destination-not-found" => {
            "the host name could not be resolved; check the URL for typos"
        }
        "destination-unavailable" | "connection-refused" => {
            "the server refused the connection or is not reachable; check the URL's host and \
             port, or try again later"
        }
        "destination-ip-prohibited" | "destination-ip-unroutable" => {
            "that address may not or cannot be reached from here"
        }
        "connection-terminated" | "http-response-incomplete" => {
            "the connection closed before the response was complete; try again"
        }
        "connection-timeout"
        | "connection-read-timeout"
        | "connection-write-timeout"
        | "http-response-timeout" => {
            "the server took too long to answer; try again later, or ask for less"
        }
        "connection-limit-reached" => "too many connections are open; try again later",
        "tls-protocol-error" | "tls-certificate-error" | "tls-alert-received" => {
            "the secure (TLS) connection could not be established; check that the URL's host \
             serves HTTPS with a valid certificate"
        }
        "http-request-denied" => "the request was denied",
        "http-request-body-size" => "the request body is larger than allowed",
        "http-request-method-invalid" => "the HTTP method is not valid",
        "http-request-uri-invalid" | "http-request-uri-too-long" => {
            "the URL is invalid or too long"
        }
        "http-request-header-section-size" | "http-request-header-size" => {
            "the request headers are too large"
        }
        "http-response-body-size" => {
            "the response is larger than the host allows; ask for less data"
        }
        "http-response-header-section-size"
        | "http-response-header-size"
        | "http-response-trailer-section-size"
        | "http-response-trailer-size" => "the response headers are too large",
        "http-response-transfer-coding"
        | "http-response-content-coding"
        | "http-protocol-error" => "the server sent a response that is not valid HTTP",
        "loop-detected" => "the request would loop",
        "configuration-error" => "the host's HTTP set-up is broken; tell the operator",
        _ => "the host could not complete the request",
    }
}

/// Sending one hop over `wasi:http`. Everything `wasip2` is in here.
mod transport {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, FutureIncomingResponse, HeaderError, IncomingBody, IncomingResponse,
        Method as WasiMethod, OutgoingBody, OutgoingRequest, RequestOptions, Scheme as WasiScheme,
    };
    use wasip2::io::streams::StreamError;

    use super::{Error, ErrorKind, Hop, Method, Response, Scheme, is_redirect};

    /// Bytes asked for per read of a response body.
    const READ_CHUNK: u64 = 64 * 1024;
    /// `blocking-write-and-flush` takes at most 4096 bytes per call.
    const WRITE_CHUNK: usize = 4096;
    /// The headers wasmtime's `wasi:http` refuses from guests by default
    /// (hop-by-hop headers, and `host`, which it sets from the URL): named in
    /// the error, since `fields.from-list` only says "forbidden".
    const FORBIDDEN_HEADERS: [&str; 9] = [
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "host",
        "http2-settings",
    ];

    pub(super) fn send(hop: &Hop<'_>) -> Result<Response, Error> {
        let url = hop.url.to_string();
        if cfg!(not(target_family = "wasm")) {
            return Err(Error::new(&url, ErrorKind::Unsupported));
        }
        let invalid = |reason: String| Error::new(&url, ErrorKind::InvalidRequest(reason));
        let transport = |code: ErrorCode| Error::new(&url, transport_kind(code));
        let failed = |failure: Failure| Error::new(&url, failure.into_kind());

        let entries: Vec<(String, Vec<u8>)> = hop
            .headers
            .iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), value.clone().into_bytes()))
            .collect();
        let fields = Fields::from_list(&entries)
            .map_err(|error| invalid(header_problem(hop.headers, error)))?;
        let request = OutgoingRequest::new(fields);
        request
            .set_method(&wasi_method(hop.method))
            .map_err(|()| invalid(format!("`{}` is not a valid HTTP method", hop.method)))?;
        let scheme = match hop.url.scheme {
            Scheme::Http => WasiScheme::Http,
            Scheme::Https => WasiScheme::Https,
        };
        request
            .set_scheme(Some(&scheme))
            .map_err(|()| invalid("the host does not accept the URL's scheme".into()))?;
        request
            .set_authority(Some(&hop.url.authority()))
            .map_err(|()| {
                invalid(format!(
                    "the host does not accept the authority `{}`",
                    hop.url.authority()
                ))
            })?;
        request
            .set_path_with_query(Some(&hop.url.path_and_query))
            .map_err(|()| {
                invalid(format!(
                    "the host does not accept the path `{}`",
                    hop.url.path_and_query
                ))
            })?;
        let outgoing_body = match hop.body {
            Some(_) => Some(
                request
                    .body()
                    .map_err(|()| invalid("the request body could not be opened".into()))?,
            ),
            None => None,
        };
        let options = hop.timeout.map(|timeout| {
            let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
            let options = RequestOptions::new();
            // A host that does not support one of these keeps its own
            // default, which is as good as this request can do.
            let _ = options.set_connect_timeout(Some(nanos));
            let _ = options.set_first_byte_timeout(Some(nanos));
            let _ = options.set_between_bytes_timeout(Some(nanos));
            options
        });

        // The body is written after `handle`: the host streams it to the
        // server as it comes, and would otherwise have nowhere to put it.
        let future = outgoing_handler::handle(request, options).map_err(transport)?;
        let written = match (outgoing_body, hop.body) {
            (Some(outgoing_body), Some(bytes)) => write_body(outgoing_body, bytes),
            _ => Ok(()),
        };
        // If writing failed because the request failed (a refused host closes
        // the body), the response's error says why; report that first.
        let incoming = wait(&future).map_err(failed)?;
        written.map_err(failed)?;
        drop(future);

        read_response(hop, incoming, &url)
    }

    /// Why a request failed below the level of HTTP.
    enum Failure {
        /// `wasi:http`'s error code.
        Code(ErrorCode),
        /// A body stream failed without an error code: its description.
        Stream(String),
    }

    impl Failure {
        fn into_kind(self) -> ErrorKind {
            match self {
                Failure::Code(code) => transport_kind(code),
                Failure::Stream(message) => ErrorKind::Stream { message },
            }
        }
    }

    impl From<StreamError> for Failure {
        fn from(error: StreamError) -> Self {
            match error {
                StreamError::LastOperationFailed(error) => {
                    match wasip2::http::types::http_error_code(&error) {
                        Some(code) => Failure::Code(code),
                        None => Failure::Stream(error.to_debug_string()),
                    }
                }
                StreamError::Closed => Failure::Code(ErrorCode::ConnectionTerminated),
            }
        }
    }

    fn wait(future: &FutureIncomingResponse) -> Result<IncomingResponse, Failure> {
        loop {
            match future.get() {
                Some(Ok(result)) => return result.map_err(Failure::Code),
                Some(Err(())) => {
                    return Err(Failure::Stream("the response was already taken".into()));
                }
                None => future.subscribe().block(),
            }
        }
    }

    fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), Failure> {
        {
            let stream = body
                .write()
                .map_err(|()| Failure::Stream("the request body could not be opened".into()))?;
            for chunk in bytes.chunks(WRITE_CHUNK) {
                stream.blocking_write_and_flush(chunk)?;
            }
            // The stream is a child of the body: it goes before `finish`.
        }
        OutgoingBody::finish(body, None).map_err(Failure::Code)
    }

    fn read_response(
        hop: &Hop<'_>,
        incoming: IncomingResponse,
        url: &str,
    ) -> Result<Response, Error> {
        let status = incoming.status();
        let headers: Vec<(String, String)> = {
            let fields = incoming.headers();
            fields
                .entries()
                .into_iter()
                .map(|(name, value)| {
                    (
                        name.to_ascii_lowercase(),
                        String::from_utf8_lossy(&value).into_owned(),
                    )
                })
                .collect()
        };
        let mut response = Response {
            status,
            headers,
            body: Vec::new(),
            url: url.to_owned(),
        };
        let has_no_body = *hop.method == Method::Head
            || status == 204
            || status == 304
            || (hop.follow && is_redirect(status));
        if has_no_body {
            return Ok(response);
        }
        let too_large = || {
            Error::new(
                url,
                ErrorKind::BodyTooLarge {
                    limit: hop.max_body_bytes,
                },
            )
        };
        // Refuse early when the server says up front that it is too large.
        if let Some(length) = response
            .header("content-length")
            .and_then(|l| l.trim().parse::<u64>().ok())
            && length > hop.max_body_bytes as u64
        {
            return Err(too_large());
        }
        let body = incoming.consume().map_err(|()| {
            let failure = Failure::Stream("the response body was already taken".into());
            Error::new(url, failure.into_kind())
        })?;
        let read = read_body(&body, hop.max_body_bytes);
        drop(body);
        drop(incoming);
        match read {
            Ok(bytes) => {
                response.body = bytes;
                Ok(response)
            }
            Err(None) => Err(too_large()),
            Err(Some(failure)) => Err(Error::new(url, failure.into_kind())),
        }
    }

    /// The body, or `Err(None)` when it is longer than `limit`.
    fn read_body(body: &IncomingBody, limit: usize) -> Result<Vec<u8>, Option<Failure>> {
        let stream = body.stream().map_err(|()| {
            Some(Failure::Stream(
                "the response body could not be opened".into(),
            ))
        })?;
        let mut bytes = Vec::new();
        loop {
            match stream.blocking_read(READ_CHUNK) {
                Ok(chunk) => {
                    if bytes.len() + chunk.len() > limit {
                        return Err(None);
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Err(StreamError::Closed) => return Ok(bytes),
                Err(error) => return Err(Some(error.into())),
            }
        }
    }

    fn wasi_method(method: &Method) -> WasiMethod {
        match method {
            Method::Get => WasiMethod::Get,
            Method::Head => WasiMethod::Head,
            Method::Post => WasiMethod::Post,
            Method::Put => WasiMethod::Put,
            Method::Patch => WasiMethod::Patch,
            Method::Delete => WasiMethod::Delete,
            Method::Options => WasiMethod::Options,
            Method::Other(name) => WasiMethod::Other(name.clone()),
        }
    }

    /// `Fields::from_list` says what kind of problem, not which header:
    /// find the header to name.
    fn header_problem(headers: &[(String, String)], error: HeaderError) -> String {
        let named = |test: &dyn Fn(&str, &str) -> bool| {
            headers
                .iter()
                .find(|(name, value)| test(name, value))
                .map(|(name, _)| name.as_str())
        };
        match error {
            HeaderError::Forbidden => {
                match named(&|name, _| {
                    FORBIDDEN_HEADERS
                        .iter()
                        .any(|f| name.eq_ignore_ascii_case(f))
                }) {
                    Some(name) => format!(
                        "header `{name}` may not be set by a tool (the host sets it, or it \
                         controls the connection); remove it"
                    ),
                    None => "one of the headers may not be set by a tool; remove the headers \
                             that control the connection"
                        .into(),
                }
            }
            _ => match named(&|name, value| {
                name.is_empty()
                    || !name.bytes().all(super::is_token_byte)
                    || value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0)
            }) {
                Some(name) => format!("header `{name}` has an invalid name or value"),
                None => format!("the headers were refused ({error:?})"),
            },
        }
    }

    /// The error code in WIT spelling (with its payload, if any), and the
    /// host's message for `internal-error`.
    pub(super) fn transport_kind(code: ErrorCode) -> ErrorKind {
        let size = |size: Option<u64>| size.map(|s| s.to_string());
        let count = |count: Option<u32>| count.map(|c| c.to_string());
        let (name, detail) = match code {
            ErrorCode::InternalError(message) => {
                let code = "internal-error".to_owned();
                return ErrorKind::Transport { code, message };
            }
            ErrorCode::DnsTimeout => ("dns-timeout", None),
            ErrorCode::DnsError(payload) => {
                let parts: Vec<String> = [
                    payload.rcode.map(|rcode| format!("rcode: {rcode}")),
                    payload.info_code.map(|info| format!("info-code: {info}")),
                ]
                .into_iter()
                .flatten()
                .collect();
                ("dns-error", (!parts.is_empty()).then(|| parts.join(", ")))
            }
            ErrorCode::DestinationNotFound => ("destination-not-found", None),
            ErrorCode::DestinationUnavailable => ("destination-unavailable", None),
            ErrorCode::DestinationIpProhibited => ("destination-ip-prohibited", None),
            ErrorCode::DestinationIpUnroutable => ("destination-ip-unroutable", None),
            ErrorCode::ConnectionRefused => ("connection-refused", None),
            ErrorCode::ConnectionTerminated => ("connection-terminated", None),
            ErrorCode::ConnectionTimeout => ("connection-timeout", None),
            ErrorCode::ConnectionReadTimeout => ("connection-read-timeout", None),
            ErrorCode::ConnectionWriteTimeout => ("connection-write-timeout", None),
            ErrorCode::ConnectionLimitReached => ("connection-limit-reached", None),
            ErrorCode::TlsProtocolError => ("tls-protocol-error", None),
            ErrorCode::TlsCertificateError => ("tls-certificate-error", None),
            ErrorCode::TlsAlertReceived(alert) => ("tls-alert-received", alert.alert_message),
            ErrorCode::HttpRequestDenied => ("http-request-denied", None),
            ErrorCode::HttpRequestLengthRequired => ("http-request-length-required", None),
            ErrorCode::HttpRequestBodySize(limit) => ("http-request-body-size", size(limit)),
            ErrorCode::HttpRequestMethodInvalid => ("http-request-method-invalid", None),
            ErrorCode::HttpRequestUriInvalid => ("http-request-uri-invalid", None),
            ErrorCode::HttpRequestUriTooLong => ("http-request-uri-too-long", None),
            ErrorCode::HttpRequestHeaderSectionSize(limit) => {
                ("http-request-header-section-size", count(limit))
            }
            ErrorCode::HttpRequestHeaderSize(field) => (
                "http-request-header-size",
                field.and_then(|field| field.field_name),
            ),
            ErrorCode::HttpRequestTrailerSectionSize(limit) => {
                ("http-request-trailer-section-size", count(limit))
            }
            ErrorCode::HttpRequestTrailerSize(field) => {
                ("http-request-trailer-size", field.field_name)
            }
            ErrorCode::HttpResponseIncomplete => ("http-response-incomplete", None),
            ErrorCode::HttpResponseHeaderSectionSize(limit) => {
                ("http-response-header-section-size", count(limit))
            }
            ErrorCode::HttpResponseHeaderSize(field) => {
                ("http-response-header-size", field.field_name)
            }
            ErrorCode::HttpResponseBodySize(limit) => ("http-response-body-size", size(limit)),
            ErrorCode::HttpResponseTrailerSectionSize(limit) => {
                ("http-response-trailer-section-size", count(limit))
            }
            ErrorCode::HttpResponseTrailerSize(field) => {
                ("http-response-trailer-size", field.field_name)
            }
            ErrorCode::HttpResponseTransferCoding(coding) => {
                ("http-response-transfer-coding", coding)
            }
            ErrorCode::HttpResponseContentCoding(coding) => {
                ("http-response-content-coding", coding)
            }
            ErrorCode::HttpResponseTimeout => ("http-response-timeout", None),
            ErrorCode::HttpUpgradeFailed => ("http-upgrade-failed", None),
            ErrorCode::HttpProtocolError => ("http-protocol-error", None),
            ErrorCode::LoopDetected => ("loop-detected", None),
            ErrorCode::ConfigurationError => ("configuration-error", None),
        };
        let code = match detail {
            Some(detail) => format!("{name}({detail})"),
            None => name.to_owned(),
        };
        ErrorKind::Transport {
            code,
            message: None,
        }
    }
}

/// An `http` or `https` URL, split the way `wasi:http` wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    scheme: Scheme,
    /// Lowercase; an IPv6 address keeps its brackets.
    host: String,
    /// Only when not the scheme's default.
    port: Option<u16>,
    /// Starts with `/`; percent-encoded where the input was not; no
    /// fragment.
    path_and_query: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

impl Url {
    /// Parse an absolute `http(s)://` URL; the error is the reason, for a
    /// model.
    fn parse(input: &str) -> Result<Url, String> {
        let input = input.trim();
        // `localhost:8080/x` is a host and port without a scheme, not a
        // URL with the scheme `localhost`.
        let scheme_less = split_scheme(input)
            .is_some_and(|(_, rest)| rest.starts_with(|c: char| c.is_ascii_digit()));
        let Some((scheme, rest)) = split_scheme(input).filter(|_| !scheme_less) else {
            return Err(
                "it is not an absolute URL; give one such as `https://api.example.com/path`".into(),
            );
        };
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => {
                return Err(format!(
                    "only `http://` and `https://` URLs can be requested, not `{other}:`"
                ));
            }
        };
        let Some(rest) = rest.strip_prefix("//") else {
            return Err(format!(
                "`//` and a host must follow `{}:`",
                scheme.as_str()
            ));
        };
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let (host, port) = parse_authority(authority, scheme)?;
        Ok(Url {
            scheme,
            host,
            port,
            path_and_query: normalise_path_and_query(tail),
        })
    }

    /// `host[:port]`, as sent in `Host` and checked against the grant.
    fn authority(&self) -> String {
        match self.port {
            Some(port) => format!("{}:{port}", self.host),
            None => self.host.clone(),
        }
    }

    fn origin(&self) -> (Scheme, &str, u16) {
        (
            self.scheme,
            &self.host,
            self.port.unwrap_or(self.scheme.default_port()),
        )
    }

    fn append_query(&mut self, name: &str, value: &str) {
        let separator = if self.path_and_query.contains('?') {
            if self.path_and_query.ends_with(['?', '&']) {
                ""
            } else {
                "&"
            }
        } else {
            "?"
        };
        self.path_and_query = format!(
            "{}{separator}{}={}",
            self.path_and_query,
            encode_component(name),
            encode_component(value)
        );
    }

    /// Resolve `reference` (a redirect's `location`) against this URL, as
    /// RFC 3986 section 5.2 does.
    fn join(&self, reference: &str) -> Result<Url, String> {
        let reference = reference.trim();
        if split_scheme(reference).is_some() {
            return Url::parse(reference);
        }
        if reference.starts_with("//") {
            return Url::parse(&format!("{}:{reference}", self.scheme.as_str()));
        }
        let reference = reference.split('#').next().unwrap_or("");
        let (ref_path, ref_query) = match reference.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (reference, None),
        };
        let (base_path, base_query) = match self.path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (self.path_and_query.as_str(), None),
        };
        let (path, query) = if ref_path.is_empty() {
            (base_path.to_owned(), ref_query.or(base_query))
        } else if ref_path.starts_with('/') {
            (remove_dot_segments(ref_path), ref_query)
        } else {
            let directory = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
            (
                remove_dot_segments(&format!("{directory}{ref_path}")),
                ref_query,
            )
        };
        let tail = match query {
            Some(query) => format!("{path}?{query}"),
            None => path,
        };
        Ok(Url {
            path_and_query: normalise_path_and_query(&tail),
            ..self.clone()
        })
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme.as_str(),
            self.authority(),
            self.path_and_query
        )
    }
}

/// `scheme` and what follows `scheme:`, if `input` starts with a scheme.
fn split_scheme(input: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = input.split_once(':')?;
    let mut bytes = scheme.bytes();
    let starts_alpha = bytes.next().is_some_and(|b| b.is_ascii_alphabetic());
    let valid =
        starts_alpha && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    valid.then_some((scheme, rest))
}

fn parse_authority(authority: &str, scheme: Scheme) -> Result<(String, Option<u16>), String> {
    if authority.contains('@') {
        return Err(
            "user names and passwords in URLs are not supported; send credentials in a \
                    header such as `authorization` instead"
                .into(),
        );
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let Some((address, after)) = rest.split_once(']') else {
            return Err(format!(
                "the IPv6 address in `{authority}` is missing its closing `]`"
            ));
        };
        if address.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("`[{address}]` is not an IPv6 address"));
        }
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or_else(|| {
                format!("unexpected `{after}` after the IPv6 address in `{authority}`")
            })?),
        };
        (format!("[{}]", address.to_ascii_lowercase()), port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if host.is_empty() {
            return Err(
                "the URL has no host; give one such as `https://api.example.com/path`".into(),
            );
        }
        if !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        {
            return Err(format!(
                "`{host}` is not a valid host name (an internationalised name must be given in \
                 its ASCII `xn--` form)"
            ));
        }
        (host.to_ascii_lowercase(), port)
    };
    let port = match port {
        None | Some("") => None,
        Some(digits) => {
            let port = digits
                .parse::<u16>()
                .ok()
                .filter(|port| *port != 0 && digits.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| format!("`{digits}` is not a valid port (1 to 65535)"))?;
            (port != scheme.default_port()).then_some(port)
        }
    };
    Ok((host, port))
}

/// The path and query of a URL (from the first `/` or `?`): the fragment
/// dropped, an empty path made `/`, and bytes that may not appear in a
/// request target percent-encoded (spaces, quotes, non-ASCII). Existing
/// `%XX` escapes are kept as they are.
fn normalise_path_and_query(tail: &str) -> String {
    let tail = tail.split('#').next().unwrap_or("");
    let mut out = String::with_capacity(tail.len() + 1);
    if !tail.starts_with('/') {
        out.push('/');
    }
    for byte in tail.bytes() {
        // RFC 3986 `pchar`, `/` and `?`, and `%` for escapes already there.
        let allowed = byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&byte);
        if allowed {
            out.push(char::from(byte));
        } else {
            push_percent(&mut out, byte);
        }
    }
    out
}

fn push_percent(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(char::from(HEX[usize::from(byte >> 4)]));
    out.push(char::from(HEX[usize::from(byte & 0xf)]));
}

/// RFC 3986 section 5.2.4, on an absolute path.
fn remove_dot_segments(path: &str) -> String {
    let mut output: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing_slash = false;
    for (index, segment) in segments.iter().enumerate() {
        match *segment {
            "." => trailing_slash = index == last,
            ".." => {
                output.pop();
                trailing_slash = index == last;
            }
            segment => {
                output.push(segment);
                trailing_slash = false;
            }
        }
    }
    let mut result = String::from("/");
    result.push_str(&output.join("/"));
    if trailing_slash && !result.ends_with('/') {
        result.push('/');
    }
    result
}

/// RFC 9110 `tchar`: what a method or header name may be made of.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> String {
        match Url::parse(text) {
            Ok(url) => url.to_string(),
            Err(reason) => format!("error: {reason}"),
        }
    }

    #[test]
    fn urls_are_split_and_normalised() {
        let cases = [
            ("https://api.example.com", "https://api.example.com/"),
            (
                "HTTPS://API.Example.com/a/B?x=1#frag",
                "https://api.example.com/a/B?x=1",
            ),
            (
                "http://127.0.0.1:8080/v1/search?name=x",
                "http://127.0.0.1:8080/v1/search?name=x",
            ),
            ("http://example.com:80/", "http://example.com/"),
            ("https://example.com:443", "https://example.com/"),
            ("https://example.com:8443?q", "https://example.com:8443/?q"),
            ("http://[::1]:3000/x", "http://[::1]:3000/x"),
            ("http://[2001:DB8::1]/", "http://[2001:db8::1]/"),
            (
                "  https://example.com/a b?c=d e  ",
                "https://example.com/a%20b?c=d%20e",
            ),
            (
                "https://example.com/caf%C3%A9/é",
                "https://example.com/caf%C3%A9/%C3%A9",
            ),
            ("https://example.com:/x", "https://example.com/x"),
        ];
        for (input, expected) in cases {
            assert_eq!(url(input), expected, "{input}");
        }
    }

    #[test]
    fn bad_urls_are_refused_with_a_reason() {
        let cases = [
            ("ftp://example.com/", "not `ftp:`"),
            ("file:///etc/passwd", "not `file:`"),
            ("example.com/path", "not an absolute URL"),
            ("localhost:8080/x", "not an absolute URL"),
            ("/relative", "not an absolute URL"),
            ("https:example.com", "`//` and a host"),
            ("https://", "no host"),
            ("https://user:pw@example.com/", "passwords in URLs"),
            ("https://example.com:99999/", "`99999` is not a valid port"),
            ("https://example.com:0/", "`0` is not a valid port"),
            ("https://example.com:+80/", "`+80` is not a valid port"),
            ("https://exa mple.com/", "not a valid host name"),
            ("https://bücher.de/", "`xn--` form"),
            ("http://[::1/", "closing `]`"),
            ("http://[nope]/", "not an IPv6 address"),
            ("http://[::1]x/", "unexpected `x`"),
            ("http://a:1:2/", "not a valid port"),
        ];
        for (input, expected) in cases {
            let result = url(input);
            assert!(
                result.starts_with("error: ") && result.contains(expected),
                "{input}: {result}"
            );
        }
    }

    #[test]
    fn redirect_locations_resolve_against_the_current_url() {
        let base = Url::parse("https://example.com/a/b/c?q=1").expect("valid");
        let cases = [
            ("https://other.example/x", "https://other.example/x"),
            ("//cdn.example/y", "https://cdn.example/y"),
            ("/root", "https://example.com/root"),
            ("d", "https://example.com/a/b/d"),
            ("./d?z", "https://example.com/a/b/d?z"),
            ("../d", "https://example.com/a/d"),
            ("../../../../d", "https://example.com/d"),
            ("..", "https://example.com/a/"),
            ("?only=query", "https://example.com/a/b/c?only=query"),
            ("", "https://example.com/a/b/c?q=1"),
            ("#frag", "https://example.com/a/b/c?q=1"),
            ("/x/./y/../z", "https://example.com/x/z"),
            ("http://example.com:8080/p", "http://example.com:8080/p"),
        ];
        for (location, expected) in cases {
            let joined = base.join(location).map(|u| u.to_string());
            assert_eq!(joined.as_deref(), Ok(expected), "{location}");
        }
        assert!(base.join("ftp://x/").is_err());
    }

    #[test]
    fn query_parameters_are_encoded_and_appended() {
        let mut u = Url::parse("http://h/v1/search").expect("valid");
        u.append_query("name", "São Paulo");
        u.append_query("count", "1");
        assert_eq!(
            u.to_string(),
            "http://h/v1/search?name=S%C3%A3o%20Paulo&count=1"
        );
        let mut u = Url::parse("http://h/p?a=1").expect("valid");
        u.append_query("b", "x&y=z");
        assert_eq!(u.to_string(), "http://h/p?a=1&b=x%26y%3Dz");
    }

    #[test]
    fn origins_compare_scheme_host_and_effective_port() {
        let a = Url::parse("https://example.com/x").expect("valid");
        let b = Url::parse("https://EXAMPLE.com:443/y").expect("valid");
        let c = Url::parse("http://example.com/").expect("valid");
        assert_eq!(a.origin(), b.origin());
        assert_ne!(a.origin(), c.origin());
    }

    #[test]
    fn methods_parse() {
        assert_eq!("get".parse::<Method>(), Ok(Method::Get));
        assert_eq!(
            "PROPFIND".parse::<Method>(),
            Ok(Method::Other("PROPFIND".into()))
        );
        assert!("GE T".parse::<Method>().is_err());
        assert!("".parse::<Method>().is_err());
    }

    #[test]
    fn native_builds_say_there_is_no_host() {
        let error = get("https://example.com/").expect_err("no host natively");
        assert_eq!(error.kind(), &ErrorKind::Unsupported);
        assert!(
            error.to_string().contains("needs the toolcage host"),
            "{error}"
        );
    }

    #[test]
    fn errors_explain_themselves() {
        let refused = Error::new(
            "http://evil.example/",
            ErrorKind::Transport {
                code: "internal-error".into(),
                message: Some("tool `t` may not connect to `evil.example`".into()),
            },
        );
        assert_eq!(
            refused.to_string(),
            "request to http://evil.example/ failed: tool `t` may not connect to `evil.example` \
             (wasi:http error-code `internal-error`)"
        );
        assert_eq!(
            refused.host_message(),
            Some("tool `t` may not connect to `evil.example`")
        );

        let refused_connection = Error::new(
            "http://127.0.0.1:1/",
            transport::transport_kind(wasip2::http::types::ErrorCode::ConnectionRefused),
        );
        let text = refused_connection.to_string();
        assert!(
            text.contains("`connection-refused`") && text.contains("refused the connection"),
            "{text}"
        );

        let dns = transport::transport_kind(wasip2::http::types::ErrorCode::DnsError(
            wasip2::http::types::DnsErrorPayload {
                rcode: Some("NXDOMAIN".into()),
                info_code: None,
            },
        ));
        let text = Error::new("http://nope.invalid/", dns).to_string();
        assert!(
            text.contains("`dns-error(rcode: NXDOMAIN)`") && text.contains("check the URL"),
            "{text}"
        );

        let large = Error::new("http://h/", ErrorKind::BodyTooLarge { limit: 10 });
        assert!(
            large
                .to_string()
                .contains("limit of 10 bytes (max_body_bytes)")
        );

        assert!(
            Request::get("gopher://x/")
                .send()
                .expect_err("bad scheme")
                .to_string()
                .contains("not `gopher:`")
        );
    }

    #[test]
    fn status_errors_keep_the_start_of_the_body() {
        let response = Response {
            status: 400,
            headers: vec![("content-type".into(), "application/json".into())],
            body: br#"{"error":true,"reason":"bad"}"#.to_vec(),
            url: "http://h/".into(),
        };
        assert_eq!(response.header("Content-Type"), Some("application/json"));
        let error = response.clone().error_for_status().expect_err("400");
        assert_eq!(
            error.to_string(),
            r#"http://h/ answered HTTP 400: {"error":true,"reason":"bad"}"#
        );
        let long = Response {
            body: "x".repeat(2000).into_bytes(),
            ..response
        };
        let text = long.error_for_status().expect_err("400").to_string();
        assert!(text.ends_with("x…") && text.len() < 600, "{text}");
    }

    #[test]
    fn json_errors_name_the_url_and_status() {
        let response = Response {
            status: 200,
            headers: Vec::new(),
            body: b"<html>".to_vec(),
            url: "http://h/x".into(),
        };
        let error = response.json::<serde_json::Value>().expect_err("not json");
        assert!(
            error
                .to_string()
                .starts_with("the response from http://h/x (HTTP 200) is not the expected JSON"),
            "{error}"
        );
    }

    #[test]
    fn components_are_percent_encoded() {
        assert_eq!(encode_component("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(encode_component("a b/c?d"), "a%20b%2Fc%3Fd");
    }
}
