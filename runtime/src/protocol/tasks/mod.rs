//! MCP tasks (the `io.modelcontextprotocol/tasks` extension of protocol
//! 2026-07-28): a `tools/call` answered at once with a task id, the call
//! running on in its fresh instance under the same sandbox and limits
//! (with the tool's `task_deadline_ms`), and the client polling
//! `tasks/get`, answering the call's questions with `tasks/update` and
//! stopping it with `tasks/cancel`.
//!
//! How a call becomes a task: a tool whose task support is `optional` or
//! `required` (the component's descriptor, or the operator's `tasks`),
//! called by a request that declares the extension, runs as one. With
//! `task-start: with-call` the task is made before the call starts; with
//! `on-begin-task` the call starts in its request (its questions are asked
//! there, as input-required results) and the task is made when the guest
//! calls `begin-task`, the call going on inside it. A call that returns
//! before that answers in its request.
//!
//! Rules, in one place:
//! - Bounded: at most `tasks.max_per_client` per client and
//!   `tasks.max_total` in all (running or kept); past them, a call that
//!   would make one is refused before anything runs. Finished results kept
//!   at once are at most `tasks.max_retained_mib`: past it, the oldest
//!   finished tasks are dropped before their time. A task is kept
//!   `tasks.ttl_ms` from its creation (its `ttlMs`); one still running then
//!   is cancelled.
//! - A task is its creator's: `tasks/get`, `tasks/update` and `tasks/cancel`
//!   from another caller (another OAuth identity) find nothing, exactly as
//!   for an id that never existed (-32602). Without caller identities
//!   (stdio, the static token) the id, 128 random bits, is the capability.
//! - A task's questions wait in the task (`input_required`) until
//!   `tasks/update` answers every one of them; unknown keys are ignored, a
//!   key is answered once, answers are bounded in bytes.
//! - Only terminal transitions are final: once completed, failed or
//!   cancelled, nothing changes a task.
//! - A trap or a limit ends a task as failed (a JSON-RPC internal error
//!   naming it); a tool's own error result as completed with `isError`.
//! - The journal records each task's creation and end, beside the line
//!   of the call it ran (which names the task).
//! - With a shared store (`[tasks] store_url`, see `store`), every replica
//!   answers for every task: a task not held here is read from the store
//!   (its owner checked against the record's digest), and `tasks/update`
//!   and `tasks/cancel` for it go to the replica running it. The bounds
//!   above are each replica's.

pub mod store;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, JsonObject, Task, TaskPayload, TaskStatus,
};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::call::{Answer, Ask, ClientServices, PendingInput, ServiceError, ServiceFuture};
use crate::config::TaskSettings;
use crate::dispatch::Dispatcher;
use crate::journal::{ClientId, TaskEvent};
use crate::services::{Capabilities, ReplayServices, parse_answer};

/// Most bytes of answers one task keeps (its questions' answers, as the
/// client sent them); past it, `tasks/update` is refused.
pub(super) const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// The tasks of a server, across its connections.
pub struct Tasks {
    dispatcher: Arc<Dispatcher>,
    entries: Mutex<BTreeMap<String, Arc<Entry>>>,
    /// The fleet's shared store, if configured.
    store: Option<Arc<store::Store>>,
    /// Itself, for the inbox loop.
    me: std::sync::Weak<Tasks>,
    /// Whether this replica holds a lease and takes its inbox: from its
    /// first shared task on (a command that never runs a task, such as
    /// `toolcage list`, never touches the store).
    serving: std::sync::Once,
}

/// A task found by its id: held here, or (with a shared store) run by
/// another replica.
pub(super) enum Found {
    /// Held here.
    Local(Arc<Entry>),
    /// Another replica's, as the store has it.
    Remote(store::Record),
}

