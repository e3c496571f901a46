//! What a call produces and consumes, owned by neither the protocol nor the
//! sandbox: the sandbox fills these types from wasmtime (`sandbox/`), the
//! protocol maps them to the wire (`protocol`), and dispatch, the journal
//! and the client services pass them between the two.
//!
//! Invariants:
//! - Nothing here names a wasmtime or WIT type, so a module that uses only
//!   these types cannot reach into the engine.
//! - Every size a guest controls is already bounded by the time a value of
//!   these types exists: the sandbox checks the caps while converting.

use std::sync::Arc;
use std::time::Duration;

use crate::grants::network::NetRecord;

// --- Arguments ----------------------------------------------------------------

/// A call's arguments: a JSON object, parsed once and shared, not copied,
/// by everything that reads them during the call or prompt (the
/// dispatcher's checks, the journal, and a 2026-07-28 request's replay,
/// which binds its signed state to them). A deep copy each was a second (and, for arguments
/// checked on the blocking pool, a third) copy of every byte a client
/// sent.
#[derive(Debug, Clone)]
pub struct Arguments(Arc<serde_json::Value>);

impl Arguments {
    /// `arguments` as given (`None` is `{}`).
    pub fn new(arguments: Option<serde_json::Map<String, serde_json::Value>>) -> Self {
        Arguments(Arc::new(serde_json::Value::Object(
            arguments.unwrap_or_default(),
        )))
    }

    /// The arguments, an object.
    pub fn value(&self) -> &serde_json::Value {
        &self.0
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for Arguments {
    fn from(arguments: serde_json::Map<String, serde_json::Value>) -> Self {
        Arguments::new(Some(arguments))
    }
}

// --- Results ------------------------------------------------------------------

/// The result of a call that ran to completion (it may still be an error
/// result the tool chose to return).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// What the model reads.
    pub content: Vec<Content>,
    /// Structured output, JSON text, not yet parsed or checked.
    pub structured: Option<String>,
    /// The tool reported an error.
    pub is_error: bool,
    /// Bytes of content and structured output as they will be sent (see
    /// `content_len`), as checked against the result-size limit.
    pub size: u64,
}

/// One content item of a result.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Content {
    Text(String),
    Image {
        data: Vec<u8>,
        mime_type: String,
    },
    Audio {
        data: Vec<u8>,
        mime_type: String,
    },
    Resource {
        uri: String,
        mime_type: Option<String>,
        body: ResourceBody,
    },
}

/// The body of an embedded resource.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum ResourceBody {
    Text(String),
    Blob(Vec<u8>),
}

