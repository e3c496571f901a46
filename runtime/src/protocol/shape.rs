//! The one seam between what a component returns and the wire: every
//! mapping from a guest's descriptors and results to MCP types (tools,
//! resources, templates, prompts, call results and their content, resource
//! contents, prompt messages, input requests) lives here, so that a change
//! in how results are shaped on the wire (the protocol is discussing
//! negotiated result variants in place of `content`/`structuredContent`)
//! is this module's work alone. The table of cases at the end pins it.

use std::sync::Arc;

use base64::Engine as _;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, CompleteResult, CompletionInfo, ContentBlock, GetPromptResult, Icon,
    InputRequest, InputRequiredResult, Prompt, PromptArgument, PromptMessage, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, Role, TASKS_EXTENSION_ID, Tool, ToolAnnotations,
};

use super::LIST_TTL_MS;
use crate::call::{
    Content, IconTheme, PendingInput, PromptOutput, PromptRole, RawPrompt, RawResource,
    RawTemplate, ResourceBody, ResourceContent, TaskSupport,
};
use crate::catalog::ToolDescriptor;
use crate::dispatch::CallOutput;
use crate::services::{self, sign_state};

pub(super) fn to_mcp_resource(d: &RawResource) -> Resource {
    let mut resource = Resource::new(d.uri.clone(), d.name.clone());
    if let Some(title) = &d.title {
        resource = resource.with_title(title.clone());
    }
    if let Some(description) = &d.description {
        resource = resource.with_description(description.clone());
    }
    if let Some(mime) = &d.mime_type {
        resource = resource.with_mime_type(mime.clone());
    }
    if let Some(size) = d.size {
        resource = resource.with_size(size);
    }
    resource.icons = to_mcp_icons(&d.icons);
    resource
}

/// Icons as MCP lists them (`None` for none, so the key is left out).
fn to_mcp_icons(icons: &[crate::call::Icon]) -> Option<Vec<Icon>> {
    if icons.is_empty() {
        return None;
    }
    Some(
        icons
            .iter()
            .map(|icon| {
                let mut mcp = Icon::new(icon.src.clone());
                if let Some(mime) = &icon.mime_type {
                    mcp = mcp.with_mime_type(mime.clone());
                }
                if !icon.sizes.is_empty() {
                    mcp = mcp.with_sizes(icon.sizes.clone());
                }
                if let Some(theme) = icon.theme {
                    mcp = mcp.with_theme(match theme {
                        IconTheme::Light => rmcp::model::IconTheme::Light,
                        IconTheme::Dark => rmcp::model::IconTheme::Dark,
                    });
                }
                mcp
            })
            .collect(),
    )
}

pub(super) fn to_mcp_template(d: &RawTemplate) -> ResourceTemplate {
    let mut template = ResourceTemplate::new(d.uri_template.clone(), d.name.clone());
    if let Some(title) = &d.title {
        template = template.with_title(title.clone());
    }
    if let Some(description) = &d.description {
        template = template.with_description(description.clone());
    }
    if let Some(mime) = &d.mime_type {
        template = template.with_mime_type(mime.clone());
    }
    template.icons = to_mcp_icons(&d.icons);
    template
}

pub(super) fn to_mcp_prompt(d: &RawPrompt) -> Prompt {
    let arguments = d
        .arguments
        .iter()
        .map(|a| {
            let mut argument = PromptArgument::new(a.name.clone()).with_required(a.required);
            if let Some(title) = &a.title {
                argument = argument.with_title(title.clone());
            }
            if let Some(description) = &a.description {
                argument = argument.with_description(description.clone());
            }
            argument
        })
        .collect::<Vec<_>>();
    let arguments = (!arguments.is_empty()).then_some(arguments);
    let mut prompt = Prompt::new(d.name.clone(), d.description.clone(), arguments);
    if let Some(title) = &d.title {
        prompt = prompt.with_title(title.clone());
    }
    prompt.icons = to_mcp_icons(&d.icons);
    prompt
}

/// A tool as `tools/list` shows it, with `task_support` (the component's,
/// or the operator's `tasks`), which goes in `_meta` under the tasks
/// extension's name when it is not `forbidden` (the 2026-07-28 `Tool` has
/// no field for it).
pub fn to_mcp_tool(descriptor: &ToolDescriptor, task_support: TaskSupport) -> Tool {
    let a = descriptor.annotations;
    let mut annotations = ToolAnnotations::new()
        .read_only(a.read_only)
        .destructive(a.destructive)
        .idempotent(a.idempotent)
        .open_world(a.open_world);
    if let Some(title) = &descriptor.title {
        annotations.title = Some(title.clone());
    }
    let mut tool = Tool::new(
        descriptor.name.clone(),
        descriptor.description.clone(),
        Arc::clone(&descriptor.input_schema),
    )
    .with_annotations(annotations);
    if let Some(title) = &descriptor.title {
        tool = tool.with_title(title.clone());
    }
    if let Some(schema) = &descriptor.output_schema {
        tool = tool.with_raw_output_schema(Arc::clone(schema));
    }
    tool.icons = to_mcp_icons(&descriptor.icons);
    if task_support != TaskSupport::Forbidden {
        let mut meta = serde_json::Map::new();
        meta.insert(
            TASKS_EXTENSION_ID.to_owned(),
            serde_json::json!({"taskSupport": task_support.name()}),
        );
        tool.meta = Some(rmcp::model::MetaObject(meta));
    }
    tool
}

