//! kube-scheduler's v1 configuration file read field by field with its
//! meaning: every field set to a value other than its default, and what
//! cannot be honoured refused with one line naming the field and why.
//! (The file kube-scheduler 1.37.2 itself writes is run on the real
//! server in `kube/dropin.rs`.)

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use wasmsched::config;
use wasmsched::framework::queue::{Backoff, SchedulingQueue};

/// Every field of `KubeSchedulerConfiguration` (v1, Kubernetes 1.37) at a
/// value other than its default.
const EVERY_FIELD: &str = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 8
leaderElection:
  leaderElect: false
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 4s
  resourceLock: leases
  resourceName: my-scheduler
  resourceNamespace: scheduling
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
  acceptContentTypes: application/json
  contentType: application/vnd.kubernetes.protobuf
  qps: 120
  burst: 240
enableProfiling: false
enableContentionProfiling: false
percentageOfNodesToScore: 40
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 30
delayCacheUntilActive: false
extenders: []
profiles:
- schedulerName: first
  percentageOfNodesToScore: 60
  plugins:
    preEnqueue: {}
    queueSort: {}
    preFilter:
      disabled: [{name: NodePorts}]
    filter:
      disabled: [{name: NodePorts}]
    postFilter:
      disabled: [{name: DefaultPreemption}]
    preScore: {}
    score:
      enabled: [{name: NodeResourcesFit, weight: 5}, {name: ImageLocality, weight: 0}]
    reserve: {}
    permit: {}
    preBind: {}
    bind: {}
    postBind: {}
    multiPoint:
      enabled: [{name: TaintToleration, weight: 7}, {name: NodeAffinity}]
      disabled: [{name: NodeDeclaredFeatures}]
    placementGenerate:
      disabled: [{name: TopologyPlacementGenerator}]
    placementScore:
      disabled: [{name: PodGroupPodsCount}]
    podGroupPostFilter: {}
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
- schedulerName: second
"#;

fn build(text: &str) -> Result<(config::ConfigFile, config::Scheduler), String> {
    let file = config::parse(text).map_err(|e| e.to_string())?;
    let scheduler = config::build(&file, Path::new("."), 0).map_err(|e| e.to_string())?;
    Ok((file, scheduler))
}

#[test]
fn every_field_is_read_with_its_meaning() {
    let (file, scheduler) = build(EVERY_FIELD).unwrap();
    assert_eq!(scheduler.parallelism, 8);
    assert_eq!(
        scheduler.backoff(),
        Backoff {
            initial_ms: 2_000,
            max_ms: 30_000
        }
    );
    let first = &scheduler.plans[0];
    assert!(!first.filters.iter().any(|n| n == "NodePorts"));
    assert!(!first.others.iter().any(|n| n == "DefaultPreemption"));
    let weight = |n: &str| {
        first
            .scores
            .iter()
            .find(|(name, _)| name == n)
            .map(|(_, w)| *w)
    };
    assert_eq!(weight("NodeResourcesFit"), Some(5));
    // `weight: 0` counts as 1, as in kube-scheduler.
    assert_eq!(weight("ImageLocality"), Some(1));
    assert_eq!(weight("TaintToleration"), Some(7));
    // An entry without a weight replaces the default one, weight
    // included: 1, not NodeAffinity's default 2 (upstream's merge).
    assert_eq!(weight("NodeAffinity"), Some(1));
    // The second profile is kube-scheduler's default one.
    let second = &scheduler.plans[1];
    assert!(second.filters.iter().any(|n| n == "NodePorts"));
    assert_eq!(
        second
            .scores
            .iter()
            .find(|(n, _)| n == "TaintToleration")
            .map(|(_, w)| *w),
        Some(3)
    );
    let percentages: Vec<Option<u32>> = scheduler
        .profiles
        .iter()
        .map(|fw| fw.profile().percentage_of_nodes_to_score)
        .collect();
    assert_eq!(percentages, [Some(60), Some(40)]);

    let settings = config::runtime(&file, Path::new("/base")).unwrap();
    let le = &settings.leader_election;
    assert!(!le.enabled);
    assert_eq!(le.lease_duration, Duration::from_secs(30));
    assert_eq!(le.renew_deadline, Duration::from_secs(20));
    assert_eq!(le.retry_period, Duration::from_secs(4));
    assert_eq!(
        (le.name.as_str(), le.namespace.as_str()),
        ("my-scheduler", "scheduling")
    );
    assert_eq!((settings.qps, settings.burst), (120.0, 240));
    assert_eq!(
        settings.kubeconfig.as_deref(),
        Some(Path::new("/etc/kubernetes/scheduler.conf"))
    );
    // The wire format is read and named: the client speaks JSON.
    let notes = scheduler.notes(&file);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0]
        .starts_with("clientConnection.contentType \"application/vnd.kubernetes.protobuf\""));

    // /configz reports the values in force.
    let doc: serde_json::Value =
        serde_json::from_str(&wasmsched::runtime::server::configz::document(
            &file,
            &scheduler,
            &settings,
            &[("SchedulerAsyncPreemption".into(), false)],
        ))
        .unwrap();
    let c = &doc["componentconfig"];
    assert_eq!(c["podInitialBackoffSeconds"], 2);
    assert_eq!(c["podMaxBackoffSeconds"], 30);
    assert_eq!(c["leaderElection"]["leaseDuration"], "30s");
    assert_eq!(c["clientConnection"]["burst"], 240);
    assert_eq!(c["profiles"][0]["percentageOfNodesToScore"], 60);
    assert_eq!(doc["featureGates"]["SchedulerAsyncPreemption"], false);
}

