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
//! The code is one file (about 800 lines; its tests are in `tests.rs`):
//! the wrapping, the `$ref` rewrite and the graph check keep one invariant
//! together (every subschema is charged a step before it runs, however it
//! is reached, unless it is part of a tree whose bound fits the budget),
//! and each is wrong without the others.

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
/// path, or to a value that is not part of the instance: a schema with any
/// of them in any subschema (its `$defs` included) is always checked under
/// the meter.
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
        let unmetered = if graph.is_tree() {
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
    fn problems(&self, instance: &Value, budget: u64) -> Result<Option<String>, BudgetExceeded> {
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
    /// Whether some subschema uses a keyword of [`NOT_A_TREE`].
    not_a_tree: bool,
}

impl Graph {
    /// Whether every subschema is reached from the root one way only: no
    /// in-place applicator, no `$ref`, none of [`NOT_A_TREE`].
    fn is_tree(&self) -> bool {
        !self.not_a_tree && self.in_place.iter().all(Vec::is_empty)
    }

    /// Walk `root` (iteratively): count subschemas and patterns, check
    /// `$ref`s and `$id`s, and record the in-place edges.
    fn of(root: &Value) -> Result<Graph, String> {
        // Every subschema, by its JSON pointer (tokens escaped as in a
        // pointer), with the pointers of its in-place children and refs.
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut anchors: HashMap<String, usize> = HashMap::new();
        let mut edges: Vec<Vec<String>> = Vec::new();
        let mut patterns = 0usize;
        let mut not_a_tree = false;
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
                not_a_tree |= NOT_A_TREE.contains(&keyword.as_str());
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
        Ok(Graph {
            in_place,
            not_a_tree,
        })
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
mod tests;
