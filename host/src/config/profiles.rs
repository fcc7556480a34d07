//! Building a profile: each plugin of its plan built once (native through
//! its registry factory, wasm through the loader) and enabled at its
//! points, in the plan's order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::framework::registry::{self, Handle};
use crate::framework::{PluginBundle, Point, Profile};
use crate::wasm::{loader, DiskCache, Loader, PluginModule, WasmPlugin, WasmSettings};

use super::file::{ConfigFile, ProfileFile};
use super::plugin_sets::ProfilePlan;
use super::specs::WasmSpec;
use super::{err, ConfigError};

/// The wasm plugins a configuration can name, compiled on first use.
pub struct Modules {
    specs: HashMap<String, WasmSpec>,
    loader: Loader,
    compiled: Vec<(String, Arc<PluginModule>)>,
}

impl Modules {
    pub fn new(specs: HashMap<String, WasmSpec>, cache: Option<DiskCache>) -> Self {
        Self {
            specs,
            loader: Loader::new(cache),
            compiled: Vec::new(),
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.specs.contains_key(name)
    }

    /// The compiled component of wasm plugin `name` (compiled once).
    pub fn get(&mut self, name: &str) -> Result<Arc<PluginModule>, ConfigError> {
        if let Some((_, m)) = self.compiled.iter().find(|(n, _)| n == name) {
            return Ok(m.clone());
        }
        let spec = self
            .specs
            .get(name)
            .ok_or_else(|| err(name, "not a wasm plugin"))?;
        let module = self
            .loader
            .load(name, &spec.source)
            .map_err(|e| err(format!("{}.path", spec.field), e.to_string()))?;
        self.compiled.push((name.to_string(), module.clone()));
        Ok(module)
    }

    /// Whether plugin `name` offers Filter and Score.
    pub fn capabilities(&mut self, name: &str) -> Result<(bool, bool), String> {
        if let Some(r) = registry::lookup(name).filter(|_| registry::native(name).is_some()) {
            return Ok((
                r.points.contains(&Point::Filter),
                r.points.contains(&Point::Score),
            ));
        }
        if !self.has(name) {
            return Err(format!("unknown plugin {name:?}"));
        }
        let m = self.get(name).map_err(|e| e.to_string())?;
        Ok((m.exports.filter, m.exports.score))
    }

    /// The points wasm plugin `name` implements (by its exports).
    pub fn points(&mut self, name: &str) -> Result<Vec<Point>, String> {
        if !self.has(name) {
            return Err(format!("unknown plugin {name:?}"));
        }
        let e = self.get(name).map_err(|e| e.to_string())?.exports;
        Ok([
            (e.filter, Point::Filter),
            (e.score, Point::Score),
            (e.post_filter, Point::PostFilter),
            (e.reserve, Point::Reserve),
            (e.permit, Point::Permit),
            (e.pre_bind, Point::PreBind),
        ]
        .into_iter()
        .filter_map(|(on, p)| on.then_some(p))
        .collect())
    }

    /// Every module compiled, in order.
    pub fn compiled(self) -> Vec<(String, Arc<PluginModule>)> {
        self.compiled
    }
}

/// Checks a profile's own fields; `names` collects the scheduler names.
pub fn check_profile(
    pf: &ProfileFile,
    field: &str,
    names: &mut HashSet<String>,
) -> Result<(), ConfigError> {
    if pf.scheduler_name.is_empty() {
        return Err(err(format!("{field}.schedulerName"), "must not be empty"));
    }
    if !names.insert(pf.scheduler_name.clone()) {
        return Err(err(
            format!("{field}.schedulerName"),
            format!("duplicate {:?}", pf.scheduler_name),
        ));
    }
    if let Some(p) = pf.percentage_of_nodes_to_score.filter(|p| *p > 100) {
        return Err(err(
            format!("{field}.percentageOfNodesToScore"),
            format!("must be in 0..=100, got {p}"),
        ));
    }
    Ok(())
}

/// A built profile.
pub struct Built {
    pub profile: Profile,
    pub handle: Handle,
    pub wasm: Vec<Arc<WasmPlugin>>,
}

/// Builds profile `pf` from its plan; its plugins get `base`'s shared
/// parts (clock, pod groups) and waiting pods of the profile's own.
pub fn build(
    file: &ConfigFile,
    pf: &ProfileFile,
    field: &str,
    plan: &ProfilePlan,
    modules: &mut Modules,
    workers: usize,
    base: &Handle,
) -> Result<Built, ConfigError> {
    check_plugin_config(pf, field, modules)?;
    let handle = base.for_profile();
    let mut b = Builder {
        args: &plan.args,
        field,
        handle: handle.clone(),
        workers,
        bundles: HashMap::new(),
        wasm: Vec::new(),
    };
    let pct = pf
        .percentage_of_nodes_to_score
        .or(file.percentage_of_nodes_to_score);
    let mut profile = Profile::new(&pf.scheduler_name, pct);
    for name in &plan.filters {
        let bundle = b.bundle(name, &format!("{field}.plugins.filter ({name})"), modules)?;
        enable(
            &mut profile,
            &bundle,
            Point::Filter,
            0,
            &b.point_field(name, "filter"),
            modules,
        )?;
    }
    for (name, weight) in &plan.scores {
        let bundle = b.bundle(name, &format!("{field}.plugins.score ({name})"), modules)?;
        enable(
            &mut profile,
            &bundle,
            Point::Score,
            *weight,
            &b.point_field(name, "score"),
            modules,
        )?;
    }
    for name in &plan.others {
        b.bundle(name, &format!("{field}.plugins ({name})"), modules)?;
    }
    enable_preparations(&mut profile, plan, &b.bundles);
    let members = member_order(plan);
    for name in &members {
        for point in [
            Point::PreEnqueue,
            Point::PostFilter,
            Point::Reserve,
            Point::Permit,
            Point::PreBind,
            Point::Bind,
            Point::PostBind,
        ] {
            profile.enable(&b.bundles[name], point, 0);
        }
        profile.attach(&b.bundles[name]);
    }
    if let Some(name) = queue_sort_of(plan, &members, &b.bundles) {
        profile.enable(&b.bundles[&name], Point::QueueSort, 0);
    }
    Ok(Built {
        profile,
        handle,
        wasm: b.wasm,
    })
}

/// Each plugin's args as it is built with them: its `pluginConfig`
/// entry's, over the args the defaults give it.
pub fn effective_args(
    pf: &ProfileFile,
    plan: &ProfilePlan,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut args: std::collections::BTreeMap<String, serde_json::Value> = pf
        .plugin_config
        .iter()
        .map(|c| (c.name.clone(), c.args.clone()))
        .collect();
    for d in &plan.default_args {
        let merged = super::defaults::merge(&d.args, args.get(d.plugin));
        args.insert(d.plugin.to_string(), merged);
    }
    args
}

/// Every `pluginConfig` entry names a plugin that exists.
fn check_plugin_config(
    pf: &ProfileFile,
    field: &str,
    modules: &Modules,
) -> Result<(), ConfigError> {
    for (i, c) in pf.plugin_config.iter().enumerate() {
        if registry::native(&c.name).is_none() && !modules.has(&c.name) {
            return Err(err(
                format!("{field}.pluginConfig[{i}].name"),
                format!("unknown plugin {:?}", c.name),
            ));
        }
    }
    Ok(())
}

/// PreFilter runs for the plugins at Filter or Score, PreScore for those
/// at Score: they prepare what those points use.
fn enable_preparations(
    profile: &mut Profile,
    plan: &ProfilePlan,
    bundles: &HashMap<String, PluginBundle>,
) {
    let scored: Vec<&String> = plan.scores.iter().map(|(n, _)| n).collect();
    let mut seen = HashSet::new();
    for name in plan.filters.iter().chain(scored.iter().copied()) {
        if seen.insert(name) {
            profile.enable(&bundles[name], Point::PreFilter, 0);
        }
    }
    for name in scored {
        profile.enable(&bundles[name], Point::PreScore, 0);
    }
}

/// The plugin that sorts the queue: the one `plugins.queueSort` names,
/// else a member's other than PrioritySort (Coscheduling's, enabled
/// through `multiPoint`), else PrioritySort.
fn queue_sort_of(
    plan: &ProfilePlan,
    members: &[String],
    bundles: &HashMap<String, PluginBundle>,
) -> Option<String> {
    if let Some(name) = &plan.queue_sort {
        return Some(name.clone());
    }
    let sorts = |n: &&String| bundles[n.as_str()].has(Point::QueueSort);
    let default = registry::lookup("PrioritySort").map(|r| r.name);
    members
        .iter()
        .filter(sorts)
        .find(|n| Some(n.as_str()) != default)
        .or_else(|| members.iter().find(sorts))
        .cloned()
}

/// Each plugin of the plan once: Filter order, then Score, then others.
fn member_order(plan: &ProfilePlan) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let all = plan
        .filters
        .iter()
        .chain(plan.scores.iter().map(|(n, _)| n))
        .chain(&plan.others);
    for n in all {
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

/// Enables `bundle` at `point`, or says why it cannot run there.
fn enable(
    profile: &mut Profile,
    bundle: &PluginBundle,
    point: Point,
    weight: i64,
    field: &str,
    modules: &mut Modules,
) -> Result<(), ConfigError> {
    if profile.enable(bundle, point, weight) {
        return Ok(());
    }
    let name = bundle.name();
    let cause = if modules.has(name) {
        let exports = modules.get(name)?.exports;
        let what = if point == Point::Filter {
            "filter"
        } else {
            "score"
        };
        format!("{name} does not export {what} (exports: {exports})")
    } else {
        format!("{name} has no {point} extension point")
    };
    Err(err(field, cause))
}

/// Builds each plugin of a profile once.
struct Builder<'a> {
    /// Each plugin's args: its `pluginConfig` entry's over the defaults'
    /// (the plan's, [`effective_args`]).
    args: &'a std::collections::BTreeMap<String, serde_json::Value>,
    field: &'a str,
    handle: Handle,
    workers: usize,
    bundles: HashMap<String, PluginBundle>,
    wasm: Vec<Arc<WasmPlugin>>,
}

impl Builder<'_> {
    fn point_field(&self, name: &str, point: &str) -> String {
        format!("{}.plugins.{point} ({name})", self.field)
    }

