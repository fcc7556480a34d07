//! Runs a case file against a compiled component, as the scheduler calls
//! it, and compares the answers with the expectations.

use std::collections::BTreeMap;

use crate::wasm::bindings::types as wit;
use crate::wasm::instance::Instance;
use crate::wasm::{Limits, PluginFailure, PluginModule};

use super::cases::{Case, CaseFile, Expect, Input, Verdict};
use super::report::{CaseResult, Diff, Report};

/// Runs every case of `file` on `module`, each on a fresh instance that
/// has received the fixture cluster. `args` overrides the file's args.
/// Fails only when the plugin cannot start (its `init` refuses the args,
/// or it traps while starting); a failure during a case fails that case.
pub fn run(
    module: &PluginModule,
    file: &CaseFile,
    args: Option<&str>,
    limits: Limits,
) -> Result<Report, PluginFailure> {
    let args = args.unwrap_or(&file.args);
    let deltas = cluster(file);
    // Start once up front so a plugin that cannot start is one error,
    // not the same failure in every case.
    Instance::new("test", module, limits, args)?;
    let cases = file
        .cases
        .iter()
        .map(|case| CaseResult {
            name: case.name.clone(),
            diffs: run_case(module, file, case, args, limits, &deltas),
        })
        .collect();
    Ok(Report { cases })
}

/// The fixture cluster as the deltas a fresh instance receives.
fn cluster(file: &CaseFile) -> Vec<wit::Delta> {
    let nodes = file
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| wit::Delta::NodeSet((i as u32, n.clone())));
    let pods = file.placed.iter().map(|(i, p)| {
        wit::Delta::PodAdd(wit::Placement {
            node: *i,
            pod: p.clone(),
        })
    });
    nodes.chain(pods).collect()
}

fn diff(what: impl Into<String>, expected: impl ToString, got: impl ToString) -> Diff {
    Diff {
        what: what.into(),
        expected: expected.to_string(),
        got: got.to_string(),
    }
}

fn run_case(
    module: &PluginModule,
    file: &CaseFile,
    case: &Case,
    args: &str,
    limits: Limits,
    deltas: &[wit::Delta],
) -> Vec<Diff> {
    let mut inst = match Instance::new("test", module, limits, args) {
        Ok(i) => i,
        Err(f) => return vec![diff("start", "the plugin starts", format!("failed: {f}"))],
    };
    if let Err(f) = inst.apply(deltas, true) {
        return vec![diff(
            "apply",
            "the fixture cluster is applied",
            format!("failed: {f}"),
        )];
    }
    match &case.input {
        Input::Cycle(pod) => cycle(module, file, &mut inst, pod, &case.expect),
        Input::DeletionCost { pod, metrics } => {
            let Some(expected) = &case.expect.deletion_cost else {
                return Vec::new();
            };
            let shown = |r: &Result<Option<i32>, String>| match r {
                Ok(Some(c)) => c.to_string(),
                Ok(None) => "null (no opinion)".to_string(),
                Err(m) => format!("error: {m}"),
            };
            let got = if !module.exports.deletion_cost {
                Err("the plugin does not export deletion-cost".to_string())
            } else {
                inst.deletion_cost(pod, metrics).map_err(|f| f.to_string())
            };
            if &got == expected {
                Vec::new()
            } else {
                vec![diff("deletion-cost", shown(expected), shown(&got))]
            }
        }
    }
}

/// Why a node has no score.
fn unscored(module: &PluginModule, plan: &wit::CyclePlan, verdict: &Verdict) -> Option<String> {
    if !module.exports.score {
        Some("not scored: the plugin does not export score".into())
    } else if !plan.score {
        Some("not scored: Score skipped by the cycle-start plan".into())
    } else if *verdict != Verdict::Success {
        Some(format!("not scored: Filter said {verdict}"))
    } else {
        None
    }
}

