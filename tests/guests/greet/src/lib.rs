use serde::{Deserialize, Serialize};
use toolcage_guest::{JsonSchema, ObjectOutput, export, tool};

#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet.
    name: String,
    /// Greet loudly.
    #[serde(default)]
    shout: bool,
}

#[derive(Serialize, JsonSchema)]
struct Greeting {
    message: String,
}

// Its schema is an object: calls skip generating it (checked at load).
impl ObjectOutput for Greeting {}

/// Greet someone by name. Returns the greeting.
#[tool(read_only, idempotent)]
fn greet(args: GreetArgs) -> Result<Greeting, String> {
    if args.name.trim().is_empty() {
        return Err("`name` must not be empty".into());
    }
    toolcage_guest::info!("greeting {}", args.name);
    let message = format!("Hello, {}!", args.name);
    Ok(Greeting {
        message: if args.shout {
            message.to_uppercase()
        } else {
            message
        },
    })
}

export!(greet);