/// Convert a dispatcher result to MCP's `CallToolResult`.
pub fn to_mcp_result(output: CallOutput) -> CallToolResult {
    let content: Vec<ContentBlock> = output.content.into_iter().map(to_mcp_content).collect();
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = output.structured;
    result
}

/// Convert one content item to MCP (binary data base64-encoded).
fn to_mcp_content(item: Content) -> ContentBlock {
    match item {
        Content::Text(text) => ContentBlock::text(text),
        Content::Image { data, mime_type } => ContentBlock::image(base64(&data), mime_type),
        Content::Audio { data, mime_type } => ContentBlock::audio(base64(&data), mime_type),
        Content::Resource {
            uri,
            mime_type,
            body,
        } => ContentBlock::resource(to_mcp_contents(uri, mime_type, body)),
    }
}

/// One resource's contents, embedded in a result or read
/// (`resources/read`): text as is, binary data base64-encoded.
fn to_mcp_contents(uri: String, mime_type: Option<String>, body: ResourceBody) -> ResourceContents {
    let contents = match body {
        ResourceBody::Text(text) => ResourceContents::text(text, uri),
        ResourceBody::Blob(bytes) => ResourceContents::blob(base64(&bytes), uri),
    };
    match mime_type {
        Some(mime) => contents.with_mime_type(mime),
        None => contents,
    }
}

fn base64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// A prompt's messages as `prompts/get` returns them.
pub(super) fn to_mcp_prompt_result(output: PromptOutput) -> GetPromptResult {
    let messages = output
        .messages
        .into_iter()
        .map(|m| {
            let role = match m.role {
                PromptRole::User => Role::User,
                PromptRole::Assistant => Role::Assistant,
            };
            PromptMessage::new(role, to_mcp_content(m.content))
        })
        .collect();
    let mut result = GetPromptResult::new(messages);
    result.description = output.description;
    result
}

/// A resource's contents as `resources/read` returns them (binary data
/// base64-encoded); with a time to live for 2026-07-28 clients.
pub(super) fn to_mcp_resource_result(
    contents: Vec<ResourceContent>,
    stateless: bool,
) -> ReadResourceResult {
    let contents = contents
        .into_iter()
        .map(|c| to_mcp_contents(c.uri, c.mime_type, c.body))
        .collect();
    let mut result = ReadResourceResult::new(contents);
    if stateless {
        result = result.with_ttl_ms(LIST_TTL_MS);
    }
    result
}

/// A component's completion as `completion/complete` answers it.
pub(super) fn to_mcp_completion(completion: crate::call::Completion) -> CompleteResult {
    // The dispatcher keeps at most MCP's 100 values, so this always fits.
    let mut info = CompletionInfo::default();
    info.values = completion.values;
    info.total = completion.total;
    info.has_more = Some(completion.has_more);
    CompleteResult::new(info)
}

/// A call stopped to ask the client (2026-07-28): its input requests,
/// keyed as the call keyed them, and the signed state of the answers so
/// far.
pub(super) fn input_required(
    pending: Vec<PendingInput>,
    keys: Option<&crate::config::StateKeys>,
    digest: &str,
    answers: &std::collections::BTreeMap<String, serde_json::Value>,
) -> Result<InputRequiredResult, McpError> {
    // The state names what is asked now: a retry's answers to anything
    // else are not taken (see `request::replay_answers`).
    let state = sign_state(
        keys,
        digest,
        answers,
        pending.iter().map(|p| p.key.as_str()),
    );
    Ok(InputRequiredResult::new(
        Some(input_requests(pending)?),
        Some(state),
    ))
}

