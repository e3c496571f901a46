//! The lock (`toolcage.lock`, beside the config): for every tool file
//! `toolcage add` installed, where it came from and the exact bytes it is
//! (their digest, and for OCI the manifest digest the tag resolved to).
//! The server refuses a locked file whose bytes differ, as it refuses a
//! pinned tool; `serve` fetches `[[sources]]` by the locked manifest digest,
//! so identical replicas start from identical bytes.
//!
//! Invariants:
//! - The lock is written whole, to a temporary file in its folder, synced,
//!   then renamed over the old one: a reader sees the old lock or the new
//!   one, never a mix.
//! - Writers take an exclusive advisory lock on a guard file beside it for
//!   the whole read-modify-write (and the tool file's install), so two
//!   `toolcage add`s never lose each other's entries. Taking it waits at
//!   most [`LOCK_WAIT`], then says another toolcage process holds it:
//!   never forever.
//! - Reading is strict and bounded: unknown fields, bad digests and
//!   bad names are errors, never silently dropped entries.

use std::collections::BTreeMap;
use std::fs::TryLockError;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::digest::Digest;
use super::reference::check_name;

/// Largest lock file read.
const MAX_LOCK_BYTES: u64 = 4 * 1024 * 1024;

/// The lock's format version.
const VERSION: u32 = 1;

/// The longest wait for another process's hold on the lock. A holder
/// fetches (bounded by `[install] fetch_deadline_ms`) and compiles while it
/// holds it; a command that cannot have it soon says who has it rather
/// than hang (before, `remove` waited as long as a slow registry held
/// `serve`'s start-up).
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// How often a held lock is tried again.
const LOCK_POLL: Duration = Duration::from_millis(50);

/// One locked tool file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The source as given (`oci://…`, `https://…`, a path).
    pub source: String,
    /// SHA-256 of the component file.
    pub digest: String,
    /// The OCI manifest digest the source resolved to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// What it imports (unversioned), to show what an update adds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<String>,
    /// The key that verified its signature (its id), if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    /// When it was installed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed: Option<String>,
}

impl Entry {
    /// The file digest, parsed.
    pub fn file_digest(&self) -> Option<Digest> {
        Digest::parse(&self.digest).ok()
    }

    /// The manifest digest, parsed.
    pub fn manifest_digest(&self) -> Option<Digest> {
        self.manifest.as_deref().and_then(|m| Digest::parse(m).ok())
    }
}

/// The whole lock: tool file names (without `.wasm`) to entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lock {
    /// The entries, by file name.
    pub tools: BTreeMap<String, Entry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLock {
    version: u32,
    #[serde(default)]
    tools: BTreeMap<String, Entry>,
}

impl Lock {
    /// Read the lock at `path`; a missing file is an empty lock.
    ///
    /// # Errors
    ///
    /// It cannot be read, is over 4 MiB, or is not a valid lock (what and
    /// where).
    pub fn read(path: &Path) -> Result<Lock, String> {
        let Some(bytes) = super::capped::read_capped(path, MAX_LOCK_BYTES, "it is not a lock")?
        else {
            return Ok(Lock::default());
        };
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("`{}` is not UTF-8 text", path.display()))?;
        Lock::parse(&text).map_err(|why| format!("`{}`: {why}", path.display()))
    }

    /// Parse a lock's text.
    ///
    /// # Errors
    ///
    /// What is wrong with it.
    pub fn parse(text: &str) -> Result<Lock, String> {
        let raw: RawLock = toml::from_str(text).map_err(|error| error.to_string())?;
        if raw.version != VERSION {
            return Err(format!(
                "lock version {} is not one this toolcage reads ({VERSION})",
                raw.version
            ));
        }
        for (name, entry) in &raw.tools {
            check_name(name).map_err(|why| format!("tools.{name}: {why}"))?;
            Digest::parse(&entry.digest).map_err(|why| format!("tools.{name}.digest: {why}"))?;
            if let Some(manifest) = &entry.manifest {
                Digest::parse(manifest).map_err(|why| format!("tools.{name}.manifest: {why}"))?;
            }
        }
        Ok(Lock { tools: raw.tools })
    }

    /// The lock as text.
    pub fn to_text(&self) -> String {
        let raw = RawLock {
            version: VERSION,
            tools: self.tools.clone(),
        };
        let body = toml::to_string(&raw).unwrap_or_default();
        format!(
            "# Written by `toolcage add`, `update` and `remove`; read by `toolcage serve`.\n\
             # Keep it beside the config (and in version control with it): a tool file\n\
             # whose bytes differ from its entry here is refused.\n{body}"
        )
    }

    /// Write the lock to `path` atomically (temporary file, sync, rename).
    ///
    /// # Errors
    ///
    /// The folder cannot be written.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        write_atomically(path, self.to_text().as_bytes())
    }

    /// File digests by file name (`NAME.wasm`), as the loader checks them.
    pub fn digests(&self) -> BTreeMap<String, String> {
        self.tools
            .iter()
            .map(|(name, entry)| {
                let hex = entry
                    .digest
                    .strip_prefix("sha256:")
                    .unwrap_or(&entry.digest)
                    .to_ascii_lowercase();
                (format!("{name}.wasm"), hex)
            })
            .collect()
    }
}

