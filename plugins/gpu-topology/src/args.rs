//! Plugin args (`pluginConfig[].args`, JSON) and the validated
//! configuration built from them. See docs/gpu-topology.md for the table.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

/// How a GPU pod is placed among nodes (and how it is scored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Fewest free GPUs left after placement wins; partly used nodes beat
    /// untouched ones on a tie.
    Binpack,
    /// Most free GPUs left after placement wins; untouched nodes beat
    /// partly used ones on a tie.
    Spread,
    /// The origin design's formula, on free GPUs: `100 - 10 * |free - req|`.
    Origin,
}

impl Policy {
    pub const NAMES: &'static str = "binpack, spread or origin";

    /// The pod annotation value (exact, lowercase).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "binpack" => Some(Policy::Binpack),
            "spread" => Some(Policy::Spread),
            "origin" => Some(Policy::Origin),
            _ => None,
        }
    }
}

/// How a pod's `gpu.nvidia.com/model` is compared with a node's model
/// when the model has no entry in `modelAliases`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelMatching {
    /// Case-insensitive equality, or every dash-separated token of the
    /// pod's model is a token of the node's model (`A100` matches
    /// `NVIDIA-A100-SXM4-40GB`, `A10` does not).
    Tokens,
    /// Case-insensitive equality only.
    Exact,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Args {
    policy: Option<Policy>,
    fit_weight: Option<u32>,
    utilization_weight: Option<u32>,
    unknown_utilization: Option<f64>,
    utilization_annotation: Option<String>,
    utilization_metric: Option<String>,
    free_memory_metric: Option<String>,
    model_aliases: Option<BTreeMap<String, Vec<String>>>,
    model_matching: Option<ModelMatching>,
    topology_penalty: Option<u32>,
    fractional: Option<bool>,
    cpu_pods_avoid_gpu_nodes: Option<bool>,
    hami: Option<crate::hami::HamiArgs>,
    preempt_whole_domains: Option<bool>,
    dra_group_attributes: Option<Vec<String>>,
}

/// The validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub policy: Policy,
    pub fit_weight: i64,
    pub utilization_weight: i64,
    /// Utilization assumed for a node with neither the annotation nor the
    /// metric, in percent.
    pub unknown_utilization_pct: u32,
    pub utilization_annotation: String,
    pub utilization_metric: String,
    /// Node metric of a device's free framebuffer memory in MiB, read as
    /// `METRIC/UUID` on HAMi nodes.
    pub free_memory_metric: String,
    /// Lower-cased model name -> lower-cased node model names it matches.
    pub model_aliases: BTreeMap<String, Vec<String>>,
    pub model_matching: ModelMatching,
    /// Score points taken off per NVLink domain a placement spans beyond
    /// the fewest the node's topology allows.
    pub topology_penalty: i64,
    /// Whether pods asking for GPU memory but no whole GPU share GPUs.
    pub fractional: bool,
    /// Whether pods that use no GPU score nodes without GPUs 100 and GPU
    /// nodes by how many of their GPUs are in use (0 when all are free),
    /// rather than 0 everywhere (the origin).
    pub cpu_pods_avoid_gpu_nodes: bool,
    /// Fractional GPUs on HAMi nodes (the `hami` args).
    pub hami: crate::hami::HamiConfig,
    /// Preemption advice: rank first the candidates whose victims free
    /// GPUs in as few NVLink domains as the pod can use (off: no opinion).
    pub preempt_whole_domains: bool,
    /// DRA device attributes that group devices (an NVLink domain, a PCIe
    /// root, a MIG partition's parent GPU), most important first: device
    /// ranking keeps a claim's devices in one group and packs or spreads
    /// claims over groups by the policy.
    pub dra_group_attributes: Vec<String>,
}

