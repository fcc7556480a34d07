//! wasmsched installed as users install it, on real nodes (issue 27):
//! kubelets 1.37.2 with containerd (`scripts/test-servers start-node`), the
//! image `scripts/build-image` writes imported into their containerd, the
//! Helm chart and the kustomize base applied as the README says, two
//! replicas with leader election. Workload pods naming its profiles are
//! bound by it and started by the kubelets, whose admission rejects
//! nothing (native sidecars, init containers sized to what is left, a GPU
//! of the fake device plugin); the leader's pod is deleted and the other
//! replica takes over without a pod bound twice; a policy is swapped
//! through its ConfigMap and the decisions change, with no restart.
//!
//! The nodes run only for these tests and are deleted after them: other
//! tests count nodes. kube-scheduler (as `default-scheduler`, for the
//! scheduler's own pods) and kube-controller-manager (Deployments,
//! ReplicaSets, the garbage collector, disruption budgets, the
//! kube-root-ca.crt publisher) run for them too.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::deploy::{deploy_with_components, install_monitoring_crds, kubectl};
use crate::env::*;

/// The namespace the README installs into, and the workloads'.
const NS: &str = "wasmsched";
const WORK: &str = "e2e-work";
const NODES: [&str; 2] = ["node-a", "node-b"];
/// The node the fake GPU device plugin serves, and its devices.
const GPU_NODE: &str = "node-b";
const GPUS: u32 = 2;

fn test_servers(args: &[&str]) -> String {
    let mut cmd = Command::new(repo().join("scripts/test-servers"));
    cmd.arg(args[0]);
    if !matches!(args[0], "helm" | "fake-gpu-device-plugin") {
        cmd.arg(&env().servers);
    }
    let out = cmd
        .args(&args[1..])
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/test-servers");
    assert!(out.status.success(), "scripts/test-servers {args:?} failed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn helm_command(args: &[&str]) -> Command {
    static HELM: OnceLock<String> = OnceLock::new();
    let bin = HELM.get_or_init(|| test_servers(&["helm"]));
    let mut cmd = Command::new(bin);
    cmd.arg("--kubeconfig").arg(&env().kubeconfig).args(args);
    cmd
}

/// The chart's values with every optional part on.
const EVERY_PART: [&str; 6] = [
    "--set",
    "gangs.enabled=true,gpuSharing.enabled=true,deletionCost.enabled=true",
    "--set",
    "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true",
    "--set",
    "metrics.grafanaDashboard.enabled=true",
];

fn helm(args: &[&str]) -> String {
    run(&mut helm_command(args))
}

/// The scheduler's image, as `scripts/build-image` writes it from the
/// binary under test; built twice into separate directories, which must
/// give the same digest.
pub struct Image {
    pub tar: PathBuf,
    pub reference: String,
    pub digest: String,
}

pub fn image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(|| {
        // Overwritten by the next run (no pile of tars in /tmp).
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("node-image");
        let _ = std::fs::remove_dir_all(&dir);
        let build = |out: &Path| {
            let start = Instant::now();
            let printed = run(Command::new(repo().join("scripts/build-image"))
                .args(["--binary", env!("CARGO_BIN_EXE_wasmsched"), "--out"])
                .arg(out));
            (printed.trim().to_string(), start.elapsed())
        };
        let (first, build_time) = build(&dir.join("a"));
        let (second, _) = build(&dir.join("b"));
        assert_eq!(first, second, "two builds of the image differ");
        let (reference, digest) = first.split_once('@').expect("REF@DIGEST");
        let tar = std::fs::read_dir(dir.join("a"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "tar"))
            .expect("the image tar");
        assert_eq!(
            std::fs::read(&tar).unwrap(),
            std::fs::read(dir.join("b").join(tar.file_name().unwrap())).unwrap(),
            "the two tars differ"
        );
        let bytes = std::fs::metadata(&tar).unwrap().len();
        assert!(bytes < 64 << 20, "the image tar is {bytes} bytes");
        eprintln!(
            "image {reference}@{digest}: {:.1} MiB tar, built in {:.1} s",
            bytes as f64 / 1048576.0,
            build_time.as_secs_f64()
        );
        Image {
            tar,
            reference: reference.to_string(),
            digest: digest.to_string(),
        }
    })
}

/// The JavaScript example component (12 MB, 3.9 MB gzipped: over a
/// ConfigMap's 1 MiB) in an image with busybox's `cp`, as the chart's
/// `plugins[].image` expects.
const BIG_PLUGIN_IMAGE: &str = "wasmsched.test/spot-affinity-js:1";

