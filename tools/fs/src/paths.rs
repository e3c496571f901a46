//! Lexical operations on paths: normalising one, and whether one lies
//! beneath another. Paths already in normal form (absolute, with no
//! empty, `.` or `..` part: what a model usually sends, and what the roots
//! are) are handled by a scan of their bytes; anything else by
//! `Path::components`, which costs some hundreds of guest instructions a
//! component (a quarter of a read's guest code, measured, before these
//! fast paths). Every answer is `std::path`'s (a test holds them to it).

use std::path::{Component, Path, PathBuf};

/// Lexical normalisation, as the reference server's `path.resolve` does:
/// drop `.` and empty components, let `..` remove the component before it
/// (never past the root).
pub fn normalize(path: &Path) -> PathBuf {
    // Most are normal already (see the module documentation).
    if is_normal(bytes(path)) {
        return path.to_path_buf();
    }
    normalize_by_components(path)
}

/// [`normalize`], component by component: any path.
fn normalize_by_components(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(prefix) => out.push(prefix.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() && !out.has_root() {
                    out.push("..");
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// A path's bytes: the checks below look only at `/` and `.`, so they need
/// no UTF-8 check of the rest.
fn bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_encoded_bytes()
}

/// The parts of `path` between its `/`s, if none of them is empty, `.` or
/// `..`: then `Path::components` yields exactly these, as `Normal`s.
fn plain_parts(path: &[u8]) -> Option<usize> {
    let mut parts = 0;
    for part in path.split(|&byte| byte == b'/') {
        if matches!(part, b"" | b"." | b"..") {
            return None;
        }
        parts += 1;
    }
    Some(parts)
}

/// Whether `path` is a path as [`normalize`] returns an absolute one: `/`,
/// or `/` and plain parts, with no `/` at the end.
fn is_normal(path: &[u8]) -> bool {
    match path.split_first() {
        Some((b'/', [])) => true,
        Some((b'/', rest)) => plain_parts(rest).is_some(),
        _ => false,
    }
}

/// `path.components().count()`, counted from its bytes when it is normal
/// or plain and relative.
pub fn depth(path: &Path) -> usize {
    let text = bytes(path);
    let counted = match text.split_first() {
        None => Some(0),
        Some((b'/', [])) => Some(1),
        Some((b'/', rest)) => plain_parts(rest).map(|parts| parts + 1),
        Some(_) => plain_parts(text),
    };
    counted.unwrap_or_else(|| path.components().count())
}

/// `path.starts_with(base)` (whole components), comparing bytes when both
/// are normal.
pub fn within(path: &Path, base: &Path) -> bool {
    let (text, base_text) = (bytes(path), bytes(base));
    if is_normal(text) && is_normal(base_text) {
        return beneath_normal(text, base_text).is_some();
    }
    path.starts_with(base)
}

/// `path.strip_prefix(base).ok()`, by slicing when both are normal.
// Used by the component's `preopens`; natively, by the tests only.
#[cfg_attr(not(all(target_os = "wasi", target_env = "p2")), allow(dead_code))]
pub fn relative_to<'p>(path: &'p Path, base: &Path) -> Option<&'p Path> {
    let (text, base_text) = (bytes(path), bytes(base));
    if is_normal(text) && is_normal(base_text) {
        let start = beneath_normal(text, base_text)?;
        // `start` follows a `/` (or is the end), a character boundary.
        if let Some(rest) = path.to_str().and_then(|path| path.get(start..)) {
            return Some(Path::new(rest));
        }
    }
    path.strip_prefix(base).ok()
}

/// Where what follows normal `base` in normal `path` starts (after the `/`
/// between them; the end when they are equal), if `path` is `base` or
/// beneath it.
fn beneath_normal(path: &[u8], base: &[u8]) -> Option<usize> {
    if base == b"/" {
        return Some(1);
    }
    if !path.starts_with(base) {
        return None;
    }
    match path.get(base.len()) {
        None => Some(path.len()),
        Some(b'/') => Some(base.len() + 1),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fast path answers as `std::path` does, on paths built from
    /// every part that changes its answer.
    #[test]
    fn fast_paths_answer_as_std_path_does() {
        let parts = ["", ".", "..", "a", "ab", "a.b", "..a", "b"];
        let mut paths = vec![String::new(), "/".to_owned(), "//".to_owned()];
        for first in parts {
            for second in parts {
                for third in ["", "c", "."] {
                    for lead in ["", "/", "//"] {
                        for tail in ["", "/"] {
                            let mut path = format!("{lead}{first}/{second}");
                            if !third.is_empty() {
                                path.push('/');
                                path.push_str(third);
                            }
                            path.push_str(tail);
                            paths.push(path);
                            paths.push(format!("{lead}{first}{tail}"));
                        }
                    }
                }
            }
        }
        paths.sort();
        paths.dedup();
        for path in &paths {
            let path = Path::new(path);
            assert_eq!(
                normalize(path),
                normalize_by_components(path),
                "normalize({path:?})"
            );
            assert_eq!(depth(path), path.components().count(), "depth({path:?})");
            for base in &paths {
                let base = Path::new(base);
                assert_eq!(
                    within(path, base),
                    path.starts_with(base),
                    "{path:?} within {base:?}"
                );
                assert_eq!(
                    relative_to(path, base),
                    path.strip_prefix(base).ok(),
                    "{path:?} relative to {base:?}"
                );
            }
        }
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/./b//c/../d/")), Path::new("/a/b/d"));
        assert_eq!(normalize(Path::new("/../..")), Path::new("/"));
    }
}
