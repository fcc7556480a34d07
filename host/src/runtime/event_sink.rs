//! Events through kube-runtime's [`Recorder`]: `events.k8s.io/v1`
//! Events, a repeat of the same reason and action about the same pod
//! patched into the first one's `series` (count and last observed time),
//! as client-go's events broadcaster that kube-scheduler uses writes them.
//! The reporting controller is the profile's `schedulerName` (as
//! kube-scheduler's per-profile recorder), the instance this replica's
//! identity.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;

use super::events::PodRef;

/// Upstream truncates event notes to 1024 bytes.
const MAX_NOTE: usize = 1024;

/// Recorders keep at most this many pods' series (then start afresh).
const MAX_PODS: usize = 10_000;

/// One recorder per (reporting controller, pod): kube-runtime's recorder
/// keys its series by reason and action, client-go's (kube-scheduler's)
/// also by the note, so a pod whose failure message changes gets a new
/// Event; a fresh recorder for the pod does the same here.
pub struct EventSink {
    client: Client,
    identity: String,
    /// By (profile, pod uid): the recorder and the note last published
    /// per reason.
    recorders: HashMap<(String, String), (Recorder, HashMap<String, String>)>,
}

impl EventSink {
    pub fn new(client: Client, identity: String) -> Self {
        Self {
            client,
            identity,
            recorders: HashMap::new(),
        }
    }

    /// Publishes (or adds to the series of) the event `reason` about
    /// `pod`, reported by `profile`.
    pub async fn publish(
        &mut self,
        pod: &PodRef,
        warning: bool,
        reason: &str,
        action: &str,
        note: &str,
        profile: &str,
    ) -> Result<(), kube::Error> {
        let regarding = pod_reference(pod);
        self.publish_about(regarding, &pod.uid, warning, reason, action, note, profile)
            .await
    }

    /// The same about any object (`key` identifies it, e.g. its uid).
    #[allow(clippy::too_many_arguments)]
    pub async fn publish_about(
        &mut self,
        regarding: ObjectReference,
        key: &str,
        warning: bool,
        reason: &str,
        action: &str,
        note: &str,
        reporter: &str,
    ) -> Result<(), kube::Error> {
        if self.recorders.len() >= MAX_PODS {
            self.recorders.clear();
        }
        let note = truncate(note, MAX_NOTE);
        let slot = (reporter.to_string(), key.to_string());
        let changed = self
            .recorders
            .get(&slot)
            .and_then(|(_, notes)| notes.get(reason))
            .is_some_and(|last| *last != note);
        if changed {
            self.recorders.remove(&slot);
        }
        let (recorder, notes) = self.recorders.entry(slot).or_insert_with(|| {
            (
                Recorder::new(
                    self.client.clone(),
                    Reporter {
                        controller: reporter.to_string(),
                        instance: Some(self.identity.clone()),
                    },
                ),
                HashMap::new(),
            )
        });
        notes.insert(reason.to_string(), note.clone());
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        recorder.publish(&event, &regarding).await
    }

    /// An Event about `pod` that starts no series (a pod's `Scheduled`,
    /// its last): the request, to be awaited anywhere, so that several
    /// are written at once.
    pub fn publish_once(
        &self,
        pod: &PodRef,
        reason: &str,
        action: &str,
        note: &str,
        reporter: &str,
    ) -> impl std::future::Future<Output = Result<(), kube::Error>> + Send + 'static {
        let recorder = Recorder::new(
            self.client.clone(),
            Reporter {
                controller: reporter.to_string(),
                instance: Some(self.identity.clone()),
            },
        );
        let regarding = pod_reference(pod);
        let event = Event {
            type_: EventType::Normal,
            reason: reason.to_string(),
            note: Some(truncate(note, MAX_NOTE)),
            action: action.to_string(),
            secondary: None,
        };
        async move { recorder.publish(&event, &regarding).await }
    }

    /// Forgets a pod's series (it was bound or deleted).
    pub fn forget(&mut self, uid: &str) {
        self.recorders.retain(|(_, k), _| k != uid);
    }
}

/// What an Event about `pod` is about.
pub(super) fn pod_reference(pod: &PodRef) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        uid: Some(pod.uid.clone()),
        ..Default::default()
    }
}

/// `s` cut to `max` bytes, ending in ` ...` when cut (as upstream).
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max - 4;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} ...", &s[..end])
}
