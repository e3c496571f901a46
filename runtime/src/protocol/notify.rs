//! Telling clients what changed under them: list changes to every
//! initialize-era session and to 2026-07-28 `subscriptions/listen` streams
//! that asked, resource updates to their subscribers, and server warnings.
//!
//! Nothing here waits on a client. Each recipient (a session, a listen
//! stream) has a [`Mailbox`]: telling it something merges into what is
//! pending (list changes are flags, updated resources a set of the URIs it
//! subscribed to, warnings a short queue) and starts that recipient's
//! drain task when none runs. The drain sends what is pending, each send
//! bounded by [`NOTIFY_TIMEOUT`]; a send the client does not take in time
//! drops the rest of that batch. So a reload never waits on delivery, a
//! client that stopped reading delays only its own notifications, and
//! what waits for it is bounded whatever it does. A session is registered
//! once (`initialized` sent again adds nothing), and what a client may
//! make the server remember (resource subscriptions) is bounded in number
//! and size.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotificationParam,
};
use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};

use super::events::from_mcp_level;
use super::{NOTIFY_TIMEOUT, SharedLevel};
use crate::call::LogLevel;
use crate::catalog::Catalog;

/// Everyone to tell when something changes: initialize-era sessions (told
/// with `notifications/*/list_changed`, `notifications/resources/updated`
/// and `notifications/message`) and 2026-07-28 `subscriptions/listen`
/// streams (told what their accepted filter asked for).
#[derive(Default)]
pub struct Notifier {
    sessions: Mutex<Vec<Arc<Recipient>>>,
    listeners: Mutex<Vec<(u64, Arc<Recipient>)>>,
    next_subscription: AtomicU64,
}

/// A URI as error messages quote it: at most 256 bytes of it.
pub(super) fn bounded(uri: &str) -> String {
    crate::redact::truncate(uri, 256)
}

/// The resource URIs one initialize-era session subscribed to.
pub(super) type Subscribed = Arc<Mutex<BTreeSet<String>>>;

/// Resource subscriptions one session may hold at once, and the longest URI
/// one may name: past them, `resources/subscribe` is refused, so a client
/// cannot grow the server's memory without bound.
pub(super) const MAX_SUBSCRIPTIONS: usize = 1024;
pub(super) const MAX_SUBSCRIBED_URI: usize = 8 * 1024;

/// Warnings that may wait for one recipient; later ones are dropped and
/// counted (a reload reports at most a few per file, and a client that
/// falls this far behind is not reading).
const MAX_PENDING_WARNINGS: usize = 64;

/// Which list changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `tools/list`.
    Tools,
    /// `resources/list` and `resources/templates/list`.
    Resources,
    /// `prompts/list`.
    Prompts,
}

impl Notifier {
    /// Tell every client that the tool list changed.
    pub fn tools_changed(&self) {
        self.list_changed(ListKind::Tools);
    }

    /// Tell every client (initialize-era sessions, and 2026-07-28 listeners
    /// that asked for this kind) that a list changed. Returns at once; see
    /// the module documentation.
    pub fn list_changed(&self, kind: ListKind) {
        for session in self.live_sessions() {
            session.post(Message::List(kind));
        }
        for listener in self.listeners() {
            let Target::Listener(sink) = &listener.target else {
                continue;
            };
            let accepted = sink.accepted();
            let wanted = match kind {
                ListKind::Tools => accepted.tools_list_changed,
                ListKind::Resources => accepted.resources_list_changed,
                ListKind::Prompts => accepted.prompts_list_changed,
            };
            if wanted == Some(true) {
                listener.post(Message::List(kind));
            }
        }
    }

    /// Send a warning to every initialize-era client whose log level lets it
    /// through. (2026-07-28 clients only get logs inside a request.)
    pub fn warn(&self, message: &str) {
        for session in self.live_sessions() {
            let Target::Session { level, .. } = &session.target else {
                continue;
            };
            let wanted = level
                .lock()
                .ok()
                .and_then(|l| *l)
                .map_or(LogLevel::Info, from_mcp_level);
            if LogLevel::Warning >= wanted {
                session.post(Message::Warning(message.to_owned()));
            }
        }
    }

