//! Credentials for private OCI registries, found where the operator's
//! container tools already keep them, never on the command line (where
//! every other user of the machine could read them in `ps`).
//!
//! [`lookup`] answers one question for the registry client: what
//! credential, if any, goes to registry `host[:port]`. The places, in order
//! (the first that has something for the registry wins):
//!
//! 1. `TOOLCAGE_REGISTRY_USERNAME` with `TOOLCAGE_REGISTRY_PASSWORD` or
//!    `TOOLCAGE_REGISTRY_PASSWORD_FILE`, only for the registry named by
//!    `TOOLCAGE_REGISTRY_HOST` (required with them).
//! 2. The containers auth file (podman, skopeo, buildah):
//!    `REGISTRY_AUTH_FILE` alone if set, else
//!    `$XDG_RUNTIME_DIR/containers/auth.json` then
//!    `$XDG_CONFIG_HOME/containers/auth.json` (`~/.config/…`), read as
//!    containers/image `pkg/docker/config` reads them: the registry's
//!    `credHelpers` entry, else its `auths` entry.
//! 3. `DOCKER_AUTH_CONFIG` (JSON `{"auths": …}`), which docker/cli puts
//!    in front of its config file.
//! 4. Docker's `$DOCKER_CONFIG/config.json` (`~/.docker/config.json`), read
//!    as docker/cli `cli/config/configfile` reads it: a `credHelpers` entry
//!    for the registry, else `credsStore`, else `auths`. A configured helper
//!    is the whole answer for that file, as in docker: `docker login` with a
//!    helper leaves empty `auths` entries behind, never a usable fallback.
//!
//! Keys match as docker and containers/image match them: the exact host,
//! then legacy keys (`https://host/v1/`, `http://host/v2/`, `host/path`)
//! reduced to their host. Docker Hub's names (`docker.io`,
//! `index.docker.io`, `registry-1.docker.io`) are one registry, whose
//! docker key is `https://index.docker.io/v1/`.
//!
//! A credential helper is `docker-credential-NAME get`, with the server
//! URL on stdin (the bare host; `https://index.docker.io/v1/` for Docker
//! Hub from docker's config, `docker.io` from the containers auth file, as
//! each tool passes it), answering `{"ServerURL","Username","Secret"}`; the
//! `Username` `<token>` marks the secret as an identity token (the
//! docker-credential-helpers protocol).
//!
//! Invariants:
//!
//! - A credential is returned only for the registry it was stored for:
//!   the environment's only for `TOOLCAGE_REGISTRY_HOST`, a file's only for
//!   a key that names the registry's host (and port) exactly.
//! - No secret reaches a message: [`Credential`]'s `Debug` redacts it;
//!   errors name the variable, file, key or helper, never a value (a JSON
//!   error gives the line and column, not serde's text, which quotes the
//!   offending value); a helper's output is never echoed, except the first
//!   line of the error text a failing helper printed.
//! - Every read is bounded: files at [`MAX_FILE`], a helper's output at
//!   [`HelperLimits::max_output`], its run at [`HelperLimits::timeout`]
//!   (then it is killed).
//! - A helper runs only by a plain name (`[A-Za-z0-9._-]+`), found in an
//!   absolute `PATH` directory: a config file cannot point at a path, and
//!   the current directory is never searched.
//! - A missing file or a missing helper means no credential; a file or an
//!   answer that cannot be read is an error, never silently skipped.
//!
//! Deliberately not done: writing credentials (`login`), registries.conf
//! `credential-helpers`, `/run/containers/$UID/auth.json` and the legacy
//! `~/.dockercfg`, namespaced keys (`host/repo`), `registrytoken`, and
//! guessing a platform helper (`pass`, `secretservice`) that no file names.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::Deserialize;

/// A credential for one registry. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// A user name and a password (or a personal access token): HTTP Basic
    /// to the registry, or to the token endpoint of Bearer token auth.
    Basic {
        /// The user name.
        username: String,
        /// The password or token.
        secret: String,
    },
    /// Docker's `identitytoken`: an OAuth2 refresh token for the token
    /// endpoint (`grant_type=refresh_token`), never sent to the registry.
    IdentityToken(String),
}

/// A credential and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The credential.
    pub credential: Credential,
    /// Where it came from, for messages: `TOOLCAGE_REGISTRY_* variables`,
    /// a file's path, or a helper and the file that named it.
    pub from: String,
    /// Something the operator should hear about the place, without it being
    /// an error: a file holding a plain password that other users can read.
    /// Docker and podman read such files without a word; refusing them
    /// would break setups that work everywhere else, so it is only said.
    pub note: Option<String>,
}

/// How long a credential helper may run and how much it may print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelperLimits {
    /// Wall-clock time from start to exit; the helper is killed after it.
    pub timeout: Duration,
    /// Bytes kept from each of stdout and stderr; more on stdout is an
    /// error (no answer is that long), more on stderr is dropped.
    pub max_output: usize,
}

impl HelperLimits {
    /// Ten seconds: a keychain helper answers in milliseconds, a cloud
    /// helper (ECR, GCR) that fetches a token in a second or two; longer is
    /// a helper waiting for a prompt nobody will answer. 64 KiB: an answer
    /// is three short strings.
    pub const DEFAULT: HelperLimits = HelperLimits {
        timeout: Duration::from_secs(10),
        max_output: 64 * 1024,
    };
}

impl Default for HelperLimits {
    fn default() -> Self {
        HelperLimits::DEFAULT
    }
}

/// The largest credentials file read. Real ones are a few KiB; anything
/// past this is not a credentials file.
pub const MAX_FILE: u64 = 1024 * 1024;

/// What names the environment credentials in messages.
const ENV_SOURCE: &str = "TOOLCAGE_REGISTRY_* variables";

/// The key docker/cli stores Docker Hub's credentials under (its
/// `authConfigKey`), in `auths` and towards helpers.
const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";

/// The `Username` by which a helper marks its secret as an identity token
/// (docker/cli `tokenUsername`).
const TOKEN_USERNAME: &str = "<token>";

/// What a helper prints, exactly, when it has nothing for the server
/// (docker-credential-helpers `errCredentialsNotFoundMessage`).
const NOT_FOUND_MESSAGE: &str = "credentials not found in native keychain";

/// The longest part of a failing helper's error text quoted in a message.
const MAX_QUOTED: usize = 200;

/// The credential for `registry` (`host` or `host:port`), from the real
/// environment and files, with [`HelperLimits::DEFAULT`].
///
/// # Errors
///
/// As [`lookup_in`].
pub fn lookup(registry: &str) -> Result<Option<Found>, String> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    lookup_in(
        &|name| std::env::var(name).ok(),
        home.as_deref(),
        registry,
        &HelperLimits::DEFAULT,
    )
}

