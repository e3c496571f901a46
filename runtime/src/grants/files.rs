//! The files grant: the directories a tool may reach (`roots` in the
//! config, `serve --root` on the command line), and the effective roots of
//! one call.
//!
//! The operator grants directories per tool (the config, `serve --root`). A
//! client that declares the roots capability narrows them: the effective
//! roots of a call are the intersections of each grant with each client
//! root, with the grant's mode. A client root outside every grant grants
//! nothing (and is logged); a client without the capability, or on a
//! revision without roots (2026-07-28), gets the grants as configured.
//!
//! Each effective root is preopened at its own absolute path, so a path the
//! model sees in the client works unchanged inside the tool.
//!
//! Invariant: a root narrower than its grant is opened *beneath* the grant
//! (cap-primitives resolves each component and refuses to leave the grant
//! through `..` or a symlink), never by its path from `/`. A tool with
//! write access to the grant could otherwise swap a directory for a symlink
//! between calls and have the next call's root opened outside.

use std::path::{Path, PathBuf};

use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// A directory granted to a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// Absolute, lexically normalised host path; also the path the tool
    /// sees, so paths a model sees in the client work unchanged.
    pub path: PathBuf,
    /// Read-only or read-write.
    pub mode: Mode,
}

/// Access mode of a granted directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Read files and list directories only.
    ReadOnly,
    /// Also create, write, rename and delete.
    ReadWrite,
}

impl Mode {
    /// `ro` or `rw`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "ro",
            Mode::ReadWrite => "rw",
        }
    }
}

impl Root {
    /// Parse a command-line grant, `PATH`, `PATH:ro` or `PATH:rw` (read-only
    /// when no mode is given), resolving relative paths against `cwd`.
    ///
    /// # Errors
    ///
    /// The path does not exist or is not a directory.
    pub fn parse_flag(text: &str, cwd: &Path) -> Result<Root, String> {
        let (path, mode) = match text.rsplit_once(':') {
            Some((path, "ro")) => (path, Mode::ReadOnly),
            Some((path, "rw")) => (path, Mode::ReadWrite),
            _ => (text, Mode::ReadOnly),
        };
        Root::new(Path::new(path), mode, cwd)
    }

    /// A grant of `path` (`~` expanded, relative to `base`), checked to be an
    /// existing directory.
    ///
    /// # Errors
    ///
    /// The path does not exist or is not a directory.
    pub fn new(path: &Path, mode: Mode, base: &Path) -> Result<Root, String> {
        let expanded = expand_tilde(path);
        let absolute = if expanded.is_absolute() {
            expanded
        } else {
            base.join(expanded)
        };
        let path = normalize(&absolute);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => Ok(Root { path, mode }),
            Ok(_) => Err(format!("root `{}` is not a directory", path.display())),
            Err(error) => Err(format!("root `{}` cannot be used: {error}", path.display())),
        }
    }
}

/// `path` with `.` removed and `..` applied lexically (never above `/`).
/// Symlinks are not resolved: the sandbox, not this function, decides what a
/// path can reach.
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push("/");
    }
    out
}

/// `~` and `~/...` expanded with `$HOME`; other paths unchanged.
pub fn expand_tilde(path: &Path) -> PathBuf {
    let Ok(rest) = path.strip_prefix("~") else {
        return path.to_owned();
    };
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(rest),
        None => path.to_owned(),
    }
}

/// One directory a call may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveRoot {
    /// The grant it comes from.
    pub grant: PathBuf,
    /// The directory itself: the grant, or a directory beneath it. Also the
    /// path the tool sees.
    pub path: PathBuf,
    /// The grant's mode.
    pub mode: Mode,
}

impl EffectiveRoot {
    /// The path of this root relative to its grant (empty for the grant
    /// itself).
    pub fn relative(&self) -> &Path {
        self.path.strip_prefix(&self.grant).unwrap_or(Path::new(""))
    }
}

