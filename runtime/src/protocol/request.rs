//! What a request carries besides its params: its revision, its caller,
//! what its client declares, and (on 2026-07-28) the answers it brings
//! for a replay.

use std::sync::Arc;

use rmcp::model::{ClientCapabilities, Implementation, ProtocolVersion, RequestId};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use crate::auth::{self, Caller};
use crate::call::{Arguments, ClientServices};
use crate::config::ClientNeeds;
use crate::journal::{CallerRecord, ClientId};
use crate::services::{
    self, Capabilities, PeerServices, ReplayServices, call_digest, verify_state,
};

/// Whether the request in `ctx` speaks a stateless revision (2026-07-28 on).
pub(super) fn is_stateless(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whose tasks a request may see: its caller's identity, or (without one)
/// the anonymous owner, for whom the task id is the capability.
pub(super) fn task_owner(ctx: &RequestContext<RoleServer>) -> String {
    caller(ctx).map(Caller::key).unwrap_or_default()
}

/// What the request in `ctx` says its client can do (its own declaration on
/// 2026-07-28, the session's on older revisions).
pub(super) fn declared_needs(ctx: &RequestContext<RoleServer>) -> ClientNeeds {
    needs_of(ctx.client_capabilities().as_ref())
}

/// What a client declaring `capabilities` can do.
pub(super) fn needs_of(capabilities: Option<&ClientCapabilities>) -> ClientNeeds {
    capabilities
        .map(|caps| ClientNeeds {
            sampling: caps.sampling.is_some(),
            elicitation: caps.elicitation.is_some(),
            roots: caps.roots.is_some(),
            tasks: caps.supports_tasks(),
        })
        .unwrap_or_default()
}

/// The answers a 2026-07-28 request brings for a replay, and what binds
/// them to it.
pub(super) struct Replay {
    /// The operator's state keys, if any (else this process's own).
    pub(super) keys: Option<Arc<crate::config::StateKeys>>,
    /// What the digest binds: caller, tool (or `prompt:NAME`), arguments.
    bound: (Option<String>, String, Arguments),
    /// Its digest, made when first needed (see [`Replay::digest`]).
    digest: std::sync::OnceLock<String>,
    /// Every answer so far: the signed state's and this retry's.
    pub(super) answers: std::collections::BTreeMap<String, serde_json::Value>,
}

impl Replay {
    /// Digest of caller, tool (or `prompt:NAME`) and arguments. Made only
    /// when a state is checked or signed (a request that brings one, a call
    /// that asks a question), not for every call: hashing the arguments'
    /// text was a visible share of a small call's time.
    pub(super) fn digest(&self) -> &str {
        self.digest.get_or_init(|| {
            let (owner, what, arguments) = &self.bound;
            call_digest(owner.as_deref(), what, arguments.value())
        })
    }
}

/// The client services of a request that runs guest code named `what` (a
/// tool, or `prompt:NAME`) with `arguments`: on 2026-07-28, replay with
/// the answers so far (those in the signed `state` plus the `responses`
/// this retry brings), bound to the call by a digest of caller, `what` and
/// arguments; on older revisions, requests to the client (so none of the
/// replay is computed for them).
pub(super) fn client_services(
    keys: Option<&Arc<crate::config::StateKeys>>,
    ctx: &RequestContext<RoleServer>,
    what: &str,
    arguments: &Arguments,
    state: Option<&str>,
    responses: Option<std::collections::BTreeMap<String, serde_json::Value>>,
) -> Result<(Arc<dyn ClientServices>, Option<Replay>), McpError> {
    let capabilities = capabilities(declared_needs(ctx));
    if !is_stateless(ctx) {
        let peer_services = PeerServices {
            peer: ctx.peer.clone(),
            capabilities,
        };
        return Ok((services::shared(peer_services), None));
    }
    let replay = replay_answers(keys, caller(ctx), what, arguments, state, responses)?;
    let services = ReplayServices::new(replay.answers.clone(), capabilities);
    Ok((services::shared(services), Some(replay)))
}

/// The answers a 2026-07-28 request by `caller` brings for guest code
/// named `what` with `arguments`: those in its signed `state` (checked
/// against a digest of caller, `what` and arguments) plus its `responses`
/// to the questions that state says were asked. A response to anything
/// else (a first request that brings answers, a key never asked) is not
/// taken: a client must not be able to answer a question, the
/// confirmation of a destructive call among them, before it was put to it
/// (a client that replays the answers of an earlier call would otherwise
/// confirm this one without showing it).
pub(super) fn replay_answers(
    keys: Option<&Arc<crate::config::StateKeys>>,
    caller: Option<&Caller>,
    what: &str,
    arguments: &Arguments,
    state: Option<&str>,
    responses: Option<std::collections::BTreeMap<String, serde_json::Value>>,
) -> Result<Replay, McpError> {
    let mut replay = Replay {
        keys: keys.cloned(),
        // The arguments shared, for a digest made only if a state is
        // checked or signed.
        bound: (caller.map(Caller::key), what.to_owned(), arguments.clone()),
        digest: std::sync::OnceLock::new(),
        answers: std::collections::BTreeMap::new(),
    };
    let verified = match state {
        Some(state) => verify_state(replay.keys.as_deref(), state, replay.digest())
            .map_err(|reason| McpError::invalid_params(reason, None))?,
        None => crate::services::VerifiedState::default(),
    };
    let mut answers = verified.answers;
    for (key, response) in responses.unwrap_or_default() {
        if verified.asked.contains(&key) {
            answers.insert(key, response);
        } else {
            tracing::debug!(%key, "an input response to a question not asked; not taken");
        }
    }
    replay.answers = answers;
    Ok(replay)
}

/// What a client that declared `declared` can be asked.
pub(super) fn capabilities(declared: ClientNeeds) -> Capabilities {
    Capabilities {
        elicit: declared.elicitation,
        sample: declared.sampling,
        roots: declared.roots,
    }
}
/// The authenticated caller of the request in `ctx`, if the HTTP router
/// put one in its extensions (never over stdio).
pub(super) fn caller(ctx: &RequestContext<RoleServer>) -> Option<&Caller> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
}

/// Who sent the request in `ctx` over `transport`, for the call journal;
/// `config` says which `[[callers]]` entry applied.
pub(super) fn client_id(
    transport: &'static str,
    ctx: &RequestContext<RoleServer>,
    config: &crate::config::Config,
) -> ClientId {
    let session = ctx
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    client_record(
        transport,
        &ctx.id,
        session,
        ctx.client_info().as_ref(),
        caller(ctx),
        config,
    )
}

/// The journal's record of request `id` from the client `info` names, in
/// `session` if any, by `caller` if known.
pub(super) fn client_record(
    transport: &'static str,
    id: &RequestId,
    session: Option<String>,
    info: Option<&Implementation>,
    caller: Option<&Caller>,
    config: &crate::config::Config,
) -> ClientId {
    let request = match serde_json::to_value(id) {
        Ok(serde_json::Value::String(id)) => id,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    };
    ClientId {
        transport,
        session,
        request: Some(request),
        name: info.map(|info| format!("{} {}", info.name, info.version).trim().to_owned()),
        caller: caller.map(|caller| CallerRecord {
            policy: auth::access(&config.callers, Some(caller))
                .policy_name()
                .map(str::to_owned),
            issuer: caller.issuer.clone(),
            subject: caller.subject.clone(),
            client_id: caller.client_id.clone(),
        }),
    }
}
