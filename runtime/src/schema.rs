//! JSON Schemas from tools: checked and compiled once, at load, under
//! limits, and every validation run under a step budget.
//!
//! A tool's input and output schemas are the tool author's, and the host
//! validates client arguments and guest output against them. Left alone, a
//! schema can make that validation take exponential time (nested `anyOf`
//! over a `$ref` DAG), recurse until the host's stack overflows (a chain of
//! in-place `$ref`s), or spend seconds in one regular expression. So:
//!
//! - At load ([`Schema::compile`]): the text is at most [`MAX_SCHEMA_BYTES`]
//!   and parsed under a memory budget; at most [`MAX_SUBSCHEMAS`]
//!   subschemas; in-place applicators (`allOf`, `anyOf`, `oneOf`, `not`,
//!   `if`/`then`/`else`, `dependentSchemas`, `$ref`) nest at most
//!   [`MAX_INPLACE_DEPTH`] deep; `$ref`s are local (`#/…` or `#anchor`),
//!   `$dynamicRef`/`$recursiveRef` and nested `$id`s are refused; at most
//!   [`MAX_PATTERNS`] patterns of at most [`MAX_PATTERN_BYTES`] each,
//!   compiled with the `regex` crate (no backtracking: linear in the
//!   input), within [`REGEX_SIZE_LIMIT`]. Formats are annotations only.
//! - Every validation ([`Schema::problems`]) has a budget of steps: every
//!   subschema is wrapped as `{"allOf": [{"$toolcage-step": true}, S]}` in
//!   the compiled copy (the listed schema is the tool's own), so each time
//!   any subschema is applied to any part of the instance, a step is
//!   charged *before* the subschema runs, plus one per object member and
//!   one per 64 bytes of a string or member name (what patterns and
//!   property lookups cost). Out of steps, the validation unwinds at once
//!   (`resume_unwind`, caught in [`Schema::problems`]) and the caller gets
//!   [`BudgetExceeded`]. `$ref`s are rewritten to point through the
//!   wrappers.
//! - A schema that is a tree (no in-place applicator, no `$ref`, none of
//!   [`NOT_A_TREE`]) is compiled a second time without the wrappers: its
//!   steps are bounded by its size times the instance's
//!   ([`Schema::problems_in`]), and where that bound fits the budget, the
//!   meter could not stop it, so "valid" is taken from the unwrapped form.
//!
//! Recursion: the parsed schema nests at most 128 levels (serde_json's
//! limit), so the walks here recurse at most that deep; validation recurses
//! at most ([`MAX_INPLACE_DEPTH`] + 1) × 3 frames per level of the instance,
//! whose nesting the parser also limits to 128.
//!
//! One file (about 700 lines of code, 180 of tests): the wrapping, the
//! `$ref` rewrite and the graph check keep one invariant together (every
//! subschema is charged a step before it runs, however it is reached), and
//! each is wrong without the others.

#[cfg(panic = "abort")]
compile_error!(
    "the schema step budget unwinds to stop a validation: build with panic = \"unwind\""
);

use std::cell::Cell;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use jsonschema::paths::Location;
use jsonschema::{Keyword, ValidationError};
use serde_json::{Map, Value};

use crate::json;

/// Longest schema text accepted, in bytes.
pub const MAX_SCHEMA_BYTES: usize = 256 * 1024;
/// Most subschemas one schema may hold.
pub const MAX_SUBSCHEMAS: usize = 10_000;
/// Deepest chain of in-place applicators (`allOf`, `anyOf`, `oneOf`, `not`,
/// `if`/`then`/`else`, `dependentSchemas`, `$ref`) applied to one value.
pub const MAX_INPLACE_DEPTH: usize = 64;
/// Most `pattern` keywords and `patternProperties` entries in one schema.
pub const MAX_PATTERNS: usize = 256;
/// Longest pattern source, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1024;
/// Largest compiled regular expression (the `regex` crate's size limit).
pub const REGEX_SIZE_LIMIT: usize = 64 * 1024;
/// Steps every validation may take before the instance counts.
pub const BASE_STEPS: u64 = 100_000;
/// Steps a validation may take per byte of the instance's JSON text, on top
/// of [`BASE_STEPS`].
pub const STEPS_PER_BYTE: u64 = 2;

/// The stack every thread that validates gets (the runtime's workers and
/// blocking threads): four times the deepest validation these limits allow,
/// as measured.
pub const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;

/// The custom keyword that charges a step; see the module docs.
const STEP: &str = "$toolcage-step";

/// A validation ran out of steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "validating against the schema took more than {steps} steps (the schema is too expensive to check for this input)"
)]
pub struct BudgetExceeded {
    /// The budget it had.
    pub steps: u64,
}

/// The budget for an instance of `bytes` bytes of JSON text.
pub fn budget_for(bytes: usize) -> u64 {
    BASE_STEPS.saturating_add((bytes as u64).saturating_mul(STEPS_PER_BYTE))
}

/// A tool's schema, compiled under the limits above.
pub struct Schema {
    validator: jsonschema::Validator,
    /// The same schema compiled without the step wrappers, with how many
    /// subschemas it has, when each of them is reached from the root one
    /// way only (see [`Schema::problems_in`]).
    unmetered: Option<(jsonschema::Validator, u64)>,
}