/// The effective roots of a call: `grants` narrowed first by the caller's
/// policy (`caller`, when it narrows: each directory reached must be under
/// one of its roots, in the narrower mode of the two), then by
/// `client_roots` when the client declared them (`None`: it did not).
/// Each effective root keeps the grant it comes from, which is what it is
/// opened beneath.
pub fn effective_roots(
    grants: &[Root],
    caller: Option<&[Root]>,
    client_roots: Option<&[PathBuf]>,
) -> Vec<EffectiveRoot> {
    let mut roots: Vec<EffectiveRoot> = grants
        .iter()
        .map(|grant| EffectiveRoot {
            grant: grant.path.clone(),
            path: grant.path.clone(),
            mode: grant.mode,
        })
        .collect();
    if let Some(caller) = caller {
        roots = narrow(
            &roots,
            caller.iter().map(|r| (r.path.as_path(), Some(r.mode))),
            false,
        );
    }
    if let Some(client_roots) = client_roots {
        roots = narrow(
            &roots,
            client_roots.iter().map(|p| (p.as_path(), None)),
            true,
        );
    }
    roots
}

/// `roots` narrowed to `by`: for each path of `by` (with the mode it
/// allows at most, if it says), the parts of `roots` it overlaps, the
/// deeper of the two paths. `warn`: log a path of `by` that overlaps none.
fn narrow<'a>(
    roots: &[EffectiveRoot],
    by: impl Iterator<Item = (&'a Path, Option<Mode>)>,
    warn: bool,
) -> Vec<EffectiveRoot> {
    let mut narrowed: Vec<EffectiveRoot> = Vec::new();
    for (limit, limit_mode) in by {
        let mut inside_any = false;
        for root in roots {
            let path = if limit.starts_with(&root.path) {
                limit.to_path_buf()
            } else if root.path.starts_with(limit) {
                root.path.clone()
            } else {
                continue;
            };
            inside_any = true;
            let mode = match limit_mode {
                Some(Mode::ReadOnly) => Mode::ReadOnly,
                Some(Mode::ReadWrite) | None => root.mode,
            };
            let root = EffectiveRoot {
                grant: root.grant.clone(),
                path,
                mode,
            };
            if !narrowed.contains(&root) {
                narrowed.push(root);
            }
        }
        if warn && !inside_any {
            tracing::warn!(
                root = %limit.display(),
                "client root is outside every granted directory; it grants nothing"
            );
        }
    }
    narrowed
}

/// Preopen each of `roots` in the call's WASI context, read-only ones
/// read-only. A root that cannot be opened is left out (and logged): the
/// call runs without it.
pub fn apply(roots: &[EffectiveRoot], wasi: &mut WasiCtxBuilder) {
    for root in roots {
        if let Err(error) = preopen(wasi, root) {
            tracing::warn!(root = %root.path.display(), %error, "cannot open root; the call runs without it");
        }
    }
}

/// Preopen `root` at its own absolute path. A root narrower than its grant
/// is opened beneath the grant (no `..`, no symlink out) and handed to
/// wasmtime as `/proc/self/fd/N`, which names the opened directory itself,
/// so nothing can be swapped between the check and the open.
fn preopen(builder: &mut WasiCtxBuilder, root: &EffectiveRoot) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd as _;

    let guest_path = root
        .path
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("the path is not UTF-8"))?;
    let perms = match root.mode {
        Mode::ReadOnly => FsPerms::ReadOnly,
        Mode::ReadWrite => FsPerms::ReadWrite,
    };
    let relative = root.relative();
    if relative.as_os_str().is_empty() {
        builder.preopened_dir(&root.grant, guest_path, perms)?;
        return Ok(());
    }
    let grant =
        cap_primitives::fs::open_ambient_dir(&root.grant, cap_primitives::ambient_authority())?;
    let dir = cap_primitives::fs::open_dir(&grant, relative)?;
    builder.preopened_dir(
        format!("/proc/self/fd/{}", dir.as_raw_fd()),
        guest_path,
        perms,
    )?;
    // `dir` closes here; wasmtime holds its own descriptor of the directory.
    Ok(())
}

/// The path of a `file://` URI (percent-decoded, lexically normalised), or
/// `None` for other schemes, remote hosts, relative or undecodable paths.
pub fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file:///path` or `file://localhost/path`; other hosts are not ours.
    let path = if rest.starts_with('/') {
        rest
    } else {
        rest.strip_prefix("localhost")?
    };
    let path = path.split(['?', '#']).next()?;
    let decoded = percent_decode(path)?;
    if decoded.contains('\0') || !decoded.starts_with('/') {
        return None;
    }
    Some(normalize(Path::new(&decoded)))
}