#[test]
fn the_queue_backs_off_as_configured() {
    let (_, scheduler) = build(EVERY_FIELD).unwrap();
    let mut cache = scheduler.new_cache();
    let pod = Arc::new(PodB::new("p").build());
    cache.queue.add(pod);
    let popped = cache.queue.pop(0).unwrap();
    cache.queue.add_backoff(popped, 0);
    assert_eq!(cache.queue.next_backoff_ready(), Some(2_000));
    // Doubling per attempt, capped at podMaxBackoffSeconds.
    let b = scheduler.backoff();
    let waits: Vec<u64> = (1..=6).map(|a| b.delay_ms(a)).collect();
    assert_eq!(waits, [2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    // The default stays kube-scheduler's 1 s to 10 s.
    let mut q = SchedulingQueue::new();
    q.add(Arc::new(PodB::new("d").build()));
    let d = q.pop(0).unwrap();
    q.add_backoff(d, 0);
    assert_eq!(q.next_backoff_ready(), Some(1_000));
    assert_eq!(Backoff::default().delay_ms(5), 10_000);
}

/// Each refusal is one line naming the field and the cause.
#[test]
fn what_cannot_be_honoured_is_refused_naming_the_field() {
    let head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
    let cases = [
        (
            "podInitialBackoffSeconds: 0\n",
            "podInitialBackoffSeconds: must be greater than 0, got 0",
        ),
        (
            "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n",
            "podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds (5), got 2",
        ),
        (
            "delayCacheUntilActive: true\n",
            "delayCacheUntilActive: not supported",
        ),
        (
            "extenders: [{urlPrefix: 'http://x'}]\n",
            "extenders: scheduler extenders are not supported",
        ),
        (
            "profiles:\n- plugins:\n    placementGenerate:\n      enabled: [{name: TopologyPlacementGenerator}]\n",
            "profiles[0].plugins.placementGenerate.enabled[0].name: \"TopologyPlacementGenerator\": placementGenerate is a workload-aware extension point of Kubernetes 1.37 (the Workload API's pod groups), not implemented yet (issue 50)",
        ),
        (
            "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: GangScheduling}]\n",
            "profiles[0].plugins.multiPoint.enabled[0].name: kube-scheduler plugin \"GangScheduling\": the Workload API's pod groups",
        ),
        (
            "profiles:\n- plugins:\n    score:\n      enabled: [{name: NodeResourcesFit, weight: -1}]\n",
            "profiles[0].plugins.score.enabled[0].weight: must be between 0 and 2147483647 (0 counts as 1, as in kube-scheduler), got -1",
        ),
        (
            "healthzBindAddress: 0.0.0.0:10251\n",
            "healthzBindAddress: not a field of kube-scheduler's v1 configuration (removed in v1); use the flags --bind-address and --secure-port",
        ),
        (
            "clientConnection: {contentTypo: x}\n",
            "clientConnection",
        ),
    ];
    for (body, want) in cases {
        let Err(e) = build(&format!("{head}{body}")) else {
            panic!("{body}: accepted, want {want:?}");
        };
        assert!(e.starts_with(want), "{body}: got {e:?}, want {want:?}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
}

#[test]
fn node_declared_features_runs_as_kube_scheduler_1_37_runs_it() {
    // In kube-scheduler's defaults (its gate is GA), as a Filter.
    let head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
    let (file, scheduler) = build(&format!("{head}profiles:\n- schedulerName: a\n")).unwrap();
    assert!(scheduler.notes(&file).is_empty());
    assert!(scheduler.plans[0]
        .filters
        .iter()
        .any(|n| n == "NodeDeclaredFeatures"));
    // Enabled as `kube-scheduler --write-config-to` writes it (weight 0),
    // and disabled.
    let text = format!(
        "{head}profiles:\n- schedulerName: a\n  plugins:\n    multiPoint:\n      enabled: [{{name: NodeDeclaredFeatures, weight: 0}}]\n\
         - schedulerName: b\n  plugins:\n    multiPoint:\n      disabled: [{{name: NodeDeclaredFeatures}}]\n"
    );
    let (file, scheduler) = build(&text).unwrap();
    assert!(
        scheduler.notes(&file).is_empty(),
        "{:?}",
        scheduler.notes(&file)
    );
    let runs = |i: usize| {
        scheduler.plans[i]
            .filters
            .iter()
            .any(|n| n == "NodeDeclaredFeatures")
    };
    assert!(runs(0));
    assert!(!runs(1));
    assert!(!scheduler.plans[0]
        .scores
        .iter()
        .any(|(n, _)| n == "NodeDeclaredFeatures"));
}

/// `wasmsched run`'s kube-scheduler flags that are refused before any
/// connection: one line each, naming the flag or gate.
#[test]
fn kube_scheduler_flags_are_checked_before_start() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"))
            .arg("run")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--feature-gates=NoSuchGate=true"],
            1,
            "error: --feature-gates: unrecognized feature gate: NoSuchGate",
        ),
        (
            &["--feature-gates", "GenericWorkload=true"],
            1,
            "error: --feature-gates: GenericWorkload=true: not implemented in wasmsched yet (issue 50)",
        ),
        (
            &["--feature-gates=DynamicResourceAllocation=false"],
            1,
            "error: --feature-gates: cannot set feature gate DynamicResourceAllocation to false, feature is locked to true",
        ),
        (
            &["--leader-elect-resource-lock=endpoints", "--feature-gates=AllAlpha=false"],
            1,
            "error: built-in config: leaderElection.resourceLock: unsupported \"endpoints\" (only \"leases\")",
        ),
        (
            &["--leader-elect-renew-deadline=20s"],
            1,
            "error: built-in config: leaderElection.renewDeadline: must be shorter than leaseDuration",
        ),
        (
            &["--leader-elect-lease-duration=soon"],
            2,
            "--leader-elect-lease-duration",
        ),
        (&["--secure-port=0"], 2, "--secure-port"),
        (&["--listen", ":10259", "--secure-port=10260"], 2, "--listen"),
        (&["--listen", "10259"], 2, "is not IP:PORT or :PORT"),
    ];
    for (args, code, want) in cases {
        let (got_code, stderr) = run(args);
        assert_eq!(got_code, Some(*code), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: want {want:?} in {stderr}");
        if *code == 1 {
            assert_eq!(
                stderr.trim_end().lines().count(),
                1,
                "{args:?}: one line: {stderr}"
            );
        }
    }
}
