//! The client's roots for one initialize-era session: asked with
//! `roots/list` after `initialized` and again after each
//! `notifications/roots/list_changed`, by at most one refresh at a time.
//!
//! A notification never waits on the client: it counts a change and starts
//! a refresh only when none runs; the refresh running reads again until it
//! has read after the latest change. So any number of `roots/list_changed`
//! costs a counter increment each and at most one `roots/list` in flight
//! (rmcp spawns a task per notification; each of these ends at once). A
//! call waits for roots read after the last change it could see (at most
//! the refresh running and one more), never in a queue of other waiters,
//! so a call never runs on roots the client said were stale.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::{Peer, RoleServer};
use tokio::sync::watch;

use crate::grants::files::file_uri_path;

/// How long to wait for the client to answer `roots/list`.
const ROOTS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// One session's roots, as last read, and whether they are current.
#[derive(Default)]
pub(super) struct ClientRoots {
    state: watch::Sender<State>,
}

#[derive(Debug, Default)]
struct State {
    /// `roots/list_changed` notifications so far.
    changes: u64,
    /// The roots last read, with the count of changes when that read began.
    read: Option<(u64, Vec<PathBuf>)>,
    /// Whether a refresh runs.
    refreshing: bool,
}

/// What a caller of [`State::want`] does next.
#[derive(Debug, PartialEq, Eq)]
enum Want {
    /// These roots are current.
    Known(Vec<PathBuf>),
    /// Wait for roots read after `changes` changes, starting the refresh
    /// first if `start`.
    Wait { changes: u64, start: bool },
}

impl State {
    /// The roots if current, else what to wait for (and whether to start
    /// the refresh, which then counts as running).
    fn want(&mut self) -> Want {
        if let Some((at, roots)) = &self.read
            && *at >= self.changes
        {
            return Want::Known(roots.clone());
        }
        let start = !std::mem::replace(&mut self.refreshing, true);
        Want::Wait {
            changes: self.changes,
            start,
        }
    }

    /// Count a change; true when the caller must start the refresh.
    fn changed(&mut self) -> bool {
        self.changes += 1;
        !std::mem::replace(&mut self.refreshing, true)
    }

    /// A refresh that began at `at` changes read `roots`; true when it must
    /// read again (a change came meanwhile), else it ends.
    fn finished(&mut self, at: u64, roots: Vec<PathBuf>) -> bool {
        self.read = Some((at, roots));
        self.refreshing = self.changes > at;
        self.refreshing
    }

    /// Roots read no earlier than `changes` changes.
    fn read_after(&self, changes: u64) -> Option<&[PathBuf]> {
        match &self.read {
            Some((at, roots)) if *at >= changes => Some(roots),
            _ => None,
        }
    }
}

impl ClientRoots {
    /// The roots, read after the last change; asks the client when they
    /// are not. If the client cannot say, the answer is no roots at all:
    /// narrowing fails closed.
    pub(super) async fn current(self: &Arc<Self>, peer: &Peer<RoleServer>) -> Vec<PathBuf> {
        let mut want = None;
        self.state.send_if_modified(|state| {
            want = Some(state.want());
            false
        });
        let changes = match want {
            Some(Want::Known(roots)) => return roots,
            Some(Want::Wait { changes, start }) => {
                if start {
                    self.start_refresh(peer);
                }
                changes
            }
            None => return Vec::new(),
        };
        let mut rx = self.state.subscribe();
        match rx
            .wait_for(|state| state.read_after(changes).is_some())
            .await
        {
            Ok(state) => state
                .read_after(changes)
                .map(<[_]>::to_vec)
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    /// Start reading the roots if they are not current and no refresh runs;
    /// never waits.
    pub(super) fn prefetch(self: &Arc<Self>, peer: &Peer<RoleServer>) {
        let mut start = false;
        self.state.send_if_modified(|state| {
            start = matches!(state.want(), Want::Wait { start: true, .. });
            false
        });
        if start {
            self.start_refresh(peer);
        }
    }

    /// `notifications/roots/list_changed`: the roots are stale. Never
    /// waits: starts the refresh when none runs, else the one running reads
    /// again when it is done.
    pub(super) fn changed(self: &Arc<Self>, peer: &Peer<RoleServer>) {
        let mut start = false;
        self.state.send_if_modified(|state| {
            start = state.changed();
            false
        });
        if start {
            self.start_refresh(peer);
        }
    }

    fn start_refresh(self: &Arc<Self>, peer: &Peer<RoleServer>) {
        let this = Arc::clone(self);
        let peer = peer.clone();
        tokio::spawn(async move {
            loop {
                let at = this.state.borrow().changes;
                let roots = list_roots(&peer).await;
                let mut again = false;
                this.state
                    .send_modify(|state| again = state.finished(at, roots));
                if !again {
                    return;
                }
            }
        });
    }
}

/// Ask the client for its roots: the local `file://` ones, or none when it
/// fails to answer.
async fn list_roots(peer: &Peer<RoleServer>) -> Vec<PathBuf> {
    match tokio::time::timeout(ROOTS_TIMEOUT, peer.list_roots()).await {
        Ok(Ok(result)) => {
            let mut roots = Vec::with_capacity(result.roots.len());
            for root in result.roots {
                match file_uri_path(&root.uri) {
                    Some(path) => roots.push(path),
                    None => {
                        tracing::warn!(uri = %root.uri, "ignoring a client root that is not a local file:// URI")
                    }
                }
            }
            tracing::info!(roots = ?roots, "client roots");
            roots
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, "the client declares roots but roots/list failed; granting no files");
            Vec::new()
        }
        Err(_) => {
            tracing::warn!("the client did not answer roots/list; granting no files");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn the_first_caller_starts_the_one_refresh_and_the_rest_wait_for_it() {
        let mut state = State::default();
        assert_eq!(
            state.want(),
            Want::Wait {
                changes: 0,
                start: true
            }
        );
        assert_eq!(
            state.want(),
            Want::Wait {
                changes: 0,
                start: false
            }
        );
        assert!(!state.finished(0, roots(&["/a"])));
        assert_eq!(state.want(), Want::Known(roots(&["/a"])));
    }

    #[test]
    fn a_flood_of_changes_starts_one_refresh_which_reads_once_more() {
        let mut state = State::default();
        assert!(state.changed());
        for _ in 0..100_000 {
            assert!(!state.changed());
        }
        // The read that began before most of them is stale: read again,
        // and that read is current.
        assert!(state.finished(1, roots(&["/old"])));
        assert!(state.read_after(100_001).is_none());
        assert!(!state.finished(100_001, roots(&["/new"])));
        assert_eq!(state.want(), Want::Known(roots(&["/new"])));
        // The next change starts a refresh again.
        assert!(state.changed());
    }

    #[test]
    fn a_caller_takes_the_first_read_that_began_after_what_it_saw() {
        let mut state = State::default();
        state.changed();
        let Want::Wait {
            changes,
            start: false,
        } = state.want()
        else {
            panic!("a refresh already runs");
        };
        // A read that began before the change does not answer it ...
        assert!(state.finished(0, roots(&["/stale"])));
        assert!(state.read_after(changes).is_none());
        // ... one that began after it does, whatever came later.
        state.changed();
        assert!(state.finished(changes, roots(&["/fresh"])));
        assert_eq!(state.read_after(changes), Some(&roots(&["/fresh"])[..]));
    }
}
