//! The binding cycle: runs apart from the scheduling loop, with bounded
//! concurrency, through the `pods/binding` subresource.
//!
//! The pod is already assumed in the cache. Right before the call the
//! binder checks that this process still leads and that the pod is still
//! assumed on a node that still exists — on a current cache: while a
//! watch is lost or relisting it waits ([`super::cache_sync`]), since a
//! half-relisted cache may still hold a node deleted meanwhile. Any
//! failure forgets the assumption, so no reservation leaks. A call in
//! flight when leadership ends is abandoned; one the API server throttles
//! (429) or finds unavailable (503, 504) is retried in place after its
//! Retry-After, leadership checked again first. A double binding cannot happen:
//! the Binding carries the pod's uid (a pod re-created under the same
//! name is not bound by mistake) and the API server refuses to bind a pod
//! that already has a node.

mod binding_conditions;
mod claims;
pub(crate) mod extended_claims;
mod volumes;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Binding as K8sBinding, ObjectReference, Pod as K8sPod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::{mpsc, Semaphore};

use super::client::{ApiHealth, Backoff, Throttle};
use super::events::{PodRef, Report};
use super::node_lock::{self, NodeGates};
use super::Shared;
use crate::framework::plugins::dynamic_resources::{
    AwaitBindingConditions, ClaimBinding, ExtendedClaimBinding,
};
use crate::framework::plugins::hami_node_lock::LockNode;
use crate::framework::plugins::volume::VolumeAction;
use crate::framework::BindAction;
use crate::scheduler::{Binding, BindingResult};

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
    /// Per-node gates of bindings that take a node lock ([`LockNode`]).
    pub gates: NodeGates,
}

