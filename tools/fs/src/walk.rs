//! Reading directories: one level (listings), or recursively (tree, search),
//! with the reference server's exclude-pattern rules and bounded output.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde::Serialize;
use toolcage_guest::JsonSchema;

use crate::util::{io_error, sort_by_name};

/// The most entries a listing, tree or search returns.
pub const MAX_ENTRIES: usize = 10_000;

/// The most entries read from any one directory while walking; a directory
/// beyond it is walked in part, and the result says so.
pub const MAX_DIR_READ: usize = 100_000;

/// The most entries a recursive walk visits in all.
pub const MAX_VISITED: usize = 1_000_000;

/// How deep `directory_tree` nests (a deeper directory is shown empty, and
/// the result says so). Each level is two levels of JSON nesting, and JSON
/// parsers commonly stop at 128 (serde_json, which the host uses to check
/// structured output, does).
pub const MAX_DEPTH: usize = 50;

/// What an entry is. Symlinks are not followed (as in the reference, whose
/// listings show a symlink to a directory as `[FILE]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Directory,
    Symlink,
    Other,
}

impl Kind {
    pub fn is_dir(self) -> bool {
        self == Kind::Directory
    }

    /// `[DIR]` or `[FILE]`, the reference's prefixes.
    pub fn tag(self) -> &'static str {
        if self.is_dir() { "[DIR]" } else { "[FILE]" }
    }
}

/// One directory entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The name (natively, converted lossily if it is not UTF-8; in the
    /// component such entries are skipped and counted instead).
    pub name: String,
    pub kind: Kind,
}

/// One directory's entries, in name order.
pub struct Listing {
    pub entries: Vec<Entry>,
    /// How many entries were not read because of the limit.
    pub omitted: usize,
    /// How many entries were skipped because their names are not UTF-8
    /// (the WASI interface passes names as UTF-8 strings, so the host cannot
    /// hand them to the tool at all).
    pub unnamed: usize,
}

/// Read up to `limit` entries of directory `path`, sorted by name.
pub fn list(path: &Path, limit: usize) -> Result<Listing, String> {
    let mut entries = Vec::new();
    let mut omitted = 0;
    let unnamed = reader::for_each_entry(path, |entry| {
        if entries.len() < limit {
            entries.push(entry);
        } else {
            omitted += 1;
        }
    })
    .map_err(|e| {
        if path.is_file() {
            format!(
                "cannot list `{}`: it is a file, not a directory",
                path.display()
            )
        } else {
            io_error("list", path, &e)
        }
    })?;
    let entries = sort_by_name(entries, |e| e.name.as_str());
    Ok(Listing {
        entries,
        omitted,
        unnamed,
    })
}

/// Directory reading. Natively, `std::fs::read_dir` with lossy names. In the
/// component, the WASI directory stream directly: the host reports an entry
/// whose name is not UTF-8 as an error, and `std`'s iterator ends at the
/// first error, which would hide every entry after it; here such entries are
/// counted and skipped.
#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
mod reader {
    use std::io;
    use std::path::Path;

    use super::{Entry, Kind};

    /// Call `f` with each entry; returns how many had unusable names.
    pub fn for_each_entry(path: &Path, mut f: impl FnMut(Entry)) -> io::Result<usize> {
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            f(Entry {
                name: entry.file_name().to_string_lossy().into_owned(),
                kind: match entry.file_type() {
                    Ok(t) if t.is_dir() => Kind::Directory,
                    Ok(t) if t.is_file() => Kind::File,
                    Ok(t) if t.is_symlink() => Kind::Symlink,
                    _ => Kind::Other,
                },
            });
        }
        Ok(0)
    }
}

#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod reader {
    use std::io;
    use std::path::Path;

    use wasi::filesystem::types::{
        DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
    };

    use super::{Entry, Kind};
    use crate::preopens::{self, to_io};

    /// Call `f` with each entry; returns how many had unusable names.
    pub fn for_each_entry(path: &Path, mut f: impl FnMut(Entry)) -> io::Result<usize> {
        preopens::beneath(path, |dir, relative| {
            let opened;
            let dir = if relative.is_empty() {
                dir
            } else {
                opened = dir
                    .open_at(
                        PathFlags::SYMLINK_FOLLOW,
                        relative,
                        OpenFlags::DIRECTORY,
                        DescriptorFlags::READ,
                    )
                    .map_err(to_io)?;
                &opened
            };
            let stream = dir.read_directory().map_err(to_io)?;
            let mut unnamed = 0;
            loop {
                match stream.read_directory_entry() {
                    Ok(Some(entry)) => f(Entry {
                        name: entry.name,
                        kind: match entry.type_ {
                            DescriptorType::Directory => Kind::Directory,
                            DescriptorType::RegularFile => Kind::File,
                            DescriptorType::SymbolicLink => Kind::Symlink,
                            _ => Kind::Other,
                        },
                    }),
                    Ok(None) => return Ok(unnamed),
                    Err(ErrorCode::IllegalByteSequence) => unnamed += 1,
                    Err(code) => return Err(to_io(code)),
                }
            }
        })
    }
}

