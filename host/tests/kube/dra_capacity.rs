//! The DRA comparison with kube-scheduler, for consumable capacity
//! (DRAConsumableCapacity: one device shared by several claims up to its
//! capacity, requestPolicy rounding) and DeviceTaintRules (a NoSchedule
//! rule on one device: a claim without a toleration is kept off it). Same
//! harness as the parent's scenarios; the allocations compared include
//! each result's `consumedCapacity`.

use super::*;

/// `[name=value,...]` of a result's `consumedCapacity` (empty without).
pub fn consumed(r: &Value) -> String {
    match r["consumedCapacity"].as_object() {
        Some(m) if !m.is_empty() => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            format!("[{}]", parts.join(","))
        }
        _ => String::new(),
    }
}

/// One GPU of 80Gi that allows multiple allocations: shares ask for
/// memory, rounded up to 4Gi steps (at least 4Gi); no request takes 8Gi.
pub fn shared_gpu_slice(node: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-shared"), "labels": {LABEL: "yes"}},
        "spec": {"driver": DRIVER, "nodeName": node,
            "pool": {"name": format!("{node}-shared"), "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "allowMultipleAllocations": true,
                "attributes": {"model": {"string": "A100"}},
                "capacity": {"memory": {"value": "80Gi", "requestPolicy": {
                    "default": "8Gi", "validRange": {"min": "4Gi", "step": "4Gi"}}}}}]}})
}

/// A claim for a share of `memory` (none: the policy's default).
pub fn share(name: &str, memory: Option<&str>) -> Value {
    let extra = match memory {
        Some(m) => json!({"capacity": {"requests": {"memory": m}}}),
        None => json!({}),
    };
    claim(name, json!([request("gpu", extra)]), json!([]))
}

