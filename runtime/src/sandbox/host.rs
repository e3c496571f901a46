//! The `toolcage:tool/host` imports: what a running guest may ask of the
//! host beyond WASI (log, progress, questions for the client: elicitation,
//! sampling, roots; and `begin-task`), for both contract versions: the
//! 0.1.0 imports are the 0.2.0 ones minus `roots`, `ask` and `begin-task`,
//! served by the same code.
//!
//! Invariants:
//! - Every request is checked against its cap before the host does work on
//!   it, and the cheapest refusal comes first: whether the client can be
//!   asked at all, then sizes, then parsing.
//! - Nothing here blocks: events go to a sink that must not block, and
//!   questions to the client are awaited, under the call's deadline.
//! - Every question has a key: the guest's own (`ask`, checked) or the
//!   host's, `elicit-N`, `sample-N` and `roots-N` in the order asked, so a
//!   replay finds the same question under the same key.

use super::contract::{v1, v2};
use super::store::HostState;
use super::{
    MAX_LOG_MESSAGE_BYTES, MAX_LOG_MESSAGES, MAX_PROGRESS_EVENTS, MAX_PROGRESS_MESSAGE_BYTES,
};
use crate::call::{
    Answer, Ask, ClientRoot, ClientServices, ElicitAnswer, GuestEvent, InputRequired, LogLevel,
    PendingInput, Question, SampleAnswer, SampleRequest, ServiceError,
};
use crate::json;
use crate::redact::Scrub;

use v2::toolcage::tool::host as wit;

/// Most questions in one `ask`.
pub const MAX_QUESTIONS_PER_ASK: usize = 16;

/// Longest key a guest may give a question.
pub const MAX_QUESTION_KEY_BYTES: usize = 64;

/// Most roots handed to a guest; the rest are dropped.
pub const MAX_ROOTS: usize = 1024;

/// Longest root URI or name handed to a guest; longer ones are dropped.
pub const MAX_ROOT_TEXT_BYTES: usize = 8 * 1024;

impl v2::toolcage::tool::types::Host for HostState {}
impl v1::toolcage::tool::types::Host for HostState {}

impl HostState {
    /// The next key the host gives a question of `kind` asked without one.
    fn next_key(&mut self, kind: Ask) -> String {
        let (slot, prefix) = match kind {
            Ask::Elicit => (0, "elicit"),
            Ask::Sample => (1, "sample"),
            Ask::Roots => (2, "roots"),
        };
        let n = self.asked[slot];
        self.asked[slot] += 1;
        format!("{prefix}-{n}")
    }

    /// The client's services, if a question of `kind` may be put to them:
    /// sampling needs the operator's permission, everything a client that
    /// can answer it. `Err` is the message for the guest.
    fn services_for(&self, kind: Ask) -> Result<std::sync::Arc<dyn ClientServices>, String> {
        if kind == Ask::Sample && !self.grants.services.sampling {
            return Err(
                "this tool may not sample: it spends the user's tokens, and the operator \
                 has not allowed it (`allow_sampling = true` in the tool's config)"
                    .into(),
            );
        }
        let Some(services) = self.grants.services.client.clone() else {
            let what = match kind {
                Ask::Elicit => "elicitation",
                Ask::Sample => "sampling",
                Ask::Roots => "the client's roots",
            };
            return Err(format!("{what} is not available here (no client)"));
        };
        // Whether the client can be asked at all comes first, before the
        // host spends anything on the request.
        services.can(kind)?;
        Ok(services)
    }

