//! Folder watches on Linux's inotify, read on the async runtime (no thread
//! of their own), for the hot reload and the resource files.
//!
//! Why not a general-purpose watcher: every watch here is on a folder a
//! tool's roots may sit in (the tools folder's parent, the config's folder,
//! a resource's folder), and a watcher that asks for `IN_OPEN` (as `notify`
//! does, always) is woken by every call that opens its root there, and
//! queues an event per open in an unbounded channel while a reload runs.
//! Here:
//!
//! - The mask is the caller's ([`ENTRIES`], [`CONTENTS`]), and neither has
//!   `IN_OPEN`, `IN_ACCESS` or `IN_CLOSE_NOWRITE`: reading a file (a call,
//!   a reload, a client reading a resource) raises nothing, so nothing
//!   wakes.
//! - Events wait in the kernel's queue (bounded by
//!   `fs.inotify.max_queued_events`) until the owner reads them, one buffer
//!   at a time; an overflowed queue is one [`Change::Overflow`], which the
//!   owners take as "anything may have changed" (they rescan). No byte of
//!   the host's memory grows with the number of events.
//! - Watches are by path (a symlink to a folder is followed once, when it
//!   is watched); a folder deleted or replaced takes its watch with it
//!   (`IN_IGNORED`), and [`Folders::watch`] on its path again watches the
//!   new one.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use tokio::io::unix::AsyncFd;

/// The events of a folder's entries appearing and going (created, deleted,
/// moved in or out), and of the folder itself going: enough to see one
/// entry (the tools folder, in its parent) come and go.
pub const ENTRIES: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF);

/// [`ENTRIES`], and the entries' contents and metadata changing (written,
/// closed after writing, touched, chmod-ed).
pub const CONTENTS: WatchFlags = ENTRIES
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::ATTRIB);

/// How many bytes of events one read takes (an event is 16 bytes and its
/// name, at most 256 more).
const BUFFER: usize = 4096;

/// One thing that changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The entry at this path (a watched folder's entry, or the watched
    /// folder itself).
    Path(PathBuf),
    /// The kernel's queue overflowed: events were lost, anything may have
    /// changed.
    Overflow,
}

/// A set of watched folders and their pending events.
pub struct Folders {
    fd: AsyncFd<OwnedFd>,
    /// Watch descriptor → the path it was added at.
    by_wd: HashMap<i32, PathBuf>,
    /// Path → its watch descriptor (the inverse of `by_wd`).
    by_path: HashMap<PathBuf, i32>,
    buffer: Box<[MaybeUninit<u8>; BUFFER]>,
}

impl Folders {
    /// An inotify instance with no watch, registered with the reactor of
    /// `runtime` (the one its reader runs on), else of the current one.
    ///
    /// # Errors
    ///
    /// The process or user has no inotify instance left
    /// (`fs.inotify.max_user_instances`), or the reactor refuses it.
    pub fn new(runtime: Option<&tokio::runtime::Handle>) -> io::Result<Self> {
        let _entered = runtime.map(tokio::runtime::Handle::enter);
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        // SAFETY: the `AsyncFd` owns the descriptor (an `OwnedFd`, which
        // closes it only when dropped with it) and nothing else can close or
        // replace it, so it stays the same open descriptor as long as the
        // registration does.
        #[allow(unsafe_code)]
        let fd = unsafe { AsyncFd::register(fd) }.map_err(|error| error.into_parts().1)?;
        Ok(Self {
            fd,
            by_wd: HashMap::new(),
            by_path: HashMap::new(),
            buffer: Box::new([MaybeUninit::uninit(); BUFFER]),
        })
    }

