//! The record of a call: how it ended ([`Outcome`]), the one audit line
//! and journal entry per call ([`Recorder`], which still records a call
//! dropped half-way), the audit line of a resource read or prompt get, and
//! the guest's captured output as log lines. Everything here runs after
//! the guest; nothing here decides anything.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::ServeError;
use crate::call::CapturedOutput;
use crate::catalog::LoadedComponent;
use crate::config::Policy;
use crate::grants::network::NetRecord;
use crate::journal::{ClientId, Entry, Journal};
use crate::redact::Scrub;

/// How a call ended, with the message the journal keeps.
#[derive(Debug, Clone)]
pub(super) enum Outcome<'a> {
    Ok,
    Error(Cow<'a, str>),
    Refused(Refusal, Cow<'a, str>),
    Cancelled(Cow<'a, str>),
    InputRequired(Cow<'a, str>),
}

/// Why a call was refused before its tool ran (the metrics' `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The server is shutting down.
    Shutdown,
    /// No such tool.
    UnknownTool,
    /// The caller's `[[callers]]` policy does not include it.
    NotPermitted,
    /// The request lacks a client capability the tool needs.
    Capability,
    /// The arguments do not fit the parameters or the input schema.
    Arguments,
    /// The user declined, or could not be asked.
    Confirmation,
}

impl Refusal {
    /// Its name in the metrics.
    pub(super) fn label(self) -> &'static str {
        match self {
            Refusal::Shutdown => "shutdown",
            Refusal::UnknownTool => "unknown_tool",
            Refusal::NotPermitted => "not_permitted",
            Refusal::Capability => "client_capability",
            Refusal::Arguments => "arguments",
            Refusal::Confirmation => "confirmation",
        }
    }
}

impl Outcome<'_> {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error(_) => "error",
            Outcome::Refused(..) => "refused",
            Outcome::Cancelled(_) => "cancelled",
            Outcome::InputRequired(_) => "input_required",
        }
    }

    fn message(&self) -> Option<&str> {
        match self {
            Outcome::Ok => None,
            Outcome::Error(m)
            | Outcome::Refused(_, m)
            | Outcome::Cancelled(m)
            | Outcome::InputRequired(m) => (!m.is_empty()).then_some(m),
        }
    }
}

/// Writes a call's one audit record: a `toolcage::audit` log line and,
/// when configured, a journal line. A call that is dropped before it
/// finishes (its client went away, the server shut down) is still
/// recorded, as cancelled, when the recorder drops.
pub(super) struct Recorder<'a> {
    name: &'a str,
    arguments: &'a Value,
    policy: &'a Policy,
    secrets: Vec<&'a str>,
    journal: Option<&'a Journal>,
    client: &'a (dyn Fn() -> ClientId + Sync),
    arrived: Instant,
    /// The component that serves the call, once resolved.
    component: Option<Arc<LoadedComponent>>,
    /// The dispatcher's shutdown, to say why a dropped call ended.
    shutdown: &'a CancellationToken,
    done: bool,
    /// The task the call runs as, once it has an id.
    pub(super) task: Option<Arc<std::sync::OnceLock<String>>>,
    metrics: &'a crate::metrics::Metrics,
}

impl<'a> Recorder<'a> {
    /// The recorder of a call of `name` that arrives now.
    pub(super) fn new(
        name: &'a str,
        arguments: &'a Value,
        policy: &'a Policy,
        journal: Option<&'a Journal>,
        client: &'a (dyn Fn() -> ClientId + Sync),
        shutdown: &'a CancellationToken,
        metrics: &'a crate::metrics::Metrics,
    ) -> Self {
        metrics.in_flight(1);
        Recorder {
            metrics,
            name,
            arguments,
            policy,
            secrets: policy.secrets().collect(),
            journal,
            client,
            arrived: Instant::now(),
            component: None,
            shutdown,
            done: false,
            task: None,
        }
    }

    /// The call is served by `component` (known once the tool is resolved).
    pub(super) fn served_by(&mut self, component: &Arc<LoadedComponent>) {
        self.component = Some(Arc::clone(component));
    }

    /// The server's metrics.
    pub(super) fn metrics(&self) -> &crate::metrics::Metrics {
        self.metrics
    }

