//! Carrying out a preemption against the API (upstream's
//! `PrepareCandidate` plus the nomination written in
//! `recordSchedulingFailure`), apart from the scheduling loop:
//!
//! 1. the preemptor's `status.nominatedNodeName` is written first, so a
//!    replica that takes over after a failover keeps the room for it
//!    (upstream writes it after the evictions);
//! 2. each victim is deleted gracefully (with its uid as precondition, so
//!    a pod re-created under the same name is not hit) and gets a
//!    `Preempted` event naming the preemptor;
//! 3. lower-priority pods nominated to the same node lose their
//!    nomination.
//!
//! The framework has already recorded the nomination in memory; the
//! victims hold their resources until the watch reports them gone.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, EventSource, Pod as K8sPod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::Client;
use serde_json::json;
use tokio::sync::mpsc;

use super::client::Throttle;
use super::events::PodRef;
use super::Shared;

/// One preemption to carry out.
#[derive(Debug, Clone)]
pub struct Request {
    pub preemptor: PodRef,
    pub node: String,
    pub victims: Vec<PodRef>,
    /// Pods whose nomination to `node` ends.
    pub displaced: Vec<PodRef>,
    pub profile: String,
}

impl Request {
    pub fn new(pod: &crate::model::Pod, n: &crate::framework::Nomination, profile: &str) -> Self {
        let refs =
            |pods: &[Arc<crate::model::Pod>]| pods.iter().map(|p| PodRef::from(&**p)).collect();
        Self {
            preemptor: PodRef::from(pod),
            node: n.node.clone(),
            victims: refs(&n.victims),
            displaced: refs(&n.displaced),
            profile: profile.to_string(),
        }
    }
}

/// Starts what preemption needs in `run`: the budget and PriorityClass
/// watches and the evictor. Returns the evictor's channel and the tasks.
pub fn spawn(
    shared: &Arc<Shared>,
    client: &Client,
    throttle: &Throttle,
    identity: &str,
) -> (
    mpsc::UnboundedSender<Request>,
    [tokio::task::JoinHandle<()>; 3],
) {
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
    (tx, [budgets, classes, tokio::spawn(evictor.run(rx))])
}

/// Executes requests until the channel closes.
pub struct Evictor {
    pub shared: Arc<Shared>,
    pub client: Client,
    pub throttle: Throttle,
    pub identity: String,
}

impl Evictor {
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<Request>) {
        while let Some(r) = rx.recv().await {
            // Only the leader acts (as the binder): a replica that lost
            // the lease writes nothing.
            if !self.shared.leadership.leading() {
                continue;
            }
            self.nominate(&r.preemptor, Some(&r.node)).await;
            for v in &r.victims {
                if self.delete(v).await {
                    self.event(v, &r.preemptor, &r.node, &r.profile).await;
                }
            }
            self.shared
                .metrics
                .preemption_victims
                .observe(r.victims.len() as f64);
            for d in &r.displaced {
                self.nominate(d, None).await;
            }
        }
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
    async fn delete(&self, v: &PodRef) -> bool {
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
            Ok(_) => true,
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => false,
            Err(e) => {
                tracing::warn!(pod = %v.key(), error = %e, "deleting a preemption victim failed");
                false
            }
        }
    }

    /// The victim's `Preempted` event (upstream's reason, action and
    /// message; the preemptor as the related object).
    async fn event(&self, victim: &PodRef, preemptor: &PodRef, node: &str, profile: &str) {
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
            message: Some(format!("Preempted by {} on node {node}", preemptor.key())),
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
