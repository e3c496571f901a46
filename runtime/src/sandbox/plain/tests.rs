//! The WIT-to-tools boundary: names, skipped functions and their reasons,
//! the depth and size bounds, and the integer conversions, from WIT text.

use super::*;

/// The tools of world `w` in the WIT `text`.
fn tools(text: &str) -> PlainTools {
    let mut resolve = Resolve::new();
    let package = resolve
        .push_str("test.wit", text)
        .expect("the test WIT parses");
    let world = resolve
        .select_world(&[package], Some("w"))
        .expect("world w");
    PlainTools::from_world(&resolve, world, &PlainRules::default())
}

fn names(tools: &PlainTools) -> Vec<&str> {
    tools.functions.iter().map(|f| f.tool.as_str()).collect()
}

fn skipped<'a>(tools: &'a PlainTools, function: &str) -> &'a str {
    tools
        .skipped
        .iter()
        .find(|s| s.function.ends_with(function))
        .map(|s| s.reason.as_str())
        .unwrap_or_else(|| panic!("{function} is not skipped: {:?}", tools.skipped))
}

#[test]
fn names_are_bare_then_interface_then_package_qualified() {
    let t = tools(
        "package a:b@1.0.0;
         interface x { f: func(); g: func(); h: func(); }
         interface y { f: func(); }
         world w { export g: func(); export x; export y; }",
    );
    // `g` is world-level and in `x`: the world's keeps its name.
    assert_eq!(names(&t), ["g", "x.f", "x.g", "h", "y.f"]);
}

#[test]
fn same_interface_name_in_two_packages_gets_the_package() {
    let mut resolve = Resolve::new();
    resolve
        .push_str("other.wit", "package c:d; interface x { f: func(); }")
        .expect("parses");
    let package = resolve
        .push_str(
            "test.wit",
            "package a:b; interface x { f: func(); } world w { export x; export c:d/x; }",
        )
        .expect("parses");
    let world = resolve.select_world(&[package], Some("w")).expect("w");
    let t = PlainTools::from_world(&resolve, world, &PlainRules::default());
    assert_eq!(names(&t), ["a.b.x.f", "c.d.x.f"]);
}

#[test]
fn an_exponential_type_is_skipped_not_expanded() {
    // Each record holds the previous one twice: 2^30 nodes inlined.
    let mut wit = String::from("package a:b; world w { record r0 { v: u8 }\n");
    for i in 1..=30 {
        wit.push_str(&format!("record r{i} {{ a: r{}, b: r{} }}\n", i - 1, i - 1));
    }
    wit.push_str("export big: func(x: r30); export small: func(x: r3); }");
    let t = tools(&wit);
    assert_eq!(names(&t), ["small"]);
    assert!(skipped(&t, "big").contains("more than 4096 nodes"));
}

#[test]
fn a_type_nested_too_deep_is_skipped_even_when_built_shallow_first() {
    // `deep` is first built shallow (by `shallow`), then used 40 levels
    // down: the cached shape must still count its own height.
    let mut wit = String::from("package a:b; world w { record l0 { v: u8 }\n");
    for i in 1..=40 {
        wit.push_str(&format!("record l{i} {{ v: l{} }}\n", i - 1));
    }
    wit.push_str("record m0 { v: l40 }\n");
    for i in 1..=40 {
        wit.push_str(&format!("record m{i} {{ v: m{} }}\n", i - 1));
    }
    wit.push_str("export shallow: func(x: l40); export deep: func(x: m40); }");
    let t = tools(&wit);
    assert_eq!(names(&t), ["shallow"]);
    assert!(skipped(&t, "deep").contains("nest more than 64 deep"));
}

#[test]
fn what_has_no_json_form_is_skipped_with_the_reason() {
    let t = tools(
        "package a:b;
         interface r { resource res { constructor(); m: func(); } take: func(x: borrow<res>); ok: func(); }
         world w {
             export oo: func(x: option<option<u8>>);
             export fut: func(x: future<u8>);
             export later: async func();
             export fine: func(x: option<u8>) -> result<_, string>;
             export r;
         }",
    );
    assert_eq!(names(&t), ["fine", "ok"]);
    assert!(skipped(&t, "oo").contains("option<option<"));
    assert!(skipped(&t, "fut").contains("future"));
    assert!(skipped(&t, "later").contains("async"));
    assert!(skipped(&t, "#take").contains("resource `res`"));
    assert!(skipped(&t, "[method]res.m").contains("resource method"));
}