pub const MAX_WEIGHT: u32 = 1000;

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: Policy::Binpack,
            fit_weight: 7,
            utilization_weight: 3,
            unknown_utilization_pct: 50,
            utilization_annotation: crate::ANN_UTILIZATION.to_string(),
            utilization_metric: crate::METRIC_UTILIZATION.to_string(),
            free_memory_metric: crate::METRIC_FREE_MEMORY.to_string(),
            model_aliases: BTreeMap::new(),
            model_matching: ModelMatching::Tokens,
            topology_penalty: 20,
            fractional: true,
            cpu_pods_avoid_gpu_nodes: true,
            hami: crate::hami::HamiConfig::default(),
            preempt_whole_domains: false,
            dra_group_attributes: vec![crate::dra::PCIE_ROOT.to_string()],
        }
    }
}

fn field_error(field: &str, msg: impl std::fmt::Display) -> String {
    format!("gpu-topology args: field `{field}`: {msg}")
}

/// serde_json does not say which field a type error is in: find it by
/// deserializing each top-level field on its own.
fn explain(map: Map<String, Value>, err: serde_json::Error) -> String {
    for (key, value) in map {
        let mut one = Map::new();
        one.insert(key.clone(), value);
        if let Err(e) = serde_json::from_value::<Args>(Value::Object(one)) {
            let msg = e.to_string();
            return if msg.starts_with("unknown field") {
                format!("gpu-topology args: {msg}")
            } else {
                field_error(&key, msg)
            };
        }
    }
    format!("gpu-topology args: {err}")
}