    /// Ask one question of `kind` under the host's next key; `question`
    /// checks and builds it once the client is known to be able to answer.
    async fn ask_one(
        &mut self,
        kind: Ask,
        question: impl FnOnce() -> Result<Question, String>,
    ) -> wasmtime::Result<Result<Answer, String>> {
        self.touch();
        let key = self.next_key(kind);
        let services = match self.services_for(kind) {
            Ok(services) => services,
            Err(reason) => return Ok(Err(reason)),
        };
        let question = match question() {
            Ok(question) => question,
            Err(reason) => return Ok(Err(reason)),
        };
        let answers = services
            .ask(vec![PendingInput { key, ask: question }])
            .await;
        match answers {
            Ok(mut answers) => Ok(answers
                .pop()
                .unwrap_or_else(|| Err("the client gave no answer".into()))),
            Err(ServiceError::Refused(reason)) => Ok(Err(reason)),
            Err(ServiceError::InputRequired(pending)) => {
                Err(wasmtime::Error::new(InputRequired(pending)))
            }
        }
    }

    fn log_event(&mut self, level: LogLevel, message: String) {
        self.touch();
        if self.log_messages >= MAX_LOG_MESSAGES {
            return;
        }
        self.log_messages += 1;
        let message = if self.log_messages == MAX_LOG_MESSAGES {
            format!("{MAX_LOG_MESSAGES} log messages in one call; dropping the rest")
        } else {
            truncate(message, MAX_LOG_MESSAGE_BYTES)
        };
        if tracing::enabled!(tracing::Level::DEBUG) {
            let scrub = Scrub::new(self.grants.secrets.iter().map(String::as_str));
            tracing::debug!(?level, message = %scrub.text(&message, MAX_LOG_MESSAGE_BYTES), "guest log");
        }
        if let Some(events) = &self.events {
            events(GuestEvent::Log { level, message });
        }
    }

    fn progress_event(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
        self.touch();
        if !done.is_finite() || total.is_some_and(|t| !t.is_finite()) {
            return;
        }
        if self.progress_events >= MAX_PROGRESS_EVENTS {
            return;
        }
        self.progress_events += 1;
        if let Some(events) = &self.events {
            events(GuestEvent::Progress {
                done,
                total,
                message: message.map(|m| truncate(m, MAX_PROGRESS_MESSAGE_BYTES)),
            });
        }
    }
}

impl v2::toolcage::tool::host::Host for HostState {
    fn log(&mut self, level: wit::Level, message: String) {
        self.log_event(LogLevel::from(level), message);
    }

    fn progress(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
        self.progress_event(done, total, message);
    }

