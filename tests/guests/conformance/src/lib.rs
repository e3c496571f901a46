//! The fixture tools of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, pinned in `tests/npm`), as one
//! toolcage component. The suite calls tools by name and checks what comes
//! back; names, arguments, texts and schemas follow the suite's scenario
//! descriptions and its reference server (`everything-server.ts`).
//!
//! Tools, resources (static text and binary, a template, a watched
//! resource) and prompts (simple, with arguments, with an embedded
//! resource, with an image). Completions are not served yet; those
//! scenarios are listed in `tests/conformance/expected-failures.txt`.
//!
//! Elicitation and sampling go through the SDK. On 2025-x clients they are
//! real requests to the client; on 2026-07-28 the host answers by replay
//! (the call stops with an input-required result and runs again once the
//! client answers), so every tool here asks before it does anything else.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use toolcage_guest::{
    Answer, Content, ElicitResponse, JsonSchema, KeyedQuestion, NoArguments, Output, PromptDef,
    PromptMessage, Question, ResourceBody, ResourceDef, Role, SamplingMessage, SamplingRequest,
    TemplateVars, export, tool,
};

/// The suite's 1x1 red PNG (`iVBORw0KGgo…` in its reference server).
const TEST_PNG: [u8; 70] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xfc, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x05, 0x02, 0x00, 0x5f, 0xc8, 0xf1, 0xd2, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// The suite's minimal WAV file (`UklGRiYAAABXQVZF…` in its reference server).
const TEST_WAV: [u8; 44] = [
    0x52, 0x49, 0x46, 0x46, 0x26, 0x00, 0x00, 0x00, 0x57, 0x41, 0x56, 0x45, 0x66, 0x6d, 0x74, 0x20,
    0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x40, 0x1f, 0x00, 0x00, 0x00, 0x7d, 0x00, 0x00,
    0x02, 0x00, 0x10, 0x00, 0x64, 0x61, 0x74, 0x61, 0x02, 0x00, 0x00, 0x00,
];

fn png() -> Content {
    Content::Image {
        data: TEST_PNG.to_vec(),
        mime_type: "image/png".into(),
    }
}

fn pause() {
    std::thread::sleep(Duration::from_millis(50));
}

/// An elicitation's outcome as the reference server prints it:
/// `action=<accept|decline|cancel>, content=<json>`.
fn describe(response: &ElicitResponse) -> String {
    match response {
        ElicitResponse::Accept(content) => {
            let content: Value = serde_json::from_str(content).unwrap_or_else(|_| json!({}));
            format!("action=accept, content={content}")
        }
        ElicitResponse::Decline => "action=decline, content={}".into(),
        ElicitResponse::Cancel => "action=cancel, content={}".into(),
    }
}

/// Ask for a form; `Some(values)` if the user accepted.
fn ask_form(message: &str, schema: Value) -> Result<Option<Value>, String> {
    match toolcage_guest::elicit(message, &schema)? {
        ElicitResponse::Accept(content) => serde_json::from_str(&content)
            .map(Some)
            .map_err(|error| format!("the answer is not JSON: {error}")),
        ElicitResponse::Decline | ElicitResponse::Cancel => Ok(None),
    }
}

/// A string field of an accepted form.
fn field(values: &Value, name: &str) -> String {
    match values.get(name) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn string_form(field: &str) -> Value {
    json!({
        "type": "object",
        "properties": {field: {"type": "string"}},
        "required": [field],
    })
}

fn confirm_form() -> Value {
    json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
    })
}

// ---------------------------------------------------------------------------
// Content types (tools-call-*)
// ---------------------------------------------------------------------------

/// Tests simple text content response
#[tool]
fn test_simple_text() -> Result<Output, String> {
    Ok(Output::text("This is a simple text response for testing."))
}

/// Tests image content response
#[tool]
fn test_image_content() -> Result<Output, String> {
    Ok(Output::new(vec![png()]))
}

/// Tests audio content response
#[tool]
fn test_audio_content() -> Result<Output, String> {
    Ok(Output::new(vec![Content::Audio {
        data: TEST_WAV.to_vec(),
        mime_type: "audio/wav".into(),
    }]))
}