/// Keywords that apply a subschema to a value it did not reach by its own
/// path, or to a value that is not part of the instance: a schema that
/// names any of them (anywhere, even as a property name) is always checked
/// under the meter.
const NOT_A_TREE: [&str; 6] = [
    "$ref",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
    "contentMediaType",
    "contentEncoding",
];

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Schema")
    }
}

impl Schema {
    /// Check `schema` against the limits and compile it.
    ///
    /// # Errors
    ///
    /// A limit is exceeded, a `$ref` is not local, a pattern does not
    /// compile, or the schema is not valid JSON Schema; the message says
    /// which.
    pub fn compile(schema: &Map<String, Value>) -> Result<Schema, String> {
        let root = Value::Object(schema.clone());
        let graph = Graph::of(&root)?;
        graph.check_depth()?;
        let wrapped = wrap(&root, &root);
        let validator = options()
            .with_keyword(STEP, |_, _, _| Ok(Box::new(StepKeyword)))
            .build(&wrapped)
            .map_err(|error| error.to_string())?;
        let tree = graph.in_place.iter().all(Vec::is_empty) && !names_any(&root, &NOT_A_TREE);
        let unmetered = if tree {
            let plain = options().build(&root).map_err(|error| error.to_string())?;
            Some((plain, graph.in_place.len() as u64))
        } else {
            None
        };
        Ok(Schema {
            validator,
            unmetered,
        })
    }

    /// [`Schema::problems`] for an instance of `bytes` bytes of JSON text,
    /// under [`budget_for`] that size; without the meter where it cannot
    /// run out.
    ///
    /// A schema with no in-place applicator, no `$ref` and none of
    /// [`NOT_A_TREE`] is a tree whose every subschema is reached from the
    /// root one way only, so each of its K subschemas is applied at most
    /// once to each value and each member name of the instance. What one
    /// application is charged (see [`cost`]) summed over all of them is at
    /// most about 1.55 steps a byte of text (a value takes a byte, a member
    /// four, a name or string 64 more for each step), so a check takes at
    /// most K × (2 × bytes + 1) steps. Where that is within the budget, the
    /// metered check could not run out and says what the check without
    /// the wrappers says (`a_schema_without_in_place_applicators_takes_steps_linear_in_its_input`
    /// holds the count to the validator as it runs). The unmetered check
    /// answers only "valid"; anything else is checked and reported under
    /// the meter, as before.
    ///
    /// # Errors
    ///
    /// The budget ran out.
    pub fn problems_in(
        &self,
        instance: &Value,
        bytes: usize,
    ) -> Result<Option<String>, BudgetExceeded> {
        let budget = budget_for(bytes);
        if let Some((plain, subschemas)) = &self.unmetered
            && subschemas.saturating_mul((bytes as u64).saturating_mul(2).saturating_add(1))
                <= budget
            && plain.is_valid(instance)
        {
            return Ok(None);
        }
        self.problems(instance, budget)
    }

    /// Every violation of the schema by `instance`, one per line as
    /// `- <path>: <message>` (at most 20), or `None` if it is valid; within
    /// `budget` steps for each of the two passes (the check, then the
    /// report).
    ///
    /// # Errors
    ///
    /// The budget ran out.
    pub fn problems(
        &self,
        instance: &Value,
        budget: u64,
    ) -> Result<Option<String>, BudgetExceeded> {
        if metered(budget, || self.validator.is_valid(instance))? {
            return Ok(None);
        }
        let problems = metered(budget, || {
            self.validator
                .iter_errors(instance)
                .take(20)
                .map(|error| {
                    let path = error.instance_path().to_string();
                    let path = if path.is_empty() {
                        "(root)".to_owned()
                    } else {
                        path
                    };
                    format!("- {path}: {error}")
                })
                .collect::<Vec<_>>()
        })?;
        Ok(Some(problems.join("\n")))
    }
}

thread_local! {
    /// Steps left to the validation running on this thread; `u64::MAX`
    /// outside one.
    static STEPS: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// The unwind payload of a validation out of steps.
struct OutOfSteps;

/// Run `check` with `budget` steps.
fn metered<T>(budget: u64, check: impl FnOnce() -> T) -> Result<T, BudgetExceeded> {
    let outer = STEPS.replace(budget);
    // The validator is immutable and the validation's own state lives in
    // `check`, so unwinding out of it leaves nothing half-updated.
    let result = catch_unwind(AssertUnwindSafe(check));
    STEPS.set(outer);
    match result {
        Ok(value) => Ok(value),
        Err(payload) if payload.is::<OutOfSteps>() => Err(BudgetExceeded { steps: budget }),
        Err(payload) => resume_unwind(payload),
    }
}

/// Charge `steps`, unwinding when they run out. `resume_unwind` skips the
/// panic hook: running out is an expected outcome, not a bug to report.
fn charge(steps: u64) {
    let left = STEPS.get();
    match left.checked_sub(steps) {
        Some(left) => STEPS.set(left),
        None => {
            STEPS.set(0);
            resume_unwind(Box::new(OutOfSteps));
        }
    }
}

/// What applying one subschema to `instance` costs, in steps.
fn cost(instance: &Value) -> u64 {
    1 + match instance {
        Value::String(text) => text.len() as u64 / 64,
        Value::Object(members) => {
            members.len() as u64 + members.keys().map(|k| k.len() as u64 / 64).sum::<u64>()
        }
        _ => 0,
    }
}

/// The validator's options for both compiled forms: formats are
/// annotations, patterns the `regex` crate's under [`REGEX_SIZE_LIMIT`].
fn options() -> jsonschema::ValidationOptions<'static> {
    jsonschema::options()
        .should_validate_formats(false)
        .with_pattern_options(
            jsonschema::PatternOptions::regex()
                .size_limit(REGEX_SIZE_LIMIT)
                .dfa_size_limit(REGEX_SIZE_LIMIT * 16),
        )
        .with_keyword("pattern", compile_pattern)
}

