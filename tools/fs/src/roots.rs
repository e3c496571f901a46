//! The allowed roots, and turning a path the model gave into a checked one.
//!
//! Each root the operator granted is a WASI preopened directory whose guest
//! path is its own absolute host path, so absolute paths from the model work
//! unchanged with `std::fs`. The sandbox is what enforces the boundary (`..`,
//! symlinks and absolute paths cannot leave the preopens); the checks here
//! exist to give the model an error it can act on before the sandbox gives a
//! bare "permission denied".

use std::path::{Path, PathBuf};

use crate::paths::{depth, normalize, within};

/// The longest path accepted, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// One allowed directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// Its absolute path, as the tool sees it.
    pub path: PathBuf,
    /// Whether files under it may be created, changed or removed.
    pub writable: bool,
}

impl Root {
    /// The root as listed to the model: its path, marked when read-only.
    pub fn label(&self) -> String {
        if self.writable {
            self.path.display().to_string()
        } else {
            format!("{} (read-only)", self.path.display())
        }
    }
}

/// The directories this call may reach, in the order the host gave them.
pub fn roots() -> Vec<Root> {
    let mut roots: Vec<Root> = Vec::new();
    for (path, writable) in sources::raw_roots() {
        let path = normalize(Path::new(&path));
        // The same directory granted twice: keep the most permissive grant.
        if let Some(seen) = roots.iter_mut().find(|r| r.path == path) {
            seen.writable |= writable;
        } else {
            roots.push(Root { path, writable });
        }
    }
    roots
}

#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod sources {
    /// The WASI preopens (asked for once a call, see `preopens`): each
    /// directory and whether the host lets the component change what is in
    /// it.
    pub fn raw_roots() -> Vec<(String, bool)> {
        use wasi::filesystem::types::DescriptorFlags;
        crate::preopens::with(|preopens| {
            preopens
                .iter()
                .map(|(descriptor, path)| {
                    let writable = descriptor.get_flags().is_ok_and(|flags| {
                        flags.intersects(DescriptorFlags::MUTATE_DIRECTORY | DescriptorFlags::WRITE)
                    });
                    (path.clone(), writable)
                })
                .collect()
        })
    }
}

#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
mod sources {
    use std::cell::RefCell;

    thread_local! {
        static ROOTS: RefCell<Vec<(String, bool)>> = const { RefCell::new(Vec::new()) };
    }

    pub fn raw_roots() -> Vec<(String, bool)> {
        ROOTS.with(|roots| roots.borrow().clone())
    }

    pub fn set(roots: &[(&str, bool)]) {
        ROOTS.with(|cell| {
            *cell.borrow_mut() = roots
                .iter()
                .map(|(path, writable)| ((*path).to_owned(), *writable))
                .collect();
        });
    }
}

/// Native builds only (unit tests, benchmarks of the logic): set the roots
/// this thread's calls see, as `(absolute path, writable)`. In the component
/// the roots are the WASI preopens and cannot be set.
#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
pub fn set_native_roots(roots: &[(&str, bool)]) {
    sources::set(roots);
}

/// The roots as one line for messages: `/home/me/project, /data (read-only)`.
pub fn describe_roots(roots: &[Root]) -> String {
    roots.iter().map(Root::label).collect::<Vec<_>>().join(", ")
}

/// A path checked against the roots.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The absolute, lexically normalised path (no `.`, no `..`).
    pub path: PathBuf,
    /// The root it is under (the deepest one, when roots nest).
    pub root: Root,
}

/// Check `raw` (a path from the model) and make it absolute.
///
/// A relative path is resolved against the allowed roots in order, the first
/// that keeps it inside a root winning (so, normally, against the first
/// root), as the reference server does. `~` is refused: the sandbox has no
/// home directory.
pub fn resolve(raw: &str) -> Result<Resolved, String> {
    resolve_in(raw, &roots())
}

/// [`resolve`], for a path that is going to be written, created or removed:
/// its root must be writable.
pub fn resolve_writable(raw: &str) -> Result<Resolved, String> {
    let resolved = resolve(raw)?;
    check_writable(raw, &resolved)?;
    Ok(resolved)
}

pub fn check_writable(raw: &str, resolved: &Resolved) -> Result<(), String> {
    if resolved.root.writable {
        return Ok(());
    }
    Err(format!(
        "{} is in the read-only root {}: it can be read but not created, changed or removed",
        show(raw, &resolved.path),
        resolved.root.path.display()
    ))
}

