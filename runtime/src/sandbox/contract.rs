//! The toolcage contract (`guest-sdk/wit/tool.wit`): components that export
//! `toolcage:tool/tool` and optionally `resources` and `prompts`. Bindings,
//! the conversions from WIT types to [`crate::call`]'s, and the result-size
//! accounting of what such a component returns.
//!
//! Invariants:
//! - Every result is measured as it will be sent (text JSON-escaped, bytes
//!   base64-encoded, MIME types and URIs included, plus framing) and
//!   refused over the limit before it is converted.

use tokio_util::sync::CancellationToken;
use wasmtime::component::{Component, Linker};

use super::LoadError;
use super::store::{HostState, Run};
use crate::call::{
    Annotations, CallFailure, Content, LogLevel, PromptArgument, PromptMessage, PromptOutput,
    PromptRole, RawDescriptor, RawExtras, RawPrompt, RawResource, RawTemplate, ResourceBody,
    ResourceContent, ToolResult,
};
use crate::config::Limits;
use crate::json;

/// Host bindings generated from `guest-sdk/wit/tool.wit`.
#[allow(missing_docs)]
pub(super) mod bindings {
    wasmtime::component::bindgen!({
        path: "../guest-sdk/wit",
        world: "tool-component",
        imports: {
            "toolcage:tool/host.elicit": async | trappable,
            "toolcage:tool/host.sample": async | trappable,
        },
        exports: { default: async },
    });
}

/// Host bindings for the `full-component` world: only its `resources` and
/// `prompts` exports are used (the imports and shared types are those of
/// [`bindings`], so one linker serves both worlds).
#[allow(missing_docs)]
mod full_bindings {
    wasmtime::component::bindgen!({
        path: "../guest-sdk/wit",
        world: "full-component",
        exports: { default: async },
        with: {
            "toolcage:tool/types": super::bindings::toolcage::tool::types,
            "toolcage:tool/host": super::bindings::toolcage::tool::host,
        },
    });
}

pub(super) use bindings::toolcage::tool::host as wit_host;
use bindings::toolcage::tool::host::Level as WitLevel;
use bindings::toolcage::tool::types as wit;
pub(super) use bindings::{ToolComponent, ToolComponentPre};
use full_bindings::exports::toolcage::tool::prompts as wit_prompts;
use full_bindings::exports::toolcage::tool::resources as wit_resources;

/// The export name of the optional resources interface.
const RESOURCES_EXPORT: &str = "toolcage:tool/resources@0.1.0";

/// The export name of the optional prompts interface.
const PROMPTS_EXPORT: &str = "toolcage:tool/prompts@0.1.0";

/// A component of the contract, linked and checked: pre-instantiated once,
/// with the export indices of its optional interfaces looked up once.
pub(super) struct Contract {
    pre: ToolComponentPre<HostState>,
    resources: Option<wit_resources::GuestIndices>,
    prompts: Option<wit_prompts::GuestIndices>,
}

impl Contract {
    /// Link `component` and check that it exports the contract (and, if it
    /// exports `resources` or `prompts`, all of their functions).
    pub(super) fn prepare(
        linker: &Linker<HostState>,
        component: &Component,
    ) -> Result<Contract, LoadError> {
        let pre = linker
            .instantiate_pre(component)
            .map_err(|error| LoadError::Link(format!("{error:#}")))?;
        let pre = ToolComponentPre::new(pre)
            .map_err(|error| LoadError::Contract(format!("{error:#}")))?;
        let contract = |error: wasmtime::Error| LoadError::Contract(format!("{error:#}"));
        let resources = match component.get_export_index(None, RESOURCES_EXPORT) {
            Some(_) => {
                Some(wit_resources::GuestIndices::new(pre.instance_pre()).map_err(contract)?)
            }
            None => None,
        };
        let prompts = match component.get_export_index(None, PROMPTS_EXPORT) {
            Some(_) => Some(wit_prompts::GuestIndices::new(pre.instance_pre()).map_err(contract)?),
            None => None,
        };
        Ok(Contract {
            pre,
            resources,
            prompts,
        })
    }

    pub(super) fn has_resources(&self) -> bool {
        self.resources.is_some()
    }