fn big_plugin_image(dir: &Path) -> PathBuf {
    let component = match std::env::var_os("WASMSCHED_EXAMPLE_PLUGINS") {
        Some(d) => PathBuf::from(d).join("spot-affinity-js.wasm"),
        None => panic!(
            "WASMSCHED_EXAMPLE_PLUGINS is not set: run `scripts/build-example-plugins DIR` and set \
             WASMSCHED_EXAMPLE_PLUGINS=DIR (or run scripts/test)"
        ),
    };
    assert!(component.is_file(), "{} is missing", component.display());
    let rootfs = dir.join("big-plugin-rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("busybox-static");
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/cp")).unwrap();
    std::fs::copy(&component, rootfs.join("spot-affinity-js.wasm")).unwrap();
    let tar = dir.join("big-plugin.tar");
    run(Command::new(repo().join("scripts/oci-image"))
        .arg("--rootfs")
        .arg(&rootfs)
        .args(["--name", BIG_PLUGIN_IMAGE, "--out"])
        .arg(&tar));
    tar
}

/// The real nodes, kube-controller-manager and kube-scheduler for one
/// test; stopped, and the nodes deleted, on drop.
pub struct RealCluster {
    pub dir: tempfile::TempDir,
    kube_scheduler: Child,
    gpu_plugin: Option<Child>,
    pub node_dirs: HashMap<String, PathBuf>,
}

impl RealCluster {
    pub fn start(images: &[&Path]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut node_dirs = HashMap::new();
        for name in NODES {
            let start = Instant::now();
            let images = std::env::join_paths(images).unwrap();
            let out = Command::new(repo().join("scripts/test-servers"))
                .args(["start-node"])
                .arg(&env().servers)
                .arg(name)
                .env("WASMSCHED_TEST_NODE_IMAGES", images)
                .status()
                .expect("scripts/test-servers start-node");
            assert!(out.success(), "start-node {name} failed");
            eprintln!(
                "node {name} Ready in {:.1} s",
                start.elapsed().as_secs_f64()
            );
            node_dirs.insert(name.to_string(), env().servers.join("nodes").join(name));
        }
        test_servers(&[
            "start-controller-manager",
            "deployment-controller,replicaset-controller,garbage-collector-controller,\
             disruption-controller,root-ca-certificate-publisher-controller,namespace-controller",
        ]);
        let cfg = dir.path().join("kube-scheduler.yaml");
        std::fs::write(
            &cfg,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
                 clientConnection: {{kubeconfig: {}}}\nleaderElection: {{leaderElect: false}}\n",
                env().kubeconfig.display()
            ),
        )
        .unwrap();
        let kube_scheduler = kube_scheduler(&cfg, &dir.path().join("kube-scheduler.log"), 2);
        Self {
            dir,
            kube_scheduler,
            gpu_plugin: None,
            node_dirs,
        }
    }

    /// The fake device plugin on `GPU_NODE`, registered with its kubelet.
    pub fn start_gpu_plugin(&mut self) {
        let bin = test_servers(&["fake-gpu-device-plugin"]);
        let log = self.dir.path().join("fake-gpu.log");
        let child = Command::new(bin)
            .arg("-dir")
            .arg(self.node_dirs[GPU_NODE].join("device-plugins"))
            .args(["-count", &GPUS.to_string()])
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("fake-gpu-device-plugin");
        self.gpu_plugin = Some(child);
    }

    /// A container's log, read where the node's kubelet writes it.
    pub fn container_log(&self, pod: &Pod, container: &str) -> String {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let Some(dir) = node.and_then(|n| self.node_dirs.get(&n).cloned()) else {
            return String::new();
        };
        let m = &pod.metadata;
        let pod_dir = dir.join("pod-logs").join(format!(
            "{}_{}_{}",
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or(""),
            m.uid.as_deref().unwrap_or("")
        ));
        let mut text = String::new();
        if let Ok(entries) = std::fs::read_dir(pod_dir.join(container)) {
            let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files {
                text.push_str(&std::fs::read_to_string(f).unwrap_or_default());
            }
        }
        text
    }
}

/// Stops the test nodes (a test that died may have left them running; a
/// running kubelet registers its Node again, which other tests would count).
fn stop_nodes() {
    for name in NODES {
        let _ = Command::new(repo().join("scripts/test-servers"))
            .args(["stop-node"])
            .arg(&env().servers)
            .arg(name)
            .status();
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        if let Some(mut c) = self.gpu_plugin.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = self.kube_scheduler.kill();
        let _ = self.kube_scheduler.wait();
        stop_nodes();
        let _ = Command::new(repo().join("scripts/test-servers"))
            .args(["stop-controller-manager"])
            .arg(&env().servers)
            .status();
    }
}

/// Removes what an earlier install (this test's, deploy.rs's RBAC, a
/// kustomize apply) left in the namespace and the cluster.
async fn clean_install(client: &Client) {
    let _ = Command::new(test_servers(&["helm"]))
        .arg("--kubeconfig")
        .arg(&env().kubeconfig)
        .args([
            "uninstall",
            "wasmsched",
            "-n",
            NS,
            "--wait",
            "--timeout",
            "60s",
        ])
        .output();
    let _ = kubectl(&[
        "delete",
        "clusterrole,clusterrolebinding",
        "-l",
        "app.kubernetes.io/name=wasmsched",
        "--wait",
    ]);
    let _ = kubectl(&[
        "delete",
        "-n",
        NS,
        "deployment,replicaset,serviceaccount,role,rolebinding,configmap,service,networkpolicy,poddisruptionbudget",
        "-l",
        "app.kubernetes.io/name=wasmsched",
        "--wait",
    ]);
    let _ = kubectl(&["delete", "-n", NS, "configmap", "--all"]);
    let _ = Api::<Lease>::namespaced(client.clone(), NS)
        .delete("wasmsched", &DeleteParams::default())
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let _ = pods.delete_collection(&force, &ListParams::default()).await;
}

/// The policies the test swaps: v1 is the `chaos` test component (Filter
/// rejects nodes labelled `chaos/reject: "true"`), v2 the built-in
/// `gpu-topology` component (accepts every node for a pod without GPUs).
/// Gzipped: the loader takes `.wasm.gz`.
fn policy(version: u8) -> Vec<u8> {
    let bytes = match version {
        1 => {
            std::fs::read(Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR")).join("chaos.wasm")).unwrap()
        }
        _ => wasmsched::wasm::builtin::BUILTIN
            .iter()
            .find(|(name, _)| *name == "gpu-topology")
            .expect("gpu-topology is built in")
            .1
            .to_vec(),
    };
    filter(Command::new("gzip").args(["-9", "-n", "-c"]), &bytes)
}

/// Runs `cmd` with `input` on its stdin (written from another thread, so
/// that a full stdout pipe cannot block the writer) and returns its stdout.
fn filter(cmd: &mut Command, input: &[u8]) -> Vec<u8> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{cmd:?} failed");
    out.stdout
}

fn base64(bytes: &[u8]) -> String {
    String::from_utf8(filter(Command::new("base64").arg("-w0"), bytes)).unwrap()
}

/// A workload pod for `scheduler` on the node's network (the test nodes
/// have no pod network), running busybox.
fn pod(name: &str, scheduler: &str, spec: Value) -> Pod {
    let mut p = json!({
        "metadata": {"name": name, "namespace": WORK},
        "spec": {
            "schedulerName": scheduler,
            "hostNetwork": true,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "wasmsched.test/busybox:1",
                "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]
        }
    });
    merge(&mut p["spec"], spec);
    serde_json::from_value(p).unwrap()
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

async fn create(client: &Client, p: Pod) {
    Api::<Pod>::namespaced(client.clone(), WORK)
        .create(&PostParams::default(), &p)
        .await
        .expect("create pod");
}

async fn get(client: &Client, ns: &str, name: &str) -> Option<Pod> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .ok()
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Every pod the kubelets rejected or failed, with the reason.
async fn failed_pods(client: &Client) -> Vec<String> {
    Api::<Pod>::namespaced(client.clone(), WORK)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| phase(p) == "Failed")
        .map(|p| {
            let s = p.status.clone().unwrap_or_default();
            format!(
                "{}: {} {}",
                p.metadata.name.unwrap_or_default(),
                s.reason.unwrap_or_default(),
                s.message.unwrap_or_default()
            )
        })
        .collect()
}

