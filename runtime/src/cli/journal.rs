//! `toolcage journal`: the call journal, filtered, as text or as its
//! JSON lines.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use serde_json::Value;
use toolcage::terminal::{self, Form};

use crate::args::Common;
use crate::options::options;

/// `toolcage journal`: the config's journal file (or `--file`), oldest
/// first, filtered by tool, age and outcome.
pub(crate) fn run(
    common: &Common,
    tool: Option<String>,
    since: Option<String>,
    outcome: Option<String>,
    file: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let path = match file {
        Some(file) => file,
        None => {
            let options = options(common)?;
            match options.config.journal {
                Some(journal) if journal.to.is_some() => bail!(
                    "the journal goes to {} (`journal.to`), not to a file; read it where \
                     that stream is collected, or pass --file FILE",
                    if journal.to == Some(toolcage::config::JournalStream::Stdout) {
                        "stdout"
                    } else {
                        "stderr"
                    }
                ),
                Some(journal) => journal.path,
                None => bail!(
                    "the config has no `[journal]` section (or pass --file FILE); \
                     add `[journal]\\npath = \"~/.local/state/toolcage/journal.jsonl\"`"
                ),
            }
        }
    };
    let since_ms = match since {
        None => None,
        Some(age) => {
            let age = parse_age(&age)
                .with_context(|| format!("--since {age}: use 90s, 15m, 1h or 2d"))?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis();
            Some(u64::try_from(now.saturating_sub(age.as_millis())).unwrap_or(0))
        }
    };
    journal(&path, tool.as_deref(), since_ms, outcome.as_deref(), json)?;
    Ok(ExitCode::SUCCESS)
}

/// `90s`, `15m`, `1h`, `2d`.
fn parse_age(text: &str) -> Option<std::time::Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let seconds = match unit {
        "s" => number,
        "m" => number.checked_mul(60)?,
        "h" => number.checked_mul(3600)?,
        "d" => number.checked_mul(86_400)?,
        _ => return None,
    };
    Some(std::time::Duration::from_secs(seconds))
}

/// Print the journal at `path` (rotated files first), filtered.
fn journal(
    path: &Path,
    tool: Option<&str>,
    since_ms: Option<u64>,
    outcome: Option<&str>,
    as_json: bool,
) -> anyhow::Result<()> {
    use std::io::BufRead as _;
    let files = toolcage::journal::files(path);
    if files.is_empty() {
        bail!("no journal at `{}` yet", path.display());
    }
    // Its lines hold what clients and tools said (a client's name, a
    // tool's error): shown escaped, never obeyed by the terminal.
    let mut stdout = terminal::stdout(if as_json { Form::Json } else { Form::Text });
    for file in files {
        let reader = std::io::BufReader::new(
            std::fs::File::open(&file)
                .with_context(|| format!("cannot open `{}`", file.display()))?,
        );
        for line in reader.lines() {
            let line = line.with_context(|| format!("cannot read `{}`", file.display()))?;
            let Ok(entry) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if tool.is_some_and(|t| entry["tool"] != t)
                || outcome.is_some_and(|o| entry["outcome"] != o)
                || since_ms.is_some_and(|s| entry["unix_ms"].as_u64().unwrap_or(0) < s)
            {
                continue;
            }
            if as_json {
                writeln!(stdout, "{line}")?;
                continue;
            }
            let text = |key: &str| entry[key].as_str().unwrap_or("").to_owned();
            let message = entry["message"]
                .as_str()
                .map(|m| format!("  — {m}"))
                .unwrap_or_default();
            match entry["event"].as_str() {
                Some("agent") => {
                    writeln!(
                        stdout,
                        "{}  agent run {}  model {}  {} turns, {} calls, {} tokens  {}{message}",
                        text("time"),
                        text("run"),
                        text("model"),
                        entry["steps"],
                        entry["calls"],
                        entry["tokens"],
                        text("ending"),
                    )?;
                    continue;
                }
                Some(_) => {
                    writeln!(
                        stdout,
                        "{}  {:<20} task {} {}{message}",
                        text("time"),
                        text("tool"),
                        text("task"),
                        text("status"),
                    )?;
                    continue;
                }
                None => {}
            }
            let client = &entry["client"];
            let who = [
                client["transport"].as_str(),
                client["name"].as_str(),
                client["session"].as_str(),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
            let arguments = entry
                .get("arguments")
                .map(Value::to_string)
                .or_else(|| {
                    entry
                        .get("arguments_sha256")
                        .map(|d| format!("sha256:{}", d.as_str().unwrap_or("")))
                })
                .unwrap_or_default();
            let cut = arguments.chars().nth(80).is_some();
            let mut arguments: String = arguments.chars().take(80).collect();
            if cut {
                arguments.push('…');
            }
            writeln!(
                stdout,
                "{}  {:<20} {:<14} {:>9.1} ms  fuel {:>12}  mem {:>6.1} MiB  [{who}]  {arguments}{}",
                text("time"),
                text("tool"),
                text("outcome"),
                entry["duration_ms"].as_f64().unwrap_or(0.0),
                entry["fuel"].as_u64().unwrap_or(0),
                entry["peak_memory_bytes"].as_u64().unwrap_or(0) as f64 / 1048576.0,
                message,
            )?;
        }
    }
    Ok(())
}
