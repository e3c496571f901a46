//! `which_version` says which build of this component answered: `v1`, or
//! `v2` when built with the `v2` feature. The hot-reload tests swap one for
//! the other under a running server.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolcage_guest::{JsonSchema, export, tool};

const VERSION: &str = if cfg!(feature = "v2") { "v2" } else { "v1" };

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Milliseconds to sleep before answering.
    #[serde(default)]
    sleep_ms: u64,
}

#[derive(Serialize, JsonSchema)]
struct Answer {
    version: String,
}

/// Say which version of this component is answering.
#[tool(read_only)]
fn which_version(args: Args) -> Result<Answer, String> {
    std::thread::sleep(Duration::from_millis(args.sleep_ms));
    Ok(Answer {
        version: VERSION.to_owned(),
    })
}

export!(which_version);