/// Tests embedded resource content response
#[tool]
fn test_embedded_resource() -> Result<Output, String> {
    Ok(Output::new(vec![Content::Resource {
        uri: "test://embedded-resource".into(),
        mime_type: Some("text/plain".into()),
        body: ResourceBody::Text("This is an embedded resource content.".into()),
    }]))
}

/// Tests response with multiple content types (text, image, resource)
#[tool]
fn test_multiple_content_types() -> Result<Output, String> {
    Ok(Output::new(vec![
        Content::text("Multiple content types test:"),
        png(),
        Content::Resource {
            uri: "test://mixed-content-resource".into(),
            mime_type: Some("application/json".into()),
            body: ResourceBody::Text(json!({"test": "data", "value": 123}).to_string()),
        },
    ]))
}

/// Tests error response handling
#[tool]
fn test_error_handling() -> Result<Output, String> {
    Err("This tool intentionally returns an error for testing".into())
}

// ---------------------------------------------------------------------------
// Logging and progress
// ---------------------------------------------------------------------------

/// Tests tool that emits log messages during execution
#[tool]
fn test_tool_with_logging() -> Result<Output, String> {
    toolcage_guest::info!("Tool execution started");
    pause();
    toolcage_guest::info!("Tool processing data");
    pause();
    toolcage_guest::info!("Tool execution completed");
    Ok(Output::text("Tool with logging executed successfully"))
}

/// Tests tool that reports progress notifications
#[tool]
fn test_tool_with_progress() -> Result<Output, String> {
    for (i, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            pause();
        }
        toolcage_guest::progress(
            done,
            Some(100.0),
            Some(&format!("Completed step {done} of 100")),
        );
    }
    Ok(Output::text("Progress reported: 0, 50 and 100 of 100"))
}

/// Diagnostic logging validator tool: logs at info level. A 2026-07-28
/// request without `_meta.io.modelcontextprotocol/logLevel` must not see
/// the message.
#[tool]
fn test_logging_tool() -> Result<Output, String> {
    toolcage_guest::info!("Diagnostic trace logging activated");
    Ok(Output::text("Logging evaluated"))
}

// ---------------------------------------------------------------------------
// Sampling and elicitation, 2025-11-25 (requests to the client)
// ---------------------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
struct SamplingArgs {
    /// The prompt to send to the LLM
    prompt: String,
}

/// Tests server-initiated sampling (LLM completion request)
#[tool]
fn test_sampling(args: SamplingArgs) -> Result<Output, String> {
    Ok(Output::text(
        match toolcage_guest::sample(&args.prompt, 100) {
            Ok(text) => format!("LLM response: {text}"),
            Err(error) => format!("Sampling not supported or error: {error}"),
        },
    ))
}

#[derive(Deserialize, JsonSchema)]
struct ElicitationArgs {
    /// The message to show the user
    message: String,
}

/// Tests server-initiated elicitation (user input request)
#[tool]
fn test_elicitation(args: ElicitationArgs) -> Result<Output, String> {
    // The form of the suite's scenario description (its client answers
    // `username` and `email`).
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    });
    Ok(Output::text(
        match toolcage_guest::elicit(&args.message, &schema) {
            Ok(response) => format!("User response: {}", describe(&response)),
            Err(error) => format!("Elicitation not supported or error: {error}"),
        },
    ))
}

fn elicitation_completed(message: &str, schema: Value) -> Result<Output, String> {
    Ok(Output::text(
        match toolcage_guest::elicit(message, &schema) {
            Ok(response) => format!("Elicitation completed: {}", describe(&response)),
            Err(error) => format!("Elicitation not supported or error: {error}"),
        },
    ))
}

/// Tests elicitation with default values per SEP-1034
#[tool]
fn test_elicitation_sep1034_defaults() -> Result<Output, String> {
    elicitation_completed(
        "Please review and update the form fields with defaults",
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": true},
            },
            "required": [],
        }),
    )
}

/// Tests elicitation with enum schema improvements per SEP-1330
#[tool]
fn test_elicitation_sep1330_enums() -> Result<Output, String> {
    elicitation_completed(
        "Please select options from the enum fields",
        json!({
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Select one option",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Select one option with titles",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ],
                    },
                },
            },
            "required": [],
        }),
    )
}

