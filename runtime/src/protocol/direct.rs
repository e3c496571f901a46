//! A self-contained 2026-07-28 `tools/call` over HTTP, answered without
//! rmcp's per-request service.
//!
//! Over HTTP, rmcp serves each stateless request by building a service for
//! it: its loop and the handler spawned as tasks, channels between them, the
//! message parsed into rmcp's types and the answer sent back through them.
//! Measured, that is about half the machine time of a whole call
//! (`docs/benchmarks.md`, "What the MCP layer costs over HTTP"). A request
//! that is one plain `tools/call` and passes every check rmcp would make is
//! instead parsed once here, with rmcp's own types, run by the same
//! dispatcher on the same lane (sandbox, limits, grants, journal), and
//! answered with the message rmcp would write, serialised by rmcp's types.
//!
//! Invariant: this path only ever takes a request rmcp 3.11's `handle_post`
//! would accept and hand to `call_tool` with the same inputs. Its checks are
//! a strict subset of rmcp's, made conservatively: when a check would need
//! more than a plain comparison (a quoted or weighted `Accept`, a Base64
//! `Mcp-Name`, a tool whose schema promotes arguments to `Mcp-Param-*`
//! headers), or the request asks for what only rmcp's service provides
//! (progress or log notifications, which need an event stream; tasks; an
//! unknown `_meta` shape), [`McpServer::direct_call`] says `None` and the
//! request goes to rmcp unchanged, which answers it, errors included. So a
//! malformed request never gets a different error here than it would
//! there: it never gets an answer from here at all.

use http::header::AsHeaderName;
use http::{HeaderMap, HeaderName, StatusCode};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorCode, Implementation,
    ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use tokio_util::sync::CancellationToken;

use super::McpServer;
use super::call::respond;
use super::request::{capabilities, client_record, needs_of, replay_answers};
use crate::auth::Caller;
use crate::call::Arguments;
use crate::config::ClientNeeds;
use crate::dispatch::CallContext;
use crate::services::{self, ReplayServices};

/// The one revision this path answers.
const REVISION: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// The headers this path reads, made once: a name given as text is
/// parsed and checked again at every lookup.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const METHOD: HeaderName = HeaderName::from_static("mcp-method");
const NAME: HeaderName = HeaderName::from_static("mcp-name");

/// A `tools/call` this path answers (see [`McpServer::direct_call`]).
pub struct DirectCall {
    id: RequestId,
    params: CallToolRequestParams,
    /// What the request's `_meta` declares the client can do.
    declared: ClientNeeds,
    /// The client, as its `_meta` names it.
    info: Implementation,
}

impl McpServer {
    /// `body`, sent with `headers`, as a call this path answers, or `None`
    /// when rmcp must answer it. The transport has already checked what is
    /// its own to check (the method is `POST`, the `Host` and `Origin` are
    /// allowed, no session is named, the body is within its limits).
    pub fn direct_call(&self, headers: &HeaderMap, body: &[u8]) -> Option<DirectCall> {
        if single(headers, &PROTOCOL_VERSION)? != REVISION.as_str()
            || single(headers, &METHOD)? != "tools/call"
            || !is_json(single(headers, http::header::CONTENT_TYPE)?)
            || !accepts_json_and_events(headers)?
        {
            return None;
        }
        let ClientJsonRpcMessage::Request(request) = super::client_message(body).ok()? else {
            return None;
        };
        let ClientRequest::CallToolRequest(mut call) = request.request else {
            return None;
        };
        // rmcp's deserialiser keeps `_meta` among the request's extensions.
        let meta = call.extensions.remove::<RequestMetaObject>()?;
        let params = call.params;
        // `Mcp-Name` in its plain form only: the Base64 form is rmcp's to decode.
        let name = single(headers, &NAME)?;
        if name.starts_with("=?") || name != params.name {
            return None;
        }
        let declared = meta.client_capabilities()?;
        // The journal names the client; rmcp's fallback for a missing
        // `clientInfo` is its own to make.
        let info = meta.client_info()?;
        // The keys rmcp requires of this revision (`missing_required_keys`)
        // are the protocol version and the capabilities, both read above
        // and here: a request without either has already left this path.
        if meta.protocol_version()? != REVISION
            // Notifications need rmcp's event stream; tasks its task path.
            || meta.get_progress_token().is_some()
            || meta.log_level().is_some()
            || declared.supports_tasks()
        {
            return None;
        }
        // rmcp checks `Mcp-Param-*` headers against the schema's
        // `x-mcp-header` annotations; a tool with any is left to it.
        let catalog = self.dispatcher.registry().snapshot();
        if catalog
            .tools
            .get(params.name.as_ref())
            .is_some_and(|tool| tool.spec.header_annotated)
        {
            return None;
        }
        Some(DirectCall {
            id: request.id,
            params,
            declared: needs_of(Some(&declared)),
            info,
        })
    }