    /// Watch the folder at `path` for `mask` (added to what it is already
    /// watched for). Returns whether this is a new watch: `false` when the
    /// same folder was already watched at this path, `true` when it was not
    /// (or the folder there was replaced since).
    ///
    /// # Errors
    ///
    /// `path` is not a folder, cannot be read, or the user has no watch
    /// left (`fs.inotify.max_user_watches`).
    pub fn watch(&mut self, path: &Path, mask: WatchFlags) -> io::Result<bool> {
        let wd = inotify::add_watch(
            self.fd.get_ref(),
            path,
            mask | WatchFlags::ONLYDIR | WatchFlags::MASK_ADD,
        )?;
        let previous = self.by_path.insert(path.to_owned(), wd);
        if let Some(old) = previous
            && old != wd
        {
            // The folder at `path` was replaced: the old watch ends (its
            // `IN_IGNORED` may still be queued) and is no longer this path's.
            let _ = inotify::remove_watch(self.fd.get_ref(), old);
            self.by_wd.remove(&old);
        }
        self.by_wd.insert(wd, path.to_owned());
        Ok(previous != Some(wd))
    }

    /// Stop watching the folder at `path` (nothing if it is not watched).
    pub fn unwatch(&mut self, path: &Path) {
        if let Some(wd) = self.by_path.remove(path) {
            self.by_wd.remove(&wd);
            // Fails only if the watch already ended (the folder is gone).
            let _ = inotify::remove_watch(self.fd.get_ref(), wd);
        }
    }

    /// Whether the folder at `path` is watched (its watch has not ended).
    #[cfg(test)]
    #[must_use]
    pub fn is_watching(&self, path: &Path) -> bool {
        self.by_path.contains_key(path)
    }

    /// Wait for events, then give each of one buffer's worth to `each`.
    /// Returns after that buffer: call it again for the next.
    ///
    /// # Errors
    ///
    /// Reading the inotify instance failed (not expected; the owner logs it
    /// and rescans).
    pub async fn read(&mut self, mut each: impl FnMut(Change)) -> io::Result<()> {
        let Self {
            fd,
            by_wd,
            by_path,
            buffer,
        } = self;
        loop {
            let mut ready = fd.readable().await?;
            let read = ready.try_io(|fd| {
                let mut reader = inotify::Reader::new(fd.get_ref(), &mut buffer[..]);
                loop {
                    let event = reader.next()?;
                    deliver(&event, by_wd, by_path, &mut each);
                    if reader.is_buffer_empty() {
                        return Ok(());
                    }
                }
            });
            match read {
                Ok(result) => return result,
                // Not ready after all (readiness was cleared): wait again.
                Err(_would_block) => {}
            }
        }
    }
}