// ---------------------------------------------------------------------------
// JSON Schema 2020-12 (SEP-1613, SEP-2106): the listed schema must survive
// verbatim, which `#[tool]` (schemars) cannot express.
// ---------------------------------------------------------------------------

fn json_schema_2020_12_tool(args: Value) -> Result<Output, String> {
    Ok(Output::text(format!(
        "JSON Schema 2020-12 tool called with: {args}"
    )))
}

#[doc(hidden)]
mod json_schema_2020_12_tool {
    pub fn definition() -> toolcage_guest::ToolDef {
        toolcage_guest::ToolDef::new(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            super::json_schema_2020_12_tool,
        )
        .with_input_schema(|| {
            serde_json::json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "$anchor": "addressDef",
                        "type": "object",
                        "properties": {
                            "street": {"type": "string"},
                            "city": {"type": "string"},
                        },
                    },
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"},
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {
                    "properties": {"contactMethod": {"const": "phone"}},
                    "required": ["contactMethod"],
                },
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false,
            })
        })
    }
}

// ---------------------------------------------------------------------------
// Custom headers (SEP-2243): an argument mirrored in an `Mcp-Param-Region`
// header, which the HTTP transport checks against the body. `x-mcp-header` is
// a vendor keyword a Rust type cannot carry, hence the hand-written schema.
// ---------------------------------------------------------------------------

fn test_custom_header(args: Value) -> Result<Output, String> {
    Ok(Output::text(format!("Region: {}", field(&args, "region"))))
}

#[doc(hidden)]
mod test_custom_header {
    pub fn definition() -> toolcage_guest::ToolDef {
        toolcage_guest::ToolDef::new(
            "test_custom_header",
            "Echoes `region`, which clients also send in the Mcp-Param-Region header (SEP-2243)",
            super::test_custom_header,
        )
        .with_input_schema(|| {
            serde_json::json!({
                "type": "object",
                "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                },
                "required": ["region"],
            })
        })
    }
}

// ---------------------------------------------------------------------------
// 2026-07-28: input-required results (SEP-2322) and stateless diagnostics
// (SEP-2575). Questions asked with `elicit`/`sample` are keyed by the host
// (`elicit-N`, `sample-N`); those asked with `elicit_as`/`ask_batch` under
// the names the suite expects (`user_name`), several in one round.
// ---------------------------------------------------------------------------

/// Ask for a form under `key`; `Some(values)` if the user accepted.
fn ask_form_as(key: &str, message: &str, schema: Value) -> Result<Option<Value>, String> {
    match toolcage_guest::elicit_as(key, message, &schema)? {
        ElicitResponse::Accept(content) => serde_json::from_str(&content)
            .map(Some)
            .map_err(|error| format!("the answer is not JSON: {error}")),
        ElicitResponse::Decline | ElicitResponse::Cancel => Ok(None),
    }
}

/// MRTR: returns InputRequiredResult with elicitation request
#[tool]
fn test_input_required_result_elicitation() -> Result<Output, String> {
    Ok(Output::text(
        match ask_form_as("user_name", "What is your name?", string_form("name"))? {
            Some(values) => format!("Hello, {}!", field(&values, "name")),
            None => "The user would not say.".into(),
        },
    ))
}

/// MRTR: returns InputRequiredResult with a roots/list request
#[tool]
fn test_input_required_result_list_roots() -> Result<Output, String> {
    let roots = toolcage_guest::roots()?;
    let uris: Vec<&str> = roots.iter().map(|root| root.uri.as_str()).collect();
    Ok(Output::text(format!(
        "Found {} root(s): {}",
        roots.len(),
        uris.join(", ")
    )))
}

/// MRTR: returns InputRequiredResult with sampling request
#[tool]
fn test_input_required_result_sampling() -> Result<Output, String> {
    let text = toolcage_guest::sample("What is the capital of France?", 100)?;
    Ok(Output::text(format!("Sampling result: {text}")))
}

