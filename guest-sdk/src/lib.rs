//! Write toolcage tools in Rust.
//!
//! A tool is a plain function from a typed argument struct to a
//! `Result<T, E>`. The `#[tool]` attribute turns it into an MCP tool:
//!
//! - the **input schema** is derived from the argument type
//!   ([`schemars::JsonSchema`]), so field docs become property descriptions;
//! - the **description** is the function's doc comment (or
//!   `#[tool(description = "..")]`);
//! - **`Ok(T)`** becomes structured output (with `T`'s schema as the tool's
//!   output schema) plus a text rendering of the same JSON; **`Err(E)`**
//!   becomes an `isError` result whose text is `E`'s `Display`;
//! - a **panic** becomes an error result carrying the panic message (the host
//!   reads it from the captured standard error).
//!
//! [`export!`] lists the tools a component provides. That is the whole API:
//!
//! ```no_run
//! use serde::{Deserialize, Serialize};
//! use toolcage_guest::{export, tool, JsonSchema};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct GreetArgs {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct Greeting {
//!     message: String,
//! }
//!
//! /// Greet someone by name. Returns the greeting.
//! #[tool(read_only, idempotent)]
//! fn greet(args: GreetArgs) -> Result<Greeting, String> {
//!     if args.name.is_empty() {
//!         return Err("`name` must not be empty".into());
//!     }
//!     toolcage_guest::info!("greeting {}", args.name);
//!     Ok(Greeting { message: format!("Hello, {}!", args.name) })
//! }
//!
//! export!(greet);
//! # fn main() {}
//! ```
//!
//! Build it as a component and drop it into the tools folder:
//!
//! ```text
//! rustup target add wasm32-wasip2
//! cargo build --release --target wasm32-wasip2
//! cp target/wasm32-wasip2/release/greet.wasm ~/.config/toolcage/tools/
//! ```
//!
//! (The crate must be a `cdylib`: `[lib] crate-type = ["cdylib"]`.)
//!
//! Tools use plain `std::fs`, `std::env` and `std::time`; the sandbox decides
//! what they can reach. Every call runs in a fresh instance, so globals do not
//! carry over between calls.
//!
//! For results that are not structured (an image, a mix of content), return
//! [`Output`] instead of a serialisable type.
//!
//! A typed result is serialised once, straight from its type to JSON text,
//! when the component returns it. A type of your own that implements
//! [`ToolOutput`] (to put its text and its structured output side by side,
//! say) does the same by implementing [`ToolOutput::into_json_output`];
//! without it, its [`Output`]'s `Value` is built, then serialised.
//!
//! Structured output is always a JSON object, so a value whose type's
//! schema is not an object is sent as `{"result": value}`. Deciding that
//! takes the type's schema, generated again in every call (each runs in a
//! fresh instance); a struct returned from a tool can spare it with an
//! empty `impl ObjectOutput for Greeting {}` (see [`ObjectOutput`]),
//! checked once, when the component is loaded.
//!
//! # Resources and prompts
//!
//! A component can also provide MCP resources and prompts, declared with
//! builders ([`ResourceDef`], [`PromptDef`]) in functions listed in the
//! long form of [`export!`]:
//!
//! ```no_run
//! use serde::Deserialize;
//! use toolcage_guest::{export, Content, JsonSchema, PromptDef, PromptMessage, ResourceBody, ResourceDef};
//!
//! fn readme() -> ResourceDef {
//!     ResourceDef::new("docs://readme", "readme", || {
//!         Ok::<_, String>(ResourceBody::Text("Read me.".into()))
//!     })
//!     .mime_type("text/plain")
//! }
//!
//! fn item() -> ResourceDef {
//!     // `{id}` matches one path segment; the handler gets its value.
//!     ResourceDef::template("items://{id}", "item", |vars| {
//!         Ok::<_, String>(ResourceBody::Text(format!("item {}", vars.get("id").unwrap_or(""))))
//!     })
//! }
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct ReviewArgs {
//!     /// The code to review.
//!     code: String,
//! }
//!
//! fn review() -> PromptDef {
//!     // Arguments come from the type's schema (field docs become their
//!     // descriptions; non-`Option` fields are required).
//!     PromptDef::new("review", "Review some code", |args: ReviewArgs| {
//!         Ok::<_, String>(vec![PromptMessage::user(Content::text(format!("Review:\n{}", args.code)))])
//!     })
//! }
//!
//! export!(tools: [], resources: [readme, item], prompts: [review]);
//! # fn main() {}
//! ```
//!
//! Reads and prompt gets run like calls: each in a fresh instance, under
//! the operator's default limits.

use std::fmt::Display;

// `#[tool]`'s paths name `::toolcage_guest`, for the tests' own tools.
#[cfg(test)]
extern crate self as toolcage_guest;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use schemars::JsonSchema;
pub use toolcage_guest_macros::tool;
/// JSON text as serde_json writes it, with strings escaped eight bytes at
/// a time: use `json::to_string` for a tool's own
/// [`ToolOutput::into_json_output`] (escaping 1 KiB of text in a component
/// takes a fifth of the instructions `serde_json::to_string` takes).
pub use toolcage_json as json;

#[cfg(feature = "http")]
pub mod http;

/// Bindings generated from `wit/tool.wit`. Tool authors do not need these;
/// they are public for [`export!`] and for authors who want the raw contract.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "full-component",
        pub_export_macro: true,
        export_macro_name: "__export_full_component",
        default_bindings_module: "::toolcage_guest::bindings",
    });
}

use bindings::exports::toolcage::tool::tool as wit_tool;
use bindings::toolcage::tool::types as wit;

/// Behaviour hints shown to clients (MCP tool annotations). All default to
/// `false`: a sandboxed tool touches nothing unless the operator grants it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Annotations {
    /// The tool does not modify its environment.
    pub read_only: bool,
    /// The tool may delete or overwrite data.
    pub destructive: bool,
    /// Repeating a call with the same arguments has no further effect.
    pub idempotent: bool,
    /// The tool talks to external systems (such as the web).
    pub open_world: bool,
}

/// The argument type of a tool function that takes no arguments.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

/// One item of a result's content.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Plain text (or Markdown).
    Text(String),
    /// An image, such as `image/png`.
    Image {
        /// The encoded image bytes.
        data: Vec<u8>,
        /// Its MIME type.
        mime_type: String,
    },
    /// Audio, such as `audio/wav`.
    Audio {
        /// The encoded audio bytes.
        data: Vec<u8>,
        /// Its MIME type.
        mime_type: String,
    },
    /// A resource embedded in the result.
    Resource {
        /// The resource's URI.
        uri: String,
        /// Its MIME type, if known.
        mime_type: Option<String>,
        /// Its body: text or bytes.
        body: ResourceBody,
    },
}

/// The body of an embedded resource.
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceBody {
    /// A text resource.
    Text(String),
    /// A binary resource.
    Blob(Vec<u8>),
}

impl Content {
    /// Text content.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text(text.into())
    }
}

/// An unstructured result: content items and, optionally, structured JSON.
/// Return `Result<Output, E>` from a tool whose answer is not one typed value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    /// The content the model reads.
    pub content: Vec<Content>,
    /// Structured output (a JSON object), if any. No output schema is
    /// declared for tools returning `Output`.
    pub structured: Option<Value>,
}

impl Output {
    /// An output made of the given content items.
    pub fn new(content: Vec<Content>) -> Self {
        Output {
            content,
            structured: None,
        }
    }

    /// An output made of one text item.
    pub fn text(text: impl Into<String>) -> Self {
        Output::new(vec![Content::text(text)])
    }
}

/// An [`Output`] whose structured output is already JSON text: the form a
/// component's call result takes. Build one in
/// [`ToolOutput::into_json_output`] to serialise a large result once,
/// straight from its types (`toolcage_json::to_string`), without a [`Value`]
/// in between; object keys then come in the order the type serialises them
/// (a struct's field order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonOutput {
    /// The content the model reads.
    pub content: Vec<Content>,
    /// Structured output as JSON text (an object), if any.
    pub structured: Option<String>,
}

impl From<Output> for JsonOutput {
    fn from(output: Output) -> Self {
        JsonOutput {
            content: output.content,
            structured: output.structured.as_ref().map(json_text),
        }
    }
}

