//! The shape of a plain component's values: a WIT type, resolved once at
//! load into a tree the JSON Schema, the argument conversion and the result
//! conversion all follow, so the three cannot disagree.
//!
//! The JSON form of each WIT type (the table in `docs/plain-components.md`
//! is the user's copy of this one):
//!
//! | WIT | JSON | schema |
//! |---|---|---|
//! | `bool` | `true` | `boolean` |
//! | `u8` … `s64` | `42` | `integer` with the type's exact `minimum` and `maximum` |
//! | `f32`, `f64` | `1.5` | `number` (non-finite results are `null`) |
//! | `char` | `"é"` | `string`, exactly one Unicode scalar |
//! | `string` | `"text"` | `string` |
//! | `list<u8>` | `"aGk="` | base64 `string`, or (arguments only) an `array` of 0–255 |
//! | `list<T>` | `[…]` | `array` of T |
//! | `list<T, N>` | `[…]` | `array` of exactly N |
//! | `option<T>` | T or `null` | T or `null`; a parameter or field of this type is not required |
//! | `record` | `{"field": …}` | `object`, every non-option field required, no others |
//! | `tuple<A, B>` | `[a, b]` | `array` with `prefixItems` |
//! | `enum` | `"case"` | `string` with `enum` |
//! | `flags` | `["a", "c"]` | `array` of unique flag names |
//! | `variant` | `"case"` or `{"case": payload}` | one of the cases |
//! | `result<T, E>` | `{"ok": t}` or `{"err": e}` | as a variant |
//! | `map<string, V>` | `{"key": v}` | `object` |
//! | `map<K, V>` | `[[k, v], …]` | `array` of pairs |
//!
//! Resources, futures, streams, error contexts and `option<option<T>>` have
//! no JSON form here; a function that uses one is skipped, with the reason.
//!
//! Invariants:
//! - A shape is built with sharing (one node per WIT type definition), so
//!   its size is linear in the WIT, and at most [`MAX_DEPTH`] deep, so
//!   every walk of it (schema, conversion) recurses at most that far.
//! - The schema of one function is at most [`MAX_SCHEMA_NODES`] nodes:
//!   inlining a type used twice in each of thirty nested records would
//!   otherwise take 2³⁰.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use wit_parser::{Resolve, Type, TypeDefKind, TypeId};

/// How deeply WIT types may nest (a record in a list in an option…).
pub const MAX_DEPTH: usize = 64;

/// The most nodes the JSON Schema of one function may have.
pub const MAX_SCHEMA_NODES: usize = 4_096;

/// A WIT type, resolved.
#[derive(Debug)]
pub enum Shape {
    Bool,
    Int(Int),
    F32,
    F64,
    Char,
    String,
    /// `list<u8>`: base64 text.
    Bytes,
    List(Arc<Shape>),
    FixedList(Arc<Shape>, u32),
    Option(Arc<Shape>),
    Record {
        fields: Vec<Field>,
        docs: Option<String>,
    },
    Tuple(Vec<Arc<Shape>>),
    Enum {
        cases: Vec<String>,
        docs: Option<String>,
    },
    Flags {
        names: Vec<String>,
        docs: Option<String>,
    },
    Variant {
        cases: Vec<Case>,
        docs: Option<String>,
    },
    Result {
        ok: Option<Arc<Shape>>,
        err: Option<Arc<Shape>>,
    },
    /// `map<K, V>`; a JSON object when `K` is `string`.
    Map(Arc<Shape>, Arc<Shape>),
}

/// One field of a record.
#[derive(Debug)]
pub struct Field {
    pub name: String,
    pub shape: Arc<Shape>,
    pub docs: Option<String>,
}

/// One case of a variant (or of a result: `ok` and `err`).
#[derive(Debug)]
pub struct Case {
    pub name: String,
    pub shape: Option<Arc<Shape>>,
    pub docs: Option<String>,
}

/// The integer types, with their bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Int {
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
}