    /// The values to keep out of logs and the journal.
    pub(super) fn scrub(&self) -> Scrub<'a> {
        Scrub::new(self.secrets.iter().copied())
    }

    /// Record the call as ended by `outcome`; only the first call counts.
    pub(super) fn finish(&mut self, outcome: &Outcome<'_>, run: Option<&RunFacts>) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let digest = self.component.as_ref().map_or("", |c| c.digest.as_str());
        let duration = self.arrived.elapsed();
        self.metrics.in_flight(-1);
        // A name nobody serves is the client's to choose: never a label.
        let tool = if self.component.is_some() {
            self.name
        } else {
            crate::metrics::UNKNOWN_TOOL
        };
        self.metrics.call(
            tool,
            outcome.label(),
            run.map(|r| crate::metrics::RunCost {
                seconds: duration.as_secs_f64(),
                fuel: r.fuel,
                peak_memory: r.peak_memory,
                network_refusals: u64::from(r.net.refused),
            }),
        );
        if let Outcome::Refused(reason, _) = outcome {
            self.metrics.refused(reason.label());
        }
        let scrub = Scrub::new(self.secrets.iter().copied());
        // Debug: the journal is the record operators keep; a log line per
        // call at info would cost every call a write to stderr.
        tracing::debug!(
            target: "toolcage::audit",
            tool = %self.name,
            digest = %digest,
            duration_us = duration.as_micros() as u64,
            fuel_used = run.map_or(0, |r| r.fuel),
            peak_memory_bytes = run.map_or(0, |r| r.peak_memory),
            outcome = %outcome.label(),
            message = %scrub.text(outcome.message().unwrap_or(""), 1024),
            "call"
        );
        let Some(journal) = self.journal else {
            return;
        };
        let empty = NetRecord::default();
        journal.record(&Entry {
            tool: self.name,
            digest,
            client: &(self.client)(),
            arguments: self.arguments,
            arguments_mode: self
                .policy
                .journal_arguments
                .unwrap_or_else(|| journal.config().arguments),
            secrets: &self.secrets,
            outcome: outcome.label(),
            message: outcome.message(),
            duration,
            fuel: run.map_or(0, |r| r.fuel),
            peak_memory: run.map_or(0, |r| r.peak_memory),
            bytes_in: run.map_or(0, |r| r.bytes_in),
            bytes_out: run.map_or(0, |r| r.bytes_out),
            net: run.map_or(&empty, |r| &r.net),
            task: self
                .task
                .as_deref()
                .and_then(|slot| slot.get())
                .map(String::as_str),
        });
    }
}

impl Drop for Recorder<'_> {
    fn drop(&mut self) {
        let why = if self.shutdown.is_cancelled() {
            "the server shut down before the call finished"
        } else {
            "abandoned before it finished (the client went away)"
        };
        self.finish(&Outcome::Cancelled(why.into()), None);
    }
}

/// What a finished run adds to its journal line.
pub(super) struct RunFacts {
    pub(super) fuel: u64,
    pub(super) peak_memory: u64,
    pub(super) bytes_in: u64,
    pub(super) bytes_out: u64,
    pub(super) net: NetRecord,
}

/// One audit record for a resource read or prompt get.
pub(super) fn audit<T>(
    kind: &str,
    key: &str,
    digest: &str,
    started: Instant,
    result: &Result<T, ServeError>,
) {
    let outcome = match result {
        Ok(_) => "ok".to_owned(),
        Err(error) => format!("error: {}", first_line(&error.to_string())),
    };
    tracing::debug!(
        target: "toolcage::audit",
        kind,
        key,
        digest,
        duration_us = started.elapsed().as_micros() as u64,
        %outcome,
        "{kind}"
    );
}

pub(super) fn log_guest_output(
    tool: &str,
    stream: &str,
    output: &CapturedOutput,
    scrub: &Scrub<'_>,
) {
    if output.bytes.is_empty() {
        return;
    }
    // A tool may print what it was given; its secrets stay out of the log.
    // (The capture is already bounded, to `sandbox::CAPTURE_BYTES`.)
    let text = scrub.text(
        String::from_utf8_lossy(&output.bytes).trim_end(),
        usize::MAX,
    );
    tracing::info!(
        tool = %tool,
        stream,
        dropped_bytes = output.dropped,
        output = %text,
        "guest output"
    );
}

pub(super) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}
