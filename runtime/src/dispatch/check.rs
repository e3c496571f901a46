//! The checks on either side of a run: arguments against the input
//! schema, a guest's structured output parsed and checked against the
//! output schema. Each under a step or byte budget that grows with its
//! input, and off the runtime thread when the input is large.

use std::sync::Arc;

use serde_json::Value;

use super::CallOutput;
use crate::call::{Arguments, ToolResult};
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

/// Check arguments (`bytes` of JSON text) against the tool's input schema,
/// under the step budget for their size.
pub(super) async fn validate_input(
    spec: &Arc<ToolSpec>,
    arguments: &Arguments,
    bytes: usize,
) -> Result<Option<String>, BudgetExceeded> {
    if bytes <= INLINE_CHECK_BYTES {
        return spec.input_validator.problems_in(arguments.value(), bytes);
    }
    // Shared with the blocking task, not copied.
    let (spec, arguments) = (Arc::clone(spec), arguments.clone());
    tokio::task::spawn_blocking(move || spec.input_validator.problems_in(arguments.value(), bytes))
        .await
        // The check does not panic (running out of steps is an `Err`);
        // a panic would be a bug, reported as a budget failure.
        .unwrap_or(Err(BudgetExceeded {
            steps: budget_for(bytes),
        }))
}

/// Why a guest's structured output was refused.
enum Refused {
    Parse(json::ParseError),
    NotObject,
    Schema(String),
    Budget(BudgetExceeded),
}

/// Parse a guest's structured output (within `budget` bytes of host
/// memory) and, when `check`, check it against the output schema.
fn parse_and_check(
    spec: &ToolSpec,
    text: &str,
    budget: usize,
    check: bool,
) -> Result<Value, Refused> {
    // A key twice is refused: the check would see one value and a client
    // might read the other.
    let value = json::parse_unique(text, budget).map_err(Refused::Parse)?;
    if !value.is_object() {
        return Err(Refused::NotObject);
    }
    if check && let Some(schema) = &spec.output_validator {
        match schema.problems_in(&value, text.len()) {
            Ok(None) => {}
            Ok(Some(problems)) => return Err(Refused::Schema(problems)),
            Err(exceeded) => return Err(Refused::Budget(exceeded)),
        }
    }
    Ok(value)
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
    let check = !result.is_error && tool.spec.output_validator.is_some();
    let text = match result.structured {
        Some(text) => text,
        None if check => {
            return CallOutput::error(format!(
                "tool `{name}` declares an output schema but returned no structured output"
            ));
        }
        None => return CallOutput::result(result.content, None, result.is_error),
    };
    // Parsed and checked in one go, on the blocking pool when large: the
    // value moves there and back, not copied for the check.
    let checked = if text.len() > INLINE_CHECK_BYTES {
        let spec = Arc::clone(&tool.spec);
        tokio::task::spawn_blocking(move || parse_and_check(&spec, &text, budget, check))
            .await
            // Neither step panics (running out of budget is an `Err`); a
            // panic would be a bug, reported as the budget running out.
            .unwrap_or(Err(Refused::Parse(json::ParseError::TooLarge { budget })))
    } else {
        parse_and_check(&tool.spec, &text, budget, check)
    };
    match checked {
        Ok(value) => CallOutput::result(result.content, Some(value), result.is_error),
        Err(refused) => CallOutput::error(refused.text(name, limits)),
    }
}

impl Refused {
    /// What the call's error says.
    fn text(self, name: &str, limits: &Limits) -> String {
        match self {
            Refused::NotObject => {
                format!("tool `{name}` returned structured output that is not a JSON object")
            }
            Refused::Parse(error @ json::ParseError::TooLarge { .. }) => format!(
                "tool `{name}` returned structured output too large to check: {error} \
                 ({PARSED_OUTPUT_FACTOR}× the result size limit of {} bytes)",
                limits.max_result_bytes
            ),
            Refused::Parse(error @ json::ParseError::DuplicateKey(_)) => {
                format!("tool `{name}` returned structured output in which {error}")
            }
            Refused::Parse(json::ParseError::Syntax(error)) => {
                format!("tool `{name}` returned structured output that is not valid JSON: {error}")
            }
            Refused::Schema(problems) => format!(
                "tool `{name}` returned structured output that does not match its output schema:\n{problems}"
            ),
            Refused::Budget(exceeded) => format!(
                "tool `{name}` returned structured output that could not be checked against its output schema: {exceeded}"
            ),
        }
    }
}
