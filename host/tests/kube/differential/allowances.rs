//! The differences between kube-scheduler 1.20.2 and wasmsched that come
//! from newer upstream releases (wasmsched follows current upstream),
//! each a named allowance with its reason, as listed in
//! docs/compatibility.md. Anything else that differs is a failure.
//!
//! Reason strings are mapped from 1.20's wording to today's. Scores are
//! recomputed with 1.20's formulas for the three plugins that changed;
//! every other plugin's normalized score is taken from wasmsched's
//! `--explain` output, with kube-scheduler 1.20's default weights.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::generate::HOSTNAME;

/// kube-scheduler 1.20's default Score plugins and weights
/// (`pkg/scheduler/algorithmprovider/registry.go`), the ones wasmsched
/// has. ImageLocality (1) and NodePreferAvoidPods (10000) score every
/// generated node alike (see generate.rs) and are left out.
pub const WEIGHTS: [(&str, i64); 6] = [
    ("NodeResourcesBalancedAllocation", 1),
    ("InterPodAffinity", 1),
    ("NodeResourcesFit", 1),
    ("NodeAffinity", 1),
    ("PodTopologySpread", 2),
    ("TaintToleration", 1),
];

/// A difference allowed because upstream changed after 1.20.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Allowance {
    /// "node(s) didn't match Pod's node affinity" became
    /// "node(s) didn't match Pod's node affinity/selector".
    NodeAffinityReasonRenamed,
    /// "node(s) had taint {k: v}, that the pod didn't tolerate" became
    /// "node(s) had untolerated taint {k: v}" (kubernetes#109119).
    TaintReasonRenamed,
    /// 1.20's InterPodAffinity adds "node(s) didn't match pod
    /// affinity/anti-affinity" to each of its specific reasons; removed
    /// in kubernetes#102518.
    PodAffinityGenericReason,
    /// NodeResourcesBalancedAllocation: 1.20 scores `1 - |cpu - memory|`
    /// of the requested fractions, 0 when either reaches 1; upstream now
    /// scores `1 - std` of the fractions capped at 1, `std = |cpu -
    /// memory| / 2` for two resources (kubernetes#101946).
    BalancedAllocationFormula,
    /// NodeResourcesBalancedAllocation: 1.20 counts the non-zero requests
    /// (100m / 200Mi for a container that sets none); upstream now counts
    /// the actual requests (kubernetes#102925) and gives a pod that
    /// requests neither cpu nor memory 0 everywhere (kubernetes#130260).
    BalancedAllocationRequests,
    /// 1.20 normalizes InterPodAffinity scores over `[min(0, lowest),
    /// max(0, highest)]`; upstream over `[lowest, highest]`
    /// (kubernetes#98096).
    PodAffinityNormalization,
    /// 1.20 truncates PodTopologySpread's raw score; upstream rounds it
    /// (kubernetes#107384).
    SpreadScoreRounding,
}

impl Allowance {
    pub const ALL: [Allowance; 7] = [
        Allowance::NodeAffinityReasonRenamed,
        Allowance::TaintReasonRenamed,
        Allowance::PodAffinityGenericReason,
        Allowance::BalancedAllocationFormula,
        Allowance::BalancedAllocationRequests,
        Allowance::PodAffinityNormalization,
        Allowance::SpreadScoreRounding,
    ];

    /// The allowances on scores.
    pub const SCORES: [Allowance; 4] = [
        Allowance::BalancedAllocationFormula,
        Allowance::BalancedAllocationRequests,
        Allowance::PodAffinityNormalization,
        Allowance::SpreadScoreRounding,
    ];
}

// ---------------------------------------------------------------- messages

const POD_AFFINITY_GENERIC: &str = "node(s) didn't match pod affinity/anti-affinity";
const POD_AFFINITY_SPECIFIC: [&str; 3] = [
    "node(s) didn't match pod affinity rules",
    "node(s) didn't match pod anti-affinity rules",
    "node(s) didn't satisfy existing pods anti-affinity rules",
];

