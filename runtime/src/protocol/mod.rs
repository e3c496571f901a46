//! MCP over rmcp: the only module that knows the wire format.
//!
//! [`McpServer`] implements rmcp's `ServerHandler` by hand over the
//! [`Dispatcher`] (no `#[tool_router]`: the tool set is only known at run
//! time). One server value serves one connection; rmcp decides per
//! connection whether the client speaks an initialize-era revision
//! (2025-06-18, 2025-11-25) or the stateless 2026-07-28 one, and
//! `ctx.protocol_version()` tells each request which.
//!
//! The handler is here; the rooms beside it: `call` (`tools/call`, in its
//! request or as a task), `request` (what a request carries besides its
//! params: revision, caller, declared capabilities, replay answers),
//! `shape` (every mapping of a guest's descriptors and results to the
//! wire, and the table of cases that pins it), `notify` (list changes,
//! resource updates and warnings to clients), `roots` (the client's roots,
//! refreshed one read at a time), `events` (a call's log and progress as
//! notifications) and `tasks`.
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
//!
//! Notification handlers never wait on the client: rmcp spawns a task per
//! notification a client sends, outside every admission cap, so a handler
//! that waited would let a flood of them hold a task each. `initialized`
//! takes effect once per session; `roots/list_changed` marks the roots
//! stale and leaves the asking to `roots`.

#![allow(deprecated)] // rmcp marks logging (SEP-2577) deprecated; older clients still use it.

mod call;
mod direct;
mod events;
mod message;
mod notify;
mod request;
mod roots;
mod session;
mod shape;
mod tasks;

pub use direct::DirectCall;
pub use message::client_message;
pub use notify::{ListKind, Notifier};
pub use session::{CLOSED_DRAIN, STOPPED_DRAIN, SessionCalls};
pub use shape::{to_mcp_result, to_mcp_tool};
pub use tasks::Tasks;

use call::task_support;
use events::from_mcp_level;
use notify::{MAX_SUBSCRIBED_URI, MAX_SUBSCRIPTIONS, Subscribed, bounded};
use request::{caller, client_services, is_stateless, task_owner};
use shape::{input_required, to_mcp_prompt, to_mcp_resource, to_mcp_template};

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, CustomRequest, CustomResult, ErrorCode, GetPromptRequestParams,
    GetPromptResponse, GetTaskParams, GetTaskResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, Reference,
    ServerCapabilities, ServerInfo, SetLevelRequestParams, SubscribeRequestMethod,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestMethod,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};

use crate::auth;
use crate::call::{CompletionRequest, CompletionTarget, LogLevel};
use crate::dispatch::{Dispatcher, ServeError};

/// How long a 2026-07-28 client may cache `tools/list`. Short, because hot
/// reload can change the set at any moment and change notifications only
/// reach clients that subscribed.
pub const LIST_TTL_MS: u64 = 5_000;

/// How long to wait for one notification to be written. A client that
/// stopped reading must not hold a finished call's response forever.
pub(crate) const NOTIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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
    /// The client's roots: a call waits while they are being read, so it
    /// never runs on roots the client said changed (`roots`).
    client_roots: Arc<roots::ClientRoots>,
    /// Whether `notifications/initialized` came (its effects happen once).
    initialized: Arc<AtomicBool>,
    /// The transport's name, for the journal.
    transport: &'static str,
    /// The resources this session subscribed to (`resources/subscribe`,
    /// initialize-era sessions only).
    subscribed: Subscribed,
    /// The server's tasks, across connections.
    tasks: Arc<Tasks>,
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
            client_roots: Arc::default(),
            initialized: Arc::default(),
            subscribed: Arc::default(),
        }
    }

    /// The client's roots, asking it with `roots/list` when not known yet;
    /// `None` when the client does not declare the roots capability (or
    /// speaks 2026-07-28, where roots are deprecated): the grants apply as
    /// configured. If the client declares roots but cannot say what they
    /// are, the answer is no roots at all: narrowing fails closed.
    async fn client_roots(&self, peer: &Peer<RoleServer>, stateless: bool) -> Option<Vec<PathBuf>> {
        if stateless || !declares_roots(peer) {
            return None;
        }
        Some(self.client_roots.current(peer).await)
    }

    /// The client of `peer` said its roots changed: calls from now on wait
    /// for roots read after this.
    pub(super) fn roots_changed(&self, peer: &Peer<RoleServer>) {
        if declares_roots(peer) {
            self.client_roots.changed(peer);
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
        // Boxed, as `get_prompt` and `complete` are: each runs guest code,
        // and its future (7-8 KiB) inline would size the future of every
        // request rmcp or `SessionCalls` handles, `tools/call` included,
        // which is copied whole as it is spawned (docs/benchmarks.md, round
        // nine).
        let contents = Box::pin(self.dispatcher.read_resource(&request.uri, &ctx.ct))
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
        // A prompt may ask the user as a call may; its questions are bound
        // to the prompt and its arguments as a call's are.
        let arguments = crate::call::Arguments::new(request.arguments.take());
        let (services, replay) = client_services(
            self.dispatcher.config().state_keys.as_ref(),
            &ctx,
            &format!("prompt:{}", request.name),
            &arguments,
            request.request_state.as_deref(),
            request.input_responses.take(),
        )?;
        // Boxed, as in `read_resource`.
        match Box::pin(self.dispatcher.get_prompt(
            &request.name,
            &arguments,
            Some(services),
            &ctx.ct,
        ))
        .await
        {
            Ok(output) => Ok(shape::to_mcp_prompt_result(output).into()),
            Err(ServeError::InputRequired(pending)) => match replay {
                Some(replay) => input_required(
                    pending,
                    replay.keys.as_deref(),
                    replay.digest(),
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
        // Boxed, as in `read_resource`.
        let completion = Box::pin(self.dispatcher.complete(
            CompletionRequest {
                target,
                argument: request.argument.name,
                value: request.argument.value,
                context,
            },
            &ctx.ct,
        ))
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
        // Once per session, whatever the client repeats.
        if self.initialized.swap(true, Ordering::AcqRel) {
            return;
        }
        self.notifier.add_peer(
            ctx.peer.clone(),
            Arc::clone(&self.log_level),
            Arc::clone(&self.subscribed),
        );
        // Learn the roots early, so the first call does not wait for them
        // (without waiting here).
        if declares_roots(&ctx.peer) {
            self.client_roots.prefetch(&ctx.peer);
        }
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
        self.roots_changed(&ctx.peer);
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

/// Whether the session's client declared the roots capability.
fn declares_roots(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|info| info.capabilities.roots.is_some())
}

fn method_not_found(method: &str) -> McpError {
    McpError::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("method not found: `{method}`"),
        None,
    )
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