/// The credential for `registry` (`host` or `host:port`), with the
/// environment read through `env` (`PATH` included: where helpers are
/// looked for) and `~` being `home`. `Ok(None)` means anonymous access.
///
/// # Errors
///
/// A registry name that is not a host; half-set or unscoped
/// `TOOLCAGE_REGISTRY_*` variables; a file that cannot be read, is too
/// large or is not valid JSON; an entry whose `auth` does not decode; a
/// helper that cannot run, fails, runs too long or answers nonsense.
pub fn lookup_in(
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
    registry: &str,
    limits: &HelperLimits,
) -> Result<Option<Found>, String> {
    let registry = registry.to_ascii_lowercase();
    check_registry(&registry)?;
    let env = |name: &str| env(name).filter(|value| !value.is_empty());
    let found = search(&env, home, &registry, limits)?;
    match &found {
        Some(found) => tracing::debug!(%registry, from = %found.from, "registry credential found"),
        None => tracing::debug!(%registry, "no registry credential; going anonymous"),
    }
    Ok(found)
}

/// The places in order; the first with something for `registry` answers.
fn search(
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
    registry: &str,
    limits: &HelperLimits,
) -> Result<Option<Found>, String> {
    let helpers = Helpers {
        path: env("PATH"),
        limits,
    };
    if let Some(found) = from_variables(env, registry)? {
        return Ok(Some(found));
    }
    for path in containers_auth_files(env, home) {
        if let Some(found) = from_file(&path, Flavor::Containers, registry, &helpers)? {
            return Ok(Some(found));
        }
    }
    if let Some(text) = env("DOCKER_AUTH_CONFIG") {
        let config = parse_config(text.as_bytes(), "DOCKER_AUTH_CONFIG")?;
        if let Some(found) = from_auths(&config, "DOCKER_AUTH_CONFIG", registry)? {
            return Ok(Some(found));
        }
    }
    let docker = match env("DOCKER_CONFIG") {
        Some(dir) => Some(PathBuf::from(dir).join("config.json")),
        None => home.map(|home| home.join(".docker").join("config.json")),
    };
    match docker {
        Some(path) => from_file(&path, Flavor::Docker, registry, &helpers),
        None => Ok(None),
    }
}

/// `Basic base64(username:secret)`: an `Authorization` header value.
pub fn basic_header(username: &str, secret: &str) -> String {
    let pair = format!("{username}:{secret}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// Stands in for a secret.
        struct Redacted;
        impl fmt::Debug for Redacted {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("<redacted>")
            }
        }
        match self {
            Credential::Basic { username, .. } => f
                .debug_struct("Credential")
                .field("username", username)
                .field("secret", &Redacted)
                .finish(),
            Credential::IdentityToken(_) => f
                .debug_struct("Credential")
                .field("identity_token", &Redacted)
                .finish(),
        }
    }
}

impl Found {
    /// `self`, with a note if `path`, which holds it in plain text, is
    /// readable by its group or by everyone.
    fn noting_readable(mut self, path: &Path) -> Found {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            if let Ok(metadata) = std::fs::metadata(path)
                && metadata.permissions().mode() & 0o044 != 0
            {
                self.note = Some(format!(
                    "`{}` holds this registry's credential in plain text and other users can \
                     read it; `chmod 600` it, or keep the credential in a credential helper",
                    path.display()
                ));
            }
        }
        #[cfg(not(unix))]
        let _ = path;
        self
    }
}

/// The registry as given must be a host with an optional port: it is
/// matched against keys and written to helpers, so nothing else may hide
/// in it (a path, a scheme, a newline).
fn check_registry(registry: &str) -> Result<(), String> {
    let fine = !registry.is_empty()
        && registry
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:[]".contains(&b));
    if fine {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not a registry host (`host` or `host:port`)",
            registry.escape_debug()
        ))
    }
}

/// Docker Hub's names as one; every other host as it is.
fn canonical(host: &str) -> &str {
    match host {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" => "docker.io",
        other => other,
    }
}

/// The keys tried verbatim for `registry`, best first: docker's own key,
/// then the host as containers/image writes it.
fn exact_keys(registry: &str) -> Vec<&str> {
    if canonical(registry) == "docker.io" {
        vec![
            DOCKER_HUB_KEY,
            "docker.io",
            "index.docker.io",
            "registry-1.docker.io",
        ]
    } else {
        vec![registry]
    }
}

/// The host a key names: without a scheme and without a path
/// (docker/cli `ConvertToHostname`), lowercase, Hub names as one.
fn key_host(key: &str) -> String {
    let rest = key.split_once("://").map_or(key, |(_, rest)| rest);
    let host = rest.split('/').next().unwrap_or(rest);
    canonical(&host.to_ascii_lowercase()).to_owned()
}

// ---------------------------------------------------------------- variables

/// Step 1: the `TOOLCAGE_REGISTRY_*` variables, checked whole even when
/// they name another registry, so a mistake shows on the first pull.
fn from_variables(
    env: &dyn Fn(&str) -> Option<String>,
    registry: &str,
) -> Result<Option<Found>, String> {
    let username = env("TOOLCAGE_REGISTRY_USERNAME");
    let password = env("TOOLCAGE_REGISTRY_PASSWORD");
    let password_file = env("TOOLCAGE_REGISTRY_PASSWORD_FILE");
    let host = env("TOOLCAGE_REGISTRY_HOST");
    if username.is_none() && password.is_none() && password_file.is_none() {
        return match host {
            Some(_) => Err(
                "TOOLCAGE_REGISTRY_HOST is set without TOOLCAGE_REGISTRY_USERNAME and \
                 TOOLCAGE_REGISTRY_PASSWORD (or TOOLCAGE_REGISTRY_PASSWORD_FILE)"
                    .into(),
            ),
            None => Ok(None),
        };
    }
    let Some(username) = username else {
        return Err(
            "TOOLCAGE_REGISTRY_USERNAME is not set, but a registry password is; \
             set both, and TOOLCAGE_REGISTRY_HOST"
                .into(),
        );
    };
    let secret = match (password, password_file) {
        (Some(_), Some(_)) => {
            return Err(
                "both TOOLCAGE_REGISTRY_PASSWORD and TOOLCAGE_REGISTRY_PASSWORD_FILE \
                 are set; set one"
                    .into(),
            );
        }
        (None, None) => {
            return Err(
                "TOOLCAGE_REGISTRY_PASSWORD (or TOOLCAGE_REGISTRY_PASSWORD_FILE) is not \
                 set, but TOOLCAGE_REGISTRY_USERNAME is"
                    .into(),
            );
        }
        (Some(password), None) => password,
        (None, Some(file)) => read_password_file(Path::new(&file))?,
    };
    let Some(host) = host else {
        return Err(
            "TOOLCAGE_REGISTRY_HOST is not set: registry credentials from the \
             environment go only to the registry it names (`host` or `host:port`)"
                .into(),
        );
    };
    let host = host.to_ascii_lowercase();
    if check_registry(&host).is_err() {
        return Err(format!(
            "TOOLCAGE_REGISTRY_HOST `{}` is not a registry host; give `host` or `host:port`, \
             without a scheme or a path",
            host.escape_debug()
        ));
    }
    if canonical(&host) != canonical(registry) {
        return Ok(None);
    }
    Ok(Some(Found {
        credential: Credential::Basic { username, secret },
        from: ENV_SOURCE.into(),
        note: None,
    }))
}

