//! The host's own HTTP requests to an authorization server (its metadata,
//! its keys, token introspection): the connection rules of tools' requests (`grants::network`),
//! with caps of their own.
//!
//! - `https`, or `http` to a loopback host only (checked at config load).
//! - One exchange within the timeout, connect to last byte; the body capped.
//! - Redirects are not followed (the operator configures the real URL).
//! - Anything but `200` is an error naming the status.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};

use crate::grants::network::{Target, open};

/// `GET url` (accepting JSON): the body, at most `max_bytes`.
///
/// # Errors
///
/// A message for the log: what failed (the URL, a status, a cap, a
/// timeout). Never contains anything but the URL and the failure.
pub async fn get_json(url: &str, max_bytes: usize, timeout: Duration) -> Result<Bytes, String> {
    within(url, timeout, exchange(url, None, max_bytes, timeout)).await
}

/// `POST url` with an `application/x-www-form-urlencoded` body and HTTP
/// Basic client authentication (RFC 6749 §2.3.1), accepting JSON: the
/// body, at most `max_bytes`.
///
/// # Errors
///
/// As for [`get_json`]; the form and the credentials never appear in a
/// message.
pub async fn post_form(
    url: &str,
    client: (&str, &str),
    form: &[(&str, &str)],
    max_bytes: usize,
    timeout: Duration,
) -> Result<Bytes, String> {
    use base64::Engine as _;
    let encode = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    let body: Vec<String> = form
        .iter()
        .map(|(key, value)| format!("{}={}", encode(key), encode(value)))
        .collect();
    // RFC 6749 §2.3.1: the id and secret are form-encoded before Basic.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        encode(client.0),
        encode(client.1)
    ));
    let post = Post {
        authorization: format!("Basic {basic}"),
        body: Bytes::from(body.join("&")),
    };
    within(url, timeout, exchange(url, Some(post), max_bytes, timeout)).await
}

/// A POST's credentials and body.
struct Post {
    authorization: String,
    body: Bytes,
}

async fn within(
    url: &str,
    timeout: Duration,
    exchange: impl Future<Output = Result<Bytes, String>>,
) -> Result<Bytes, String> {
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "`{url}` did not answer within {} ms",
            timeout.as_millis()
        )),
    }
}

async fn exchange(
    url: &str,
    post: Option<Post>,
    max_bytes: usize,
    timeout: Duration,
) -> Result<Bytes, String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
    let target = Target::parse(&uri).map_err(|why| format!("`{url}`: {why}"))?;
    let stream = open(&target, &BTreeMap::new(), timeout)
        .await
        .map_err(|error| format!("cannot connect to `{url}`: {error}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|error| format!("cannot talk HTTP to `{url}`: {error}"))?;
    let connection = tokio::spawn(connection);
    let path = uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), ToString::to_string);
    let builder = match &post {
        None => http::Request::get(path),
        Some(post) => http::Request::post(path)
            .header(http::header::AUTHORIZATION, &post.authorization)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            ),
    };
    let request = builder
        .header(http::header::HOST, target.authority())
        .header(http::header::ACCEPT, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("toolcage/", env!("CARGO_PKG_VERSION")),
        )
        .body(Full::new(post.map(|p| p.body).unwrap_or_default()))
        .map_err(|_| format!("cannot build the request to `{url}`"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|error| format!("`{url}` failed: {error}"))?;
    let status = response.status();
    if status.is_redirection() {
        connection.abort();
        return Err(format!(
            "`{url}` answered {status}, a redirect, which is not followed: configure the URL it \
             points to"
        ));
    }
    if status != http::StatusCode::OK {
        connection.abort();
        return Err(format!("`{url}` answered {status}"));
    }
    if let Some(length) = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        && length > max_bytes as u64
    {
        connection.abort();
        return Err(format!(
            "`{url}` sent {length} bytes, over the cap of {max_bytes}"
        ));
    }
    let body = http_body_util::Limited::new(response.into_body(), max_bytes)
        .collect()
        .await;
    connection.abort();
    match body {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(format!(
            "`{url}` sent more than the cap of {max_bytes} bytes"
        )),
        Err(error) => Err(format!("`{url}`: the body could not be read: {error}")),
    }
}
