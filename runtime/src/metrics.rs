//! The server's metrics, in the Prometheus text format (`GET /metrics` over
//! HTTP), kept with the official Prometheus client crate.
//!
//! What is counted, in one place (every name starts `toolcage_`):
//! - `calls_total{tool, outcome}`: calls by how they ended (`ok`, `error`,
//!   `refused`, `cancelled`, `input_required`);
//! - `call_duration_seconds{tool}`, `call_fuel{tool}`,
//!   `call_peak_memory_bytes{tool}`: histograms of calls that ran;
//! - `limit_hits_total{limit}`: calls ended by a limit (`fuel`, `deadline`,
//!   `memory`, `stack`, `result_size`, `transfer`, `host_resources`,
//!   `open_handles`, `http_fields`, `random`);
//! - `refusals_total{reason}`: calls refused before their tool ran
//!   (`unknown_tool`, `not_permitted`, `client_capability`, `arguments`,
//!   `confirmation`, `shutdown`), and requests a tool made that its network
//!   grant refused (`network`);
//! - `reloads_total{outcome}` (`ok`, `problems`), `tools_loaded`,
//!   `calls_in_flight`;
//! - `admission_rejections_total{reason}`: HTTP requests turned away before
//!   they were read (`requests_in_progress`, `request_budget`, `sessions`,
//!   `connections`);
//! - `tasks_total{event}`: tasks created and how they ended.
//!
//! Invariant: no label value comes from a client. A tool label is a served
//! tool's name (a call of a name nobody serves counts under `(unknown)`),
//! every other label is one of the fixed words above; so the number of
//! series is bounded by the tools loaded.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `Content-Type` of what [`Metrics::encode`] writes.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The label of a call not attributed to a served tool.
pub const UNKNOWN_TOOL: &str = "(unknown)";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabel {
    limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnsweredByLabel {
    answered_by: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabel {
    event: &'static str,
}

type Histograms = Family<ToolLabel, Histogram, fn() -> Histogram>;

/// What one call that ran cost.
#[derive(Debug, Clone, Copy)]
pub struct RunCost {
    /// Wall-clock time.
    pub seconds: f64,
    /// Fuel used.
    pub fuel: u64,
    /// Peak linear memory.
    pub peak_memory: u64,
    /// Requests its network grant refused.
    pub network_refusals: u64,
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    duration: Histograms,
    fuel: Histograms,
    memory: Histograms,
    limits: Family<LimitLabel, Counter>,
    refusals: Family<ReasonLabel, Counter>,
    reloads: Family<OutcomeLabel, Counter>,
    tools_loaded: Gauge,
    in_flight: Gauge,
    admission: Family<ReasonLabel, Counter>,
    tasks: Family<EventLabel, Counter>,
    mcp_http: Family<AnsweredByLabel, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric, at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("toolcage");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "calls",
            "Tool calls, by tool and how they ended",
            calls.clone(),
        );
        // 100 µs to ~26 s.
        let duration: Histograms =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.000_1, 4.0, 10)));
        registry.register(
            "call_duration_seconds",
            "Wall-clock time of calls that ran",
            duration.clone(),
        );
        // 10,000 to ~2.6e11 fuel.
        let fuel: Histograms =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(1e4, 4.0, 14)));
        registry.register("call_fuel", "Fuel used by calls that ran", fuel.clone());
        // 64 KiB to 4 GiB.
        let memory: Histograms =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(65_536.0, 4.0, 9)));
        registry.register(
            "call_peak_memory_bytes",
            "Peak linear memory of calls that ran",
            memory.clone(),
        );
        let limits = Family::<LimitLabel, Counter>::default();
        registry.register(
            "limit_hits",
            "Calls ended by a limit, by limit",
            limits.clone(),
        );
        let refusals = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "refusals",
            "Calls refused before their tool ran, and tools' network requests refused, by reason",
            refusals.clone(),
        );
        let reloads = Family::<OutcomeLabel, Counter>::default();
        registry.register("reloads", "Reloads of the tools folder", reloads.clone());
        let tools_loaded = Gauge::default();
        registry.register("tools_loaded", "Tools served now", tools_loaded.clone());
        let in_flight = Gauge::default();
        registry.register("calls_in_flight", "Calls running now", in_flight.clone());
        let admission = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "admission_rejections",
            "HTTP requests turned away before they were read, by reason",
            admission.clone(),
        );
        let tasks = Family::<EventLabel, Counter>::default();
        registry.register("tasks", "Tasks created, and how they ended", tasks.clone());
        let mcp_http = Family::<AnsweredByLabel, Counter>::default();
        registry.register(
            "mcp_http_requests",
            "MCP requests over HTTP past admission, by what answered them: `direct` (a plain \
             2026-07-28 tools/call, without rmcp's per-request service) or `rmcp`",
            mcp_http.clone(),
        );
        Metrics {
            registry,
            calls,
            duration,
            fuel,
            memory,
            limits,
            refusals,
            reloads,
            tools_loaded,
            in_flight,
            admission,
            tasks,
            mcp_http,
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String does not fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry);
        text
    }

    /// A call of `tool` (a served tool's name, or [`UNKNOWN_TOOL`]) ended
    /// with `outcome`, having run at `cost` if it ran.
    pub fn call(&self, tool: &str, outcome: &'static str, cost: Option<RunCost>) {
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_owned(),
                outcome,
            })
            .inc();
        if let Some(cost) = cost {
            let label = ToolLabel {
                tool: tool.to_owned(),
            };
            self.duration.get_or_create(&label).observe(cost.seconds);
            self.fuel.get_or_create(&label).observe(cost.fuel as f64);
            self.memory
                .get_or_create(&label)
                .observe(cost.peak_memory as f64);
            if cost.network_refusals > 0 {
                self.refusals
                    .get_or_create(&ReasonLabel { reason: "network" })
                    .inc_by(cost.network_refusals);
            }
        }
    }

    /// A call was refused before its tool ran, for `reason`.
    pub fn refused(&self, reason: &'static str) {
        self.refusals.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// A call ended at `limit`.
    pub fn limit_hit(&self, limit: &'static str) {
        self.limits.get_or_create(&LimitLabel { limit }).inc();
    }

    /// A call started (`+1`) or ended (`-1`).
    pub fn in_flight(&self, delta: i64) {
        self.in_flight.inc_by(delta);
    }

    /// A reload ended, with or without problems, serving `tools`.
    pub fn reloaded(&self, problems: bool, tools: usize) {
        let outcome = if problems { "problems" } else { "ok" };
        self.reloads.get_or_create(&OutcomeLabel { outcome }).inc();
        self.tools_served(tools);
    }

    /// `tools` are served now.
    pub fn tools_served(&self, tools: usize) {
        self.tools_loaded
            .set(i64::try_from(tools).unwrap_or(i64::MAX));
    }

    /// An HTTP request was turned away for `reason`.
    pub fn rejected(&self, reason: &'static str) {
        self.admission.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// An MCP request over HTTP was answered by `answered_by` (`direct` or
    /// `rmcp`).
    pub fn mcp_http(&self, answered_by: &'static str) {
        self.mcp_http
            .get_or_create(&AnsweredByLabel { answered_by })
            .inc();
    }

    /// A task was created, or ended (`event`).
    pub fn task(&self, event: &'static str) {
        self.tasks.get_or_create(&EventLabel { event }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_every_family_and_counts_what_happened() {
        let metrics = Metrics::new();
        metrics.call(
            "read_text_file",
            "ok",
            Some(RunCost {
                seconds: 0.002,
                fuel: 50_000,
                peak_memory: 1 << 20,
                network_refusals: 2,
            }),
        );
        metrics.call(UNKNOWN_TOOL, "refused", None);
        metrics.refused("unknown_tool");
        metrics.limit_hit("fuel");
        metrics.rejected("requests_in_progress");
        metrics.reloaded(false, 3);
        metrics.task("created");
        let text = metrics.encode();
        for line in [
            "toolcage_calls_total{tool=\"read_text_file\",outcome=\"ok\"} 1",
            "toolcage_calls_total{tool=\"(unknown)\",outcome=\"refused\"} 1",
            "toolcage_refusals_total{reason=\"network\"} 2",
            "toolcage_refusals_total{reason=\"unknown_tool\"} 1",
            "toolcage_limit_hits_total{limit=\"fuel\"} 1",
            "toolcage_admission_rejections_total{reason=\"requests_in_progress\"} 1",
            "toolcage_reloads_total{outcome=\"ok\"} 1",
            "toolcage_tools_loaded 3",
            "toolcage_tasks_total{event=\"created\"} 1",
            "toolcage_call_duration_seconds_count{tool=\"read_text_file\"} 1",
            "toolcage_call_fuel_sum{tool=\"read_text_file\"} 50000",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }
}
