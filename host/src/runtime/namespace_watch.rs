//! Keeps the cache's Namespaces (their labels, for the `namespaceSelector`
//! of pod affinity terms) current, as kube-scheduler's namespace informer
//! does.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use super::Shared;
use crate::manifest::namespace_labels;

/// Watches Namespaces until the task is aborted; marks them synced after
/// the first complete list. A change lets unschedulable pods try again
/// (upstream: InterPodAffinity's `Namespace` events).
pub async fn watch_namespaces(shared: Arc<Shared>, client: Client) {
    let api: Api<Namespace> = Api::all(client);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut relist: Option<HashSet<String>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relist = Some(HashSet::new()),
            Ok(Event::InitApply(n)) | Ok(Event::Apply(n)) => {
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
            Ok(Event::InitDone) => {
                let mut cache = shared.cache.lock();
                if let Some(seen) = relist.take() {
                    Arc::make_mut(&mut cache.snapshot.namespaces).retain(|n| seen.contains(n));
                }
                shared.namespaces_synced.store(true, Ordering::Release);
                changed(&shared, &mut cache);
            }
            Ok(Event::Delete(n)) => {
                let name = n.metadata.name.unwrap_or_default();
                let mut cache = shared.cache.lock();
                Arc::make_mut(&mut cache.snapshot.namespaces).remove(&name);
                changed(&shared, &mut cache);
            }
            Err(e) => tracing::warn!(error = %e, "Namespace watch failed; retrying"),
        }
    }
}

fn changed(shared: &Shared, cache: &mut super::Cache) {
    let now = shared.now_ms();
    cache.queue.on_cluster_event(now);
    shared.wake.notify_all();
}