impl Int {
    /// The smallest and largest value, as JSON numbers.
    pub fn bounds(self) -> (i128, i128) {
        match self {
            Int::U8 => (0, u8::MAX.into()),
            Int::U16 => (0, u16::MAX.into()),
            Int::U32 => (0, u32::MAX.into()),
            Int::U64 => (0, u64::MAX.into()),
            Int::S8 => (i8::MIN.into(), i8::MAX.into()),
            Int::S16 => (i16::MIN.into(), i16::MAX.into()),
            Int::S32 => (i32::MIN.into(), i32::MAX.into()),
            Int::S64 => (i64::MIN.into(), i64::MAX.into()),
        }
    }

    /// The WIT name.
    pub fn name(self) -> &'static str {
        match self {
            Int::U8 => "u8",
            Int::U16 => "u16",
            Int::U32 => "u32",
            Int::U64 => "u64",
            Int::S8 => "s8",
            Int::S16 => "s16",
            Int::S32 => "s32",
            Int::S64 => "s64",
        }
    }
}

/// Builds shapes from one [`Resolve`], one node per type definition.
pub struct Shapes<'a> {
    resolve: &'a Resolve,
    /// Each definition built so far, with its height (how deep its own
    /// types nest), so that a reuse deeper down is still held to
    /// [`MAX_DEPTH`].
    built: HashMap<TypeId, (Arc<Shape>, usize)>,
}

impl<'a> Shapes<'a> {
    /// Shapes of the types in `resolve`.
    pub fn new(resolve: &'a Resolve) -> Self {
        Shapes {
            resolve,
            built: HashMap::new(),
        }
    }

    /// The shape of `ty`, or why it has no JSON form.
    pub fn of(&mut self, ty: &Type) -> Result<Arc<Shape>, String> {
        self.at(ty, 0).map(|(shape, _)| shape)
    }

    /// The shape of `ty` used `depth` levels down, and its height.
    fn at(&mut self, ty: &Type, depth: usize) -> Result<(Arc<Shape>, usize), String> {
        let too_deep = || format!("its types nest more than {MAX_DEPTH} deep");
        if depth > MAX_DEPTH {
            return Err(too_deep());
        }
        let simple = |shape| Ok((Arc::new(shape), 0));
        match ty {
            Type::Bool => simple(Shape::Bool),
            Type::U8 => simple(Shape::Int(Int::U8)),
            Type::U16 => simple(Shape::Int(Int::U16)),
            Type::U32 => simple(Shape::Int(Int::U32)),
            Type::U64 => simple(Shape::Int(Int::U64)),
            Type::S8 => simple(Shape::Int(Int::S8)),
            Type::S16 => simple(Shape::Int(Int::S16)),
            Type::S32 => simple(Shape::Int(Int::S32)),
            Type::S64 => simple(Shape::Int(Int::S64)),
            Type::F32 => simple(Shape::F32),
            Type::F64 => simple(Shape::F64),
            Type::Char => simple(Shape::Char),
            Type::String => simple(Shape::String),
            Type::ErrorContext => Err("it uses an `error-context`, which has no JSON form".into()),
            Type::Id(id) => {
                let (shape, height) = match self.built.get(id) {
                    Some((shape, height)) => (Arc::clone(shape), *height),
                    None => {
                        let built = self.definition(*id, depth)?;
                        self.built.insert(*id, (Arc::clone(&built.0), built.1));
                        built
                    }
                };
                if depth + height > MAX_DEPTH {
                    return Err(too_deep());
                }
                Ok((shape, height))
            }
        }
    }