/// One task.
pub(super) struct Entry {
    id: String,
    /// Its creator's identity (`Caller::key`), or empty without one.
    owner: String,
    tool: String,
    client: ClientId,
    created_at: String,
    expires: Instant,
    ttl_ms: u64,
    poll_ms: u64,
    /// Fires on `tasks/cancel` and at expiry: the call is the task's.
    pub(super) cancel: CancellationToken,
    state: Mutex<State>,
    /// Wakes a guest waiting for answers.
    answered: Notify,
    /// Wakes the writer of its record in the shared store.
    changed: Notify,
}

struct State {
    status: TaskStatus,
    updated_at: String,
    message: Option<String>,
    /// Questions the call waits on, by key.
    pending: BTreeMap<String, PendingInput>,
    /// Every answer so far, by key (a question asked again gets the same).
    answers: BTreeMap<String, Value>,
    answer_bytes: usize,
    result: Option<JsonObject>,
    error: Option<JsonObject>,
    /// Bytes of `result`/`error`, counted against `max_retained_bytes`.
    retained: u64,
    finished: Option<Instant>,
}

/// How a task's call ended.
pub(super) enum Ending {
    /// With a result (the tool's own, maybe an error result).
    Completed(CallToolResult),
    /// Without one: a trap, a limit, a refusal before it ran (a JSON-RPC
    /// error object).
    Failed { code: i32, message: String },
    /// Cancelled.
    Cancelled,
}

impl Tasks {
    /// No tasks yet; their calls run through `dispatcher`. With a shared
    /// store configured, it is connected to lazily (and again whenever it
    /// must).
    ///
    /// # Errors
    ///
    /// The store's settings are not ones its client takes.
    pub fn new(dispatcher: Arc<Dispatcher>) -> Result<Arc<Self>, String> {
        let store = match &dispatcher.config().task_store {
            Some(settings) => Some(Arc::new(store::Store::open(settings, new_id())?)),
            None => None,
        };
        Ok(Arc::new_cyclic(|me| Tasks {
            dispatcher,
            entries: Mutex::new(BTreeMap::new()),
            store,
            me: me.clone(),
            serving: std::sync::Once::new(),
        }))
    }

    /// `owner`'s task `id`, held here or (with a shared store) by another
    /// replica.
    ///
    /// # Errors
    ///
    /// Not found (another owner's is not found either), or the store
    /// cannot be reached.
    pub(super) async fn find(&self, owner: &str, id: &str) -> Result<Found, McpError> {
        let unknown = match self.get(owner, id) {
            Ok(entry) => return Ok(Found::Local(entry)),
            Err(unknown) => unknown,
        };
        let Some(store) = &self.store else {
            return Err(unknown);
        };
        // Ids are hex, maybe after a replica name: nothing else is looked up.
        if id.is_empty()
            || id.len() > 200
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        {
            return Err(unknown);
        }
        match store.get(id).await {
            Ok(Some(record)) if record.owner == store::owner_digest(owner) => {
                Ok(Found::Remote(record))
            }
            Ok(_) => Err(unknown),
            Err(why) => Err(McpError::internal_error(why, None)),
        }
    }

