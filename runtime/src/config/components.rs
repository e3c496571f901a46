//! `[components."FILE.wasm"]`: the operator's rules for one plain
//! component (which functions are tools, their names, descriptions and
//! hints, whether missing imports may trap), as written and validated.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::fields::FieldError;
use super::{PlainRules, ToolOverride, toml_key};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawComponent {
    expose: Option<Vec<String>>,
    #[serde(default)]
    hide: Vec<String>,
    #[serde(default)]
    rename: BTreeMap<String, String>,
    missing_imports: Option<String>,
    #[serde(default)]
    tools: BTreeMap<String, RawToolOverride>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolOverride {
    description: Option<String>,
    title: Option<String>,
    read_only: Option<bool>,
    destructive: Option<bool>,
    idempotent: Option<bool>,
    open_world: Option<bool>,
}

impl RawComponent {
    pub(super) fn resolve(self) -> Result<PlainRules, FieldError> {
        let trap_missing_imports = match self.missing_imports.as_deref() {
            None | Some("refuse") => false,
            Some("trap") => true,
            Some(other) => {
                return Err(FieldError::new(
                    "missing_imports".into(),
                    format!("{other:?}"),
                    "must be \"refuse\" or \"trap\"".into(),
                ));
            }
        };
        for (from, to) in &self.rename {
            if !is_tool_name(to) {
                return Err(FieldError::new(
                    format!("rename.{}", toml_key(from)),
                    format!("{to:?}"),
                    "must be 1-128 characters of A-Za-z0-9_-. (MCP's rule for tool names)".into(),
                ));
            }
        }
        Ok(PlainRules {
            expose: self.expose,
            hide: self.hide,
            rename: self.rename,
            trap_missing_imports,
            tools: self
                .tools
                .into_iter()
                .map(|(name, t)| {
                    (
                        name,
                        ToolOverride {
                            description: t.description,
                            title: t.title,
                            read_only: t.read_only,
                            destructive: t.destructive,
                            idempotent: t.idempotent,
                            open_world: t.open_world,
                        },
                    )
                })
                .collect(),
        })
    }
}

/// MCP's rule for tool names: 1-128 characters of `A-Za-z0-9_-.`.
fn is_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}
