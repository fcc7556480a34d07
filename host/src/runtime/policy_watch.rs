//! Watches on what preemption reads besides Nodes and Pods:
//! PodDisruptionBudgets (`policy/v1` when the API server serves it, else
//! `policy/v1beta1`, which is all a 1.20 server has) into the cache, and
//! PriorityClasses (`scheduling.k8s.io/v1`) for pods that arrive without
//! a resolved `spec.priority` (admission normally resolves it).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::scheduling::v1::PriorityClass as K8sPriorityClass;
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};

use super::cache_sync::Watched;
use super::client::Backoff;
use super::reflector::{self, Change as Event};
use super::Shared;
use crate::model::budget::DisruptionBudget;
use crate::model::priority::PriorityClass;

/// The PodDisruptionBudget resource the server serves (asked again, with
/// backoff, while the server cannot be asked).
async fn budget_resource(client: &Client) -> ApiResource {
    let mut retry = Backoff::new(Duration::from_millis(250), Duration::from_secs(5));
    let version = loop {
        match client.list_api_group_resources("policy/v1").await {
            Ok(list)
                if list
                    .resources
                    .iter()
                    .any(|r| r.name == "poddisruptionbudgets") =>
            {
                break "v1"
            }
            Ok(_) => break "v1beta1",
            Err(kube::Error::Api(e)) if e.code == 404 => break "v1beta1",
            Err(e) => {
                tracing::debug!(error = %e, "discovery of policy/v1 failed; retrying");
                tokio::time::sleep(retry.next_delay()).await;
            }
        }
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

/// Keeps the cache's budgets current until the task is aborted.
pub async fn watch_budgets(shared: Arc<Shared>, client: Client, watched: Watched) {
    let resource = budget_resource(&client).await;
    tracing::info!(api_version = %resource.api_version, "watching PodDisruptionBudgets");
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let mut relist: Option<HashSet<(String, String)>> = None;
    reflector::run(api, watched, |event| {
        match event {
            Event::Init => relist = Some(HashSet::new()),
            Event::InitApply(o) | Event::Apply(o) => match budget_of(&o) {
                Ok(b) => {
                    if let Some(seen) = relist.as_mut() {
                        seen.insert((b.namespace.clone(), b.name.clone()));
                    }
                    shared.cache.lock().snapshot.budgets.set(b);
                }
                Err(e) => tracing::warn!(error = %e, "PodDisruptionBudget ignored"),
            },
            Event::InitDone => {
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
                    let now = shared.now_ms();
                    cache.queue.on_cluster_event(now);
                    shared.wake.notify_all();
                }
            }
            Event::Delete(o) => {
                let ns = o.metadata.namespace.unwrap_or_default();
                let name = o.metadata.name.unwrap_or_default();
                shared.cache.lock().snapshot.budgets.remove(&ns, &name);
            }
        }
    })
    .await;
}

/// Keeps the PriorityClasses current until the task is aborted.
pub async fn watch_priority_classes(shared: Arc<Shared>, client: Client, watched: Watched) {
    let api: Api<K8sPriorityClass> = Api::all(client);
    let mut relist: Option<Vec<PriorityClass>> = None;
    reflector::run(api, watched, |event| match event {
        Event::Init => relist = Some(Vec::new()),
        Event::InitApply(c) | Event::Apply(c) => match PriorityClass::from_k8s(&c) {
            Ok(c) => match relist.as_mut() {
                Some(list) => list.push(c),
                None => shared.priority_classes.write().set(c),
            },
            Err(e) => tracing::warn!(error = %e, "PriorityClass ignored"),
        },
        Event::InitDone => {
            if let Some(list) = relist.take() {
                *shared.priority_classes.write() =
                    crate::model::priority::PriorityClasses::new(list);
            }
        }
        Event::Delete(c) => {
            if let Some(name) = c.metadata.name.as_deref() {
                shared.priority_classes.write().remove(name);
            }
        }
    })
    .await;
}
