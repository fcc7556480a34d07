//! The binding cycle: runs apart from the scheduling loop, with bounded
//! concurrency, through the `pods/binding` subresource.
//!
//! The pod is already assumed in the cache. Right before the call the
//! binder checks that this process still leads and that the pod is still
//! assumed on a node that still exists; any failure forgets the
//! assumption, so no reservation leaks. A double binding cannot happen:
//! the Binding carries the pod's uid (a pod re-created under the same
//! name is not bound by mistake) and the API server refuses to bind a pod
//! that already has a node.

mod volumes;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod as K8sPod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::{mpsc, Semaphore};

use super::client::Throttle;
use super::events::{PodRef, Report};
use super::Shared;
use crate::framework::{Assumption, BindAction};
use crate::model::Pod;

/// An assumed pod to bind: the binding cycle runs its actions (PreBind
/// output, then the binding).
#[derive(Debug)]
pub struct BindRequest {
    pub assumption: Box<Assumption>,
    pub profile: String,
    /// When its scheduling attempt started (for the attempt duration).
    pub started: Instant,
}

impl BindRequest {
    /// The pod with `node_name` set.
    fn pod(&self) -> &Arc<Pod> {
        &self.assumption.pod
    }

    fn node(&self) -> &str {
        &self.assumption.placement.node
    }
}

/// How the bind call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BindResult {
    Bound,
    /// Already bound, or the uid changed: the watch tells the truth.
    Conflict,
    /// The pod is gone.
    Gone,
    /// Its node is gone: the pod is scheduled again.
    NodeGone,
    /// Not leading any more: nothing was written.
    Abandoned,
    /// Anything else: retried after backoff.
    Error,
}

impl BindResult {
    fn as_str(self) -> &'static str {
        match self {
            Self::Bound => "bound",
            Self::Conflict => "conflict",
            Self::Gone => "gone",
            Self::NodeGone => "node-gone",
            Self::Abandoned => "abandoned",
            Self::Error => "error",
        }
    }
}

/// Binds requests until the channel closes, then waits for the bindings
/// in flight.
pub struct Binder {
    pub shared: Arc<Shared>,
    pub client: Client,
    pub throttle: Throttle,
    pub reports: mpsc::UnboundedSender<Report>,
    pub concurrency: usize,
    /// Test knob (`--bind-delay`): a pause before each bind call, to
    /// widen the window in which a pod can be deleted after it was
    /// scheduled.
    pub delay: Duration,
}

