//! `side-by-side`: the same operations against several servers in one run,
//! alternating, reported as ratios to the first server.
//!
//! Each round runs, for every operation, the latency benchmark against
//! every server, then the throughput benchmark against every server, and
//! (with `--startup`) start-up and idle memory; the order of the servers
//! rotates from round to round, so that no server is always first after a
//! quiet (or busy) moment. Every measurement starts a fresh server, over
//! stdio. A figure is the median over the rounds; a ratio is a server's
//! median over the first server's.
//!
//! A server may name an operation's tool differently (wassette's
//! filesystem example serves `read-file` where the reference serves
//! `read_text_file`): `--tool-name LABEL:TOOL=NAME` makes server LABEL
//! called with NAME, the same arguments, wherever the operation says TOOL.

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

use crate::client::{CallTemplate, ServerCommand};
use crate::stats;
use crate::{Sequential, latency_run, ms, startup_run, throughput_run, us};

/// One server under comparison.
pub struct Contender {
    /// Its label in the report.
    pub label: String,
    /// How to start it.
    pub command: ServerCommand,
    /// Operation tool → the name this server serves it under.
    pub tool_names: Vec<(String, String)>,
}

impl Contender {
    /// Parse `LABEL=COMMAND ARGS...` (split on whitespace; no quoting).
    ///
    /// # Errors
    ///
    /// No `=`, an empty label, or no command.
    pub fn parse(text: &str, stderr: Option<&std::path::Path>) -> anyhow::Result<Contender> {
        let (label, command) = text.split_once('=').with_context(|| {
            format!("--server `{text}` is not LABEL=COMMAND, like 'toolcage=toolcage serve ...'")
        })?;
        let argv: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
        ensure!(!label.trim().is_empty(), "--server `{text}` has no label");
        ensure!(!argv.is_empty(), "--server `{text}` has no command");
        Ok(Contender {
            label: label.trim().to_owned(),
            command: ServerCommand {
                argv,
                stderr: stderr.map(std::path::Path::to_path_buf),
            },
            tool_names: Vec::new(),
        })
    }

    /// The name this server serves `tool` under.
    fn tool_name<'a>(&'a self, tool: &'a str) -> &'a str {
        self.tool_names
            .iter()
            .find(|(from, _)| from == tool)
            .map_or(tool, |(_, to)| to)
    }
}

/// Apply `--tool-name LABEL:TOOL=NAME` options to the servers.
///
/// # Errors
///
/// A malformed option, or a label no `--server` has.
pub fn rename_tools(contenders: &mut [Contender], options: &[String]) -> anyhow::Result<()> {
    for option in options {
        let parsed = option
            .split_once(':')
            .and_then(|(label, rest)| rest.split_once('=').map(|(from, to)| (label, from, to)));
        let Some((label, from, to)) =
            parsed.filter(|(l, f, t)| !l.is_empty() && !f.is_empty() && !t.is_empty())
        else {
            bail!(
                "--tool-name `{option}` is not LABEL:TOOL=NAME, like 'wassette:read_text_file=read-file'"
            );
        };
        let contender = contenders
            .iter_mut()
            .find(|c| c.label == label)
            .with_context(|| {
                format!("--tool-name `{option}`: no --server is labelled `{label}`")
            })?;
        contender.tool_names.push((from.to_owned(), to.to_owned()));
    }
    Ok(())
}

/// One operation: a tool and its arguments.
pub struct Operation {
    /// The tool.
    pub tool: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
}

impl Operation {
    /// Parse `TOOL=JSON`.
    ///
    /// # Errors
    ///
    /// No `=`, or the arguments are not a JSON object.
    pub fn parse(text: &str) -> anyhow::Result<Operation> {
        let (tool, arguments) = text.split_once('=').with_context(|| {
            format!("--op `{text}` is not TOOL=JSON, like 'read_text_file={{\"path\":\"/tmp/a\"}}'")
        })?;
        let arguments: Value = serde_json::from_str(arguments)
            .with_context(|| format!("--op `{text}`: the arguments are not JSON"))?;
        if !arguments.is_object() {
            bail!("--op `{text}`: the arguments must be a JSON object");
        }
        Ok(Operation {
            tool: tool.to_owned(),
            arguments,
        })
    }
}

