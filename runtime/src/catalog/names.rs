//! Who serves a tool name, decided after every file has loaded and in
//! file-name order, so the winner of a clash never depends on timing: a
//! name bound by `[tools.NAME] file` goes to that file; a name with a
//! policy of its own declared by several files stays with the file that
//! served it before, or goes to none; other names go to the file that
//! sorts first (see `docs/security.md`, "Who serves a tool name").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Catalog, FileLoad};
use crate::config::Config;

/// Who serves a tool name.
pub(super) enum Owner {
    /// This file; the others that declare the name are refused for the
    /// reason given, or (`None`) shadowed.
    File(PathBuf, Option<String>),
    /// No file, for this reason.
    None(String),
}

/// For every declared tool name, the file that serves it, or why none does
/// (see [`super::assemble`]).
pub(super) fn resolve_names(
    outcomes: &[(PathBuf, FileLoad)],
    config: &Config,
    previous: Option<&Catalog>,
) -> BTreeMap<String, Owner> {
    let mut declared: BTreeMap<&str, Vec<&Path>> = BTreeMap::new();
    for (path, load) in outcomes {
        if let Ok(file) = &load.result {
            for spec in &file.tools {
                declared
                    .entry(&spec.descriptor.name)
                    .or_default()
                    .push(path);
            }
        }
    }
    declared
        .into_iter()
        .map(|(name, files)| {
            let policy = config.tools.get(name);
            let key = crate::config::toml_key(name);
            let decision = if let Some(bound) = policy.and_then(|p| p.file.as_ref()) {
                let why = format!("`tools.{key}.file` binds it to `{}`", bound.display());
                match files.iter().find(|f| is_file(f, bound)) {
                    Some(file) => Owner::File(file.to_path_buf(), Some(why)),
                    None => Owner::None(format!("{why}, which does not provide it")),
                }
            } else if files.len() == 1 {
                Owner::File(files[0].to_path_buf(), None)
            } else if policy.is_some() {
                let incumbent = previous
                    .and_then(|p| p.tools.get(name))
                    .map(|tool| tool.component.path.as_path())
                    .filter(|path| files.contains(path));
                match incumbent {
                    Some(path) => Owner::File(
                        path.to_path_buf(),
                        Some(format!(
                            "`{}` serves it already, and `[tools.{key}]` gives it a policy of its \
                             own, which a newly declared copy does not inherit",
                            path.file_name().unwrap_or_default().to_string_lossy()
                        )),
                    ),
                    None => Owner::None(format!(
                        "declared by {} files ({}), and `[tools.{key}]` gives it a policy of its \
                         own: toolcage will not guess which file that policy is for; remove all \
                         but one, or bind it with `file = \"NAME.wasm\"` under `[tools.{key}]`",
                        files.len(),
                        files
                            .iter()
                            .filter_map(|f| f.file_name())
                            .map(|n| n.to_string_lossy())
                            .collect::<Vec<_>>()
                            .join(", "),
                    )),
                }
            } else {
                Owner::File(files[0].to_path_buf(), None)
            };
            (name.to_owned(), decision)
        })
        .collect()
}

/// Whether `path` is the file `bound` names: the same absolute path, or a
/// file of that name.
fn is_file(path: &Path, bound: &Path) -> bool {
    if bound.is_absolute() {
        path == bound
    } else {
        path.file_name() == Some(bound.as_os_str())
    }
}
