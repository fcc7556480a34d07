//! Carrying out a preemption against the API (upstream's preemption
//! `Executor`: `prepareCandidateAsync`, or `prepareCandidate` with
//! `SchedulerAsyncPreemption` off, plus the nomination written in
//! `recordSchedulingFailure`), apart from the scheduling loop:
//!
//! 1. the preemptor's `status.nominatedNodeName` is written first, so a
//!    replica that takes over after a failover keeps the room for it
//!    (upstream writes it after the evictions);
//! 2. lower-priority pods nominated to the same node lose their
//!    nomination;
//! 3. each victim gets upstream's `DisruptionTarget` condition (reason
//!    `PreemptionByScheduler`) and is deleted gracefully (with its uid as
//!    precondition, so a pod re-created under the same name is not hit),
//!    then a `Preempted` event naming the preemptor. Victims held at
//!    Permit were rejected in memory by the scheduler: they get the event
//!    only; victims already terminating get nothing.
//!
//! Asynchronously (the default, as `SchedulerAsyncPreemption` is in
//! kube-scheduler 1.37) the loop goes on meanwhile and the preemptor is
//! held out of the queue until the evictions are done
//! ([`crate::scheduler::Scheduler::preemption_finished`]); with the gate
//! off the loop waits for them.
//!
//! The framework has already recorded the nomination in memory; the
//! victims hold their resources until the watch reports them gone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, Pod as K8sPod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::Client;
use serde_json::json;
use tokio::sync::mpsc;

use super::client::Throttle;
use super::events::PodRef;
use super::Shared;

/// The longest the scheduling loop waits for a synchronous preemption
/// (`SchedulerAsyncPreemption=false`) before it goes on.
const SYNC_WAIT: Duration = Duration::from_secs(60);

/// One preemption to carry out.
#[derive(Debug)]
pub struct Request {
    pub preemptor: PodRef,
    /// The preemptor's `schedulerName` (in the victims' condition).
    pub scheduler_name: String,
    pub node: String,
    /// Victims to delete, with their `metadata.generation`.
    pub victims: Vec<(PodRef, i64)>,
    /// Victims the scheduler rejected at Permit (preempted in memory):
    /// an event, no deletion.
    pub in_memory: Vec<PodRef>,
    /// Pods whose nomination to `node` ends.
    pub displaced: Vec<PodRef>,
    pub profile: String,
    /// Who waits for the end: the scheduler's queue (asynchronous), or
    /// the scheduling loop (synchronous).
    pub done: Done,
}

/// What happens when a request is carried out.
#[derive(Debug)]
pub enum Done {
    /// The preemptor is held in the queue until then.
    Release,
    /// The scheduling loop waits on this channel.
    Signal(std::sync::mpsc::Sender<()>),
}

impl Request {
    pub fn new(pod: &crate::model::Pod, n: &crate::framework::Nomination, profile: &str) -> Self {
        let refs = |pods: &mut dyn Iterator<Item = &Arc<crate::model::Pod>>| {
            pods.map(|p| PodRef::from(&**p)).collect()
        };
        let in_memory = |p: &&Arc<crate::model::Pod>| n.in_memory.contains(&p.uid);
        Self {
            preemptor: PodRef::from(pod),
            scheduler_name: pod.scheduler_name.clone(),
            node: n.node.clone(),
            // Upstream: "Victim Pod is already being deleted, skipping the
            // API call for it".
            victims: n
                .victims
                .iter()
                .filter(|p| !in_memory(p) && !p.terminating)
                .map(|p| (PodRef::from(&**p), p.generation))
                .collect(),
            in_memory: refs(&mut n.victims.iter().filter(in_memory)),
            displaced: refs(&mut n.displaced.iter()),
            profile: profile.to_string(),
            done: Done::Release,
        }
    }

    /// Sends `self` to the evictor to be carried out after the cycle:
    /// returns whether the preemptor is to be held until the evictor
    /// releases it (there are victims to delete).
    pub fn send_async(self, to: &mpsc::UnboundedSender<Request>) -> bool {
        let hold = !self.victims.is_empty();
        to.send(self).is_ok() && hold
    }

