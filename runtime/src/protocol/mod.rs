//! MCP over rmcp: the only module that knows the wire format.
//!
//! [`McpServer`] implements rmcp's `ServerHandler` by hand over the
//! [`Dispatcher`] (no `#[tool_router]`: the tool set is only known at run
//! time). One server value serves one connection; rmcp decides per
//! connection whether the client speaks an initialize-era revision
//! (2025-06-18, 2025-11-25) or the stateless 2026-07-28 one, and
//! `ctx.protocol_version()` tells each request which.
//!
//! The handler is here; the rooms beside it: `shape` (every mapping of a
//! guest's descriptors and results to the wire, and the table of cases
//! that pins it), `notify` (list changes, resource updates and warnings to
//! clients) and `events` (a call's log and progress as notifications).
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

mod events;
mod notify;
mod shape;
mod tasks;

pub use notify::{ListKind, Notifier};
pub use shape::{to_mcp_result, to_mcp_tool};
pub use tasks::Tasks;

use events::{EventForwarder, from_mcp_level};
use notify::{MAX_SUBSCRIBED_URI, MAX_SUBSCRIPTIONS, Subscribed, bounded};
use shape::{input_required, to_mcp_prompt, to_mcp_resource, to_mcp_template};

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
    CompleteRequestParams, CompleteResult, CustomRequest, CustomResult, ErrorCode,
    GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    LoggingLevel, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, Reference, ServerCapabilities, ServerInfo, SetLevelRequestParams,
    SubscribeRequestMethod, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestMethod, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};

use crate::auth::{self, Caller};
use tokio_util::sync::CancellationToken;

use crate::call::{
    ClientServices, CompletionRequest, CompletionTarget, GuestEvent, LogLevel, TaskStart,
    TaskSupport,
};
use crate::config::ClientNeeds;
use crate::dispatch::{CallContext, DispatchError, Dispatcher, Lane, ServeError};
use crate::grants::files::file_uri_path;
use crate::journal::{CallerRecord, ClientId};
use crate::services::{
    self, Capabilities, PeerServices, ReplayServices, call_digest, verify_state,
};

/// How long a 2026-07-28 client may cache `tools/list`. Short, because hot
/// reload can change the set at any moment and change notifications only
/// reach clients that subscribed.
pub const LIST_TTL_MS: u64 = 5_000;

