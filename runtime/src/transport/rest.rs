//! The plain REST face beside `/mcp` (`[http.rest] enabled = true`), for
//! programs that do not speak MCP, in the shape small tool servers use:
//!
//! - `GET /capabilities`: `{"tools": [{"name", "title"?, "description",
//!   "parameters": <input schema>, "output"?: <output schema>,
//!   "annotations"}]}`, the tools this caller may use;
//! - `POST /tool` with `{"tool": NAME, "parameters": {...}}`: `200 {"result":
//!   ..., "error": null}` when the tool returns a result, `200 {"result":
//!   null, "error": "..."}` when it fails (its own error, a trap, a limit),
//!   `404` for a tool nobody serves (or this caller may not use), `400` for
//!   a malformed body or parameters that do not fit the tool's schema,
//!   `403` for a tool that needs the user's confirmation (no user is there
//!   to ask) unless the operator lists it in `http.rest.unconfirmed`, `503`
//!   when the server is busy. Errors have the same shape.
//!
//! `result` is the tool's structured output when it has one, else its text
//! (the text items joined by newlines), else its content items as MCP
//! writes them.
//!
//! Invariants: the same rules as `/mcp`: the token (or OAuth caller, with
//! its `[[callers]]` policy), the Origin allow-list, the body's size and
//! time limits, the requests-in-progress cap and the request budget; every
//! call goes through the dispatcher (sandbox, limits, grants, journal,
//! whose `client.transport` says `rest`). A tool asking the user or the
//! client's model gets a clear refusal: there is no client.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::router::{Body, Endpoint, Reply};
use crate::auth::{self, Caller};
use crate::call::{Answer, ClientServices, ElicitAnswer, PendingInput, ServiceFuture};
use crate::dispatch::{CallContext, DispatchError, Dispatcher, Lane};
use crate::journal::ClientId;

/// `GET` here lists the tools.
pub const CAPABILITIES: &str = "/capabilities";

/// `POST` here calls one.
pub const TOOL: &str = "/tool";

/// This face's name in the journal.
pub const NAME: &str = "rest";

/// Both paths of the REST face.
pub struct RestEndpoint {
    /// Runs the calls.
    pub dispatcher: Arc<Dispatcher>,
    /// Requests in progress, shared with `/mcp`.
    pub permits: Arc<Semaphore>,
    /// The server-wide request budget.
    pub budget: Arc<crate::RequestBudget>,
    /// The body cap.
    pub max_body_bytes: usize,
    /// The body's time limit.
    pub body_timeout: Duration,
    /// Origins a browser page may call from (as for `/mcp`).
    pub allowed_origins: Vec<String>,
    /// Cancels calls in flight at shutdown.
    pub cancel: CancellationToken,
}

impl Endpoint for RestEndpoint {
    fn handle(&self, request: Request<Incoming>) -> Reply<'_> {
        Box::pin(self.serve(request))
    }
}

