//! MCP over rmcp: the only module that knows the wire format.
//!
//! [`McpServer`] implements rmcp's `ServerHandler` by hand over the
//! [`Dispatcher`] (no `#[tool_router]`: the tool set is only known at run
//! time). One server value serves one connection; rmcp decides per
//! connection whether the client speaks an initialize-era revision
//! (2025-06-18, 2025-11-25) or the stateless 2026-07-28 one, and
//! `ctx.protocol_version()` tells each request which.
//!
//! One room although over 1,000 lines: the handler and the `to_mcp_*`
//! mapping are the two halves of the one translation to the wire, and the
//! last ~170 lines are the table of mapping cases that pins it.
//!
//! What this layer adds to rmcp:
//! - `logging/setLevel` is remembered per connection (rmcp answers -32601
//!   otherwise); 2026-07-28 requests carry their level in `_meta` instead,
//!   and without one they get no log notifications.
//! - A known method with malformed params gets -32602 rather than rmcp's
//!   default -32601 (rmcp parses those into its catch-all variant).
//! - Guest `log`/`progress` calls become notifications, forwarded by a task
//!   that is drained before the response is returned, so nothing about a
//!   request arrives after its response.

#![allow(deprecated)] // rmcp marks logging (SEP-2577) deprecated; older clients still use it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    Implementation, InputRequest, InputRequiredResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, Prompt, PromptArgument, PromptMessage, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ResourceUpdatedNotificationParam, Role, ServerCapabilities,
    ServerInfo, SetLevelRequestParams, SubscribeRequestMethod, SubscribeRequestParams,
    SubscriptionFilter, Tool, ToolAnnotations, UnsubscribeRequestMethod, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext, SubscriptionSink};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use tokio::sync::mpsc;

use crate::auth::{self, Caller};
use crate::call::{
    Content, GuestEvent, LogLevel, PromptRole, RawPrompt, RawResource, RawTemplate, ResourceBody,
};
use crate::call::{PendingAsk, PendingInput};
use crate::catalog::{Catalog, ToolDescriptor};
use crate::config::ClientNeeds;
use crate::dispatch::{CallContext, CallOutput, DispatchError, Dispatcher, Lane, ServeError};
use crate::grants::files::file_uri_path;
use crate::journal::{CallerRecord, ClientId};
use crate::services::{
    self, Capabilities, PeerServices, ReplayServices, call_digest, sign_state, verify_state,
};

/// How long a 2026-07-28 client may cache `tools/list`. Short, because hot
/// reload can change the set at any moment and change notifications only
/// reach clients that subscribed.
pub const LIST_TTL_MS: u64 = 5_000;

/// How long to wait for one notification to be written. A client that
/// stopped reading must not hold a finished call's response forever.
const NOTIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long to wait for the client to answer `roots/list`.
const ROOTS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A connection's requested log level, shared between its server and the
/// notifier.
type SharedLevel = Arc<Mutex<Option<LoggingLevel>>>;

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
fn bounded(uri: &str) -> String {
    crate::redact::truncate(uri, 256)
}

/// The resource URIs one initialize-era session subscribed to.
type Subscribed = Arc<Mutex<BTreeSet<String>>>;

/// Resource subscriptions one session may hold at once, and the longest URI
/// one may name: past them, `resources/subscribe` is refused, so a client
/// cannot grow the server's memory without bound.
const MAX_SUBSCRIPTIONS: usize = 1024;
const MAX_SUBSCRIBED_URI: usize = 8 * 1024;

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

    fn live_peers(&self) -> Vec<(Peer<RoleServer>, SharedLevel, Subscribed)> {
        match self.peers.lock() {
            Ok(mut peers) => {
                peers.retain(|(peer, _, _)| !peer.is_transport_closed());
                peers.clone()
            }
            Err(_) => Vec::new(),
        }
    }

    fn add_peer(&self, peer: Peer<RoleServer>, level: SharedLevel, subscribed: Subscribed) {
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
        let mut changed = |uri: &str| {
            *verdicts.entry(uri.to_owned()).or_insert_with(|| {
                let digest =
                    |catalog: &Catalog| catalog.resource_component(uri).map(|c| c.digest.clone());
                digest(previous) != digest(next)
            })
        };
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

    fn add_subscription(&self, sink: SubscriptionSink) -> u64 {
        let id = self
            .next_subscription
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut subs) = self.subscriptions.lock() {
            subs.push((id, sink));
        }
        id
    }

    fn remove_subscription(&self, id: u64) {
        if let Ok(mut subs) = self.subscriptions.lock() {
            subs.retain(|(key, _)| *key != id);
        }
    }
}

