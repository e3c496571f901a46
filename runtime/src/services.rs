//! Elicitation, sampling and roots for tools, in both protocol eras.
//!
//! - 2025-06-18/2025-11-25: [`PeerServices`] sends `elicitation/create`,
//!   `sampling/createMessage` or `roots/list` to the client and waits for
//!   the answer while the guest is blocked in its host call; a batch is
//!   asked one question after another.
//! - 2026-07-28 (stateless, no server-to-client requests): [`ReplayServices`]
//!   answers from what the client already said. Questions without an
//!   answer stop the call (all of a batch's at once); the protocol layer
//!   returns an input-required result carrying them and a signed
//!   `requestState`; the client retries with the answers and the call runs
//!   again from the start, this time getting them. Questions are keyed by
//!   the guest (`ask`) or by kind and order (`elicit-0`, `sample-0`,
//!   `roots-0`, ...), which is why tools must ask before they act.
//!
//! The `requestState` handed to the client holds every answer so far, the
//! tool name and a digest of the arguments, MACed (HMAC-SHA256) with the
//! operator's keys (`server.state_key_file`: shared by the replicas of a
//! fleet, so a retry may land on any of them; the first key signs, every
//! one checks) or, without them, a random key per process: a client cannot
//! forge answers, move them to another tool or other arguments, or replay
//! them against a server that does not share the key.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use rmcp::model::{ClientResult, ServerRequest};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::call::{
    Answer, Ask, ClientRoot, ClientServices, ElicitAnswer, PendingInput, Question, SampleAnswer,
    SampleRequest, ServiceError, ServiceFuture,
};
use crate::config::StateKeys;

/// How long to wait for the user or the client's model.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Most roots read from a client's answer; the rest are ignored.
const MAX_CLIENT_ROOTS: usize = 1024;

/// What the client said it can do.
#[derive(Debug, Clone, Copy, Default)]
pub struct Capabilities {
    /// It declared `elicitation`.
    pub elicit: bool,
    /// It declared `sampling`.
    pub sample: bool,
    /// It declared `roots`.
    pub roots: bool,
}

impl Capabilities {
    /// `Err` (the message for the guest) unless the client declared `ask`.
    pub fn can(self, ask: Ask) -> Result<(), String> {
        match ask {
            Ask::Elicit if !self.elicit => Err(cannot_text("elicitation")),
            Ask::Sample if !self.sample => Err(cannot_text("sampling")),
            Ask::Roots if !self.roots => Err(
                "the client does not share its roots (it does not declare the `roots` capability)"
                    .into(),
            ),
            _ => Ok(()),
        }
    }
}

fn cannot_text(what: &str) -> String {
    format!("the client does not support {what}; ask the user in the tool's result instead")
}

/// The wire JSON of the request that asks `question`.
pub fn question_request(question: &Question) -> Value {
    match question {
        Question::Elicit { message, schema } => json!({
            "method": "elicitation/create",
            "params": {"mode": "form", "message": message, "requestedSchema": schema},
        }),
        Question::Sample(request) => sample_request(request),
        Question::Roots => json!({"method": "roots/list", "params": {}}),
    }
}