pub fn resolve_in(raw: &str, roots: &[Root]) -> Result<Resolved, String> {
    if raw.is_empty() {
        return Err("the path is empty; give an absolute path under an allowed root".into());
    }
    if raw.contains('\0') {
        return Err(format!(
            "the path `{}` contains a NUL byte, which no file name can contain",
            raw.escape_debug()
        ));
    }
    if raw.len() > MAX_PATH_BYTES {
        let head: String = raw.chars().take(60).collect();
        return Err(format!(
            "the path `{head}…` is {} bytes long; paths are limited to {MAX_PATH_BYTES} bytes",
            raw.len()
        ));
    }
    if roots.is_empty() {
        return Err(
            "no directories are shared with this tool: the operator has granted no \
                    allowed roots (see toolcage's configuration), so no path can be reached"
                .into(),
        );
    }
    if raw == "~" || raw.starts_with("~/") {
        return Err(format!(
            "`{raw}`: `~` cannot be expanded in the sandbox (it has no home directory); give \
             an absolute path under one of the allowed roots: {}",
            describe_roots(roots)
        ));
    }
    let given = Path::new(raw);
    let absolute = if given.is_absolute() {
        normalize(given)
    } else {
        // The first root under which the path stays inside some root; if
        // none, the first root (and the error below names the result).
        roots
            .iter()
            .map(|root| normalize(&root.path.join(given)))
            .find(|candidate| root_of(candidate, roots).is_some())
            .unwrap_or_else(|| normalize(&roots[0].path.join(given)))
    };
    match root_of(&absolute, roots) {
        Some(root) => Ok(Resolved {
            path: absolute,
            root: root.clone(),
        }),
        None => Err(format!(
            "{} is outside the allowed roots: {}",
            show(raw, &absolute),
            describe_roots(roots)
        )),
    }
}

/// The deepest root containing `path`.
fn root_of<'r>(path: &Path, roots: &'r [Root]) -> Option<&'r Root> {
    roots
        .iter()
        .filter(|root| within(path, &root.path))
        .max_by_key(|root| depth(&root.path))
}

/// `raw` in backticks, with what it resolved to when that differs.
pub fn show(raw: &str, resolved: &Path) -> String {
    if Path::new(raw) == resolved {
        format!("`{raw}`")
    } else {
        format!("`{raw}` (resolved to `{}`)", resolved.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Vec<Root> {
        vec![
            Root {
                path: "/home/me/project".into(),
                writable: true,
            },
            Root {
                path: "/data".into(),
                writable: false,
            },
            Root {
                path: "/home/me/project/vendor".into(),
                writable: false,
            },
        ]
    }

    #[test]
    fn absolute_paths_find_the_deepest_root() {
        let r = resolve_in("/home/me/project/src/main.rs", &roots()).unwrap();
        assert_eq!(r.path, Path::new("/home/me/project/src/main.rs"));
        assert!(r.root.writable);
        let r = resolve_in("/home/me/project/vendor/x", &roots()).unwrap();
        assert!(!r.root.writable);
        let r = resolve_in("/data", &roots()).unwrap();
        assert_eq!(r.root.path, Path::new("/data"));
    }

    #[test]
    fn outside_paths_name_the_roots() {
        let e = resolve_in("/etc/passwd", &roots()).unwrap_err();
        assert_eq!(
            e,
            "`/etc/passwd` is outside the allowed roots: /home/me/project, /data (read-only), \
             /home/me/project/vendor (read-only)"
        );
        let e = resolve_in("/home/me/project/../../../etc/passwd", &roots()).unwrap_err();
        assert!(e.contains("(resolved to `/etc/passwd`)"), "{e}");
        // A sibling sharing a prefix is not inside.
        assert!(resolve_in("/home/me/project2/x", &roots()).is_err());
        assert!(resolve_in("/datum", &roots()).is_err());
    }

    #[test]
    fn relative_paths_resolve_against_the_first_root() {
        let r = resolve_in("src/lib.rs", &roots()).unwrap();
        assert_eq!(r.path, Path::new("/home/me/project/src/lib.rs"));
        let r = resolve_in("./a/../b", &roots()).unwrap();
        assert_eq!(r.path, Path::new("/home/me/project/b"));
        // The first root that keeps the path inside a root wins: here the
        // third (`vendor/..` is the project).
        let r = resolve_in("../other", &roots()).unwrap();
        assert_eq!(r.path, Path::new("/home/me/project/other"));
        // Out of every root: the message shows it against the first.
        let e = resolve_in("../../x", &roots()).unwrap_err();
        assert!(
            e.starts_with("`../../x` (resolved to `/home/x`) is outside"),
            "{e}"
        );
    }

    #[test]
    fn bad_paths_are_errors_not_panics() {
        assert!(resolve_in("", &roots()).unwrap_err().contains("empty"));
        assert!(
            resolve_in("/data/a\0b", &roots())
                .unwrap_err()
                .contains("NUL")
        );
        let long = format!("/data/{}", "é".repeat(5000));
        assert!(
            resolve_in(&long, &roots())
                .unwrap_err()
                .contains("bytes long")
        );
        assert!(
            resolve_in("~/x", &roots())
                .unwrap_err()
                .contains("home directory")
        );
        assert!(
            resolve_in("/data/x", &[])
                .unwrap_err()
                .contains("no allowed roots")
        );
    }
}
