//! `toolcage new NAME --lang rust|python|js|c`: a complete tool project,
//! buildable on its own.
//!
//! Each language's template lives beside its SDK (`guest-sdk/<lang>/
//! template/`) and is compiled into the binary, together with the SDK
//! files and the WIT contract the project needs, so a project made by an
//! installed `toolcage` builds without this repository. `{{name}}` in a
//! template is the tool's name.
//!
//! Invariants: the name is an identifier in every language (lowercase
//! ASCII letters, digits and `_`, starting with a letter); nothing is
//! written into a folder that exists and is not empty; the project appears
//! whole or not at all (written into a temporary sibling, then renamed).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// The languages `toolcage new` writes projects for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, with the `toolcage-guest` SDK (copied into the project).
    Rust,
    /// Python, with componentize-py and the `toolcage` SDK.
    Python,
    /// JavaScript, with componentize-js and the `@toolcage/tool` SDK.
    Js,
    /// C, with zig (from PyPI) and the header-only helper.
    C,
}

/// One file of a project: its path in the project, its text, and whether
/// it is a script to run.
struct File {
    path: &'static str,
    text: &'static str,
    executable: bool,
}

const fn file(path: &'static str, text: &'static str) -> File {
    File {
        path,
        text,
        executable: false,
    }
}

const fn script(path: &'static str, text: &'static str) -> File {
    File {
        path,
        text,
        executable: true,
    }
}

const WIT: &str = include_str!("../../guest-sdk/wit/tool.wit");

const RUST: &[File] = &[
    file(
        "Cargo.toml",
        include_str!("../../guest-sdk/template/Cargo.toml"),
    ),
    file(
        "src/lib.rs",
        include_str!("../../guest-sdk/template/src/lib.rs"),
    ),
    file(
        "README.md",
        include_str!("../../guest-sdk/template/README.md"),
    ),
    script(
        "build.sh",
        include_str!("../../guest-sdk/template/build.sh"),
    ),
    file(
        "toolcage-guest/Cargo.toml",
        include_str!("../../guest-sdk/template/toolcage-guest.toml"),
    ),
    file(
        "toolcage-guest/src/lib.rs",
        include_str!("../../guest-sdk/src/lib.rs"),
    ),
    file(
        "toolcage-guest/src/http.rs",
        include_str!("../../guest-sdk/src/http.rs"),
    ),
    file("toolcage-guest/wit/tool.wit", WIT),
    file(
        "toolcage-guest/json/Cargo.toml",
        include_str!("../../guest-sdk/template/toolcage-json.toml"),
    ),
    file(
        "toolcage-guest/json/src/lib.rs",
        include_str!("../../guest-sdk/json/src/lib.rs"),
    ),
    file(
        "toolcage-guest/macros/Cargo.toml",
        include_str!("../../guest-sdk/template/toolcage-guest-macros.toml"),
    ),
    file(
        "toolcage-guest/macros/src/lib.rs",
        include_str!("../../guest-sdk/macros/src/lib.rs"),
    ),
];

const PYTHON: &[File] = &[
    file(
        "app.py",
        include_str!("../../guest-sdk/python/template/app.py"),
    ),
    file(
        "README.md",
        include_str!("../../guest-sdk/python/template/README.md"),
    ),
    script(
        "build.sh",
        include_str!("../../guest-sdk/python/template/build.sh"),
    ),
    file(
        "toolcage/__init__.py",
        include_str!("../../guest-sdk/python/toolcage/__init__.py"),
    ),
    file(
        "toolcage/schema.py",
        include_str!("../../guest-sdk/python/toolcage/schema.py"),
    ),
    file("wit/tool.wit", WIT),
];

const JS: &[File] = &[
    file("app.js", include_str!("../../guest-sdk/js/template/app.js")),
    file(
        "package.json",
        include_str!("../../guest-sdk/js/template/package.json"),
    ),
    script(
        "build.sh",
        include_str!("../../guest-sdk/js/template/build.sh"),
    ),
    file(
        "README.md",
        include_str!("../../guest-sdk/js/template/README.md"),
    ),
    file(
        ".gitignore",
        include_str!("../../guest-sdk/js/template/gitignore"),
    ),
    file(
        "toolcage/index.js",
        include_str!("../../guest-sdk/js/index.js"),
    ),
    file(
        "toolcage/index.d.ts",
        include_str!("../../guest-sdk/js/index.d.ts"),
    ),
    file(
        "toolcage/package.json",
        include_str!("../../guest-sdk/js/package.json"),
    ),
    file("wit/tool.wit", WIT),
];

const C: &[File] = &[
    file("tool.c", include_str!("../../guest-sdk/c/template/tool.c")),
    script(
        "build.sh",
        include_str!("../../guest-sdk/c/template/build.sh"),
    ),
    file(
        "README.md",
        include_str!("../../guest-sdk/c/template/README.md"),
    ),
    file(
        ".gitignore",
        include_str!("../../guest-sdk/c/template/gitignore"),
    ),
    file(
        "toolcage/toolcage.h",
        include_str!("../../guest-sdk/c/toolcage.h"),
    ),
    script("toolcage/build", include_str!("../../guest-sdk/c/build")),
    file(
        "toolcage/bindings/tool_component.h",
        include_str!("../../guest-sdk/c/bindings/tool_component.h"),
    ),
    file(
        "toolcage/bindings/tool_component.c",
        include_str!("../../guest-sdk/c/bindings/tool_component.c"),
    ),
    file("wit/tool.wit", WIT),
];

fn files(lang: Lang) -> &'static [File] {
    match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
        Lang::C => C,
    }
}