/// The wire JSON of a `sampling/createMessage` request.
fn sample_request(request: &SampleRequest) -> Value {
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

/// Read the client's answer `value` to a question of kind `kind`.
///
/// # Errors
///
/// The answer is not of the kind's shape; the message is for the guest.
pub fn parse_answer(kind: Ask, value: &Value) -> Result<Answer, String> {
    match kind {
        Ask::Elicit => parse_elicit_result(value).map(Answer::Elicit),
        Ask::Sample => parse_sample_result(value).map(Answer::Sample),
        Ask::Roots => parse_roots_result(value).map(Answer::Roots),
    }
}

/// A client's answer as an error message quotes it: its first 256 bytes.
fn quoted(value: &Value) -> String {
    crate::redact::truncate(&value.to_string(), 256)
}

/// Read an `ElicitResult`.
fn parse_elicit_result(value: &Value) -> Result<ElicitAnswer, String> {
    match value.get("action").and_then(Value::as_str) {
        Some("accept") => Ok(ElicitAnswer::Accept(
            value.get("content").cloned().unwrap_or_else(|| json!({})),
        )),
        Some("decline") => Ok(ElicitAnswer::Decline),
        Some("cancel") => Ok(ElicitAnswer::Cancel),
        _ => Err(format!(
            "the client's elicitation answer is malformed: {}",
            quoted(value)
        )),
    }
}

/// Read a `CreateMessageResult`.
fn parse_sample_result(value: &Value) -> Result<SampleAnswer, String> {
    let content = value.get("content");
    let text = content
        .and_then(|c| c.get("text"))
        .or_else(|| content.and_then(|c| c.get(0)).and_then(|c| c.get("text")))
        .and_then(Value::as_str);
    let Some(text) = text else {
        return Err(format!(
            "the client's sampling answer has no text: {}",
            quoted(value)
        ));
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

/// Read a `ListRootsResult`: its first [`MAX_CLIENT_ROOTS`] roots that
/// have a URI.
fn parse_roots_result(value: &Value) -> Result<Vec<ClientRoot>, String> {
    let Some(roots) = value.get("roots").and_then(Value::as_array) else {
        return Err(format!(
            "the client's roots answer has no `roots` list: {}",
            quoted(value)
        ));
    };
    Ok(roots
        .iter()
        .filter_map(|root| {
            Some(ClientRoot {
                uri: root.get("uri")?.as_str()?.to_owned(),
                name: root.get("name").and_then(Value::as_str).map(str::to_owned),
            })
        })
        .take(MAX_CLIENT_ROOTS)
        .collect())
}

/// Initialize-era services: real requests to the client.
pub struct PeerServices {
    /// The connection.
    pub peer: Peer<RoleServer>,
    /// What it can do.
    pub capabilities: Capabilities,
}

impl PeerServices {
    async fn request(peer: &Peer<RoleServer>, request: Value) -> Result<Value, String> {
        let request: ServerRequest = serde_json::from_value(request)
            .map_err(|error| format!("malformed request: {error}"))?;
        match tokio::time::timeout(ASK_TIMEOUT, peer.send_request(request)).await {
            Err(_) => Err("the client did not answer in time".into()),
            Ok(Err(error)) => Err(format!("the client refused: {error}")),
            Ok(Ok(result)) => {
                let result: ClientResult = result;
                serde_json::to_value(&result).map_err(|error| format!("unreadable answer: {error}"))
            }
        }
    }
}

impl ClientServices for PeerServices {
    fn can(&self, ask: Ask) -> Result<(), String> {
        self.capabilities.can(ask)
    }

    fn ask(&self, questions: Vec<PendingInput>) -> ServiceFuture<Vec<Result<Answer, String>>> {
        let peer = self.peer.clone();
        let capabilities = self.capabilities;
        Box::pin(async move {
            // One after another: a user answers one form at a time.
            let mut answers = Vec::with_capacity(questions.len());
            for question in questions {
                let kind = question.ask.kind();
                let answer = match capabilities.can(kind) {
                    Err(reason) => Err(reason),
                    Ok(()) => PeerServices::request(&peer, question_request(&question.ask))
                        .await
                        .and_then(|value| parse_answer(kind, &value)),
                };
                answers.push(answer);
            }
            Ok(answers)
        })
    }
}

/// 2026-07-28 services: answers from the retried request, or stop and ask.
pub struct ReplayServices {
    answers: BTreeMap<String, Value>,
    capabilities: Capabilities,
}

impl ReplayServices {
    /// Services that know `answers`.
    pub fn new(answers: BTreeMap<String, Value>, capabilities: Capabilities) -> Self {
        ReplayServices {
            answers,
            capabilities,
        }
    }

    /// The answers known for `questions`, in order, or the questions that
    /// have none yet (those the client can be asked).
    pub fn lookup(
        &self,
        questions: &[PendingInput],
    ) -> Result<Vec<Result<Answer, String>>, Vec<PendingInput>> {
        let mut answers = Vec::with_capacity(questions.len());
        let mut missing = Vec::new();
        for question in questions {
            let kind = question.ask.kind();
            if let Err(reason) = self.capabilities.can(kind) {
                answers.push(Err(reason));
                continue;
            }
            match self.answers.get(&question.key) {
                Some(value) => answers.push(parse_answer(kind, value)),
                None => missing.push(question.clone()),
            }
        }
        if missing.is_empty() {
            Ok(answers)
        } else {
            Err(missing)
        }
    }
}

impl ClientServices for ReplayServices {
    fn can(&self, ask: Ask) -> Result<(), String> {
        self.capabilities.can(ask)
    }

    fn ask(&self, questions: Vec<PendingInput>) -> ServiceFuture<Vec<Result<Answer, String>>> {
        let outcome = self.lookup(&questions).map_err(ServiceError::InputRequired);
        Box::pin(async move { outcome })
    }
}

/// Convenience: the services for a call, as a trait object.
pub fn shared(services: impl ClientServices + 'static) -> Arc<dyn ClientServices> {
    Arc::new(services)
}

/// The key that signs request state, and every key that checks it: the
/// operator's, else this process's own.
fn state_keys(keys: Option<&StateKeys>) -> (&[u8; 32], &[[u8; 32]]) {
    match keys {
        Some(keys) => (keys.signing(), keys.all()),
        None => {
            let own = process_key();
            (own, std::slice::from_ref(own))
        }
    }
}

/// The per-process key that signs request state when the operator gives
/// none.
fn process_key() -> &'static [u8; 32] {
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

/// Sign the answers gathered for the call identified by `digest`, and the
/// keys of the questions it is asking now (`asked`: the only answers the
/// retry may bring), with `keys` (the operator's) or this process's own.
pub fn sign_state<'a>(
    keys: Option<&StateKeys>,
    digest: &str,
    answers: &BTreeMap<String, Value>,
    asked: impl IntoIterator<Item = &'a str>,
) -> String {
    let asked: Vec<&str> = asked.into_iter().collect();
    let body = json!({"call": digest, "answers": answers, "asked": asked}).to_string();
    let mut tag = mac(state_keys(keys).0);
    tag.update(body.as_bytes());
    format!(
        "{}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(body),
        crate::catalog::hex(&tag.finalize().into_bytes())
    )
}

/// What signed state carries back: the answers so far, and the keys of
/// the questions the call asked when it was issued.
#[derive(Debug, Default, PartialEq)]
pub struct VerifiedState {
    /// Answers gathered before.
    pub answers: BTreeMap<String, Value>,
    /// The questions pending when the state was issued.
    pub asked: std::collections::BTreeSet<String>,
}

/// Check state handed back by a client against `keys` (any of them; the
/// operator's, or this process's own) and return what it carries.
///
/// # Errors
///
/// The state is malformed, forged, or belongs to another call.
pub fn verify_state(
    keys: Option<&StateKeys>,
    state: &str,
    digest: &str,
) -> Result<VerifiedState, String> {
    let (body, mac) = state.split_once('.').ok_or("`requestState` is malformed")?;
    let body = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| "`requestState` is malformed")?;
    let presented = decode_hex(mac).ok_or("`requestState` is malformed")?;
    // Every key is tried (at most `StateKeys::MAX`); `verify_slice`
    // compares in constant time.
    let genuine = state_keys(keys).1.iter().any(|key| {
        let mut tag = self::mac(key);
        tag.update(&body);
        tag.verify_slice(&presented).is_ok()
    });
    if !genuine {
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
    let asked = body
        .get("asked")
        .and_then(Value::as_array)
        .map(|keys| {
            keys.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Ok(VerifiedState { answers, asked })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_resists_tampering() {
        let digest = call_digest(None, "t", &json!({"a": 1}));
        let answers = BTreeMap::from([("elicit-0".to_owned(), json!({"action": "accept"}))]);
        let state = sign_state(None, &digest, &answers, ["confirm"]);
        let verified = verify_state(None, &state, &digest).expect("valid");
        assert_eq!(verified.answers, answers);
        assert_eq!(verified.asked, ["confirm".to_owned()].into());
        let other = call_digest(None, "t", &json!({"a": 2}));
        assert!(
            verify_state(None, &state, &other)
                .expect_err("other call")
                .contains("another")
        );
        let other_caller = call_digest(Some("[\"https://as\",\"b\",null]"), "t", &json!({"a": 1}));
        assert!(
            verify_state(None, &state, &other_caller).is_err(),
            "another caller"
        );
        let (body, mac) = state.split_once('.').expect("dot");
        let forged_body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
            json!({"call": digest, "answers": {"elicit-0": {"action": "decline"}}}).to_string(),
        );
        assert!(verify_state(None, &format!("{forged_body}.{mac}"), &digest).is_err());
        assert!(verify_state(None, &format!("{body}.00"), &digest).is_err());
        assert!(verify_state(None, "garbage", &digest).is_err());
    }

    #[test]
    fn shared_keys_sign_with_the_first_and_check_with_any() {
        let old = "11".repeat(32);
        let new = "22".repeat(32);
        let digest = call_digest(None, "t", &json!({}));
        let answers = BTreeMap::from([("k".to_owned(), json!(1))]);
        let before = StateKeys::parse(&old).expect("one key");
        let during = StateKeys::parse(&format!("# rotating\n{new}\n\n{old}\n")).expect("two keys");
        let after = StateKeys::parse(&new).expect("one key");
        let signed_before = sign_state(Some(&before), &digest, &answers, []);
        let signed_during = sign_state(Some(&during), &digest, &answers, []);
        // Another replica with the same keys accepts what one signed.
        assert!(verify_state(Some(&before), &signed_before, &digest).is_ok());
        // During the overlap both old and new states pass; after it, the old fail.
        assert!(verify_state(Some(&during), &signed_before, &digest).is_ok());
        assert!(verify_state(Some(&after), &signed_during, &digest).is_ok());
        assert!(verify_state(Some(&after), &signed_before, &digest).is_err());
        // A process without the keys accepts neither.
        assert!(verify_state(None, &signed_during, &digest).is_err());
        for bad in [
            "",
            "# only a comment",
            "abc",
            &"zz".repeat(32),
            &format!("{old}0"),
        ] {
            assert!(StateKeys::parse(bad).is_err(), "{bad:?}");
        }
        let nine = (0..9)
            .map(|i| format!("{i:0>64}"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            StateKeys::parse(&nine)
                .expect_err("nine keys")
                .contains("more than 8")
        );
        assert_eq!(format!("{during:?}"), "StateKeys(2 keys)");
    }

    #[test]
    fn replay_keys_are_stable_and_answers_are_used() {
        let answers = BTreeMap::from([("elicit-0".to_owned(), json!({"action": "decline"}))]);
        let services = ReplayServices::new(
            answers,
            Capabilities {
                elicit: true,
                sample: true,
                roots: true,
            },
        );
        let elicit = |key: &str| PendingInput {
            key: key.into(),
            ask: Question::Elicit {
                message: "a".into(),
                schema: json!({}),
            },
        };
        let first = futures_lite(services.ask(vec![elicit("elicit-0")]));
        assert_eq!(first, Ok(vec![Ok(Answer::Elicit(ElicitAnswer::Decline))]));
        // A batch stops on every question not answered, not only the first.
        match futures_lite(services.ask(vec![
            elicit("elicit-0"),
            elicit("user_name"),
            PendingInput {
                key: "roots-0".into(),
                ask: Question::Roots,
            },
        ])) {
            Err(ServiceError::InputRequired(pending)) => {
                let keys: Vec<&str> = pending.iter().map(|p| p.key.as_str()).collect();
                assert_eq!(keys, ["user_name", "roots-0"]);
            }
            other => panic!("expected input required, got {other:?}"),
        }
        // A question the client cannot answer gets its own refusal.
        let refused = ReplayServices::new(BTreeMap::new(), Capabilities::default());
        let answers = futures_lite(refused.ask(vec![PendingInput {
            key: "sample-0".into(),
            ask: Question::Sample(SampleRequest {
                messages: vec![],
                system_prompt: None,
                max_tokens: 1,
                temperature: None,
            }),
        }]))
        .expect("answered");
        assert!(matches!(answers.as_slice(), [Err(_)]));
    }

    /// Run a ready future (these never wait).
    fn futures_lite<T>(future: ServiceFuture<T>) -> Result<T, ServiceError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(future)
    }
}
