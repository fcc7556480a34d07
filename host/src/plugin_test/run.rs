//! Runs a case file against a compiled component through the scheduling
//! framework (the same cycle `simulate` and `run` use, with a recorder
//! attached), with the component as the profile's only plugin, and
//! compares what the cycle saw with the expectations.

use std::sync::Arc;

use crate::framework::{
    Explanation, FilterVerdict, Framework, NodeExplanation, Point, Profile, Snapshot,
};
use crate::model::Pod;
use crate::wasm::bindings::types as wit;
use crate::wasm::{
    loader, FailurePolicy, Limits, Loader, PluginFailure, PluginModule, WasmSettings,
};

use super::cases::{Case, CaseFile, Expect, Input, Verdict};
use super::report::{CaseResult, Diff, Report};

/// The plugin's name in the test profile.
const NAME: &str = "test";

/// Runs every case of `file` on `module`, each on a fresh plugin that has
/// received the fixture cluster. `args` overrides the file's args. Fails
/// only when the plugin cannot start (its `init` refuses the args, or it
/// traps while starting); a failure during a case fails that case.
pub fn run(
    module: &Arc<PluginModule>,
    file: &CaseFile,
    args: Option<&str>,
    limits: Limits,
) -> Result<Report, PluginFailure> {
    let settings = WasmSettings {
        args: args.unwrap_or(&file.args).to_string(),
        limits,
        failure_policy: FailurePolicy::Fail,
    };
    let loader = Loader::default();
    let start = || {
        loader.start(
            NAME,
            module.clone(),
            settings.clone(),
            1,
            Default::default(),
        )
    };
    // Start once up front so a plugin that cannot start is one error,
    // not the same failure in every case.
    start()?;
    let snapshot = fixture(file);
    let cases = file
        .cases
        .iter()
        .map(|case| CaseResult {
            name: case.name.clone(),
            diffs: match start() {
                Ok(plugin) => run_case(&plugin, module, &snapshot, file, case),
                Err(f) => vec![diff("start", "the plugin starts", format!("failed: {f}"))],
            },
        })
        .collect();
    Ok(Report { cases })
}

/// The fixture cluster: nodes in file order (a node's index is its
/// position), pods placed.
fn fixture(file: &CaseFile) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for n in &file.nodes {
        snapshot.set_node(n.clone());
    }
    for (index, p) in &file.placed {
        snapshot.add_pod(*index, Arc::new(p.clone()));
    }
    snapshot
}

fn diff(what: impl Into<String>, expected: impl ToString, got: impl ToString) -> Diff {
    Diff {
        what: what.into(),
        expected: expected.to_string(),
        got: got.to_string(),
    }
}

fn run_case(
    plugin: &Arc<crate::wasm::WasmPlugin>,
    module: &PluginModule,
    snapshot: &Snapshot,
    file: &CaseFile,
    case: &Case,
) -> Vec<Diff> {
    match &case.input {
        Input::Cycle(pod) => {
            let e = explain(plugin, snapshot, pod);
            cycle(module, file, &e, &case.expect)
        }
        Input::DeletionCost { pod, metrics } => {
            deletion_cost(plugin, module, snapshot, pod, metrics, &case.expect)
        }
    }
}

/// The cycle of `pod` with the plugin as the only plugin of a profile
/// that evaluates every node.
fn explain(plugin: &Arc<crate::wasm::WasmPlugin>, snapshot: &Snapshot, pod: &Pod) -> Explanation {
    let bundle = loader::bundle(plugin);
    let mut profile = Profile::new("plugin-test", Some(100));
    for point in [
        Point::PreFilter,
        Point::Filter,
        Point::PreScore,
        Point::Score,
    ] {
        profile.enable(&bundle, point, 1);
    }
    let fw = Framework::new(profile, 1, 0);
    let mut e = Explanation::default();
    fw.run_cycle(pod, snapshot, Some(&mut e));
    e
}

