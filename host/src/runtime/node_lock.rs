//! Node locks for HAMiNodeLock's [`LockNode`] step: HAMi's `nodelock`
//! (`pkg/util/nodelock/nodelock.go`). The lock is a node annotation,
//! `<RFC3339 time>,<namespace>,<pod>`, set with a resourceVersion-guarded
//! merge patch; HAMi's device plugin releases it once it has allocated the
//! pod's devices. A lock older than its expiry, or whose pod is gone, is
//! taken over.
//!
//! Bindings that need a node's lock wait for it one at a time per node
//! (a FIFO gate), without holding one of the binder's slots, so bindings
//! to other nodes go on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use parking_lot::Mutex;

use crate::framework::plugins::hami_node_lock::LockNode;
use crate::framework::BindAction;
use crate::model::Pod;

/// How often a waiting binding looks at the node again (HAMi retries
/// every 100 ms).
pub const POLL: Duration = Duration::from_millis(100);
/// How often a waiting binding asks the API server whether the lock's pod
/// still exists.
const HOLDER_CHECK: Duration = Duration::from_secs(2);
/// Attempts of the guarded patch on a conflict (HAMi: 5, from 100 ms,
/// doubling).
const PATCH_ATTEMPTS: u32 = 5;

/// The lock a binding takes, from its actions.
pub fn wanted(actions: &[BindAction]) -> Option<(&str, Duration)> {
    actions
        .iter()
        .find_map(BindAction::get::<LockNode>)
        .map(|l| (l.annotation.as_str(), l.expiry))
}

/// Per-node FIFO gates: one binding per node waits for, takes and uses
/// the node's lock at a time.
#[derive(Default)]
pub struct NodeGates {
    gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl NodeGates {
    pub fn gate(&self, node: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut gates = self.gates.lock();
        // Forget gates nobody holds or waits for, so the map stays small.
        if gates.len() > 1024 {
            gates.retain(|_, g| Arc::strong_count(g) > 1);
        }
        gates.entry(node.to_string()).or_default().clone()
    }
}

/// A lock's holder and age.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub at: Timestamp,
    pub namespace: String,
    pub pod: String,
}

/// Reads a lock value (`<RFC3339>,<ns>,<pod>`, or a bare time as old
/// HAMi versions wrote).
pub fn parse(value: &str) -> Option<Holder> {
    let mut parts = value.split(',');
    let at: Timestamp = parts.next()?.trim().parse().ok()?;
    let (namespace, pod) = match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => (String::new(), String::new()),
        (Some(ns), Some(name), None) => (ns.to_string(), name.to_string()),
        _ => return None,
    };
    Some(Holder { at, namespace, pod })
}

/// The lock value for `pod` at `now`.
pub fn value(pod: &Pod, now: Timestamp) -> String {
    format!(
        "{},{},{}",
        now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        pod.namespace,
        pod.name
    )
}

/// What to do about a lock found on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// No lock, or one that may be taken (ours, expired, unreadable).
    Free,
    /// Held by another pod, not expired: wait (or check that pod).
    Held,
}

/// Judges a lock value: free when absent, ours, unreadable (HAMi cannot
/// parse it either and would fail forever) or older than `expiry`.
pub fn judge(value: Option<&str>, pod: &Pod, expiry: Duration, now: Timestamp) -> Found {
    let Some(v) = value else { return Found::Free };
    let Some(h) = parse(v) else {
        return Found::Free;
    };
    if h.namespace == pod.namespace && h.pod == pod.name {
        return Found::Free;
    }
    let age = now.duration_since(h.at);
    if age.as_secs_f64() > expiry.as_secs_f64() {
        return Found::Free;
    }
    Found::Held
}

/// Whether the lock's pod is gone (dangling lock). Errors count as "not
/// gone".
pub async fn holder_gone(client: &Client, value: &str) -> bool {
    let Some(h) = parse(value) else { return false };
    if h.pod.is_empty() {
        return false;
    }
    let api: Api<K8sPod> = Api::namespaced(client.clone(), &h.namespace);
    matches!(api.get(&h.pod).await, Err(kube::Error::Api(e)) if e.code == 404)
}

/// How taking a lock ended.
#[derive(Debug)]
pub enum LockError {
    /// Another pod holds it.
    Held(String),
    /// The node is gone.
    NodeGone,
    Api(kube::Error),
}