fn percent_decode(text: &str) -> Option<String> {
    // A `%` not followed by two hex digits is not an encoded URI.
    let bytes = text.as_bytes();
    let malformed = bytes.iter().enumerate().any(|(i, &b)| {
        b == b'%'
            && !bytes
                .get(i + 1..i + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    });
    if malformed {
        return None;
    }
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(path: &str, mode: Mode) -> Root {
        Root {
            path: PathBuf::from(path),
            mode,
        }
    }

    fn paths(roots: &[EffectiveRoot]) -> Vec<(String, Mode)> {
        roots
            .iter()
            .map(|r| (r.path.display().to_string(), r.mode))
            .collect()
    }

    #[test]
    fn without_client_roots_the_grants_apply() {
        let grants = [
            grant("/srv/a", Mode::ReadWrite),
            grant("/srv/b", Mode::ReadOnly),
        ];
        assert_eq!(
            paths(&effective_roots(&grants, None, None)),
            [
                ("/srv/a".into(), Mode::ReadWrite),
                ("/srv/b".into(), Mode::ReadOnly)
            ]
        );
    }

    #[test]
    fn client_roots_narrow_and_never_widen() {
        let grants = [
            grant("/srv/a", Mode::ReadWrite),
            grant("/srv/b", Mode::ReadOnly),
        ];
        let client = [
            PathBuf::from("/srv/a/project"), // inside a grant: narrows it
            PathBuf::from("/srv"),           // contains both grants: the grants
            PathBuf::from("/etc"),           // outside: nothing
            PathBuf::from("/srv/ab"),        // a sibling with a shared prefix: nothing
        ];
        assert_eq!(
            paths(&effective_roots(&grants, None, Some(&client))),
            [
                ("/srv/a/project".into(), Mode::ReadWrite),
                ("/srv/a".into(), Mode::ReadWrite),
                ("/srv/b".into(), Mode::ReadOnly),
            ]
        );
        assert!(effective_roots(&grants, None, Some(&[])).is_empty());
        let narrowed = &effective_roots(&grants, None, Some(&client[..1]))[0];
        assert_eq!(narrowed.relative(), Path::new("project"));
    }

    #[test]
    fn a_caller_narrows_paths_and_modes_and_the_client_narrows_further() {
        let grants = [
            grant("/srv/a", Mode::ReadWrite),
            grant("/srv/b", Mode::ReadWrite),
        ];
        let caller = [
            grant("/srv/a/shared", Mode::ReadOnly), // deeper and read-only
            grant("/srv", Mode::ReadWrite),         // wider: the grants as they are
            grant("/etc", Mode::ReadWrite),         // outside: nothing
        ];
        let roots = effective_roots(&grants, Some(&caller), None);
        assert_eq!(
            paths(&roots),
            [
                ("/srv/a/shared".into(), Mode::ReadOnly),
                ("/srv/a".into(), Mode::ReadWrite),
                ("/srv/b".into(), Mode::ReadWrite),
            ]
        );
        // Opened beneath the grant it comes from, never as a grant itself.
        assert_eq!(roots[0].grant, PathBuf::from("/srv/a"));
        let only_ro = [grant("/srv/b", Mode::ReadOnly)];
        let client = [PathBuf::from("/srv/b/x"), PathBuf::from("/srv/a")];
        assert_eq!(
            paths(&effective_roots(&grants, Some(&only_ro), Some(&client))),
            [("/srv/b/x".into(), Mode::ReadOnly)],
            "the client cannot reach what the caller may not"
        );
        assert!(effective_roots(&grants, Some(&[]), None).is_empty());
    }

    #[test]
    fn file_uris() {
        assert_eq!(
            file_uri_path("file:///home/me/a%20b"),
            Some(PathBuf::from("/home/me/a b"))
        );
        assert_eq!(
            file_uri_path("file://localhost/x/./y/../z"),
            Some(PathBuf::from("/x/z"))
        );
        assert_eq!(
            file_uri_path("file:///a/../../etc"),
            Some(PathBuf::from("/etc"))
        );
        assert_eq!(file_uri_path("https://example.com/"), None);
        assert_eq!(file_uri_path("file://server/share"), None);
        assert_eq!(file_uri_path("file:///bad%zz"), None);
        assert_eq!(file_uri_path("file:///nul%00"), None);
    }
}
