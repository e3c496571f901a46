//! The environment grant: the variables a tool sees (`env` in the config),
//! each a literal, one of toolcage's own variables, or a file's contents
//! (a secret).
//!
//! Invariant: a secret's value is never printed by `Debug`, and every
//! secret value is handed to the scrubber (`redact`) of everything the host
//! logs or journals about the tool.

use std::sync::Arc;

use wasmtime_wasi::WasiCtxBuilder;

/// A tool's variables, and its secrets among them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvGrant {
    /// The variables, by name.
    pub vars: Arc<[EnvVar]>,
    /// The values of the secret ones (computed once, for scrubbing).
    pub secret_values: SecretValues,
}

impl EnvGrant {
    /// The grant of `vars`.
    pub fn new(vars: Vec<EnvVar>) -> EnvGrant {
        let secret_values = SecretValues(
            vars.iter()
                .filter(|v| v.secret)
                .map(|v| v.value.clone())
                .collect::<Vec<_>>()
                .into(),
        );
        EnvGrant {
            vars: vars.into(),
            secret_values,
        }
    }

    /// The secret values, shared.
    pub fn secrets(&self) -> Arc<[String]> {
        Arc::clone(&self.secret_values.0)
    }
}

/// Secret values, which `Debug` shows only as a count.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretValues(pub Arc<[String]>);

impl std::ops::Deref for SecretValues {
    type Target = [String];

    fn deref(&self) -> &[String] {
        &self.0
    }
}

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{} secrets]", self.0.len())
    }
}

/// One environment variable given to a tool.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvVar {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// Read from a file: never logged, redacted from the journal.
    pub secret: bool,
}

impl std::fmt::Debug for EnvVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = if self.secret { "[secret]" } else { &self.value };
        write!(f, "{}={value:?}", self.name)
    }
}

/// Set `vars` in the call's WASI context (which starts with none).
pub fn apply(vars: &[EnvVar], wasi: &mut WasiCtxBuilder) {
    for var in vars {
        wasi.env(&var.name, &var.value);
    }
}