    /// The shape of definition `id` used `depth` levels down, and its height.
    fn definition(&mut self, id: TypeId, depth: usize) -> Result<(Arc<Shape>, usize), String> {
        let resolve = self.resolve;
        let Some(def) = resolve.types.get(id) else {
            return Err("it refers to a type the component does not define".into());
        };
        let docs = def.docs.contents.clone();
        let name = def.name.as_deref().unwrap_or("(anonymous)");
        let next = depth + 1;
        // The tallest child so far.
        let mut tallest = 0;
        let mut child = |this: &mut Self, ty: &Type| -> Result<Arc<Shape>, String> {
            let (shape, height) = this.at(ty, next)?;
            tallest = tallest.max(height + 1);
            Ok(shape)
        };
        let shape = match &def.kind {
            TypeDefKind::Type(inner) => {
                // An alias: the aliased type's shape, one level down.
                let shape = child(self, inner)?;
                return Ok((shape, tallest));
            }
            TypeDefKind::Record(record) => Shape::Record {
                fields: record
                    .fields
                    .iter()
                    .map(|f| {
                        Ok(Field {
                            name: f.name.clone(),
                            shape: child(self, &f.ty)?,
                            docs: f.docs.contents.clone(),
                        })
                    })
                    .collect::<Result<_, String>>()?,
                docs,
            },
            TypeDefKind::Tuple(tuple) => Shape::Tuple(
                tuple
                    .types
                    .iter()
                    .map(|t| child(self, t))
                    .collect::<Result<_, _>>()?,
            ),
            TypeDefKind::Enum(e) => Shape::Enum {
                cases: e.cases.iter().map(|c| c.name.clone()).collect(),
                docs,
            },
            TypeDefKind::Flags(flags) => Shape::Flags {
                names: flags.flags.iter().map(|f| f.name.clone()).collect(),
                docs,
            },
            TypeDefKind::Variant(variant) => Shape::Variant {
                cases: variant
                    .cases
                    .iter()
                    .map(|c| {
                        Ok(Case {
                            name: c.name.clone(),
                            shape: c.ty.as_ref().map(|t| child(self, t)).transpose()?,
                            docs: c.docs.contents.clone(),
                        })
                    })
                    .collect::<Result<_, String>>()?,
                docs,
            },
            TypeDefKind::Option(inner) => {
                let inner = child(self, inner)?;
                if matches!(*inner, Shape::Option(_)) {
                    return Err(
                        "it uses `option<option<…>>`, whose inner `none` has no JSON form".into(),
                    );
                }
                Shape::Option(inner)
            }
            TypeDefKind::Result(result) => Shape::Result {
                ok: result.ok.as_ref().map(|t| child(self, t)).transpose()?,
                err: result.err.as_ref().map(|t| child(self, t)).transpose()?,
            },
            TypeDefKind::List(Type::U8) => Shape::Bytes,
            TypeDefKind::List(inner) => Shape::List(child(self, inner)?),
            TypeDefKind::FixedLengthList(inner, n) => Shape::FixedList(child(self, inner)?, *n),
            TypeDefKind::Map(key, value) => {
                let key = child(self, key)?;
                Shape::Map(key, child(self, value)?)
            }
            TypeDefKind::Resource | TypeDefKind::Handle(_) => {
                let name = match &def.kind {
                    TypeDefKind::Handle(
                        wit_parser::Handle::Own(resource) | wit_parser::Handle::Borrow(resource),
                    ) => resolve
                        .types
                        .get(*resource)
                        .and_then(|r| r.name.as_deref())
                        .unwrap_or(name),
                    _ => name,
                };
                return Err(format!(
                    "it uses the resource `{name}`, which has no JSON form (resources are not supported yet)"
                ));
            }
            TypeDefKind::Future(_) => {
                return Err("it uses a `future`, which has no JSON form".into());
            }
            TypeDefKind::Stream(_) => {
                return Err("it uses a `stream`, which has no JSON form".into());
            }
            TypeDefKind::Unknown => {
                return Err(format!("it uses the type `{name}`, which is not resolved"));
            }
        };
        Ok((Arc::new(shape), tallest))
    }
}

/// JSON Schemas of shapes, within a node budget.
pub struct SchemaBuilder {
    nodes: usize,
}

/// The schema would be over [`MAX_SCHEMA_NODES`].
#[derive(Debug)]
pub struct TooLarge;

impl SchemaBuilder {
    /// A builder with the whole budget.
    pub fn new() -> Self {
        SchemaBuilder { nodes: 0 }
    }

