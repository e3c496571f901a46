//! Hot reload: watch the tools folder and the config file, and swap in a
//! new catalog when they change.
//!
//! Events (inotify's, read without a thread of their own: [`folders`]) only
//! say "something changed";
//! each debounced burst triggers one full rescan of the folder, which is
//! the source of truth. That makes the reload idempotent and immune to lost,
//! duplicated or reordered events. Rules:
//!
//! - Bursts are debounced: a reload starts once no relevant event has
//!   arrived for [`QUIET`], or [`MAX_DELAY`] after the first one.
//! - Only `*.wasm` files directly in the folder, the folder itself and the
//!   config file count; an editor's temporary files do not.
//! - A file whose digest did not change is reused, not recompiled. A file
//!   that fails to load never replaces a working version: the last good one
//!   keeps serving, the failure is logged and sent to clients, and the file
//!   is retried on its next event (a half-copied file fails to compile and
//!   loads once complete).
//! - The swap is one pointer store (`Registry::replace`); calls in flight
//!   hold their own `Arc` of the old tool and finish on it.
//! - Clients get one `tools/list_changed` per reload that changed what they
//!   can see (the served names, or the component behind one).
//! - A config that fails to parse keeps the previous one.
//! - The folder may be deleted and recreated: its parent is watched too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::Host;
use crate::catalog;
use crate::config::Config;

/// How long the folder must be quiet before a reload.
pub const QUIET: Duration = Duration::from_millis(150);
/// The longest a reload waits after the first event of a burst, even if the
/// burst goes on.
pub const MAX_DELAY: Duration = Duration::from_secs(5);

mod folders;
pub mod resources;

use folders::{Change, Folders};

