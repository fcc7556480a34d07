//! Native tests: the plugin is driven through the SDK runtime exactly as
//! the exported component function drives it.

use wasmsched_plugin_sdk::runtime;
use wasmsched_plugin_sdk::types::{Pod, PodStatus};

fn pod_status(age_seconds: i64, labels: &[(&str, &str)]) -> PodStatus {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.sort();
    PodStatus {
        pod: Pod {
            uid: "u1".into(),
            namespace: "shop".into(),
            name: "web-1".into(),
            labels,
            annotations: vec![],
            requests: vec![],
            limits: vec![],
            tolerations: vec![],
            priority: 0,
            creation_timestamp_ms: 0,
            owner: None,
            node_name: Some("node-1".into()),
        },
        phase: "Running".into(),
        ready: true,
        age_seconds,
        restarts: 0,
    }
}

fn m(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn cost(args: &str, pod: &PodStatus, metrics: &[(&str, f64)]) -> Result<Option<i32>, String> {
    runtime::init::<crate::DeletionCost>(args)?;
    runtime::deletion_cost::<crate::DeletionCost>(pod, &m(metrics))
}

#[test]
fn worked_example_of_the_docs() {
    // docs/deletion-cost.md, "Worked example".
    let metrics = [
        ("active_requests", 12.0),
        ("cache_hit_rate", 0.85),
        ("avg_response_time_seconds", 0.08),
        ("active_connections", 30.0),
    ];
    assert_eq!(cost("{}", &pod_status(3600, &[]), &metrics), Ok(Some(495)));
    assert_eq!(cost("{}", &pod_status(45, &[]), &metrics), Ok(Some(-50)));
    let medium = pod_status(3600, &[("deletion-cost.wasmsched.io/tier", "medium")]);
    assert_eq!(cost("{}", &medium, &metrics), Ok(Some(100)));
    assert_eq!(
        cost(
            r#"{"connections": false}"#,
            &pod_status(3600, &[]),
            &metrics
        ),
        Ok(Some(195))
    );
}

#[test]
fn no_metrics_is_no_opinion() {
    assert_eq!(cost("{}", &pod_status(3600, &[]), &[]), Ok(None));
    assert_eq!(
        cost("{}", &pod_status(3600, &[]), &[("other", 5.0)]),
        Ok(None)
    );
}

#[test]
fn garbage_metrics_are_refused_with_the_metric_named() {
    let p = pod_status(3600, &[]);
    let e = cost("{}", &p, &[("active_requests", f64::NAN)]).unwrap_err();
    assert!(e.contains("active_requests") && e.contains("finite"), "{e}");
    let e = cost("{}", &p, &[("active_connections", -3.0)]).unwrap_err();
    assert!(e.contains("active_connections = -3"), "{e}");
    let e = cost("{}", &p, &[("cache_hit_rate", 85.0)]).unwrap_err();
    assert!(
        e.contains("cache_hit_rate = 85") && e.contains("0..=1"),
        "{e}"
    );
}

#[test]
fn unknown_tier_is_an_error_naming_the_label() {
    let p = pod_status(3600, &[("deletion-cost.wasmsched.io/tier", "gold")]);
    let e = cost("{}", &p, &[]).unwrap_err();
    assert!(
        e.contains("shop/web-1") && e.contains(r#"deletion-cost.wasmsched.io/tier="gold""#),
        "{e}"
    );
    // With tiers off the label is not read.
    assert_eq!(cost(r#"{"tiers": false}"#, &p, &[]), Ok(None));
}

#[test]
fn tier_from_an_annotation_and_a_custom_label() {
    let mut p = pod_status(3600, &[]);
    p.pod.annotations = vec![("team.example.com/tier".into(), "high".into())];
    assert_eq!(
        cost(r#"{"tierLabel": "team.example.com/tier"}"#, &p, &[]),
        Ok(Some(100))
    );
}

#[test]
fn bad_args_refuse_init() {
    let e = runtime::init::<crate::DeletionCost>(r#"{"cap": -4}"#).unwrap_err();
    assert!(e.contains("`cap`"), "{e}");
}