/// How long to wait for one notification to be written. A client that
/// stopped reading must not hold a finished call's response forever.
pub(crate) const NOTIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long to wait for the client to answer `roots/list`.
const ROOTS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A connection's requested log level, shared between its server and the
/// notifier.
pub(crate) type SharedLevel = Arc<Mutex<Option<LoggingLevel>>>;

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
    /// The server's tasks, across connections.
    tasks: Arc<Tasks>,
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
        let declared = declared_needs(&ctx);
        if stateless
            && declared.tasks
            && let Some(start) = self.task_start(&request.name, &ctx)
        {
            return self.handle_task_call(request, ctx, declared, start).await;
        }
        let client_roots = self.client_roots(&ctx.peer, stateless).await;
        let arguments = request.arguments.clone().unwrap_or_default();
        let (services, replay) = client_services(
            self.dispatcher.config().state_keys.as_ref(),
            &ctx,
            &request.name,
            &arguments,
            request.request_state.as_deref(),
            request.input_responses.take(),
        )?;
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
                    task: None,
                },
            )
            .await;
        // The sink's last clone went with the call's store; wait until every
        // notification it queued is written, so none trails the response.
        forwarder.finish().await;
        respond(result, replay.as_ref())
    }

    /// When a call of tool `name` by this request's caller would become a
    /// task: `None` when it runs in its request (no such tool, one the
    /// caller may not use, or one whose calls are not tasks; the dispatcher
    /// then answers as for any call).
    fn task_start(&self, name: &str, ctx: &RequestContext<RoleServer>) -> Option<TaskStart> {
        let config = self.dispatcher.config();
        if !auth::access(&config.callers, caller(ctx)).may_use(name) {
            return None;
        }
        let catalog = self.dispatcher.registry().snapshot();
        let descriptor = &catalog.tools.get(name)?.spec.descriptor;
        (task_support(&config, name, descriptor) != TaskSupport::Forbidden)
            .then_some(descriptor.execution.task_start)
    }

    /// A `tools/call` that runs as a task (see `tasks`): the call is spawned
    /// on its own; with `start` `WithCall` the task is made first and
    /// answered at once, with `OnBeginTask` the request waits until the
    /// guest begins its task (then answers with it) or ends (then answers
    /// as any call does).
    async fn handle_task_call(
        &self,
        mut request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
        declared: ClientNeeds,
        start: TaskStart,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.take().unwrap_or_default();
        let replay = replay_answers(
            self.dispatcher.config().state_keys.as_ref(),
            &ctx,
            &request.name,
            &arguments,
            request.request_state.as_deref(),
            request.input_responses.take(),
        )?;
        let capabilities = capabilities(declared);
        let promotion = Arc::new(tasks::Promotion::default());
        let services = Arc::new(tasks::TaskServices {
            replay: ReplayServices::new(replay.answers.clone(), capabilities),
            capabilities,
            promotion: Arc::clone(&promotion),
        });
        let owner = task_owner(&ctx);
        let client = client_id(self.transport, &ctx, &self.dispatcher.config());
        let cancel = CancellationToken::new();
        let slot: Arc<std::sync::OnceLock<String>> = Arc::default();
        let make_task = || {
            let entry = self.tasks.create(
                &owner,
                &request.name,
                client.clone(),
                replay.answers.clone(),
                cancel.clone(),
            )?;
            let _ = slot.set(entry.id().to_owned());
            Ok(entry)
        };
        if start == TaskStart::WithCall {
            // Made (or refused) before anything runs.
            promotion.promote(make_task)?;
        }
        let (begin_tx, begin_rx) = tokio::sync::oneshot::channel::<()>();
        let begin = Mutex::new(Some(begin_tx));
        let promoted = Arc::clone(&promotion);
        // A task's client polls: its progress becomes the task's status
        // message, and nothing is sent as a notification (the request that
        // would carry it is answered).
        let events: crate::call::EventSink = Arc::new(move |event| match event {
            GuestEvent::BeginTask => {
                if let Some(tx) = begin.lock().ok().and_then(|mut b| b.take()) {
                    let _ = tx.send(());
                }
            }
            GuestEvent::Progress {
                message: Some(message),
                ..
            } => {
                if let Some(entry) = promoted.task() {
                    entry.set_message(message);
                }
            }
            _ => {}
        });
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        {
            let dispatcher = Arc::clone(&self.dispatcher);
            let tasks = Arc::clone(&self.tasks);
            let promotion = Arc::clone(&promotion);
            let caller = caller(&ctx).cloned();
            let client = client.clone();
            let name = request.name.clone();
            let cancel = cancel.clone();
            let slot = Arc::clone(&slot);
            let services: Arc<dyn ClientServices> = services;
            self.dispatcher.lanes().spawn(async move {
                let client_id = move || client.clone();
                let result = dispatcher
                    .call(
                        &name,
                        Some(arguments),
                        CallContext {
                            events: Some(events),
                            cancel: &cancel,
                            client_roots: None,
                            services: Some(services),
                            client: &client_id,
                            caller: caller.as_ref(),
                            lane: Lane::Pooled,
                            declared: Some(declared),
                            task: Some(slot),
                        },
                    )
                    .await;
                match promotion.end() {
                    Some(entry) => tasks.finish(&entry, task_ending(result)),
                    None => {
                        let _ = done_tx.send(result);
                    }
                }
            });
        }
        if let Some(entry) = promotion.task() {
            self.tasks.share(&entry).await?;
            return Ok(entry.created().into());
        }
        let mut done_rx = done_rx;
        tokio::select! {
            begun = begin_rx => {
                if begun.is_ok() {
                    match promotion.promote(make_task) {
                        Ok(Some(entry)) => {
                            self.tasks.share(&entry).await?;
                            return Ok(entry.created().into());
                        }
                        Ok(None) => {}
                        Err(refusal) => {
                            // The task cannot be kept: the call stops.
                            cancel.cancel();
                            return Err(refusal);
                        }
                    }
                }
            }
            result = &mut done_rx => {
                return match result {
                    Ok(result) => respond(result, Some(&replay)),
                    Err(_) => Err(McpError::internal_error("the call ended without a result", None)),
                };
            }
            () = ctx.ct.cancelled() => {
                cancel.cancel();
            }
        }
        match done_rx.await {
            Ok(result) => respond(result, Some(&replay)),
            Err(_) => Err(McpError::internal_error(
                "the call ended without a result",
                None,
            )),
        }
    }
}

