//! The checks on either side of a run: arguments against the input
//! schema, a guest's structured output parsed and checked against the
//! output schema. Each under a step or byte budget that grows with its
//! input, and off the runtime thread when the input is large.

use std::sync::Arc;

use serde_json::Value;

use super::CallOutput;
use crate::call::ToolResult;
use crate::catalog::{LoadedTool, ToolSpec};
use crate::config::Limits;
use crate::json;
use crate::schema::{BudgetExceeded, budget_for};

/// How much host memory a result's parsed structured output may take, as a
/// multiple of the result-size limit (the text is already within that
/// limit; parsed, `[0,0,…]` takes sixteen times its text).
const PARSED_OUTPUT_FACTOR: u64 = 4;

/// Instances up to this size (JSON text, in bytes) are parsed and checked
/// on the runtime thread; larger ones on the blocking pool, so a runtime
/// thread never spends long on a client's or a guest's data (a check is
/// bounded by its step budget, which grows with the instance).
const INLINE_CHECK_BYTES: usize = 64 * 1024;

/// Which of a tool's schemas.
#[derive(Debug, Clone, Copy)]
pub(super) enum Which {
    Input,
    Output,
}

/// Check `value` (`bytes` of JSON text) against the tool's `which` schema,
/// under the step budget for its size.
pub(super) async fn validate(
    spec: &Arc<ToolSpec>,
    which: Which,
    value: &Value,
    bytes: usize,
) -> Result<Option<String>, BudgetExceeded> {
    let check = move |spec: &ToolSpec, value: &Value| match which {
        Which::Input => spec.input_validator.problems(value, budget_for(bytes)),
        Which::Output => spec
            .output_validator
            .as_ref()
            .map_or(Ok(None), |schema| schema.problems(value, budget_for(bytes))),
    };
    if bytes <= INLINE_CHECK_BYTES {
        return check(spec, value);
    }
    let (spec, value) = (Arc::clone(spec), value.clone());
    tokio::task::spawn_blocking(move || check(&spec, &value))
        .await
        // The check does not panic (running out of steps is an `Err`);
        // a panic would be a bug, reported as a budget failure.
        .unwrap_or(Err(BudgetExceeded {
            steps: budget_for(bytes),
        }))
}

/// Parse and check a guest's result against the tool's contract.
pub(super) async fn check_output(
    tool: &LoadedTool,
    result: ToolResult,
    limits: &Limits,
) -> CallOutput {
    let name = &tool.spec.descriptor.name;
    let budget = limits.max_result_bytes.saturating_mul(PARSED_OUTPUT_FACTOR);
    let budget = usize::try_from(budget).unwrap_or(usize::MAX);
    let (structured, bytes) = match result.structured {
        None => (None, 0),
        Some(text) => {
            let bytes = text.len();
            // A key twice is refused: the check would see one value and a
            // client might read the other.
            let parsed = if bytes <= INLINE_CHECK_BYTES {
                json::parse_unique(&text, budget)
            } else {
                tokio::task::spawn_blocking(move || json::parse_unique(&text, budget))
                    .await
                    .unwrap_or(Err(json::ParseError::TooLarge { budget }))
            };
            match parsed {
                Ok(value @ Value::Object(_)) => (Some(value), bytes),
                Ok(_) => {
                    return CallOutput::error(format!(
                        "tool `{name}` returned structured output that is not a JSON object"
                    ));
                }
                Err(error @ json::ParseError::TooLarge { .. }) => {
                    return CallOutput::error(format!(
                        "tool `{name}` returned structured output too large to check: {error} \
                         ({PARSED_OUTPUT_FACTOR}× the result size limit of {} bytes)",
                        limits.max_result_bytes
                    ));
                }
                Err(error @ json::ParseError::DuplicateKey(_)) => {
                    return CallOutput::error(format!(
                        "tool `{name}` returned structured output in which {error}"
                    ));
                }
                Err(json::ParseError::Syntax(error)) => {
                    return CallOutput::error(format!(
                        "tool `{name}` returned structured output that is not valid JSON: {error}"
                    ));
                }
            }
        }
    };
    if !result.is_error && tool.spec.output_validator.is_some() {
        let Some(value) = &structured else {
            return CallOutput::error(format!(
                "tool `{name}` declares an output schema but returned no structured output"
            ));
        };
        match validate(&tool.spec, Which::Output, value, bytes).await {
            Ok(None) => {}
            Ok(Some(problems)) => {
                return CallOutput::error(format!(
                    "tool `{name}` returned structured output that does not match its output schema:\n{problems}"
                ));
            }
            Err(exceeded) => {
                return CallOutput::error(format!(
                    "tool `{name}` returned structured output that could not be checked against its output schema: {exceeded}"
                ));
            }
        }
    }
    CallOutput {
        content: result.content,
        structured,
        is_error: result.is_error,
        input_required: None,
        failure: None,
        refused: None,
    }
}
