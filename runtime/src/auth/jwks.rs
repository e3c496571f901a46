//! The issuer's signing keys (its JWKS), fetched, cached and refreshed so
//! that neither a slow authorization server nor a flood of tokens naming
//! unknown keys can stall or amplify anything.
//!
//! Rules:
//! - A token whose key is cached is checked at once, whatever the
//!   authorization server is doing. Keys older than `jwks_max_age_secs`
//!   are refetched in the background; until that succeeds the old ones
//!   serve (a failed fetch never throws keys away).
//! - A token naming a key that is not cached makes one refetch, shared by
//!   every request waiting for it, and at most one per
//!   `jwks_min_refresh_secs`: a thousand tokens with made-up `kid`s cost
//!   the issuer one request.
//! - Only signature keys of the asymmetric kinds are kept (RSA, EC P-256
//!   and P-384, Ed25519); a symmetric (`oct`) key, an encryption key, or
//!   a key whose declared `alg` is not a signature algorithm is skipped.
//! - The key set is capped in bytes and in keys.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};

use super::fetch;
use crate::config::OAuthConfig;

/// Largest key set or metadata document read, in bytes.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// Keys kept from one key set; past it the rest are ignored.
const MAX_KEYS: usize = 64;

/// One usable key.
struct Key {
    kid: Option<String>,
    /// The algorithm the set pins it to, if it does.
    alg: Option<Algorithm>,
    /// The algorithms its kind can verify.
    kind: KeyKind,
    key: DecodingKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Rsa,
    P256,
    P384,
    Ed25519,
}

impl KeyKind {
    fn verifies(self, alg: Algorithm) -> bool {
        use Algorithm::*;
        match self {
            KeyKind::Rsa => matches!(alg, RS256 | RS384 | RS512 | PS256 | PS384 | PS512),
            KeyKind::P256 => alg == ES256,
            KeyKind::P384 => alg == ES384,
            KeyKind::Ed25519 => alg == EdDSA,
        }
    }
}

/// What [`KeySet::key_for`] found.
pub enum Lookup {
    /// The key to check the signature with.
    Found(DecodingKey),
    /// The issuer's key set (fresh or not) has no such key.
    Unknown,
    /// No key set could be fetched yet: why, for the log.
    Unavailable(String),
}

#[derive(Default)]
struct State {
    keys: Arc<[Key]>,
    /// When the keys were last fetched successfully.
    fetched: Option<Instant>,
    /// When a fetch was last started (successful or not).
    attempted: Option<Instant>,
    /// Why the last fetch failed, if it did.
    error: Option<String>,
    /// The key set's URL, configured or discovered.
    jwks_uri: Option<String>,
}

/// The issuer's keys.
pub struct KeySet {
    issuer: String,
    max_age: Duration,
    min_refresh: Duration,
    timeout: Duration,
    state: RwLock<State>,
    /// Held while fetching: one fetch at a time.
    fetching: tokio::sync::Mutex<()>,
    /// A background refresh is spawned and not finished.
    background: AtomicBool,
}

