//! Opening a connection to a checked [`Target`]: its IP, or its name's
//! pinned or resolved addresses, each within the timeout; TLS for `https`,
//! verified against the target's host with the Mozilla roots.
//!
//! One place for every outbound connection toolcage makes: a tool's
//! `wasi:http` requests (`gate`) and the host's own (`auth::fetch`, for an
//! authorization server's keys), so both follow the same rules.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use wasmtime_wasi_http::Error as HttpError;

use super::{Target, TargetHost};

/// A TCP or TLS stream.
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Connect to exactly `target` (a name in `pinned` at its pinned
/// addresses, else as the system resolves it), with TLS for `https`; each
/// step within `timeout`.
///
/// # Errors
///
/// Resolving, connecting or the TLS handshake failed or timed out.
pub async fn open(
    target: &Target,
    pinned: &BTreeMap<String, Vec<IpAddr>>,
    timeout: Duration,
) -> Result<Box<dyn Stream>, HttpError> {
    let stream = connect(target, pinned, timeout).await?;
    if !target.https {
        return Ok(Box::new(stream));
    }
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
    let tls = tokio::time::timeout(timeout, connector.connect(name, stream))
        .await
        .map_err(|_| HttpError::ConnectionTimeout)?
        .map_err(HttpError::Tls)?;
    Ok(Box::new(tls))
}

/// Connect to `target`: its IP, or its name's pinned or resolved addresses
/// in turn, each within `timeout`.
async fn connect(
    target: &Target,
    pinned: &BTreeMap<String, Vec<IpAddr>>,
    timeout: Duration,
) -> Result<tokio::net::TcpStream, HttpError> {
    let addresses: Vec<SocketAddr> = match &target.host {
        TargetHost::Ip(ip) => vec![SocketAddr::new(*ip, target.port)],
        TargetHost::Name(name) => match pinned.get(name) {
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