/// Serves MCP for one connection.
#[derive(Clone)]
pub struct McpServer {
    dispatcher: Arc<Dispatcher>,
    notifier: Arc<Notifier>,
    /// The level an initialize-era client asked for with `logging/setLevel`.
    log_level: SharedLevel,
    /// The client's roots, once asked; `None` until then and after
    /// `notifications/roots/list_changed`. An async mutex: a call waits
    /// while the roots are being fetched, so it never runs on stale roots.
    client_roots: Arc<tokio::sync::Mutex<Option<Vec<PathBuf>>>>,
    /// The transport's name, for the journal.
    transport: &'static str,
    /// The resources this session subscribed to (`resources/subscribe`,
    /// initialize-era sessions only).
    subscribed: Subscribed,
}

impl McpServer {
    /// `tools/call`, on the lane [`Lanes::handle`](crate::dispatch::Lanes::handle) gave it.
    async fn handle_call(
        &self,
        mut request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
        lane: Lane,
    ) -> Result<CallToolResponse, McpError> {
        let stateless = is_stateless(&ctx);
        let client_roots = self.client_roots(&ctx.peer, stateless).await;
        let declared = ctx
            .client_capabilities()
            .map(|caps| ClientNeeds {
                sampling: caps.sampling.is_some(),
                elicitation: caps.elicitation.is_some(),
                roots: caps.roots.is_some(),
            })
            .unwrap_or_default();
        let capabilities = Capabilities {
            elicit: declared.elicitation,
            sample: declared.sampling,
        };
        // 2026-07-28 calls replay with the answers so far (those in the signed
        // state plus the ones this retry brings), bound to the call by a
        // digest of tool and arguments. Older clients are asked directly, so
        // none of this is computed for them.
        let (services, replay) = if stateless {
            let arguments =
                serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
            let owner = caller(&ctx).map(Caller::key);
            let digest = call_digest(owner.as_deref(), &request.name, &arguments);
            let mut answers = match &request.request_state {
                Some(state) => verify_state(state, &digest)
                    .map_err(|reason| McpError::invalid_params(reason, None))?,
                None => std::collections::BTreeMap::new(),
            };
            answers.extend(request.input_responses.take().unwrap_or_default());
            let replay = ReplayServices::new(answers.clone(), capabilities);
            (services::shared(replay), Some((digest, answers)))
        } else {
            let peer_services = PeerServices {
                peer: ctx.peer.clone(),
                capabilities,
            };
            (services::shared(peer_services), None)
        };
        // The forwarder's task starts with the first event worth sending:
        // most calls send none, and a task per call is a thread hand-off
        // per call.
        let forwarder = EventForwarder::new(
            ctx.peer.clone(),
            ctx.meta.get_progress_token(),
            self.wanted_log_level(&ctx),
        );
        let events = forwarder.sink();
        let result = self
            .dispatcher
            .call(
                &request.name,
                request.arguments,
                CallContext {
                    events,
                    cancel: &ctx.ct,
                    client_roots: client_roots.as_deref(),
                    services: Some(services),
                    client: &|| client_id(self.transport, &ctx, &self.dispatcher.config()),
                    caller: caller(&ctx),
                    lane,
                    // A 2026-07-28 request declares what it offers with
                    // itself, so a tool that needs more is refused as the
                    // revision says (-32021, HTTP 400) before it runs.
                    declared: stateless.then_some(declared),
                },
            )
            .await;
        // The sink's last clone went with the call's store; wait until every
        // notification it queued is written, so none trails the response.
        forwarder.finish().await;
        match result {
            Ok(mut output) => match (output.input_required.take(), &replay) {
                (Some(pending), Some((digest, answers))) => {
                    input_required(pending, digest, answers)
                }
                // Only replay stops a call for input.
                (Some(_), None) => Err(McpError::internal_error(
                    "a call stopped for input outside a 2026-07-28 request",
                    None,
                )),
                (None, _) => Ok(to_mcp_result(output).into()),
            },
            Err(error @ DispatchError::UnknownTool { .. }) => Err(McpError::invalid_params(
                format!("{error}; call tools/list for the available tools"),
                None,
            )),
            Err(error @ DispatchError::NotPermitted { .. }) => Err(McpError::invalid_params(
                format!("{error}; tools/list shows the tools this caller may use"),
                None,
            )),
            Err(error @ DispatchError::MissingClientCapability { missing, .. }) => {
                Err(missing_capability(&error, missing))
            }
        }
    }

