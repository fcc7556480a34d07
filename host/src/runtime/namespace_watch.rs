//! Keeps the cache's Namespaces (their labels, for the `namespaceSelector`
//! of pod affinity terms) current, as kube-scheduler's namespace informer
//! does.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};

use super::cache_sync::Watched;
use super::reflector::{self, Change as Event};
use super::Shared;
use crate::manifest::namespace_labels;

/// Watches Namespaces until the task is aborted. A change lets
/// unschedulable pods try again (upstream: InterPodAffinity's `Namespace`
/// events).
pub async fn watch_namespaces(shared: Arc<Shared>, client: Client, watched: Watched) {
    let api: Api<Namespace> = Api::all(client);
    let mut relist: Option<HashSet<String>> = None;
    reflector::run(api, watched, |event| match event {
        Event::Init => relist = Some(HashSet::new()),
        Event::InitApply(n) | Event::Apply(n) => {
            let (name, labels) = namespace_labels(&n);
            if let Some(seen) = relist.as_mut() {
                seen.insert(name.clone());
            }
            let mut cache = shared.cache.lock();
            if cache.snapshot.namespaces.labels(&name) != &labels {
                Arc::make_mut(&mut cache.snapshot.namespaces).set(&name, labels);
                changed(&shared, &mut cache);
            }
        }
        Event::InitDone => {
            let mut cache = shared.cache.lock();
            if let Some(seen) = relist.take() {
                Arc::make_mut(&mut cache.snapshot.namespaces).retain(|n| seen.contains(n));
            }
            changed(&shared, &mut cache);
        }
        Event::Delete(n) => {
            let name = n.metadata.name.unwrap_or_default();
            let mut cache = shared.cache.lock();
            Arc::make_mut(&mut cache.snapshot.namespaces).remove(&name);
            changed(&shared, &mut cache);
        }
    })
    .await;
}

fn changed(shared: &Shared, cache: &mut super::Cache) {
    let now = shared.now_ms();
    cache.queue.on_cluster_event(now);
    shared.wake.notify_all();
}