impl KeySet {
    /// The key set of `config`'s issuer; nothing is fetched yet.
    pub fn new(config: &OAuthConfig) -> Arc<KeySet> {
        Arc::new(KeySet {
            issuer: config.issuer.clone(),
            max_age: Duration::from_secs(config.jwks_max_age_secs),
            min_refresh: Duration::from_secs(config.jwks_min_refresh_secs),
            timeout: Duration::from_millis(config.fetch_timeout_ms),
            state: RwLock::new(State {
                jwks_uri: config.jwks_uri.clone(),
                ..State::default()
            }),
            fetching: tokio::sync::Mutex::new(()),
            background: AtomicBool::new(false),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fetch the keys in the background (at start-up, so the first request
    /// does not wait for them).
    pub fn prefetch(self: &Arc<Self>) {
        self.refresh_in_background();
    }

    /// The key to check a token signed with `alg`, naming `kid`.
    pub async fn key_for(self: &Arc<Self>, kid: Option<&str>, alg: Algorithm) -> Lookup {
        let attempted = {
            let state = self.read();
            if let Some(key) = find(&state.keys, kid, alg) {
                if state.fetched.is_some_and(|at| at.elapsed() > self.max_age) {
                    drop(state);
                    self.refresh_in_background();
                }
                return Lookup::Found(key);
            }
            state.attempted
        };
        // Not cached: refetch, unless a fetch started too recently.
        if attempted.is_none_or(|at| at.elapsed() >= self.min_refresh) {
            self.refresh(attempted).await;
        } else if self.fetching.try_lock().is_err() {
            // A fetch is under way: wait for it rather than answer from the
            // old set.
            drop(self.fetching.lock().await);
        }
        let state = self.read();
        match find(&state.keys, kid, alg) {
            Some(key) => Lookup::Found(key),
            None if state.fetched.is_none() => Lookup::Unavailable(
                state
                    .error
                    .clone()
                    .unwrap_or_else(|| "the keys have not been fetched yet".into()),
            ),
            None => Lookup::Unknown,
        }
    }

    fn refresh_in_background(self: &Arc<Self>) {
        let recent = self
            .read()
            .attempted
            .is_some_and(|at| at.elapsed() < self.min_refresh);
        if recent || self.background.swap(true, Ordering::SeqCst) {
            return;
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let attempted = this.read().attempted;
            this.refresh(attempted).await;
            this.background.store(false, Ordering::SeqCst);
        });
    }

    /// Fetch the keys, unless another fetch started since `seen` (then its
    /// result is what the caller wanted).
    async fn refresh(&self, seen: Option<Instant>) {
        let _fetching = self.fetching.lock().await;
        if self.read().attempted != seen {
            return;
        }
        let known_uri = {
            let mut state = self.write();
            state.attempted = Some(Instant::now());
            state.jwks_uri.clone()
        };
        let fetched = async {
            let uri = match known_uri {
                Some(uri) => uri,
                None => {
                    let uri = self.discover().await?;
                    self.write().jwks_uri = Some(uri.clone());
                    uri
                }
            };
            let body = fetch::get_json(&uri, MAX_DOCUMENT_BYTES, self.timeout).await?;
            parse_key_set(&body).map_err(|why| format!("the key set at `{uri}` {why}"))
        }
        .await;
        let mut state = self.write();
        match fetched {
            Ok(keys) => {
                tracing::info!(issuer = %self.issuer, keys = keys.len(), "fetched the issuer's signing keys");
                state.keys = keys.into();
                state.fetched = Some(Instant::now());
                state.error = None;
            }
            Err(error) => {
                tracing::warn!(
                    issuer = %self.issuer,
                    %error,
                    cached = state.keys.len(),
                    "cannot fetch the issuer's signing keys; cached keys (if any) stay in use"
                );
                state.error = Some(error);
            }
        }
    }

    /// The issuer's `jwks_uri`, from its authorization server metadata
    /// (RFC 8414) or, failing that, its OpenID configuration; the document
    /// must name this issuer.
    async fn discover(&self) -> Result<String, String> {
        let issuer = self.issuer.trim_end_matches('/');
        let (origin, path) = match issuer
            .find("://")
            .and_then(|i| issuer[i + 3..].find('/').map(|j| i + 3 + j))
        {
            Some(split) => (&issuer[..split], &issuer[split..]),
            None => (issuer, ""),
        };
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        let mut failures = Vec::new();
        for url in candidates {
            match fetch::get_json(&url, MAX_DOCUMENT_BYTES, self.timeout).await {
                Ok(body) => match metadata_jwks_uri(&body, &self.issuer) {
                    Ok(uri) => return Ok(uri),
                    Err(why) => failures.push(format!("`{url}` {why}")),
                },
                Err(error) => failures.push(error),
            }
        }
        Err(format!(
            "cannot discover the issuer's keys (set `http.oauth.jwks_uri`): {}",
            failures.join("; ")
        ))
    }
}

/// The `jwks_uri` of a metadata document, if it is for `issuer`.
fn metadata_jwks_uri(body: &[u8], issuer: &str) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Metadata {
        issuer: Option<String>,
        jwks_uri: Option<String>,
    }
    let metadata: Metadata =
        serde_json::from_slice(body).map_err(|_| "is not a metadata document (JSON)".to_owned())?;
    if metadata.issuer.as_deref() != Some(issuer) {
        return Err(format!(
            "names issuer {:?}, not the configured `{issuer}`",
            metadata.issuer.unwrap_or_default()
        ));
    }
    let uri = metadata.jwks_uri.ok_or("has no `jwks_uri`")?;
    crate::outbound::check_url(&uri).map_err(|_| {
        format!("names `jwks_uri` {uri:?}, which is not https (or http to loopback)")
    })?;
    Ok(uri)
}

/// The usable keys of a JWKS document.
fn parse_key_set(body: &[u8]) -> Result<Vec<Key>, String> {
    #[derive(serde::Deserialize)]
    struct Set {
        keys: Vec<serde_json::Value>,
    }
    let set: Set = serde_json::from_slice(body)
        .map_err(|_| "is not a JWKS document (a JSON object with `keys`)".to_owned())?;
    let keys: Vec<Key> = set
        .keys
        .into_iter()
        .filter_map(|value| serde_json::from_value::<Jwk>(value).ok())
        .filter_map(|jwk| usable(&jwk))
        .take(MAX_KEYS)
        .collect();
    if keys.is_empty() {
        return Err("has no usable signature key (RSA, EC P-256/P-384 or Ed25519)".into());
    }
    Ok(keys)
}

/// `jwk` as a signature key, if it is one of the kinds kept.
fn usable(jwk: &Jwk) -> Option<Key> {
    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        return None;
    }
    let kind = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => KeyKind::Rsa,
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => KeyKind::P256,
            EllipticCurve::P384 => KeyKind::P384,
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            KeyKind::Ed25519
        }
        // Symmetric keys never verify an access token here.
        AlgorithmParameters::OctetKey(_) | AlgorithmParameters::OctetKeyPair(_) => return None,
    };
    let alg = match jwk.common.key_algorithm {
        None => None,
        Some(declared) => Some(signature_algorithm(declared).filter(|a| kind.verifies(*a))?),
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        kind,
        key,
    })
}

