//! `fs`: the filesystem tools of the reference MCP filesystem server
//! (`@modelcontextprotocol/server-filesystem`), same names, same arguments,
//! same text output, plus `delete_file`, running inside toolcage's sandbox.
//!
//! The allowed roots are the component's WASI preopens: each root the
//! operator granted is preopened at its own absolute path (read-only roots
//! with read-only permissions), so the model's absolute paths work unchanged
//! with `std::fs` (listings and whole-file reads call WASI on the preopens
//! directly, see `preopens`), and the sandbox, not this code, keeps every
//! access inside them. The path checks here only turn would-be sandbox refusals into
//! messages a model can act on. A relative path is resolved against the
//! first root, as in the reference server. See `docs/fs-parity.md` for every
//! difference from the reference and why.

mod edit;
mod paths;
#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod preopens;
mod read;
mod roots;
mod util;
mod walk;

#[cfg(test)]
mod tests;

use std::fs;
use std::io::{self, Write as _};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolcage_guest::{
    Content, JsonOutput, JsonSchema, Output, ResourceBody, ToolOutput, export, tool,
};

use crate::edit::Edit;
use crate::read::{MAX_MEDIA_BYTES, MAX_TEXT_BYTES};
use crate::roots::Root;
#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
pub use crate::roots::set_native_roots;
use crate::roots::{check_writable, resolve, resolve_writable, show};
use crate::util::{format_size, io_error, iso_time, name_order};
use crate::walk::{Excludes, Kind, MAX_ENTRIES};

/// A result whose text is what the reference server prints and whose
/// structured output is `T` (which always carries that text as `content`,
/// as the reference's structured output does, plus typed fields where they
/// help). A note about an incomplete result follows the text as a second
/// content item, so the first stays parseable.
pub struct Reply<T> {
    pub text: String,
    pub note: Option<String>,
    pub data: T,
}

impl<T: Serialize + JsonSchema> ToolOutput for Reply<T> {
    fn output_schema() -> Option<Value> {
        Some(schemars::schema_for!(T).to_value())
    }

    fn into_output(self) -> Output {
        let (content, data) = self.into_parts();
        Output {
            content,
            structured: serde_json::to_value(&data).ok(),
        }
    }

    // What the component returns: the structured output serialised once,
    // straight from `T` (a large listing built as a `Value` first took a
    // quarter of the call).
    fn into_json_output(self) -> JsonOutput {
        let (content, data) = self.into_parts();
        JsonOutput {
            content,
            structured: toolcage_guest::json::to_string(&data).ok(),
        }
    }
}

impl<T> Reply<T> {
    /// The content items (the text, then the note if any) and the data.
    fn into_parts(self) -> (Vec<Content>, T) {
        let mut content = vec![Content::Text(self.text)];
        content.extend(self.note.map(Content::Text));
        (content, self.data)
    }
}

/// Structured output of the tools whose answer is one text.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TextResult {
    /// The same text as the result's content.
    pub content: String,
}

fn text_reply(text: String) -> Reply<TextResult> {
    Reply {
        data: TextResult {
            content: text.clone(),
        },
        text,
        note: None,
    }
}

// ---------------------------------------------------------------------------
// Reading

/// Arguments of `read_text_file` (and of the deprecated `read_file`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadTextFileArgs {
    /// The file: an absolute path under an allowed root (a relative path is
    /// resolved against the first root).
    pub path: String,
    /// Return only the last N lines of the file.
    #[serde(default)]
    pub tail: Option<u64>,
    /// Return only the first N lines of the file.
    #[serde(default)]
    pub head: Option<u64>,
}

