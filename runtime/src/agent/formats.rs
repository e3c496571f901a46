//! The tools as function declarations in the formats model APIs take:
//! OpenAI's (Chat Completions `tools`), Anthropic's (Messages `tools`) and
//! Gemini's (`functionDeclarations`), for `toolcage list --format` and the
//! agent loop.
//!
//! What each needs, in one place:
//! - **Names.** OpenAI and Anthropic take `^[a-zA-Z0-9_-]{1,64}$`, Gemini
//!   `^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$`; an MCP tool name is 1–128 characters
//!   of `A-Za-z0-9_-.`. A name that does not fit is given one that does
//!   ([`function_name`]: `.` becomes `_`, a leading digit gets `_`, too long
//!   is cut with a digest suffix), and [`Declarations::names`] maps it back.
//! - **Schemas.** OpenAI (non-strict) and Anthropic take JSON Schema with a
//!   root `"type": "object"`: the tool's schema goes as it is, minus the
//!   root's `$schema` and `$id`. Gemini takes a subset of OpenAPI 3.0's
//!   Schema: local `$ref`s are inlined (at most [`MAX_INLINE`] nodes, and a
//!   recursive one becomes an unconstrained object), `const` becomes a
//!   one-value `enum`, `oneOf` becomes `anyOf`, a `type` list with `"null"`
//!   becomes `nullable`, and every keyword it does not know is dropped
//!   (`additionalProperties`, `$defs`, `default`, `examples`, `allOf`, ...).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::catalog::ToolDescriptor;

/// A model API's function-declaration format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenAI Chat Completions (`{"type": "function", "function": {...}}`).
    OpenAi,
    /// Anthropic Messages (`{"name", "description", "input_schema"}`).
    Anthropic,
    /// Gemini (`{"functionDeclarations": [...]}`).
    Gemini,
}

/// Most schema nodes a Gemini schema may grow to by inlining `$ref`s.
pub const MAX_INLINE: usize = 10_000;

/// The declarations of a tool set, and which tool each function name is.
#[derive(Debug, Clone)]
pub struct Declarations {
    /// The declarations, in the format's own JSON (a list; for Gemini,
    /// wrap it in `{"functionDeclarations": ...}`).
    pub functions: Vec<Value>,
    /// Function name → tool name.
    pub names: BTreeMap<String, String>,
}

/// Declare `tools` in `format`.
pub fn declare<'a>(
    tools: impl IntoIterator<Item = &'a ToolDescriptor>,
    format: Format,
) -> Declarations {
    let mut functions = Vec::new();
    let mut names = BTreeMap::new();
    for tool in tools {
        let mut name = function_name(&tool.name, format);
        // Two tools mapped to one name: the later gets a digest suffix.
        if names.contains_key(&name) {
            name = suffixed(&tool.name, &name, format);
        }
        names.insert(name.clone(), tool.name.clone());
        let description = match &tool.title {
            Some(title) if !tool.description.starts_with(title.as_str()) => {
                format!("{title}: {}", tool.description)
            }
            _ => tool.description.clone(),
        };
        let schema = Value::Object((*tool.input_schema).clone());
        functions.push(match format {
            Format::OpenAi => json!({
                "type": "function",
                "function": {
                    "name": name,
                    "description": description,
                    "parameters": json_schema(schema),
                },
            }),
            Format::Anthropic => json!({
                "name": name,
                "description": description,
                "input_schema": json_schema(schema),
            }),
            Format::Gemini => json!({
                "name": name,
                "description": description,
                "parameters": gemini_schema(&schema),
            }),
        });
    }
    Declarations { functions, names }
}

/// `tool`'s name as `format` accepts it.
pub fn function_name(tool: &str, format: Format) -> String {
    let fits = |name: &str| match format {
        Format::OpenAi | Format::Anthropic => {
            (1..=64).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        }
        Format::Gemini => {
            (1..=64).contains(&name.len())
                && name
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        }
    };
    if fits(tool) {
        return tool.to_owned();
    }
    let mut name: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if format == Format::Gemini && !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
    {
        name.insert(0, '_');
    }
    if fits(&name) {
        name
    } else {
        suffixed(tool, &name, format)
    }
}

/// `name` cut to leave room for 8 hex digits of `tool`'s digest.
fn suffixed(tool: &str, name: &str, format: Format) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = crate::catalog::hex(&Sha256::digest(tool.as_bytes()));
    let keep: String = name.chars().take(64 - 9).collect();
    let _ = format;
    format!("{keep}_{}", &digest[..8])
}

/// A JSON Schema for OpenAI and Anthropic: the root's `$schema` and `$id`
/// dropped, and a root object schema with no `properties` given empty ones
/// (both APIs want them).
fn json_schema(mut schema: Value) -> Value {
    if let Some(root) = schema.as_object_mut() {
        root.remove("$schema");
        root.remove("$id");
        root.entry("properties").or_insert_with(|| json!({}));
    }
    schema
}

/// The keywords Gemini's Schema knows.
const GEMINI_KEYWORDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
    "propertyOrdering",
];

