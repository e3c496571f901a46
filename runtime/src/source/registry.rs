//! An OCI distribution (v2) client for one registry: manifests and blobs
//! pulled and pushed, with the authentication registries use — anonymous,
//! HTTP Basic, or Bearer tokens from the realm a `401` names (the Docker
//! token protocol, with a password or an identity token).
//!
//! Invariants:
//! - Every byte is checked: a manifest fetched by digest must hash to it,
//!   one fetched by tag must hash to the `Docker-Content-Digest` the
//!   registry states (when it states one); a blob must have exactly its
//!   descriptor's size and digest, hashed as it streams in, capped before.
//! - Credentials go to the registry's own origin and to the token realm it
//!   names, never elsewhere: a blob redirect to another host (a CDN) is
//!   followed without them, and an upload `Location` on another origin is
//!   refused. No message contains a credential or a token.
//! - The scheme is `https`; plain `http` only for a loopback registry
//!   (what a registry on this machine serves), as every host request.
//! - Text a registry sends that reaches a message is bounded and stripped
//!   of control characters.
//! - With an overall end ([`Client::until`]), every request's waits and
//!   whole exchange are cut to what remains of it, so however many
//!   requests a fetch takes (redirect hops and token requests included),
//!   none runs past it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::credentials::{Credential, Found};
use super::digest::Digest;
use super::manifest::{Descriptor, MANIFEST_TYPES, MAX_MANIFEST_BYTES};
use crate::outbound::{Request, Response, printable, send};

/// What manifests are asked for: image manifests, and indexes (recognised
/// to refuse them clearly).
const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

/// Largest token-endpoint answer and error body read.
const MAX_SMALL_BODY: u64 = 64 * 1024;

/// Longest token accepted (registries' JWTs are a few KiB).
const MAX_TOKEN: usize = 16 * 1024;

/// Blob redirects followed (a registry's storage, then perhaps a CDN).
const MAX_REDIRECTS: usize = 5;

/// A manifest as the registry served it.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Its bytes (the digest covers exactly these).
    pub bytes: Bytes,
    /// The `Content-Type` the registry gave.
    pub media_type: Option<String>,
    /// Its digest.
    pub digest: Digest,
}

/// A client of one registry.
pub struct Client {
    /// `https://host[:port]` (or `http://` for loopback).
    origin: String,
    registry: String,
    credential: Option<Found>,
    timeout: Duration,
    deadline: Duration,
    /// When every request must be over (the whole fetch's end), if set.
    ends: Option<Instant>,
    /// The `Authorization` value that last worked (a bearer token or
    /// Basic), reused by later requests.
    authorization: Mutex<Option<String>>,
}

/// What a request needs: `pull`, or `pull,push`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read.
    Pull,
    /// Read and write.
    Push,
}

