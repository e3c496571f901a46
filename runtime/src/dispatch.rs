//! Dispatch: from "call tool X with these arguments" to a result.
//!
//! For each call: find the tool in the current catalog snapshot; check the
//! arguments against its input schema (a violation is an error result that
//! lists every problem, and the guest never runs); wait for a server-wide
//! and a per-tool permit (calls beyond the limits queue, they do not fail);
//! run it in the sandbox; check structured output against the output
//! schema; turn every limit hit into an error result that names the limit;
//! and write one audit record.
//!
//! This module knows nothing of MCP's wire format; `protocol` converts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::call::{
    CallFailure, CapturedOutput, ClientServices, Content, ElicitAnswer, EventSink, PendingInput,
    PromptOutput, ResourceContent, ServiceError, ToolResult,
};
use crate::catalog::{LoadedComponent, LoadedTool, Registry, ToolSpec};
use crate::config::{Config, Limits, Policy};
use crate::grants;
use crate::grants::network::NetRecord;
use crate::journal::{ClientId, Entry, Journal};
use crate::json;
use crate::redact::Scrub;
use crate::sandbox::{CallSpec, Sandbox};
use crate::schema::{BudgetExceeded, budget_for};

/// How long [`Dispatcher::shutdown`] waits for cancelled calls to unwind
/// (a cancelled guest stops at its next epoch tick, 10 ms).
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs calls against the current catalog.
pub struct Dispatcher {
    sandbox: Arc<Sandbox>,
    registry: Arc<Registry>,
    /// Swapped whole on a config reload; a call reads it once, at its start.
    current: std::sync::RwLock<Current>,
    permits: Arc<Semaphore>,
    /// Fired by [`Dispatcher::shutdown`]: calls in flight end, new ones are
    /// refused.
    shutdown: CancellationToken,
    /// Every call in flight holds a token of this, so shutdown can wait for
    /// them to be recorded.
    calls: TaskTracker,
}

/// The configuration and the journal it opened, swapped together.
#[derive(Clone)]
struct Current {
    config: Arc<Config>,
    /// Reopened only when `config.journal` changes.
    journal: Option<Arc<Journal>>,
}

/// Who is calling: where guest events go, the client's cancellation, and
/// the client's roots.
pub struct CallContext<'a> {
    /// Where the guest's log and progress go.
    pub events: Option<EventSink>,
    /// Fires when the client cancels the call.
    pub cancel: &'a CancellationToken,
    /// The client's roots, if it declared the capability; they narrow the
    /// tool's grants.
    pub client_roots: Option<&'a [PathBuf]>,
    /// Elicitation and sampling through the client, if there is one.
    pub services: Option<Arc<dyn ClientServices>>,
    /// Who is calling, for the journal; asked only when there is one.
    pub client: &'a (dyn Fn() -> ClientId + Sync),
}

/// A call that could not even be attempted: a protocol-level error.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// No tool by that name.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
}

/// Why a resource read or a prompt get gave no result. The protocol layer
/// maps `UnknownResource`, `UnknownPrompt`, `MissingArgument` and `Refused`
/// to invalid params (-32602), `Failed` to an internal error (-32603).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// No listed resource or template matches the URI.
    #[error("unknown resource `{0}`")]
    UnknownResource(String),
    /// No prompt by that name.
    #[error("unknown prompt `{0}`")]
    UnknownPrompt(String),
    /// A required prompt argument is missing.
    #[error("prompt `{prompt}` needs argument `{argument}`")]
    MissingArgument {
        /// The prompt.
        prompt: String,
        /// The argument.
        argument: String,
    },
    /// The component refused (its own error message).
    #[error("{0}")]
    Refused(String),
    /// The component failed (trap, limit, cancellation).
    #[error("{0}")]
    Failed(String),
}

/// What a finished call returns to the protocol layer.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    /// Content items.
    pub content: Vec<Content>,
    /// Structured output, parsed and (when a schema is declared) checked.
    pub structured: Option<Value>,
    /// Whether it is an error result.
    pub is_error: bool,
    /// Set when the call stopped to ask the client first (2026-07-28): the
    /// protocol layer turns it into an input-required result.
    pub input_required: Option<PendingInput>,
}

