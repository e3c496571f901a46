//! `wasi:filesystem` functions replaced over wasmtime-wasi's own:
//! `open-at`, so that no open can block a runtime thread and every open
//! file counts against the call's cap of open handles,
//! `read-directory`, so that a listing costs no `stat` per entry and holds
//! no more host memory than one batch of entries, and `get-flags`, which
//! needs no system call.
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
//! symlinks resolved beneath the directory by cap-primitives), plus three
//! steps that make it safe by construction:
//!
//! - the file is opened with `O_NONBLOCK`, so opening a FIFO returns at
//!   once instead of waiting for its other end (for regular files and
//!   directories the flag changes nothing: their I/O never blocks on it);
//! - the handle that was opened (not the path, which could be swapped in
//!   between) is checked with `fstat`: anything but a regular file or a
//!   directory (FIFO, socket, character or block device) is closed and
//!   refused with `access`;
//! - the new file descriptor is counted among the call's open handles
//!   (`grants::handles`) for as long as it lives, streams included; past
//!   the cap the call traps with the limit named.
//!
//! `read-directory` and its stream (`directory-entry-stream`, its
//! `read-directory-entry` and its destructor) are defined here too.
//! wasmtime-wasi 48 reads the whole folder when the stream is opened and
//! `stat`s every entry to learn its type; here the stream reads entries as
//! the guest asks for them (`getdents64` a batch at a time, its descriptor
//! counted like an open file), with the type the file system reported in
//! the entry, and `lstat`s only an entry whose type it did not report
//! (`DT_UNKNOWN`). Types are mapped exactly as wasmtime-wasi maps them
//! (FIFOs and sockets are `unknown`, as there).
//!
//! `get-flags` is defined here too, from the mode each descriptor was
//! opened in, without the `fcntl` wasmtime-wasi makes for flags that no
//! descriptor here can have (see [`get_flags`]).
//!
//! `get-directories` (`wasi:filesystem/preopens`) is defined here too: the
//! call's roots are opened when the guest first asks for them, not when
//! its WASI context is built, so a call that never touches a file opens
//! nothing, and the opened directory is handed to wasmtime-wasi as it is
//! (wasmtime-wasi's builder takes only a path, which would have to be
//! opened again through `/proc/self/fd`).
//!
//! Every other filesystem function is wasmtime-wasi's: a descriptor of a
//! special file can only come from `open-at`, and preopens are the
//! operator's directories.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime_wasi::filesystem::{Descriptor, Dir, File};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, DescriptorType, DirectoryEntry, ErrorCode, OpenFlags, PathFlags,
};
use wasmtime_wasi::{FsPerms, OpenMode};

use crate::grants::files::Mode;
use crate::grants::handles::HandleLimit;

use super::HostState;

/// The `wasi:filesystem/types` instance wasmtime-wasi 48 defines (guests
/// importing any 0.2.x version are linked to it).
const TYPES: &str = "wasi:filesystem/types@0.2.12";

/// The `wasi:filesystem/preopens` instance, of the same version.
const PREOPENS: &str = "wasi:filesystem/preopens@0.2.12";

/// A directory listing in progress: the entries not read yet, and the
/// descriptor it reads them from (its place among the call's open
/// handles is `ticket`).
struct Listing {
    entries: rustix::fs::Dir,
    _ticket: Arc<()>,
}