/// `0/N nodes are available: 3 Insufficient cpu, 2 node(s) ... .` into
/// N and reason -> count. 1.20's taint reason contains ", ", so a part
/// that does not start with a count continues the previous reason.
pub fn parse_fit_error(message: &str) -> Result<(usize, BTreeMap<String, usize>), String> {
    let bad = || format!("not a FitError message: {message:?}");
    let rest = message.strip_prefix("0/").ok_or_else(bad)?;
    let (n, rest) = rest.split_once(" nodes are available").ok_or_else(bad)?;
    let n: usize = n.parse().map_err(|_| bad())?;
    let body = rest.strip_prefix(": ").unwrap_or(rest);
    let body = body.strip_suffix('.').ok_or_else(bad)?;
    let mut parts: Vec<String> = Vec::new();
    for piece in body.split(", ").filter(|p| !p.is_empty()) {
        let counted = piece
            .split_once(' ')
            .is_some_and(|(c, _)| c.parse::<usize>().is_ok());
        match parts.last_mut() {
            Some(last) if !counted => {
                last.push_str(", ");
                last.push_str(piece);
            }
            _ => parts.push(piece.to_string()),
        }
    }
    let mut reasons = BTreeMap::new();
    for p in parts {
        let (count, reason) = p.split_once(' ').ok_or_else(bad)?;
        *reasons.entry(reason.to_string()).or_insert(0) +=
            count.parse::<usize>().map_err(|_| bad())?;
    }
    Ok((n, reasons))
}

/// 1.20's reasons in today's wording, and the allowances that took.
/// Fails if 1.20's generic pod-affinity reason does not count exactly the
/// nodes its specific reasons count (it is added next to each of them).
pub fn reasons_as_today(
    reasons: &BTreeMap<String, usize>,
) -> Result<(BTreeMap<String, usize>, BTreeSet<Allowance>), String> {
    let mut out = BTreeMap::new();
    let mut used = BTreeSet::new();
    for (reason, count) in reasons {
        let today = if reason == "node(s) didn't match Pod's node affinity" {
            used.insert(Allowance::NodeAffinityReasonRenamed);
            "node(s) didn't match Pod's node affinity/selector".to_string()
        } else if let Some(taint) = reason
            .strip_prefix("node(s) had taint ")
            .and_then(|r| r.strip_suffix(", that the pod didn't tolerate"))
        {
            used.insert(Allowance::TaintReasonRenamed);
            format!("node(s) had untolerated taint {taint}")
        } else if reason == POD_AFFINITY_GENERIC {
            let specific: usize = POD_AFFINITY_SPECIFIC
                .iter()
                .filter_map(|r| reasons.get(*r))
                .sum();
            if specific != *count {
                return Err(format!(
                    "{count} nodes with {reason:?} but {specific} with a specific pod affinity reason"
                ));
            }
            used.insert(Allowance::PodAffinityGenericReason);
            continue;
        } else {
            reason.clone()
        };
        *out.entry(today).or_insert(0) += count;
    }
    Ok((out, used))
}

// ------------------------------------------------------- pods and nodes

/// A quantity in base units (cpu in cores, memory in bytes).
fn quantity(v: &Value) -> f64 {
    let s = v.as_str().unwrap_or("0");
    let suffixes: [(&str, f64); 9] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    for (suffix, factor) in suffixes {
        if let Some(n) = s.strip_suffix(suffix) {
            return n.parse::<f64>().expect("a quantity") * factor;
        }
    }
    s.parse::<f64>().expect("a quantity")
}

pub fn milli_cpu(v: &Value) -> i64 {
    (quantity(v) * 1000.0).ceil() as i64
}

pub fn bytes(v: &Value) -> i64 {
    quantity(v).ceil() as i64
}