/// Whether any object in `value`, at any depth, has a key among `keys`.
/// Recursion: the parsed schema nests at most 128 levels (module docs).
fn names_any(value: &Value, keys: &[&str]) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(key, value)| keys.contains(&key.as_str()) || names_any(value, keys)),
        Value::Array(items) => items.iter().any(|item| names_any(item, keys)),
        _ => false,
    }
}

/// `"$toolcage-step": true`: charges the step of each subschema it wraps.
struct StepKeyword;

impl<'i> Keyword<'i> for StepKeyword {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        charge(cost(instance));
        Ok(())
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        charge(cost(instance));
        true
    }
}

/// `pattern`, compiled with the `regex` crate under [`REGEX_SIZE_LIMIT`]:
/// matching is linear in the string, never backtracking.
struct PatternKeyword {
    source: String,
    regex: regex::Regex,
}

fn compile_pattern<'a>(
    _parent: &'a Map<String, Value>,
    value: &'a Value,
    _location: Location,
) -> Result<Box<dyn for<'i> Keyword<'i>>, ValidationError<'a>> {
    let Value::String(source) = value else {
        return Err(ValidationError::custom("`pattern` must be a string"));
    };
    let regex = compile_regex(source).map_err(ValidationError::custom)?;
    Ok(Box::new(PatternKeyword {
        source: source.clone(),
        regex,
    }))
}

/// Compile an ECMA 262 pattern (as JSON Schema writes them) for the `regex`
/// crate, under the limits.
fn compile_regex(source: &str) -> Result<regex::Regex, String> {
    if source.len() > MAX_PATTERN_BYTES {
        return Err(format!(
            "pattern of {} bytes is over the limit of {MAX_PATTERN_BYTES}",
            source.len()
        ));
    }
    let translated = jsonschema_regex::to_rust_regex(source)
        .map_err(|()| format!("pattern `{source}` is not a valid regular expression"))?;
    regex::RegexBuilder::new(&translated)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT * 16)
        .build()
        .map_err(|error| {
            format!(
                "pattern `{source}` cannot be used: {error} (patterns run on a linear-time engine: \
                 no look-around or back-references, and at most {REGEX_SIZE_LIMIT} bytes compiled)"
            )
        })
}

impl<'i> Keyword<'i> for PatternKeyword {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        if self.is_valid(instance) {
            Ok(())
        } else {
            Err(ValidationError::custom(format!(
                "{instance} does not match {:?}",
                self.source
            )))
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        match instance {
            Value::String(text) => self.regex.is_match(text),
            _ => true,
        }
    }
}

// --- The shape of a schema ---------------------------------------------------

/// Where a keyword's value sits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// One subschema applied to the same value (`not`, `if`, ...).
    InPlace,
    /// Subschemas in an array, applied to the same value (`allOf`, ...).
    InPlaceArray,
    /// Subschemas by name, applied to the same value (`dependentSchemas`).
    InPlaceMap,
    /// One subschema applied to parts of the value (`items`, ...).
    Child,
    /// Subschemas in an array applied to parts of the value (`prefixItems`).
    ChildArray,
    /// Subschemas by name applied to parts of the value (`properties`).
    ChildMap,
    /// Subschemas by name, applied only through `$ref` (`$defs`).
    Definitions,
    /// Not a schema.
    Data,
}

/// What `keyword`'s `value` holds.
fn slot(keyword: &str, value: &Value) -> Slot {
    match keyword {
        "not" | "if" | "then" | "else" => Slot::InPlace,
        "allOf" | "anyOf" | "oneOf" => Slot::InPlaceArray,
        "dependentSchemas" => Slot::InPlaceMap,
        // Draft 7: a schema (in place) or a list of names, per property.
        "dependencies" => Slot::InPlaceMap,
        "items" if value.is_array() => Slot::ChildArray,
        "items"
        | "additionalItems"
        | "additionalProperties"
        | "contains"
        | "propertyNames"
        | "unevaluatedItems"
        | "unevaluatedProperties"
        | "contentSchema" => Slot::Child,
        "prefixItems" => Slot::ChildArray,
        "properties" | "patternProperties" => Slot::ChildMap,
        "$defs" | "definitions" => Slot::Definitions,
        _ => Slot::Data,
    }
}

/// Keywords that stay on the wrapper: definitions (so `#/$defs/x` still
/// resolves) and what identifies the schema resource.
fn stays_on_wrapper(keyword: &str) -> bool {
    matches!(
        keyword,
        "$defs"
            | "definitions"
            | "$schema"
            | "$id"
            | "$anchor"
            | "$dynamicAnchor"
            | "$comment"
            | "$vocabulary"
    )
}