/// The answer to a `tools/call` that ran in its request.
fn respond(
    result: Result<crate::dispatch::CallOutput, DispatchError>,
    replay: Option<&Replay>,
) -> Result<CallToolResponse, McpError> {
    match result {
        Ok(mut output) => match (output.input_required.take(), replay) {
            (Some(pending), Some(replay)) => input_required(
                pending,
                replay.keys.as_deref(),
                &replay.digest,
                &replay.answers,
            )
            .map(Into::into),
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

impl McpServer {
    /// A server for one connection over `dispatcher` on `transport` (its
    /// name, as the journal records it), registering with `notifier` for
    /// tool-list changes, keeping its tasks in `tasks`.
    pub fn new(
        dispatcher: Arc<Dispatcher>,
        notifier: Arc<Notifier>,
        tasks: Arc<Tasks>,
        transport: &'static str,
    ) -> Self {
        McpServer {
            dispatcher,
            notifier,
            tasks,
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
            .enable_completions()
            .enable_tasks()
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
            .map(|(name, tool)| {
                to_mcp_tool(
                    &tool.spec.descriptor,
                    task_support(&config, name, &tool.spec.descriptor),
                )
            })
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
        Ok(shape::to_mcp_resource_result(contents, is_stateless(&ctx)).into())
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
        mut request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let arguments = request.arguments.clone().unwrap_or_default();
        // A prompt may ask the user as a call may; its questions are bound
        // to the prompt and its arguments as a call's are.
        let (services, replay) = client_services(
            self.dispatcher.config().state_keys.as_ref(),
            &ctx,
            &format!("prompt:{}", request.name),
            &arguments,
            request.request_state.as_deref(),
            request.input_responses.take(),
        )?;
        match self
            .dispatcher
            .get_prompt(&request.name, request.arguments, Some(services), &ctx.ct)
            .await
        {
            Ok(output) => Ok(shape::to_mcp_prompt_result(output).into()),
            Err(ServeError::InputRequired(pending)) => match replay {
                Some(replay) => input_required(
                    pending,
                    replay.keys.as_deref(),
                    &replay.digest,
                    &replay.answers,
                )
                .map(Into::into),
                None => Err(McpError::internal_error(
                    "a prompt stopped for input outside a 2026-07-28 request",
                    None,
                )),
            },
            Err(error) => Err(serve_error(error, None)),
        }
    }

    /// `tasks/get` (rmcp has checked that the request declares the tasks
    /// extension): the task's state, and its result once it has one.
    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        match self.tasks.find(&task_owner(&ctx), &request.task_id).await? {
            tasks::Found::Local(entry) => Ok(GetTaskResult::new(entry.detailed()?)),
            tasks::Found::Remote(record) => Ok(GetTaskResult::new(
                self.tasks.remote_detailed(record).await?,
            )),
        }
    }

    /// `tasks/update`: answers to the questions the task's call waits on
    /// (unknown keys ignored).
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        match self.tasks.find(&task_owner(&ctx), &request.task_id).await? {
            tasks::Found::Local(entry) => entry.update(request.input_responses),
            // An ended task takes no answers: nothing to send.
            tasks::Found::Remote(record) if record.ended() => Ok(()),
            tasks::Found::Remote(record) => {
                let bytes: usize = request
                    .input_responses
                    .iter()
                    .map(|(key, value)| key.len() + value.to_string().len())
                    .sum();
                if bytes > tasks::MAX_ANSWER_BYTES {
                    return Err(McpError::invalid_params(
                        format!(
                            "the answers to this task's questions would take more than {} bytes",
                            tasks::MAX_ANSWER_BYTES
                        ),
                        None,
                    ));
                }
                let command = tasks::store::Command::Update {
                    task: request.task_id,
                    responses: request.input_responses.into_iter().collect(),
                };
                self.tasks.send(&record, command).await
            }
        }
    }

    /// `tasks/cancel`: stops the task's call; a task that already ended
    /// stays as it is, and the answer is the same empty acknowledgment.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        match self.tasks.find(&task_owner(&ctx), &request.task_id).await? {
            tasks::Found::Local(entry) => {
                self.tasks.cancel(&entry);
                Ok(())
            }
            // Cancelling an ended task changes nothing, as here.
            tasks::Found::Remote(record) if record.ended() => Ok(()),
            tasks::Found::Remote(record) => {
                let command = tasks::store::Command::Cancel {
                    task: request.task_id,
                };
                self.tasks.send(&record, command).await
            }
        }
    }

    /// `completion/complete`: routed to the component serving the prompt or
    /// template, once the argument is known to exist; a component that
    /// does not serve completions completes nothing.
    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let (target, data) = match request.r#ref {
            Reference::Prompt(prompt) => (
                CompletionTarget::Prompt(prompt.name.clone()),
                serde_json::json!({"ref": {"type": "ref/prompt", "name": bounded(&prompt.name)}}),
            ),
            Reference::Resource(template) => (
                CompletionTarget::ResourceTemplate(template.uri.clone()),
                serde_json::json!({"ref": {"type": "ref/resource", "uri": bounded(&template.uri)}}),
            ),
            _ => {
                return Err(McpError::invalid_params(
                    "unknown completion reference: expected `ref/prompt` or `ref/resource`",
                    None,
                ));
            }
        };
        // What a client sends is bounded before it reaches a component: the
        // value and each context entry at most a URI's length, at most 64
        // context entries.
        let long = |text: &str| text.len() > crate::catalog::MAX_URI_BYTES;
        let context: Vec<(String, String)> = request
            .context
            .and_then(|c| c.arguments)
            .unwrap_or_default()
            .into_iter()
            .collect();
        if long(&request.argument.value)
            || long(&request.argument.name)
            || context.len() > 64
            || context.iter().any(|(k, v)| long(k) || long(v))
        {
            return Err(McpError::invalid_params(
                format!(
                    "the completion request is too large: the argument, its value and each context \
                     entry may be at most {} bytes, with at most 64 context entries",
                    crate::catalog::MAX_URI_BYTES
                ),
                Some(data),
            ));
        }
        let completion = self
            .dispatcher
            .complete(
                CompletionRequest {
                    target,
                    argument: request.argument.name,
                    value: request.argument.value,
                    context,
                },
                &ctx.ct,
            )
            .await
            .map_err(|error| serve_error(error, Some(data)))?;
        Ok(shape::to_mcp_completion(completion))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let catalog = self.dispatcher.registry().snapshot();
        catalog.tools.get(name).map(|tool| {
            to_mcp_tool(
                &tool.spec.descriptor,
                task_support(&self.dispatcher.config(), name, &tool.spec.descriptor),
            )
        })
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