    /// A server for one connection over `dispatcher` on `transport` (its
    /// name, as the journal records it), registering with `notifier` for
    /// tool-list changes.
    pub fn new(
        dispatcher: Arc<Dispatcher>,
        notifier: Arc<Notifier>,
        transport: &'static str,
    ) -> Self {
        McpServer {
            dispatcher,
            notifier,
            transport,
            log_level: Arc::new(Mutex::new(None)),
            client_roots: Arc::new(tokio::sync::Mutex::new(None)),
            subscribed: Arc::default(),
        }
    }

    /// The client's roots, asking it with `roots/list` when not known yet;
    /// `None` when the client does not declare the roots capability (or
    /// speaks 2026-07-28, where roots are deprecated): the grants apply as
    /// configured. If the client declares roots but cannot say what they
    /// are, the answer is no roots at all: narrowing fails closed.
    async fn client_roots(&self, peer: &Peer<RoleServer>, stateless: bool) -> Option<Vec<PathBuf>> {
        if stateless {
            return None;
        }
        let declared = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !declared {
            return None;
        }
        let mut cached = self.client_roots.lock().await;
        if let Some(roots) = cached.as_ref() {
            return Some(roots.clone());
        }
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
                *cached = Some(roots.clone());
                Some(roots)
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "the client declares roots but roots/list failed; granting no files");
                Some(Vec::new())
            }
            Err(_) => {
                tracing::warn!("the client did not answer roots/list; granting no files");
                Some(Vec::new())
            }
        }
    }

    /// The minimum level of guest log messages this request's client wants,
    /// or `None` for none.
    fn wanted_log_level(&self, ctx: &RequestContext<RoleServer>) -> Option<LogLevel> {
        if is_stateless(ctx) {
            // 2026-07-28: logging is opt-in per request, through `_meta`.
            return ctx.meta.log_level().map(from_mcp_level);
        }
        // Initialize era: what `logging/setLevel` asked for, else `info` (the
        // spec lets servers log before a level is set).
        let level = self.log_level.lock().ok().and_then(|guard| *guard);
        Some(level.map_or(LogLevel::Info, from_mcp_level))
    }
}