#[test]
fn wasi_entry_points_are_not_tools() {
    let mut resolve = Resolve::new();
    resolve
        .push_str(
            "run.wit",
            "package wasi:cli@0.2.0; interface run { run: func() -> result; }",
        )
        .expect("parses");
    let package = resolve
        .push_str(
            "test.wit",
            "package a:b; world w { export wasi:cli/run@0.2.0; export f: func(); }",
        )
        .expect("parses");
    let world = resolve.select_world(&[package], Some("w")).expect("w");
    let t = PlainTools::from_world(&resolve, world, &PlainRules::default());
    assert_eq!(names(&t), ["f"]);
    assert!(skipped(&t, "#run").contains("WASI entry point"));
}

#[test]
fn integers_convert_exactly_at_their_bounds() {
    use shape::Int;
    let cases: &[(Int, Value, Option<Val>)] = &[
        (Int::U8, json!(255), Some(Val::U8(255))),
        (Int::U8, json!(256), None),
        (Int::U8, json!(-1), None),
        (Int::U8, json!(3.0), Some(Val::U8(3))),
        (Int::U8, json!(3.5), None),
        (Int::S8, json!(-128), Some(Val::S8(-128))),
        (Int::S8, json!(128), None),
        (Int::U64, json!(u64::MAX), Some(Val::U64(u64::MAX))),
        (Int::U64, json!(-1), None),
        (Int::S64, json!(i64::MIN), Some(Val::S64(i64::MIN))),
        (Int::S64, json!(u64::MAX), None),
        (Int::U32, json!("1"), None),
        (Int::U32, json!(1e300), None),
    ];
    for (int, value, expected) in cases {
        let got = value::to_val(value::At::Root, &Shape::Int(*int), value).ok();
        assert_eq!(&got, expected, "{int:?} from {value}");
    }
}

#[test]
fn paths_name_keys_and_indices() {
    use value::At;
    let root = At::Root;
    let key = At::Key(&root, "options");
    let index = At::Index(&key, 2);
    let odd = At::Key(&index, "a b\"c");
    assert_eq!(odd.to_string(), r#"$.options[2]["a b\"c"]"#);
}

/// The result conversion this module had before it wrote JSON text
/// directly: a `serde_json::Value` tree, the reference the writer must
/// match byte for byte.
fn reference(shape: &Shape, val: &Val) -> Value {
    use base64::Engine as _;
    let case = |name: &str, shape: Option<&Shape>, payload: Option<&Val>| match (shape, payload) {
        (Some(shape), Some(payload)) => json!({ name: reference(shape, payload) }),
        _ => Value::String(name.to_owned()),
    };
    match (shape, val) {
        (_, Val::Bool(b)) => Value::Bool(*b),
        (_, Val::U8(n)) => Value::from(*n),
        (_, Val::U32(n)) => Value::from(*n),
        (_, Val::S64(n)) => Value::from(*n),
        (_, Val::Float32(n)) => {
            serde_json::Number::from_f64(f64::from(*n)).map_or(Value::Null, Value::Number)
        }
        (_, Val::Float64(n)) => serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number),
        (_, Val::Char(c)) => Value::String(c.to_string()),
        (_, Val::String(s)) => Value::String(s.clone()),
        (Shape::Bytes, Val::List(items)) => Value::String(
            base64::engine::general_purpose::STANDARD.encode(
                items
                    .iter()
                    .map(|i| match i {
                        Val::U8(b) => *b,
                        _ => 0,
                    })
                    .collect::<Vec<u8>>(),
            ),
        ),
        (Shape::List(item), Val::List(items)) => {
            Value::Array(items.iter().map(|v| reference(item, v)).collect())
        }
        (Shape::Option(inner), Val::Option(v)) => {
            v.as_deref().map_or(Value::Null, |v| reference(inner, v))
        }
        (Shape::Record { fields, .. }, Val::Record(values)) => Value::Object(
            fields
                .iter()
                .zip(values)
                .map(|(f, (name, v))| (name.clone(), reference(&f.shape, v)))
                .collect(),
        ),
        (Shape::Tuple(shapes), Val::Tuple(values)) => Value::Array(
            shapes
                .iter()
                .zip(values)
                .map(|(s, v)| reference(s, v))
                .collect(),
        ),
        (_, Val::Enum(name)) => Value::String(name.clone()),
        (_, Val::Flags(names)) => Value::Array(names.iter().cloned().map(Value::String).collect()),
        (Shape::Variant { cases, .. }, Val::Variant(name, payload)) => case(
            name,
            cases
                .iter()
                .find(|c| c.name == *name)
                .and_then(|c| c.shape.as_deref()),
            payload.as_deref(),
        ),
        (Shape::Result { ok, err }, Val::Result(r)) => match r {
            Ok(p) => case("ok", ok.as_deref(), p.as_deref()),
            Err(p) => case("err", err.as_deref(), p.as_deref()),
        },
        (Shape::Map(_, item), Val::Map(pairs)) => Value::Object(
            pairs
                .iter()
                .map(|(k, v)| match k {
                    Val::String(k) => (k.clone(), reference(item, v)),
                    _ => unreachable!("string keys in this test"),
                })
                .collect(),
        ),
        _ => Value::Null,
    }
}