/// Read a file as UTF-8 text, whatever its extension (invalid bytes become
/// U+FFFD). Give `head` to get only the first N lines, or `tail` for only the
/// last N lines (not both); they read just that part, so use them for large
/// files. Whole files over 4 MiB are refused. Works only within the allowed
/// directories.
#[tool(title = "Read Text File", read_only, idempotent)]
pub fn read_text_file(args: ReadTextFileArgs) -> Result<Reply<TextResult>, String> {
    let resolved = resolve(&args.path)?;
    let text = match (args.head, args.tail) {
        (Some(_), Some(_)) => {
            return Err(
                "`head` and `tail` cannot be used together: give one of them, or \
                        neither to read the whole file"
                    .into(),
            );
        }
        (Some(n), None) => read::head(&resolved.path, n)?,
        (None, Some(n)) => read::tail(&resolved.path, n)?,
        (None, None) => read::read_text(&resolved.path, MAX_TEXT_BYTES)?,
    };
    Ok(text_reply(text))
}

/// Read a file as text. DEPRECATED: use read_text_file, which this is an
/// alias of (kept for clients written against the reference server).
#[tool(
    name = "read_file",
    title = "Read File (Deprecated)",
    read_only,
    idempotent
)]
pub fn read_file(args: ReadTextFileArgs) -> Result<Reply<TextResult>, String> {
    read_text_file(args)
}

/// Arguments of `read_media_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadMediaFileArgs {
    /// The file: an absolute path under an allowed root (a relative path is
    /// resolved against the first root).
    pub path: String,
}

/// Read an image or audio file and return it as image or audio content
/// (base64 with its MIME type, from the extension: png, jpg/jpeg, gif, webp,
/// bmp, svg, mp3, wav, ogg, flac). Any other file comes back as an embedded
/// binary resource (`application/octet-stream`). Files over 8 MiB are
/// refused. Works only within the allowed directories.
#[tool(title = "Read Media File", read_only, idempotent)]
pub fn read_media_file(args: ReadMediaFileArgs) -> Result<Output, String> {
    let resolved = resolve(&args.path)?;
    let data = read::read_bytes(
        &resolved.path,
        MAX_MEDIA_BYTES,
        "it is too large to return as media content",
    )?;
    let mime_type = read::mime_type(&resolved.path).to_owned();
    let item = if mime_type.starts_with("image/") {
        Content::Image { data, mime_type }
    } else if mime_type.starts_with("audio/") {
        Content::Audio { data, mime_type }
    } else {
        Content::Resource {
            uri: util::file_url(&resolved.path),
            mime_type: Some(mime_type),
            body: ResourceBody::Blob(data),
        }
    };
    Ok(Output::new(vec![item]))
}

/// Arguments of `read_multiple_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadMultipleFilesArgs {
    /// The files to read: absolute paths under the allowed roots (relative
    /// paths are resolved against the first root).
    #[schemars(length(min = 1))]
    pub paths: Vec<String>,
}

/// Read several text files in one call, to compare or analyse them together.
/// Each file's text follows its path (`path:` then the text), files are
/// separated by `---`, and a file that cannot be read shows
/// `path: Error - reason` without failing the others. At most 4 MiB in all.
/// Works only within the allowed directories.
#[tool(title = "Read Multiple Files", read_only, idempotent)]
pub fn read_multiple_files(args: ReadMultipleFilesArgs) -> Result<Reply<TextResult>, String> {
    if args.paths.is_empty() {
        return Err("`paths` is empty: give at least one file to read".into());
    }
    let mut budget = MAX_TEXT_BYTES;
    let mut parts = Vec::with_capacity(args.paths.len());
    for raw in &args.paths {
        let result = resolve(raw).and_then(|r| {
            let size = fs::metadata(&r.path).map_or(0, |m| m.len());
            if size > MAX_TEXT_BYTES {
                // Too big on its own: the usual message.
                return read::read_text(&r.path, MAX_TEXT_BYTES);
            }
            if size > budget {
                return Err(format!(
                    "the files before it used up the {} one call returns; read it in another \
                     call",
                    format_size(MAX_TEXT_BYTES)
                ));
            }
            read::read_text(&r.path, budget)
        });
        parts.push(match result {
            Ok(text) => {
                budget = budget.saturating_sub(text.len() as u64);
                format!("{raw}:\n{text}\n")
            }
            Err(error) => format!("{raw}: Error - {error}"),
        });
    }
    Ok(text_reply(parts.join("\n---\n")))
}