/// What a successful tool call can return.
///
/// Implemented for every `Serialize + JsonSchema` type (structured output:
/// the value's JSON is the structured content and, as text, the content;
/// a value whose schema is not an object is wrapped as `{"result": value}`,
/// because MCP structured content is always an object) and for [`Output`].
pub trait ToolOutput {
    /// The JSON Schema of the structured output, if there is one.
    fn output_schema() -> Option<Value>;
    /// Convert into the parts of a call result.
    fn into_output(self) -> Output;
    /// Convert into the parts of a call result as the host receives them,
    /// the structured output already JSON text: what a component's call
    /// returns. The provided method serialises [`into_output`]'s value;
    /// implement it to write a large result's JSON straight from your own
    /// types instead of building a [`Value`] first.
    ///
    /// [`into_output`]: ToolOutput::into_output
    fn into_json_output(self) -> JsonOutput
    where
        Self: Sized,
    {
        self.into_output().into()
    }

    /// [`into_output`](ToolOutput::into_output) for a type declared an
    /// [`ObjectOutput`] (checked when the component is described): no
    /// schema is asked. Only the blanket implementation overrides it.
    #[doc(hidden)]
    fn __into_output_declared(self) -> Output
    where
        Self: Sized,
    {
        self.into_output()
    }

    /// [`into_json_output`](ToolOutput::into_json_output) for a declared
    /// [`ObjectOutput`].
    #[doc(hidden)]
    fn __into_json_output_declared(self) -> JsonOutput
    where
        Self: Sized,
    {
        self.into_json_output()
    }
}

impl<T: Serialize + JsonSchema> ToolOutput for T {
    fn output_schema() -> Option<Value> {
        let schema = schemars::schema_for!(T).to_value();
        if is_object_schema(&schema) {
            Some(schema)
        } else {
            Some(wrap_schema(schema))
        }
    }

    fn into_output(self) -> Output {
        typed_output(&self, wraps::<T>)
    }

    fn into_json_output(self) -> JsonOutput {
        typed_json_output(&self, wraps::<T>)
    }

    fn __into_output_declared(self) -> Output {
        typed_output(&self, |is_object| !is_object)
    }

    fn __into_json_output_declared(self) -> JsonOutput {
        typed_json_output(&self, |is_object| !is_object)
    }
}

/// A typed result as an [`Output`]; `wraps` decides, from whether the value
/// is an object, whether to send it as `{"result": value}`.
fn typed_output<T: Serialize>(value: &T, wraps: fn(bool) -> bool) -> Output {
    let value = match serde_json::to_value(value) {
        Ok(value) => value,
        Err(error) => return unserialisable(&error),
    };
    let structured = if wraps(value.is_object()) {
        serde_json::json!({ "result": value })
    } else {
        value
    };
    Output {
        content: vec![Content::Text(json_text(&structured))],
        structured: Some(structured),
    }
}

/// [`typed_output`] as JSON text, serialised once.
fn typed_json_output<T: Serialize>(value: &T, wraps: fn(bool) -> bool) -> JsonOutput {
    let json = match toolcage_json::to_string(value) {
        Ok(json) => json,
        Err(error) => return unserialisable(&error).into(),
    };
    // The text `json!({"result": value})` would serialise to.
    let structured = if wraps(json.starts_with('{')) {
        format!("{{\"result\":{json}}}")
    } else {
        json
    };
    JsonOutput {
        content: vec![Content::Text(structured.clone())],
        structured: Some(structured),
    }
}

/// Whether `T`'s structured output, `is_object` saying whether this value
/// serialised as an object, is wrapped as `{"result": value}`: when `T`'s
/// schema's root is not an object. A value that is not an object is
/// wrapped without asking (an object schema could not accept it either
/// way, and the host reports the mismatch). An object asks the schema,
/// generated on every call (a fresh instance has nothing cached): deciding
/// from the value alone would be wrong for types whose schema is not an
/// object although their values can be (an `Option` of a struct, an
/// untagged enum, `serde_json::Value`). Only the root is generated, not
/// the root schema's title, dialect and definitions, which cannot change
/// its `type` (the default settings have no transforms).
fn wraps<T: JsonSchema>(is_object: bool) -> bool {
    !is_object || !schema_is_object::<T>()
}

/// Whether `T`'s schema's root is an object schema. Only the root is
/// generated, not the root schema's title, dialect and definitions, which
/// cannot change its `type` (the default settings have no transforms).
fn schema_is_object<T: JsonSchema>() -> bool {
    T::json_schema(&mut schemars::SchemaGenerator::default())
        .get("type")
        .and_then(Value::as_str)
        == Some("object")
}

/// An output type whose JSON Schema is an object: a struct with named
/// fields, a map with string keys. Say so, with an empty impl, and a
/// `#[tool]` returning it skips the one piece of per-call work the SDK
/// otherwise does for a typed result: generating the type's schema to
/// learn whether to send the value as it is or as `{"result": value}`
/// (every call runs in a fresh instance, so nothing generated in one call
/// is there for the next). For a small result that schema is most of the
/// SDK's work in a call: a few tens of thousands of WebAssembly
/// instructions for a struct of eight documented fields.
///
/// ```
/// use serde::Serialize;
/// use toolcage_guest::{JsonSchema, ObjectOutput};
///
/// #[derive(Serialize, JsonSchema)]
/// struct Greeting {
///     message: String,
/// }
///
/// impl ObjectOutput for Greeting {}
/// ```
///
/// The claim is checked when the component is loaded: if the type's
/// schema is not an object (a newtype around a string, an enum, a struct
/// whose schema is replaced with `#[schemars(with = ..)]`), `describe`
/// panics with a message naming the tool and the type, and the host
/// refuses the component with that message. A tool defined with
/// [`ToolDef::new`] instead of `#[tool]` gets no benefit from the impl and
/// no check: it asks the schema on every call, as without it.
pub trait ObjectOutput: Serialize + JsonSchema {}

impl<T: ObjectOutput + ?Sized> ObjectOutput for Box<T> {}
impl<V: Serialize + JsonSchema> ObjectOutput for std::collections::BTreeMap<String, V> {}
impl<V: Serialize + JsonSchema, S> ObjectOutput for std::collections::HashMap<String, V, S> where
    std::collections::HashMap<String, V, S>: Serialize + JsonSchema
{
}
impl ObjectOutput for serde_json::Map<String, Value> {}

/// How a tool's typed output is sent: whether its schema is known, at
/// compile time, to be an object. `#[tool]` sets it through
/// [`__OutputProbe`].
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum __OutputShape {
    /// Ask the type's schema on each call (the default).
    Ask,
    /// Declared with [`ObjectOutput`]: sent as it is; `is_object` checks
    /// the declaration when the component is described, `type_name` names
    /// the type if it is wrong.
    Object {
        is_object: fn() -> bool,
        type_name: fn() -> &'static str,
    },
}

/// Names a tool function's output type `T` for method resolution: the
/// `#[tool]` macro calls `(&&__OutputProbe::of(&function)).__output_shape()`,
/// which resolves to [`__DeclaredObject`] when `T: ObjectOutput` and to
/// [`__UndeclaredShape`] otherwise (autoref specialisation: the macro's
/// call site knows the concrete type).
#[doc(hidden)]
pub struct __OutputProbe<T>(std::marker::PhantomData<fn() -> T>);

impl<T> __OutputProbe<T> {
    pub fn of<A, E, F: Fn(A) -> Result<T, E>>(_: &F) -> Self {
        __OutputProbe(std::marker::PhantomData)
    }

    pub fn of_nullary<E, F: Fn() -> Result<T, E>>(_: &F) -> Self {
        __OutputProbe(std::marker::PhantomData)
    }
}

#[doc(hidden)]
pub trait __DeclaredObject {
    fn __output_shape(&self) -> __OutputShape;
}

impl<T: ObjectOutput> __DeclaredObject for &__OutputProbe<T> {
    fn __output_shape(&self) -> __OutputShape {
        __OutputShape::Object {
            is_object: schema_is_object::<T>,
            type_name: std::any::type_name::<T>,
        }
    }
}

#[doc(hidden)]
pub trait __UndeclaredShape {
    fn __output_shape(&self) -> __OutputShape;
}