/// How much of each benchmark a round does.
pub struct Plan {
    /// Rounds.
    pub rounds: u32,
    /// Timed sequential calls per latency run.
    pub calls: u64,
    /// Untimed calls before them.
    pub warmup: u64,
    /// Calls per throughput run; 0 skips throughput.
    pub throughput_calls: u64,
    /// Requests in flight in the throughput runs.
    pub in_flight: usize,
    /// Also measure start-up and idle memory.
    pub startup: bool,
}

/// One figure of one server in one round.
#[derive(Default, Clone)]
struct Figures {
    p50_us: Vec<f64>,
    p99_us: Vec<f64>,
    calls_per_s: Vec<f64>,
    peak_rss_mib: Vec<f64>,
}

#[derive(Default, Clone)]
struct StartupFigures {
    ready_ms: Vec<f64>,
    idle_rss_mib: Vec<f64>,
}

/// Run the plan and print the report (a table, or JSON).
///
/// # Errors
///
/// Fewer than two servers, no operation, or any measurement failed.
pub async fn side_by_side(
    contenders: &[Contender],
    operations: &[Operation],
    plan: &Plan,
    as_json: bool,
) -> anyhow::Result<()> {
    ensure!(
        contenders.len() >= 2,
        "give at least two --server LABEL=COMMAND to compare"
    );
    ensure!(
        !operations.is_empty() || plan.startup,
        "give at least one --op TOOL=JSON (or --startup)"
    );
    let n = contenders.len();
    // calls[op][server]: the request each server gets for each operation.
    let calls = operations
        .iter()
        .map(|op| {
            contenders
                .iter()
                .map(|c| {
                    let name = c.tool_name(&op.tool);
                    CallTemplate::new(name, &op.arguments).map(|call| (name.to_owned(), call))
                })
                .collect::<anyhow::Result<Vec<_>>>()
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // figures[op][server]
    let mut figures = vec![vec![Figures::default(); n]; operations.len()];
    let mut startup = vec![StartupFigures::default(); n];
    let sequential = Sequential {
        calls: plan.calls,
        warmup: plan.warmup,
        gap: std::time::Duration::ZERO,
    };
    for round in 0..plan.rounds {
        let order: Vec<usize> = (0..n).map(|i| (i + round as usize) % n).collect();
        eprintln!("side-by-side: round {} of {}", round + 1, plan.rounds);
        for (o, op) in operations.iter().enumerate() {
            for &s in &order {
                let c = &contenders[s];
                let (tool, call) = &calls[o][s];
                let run = latency_run(&c.command, tool, call, &sequential)
                    .await
                    .with_context(|| format!("`{}` latency of `{}`", c.label, op.tool))?;
                figures[o][s].p50_us.push(us(run.latency.p50_ns));
                figures[o][s].p99_us.push(us(run.latency.p99_ns));
            }
            if plan.throughput_calls > 0 {
                for &s in &order {
                    let c = &contenders[s];
                    let (tool, call) = &calls[o][s];
                    let run = throughput_run(
                        &c.command,
                        tool,
                        call,
                        plan.throughput_calls,
                        plan.warmup,
                        plan.in_flight,
                    )
                    .await
                    .with_context(|| format!("`{}` throughput of `{}`", c.label, op.tool))?;
                    figures[o][s].calls_per_s.push(run.calls_per_s);
                    if let Some(kib) = run.peak_rss_kib {
                        figures[o][s].peak_rss_mib.push(kib as f64 / 1024.0);
                    }
                }
            }
        }
        if plan.startup {
            for &s in &order {
                let c = &contenders[s];
                let run = startup_run(&c.command, true)
                    .await
                    .with_context(|| format!("`{}` start-up", c.label))?;
                startup[s].ready_ms.push(ms(run.ready));
                if let Some(kib) = run.idle_rss_kib {
                    startup[s].idle_rss_mib.push(kib as f64 / 1024.0);
                }
            }
        }
    }

    // Rows: (operation, figure, per-server medians).
    let mut rows: Vec<(String, String, Vec<Option<f64>>)> = Vec::new();
    let median = |v: &Vec<f64>| stats::median(v);
    for (o, op) in operations.iter().enumerate() {
        let per = &figures[o];
        rows.push((
            op.tool.clone(),
            "p50 µs".into(),
            per.iter().map(|f| median(&f.p50_us)).collect(),
        ));
        rows.push((
            op.tool.clone(),
            "p99 µs".into(),
            per.iter().map(|f| median(&f.p99_us)).collect(),
        ));
        if plan.throughput_calls > 0 {
            rows.push((
                op.tool.clone(),
                format!("calls/s, {} in flight", plan.in_flight),
                per.iter().map(|f| median(&f.calls_per_s)).collect(),
            ));
            rows.push((
                op.tool.clone(),
                "peak RSS MiB".into(),
                per.iter().map(|f| median(&f.peak_rss_mib)).collect(),
            ));
        }
    }
    if plan.startup {
        rows.push((
            "start-up".into(),
            "spawn to tools/list ms".into(),
            startup.iter().map(|f| median(&f.ready_ms)).collect(),
        ));
        rows.push((
            "start-up".into(),
            "idle RSS MiB (500 ms later)".into(),
            startup.iter().map(|f| median(&f.idle_rss_mib)).collect(),
        ));
    }

    let ratio = |values: &[Option<f64>], s: usize| match (values[s], values[0]) {
        (Some(x), Some(base)) if base > 0.0 => Some(x / base),
        _ => None,
    };
    if as_json {
        let servers: Vec<Value> = contenders
            .iter()
            .map(|c| {
                let names: serde_json::Map<String, Value> = c
                    .tool_names
                    .iter()
                    .map(|(from, to)| (from.clone(), Value::from(to.as_str())))
                    .collect();
                json!({"label": c.label, "command": c.command.argv, "tool_names": names})
            })
            .collect();
        let rows: Vec<Value> = rows
            .iter()
            .map(|(op, figure, values)| {
                let by_server: serde_json::Map<String, Value> = contenders
                    .iter()
                    .enumerate()
                    .map(|(s, c)| {
                        (
                            c.label.clone(),
                            json!({"median": values[s].map(round3), "ratio": ratio(values, s).map(round3)}),
                        )
                    })
                    .collect();
                json!({"operation": op, "figure": figure, "servers": by_server})
            })
            .collect();
        let operations: Vec<Value> = operations
            .iter()
            .map(|o| json!({"tool": o.tool, "arguments": o.arguments}))
            .collect();
        return crate::print_json(&json!({
            "benchmark": "side-by-side",
            "rounds": plan.rounds,
            "calls": plan.calls,
            "warmup": plan.warmup,
            "throughput_calls": plan.throughput_calls,
            "in_flight": plan.in_flight,
            "servers": servers,
            "operations": operations,
            "rows": rows,
        }));
    }

    println!(
        "side by side over stdio: {} rounds; latency {} sequential calls after {} warm-up; \
         throughput {} calls with {} in flight; a fresh server per measurement",
        plan.rounds, plan.calls, plan.warmup, plan.throughput_calls, plan.in_flight
    );
    for (s, c) in contenders.iter().enumerate() {
        println!(
            "server {}: {} = {}",
            s + 1,
            c.label,
            c.command.argv.join(" ")
        );
        for (from, to) in &c.tool_names {
            println!("  (serves `{from}` as `{to}`)");
        }
    }
    println!();
    let mut header = format!("{:<18}{:<28}", "operation", "figure (median)");
    for c in contenders {
        header.push_str(&format!("{:>14}", c.label));
    }
    for c in &contenders[1..] {
        header.push_str(&format!(
            "{:>22}",
            format!("{}/{}", c.label, contenders[0].label)
        ));
    }
    println!("{header}");
    for (op, figure, values) in &rows {
        let mut line = format!("{op:<18}{figure:<28}");
        for value in values {
            line.push_str(&format!("{:>14}", fmt(*value)));
        }
        for s in 1..n {
            line.push_str(&format!(
                "{:>22}",
                ratio(values, s).map_or("-".into(), |r| format!("{r:.3}"))
            ));
        }
        println!("{line}");
    }
    Ok(())
}

fn fmt(value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
