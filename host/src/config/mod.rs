//! Configuration: parsing, defaults, and building the profiles' plugin
//! chains (native core plugins and wasm components).

pub mod file;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use crate::framework::{FilterEntry, Framework, Profile, ScoreEntry, WeightedScore};
use crate::input::{self, ReadBudget};
use crate::plugins;
use crate::wasm::{
    builtin, DiskCache, FailurePolicy, Limits, PluginModule, WasmPlugin, WasmSettings,
};

pub use file::ConfigFile;

/// The profile served when no configuration file is given.
pub const DEFAULT_SCHEDULER_NAME: &str = "gpu-scheduler";

/// Built-in wasm plugins: (plugin name, crate name, default score weight).
pub const BUILTIN_WASM: &[(&str, &str, i64)] = &[
    ("GpuTopology", "gpu-topology", 3),
    ("NetworkLocality", "network-locality", 2),
];

/// Built-in deletion-cost policies: (plugin name, crate name). They take
/// part in no profile; `deletionCost.plugin` names one.
pub const BUILTIN_DELETION_COST: &[(&str, &str)] = &[("DeletionCost", "deletion-cost")];

/// A configuration that cannot be used, naming the field.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{field}: {cause}")]
pub struct ConfigError {
    pub field: String,
    pub cause: String,
}

fn err(field: impl Into<String>, cause: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        cause: cause.into(),
    }
}

/// Parses a configuration file's text (YAML or JSON) within the default
/// input limits (see [`crate::input`]).
pub fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
    let file: ConfigFile = input::yaml::typed(text, &input::Limits::DEFAULT).map_err(|e| {
        // The message may already start with the path; say it once. It
        // ends with " at line L column C", which helps: keep that.
        let cause = e
            .cause
            .strip_prefix(&format!("{}: ", e.path))
            .map(str::to_string)
            .unwrap_or(e.cause);
        err(
            if e.path == "." {
                "config".to_string()
            } else {
                e.path
            },
            cause,
        )
    })?;
    file::check(&file)?;
    Ok(file)
}

/// Reads and parses a configuration file (at most
/// [`input::Limits::file_bytes`]).
pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
    let text = ReadBudget::new(input::Limits::DEFAULT)
        .read(path)
        .map_err(|e| err(path.display().to_string(), e.to_string()))?;
    parse(&text).map_err(|e| err(format!("{}: {}", path.display(), e.field), e.cause))
}

/// Where a wasm plugin's component comes from.
#[derive(Debug, Clone)]
enum Source {
    Builtin(&'static str, &'static [u8]),
    File(std::path::PathBuf),
}

#[derive(Debug, Clone)]
struct WasmSpec {
    source: Source,
    limits: Limits,
    failure_policy: FailurePolicy,
    /// Field path of its `wasmPlugins` entry, for errors.
    field: String,
    /// Precompiled components on disk (`pluginCacheDir`).
    cache: Option<DiskCache>,
}

/// Every profile, ready to schedule.
pub struct Scheduler {
    pub profiles: Vec<Framework>,
    pub parallelism: usize,
    /// Compiled modules by plugin name (for `plugin` status output).
    pub modules: Vec<(String, Arc<PluginModule>)>,
}

impl Scheduler {
    /// The profile serving `scheduler_name`.
    pub fn profile(&self, scheduler_name: &str) -> Option<&Framework> {
        self.profiles
            .iter()
            .find(|f| f.scheduler_name() == scheduler_name)
    }
}

fn duration(field: &str, s: &Option<String>, default: Duration) -> Result<Duration, ConfigError> {
    match s {
        None => Ok(default),
        Some(s) => {
            let d = humantime::parse_duration(s)
                .map_err(|e| err(field, format!("invalid duration {s:?}: {e}")))?;
            if d.is_zero() {
                return Err(err(field, "must be positive"));
            }
            Ok(d)
        }
    }
}