// ---------------------------------------------------------------------------
// Writing

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// The file: an absolute path under a writable allowed root (a relative
    /// path is resolved against the first root). Its directory must exist.
    pub path: String,
    /// The complete new content, written as UTF-8.
    pub content: String,
}

/// Create a file, or replace an existing file's whole content, with the given
/// text. Careful: an existing file is overwritten without warning (the new
/// content replaces it atomically). Works only within the allowed
/// directories, and not under read-only ones.
#[tool(title = "Write File", destructive, idempotent)]
pub fn write_file(args: WriteFileArgs) -> Result<Reply<TextResult>, String> {
    let resolved = resolve_writable(&args.path)?;
    write_atomically(&resolved.path, args.content.as_bytes())?;
    Ok(text_reply(format!("Successfully wrote to {}", args.path)))
}

/// Write `bytes` to `path`: a new file is created in place; an existing one
/// is replaced by writing a temporary file beside it and renaming it over,
/// so the file is never seen half-written.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(format!(
            "cannot write `{}`: it is a directory",
            path.display()
        ));
    }
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(mut file) => {
            return file
                .write_all(bytes)
                .and_then(|()| file.flush())
                .map_err(|e| io_error("write", path, &e));
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(write_error(path, &e)),
    }
    // `<name>.<random>.tmp` beside the file, the name shortened so the
    // temporary name stays within the usual 255-byte limit.
    let name: String = path.file_name().map_or_else(String::new, |n| {
        n.to_string_lossy().chars().take(100).collect()
    });
    let temp = path.with_file_name(format!("{name}.{:016x}.tmp", util::random_u64()));
    let written = fs::write(&temp, bytes).and_then(|()| fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(io_error("write", path, &e));
    }
    Ok(())
}

/// A failed create, with the likely cause spelled out.
fn write_error(path: &Path, error: &io::Error) -> String {
    if error.kind() == io::ErrorKind::NotFound
        && let Some(parent) = path.parent()
        && !parent.is_dir()
    {
        return format!(
            "cannot write `{}`: its directory `{}` does not exist (create it first with \
             create_directory)",
            path.display(),
            parent.display()
        );
    }
    io_error("write", path, error)
}

/// One replacement of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditOperation {
    /// The text to find. It should match the file exactly; if it does not,
    /// lines that match once leading and trailing whitespace is ignored are
    /// accepted.
    #[serde(rename = "oldText")]
    pub old_text: String,
    /// The text to put in its place.
    #[serde(rename = "newText")]
    pub new_text: String,
}

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// The file: an absolute path under an allowed root (a relative path is
    /// resolved against the first root).
    pub path: String,
    /// The replacements, applied in order, each to the result of the ones
    /// before.
    pub edits: Vec<EditOperation>,
    /// Only show the diff; change nothing.
    #[serde(rename = "dryRun", default)]
    pub dry_run: bool,
}

