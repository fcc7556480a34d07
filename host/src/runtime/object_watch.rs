//! Objects plugins read beside Nodes and Pods (the kinds they name:
//! Coscheduling's PodGroups): a watch per kind, at the first version the
//! API server serves that the plugin reads, feeding the scheduler; and the
//! leader's writer of the statuses plugins ask for (a PodGroup's phase
//! and counts). Nothing is watched, and no RBAC needed, for kinds no
//! enabled plugin reads.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::Client;
use tokio::task::JoinHandle;

use super::cache_sync::Watched;
use super::client::{Backoff, Throttle};
use super::reflector::{self, Change as Event};
use super::Shared;
use crate::framework::objects::{object_key, ApiKind, ObjectEvent};

/// How often the statuses plugins ask for are written.
const STATUS_INTERVAL: Duration = Duration::from_millis(500);

/// Starts a watch per kind the profiles' plugins read, and the status
/// writer.
pub fn start(shared: &Arc<Shared>, client: &Client, throttle: Throttle) -> Vec<JoinHandle<()>> {
    let kinds = shared.scheduler.object_kinds();
    if kinds.is_empty() {
        return Vec::new();
    }
    let mut tasks: Vec<JoinHandle<()>> = kinds
        .into_iter()
        .map(|kind| {
            let watched = shared.cache_sync.register_with_hint(kind.plural, kind.hint);
            tokio::spawn(watch(shared.clone(), client.clone(), kind, watched))
        })
        .collect();
    tasks.push(tokio::spawn(write_statuses(
        shared.clone(),
        client.clone(),
        throttle,
    )));
    tasks
}

/// How often a kind the API server does not serve is looked for again.
const NOT_SERVED_RECHECK: Duration = Duration::from_secs(30);

/// The version of `kind` to watch: the first the plugin reads that the
/// API server serves. `None`: it serves none of them (the group is
/// missing: no CRD, an API not enabled). While the server cannot be
/// asked, it is asked again (with backoff).
async fn served_version(client: &Client, kind: &ApiKind) -> Option<&'static str> {
    let mut retry = Backoff::new(Duration::from_millis(250), Duration::from_secs(5));
    loop {
        match kube::discovery::group(client, kind.group).await {
            Ok(group) => {
                let served: Vec<String> = group.versions().map(str::to_string).collect();
                return kind
                    .versions
                    .iter()
                    .copied()
                    .find(|v| served.iter().any(|s| s == v));
            }
            Err(kube::Error::Api(e)) if e.code == 404 => return None,
            Err(kube::Error::Discovery(_)) => return None,
            Err(e) => {
                tracing::debug!(group = kind.group, error = %e, "discovery failed; retrying");
                tokio::time::sleep(retry.next_delay()).await;
            }
        }
    }
}

fn resource(kind: &ApiKind, version: &str) -> ApiResource {
    ApiResource {
        group: kind.group.into(),
        version: version.into(),
        api_version: kind.api_version(version),
        kind: kind.kind.into(),
        plural: kind.plural.into(),
    }
}

/// Feeds the scheduler `kind`'s objects until the task is aborted. A
/// kind the API server does not serve counts as listed (there is nothing
/// to read, and scheduling must not wait for it) and is looked for again
/// every half minute.
async fn watch(shared: Arc<Shared>, client: Client, kind: ApiKind, watched: Watched) {
    let mut counted = false;
    let version = loop {
        match served_version(&client, &kind).await {
            Some(v) => break v,
            None => {
                if !std::mem::replace(&mut counted, true) {
                    tracing::warn!(
                        kind = kind.kind,
                        group = kind.group,
                        "not served by the API server ({}); the plugins that read it see none",
                        kind.hint
                    );
                    watched.current();
                    shared.wake.notify_all();
                }
                tokio::time::sleep(NOT_SERVED_RECHECK).await;
            }
        }
    };
    let api: Api<DynamicObject> = Api::all_with(client, &resource(&kind, version));
    let mut relist: Option<HashSet<String>> = None;
    let event = |shared: &Shared, e: ObjectEvent<'_>| {
        let now = shared.now_ms();
        shared
            .scheduler
            .object_event(&mut shared.cache.lock(), &kind, e, now);
        shared.wake.notify_all();
    };
    reflector::run(api, watched, |ev| match ev {
        Event::Init => relist = Some(HashSet::new()),
        Event::InitApply(o) | Event::Apply(o) => {
            let object = serde_json::to_value(&o).unwrap_or_default();
            if let Some(seen) = relist.as_mut() {
                seen.insert(object_key(&kind, &object));
            }
            let applied = ObjectEvent::Applied {
                version,
                object: &object,
            };
            event(&shared, applied);
        }
        Event::InitDone => {
            if let Some(seen) = relist.take() {
                event(&shared, ObjectEvent::Relisted(&seen));
            }
            shared.wake.notify_all();
        }
        Event::Delete(o) => {
            let object = serde_json::to_value(&o).unwrap_or_default();
            event(&shared, ObjectEvent::Deleted(&object_key(&kind, &object)));
        }
    })
    .await;
}

/// On the leader: writes the statuses plugins ask for, each change once.
async fn write_statuses(shared: Arc<Shared>, client: Client, throttle: Throttle) {
    let mut written: HashMap<(String, String, String), serde_json::Value> = HashMap::new();
    let mut tick = tokio::time::interval(STATUS_INTERVAL);
    loop {
        tick.tick().await;
        if !shared.leadership.leading() || shared.stopping.load(Ordering::Acquire) {
            continue;
        }
        for w in shared.scheduler.status_writes() {
            let key = (w.kind.kind.to_string(), w.namespace.clone(), w.name.clone());
            if written.get(&key) == Some(&w.status) {
                continue;
            }
            throttle.wait().await;
            let Some(version) = served_version(&client, &w.kind).await else {
                continue;
            };
            let resource = resource(&w.kind, version);
            let api: Api<DynamicObject> = if w.kind.namespaced {
                Api::namespaced_with(client.clone(), &w.namespace, &resource)
            } else {
                Api::all_with(client.clone(), &resource)
            };
            if w.status.is_null() {
                // A deletion (DynamicResources' stale extended resource
                // claim), done once.
                match super::binder::extended_claims::delete_claim(&api, &w.name).await {
                    Ok(()) => {
                        written.insert(key, w.status);
                    }
                    Err(e) => {
                        tracing::warn!(kind = w.kind.kind, namespace = %w.namespace, name = %w.name, error = %e, "deleting the object failed")
                    }
                }
                continue;
            }
            let patch = serde_json::json!({"status": w.status});
            match api
                .patch_status(&w.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    written.insert(key, w.status);
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(kind = w.kind.kind, namespace = %w.namespace, name = %w.name, error = %e, "writing the status failed")
                }
            }
        }
    }
}
