//! Assembling a catalog from the files loaded on their own: who serves a
//! name declared twice (`names`), the per-tool permits carried over a
//! reload, and the resources, templates and prompts, first file wins.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::Semaphore;

use super::names::{Owner, resolve_names};
use super::{
    Catalog, FileLoad, FileReport, FileStatus, LoadedFile, LoadedTool, Served, ToolEntry,
    ToolStatus,
};
use crate::config::Config;

/// Resolve names across files and build the catalog. `outcomes` must be in
/// file-name order; `previous` is the catalog served before (a reload).
///
/// Who serves a tool name declared by more than one file (see
/// `docs/security.md`): the file `[tools.NAME] file = "…"` binds it to, if
/// set; else, when `[tools.NAME]` gives the name a policy of its own (its
/// grants, limits, confirmation), the file that served it before, and none
/// when there was none (a new file never takes over a policy meant for
/// another file); else the file that sorts first.
pub fn assemble(
    outcomes: Vec<(PathBuf, FileLoad)>,
    config: &Config,
    previous: Option<&Catalog>,
) -> Catalog {
    let winners = resolve_names(&outcomes, config, previous);
    let mut catalog = Catalog::default();
    let mut template_owners: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (path, load) in outcomes {
        if let Some(reason) = &load.rejected_update {
            tracing::warn!(
                file = %path.display(),
                %reason,
                "the new version failed to load; the last good version keeps serving"
            );
        }
        let status = match load.result {
            Err(reason) => {
                tracing::warn!(file = %path.display(), %reason, "skipping tool component");
                FileStatus::Failed(reason)
            }
            Ok(file) => {
                let mut entries = Vec::with_capacity(file.tools.len());
                for spec in &file.tools {
                    let name = spec.descriptor.name.clone();
                    let status = match winners.get(&name) {
                        Some(Owner::File(winner, _)) if *winner == path => ToolStatus::Served,
                        Some(Owner::File(_, Some(reason))) => ToolStatus::Refused(reason.clone()),
                        Some(Owner::File(winner, None)) => ToolStatus::Shadowed(winner.clone()),
                        Some(Owner::None(reason)) => ToolStatus::Refused(reason.clone()),
                        None => ToolStatus::Refused("not resolved".into()),
                    };
                    match &status {
                        ToolStatus::Served => {}
                        ToolStatus::Shadowed(winner) => tracing::warn!(
                            tool = %name,
                            file = %path.display(),
                            winner = %winner.display(),
                            "tool name declared twice; the file that sorts first wins"
                        ),
                        ToolStatus::Refused(reason) => tracing::warn!(
                            tool = %name,
                            file = %path.display(),
                            %reason,
                            "tool not served from this file"
                        ),
                    }
                    let served = status == ToolStatus::Served;
                    entries.push(ToolEntry {
                        descriptor: spec.descriptor.clone(),
                        status,
                    });
                    if !served {
                        continue;
                    }
                    let limits = config.limits_for(&name);
                    catalog.tools.insert(
                        name.clone(),
                        Arc::new(LoadedTool {
                            spec: Arc::clone(spec),
                            component: Arc::clone(&file.component),
                            permits: tool_permits(previous, &name, limits.max_concurrent),
                            max_concurrent: limits.max_concurrent,
                        }),
                    );
                }
                add_extras(&mut catalog, &file, &path, &mut template_owners);
                tracing::info!(
                    file = %path.display(),
                    digest = %file.component.digest,
                    tools = entries.len(),
                    resources = file.resources.len() + file.templates.len(),
                    prompts = file.prompts.len(),
                    cached = load.from_cache,
                    "loaded tool component"
                );
                catalog.loaded.insert(path.clone(), file);
                FileStatus::Loaded(entries)
            }
        };
        catalog.files.push(FileReport {
            path,
            digest: load.digest,
            status,
            from_cache: load.from_cache,
            rejected_update: load.rejected_update,
            capability_change: load.capability_change,
        });
    }
    for name in config.tools.keys() {
        if !catalog.tools.contains_key(name) {
            tracing::warn!(tool = %name, "the config sets a policy for a tool no component provides");
        }
    }
    catalog
}

/// The permits of tool `name`: the previous catalog's when their number is
/// unchanged, so a reload never lets more calls of one tool run at once
/// than its `max_concurrent` (calls in flight hold the old permits).
fn tool_permits(previous: Option<&Catalog>, name: &str, max_concurrent: u32) -> Arc<Semaphore> {
    match previous.and_then(|p| p.tools.get(name)) {
        Some(tool) if tool.max_concurrent == max_concurrent => Arc::clone(&tool.permits),
        _ => Arc::new(Semaphore::new(max_concurrent as usize)),
    }
}

/// Add `file`'s resources, templates and prompts to `catalog`, first file
/// wins (files arrive in name order).
fn add_extras(
    catalog: &mut Catalog,
    file: &LoadedFile,
    path: &Path,
    template_owners: &mut BTreeMap<String, PathBuf>,
) {
    let shadowed = |kind: &str, key: &str, winner: &Path| {
        tracing::warn!(
            %kind,
            key,
            file = %path.display(),
            winner = %winner.display(),
            "declared twice; the file that sorts first wins"
        );
    };
    for resource in &file.resources {
        if let Some(winner) = catalog.resources.get(&resource.uri) {
            shadowed("resource", &resource.uri, &winner.component.path);
            continue;
        }
        catalog.resources.insert(
            resource.uri.clone(),
            Served {
                descriptor: Arc::clone(resource),
                component: Arc::clone(&file.component),
            },
        );
    }
    for template in &file.templates {
        let key = &template.raw.uri_template;
        if let Some(winner) = template_owners.get(key) {
            shadowed("resource template", key, winner);
            continue;
        }
        template_owners.insert(key.clone(), path.to_owned());
        catalog.templates.push(Served {
            descriptor: Arc::clone(template),
            component: Arc::clone(&file.component),
        });
    }
    for prompt in &file.prompts {
        if let Some(winner) = catalog.prompts.get(&prompt.name) {
            shadowed("prompt", &prompt.name, &winner.component.path);
            continue;
        }
        catalog.prompts.insert(
            prompt.name.clone(),
            Served {
                descriptor: Arc::clone(prompt),
                component: Arc::clone(&file.component),
            },
        );
    }
}