/// Keeps the watchers alive; dropping it stops watching.
pub struct WatchHandle {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl WatchHandle {
    /// Also stop `task` when this handle drops.
    #[must_use]
    pub fn with(mut self, task: tokio::task::JoinHandle<()>) -> Self {
        self.tasks.push(task);
        self
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// What a reload did, for tests and logs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReloadSummary {
    /// The served tool set changed (clients were told).
    pub tools_changed: bool,
    /// The config was reloaded.
    pub config_reloaded: bool,
    /// Problems worth telling clients.
    pub problems: Vec<String>,
}

/// Start watching `host`'s tools folder and config file.
///
/// # Errors
///
/// The platform watcher cannot be created.
pub fn watch(host: Arc<Host>) -> anyhow::Result<WatchHandle> {
    // Reloading describes components in the sandbox: on the spill workers
    // when there are some, never on the thread that reads requests. The
    // watches are read where the reload runs.
    let mut folders = Folders::new(host.options.spill.as_ref())?;
    let tools_dir = host.options.tools_dir.clone();
    let config_path = host.options.config.source.clone();
    // The lock (`toolcage add` writes it): a change rescans the folder. Its
    // place is the one the server started with.
    let lock_path = host.options.config.install.lock_file.clone();
    add_watches(
        &mut folders,
        &tools_dir,
        [config_path.as_deref(), lock_path.as_deref()],
    );
    let reload = run(
        Arc::clone(&host),
        folders,
        tools_dir,
        config_path,
        lock_path,
    );
    let task = match &host.options.spill {
        Some(spill) => spill.spawn(reload),
        None => tokio::spawn(reload),
    };
    Ok(WatchHandle { tasks: vec![task] })
}

/// Watch the folder, its parent (only for entries coming and going: to see
/// the folder deleted and recreated), and the folders of the config file
/// and the lock (editors and `toolcage add` replace files rather than write
/// them). Reading a file in any of them (a call opening a root that sits
/// there) raises no event ([`folders`]).
fn add_watches(folders: &mut Folders, tools_dir: &Path, files: [Option<&Path>; 2]) {
    let mut targets = vec![(tools_dir.to_owned(), folders::CONTENTS)];
    if let Some(parent) = tools_dir.parent() {
        targets.push((parent.to_owned(), folders::ENTRIES));
    }
    for parent in files.into_iter().flatten().filter_map(Path::parent) {
        match targets.iter_mut().find(|(target, _)| target == parent) {
            Some((_, mask)) => *mask |= folders::CONTENTS,
            None => targets.push((parent.to_owned(), folders::CONTENTS)),
        }
    }
    for (target, mask) in targets {
        if target.is_dir()
            && let Err(error) = folders.watch(&target, mask)
        {
            tracing::warn!(dir = %target.display(), %error, "cannot watch folder");
        }
    }
}

async fn run(
    host: Arc<Host>,
    mut folders: Folders,
    tools_dir: PathBuf,
    config_path: Option<PathBuf>,
    lock_path: Option<PathBuf>,
) {
    let relevant = |path: &Path| {
        path == tools_dir
            || config_path.as_deref() == Some(path)
            || lock_path.as_deref() == Some(path)
            || (path.parent() == Some(tools_dir.as_path())
                && path.extension().is_some_and(|ext| ext == "wasm"))
    };
    // What a batch of events asks for: a rescan, and whether the config
    // file is among what changed (a lost event may have been it).
    let burst = |change: Change, rescan: &mut bool, config_touched: &mut bool| match change {
        Change::Overflow => {
            tracing::warn!("file watcher queue overflowed; rescanning");
            *rescan = true;
            *config_touched = true;
        }
        Change::Path(path) if relevant(&path) => {
            *rescan = true;
            *config_touched |= config_path.as_deref() == Some(path.as_path());
        }
        Change::Path(_) => {}
    };
    loop {
        // Wait for the first relevant event of a burst.
        let (mut rescan, mut config_touched) = (false, false);
        while !rescan {
            if let Err(error) = folders
                .read(|change| burst(change, &mut rescan, &mut config_touched))
                .await
            {
                // Not expected; rescanning loses nothing, and the pause
                // keeps an error that persists from becoming a busy loop.
                tracing::warn!(%error, "file watcher error; rescanning");
                tokio::time::sleep(QUIET).await;
                (rescan, config_touched) = (true, true);
            }
        }
        // Debounce: until no relevant event for QUIET, or until the burst
        // has lasted MAX_DELAY.
        let deadline = tokio::time::Instant::now() + MAX_DELAY;
        let mut quiet_until = (tokio::time::Instant::now() + QUIET).min(deadline);
        loop {
            let mut more = false;
            let read = folders.read(|change| burst(change, &mut more, &mut config_touched));
            match tokio::time::timeout_at(quiet_until, read).await {
                Err(_) | Ok(Err(_)) => break,
                Ok(Ok(())) if more => {
                    quiet_until = (tokio::time::Instant::now() + QUIET).min(deadline);
                }
                Ok(Ok(())) => {}
            }
        }
        let mut summary = reload(&host, config_touched).await;
        // A deleted folder takes its watch with it. When it is back (even
        // within the burst that deleted it), watch it again and rescan:
        // files may have arrived before the watch did.
        if tools_dir.is_dir() {
            match folders.watch(&tools_dir, folders::CONTENTS) {
                Ok(false) => {}
                Ok(true) => {
                    let again = reload(&host, false).await;
                    summary.tools_changed |= again.tools_changed;
                }
                Err(error) => {
                    tracing::warn!(dir = %tools_dir.display(), %error, "cannot watch folder")
                }
            }
        }
        tracing::info!(
            tools_changed = summary.tools_changed,
            config_reloaded = summary.config_reloaded,
            problems = summary.problems.len(),
            "reload"
        );
    }
}

/// Rescan the folder (and re-read the config if `config_touched`), swap in
/// the new catalog, and tell clients what changed.
pub async fn reload(host: &Host, config_touched: bool) -> ReloadSummary {
    let mut summary = ReloadSummary::default();
    let mut config = host.dispatcher.config();
    if config_touched && let Some(path) = config.source.clone() {
        match Config::load(&path) {
            Ok(mut fresh) => {
                // Grants given on the command line survive a reload.
                for grant in &host.options.cli_grants {
                    fresh.grant_to_all(grant.clone());
                }
                let fresh = Arc::new(fresh);
                if fresh.http != config.http {
                    // The listener, its limits and its authentication are
                    // set up once; `[[callers]]` and everything else apply
                    // from the next call.
                    tracing::warn!(
                        file = %path.display(),
                        "the [http] section changed; it takes effect when the server restarts"
                    );
                }
                host.dispatcher.set_config(Arc::clone(&fresh));
                config = fresh;
                summary.config_reloaded = true;
                tracing::info!(file = %path.display(), "config reloaded");
            }
            Err(error) => {
                let message = format!("{error}; keeping the previous configuration");
                tracing::warn!("{message}");
                summary.problems.push(message);
            }
        }
    }
    let previous = host.registry.snapshot();
    let next = catalog::load_dir(
        host.dispatcher.sandbox(),
        &host.options.tools_dir,
        &config,
        Some(&previous),
    )
    .await;
    for file in &next.files {
        let name = file.path.display();
        // A tool a file declares but does not serve, newly: a clash worth
        // telling clients (a shadowed duplicate is only logged).
        if let catalog::FileStatus::Loaded(entries) = &file.status {
            for entry in entries {
                let catalog::ToolStatus::Refused(reason) = &entry.status else {
                    continue;
                };
                let was_served = previous.tools.contains_key(&entry.descriptor.name);
                if was_served || !previous.files.iter().any(|f| f.path == file.path) {
                    summary.problems.push(format!(
                        "tool `{}` of `{name}` is not served: {reason}",
                        entry.descriptor.name
                    ));
                }
            }
        }
        if !file.capability_change.is_empty() {
            let fate = if file.rejected_update.is_some() {
                "it was not loaded"
            } else {
                "it is loaded; grants still decide what it reaches"
            };
            summary.problems.push(format!(
                "capability change: the new version of `{name}` also imports {} ({fate})",
                file.capability_change.join(", ")
            ));
        }
        match (&file.status, &file.rejected_update) {
            (_, Some(reason)) => summary.problems.push(format!(
                "`{name}` changed but the new version cannot be loaded ({reason}); the previous version keeps serving"
            )),
            (catalog::FileStatus::Failed(reason), None)
                if !previous.files.iter().any(|f| {
                    f.path == file.path
                        && f.digest == file.digest
                        && matches!(f.status, catalog::FileStatus::Failed(_))
                }) =>
            {
                summary
                    .problems
                    .push(format!("`{name}` cannot be loaded: {reason}"));
            }
            _ => {}
        }
    }
    let resources_changed = next.served_resources() != previous.served_resources();
    let prompts_changed = next.served_prompts() != previous.served_prompts();
    summary.tools_changed = next.served() != previous.served()
        || next
            .tools
            .iter()
            .zip(previous.tools.iter())
            .any(|((_, a), (_, b))| !Arc::ptr_eq(&a.spec, &b.spec));
    host.registry.replace(next);
    // The files resources come from may be others now.
    host.resource_refresh.notify_one();
    // Subscribers of a resource whose serving component changed hear of
    // it, whether or not the lists changed. Telling clients never waits on
    // them (each has its own mailbox and drain, `protocol::Notifier`): a
    // client that stopped reading cannot hold this loop.
    host.notifier
        .resources_updated(&previous, &host.registry.snapshot());
    if summary.tools_changed {
        host.notifier.tools_changed();
    }
    if resources_changed {
        host.notifier
            .list_changed(crate::protocol::ListKind::Resources);
    }
    if prompts_changed {
        host.notifier
            .list_changed(crate::protocol::ListKind::Prompts);
    }
    for problem in &summary.problems {
        host.notifier.warn(problem);
    }
    host.dispatcher.metrics().reloaded(
        !summary.problems.is_empty(),
        host.registry.snapshot().tools.len(),
    );
    summary
}
