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
//! model sees in the client works unchanged inside the tool. The sandbox
//! opens a call's roots ([`open`]) the first time its guest asks for its
//! preopens, so a call that never touches a file opens no directory.
//!
//! Invariants:
//! - A grant is opened, on every call that uses it, at the host path
//!   resolved when the config was loaded ([`resolve_hosts`]), and that
//!   open follows no symbolic link at all (`RESOLVE_NO_SYMLINKS`). A tool with write access
//!   to one grant can rename a directory and put a symlink in its place;
//!   if that directory, or one of its parents, is another grant (nested
//!   grants, of one tool or of two), a grant opened by following its path
//!   would next be opened wherever the link points: `/`. Symlinks the
//!   operator's paths go through (`~` on a system whose `/home` is a link)
//!   are followed once, at load, and only where no tool can have put them:
//!   a link inside a read-write grant refuses the grant.
//! - A root narrower than its grant is opened *beneath* the grant
//!   (cap-primitives resolves each component and refuses to leave the
//!   grant through `..` or a symlink), never by its path from `/`.

use std::path::{Path, PathBuf};

/// A directory granted to a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// Absolute, lexically normalised host path; also the path the tool
    /// sees, so paths a model sees in the client work unchanged.
    pub path: PathBuf,
    /// Read-only or read-write.
    pub mode: Mode,
    /// Where `path` led when the config was loaded: the same directory
    /// with every symlink resolved ([`resolve_hosts`]). Calls open this,
    /// following no symlink. `None` (not resolved, or refused): calls open
    /// `path` itself, following no symlink, so a path through a link
    /// fails to open rather than going wherever the link points.
    pub host: Option<PathBuf>,
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
            Ok(meta) if meta.is_dir() => Ok(Root {
                path,
                mode,
                host: None,
            }),
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

/// Resolve where each of `roots` is on the host ([`Root::host`]), refusing
/// (with a warning, and `host` left `None`) a root whose path goes through
/// a symbolic link that a tool could have made: one inside any of
/// `writable`, the read-write grants of every tool. Run whenever a config
/// is loaded or a grant added, over every tool's roots at once: a grant
/// nested in another tool's read-write grant is as exposed as one nested
/// in its own.
pub fn resolve_hosts<'a>(roots: impl IntoIterator<Item = &'a mut Root>, writable: &[&Path]) {
    // Both spellings of each writable grant: its path, and where it leads
    // now (which a tool may already have redirected: then more links are
    // refused, never fewer).
    let writable: Vec<PathBuf> = writable
        .iter()
        .flat_map(|path| [Some(path.to_path_buf()), std::fs::canonicalize(path).ok()])
        .flatten()
        .collect();
    for root in roots {
        match resolve_host(&root.path, &writable) {
            Ok(host) => root.host = Some(host),
            Err(reason) => {
                tracing::warn!(
                    root = %root.path.display(),
                    %reason,
                    "root refused; calls run without it"
                );
                root.host = None;
            }
        }
    }
}

/// Symlinks followed in one path, at most (as Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// `path` with every symlink resolved, one link at a time, refusing a link
/// that sits in a directory inside one of `writable`.
fn resolve_host(path: &Path, writable: &[PathBuf]) -> Result<PathBuf, String> {
    use std::collections::VecDeque;
    use std::path::Component;

    let mut done = PathBuf::from("/");
    let mut todo: VecDeque<std::ffi::OsString> = VecDeque::new();
    let push_front = |todo: &mut VecDeque<std::ffi::OsString>, path: &Path| {
        for component in path.components().rev() {
            match component {
                Component::Normal(name) => todo.push_front(name.to_owned()),
                Component::ParentDir => todo.push_front("..".into()),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    };
    push_front(&mut todo, path);
    let mut links = 0;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            done.pop();
            continue;
        }
        let next = done.join(&name);
        let meta = std::fs::symlink_metadata(&next)
            .map_err(|error| format!("`{}`: {error}", next.display()))?;
        if !meta.file_type().is_symlink() {
            done = next;
            continue;
        }
        if let Some(grant) = writable.iter().find(|grant| done.starts_with(grant)) {
            return Err(format!(
                "it goes through the symbolic link `{}`, inside `{}`, which a tool may write: \
                 a tool may have made it; grant the directory it should lead to by its own path",
                next.display(),
                grant.display()
            ));
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(format!("more than {MAX_LINKS} symbolic links"));
        }
        let target =
            std::fs::read_link(&next).map_err(|error| format!("`{}`: {error}", next.display()))?;
        if target.is_absolute() {
            done = PathBuf::from("/");
        }
        push_front(&mut todo, &target);
    }
    Ok(done)
}

/// One directory a call may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveRoot {
    /// The grant it comes from.
    pub grant: PathBuf,
    /// Where the grant is opened on the host, following no symlink: its
    /// resolved path ([`Root::host`]) or, unresolved, its path.
    pub grant_host: PathBuf,
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
            grant_host: grant.host.clone().unwrap_or_else(|| grant.path.clone()),
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
                grant_host: root.grant_host.clone(),
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