fn scenarios() -> Vec<Scenario> {
    let tolerating = request(
        "gpu",
        json!({"tolerations": [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]}),
    );
    vec![
        Scenario {
            name: "consumable-capacity",
            nodes: vec![("n1", vec![])],
            objects: vec![
                shared_gpu_slice("n1"),
                // 30Gi rounds up to 32Gi; 40Gi fits beside it; 20Gi more
                // exceeds 80Gi; no request takes the default 8Gi (80Gi).
                share("a", Some("30Gi")),
                share("b", Some("40Gi")),
                share("c", Some("20Gi")),
                share("d", None),
            ],
            pods: vec![
                pod("a", &[("gpu", "a")]),
                pod("b", &[("gpu", "b")]),
                pod("c", &[("gpu", "c")]),
                pod("d", &[("gpu", "d")]),
            ],
            templates: false,
            admin: false,
        },
        Scenario {
            name: "device-taint-rule",
            nodes: vec![("n1", four("A100", "40Gi"))],
            objects: vec![
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                    "metadata": {"name": "gpu-0-maintenance", "labels": {LABEL: "yes"}},
                    "spec": {"deviceSelector": {"driver": DRIVER, "pool": "n1", "device": "gpu-0"},
                        "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}}}),
                claim("plain", json!([request("gpu", json!({}))]), json!([])),
                claim("tolerant", json!([tolerating]), json!([])),
                claim(
                    "three",
                    json!([request("gpus", json!({"count": 3}))]),
                    json!([]),
                ),
            ],
            // plain is kept off gpu-0 (gpu-1); tolerant takes gpu-0; three
            // more are not left.
            pods: vec![
                pod("plain", &[("gpu", "plain")]),
                pod("tolerant", &[("gpu", "tolerant")]),
                pod("three", &[("gpu", "three")]),
            ],
            templates: false,
            admin: false,
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumable_capacity_and_taint_rules_match_kube_scheduler() {
    let _g = serial();
    let client = client().await;
    let tmp = tempfile::tempdir().unwrap();
    let mut differences = Vec::new();
    for s in scenarios() {
        let kube = run(&client, &s, false, tmp.path()).await;
        let ours = run(&client, &s, true, tmp.path()).await;
        eprintln!("{}: kube-scheduler {kube:?}", s.name);
        // What the scenario is about happened (not only agreement).
        let devices = |pod: &str| match ours.iter().find(|(p, _)| p == pod).map(|(_, v)| v) {
            Some(Verdict::Bound { claims, .. }) => claims["gpu"].0.join(" "),
            other => format!("{other:?}"),
        };
        if s.name == "consumable-capacity" {
            assert_eq!(devices("a"), "gpu=n1-shared/gpu-0[memory=32Gi]");
            assert_eq!(devices("d"), "gpu=n1-shared/gpu-0[memory=8Gi]");
            assert!(devices("c").starts_with("Some(Failed("), "{}", devices("c"));
        } else {
            assert_eq!(devices("plain"), "gpu=n1/gpu-1");
            assert_eq!(devices("tolerant"), "gpu=n1/gpu-0");
        }
        if kube != ours {
            differences.push(format!(
                "{}:\n  kube-scheduler: {kube:?}\n  wasmsched:      {ours:?}",
                s.name
            ));
        }
    }
    clean(&client).await;
    assert!(
        differences.is_empty(),
        "differences:\n{}",
        differences.join("\n")
    );
}

/// A fractional GPU the DRA way on the real server, with wasmsched's
/// default profile (GpuTopology ranks the devices): four 80Gi GPUs that
/// allow multiple allocations, two per PCIe root. `a` takes a share of
/// gpu-0; `b`, with the `spread` policy, avoids the root in use and takes
/// gpu-2 (first fit would take gpu-0 again); `c` (binpack, the default)
/// fills gpu-0, a GPU in use, rather than the free gpu-1 beside it. The
/// claims record their rounded shares, and the per-device metrics show
/// the shares and the consumed memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fractional_gpu_is_shared_through_gpu_topology_and_metered() {
    let _g = serial();
    let client = client().await;
    let tmp = tempfile::tempdir().unwrap();
    let mut slice = shared_gpu_slice("n1");
    // Four shared GPUs, two per PCIe root.
    let first = slice["spec"]["devices"][0].clone();
    let devices: Vec<Value> = ["pci0000:00", "pci0000:00", "pci0000:80", "pci0000:80"]
        .iter()
        .enumerate()
        .map(|(i, root)| {
            let mut d = first.clone();
            d["name"] = json!(format!("gpu-{i}"));
            d["attributes"]["resource.kubernetes.io/pcieRoot"] = json!({"string": root});
            d
        })
        .collect();
    slice["spec"]["devices"] = Value::Array(devices);
    let mut spread = pod("b", &[("gpu", "b")]);
    spread["metadata"]["annotations"] = json!({"gpu.nvidia.com/policy": "spread"});
    let s = Scenario {
        name: "fractional-gpu",
        nodes: vec![("n1", vec![])],
        objects: vec![
            slice,
            share("a", Some("30Gi")),
            share("b", Some("40Gi")),
            share("c", None),
        ],
        pods: vec![pod("a", &[("gpu", "a")]), spread, pod("c", &[("gpu", "c")])],
        templates: false,
        admin: false,
    };
    build(&client, &s).await;
    let cfg = tmp.path().join("fractional.json");
    let file = json!({"apiVersion": "wasmsched.io/v1alpha1", "kind": "WasmSchedulerConfiguration",
        "leaderElection": {"leaderElect": false},
        "profiles": [{"schedulerName": SCHED}]});
    std::fs::write(&cfg, file.to_string()).unwrap();
    let ws = Scheduler::start(
        tmp.path(),
        "ws-fractional",
        &env().kubeconfig,
        &["--config", cfg.to_str().unwrap()],
    );
    let log = ws.log.clone();
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    ws.wait_ready().await;
    let mut got = Vec::new();
    for p in &s.pods {
        crate::create_pod(&client, p.clone()).await;
        match decide(&client, p, &read).await {
            Verdict::Bound { claims, .. } => got.push(claims["gpu"].0.join(" ")),
            Verdict::Failed(m) => panic!("not bound: {m}\n{}", read()),
        }
    }
    assert_eq!(
        got,
        [
            "gpu=n1-shared/gpu-0[memory=32Gi]",
            "gpu=n1-shared/gpu-2[memory=40Gi]",
            "gpu=n1-shared/gpu-0[memory=8Gi]"
        ],
        "spread, then binpack"
    );
    let labels = [
        ("node", "n1"),
        ("driver", DRIVER),
        ("pool", "n1-shared"),
        ("device", "gpu-0"),
    ];
    let mut memory = labels.to_vec();
    memory.push(("capacity", "memory"));
    let gib = 1024.0 * 1024.0 * 1024.0;
    wait_until(
        "the shared device's metrics",
        Duration::from_secs(20),
        || async {
            ws.metric("wasmsched_dra_device_shares", &labels).await == 2.0
                && ws.metric("wasmsched_dra_device_allocated", &labels).await == 1.0
                && ws.metric("wasmsched_dra_device_capacity", &memory).await == 80.0 * gib
                && ws
                    .metric("wasmsched_dra_device_capacity_consumed", &memory)
                    .await
                    == 40.0 * gib
        },
    )
    .await;
    drop(ws);
    clean(&client).await;
}