    async fn elicit(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> wasmtime::Result<Result<wit::ElicitResponse, String>> {
        let answer = self
            .ask_one(Ask::Elicit, || elicitation(message, &requested_schema))
            .await?;
        Ok(answer.and_then(|answer| match answer {
            Answer::Elicit(answer) => Ok(elicit_response(answer)),
            _ => Err("the client's answer is not an elicitation result".into()),
        }))
    }

    async fn sample(
        &mut self,
        request: wit::SamplingRequest,
    ) -> wasmtime::Result<Result<wit::SamplingResponse, String>> {
        let answer = self.ask_one(Ask::Sample, || sampling(request)).await?;
        Ok(answer.and_then(|answer| match answer {
            Answer::Sample(answer) => Ok(sampling_response(answer)),
            _ => Err("the client's answer is not a sampling result".into()),
        }))
    }

    async fn roots(&mut self) -> wasmtime::Result<Result<Vec<wit::Root>, String>> {
        let answer = self.ask_one(Ask::Roots, || Ok(Question::Roots)).await?;
        Ok(answer.and_then(|answer| match answer {
            Answer::Roots(roots) => Ok(roots_for_guest(roots)),
            _ => Err("the client's answer is not a roots list".into()),
        }))
    }

    async fn ask(
        &mut self,
        questions: Vec<wit::KeyedQuestion>,
    ) -> wasmtime::Result<Vec<Result<wit::Answer, String>>> {
        self.touch();
        check_keys(&questions).map_err(wasmtime::Error::msg)?;
        // Each question is checked on its own; those that fail get their
        // own error and are not asked.
        let mut answers: Vec<Option<Result<wit::Answer, String>>> = Vec::new();
        let mut asked = Vec::new();
        let mut services: Option<std::sync::Arc<dyn ClientServices>> = None;
        for keyed in questions {
            let (kind, build): (Ask, Box<dyn FnOnce() -> Result<Question, String>>) =
                match keyed.question {
                    wit::Question::Elicit(e) => (
                        Ask::Elicit,
                        Box::new(move || elicitation(e.message, &e.requested_schema)),
                    ),
                    wit::Question::Sample(request) => {
                        (Ask::Sample, Box::new(move || sampling(request)))
                    }
                    wit::Question::Roots => (Ask::Roots, Box::new(|| Ok(Question::Roots))),
                };
            let checked = self.services_for(kind).and_then(|s| {
                let question = build()?;
                Ok((s, question))
            });
            match checked {
                Ok((s, question)) => {
                    services.get_or_insert(s);
                    asked.push((
                        answers.len(),
                        PendingInput {
                            key: keyed.key,
                            ask: question,
                        },
                    ));
                    answers.push(None);
                }
                Err(reason) => answers.push(Some(Err(reason))),
            }
        }
        if let Some(services) = services {
            let (positions, questions): (Vec<usize>, Vec<PendingInput>) = asked.into_iter().unzip();
            match services.ask(questions).await {
                Ok(replies) => {
                    for (position, reply) in positions.into_iter().zip(replies) {
                        answers[position] = Some(reply.map(answer_for_guest));
                    }
                }
                Err(ServiceError::Refused(reason)) => {
                    for position in positions {
                        answers[position] = Some(Err(reason.clone()));
                    }
                }
                Err(ServiceError::InputRequired(pending)) => {
                    return Err(wasmtime::Error::new(InputRequired(pending)));
                }
            }
        }
        Ok(answers
            .into_iter()
            .map(|answer| answer.unwrap_or_else(|| Err("the client gave no answer".into())))
            .collect())
    }

    fn begin_task(&mut self) {
        self.touch();
        if std::mem::replace(&mut self.began_task, true) {
            return;
        }
        if let Some(events) = &self.events {
            events(GuestEvent::BeginTask);
        }
    }
}

/// The 0.1.0 imports: the same host, through 0.2.0's types.
impl v1::toolcage::tool::host::Host for HostState {
    fn log(&mut self, level: v1::toolcage::tool::host::Level, message: String) {
        use v1::toolcage::tool::host::Level as L;
        let level = match level {
            L::Debug => LogLevel::Debug,
            L::Info => LogLevel::Info,
            L::Notice => LogLevel::Notice,
            L::Warning => LogLevel::Warning,
            L::Error => LogLevel::Error,
            L::Critical => LogLevel::Critical,
            L::Alert => LogLevel::Alert,
            L::Emergency => LogLevel::Emergency,
        };
        self.log_event(level, message);
    }

    fn progress(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
        self.progress_event(done, total, message);
    }