fn is_stateless(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerInfo {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_logging()
            .build();
        ServerInfo::new(capabilities)
            .with_server_info(Implementation::new("toolcage", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools run as sandboxed WebAssembly components: each call can reach only \
                 what the operator granted, under CPU, memory and time limits.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let catalog = self.dispatcher.registry().snapshot();
        let config = self.dispatcher.config();
        let caller = caller(&ctx);
        let access = auth::access(&config.callers, caller);
        let tools = catalog
            .tools
            .iter()
            .filter(|(name, _)| access.may_use(name))
            .map(|(_, tool)| to_mcp_tool(&tool.spec.descriptor))
            .collect();
        let mut result = ListToolsResult::with_all_items(tools);
        if is_stateless(&ctx) {
            result = result.with_ttl_ms(LIST_TTL_MS);
        }
        Ok(result)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let catalog = self.dispatcher.registry().snapshot();
        let resources = catalog
            .resources
            .values()
            .map(|r| to_mcp_resource(&r.descriptor))
            .collect();
        let mut result = ListResourcesResult::with_all_items(resources);
        if is_stateless(&ctx) {
            result = result.with_ttl_ms(LIST_TTL_MS);
        }
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let catalog = self.dispatcher.registry().snapshot();
        let templates = catalog
            .templates
            .iter()
            .map(|t| to_mcp_template(&t.descriptor.raw))
            .collect();
        let mut result = ListResourceTemplatesResult::with_all_items(templates);
        if is_stateless(&ctx) {
            result = result.with_ttl_ms(LIST_TTL_MS);
        }
        Ok(result)
    }

    /// `resources/subscribe` (initialize-era sessions; 2026-07-28 clients
    /// name resources in their `subscriptions/listen` filter instead, and
    /// get method-not-found here, as that revision removed the method).
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if is_stateless(&ctx) {
            return Err(McpError::method_not_found::<SubscribeRequestMethod>());
        }
        let uri = request.uri;
        let data = || Some(serde_json::json!({ "uri": uri }));
        if uri.len() > MAX_SUBSCRIBED_URI {
            return Err(McpError::invalid_params(
                format!(
                    "the URI is {} bytes, over the {MAX_SUBSCRIBED_URI}-byte limit",
                    uri.len()
                ),
                None,
            ));
        }
        if self
            .dispatcher
            .registry()
            .snapshot()
            .resource_component(&uri)
            .is_none()
        {
            return Err(McpError::invalid_params(
                format!(
                    "unknown resource `{}`: resources/list and resources/templates/list show what is served",
                    bounded(&uri)
                ),
                data(),
            ));
        }
        let mut subscribed = self
            .subscribed
            .lock()
            .map_err(|_| McpError::internal_error("subscriptions unavailable", None))?;
        if !subscribed.contains(&uri) && subscribed.len() >= MAX_SUBSCRIPTIONS {
            return Err(McpError::invalid_params(
                format!(
                    "this session already holds {MAX_SUBSCRIPTIONS} resource subscriptions, the most it may; unsubscribe from one first"
                ),
                data(),
            ));
        }
        subscribed.insert(uri);
        Ok(())
    }

    /// `resources/unsubscribe`: a URI this session is not subscribed to is
    /// an invalid-params error (so a client learns its bookkeeping is off).
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if is_stateless(&ctx) {
            return Err(McpError::method_not_found::<UnsubscribeRequestMethod>());
        }
        let removed = self
            .subscribed
            .lock()
            .map_err(|_| McpError::internal_error("subscriptions unavailable", None))?
            .remove(&request.uri);
        if removed {
            Ok(())
        } else {
            // Echo the URI only when it is one a subscription could name.
            let data = (request.uri.len() <= MAX_SUBSCRIBED_URI)
                .then(|| serde_json::json!({ "uri": request.uri }));
            Err(McpError::invalid_params(
                format!(
                    "this session is not subscribed to `{}`",
                    bounded(&request.uri)
                ),
                data,
            ))
        }
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let contents = self
            .dispatcher
            .read_resource(&request.uri, &ctx.ct)
            .await
            .map_err(|error| serve_error(error, Some(serde_json::json!({ "uri": request.uri }))))?;
        let b64 = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
        let contents = contents
            .into_iter()
            .map(|c| {
                let contents = match c.body {
                    ResourceBody::Text(text) => ResourceContents::text(text, c.uri),
                    ResourceBody::Blob(bytes) => ResourceContents::blob(b64(&bytes), c.uri),
                };
                match c.mime_type {
                    Some(mime) => contents.with_mime_type(mime),
                    None => contents,
                }
            })
            .collect();
        let mut result = ReadResourceResult::new(contents);
        if is_stateless(&ctx) {
            result = result.with_ttl_ms(LIST_TTL_MS);
        }
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let catalog = self.dispatcher.registry().snapshot();
        let prompts = catalog
            .prompts
            .values()
            .map(|p| to_mcp_prompt(&p.descriptor))
            .collect();
        let mut result = ListPromptsResult::with_all_items(prompts);
        if is_stateless(&ctx) {
            result = result.with_ttl_ms(LIST_TTL_MS);
        }
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let output = self
            .dispatcher
            .get_prompt(&request.name, request.arguments, &ctx.ct)
            .await
            .map_err(|error| serve_error(error, None))?;
        let messages = output
            .messages
            .into_iter()
            .map(|m| {
                let role = match m.role {
                    PromptRole::User => Role::User,
                    PromptRole::Assistant => Role::Assistant,
                };
                PromptMessage::new(role, to_mcp_content(m.content))
            })
            .collect();
        let mut result = GetPromptResult::new(messages);
        result.description = output.description;
        Ok(result.into())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let catalog = self.dispatcher.registry().snapshot();
        catalog
            .tools
            .get(name)
            .map(|tool| to_mcp_tool(&tool.spec.descriptor))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // Here when no other call is on this thread (stdio), else on the
        // spill workers; see `dispatch::Lanes`.
        let this = self.clone();
        self.dispatcher
            .lanes()
            .handle(move |lane| async move { this.handle_call(request, ctx, lane).await })
            .await
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        self.notifier.add_peer(
            ctx.peer.clone(),
            Arc::clone(&self.log_level),
            Arc::clone(&self.subscribed),
        );
        // Learn the roots early, so the first call does not wait for them.
        let _ = self.client_roots(&ctx.peer, false).await;
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = requested.supported_by(&self.get_info().capabilities);
        // Resource URIs are honoured as `resources/subscribe` takes them:
        // served now, each and all of them bounded. The acknowledgment says
        // which were accepted.
        if let Some(uris) = accepted.resource_subscriptions.take() {
            let catalog = self.dispatcher.registry().snapshot();
            // Only the first MAX_SUBSCRIPTIONS named are looked at.
            let served: BTreeSet<String> = uris
                .into_iter()
                .take(MAX_SUBSCRIPTIONS)
                .filter(|uri| {
                    uri.len() <= MAX_SUBSCRIBED_URI && catalog.resource_component(uri).is_some()
                })
                .collect();
            accepted.resource_subscriptions =
                (!served.is_empty()).then(|| served.into_iter().collect());
        }
        Some(accepted)
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        let id = self.notifier.add_subscription(subscription.sink().clone());
        subscription.cancelled().await;
        self.notifier.remove_subscription(id);
        Ok(())
    }

    async fn on_roots_list_changed(&self, ctx: NotificationContext<RoleServer>) {
        *self.client_roots.lock().await = None;
        let _ = self.client_roots(&ctx.peer, false).await;
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if is_stateless(&ctx) {
            // Removed in 2026-07-28: the level travels in each request's _meta.
            return Err(method_not_found("logging/setLevel"));
        }
        if let Ok(mut level) = self.log_level.lock() {
            *level = Some(request.level);
        }
        Ok(())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        // Methods 2026-07-28 removed are unknown to a request of that era.
        const REMOVED_IN_2026: &[&str] = &["initialize", "ping", "logging/setLevel"];
        if is_stateless(&ctx) && REMOVED_IN_2026.contains(&request.method.as_str()) {
            return Err(method_not_found(&request.method));
        }
        // rmcp parses a known method whose params do not fit its type into
        // this catch-all; the right answer for those is invalid params.
        const KNOWN: &[&str] = &[
            "initialize",
            "ping",
            "server/discover",
            "tools/list",
            "tools/call",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "prompts/list",
            "prompts/get",
            "logging/setLevel",
            "subscriptions/listen",
        ];
        if KNOWN.contains(&request.method.as_str()) {
            Err(McpError::invalid_params(
                format!("invalid params for `{}`", request.method),
                request.params,
            ))
        } else {
            Err(method_not_found(&request.method))
        }
    }
}