impl CallOutput {
    /// An error result with one text item.
    pub fn error(message: impl Into<String>) -> Self {
        CallOutput {
            content: vec![Content::Text(message.into())],
            structured: None,
            is_error: true,
            input_required: None,
        }
    }

    /// A call stopped to ask the client `pending` first.
    pub fn input_required(pending: PendingInput) -> Self {
        CallOutput {
            content: Vec::new(),
            structured: None,
            is_error: false,
            input_required: Some(pending),
        }
    }
}

impl Dispatcher {
    /// A dispatcher over `registry`, running calls in `sandbox` with the
    /// limits from `config`.
    pub fn new(sandbox: Arc<Sandbox>, registry: Arc<Registry>, config: Arc<Config>) -> Self {
        let permits = Arc::new(Semaphore::new(config.server.max_concurrent_calls as usize));
        let journal = config.journal.clone().map(|c| Arc::new(Journal::open(c)));
        Dispatcher {
            sandbox,
            registry,
            current: std::sync::RwLock::new(Current { config, journal }),
            permits,
            shutdown: CancellationToken::new(),
            calls: TaskTracker::new(),
        }
    }

    /// Cancel the calls in flight and refuse new ones, at once (the first
    /// step of [`Dispatcher::shutdown`], for a transport that must stop
    /// before it can wait).
    pub fn stop_calls(&self) {
        self.shutdown.cancel();
    }

    /// Stop: cancel the calls in flight and refuse new ones, wait (at most
    /// [`SHUTDOWN_WAIT`]) until each has been recorded, then wait until the
    /// journal has written every line. Called by every transport when it
    /// stops serving (stdin closed, SIGTERM, SIGINT) and by the CLI, so no
    /// journal line is lost at exit.
    pub async fn shutdown(&self) {
        self.stop_calls();
        self.calls.close();
        if tokio::time::timeout(SHUTDOWN_WAIT, self.calls.wait())
            .await
            .is_err()
        {
            tracing::warn!("calls still running at shutdown were abandoned");
        }
        if let Some(journal) = self.current().journal {
            let _ = tokio::task::spawn_blocking(move || journal.flush()).await;
        }
    }

    fn current(&self) -> Current {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The configuration calls start with now.
    pub fn config(&self) -> Arc<Config> {
        self.current().config
    }

    /// Use `config` for calls that start from now on; the journal is
    /// reopened if its settings changed. (The server-wide concurrency limit
    /// sizes the instance pool and needs a restart.)
    pub fn set_config(&self, config: Arc<Config>) {
        let mut current = match self.current.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if current.config.journal != config.journal {
            current.journal = config.journal.clone().map(|c| Arc::new(Journal::open(c)));
        }
        current.config = config;
    }

    /// The sandbox calls run in.
    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    /// The registry calls are served from.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Call tool `name` with `arguments` (`None` is `{}`).
    ///
    /// # Errors
    ///
    /// Only for an unknown tool. Everything that goes wrong once the tool is
    /// known (bad arguments, traps, limits) is an error *result*.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        context: CallContext<'_>,
    ) -> Result<CallOutput, DispatchError> {
        // Held until the call is over, so `shutdown` can wait for it.
        let _in_flight = self.calls.token();
        let current = self.current();
        let arguments = Value::Object(arguments.unwrap_or_default());
        // A shutdown ends the call where it is: dropping the phases discards
        // the store, and their `Recorder` journals the call as cancelled.
        tokio::select! {
            // A shutdown wins over the client's own cancellation, which a
            // shutdown also fires.
            biased;
            () = self.shutdown.cancelled() => Ok(CallOutput::error(format!(
                "call of tool `{name}` was cancelled: the server is shutting down"
            ))),
            output = self.run_phases(name, &arguments, &current, context) => output,
        }
    }

