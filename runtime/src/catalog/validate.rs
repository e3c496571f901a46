//! Checking what a component described, before any of it is served: caps
//! on counts and field sizes, tool names by the MCP rule, JSON Schemas
//! compiled under `schema`'s limits, resource URIs and templates parsed.
//!
//! Invariant: any invalid entry rejects the whole file, with a message
//! that names the entry and what is wrong (offending values truncated);
//! nothing here runs guest code. CPU work on guest data: callers run it on
//! the blocking pool.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{ToolDescriptor, ToolSpec};
use crate::call::{RawDescriptor, RawExtras};
use crate::schema::{self, Schema};
use crate::template::UriTemplate;

/// Most resources, templates or prompts (each) one file may list.
pub const MAX_ENTRIES_PER_FILE: usize = 1024;
/// Longest resource URI, in bytes (also the longest URI a client may read).
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Longest name or MIME type of a resource, template, prompt or prompt
/// argument, in bytes.
pub const MAX_NAME_BYTES: usize = 1024;
/// Most arguments one prompt may take.
pub const MAX_PROMPT_ARGUMENTS: usize = 64;

/// Validate a component's resources, templates and prompts; any invalid one
/// rejects the file. Returns the templates compiled, in listed order.
pub(super) fn validate_extras(raw: &RawExtras) -> Result<Vec<UriTemplate>, String> {
    for (kind, count) in [
        ("resources", raw.resources.len()),
        ("resource templates", raw.templates.len()),
        ("prompts", raw.prompts.len()),
    ] {
        if count > MAX_ENTRIES_PER_FILE {
            return Err(format!(
                "lists {count} {kind}, over the limit of {MAX_ENTRIES_PER_FILE} per file"
            ));
        }
    }
    let field = |what: &str, key: &str, field: &str, text: Option<&str>, max: usize| match text {
        Some(text) if text.len() > max => Err(format!(
            "{what} `{}` has a {field} of {} bytes, over the limit of {max}",
            truncated(key),
            text.len()
        )),
        _ => Ok(()),
    };
    let mut uris = std::collections::BTreeSet::new();
    for resource in &raw.resources {
        if resource.uri.is_empty() {
            return Err(format!(
                "resource `{}` has an empty URI",
                truncated(&resource.name)
            ));
        }
        field(
            "resource",
            &resource.name,
            "URI",
            Some(&resource.uri),
            MAX_URI_BYTES,
        )?;
        field(
            "resource",
            &resource.uri,
            "name",
            Some(&resource.name),
            MAX_NAME_BYTES,
        )?;
        field(
            "resource",
            &resource.uri,
            "title",
            resource.title.as_deref(),
            MAX_TITLE_BYTES,
        )?;
        field(
            "resource",
            &resource.uri,
            "MIME type",
            resource.mime_type.as_deref(),
            MAX_NAME_BYTES,
        )?;
        field(
            "resource",
            &resource.uri,
            "description",
            resource.description.as_deref(),
            MAX_DESCRIPTION_BYTES,
        )?;
        check_icons("resource", &resource.uri, &resource.icons)?;
        if let Some(path) = &resource.watch
            && (path.len() > MAX_WATCH_PATH_BYTES || !path.starts_with('/') || path.contains('\0'))
        {
            return Err(format!(
                "resource `{}` watches `{}`, which is not an absolute path of at most {MAX_WATCH_PATH_BYTES} bytes",
                truncated(&resource.uri),
                truncated(path)
            ));
        }
        if !uris.insert(resource.uri.as_str()) {
            return Err(format!("lists resource `{}` twice", resource.uri));
        }
    }
    let mut templates = std::collections::BTreeSet::new();
    let mut compiled = Vec::with_capacity(raw.templates.len());
    for template in &raw.templates {
        compiled.push(UriTemplate::parse(&template.uri_template)?);
        let key = &template.uri_template;
        field(
            "resource template",
            key,
            "name",
            Some(&template.name),
            MAX_NAME_BYTES,
        )?;
        field(
            "resource template",
            key,
            "title",
            template.title.as_deref(),
            MAX_TITLE_BYTES,
        )?;
        field(
            "resource template",
            key,
            "MIME type",
            template.mime_type.as_deref(),
            MAX_NAME_BYTES,
        )?;
        field(
            "resource template",
            key,
            "description",
            template.description.as_deref(),
            MAX_DESCRIPTION_BYTES,
        )?;
        check_icons("resource template", key, &template.icons)?;
        if !templates.insert(key.as_str()) {
            return Err(format!("lists resource template `{key}` twice"));
        }
    }
    let mut names = std::collections::BTreeSet::new();
    for prompt in &raw.prompts {
        check_tool_name(&prompt.name).map_err(|error| format!("prompt: {error}"))?;
        field(
            "prompt",
            &prompt.name,
            "title",
            prompt.title.as_deref(),
            MAX_TITLE_BYTES,
        )?;
        field(
            "prompt",
            &prompt.name,
            "description",
            prompt.description.as_deref(),
            MAX_DESCRIPTION_BYTES,
        )?;
        check_icons("prompt", &prompt.name, &prompt.icons)?;
        if !names.insert(prompt.name.as_str()) {
            return Err(format!("lists prompt `{}` twice", prompt.name));
        }
        if prompt.arguments.len() > MAX_PROMPT_ARGUMENTS {
            return Err(format!(
                "prompt `{}` takes {} arguments, over the limit of {MAX_PROMPT_ARGUMENTS}",
                prompt.name,
                prompt.arguments.len()
            ));
        }
        let mut arguments = std::collections::BTreeSet::new();
        for argument in &prompt.arguments {
            if argument.name.is_empty() || !arguments.insert(argument.name.as_str()) {
                return Err(format!(
                    "prompt `{}` has an empty or repeated argument name `{}`",
                    prompt.name,
                    truncated(&argument.name)
                ));
            }
            field(
                "prompt argument",
                &argument.name,
                "name",
                Some(&argument.name),
                MAX_NAME_BYTES,
            )?;
            field(
                "prompt argument",
                &argument.name,
                "title",
                argument.title.as_deref(),
                MAX_TITLE_BYTES,
            )?;
            field(
                "prompt argument",
                &argument.name,
                "description",
                argument.description.as_deref(),
                MAX_DESCRIPTION_BYTES,
            )?;
        }
    }
    Ok(compiled)
}

