//! Dispatch: from "call tool X with these arguments" to a result.
//!
//! A call goes through phases, each a function of this module, in order:
//! *admit* (not while shutting down), *resolve* (the tool in the current
//! catalog snapshot), *check* the arguments against the input schema (a
//! violation is an error result that lists every problem, and the guest
//! never runs), *confirm* with the user when the policy or the tool's
//! annotations ask for it, *acquire* a server-wide and a per-tool permit
//! (calls beyond the limits queue, they do not fail), *run* in the
//! sandbox, and *settle*: check structured output against the output
//! schema and turn every limit hit into an error result that names the
//! limit. A phase that ends the call early returns a [`Stop`]; either
//! way, one [`Recorder`](record::Recorder) writes the call's one audit
//! record, even for a call dropped half-way.
//!
//! Rooms: `check` (the schema checks on either side of a run), `confirm`
//! (asking the user), `record` (outcome, audit line, journal entry) and
//! `serve` (resource reads and prompt gets, which are not tool calls).
//! This module knows nothing of MCP's wire format; `protocol` converts.

mod check;
mod confirm;
mod lanes;
mod record;
mod serve;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::check::{check_output, validate_input};
pub use self::confirm::CONFIRM_KEY;
use self::confirm::{Confirmation, confirm, needs_confirmation};
pub use self::lanes::{Lane, Lanes};
use self::record::{Outcome, Recorder, Refusal, RunFacts, first_line, log_guest_output};
use crate::auth::{self, Access, Caller};
use crate::call::{
    Arguments, CallFailure, CallReport, ClientServices, Content, EventSink, PendingInput,
};
use crate::catalog::{FileStatus, LoadedTool, Registry};
use crate::config::{ClientNeeds, Config, Limits, Policy};
use crate::grants;
use crate::journal::{ClientId, Journal};
use crate::sandbox::{CallSpec, Checked, Sandbox};

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
    /// Which thread runs a call's guest code.
    lanes: Lanes,
    /// What calls did, for `/metrics`.
    metrics: Arc<crate::metrics::Metrics>,
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
    /// The authenticated caller, over HTTP with `[http.oauth]`: what the
    /// `[[callers]]` policy is matched against. `None`: no identity (stdio,
    /// the static token), and no policy applies.
    pub caller: Option<&'a Caller>,
    /// Where the call's handler runs (`Lanes::handle`); `Lane::Pooled`
    /// where there are no lanes.
    pub lane: Lane,
    /// The client capabilities the request declared, where a tool that
    /// needs more (`requires_client`) is refused before anything runs:
    /// 2026-07-28 requests carry them. `None`: not checked (older
    /// revisions, and the CLI: the services say what is missing when the
    /// tool asks).
    pub declared: Option<ClientNeeds>,
    /// Set when the call runs as an MCP task (or may become one): it runs
    /// under the tool's `task_deadline_ms`, and its journal line names the
    /// task's id once the slot holds one.
    pub task: Option<Arc<std::sync::OnceLock<String>>>,
}

/// A call that could not even be attempted: a protocol-level error.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// No tool by that name; `failed` are the files of the tools folder
    /// that failed to load (any of which might have provided it), each as
    /// `file: why`.
    #[error("unknown tool `{name}`{}", failed_hint(.failed))]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// Files that failed to load, with why.
        failed: Vec<String>,
    },
    /// The caller's policy does not include the tool (whether or not it
    /// exists: the answer is the same either way).
    #[error("tool `{name}` is not available to this caller ({})", match .policy {
        Some(entry) => format!("its `[[callers]]` entry `{entry}` does not include it"),
        None => "it matches no `[[callers]]` entry".to_owned(),
    })]
    NotPermitted {
        /// The name asked for.
        name: String,
        /// The policy entry that applied; `None`: no entry matched.
        policy: Option<String>,
    },
    /// The tool needs client capabilities the request did not declare
    /// (its `requires_client`); nothing ran.
    #[error(
        "tool `{name}` needs the client's {}, which this request does not declare in \
         `io.modelcontextprotocol/clientCapabilities`; nothing was run",
        .missing.names().join(" and ")
    )]
    MissingClientCapability {
        /// The tool.
        name: String,
        /// What the request lacks.
        missing: ClientNeeds,
    },
}