/// The secret in `path`, without its trailing newline.
fn read_password_file(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let bytes = read_bounded(path)?
        .ok_or_else(|| format!("TOOLCAGE_REGISTRY_PASSWORD_FILE `{shown}` does not exist"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("TOOLCAGE_REGISTRY_PASSWORD_FILE `{shown}` is not UTF-8 text"))?;
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.is_empty() {
        return Err(format!(
            "TOOLCAGE_REGISTRY_PASSWORD_FILE `{shown}` is empty"
        ));
    }
    Ok(secret.to_owned())
}

// -------------------------------------------------------------------- files

/// The containers auth files to read, in containers/image's order
/// (`getAuthFilePaths`): an explicit `REGISTRY_AUTH_FILE` is the only one.
fn containers_auth_files(
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Vec<PathBuf> {
    if let Some(file) = env("REGISTRY_AUTH_FILE") {
        return vec![PathBuf::from(file)];
    }
    let absolute = |name: &str| env(name).map(PathBuf::from).filter(|dir| dir.is_absolute());
    let mut files = Vec::new();
    if let Some(dir) = absolute("XDG_RUNTIME_DIR") {
        files.push(dir.join("containers").join("auth.json"));
    }
    if let Some(dir) = absolute("XDG_CONFIG_HOME").or_else(|| home.map(|h| h.join(".config"))) {
        files.push(dir.join("containers").join("auth.json"));
    }
    files
}

/// The parts of docker's `config.json` (and of containers' `auth.json`,
/// the same shape) that hold credentials; every other field is ignored.
#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    auths: Option<BTreeMap<String, AuthEntry>>,
    #[serde(rename = "credHelpers")]
    cred_helpers: Option<BTreeMap<String, Option<String>>>,
    #[serde(rename = "credsStore")]
    creds_store: Option<String>,
}

/// One `auths` entry (docker/cli `types.AuthConfig`).
#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
}

/// Whose file it is: each tool reads its own file its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// Docker's `config.json`: `credsStore` counts, Hub is
    /// `https://index.docker.io/v1/` towards helpers.
    Docker,
    /// Containers' `auth.json`: no `credsStore`, Hub is `docker.io`.
    Containers,
}

/// `path`'s contents, at most [`MAX_FILE`] bytes; `None` if it does not
/// exist.
fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, String> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read `{}`: {error}", path.display())),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read `{}`: {error}", path.display()))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!(
            "`{}` is larger than {} MiB; it is not a registry credentials file",
            path.display(),
            MAX_FILE / (1024 * 1024)
        ));
    }
    Ok(Some(bytes))
}

/// Steps 2 and 4: the credential the file at `path` has for `registry`,
/// read as `flavor`'s tool reads it; nothing if there is no such file.
fn from_file(
    path: &Path,
    flavor: Flavor,
    registry: &str,
    helpers: &Helpers<'_>,
) -> Result<Option<Found>, String> {
    let Some(bytes) = read_bounded(path)? else {
        return Ok(None);
    };
    let config = parse_config(&bytes, &path.display().to_string())?;
    from_config(&config, path, flavor, registry, helpers)
}

/// `bytes` as a credentials file named `shown` in messages. Empty is an
/// empty file, as docker takes it.
fn parse_config(bytes: &[u8], shown: &str) -> Result<ConfigFile, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(ConfigFile::default());
    }
    serde_json::from_slice(bytes).map_err(|error| json_error(shown, &error))
}

/// Where `shown` is broken, without serde's text: it quotes the value it
/// choked on, which can be a password.
fn json_error(shown: &str, error: &serde_json::Error) -> String {
    let at = format!("line {}, column {}", error.line(), error.column());
    match error.classify() {
        serde_json::error::Category::Data => format!(
            "`{shown}` has a value of the wrong type at {at} (`auths` maps registries to \
             objects of strings, `credHelpers` registries to helper names, `credsStore` is a \
             helper name)"
        ),
        serde_json::error::Category::Eof => {
            format!("`{shown}` is not valid JSON: it ends early, at {at}")
        }
        _ => format!("`{shown}` is not valid JSON: a syntax error at {at}"),
    }
}

/// One parsed file, read as `flavor`'s tool reads it.
fn from_config(
    config: &ConfigFile,
    path: &Path,
    flavor: Flavor,
    registry: &str,
    helpers: &Helpers<'_>,
) -> Result<Option<Found>, String> {
    let shown = path.display().to_string();
    let per_registry = config.cred_helpers.as_ref().and_then(|map| {
        exact_keys(registry)
            .into_iter()
            .find_map(|key| map.get(key).cloned().flatten())
            .filter(|name| !name.is_empty())
    });
    let helper = match per_registry {
        Some(name) => Some((name, "credHelpers")),
        None if flavor == Flavor::Docker => config
            .creds_store
            .clone()
            .filter(|name| !name.is_empty())
            .map(|name| (name, "credsStore")),
        None => None,
    };
    let Some((name, field)) = helper else {
        let found = from_auths(config, &shown, registry)?;
        return Ok(found.map(|found| found.noting_readable(path)));
    };
    if !is_helper_name(&name) {
        return Err(format!(
            "`{field}` in `{shown}` names the credential helper `{}`; a helper is a plain \
             name (docker-credential-NAME on PATH), letters, digits, `.`, `_` and `-`",
            name.escape_debug()
        ));
    }
    // The server URL each tool hands its helpers.
    let server_url = match (flavor, canonical(registry)) {
        (Flavor::Docker, "docker.io") => DOCKER_HUB_KEY,
        (Flavor::Containers, "docker.io") => "docker.io",
        _ => registry,
    };
    let program = format!("docker-credential-{name}");
    let credential = helpers.get(&program, server_url)?;
    Ok(credential.map(|credential| Found {
        credential,
        from: format!("{program} (`{field}` in {shown})"),
        note: None,
    }))
}

/// The `auths` entry for `registry`: an exact key first, then the first
/// legacy key (in key order) that names the same host.
fn from_auths(config: &ConfigFile, shown: &str, registry: &str) -> Result<Option<Found>, String> {
    let Some(auths) = &config.auths else {
        return Ok(None);
    };
    let wanted = canonical(registry);
    let entry = exact_keys(registry)
        .into_iter()
        .find_map(|key| auths.get_key_value(key))
        .or_else(|| auths.iter().find(|(key, _)| key_host(key) == wanted));
    let Some((key, entry)) = entry else {
        return Ok(None);
    };
    Ok(
        entry_credential(entry, key, shown)?.map(|credential| Found {
            credential,
            from: shown.to_owned(),
            note: None,
        }),
    )
}