/// The authenticated caller of the request in `ctx`, if the HTTP router
/// put one in its extensions (never over stdio).
fn caller(ctx: &RequestContext<RoleServer>) -> Option<&Caller> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
}

/// Who sent the request in `ctx` over `transport`, for the call journal;
/// `config` says which `[[callers]]` entry applied.
fn client_id(
    transport: &'static str,
    ctx: &RequestContext<RoleServer>,
    config: &crate::config::Config,
) -> ClientId {
    let parts = ctx.extensions.get::<http::request::Parts>();
    let request = match serde_json::to_value(&ctx.id) {
        Ok(serde_json::Value::String(id)) => id,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    };
    ClientId {
        transport,
        session: parts
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        request: Some(request),
        name: ctx
            .client_info()
            .map(|info| format!("{} {}", info.name, info.version).trim().to_owned()),
        caller: caller(ctx).map(|caller| CallerRecord {
            policy: auth::access(&config.callers, Some(caller))
                .policy_name()
                .map(str::to_owned),
            issuer: caller.issuer.clone(),
            subject: caller.subject.clone(),
            client_id: caller.client_id.clone(),
        }),
    }
}

fn method_not_found(method: &str) -> McpError {
    McpError::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("method not found: `{method}`"),
        None,
    )
}

/// The input-required result for a call that stopped on `pending`.
/// The 2026-07-28 refusal of a call whose tool needs client capabilities
/// the request did not declare: -32021, its `requiredCapabilities` a
/// `ClientCapabilities` object keyed by what is missing (`{"sampling": {}}`),
/// as the revision's schema defines it; rmcp answers it with HTTP 400.
fn missing_capability(error: &DispatchError, missing: ClientNeeds) -> McpError {
    let required: serde_json::Map<String, serde_json::Value> = missing
        .names()
        .into_iter()
        .map(|name| (name.to_owned(), serde_json::json!({})))
        .collect();
    McpError::new(
        rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        error.to_string(),
        Some(serde_json::json!({ "requiredCapabilities": required })),
    )
}

fn input_required(
    pending: PendingInput,
    digest: &str,
    answers: &std::collections::BTreeMap<String, serde_json::Value>,
) -> Result<CallToolResponse, McpError> {
    let request = match &pending.ask {
        PendingAsk::Elicit { message, schema } => services::elicit_request(message, schema),
        PendingAsk::Sample(request) => services::sample_request(request),
    };
    let request: InputRequest = serde_json::from_value(request).map_err(|error| {
        McpError::internal_error(format!("cannot build the input request: {error}"), None)
    })?;
    let requests = std::collections::BTreeMap::from([(pending.key, request)]);
    Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some(requests),
        Some(sign_state(digest, answers)),
    )))
}

/// Map a resource or prompt failure to a JSON-RPC error.
fn serve_error(error: ServeError, data: Option<serde_json::Value>) -> McpError {
    match error {
        ServeError::UnknownResource(_) => McpError::invalid_params(
            format!("{error}; call resources/list and resources/templates/list for what exists"),
            data,
        ),
        ServeError::UnknownPrompt(_) => McpError::invalid_params(
            format!("{error}; call prompts/list for the available prompts"),
            data,
        ),
        ServeError::MissingArgument { .. } | ServeError::Refused(_) => {
            McpError::invalid_params(error.to_string(), data)
        }
        ServeError::Failed(_) => McpError::internal_error(error.to_string(), data),
    }
}

