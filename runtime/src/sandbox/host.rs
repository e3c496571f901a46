//! The `toolcage:tool/host` imports: what a running guest may ask of the
//! host beyond WASI (log, progress, elicitation, sampling).
//!
//! Invariants:
//! - Every request is checked against its cap before the host does work on
//!   it, and the cheapest refusal comes first: whether the client can be
//!   asked at all, then sizes, then parsing.
//! - Nothing here blocks: events go to a sink that must not block, and
//!   questions to the client are awaited, under the call's deadline.

use super::contract::bindings;
use super::contract::wit_host::{self, Level as WitLevel};
use super::store::HostState;
use super::{
    MAX_LOG_MESSAGE_BYTES, MAX_LOG_MESSAGES, MAX_PROGRESS_EVENTS, MAX_PROGRESS_MESSAGE_BYTES,
};
use crate::call::{Ask, ElicitAnswer, GuestEvent, LogLevel, SampleRequest, ServiceError};
use crate::json;
use crate::redact::Scrub;

impl bindings::toolcage::tool::types::Host for HostState {}

impl bindings::toolcage::tool::host::Host for HostState {
    fn log(&mut self, level: WitLevel, message: String) {
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
        let level = LogLevel::from(level);
        if tracing::enabled!(tracing::Level::DEBUG) {
            let scrub = Scrub::new(self.grants.secrets.iter().map(String::as_str));
            tracing::debug!(?level, message = %scrub.text(&message, MAX_LOG_MESSAGE_BYTES), "guest log");
        }
        if let Some(events) = &self.events {
            events(GuestEvent::Log { level, message });
        }
    }

    async fn elicit(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> wasmtime::Result<Result<wit_host::ElicitResponse, String>> {
        self.touch();
        let Some(services) = self.grants.services.client.clone() else {
            return Ok(Err("elicitation is not available here (no client)".into()));
        };
        // Whether the client can be asked at all comes first, before the
        // host spends anything on the request.
        if let Err(reason) = services.can(Ask::Elicit) {
            return Ok(Err(reason));
        }
        let schema = match check_elicitation(&message, &requested_schema) {
            Ok(schema) => schema,
            Err(reason) => return Ok(Err(reason)),
        };
        match services.elicit(message, schema).await {
            Ok(ElicitAnswer::Accept(values)) => {
                Ok(Ok(wit_host::ElicitResponse::Accept(values.to_string())))
            }
            Ok(ElicitAnswer::Decline) => Ok(Ok(wit_host::ElicitResponse::Decline)),
            Ok(ElicitAnswer::Cancel) => Ok(Ok(wit_host::ElicitResponse::Cancel)),
            Err(ServiceError::Refused(reason)) => Ok(Err(reason)),
            Err(ServiceError::InputRequired(pending)) => Err(wasmtime::Error::new(pending)),
        }
    }

    async fn sample(
        &mut self,
        request: wit_host::SamplingRequest,
    ) -> wasmtime::Result<Result<wit_host::SamplingResponse, String>> {
        self.touch();
        if !self.grants.services.sampling {
            return Ok(Err(
                "this tool may not sample: it spends the user's tokens, and the operator \
                 has not allowed it (`allow_sampling = true` in the tool's config)"
                    .into(),
            ));
        }
        let Some(services) = self.grants.services.client.clone() else {
            return Ok(Err("sampling is not available here (no client)".into()));
        };
        if let Err(reason) = services.can(Ask::Sample) {
            return Ok(Err(reason));
        }
        if let Err(reason) = check_sampling(&request) {
            return Ok(Err(reason));
        }
        let request = SampleRequest {
            messages: request
                .messages
                .into_iter()
                .map(|m| {
                    let role = match m.role {
                        wit_host::Role::User => "user",
                        wit_host::Role::Assistant => "assistant",
                    };
                    (role.to_owned(), m.text)
                })
                .collect(),
            system_prompt: request.system_prompt,
            max_tokens: request.max_tokens,
            temperature: request.temperature,
        };
        match services.sample(request).await {
            Ok(answer) => Ok(Ok(wit_host::SamplingResponse {
                text: answer.text,
                model: answer.model,
                stop_reason: answer.stop_reason,
            })),
            Err(ServiceError::Refused(reason)) => Ok(Err(reason)),
            Err(ServiceError::InputRequired(pending)) => Err(wasmtime::Error::new(pending)),
        }
    }

    fn progress(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
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
    let schema = json::parse(schema, MAX_ELICIT_SCHEMA_BYTES * 4)
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
fn check_sampling(request: &wit_host::SamplingRequest) -> Result<(), String> {
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