/// `node` (a subschema of the document `root`) with every subschema
/// wrapped in a step (see the module docs) and every local `$ref` pointing
/// through the wrappers.
fn wrap(node: &Value, root: &Value) -> Value {
    let Value::Object(map) = node else {
        // `true`/`false` (or something invalid, which compiling reports).
        return match node {
            Value::Bool(_) => step_around(Map::new(), node.clone()),
            other => other.clone(),
        };
    };
    let mut outer = Map::new();
    let mut inner = Map::new();
    for (keyword, value) in map {
        let wrapped = match slot(keyword, value) {
            Slot::InPlace | Slot::Child => wrap(value, root),
            Slot::InPlaceArray | Slot::ChildArray => match value {
                Value::Array(items) => Value::Array(items.iter().map(|v| wrap(v, root)).collect()),
                other => other.clone(),
            },
            Slot::InPlaceMap | Slot::ChildMap | Slot::Definitions => match value {
                Value::Object(entries) => Value::Object(
                    entries
                        .iter()
                        .map(|(name, v)| {
                            let v = if v.is_object() || v.is_boolean() {
                                wrap(v, root)
                            } else {
                                v.clone()
                            };
                            (name.clone(), v)
                        })
                        .collect(),
                ),
                other => other.clone(),
            },
            Slot::Data if keyword == "$ref" => match value {
                Value::String(reference) => Value::String(rewrite_ref(reference, root)),
                other => other.clone(),
            },
            Slot::Data => value.clone(),
        };
        if stays_on_wrapper(keyword) {
            outer.insert(keyword.clone(), wrapped);
        } else {
            inner.insert(keyword.clone(), wrapped);
        }
    }
    step_around(outer, Value::Object(inner))
}

/// `{..outer, "allOf": [{"$toolcage-step": true}, schema]}`.
fn step_around(mut outer: Map<String, Value>, schema: Value) -> Value {
    let mut step = Map::new();
    step.insert(STEP.to_owned(), Value::Bool(true));
    outer.insert(
        "allOf".to_owned(),
        Value::Array(vec![Value::Object(step), schema]),
    );
    Value::Object(outer)
}

/// The tokens of a local `$ref`'s JSON pointer (`#/a/b` → `["a", "b"]`,
/// still escaped), or `None` for an anchor (`#name`). Checked by
/// [`Graph::of`] before anything is rewritten.
fn pointer_tokens(reference: &str) -> Option<Vec<&str>> {
    let fragment = reference.strip_prefix('#')?;
    if fragment.is_empty() {
        return Some(Vec::new());
    }
    Some(fragment.strip_prefix('/')?.split('/').collect())
}

/// The `$ref` that reaches, in the wrapped schema, what `reference`
/// reached in the original document `root`: `allOf/1` is inserted wherever
/// the pointer steps into a subschema by a keyword that moved inside the
/// wrapper. Anchors need nothing: they stay on the wrapper.
fn rewrite_ref(reference: &str, root: &Value) -> String {
    let Some(tokens) = pointer_tokens(reference) else {
        return reference.to_owned();
    };
    let mut out = String::from("#");
    // Where the walk stands in the original, and what kind of place it is.
    let mut at = Some(root);
    let mut place = Place::Schema;
    for token in tokens {
        let key = unescape(token);
        let next = at.and_then(|value| match value {
            Value::Object(map) => map.get(&key),
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        });
        place = match place {
            Place::Schema => {
                if !stays_on_wrapper(&key) {
                    out.push_str("/allOf/1");
                }
                match next.map(|value| slot(&key, value)) {
                    Some(Slot::InPlace | Slot::Child) => Place::Schema,
                    Some(Slot::InPlaceArray | Slot::ChildArray) => Place::Schemas,
                    Some(Slot::InPlaceMap | Slot::ChildMap | Slot::Definitions) => Place::Schemas,
                    Some(Slot::Data) | None => Place::Data,
                }
            }
            // An entry of an array or map of subschemas.
            Place::Schemas if next.is_some_and(|v| v.is_object() || v.is_boolean()) => {
                Place::Schema
            }
            Place::Schemas | Place::Data => Place::Data,
        };
        out.push('/');
        out.push_str(token);
        at = next;
    }
    out
}

/// Where a pointer walk stands in [`rewrite_ref`].
#[derive(Clone, Copy)]
enum Place {
    /// At a subschema (wrapped in the compiled copy).
    Schema,
    /// At an array or map whose entries are subschemas.
    Schemas,
    /// Inside data (an `enum`, a `default`, ...): nothing moves.
    Data,
}

/// A JSON pointer token, `~1` and `~0` undone, percent-decoded (a fragment
/// is a URI part).
fn unescape(token: &str) -> String {
    let decoded = percent_encoding::percent_decode_str(token).decode_utf8_lossy();
    decoded.replace("~1", "/").replace("~0", "~")
}

/// The subschemas of a schema and which apply to the same value as which,
/// to bound the schema before it is compiled.
struct Graph {
    /// For each subschema, the subschemas it applies to the same value
    /// (in-place applicators and `$ref` targets).
    in_place: Vec<Vec<usize>>,
}

