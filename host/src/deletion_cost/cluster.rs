//! Reading Deployments, ReplicaSets and Pods from the API server: a list
//! for one-shot commands, watch-backed caches for the running controller
//! (so a pass every few seconds costs the API server nothing).

use std::collections::BTreeSet;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use tokio_util::sync::CancellationToken;

use super::config::OptIn;
use super::facts::PodFacts;
use super::workload::Inventory;

/// (namespace, ReplicaSet name) of the managed ReplicaSets.
fn managed_keys(inventory: &Inventory, opt_in: &OptIn) -> BTreeSet<(String, String)> {
    inventory
        .managed(opt_in)
        .into_iter()
        .map(|r| (r.namespace, r.name))
        .collect()
}

fn owned_by_managed(pod: &PodFacts, keys: &BTreeSet<(String, String)>) -> bool {
    pod.owner.as_ref().is_some_and(|o| {
        o.kind == "ReplicaSet" && keys.contains(&(pod.namespace.clone(), o.name.clone()))
    })
}

/// The managed ReplicaSets (and their Deployments) and their pods, listed
/// now.
pub async fn list_managed(client: &Client, opt_in: &OptIn) -> Result<Inventory, kube::Error> {
    let lp = ListParams::default();
    let mut inventory = Inventory {
        deployments: Api::<Deployment>::all(client.clone())
            .list(&lp)
            .await?
            .items,
        replica_sets: Api::<ReplicaSet>::all(client.clone())
            .list(&lp)
            .await?
            .items,
        pods: Vec::new(),
    };
    let keys = managed_keys(&inventory, opt_in);
    let namespaces: BTreeSet<&String> = keys.iter().map(|(ns, _)| ns).collect();
    for ns in namespaces {
        let pods = Api::<Pod>::namespaced(client.clone(), ns).list(&lp).await?;
        inventory.pods.extend(
            pods.items
                .iter()
                .map(PodFacts::from_k8s)
                .filter(|p| owned_by_managed(p, &keys)),
        );
    }
    Ok(inventory)
}

/// Everything of one namespace (for a live scale-down preview).
pub async fn list_namespace(client: &Client, namespace: &str) -> Result<Inventory, kube::Error> {
    let lp = ListParams::default();
    Ok(Inventory {
        deployments: Api::<Deployment>::namespaced(client.clone(), namespace)
            .list(&lp)
            .await?
            .items,
        replica_sets: Api::<ReplicaSet>::namespaced(client.clone(), namespace)
            .list(&lp)
            .await?
            .items,
        pods: Api::<Pod>::namespaced(client.clone(), namespace)
            .list(&lp)
            .await?
            .items
            .iter()
            .map(PodFacts::from_k8s)
            .collect(),
    })
}

/// Caches of Deployments, ReplicaSets and Pods, kept current by watches.
pub struct WatchedInventory {
    deployments: Store<Deployment>,
    replica_sets: Store<ReplicaSet>,
    pods: Store<Pod>,
}

fn watch<K>(api: Api<K>, stop: CancellationToken) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let kind = K::kind(&());
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .boxed();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                item = stream.next() => match item {
                    None => return,
                    Some(Err(e)) => tracing::warn!(%kind, error = %e, "deletion-cost watch failed; retrying with backoff"),
                    Some(Ok(_)) => {}
                },
            }
        }
    });
    reader
}

impl WatchedInventory {
    /// Starts the watches; they stop when `stop` is cancelled.
    pub fn start(client: Client, stop: CancellationToken) -> Self {
        WatchedInventory {
            deployments: watch(Api::all(client.clone()), stop.clone()),
            replica_sets: watch(Api::all(client.clone()), stop.clone()),
            pods: watch(Api::all(client), stop),
        }
    }

    /// Waits for the first full list of each kind.
    pub async fn ready(&self) -> anyhow::Result<()> {
        self.deployments.wait_until_ready().await?;
        self.replica_sets.wait_until_ready().await?;
        self.pods.wait_until_ready().await?;
        Ok(())
    }

    /// The current managed workloads and their pods.
    pub fn snapshot(&self, opt_in: &OptIn) -> Inventory {
        let mut inventory = Inventory {
            deployments: self
                .deployments
                .state()
                .iter()
                .map(|d| (**d).clone())
                .collect(),
            replica_sets: self
                .replica_sets
                .state()
                .iter()
                .map(|r| (**r).clone())
                .collect(),
            pods: Vec::new(),
        };
        let keys = managed_keys(&inventory, opt_in);
        inventory.pods = self
            .pods
            .state()
            .iter()
            .filter(|p| {
                p.metadata.owner_references.iter().flatten().any(|o| {
                    o.controller == Some(true)
                        && o.kind == "ReplicaSet"
                        && keys.contains(&(
                            p.metadata.namespace.clone().unwrap_or_default(),
                            o.name.clone(),
                        ))
                })
            })
            .map(|p| PodFacts::from_k8s(p))
            .collect();
        inventory
    }
}
