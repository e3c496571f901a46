//! The HTTP transport's router: exact paths, each with its own
//! authentication rule, in front of the endpoints that serve them.
//!
//! Today one endpoint is routed, MCP at [`super::http::ENDPOINT`]; another
//! (a health probe, metrics, a REST face) is one [`Endpoint`] and one
//! [`Router::route`] line, with its rule stated where it is routed.
//!
//! Invariants:
//! - A path nobody routed gets 404 before anything else is read.
//! - Authentication (`auth`) runs before the endpoint sees the request;
//!   the endpoint gets the authenticated [`Caller`] in the request's
//!   extensions and never the `Authorization` header.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use crate::auth::{Authenticator, Rejection};

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
    /// Whoever the server's authenticator accepts (the static token, an
    /// OAuth access token, or anyone on an open loopback bind).
    Required,
    /// Anyone who can connect: only for endpoints that reveal nothing and
    /// cost nothing (such as a liveness probe).
    Open,
}

struct Route {
    path: String,
    auth: Auth,
    endpoint: Arc<dyn Endpoint>,
}

/// Paths to endpoints.
pub struct Router {
    auth: Arc<Authenticator>,
    routes: Vec<Route>,
    /// Rejections logged in the current minute (a flood of bad tokens is
    /// counted, not logged line by line).
    rejections: std::sync::Mutex<(std::time::Instant, u32)>,
}

/// Rejections logged per minute; the rest are counted in the next line.
const REJECTIONS_LOGGED_PER_MINUTE: u32 = 20;

impl Router {
    /// A router with no routes; `auth` is what [`Auth::Required`] checks.
    pub fn new(auth: Arc<Authenticator>) -> Router {
        Router {
            auth,
            routes: Vec::new(),
            rejections: std::sync::Mutex::new((std::time::Instant::now(), 0)),
        }
    }

    /// Route `path` (exactly) to `endpoint`, under `auth`.
    #[must_use]
    pub fn route(
        mut self,
        path: impl Into<String>,
        auth: Auth,
        endpoint: Arc<dyn Endpoint>,
    ) -> Router {
        self.routes.push(Route {
            path: path.into(),
            auth,
            endpoint,
        });
        self
    }

    /// Answer `request`: 404 for an unknown path, 401/403/503 when its
    /// route needs credentials it does not bring, else what its endpoint
    /// answers.
    pub async fn handle(&self, mut request: Request<Incoming>) -> Response<Body> {
        let path = request.uri().path();
        let Some(route) = self.routes.iter().find(|route| route.path == path) else {
            return not_found(&self.routes);
        };
        if route.auth == Auth::Required {
            match self.auth.authenticate(request.headers()).await {
                Ok(caller) => {
                    if let Some(caller) = caller {
                        request.extensions_mut().insert(caller);
                    }
                }
                Err(rejection) => {
                    self.log_rejection(&rejection);
                    return rejected(rejection);
                }
            }
            // Checked: nothing past this point sees the credential.
            request.headers_mut().remove(hyper::header::AUTHORIZATION);
        }
        route.endpoint.handle(request).await
    }

    fn log_rejection(&self, rejection: &Rejection) {
        let mut window = match self.rejections.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if window.0.elapsed() >= std::time::Duration::from_secs(60) {
            let suppressed = window.1.saturating_sub(REJECTIONS_LOGGED_PER_MINUTE);
            if suppressed > 0 {
                tracing::info!(suppressed, "more requests were refused in the last minute");
            }
            *window = (std::time::Instant::now(), 0);
        }
        window.1 = window.1.saturating_add(1);
        if window.1 <= REJECTIONS_LOGGED_PER_MINUTE {
            tracing::info!(status = rejection.status.as_u16(), reason = %rejection.message, "request refused");
        }
    }
}

/// The response for a refused request: its status, challenge and message.
fn rejected(rejection: Rejection) -> Response<Body> {
    let mut response = closing(text(rejection.status, rejection.message));
    if let Some(challenge) = rejection
        .challenge
        .and_then(|c| hyper::header::HeaderValue::try_from(c).ok())
    {
        response
            .headers_mut()
            .insert(hyper::header::WWW_AUTHENTICATE, challenge);
    }
    if rejection.status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from_static("5"),
        );
    }
    response
}

/// Serves a fixed JSON document (the protected resource metadata).
pub struct Document(pub Bytes);

impl Endpoint for Document {
    fn handle(&self, request: Request<Incoming>) -> Reply<'_> {
        let body = self.0.clone();
        Box::pin(async move {
            if request.method() != hyper::Method::GET && request.method() != hyper::Method::HEAD {
                let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "use GET");
                response.headers_mut().insert(
                    hyper::header::ALLOW,
                    hyper::header::HeaderValue::from_static("GET, HEAD"),
                );
                return response;
            }
            let mut response = Response::new(Full::new(body).boxed());
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            response
        })
    }
}

fn not_found(routes: &[Route]) -> Response<Body> {
    // The well-known documents are for clients that already know them.
    let paths: Vec<&str> = routes
        .iter()
        .map(|route| route.path.as_str())
        .filter(|path| !path.starts_with("/.well-known/"))
        .collect();
    let message = match paths.as_slice() {
        [one] => format!("not found: the MCP endpoint is {one}"),
        many => format!("not found: the endpoints are {}", many.join(", ")),
    };
    closing(text(StatusCode::NOT_FOUND, message))
}

/// `response`, telling the client the connection closes after it: sent
/// before the request's body was read, the connection cannot carry another
/// request, and a client that reused it (as one retrying with a fresh token
/// does) would see it drop.
fn closing(mut response: Response<Body>) -> Response<Body> {
    response.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    response
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
    // Mostly answered before the body is read (see `closing`).
    let mut response = closing(plain(StatusCode::SERVICE_UNAVAILABLE, message));
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    response
}
