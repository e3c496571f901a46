//! Reading files: whole, the first N lines, the last N lines, or as bytes.
//! Memory stays bounded: `head` and `tail` read only what they return (in
//! chunks), and whole reads refuse files over a limit instead of running the
//! sandbox out of memory.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::util::{format_size, io_error};

/// The most text one call returns: a whole file, a `head`/`tail` answer, or
/// all of `read_multiple_files` together. The text goes into the result twice
/// (content and structured output), so this keeps results well under the
/// host's default 16 MiB result limit; it is also far more than a model's
/// context holds.
pub const MAX_TEXT_BYTES: u64 = 4 * 1024 * 1024;

/// The largest file `read_media_file` returns.
pub const MAX_MEDIA_BYTES: u64 = 8 * 1024 * 1024;

/// How much `tail` reads at a time, from the end backwards.
const CHUNK: u64 = 64 * 1024;

/// Open `path` for reading, refusing what is not a regular file (a directory,
/// a FIFO that would block) with a clear message. Returns the file and its
/// size. The check is on the handle that was opened, not on the path, so a
/// file swapped for something else between a check and the open cannot get
/// through (toolcage's host also refuses to open special files at all).
pub fn open_regular(path: &Path) -> Result<(File, u64), String> {
    let not_regular = || not_regular(path);
    let file = match File::open(path) {
        Ok(file) => file,
        // The host refuses special files; say so rather than "denied".
        Err(e)
            if e.kind() == io::ErrorKind::PermissionDenied
                && std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) =>
        {
            return Err(not_regular());
        }
        Err(e) => return Err(io_error("read", path, &e)),
    };
    let meta = file.metadata().map_err(|e| io_error("read", path, &e))?;
    if meta.is_dir() {
        return Err(is_directory(path));
    }
    if !meta.is_file() {
        return Err(not_regular());
    }
    Ok((file, meta.len()))
}

/// Read at most `limit` bytes of `file`; `None` if there is more. `size`
/// (its size when it was opened) sizes the buffer, so a file that did not
/// grow is read in one read and an end-of-file check, not in reads that
/// double from a few bytes; it may be wrong (the file may change), and only
/// `limit` bounds what is read.
#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
fn read_capped(file: File, size: u64, limit: u64, path: &Path) -> Result<Option<Vec<u8>>, String> {
    // One byte over, so the end-of-file read has room; never over the limit.
    let capacity = usize::try_from(size.min(limit) + 1).unwrap_or(usize::MAX);
    let mut bytes = Vec::with_capacity(capacity);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error("read", path, &e))?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

fn too_big(path: &Path, size: u64, limit: u64, hint: &str) -> String {
    format!(
        "`{}` is {} ({size} bytes), over the {} this tool returns at once; {hint}",
        path.display(),
        format_size(size),
        format_size(limit)
    )
}

/// The whole file as text (invalid UTF-8 replaced by U+FFFD), up to `limit`
/// bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    read_bytes(path, limit, "read part of it with `head` or `tail`").map(lossy)
}

/// The whole file as bytes, up to `limit`; `hint` ends the message for a
/// file over it.
#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
pub fn read_bytes(path: &Path, limit: u64, hint: &str) -> Result<Vec<u8>, String> {
    let (file, size) = open_regular(path)?;
    if size > limit {
        return Err(too_big(path, size, limit, hint));
    }
    read_capped(file, size, limit, path)?.ok_or_else(|| too_big(path, limit + 1, limit, hint))
}

/// The whole file as bytes, up to `limit`; `hint` ends the message for a
/// file over it. In the component, on the file's WASI descriptor: `open-at`,
/// `stat`, and `read`s from the start until the end of the file (see
/// `preopens`), with the same checks and words as [`open_regular`] and
/// [`read_capped`] give natively.
#[cfg(all(target_os = "wasi", target_env = "p2"))]
pub fn read_bytes(path: &Path, limit: u64, hint: &str) -> Result<Vec<u8>, String> {
    use wasi::filesystem::types::DescriptorType;

    use crate::preopens;

    let (descriptor, stat) = match preopens::open_read(path) {
        Ok(opened) => opened,
        // The host refuses special files; say so rather than "denied".
        Err(e)
            if e.kind() == io::ErrorKind::PermissionDenied
                && preopens::stat(path).is_ok_and(|named| {
                    !matches!(
                        named.type_,
                        DescriptorType::RegularFile | DescriptorType::Directory
                    )
                }) =>
        {
            return Err(not_regular(path));
        }
        Err(e) => return Err(io_error("read", path, &e)),
    };
    match stat.type_ {
        DescriptorType::RegularFile => {}
        DescriptorType::Directory => return Err(is_directory(path)),
        _ => return Err(not_regular(path)),
    }
    let size = stat.size;
    if size > limit {
        return Err(too_big(path, size, limit, hint));
    }
    // As `read_capped`: the size decides what each read asks for (the rest
    // of the file and one byte over, so that a file that did not grow is
    // read whole and then checked for its end with a one-byte read); only
    // `limit` bounds what is read, one byte past it telling a file that
    // grew over it. The host returns at most 64 KiB a read, and fills a
    // zeroed buffer of what was asked for, so no read asks for more than
    // it expects.
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        let offset = bytes.len() as u64;
        let expected = (size + 1).saturating_sub(offset);
        let want = if expected > 0 { expected } else { CHUNK }.min(limit + 1 - offset);
        let (data, end) = descriptor
            .read(want, offset)
            .map_err(|code| io_error("read", path, &preopens::to_io(code)))?;
        if data.is_empty() {
            break;
        }
        if bytes.is_empty() {
            // The first read's buffer. A file larger than one read (64
            // KiB) grows it once to what the size says is left (at most
            // `limit`), not by doubling as reads come in; a smaller one
            // has only the end check left, which adds nothing.
            bytes = data;
            let left = size.saturating_sub(bytes.len() as u64);
            if left > 0 {
                bytes.reserve_exact(usize::try_from(left).unwrap_or(0));
            }
        } else {
            bytes.extend_from_slice(&data);
        }
        if bytes.len() as u64 > limit {
            return Err(too_big(path, limit + 1, limit, hint));
        }
        if end {
            break;
        }
    }
    Ok(bytes)
}

