//! Structured-random plugin args for the built-in plugins' fuzz tests
//! (`plugins/*/tests/fuzz_args.rs`, which include this file): JSON
//! objects of the plugin's own field names with values right, nearly
//! right and wrong, any JSON value, and text mutations of both. A fixed
//! seed and case count keep CI deterministic; `WASMSCHED_FUZZ_CASES` and
//! `WASMSCHED_FUZZ_SEED` override them for a long run by hand.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use serde_json::{json, Map, Value};

pub fn runner() -> TestRunner {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    TestRunner::new(Config {
        cases: env("WASMSCHED_FUZZ_CASES", 500) as u32,
        rng_seed: RngSeed::Fixed(env("WASMSCHED_FUZZ_SEED", 0x5eed)),
        failure_persistence: None,
        ..Config::default()
    })
}

#[rustfmt::skip]
const WORDS: &[&str] = &[
    "", "0", "-1", "1", "100", "1000", "1e3", "binpack", "spread", "origin", "tokens", "exact",
    "true", "null", "A100", "nvidia-a100", "gpu.nvidia.com/model", "tier", "zone", "\u{0}",
    "\n", "\u{1b}[31m",
];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop::sample::select(WORDS).prop_map(|w| json!(w)),
        2 => any::<i64>().prop_map(|i| json!(i)),
        1 => prop_oneof![Just(0i64), Just(-1), Just(i64::MAX), Just(i64::MIN), Just(u32::MAX as i64 + 1)]
            .prop_map(|i| json!(i)),
        1 => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
        1 => "\\PC{0,10}".prop_map(Value::String),
    ]
}

fn value(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let key =
        prop_oneof![4 => prop::sample::select(keys).prop_map(str::to_string), 1 => "\\PC{0,6}"];
    scalar().prop_recursive(4, 32, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Args text: mostly an object of `keys`, sometimes any value, sometimes
/// with bytes cut, repeated or inserted.
pub fn args_text(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    let object = prop::collection::btree_map(prop::sample::select(keys), value(keys), 0..8)
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()));
    (
        prop_oneof![4 => object, 1 => value(keys)],
        prop::collection::vec((any::<usize>(), 0..4u8), 0..3),
    )
        .prop_map(|(v, cuts)| {
            let mut text = v.to_string();
            for (at, op) in cuts {
                let mut at = at % (text.len() + 1);
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                match op {
                    0 => text.truncate(at),
                    1 => text.insert_str(at, "{\"\":[,"),
                    2 => text.insert(at, '\u{0}'),
                    _ => {
                        let tail = text[at..].to_string();
                        text.push_str(&tail);
                    }
                }
            }
            text
        })
}