/// Waits until pod `name` is Running (or Succeeded when `done`).
async fn wait_phase(client: &Client, name: &str, want: &str) {
    wait_until(
        &format!("{name} {want}"),
        Duration::from_secs(120),
        || async {
            let p = get(client, WORK, name).await;
            if let Some(p) = &p {
                assert_ne!(
                    phase(p),
                    "Failed",
                    "{name} failed: {:?}",
                    p.status.as_ref().map(|s| (&s.reason, &s.message))
                );
            }
            p.is_some_and(|p| phase(&p) == want)
        },
    )
    .await;
}

/// The cpu (millicores) the pods on `node` request in their containers
/// (before the test adds pods with init containers: the scheduler's own).
async fn cpu_used(client: &Client, node: &str) -> i64 {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut used = 0;
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node);
        if !on || matches!(phase(&p), "Succeeded" | "Failed") {
            continue;
        }
        // Only plain containers here (the scheduler's pods and sleepers).
        for c in &p.spec.as_ref().unwrap().containers {
            if let Some(q) = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("cpu"))
            {
                used += millis(&q.0);
            }
        }
    }
    used
}

fn millis(q: &str) -> i64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap(),
        None => (q.parse::<f64>().unwrap() * 1000.0) as i64,
    }
}

async fn allocatable_cpu(client: &Client, node: &str) -> i64 {
    let n = Api::<Node>::all(client.clone()).get(node).await.unwrap();
    millis(&n.status.unwrap().allocatable.unwrap()["cpu"].0)
}

/// The Lease's holder, as `POD_NAME_suffix`: the pod's name.
async fn leader(client: &Client) -> Option<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), NS)
        .get("wasmsched")
        .await
        .ok()?;
    let holder = lease.spec?.holder_identity?;
    holder.rsplit_once('_').map(|(pod, _)| pod.to_string())
}

/// The scheduler's pods: name -> (uid, node, restarts, ready).
async fn scheduler_pods(client: &Client) -> BTreeMap<String, (String, String, i32, bool)> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels("app.kubernetes.io/name=wasmsched"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let status = p.status.clone().unwrap_or_default();
            let cs = status.container_statuses.unwrap_or_default();
            (
                p.metadata.name.clone().unwrap(),
                (
                    p.metadata.uid.clone().unwrap(),
                    p.spec.and_then(|s| s.node_name).unwrap_or_default(),
                    cs.iter().map(|c| c.restart_count).sum(),
                    cs.iter().all(|c| c.ready) && !cs.is_empty(),
                ),
            )
        })
        .collect()
}

/// Waits for two ready replicas, one holding the Lease; none has
/// restarted (a probe that killed a slow start would show here).
async fn wait_two_ready(client: &Client) {
    wait_until(
        "two ready scheduler pods and a leader",
        Duration::from_secs(180),
        || async {
            let pods = scheduler_pods(client).await;
            pods.len() == 2
                && pods.values().all(|p| p.3)
                && leader(client).await.is_some_and(|l| pods.contains_key(&l))
        },
    )
    .await;
    let pods = scheduler_pods(client).await;
    assert!(
        pods.values().all(|p| p.2 == 0),
        "a scheduler container restarted: {pods:?}"
    );
}

/// Scheduled events per pod of WORK, by replica (reporting instance).
async fn scheduled_events(client: &Client) -> BTreeMap<String, Vec<String>> {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), WORK);
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in events.list(&ListParams::default()).await.unwrap().items {
        if e.reason.as_deref() == Some("Scheduled") {
            out.entry(e.involved_object.name.clone().unwrap_or_default())
                .or_default()
                .push(e.reporting_instance.clone().unwrap_or_default());
        }
    }
    out
}

