//! Plugin args (`deletionCost.args`, JSON) and the validated configuration
//! built from them. docs/deletion-cost.md has the table.

use serde::Deserialize;

/// The label (or annotation) a team sets on its pods to pick a tier.
pub const DEFAULT_TIER_LABEL: &str = "deletion-cost.wasmsched.io/tier";

/// Largest allowed `cap`: far inside int32, so every intermediate sum fits.
pub const MAX_CAP: i32 = 1_000_000;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Args {
    traffic: Option<bool>,
    connections: Option<bool>,
    warm_up: Option<bool>,
    warm_up_seconds: Option<u32>,
    warm_up_cost: Option<i32>,
    tiers: Option<bool>,
    tier_label: Option<String>,
    cap: Option<i32>,
}

/// The validated configuration: which rules run and their parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Active requests x 5 + cache hit rate x 100 + a response-time bonus,
    /// capped at 1000.
    pub traffic: bool,
    /// Active connections x 10, capped at 1000.
    pub connections: bool,
    /// Pods younger than `warm_up_seconds` get `warm_up_cost`.
    pub warm_up: bool,
    pub warm_up_seconds: u32,
    pub warm_up_cost: i32,
    /// Clamp into the range of the tier the pod names with `tier_label`.
    pub tiers: bool,
    pub tier_label: String,
    /// The final cost is clamped to `-cap..=cap`.
    pub cap: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            traffic: true,
            connections: true,
            warm_up: true,
            warm_up_seconds: 120,
            warm_up_cost: -50,
            tiers: true,
            tier_label: DEFAULT_TIER_LABEL.to_string(),
            cap: 1000,
        }
    }
}

fn field_error(field: &str, msg: impl std::fmt::Display) -> String {
    format!("deletion-cost args: field `{field}`: {msg}")
}

impl Config {
    /// Parses and validates the plugin args (`{}` or empty: the defaults).
    /// Every error names the field.
    pub fn parse(text: &str) -> Result<Config, String> {
        let text = if text.trim().is_empty() { "{}" } else { text };
        let args: Args =
            serde_json::from_str(text).map_err(|e| format!("deletion-cost args: {e}"))?;
        let mut cfg = Config::default();
        for (value, slot) in [
            (args.traffic, &mut cfg.traffic),
            (args.connections, &mut cfg.connections),
            (args.warm_up, &mut cfg.warm_up),
            (args.tiers, &mut cfg.tiers),
        ] {
            if let Some(v) = value {
                *slot = v;
            }
        }
        if let Some(cap) = args.cap {
            if !(1..=MAX_CAP).contains(&cap) {
                return Err(field_error(
                    "cap",
                    format!("must be in 1..={MAX_CAP}, got {cap}"),
                ));
            }
            cfg.cap = cap;
        }
        if let Some(s) = args.warm_up_seconds {
            cfg.warm_up_seconds = s;
        }
        if let Some(c) = args.warm_up_cost {
            if !(-cfg.cap..=0).contains(&c) {
                return Err(field_error(
                    "warmUpCost",
                    format!("must be in -cap..=0 ({}..=0), got {c}", -cfg.cap),
                ));
            }
            cfg.warm_up_cost = c;
        } else {
            cfg.warm_up_cost = cfg.warm_up_cost.max(-cfg.cap);
        }
        if let Some(l) = args.tier_label {
            if l.is_empty() {
                return Err(field_error("tierLabel", "must not be empty"));
            }
            cfg.tier_label = l;
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
        let c = Config::parse(r#"{"traffic": false, "warmUpSeconds": 30, "cap": 500}"#).unwrap();
        assert!(!c.traffic && c.connections);
        assert_eq!((c.warm_up_seconds, c.cap), (30, 500));
    }

    #[test]
    fn bad_args_name_the_field() {
        let e = Config::parse(r#"{"cap": 0}"#).unwrap_err();
        assert!(e.contains("`cap`") && e.contains("1..="), "{e}");
        let e = Config::parse(r#"{"warmUpCost": 5}"#).unwrap_err();
        assert!(e.contains("`warmUpCost`"), "{e}");
        let e = Config::parse(r#"{"trafic": true}"#).unwrap_err();
        assert!(e.contains("unknown field `trafic`"), "{e}");
        let e = Config::parse(r#"{"warmUpSeconds": -1}"#).unwrap_err();
        assert!(e.starts_with("deletion-cost args:"), "{e}");
    }

    #[test]
    fn a_small_cap_bounds_the_default_warm_up_cost() {
        let c = Config::parse(r#"{"cap": 20}"#).unwrap();
        assert_eq!(c.warm_up_cost, -20);
    }
}
