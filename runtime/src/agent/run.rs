//! `toolcage agent`: the loop around a model that speaks the OpenAI Chat
//! Completions API (`POST {base}/chat/completions` with `tools`; OpenAI,
//! vLLM, llama.cpp's server, Ollama, Groq and others), with the tools of
//! the tools folder as function tools, each call run by the dispatcher
//! like any other (sandbox, limits, grants, confirmation, journal).
//!
//! Rules, in one place:
//! - Bounded: at most `max_steps` model turns, `max_duration` of wall
//!   clock, `max_tokens` as the API's `usage` counts them; hitting one ends
//!   the run with a message naming it (and what the model said so far
//!   stands). A reply is read up to [`MAX_REPLY_BYTES`], and each wait on
//!   the model within `request_timeout`.
//! - A model turn's tool calls run together (parallel tool calls), each in
//!   its own sandbox; their results go back in the order the model asked.
//!   A call of a function nobody serves, or with arguments that are not a
//!   JSON object, is answered with an error the model can read; nothing
//!   runs for it.
//! - A model reply that is not the API's shape, or an HTTP error, ends the
//!   run with a clear message; no tool runs on a reply that was not read
//!   whole.
//! - The API key travels only in the `Authorization` header, and never
//!   reaches a message, the log or the journal.
//! - The journal gets a line per run (model, each turn's calls and
//!   tokens, how it ended) and each call its own line (`client.transport` = `agent`, the request
//!   id `RUN/STEP/CALL`).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::formats::{Declarations, Format, declare};
use crate::call::ClientServices;
use crate::dispatch::{CallContext, CallOutput, DispatchError, Dispatcher, Lane};
use crate::journal::ClientId;
use crate::terminal::for_terminal;

/// The most a model reply may be, in bytes.
pub const MAX_REPLY_BYTES: u64 = 16 * 1024 * 1024;

/// The most tool calls one model turn may ask for; past it, the rest are
/// answered with an error.
pub const MAX_CALLS_PER_TURN: usize = 32;

/// What a run may do, and where the model is.
#[derive(Clone)]
pub struct Settings {
    /// The API's base URL, up to `/chat/completions` (`https://api.openai.com/v1`).
    pub base_url: String,
    /// The model's name.
    pub model: String,
    /// The API key, if the endpoint needs one.
    pub api_key: Option<String>,
    /// A system prompt.
    pub system: Option<String>,
    /// Model turns at most.
    pub max_steps: u32,
    /// Wall clock at most, the whole run.
    pub max_duration: Duration,
    /// Tokens at most, as the API's `usage` counts them; `None`: no budget.
    pub max_tokens: Option<u64>,
    /// Each wait on the model (connecting, the reply's head, each chunk).
    pub request_timeout: Duration,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[secret]"))
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The model answered without asking for a tool.
    Answered,
    /// `max_steps` turns went by.
    StepLimit(u32),
    /// `max_duration` went by.
    TimeLimit(Duration),
    /// The token budget was used up.
    TokenBudget {
        /// The budget.
        budget: u64,
        /// What was used.
        used: u64,
    },
    /// The model could not be asked, or its reply not read.
    ModelError(String),
}

impl Ending {
    /// The journal's word for it.
    pub fn label(&self) -> &'static str {
        match self {
            Ending::Answered => "answered",
            Ending::StepLimit(_) => "step_limit",
            Ending::TimeLimit(_) => "time_limit",
            Ending::TokenBudget { .. } => "token_budget",
            Ending::ModelError(_) => "model_error",
        }
    }

    /// What to tell the person at the terminal, if the run did not simply
    /// end with an answer.
    pub fn message(&self) -> Option<String> {
        match self {
            Ending::Answered => None,
            Ending::StepLimit(n) => Some(format!(
                "stopped: the step limit of {n} model turns was reached (`--max-steps`)"
            )),
            Ending::TimeLimit(d) => Some(format!(
                "stopped: the time limit of {} s was reached (`--max-seconds`)",
                d.as_secs()
            )),
            Ending::TokenBudget { budget, used } => Some(format!(
                "stopped: the token budget of {budget} was used up ({used} tokens; `--max-tokens`)"
            )),
            Ending::ModelError(why) => Some(format!("stopped: {why}")),
        }
    }
}

/// What one run did.
#[derive(Debug, Clone)]
pub struct Report {
    /// How it ended.
    pub ending: Ending,
    /// Model turns taken.
    pub steps: u32,
    /// Tool calls run.
    pub calls: u32,
    /// Tokens used, as the API counted them.
    pub tokens: u64,
    /// Each model turn: the functions it called (none for the answer) and
    /// the tokens it used.
    pub turns: Vec<(Vec<String>, Option<u64>)>,
}

