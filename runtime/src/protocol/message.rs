//! A client's JSON-RPC message, parsed into rmcp's types without rmcp's
//! detour for the message that matters most.
//!
//! rmcp parses a `ClientJsonRpcMessage` through two untagged layers: the
//! message (request, response, notification, error) buffered and checked
//! for its shape, and then `ClientRequest`, which tries each of its twenty-
//! odd request types in turn, each failure building an error with its text.
//! For a `tools/call`, the fourteenth, that was about a tenth of the
//! server's time per call over HTTP (`docs/benchmarks.md`, "Round four").
//!
//! [`client_message`] reads the message once as a `tools/call` request:
//! its top-level keys as rmcp's shape check sees them, and its `params`
//! as rmcp's `Request` splits them, straight into `CallToolRequest`'s
//! fields. rmcp's own types would read the same entries through two
//! flattened layers that buffer each one first (round six). Anything else,
//! and any such request that does not parse, goes through rmcp's own parse
//! unchanged, so every error and every other message is rmcp's.
//!
//! Invariant: when the direct parse succeeds, rmcp's parse gives the same
//! message. rmcp takes the same shape (`method` and `id`, neither `result`
//! nor `error`), and of `ClientRequest`'s variants every one before
//! `CallToolRequest` has a method of its own, fixed, so the first that can
//! take a `tools/call` is `CallToolRequest`, whose fields are read here by
//! the same types (`RequestId`, `JsonObject`, `InputResponses`; `jsonrpc`
//! held to the one value rmcp's `JsonRpcVersion2_0` takes), `_meta` going
//! where rmcp's `Request` puts it. A
//! table of cases and generated mutations of a call, in the tests, hold
//! the two parses to the same answers, malformed and ambiguous messages
//! included, so an rmcp release that changed either reasoning (a new
//! request type that takes `tools/call`, another shape check) fails them.

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, InputResponses,
    JsonObject, JsonRpcRequest, JsonRpcVersion2_0, MetaObject, RequestId, RequestMetaObject,
};
use serde::Deserialize;

/// The method parsed directly.
const TOOLS_CALL: &str = "tools/call";

/// `text` as a client's message, exactly as rmcp parses it.
///
/// # Errors
///
/// rmcp's own error for text that is not a message it accepts.
pub fn client_message(text: &[u8]) -> serde_json::Result<ClientJsonRpcMessage> {
    if let Ok(call) = serde_json::from_slice::<Call<'_>>(text)
        && let Some(request) = call.into_request()
    {
        return Ok(ClientJsonRpcMessage::Request(request));
    }
    serde_json::from_slice(text)
}

/// A `tools/call` request as rmcp reads one, in one pass over the text:
/// rmcp's own types read it through two flattened layers (`JsonRpcRequest`
/// and `Request`'s `params` with its `_meta`), each buffering every entry
/// as serde's `Content` first, a few allocations per key. Text this does
/// not read (a repeated key, a method that is not a string, a missing
/// `params`) goes to rmcp's parse, which is never wrong, only slower.
///
/// The keys are rmcp's: `jsonrpc` and `id` read by rmcp's own types, the
/// shape keys (`result`, `error`) that make rmcp take the message for a
/// response, and `params` as `Request`'s deserialiser splits it (`_meta`
/// to the request's extensions, the rest to `CallToolRequestParams`,
/// whose own `_meta` that split leaves empty).
#[derive(Deserialize)]
struct Call<'a> {
    /// Read in place, where rmcp's type reads it into a `String` first.
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: CallParams<'a>,
    #[serde(default)]
    result: Present,
    #[serde(default)]
    error: Present,
}

/// `CallToolRequestParams`' fields, with `_meta` kept for the extensions.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallParams<'a> {
    #[serde(rename = "_meta", default)]
    meta: Option<JsonObject>,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default)]
    arguments: Option<JsonObject>,
    #[serde(default)]
    input_responses: Option<InputResponses>,
    #[serde(default)]
    request_state: Option<String>,
}