/// An exclusive hold on the lock for a read-modify-write: released when
/// dropped.
pub struct Guard {
    _file: std::fs::File,
}

/// Hold the lock at `path` exclusively, waiting at most [`LOCK_WAIT`] for
/// another holder. The wait blocks the thread: it is taken by commands and
/// by `serve` before it serves, never on a path that answers requests.
///
/// # Errors
///
/// Another process still holds it after the wait, or the guard file cannot
/// be created or locked.
pub fn hold(path: &Path) -> Result<Guard, String> {
    hold_within(path, LOCK_WAIT)
}

/// [`hold`], waiting at most `wait`.
fn hold_within(path: &Path, wait: Duration) -> Result<Guard, String> {
    let guard = guard_path(path);
    if let Some(parent) = guard.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("cannot create `{}`: {error}", parent.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&guard)
        .map_err(|error| format!("cannot open `{}`: {error}", guard.display()))?;
    let until = Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Guard { _file: file }),
            Err(TryLockError::WouldBlock) if Instant::now() < until => {
                std::thread::sleep(LOCK_POLL);
            }
            Err(TryLockError::WouldBlock) => {
                return Err(format!(
                    "another toolcage process holds the lock `{}` (an `add`, `update` or \
                     `remove`, or `serve` fetching its `[[sources]]`); waited {} s: try again \
                     when it is done",
                    path.display(),
                    wait.as_secs_f32()
                ));
            }
            Err(TryLockError::Error(error)) => {
                return Err(format!("cannot lock `{}`: {error}", guard.display()));
            }
        }
    }
}

fn guard_path(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(
        || "toolcage.lock".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    path.with_file_name(format!(".{name}.guard"))
}

/// Write `bytes` to `path` so that a reader sees the old file or the whole
/// new one: a temporary file in the same folder (created new, never
/// through a link), synced, renamed over `path`, the folder synced.
///
/// # Errors
///
/// Any step failed (the temporary file is removed).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|error| format!("cannot create `{}`: {error}", dir.display()))?;
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let temporary = dir.join(format!(
        ".{name}.{}-{}.partial",
        std::process::id(),
        unique()
    ));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, path)?;
        if let Ok(folder) = std::fs::File::open(dir) {
            let _ = folder.sync_all();
        }
        Ok::<(), std::io::Error>(())
    })();
    result.map_err(|error| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot write `{}`: {error}", path.display())
    })
}

/// A number no other temporary file or folder of this process has used.
pub(super) fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(digest: &str) -> Entry {
        Entry {
            source: "oci://127.0.0.1:5000/t/x:1".into(),
            digest: digest.into(),
            manifest: Some(format!("sha256:{}", "b".repeat(64))),
            signed_by: None,
            imports: vec!["wasi:http/outgoing-handler".into()],
            installed: Some("2026-12-01T00:00:00Z".into()),
        }
    }

    #[test]
    fn a_lock_round_trips_and_is_read_strictly() {
        let mut lock = Lock::default();
        lock.tools.insert(
            "word-count".into(),
            entry(&format!("sha256:{}", "a".repeat(64))),
        );
        let text = lock.to_text();
        assert_eq!(Lock::parse(&text), Ok(lock.clone()));
        assert_eq!(
            lock.digests().get("word-count.wasm").map(String::as_str),
            Some("a".repeat(64).as_str())
        );
        for (bad, why) in [
            ("version = 2", "version 2"),
            (
                "version = 1\n[tools.x]\nsource = \"s\"\ndigest = \"md5:1\"",
                "digest",
            ),
            (
                "version = 1\n[tools.\"../x\"]\nsource = \"s\"\ndigest = \"sha256:1\"",
                "../x",
            ),
            (
                &format!(
                    "version = 1\n[tools.x]\nsource = \"s\"\ndigest = \"sha256:{}\"\nextra = 1",
                    "a".repeat(64)
                ),
                "extra",
            ),
        ] {
            let error = Lock::parse(bad).expect_err(bad);
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn writes_are_atomic_and_held_exclusively() {
        let dir = std::env::temp_dir().join(format!("toolcage-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("toolcage.lock");
        assert_eq!(Lock::read(&path), Ok(Lock::default()));
        let guard = hold(&path).expect("held");
        let mut lock = Lock::default();
        lock.tools
            .insert("x".into(), entry(&format!("sha256:{}", "c".repeat(64))));
        lock.write(&path).expect("written");
        assert_eq!(Lock::read(&path), Ok(lock));
        // A second holder waits a bounded time, then says who holds it.
        let started = Instant::now();
        let Err(why) = hold_within(&path, Duration::from_millis(200)) else {
            panic!("held twice");
        };
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert!(
            why.contains("another toolcage process holds the lock") && why.contains("try again"),
            "{why}"
        );
        drop(guard);
        let again = hold_within(&path, Duration::ZERO).expect("free again");
        drop(again);
        // Nothing but the lock and its guard is left in the folder.
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [".toolcage.lock.guard", "toolcage.lock"]);
        std::fs::remove_dir_all(&dir).expect("cleaned");
    }
}