    /// The phases of a call: resolve, check the arguments, confirm, acquire
    /// permits, run, settle. Every return goes through `record` once.
    async fn run_phases(
        &self,
        name: &str,
        arguments: &Value,
        current: &Current,
        context: CallContext<'_>,
    ) -> Result<CallOutput, DispatchError> {
        let CallContext {
            events,
            cancel,
            client_roots,
            services,
            client,
        } = context;
        let policy = current.config.policy_for(name);
        let mut record = Recorder {
            name,
            arguments,
            policy,
            secrets: policy.secrets().collect(),
            journal: current.journal.as_deref(),
            client,
            arrived: Instant::now(),
            component: None,
            shutdown: &self.shutdown,
            done: false,
        };
        if self.shutdown.is_cancelled() {
            record.finish(Outcome::Refused("the server is shutting down"), None);
            return Ok(CallOutput::error(format!(
                "tool `{name}` was not run: the server is shutting down"
            )));
        }

        // Resolve.
        let Some(tool) = self.registry.snapshot().tools.get(name).cloned() else {
            record.finish(Outcome::Refused("unknown tool"), None);
            return Err(DispatchError::UnknownTool(name.to_owned()));
        };
        record.component = Some(Arc::clone(&tool.component));

        // Check the arguments.
        let arguments_text = arguments.to_string();
        match validate(&tool.spec, Which::Input, arguments, arguments_text.len()).await {
            Ok(None) => {}
            Ok(Some(problems)) => {
                record.finish(
                    Outcome::Refused("arguments do not match the input schema"),
                    None,
                );
                return Ok(CallOutput::error(format!(
                    "arguments do not match the input schema of tool `{name}`:\n{problems}"
                )));
            }
            Err(exceeded) => {
                record.finish(
                    Outcome::Refused("arguments could not be checked within the budget"),
                    None,
                );
                return Ok(CallOutput::error(format!(
                    "the arguments of tool `{name}` could not be checked: {exceeded}; the tool was not run"
                )));
            }
        }

        // Confirm: before anything runs, and before taking a permit (a
        // person may take minutes to answer).
        if needs_confirmation(policy, &tool) {
            let destructive = tool.spec.descriptor.annotations.destructive;
            match confirm(name, arguments, destructive, services.as_deref()).await {
                Confirmation::Confirmed => {}
                Confirmation::Ask(pending) => {
                    record.finish(
                        Outcome::InputRequired("waiting for the user's confirmation"),
                        None,
                    );
                    return Ok(CallOutput::input_required(pending));
                }
                Confirmation::Refused(message) => {
                    record.finish(Outcome::Refused(&message), None);
                    return Ok(CallOutput::error(message));
                }
            }
        }

        // Acquire: the server-wide permit, then the tool's; released when
        // these guards drop, at the end of the call.
        let Some(_permits) = acquire_or_cancel([&self.permits, &tool.permits], cancel).await else {
            record.finish(Outcome::Cancelled("cancelled while waiting to run"), None);
            return Ok(CallOutput::error(format!(
                "call of tool `{name}` was cancelled"
            )));
        };

        // Run. (The debug line says a call got its permits and starts: what
        // a test or an operator waits for to know a call is in flight.)
        tracing::debug!(tool = %name, "call running");
        let grants = policy.grants.prepare(grants::CallContext {
            tool: name,
            client_roots,
            client: services.as_ref(),
        });
        let report = self
            .sandbox
            .call(
                &tool.component.prepared,
                CallSpec {
                    name,
                    arguments: &arguments_text,
                    limits: &policy.limits,
                    grants,
                    events,
                    cancel,
                },
            )
            .await;
        let scrub = Scrub::new(record.secrets.iter().copied());
        log_guest_output(name, "stdout", &report.stdout, &scrub);
        log_guest_output(name, "stderr", &report.stderr, &scrub);

        // Settle.
        let result_bytes = report.outcome.as_ref().map_or(0, |r| r.size);
        let (output, cancelled) = match report.outcome {
            Ok(result) => (check_output(&tool, result, &policy.limits).await, false),
            Err(CallFailure::InputRequired(pending)) => {
                (CallOutput::input_required(pending), false)
            }
            Err(failure) => (
                CallOutput::error(format!("tool `{name}` {failure}")),
                matches!(failure, CallFailure::Cancelled),
            ),
        };
        let message = match output.content.first() {
            Some(Content::Text(text)) if output.is_error => first_line(text),
            _ => "",
        };
        let outcome = if output.input_required.is_some() {
            Outcome::InputRequired("")
        } else if cancelled {
            Outcome::Cancelled(message)
        } else if output.is_error {
            Outcome::Error(message)
        } else {
            Outcome::Ok
        };
        let facts = RunFacts {
            fuel: report.fuel_used,
            peak_memory: report.peak_memory_bytes,
            bytes_in: arguments_text.len() as u64,
            bytes_out: result_bytes,
            net: report.net,
        };
        record.finish(outcome, Some(&facts));
        Ok(output)
    }
}