/// A conversation with a model, over the tools of a dispatcher.
pub struct Agent {
    dispatcher: Arc<Dispatcher>,
    settings: Settings,
    declarations: Declarations,
    /// Confirms destructive calls (the terminal), and answers nothing else.
    services: Arc<dyn ClientServices>,
    /// The conversation so far (OpenAI messages).
    pub messages: Vec<Value>,
    /// This run's id, for the journal.
    id: String,
}

/// What one model turn said.
#[derive(Debug, Default)]
struct Turn {
    content: String,
    calls: Vec<ToolCall>,
    tokens: Option<u64>,
}

#[derive(Debug, Default, Clone)]
struct ToolCall {
    id: String,
    name: String,
    arguments: String,
}

impl Agent {
    /// An agent over `dispatcher`'s tools (as they are now), asking `services`
    /// to confirm what needs confirming.
    pub fn new(
        dispatcher: Arc<Dispatcher>,
        settings: Settings,
        services: Arc<dyn ClientServices>,
    ) -> Agent {
        let catalog = dispatcher.registry().snapshot();
        let declarations = declare(
            catalog.tools.values().map(|t| &t.spec.descriptor),
            Format::OpenAi,
        );
        let mut messages = Vec::new();
        if let Some(system) = &settings.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        let id = run_id();
        Agent {
            dispatcher,
            settings,
            declarations,
            services,
            messages,
            id,
        }
    }

