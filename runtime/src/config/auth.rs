//! Who may call over HTTP, as written and validated: `[http.oauth]` (this
//! server as an OAuth 2.1 resource server) and `[[callers]]` (what each
//! authenticated caller may list, call and reach).
//!
//! What the settings mean at run time lives in `auth`; this file only
//! checks them, so a mistake is refused when the config loads, with the
//! dotted key that is wrong.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

use super::fields::{FieldError, RawRoot, parse_hosts, parse_roots, range};
use crate::grants::files::Root;
use crate::grants::network::HostPattern;
use crate::outbound::check_url;

/// The signature algorithms accepted when `algorithms` is not set: every
/// asymmetric one the verifier knows. Symmetric ones (`HS256`…) are never
/// accepted: a resource server that holds the issuer's secret could mint
/// tokens itself, and a JWKS key used as an HMAC secret is the classic
/// algorithm-confusion forgery.
pub const DEFAULT_ALGORITHMS: &[jsonwebtoken::Algorithm] = &[
    jsonwebtoken::Algorithm::RS256,
    jsonwebtoken::Algorithm::RS384,
    jsonwebtoken::Algorithm::RS512,
    jsonwebtoken::Algorithm::PS256,
    jsonwebtoken::Algorithm::PS384,
    jsonwebtoken::Algorithm::PS512,
    jsonwebtoken::Algorithm::ES256,
    jsonwebtoken::Algorithm::ES384,
    jsonwebtoken::Algorithm::EdDSA,
];

/// `[http.oauth]`: access tokens issued by the operator's authorization
/// server, checked here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// This server's resource URI, as clients reach it (the public URL of
    /// the MCP endpoint): what tokens must be issued for (`aud`), and what
    /// the protected resource metadata names.
    pub resource: String,
    /// The issuer whose tokens are accepted (`iss`, exactly).
    pub issuer: String,
    /// Authorization servers named in the metadata; the issuer unless set.
    pub authorization_servers: Vec<String>,
    /// Where the issuer's keys are; discovered from its metadata
    /// (RFC 8414, then OpenID discovery) unless set.
    pub jwks_uri: Option<String>,
    /// Accepted `aud` values; the resource URI unless set.
    pub audiences: Vec<String>,
    /// Scopes every token must carry.
    pub required_scopes: Vec<String>,
    /// Scopes advertised in the metadata (`scopes_supported`).
    pub scopes_supported: Vec<String>,
    /// Accepted signature algorithms.
    pub algorithms: Vec<jsonwebtoken::Algorithm>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
    /// Keys older than this are refetched in the background, in seconds.
    pub jwks_max_age_secs: u64,
    /// A token naming an unknown key refetches the keys at most this often,
    /// in seconds (so unknown `kid`s cannot make the server hammer the
    /// issuer).
    pub jwks_min_refresh_secs: u64,
    /// Each fetch from the authorization server (connect to last byte), in
    /// milliseconds.
    pub fetch_timeout_ms: u64,
    /// Token introspection (RFC 7662) instead of local checks, if set.
    pub introspection: Option<Introspection>,
}

/// `introspection_*` in `[http.oauth]`: every token is sent to the
/// authorization server, which says whether it is active (and so a revoked
/// token stops working within `cache_secs`).
#[derive(Clone, PartialEq, Eq)]
pub struct Introspection {
    /// The introspection endpoint.
    pub endpoint: String,
    /// This server's client id at the authorization server.
    pub client_id: String,
    /// Its client secret (read from `introspection_secret_file`).
    pub secret: String,
    /// How long an answer is reused, in seconds (never past the token's
    /// `exp`); 0: every request asks.
    pub cache_secs: u64,
}

impl std::fmt::Debug for Introspection {
    // Never the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspection")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("cache_secs", &self.cache_secs)
            .finish_non_exhaustive()
    }
}