impl RestEndpoint {
    async fn serve(&self, request: Request<Incoming>) -> Response<Body> {
        if let Some(origin) = request.headers().get(hyper::header::ORIGIN) {
            let allowed = origin
                .to_str()
                .is_ok_and(|origin| self.allowed_origins.iter().any(|a| a == origin));
            if !allowed {
                return error(
                    StatusCode::FORBIDDEN,
                    "this Origin is not allowed (`http.allowed_origins`)",
                );
            }
        }
        let Ok(_permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            self.dispatcher.metrics().rejected("requests_in_progress");
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many requests in progress; retry shortly",
            );
        };
        let path = request.uri().path().to_owned();
        let caller = request.extensions().get::<Caller>().cloned();
        match (request.method().clone(), path.as_str()) {
            (hyper::Method::GET, CAPABILITIES) => self.capabilities(caller.as_ref()),
            (hyper::Method::POST, TOOL) => {
                let (_, body) = request.into_parts();
                let limited = http_body_util::Limited::new(body, self.max_body_bytes);
                let body = match tokio::time::timeout(self.body_timeout, limited.collect()).await {
                    Err(_) => {
                        return error(
                            StatusCode::REQUEST_TIMEOUT,
                            "the request body did not arrive in time",
                        );
                    }
                    Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                        return error(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "the request body is over the limit (`http.max_body_kib`)",
                        );
                    }
                    Ok(Err(_)) => {
                        return error(
                            StatusCode::BAD_REQUEST,
                            "the request body could not be read",
                        );
                    }
                    Ok(Ok(collected)) => collected.to_bytes(),
                };
                let Some(_budget) = self.budget.try_reserve(body.len()) else {
                    self.dispatcher.metrics().rejected("request_budget");
                    return error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the server holds too many requests at once; retry shortly",
                    );
                };
                self.call(&body, caller.as_ref()).await
            }
            (_, CAPABILITIES) => allow(error(StatusCode::METHOD_NOT_ALLOWED, "use GET"), "GET"),
            _ => allow(error(StatusCode::METHOD_NOT_ALLOWED, "use POST"), "POST"),
        }
    }

    fn capabilities(&self, caller: Option<&Caller>) -> Response<Body> {
        let catalog = self.dispatcher.registry().snapshot();
        let config = self.dispatcher.config();
        let access = auth::access(&config.callers, caller);
        let tools: Vec<Value> = catalog
            .tools
            .iter()
            .filter(|(name, _)| access.may_use(name))
            .map(|(name, tool)| {
                let d = &tool.spec.descriptor;
                let mut entry = json!({
                    "name": name,
                    "description": d.description,
                    "parameters": Value::Object((*d.input_schema).clone()),
                    "annotations": {
                        "readOnly": d.annotations.read_only,
                        "destructive": d.annotations.destructive,
                        "idempotent": d.annotations.idempotent,
                        "openWorld": d.annotations.open_world,
                    },
                });
                if let Some(title) = &d.title {
                    entry["title"] = json!(title);
                }
                if let Some(output) = &d.output_schema {
                    entry["output"] = Value::Object((**output).clone());
                }
                entry
            })
            .collect();
        reply(StatusCode::OK, &json!({ "tools": tools }))
    }

    async fn call(&self, body: &Bytes, caller: Option<&Caller>) -> Response<Body> {
        let Ok(body_text) = std::str::from_utf8(body) else {
            return error(StatusCode::BAD_REQUEST, "the body is not UTF-8 JSON");
        };
        // Parsed under a budget, as every JSON from a client.
        let parsed: Value =
            match crate::json::parse(body_text, self.max_body_bytes.saturating_mul(4)) {
                Ok(value) => value,
                Err(e) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        &format!("the body is not JSON: {e}"),
                    );
                }
            };
        let Some(object) = parsed.as_object() else {
            return error(
                StatusCode::BAD_REQUEST,
                "the body must be a JSON object: {\"tool\": NAME, \"parameters\": {...}}",
            );
        };
        if let Some(extra) = object.keys().find(|k| *k != "tool" && *k != "parameters") {
            return error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "unknown field `{}`; the body is {{\"tool\": NAME, \"parameters\": {{...}}}}",
                    crate::redact::truncate(extra, 64)
                ),
            );
        }
        let Some(name) = object.get("tool").and_then(Value::as_str) else {
            return error(
                StatusCode::BAD_REQUEST,
                "`tool` must be the name of a tool (a string)",
            );
        };
        let parameters: Map<String, Value> = match object.get("parameters") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "`parameters` must be a JSON object",
                );
            }
        };
        let config = self.dispatcher.config();
        // No user is here to confirm: only what the operator opted in.
        let confirmed = config.http.rest.may_skip_confirmation(name);
        if auth::access(&config.callers, caller).may_use(name)
            && self.dispatcher.would_confirm(name) == Some(true)
            && !confirmed
        {
            return error(
                StatusCode::FORBIDDEN,
                &format!(
                    "tool `{name}` needs the user's confirmation before it runs, and this face has no user to ask; \
                     the operator can allow it here with `unconfirmed = [\"{name}\"]` under `[http.rest]`"
                ),
            );
        }
        let services: Arc<dyn ClientServices> = Arc::new(NoClient { confirmed });
        let client = || ClientId {
            transport: NAME,
            caller: None,
            ..ClientId::default()
        };
        let result = self
            .dispatcher
            .call(
                name,
                parameters.into(),
                CallContext {
                    events: None,
                    cancel: &self.cancel,
                    client_roots: None,
                    services: Some(services),
                    client: &client,
                    caller,
                    lane: Lane::Pooled,
                    declared: None,
                    task: None,
                },
            )
            .await;
        match result {
            Err(e @ (DispatchError::UnknownTool { .. } | DispatchError::NotPermitted { .. })) => {
                error(
                    StatusCode::NOT_FOUND,
                    &format!("{e}; GET {CAPABILITIES} lists the tools"),
                )
            }
            Err(e @ DispatchError::MissingClientCapability { .. }) => {
                error(StatusCode::BAD_REQUEST, &e.to_string())
            }
            Ok(output) if output.refused == Some("arguments") => {
                error(StatusCode::BAD_REQUEST, &text(&output.content))
            }
            Ok(output) if output.refused == Some("confirmation") => {
                error(StatusCode::FORBIDDEN, &text(&output.content))
            }
            Ok(output) if output.is_error => reply(
                StatusCode::OK,
                &json!({"result": null, "error": text(&output.content)}),
            ),
            Ok(output) => {
                let result = match output.structured {
                    Some(structured) => structured,
                    None if output
                        .content
                        .iter()
                        .all(|c| matches!(c, crate::call::Content::Text(_))) =>
                    {
                        Value::String(text(&output.content))
                    }
                    None => serde_json::to_value(crate::protocol::to_mcp_result(output).content)
                        .unwrap_or(Value::Null),
                };
                reply(StatusCode::OK, &json!({"result": result, "error": null}))
            }
        }
    }
}

/// The text items of `content`, joined by newlines.
fn text(content: &[crate::call::Content]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            crate::call::Content::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A REST call's client services: there is no client; confirmation is
/// given only for what the operator opted in.
struct NoClient {
    confirmed: bool,
}

impl ClientServices for NoClient {
    fn ask(&self, questions: Vec<PendingInput>) -> ServiceFuture<Vec<Result<Answer, String>>> {
        let answers = questions
            .iter()
            .map(|_| {
                Err("the REST face has no client to ask (no user, no model, no roots)".to_owned())
            })
            .collect();
        Box::pin(async move { Ok(answers) })
    }

    fn confirm(
        &self,
        _key: String,
        _message: String,
        _schema: Value,
    ) -> ServiceFuture<ElicitAnswer> {
        let confirmed = self.confirmed;
        Box::pin(async move {
            if confirmed {
                Ok(ElicitAnswer::Accept(json!({"confirm": true})))
            } else {
                Err(crate::call::ServiceError::Refused(
                    "the REST face has no user to confirm the call".into(),
                ))
            }
        })
    }
}

fn reply(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    reply(status, &json!({"result": null, "error": message}))
}

fn allow(mut response: Response<Body>, methods: &'static str) -> Response<Body> {
    response.headers_mut().insert(
        hyper::header::ALLOW,
        hyper::header::HeaderValue::from_static(methods),
    );
    response
}