/// Open `root` for a call: the grant at its host path following no
/// symlink ([`open_grant`]), and a root narrower than its grant beneath it
/// (no `..`, no symlink out). The sandbox opens a call's roots when its
/// guest first asks for them (`wasi:filesystem/preopens`), so a call that
/// never touches a file opens none.
///
/// # Errors
///
/// The grant or the root beneath it cannot be opened (gone, replaced by a
/// symlink, not a directory).
pub fn open(root: &EffectiveRoot) -> std::io::Result<std::fs::File> {
    let grant = open_grant(&root.grant_host)?;
    let relative = root.relative();
    if relative.as_os_str().is_empty() {
        Ok(grant)
    } else {
        cap_primitives::fs::open_dir(&grant, relative)
    }
}

/// Open the directory at `path` (absolute), following no symbolic link on
/// the way: one that a tool put where a directory of the path was fails
/// the open (`ELOOP`) instead of leading out.
fn open_grant(path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{CWD, Mode as FileMode, OFlags, ResolveFlags};

    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    match rustix::fs::openat2(
        CWD,
        path,
        flags,
        FileMode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Ok(fd.into()),
        // Kernels before 5.6: one component at a time, none a link.
        Err(rustix::io::Errno::NOSYS) => {
            let mut dir: std::os::fd::OwnedFd = rustix::fs::open("/", flags, FileMode::empty())?;
            for component in path.components().skip(1) {
                dir = rustix::fs::openat(
                    &dir,
                    component.as_os_str(),
                    flags | OFlags::NOFOLLOW,
                    FileMode::empty(),
                )?;
            }
            Ok(dir.into())
        }
        Err(errno) => Err(errno.into()),
    }
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
            host: None,
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
    fn a_grant_resolves_the_operators_links_but_none_inside_a_writable_grant() {
        use std::os::unix::fs::symlink;
        let base = scratch("links");
        let data = base.join("data");
        std::fs::create_dir_all(data.join("x/sub")).expect("mkdir");
        std::fs::create_dir_all(base.join("srv")).expect("mkdir");
        symlink("../data/x", base.join("srv/x")).expect("symlink");
        // A link outside every writable grant, the operator's: followed.
        let writable = [data.join("x")];
        assert_eq!(
            resolve_host(&base.join("srv/x/sub"), &writable),
            Ok(data.join("x/sub"))
        );
        // The same once `data` itself is writable, and a tool replaced
        // `x` with a link out: refused, whichever path leads there.
        std::fs::rename(data.join("x"), data.join("moved")).expect("rename");
        symlink("../../..", data.join("x")).expect("symlink");
        let writable = [data.clone()];
        for path in [data.join("x"), base.join("srv/x"), base.join("srv/x/sub")] {
            let refused = resolve_host(&path, &writable).expect_err("refused");
            assert!(refused.contains("symbolic link"), "{refused}");
            assert!(
                refused.contains(&data.join("x").display().to_string()),
                "{refused}"
            );
        }
        // A loop ends.
        symlink("loop", base.join("loop")).expect("symlink");
        assert!(resolve_host(&base.join("loop"), &[]).is_err());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn resolving_refuses_a_grant_a_tool_redirected_and_calls_open_no_link() {
        use std::os::unix::fs::symlink;
        let base = scratch("nested");
        let outer = base.join("outer");
        std::fs::create_dir_all(outer.join("inner")).expect("mkdir");
        let mut roots = vec![
            Root::new(&outer, Mode::ReadWrite, &base).expect("root"),
            Root::new(&outer.join("inner"), Mode::ReadOnly, &base).expect("root"),
        ];
        resolve_hosts(&mut roots, &[outer.as_path()]);
        assert_eq!(
            roots[1].host.as_deref(),
            Some(outer.join("inner").as_path())
        );
        assert!(open_grant(&outer.join("inner")).is_ok());
        // What a tool with the outer grant can do between two calls.
        std::fs::rename(outer.join("inner"), outer.join("moved")).expect("rename");
        symlink("../..", outer.join("inner")).expect("symlink");
        // The next call's open fails instead of leading out...
        let opened = open_grant(roots[1].host.as_deref().expect("host"));
        assert!(opened.is_err(), "a link must not be followed");
        // ... and so does resolving it again (a reload, a restart).
        resolve_hosts(&mut roots, &[outer.as_path()]);
        assert_eq!(roots[1].host, None);
        assert_eq!(roots[0].host.as_deref(), Some(outer.as_path()));
        let _ = std::fs::remove_dir_all(&base);
    }

    /// A fresh folder of this test process, its path without symlinks.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("toolcage-roots-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::canonicalize(&dir).expect("canonical")
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