impl Client {
    /// A client of `registry` (`host[:port]`, as parsed by
    /// [`super::OciReference`]), authenticating with `credential` if
    /// given; each wait within `timeout`, each exchange within `deadline`.
    pub fn new(
        registry: &str,
        credential: Option<Found>,
        timeout: Duration,
        deadline: Duration,
    ) -> Client {
        let host = registry.rsplit_once(':').map_or(registry, |(host, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                host
            } else {
                registry
            }
        });
        let scheme = if crate::outbound::is_loopback(host) {
            "http"
        } else {
            "https"
        };
        Client {
            origin: format!("{scheme}://{registry}"),
            registry: registry.to_owned(),
            credential,
            timeout,
            deadline,
            ends: None,
            authorization: Mutex::new(None),
        }
    }

    /// The same client, every request of it over by `ends`: each one's
    /// waits and whole exchange cut to what remains, and none started
    /// after it.
    #[must_use]
    pub fn until(mut self, ends: Instant) -> Client {
        self.ends = Some(ends);
        self
    }

    /// A `method` request of `url` with the client's timeouts, cut to what
    /// remains of its overall end.
    fn request<'a>(&self, method: http::Method, url: &'a str) -> Result<Request<'a>, String> {
        let (timeout, deadline) = cut(self.timeout, self.deadline, self.ends, Instant::now())
            .ok_or_else(|| format!("`{}`: no time left for another request", self.registry))?;
        Ok(Request::new(method, url, timeout).deadline(deadline))
    }

    /// A client of `registry` with the credentials the standard places
    /// hold for it (looked up off the async threads: a credential helper
    /// may take seconds).
    ///
    /// # Errors
    ///
    /// The credential places are broken (which, and why; never a secret).
    pub async fn with_credentials(
        registry: &str,
        timeout: Duration,
        deadline: Duration,
    ) -> Result<Client, String> {
        let host = registry.to_owned();
        let found = tokio::task::spawn_blocking(move || super::credentials::lookup(&host))
            .await
            .map_err(|error| format!("looking up credentials failed: {error}"))??;
        if let Some(note) = found.as_ref().and_then(|f| f.note.as_deref()) {
            tracing::warn!(registry, "{note}");
        }
        Ok(Client::new(registry, found, timeout, deadline))
    }

    /// Where credentials came from, for messages.
    pub fn credential_source(&self) -> Option<&str> {
        self.credential.as_ref().map(|found| found.from.as_str())
    }

    /// The manifest `reference` (a tag or a digest) of `repository`, at
    /// most [`MAX_MANIFEST_BYTES`], its digest checked.
    ///
    /// # Errors
    ///
    /// Not found, refused, unreachable, over the cap, or its bytes do not
    /// have the digest asked for or stated.
    pub async fn manifest(&self, repository: &str, reference: &str) -> Result<Manifest, String> {
        self.manifest_if_any(repository, reference)
            .await?
            .ok_or_else(|| format!("the manifest `{reference}` of `{repository}`: {NOT_FOUND}"))
    }

    /// The manifest `reference` of `repository` as [`Client::manifest`]
    /// reads it, or `None` when the registry answers that it has none
    /// (`404`).
    ///
    /// # Errors
    ///
    /// As for [`Client::manifest`], but for a `404`.
    pub async fn manifest_if_any(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<Option<Manifest>, String> {
        let path = format!("/v2/{repository}/manifests/{reference}");
        let response = self
            .authorized(
                repository,
                Access::Pull,
                http::Method::GET,
                &path,
                &[(http::header::ACCEPT, ACCEPT_MANIFESTS.to_owned())],
                Bytes::new(),
            )
            .await?;
        if response.status == http::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let what = format!("the manifest `{reference}` of `{repository}`");
        let response = self.expect(response, http::StatusCode::OK, &what).await?;
        let media_type = response
            .header(http::header::CONTENT_TYPE)
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_owned());
        let stated = response
            .header(http::HeaderName::from_static("docker-content-digest"))
            .map(str::to_owned);
        let bytes = response.bytes(MAX_MANIFEST_BYTES as u64).await?;
        let digest = Digest::of(&bytes);
        if let Ok(asked) = Digest::parse(reference)
            && asked != digest
        {
            return Err(format!(
                "{what}: the registry sent bytes whose digest is {digest}, not the one asked for"
            ));
        }
        if let Some(stated) = stated
            && Digest::parse(&stated).ok() != Some(digest)
        {
            return Err(format!(
                "{what}: the registry states the digest `{}` but sent bytes whose digest is \
                 {digest}",
                printable(&stated, 80)
            ));
        }
        Ok(Some(Manifest {
            bytes,
            media_type,
            digest,
        }))
    }

    /// The referrers of `digest` (an image index) from the OCI 1.1
    /// referrers API; `None` when the registry does not serve that API
    /// (then the fallback tag is where they are).
    ///
    /// # Errors
    ///
    /// Refused or unreachable, or over the manifest cap.
    pub async fn referrers(
        &self,
        repository: &str,
        digest: &Digest,
    ) -> Result<Option<Bytes>, String> {
        let response = self
            .authorized(
                repository,
                Access::Pull,
                http::Method::GET,
                &format!("/v2/{repository}/referrers/{digest}"),
                &[(
                    http::header::ACCEPT,
                    "application/vnd.oci.image.index.v1+json".to_owned(),
                )],
                Bytes::new(),
            )
            .await?;
        match response.status {
            http::StatusCode::OK => Ok(Some(response.bytes(MAX_MANIFEST_BYTES as u64).await?)),
            // Not served (registry 2.8 answers 404 for the path).
            http::StatusCode::NOT_FOUND | http::StatusCode::METHOD_NOT_ALLOWED => Ok(None),
            status => Err(format!(
                "the referrers of {digest} in `{repository}`: the registry answered {status}"
            )),
        }
    }

    /// The blob `descriptor` names, at most `max_bytes`, streamed through
    /// SHA-256 and checked against the descriptor's digest and size.
    ///
    /// # Errors
    ///
    /// Refused, unreachable, over the cap, cut short, or not the bytes the
    /// digest names.
    pub async fn blob(
        &self,
        repository: &str,
        descriptor: &Descriptor,
        max_bytes: u64,
    ) -> Result<Vec<u8>, String> {
        if descriptor.size > max_bytes {
            return Err(format!(
                "the blob {} is {} bytes, over the cap of {max_bytes}",
                descriptor.digest, descriptor.size
            ));
        }
        let path = format!("/v2/{repository}/blobs/{}", descriptor.digest);
        let what = format!("the blob {} of `{repository}`", descriptor.digest);
        let mut response = self
            .authorized(
                repository,
                Access::Pull,
                http::Method::GET,
                &path,
                &[],
                Bytes::new(),
            )
            .await?;
        // Registries commonly send blobs from elsewhere (object storage, a
        // CDN): followed, without credentials off the registry's origin.
        let mut url = format!("{}{path}", self.origin);
        for _ in 0..MAX_REDIRECTS {
            if !response.status.is_redirection() {
                break;
            }
            let location = response
                .header(http::header::LOCATION)
                .ok_or_else(|| format!("{what}: a redirect without a Location"))?;
            url = resolve(&url, location).ok_or_else(|| {
                format!(
                    "{what}: the redirect to `{}` is not a URL",
                    printable(location, 200)
                )
            })?;
            crate::outbound::may_follow(&self.origin, &url)
                .map_err(|why| format!("{what}: the registry redirects to {why}"))?;
            let mut request = self.request(http::Method::GET, &url)?;
            if same_origin(&url, &self.origin)
                && let Some(authorization) = self.current_authorization()
            {
                request = request.header(http::header::AUTHORIZATION, authorization);
            }
            response = send(request).await?;
        }
        let response = self.expect(response, http::StatusCode::OK, &what).await?;
        let mut hasher = Sha256::new();
        let mut bytes = Vec::with_capacity(usize::try_from(descriptor.size).unwrap_or(0));
        let read = response
            .each_chunk(descriptor.size, |chunk| {
                hasher.update(chunk);
                bytes.extend_from_slice(chunk);
                Ok(())
            })
            .await
            .map_err(|error| format!("{what}: {error}"))?;
        if read != descriptor.size {
            return Err(format!(
                "{what}: {read} bytes arrived where the manifest says {}",
                descriptor.size
            ));
        }
        let got = Digest::from_bytes(hasher.finalize().into());
        if got != descriptor.digest {
            return Err(format!(
                "{what}: its content does not match its digest (it hashes to {got}); nothing was \
                 kept"
            ));
        }
        Ok(bytes)
    }

    /// Push `bytes` as a blob of `repository` (skipped when the registry
    /// has it): its digest.
    ///
    /// # Errors
    ///
    /// Refused or unreachable, or the registry's upload location is on
    /// another origin.
    pub async fn push_blob(&self, repository: &str, bytes: Bytes) -> Result<Digest, String> {
        let digest = Digest::of(&bytes);
        let what = format!("uploading the blob {digest} to `{repository}`");
        let head = self
            .authorized(
                repository,
                Access::Push,
                http::Method::HEAD,
                &format!("/v2/{repository}/blobs/{digest}"),
                &[],
                Bytes::new(),
            )
            .await?;
        if head.status == http::StatusCode::OK {
            return Ok(digest);
        }
        drop(head);
        let start = self
            .authorized(
                repository,
                Access::Push,
                http::Method::POST,
                &format!("/v2/{repository}/blobs/uploads/"),
                &[],
                Bytes::new(),
            )
            .await?;
        let start = self
            .expect(start, http::StatusCode::ACCEPTED, &what)
            .await?;
        let location = start
            .header(http::header::LOCATION)
            .ok_or_else(|| format!("{what}: the registry gave no upload location"))?;
        let base = format!("{}/v2/{repository}/blobs/uploads/", self.origin);
        let url = resolve(&base, location).ok_or_else(|| {
            format!(
                "{what}: the upload location `{}` is not a URL",
                printable(location, 200)
            )
        })?;
        drop(start);
        if !same_origin(&url, &self.origin) {
            return Err(format!(
                "{what}: the registry asks for the upload at `{}`, another origin; refused",
                printable(&url, 200)
            ));
        }
        let separator = if url.contains('?') { '&' } else { '?' };
        let path = url.strip_prefix(&self.origin).unwrap_or(&url).to_owned();
        let put = self
            .authorized(
                repository,
                Access::Push,
                http::Method::PUT,
                &format!("{path}{separator}digest={digest}"),
                &[(
                    http::header::CONTENT_TYPE,
                    "application/octet-stream".to_owned(),
                )],
                bytes,
            )
            .await?;
        self.expect(put, http::StatusCode::CREATED, &what).await?;
        Ok(digest)
    }

    /// Put `manifest` (of `media_type`) under `tag` in `repository`: its
    /// digest.
    ///
    /// # Errors
    ///
    /// Refused or unreachable, or the registry states another digest.
    pub async fn push_manifest(
        &self,
        repository: &str,
        tag: &str,
        manifest: Bytes,
        media_type: &str,
    ) -> Result<Digest, String> {
        let digest = Digest::of(&manifest);
        let what = format!("putting the manifest `{tag}` in `{repository}`");
        let response = self
            .authorized(
                repository,
                Access::Push,
                http::Method::PUT,
                &format!("/v2/{repository}/manifests/{tag}"),
                &[(http::header::CONTENT_TYPE, media_type.to_owned())],
                manifest,
            )
            .await?;
        let response = self
            .expect(response, http::StatusCode::CREATED, &what)
            .await?;
        if let Some(stated) =
            response.header(http::HeaderName::from_static("docker-content-digest"))
            && Digest::parse(stated).ok() != Some(digest)
        {
            return Err(format!(
                "{what}: the registry stored it as `{}`, not {digest}",
                printable(stated, 80)
            ));
        }
        Ok(digest)
    }

    fn current_authorization(&self) -> Option<String> {
        self.authorization
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Send a request to the registry, authenticating as its `401` asks
    /// (once): the response, whatever its status (a redirect included).
    async fn authorized(
        &self,
        repository: &str,
        access: Access,
        method: http::Method,
        path: &str,
        headers: &[(http::HeaderName, String)],
        body: Bytes,
    ) -> Result<Response, String> {
        let url = format!("{}{path}", self.origin);
        let attempt = async |authorization: Option<String>| {
            let mut request = self.request(method.clone(), &url)?.body(body.clone());
            request.headers = headers.to_vec();
            if let Some(authorization) = authorization {
                request = request.header(http::header::AUTHORIZATION, authorization);
            }
            send(request).await
        };
        let first = attempt(self.current_authorization()).await?;
        if first.status != http::StatusCode::UNAUTHORIZED {
            return Ok(first);
        }
        let challenge = first
            .header(http::header::WWW_AUTHENTICATE)
            .map(Challenge::parse)
            .unwrap_or(Challenge::None);
        drop(first);
        let authorization = match challenge {
            Challenge::Basic => match &self.credential {
                Some(Found {
                    credential: Credential::Basic { username, secret },
                    ..
                }) => super::credentials::basic_header(username, secret),
                _ => return Err(self.needs_credentials()),
            },
            Challenge::Bearer { realm, service } => {
                self.token(&realm, service.as_deref(), repository, access)
                    .await?
            }
            Challenge::None => {
                return Err(format!(
                    "`{}` answered 401 without saying how to authenticate",
                    self.registry
                ));
            }
        };
        let second = attempt(Some(authorization.clone())).await?;
        if second.status == http::StatusCode::UNAUTHORIZED {
            return Err(match self.credential_source() {
                Some(from) => format!(
                    "`{}` refused the credentials from {from} (401)",
                    self.registry
                ),
                None => self.needs_credentials(),
            });
        }
        *self
            .authorization
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(authorization);
        Ok(second)
    }

    fn needs_credentials(&self) -> String {
        format!(
            "`{}` needs credentials and none were found for it (Docker's config.json or a \
             credential helper, the containers auth.json, or TOOLCAGE_REGISTRY_HOST with \
             TOOLCAGE_REGISTRY_USERNAME and TOOLCAGE_REGISTRY_PASSWORD[_FILE])",
            self.registry
        )
    }

    /// A bearer token from `realm` for `repository` (the Docker token
    /// protocol): `Bearer …`.
    async fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        repository: &str,
        access: Access,
    ) -> Result<String, String> {
        crate::outbound::may_follow(&self.origin, realm)
            .map_err(|why| format!("`{}` names as its token realm {why}", self.registry))?;
        let scope = format!(
            "repository:{repository}:{}",
            match access {
                Access::Pull => "pull",
                Access::Push => "pull,push",
            }
        );
        let mut form: Vec<(&str, &str)> = Vec::new();
        if let Some(service) = service {
            form.push(("service", service));
        }
        form.push(("scope", &scope));
        let realm_shown = printable(realm, 200);
        // The query carries only the service and scope, never a credential.
        let get_url = format!(
            "{realm}{}{}",
            if realm.contains('?') { '&' } else { '?' },
            crate::auth::fetch::form_body(&form)
        );
        let request = match &self.credential {
            // Docker's identity token is an OAuth2 refresh token.
            Some(Found {
                credential: Credential::IdentityToken(token),
                ..
            }) => {
                form.extend([
                    ("grant_type", "refresh_token"),
                    ("refresh_token", token.as_str()),
                    ("client_id", "toolcage"),
                ]);
                self.request(http::Method::POST, realm)?
                    .header(
                        http::header::CONTENT_TYPE,
                        "application/x-www-form-urlencoded",
                    )
                    .body(crate::auth::fetch::form_body(&form))
            }
            Some(Found {
                credential: Credential::Basic { username, secret },
                ..
            }) => self.request(http::Method::GET, &get_url)?.header(
                http::header::AUTHORIZATION,
                super::credentials::basic_header(username, secret),
            ),
            None => self.request(http::Method::GET, &get_url)?,
        };
        self.token_from(request, &realm_shown).await
    }

    async fn token_from(&self, request: Request<'_>, realm: &str) -> Result<String, String> {
        let response = send(request)
            .await
            .map_err(|error| format!("the token endpoint of `{}`: {error}", self.registry))?;
        match response.status {
            http::StatusCode::OK => {}
            http::StatusCode::UNAUTHORIZED | http::StatusCode::FORBIDDEN => {
                return Err(match self.credential_source() {
                    Some(from) => format!(
                        "`{}` (its token endpoint `{realm}`) refused the credentials from {from} \
                         ({})",
                        self.registry, response.status
                    ),
                    None => self.needs_credentials(),
                });
            }
            status => {
                return Err(format!(
                    "the token endpoint `{realm}` of `{}` answered {status}",
                    self.registry
                ));
            }
        }
        #[derive(Deserialize)]
        struct TokenAnswer {
            token: Option<String>,
            access_token: Option<String>,
        }
        let body = response.bytes(MAX_SMALL_BODY).await?;
        let answer: TokenAnswer = serde_json::from_slice(&body)
            .map_err(|_| format!("the token endpoint `{realm}` sent something that is not JSON"))?;
        let token = answer
            .token
            .or(answer.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| format!("the token endpoint `{realm}` sent no token"))?;
        if token.len() > MAX_TOKEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "the token endpoint `{realm}` sent a token that cannot be a header value"
            ));
        }
        Ok(format!("Bearer {token}"))
    }

    /// `response` if its status is `want`; else an error saying what the
    /// registry answered (its error code and message, bounded).
    async fn expect(
        &self,
        response: Response,
        want: http::StatusCode,
        what: &str,
    ) -> Result<Response, String> {
        let status = response.status;
        if status == want {
            return Ok(response);
        }
        let detail = match response.bytes(MAX_SMALL_BODY).await {
            Ok(body) => registry_error(&body),
            Err(_) => String::new(),
        };
        Err(match status {
            http::StatusCode::NOT_FOUND => format!("{what}: {NOT_FOUND}{detail}"),
            http::StatusCode::FORBIDDEN => {
                format!("{what}: the registry denies access (403){detail}")
            }
            s if s.is_redirection() => format!(
                "{what}: the registry answered a redirect ({s}), which is not followed here"
            ),
            s => format!("{what}: the registry answered {s}{detail}"),
        })
    }
}

