//! Keeps the cache's Services, ReplicationControllers, ReplicaSets and
//! StatefulSets (their selectors only) current, for PodTopologySpread's
//! default constraints, as kube-scheduler's listers do. Scheduling waits
//! until all four have listed ([`super::cache_sync`]).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sSelector;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::cache_sync::Watched;
use super::reflector::{self, Change as Event};
use super::Shared;
use crate::model::selector::LabelSelector;
use crate::model::workload::{ControllerKind, Workloads};

/// What one watched kind contributes to [`Workloads`].
trait Selecting: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static {
    /// The resource's name (metrics, logs).
    const RESOURCE: &'static str;
    fn apply(&self, w: &mut Workloads, namespace: &str, name: &str);
    fn remove(w: &mut Workloads, namespace: &str, name: &str);
    fn retain(w: &mut Workloads, seen: &HashSet<(String, String)>);
}

impl Selecting for Service {
    const RESOURCE: &'static str = "services";
    fn apply(&self, w: &mut Workloads, namespace: &str, name: &str) {
        let selector = self.spec.as_ref().and_then(|s| s.selector.clone());
        w.set_service(namespace, name, selector);
    }
    fn remove(w: &mut Workloads, namespace: &str, name: &str) {
        w.remove_service(namespace, name);
    }
    fn retain(w: &mut Workloads, seen: &HashSet<(String, String)>) {
        w.retain_services(|ns, n| seen.contains(&(ns.to_string(), n.to_string())));
    }
}

/// A controller's selector as upstream reads it; one that does not parse
/// is skipped, as `LabelSelectorAsSelector` failing is.
fn parsed(selector: Option<&K8sSelector>) -> Option<LabelSelector> {
    LabelSelector::parse(selector?).ok()
}

macro_rules! controller {
    ($t:ty, $kind:expr, $resource:expr, $selector:expr) => {
        impl Selecting for $t {
            const RESOURCE: &'static str = $resource;
            fn apply(&self, w: &mut Workloads, namespace: &str, name: &str) {
                let selector: Option<LabelSelector> = $selector(self);
                w.set_controller(namespace, $kind, name, selector);
            }
            fn remove(w: &mut Workloads, namespace: &str, name: &str) {
                w.remove_controller(namespace, $kind, name);
            }
            fn retain(w: &mut Workloads, seen: &HashSet<(String, String)>) {
                w.retain_controllers($kind, |ns, n| {
                    seen.contains(&(ns.to_string(), n.to_string()))
                });
            }
        }
    };
}

controller!(
    ReplicationController,
    ControllerKind::ReplicationController,
    "replicationcontrollers",
    |rc: &ReplicationController| {
        let labels = rc.spec.as_ref()?.selector.clone()?;
        Some(LabelSelector::from_labels(&labels))
    }
);
controller!(
    ReplicaSet,
    ControllerKind::ReplicaSet,
    "replicasets",
    |rs: &ReplicaSet| parsed(Some(&rs.spec.selector))
);
controller!(
    StatefulSet,
    ControllerKind::StatefulSet,
    "statefulsets",
    |ss: &StatefulSet| parsed(Some(&ss.spec.selector))
);

/// Starts the four watches; they run until aborted.
pub fn spawn(shared: &Arc<Shared>, client: &Client) -> Vec<JoinHandle<()>> {
    vec![
        start::<Service>(shared, client),
        start::<ReplicationController>(shared, client),
        start::<ReplicaSet>(shared, client),
        start::<StatefulSet>(shared, client),
    ]
}

fn start<K: Selecting<DynamicType = ()>>(shared: &Arc<Shared>, client: &Client) -> JoinHandle<()> {
    let watched = shared.cache_sync.register(K::RESOURCE);
    tokio::spawn(watch::<K>(shared.clone(), client.clone(), watched))
}

fn key_of<K: Resource>(o: &K) -> (String, String) {
    let meta = o.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// Watches one kind. Its changes only move scores, so they do not give
/// unschedulable pods another try (nor do they in kube-scheduler).
async fn watch<K>(shared: Arc<Shared>, client: Client, watched: Watched)
where
    K: Selecting<DynamicType = ()>,
{
    let api: Api<K> = Api::all(client);
    let mut relist: Option<HashSet<(String, String)>> = None;
    reflector::run(api, watched, |event| match event {
        Event::Init => relist = Some(HashSet::new()),
        Event::InitApply(o) | Event::Apply(o) => {
            let (ns, name) = key_of(&o);
            let mut cache = shared.cache.lock();
            o.apply(Arc::make_mut(&mut cache.snapshot.workloads), &ns, &name);
            if let Some(seen) = relist.as_mut() {
                seen.insert((ns, name));
            }
        }
        Event::InitDone => {
            if let Some(seen) = relist.take() {
                let mut cache = shared.cache.lock();
                K::retain(Arc::make_mut(&mut cache.snapshot.workloads), &seen);
            }
            shared.wake.notify_all();
        }
        Event::Delete(o) => {
            let (ns, name) = key_of(&o);
            let mut cache = shared.cache.lock();
            K::remove(Arc::make_mut(&mut cache.snapshot.workloads), &ns, &name);
        }
    })
    .await;
}