    /// What `tasks/get` answers for another replica's task: its record, or
    /// failed if that replica is gone while it ran.
    pub(super) async fn remote_detailed(
        &self,
        record: store::Record,
    ) -> Result<DetailedTask, McpError> {
        let detailed: DetailedTask = serde_json::from_value(record.task)
            .map_err(|e| McpError::internal_error(format!("the task store's record: {e}"), None))?;
        if is_terminal(detailed.status()) {
            return Ok(detailed);
        }
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| McpError::internal_error("no task store", None))?;
        if store
            .alive(&record.replica)
            .await
            .map_err(|why| McpError::internal_error(why, None))?
        {
            return Ok(detailed);
        }
        let mut error = JsonObject::new();
        error.insert("code".into(), (-32603).into());
        error.insert(
            "message".into(),
            "the replica running this task stopped before it finished".into(),
        );
        Ok(DetailedTask::new(
            detailed.task,
            TaskPayload::Failed { error },
        ))
    }

    /// Send `command` to the replica running `record`'s task.
    pub(super) async fn send(
        &self,
        record: &store::Record,
        command: store::Command,
    ) -> Result<(), McpError> {
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| McpError::internal_error("no task store", None))?;
        store
            .send(&record.replica, &command)
            .await
            .map_err(|why| McpError::internal_error(why, None))
    }

    /// With a shared store: write `entry`'s record now (so any replica
    /// finds it from this moment), then keep it current until the task
    /// ends or expires.
    ///
    /// # Errors
    ///
    /// The store cannot be reached: the task is cancelled (its call stops
    /// at once), since no other replica could answer for it.
    pub(super) async fn share(&self, entry: &Arc<Entry>) -> Result<(), McpError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        // The lease first: a record whose replica holds none reads as dead.
        let written = match store.renew().await {
            Ok(()) => {
                self.serving.call_once(|| {
                    tokio::spawn(take_inbox(Arc::clone(store), self.me.clone()));
                });
                write_record(store, entry).await
            }
            Err(why) => Err(why),
        };
        if let Err(why) = written {
            self.cancel(entry);
            return Err(McpError::internal_error(
                format!("{why}; the task was cancelled: no other replica could answer for it"),
                None,
            ));
        }
        let store = Arc::clone(store);
        let entry = Arc::clone(entry);
        tokio::spawn(async move {
            let expires = tokio::time::Instant::from_std(entry.expires);
            loop {
                tokio::select! {
                    () = entry.changed.notified() => {}
                    () = tokio::time::sleep_until(expires) => return,
                }
                // Changes close together (progress) make one write.
                tokio::time::sleep(WRITE_COALESCE).await;
                let terminal = is_terminal(entry.lock().status);
                match write_record(&store, &entry).await {
                    Ok(()) if terminal => return,
                    Ok(()) => {}
                    Err(why) => {
                        tracing::warn!(task = %entry.id, "{why}; trying again in 1 s");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        entry.changed.notify_one();
                    }
                }
            }
        });
        Ok(())
    }

    fn settings(&self) -> TaskSettings {
        self.dispatcher.config().tasks
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Entry>>> {
        match self.entries.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A new task for a call of `tool` by `owner`, or why not (the bounds).
    pub(super) fn create(
        &self,
        owner: &str,
        tool: &str,
        client: ClientId,
        answers: BTreeMap<String, Value>,
        cancel: CancellationToken,
    ) -> Result<Arc<Entry>, McpError> {
        let settings = self.settings();
        let now = Instant::now();
        let mut entries = self.entries();
        self.sweep(&mut entries, now);
        let held = entries.values().filter(|e| e.owner == owner).count();
        if held >= settings.max_per_client {
            return Err(McpError::invalid_request(
                format!(
                    "this client already holds {held} tasks, the most it may (`tasks.max_per_client`); \
                     wait for one to finish and be read, or cancel one, then call again"
                ),
                None,
            ));
        }
        if entries.len() >= settings.max_total {
            return Err(McpError::invalid_request(
                format!(
                    "the server holds {} tasks, the most it may (`tasks.max_total`); try again later",
                    entries.len()
                ),
                None,
            ));
        }
        // Behind a balancer, the id names this replica first, so `tasks/*`
        // (whose `Mcp-Name` header is the id) can be routed back here.
        let id = match &self.dispatcher.config().http.replica_name {
            Some(replica) => format!("{replica}.{}", new_id()),
            None => new_id(),
        };
        let created_at = timestamp();
        let answer_bytes = answers.values().map(|v| v.to_string().len()).sum();
        let entry = Arc::new(Entry {
            id: id.clone(),
            owner: owner.to_owned(),
            tool: tool.to_owned(),
            client,
            created_at: created_at.clone(),
            expires: now + Duration::from_millis(settings.ttl_ms),
            ttl_ms: settings.ttl_ms,
            poll_ms: settings.poll_interval_ms,
            cancel,
            state: Mutex::new(State {
                status: TaskStatus::Working,
                updated_at: created_at,
                message: None,
                pending: BTreeMap::new(),
                answers,
                answer_bytes,
                result: None,
                error: None,
                retained: 0,
                finished: None,
            }),
            answered: Notify::new(),
            changed: Notify::new(),
        });
        entries.insert(id, Arc::clone(&entry));
        drop(entries);
        self.journal(&entry, "created", None);
        // At its time to live, a task still running is cancelled (and
        // dropped at the next request that looks); `finish` then sees the
        // clock past `expires` and records it expired.
        let weak = Arc::downgrade(&entry);
        let expires = entry.expires;
        tokio::spawn(async move {
            tokio::time::sleep_until(expires.into()).await;
            if let Some(entry) = weak.upgrade()
                && !is_terminal(entry.lock().status)
            {
                entry.cancel.cancel();
            }
        });
        Ok(entry)
    }

    /// `owner`'s task `id`, if it has one (another's is not found).
    pub(super) fn get(&self, owner: &str, id: &str) -> Result<Arc<Entry>, McpError> {
        let mut entries = self.entries();
        self.sweep(&mut entries, Instant::now());
        match entries.get(id) {
            Some(entry) if entry.owner == owner => Ok(Arc::clone(entry)),
            _ => Err(McpError::invalid_params(
                format!(
                    "unknown task `{}`: it never existed, expired, or belongs to another client",
                    crate::redact::truncate(id, 128)
                ),
                None,
            )),
        }
    }

    /// Record how `entry`'s call ended (nothing changes a task that already
    /// ended), dropping the oldest finished tasks if results now take more
    /// than `tasks.max_retained_mib`.
    pub(super) fn finish(&self, entry: &Arc<Entry>, ending: Ending) {
        let (event, message) = {
            let mut state = entry.lock();
            if is_terminal(state.status) {
                return;
            }
            state.pending.clear();
            state.finished = Some(Instant::now());
            state.updated_at = timestamp();
            // Its time to live ran out while it ran: however its call then
            // ended (cancelled by the timer, or a limit or result that
            // raced it), the task expired. The clock decides, not which
            // timer the runtime polled first: a `task_deadline_ms` equal to
            // `ttl_ms` ends the call after `expires` (its deadline starts
            // after the task is created), in the same timer tick as the
            // time-to-live timer.
            let expired = Instant::now() >= entry.expires;
            let ending = if expired { Ending::Cancelled } else { ending };
            match ending {
                Ending::Completed(result) => {
                    let object = match serde_json::to_value(&result) {
                        Ok(Value::Object(mut object)) => {
                            // The task's own envelope says what kind of
                            // result this is.
                            object.remove("resultType");
                            object
                        }
                        _ => JsonObject::new(),
                    };
                    state.retained = Value::Object(object.clone()).to_string().len() as u64;
                    state.result = Some(object);
                    state.status = TaskStatus::Completed;
                    ("completed", None)
                }
                Ending::Failed { code, message } => {
                    let mut error = JsonObject::new();
                    error.insert("code".into(), code.into());
                    error.insert("message".into(), message.clone().into());
                    state.retained = message.len() as u64 + 64;
                    state.error = Some(error);
                    state.status = TaskStatus::Failed;
                    ("failed", Some(message))
                }
                Ending::Cancelled => {
                    state.status = TaskStatus::Cancelled;
                    if expired {
                        (
                            "expired",
                            Some(
                                "still running when its time to live ran out; cancelled".to_owned(),
                            ),
                        )
                    } else {
                        ("cancelled", None)
                    }
                }
            }
        };
        entry.answered.notify_waiters();
        entry.changed.notify_one();
        self.journal(entry, event, message.as_deref());
        self.evict_over_budget();
    }

    /// Cancel `entry`: its call stops, and it is cancelled at once (a
    /// task that already ended stays as it is).
    pub(super) fn cancel(&self, entry: &Arc<Entry>) {
        entry.cancel.cancel();
        self.finish(entry, Ending::Cancelled);
    }

    /// Drop expired tasks (cancelling those still running); called with
    /// the map locked, on every create and lookup, so the map never holds
    /// more than its bounds plus what expired since the last request.
    fn sweep(&self, entries: &mut BTreeMap<String, Arc<Entry>>, now: Instant) {
        let expired: Vec<Arc<Entry>> = entries
            .values()
            .filter(|e| e.expires <= now)
            .cloned()
            .collect();
        for entry in expired {
            entries.remove(&entry.id);
            entry.cancel.cancel();
            let running = !is_terminal(entry.lock().status);
            entry.answered.notify_waiters();
            if running {
                self.journal(
                    &entry,
                    "expired",
                    Some("still running when its time to live ran out; cancelled"),
                );
            }
        }
    }

    /// Drop the oldest finished tasks while the results kept take more than
    /// `tasks.max_retained_mib`.
    fn evict_over_budget(&self) {
        let budget = self.settings().max_retained_bytes;
        let mut entries = self.entries();
        let mut finished: Vec<(Instant, u64, String)> = entries
            .values()
            .filter_map(|e| {
                let state = e.lock();
                state.finished.map(|at| (at, state.retained, e.id.clone()))
            })
            .collect();
        let mut total: u64 = finished.iter().map(|(_, bytes, _)| bytes).sum();
        if total <= budget {
            return;
        }
        finished.sort();
        for (_, bytes, id) in finished {
            if total <= budget {
                break;
            }
            entries.remove(&id);
            total -= bytes;
            tracing::warn!(task = %id, "dropped a finished task before its time: finished results take more than `tasks.max_retained_mib`");
        }
    }

    fn journal(&self, entry: &Entry, event: &'static str, message: Option<&str>) {
        tracing::debug!(task = %entry.id, tool = %entry.tool, event, "task");
        self.dispatcher.metrics().task(event);
        self.dispatcher.record_task(&TaskEvent {
            task: &entry.id,
            tool: &entry.tool,
            client: &entry.client,
            event,
            message,
        });
    }
}

impl Entry {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Its id.
    pub(super) fn id(&self) -> &str {
        &self.id
    }

    /// The task's base fields now.
    fn task(&self, state: &State) -> Task {
        Task::new(
            self.id.clone(),
            state.status,
            self.created_at.clone(),
            state.updated_at.clone(),
        )
        .with_ttl_ms(self.ttl_ms)
        .with_poll_interval_ms(self.poll_ms)
    }

    /// What `tools/call` answers when it makes this task.
    pub(super) fn created(&self) -> CreateTaskResult {
        CreateTaskResult::new(self.task(&self.lock()))
    }

    /// What `tasks/get` answers now.
    pub(super) fn detailed(&self) -> Result<DetailedTask, McpError> {
        let state = self.lock();
        let mut task = self.task(&state);
        task.status_message = state.message.clone();
        let payload = match state.status {
            TaskStatus::InputRequired => TaskPayload::InputRequired {
                input_requests: super::shape::input_requests(
                    state.pending.values().cloned().collect(),
                )?,
            },
            TaskStatus::Completed => TaskPayload::Completed {
                result: state.result.clone().unwrap_or_default(),
            },
            TaskStatus::Failed => TaskPayload::Failed {
                error: state.error.clone().unwrap_or_default(),
            },
            TaskStatus::Cancelled => TaskPayload::Cancelled,
            _ => TaskPayload::Working,
        };
        Ok(DetailedTask::new(task, payload))
    }

    /// Take the client's `responses` to the questions the call waits on:
    /// unknown or already answered keys are ignored; the call resumes once
    /// every question it waits on is answered.
    ///
    /// # Errors
    ///
    /// The answers would take more than the task may keep.
    pub(super) fn update(&self, responses: BTreeMap<String, Value>) -> Result<(), McpError> {
        let mut state = self.lock();
        for (key, value) in responses {
            if !state.pending.contains_key(&key) {
                continue;
            }
            let bytes = key.len() + value.to_string().len();
            if state.answer_bytes + bytes > MAX_ANSWER_BYTES {
                return Err(McpError::invalid_params(
                    format!(
                        "the answers to this task's questions would take more than {MAX_ANSWER_BYTES} bytes"
                    ),
                    None,
                ));
            }
            state.answer_bytes += bytes;
            state.pending.remove(&key);
            state.answers.insert(key, value);
        }
        if state.pending.is_empty() && state.status == TaskStatus::InputRequired {
            state.status = TaskStatus::Working;
            state.updated_at = timestamp();
        }
        drop(state);
        self.answered.notify_waiters();
        self.changed.notify_one();
        Ok(())
    }

    /// Show `message` as the task's status message (the guest's progress).
    pub(super) fn set_message(&self, message: String) {
        let mut state = self.lock();
        if !is_terminal(state.status) {
            state.message = Some(message);
            self.changed.notify_one();
        }
    }

    /// The answers to `questions`, waiting (as `input_required`) until the
    /// client has answered every one; `Err` when the task ends first.
    async fn answers(
        &self,
        questions: Vec<PendingInput>,
        capabilities: Capabilities,
    ) -> Result<Vec<Result<Answer, String>>, ServiceError> {
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            {
                let mut state = self.lock();
                if is_terminal(state.status) || self.cancel.is_cancelled() {
                    return Err(ServiceError::Refused("the task ended".into()));
                }
                let missing: Vec<&PendingInput> = questions
                    .iter()
                    .filter(|q| capabilities.can(q.ask.kind()).is_ok())
                    .filter(|q| !state.answers.contains_key(&q.key))
                    .collect();
                if missing.is_empty() {
                    return Ok(questions
                        .iter()
                        .map(|q| {
                            capabilities.can(q.ask.kind())?;
                            match state.answers.get(&q.key) {
                                Some(value) => parse_answer(q.ask.kind(), value),
                                None => Err("the client gave no answer".into()),
                            }
                        })
                        .collect());
                }
                for question in missing {
                    state.pending.insert(question.key.clone(), question.clone());
                }
                if state.status != TaskStatus::InputRequired {
                    state.status = TaskStatus::InputRequired;
                    state.updated_at = timestamp();
                }
                self.changed.notify_one();
            }
            tokio::select! {
                () = &mut answered => {}
                () = self.cancel.cancelled() => {
                    return Err(ServiceError::Refused("the task was cancelled".into()));
                }
            }
        }
    }
}