fn cycle(
    module: &PluginModule,
    file: &CaseFile,
    inst: &mut Instance,
    pod: &wit::Pod,
    expect: &Expect,
) -> Vec<Diff> {
    let mut diffs = Vec::new();
    let plan = match inst.cycle_start(pod) {
        Err(f) => return vec![diff("cycle-start", "a cycle plan", format!("failed: {f}"))],
        Ok(Err(reason)) => {
            match &expect.error {
                Some(e) if *e == reason => {}
                Some(e) => diffs.push(diff("cycle-start error", e, &reason)),
                None => diffs.push(diff(
                    "cycle-start",
                    "a cycle plan",
                    format!("error: {reason}"),
                )),
            }
            return diffs;
        }
        Ok(Ok(plan)) => plan,
    };
    let show_plan = |p: &wit::CyclePlan| format!("filter: {}, score: {}", p.filter, p.score);
    if let Some(e) = &expect.error {
        diffs.push(diff("cycle-start", format!("error: {e}"), show_plan(&plan)));
    }
    if let Some(p) = &expect.plan {
        if (p.filter, p.score) != (plan.filter, plan.score) {
            diffs.push(diff("plan", show_plan(p), show_plan(&plan)));
        }
    }
    let names: Vec<&str> = file.nodes.iter().map(|n| n.name.as_str()).collect();
    let all: Vec<u32> = (0..names.len() as u32).collect();
    // A skipped (or absent) Filter passes every node, as in the scheduler.
    let verdicts: Vec<Verdict> = if module.exports.filter && plan.filter {
        match inst.filter(&all) {
            Ok(v) => v
                .iter()
                .map(|r| Verdict::from_rejection(r.as_ref()))
                .collect(),
            Err(f) => {
                diffs.push(diff("filter", "verdicts", format!("failed: {f}")));
                return diffs;
            }
        }
    } else {
        vec![Verdict::Success; names.len()]
    };
    for (node, want) in &expect.filter {
        let got = &verdicts[index(&names, node)];
        if got != want {
            diffs.push(diff(format!("filter {node}"), want, got));
        }
    }
    if expect.score.is_empty() && expect.normalized_score.is_empty() {
        return diffs;
    }
    let feasible: Vec<u32> = all
        .iter()
        .copied()
        .filter(|&i| verdicts[i as usize] == Verdict::Success)
        .collect();
    let (raw, normalized) = if module.exports.score && plan.score && !feasible.is_empty() {
        let raw = match inst.score(&feasible) {
            Ok(s) => s,
            Err(f) => {
                diffs.push(diff("score", "scores", format!("failed: {f}")));
                return diffs;
            }
        };
        let normalized = match inst.normalize(&feasible, &raw) {
            Ok(n) => n.unwrap_or_else(|| raw.clone()),
            Err(f) => {
                diffs.push(diff("normalize-score", "scores", format!("failed: {f}")));
                return diffs;
            }
        };
        (raw, normalized)
    } else {
        (Vec::new(), Vec::new())
    };
    let by_node = |scores: &[i64]| -> BTreeMap<u32, i64> {
        feasible
            .iter()
            .copied()
            .zip(scores.iter().copied())
            .collect()
    };
    for (label, expected, got) in [
        ("score", &expect.score, by_node(&raw)),
        (
            "normalized score",
            &expect.normalized_score,
            by_node(&normalized),
        ),
    ] {
        for (node, want) in expected {
            let i = index(&names, node);
            let got = match got.get(&(i as u32)) {
                Some(s) => s.to_string(),
                None => unscored(module, &plan, &verdicts[i])
                    .unwrap_or_else(|| "not scored".to_string()),
            };
            if got != want.to_string() {
                diffs.push(diff(format!("{label} {node}"), want, got));
            }
        }
    }
    diffs
}

/// The index of a node the case file checked exists.
fn index(names: &[&str], node: &str) -> usize {
    names
        .iter()
        .position(|n| *n == node)
        .expect("case file nodes were checked when parsed")
}