/// Edit a text file by replacing text: each edit replaces the first
/// occurrence of `oldText` with `newText`, in order. If `oldText` does not
/// match exactly, a run of lines equal to it up to each line's surrounding
/// whitespace is replaced instead, re-indented to match the file. If any
/// `oldText` cannot be found, the call fails and nothing is changed. Returns
/// a git-style unified diff of the change; with `dryRun` the diff is all it
/// does (preview first when unsure). Works only within the allowed
/// directories, and not under read-only ones (except for dry runs).
#[tool(title = "Edit File", destructive)]
pub fn edit_file(args: EditFileArgs) -> Result<Reply<TextResult>, String> {
    let resolved = resolve(&args.path)?;
    if !args.dry_run {
        check_writable(&args.path, &resolved)?;
    }
    let path = &resolved.path;
    let bytes = read::read_bytes(path, MAX_TEXT_BYTES, "edit_file edits smaller files only")?;
    let original = String::from_utf8(bytes).map_err(|_| {
        format!(
            "cannot edit `{}`: it is not UTF-8 text (edit_file edits text files only)",
            path.display()
        )
    })?;
    // Keep Windows line endings if the file uses them throughout; otherwise
    // the file is written with `\n` endings, as the reference server does.
    let crlf = original.contains("\r\n") && !original.replace("\r\n", "").contains('\n');
    let before = edit::normalize_newlines(&original);
    let edits: Vec<Edit> = args
        .edits
        .into_iter()
        .map(|e| Edit {
            old_text: e.old_text,
            new_text: e.new_text,
        })
        .collect();
    let after = edit::apply_edits(&before, &edits, &path.display().to_string())?;
    let diff = edit::fenced_diff(&before, &after, &path.display().to_string());
    if !args.dry_run && after != before {
        let output = if crlf {
            after.replace('\n', "\r\n")
        } else {
            after
        };
        write_atomically(path, output.as_bytes())?;
    }
    Ok(text_reply(diff))
}

/// Arguments of `create_directory`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDirectoryArgs {
    /// The directory: an absolute path under a writable allowed root (a
    /// relative path is resolved against the first root).
    pub path: String,
}

/// Create a directory, with any missing parents. Succeeds without change if
/// it already exists, so it also serves to make sure a directory is there.
/// Works only within the allowed directories, and not under read-only ones.
#[tool(title = "Create Directory", idempotent)]
pub fn create_directory(args: CreateDirectoryArgs) -> Result<Reply<TextResult>, String> {
    let resolved = resolve(&args.path)?;
    let path = &resolved.path;
    if !path.is_dir() {
        check_writable(&args.path, &resolved)?;
        fs::create_dir_all(path).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory => format!(
                "cannot create directory `{}`: it, or one of its parents, exists and is not a \
                 directory",
                path.display()
            ),
            _ => io_error("create directory", path, &e),
        })?;
    }
    Ok(text_reply(format!(
        "Successfully created directory {}",
        args.path
    )))
}

/// Arguments of `move_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveFileArgs {
    /// What to move: an absolute path under a writable allowed root.
    pub source: String,
    /// Its new path, which must not exist yet (under a writable allowed
    /// root; its directory must exist).
    pub destination: String,
}

/// Move or rename a file or directory, within a directory or to another one
/// (also between roots). Fails if the destination already exists: nothing
/// is overwritten. Both paths must be within the allowed directories, and
/// not under read-only ones.
#[tool(title = "Move File", destructive)]
pub fn move_file(args: MoveFileArgs) -> Result<Reply<TextResult>, String> {
    let source = resolve_writable(&args.source)?;
    let destination = resolve_writable(&args.destination)?;
    let (from, to) = (&source.path, &destination.path);
    if *from == source.root.path {
        return Err(format!(
            "cannot move {}: it is an allowed root itself; move what is inside it instead",
            show(&args.source, from)
        ));
    }
    let meta = fs::symlink_metadata(from).map_err(|e| io_error("move", from, &e))?;
    if to != from && to.starts_with(from) {
        return Err(format!(
            "cannot move {} into {}: a directory cannot be moved into itself",
            show(&args.source, from),
            show(&args.destination, to)
        ));
    }
    if fs::symlink_metadata(to).is_ok() {
        return Err(format!(
            "cannot move {} to {}: the destination already exists (move_file does not \
             overwrite; delete it first or choose another name)",
            show(&args.source, from),
            show(&args.destination, to)
        ));
    }
    match fs::rename(from, to) {
        Ok(()) => {}
        // Between filesystems (or roots on different devices) a file is
        // copied, then the original removed.
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices && meta.is_file() => {
            fs::copy(from, to).map_err(|e| io_error("copy", to, &e))?;
            fs::remove_file(from).map_err(|e| io_error("remove", from, &e))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(match to.parent() {
                Some(parent) if !parent.is_dir() => format!(
                    "cannot move to `{}`: its directory `{}` does not exist (create it first \
                     with create_directory)",
                    to.display(),
                    parent.display()
                ),
                _ => io_error("move", from, &e),
            });
        }
        Err(e) => {
            return Err(format!(
                "{} (moving to `{}`)",
                io_error("move", from, &e),
                to.display()
            ));
        }
    }
    Ok(text_reply(format!(
        "Successfully moved {} to {}",
        args.source, args.destination
    )))
}

