//! The case file: fixture cluster, cases and their expectations, parsed
//! and converted to the contract's records up front, so that a mistake in
//! the file is reported (naming the case and field) before any plugin
//! code runs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::input::{yaml, Limits};
use crate::manifest;
use crate::model::{Node, Pod};
use crate::wasm::bindings::types as wit;
use crate::wasm::convert;
use crate::wasm::interests::Interests;

/// A case file that cannot be used: where in the file, and why.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{location}: {cause}")]
pub struct CaseError {
    /// `cases[2] "batch pod" expect.filter.node-1`, `nodes[0]`, ...
    pub location: String,
    pub cause: String,
}

fn fail(location: impl Into<String>, cause: impl Into<String>) -> CaseError {
    CaseError {
        location: location.into(),
        cause: cause.into(),
    }
}

/// A Filter verdict, in kube-scheduler's status codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Success,
    Unschedulable(String),
    UnschedulableAndUnresolvable(String),
}

impl Verdict {
    pub const SYNTAX: &'static str =
        "Success, \"Unschedulable: REASON\" or \"UnschedulableAndUnresolvable: REASON\"";

    pub fn parse(s: &str) -> Option<Self> {
        if s.trim() == "Success" {
            return Some(Verdict::Success);
        }
        let (code, reason) = s.split_once(':')?;
        let reason = reason.trim().to_string();
        match code.trim() {
            "Unschedulable" => Some(Verdict::Unschedulable(reason)),
            "UnschedulableAndUnresolvable" => Some(Verdict::UnschedulableAndUnresolvable(reason)),
            _ => None,
        }
    }

    /// A rejection's reason, resolvable or not, as a verdict.
    pub fn rejected(reason: &str, unresolvable: bool) -> Self {
        if unresolvable {
            Verdict::UnschedulableAndUnresolvable(reason.to_string())
        } else {
            Verdict::Unschedulable(reason.to_string())
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Success => f.write_str("Success"),
            Verdict::Unschedulable(r) => write!(f, "Unschedulable: {r}"),
            Verdict::UnschedulableAndUnresolvable(r) => {
                write!(f, "UnschedulableAndUnresolvable: {r}")
            }
        }
    }
}

/// What a case runs.
#[derive(Debug, Clone)]
pub enum Input {
    /// A scheduling cycle of this pod on every fixture node.
    Cycle(Box<Pod>),
    /// A `deletion-cost` call.
    DeletionCost {
        pod: Box<wit::PodStatus>,
        metrics: Vec<(String, f64)>,
    },
}

/// What a case expects; only what is given is checked.
#[derive(Debug, Clone, Default)]
pub struct Expect {
    pub plan: Option<wit::CyclePlan>,
    /// `cycle-start` refuses the pod with this message.
    pub error: Option<String>,
    /// By node name.
    pub filter: BTreeMap<String, Verdict>,
    /// Raw scores (before NormalizeScore), by node name.
    pub score: BTreeMap<String, i64>,
    /// Scores after NormalizeScore, by node name.
    pub normalized_score: BTreeMap<String, i64>,
    /// `Ok(None)` is "no opinion"; `Err` the plugin's error message.
    pub deletion_cost: Option<Result<Option<i32>, String>>,
}

#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub input: Input,
    pub expect: Expect,
}

