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
//!
//! A pod's `Scheduled` Event, one per binding, is written beside the
//! others: up to [`EVENTS_IN_FLIGHT`] at once, so that the Events keep up
//! with the bindings instead of trailing them by one round trip each. When
//! more than [`MAX_QUEUED`] reports wait all the same, a `Scheduled` Event
//! is dropped and counted (`wasmsched_events_total{action="dropped"}`), as
//! client-go's event broadcaster drops beyond its queue of 1000: the
//! reports' memory stays bounded, and the pod's binding is still in its
//! `spec.nodeName` and condition.

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

/// `Scheduled` Events written at once.
pub const EVENTS_IN_FLIGHT: usize = 16;

/// Reports waiting beyond which a `Scheduled` Event is dropped.
pub const MAX_QUEUED: usize = 1000;

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
    /// A Normal event about the pod with its own reason (DynamicResources'
    /// `BindingConditionsPending`).
    Normal {
        pod: PodRef,
        reason: &'static str,
        message: String,
        profile: String,
    },
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
    /// Permits for the `Scheduled` Events being written.
    in_flight: Arc<tokio::sync::Semaphore>,
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
            in_flight: Arc::new(tokio::sync::Semaphore::new(EVENTS_IN_FLIGHT)),
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
                    Some(r) => {
                        let queued = rx.len();
                        self.handle(r, queued).await
                    }
                    None => break,
                },
                _ = tick.tick() => self.flush(false).await,
            }
        }
        // The Events still being written end before the recorder does.
        let _ = self.in_flight.acquire_many(EVENTS_IN_FLIGHT as u32).await;
        self.flush(true).await;
    }

    /// One report; `queued` more wait behind it.
    async fn handle(&mut self, report: Report, queued: usize) {
        super::verbose::log(&report);
        super::ops_metrics::OpsMetrics::global().report(&report);
        match report {
            Report::Scheduled { pod, node, profile } => {
                self.series.remove(&pod.uid);
                self.condition.remove(&pod.uid);
                self.sink.forget(&pod.uid);
                if queued >= MAX_QUEUED {
                    self.metrics
                        .events
                        .with_label_values(&["Scheduled", "dropped"])
                        .inc();
                    return;
                }
                let msg = format!("Successfully assigned {} to {node}", pod.key());
                self.throttle.wait().await;
                let Ok(permit) = self.in_flight.clone().acquire_owned().await else {
                    return;
                };
                let write = self
                    .sink
                    .publish_once(&pod, "Scheduled", "Binding", &msg, &profile);
                let metrics = self.metrics.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    match write.await {
                        Ok(()) => metrics
                            .events
                            .with_label_values(&["Scheduled", "created"])
                            .inc(),
                        Err(e) => {
                            tracing::warn!(pod = %pod.key(), reason = "Scheduled", error = %e, "writing an event failed")
                        }
                    }
                });
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
            Report::Normal {
                pod,
                reason,
                message,
                profile,
            } => {
                self.create_event(&pod, "Normal", reason, &message, &profile)
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

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};

    use super::*;

    /// An API server that holds every request until `open` says so,
    /// counting how many it holds at once, then answers with the object
    /// it was sent (as a create does).
    #[derive(Clone)]
    struct SlowApi {
        held: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
        written: Arc<AtomicUsize>,
        open: tokio::sync::watch::Receiver<bool>,
    }

    type Answer = http::Response<kube::client::Body>;

    impl tower::Service<http::Request<kube::client::Body>> for SlowApi {
        type Response = Answer;
        type Error = std::convert::Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Answer, Self::Error>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
            let api = self.clone();
            Box::pin(async move {
                let body = req.into_body().collect_bytes().await.unwrap_or_default();
                let now = api.held.fetch_add(1, Ordering::SeqCst) + 1;
                api.most.fetch_max(now, Ordering::SeqCst);
                let mut open = api.open.clone();
                let _ = open.wait_for(|o| *o).await;
                api.held.fetch_sub(1, Ordering::SeqCst);
                api.written.fetch_add(1, Ordering::SeqCst);
                Ok(http::Response::builder()
                    .status(201)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body.to_vec()))
                    .expect("a response"))
            })
        }
    }

    fn scheduled(i: usize) -> Report {
        Report::Scheduled {
            pod: PodRef {
                uid: format!("uid-{i}"),
                namespace: "ns".into(),
                name: format!("pod-{i}"),
            },
            node: "node-1".into(),
            profile: "default-scheduler".into(),
        }
    }

    /// A burst of bindings while the API server is slow: the `Scheduled`
    /// Events go out side by side (as many as allowed, no more), the ones
    /// reported while over `MAX_QUEUED` reports waited are dropped and
    /// counted, and every other one is written before the recorder ends.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scheduled_events_are_written_side_by_side_and_dropped_past_the_queue() {
        let (open, gate) = tokio::sync::watch::channel(false);
        let api = SlowApi {
            held: Arc::default(),
            most: Arc::default(),
            written: Arc::default(),
            open: gate,
        };
        let client = Client::new(api.clone(), "default");
        let scheduler = Arc::new(crate::config::Scheduler {
            core: crate::scheduler::Scheduler::new(Vec::new()),
            parallelism: 1,
            modules: Vec::new(),
            wasm: Vec::new(),
            plans: Vec::new(),
            handle: Default::default(),
        });
        let metrics = SchedulerMetrics::register(&prometheus::Registry::new(), scheduler);
        let recorder = Recorder::new(
            client,
            Throttle::new(1e6, 1_000_000),
            "test".into(),
            metrics.clone(),
        );
        let burst = MAX_QUEUED + 100;
        let (tx, rx) = mpsc::unbounded_channel();
        for i in 0..burst {
            tx.send(scheduled(i)).expect("the recorder listens");
        }
        let run = tokio::spawn(recorder.run(rx));
        let started = Instant::now();
        while api.held.load(Ordering::SeqCst) < EVENTS_IN_FLIGHT {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the Events were not written side by side: {} at once",
                api.held.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        open.send(true).expect("the API server listens");
        drop(tx);
        run.await.expect("the recorder ends");
        let count = |action: &str| {
            metrics
                .events
                .with_label_values(&["Scheduled", action])
                .get() as usize
        };
        // The first 100 reports each had at least MAX_QUEUED behind them.
        assert_eq!(count("dropped"), 100);
        assert_eq!(count("created"), MAX_QUEUED);
        assert_eq!(api.written.load(Ordering::SeqCst), MAX_QUEUED);
        assert_eq!(api.most.load(Ordering::SeqCst), EVENTS_IN_FLIGHT);
    }
}
