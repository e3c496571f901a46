//! `native`: what the sandbox itself costs, in-process, with no transport.
//!
//! Three ways to run the same `read_text_file` call on the same file, in
//! one process, timed per call, alternating in blocks:
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
//! 3. **dispatcher**: `Dispatcher::call`, what the protocol layer calls for
//!    a `tools/call`: 2. plus the registry lookup, input-schema validation,
//!    permits, output checks and the audit record.
//!
//! The sandbox's own cost is 2 − 1; toolcage's whole in-process cost per
//! call is 3 − 1. Neither includes MCP encoding or a transport (the
//! `latency` benchmark has those). The host is loaded with the defaults of
//! `toolcage serve` (fuel metering on, default limits), the file's folder
//! granted read-only, and a compile cache folder so a second run is warm.
//! Calls run on a tokio multi-thread runtime like the server's (the timing
//! loop itself on the thread that blocks on it).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolcage::config::{Config, Grant, Mode};
use toolcage::dispatch::CallContext;
use toolcage::journal::ClientId;
use toolcage::roots::effective_roots;
use toolcage::sandbox::{Access, CallSpec};
use toolcage::{Host, Options};
use toolcage_guest::CallOutcome;

use crate::stats::Latency;
use crate::{nanos, print_json, round1, us};

/// The tool compared.
const TOOL: &str = "read_text_file";

/// What to run.
pub struct NativePlan {
    /// The tools folder (with the fs tool component).
    pub tools_dir: PathBuf,
    /// The compile cache folder.
    pub cache_dir: PathBuf,
    /// The file to read.
    pub file: PathBuf,
    /// Timed calls per way per run.
    pub calls: u64,
    /// Untimed calls per way before them.
    pub warmup: u64,
    /// Runs (each with all three ways).
    pub runs: u32,
    /// Print JSON.
    pub json: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Native,
    Sandbox,
    Dispatcher,
}

const WAYS: [Way; 3] = [Way::Native, Way::Sandbox, Way::Dispatcher];

impl Way {
    fn label(self) -> &'static str {
        match self {
            Way::Native => "native",
            Way::Sandbox => "sandbox",
            Way::Dispatcher => "dispatcher",
        }
    }
}

/// Run the comparison and print it.
///
/// # Errors
///
/// The host cannot load, the tool is missing, or a call fails.
pub fn run(plan: NativePlan) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // On this thread, not spawned: the fs tool's `ToolDef` is not `Send`.
    // What a call spawns runs on the runtime's workers as in the server.
    let runs = runtime.block_on(measure(&plan))?;
    report(&plan, &runs)
}

/// Per run, per way: the latency summary.
type Runs = Vec<[Latency; 3]>;