/// What a `404` is called in messages.
const NOT_FOUND: &str = "not found in the registry (404)";

/// `{"errors":[{"code","message"}]}` as `: CODE: message`, bounded.
fn registry_error(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Errors {
        errors: Vec<Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        code: Option<String>,
        message: Option<String>,
    }
    let Ok(errors) = serde_json::from_slice::<Errors>(body) else {
        return String::new();
    };
    let Some(first) = errors.errors.first() else {
        return String::new();
    };
    format!(
        ": {} {}",
        printable(first.code.as_deref().unwrap_or(""), 60),
        printable(first.message.as_deref().unwrap_or(""), 200)
    )
    .trim_end()
    .to_owned()
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, PartialEq, Eq)]
enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
    },
    None,
}

impl Challenge {
    /// `Basic realm=…` or `Bearer realm="…",service="…",scope="…"`; the
    /// first challenge given.
    fn parse(header: &str) -> Challenge {
        let header = header.trim();
        let (scheme, params) = header.split_once(' ').unwrap_or((header, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return Challenge::Basic;
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Challenge::None;
        }
        let params = auth_params(params);
        let get = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.clone())
        };
        match get("realm") {
            Some(realm) => Challenge::Bearer {
                realm,
                service: get("service"),
            },
            None => Challenge::None,
        }
    }
}

