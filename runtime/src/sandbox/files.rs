//! `wasi:filesystem` `open-at`, replaced so that no open can block a
//! runtime thread.
//!
//! File operations run inline on the runtime thread (see `Sandbox::start`:
//! `allow_blocking_current_thread`), which is what makes small file tools
//! fast, and is safe for regular files and directories. It is not for
//! special files: opening a FIFO blocks in `open(2)` until a writer comes,
//! reading one blocks until data does, and a device can block forever. The
//! epoch deadline cannot interrupt a thread stuck in a system call, so one
//! such call would take a runtime thread for good.
//!
//! So this module defines `[method]descriptor.open-at` over wasmtime-wasi's
//! own: the same checks, in the same order, as wasmtime-wasi 48's
//! `Dir::open_at` (flags, the read-only permission of the root, `..` and
//! symlinks resolved beneath the directory by cap-primitives), plus two
//! steps that make it safe by construction:
//!
//! - the file is opened with `O_NONBLOCK`, so opening a FIFO returns at
//!   once instead of waiting for its other end (for regular files and
//!   directories the flag changes nothing: their I/O never blocks on it);
//! - the handle that was opened (not the path, which could be swapped in
//!   between) is checked with `fstat`: anything but a regular file or a
//!   directory (FIFO, socket, character or block device) is closed and
//!   refused with `access`.
//!
//! Every other filesystem function is wasmtime-wasi's: a descriptor of a
//! special file can only come from `open-at`, and preopens are the
//! operator's directories.

use std::path::Path;

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::{Descriptor, Dir, File};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, OpenFlags, PathFlags,
};

use super::HostState;

/// The `wasi:filesystem/types` instance wasmtime-wasi 48 defines (guests
/// importing any 0.2.x version are linked to it).
const TYPES: &str = "wasi:filesystem/types@0.2.12";

/// Replace `open-at` in `linker` (which already has wasmtime-wasi's p2
/// functions).
///
/// # Errors
///
/// The instance or function is missing (a wasmtime-wasi version mismatch).
pub(super) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.instance(TYPES)?.func_wrap(
        "[method]descriptor.open-at",
        |mut store,
         (fd, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            let state: &mut HostState = store.data_mut();
            let opened = match open_at(state, &fd, path_flags, &path, open_flags, flags) {
                Ok(descriptor) => match state.table.push(descriptor) {
                    Ok(resource) => Ok(resource),
                    // A full table traps, as wasmtime-wasi's own functions do,
                    // so the call reports the resource limit.
                    Err(full) => return Err(wasmtime::Error::new(full)),
                },
                Err(code) => Err(code),
            };
            Ok((opened,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// `open-at` up to the new descriptor: see the module docs.
fn open_at(
    state: &mut HostState,
    fd: &Resource<Descriptor>,
    path_flags: PathFlags,
    path: &str,
    open_flags: OpenFlags,
    flags: DescriptorFlags,
) -> Result<Descriptor, ErrorCode> {
    let dir = match state.table.get(fd) {
        Ok(Descriptor::Dir(dir)) => dir.clone(),
        Ok(Descriptor::File(_)) => return Err(ErrorCode::NotDirectory),
        Err(_) => return Err(ErrorCode::BadDescriptor),
    };

    // As wasmtime-wasi's `Dir::open_at`, step by step.
    let mut create = false;
    let mut open_mode = OpenMode::empty();
    let mut options = cap_primitives::fs::OpenOptions::new();
    if open_flags.contains(OpenFlags::CREATE) {
        if open_flags.contains(OpenFlags::EXCLUSIVE) {
            options.create_new(true);
        } else {
            options.create(true);
        }
        create = true;
        options.write(true);
        open_mode |= OpenMode::WRITE;
    }
    if open_flags.contains(OpenFlags::TRUNCATE) {
        options.truncate(true).write(true);
        open_mode |= OpenMode::WRITE;
    }
    if flags.contains(DescriptorFlags::READ) {
        options.read(true);
        open_mode |= OpenMode::READ;
    }
    if flags.contains(DescriptorFlags::WRITE) {
        options.write(true);
        open_mode |= OpenMode::WRITE;
    } else {
        // If not opened for writing, open for reading: the OS lets the file
        // be opened, and the permissions refuse what it may not do.
        options.read(true);
        open_mode |= OpenMode::READ;
    }
    options._cap_fs_ext_follow(if path_flags.contains(PathFlags::SYMLINK_FOLLOW) {
        cap_primitives::fs::FollowSymlinks::Yes
    } else {
        cap_primitives::fs::FollowSymlinks::No
    });
    if flags.intersects(
        DescriptorFlags::FILE_INTEGRITY_SYNC
            | DescriptorFlags::DATA_INTEGRITY_SYNC
            | DescriptorFlags::REQUESTED_WRITE_SYNC,
    ) {
        return Err(ErrorCode::Unsupported);
    }
    if open_flags.contains(OpenFlags::DIRECTORY)
        && open_flags.intersects(OpenFlags::CREATE | OpenFlags::EXCLUSIVE | OpenFlags::TRUNCATE)
    {
        return Err(ErrorCode::Invalid);
    }
    if dir.perms.write_not_permitted() && (create || open_mode.contains(OpenMode::WRITE)) {
        return Err(ErrorCode::NotPermitted);
    }
    // The two steps of this module: never wait for a FIFO's other end...
    options._cap_fs_ext_nonblock(true);
    let file = cap_primitives::fs::open(&dir.dir, Path::new(path), &options)?;
    // ... and look at what was opened, not at the path.
    let kind = file.metadata()?.file_type();
    // `true`: file operations of the new descriptor run inline, as every
    // WASI context here is built (`allow_blocking_current_thread`).
    if kind.is_dir() {
        Ok(Descriptor::Dir(Dir::new(file, dir.perms, open_mode, true)))
    } else if open_flags.contains(OpenFlags::DIRECTORY) {
        Err(ErrorCode::NotDirectory)
    } else if kind.is_file() {
        Ok(Descriptor::File(File::new(
            file, dir.perms, open_mode, true,
        )))
    } else {
        tracing::debug!(
            path,
            "refused to open a special file (FIFO, socket or device)"
        );
        Err(ErrorCode::Access)
    }
}
