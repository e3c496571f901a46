//! Access tokens, checked locally: a JWS (compact form, three parts)
//! signed by one of the issuer's keys with an accepted algorithm, issued by
//! the configured issuer for this server (`aud`), current (`exp`, `nbf`,
//! with the configured leeway), and carrying the required scopes.
//!
//! What is refused, and how (RFC 6750 §3.1):
//! - no token, or not a bearer token: `401`, a challenge naming the
//!   resource metadata and no error code (the client should go and get a
//!   token);
//! - a token that fails any check: `401` `invalid_token`, saying which
//!   check (expired, another audience, another issuer, a bad signature, an
//!   unknown key, an unsigned token, an algorithm not accepted, …);
//! - a valid token without a required scope: `403` `insufficient_scope`,
//!   naming the scopes to ask for;
//! - no key set could be fetched yet: `503` (the client may retry).

use std::sync::Arc;

use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use super::introspect::{Introspector, Verdict};
use super::jwks::{KeySet, Lookup};
use super::{Caller, Rejection};
use crate::config::OAuthConfig;

/// Largest token accepted, in bytes (real access tokens are 1 to 4 KiB).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The resource server: its settings, the issuer's keys, and the metadata
/// it publishes.
pub struct OAuth {
    config: OAuthConfig,
    keys: Arc<KeySet>,
    /// Token introspection, where configured (then keys are not used).
    introspector: Option<Introspector>,
    /// The absolute URL of the metadata, for challenges.
    metadata_url: String,
    /// The path the metadata is served at (RFC 9728: the resource's path
    /// after `/.well-known/oauth-protected-resource`).
    metadata_path: String,
}

/// The claims read from a token (the registered ones are checked by the
/// verifier).
#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: Option<String>,
    client_id: Option<String>,
    azp: Option<String>,
    scope: Option<String>,
    scp: Option<serde_json::Value>,
}

/// The well-known prefix of protected resource metadata (RFC 9728 §3).
pub const METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";

impl OAuth {
    /// The resource server `config` describes; its keys are fetched in the
    /// background once a runtime runs ([`OAuth::start`]).
    pub fn new(config: OAuthConfig) -> Arc<OAuth> {
        let (origin, path) = split_origin(&config.resource);
        let path = path.trim_end_matches('/');
        let metadata_path = format!("{METADATA_PREFIX}{path}");
        Arc::new(OAuth {
            keys: KeySet::new(&config),
            introspector: config
                .introspection
                .clone()
                .map(|settings| Introspector::new(&config, settings)),
            metadata_url: format!("{origin}{metadata_path}"),
            metadata_path,
            config,
        })
    }

    /// Start fetching the issuer's keys (call from inside the runtime);
    /// nothing to fetch when tokens are introspected.
    pub fn start(&self) {
        if self.introspector.is_none() {
            self.keys.prefetch();
        }
    }

    /// The settings.
    pub fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// The paths the metadata is served at: the one RFC 9728 derives from
    /// the resource URI, and the bare well-known path (clients that do not
    /// insert the resource's path look there).
    pub fn metadata_paths(&self) -> Vec<String> {
        let mut paths = vec![self.metadata_path.clone()];
        if self.metadata_path != METADATA_PREFIX {
            paths.push(METADATA_PREFIX.to_owned());
        }
        paths
    }

    /// The Protected Resource Metadata document (RFC 9728 §2).
    pub fn metadata(&self) -> serde_json::Value {
        let mut document = serde_json::json!({
            "resource": self.config.resource,
            "authorization_servers": self.config.authorization_servers,
            "bearer_methods_supported": ["header"],
            "resource_name": "toolcage",
        });
        if !self.config.scopes_supported.is_empty()
            && let Some(object) = document.as_object_mut()
        {
            object.insert(
                "scopes_supported".into(),
                serde_json::json!(self.config.scopes_supported),
            );
        }
        document
    }