/// Longest path a resource may say its content comes from.
pub const MAX_WATCH_PATH_BYTES: usize = 4096;

/// Most icons one tool, resource, template or prompt may have.
pub const MAX_ICONS: usize = 8;
/// Longest icon `src`: a `data:` URI carries the image itself.
pub const MAX_ICON_SRC_BYTES: usize = 64 * 1024;
/// Most sizes one icon may list.
pub const MAX_ICON_SIZES: usize = 16;

/// Check the icons of `what` `key`: at most [`MAX_ICONS`], each an
/// `https:` URL or a `data:image/...` URI (nothing a client would fetch
/// over plain HTTP, open from disk or run), an `image/` MIME type, sizes
/// `WxH` or `any`.
fn check_icons(what: &str, key: &str, icons: &[crate::call::Icon]) -> Result<(), String> {
    let bad = |why: String| Err(format!("{what} `{}` has an icon {why}", truncated(key)));
    if icons.len() > MAX_ICONS {
        return Err(format!(
            "{what} `{}` has {} icons, over the limit of {MAX_ICONS}",
            truncated(key),
            icons.len()
        ));
    }
    for icon in icons {
        let src = icon.src.as_str();
        if src.len() > MAX_ICON_SRC_BYTES {
            return bad(format!(
                "whose `src` is {} bytes, over the limit of {MAX_ICON_SRC_BYTES}",
                src.len()
            ));
        }
        let scheme_ok =
            starts_with_ignore_case(src, "https://") || starts_with_ignore_case(src, "data:image/");
        if !scheme_ok || src.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return bad(format!(
                "whose `src` `{}` is not an `https:` URL or a `data:image/...` URI",
                truncated(src)
            ));
        }
        if let Some(mime) = &icon.mime_type
            && (mime.len() > MAX_NAME_BYTES || !starts_with_ignore_case(mime, "image/"))
        {
            return bad(format!(
                "whose MIME type `{}` is not an `image/` type",
                truncated(mime)
            ));
        }
        if icon.sizes.len() > MAX_ICON_SIZES {
            return bad(format!(
                "with {} sizes, over the limit of {MAX_ICON_SIZES}",
                icon.sizes.len()
            ));
        }
        for size in &icon.sizes {
            let well_formed = size == "any"
                || size.split_once('x').is_some_and(|(w, h)| {
                    [w, h].iter().all(|n| {
                        (1..=5).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit())
                    })
                });
            if !well_formed {
                return bad(format!(
                    "size `{}`: sizes are `WxH` (`48x48`) or `any`",
                    truncated(size)
                ));
            }
        }
    }
    Ok(())
}

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.len() >= prefix.len()
        && text.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// At most 64 characters of `text` (escaped), to name an offending value
