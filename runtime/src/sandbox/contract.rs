//! The toolcage contract (`guest-sdk/wit/tool.wit`, version 0.2.0, and
//! `guest-sdk/wit-0.1.0/tool.wit`, the version before it): components that
//! export `toolcage:tool/tool` and optionally `resources`, `prompts` and
//! (0.2.0) `completions`. Bindings for both versions, the conversions from
//! their WIT types to [`crate::call`]'s, and the result-size accounting of
//! what such a component returns.
//!
//! Invariants:
//! - Every result is measured as it will be sent (text JSON-escaped, bytes
//!   base64-encoded, MIME types and URIs included, plus framing) and
//!   refused over the limit before it is converted.
//! - Both versions are served by the same host code: a 0.1.0 component's
//!   imports are the 0.2.0 ones with fewer functions (`host.rs`), and its
//!   results are converted by the same code, generated once per version by
//!   `conversions!`. What 0.1.0 cannot say takes the default (no icons,
//!   no tasks, no declared needs).

use tokio_util::sync::CancellationToken;
use wasmtime::component::{Component, Linker};

use super::LoadError;
use super::store::{HostState, Run};
use crate::call::{
    Annotations, CallFailure, Completion, CompletionRequest, CompletionTarget, Content, Execution,
    Icon, IconTheme, LogLevel, MAX_COMPLETION_VALUES, PromptArgument, PromptMessage, PromptOutput,
    PromptRole, RawDescriptor, RawExtras, RawPrompt, RawResource, RawTemplate, ResourceBody,
    ResourceContent, TaskStart, TaskSupport, ToolResult,
};
use crate::config::{ClientNeeds, Limits};
use crate::json;

/// Host bindings of contract 0.2.0 (`guest-sdk/wit/tool.wit`).
#[allow(missing_docs)]
pub(super) mod v2 {
    wasmtime::component::bindgen!({
        path: "../guest-sdk/wit",
        world: "tool-component",
        imports: {
            "toolcage:tool/host.elicit": async | trappable,
            "toolcage:tool/host.sample": async | trappable,
            "toolcage:tool/host.roots": async | trappable,
            "toolcage:tool/host.ask": async | trappable,
        },
        exports: { default: async },
    });
}

/// The 0.2.0 `full-component` world: only its `resources`, `prompts` and
/// `completions` exports are used (imports and shared types are
/// [`v2`]'s, so one linker serves both worlds).
#[allow(missing_docs)]
mod v2_full {
    wasmtime::component::bindgen!({
        path: "../guest-sdk/wit",
        world: "full-component",
        exports: { default: async },
        with: {
            "toolcage:tool/types": super::v2::toolcage::tool::types,
            "toolcage:tool/host": super::v2::toolcage::tool::host,
        },
    });
}

/// Host bindings of contract 0.1.0 (`guest-sdk/wit-0.1.0/tool.wit`).
#[allow(missing_docs)]
pub(super) mod v1 {
    wasmtime::component::bindgen!({
        path: "../guest-sdk/wit-0.1.0",
        world: "tool-component",
        imports: {
            "toolcage:tool/host.elicit": async | trappable,
            "toolcage:tool/host.sample": async | trappable,
        },
        exports: { default: async },
    });
}

/// The 0.1.0 `full-component` world, as [`v2_full`].
#[allow(missing_docs)]
mod v1_full {
    wasmtime::component::bindgen!({
        path: "../guest-sdk/wit-0.1.0",
        world: "full-component",
        exports: { default: async },
        with: {
            "toolcage:tool/types": super::v1::toolcage::tool::types,
            "toolcage:tool/host": super::v1::toolcage::tool::host,
        },
    });
}

/// Which version of the contract a component exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Version {
    /// `toolcage:tool/tool@0.1.0`.
    V1,
    /// `toolcage:tool/tool@0.2.0`.
    V2,
}