    /// Sends `self` to the evictor; the receiver hears when it is done
    /// (the scheduling loop waits for it with the cache unlocked).
    pub fn send_sync(
        mut self,
        to: &mpsc::UnboundedSender<Request>,
    ) -> Option<std::sync::mpsc::Receiver<()>> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.done = Done::Signal(tx);
        to.send(self).ok().map(|_| rx)
    }
}

/// The scheduling loop waits for a synchronous preemption
/// (`SchedulerAsyncPreemption=false`), at most [`SYNC_WAIT`].
pub fn wait_sync(rx: std::sync::mpsc::Receiver<()>) {
    if rx.recv_timeout(SYNC_WAIT).is_err() {
        tracing::warn!("a synchronous preemption took over {SYNC_WAIT:?}; the loop goes on");
    }
}

/// Starts what preemption needs in `run`: the budget and PriorityClass
/// watches and the evictor. Returns the evictor's channel and the tasks.
pub fn spawn(
    shared: &Arc<Shared>,
    client: &Client,
    throttle: &Throttle,
    identity: &str,
    feature_gates: &[(String, bool)],
) -> (Outlet, [tokio::task::JoinHandle<()>; 3]) {
    use super::policy_watch::{watch_budgets, watch_priority_classes};
    let budgets = tokio::spawn(watch_budgets(
        shared.clone(),
        client.clone(),
        shared.cache_sync.register("poddisruptionbudgets"),
    ));
    let classes = tokio::spawn(watch_priority_classes(
        shared.clone(),
        client.clone(),
        shared.cache_sync.register("priorityclasses"),
    ));
    let (tx, rx) = mpsc::unbounded_channel();
    let evictor = Evictor {
        shared: shared.clone(),
        client: client.clone(),
        throttle: throttle.clone(),
        identity: identity.to_string(),
    };
    let outlet = Outlet {
        tx,
        asynchronous: crate::feature_gates::enabled(feature_gates, "SchedulerAsyncPreemption"),
    };
    (outlet, [budgets, classes, tokio::spawn(evictor.run(rx))])
}

/// Where the scheduling loop sends preemptions, and how they run.
pub struct Outlet {
    pub tx: mpsc::UnboundedSender<Request>,
    /// `SchedulerAsyncPreemption`: the evictions go on while the loop
    /// does.
    pub asynchronous: bool,
}

/// Executes requests until the channel closes.
pub struct Evictor {
    pub shared: Arc<Shared>,
    pub client: Client,
    pub throttle: Throttle,
    pub identity: String,
}