/// Where a call that may become a task stands: in its request, in its
/// task, or (in its request) done. One lock decides, so a call that ends
/// as it is promoted either answers its request or finishes its task,
/// never neither.
#[derive(Default)]
pub(super) struct Promotion {
    stage: Mutex<Stage>,
}

#[derive(Default)]
enum Stage {
    #[default]
    InRequest,
    Task(Arc<Entry>),
    Done,
}

impl Promotion {
    fn lock(&self) -> std::sync::MutexGuard<'_, Stage> {
        match self.stage.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Move the call into a task made by `make`, unless it already ended
    /// in its request: `Ok(None)` then.
    pub(super) fn promote(
        &self,
        make: impl FnOnce() -> Result<Arc<Entry>, McpError>,
    ) -> Result<Option<Arc<Entry>>, McpError> {
        let mut stage = self.lock();
        match &*stage {
            Stage::InRequest => {
                let entry = make()?;
                *stage = Stage::Task(Arc::clone(&entry));
                Ok(Some(entry))
            }
            Stage::Task(entry) => Ok(Some(Arc::clone(entry))),
            Stage::Done => Ok(None),
        }
    }

    /// Its task, once it has one.
    pub(super) fn task(&self) -> Option<Arc<Entry>> {
        match &*self.lock() {
            Stage::Task(entry) => Some(Arc::clone(entry)),
            _ => None,
        }
    }