/// Sets (or removes) a node label, then gives the scheduler's node watch
/// a moment: its Node and Pod watches are not ordered with each other, so
/// a pod created in the same instant could be scheduled against the node
/// as it was.
async fn label_node(client: &Client, node: &str, key: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"labels": {key: value}}});
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// The admission checks: pods with native sidecars and init containers
/// sized to what is left on a node are bound by wasmsched exactly when the
/// kubelet admits them, and started; a GPU pod gets a device of the fake
/// plugin. `scheduler` is the profile.
async fn admission_checks(client: &Client, cluster: &RealCluster, scheduler: &str, gpu: bool) {
    let node = "node-a";
    let pin = json!({"nodeSelector": {"kubernetes.io/hostname": node}});
    // Sidecar pods: a restartable init container (400m) beside the main
    // container (400m) take 800m. A scheduler that forgot the sidecar
    // would place twice as many, and the kubelet would reject the extra
    // ones (OutOfcpu).
    let free = allocatable_cpu(client, node).await - cpu_used(client, node).await;
    let fit = (free / 800) as usize;
    assert!(fit >= 1, "node-a has {free}m free");
    for i in 0..=fit {
        let mut spec = pin.clone();
        merge(
            &mut spec,
            json!({
                "initContainers": [{"name": "sidecar", "image": "wasmsched.test/busybox:1",
                    "imagePullPolicy": "Never", "restartPolicy": "Always",
                    "command": ["sleep", "3600"], "resources": {"requests": {"cpu": "400m", "memory": "16Mi"}}}],
                "containers": [{"name": "main", "image": "wasmsched.test/busybox:1",
                    "imagePullPolicy": "Never", "command": ["sleep", "3600"],
                    "resources": {"requests": {"cpu": "400m", "memory": "16Mi"}}}]
            }),
        );
        create(client, pod(&format!("sidecar-{i}"), scheduler, spec)).await;
    }
    for i in 0..fit {
        wait_phase(client, &format!("sidecar-{i}"), "Running").await;
    }
    let extra = format!("sidecar-{fit}");
    wait_until(
        "the pod that does not fit reported",
        Duration::from_secs(60),
        || async {
            events_for(client, WORK, &extra, "FailedScheduling")
                .await
                .iter()
                .any(|e| {
                    e.message
                        .as_deref()
                        .unwrap_or("")
                        .contains("Insufficient cpu")
                })
        },
    )
    .await;
    assert!(!is_bound(&get(client, WORK, &extra).await.unwrap()));
    Api::<Pod>::namespaced(client.clone(), WORK)
        .delete(&extra, &DeleteParams::default())
        .await
        .unwrap();

    // Init containers sized to exactly what is left: the pod fits (its
    // request is the largest of its init containers and the sum of its
    // containers), runs its init container, then its main one; 100m
    // more and it must wait, where a scheduler counting only the
    // containers would bind it and the kubelet reject it.
    // (What the scheduler's replica left, less the sidecar pods' 800m.)
    let free = free - 800 * fit as i64;
    for (name, cpu) in [("init-exact", free), ("init-over", free + 100)] {
        let mut spec = pin.clone();
        merge(
            &mut spec,
            json!({
                "restartPolicy": "Never",
                "initContainers": [{"name": "init", "image": "wasmsched.test/busybox:1",
                    "imagePullPolicy": "Never", "command": ["true"],
                    "resources": {"requests": {"cpu": format!("{cpu}m")}}}],
                "containers": [{"name": "main", "image": "wasmsched.test/busybox:1",
                    "imagePullPolicy": "Never", "command": ["true"],
                    "resources": {"requests": {"cpu": "100m"}}}]
            }),
        );
        create(client, pod(name, scheduler, spec)).await;
    }
    wait_phase(client, "init-exact", "Succeeded").await;
    wait_until("init-over reported", Duration::from_secs(60), || async {
        !events_for(client, WORK, "init-over", "FailedScheduling")
            .await
            .is_empty()
    })
    .await;
    // (init-exact has finished: init-over may fit now; whether it does
    // is the next cycle's business, it must only never be rejected.)

    if gpu {
        gpu_checks(client, cluster, scheduler).await;
    }
    assert_eq!(failed_pods(client).await, Vec::<String>::new());
}

/// A GPU pod gets the fake device plugin's devices on GPU_NODE; one asking
/// for more than the node has waits.
async fn gpu_checks(client: &Client, cluster: &RealCluster, scheduler: &str) {
    wait_until(
        "nvidia.com/gpu on the node",
        Duration::from_secs(60),
        || async {
            Api::<Node>::all(client.clone())
                .get(GPU_NODE)
                .await
                .ok()
                .and_then(|n| n.status?.allocatable)
                .and_then(|a| a.get("nvidia.com/gpu").cloned())
                .is_some_and(|q| q.0 == GPUS.to_string())
        },
    )
    .await;
    for (name, gpus) in [("gpu-pod", GPUS), ("gpu-over", GPUS + 1)] {
        let spec = json!({
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "wasmsched.test/busybox:1",
                "imagePullPolicy": "Never", "command": ["sh", "-c", "echo devices=$NVIDIA_VISIBLE_DEVICES"],
                "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]
        });
        create(client, pod(name, scheduler, spec)).await;
    }
    wait_phase(client, "gpu-pod", "Succeeded").await;
    let p = get(client, WORK, "gpu-pod").await.unwrap();
    assert_eq!(
        p.spec.as_ref().unwrap().node_name.as_deref(),
        Some(GPU_NODE)
    );
    let log = cluster.container_log(&p, "main");
    assert!(
        log.contains("devices=fake-gpu-0,fake-gpu-1")
            || log.contains("devices=fake-gpu-1,fake-gpu-0"),
        "the container did not get the devices: {log:?}"
    );
    wait_until("gpu-over reported", Duration::from_secs(60), || async {
        events_for(client, WORK, "gpu-over", "FailedScheduling")
            .await
            .iter()
            .any(|e| {
                e.message
                    .as_deref()
                    .unwrap_or("")
                    .contains("Insufficient nvidia.com/gpu")
            })
    })
    .await;
    assert!(!is_bound(&get(client, WORK, "gpu-over").await.unwrap()));
}

/// The component copied from its image decides in its profile: node-a
/// is reserved for batch pods, so a latency-critical pod goes to node-b,
/// and a pod with an unknown class is refused with the label named.
async fn big_plugin_decides(client: &Client) {
    label_node(client, "node-a", "wasmsched.io/reserved-for", Some("batch")).await;
    for (name, class) in [
        ("latency-0", "latency-critical"),
        ("latency-1", "latency-critical"),
        ("bad-class", "x"),
    ] {
        let mut p = pod(name, "wasmsched-default", json!({}));
        p.metadata.labels =
            Some([("wasmsched.io/workload-class".to_string(), class.to_string())].into());
        create(client, p).await;
    }
    for name in ["latency-0", "latency-1"] {
        wait_phase(client, name, "Running").await;
        let p = get(client, WORK, name).await.unwrap();
        assert_eq!(
            p.spec.unwrap().node_name.as_deref(),
            Some("node-b"),
            "{name}"
        );
    }
    wait_until("bad-class refused", Duration::from_secs(60), || async {
        events_for(client, WORK, "bad-class", "FailedScheduling")
            .await
            .iter()
            .any(|e| {
                e.message
                    .as_deref()
                    .unwrap_or("")
                    .contains("wasmsched.io/workload-class")
            })
    })
    .await;
    label_node(client, "node-a", "wasmsched.io/reserved-for", None).await;
}

