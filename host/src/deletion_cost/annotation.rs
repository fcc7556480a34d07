//! The pod-deletion-cost annotation: upstream's parsing rules, and which
//! costs this controller owns.
//!
//! Ownership is marked with a second annotation holding the value the
//! controller wrote. A cost is ours only while both agree: when a person
//! or another controller changes the cost, the values differ and the pod
//! is left alone from then on (`kubectl annotate --overwrite` is enough to
//! take a pod over; deleting both annotations hands it back).

use std::collections::BTreeMap;

/// The annotation the ReplicaSet controller reads.
pub const COST: &str = "controller.kubernetes.io/pod-deletion-cost";
/// Marks a cost this controller wrote (its value is the cost written).
pub const MANAGED: &str = "deletion-cost.wasmsched.io/managed-value";

/// Why an annotation value is not a valid deletion cost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {COST} {value:?}: {cause}")]
pub struct InvalidCost {
    pub value: String,
    pub cause: &'static str,
}

/// Parses a cost as the API server validates it (1.21+) and the ReplicaSet
/// controller reads it: a decimal int32 with no `+` and no leading zeros.
pub fn parse(value: &str) -> Result<i32, InvalidCost> {
    let bad = |cause| InvalidCost {
        value: value.to_string(),
        cause,
    };
    let first_ok = match value.as_bytes() {
        [] => false,
        [b'-', ..] => true,
        [b'0'] => true,
        [b'1'..=b'9', ..] => true,
        _ => false,
    };
    if !first_ok {
        return Err(bad(
            "must be a decimal integer without `+` or leading zeros",
        ));
    }
    value
        .parse::<i64>()
        .map_err(|_| bad("not an integer"))
        .and_then(|v| i32::try_from(v).map_err(|_| bad("outside the int32 range")))
}

/// The cost the ReplicaSet controller uses for a pod: 0 when absent or
/// invalid (upstream ignores the parse error).
pub fn effective(annotations: &BTreeMap<String, String>) -> i32 {
    annotations
        .get(COST)
        .and_then(|v| parse(v).ok())
        .unwrap_or(0)
}

/// Who decides a pod's cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// No cost is set: the controller may set one.
    Free,
    /// The controller wrote the current value.
    Ours(i32),
    /// Someone else set the cost (the raw value): never touched.
    Foreign(String),
}

impl Ownership {
    pub fn of(annotations: &BTreeMap<String, String>) -> Self {
        match (annotations.get(COST), annotations.get(MANAGED)) {
            (None, _) => Ownership::Free,
            (Some(c), Some(m)) if c == m => match parse(c) {
                Ok(v) => Ownership::Ours(v),
                Err(_) => Ownership::Foreign(c.clone()),
            },
            (Some(c), _) => Ownership::Foreign(c.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_upstream() {
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("-50"), Ok(-50));
        assert_eq!(parse("2147483647"), Ok(i32::MAX));
        assert_eq!(parse("-2147483648"), Ok(i32::MIN));
        for bad in ["", "+1", "007", "1.5", "abc", " 1", "2147483648", "-"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let e = parse("2147483648").unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid controller.kubernetes.io/pod-deletion-cost \"2147483648\": outside the int32 range"
        );
    }

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn ownership_needs_both_annotations_to_agree() {
        assert_eq!(Ownership::of(&ann(&[])), Ownership::Free);
        assert_eq!(Ownership::of(&ann(&[(MANAGED, "5")])), Ownership::Free);
        assert_eq!(
            Ownership::of(&ann(&[(COST, "5"), (MANAGED, "5")])),
            Ownership::Ours(5)
        );
        assert_eq!(
            Ownership::of(&ann(&[(COST, "9"), (MANAGED, "5")])),
            Ownership::Foreign("9".into())
        );
        assert_eq!(
            Ownership::of(&ann(&[(COST, "9")])),
            Ownership::Foreign("9".into())
        );
    }

    #[test]
    fn effective_cost_defaults_to_zero() {
        assert_eq!(effective(&ann(&[(COST, "x")])), 0);
        assert_eq!(effective(&ann(&[(COST, "-3")])), -3);
        assert_eq!(effective(&ann(&[])), 0);
    }
}