fn not_regular(path: &Path) -> String {
    format!("cannot read `{}`: it is not a regular file", path.display())
}

fn is_directory(path: &Path) -> String {
    format!(
        "cannot read `{}`: it is a directory (use list_directory or directory_tree)",
        path.display()
    )
}

fn lossy(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Drop one line terminator (`\n` or `\r\n`) from the end of `line`.
fn chomp(line: &mut Vec<u8>) {
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    }
}

/// The first `n` lines, joined with `\n` (no final newline; `\r\n` line ends
/// become `\n`). Reads no further than the `n`th line.
pub fn head(path: &Path, n: u64) -> Result<String, String> {
    let (file, _) = open_regular(path)?;
    let mut reader = BufReader::with_capacity(CHUNK as usize, file.take(MAX_TEXT_BYTES + 1));
    let mut out: Vec<u8> = Vec::new();
    let mut line = Vec::new();
    for index in 0..n {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_error("read", path, &e))?;
        if read == 0 {
            break;
        }
        let complete = line.last() == Some(&b'\n');
        chomp(&mut line);
        if index > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(&line);
        if out.len() as u64 > MAX_TEXT_BYTES {
            return Err(lines_too_big(path, "first", n));
        }
        if !complete {
            // End of file, or the byte cap cut a line short.
            if reader.get_ref().limit() == 0 {
                return Err(lines_too_big(path, "first", n));
            }
            break;
        }
    }
    Ok(lossy(out))
}

fn lines_too_big(path: &Path, which: &str, n: u64) -> String {
    format!(
        "the {which} {n} lines of `{}` are over {}, more than this tool returns at once; ask \
         for fewer lines",
        path.display(),
        format_size(MAX_TEXT_BYTES)
    )
}

/// The last `n` lines, joined with `\n` (no final newline; `\r\n` becomes
/// `\n`). A final line terminator ends the last line, it does not start an
/// empty one. Scans backwards from the end in chunks, then reads only those
/// lines.
pub fn tail(path: &Path, n: u64) -> Result<String, String> {
    let (mut file, size) = open_regular(path)?;
    if n == 0 || size == 0 {
        return Ok(String::new());
    }
    let err = |e: io::Error| io_error("read", path, &e);
    // Ignore a terminator on the very last byte: it ends the last line.
    let mut end = size;
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(size - 1)).map_err(err)?;
    file.read_exact(&mut last).map_err(err)?;
    if last[0] == b'\n' {
        end -= 1;
    }
    // Find the start of the nth line from the end: just past the nth `\n`
    // counting back from `end`.
    let mut start = 0;
    let mut found = 0u64;
    let mut position = end;
    let mut chunk = vec![0u8; CHUNK as usize];
    'scan: while position > 0 {
        let len = CHUNK.min(position);
        position -= len;
        let buf = &mut chunk[..len as usize];
        file.seek(SeekFrom::Start(position)).map_err(err)?;
        file.read_exact(buf).map_err(err)?;
        for (i, byte) in buf.iter().enumerate().rev() {
            if *byte == b'\n' {
                found += 1;
                if found == n {
                    start = position + i as u64 + 1;
                    break 'scan;
                }
            }
        }
        if end - position > MAX_TEXT_BYTES {
            return Err(lines_too_big(path, "last", n));
        }
    }
    if end - start > MAX_TEXT_BYTES {
        return Err(lines_too_big(path, "last", n));
    }
    let mut bytes = vec![0u8; (end - start) as usize];
    file.seek(SeekFrom::Start(start)).map_err(err)?;
    file.read_exact(&mut bytes).map_err(err)?;
    if bytes.last() == Some(&b'\r') {
        bytes.pop();
    }
    Ok(lossy(bytes).replace("\r\n", "\n"))
}

/// The MIME type `read_media_file` reports for a file name (the reference
/// server's table); anything else is `application/octet-stream`.
pub fn mime_type(path: &Path) -> &'static str {
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "svg" => "image/svg+xml",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "ogg" => "audio/ogg",
        "flac" => "audio/flac",
        _ => "application/octet-stream",
    }
}
