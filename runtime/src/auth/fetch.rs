//! The host's own HTTP requests to an authorization server (its metadata,
//! its keys): the connection rules of tools' requests (`grants::network`),
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
    match tokio::time::timeout(timeout, exchange(url, max_bytes, timeout)).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "`{url}` did not answer within {} ms",
            timeout.as_millis()
        )),
    }
}

async fn exchange(url: &str, max_bytes: usize, timeout: Duration) -> Result<Bytes, String> {
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
    let request = http::Request::get(path)
        .header(http::header::HOST, target.authority())
        .header(http::header::ACCEPT, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("toolcage/", env!("CARGO_PKG_VERSION")),
        )
        .body(Full::new(Bytes::new()))
        .map_err(|error| format!("cannot build the request to `{url}`: {error}"))?;
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
