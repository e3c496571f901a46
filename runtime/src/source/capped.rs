//! Reading a local file whole, but never more than a cap: the one reader
//! for a component given as a path, the lock, a key and a credentials
//! file.

/// The file at `path`, read whole if it holds at most `max` bytes (no more
/// than `max + 1` are ever read, whatever the file is): `Ok(None)` if it
/// does not exist.
///
/// # Errors
///
/// It cannot be read, or it is larger than `max`: the message names the
/// file and ends with `why`, what a file that large cannot be.
pub(crate) fn read_capped(
    path: &std::path::Path,
    max: u64,
    why: &str,
) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read as _;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read `{}`: {error}", path.display())),
    };
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read `{}`: {error}", path.display()))?;
    if bytes.len() as u64 > max {
        let size = if max.is_multiple_of(1024 * 1024) {
            format!("{} MiB", max / (1024 * 1024))
        } else if max.is_multiple_of(1024) {
            format!("{} KiB", max / 1024)
        } else {
            format!("{max} bytes")
        };
        return Err(format!("`{}` is larger than {size}; {why}", path.display()));
    }
    Ok(Some(bytes))
}
