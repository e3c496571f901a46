//! `native`: what the sandbox itself costs, in-process, with no transport.
//!
//! Three ways to run the same call (a fs tool operation, such as
//! `read_text_file` on a 1 KiB file), in one process, timed per call, in
//! blocks whose order rotates from run to run:
//!
//! 1. **native**: the fs tool's own Rust code (`fs_tool`, the crate the
//!    component is built from, compiled for the host) called directly: the
//!    arguments encoded to JSON text, then `ToolDef::call`, which parses
//!    them, reads the file and builds the result (content and structured
//!    output). This is the same tool logic a native MCP server would run,
//!    with roots given by hand instead of WASI preopens.
//! 2. **sandbox**: `Sandbox::call` on the loaded component: a fresh store
//!    and instance with the tool's limits, WASI context with the root
//!    preopened, the guest's code, the result read back out of the guest.
//! 3. **ready**: the same `Sandbox::call`, on an instance made ahead of it
//!    (`Sandbox::make_ready`, untimed, as the server does after the previous
//!    call): binding the call's grants and limits to it, the guest's code,
//!    the result. What a call waits for when its instance is ready, which
//!    it is for calls one at a time; its teardown is after the result in
//!    both this and the server.
//! 4. **dispatcher**: `Dispatcher::call`, what the protocol layer calls for
//!    a `tools/call`: 2. or 3. plus the registry lookup, input-schema
//!    validation, permits, output checks and the audit record.
//!
//! The sandbox's own cost is 2 − 1 with a fresh instance made on the call's
//! path, 3 − 1 with one made ahead; toolcage's whole in-process cost per
//! call is 4 − 1. Neither includes MCP encoding or a transport (the
//! `latency` benchmark has those). The host is loaded with the defaults of
//! `toolcage serve` (fuel metering on, default limits), `--root` granted
//! read-only, and a compile cache folder so a second run is warm. Before
//! timing, each operation runs once natively and once through the
//! dispatcher, and the two structured results must be equal.
//! Calls run on a tokio multi-thread runtime like the server's (the timing
//! loop itself on the thread that blocks on it).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, bail, ensure};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use toolcage::config::{Config, Mode, Policy, Root};
use toolcage::dispatch::{CallContext, CallOutput};
use toolcage::grants::CallContext as GrantContext;
use toolcage::journal::ClientId;
use toolcage::sandbox::CallSpec;
use toolcage::{Host, Options};
use toolcage_guest::{CallOutcome, ToolDef};

use crate::stats::Latency;
use crate::{nanos, print_json, round1, us};

/// What to run.
pub struct NativePlan {
    /// The tools folder (with the fs tool component).
    pub tools_dir: PathBuf,
    /// The compile cache folder.
    pub cache_dir: PathBuf,
    /// The folder granted (read-only) to the sandboxed tool and given as
    /// the native tool's root.
    pub root: PathBuf,
    /// The operations: tool and arguments (a JSON object).
    pub ops: Vec<(String, Value)>,
    /// Timed calls per way per operation per run.
    pub calls: u64,
    /// Untimed calls before them.
    pub warmup: u64,
    /// Runs.
    pub runs: u32,
    /// Print JSON.
    pub json: bool,
    /// The ways to run, by label (`native`, `sandbox`, `ready`,
    /// `dispatcher`); all four when empty. One way alone is for a
    /// profiler, which then sees nothing but that way's calls.
    pub ways: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Way {
    Native,
    Sandbox,
    Ready,
    Dispatcher,
}

const WAYS: [Way; 4] = [Way::Native, Way::Sandbox, Way::Ready, Way::Dispatcher];

impl Way {
    /// The ways `labels` names, in `WAYS` order; every way when empty.
    fn chosen(labels: &[String]) -> anyhow::Result<Vec<Way>> {
        if let Some(unknown) = labels
            .iter()
            .find(|l| !WAYS.iter().any(|w| w.label() == l.as_str()))
        {
            bail!("no way `{unknown}`: the ways are native, sandbox, ready and dispatcher");
        }
        Ok(WAYS
            .into_iter()
            .filter(|w| labels.is_empty() || labels.iter().any(|l| l == w.label()))
            .collect())
    }

    fn label(self) -> &'static str {
        match self {
            Way::Native => "native",
            Way::Sandbox => "sandbox",
            Way::Ready => "ready",
            Way::Dispatcher => "dispatcher",
        }
    }
}

/// Run the comparison and print it.
///
/// # Errors
///
/// The host cannot load, a tool is missing, the two results differ, or a
/// call fails.
pub fn run(plan: NativePlan) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // On this thread, not spawned: the fs tool's `ToolDef` is not `Send`.
    // What a call spawns runs on the runtime's workers as in the server.
    let ways = Way::chosen(&plan.ways)?;
    let runs = runtime.block_on(measure(&plan, &ways))?;
    report(&plan, &runs)
}

