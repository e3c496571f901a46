//! The SDK example tools in Rust (the same six in every language's
//! example): structured output, an error, logs and progress, a
//! confirmation, and two that hit the limits. Test-only.

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

export!(word_count, fail, chatty, archive, spin, hog);