/// The precompiled-component cache: `pluginCacheDir` (relative to
/// `base`), else `$WASMSCHED_PLUGIN_CACHE`, else none. Creates the directory.
pub fn plugin_cache(file: &ConfigFile, base: &Path) -> Result<Option<DiskCache>, ConfigError> {
    let (field, dir) = match (&file.plugin_cache_dir, DiskCache::env_dir()) {
        (Some(d), _) => ("pluginCacheDir", base.join(d)),
        (None, Some(d)) => (crate::wasm::cache::CACHE_ENV, d),
        (None, None) => return Ok(None),
    };
    DiskCache::new(&dir)
        .map(Some)
        .map_err(|e| err(field, format!("{}: {e}", dir.display())))
}

/// The component file of each `wasmPlugins` entry that has a `path`
/// (resolved against `base`), in file order: what hot reload watches.
pub fn plugin_files(file: &ConfigFile, base: &Path) -> Vec<(String, std::path::PathBuf)> {
    file.wasm_plugins
        .iter()
        .filter_map(|w| Some((w.name.clone(), base.join(w.path.as_ref()?))))
        .collect()
}

fn wasm_specs(file: &ConfigFile, base: &Path) -> Result<HashMap<String, WasmSpec>, ConfigError> {
    let cache = plugin_cache(file, base)?;
    let mut specs = HashMap::new();
    let builtins = BUILTIN_WASM
        .iter()
        .map(|(name, krate, _)| (*name, *krate))
        .chain(BUILTIN_DELETION_COST.iter().copied());
    for (name, krate) in builtins {
        if let Some((_, bytes)) = builtin::BUILTIN.iter().find(|(c, _)| *c == krate) {
            specs.insert(
                name.to_string(),
                WasmSpec {
                    source: Source::Builtin(krate, bytes),
                    limits: Limits::default(),
                    failure_policy: FailurePolicy::Fail,
                    field: format!("built-in plugin {name}"),
                    cache: cache.clone(),
                },
            );
        }
    }
    for (i, w) in file.wasm_plugins.iter().enumerate() {
        let field = format!("wasmPlugins[{i}]");
        if w.name.is_empty() {
            return Err(err(format!("{field}.name"), "must not be empty"));
        }
        if plugins::NAMES.contains(&w.name.as_str()) {
            return Err(err(
                format!("{field}.name"),
                format!("{:?} is a native core plugin", w.name),
            ));
        }
        let source = match (&w.path, specs.get(&w.name)) {
            (Some(p), _) => Source::File(if p.is_absolute() {
                p.clone()
            } else {
                base.join(p)
            }),
            (None, Some(existing)) => existing.source.clone(),
            (None, None) => {
                return Err(err(
                    format!("{field}.path"),
                    format!("required: {:?} is not a built-in plugin", w.name),
                ))
            }
        };
        let defaults = Limits::default();
        let memory = match &w.memory_limit {
            None => defaults.memory,
            Some(q) => {
                let v = crate::model::quantity::value(q)
                    .map_err(|e| err(format!("{field}.memoryLimit"), e.to_string()))?;
                if v < (1 << 20) {
                    return Err(err(format!("{field}.memoryLimit"), "must be at least 1Mi"));
                }
                v as usize
            }
        };
        let limits = Limits {
            call_timeout: duration(
                &format!("{field}.timeout"),
                &w.timeout,
                defaults.call_timeout,
            )?,
            init_timeout: duration(
                &format!("{field}.initTimeout"),
                &w.init_timeout,
                defaults.init_timeout,
            )?,
            memory,
        };
        specs.insert(
            w.name.clone(),
            WasmSpec {
                source,
                limits,
                failure_policy: w.failure_policy.unwrap_or_default(),
                field,
                cache: cache.clone(),
            },
        );
    }
    Ok(specs)
}

