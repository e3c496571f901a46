//! What contract 0.2.0 adds, as a tool author writes it with the Rust SDK:
//! icons on a tool, a resource template and a prompt; a tool that declares
//! the client capability it needs; completions of a prompt argument and of
//! a template variable; the client's roots; questions asked under keys of
//! the tool's choosing, and (`ask_bad_keys`) every way to get a key wrong.
//!
//! With the `bad-icons` feature, `iconic`'s icon is a plain `http:` URL,
//! which the host must refuse (the whole file, with a message naming it).

use serde::Deserialize;
use serde_json::json;
use toolcage_guest::{
    Answer, Content, Icon, IconTheme, JsonSchema, KeyedQuestion, Output, PromptDef, PromptMessage,
    Question, ResourceBody, ResourceDef, export, tool,
};

#[cfg(not(feature = "bad-icons"))]
const TOOL_ICON: &str = "https://icons.example.com/iconic.png";
#[cfg(feature = "bad-icons")]
const TOOL_ICON: &str = "http://tracker.example.com/pixel.png";

/// A tool with icons
#[tool(icon = "data:image/svg+xml;base64,PHN2Zy8+", read_only)]
fn iconic() -> Result<Output, String> {
    Ok(Output::text("iconic"))
}

mod with_icon {
    /// The definition of `iconic`, with a second icon given by the builder.
    pub fn definition() -> toolcage_guest::ToolDef {
        super::iconic::definition().icon(
            toolcage_guest::Icon::new(super::TOOL_ICON)
                .mime_type("image/png")
                .size("48x48")
                .theme(super::IconTheme::Dark),
        )
    }
}

/// Asks the user a question; declares that it needs elicitation
#[tool(needs(elicitation))]
fn needs_elicit() -> Result<Output, String> {
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
    let answer = toolcage_guest::elicit_as("ok_to_go", "Go on?", &schema)?;
    Ok(Output::text(format!("{answer:?}")))
}

/// Lists the client's roots
#[tool(read_only)]
fn roots_listing() -> Result<Output, String> {
    let roots = toolcage_guest::roots()?;
    Ok(Output::text(
        roots
            .iter()
            .map(|r| format!("{} ({})", r.uri, r.name.as_deref().unwrap_or("-")))
            .collect::<Vec<_>>()
            .join("\n"),
    ))
}

#[derive(Deserialize, JsonSchema)]
struct BadKeysArgs {
    /// `repeat`, `reserved`, `confirm`, `long`, `space` or `too_many`
    case: String,
}

/// Asks with keys the host must refuse (the call traps with the reason)
#[tool]
fn ask_bad_keys(args: BadKeysArgs) -> Result<Output, String> {
    let q = |key: &str| KeyedQuestion {
        key: key.into(),
        question: Question::Roots,
    };
    let questions = match args.case.as_str() {
        "repeat" => vec![q("a"), q("a")],
        "reserved" => vec![q("elicit-0")],
        "confirm" => vec![q("toolcage-confirm")],
        "long" => vec![q(&"k".repeat(65))],
        "space" => vec![q("a b")],
        "too_many" => (0..17).map(|i| q(&format!("k{i}"))).collect(),
        other => return Err(format!("no case `{other}`")),
    };
    let answers = toolcage_guest::ask_batch(questions);
    Ok(Output::text(format!("{} answers", answers.len())))
}

/// Asks for a name and the roots in one round, under its own keys
#[tool]
fn ask_two() -> Result<Output, String> {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}});
    let answers = toolcage_guest::ask_batch(vec![
        KeyedQuestion {
            key: "who".into(),
            question: toolcage_guest::elicitation("Who are you?", &schema),
        },
        KeyedQuestion {
            key: "where".into(),
            question: Question::Roots,
        },
    ]);
    let mut parts = Vec::new();
    for answer in answers {
        parts.push(match answer {
            Ok(Answer::Elicit(response)) => format!("elicit: {response:?}"),
            Ok(Answer::Roots(roots)) => format!("roots: {}", roots.len()),
            Ok(Answer::Sample(response)) => format!("sample: {}", response.text),
            Err(reason) => format!("refused: {reason}"),
        });
    }
    Ok(Output::text(parts.join("; ")))
}

/// Where the file-backed resources' content lives (tests create it; the
/// operator grants resource reads this folder).
const NOTES_DIR: &str = "/tmp/toolcage-test-resource-files";

/// A resource whose content is a file: the host watches it (when the
/// operator grants resource reads its folder) and tells subscribers.
fn notes() -> ResourceDef {
    ResourceDef::new("notes://today", "today", || {
        std::fs::read_to_string(format!("{NOTES_DIR}/today.txt"))
            .map(ResourceBody::Text)
            .map_err(|error| format!("cannot read today's notes: {error}"))
    })
    .mime_type("text/plain")
    .watch(format!("{NOTES_DIR}/today.txt"))
}

/// A resource that says its content is a file no one granted: never
/// watched (and never readable).
fn passwords() -> ResourceDef {
    ResourceDef::new("notes://passwords", "passwords", || {
        std::fs::read_to_string("/etc/passwd")
            .map(ResourceBody::Text)
            .map_err(|error| format!("cannot read: {error}"))
    })
    .watch("/etc/passwd")
}

const KINDS: [&str; 4] = ["apple", "apricot", "banana", "blueberry"];

fn items() -> ResourceDef {
    ResourceDef::template("items://{kind}/{id}", "item", |vars| {
        Ok::<_, String>(ResourceBody::Text(format!(
            "{} {}",
            vars.get("kind").unwrap_or(""),
            vars.get("id").unwrap_or("")
        )))
    })
    .icon(Icon::new("https://icons.example.com/item.svg").size("any"))
    .complete("kind", |typed, _| {
        KINDS
            .iter()
            .filter(|k| k.starts_with(typed))
            .map(|k| (*k).to_owned())
            .collect()
    })
    .complete("id", |typed, context| {
        // The ids depend on the kind already chosen.
        let kind = context
            .iter()
            .find(|(name, _)| name == "kind")
            .map_or("any", |(_, value)| value.as_str());
        (1..=3).map(|n| format!("{kind}-{typed}{n}")).collect()
    })
}

#[derive(Deserialize, JsonSchema)]
struct PlanArgs {
    /// What to plan
    topic: String,
}

fn plan() -> PromptDef {
    PromptDef::new("plan", "Plan something", |args: PlanArgs| {
        Ok::<_, String>(vec![PromptMessage::user(Content::text(format!(
            "Plan: {}",
            args.topic
        )))])
    })
    .icon(Icon::new("https://icons.example.com/plan.png"))
    // More suggestions than one completion carries: the host keeps 100.
    .complete("topic", |typed, _| {
        (0..250).map(|n| format!("{typed}{n}")).collect()
    })
}

#[derive(Deserialize, JsonSchema)]
struct QuietArgs {
    /// A mood
    mood: String,
}

fn quiet() -> PromptDef {
    PromptDef::new(
        "quiet",
        "A prompt with nothing to complete",
        |args: QuietArgs| {
            Ok::<_, String>(vec![PromptMessage::user(Content::text(format!(
                "shh, {}",
                args.mood
            )))])
        },
    )
}

export!(
    tools: [with_icon, needs_elicit, roots_listing, ask_bad_keys, ask_two],
    resources: [items, notes, passwords],
    prompts: [plan, quiet],
);
