//! `wasmsched profiles`: each profile's effective plugin chain per
//! extension point, where each plugin comes from (the defaults, the file,
//! a fragment it includes), the args the defaults add, and the wasm
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
/// order), then the args the defaults add.
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
    for d in &plan.default_args {
        let _ = writeln!(
            out,
            "  default args of {}: {} ({})",
            d.plugin, d.args, d.why
        );
    }
}