    async fn elicit(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> wasmtime::Result<Result<v1::toolcage::tool::host::ElicitResponse, String>> {
        use v1::toolcage::tool::host::ElicitResponse as R;
        let response =
            v2::toolcage::tool::host::Host::elicit(self, message, requested_schema).await?;
        Ok(response.map(|response| match response {
            wit::ElicitResponse::Accept(values) => R::Accept(values),
            wit::ElicitResponse::Decline => R::Decline,
            wit::ElicitResponse::Cancel => R::Cancel,
        }))
    }

    async fn sample(
        &mut self,
        request: v1::toolcage::tool::host::SamplingRequest,
    ) -> wasmtime::Result<Result<v1::toolcage::tool::host::SamplingResponse, String>> {
        use v1::toolcage::tool::host as old;
        let request = wit::SamplingRequest {
            messages: request
                .messages
                .into_iter()
                .map(|m| wit::SamplingMessage {
                    role: match m.role {
                        old::Role::User => wit::Role::User,
                        old::Role::Assistant => wit::Role::Assistant,
                    },
                    text: m.text,
                })
                .collect(),
            system_prompt: request.system_prompt,
            max_tokens: request.max_tokens,
            temperature: request.temperature,
        };
        let response = v2::toolcage::tool::host::Host::sample(self, request).await?;
        Ok(response.map(|r| old::SamplingResponse {
            text: r.text,
            model: r.model,
            stop_reason: r.stop_reason,
        }))
    }
}

/// Check the keys of an `ask`: how many, their form, no repeats, none of
/// the host's own. The error traps the call (the guest's bug, not the
/// client's).
fn check_keys(questions: &[wit::KeyedQuestion]) -> Result<(), String> {
    if questions.len() > MAX_QUESTIONS_PER_ASK {
        return Err(format!(
            "host.ask: {} questions in one ask, over the limit of {MAX_QUESTIONS_PER_ASK}",
            questions.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for q in questions {
        let key = q.key.as_str();
        let well_formed = !key.is_empty()
            && key.len() <= MAX_QUESTION_KEY_BYTES
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !well_formed {
            return Err(format!(
                "host.ask: the question key `{}` is not 1 to {MAX_QUESTION_KEY_BYTES} characters \
                 from `A-Z a-z 0-9 _ - .`",
                truncate(key.to_owned(), MAX_QUESTION_KEY_BYTES)
            ));
        }
        if is_host_key(key) {
            return Err(format!(
                "host.ask: the question key `{key}` is one the host gives (`elicit-N`, `sample-N`, \
                 `roots-N`, `toolcage-...`); choose another"
            ));
        }
        if !seen.insert(key) {
            return Err(format!(
                "host.ask: the question key `{key}` is used twice in one ask"
            ));
        }
    }
    Ok(())
}

/// Whether `key` is of the form the host gives questions itself.
fn is_host_key(key: &str) -> bool {
    if key.starts_with("toolcage-") {
        return true;
    }
    ["elicit-", "sample-", "roots-"].iter().any(|prefix| {
        key.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// An elicitation question, checked.
fn elicitation(message: String, schema: &str) -> Result<Question, String> {
    let schema = check_elicitation(&message, schema)?;
    Ok(Question::Elicit { message, schema })
}

/// A sampling question, checked.
fn sampling(request: wit::SamplingRequest) -> Result<Question, String> {
    check_sampling(&request)?;
    Ok(Question::Sample(SampleRequest {
        messages: request
            .messages
            .into_iter()
            .map(|m| {
                let role = match m.role {
                    wit::Role::User => "user",
                    wit::Role::Assistant => "assistant",
                };
                (role.to_owned(), m.text)
            })
            .collect(),
        system_prompt: request.system_prompt,
        max_tokens: request.max_tokens,
        temperature: request.temperature,
    }))
}

fn elicit_response(answer: ElicitAnswer) -> wit::ElicitResponse {
    match answer {
        ElicitAnswer::Accept(values) => wit::ElicitResponse::Accept(values.to_string()),
        ElicitAnswer::Decline => wit::ElicitResponse::Decline,
        ElicitAnswer::Cancel => wit::ElicitResponse::Cancel,
    }
}

fn sampling_response(answer: SampleAnswer) -> wit::SamplingResponse {
    wit::SamplingResponse {
        text: answer.text,
        model: answer.model,
        stop_reason: answer.stop_reason,
    }
}

/// The client's roots as a guest gets them: at most [`MAX_ROOTS`], each
/// URI and name at most [`MAX_ROOT_TEXT_BYTES`] (longer ones dropped, not
/// cut: a cut URI names another place).
fn roots_for_guest(roots: Vec<ClientRoot>) -> Vec<wit::Root> {
    roots
        .into_iter()
        .filter(|root| {
            root.uri.len() <= MAX_ROOT_TEXT_BYTES
                && root
                    .name
                    .as_ref()
                    .is_none_or(|n| n.len() <= MAX_ROOT_TEXT_BYTES)
        })
        .take(MAX_ROOTS)
        .map(|root| wit::Root {
            uri: root.uri,
            name: root.name,
        })
        .collect()
}

fn answer_for_guest(answer: Answer) -> wit::Answer {
    match answer {
        Answer::Elicit(answer) => wit::Answer::Elicit(elicit_response(answer)),
        Answer::Sample(answer) => wit::Answer::Sample(sampling_response(answer)),
        Answer::Roots(roots) => wit::Answer::Roots(roots_for_guest(roots)),
    }
}

/// Longest elicitation message a guest may send, in bytes.
pub const MAX_ELICIT_MESSAGE_BYTES: usize = 16 * 1024;

/// Largest requested schema of an elicitation, in bytes of JSON text.
pub const MAX_ELICIT_SCHEMA_BYTES: usize = 64 * 1024;

/// Most messages in one sampling request.
pub const MAX_SAMPLE_MESSAGES: usize = 100;

/// Most text (all messages and the system prompt) in one sampling request,
/// in bytes.
pub const MAX_SAMPLE_TEXT_BYTES: usize = 1024 * 1024;

/// Check an elicitation a guest asks for and parse its schema: within the
/// size caps, and a flat object of primitive properties, as MCP requires
/// of elicitation forms. The error is the message for the guest.
fn check_elicitation(message: &str, schema: &str) -> Result<serde_json::Value, String> {
    if message.len() > MAX_ELICIT_MESSAGE_BYTES {
        return Err(format!(
            "the elicitation message is {} bytes, over the limit of {MAX_ELICIT_MESSAGE_BYTES}",
            message.len()
        ));
    }
    if schema.len() > MAX_ELICIT_SCHEMA_BYTES {
        return Err(format!(
            "the requested schema is {} bytes, over the limit of {MAX_ELICIT_SCHEMA_BYTES}",
            schema.len()
        ));
    }
    // Within the text cap, so the parsed form is bounded by the budget too.
    // 32 times: a schema is mostly small maps (see `schema::parse`).
    let schema = json::parse(schema, MAX_ELICIT_SCHEMA_BYTES * 32)
        .map_err(|error| format!("the requested schema is not valid JSON: {error}"))?;
    let flat = schema.get("type").and_then(serde_json::Value::as_str) == Some("object")
        && schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
            .is_none_or(|properties| {
                properties.values().all(|property| {
                    property.get("properties").is_none()
                        && matches!(
                            property.get("type").and_then(serde_json::Value::as_str),
                            Some("string" | "number" | "integer" | "boolean" | "array") | None
                        )
                })
            });
    if !flat {
        return Err(
            "the requested schema must be an object of primitive properties (string, number, \
             integer, boolean, or an array of enum strings), as MCP requires of elicitation forms"
                .into(),
        );
    }
    Ok(schema)
}

/// Check a sampling request a guest asks for against the caps.
fn check_sampling(request: &wit::SamplingRequest) -> Result<(), String> {
    if request.messages.len() > MAX_SAMPLE_MESSAGES {
        return Err(format!(
            "the sampling request has {} messages, over the limit of {MAX_SAMPLE_MESSAGES}",
            request.messages.len()
        ));
    }
    let text: usize = request.messages.iter().map(|m| m.text.len()).sum::<usize>()
        + request.system_prompt.as_ref().map_or(0, String::len);
    if text > MAX_SAMPLE_TEXT_BYTES {
        return Err(format!(
            "the sampling request holds {text} bytes of text, over the limit of {MAX_SAMPLE_TEXT_BYTES}"
        ));
    }
    Ok(())
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate("héllo".into(), 2), "h…");
        assert_eq!(truncate("hi".into(), 2), "hi");
    }
}
