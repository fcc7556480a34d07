//! A gang and GPU-quota policy as a wasm component, through the contract's
//! Reserve, Unreserve and Permit: the test that such policies can be
//! written as plugins (the built-in gang support is native; docs/gangs.md
//! says why).
//!
//! Gang: pods labelled `gang.example.com/name: <gang>` with the annotation
//! `gang.example.com/size: <n>` wait at Permit until `n` members of the
//! gang (same namespace) are placed, bound or reserved; the member that
//! completes the gang allows the waiting ones. A wait ends after
//! `timeoutMs` (the host then rejects and unreserves the member).
//!
//! Quota: args `{"gpuQuota": {"<namespace>": <gpus>}}`: Permit rejects a
//! pod whose namespace would then hold more `nvidia.com/gpu` than its
//! quota (placed pods, the pod itself included).
//!
//! Which members wait is instance state (Reserve records, Unreserve
//! forgets); a replaced instance forgets it, and those members then time
//! out and are retried.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use wasmsched_plugin_sdk::types::{PermitDecision, PermitResult, Pod};
use wasmsched_plugin_sdk::{allow, args, export_plugin, Cluster, NodeState, Plugin, PodExt};

pub const GANG_LABEL: &str = "gang.example.com/name";
pub const SIZE_ANNOTATION: &str = "gang.example.com/size";
const GPU: &str = "nvidia.com/gpu";

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Args {
    #[serde(default)]
    gpu_quota: BTreeMap<String, i64>,
    #[serde(default = "default_timeout")]
    timeout_ms: u32,
}

fn default_timeout() -> u32 {
    30_000
}

pub struct GangQuota {
    args: Args,
    /// Members reserved by this instance, by uid: their gang's key.
    reserved: RefCell<BTreeMap<String, Option<String>>>,
    /// Members this plugin told to wait, by uid.
    waiting: RefCell<BTreeSet<String>>,
}

fn gang_key(pod: &Pod) -> Option<String> {
    pod.label(GANG_LABEL)
        .map(|g| format!("{}/{g}", pod.namespace))
}

fn gpus(pod: &Pod) -> i64 {
    pod.request(GPU).max(pod.limit(GPU))
}

impl GangQuota {
    /// GPUs placed in `namespace` (bound and reserved pods).
    fn used(&self, namespace: &str, cluster: &Cluster) -> i64 {
        cluster
            .pods()
            .filter(|(_, p)| p.namespace == namespace)
            .map(|(_, p)| gpus(p))
            .sum()
    }

    /// Members of `key` placed (the cycle's pod not among them yet).
    fn placed(&self, key: &str, cluster: &Cluster) -> Vec<String> {
        cluster
            .pods()
            .filter(|(_, p)| gang_key(p).as_deref() == Some(key))
            .map(|(_, p)| p.uid.clone())
            .collect()
    }

    fn gang(&self, pod: &Pod, cluster: &Cluster) -> PermitResult {
        let Some(key) = gang_key(pod) else {
            return allow();
        };
        let size = match pod.annotation(SIZE_ANNOTATION).map(str::parse::<usize>) {
            Some(Ok(n)) if n > 0 => n,
            _ => {
                return PermitResult {
                    decision: PermitDecision::Reject(format!(
                        "gang {key}: annotation {SIZE_ANNOTATION} must be a positive integer"
                    )),
                    allow_waiting: Vec::new(),
                }
            }
        };
        let placed = self.placed(&key, cluster);
        if placed.len() + 1 < size {
            self.waiting.borrow_mut().insert(pod.uid.clone());
            return PermitResult {
                decision: PermitDecision::Wait(self.args.timeout_ms),
                allow_waiting: Vec::new(),
            };
        }
        let mut waiting = self.waiting.borrow_mut();
        let release: Vec<String> = placed.into_iter().filter(|u| waiting.remove(u)).collect();
        PermitResult {
            decision: PermitDecision::Allow,
            allow_waiting: release,
        }
    }
}

impl Plugin for GangQuota {
    type Cycle = ();

    fn init(text: &str) -> Result<Self, String> {
        Ok(GangQuota {
            args: args::parse("GangQuota", text)?,
            reserved: RefCell::default(),
            waiting: RefCell::default(),
        })
    }

    fn cycle_start(&self, _pod: &Pod, _cluster: &Cluster) -> Result<(), String> {
        Ok(())
    }

    fn reserve(&self, _: &(), pod: &Pod, _node: &NodeState, _: &Cluster) -> Result<(), String> {
        self.reserved
            .borrow_mut()
            .insert(pod.uid.clone(), gang_key(pod));
        Ok(())
    }

    fn unreserve(&self, pod_uid: &str, _node: Option<&NodeState>, _: &Cluster) {
        self.reserved.borrow_mut().remove(pod_uid);
        self.waiting.borrow_mut().remove(pod_uid);
    }

    fn permit(&self, _: &(), pod: &Pod, _node: &NodeState, cluster: &Cluster) -> PermitResult {
        if let Some(quota) = self.args.gpu_quota.get(&pod.namespace) {
            let want = self.used(&pod.namespace, cluster) + gpus(pod);
            if want > *quota {
                return PermitResult {
                    decision: PermitDecision::Reject(format!(
                        "namespace {} would hold {want} GPUs, over its quota of {quota}",
                        pod.namespace
                    )),
                    allow_waiting: Vec::new(),
                };
            }
        }
        self.gang(pod, cluster)
    }
}

export_plugin!(GangQuota: reserve, permit);
