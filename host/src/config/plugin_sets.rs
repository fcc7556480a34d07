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
    let mut plan = ProfilePlan::defaults(modules, kube);
    if let Some(mp) = &pf.plugins.multi_point {
        let f = format!("{field}.plugins.multiPoint");
        multi_point(&mut plan, mp, &f, modules)?;
        plan.note(mp, &f);
    }
    let p = &pf.plugins;
    for (key, set) in [("preFilter", &p.pre_filter), ("filter", &p.filter)] {
        if let Some(s) = set {
            let mut list: Vec<(String, i64)> =
                plan.filters.iter().map(|n| (n.clone(), 0)).collect();
            let f = format!("{field}.plugins.{key}");
            apply_set(&mut list, s, &f, |_| 0)?;
            plan.filters = list.into_iter().map(|(n, _)| n).collect();
            plan.note(s, &f);
        }
    }
    for (key, set) in [("preScore", &p.pre_score), ("score", &p.score)] {
        if let Some(s) = set {
            let f = format!("{field}.plugins.{key}");
            apply_set(&mut plan.scores, s, &f, registry::default_weight)?;
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
            other_point(&mut plan, s, &f, point, modules)?;
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
) -> Result<(), ConfigError> {
    for (i, d) in set.disabled.iter().enumerate() {
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
) -> Result<(), ConfigError> {
    for (i, d) in mp.disabled.iter().enumerate() {
        if d.name == "*" {
            *plan = ProfilePlan {
                sources: std::mem::take(&mut plan.sources),
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
            apply_set(&mut plan.scores, &one, f, registry::default_weight)?;
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
) -> Result<(), ConfigError> {
    for (i, d) in set.disabled.iter().enumerate() {
        if d.name == "*" {
            list.clear();
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
            if !(1..=100).contains(&w) {
                return Err(err(
                    format!("{field}.enabled[{i}].weight"),
                    format!("must be in 1..=100, got {w}"),
                ));
            }
        }
        let weight = e.weight.unwrap_or_else(|| default_weight(&e.name));
        match list.iter_mut().find(|(n, _)| *n == e.name) {
            Some(entry) => entry.1 = weight,
            None => list.push((e.name.clone(), weight)),
        }
    }
    Ok(())
}