    /// Ask the model `prompt` (after the conversation so far) and run the
    /// tools it calls until it answers or a limit ends the run; the model's
    /// text goes to `out` as it streams, notes on the tool calls to `notes`.
    pub async fn ask(
        &mut self,
        prompt: &str,
        out: &mut dyn Write,
        notes: &mut dyn Write,
    ) -> Report {
        self.messages
            .push(json!({"role": "user", "content": prompt}));
        let started = Instant::now();
        let deadline = started + self.settings.max_duration;
        let cancel = CancellationToken::new();
        let mut report = Report {
            ending: Ending::Answered,
            steps: 0,
            calls: 0,
            tokens: 0,
            turns: Vec::new(),
        };
        let ending = loop {
            if report.steps >= self.settings.max_steps {
                break Ending::StepLimit(self.settings.max_steps);
            }
            report.steps += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let turn = match tokio::time::timeout(left, self.model_turn(out)).await {
                Err(_) => break Ending::TimeLimit(self.settings.max_duration),
                Ok(Err(why)) => break Ending::ModelError(why),
                Ok(Ok(turn)) => turn,
            };
            report.tokens += turn.tokens.unwrap_or(0);
            report.turns.push((
                turn.calls
                    .iter()
                    .map(|c| crate::outbound::printable(&c.name, 64))
                    .collect(),
                turn.tokens,
            ));
            let mut assistant = json!({"role": "assistant", "content": turn.content});
            if !turn.calls.is_empty() {
                assistant["tool_calls"] = Value::Array(
                    turn.calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.arguments}})
                        })
                        .collect(),
                );
            }
            self.messages.push(assistant);
            if let Some(budget) = self.settings.max_tokens
                && report.tokens > budget
            {
                let ending = Ending::TokenBudget {
                    budget,
                    used: report.tokens,
                };
                self.not_run(&turn.calls, &ending);
                break ending;
            }
            if turn.calls.is_empty() {
                break Ending::Answered;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let step = report.steps;
            let results =
                match tokio::time::timeout(left, self.run_calls(&turn.calls, step, &cancel, notes))
                    .await
                {
                    Ok(results) => results,
                    Err(_) => {
                        cancel.cancel();
                        let ending = Ending::TimeLimit(self.settings.max_duration);
                        self.not_run(&turn.calls, &ending);
                        break ending;
                    }
                };
            report.calls +=
                u32::try_from(turn.calls.len().min(MAX_CALLS_PER_TURN)).unwrap_or(u32::MAX);
            for (call, content) in turn.calls.iter().zip(results) {
                self.messages
                    .push(json!({"role": "tool", "tool_call_id": call.id, "content": content}));
            }
        };
        report.ending = ending;
        self.journal(&report, started.elapsed());
        report
    }

    /// Answer `calls` the run ended before finishing, so the conversation
    /// stays one the API takes (every tool call answered) if it goes on.
    fn not_run(&mut self, calls: &[ToolCall], ending: &Ending) {
        let why = ending.message().unwrap_or_default();
        for call in calls {
            self.messages.push(json!({
                "role": "tool",
                "tool_call_id": call.id,
                "content": format!("Error: not finished; the run {why}"),
            }));
        }
    }

    /// Run one turn's tool calls together; the result of each, as the
    /// model reads it.
    async fn run_calls(
        &self,
        calls: &[ToolCall],
        step: u32,
        cancel: &CancellationToken,
        notes: &mut dyn Write,
    ) -> Vec<String> {
        let mut runs = Vec::new();
        for (n, call) in calls.iter().enumerate() {
            if n >= MAX_CALLS_PER_TURN {
                runs.push(futures_ready(format!(
                    "Error: more than {MAX_CALLS_PER_TURN} tool calls in one turn; this one was not run"
                )));
                continue;
            }
            let _ = writeln!(
                notes,
                "[tool] {} {}",
                crate::outbound::printable(&call.name, 64),
                crate::outbound::printable(&call.arguments, 200)
            );
            let Some(tool) = self.declarations.names.get(&call.name).cloned() else {
                runs.push(futures_ready(format!(
                    "Error: there is no tool named `{}`; the tools are: {}",
                    crate::redact::truncate(&call.name, 64),
                    self.declarations
                        .names
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
                continue;
            };
            let arguments = match parse_arguments(&call.arguments) {
                Ok(arguments) => arguments,
                Err(why) => {
                    runs.push(futures_ready(format!("Error: {why}; the tool was not run")));
                    continue;
                }
            };
            let dispatcher = Arc::clone(&self.dispatcher);
            let services = Arc::clone(&self.services);
            let cancel = cancel.clone();
            let request = format!(
                "{}/{step}/{}",
                self.id,
                crate::redact::truncate(&call.id, 64)
            );
            runs.push(Box::pin(async move {
                let client = move || ClientId {
                    transport: "agent",
                    request: Some(request.clone()),
                    ..ClientId::default()
                };
                let result = dispatcher
                    .call(
                        &tool,
                        arguments.into(),
                        CallContext {
                            events: None,
                            cancel: &cancel,
                            client_roots: None,
                            services: Some(services),
                            client: &client,
                            caller: None,
                            lane: Lane::Pooled,
                            declared: None,
                            task: None,
                        },
                    )
                    .await;
                as_tool_message(result)
            }));
        }
        let results = futures_join(runs).await;
        for (call, result) in calls.iter().zip(&results) {
            let first = result.lines().next().unwrap_or("");
            let _ = writeln!(
                notes,
                "[tool] {} → {}",
                crate::outbound::printable(&call.name, 64),
                crate::outbound::printable(first, 200)
            );
        }
        results
    }

    /// One request to the model, its text streamed to `out`.
    async fn model_turn(&self, out: &mut dyn Write) -> Result<Turn, String> {
        let url = format!(
            "{}/chat/completions",
            self.settings.base_url.trim_end_matches('/')
        );
        let mut body = json!({
            "model": self.settings.model,
            "messages": self.messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !self.declarations.functions.is_empty() {
            body["tools"] = Value::Array(self.declarations.functions.clone());
        }
        let mut request =
            crate::outbound::Request::new(http::Method::POST, &url, self.settings.request_timeout)
                // The run's own limit, started earlier, fires first.
                .deadline(self.settings.max_duration + Duration::from_secs(1))
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(http::header::ACCEPT, "text/event-stream, application/json")
                .body(body.to_string());
        if let Some(key) = &self.settings.api_key {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {key}"));
        }
        let response = crate::outbound::send(request)
            .await
            .map_err(|why| format!("cannot reach the model: {why}"))?;
        let status = response.status;
        let streamed = response
            .header(http::header::CONTENT_TYPE)
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if !status.is_success() {
            let text = response.bytes(64 * 1024).await.unwrap_or_default();
            let detail = serde_json::from_slice::<Value>(&text)
                .ok()
                .and_then(|v| {
                    v.pointer("/error/message")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_else(|| String::from_utf8_lossy(&text).into_owned());
            return Err(format!(
                "the model answered HTTP {status}: {}",
                crate::outbound::printable(&detail, 300)
            ));
        }
        if !streamed {
            let text = response
                .bytes(MAX_REPLY_BYTES)
                .await
                .map_err(|why| format!("cannot read the model's reply: {why}"))?;
            let reply: Value = serde_json::from_slice(&text)
                .map_err(|e| format!("the model's reply is not JSON: {e}"))?;
            let turn = turn_of_completion(&reply)?;
            let _ = write!(out, "{}", for_terminal(&turn.content));
            let _ = out.flush();
            return Ok(turn);
        }
        let mut stream = Stream::default();
        let mut text_out = Vec::new();
        let read = response
            .each_chunk(MAX_REPLY_BYTES, |chunk| {
                stream.feed(chunk, &mut text_out)?;
                let _ = out.write_all(&text_out);
                let _ = out.flush();
                text_out.clear();
                Ok(())
            })
            .await;
        read.map_err(|why| format!("cannot read the model's reply: {why}"))?;
        stream.finish()
    }

    fn journal(&self, report: &Report, took: Duration) {
        let mut fields = Map::new();
        fields.insert("run".into(), json!(self.id));
        fields.insert("model".into(), json!(self.settings.model));
        fields.insert("base_url".into(), json!(self.settings.base_url));
        fields.insert("steps".into(), json!(report.steps));
        fields.insert("calls".into(), json!(report.calls));
        fields.insert("tokens".into(), json!(report.tokens));
        fields.insert("ending".into(), json!(report.ending.label()));
        fields.insert(
            "turns".into(),
            report
                .turns
                .iter()
                .map(|(calls, tokens)| json!({"calls": calls, "tokens": tokens}))
                .collect(),
        );
        if let Some(message) = report.ending.message() {
            fields.insert("message".into(), json!(message));
        }
        fields.insert("duration_ms".into(), json!(took.as_millis() as u64));
        self.dispatcher.record_agent_run(fields);
    }
}

/// A ready future of `text`, boxed as the calls are.
fn futures_ready(
    text: String,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send>> {
    Box::pin(async move { text })
}

/// Await every future, in order, running them together.
async fn futures_join(
    runs: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send>>>,
) -> Vec<String> {
    let handles: Vec<_> = runs.into_iter().map(tokio::spawn).collect();
    let mut results = Vec::with_capacity(handles.len());
    for handle in handles {
        results.push(
            handle
                .await
                .unwrap_or_else(|_| "Error: the call failed".to_owned()),
        );
    }
    results
}

/// A call's result as the model reads it: structured output as JSON,
/// else the text; an error as `Error: ...`.
fn as_tool_message(result: Result<CallOutput, DispatchError>) -> String {
    let output = match result {
        Ok(output) => output,
        Err(error) => return format!("Error: {error}"),
    };
    let text: Vec<String> = output
        .content
        .iter()
        .map(|c| match c {
            crate::call::Content::Text(text) => text.clone(),
            crate::call::Content::Image { mime_type, data }
            | crate::call::Content::Audio { mime_type, data } => {
                format!("[{mime_type}, {} bytes, not shown]", data.len())
            }
            crate::call::Content::Resource { uri, .. } => format!("[resource {uri}]"),
        })
        .collect();
    if output.is_error {
        return format!("Error: {}", text.join("\n"));
    }
    match output.structured {
        Some(structured) => structured.to_string(),
        None => text.join("\n"),
    }
}

/// A tool call's arguments: a JSON object (empty text is `{}`).
fn parse_arguments(text: &str) -> Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    // Any JSON of this text (a one-entry map takes about 115 times it).
    match crate::json::parse(text, text.len().saturating_mul(128).max(64 * 1024)) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("the arguments are not a JSON object".into()),
        Err(e) => Err(format!("the arguments are not JSON: {e}")),
    }
}

/// A non-streamed reply (`choices[0].message`, `usage`).
fn turn_of_completion(reply: &Value) -> Result<Turn, String> {
    let message = reply
        .pointer("/choices/0/message")
        .ok_or("the model's reply has no `choices[0].message`")?;
    let mut turn = Turn {
        content: message
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        calls: Vec::new(),
        tokens: reply.pointer("/usage/total_tokens").and_then(Value::as_u64),
    };
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or("a tool call has no function name")?;
            turn.calls.push(ToolCall {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                name: name.to_owned(),
                arguments: call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            });
        }
    }
    Ok(turn)
}

/// A streamed reply (server-sent events of `chat.completion.chunk`s),
/// assembled as it arrives.
#[derive(Default)]
struct Stream {
    /// Bytes of a line not ended yet.
    line: Vec<u8>,
    content: String,
    calls: BTreeMap<u64, ToolCall>,
    tokens: Option<u64>,
    done: bool,
    chunks: u64,
}

impl Stream {
    /// Take `bytes` of the stream; text to show goes to `text_out`.
    fn feed(&mut self, bytes: &[u8], text_out: &mut Vec<u8>) -> Result<(), String> {
        for &byte in bytes {
            if byte == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.line_done(&line, text_out)?;
            } else {
                self.line.push(byte);
            }
        }
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], text_out: &mut Vec<u8>) -> Result<(), String> {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches('\r');
        let Some(data) = line.strip_prefix("data:") else {
            // Comments, `event:` and blank lines carry nothing here.
            return Ok(());
        };
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| format!("the model's reply has a chunk that is not JSON ({e})"))?;
        self.chunks += 1;
        if let Some(message) = chunk.pointer("/error/message").and_then(Value::as_str) {
            return Err(format!(
                "the model reported an error: {}",
                crate::outbound::printable(message, 300)
            ));
        }
        if let Some(tokens) = chunk.pointer("/usage/total_tokens").and_then(Value::as_u64) {
            self.tokens = Some(tokens);
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Err("the model's reply has a chunk without `choices`".into());
        };
        for choice in choices {
            let Some(delta) = choice.get("delta") else {
                continue;
            };
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                self.content.push_str(text);
                text_out.extend_from_slice(for_terminal(text).as_bytes());
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for call in calls {
                    let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                    if index >= MAX_CALLS_PER_TURN as u64 * 4 {
                        return Err("the model's reply has a tool call index out of range".into());
                    }
                    let entry = self.calls.entry(index).or_default();
                    if let Some(id) = call.get("id").and_then(Value::as_str) {
                        entry.id = id.to_owned();
                    }
                    if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                        entry.name.push_str(name);
                    }
                    if let Some(arguments) =
                        call.pointer("/function/arguments").and_then(Value::as_str)
                    {
                        entry.arguments.push_str(arguments);
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Turn, String> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, &mut Vec::new())?;
        }
        if self.chunks == 0 {
            return Err("the model's reply holds no completion".into());
        }
        if !self.done {
            return Err("the model's reply ended before `[DONE]`".into());
        }
        if let Some(call) = self.calls.values().find(|c| c.name.is_empty()) {
            return Err(format!(
                "the model's reply has a tool call without a name (id `{}`)",
                call.id
            ));
        }
        // A call the model gave no id is answered under one of its own.
        for (index, call) in &mut self.calls {
            if call.id.is_empty() {
                call.id = format!("call_{index}");
            }
        }
        Ok(Turn {
            content: self.content,
            calls: self.calls.into_values().collect(),
            tokens: self.tokens,
        })
    }
}

