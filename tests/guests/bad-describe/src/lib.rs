//! A component whose `describe` returns garbage: an invalid tool name and
//! an input schema that is not JSON. The host must reject it at load and
//! keep serving every other tool. Implements the raw contract (no SDK
//! macros), as a tool in another language would.

// The raw `tool-component` world (tools only), bound directly rather than
// through the SDK (whose world also exports resources and prompts): this
// guest keeps proving that tool-only components load.
mod bindings {
    wit_bindgen::generate!({
        path: "../../../guest-sdk/wit-0.1.0",
        world: "tool-component",
    });
}

use bindings::exports::toolcage::tool::tool::Guest;
use bindings::toolcage::tool::types::{Annotations, CallResult, Content, Descriptor};

struct BadDescribe;

impl Guest for BadDescribe {
    fn describe() -> Vec<Descriptor> {
        vec![Descriptor {
            name: "not a valid name!".into(),
            title: None,
            description: "garbage".into(),
            input_schema: "{this is not json".into(),
            output_schema: None,
            annotations: Annotations {
                read_only: false,
                destructive: false,
                idempotent: false,
                open_world: false,
            },
        }]
    }

    fn call(_name: String, _arguments: String) -> CallResult {
        CallResult {
            content: vec![Content::Text("should never run".into())],
            structured: None,
            is_error: false,
        }
    }
}

bindings::export!(BadDescribe with_types_in bindings);