/// The default plugin lists of a profile: (filter names, score names with weights).
fn default_points(specs: &HashMap<String, WasmSpec>) -> (Vec<String>, Vec<(String, i64)>) {
    let mut filters = Vec::new();
    let mut scores = Vec::new();
    for name in plugins::NAMES {
        if let Ok(p) = plugins::build(name, None) {
            if p.filter.is_some() {
                filters.push(name.to_string());
            }
            if p.score.is_some() {
                scores.push((name.to_string(), plugins::default_weight(name).unwrap_or(1)));
            }
        }
    }
    for (name, _, weight) in BUILTIN_WASM {
        if specs.contains_key(*name) {
            filters.push(name.to_string());
            scores.push((name.to_string(), *weight));
        }
    }
    (filters, scores)
}

fn apply_set(
    list: &mut Vec<(String, i64)>,
    set: &file::PluginSet,
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

/// Builds every profile's plugin chain. `base` resolves relative plugin
/// paths (the configuration file's directory).
pub fn build(file: &ConfigFile, base: &Path, seed: u64) -> Result<Scheduler, ConfigError> {
    if let Some(v) = &file.api_version {
        if !["wasmsched.io/v1alpha1", "kubescheduler.config.k8s.io/v1"].contains(&v.as_str()) {
            return Err(err(
                "apiVersion",
                format!("unsupported {v:?} (use wasmsched.io/v1alpha1)"),
            ));
        }
    }
    if let Some(k) = &file.kind {
        if !["WasmSchedulerConfiguration", "KubeSchedulerConfiguration"].contains(&k.as_str()) {
            return Err(err(
                "kind",
                format!("unsupported {k:?} (use WasmSchedulerConfiguration)"),
            ));
        }
    }
    let parallelism = match file.parallelism {
        Some(0) => return Err(err("parallelism", "must be at least 1")),
        Some(p) => p,
        None => std::thread::available_parallelism().map_or(2, |n| n.get()),
    };
    if let Some(p) = file.percentage_of_nodes_to_score.filter(|p| *p > 100) {
        return Err(err(
            "percentageOfNodesToScore",
            format!("must be in 0..=100, got {p}"),
        ));
    }
    let specs = wasm_specs(file, base)?;
    let default_profile = [file::ProfileFile {
        scheduler_name: DEFAULT_SCHEDULER_NAME.into(),
        ..Default::default()
    }];
    let profiles: &[file::ProfileFile] = if file.profiles.is_empty() {
        &default_profile
    } else {
        &file.profiles
    };

    let mut modules: HashMap<String, Arc<PluginModule>> = HashMap::new();
    let mut module_list = Vec::new();
    let mut seen_names = std::collections::HashSet::new();
    // Every declared component is checked at start, used or not.
    for w in &file.wasm_plugins {
        if w.path.is_some() {
            compile(&w.name, &specs[&w.name], &mut modules, &mut module_list)?;
        }
    }
    let mut frameworks = Vec::new();
    for (pi, pf) in profiles.iter().enumerate() {
        let pfield = format!("profiles[{pi}]");
        if pf.scheduler_name.is_empty() {
            return Err(err(format!("{pfield}.schedulerName"), "must not be empty"));
        }
        if !seen_names.insert(pf.scheduler_name.clone()) {
            return Err(err(
                format!("{pfield}.schedulerName"),
                format!("duplicate {:?}", pf.scheduler_name),
            ));
        }
        if let Some(p) = pf.percentage_of_nodes_to_score.filter(|p| *p > 100) {
            return Err(err(
                format!("{pfield}.percentageOfNodesToScore"),
                format!("must be in 0..=100, got {p}"),
            ));
        }
        let (default_filters, mut scores) = default_points(&specs);
        let mut filters: Vec<(String, i64)> = default_filters.into_iter().map(|n| (n, 0)).collect();
        let weight_of = |name: &str| {
            plugins::default_weight(name)
                .or_else(|| {
                    BUILTIN_WASM
                        .iter()
                        .find(|(n, _, _)| *n == name)
                        .map(|(_, _, w)| *w)
                })
                .unwrap_or(1)
        };
        if let Some(mp) = &pf.plugins.multi_point {
            let f = format!("{pfield}.plugins.multiPoint");
            for (i, d) in mp.disabled.iter().enumerate() {
                if d.name == "*" {
                    filters.clear();
                    scores.clear();
                    continue;
                }
                let before = filters.len() + scores.len();
                filters.retain(|(n, _)| *n != d.name);
                scores.retain(|(n, _)| *n != d.name);
                if before == filters.len() + scores.len() {
                    return Err(err(
                        format!("{f}.disabled[{i}].name"),
                        format!("plugin {:?} is not enabled here", d.name),
                    ));
                }
            }
            for (i, e) in mp.enabled.iter().enumerate() {
                let (has_filter, has_score) =
                    capabilities(&e.name, &specs, &mut modules, &mut module_list)
                        .map_err(|c| err(format!("{f}.enabled[{i}].name"), c))?;
                if has_filter && !filters.iter().any(|(n, _)| *n == e.name) {
                    filters.push((e.name.clone(), 0));
                }
                if has_score {
                    apply_set(
                        &mut scores,
                        &file::PluginSet {
                            enabled: vec![e.clone()],
                            disabled: vec![],
                        },
                        &f,
                        weight_of,
                    )?;
                }
            }
        }
        if let Some(s) = &pf.plugins.filter {
            apply_set(&mut filters, s, &format!("{pfield}.plugins.filter"), |_| 0)?;
        }
        if let Some(s) = &pf.plugins.score {
            apply_set(
                &mut scores,
                s,
                &format!("{pfield}.plugins.score"),
                weight_of,
            )?;
        }

        let args_of = |name: &str| {
            pf.plugin_config
                .iter()
                .find(|c| c.name == name)
                .map(|c| &c.args)
        };
        for (i, c) in pf.plugin_config.iter().enumerate() {
            if !plugins::NAMES.contains(&c.name.as_str()) && !specs.contains_key(&c.name) {
                return Err(err(
                    format!("{pfield}.pluginConfig[{i}].name"),
                    format!("unknown plugin {:?}", c.name),
                ));
            }
        }
        // One plugin object per profile and name, shared by its points.
        let mut core: HashMap<String, plugins::CorePlugin> = HashMap::new();
        let mut wasm: HashMap<String, Arc<WasmPlugin>> = HashMap::new();
        let mut get = |name: &str,
                       field: &str|
         -> Result<
            (Option<plugins::CorePlugin>, Option<Arc<WasmPlugin>>),
            ConfigError,
        > {
            if plugins::NAMES.contains(&name) {
                if !core.contains_key(name) {
                    let p = plugins::build(name, args_of(name))
                        .map_err(|c| err(format!("{pfield}.pluginConfig({name})"), c))?;
                    core.insert(name.to_string(), p);
                }
                return Ok((core.get(name).cloned(), None));
            }
            let Some(spec) = specs.get(name) else {
                return Err(err(field, format!("unknown plugin {name:?} (core plugins: {}; wasm plugins need a wasmPlugins entry)", plugins::NAMES.join(", "))));
            };
            if !wasm.contains_key(name) {
                let module = compile(name, spec, &mut modules, &mut module_list)?;
                let args = args_of(name)
                    .filter(|a| !a.is_null())
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "{}".into());
                let settings = WasmSettings {
                    args,
                    limits: spec.limits,
                    failure_policy: spec.failure_policy,
                };
                let plugin = WasmPlugin::new(name, module, settings, parallelism).map_err(|f| {
                    err(
                        format!("{pfield}.plugins ({name})"),
                        format!("plugin {name} failed to start: {f}"),
                    )
                })?;
                wasm.insert(name.to_string(), Arc::new(plugin));
            }
            Ok((None, wasm.get(name).cloned()))
        };
        let mut profile = Profile {
            scheduler_name: pf.scheduler_name.clone(),
            filters: Vec::new(),
            scores: Vec::new(),
            percentage_of_nodes_to_score: pf
                .percentage_of_nodes_to_score
                .or(file.percentage_of_nodes_to_score),
        };
        for (name, _) in &filters {
            let field = format!("{pfield}.plugins.filter ({name})");
            match get(name, &field)? {
                (Some(c), _) => profile
                    .filters
                    .push(FilterEntry::Native(c.filter.ok_or_else(|| {
                        err(&field, format!("{name} has no Filter extension point"))
                    })?)),
                (_, Some(w)) => {
                    if !w.module.exports.filter {
                        return Err(err(
                            &field,
                            format!(
                                "{name} does not export filter (exports: {})",
                                w.module.exports
                            ),
                        ));
                    }
                    profile.filters.push(FilterEntry::Wasm(w))
                }
                _ => unreachable!("get returns one kind"),
            }
        }
        for (name, weight) in &scores {
            let field = format!("{pfield}.plugins.score ({name})");
            let plugin =
                match get(name, &field)? {
                    (Some(c), _) => ScoreEntry::Native(c.score.ok_or_else(|| {
                        err(&field, format!("{name} has no Score extension point"))
                    })?),
                    (_, Some(w)) => {
                        if !w.module.exports.score {
                            return Err(err(
                                &field,
                                format!(
                                    "{name} does not export score (exports: {})",
                                    w.module.exports
                                ),
                            ));
                        }
                        ScoreEntry::Wasm(w)
                    }
                    _ => unreachable!("get returns one kind"),
                };
            profile.scores.push(WeightedScore {
                plugin,
                weight: *weight,
            });
        }
        frameworks.push(Framework::new(profile, parallelism, seed));
    }
    Ok(Scheduler {
        profiles: frameworks,
        parallelism,
        modules: module_list,
    })
}