impl Evictor {
    /// Each request in a task of its own (upstream: a goroutine per
    /// preemption), so that one slow eviction delays no other.
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<Request>) {
        let me = Arc::new(self);
        while let Some(r) = rx.recv().await {
            let me = me.clone();
            tokio::spawn(async move { me.handle(r).await });
        }
    }

    async fn handle(&self, r: Request) {
        let started = Instant::now();
        // Only the leader acts (as the binder): a replica that lost the
        // lease writes nothing.
        let failed = !(self.shared.leadership.leading() && self.carry_out(&r).await);
        match r.done {
            Done::Signal(tx) => {
                let _ = tx.send(());
            }
            Done::Release => {
                let result = if failed { "error" } else { "success" };
                let m = &self.shared.metrics;
                m.preemption_goroutines_duration
                    .with_label_values(&[result])
                    .observe(started.elapsed().as_secs_f64());
                m.preemption_goroutines_total
                    .with_label_values(&[result])
                    .inc();
                let now = self.shared.now_ms();
                let mut cache = self.shared.cache.lock();
                self.shared.scheduler.preemption_finished(
                    &mut cache,
                    &r.preemptor.uid,
                    failed,
                    now,
                );
                drop(cache);
                self.shared.wake.notify_all();
            }
        }
    }

    /// The API calls of one preemption; false when a victim could not be
    /// evicted.
    async fn carry_out(&self, r: &Request) -> bool {
        self.nominate(&r.preemptor, Some(&r.node)).await;
        for d in &r.displaced {
            self.nominate(d, None).await;
        }
        let evictions = r.victims.iter().map(|(v, generation)| async move {
            let evicted = self.evict(v, *generation, &r.scheduler_name).await;
            if evicted == Ok(true) {
                self.event(v, &r.preemptor, &r.node, &r.profile, false)
                    .await;
            }
            evicted.is_ok()
        });
        let ok = futures::future::join_all(evictions)
            .await
            .into_iter()
            .all(|ok| ok);
        for v in &r.in_memory {
            self.event(v, &r.preemptor, &r.node, &r.profile, true).await;
        }
        self.shared
            .metrics
            .preemption_victims
            .observe((r.victims.len() + r.in_memory.len()) as f64);
        ok
    }

    /// Marks a victim with upstream's `DisruptionTarget` condition, then
    /// deletes it gracefully. `Ok(false)`: it was already gone (or
    /// replaced under its name); `Err`: the API refused.
    async fn evict(&self, v: &PodRef, generation: i64, scheduler_name: &str) -> Result<bool, ()> {
        let api: Api<K8sPod> = Api::namespaced(self.client.clone(), &v.namespace);
        let condition = json!({
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": format!("{scheduler_name}: preempting to accommodate a higher priority pod"),
            "observedGeneration": generation,
            "lastTransitionTime": Time(k8s_openapi::jiff::Timestamp::now()),
        });
        // The uid makes the patch fail on a pod re-created under the
        // name (its uid cannot change); conditions merge by type.
        let patch = json!({"metadata": {"uid": v.uid}, "status": {"conditions": [condition]}});
        self.throttle.wait().await;
        match api
            .patch_status(&v.name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409 | 422) => return Ok(false),
            Err(e) => {
                tracing::warn!(pod = %v.key(), error = %e, "could not add DisruptionTarget condition due to preemption");
                return Err(());
            }
        }
        self.delete(v).await
    }

    /// Sets (or, with `None`, clears) `status.nominatedNodeName`.
    async fn nominate(&self, pod: &PodRef, node: Option<&str>) {
        let api: Api<K8sPod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let patch = json!({"status": {"nominatedNodeName": node}});
        self.throttle.wait().await;
        match api
            .patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(pod = %pod.key(), error = %e, "writing nominatedNodeName failed")
            }
        }
    }

    /// Deletes a victim gracefully; false when it was already gone.
    async fn delete(&self, v: &PodRef) -> Result<bool, ()> {
        let api: Api<K8sPod> = Api::namespaced(self.client.clone(), &v.namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(v.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        self.throttle.wait().await;
        match api.delete(&v.name, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(false),
            Err(e) => {
                tracing::warn!(pod = %v.key(), error = %e, "deleting a preemption victim failed");
                Err(())
            }
        }
    }

    /// The victim's `Preempted` event (upstream's reason, action and
    /// message; the preemptor as the related object).
    async fn event(
        &self,
        victim: &PodRef,
        preemptor: &PodRef,
        node: &str,
        profile: &str,
        in_memory: bool,
    ) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let reference = super::event_sink::pod_reference;
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", victim.name, now.as_nanosecond())),
                namespace: Some(victim.namespace.clone()),
                ..Default::default()
            },
            involved_object: reference(victim),
            related: Some(reference(preemptor)),
            reason: Some("Preempted".into()),
            action: Some("Preempting".into()),
            message: Some(format!(
                "Preempted by pod {} on node {node}{}",
                preemptor.uid,
                if in_memory {
                    " (in scheduler memory)."
                } else {
                    ""
                }
            )),
            type_: Some("Normal".into()),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            reporting_component: Some(profile.into()),
            reporting_instance: Some(self.identity.clone()),
            source: Some(EventSource {
                component: Some(profile.into()),
                host: None,
            }),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &victim.namespace);
        self.throttle.wait().await;
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => self
                .shared
                .metrics
                .events
                .with_label_values(&["Preempted", "created"])
                .inc(),
            Err(e) => {
                tracing::warn!(pod = %victim.key(), error = %e, "writing a Preempted event failed")
            }
        }
    }
}