fn to_mcp_resource(d: &RawResource) -> Resource {
    let mut resource = Resource::new(d.uri.clone(), d.name.clone());
    if let Some(title) = &d.title {
        resource = resource.with_title(title.clone());
    }
    if let Some(description) = &d.description {
        resource = resource.with_description(description.clone());
    }
    if let Some(mime) = &d.mime_type {
        resource = resource.with_mime_type(mime.clone());
    }
    if let Some(size) = d.size {
        resource = resource.with_size(size);
    }
    resource
}

fn to_mcp_template(d: &RawTemplate) -> ResourceTemplate {
    let mut template = ResourceTemplate::new(d.uri_template.clone(), d.name.clone());
    if let Some(title) = &d.title {
        template = template.with_title(title.clone());
    }
    if let Some(description) = &d.description {
        template = template.with_description(description.clone());
    }
    if let Some(mime) = &d.mime_type {
        template = template.with_mime_type(mime.clone());
    }
    template
}

fn to_mcp_prompt(d: &RawPrompt) -> Prompt {
    let arguments = d
        .arguments
        .iter()
        .map(|a| {
            let mut argument = PromptArgument::new(a.name.clone()).with_required(a.required);
            if let Some(title) = &a.title {
                argument = argument.with_title(title.clone());
            }
            if let Some(description) = &a.description {
                argument = argument.with_description(description.clone());
            }
            argument
        })
        .collect::<Vec<_>>();
    let arguments = (!arguments.is_empty()).then_some(arguments);
    let mut prompt = Prompt::new(d.name.clone(), d.description.clone(), arguments);
    if let Some(title) = &d.title {
        prompt = prompt.with_title(title.clone());
    }
    prompt
}

/// A tool as `tools/list` shows it.
pub fn to_mcp_tool(descriptor: &ToolDescriptor) -> Tool {
    let a = descriptor.annotations;
    let mut annotations = ToolAnnotations::new()
        .read_only(a.read_only)
        .destructive(a.destructive)
        .idempotent(a.idempotent)
        .open_world(a.open_world);
    if let Some(title) = &descriptor.title {
        annotations.title = Some(title.clone());
    }
    let mut tool = Tool::new(
        descriptor.name.clone(),
        descriptor.description.clone(),
        Arc::clone(&descriptor.input_schema),
    )
    .with_annotations(annotations);
    if let Some(title) = &descriptor.title {
        tool = tool.with_title(title.clone());
    }
    if let Some(schema) = &descriptor.output_schema {
        tool = tool.with_raw_output_schema(Arc::clone(schema));
    }
    tool
}

/// Convert a dispatcher result to MCP's `CallToolResult`.
pub fn to_mcp_result(output: CallOutput) -> CallToolResult {
    let content: Vec<ContentBlock> = output.content.into_iter().map(to_mcp_content).collect();
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = output.structured;
    result
}

/// Convert one content item to MCP (binary data base64-encoded).
fn to_mcp_content(item: Content) -> ContentBlock {
    let b64 = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
    match item {
        Content::Text(text) => ContentBlock::text(text),
        Content::Image { data, mime_type } => ContentBlock::image(b64(&data), mime_type),
        Content::Audio { data, mime_type } => ContentBlock::audio(b64(&data), mime_type),
        Content::Resource {
            uri,
            mime_type,
            body,
        } => {
            let mut contents = match body {
                ResourceBody::Text(text) => ResourceContents::text(text, uri),
                ResourceBody::Blob(bytes) => ResourceContents::blob(b64(&bytes), uri),
            };
            if let Some(mime) = mime_type {
                contents = contents.with_mime_type(mime);
            }
            ContentBlock::resource(contents)
        }
    }
}

/// Events of one call that may wait for the client at once; past it, log
/// messages are dropped (and counted) and progress is coalesced to the
/// latest report, so a guest cannot make the host buffer without bound
/// however slowly its client reads.
const EVENT_QUEUE: usize = 64;

/// Turns a call's [`GuestEvent`]s into notifications to its client.
struct EventForwarder {
    /// `None` when the client asked for nothing a guest could send.
    inner: Option<Arc<ForwarderInner>>,
}

struct ForwarderInner {
    peer: Peer<RoleServer>,
    progress_token: Option<ProgressToken>,
    min_level: Option<LogLevel>,
    /// The queue to the draining task and the task, once an event needed it.
    running: std::sync::Mutex<Option<(mpsc::Sender<GuestEvent>, tokio::task::JoinHandle<()>)>>,
    /// The latest progress report that found the queue full.
    overflow_progress: Arc<Mutex<Option<GuestEvent>>>,
    /// Log messages dropped because the queue was full.
    dropped_logs: Arc<std::sync::atomic::AtomicU32>,
}

