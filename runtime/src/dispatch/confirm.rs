//! Confirmation: whether a call must be confirmed by the user, and asking
//! through the client (elicitation, or an input-required result on
//! 2026-07-28) before the guest runs and before it takes a permit.

use serde_json::Value;

use crate::call::{ClientServices, ElicitAnswer, PendingInput, ServiceError};
use crate::catalog::LoadedTool;
use crate::config::Policy;

/// Whether a call of `tool` must be confirmed by the user first: the
/// operator's `confirm` if set, else the tool's own annotations
/// (destructive and not read-only).
pub(super) fn needs_confirmation(policy: &Policy, tool: &LoadedTool) -> bool {
    let annotations = &tool.spec.descriptor.annotations;
    policy
        .confirm
        .unwrap_or(annotations.destructive && !annotations.read_only)
}

pub(super) enum Confirmation {
    Confirmed,
    /// 2026-07-28: the question goes back to the client first.
    Ask(Vec<PendingInput>),
    /// Declined, dismissed, or impossible; the message says which.
    Refused(String),
}

/// The elicitation key of the host's own confirmation question (a guest's
/// questions are `elicit-N` or its own keys, never `toolcage-...`).
pub const CONFIRM_KEY: &str = "toolcage-confirm";

/// Ask the user to confirm a call of `name` with `arguments`.
pub(super) async fn confirm(
    name: &str,
    arguments: &Value,
    destructive: bool,
    services: Option<&dyn ClientServices>,
) -> Confirmation {
    let why = if destructive {
        "It is marked as destructive: it may change or delete data."
    } else {
        "The operator asks for confirmation of every call of this tool."
    };
    let off = format!(
        "(the operator can turn confirmation off for this tool with `confirm = false` under `[tools.{name}]` in the config)"
    );
    let Some(services) = services else {
        return Confirmation::Refused(format!(
            "tool `{name}` needs the user's confirmation before it runs, and there is no client to ask; the call was not run {off}"
        ));
    };
    let shown = serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string());
    let message = format!("Allow the tool `{name}` to run? {why} Arguments:\n{shown}");
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "confirm": {
                "type": "boolean",
                "title": format!("Run {name}"),
                "description": "Leave checked and accept to run the tool; decline to refuse it.",
                "default": true
            }
        },
        "required": ["confirm"]
    });
    match services
        .confirm(CONFIRM_KEY.to_owned(), message, schema)
        .await
    {
        Ok(ElicitAnswer::Accept(content))
            if content.get("confirm").and_then(Value::as_bool) != Some(false) =>
        {
            Confirmation::Confirmed
        }
        Ok(ElicitAnswer::Accept(_) | ElicitAnswer::Decline) => Confirmation::Refused(format!(
            "the user declined to run tool `{name}`; the call was not run. Do not retry it unless the user asks for it."
        )),
        Ok(ElicitAnswer::Cancel) => Confirmation::Refused(format!(
            "the user dismissed the confirmation for tool `{name}`; the call was not run."
        )),
        Err(ServiceError::InputRequired(pending)) => Confirmation::Ask(pending),
        Err(ServiceError::Refused(reason)) => Confirmation::Refused(format!(
            "tool `{name}` needs the user's confirmation before it runs, and it could not be asked: {reason}. The call was not run {off}"
        )),
    }
}