/// Check a tool name for `toolcage new`.
///
/// # Errors
///
/// What is wrong with it.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        bail!(
            "`{name}` cannot name a tool project: use 1 to 64 lowercase letters, digits and `_`, \
             starting with a letter (it becomes the tool's name and an identifier in its language)"
        );
    }
    Ok(())
}

/// Write the project for tool `name` in `lang` into `dir` (which must not
/// exist, or be empty); the files written, relative to `dir`.
///
/// # Errors
///
/// A bad name, a folder that is not empty, or a write that failed
/// (nothing is left behind then).
pub fn create(dir: &Path, name: &str, lang: Lang) -> anyhow::Result<Vec<PathBuf>> {
    check_name(name)?;
    let files = files(lang);
    if files.is_empty() {
        bail!("`toolcage new --lang {lang:?}` has no template yet");
    }
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read `{}`", dir.display()))?
            .next()
            .is_none();
        if !empty {
            bail!(
                "`{}` exists and is not empty; choose another folder",
                dir.display()
            );
        }
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create `{}`", parent.display()))?;
    let staging = parent.join(format!(
        ".{}.toolcage-new-{}",
        dir.file_name()
            .map_or_else(|| name.into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let written = write_all(&staging, name, files).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&staging);
    })?;
    // An empty folder is replaced by the project (a link to one is not
    // followed: it cannot be removed as a folder, and the error says so).
    let placed = if dir.exists() {
        std::fs::remove_dir(dir)
            .with_context(|| format!("cannot replace the empty folder `{}`", dir.display()))
    } else {
        Ok(())
    }
    .and_then(|()| {
        std::fs::rename(&staging, dir).with_context(|| format!("cannot create `{}`", dir.display()))
    });
    if placed.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    placed.map(|()| written)
}

fn write_all(root: &Path, name: &str, files: &[File]) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::with_capacity(files.len());
    for file in files {
        let path = root.join(file.path);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("cannot create `{}`", folder.display()))?;
        }
        std::fs::write(&path, file.text.replace("{{name}}", name))
            .with_context(|| format!("cannot write `{}`", path.display()))?;
        if file.executable {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make `{}` executable", path.display()))?;
        }
        written.push(PathBuf::from(file.path));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_identifiers() {
        for good in ["word_count", "a", "tool2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Word",
            "2tool",
            "my-tool",
            "../x",
            "a b",
            &"x".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_vendored_rust_sdk_uses_the_workspace_versions() {
        // The vendored crates' manifests are written by hand; they must ask
        // for every crate, and the versions, the workspace builds the SDK
        // with (a dependency added to the SDK alone builds here and breaks
        // every new project).
        let parse = |text: &str| -> toml::Value { toml::from_str(text).expect("toml") };
        let workspace = parse(include_str!("../../Cargo.toml"));
        let wanted = &workspace["workspace"]["dependencies"];
        let version = |v: &toml::Value| match v {
            toml::Value::String(s) => s.clone(),
            other => other["version"].as_str().unwrap_or_default().to_owned(),
        };
        let pairs = [
            (
                include_str!("../../guest-sdk/Cargo.toml"),
                include_str!("../../guest-sdk/template/toolcage-guest.toml"),
            ),
            (
                include_str!("../../guest-sdk/json/Cargo.toml"),
                include_str!("../../guest-sdk/template/toolcage-json.toml"),
            ),
            (
                include_str!("../../guest-sdk/macros/Cargo.toml"),
                include_str!("../../guest-sdk/template/toolcage-guest-macros.toml"),
            ),
        ];
        for (real, vendored) in pairs {
            let (real, vendored) = (parse(real), parse(vendored));
            let deps = |m: &toml::Value| -> Vec<String> {
                let mut names: Vec<String> = m["dependencies"]
                    .as_table()
                    .expect("dependencies")
                    .keys()
                    .cloned()
                    .collect();
                names.sort();
                names
            };
            let name = vendored["package"]["name"].as_str().expect("name");
            assert_eq!(deps(&vendored), deps(&real), "{name}'s dependencies");
            for (dep, spec) in real["dependencies"].as_table().expect("dependencies") {
                let expected = if spec.get("workspace").is_some() {
                    version(&wanted[dep.as_str()])
                } else {
                    version(spec)
                };
                assert_eq!(
                    version(&vendored["dependencies"][dep.as_str()]),
                    expected,
                    "{name}: {dep}"
                );
            }
        }
    }

    #[test]
    fn a_project_appears_whole_and_never_over_files() {
        let root = std::env::temp_dir().join(format!("toolcage-new-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("greet");
        let files = create(&dir, "greet", Lang::Python).expect("created");
        assert!(files.contains(&PathBuf::from("app.py")));
        let app = std::fs::read_to_string(dir.join("app.py")).expect("app.py");
        assert!(app.contains("def greet(") && !app.contains("{{name}}"));
        let error = create(&dir, "greet", Lang::Python)
            .expect_err("not empty")
            .to_string();
        assert!(error.contains("not empty"), "{error}");
        assert!(create(&root.join("bad"), "Bad", Lang::Rust).is_err());
        // A link to an empty folder is not written through.
        let empty = root.join("empty");
        std::fs::create_dir_all(&empty).expect("mkdir");
        std::os::unix::fs::symlink(&empty, root.join("link")).expect("symlink");
        assert!(create(&root.join("link"), "linked", Lang::Python).is_err());
        assert!(std::fs::read_dir(&empty).expect("dir").next().is_none());
        std::fs::remove_file(root.join("link")).expect("unlink");
        std::fs::remove_dir(&empty).expect("rmdir");
        assert!(!root.join("bad").exists());
        let leftovers: Vec<_> = std::fs::read_dir(&root)
            .expect("dir")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let _ = std::fs::remove_dir_all(&root);
    }
}