#[test]
fn results_are_written_exactly_as_serde_json_writes_their_tree() {
    use shape::{Case, Field};
    let arc = Arc::new;
    let field = |name: &str, shape: Shape| Field {
        name: name.into(),
        shape: arc(shape),
        docs: None,
    };
    let record = Shape::Record {
        fields: vec![
            field("zeta", Shape::String),
            field("alpha", Shape::F32),
            field("mid", Shape::Option(arc(Shape::Bytes))),
        ],
        docs: None,
    };
    let variant = Shape::Variant {
        cases: vec![
            Case {
                name: "dot".into(),
                shape: None,
                docs: None,
            },
            Case {
                name: "circle".into(),
                shape: Some(arc(Shape::F64)),
                docs: None,
            },
        ],
        docs: None,
    };
    let s = |text: &str| Val::String(text.into());
    let cases: Vec<(Shape, Val)> = vec![
        (Shape::String, s("plain")),
        (
            Shape::String,
            s("quote \" slash \\ nl \n tab \t bell \u{7} del \u{7f} é 😀"),
        ),
        (Shape::Char, Val::Char('"')),
        (Shape::F64, Val::Float64(f64::NAN)),
        (Shape::F64, Val::Float64(-1.5e-300)),
        (Shape::F32, Val::Float32(1.1)),
        (Shape::Int(shape::Int::S64), Val::S64(i64::MIN)),
        (
            Shape::Bytes,
            Val::List(vec![Val::U8(0), Val::U8(255), Val::U8(7), Val::U8(1)]),
        ),
        (
            record,
            Val::Record(vec![
                ("zeta".into(), s("z\"")),
                ("alpha".into(), Val::Float32(0.5)),
                (
                    "mid".into(),
                    Val::Option(Some(Box::new(Val::List(vec![Val::U8(104), Val::U8(105)])))),
                ),
            ]),
        ),
        (
            Shape::List(arc(variant)),
            Val::List(vec![
                Val::Variant("dot".into(), None),
                Val::Variant("circle".into(), Some(Box::new(Val::Float64(2.5)))),
            ]),
        ),
        (
            Shape::Result {
                ok: Some(arc(Shape::Result {
                    ok: Some(arc(Shape::Bool)),
                    err: None,
                })),
                err: Some(arc(Shape::String)),
            },
            Val::Result(Ok(Some(Box::new(Val::Result(Err(None)))))),
        ),
        (
            Shape::Flags {
                names: vec!["read".into(), "wr\"ite".into()],
                docs: None,
            },
            Val::Flags(vec!["read".into(), "wr\"ite".into()]),
        ),
        (
            Shape::Map(arc(Shape::String), arc(Shape::Int(shape::Int::U32))),
            Val::Map(vec![
                (s("b"), Val::U32(1)),
                (s("a"), Val::U32(2)),
                (s("b"), Val::U32(3)),
                (s("\u{1}"), Val::U32(4)),
            ]),
        ),
        (
            Shape::Tuple(vec![
                arc(Shape::Int(shape::Int::U8)),
                arc(Shape::Option(arc(Shape::String))),
            ]),
            Val::Tuple(vec![Val::U8(1), Val::Option(None)]),
        ),
    ];
    for (shape, val) in &cases {
        let expected = reference(shape, val).to_string();
        let mut text = value::Text::default();
        value::write_json(shape, val, &mut text).expect("a text never fills");
        assert_eq!(text.0, expected, "{val:?}");
        let mut measure = value::Measure::new(usize::MAX);
        value::write_json(shape, val, &mut measure).expect("no cap");
        assert_eq!(measure.len, expected.len(), "{val:?}");
        let specials = expected
            .bytes()
            .filter(|b| matches!(b, b'"' | b'\\'))
            .count();
        assert_eq!(measure.specials, specials, "{val:?}");
        // Measuring stops at the first byte past the cap.
        let mut short = value::Measure::new(expected.len() - 1);
        assert_eq!(value::write_json(shape, val, &mut short), Err(value::Over));
    }
}
