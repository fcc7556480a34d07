//! Which plugins a profile runs at Filter and Score (with weights), and
//! which it runs only at other points: the registry's defaults, then
//! `plugins.multiPoint`, then `plugins.filter` and `plugins.score`.

use crate::framework::registry::{self, Factory};
use crate::framework::Point;

use super::file::{PluginSet, ProfileFile};
use super::profiles::Modules;
use super::{err, ConfigError};

/// A profile's plugin names per point, resolved from its configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfilePlan {
    pub filters: Vec<String>,
    pub scores: Vec<(String, i64)>,
    /// Plugins with neither Filter nor Score (Bind, Permit, ...).
    pub others: Vec<String>,
    /// The QueueSort plugin `plugins.queueSort` names, if it names one
    /// (else a member's other than PrioritySort, else PrioritySort).
    pub queue_sort: Option<String>,
    /// Where each plugin was enabled: the defaults, or the last field of
    /// the file that named it (plugins no longer in the plan included).
    pub sources: std::collections::BTreeMap<String, Source>,
    /// Args the defaults give plugins of the plan ([`super::defaults`]).
    pub default_args: Vec<super::defaults::DefaultArgs>,
    /// Each plugin's args as it is built with them (`pluginConfig` over
    /// `default_args`; [`super::profiles::effective_args`]).
    pub args: std::collections::BTreeMap<String, serde_json::Value>,
    /// `percentageOfNodesToScore` and where it is set (`the profile's`,
    /// `the file's`); `None`: nowhere (upstream's adaptive rule).
    pub percentage_of_nodes_to_score: Option<(u32, &'static str)>,
    /// What the profile names that is not run, one line each (a
    /// kube-scheduler plugin wasmsched does not have yet): `run` logs
    /// them at start, `profiles` prints them.
    pub notes: Vec<String>,
}

/// Where a plugin of a profile's chain comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The default profile: wasmsched's, or kube-scheduler's for a
    /// `KubeSchedulerConfiguration` file.
    Default { kube: bool },
    /// An `enabled` list of the configuration (`field`); `file` names the
    /// file or fragment when the configuration includes fragments.
    File { field: String, file: Option<String> },
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default { kube: false } => write!(f, "default (wasmsched)"),
            Source::Default { kube: true } => write!(f, "default (kube-scheduler)"),
            Source::File { field, file: None } => write!(f, "file ({field})"),
            Source::File {
                field,
                file: Some(name),
            } => write!(f, "file {name} ({field})"),
        }
    }
}

impl ProfilePlan {
    /// The registry's default profile (built-in wasm plugins only when
    /// compiled into this binary); for a `KubeSchedulerConfiguration`
    /// file, kube-scheduler's ([`registry::KUBE_SCHEDULER_DEFAULTS`]).
    fn defaults(modules: &Modules, kube: bool) -> Self {
        let mut plan = Self::default();
        for r in registry::REGISTRY.iter().filter(|r| r.default) {
            if matches!(r.factory, Factory::BuiltinWasm(_)) && !modules.has(r.name) {
                continue;
            }
            if kube && !registry::KUBE_SCHEDULER_DEFAULTS.contains(&r.name) {
                continue;
            }
            plan.add(
                r.name,
                r.points.contains(&Point::Filter),
                r.points.contains(&Point::Score),
            );
            plan.sources
                .insert(r.name.to_string(), Source::Default { kube });
        }
        plan
    }

    /// Records that `set`'s enabled plugins come from `field`.
    fn note(&mut self, set: &PluginSet, field: &str) {
        for e in &set.enabled {
            let source = Source::File {
                field: field.to_string(),
                file: None,
            };
            self.sources.insert(e.name.clone(), source);
        }
    }

    fn add(&mut self, name: &str, filter: bool, score: bool) {
        if filter && !self.filters.iter().any(|n| n == name) {
            self.filters.push(name.to_string());
        }
        if score && !self.scores.iter().any(|(n, _)| n == name) {
            self.scores
                .push((name.to_string(), registry::default_weight(name)));
        }
        if !filter && !score && !self.others.iter().any(|n| n == name) {
            self.others.push(name.to_string());
        }
    }