    fn args(&self, name: &str) -> Option<&serde_json::Value> {
        self.args.get(name)
    }

    /// The plugin `name` (built on first use); `field` names where it was
    /// enabled, for an unknown name.
    fn bundle(
        &mut self,
        name: &str,
        field: &str,
        modules: &mut Modules,
    ) -> Result<PluginBundle, ConfigError> {
        if let Some(b) = self.bundles.get(name) {
            return Ok(b.clone());
        }
        let bundle = match registry::native(name) {
            Some(factory) => factory(self.args(name), &self.handle)
                .map_err(|c| err(format!("{}.pluginConfig({name})", self.field), c))?,
            None if modules.has(name) => self.start_wasm(name, modules)?,
            None => {
                let cause = format!(
                    "unknown plugin {name:?} (core plugins: {}; wasm plugins need a wasmPlugins entry)",
                    registry::native_names().join(", ")
                );
                return Err(err(field, cause));
            }
        };
        self.bundles.insert(name.to_string(), bundle.clone());
        Ok(bundle)
    }

    fn start_wasm(
        &mut self,
        name: &str,
        modules: &mut Modules,
    ) -> Result<PluginBundle, ConfigError> {
        let module = modules.get(name)?;
        let spec = &modules.specs[name];
        let args = self
            .args(name)
            .filter(|a| !a.is_null())
            .map(|a| a.to_string())
            .unwrap_or_else(|| "{}".into());
        let settings = WasmSettings {
            args,
            limits: spec.limits,
            failure_policy: spec.failure_policy,
        };
        let plugin = modules
            .loader
            .start(name, module, settings, self.workers, self.handle.clone())
            .map_err(|f| {
                err(
                    format!("{}.plugins ({name})", self.field),
                    format!("plugin {name} failed to start: {f}"),
                )
            })?;
        self.wasm.push(plugin.clone());
        Ok(loader::bundle(&plugin))
    }
}
