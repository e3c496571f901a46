//! Steps 2 to 4 of the lookup: the containers `auth.json` files, docker's
//! `config.json` and `DOCKER_AUTH_CONFIG`, each read as its own tool reads
//! it, at most [`MAX_FILE`] bytes of a file. Only `auths`, `credHelpers`
//! and `credsStore` are read; every other field is ignored.
//!
//! Keys match as docker and containers/image match them: the exact host,
//! then legacy keys (`https://host/v1/`, `http://host/v2/`, `host/path`)
//! reduced to their host. Docker Hub's names (`docker.io`,
//! `index.docker.io`, `registry-1.docker.io`) are one registry, whose
//! docker key is `https://index.docker.io/v1/`.
//!
//! In a file, a `credHelpers` entry for the registry wins, then (docker's
//! file only) `credsStore`, then `auths`; a helper named is the whole
//! answer. In an `auths` entry, an `identitytoken` wins over `auth`, which
//! wins over `username` and `password`. Errors name the file and the key,
//! never a value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use super::helper::{Helpers, is_helper_name};
use super::{Credential, DOCKER_HUB_KEY, Found, MAX_FILE, canonical};

/// The containers auth files to read, in containers/image's order
/// (`getAuthFilePaths`): an explicit `REGISTRY_AUTH_FILE` is the only one.
pub(super) fn containers_auth_files(
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
pub(super) struct ConfigFile {
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
pub(super) enum Flavor {
    /// Docker's `config.json`: `credsStore` counts, Hub is
    /// `https://index.docker.io/v1/` towards helpers.
    Docker,
    /// Containers' `auth.json`: no `credsStore`, Hub is `docker.io`.
    Containers,
}

/// `path`'s contents, at most [`MAX_FILE`] bytes; `None` if it does not
/// exist.
pub(super) fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, String> {
    crate::source::capped::read_capped(path, MAX_FILE, "it is not a registry credentials file")
}

/// Steps 2 and 4: the credential the file at `path` has for `registry`,
/// read as `flavor`'s tool reads it; nothing if there is no such file.
pub(super) fn from_file(
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
pub(super) fn parse_config(bytes: &[u8], shown: &str) -> Result<ConfigFile, String> {
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
pub(super) fn from_auths(
    config: &ConfigFile,
    shown: &str,
    registry: &str,
) -> Result<Option<Found>, String> {
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

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use super::*;

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
        assert!(
            world
                .error("ghcr.io")
                .contains("is a folder, not a regular file")
        );
    }

    // ------------------------------------------------- which helper

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
}
