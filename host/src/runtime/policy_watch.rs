//! Watches on what preemption reads besides Nodes and Pods:
//! PodDisruptionBudgets (`policy/v1` when the API server serves it, else
//! `policy/v1beta1`, which is all a 1.20 server has) into the cache, and
//! PriorityClasses (`scheduling.k8s.io/v1`) for pods that arrive without
//! a resolved `spec.priority` (admission normally resolves it).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::scheduling::v1::PriorityClass as K8sPriorityClass;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use super::Shared;
use crate::model::budget::DisruptionBudget;
use crate::model::priority::PriorityClass;

/// The PodDisruptionBudget resource the server serves.
async fn budget_resource(client: &Client) -> ApiResource {
    let version = match client.list_api_group_resources("policy/v1").await {
        Ok(list)
            if list
                .resources
                .iter()
                .any(|r| r.name == "poddisruptionbudgets") =>
        {
            "v1"
        }
        _ => "v1beta1",
    };
    ApiResource {
        group: "policy".into(),
        version: version.into(),
        api_version: format!("policy/{version}"),
        kind: "PodDisruptionBudget".into(),
        plural: "poddisruptionbudgets".into(),
    }
}

fn budget_of(o: &DynamicObject) -> Result<DisruptionBudget, String> {
    let v = serde_json::to_value(o).map_err(|e| e.to_string())?;
    DisruptionBudget::from_json(v)
}

/// Keeps the cache's budgets current until the task is aborted; marks
/// them synced after the first complete list.
pub async fn watch_budgets(shared: Arc<Shared>, client: Client) {
    let resource = budget_resource(&client).await;
    tracing::info!(api_version = %resource.api_version, "watching PodDisruptionBudgets");
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut relist: Option<HashSet<(String, String)>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relist = Some(HashSet::new()),
            Ok(Event::InitApply(o)) | Ok(Event::Apply(o)) => match budget_of(&o) {
                Ok(b) => {
                    if let Some(seen) = relist.as_mut() {
                        seen.insert((b.namespace.clone(), b.name.clone()));
                    }
                    shared.cache.lock().snapshot.budgets.set(b);
                }
                Err(e) => tracing::warn!(error = %e, "PodDisruptionBudget ignored"),
            },
            Ok(Event::InitDone) => {
                let mut cache = shared.cache.lock();
                let budgets = &mut cache.snapshot.budgets;
                if let Some(seen) = relist.take() {
                    let list = Arc::make_mut(&mut budgets.list);
                    list.retain(|b| seen.contains(&(b.namespace.clone(), b.name.clone())));
                }
                if !budgets.synced {
                    // Pods that could not preempt while the budgets were
                    // unknown try again.
                    budgets.synced = true;
                    shared.budgets_synced.store(true, Ordering::Release);
                    let now = shared.now_ms();
                    cache.queue.on_cluster_event(now);
                    shared.wake.notify_all();
                }
            }
            Ok(Event::Delete(o)) => {
                let ns = o.metadata.namespace.unwrap_or_default();
                let name = o.metadata.name.unwrap_or_default();
                shared.cache.lock().snapshot.budgets.remove(&ns, &name);
            }
            Err(e) => tracing::warn!(error = %e, "PodDisruptionBudget watch failed; retrying"),
        }
    }
}

/// Keeps the PriorityClasses current until the task is aborted.
pub async fn watch_priority_classes(shared: Arc<Shared>, client: Client) {
    let api: Api<K8sPriorityClass> = Api::all(client);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut relist: Option<Vec<PriorityClass>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relist = Some(Vec::new()),
            Ok(Event::InitApply(c)) | Ok(Event::Apply(c)) => match PriorityClass::from_k8s(&c) {
                Ok(c) => match relist.as_mut() {
                    Some(list) => list.push(c),
                    None => shared.priority_classes.write().set(c),
                },
                Err(e) => tracing::warn!(error = %e, "PriorityClass ignored"),
            },
            Ok(Event::InitDone) => {
                if let Some(list) = relist.take() {
                    *shared.priority_classes.write() =
                        crate::model::priority::PriorityClasses::new(list);
                }
            }
            Ok(Event::Delete(c)) => {
                if let Some(name) = c.metadata.name.as_deref() {
                    shared.priority_classes.write().remove(name);
                }
            }
            Err(e) => tracing::warn!(error = %e, "PriorityClass watch failed; retrying"),
        }
    }
}
