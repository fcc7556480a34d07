//! `/configz`: the configuration the scheduler runs with, as
//! kube-scheduler serves its own: `{"componentconfig": {...}}`, the file's
//! fields with the values in force (defaults and flags applied), the
//! profiles' resolved plugin chains, and the feature gates set.

use serde_json::{json, Map, Value};

use crate::config::{ConfigFile, RuntimeSettings, Scheduler};

/// The document `/configz` serves (JSON text), made once at start.
pub fn document(
    file: &ConfigFile,
    scheduler: &Scheduler,
    settings: &RuntimeSettings,
    feature_gates: &[(String, bool)],
) -> String {
    let mut config = serde_json::to_value(file).unwrap_or(Value::Null);
    strip_nulls(&mut config);
    let mut config = match config {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let kube = crate::config::file::is_kube_scheduler_file(file);
    let (api_version, kind) = if kube {
        (
            "kubescheduler.config.k8s.io/v1",
            "KubeSchedulerConfiguration",
        )
    } else {
        ("wasmsched.io/v1alpha1", "WasmSchedulerConfiguration")
    };
    config.insert("apiVersion".into(), json!(api_version));
    config.insert("kind".into(), json!(kind));
    config.insert("parallelism".into(), json!(scheduler.parallelism));
    let backoff = scheduler.backoff();
    config.insert(
        "podInitialBackoffSeconds".into(),
        json!(backoff.initial_ms / 1000),
    );
    config.insert("podMaxBackoffSeconds".into(), json!(backoff.max_ms / 1000));
    let le = &settings.leader_election;
    config.insert(
        "leaderElection".into(),
        json!({
            "leaderElect": le.enabled,
            "leaseDuration": go_duration(le.lease_duration),
            "renewDeadline": go_duration(le.renew_deadline),
            "retryPeriod": go_duration(le.retry_period),
            "resourceLock": "leases",
            "resourceName": le.name,
            "resourceNamespace": le.namespace,
        }),
    );
    let mut client = config
        .remove("clientConnection")
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default();
    client.insert("qps".into(), json!(settings.qps));
    client.insert("burst".into(), json!(settings.burst));
    client.insert(
        "kubeconfig".into(),
        json!(settings
            .kubeconfig
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()),
    );
    config.insert("clientConnection".into(), Value::Object(client));
    let profiles: Vec<Value> = scheduler
        .profiles
        .iter()
        .zip(&scheduler.plans)
        .map(|(fw, plan)| {
            let profile = fw.profile();
            json!({
                "schedulerName": fw.scheduler_name(),
                "percentageOfNodesToScore": profile.percentage_of_nodes_to_score.unwrap_or(0),
                "plugins": {
                    "filter": {"enabled": plan.filters.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()},
                    "score": {"enabled": plan.scores.iter().map(|(n, w)| json!({"name": n, "weight": w})).collect::<Vec<_>>()},
                    "other": {"enabled": plan.others.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()},
                },
            })
        })
        .collect();
    config.insert("profiles".into(), Value::Array(profiles));
    let gates: Map<String, Value> = feature_gates
        .iter()
        .map(|(n, v)| (n.clone(), json!(v)))
        .collect();
    let doc = json!({"componentconfig": config, "featureGates": gates});
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// A duration as Go prints one (`15s`, `1m30s`, `500ms`).
fn go_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

/// Removes `null` members (unset optional fields) everywhere.
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_secs(15)), "15s");
        assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn nulls_are_stripped_at_every_depth() {
        let mut v = json!({"a": null, "b": {"c": null, "d": 1}, "e": [{"f": null}]});
        strip_nulls(&mut v);
        assert_eq!(v, json!({"b": {"d": 1}, "e": [{}]}));
    }
}
