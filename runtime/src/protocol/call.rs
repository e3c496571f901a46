//! `tools/call`: a call run in its request, or as a task; the answer to
//! each, and how a task's call ends.

use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, CallToolResponse, ClientCapabilities, ErrorCode};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use tokio_util::sync::CancellationToken;

use super::events::EventForwarder;
use super::request::{
    Replay, caller, capabilities, client_id, client_services, declared_needs, is_stateless,
    replay_answers, task_owner,
};
use super::shape::input_required;
use super::{McpServer, tasks, to_mcp_result};
use crate::auth;
use crate::call::{Arguments, ClientServices, GuestEvent, TaskStart, TaskSupport};
use crate::config::ClientNeeds;
use crate::dispatch::{CallContext, DispatchError, Lane};
use crate::services::ReplayServices;

impl McpServer {
    /// `tools/call`, on the lane [`Lanes::handle`](crate::dispatch::Lanes::handle) gave it.
    pub(super) async fn handle_call(
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
        let arguments = Arguments::new(request.arguments.take());
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
                arguments,
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
    pub(super) fn task_start(
        &self,
        name: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Option<TaskStart> {
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
        let arguments = Arguments::new(request.arguments.take());
        let replay = replay_answers(
            self.dispatcher.config().state_keys.as_ref(),
            caller(&ctx),
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
                        arguments,
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
pub(super) fn respond(
    result: Result<crate::dispatch::CallOutput, DispatchError>,
    replay: Option<&Replay>,
) -> Result<CallToolResponse, McpError> {
    match result {
        Ok(mut output) => match (output.input_required.take(), replay) {
            (Some(pending), Some(replay)) => input_required(
                pending,
                replay.keys.as_deref(),
                replay.digest(),
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

/// Whether calls of tool `name` run as tasks: the operator's `tasks`, else
/// what the component declares.
pub(super) fn task_support(
    config: &crate::config::Config,
    name: &str,
    descriptor: &crate::catalog::ToolDescriptor,
) -> crate::call::TaskSupport {
    config
        .policy_for(name)
        .tasks
        .unwrap_or(descriptor.execution.task_support)
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
