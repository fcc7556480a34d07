//! Human-readable renderings of `simulate` results.

use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, ContentArrangement, Table};

use crate::escape::{escape, Escaped};
use crate::framework::objects::PluginReport;
use crate::framework::FilterVerdict;
use crate::simulate::{ExplainReport, Report};

/// `t` as kubectl prints a table: no borders, columns three spaces
/// apart, no trailing spaces.
pub fn plain(mut t: Table) -> String {
    t.load_preset(comfy_table::presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled);
    let n = t.column_count();
    for (i, c) in t.column_iter_mut().enumerate() {
        c.set_padding((0, if i + 1 == n { 0 } else { 3 }));
    }
    t.trim_fmt()
}

/// Placements, then each unschedulable pod with its FitError message.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let mut t = Table::new();
    let with_gpus = report.scheduled.iter().any(|s| !s.gpus.is_empty());
    let mut header = vec!["POD", "NODE", "SCORE"];
    if with_gpus {
        header.push("GPUS");
    }
    t.set_header(header);
    for s in &report.scheduled {
        let mut row = vec![
            Cell::new(format!("{}/{}", Escaped(&s.namespace), Escaped(&s.pod))),
            Cell::new(escape(&s.node)),
            Cell::new(s.score.map_or("-".to_string(), |v| v.to_string())),
        ];
        if with_gpus {
            row.push(Cell::new(crate::gpu_sharing_output::shares(&s.gpus)));
        }
        t.add_row(row);
    }
    out.push_str(&format!(
        "Scheduled {} pod(s):\n{}\n",
        report.scheduled.len(),
        plain(t)
    ));
    if !report.unschedulable.is_empty() {
        out.push_str(&format!(
            "\nUnschedulable {} pod(s):\n",
            report.unschedulable.len()
        ));
        for u in &report.unschedulable {
            out.push_str(&format!(
                "  {}/{}: {}\n",
                Escaped(&u.namespace),
                Escaped(&u.pod),
                Escaped(&u.message)
            ));
        }
    }
    if !report.gated.is_empty() {
        out.push_str(&format!(
            "\nGated {} pod(s) (not attempted while a scheduling gate is left):\n",
            report.gated.len()
        ));
        for g in &report.gated {
            let gates: Vec<String> = g.gates.iter().map(|x| Escaped(x).to_string()).collect();
            out.push_str(&format!(
                "  {}/{}: {}\n",
                Escaped(&g.namespace),
                Escaped(&g.pod),
                gates.join(", ")
            ));
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
            Escaped(&h.plugin),
            Escaped(&h.profile),
            if failures.is_empty() { "none".into() } else { escape(&failures.join(", ")).into_owned() },
            h.skips,
            h.instances
        ));
        if let Some(last) = &h.last_failure {
            out.push_str(&format!("  last failure: {}\n", Escaped(last)));
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
    if !report.gpu_devices.is_empty() {
        out.push('\n');
        out.push_str(&crate::gpu_sharing_output::devices(&report.gpu_devices));
    }
    for t in &report.plugin_tables {
        out.push('\n');
        out.push_str(&plugin_table(t));
    }
    if let Some(e) = &report.explain {
        out.push('\n');
        out.push_str(&explain(e));
    }
    out
}

/// A plugin's section of the report (Coscheduling's pod groups) as a
/// table.
pub fn plugin_table(r: &PluginReport) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(r.header.clone());
    for row in &r.rows {
        t.add_row(row.iter().map(Cell::new).collect::<Vec<_>>());
    }
    format!("{}\n{t}\n", r.title)
}

/// Every node with each Filter verdict and each score.
pub fn explain(e: &ExplainReport) -> String {
    let mut out = format!(
        "Explain {}/{} (profile {}): {}\n",
        Escaped(&e.namespace),
        Escaped(&e.pod),
        Escaped(&e.profile),
        match &e.node {
            Some(n) => format!("placed on {}", Escaped(n)),
            None => "unschedulable".into(),
        }
    );
    if let Some(r) = &e.explanation.pod_reason {
        out.push_str(&format!("  rejected on every node: {}\n", Escaped(r)));
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
                FilterVerdict::Reject(r) => Some(format!("{}: {}", Escaped(p), Escaped(r))),
                FilterVerdict::Error(r) => Some(format!("{}: error: {}", Escaped(p), Escaped(r))),
            })
            .collect();
        let filter = match (rejections.is_empty(), &n.note) {
            (true, Some(note)) => format!("pass ({})", Escaped(note)),
            (true, None) => "pass".to_string(),
            (false, _) => rejections.join("\n"),
        };
        let scores: Vec<String> = n
            .scores
            .iter()
            .map(|s| match (&s.error, s.raw, s.normalized, s.weighted) {
                (Some(err), _, _, _) => format!("{}: error: {}", Escaped(&s.plugin), Escaped(err)),
                (None, Some(r), Some(nz), Some(w)) => {
                    format!("{} {r} -> {nz} = {w}", Escaped(&s.plugin))
                }
                _ => format!("{}: -", Escaped(&s.plugin)),
            })
            .collect();
        t.add_row(vec![
            Cell::new(escape(&n.node)),
            Cell::new(filter),
            Cell::new(scores.join("\n")),
            Cell::new(n.total.map_or("-".into(), |v| v.to_string())),
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    if !e.gpus.is_empty() {
        out.push_str(&format!(
            "  GPUs: {}\n",
            crate::gpu_sharing_output::shares(&e.gpus).replace('\n', "; ")
        ));
    }
    if !e.gpu_devices.is_empty() {
        out.push_str(&crate::gpu_sharing_output::devices(&e.gpu_devices));
    }
    if !e.node_metrics.is_empty() {
        out.push_str(&node_metrics(&e.node_metrics));
    }
    for (plugin, line) in &e.explanation.notes {
        out.push_str(&format!("  {}: {}\n", Escaped(plugin), Escaped(line)));
    }
    if let Some(p) = &e.explanation.preemption {
        out.push_str(&preemption(p));
    }
    out
}

/// Each node's live metrics (the node's own values; per-device values
/// are counted, and listed in the JSON output).
fn node_metrics(nodes: &[crate::simulate::NodeMetricsReport]) -> String {
    let sep = crate::node_metrics::DEVICE_SEPARATOR;
    let mut out = format!("Node metrics (from {}):\n", Escaped(&nodes[0].source));
    for n in nodes {
        let own: Vec<String> = n
            .metrics
            .iter()
            .filter(|m| !m.name.contains(sep))
            .map(|m| {
                format!(
                    "{} {} (age {}s)",
                    Escaped(&m.name),
                    m.value,
                    m.age_seconds.round()
                )
            })
            .collect();
        let devices = n.metrics.iter().filter(|m| m.name.contains(sep)).count();
        out.push_str(&format!("  {}: {}", Escaped(&n.node), own.join(", ")));
        if devices > 0 {
            out.push_str(&format!("; {devices} per-device values"));
        }
        out.push('\n');
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
