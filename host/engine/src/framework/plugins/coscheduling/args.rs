//! Coscheduling's `pluginConfig` args (upstream `CoschedulingArgs`).

use std::time::Duration;

use serde_json::Value;

use crate::framework::plugins::helpers::{args_object, int_in, reject_unknown};

/// The plugin's name.
pub const NAME: &str = "Coscheduling";

/// Upstream's default `permitWaitingTimeSeconds`.
pub const DEFAULT_PERMIT_WAIT_SECONDS: u64 = 60;
/// How long a failed group waits before it is tried again.
pub const DEFAULT_BACKOFF_SECONDS: u64 = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// How long reserved members wait at Permit for the rest of their
    /// group when the PodGroup sets no `scheduleTimeoutSeconds`.
    pub permit_waiting_time: Duration,
    /// How long a group whose attempt failed (a member unschedulable, a
    /// timeout) is kept out of scheduling; 0: retried at once.
    pub pod_group_backoff: Duration,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            permit_waiting_time: Duration::from_secs(DEFAULT_PERMIT_WAIT_SECONDS),
            pod_group_backoff: Duration::from_secs(DEFAULT_BACKOFF_SECONDS),
        }
    }
}

impl Args {
    /// `{"permitWaitingTimeSeconds": 60, "podGroupBackoffSeconds": 10}`;
    /// unknown fields are rejected, naming the field.
    pub fn parse(args: Option<&Value>) -> Result<Self, String> {
        let mut out = Self::default();
        let Some(obj) = args_object(NAME, args)? else {
            return Ok(out);
        };
        reject_unknown(
            &obj,
            &["permitWaitingTimeSeconds", "podGroupBackoffSeconds"],
            "",
        )?;
        if let Some(v) = obj.get("permitWaitingTimeSeconds") {
            let s = int_in(v, 1..=86_400, "permitWaitingTimeSeconds")?;
            out.permit_waiting_time = Duration::from_secs(s as u64);
        }
        if let Some(v) = obj.get("podGroupBackoffSeconds") {
            let s = int_in(v, 0..=3_600, "podGroupBackoffSeconds")?;
            out.pod_group_backoff = Duration::from_secs(s as u64);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_values_and_errors() {
        assert_eq!(Args::parse(None).unwrap(), Args::default());
        let a = Args::parse(Some(
            &json!({"permitWaitingTimeSeconds": 5, "podGroupBackoffSeconds": 0}),
        ))
        .unwrap();
        assert_eq!(a.permit_waiting_time, Duration::from_secs(5));
        assert_eq!(a.pod_group_backoff, Duration::ZERO);
        assert_eq!(
            Args::parse(Some(&json!({"permitWaitingTimeSeconds": 0}))).unwrap_err(),
            "permitWaitingTimeSeconds: must be an integer in 1..=86400, got 0"
        );
        assert!(Args::parse(Some(&json!({"timeout": 1})))
            .unwrap_err()
            .starts_with("timeout: unknown field"));
    }
}