/// Arguments of `delete_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteFileArgs {
    /// The file: an absolute path under a writable allowed root (a relative
    /// path is resolved against the first root).
    pub path: String,
}

/// Delete one file (a symlink is removed itself, not its target). Refuses
/// directories: this tool never removes a directory or anything recursively.
/// Cannot be undone. Works only within the allowed directories, and not
/// under read-only ones. (Not in the reference filesystem server.)
#[tool(title = "Delete File", destructive, idempotent)]
pub fn delete_file(args: DeleteFileArgs) -> Result<Reply<TextResult>, String> {
    let resolved = resolve_writable(&args.path)?;
    let path = &resolved.path;
    let meta = fs::symlink_metadata(path).map_err(|e| io_error("delete", path, &e))?;
    if meta.is_dir() {
        return Err(format!(
            "cannot delete `{}`: it is a directory, and delete_file deletes files only",
            path.display()
        ));
    }
    fs::remove_file(path).map_err(|e| io_error("delete", path, &e))?;
    Ok(text_reply(format!("Successfully deleted {}", args.path)))
}

// ---------------------------------------------------------------------------
// Directories

/// Arguments of `list_directory`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirectoryArgs {
    /// The directory: an absolute path under an allowed root (a relative path
    /// is resolved against the first root).
    pub path: String,
}

/// One entry of a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListedEntry {
    pub name: String,
    /// `file`, `directory`, `symlink` (not followed) or `other`.
    #[serde(rename = "type")]
    pub kind: Kind,
}

/// Structured output of `list_directory`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DirectoryListing {
    /// The same text as the result's content.
    pub content: String,
    /// The entries, in name order.
    pub entries: Vec<ListedEntry>,
    /// True when the directory has more entries than were listed.
    pub truncated: bool,
}

/// List a directory's files and subdirectories, one per line, each prefixed
/// `[DIR]` or `[FILE]`, in name order (at most 10,000). Works only within
/// the allowed directories.
#[tool(title = "List Directory", read_only, idempotent)]
pub fn list_directory(args: ListDirectoryArgs) -> Result<Reply<DirectoryListing>, String> {
    let resolved = resolve(&args.path)?;
    let listing = walk::list(&resolved.path, MAX_ENTRIES)?;
    // One buffer, not a `format!` and a `String` per entry.
    let mut text = String::new();
    for (i, e) in listing.entries.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(e.kind.tag());
        text.push(' ');
        text.push_str(&e.name);
    }
    let note = listing_note(&listing);
    Ok(Reply {
        data: DirectoryListing {
            content: text.clone(),
            entries: listing
                .entries
                .into_iter()
                .map(|e| ListedEntry {
                    name: e.name,
                    kind: e.kind,
                })
                .collect(),
            truncated: note.is_some(),
        },
        text,
        note,
    })
}

fn listing_note(listing: &walk::Listing) -> Option<String> {
    let mut parts = Vec::new();
    if listing.omitted > 0 {
        parts.push(format!(
            "showing {} of {} entries (the most one listing returns); use search_files to \
             find specific names",
            listing.entries.len(),
            listing.entries.len() + listing.omitted
        ));
    }
    if listing.unnamed > 0 {
        parts.push(walk::unnamed_note(listing.unnamed));
    }
    (!parts.is_empty()).then(|| format!("Incomplete result: {}.", parts.join("; ")))
}