impl Version {
    /// The version whose `tool` export is `name` (versioned), if any.
    pub(super) fn of_export(name: &str) -> Option<Version> {
        match name.strip_prefix("toolcage:tool/tool@")? {
            v if v.starts_with("0.1.") => Some(Version::V1),
            v if v.starts_with("0.2.") => Some(Version::V2),
            _ => None,
        }
    }

    /// The export names of its interfaces.
    fn export(self, interface: &str) -> String {
        match self {
            Version::V1 => format!("toolcage:tool/{interface}@0.1.0"),
            Version::V2 => format!("toolcage:tool/{interface}@0.2.0"),
        }
    }
}

/// Link both versions' `host` and `types` imports.
pub(super) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    v2::ToolComponent::add_to_linker::<_, HasSelf<HostState>>(linker, |state| state)?;
    v1::ToolComponent::add_to_linker::<_, HasSelf<HostState>>(linker, |state| state)?;
    Ok(())
}

/// A component of the contract, linked and checked: pre-instantiated once,
/// with the export indices of its optional interfaces looked up once.
pub(super) struct Contract {
    bound: Bound,
}

/// The pre-instantiated component and its optional exports, per version.
enum Bound {
    V1 {
        pre: v1::ToolComponentPre<HostState>,
        resources: Option<v1_full::exports::toolcage::tool::resources::GuestIndices>,
        prompts: Option<v1_full::exports::toolcage::tool::prompts::GuestIndices>,
    },
    V2 {
        pre: v2::ToolComponentPre<HostState>,
        resources: Option<v2_full::exports::toolcage::tool::resources::GuestIndices>,
        prompts: Option<v2_full::exports::toolcage::tool::prompts::GuestIndices>,
        completions: Option<v2_full::exports::toolcage::tool::completions::GuestIndices>,
    },
}

/// A fresh instance of a contract component, made ahead of its call.
pub(super) enum ContractInstance {
    V1(v1::ToolComponent),
    V2(v2::ToolComponent),
}

/// Run `$body` with the names bound to either version's parts, and `$conv`
/// naming that version's conversions (the body is compiled once per
/// version: the types differ, the code does not).
macro_rules! each_version {
    ($bound:expr, $pre:ident, $resources:ident, $prompts:ident, $conv:ident => $body:expr) => {
        match $bound {
            Bound::V1 {
                pre: $pre,
                resources: $resources,
                prompts: $prompts,
            } => {
                #[allow(unused_imports)]
                use from_v1 as $conv;
                $body
            }
            Bound::V2 {
                pre: $pre,
                resources: $resources,
                prompts: $prompts,
                ..
            } => {
                #[allow(unused_imports)]
                use from_v2 as $conv;
                $body
            }
        }
    };
}

impl Contract {
    /// Link `component`, which exports contract `version`, and check that
    /// it exports the contract (and, for each optional interface it
    /// exports, all of its functions).
    pub(super) fn prepare(
        linker: &Linker<HostState>,
        component: &Component,
        version: Version,
    ) -> Result<Contract, LoadError> {
        let pre = linker
            .instantiate_pre(component)
            .map_err(|error| LoadError::Link(format!("{error:#}")))?;
        let contract = |error: wasmtime::Error| LoadError::Contract(format!("{error:#}"));
        let exports = |interface: &str| {
            component
                .get_export_index(None, version.export(interface))
                .is_some()
        };
        let bound = match version {
            Version::V1 => {
                let pre = v1::ToolComponentPre::new(pre).map_err(contract)?;
                use v1_full::exports::toolcage::tool::{prompts, resources};
                Bound::V1 {
                    resources: exports("resources")
                        .then(|| resources::GuestIndices::new(pre.instance_pre()))
                        .transpose()
                        .map_err(contract)?,
                    prompts: exports("prompts")
                        .then(|| prompts::GuestIndices::new(pre.instance_pre()))
                        .transpose()
                        .map_err(contract)?,
                    pre,
                }
            }
            Version::V2 => {
                let pre = v2::ToolComponentPre::new(pre).map_err(contract)?;
                use v2_full::exports::toolcage::tool::{completions, prompts, resources};
                Bound::V2 {
                    resources: exports("resources")
                        .then(|| resources::GuestIndices::new(pre.instance_pre()))
                        .transpose()
                        .map_err(contract)?,
                    prompts: exports("prompts")
                        .then(|| prompts::GuestIndices::new(pre.instance_pre()))
                        .transpose()
                        .map_err(contract)?,
                    completions: exports("completions")
                        .then(|| completions::GuestIndices::new(pre.instance_pre()))
                        .transpose()
                        .map_err(contract)?,
                    pre,
                }
            }
        };
        Ok(Contract { bound })
    }

