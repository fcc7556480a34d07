//! The DRA comparison with kube-scheduler, for extended resources backed
//! by DRA (DRAExtendedResource: a pod asking `example.com/fpga`, or a
//! class's implicit `deviceclass.resource.kubernetes.io/fpga`, gets a
//! claim the scheduler creates, owned by the pod, recorded in its
//! `status.extendedResourceClaimStatus`) and device binding conditions
//! (DRADeviceBindingConditions: the test acts as the driver, flipping the
//! conditions through the claim's `status.devices`; True binds the pod, a
//! failure condition sends it back, its claim deallocated and allocated
//! again). Same cluster and API server for both schedulers; what is
//! compared is read back from the API.

use std::path::PathBuf;

use super::*;

const FPGA_DRIVER: &str = "fpga.example.com";

/// Starts the scenario's scheduler (kube-scheduler or wasmsched, as the
/// parent's `run` does); the guard stops it.
fn start(name: &str, wasm: bool, dir: &Path) -> (Box<dyn std::any::Any>, PathBuf) {
    if wasm {
        let cfg = dir.join("wasmsched-ext.json");
        let file = json!({"apiVersion": "wasmsched.io/v1alpha1", "kind": "WasmSchedulerConfiguration",
            "leaderElection": {"leaderElect": false},
            "profiles": [{"schedulerName": SCHED, "plugins": {"multiPoint": {"disabled": [
                {"name": "GpuTopology"}, {"name": "NetworkLocality"}]}}}]});
        std::fs::write(&cfg, file.to_string()).unwrap();
        let ws = Scheduler::start(
            dir,
            &format!("ws-{name}"),
            &env().kubeconfig,
            &["--config", cfg.to_str().unwrap()],
        );
        let log = ws.log.clone();
        (Box::new(ws), log)
    } else {
        let cfg = dir.join("kube-scheduler-ext.yaml");
        std::fs::write(
            &cfg,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             clientConnection: {{kubeconfig: {}}}\nleaderElection: {{leaderElect: false}}\n\
             profiles:\n- schedulerName: {SCHED}\n",
                env().kubeconfig.display()
            ),
        )
        .unwrap();
        let log = dir.join(format!("kube-scheduler-{name}.log"));
        (Box::new(Killed(kube_scheduler(&cfg, &log, 2))), log)
    }
}

fn claims_api(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NS,
        &resource("ResourceClaim", "resourceclaims"),
    )
}

/// Class `fpga` (`extendedResourceName: example.com/fpga`) and two FPGAs
/// on node n1.
fn fpga_objects() -> Vec<Value> {
    vec![
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "fpga", "labels": {LABEL: "yes"}},
            "spec": {"extendedResourceName": "example.com/fpga",
                "selectors": [{"cel": {"expression": format!("device.driver == \"{FPGA_DRIVER}\"")}}]}}),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "n1-fpgas", "labels": {LABEL: "yes"}},
            "spec": {"driver": FPGA_DRIVER, "nodeName": "n1",
                "pool": {"name": "n1-fpga", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "fpga-0"}, {"name": "fpga-1"}]}}),
    ]
}

/// A pod asking `count` of `resource` in its container `app` (beside cpu).
fn ext_pod(name: &str, resource: &str, count: u32) -> Value {
    json!({"metadata": {"name": name, "namespace": NS},
        "spec": {"schedulerName": SCHED, "containers": [{"name": "app", "image": "x",
            "resources": {"requests": {"cpu": "100m", resource: count.to_string()},
                "limits": {resource: count.to_string()}}}]}})
}

/// A claim's generated name without its random suffix.
fn generated(name: &str) -> String {
    name.rsplit_once('-')
        .map_or(name.to_string(), |(p, _)| format!("{p}-"))
}

