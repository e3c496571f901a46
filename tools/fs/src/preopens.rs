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

/// Call `f` with the preopen that contains `path` most deeply and the rest
/// of the path beneath it, as the host takes it (`""` for the preopen
/// itself). `PermissionDenied` when no preopen contains `path`.
pub fn beneath<R>(
    path: &Path,
    f: impl FnOnce(&Descriptor, &str) -> io::Result<R>,
) -> io::Result<R> {
    with(|preopens| {
        let (root, relative) = preopens
            .iter()
            .filter_map(|(dir, root)| {
                Some((dir, crate::paths::relative_to(path, Path::new(root))?))
            })
            .min_by_key(|(_, relative)| crate::paths::depth(relative))
            .ok_or_else(|| io::Error::from(io::ErrorKind::PermissionDenied))?;
        let relative = relative
            .to_str()
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        f(root, relative)
    })
}

/// Open `path` for reading, following symlinks as `File::open` does, and
/// `stat` what was opened (not the path, which could be swapped for
/// something else in between).
pub fn open_read(path: &Path) -> io::Result<(Descriptor, DescriptorStat)> {
    let descriptor = beneath(path, |root, relative| {
        root.open_at(
            PathFlags::SYMLINK_FOLLOW,
            or_dot(relative),
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
        .map_err(to_io)
    })?;
    let stat = descriptor.stat().map_err(to_io)?;
    Ok((descriptor, stat))
}

/// The `stat` of what `path` names, following symlinks, as
/// `std::fs::metadata` gives it (a `stat` never blocks, whatever the file).
pub fn stat(path: &Path) -> io::Result<DescriptorStat> {
    beneath(path, |root, relative| {
        root.stat_at(PathFlags::SYMLINK_FOLLOW, or_dot(relative))
            .map_err(to_io)
    })
}

/// `.` for the preopen itself: the host opens a descriptor of its own, and
/// the preopen's stays the preopen's.
fn or_dot(relative: &str) -> &str {
    if relative.is_empty() { "." } else { relative }
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