/// How `list_directory_with_sizes` orders entries.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SortBy {
    /// By name, A to Z.
    #[default]
    Name,
    /// By size, largest first.
    Size,
}

/// Arguments of `list_directory_with_sizes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirectoryWithSizesArgs {
    /// The directory: an absolute path under an allowed root (a relative path
    /// is resolved against the first root).
    pub path: String,
    /// Sort entries by `name` (default) or `size` (largest first).
    #[serde(rename = "sortBy", default)]
    pub sort_by: SortBy,
}

/// One entry of a sized listing.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SizedEntry {
    pub name: String,
    /// `file`, `directory`, `symlink` (not followed) or `other`.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// Size in bytes (of the target, for a symlink; 0 if it cannot be
    /// read); absent for directories.
    pub size: Option<u64>,
}

/// Structured output of `list_directory_with_sizes`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SizedListing {
    /// The same text as the result's content.
    pub content: String,
    /// The entries, in the requested order.
    pub entries: Vec<SizedEntry>,
    /// How many entries are not directories.
    #[serde(rename = "totalFiles")]
    pub total_files: usize,
    /// How many entries are directories.
    #[serde(rename = "totalDirectories")]
    pub total_directories: usize,
    /// The sizes of the non-directories, added up, in bytes.
    #[serde(rename = "combinedSize")]
    pub combined_size: u64,
    /// True when the directory has more entries than were listed.
    pub truncated: bool,
}

/// List a directory like list_directory, with each file's size (B, KB, MB,
/// ...) and a summary: how many files and directories, and their combined
/// size. Sort by `name` (default) or `size`. Works only within the allowed
/// directories.
#[tool(title = "List Directory with Sizes", read_only, idempotent)]
pub fn list_directory_with_sizes(
    args: ListDirectoryWithSizesArgs,
) -> Result<Reply<SizedListing>, String> {
    let resolved = resolve(&args.path)?;
    let listing = walk::list(&resolved.path, MAX_ENTRIES)?;
    let note = listing_note(&listing);
    let mut entries: Vec<SizedEntry> = listing
        .entries
        .into_iter()
        .map(|e| SizedEntry {
            size: (!e.kind.is_dir())
                .then(|| fs::metadata(resolved.path.join(&e.name)).map_or(0, |m| m.len())),
            name: e.name,
            kind: e.kind,
        })
        .collect();
    if let SortBy::Size = args.sort_by {
        // Largest first; directories (no size) last, by name.
        entries.sort_by(|a, b| {
            b.size
                .cmp(&a.size)
                .then_with(|| name_order(&a.name, &b.name))
        });
    }
    let mut lines: Vec<String> = entries
        .iter()
        .map(|e| {
            let size = e
                .size
                .map_or_else(String::new, |size| format!("{:>10}", format_size(size)));
            format!("{} {:<30} {size}", e.kind.tag(), e.name)
        })
        .collect();
    let total_files = entries.iter().filter(|e| !e.kind.is_dir()).count();
    let total_directories = entries.len() - total_files;
    let combined_size: u64 = entries.iter().filter_map(|e| e.size).sum();
    lines.push(String::new());
    lines.push(format!(
        "Total: {total_files} files, {total_directories} directories"
    ));
    lines.push(format!("Combined size: {}", format_size(combined_size)));
    let text = lines.join("\n");
    Ok(Reply {
        data: SizedListing {
            content: text.clone(),
            entries,
            total_files,
            total_directories,
            combined_size,
            truncated: note.is_some(),
        },
        text,
        note,
    })
}

