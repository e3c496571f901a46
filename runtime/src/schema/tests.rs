//! `schema`'s tests: the limits, the step budget, and the tree schemas
//! checked without it.

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
    let schema = compile(
        json!({"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}),
    )
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
        // In a definition nothing refers to: still not a tree.
        json!({"$defs": {"unused": {"unevaluatedProperties": false}}}),
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
    let patterns: Map<String, Value> = (0..200).map(|i| (format!("^a|{i}"), json!({}))).collect();
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