/// Why a call (or `describe`) did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallFailure {
    /// Ran out of fuel.
    #[error("ran out of fuel (limit {limit})")]
    Fuel {
        /// The fuel it had.
        limit: u64,
    },
    /// Ran past its wall-clock deadline.
    #[error("exceeded its deadline (limit {limit_ms} ms)")]
    Deadline {
        /// The deadline.
        limit_ms: u64,
    },
    /// Tried to grow its memory past the cap.
    #[error("exceeded its memory limit (limit {} MiB)", limit_bytes / (1024 * 1024))]
    Memory {
        /// The cap.
        limit_bytes: u64,
    },
    /// Recursed past the guest stack.
    #[error("overflowed its stack (unbounded or too deep recursion)")]
    StackOverflow,
    /// Panicked; the message comes from its stderr.
    #[error("panicked: {0}")]
    Panic(String),
    /// Raised an exception its language runtime did not turn into a result
    /// (Python, JavaScript); the message comes from its stderr.
    #[error("raised an error: {0}")]
    Raised(String),
    /// Trapped for another reason.
    #[error("crashed: {0}")]
    Trap(String),
    /// Returned a result larger than the cap.
    #[error(
        "returned a result {}over the result size limit (limit {limit} bytes)",
        size.map(|size| format!("of {size} bytes, ")).unwrap_or_default()
    )]
    ResultTooLarge {
        /// Its size, when known (a result too large to copy out of the guest
        /// is refused before it is measured).
        size: Option<u64>,
        /// The cap.
        limit: u64,
    },
    /// Handed the host more than one transfer may carry (a host call's
    /// argument larger than the result-size limit).
    #[error(
        "passed more than {limit} bytes to the host in one call (the result size limit bounds every transfer)"
    )]
    Transfer {
        /// The cap.
        limit: u64,
    },
    /// Held too many host resources at once.
    #[error(
        "held more than {limit} host resources at once (files, streams, pollables, HTTP requests; limit {limit})"
    )]
    Resources {
        /// The cap.
        limit: usize,
    },
    /// Held too many files, directory listings and connections open at
    /// once (each a file descriptor of the server).
    #[error(
        "held more than {limit} open files, directory listings and HTTP connections at once (limit {limit})"
    )]
    OpenHandles {
        /// The cap.
        limit: usize,
    },
    /// Built HTTP headers or trailers larger than the host keeps.
    #[error(
        "built HTTP header fields larger than allowed (limit {limit} bytes for one request's or response's headers)"
    )]
    HttpFields {
        /// The cap.
        limit: usize,
    },
    /// Asked for more random bytes at once than the host gives.
    #[error("asked for more random bytes at once than allowed (limit {limit} bytes per request)")]
    Random {
        /// The cap.
        limit: u64,
    },
    /// Was cancelled by the client.
    #[error("was cancelled")]
    Cancelled,
    /// Was refused before it ran: the server can no longer make a fresh
    /// instance safely (the reason says why and what the operator can do).
    #[error("was refused: {0}")]
    Refused(String),
    /// Stopped to ask the client something first (2026-07-28 replay):
    /// every question of the guest's batch that has no answer yet.
    #[error("needs input from the client")]
    InputRequired(Vec<PendingInput>),
}

impl CallFailure {
    /// The limit that ended the call, by its metrics name, if a limit did.
    pub fn limit(&self) -> Option<&'static str> {
        Some(match self {
            CallFailure::Fuel { .. } => "fuel",
            CallFailure::Deadline { .. } => "deadline",
            CallFailure::Memory { .. } => "memory",
            CallFailure::StackOverflow => "stack",
            CallFailure::ResultTooLarge { .. } => "result_size",
            CallFailure::Transfer { .. } => "transfer",
            CallFailure::Resources { .. } => "host_resources",
            CallFailure::OpenHandles { .. } => "open_handles",
            CallFailure::HttpFields { .. } => "http_fields",
            CallFailure::Random { .. } => "random",
            _ => return None,
        })
    }
}

/// Everything known about one call once it ends.
#[derive(Debug)]
pub struct CallReport {
    /// The result, or why there is none.
    pub outcome: Result<ToolResult, CallFailure>,
    /// Fuel consumed.
    pub fuel_used: u64,
    /// Peak linear memory, in bytes.
    pub peak_memory_bytes: u64,
    /// Wall-clock time, including instantiation.
    pub duration: Duration,
    /// The guest's stdout.
    pub stdout: CapturedOutput,
    /// The guest's stderr.
    pub stderr: CapturedOutput,
    /// What the guest did on the network.
    pub net: NetRecord,
    /// The call's spent store and instance: dropping them returns the
    /// instance slot, which is work, so whoever holds the report drops
    /// this after the reply (see [`Spent`]).
    pub spent: Spent,
}

/// A call's spent store and instance, opaque outside the sandbox; drop it
/// once the reply is on its way.
pub struct Spent(Option<Box<dyn std::any::Any + Send>>);

impl std::fmt::Debug for Spent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Spent(store)"
        } else {
            "Spent(none)"
        })
    }
}

impl Spent {
    /// Hold `store` (whatever the sandbox keeps of a call).
    pub fn new(store: impl std::any::Any + Send) -> Spent {
        Spent(Some(Box::new(store)))
    }

    /// Nothing to hold.
    pub fn none() -> Spent {
        Spent(None)
    }
}

/// What a guest wrote to one output stream during a call.
#[derive(Debug, Clone, Default)]
pub struct CapturedOutput {
    /// The first bytes, up to the sandbox's capture cap (64 KiB).
    pub bytes: Vec<u8>,
    /// How many bytes past those were dropped.
    pub dropped: u64,
}