/// `schema` in Gemini's subset.
pub fn gemini_schema(schema: &Value) -> Value {
    let mut budget = MAX_INLINE;
    let converted = gemini_node(schema, schema, &mut budget, 0);
    match converted {
        Value::Object(mut root) => {
            root.insert("type".into(), json!("object"));
            root.entry("properties").or_insert_with(|| json!({}));
            Value::Object(root)
        }
        _ => json!({"type": "object", "properties": {}}),
    }
}

fn gemini_node(node: &Value, root: &Value, budget: &mut usize, depth: usize) -> Value {
    // Depth and size are bounded: a schema is at most 64 deep in place
    // (`schema::MAX_INPLACE_DEPTH`), and inlining spends the budget.
    if *budget == 0 || depth > 64 {
        return json!({"type": "object"});
    }
    *budget -= 1;
    let Some(object) = node.as_object() else {
        // `true` (anything) and other forms: no constraint Gemini can say.
        return json!({});
    };
    if let Some(target) = object.get("$ref").and_then(Value::as_str) {
        return match resolve_local(root, target) {
            Some(resolved) => gemini_node(resolved, root, budget, depth + 1),
            None => json!({"type": "object"}),
        };
    }
    let mut out = Map::new();
    for (key, value) in object {
        match key.as_str() {
            "const" => {
                out.insert("enum".into(), json!([value]));
            }
            "oneOf" | "anyOf" => {
                if let Some(options) = value.as_array() {
                    let options: Vec<Value> = options
                        .iter()
                        .map(|o| gemini_node(o, root, budget, depth + 1))
                        .collect();
                    out.insert("anyOf".into(), Value::Array(options));
                }
            }
            "type" => match value {
                Value::Array(types) => {
                    let mut rest: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                    if rest.len() < types.len() {
                        out.insert("nullable".into(), json!(true));
                    }
                    if let Some(first) = rest.pop() {
                        out.insert("type".into(), first.clone());
                    }
                }
                Value::String(_) => {
                    out.insert("type".into(), value.clone());
                }
                _ => {}
            },
            "properties" => {
                if let Some(properties) = value.as_object() {
                    let converted: Map<String, Value> = properties
                        .iter()
                        .map(|(name, p)| (name.clone(), gemini_node(p, root, budget, depth + 1)))
                        .collect();
                    out.insert("properties".into(), Value::Object(converted));
                }
            }
            "items" => {
                out.insert("items".into(), gemini_node(value, root, budget, depth + 1));
            }
            "enum" => {
                // Gemini's enums are strings.
                if let Some(values) = value.as_array() {
                    let strings: Vec<Value> = values
                        .iter()
                        .map(|v| match v {
                            Value::String(_) => v.clone(),
                            other => Value::String(other.to_string()),
                        })
                        .collect();
                    out.insert("enum".into(), Value::Array(strings));
                }
            }
            known if GEMINI_KEYWORDS.contains(&known) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    // An enum is of strings in Gemini.
    if out.contains_key("enum") {
        out.insert("type".into(), json!("string"));
    }
    Value::Object(out)
}

/// A local reference (`#`, `#/$defs/x`, `#/definitions/x`, any JSON
/// pointer) within `root`.
fn resolve_local<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_each_api_and_map_back() {
        assert_eq!(
            function_name("read_text_file", Format::OpenAi),
            "read_text_file"
        );
        assert_eq!(function_name("fs.read", Format::OpenAi), "fs_read");
        assert_eq!(function_name("fs.read", Format::Gemini), "fs.read");
        assert_eq!(function_name("3d-render", Format::Gemini), "_3d-render");
        let long = "a".repeat(128);
        let cut = function_name(&long, Format::Anthropic);
        assert_eq!(cut.len(), 64);
        assert!(cut.starts_with("aaaa") && cut.as_bytes()[55] == b'_');
    }

    #[test]
    fn gemini_gets_its_subset() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "$defs": {"unit": {"type": "string", "enum": ["c", "f"], "default": "c"}},
            "properties": {
                "city": {"type": "string", "examples": ["Malé"]},
                "unit": {"$ref": "#/$defs/unit"},
                "days": {"type": ["integer", "null"], "minimum": 1},
                "mode": {"const": "fast"},
                "choice": {"oneOf": [{"type": "string"}, {"type": "number"}]},
                "self": {"$ref": "#"}
            },
            "required": ["city"]
        });
        let gemini = gemini_schema(&schema);
        assert_eq!(gemini["type"], "object");
        assert!(gemini.get("additionalProperties").is_none() && gemini.get("$defs").is_none());
        assert_eq!(
            gemini["properties"]["unit"],
            json!({"type": "string", "enum": ["c", "f"]})
        );
        assert_eq!(
            gemini["properties"]["days"],
            json!({"type": "integer", "nullable": true, "minimum": 1})
        );
        assert_eq!(
            gemini["properties"]["mode"],
            json!({"type": "string", "enum": ["fast"]})
        );
        assert_eq!(
            gemini["properties"]["choice"]["anyOf"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        assert_eq!(gemini["properties"]["city"], json!({"type": "string"}));
        assert_eq!(gemini["required"], json!(["city"]));
        // A self-reference is inlined until the budget runs out: bounded.
        assert!(serde_json::to_string(&gemini).expect("json").len() < 10_000_000);
    }
}
