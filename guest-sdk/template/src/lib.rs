//! The `{{name}}` tool: a toolcage tool in Rust.
//!
//! Edit the function below (its argument type is its input schema, its doc
//! comment its description), then build with `./build.sh`.

use serde::{Deserialize, Serialize};
use toolcage_guest::{JsonSchema, ObjectOutput, export, tool};

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Who to greet.
    name: String,
}

#[derive(Serialize, JsonSchema)]
struct Greeting {
    message: String,
}

// Its schema is an object: calls skip generating it (checked at load).
impl ObjectOutput for Greeting {}

/// Greet someone by name.
#[tool(read_only, idempotent)]
fn {{name}}(args: Args) -> Result<Greeting, String> {
    if args.name.trim().is_empty() {
        return Err("`name` must not be empty".into());
    }
    Ok(Greeting {
        message: format!("Hello, {}!", args.name),
    })
}

export!({{name}});
