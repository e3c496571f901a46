//! Telling clients what changed under them: list changes to every
//! initialize-era session and to 2026-07-28 `subscriptions/listen` streams
//! that asked, resource updates to their subscribers, and server warnings.
//! Every send is bounded in time (a client that stopped reading cannot hold
//! a reload), and what a client may make the server remember (resource
//! subscriptions) is bounded in number and size.

use std::collections::BTreeSet;
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

/// Everyone to tell when the tool set changes: initialize-era sessions (told
/// with `notifications/tools/list_changed`) and 2026-07-28
/// `subscriptions/listen` streams that asked for tool-list changes.
#[derive(Default)]
pub struct Notifier {
    peers: Mutex<Vec<(Peer<RoleServer>, SharedLevel, Subscribed)>>,
    subscriptions: Mutex<Vec<(u64, SubscriptionSink)>>,
    next_subscription: std::sync::atomic::AtomicU64,
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
    /// Tell every client that the tool list changed: one notification each.
    pub async fn tools_changed(&self) {
        self.list_changed(ListKind::Tools).await;
    }

    /// Tell every client (initialize-era peers, and 2026-07-28 listeners
    /// that asked for this kind) that a list changed.
    pub async fn list_changed(&self, kind: ListKind) {
        let peers: Vec<_> = self
            .live_peers()
            .into_iter()
            .map(|(peer, _, _)| peer)
            .collect();
        for peer in peers {
            let _ = match kind {
                ListKind::Tools => {
                    tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_tool_list_changed()).await
                }
                ListKind::Resources => {
                    tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_resource_list_changed()).await
                }
                ListKind::Prompts => {
                    tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_prompt_list_changed()).await
                }
            };
        }
        let sinks: Vec<SubscriptionSink> = match self.subscriptions.lock() {
            Ok(subs) => subs.iter().map(|(_, sink)| sink.clone()).collect(),
            Err(_) => Vec::new(),
        };
        for sink in sinks {
            let accepted = sink.accepted();
            let _ = match kind {
                ListKind::Tools if accepted.tools_list_changed == Some(true) => {
                    tokio::time::timeout(NOTIFY_TIMEOUT, sink.notify_tool_list_changed()).await
                }
                ListKind::Resources if accepted.resources_list_changed == Some(true) => {
                    tokio::time::timeout(NOTIFY_TIMEOUT, sink.notify_resource_list_changed()).await
                }
                ListKind::Prompts if accepted.prompts_list_changed == Some(true) => {
                    tokio::time::timeout(NOTIFY_TIMEOUT, sink.notify_prompt_list_changed()).await
                }
                _ => continue,
            };
        }
    }

    /// Send a warning to every initialize-era client whose log level lets it
    /// through. (2026-07-28 clients only get logs inside a request.)
    pub async fn warn(&self, message: &str) {
        for (peer, level, _) in self.live_peers() {
            let wanted = level
                .lock()
                .ok()
                .and_then(|l| *l)
                .map_or(LogLevel::Info, from_mcp_level);
            if LogLevel::Warning >= wanted {
                let param = LoggingMessageNotificationParam::new(
                    LoggingLevel::Warning,
                    serde_json::Value::String(message.to_owned()),
                )
                .with_logger("toolcage");
                let _ =
                    tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_logging_message(param)).await;
            }
        }
    }

    pub(super) fn live_peers(&self) -> Vec<(Peer<RoleServer>, SharedLevel, Subscribed)> {
        match self.peers.lock() {
            Ok(mut peers) => {
                peers.retain(|(peer, _, _)| !peer.is_transport_closed());
                peers.clone()
            }
            Err(_) => Vec::new(),
        }
    }

    pub(super) fn add_peer(
        &self,
        peer: Peer<RoleServer>,
        level: SharedLevel,
        subscribed: Subscribed,
    ) {
        if let Ok(mut peers) = self.peers.lock() {
            peers.push((peer, level, subscribed));
        }
    }

    /// After a reload from `previous` to `next`: tell every subscriber of a
    /// resource whose serving component changed (another version, another
    /// file, or none any more) with `notifications/resources/updated`:
    /// initialize-era sessions that `resources/subscribe`d to it, and
    /// 2026-07-28 listen streams whose accepted filter names it. What a
    /// component's resource reads from its grants is not visible to the
    /// host, so a change there is not noticed.
    pub async fn resources_updated(&self, previous: &Catalog, next: &Catalog) {
        let mut verdicts: std::collections::HashMap<String, bool> = Default::default();
        self.send_resource_updates(|uri: &str| {
            *verdicts.entry(uri.to_owned()).or_insert_with(|| {
                let digest =
                    |catalog: &Catalog| catalog.resource_component(uri).map(|c| c.digest.clone());
                digest(previous) != digest(next)
            })
        })
        .await;
    }

    /// Tell every subscriber of one of `uris` that it changed (a file a
    /// resource's content comes from changed: `watch::resources`).
    pub async fn resources_changed(&self, uris: &BTreeSet<String>) {
        self.send_resource_updates(|uri: &str| uris.contains(uri))
            .await;
    }

    /// Send `notifications/resources/updated` for every subscribed URI
    /// `changed` says changed, to each session or listen stream holding it.
    async fn send_resource_updates(&self, mut changed: impl FnMut(&str) -> bool) {
        let mut sends: Vec<(Peer<RoleServer>, String)> = Vec::new();
        for (peer, _, subscribed) in self.live_peers() {
            let uris: Vec<String> = match subscribed.lock() {
                Ok(uris) => uris.iter().cloned().collect(),
                Err(_) => continue,
            };
            sends.extend(
                uris.into_iter()
                    .filter(|uri| changed(uri))
                    .map(|uri| (peer.clone(), uri)),
            );
        }
        let sinks: Vec<SubscriptionSink> = match self.subscriptions.lock() {
            Ok(subs) => subs.iter().map(|(_, sink)| sink.clone()).collect(),
            Err(_) => Vec::new(),
        };
        let mut sink_sends: Vec<(SubscriptionSink, String)> = Vec::new();
        for sink in sinks {
            let uris = sink
                .accepted()
                .resource_subscriptions
                .clone()
                .unwrap_or_default();
            sink_sends.extend(
                uris.into_iter()
                    .filter(|uri| changed(uri))
                    .map(|uri| (sink.clone(), uri)),
            );
        }
        for (peer, uri) in sends {
            let param = ResourceUpdatedNotificationParam::new(uri);
            let _ = tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_resource_updated(param)).await;
        }
        for (sink, uri) in sink_sends {
            let _ = tokio::time::timeout(NOTIFY_TIMEOUT, sink.notify_resource_updated(uri)).await;
        }
    }

    pub(super) fn add_subscription(&self, sink: SubscriptionSink) -> u64 {
        let id = self
            .next_subscription
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut subs) = self.subscriptions.lock() {
            subs.push((id, sink));
        }
        id
    }

    pub(super) fn remove_subscription(&self, id: u64) {
        if let Ok(mut subs) = self.subscriptions.lock() {
            subs.retain(|(key, _)| *key != id);
        }
    }
}
