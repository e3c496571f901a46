//! A component that breaks its own output schema, implemented on the raw
//! contract: `bad_output` returns `{"count": "many"}` against a schema that
//! requires an integer; `no_structured` declares an output schema and
//! returns no structured output; `not_object` returns a JSON array.

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

struct Liar;

const OUTPUT_SCHEMA: &str =
    r#"{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]}"#;

fn descriptor(name: &str) -> Descriptor {
    Descriptor {
        name: name.into(),
        title: None,
        description: "Breaks its output schema.".into(),
        input_schema: r#"{"type":"object"}"#.into(),
        output_schema: Some(OUTPUT_SCHEMA.into()),
        annotations: Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
    }
}

impl Guest for Liar {
    fn describe() -> Vec<Descriptor> {
        vec![
            descriptor("bad_output"),
            descriptor("no_structured"),
            descriptor("not_object"),
        ]
    }

    fn call(name: String, _arguments: String) -> CallResult {
        let structured = match name.as_str() {
            "bad_output" => Some(r#"{"count":"many"}"#.to_owned()),
            "not_object" => Some("[1,2,3]".to_owned()),
            _ => None,
        };
        CallResult {
            content: vec![Content::Text("lie".into())],
            structured,
            is_error: false,
        }
    }
}

bindings::export!(Liar with_types_in bindings);
