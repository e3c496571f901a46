//! Elicitation and sampling for tools, in both protocol eras.
//!
//! - 2025-06-18/2025-11-25: [`PeerServices`] sends `elicitation/create` or
//!   `sampling/createMessage` to the client and waits for the answer while
//!   the guest is blocked in its host call.
//! - 2026-07-28 (stateless, no server-to-client requests): [`ReplayServices`]
//!   answers from what the client already said. A question without an
//!   answer stops the call; the protocol layer returns an input-required
//!   result carrying the question and a signed `requestState`; the client
//!   retries with the answer and the call runs again from the start, this
//!   time getting it. Questions are keyed by kind and order (`elicit-0`,
//!   `sample-0`, ...), which is why tools must ask before they act.
//!
//! The `requestState` handed to the client holds every answer so far, the
//! tool name and a digest of the arguments, MACed with a per-process key
//! (HMAC-SHA256): a client cannot forge answers, move them to another tool
//! or other arguments, or replay them against another server process.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use rmcp::model::{ClientResult, ServerRequest};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::call::{
    Ask, ClientServices, ElicitAnswer, PendingAsk, PendingInput, SampleAnswer, SampleRequest,
    ServiceError, ServiceFuture,
};

/// How long to wait for the user or the client's model.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// What the client said it can do.
#[derive(Debug, Clone, Copy, Default)]
pub struct Capabilities {
    /// It declared `elicitation`.
    pub elicit: bool,
    /// It declared `sampling`.
    pub sample: bool,
}

impl Capabilities {
    /// `Err` (the message for the guest) unless the client declared `ask`.
    fn can(self, ask: Ask) -> Result<(), String> {
        match ask {
            Ask::Elicit if !self.elicit => Err(cannot_text("elicitation")),
            Ask::Sample if !self.sample => Err(cannot_text("sampling")),
            _ => Ok(()),
        }
    }
}

fn cannot_text(what: &str) -> String {
    format!("the client does not support {what}; ask the user in the tool's result instead")
}

fn cannot(what: &str) -> ServiceError {
    ServiceError::Refused(cannot_text(what))
}

/// The wire JSON of an `elicitation/create` request.
pub fn elicit_request(message: &str, schema: &Value) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    })
}

/// The wire JSON of a `sampling/createMessage` request.
pub fn sample_request(request: &SampleRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|(role, text)| json!({"role": role, "content": {"type": "text", "text": text}}))
        .collect();
    let mut params = json!({"messages": messages, "maxTokens": request.max_tokens});
    if let Some(system) = &request.system_prompt {
        params["systemPrompt"] = json!(system);
    }
    if let Some(temperature) = request.temperature {
        params["temperature"] = json!(temperature);
    }
    json!({"method": "sampling/createMessage", "params": params})
}

/// Read an `ElicitResult`.
pub fn parse_elicit_result(value: &Value) -> Result<ElicitAnswer, ServiceError> {
    match value.get("action").and_then(Value::as_str) {
        Some("accept") => Ok(ElicitAnswer::Accept(
            value.get("content").cloned().unwrap_or_else(|| json!({})),
        )),
        Some("decline") => Ok(ElicitAnswer::Decline),
        Some("cancel") => Ok(ElicitAnswer::Cancel),
        _ => Err(ServiceError::Refused(format!(
            "the client's elicitation answer is malformed: {value}"
        ))),
    }
}

