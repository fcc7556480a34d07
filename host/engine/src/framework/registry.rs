//! The one table of plugins (upstream's `plugins/registry.go`): every
//! plugin a configuration can name, native or built into the binary as a
//! wasm component, with its extension points, default weight and whether
//! the default profile runs it. The table itself is `registry_table.rs`,
//! which `host/build.rs` reads too (for the wasm crates to compile).
//!
//! Adding a native plugin: one file under `plugins/` with a `new` factory,
//! and one row in `registry_table.rs`.

use serde_json::Value;

use super::objects::ApiKind;
use super::plugins;
use super::profile::{PluginBundle, Point};

pub use super::handle::Handle;

/// Builds a native plugin from its `pluginConfig` args (`None`, `null`
/// and `{}` mean defaults); errors name the offending field.
pub type NativeFactory = fn(Option<&Value>, &Handle) -> Result<PluginBundle, String>;

/// How a registered plugin is built.
#[derive(Clone, Copy)]
pub enum Factory {
    Native(NativeFactory),
    /// A wasm component compiled into the binary from this crate of
    /// `plugins/`; the wasm loader builds it.
    BuiltinWasm(&'static str),
}

/// One row of the table.
#[derive(Clone, Copy)]
pub struct Registration {
    pub name: &'static str,
    pub factory: Factory,
    /// The extension points the plugin implements (PreFilter and PreScore
    /// run whenever its Filter or Score is enabled, as their preparation).
    pub points: &'static [Point],
    /// Score weight when a configuration enables it without one.
    pub weight: i64,
    /// The default profile runs it.
    pub default: bool,
}

macro_rules! registry {
    ($($kind:ident $name:literal => $factory:expr, points: [$($point:ident),*], weight: $w:literal, default: $d:literal;)*) => {
        /// Every registered plugin, in the default profile's order.
        pub const REGISTRY: &[Registration] = &[$(
            Registration {
                name: $name,
                factory: registry!(@factory $kind $factory),
                points: &[$(Point::$point),*],
                weight: $w,
                default: $d,
            },
        )*];
    };
    (@factory native $f:expr) => { Factory::Native($f) };
    (@factory wasm $f:expr) => { Factory::BuiltinWasm($f) };
}

include!("registry_table.rs");

/// kube-scheduler 1.37's default plugins (`pkg/scheduler/apis/config/v1/
/// default_plugins.go`) that wasmsched has: what a
/// `KubeSchedulerConfiguration` file's profiles start from.
pub const KUBE_SCHEDULER_DEFAULTS: &[&str] = &[
    "PrioritySort",
    "SchedulingGates",
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
    "DefaultPreemption",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
    "DefaultBinder",
    "NodeDeclaredFeatures",
];

/// An API kind a plugin reads beside Nodes and Pods, and how a
/// manifest's object of that kind is checked (its key, or the field at
/// fault and why): what `simulate` takes from its input for the plugins.
pub struct ObjectKindRow {
    pub kind: ApiKind,
    pub check: fn(&Value) -> Result<String, String>,
}

/// Every kind a registered plugin reads.
pub const OBJECT_KINDS: &[ObjectKindRow] = &[
    ObjectKindRow {
        kind: plugins::coscheduling::POD_GROUP_KIND,
        check: plugins::coscheduling::check_manifest,
    },
    ObjectKindRow {
        kind: plugins::dynamic_resources::store::DEVICE_CLASS,
        check: plugins::dynamic_resources::check_class,
    },
    ObjectKindRow {
        kind: plugins::dynamic_resources::store::RESOURCE_SLICE,
        check: plugins::dynamic_resources::check_slice,
    },
    ObjectKindRow {
        kind: plugins::dynamic_resources::store::RESOURCE_CLAIM,
        check: plugins::dynamic_resources::check_claim,
    },
    ObjectKindRow {
        kind: plugins::dynamic_resources::store::RESOURCE_CLAIM_TEMPLATE,
        check: plugins::dynamic_resources::check_template,
    },
    ObjectKindRow {
        kind: plugins::dynamic_resources::taint_rules::DEVICE_TAINT_RULE,
        check: plugins::dynamic_resources::check_taint_rule,
    },
];

/// The row of an object's `apiVersion` and `kind`, with the version.
pub fn object_kind(
    api_version: &str,
    kind: &str,
) -> Option<(&'static ObjectKindRow, &'static str)> {
    OBJECT_KINDS
        .iter()
        .find_map(|r| r.kind.version_of(api_version, kind).map(|v| (r, v)))
}

/// The row of `name`.
pub fn lookup(name: &str) -> Option<&'static Registration> {
    REGISTRY.iter().find(|r| r.name == name)
}

