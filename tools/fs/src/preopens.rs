//! The component's WASI preopens, asked for once a call, and what the
//! hottest paths do through them directly instead of through `std::fs`.
//!
//! `std::fs` goes through wasi-libc, which asks the host for the preopens a
//! second time (its own table of them), and turns one `File::metadata` into
//! two host calls (`stat`, and `metadata-hash` for an inode number no tool
//! here reads), each a `statx`. A call runs in a fresh instance, so each of
//! those is paid on every call. Here the preopens are asked for once (the
//! roots, listings and whole-file reads share them), and a whole-file read
//! is `open-at`, `stat` and `read` on the descriptor itself
//! (docs/benchmarks.md, round twelve).
//!
//! Paths are resolved as wasi-libc resolves them: beneath the preopen whose
//! path contains it most deeply, symlinks followed by the host, which
//! refuses any that lead out of the preopen.

use std::io;
use std::path::Path;

use wasi::filesystem::preopens::get_directories;
use wasi::filesystem::types::{
    Descriptor, DescriptorFlags, DescriptorStat, ErrorCode, OpenFlags, PathFlags,
};

thread_local! {
    /// Each preopened directory with the path the guest sees it at. A call
    /// runs in a fresh instance, so this is asked for once a call.
    static PREOPENS: Vec<(Descriptor, String)> = get_directories();
}

/// Call `f` with the preopens.
pub fn with<R>(f: impl FnOnce(&[(Descriptor, String)]) -> R) -> R {
    PREOPENS.with(|preopens| f(preopens))
}

/// The preopen that contains `path` most deeply, and the rest of the path
/// (empty for the preopen itself). `PermissionDenied` when no preopen does.
pub fn locate<'a>(
    preopens: &'a [(Descriptor, String)],
    path: &'a Path,
) -> io::Result<(&'a Descriptor, &'a Path)> {
    preopens
        .iter()
        .filter_map(|(dir, root)| Some((dir, path.strip_prefix(root).ok()?)))
        .min_by_key(|(_, relative)| relative.components().count())
        .ok_or_else(|| io::Error::from(io::ErrorKind::PermissionDenied))
}

/// `relative` (see [`locate`]) as the host takes it: UTF-8.
pub fn relative_str(relative: &Path) -> io::Result<&str> {
    relative
        .to_str()
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
}

/// A file opened for reading: the descriptor and its `stat`.
pub struct Opened {
    pub descriptor: Descriptor,
    pub stat: DescriptorStat,
}

/// Open `path` for reading, following symlinks, as `File::open` does, and
/// `stat` what was opened (not the path, which could be swapped for
/// something else in between).
///
/// The host refuses to open a special file (a FIFO, a socket, a device)
/// with `access`; that error comes back as `Err((error, Some(stat)))` with
/// the `stat` of what the path names, so the caller can tell that refusal
/// from one of the sandbox's (a `stat` never blocks).
pub fn open_read(path: &Path) -> Result<Opened, (io::Error, Option<DescriptorStat>)> {
    with(|preopens| {
        let (root, relative) = locate(preopens, path).map_err(|e| (e, None))?;
        let relative = relative_str(relative).map_err(|e| (e, None))?;
        // `.` for the preopen itself: the host opens a new descriptor of it,
        // and the preopen's own stays the preopen's.
        let relative = if relative.is_empty() { "." } else { relative };
        let descriptor = root
            .open_at(
                PathFlags::SYMLINK_FOLLOW,
                relative,
                OpenFlags::empty(),
                DescriptorFlags::READ,
            )
            .map_err(|code| {
                let named = (code == ErrorCode::Access)
                    .then(|| root.stat_at(PathFlags::SYMLINK_FOLLOW, relative).ok())
                    .flatten();
                (to_io(code), named)
            })?;
        let stat = descriptor.stat().map_err(|code| (to_io(code), None))?;
        Ok(Opened { descriptor, stat })
    })
}

/// A WASI error as an `io::Error` of the kind wasi-libc's errno would have
/// given, for the kinds the tools put in words (`util::io_error`); any
/// other with the interface's own description of the code.
pub fn to_io(code: ErrorCode) -> io::Error {
    let kind = match code {
        ErrorCode::NoEntry => io::ErrorKind::NotFound,
        ErrorCode::Access | ErrorCode::NotPermitted => io::ErrorKind::PermissionDenied,
        ErrorCode::NotDirectory => io::ErrorKind::NotADirectory,
        ErrorCode::IsDirectory => io::ErrorKind::IsADirectory,
        ErrorCode::NameTooLong => io::ErrorKind::InvalidFilename,
        ErrorCode::ReadOnly => io::ErrorKind::ReadOnlyFilesystem,
        ErrorCode::Exist => io::ErrorKind::AlreadyExists,
        ErrorCode::NotEmpty => io::ErrorKind::DirectoryNotEmpty,
        ErrorCode::InsufficientSpace => io::ErrorKind::StorageFull,
        ErrorCode::Quota => io::ErrorKind::QuotaExceeded,
        ErrorCode::FileTooLarge => io::ErrorKind::FileTooLarge,
        ErrorCode::CrossDevice => io::ErrorKind::CrossesDevices,
        _ => return io::Error::other(code.message()),
    };
    io::Error::from(kind)
}