/// Per run, per operation, per way (in `WAYS` order; `None` for a way not
/// run): the latency summary.
type Runs = Vec<Vec<[Option<Latency>; 4]>>;

/// Everything one operation needs, resolved once.
struct Prepared {
    name: String,
    arguments: Map<String, Value>,
    native: ToolDef,
    policy: Policy,
}

async fn measure(plan: &NativePlan, ways: &[Way]) -> anyhow::Result<Runs> {
    let root = std::fs::canonicalize(&plan.root)
        .with_context(|| format!("cannot find `{}`", plan.root.display()))?;
    let root_text = root.to_str().context("the root is not UTF-8")?.to_owned();
    let mut config = Config::default();
    let grant = Root::new(&root, Mode::ReadOnly, Path::new("/"))
        .map_err(|e| anyhow::anyhow!("cannot grant `{}`: {e}", root.display()))?;
    config.grant_to_all(grant.clone());
    let host = Host::load(Options {
        tools_dir: plan.tools_dir.clone(),
        cache_dir: Some(plan.cache_dir.clone()),
        config: config.clone(),
        cli_grants: vec![grant],
        fuel_metering: true,
        spill: None,
    })
    .await
    .context("cannot load the tools")?;
    let cancel = CancellationToken::new();

    let mut prepared = Vec::new();
    for (name, arguments) in &plan.ops {
        let Value::Object(arguments) = arguments.clone() else {
            bail!("the arguments of `{name}` are not a JSON object");
        };
        let native = fs_tool::tool_definitions()
            .into_iter()
            .find(|t| t.name() == name)
            .with_context(|| format!("the fs tool crate has no tool `{name}`"))?;
        let policy = config.policy_for(name).clone();
        prepared.push(Prepared {
            name: name.clone(),
            arguments,
            native,
            policy,
        });
    }

    // Thread-local roots: set right before each native call, with no await
    // in between, so the call runs on the thread that set them.
    let native_call = |op: &Prepared| {
        fs_tool::set_native_roots(&[(&root_text, false)]);
        let start = Instant::now();
        let text = Value::Object(op.arguments.clone()).to_string();
        let outcome = op.native.call(&text);
        (start.elapsed(), outcome)
    };
    let dispatcher_call = async |op: &Prepared| -> anyhow::Result<(u64, CallOutput)> {
        let start = Instant::now();
        let output = host
            .dispatcher
            .call(
                &op.name,
                op.arguments.clone().into(),
                CallContext {
                    events: None,
                    cancel: &cancel,
                    client_roots: None,
                    services: None,
                    client: &ClientId::default,
                    caller: None,
                    lane: toolcage::dispatch::Lane::Pooled,
                    declared: None,
                    task: None,
                },
            )
            .await
            .context("dispatch failed")?;
        let elapsed = nanos(start.elapsed());
        ensure!(
            !output.is_error,
            "`{}` through the dispatcher returned an error: {:?}",
            op.name,
            output.content
        );
        Ok((elapsed, output))
    };

    // The same logic must give the same result both ways.
    for op in &prepared {
        if !host.registry.snapshot().tools.contains_key(&op.name) {
            bail!(
                "`{}` does not serve `{}`: put the fs tool component there",
                plan.tools_dir.display(),
                op.name
            );
        }
        let (_, outcome) = native_call(op);
        let native = match outcome {
            CallOutcome::Ok(output) => output.structured,
            CallOutcome::Err(message) => bail!("`{}` natively failed: {message}", op.name),
        };
        let (_, sandboxed) = dispatcher_call(op).await?;
        ensure!(
            native == sandboxed.structured,
            "`{}` gives different results natively ({native:?}) and sandboxed ({:?})",
            op.name,
            sandboxed.structured
        );
    }

    // One call of `way`; returns its duration.
    let one = async |way: Way, op: &Prepared| -> anyhow::Result<u64> {
        match way {
            Way::Native => {
                let (elapsed, outcome) = native_call(op);
                if let CallOutcome::Err(message) = outcome {
                    bail!("`{}` natively failed: {message}", op.name);
                }
                Ok(nanos(elapsed))
            }
            Way::Sandbox | Way::Ready => {
                let tool = host
                    .registry
                    .snapshot()
                    .tools
                    .get(&op.name)
                    .cloned()
                    .context("the tool went away")?;
                let component = &tool.component.prepared;
                if way == Way::Ready {
                    host.sandbox
                        .make_ready(component, &op.policy.limits, false)
                        .await;
                }
                let start = Instant::now();
                let text = Value::Object(op.arguments.clone()).to_string();
                let report = host
                    .sandbox
                    .call(
                        component,
                        CallSpec {
                            name: &op.name,
                            arguments: &text,
                            checked: Default::default(),
                            limits: &op.policy.limits,
                            grants: op.policy.grants.prepare(GrantContext {
                                tool: &op.name,
                                client_roots: None,
                                caller: Default::default(),
                                client: None,
                            }),
                            events: None,
                            cancel: &cancel,
                            inline: false,
                        },
                    )
                    .await;
                let elapsed = start.elapsed();
                // The instance and its store are torn down here, untimed:
                // the server does it after the reply.
                if let Err(failure) = report.outcome {
                    bail!("`{}` in the sandbox failed: {failure}", op.name);
                }
                Ok(nanos(elapsed))
            }
            Way::Dispatcher => Ok(dispatcher_call(op).await?.0),
        }
    };

    let capacity = usize::try_from(plan.calls).context("too many calls")?;
    let mut runs = Vec::new();
    for run in 0..plan.runs {
        let mut per_op = Vec::new();
        for op in &prepared {
            let mut summaries = [None; 4];
            // Rotate which way goes first, so none always follows the same one.
            for k in 0..ways.len() {
                let way = ways[(k + run as usize) % ways.len()];
                for _ in 0..plan.warmup {
                    one(way, op).await?;
                }
                let mut samples = Vec::with_capacity(capacity);
                for _ in 0..plan.calls {
                    samples.push(one(way, op).await?);
                }
                let index = WAYS.iter().position(|w| *w == way).unwrap_or_default();
                summaries[index] =
                    Some(Latency::from_samples(&mut samples).context("a way was not measured")?);
            }
            per_op.push(summaries);
        }
        runs.push(per_op);
    }
    Ok(runs)
}