/// What a scheduler did with a pod asking for extended resources: its
/// node; the claim named in its `status.extendedResourceClaimStatus`
/// (generated name, owner, annotation, requests, devices, consumers) and
/// the request mappings; or its FailedScheduling message.
async fn ext_verdict(client: &Client, p: &Value, log: &dyn Fn() -> String) -> String {
    let name = p["metadata"]["name"].as_str().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let started = Instant::now();
    loop {
        let pod = pods.get(name).await.unwrap();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        if let Some(node) = node {
            let status = serde_json::to_value(&pod.status).unwrap();
            let ext = &status["extendedResourceClaimStatus"];
            let claim_name = ext["resourceClaimName"].as_str().unwrap_or_default();
            if claim_name.is_empty() {
                return format!("bound to {node}, no extended resource claim");
            }
            let c = claims_api(client).get(claim_name).await.unwrap();
            let owner = c
                .metadata
                .owner_references
                .clone()
                .unwrap_or_default()
                .iter()
                .map(|o| format!("{}/{}/{}", o.kind, o.name, o.controller == Some(true)))
                .collect::<Vec<_>>()
                .join(",");
            let (devices, users) = claim_state(client, claim_name).await;
            return format!(
                "bound to {node}; claim {} owner {owner} annotations {:?} requests {} devices {devices:?} reserved for {users:?}; mappings {}",
                generated(claim_name),
                c.metadata.annotations.clone().unwrap_or_default(),
                c.data["spec"]["devices"]["requests"],
                ext["requestMappings"]
            );
        }
        if let Some(e) = events_for(client, NS, name, "FailedScheduling")
            .await
            .first()
        {
            return format!("failed: {}", e.message.clone().unwrap_or_default());
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{name}: no decision; log:\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn extended_resources(client: &Client, wasm: bool, dir: &Path) -> Vec<String> {
    let s = Scenario {
        name: "extended-resources",
        nodes: vec![("n1", vec![])],
        objects: fpga_objects(),
        pods: vec![],
        templates: false,
        admin: false,
    };
    build(client, &s).await;
    let (_guard, log_file) = start(s.name, wasm, dir);
    let log = || std::fs::read_to_string(&log_file).unwrap_or_default();
    let mut out = Vec::new();
    for p in [
        ext_pod("explicit", "example.com/fpga", 1),
        ext_pod("implicit", "deviceclass.resource.kubernetes.io/fpga", 1),
        // Both FPGAs are taken.
        ext_pod("none-left", "example.com/fpga", 1),
    ] {
        crate::create_pod(client, p.clone()).await;
        let v = ext_verdict(client, &p, &log).await;
        out.push(format!("{}: {v}", p["metadata"]["name"].as_str().unwrap()));
    }
    out
}

/// Sets the conditions of the claim's allocated devices (the driver's
/// part): each of `types` True.
async fn set_conditions(client: &Client, claim: &Value, types: &[&str]) {
    let name = claim["metadata"]["name"].as_str().unwrap();
    let now = "2026-01-01T00:00:00Z";
    let devices: Vec<Value> = claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let conditions: Vec<Value> = types
                .iter()
                .map(|t| json!({"type": t, "status": "True", "reason": "Driver", "message": "set by the test", "lastTransitionTime": now}))
                .collect();
            json!({"driver": r["driver"], "pool": r["pool"], "device": r["device"], "conditions": conditions})
        })
        .collect();
    let patch = json!({"status": {"devices": devices}});
    claims_api(client)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("set conditions of {name}: {e}"));
}