/// How many failed files an unknown-tool error names.
const FAILED_FILES_SHOWN: usize = 3;

fn failed_hint(failed: &[String]) -> String {
    if failed.is_empty() {
        return String::new();
    }
    let more = failed.len().saturating_sub(FAILED_FILES_SHOWN);
    format!(
        " ({} in the tools folder failed to load and might have provided it: {}{})",
        if failed.len() == 1 {
            "1 file".to_owned()
        } else {
            format!("{} files", failed.len())
        },
        failed[..failed.len().min(FAILED_FILES_SHOWN)].join("; "),
        if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        }
    )
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
    /// The component stopped to ask the client these first (a prompt get
    /// on 2026-07-28, replay).
    #[error("input required")]
    InputRequired(Vec<crate::call::PendingInput>),
    /// Nothing to complete: no such argument of the prompt, or variable of
    /// the template (the message says which exist).
    #[error("{0}")]
    UnknownArgument(String),
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
    pub input_required: Option<Vec<PendingInput>>,
    /// Set when the tool produced no result of its own: why (a trap, a
    /// limit, cancellation); the content says it in words. A task reports
    /// these as failed (or cancelled), not as the tool's own error.
    pub failure: Option<CallFailure>,
    /// Set when the call was refused before its tool ran: why, as the
    /// metrics name it (`arguments`, `confirmation`, ...).
    pub refused: Option<&'static str>,
}

impl CallOutput {
    /// The tool's own result: its content, its structured output (checked)
    /// and whether it is an error.
    pub fn result(content: Vec<Content>, structured: Option<Value>, is_error: bool) -> Self {
        CallOutput {
            content,
            structured,
            is_error,
            input_required: None,
            failure: None,
            refused: None,
        }
    }

    /// An error result with one text item.
    pub fn error(message: impl Into<String>) -> Self {
        CallOutput {
            content: vec![Content::Text(message.into())],
            structured: None,
            is_error: true,
            input_required: None,
            failure: None,
            refused: None,
        }
    }

    /// A call stopped to ask the client `pending` first.
    pub fn input_required(pending: Vec<PendingInput>) -> Self {
        CallOutput {
            content: Vec::new(),
            structured: None,
            is_error: false,
            input_required: Some(pending),
            failure: None,
            refused: None,
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
            lanes: Lanes::default(),
            metrics: Arc::default(),
        }
    }

    /// What calls did, for `/metrics` (and what other rooms add to it).
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    /// Run calls in `lanes` (by default, each in its own task).
    #[must_use]
    pub fn with_lanes(mut self, lanes: Lanes) -> Self {
        self.lanes = lanes;
        self
    }

