//! Keeps the cache's Services, ReplicationControllers, ReplicaSets and
//! StatefulSets (their selectors only) current, for PodTopologySpread's
//! default constraints, as kube-scheduler's listers do. Scheduling waits
//! until all four have listed once.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sSelector;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::Shared;
use crate::model::selector::LabelSelector;
use crate::model::workload::{ControllerKind, Workloads};

/// Which of the four watches have listed once (Services first, then the
/// controller kinds in [`ControllerKind`] order).
#[derive(Debug, Default)]
pub struct Synced([AtomicBool; 4]);

impl Synced {
    pub fn all(&self) -> bool {
        self.0.iter().all(|s| s.load(Ordering::Acquire))
    }
}

/// What one watched kind contributes to [`Workloads`].
trait Selecting: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static {
    /// The synced flag's index.
    const INDEX: usize;
    fn apply(&self, w: &mut Workloads, namespace: &str, name: &str);
    fn remove(w: &mut Workloads, namespace: &str, name: &str);
    fn retain(w: &mut Workloads, seen: &HashSet<(String, String)>);
}

impl Selecting for Service {
    const INDEX: usize = 0;
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
    ($t:ty, $kind:expr, $index:expr, $selector:expr) => {
        impl Selecting for $t {
            const INDEX: usize = $index;
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
    1,
    |rc: &ReplicationController| {
        let labels = rc.spec.as_ref()?.selector.clone()?;
        Some(LabelSelector::from_labels(&labels))
    }
);
controller!(
    ReplicaSet,
    ControllerKind::ReplicaSet,
    2,
    |rs: &ReplicaSet| parsed(Some(&rs.spec.selector))
);
controller!(
    StatefulSet,
    ControllerKind::StatefulSet,
    3,
    |ss: &StatefulSet| parsed(Some(&ss.spec.selector))
);

/// Starts the four watches; they run until aborted.
pub fn spawn(shared: &Arc<Shared>, client: &Client) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(watch::<Service>(shared.clone(), client.clone())),
        tokio::spawn(watch::<ReplicationController>(
            shared.clone(),
            client.clone(),
        )),
        tokio::spawn(watch::<ReplicaSet>(shared.clone(), client.clone())),
        tokio::spawn(watch::<StatefulSet>(shared.clone(), client.clone())),
    ]
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
async fn watch<K>(shared: Arc<Shared>, client: Client)
where
    K: Selecting<DynamicType = ()>,
{
    let api: Api<K> = Api::all(client);
    let kind = K::kind(&()).to_string();
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut relist: Option<HashSet<(String, String)>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relist = Some(HashSet::new()),
            Ok(Event::InitApply(o)) | Ok(Event::Apply(o)) => {
                let (ns, name) = key_of(&o);
                let mut cache = shared.cache.lock();
                o.apply(Arc::make_mut(&mut cache.snapshot.workloads), &ns, &name);
                if let Some(seen) = relist.as_mut() {
                    seen.insert((ns, name));
                }
            }
            Ok(Event::InitDone) => {
                if let Some(seen) = relist.take() {
                    let mut cache = shared.cache.lock();
                    K::retain(Arc::make_mut(&mut cache.snapshot.workloads), &seen);
                }
                shared.workloads_synced.0[K::INDEX].store(true, Ordering::Release);
                shared.wake.notify_all();
            }
            Ok(Event::Delete(o)) => {
                let (ns, name) = key_of(&o);
                let mut cache = shared.cache.lock();
                K::remove(Arc::make_mut(&mut cache.snapshot.workloads), &ns, &name);
            }
            Err(e) => tracing::warn!(error = %e, "{kind} watch failed; retrying"),
        }
    }
}
