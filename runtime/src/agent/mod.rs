//! Beyond MCP clients: the tools for agents that are a loop around a model
//! API. `formats`: the tools as function declarations in the formats the
//! model APIs take (`toolcage list --format`); `run`: the loop itself
//! (`toolcage agent`).

pub mod formats;
pub mod run;