/// A parsed case file.
#[derive(Debug, Clone)]
pub struct CaseFile {
    /// Plugin args (JSON text); `{}` when the file has none.
    pub args: String,
    /// Fixture nodes; a node's index is its position.
    pub nodes: Vec<Node>,
    /// Pods already placed, with their node's index.
    pub placed: Vec<(u32, Pod)>,
    pub cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    args: Option<Value>,
    nodes: Vec<Value>,
    #[serde(default)]
    pods: Vec<Value>,
    cases: Vec<RawCase>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCase {
    name: String,
    #[serde(default)]
    pod: Option<Value>,
    #[serde(default)]
    deletion_cost: Option<RawDeletionCost>,
    #[serde(default)]
    expect: RawExpect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawDeletionCost {
    pod: Value,
    #[serde(default = "running")]
    phase: String,
    #[serde(default = "yes")]
    ready: bool,
    #[serde(default)]
    age_seconds: i64,
    #[serde(default)]
    restarts: u32,
    #[serde(default)]
    metrics: BTreeMap<String, f64>,
}

fn running() -> String {
    "Running".into()
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    filter: bool,
    score: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawExpect {
    #[serde(default)]
    plan: Option<RawPlan>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    filter: BTreeMap<String, String>,
    #[serde(default)]
    score: BTreeMap<String, i64>,
    #[serde(default)]
    normalized_score: BTreeMap<String, i64>,
    /// Present-but-null (no opinion) differs from absent.
    #[serde(default, deserialize_with = "present")]
    deletion_cost: Option<Value>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Fills in what `kubectl` output always has and a hand-written fixture
/// may leave out: `apiVersion`, `kind`, and a pod's container (one that
/// requests nothing).
fn object(mut v: Value, kind: &str, at: &str) -> Result<Value, CaseError> {
    let Value::Object(m) = &mut v else {
        return Err(fail(at, format!("expected a {kind} object")));
    };
    m.entry("apiVersion").or_insert("v1".into());
    m.entry("kind").or_insert(kind.into());
    if kind == "Pod" {
        let spec = m
            .entry("spec")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Value::Object(spec) = spec {
            spec.entry("containers")
                .or_insert_with(|| serde_json::json!([{"name": "main", "image": "fixture"}]));
        }
    }
    Ok(v)
}

fn node(v: Value, at: &str) -> Result<Node, CaseError> {
    let n: k8s::Node = manifest::decode(object(v, "Node", at)?).map_err(|c| fail(at, c))?;
    Node::from_k8s(&n).map_err(|e| fail(at, format!("{}: {}", e.field, e.cause)))
}

fn pod(v: Value, at: &str) -> Result<Pod, CaseError> {
    let p: k8s::Pod = manifest::decode(object(v, "Pod", at)?).map_err(|c| fail(at, c))?;
    Pod::from_k8s(&p).map_err(|e| fail(at, format!("{}: {}", e.field, e.cause)))
}

impl CaseFile {
    /// Parses a case file's text.
    pub fn parse(text: &str) -> Result<Self, CaseError> {
        let raw: RawFile = yaml::typed(text, &Limits::DEFAULT).map_err(|e| {
            let path = if e.path == "." {
                "case file".into()
            } else {
                e.path
            };
            fail(path, e.cause)
        })?;
        let args = match raw.args {
            None => "{}".to_string(),
            Some(v @ Value::Object(_)) => v.to_string(),
            Some(_) => return Err(fail("args", "expected an object (the plugin's args)")),
        };
        let mut names: BTreeMap<String, u32> = BTreeMap::new();
        let mut nodes = Vec::new();
        for (i, v) in raw.nodes.into_iter().enumerate() {
            let at = format!("nodes[{i}]");
            let n = node(v, &at)?;
            if names.insert(n.name.clone(), i as u32).is_some() {
                return Err(fail(at, format!("duplicate node {}", n.name)));
            }
            nodes.push(n);
        }
        if nodes.is_empty() {
            return Err(fail("nodes", "no nodes: a case needs nodes to run on"));
        }
        let mut placed = Vec::new();
        for (i, v) in raw.pods.into_iter().enumerate() {
            let at = format!("pods[{i}]");
            let p = pod(v, &at)?;
            let Some(on) = p.node_name.as_deref() else {
                return Err(fail(
                    format!("{at} (Pod {})", p.key()),
                    "spec.nodeName: missing (`pods` holds pods already placed; a pod to schedule goes in a case)",
                ));
            };
            let Some(&index) = names.get(on) else {
                return Err(fail(
                    format!("{at} (Pod {})", p.key()),
                    format!("spec.nodeName: no node named {on:?} in `nodes`"),
                ));
            };
            placed.push((index, p));
        }
        let mut cases = Vec::new();
        for (i, c) in raw.cases.into_iter().enumerate() {
            cases.push(case(i, c, &names)?);
        }
        if cases.is_empty() {
            return Err(fail("cases", "no cases"));
        }
        Ok(CaseFile {
            args,
            nodes,
            placed,
            cases,
        })
    }
}

fn case(i: usize, c: RawCase, names: &BTreeMap<String, u32>) -> Result<Case, CaseError> {
    let at = format!("cases[{i}] {:?}", c.name);
    let input = match (c.pod, c.deletion_cost) {
        (Some(p), None) => Input::Cycle(Box::new(pod(p, &format!("{at} pod"))?)),
        (None, Some(d)) => {
            let p = pod(d.pod, &format!("{at} deletionCost.pod"))?;
            Input::DeletionCost {
                pod: Box::new(wit::PodStatus {
                    pod: convert::pod(&p, &Interests::default()),
                    phase: d.phase,
                    ready: d.ready,
                    age_seconds: d.age_seconds,
                    restarts: d.restarts,
                }),
                metrics: d.metrics.into_iter().collect(),
            }
        }
        _ => {
            return Err(fail(
                at,
                "needs exactly one of `pod` (a scheduling cycle) or `deletionCost`",
            ))
        }
    };
    let e = c.expect;
    let known = |field: &str, node: &str| -> Result<(), CaseError> {
        if names.contains_key(node) {
            Ok(())
        } else {
            Err(fail(
                format!("{at} expect.{field}.{node}"),
                "no node of that name in `nodes`",
            ))
        }
    };
    let mut filter = BTreeMap::new();
    for (node, v) in e.filter {
        known("filter", &node)?;
        let verdict = Verdict::parse(&v).ok_or_else(|| {
            fail(
                format!("{at} expect.filter.{node}"),
                format!("{v:?} is not a verdict ({})", Verdict::SYNTAX),
            )
        })?;
        filter.insert(node, verdict);
    }
    for node in e.score.keys() {
        known("score", node)?;
    }
    for node in e.normalized_score.keys() {
        known("normalizedScore", node)?;
    }
    let deletion_cost = match e.deletion_cost {
        None => None,
        Some(Value::Null) => Some(Ok(None)),
        Some(Value::Number(n)) => match n.as_i64().and_then(|n| i32::try_from(n).ok()) {
            Some(n) => Some(Ok(Some(n))),
            None => {
                return Err(fail(
                    format!("{at} expect.deletionCost"),
                    format!("{n} is not a 32-bit integer (expected an integer, null for no opinion, or \"error: MESSAGE\")"),
                ))
            }
        },
        Some(Value::String(s)) if s.starts_with("error:") => {
            Some(Err(s["error:".len()..].trim().to_string()))
        }
        Some(_) => {
            return Err(fail(
                format!("{at} expect.deletionCost"),
                "expected an integer, null (no opinion) or \"error: MESSAGE\"",
            ))
        }
    };
    let is_cycle = matches!(input, Input::Cycle(_));
    let cycle_expectations = e.plan.is_some()
        || e.error.is_some()
        || !filter.is_empty()
        || !e.score.is_empty()
        || !e.normalized_score.is_empty();
    if is_cycle && deletion_cost.is_some() {
        return Err(fail(
            at,
            "expect.deletionCost needs a `deletionCost` input, not `pod`",
        ));
    }
    if !is_cycle && cycle_expectations {
        return Err(fail(
            at,
            "expect.plan/error/filter/score need a `pod` input, not `deletionCost`",
        ));
    }
    Ok(Case {
        name: c.name,
        input,
        expect: Expect {
            plan: e.plan.map(|p| wit::CyclePlan {
                filter: p.filter,
                score: p.score,
            }),
            error: e.error,
            filter,
            score: e.score,
            normalized_score: e.normalized_score,
            deletion_cost,
        },
    })
}