/// Replace `open-at` and the directory listing in `linker` (which already
/// has wasmtime-wasi's p2 functions).
///
/// # Errors
///
/// The instance or function is missing (a wasmtime-wasi version mismatch).
pub(super) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(TYPES)?;
    types.func_wrap(
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
            state.touch();
            let opened = match open_at(state, &fd, path_flags, &path, open_flags, flags) {
                Ok(descriptor) => {
                    // Past the cap the new file is closed (dropped here)
                    // and the call traps, naming the limit.
                    let handle = match &descriptor {
                        Descriptor::File(file) => &file.file,
                        Descriptor::Dir(dir) => &dir.dir,
                    };
                    state.grants.handles.hold(handle)?;
                    Ok(push(state, descriptor)?)
                }
                Err(code) => Err(code),
            };
            Ok((opened,))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.get-flags",
        |mut store, (fd,): (Resource<Descriptor>,)| {
            let state: &mut HostState = store.data_mut();
            state.touch();
            Ok((Ok::<_, ErrorCode>(get_flags(state.table.get(&fd)?)),))
        },
    )?;
    // The stream's type is this module's, so its three functions are.
    types.resource(
        "directory-entry-stream",
        ResourceType::host::<Listing>(),
        |mut store, rep| {
            let state: &mut HostState = store.data_mut();
            state.table.delete(Resource::<Listing>::new_own(rep))?;
            Ok(())
        },
    )?;
    types.func_wrap(
        "[method]descriptor.read-directory",
        |mut store, (fd,): (Resource<Descriptor>,)| {
            let state: &mut HostState = store.data_mut();
            state.touch();
            let listing = match read_directory(state, &fd)? {
                Ok(listing) => Ok(push(state, listing)?),
                Err(code) => Err(code),
            };
            Ok((listing,))
        },
    )?;
    types.func_wrap(
        "[method]directory-entry-stream.read-directory-entry",
        |mut store, (stream,): (Resource<Listing>,)| {
            let state: &mut HostState = store.data_mut();
            state.touch();
            let listing = state.table.get_mut(&stream)?;
            Ok((next_entry(&mut listing.entries),))
        },
    )?;
    linker
        .instance(PREOPENS)?
        .func_wrap("get-directories", |mut store, (): ()| {
            let state: &mut HostState = store.data_mut();
            state.touch();
            Ok((get_directories(state)?,))
        })?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The call's roots as descriptors, each with the path the guest sees:
/// opened the first time the guest asks (a call that never touches a file
/// opens none), then the same directories again, as wasmtime-wasi hands
/// out clones of the directories it opened when the context was built. A
/// root that cannot be opened is left out (and logged): the call runs
/// without it.
fn get_directories(state: &mut HostState) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
    let preopens = state.preopens.get_or_insert_with(|| {
        state
            .grants
            .files
            .iter()
            .filter_map(|root| {
                let (perms, open_mode) = match root.mode {
                    Mode::ReadOnly => (FsPerms::ReadOnly, OpenMode::READ),
                    Mode::ReadWrite => (FsPerms::ReadWrite, OpenMode::READ | OpenMode::WRITE),
                };
                let Some(guest_path) = root.path.to_str() else {
                    tracing::warn!(root = %root.path.display(), "cannot give a root whose path is not UTF-8; the call runs without it");
                    return None;
                };
                match crate::grants::files::open(root) {
                    // `true`: file operations run inline, as every WASI
                    // context here is built (`allow_blocking_current_thread`).
                    Ok(dir) => Some((Dir::new(dir, perms, open_mode, true), guest_path.to_owned())),
                    Err(error) => {
                        tracing::warn!(root = %root.path.display(), %error, "cannot open root; the call runs without it");
                        None
                    }
                }
            })
            .collect()
    });
    let mut directories = Vec::with_capacity(preopens.len());
    for (dir, path) in preopens.clone() {
        directories.push((push(state, Descriptor::Dir(dir))?, path));
    }
    Ok(directories)
}

/// A descriptor's flags, from the mode it was opened in, as
/// wasmtime-wasi 48's `get-flags` reports them, without its
/// `fcntl(F_GETFL)`: it asks the kernel only for the three sync flags
/// (`O_SYNC`, `O_DSYNC`, `O_RSYNC`), and no descriptor here has one. Every
/// descriptor comes from this module: roots opened by
/// `grants::files::open` (read-only, `O_DIRECTORY`), and `open-at`, which
/// refuses the sync flags. A guest asks for every root's flags to learn
/// which it may change (the bundled fs tool does on every call).
fn get_flags(descriptor: &Descriptor) -> DescriptorFlags {
    let (open_mode, write) = match descriptor {
        Descriptor::File(file) => (file.open_mode, DescriptorFlags::WRITE),
        Descriptor::Dir(dir) => (dir.open_mode, DescriptorFlags::MUTATE_DIRECTORY),
    };
    let mut flags = DescriptorFlags::empty();
    if open_mode.contains(OpenMode::READ) {
        flags |= DescriptorFlags::READ;
    }
    if open_mode.contains(OpenMode::WRITE) {
        flags |= write;
    }
    flags
}