    /// The call ended: its task, to finish, or `None` when it ended in its
    /// request (which now answers).
    pub(super) fn end(&self) -> Option<Arc<Entry>> {
        let mut stage = self.lock();
        match &*stage {
            Stage::Task(entry) => Some(Arc::clone(entry)),
            _ => {
                *stage = Stage::Done;
                None
            }
        }
    }
}

/// The client services of a call that may run as a task: replay (its
/// questions stop it with an input-required result) until it becomes a
/// task, then the task's input requests (the call waits for
/// `tasks/update`).
pub(super) struct TaskServices {
    pub(super) replay: ReplayServices,
    pub(super) capabilities: Capabilities,
    pub(super) promotion: Arc<Promotion>,
}

impl ClientServices for TaskServices {
    fn can(&self, ask: Ask) -> Result<(), String> {
        self.capabilities.can(ask)
    }

    fn ask(&self, questions: Vec<PendingInput>) -> ServiceFuture<Vec<Result<Answer, String>>> {
        match self.promotion.task() {
            None => self.replay.ask(questions),
            Some(entry) => {
                let capabilities = self.capabilities;
                Box::pin(async move { entry.answers(questions, capabilities).await })
            }
        }
    }
}

/// How long a record's writer waits after a change for more to come.
const WRITE_COALESCE: Duration = Duration::from_millis(50);