/// `key="quoted \" value", key=token, …` (RFC 9110 §11.2).
fn auth_params(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars
            .by_ref()
            .take_while(|c| *c != '=')
            .collect::<String>()
            .trim()
            .to_owned();
        if key.is_empty() {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek().copied() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
            value = value.trim().to_owned();
        }
        out.push((key, value));
        if out.len() > 16 {
            return out;
        }
    }
}

/// `location` resolved against `base` (absolute, or an absolute path).
pub(super) fn resolve(base: &str, location: &str) -> Option<String> {
    if location.starts_with("https://") || location.starts_with("http://") {
        return Some(location.to_owned());
    }
    if location.starts_with("//") {
        let scheme = base.split_once("://")?.0;
        return Some(format!("{scheme}:{location}"));
    }
    let uri: http::Uri = base.parse().ok()?;
    let origin = format!("{}://{}", uri.scheme_str()?, uri.authority()?);
    if location.starts_with('/') {
        return Some(format!("{origin}{location}"));
    }
    // Relative to the base's folder.
    let path = uri.path();
    let folder = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    Some(format!("{origin}{folder}{location}"))
}

/// A request's `timeout` (each wait) and `deadline` (the whole exchange),
/// cut to what remains at `now` of an overall end `ends`; `None` when
/// nothing remains.
pub(super) fn cut(
    timeout: Duration,
    deadline: Duration,
    ends: Option<Instant>,
    now: Instant,
) -> Option<(Duration, Duration)> {
    let Some(ends) = ends else {
        return Some((timeout, deadline));
    };
    let left = ends
        .checked_duration_since(now)
        .filter(|left| !left.is_zero())?;
    Some((timeout.min(left), deadline.min(left)))
}