/// MRTR: returns InputRequiredResult with requestState
#[tool]
fn test_input_required_result_request_state() -> Result<Output, String> {
    match ask_form("Please confirm", confirm_form())? {
        Some(values) if values.get("ok") == Some(&Value::Bool(true)) => {
            Ok(Output::text("state-ok: requestState validated"))
        }
        _ => Err("not confirmed".into()),
    }
}

/// MRTR: asks for a name (elicitation), a greeting (sampling) and the
/// client's roots, all in one round
#[tool]
fn test_input_required_result_multiple_inputs() -> Result<Output, String> {
    let answers = toolcage_guest::ask_batch(vec![
        KeyedQuestion {
            key: "user_name".into(),
            question: toolcage_guest::elicitation("What is your name?", &string_form("name")),
        },
        KeyedQuestion {
            key: "greeting".into(),
            question: Question::Sample(SamplingRequest {
                messages: vec![SamplingMessage {
                    role: Role::User,
                    text: "Generate a greeting".into(),
                }],
                system_prompt: None,
                max_tokens: 50,
                temperature: None,
            }),
        },
        KeyedQuestion {
            key: "client_roots".into(),
            question: Question::Roots,
        },
    ]);
    let mut parts = Vec::new();
    for answer in answers {
        parts.push(match answer? {
            Answer::Elicit(response) => format!("name ({})", describe(&response)),
            Answer::Sample(response) => format!("greeting ({})", response.text),
            Answer::Roots(roots) => format!("{} root(s)", roots.len()),
        });
    }
    Ok(Output::text(format!("Received: {}", parts.join("; "))))
}

/// MRTR: multi-round InputRequiredResult workflow
#[tool]
fn test_input_required_result_multi_round() -> Result<Output, String> {
    let name = match ask_form("Step 1: What is your name?", string_form("name"))? {
        Some(values) => field(&values, "name"),
        None => return Err("the user would not say".into()),
    };
    let color = match ask_form("Step 2: What is your favorite color?", string_form("color"))? {
        Some(values) => field(&values, "color"),
        None => return Err("the user would not say".into()),
    };
    Ok(Output::text(format!(
        "Multi-round complete for {name} who likes {color}"
    )))
}

/// MRTR: HMAC-signed requestState integrity test
#[tool]
fn test_input_required_result_tampered_state() -> Result<Output, String> {
    match ask_form("Please confirm", confirm_form())? {
        Some(_) => Ok(Output::text("integrity-ok: state verified")),
        None => Err("not confirmed".into()),
    }
}

/// MRTR: respects client capabilities in inputRequests
#[tool]
fn test_input_required_result_capabilities() -> Result<Output, String> {
    let mut received = Vec::new();
    // Each question is only asked if the client declared the capability;
    // otherwise the host refuses it at once and the tool goes on.
    if let Ok(response) = toolcage_guest::elicit("Elicitation input", &string_form("value")) {
        received.push(format!("elicitation ({})", describe(&response)));
    }
    if let Ok(text) = toolcage_guest::sample("Sample request", 50) {
        received.push(format!("sampling ({text})"));
    }
    Ok(Output::text(if received.is_empty() {
        "No supported capabilities declared".to_owned()
    } else {
        format!("capabilities-ok: received {}", received.join(", "))
    }))
}

/// Test tool requiring sampling
#[tool]
fn test_missing_capability() -> Result<Output, String> {
    let text = toolcage_guest::sample("Say hello", 10)?;
    Ok(Output::text(format!("Success: {text}")))
}

/// Diagnostic tool validating response progress streams: reports progress,
/// then asks the user a question.
#[tool]
fn test_streaming_elicitation() -> Result<Output, String> {
    toolcage_guest::progress(50.0, Some(100.0), None);
    Ok(Output::text(
        match ask_form("Anything to add?", string_form("value"))? {
            Some(values) => format!("Streaming complete: {}", field(&values, "value")),
            None => "Streaming complete".into(),
        },
    ))
}

// ---------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------

fn static_text() -> ResourceDef {
    ResourceDef::new("test://static-text", "static-text", || {
        Ok::<_, String>(ResourceBody::Text(
            "This is the content of the static text resource.".into(),
        ))
    })
    .description("A static text resource for testing")
    .mime_type("text/plain")
}