// --- Events and questions from a running guest -------------------------------

/// Something a running guest sent the host.
#[derive(Debug, Clone, PartialEq)]
pub enum GuestEvent {
    /// A `log` call.
    Log {
        /// Its severity.
        level: LogLevel,
        /// Its text (bounded).
        message: String,
    },
    /// A `progress` call.
    Progress {
        /// Work done so far.
        done: f64,
        /// Total work, if known.
        total: Option<f64>,
        /// A message, if any.
        message: Option<String>,
    },
    /// A `begin-task` call (the first; later ones are not sent): from here
    /// the call may take long, and may become a task.
    BeginTask,
}

/// Where a call's [`GuestEvent`]s go. Called on the runtime thread running
/// the guest: it must not block.
pub type EventSink = Arc<dyn Fn(GuestEvent) + Send + Sync>;

/// Log severity, in increasing order (syslog levels, as MCP uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// A kind of question a guest can put to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// `elicitation/create`: a question for the user.
    Elicit,
    /// `sampling/createMessage`: a completion from the client's model.
    Sample,
    /// `roots/list`: the folders the user works in.
    Roots,
}

/// Elicitation, sampling and roots through the caller's client. The
/// protocol layer implements it per era: requests to the client (2025-x),
/// replay with the answers gathered so far (2026-07-28), or a task's input
/// requests (a call running as a task).
pub trait ClientServices: Send + Sync {
    /// Whether the client can be asked `ask` at all; checked before the host
    /// does any work on the guest's request. `Err` is the message for the
    /// guest.
    fn can(&self, ask: Ask) -> Result<(), String> {
        let _ = ask;
        Ok(())
    }
    /// Ask `questions` (checked, each under its own key): one answer per
    /// question, in order, or stop the call for the ones not answered yet
    /// ([`ServiceError::InputRequired`], replay). A question the client
    /// cannot answer gets its own `Err` (the message for the guest).
    fn ask(&self, questions: Vec<PendingInput>) -> ServiceFuture<Vec<Result<Answer, String>>>;
    /// Ask the user to confirm a call before it runs (the host's own
    /// question, not the guest's): `message` with the form `schema`, keyed
    /// `key`.
    fn confirm(
        &self,
        key: String,
        message: String,
        schema: serde_json::Value,
    ) -> ServiceFuture<ElicitAnswer> {
        let asked = self.ask(vec![PendingInput {
            key,
            ask: Question::Elicit { message, schema },
        }]);
        Box::pin(async move {
            match asked.await?.pop() {
                Some(Ok(Answer::Elicit(answer))) => Ok(answer),
                Some(Err(reason)) => Err(ServiceError::Refused(reason)),
                _ => Err(ServiceError::Refused(
                    "the client's answer to the confirmation is not an elicitation result".into(),
                )),
            }
        })
    }
}

/// What a [`ClientServices`] call returns.
pub type ServiceFuture<T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ServiceError>> + Send>>;

/// A question for the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Question {
    /// An elicitation: a form for the user.
    Elicit {
        /// The message.
        message: String,
        /// The form schema (checked: an object of primitive properties).
        schema: serde_json::Value,
    },
    /// A completion from the client's model.
    Sample(SampleRequest),
    /// The client's roots.
    Roots,
}

impl Question {
    /// The kind of question.
    pub fn kind(&self) -> Ask {
        match self {
            Question::Elicit { .. } => Ask::Elicit,
            Question::Sample(_) => Ask::Sample,
            Question::Roots => Ask::Roots,
        }
    }
}

/// The client's answer to one [`Question`].
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// To an elicitation.
    Elicit(ElicitAnswer),
    /// To a sampling request.
    Sample(SampleAnswer),
    /// To a roots request.
    Roots(Vec<ClientRoot>),
}

/// A root the client shares.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientRoot {
    /// Its URI.
    pub uri: String,
    /// Its name, if the client gave one.
    pub name: Option<String>,
}

/// The user's answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAnswer {
    /// Accepted, with these values (a JSON object).
    Accept(serde_json::Value),
    /// Declined.
    Decline,
    /// Dismissed.
    Cancel,
}

