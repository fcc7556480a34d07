//! PodGroups for the Coscheduling plugin (when a profile runs it): a
//! watch on `scheduling.x-k8s.io/v1alpha1` PodGroups that feeds the
//! scheduler's directory, the leader's writer of `podgroups/status`
//! (phase and counts), and what a deleted pod means for the pods held at
//! Permit.
//!
//! Waiting pods live only in the leader's memory: nothing is bound before
//! a group is complete, so a new leader (or a restarted one) rebuilds the
//! groups from the API (members bound, pending) and binds all or none.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
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
use crate::model::pod_group::{
    PodGroupObject, PodGroupStatus, API_GROUP, API_VERSION, KIND, PLURAL,
};
use crate::model::PodGroup;

/// How often changed statuses are written.
const STATUS_INTERVAL: Duration = Duration::from_millis(500);

fn resource() -> ApiResource {
    ApiResource {
        group: API_GROUP.into(),
        version: API_VERSION.into(),
        api_version: format!("{API_GROUP}/{API_VERSION}"),
        kind: KIND.into(),
        plural: PLURAL.into(),
    }
}

/// Starts the watch and the status writer when a profile runs
/// Coscheduling (otherwise PodGroups are not read and need no RBAC).
pub fn start(shared: &Arc<Shared>, client: &Client, throttle: Throttle) -> Vec<JoinHandle<()>> {
    if !shared.scheduler.pod_groups.enabled() {
        return Vec::new();
    }
    shared.pod_groups_synced.store(false, Ordering::Release);
    shared
        .cache
        .lock()
        .queue
        .set_sort(shared.scheduler.pod_groups.clone());
    vec![
        tokio::spawn(watch(shared.clone(), client.clone())),
        tokio::spawn(write_statuses(shared.clone(), client.clone(), throttle)),
    ]
}

/// Keeps the directory's PodGroups current until the task is aborted.
async fn watch(shared: Arc<Shared>, client: Client) {
    let api: Api<DynamicObject> = Api::all_with(client, &resource());
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let groups = &shared.scheduler.pod_groups;
    let mut relist: Option<HashSet<String>> = None;
    let mut last_error = String::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relist = Some(HashSet::new()),
            Ok(Event::InitApply(o)) | Ok(Event::Apply(o)) => {
                let key = apply(&shared, &o);
                if let Some(seen) = relist.as_mut() {
                    seen.insert(key);
                }
            }
            Ok(Event::InitDone) => {
                if let Some(seen) = relist.take() {
                    for k in groups.group_keys() {
                        if !seen.contains(&k) {
                            groups.remove_group(&k);
                        }
                    }
                }
                shared.pod_groups_synced.store(true, Ordering::Release);
                shared.wake.notify_all();
            }
            Ok(Event::Delete(o)) => groups.remove_group(&key_of(&o)),
            Err(e) => {
                let msg = e.to_string();
                if msg != last_error {
                    tracing::warn!(error = %msg, "PodGroup watch failed (is the CRD installed? deploy/components/gangs); retrying");
                    last_error = msg;
                }
            }
        }
    }
}

fn key_of(o: &DynamicObject) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or("default"),
        o.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Reads one PodGroup into the directory; returns its key. One that
/// cannot be used is kept with its error (its members say why).
fn apply(shared: &Shared, o: &DynamicObject) -> String {
    let key = key_of(o);
    let parsed = serde_json::to_value(o)
        .and_then(serde_json::from_value::<PodGroupObject>)
        .map_err(|e| format!("PodGroup {key}: {e}"))
        .and_then(|obj| PodGroup::from_object(&obj).map_err(|e| e.to_string()));
    if let Err(e) = &parsed {
        tracing::warn!(error = %e, "PodGroup cannot be used");
    }
    shared.scheduler.pod_groups.apply_group(&key, parsed);
    shared.wake.notify_all();
    key
}

/// On the leader: writes the phase and counts of groups that changed.
async fn write_statuses(shared: Arc<Shared>, client: Client, throttle: Throttle) {
    let mut written: HashMap<String, PodGroupStatus> = HashMap::new();
    let mut tick = tokio::time::interval(STATUS_INTERVAL);
    loop {
        tick.tick().await;
        if !shared.leadership.leading() || shared.stopping.load(Ordering::Acquire) {
            continue;
        }
        for (group, mut status, started) in shared.scheduler.pod_groups.take_statuses() {
            let key = group.key();
            status.schedule_start_time = group
                .status
                .schedule_start_time
                .clone()
                .or_else(|| started.then(now_rfc3339));
            if group.status == status || written.get(&key) == Some(&status) {
                continue;
            }
            throttle.wait().await;
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &group.namespace, &resource());
            let patch = serde_json::json!({"status": status});
            match api
                .patch_status(&group.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    written.insert(key, status);
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(group = %key, error = %e, "writing the PodGroup status failed")
                }
            }
        }
    }
}

/// Now, as `metav1.Time` writes it (RFC 3339, seconds).
fn now_rfc3339() -> String {
    let t =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    serde_json::to_value(t)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A pod is gone (deleted, or missing after a relist): if it waits at
/// Permit it leaves the waiting pods and its reservation is undone (for
/// a group member, that rejects its waiting siblings); its group forgets
/// it.
pub fn pod_gone(shared: &Shared, uid: &str) {
    for fw in &shared.scheduler.profiles {
        if let Some(a) = fw.waiting.remove(uid) {
            tracing::info!(pod = %a.pod.key(), "deleted while waiting at Permit; reservation released");
            fw.unreserve(&a.pod, &a.state, &a.placement.node);
        }
    }
    shared.scheduler.pod_groups.delete_pod(uid);
}
