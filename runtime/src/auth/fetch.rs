//! The host's own HTTP requests to an authorization server (its metadata,
//! its keys, token introspection), over [`crate::outbound`], with caps of
//! their own.
//!
//! - `https`, or `http` to a loopback host only (checked at config load).
//! - One exchange within the timeout, connect to last byte; the body capped.
//! - Redirects are not followed (the operator configures the real URL).
//! - Anything but `200` is an error naming the status.

use std::time::Duration;

use bytes::Bytes;

use crate::outbound::{Request, send};

/// `GET url` (accepting JSON): the body, at most `max_bytes`.
///
/// # Errors
///
/// A message for the log: what failed (the URL, a status, a cap, a
/// timeout). Never contains anything but the URL and the failure.
pub async fn get_json(url: &str, max_bytes: usize, timeout: Duration) -> Result<Bytes, String> {
    exchange(
        Request::get(url, timeout).header(http::header::ACCEPT, "application/json"),
        max_bytes,
    )
    .await
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
    // RFC 6749 §2.3.1: the id and secret are form-encoded before Basic.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        form_encode(client.0),
        form_encode(client.1)
    ));
    let request = Request::new(http::Method::POST, url, timeout)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form_body(form));
    exchange(request, max_bytes).await
}

/// `key=value&…`, each part percent-encoded.
pub fn form_body(form: &[(&str, &str)]) -> String {
    form.iter()
        .map(|(key, value)| format!("{}={}", form_encode(key), form_encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

fn form_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

async fn exchange(request: Request<'_>, max_bytes: usize) -> Result<Bytes, String> {
    let url = request.url.to_owned();
    let timeout = request.timeout;
    let work = async {
        let response = send(request).await?;
        let status = response.status;
        if status.is_redirection() {
            return Err(format!(
                "`{url}` answered {status}, a redirect, which is not followed: configure the URL \
                 it points to"
            ));
        }
        if status != http::StatusCode::OK {
            return Err(format!("`{url}` answered {status}"));
        }
        response.bytes(max_bytes as u64).await
    };
    // The whole exchange, connect to last byte, within the one timeout.
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "`{url}` did not answer within {} ms",
                timeout.as_millis()
            ))
        })
}