/// A completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRequest {
    /// `(role, text)` pairs; role is `user` or `assistant`.
    pub messages: Vec<(String, String)>,
    /// System prompt.
    pub system_prompt: Option<String>,
    /// Token cap.
    pub max_tokens: u32,
    /// Temperature.
    pub temperature: Option<f64>,
}

/// A completion.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleAnswer {
    /// Its text.
    pub text: String,
    /// The model.
    pub model: String,
    /// Why it stopped.
    pub stop_reason: Option<String>,
}

/// Why a service call did not return an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ServiceError {
    /// Refused or impossible; the message goes to the guest.
    Refused(String),
    /// Not known yet: stop the call and ask the client these (replay).
    InputRequired(Vec<PendingInput>),
}

/// A question, keyed so that its answer can find it (a replay's, or a
/// task's `tasks/update`).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingInput {
    /// Key of the question within the call: the guest's own (`user_name`)
    /// or the host's (`elicit-0`, `sample-0`, `roots-0`, `toolcage-confirm`).
    pub key: String,
    /// The question.
    pub ask: Question,
}

/// The questions a call stopped on, as an error a host import can return
/// to unwind the guest (the sandbox classifies it as input required).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("input required: {}", .0.iter().map(|p| format!("`{}`", p.key)).collect::<Vec<_>>().join(", "))]
pub struct InputRequired(pub Vec<PendingInput>);

// --- What a component describes -----------------------------------------------

/// A descriptor as the component returned it, not yet validated.
#[derive(Debug, Clone, Default)]
pub struct RawDescriptor {
    /// Tool name.
    pub name: String,
    /// Title.
    pub title: Option<String>,
    /// Description.
    pub description: String,
    /// Input schema, JSON text.
    pub input_schema: String,
    /// Output schema, JSON text.
    pub output_schema: Option<String>,
    /// Hints.
    pub annotations: Annotations,
    /// Icons (contract 0.2.0; none before).
    pub icons: Vec<Icon>,
    /// Whether and when calls run as tasks.
    pub execution: Execution,
    /// What the client must be able to do.
    pub needs: ClientNeeds,
}

/// An icon as a component declared it (MCP `Icon`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icon {
    /// An `https:` URL or a `data:image/...` URI (checked at load).
    pub src: String,
    /// Its MIME type.
    pub mime_type: Option<String>,
    /// `WxH` or `any` each.
    pub sizes: Vec<String>,
    /// `light` or `dark`, if it suits only one.
    pub theme: Option<IconTheme>,
}

/// The theme an icon suits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum IconTheme {
    Light,
    Dark,
}

/// Whether calls of a tool may run as tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// Every call answers in its request.
    #[default]
    Forbidden,
    /// A task when the client accepts tasks.
    Optional,
    /// Only as a task.
    Required,
}

impl TaskSupport {
    /// The names the config and the wire use.
    pub const NAMES: [&'static str; 3] = ["forbidden", "optional", "required"];

    /// Its name (`forbidden`, `optional`, `required`).
    pub fn name(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }
}

/// When a call that runs as a task becomes one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskStart {
    /// As the call starts.
    #[default]
    WithCall,
    /// When the guest calls `begin-task`.
    OnBeginTask,
}

/// How a tool's calls run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Execution {
    /// Whether as tasks.
    pub task_support: TaskSupport,
    /// When a task starts.
    pub task_start: TaskStart,
}

/// Tool behaviour hints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

/// What `list-resources`, `list-templates` and `list-prompts` returned, not
/// yet validated.
#[derive(Debug, Clone, Default)]
pub struct RawExtras {
    /// Concrete resources.
    pub resources: Vec<RawResource>,
    /// Resource templates.
    pub templates: Vec<RawTemplate>,
    /// Prompts.
    pub prompts: Vec<RawPrompt>,
}

/// A resource as the component listed it.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct RawResource {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
    pub icons: Vec<Icon>,
    /// The file its content comes from, which the host may watch.
    pub watch: Option<String>,
}

/// A resource template as the component listed it.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct RawTemplate {
    pub uri_template: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub icons: Vec<Icon>,
}