impl Call<'_> {
    /// The request rmcp would make of this text, if it is a `tools/call`
    /// request by rmcp's shape (`method` and `id`, neither `result` nor
    /// `error`): of `ClientRequest`'s variants, every one before
    /// `CallToolRequest` has a method of its own, fixed, so the first that
    /// can take a `tools/call` is `CallToolRequest`.
    fn into_request(self) -> Option<JsonRpcRequest<ClientRequest>> {
        if self.jsonrpc != "2.0" || self.method != TOOLS_CALL || self.result.0 || self.error.0 {
            return None;
        }
        let CallParams {
            meta,
            name,
            arguments,
            input_responses,
            request_state,
        } = self.params;
        let mut params = CallToolRequestParams::new(name.into_owned());
        params.arguments = arguments;
        params.input_responses = input_responses;
        params.request_state = request_state;
        let mut request = CallToolRequest::new(params);
        if let Some(meta) = meta {
            request
                .extensions
                .insert(RequestMetaObject(MetaObject(meta)));
        }
        Some(JsonRpcRequest {
            jsonrpc: JsonRpcVersion2_0,
            id: self.id,
            request: ClientRequest::CallToolRequest(request),
        })
    }
}

/// Whether a key is there, whatever its value: rmcp counts `"result":
/// null` as a `result`, where an `Option` would read it as absent.
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer).map(|_| Present(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rmcp's parse, for comparison.
    fn rmcp_parse(text: &str) -> serde_json::Result<ClientJsonRpcMessage> {
        serde_json::from_str(text)
    }

    /// The two parses agree: the same message (compared as rmcp writes it
    /// back, `_meta` included, and by its debug form) or both an error
    /// with the same text.
    fn agree(text: &str) {
        match (client_message(text.as_bytes()), rmcp_parse(text)) {
            (Ok(ours), Ok(theirs)) => {
                assert_eq!(
                    serde_json::to_value(&ours).expect("serialises"),
                    serde_json::to_value(&theirs).expect("serialises"),
                    "{text}"
                );
                assert_eq!(format!("{ours:?}"), format!("{theirs:?}"), "{text}");
            }
            (Err(ours), Err(theirs)) => assert_eq!(ours.to_string(), theirs.to_string(), "{text}"),
            (ours, theirs) => panic!("{text}: ours {ours:?}, rmcp's {theirs:?}"),
        }
    }

    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{},"progressToken":7}"#;

    #[test]
    fn both_parses_agree_on_every_kind_of_message() {
        let cases = [
            // Plain calls, with and without `_meta`, arguments, ids of each kind.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"t","arguments":{}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"b":[1,2]}},{META}}}}}"#),
            format!(r#"{{"method":"tools/call","params":{{{META},"name":"t"}},"id":9,"jsonrpc":"2.0"}}"#),
            // Escapes in the method and the keys.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","i\u0064":1,"m\u0065thod":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2\u002e0","id":1,"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0 ","id":1,"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":2.0,"id":1,"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            // Extra keys at every level.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","extra":true},"more":[1]}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{"ttl":5}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":{"k":{"action":"accept"}},"requestState":"s"}}"#.to_owned(),
            // Not a request: the shape keys.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"result":{}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"error":{"code":1,"message":"m"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"result":null}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"error":null}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"},"result":null}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":null,"params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
            // Malformed calls: rmcp's catch-all or its error, not ours.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":7}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}"#.to_owned(),
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"id":1,"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            // Repeated keys.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"params":{"name":"u"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","name":"u"}}"#.to_owned(),
            // Methods that are not a call, and ones that are not text.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call2","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"Tools/Call","params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":7,"params":{"name":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":["tools/call"],"params":{"name":"t"}}"#.to_owned(),
            // Not objects, not JSON.
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}]"#.to_owned(),
            r#""tools/call""#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}} trailing"#.to_owned(),
            String::new(),
        ];
        for case in &cases {
            agree(case);
        }
    }

    #[test]
    fn both_parses_agree_on_mutated_calls() {
        // Calls with one piece cut, repeated or swapped for another piece of
        // JSON, at every position a simple generator picks: the table above
        // names the cases thought of, this finds the ones not thought of.
        let base = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"t","arguments":{{"a":[1,"x",null],"b":{{"c":true}}}},{META}}}}}"#
        );
        let pieces = [
            "",
            "\"",
            ",",
            ":",
            "{",
            "}",
            "[",
            "]",
            "null",
            "1",
            "-1.5e3",
            "\"tools/call\"",
            "\"method\":\"ping\"",
            "\"id\":2",
            "\"result\":{}",
            "\"error\":{}",
            "\"params\":{}",
            "\"_meta\":{}",
            "\"name\":\"u\"",
            "\"\\u0000\"",
            // Whole entries, for just inside an object.
            "\"result\":{},",
            "\"error\":{\"code\":1,\"message\":\"m\"},",
            "\"method\":\"ping\",",
            "\"method\":\"tools/call\",",
            "\"id\":\"x\",",
            "\"jsonrpc\":\"2.0\",",
            "\"x\":[],",
            "\"result\":null,",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            usize::try_from(state % bound as u64).expect("fits")
        };
        let (mut calls, mut others, mut errors) = (0, 0, 0);
        for _ in 0..3000 {
            let mut text = base.clone();
            for _ in 0..=next(2) {
                // Anywhere, or just inside an object.
                let at = if next(2) == 0 {
                    (0..=text.len())
                        .filter(|&i| text.is_char_boundary(i))
                        .nth(next(text.len() + 1))
                        .unwrap_or(text.len())
                } else {
                    let opens: Vec<usize> = text.match_indices('{').map(|(i, _)| i + 1).collect();
                    opens.get(next(opens.len().max(1))).copied().unwrap_or(0)
                };
                let end = (at..=text.len())
                    .filter(|&i| text.is_char_boundary(i))
                    .nth(next(4))
                    .unwrap_or(text.len());
                let piece = match next(3) {
                    0 => String::new(),
                    1 => text[at..end].to_owned(),
                    _ => pieces[next(pieces.len())].to_owned(),
                };
                let kept = if next(2) == 0 { end } else { at };
                text = format!("{}{}{}", &text[..at], piece, &text[kept..]);
            }
            agree(&text);
            match client_message(text.as_bytes()) {
                Ok(ClientJsonRpcMessage::Request(JsonRpcRequest {
                    request: ClientRequest::CallToolRequest(_),
                    ..
                })) => calls += 1,
                Ok(_) => others += 1,
                Err(_) => errors += 1,
            }
        }
        // The generator reaches all three outcomes, not only errors.
        assert!(
            calls > 300 && others > 10 && errors > 300,
            "{calls} {others} {errors}"
        );
    }

    #[test]
    fn a_call_is_parsed_directly() {
        // The fast path is taken, not only agreed with: calls of every
        // form the table above parses as calls come out of it.
        let texts = [
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t",{META}}}}}"#
            ),
            r#"{"jsonrpc":"2.0","id":"x","method":"tools\/call","params":{"name":"t","arguments":{"a":[1]},"inputResponses":{"k":{"action":"accept"}},"requestState":"s","extra":1}}"#.to_owned(),
        ];
        for text in &texts {
            let call = serde_json::from_str::<Call<'_>>(text).expect("parses as a call");
            let Some(JsonRpcRequest {
                request: ClientRequest::CallToolRequest(request),
                ..
            }) = call.into_request()
            else {
                panic!("not taken as a call: {text}");
            };
            assert_eq!(request.params.name, "t");
            agree(text);
        }
        let with_meta = serde_json::from_str::<Call<'_>>(&texts[0])
            .ok()
            .and_then(Call::into_request)
            .expect("a call");
        let ClientRequest::CallToolRequest(request) = with_meta.request else {
            panic!("not a call");
        };
        assert!(request.extensions.get::<RequestMetaObject>().is_some());
        assert!(request.params.meta.is_none());
    }
}
