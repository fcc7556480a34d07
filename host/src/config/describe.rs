//! `wasmsched profiles`: each profile's effective plugin chain per
//! extension point, where each plugin comes from (the defaults, the file,
//! a fragment it includes), its `percentageOfNodesToScore`, each
//! plugin's args as it runs with them (the file's `pluginConfig` over the
//! args the defaults add), the feature gates it honours, and the wasm
//! components.

use std::fmt::Write;

use crate::framework::{Point, Profile};

use super::{ProfilePlan, Scheduler};

/// The text `wasmsched profiles` prints.
pub fn describe(scheduler: &Scheduler) -> String {
    let mut out = String::new();
    for (i, fw) in scheduler.profiles.iter().enumerate() {
        let p = fw.profile();
        chain(&mut out, &p);
        if let Some(plan) = scheduler.plans.get(i) {
            sources(&mut out, &p, plan);
        }
        gates(&mut out, &p);
    }
    for (name, m) in &scheduler.modules {
        let _ = writeln!(
            out,
            "wasm plugin {name}: {} bytes, sha256 {}, exports {}",
            m.size,
            &m.digest[..12.min(m.digest.len())],
            m.exports
        );
    }
    out
}

/// The profile's plugins at each point, in order.
fn chain(out: &mut String, p: &Profile) {
    let _ = writeln!(out, "profile {}", p.scheduler_name);
    let at = |point: Point| -> Vec<&str> {
        p.members
            .iter()
            .map(|m| m.name())
            .filter(|n| p.points_of(n).contains(&point))
            .collect()
    };
    if let Some(q) = &p.queue_sort {
        let _ = writeln!(out, "  queuesort: {}", q.name());
    }
    let pre_enqueue = at(Point::PreEnqueue);
    if !pre_enqueue.is_empty() {
        let _ = writeln!(out, "  preenqueue: {}", pre_enqueue.join(", "));
    }
    let filters: Vec<&str> = p.filter.iter().map(|f| f.name()).collect();
    let _ = writeln!(out, "  filter: {}", filters.join(", "));
    let scores: Vec<String> = p
        .score
        .iter()
        .map(|s| format!("{} (weight {})", s.plugin.name(), s.weight))
        .collect();
    let _ = writeln!(out, "  score:  {}", scores.join(", "));
    for point in [
        Point::PostFilter,
        Point::Reserve,
        Point::Permit,
        Point::PreBind,
        Point::Bind,
        Point::PostBind,
    ] {
        let names = at(point);
        if !names.is_empty() {
            let _ = writeln!(
                out,
                "  {}: {}",
                point.as_str().to_lowercase(),
                names.join(", ")
            );
        }
    }
    if !p.preemption_advisors.is_empty() {
        let names: Vec<&str> = p.preemption_advisors.iter().map(|a| a.name()).collect();
        let _ = writeln!(out, "  preemption advisors: {}", names.join(", "));
    }
}

/// One line per source with the profile's plugins from it (in member
/// order), then `percentageOfNodesToScore` and the args of each plugin
/// that has some.
fn sources(out: &mut String, p: &Profile, plan: &ProfilePlan) {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for m in &p.members {
        let name = m.name();
        let Some(source) = plan.sources.get(name) else {
            continue;
        };
        let source = source.to_string();
        match groups.iter_mut().find(|(s, _)| *s == source) {
            Some((_, names)) => names.push(name),
            None => groups.push((source, vec![name])),
        }
    }
    for (source, names) in groups {
        let _ = writeln!(out, "  from {source}: {}", names.join(", "));
    }
    let pct = match plan.percentage_of_nodes_to_score {
        Some((p, from)) if p > 0 => format!("{p} ({from})"),
        Some((_, from)) => format!("adaptive ({from} 0: {ADAPTIVE})"),
        None => format!("adaptive ({ADAPTIVE})"),
    };
    let _ = writeln!(out, "  percentageOfNodesToScore: {pct}");
    for m in &p.members {
        let name = m.name();
        let Some(args) = plan.args.get(name).filter(|a| !a.is_null()) else {
            continue;
        };
        let _ = write!(out, "  args of {name}: {args}");
        let from = match plan.default_args.iter().find(|d| d.plugin == name) {
            None => "the file's pluginConfig".to_string(),
            Some(d) => {
                // The default keys whose value the file left alone.
                let kept: Vec<&str> = d
                    .args
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter(|(k, v)| args.get(k.as_str()) == Some(*v))
                            .map(|(k, _)| k.as_str())
                            .collect()
                    })
                    .unwrap_or_default();
                if kept.is_empty() {
                    "the file's pluginConfig, over the defaults'".to_string()
                } else {
                    format!("the defaults add {}: {}", kept.join(", "), d.why)
                }
            }
        };
        let _ = writeln!(out, " ({from})");
    }
}

/// The gates of kube-scheduler's release that are on by default and
/// change scheduling: which the profile honours, which its plugins leave
/// out, which wasmsched lacks.
fn gates(out: &mut String, p: &Profile) {
    use crate::feature_gates::{for_profile, KUBERNETES_VERSION};
    let plugins: Vec<&str> = p.members.iter().map(|m| m.name()).collect();
    let g = for_profile(&plugins, &[]);
    let _ = writeln!(
        out,
        "  gates of Kubernetes {KUBERNETES_VERSION} on by default, honoured: {}",
        g.honoured.join(", ")
    );
    if !g.plugin_off.is_empty() {
        let off: Vec<String> = g
            .plugin_off
            .iter()
            .map(|(gate, plugin)| format!("{gate} ({plugin} not in this profile)"))
            .collect();
        let _ = writeln!(out, "  not honoured here: {}", off.join(", "));
    }
    if !g.missing.is_empty() {
        let missing: Vec<String> = g
            .missing
            .iter()
            .map(|(gate, issue)| format!("{gate} ({issue})"))
            .collect();
        let _ = writeln!(out, "  not implemented: {}", missing.join(", "));
    }
}

/// upstream's rule when `percentageOfNodesToScore` is unset or 0.
const ADAPTIVE: &str =
    "upstream's rule: every node below 100 nodes, else 50% less 1% per 125 nodes, \
                        at least 5% and 100 nodes";