impl EventForwarder {
    fn new(
        peer: Peer<RoleServer>,
        progress_token: Option<ProgressToken>,
        min_level: Option<LogLevel>,
    ) -> Self {
        let wanted = progress_token.is_some() || min_level.is_some();
        EventForwarder {
            inner: wanted.then(|| {
                Arc::new(ForwarderInner {
                    peer,
                    progress_token,
                    min_level,
                    running: std::sync::Mutex::new(None),
                    overflow_progress: Arc::default(),
                    dropped_logs: Arc::default(),
                })
            }),
        }
    }

    /// The sink for the sandbox: drops what the client did not ask for,
    /// queues the rest (never blocks, never grows past [`EVENT_QUEUE`]),
    /// starting the task on first use.
    fn sink(&self) -> Option<crate::call::EventSink> {
        let inner = Arc::clone(self.inner.as_ref()?);
        Some(Arc::new(move |event: GuestEvent| {
            let wanted = match &event {
                GuestEvent::Log { level, .. } => inner.min_level.is_some_and(|min| *level >= min),
                GuestEvent::Progress { .. } => inner.progress_token.is_some(),
            };
            if !wanted {
                return;
            }
            let Ok(mut running) = inner.running.lock() else {
                return;
            };
            let (tx, _) = running.get_or_insert_with(|| {
                let (tx, rx) = mpsc::channel(EVENT_QUEUE);
                let task = tokio::spawn(drain(
                    inner.peer.clone(),
                    inner.progress_token.clone(),
                    rx,
                    Arc::clone(&inner.overflow_progress),
                    Arc::clone(&inner.dropped_logs),
                ));
                (tx, task)
            });
            match tx.try_send(event) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(event @ GuestEvent::Progress { .. })) => {
                    if let Ok(mut slot) = inner.overflow_progress.lock() {
                        *slot = Some(event);
                    }
                }
                Err(mpsc::error::TrySendError::Full(GuestEvent::Log { .. })) => {
                    inner
                        .dropped_logs
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                // The client went away; the event is moot.
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }))
    }

    /// Wait until every queued notification is written, so none trails the
    /// response.
    async fn finish(self) {
        let running = self
            .inner
            .and_then(|inner| inner.running.lock().ok().and_then(|mut r| r.take()));
        if let Some((tx, task)) = running {
            drop(tx);
            let _ = task.await;
        }
    }
}

async fn drain(
    peer: Peer<RoleServer>,
    progress_token: Option<ProgressToken>,
    mut rx: mpsc::Receiver<GuestEvent>,
    overflow_progress: Arc<Mutex<Option<GuestEvent>>>,
    dropped_logs: Arc<std::sync::atomic::AtomicU32>,
) {
    let mut last_progress = f64::NEG_INFINITY;
    let mut stalled = false;
    let take_overflow = || {
        overflow_progress
            .lock()
            .ok()
            .and_then(|mut slot| slot.take())
    };
    loop {
        // The queue first, then a progress report that found it full (the
        // latest only: progress supersedes progress).
        let event = match rx.recv().await {
            Some(event) => event,
            None => match take_overflow() {
                Some(event) => event,
                None => break,
            },
        };
        for event in std::iter::once(event).chain(take_overflow()) {
            // A client that let one notification time out is not reading:
            // the rest are dropped rather than each waiting its timeout.
            if !stalled {
                stalled = !notify(&peer, progress_token.as_ref(), &mut last_progress, event).await;
            }
        }
    }
    let dropped = dropped_logs.load(std::sync::atomic::Ordering::Relaxed);
    if dropped > 0 && !stalled {
        let message = GuestEvent::Log {
            level: LogLevel::Warning,
            message: format!(
                "{dropped} log messages of this call were dropped: the client was not reading fast enough"
            ),
        };
        notify(&peer, progress_token.as_ref(), &mut last_progress, message).await;
    }
}

/// Send one guest event to the client, bounded by [`NOTIFY_TIMEOUT`];
/// `false` if the client did not take it in time.
async fn notify(
    peer: &Peer<RoleServer>,
    progress_token: Option<&ProgressToken>,
    last_progress: &mut f64,
    event: GuestEvent,
) -> bool {
    match event {
        GuestEvent::Log { level, message } => {
            let param = LoggingMessageNotificationParam::new(
                to_mcp_level(level),
                serde_json::Value::String(message),
            )
            .with_logger("tool");
            tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_logging_message(param))
                .await
                .is_ok()
        }
        GuestEvent::Progress {
            done,
            total,
            message,
        } => {
            // MCP requires progress to increase; drop reports that do not.
            let Some(token) = progress_token else {
                return true;
            };
            if done <= *last_progress {
                return true;
            }
            *last_progress = done;
            let mut param = ProgressNotificationParam::new(token.clone(), done);
            param.total = total;
            param.message = message;
            tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_progress(param))
                .await
                .is_ok()
        }
    }
}

