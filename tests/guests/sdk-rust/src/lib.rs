//! The SDK example tools in Rust (the same six in every language's
//! example): structured output, an error, logs and progress, a
//! confirmation, and two that hit the limits; and `where`, which shows what
//! contract 0.2.0 added (an icon, task support, a client need, the client's
//! roots, a keyed question), as the other languages' examples do. Test-only.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use toolcage_guest::{JsonSchema, Output, export, tool};

#[derive(Deserialize, JsonSchema)]
struct WordCountArgs {
    /// The text to count the words of.
    #[schemars(length(min = 1))]
    text: String,
    /// Also count distinct words, ignoring case.
    #[serde(default)]
    unique: bool,
}

/// How many words a text has.
#[derive(Serialize, JsonSchema)]
struct WordCount {
    words: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    unique_words: Option<usize>,
}

/// Count the words in a text.
#[tool(read_only, idempotent)]
fn word_count(args: WordCountArgs) -> Result<WordCount, String> {
    let words: Vec<&str> = args.text.split_whitespace().collect();
    let unique_words = args.unique.then(|| {
        words
            .iter()
            .map(|w| w.to_lowercase())
            .collect::<HashSet<_>>()
            .len()
    });
    Ok(WordCount {
        words: words.len(),
        unique_words,
    })
}

#[derive(Deserialize, JsonSchema)]
struct FailArgs {
    /// What the error says.
    message: String,
}

/// Fail with the given message.
#[tool]
fn fail(args: FailArgs) -> Result<Output, String> {
    Err(args.message)
}

#[derive(Deserialize, JsonSchema)]
struct ChattyArgs {
    /// How many steps to take.
    #[schemars(range(min = 1, max = 10))]
    steps: u32,
}

/// Log each step and report progress.
#[tool]
fn chatty(args: ChattyArgs) -> Result<Output, String> {
    for i in 1..=args.steps {
        toolcage_guest::info!("step {i}");
        toolcage_guest::progress(
            f64::from(i),
            Some(f64::from(args.steps)),
            Some(&format!("step {i}")),
        );
    }
    Ok(Output::text(format!("done after {} steps", args.steps)))
}

#[derive(Deserialize, JsonSchema)]
struct ArchiveArgs {
    /// What to archive.
    name: String,
}

/// Archive something, once the user confirms.
#[tool]
fn archive(args: ArchiveArgs) -> Result<Output, String> {
    if !toolcage_guest::confirm(&format!("Archive {}?", args.name))? {
        return Err("not archived: the user said no".into());
    }
    Ok(Output::text(format!("archived {}", args.name)))
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

/// Loop forever (for the limits).
#[tool]
fn spin(_args: Nothing) -> Result<Output, String> {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

#[derive(Deserialize, JsonSchema)]
struct HogArgs {
    /// How many MiB.
    mib: usize,
}

/// Allocate and touch memory.
#[tool]
fn hog(args: HogArgs) -> Result<Output, String> {
    let blocks: Vec<Vec<u8>> = (0..args.mib).map(|_| vec![1u8; 1024 * 1024]).collect();
    std::hint::black_box(&blocks);
    Ok(Output::text(format!("allocated {} MiB", args.mib)))
}

#[derive(Deserialize, JsonSchema)]
struct WhereArgs {
    /// Ask for them as a question under this key instead.
    key: Option<String>,
}

/// List the folders the user works in (the client's roots), one URI a line.
#[tool(task = "optional", needs(roots))]
fn r#where(args: WhereArgs) -> Result<Output, String> {
    let shared = match args.key {
        None => toolcage_guest::roots()?,
        Some(key) => match toolcage_guest::ask_batch(vec![toolcage_guest::KeyedQuestion {
            key,
            question: toolcage_guest::Question::Roots,
        }])
        .pop()
        {
            Some(Ok(toolcage_guest::Answer::Roots(roots))) => roots,
            Some(Err(reason)) => return Err(reason),
            _ => return Err("no roots in the answer".into()),
        },
    };
    let uris: Vec<&str> = shared.iter().map(|root| root.uri.as_str()).collect();
    Ok(Output::text(if uris.is_empty() {
        "no roots".to_owned()
    } else {
        uris.join("\n")
    }))
}

/// `where` with its icon, which the attribute's short form cannot describe
/// in full (a MIME type and a size).
mod where_tool {
    pub fn definition() -> toolcage_guest::ToolDef {
        super::r#where::definition().icon(
            toolcage_guest::Icon::new("data:image/svg+xml;base64,PHN2Zy8+")
                .mime_type("image/svg+xml")
                .size("any"),
        )
    }
}

export!(word_count, fail, chatty, archive, spin, hog, where_tool);