/// Wait for each permit in turn; `None` if `cancel` fires first. The
/// permits are released when the returned guards drop.
async fn acquire_or_cancel<const N: usize>(
    semaphores: [&Arc<Semaphore>; N],
    cancel: &CancellationToken,
) -> Option<Vec<OwnedSemaphorePermit>> {
    let mut permits = Vec::with_capacity(N);
    for semaphore in semaphores {
        let permit = tokio::select! {
            permit = Arc::clone(semaphore).acquire_owned() => permit.ok()?,
            () = cancel.cancelled() => return None,
        };
        permits.push(permit);
    }
    Some(permits)
}

/// How a call ended; the `&str` is the message the journal keeps.
#[derive(Debug, Clone, Copy)]
enum Outcome<'a> {
    Ok,
    Error(&'a str),
    Refused(&'a str),
    Cancelled(&'a str),
    InputRequired(&'a str),
}

impl<'a> Outcome<'a> {
    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error(_) => "error",
            Outcome::Refused(_) => "refused",
            Outcome::Cancelled(_) => "cancelled",
            Outcome::InputRequired(_) => "input_required",
        }
    }

    fn message(self) -> Option<&'a str> {
        match self {
            Outcome::Ok => None,
            Outcome::Error(m)
            | Outcome::Refused(m)
            | Outcome::Cancelled(m)
            | Outcome::InputRequired(m) => (!m.is_empty()).then_some(m),
        }
    }
}

/// Writes a call's one audit record: a `toolcage::audit` log line and,
/// when configured, a journal line. A call that is dropped before it
/// finishes (its client went away, the server shut down) is still
/// recorded, as cancelled, when the recorder drops.
struct Recorder<'a> {
    name: &'a str,
    arguments: &'a Value,
    policy: &'a Policy,
    secrets: Vec<&'a str>,
    journal: Option<&'a Journal>,
    client: &'a (dyn Fn() -> ClientId + Sync),
    arrived: Instant,
    /// The component that serves the call, once resolved.
    component: Option<Arc<LoadedComponent>>,
    /// The dispatcher's shutdown, to say why a dropped call ended.
    shutdown: &'a CancellationToken,
    done: bool,
}

impl Recorder<'_> {
    fn finish(&mut self, outcome: Outcome<'_>, run: Option<&RunFacts>) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let digest = self.component.as_ref().map_or("", |c| c.digest.as_str());
        let duration = self.arrived.elapsed();
        let scrub = Scrub::new(self.secrets.iter().copied());
        // Debug: the journal is the record operators keep; a log line per
        // call at info would cost every call a write to stderr.
        tracing::debug!(
            target: "toolcage::audit",
            tool = %self.name,
            digest = %digest,
            duration_us = duration.as_micros() as u64,
            fuel_used = run.map_or(0, |r| r.fuel),
            peak_memory_bytes = run.map_or(0, |r| r.peak_memory),
            outcome = %outcome.label(),
            message = %scrub.text(outcome.message().unwrap_or(""), 1024),
            "call"
        );
        let Some(journal) = self.journal else {
            return;
        };
        let empty = NetRecord::default();
        journal.record(&Entry {
            tool: self.name,
            digest,
            client: &(self.client)(),
            arguments: self.arguments,
            arguments_mode: self
                .policy
                .journal_arguments
                .unwrap_or_else(|| journal.config().arguments),
            secrets: &self.secrets,
            outcome: outcome.label(),
            message: outcome.message(),
            duration,
            fuel: run.map_or(0, |r| r.fuel),
            peak_memory: run.map_or(0, |r| r.peak_memory),
            bytes_in: run.map_or(0, |r| r.bytes_in),
            bytes_out: run.map_or(0, |r| r.bytes_out),
            net: run.map_or(&empty, |r| &r.net),
        });
    }
}

