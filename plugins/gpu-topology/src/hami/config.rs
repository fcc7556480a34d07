//! The `hami` section of the plugin args and the policies it selects.

use serde::Deserialize;
use wasmsched_shared::hami::Defaults;

/// Where a pod goes among HAMi nodes (`hami.io/node-scheduler-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodePolicy {
    /// The most used node that fits (HAMi's default): keeps nodes whole.
    Binpack,
    /// The least used node.
    Spread,
}

impl NodePolicy {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "binpack" => Some(NodePolicy::Binpack),
            "spread" => Some(NodePolicy::Spread),
            _ => None,
        }
    }
}

/// Which GPUs of a node a pod's vGPUs get (`hami.io/gpu-scheduler-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuPolicy {
    /// wasmsched's default: join a partly used GPU where the request fits
    /// (the one it fills best) before opening an untouched one; an
    /// untouched one is the least linked to others, so well-linked GPUs
    /// stay whole for multi-GPU pods; multi-GPU requests take the best
    /// linked set.
    Fragmentation,
    /// HAMi's binpack: the most used GPUs (HAMi's device score).
    Binpack,
    /// HAMi's default: the least used GPUs.
    Spread,
    /// HAMi's topology-aware: the best linked set (pair link scores); one
    /// GPU: the least linked.
    TopologyAware,
}

impl GpuPolicy {
    /// A pod annotation value; HAMi 2.10 allows comma chains, of which the
    /// first policy this plugin knows is taken (`mutex` and `numa` are
    /// HAMi's own and fall back to the configured policy).
    pub fn parse(s: &str) -> Option<Self> {
        s.split(',').find_map(|t| match t.trim() {
            "fragmentation" => Some(GpuPolicy::Fragmentation),
            "binpack" => Some(GpuPolicy::Binpack),
            "spread" => Some(GpuPolicy::Spread),
            "topology-aware" => Some(GpuPolicy::TopologyAware),
            _ => None,
        })
    }
}

/// The `hami` args (camelCase in JSON).
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HamiArgs {
    node_policy: Option<NodePolicy>,
    gpu_policy: Option<GpuPolicy>,
    default_memory: Option<u64>,
    default_cores: Option<u32>,
    exclusive_by_default: Option<bool>,
}

/// The validated HAMi configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HamiConfig {
    pub node_policy: NodePolicy,
    pub gpu_policy: GpuPolicy,
    pub defaults: Defaults,
}

impl Default for HamiConfig {
    fn default() -> Self {
        HamiConfig {
            node_policy: NodePolicy::Binpack,
            gpu_policy: GpuPolicy::Fragmentation,
            defaults: Defaults::default(),
        }
    }
}

impl HamiConfig {
    /// From the args; every error names the field.
    pub fn from_args(a: HamiArgs) -> Result<Self, String> {
        let mut c = HamiConfig::default();
        if let Some(p) = a.node_policy {
            c.node_policy = p;
        }
        if let Some(p) = a.gpu_policy {
            c.gpu_policy = p;
        }
        if let Some(m) = a.default_memory {
            c.defaults.default_memory = m;
        }
        if let Some(cores) = a.default_cores {
            if cores > 100 {
                return Err(format!(
                    "gpu-topology args: field `hami.defaultCores`: must be in 0..=100, got {cores}"
                ));
            }
            c.defaults.default_cores = cores;
        }
        if let Some(e) = a.exclusive_by_default {
            c.defaults.exclusive_by_default = e;
        }
        Ok(c)
    }

    pub fn summary(&self) -> String {
        format!(
            "hami: nodePolicy {:?}, gpuPolicy {:?}, defaultMemory {}, defaultCores {}, exclusiveByDefault {}",
            self.node_policy,
            self.gpu_policy,
            self.defaults.default_memory,
            self.defaults.default_cores,
            self.defaults.exclusive_by_default
        )
    }
}