impl<T> __UndeclaredShape for __OutputProbe<T> {
    fn __output_shape(&self) -> __OutputShape {
        __OutputShape::Ask
    }
}

/// A `Serialize` impl that fails (a map with non-string keys, say) is a bug
/// in the tool, reported as an error result.
fn unserialisable(error: &serde_json::Error) -> Output {
    Output::text(format!("tool output could not be serialised: {error}"))
}

impl ToolOutput for Output {
    fn output_schema() -> Option<Value> {
        None
    }

    fn into_output(self) -> Output {
        self
    }
}

/// `value` as compact JSON text. `toolcage_json` writes straight into a
/// byte buffer, strings eight bytes at a time; `Value`'s `Display`
/// (`value.to_string()`) gives the same text through `fmt::Formatter`, one
/// dynamic call per token, which a profile of a 1,000-entry listing showed
/// as a tenth of the guest's time.
fn json_text(value: &Value) -> String {
    // A `Value` always serialises: its map keys are strings.
    toolcage_json::to_string(value).unwrap_or_default()
}

fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// `{"result": <schema>}` as an object schema, keeping `$defs` at the root
/// where `$ref`s expect them.
fn wrap_schema(mut schema: Value) -> Value {
    let mut root = serde_json::Map::new();
    if let Some(object) = schema.as_object_mut() {
        if let Some(dialect) = object.remove("$schema") {
            root.insert("$schema".into(), dialect);
        }
        if let Some(defs) = object.remove("$defs") {
            root.insert("$defs".into(), defs);
        }
        object.remove("title");
    }
    root.insert("type".into(), "object".into());
    root.insert("properties".into(), serde_json::json!({ "result": schema }));
    root.insert("required".into(), serde_json::json!(["result"]));
    Value::Object(root)
}

/// Runs a tool on its arguments' JSON text.
type Handler = Box<dyn Fn(&str) -> Result<Box<dyn Produced>, String>>;

/// A tool's output before conversion: native callers ([`ToolDef::call`])
/// take it as an [`Output`], the component's export as JSON text.
/// `declared` says the type is a checked [`ObjectOutput`].
trait Produced {
    fn into_output(self: Box<Self>, declared: bool) -> Output;
    fn into_json_output(self: Box<Self>, declared: bool) -> JsonOutput;
}

impl<T: ToolOutput> Produced for T {
    fn into_output(self: Box<Self>, declared: bool) -> Output {
        if declared {
            ToolOutput::__into_output_declared(*self)
        } else {
            ToolOutput::into_output(*self)
        }
    }

    fn into_json_output(self: Box<Self>, declared: bool) -> JsonOutput {
        if declared {
            ToolOutput::__into_json_output_declared(*self)
        } else {
            ToolOutput::into_json_output(*self)
        }
    }
}

/// The result of running one tool: its output, or an error message.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The tool succeeded.
    Ok(Output),
    /// The tool failed; the message is shown to the model.
    Err(String),
}

/// One tool: its descriptor and the function that runs it. Built by
/// `#[tool]`; build one by hand with [`ToolDef::new`] when a macro does not
/// fit.
pub struct ToolDef {
    name: &'static str,
    title: Option<&'static str>,
    description: &'static str,
    annotations: Annotations,
    input_schema: fn() -> Value,
    output_schema: fn() -> Option<Value>,
    handler: Handler,
    icons: Vec<Icon>,
    task_support: TaskSupport,
    task_start: TaskStart,
    needs: ClientNeeds,
    output_shape: __OutputShape,
}

impl ToolDef {
    /// A tool named `name` that deserialises its arguments into `A` and runs
    /// `function`.
    pub fn new<A, T, E, F>(name: &'static str, description: &'static str, function: F) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        T: ToolOutput + 'static,
        E: Display,
        F: Fn(A) -> Result<T, E> + 'static,
    {
        ToolDef {
            name,
            title: None,
            description,
            annotations: Annotations::default(),
            input_schema: || schemars::schema_for!(A).to_value(),
            output_schema: T::output_schema,
            icons: Vec::new(),
            task_support: TaskSupport::Forbidden,
            task_start: TaskStart::WithCall,
            needs: ClientNeeds::empty(),
            output_shape: __OutputShape::Ask,
            handler: Box::new(move |arguments| {
                let arguments: A = serde_json::from_str(arguments)
                    .map_err(|error| format!("invalid arguments: {error}"))?;
                match function(arguments) {
                    Ok(output) => Ok(Box::new(output)),
                    Err(error) => Err(error.to_string()),
                }
            }),
        }
    }

    /// Set a human-readable title.
    pub fn title(mut self, title: Option<&'static str>) -> Self {
        self.title = title;
        self
    }

    /// Use `schema` as the input schema instead of the one derived from the
    /// argument type: for schemas a Rust type cannot express (`if`/`then`,
    /// `$anchor`, vendor keywords). The host validates arguments against it
    /// before the call; take `serde_json::Value` as the argument type to
    /// receive them as they are.
    pub fn with_input_schema(mut self, schema: fn() -> Value) -> Self {
        self.input_schema = schema;
        self
    }

    /// Use `schema` as the output schema instead of the derived one (or
    /// none).
    pub fn with_output_schema(mut self, schema: fn() -> Option<Value>) -> Self {
        self.output_schema = schema;
        self
    }

    /// Set the behaviour hints.
    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// Add an icon clients may show beside the tool.
    pub fn icon(mut self, icon: Icon) -> Self {
        self.icons.push(icon);
        self
    }

    /// Let calls run as MCP tasks (`Optional`: when the client accepts
    /// tasks; `Required`: only then). A task outlives its request: the
    /// client polls for the result, so the call may take long (under the
    /// operator's `task_deadline_ms`).
    pub fn task(mut self, support: TaskSupport) -> Self {
        self.task_support = support;
        self
    }

    /// When a call that runs as a task becomes one: as it starts (the
    /// default), or when it calls [`begin_task`] (questions asked before
    /// that are asked in the request, as input-required results).
    pub fn task_start(mut self, start: TaskStart) -> Self {
        self.task_start = start;
        self
    }

    /// Declare what the client must be able to do for this tool to work: a
    /// 2026-07-28 client that does not declare it is refused before the
    /// call runs.
    pub fn needs(mut self, needs: ClientNeeds) -> Self {
        self.needs = needs;
        self
    }

    /// Set by `#[tool]`: whether the output type is a declared
    /// [`ObjectOutput`].
    #[doc(hidden)]
    pub fn __output_shape(mut self, shape: __OutputShape) -> Self {
        self.output_shape = shape;
        self
    }