    /// Removes `name` everywhere; false when it was nowhere.
    fn remove(&mut self, name: &str) -> bool {
        let before = self.filters.len() + self.scores.len() + self.others.len();
        self.filters.retain(|n| n != name);
        self.scores.retain(|(n, _)| n != name);
        self.others.retain(|n| n != name);
        before != self.filters.len() + self.scores.len() + self.others.len()
    }
}

/// The plan of profile `pf` (`field` names it in errors).
pub fn resolve(
    pf: &ProfileFile,
    field: &str,
    modules: &mut Modules,
    kube: bool,
) -> Result<ProfilePlan, ConfigError> {
    let cleaned = without_missing(pf, field)?;
    let pf = &cleaned;
    let mut plan = ProfilePlan::defaults(modules, kube);
    if let Some(mp) = &pf.plugins.multi_point {
        let f = format!("{field}.plugins.multiPoint");
        multi_point(&mut plan, mp, &f, modules, kube)?;
        plan.note(mp, &f);
    }
    let p = &pf.plugins;
    for (key, set) in [("preFilter", &p.pre_filter), ("filter", &p.filter)] {
        if let Some(s) = set {
            let mut list: Vec<(String, i64)> =
                plan.filters.iter().map(|n| (n.clone(), 0)).collect();
            let f = format!("{field}.plugins.{key}");
            apply_set(&mut list, s, &f, |_| 0, kube)?;
            plan.filters = list.into_iter().map(|(n, _)| n).collect();
            plan.note(s, &f);
        }
    }
    for (key, set) in [("preScore", &p.pre_score), ("score", &p.score)] {
        if let Some(s) = set {
            let f = format!("{field}.plugins.{key}");
            apply_set(&mut plan.scores, s, &f, registry::default_weight, kube)?;
            plan.note(s, &f);
        }
    }
    if let Some(s) = &p.queue_sort {
        let f = format!("{field}.plugins.queueSort");
        queue_sort(&mut plan, s, &f, modules)?;
        plan.note(s, &f);
    }
    let others = [
        ("preEnqueue", &p.pre_enqueue, Point::PreEnqueue),
        ("postFilter", &p.post_filter, Point::PostFilter),
        ("reserve", &p.reserve, Point::Reserve),
        ("permit", &p.permit, Point::Permit),
        ("preBind", &p.pre_bind, Point::PreBind),
        ("bind", &p.bind, Point::Bind),
        ("postBind", &p.post_bind, Point::PostBind),
    ];
    for (key, set, point) in others {
        if let Some(s) = set {
            let f = format!("{field}.plugins.{key}");
            other_point(&mut plan, s, &f, point, modules, kube)?;
            plan.note(s, &f);
        }
    }
    plan.default_args = super::defaults::args(&plan, kube);
    Ok(plan)
}

/// `plugins.queueSort`: one plugin sorts the queue. `disabled` may name
/// `*` or the plugins it replaces; the last of `enabled` is the one.
fn queue_sort(
    plan: &mut ProfilePlan,
    set: &PluginSet,
    f: &str,
    modules: &mut Modules,
) -> Result<(), ConfigError> {
    for (i, d) in set.disabled.iter().enumerate() {
        if d.name != "*" && !implements(&d.name, Point::QueueSort, modules) {
            return Err(err(
                format!("{f}.disabled[{i}].name"),
                format!("plugin {:?} does not implement QueueSort", d.name),
            ));
        }
    }
    for (i, e) in set.enabled.iter().enumerate() {
        if !implements(&e.name, Point::QueueSort, modules) {
            return Err(err(
                format!("{f}.enabled[{i}].name"),
                format!("plugin {:?} does not implement QueueSort", e.name),
            ));
        }
        let (filter, score) = modules
            .capabilities(&e.name)
            .map_err(|c| err(format!("{f}.enabled[{i}].name"), c))?;
        plan.add(&e.name, filter, score);
        plan.queue_sort = Some(e.name.clone());
    }
    Ok(())
}