/// Read a `CreateMessageResult`.
pub fn parse_sample_result(value: &Value) -> Result<SampleAnswer, ServiceError> {
    let content = value.get("content");
    let text = content
        .and_then(|c| c.get("text"))
        .or_else(|| content.and_then(|c| c.get(0)).and_then(|c| c.get("text")))
        .and_then(Value::as_str);
    let Some(text) = text else {
        return Err(ServiceError::Refused(format!(
            "the client's sampling answer has no text: {value}"
        )));
    };
    Ok(SampleAnswer {
        text: text.to_owned(),
        model: value
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        stop_reason: value
            .get("stopReason")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// Initialize-era services: real requests to the client.
pub struct PeerServices {
    /// The connection.
    pub peer: Peer<RoleServer>,
    /// What it can do.
    pub capabilities: Capabilities,
}

impl PeerServices {
    async fn ask(peer: Peer<RoleServer>, request: Value) -> Result<Value, ServiceError> {
        let request: ServerRequest = serde_json::from_value(request)
            .map_err(|error| ServiceError::Refused(format!("malformed request: {error}")))?;
        match tokio::time::timeout(ASK_TIMEOUT, peer.send_request(request)).await {
            Err(_) => Err(ServiceError::Refused(
                "the client did not answer in time".into(),
            )),
            Ok(Err(error)) => Err(ServiceError::Refused(format!(
                "the client refused: {error}"
            ))),
            Ok(Ok(result)) => {
                let result: ClientResult = result;
                serde_json::to_value(&result)
                    .map_err(|error| ServiceError::Refused(format!("unreadable answer: {error}")))
            }
        }
    }
}

impl ClientServices for PeerServices {
    fn can(&self, ask: Ask) -> Result<(), String> {
        self.capabilities.can(ask)
    }

    fn elicit(&self, message: String, schema: Value) -> ServiceFuture<ElicitAnswer> {
        let peer = self.peer.clone();
        let capable = self.capabilities.elicit;
        Box::pin(async move {
            if !capable {
                return Err(cannot("elicitation"));
            }
            let answer = PeerServices::ask(peer, elicit_request(&message, &schema)).await?;
            parse_elicit_result(&answer)
        })
    }

    fn sample(&self, request: SampleRequest) -> ServiceFuture<SampleAnswer> {
        let peer = self.peer.clone();
        let capable = self.capabilities.sample;
        Box::pin(async move {
            if !capable {
                return Err(cannot("sampling"));
            }
            let answer = PeerServices::ask(peer, sample_request(&request)).await?;
            parse_sample_result(&answer)
        })
    }
}

/// 2026-07-28 services: answers from the retried request, or stop and ask.
pub struct ReplayServices {
    answers: BTreeMap<String, Value>,
    capabilities: Capabilities,
    asked: Mutex<(u32, u32)>,
}

impl ReplayServices {
    /// Services that know `answers`.
    pub fn new(answers: BTreeMap<String, Value>, capabilities: Capabilities) -> Self {
        ReplayServices {
            answers,
            capabilities,
            asked: Mutex::new((0, 0)),
        }
    }

    fn next_key(&self, elicit: bool) -> String {
        let mut asked = match self.asked.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if elicit {
            asked.0 += 1;
            format!("elicit-{}", asked.0 - 1)
        } else {
            asked.1 += 1;
            format!("sample-{}", asked.1 - 1)
        }
    }
}

impl ReplayServices {
    /// The answer already given to question `key`, or stop to ask it.
    fn elicit_keyed(
        &self,
        key: String,
        message: String,
        schema: Value,
    ) -> ServiceFuture<ElicitAnswer> {
        let outcome = if !self.capabilities.elicit {
            Err(cannot("elicitation"))
        } else {
            match self.answers.get(&key) {
                Some(answer) => parse_elicit_result(answer),
                None => Err(ServiceError::InputRequired(PendingInput {
                    key,
                    ask: PendingAsk::Elicit { message, schema },
                })),
            }
        };
        Box::pin(async move { outcome })
    }
}

impl ClientServices for ReplayServices {
    fn can(&self, ask: Ask) -> Result<(), String> {
        self.capabilities.can(ask)
    }

    fn elicit(&self, message: String, schema: Value) -> ServiceFuture<ElicitAnswer> {
        let key = self.next_key(true);
        self.elicit_keyed(key, message, schema)
    }

    fn confirm(&self, message: String, schema: Value) -> ServiceFuture<ElicitAnswer> {
        // Its own key, so the guest's questions keep theirs.
        self.elicit_keyed(crate::dispatch::CONFIRM_KEY.to_owned(), message, schema)
    }

    fn sample(&self, request: SampleRequest) -> ServiceFuture<SampleAnswer> {
        let key = self.next_key(false);
        let outcome = if !self.capabilities.sample {
            Err(cannot("sampling"))
        } else {
            match self.answers.get(&key) {
                Some(answer) => parse_sample_result(answer),
                None => Err(ServiceError::InputRequired(PendingInput {
                    key,
                    ask: PendingAsk::Sample(request),
                })),
            }
        };
        Box::pin(async move { outcome })
    }
}

/// Convenience: the services for a call, as a trait object.
pub fn shared(services: impl ClientServices + 'static) -> Arc<dyn ClientServices> {
    Arc::new(services)
}

/// The per-process key that signs request state.
fn state_key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        use std::io::Read as _;
        let mut key = [0u8; 32];
        // /dev/urandom never blocks and is always there on Linux; if it were
        // not, a time-and-pid key still changes per process.
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut key));
        if read.is_err() {
            let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
            key.copy_from_slice(&Sha256::digest(seed.as_bytes()));
        }
        key
    })
}

fn mac(key: &[u8; 32]) -> Hmac<Sha256> {
    // HMAC takes a key of any length, so this never fails.
    match <Hmac<Sha256> as Mac>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    }
}