fn report(plan: &NativePlan, runs: &Runs) -> anyhow::Result<()> {
    // medians[op][way] = (p50 µs, p99 µs)
    let medians: Vec<Vec<(f64, f64)>> = (0..plan.ops.len())
        .map(|o| {
            (0..WAYS.len())
                .map(|w| {
                    let of = |f: &dyn Fn(&Latency) -> u64| {
                        crate::stats::median(
                            &runs
                                .iter()
                                .filter_map(|r| r[o][w].as_ref())
                                .map(|l| us(f(l)))
                                .collect::<Vec<_>>(),
                        )
                        .unwrap_or(f64::NAN)
                    };
                    (of(&|l| l.p50_ns), of(&|l| l.p99_ns))
                })
                .collect()
        })
        .collect();
    if plan.json {
        let ops: Vec<Value> = plan
            .ops
            .iter()
            .zip(&medians)
            .map(|((tool, arguments), m)| {
                let ways: Vec<Value> = WAYS
                    .iter()
                    .zip(m)
                    .filter(|(_, (p50, _))| !p50.is_nan())
                    .map(|(w, (p50, p99))| {
                        json!({"way": w.label(), "p50_us": round1(*p50), "p99_us": round1(*p99)})
                    })
                    .collect();
                json!({
                    "tool": tool,
                    "arguments": arguments,
                    "ways": ways,
                    "sandbox_overhead_p50_us": round1(m[1].0 - m[0].0),
                    "ready_overhead_p50_us": round1(m[2].0 - m[0].0),
                    "toolcage_overhead_p50_us": round1(m[3].0 - m[0].0),
                })
            })
            .collect();
        return print_json(&json!({
            "benchmark": "native",
            "root": plan.root,
            "calls": plan.calls,
            "warmup": plan.warmup,
            "runs": plan.runs,
            "operations": ops,
        }));
    }
    println!(
        "native vs sandboxed, in-process: {} calls per way after {} warm-up, {} runs \
         (medians of the per-run percentiles)\n",
        plan.calls, plan.warmup, plan.runs
    );
    println!(
        "{:<18}{:<12}{:>10}{:>10}{:>22}",
        "operation", "way", "p50 µs", "p99 µs", "p50 − native µs"
    );
    for ((tool, _), m) in plan.ops.iter().zip(&medians) {
        let mut first = true;
        for (i, w) in WAYS.iter().enumerate() {
            // A way not run (`--way`) has no figures.
            if m[i].0.is_nan() {
                continue;
            }
            let label = if first { tool.as_str() } else { "" };
            first = false;
            let over = if i == 0 || m[0].0.is_nan() {
                String::new()
            } else {
                format!("{:.1}", m[i].0 - m[0].0)
            };
            println!(
                "{label:<18}{:<12}{:>10.1}{:>10.1}{over:>22}",
                w.label(),
                m[i].0,
                m[i].1
            );
        }
    }
    println!(
        "\nsandbox − native: the sandbox's own cost (fresh instance, WASI, guest code, \
         copying in and out); ready − native: the same on an instance made ahead \
         (what a call one at a time waits for); dispatcher − native: toolcage's whole \
         in-process cost"
    );
    Ok(())
}