/// A set at a point other than Filter, Score and QueueSort.
fn other_point(
    plan: &mut ProfilePlan,
    set: &PluginSet,
    f: &str,
    point: Point,
    modules: &mut Modules,
    kube: bool,
) -> Result<(), ConfigError> {
    for (i, d) in set.disabled.iter().enumerate() {
        if kube && absent_is_fine(plan, &d.name) {
            continue;
        }
        if d.name == "*" {
            let at_point: Vec<String> = plan
                .others
                .iter()
                .filter(|n| implements(n, point, modules))
                .cloned()
                .collect();
            at_point.iter().for_each(|n| {
                plan.remove(n);
            });
        } else if !implements(&d.name, point, modules) || !plan.remove(&d.name) {
            return Err(err(
                format!("{f}.disabled[{i}].name"),
                format!("plugin {:?} is not enabled here", d.name),
            ));
        }
    }
    for (i, e) in set.enabled.iter().enumerate() {
        if !implements(&e.name, point, modules) {
            return Err(err(
                format!("{f}.enabled[{i}].name"),
                format!("plugin {:?} does not implement {point:?}", e.name),
            ));
        }
        let (filter, score) = modules
            .capabilities(&e.name)
            .map_err(|c| err(format!("{f}.enabled[{i}].name"), c))?;
        plan.add(&e.name, filter, score);
    }
    Ok(())
}

/// Whether plugin `name` implements `point` (native: its registry row;
/// wasm: its exports).
fn implements(name: &str, point: Point, modules: &mut Modules) -> bool {
    if let Some(r) = registry::lookup(name).filter(|_| registry::native(name).is_some()) {
        return r.points.contains(&point);
    }
    modules
        .points(name)
        .is_ok_and(|points| points.contains(&point))
}

/// `multiPoint`: disabled plugins leave every point, enabled ones join the
/// points they implement.
fn multi_point(
    plan: &mut ProfilePlan,
    mp: &PluginSet,
    f: &str,
    modules: &mut Modules,
    kube: bool,
) -> Result<(), ConfigError> {
    for (i, d) in mp.disabled.iter().enumerate() {
        if kube && absent_is_fine(plan, &d.name) {
            continue;
        }
        if d.name == "*" {
            *plan = ProfilePlan {
                sources: std::mem::take(&mut plan.sources),
                notes: std::mem::take(&mut plan.notes),
                ..ProfilePlan::default()
            };
        } else if !plan.remove(&d.name) {
            return Err(err(
                format!("{f}.disabled[{i}].name"),
                format!("plugin {:?} is not enabled here", d.name),
            ));
        }
    }
    for (i, e) in mp.enabled.iter().enumerate() {
        let (filter, score) = modules
            .capabilities(&e.name)
            .map_err(|c| err(format!("{f}.enabled[{i}].name"), c))?;
        plan.add(&e.name, filter, score);
        if score {
            let one = PluginSet {
                enabled: vec![e.clone()],
                disabled: vec![],
            };
            apply_set(&mut plan.scores, &one, f, registry::default_weight, kube)?;
        }
    }
    Ok(())
}

/// A point's `enabled`/`disabled` lists applied to its plugins.
fn apply_set(
    list: &mut Vec<(String, i64)>,
    set: &PluginSet,
    field: &str,
    default_weight: impl Fn(&str) -> i64,
    kube: bool,
) -> Result<(), ConfigError> {
    for (i, d) in set.disabled.iter().enumerate() {
        if d.name == "*" {
            list.clear();
        } else if kube && registry::lookup(&d.name).is_some() {
            // kube-scheduler: disabling a plugin that is not enabled at
            // the point changes nothing.
            list.retain(|(n, _)| *n != d.name);
        } else if !list.iter().any(|(n, _)| *n == d.name) {
            return Err(err(
                format!("{field}.disabled[{i}].name"),
                format!("plugin {:?} is not enabled here", d.name),
            ));
        } else {
            list.retain(|(n, _)| *n != d.name);
        }
    }
    for (i, e) in set.enabled.iter().enumerate() {
        if let Some(w) = e.weight {
            if !(0..=i64::from(i32::MAX)).contains(&w) {
                return Err(err(
                    format!("{field}.enabled[{i}].weight"),
                    format!(
                        "must be between 0 and {} (0 counts as 1, as in kube-scheduler), got {w}",
                        i32::MAX
                    ),
                ));
            }
        }
        // kube-scheduler: a weight of 0 counts as 1; in its own file an
        // entry without a weight for one of its plugins has weight 1 too
        // (the entry replaces the default one, weight included). A
        // wasmsched plugin, and any plugin in wasmsched's file, keeps its
        // default weight.
        let upstream = kube && registry::KUBE_SCHEDULER_DEFAULTS.contains(&e.name.as_str());
        let weight = match e.weight {
            Some(0) => 1,
            Some(w) => w,
            None if upstream => 1,
            None => default_weight(&e.name),
        };
        match list.iter_mut().find(|(n, _)| *n == e.name) {
            Some(entry) => entry.1 = weight,
            None => list.push((e.name.clone(), weight)),
        }
    }
    Ok(())
}

