//! Many distinct components from one, for the many-tools start-up
//! benchmark.
//!
//! Copy `i` of a component is its bytes with a custom section appended
//! (section id 0, size, the name `toolcage-bench-copy`, the copy's index as
//! payload): a component may end with a custom section, so every copy is a
//! valid component with the same code and a different SHA-256, which is
//! what toolcage keys its compile cache on. Each copy is therefore compiled
//! (cold cache) or loaded from the cache (warm) on its own, as 50 different
//! tools would be.
//!
//! With `--rename NAME`, every occurrence of the bytes `NAME` (a tool's
//! name, a string in the component's data) is replaced by a name of the
//! same length ending in the copy's index (`count_primes` ->
//! `count_prim07`), so that each copy serves tools of its own instead of
//! being shadowed by the first copy. The length is kept so that no offset
//! in the binary moves.

use std::path::Path;

use anyhow::{Context as _, bail, ensure};

/// The custom section's name.
const SECTION_NAME: &str = "toolcage-bench-copy";

/// Write `count` copies of `component` to `out` as `copy-000.wasm`, ...
/// (created if missing), renaming the tool names in `rename`. Returns the
/// file names written.
///
/// # Errors
///
/// The component cannot be read, a name to rename does not occur in it or
/// is too short for the index, or a copy cannot be written.
pub fn write_copies(
    component: &Path,
    count: u32,
    rename: &[String],
    out: &Path,
) -> anyhow::Result<Vec<String>> {
    let bytes = std::fs::read(component)
        .with_context(|| format!("cannot read `{}`", component.display()))?;
    ensure!(
        bytes.starts_with(b"\0asm"),
        "`{}` is not WebAssembly (no `\\0asm` header)",
        component.display()
    );
    let width = count.saturating_sub(1).to_string().len();
    for name in rename {
        ensure!(
            name.len() > width,
            "--rename `{name}` is too short to end in a {width}-digit index"
        );
        ensure!(
            find(&bytes, name.as_bytes()).is_some(),
            "--rename `{name}`: the name does not occur in `{}`",
            component.display()
        );
    }
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create the folder `{}`", out.display()))?;
    let mut written = Vec::new();
    for index in 0..count {
        let mut copy = bytes.clone();
        for name in rename {
            let new = indexed_name(name, index, width);
            replace_all(&mut copy, name.as_bytes(), new.as_bytes());
        }
        append_custom_section(&mut copy, SECTION_NAME, index.to_string().as_bytes());
        let file = format!("copy-{index:0width$}.wasm");
        let path = out.join(&file);
        std::fs::write(&path, &copy)
            .with_context(|| format!("cannot write `{}`", path.display()))?;
        written.push(file);
    }
    Ok(written)
}

/// `name` with its last `width` characters replaced by `index`, zero-padded.
fn indexed_name(name: &str, index: u32, width: usize) -> String {
    let keep = name.len() - width;
    format!("{}{index:0width$}", &name[..keep])
}

/// Append a custom section (id 0): size, then the name (length-prefixed),
/// then the payload.
fn append_custom_section(module: &mut Vec<u8>, name: &str, payload: &[u8]) {
    let mut contents = Vec::new();
    leb128(&mut contents, name.len() as u64);
    contents.extend_from_slice(name.as_bytes());
    contents.extend_from_slice(payload);
    module.push(0);
    leb128(module, contents.len() as u64);
    module.extend_from_slice(&contents);
}

/// Unsigned LEB128.
fn leb128(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Replace every occurrence of `from` by `to` (same length) in place.
fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    debug_assert_eq!(from.len(), to.len());
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], from) {
        let start = at + found;
        bytes[start..start + to.len()].copy_from_slice(to);
        at = start + to.len();
    }
}

/// `--rename` values must be plain tool names: the replacement keeps them
/// valid names.
pub fn check_names(names: &[String]) -> anyhow::Result<()> {
    for name in names {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        {
            bail!("--rename `{name}` is not a tool name (A-Za-z0-9_-. only)");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb128_encodes() {
        let encode = |v| {
            let mut out = Vec::new();
            leb128(&mut out, v);
            out
        };
        assert_eq!(encode(0), [0]);
        assert_eq!(encode(127), [0x7f]);
        assert_eq!(encode(128), [0x80, 0x01]);
        assert_eq!(encode(624_485), [0xe5, 0x8e, 0x26]);
    }

    #[test]
    fn custom_section_layout() {
        let mut module = b"\0asm\x0d\0\x01\0".to_vec();
        append_custom_section(&mut module, "ab", b"7");
        assert_eq!(&module[8..], [0, 4, 2, b'a', b'b', b'7']);
    }

    #[test]
    fn renames_keep_length() {
        assert_eq!(indexed_name("count_primes", 7, 2), "count_prim07");
        assert_eq!(indexed_name("abc", 123, 3), "123");
        let mut bytes = b"xx count_primes yy count_primes".to_vec();
        replace_all(&mut bytes, b"count_primes", b"count_prim07");
        assert_eq!(bytes, b"xx count_prim07 yy count_prim07");
        assert!(check_names(&["get_current_time".into()]).is_ok());
        assert!(check_names(&["a b".into()]).is_err());
    }
}