/// Whether `url` is on `origin` (`scheme://authority`, exactly).
fn same_origin(url: &str, origin: &str) -> bool {
    url.strip_prefix(origin)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/') || rest.starts_with('?'))
}

/// The manifest types accepted, for a publisher's `Content-Type`.
pub const OCI_MANIFEST_TYPE: &str = MANIFEST_TYPES[0];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse_as_registries_send_them() {
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull""#
            ),
            Challenge::Bearer {
                realm: "https://ghcr.io/token".into(),
                service: Some("ghcr.io".into())
            }
        );
        assert_eq!(
            Challenge::parse(r#"Basic realm="Registry Realm""#),
            Challenge::Basic
        );
        assert_eq!(
            Challenge::parse(r#"bearer realm="https://a/t?x=\"y\"", service=reg"#),
            Challenge::Bearer {
                realm: r#"https://a/t?x="y""#.into(),
                service: Some("reg".into())
            }
        );
        assert_eq!(Challenge::parse("Bearer service=x"), Challenge::None);
        assert_eq!(Challenge::parse("Negotiate abc"), Challenge::None);
        assert_eq!(Challenge::parse(""), Challenge::None);
        // Never loops or grows without bound on junk.
        let junk = "Bearer ".to_owned() + &"a=\"".repeat(10_000);
        let _ = Challenge::parse(&junk);
        assert!(auth_params(&"k=v,".repeat(1000)).len() <= 17);
    }

    #[test]
    fn locations_resolve_and_origins_compare_exactly() {
        let base = "http://127.0.0.1:5000/v2/a/blobs/uploads/";
        assert_eq!(
            resolve(base, "/v2/a/blobs/uploads/x?_state=1").as_deref(),
            Some("http://127.0.0.1:5000/v2/a/blobs/uploads/x?_state=1")
        );
        assert_eq!(
            resolve(base, "x").as_deref(),
            Some("http://127.0.0.1:5000/v2/a/blobs/uploads/x")
        );
        assert_eq!(
            resolve(base, "//cdn.example/b").as_deref(),
            Some("http://cdn.example/b")
        );
        let origin = "https://ghcr.io";
        assert!(same_origin("https://ghcr.io/v2/x", origin));
        assert!(!same_origin("https://ghcr.io.evil.example/v2/x", origin));
        assert!(!same_origin("https://ghcr.io:444/v2/x", origin));
        assert!(!same_origin("http://ghcr.io/v2/x", origin));
    }

    #[test]
    fn registry_errors_are_bounded_and_printable() {
        let body = format!(
            r#"{{"errors":[{{"code":"MANIFEST_UNKNOWN","message":"no\u001b[31m{}"}}]}}"#,
            "x".repeat(5000)
        );
        let shown = registry_error(body.as_bytes());
        assert!(shown.starts_with(": MANIFEST_UNKNOWN no [31m"), "{shown}");
        assert!(shown.chars().count() < 300, "{}", shown.len());
        assert_eq!(registry_error(b"not json"), "");
    }

    #[test]
    fn each_request_is_cut_to_what_remains_of_the_whole() {
        let s = Duration::from_secs;
        let now = Instant::now();
        // (timeout, deadline, ends in) -> cut
        let cases = [
            (s(30), s(600), None, Some((s(30), s(600)))),
            (s(30), s(600), Some(s(1000)), Some((s(30), s(600)))),
            (s(30), s(600), Some(s(100)), Some((s(30), s(100)))),
            (s(30), s(600), Some(s(3)), Some((s(3), s(3)))),
            (s(30), s(600), Some(s(0)), None),
        ];
        for (timeout, deadline, ends_in, expect) in cases {
            let ends = ends_in.map(|d| now + d);
            assert_eq!(cut(timeout, deadline, ends, now), expect, "{ends_in:?}");
        }
        // Past the end: nothing left, not a panic.
        assert_eq!(cut(s(1), s(1), Some(now), now + s(5)), None);
    }

    #[test]
    fn loopback_registries_use_http_and_others_https() {
        let t = Duration::from_secs(1);
        assert_eq!(
            Client::new("127.0.0.1:5000", None, t, t).origin,
            "http://127.0.0.1:5000"
        );
        assert_eq!(
            Client::new("localhost", None, t, t).origin,
            "http://localhost"
        );
        assert_eq!(Client::new("ghcr.io", None, t, t).origin, "https://ghcr.io");
        assert_eq!(
            Client::new("[::1]:5000", None, t, t).origin,
            "http://[::1]:5000"
        );
    }
}