    /// Register an initialize-era session, once: a session already
    /// registered (the same `subscribed` set) is not added again, so a
    /// client repeating `notifications/initialized` gains nothing. Sessions
    /// whose transport closed are dropped here too.
    pub(super) fn add_peer(
        &self,
        peer: Peer<RoleServer>,
        level: SharedLevel,
        subscribed: Subscribed,
    ) {
        let Ok(mut sessions) = self.sessions.lock() else {
            return;
        };
        sessions.retain(|session| !session.closed());
        let known = sessions.iter().any(|session| {
            matches!(&session.target, Target::Session { subscribed: s, .. } if Arc::ptr_eq(s, &subscribed))
        });
        if !known {
            sessions.push(Arc::new(Recipient::new(Target::Session {
                peer,
                level,
                subscribed,
            })));
        }
    }

    /// After a reload from `previous` to `next`: tell every subscriber of a
    /// resource whose serving component changed (another version, another
    /// file, or none any more) with `notifications/resources/updated`:
    /// initialize-era sessions that `resources/subscribe`d to it, and
    /// 2026-07-28 listen streams whose accepted filter names it. What a
    /// component's resource reads from its grants is not visible to the
    /// host, so a change there is not noticed.
    pub fn resources_updated(&self, previous: &Catalog, next: &Catalog) {
        let mut verdicts: std::collections::HashMap<String, bool> = Default::default();
        self.send_resource_updates(|uri: &str| {
            *verdicts.entry(uri.to_owned()).or_insert_with(|| {
                let digest =
                    |catalog: &Catalog| catalog.resource_component(uri).map(|c| c.digest.clone());
                digest(previous) != digest(next)
            })
        });
    }

    /// Tell every subscriber of one of `uris` that it changed (a file a
    /// resource's content comes from changed: `watch::resources`).
    pub fn resources_changed(&self, uris: &BTreeSet<String>) {
        self.send_resource_updates(|uri: &str| uris.contains(uri));
    }

    /// Post `notifications/resources/updated` for every subscribed URI
    /// `changed` says changed, to each session or listen stream holding it.
    fn send_resource_updates(&self, mut changed: impl FnMut(&str) -> bool) {
        for session in self.live_sessions() {
            let Target::Session { subscribed, .. } = &session.target else {
                continue;
            };
            let uris: Vec<String> = match subscribed.lock() {
                Ok(uris) => uris.iter().filter(|uri| changed(uri)).cloned().collect(),
                Err(_) => continue,
            };
            for uri in uris {
                session.post(Message::Updated(uri));
            }
        }
        for listener in self.listeners() {
            let Target::Listener(sink) = &listener.target else {
                continue;
            };
            let uris: Vec<String> = sink
                .accepted()
                .resource_subscriptions
                .iter()
                .flatten()
                .filter(|uri| changed(uri))
                .cloned()
                .collect();
            for uri in uris {
                listener.post(Message::Updated(uri));
            }
        }
    }