fn to_mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

fn from_mcp_level(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

#[cfg(test)]
mod tests {
    //! The mapping to the wire, case by case: what toolcage hands rmcp and
    //! the JSON MCP clients then read.

    use serde_json::{Value, json};

    use super::*;
    use crate::call::Annotations;

    /// `value` as sent equals `expect`.
    fn check(value: impl serde::Serialize, expect: Value) {
        let got = serde_json::to_value(value).expect("serialises");
        assert_eq!(got, expect, "\n got: {got:#}\nwant: {expect:#}");
    }

    fn output(content: Vec<Content>, structured: Option<Value>, is_error: bool) -> CallOutput {
        CallOutput {
            content,
            structured,
            is_error,
            input_required: None,
        }
    }

    #[test]
    fn results() {
        let cases = [
            (
                output(vec![Content::Text("hi".into())], None, false),
                json!({"content": [{"type": "text", "text": "hi"}], "isError": false, "resultType": "complete"}),
            ),
            (
                CallOutput::error("tool `x` ran out of fuel (limit 5)"),
                json!({
                    "content": [{"type": "text", "text": "tool `x` ran out of fuel (limit 5)"}],
                    "isError": true,
                    "resultType": "complete"
                }),
            ),
            (
                output(
                    vec![Content::Text("{\"n\":1}".into())],
                    Some(json!({"n": 1})),
                    false,
                ),
                json!({
                    "content": [{"type": "text", "text": "{\"n\":1}"}],
                    "structuredContent": {"n": 1},
                    "isError": false,
                    "resultType": "complete"
                }),
            ),
            (
                output(
                    vec![
                        Content::Image {
                            data: vec![0, 1, 2],
                            mime_type: "image/png".into(),
                        },
                        Content::Audio {
                            data: b"RIFF".to_vec(),
                            mime_type: "audio/wav".into(),
                        },
                    ],
                    None,
                    false,
                ),
                json!({
                    "content": [
                        {"type": "image", "data": "AAEC", "mimeType": "image/png"},
                        {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
                    ],
                    "isError": false,
                    "resultType": "complete"
                }),
            ),
            (
                output(
                    vec![
                        Content::Resource {
                            uri: "file:///a.txt".into(),
                            mime_type: Some("text/plain".into()),
                            body: ResourceBody::Text("a".into()),
                        },
                        Content::Resource {
                            uri: "mem://b".into(),
                            mime_type: None,
                            body: ResourceBody::Blob(vec![255]),
                        },
                    ],
                    None,
                    false,
                ),
                json!({
                    "content": [
                        {"type": "resource", "resource":
                            {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "a"}},
                        {"type": "resource", "resource": {"uri": "mem://b", "blob": "/w=="}}
                    ],
                    "isError": false,
                    "resultType": "complete"
                }),
            ),
        ];
        for (output, expect) in cases {
            check(to_mcp_result(output), expect);
        }
    }

    #[test]
    fn tools() {
        let schema = |v: Value| match v {
            Value::Object(map) => Arc::new(map),
            _ => unreachable!("an object"),
        };
        let plain = ToolDescriptor {
            name: "t".into(),
            title: None,
            description: "Does t.".into(),
            input_schema: schema(json!({"type": "object"})),
            output_schema: None,
            annotations: Annotations::default(),
        };
        check(
            to_mcp_tool(&plain),
            json!({
                "name": "t",
                "description": "Does t.",
                "inputSchema": {"type": "object"},
                "annotations": {
                    "readOnlyHint": false,
                    "destructiveHint": false,
                    "idempotentHint": false,
                    "openWorldHint": false
                }
            }),
        );
        let full = ToolDescriptor {
            title: Some("Tee".into()),
            output_schema: Some(schema(json!({"type": "object", "properties": {}}))),
            annotations: Annotations {
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: true,
            },
            ..plain
        };
        check(
            to_mcp_tool(&full),
            json!({
                "name": "t",
                "title": "Tee",
                "description": "Does t.",
                "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object", "properties": {}},
                "annotations": {
                    "title": "Tee",
                    "readOnlyHint": true,
                    "destructiveHint": false,
                    "idempotentHint": true,
                    "openWorldHint": true
                }
            }),
        );
    }
}