async fn measure(plan: &NativePlan) -> anyhow::Result<Runs> {
    let file = std::fs::canonicalize(&plan.file)
        .with_context(|| format!("cannot find `{}`", plan.file.display()))?;
    let root = file
        .parent()
        .context("the file has no parent folder")?
        .to_path_buf();
    let root_text = root
        .to_str()
        .context("the file's folder is not UTF-8")?
        .to_owned();

    let mut config = Config::default();
    let grant = Grant::new(&root, Mode::ReadOnly, Path::new("/"))
        .map_err(|e| anyhow::anyhow!("cannot grant `{}`: {e}", root.display()))?;
    config.grant_to_all(grant.clone());
    let host = Host::load(Options {
        tools_dir: plan.tools_dir.clone(),
        cache_dir: Some(plan.cache_dir.clone()),
        config: config.clone(),
        cli_grants: vec![grant],
        fuel_metering: true,
    })
    .await
    .context("cannot load the tools")?;
    let Some(tool) = host.registry.snapshot().tools.get(TOOL).cloned() else {
        bail!(
            "`{}` does not serve `{TOOL}`: put the fs tool component there",
            plan.tools_dir.display()
        );
    };
    let native_tool = fs_tool::tool_definitions()
        .into_iter()
        .find(|t| t.name() == TOOL)
        .context("the fs tool crate has no `read_text_file`")?;

    let Value::Object(arguments) = json!({"path": file}) else {
        bail!("the arguments are not an object");
    };
    let policy = config.policy_for(TOOL).clone();
    let roots = effective_roots(&policy.roots, None);
    let cancel = CancellationToken::new();
    let expected = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read `{}`", file.display()))?;

    // One call of `way`; returns its duration and checks its result.
    let one = async |way: Way| -> anyhow::Result<u64> {
        match way {
            Way::Native => {
                // Thread-local roots: set right before the call, with no
                // await in between, so it runs on the thread that set them.
                fs_tool::set_native_roots(&[(&root_text, false)]);
                let start = Instant::now();
                let text = Value::Object(arguments.clone()).to_string();
                let outcome = native_tool.call(&text);
                let elapsed = start.elapsed();
                match outcome {
                    CallOutcome::Ok(output) => {
                        ensure!(
                            output.structured == Some(json!({"content": expected})),
                            "the native call returned something else"
                        );
                    }
                    CallOutcome::Err(message) => bail!("native call failed: {message}"),
                }
                Ok(nanos(elapsed))
            }
            Way::Sandbox => {
                let start = Instant::now();
                let text = Value::Object(arguments.clone()).to_string();
                let report = host
                    .sandbox
                    .call(CallSpec {
                        pre: &tool.component.pre,
                        name: TOOL,
                        arguments: &text,
                        limits: &policy.limits,
                        roots: &roots,
                        events: None,
                        services: None,
                        sampling_allowed: false,
                        access: Access {
                            tool: TOOL,
                            network: &policy.network,
                            env: &policy.env,
                        },
                        cancel: &cancel,
                    })
                    .await;
                let elapsed = start.elapsed();
                if let Err(failure) = report.outcome {
                    bail!("sandboxed call failed: {failure}");
                }
                Ok(nanos(elapsed))
            }
            Way::Dispatcher => {
                let start = Instant::now();
                let output = host
                    .dispatcher
                    .call(
                        TOOL,
                        Some(arguments.clone()),
                        CallContext {
                            events: None,
                            cancel: &cancel,
                            client_roots: None,
                            services: None,
                            client: ClientId::default(),
                        },
                    )
                    .await
                    .context("dispatch failed")?;
                let elapsed = start.elapsed();
                ensure!(
                    !output.is_error,
                    "the dispatched call returned an error: {:?}",
                    output.content
                );
                ensure!(
                    output.structured == Some(json!({"content": expected})),
                    "the dispatched call returned something else"
                );
                Ok(nanos(elapsed))
            }
        }
    };

    let capacity = usize::try_from(plan.calls).context("too many calls")?;
    let mut runs = Vec::new();
    for run in 0..plan.runs {
        let mut summaries = Vec::new();
        // Rotate which way goes first, so none always follows the same one.
        for k in 0..WAYS.len() {
            let way = WAYS[(k + run as usize) % WAYS.len()];
            for _ in 0..plan.warmup {
                one(way).await?;
            }
            let mut samples = Vec::with_capacity(capacity);
            for _ in 0..plan.calls {
                samples.push(one(way).await?);
            }
            let latency = Latency::from_samples(&mut samples).context("no samples")?;
            summaries.push((way, latency));
        }
        let pick = |w: Way| {
            summaries
                .iter()
                .find(|(way, _)| *way == w)
                .map(|(_, l)| *l)
                .context("a way was not measured")
        };
        runs.push([
            pick(Way::Native)?,
            pick(Way::Sandbox)?,
            pick(Way::Dispatcher)?,
        ]);
    }
    Ok(runs)
}

fn report(plan: &NativePlan, runs: &Runs) -> anyhow::Result<()> {
    let median = |f: &dyn Fn(&[Latency; 3]) -> u64| {
        crate::stats::median(&runs.iter().map(|r| us(f(r))).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    };
    let p50: Vec<f64> = (0..3).map(|i| median(&|r| r[i].p50_ns)).collect();
    let p99: Vec<f64> = (0..3).map(|i| median(&|r| r[i].p99_ns)).collect();
    if plan.json {
        let ways: Vec<Value> = WAYS
            .iter()
            .enumerate()
            .map(|(i, w)| json!({"way": w.label(), "p50_us": round1(p50[i]), "p99_us": round1(p99[i])}))
            .collect();
        return print_json(&json!({
            "benchmark": "native",
            "tool": TOOL,
            "file": plan.file,
            "calls": plan.calls,
            "warmup": plan.warmup,
            "runs": plan.runs,
            "ways": ways,
            "sandbox_overhead_p50_us": round1(p50[1] - p50[0]),
            "toolcage_overhead_p50_us": round1(p50[2] - p50[0]),
        }));
    }
    println!(
        "native vs sandboxed, in-process: `{TOOL}` on {}, {} calls per way after {} warm-up, \
         {} runs (medians of the per-run percentiles)\n",
        plan.file.display(),
        plan.calls,
        plan.warmup,
        plan.runs
    );
    println!("{:<12}{:>10}{:>10}", "way", "p50 µs", "p99 µs");
    for (i, w) in WAYS.iter().enumerate() {
        println!("{:<12}{:>10.1}{:>10.1}", w.label(), p50[i], p99[i]);
    }
    println!(
        "\nsandbox's own cost (sandbox − native), p50: {:.1} µs\n\
         toolcage in-process (dispatcher − native), p50: {:.1} µs",
        p50[1] - p50[0],
        p50[2] - p50[0]
    );
    Ok(())
}