    pub(super) fn has_prompts(&self) -> bool {
        self.prompts.is_some()
    }

    /// `describe`, in `run`'s fresh instance.
    pub(super) async fn describe(
        &self,
        run: &mut Run,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<Vec<RawDescriptor>, CallFailure> {
        let descriptors = run
            .run(limits, cancel, async |store| {
                let instance = self.pre.instantiate_async(&mut *store).await?;
                instance
                    .toolcage_tool_tool()
                    .call_describe(&mut *store)
                    .await
            })
            .await?;
        Ok(descriptors.into_iter().map(RawDescriptor::from).collect())
    }

    /// `list-resources`, `list-templates` and `list-prompts` (those the
    /// component exports), in `run`'s one fresh instance.
    pub(super) async fn list_extras(
        &self,
        run: &mut Run,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<RawExtras, CallFailure> {
        run.run(limits, cancel, async |store| {
            let instance = self
                .pre
                .instance_pre()
                .instantiate_async(&mut *store)
                .await?;
            let mut raw = RawExtras::default();
            if let Some(indices) = &self.resources {
                let guest = indices.load(&mut *store, &instance)?;
                raw.resources = guest
                    .call_list_resources(&mut *store)
                    .await?
                    .into_iter()
                    .map(RawResource::from)
                    .collect();
                raw.templates = guest
                    .call_list_templates(&mut *store)
                    .await?
                    .into_iter()
                    .map(RawTemplate::from)
                    .collect();
            }
            if let Some(indices) = &self.prompts {
                let guest = indices.load(&mut *store, &instance)?;
                raw.prompts = guest
                    .call_list_prompts(&mut *store)
                    .await?
                    .into_iter()
                    .map(RawPrompt::from)
                    .collect();
            }
            Ok(raw)
        })
        .await
    }

    /// A fresh instance in `run`'s store, for a call to come.
    pub(super) async fn instantiate(
        &self,
        run: &mut Run,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<ToolComponent, CallFailure> {
        run.run(limits, cancel, async |store| {
            self.pre.instantiate_async(&mut *store).await
        })
        .await
    }

    /// Tool `name` with `arguments`, in `instance` (made ahead of the call
    /// in `run`'s store), or in a fresh instance.
    pub(super) async fn call(
        &self,
        run: &mut Run,
        instance: Option<ToolComponent>,
        name: &str,
        arguments: &str,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<ToolResult, CallFailure> {
        let result = run
            .run(limits, cancel, async |store| {
                let instance = match instance {
                    Some(instance) => instance,
                    None => self.pre.instantiate_async(&mut *store).await?,
                };
                instance
                    .toolcage_tool_tool()
                    .call_call(&mut *store, name, arguments)
                    .await
            })
            .await?;
        result_from_wit(result, limits)
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
        let Some(indices) = &self.resources else {
            return Err(CallFailure::Trap("does not export resources".into()));
        };
        let outcome = run
            .run(limits, cancel, async |store| {
                let instance = self
                    .pre
                    .instance_pre()
                    .instantiate_async(&mut *store)
                    .await?;
                let guest = indices.load(&mut *store, &instance)?;
                guest.call_read(&mut *store, uri).await
            })
            .await;
        run.log_output();
        let contents = match outcome? {
            Ok(contents) => contents,
            Err(message) => return Ok(Err(message)),
        };
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
        Ok(Ok(contents
            .into_iter()
            .map(|c| ResourceContent {
                uri: c.uri,
                mime_type: c.mime_type,
                body: body_from_wit(c.body),
            })
            .collect()))
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
        let Some(indices) = &self.prompts else {
            return Err(CallFailure::Trap("does not export prompts".into()));
        };
        let outcome = run
            .run(limits, cancel, async |store| {
                let instance = self
                    .pre
                    .instance_pre()
                    .instantiate_async(&mut *store)
                    .await?;
                let guest = indices.load(&mut *store, &instance)?;
                guest.call_get(&mut *store, name, arguments).await
            })
            .await;
        run.log_output();
        let result = match outcome? {
            Ok(result) => result,
            Err(message) => return Ok(Err(message)),
        };
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
        Ok(Ok(PromptOutput {
            description: result.description,
            messages: result
                .messages
                .into_iter()
                .map(|m| PromptMessage {
                    role: match m.role {
                        wit_prompts::Role::User => PromptRole::User,
                        wit_prompts::Role::Assistant => PromptRole::Assistant,
                    },
                    content: content_from_wit(m.content),
                })
                .collect(),
        }))
    }
}

impl From<WitLevel> for LogLevel {
    fn from(level: WitLevel) -> Self {
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

impl From<wit::Descriptor> for RawDescriptor {
    fn from(d: wit::Descriptor) -> Self {
        RawDescriptor {
            name: d.name,
            title: d.title,
            description: d.description,
            input_schema: d.input_schema,
            output_schema: d.output_schema,
            annotations: Annotations {
                read_only: d.annotations.read_only,
                destructive: d.annotations.destructive,
                idempotent: d.annotations.idempotent,
                open_world: d.annotations.open_world,
            },
        }
    }
}

/// Convert from the guest's result, enforcing the result-size limit.
fn result_from_wit(result: wit::CallResult, limits: &Limits) -> Result<ToolResult, CallFailure> {
    let size: u64 = result.content.iter().map(content_len).sum::<u64>()
        + result.structured.as_ref().map_or(0, |s| s.len() as u64);
    check_size(size, limits)?;
    Ok(ToolResult {
        content: result.content.into_iter().map(content_from_wit).collect(),
        structured: result.structured,
        is_error: result.is_error,
        size,
    })
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

/// The bytes a content item counts against the result-size limit: its size
/// as MCP sends it (text JSON-escaped, binary data base64-encoded, MIME
/// types and URIs included), plus its JSON framing, so an empty item still
/// costs something.
fn content_len(content: &wit::Content) -> u64 {
    (match content {
        wit::Content::Text(text) => ITEM_FRAMING + json::escaped_len(text),
        wit::Content::Image(media) | wit::Content::Audio(media) => {
            ITEM_FRAMING + json::base64_len(media.data.len()) + json::escaped_len(&media.mime_type)
        }
        wit::Content::Embedded(resource) => {
            ITEM_FRAMING
                + json::escaped_len(&resource.uri)
                + resource.mime_type.as_deref().map_or(0, json::escaped_len)
                + body_len(&resource.body)
        }
    }) as u64
}

/// What the JSON around one content item takes (`{"type":"image","data":,
/// "mimeType":}` and the like).
const ITEM_FRAMING: usize = 48;

/// A resource body as sent: text escaped, a blob base64-encoded.
fn body_len(body: &wit::ResourceBody) -> usize {
    match body {
        wit::ResourceBody::Text(text) => json::escaped_len(text),
        wit::ResourceBody::Blob(bytes) => json::base64_len(bytes.len()),
    }
}

fn body_from_wit(body: wit::ResourceBody) -> ResourceBody {
    match body {
        wit::ResourceBody::Text(t) => ResourceBody::Text(t),
        wit::ResourceBody::Blob(b) => ResourceBody::Blob(b),
    }
}

fn content_from_wit(content: wit::Content) -> Content {
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
            body: body_from_wit(r.body),
        },
    }
}

impl From<wit_resources::ResourceDescriptor> for RawResource {
    fn from(d: wit_resources::ResourceDescriptor) -> Self {
        RawResource {
            uri: d.uri,
            name: d.name,
            title: d.title,
            description: d.description,
            mime_type: d.mime_type,
            size: d.size,
        }
    }
}

impl From<wit_resources::TemplateDescriptor> for RawTemplate {
    fn from(d: wit_resources::TemplateDescriptor) -> Self {
        RawTemplate {
            uri_template: d.uri_template,
            name: d.name,
            title: d.title,
            description: d.description,
            mime_type: d.mime_type,
        }
    }
}

impl From<wit_prompts::PromptDescriptor> for RawPrompt {
    fn from(d: wit_prompts::PromptDescriptor) -> Self {
        RawPrompt {
            name: d.name,
            title: d.title,
            description: d.description,
            arguments: d
                .arguments
                .into_iter()
                .map(|a| PromptArgument {
                    name: a.name,
                    title: a.title,
                    description: a.description,
                    required: a.required,
                })
                .collect(),
        }
    }
}