/// Takes the lock: reads the node, and when the lock is free (or its pod
/// is gone) sets it with a patch guarded by the node's resourceVersion,
/// retrying on conflicts.
pub async fn acquire(
    client: &Client,
    node: &str,
    annotation: &str,
    pod: &Pod,
    expiry: Duration,
) -> Result<(), LockError> {
    let api: Api<K8sNode> = Api::all(client.clone());
    let mut backoff = Duration::from_millis(100);
    for attempt in 1..=PATCH_ATTEMPTS {
        let current = match api.get(node).await {
            Ok(n) => n,
            Err(kube::Error::Api(e)) if e.code == 404 => return Err(LockError::NodeGone),
            Err(e) => return Err(LockError::Api(e)),
        };
        let held = current
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotation))
            .cloned();
        if let Some(v) = &held {
            if judge(Some(v), pod, expiry, Timestamp::now()) == Found::Held
                && !holder_gone(client, v).await
            {
                return Err(LockError::Held(v.clone()));
            }
        }
        let patch = serde_json::json!({"metadata": {
            "annotations": {annotation: value(pod, Timestamp::now())},
            "resourceVersion": current.metadata.resource_version,
        }});
        match api
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < PATCH_ATTEMPTS => {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            Err(kube::Error::Api(e)) if e.code == 404 => return Err(LockError::NodeGone),
            Err(e) => return Err(LockError::Api(e)),
        }
    }
    Err(LockError::Held("conflicting updates".into()))
}

/// Releases the lock if `pod` holds it (HAMi's owner check), with a
/// guarded patch.
pub async fn release(
    client: &Client,
    node: &str,
    annotation: &str,
    pod: &Pod,
) -> Result<(), kube::Error> {
    let api: Api<K8sNode> = Api::all(client.clone());
    let mut backoff = Duration::from_millis(100);
    for attempt in 1..=PATCH_ATTEMPTS {
        let current = api.get(node).await?;
        let mine = current
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(annotation))
            .and_then(|v| parse(v))
            .is_some_and(|h| h.namespace == pod.namespace && h.pod == pod.name);
        if !mine {
            return Ok(());
        }
        let patch = serde_json::json!({"metadata": {
            "annotations": {annotation: null},
            "resourceVersion": current.metadata.resource_version,
        }});
        match api
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < PATCH_ATTEMPTS => {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How long to wait before asking the API server about the holder again.
pub fn holder_check_due(last: Option<std::time::Instant>) -> bool {
    last.is_none_or(|t| t.elapsed() >= HOLDER_CHECK)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pod `default/p`.
    fn pod() -> Pod {
        let k: K8sPod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c0"}]}
        }))
        .unwrap();
        Pod::from_k8s(&k).unwrap()
    }

    #[test]
    fn lock_values_as_hami_writes_and_reads_them() {
        let pod = pod();
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let v = value(&pod, now);
        assert_eq!(v, "2026-01-01T00:00:00Z,default,p");
        let h = parse(&v).unwrap();
        assert_eq!((h.namespace.as_str(), h.pod.as_str()), ("default", "p"));
        // HAMi writes local time with an offset; a bare time is an old lock.
        let h = parse("2026-01-01T08:00:00+08:00,ns,q").unwrap();
        assert_eq!(h.at, now);
        assert_eq!(parse("2026-01-01T00:00:00Z").unwrap().pod, "");
        assert!(parse("yesterday,ns,q").is_none());
        assert!(parse("2026-01-01T00:00:00Z,a,b,c").is_none());
    }

    #[test]
    fn a_lock_is_free_when_ours_expired_or_unreadable() {
        let pod = pod();
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let five = Duration::from_secs(300);
        assert_eq!(judge(None, &pod, five, now), Found::Free);
        assert_eq!(
            judge(Some("2026-01-01T00:09:00Z,ns,q"), &pod, five, now),
            Found::Held
        );
        assert_eq!(
            judge(Some("2026-01-01T00:04:00Z,ns,q"), &pod, five, now),
            Found::Free
        );
        assert_eq!(
            judge(Some("2026-01-01T00:09:00Z,default,p"), &pod, five, now),
            Found::Free
        );
        assert_eq!(judge(Some("garbage"), &pod, five, now), Found::Free);
    }
}
