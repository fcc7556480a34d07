//! Objects plugins read beside Nodes and Pods (the kinds they name:
//! Coscheduling's PodGroups): a watch per kind, at the first version the
//! API server serves that the plugin reads, feeding the scheduler; and the
//! leader's writer of the statuses plugins ask for (a PodGroup's phase
//! and counts). Nothing is watched, and no RBAC needed, for kinds no
//! enabled plugin reads.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use tokio::task::JoinHandle;

use super::client::Throttle;
use super::Shared;
use crate::framework::objects::{object_key, ApiKind, ObjectEvent};

/// How often the statuses plugins ask for are written.
const STATUS_INTERVAL: Duration = Duration::from_millis(500);

/// Kinds not yet listed once (the first cycle waits for them all).
#[derive(Default)]
pub struct Synced(AtomicUsize);

impl Synced {
    pub fn all(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }
}

/// Starts a watch per kind the profiles' plugins read, and the status
/// writer.
pub fn start(shared: &Arc<Shared>, client: &Client, throttle: Throttle) -> Vec<JoinHandle<()>> {
    let kinds = shared.scheduler.object_kinds();
    if kinds.is_empty() {
        return Vec::new();
    }
    shared
        .objects_synced
        .0
        .store(kinds.len(), Ordering::Release);
    let mut tasks: Vec<JoinHandle<()>> = kinds
        .into_iter()
        .map(|kind| tokio::spawn(watch(shared.clone(), client.clone(), kind)))
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
/// missing: no CRD, an API not enabled). When discovery itself fails, the
/// first version (the watch's errors then say why).
async fn served_version(client: &Client, kind: &ApiKind) -> Option<&'static str> {
    let first = kind.versions[0];
    match kube::discovery::group(client, kind.group).await {
        Ok(group) => {
            let served: Vec<String> = group.versions().map(str::to_string).collect();
            kind.versions
                .iter()
                .copied()
                .find(|v| served.iter().any(|s| s == v))
        }
        Err(kube::Error::Api(e)) if e.code == 404 => None,
        Err(kube::Error::Discovery(_)) => None,
        Err(_) => Some(first),
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
async fn watch(shared: Arc<Shared>, client: Client, kind: ApiKind) {
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
                    shared.objects_synced.0.fetch_sub(1, Ordering::AcqRel);
                    shared.wake.notify_all();
                }
                tokio::time::sleep(NOT_SERVED_RECHECK).await;
            }
        }
    };
    let api: Api<DynamicObject> = Api::all_with(client, &resource(&kind, version));
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut relist: Option<HashSet<String>> = None;
    let mut listed_once = counted;
    let mut last_error = String::new();
    let event = |shared: &Shared, e: ObjectEvent<'_>| {
        let now = shared.now_ms();
        shared
            .scheduler
            .object_event(&mut shared.cache.lock(), &kind, e, now);
        shared.wake.notify_all();
    };
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => relist = Some(HashSet::new()),
            Ok(Event::InitApply(o)) | Ok(Event::Apply(o)) => {
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
            Ok(Event::InitDone) => {
                if let Some(seen) = relist.take() {
                    event(&shared, ObjectEvent::Relisted(&seen));
                }
                if !std::mem::replace(&mut listed_once, true) {
                    shared.objects_synced.0.fetch_sub(1, Ordering::AcqRel);
                }
                shared.wake.notify_all();
            }
            Ok(Event::Delete(o)) => {
                let object = serde_json::to_value(&o).unwrap_or_default();
                event(&shared, ObjectEvent::Deleted(&object_key(&kind, &object)));
            }
            Err(e) => {
                let msg = e.to_string();
                if msg != last_error {
                    tracing::warn!(error = %msg, kind = kind.kind, "watch failed ({}); retrying", kind.hint);
                    last_error = msg;
                }
            }
        }
    }
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
