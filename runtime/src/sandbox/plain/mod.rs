//! Plain components: any component that does not export the contract.
//! Every function it exports, at world level or inside an exported
//! interface, is a candidate tool; its parameters and result are mapped to
//! JSON (see `shape` for the table) and its WIT documentation becomes the
//! tool's description.
//!
//! Names (MCP allows `A-Za-z0-9_-.`, at most 128): a function's own name
//! (`get-weather`) when no other exported function has it; else, for a
//! function in an interface, `interface.function`; else
//! `namespace.package.interface.function`. World-level names never get a
//! prefix (the component model keeps them unique).
//!
//! Never tools: build tools' own exports (componentize-py's
//! `exports#init`), functions of exported `wasi:` interfaces (entry points such
//! as `wasi:cli/run` or `wasi:http/incoming-handler`), resource methods and
//! constructors, `async` functions, and functions whose types have no JSON
//! form; each is listed as skipped with the reason.
//!
//! Invariants:
//! - Arguments are converted along the function's shape, with an error
//!   that names the path; the guest never sees a value of the wrong type
//!   (wasmtime type-checks every value again at the call).
//! - A result is measured as it will be sent and refused over the
//!   result-size limit, as a contract result is.

pub(super) mod docs;
mod shape;
mod value;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use wasmtime::component::{Component, ComponentExportIndex, Instance, InstancePre, Linker, Val};
use wit_parser::{Function, FunctionKind, Resolve, Type, WorldId, WorldItem, WorldKey};

use super::LoadError;
use super::inspect::{key_name, unversioned};
use super::store::{HostState, Run};
use crate::call::{Annotations, CallFailure, Content, RawDescriptor, ToolResult};
use crate::config::{Limits, PlainRules, ToolOverride};
use crate::json;
use shape::{SchemaBuilder, Shape, Shapes};

/// Longest tool name MCP allows.
const MAX_TOOL_NAME: usize = 128;

/// A function of a plain component that became a tool.
struct PlainFunction {
    /// The tool's name.
    tool: String,
    /// The export name of its interface, or `None` at world level.
    interface: Option<String>,
    /// The function's own name.
    function: String,
    params: Vec<(String, Arc<Shape>)>,
    result: Option<Arc<Shape>>,
    descriptor: RawDescriptor,
}

/// An exported function that is not a tool, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// `function` at world level, `interface#function` inside one.
    pub function: String,
    /// Why.
    pub reason: String,
}

/// What a plain component exports, read from its WIT before it compiles.
pub(super) struct PlainTools {
    functions: Vec<PlainFunction>,
    skipped: Vec<Skipped>,
    /// Every export, as the component names it.
    exports: Vec<String>,
}

