//! Reading a local file, but never more than a cap, and never anything but
//! a regular file: the one reader for a tool file (the catalog's loads,
//! `update` and `[[sources]]` hashing an installed file), a component given
//! as a path, the lock, a key and a credentials file.
//!
//! Every file is opened with `O_NONBLOCK` (a FIFO without a writer would
//! otherwise block `open(2)` forever) and the handle opened, not the path,
//! is checked with `fstat`: a FIFO, socket, device or folder is refused
//! before a byte is read, and so is a regular file whose size is over the
//! cap. The read itself stops at the cap plus one byte, so a file that
//! grows after the check is refused too: no file makes toolcage hold more
//! than the cap.

use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::digest::Digest;

/// Whether the last part of a path may be a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Links {
    /// Followed (a tool the operator linked into the folder, a key mounted
    /// as a link).
    Follow,
    /// Refused: a file toolcage itself installed is never a link, so one
    /// there was put by someone else.
    Refuse,
}

/// Why a local file was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LocalFileError {
    /// Not a regular file (what it is instead).
    #[error("`{}` is {kind}, not a regular file; toolcage reads only regular files there", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is: "a FIFO", "a symbolic link", ...
        kind: &'static str,
    },
    /// Over the cap (its size as `fstat` or the read found it).
    #[error("`{}` is larger than {}", path.display(), size_text(*max))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap, in bytes.
        max: u64,
    },
    /// Opening or reading failed.
    #[error("cannot read `{}`: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error, in words.
        error: String,
    },
}

/// The file at `path`, read whole if it is a regular file of at most `max`
/// bytes (no more than `max + 1` are ever read, whatever the file is):
/// `Ok(None)` if it does not exist.
///
/// # Errors
///
/// It is not a regular file (or, with [`Links::Refuse`], a link), it is
/// larger than `max`, or it cannot be read.
pub(crate) fn read_file(
    path: &Path,
    max: u64,
    links: Links,
) -> Result<Option<Vec<u8>>, LocalFileError> {
    let Some((file, size)) = open_regular(path, max, links)? else {
        return Ok(None);
    };
    // The size `fstat` saw, never more than the cap: a file that grows
    // meanwhile grows the buffer only up to the cap.
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| io_error(path, &error))?;
    if bytes.len() as u64 > max {
        return Err(too_large(path, max));
    }
    Ok(Some(bytes))
}

/// The digest of the file at `path`, hashed as it is read (a buffer of
/// 64 KiB, whatever its size), if it is a regular file of at most `max`
/// bytes: `Ok(None)` if it does not exist.
///
/// # Errors
///
/// As [`read_file`].
pub(crate) fn digest_file(
    path: &Path,
    max: u64,
    links: Links,
) -> Result<Option<Digest>, LocalFileError> {
    let Some((file, _)) = open_regular(path, max, links)? else {
        return Ok(None);
    };
    let mut hasher = Sha256::new();
    let mut read = 0u64;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut file = file.take(max + 1);
    loop {
        let n = match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(io_error(path, &error)),
        };
        read += n as u64;
        if read > max {
            return Err(too_large(path, max));
        }
        hasher.update(&buffer[..n]);
    }
    Ok(Some(Digest::from_bytes(hasher.finalize().into())))
}

/// [`read_file`] following links, with the cap's meaning appended to the
/// message: `why`, what a file that large cannot be.
///
/// # Errors
///
/// As [`read_file`], in words.
pub(crate) fn read_capped(path: &Path, max: u64, why: &str) -> Result<Option<Vec<u8>>, String> {
    read_file(path, max, Links::Follow).map_err(|error| match error {
        LocalFileError::TooLarge { .. } => format!("{error}; {why}"),
        other => other.to_string(),
    })
}

/// `path` opened for reading without waiting (`O_NONBLOCK`), and without
/// following a final link with [`Links::Refuse`] (`O_NOFOLLOW`); what was
/// opened checked with `fstat` to be a regular file of at most `max` bytes.
fn open_regular(
    path: &Path,
    max: u64,
    links: Links,
) -> Result<Option<(File, u64)>, LocalFileError> {
    use cap_primitives::fs::{FollowSymlinks, OpenOptions, open_ambient};
    let mut options = OpenOptions::new();
    options.read(true);
    options._cap_fs_ext_nonblock(true);
    options._cap_fs_ext_follow(match links {
        Links::Follow => FollowSymlinks::Yes,
        Links::Refuse => FollowSymlinks::No,
    });
    let file = match open_ambient(path, &options, cap_primitives::ambient_authority()) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            // A link refused is reported as one, not as missing.
            if links == Links::Refuse && is_link(path) {
                return Err(not_regular(path, "a symbolic link"));
            }
            return Ok(None);
        }
        Err(_) if links == Links::Refuse && is_link(path) => {
            return Err(not_regular(path, "a symbolic link"));
        }
        Err(error) => return Err(io_error(path, &error)),
    };
    let metadata = file.metadata().map_err(|error| io_error(path, &error))?;
    let kind = kind_of(&metadata.file_type());
    if let Some(kind) = kind {
        return Err(not_regular(path, kind));
    }
    if metadata.len() > max {
        return Err(too_large(path, max));
    }
    Ok(Some((file, metadata.len())))
}

