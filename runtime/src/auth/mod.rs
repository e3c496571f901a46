//! Who is calling over HTTP, and what they may use.
//!
//! Three modes, from the `[http]` config:
//! - **open**: no token (a loopback bind only); no caller identity.
//! - **token**: one shared bearer token (`http.token_file`/`token_env`),
//!   compared in constant time; anyone holding it is the same caller.
//! - **oauth** (`[http.oauth]`): the server is an OAuth 2.1 resource
//!   server as the MCP authorization spec defines it. It publishes
//!   Protected Resource Metadata (RFC 9728) naming its authorization
//!   server, answers `401` with a `WWW-Authenticate` challenge pointing at
//!   it, and checks every access token locally ([`token`]): a JWS signed
//!   by a key from the issuer's JWKS ([`jwks`]), `iss`, `aud` (this
//!   server's resource URI), `exp`/`nbf`, and the required scopes; or,
//!   where configured, asks the authorization server (introspection,
//!   [`introspect`]) and checks what it answers the same way. The
//!   authenticated [`Caller`] then meets the `[[callers]]` policy
//!   ([`policy`]): which tools it may list and call, and at most which
//!   roots and hosts those calls reach.
//!
//! Invariants:
//! - A token is never passed on: the `Authorization` header is removed
//!   from the request once checked, and no token is logged or journaled.
//! - A rejection says what was wrong with the token, never anything about
//!   the keys or the tools.
//! - Every byte and every fetch a client's token causes is bounded: the
//!   token's size, the claims' sizes, and key refetches (one at a time, at
//!   most one per `jwks_min_refresh_secs`).

pub mod fetch;
pub mod introspect;
pub mod jwks;
pub mod policy;
pub mod token;

use std::sync::Arc;

use http::HeaderMap;

use crate::config::HttpConfig;

pub use policy::{Access, access};
pub use token::OAuth;

/// Who made a request, as an access token says: what policy matches and
/// the journal records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's issuer (`iss`).
    pub issuer: String,
    /// Its subject (`sub`), if it names one.
    pub subject: Option<String>,
    /// The client it was issued to (`client_id`, else `azp`), if it says.
    pub client_id: Option<String>,
    /// Its scopes (`scope`, or `scp`).
    pub scopes: Vec<String>,
}

/// Longest `sub`, `client_id` or scope kept, in bytes.
pub const MAX_NAME_BYTES: usize = 512;

/// Most scopes one token may carry.
pub const MAX_SCOPES: usize = 256;

impl Caller {
    /// The caller a checked token (or introspection answer) names, if its
    /// names and scopes are within their bounds; scopes sorted, once each.
    ///
    /// # Errors
    ///
    /// What is over its bound, for the refusal.
    pub fn checked(
        issuer: String,
        subject: Option<String>,
        client_id: Option<String>,
        mut scopes: Vec<String>,
    ) -> Result<Caller, String> {
        for (what, value) in [("sub", &subject), ("client_id", &client_id)] {
            if value.as_ref().is_some_and(|v| v.len() > MAX_NAME_BYTES) {
                return Err(format!("its `{what}` is over {MAX_NAME_BYTES} bytes"));
            }
        }
        if scopes.len() > MAX_SCOPES || scopes.iter().any(|s| s.len() > MAX_NAME_BYTES) {
            return Err("it carries too many or too long scopes".into());
        }
        scopes.sort();
        scopes.dedup();
        Ok(Caller {
            issuer,
            subject,
            client_id,
            scopes,
        })
    }

    /// One string that identifies this caller (issuer, subject and client,
    /// unambiguously joined): what sessions and request state are bound to.
    pub fn key(&self) -> String {
        serde_json::json!([self.issuer, self.subject, self.client_id]).to_string()
    }
}

/// Why a request was refused before it reached an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// 401 (no usable token), 403 (a valid token without the scope), or
    /// 503 (tokens cannot be checked right now).
    pub status: http::StatusCode,
    /// The `WWW-Authenticate` challenge, if any.
    pub challenge: Option<String>,
    /// The body: what was wrong, for the person reading the client's log.
    pub message: String,
}

/// How requests are authenticated.
pub enum Authenticator {
    /// No token needed (a loopback bind without one).
    Open,
    /// The one static bearer token.
    Token(String),
    /// OAuth access tokens.
    OAuth(Arc<OAuth>),
}

impl Authenticator {
    /// The authenticator `http` configures.
    pub fn new(http: &HttpConfig) -> Authenticator {
        match (&http.oauth, &http.token) {
            (Some(oauth), _) => Authenticator::OAuth(OAuth::new(oauth.clone())),
            (None, Some(token)) => Authenticator::Token(token.clone()),
            (None, None) => Authenticator::Open,
        }
    }

    /// Check the request's credentials: the caller (`None` in the modes
    /// without identities), or why it is refused.
    ///
    /// # Errors
    ///
    /// The rejection to answer with.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Option<Caller>, Rejection> {
        match self {
            Authenticator::Open => Ok(None),
            Authenticator::Token(token) => match bearer(headers) {
                Some(presented) if token_matches(presented.as_bytes(), token.as_bytes()) => {
                    Ok(None)
                }
                _ => Err(Rejection {
                    status: http::StatusCode::UNAUTHORIZED,
                    challenge: Some("Bearer".into()),
                    message: "unauthorized: send `Authorization: Bearer <token>`".into(),
                }),
            },
            Authenticator::OAuth(oauth) => oauth.authenticate(bearer(headers)).await.map(Some),
        }
    }

    /// The OAuth validator, in that mode.
    pub fn oauth(&self) -> Option<&Arc<OAuth>> {
        match self {
            Authenticator::OAuth(oauth) => Some(oauth),
            _ => None,
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in
/// any case, as RFC 6750 allows); `None` for any other form.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
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

    #[test]
    fn only_bearer_headers_carry_a_token() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::AUTHORIZATION, value.parse().expect("header"));
            bearer(&headers).map(str::to_owned)
        };
        assert_eq!(with("Bearer abc").as_deref(), Some("abc"));
        assert_eq!(with("bearer abc").as_deref(), Some("abc"));
        assert_eq!(with("Basic abc"), None);
        assert_eq!(with("Bearer "), None);
        assert_eq!(with("Bearerabc"), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }

    #[test]
    fn caller_keys_are_unambiguous() {
        let caller = |sub: &str, client: &str| Caller {
            issuer: "https://as".into(),
            subject: Some(sub.into()),
            client_id: Some(client.into()),
            scopes: Vec::new(),
        };
        assert_ne!(caller("a\",\"b", "c").key(), caller("a", "b\",\"c").key());
        assert_eq!(caller("a", "b").key(), caller("a", "b").key());
    }
}