impl Config {
    /// Parses and validates the plugin args. Every error names the field.
    pub fn parse(text: &str) -> Result<Config, String> {
        let text = if text.trim().is_empty() { "{}" } else { text };
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("gpu-topology args: {e}"))?;
        let Value::Object(map) = value else {
            return Err("gpu-topology args: expected a JSON object".to_string());
        };
        let args: Args =
            serde_json::from_value(Value::Object(map.clone())).map_err(|e| explain(map, e))?;
        let mut cfg = Config::default();
        if let Some(p) = args.policy {
            cfg.policy = p;
        }
        for (name, value, slot) in [
            ("fitWeight", args.fit_weight, &mut cfg.fit_weight),
            (
                "utilizationWeight",
                args.utilization_weight,
                &mut cfg.utilization_weight,
            ),
        ] {
            if let Some(v) = value {
                if v > MAX_WEIGHT {
                    return Err(field_error(
                        name,
                        format!("must be at most {MAX_WEIGHT}, got {v}"),
                    ));
                }
                *slot = v as i64;
            }
        }
        if cfg.fit_weight + cfg.utilization_weight == 0 {
            return Err(field_error(
                "fitWeight",
                "fitWeight and utilizationWeight cannot both be 0",
            ));
        }
        if let Some(u) = args.unknown_utilization {
            if !(0.0..=1.0).contains(&u) {
                return Err(field_error(
                    "unknownUtilization",
                    format!("must be a fraction in 0..=1, got {u}"),
                ));
            }
            cfg.unknown_utilization_pct = (u * 100.0).round() as u32;
        }
        if let Some(a) = args.utilization_annotation {
            if a.is_empty() {
                return Err(field_error("utilizationAnnotation", "must not be empty"));
            }
            cfg.utilization_annotation = a;
        }
        if let Some(m) = args.utilization_metric {
            if m.is_empty() {
                return Err(field_error("utilizationMetric", "must not be empty"));
            }
            cfg.utilization_metric = m;
        }
        if let Some(m) = args.free_memory_metric {
            if m.is_empty() {
                return Err(field_error("freeMemoryMetric", "must not be empty"));
            }
            cfg.free_memory_metric = m;
        }
        if let Some(aliases) = args.model_aliases {
            for (model, names) in aliases {
                if model.trim().is_empty() {
                    return Err(field_error("modelAliases", "a model name is empty"));
                }
                if names.is_empty() || names.iter().any(|n| n.trim().is_empty()) {
                    return Err(field_error(
                        "modelAliases",
                        format!("{model}: needs a list of non-empty node model names"),
                    ));
                }
                let key = model.to_ascii_lowercase();
                if cfg.model_aliases.contains_key(&key) {
                    return Err(field_error(
                        "modelAliases",
                        format!("{model}: listed twice (names are case-insensitive)"),
                    ));
                }
                cfg.model_aliases
                    .insert(key, names.iter().map(|n| n.to_ascii_lowercase()).collect());
            }
        }
        if let Some(m) = args.model_matching {
            cfg.model_matching = m;
        }
        if let Some(p) = args.topology_penalty {
            if p > 100 {
                return Err(field_error(
                    "topologyPenalty",
                    format!("must be in 0..=100, got {p}"),
                ));
            }
            cfg.topology_penalty = p as i64;
        }
        if let Some(f) = args.fractional {
            cfg.fractional = f;
        }
        if let Some(a) = args.cpu_pods_avoid_gpu_nodes {
            cfg.cpu_pods_avoid_gpu_nodes = a;
        }
        if let Some(h) = args.hami {
            cfg.hami = crate::hami::HamiConfig::from_args(h)?;
        }
        if let Some(p) = args.preempt_whole_domains {
            cfg.preempt_whole_domains = p;
        }
        if let Some(attrs) = args.dra_group_attributes {
            if let Some(bad) = attrs.iter().find(|a| !crate::dra::qualified(a)) {
                return Err(field_error(
                    "draGroupAttributes",
                    format!("{bad:?} is not a qualified attribute name (<domain>/<name>)"),
                ));
            }
            cfg.dra_group_attributes = attrs;
        }
        Ok(cfg)
    }

    /// The effective configuration in one line, with the args' names (the
    /// plugin logs it at debug level when it starts).
    pub fn summary(&self) -> String {
        let policy = match self.policy {
            Policy::Binpack => "binpack",
            Policy::Spread => "spread",
            Policy::Origin => "origin",
        };
        format!(
            "policy {policy}, fitWeight {}, utilizationWeight {}, unknownUtilization {}% \
             (nodes without {} annotation or {} metric), topologyPenalty {}, \
             fractional {}, cpuPodsAvoidGpuNodes {}; {}",
            self.fit_weight,
            self.utilization_weight,
            self.unknown_utilization_pct,
            self.utilization_annotation,
            self.utilization_metric,
            self.topology_penalty,
            self.fractional,
            self.cpu_pods_avoid_gpu_nodes,
            self.hami.summary(),
        )
    }

    /// The matching rule for a pod asking for model `wanted`, resolved
    /// once per cycle.
    pub fn model_rule(&self, wanted: &str) -> ModelRule {
        ModelRule {
            wanted: wanted.to_string(),
            aliases: self
                .model_aliases
                .get(&wanted.to_ascii_lowercase())
                .cloned(),
            matching: self.model_matching,
        }
    }
}

/// How one pod's requested model is matched against node models.
#[derive(Clone, Debug)]
pub struct ModelRule {
    wanted: String,
    aliases: Option<Vec<String>>,
    matching: ModelMatching,
}

impl ModelRule {
    /// Whether the pod may run on a node whose model is `node_model`:
    /// case-insensitive equality; else, when the model has aliases, one of
    /// them (case-insensitive); else, with `tokens` matching, every
    /// dash-separated token of the pod's model is a token of the node's.
    pub fn matches(&self, node_model: &str) -> bool {
        if self.wanted.eq_ignore_ascii_case(node_model) {
            return true;
        }
        if let Some(names) = &self.aliases {
            return names.iter().any(|n| n.eq_ignore_ascii_case(node_model));
        }
        match self.matching {
            ModelMatching::Exact => false,
            ModelMatching::Tokens => {
                let mut tokens = self.wanted.split('-').filter(|t| !t.is_empty()).peekable();
                tokens.peek().is_some()
                    && tokens.all(|t| node_model.split('-').any(|n| n.eq_ignore_ascii_case(t)))
            }
        }
    }
}
