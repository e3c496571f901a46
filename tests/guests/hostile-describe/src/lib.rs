//! Components whose descriptors attack the host's loader and its JSON Schema
//! and URI-template handling. Each cargo feature is one attack, built into a
//! file of its own by `./build`; enable exactly one. Never ship them.
//!
//! - `huge-description`: tool `big` with a 100 MB description.
//! - `many-tools`: 200 000 tools, `t0` to `t199999`.
//! - `many-properties`: tool `wide`, whose input schema has 500 000
//!   properties.
//! - `exp-schema`: tool `exp`, whose input schema is a chain of 30 `anyOf`s
//!   that each name the next definition twice: naive validation of a value
//!   that matches neither branch takes 2^30 steps. (30 levels: shallow
//!   enough to pass the host's in-place depth limit, so the step budget is
//!   what must stop it.)
//! - `exp-output`: tool `exp_out`, whose *output* schema is built the same
//!   way and whose result (`{"x":"str"}`) matches no branch.
//! - `pattern-schema`: tool `pat`, whose input schema has the catastrophic
//!   backtracking pattern `^(a+)+$` on every item of an array.
//! - `ref-chain`: tool `chain`, whose input schema is 50 000 `$ref`s deep
//!   through `allOf` (deep recursion in a validator that follows references
//!   in place).
//! - `self-ref`: tool `selfref`, whose input schema refers to itself (`$ref:
//!   "#"` inside its own `allOf`): infinite recursion for a validator that
//!   expands references eagerly.
//! - `template-bomb`: a resource template with 100 000 variables (100 000
//!   frames deep for a recursive matcher), plus the harmless tool `plain`.
//! - `deep-schema`: tool `deep`, whose input schema is nested 100 000 levels
//!   deep through `properties`.
//!
//! Without a feature the component is just `plain`. Every large text is
//! built at run time inside `describe` / `list-templates`, iteratively (a
//! deep text must not need a deep stack in the guest either).

mod bindings {
    wit_bindgen::generate!({
        path: "../../../guest-sdk/wit-0.1.0",
        world: "full-component",
    });
}

use bindings::exports::toolcage::tool::prompts::{self, PromptDescriptor, PromptResult};
use bindings::exports::toolcage::tool::resources::{
    self, ResourceContents, ResourceDescriptor, TemplateDescriptor,
};
use bindings::exports::toolcage::tool::tool;
use bindings::toolcage::tool::types::{Annotations, CallResult, Content, Descriptor, ResourceBody};

/// The smallest valid input schema: any arguments object.
const ANY_OBJECT: &str = r#"{"type":"object"}"#;