/// The credential in one `auths` entry. An identity token wins over a
/// password (`docker login` stores both, with an empty password, and
/// oras-go and docker then use the token); `auth` wins over
/// `username`/`password` (docker/cli `LoadFromReader`).
fn entry_credential(
    entry: &AuthEntry,
    key: &str,
    shown: &str,
) -> Result<Option<Credential>, String> {
    if let Some(token) = entry.identitytoken.as_ref().filter(|t| !t.is_empty()) {
        return Ok(Some(Credential::IdentityToken(token.clone())));
    }
    let (username, secret) = match entry.auth.as_deref().filter(|a| !a.is_empty()) {
        Some(auth) => decode_auth(auth).ok_or_else(|| {
            format!(
                "the `auth` of `{}` in `{shown}` is not base64 of `username:password`",
                key.escape_debug()
            )
        })?,
        None => (
            entry.username.clone().unwrap_or_default(),
            entry.password.clone().unwrap_or_default(),
        ),
    };
    match (username.is_empty(), secret.is_empty()) {
        // `{}`: what docker leaves in `auths` when a helper holds the secret.
        (true, true) => Ok(None),
        (true, false) => Err(format!(
            "`{}` in `{shown}` has a password but no username",
            key.escape_debug()
        )),
        (false, _) => Ok(Some(Credential::Basic { username, secret })),
    }
}

/// `base64(username:password)` split; padding optional, NULs trailing the
/// password dropped (docker/cli `decodeAuth`).
fn decode_auth(auth: &str) -> Option<(String, String)> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let bytes = LENIENT.decode(auth.trim()).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (username, password) = text.split_once(':')?;
    if username.is_empty() {
        return None;
    }
    Some((username.to_owned(), password.trim_matches('\0').to_owned()))
}

// ------------------------------------------------------------------ helpers

/// Where helpers are found and how they are bounded.
struct Helpers<'a> {
    /// `PATH`, as the environment has it.
    path: Option<String>,
    limits: &'a HelperLimits,
}

/// What a helper answers (docker-credential-helpers `Credentials`); Go
/// matches field names case-insensitively, so lowercase is accepted too.
#[derive(Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username", alias = "username")]
    username: Option<String>,
    #[serde(rename = "Secret", alias = "secret")]
    secret: Option<String>,
}

/// A helper's name, as docker appends it to `docker-credential-`: nothing
/// that could make it a path.
fn is_helper_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

impl Helpers<'_> {
    /// `program get` for `server_url`: `None` if the helper is not
    /// installed or has nothing for the server.
    fn get(&self, program: &str, server_url: &str) -> Result<Option<Credential>, String> {
        let Some(executable) = self.find(program) else {
            tracing::warn!(
                helper = program,
                "a registry credential helper is configured but not on PATH; going anonymous"
            );
            return Ok(None);
        };
        let run = run_bounded(&executable, program, server_url, self.limits)?;
        if !run.status.success() {
            if String::from_utf8_lossy(&run.stdout).trim() == NOT_FOUND_MESSAGE {
                return Ok(None);
            }
            return Err(format!(
                "`{program} get` failed ({}){}",
                run.status,
                quote_error(&run.stdout, &run.stderr)
            ));
        }
        // The answer holds the secret: on any failure, say only its size.
        let answer: HelperAnswer = serde_json::from_slice(&run.stdout).map_err(|_| {
            format!(
                "`{program} get` answered {} bytes that are not its JSON \
                 {{\"Username\", \"Secret\"}}",
                run.stdout.len()
            )
        })?;
        let username = answer.username.unwrap_or_default();
        let secret = answer.secret.unwrap_or_default();
        if secret.is_empty() {
            return Ok(None);
        }
        Ok(Some(if username == TOKEN_USERNAME {
            Credential::IdentityToken(secret)
        } else {
            Credential::Basic { username, secret }
        }))
    }

    /// `program` in an absolute `PATH` directory, as a regular executable
    /// file. Relative entries (the empty one is the current directory) are
    /// skipped, as Go's `exec.LookPath` refuses them.
    fn find(&self, program: &str) -> Option<PathBuf> {
        let path = self.path.as_deref()?;
        std::env::split_paths(path)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(program))
            .find(|candidate| is_executable(candidate))
    }
}

/// Whether `path` is a file this process could execute.
fn is_executable(path: &Path) -> bool {
    let Ok(metadata) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        metadata.is_file() && metadata.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        metadata.is_file()
    }
}

/// What a bounded run of a helper produced.
struct Run {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Which of the helper's outputs a reader thread read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// Run `executable get` with `input` on stdin (then closed), its outputs
/// captured up to the limit, killed at the deadline. Readers are threads
/// (std has no select): each sends its stream when it ends; one left
/// blocked by a grandchild that keeps a pipe open ends with that process.
fn run_bounded(
    executable: &Path,
    program: &str,
    input: &str,
    limits: &HelperLimits,
) -> Result<Run, String> {
    let deadline = Instant::now() + limits.timeout;
    let mut child = Command::new(executable)
        .arg("get")
        // The environment's registry password is for one registry; a
        // helper asked about another has no business with it.
        .env_remove("TOOLCAGE_REGISTRY_PASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run `{program}` ({}): {error}", executable.display()))?;

    if let Some(mut stdin) = child.stdin.take() {
        // A helper may exit without reading: a broken pipe is its answer
        // to come, not an error. The drop closes stdin, ending its input.
        match stdin.write_all(input.as_bytes()) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::BrokenPipe => {}
            Err(error) => {
                stop(&mut child);
                return Err(format!("cannot write to `{program}`: {error}"));
            }
        }
    }

    let (sender, receiver) = mpsc::channel();
    let cap = limits.max_output;
    let readers = [
        (
            Stream::Stdout,
            child
                .stdout
                .take()
                .map(|pipe| Box::new(pipe) as Box<dyn Read + Send>),
        ),
        (
            Stream::Stderr,
            child
                .stderr
                .take()
                .map(|pipe| Box::new(pipe) as Box<dyn Read + Send>),
        ),
    ];
    for (stream, pipe) in readers {
        let Some(pipe) = pipe else { continue };
        let sender = sender.clone();
        let spawned = thread::Builder::new()
            .name("credential-helper-output".into())
            .spawn(move || {
                let read = read_capped(pipe, cap, stream == Stream::Stderr);
                let _ = sender.send((stream, read));
            });
        if let Err(error) = spawned {
            stop(&mut child);
            return Err(format!("cannot read the output of `{program}`: {error}"));
        }
    }
    drop(sender);

    let timed_out = |child: &mut Child| {
        stop(child);
        format!(
            "`{program} get` did not answer within {:?}; it was stopped",
            limits.timeout
        )
    };
    let mut stdout = None;
    let mut stderr = None;
    while stdout.is_none() || stderr.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let (stream, read) = match receiver.recv_timeout(left) {
            Ok(message) => message,
            Err(mpsc::RecvTimeoutError::Timeout) => return Err(timed_out(&mut child)),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(error) => {
                stop(&mut child);
                return Err(format!("cannot read the output of `{program}`: {error}"));
            }
        };
        if stream == Stream::Stdout && bytes.len() > cap {
            stop(&mut child);
            return Err(format!(
                "`{program} get` printed more than {} KiB; no credential is that long",
                cap / 1024
            ));
        }
        match stream {
            Stream::Stdout => stdout = Some(bytes),
            Stream::Stderr => stderr = Some(bytes),
        }
    }
    // Both pipes are closed: the helper has exited or is about to.
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => return Err(timed_out(&mut child)),
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(error) => {
                stop(&mut child);
                return Err(format!("cannot wait for `{program}`: {error}"));
            }
        }
    };
    Ok(Run {
        status,
        stdout: stdout.unwrap_or_default(),
        stderr: stderr.unwrap_or_default(),
    })
}