/// A pod's cpu (milli) and memory requests: summed over containers, at
/// least each init container's. With `non_zero`, 1.20's
/// `GetNonzeroRequests`: 100m / 200Mi for a container that does not
/// request the resource (an explicit zero stays zero). The objects come
/// from the API server, which has already copied limits into missing
/// requests.
fn requests(pod: &Value, non_zero: bool) -> (i64, i64) {
    let (cpu0, mem0) = if non_zero { (100, 200 << 20) } else { (0, 0) };
    let one = |c: &Value| {
        let r = &c["resources"]["requests"];
        (
            r.get("cpu").map_or(cpu0, milli_cpu),
            r.get("memory").map_or(mem0, bytes),
        )
    };
    let list = |key: &str| pod["spec"][key].as_array().cloned().unwrap_or_default();
    let (mut cpu, mut mem) = list("containers")
        .iter()
        .map(one)
        .fold((0, 0), |(a, b), (c, m)| (a + c, b + m));
    for ic in list("initContainers") {
        let (c, m) = one(&ic);
        cpu = cpu.max(c);
        mem = mem.max(m);
    }
    (cpu, mem)
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or("")
}

fn label<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    o["metadata"]["labels"][key].as_str()
}

/// `matchLabels` / `matchExpressions` (In, NotIn, Exists, DoesNotExist).
fn selector_matches(selector: &Value, pod: &Value) -> bool {
    let labels_ok = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(pod, k) == v.as_str());
    let exprs_ok = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let have = label(pod, e["key"].as_str().unwrap_or(""));
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str() {
                Some("In") => have.is_some_and(|h| values.contains(&h)),
                Some("NotIn") => have.is_none_or(|h| !values.contains(&h)),
                Some("Exists") => have.is_some(),
                Some("DoesNotExist") => have.is_none(),
                o => panic!("unexpected selector operator {o:?}"),
            }
        });
    labels_ok && exprs_ok
}

/// The cluster right before the pod, as the API server returned it.
pub struct Cluster<'a> {
    pub nodes: &'a [Value],
    /// Pods bound to nodes.
    pub pods: &'a [Value],
}

impl Cluster<'_> {
    fn node(&self, n: &str) -> &Value {
        self.nodes
            .iter()
            .find(|x| name(x) == n)
            .unwrap_or_else(|| panic!("no node {n}"))
    }

    fn pods_on<'b>(&'b self, n: &'b str) -> impl Iterator<Item = &'b Value> + 'b {
        self.pods
            .iter()
            .filter(move |p| p["spec"]["nodeName"].as_str() == Some(n))
    }
}

// ------------------------------------------------------------------ scores

/// NodeResourcesBalancedAllocation on each of `feasible`, with 1.20's
/// formula or today's, over 1.20's requests or today's: with both false,
/// wasmsched's own score (which checks this model); with both true,
/// kube-scheduler 1.20's.
pub fn balanced_allocation(
    c: &Cluster,
    pod: &Value,
    feasible: &[&str],
    formula_1_20: bool,
    requests_1_20: bool,
) -> Vec<i64> {
    let (pod_cpu, pod_mem) = requests(pod, requests_1_20);
    if !requests_1_20 && pod_cpu == 0 && pod_mem == 0 {
        return vec![0; feasible.len()];
    }
    feasible
        .iter()
        .map(|n| {
            let alloc = &c.node(n)["status"]["allocatable"];
            let (mut cpu, mut mem) = (pod_cpu, pod_mem);
            for p in c.pods_on(n) {
                let (pc, pm) = requests(p, requests_1_20);
                cpu += pc;
                mem += pm;
            }
            let (cpu_cap, mem_cap) = (milli_cpu(&alloc["cpu"]), bytes(&alloc["memory"]));
            let cf = cpu as f64 / cpu_cap as f64;
            let mf = mem as f64 / mem_cap as f64;
            if !formula_1_20 {
                let std = (cf.min(1.0) - mf.min(1.0)).abs() / 2.0;
                ((1.0 - std) * 100.0) as i64
            } else if cf >= 1.0 || mf >= 1.0 {
                0
            } else {
                ((1.0 - (cf - mf).abs()) * 100.0) as i64
            }
        })
        .collect()
}