/// The `inputRequests` map of `pending` questions.
pub(super) fn input_requests(
    pending: Vec<PendingInput>,
) -> Result<std::collections::BTreeMap<String, InputRequest>, McpError> {
    pending
        .into_iter()
        .map(|pending| {
            let request: InputRequest = serde_json::from_value(services::question_request(
                &pending.ask,
            ))
            .map_err(|error| {
                McpError::internal_error(format!("cannot build the input request: {error}"), None)
            })?;
            Ok((pending.key, request))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    //! The mapping to the wire, case by case: what toolcage hands rmcp and
    //! the JSON MCP clients then read.

    use serde_json::{Value, json};

    use super::*;
    use crate::call::Annotations;

    /// `value` as sent equals `expect`.
    fn check(value: impl serde::Serialize, expect: Value) {
        let got = serde_json::to_value(value).expect("serialises");
        assert_eq!(got, expect, "\n got: {got:#}\nwant: {expect:#}");
    }

    #[test]
    fn results() {
        let cases = [
            (
                CallOutput::result(vec![Content::Text("hi".into())], None, false),
                json!({"content": [{"type": "text", "text": "hi"}], "isError": false, "resultType": "complete"}),
            ),
            (
                CallOutput::error("tool `x` ran out of fuel (limit 5)"),
                json!({
                    "content": [{"type": "text", "text": "tool `x` ran out of fuel (limit 5)"}],
                    "isError": true,
                    "resultType": "complete"
                }),
            ),
            (
                CallOutput::result(
                    vec![Content::Text("{\"n\":1}".into())],
                    Some(json!({"n": 1})),
                    false,
                ),
                json!({
                    "content": [{"type": "text", "text": "{\"n\":1}"}],
                    "structuredContent": {"n": 1},
                    "isError": false,
                    "resultType": "complete"
                }),
            ),
            (
                CallOutput::result(
                    vec![
                        Content::Image {
                            data: vec![0, 1, 2],
                            mime_type: "image/png".into(),
                        },
                        Content::Audio {
                            data: b"RIFF".to_vec(),
                            mime_type: "audio/wav".into(),
                        },
                    ],
                    None,
                    false,
                ),
                json!({
                    "content": [
                        {"type": "image", "data": "AAEC", "mimeType": "image/png"},
                        {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
                    ],
                    "isError": false,
                    "resultType": "complete"
                }),
            ),
            (
                CallOutput::result(
                    vec![
                        Content::Resource {
                            uri: "file:///a.txt".into(),
                            mime_type: Some("text/plain".into()),
                            body: ResourceBody::Text("a".into()),
                        },
                        Content::Resource {
                            uri: "mem://b".into(),
                            mime_type: None,
                            body: ResourceBody::Blob(vec![255]),
                        },
                    ],
                    None,
                    false,
                ),
                json!({
                    "content": [
                        {"type": "resource", "resource":
                            {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "a"}},
                        {"type": "resource", "resource": {"uri": "mem://b", "blob": "/w=="}}
                    ],
                    "isError": false,
                    "resultType": "complete"
                }),
            ),
        ];
        for (output, expect) in cases {
            check(to_mcp_result(output), expect);
        }
    }

    #[test]
    fn tools() {
        let schema = |v: Value| match v {
            Value::Object(map) => Arc::new(map),
            _ => unreachable!("an object"),
        };
        let plain = ToolDescriptor {
            name: "t".into(),
            title: None,
            description: "Does t.".into(),
            input_schema: schema(json!({"type": "object"})),
            output_schema: None,
            annotations: Annotations::default(),
            icons: Vec::new(),
            execution: crate::call::Execution::default(),
            needs: crate::config::ClientNeeds::default(),
        };
        check(
            to_mcp_tool(&plain, TaskSupport::Forbidden),
            json!({
                "name": "t",
                "description": "Does t.",
                "inputSchema": {"type": "object"},
                "annotations": {
                    "readOnlyHint": false,
                    "destructiveHint": false,
                    "idempotentHint": false,
                    "openWorldHint": false
                }
            }),
        );
        let full = ToolDescriptor {
            title: Some("Tee".into()),
            output_schema: Some(schema(json!({"type": "object", "properties": {}}))),
            annotations: Annotations {
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: true,
            },
            icons: vec![
                crate::call::Icon {
                    src: "https://example.com/t.png".into(),
                    mime_type: Some("image/png".into()),
                    sizes: vec!["48x48".into()],
                    theme: Some(IconTheme::Dark),
                },
                crate::call::Icon {
                    src: "data:image/svg+xml;base64,PHN2Zy8+".into(),
                    mime_type: None,
                    sizes: Vec::new(),
                    theme: None,
                },
            ],
            ..plain
        };
        check(
            to_mcp_tool(&full, TaskSupport::Optional),
            json!({
                "name": "t",
                "title": "Tee",
                "description": "Does t.",
                "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object", "properties": {}},
                "annotations": {
                    "title": "Tee",
                    "readOnlyHint": true,
                    "destructiveHint": false,
                    "idempotentHint": true,
                    "openWorldHint": true
                },
                "icons": [
                    {"src": "https://example.com/t.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"},
                    {"src": "data:image/svg+xml;base64,PHN2Zy8+"}
                ],
                "_meta": {"io.modelcontextprotocol/tasks": {"taskSupport": "optional"}}
            }),
        );
    }
}