/// One `[[callers]]` entry: who it matches and what they may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerRule {
    /// The entry's name, as the journal records it.
    pub name: String,
    /// Token subjects (`sub`) it matches; any, if empty.
    pub subjects: Vec<String>,
    /// Client ids (`client_id`, else `azp`) it matches; any, if empty.
    pub client_ids: Vec<String>,
    /// Scopes of which the token must carry at least one; any, if empty.
    pub scopes: Vec<String>,
    /// Tools it may list and call: names, `*` matching any run of
    /// characters.
    pub tools: Vec<String>,
    /// Directories its calls may reach at most (each tool's own roots,
    /// narrowed to these); the tools' roots as granted, if unset.
    pub roots: Option<Vec<Root>>,
    /// Hosts its calls may reach at most (a request must be in the tool's
    /// grant and here); the tools' grants as they are, if unset.
    pub network: Option<std::sync::Arc<[HostPattern]>>,
}

impl CallerRule {
    /// Whether this entry matches every caller (it names no subject, client
    /// or scope).
    pub fn matches_anyone(&self) -> bool {
        self.subjects.is_empty() && self.client_ids.is_empty() && self.scopes.is_empty()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuth {
    resource: Option<String>,
    issuer: Option<String>,
    authorization_servers: Option<Vec<String>>,
    jwks_uri: Option<String>,
    audiences: Option<Vec<String>>,
    #[serde(default)]
    required_scopes: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
    algorithms: Option<Vec<String>>,
    leeway_secs: Option<u64>,
    jwks_max_age_secs: Option<u64>,
    jwks_min_refresh_secs: Option<u64>,
    fetch_timeout_ms: Option<u64>,
    introspection_endpoint: Option<String>,
    introspection_client_id: Option<String>,
    introspection_secret_file: Option<std::path::PathBuf>,
    introspection_cache_secs: Option<u64>,
}

fn url_field(key: &str, text: &str) -> Result<http::Uri, FieldError> {
    check_url(text)
        .map_err(|reason| FieldError::new(key.to_owned(), format!("{text:?}"), reason.to_owned()))
}

impl RawOAuth {
    fn introspection(&self, dir: &Path) -> Result<Option<Introspection>, FieldError> {
        let Some(endpoint) = &self.introspection_endpoint else {
            for (key, set) in [
                (
                    "introspection_client_id",
                    self.introspection_client_id.is_some(),
                ),
                (
                    "introspection_secret_file",
                    self.introspection_secret_file.is_some(),
                ),
                (
                    "introspection_cache_secs",
                    self.introspection_cache_secs.is_some(),
                ),
            ] {
                if set {
                    return Err(FieldError::new(
                        key.into(),
                        "(set)".into(),
                        "needs `introspection_endpoint`".into(),
                    ));
                }
            }
            return Ok(None);
        };
        url_field("introspection_endpoint", endpoint)?;
        let client_id = self.introspection_client_id.clone().ok_or_else(|| {
            FieldError::new(
                "introspection_client_id".into(),
                "(not set)".into(),
                "is required with `introspection_endpoint`: this server's client id there".into(),
            )
        })?;
        let file = self.introspection_secret_file.as_ref().ok_or_else(|| {
            FieldError::new(
                "introspection_secret_file".into(),
                "(not set)".into(),
                "is required with `introspection_endpoint`: a file holding this server's client \
                 secret (never in the config itself)"
                    .into(),
            )
        })?;
        let path = {
            let p = crate::grants::files::expand_tilde(file);
            if p.is_absolute() { p } else { dir.join(p) }
        };
        let secret = std::fs::read_to_string(&path)
            .map_err(|e| {
                FieldError::new(
                    "introspection_secret_file".into(),
                    format!("{:?}", path.display().to_string()),
                    format!("cannot be read: {e}"),
                )
            })?
            .trim()
            .to_owned();
        if secret.is_empty() {
            return Err(FieldError::new(
                "introspection_secret_file".into(),
                format!("{:?}", path.display().to_string()),
                "is empty".into(),
            ));
        }
        Ok(Some(Introspection {
            endpoint: endpoint.clone(),
            client_id,
            secret,
            cache_secs: range(
                "introspection_cache_secs",
                self.introspection_cache_secs,
                0,
                300,
            )?
            .unwrap_or(30),
        }))
    }

    pub(super) fn resolve(&self, dir: &Path) -> Result<OAuthConfig, FieldError> {
        let missing = |key: &str, what: &str| {
            FieldError::new(
                key.to_owned(),
                "(not set)".into(),
                format!("is required: {what}"),
            )
        };
        let resource = self.resource.clone().ok_or_else(|| {
            missing(
                "resource",
                "this server's public MCP URL, which tokens must be issued for",
            )
        })?;
        url_field("resource", &resource)?;
        let issuer = self.issuer.clone().ok_or_else(|| {
            missing(
                "issuer",
                "the authorization server whose tokens are accepted",
            )
        })?;
        url_field("issuer", &issuer)?;
        let authorization_servers = match &self.authorization_servers {
            None => vec![issuer.clone()],
            Some(list) if list.is_empty() => {
                return Err(FieldError::new(
                    "authorization_servers".into(),
                    "[]".into(),
                    "is empty; leave it out to advertise the issuer".into(),
                ));
            }
            Some(list) => {
                for (i, url) in list.iter().enumerate() {
                    url_field(&format!("authorization_servers[{i}]"), url)?;
                }
                list.clone()
            }
        };
        if let Some(uri) = &self.jwks_uri {
            url_field("jwks_uri", uri)?;
        }
        let audiences = match &self.audiences {
            None => vec![resource.clone()],
            Some(list) if list.is_empty() || list.iter().any(String::is_empty) => {
                return Err(FieldError::new(
                    "audiences".into(),
                    format!("{list:?}"),
                    "must list non-empty values; leave it out to accept the resource URI".into(),
                ));
            }
            Some(list) => list.clone(),
        };
        for (key, scopes) in [
            ("required_scopes", &self.required_scopes),
            ("scopes_supported", &self.scopes_supported),
        ] {
            if let Some(bad) = scopes.iter().find(|s| !is_scope_token(s)) {
                return Err(FieldError::new(
                    key.into(),
                    format!("{bad:?}"),
                    "is not a scope (printable ASCII, no spaces, quotes or backslashes)".into(),
                ));
            }
        }
        let algorithms = match &self.algorithms {
            None => DEFAULT_ALGORITHMS.to_vec(),
            Some(names) => {
                let mut algorithms = Vec::with_capacity(names.len());
                for (i, name) in names.iter().enumerate() {
                    let algorithm = name
                        .parse::<jsonwebtoken::Algorithm>()
                        .ok()
                        .filter(|a| DEFAULT_ALGORITHMS.contains(a))
                        .ok_or_else(|| {
                            FieldError::new(
                                format!("algorithms[{i}]"),
                                format!("{name:?}"),
                                "must be one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, \
                                 ES384, EdDSA (symmetric algorithms and `none` are never accepted)"
                                    .into(),
                            )
                        })?;
                    algorithms.push(algorithm);
                }
                if algorithms.is_empty() {
                    return Err(FieldError::new(
                        "algorithms".into(),
                        "[]".into(),
                        "is empty: no token could ever be accepted".into(),
                    ));
                }
                algorithms
            }
        };
        Ok(OAuthConfig {
            resource,
            issuer,
            authorization_servers,
            jwks_uri: self.jwks_uri.clone(),
            audiences,
            required_scopes: self.required_scopes.clone(),
            scopes_supported: self.scopes_supported.clone(),
            algorithms,
            leeway_secs: range("leeway_secs", self.leeway_secs, 0, 600)?.unwrap_or(60),
            jwks_max_age_secs: range("jwks_max_age_secs", self.jwks_max_age_secs, 10, 86_400)?
                .unwrap_or(300),
            jwks_min_refresh_secs: range(
                "jwks_min_refresh_secs",
                self.jwks_min_refresh_secs,
                1,
                3_600,
            )?
            .unwrap_or(10),
            fetch_timeout_ms: range("fetch_timeout_ms", self.fetch_timeout_ms, 100, 60_000)?
                .unwrap_or(5_000),
            introspection: self.introspection(dir)?,
        })
    }
}

/// A scope as RFC 6749 writes it (`%x21 / %x23-5B / %x5D-7E`), not empty.
pub fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCaller {
    name: String,
    #[serde(default)]
    subjects: Vec<String>,
    #[serde(default)]
    client_ids: Vec<String>,
    #[serde(default)]
    scopes: Vec<String>,
    tools: Option<Vec<String>>,
    roots: Option<Vec<RawRoot>>,
    network: Option<Vec<String>>,
}

/// The `[[callers]]` entries, checked as a list: names unique, and no
/// entry after one that matches anyone (it could never apply).
pub(super) fn resolve_callers(
    raw: &[RawCaller],
    dir: &Path,
) -> Result<Vec<CallerRule>, (usize, FieldError)> {
    let mut names = BTreeSet::new();
    let mut rules: Vec<CallerRule> = Vec::with_capacity(raw.len());
    for (i, entry) in raw.iter().enumerate() {
        let rule = entry.resolve(dir).map_err(|e| (i, e))?;
        if !names.insert(rule.name.clone()) {
            return Err((
                i,
                FieldError::new(
                    "name".into(),
                    format!("{:?}", rule.name),
                    "is used twice".into(),
                ),
            ));
        }
        if let Some(anyone) = rules.iter().find(|r| r.matches_anyone()) {
            return Err((
                i,
                FieldError::new(
                    "name".into(),
                    format!("{:?}", rule.name),
                    format!(
                        "can never apply: the entry `{}` before it names no subject, client or \
                         scope, so it matches every caller (entries apply in order, first match \
                         wins)",
                        anyone.name
                    ),
                ),
            ));
        }
        rules.push(rule);
    }
    Ok(rules)
}

impl RawCaller {
    fn resolve(&self, dir: &Path) -> Result<CallerRule, FieldError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !name_ok {
            return Err(FieldError::new(
                "name".into(),
                format!("{:?}", self.name),
                "must be 1 to 64 letters, digits, `-`, `_` or `.`".into(),
            ));
        }
        for (key, values) in [
            ("subjects", &self.subjects),
            ("client_ids", &self.client_ids),
        ] {
            if let Some(bad) = values.iter().find(|v| v.is_empty()) {
                return Err(FieldError::new(
                    key.into(),
                    format!("{bad:?}"),
                    "is empty".into(),
                ));
            }
        }
        if let Some(bad) = self.scopes.iter().find(|s| !is_scope_token(s)) {
            return Err(FieldError::new(
                "scopes".into(),
                format!("{bad:?}"),
                "is not a scope (printable ASCII, no spaces, quotes or backslashes)".into(),
            ));
        }
        let tools = self.tools.clone().ok_or_else(|| {
            FieldError::new(
                "tools".into(),
                "(not set)".into(),
                "is required: the tools this caller may list and call (`[\"*\"]` for all, `[]` \
                 for none)"
                    .into(),
            )
        })?;
        if let Some(bad) = tools.iter().find(|t| t.is_empty() || t.len() > 256) {
            return Err(FieldError::new(
                "tools".into(),
                format!("{bad:?}"),
                "is not a tool name or pattern".into(),
            ));
        }
        let roots = match &self.roots {
            None => None,
            Some(raw) => Some(parse_roots(raw, dir)?),
        };
        let network = match &self.network {
            None => None,
            Some(entries) => Some(parse_hosts(entries)?.into()),
        };
        Ok(CallerRule {
            name: self.name.clone(),
            subjects: self.subjects.clone(),
            client_ids: self.client_ids.clone(),
            scopes: self.scopes.clone(),
            tools,
            roots,
            network,
        })
    }
}
