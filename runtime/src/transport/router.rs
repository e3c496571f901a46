//! The HTTP transport's router: exact paths, each with its own
//! authentication rule, in front of the endpoints that serve them.
//!
//! Today one endpoint is routed, MCP at [`super::http::ENDPOINT`]; another
//! (a health probe, metrics, a REST face) is one [`Endpoint`] and one
//! [`Router::route`] line, with its rule stated where it is routed.
//!
//! Invariants:
//! - A path nobody routed gets 404 before anything else is read.
//! - Authentication runs before the endpoint sees the request, and the
//!   token is compared in constant time.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

/// A response body.
pub type Body = BoxBody<Bytes, Infallible>;

/// What an endpoint's `handle` returns.
pub type Reply<'a> = Pin<Box<dyn Future<Output = Response<Body>> + Send + 'a>>;

/// Something that answers the requests routed to it.
pub trait Endpoint: Send + Sync {
    /// Answer `request` (already authenticated by its route's rule).
    fn handle(&self, request: Request<Incoming>) -> Reply<'_>;
}

/// Who may call an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// The bearer token, when the server has one (a loopback bind may run
    /// without; any other bind must have one).
    Token,
    /// Anyone who can connect: only for endpoints that reveal nothing and
    /// cost nothing (such as a liveness probe).
    Open,
}

struct Route {
    path: &'static str,
    auth: Auth,
    endpoint: Arc<dyn Endpoint>,
}

/// Paths to endpoints.
pub struct Router {
    token: Option<String>,
    routes: Vec<Route>,
}

impl Router {
    /// A router with no routes; `token` is what [`Auth::Token`] checks.
    pub fn new(token: Option<String>) -> Router {
        Router {
            token,
            routes: Vec::new(),
        }
    }

    /// Route `path` (exactly) to `endpoint`, under `auth`.
    #[must_use]
    pub fn route(mut self, path: &'static str, auth: Auth, endpoint: Arc<dyn Endpoint>) -> Router {
        self.routes.push(Route {
            path,
            auth,
            endpoint,
        });
        self
    }

    /// Answer `request`: 404 for an unknown path, 401 without the token
    /// its route needs, else what its endpoint answers.
    pub async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        let path = request.uri().path();
        let Some(route) = self.routes.iter().find(|route| route.path == path) else {
            return not_found(&self.routes);
        };
        if route.auth == Auth::Token
            && let Some(token) = &self.token
        {
            let presented = request
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "));
            if !presented.is_some_and(|p| token_matches(p.as_bytes(), token.as_bytes())) {
                let mut response = plain(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized: send `Authorization: Bearer <token>`",
                );
                response.headers_mut().insert(
                    hyper::header::WWW_AUTHENTICATE,
                    hyper::header::HeaderValue::from_static("Bearer"),
                );
                return response;
            }
        }
        route.endpoint.handle(request).await
    }
}

fn not_found(routes: &[Route]) -> Response<Body> {
    let paths: Vec<&str> = routes.iter().map(|route| route.path).collect();
    let message = match paths.as_slice() {
        [one] => format!("not found: the MCP endpoint is {one}"),
        many => format!("not found: the endpoints are {}", many.join(", ")),
    };
    text(StatusCode::NOT_FOUND, message)
}

/// A plain-text response.
pub fn plain(status: StatusCode, message: &'static str) -> Response<Body> {
    text(status, message.to_owned())
}

fn text(status: StatusCode, message: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(message)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A 503 with `Retry-After`.
pub fn busy(message: &'static str) -> Response<Body> {
    let mut response = plain(StatusCode::SERVICE_UNAVAILABLE, message);
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    response
}

/// Whether the presented token is the configured one, in time that
/// depends on neither where they differ nor (both being hashed to the same
/// length first) on the presented token's length.
fn token_matches(presented: &[u8], token: &[u8]) -> bool {
    use sha2::{Digest as _, Sha256};
    use subtle::ConstantTimeEq as _;
    Sha256::digest(presented)
        .ct_eq(&Sha256::digest(token))
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_matches(b"secret", b"secret"));
        assert!(!token_matches(b"secret", b"secreT"));
        assert!(!token_matches(b"secret", b"secret2"));
        assert!(!token_matches(b"", b"x"));
    }
}
