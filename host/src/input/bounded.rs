//! A `serde_json::Value` built from YAML while counting how large the
//! document would be written out in full. Aliases repeat parts of a
//! document; a small file whose aliases repeat a large string or mapping
//! (an "alias bomb") is refused once it would be larger than a file may
//! be ([`super::Limits::file_bytes`]), rather than filling memory.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::bytes;

thread_local! {
    /// (bytes the document parsed on this thread may still grow by, the
    /// limit), while [`with_limit`] runs.
    static BUDGET: Cell<(u64, u64)> = const { Cell::new((u64::MAX, u64::MAX)) };
}

/// The size charged for a number, boolean or null.
const SCALAR: u64 = 8;

/// The start of the error a [`Bounded`] value gives past its limit.
pub const EXPANDS_PAST: &str = "aliases expand the document past the limit of";

/// Runs `f`, in which the [`Bounded`] values parsed together may be at
/// most `limit` bytes written out.
pub fn with_limit<R>(limit: u64, f: impl FnOnce() -> R) -> R {
    struct Restore((u64, u64));
    impl Drop for Restore {
        fn drop(&mut self) {
            BUDGET.set(self.0);
        }
    }
    let _restore = Restore(BUDGET.replace((limit, limit)));
    f()
}

fn charge<E: de::Error>(n: u64) -> Result<(), E> {
    let (left, limit) = BUDGET.get();
    match left.checked_sub(n) {
        Some(left) => {
            BUDGET.set((left, limit));
            Ok(())
        }
        None => Err(E::custom(format!(
            "{EXPANDS_PAST} {} on one file",
            bytes(limit)
        ))),
    }
}

/// A JSON value whose size was charged while it was parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Bounded(pub Value);

impl<'de> Deserialize<'de> for Bounded {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(BoundedVisitor).map(Bounded)
    }
}

struct BoundedVisitor;

impl<'de> Visitor<'de> for BoundedVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        charge(SCALAR).map(|()| Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        charge(SCALAR).map(|()| v.into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        charge(SCALAR).map(|()| v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        charge(SCALAR).map(|()| Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        charge(v.len() as u64 + 2).map(|()| Value::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        charge(v.len() as u64 + 2).map(|()| Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        charge(SCALAR).map(|()| Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Bounded::deserialize(d).map(|b| b.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        charge(2)?;
        let mut out = Vec::new();
        while let Some(Bounded(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        charge(2)?;
        let mut out = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            charge(k.len() as u64 + 2)?;
            let Bounded(v) = map.next_value()?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}