impl PlainTools {
    /// The tools of the component whose type is `world` in `resolve`.
    pub(super) fn from_world(resolve: &Resolve, world: WorldId, rules: &PlainRules) -> PlainTools {
        let mut tools = PlainTools {
            functions: Vec::new(),
            skipped: Vec::new(),
            exports: Vec::new(),
        };
        let Some(w) = resolve.worlds.get(world) else {
            return tools;
        };
        // Candidates: (interface export name, interface short name,
        // function), in export order.
        let mut candidates: Vec<(Option<String>, Option<String>, &Function)> = Vec::new();
        for (key, item) in &w.exports {
            let Some(export) = key_name(resolve, key) else {
                continue;
            };
            tools.exports.push(export.clone());
            match item {
                WorldItem::Function(function) => candidates.push((None, None, function)),
                WorldItem::Interface { id, .. } => {
                    let Some(interface) = resolve.interfaces.get(*id) else {
                        continue;
                    };
                    let short = match key {
                        WorldKey::Name(name) => name.clone(),
                        WorldKey::Interface(_) => interface.name.clone().unwrap_or_default(),
                    };
                    // (An inline interface belongs to the world's package.)
                    let wasi = interface
                        .package
                        .or(w.package)
                        .and_then(|p| resolve.packages.get(p))
                        .is_some_and(|p| p.name.namespace == "wasi");
                    for function in interface.functions.values() {
                        if let Some(why) = build_artefact(&export, &function.name) {
                            tools.skipped.push(Skipped {
                                function: format!("{export}#{}", function.name),
                                reason: why.to_owned(),
                            });
                            continue;
                        }
                        if wasi {
                            tools.skipped.push(Skipped {
                                function: format!("{export}#{}", function.name),
                                reason: format!(
                                    "`{}` is a WASI entry point, not a tool",
                                    unversioned(&export)
                                ),
                            });
                            continue;
                        }
                        candidates.push((Some(export.clone()), Some(short.clone()), function));
                    }
                }
                WorldItem::Type { .. } => {}
            }
        }
        let mut shapes = Shapes::new(resolve);
        let mut accepted = Vec::new();
        for (interface, short, function) in candidates {
            let label = match &interface {
                Some(interface) => format!("{interface}#{}", function.name),
                None => function.name.clone(),
            };
            match signature(&mut shapes, function) {
                Ok((params, result)) => accepted.push((interface, short, function, params, result)),
                Err(reason) => tools.skipped.push(Skipped {
                    function: label,
                    reason,
                }),
            }
        }
        let names = tool_names(
            &accepted
                .iter()
                .map(|(interface, short, function, ..)| {
                    (
                        interface.as_deref(),
                        short.as_deref(),
                        function.name.as_str(),
                    )
                })
                .collect::<Vec<_>>(),
        );
        let derived: Vec<String> = names
            .iter()
            .filter_map(|n| n.as_ref().ok().cloned())
            .collect();
        warn_unknown(rules, &derived);
        let mut finals: HashSet<String> = HashSet::new();
        for ((interface, _, function, params, result), name) in accepted.into_iter().zip(names) {
            let label = match &interface {
                Some(interface) => format!("{interface}#{}", function.name),
                None => function.name.clone(),
            };
            let mut skip = |reason: String| {
                tools.skipped.push(Skipped {
                    function: label.clone(),
                    reason,
                });
            };
            let derived = match name {
                Ok(name) => name,
                Err(reason) => {
                    skip(reason);
                    continue;
                }
            };
            if rules.expose.as_ref().is_some_and(|e| !e.contains(&derived)) {
                skip(format!("`{derived}` is not in the config's `expose` list"));
                continue;
            }
            if rules.hide.contains(&derived) {
                skip(format!("`{derived}` is hidden by the config's `hide` list"));
                continue;
            }
            let name = rules
                .rename
                .get(&derived)
                .cloned()
                .unwrap_or_else(|| derived.clone());
            if !finals.insert(name.clone()) {
                skip(format!(
                    "its tool name `{name}` (renamed in the config) is taken by another export of the same component"
                ));
                continue;
            }
            match descriptor(
                resolve,
                &name,
                interface.as_deref(),
                function,
                &params,
                result.as_deref(),
            ) {
                Ok(mut descriptor) => {
                    if let Some(o) = rules.tools.get(&derived) {
                        apply_override(&mut descriptor, o);
                    }
                    tools.functions.push(PlainFunction {
                        tool: name,
                        interface,
                        function: function.name.clone(),
                        params,
                        result,
                        descriptor,
                    });
                }
                Err(reason) => skip(reason),
            }
        }
        tools
    }
}

/// Log the names the operator's rules give that no function has, so a
/// typo is not silently ignored.
fn warn_unknown(rules: &PlainRules, derived: &[String]) {
    let known = |name: &String| derived.contains(name);
    let unknown: Vec<&String> = rules
        .expose
        .iter()
        .flatten()
        .chain(&rules.hide)
        .chain(rules.rename.keys())
        .chain(rules.tools.keys())
        .filter(|name| !known(name))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<&str> = unknown.iter().map(|n| n.as_str()).collect();
        tracing::warn!(
            names = %names.join(", "),
            "the config's `[components.…]` section names functions this component does not export as tools"
        );
    }
}