fn deletion_cost(
    plugin: &Arc<crate::wasm::WasmPlugin>,
    module: &PluginModule,
    snapshot: &Snapshot,
    pod: &wit::PodStatus,
    metrics: &[(String, f64)],
    expect: &Expect,
) -> Vec<Diff> {
    let Some(expected) = &expect.deletion_cost else {
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
        plugin
            .call_deletion_cost(snapshot, pod, metrics)
            .map_err(|f| f.to_string())
    };
    if &got == expected {
        Vec::new()
    } else {
        vec![diff("deletion-cost", shown(expected), shown(&got))]
    }
}

/// The plugin's verdict on a node, as the cycle saw it.
fn verdict(node: &NodeExplanation) -> Verdict {
    match node.filters.iter().find(|(p, _)| p == NAME).map(|(_, v)| v) {
        Some(FilterVerdict::Reject(r)) | Some(FilterVerdict::Error(r)) => {
            Verdict::rejected(r, node.unresolvable.iter().any(|p| p == NAME))
        }
        _ => Verdict::Success,
    }
}

/// The plan the plugin announced: which of its points did not say Skip.
fn plan_of(module: &PluginModule, e: &Explanation) -> wit::CyclePlan {
    let skipped = |point: &str| e.skipped.iter().any(|(p, s)| p == NAME && s == point);
    wit::CyclePlan {
        filter: module.exports.filter && !skipped("Filter"),
        score: module.exports.score && !skipped("Score"),
    }
}

/// Compares a cycle with what the case expects.
fn cycle(module: &PluginModule, file: &CaseFile, e: &Explanation, expect: &Expect) -> Vec<Diff> {
    if let Some(reason) = &e.pod_reason {
        return match &expect.error {
            Some(want) if want == reason => Vec::new(),
            Some(want) => vec![diff("cycle-start error", want, reason)],
            None => vec![diff(
                "cycle-start",
                "a cycle plan",
                format!("error: {reason}"),
            )],
        };
    }
    let plan = plan_of(module, e);
    let show_plan = |p: &wit::CyclePlan| format!("filter: {}, score: {}", p.filter, p.score);
    let mut diffs = Vec::new();
    if let Some(want) = &expect.error {
        diffs.push(diff(
            "cycle-start",
            format!("error: {want}"),
            show_plan(&plan),
        ));
    }
    if let Some(p) = &expect.plan {
        if (p.filter, p.score) != (plan.filter, plan.score) {
            diffs.push(diff("plan", show_plan(p), show_plan(&plan)));
        }
    }
    let node = |name: &str| {
        let i = index(file, name);
        &e.nodes[i]
    };
    for (name, want) in &expect.filter {
        let got = verdict(node(name));
        if &got != want {
            diffs.push(diff(format!("filter {name}"), want, got));
        }
    }
    if let Some(error) = &e.error {
        if !(expect.score.is_empty() && expect.normalized_score.is_empty()) {
            diffs.push(diff("score", "scores", format!("failed: {error}")));
        }
        return diffs;
    }
    let score = |n: &NodeExplanation, normalized: bool| {
        n.scores.iter().find(|s| s.plugin == NAME).and_then(|s| {
            if normalized {
                s.normalized
            } else {
                s.raw
            }
        })
    };
    for (label, expected, normalized) in [
        ("score", &expect.score, false),
        ("normalized score", &expect.normalized_score, true),
    ] {
        for (name, want) in expected {
            let n = node(name);
            let got = match score(n, normalized) {
                Some(s) => s.to_string(),
                None => unscored(module, &plan, &verdict(n)),
            };
            if got != want.to_string() {
                diffs.push(diff(format!("{label} {name}"), want, got));
            }
        }
    }
    diffs
}

/// Why a node has no score.
fn unscored(module: &PluginModule, plan: &wit::CyclePlan, verdict: &Verdict) -> String {
    if !module.exports.score {
        "not scored: the plugin does not export score".into()
    } else if !plan.score {
        "not scored: Score skipped by the cycle-start plan".into()
    } else if *verdict != Verdict::Success {
        format!("not scored: Filter said {verdict}")
    } else {
        "not scored".into()
    }
}

/// The position of a node the case file checked exists.
fn index(file: &CaseFile, node: &str) -> usize {
    file.nodes
        .iter()
        .position(|n| n.name == node)
        .expect("case file nodes were checked when parsed")
}