/// Up to `cap + 1` bytes of `pipe` (one more than allowed shows an
/// overflow); with `drain`, the rest is read and dropped, so a chatty
/// stderr cannot block the helper before it answers.
fn read_capped(mut pipe: impl Read, cap: usize, drain: bool) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    (&mut pipe).take(cap as u64 + 1).read_to_end(&mut bytes)?;
    if drain && bytes.len() > cap {
        bytes.truncate(cap);
        io::copy(&mut pipe, &mut io::sink())?;
    }
    Ok(bytes)
}

/// Kill and reap `child`; it may have exited already.
fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `: <first line>` of what a failing helper said: docker's helpers print
/// their error on stdout, others on stderr. A line that looks like JSON is
/// not quoted (it could be an answer, secret included, from a helper that
/// then failed); the line is cut and its control characters escaped.
fn quote_error(stdout: &[u8], stderr: &[u8]) -> String {
    let first_line = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .map(str::to_owned)
    };
    let line = first_line(stdout)
        .filter(|line| !line.starts_with('{'))
        .or_else(|| first_line(stderr).filter(|line| !line.starts_with('{')));
    let Some(line) = line else {
        return String::new();
    };
    let mut quoted = String::new();
    for c in line.chars().take(MAX_QUOTED) {
        if c.is_control() {
            quoted.extend(c.escape_default());
        } else {
            quoted.push(c);
        }
    }
    if line.chars().count() > MAX_QUOTED {
        quoted.push('…');
    }
    format!(": {quoted}")
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Writing an executable and running one are kept apart across the
    /// test threads: a file still open for writing in one thread is
    /// inherited by a child another thread forks, and executing it then
    /// fails with "text file busy".
    static EXEC: Mutex<()> = Mutex::new(());

    /// A secret that every test checks never shows.
    const SECRET: &str = "hunter2-Secret-Value";

    /// One test's world: a temp dir holding `home/` and `bin/` (the only
    /// `PATH` entry), and the variables the lookup sees.
    struct World {
        dir: PathBuf,
        vars: HashMap<String, String>,
        limits: HelperLimits,
    }

    impl World {
        fn new() -> World {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "toolcage-credentials-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("home")).expect("temp home");
            std::fs::create_dir_all(dir.join("bin")).expect("temp bin");
            let mut vars = HashMap::new();
            vars.insert("PATH".to_owned(), dir.join("bin").display().to_string());
            World {
                dir,
                vars,
                limits: HelperLimits {
                    timeout: Duration::from_secs(10),
                    max_output: 64 * 1024,
                },
            }
        }

        fn set(&mut self, name: &str, value: impl Into<String>) -> &mut World {
            self.vars.insert(name.to_owned(), value.into());
            self
        }

        /// Write `text` at `relative` (under the temp dir), mode 0600.
        fn file(&self, relative: &str, text: &str) -> PathBuf {
            let path = self.dir.join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("parent dir");
            }
            std::fs::write(&path, text).expect("write file");
            set_mode(&path, 0o600);
            path
        }

        fn docker_config(&self, json: &str) -> PathBuf {
            self.file("home/.docker/config.json", json)
        }

        fn containers_auth(&self, json: &str) -> PathBuf {
            self.file("home/.config/containers/auth.json", json)
        }

        /// A helper `docker-credential-<name>` running `body` under sh.
        fn helper(&self, name: &str, body: &str) {
            let _exec = EXEC.lock().unwrap_or_else(|e| e.into_inner());
            let path = self
                .dir
                .join("bin")
                .join(format!("docker-credential-{name}"));
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write helper");
            set_mode(&path, 0o755);
        }

        fn lookup(&self, registry: &str) -> Result<Option<Found>, String> {
            let _exec = EXEC.lock().unwrap_or_else(|e| e.into_inner());
            let vars = self.vars.clone();
            let home = self.dir.join("home");
            lookup_in(
                &move |name| vars.get(name).cloned(),
                Some(&home),
                registry,
                &self.limits,
            )
        }

        /// The lookup's credential (and where it came from), which must be
        /// there; its Debug must not show the secret.
        fn found(&self, registry: &str) -> (Credential, String) {
            let found = self
                .lookup(registry)
                .expect("lookup succeeds")
                .expect("a credential is found");
            assert_no_secret(&format!("{found:?}"));
            (found.credential, found.from)
        }

        /// The lookup's error, which must not show the secret.
        fn error(&self, registry: &str) -> String {
            let error = self.lookup(registry).expect_err("lookup fails");
            assert_no_secret(&error);
            error
        }
    }

    impl Drop for World {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn set_mode(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    fn assert_no_secret(text: &str) {
        assert!(!text.contains(SECRET), "the secret shows in: {text}");
        assert!(
            !text.contains(&b64(SECRET)),
            "the encoded secret shows in: {text}"
        );
    }

    fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    fn basic(username: &str) -> Credential {
        Credential::Basic {
            username: username.into(),
            secret: SECRET.into(),
        }
    }

    /// A config with one `auths` entry `key` holding `user:SECRET`.
    fn auths_with(key: &str, user: &str) -> String {
        format!(
            r#"{{"auths": {{"{key}": {{"auth": "{}"}}}}}}"#,
            b64(&format!("{user}:{SECRET}"))
        )
    }

    /// A helper body answering `Username` with the server URL it was given
    /// (so tests see what it was asked) and the secret.
    const ECHO_HELPER: &str = r#"[ "$1" = get ] || exit 3
url=$(cat)
printf '{"ServerURL":"%s","Username":"%s","Secret":"hunter2-Secret-Value"}' "$url" "$url""#;

    // ------------------------------------------------------- variables

    #[test]
    fn variables_come_first_and_only_for_their_host() {
        let mut world = World::new();
        world.docker_config(&auths_with("ghcr.io", "from-file"));
        world
            .set("TOOLCAGE_REGISTRY_USERNAME", "from-env")
            .set("TOOLCAGE_REGISTRY_PASSWORD", SECRET)
            .set("TOOLCAGE_REGISTRY_HOST", "GHCR.io");
        assert_eq!(
            world.found("ghcr.io"),
            (basic("from-env"), ENV_SOURCE.into())
        );
        // Another registry never gets them: the file's entry, or nothing.
        world.docker_config(&auths_with("quay.io", "from-file"));
        assert_eq!(world.found("quay.io").0, basic("from-file"));
        assert_eq!(world.lookup("registry.example:5000"), Ok(None));
        assert_eq!(world.lookup("ghcr.io:443"), Ok(None));
    }

    #[test]
    fn variables_for_docker_hub_cover_its_aliases() {
        let mut world = World::new();
        world
            .set("TOOLCAGE_REGISTRY_USERNAME", "me")
            .set("TOOLCAGE_REGISTRY_PASSWORD", SECRET)
            .set("TOOLCAGE_REGISTRY_HOST", "docker.io");
        assert_eq!(world.found("registry-1.docker.io").0, basic("me"));
        assert_eq!(world.found("index.docker.io").0, basic("me"));
    }

    #[test]
    fn password_file_is_read_without_its_newline() {
        let mut world = World::new();
        let file = world.file("secret", &format!("{SECRET}\r\n"));
        world
            .set("TOOLCAGE_REGISTRY_USERNAME", "me")
            .set(
                "TOOLCAGE_REGISTRY_PASSWORD_FILE",
                file.display().to_string(),
            )
            .set("TOOLCAGE_REGISTRY_HOST", "ghcr.io");
        assert_eq!(world.found("ghcr.io").0, basic("me"));

        world.set(
            "TOOLCAGE_REGISTRY_PASSWORD_FILE",
            world.dir.join("absent").display().to_string(),
        );
        assert!(world.error("ghcr.io").contains("does not exist"));
        let empty = world.file("empty", "\n");
        world.set(
            "TOOLCAGE_REGISTRY_PASSWORD_FILE",
            empty.display().to_string(),
        );
        assert!(world.error("ghcr.io").contains("is empty"));
    }

    #[test]
    fn half_set_variables_are_errors_naming_the_missing_one() {
        let check = |vars: &[(&str, &str)], names: &str| {
            let mut world = World::new();
            for (name, value) in vars {
                world.set(name, *value);
            }
            let error = world.error("ghcr.io");
            assert!(error.starts_with(names), "{error}");
        };
        let host = ("TOOLCAGE_REGISTRY_HOST", "ghcr.io");
        let user = ("TOOLCAGE_REGISTRY_USERNAME", "me");
        let password = ("TOOLCAGE_REGISTRY_PASSWORD", SECRET);
        check(&[user, host], "TOOLCAGE_REGISTRY_PASSWORD ");
        check(&[password, host], "TOOLCAGE_REGISTRY_USERNAME ");
        check(&[user, password], "TOOLCAGE_REGISTRY_HOST ");
        check(&[host], "TOOLCAGE_REGISTRY_HOST ");
        check(
            &[
                user,
                password,
                ("TOOLCAGE_REGISTRY_PASSWORD_FILE", "/x"),
                host,
            ],
            "both TOOLCAGE_REGISTRY_PASSWORD and TOOLCAGE_REGISTRY_PASSWORD_FILE",
        );
        check(
            &[
                user,
                password,
                ("TOOLCAGE_REGISTRY_HOST", "https://ghcr.io"),
            ],
            "TOOLCAGE_REGISTRY_HOST `https://ghcr.io` is not a registry host",
        );
        // Set for another registry, still checked.
        check(
            &[user, ("TOOLCAGE_REGISTRY_HOST", "quay.io")],
            "TOOLCAGE_REGISTRY_PASSWORD ",
        );
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let mut world = World::new();
        world
            .set("TOOLCAGE_REGISTRY_USERNAME", "")
            .set("TOOLCAGE_REGISTRY_PASSWORD", "")
            .set("TOOLCAGE_REGISTRY_HOST", "");
        assert_eq!(world.lookup("ghcr.io"), Ok(None));
    }

    // ----------------------------------------------------------- auths

    #[test]
    fn auths_entries_by_auth_and_by_username_and_password() {
        let world = World::new();
        let path = world.docker_config(&format!(
            r#"{{"auths": {{
                "ghcr.io": {{"auth": "{}"}},
                "quay.io": {{"username": "bob", "password": "{SECRET}"}},
                "localhost:5000": {{"auth": "{}", "username": "ignored", "password": "ignored"}}
            }}, "psFormat": "table"}}"#,
            b64(&format!("alice:{SECRET}")),
            b64(&format!("carol:{SECRET}\0\0")),
        ));
        let from = path.display().to_string();
        assert_eq!(world.found("ghcr.io"), (basic("alice"), from));
        assert_eq!(world.found("quay.io").0, basic("bob"));
        assert_eq!(world.found("localhost:5000").0, basic("carol"));
        assert_eq!(world.lookup("localhost"), Ok(None));
        assert_eq!(world.lookup("localhost:5001"), Ok(None));
    }

    #[test]
    fn legacy_keys_match_by_their_host_only() {
        let world = World::new();
        world.docker_config(&format!(
            r#"{{"auths": {{
                "https://old.example/v1/": {{"auth": "{a}"}},
                "http://older.example:5000/v2/": {{"auth": "{a}"}},
                "pathy.example/v2/": {{"auth": "{a}"}},
                "https://evil.example/ghcr.io": {{"auth": "{a}"}},
                "ghcr.io.evil.example": {{"auth": "{a}"}},
                "https://user@quay.io/": {{"auth": "{a}"}}
            }}}}"#,
            a = b64(&format!("legacy:{SECRET}"))
        ));
        assert_eq!(world.found("old.example").0, basic("legacy"));
        assert_eq!(world.found("OLDER.example:5000").0, basic("legacy"));
        assert_eq!(world.found("pathy.example").0, basic("legacy"));
        assert_eq!(world.lookup("older.example"), Ok(None));
        assert_eq!(world.lookup("ghcr.io"), Ok(None));
        assert_eq!(world.lookup("quay.io"), Ok(None));
    }

    #[test]
    fn an_exact_key_beats_a_legacy_one() {
        let world = World::new();
        world.docker_config(&format!(
            r#"{{"auths": {{"https://ghcr.io/v2/": {{"auth": "{}"}}, "ghcr.io": {{"auth": "{}"}}}}}}"#,
            b64(&format!("legacy:{SECRET}")),
            b64(&format!("exact:{SECRET}"))
        ));
        assert_eq!(world.found("ghcr.io").0, basic("exact"));
    }

    #[test]
    fn docker_hub_names_share_its_entries() {
        for key in [
            DOCKER_HUB_KEY,
            "docker.io",
            "index.docker.io",
            "https://registry-1.docker.io/v2/",
        ] {
            let world = World::new();
            world.docker_config(&auths_with(key, "hub"));
            for registry in ["docker.io", "index.docker.io", "registry-1.docker.io"] {
                assert_eq!(
                    world.found(registry).0,
                    basic("hub"),
                    "{key} for {registry}"
                );
            }
            assert_eq!(world.lookup("ghcr.io"), Ok(None));
        }
    }

    #[test]
    fn an_identity_token_is_its_own_kind() {
        let world = World::new();
        world.docker_config(&format!(
            r#"{{"auths": {{"myregistry.azurecr.io": {{"auth": "{}", "identitytoken": "{SECRET}"}}}}}}"#,
            b64("00000000-0000-0000-0000-000000000000:")
        ));
        assert_eq!(
            world.found("myregistry.azurecr.io").0,
            Credential::IdentityToken(SECRET.into())
        );
    }

    #[test]
    fn an_empty_entry_means_nothing_and_a_broken_one_is_an_error() {
        let world = World::new();
        let path = world.docker_config(&format!(
            r#"{{"auths": {{
                "empty.example": {{}},
                "nulls.example": {{"auth": null, "identitytoken": null}},
                "nocolon.example": {{"auth": "{}"}},
                "notbase64.example": {{"auth": "{SECRET}!"}},
                "nouser.example": {{"password": "{SECRET}"}}
            }}}}"#,
            b64(SECRET)
        ));
        assert_eq!(world.lookup("empty.example"), Ok(None));
        assert_eq!(world.lookup("nulls.example"), Ok(None));
        let error = world.error("nocolon.example");
        assert!(
            error.contains("`nocolon.example`") && error.contains(&path.display().to_string()),
            "{error}"
        );
        world.error("notbase64.example");
        assert!(world.error("nouser.example").contains("no username"));
        // A broken entry for another registry does not block this one.
        assert_eq!(world.lookup("ghcr.io"), Ok(None));
    }

    #[test]
    fn docker_auth_config_comes_before_the_config_file() {
        let mut world = World::new();
        world.docker_config(&auths_with("ghcr.io", "from-file"));
        world.set("DOCKER_AUTH_CONFIG", auths_with("ghcr.io", "from-env"));
        assert_eq!(
            world.found("ghcr.io"),
            (basic("from-env"), "DOCKER_AUTH_CONFIG".into())
        );
        world.set("DOCKER_AUTH_CONFIG", "{\"auths\": ");
        assert!(
            world
                .error("ghcr.io")
                .starts_with("`DOCKER_AUTH_CONFIG` is not valid JSON")
        );
    }

    #[test]
    fn docker_config_dir_replaces_the_home_one() {
        let mut world = World::new();
        world.docker_config(&auths_with("ghcr.io", "home"));
        let elsewhere = world.file("elsewhere/config.json", &auths_with("ghcr.io", "elsewhere"));
        world.set(
            "DOCKER_CONFIG",
            world.dir.join("elsewhere").display().to_string(),
        );
        assert_eq!(
            world.found("ghcr.io"),
            (basic("elsewhere"), elsewhere.display().to_string())
        );
    }

    // ------------------------------------------------- containers files

    #[test]
    fn containers_auth_files_come_before_docker_in_their_order() {
        let mut world = World::new();
        world.docker_config(&auths_with("ghcr.io", "docker"));
        assert_eq!(world.found("ghcr.io").0, basic("docker"));
        world.containers_auth(&auths_with("ghcr.io", "config-home"));
        assert_eq!(world.found("ghcr.io").0, basic("config-home"));
        world.file(
            "run/containers/auth.json",
            &auths_with("ghcr.io", "runtime"),
        );
        world.set(
            "XDG_RUNTIME_DIR",
            world.dir.join("run").display().to_string(),
        );
        assert_eq!(world.found("ghcr.io").0, basic("runtime"));
        // An explicit file is the only containers file; docker's still follows.
        let explicit = world.file("explicit.json", &auths_with("quay.io", "explicit"));
        world.set("REGISTRY_AUTH_FILE", explicit.display().to_string());
        assert_eq!(world.found("quay.io").0, basic("explicit"));
        assert_eq!(world.found("ghcr.io").0, basic("docker"));
        // One that does not exist means nothing.
        world.set(
            "REGISTRY_AUTH_FILE",
            world.dir.join("absent.json").display().to_string(),
        );
        assert_eq!(world.found("ghcr.io").0, basic("docker"));
    }

    #[test]
    fn a_file_readable_by_others_is_noted_not_refused() {
        let world = World::new();
        let path = world.docker_config(&auths_with("ghcr.io", "me"));
        let quiet = world.lookup("ghcr.io").expect("lookup").expect("found");
        assert_eq!(quiet.note, None);
        set_mode(&path, 0o644);
        let noted = world.lookup("ghcr.io").expect("lookup").expect("found");
        assert_eq!(noted.credential, basic("me"));
        let note = noted.note.expect("a note");
        assert!(
            note.contains("chmod 600") && note.contains(&path.display().to_string()),
            "{note}"
        );
        assert_no_secret(&note);
    }

    // -------------------------------------------------------- malformed

    #[test]
    fn malformed_files_are_errors_with_a_place_and_no_content() {
        let cases = [
            (
                "{\"auths\": {\"ghcr.io\": {\"auth\": \"x\",}}}",
                "is not valid JSON: a syntax error at line 1, column ",
            ),
            (
                "{\"auths\": {\"ghcr.io\":",
                "is not valid JSON: it ends early, at line 1",
            ),
            (
                "{\n  \"auths\": {\"ghcr.io\": {\"auth\": [\"hunter2-Secret-Value\"]}}}",
                "has a value of the wrong type at line 2, column ",
            ),
            (
                "{\"auths\": \"hunter2-Secret-Value\"}",
                "has a value of the wrong type at line 1",
            ),
            ("{\"credsStore\": 7}", "has a value of the wrong type"),
            ("[]", "has a value of the wrong type"),
        ];
        for (text, expected) in cases {
            let world = World::new();
            let path = world.containers_auth(text);
            let error = world.error("ghcr.io");
            assert!(
                error.starts_with(&format!("`{}` ", path.display())),
                "{error}"
            );
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn empty_and_oversized_files() {
        let world = World::new();
        world.docker_config("  \n");
        assert_eq!(world.lookup("ghcr.io"), Ok(None));
        let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(MAX_FILE as usize));
        world.docker_config(&big);
        assert!(world.error("ghcr.io").contains("larger than 1 MiB"));
    }

    #[test]
    fn an_unreadable_file_is_an_error() {
        let world = World::new();
        std::fs::create_dir_all(world.dir.join("home/.docker/config.json")).expect("dir");
        assert!(world.error("ghcr.io").starts_with("cannot read `"));
    }

    #[test]
    fn a_registry_must_be_a_host() {
        let world = World::new();
        for registry in ["", "https://ghcr.io", "ghcr.io/org", "ghcr.io\nx", "a b"] {
            assert!(
                world.error(registry).contains("is not a registry host"),
                "{registry:?}"
            );
        }
        assert_eq!(world.lookup("[::1]:5000"), Ok(None));
    }

    // ---------------------------------------------------------- helpers

    #[test]
    fn cred_helpers_beat_auths_and_get_the_host() {
        let world = World::new();
        world.helper("echo", ECHO_HELPER);
        let path = world.docker_config(&format!(
            r#"{{"auths": {{"ghcr.io": {{"auth": "{}"}}}}, "credHelpers": {{"ghcr.io": "echo"}}}}"#,
            b64(&format!("file:{SECRET}"))
        ));
        let (credential, from) = world.found("ghcr.io");
        assert_eq!(credential, basic("ghcr.io"));
        assert_eq!(
            from,
            format!(
                "docker-credential-echo (`credHelpers` in {})",
                path.display()
            )
        );
    }

    #[test]
    fn creds_store_beats_auths_and_cred_helpers_beat_it() {
        let world = World::new();
        world.helper(
            "store",
            &ECHO_HELPER.replace("\"$url\" \"$url\"", "\"$url\" store"),
        );
        world.helper("special", ECHO_HELPER);
        world.docker_config(&format!(
            r#"{{"auths": {{"ghcr.io": {{"auth": "{a}"}}, "quay.io": {{"auth": "{a}"}}}},
                "credsStore": "store", "credHelpers": {{"quay.io": "special", "gcr.io": ""}}}}"#,
            a = b64(&format!("file:{SECRET}"))
        ));
        assert_eq!(world.found("ghcr.io").0, basic("store"));
        assert_eq!(world.found("quay.io").0, basic("quay.io"));
        // An empty credHelpers entry defers to credsStore, as in docker.
        assert_eq!(world.found("gcr.io").0, basic("store"));
    }

    #[test]
    fn docker_hub_is_asked_as_each_tool_asks() {
        let world = World::new();
        world.helper("echo", ECHO_HELPER);
        world.docker_config(r#"{"credsStore": "echo"}"#);
        assert_eq!(world.found("registry-1.docker.io").0, basic(DOCKER_HUB_KEY));
        world.containers_auth(r#"{"credHelpers": {"docker.io": "echo"}}"#);
        assert_eq!(world.found("index.docker.io").0, basic("docker.io"));
    }

    #[test]
    fn containers_files_ignore_creds_store() {
        let world = World::new();
        world.helper("echo", ECHO_HELPER);
        world.containers_auth(&format!(
            r#"{{"credsStore": "echo", "auths": {{"ghcr.io": {{"auth": "{}"}}}}}}"#,
            b64(&format!("file:{SECRET}"))
        ));
        assert_eq!(world.found("ghcr.io").0, basic("file"));
    }

    #[test]
    fn a_token_username_means_an_identity_token() {
        let world = World::new();
        world.helper("token", r#"cat >/dev/null; echo '{"ServerURL":"x","Username":"<token>","Secret":"hunter2-Secret-Value"}'"#);
        world.docker_config(r#"{"credHelpers": {"ghcr.io": "token"}}"#);
        assert_eq!(
            world.found("ghcr.io").0,
            Credential::IdentityToken(SECRET.into())
        );
    }

    #[test]
    fn helpers_with_nothing_to_give() {
        let world = World::new();
        world.helper(
            "notfound",
            "cat >/dev/null; echo 'credentials not found in native keychain'; exit 1",
        );
        world.helper(
            "blank",
            r#"echo '{"ServerURL":"ghcr.io","Username":"","Secret":""}'"#,
        );
        world.docker_config(&format!(
            r#"{{"auths": {{"ghcr.io": {{"auth": "{}"}}}},
                "credHelpers": {{"ghcr.io": "notfound", "quay.io": "missing", "gcr.io": "blank"}}}}"#,
            b64(&format!("file:{SECRET}"))
        ));
        // Not found, not installed, empty answer: anonymous, never the
        // file's entry (the helper is the whole answer, as in docker).
        assert_eq!(world.lookup("ghcr.io"), Ok(None));
        assert_eq!(world.lookup("quay.io"), Ok(None));
        assert_eq!(world.lookup("gcr.io"), Ok(None));
    }

    #[test]
    fn failing_helpers_are_errors_naming_them() {
        let world = World::new();
        world.helper("garbage", "echo 'not json hunter2-Secret-Value'");
        world.helper(
            "fails",
            "echo 'error getting credentials: keychain locked' ; echo detail >&2; exit 4",
        );
        world.helper(
            "errjson",
            "echo '{\"Secret\":\"hunter2-Secret-Value\"}'; exit 1",
        );
        world.helper("stderr", "echo 'pass: gpg decryption failed' >&2; exit 1");
        world.helper("huge", "head -c 200000 /dev/zero");
        world.docker_config(
            r#"{"credHelpers": {"a.example": "garbage", "b.example": "fails", "c.example": "errjson",
                "d.example": "stderr", "e.example": "huge", "f.example": "../../bin/sh", "g.example": "x/y"}}"#,
        );
        let error = world.error("a.example");
        assert!(
            error.starts_with("`docker-credential-garbage get` answered 30 bytes that are not"),
            "{error}"
        );
        assert_eq!(
            world.error("b.example"),
            "`docker-credential-fails get` failed (exit status: 4): error getting credentials: keychain locked"
        );
        assert_eq!(
            world.error("c.example"),
            "`docker-credential-errjson get` failed (exit status: 1)"
        );
        assert!(
            world
                .error("d.example")
                .ends_with("(exit status: 1): pass: gpg decryption failed")
        );
        assert!(
            world
                .error("e.example")
                .contains("printed more than 64 KiB")
        );
        for registry in ["f.example", "g.example"] {
            assert!(world.error(registry).contains("a helper is a plain name"));
        }
    }

    #[test]
    fn a_chatty_stderr_is_cut_not_fatal() {
        let world = World::new();
        world.helper(
            "chatty",
            &format!("head -c 200000 /dev/zero >&2\n{ECHO_HELPER}"),
        );
        world.docker_config(r#"{"credsStore": "chatty"}"#);
        assert_eq!(world.found("ghcr.io").0, basic("ghcr.io"));
    }

    #[test]
    fn a_slow_helper_is_stopped() {
        let mut world = World::new();
        world.limits.timeout = Duration::from_millis(300);
        world.helper("slow", "exec sleep 30");
        world.docker_config(r#"{"credsStore": "slow"}"#);
        let started = Instant::now();
        let error = world.error("ghcr.io");
        assert!(error.contains("did not answer within 300ms"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn helpers_are_found_only_in_absolute_path_entries() {
        let mut world = World::new();
        world.helper("echo", ECHO_HELPER);
        world.docker_config(r#"{"credsStore": "echo"}"#);
        world.set(
            "PATH",
            format!("relative/bin::{}", world.dir.join("nothing").display()),
        );
        assert_eq!(world.lookup("ghcr.io"), Ok(None));
        let bin = world.dir.join("bin").display().to_string();
        world.set("PATH", format!("/nonexistent:{bin}"));
        assert_eq!(world.found("ghcr.io").0, basic("ghcr.io"));
    }

    #[test]
    fn a_quoted_error_is_one_short_line_with_controls_escaped() {
        assert_eq!(
            quote_error(b"\n  it's \x1b[31mred\n2nd", b"x"),
            ": it's \\u{1b}[31mred"
        );
        assert_eq!(quote_error(b"", b"from stderr\n"), ": from stderr");
        assert_eq!(quote_error(b"{\"Secret\": \"s\"}", b"{}"), "");
        let long = "é".repeat(MAX_QUOTED + 5);
        let quoted = quote_error(long.as_bytes(), b"");
        assert_eq!(quoted.chars().count(), 2 + MAX_QUOTED + 1);
        assert!(quoted.ends_with("é…"));
    }

    // ------------------------------------------------------ redaction

    #[test]
    fn debug_never_shows_a_secret() {
        assert_eq!(
            format!("{:?}", basic("alice")),
            "Credential { username: \"alice\", secret: <redacted> }"
        );
        assert_eq!(
            format!("{:?}", Credential::IdentityToken(SECRET.into())),
            "Credential { identity_token: <redacted> }"
        );
        let found = Found {
            credential: basic("alice"),
            from: "x".into(),
            note: None,
        };
        assert_no_secret(&format!("{found:?} {found:#?}"));
    }

    #[test]
    fn basic_header_is_base64_of_the_pair() {
        assert_eq!(
            basic_header("aladdin", "opensesame"),
            "Basic YWxhZGRpbjpvcGVuc2VzYW1l"
        );
    }
}
