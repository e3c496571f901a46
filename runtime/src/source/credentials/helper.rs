//! Running the credential helper a file names: `docker-credential-NAME
//! get`, with the server URL on stdin (the bare host;
//! `https://index.docker.io/v1/` for Docker Hub from docker's config,
//! `docker.io` from the containers auth file, as each tool passes it),
//! answering `{"ServerURL","Username","Secret"}`; the `Username` `<token>`
//! marks the secret as an identity token (the docker-credential-helpers
//! protocol).
//!
//! A helper runs only by a plain name found in an absolute `PATH`
//! directory, without `TOOLCAGE_REGISTRY_PASSWORD` in its environment,
//! bounded by [`HelperLimits`]: its output capped, its run killed at the
//! timeout. Its answer is never echoed; of a failure, only the first line
//! of its error text is quoted, cut and escaped.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{Credential, HelperLimits};

/// The `Username` by which a helper marks its secret as an identity token
/// (docker/cli `tokenUsername`).
const TOKEN_USERNAME: &str = "<token>";

/// What a helper prints, exactly, when it has nothing for the server
/// (docker-credential-helpers `errCredentialsNotFoundMessage`).
const NOT_FOUND_MESSAGE: &str = "credentials not found in native keychain";

/// The longest part of a failing helper's error text quoted in a message.
const MAX_QUOTED: usize = 200;

/// Where helpers are found and how they are bounded.
pub(super) struct Helpers<'a> {
    /// `PATH`, as the environment has it.
    pub(super) path: Option<String>,
    pub(super) limits: &'a HelperLimits,
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
pub(super) fn is_helper_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

impl Helpers<'_> {
    /// `program get` for `server_url`: `None` if the helper is not
    /// installed or has nothing for the server.
    pub(super) fn get(
        &self,
        program: &str,
        server_url: &str,
    ) -> Result<Option<Credential>, String> {
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
    use super::super::tests::*;
    use super::*;

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
}