    /// The caller a request's bearer token (if any) names, or why not.
    ///
    /// # Errors
    ///
    /// The rejection, with its challenge.
    pub async fn authenticate(&self, token: Option<&str>) -> Result<Caller, Rejection> {
        let Some(token) = token else {
            return Err(Rejection {
                status: http::StatusCode::UNAUTHORIZED,
                challenge: Some(self.challenge(None, None)),
                message: format!(
                    "unauthorized: this server needs an OAuth access token from {} for the \
                     resource {} (send `Authorization: Bearer <token>`; the metadata is at {})",
                    self.config.authorization_servers.join(", "),
                    self.config.resource,
                    self.metadata_url
                ),
            });
        };
        let caller = self
            .validate(token)
            .await
            .map_err(|refusal| match refusal {
                Refusal::Invalid(why) => Rejection {
                    status: http::StatusCode::UNAUTHORIZED,
                    challenge: Some(self.challenge(Some(("invalid_token", &why)), None)),
                    message: format!("invalid token: {why}"),
                },
                Refusal::Unavailable(why) => {
                    // Logged where it failed (the key fetch, the
                    // introspection), at most once per interval.
                    tracing::debug!(%why, "cannot check an access token right now");
                    Rejection {
                        status: http::StatusCode::SERVICE_UNAVAILABLE,
                        challenge: None,
                        message: "the access token cannot be checked right now (the \
                                  authorization server's keys or its introspection endpoint \
                                  are unavailable); retry shortly"
                            .into(),
                    }
                }
            })?;
        let missing: Vec<&str> = self
            .config
            .required_scopes
            .iter()
            .filter(|scope| !caller.scopes.contains(scope))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let why = format!("the token lacks the scope {}", missing.join(" "));
            return Err(Rejection {
                status: http::StatusCode::FORBIDDEN,
                challenge: Some(self.challenge(
                    Some(("insufficient_scope", &why)),
                    Some(&self.config.required_scopes.join(" ")),
                )),
                message: format!("forbidden: {why}"),
            });
        }
        Ok(caller)
    }

    /// `WWW-Authenticate: Bearer …` with the metadata URL, and an error
    /// and the scopes to ask for when there are.
    fn challenge(&self, error: Option<(&str, &str)>, scope: Option<&str>) -> String {
        let mut parts = Vec::new();
        if let Some((code, description)) = error {
            parts.push(format!("error=\"{code}\""));
            parts.push(format!("error_description=\"{}\"", quotable(description)));
        }
        // Clients ask for the scopes a challenge names, else for the
        // metadata's `scopes_supported` (the MCP spec's scope selection).
        // A caller's policy may depend on scopes beyond the required ones,
        // so a first challenge names the required scopes only when the
        // metadata advertises none.
        let scope = scope.map(str::to_owned).or_else(|| {
            (self.config.scopes_supported.is_empty() && !self.config.required_scopes.is_empty())
                .then(|| self.config.required_scopes.join(" "))
        });
        if let Some(scope) = scope {
            parts.push(format!("scope=\"{}\"", quotable(&scope)));
        }
        parts.push(format!(
            "resource_metadata=\"{}\"",
            quotable(&self.metadata_url)
        ));
        format!("Bearer {}", parts.join(", "))
    }

    async fn validate(&self, token: &str) -> Result<Caller, Refusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::Invalid(format!(
                "it is over {} KiB",
                MAX_TOKEN_BYTES / 1024
            )));
        }
        if let Some(introspector) = &self.introspector {
            return match introspector.check(token).await {
                Ok(Verdict::Active(caller)) => Ok(caller),
                Ok(Verdict::Refused(why)) => Err(Refusal::Invalid(why)),
                Err(why) => Err(Refusal::Unavailable(why)),
            };
        }
        let alg = self.algorithm(token)?;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Refusal::Invalid("its header is malformed".into()))?;
        let key = match self.keys.key_for(header.kid.as_deref(), alg).await {
            Lookup::Found(key) => key,
            Lookup::Unknown => {
                return Err(Refusal::Invalid(match &header.kid {
                    Some(kid) => format!(
                        "it is signed with a key the issuer does not publish (kid {:?})",
                        clip(kid)
                    ),
                    None => "it names no key (`kid`) and the issuer publishes no single key for \
                             its algorithm"
                        .into(),
                }));
            }
            Lookup::Unavailable(why) => return Err(Refusal::Unavailable(why)),
        };
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&self.config.audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = self.config.leeway_secs;
        validation.validate_nbf = true;
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|error| Refusal::Invalid(self.explain(error.kind())))?
            .claims;
        self.caller(claims)
    }

    /// The token's algorithm, if it is a compact JWS with an accepted one.
    fn algorithm(&self, token: &str) -> Result<Algorithm, Refusal> {
        let invalid = |why: &str| Refusal::Invalid(why.to_owned());
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() == 5 {
            return Err(invalid(
                "it is an encrypted token (JWE); only signed tokens (JWS) are accepted",
            ));
        }
        if parts.len() != 3 {
            return Err(invalid(
                "it is not a JWT (three base64url parts separated by dots)",
            ));
        }
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(parts[0])
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .ok_or_else(|| invalid("its header is not base64url JSON"))?;
        if header.get("crit").is_some() {
            return Err(invalid(
                "its header has critical extensions (`crit`), which are not understood",
            ));
        }
        let name = header.get("alg").and_then(|a| a.as_str()).unwrap_or("");
        if name.eq_ignore_ascii_case("none") || name.is_empty() {
            return Err(invalid(
                "it is unsigned (`alg: none`); only signed tokens are accepted",
            ));
        }
        match name.parse::<Algorithm>() {
            Ok(alg) if self.config.algorithms.contains(&alg) => Ok(alg),
            _ => Err(Refusal::Invalid(format!(
                "it is signed with {:?}, which is not accepted (accepted: {})",
                clip(name),
                self.config
                    .algorithms
                    .iter()
                    .map(|a| format!("{a:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    fn explain(&self, kind: &ErrorKind) -> String {
        match kind {
            ErrorKind::ExpiredSignature => "it has expired".into(),
            ErrorKind::ImmatureSignature => "it is not valid yet (`nbf`)".into(),
            ErrorKind::InvalidAudience => format!(
                "it was issued for another resource (its `aud` does not name {})",
                self.config.audiences.join(" or ")
            ),
            ErrorKind::InvalidIssuer => format!(
                "it was issued by another issuer (not {})",
                self.config.issuer
            ),
            ErrorKind::InvalidSignature | ErrorKind::Crypto(_) => {
                "its signature does not verify".into()
            }
            ErrorKind::InvalidAlgorithm => "its algorithm does not fit its key".into(),
            ErrorKind::MissingRequiredClaim(claim) => format!("it has no `{claim}` claim"),
            ErrorKind::InvalidEcdsaKey
            | ErrorKind::InvalidRsaKey(_)
            | ErrorKind::InvalidKeyFormat => "its key cannot verify it".into(),
            _ => "its claims are malformed".into(),
        }
    }

    fn caller(&self, claims: Claims) -> Result<Caller, Refusal> {
        let scopes: Vec<String> = match (&claims.scope, &claims.scp) {
            (Some(scope), _) => scope.split_ascii_whitespace().map(str::to_owned).collect(),
            (None, Some(serde_json::Value::String(scp))) => {
                scp.split_ascii_whitespace().map(str::to_owned).collect()
            }
            (None, Some(serde_json::Value::Array(list))) => list
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_owned).ok_or_else(|| {
                        Refusal::Invalid("its `scp` is not a list of strings".into())
                    })
                })
                .collect::<Result<_, _>>()?,
            (None, Some(_)) => {
                return Err(Refusal::Invalid(
                    "its `scp` is not a list of strings".into(),
                ));
            }
            (None, None) => Vec::new(),
        };
        Caller::checked(
            claims.iss,
            claims.sub,
            claims.client_id.or(claims.azp),
            scopes,
        )
        .map_err(Refusal::Invalid)
    }
}

/// Why a token was not accepted.
enum Refusal {
    /// It fails a check: why.
    Invalid(String),
    /// It cannot be checked now: why, for the log.
    Unavailable(String),
}

/// `https://host:port` and the path of an absolute URL.
fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

/// `text` as a quoted-string body: printable ASCII without `"` and `\`.
fn quotable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// At most 64 characters of untrusted `text`, for a message.
fn clip(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth(resource: &str) -> Arc<OAuth> {
        OAuth::new(OAuthConfig {
            resource: resource.into(),
            issuer: "https://as.example".into(),
            authorization_servers: vec!["https://as.example".into()],
            jwks_uri: Some("https://as.example/jwks".into()),
            audiences: vec![resource.into()],
            required_scopes: vec!["mcp".into()],
            scopes_supported: vec!["mcp".into()],
            algorithms: vec![Algorithm::RS256],
            leeway_secs: 0,
            jwks_max_age_secs: 300,
            jwks_min_refresh_secs: 10,
            fetch_timeout_ms: 1000,
            introspection: None,
        })
    }

    #[test]
    fn metadata_lives_under_the_resource_path() {
        let server = oauth("https://tools.example/mcp");
        assert_eq!(
            server.metadata_paths(),
            [
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            server.metadata_url,
            "https://tools.example/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(server.metadata()["resource"], "https://tools.example/mcp");
        let root = oauth("https://tools.example");
        assert_eq!(
            root.metadata_paths(),
            ["/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn unsigned_and_odd_tokens_are_refused_before_any_key_is_looked_up() {
        let server = oauth("https://tools.example/mcp");
        let b64 = |json: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
        let why = |token: String| match server.algorithm(&token) {
            Err(Refusal::Invalid(why)) => why,
            Err(Refusal::Unavailable(why)) => panic!("unavailable: {why}"),
            Ok(alg) => panic!("accepted {alg:?}"),
        };
        assert!(why(format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64("{}"))).contains("unsigned"));
        assert!(why(format!("{}.{}.", b64(r#"{"alg":"NONE"}"#), b64("{}"))).contains("unsigned"));
        assert!(
            why(format!("{}.{}.c2ln", b64(r#"{"alg":"HS256"}"#), b64("{}")))
                .contains("not accepted")
        );
        assert!(
            why(format!(
                "{}.{}.c2ln",
                b64(r#"{"alg":"RS256","crit":["x"]}"#),
                b64("{}")
            ))
            .contains("crit")
        );
        assert!(why("a.b.c.d.e".into()).contains("JWE"));
        assert!(why("abc".into()).contains("not a JWT"));
        assert!(why("!!.b.c".into()).contains("header"));
        assert!(
            server
                .algorithm(&format!("{}.{}.c2ln", b64(r#"{"alg":"RS256"}"#), b64("{}")))
                .is_ok()
        );
    }

    #[test]
    fn challenges_are_well_formed() {
        let server = oauth("https://tools.example/mcp");
        let challenge = server.challenge(Some(("invalid_token", "bad \"quote\" \\ \n")), None);
        assert_eq!(
            challenge,
            "Bearer error=\"invalid_token\", error_description=\"bad ?quote? ? ?\", \
             resource_metadata=\"https://tools.example/.well-known/oauth-protected-resource/mcp\""
        );
    }
}