/// The bytes of lowercase or uppercase hex `text`, if it is hex.
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A digest of a call's caller (its [`crate::auth::Caller::key`], if it
/// has an identity), tool and arguments, binding state to all three: state
/// handed out to one caller is refused when another presents it.
pub fn call_digest(caller: Option<&str>, tool: &str, arguments: &Value) -> String {
    let mut hasher = Sha256::new();
    // Length-prefixed, so no caller key and tool name can run into each other.
    let caller = caller.unwrap_or("");
    hasher.update((caller.len() as u64).to_be_bytes());
    hasher.update(caller.as_bytes());
    hasher.update(tool.as_bytes());
    hasher.update([0]);
    hasher.update(arguments.to_string().as_bytes());
    crate::catalog::hex(&hasher.finalize())
}

/// Sign the answers gathered for the call identified by `digest`.
pub fn sign_state(digest: &str, answers: &BTreeMap<String, Value>) -> String {
    let body = json!({"call": digest, "answers": answers}).to_string();
    let mut tag = mac(state_key());
    tag.update(body.as_bytes());
    format!(
        "{}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(body),
        crate::catalog::hex(&tag.finalize().into_bytes())
    )
}

/// Check state handed back by a client and return its answers.
///
/// # Errors
///
/// The state is malformed, forged, or belongs to another call.
pub fn verify_state(state: &str, digest: &str) -> Result<BTreeMap<String, Value>, String> {
    let (body, mac) = state.split_once('.').ok_or("`requestState` is malformed")?;
    let body = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| "`requestState` is malformed")?;
    let presented = decode_hex(mac).ok_or("`requestState` is malformed")?;
    let mut tag = self::mac(state_key());
    tag.update(&body);
    // `verify_slice` compares in constant time.
    if tag.verify_slice(&presented).is_err() {
        return Err("`requestState` was not issued by this server (or was altered)".into());
    }
    let body: Value = serde_json::from_slice(&body).map_err(|_| "`requestState` is malformed")?;
    if body.get("call").and_then(Value::as_str) != Some(digest) {
        return Err(
            "`requestState` belongs to another tool call (tool or arguments differ)".into(),
        );
    }
    let answers = body
        .get("answers")
        .and_then(Value::as_object)
        .map(|map| map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_resists_tampering() {
        let digest = call_digest(None, "t", &json!({"a": 1}));
        let answers = BTreeMap::from([("elicit-0".to_owned(), json!({"action": "accept"}))]);
        let state = sign_state(&digest, &answers);
        assert_eq!(verify_state(&state, &digest).expect("valid"), answers);
        let other = call_digest(None, "t", &json!({"a": 2}));
        assert!(
            verify_state(&state, &other)
                .expect_err("other call")
                .contains("another")
        );
        let other_caller = call_digest(Some("[\"https://as\",\"b\",null]"), "t", &json!({"a": 1}));
        assert!(
            verify_state(&state, &other_caller).is_err(),
            "another caller"
        );
        let (body, mac) = state.split_once('.').expect("dot");
        let forged_body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
            json!({"call": digest, "answers": {"elicit-0": {"action": "decline"}}}).to_string(),
        );
        assert!(verify_state(&format!("{forged_body}.{mac}"), &digest).is_err());
        assert!(verify_state(&format!("{body}.00"), &digest).is_err());
        assert!(verify_state("garbage", &digest).is_err());
    }

    #[test]
    fn replay_keys_are_stable_and_answers_are_used() {
        let answers = BTreeMap::from([("elicit-0".to_owned(), json!({"action": "decline"}))]);
        let services = ReplayServices::new(
            answers,
            Capabilities {
                elicit: true,
                sample: true,
            },
        );
        let first = futures_lite(services.elicit("a".into(), json!({})));
        assert_eq!(first, Ok(ElicitAnswer::Decline));
        match futures_lite(services.elicit("b".into(), json!({}))) {
            Err(ServiceError::InputRequired(pending)) => assert_eq!(pending.key, "elicit-1"),
            other => panic!("expected input required, got {other:?}"),
        }
        let refused = ReplayServices::new(BTreeMap::new(), Capabilities::default());
        assert!(matches!(
            futures_lite(refused.sample(SampleRequest {
                messages: vec![],
                system_prompt: None,
                max_tokens: 1,
                temperature: None
            })),
            Err(ServiceError::Refused(_))
        ));
    }

    /// Run a ready future (these never wait).
    fn futures_lite<T>(future: ServiceFuture<T>) -> Result<T, ServiceError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(future)
    }
}