fn static_binary() -> ResourceDef {
    ResourceDef::new("test://static-binary", "static-binary", || {
        Ok::<_, String>(ResourceBody::Blob(TEST_PNG.to_vec()))
    })
    .description("A static binary resource (image) for testing")
    .mime_type("image/png")
}

fn watched_resource() -> ResourceDef {
    ResourceDef::new("test://watched-resource", "watched-resource", || {
        Ok::<_, String>(ResourceBody::Text("Watched resource content".into()))
    })
    .description("A resource for subscription testing")
    .mime_type("text/plain")
}

fn template_data() -> ResourceDef {
    ResourceDef::template(
        "test://template/{id}/data",
        "template-data",
        |vars: &TemplateVars| {
            let id = vars.get("id").unwrap_or_default();
            Ok::<_, String>(ResourceBody::Text(
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                    .to_string(),
            ))
        },
    )
    .description("A resource template with parameter substitution")
    .mime_type("application/json")
}

// ---------------------------------------------------------------------------
// Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663)
// ---------------------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet
    name: String,
}

/// Greets someone; never runs as a task
#[tool]
fn greet(args: GreetArgs) -> Result<Output, String> {
    Ok(Output::text(format!("Hello, {}!", args.name)))
}

#[derive(Deserialize, JsonSchema)]
struct SlowArgs {
    /// How long to compute, in seconds
    seconds: f64,
    /// A label to echo
    label: String,
}

/// Computes for `seconds` seconds, then answers; runs as a task when the
/// client accepts tasks
#[tool(task = "optional")]
fn slow_compute(args: SlowArgs) -> Result<Output, String> {
    let seconds = args.seconds.clamp(0.0, 3600.0);
    let steps = (seconds * 10.0).ceil() as u64;
    for step in 0..steps {
        toolcage_guest::progress(
            step as f64,
            Some(steps as f64),
            Some(&format!("computing {}", args.label)),
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(Output::text(format!(
        "Computed {} after {seconds} s",
        args.label
    )))
}

/// Fails with a tool error after about a second; runs only as a task
#[tool(task = "required")]
fn failing_job() -> Result<Output, String> {
    std::thread::sleep(Duration::from_secs(1));
    Err("the job failed, as it always does".into())
}

/// Crashes (a trap, not a tool error): its task ends as failed
#[tool(task = "optional")]
fn protocol_error_job() -> Result<Output, String> {
    std::thread::sleep(Duration::from_millis(200));
    panic!("the job crashed");
}

#[derive(Deserialize, JsonSchema)]
struct DeleteArgs {
    /// The file to delete
    filename: String,
}

/// Asks the user to confirm, inside its task, before it "deletes" a file
#[tool(task = "optional")]
fn confirm_delete(args: DeleteArgs) -> Result<Output, String> {
    let schema = json!({
        "type": "object",
        "properties": {"confirm": {"type": "boolean"}},
        "required": ["confirm"],
    });
    match ask_form(&format!("Delete {}?", args.filename), schema)? {
        Some(values) if values.get("confirm") == Some(&Value::Bool(true)) => {
            Ok(Output::text(format!("Deleted {}", args.filename)))
        }
        _ => Ok(Output::text(format!("Kept {}", args.filename))),
    }
}

/// Asks two questions at once, inside its task
#[tool(task = "optional")]
fn multi_input() -> Result<Output, String> {
    let form = json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
    });
    let answers = toolcage_guest::ask_batch(vec![
        KeyedQuestion {
            key: "first".into(),
            question: toolcage_guest::elicitation("First input?", &form),
        },
        KeyedQuestion {
            key: "second".into(),
            question: toolcage_guest::elicitation("Second input?", &form),
        },
    ]);
    let mut names = Vec::new();
    for answer in answers {
        if let Answer::Elicit(response) = answer? {
            names.push(describe(&response));
        }
    }
    Ok(Output::text(format!("Received: {}", names.join("; "))))
}

/// Asks for the user's name in its request, then runs on as a task
#[tool(task = "required", task_start = "on_begin_task")]
fn test_tool_with_task() -> Result<Output, String> {
    let name = match ask_form_as("user_name", "What is your name?", string_form("name"))? {
        Some(values) => field(&values, "name"),
        None => return Err("the user would not say".into()),
    };
    toolcage_guest::begin_task();
    std::thread::sleep(Duration::from_millis(300));
    Ok(Output::text(format!("Hello, {name}, from a task")))
}

