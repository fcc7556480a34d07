//! Watches on PersistentVolumes, PersistentVolumeClaims, StorageClasses,
//! CSINodes, CSIDrivers and CSIStorageCapacities that keep the cache's
//! volume store current, as the Node and Pod watches keep nodes and pods
//! (a relist is applied as a whole). Scheduling waits until all six have
//! listed, as kube-scheduler waits for its informers, and while any is
//! lost or relisting ([`super::cache_sync`]).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume as K8sPv, PersistentVolumeClaim as K8sPvc};
use k8s_openapi::api::storage::v1::{
    CSIDriver as K8sCsiDriver, CSINode as K8sCsiNode, CSIStorageCapacity as K8sCapacity,
    StorageClass as K8sClass,
};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::cache_sync::Watched;
use super::reflector::{self, Change as Event};
use super::Shared;
use crate::framework::volumes::{VolumeKind, VolumeObject};
use crate::model::volume::{
    CsiDriver, CsiNode, CsiStorageCapacity, PersistentVolume, PersistentVolumeClaim, StorageClass,
};
use crate::model::ModelError;

/// Starts the six watches; they run until aborted.
pub fn spawn(shared: &Arc<Shared>, client: &Client) -> Vec<JoinHandle<()>> {
    let c = || client.clone();
    let s = || shared.clone();
    let w = |kind: VolumeKind| shared.cache_sync.register(resource(kind));
    vec![
        tokio::spawn(watch::<K8sPv>(
            s(),
            Api::all(c()),
            VolumeKind::Pv,
            w(VolumeKind::Pv),
            |o| PersistentVolume::from_k8s(o).map(VolumeObject::Pv),
        )),
        tokio::spawn(watch::<K8sPvc>(
            s(),
            Api::all(c()),
            VolumeKind::Pvc,
            w(VolumeKind::Pvc),
            |o| PersistentVolumeClaim::from_k8s(o).map(VolumeObject::Pvc),
        )),
        tokio::spawn(watch::<K8sClass>(
            s(),
            Api::all(c()),
            VolumeKind::Class,
            w(VolumeKind::Class),
            |o| StorageClass::from_k8s(o).map(VolumeObject::Class),
        )),
        tokio::spawn(watch::<K8sCsiNode>(
            s(),
            Api::all(c()),
            VolumeKind::CsiNode,
            w(VolumeKind::CsiNode),
            |o| CsiNode::from_k8s(o).map(VolumeObject::CsiNode),
        )),
        tokio::spawn(watch::<K8sCsiDriver>(
            s(),
            Api::all(c()),
            VolumeKind::CsiDriver,
            w(VolumeKind::CsiDriver),
            |o| CsiDriver::from_k8s(o).map(VolumeObject::CsiDriver),
        )),
        tokio::spawn(watch::<K8sCapacity>(
            s(),
            Api::all(c()),
            VolumeKind::CsiCapacity,
            w(VolumeKind::CsiCapacity),
            |o| CsiStorageCapacity::from_k8s(o).map(VolumeObject::CsiCapacity),
        )),
    ]
}

/// The kind's resource (its metrics' and logs' label).
fn resource(kind: VolumeKind) -> &'static str {
    match kind {
        VolumeKind::Pv => "persistentvolumes",
        VolumeKind::Pvc => "persistentvolumeclaims",
        VolumeKind::Class => "storageclasses",
        VolumeKind::CsiNode => "csinodes",
        VolumeKind::CsiDriver => "csidrivers",
        VolumeKind::CsiCapacity => "csistoragecapacities",
    }
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
    watched: Watched,
    convert: fn(&K) -> Result<VolumeObject, ModelError>,
) where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut relist: Option<HashSet<String>> = None;
    reflector::run(api, watched, |event| {
        let now = shared.now_ms();
        let changed = match event {
            Event::Init => {
                relist = Some(HashSet::new());
                false
            }
            Event::InitApply(o) | Event::Apply(o) => {
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
            Event::InitDone => {
                let gone = relist.take().map_or(0, |seen| {
                    shared.cache.lock().retain_volumes(kind, &seen, now)
                });
                if gone > 0 {
                    tracing::info!(gone, "{}s deleted while the watch was down", kind.as_str());
                }
                true
            }
            Event::Delete(o) => shared.cache.lock().volume_deleted(kind, &key_of(&o), now),
        };
        if changed {
            shared.wake.notify_all();
        }
    })
    .await;
}