/// A JWK `alg` as a signature algorithm, if it is an asymmetric one.
fn signature_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    Some(match alg {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

/// The key for `kid` and `alg`: the one with that `kid` (if its kind and
/// pinned algorithm fit `alg`); with no `kid`, the only key that fits.
fn find(keys: &[Key], kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
    let fits = |key: &&Key| key.kind.verifies(alg) && key.alg.is_none_or(|a| a == alg);
    match kid {
        Some(kid) => keys
            .iter()
            .filter(fits)
            .find(|key| key.kid.as_deref() == Some(kid))
            .map(|key| key.key.clone()),
        None => {
            let mut fitting = keys.iter().filter(fits);
            let only = fitting.next()?;
            fitting.next().is_none().then(|| only.key.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JWKS with one key of each kind kept and one of each kind skipped.
    const SET: &str = r#"{"keys":[
        {"kty":"RSA","kid":"r1","use":"sig","alg":"RS256","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"},
        {"kty":"EC","kid":"e1","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
        {"kty":"oct","kid":"s1","k":"c2VjcmV0"},
        {"kty":"RSA","kid":"enc","use":"enc","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"},
        {"kty":"RSA","kid":"hs","alg":"HS256","n":"sXch","e":"AQAB"},
        {"kty":"weird","kid":"w"}
    ]}"#;

    #[test]
    fn only_asymmetric_signature_keys_are_kept() {
        let keys = parse_key_set(SET.as_bytes()).expect("a key set");
        let kids: Vec<_> = keys
            .iter()
            .map(|k| k.kid.as_deref().unwrap_or(""))
            .collect();
        assert_eq!(kids, ["r1", "e1"]);
    }

    #[test]
    fn a_key_fits_only_its_algorithms() {
        let keys = parse_key_set(SET.as_bytes()).expect("a key set");
        assert!(find(&keys, Some("r1"), Algorithm::RS256).is_some());
        // Pinned to RS256 by its `alg`.
        assert!(find(&keys, Some("r1"), Algorithm::PS256).is_none());
        assert!(find(&keys, Some("e1"), Algorithm::ES256).is_some());
        assert!(find(&keys, Some("e1"), Algorithm::ES384).is_none());
        assert!(find(&keys, Some("s1"), Algorithm::HS256).is_none());
        assert!(find(&keys, Some("nope"), Algorithm::RS256).is_none());
        // No kid: the only key that fits, else none.
        assert!(find(&keys, None, Algorithm::ES256).is_some());
        let set: serde_json::Value = serde_json::from_str(SET).expect("json");
        let rsa = set["keys"][0].clone();
        let mut second = rsa.clone();
        second["kid"] = "r2".into();
        let two = parse_key_set(
            serde_json::json!({"keys": [rsa, second]})
                .to_string()
                .as_bytes(),
        )
        .expect("a key set");
        assert!(
            find(&two, None, Algorithm::RS256).is_none(),
            "two RSA keys and no kid"
        );
    }

    #[test]
    fn bad_documents_are_refused() {
        assert!(parse_key_set(b"not json").is_err());
        assert!(parse_key_set(br#"{"keys":[]}"#).is_err());
        assert!(parse_key_set(br#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).is_err());
        assert!(
            metadata_jwks_uri(
                br#"{"issuer":"https://a","jwks_uri":"https://a/k"}"#,
                "https://a"
            )
            .is_ok()
        );
        assert!(
            metadata_jwks_uri(
                br#"{"issuer":"https://b","jwks_uri":"https://a/k"}"#,
                "https://a"
            )
            .is_err()
        );
        assert!(
            metadata_jwks_uri(
                br#"{"issuer":"https://a","jwks_uri":"http://evil/k"}"#,
                "https://a"
            )
            .is_err()
        );
    }
}