/// The leader's pod is deleted: the other replica takes over, pods
/// created meanwhile are bound once each, and the replacement pod joins
/// as the standby.
async fn leader_failover(client: &Client, scheduler: &str) {
    let before = scheduler_pods(client).await;
    let old = leader(client).await.expect("a leader");
    let t = Instant::now();
    Api::<Pod>::namespaced(client.clone(), NS)
        .delete(&old, &DeleteParams::default())
        .await
        .unwrap();
    for i in 0..6 {
        create(client, pod(&format!("during-{i}"), scheduler, json!({}))).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Usually the standby; on a loaded machine the Deployment's
    // replacement pod may start and win the released Lease first. Either
    // way another replica leads, and long before the Lease would expire.
    wait_until(
        "another replica to lead",
        Duration::from_secs(60),
        || async { leader(client).await.is_some_and(|l| l != old) },
    )
    .await;
    let new = leader(client).await.unwrap_or_default();
    eprintln!(
        "new leader: {new} ({})",
        if before.contains_key(&new) {
            "the standby"
        } else {
            "the replacement pod"
        }
    );
    let takeover = t.elapsed();
    eprintln!(
        "takeover after the leader's pod was deleted: {:.1} s",
        takeover.as_secs_f64()
    );
    // The old leader releases the Lease on SIGTERM: the standby takes it
    // at its next retry (2 s), well before the lease would expire (15 s).
    assert!(
        takeover < Duration::from_secs(15),
        "the Lease was not released: taken over after {takeover:?}"
    );
    for i in 0..6 {
        wait_phase(client, &format!("during-{i}"), "Running").await;
    }
    wait_two_ready(client).await;
    let events = scheduled_events(client).await;
    for i in 0..6 {
        let name = format!("during-{i}");
        assert_eq!(
            events.get(&name).map(Vec::len),
            Some(1),
            "{name}: one Scheduled event, got {events:?}"
        );
    }
    assert_eq!(failed_pods(client).await, Vec::<String>::new());
}

/// A new version of the policy through its ConfigMap: the pod the old
/// policy rejects is bound once the kubelet has updated the volume and
/// the scheduler reloaded it, with no restart. Returns the time from the
/// update to the first decision by the new policy.
async fn policy_swap(
    client: &Client,
    cluster: &RealCluster,
    scheduler: &str,
    update: impl FnOnce(),
) -> Duration {
    let pods_before = scheduler_pods(client).await;
    // v1 rejects node-b (labelled), so a pod for node-b waits.
    label_node(client, "node-b", "chaos/reject", Some("true")).await;
    let probe = |name: &str| {
        pod(
            name,
            scheduler,
            json!({"nodeSelector": {"kubernetes.io/hostname": "node-b"}}),
        )
    };
    create(client, probe("probe-v1")).await;
    wait_until("v1 to reject node-b", Duration::from_secs(60), || async {
        events_for(client, WORK, "probe-v1", "FailedScheduling")
            .await
            .iter()
            .any(|e| e.message.as_deref().unwrap_or("").contains("chaos says no"))
    })
    .await;
    let t = Instant::now();
    update();
    // The first decision by v2: the waiting pod, retried after the
    // reload, bound to node-b.
    wait_until(
        "the waiting pod bound by the new policy",
        Duration::from_secs(180),
        || async {
            get(client, WORK, "probe-v1")
                .await
                .is_some_and(|p| is_bound(&p))
        },
    )
    .await;
    let latency = t.elapsed();
    eprintln!(
        "policy update to the first decision by the new version: {:.1} s",
        latency.as_secs_f64()
    );
    create(client, probe("probe-v2")).await;
    wait_phase(client, "probe-v2", "Running").await;
    wait_phase(client, "probe-v1", "Running").await;
    // No restart: the same pods (uid), no container restarts; the leader
    // logged and counted the reload.
    let pods_after = scheduler_pods(client).await;
    assert_eq!(
        pods_before
            .iter()
            .map(|(n, p)| (n, &p.0, p.2))
            .collect::<Vec<_>>(),
        pods_after
            .iter()
            .map(|(n, p)| (n, &p.0, p.2))
            .collect::<Vec<_>>(),
        "the scheduler's pods were restarted or replaced"
    );
    let lead = leader(client).await.unwrap();
    let p = get(client, NS, &lead).await.unwrap();
    let log = cluster.container_log(&p, "wasmsched");
    assert!(
        log.contains(" Policy success: "),
        "the reload is not in the leader's log:\n{log}"
    );
    label_node(client, "node-b", "chaos/reject", None).await;
    latency
}

/// Deletes the workload pods between phases.
async fn clear_work(client: &Client) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), WORK);
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let _ = pods.delete_collection(&force, &ListParams::default()).await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), WORK);
    let _ = events
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    wait_until("work pods gone", Duration::from_secs(60), || async {
        pods.list(&ListParams::default())
            .await
            .map(|l| l.items.is_empty())
            .unwrap_or(false)
    })
    .await;
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The values the chart is installed with, as the README says, with the
/// test cluster's overrides: the nodes' network and the API server at
/// 127.0.0.1:6443 there.
fn install_values(digest: &str, policy_base64: &str) -> String {
    format!(
        "image:\n  digest: {digest}\n  pullPolicy: Never\nhostNetwork: true\n\
         apiServer: {{host: 127.0.0.1, port: \"6443\"}}\n\
         gangs: {{enabled: true, installCRD: false}}\ngpuSharing: {{enabled: true}}\n\
         deletionCost:\n  enabled: true\n  config: {{prometheus: {{url: \"http://127.0.0.1:9\"}}}}\n\
         clusterSize: {{nodes: 2, pods: 100}}\n\
         plugins:\n- name: Policy\n  file: policy.wasm.gz\n  failurePolicy: Fail\n  base64: {policy_base64}\n  \
         profiles:\n    gpu-scheduler: {{points: [filter, score]}}\n\
         - name: SpotAffinity\n  file: spot-affinity-js.wasm\n  image: {BIG_PLUGIN_IMAGE}\n  \
         imagePath: /spot-affinity-js.wasm\n  timeout: 1s\n  memoryLimit: 128Mi\n  \
         profiles:\n    wasmsched-default: {{points: [multiPoint]}}\n\
         resources:\n  requests: {{cpu: 500m, memory: 256Mi}}\n  limits: {{memory: 1Gi}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_helm_chart_installs_wasmsched_on_real_nodes() {
    let _g = serial();
    let started = Instant::now();
    let client = client().await;
    stop_nodes();
    clean_install(&client).await;
    reset(&client, &[WORK, NS]).await;
    let image = image();
    let images = tempfile::tempdir().unwrap();
    let big = big_plugin_image(images.path());
    let mut cluster = RealCluster::start(&[&image.tar, &big]);
    cluster.start_gpu_plugin();
    let tmp = cluster.dir.path().to_path_buf();
    let chart = repo().join("deploy/chart/wasmsched");
    let chart = chart.to_str().unwrap();

    // The chart's version is the image's, Cargo's.
    let chart_yaml =
        std::fs::read_to_string(repo().join("deploy/chart/wasmsched/Chart.yaml")).unwrap();
    let version = image.reference.rsplit_once(':').unwrap().1;
    assert!(
        chart_yaml.contains(&format!("\nversion: {version}\n"))
            && chart_yaml.contains(&format!("\nappVersion: \"{version}\"\n")),
        "Chart.yaml's version and appVersion are not the image's {version}"
    );
    helm(&["lint", chart, "--strict"]);
    // Everything on at once, rendered and accepted by the API server.
    install_monitoring_crds(&tmp);
    let mut template_all = vec!["template", "wasmsched", chart, "-n", NS];
    template_all.extend(EVERY_PART);
    let all = helm(&template_all);
    let rendered = write(&tmp, "all.yaml", &all);
    let (ok, out) = kubectl(&[
        "apply",
        "--dry-run=server",
        "-f",
        rendered.to_str().unwrap(),
    ]);
    assert!(ok, "server dry run of the chart: {out}");
    for kind in [
        "clusterrole.rbac.authorization.k8s.io/wasmsched-gangs",
        "clusterrole.rbac.authorization.k8s.io/wasmsched-gpu-sharing",
        "clusterrole.rbac.authorization.k8s.io/wasmsched-deletion-cost",
        "poddisruptionbudget.policy/wasmsched",
        "servicemonitor.monitoring.coreos.com/wasmsched",
        "prometheusrule.monitoring.coreos.com/wasmsched",
        "customresourcedefinition.apiextensions.k8s.io/podgroups.scheduling.x-k8s.io",
        "role.rbac.authorization.k8s.io/wasmsched-leader-election",
    ] {
        assert!(out.contains(kind), "{kind} missing from the chart: {out}");
    }
    // The merged configuration is one the scheduler accepts, with each
    // part in it.
    let config = serde_saphyr::from_multiple::<Value>(&all)
        .unwrap()
        .into_iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "wasmsched-config")
        .expect("the config ConfigMap");
    let config_file = write(
        &tmp,
        "config.yaml",
        config["data"]["config.yaml"].as_str().unwrap(),
    );
    let profiles = run(Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(["profiles", "--config"])
        .arg(&config_file));
    for part in [
        "Coscheduling",
        "hami-scheduler",
        "gpu-scheduler",
        "wasmsched-default",
    ] {
        assert!(profiles.contains(part), "{part} missing: {profiles}");
    }
    assert!(wasmsched::config::load(&config_file)
        .unwrap()
        .deletion_cost
        .is_some());

    // The install, as the README says (install_values).
    let policy_v1 = base64(&policy(1));
    let values = write(
        &tmp,
        "values.yaml",
        &install_values(&image.digest, &policy_v1),
    );
    let crd = repo().join("deploy/components/gangs/crd.yaml");
    let (ok, out) = kubectl(&["apply", "-f", crd.to_str().unwrap()]);
    assert!(ok, "{out}");
    let t = Instant::now();
    helm(&[
        "install",
        "wasmsched",
        chart,
        "-n",
        NS,
        "--create-namespace",
        "-f",
        values.to_str().unwrap(),
    ]);
    wait_two_ready(&client).await;
    eprintln!(
        "helm install to two ready replicas: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let pods = scheduler_pods(&client).await;
    let nodes: std::collections::BTreeSet<&String> = pods.values().map(|p| &p.1).collect();
    assert_eq!(nodes.len(), 2, "the replicas share a node: {pods:?}");
    let deployment = Api::<Deployment>::namespaced(client.clone(), NS)
        .get("wasmsched")
        .await
        .unwrap();
    let image_ref = deployment.spec.template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap();
    assert_eq!(
        image_ref,
        format!("ghcr.io/wasmsched/wasmsched@{}", image.digest)
    );

    big_plugin_decides(&client).await;
    clear_work(&client).await;
    admission_checks(&client, &cluster, "gpu-scheduler", true).await;
    clear_work(&client).await;
    leader_failover(&client, "gpu-scheduler").await;
    clear_work(&client).await;
    let v2 = base64(&policy(2));
    let values_v2 = write(
        &tmp,
        "values-v2.yaml",
        &std::fs::read_to_string(&values)
            .unwrap()
            .replace(&policy_v1, &v2),
    );
    let latency = policy_swap(&client, &cluster, "gpu-scheduler", || {
        helm(&[
            "upgrade",
            "wasmsched",
            chart,
            "-n",
            NS,
            "-f",
            values_v2.to_str().unwrap(),
        ]);
    })
    .await;
    clear_work(&client).await;
    helm(&[
        "uninstall",
        "wasmsched",
        "-n",
        NS,
        "--wait",
        "--timeout",
        "120s",
    ]);
    eprintln!(
        "helm test: {:.0} s (policy swap {:.1} s)",
        started.elapsed().as_secs_f64(),
        latency.as_secs_f64()
    );
    drop(cluster);
}

/// The kustomize base with every component (monitoring's CRDs installed
/// beforehand), and the overlay a user
/// writes (README "Installing in a cluster"): the image by digest, the
/// policy in the plugins ConfigMap and a fragment naming it; here also
/// the test cluster's node network and API server address.
fn kustomize_overlay(dir: &Path, digest: &str, policy: &[u8]) -> PathBuf {
    let overlay = dir.join("overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    // kustomize wants paths relative to the overlay.
    let up = overlay.components().count() - 1;
    let base = format!(
        "{}{}",
        "../".repeat(up),
        repo()
            .join("deploy")
            .display()
            .to_string()
            .trim_start_matches('/')
    );
    std::fs::write(overlay.join("policy.wasm.gz"), policy).unwrap();
    write(
        &overlay,
        "fragment-policy.yaml",
        "wasmPlugins:\n- name: Policy\n  path: /etc/wasmsched/plugins/policy.wasm.gz\n  failurePolicy: Fail\n\
         profiles:\n- schedulerName: gpu-scheduler\n  plugins:\n    filter: {enabled: [{name: Policy}]}\n    \
         score: {enabled: [{name: Policy}]}\n",
    );
    write(
        &overlay,
        "test-cluster.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: wasmsched, namespace: wasmsched}\n\
         spec:\n  template:\n    spec:\n      hostNetwork: true\n      dnsPolicy: ClusterFirstWithHostNet\n      \
         containers:\n      - name: wasmsched\n        imagePullPolicy: Never\n        env:\n        \
         - {name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}\n        \
         - {name: KUBERNETES_SERVICE_PORT, value: \"6443\"}\n",
    );
    write(
        &overlay,
        "kustomization.yaml",
        &format!(
            "namespace: wasmsched\nresources: [{base}]\n\
             components: [{base}/components/deletion-cost, {base}/components/gangs, {base}/components/gpu-sharing, \
             {base}/components/monitoring]\n\
             configMapGenerator:\n- name: wasmsched-config\n  behavior: merge\n  files: [fragment-policy.yaml]\n\
             - name: wasmsched-plugins\n  behavior: replace\n  files: [policy.wasm.gz]\n  options: {{disableNameSuffixHash: true}}\n\
             images:\n- name: ghcr.io/wasmsched/wasmsched\n  digest: {digest}\n\
             patches:\n- path: test-cluster.yaml\n"
        ),
    );
    overlay
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kustomize_base_installs_wasmsched_on_real_nodes() {
    let _g = serial();
    let started = Instant::now();
    let client = client().await;
    stop_nodes();
    clean_install(&client).await;
    reset(&client, &[WORK, NS]).await;
    let image = image();
    let cluster = RealCluster::start(&[&image.tar]);
    let tmp = cluster.dir.path().to_path_buf();
    install_monitoring_crds(&tmp);
    let overlay = kustomize_overlay(&tmp, &image.digest, &policy(1));
    let overlay_arg = overlay.to_str().unwrap().to_string();
    let t = Instant::now();
    let (ok, out) = kubectl(&["apply", "-k", &overlay_arg]);
    assert!(ok, "kubectl apply -k: {out}");
    wait_two_ready(&client).await;
    eprintln!(
        "kubectl apply -k to two ready replicas: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let pods = scheduler_pods(&client).await;
    let nodes: std::collections::BTreeSet<&String> = pods.values().map(|p| &p.1).collect();
    assert_eq!(nodes.len(), 2, "the replicas share a node: {pods:?}");

    admission_checks(&client, &cluster, "gpu-scheduler", false).await;
    clear_work(&client).await;
    leader_failover(&client, "gpu-scheduler").await;
    clear_work(&client).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let generation = deployments
        .get("wasmsched")
        .await
        .unwrap()
        .metadata
        .generation;
    let latency = policy_swap(&client, &cluster, "gpu-scheduler", || {
        std::fs::write(overlay.join("policy.wasm.gz"), policy(2)).unwrap();
        let (ok, out) = kubectl(&["apply", "-k", &overlay_arg]);
        assert!(ok, "kubectl apply -k: {out}");
        assert!(
            out.contains("configmap/wasmsched-plugins configured"),
            "the plugins ConfigMap did not change: {out}"
        );
    })
    .await;
    // The Deployment's spec did not change (no rollout).
    assert_eq!(
        deployments
            .get("wasmsched")
            .await
            .unwrap()
            .metadata
            .generation,
        generation
    );
    clear_work(&client).await;
    let (ok, out) = kubectl(&["delete", "-k", &overlay_arg, "--wait", "--timeout=120s"]);
    assert!(ok, "kubectl delete -k: {out}");
    eprintln!(
        "kustomize test: {:.0} s (policy swap {:.1} s)",
        started.elapsed().as_secs_f64(),
        latency.as_secs_f64()
    );
    drop(cluster);
}

/// The kinds and names of a rendering's objects, and the objects.
fn objects(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap()
        .into_iter()
        .filter(|o| o["kind"].is_string())
        .collect()
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// `helm template` of the chart with `args`, as objects.
fn template(chart: &str, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["template", "wasmsched", chart, "-n", NS];
    all.extend_from_slice(args);
    objects(&helm(&all))
}

/// The chart's values and the kustomize layout, rendered without a
/// cluster (needs only helm and kubectl's kustomize; seconds): the schema
/// refuses a misspelt value, the logging values reach the arguments, the
/// Prometheus Operator's kinds appear only when asked for and carry the
/// labels given, and the kustomize base has a disruption budget but none
/// of the operator's kinds, which the monitoring component adds.
#[test]
fn the_chart_and_the_kustomize_base_render_as_their_values_say() {
    let chart = repo().join("deploy/chart/wasmsched");
    let chart = chart.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let every_part: Vec<&str> = EVERY_PART
        .iter()
        .copied()
        .chain([
            "--set",
            "metrics.serviceMonitor.labels.release=kps,metrics.prometheusRule.labels.release=kps",
        ])
        .collect();
    helm(&["lint", chart, "--strict"]);
    let mut lint_all = vec!["lint", chart, "--strict"];
    lint_all.extend_from_slice(&every_part);
    helm(&lint_all);
    // The node test's values (a made-up digest) validate and render.
    let values = write(
        tmp.path(),
        "values.yaml",
        &install_values(&format!("sha256:{}", "0".repeat(64)), &base64(b"policy")),
    );
    let values = values.to_str().unwrap();
    helm(&["lint", chart, "--strict", "-f", values]);
    template(chart, &["-f", values]);

    // A misspelt value, a value of the wrong type, one outside its enum:
    // refused by values.schema.json, naming it.
    for (set, names) in [
        ("imagee.tag=x", "imagee"),
        ("metrics.serviceMonitor.enabeld=true", "enabeld"),
        ("loggingFormat=xml", "loggingFormat"),
        ("verbosity=-1", "verbosity"),
        ("replicas=two", "replicas"),
    ] {
        let out = helm_command(&["template", "wasmsched", chart, "--set", set])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(names),
            "--set {set}: not refused naming {names}: {err}"
        );
    }
    // The logging flags come from their values, never twice (the
    // scheduler would refuse to start).
    let twice = helm_command(&["template", "wasmsched", chart, "--set", "extraArgs={-v=2}"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&twice.stderr);
    assert!(
        !twice.status.success() && err.contains("extraArgs: -v=2: set verbosity"),
        "{err}"
    );
    // kubeVersion: 1.32 and newer.
    let old = helm_command(&["template", "wasmsched", chart, "--kube-version", "1.31.9"])
        .output()
        .unwrap();
    assert!(
        !old.status.success(),
        "the chart renders for Kubernetes 1.31"
    );
    template(chart, &["--kube-version", "1.32.0"]);

    // Defaults: -v=1 and text logs, no tracing filter; the pod's and the
    // container's security contexts; the replicas spread over nodes.
    let default = template(chart, &[]);
    let deployment = of_kind(&default, "Deployment")[0];
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.contains(&"-v=1") && args.contains(&"--logging-format=text"),
        "{args:?}"
    );
    assert!(
        !container["env"].to_string().contains("WASMSCHED_LOG"),
        "{}",
        container["env"]
    );
    assert_eq!(
        pod["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
               "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(
        container["securityContext"],
        json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
               "capabilities": {"drop": ["ALL"]}})
    );
    let selector = json!({"matchLabels": {"app.kubernetes.io/name": "wasmsched",
        "app.kubernetes.io/instance": "wasmsched"}});
    assert_eq!(
        pod["topologySpreadConstraints"],
        json!([{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}])
    );
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    let pdb = of_kind(&default, "PodDisruptionBudget");
    assert_eq!(pdb.len(), 1);
    assert_eq!(pdb[0]["spec"]["minAvailable"], 1);
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        assert!(of_kind(&default, kind).is_empty(), "{kind} by default");
    }

    // The values, set.
    let set = template(
        chart,
        &[
            "--set",
            "verbosity=4,loggingFormat=json,logLevel=wasmsched=debug",
            "--set",
            "securityContext.readOnlyRootFilesystem=false,podSecurityContext.runAsUser=1000",
            "--set",
            "topologySpreadConstraints=null,priorityClassName=high",
            "--set",
            "nodeSelector.pool=system,tolerations[0].key=dedicated,tolerations[0].operator=Exists",
        ],
    );
    let deployment = of_kind(&set, "Deployment")[0];
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args = container["args"].to_string();
    assert!(
        args.contains("\"-v=4\"") && args.contains("\"--logging-format=json\""),
        "{args}"
    );
    assert!(
        container["env"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "WASMSCHED_LOG", "value": "wasmsched=debug"})),
        "{}",
        container["env"]
    );
    // Merged into the defaults key by key.
    assert_eq!(
        container["securityContext"]["readOnlyRootFilesystem"],
        false
    );
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(pod["securityContext"]["runAsUser"], 1000);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert!(pod["topologySpreadConstraints"].is_null(), "{pod}");
    assert_eq!(pod["priorityClassName"], "high");
    assert_eq!(pod["nodeSelector"], json!({"pool": "system"}));
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "dedicated", "operator": "Exists"}])
    );

    // The Prometheus Operator's kinds with every part on: the labels given,
    // the job the alerts select, and the kustomize component's rules.
    let mut all_args = every_part.to_vec();
    all_args.extend_from_slice(&["-f", values]);
    let all = template(chart, &all_args);
    let monitor = of_kind(&all, "ServiceMonitor");
    let rule = of_kind(&all, "PrometheusRule");
    assert_eq!((monitor.len(), rule.len()), (1, 1));
    for o in [monitor[0], rule[0]] {
        assert_eq!(o["metadata"]["labels"]["release"], "kps", "{o}");
        assert_eq!(
            o["metadata"]["labels"]["app.kubernetes.io/name"],
            "wasmsched"
        );
    }
    assert_eq!(monitor[0]["spec"]["jobLabel"], "app.kubernetes.io/name");
    let service = of_kind(&all, "Service")[0];
    assert_eq!(
        service["metadata"]["labels"]["app.kubernetes.io/name"],
        "wasmsched"
    );
    let component: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo().join("deploy/components/monitoring/prometheusrule.yaml"))
            .unwrap(),
    )
    .unwrap();
    assert!(
        rule[0]["spec"] == component["spec"],
        "the chart's rules differ from deploy/components/monitoring/prometheusrule.yaml's"
    );
    assert!(rule[0]["spec"]
        .to_string()
        .contains("job=\\\"wasmsched\\\""));

    // kustomize: the base has the budget, as the chart's, and no
    // Prometheus Operator kind; the monitoring component adds both, with
    // the job the alerts select.
    let kustomize = |dir: &Path| {
        let (ok, out) = kubectl(&["kustomize", dir.to_str().unwrap()]);
        assert!(ok, "kubectl kustomize {}: {out}", dir.display());
        objects(&out)
    };
    let base = kustomize(&repo().join("deploy"));
    let pdb = of_kind(&base, "PodDisruptionBudget");
    assert_eq!(pdb.len(), 1);
    assert_eq!(pdb[0]["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb[0]["spec"]["selector"],
        of_kind(&base, "Deployment")[0]["spec"]["selector"]
    );
    assert!(
        base.iter().all(|o| !o["apiVersion"]
            .as_str()
            .unwrap()
            .starts_with("monitoring.coreos.com")),
        "the base has a Prometheus Operator object"
    );
    let monitored = kustomize(&deploy_with_components(tmp.path(), &["monitoring"]));
    let monitor = of_kind(&monitored, "ServiceMonitor");
    let rule = of_kind(&monitored, "PrometheusRule");
    assert_eq!((monitor.len(), rule.len()), (1, 1));
    assert_eq!(monitor[0]["metadata"]["namespace"], NS);
    assert_eq!(monitor[0]["spec"]["jobLabel"], "app.kubernetes.io/name");
    assert_eq!(
        of_kind(&monitored, "Service")[0]["metadata"]["labels"]["app.kubernetes.io/name"],
        "wasmsched"
    );
    assert_eq!(rule[0]["spec"], component["spec"]);
    assert_eq!(monitored.len(), base.len() + 2);
}
