//! The documented formula (docs/deletion-cost.md), as a pure function of
//! the pod's metrics, age and tier, so it is tested without a host.

use crate::args::Config;

/// Metric names the formula reads (the controller's `queries` and
/// `podMetrics.metrics` keys).
pub const ACTIVE_REQUESTS: &str = "active_requests";
/// A ratio in 0..=1.
pub const CACHE_HIT_RATE: &str = "cache_hit_rate";
/// Seconds, as Prometheus conventions have it.
pub const AVG_RESPONSE_TIME: &str = "avg_response_time_seconds";
pub const ACTIVE_CONNECTIONS: &str = "active_connections";

/// Each term's own cap.
pub const TERM_CAP: f64 = 1000.0;
pub const PER_REQUEST: f64 = 5.0;
pub const CACHE_WEIGHT: f64 = 100.0;
pub const PER_CONNECTION: f64 = 10.0;
/// Response-time bonus: (below, points), first match wins.
pub const RESPONSE_BONUS: [(f64, f64); 2] = [(0.1, 50.0), (0.5, 20.0)];

/// A team's declared range for its pods' costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// -100..=-1: removed before pods without a cost.
    DeleteFirst,
    /// Exactly 0, the Kubernetes default.
    Default,
    /// 1..=100.
    Medium,
    /// 100..=1000.
    High,
}

impl Tier {
    pub const NAMES: &'static str = "delete-first, default, medium or high";

    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "delete-first" => Some(Tier::DeleteFirst),
            "default" => Some(Tier::Default),
            "medium" => Some(Tier::Medium),
            "high" => Some(Tier::High),
            _ => None,
        }
    }

    pub fn range(self) -> (i32, i32) {
        match self {
            Tier::DeleteFirst => (-100, -1),
            Tier::Default => (0, 0),
            Tier::Medium => (1, 100),
            Tier::High => (100, 1000),
        }
    }
}

/// What the formula reads of one pod. Metrics are already validated
/// (finite, >= 0, the hit rate <= 1); absent ones are `None`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inputs {
    pub active_requests: Option<f64>,
    pub cache_hit_rate: Option<f64>,
    pub avg_response_time_seconds: Option<f64>,
    pub active_connections: Option<f64>,
    pub age_seconds: i64,
    pub tier: Option<Tier>,
}

/// The terms that made a cost (for logs and tests).
#[derive(Clone, Debug, PartialEq)]
pub struct Breakdown {
    /// The traffic term, when the rule is on and the pod has any of its
    /// metrics.
    pub traffic: Option<f64>,
    pub connections: Option<f64>,
    /// The pod is still warming up: its cost is the warm-up cost.
    pub warming_up: bool,
    pub tier: Option<Tier>,
    /// `None`: no rule applied (no opinion).
    pub cost: Option<i32>,
}

/// Response-time bonus points.
pub fn response_bonus(seconds: f64) -> f64 {
    RESPONSE_BONUS
        .iter()
        .find(|(below, _)| seconds < *below)
        .map_or(0.0, |(_, points)| *points)
}

/// The traffic term: 5 per active request, 100 x cache hit rate, the
/// response-time bonus; capped at 1000.
pub fn traffic(i: &Inputs) -> Option<f64> {
    if i.active_requests.is_none()
        && i.cache_hit_rate.is_none()
        && i.avg_response_time_seconds.is_none()
    {
        return None;
    }
    let t = PER_REQUEST * i.active_requests.unwrap_or(0.0)
        + CACHE_WEIGHT * i.cache_hit_rate.unwrap_or(0.0)
        + i.avg_response_time_seconds.map_or(0.0, response_bonus);
    Some(t.min(TERM_CAP))
}

/// The connections term: 10 per active connection, capped at 1000.
pub fn connections(i: &Inputs) -> Option<f64> {
    i.active_connections
        .map(|c| (PER_CONNECTION * c).min(TERM_CAP))
}

