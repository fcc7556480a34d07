//! Human-readable renderings of `simulate` results.

use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, ContentArrangement, Table};

use crate::framework::FilterVerdict;
use crate::simulate::{ExplainReport, Report};

/// Placements, then each unschedulable pod with its FitError message.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec!["POD", "NODE", "SCORE"]);
    for s in &report.scheduled {
        t.add_row(vec![
            Cell::new(format!("{}/{}", s.namespace, s.pod)),
            Cell::new(&s.node),
            Cell::new(s.score.map_or("-".to_string(), |v| v.to_string())),
        ]);
    }
    out.push_str(&format!(
        "Scheduled {} pod(s):\n{t}\n",
        report.scheduled.len()
    ));
    if !report.unschedulable.is_empty() {
        out.push_str(&format!(
            "\nUnschedulable {} pod(s):\n",
            report.unschedulable.len()
        ));
        for u in &report.unschedulable {
            out.push_str(&format!("  {}/{}: {}\n", u.namespace, u.pod, u.message));
        }
    }
    if !report.preemptions.is_empty() {
        out.push_str(&format!("\nPreemptions ({}):\n", report.preemptions.len()));
        for p in &report.preemptions {
            out.push_str(&format!(
                "  {} nominated to {}, evicting {}\n",
                p.preemptor,
                p.node,
                p.victims.join(", ")
            ));
        }
    }
    if report.ignored > 0 {
        out.push_str(&format!("\n{} pending pod(s) name a schedulerName no profile serves (use --all-pods to include them).\n", report.ignored));
    }
    for h in &report.plugin_health {
        let failures: Vec<String> = h.failures.iter().map(|(k, v)| format!("{v} {k}")).collect();
        out.push_str(&format!(
            "\nplugin {} (profile {}): failures: {}; skipped for {} pod(s); {} instance(s) started\n",
            h.plugin,
            h.profile,
            if failures.is_empty() { "none".into() } else { failures.join(", ") },
            h.skips,
            h.instances
        ));
        if let Some(last) = &h.last_failure {
            out.push_str(&format!("  last failure: {last}\n"));
        }
    }
    if let Some(t) = &report.traffic {
        let pct = |v: u64| {
            if t.total() == 0 {
                0.0
            } else {
                100.0 * v as f64 / t.total() as f64
            }
        };
        out.push_str(&format!(
            "\nPeer traffic (weighted pairs, {} in all): same node {:.1}%, same zone {:.1}%, cross zone {:.1}%, cross region {:.1}%, unknown {:.1}%\n",
            t.total(),
            pct(t.same_node),
            pct(t.same_zone),
            pct(t.cross_zone),
            pct(t.cross_region),
            pct(t.unknown)
        ));
    }
    if let Some(e) = &report.explain {
        out.push('\n');
        out.push_str(&explain(e));
    }
    out
}

/// Every node with each Filter verdict and each score.
pub fn explain(e: &ExplainReport) -> String {
    let mut out = format!(
        "Explain {}/{} (profile {}): {}\n",
        e.namespace,
        e.pod,
        e.profile,
        match &e.node {
            Some(n) => format!("placed on {n}"),
            None => "unschedulable".into(),
        }
    );
    if let Some(r) = &e.explanation.pod_reason {
        out.push_str(&format!("  rejected on every node: {r}\n"));
        return out;
    }
    let mut nodes: Vec<_> = e.explanation.nodes.iter().collect();
    // Winner first, then feasible by total, then rejected by name.
    nodes.sort_by(|a, b| {
        let won = |n: &&crate::framework::NodeExplanation| Some(&n.node) == e.node.as_ref();
        won(b)
            .cmp(&won(a))
            .then(b.total.cmp(&a.total))
            .then(a.node.cmp(&b.node))
    });
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec![
        "NODE",
        "FILTER",
        "SCORES (plugin raw -> normalized x weight)",
        "TOTAL",
    ]);
    for n in nodes {
        let rejections: Vec<String> = n
            .filters
            .iter()
            .filter_map(|(p, v)| match v {
                FilterVerdict::Pass | FilterVerdict::Skip => None,
                FilterVerdict::Reject(r) => Some(format!("{p}: {r}")),
                FilterVerdict::Error(r) => Some(format!("{p}: error: {r}")),
            })
            .collect();
        let filter = if rejections.is_empty() {
            "pass".to_string()
        } else {
            rejections.join("\n")
        };
        let scores: Vec<String> = n
            .scores
            .iter()
            .map(|s| match (&s.error, s.raw, s.normalized, s.weighted) {
                (Some(err), _, _, _) => format!("{}: error: {err}", s.plugin),
                (None, Some(r), Some(nz), Some(w)) => format!("{} {r} -> {nz} = {w}", s.plugin),
                _ => format!("{}: -", s.plugin),
            })
            .collect();
        t.add_row(vec![
            Cell::new(&n.node),
            Cell::new(filter),
            Cell::new(scores.join("\n")),
            Cell::new(n.total.map_or("-".into(), |v| v.to_string())),
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    if let Some(p) = &e.explanation.preemption {
        out.push_str(&preemption(p));
    }
    out
}

/// What preemption considered: each candidate node, its victims, and why
/// it is behind the one before it.
fn preemption(p: &crate::framework::PreemptionExplanation) -> String {
    let mut out = format!("Preemption: {}\n", p.summary);
    if p.candidates.is_empty() {
        return out;
    }
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec![
        "CANDIDATE",
        "VICTIMS",
        "PDB VIOLATIONS",
        "HIGHEST PRIORITY",
        "PRIORITY SUM",
        "BEHIND THE ONE ABOVE BECAUSE OF",
    ]);
    for c in &p.candidates {
        t.add_row(vec![
            Cell::new(&c.node),
            Cell::new(c.victims.join("\n")),
            Cell::new(c.budget_violations),
            Cell::new(c.highest_priority),
            Cell::new(c.priority_sum),
            Cell::new(c.behind_because.as_deref().unwrap_or("(chosen)")),
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    out
}