/// Put `value` in the call's resource table. A full table traps, as
/// wasmtime-wasi's own functions do, so the call reports the resource
/// limit.
fn push<T: Send + 'static>(state: &mut HostState, value: T) -> wasmtime::Result<Resource<T>> {
    state.table.push(value).map_err(wasmtime::Error::new)
}

/// Open a listing of the directory `fd`: its own descriptor of the
/// directory, reading from the start, counted among the call's handles.
/// The guest's error inside; past the call's cap, a trap.
///
/// One `openat` of `.`: a descriptor of its own, so that its position is
/// not the guest's descriptor's (a `dup` would share it, and a second
/// listing of the same descriptor would start where the first stopped).
/// cap-primitives' `read_base_dir` opens `.` and then rustix's
/// `Dir::read_from` asks for its flags and opens `.` again: three system
/// calls and a second descriptor where one does (docs/benchmarks.md,
/// round eleven).
fn read_directory(
    state: &mut HostState,
    fd: &Resource<Descriptor>,
) -> Result<Result<Listing, ErrorCode>, HandleLimit> {
    use rustix::fs::{Mode as FileMode, OFlags};

    let dir = match state.table.get(fd) {
        Ok(Descriptor::Dir(dir)) => dir,
        Ok(Descriptor::File(_)) => return Ok(Err(ErrorCode::NotDirectory)),
        Err(_) => return Ok(Err(ErrorCode::BadDescriptor)),
    };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let entries = match rustix::fs::openat(&*dir.dir, c".", flags, FileMode::empty())
        .and_then(rustix::fs::Dir::new)
    {
        Ok(entries) => entries,
        Err(errno) => return Ok(Err(errno_code(errno))),
    };
    let ticket = state.grants.handles.ticket()?;
    Ok(Ok(Listing {
        entries,
        _ticket: ticket,
    }))
}

/// The next entry of a listing (`.` and `..` are never among them), its
/// type as the file system reported it, or from `lstat` when it did not.
fn next_entry(entries: &mut rustix::fs::Dir) -> Result<Option<DirectoryEntry>, ErrorCode> {
    use rustix::fs::{AtFlags, FileType};

    let entry = loop {
        let Some(entry) = entries.read() else {
            return Ok(None);
        };
        let entry = entry.map_err(errno_code)?;
        if !matches!(entry.file_name().to_bytes(), b"." | b"..") {
            break entry;
        }
    };
    let mut kind = entry.file_type();
    if kind == FileType::Unknown {
        // `DT_UNKNOWN`: some file systems do not say. The name is one
        // entry of this directory (no `/`), and a symbolic link is not
        // followed.
        let dir = entries.fd().map_err(errno_code)?;
        let stat = rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(errno_code)?;
        kind = FileType::from_raw_mode(stat.st_mode);
    }
    // FIFOs and sockets are `unknown`, as wasmtime-wasi maps them.
    let type_ = match kind {
        FileType::Directory => DescriptorType::Directory,
        FileType::Symlink => DescriptorType::SymbolicLink,
        FileType::RegularFile => DescriptorType::RegularFile,
        FileType::BlockDevice => DescriptorType::BlockDevice,
        FileType::CharacterDevice => DescriptorType::CharacterDevice,
        _ => DescriptorType::Unknown,
    };
    let name = entry
        .file_name()
        .to_str()
        .map_err(|_| ErrorCode::IllegalByteSequence)?
        .to_owned();
    Ok(Some(DirectoryEntry { type_, name }))
}

/// A system call's error as the guest's, mapped as wasmtime-wasi maps
/// an I/O error (it has no mapping from an errno itself).
fn errno_code(errno: rustix::io::Errno) -> ErrorCode {
    std::io::Error::from(errno).into()
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
