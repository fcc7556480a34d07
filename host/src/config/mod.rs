//! Configuration: parsing, defaults, and building the profiles' plugin
//! chains (native core plugins and wasm components).

mod defaults;
pub mod describe;
pub mod file;
pub mod include;
mod plugin_sets;
mod profiles;
mod specs;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use crate::framework::Framework;
use crate::input::{self, ReadBudget};
use crate::wasm::{DiskCache, Limits, PluginModule, WasmPlugin};

pub use defaults::DefaultArgs;
pub use file::ConfigFile;
pub use plugin_sets::{ProfilePlan, Source};
pub use specs::WasmSpec;

/// The profile served when no configuration file is given.
pub const DEFAULT_SCHEDULER_NAME: &str = "gpu-scheduler";

/// kube-scheduler's profile name when a `KubeSchedulerConfiguration`
/// names none.
pub const KUBE_DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

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
    let mut budget = ReadBudget::new(input::Limits::DEFAULT);
    let text = budget
        .read(path)
        .map_err(|e| err(path.display().to_string(), e.to_string()))?;
    let named = |p: &Path, e: ConfigError| err(format!("{}: {}", p.display(), e.field), e.cause);
    let file = parse(&text).map_err(|e| named(path, e))?;
    if file.include.is_empty() {
        return Ok(file);
    }
    // Each fragment is checked alone first (errors with its line), then
    // the values are merged and read again as one file.
    let dir = path.parent().unwrap_or(Path::new(""));
    let fragments = include::expand(dir, &file.include).map_err(|e| named(path, e))?;
    let raw = |text: &str, p: &Path| {
        input::yaml::typed::<serde_json::Value>(text, &input::Limits::DEFAULT)
            .map_err(|e| err(p.display().to_string(), e.cause))
    };
    let mut merged = raw(&text, path)?;
    if let Some(m) = merged.as_object_mut() {
        m.remove("include");
    }
    let mut origins = include::Origins::of_base(&merged, &path.display().to_string());
    let mut plugin_origins = std::collections::BTreeMap::new();
    include::record_plugins(&merged, &path.display().to_string(), &mut plugin_origins);
    for fragment in fragments {
        let text = budget
            .read(&fragment)
            .map_err(|e| err(fragment.display().to_string(), e.to_string()))?;
        parse(&text).map_err(|e| named(&fragment, e))?;
        let value = raw(&text, &fragment)?;
        include::record_plugins(&value, &fragment.display().to_string(), &mut plugin_origins);
        include::merge(
            &mut merged,
            value,
            &fragment.display().to_string(),
            &mut origins,
        )
        .map_err(|e| err(format!("include: {}", e.field), e.cause))?;
    }
    let mut file: ConfigFile = serde_json::from_value(merged).map_err(|e| {
        err(
            format!("{} with its fragments", path.display()),
            e.to_string(),
        )
    })?;
    file::check(&file).map_err(|e| named(path, e))?;
    file.plugin_origins = plugin_origins;
    Ok(file)
}

/// Every profile, ready to schedule: the engine's [`crate::scheduler::Scheduler`]
/// (which it dereferences to) and what the host built it from.
pub struct Scheduler {
    pub core: crate::scheduler::Scheduler,
    pub parallelism: usize,
    /// Compiled modules by plugin name (for `plugin` status output).
    pub modules: Vec<(String, Arc<PluginModule>)>,
    /// The wasm plugins each profile runs: (scheduler name, plugin), for
    /// hot reload.
    pub wasm: Vec<(String, Arc<WasmPlugin>)>,
    /// Each profile's plan, in profile order: where its plugins and
    /// default args come from (`wasmsched profiles`).
    pub plans: Vec<ProfilePlan>,
    /// What the profiles' plugins share (DynamicResources' store, read by
    /// the DRA metrics).
    pub handle: crate::framework::registry::Handle,
}

impl Scheduler {
    /// What the configuration names that is read but not acted on, one
    /// line each: settings of kube-scheduler's file that have no meaning
    /// here, and kube-scheduler plugins not implemented yet.
    pub fn notes(&self, file: &ConfigFile) -> Vec<String> {
        let mut notes = file::unused_settings(file);
        for plan in &self.plans {
            notes.extend(plan.notes.iter().cloned());
        }
        notes
    }
}

impl std::ops::Deref for Scheduler {
    type Target = crate::scheduler::Scheduler;