/// The whole formula: the enabled terms summed, or the warm-up cost for a
/// young pod; then the tier's range; then `-cap..=cap`; rounded to the
/// nearest integer.
pub fn compute(cfg: &Config, i: &Inputs) -> Breakdown {
    let traffic = cfg.traffic.then(|| traffic(i)).flatten();
    let connections = cfg.connections.then(|| connections(i)).flatten();
    let warming_up = cfg.warm_up && i.age_seconds < i64::from(cfg.warm_up_seconds);
    let tier = if cfg.tiers { i.tier } else { None };
    let base: Option<f64> = if warming_up {
        Some(f64::from(cfg.warm_up_cost))
    } else {
        match (traffic, connections) {
            (None, None) => None,
            (t, c) => Some(t.unwrap_or(0.0) + c.unwrap_or(0.0)),
        }
    };
    let ranged = match (base, tier) {
        (None, None) => None,
        (b, Some(t)) => {
            let (lo, hi) = t.range();
            Some(b.unwrap_or(0.0).clamp(f64::from(lo), f64::from(hi)))
        }
        (b, None) => b,
    };
    let cap = f64::from(cfg.cap);
    // Within -cap..=cap (cap <= 1e6) the cast cannot saturate.
    let cost = ranged.map(|v| v.clamp(-cap, cap).round() as i32);
    Breakdown {
        traffic,
        connections,
        warming_up,
        tier,
        cost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> Inputs {
        Inputs {
            age_seconds: 3600,
            ..Default::default()
        }
    }

    #[test]
    fn traffic_term_matches_the_documented_formula() {
        let i = Inputs {
            active_requests: Some(12.0),
            cache_hit_rate: Some(0.85),
            avg_response_time_seconds: Some(0.08),
            ..inputs()
        };
        // 12 x 5 + 0.85 x 100 + 50
        assert_eq!(compute(&Config::default(), &i).cost, Some(195));
        let slower = Inputs {
            avg_response_time_seconds: Some(0.3),
            ..i.clone()
        };
        assert_eq!(compute(&Config::default(), &slower).cost, Some(165));
        let slow = Inputs {
            avg_response_time_seconds: Some(0.5),
            ..i
        };
        assert_eq!(compute(&Config::default(), &slow).cost, Some(145));
    }

    #[test]
    fn terms_are_capped_and_summed_then_the_total_capped() {
        let i = Inputs {
            active_requests: Some(400.0),
            active_connections: Some(30.0),
            ..inputs()
        };
        let b = compute(&Config::default(), &i);
        assert_eq!((b.traffic, b.connections), (Some(1000.0), Some(300.0)));
        assert_eq!(b.cost, Some(1000));
        let cfg = Config {
            cap: 5000,
            ..Config::default()
        };
        assert_eq!(compute(&cfg, &i).cost, Some(1300));
    }

    #[test]
    fn connections_alone() {
        let i = Inputs {
            active_connections: Some(7.0),
            ..inputs()
        };
        assert_eq!(compute(&Config::default(), &i).cost, Some(70));
        let off = Config {
            connections: false,
            ..Config::default()
        };
        assert_eq!(compute(&off, &i).cost, None);
    }

    #[test]
    fn young_pods_get_the_warm_up_cost() {
        let i = Inputs {
            active_requests: Some(50.0),
            age_seconds: 30,
            ..Default::default()
        };
        let b = compute(&Config::default(), &i);
        assert!(b.warming_up);
        assert_eq!(b.cost, Some(-50));
        let at_boundary = Inputs {
            age_seconds: 120,
            ..i.clone()
        };
        assert_eq!(compute(&Config::default(), &at_boundary).cost, Some(250));
        let off = Config {
            warm_up: false,
            ..Config::default()
        };
        assert_eq!(compute(&off, &i).cost, Some(250));
    }

    #[test]
    fn tiers_clamp_into_their_range() {
        let cfg = Config::default();
        let busy = Inputs {
            active_requests: Some(100.0),
            ..inputs()
        };
        let with = |tier, i: &Inputs| {
            compute(
                &cfg,
                &Inputs {
                    tier: Some(tier),
                    ..i.clone()
                },
            )
            .cost
        };
        assert_eq!(with(Tier::Medium, &busy), Some(100));
        assert_eq!(with(Tier::High, &busy), Some(500));
        assert_eq!(with(Tier::DeleteFirst, &busy), Some(-1));
        assert_eq!(with(Tier::Default, &busy), Some(0));
        // A tier alone gives an opinion: the range's value nearest 0.
        assert_eq!(with(Tier::High, &inputs()), Some(100));
        assert_eq!(with(Tier::DeleteFirst, &inputs()), Some(-1));
        let warming = Inputs {
            age_seconds: 1,
            ..inputs()
        };
        assert_eq!(with(Tier::DeleteFirst, &warming), Some(-50));
    }

    #[test]
    fn no_metrics_no_tier_no_opinion() {
        assert_eq!(compute(&Config::default(), &inputs()).cost, None);
    }

    #[test]
    fn rounds_to_nearest() {
        let i = Inputs {
            cache_hit_rate: Some(0.125),
            ..inputs()
        };
        assert_eq!(compute(&Config::default(), &i).cost, Some(13));
    }
}