// ---------------------------------------------------------------------------
// Prompts
// ---------------------------------------------------------------------------

fn test_simple_prompt() -> PromptDef {
    PromptDef::new(
        "test_simple_prompt",
        "A simple prompt without arguments",
        |_: NoArguments| {
            Ok::<_, String>(vec![PromptMessage::user(Content::text(
                "This is a simple prompt for testing.",
            ))])
        },
    )
}

#[derive(Deserialize, JsonSchema)]
struct PromptArgs {
    /// First test argument
    arg1: String,
    /// Second test argument
    arg2: String,
}

fn test_prompt_with_arguments() -> PromptDef {
    PromptDef::new(
        "test_prompt_with_arguments",
        "A prompt with required arguments",
        |args: PromptArgs| {
            Ok::<_, String>(vec![PromptMessage::user(Content::text(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                args.arg1, args.arg2
            )))])
        },
    )
    // Completions: the words that start with what was typed.
    .complete("arg1", |typed, _| {
        ["test", "testing", "tested", "value"]
            .iter()
            .filter(|word| word.starts_with(typed))
            .map(|word| (*word).to_owned())
            .collect()
    })
}

/// MRTR from prompts/get: asks for context before building the prompt.
fn test_input_required_result_prompt() -> PromptDef {
    PromptDef::new(
        "test_input_required_result_prompt",
        "A prompt that asks the user for context first",
        |_: NoArguments| {
            let context = match ask_form_as(
                "user_context",
                "What context should the prompt use?",
                string_form("context"),
            )? {
                Some(values) => field(&values, "context"),
                None => return Err("the user gave no context".to_owned()),
            };
            Ok::<_, String>(vec![PromptMessage::user(Content::text(format!(
                "Prompt with context: {context}"
            )))])
        },
    )
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct EmbeddedArgs {
    /// URI of the resource to embed
    resource_uri: String,
}

fn test_prompt_with_embedded_resource() -> PromptDef {
    PromptDef::new(
        "test_prompt_with_embedded_resource",
        "A prompt that includes an embedded resource",
        |args: EmbeddedArgs| {
            Ok::<_, String>(vec![
                PromptMessage::user(Content::Resource {
                    uri: args.resource_uri,
                    mime_type: Some("text/plain".into()),
                    body: ResourceBody::Text("Embedded resource content for testing.".into()),
                }),
                PromptMessage::user(Content::text("Please process the embedded resource above.")),
            ])
        },
    )
}

fn test_prompt_with_image() -> PromptDef {
    PromptDef::new(
        "test_prompt_with_image",
        "A prompt that includes image content",
        |_: NoArguments| {
            Ok::<_, String>(vec![
                PromptMessage::user(png()),
                PromptMessage::user(Content::text("Please analyze the image above.")),
            ])
        },
    )
}

export!(
    tools: [
    test_simple_text,
    test_image_content,
    test_audio_content,
    test_embedded_resource,
    test_multiple_content_types,
    test_error_handling,
    test_tool_with_logging,
    test_tool_with_progress,
    test_logging_tool,
    test_sampling,
    test_elicitation,
    test_elicitation_sep1034_defaults,
    test_elicitation_sep1330_enums,
    json_schema_2020_12_tool,
    test_custom_header,
    test_input_required_result_elicitation,
    test_input_required_result_list_roots,
    test_input_required_result_sampling,
    test_input_required_result_request_state,
    test_input_required_result_multiple_inputs,
    test_input_required_result_multi_round,
    test_input_required_result_tampered_state,
    test_input_required_result_capabilities,
    test_missing_capability,
    test_streaming_elicitation,
    greet,
    slow_compute,
    failing_job,
    protocol_error_job,
    confirm_delete,
    multi_input,
    test_tool_with_task,
    ],
    resources: [static_text, static_binary, watched_resource, template_data],
    prompts: [
        test_simple_prompt,
        test_prompt_with_arguments,
        test_prompt_with_embedded_resource,
        test_prompt_with_image,
        test_input_required_result_prompt,
    ],
);
