//! Native tests of every tool, on temporary directories set as the roots.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolcage_guest::{CallOutcome, Content, ResourceBody};

use super::*;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = fs::canonicalize(std::env::temp_dir()).expect("temp dir");
        let path = base.join(format!("fs-tool-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    fn path(&self, relative: &str) -> PathBuf {
        if relative.is_empty() {
            self.0.clone()
        } else {
            self.0.join(relative)
        }
    }

    fn s(&self, relative: &str) -> String {
        self.path(relative).display().to_string()
    }

    fn write(&self, relative: &str, content: impl AsRef<[u8]>) {
        let path = self.path(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn read(&self, relative: &str) -> String {
        fs::read_to_string(self.path(relative)).unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// One writable root.
fn setup(tag: &str) -> TempDir {
    let dir = TempDir::new(tag);
    set_native_roots(&[(&dir.s(""), true)]);
    dir
}

/// Call a tool the way the component does: by name, with JSON arguments.
fn call(name: &str, arguments: Value) -> Result<Output, String> {
    let tool = tool_definitions()
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"));
    match tool.call(&arguments.to_string()) {
        CallOutcome::Ok(output) => Ok(output),
        CallOutcome::Err(message) => Err(message),
    }
}

/// The first text item of a successful call.
fn text(name: &str, arguments: Value) -> String {
    match call(name, arguments) {
        Ok(output) => match &output.content[0] {
            Content::Text(text) => text.clone(),
            other => panic!("not text: {other:?}"),
        },
        Err(e) => panic!("{name} failed: {e}"),
    }
}

fn error(name: &str, arguments: Value) -> String {
    match call(name, arguments) {
        Ok(output) => panic!("{name} should have failed, gave {output:?}"),
        Err(e) => e,
    }
}

// --- the tool set -----------------------------------------------------------

#[test]
fn tools_names_arguments_and_hints_match_the_reference() {
    type Expected<'a> = (&'a str, &'a [&'a str], &'a [&'a str], bool, bool, bool);
    let expected: &[Expected] = &[
        // name, arguments, required, read_only, destructive, idempotent
        (
            "read_file",
            &["head", "path", "tail"],
            &["path"],
            true,
            false,
            true,
        ),
        (
            "read_text_file",
            &["head", "path", "tail"],
            &["path"],
            true,
            false,
            true,
        ),
        ("read_media_file", &["path"], &["path"], true, false, true),
        (
            "read_multiple_files",
            &["paths"],
            &["paths"],
            true,
            false,
            true,
        ),
        (
            "write_file",
            &["content", "path"],
            &["content", "path"],
            false,
            true,
            true,
        ),
        (
            "edit_file",
            &["dryRun", "edits", "path"],
            &["edits", "path"],
            false,
            true,
            false,
        ),
        ("create_directory", &["path"], &["path"], false, false, true),
        ("list_directory", &["path"], &["path"], true, false, true),
        (
            "list_directory_with_sizes",
            &["path", "sortBy"],
            &["path"],
            true,
            false,
            true,
        ),
        (
            "directory_tree",
            &["excludePatterns", "path"],
            &["path"],
            true,
            false,
            true,
        ),
        (
            "move_file",
            &["destination", "source"],
            &["destination", "source"],
            false,
            true,
            false,
        ),
        (
            "search_files",
            &["excludePatterns", "path", "pattern"],
            &["path", "pattern"],
            true,
            false,
            true,
        ),
        ("get_file_info", &["path"], &["path"], true, false, true),
        ("list_allowed_directories", &[], &[], true, false, true),
        ("delete_file", &["path"], &["path"], false, true, true),
    ];
    let tools = tool_definitions();
    assert_eq!(tools.len(), expected.len());
    let descriptors = toolcage_guest::__describe(&tools);
    for (name, args, required, read_only, destructive, idempotent) in expected {
        let d = descriptors.iter().find(|d| d.name == *name).expect(name);
        let schema: Value = serde_json::from_str(&d.input_schema).unwrap();
        assert_eq!(schema["type"], "object", "{name}");
        let mut props: Vec<&str> = schema["properties"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        props.sort();
        assert_eq!(&props, args, "{name} arguments");
        let mut req: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().map(|v| v.as_str().unwrap()).collect())
            .unwrap_or_default();
        req.sort();
        assert_eq!(&req, required, "{name} required");
        let a = &d.annotations;
        assert_eq!(
            (a.read_only, a.destructive, a.idempotent, a.open_world),
            (*read_only, *destructive, *idempotent, false),
            "{name} annotations"
        );
        assert!(d.title.is_some(), "{name} title");
        if *name != "read_media_file" {
            let out: Value = serde_json::from_str(d.output_schema.as_deref().unwrap()).unwrap();
            assert_eq!(
                out["properties"]["content"]["type"], "string",
                "{name} output"
            );
        }
    }
}

#[test]
fn argument_defaults_and_enums_are_in_the_schemas() {
    let tools = tool_definitions();
    let schema = |name: &str| {
        tools
            .iter()
            .find(|t| t.name() == name)
            .unwrap()
            .input_schema()
    };
    let edit = schema("edit_file");
    assert_eq!(edit["properties"]["dryRun"]["default"], false);
    let sizes = schema("list_directory_with_sizes").to_string();
    assert!(
        sizes.contains("\"name\"") && sizes.contains("\"size\""),
        "{sizes}"
    );
    let multi = schema("read_multiple_files");
    assert_eq!(multi["properties"]["paths"]["minItems"], 1);
}

// --- reading ----------------------------------------------------------------

#[test]
fn read_text_file_whole_head_and_tail() {
    let d = setup("read");
    d.write("a.txt", "one\ntwo\nthree\nfour\n");
    let path = d.s("a.txt");
    assert_eq!(
        text("read_text_file", json!({"path": path})),
        "one\ntwo\nthree\nfour\n"
    );
    assert_eq!(
        text("read_text_file", json!({"path": path, "head": 2})),
        "one\ntwo"
    );
    assert_eq!(
        text("read_text_file", json!({"path": path, "tail": 2})),
        "three\nfour"
    );
    assert_eq!(
        text("read_text_file", json!({"path": path, "head": 10})),
        "one\ntwo\nthree\nfour"
    );
    assert_eq!(
        text("read_text_file", json!({"path": path, "tail": 10})),
        "one\ntwo\nthree\nfour"
    );
    assert_eq!(text("read_text_file", json!({"path": path, "head": 0})), "");
    assert_eq!(text("read_text_file", json!({"path": path, "tail": 0})), "");
    // The deprecated alias.
    assert_eq!(text("read_file", json!({"path": path, "head": 1})), "one");
    // Structured output carries the text as `content`.
    let out = call("read_text_file", json!({"path": path, "tail": 1})).unwrap();
    assert_eq!(out.structured, Some(json!({"content": "four"})));
}

#[test]
fn head_and_tail_handle_crlf_missing_newline_and_long_files() {
    let d = setup("headtail");
    d.write("crlf.txt", "a\r\nb\r\nc\r\n");
    assert_eq!(
        text(
            "read_text_file",
            json!({"path": d.s("crlf.txt"), "tail": 2})
        ),
        "b\nc"
    );
    assert_eq!(
        text(
            "read_text_file",
            json!({"path": d.s("crlf.txt"), "head": 2})
        ),
        "a\nb"
    );
    d.write("nonl.txt", "x\ny");
    assert_eq!(
        text(
            "read_text_file",
            json!({"path": d.s("nonl.txt"), "tail": 1})
        ),
        "y"
    );
    assert_eq!(
        text(
            "read_text_file",
            json!({"path": d.s("nonl.txt"), "head": 5})
        ),
        "x\ny"
    );
    // Lines spanning the 64 KiB chunks tail reads.
    let lines: Vec<String> = (0..50_000).map(|i| format!("line {i}")).collect();
    d.write("long.txt", lines.join("\n") + "\n");
    let tail = text(
        "read_text_file",
        json!({"path": d.s("long.txt"), "tail": 3}),
    );
    assert_eq!(tail, "line 49997\nline 49998\nline 49999");
    let tail = text(
        "read_text_file",
        json!({"path": d.s("long.txt"), "tail": 20_000}),
    );
    assert_eq!(tail.lines().count(), 20_000);
    assert!(tail.starts_with("line 30000\n"), "{}", &tail[..20]);
    let head = text(
        "read_text_file",
        json!({"path": d.s("long.txt"), "head": 20_000}),
    );
    assert!(head.ends_with("\nline 19999"));
    d.write("empty.txt", "");
    assert_eq!(
        text(
            "read_text_file",
            json!({"path": d.s("empty.txt"), "tail": 3})
        ),
        ""
    );
}

#[test]
fn read_errors_are_clear() {
    let d = setup("readerr");
    d.write("a.txt", "x");
    let e = error(
        "read_text_file",
        json!({"path": d.s("a.txt"), "head": 1, "tail": 1}),
    );
    assert!(
        e.contains("`head` and `tail` cannot be used together"),
        "{e}"
    );
    let e = error("read_text_file", json!({"path": d.s("missing.txt")}));
    assert_eq!(
        e,
        format!("cannot read `{}`: it does not exist", d.s("missing.txt"))
    );
    let e = error("read_text_file", json!({"path": d.s("")}));
    assert!(e.contains("it is a directory"), "{e}");
    // Too big to return whole: told to use head/tail.
    let big = vec![b'x'; (read::MAX_TEXT_BYTES + 1) as usize];
    d.write("big.txt", &big);
    let e = error("read_text_file", json!({"path": d.s("big.txt")}));
    assert!(e.contains("`head` or `tail`"), "{e}");
    // Invalid UTF-8 is replaced, not an error.
    d.write("bin.txt", b"ok\xffok");
    assert_eq!(
        text("read_text_file", json!({"path": d.s("bin.txt")})),
        "ok\u{fffd}ok"
    );
    // Unknown arguments are refused (the host's schema check does it first).
    assert!(
        error(
            "read_text_file",
            json!({"path": d.s("a.txt"), "encoding": "x"})
        )
        .contains("unknown field")
    );
}

#[test]
fn paths_outside_the_roots_and_odd_paths_are_refused() {
    let d = TempDir::new("outside");
    let ro = TempDir::new("outside-ro");
    set_native_roots(&[(&d.s(""), true), (&ro.s(""), false)]);
    let e = error("read_text_file", json!({"path": "/etc/passwd"}));
    assert_eq!(
        e,
        format!(
            "`/etc/passwd` is outside the allowed roots: {}, {} (read-only)",
            d.s(""),
            ro.s("")
        )
    );
    let sneaky = format!("{}/../../etc/passwd", d.s(""));
    let e = error("read_text_file", json!({"path": sneaky}));
    assert!(
        e.contains("(resolved to `/etc/passwd`) is outside the allowed roots"),
        "{e}"
    );
    let e = error(
        "read_text_file",
        json!({"path": format!("{}/a\u{0}b", d.s(""))}),
    );
    assert!(e.contains("NUL byte"), "{e}");
    let e = error(
        "read_text_file",
        json!({"path": format!("/{}", "a".repeat(5000))}),
    );
    assert!(e.contains("bytes long"), "{e}");
    // Relative paths resolve against the first root.
    d.write("rel.txt", "relative");
    assert_eq!(
        text("read_text_file", json!({"path": "rel.txt"})),
        "relative"
    );
    // No roots at all.
    set_native_roots(&[]);
    let e = error("list_directory", json!({"path": d.s("")}));
    assert!(e.contains("no allowed roots"), "{e}");
}

#[test]
fn read_media_file_returns_image_audio_or_a_resource() {
    let d = setup("media");
    d.write("pic.PNG", b"\x89PNG\r\n\x1a\n");
    d.write("sound.wav", b"RIFF");
    d.write("data bin.dat", b"\x00\x01");
    let out = call("read_media_file", json!({"path": d.s("pic.PNG")})).unwrap();
    assert_eq!(
        out.content,
        vec![Content::Image {
            data: b"\x89PNG\r\n\x1a\n".to_vec(),
            mime_type: "image/png".into()
        }]
    );
    let out = call("read_media_file", json!({"path": d.s("sound.wav")})).unwrap();
    assert!(
        matches!(&out.content[0], Content::Audio { mime_type, .. } if mime_type == "audio/wav")
    );
    let out = call("read_media_file", json!({"path": d.s("data bin.dat")})).unwrap();
    match &out.content[0] {
        Content::Resource {
            uri,
            mime_type,
            body,
        } => {
            assert!(
                uri.starts_with("file:///") && uri.ends_with("/data%20bin.dat"),
                "{uri}"
            );
            assert_eq!(mime_type.as_deref(), Some("application/octet-stream"));
            assert_eq!(body, &ResourceBody::Blob(vec![0, 1]));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn read_multiple_files_keeps_going_past_failures() {
    let d = setup("multi");
    d.write("a.txt", "A");
    d.write("b.txt", "B\n");
    let (a, b, c) = (d.s("a.txt"), d.s("b.txt"), d.s("c.txt"));
    let out = text("read_multiple_files", json!({"paths": [a, c, b]}));
    assert_eq!(
        out,
        format!(
            "{a}:\nA\n\n---\n{c}: Error - cannot read `{c}`: it does not exist\n---\n{b}:\nB\n\n"
        )
    );
    assert!(error("read_multiple_files", json!({"paths": []})).contains("at least one"));
}

// --- writing ----------------------------------------------------------------

#[test]
fn write_file_creates_and_overwrites() {
    let d = setup("write");
    let path = d.s("new.txt");
    assert_eq!(
        text("write_file", json!({"path": path, "content": "first"})),
        format!("Successfully wrote to {path}")
    );
    assert_eq!(d.read("new.txt"), "first");
    text("write_file", json!({"path": path, "content": "second"}));
    assert_eq!(d.read("new.txt"), "second");
    // No temporary files left behind.
    assert_eq!(fs::read_dir(d.path("")).unwrap().count(), 1);
    let e = error(
        "write_file",
        json!({"path": d.s("no/such/dir/x.txt"), "content": ""}),
    );
    assert!(
        e.contains("does not exist (create it first with create_directory)"),
        "{e}"
    );
    let e = error("write_file", json!({"path": d.s(""), "content": ""}));
    assert!(e.contains("it is a directory"), "{e}");
}

#[test]
fn read_only_roots_refuse_changes_but_allow_reads() {
    let rw = TempDir::new("rw");
    let ro = TempDir::new("ro");
    ro.write("f.txt", "keep\n");
    set_native_roots(&[(&rw.s(""), true), (&ro.s(""), false)]);
    let f = ro.s("f.txt");
    assert_eq!(text("read_text_file", json!({"path": f})), "keep\n");
    let expected = format!(
        "`{f}` is in the read-only root {}: it can be read but not created, changed or removed",
        ro.s("")
    );
    assert_eq!(
        error("write_file", json!({"path": f, "content": "x"})),
        expected
    );
    assert_eq!(error("delete_file", json!({"path": f})), expected);
    let edits = json!([{"oldText": "keep", "newText": "lose"}]);
    assert_eq!(
        error("edit_file", json!({"path": f, "edits": edits})),
        expected
    );
    // A dry run only reads.
    let diff = text(
        "edit_file",
        json!({"path": f, "edits": edits, "dryRun": true}),
    );
    assert!(diff.contains("+lose"), "{diff}");
    let e = error(
        "move_file",
        json!({"source": f, "destination": rw.s("f.txt")}),
    );
    assert_eq!(e, expected);
    let e = error("create_directory", json!({"path": ro.s("sub")}));
    assert!(e.contains("read-only root"), "{e}");
    // An existing directory is fine even there.
    text("create_directory", json!({"path": ro.s("")}));
    assert_eq!(ro.read("f.txt"), "keep\n");
    assert!(text("get_file_info", json!({"path": f})).ends_with("access: read-only"));
}

#[test]
fn edit_file_applies_edits_and_returns_a_diff() {
    let d = setup("edit");
    d.write("code.py", "def f():\n    return 1\n");
    let path = d.s("code.py");
    let diff = text(
        "edit_file",
        json!({"path": path, "edits": [{"oldText": "return 1", "newText": "return 2"}]}),
    );
    assert_eq!(
        diff,
        format!(
            "```diff\nIndex: {path}\n{}\n--- {path}\toriginal\n+++ {path}\tmodified\n\
             @@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n```\n\n",
            "=".repeat(67)
        )
    );
    assert_eq!(d.read("code.py"), "def f():\n    return 2\n");
    // Whitespace-tolerant: the model's indentation differs from the file's.
    text(
        "edit_file",
        json!({"path": path, "edits": [{"oldText": "def f():\n  return 2", "newText": "def f():\n  x = 2\n  return x"}]}),
    );
    assert_eq!(d.read("code.py"), "def f():\n    x = 2\n    return x\n");
}

#[test]
fn edit_file_dry_run_changes_nothing() {
    let d = setup("dry");
    d.write("a.txt", "alpha\nbeta\ngamma\n");
    let path = d.s("a.txt");
    let diff = text(
        "edit_file",
        json!({"path": path, "dryRun": true, "edits": [{"oldText": "beta", "newText": "BETA"}]}),
    );
    assert!(
        diff.starts_with(&format!("```diff\nIndex: {path}\n")),
        "{diff}"
    );
    assert!(
        diff.contains("@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n```"),
        "{diff}"
    );
    assert_eq!(d.read("a.txt"), "alpha\nbeta\ngamma\n");
}

#[test]
fn edit_file_fails_clearly_and_atomically_when_text_is_missing() {
    let d = setup("editerr");
    d.write("a.txt", "one\ntwo\n");
    let path = d.s("a.txt");
    let e = error(
        "edit_file",
        json!({"path": path, "edits": [
            {"oldText": "one", "newText": "1"},
            {"oldText": "three", "newText": "3"}
        ]}),
    );
    assert!(
        e.starts_with(&format!("edit 2 of 2: `oldText` was not found in `{path}`")),
        "{e}"
    );
    assert!(e.contains("(earlier edits were not applied either)"), "{e}");
    assert!(e.ends_with("The `oldText` was:\nthree"), "{e}");
    assert_eq!(d.read("a.txt"), "one\ntwo\n");
    d.write("bin", b"\xff\xfe");
    let e = error(
        "edit_file",
        json!({"path": d.s("bin"), "edits": [{"oldText": "a", "newText": "b"}]}),
    );
    assert!(e.contains("not UTF-8 text"), "{e}");
}

#[test]
fn edit_file_keeps_windows_line_endings() {
    let d = setup("crlf");
    d.write("w.txt", "a\r\nb\r\nc\r\n");
    text(
        "edit_file",
        json!({"path": d.s("w.txt"), "edits": [{"oldText": "b\r\nc", "newText": "B\nC"}]}),
    );
    assert_eq!(d.read("w.txt"), "a\r\nB\r\nC\r\n");
}

#[test]
fn create_directory_is_recursive_and_idempotent() {
    let d = setup("mkdir");
    let path = d.s("x/y/z");
    assert_eq!(
        text("create_directory", json!({"path": path})),
        format!("Successfully created directory {path}")
    );
    assert!(d.path("x/y/z").is_dir());
    text("create_directory", json!({"path": path}));
    d.write("file", "");
    let e = error("create_directory", json!({"path": d.s("file/sub")}));
    assert!(e.contains("exists and is not a directory"), "{e}");
}

#[test]
fn move_file_renames_and_never_overwrites() {
    let d = setup("move");
    d.write("a.txt", "A");
    d.write("b.txt", "B");
    fs::create_dir(d.path("dir")).unwrap();
    let (a, b) = (d.s("a.txt"), d.s("b.txt"));
    let moved = d.s("dir/moved.txt");
    assert_eq!(
        text("move_file", json!({"source": a, "destination": moved})),
        format!("Successfully moved {a} to {moved}")
    );
    assert_eq!(d.read("dir/moved.txt"), "A");
    assert!(!d.path("a.txt").exists());
    let e = error("move_file", json!({"source": b, "destination": moved}));
    assert!(e.contains("the destination already exists"), "{e}");
    assert_eq!(d.read("dir/moved.txt"), "A");
    let e = error(
        "move_file",
        json!({"source": a, "destination": d.s("c.txt")}),
    );
    assert!(e.contains("does not exist"), "{e}");
    let e = error(
        "move_file",
        json!({"source": b, "destination": d.s("none/b.txt")}),
    );
    assert!(e.contains("does not exist (create it first"), "{e}");
    let e = error(
        "move_file",
        json!({"source": d.s(""), "destination": d.s("x")}),
    );
    assert!(e.contains("it is an allowed root itself"), "{e}");
    // Long names still get a temporary file that fits.
    let long = "n".repeat(250);
    d.write(&long, "old");
    text("write_file", json!({"path": d.s(&long), "content": "new"}));
    assert_eq!(d.read(&long), "new");
    let e = error(
        "move_file",
        json!({"source": d.s("dir"), "destination": d.s("dir/inner")}),
    );
    assert!(e.contains("cannot be moved into itself"), "{e}");
    // Directories move too.
    text(
        "move_file",
        json!({"source": d.s("dir"), "destination": d.s("dir2")}),
    );
    assert_eq!(d.read("dir2/moved.txt"), "A");
}

#[test]
fn delete_file_deletes_files_only() {
    let d = setup("delete");
    d.write("a.txt", "A");
    fs::create_dir(d.path("dir")).unwrap();
    let a = d.s("a.txt");
    assert_eq!(
        text("delete_file", json!({"path": a})),
        format!("Successfully deleted {a}")
    );
    assert!(!d.path("a.txt").exists());
    let e = error("delete_file", json!({"path": a}));
    assert_eq!(e, format!("cannot delete `{a}`: it does not exist"));
    let e = error("delete_file", json!({"path": d.s("dir")}));
    assert_eq!(
        e,
        format!(
            "cannot delete `{}`: it is a directory, and delete_file deletes files only",
            d.s("dir")
        )
    );
    assert!(d.path("dir").is_dir());
}

// --- directories ------------------------------------------------------------

#[test]
fn list_directory_marks_files_and_directories() {
    let d = setup("list");
    d.write("b.txt", "");
    d.write("A.txt", "");
    fs::create_dir(d.path("sub")).unwrap();
    let out = call("list_directory", json!({"path": d.s("")})).unwrap();
    assert_eq!(
        out.content,
        vec![Content::Text(
            "[FILE] A.txt\n[FILE] b.txt\n[DIR] sub".into()
        )]
    );
    let s = out.structured.unwrap();
    assert_eq!(s["entries"][2], json!({"name": "sub", "type": "directory"}));
    assert_eq!(s["truncated"], false);
    let e = error("list_directory", json!({"path": d.s("b.txt")}));
    assert!(e.contains("it is a file, not a directory"), "{e}");
    assert_eq!(text("list_directory", json!({"path": d.s("sub")})), "");
}

#[test]
fn listings_are_in_name_order_whatever_the_case_and_script() {
    let d = setup("order");
    let names = [
        "b",
        "A",
        "a.txt",
        "B.txt",
        "\u{c9}t\u{e9}",
        "\u{e9}t\u{e9}",
        "z",
        "_x",
        "\u{c4}",
        "ab",
        "aB",
        "Ab",
        "\u{130}",
        "i",
        "\u{3a3}",
        "\u{3c3}",
        "10",
        "9",
    ];
    for name in names {
        d.write(name, "");
    }
    let mut expected = names.to_vec();
    // The rule itself, not `name_order`, whose shortcut is under test.
    expected.sort_by(|a, b| {
        a.to_lowercase()
            .cmp(&b.to_lowercase())
            .then_with(|| a.cmp(b))
    });
    let listed = text("list_directory", json!({"path": d.s("")}));
    let listed: Vec<&str> = listed
        .lines()
        .map(|l| l.trim_start_matches("[FILE] "))
        .collect();
    assert_eq!(listed, expected);
}

#[cfg(unix)]
#[test]
fn non_utf8_names_are_listed_lossily() {
    use std::os::unix::ffi::OsStrExt;
    let d = setup("nonutf8");
    let name = std::ffi::OsStr::from_bytes(b"bad\xffname");
    fs::write(d.path("").join(name), "x").unwrap();
    assert_eq!(
        text("list_directory", json!({"path": d.s("")})),
        "[FILE] bad\u{fffd}name"
    );
    let tree = text("directory_tree", json!({"path": d.s("")}));
    assert!(tree.contains("bad\u{fffd}name"), "{tree}");
    assert!(text("search_files", json!({"path": d.s(""), "pattern": "bad*"})).contains("bad"));
}

#[test]
fn skipped_non_utf8_names_are_explained() {
    let listing = walk::Listing {
        entries: Vec::new(),
        omitted: 0,
        unnamed: 2,
    };
    assert_eq!(
        listing_note(&listing).unwrap(),
        "Incomplete result: 2 entries were skipped because their names are not valid UTF-8 \
         (the sandbox passes file names as UTF-8 text, so such names cannot be shown or used)."
    );
}

#[test]
fn list_directory_with_sizes_formats_like_the_reference() {
    let d = setup("sizes");
    d.write("small.txt", "abc");
    d.write("big.bin", vec![0u8; 1536]);
    fs::create_dir(d.path("dir")).unwrap();
    let by_name = text("list_directory_with_sizes", json!({"path": d.s("")}));
    assert_eq!(
        by_name,
        format!(
            "[FILE] {:<30} {:>10}\n[DIR] {:<30} \n[FILE] {:<30} {:>10}\n\n\
             Total: 2 files, 1 directories\nCombined size: 1.50 KB",
            "big.bin", "1.50 KB", "dir", "small.txt", "3 B"
        )
    );
    let out = call(
        "list_directory_with_sizes",
        json!({"path": d.s(""), "sortBy": "size"}),
    )
    .unwrap();
    let s = out.structured.unwrap();
    let names: Vec<_> = s["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].clone())
        .collect();
    assert_eq!(
        names,
        vec![json!("big.bin"), json!("small.txt"), json!("dir")]
    );
    assert_eq!(s["combinedSize"], 1539);
    let e = error(
        "list_directory_with_sizes",
        json!({"path": d.s(""), "sortBy": "date"}),
    );
    assert!(e.contains("unknown variant `date`"), "{e}");
}

#[test]
fn directory_tree_is_indented_json_with_excludes() {
    let d = setup("tree");
    d.write("src/main.rs", "");
    d.write("src/node_modules/x.js", "");
    d.write("node_modules/y.js", "");
    d.write(".git/HEAD", "");
    d.write("README.md", "");
    fs::create_dir(d.path("empty")).unwrap();
    let tree = text(
        "directory_tree",
        json!({"path": d.s(""), "excludePatterns": ["node_modules", ".git"]}),
    );
    assert_eq!(
        tree,
        r#"[
  {
    "name": "empty",
    "type": "directory",
    "children": []
  },
  {
    "name": "README.md",
    "type": "file"
  },
  {
    "name": "src",
    "type": "directory",
    "children": [
      {
        "name": "main.rs",
        "type": "file"
      }
    ]
  }
]"#
    );
    let out = call(
        "directory_tree",
        json!({"path": d.s(""), "excludePatterns": ["**/*.rs"]}),
    )
    .unwrap();
    let s = out.structured.unwrap();
    assert_eq!(s["truncated"], false);
    assert!(!s["content"].as_str().unwrap().contains("main.rs"));
    assert!(s["content"].as_str().unwrap().contains("x.js"));
    let e = error(
        "directory_tree",
        json!({"path": d.s(""), "excludePatterns": ["a[b"]}),
    );
    assert!(e.contains("invalid glob pattern `a[b`"), "{e}");
}

#[test]
fn search_files_matches_relative_globs() {
    let d = setup("search");
    d.write("a.rs", "");
    d.write("src/b.rs", "");
    d.write("src/deep/c.rs", "");
    d.write("target/d.rs", "");
    d.write(".hidden/e.rs", "");
    let top = text("search_files", json!({"path": d.s(""), "pattern": "*.rs"}));
    assert_eq!(top, d.s("a.rs"));
    let all = text(
        "search_files",
        json!({"path": d.s(""), "pattern": "**/*.rs", "excludePatterns": ["target"]}),
    );
    let expected = [".hidden/e.rs", "a.rs", "src/b.rs", "src/deep/c.rs"]
        .map(|p| d.s(p))
        .join("\n");
    assert_eq!(all, expected);
    // Directories match too.
    assert_eq!(
        text("search_files", json!({"path": d.s(""), "pattern": "src/*"})),
        [d.s("src/b.rs"), d.s("src/deep")].join("\n")
    );
    assert_eq!(
        text("search_files", json!({"path": d.s(""), "pattern": "*.py"})),
        "No matches found"
    );
    let out = call(
        "search_files",
        json!({"path": d.s("src"), "pattern": "**/c.rs"}),
    )
    .unwrap();
    assert_eq!(
        out.structured.unwrap()["matches"],
        json!([d.s("src/deep/c.rs")])
    );
}

#[test]
fn big_results_are_capped_and_say_so() {
    let d = setup("cap");
    for i in 0..walk::MAX_ENTRIES + 5 {
        fs::write(d.path(&format!("f{i:05}.txt")), "").unwrap();
    }
    let out = call("search_files", json!({"path": d.s(""), "pattern": "*.txt"})).unwrap();
    assert_eq!(out.content.len(), 2);
    let Content::Text(note) = &out.content[1] else {
        panic!()
    };
    assert!(note.contains("stopped at 10000 matches"), "{note}");
    let s = out.structured.unwrap();
    assert_eq!(s["matches"].as_array().unwrap().len(), walk::MAX_ENTRIES);
    assert_eq!(s["truncated"], true);
    let out = call("list_directory", json!({"path": d.s("")})).unwrap();
    let Content::Text(note) = &out.content[1] else {
        panic!()
    };
    assert!(note.contains("showing 10000 of 10005 entries"), "{note}");
    let out = call("directory_tree", json!({"path": d.s("")})).unwrap();
    assert_eq!(out.structured.unwrap()["truncated"], true);
}

#[test]
fn directory_tree_depth_is_bounded() {
    let d = setup("deep");
    let mut deep = d.path("");
    for i in 0..walk::MAX_DEPTH + 5 {
        deep = deep.join(format!("d{i}"));
    }
    fs::create_dir_all(&deep).unwrap();
    let out = call("directory_tree", json!({"path": d.s("")})).unwrap();
    let Content::Text(note) = &out.content[1] else {
        panic!()
    };
    assert!(
        note.contains("deeper than 50 levels are shown empty"),
        "{note}"
    );
    // Both the text and the structured output stay parseable by a parser
    // with the usual nesting limit of 128.
    let Content::Text(tree) = &out.content[0] else {
        panic!()
    };
    serde_json::from_str::<Value>(tree).expect("text parses");
    let structured = serde_json::to_string(&out.structured.unwrap()).unwrap();
    serde_json::from_str::<Value>(&structured).expect("structured parses");
}

#[test]
fn get_file_info_lists_metadata() {
    let d = setup("info");
    d.write("a.txt", "hello");
    let info = text("get_file_info", json!({"path": d.s("a.txt")}));
    let keys: Vec<&str> = info.lines().map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "size",
            "created",
            "modified",
            "accessed",
            "isDirectory",
            "isFile",
            "access"
        ]
    );
    assert!(info.starts_with("size: 5\n"), "{info}");
    assert!(
        info.contains("\nisDirectory: false\nisFile: true\naccess: read-write"),
        "{info}"
    );
    let modified = info.lines().nth(2).unwrap();
    assert!(
        modified.starts_with("modified: 20") && modified.ends_with('Z'),
        "{modified}"
    );
    let e = error("get_file_info", json!({"path": d.s("nope")}));
    assert!(e.contains("does not exist"), "{e}");
}

#[test]
fn list_allowed_directories_shows_the_roots() {
    let a = TempDir::new("allowed-a");
    let b = TempDir::new("allowed-b");
    set_native_roots(&[(&a.s(""), true), (&b.s(""), false)]);
    let out = call("list_allowed_directories", json!({})).unwrap();
    assert_eq!(
        out.content,
        vec![Content::Text(format!(
            "Allowed directories:\n{}\n{} (read-only)",
            a.s(""),
            b.s("")
        ))]
    );
    assert_eq!(
        out.structured.unwrap()["directories"][1],
        json!({"path": b.s(""), "readOnly": true})
    );
}

#[test]
fn symlinks_are_not_followed_by_walkers() {
    #[cfg(unix)]
    {
        let d = setup("links");
        d.write("real/f.txt", "");
        std::os::unix::fs::symlink(d.path("real"), d.path("link")).unwrap();
        let list = text("list_directory", json!({"path": d.s("")}));
        assert_eq!(list, "[FILE] link\n[DIR] real");
        let found = text(
            "search_files",
            json!({"path": d.s(""), "pattern": "**/f.txt"}),
        );
        assert_eq!(found, d.s("real/f.txt"));
        // Reading through a link inside the roots works.
        assert_eq!(
            text("read_text_file", json!({"path": d.s("link/f.txt")})),
            ""
        );
    }
}