impl Graph {
    /// Walk `root` (iteratively): count subschemas and patterns, check
    /// `$ref`s and `$id`s, and record the in-place edges.
    fn of(root: &Value) -> Result<Graph, String> {
        // Every subschema, by its JSON pointer (tokens escaped as in a
        // pointer), with the pointers of its in-place children and refs.
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut anchors: HashMap<String, usize> = HashMap::new();
        let mut edges: Vec<Vec<String>> = Vec::new();
        let mut patterns = 0usize;
        let mut stack: Vec<(&Value, String)> = vec![(root, String::new())];
        while let Some((node, pointer)) = stack.pop() {
            let id = edges.len();
            if id >= MAX_SUBSCHEMAS {
                return Err(format!("has more than {MAX_SUBSCHEMAS} subschemas"));
            }
            index.insert(pointer.clone(), id);
            edges.push(Vec::new());
            let Value::Object(map) = node else {
                continue;
            };
            for (keyword, value) in map {
                let at = format!("{pointer}/{}", escape(keyword));
                match keyword.as_str() {
                    "$ref" => {
                        let Value::String(reference) = value else {
                            return Err("has a `$ref` that is not a string".into());
                        };
                        edges[id].push(ref_target(reference)?);
                    }
                    "$dynamicRef" | "$recursiveRef" => {
                        return Err(format!(
                            "uses `{keyword}`; toolcage supports local `$ref`s only"
                        ));
                    }
                    "$id" if !pointer.is_empty() => {
                        return Err(
                            "sets `$id` in a subschema; toolcage supports `$id` at the root only"
                                .into(),
                        );
                    }
                    "$anchor" => {
                        if let Value::String(anchor) = value {
                            anchors.insert(anchor.clone(), id);
                        }
                    }
                    "pattern" => {
                        patterns += 1;
                        if let Value::String(source) = value {
                            compile_regex(source)?;
                        }
                    }
                    "patternProperties" => {
                        if let Value::Object(entries) = value {
                            patterns += entries.len();
                            for source in entries.keys() {
                                compile_regex(source)?;
                            }
                        }
                    }
                    _ => {}
                }
                if patterns > MAX_PATTERNS {
                    return Err(format!("has more than {MAX_PATTERNS} patterns"));
                }
                let slot = slot(keyword, value);
                let in_place =
                    matches!(slot, Slot::InPlace | Slot::InPlaceArray | Slot::InPlaceMap);
                let mut child = |value: &'_ Value, pointer: String| {
                    if value.is_object() || value.is_boolean() {
                        if in_place {
                            edges[id].push(pointer.clone());
                        }
                        Some(pointer)
                    } else {
                        None
                    }
                };
                match (slot, value) {
                    (Slot::InPlace | Slot::Child, value) => {
                        if let Some(pointer) = child(value, at) {
                            stack.push((value, pointer));
                        }
                    }
                    (Slot::InPlaceArray | Slot::ChildArray, Value::Array(items)) => {
                        for (i, item) in items.iter().enumerate() {
                            if let Some(pointer) = child(item, format!("{at}/{i}")) {
                                stack.push((item, pointer));
                            }
                        }
                    }
                    (
                        Slot::InPlaceMap | Slot::ChildMap | Slot::Definitions,
                        Value::Object(entries),
                    ) => {
                        for (name, entry) in entries {
                            if let Some(pointer) = child(entry, format!("{at}/{}", escape(name))) {
                                stack.push((entry, pointer));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        let in_place = edges
            .into_iter()
            .map(|targets| {
                targets
                    .iter()
                    .filter_map(|target| match target.strip_prefix('#') {
                        // An anchor.
                        Some(anchor) => anchors.get(anchor).copied(),
                        None => index.get(target).copied(),
                    })
                    .collect()
            })
            .collect();
        Ok(Graph { in_place })
    }

    /// The longest chain of in-place applications, iteratively (a chain can
    /// be as long as there are subschemas); cycles (which the validator
    /// detects) end a chain.
    fn check_depth(&self) -> Result<(), String> {
        const UNSEEN: usize = usize::MAX;
        const ON_STACK: usize = usize::MAX - 1;
        let mut depth = vec![UNSEEN; self.in_place.len()];
        for start in 0..self.in_place.len() {
            if depth[start] != UNSEEN {
                continue;
            }
            // (node, next child to visit)
            let mut stack = vec![(start, 0usize)];
            depth[start] = ON_STACK;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if let Some(&child) = self.in_place[node].get(*next) {
                    *next += 1;
                    if depth[child] == UNSEEN {
                        depth[child] = ON_STACK;
                        stack.push((child, 0));
                    }
                    continue;
                }
                let deepest = self.in_place[node]
                    .iter()
                    .map(|&child| match depth[child] {
                        ON_STACK | UNSEEN => 0,
                        d => d,
                    })
                    .max()
                    .unwrap_or(0);
                depth[node] = deepest + 1;
                if depth[node] > MAX_INPLACE_DEPTH {
                    return Err(format!(
                        "nests in-place applicators (`allOf`, `anyOf`, `oneOf`, `not`, `if`, \
                         `$ref`, ...) more than {MAX_INPLACE_DEPTH} deep"
                    ));
                }
                stack.pop();
            }
        }
        Ok(())
    }
}

/// Where a `$ref` points: a pointer (escaped tokens, as [`Graph::of`] keys
/// subschemas) or `#anchor`.
///
/// # Errors
///
/// The reference is not local.
fn ref_target(reference: &str) -> Result<String, String> {
    match pointer_tokens(reference) {
        Some(tokens) => Ok(tokens
            .iter()
            .map(|token| format!("/{}", escape(&unescape(token))))
            .collect()),
        None => match reference.strip_prefix('#') {
            Some(anchor) if !anchor.is_empty() => Ok(format!("#{anchor}")),
            _ => Err(format!(
                "has `$ref` `{reference}`; toolcage supports local references only \
                 (`#/$defs/name` or `#anchor`)"
            )),
        },
    }
}

/// A key as a JSON pointer token.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Parse and compile a schema text under the limits: the text within
/// [`MAX_SCHEMA_BYTES`], its parsed form within a budget of 32 times that
/// (a schema is mostly small maps, each a B-tree node when parsed: about
/// 18 times its text for `{"type": "string", "description": ".."}`
/// properties), the root a JSON object.
///
/// # Errors
///
/// The message says which limit or rule failed.
pub fn parse(text: &str) -> Result<Map<String, Value>, String> {
    if text.len() > MAX_SCHEMA_BYTES {
        return Err(format!(
            "is {} bytes, over the limit of {MAX_SCHEMA_BYTES}",
            text.len()
        ));
    }
    match json::parse(text, MAX_SCHEMA_BYTES * 32) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("is not a JSON object".into()),
        Err(json::ParseError::Syntax(error)) => Err(format!("is not JSON: {error}")),
        Err(error) => Err(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compile(schema: Value) -> Result<Schema, String> {
        match schema {
            Value::Object(map) => Schema::compile(&map),
            _ => panic!("not an object"),
        }
    }

    fn check(schema: &Schema, instance: Value) -> Result<Option<String>, BudgetExceeded> {
        let bytes = instance.to_string().len();
        schema.problems(&instance, budget_for(bytes))
    }

    #[test]
    fn ordinary_schemas_validate_as_before() {
        let schema = compile(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "pattern": "^/"},
                "head": {"$ref": "#/$defs/count"},
                "mode": {"anyOf": [{"const": "a"}, {"const": "b"}]},
                "list": {"type": "array", "items": {"$ref": "#/$defs/count"}}
            },
            "required": ["path"],
            "additionalProperties": false,
            "$defs": {"count": {"type": "integer", "minimum": 0}}
        }))
        .expect("compiles");
        assert_eq!(
            check(
                &schema,
                json!({"path": "/x", "head": 3, "mode": "a", "list": [1, 2]})
            ),
            Ok(None)
        );
        let problems = check(
            &schema,
            json!({"path": "x", "head": -1, "mode": "c", "extra": 1}),
        )
        .expect("in budget")
        .expect("invalid");
        for needle in ["/path", "/head", "/mode", "extra"] {
            assert!(problems.contains(needle), "{needle}: {problems}");
        }
        assert!(
            check(&schema, json!({}))
                .expect("in budget")
                .expect("invalid")
                .contains("path")
        );
    }

    #[test]
    fn refs_into_subschemas_follow_the_wrappers() {
        let schema = compile(json!({
            "type": "object",
            "properties": {
                "a": {"type": "object", "properties": {"b": {"type": "integer"}}},
                "c": {"$ref": "#/properties/a/properties/b"},
                "d": {"$ref": "#/$defs/x/prefixItems/0"},
                "e": {"$ref": "#pos"}
            },
            "$defs": {"x": {"prefixItems": [{"type": "string"}]}, "p": {"$anchor": "pos", "minimum": 0}}
        }))
        .expect("compiles");
        assert_eq!(check(&schema, json!({"c": 1, "d": "s", "e": 1})), Ok(None));
        assert!(check(&schema, json!({"c": "x"})).expect("ok").is_some());
        assert!(check(&schema, json!({"d": 1})).expect("ok").is_some());
        assert!(check(&schema, json!({"e": -1})).expect("ok").is_some());
    }

    /// `$defs` `d0` to `dN`, each applying the next twice with
    /// `applicator`, and `dN` being `last`: 2^N applications of `last`.
    fn doubling_refs(levels: usize, applicator: &str, last: Value) -> Map<String, Value> {
        let mut defs = Map::new();
        for level in 0..levels {
            let next = format!("#/$defs/d{}", level + 1);
            defs.insert(
                format!("d{level}"),
                json!({applicator: [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert(format!("d{levels}"), last);
        defs
    }

    #[test]
    fn exponential_schemas_run_out_of_steps() {
        // 2^20 ways to check one string.
        let defs = doubling_refs(20, "anyOf", json!({"type": "integer"}));
        let schema = compile(
            json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}),
        )
        .expect("compiles");
        assert_eq!(check(&schema, json!({"x": 1})), Ok(None));
        assert_eq!(
            check(&schema, json!({"x": "s"})),
            Err(BudgetExceeded {
                steps: budget_for(9)
            })
        );
        // The same with `true` leaves: no instance access at all, still counted.
        let mut defs = Map::new();
        for i in 0..30 {
            let next = format!("#/$defs/a{}", i + 1);
            defs.insert(
                format!("a{i}"),
                json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert("a30".into(), json!(true));
        let schema =
            compile(json!({"type": "object", "allOf": [{"$ref": "#/$defs/a0"}], "$defs": defs}))
                .expect("compiles");
        assert!(check(&schema, json!({})).is_err());
    }

    #[test]
    fn limits_are_checked_at_compile_time() {
        let chain = |n: usize| {
            let mut defs = Map::new();
            for i in 0..n {
                defs.insert(
                    format!("a{i}"),
                    json!({"allOf": [{"$ref": format!("#/$defs/a{}", i + 1)}]}),
                );
            }
            defs.insert(format!("a{n}"), json!({}));
            json!({"type": "object", "allOf": [{"$ref": "#/$defs/a0"}], "$defs": defs})
        };
        assert!(compile(chain(10)).is_ok());
        let error = compile(chain(100)).err().unwrap_or_default();
        assert!(error.contains("in-place"), "{error}");
        // A cycle is not a chain.
        assert!(compile(json!({"type": "object", "allOf": [{"$ref": "#"}]})).is_ok());
        for (schema, needle) in [
            (
                json!({"$ref": "https://example.com/s.json"}),
                "local references",
            ),
            (json!({"$ref": "other.json#/x"}), "local references"),
            (json!({"$dynamicRef": "#x"}), "$dynamicRef"),
            (json!({"properties": {"a": {"$id": "x"}}}), "`$id`"),
            (json!({"pattern": "(?=a)"}), "pattern"),
            (json!({"pattern": "a".repeat(2000)}), "limit"),
        ] {
            let error = compile(schema.clone()).err().unwrap_or_default();
            assert!(error.contains(needle), "{schema}: {error}");
        }
        let many: Map<String, Value> = (0..MAX_SUBSCHEMAS)
            .map(|i| (format!("p{i}"), json!({})))
            .collect();
        let error = compile(json!({"properties": many}))
            .err()
            .unwrap_or_default();
        assert!(error.contains("subschemas"), "{error}");
    }

    #[test]
    fn patterns_are_linear_and_strings_are_charged() {
        let schema = compile(json!({"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}))
            .expect("compiles: the regex crate never backtracks");
        let evil = format!("{}!", "a".repeat(100_000));
        assert!(
            check(&schema, json!({"x": evil}))
                .expect("in budget")
                .is_some()
        );
        assert_eq!(check(&schema, json!({"x": "aaa"})), Ok(None));
        // Many long strings against a pattern: charged per byte.
        let schema = compile(json!({"type": "object", "properties": {"x": {"type": "array", "items": {"pattern": "b"}}}}))
            .expect("compiles");
        let strings: Vec<String> = (0..100).map(|_| "a".repeat(10_000)).collect();
        assert!(
            check(&schema, json!({"x": strings}))
                .expect("in budget")
                .is_some()
        );
    }

    /// A small random generator for the property test below (seeded, so a
    /// failure replays).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A random schema with no in-place applicator and no `$ref`: each of
    /// its subschemas is reached from the root one way only.
    fn tree_schema(rng: &mut Rng, depth: u32) -> Value {
        let mut schema = Map::new();
        let keys = ["a", "b", "ab", "ba"];
        let types = ["object", "array", "string", "number", "boolean", "null"];
        for _ in 0..rng.below(4) {
            match rng.below(if depth == 0 { 4 } else { 12 }) {
                0 => {
                    schema.insert("type".into(), json!(types[rng.below(6) as usize]));
                }
                1 => {
                    schema.insert("minLength".into(), json!(rng.below(50)));
                }
                2 => {
                    schema.insert(
                        "pattern".into(),
                        json!(["a", "^b", "a+b", "x$"][rng.below(4) as usize]),
                    );
                }
                3 => {
                    schema.insert("required".into(), json!([keys[rng.below(4) as usize]]));
                }
                4 => {
                    let mut properties = Map::new();
                    for _ in 0..1 + rng.below(3) {
                        properties.insert(
                            keys[rng.below(4) as usize].into(),
                            tree_schema(rng, depth - 1),
                        );
                    }
                    schema.insert("properties".into(), Value::Object(properties));
                }
                5 => {
                    schema.insert("items".into(), tree_schema(rng, depth - 1));
                }
                6 => {
                    let items = (0..1 + rng.below(3))
                        .map(|_| tree_schema(rng, depth - 1))
                        .collect();
                    schema.insert("prefixItems".into(), Value::Array(items));
                }
                7 => {
                    schema.insert("additionalProperties".into(), tree_schema(rng, depth - 1));
                }
                8 => {
                    let mut patterns = Map::new();
                    for pattern in ["a", "b", "^a"] {
                        if rng.below(2) == 0 {
                            patterns.insert(pattern.into(), tree_schema(rng, depth - 1));
                        }
                    }
                    schema.insert("patternProperties".into(), Value::Object(patterns));
                }
                9 => {
                    schema.insert("propertyNames".into(), tree_schema(rng, depth - 1));
                }
                10 => {
                    schema.insert("contains".into(), tree_schema(rng, depth - 1));
                }
                _ => {
                    schema.insert("uniqueItems".into(), json!(true));
                }
            }
        }
        Value::Object(schema)
    }

    /// A random instance whose member names the schemas above look at.
    fn instance(rng: &mut Rng, depth: u32) -> Value {
        let keys = ["a", "b", "ab", "ba", "c", &"a".repeat(100)];
        match rng.below(if depth == 0 { 4 } else { 6 }) {
            0 => json!(rng.below(1000)),
            1 => json!(rng.below(2) == 0),
            2 => Value::Null,
            3 => {
                let length = [0, 1, 5, 63, 64, 200, 1000][rng.below(7) as usize];
                json!("ab".repeat(length / 2 + 1)[..length])
            }
            4 => Value::Array(
                (0..rng.below(6))
                    .map(|_| instance(rng, depth - 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..rng.below(5))
                    .map(|_| {
                        (
                            keys[rng.below(6) as usize].to_owned(),
                            instance(rng, depth - 1),
                        )
                    })
                    .collect(),
            ),
        }
    }

    /// Steps a validation of `instance` takes, by whichever pass `pass`
    /// runs (the budget is the largest there is).
    fn steps_taken(pass: impl FnOnce()) -> u64 {
        let outer = STEPS.replace(u64::MAX);
        pass();
        u64::MAX - STEPS.replace(outer)
    }

    /// The bound the unmetered check rests on (`Schema::problems_in`): each
    /// of a tree schema's K subschemas applies at most once to each value
    /// and member name, so a check takes at most K × (2 × bytes + 1) steps,
    /// `bytes` being the instance's JSON text. Held to the validator as it
    /// runs, and the two ways of checking held to the same answers.
    #[test]
    fn a_schema_without_in_place_applicators_takes_steps_linear_in_its_input() {
        let mut rng = Rng(0x5eed_0f5c_4e3a);
        let mut largest = 0.0f64;
        let (mut valid, mut invalid) = (0, 0);
        for _ in 0..3000 {
            let raw = tree_schema(&mut rng, 3);
            let subschemas = Graph::of(&raw).expect("a valid schema").in_place.len() as u64;
            let schema = compile(raw.clone()).expect("compiles");
            let (plain, counted) = schema.unmetered.as_ref().expect("a tree schema");
            assert_eq!(*counted, subschemas);
            for _ in 0..5 {
                let value = instance(&mut rng, 4);
                let bytes = value.to_string().len();
                let bound = subschemas * (2 * bytes as u64 + 1);
                let mut metered = false;
                let checked = steps_taken(|| metered = schema.validator.is_valid(&value));
                assert!(checked <= bound, "{checked} > {bound}: {raw} on {value}");
                largest = largest.max(checked as f64 / bound as f64);
                assert_eq!(plain.is_valid(&value), metered, "{raw} on {value}");
                assert_eq!(
                    schema.problems_in(&value, bytes),
                    schema.problems(&value, budget_for(bytes)),
                    "{raw} on {value}"
                );
                if metered {
                    valid += 1;
                } else {
                    invalid += 1;
                }
            }
        }
        assert!(
            valid > 1000 && invalid > 1000,
            "{valid} valid, {invalid} invalid"
        );
        // The bound is not loose by orders of magnitude: some checks come
        // within a factor of four of it.
        assert!(largest > 0.25, "{largest}");
        // What the bound needs: with `$ref`s sharing a subschema, one
        // subschema applies to one value many times, and the same count
        // is far past it (2^12 applications of the last definition).
        let defs = doubling_refs(12, "allOf", json!({"type": "number"}));
        let raw = json!({"$defs": defs, "$ref": "#/$defs/d0"});
        let subschemas = Graph::of(&raw).expect("a valid schema").in_place.len() as u64;
        let schema = compile(raw).expect("compiles");
        let checked = steps_taken(|| {
            let _ = schema.validator.is_valid(&json!(0));
        });
        assert!(checked > 4096 && checked > subschemas * 3, "{checked}");
    }

    /// Which schemas are checked without the meter where it cannot run
    /// out: only trees.
    #[test]
    fn only_tree_schemas_get_an_unmetered_check() {
        let tree = json!({"type": "object", "properties": {"a": {"items": {"pattern": "x"}}}, "additionalProperties": false});
        assert!(compile(tree).expect("compiles").unmetered.is_some());
        for schema in [
            json!({"allOf": [{"type": "object"}]}),
            json!({"properties": {"a": {"anyOf": [{"type": "string"}, {"type": "number"}]}}}),
            json!({"items": {"not": {"type": "null"}}}),
            json!({"if": {"type": "object"}, "then": {"required": ["a"]}}),
            json!({"dependentSchemas": {"a": {"required": ["b"]}}}),
            json!({"dependencies": {"a": {"required": ["b"]}}}),
            json!({"$defs": {"s": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/s"}}}),
            json!({"unevaluatedProperties": false}),
            json!({"items": {"unevaluatedItems": false}}),
            json!({"contentMediaType": "application/json", "contentSchema": {"type": "object"}}),
            // A property of that name is enough: the rule errs towards the meter.
            json!({"properties": {"$ref": {"type": "string"}}}),
        ] {
            let compiled = compile(schema.clone()).expect("compiles");
            assert!(compiled.unmetered.is_none(), "{schema}");
        }
    }

    /// A tree schema whose bound does not fit its budget is checked under
    /// the meter, which still runs out: 200 patterns each applied to every
    /// member of 10,000 objects.
    #[test]
    fn a_tree_schema_past_its_bound_still_runs_out_of_steps() {
        let patterns: Map<String, Value> =
            (0..200).map(|i| (format!("^a|{i}"), json!({}))).collect();
        let schema = compile(json!({"items": {"patternProperties": patterns}})).expect("compiles");
        assert!(schema.unmetered.is_some());
        let value = Value::Array((0..10_000).map(|_| json!({"a": 0})).collect());
        let bytes = value.to_string().len();
        assert_eq!(
            schema.problems_in(&value, bytes),
            Err(BudgetExceeded {
                steps: budget_for(bytes)
            })
        );
        // Small enough, the same schema is checked without it, and passes.
        let value = json!([{"a": 0}]);
        assert_eq!(
            schema.problems_in(&value, value.to_string().len()),
            Ok(None)
        );
    }
}