/// The operator's description and hints over the derived ones.
fn apply_override(descriptor: &mut RawDescriptor, o: &ToolOverride) {
    if let Some(description) = &o.description {
        descriptor.description.clone_from(description);
    }
    if o.title.is_some() {
        descriptor.title.clone_from(&o.title);
    }
    let a = &mut descriptor.annotations;
    a.read_only = o.read_only.unwrap_or(a.read_only);
    // A read-only tool is not destructive unless the operator says so.
    a.destructive = o.destructive.unwrap_or(a.destructive && !a.read_only);
    a.idempotent = o.idempotent.unwrap_or(a.idempotent);
    a.open_world = o.open_world.unwrap_or(a.open_world);
}

/// Exports that build tools add to every component they make, which are
/// not the author's functions: (export, function, why).
const BUILD_ARTEFACTS: &[(&str, &str, &str)] = &[(
    "exports",
    "init",
    "componentize-py's start-up export, not a tool",
)];

/// Why `function` of the exported interface `export` is a build tool's, if
/// it is.
fn build_artefact(export: &str, function: &str) -> Option<&'static str> {
    BUILD_ARTEFACTS
        .iter()
        .find(|(e, f, _)| *e == export && *f == function)
        .map(|(_, _, why)| *why)
}

/// The parameter and result shapes of `function`, or why it is no tool.
#[allow(clippy::type_complexity)]
fn signature(
    shapes: &mut Shapes<'_>,
    function: &Function,
) -> Result<(Vec<(String, Arc<Shape>)>, Option<Arc<Shape>>), String> {
    match function.kind {
        FunctionKind::Freestanding => {}
        FunctionKind::AsyncFreestanding => {
            return Err(
                "it is an `async` function (the component-model async ABI is not supported yet)"
                    .into(),
            );
        }
        _ => {
            return Err(
                "it is a resource method or constructor (resources are not supported yet)".into(),
            );
        }
    }
    let params = function
        .params
        .iter()
        .map(|p| Ok((p.name.clone(), shapes.of(&p.ty)?)))
        .collect::<Result<Vec<_>, String>>()?;
    let result = function.result.as_ref().map(|t| shapes.of(t)).transpose()?;
    Ok((params, result))
}

/// The tool name of each function (see the module's docs), or why it has
/// none. `functions` are (interface export name, interface name, function).
fn tool_names(functions: &[(Option<&str>, Option<&str>, &str)]) -> Vec<Result<String, String>> {
    /// Replace each name used more than once by `qualify`'s, where it has one.
    fn disambiguate(names: Vec<String>, qualify: impl Fn(usize) -> Option<String>) -> Vec<String> {
        let mut uses: HashMap<&str, usize> = HashMap::new();
        for name in &names {
            *uses.entry(name).or_default() += 1;
        }
        let clashing: Vec<bool> = names.iter().map(|n| uses[n.as_str()] > 1).collect();
        names
            .into_iter()
            .zip(clashing)
            .enumerate()
            .map(|(i, (name, clash))| {
                if clash {
                    qualify(i).unwrap_or(name)
                } else {
                    name
                }
            })
            .collect()
    }
    let bare = functions.iter().map(|(_, _, f)| (*f).to_owned()).collect();
    let by_interface = disambiguate(bare, |i| {
        let (_, short, f) = functions[i];
        short.map(|short| format!("{short}.{f}"))
    });
    let by_package = disambiguate(by_interface, |i| {
        let (interface, _, f) = functions[i];
        interface.map(|interface| {
            let dotted: String = unversioned(interface)
                .chars()
                .map(|c| if c == ':' || c == '/' { '.' } else { c })
                .collect();
            format!("{dotted}.{f}")
        })
    });
    let mut seen: HashSet<&str> = HashSet::new();
    by_package
        .iter()
        .map(|name| {
            if name.len() > MAX_TOOL_NAME {
                Err(format!(
                    "its tool name `{name}` would be longer than {MAX_TOOL_NAME} characters"
                ))
            } else if !seen.insert(name) {
                Err(format!(
                    "its tool name `{name}` is taken by another export of the same component"
                ))
            } else {
                Ok(name.clone())
            }
        })
        .collect()
}

