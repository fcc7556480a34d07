//! Watches on Nodes and Pods that keep the cache current. After a lost
//! watch the reflector watches again from where it was, or relists when
//! that version is gone (410: an API server restart, a compacted etcd);
//! a relist is applied as a whole so objects deleted while the watch was
//! down are dropped too. Until then the cache is not current
//! ([`super::cache_sync`]): nothing is scheduled or bound on it.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use kube::{Api, Client};
use tokio::sync::mpsc;

use super::cache_sync::Watched;
use super::events::{PodRef, Report};
use super::reflector::{self, Change as Event};
use super::Shared;
use crate::model::{Node, Pod};

/// Keeps the cache's nodes current until the task is aborted.
pub async fn watch_nodes(shared: Arc<Shared>, client: Client, watched: Watched) {
    let api: Api<K8sNode> = Api::all(client);
    let mut relist: Option<HashSet<String>> = None;
    reflector::run(api, watched, |event| {
        let now = shared.now_ms();
        match event {
            Event::Init => relist = Some(HashSet::new()),
            Event::InitApply(n) | Event::Apply(n) => {
                if let (Some(seen), Some(name)) = (relist.as_mut(), n.metadata.name.clone()) {
                    seen.insert(name);
                }
                match Node::from_k8s(&n) {
                    Ok(node) => {
                        if shared.cache.lock().node_applied(node, now) {
                            shared.wake.notify_all();
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "node ignored"),
                }
            }
            Event::InitDone => {
                if let Some(seen) = relist.take() {
                    let gone = shared.cache.lock().retain_nodes(&seen, now);
                    if gone > 0 {
                        tracing::info!(gone, "nodes deleted while the watch was down");
                    }
                }
                shared.wake.notify_all();
            }
            Event::Delete(n) => {
                if let Some(name) = n.metadata.name.as_deref() {
                    if shared.cache.lock().node_deleted(name, now) {
                        shared.wake.notify_all();
                    }
                }
            }
        }
    })
    .await;
}

/// Keeps the cache's pods current (bound pods for node usage, pending pods
/// a profile serves for the queue) until the task is aborted.
pub async fn watch_pods(
    shared: Arc<Shared>,
    client: Client,
    reports: mpsc::UnboundedSender<Report>,
    watched: Watched,
) {
    let api: Api<K8sPod> = Api::all(client);
    let mut relist: Option<HashSet<String>> = None;
    // Pods whose spec could not be read, reported once each.
    let mut invalid: HashSet<String> = HashSet::new();
    reflector::run(api, watched, |event| {
        let now = shared.now_ms();
        match event {
            Event::Init => relist = Some(HashSet::new()),
            Event::InitApply(p) | Event::Apply(p) => {
                if let (Some(seen), Some(uid)) = (relist.as_mut(), p.metadata.uid.clone()) {
                    seen.insert(uid);
                }
                let terminating = p.metadata.deletion_timestamp.is_some();
                match Pod::from_k8s(&p) {
                    Ok(mut pod) => {
                        if let Err(e) = shared.priority_classes.read().resolve(&mut pod) {
                            tracing::warn!(pod = %pod.key(), error = %e, "priority 0 assumed");
                        }
                        let update = shared.scheduler.pod_applied(
                            &mut shared.cache.lock(),
                            pod,
                            terminating,
                            now,
                        );
                        use crate::framework::cache::PodUpdate;
                        match update {
                            PodUpdate::Queued => {
                                shared
                                    .metrics
                                    .incoming_pods
                                    .with_label_values(&["active", "PodAdd"])
                                    .inc();
                                shared.wake.notify_all();
                            }
                            PodUpdate::Bound | PodUpdate::Removed => {
                                shared.wake.notify_all();
                            }
                            PodUpdate::Updated | PodUpdate::Ignored => {}
                        }
                    }
                    Err(e) => {
                        let uid = p.metadata.uid.clone().unwrap_or_default();
                        let spec = p.spec.as_ref();
                        let pending = spec.is_some_and(|s| s.node_name.is_none());
                        let name = spec
                            .and_then(|s| s.scheduler_name.as_deref())
                            .unwrap_or("default-scheduler");
                        if pending && shared.served(name) && invalid.insert(uid.clone()) {
                            // The pod cannot be scheduled as written: say so
                            // on the pod, once.
                            tracing::warn!(error = %e, "pending pod cannot be scheduled");
                            let _ = reports.send(Report::Failed {
                                pod: PodRef {
                                    uid,
                                    namespace: p.metadata.namespace.clone().unwrap_or_default(),
                                    name: p.metadata.name.clone().unwrap_or_default(),
                                },
                                message: format!("invalid pod: {e}"),
                                profile: name.to_string(),
                            });
                        } else if !pending {
                            tracing::warn!(error = %e, "bound pod not counted");
                        }
                    }
                }
            }
            Event::InitDone => {
                if let Some(seen) = relist.take() {
                    let gone = shared
                        .scheduler
                        .pods_relisted(&mut shared.cache.lock(), &seen, now);
                    if gone > 0 {
                        tracing::info!(gone, "pods deleted while the watch was down");
                    }
                }
                shared.wake.notify_all();
            }
            Event::Delete(p) => {
                if let Some(uid) = p.metadata.uid.clone() {
                    invalid.remove(&uid);
                    if shared
                        .scheduler
                        .pod_deleted(&mut shared.cache.lock(), &uid, now)
                    {
                        shared.wake.notify_all();
                    }
                    let _ = reports.send(Report::Deleted { uid });
                }
            }
        }
    })
    .await;
}