/// A run's id: 64 random bits, hex.
fn run_id() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 8];
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    format!("run-{}", crate::catalog::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_assembles_text_and_parallel_calls() {
        let mut stream = Stream::default();
        let mut out = Vec::new();
        let chunks = [
            r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "}}]}"#,
            r#"data: {"choices":[{"index":0,"delta":{"content":"check."}}]}"#,
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"get_weather","arguments":"{\"ci"}}]}}]}"#,
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"get_current_time","arguments":"{}"}}]}}]}"#,
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Malé\"}"}}]}}]}"#,
            r#"data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#,
            "data: [DONE]",
        ];
        let text = chunks
            .iter()
            .map(|c| format!("{c}\n\n"))
            .collect::<String>();
        // In pieces that cut lines and UTF-8 anywhere.
        for piece in text.as_bytes().chunks(7) {
            stream.feed(piece, &mut out).expect("feeds");
        }
        let turn = stream.finish().expect("complete");
        assert_eq!(turn.content, "Let me check.");
        assert_eq!(String::from_utf8(out).expect("utf8"), "Let me check.");
        assert_eq!(turn.tokens, Some(15));
        assert_eq!(turn.calls.len(), 2);
        assert_eq!(turn.calls[0].arguments, "{\"city\":\"Malé\"}");
        assert_eq!(turn.calls[1].name, "get_current_time");
    }

    #[test]
    fn terminal_text_loses_escapes_and_bidi_overrides() {
        assert_eq!(
            for_terminal("ok\x1b[2J\u{202E}txt.exe\u{202C}\tdone\r\n"),
            "ok[2Jtxt.exe\tdone\n"
        );
    }

    #[test]
    fn malformed_streams_are_errors() {
        for text in [
            "data: not json\n\n",
            "data: {\"no\":\"choices\"}\n\n",
            "data: {\"choices\":[]}\n\n",
            "",
            "data: {\"error\":{\"message\":\"overloaded\"}}\n\n",
        ] {
            let mut stream = Stream::default();
            let fed = stream.feed(text.as_bytes(), &mut Vec::new());
            assert!(fed.is_err() || stream.finish().is_err(), "{text:?}");
        }
    }
}