    /// The schema of `shape`.
    pub fn schema(&mut self, shape: &Shape) -> Result<Value, TooLarge> {
        self.nodes += 1;
        if self.nodes > MAX_SCHEMA_NODES {
            return Err(TooLarge);
        }
        let mut schema = match shape {
            Shape::Bool => json!({"type": "boolean"}),
            Shape::Int(int) => {
                let (min, max) = int.bounds();
                json!({"type": "integer", "minimum": number(min), "maximum": number(max)})
            }
            Shape::F32 | Shape::F64 => json!({"type": "number"}),
            Shape::Char => json!({"type": "string", "minLength": 1, "maxLength": 1}),
            Shape::String => json!({"type": "string"}),
            Shape::Bytes => json!({
                "anyOf": [
                    {"type": "string", "contentEncoding": "base64"},
                    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 255}}
                ],
                "description": "bytes: base64 text, or an array of byte values"
            }),
            Shape::List(item) => json!({"type": "array", "items": self.schema(item)?}),
            Shape::FixedList(item, n) => json!({
                "type": "array",
                "items": self.schema(item)?,
                "minItems": n,
                "maxItems": n
            }),
            Shape::Option(inner) => {
                json!({"anyOf": [self.schema(inner)?, {"type": "null"}]})
            }
            Shape::Record { fields, .. } => {
                let mut properties = Map::new();
                let mut required = Vec::new();
                for field in fields {
                    let mut schema = self.schema(&field.shape)?;
                    describe(&mut schema, field.docs.as_deref());
                    properties.insert(field.name.clone(), schema);
                    if !matches!(*field.shape, Shape::Option(_)) {
                        required.push(Value::String(field.name.clone()));
                    }
                }
                json!({
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false
                })
            }
            Shape::Tuple(items) => {
                let items = items
                    .iter()
                    .map(|item| self.schema(item))
                    .collect::<Result<Vec<_>, _>>()?;
                json!({
                    "type": "array",
                    "prefixItems": items,
                    "items": false,
                    "minItems": items.len(),
                    "maxItems": items.len()
                })
            }
            Shape::Enum { cases, .. } => json!({"type": "string", "enum": cases}),
            Shape::Flags { names, .. } => json!({
                "type": "array",
                "items": {"type": "string", "enum": names},
                "uniqueItems": true
            }),
            Shape::Variant { cases, .. } => {
                let cases = cases
                    .iter()
                    .map(|case| self.case(&case.name, case.shape.as_deref(), case.docs.as_deref()))
                    .collect::<Result<Vec<_>, _>>()?;
                json!({"oneOf": cases})
            }
            Shape::Result { ok, err } => json!({"oneOf": [
                self.case("ok", ok.as_deref(), None)?,
                self.case("err", err.as_deref(), None)?,
            ]}),
            Shape::Map(key, value) if matches!(**key, Shape::String) => json!({
                "type": "object",
                "additionalProperties": self.schema(value)?
            }),
            Shape::Map(key, value) => json!({
                "type": "array",
                "items": {
                    "type": "array",
                    "prefixItems": [self.schema(key)?, self.schema(value)?],
                    "items": false,
                    "minItems": 2,
                    "maxItems": 2
                }
            }),
        };
        let docs = match shape {
            Shape::Record { docs, .. }
            | Shape::Enum { docs, .. }
            | Shape::Flags { docs, .. }
            | Shape::Variant { docs, .. } => docs.as_deref(),
            _ => None,
        };
        describe(&mut schema, docs);
        Ok(schema)
    }

    /// One case of a variant: `"name"` alone, or `{"name": payload}`.
    fn case(
        &mut self,
        name: &str,
        payload: Option<&Shape>,
        docs: Option<&str>,
    ) -> Result<Value, TooLarge> {
        let mut schema = match payload {
            None => json!({"const": name}),
            Some(shape) => json!({
                "type": "object",
                "properties": {name: self.schema(shape)?},
                "required": [name],
                "additionalProperties": false
            }),
        };
        describe(&mut schema, docs);
        Ok(schema)
    }
}

/// Set `schema`'s description to `docs`, if there are any.
fn describe(schema: &mut Value, docs: Option<&str>) {
    if let (Some(docs), Value::Object(map)) = (docs.map(str::trim), schema)
        && !docs.is_empty()
        && !map.contains_key("description")
    {
        map.insert("description".into(), Value::String(docs.to_owned()));
    }
}

/// `n` as a JSON number (every integer bound fits `i64` or `u64`).
fn number(n: i128) -> Value {
    match (i64::try_from(n), u64::try_from(n)) {
        (Ok(n), _) => Value::from(n),
        (_, Ok(n)) => Value::from(n),
        _ => Value::Null,
    }
}