impl Drop for Recorder<'_> {
    fn drop(&mut self) {
        let why = if self.shutdown.is_cancelled() {
            "the server shut down before the call finished"
        } else {
            "abandoned before it finished (the client went away)"
        };
        self.finish(Outcome::Cancelled(why), None);
    }
}

/// What a finished run adds to its journal line.
struct RunFacts {
    fuel: u64,
    peak_memory: u64,
    bytes_in: u64,
    bytes_out: u64,
    net: NetRecord,
}

/// Whether a call of `tool` must be confirmed by the user first: the
/// operator's `confirm` if set, else the tool's own annotations
/// (destructive and not read-only).
fn needs_confirmation(policy: &Policy, tool: &LoadedTool) -> bool {
    let annotations = &tool.spec.descriptor.annotations;
    policy
        .confirm
        .unwrap_or(annotations.destructive && !annotations.read_only)
}

enum Confirmation {
    Confirmed,
    /// 2026-07-28: the question goes back to the client first.
    Ask(PendingInput),
    /// Declined, dismissed, or impossible; the message says which.
    Refused(String),
}

/// The elicitation key of the host's own confirmation question (a guest's
/// questions are `elicit-N`, so they never collide).
pub const CONFIRM_KEY: &str = "toolcage-confirm";

/// Ask the user to confirm a call of `name` with `arguments`.
async fn confirm(
    name: &str,
    arguments: &Value,
    destructive: bool,
    services: Option<&dyn ClientServices>,
) -> Confirmation {
    let why = if destructive {
        "It is marked as destructive: it may change or delete data."
    } else {
        "The operator asks for confirmation of every call of this tool."
    };
    let off = format!(
        "(the operator can turn confirmation off for this tool with `confirm = false` under `[tools.{name}]` in the config)"
    );
    let Some(services) = services else {
        return Confirmation::Refused(format!(
            "tool `{name}` needs the user's confirmation before it runs, and there is no client to ask; the call was not run {off}"
        ));
    };
    let shown = serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string());
    let message = format!("Allow the tool `{name}` to run? {why} Arguments:\n{shown}");
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "confirm": {
                "type": "boolean",
                "title": format!("Run {name}"),
                "description": "Leave checked and accept to run the tool; decline to refuse it.",
                "default": true
            }
        },
        "required": ["confirm"]
    });
    match services.confirm(message, schema).await {
        Ok(ElicitAnswer::Accept(content))
            if content.get("confirm").and_then(Value::as_bool) != Some(false) =>
        {
            Confirmation::Confirmed
        }
        Ok(ElicitAnswer::Accept(_) | ElicitAnswer::Decline) => Confirmation::Refused(format!(
            "the user declined to run tool `{name}`; the call was not run. Do not retry it unless the user asks for it."
        )),
        Ok(ElicitAnswer::Cancel) => Confirmation::Refused(format!(
            "the user dismissed the confirmation for tool `{name}`; the call was not run."
        )),
        Err(ServiceError::InputRequired(pending)) => Confirmation::Ask(pending),
        Err(ServiceError::Refused(reason)) => Confirmation::Refused(format!(
            "tool `{name}` needs the user's confirmation before it runs, and it could not be asked: {reason}. The call was not run {off}"
        )),
    }
}