impl Binder {
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<BindRequest>) {
        let limit = Arc::new(Semaphore::new(self.concurrency));
        let this = Arc::new(self);
        while let Some(req) = rx.recv().await {
            let permit = limit
                .clone()
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            let this = this.clone();
            tokio::spawn(async move {
                this.bind(req).await;
                drop(permit);
            });
        }
        // Every permit back means every binding finished.
        let _ = limit.acquire_many(this.concurrency as u32).await;
    }

    async fn bind(&self, req: BindRequest) {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let result = self.call(&req).await;
        let shared = &self.shared;
        let now = shared.now_ms();
        let uid = &req.pod().uid;
        shared
            .metrics
            .bindings
            .with_label_values(&[result.as_str()])
            .inc();
        let elapsed = req.started.elapsed().as_secs_f64();
        match result {
            BindResult::Bound => {
                shared.cache.lock().finish_binding(uid, now);
                if let Some(fw) = shared.scheduler.profile(&req.profile) {
                    fw.bound(&req.assumption);
                }
                shared
                    .metrics
                    .schedule_attempts
                    .with_label_values(&["scheduled", &req.profile])
                    .inc();
                shared
                    .metrics
                    .attempt_duration
                    .with_label_values(&["scheduled", &req.profile])
                    .observe(elapsed);
                shared
                    .metrics
                    .pod_attempts
                    .observe(f64::from(req.assumption.attempts));
                let _ = self.reports.send(Report::Scheduled {
                    pod: PodRef::from(&**req.pod()),
                    node: req.node().to_string(),
                    profile: req.profile.clone(),
                });
            }
            BindResult::Conflict | BindResult::Gone => {
                if let Some(fw) = shared.scheduler.profile(&req.profile) {
                    fw.unreserve(req.pod(), &req.assumption.state, req.node());
                }
                shared.cache.lock().forget(uid, now);
            }
            BindResult::Abandoned | BindResult::Error | BindResult::NodeGone => {
                let mut cache = shared.cache.lock();
                match shared.scheduler.profile(&req.profile) {
                    Some(fw) => fw.unassume(&req.assumption, &mut cache, now, false),
                    None => {
                        cache.forget(uid, now);
                        cache.requeue(req.pod().clone(), now);
                    }
                }
                drop(cache);
                if result == BindResult::Error {
                    shared
                        .metrics
                        .schedule_attempts
                        .with_label_values(&["error", &req.profile])
                        .inc();
                    shared
                        .metrics
                        .attempt_duration
                        .with_label_values(&["error", &req.profile])
                        .observe(elapsed);
                }
            }
        }
        shared
            .metrics
            .assumed_pods
            .set(shared.cache.lock().assumed_count() as i64);
        shared.wake.notify_all();
    }

    /// Runs the binding cycle's actions in order; the first that does not
    /// succeed ends it.
    async fn call(&self, req: &BindRequest) -> BindResult {
        let mut written = volumes::Written::default();
        for action in &req.assumption.actions {
            let r = match action {
                BindAction::PatchPod {
                    labels,
                    annotations,
                } => self.patch_pod(req, labels, annotations).await,
                BindAction::Bind => self.bind_call(req).await,
                BindAction::BindVolume { .. }
                | BindAction::SelectNode { .. }
                | BindAction::WaitForVolumes { .. } => {
                    self.volume_action(req, action, &mut written).await
                }
            };
            if r != BindResult::Bound {
                return r;
            }
        }
        BindResult::Bound
    }

    /// Leadership and the assumption still hold (checked right before each
    /// write).
    fn still_valid(&self, req: &BindRequest) -> Option<BindResult> {
        if !self.shared.leadership.leading() {
            return Some(BindResult::Abandoned);
        }
        let cache = self.shared.cache.lock();
        let uid = &req.pod().uid;
        if !cache.still_assumed(uid, req.node()) {
            // Deleted, or its node was removed, since the cycle.
            return Some(if cache.assumed_on(uid).is_some() {
                BindResult::NodeGone
            } else {
                BindResult::Gone
            });
        }
        None
    }

    /// PreBind output: merges labels and annotations into the pod.
    async fn patch_pod(
        &self,
        req: &BindRequest,
        labels: &[(String, String)],
        annotations: &[(String, String)],
    ) -> BindResult {
        if let Some(r) = self.still_valid(req) {
            return r;
        }
        self.throttle.wait().await;
        let pod = req.pod();
        let map = |kv: &[(String, String)]| -> serde_json::Map<String, serde_json::Value> {
            kv.iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect()
        };
        let patch = serde_json::json!({"metadata": {
            "uid": pod.uid,
            "labels": map(labels),
            "annotations": map(annotations),
        }});
        let api: Api<K8sPod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let params = kube::api::PatchParams::default();
        match api
            .patch(&pod.name, &params, &kube::api::Patch::Merge(&patch))
            .await
        {
            Ok(_) => BindResult::Bound,
            Err(kube::Error::Api(e)) if e.code == 404 => BindResult::Gone,
            Err(kube::Error::Api(e)) if e.code == 409 => BindResult::Conflict,
            Err(e) => {
                tracing::warn!(pod = %pod.key(), error = %e, "PreBind patch failed; will retry");
                BindResult::Error
            }
        }
    }

    /// `pods/binding`.
    async fn bind_call(&self, req: &BindRequest) -> BindResult {
        let pod = req.pod();
        let check = || self.still_valid(req);
        if let Some(r) = check() {
            return r;
        }
        self.throttle.wait().await;
        if let Some(r) = check() {
            return r;
        }
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(pod.name.clone()),
                namespace: Some(pod.namespace.clone()),
                uid: Some(pod.uid.clone()),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(req.node().to_string()),
                ..Default::default()
            },
        };
        let api: Api<K8sPod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let started = Instant::now();
        let r = api
            .create_subresource::<_, serde_json::Value>(
                "binding",
                &pod.name,
                &PostParams::default(),
                &binding,
            )
            .await;
        self.shared
            .metrics
            .extension_point_duration
            .with_label_values(&[
                "Bind",
                if r.is_ok() { "Success" } else { "Error" },
                &req.profile,
            ])
            .observe(started.elapsed().as_secs_f64());
        match r {
            Ok(_) => BindResult::Bound,
            Err(kube::Error::Api(e)) if e.code == 404 => {
                tracing::info!(pod = %pod.key(), "pod deleted before binding");
                BindResult::Gone
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tracing::info!(pod = %pod.key(), message = %e.message, "binding conflict");
                BindResult::Conflict
            }
            Err(e) => {
                tracing::warn!(pod = %pod.key(), node = %req.node(), error = %e, "binding failed; will retry");
                BindResult::Error
            }
        }
    }
}