/// Compiled `excludePatterns` and their matching rule.
pub struct Excludes {
    globs: Vec<GlobMatcher>,
}

/// A glob as the reference's minimatch reads it: `*` and `?` stop at `/`,
/// `**` crosses directories, `{a,b}` alternates, and dot files match.
pub fn glob(pattern: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("invalid glob pattern `{pattern}`: {e}"))
}

impl Excludes {
    /// A pattern with a `*` is matched against the path relative to the
    /// starting directory; one without also matches that name at any depth
    /// and everything beneath it (`node_modules` excludes every
    /// `node_modules` directory), as the reference's `directory_tree` does.
    pub fn new(patterns: &[String]) -> Result<Excludes, String> {
        let mut globs = Vec::new();
        for pattern in patterns.iter().filter(|p| !p.is_empty()) {
            globs.push(glob(pattern)?);
            if !pattern.contains('*') {
                globs.push(glob(&format!("**/{pattern}"))?);
                globs.push(glob(&format!("**/{pattern}/**"))?);
            }
        }
        Ok(Excludes { globs })
    }

    pub fn excludes(&self, relative: &str) -> bool {
        self.globs.iter().any(|g| g.is_match(relative))
    }
}

/// Why a walk stopped early, if it did.
#[derive(Debug, Default)]
pub struct Truncation {
    /// Stopped after `MAX_ENTRIES` results.
    pub entries: bool,
    /// Some directory had more than `MAX_DIR_READ` entries.
    pub big_directory: bool,
    /// Visited `MAX_VISITED` entries.
    pub visited: bool,
    /// Some directory was deeper than `MAX_DEPTH`.
    pub depth: bool,
    /// Directories that could not be read (permission denied...).
    pub unreadable: Vec<String>,
    /// Entries skipped because their names are not UTF-8.
    pub unnamed: usize,
}

impl Truncation {
    pub fn any(&self) -> bool {
        self.entries
            || self.big_directory
            || self.visited
            || self.depth
            || !self.unreadable.is_empty()
            || self.unnamed > 0
    }

    /// Take note of one directory's listing.
    fn absorb(&mut self, listing: &Listing) {
        self.big_directory |= listing.omitted > 0;
        self.unnamed += listing.unnamed;
    }