impl Dispatcher {
    /// Read resource `uri` from the component that lists it (or whose
    /// template it matches). Runs in a fresh instance under the operator's
    /// default limits (`[defaults]`), with no roots and no client services,
    /// after a server-wide permit.
    ///
    /// # Errors
    ///
    /// See [`ServeError`].
    pub async fn read_resource(
        &self,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<ResourceContent>, ServeError> {
        if uri.len() > crate::catalog::MAX_URI_BYTES {
            return Err(ServeError::Refused(format!(
                "the resource URI is {} bytes, over the limit of {}",
                uri.len(),
                crate::catalog::MAX_URI_BYTES
            )));
        }
        let Some(component) = self.registry.snapshot().resource_component(uri) else {
            return Err(ServeError::UnknownResource(uri.to_owned()));
        };
        let _in_flight = self.calls.token();
        let limits = self.config().defaults.limits;
        let Some(_permit) = acquire_or_cancel([&self.permits], cancel).await else {
            return Err(ServeError::Failed(format!("read of `{uri}` was cancelled")));
        };
        let started = Instant::now();
        let outcome = self
            .sandbox
            .read_resource(&component.prepared, uri, &limits, cancel)
            .await;
        let result = match outcome {
            Ok(Ok(contents)) if contents.is_empty() => Err(ServeError::Failed(format!(
                "resource `{uri}`: the component returned no contents"
            ))),
            Ok(Ok(contents)) => Ok(contents),
            Ok(Err(message)) => Err(ServeError::Refused(format!("resource `{uri}`: {message}"))),
            Err(failure) => Err(ServeError::Failed(format!("resource `{uri}` {failure}"))),
        };
        audit("resource", uri, &component.digest, started, &result);
        result
    }

    /// Get prompt `name` with `arguments` (string values). Runs like
    /// [`Dispatcher::read_resource`].
    ///
    /// # Errors
    ///
    /// See [`ServeError`].
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        cancel: &CancellationToken,
    ) -> Result<PromptOutput, ServeError> {
        let served = {
            let catalog = self.registry.snapshot();
            catalog
                .prompts
                .get(name)
                .map(|p| (Arc::clone(&p.descriptor), Arc::clone(&p.component)))
        };
        let Some((descriptor, component)) = served else {
            return Err(ServeError::UnknownPrompt(name.to_owned()));
        };
        let arguments = arguments.unwrap_or_default();
        if let Some(missing) = descriptor
            .arguments
            .iter()
            .find(|a| a.required && !arguments.contains_key(&a.name))
        {
            return Err(ServeError::MissingArgument {
                prompt: name.to_owned(),
                argument: missing.name.clone(),
            });
        }
        let _in_flight = self.calls.token();
        let limits = self.config().defaults.limits;
        let Some(_permit) = acquire_or_cancel([&self.permits], cancel).await else {
            return Err(ServeError::Failed(format!("prompt `{name}` was cancelled")));
        };
        let started = Instant::now();
        let arguments = Value::Object(arguments).to_string();
        let outcome = self
            .sandbox
            .get_prompt(&component.prepared, name, &arguments, &limits, cancel)
            .await;
        let result = match outcome {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(message)) => Err(ServeError::Refused(format!("prompt `{name}`: {message}"))),
            Err(failure) => Err(ServeError::Failed(format!("prompt `{name}` {failure}"))),
        };
        audit("prompt", name, &component.digest, started, &result);
        result
    }
}

/// One audit record for a resource read or prompt get.
fn audit<T>(kind: &str, key: &str, digest: &str, started: Instant, result: &Result<T, ServeError>) {
    let outcome = match result {
        Ok(_) => "ok".to_owned(),
        Err(error) => format!("error: {}", first_line(&error.to_string())),
    };
    tracing::debug!(
        target: "toolcage::audit",
        kind,
        key,
        digest,
        duration_us = started.elapsed().as_micros() as u64,
        %outcome,
        "{kind}"
    );
}

/// How much host memory a result's parsed structured output may take, as a
/// multiple of the result-size limit (the text is already within that
/// limit; parsed, `[0,0,…]` takes sixteen times its text).
const PARSED_OUTPUT_FACTOR: u64 = 4;

/// Instances up to this size (JSON text, in bytes) are parsed and checked
/// on the runtime thread; larger ones on the blocking pool, so a runtime
/// thread never spends long on a client's or a guest's data (a check is
/// bounded by its step budget, which grows with the instance).
const INLINE_CHECK_BYTES: usize = 64 * 1024;