    /// Run `call` for `caller` and answer it as rmcp would: the HTTP status
    /// and the JSON-RPC message's bytes. `cancel` stops the call (the server
    /// shutting down, the client gone).
    pub async fn answer_direct(
        &self,
        call: DirectCall,
        caller: Option<Caller>,
        cancel: CancellationToken,
    ) -> (StatusCode, Vec<u8>) {
        let this = self.clone();
        let id = call.id.clone();
        // On the lane rmcp's path would give it; see `dispatch::Lanes`.
        let result = self
            .dispatcher
            .lanes()
            .handle(move |lane| async move {
                this.run_direct(call, caller.as_ref(), &cancel, lane).await
            })
            .await;
        let (message, status) = match result {
            Ok(response) => {
                let mut result = ServerResult::from(response);
                // What rmcp's handler does to every 2026-07-28 result.
                result.fill_missing_cache_hints();
                (ServerJsonRpcMessage::response(result, id), StatusCode::OK)
            }
            Err(error) => {
                let status = error_status(error.code);
                (ServerJsonRpcMessage::error(error, Some(id)), status)
            }
        };
        match crate::json::to_vec(&message) {
            Ok(bytes) => (status, bytes),
            Err(error) => {
                tracing::error!(%error, "cannot serialise a tools/call answer");
                let fallback = ServerJsonRpcMessage::error(
                    McpError::internal_error("the answer could not be serialised", None),
                    None,
                );
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    serde_json::to_vec(&fallback).unwrap_or_default(),
                )
            }
        }
    }

    /// The call itself: as [`McpServer::handle_call`] runs a 2026-07-28 call
    /// that is not a task and asked for no notifications.
    async fn run_direct(
        &self,
        call: DirectCall,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
        lane: crate::dispatch::Lane,
    ) -> Result<rmcp::model::CallToolResponse, McpError> {
        let DirectCall {
            id,
            mut params,
            declared,
            info,
        } = call;
        let config = self.dispatcher.config();
        let arguments = Arguments::new(params.arguments.take());
        let replay = replay_answers(
            config.state_keys.as_ref(),
            caller,
            &params.name,
            &arguments,
            params.request_state.as_deref(),
            params.input_responses.take(),
        )?;
        let services = services::shared(ReplayServices::new(
            replay.answers.clone(),
            capabilities(declared),
        ));
        let result = self
            .dispatcher
            .call(
                &params.name,
                arguments,
                CallContext {
                    events: None,
                    cancel,
                    client_roots: None,
                    services: Some(services),
                    client: &|| {
                        client_record(self.transport, &id, None, Some(&info), caller, &config)
                    },
                    caller,
                    lane,
                    declared: Some(declared),
                    task: None,
                },
            )
            .await;
        respond(result, Some(&replay)).map_err(|mut error| {
            // As rmcp's handler maps it for 2026-07-28 peers.
            if error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            error
        })
    }
}

/// The HTTP status rmcp gives a JSON-RPC error on the 2026-07-28 path (the
/// request's `_meta` being well formed, as this path requires).
fn error_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// The value of header `name` when it appears exactly once, as text.
fn single(headers: &HeaderMap, name: impl AsHeaderName) -> Option<&str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// Whether a `Content-Type` is JSON (parameters ignored, as rmcp does).
fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// Whether `Accept` lists both JSON and event streams, in the plain form
/// only (no parameters, no quotes: weights are rmcp's to read); `None` for
/// any other form.
fn accepts_json_and_events(headers: &HeaderMap) -> Option<bool> {
    let (mut json, mut events) = (false, false);
    for value in headers.get_all(http::header::ACCEPT) {
        let value = value.to_str().ok()?;
        if value.contains([';', '"']) {
            return None;
        }
        for entry in value.split(',').map(str::trim) {
            json |= entry.eq_ignore_ascii_case("application/json");
            events |= entry.eq_ignore_ascii_case("text/event-stream");
        }
    }
    Some(json && events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
                http::HeaderValue::from_str(value).expect("a header value"),
            );
        }
        map
    }

    #[test]
    fn accept_must_name_both_in_the_plain_form() {
        let both = headers(&[("accept", "application/json, text/event-stream")]);
        assert_eq!(accepts_json_and_events(&both), Some(true));
        let split = headers(&[
            ("accept", "application/json"),
            ("accept", "TEXT/EVENT-STREAM"),
        ]);
        assert_eq!(accepts_json_and_events(&split), Some(true));
        let one = headers(&[("accept", "application/json")]);
        assert_eq!(accepts_json_and_events(&one), Some(false));
        // A weight (perhaps zero) is rmcp's to read.
        let weighted = headers(&[("accept", "application/json, text/event-stream;q=0")]);
        assert_eq!(accepts_json_and_events(&weighted), None);
        assert_eq!(accepts_json_and_events(&HeaderMap::new()), Some(false));
    }

    #[test]
    fn repeated_headers_are_not_single() {
        let twice = headers(&[("mcp-method", "tools/call"), ("mcp-method", "tools/call")]);
        assert_eq!(single(&twice, "mcp-method"), None);
        let once = headers(&[("mcp-method", "tools/call")]);
        assert_eq!(single(&once, "mcp-method"), Some("tools/call"));
    }

    #[test]
    fn content_type_parameters_are_ignored() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/json-seq"));
    }

    #[test]
    fn errors_get_the_status_rmcp_gives_them() {
        assert_eq!(error_status(ErrorCode::INVALID_PARAMS), StatusCode::OK);
        assert_eq!(
            error_status(ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            error_status(ErrorCode::METHOD_NOT_FOUND),
            StatusCode::NOT_FOUND
        );
    }
}