fn descriptor(name: &str, input_schema: String) -> Descriptor {
    Descriptor {
        name: name.into(),
        title: None,
        description: "Hostile test tool: its descriptor attacks the host.".into(),
        input_schema,
        output_schema: None,
        annotations: Annotations {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
    }
}

/// An object schema whose property `x` refers to `a0` of a chain of 31
/// definitions in which `a{i}` is `anyOf` two references to `a{i+1}` and the
/// last is an integer. A validator that explores both branches of every
/// `anyOf` for a non-integer `x` visits 2^30 leaves.
#[cfg(any(feature = "exp-schema", feature = "exp-output"))]
fn exponential_schema() -> String {
    use std::fmt::Write as _;

    const LEVELS: usize = 30;
    let mut schema =
        String::from(r##"{"type":"object","properties":{"x":{"$ref":"#/$defs/a0"}},"$defs":{"##);
    for i in 0..LEVELS {
        let next = i + 1;
        write!(
            schema,
            r##""a{i}":{{"anyOf":[{{"$ref":"#/$defs/a{next}"}},{{"$ref":"#/$defs/a{next}"}}]}},"##
        )
        .expect("writing to a String cannot fail");
    }
    write!(schema, r#""a{LEVELS}":{{"type":"integer"}}}}}}"#)
        .expect("writing to a String cannot fail");
    schema
}

/// The tools of every enabled feature (`plain` when none provides one).
fn tools() -> Vec<Descriptor> {
    let mut tools = Vec::new();

    // 100 MB of description: fits in the guest's 128 MiB (wit-bindgen passes
    // the string to the host without copying it) but not in any sane
    // `tools/list` response.
    #[cfg(feature = "huge-description")]
    tools.push(Descriptor {
        description: "d".repeat(100_000_000),
        ..descriptor("big", ANY_OBJECT.into())
    });

    // 200 000 tools, each with its own name and a tiny schema: the host
    // compiles a schema per tool and lists them all.
    #[cfg(feature = "many-tools")]
    tools.extend((0..200_000).map(|i| descriptor(&format!("t{i}"), ANY_OBJECT.into())));

    // One schema with 500 000 properties (about 14 MB of text).
    #[cfg(feature = "many-properties")]
    tools.push(descriptor("wide", {
        use std::fmt::Write as _;

        let mut schema = String::from(r#"{"type":"object","properties":{"#);
        for i in 0..500_000 {
            if i > 0 {
                schema.push(',');
            }
            write!(schema, r#""p{i}":{{"type":"string"}}"#)
                .expect("writing to a String cannot fail");
        }
        schema.push_str("}}");
        schema
    }));

    // Exponential validation of the arguments: `{"x":"str"}` matches no
    // branch, so a naive validator tries all 2^30 paths before it fails.
    #[cfg(feature = "exp-schema")]
    tools.push(descriptor("exp", exponential_schema()));

    // The same over the result: the host validates the structured output
    // (`{"x":"str"}`, see `call`) against this output schema.
    #[cfg(feature = "exp-output")]
    tools.push(Descriptor {
        output_schema: Some(exponential_schema()),
        ..descriptor("exp_out", ANY_OBJECT.into())
    });

    // A regular expression that backtracks catastrophically on `aaaa...ab`
    // in a backtracking regex engine, applied to every item of an array.
    #[cfg(feature = "pattern-schema")]
    tools.push(descriptor(
        "pat",
        r#"{"type":"object","properties":{"x":{"type":"array","items":{"type":"string","pattern":"^(a+)+$"}}}}"#
            .into(),
    ));

    // 50 000 definitions, each `allOf` a reference to the next: a validator
    // (or schema compiler) that follows references by recursion goes 50 000
    // levels deep.
    #[cfg(feature = "ref-chain")]
    tools.push(descriptor("chain", {
        use std::fmt::Write as _;

        const LINKS: usize = 50_000;
        let mut schema =
            String::from(r##"{"type":"object","allOf":[{"$ref":"#/$defs/a0"}],"$defs":{"##);
        for i in 0..LINKS {
            let next = i + 1;
            write!(
                schema,
                r##""a{i}":{{"allOf":[{{"$ref":"#/$defs/a{next}"}}]}},"##
            )
            .expect("writing to a String cannot fail");
        }
        write!(schema, r#""a{LINKS}":{{}}}}}}"#).expect("writing to a String cannot fail");
        schema
    }));

    // A schema that requires itself: expanding `$ref` eagerly never ends.
    #[cfg(feature = "self-ref")]
    tools.push(descriptor(
        "selfref",
        r##"{"type":"object","allOf":[{"$ref":"#"}]}"##.into(),
    ));

    // An input schema 100 000 objects deep: a recursive JSON parser or
    // schema compiler overflows its stack.
    #[cfg(feature = "deep-schema")]
    tools.push(descriptor("deep", {
        const DEPTH: usize = 100_000;
        let open = r#"{"type":"object","properties":{"a":"#;
        let innermost = r#"{"type":"object"}"#;
        let mut schema = String::with_capacity(DEPTH * (open.len() + 2) + innermost.len());
        for _ in 0..DEPTH {
            schema.push_str(open);
        }
        schema.push_str(innermost);
        for _ in 0..DEPTH {
            schema.push_str("}}");
        }
        schema
    }));

    if tools.is_empty() {
        tools.push(descriptor("plain", ANY_OBJECT.into()));
    }
    tools
}

struct HostileDescribe;

impl tool::Guest for HostileDescribe {
    fn describe() -> Vec<Descriptor> {
        tools()
    }

    fn call(name: String, _arguments: String) -> CallResult {
        // `exp_out` breaks its output schema in the most expensive way; every
        // other tool just answers.
        let structured = (name == "exp_out").then(|| r#"{"x":"str"}"#.to_owned());
        CallResult {
            content: vec![Content::Text("ran".into())],
            structured,
            is_error: false,
        }
    }
}

impl resources::Guest for HostileDescribe {
    fn list_resources() -> Vec<ResourceDescriptor> {
        Vec::new()
    }

    fn list_templates() -> Vec<TemplateDescriptor> {
        #[allow(unused_mut)] // only `template-bomb` adds one
        let mut templates = Vec::new();

        // `bomb://{v0}/{v1}/.../{v99999}/`: 100 000 variables, each followed
        // by a `/`. A matcher that recurses once per variable goes 100 000
        // frames deep on a URI with that many segments.
        #[cfg(feature = "template-bomb")]
        templates.push(TemplateDescriptor {
            uri_template: {
                use std::fmt::Write as _;

                let mut template = String::from("bomb://");
                for i in 0..100_000 {
                    write!(template, "{{v{i}}}/").expect("writing to a String cannot fail");
                }
                template
            },
            name: "bomb".into(),
            title: None,
            description: Some("A template with 100 000 variables.".into()),
            mime_type: None,
        });

        templates
    }

    fn read(uri: String) -> Result<Vec<ResourceContents>, String> {
        Ok(vec![ResourceContents {
            uri,
            mime_type: None,
            body: ResourceBody::Text("read".into()),
        }])
    }
}

impl prompts::Guest for HostileDescribe {
    fn list_prompts() -> Vec<PromptDescriptor> {
        Vec::new()
    }

    fn get(_name: String, _arguments: String) -> Result<PromptResult, String> {
        Err("no prompts".into())
    }
}

bindings::export!(HostileDescribe with_types_in bindings);