    pub(super) fn add_subscription(&self, sink: SubscriptionSink) -> u64 {
        let id = self.next_subscription.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut listeners) = self.listeners.lock() {
            listeners.push((id, Arc::new(Recipient::new(Target::Listener(sink)))));
        }
        id
    }

    pub(super) fn remove_subscription(&self, id: u64) {
        if let Ok(mut listeners) = self.listeners.lock() {
            listeners.retain(|(key, _)| *key != id);
        }
    }

    /// The registered sessions whose transport is open (the others are
    /// dropped).
    fn live_sessions(&self) -> Vec<Arc<Recipient>> {
        match self.sessions.lock() {
            Ok(mut sessions) => {
                sessions.retain(|session| !session.closed());
                sessions.clone()
            }
            Err(_) => Vec::new(),
        }
    }

    fn listeners(&self) -> Vec<Arc<Recipient>> {
        match self.listeners.lock() {
            Ok(listeners) => listeners.iter().map(|(_, l)| Arc::clone(l)).collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// One session or listen stream, and what waits to be sent to it.
struct Recipient {
    target: Target,
    mailbox: Mutex<Mailbox>,
}

enum Target {
    /// An initialize-era session: its peer, its `logging/setLevel`, its
    /// `resources/subscribe` set (which also identifies the session).
    Session {
        peer: Peer<RoleServer>,
        level: SharedLevel,
        subscribed: Subscribed,
    },
    /// A 2026-07-28 `subscriptions/listen` stream.
    Listener(SubscriptionSink),
}

impl Recipient {
    fn new(target: Target) -> Self {
        Recipient {
            target,
            mailbox: Mutex::default(),
        }
    }

    fn closed(&self) -> bool {
        match &self.target {
            Target::Session { peer, .. } => peer.is_transport_closed(),
            Target::Listener(_) => false,
        }
    }

    /// Merge `message` into the mailbox, and start the drain task if none
    /// runs. Never waits.
    fn post(self: &Arc<Self>, message: Message) {
        let start = match self.mailbox.lock() {
            Ok(mut mailbox) => mailbox.post(message),
            Err(_) => false,
        };
        if start {
            tokio::spawn(Arc::clone(self).drain());
        }
    }

    /// Send what is pending until nothing is; the only task that sends to
    /// this recipient.
    async fn drain(self: Arc<Self>) {
        loop {
            let batch = match self.mailbox.lock() {
                Ok(mut mailbox) => mailbox.take(),
                Err(_) => None,
            };
            let Some(batch) = batch else { return };
            for message in batch.into_messages() {
                let sent = match &self.target {
                    Target::Session { peer, .. } => {
                        tokio::time::timeout(NOTIFY_TIMEOUT, send_to_session(peer, message)).await
                    }
                    Target::Listener(sink) => {
                        tokio::time::timeout(NOTIFY_TIMEOUT, send_to_listener(sink, message)).await
                    }
                };
                if sent.is_err() {
                    // Not reading: the rest of this batch is dropped, so
                    // a stalled client costs one timeout per batch.
                    tracing::debug!(
                        "a client did not take a notification in time; dropping the rest of its batch"
                    );
                    break;
                }
            }
        }
    }
}

async fn send_to_session(peer: &Peer<RoleServer>, message: Message) {
    let _ = match message {
        Message::List(ListKind::Tools) => peer.notify_tool_list_changed().await,
        Message::List(ListKind::Resources) => peer.notify_resource_list_changed().await,
        Message::List(ListKind::Prompts) => peer.notify_prompt_list_changed().await,
        Message::Updated(uri) => {
            peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
        }
        Message::Warning(text) => {
            let param = LoggingMessageNotificationParam::new(
                LoggingLevel::Warning,
                serde_json::Value::String(text),
            )
            .with_logger("toolcage");
            peer.notify_logging_message(param).await
        }
    };
}

async fn send_to_listener(sink: &SubscriptionSink, message: Message) {
    let _ = match message {
        Message::List(ListKind::Tools) => sink.notify_tool_list_changed().await,
        Message::List(ListKind::Resources) => sink.notify_resource_list_changed().await,
        Message::List(ListKind::Prompts) => sink.notify_prompt_list_changed().await,
        Message::Updated(uri) => sink.notify_resource_updated(uri).await,
        // 2026-07-28 clients get logs only inside a request.
        Message::Warning(_) => return,
    };
}

/// One thing to tell a recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Message {
    List(ListKind),
    Updated(String),
    Warning(String),
}

/// What waits to be sent to one recipient, merged: each list change is a
/// flag, each updated resource a URI in a set (a subset of what the
/// recipient subscribed to, so at most [`MAX_SUBSCRIPTIONS`]), warnings a
/// queue of at most [`MAX_PENDING_WARNINGS`]. However often it is told
/// something, it holds at most that.
#[derive(Debug, Default)]
struct Mailbox {
    pending: Batch,
    /// Whether a drain task runs (it clears this when it finds nothing).
    draining: bool,
}

/// What one drain round sends.
#[derive(Debug, Default, PartialEq, Eq)]
struct Batch {
    tools: bool,
    resources: bool,
    prompts: bool,
    updated: BTreeSet<String>,
    warnings: VecDeque<String>,
    dropped_warnings: usize,
}

impl Mailbox {
    /// Merge `message` in. True when no drain runs: the caller starts one
    /// (and this mailbox counts it as running).
    fn post(&mut self, message: Message) -> bool {
        let pending = &mut self.pending;
        match message {
            Message::List(ListKind::Tools) => pending.tools = true,
            Message::List(ListKind::Resources) => pending.resources = true,
            Message::List(ListKind::Prompts) => pending.prompts = true,
            Message::Updated(uri) => {
                pending.updated.insert(uri);
            }
            Message::Warning(text) if pending.warnings.len() < MAX_PENDING_WARNINGS => {
                pending.warnings.push_back(text);
            }
            Message::Warning(_) => pending.dropped_warnings += 1,
        }
        !std::mem::replace(&mut self.draining, true)
    }

    /// Everything pending, or `None` when nothing is (and then no drain
    /// runs any more).
    fn take(&mut self) -> Option<Batch> {
        let batch = std::mem::take(&mut self.pending);
        if batch == Batch::default() {
            self.draining = false;
            None
        } else {
            Some(batch)
        }
    }
}

impl Batch {
    /// The messages in the order a reload produces them: resource updates,
    /// list changes, warnings (with a count of those dropped last).
    fn into_messages(self) -> impl Iterator<Item = Message> {
        let lists = [
            (self.tools, ListKind::Tools),
            (self.resources, ListKind::Resources),
            (self.prompts, ListKind::Prompts),
        ]
        .into_iter()
        .filter_map(|(changed, kind)| changed.then_some(Message::List(kind)));
        let dropped = (self.dropped_warnings > 0).then(|| {
            Message::Warning(format!(
                "{} more warnings were dropped: this client did not take them in time",
                self.dropped_warnings
            ))
        });
        self.updated
            .into_iter()
            .map(Message::Updated)
            .chain(lists)
            .chain(self.warnings.into_iter().map(Message::Warning))
            .chain(dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drained(mailbox: &mut Mailbox) -> Vec<Message> {
        mailbox
            .take()
            .map(|batch| batch.into_messages().collect())
            .unwrap_or_default()
    }

    #[test]
    fn the_first_post_starts_a_drain_and_later_ones_join_it() {
        let mut mailbox = Mailbox::default();
        assert!(mailbox.post(Message::List(ListKind::Tools)));
        assert!(!mailbox.post(Message::List(ListKind::Prompts)));
        assert_eq!(
            drained(&mut mailbox),
            [
                Message::List(ListKind::Tools),
                Message::List(ListKind::Prompts)
            ]
        );
        // Posted while the drain sends: picked up by its next round.
        assert!(!mailbox.post(Message::List(ListKind::Tools)));
        assert_eq!(drained(&mut mailbox), [Message::List(ListKind::Tools)]);
        // Found empty: the drain ends, and the next post starts another.
        assert_eq!(mailbox.take(), None);
        assert!(mailbox.post(Message::List(ListKind::Resources)));
    }

    #[test]
    fn any_number_of_changes_merges_into_a_bounded_batch() {
        let mut mailbox = Mailbox::default();
        for i in 0..100_000 {
            mailbox.post(Message::List(ListKind::Tools));
            mailbox.post(Message::List(ListKind::Resources));
            mailbox.post(Message::Updated(format!("mem://{}", i % 3)));
            mailbox.post(Message::Warning(format!("problem {i}")));
        }
        let messages = drained(&mut mailbox);
        let updated = ["mem://0", "mem://1", "mem://2"].map(|u| Message::Updated(u.into()));
        assert_eq!(messages[..3], updated);
        assert_eq!(
            messages[3..5],
            [
                Message::List(ListKind::Tools),
                Message::List(ListKind::Resources)
            ]
        );
        let warnings = &messages[5..];
        assert_eq!(warnings.len(), MAX_PENDING_WARNINGS + 1);
        assert_eq!(warnings[0], Message::Warning("problem 0".into()));
        assert_eq!(
            warnings[MAX_PENDING_WARNINGS],
            Message::Warning(format!(
                "{} more warnings were dropped: this client did not take them in time",
                100_000 - MAX_PENDING_WARNINGS
            ))
        );
        assert_eq!(mailbox.take(), None);
    }
}