    /// The contract version it was built against (`0.1`, `0.2`).
    pub(super) fn version(&self) -> &'static str {
        match self.bound {
            Bound::V1 { .. } => "0.1",
            Bound::V2 { .. } => "0.2",
        }
    }

    pub(super) fn has_resources(&self) -> bool {
        each_version!(&self.bound, _pre, resources, _prompts, _conv => resources.is_some())
    }

    pub(super) fn has_prompts(&self) -> bool {
        each_version!(&self.bound, _pre, _resources, prompts, _conv => prompts.is_some())
    }

    pub(super) fn has_completions(&self) -> bool {
        matches!(
            self.bound,
            Bound::V2 {
                completions: Some(_),
                ..
            }
        )
    }

    /// `describe`, in `run`'s fresh instance.
    pub(super) async fn describe(
        &self,
        run: &mut Run,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<Vec<RawDescriptor>, CallFailure> {
        each_version!(&self.bound, pre, _resources, _prompts, conv => {
            let descriptors = run
                .run(limits, cancel, async |store| {
                    let instance = pre.instantiate_async(&mut *store).await?;
                    instance.toolcage_tool_tool().call_describe(&mut *store).await
                })
                .await?;
            Ok(descriptors.into_iter().map(conv::descriptor).collect())
        })
    }

    /// `list-resources`, `list-templates` and `list-prompts` (those the
    /// component exports), in `run`'s one fresh instance.
    pub(super) async fn list_extras(
        &self,
        run: &mut Run,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<RawExtras, CallFailure> {
        each_version!(&self.bound, pre, resources, prompts, conv => {
            run.run(limits, cancel, async |store| {
                let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
                let mut raw = RawExtras::default();
                if let Some(indices) = resources {
                    let guest = indices.load(&mut *store, &instance)?;
                    raw.resources = guest
                        .call_list_resources(&mut *store)
                        .await?
                        .into_iter()
                        .map(conv::resource)
                        .collect();
                    raw.templates = guest
                        .call_list_templates(&mut *store)
                        .await?
                        .into_iter()
                        .map(conv::template)
                        .collect();
                }
                if let Some(indices) = prompts {
                    let guest = indices.load(&mut *store, &instance)?;
                    raw.prompts = guest
                        .call_list_prompts(&mut *store)
                        .await?
                        .into_iter()
                        .map(conv::prompt)
                        .collect();
                }
                Ok(raw)
            })
            .await
        })
    }

    /// A fresh instance in `run`'s store, for a call to come.
    pub(super) async fn instantiate(
        &self,
        run: &mut Run,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<ContractInstance, CallFailure> {
        match &self.bound {
            Bound::V1 { pre, .. } => run
                .run(limits, cancel, async |store| {
                    pre.instantiate_async(&mut *store).await
                })
                .await
                .map(ContractInstance::V1),
            Bound::V2 { pre, .. } => run
                .run(limits, cancel, async |store| {
                    pre.instantiate_async(&mut *store).await
                })
                .await
                .map(ContractInstance::V2),
        }
    }

    /// Tool `name` with `arguments`, in `instance` (made ahead of the call
    /// in `run`'s store), or in a fresh instance.
    pub(super) async fn call(
        &self,
        run: &mut Run,
        instance: Option<ContractInstance>,
        name: &str,
        arguments: &str,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<ToolResult, CallFailure> {
        match &self.bound {
            Bound::V1 { pre, .. } => {
                let instance = match instance {
                    Some(ContractInstance::V1(instance)) => Some(instance),
                    _ => None,
                };
                let result = run
                    .run(limits, cancel, async |store| {
                        let instance = match instance {
                            Some(instance) => instance,
                            None => pre.instantiate_async(&mut *store).await?,
                        };
                        instance
                            .toolcage_tool_tool()
                            .call_call(&mut *store, name, arguments)
                            .await
                    })
                    .await?;
                from_v1::result(result, limits)
            }
            Bound::V2 { pre, .. } => {
                let instance = match instance {
                    Some(ContractInstance::V2(instance)) => Some(instance),
                    _ => None,
                };
                let result = run
                    .run(limits, cancel, async |store| {
                        let instance = match instance {
                            Some(instance) => instance,
                            None => pre.instantiate_async(&mut *store).await?,
                        };
                        instance
                            .toolcage_tool_tool()
                            .call_call(&mut *store, name, arguments)
                            .await
                    })
                    .await?;
                from_v2::result(result, limits)
            }
        }
    }

    /// Resource `uri`, in `run`'s fresh instance. `Ok(Err(message))` is the
    /// component's own refusal.
    pub(super) async fn read_resource(
        &self,
        run: &mut Run,
        uri: &str,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<Result<Vec<ResourceContent>, String>, CallFailure> {
        each_version!(&self.bound, pre, resources, _prompts, conv => {
            let Some(indices) = resources else {
                return Err(CallFailure::Trap("does not export resources".into()));
            };
            let outcome = run
                .run(limits, cancel, async |store| {
                    let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
                    let guest = indices.load(&mut *store, &instance)?;
                    guest.call_read(&mut *store, uri).await
                })
                .await;
            run.log_output();
            match outcome? {
                Ok(contents) => conv::resource_contents(contents, limits).map(Ok),
                Err(message) => Ok(Err(message)),
            }
        })
    }

    /// Prompt `name` with `arguments` (a JSON object as text), in `run`'s
    /// fresh instance. `Ok(Err(message))` is the component's own refusal.
    pub(super) async fn get_prompt(
        &self,
        run: &mut Run,
        name: &str,
        arguments: &str,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<Result<PromptOutput, String>, CallFailure> {
        each_version!(&self.bound, pre, _resources, prompts, conv => {
            let Some(indices) = prompts else {
                return Err(CallFailure::Trap("does not export prompts".into()));
            };
            let outcome = run
                .run(limits, cancel, async |store| {
                    let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
                    let guest = indices.load(&mut *store, &instance)?;
                    guest.call_get(&mut *store, name, arguments).await
                })
                .await;
            run.log_output();
            match outcome? {
                Ok(result) => conv::prompt_output(result, limits).map(Ok),
                Err(message) => Ok(Err(message)),
            }
        })
    }

    /// Complete `request`, in `run`'s fresh instance: an empty completion
    /// for a component that does not export `completions`.
    /// `Ok(Err(message))` is the component's own refusal.
    pub(super) async fn complete(
        &self,
        run: &mut Run,
        request: &CompletionRequest,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<Result<Completion, String>, CallFailure> {
        let Bound::V2 {
            pre,
            completions: Some(indices),
            ..
        } = &self.bound
        else {
            return Ok(Ok(Completion::default()));
        };
        use v2_full::exports::toolcage::tool::completions as wit;
        let wit_request = wit::CompletionRequest {
            target: match &request.target {
                CompletionTarget::Prompt(name) => wit::CompletionTarget::Prompt(name.clone()),
                CompletionTarget::ResourceTemplate(template) => {
                    wit::CompletionTarget::ResourceTemplate(template.clone())
                }
            },
            argument: request.argument.clone(),
            value: request.value.clone(),
            context: request.context.clone(),
        };
        let outcome = run
            .run(limits, cancel, async |store| {
                let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
                let guest = indices.load(&mut *store, &instance)?;
                guest.call_complete(&mut *store, &wit_request).await
            })
            .await;
        run.log_output();
        let completion = match outcome? {
            Ok(completion) => completion,
            Err(message) => return Ok(Err(message)),
        };
        let size: u64 = completion
            .values
            .iter()
            .take(MAX_COMPLETION_VALUES)
            .map(|value| json::escaped_len(value) as u64 + 1)
            .sum();
        check_size(size, limits)?;
        let has_more = completion.has_more || completion.values.len() > MAX_COMPLETION_VALUES;
        let mut values = completion.values;
        values.truncate(MAX_COMPLETION_VALUES);
        Ok(Ok(Completion {
            values,
            total: completion.total,
            has_more,
        }))
    }
}

/// Refuse a result of `size` bytes over the result-size limit.
fn check_size(size: u64, limits: &Limits) -> Result<(), CallFailure> {
    if size > limits.max_result_bytes {
        return Err(CallFailure::ResultTooLarge {
            size: Some(size),
            limit: limits.max_result_bytes,
        });
    }
    Ok(())
}

/// What the JSON around one content item takes (`{"type":"image","data":,
/// "mimeType":}` and the like).
const ITEM_FRAMING: usize = 48;

/// The conversions and measurements of what a component returns, for the
/// WIT types of one contract version (in scope as `wit`, `wit_resources`
/// and `wit_prompts` where the macro is used). Both versions share these
/// types' shapes, so the code is the same.
macro_rules! conversions {
    () => {
        /// Convert from the guest's result, enforcing the result-size limit.
        pub(super) fn result(
            result: wit::CallResult,
            limits: &Limits,
        ) -> Result<ToolResult, CallFailure> {
            let size: u64 = result.content.iter().map(content_len).sum::<u64>()
                + result.structured.as_ref().map_or(0, |s| s.len() as u64);
            check_size(size, limits)?;
            Ok(ToolResult {
                content: result.content.into_iter().map(content).collect(),
                structured: result.structured,
                is_error: result.is_error,
                size,
            })
        }

        /// The bytes a content item counts against the result-size limit:
        /// its size as MCP sends it (text JSON-escaped, binary data
        /// base64-encoded, MIME types and URIs included), plus its JSON
        /// framing, so an empty item still costs something.
        fn content_len(content: &wit::Content) -> u64 {
            (match content {
                wit::Content::Text(text) => ITEM_FRAMING + json::escaped_len(text),
                wit::Content::Image(media) | wit::Content::Audio(media) => {
                    ITEM_FRAMING
                        + json::base64_len(media.data.len())
                        + json::escaped_len(&media.mime_type)
                }
                wit::Content::Embedded(resource) => {
                    ITEM_FRAMING
                        + json::escaped_len(&resource.uri)
                        + resource.mime_type.as_deref().map_or(0, json::escaped_len)
                        + body_len(&resource.body)
                }
            }) as u64
        }

        /// A resource body as sent: text escaped, a blob base64-encoded.
        fn body_len(body: &wit::ResourceBody) -> usize {
            match body {
                wit::ResourceBody::Text(text) => json::escaped_len(text),
                wit::ResourceBody::Blob(bytes) => json::base64_len(bytes.len()),
            }
        }

        fn body(body: wit::ResourceBody) -> ResourceBody {
            match body {
                wit::ResourceBody::Text(t) => ResourceBody::Text(t),
                wit::ResourceBody::Blob(b) => ResourceBody::Blob(b),
            }
        }

        fn content(content: wit::Content) -> Content {
            match content {
                wit::Content::Text(text) => Content::Text(text),
                wit::Content::Image(m) => Content::Image {
                    data: m.data,
                    mime_type: m.mime_type,
                },
                wit::Content::Audio(m) => Content::Audio {
                    data: m.data,
                    mime_type: m.mime_type,
                },
                wit::Content::Embedded(r) => Content::Resource {
                    uri: r.uri,
                    mime_type: r.mime_type,
                    body: body(r.body),
                },
            }
        }

        fn annotations(a: wit::Annotations) -> Annotations {
            Annotations {
                read_only: a.read_only,
                destructive: a.destructive,
                idempotent: a.idempotent,
                open_world: a.open_world,
            }
        }

        /// What a read returned, measured against the result-size limit.
        pub(super) fn resource_contents(
            contents: Vec<wit_resources::ResourceContents>,
            limits: &Limits,
        ) -> Result<Vec<ResourceContent>, CallFailure> {
            let size: u64 = contents
                .iter()
                .map(|c| {
                    (ITEM_FRAMING
                        + json::escaped_len(&c.uri)
                        + c.mime_type.as_deref().map_or(0, json::escaped_len)
                        + body_len(&c.body)) as u64
                })
                .sum();
            check_size(size, limits)?;
            Ok(contents
                .into_iter()
                .map(|c| ResourceContent {
                    uri: c.uri,
                    mime_type: c.mime_type,
                    body: body(c.body),
                })
                .collect())
        }

        /// What a prompt get returned, measured against the result-size
        /// limit.
        pub(super) fn prompt_output(
            result: wit_prompts::PromptResult,
            limits: &Limits,
        ) -> Result<PromptOutput, CallFailure> {
            let size: u64 = result
                .description
                .as_deref()
                .map_or(0, |d| json::escaped_len(d) as u64)
                + result
                    .messages
                    .iter()
                    .map(|m| content_len(&m.content))
                    .sum::<u64>();
            check_size(size, limits)?;
            Ok(PromptOutput {
                description: result.description,
                messages: result
                    .messages
                    .into_iter()
                    .map(|m| PromptMessage {
                        role: match m.role {
                            wit_prompts::Role::User => PromptRole::User,
                            wit_prompts::Role::Assistant => PromptRole::Assistant,
                        },
                        content: content(m.content),
                    })
                    .collect(),
            })
        }

        fn prompt_arguments(arguments: Vec<wit_prompts::PromptArgument>) -> Vec<PromptArgument> {
            arguments
                .into_iter()
                .map(|a| PromptArgument {
                    name: a.name,
                    title: a.title,
                    description: a.description,
                    required: a.required,
                })
                .collect()
        }
    };
}

/// Contract 0.1.0: what it cannot say takes the defaults.
mod from_v1 {
    use super::v1::toolcage::tool::types as wit;
    use super::v1_full::exports::toolcage::tool::prompts as wit_prompts;
    use super::v1_full::exports::toolcage::tool::resources as wit_resources;
    use super::*;

    conversions!();

    pub(super) fn descriptor(d: wit::Descriptor) -> RawDescriptor {
        RawDescriptor {
            name: d.name,
            title: d.title,
            description: d.description,
            input_schema: d.input_schema,
            output_schema: d.output_schema,
            annotations: annotations(d.annotations),
            ..RawDescriptor::default()
        }
    }

    pub(super) fn resource(d: wit_resources::ResourceDescriptor) -> RawResource {
        RawResource {
            uri: d.uri,
            name: d.name,
            title: d.title,
            description: d.description,
            mime_type: d.mime_type,
            size: d.size,
            icons: Vec::new(),
            watch: None,
        }
    }

    pub(super) fn template(d: wit_resources::TemplateDescriptor) -> RawTemplate {
        RawTemplate {
            uri_template: d.uri_template,
            name: d.name,
            title: d.title,
            description: d.description,
            mime_type: d.mime_type,
            icons: Vec::new(),
        }
    }

    pub(super) fn prompt(d: wit_prompts::PromptDescriptor) -> RawPrompt {
        RawPrompt {
            name: d.name,
            title: d.title,
            description: d.description,
            arguments: prompt_arguments(d.arguments),
            icons: Vec::new(),
        }
    }
}

/// Contract 0.2.0.
mod from_v2 {
    use super::v2::toolcage::tool::types as wit;
    use super::v2_full::exports::toolcage::tool::prompts as wit_prompts;
    use super::v2_full::exports::toolcage::tool::resources as wit_resources;
    use super::*;

    conversions!();

    pub(super) fn descriptor(d: wit::Descriptor) -> RawDescriptor {
        RawDescriptor {
            name: d.name,
            title: d.title,
            description: d.description,
            input_schema: d.input_schema,
            output_schema: d.output_schema,
            annotations: annotations(d.annotations),
            icons: icons(d.icons),
            execution: Execution {
                task_support: match d.task_support {
                    wit::TaskSupport::Forbidden => TaskSupport::Forbidden,
                    wit::TaskSupport::Optional => TaskSupport::Optional,
                    wit::TaskSupport::Required => TaskSupport::Required,
                },
                task_start: match d.task_start {
                    wit::TaskStart::WithCall => TaskStart::WithCall,
                    wit::TaskStart::OnBeginTask => TaskStart::OnBeginTask,
                },
            },
            needs: ClientNeeds {
                sampling: d.needs.contains(wit::ClientNeeds::SAMPLING),
                elicitation: d.needs.contains(wit::ClientNeeds::ELICITATION),
                roots: d.needs.contains(wit::ClientNeeds::ROOTS),
                tasks: false,
            },
        }
    }

    fn icons(icons: Vec<wit::Icon>) -> Vec<Icon> {
        icons
            .into_iter()
            .map(|icon| Icon {
                src: icon.src,
                mime_type: icon.mime_type,
                sizes: icon.sizes,
                theme: icon.theme.map(|theme| match theme {
                    wit::IconTheme::Light => IconTheme::Light,
                    wit::IconTheme::Dark => IconTheme::Dark,
                }),
            })
            .collect()
    }

    pub(super) fn resource(d: wit_resources::ResourceDescriptor) -> RawResource {
        RawResource {
            uri: d.uri,
            name: d.name,
            title: d.title,
            description: d.description,
            mime_type: d.mime_type,
            size: d.size,
            icons: icons(d.icons),
            watch: d.watch,
        }
    }

    pub(super) fn template(d: wit_resources::TemplateDescriptor) -> RawTemplate {
        RawTemplate {
            uri_template: d.uri_template,
            name: d.name,
            title: d.title,
            description: d.description,
            mime_type: d.mime_type,
            icons: icons(d.icons),
        }
    }

    pub(super) fn prompt(d: wit_prompts::PromptDescriptor) -> RawPrompt {
        RawPrompt {
            name: d.name,
            title: d.title,
            description: d.description,
            arguments: prompt_arguments(d.arguments),
            icons: icons(d.icons),
        }
    }
}

impl From<v2::toolcage::tool::host::Level> for LogLevel {
    fn from(level: v2::toolcage::tool::host::Level) -> Self {
        use v2::toolcage::tool::host::Level as WitLevel;
        match level {
            WitLevel::Debug => LogLevel::Debug,
            WitLevel::Info => LogLevel::Info,
            WitLevel::Notice => LogLevel::Notice,
            WitLevel::Warning => LogLevel::Warning,
            WitLevel::Error => LogLevel::Error,
            WitLevel::Critical => LogLevel::Critical,
            WitLevel::Alert => LogLevel::Alert,
            WitLevel::Emergency => LogLevel::Emergency,
        }
    }
}