/// in a message without repeating all of it.
fn truncated(text: &str) -> String {
    let mut shown: String = text
        .chars()
        .take(64)
        .collect::<String>()
        .escape_default()
        .to_string();
    if text.chars().nth(64).is_some() {
        shown.push('…');
    }
    shown
}

/// Most tools one file may describe.
pub const MAX_TOOLS_PER_FILE: usize = 1024;
/// Longest tool title, in bytes.
pub const MAX_TITLE_BYTES: usize = 1024;
/// Longest tool description, in bytes (descriptions are read by models;
/// the reference servers' longest are a few KiB).
pub const MAX_DESCRIPTION_BYTES: usize = 64 * 1024;

/// Validate a component's descriptors; any invalid one rejects the file.
/// Compiles schemas: CPU work on guest data, so it runs on the blocking
/// pool (see `compile_and_describe`).
pub(super) fn validate_descriptors(raw: Vec<RawDescriptor>) -> Result<Vec<ToolSpec>, String> {
    if raw.is_empty() {
        return Err("`describe` returned no tools".into());
    }
    if raw.len() > MAX_TOOLS_PER_FILE {
        return Err(format!(
            "`describe` returned {} tools, over the limit of {MAX_TOOLS_PER_FILE} per file",
            raw.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut tools = Vec::with_capacity(raw.len());
    for d in raw {
        check_tool_name(&d.name)?;
        if !seen.insert(d.name.clone()) {
            return Err(format!("describes tool `{}` twice", d.name));
        }
        check_len(
            &d.name,
            "title",
            d.title.as_deref().unwrap_or(""),
            MAX_TITLE_BYTES,
        )?;
        check_len(
            &d.name,
            "description",
            &d.description,
            MAX_DESCRIPTION_BYTES,
        )?;
        let input_schema = object_schema(&d.name, "input", &d.input_schema)?;
        let output_schema = match &d.output_schema {
            Some(text) => Some(object_schema(&d.name, "output", text)?),
            None => None,
        };
        let compile = |kind: &str, schema: &Map<String, Value>| {
            Schema::compile(schema)
                .map_err(|error| format!("tool `{}` has an invalid {kind} schema: {error}", d.name))
        };
        check_icons("tool", &d.name, &d.icons)?;
        let input_validator = compile("input", &input_schema)?;
        let output_validator = match &output_schema {
            Some(schema) => Some(compile("output", schema)?),
            None => None,
        };
        let header_annotated = mentions_header_annotation(&input_schema);
        tools.push(ToolSpec {
            header_annotated,
            descriptor: ToolDescriptor {
                name: d.name,
                title: d.title,
                description: d.description,
                input_schema: Arc::new(input_schema),
                output_schema: output_schema.map(Arc::new),
                annotations: d.annotations,
                icons: d.icons,
                execution: d.execution,
                needs: d.needs,
            },
            input_validator,
            output_validator,
        });
    }
    Ok(tools)
}

/// Refuse a descriptor field over its cap.
fn check_len(tool: &str, field: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max {
        return Err(format!(
            "tool `{tool}` has a {field} of {} bytes, over the limit of {max}",
            text.len()
        ));
    }
    Ok(())
}

/// MCP's tool-name rule: 1 to 128 characters from `A-Za-z0-9_-.`.
///
/// # Errors
///
/// The name breaks the rule; the message names it and says why.
pub fn check_tool_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 128 {
        return Err(format!(
            "tool name `{}` must be 1 to 128 characters long (it has {})",
            name.escape_default(),
            name.chars().count()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(format!(
            "tool name `{}` contains `{}`; names may use only A-Z, a-z, 0-9, `_`, `-` and `.`",
            name.escape_default(),
            bad.escape_default()
        ));
    }
    Ok(())
}

fn object_schema(tool: &str, kind: &str, text: &str) -> Result<Map<String, Value>, String> {
    let map = schema::parse(text)
        .map_err(|error| format!("tool `{tool}` has an {kind} schema that {error}"))?;
    if map.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!(
            "tool `{tool}` has an {kind} schema whose root is not `\"type\": \"object\"`"
        ));
    }
    Ok(map)
}

/// Whether `x-mcp-header` appears anywhere in `schema` (a superset of the
/// annotations rmcp reads, which sit on `properties` chains). Walked with a
/// stack of its own: the schema comes from a guest.
fn mentions_header_annotation(schema: &Map<String, Value>) -> bool {
    if schema.contains_key("x-mcp-header") {
        return true;
    }
    let mut pending: Vec<&Value> = schema.values().collect();
    while let Some(value) = pending.pop() {
        match value {
            Value::Object(map) if map.contains_key("x-mcp-header") => return true,
            Value::Object(map) => pending.extend(map.values()),
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_annotations_are_found_at_any_depth() {
        let plain = serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert!(!mentions_header_annotation(
            plain.as_object().expect("an object")
        ));
        let nested =
            serde_json::json!({"properties": {"a": {"properties": {"b": {"x-mcp-header": "B"}}}}});
        assert!(mentions_header_annotation(
            nested.as_object().expect("an object")
        ));
        let in_array = serde_json::json!({"anyOf": [{"x-mcp-header": "A"}]});
        assert!(mentions_header_annotation(
            in_array.as_object().expect("an object")
        ));
    }
    use crate::call::Annotations;

    fn raw(name: &str, input: &str, output: Option<&str>) -> RawDescriptor {
        RawDescriptor {
            name: name.into(),
            title: None,
            description: "d".into(),
            input_schema: input.into(),
            output_schema: output.map(str::to_owned),
            annotations: Annotations::default(),
            ..RawDescriptor::default()
        }
    }

    const OBJ: &str = r#"{"type":"object"}"#;

    #[test]
    fn names_follow_the_mcp_rule() {
        for good in ["a", "get_current_time", "x.y-z_1", &"n".repeat(128)] {
            assert!(check_tool_name(good).is_ok(), "{good}");
        }
        for (bad, needle) in [
            ("", "1 to 128"),
            (&"n".repeat(129) as &str, "1 to 128"),
            ("has space", "contains ` `"),
            ("slash/name", "contains `/`"),
            ("ünï", "contains"),
        ] {
            let error = check_tool_name(bad).expect_err(bad);
            assert!(error.contains(needle), "{bad}: {error}");
        }
    }

    #[test]
    fn descriptors_are_checked() {
        let check = |descriptors: Vec<RawDescriptor>| {
            validate_descriptors(descriptors).err().unwrap_or_default()
        };
        assert_eq!(check(vec![raw("a", OBJ, None)]), "");
        assert!(check(vec![]).contains("no tools"));
        assert!(check(vec![raw("a", OBJ, None), raw("a", OBJ, None)]).contains("twice"));
        assert!(check(vec![raw("a", "not json", None)]).contains("not JSON"));
        assert!(check(vec![raw("a", "[1]", None)]).contains("not a JSON object"));
        assert!(check(vec![raw("a", r#"{"type":"string"}"#, None)]).contains("root"));
        assert!(check(vec![raw("a", OBJ, Some("{}"))]).contains("output schema"));
        assert!(
            check(vec![raw(
                "a",
                r#"{"type":"object","minProperties":"x"}"#,
                None
            )])
            .contains("invalid input schema")
        );
    }
}