/// What a file that is not a regular file is, in words; `None` for a
/// regular file.
fn kind_of(file_type: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt as _;
    Some(if file_type.is_file() {
        return None;
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_dir() {
        "a folder"
    } else {
        "a special file"
    })
}

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn not_regular(path: &Path, kind: &'static str) -> LocalFileError {
    LocalFileError::NotRegular {
        path: path.to_owned(),
        kind,
    }
}

fn too_large(path: &Path, max: u64) -> LocalFileError {
    LocalFileError::TooLarge {
        path: path.to_owned(),
        max,
    }
}

fn io_error(path: &Path, error: &std::io::Error) -> LocalFileError {
    LocalFileError::Io {
        path: path.to_owned(),
        error: error.to_string(),
    }
}

/// A size in the largest unit that divides it.
fn size_text(bytes: u64) -> String {
    if bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system's temporary folder.
    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "toolcage-capped-{name}-{}-{}",
            std::process::id(),
            super::super::lock::unique()
        ));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        dir
    }

    #[test]
    fn regular_files_within_the_cap_are_read_and_hashed() {
        let dir = folder("regular");
        let path = dir.join("a.wasm");
        std::fs::write(&path, b"hello").expect("written");
        for links in [Links::Follow, Links::Refuse] {
            assert_eq!(read_file(&path, 5, links), Ok(Some(b"hello".to_vec())));
            assert_eq!(digest_file(&path, 5, links), Ok(Some(Digest::of(b"hello"))));
        }
        assert_eq!(read_file(&dir.join("missing"), 5, Links::Refuse), Ok(None));
        assert_eq!(
            digest_file(&dir.join("missing"), 5, Links::Follow),
            Ok(None)
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn files_over_the_cap_are_refused_before_they_are_read() {
        let dir = folder("large");
        let path = dir.join("big.wasm");
        // Sparse: 4 GiB on paper, nothing on disk; refused by its size.
        let file = File::create(&path).expect("created");
        file.set_len(4 << 30).expect("sized");
        let expect = LocalFileError::TooLarge {
            path: path.clone(),
            max: 1024,
        };
        assert_eq!(read_file(&path, 1024, Links::Follow), Err(expect.clone()));
        assert_eq!(digest_file(&path, 1024, Links::Refuse), Err(expect));
        assert!(
            read_capped(&path, 1024, "too large to be a key")
                .expect_err("too large")
                .ends_with("is larger than 1 KiB; too large to be a key")
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn fifos_devices_folders_and_refused_links_are_not_regular_files() {
        let dir = folder("special");
        let fifo = dir.join("fifo.wasm");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        let zero = dir.join("zero.wasm");
        std::os::unix::fs::symlink("/dev/zero", &zero).expect("linked");
        let good = dir.join("good.wasm");
        std::fs::write(&good, b"x").expect("written");
        let link = dir.join("link.wasm");
        std::os::unix::fs::symlink(&good, &link).expect("linked");
        let kind = |path: &Path, links| match digest_file(path, 1 << 20, links) {
            Err(LocalFileError::NotRegular { kind, .. }) => kind,
            other => panic!("{}: {other:?}", path.display()),
        };
        // No writer: a blocking open would never return.
        assert_eq!(kind(&fifo, Links::Follow), "a FIFO");
        assert_eq!(kind(&zero, Links::Follow), "a character device");
        assert_eq!(kind(&zero, Links::Refuse), "a symbolic link");
        assert_eq!(kind(&link, Links::Refuse), "a symbolic link");
        assert_eq!(kind(&dir, Links::Follow), "a folder");
        assert_eq!(read_file(&link, 1, Links::Follow), Ok(Some(b"x".to_vec())));
        let dangling = dir.join("dangling.wasm");
        std::os::unix::fs::symlink(dir.join("nowhere"), &dangling).expect("linked");
        assert_eq!(read_file(&dangling, 1, Links::Follow), Ok(None));
        assert_eq!(kind(&dangling, Links::Refuse), "a symbolic link");
        let message = read_capped(&fifo, 1, "x").expect_err("a FIFO");
        assert!(
            message.contains("is a FIFO, not a regular file"),
            "{message}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
