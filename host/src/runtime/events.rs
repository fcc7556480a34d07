//! Scheduling events and the pod condition, as kube-scheduler writes them:
//! `Scheduled` ("Successfully assigned ns/pod to node", action `Binding`),
//! `FailedScheduling` with the FitError message (action `Scheduling`), as
//! `events.k8s.io/v1` Events through kube-runtime's recorder
//! ([`super::event_sink`]), and `PodScheduled=False, reason
//! Unschedulable` on the pod's status.
//!
//! A pod that keeps failing for the same reason must not flood the API
//! server (kube-scheduler retries unschedulable pods for as long as they
//! exist): a repeat of the same message is folded into the existing
//! Event's `series`, written at most once per [`SERIES_INTERVAL`], and the
//! condition is written only when its message changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::json;
use tokio::sync::mpsc;

use super::client::Throttle;
use super::event_sink::EventSink;
use super::metrics::SchedulerMetrics;
use crate::model::Pod;

/// How often a repeated failure may update its Event.
pub const SERIES_INTERVAL: Duration = Duration::from_secs(30);

/// The pod an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub uid: String,
    pub namespace: String,
    pub name: String,
}

impl PodRef {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl From<&Pod> for PodRef {
    fn from(p: &Pod) -> Self {
        Self {
            uid: p.uid.clone(),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
        }
    }
}

/// Something to report about a pod.
#[derive(Debug, Clone)]
pub enum Report {
    Scheduled {
        pod: PodRef,
        node: String,
        profile: String,
    },
    Failed {
        pod: PodRef,
        message: String,
        profile: String,
    },
    /// The pod is gone: drop what is remembered about it.
    Deleted { uid: String },
    /// The pod is reserved and waits at Permit (a pod group's member):
    /// a `Waiting` event with the message.
    Waiting {
        pod: PodRef,
        message: String,
        profile: String,
    },
    /// About the scheduler itself (its leadership, its cache, the API
    /// server's answers): an Event on the leader-election Lease, the
    /// object that stands for the scheduler, as client-go's
    /// `LeaderElection` events are. Warnings of one reason are written at
    /// most once per [`SERIES_INTERVAL`].
    Scheduler {
        warning: bool,
        reason: &'static str,
        message: String,
    },
}

/// The object scheduler-level events are about.
#[derive(Debug, Clone)]
pub struct Subject {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
}

/// The Event of a failure series.
struct Series {
    pod: PodRef,
    profile: String,
    message: String,
    count: i32,
    written: Instant,
    /// Repeats not written yet.
    dirty: bool,
}

/// Writes Events and pod conditions from [`Report`]s.
pub struct Recorder {
    client: Client,
    throttle: Throttle,
    sink: EventSink,
    metrics: Arc<SchedulerMetrics>,
    series: HashMap<String, Series>,
    /// The Unschedulable condition message last written, by pod uid.
    condition: HashMap<String, String>,
    /// What scheduler-level events are about, and when a warning of each
    /// reason was last written.
    subject: Option<Subject>,
    warned: HashMap<&'static str, Instant>,
}

impl Recorder {
    pub fn new(
        client: Client,
        throttle: Throttle,
        identity: String,
        metrics: Arc<SchedulerMetrics>,
    ) -> Self {
        Self {
            sink: EventSink::new(client.clone(), identity),
            client,
            throttle,
            metrics,
            series: HashMap::new(),
            condition: HashMap::new(),
            subject: None,
            warned: HashMap::new(),
        }
    }

    /// Scheduler-level events are about `subject` (without one they are
    /// only logged).
    pub fn about(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }

    /// Handles reports until the channel closes, flushing folded repeats
    /// every few seconds.
    pub async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Report>) {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                r = rx.recv() => match r {
                    Some(r) => self.handle(r).await,
                    None => break,
                },
                _ = tick.tick() => self.flush(false).await,
            }
        }
        self.flush(true).await;
    }

    async fn handle(&mut self, report: Report) {
        super::verbose::log(&report);
        super::ops_metrics::OpsMetrics::global().report(&report);
        match report {
            Report::Scheduled { pod, node, profile } => {
                self.series.remove(&pod.uid);
                self.condition.remove(&pod.uid);
                let msg = format!("Successfully assigned {} to {node}", pod.key());
                self.create_event(&pod, "Normal", "Scheduled", &msg, &profile)
                    .await;
                self.sink.forget(&pod.uid);
            }
            Report::Failed {
                pod,
                message,
                profile,
            } => {
                self.failed(&pod, &message, &profile).await;
                if self.condition.get(&pod.uid) != Some(&message)
                    && self.set_condition(&pod, &message).await
                {
                    self.condition.insert(pod.uid.clone(), message);
                }
            }
            Report::Deleted { uid } => {
                self.series.remove(&uid);
                self.condition.remove(&uid);
            }
            Report::Waiting {
                pod,
                message,
                profile,
            } => {
                self.create_event(&pod, "Normal", "Waiting", &message, &profile)
                    .await;
            }
            Report::Scheduler {
                warning,
                reason,
                message,
            } => {
                if warning {
                    let recent = self
                        .warned
                        .get(reason)
                        .is_some_and(|t| t.elapsed() < SERIES_INTERVAL);
                    if recent {
                        self.metrics
                            .events
                            .with_label_values(&[reason, "suppressed"])
                            .inc();
                        return;
                    }
                    self.warned.insert(reason, Instant::now());
                }
                self.scheduler_event(warning, reason, &message).await;
            }
        }
    }

    /// An Event about the scheduler (its Lease).
    async fn scheduler_event(&mut self, warning: bool, reason: &str, message: &str) {
        let Some(subject) = &self.subject else {
            return;
        };
        let regarding = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(subject.api_version.into()),
            kind: Some(subject.kind.into()),
            name: Some(subject.name.clone()),
            namespace: Some(subject.namespace.clone()),
            ..Default::default()
        };
        let key = format!("{}/{}", subject.namespace, subject.name);
        self.throttle.wait().await;
        let published = self
            .sink
            .publish_about(
                regarding,
                &key,
                warning,
                reason,
                reason,
                message,
                "wasmsched",
            )
            .await;
        match published {
            Ok(()) => self
                .metrics
                .events
                .with_label_values(&[reason, "created"])
                .inc(),
            Err(e) => tracing::warn!(%reason, error = %e, "writing an event failed"),
        }
    }

    async fn failed(&mut self, pod: &PodRef, message: &str, profile: &str) {
        if let Some(s) = self.series.get_mut(&pod.uid) {
            if s.message == message {
                s.count += 1;
                s.dirty = true;
                if s.written.elapsed() < SERIES_INTERVAL {
                    self.metrics
                        .events
                        .with_label_values(&["FailedScheduling", "suppressed"])
                        .inc();
                    return;
                }
                let uid = pod.uid.clone();
                self.write_series(&uid).await;
                return;
            }
        }
        if self
            .create_event(pod, "Warning", "FailedScheduling", message, profile)
            .await
        {
            self.series.insert(
                pod.uid.clone(),
                Series {
                    pod: pod.clone(),
                    profile: profile.to_string(),
                    message: message.to_string(),
                    count: 1,
                    written: Instant::now(),
                    dirty: false,
                },
            );
        }
    }

    /// Writes pending repeat counts (all of them when `all`, else those
    /// older than the interval).
    async fn flush(&mut self, all: bool) {
        let due: Vec<String> = self
            .series
            .iter()
            .filter(|(_, s)| s.dirty && (all || s.written.elapsed() >= SERIES_INTERVAL))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in due {
            self.write_series(&uid).await;
        }
    }

    async fn write_series(&mut self, uid: &str) {
        let Some(s) = self.series.get_mut(uid) else {
            return;
        };
        s.dirty = false;
        s.written = Instant::now();
        let (pod, message, profile) = (s.pod.clone(), s.message.clone(), s.profile.clone());
        self.throttle.wait().await;
        match self
            .sink
            .publish(
                &pod,
                true,
                "FailedScheduling",
                "Scheduling",
                &message,
                &profile,
            )
            .await
        {
            Ok(()) => self
                .metrics
                .events
                .with_label_values(&["FailedScheduling", "updated"])
                .inc(),
            Err(e) => tracing::warn!(pod = %pod.key(), error = %e, "updating an event failed"),
        }
    }

    /// Publishes an Event about `pod` (`kind` Normal or Warning); whether
    /// it was written.
    async fn create_event(
        &mut self,
        pod: &PodRef,
        kind: &str,
        reason: &str,
        message: &str,
        profile: &str,
    ) -> bool {
        let action = match reason {
            "Scheduled" => "Binding",
            _ => "Scheduling",
        };
        self.throttle.wait().await;
        match self
            .sink
            .publish(pod, kind == "Warning", reason, action, message, profile)
            .await
        {
            Ok(()) => {
                self.metrics
                    .events
                    .with_label_values(&[reason, "created"])
                    .inc();
                true
            }
            Err(e) => {
                tracing::warn!(pod = %pod.key(), %reason, error = %e, "writing an event failed");
                false
            }
        }
    }

    /// `PodScheduled=False, reason Unschedulable` with the message.
    async fn set_condition(&self, pod: &PodRef, message: &str) -> bool {
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace);
        let patch = json!({"status": {"conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": null,
            "lastTransitionTime": Time(k8s_openapi::jiff::Timestamp::now()),
        }]}});
        self.throttle.wait().await;
        match api
            .patch_status(
                &pod.name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => true,
            Err(kube::Error::Api(e)) if e.code == 404 => false,
            Err(e) => {
                tracing::warn!(pod = %pod.key(), error = %e, "setting the PodScheduled condition failed");
                false
            }
        }
    }
}
