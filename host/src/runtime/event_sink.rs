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

/// One recorder per reporting controller (profile).
pub struct EventSink {
    client: Client,
    identity: String,
    recorders: HashMap<String, Recorder>,
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
        let recorder = self
            .recorders
            .entry(profile.to_string())
            .or_insert_with(|| {
                Recorder::new(
                    self.client.clone(),
                    Reporter {
                        controller: profile.to_string(),
                        instance: Some(self.identity.clone()),
                    },
                )
            });
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(truncate(note, MAX_NOTE)),
            action: action.to_string(),
            secondary: None,
        };
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()),
            ..Default::default()
        };
        recorder.publish(&event, &regarding).await
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