/// The compiled deletion-cost policy `name` (the built-in `DeletionCost`
/// or a `wasmPlugins` entry) and its limits; `field` names the setting in
/// errors.
pub fn deletion_cost_plugin(
    file: &ConfigFile,
    base: &Path,
    name: &str,
    field: &str,
) -> Result<(Arc<PluginModule>, Limits), ConfigError> {
    let specs = wasm_specs(file, base)?;
    let spec = specs.get(name).ok_or_else(|| {
        err(
            field,
            format!(
                "unknown plugin {name:?} (built in: {}; others need a wasmPlugins entry)",
                BUILTIN_DELETION_COST
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    let module = compile(name, spec, &mut HashMap::new(), &mut Vec::new())?;
    if !module.exports.deletion_cost {
        return Err(err(
            field,
            format!(
                "{name} does not export deletion-cost (exports: {})",
                module.exports
            ),
        ));
    }
    Ok((module, spec.limits))
}

/// Which extension points a plugin name offers (Filter, Score).
fn capabilities(
    name: &str,
    specs: &HashMap<String, WasmSpec>,
    modules: &mut HashMap<String, Arc<PluginModule>>,
    list: &mut Vec<(String, Arc<PluginModule>)>,
) -> Result<(bool, bool), String> {
    if plugins::NAMES.contains(&name) {
        let p = plugins::build(name, None)?;
        return Ok((p.filter.is_some(), p.score.is_some()));
    }
    let spec = specs
        .get(name)
        .ok_or_else(|| format!("unknown plugin {name:?}"))?;
    let m = compile(name, spec, modules, list).map_err(|e| e.to_string())?;
    Ok((m.exports.filter, m.exports.score))
}

/// Compiles a plugin's component once (per name).
fn compile(
    name: &str,
    spec: &WasmSpec,
    modules: &mut HashMap<String, Arc<PluginModule>>,
    list: &mut Vec<(String, Arc<PluginModule>)>,
) -> Result<Arc<PluginModule>, ConfigError> {
    if let Some(m) = modules.get(name) {
        return Ok(m.clone());
    }
    let (label, bytes): (String, std::borrow::Cow<[u8]>) = match &spec.source {
        Source::Builtin(krate, bytes) => (
            format!("built-in {krate}"),
            std::borrow::Cow::Borrowed(*bytes),
        ),
        Source::File(p) => {
            // Follows symlinks; `.wasm.gz` / `.wasm.zst` are decompressed.
            let file = crate::wasm::source::read(p)
                .map_err(|e| err(format!("{}.path", spec.field), e.to_string()))?;
            (p.display().to_string(), std::borrow::Cow::Owned(file.bytes))
        }
    };
    let (module, report) = PluginModule::compile_with(&bytes, spec.cache.as_ref())
        .map_err(|e| err(format!("{}.path", spec.field), format!("{label}: {e}")))?;
    crate::metrics::Metrics::global().observe_compile(name, &report);
    modules.insert(name.to_string(), module.clone());
    list.push((name.to_string(), module.clone()));
    Ok(module)
}

/// Leader election, resolved (see [`file::LeaderElectionFile`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderElection {
    pub enabled: bool,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub name: String,
    pub namespace: String,
}

/// Settings of `wasmsched run` beyond the profiles, resolved and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeSettings {
    pub leader_election: LeaderElection,
    pub kubeconfig: Option<std::path::PathBuf>,
    pub qps: f32,
    pub burst: u32,
    pub bind_concurrency: usize,
}

/// Resolves the runtime sections of the configuration, with
/// kube-scheduler's defaults.
pub fn runtime(file: &ConfigFile, base: &Path) -> Result<RuntimeSettings, ConfigError> {
    let le = file.leader_election.clone().unwrap_or_default();
    let leader_election = LeaderElection {
        enabled: le.leader_elect.unwrap_or(true),
        lease_duration: duration(
            "leaderElection.leaseDuration",
            &le.lease_duration,
            Duration::from_secs(15),
        )?,
        renew_deadline: duration(
            "leaderElection.renewDeadline",
            &le.renew_deadline,
            Duration::from_secs(10),
        )?,
        retry_period: duration(
            "leaderElection.retryPeriod",
            &le.retry_period,
            Duration::from_secs(2),
        )?,
        name: le.resource_name.unwrap_or_else(|| "wasmsched".into()),
        namespace: le
            .resource_namespace
            .unwrap_or_else(|| "kube-system".into()),
    };
    if let Some(lock) = &le.resource_lock {
        if lock != "leases" {
            return Err(err(
                "leaderElection.resourceLock",
                format!("unsupported {lock:?} (only \"leases\")"),
            ));
        }
    }
    if leader_election.renew_deadline >= leader_election.lease_duration {
        // Otherwise a leader could still be scheduling after its lease
        // expired and another replica took over.
        return Err(err(
            "leaderElection.renewDeadline",
            "must be shorter than leaseDuration",
        ));
    }
    if leader_election.retry_period >= leader_election.renew_deadline {
        return Err(err(
            "leaderElection.retryPeriod",
            "must be shorter than renewDeadline",
        ));
    }
    let cc = file.client_connection.clone().unwrap_or_default();
    let qps = cc.qps.unwrap_or(50.0);
    if !(qps.is_finite() && qps > 0.0) {
        return Err(err(
            "clientConnection.qps",
            format!("must be a positive number, not {qps}"),
        ));
    }
    let burst = cc.burst.unwrap_or(100);
    if burst == 0 {
        return Err(err("clientConnection.burst", "must be at least 1"));
    }
    let bind_concurrency = file.bind_concurrency.unwrap_or(16);
    if bind_concurrency == 0 {
        return Err(err("bindConcurrency", "must be at least 1"));
    }
    Ok(RuntimeSettings {
        leader_election,
        kubeconfig: cc.kubeconfig.map(|p| base.join(p)),
        qps,
        burst,
        bind_concurrency,
    })
}
