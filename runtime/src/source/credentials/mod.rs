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
//! Layout: this module holds the order and step 1, the variables; `files`
//! reads what steps 2 to 4 find (the files, and `DOCKER_AUTH_CONFIG`, which
//! has their shape) and matches its keys to the registry: the exact host,
//! then legacy keys (`https://host/v1/`, `http://host/v2/`, `host/path`)
//! reduced to their host, Docker Hub's names as one; `helper` runs the
//! `docker-credential-*` helpers they name, bounded.
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

mod files;
mod helper;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;

use files::{Flavor, containers_auth_files, from_auths, from_file, parse_config, read_bounded};
use helper::Helpers;

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

#[cfg(test)]
mod tests {
    //! The world every credentials test runs in, `files`' and `helper`'s
    //! too, and the tests of the lookup order and of step 1.

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
    pub(super) const SECRET: &str = "hunter2-Secret-Value";

    /// One test's world: a temp dir holding `home/` and `bin/` (the only
    /// `PATH` entry), and the variables the lookup sees.
    pub(super) struct World {
        pub(super) dir: PathBuf,
        vars: HashMap<String, String>,
        pub(super) limits: HelperLimits,
    }

    impl World {
        pub(super) fn new() -> World {
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

        pub(super) fn set(&mut self, name: &str, value: impl Into<String>) -> &mut World {
            self.vars.insert(name.to_owned(), value.into());
            self
        }

        /// Write `text` at `relative` (under the temp dir), mode 0600.
        pub(super) fn file(&self, relative: &str, text: &str) -> PathBuf {
            let path = self.dir.join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("parent dir");
            }
            std::fs::write(&path, text).expect("write file");
            set_mode(&path, 0o600);
            path
        }

        pub(super) fn docker_config(&self, json: &str) -> PathBuf {
            self.file("home/.docker/config.json", json)
        }

        pub(super) fn containers_auth(&self, json: &str) -> PathBuf {
            self.file("home/.config/containers/auth.json", json)
        }

        /// A helper `docker-credential-<name>` running `body` under sh.
        pub(super) fn helper(&self, name: &str, body: &str) {
            let _exec = EXEC.lock().unwrap_or_else(|e| e.into_inner());
            let path = self
                .dir
                .join("bin")
                .join(format!("docker-credential-{name}"));
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write helper");
            set_mode(&path, 0o755);
        }

        pub(super) fn lookup(&self, registry: &str) -> Result<Option<Found>, String> {
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
        pub(super) fn found(&self, registry: &str) -> (Credential, String) {
            let found = self
                .lookup(registry)
                .expect("lookup succeeds")
                .expect("a credential is found");
            assert_no_secret(&format!("{found:?}"));
            (found.credential, found.from)
        }

        /// The lookup's error, which must not show the secret.
        pub(super) fn error(&self, registry: &str) -> String {
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

    pub(super) fn set_mode(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    pub(super) fn assert_no_secret(text: &str) {
        assert!(!text.contains(SECRET), "the secret shows in: {text}");
        assert!(
            !text.contains(&b64(SECRET)),
            "the encoded secret shows in: {text}"
        );
    }

    pub(super) fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    pub(super) fn basic(username: &str) -> Credential {
        Credential::Basic {
            username: username.into(),
            secret: SECRET.into(),
        }
    }

    /// A config with one `auths` entry `key` holding `user:SECRET`.
    pub(super) fn auths_with(key: &str, user: &str) -> String {
        format!(
            r#"{{"auths": {{"{key}": {{"auth": "{}"}}}}}}"#,
            b64(&format!("{user}:{SECRET}"))
        )
    }

    /// A helper body answering `Username` with the server URL it was given
    /// (so tests see what it was asked) and the secret.
    pub(super) const ECHO_HELPER: &str = r#"[ "$1" = get ] || exit 3
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

    // ----------------------------------------------------------- places

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