/// Why a configuration naming kube-scheduler 1.37 plugin `name` is
/// refused, when wasmsched does not implement it (every such plugin is
/// off by default upstream: enabling it asks for a behaviour that is not
/// here).
fn missing(name: &str) -> Option<&'static str> {
    Some(match name {
        "GangScheduling" | "PodGroupPodsCount" | "TopologyPlacementGenerator" => {
            "the Workload API's pod groups (gates GenericWorkload, TopologyAwareWorkloadScheduling) are not implemented yet (issue 50); scheduler-plugins' PodGroup is, through Coscheduling"
        }
        "DeferredPodScheduling" => {
            "gate InPlacePodVerticalScalingSchedulerPreemption (alpha in 1.37, off) is not implemented"
        }
        _ => return None,
    })
}

/// `pf` with the plugins wasmsched does not have refused, and with the
/// workload-aware points checked.
fn without_missing(pf: &ProfileFile, field: &str) -> Result<ProfileFile, ConfigError> {
    let mut pf = pf.clone();
    let p = &mut pf.plugins;
    for (key, set) in [
        ("placementGenerate", &p.placement_generate),
        ("placementScore", &p.placement_score),
        ("podGroupPostFilter", &p.pod_group_post_filter),
    ] {
        if let Some((i, e)) = set.iter().flat_map(|s| s.enabled.iter()).enumerate().next() {
            return Err(err(
                format!("{field}.plugins.{key}.enabled[{i}].name"),
                format!(
                    "{:?}: {key} is a workload-aware extension point of Kubernetes 1.37 (the Workload API's pod groups), not implemented yet (issue 50)",
                    e.name
                ),
            ));
        }
    }
    let sets = [
        ("multiPoint", &mut p.multi_point),
        ("preEnqueue", &mut p.pre_enqueue),
        ("queueSort", &mut p.queue_sort),
        ("preFilter", &mut p.pre_filter),
        ("filter", &mut p.filter),
        ("postFilter", &mut p.post_filter),
        ("preScore", &mut p.pre_score),
        ("score", &mut p.score),
        ("reserve", &mut p.reserve),
        ("permit", &mut p.permit),
        ("preBind", &mut p.pre_bind),
        ("bind", &mut p.bind),
        ("postBind", &mut p.post_bind),
    ];
    for (key, set) in sets {
        let Some(set) = set else { continue };
        for (i, e) in set.enabled.iter().enumerate() {
            if let Some(why) = missing(&e.name) {
                return Err(err(
                    format!("{field}.plugins.{key}.enabled[{i}].name"),
                    format!("kube-scheduler plugin {:?}: {why}", e.name),
                ));
            }
        }
        set.disabled.retain(|e| missing(&e.name).is_none());
    }
    pf.plugin_config.retain(|c| missing(&c.name).is_none());
    Ok(pf)
}

/// In kube-scheduler's own file, a `disabled` entry naming a plugin the
/// profile does not run at the point is no error (upstream merges the
/// lists and ignores it): true when `name` is such an entry.
fn absent_is_fine(plan: &ProfilePlan, name: &str) -> bool {
    name != "*"
        && registry::lookup(name).is_some()
        && !plan.filters.iter().any(|n| n == name)
        && !plan.scores.iter().any(|(n, _)| n == name)
        && !plan.others.iter().any(|n| n == name)
}