/// 1.20's InterPodAffinity NormalizeScore, on the raw scores (which did
/// not change).
pub fn pod_affinity_normalized(raw: &[i64]) -> Vec<i64> {
    let max = raw.iter().copied().fold(0, i64::max);
    let min = raw.iter().copied().fold(0, i64::min);
    raw.iter()
        .map(|&s| {
            if max - min > 0 {
                (100.0 * ((s - min) as f64 / (max - min) as f64)) as i64
            } else {
                0
            }
        })
        .collect()
}

/// 1.20's PodTopologySpread PreScore, Score and NormalizeScore over
/// `feasible`. The generator gives pods with spread constraints no node
/// selector or required node affinity, so every node with the keys counts.
pub fn spread_normalized(c: &Cluster, pod: &Value, feasible: &[&str]) -> Vec<i64> {
    let constraints: Vec<&Value> = pod["spec"]["topologySpreadConstraints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["whenUnsatisfiable"] == "ScheduleAnyway")
        .collect();
    if constraints.is_empty() {
        return vec![100; feasible.len()];
    }
    assert!(
        pod["spec"]["nodeSelector"].is_null()
            && pod["spec"]["affinity"]["nodeAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]
                .is_null(),
        "generator invariant: spread constraints without node selection"
    );
    let key = |x: &Value| x["topologyKey"].as_str().unwrap_or("").to_string();
    let has_keys = |node: &Value| constraints.iter().all(|x| label(node, &key(x)).is_some());
    let ignored: Vec<bool> = feasible.iter().map(|n| !has_keys(c.node(n))).collect();
    let scored = ignored.iter().filter(|i| !**i).count();
    let ns = pod["metadata"]["namespace"].as_str();
    let matching = |x: &Value, on: &str| {
        c.pods_on(on)
            .filter(|p| {
                p["metadata"]["namespace"].as_str() == ns
                    && p["metadata"]["deletionTimestamp"].is_null()
                    && selector_matches(&x["labelSelector"], p)
            })
            .count() as i64
    };
    // Per constraint: the domains of the scored feasible nodes, with the
    // matching pods of every node that has all the keys.
    let mut weights = Vec::new();
    let mut counts: Vec<BTreeMap<String, i64>> = Vec::new();
    for x in &constraints {
        let k = key(x);
        let mut domains: BTreeMap<String, i64> = BTreeMap::new();
        for (n, skip) in feasible.iter().zip(&ignored) {
            if !skip && k != HOSTNAME {
                domains.insert(label(c.node(n), &k).unwrap().to_string(), 0);
            }
        }
        let size = if k == HOSTNAME { scored } else { domains.len() };
        weights.push(((size + 2) as f64).ln());
        for node in c.nodes.iter().filter(|n| has_keys(n)) {
            if let Some(d) = domains.get_mut(label(node, &k).unwrap()) {
                *d += matching(x, name(node));
            }
        }
        counts.push(domains);
    }
    let raw: Vec<i64> = feasible
        .iter()
        .zip(&ignored)
        .map(|(n, skip)| {
            if *skip {
                return 0;
            }
            let node = c.node(n);
            let mut score = 0.0;
            for (i, x) in constraints.iter().enumerate() {
                let k = key(x);
                let cnt = if k == HOSTNAME {
                    matching(x, n)
                } else {
                    counts[i][label(node, &k).unwrap()]
                };
                score += cnt as f64 * weights[i] + (x["maxSkew"].as_i64().unwrap() - 1) as f64;
            }
            score as i64
        })
        .collect();
    let kept = || {
        raw.iter()
            .zip(&ignored)
            .filter(|(_, i)| !**i)
            .map(|(s, _)| *s)
    };
    let min = kept().min().unwrap_or(i64::MAX);
    let max = kept().fold(0, i64::max);
    raw.iter()
        .zip(&ignored)
        .map(|(&s, &skip)| match (skip, max) {
            (true, _) => 0,
            (false, 0) => 100,
            _ => 100 * (max + min - s) / max,
        })
        .collect()
}