/// The native plugin `name`, or `None` when no native plugin has it.
pub fn native(name: &str) -> Option<NativeFactory> {
    match lookup(name)?.factory {
        Factory::Native(f) => Some(f),
        Factory::BuiltinWasm(_) => None,
    }
}

/// Names of the native plugins, for messages.
pub fn native_names() -> Vec<&'static str> {
    REGISTRY
        .iter()
        .filter(|r| matches!(r.factory, Factory::Native(_)))
        .map(|r| r.name)
        .collect()
}

/// The built-in wasm plugins: (plugin name, crate).
pub fn builtin_wasm() -> impl Iterator<Item = (&'static str, &'static str)> {
    REGISTRY.iter().filter_map(|r| match r.factory {
        Factory::BuiltinWasm(krate) => Some((r.name, krate)),
        Factory::Native(_) => None,
    })
}

/// The weight a plugin gets when enabled without one.
pub fn default_weight(name: &str) -> i64 {
    lookup(name).map_or(1, |r| r.weight.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's points are what the factories build.
    #[test]
    fn native_rows_match_their_factories() {
        let handle = Handle::default();
        for r in REGISTRY {
            if let Factory::Native(f) = r.factory {
                let bundle = f(None, &handle).unwrap_or_else(|e| panic!("{}: {e}", r.name));
                assert_eq!(bundle.name(), r.name);
                assert_eq!(bundle.points(), r.points, "{}", r.name);
                assert_eq!(
                    bundle.has(Point::Score),
                    r.weight > 0,
                    "{}: a Score plugin has a weight",
                    r.name
                );
            }
        }
    }

    #[test]
    fn default_scores_have_upstream_weights() {
        let weights: Vec<(&str, i64)> = REGISTRY
            .iter()
            .filter(|r| r.default && r.points.contains(&Point::Score))
            .filter(|r| matches!(r.factory, Factory::Native(_)))
            .map(|r| (r.name, r.weight))
            .collect();
        let mut sorted = weights.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            [
                ("DynamicResources", 2),
                ("ImageLocality", 1),
                ("InterPodAffinity", 2),
                ("NodeAffinity", 2),
                ("NodeResourcesBalancedAllocation", 1),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 2),
                ("TaintToleration", 3),
                ("VolumeBinding", 1),
            ]
        );
    }

    #[test]
    fn default_filters_are_in_upstream_order() {
        let names: Vec<&str> = REGISTRY
            .iter()
            .filter(|r| r.default && r.points.contains(&Point::Filter))
            .filter(|r| KUBE_SCHEDULER_DEFAULTS.contains(&r.name))
            .map(|r| r.name)
            .collect();
        assert_eq!(
            names,
            [
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "PodTopologySpread",
                "InterPodAffinity",
                "DynamicResources",
                "NodeDeclaredFeatures"
            ]
        );
    }

    /// wasmsched's default profile is kube-scheduler's plus gangs
    /// (Coscheduling: a no-op for pods outside pod groups), HAMi's node
    /// lock and the built-in wasm plugins; kube-scheduler's own defaults
    /// hold none of them.
    #[test]
    fn wasmsched_defaults_add_gangs_hami_and_the_wasm_built_ins() {
        let extra: Vec<&str> = REGISTRY
            .iter()
            .filter(|r| r.default && !KUBE_SCHEDULER_DEFAULTS.contains(&r.name))
            .map(|r| r.name)
            .collect();
        assert_eq!(
            extra,
            [
                "HAMiNodeLock",
                "Coscheduling",
                "GpuTopology",
                "NetworkLocality"
            ]
        );
        for name in KUBE_SCHEDULER_DEFAULTS {
            assert!(lookup(name).is_some_and(|r| r.default), "{name}");
        }
    }
}
