//! The checks on either side of a run: arguments against the input
//! schema, a guest's structured output parsed and checked against the
//! output schema (as a [`Tree`], which the reply is then written from).
//! Each under a step or byte budget that grows with its input, and off the
//! runtime thread when the input is large.

use std::sync::Arc;

use serde_json::Value;

use super::CallOutput;
use crate::call::ToolResult;
use crate::catalog::{LoadedTool, ToolSpec};
use crate::config::Limits;
use crate::json;
use crate::json::tree::Tree;
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

/// Check `arguments` (`bytes` of JSON text) against the tool's input
/// schema, under the step budget for its size.
pub(super) async fn validate_arguments(
    spec: &Arc<ToolSpec>,
    arguments: &Value,
    bytes: usize,
) -> Result<Option<String>, BudgetExceeded> {
    if bytes <= INLINE_CHECK_BYTES {
        return spec.input_validator.problems(arguments, budget_for(bytes));
    }
    let (spec, arguments) = (Arc::clone(spec), arguments.clone());
    tokio::task::spawn_blocking(move || {
        spec.input_validator.problems(&arguments, budget_for(bytes))
    })
    .await
    // The check does not panic (running out of steps is an `Err`); a
    // panic would be a bug, reported as a budget failure.
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
    let checked = match result.structured {
        None => None,
        Some(text) if text.len() <= INLINE_CHECK_BYTES => Some(check_structured(
            &tool.spec,
            text,
            result.is_error,
            limits.max_result_bytes,
        )),
        Some(text) => {
            let spec = Arc::clone(&tool.spec);
            let (is_error, max) = (result.is_error, limits.max_result_bytes);
            Some(
                tokio::task::spawn_blocking(move || check_structured(&spec, text, is_error, max))
                    .await
                    .unwrap_or_else(|_| {
                        Err(format!(
                            "tool `{name}` returned structured output that could not be checked"
                        ))
                    }),
            )
        }
    };
    let structured = match checked {
        None => None,
        Some(Ok(tree)) => Some(tree),
        Some(Err(message)) => return CallOutput::error(message),
    };
    if !result.is_error && structured.is_none() && tool.spec.output_validator.is_some() {
        return CallOutput::error(format!(
            "tool `{name}` declares an output schema but returned no structured output"
        ));
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

/// Parse a guest's structured output (`text`) under its memory budget,
/// and check it against the output schema unless the result is an error:
/// the tree, or the error result's message.
fn check_structured(
    spec: &ToolSpec,
    text: String,
    is_error: bool,
    max_result_bytes: u64,
) -> Result<Tree, String> {
    let name = &spec.descriptor.name;
    let budget = max_result_bytes.saturating_mul(PARSED_OUTPUT_FACTOR);
    let budget = usize::try_from(budget).unwrap_or(usize::MAX);
    let bytes = text.len();
    let tree = Tree::parse(text, budget).map_err(|error| match error {
        json::ParseError::TooLarge { .. } => format!(
            "tool `{name}` returned structured output too large to check: {error} \
             ({PARSED_OUTPUT_FACTOR}× the result size limit of {max_result_bytes} bytes)"
        ),
        json::ParseError::DuplicateKey(_) => {
            format!("tool `{name}` returned structured output in which {error}")
        }
        json::ParseError::Syntax(error) => {
            format!("tool `{name}` returned structured output that is not valid JSON: {error}")
        }
    })?;
    if !tree.is_object() {
        return Err(format!(
            "tool `{name}` returned structured output that is not a JSON object"
        ));
    }
    if let Some(schema) = spec.output_validator.as_ref().filter(|_| !is_error) {
        match schema.problems(tree.root(), budget_for(bytes)) {
            Ok(None) => {}
            Ok(Some(problems)) => {
                return Err(format!(
                    "tool `{name}` returned structured output that does not match its output schema:\n{problems}"
                ));
            }
            Err(exceeded) => {
                return Err(format!(
                    "tool `{name}` returned structured output that could not be checked against its output schema: {exceeded}"
                ));
            }
        }
    }
    Ok(tree)
}