/// Whether calls of tool `name` run as tasks: the operator's `tasks`, else
/// what the component declares.
pub(crate) fn task_support(
    config: &crate::config::Config,
    name: &str,
    descriptor: &crate::catalog::ToolDescriptor,
) -> crate::call::TaskSupport {
    config
        .policy_for(name)
        .tasks
        .unwrap_or(descriptor.execution.task_support)
}

/// Whose tasks a request may see: its caller's identity, or (without one)
/// the anonymous owner, for whom the task id is the capability.
fn task_owner(ctx: &RequestContext<RoleServer>) -> String {
    caller(ctx).map(Caller::key).unwrap_or_default()
}

/// What the request in `ctx` says its client can do (its own declaration on
/// 2026-07-28, the session's on older revisions).
fn declared_needs(ctx: &RequestContext<RoleServer>) -> ClientNeeds {
    ctx.client_capabilities()
        .map(|caps| ClientNeeds {
            sampling: caps.sampling.is_some(),
            elicitation: caps.elicitation.is_some(),
            roots: caps.roots.is_some(),
            tasks: caps.supports_tasks(),
        })
        .unwrap_or_default()
}

/// The answers a 2026-07-28 request brings for a replay, and what binds
/// them to it.
struct Replay {
    /// The operator's state keys, if any (else this process's own).
    keys: Option<Arc<crate::config::StateKeys>>,
    /// Digest of caller, tool (or `prompt:NAME`) and arguments.
    digest: String,
    /// Every answer so far: the signed state's and this retry's.
    answers: std::collections::BTreeMap<String, serde_json::Value>,
}

/// The client services of a request that runs guest code named `what` (a
/// tool, or `prompt:NAME`) with `arguments`: on 2026-07-28, replay with
/// the answers so far (those in the signed `state` plus the `responses`
/// this retry brings), bound to the call by a digest of caller, `what` and
/// arguments; on older revisions, requests to the client (so none of the
/// replay is computed for them).
fn client_services(
    keys: Option<&Arc<crate::config::StateKeys>>,
    ctx: &RequestContext<RoleServer>,
    what: &str,
    arguments: &serde_json::Map<String, serde_json::Value>,
    state: Option<&str>,
    responses: Option<std::collections::BTreeMap<String, serde_json::Value>>,
) -> Result<(Arc<dyn ClientServices>, Option<Replay>), McpError> {
    let capabilities = capabilities(declared_needs(ctx));
    if !is_stateless(ctx) {
        let peer_services = PeerServices {
            peer: ctx.peer.clone(),
            capabilities,
        };
        return Ok((services::shared(peer_services), None));
    }
    let replay = replay_answers(keys, ctx, what, arguments, state, responses)?;
    let services = ReplayServices::new(replay.answers.clone(), capabilities);
    Ok((services::shared(services), Some(replay)))
}

