//! Resources whose content comes from a file: a component says which file
//! (`watch` in its resource descriptor, contract 0.2.0), the operator
//! grants resource reads the folder it is in (`[resources] roots`,
//! read-only), and the host watches that file, telling the clients
//! subscribed to the resource when it changes
//! (`notifications/resources/updated`).
//!
//! Rules, in one place:
//! - Only a path inside a granted resource root is watched, after symlinks
//!   are resolved (a component cannot make the host watch, and report the
//!   changes of, a file the operator did not grant); anything else is
//!   logged once per reload and ignored.
//! - At most [`MAX_WATCHED`] paths are watched; past it, the rest are
//!   logged and ignored.
//! - The set is recomputed after every reload (and at start), from the
//!   served resources and the current config.
//! - A file is watched through its folder (editors replace files rather
//!   than write them, which a watch on the file itself would lose); a
//!   folder through itself: any change of an entry counts.
//! - Events are debounced ([`QUIET`]); one notification per resource per
//!   burst.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::Host;

use super::folders::{self, Change, Folders};

/// Most paths watched for resources at once.
pub const MAX_WATCHED: usize = 256;

/// How long a watched path must be quiet before its subscribers hear.
pub const QUIET: Duration = Duration::from_millis(100);

/// What is watched: per watched path (resolved), the resources whose
/// content comes from it; and the folders the watcher holds.
#[derive(Default)]
struct Watched {
    /// A file's or folder's resolved path → the URIs it backs.
    paths: BTreeMap<PathBuf, BTreeSet<String>>,
    /// The folders watched (a file's parent, or a watched folder itself).
    folders: BTreeSet<PathBuf>,
}

/// Start watching the files `host`'s resources come from; the set is
/// recomputed whenever `host.resource_refresh` is notified (after each
/// reload). Stops when the returned task is aborted.
///
/// # Errors
///
/// The platform watcher cannot be created.
pub fn watch(host: Arc<Host>) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    // Read where the task runs.
    let folders = Folders::new(host.options.spill.as_ref())?;
    let task = run(Arc::clone(&host), folders);
    Ok(match &host.options.spill {
        Some(spill) => spill.spawn(task),
        None => tokio::spawn(task),
    })
}

async fn run(host: Arc<Host>, mut folders: Folders) {
    let mut watched = Watched::default();
    refresh(&host, &mut folders, &mut watched);
    loop {
        let mut changed = BTreeSet::new();
        tokio::select! {
            () = host.resource_refresh.notified() => {
                refresh(&host, &mut folders, &mut watched);
                continue;
            }
            read = folders.read(|change| affected(&watched, change, &mut changed)) => {
                if let Err(error) = read {
                    tracing::debug!(%error, "resource file watcher error");
                    tokio::time::sleep(QUIET).await;
                }
            }
        }
        if changed.is_empty() {
            continue;
        }
        // Debounce: gather the burst.
        loop {
            let read = folders.read(|change| affected(&watched, change, &mut changed));
            match tokio::time::timeout(QUIET, read).await {
                Err(_) | Ok(Err(_)) => break,
                Ok(Ok(())) => {}
            }
        }
        tracing::debug!(resources = ?changed, "resource files changed");
        host.notifier.resources_changed(&changed);
    }
}

/// Add to `uris` those a change touches: those backed by the path it names,
/// or by the folder that path is in; all of them when events were lost.
fn affected(watched: &Watched, change: Change, uris: &mut BTreeSet<String>) {
    let path = match change {
        Change::Path(path) => path,
        Change::Overflow => {
            uris.extend(watched.paths.values().flatten().cloned());
            return;
        }
    };
    for candidate in [Some(path.as_path()), path.parent()].into_iter().flatten() {
        if let Some(backed) = watched.paths.get(candidate) {
            uris.extend(backed.iter().cloned());
        }
    }
}

/// Recompute what is watched from the served resources and the current
/// resource roots, and move the watcher's folders to match.
fn refresh(host: &Host, folders: &mut Folders, watched: &mut Watched) {
    let roots: Vec<PathBuf> = host
        .dispatcher
        .config()
        .resource_roots
        .iter()
        .filter_map(|root| std::fs::canonicalize(&root.path).ok())
        .collect();
    let catalog = host.registry.snapshot();
    let mut paths: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for (uri, served) in &catalog.resources {
        let Some(path) = &served.descriptor.watch else {
            continue;
        };
        // Resolved, so a symlink cannot lead the watch out of the roots.
        let Ok(resolved) = std::fs::canonicalize(path) else {
            tracing::debug!(%uri, path, "a watched resource file does not exist (yet); not watched");
            continue;
        };
        if !roots.iter().any(|root| resolved.starts_with(root)) {
            tracing::warn!(
                %uri,
                path,
                "a resource's file is outside the `[resources] roots` granted to reads; not watched"
            );
            continue;
        }
        if paths.len() >= MAX_WATCHED && !paths.contains_key(&resolved) {
            tracing::warn!(%uri, path, "more than {MAX_WATCHED} resource files to watch; not watched");
            continue;
        }
        paths.entry(resolved).or_default().insert(uri.clone());
    }
    let wanted: BTreeSet<PathBuf> = paths
        .keys()
        .filter_map(|path| {
            if path.is_dir() {
                Some(path.clone())
            } else {
                path.parent().map(Path::to_path_buf)
            }
        })
        .collect();
    for gone in watched.folders.difference(&wanted) {
        folders.unwatch(gone);
    }
    let mut held = BTreeSet::new();
    for folder in &wanted {
        // Again for one already watched: a no-op, unless the folder was
        // replaced since (its watch ended with it).
        match folders.watch(folder, folders::CONTENTS) {
            Ok(_) => {
                held.insert(folder.clone());
            }
            Err(error) => {
                tracing::warn!(folder = %folder.display(), %error, "cannot watch a resource's folder")
            }
        }
    }
    watched.paths = paths;
    watched.folders = held;
}