/// Drives the pod's claim as a driver would (the first allocation gets
/// `first`, every later one `attached`) until the pod is bound: the
/// devices of each allocation seen, and the node. After a failure both
/// schedulers take the pod's reservation back, find the claim unusable in
/// the next attempt, deallocate it and allocate again.
async fn drive(
    client: &Client,
    pod: &str,
    claim: &str,
    first: &str,
    log: &dyn Fn() -> String,
) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let started = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    loop {
        let c = claims_api(client).get(claim).await.unwrap();
        let c = serde_json::to_value(&c).unwrap();
        let allocation = &c["status"]["allocation"];
        // A new allocation has no device status yet (a deallocation
        // clears it): the driver answers each once.
        if !allocation.is_null() && c["status"]["devices"].is_null() {
            let devices: Vec<String> = allocation["devices"]["results"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| {
                    format!(
                        "{}/{} {}",
                        r["pool"].as_str().unwrap_or(""),
                        r["device"].as_str().unwrap_or(""),
                        r["bindingConditions"]
                    )
                })
                .collect();
            let set = if seen.is_empty() { first } else { "attached" };
            seen.push(format!("{} -> {set}", devices.join(",")));
            set_conditions(client, &c, &[set]).await;
        }
        let p = pods.get(pod).await.unwrap();
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            return format!("bound to {node} after allocations {seen:?}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{pod}: not bound; allocations {seen:?}; log:\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn binding_conditions(client: &Client, wasm: bool, dir: &Path) -> Vec<String> {
    let device = |name: &str| {
        json!({"name": name, "attributes": {"model": {"string": "A100"}},
            "bindingConditions": ["attached"], "bindingFailureConditions": ["attach-failed"]})
    };
    let s = Scenario {
        name: "binding-conditions",
        nodes: vec![("n1", vec![])],
        objects: vec![
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": "n1-attachable", "labels": {LABEL: "yes"}},
                "spec": {"driver": DRIVER, "nodeName": "n1",
                    "pool": {"name": "n1-attachable", "generation": 1, "resourceSliceCount": 1},
                    "devices": [device("gpu-0"), device("gpu-1")]}}),
            claim("ok", json!([request("gpu", json!({}))]), json!([])),
            claim("fails-once", json!([request("gpu", json!({}))]), json!([])),
        ],
        pods: vec![],
        templates: false,
        admin: false,
    };
    build(client, &s).await;
    let (_guard, log_file) = start(s.name, wasm, dir);
    let log = || std::fs::read_to_string(&log_file).unwrap_or_default();
    let mut out = Vec::new();
    for (name, first) in [("ok", "attached"), ("fails-once", "attach-failed")] {
        let p = pod(name, &[("gpu", name)]);
        crate::create_pod(client, p).await;
        let v = drive(client, name, name, first, &log).await;
        let (devices, users) = claim_state(client, name).await;
        out.push(format!(
            "{name}: {v}; claim devices {devices:?} reserved for {users:?}"
        ));
    }
    // kube-scheduler announces the wait with an event; so does wasmsched.
    let pending = events_for(client, NS, "ok", "BindingConditionsPending").await;
    out.push(format!(
        "ok: BindingConditionsPending {:?}",
        pending.first().and_then(|e| e.message.clone())
    ));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_resources_and_binding_conditions_match_kube_scheduler() {
    let _g = serial();
    let client = client().await;
    let tmp = tempfile::tempdir().unwrap();
    let mut differences = Vec::new();
    let kube = extended_resources(&client, false, tmp.path()).await;
    let ours = extended_resources(&client, true, tmp.path()).await;
    eprintln!("extended-resources: kube-scheduler {kube:#?}");
    // What the scenario is about happened (not only agreement).
    assert!(
        ours[0].contains("claim explicit-extended-resources-")
            && ours[0].contains("container-0-request-1"),
        "{ours:?}"
    );
    assert!(ours[2].starts_with("none-left: failed"), "{ours:?}");
    if kube != ours {
        differences.push(format!(
            "extended-resources:\n  kube-scheduler: {kube:#?}\n  wasmsched:      {ours:#?}"
        ));
    }
    let kube = binding_conditions(&client, false, tmp.path()).await;
    let ours = binding_conditions(&client, true, tmp.path()).await;
    eprintln!("binding-conditions: kube-scheduler {kube:#?}");
    assert!(ours[1].contains("-> attach-failed"), "{ours:?}");
    if kube != ours {
        differences.push(format!(
            "binding-conditions:\n  kube-scheduler: {kube:#?}\n  wasmsched:      {ours:#?}"
        ));
    }
    clean(&client).await;
    assert!(
        differences.is_empty(),
        "differences:\n{}",
        differences.join("\n")
    );
}