impl Binder {
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<Binding>) {
        let limit = Arc::new(Semaphore::new(self.concurrency));
        let this = Arc::new(self);
        let mut locking = tokio::task::JoinSet::new();
        while let Some(req) = rx.recv().await {
            if node_lock::wanted(&req.assumption.actions).is_some() {
                // Waits for the node's lock without a binding slot.
                locking.spawn(this.clone().bind_locked(req, limit.clone()));
                while locking.try_join_next().is_some() {}
                continue;
            }
            if req
                .assumption
                .actions
                .iter()
                .any(|a| a.get::<AwaitBindingConditions>().is_some())
            {
                // Waits for a driver, maybe for minutes: a task of its own
                // without a binding slot (upstream's binding cycles are
                // goroutines), so that slow drivers never hold back the
                // other pods' bindings.
                let this = this.clone();
                locking.spawn(async move { this.bind(req).await });
                while locking.try_join_next().is_some() {}
                continue;
            }
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
        while locking.join_next().await.is_some() {}
        // Every permit back means every binding finished.
        let _ = limit.acquire_many(this.concurrency as u32).await;
    }

    /// A binding that takes its node's lock: waits its turn at the node's
    /// gate, then for the lock to look free in the cache, then binds in
    /// one of the binder's slots, still holding the gate.
    async fn bind_locked(self: Arc<Self>, req: Binding, limit: Arc<Semaphore>) {
        let gate = self.gates.gate(req.node());
        let _turn = gate.lock().await;
        if let Some(r) = self.wait_for_lock(&req).await {
            return self.finish(req, r);
        }
        let Ok(_permit) = limit.acquire_owned().await else {
            return;
        };
        self.bind(req).await;
    }

    /// Waits until the node's lock looks free in the cache (released, ours,
    /// expired, or its pod gone). `Some`: the binding ends without trying.
    async fn wait_for_lock(&self, req: &Binding) -> Option<BindResult> {
        let (annotation, expiry) = node_lock::wanted(&req.assumption.actions)?;
        let mut checked = None;
        loop {
            if self
                .shared
                .stopping
                .load(std::sync::atomic::Ordering::Acquire)
            {
                return Some(BindResult::Abandoned);
            }
            if let Some(r) = self.ready(req).await {
                return Some(r);
            }
            let held = {
                let cache = self.shared.cache.lock();
                cache
                    .snapshot
                    .by_name(req.node())
                    .and_then(|n| n.node.annotations.get(annotation).cloned())
            };
            let now = k8s_openapi::jiff::Timestamp::now();
            let v = held?;
            if node_lock::judge(Some(&v), req.pod(), expiry, now) == node_lock::Found::Free {
                return None;
            }
            if node_lock::holder_check_due(checked) {
                checked = Some(Instant::now());
                if node_lock::holder_gone(&self.client, &v).await {
                    return None;
                }
            }
            tokio::time::sleep(node_lock::POLL).await;
        }
    }

    async fn bind(&self, req: Binding) {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let result = self.call(&req).await;
        self.finish(req, result);
    }

    /// What the binding's end means for the cache, the metrics and events.
    fn finish(&self, req: Binding, result: BindResult) {
        let shared = &self.shared;
        let now = shared.now_ms();
        shared
            .metrics
            .bindings
            .with_label_values(&[result.as_str()])
            .inc();
        let elapsed = req.started.elapsed().as_secs_f64();
        let outcome = match result {
            BindResult::Bound => BindingResult::Bound,
            BindResult::Conflict | BindResult::Gone => BindingResult::Dropped,
            BindResult::Abandoned | BindResult::Error | BindResult::NodeGone => {
                BindingResult::Retry
            }
        };
        let assumed = {
            let mut cache = shared.cache.lock();
            shared
                .scheduler
                .binding_finished(&mut cache, &req, outcome, now);
            cache.assumed_count()
        };
        let counted = match result {
            BindResult::Bound => Some("scheduled"),
            BindResult::Error => Some("error"),
            _ => None,
        };
        if let Some(label) = counted {
            shared
                .metrics
                .schedule_attempts
                .with_label_values(&[label, &req.profile])
                .inc();
            shared
                .metrics
                .attempt_duration
                .with_label_values(&[label, &req.profile])
                .observe(elapsed);
        }
        if result == BindResult::Bound {
            shared
                .metrics
                .pod_attempts
                .observe(f64::from(req.assumption.attempts));
            super::ops_metrics::OpsMetrics::global().scheduled(
                &req.pod().uid,
                req.assumption.attempts,
                elapsed,
            );
            let _ = self.reports.send(Report::Scheduled {
                pod: PodRef::from(&**req.pod()),
                node: req.node().to_string(),
                profile: req.profile.clone(),
            });
        }
        shared.metrics.assumed_pods.set(assumed as i64);
        shared.wake.notify_all();
    }

    /// Runs the binding cycle's actions in order (consecutive pod patches
    /// as one); the first that does not succeed ends it, releasing a node
    /// lock taken before.
    async fn call(&self, req: &Binding) -> BindResult {
        let actions = &req.assumption.actions;
        let mut written = volumes::Written::default();
        let mut locked: Option<&str> = None;
        let mut claims: Vec<&ClaimBinding> = Vec::new();
        let mut created: Option<extended_claims::Created> = None;
        let mut i = 0;
        let mut r = BindResult::Bound;
        while i < actions.len() && r == BindResult::Bound {
            let (labels, annotations, n) = merged_patches(&actions[i..]);
            if n > 0 {
                r = self.patch_pod(req, &labels, &annotations).await;
                i += n;
                continue;
            }
            r = match &actions[i] {
                BindAction::Bind => self.bind_call(req).await,
                BindAction::PatchPod { .. } | BindAction::StampPod { .. } => BindResult::Bound,
                BindAction::Plugin(a) => {
                    if let Some(lock) = a.get::<LockNode>() {
                        let r = self.lock_node(req, &lock.annotation, lock.expiry).await;
                        if r == BindResult::Bound {
                            locked = Some(&lock.annotation);
                        }
                        r
                    } else if let Some(v) = a.get::<VolumeAction>() {
                        self.volume_action(req, v, &mut written).await
                    } else if let Some(c) = a.get::<ClaimBinding>() {
                        let r = self.claim_binding(req, c).await;
                        if r == BindResult::Bound {
                            claims.push(c);
                        }
                        r
                    } else if let Some(b) = a.get::<ExtendedClaimBinding>() {
                        let (r, c) = self.extended_claim(req, b).await;
                        created = c;
                        r
                    } else if let Some(w) = a.get::<AwaitBindingConditions>() {
                        let extended = created.as_ref().map(|c| c.name.as_str());
                        self.await_binding_conditions(req, w, extended.filter(|_| w.extended))
                            .await
                    } else {
                        tracing::error!(pod = %req.pod().key(), action = ?a, "no executor for this binding step; the pod is retried");
                        BindResult::Error
                    }
                }
            };
            i += 1;
        }
        if r != BindResult::Bound && !claims.is_empty() {
            self.unreserve_claims(req, &claims).await;
        }
        if let (Some(c), false) = (&created, r == BindResult::Bound) {
            self.delete_created(req, c).await;
        }
        if let (Some(annotation), false) = (locked, r == BindResult::Bound) {
            let pod = req.pod();
            if let Err(e) = node_lock::release(&self.client, req.node(), annotation, pod).await {
                tracing::warn!(pod = %pod.key(), node = %req.node(), error = %e, "releasing the node lock failed; it expires");
            }
        }
        r
    }

    /// HAMiNodeLock's [`LockNode`] step.
    async fn lock_node(&self, req: &Binding, annotation: &str, expiry: Duration) -> BindResult {
        if let Some(r) = self.ready(req).await {
            return r;
        }
        self.throttle.wait().await;
        let pod = req.pod();
        match node_lock::acquire(&self.client, req.node(), annotation, pod, expiry).await {
            Ok(()) => BindResult::Bound,
            Err(node_lock::LockError::NodeGone) => BindResult::NodeGone,
            Err(node_lock::LockError::Held(by)) => {
                tracing::info!(pod = %pod.key(), node = %req.node(), holder = %by, "node locked; will retry");
                BindResult::Error
            }
            Err(node_lock::LockError::Api(e)) => {
                tracing::warn!(pod = %pod.key(), node = %req.node(), error = %e, "taking the node lock failed; will retry");
                BindResult::Error
            }
        }
    }

    /// Waits while the cache is not current (a watch lost or relisting),
    /// then checks [`Self::still_valid`]: the node-still-exists check must
    /// not run on a half-relisted cache.
    async fn ready(&self, req: &Binding) -> Option<BindResult> {
        loop {
            if self
                .shared
                .stopping
                .load(std::sync::atomic::Ordering::Acquire)
            {
                return Some(BindResult::Abandoned);
            }
            if !self.shared.leadership.leading() {
                return Some(BindResult::Abandoned);
            }
            if self.shared.synced() {
                return self.still_valid(req);
            }
            tokio::time::sleep(SYNC_POLL).await;
        }
    }

    /// Leadership and the assumption still hold (checked right before each
    /// write).
    fn still_valid(&self, req: &Binding) -> Option<BindResult> {
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
        req: &Binding,
        labels: &[(String, String)],
        annotations: &[(String, String)],
    ) -> BindResult {
        if let Some(r) = self.ready(req).await {
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

    /// `pods/binding`, retried in place while the API server throttles it
    /// (429) or is unavailable (503, 504), at most [`BIND_ATTEMPTS`] times.
    async fn bind_call(&self, req: &Binding) -> BindResult {
        let mut retry = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
        let mut attempt = 1;
        loop {
            match self.bind_once(req).await {
                Err(code) if attempt < BIND_ATTEMPTS => {
                    ApiHealth::global().retried(code, "POST");
                    let wait = retry.next_delay();
                    tracing::info!(pod = %req.pod().key(), node = %req.node(), code, retry_in_ms = wait.as_millis() as u64, "binding refused for now; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(code) => {
                    tracing::warn!(pod = %req.pod().key(), node = %req.node(), code, attempts = attempt, "binding refused; the pod is retried after backoff");
                    return BindResult::Error;
                }
                Ok(r) => return r,
            }
        }
    }

    /// One binding call; `Err(code)` when the server asks to try again
    /// later (429, 503, 504).
    async fn bind_once(&self, req: &Binding) -> Result<BindResult, u16> {
        let pod = req.pod();
        if let Some(r) = self.ready(req).await {
            return Ok(r);
        }
        self.throttle.wait().await;
        if let Some(r) = self.ready(req).await {
            return Ok(r);
        }
        let binding = K8sBinding {
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
        let params = PostParams::default();
        let call =
            api.create_subresource::<_, serde_json::Value>("binding", &pod.name, &params, &binding);
        // A call still in flight when leadership ends is abandoned: this
        // replica must not bind once another may.
        let r = tokio::select! {
            r = call => r,
            () = leadership_ends(&self.shared) => {
                tracing::warn!(pod = %pod.key(), node = %req.node(), "leadership ended during the binding call; abandoned (the watch shows whether it was bound)");
                return Ok(BindResult::Abandoned);
            }
        };
        self.shared
            .metrics
            .extension_point_duration
            .with_label_values(&[
                "Bind",
                if r.is_ok() { "Success" } else { "Error" },
                &req.profile,
            ])
            .observe(started.elapsed().as_secs_f64());
        Ok(match r {
            Ok(_) => {
                tracing::debug!(pod = %pod.key(), node = %req.node(), "bound");
                BindResult::Bound
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {
                tracing::info!(pod = %pod.key(), "pod deleted before binding");
                BindResult::Gone
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tracing::info!(pod = %pod.key(), message = %e.message, "binding conflict");
                BindResult::Conflict
            }
            Err(kube::Error::Api(e)) if matches!(e.code, 429 | 503 | 504) => return Err(e.code),
            Err(e) => {
                tracing::warn!(pod = %pod.key(), node = %req.node(), error = %e, "binding failed; will retry");
                BindResult::Error
            }
        })
    }
}

/// How often a binding waiting for a current cache looks again.
const SYNC_POLL: Duration = Duration::from_millis(50);

/// Tries of one binding the API server refuses for now (429, 503, 504).
const BIND_ATTEMPTS: u32 = 5;

/// Resolves once this replica no longer leads (or is stopping).
async fn leadership_ends(shared: &Shared) {
    while shared.leadership.leading() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Key/value pairs of a pod patch.
type Pairs = Vec<(String, String)>;

/// The labels and annotations of the pod patches at the start of
/// `actions` (stamps resolved to now), and how many actions they are.
fn merged_patches(actions: &[BindAction]) -> (Pairs, Pairs, usize) {
    let (mut labels, mut annotations) = (Vec::new(), Vec::new());
    let mut n = 0;
    for a in actions {
        match a {
            BindAction::PatchPod {
                labels: l,
                annotations: an,
            } => {
                labels.extend(l.iter().cloned());
                annotations.extend(an.iter().cloned());
            }
            BindAction::StampPod { annotations: keys } => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0)
                    .to_string();
                annotations.extend(keys.iter().map(|k| (k.clone(), now.clone())));
            }
            _ => break,
        }
        n += 1;
    }
    (labels, annotations, n)
}