/// The tool descriptor of `function`: schemas from its shapes, the
/// description from its docs.
fn descriptor(
    resolve: &Resolve,
    name: &str,
    interface: Option<&str>,
    function: &Function,
    params: &[(String, Arc<Shape>)],
    result: Option<&Shape>,
) -> Result<RawDescriptor, String> {
    let too_large = |_| {
        format!(
            "the JSON Schema of its types would have more than {} nodes",
            shape::MAX_SCHEMA_NODES
        )
    };
    let mut builder = SchemaBuilder::new();
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (param, shape) in params {
        properties.insert(param.clone(), builder.schema(shape).map_err(too_large)?);
        if !matches!(**shape, Shape::Option(_)) {
            required.push(Value::String(param.clone()));
        }
    }
    let input = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    });
    let output = match result {
        None | Some(Shape::Result { ok: None, .. }) => None,
        Some(Shape::Result { ok: Some(ok), .. }) => {
            Some(result_schema(builder.schema(ok).map_err(too_large)?))
        }
        Some(shape) => Some(result_schema(builder.schema(shape).map_err(too_large)?)),
    };
    let description = match function.docs.contents.as_deref().map(str::trim) {
        Some(docs) if !docs.is_empty() => docs.to_owned(),
        _ => generated_description(resolve, name, interface, function),
    };
    Ok(RawDescriptor {
        name: name.to_owned(),
        title: None,
        description,
        input_schema: input.to_string(),
        output_schema: output.map(|schema| schema.to_string()),
        // Plain components carry no hints; MCP reads an unannotated tool
        // as destructive and open-world, and so does toolcage: such a tool
        // asks for confirmation until the operator says otherwise.
        annotations: Annotations {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        },
        ..RawDescriptor::default()
    })
}

fn result_schema(result: Value) -> Value {
    json!({
        "type": "object",
        "properties": {"result": result},
        "required": ["result"],
        "additionalProperties": false
    })
}

/// What a function without documentation is described as: plainly so.
fn generated_description(
    resolve: &Resolve,
    name: &str,
    interface: Option<&str>,
    function: &Function,
) -> String {
    let from = interface.map_or_else(String::new, |i| format!(" of `{}`", unversioned(i)));
    let params: Vec<String> = function
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, type_name(resolve, &p.ty)))
        .collect();
    let returns = function
        .result
        .as_ref()
        .map_or_else(String::new, |t| format!(" -> {}", type_name(resolve, t)));
    format!(
        "`{name}`: the function `{}`{from} of a plain component, which has no description in its WIT. Signature: ({}){returns}.",
        function.name,
        params.join(", ")
    )
}

/// A WIT type as its name (`u32`, `list<string>`, `my-record`).
fn type_name(resolve: &Resolve, ty: &Type) -> String {
    match ty {
        Type::Id(id) => match resolve.types.get(*id) {
            Some(def) => match &def.name {
                Some(name) => name.clone(),
                None => match &def.kind {
                    wit_parser::TypeDefKind::List(t) => format!("list<{}>", type_name(resolve, t)),
                    wit_parser::TypeDefKind::Option(t) => {
                        format!("option<{}>", type_name(resolve, t))
                    }
                    wit_parser::TypeDefKind::Result(_) => "result".into(),
                    wit_parser::TypeDefKind::Tuple(_) => "tuple".into(),
                    _ => "…".into(),
                },
            },
            None => "…".into(),
        },
        other => format!("{other:?}").to_lowercase(),
    }
}

/// A plain component, linked: its functions with their export indices.
pub(super) struct Plain {
    pre: InstancePre<HostState>,
    functions: Vec<(PlainFunction, ComponentExportIndex)>,
    skipped: Vec<Skipped>,
    exports: Vec<String>,
}