    fn deref(&self) -> &Self::Target {
        &self.core
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

/// Where each `wasmPlugins` entry with a `path` comes from, in file
/// order: a file (resolved against `base`) or an `oci://` artifact. What
/// hot reload follows.
pub fn plugin_sources(
    file: &ConfigFile,
    base: &Path,
) -> Result<Vec<(String, crate::wasm::Source)>, ConfigError> {
    let specs = specs::wasm_specs(file, base)?;
    Ok(file
        .wasm_plugins
        .iter()
        .filter(|w| w.path.is_some())
        .filter_map(|w| Some((w.name.clone(), specs.get(&w.name)?.source.clone())))
        .collect())
}

/// The top-level settings every profile shares, checked.
fn check_top_level(file: &ConfigFile) -> Result<usize, ConfigError> {
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
    Ok(parallelism)
}

/// Builds every profile's plugin chain. `base` resolves relative plugin
/// paths (the configuration file's directory).
pub fn build(file: &ConfigFile, base: &Path, seed: u64) -> Result<Scheduler, ConfigError> {
    let parallelism = check_top_level(file)?;
    let mut modules =
        profiles::Modules::new(specs::wasm_specs(file, base)?, plugin_cache(file, base)?);
    // Every declared component is checked at start, used or not.
    for w in &file.wasm_plugins {
        if w.path.is_some() {
            modules.get(&w.name)?;
        }
    }
    // kube-scheduler's defaulting: a `KubeSchedulerConfiguration` with no
    // profile, or whose only profile has no name, serves
    // `default-scheduler`; wasmsched's own file, `gpu-scheduler`.
    let kube = file::is_kube_scheduler_file(file);
    let unnamed = if kube {
        KUBE_DEFAULT_SCHEDULER_NAME
    } else {
        DEFAULT_SCHEDULER_NAME
    };
    let mut named = file.profiles.clone();
    if named.is_empty() {
        named.push(file::ProfileFile::default());
    }
    if let [only] = named.as_mut_slice() {
        if only.scheduler_name.is_empty() {
            only.scheduler_name = unnamed.into();
        }
    }
    let list = &named;
    let mut names = std::collections::HashSet::new();
    let mut frameworks = Vec::new();
    let mut wasm = Vec::new();
    let mut plans = Vec::new();
    let base = crate::framework::registry::Handle::default();
    for (i, pf) in list.iter().enumerate() {
        let field = format!("profiles[{i}]");
        profiles::check_profile(pf, &field, &mut names)?;
        let mut plan = plugin_sets::resolve(pf, &field, &mut modules, kube)?;
        for (plugin, source) in plan.sources.iter_mut() {
            if let Source::File { file: f, .. } = source {
                let key = format!("{}/{plugin}", pf.scheduler_name);
                *f = file.plugin_origins.get(&key).cloned();
            }
        }
        plan.args = profiles::effective_args(pf, &plan);
        plan.percentage_of_nodes_to_score = match (
            pf.percentage_of_nodes_to_score,
            file.percentage_of_nodes_to_score,
        ) {
            (Some(p), _) => Some((p, "the profile's")),
            (None, Some(p)) => Some((p, "the file's")),
            (None, None) => None,
        };
        let built = profiles::build(file, pf, &field, &plan, &mut modules, parallelism, &base)?;
        wasm.extend(
            built
                .wasm
                .into_iter()
                .map(|p| (pf.scheduler_name.clone(), p)),
        );
        check_queue_sort(&built.profile, &frameworks, &field)?;
        plans.push(plan);
        frameworks.push(Framework::with_handle(
            built.profile,
            parallelism,
            seed,
            &built.handle,
        ));
    }
    let backoff = file::backoff(file)?;
    Ok(Scheduler {
        core: crate::scheduler::Scheduler::new(frameworks).with_backoff(backoff),
        parallelism,
        modules: modules.compiled(),
        wasm,
        plans,
        handle: base,
    })
}

/// One queue serves every profile, so at most one QueueSort other than
/// PrioritySort may be configured (upstream requires the same QueueSort
/// in every profile; a profile with PrioritySort beside one with
/// Coscheduling is accepted here, as Coscheduling sorts pods outside pod
/// groups as PrioritySort does).
fn check_queue_sort(
    profile: &crate::framework::Profile,
    others: &[Framework],
    field: &str,
) -> Result<(), ConfigError> {
    let name = |p: &crate::framework::Profile| {
        p.queue_sort
            .as_ref()
            .map(|q| q.name().to_string())
            .filter(|n| n != "PrioritySort")
    };
    let Some(this) = name(profile) else {
        return Ok(());
    };
    for fw in others {
        if let Some(theirs) = name(&fw.profile()).filter(|t| *t != this) {
            return Err(err(
                format!("{field}.plugins.queueSort"),
                format!(
                    "{this} differs from profile {:?}'s {theirs}: one queue serves every profile",
                    fw.scheduler_name()
                ),
            ));
        }
    }
    Ok(())
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
    let specs = specs::wasm_specs(file, base)?;
    let Some(spec) = specs.get(name) else {
        let builtins: Vec<&str> = crate::framework::registry::builtin_wasm()
            .filter(|(n, _)| !crate::framework::registry::lookup(n).is_some_and(|r| r.default))
            .map(|(n, _)| n)
            .collect();
        return Err(err(
            field,
            format!(
                "unknown plugin {name:?} (built in: {}; others need a wasmPlugins entry)",
                builtins.join(", ")
            ),
        ));
    };
    let limits = spec.limits;
    let mut modules = profiles::Modules::new(specs, plugin_cache(file, base)?);
    let module = modules.get(name)?;
    if !module.exports.deletion_cost {
        return Err(err(
            field,
            format!(
                "{name} does not export deletion-cost (exports: {})",
                module.exports
            ),
        ));
    }
    Ok((module, limits))
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
        // kube-scheduler writes `kubeconfig: ""` for "none given".
        kubeconfig: cc
            .kubeconfig
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| base.join(p)),
        qps,
        burst,
        bind_concurrency,
    })
}