/// Write `entry`'s record as it is now, kept until the task expires.
async fn write_record(store: &store::Store, entry: &Entry) -> Result<(), String> {
    let detailed = entry.detailed().map_err(|e| e.message.to_string())?;
    let record = store::Record {
        owner: store::owner_digest(&entry.owner),
        replica: store.replica.clone(),
        task: serde_json::to_value(&detailed).map_err(|e| e.to_string())?,
    };
    let ttl = entry.expires.saturating_duration_since(Instant::now());
    if ttl.is_zero() {
        return Ok(());
    }
    store.put(&entry.id, &record, ttl).await
}

/// This replica's side of the shared store, while `tasks` lives: renew the
/// lease and apply what other replicas sent for the tasks running here.
async fn take_inbox(store: Arc<store::Store>, tasks: std::sync::Weak<Tasks>) {
    let mut warned: Option<Instant> = None;
    loop {
        tokio::time::sleep(store::INBOX_POLL).await;
        let commands = match store.renew_and_take().await {
            Ok(commands) => commands,
            Err(why) => {
                // Said once a minute, not ten times a second.
                if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(
                        "{why}; tasks here cannot be seen from other replicas until it is back"
                    );
                    warned = Some(Instant::now());
                }
                continue;
            }
        };
        let Some(tasks) = tasks.upgrade() else {
            store.release().await;
            return;
        };
        for command in commands {
            let (id, update) = match command {
                store::Command::Update { task, responses } => (task, Some(responses)),
                store::Command::Cancel { task } => (task, None),
            };
            // The sender checked the owner against the record.
            let entry = tasks.entries().get(&id).cloned();
            let Some(entry) = entry else { continue };
            match update {
                Some(responses) => {
                    if let Err(error) = entry.update(responses) {
                        tracing::warn!(task = %id, "answers from another replica refused: {}", error.message);
                    }
                }
                None => tasks.cancel(&entry),
            }
        }
    }
}

fn is_terminal(status: TaskStatus) -> bool {
    status.is_terminal()
}

/// A new task id: 128 random bits, hex.
fn new_id() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 16];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        // The system's generator does not fail on Linux; were it to, a
        // clock-and-counter id is still unique, if guessable.
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes[..8].copy_from_slice(&n.to_be_bytes());
        bytes[8..].copy_from_slice(&(nanos as u64).to_be_bytes());
    }
    crate::catalog::hex(&bytes)
}

/// Now, as RFC 3339 with milliseconds.
fn timestamp() -> String {
    let unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    crate::journal::rfc3339_ms(unix_ms)
}