impl Plain {
    /// Link `component` and look up each function of `tools`.
    pub(super) fn prepare(
        linker: &Linker<HostState>,
        component: &Component,
        tools: PlainTools,
    ) -> Result<Plain, LoadError> {
        let pre = linker
            .instantiate_pre(component)
            .map_err(|error| LoadError::Link(format!("{error:#}")))?;
        let mut functions = Vec::with_capacity(tools.functions.len());
        let mut skipped = tools.skipped;
        for function in tools.functions {
            let parent = match &function.interface {
                Some(interface) => component.get_export_index(None, interface),
                None => None,
            };
            let index = match (&function.interface, parent) {
                (Some(_), None) => None,
                (_, parent) => component.get_export_index(parent.as_ref(), &function.function),
            };
            match index {
                Some(index) => functions.push((function, index)),
                None => skipped.push(Skipped {
                    function: function.function.clone(),
                    reason:
                        "the compiled component does not export it under the name its WIT gives"
                            .into(),
                }),
            }
        }
        Ok(Plain {
            pre,
            functions,
            skipped,
            exports: tools.exports,
        })
    }

    /// The tools, as descriptors.
    pub(super) fn describe(&self) -> Vec<RawDescriptor> {
        self.functions
            .iter()
            .map(|(f, _)| f.descriptor.clone())
            .collect()
    }

    /// The exported functions that are not tools.
    pub(super) fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Every export, as the component names it.
    pub(super) fn exports(&self) -> &[String] {
        &self.exports
    }

    /// Whether `arguments` convert to tool `name`'s parameters; the first
    /// problem, with its path, if not.
    pub(super) fn check_arguments(
        &self,
        name: &str,
        arguments: &Value,
    ) -> Result<Option<Vec<Val>>, String> {
        let Some((function, _)) = self.functions.iter().find(|(f, _)| f.tool == name) else {
            return Ok(None);
        };
        let Value::Object(arguments) = arguments else {
            return Err("the arguments are not a JSON object".into());
        };
        value::params(&function.params, arguments).map(Some)
    }

