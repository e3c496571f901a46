//! A plain component: no toolcage contract, just exported functions of
//! every WIT type (see `wit/world.wit`). The tests check that each becomes
//! a tool with a precise schema, that arguments arrive converted and
//! results come back as JSON, and that what cannot be a tool is skipped
//! with a reason. Never ship it.

#[cfg(not(feature = "needs-import"))]
wit_bindgen::generate!({ world: "plain-types", path: "wit" });
#[cfg(feature = "needs-import")]
wit_bindgen::generate!({ world: "plain-needs", path: "wit" });

use exports::test::plain::counters::{self, CounterBorrow};
use exports::test::plain::geometry::{self, Point, Shape};
use exports::test::plain::text;

struct Plain;

impl Guest for Plain {
    fn bounds(
        a: u8,
        b: u16,
        c: u32,
        d: u64,
        e: i8,
        f: i16,
        g: i32,
        h: i64,
    ) -> (u8, u16, u32, u64, i8, i16, i32, i64) {
        (a, b, c, d, e, f, g, h)
    }

    fn floats(a: f32, b: f64) -> Vec<f64> {
        vec![f64::from(a), b, f64::from(a) + b]
    }

    fn chars(c: char) -> String {
        format!("{c} U+{:04X}", u32::from(c))
    }

    fn bytes(data: Vec<u8>) -> Vec<u8> {
        data.into_iter().rev().collect()
    }

    fn colors(c: Color, p: Perms) -> (Color, Perms) {
        (c, p)
    }

    fn nested(o: Options, shapes: Vec<Figure>, maybe: Option<Pt>) -> Option<Vec<Option<Pt>>> {
        if o.limit == 0 {
            return None;
        }
        let mut out: Vec<Option<Pt>> = shapes
            .iter()
            .map(|s| match s {
                Figure::Dot => None,
                Figure::Circle(r) | Figure::Square(r) => Some(Pt {
                    x: *r as i32,
                    y: o.tags.len() as i32,
                }),
            })
            .collect();
        out.push(maybe);
        out.truncate(usize::from(o.limit));
        Some(out)
    }

    fn divide(a: i32, b: i32) -> Result<i32, String> {
        if b == 0 {
            return Err(format!("cannot divide {a} by zero"));
        }
        a.checked_div(b).ok_or_else(|| "overflow".to_owned())
    }

    fn fail_record() -> Result<(), Options> {
        Err(Options {
            limit: 7,
            label: Some("broken".into()),
            tags: vec!["a".into()],
        })
    }

    fn nothing() {}

    fn all_flags(n: u32) -> Vec<Wide> {
        vec![Wide::all(); n as usize]
    }

    fn greet(name: String) -> String {
        #[cfg(feature = "needs-import")]
        let name = format!("{name}{}", test::plain::elsewhere::fetch());
        format!("Hello, {name}!")
    }

    #[allow(clippy::empty_loop)]
    fn spin() {
        loop {}
    }
}

impl geometry::Guest for Plain {
    fn translate(p: Point, dx: i32, dy: i32) -> Point {
        Point {
            x: p.x.wrapping_add(dx),
            y: p.y.wrapping_add(dy),
        }
    }

    fn area(s: Shape) -> f64 {
        match s {
            Shape::Circle(r) => std::f64::consts::PI * r * r,
            Shape::Square(side) => side * side,
            Shape::Dot => 0.0,
        }
    }

    fn echo(text: String) -> String {
        format!("geometry: {text}")
    }
}

impl text::Guest for Plain {
    fn echo(text: String) -> String {
        format!("text: {text}")
    }
}

struct Counter(u32);

impl counters::GuestCounter for Counter {
    fn new(start: u32) -> Self {
        Counter(start)
    }

    fn get(&self) -> u32 {
        self.0
    }
}

impl counters::Guest for Plain {
    type Counter = Counter;

    fn make(start: u32) -> counters::Counter {
        counters::Counter::new(Counter(start))
    }

    fn version() -> String {
        "1".into()
    }
}

// Keeps the borrow type in use, as a tool that took one would.
#[allow(dead_code)]
fn _borrow(_: CounterBorrow<'_>) {}

export!(Plain);