/// The answers a 2026-07-28 request brings for guest code named `what`
/// with `arguments`: those in its signed `state` (checked against a digest
/// of caller, `what` and arguments) plus its `responses`.
fn replay_answers(
    keys: Option<&Arc<crate::config::StateKeys>>,
    ctx: &RequestContext<RoleServer>,
    what: &str,
    arguments: &serde_json::Map<String, serde_json::Value>,
    state: Option<&str>,
    responses: Option<std::collections::BTreeMap<String, serde_json::Value>>,
) -> Result<Replay, McpError> {
    let owner = caller(ctx).map(Caller::key);
    let digest = call_digest(
        owner.as_deref(),
        what,
        &serde_json::Value::Object(arguments.clone()),
    );
    let keys = keys.cloned();
    let mut answers = match state {
        Some(state) => verify_state(keys.as_deref(), state, &digest)
            .map_err(|reason| McpError::invalid_params(reason, None))?,
        None => std::collections::BTreeMap::new(),
    };
    answers.extend(responses.unwrap_or_default());
    Ok(Replay {
        keys,
        digest,
        answers,
    })
}

/// What a client that declared `declared` can be asked.
fn capabilities(declared: ClientNeeds) -> Capabilities {
    Capabilities {
        elicit: declared.elicitation,
        sample: declared.sampling,
        roots: declared.roots,
    }
}

/// How a task's call ended, as the task reports it: the tool's result
/// (its own error result included) as completed; a trap, a limit or a
/// refusal before it ran as failed, with a JSON-RPC error; cancellation
/// as cancelled.
fn task_ending(result: Result<crate::dispatch::CallOutput, DispatchError>) -> tasks::Ending {
    match result {
        Ok(output) if output.input_required.is_some() => tasks::Ending::Failed {
            code: ErrorCode::INTERNAL_ERROR.0,
            message: "the call stopped for input outside its task".into(),
        },
        Ok(output) => match &output.failure {
            Some(crate::call::CallFailure::Cancelled) => tasks::Ending::Cancelled,
            Some(_) => tasks::Ending::Failed {
                code: ErrorCode::INTERNAL_ERROR.0,
                message: match output.content.first() {
                    Some(crate::call::Content::Text(text)) => text.clone(),
                    _ => "the call failed".into(),
                },
            },
            None => tasks::Ending::Completed(to_mcp_result(output)),
        },
        Err(error) => {
            let refusal = match &error {
                DispatchError::MissingClientCapability { missing, .. } => {
                    missing_capability(&error, *missing)
                }
                _ => McpError::invalid_params(error.to_string(), None),
            };
            tasks::Ending::Failed {
                code: refusal.code.0,
                message: refusal.message.to_string(),
            }
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
/// the request did not declare: rmcp's -32021, whose
/// `requiredCapabilities` is a `ClientCapabilities` keyed by what is
/// missing (`{"sampling": {}}`), with our message naming the tool; rmcp
/// answers it with HTTP 400.
fn missing_capability(error: &DispatchError, missing: ClientNeeds) -> McpError {
    let mut required = ClientCapabilities::default();
    required.sampling = missing.sampling.then(Default::default);
    required.elicitation = missing.elicitation.then(Default::default);
    required.roots = missing.roots.then(Default::default);
    if missing.tasks {
        required
            .extensions
            .get_or_insert_with(Default::default)
            .insert(
                rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                Default::default(),
            );
    }
    let mut refusal = McpError::missing_required_client_capability(required);
    refusal.message = error.to_string().into();
    refusal
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
        ServeError::MissingArgument { .. }
        | ServeError::Refused(_)
        | ServeError::UnknownArgument(_) => McpError::invalid_params(error.to_string(), data),
        ServeError::InputRequired(_) => {
            McpError::internal_error("a request stopped for input where none can be asked", data)
        }
        ServeError::Failed(_) => McpError::internal_error(error.to_string(), data),
    }
}
