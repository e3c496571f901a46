//! Token introspection (RFC 7662), where configured: the authorization
//! server says whether a token is active and what it carries; this server
//! still checks the audience, the issuer, the times and the scopes itself.
//!
//! Bounds: one introspection request per request at most, and at most
//! [`MAX_CONCURRENT`] at once; answers are cached by the token's SHA-256
//! (never the token itself) for `introspection_cache_secs`, never past the
//! token's `exp`, in a table of at most [`MAX_CACHED`] entries.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use tokio::sync::Semaphore;

use super::Caller;
use super::fetch;
use crate::config::{Introspection, OAuthConfig};

/// Introspection requests in flight at once.
pub const MAX_CONCURRENT: usize = 16;

/// Answers kept.
pub const MAX_CACHED: usize = 4096;

/// Largest introspection answer read, in bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// What introspection concluded about one token.
#[derive(Clone)]
pub enum Verdict {
    /// Active, for this resource: the caller.
    Active(Caller),
    /// Not acceptable: why.
    Refused(String),
}

/// The introspection client.
pub struct Introspector {
    settings: Introspection,
    issuer: String,
    audiences: Vec<String>,
    leeway: u64,
    timeout: Duration,
    permits: Semaphore,
    cache: Mutex<HashMap<[u8; 32], (Instant, Verdict)>>,
    /// When a failure was last logged (one line per [`FAILURE_LOG_EVERY`]).
    logged: Mutex<Option<Instant>>,
}

/// How often a failing introspection endpoint is logged.
const FAILURE_LOG_EVERY: Duration = Duration::from_secs(10);

/// An RFC 7662 answer (the members this server reads).
#[derive(Deserialize)]
struct Answer {
    active: bool,
    scope: Option<String>,
    client_id: Option<String>,
    sub: Option<String>,
    aud: Option<Audience>,
    iss: Option<String>,
    exp: Option<u64>,
    nbf: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Introspector {
    /// The introspector of `config` (which has `introspection` set).
    pub fn new(config: &OAuthConfig, settings: Introspection) -> Introspector {
        Introspector {
            settings,
            issuer: config.issuer.clone(),
            audiences: config.audiences.clone(),
            leeway: config.leeway_secs,
            timeout: Duration::from_millis(config.fetch_timeout_ms),
            permits: Semaphore::new(MAX_CONCURRENT),
            cache: Mutex::new(HashMap::new()),
            logged: Mutex::new(None),
        }
    }

    /// What the authorization server says about `token`, checked; `Err`
    /// when it could not be asked (why, for the log).
    ///
    /// # Errors
    ///
    /// The endpoint failed, timed out or answered something that is not an
    /// introspection answer.
    pub async fn check(&self, token: &str) -> Result<Verdict, String> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(verdict) = self.cached(&key) {
            return Ok(verdict);
        }
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| "introspection is shutting down".to_owned())?;
        let answered = fetch::post_form(
            &self.settings.endpoint,
            (&self.settings.client_id, &self.settings.secret),
            &[("token", token), ("token_type_hint", "access_token")],
            MAX_ANSWER_BYTES,
            self.timeout,
        )
        .await
        .and_then(|body| {
            serde_json::from_slice::<Answer>(&body).map_err(|_| {
                format!(
                    "`{}` did not answer with an introspection response (JSON with `active`)",
                    self.settings.endpoint
                )
            })
        });
        let answer = match answered {
            Ok(answer) => answer,
            Err(error) => {
                self.log_failure(&error);
                return Err(error);
            }
        };
        let exp = answer.exp;
        let verdict = self.judge(answer);
        self.remember(key, exp, verdict.clone());
        Ok(verdict)
    }

    fn judge(&self, answer: Answer) -> Verdict {
        let refuse = |why: &str| Verdict::Refused(why.to_owned());
        if !answer.active {
            return refuse("the authorization server says it is not active (expired or revoked)");
        }
        let now = now();
        if answer.exp.is_some_and(|exp| exp + self.leeway < now) {
            return refuse("it has expired");
        }
        if answer.nbf.is_some_and(|nbf| nbf > now + self.leeway) {
            return refuse("it is not valid yet (`nbf`)");
        }
        if answer.iss.as_ref().is_some_and(|iss| iss != &self.issuer) {
            return Verdict::Refused(format!(
                "it was issued by another issuer (not {})",
                self.issuer
            ));
        }
        let audiences = match answer.aud {
            None => Vec::new(),
            Some(Audience::One(one)) => vec![one],
            Some(Audience::Many(many)) => many,
        };
        if !audiences.iter().any(|aud| self.audiences.contains(aud)) {
            return Verdict::Refused(format!(
                "it was issued for another resource (its `aud` does not name {})",
                self.audiences.join(" or ")
            ));
        }
        let scopes: Vec<String> = answer
            .scope
            .as_deref()
            .unwrap_or("")
            .split_ascii_whitespace()
            .map(str::to_owned)
            .collect();
        match Caller::checked(self.issuer.clone(), answer.sub, answer.client_id, scopes) {
            Ok(caller) => Verdict::Active(caller),
            Err(why) => Verdict::Refused(why),
        }
    }

    fn log_failure(&self, error: &str) {
        let mut logged = self
            .logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if logged.is_none_or(|at| at.elapsed() >= FAILURE_LOG_EVERY) {
            *logged = Some(Instant::now());
            tracing::warn!(%error, "token introspection failed; requests get 503 until it works");
        }
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Verdict> {
        let cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match cache.get(key) {
            Some((until, verdict)) if Instant::now() < *until => Some(verdict.clone()),
            _ => None,
        }
    }

    fn remember(&self, key: [u8; 32], exp: Option<u64>, verdict: Verdict) {
        if self.settings.cache_secs == 0 {
            return;
        }
        let mut keep = Duration::from_secs(self.settings.cache_secs);
        if let (Verdict::Active(_), Some(exp)) = (&verdict, exp) {
            keep = keep.min(Duration::from_secs(exp.saturating_sub(now())));
        }
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= MAX_CACHED {
            let now = Instant::now();
            cache.retain(|_, (until, _)| *until > now);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(key, (Instant::now() + keep, verdict));
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