    /// Where calls run: a transport hands each `tools/call` handler to
    /// [`Lanes::handle`].
    pub fn lanes(&self) -> &Lanes {
        &self.lanes
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

    /// Whether a call of tool `name` would ask the user to confirm it
    /// first (the operator's `confirm`, else the tool's annotations);
    /// `None` for a tool nobody serves.
    pub fn would_confirm(&self, name: &str) -> Option<bool> {
        let catalog = self.registry.snapshot();
        let tool = catalog.tools.get(name)?;
        let config = self.config();
        Some(confirm::needs_confirmation(config.policy_for(name), tool))
    }

    /// Journal a moment of an MCP task's life (its creation, its end), if
    /// there is a journal. Never blocks.
    pub fn record_task(&self, event: &crate::journal::TaskEvent<'_>) {
        if let Some(journal) = self.current().journal {
            journal.record_task(event);
        }
    }

    /// Journal the end of an agent run, if there is a journal. Never blocks.
    pub fn record_agent_run(&self, fields: serde_json::Map<String, serde_json::Value>) {
        if let Some(journal) = self.current().journal {
            journal.record_agent_run(fields);
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

    /// Call tool `name` with `arguments`.
    ///
    /// # Errors
    ///
    /// Only for an unknown tool. Everything that goes wrong once the tool is
    /// known (bad arguments, traps, limits) is an error *result*.
    pub async fn call(
        &self,
        name: &str,
        arguments: Arguments,
        context: CallContext<'_>,
    ) -> Result<CallOutput, DispatchError> {
        // Held until the call is over, so `shutdown` can wait for it.
        let _in_flight = self.calls.token();
        let current = self.current();
        let policy = current.config.policy_for(name);
        let mut record = Recorder::new(
            name,
            arguments.value(),
            policy,
            current.journal.as_deref(),
            context.client,
            &self.shutdown,
            &self.metrics,
        );
        record.task = context.task.clone();
        // Boxed: the phases' future is about 9 KiB, and inline it would make
        // every future that holds a call (the handler's, the spawned
        // task's) that much larger, each copied whole as it is awaited or
        // spawned. Boxed, a read or a listing took about 3% less of the
        // server's CPU in a quiet A/B on one CPU (docs/benchmarks.md, round
        // nine).
        let phases = Box::pin(self.phases(
            name,
            &arguments,
            policy,
            &current.config,
            context,
            &mut record,
        ));
        // A shutdown ends the call where it is: dropping the phases discards
        // the store, and the `Recorder` journals the call as cancelled.
        let ended = tokio::select! {
            // A shutdown wins over the client's own cancellation, which a
            // shutdown also fires.
            biased;
            () = self.shutdown.cancelled() => Err(Stop::error(
                Outcome::Cancelled("the server shut down before the call finished".into()),
                format!("call of tool `{name}` was cancelled: the server is shutting down"),
            )),
            ended = phases => ended,
        };
        match ended {
            Ok(output) => Ok(output),
            Err(stop) => {
                record.finish(&stop.outcome, None);
                stop.reply
            }
        }
    }

    /// The phases of a call, in order: admit, resolve, check the client's
    /// declared capabilities against `requires_client`, check the arguments,
    /// confirm, acquire permits, run, settle. A phase that ends the call
    /// early returns a [`Stop`]; `settle` records a call that ran.
    async fn phases(
        &self,
        name: &str,
        arguments: &Arguments,
        policy: &Policy,
        config: &Config,
        context: CallContext<'_>,
        record: &mut Recorder<'_>,
    ) -> Result<CallOutput, Box<Stop>> {
        let CallContext {
            events,
            cancel,
            client_roots,
            services,
            client: _,
            caller,
            lane,
            declared,
            task,
        } = context;
        self.admit(name)?;
        let access = auth::access(&config.callers, caller);
        permitted(&access, name)?;
        // Which files failed to load is the operator's business, not a
        // restricted caller's.
        let tool = self.resolve(name, matches!(access, Access::Everything))?;
        record.served_by(&tool.component);
        if let Some(declared) = declared {
            // What the component declares it needs, and what the operator
            // adds; a tool that runs only as a task needs the extension.
            let task_only = policy
                .tasks
                .unwrap_or(tool.spec.descriptor.execution.task_support)
                == crate::call::TaskSupport::Required;
            let missing = policy
                .requires_client
                .union(tool.spec.descriptor.needs)
                .union(ClientNeeds {
                    tasks: task_only,
                    ..ClientNeeds::default()
                })
                .missing(declared);
            if !missing.is_empty() {
                return Err(Box::new(Stop {
                    outcome: Outcome::Refused(
                        Refusal::Capability,
                        format!(
                            "the client does not declare {}",
                            missing.names().join(" and ")
                        )
                        .into(),
                    ),
                    reply: Err(DispatchError::MissingClientCapability {
                        name: name.to_owned(),
                        missing,
                    }),
                }));
            }
        }
        let checked = self.check_parameters(&tool, arguments.value())?;
        let arguments_text = check_arguments(&tool, arguments).await?;
        // Before anything runs, and before taking a permit (a person may
        // take minutes to answer).
        confirm_if_needed(policy, &tool, arguments.value(), services.as_deref()).await?;
        // Released after the call's store is dropped (below): each store
        // holds an instance slot, and the pool has one per permit.
        let permits = self.acquire(&tool, cancel).await?;

        // Run. (The debug line says a call got its permits and starts: what
        // a test or an operator waits for to know a call is in flight.)
        tracing::debug!(tool = %name, "call running");
        let grants = policy.grants.prepare(grants::CallContext {
            tool: name,
            client_roots,
            caller: grants::CallerLimits {
                name: access.policy_name().unwrap_or(""),
                roots: access.roots(),
                hosts: access.hosts(),
            },
            client: services.as_ref(),
        });
        // The call owns what it uses, so it can move to another thread
        // (`lanes`); its permits are its first local, so a call dropped
        // where it runs (cancelled) drops its store before them.
        let sandbox = Arc::clone(&self.sandbox);
        let component = Arc::clone(&tool.component);
        let mut limits = policy.limits;
        if task.is_some() {
            // Nobody waits on a request for a task.
            limits.deadline_ms = limits.task_deadline_ms;
        }
        let tool_name = name.to_owned();
        let arguments_bytes = arguments_text.len();
        let cancel = cancel.clone();
        let handled_inline = lane.is_inline();
        let (mut report, permits) = self
            .lanes
            .run_guest(lane, move |inline| async move {
                let permits = permits;
                crate::phases::mark(crate::phases::Phase::Guest);
                let report = sandbox
                    .call(
                        &component.prepared,
                        CallSpec {
                            name: &tool_name,
                            arguments: &arguments_text,
                            checked,
                            limits: &limits,
                            grants,
                            events,
                            cancel: &cancel,
                            inline,
                        },
                    )
                    .await;
                crate::phases::mark(crate::phases::Phase::GuestDone);
                (report, permits)
            })
            .await;
        // Off this call's path: drop its store, then its permits (so the
        // pool's slots never outnumber the permits), and make the
        // component's next instance before the next call asks for it.
        let spent = std::mem::replace(&mut report.spent, crate::call::Spent::none());
        let sandbox = Arc::clone(&self.sandbox);
        let component = Arc::clone(&tool.component);
        self.lanes.after_call(
            handled_inline,
            move || {
                drop(spent);
                drop(permits);
            },
            move |inline| async move {
                sandbox
                    .make_ready(&component.prepared, &limits, inline)
                    .await;
                crate::phases::mark(crate::phases::Phase::NextReady);
            },
        );
        Ok(settle(&tool, report, &policy.limits, arguments_bytes, record).await)
    }

    /// Refuse new calls once the server is shutting down.
    fn admit(&self, name: &str) -> Result<(), Box<Stop>> {
        if self.shutdown.is_cancelled() {
            return Err(Stop::error(
                Outcome::Refused(Refusal::Shutdown, "the server is shutting down".into()),
                format!("tool `{name}` was not run: the server is shutting down"),
            ));
        }
        Ok(())
    }

    /// The tool by `name` in the current catalog snapshot; when there is
    /// none, the error names the files that failed to load if
    /// `name_failures`.
    fn resolve(&self, name: &str, name_failures: bool) -> Result<Arc<LoadedTool>, Box<Stop>> {
        let catalog = self.registry.snapshot();
        if let Some(tool) = catalog.tools.get(name) {
            return Ok(Arc::clone(tool));
        }
        if !name_failures {
            return Err(Box::new(Stop {
                outcome: Outcome::Refused(Refusal::UnknownTool, "unknown tool".into()),
                reply: Err(DispatchError::UnknownTool {
                    name: name.to_owned(),
                    failed: Vec::new(),
                }),
            }));
        }
        // Say which files failed: one of them may be the tool asked for.
        let failed = catalog
            .files
            .iter()
            .filter_map(|file| match &file.status {
                FileStatus::Failed(why) => {
                    let file = file.path.file_name().unwrap_or_default().to_string_lossy();
                    let why = why.to_string();
                    let why: String = why.lines().next().unwrap_or("").chars().take(300).collect();
                    Some(format!("{file}: {why}"))
                }
                FileStatus::Loaded(_) => None,
            })
            .collect();
        Err(Box::new(Stop {
            outcome: Outcome::Refused(Refusal::UnknownTool, "unknown tool".into()),
            reply: Err(DispatchError::UnknownTool {
                name: name.to_owned(),
                failed,
            }),
        }))
    }

    /// The arguments against the component's typed parameters, where its
    /// kind has them (a plain component): the precise problem, with its
    /// path, before the schema's more general one.
    fn check_parameters(&self, tool: &LoadedTool, arguments: &Value) -> Result<Checked, Box<Stop>> {
        let name = &tool.spec.descriptor.name;
        self.sandbox
            .check_arguments(&tool.component.prepared, name, arguments)
            .map_err(|problem| {
                Stop::error(
                    Outcome::Refused(Refusal::Arguments, "arguments do not fit the parameters".into()),
                    format!(
                        "arguments do not fit the parameters of tool `{name}`: {problem}; the tool was not run"
                    ),
                )
            })
    }

    /// The server-wide permit, then the tool's; a call beyond either limit
    /// waits here, until the client cancels.
    async fn acquire(
        &self,
        tool: &LoadedTool,
        cancel: &CancellationToken,
    ) -> Result<Vec<OwnedSemaphorePermit>, Box<Stop>> {
        acquire_or_cancel([&self.permits, &tool.permits], cancel)
            .await
            .ok_or_else(|| {
                Stop::error(
                    Outcome::Cancelled("cancelled while waiting to run".into()),
                    format!("call of tool `{}` was cancelled", tool.spec.descriptor.name),
                )
            })
    }
}

/// Refuse a tool the caller's policy does not include, before anything
/// about the tool is looked up (so the answer says nothing about whether
/// it exists).
fn permitted(access: &Access<'_>, name: &str) -> Result<(), Box<Stop>> {
    if access.may_use(name) {
        return Ok(());
    }
    let policy = match access {
        Access::Rule(rule) => Some(rule.name.clone()),
        Access::Everything | Access::Nothing => None,
    };
    let why = match &policy {
        Some(entry) => format!("not in the `[[callers]]` entry `{entry}`"),
        None => "the caller matches no `[[callers]]` entry".to_owned(),
    };
    Err(Box::new(Stop {
        outcome: Outcome::Refused(Refusal::NotPermitted, why.into()),
        reply: Err(DispatchError::NotPermitted {
            name: name.to_owned(),
            policy,
        }),
    }))
}

/// A call that ends before its guest runs: how the journal records it and
/// what the caller gets. (Boxed where returned: the early path is rare and
/// a `CallOutput` is large.)
struct Stop {
    outcome: Outcome<'static>,
    reply: Result<CallOutput, DispatchError>,
}

impl Stop {
    /// Ended by `outcome`, answered with an error result of `message`.
    fn error(outcome: Outcome<'static>, message: String) -> Box<Self> {
        let mut output = CallOutput::error(message);
        // Cancelled before it ran (waiting for a permit, at shutdown): a
        // task reports it as cancelled, not as the tool's error.
        if matches!(outcome, Outcome::Cancelled(_)) {
            output.failure = Some(CallFailure::Cancelled);
        }
        if let Outcome::Refused(reason, _) = &outcome {
            output.refused = Some(reason.label());
        }
        Box::new(Stop {
            outcome,
            reply: Ok(output),
        })
    }
}

/// Check the arguments against the tool's input schema; the arguments as
/// JSON text, for the guest, if they pass.
async fn check_arguments(tool: &LoadedTool, arguments: &Arguments) -> Result<String, Box<Stop>> {
    let name = &tool.spec.descriptor.name;
    // One allocation of the exact length (`to_string` grows its buffer).
    let text = crate::json::value_text(arguments.value());
    match validate_input(&tool.spec, arguments, text.len()).await {
        Ok(None) => Ok(text),
        Ok(Some(problems)) => Err(Stop::error(
            Outcome::Refused(
                Refusal::Arguments,
                "arguments do not match the input schema".into(),
            ),
            format!("arguments do not match the input schema of tool `{name}`:\n{problems}"),
        )),
        Err(exceeded) => Err(Stop::error(
            Outcome::Refused(
                Refusal::Arguments,
                "arguments could not be checked within the budget".into(),
            ),
            format!(
                "the arguments of tool `{name}` could not be checked: {exceeded}; the tool was not run"
            ),
        )),
    }
}

/// Ask the user to confirm the call, when the policy or the tool's
/// annotations say so.
async fn confirm_if_needed(
    policy: &Policy,
    tool: &LoadedTool,
    arguments: &Value,
    services: Option<&dyn ClientServices>,
) -> Result<(), Box<Stop>> {
    if !needs_confirmation(policy, tool) {
        return Ok(());
    }
    let name = &tool.spec.descriptor.name;
    let destructive = tool.spec.descriptor.annotations.destructive;
    match confirm(name, arguments, destructive, services).await {
        Confirmation::Confirmed => Ok(()),
        Confirmation::Ask(pending) => Err(Box::new(Stop {
            outcome: Outcome::InputRequired("waiting for the user's confirmation".into()),
            reply: Ok(CallOutput::input_required(pending)),
        })),
        Confirmation::Refused(message) => Err(Stop::error(
            Outcome::Refused(Refusal::Confirmation, message.clone().into()),
            message,
        )),
    }
}

/// Turn a finished run into the caller's output (structured output parsed
/// and checked, failures as error results that name the limit), log the
/// guest's captured output, and record the call.
async fn settle(
    tool: &LoadedTool,
    report: CallReport,
    limits: &Limits,
    bytes_in: usize,
    record: &mut Recorder<'_>,
) -> CallOutput {
    let name = &tool.spec.descriptor.name;
    let scrub = record.scrub();
    log_guest_output(name, "stdout", &report.stdout, &scrub);
    log_guest_output(name, "stderr", &report.stderr, &scrub);
    let bytes_out = report.outcome.as_ref().map_or(0, |r| r.size);
    let (output, cancelled) = match report.outcome {
        Ok(result) => (check_output(tool, result, limits).await, false),
        Err(CallFailure::InputRequired(pending)) => (CallOutput::input_required(pending), false),
        Err(failure) => {
            if let Some(limit) = failure.limit() {
                record.metrics().limit_hit(limit);
            }
            let cancelled = matches!(failure, CallFailure::Cancelled);
            let mut output = CallOutput::error(format!("tool `{name}` {failure}"));
            output.failure = Some(failure);
            (output, cancelled)
        }
    };
    let message = match output.content.first() {
        Some(Content::Text(text)) if output.is_error => first_line(text),
        _ => "",
    };
    let outcome = if output.input_required.is_some() {
        Outcome::InputRequired("".into())
    } else if cancelled {
        Outcome::Cancelled(message.into())
    } else if output.is_error {
        Outcome::Error(message.into())
    } else {
        Outcome::Ok
    };
    let facts = RunFacts {
        fuel: report.fuel_used,
        peak_memory: report.peak_memory_bytes,
        bytes_in: bytes_in as u64,
        bytes_out,
        net: report.net,
    };
    record.finish(&outcome, Some(&facts));
    output
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
