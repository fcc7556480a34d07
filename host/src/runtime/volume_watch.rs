//! Watches on PersistentVolumes, PersistentVolumeClaims, StorageClasses,
//! CSINodes, CSIDrivers and CSIStorageCapacities that keep the cache's
//! volume store current, as the Node and Pod watches keep nodes and pods
//! (a relist is applied as a whole). Scheduling waits until all six have
//! listed once, as kube-scheduler waits for its informers.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume as K8sPv, PersistentVolumeClaim as K8sPvc};
use k8s_openapi::api::storage::v1::{
    CSIDriver as K8sCsiDriver, CSINode as K8sCsiNode, CSIStorageCapacity as K8sCapacity,
    StorageClass as K8sClass,
};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::Shared;
use crate::framework::volumes::{VolumeKind, VolumeObject};
use crate::model::volume::{
    CsiDriver, CsiNode, CsiStorageCapacity, PersistentVolume, PersistentVolumeClaim, StorageClass,
};
use crate::model::ModelError;

/// Which of the six watches have listed once.
#[derive(Debug, Default)]
pub struct Synced([AtomicBool; VolumeKind::ALL.len()]);

impl Synced {
    pub fn all(&self) -> bool {
        self.0.iter().all(|s| s.load(Ordering::Acquire))
    }

    fn set(&self, kind: VolumeKind) {
        let i = VolumeKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        self.0[i].store(true, Ordering::Release);
    }
}

/// Starts the six watches; they run until aborted.
pub fn spawn(shared: &Arc<Shared>, client: &Client) -> Vec<JoinHandle<()>> {
    let c = || client.clone();
    let s = || shared.clone();
    vec![
        tokio::spawn(watch::<K8sPv>(s(), Api::all(c()), VolumeKind::Pv, |o| {
            PersistentVolume::from_k8s(o).map(VolumeObject::Pv)
        })),
        tokio::spawn(watch::<K8sPvc>(s(), Api::all(c()), VolumeKind::Pvc, |o| {
            PersistentVolumeClaim::from_k8s(o).map(VolumeObject::Pvc)
        })),
        tokio::spawn(watch::<K8sClass>(
            s(),
            Api::all(c()),
            VolumeKind::Class,
            |o| StorageClass::from_k8s(o).map(VolumeObject::Class),
        )),
        tokio::spawn(watch::<K8sCsiNode>(
            s(),
            Api::all(c()),
            VolumeKind::CsiNode,
            |o| CsiNode::from_k8s(o).map(VolumeObject::CsiNode),
        )),
        tokio::spawn(watch::<K8sCsiDriver>(
            s(),
            Api::all(c()),
            VolumeKind::CsiDriver,
            |o| CsiDriver::from_k8s(o).map(VolumeObject::CsiDriver),
        )),
        tokio::spawn(watch::<K8sCapacity>(
            s(),
            Api::all(c()),
            VolumeKind::CsiCapacity,
            |o| CsiStorageCapacity::from_k8s(o).map(VolumeObject::CsiCapacity),
        )),
    ]
}

/// The store's key of an API object: `namespace/name` for namespaced
/// ones (claims, capacities).
fn key_of<K: Resource>(o: &K) -> String {
    let meta = o.meta();
    let name = meta.name.clone().unwrap_or_default();
    match &meta.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    }
}

async fn watch<K>(
    shared: Arc<Shared>,
    api: Api<K>,
    kind: VolumeKind,
    convert: fn(&K) -> Result<VolumeObject, ModelError>,
) where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut relist: Option<HashSet<String>> = None;
    while let Some(event) = stream.next().await {
        let now = shared.now_ms();
        let changed = match event {
            Ok(Event::Init) => {
                relist = Some(HashSet::new());
                false
            }
            Ok(Event::InitApply(o)) | Ok(Event::Apply(o)) => {
                let key = key_of(&o);
                if let Some(seen) = relist.as_mut() {
                    seen.insert(key.clone());
                }
                match convert(&o) {
                    Ok(obj) => shared.cache.lock().volume_applied(obj, now),
                    Err(e) => {
                        // Not used rather than used as last seen.
                        tracing::warn!(error = %e, "{} ignored", kind.as_str());
                        shared.cache.lock().volume_deleted(kind, &key, now)
                    }
                }
            }
            Ok(Event::InitDone) => {
                let gone = relist.take().map_or(0, |seen| {
                    shared.cache.lock().retain_volumes(kind, &seen, now)
                });
                if gone > 0 {
                    tracing::info!(gone, "{}s deleted while the watch was down", kind.as_str());
                }
                shared.volumes_synced.set(kind);
                true
            }
            Ok(Event::Delete(o)) => shared.cache.lock().volume_deleted(kind, &key_of(&o), now),
            Err(e) => {
                tracing::warn!(error = %e, "{} watch failed; retrying", kind.as_str());
                false
            }
        };
        if changed {
            shared.wake.notify_all();
        }
    }
}