    /// A fresh instance in `run`'s store, for a call to come.
    pub(super) async fn instantiate(
        &self,
        run: &mut Run,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<Instance, CallFailure> {
        run.run(limits, cancel, async |store| {
            self.pre.instantiate_async(&mut *store).await
        })
        .await
    }

    /// Tool `name` with `params` (the arguments as `check_arguments`
    /// converted them, once per call; `None` converts `arguments`, a JSON
    /// object as text, here), in `instance` (made ahead of the call in
    /// `run`'s store) or in a fresh instance.
    pub(super) async fn call(
        &self,
        run: &mut Run,
        instance: Option<Instance>,
        name: &str,
        (arguments, params): (&str, Option<Vec<Val>>),
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<ToolResult, CallFailure> {
        let Some((function, index)) = self.functions.iter().find(|(f, _)| f.tool == name) else {
            return Err(CallFailure::Trap(format!(
                "the component has no function for tool `{name}`"
            )));
        };
        let params = match params {
            Some(params) => params,
            None => {
                // Arguments the host already validated, their text within
                // the request's caps: the budget admits any JSON of that
                // text (a one-entry map takes about 115 times its text).
                let budget = arguments.len().saturating_mul(128).max(64 * 1024);
                let converted = match json::parse(arguments, budget) {
                    Ok(value) => self.check_arguments(name, &value),
                    Err(error) => Err(format!("the arguments could not be read: {error}")),
                };
                match converted {
                    Ok(params) => params.unwrap_or_default(),
                    Err(message) => {
                        return Ok(error_result(format!(
                            "the arguments do not fit the function's parameters: {message}; the tool was not run"
                        )));
                    }
                }
            }
        };
        let arity = usize::from(function.result.is_some());
        let results = run
            .run(limits, cancel, async |store| {
                let instance = match instance {
                    Some(instance) => instance,
                    None => self.pre.instantiate_async(&mut *store).await?,
                };
                let func = instance.get_func(&mut *store, index).ok_or_else(|| {
                    wasmtime::format_err!("the instance has no function `{}`", function.function)
                })?;
                let mut results = vec![Val::Bool(false); arity];
                func.call_async(&mut *store, &params, &mut results).await?;
                Ok(results)
            })
            .await?;
        result(function, results.first(), limits)
    }
}

/// An error result with `message`, from the host (the guest did not run).
fn error_result(message: String) -> ToolResult {
    let size = json::escaped_len(&message) as u64;
    ToolResult {
        content: vec![Content::Text(message)],
        structured: None,
        is_error: true,
        size,
    }
}

/// What a function's result is sent as: the JSON of a value, `null` (an
/// `ok` without a payload), or a message of the host's.
enum Payload<'a> {
    Value(&'a Shape, &'a Val),
    Null,
    Message(&'static str),
}

impl Payload<'_> {
    fn write<S: value::Sink>(&self, out: &mut S) -> Result<(), value::Over> {
        match self {
            Payload::Value(shape, val) => value::write_json(shape, val, out),
            Payload::Null => out.raw("null"),
            Payload::Message(text) => out.string(text),
        }
    }
}

/// The bytes a result adds besides its JSON: the text item's framing
/// (as `content_len` counts it), and `{"result":` + `}` around the
/// structured output.
const TEXT_FRAMING: u64 = 48;
const STRUCTURED_FRAMING: u64 = 11;

/// The tool result of a function that returned `val`: its JSON as text
/// (a string as itself) and as structured output `{"result": …}`; a
/// top-level `result` that is `err` is an error result carrying the error.
///
/// The JSON is measured along the lifted value before anything is built,
/// and the walk stops as soon as the result cannot fit the result-size
/// limit; only a result that fits is written, once, into a buffer of its
/// exact size (the structured output is that text framed).
fn result(
    function: &PlainFunction,
    val: Option<&Val>,
    limits: &Limits,
) -> Result<ToolResult, CallFailure> {
    let (payload, is_error) = match (function.result.as_deref(), val) {
        (None, _) | (_, None) => (None, false),
        (Some(Shape::Result { ok, err }), Some(Val::Result(outcome))) => match outcome {
            Ok(payload) => (
                Some(match (ok.as_deref(), payload.as_deref()) {
                    (Some(shape), Some(v)) => Payload::Value(shape, v),
                    _ => Payload::Null,
                }),
                false,
            ),
            Err(payload) => (
                Some(match (err.as_deref(), payload.as_deref()) {
                    (Some(shape), Some(v)) => Payload::Value(shape, v),
                    _ => Payload::Message("the function returned an error without details"),
                }),
                true,
            ),
        },
        (Some(shape), Some(v)) => (Some(Payload::Value(shape, v)), false),
    };
    let Some(payload) = payload else {
        return Ok(ToolResult {
            content: Vec::new(),
            structured: None,
            is_error,
            size: 0,
        });
    };
    let has_output = !is_error
        && !matches!(
            function.result.as_deref(),
            None | Some(Shape::Result { ok: None, .. })
        );
    // The JSON is sent once as text and, with an output, once more
    // framed: whatever the escaping, the whole is at least this.
    let limit = limits.max_result_bytes;
    let max_len = if has_output {
        limit.saturating_sub(TEXT_FRAMING + STRUCTURED_FRAMING) / 2
    } else {
        limit.saturating_sub(TEXT_FRAMING)
    };
    let mut measure = value::Measure::new(usize::try_from(max_len).unwrap_or(usize::MAX));
    if payload.write(&mut measure).is_err() {
        return Err(CallFailure::ResultTooLarge { size: None, limit });
    }
    let len = measure.len as u64;
    let mut json = value::Text(String::with_capacity(measure.len));
    // A `Text` is never full.
    let _ = payload.write(&mut json);
    let json = json.0;
    let structured = has_output.then(|| format!("{{\"result\":{json}}}"));
    // A JSON string is sent as the text itself, whose escaped length is
    // the JSON's; other JSON is sent as text, each `"` and `\` escaped.
    let (text, text_len) = if json.starts_with('"') {
        let text = serde_json::from_str::<String>(&json).map_err(|error| {
            CallFailure::Trap(format!("the result's JSON did not read back: {error}"))
        })?;
        (text, len)
    } else {
        (json, len + measure.specials as u64 + 2)
    };
    let size = TEXT_FRAMING + text_len + structured.as_ref().map_or(0, |s| s.len() as u64);
    if size > limit {
        return Err(CallFailure::ResultTooLarge {
            size: Some(size),
            limit,
        });
    }
    Ok(ToolResult {
        content: vec![Content::Text(text)],
        structured,
        is_error,
        size,
    })
}

#[cfg(test)]
mod tests;
