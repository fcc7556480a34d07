//! Plugin args wasmsched's default profile gives beyond the plugins'
//! own defaults, so that what the product offers works without a file:
//! NodeResourcesFit ignores HAMi's fractional-GPU resources, which nodes
//! do not advertise and GpuTopology fits device by device on HAMi nodes
//! (as HAMi's own configuration marks them `ignoredByScheduler`).
//!
//! Never for a `KubeSchedulerConfiguration` file (it means exactly
//! kube-scheduler's defaults plus what it names), and never a key the
//! file's own `pluginConfig` args set: the file's keys win.

use serde_json::{json, Value};

use super::plugin_sets::ProfilePlan;

/// Args a profile's plugin gets by default, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultArgs {
    pub plugin: &'static str,
    pub args: Value,
    pub why: &'static str,
}

/// The default args of `plan`'s plugins (`kube`: a
/// `KubeSchedulerConfiguration` file, which gets none).
pub fn args(plan: &ProfilePlan, kube: bool) -> Vec<DefaultArgs> {
    let fits = plan.filters.iter().any(|n| n == "NodeResourcesFit");
    let gpus = plan.filters.iter().any(|n| n == "GpuTopology");
    if kube || !fits || !gpus {
        return Vec::new();
    }
    vec![DefaultArgs {
        plugin: "NodeResourcesFit",
        args: json!({"ignoredResources": wasmsched_shared::hami::UNADVERTISED_RESOURCES}),
        why: "HAMi's resources, which nodes do not advertise: GpuTopology fits them on HAMi nodes",
    }]
}

/// `file`'s args over `default`: each key the file sets is the file's.
/// Args that are not a mapping are the file's as they are (the plugin
/// then says what is wrong with them).
pub fn merge(default: &Value, file: Option<&Value>) -> Value {
    match (default, file) {
        (_, None) | (_, Some(Value::Null)) => default.clone(),
        (Value::Object(d), Some(Value::Object(f))) => {
            let mut out = d.clone();
            out.extend(f.iter().map(|(k, v)| (k.clone(), v.clone())));
            Value::Object(out)
        }
        (_, Some(f)) => f.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(filters: &[&str]) -> ProfilePlan {
        ProfilePlan {
            filters: filters.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn hami_resources_are_ignored_only_beside_gpu_topology() {
        let both = plan(&["NodeResourcesFit", "GpuTopology"]);
        let a = args(&both, false);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].plugin, "NodeResourcesFit");
        assert_eq!(
            a[0].args["ignoredResources"],
            json!([
                "nvidia.com/gpumem",
                "nvidia.com/gpumem-percentage",
                "nvidia.com/gpucores",
                "nvidia.com/priority"
            ])
        );
        assert!(args(&both, true).is_empty(), "a kube-scheduler file");
        assert!(args(&plan(&["NodeResourcesFit"]), false).is_empty());
        assert!(args(&plan(&["GpuTopology"]), false).is_empty());
    }

    #[test]
    fn the_files_keys_win() {
        let d = json!({"ignoredResources": ["a"], "x": 1});
        assert_eq!(merge(&d, None), d);
        assert_eq!(merge(&d, Some(&Value::Null)), d);
        assert_eq!(
            merge(&d, Some(&json!({"ignoredResources": ["b"]}))),
            json!({"ignoredResources": ["b"], "x": 1})
        );
        assert_eq!(merge(&d, Some(&json!([1]))), json!([1]));
    }
}