/// Arguments of `directory_tree`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectoryTreeArgs {
    /// The directory: an absolute path under an allowed root (a relative path
    /// is resolved against the first root).
    pub path: String,
    /// Glob patterns of paths to leave out, relative to `path`. A pattern
    /// without `*` also matches that name at any depth (`node_modules`
    /// leaves out every `node_modules` directory and its contents).
    #[serde(rename = "excludePatterns", default)]
    pub exclude_patterns: Vec<String>,
}

/// Structured output of `directory_tree`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TreeResult {
    /// The same text as the result's content (the tree as indented JSON).
    pub content: String,
    /// The tree.
    pub tree: Vec<walk::TreeEntry>,
    /// True when the tree is incomplete (see the second content item).
    pub truncated: bool,
}

/// Get everything under a directory, recursively, as a JSON array indented
/// with two spaces. Each entry has `name` and `type` (`file` or
/// `directory`); directories also have `children` (possibly empty), files
/// do not. Symlinks are not followed. Leave paths out with
/// `excludePatterns`. At most 10,000 entries; a larger tree is cut short and
/// a note says so. Works only within the allowed directories.
#[tool(title = "Directory Tree", read_only, idempotent)]
pub fn directory_tree(args: DirectoryTreeArgs) -> Result<Reply<TreeResult>, String> {
    let resolved = resolve(&args.path)?;
    let excludes = Excludes::new(&args.exclude_patterns)?;
    let (tree, truncation) = walk::tree(&resolved.path, &excludes)?;
    let text = serde_json::to_string_pretty(&tree).map_err(|e| e.to_string())?;
    let note = truncation.note("entries");
    Ok(Reply {
        data: TreeResult {
            content: text.clone(),
            tree,
            truncated: truncation.any(),
        },
        text,
        note,
    })
}

/// Arguments of `search_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchFilesArgs {
    /// The directory to search: an absolute path under an allowed root (a
    /// relative path is resolved against the first root).
    pub path: String,
    /// A glob matched against each path relative to `path`: `*.rs` matches
    /// in `path` itself, `**/*.rs` at any depth; `*` and `?` do not cross
    /// `/`, `{a,b}` gives alternatives.
    pub pattern: String,
    /// Glob patterns of paths to skip, with everything under them, relative
    /// to `path`. A pattern without `*` also matches that name at any depth.
    #[serde(rename = "excludePatterns", default)]
    pub exclude_patterns: Vec<String>,
}

/// Structured output of `search_files`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchResult {
    /// The same text as the result's content.
    pub content: String,
    /// The full paths that matched.
    pub matches: Vec<String>,
    /// True when the search stopped early (see the second content item).
    pub truncated: bool,
}

/// Search a directory recursively for files and directories whose path,
/// relative to it, matches a glob `pattern`: `*.ext` for the directory
/// itself, `**/*.ext` for all subdirectories. Returns the full path of each
/// match, one per line, or `No matches found`. At most 10,000 matches.
/// Symlinks are not followed. Works only within the allowed directories.
#[tool(title = "Search Files", read_only, idempotent)]
pub fn search_files(args: SearchFilesArgs) -> Result<Reply<SearchResult>, String> {
    let resolved = resolve(&args.path)?;
    let pattern = walk::glob(&args.pattern)?;
    let excludes = Excludes::new(&args.exclude_patterns)?;
    let (found, truncation) = walk::search(&resolved.path, &pattern, &excludes)?;
    let matches: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
    let text = if matches.is_empty() {
        "No matches found".to_owned()
    } else {
        matches.join("\n")
    };
    Ok(Reply {
        data: SearchResult {
            content: text.clone(),
            matches,
            truncated: truncation.any(),
        },
        text,
        note: truncation.note("matches"),
    })
}

/// Arguments of `get_file_info`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetFileInfoArgs {
    /// The file or directory: an absolute path under an allowed root (a
    /// relative path is resolved against the first root).
    pub path: String,
}