/// Which of a tool's schemas.
#[derive(Debug, Clone, Copy)]
enum Which {
    Input,
    Output,
}

/// Check `value` (`bytes` of JSON text) against the tool's `which` schema,
/// under the step budget for its size.
async fn validate(
    spec: &Arc<ToolSpec>,
    which: Which,
    value: &Value,
    bytes: usize,
) -> Result<Option<String>, BudgetExceeded> {
    let check = move |spec: &ToolSpec, value: &Value| match which {
        Which::Input => spec.input_validator.problems(value, budget_for(bytes)),
        Which::Output => spec
            .output_validator
            .as_ref()
            .map_or(Ok(None), |schema| schema.problems(value, budget_for(bytes))),
    };
    if bytes <= INLINE_CHECK_BYTES {
        return check(spec, value);
    }
    let (spec, value) = (Arc::clone(spec), value.clone());
    tokio::task::spawn_blocking(move || check(&spec, &value))
        .await
        // The check does not panic (running out of steps is an `Err`);
        // a panic would be a bug, reported as a budget failure.
        .unwrap_or(Err(BudgetExceeded {
            steps: budget_for(bytes),
        }))
}

/// Parse and check a guest's result against the tool's contract.
async fn check_output(tool: &LoadedTool, result: ToolResult, limits: &Limits) -> CallOutput {
    let name = &tool.spec.descriptor.name;
    let budget = limits.max_result_bytes.saturating_mul(PARSED_OUTPUT_FACTOR);
    let budget = usize::try_from(budget).unwrap_or(usize::MAX);
    let (structured, bytes) = match result.structured {
        None => (None, 0),
        Some(text) => {
            let bytes = text.len();
            let parsed = if bytes <= INLINE_CHECK_BYTES {
                json::parse(&text, budget)
            } else {
                tokio::task::spawn_blocking(move || json::parse(&text, budget))
                    .await
                    .unwrap_or(Err(json::ParseError::TooLarge { budget }))
            };
            match parsed {
                Ok(value @ Value::Object(_)) => (Some(value), bytes),
                Ok(_) => {
                    return CallOutput::error(format!(
                        "tool `{name}` returned structured output that is not a JSON object"
                    ));
                }
                Err(error @ json::ParseError::TooLarge { .. }) => {
                    return CallOutput::error(format!(
                        "tool `{name}` returned structured output too large to check: {error} \
                         ({PARSED_OUTPUT_FACTOR}× the result size limit of {} bytes)",
                        limits.max_result_bytes
                    ));
                }
                Err(json::ParseError::Syntax(error)) => {
                    return CallOutput::error(format!(
                        "tool `{name}` returned structured output that is not valid JSON: {error}"
                    ));
                }
            }
        }
    };
    if !result.is_error && tool.spec.output_validator.is_some() {
        let Some(value) = &structured else {
            return CallOutput::error(format!(
                "tool `{name}` declares an output schema but returned no structured output"
            ));
        };
        match validate(&tool.spec, Which::Output, value, bytes).await {
            Ok(None) => {}
            Ok(Some(problems)) => {
                return CallOutput::error(format!(
                    "tool `{name}` returned structured output that does not match its output schema:\n{problems}"
                ));
            }
            Err(exceeded) => {
                return CallOutput::error(format!(
                    "tool `{name}` returned structured output that could not be checked against its output schema: {exceeded}"
                ));
            }
        }
    }
    CallOutput {
        content: result.content,
        structured,
        is_error: result.is_error,
        input_required: None,
    }
}

fn log_guest_output(tool: &str, stream: &str, output: &CapturedOutput, scrub: &Scrub<'_>) {
    if output.bytes.is_empty() {
        return;
    }
    // A tool may print what it was given; its secrets stay out of the log.
    // (The capture is already bounded, to `sandbox::CAPTURE_BYTES`.)
    let text = scrub.text(
        String::from_utf8_lossy(&output.bytes).trim_end(),
        usize::MAX,
    );
    tracing::info!(
        tool = %tool,
        stream,
        dropped_bytes = output.dropped,
        output = %text,
        "guest output"
    );
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}