/// A prompt as the component listed it.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct RawPrompt {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub arguments: Vec<PromptArgument>,
    pub icons: Vec<Icon>,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct PromptArgument {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub required: bool,
}

/// One part of a read resource.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct ResourceContent {
    pub uri: String,
    pub mime_type: Option<String>,
    pub body: ResourceBody,
}

/// Who speaks a prompt message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum PromptRole {
    User,
    Assistant,
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct PromptMessage {
    pub role: PromptRole,
    pub content: Content,
}

/// A built prompt.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct PromptOutput {
    pub description: Option<String>,
    pub messages: Vec<PromptMessage>,
}

// --- Completions ----------------------------------------------------------------

/// What a completion request completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionTarget {
    /// An argument of this prompt.
    Prompt(String),
    /// A variable of the resource template with this URI template.
    ResourceTemplate(String),
}

/// A `completion/complete` request, checked: the target exists and has
/// the argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRequest {
    /// The prompt or template.
    pub target: CompletionTarget,
    /// The argument or variable.
    pub argument: String,
    /// What the user typed so far.
    pub value: String,
    /// The other arguments' values, already chosen.
    pub context: Vec<(String, String)>,
}

/// A component's suggestions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    /// At most [`MAX_COMPLETION_VALUES`].
    pub values: Vec<String>,
    /// How many there are in all, if known.
    pub total: Option<u32>,
    /// There are more than `values`.
    pub has_more: bool,
}

/// The most suggestions one completion carries (MCP's own cap).
pub const MAX_COMPLETION_VALUES: usize = 100;

/// Client capabilities a tool needs to do its work: the client services it
/// uses (sampling, elicitation) and the client's roots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientNeeds {
    /// The client's model (`sampling/createMessage`).
    pub sampling: bool,
    /// Questions to the user (`elicitation/create`).
    pub elicitation: bool,
    /// The client's roots (`roots/list`).
    pub roots: bool,
    /// The tasks extension (`io.modelcontextprotocol/tasks`): set for a
    /// tool whose calls run only as tasks, never by `requires_client`.
    pub tasks: bool,
}

impl ClientNeeds {
    /// The names `requires_client` accepts, each with its flag.
    pub const NAMES: [&'static str; 3] = ["sampling", "elicitation", "roots"];

    /// Whether nothing is needed.
    pub fn is_empty(self) -> bool {
        self == ClientNeeds::default()
    }

    /// What either needs.
    #[must_use]
    pub fn union(self, other: ClientNeeds) -> ClientNeeds {
        ClientNeeds {
            sampling: self.sampling || other.sampling,
            elicitation: self.elicitation || other.elicitation,
            tasks: self.tasks || other.tasks,
            roots: self.roots || other.roots,
        }
    }

    /// What `self` needs that `declared` lacks.
    #[must_use]
    pub fn missing(self, declared: ClientNeeds) -> ClientNeeds {
        ClientNeeds {
            sampling: self.sampling && !declared.sampling,
            elicitation: self.elicitation && !declared.elicitation,
            roots: self.roots && !declared.roots,
            tasks: self.tasks && !declared.tasks,
        }
    }

    /// Set the flag of capability `name`; `false` if the name is not one of
    /// [`ClientNeeds::NAMES`].
    pub fn set(&mut self, name: &str) -> bool {
        match name {
            "sampling" => self.sampling = true,
            "elicitation" => self.elicitation = true,
            "roots" => self.roots = true,
            _ => return false,
        }
        true
    }

    /// The names of the capabilities set, in [`ClientNeeds::NAMES`] order
    /// (then the tasks extension, by its name).
    pub fn names(self) -> Vec<&'static str> {
        let flags = [self.sampling, self.elicitation, self.roots];
        let mut names: Vec<&'static str> = ClientNeeds::NAMES
            .into_iter()
            .zip(flags)
            .filter_map(|(name, set)| set.then_some(name))
            .collect();
        if self.tasks {
            names.push("the tasks extension (io.modelcontextprotocol/tasks)");
        }
        names
    }
}