/// Structured output of `get_file_info`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FileInfo {
    /// The same text as the result's content.
    pub content: String,
    /// Size in bytes.
    pub size: u64,
    /// Creation time (ISO 8601, UTC), where the platform records it.
    pub created: Option<String>,
    /// Last modification time (ISO 8601, UTC).
    pub modified: Option<String>,
    /// Last access time (ISO 8601, UTC).
    pub accessed: Option<String>,
    #[serde(rename = "isDirectory")]
    pub is_directory: bool,
    #[serde(rename = "isFile")]
    pub is_file: bool,
    /// `read-write`, or `read-only` under a read-only root.
    pub access: String,
}

/// Get a file's or directory's metadata without reading it: size, creation,
/// modification and access times (ISO 8601, UTC), whether it is a file or a
/// directory, and whether this tool may change it (`access`). Symlinks are
/// followed. Works only within the allowed directories.
#[tool(title = "Get File Info", read_only, idempotent)]
pub fn get_file_info(args: GetFileInfoArgs) -> Result<Reply<FileInfo>, String> {
    let resolved = resolve(&args.path)?;
    let meta = fs::metadata(&resolved.path).map_err(|e| io_error("stat", &resolved.path, &e))?;
    let time = |t: io::Result<std::time::SystemTime>| t.ok().map(iso_time);
    let info = FileInfo {
        content: String::new(),
        size: meta.len(),
        created: time(meta.created()),
        modified: time(meta.modified()),
        accessed: time(meta.accessed()),
        is_directory: meta.is_dir(),
        is_file: meta.is_file(),
        access: if resolved.root.writable {
            "read-write"
        } else {
            "read-only"
        }
        .to_owned(),
    };
    let unknown = || "unavailable".to_owned();
    let text = [
        format!("size: {}", info.size),
        format!("created: {}", info.created.clone().unwrap_or_else(unknown)),
        format!(
            "modified: {}",
            info.modified.clone().unwrap_or_else(unknown)
        ),
        format!(
            "accessed: {}",
            info.accessed.clone().unwrap_or_else(unknown)
        ),
        format!("isDirectory: {}", info.is_directory),
        format!("isFile: {}", info.is_file),
        format!("access: {}", info.access),
    ]
    .join("\n");
    Ok(Reply {
        data: FileInfo {
            content: text.clone(),
            ..info
        },
        text,
        note: None,
    })
}

/// One allowed directory.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AllowedDirectory {
    pub path: String,
    /// True when files under it can be read but not changed.
    #[serde(rename = "readOnly")]
    pub read_only: bool,
}

/// Structured output of `list_allowed_directories`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AllowedDirectories {
    /// The same text as the result's content.
    pub content: String,
    pub directories: Vec<AllowedDirectory>,
}

/// List the directories this tool may access; everything beneath them is
/// accessible too. Read-only ones are marked `(read-only)`. Relative paths
/// given to the other tools are resolved against the first. Call this first
/// to know where files can be read and written.
#[tool(title = "List Allowed Directories", read_only, idempotent)]
pub fn list_allowed_directories() -> Result<Reply<AllowedDirectories>, String> {
    let roots = roots::roots();
    let mut text = String::from("Allowed directories:\n");
    if roots.is_empty() {
        text.push_str("(none: the operator has granted this tool no directories)");
    } else {
        text.push_str(&roots.iter().map(Root::label).collect::<Vec<_>>().join("\n"));
    }
    Ok(Reply {
        data: AllowedDirectories {
            content: text.clone(),
            directories: roots
                .iter()
                .map(|r| AllowedDirectory {
                    path: r.path.display().to_string(),
                    read_only: !r.writable,
                })
                .collect(),
        },
        text,
        note: None,
    })
}

export!(
    read_file,
    read_text_file,
    read_media_file,
    read_multiple_files,
    write_file,
    edit_file,
    create_directory,
    list_directory,
    list_directory_with_sizes,
    directory_tree,
    move_file,
    search_files,
    get_file_info,
    list_allowed_directories,
    delete_file,
);