/// Turn one inotify event into its [`Change`], and forget a watch that
/// ended.
fn deliver(
    event: &inotify::Event<'_>,
    by_wd: &mut HashMap<i32, PathBuf>,
    by_path: &mut HashMap<PathBuf, i32>,
    each: &mut impl FnMut(Change),
) {
    let flags = event.events();
    if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
        each(Change::Overflow);
        return;
    }
    let Some(folder) = by_wd.get(&event.wd()) else {
        // A watch removed here whose events were still queued.
        return;
    };
    if flags.contains(ReadFlags::IGNORED) {
        // The folder was deleted (or unmounted, or unwatched): its watch is
        // gone, and the path is no longer watched unless it was re-watched.
        if let Some(folder) = by_wd.remove(&event.wd())
            && by_path.get(&folder) == Some(&event.wd())
        {
            by_path.remove(&folder);
        }
        return;
    }
    let path = match event.file_name() {
        Some(name) => folder.join(OsStr::from_bytes(name.to_bytes())),
        None => folder.clone(),
    };
    each(Change::Path(path));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read what is pending, waiting at most a little for the first event.
    async fn pending(folders: &mut Folders) -> Vec<Change> {
        let mut changes = Vec::new();
        while let Ok(result) = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            folders.read(|change| changes.push(change)),
        )
        .await
        {
            result.expect("read");
        }
        changes
    }

    #[tokio::test]
    async fn reading_a_file_raises_nothing_and_writing_one_does() {
        let dir = tempdir();
        std::fs::write(dir.join("a.wasm"), b"x").expect("file system");
        let mut folders = Folders::new(None).expect("inotify");
        assert!(folders.watch(&dir, CONTENTS).expect("watch"));
        assert!(
            !folders.watch(&dir, CONTENTS).expect("watch"),
            "already watched"
        );
        for _ in 0..100 {
            std::fs::read(dir.join("a.wasm")).expect("file system");
            std::fs::read_dir(&dir).expect("file system").for_each(drop);
        }
        assert_eq!(pending(&mut folders).await, []);
        std::fs::write(dir.join("a.wasm"), b"y").expect("file system");
        let changes = pending(&mut folders).await;
        assert!(!changes.is_empty());
        assert!(
            changes
                .iter()
                .all(|change| *change == Change::Path(dir.join("a.wasm"))),
            "{changes:?}"
        );
        std::fs::remove_dir_all(&dir).expect("file system");
    }

    #[tokio::test]
    async fn an_entries_watch_sees_a_folder_come_and_go_not_its_writes() {
        let parent = tempdir();
        let mut folders = Folders::new(None).expect("inotify");
        folders.watch(&parent, ENTRIES).expect("watch");
        std::fs::write(parent.join("config.toml"), b"").expect("file system");
        let created = pending(&mut folders).await;
        assert_eq!(created, [Change::Path(parent.join("config.toml"))]);
        std::fs::write(parent.join("config.toml"), b"x").expect("file system");
        assert_eq!(pending(&mut folders).await, [], "contents are not watched");
        std::fs::create_dir(parent.join("tools")).expect("file system");
        std::fs::remove_dir(parent.join("tools")).expect("file system");
        assert_eq!(
            pending(&mut folders).await,
            [
                Change::Path(parent.join("tools")),
                Change::Path(parent.join("tools"))
            ]
        );
        std::fs::remove_dir_all(&parent).expect("file system");
    }

    #[tokio::test]
    async fn a_replaced_folder_is_watched_again_at_its_path() {
        let dir = tempdir();
        let mut folders = Folders::new(None).expect("inotify");
        folders.watch(&dir, CONTENTS).expect("watch");
        std::fs::remove_dir(&dir).expect("file system");
        let gone = pending(&mut folders).await;
        assert!(gone.contains(&Change::Path(dir.clone())), "{gone:?}");
        assert!(
            !folders.is_watching(&dir),
            "the watch ended with the folder"
        );
        std::fs::create_dir(&dir).expect("file system");
        assert!(folders.watch(&dir, CONTENTS).expect("watch"), "a new watch");
        std::fs::write(dir.join("b.wasm"), b"").expect("file system");
        assert!(
            pending(&mut folders)
                .await
                .contains(&Change::Path(dir.join("b.wasm")))
        );
        std::fs::remove_dir_all(&dir).expect("file system");
    }

    #[tokio::test]
    async fn an_overflowed_queue_is_one_overflow() {
        let dir = tempdir();
        let mut folders = Folders::new(None).expect("inotify");
        folders.watch(&dir, CONTENTS).expect("watch");
        let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(16384);
        if limit > 1 << 20 {
            // A machine tuned for huge queues: filling one would take minutes.
            eprintln!("fs.inotify.max_queued_events is {limit}; not filled");
            return;
        }
        // Distinct names, so the kernel cannot merge them.
        for i in 0..=limit {
            std::fs::File::create(dir.join(format!("{i}"))).expect("file system");
        }
        let changes = pending(&mut folders).await;
        let overflows = changes.iter().filter(|c| **c == Change::Overflow).count();
        let paths = changes.len();
        assert_eq!(overflows, 1);
        assert!(paths <= limit + 1, "the kernel's queue is the bound");
        std::fs::remove_dir_all(&dir).expect("file system");
    }

    fn tempdir() -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "toolcage-folders-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("file system");
        dir
    }
}