    /// Whether the output type is a declared [`ObjectOutput`]. Panics if
    /// the declaration is wrong: the type's schema is not an object, so a
    /// value sent as it is would not match the output schema `describe`
    /// declares. `describe` checks every tool this way when the component
    /// is loaded, so in a component that loaded, this never panics.
    fn declared_object(&self) -> bool {
        match self.output_shape {
            __OutputShape::Ask => false,
            __OutputShape::Object {
                is_object,
                type_name,
            } => {
                assert!(
                    is_object(),
                    "tool `{}` returns `{}`, which implements `ObjectOutput`, \
                     but its JSON Schema is not an object: remove the impl",
                    self.name,
                    type_name()
                );
                true
            }
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The JSON Schema of the arguments.
    pub fn input_schema(&self) -> Value {
        (self.input_schema)()
    }

    /// The JSON Schema of the structured output, if any.
    pub fn output_schema(&self) -> Option<Value> {
        (self.output_schema)()
    }

    /// Run the tool on `arguments` (a JSON object as text), natively: what
    /// native tests and benchmarks of a tool's logic call. The component's
    /// `call` export runs the same code and takes the same result as JSON
    /// text ([`ToolOutput::into_json_output`]) instead of a [`Value`].
    pub fn call(&self, arguments: &str) -> CallOutcome {
        match (self.handler)(arguments) {
            Ok(output) => CallOutcome::Ok(output.into_output(self.declared_object())),
            Err(message) => CallOutcome::Err(message),
        }
    }

    /// Run the tool as the component's `call` export does: the output
    /// with its structured part as JSON text, serialised once.
    fn call_json(&self, arguments: &str) -> Result<JsonOutput, String> {
        // Not `declared_object`: `describe` checked the declaration when
        // the component was loaded, and checking again would generate the
        // schema this skips.
        let declared = matches!(self.output_shape, __OutputShape::Object { .. });
        (self.handler)(arguments).map(|output| output.into_json_output(declared))
    }
}

#[doc(hidden)]
pub fn __describe(tools: &[ToolDef]) -> Vec<wit::Descriptor> {
    tools
        .iter()
        .inspect(|tool| {
            tool.declared_object();
        })
        .map(|tool| wit::Descriptor {
            name: tool.name.to_owned(),
            title: tool.title.map(str::to_owned),
            description: tool.description.to_owned(),
            input_schema: tool.input_schema().to_string(),
            output_schema: tool.output_schema().map(|schema| schema.to_string()),
            annotations: wit::Annotations {
                read_only: tool.annotations.read_only,
                destructive: tool.annotations.destructive,
                idempotent: tool.annotations.idempotent,
                open_world: tool.annotations.open_world,
            },
            icons: tool.icons.clone(),
            task_support: tool.task_support,
            task_start: tool.task_start,
            needs: tool.needs,
        })
        .collect()
}

#[doc(hidden)]
pub fn __call(tools: &[ToolDef], name: &str, arguments: &str) -> wit::CallResult {
    let Some(tool) = tools.iter().find(|tool| tool.name == name) else {
        return error_result(format!("this component has no tool `{name}`"));
    };
    match tool.call_json(arguments) {
        Ok(output) => wit::CallResult {
            content: output.content.into_iter().map(to_wit_content).collect(),
            structured: output.structured,
            is_error: false,
        },
        Err(message) => error_result(message),
    }
}

fn error_result(message: String) -> wit::CallResult {
    wit::CallResult {
        content: vec![wit::Content::Text(message)],
        structured: None,
        is_error: true,
    }
}

fn to_wit_content(content: Content) -> wit::Content {
    match content {
        Content::Text(text) => wit::Content::Text(text),
        Content::Image { data, mime_type } => wit::Content::Image(wit::Media { data, mime_type }),
        Content::Audio { data, mime_type } => wit::Content::Audio(wit::Media { data, mime_type }),
        Content::Resource {
            uri,
            mime_type,
            body,
        } => wit::Content::Embedded(wit::EmbeddedResource {
            uri,
            mime_type,
            body: match body {
                ResourceBody::Text(text) => wit::ResourceBody::Text(text),
                ResourceBody::Blob(bytes) => wit::ResourceBody::Blob(bytes),
            },
        }),
    }
}

#[doc(hidden)]
pub use wit::{CallResult as __CallResult, Descriptor as __Descriptor};
#[doc(hidden)]
pub use wit_tool::Guest as __Guest;

use bindings::exports::toolcage::tool::completions as wit_completions;
use bindings::exports::toolcage::tool::prompts as wit_prompts;
use bindings::exports::toolcage::tool::resources as wit_resources;

#[doc(hidden)]
pub use wit_completions::{
    Completion as __Completion, CompletionRequest as __CompletionRequest,
    Guest as __CompletionsGuest,
};

#[doc(hidden)]
pub use wit_prompts::{
    Guest as __PromptsGuest, PromptDescriptor as __PromptDescriptor, PromptResult as __PromptResult,
};
#[doc(hidden)]
pub use wit_resources::{
    Guest as __ResourcesGuest, ResourceContents as __ResourceContents,
    ResourceDescriptor as __ResourceDescriptor, TemplateDescriptor as __TemplateDescriptor,
};

/// The values of a URI template's variables for one read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateVars(Vec<(String, String)>);

impl TemplateVars {
    /// The value of variable `name`, if the template has it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

type ResourceHandler = Box<dyn Fn(&TemplateVars) -> Result<ResourceBody, String>>;

/// One resource, or a family of resources addressed by a URI template
/// (RFC 6570 level 1: each `{var}` matches one or more characters other
/// than `/`). List it with `export!(..., resources: [...])`.
pub struct ResourceDef {
    uri: &'static str,
    is_template: bool,
    name: &'static str,
    title: Option<&'static str>,
    description: Option<&'static str>,
    mime_type: Option<&'static str>,
    handler: ResourceHandler,
    icons: Vec<Icon>,
    completers: Vec<(&'static str, Completer)>,
    watch: Option<String>,
}

impl ResourceDef {
    /// The resource `uri`, named `name`, whose body `read` returns.
    pub fn new<E: Display>(
        uri: &'static str,
        name: &'static str,
        read: impl Fn() -> Result<ResourceBody, E> + 'static,
    ) -> Self {
        Self::build(
            uri,
            false,
            name,
            Box::new(move |_| read().map_err(|e| e.to_string())),
        )
    }

    /// Every resource whose URI matches `uri_template`; `read` gets the
    /// variables' values.
    pub fn template<E: Display>(
        uri_template: &'static str,
        name: &'static str,
        read: impl Fn(&TemplateVars) -> Result<ResourceBody, E> + 'static,
    ) -> Self {
        Self::build(
            uri_template,
            true,
            name,
            Box::new(move |vars| read(vars).map_err(|e| e.to_string())),
        )
    }

    fn build(
        uri: &'static str,
        is_template: bool,
        name: &'static str,
        handler: ResourceHandler,
    ) -> Self {
        ResourceDef {
            uri,
            is_template,
            name,
            title: None,
            description: None,
            mime_type: None,
            handler,
            icons: Vec::new(),
            completers: Vec::new(),
            watch: None,
        }
    }

    /// Say that the resource's content comes from the file (or folder) at
    /// `path` (absolute): when the operator grants resource reads that
    /// path (`[resources] roots`), the host watches it and tells clients
    /// subscribed to the resource when it changes.
    pub fn watch(mut self, path: impl Into<String>) -> Self {
        self.watch = Some(path.into());
        self
    }

    /// Add an icon clients may show beside the resource or template.
    pub fn icon(mut self, icon: Icon) -> Self {
        self.icons.push(icon);
        self
    }

    /// Suggest values of template variable `variable` as the user types
    /// (MCP completions): `complete` gets what was typed so far and the
    /// values of the other variables already chosen, and returns
    /// suggestions, best first (the host keeps the first 100).
    pub fn complete(
        mut self,
        variable: &'static str,
        complete: impl Fn(&str, &[(String, String)]) -> Vec<String> + 'static,
    ) -> Self {
        self.completers.push((variable, Box::new(complete)));
        self
    }

    /// Set a human-readable title.
    pub fn title(mut self, title: &'static str) -> Self {
        self.title = Some(title);
        self
    }

    /// Set the description.
    pub fn description(mut self, description: &'static str) -> Self {
        self.description = Some(description);
        self
    }

    /// Set the MIME type (also used for the contents of every read).
    pub fn mime_type(mut self, mime_type: &'static str) -> Self {
        self.mime_type = Some(mime_type);
        self
    }

    /// Read `uri` if this definition serves it: `None` if it does not.
    pub fn read(&self, uri: &str) -> Option<Result<ResourceBody, String>> {
        let vars = if self.is_template {
            TemplateVars(match_template(self.uri, uri)?)
        } else if self.uri == uri {
            TemplateVars::default()
        } else {
            return None;
        };
        Some((self.handler)(&vars))
    }
}

/// Match `uri` against a level-1 template, returning the variables (`None`
/// if it does not match, or the template is malformed).
///
/// The same algorithm as the host's (`runtime/src/template.rs`), in time
/// linear in the URI: a variable never spans a `/`, so the URI's
/// `/`-separated segments align with the template's; within a segment each
/// literal takes its leftmost place (the last one the end), and each
/// variable the shortest text that lets the rest match. Both are tested on
/// `guest-sdk/tests/uri-templates.txt`.
fn match_template(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let mut vars = Vec::new();
    let mut pieces = uri.split('/');
    for segment in template_segments(template)? {
        let text = pieces.next()?;
        let mut pos = 0;
        let mut pending: Vec<&str> = Vec::new();
        for (i, part) in segment.iter().enumerate() {
            match *part {
                TemplatePart::Variable(name) => pending.push(name),
                TemplatePart::Literal(literal) if pending.is_empty() => {
                    text[pos..].strip_prefix(literal)?;
                    pos += literal.len();
                }
                TemplatePart::Literal(literal) => {
                    let start = advance_chars(text, pos, pending.len())?;
                    let found = if i + 1 == segment.len() {
                        let at = text.len().checked_sub(literal.len())?;
                        (at >= start && text.is_char_boundary(at) && &text[at..] == literal)
                            .then_some(at)?
                    } else {
                        start + text[start..].find(literal)?
                    };
                    share_span(&pending, &text[pos..found], &mut vars);
                    pending.clear();
                    pos = found + literal.len();
                }
            }
        }
        if pending.is_empty() {
            if pos != text.len() {
                return None;
            }
        } else {
            advance_chars(text, pos, pending.len())?;
            share_span(&pending, &text[pos..], &mut vars);
        }
    }
    pieces.next().is_none().then_some(vars)
}

#[derive(Clone, Copy)]
enum TemplatePart<'a> {
    Literal(&'a str),
    Variable(&'a str),
}

/// A template's `/`-separated segments (split at the `/`s of its literal
/// text), or `None` if its braces are unbalanced.
fn template_segments(template: &str) -> Option<Vec<Vec<TemplatePart<'_>>>> {
    fn push_literal<'a>(segments: &mut Vec<Vec<TemplatePart<'a>>>, text: &'a str) -> Option<()> {
        for (i, piece) in text.split('/').enumerate() {
            if i > 0 {
                segments.push(Vec::new());
            }
            if !piece.is_empty() {
                segments.last_mut()?.push(TemplatePart::Literal(piece));
            }
        }
        Some(())
    }
    let mut segments = vec![Vec::new()];
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        push_literal(&mut segments, &rest[..open])?;
        let close = rest[open..].find('}')? + open;
        segments
            .last_mut()?
            .push(TemplatePart::Variable(&rest[open + 1..close]));
        rest = &rest[close + 1..];
    }
    push_literal(&mut segments, rest)?;
    Some(segments)
}

/// The byte offset `chars` characters after `pos`, if `text` has them.
fn advance_chars(text: &str, pos: usize, chars: usize) -> Option<usize> {
    let mut at = pos;
    let mut iter = text[pos..].chars();
    for _ in 0..chars {
        at += iter.next()?.len_utf8();
    }
    Some(at)
}

/// Give `names` their shares of `span`: one character each but the last,
/// which takes the rest.
fn share_span(names: &[&str], span: &str, vars: &mut Vec<(String, String)>) {
    let mut rest = span;
    for (i, name) in names.iter().enumerate() {
        let take = if i + 1 == names.len() {
            rest.len()
        } else {
            rest.chars().next().map_or(0, char::len_utf8)
        };
        vars.push(((*name).to_owned(), rest[..take].to_owned()));
        rest = &rest[take..];
    }
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptMessage {
    /// Who speaks it.
    pub role: Role,
    /// Text, an image, audio or an embedded resource.
    pub content: Content,
}

impl PromptMessage {
    /// A message from the user.
    pub fn user(content: Content) -> Self {
        PromptMessage {
            role: Role::User,
            content,
        }
    }

    /// A message from the assistant.
    pub fn assistant(content: Content) -> Self {
        PromptMessage {
            role: Role::Assistant,
            content,
        }
    }
}

type PromptHandler = Box<dyn Fn(&str) -> Result<Vec<PromptMessage>, String>>;

/// One prompt. Its arguments are the properties of the argument type's JSON
/// Schema (field docs become descriptions; required fields are required).
/// List it with `export!(..., prompts: [...])`.
pub struct PromptDef {
    name: &'static str,
    title: Option<&'static str>,
    description: &'static str,
    arguments_schema: fn() -> Value,
    handler: PromptHandler,
    icons: Vec<Icon>,
    completers: Vec<(&'static str, Completer)>,
}

impl PromptDef {
    /// A prompt named `name` that deserialises its arguments (strings) into
    /// `A` and builds its messages with `build`. Use [`NoArguments`] for a
    /// prompt without arguments.
    pub fn new<A, E, F>(name: &'static str, description: &'static str, build: F) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        E: Display,
        F: Fn(A) -> Result<Vec<PromptMessage>, E> + 'static,
    {
        PromptDef {
            name,
            title: None,
            description,
            arguments_schema: || schemars::schema_for!(A).to_value(),
            handler: Box::new(move |arguments| {
                let arguments: A = serde_json::from_str(arguments)
                    .map_err(|error| format!("invalid arguments: {error}"))?;
                build(arguments).map_err(|error| error.to_string())
            }),
            icons: Vec::new(),
            completers: Vec::new(),
        }
    }

    /// Set a human-readable title.
    pub fn title(mut self, title: &'static str) -> Self {
        self.title = Some(title);
        self
    }

    /// Add an icon clients may show beside the prompt.
    pub fn icon(mut self, icon: Icon) -> Self {
        self.icons.push(icon);
        self
    }

    /// Suggest values of argument `argument` as the user types (MCP
    /// completions): `complete` gets what was typed so far and the values
    /// of the other arguments already chosen, and returns suggestions, best
    /// first (the host keeps the first 100).
    pub fn complete(
        mut self,
        argument: &'static str,
        complete: impl Fn(&str, &[(String, String)]) -> Vec<String> + 'static,
    ) -> Self {
        self.completers.push((argument, Box::new(complete)));
        self
    }

    /// Suggestions for argument `argument` given `value` so far, natively:
    /// what the component's `complete` export runs. `None` if the prompt
    /// completes no such argument.
    pub fn completions(
        &self,
        argument: &str,
        value: &str,
        context: &[(String, String)],
    ) -> Option<Vec<String>> {
        self.completers
            .iter()
            .find(|(name, _)| *name == argument)
            .map(|(_, complete)| complete(value, context))
    }

    /// The prompt's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Build the prompt natively from `arguments` (a JSON object as text).
    pub fn get(&self, arguments: &str) -> Result<Vec<PromptMessage>, String> {
        (self.handler)(arguments)
    }

    fn arguments(&self) -> Vec<wit_prompts::PromptArgument> {
        let schema = (self.arguments_schema)();
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| {
                properties
                    .iter()
                    .map(|(name, property)| wit_prompts::PromptArgument {
                        name: name.clone(),
                        title: None,
                        description: property
                            .get("description")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        required: required.contains(&name.as_str()),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[doc(hidden)]
pub fn __list_resources(defs: &[ResourceDef]) -> Vec<__ResourceDescriptor> {
    defs.iter()
        .filter(|d| !d.is_template)
        .map(|d| __ResourceDescriptor {
            uri: d.uri.to_owned(),
            name: d.name.to_owned(),
            title: d.title.map(str::to_owned),
            description: d.description.map(str::to_owned),
            mime_type: d.mime_type.map(str::to_owned),
            size: None,
            icons: d.icons.clone(),
            watch: d.watch.clone(),
        })
        .collect()
}

#[doc(hidden)]
pub fn __list_templates(defs: &[ResourceDef]) -> Vec<__TemplateDescriptor> {
    defs.iter()
        .filter(|d| d.is_template)
        .map(|d| __TemplateDescriptor {
            uri_template: d.uri.to_owned(),
            name: d.name.to_owned(),
            title: d.title.map(str::to_owned),
            description: d.description.map(str::to_owned),
            mime_type: d.mime_type.map(str::to_owned),
            icons: d.icons.clone(),
        })
        .collect()
}

#[doc(hidden)]
pub fn __read(defs: &[ResourceDef], uri: &str) -> Result<Vec<__ResourceContents>, String> {
    // Concrete resources first, then templates, in listed order.
    let found = defs
        .iter()
        .filter(|d| !d.is_template)
        .chain(defs.iter().filter(|d| d.is_template))
        .find_map(|d| d.read(uri).map(|body| (d, body)));
    let Some((def, body)) = found else {
        return Err(format!("no resource `{uri}`"));
    };
    let body = match body? {
        ResourceBody::Text(text) => wit::ResourceBody::Text(text),
        ResourceBody::Blob(bytes) => wit::ResourceBody::Blob(bytes),
    };
    Ok(vec![__ResourceContents {
        uri: uri.to_owned(),
        mime_type: def.mime_type.map(str::to_owned),
        body,
    }])
}

#[doc(hidden)]
pub fn __list_prompts(defs: &[PromptDef]) -> Vec<__PromptDescriptor> {
    defs.iter()
        .map(|d| __PromptDescriptor {
            name: d.name.to_owned(),
            title: d.title.map(str::to_owned),
            description: Some(d.description.to_owned()),
            arguments: d.arguments(),
            icons: d.icons.clone(),
        })
        .collect()
}

type Completer = Box<dyn Fn(&str, &[(String, String)]) -> Vec<String>>;

/// Most suggestions one completion carries (MCP's cap).
const MAX_COMPLETIONS: usize = 100;

#[doc(hidden)]
pub fn __complete(
    prompts: &[PromptDef],
    resources: &[ResourceDef],
    request: __CompletionRequest,
) -> Result<__Completion, String> {
    let completers = match &request.target {
        wit_completions::CompletionTarget::Prompt(name) => prompts
            .iter()
            .find(|p| p.name == name.as_str())
            .map(|p| &p.completers),
        wit_completions::CompletionTarget::ResourceTemplate(template) => resources
            .iter()
            .find(|r| r.is_template && r.uri == template.as_str())
            .map(|r| &r.completers),
    };
    let mut values = completers
        .and_then(|completers| {
            completers
                .iter()
                .find(|(name, _)| *name == request.argument)
        })
        .map(|(_, complete)| complete(&request.value, &request.context))
        .unwrap_or_default();
    let total = values.len();
    values.truncate(MAX_COMPLETIONS);
    Ok(__Completion {
        has_more: total > values.len(),
        total: u32::try_from(total).ok(),
        values,
    })
}

#[doc(hidden)]
pub fn __get_prompt(
    defs: &[PromptDef],
    name: &str,
    arguments: &str,
) -> Result<__PromptResult, String> {
    let def = defs
        .iter()
        .find(|d| d.name == name)
        .ok_or_else(|| format!("this component has no prompt `{name}`"))?;
    let messages = def.get(arguments)?;
    Ok(__PromptResult {
        description: Some(def.description.to_owned()),
        messages: messages
            .into_iter()
            .map(|m| wit_prompts::PromptMessage {
                role: match m.role {
                    Role::User => wit_prompts::Role::User,
                    Role::Assistant => wit_prompts::Role::Assistant,
                },
                content: to_wit_content(m.content),
            })
            .collect(),
    })
}

/// Export the listed tools (functions marked `#[tool]`), and optionally
/// resources and prompts, as this crate's component. Use it once per crate.
///
/// ```ignore
/// toolcage_guest::export!(get_current_time, convert_timezone);
/// // or, with resources and prompts (functions returning `ResourceDef` /
/// // `PromptDef`; every section but `tools` may be left out):
/// toolcage_guest::export!(
///     tools: [get_current_time],
///     resources: [readme, item],
///     prompts: [review],
/// );
/// ```
///
/// It also defines `tool_definitions()`, `resource_definitions()` and
/// `prompt_definitions()`, for native tests and benchmarks.
///
/// The component always exports the `resources`, `prompts` and
/// `completions` interfaces (world `full-component`); without any, they
/// list and complete nothing.
#[macro_export]
macro_rules! export {
    (tools: [$($tool:ident),* $(,)?]
     $(, resources: [$($resource:path),* $(,)?])?
     $(, prompts: [$($prompt:path),* $(,)?])? $(,)?) => {
        /// Every tool this crate exports, in `export!` order.
        pub fn tool_definitions() -> ::std::vec::Vec<$crate::ToolDef> {
            ::std::vec![$($tool::definition()),*]
        }

        /// Every resource and template this crate exports.
        pub fn resource_definitions() -> ::std::vec::Vec<$crate::ResourceDef> {
            ::std::vec![$($($resource()),*)?]
        }

        /// Every prompt this crate exports.
        pub fn prompt_definitions() -> ::std::vec::Vec<$crate::PromptDef> {
            ::std::vec![$($($prompt()),*)?]
        }

        #[doc(hidden)]
        pub struct __ToolcageComponent;

        impl $crate::__Guest for __ToolcageComponent {
            fn describe() -> ::std::vec::Vec<$crate::__Descriptor> {
                $crate::__describe(&tool_definitions())
            }

            fn call(name: ::std::string::String, arguments: ::std::string::String) -> $crate::__CallResult {
                $crate::__call(&tool_definitions(), &name, &arguments)
            }
        }

        impl $crate::__ResourcesGuest for __ToolcageComponent {
            fn list_resources() -> ::std::vec::Vec<$crate::__ResourceDescriptor> {
                $crate::__list_resources(&resource_definitions())
            }

            fn list_templates() -> ::std::vec::Vec<$crate::__TemplateDescriptor> {
                $crate::__list_templates(&resource_definitions())
            }

            fn read(uri: ::std::string::String) -> ::std::result::Result<::std::vec::Vec<$crate::__ResourceContents>, ::std::string::String> {
                $crate::__read(&resource_definitions(), &uri)
            }
        }

        impl $crate::__CompletionsGuest for __ToolcageComponent {
            fn complete(request: $crate::__CompletionRequest) -> ::std::result::Result<$crate::__Completion, ::std::string::String> {
                $crate::__complete(&prompt_definitions(), &resource_definitions(), request)
            }
        }

        impl $crate::__PromptsGuest for __ToolcageComponent {
            fn list_prompts() -> ::std::vec::Vec<$crate::__PromptDescriptor> {
                $crate::__list_prompts(&prompt_definitions())
            }

            fn get(name: ::std::string::String, arguments: ::std::string::String) -> ::std::result::Result<$crate::__PromptResult, ::std::string::String> {
                $crate::__get_prompt(&prompt_definitions(), &name, &arguments)
            }
        }

        // Native builds (tests, benchmarks of the logic) skip the component
        // exports: their symbol names are not valid in native linkers.
        #[cfg(target_family = "wasm")]
        $crate::bindings::__export_full_component!(__ToolcageComponent with_types_in $crate::bindings);
    };
    ($($tool:ident),+ $(,)?) => {
        $crate::export!(tools: [$($tool),+]);
    };
}

/// Severity of a log message.
pub use bindings::toolcage::tool::host::Level;

/// Send a log message to the host (and, where the client accepts them, to
/// the client). Prefer the [`debug!`], [`info!`], [`warn!`] and [`error!`]
/// macros.
pub fn log(level: Level, message: &str) {
    #[cfg(target_family = "wasm")]
    bindings::toolcage::tool::host::log(level, message);
    #[cfg(not(target_family = "wasm"))]
    eprintln!("[{level:?}] {message}");
}

/// Report progress of the current call: `done` out of `total` (if known),
/// with an optional message. Clients that asked for progress see it as
/// `notifications/progress`.
pub fn progress(done: f64, total: Option<f64>, message: Option<&str>) {
    #[cfg(target_family = "wasm")]
    bindings::toolcage::tool::host::progress(done, total, message);
    #[cfg(not(target_family = "wasm"))]
    let _ = (done, total, message);
}

pub use bindings::toolcage::tool::host::{
    Answer, ElicitResponse, Elicitation, KeyedQuestion, Question, Role, Root, SamplingMessage,
    SamplingRequest, SamplingResponse,
};
pub use bindings::toolcage::tool::types::{ClientNeeds, Icon, IconTheme, TaskStart, TaskSupport};

impl Icon {
    /// An icon at `src`: an `https:` URL or a `data:image/...` URI.
    pub fn new(src: impl Into<String>) -> Self {
        Icon {
            src: src.into(),
            mime_type: None,
            sizes: Vec::new(),
            theme: None,
        }
    }

    /// Set its MIME type (`image/png`, `image/svg+xml`, ...).
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Add a size it is drawn for (`48x48`, or `any` for SVG).
    pub fn size(mut self, size: impl Into<String>) -> Self {
        self.sizes.push(size.into());
        self
    }

    /// Say which theme it suits.
    pub fn theme(mut self, theme: IconTheme) -> Self {
        self.theme = Some(theme);
        self
    }
}

/// The client's roots (MCP `roots/list`): the folders the user works in.
/// They say what the user is working on; they grant nothing (what the tool
/// can open is the operator's decision).
///
/// # Errors
///
/// The client does not share its roots; the message says so.
pub fn roots() -> Result<Vec<Root>, String> {
    #[cfg(target_family = "wasm")]
    return bindings::toolcage::tool::host::roots();
    #[cfg(not(target_family = "wasm"))]
    Err("roots need the toolcage host".into())
}

/// Ask several questions at once, each under a key of your choosing (1 to
/// 64 characters from `A-Z a-z 0-9 _ - .`, unique; `elicit-N`, `sample-N`,
/// `roots-N` and `toolcage-...` are the host's): on 2026-07-28 clients the
/// client answers all of them in one round. Answers come in the order
/// asked, each its own `Result`. A malformed list (a bad or repeated key,
/// more than 16 questions) ends the call with an error.
///
/// ```no_run
/// use toolcage_guest::{ask_batch, elicitation, Answer, KeyedQuestion, Question};
/// let answers = ask_batch(vec![
///     KeyedQuestion { key: "user_name".into(), question: elicitation("What is your name?", &serde_json::json!({
///         "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]
///     })) },
///     KeyedQuestion { key: "client_roots".into(), question: Question::Roots },
/// ]);
/// ```
pub fn ask_batch(questions: Vec<KeyedQuestion>) -> Vec<Result<Answer, String>> {
    #[cfg(target_family = "wasm")]
    return bindings::toolcage::tool::host::ask(&questions);
    #[cfg(not(target_family = "wasm"))]
    questions
        .iter()
        .map(|_| Err("questions need the toolcage host".into()))
        .collect()
}

/// An elicitation question for [`ask_batch`].
pub fn elicitation(message: &str, requested_schema: &Value) -> Question {
    Question::Elicit(Elicitation {
        message: message.to_owned(),
        requested_schema: requested_schema.to_string(),
    })
}

/// [`elicit`], under a key of your choosing (see [`ask_batch`]): the key a
/// 2026-07-28 client sees in its `inputRequests`.
///
/// # Errors
///
/// As for [`elicit`].
pub fn elicit_as(
    key: &str,
    message: &str,
    requested_schema: &Value,
) -> Result<ElicitResponse, String> {
    let question = KeyedQuestion {
        key: key.to_owned(),
        question: elicitation(message, requested_schema),
    };
    match ask_batch(vec![question]).pop() {
        Some(Ok(Answer::Elicit(response))) => Ok(response),
        Some(Err(reason)) => Err(reason),
        _ => Err("the host gave no elicitation answer".into()),
    }
}

/// From here the call may take long: for a tool whose calls become tasks
/// when they call this ([`ToolDef::task_start`] `OnBeginTask`), a client
/// that accepts tasks gets its task now, and questions asked after this are
/// the task's. Anywhere else it does nothing.
pub fn begin_task() {
    #[cfg(target_family = "wasm")]
    bindings::toolcage::tool::host::begin_task();
}

/// Ask the user for confirmation or values (MCP elicitation).
/// `requested_schema` is a flat JSON object schema of primitive properties.
///
/// Ask before acting: on 2026-07-28 clients the whole call is replayed from
/// the start once the user answers, so the same questions must come in the
/// same order for the same arguments.
///
/// # Errors
///
/// The client cannot elicit, or the request is malformed; the message says
/// which and is fit to return to the model.
pub fn elicit(message: &str, requested_schema: &Value) -> Result<ElicitResponse, String> {
    #[cfg(target_family = "wasm")]
    return bindings::toolcage::tool::host::elicit(message, &requested_schema.to_string());
    #[cfg(not(target_family = "wasm"))]
    {
        let _ = (message, requested_schema);
        Err("elicitation needs the toolcage host".into())
    }
}

/// Ask the user a yes/no question: `Ok(true)` only if they accept.
///
/// # Errors
///
/// As for [`elicit`].
pub fn confirm(message: &str) -> Result<bool, String> {
    let schema = serde_json::json!({"type": "object", "properties": {}});
    Ok(matches!(
        elicit(message, &schema)?,
        ElicitResponse::Accept(_)
    ))
}

/// Ask the user for the fields of `T` (a struct of primitive fields):
/// `Ok(Some(value))` if they answer, `Ok(None)` if they decline or cancel.
///
/// # Errors
///
/// As for [`elicit`], or the answer does not fit `T`.
pub fn ask<T: DeserializeOwned + JsonSchema>(message: &str) -> Result<Option<T>, String> {
    let full = schemars::schema_for!(T).to_value();
    // Elicitation schemas are restricted: keep only the object's shape.
    let mut schema = serde_json::Map::new();
    for key in ["type", "properties", "required"] {
        if let Some(value) = full.get(key) {
            schema.insert(key.to_owned(), value.clone());
        }
    }
    match elicit(message, &Value::Object(schema))? {
        ElicitResponse::Accept(json) => serde_json::from_str(&json)
            .map(Some)
            .map_err(|error| format!("the answer does not fit the question: {error}")),
        ElicitResponse::Decline | ElicitResponse::Cancel => Ok(None),
    }
}

/// Ask the client's model to complete `prompt` (at most `max_tokens`).
///
/// # Errors
///
/// The operator has not allowed this tool to sample, the client cannot, or
/// the user refused.
pub fn sample(prompt: &str, max_tokens: u32) -> Result<String, String> {
    sample_with(SamplingRequest {
        messages: vec![SamplingMessage {
            role: Role::User,
            text: prompt.to_owned(),
        }],
        system_prompt: None,
        max_tokens,
        temperature: None,
    })
    .map(|response| response.text)
}

/// Ask the client's model for a completion of a conversation.
///
/// # Errors
///
/// As for [`sample`].
pub fn sample_with(request: SamplingRequest) -> Result<SamplingResponse, String> {
    #[cfg(target_family = "wasm")]
    return bindings::toolcage::tool::host::sample(&request);
    #[cfg(not(target_family = "wasm"))]
    {
        let _ = request;
        Err("sampling needs the toolcage host".into())
    }
}

/// Log at debug level, `format!`-style.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::log($crate::Level::Debug, &::std::format!($($arg)+)) };
}

/// Log at info level, `format!`-style.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::log($crate::Level::Info, &::std::format!($($arg)+)) };
}

/// Log at warning level, `format!`-style.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::log($crate::Level::Warning, &::std::format!($($arg)+)) };
}

/// Log at error level, `format!`-style.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::log($crate::Level::Error, &::std::format!($($arg)+)) };
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Deserialize, JsonSchema)]
    struct Args {
        /// A number.
        n: i64,
    }

    #[derive(Serialize, JsonSchema)]
    struct Doubled {
        doubled: i64,
    }

    fn double(args: Args) -> Result<Doubled, String> {
        if args.n > 1000 {
            return Err(format!("`{}` is too big", args.n));
        }
        Ok(Doubled {
            doubled: args.n * 2,
        })
    }

    fn def() -> ToolDef {
        ToolDef::new("double", "Double a number.", double)
    }

    #[test]
    fn templates_match_as_the_host_matches() {
        const CASES: &str = include_str!("../tests/uri-templates.txt");
        let mut checked = 0;
        for line in CASES
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let fields: Vec<&str> = line.split('\t').collect();
            let [template, uri, expected] = fields[..] else {
                panic!("bad case line: {line:?}");
            };
            let got = match match_template(template, uri) {
                None => "no match".to_owned(),
                Some(vars) => vars
                    .iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect::<Vec<_>>()
                    .join(","),
            };
            assert_eq!(got, expected, "{template} against {uri}");
            checked += 1;
        }
        assert!(checked > 10);
    }

    #[test]
    fn input_schema_comes_from_the_argument_type() {
        let schema = def().input_schema();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["n"]["description"], "A number.");
        assert_eq!(schema["required"], json!(["n"]));
    }

    #[test]
    fn ok_is_structured_output_and_text() {
        let CallOutcome::Ok(output) = def().call(r#"{"n": 21}"#) else {
            panic!("expected success");
        };
        assert_eq!(output.structured, Some(json!({"doubled": 42})));
        assert_eq!(
            output.content,
            vec![Content::Text(r#"{"doubled":42}"#.into())]
        );
        assert_eq!(def().output_schema().expect("schema")["type"], "object");
    }

    #[test]
    fn err_is_an_error_with_the_display_text() {
        assert_eq!(
            def().call(r#"{"n": 5000}"#),
            CallOutcome::Err("`5000` is too big".into())
        );
    }

    #[test]
    fn bad_json_is_an_error_not_a_panic() {
        let CallOutcome::Err(message) = def().call(r#"{"n": "x"}"#) else {
            panic!("expected error");
        };
        assert!(message.starts_with("invalid arguments:"), "{message}");
    }

    #[test]
    fn non_object_outputs_are_wrapped() {
        fn text(_: NoArguments) -> Result<String, String> {
            Ok("hi".into())
        }
        let tool = ToolDef::new("t", "d", text);
        let schema = tool.output_schema().expect("schema");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["result"]["type"], "string");
        let CallOutcome::Ok(output) = tool.call("{}") else {
            panic!("expected success");
        };
        assert_eq!(output.structured, Some(json!({"result": "hi"})));
    }

    #[test]
    fn schemas_can_be_given_by_hand() {
        fn raw(args: Value) -> Result<Output, String> {
            Ok(Output::text(args.to_string()))
        }
        let tool = ToolDef::new("raw", "d", raw)
            .with_input_schema(|| json!({"type": "object", "properties": {"x": {"if": true}}}))
            .with_output_schema(|| None);
        assert_eq!(tool.input_schema()["properties"]["x"]["if"], true);
        assert_eq!(tool.output_schema(), None);
        let CallOutcome::Ok(output) = tool.call(r#"{"x": 1}"#) else {
            panic!("expected success");
        };
        assert_eq!(output.content, vec![Content::Text(r#"{"x":1}"#.into())]);
    }

    /// The component's export serialises straight from the type; native
    /// callers get a `Value`. Both must carry the same result, whatever
    /// the output type: an object, a wrapped non-object, values whose
    /// schema is not an object although they are (`Option` of a struct, an
    /// untagged enum, `Value`), `Output`, and a value that cannot be
    /// serialised at all.
    #[test]
    fn the_component_returns_what_native_callers_get() {
        #[derive(Serialize, JsonSchema)]
        #[serde(untagged)]
        enum Either {
            Pair { b: i64, a: i64 },
            Text(String),
        }
        fn check<T: ToolOutput + 'static>(value: impl Fn() -> T + 'static) {
            let tool = ToolDef::new("t", "d", move |_: NoArguments| Ok::<_, String>(value()));
            let CallOutcome::Ok(native) = tool.call("{}") else {
                panic!("expected success");
            };
            let result = __call(&[tool], "t", "{}");
            let parse = |text: &str| serde_json::from_str::<Value>(text).expect("JSON");
            assert_eq!(result.structured.as_deref().map(parse), native.structured);
            assert_eq!(result.content.len(), native.content.len());
            for (sent, native) in result.content.iter().zip(&native.content) {
                let (wit::Content::Text(sent), Content::Text(native)) = (sent, native) else {
                    panic!("expected text");
                };
                match (
                    serde_json::from_str::<Value>(sent),
                    serde_json::from_str::<Value>(native),
                ) {
                    (Ok(sent), Ok(native)) => assert_eq!(sent, native),
                    _ => assert_eq!(sent, native),
                }
            }
            assert!(!result.is_error);
        }
        check(|| Doubled { doubled: 4 });
        check(|| "hi".to_owned());
        check(|| vec![1, 2, 3]);
        check(|| Some(Doubled { doubled: 4 }));
        check(|| None::<Doubled>);
        check(|| Either::Pair { b: 1, a: 2 });
        check(|| Either::Text("x".into()));
        check(|| json!({"z": 1, "a": [true, null]}));
        check(|| Output::text("plain"));
        check(|| Output {
            content: vec![Content::text("t")],
            structured: Some(json!({"k": "v"})),
        });
        // Tuple keys: `serde_json` refuses them both ways.
        check(|| std::collections::BTreeMap::from([((1, 2), 3)]));
    }

    /// Tools defined with `#[tool]`, as an author writes them.
    mod declared {
        use serde::Serialize;

        use crate::{JsonSchema, NoArguments, ObjectOutput, tool};

        #[derive(Serialize, JsonSchema)]
        pub struct Point {
            /// Across.
            pub x: i64,
            pub y: i64,
        }

        impl ObjectOutput for Point {}

        /// A point, its output type declared an object.
        #[tool]
        pub fn point(_: NoArguments) -> Result<Point, String> {
            Ok(Point { x: 1, y: 2 })
        }

        /// The same point, its type not declared.
        #[tool]
        pub fn pair() -> Result<std::collections::BTreeMap<String, i64>, String> {
            Ok([("x".to_owned(), 1), ("y".to_owned(), 2)].into())
        }

        #[derive(Serialize, JsonSchema)]
        pub struct Undeclared {
            pub x: i64,
        }

        /// Not declared.
        #[tool]
        pub fn undeclared() -> Result<Undeclared, String> {
            Ok(Undeclared { x: 1 })
        }

        /// A newtype around a string: its schema is a string's.
        #[derive(Serialize, JsonSchema)]
        #[serde(transparent)]
        pub struct Name(pub String);

        impl ObjectOutput for Name {}

        /// Wrongly declared.
        #[tool]
        pub fn name() -> Result<Name, String> {
            Ok(Name("n".into()))
        }
    }

    #[test]
    fn tool_resolves_a_declared_object_output_at_compile_time() {
        let shape = |tool: ToolDef| tool.output_shape;
        assert!(matches!(
            shape(declared::point::definition()),
            __OutputShape::Object { .. }
        ));
        // A map with string keys is declared by the SDK.
        assert!(matches!(
            shape(declared::pair::definition()),
            __OutputShape::Object { .. }
        ));
        assert!(matches!(
            shape(declared::undeclared::definition()),
            __OutputShape::Ask
        ));
        // Sent as it is, natively and from the component.
        let tools = [declared::point::definition(), declared::pair::definition()];
        assert_eq!(__describe(&tools).len(), 2);
        for name in ["point", "pair"] {
            let result = __call(&tools, name, "{}");
            let structured: Value =
                serde_json::from_str(result.structured.as_deref().expect("structured"))
                    .expect("JSON");
            assert_eq!(structured, json!({"x": 1, "y": 2}));
            let CallOutcome::Ok(native) = tools
                .iter()
                .find(|tool| tool.name() == name)
                .expect("tool")
                .call("{}")
            else {
                panic!("expected success");
            };
            assert_eq!(native.structured, Some(structured));
        }
    }

    #[test]
    #[should_panic(
        expected = "returns `toolcage_guest::tests::declared::Name`, which implements \
                               `ObjectOutput`, but its JSON Schema is not an object"
    )]
    fn a_wrong_declaration_fails_describe() {
        __describe(&[declared::name::definition()]);
    }

    #[test]
    #[should_panic(expected = "implements `ObjectOutput`, but its JSON Schema is not an object")]
    fn a_wrong_declaration_fails_a_native_call() {
        declared::name::definition().call("{}");
    }

    #[test]
    fn the_component_sends_a_struct_in_field_order_and_wraps_as_json_would() {
        #[derive(Serialize, JsonSchema)]
        struct Later {
            zeta: u8,
            alpha: u8,
        }
        let later = ToolDef::new("later", "d", |_: NoArguments| {
            Ok::<_, String>(Later { zeta: 1, alpha: 2 })
        });
        let result = __call(&[later], "later", "{}");
        assert_eq!(
            result.structured.as_deref(),
            Some(r#"{"zeta":1,"alpha":2}"#)
        );
        let [wit::Content::Text(content)] = &result.content[..] else {
            panic!("expected one text item");
        };
        assert_eq!(content, r#"{"zeta":1,"alpha":2}"#);
        let tools = [ToolDef::new("text", "d", |_: NoArguments| {
            Ok::<_, String>("a\"b")
        })];
        let result = __call(&tools, "text", "{}");
        assert_eq!(result.structured.as_deref(), Some(r#"{"result":"a\"b"}"#));
        assert_eq!(
            json!({"result": "a\"b"}).to_string(),
            r#"{"result":"a\"b"}"#
        );
    }

    #[test]
    fn unknown_tool_is_an_error_result() {
        let result = __call(&[def()], "nope", "{}");
        assert!(result.is_error);
    }
}