    /// A note for the model, or `None` when the result is complete.
    pub fn note(&self, what: &str) -> Option<String> {
        let mut parts = Vec::new();
        if self.entries {
            parts.push(format!(
                "stopped at {MAX_ENTRIES} {what}; narrow the path or the pattern, or add excludePatterns"
            ));
        }
        if self.visited {
            parts.push(format!("stopped after visiting {MAX_VISITED} entries"));
        }
        if self.big_directory {
            parts.push(format!(
                "a directory with more than {MAX_DIR_READ} entries was read only in part"
            ));
        }
        if self.depth {
            parts.push(format!(
                "directories deeper than {MAX_DEPTH} levels are shown empty"
            ));
        }
        if !self.unreadable.is_empty() {
            let shown: Vec<_> = self.unreadable.iter().take(5).cloned().collect();
            let more = self.unreadable.len() - shown.len();
            parts.push(format!(
                "{} director{} could not be read: {}{}",
                self.unreadable.len(),
                if self.unreadable.len() == 1 {
                    "y"
                } else {
                    "ies"
                },
                shown.join("; "),
                if more > 0 {
                    format!("; and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        if self.unnamed > 0 {
            parts.push(unnamed_note(self.unnamed));
        }
        (!parts.is_empty()).then(|| format!("Incomplete result: {}.", parts.join("; ")))
    }
}

/// Why some entries are missing from a listing.
pub fn unnamed_note(count: usize) -> String {
    format!(
        "{count} entr{} skipped because {} not valid UTF-8 (the sandbox passes file \
         names as UTF-8 text, so such names cannot be shown or used)",
        if count == 1 { "y was" } else { "ies were" },
        if count == 1 {
            "its name is"
        } else {
            "their names are"
        }
    )
}

/// One node of `directory_tree`'s JSON.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TreeEntry {
    pub name: String,
    /// `file` or `directory` (a symlink or special file counts as a file).
    #[serde(rename = "type")]
    pub kind: TreeKind,
    /// Present for directories only (empty when the directory is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<TreeEntry>>,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TreeKind {
    File,
    Directory,
}

/// The tree under `root`, skipping excluded entries (and everything under
/// an excluded directory).
pub fn tree(root: &Path, excludes: &Excludes) -> Result<(Vec<TreeEntry>, Truncation), String> {
    // The starting directory must be readable: that error is the answer.
    let top = list(root, MAX_DIR_READ)?;
    let mut state = Walk {
        excludes,
        truncation: Truncation::default(),
        count: 0,
        visited: 0,
    };
    let children = state.tree_level(root, "", top, 1);
    Ok((children, state.truncation))
}

struct Walk<'a> {
    excludes: &'a Excludes,
    truncation: Truncation,
    count: usize,
    visited: usize,
}

impl Walk<'_> {
    /// Count one visited entry; false once the walk must stop.
    fn visit(&mut self) -> bool {
        if self.visited >= MAX_VISITED {
            self.truncation.visited = true;
            return false;
        }
        self.visited += 1;
        true
    }

    fn tree_level(
        &mut self,
        dir: &Path,
        relative: &str,
        listing: Listing,
        depth: usize,
    ) -> Vec<TreeEntry> {
        self.truncation.absorb(&listing);
        let mut out = Vec::new();
        for entry in listing.entries {
            if !self.visit() {
                break;
            }
            let rel = join_relative(relative, &entry.name);
            if self.excludes.excludes(&rel) {
                continue;
            }
            if self.count >= MAX_ENTRIES {
                self.truncation.entries = true;
                break;
            }
            self.count += 1;
            let children = if entry.kind.is_dir() {
                if depth >= MAX_DEPTH {
                    self.truncation.depth = true;
                    Some(Vec::new())
                } else {
                    let path = dir.join(&entry.name);
                    match list(&path, MAX_DIR_READ) {
                        Ok(listing) => Some(self.tree_level(&path, &rel, listing, depth + 1)),
                        Err(e) => {
                            self.truncation.unreadable.push(e);
                            Some(Vec::new())
                        }
                    }
                }
            } else {
                None
            };
            out.push(TreeEntry {
                name: entry.name,
                kind: if entry.kind.is_dir() {
                    TreeKind::Directory
                } else {
                    TreeKind::File
                },
                children,
            });
        }
        out
    }
}

fn join_relative(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

/// Every file and directory under `root` whose path relative to `root`
/// matches `pattern`, as full paths, in a depth-first walk in name order.
/// Excluded entries are skipped along with everything under them.
pub fn search(
    root: &Path,
    pattern: &GlobMatcher,
    excludes: &Excludes,
) -> Result<(Vec<PathBuf>, Truncation), String> {
    let top = list(root, MAX_DIR_READ)?;
    let mut walk = Walk {
        excludes,
        truncation: Truncation::default(),
        count: 0,
        visited: 0,
    };
    let mut found = Vec::new();
    // A stack of directories still to read, each with the entries left.
    let mut stack: Vec<(PathBuf, String, std::vec::IntoIter<Entry>)> = Vec::new();
    walk.truncation.absorb(&top);
    stack.push((root.to_path_buf(), String::new(), top.entries.into_iter()));
    while let Some(top) = stack.last_mut() {
        let Some(entry) = top.2.next() else {
            stack.pop();
            continue;
        };
        let rel = join_relative(&top.1, &entry.name);
        let path = top.0.join(&entry.name);
        if !walk.visit() {
            break;
        }
        if walk.excludes.excludes(&rel) {
            continue;
        }
        if pattern.is_match(&rel) {
            if found.len() >= MAX_ENTRIES {
                walk.truncation.entries = true;
                break;
            }
            found.push(path.clone());
        }
        if entry.kind.is_dir() {
            match list(&path, MAX_DIR_READ) {
                Ok(listing) => {
                    walk.truncation.absorb(&listing);
                    stack.push((path, rel, listing.entries.into_iter()));
                }
                Err(e) => walk.truncation.unreadable.push(e),
            }
        }
    }
    Ok((found, walk.truncation))
}
