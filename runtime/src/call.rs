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
    /// Stopped to ask the client something first (2026-07-28 replay).
    #[error("needs input from the client")]
    InputRequired(PendingInput),
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
}

/// Elicitation and sampling through the caller's client. The protocol
/// layer implements it per era: a request to the client (2025-x), or replay
/// with answers gathered so far (2026-07-28).
pub trait ClientServices: Send + Sync {
    /// Whether the client can be asked `ask` at all; checked before the host
    /// does any work on the guest's request. `Err` is the message for the
    /// guest.
    fn can(&self, ask: Ask) -> Result<(), String> {
        let _ = ask;
        Ok(())
    }
    /// Ask the user `message`, with a form described by `schema`.
    fn elicit(&self, message: String, schema: serde_json::Value) -> ServiceFuture<ElicitAnswer>;
    /// Ask the client's model for a completion.
    fn sample(&self, request: SampleRequest) -> ServiceFuture<SampleAnswer>;
    /// Ask the user to confirm a call before it runs (the host's own
    /// question, not the guest's).
    fn confirm(&self, message: String, schema: serde_json::Value) -> ServiceFuture<ElicitAnswer> {
        self.elicit(message, schema)
    }
}

/// What a [`ClientServices`] call returns.
pub type ServiceFuture<T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ServiceError>> + Send>>;

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
    /// Not known yet: stop the call and ask the client (replay).
    InputRequired(PendingInput),
}

/// A question the call stopped on, keyed so a replay can find its answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("input required: `{key}`")]
pub struct PendingInput {
    /// Stable key of the question within the call (`elicit-0`, ...).
    pub key: String,
    /// The question.
    pub ask: PendingAsk,
}

/// The kind of question.
#[derive(Debug, Clone, PartialEq)]
pub enum PendingAsk {
    /// An elicitation.
    Elicit {
        /// The message.
        message: String,
        /// The form schema.
        schema: serde_json::Value,
    },
    /// A completion.
    Sample(SampleRequest),
}

// --- What a component describes -----------------------------------------------

/// A descriptor as the component returned it, not yet validated.
#[derive(Debug, Clone)]
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
}

/// A prompt as the component listed it.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct RawPrompt {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub arguments: Vec<PromptArgument>,
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
