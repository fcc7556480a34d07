//! Helpers shared by the integration tests: Nodes and Pods built as
//! Kubernetes JSON and converted by the model exactly as manifests are,
//! configurations, simulation runs, and a runner for the `wasmsched`
//! binary.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1 as k8s;
use serde_json::{json, Value};

use wasmsched::config::{self, ConfigFile, Scheduler};
use wasmsched::manifest::Manifests;
use wasmsched::model::{Node, Pod};
use wasmsched::simulate::{self, Report};

/// The scheduler name of the profile [`native_config`] builds.
pub const SCHED: &str = "test-scheduler";

fn kv(pairs: &[(&str, &str)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    )
}

/// A node under construction, as Kubernetes JSON.
#[derive(Clone)]
pub struct NodeB(pub Value);

impl NodeB {
    /// Node `name` labelled with its hostname, allocatable 4 cpu, 8Gi
    /// memory, 110 pods.
    pub fn new(name: &str) -> Self {
        Self(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
        }))
    }

    pub fn alloc(mut self, pairs: &[(&str, &str)]) -> Self {
        for (k, v) in pairs {
            self.0["status"]["allocatable"][*k] = json!(v);
        }
        self
    }

    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0["metadata"]["labels"][k] = json!(v);
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        if self.0["spec"]["taints"].is_null() {
            self.0["spec"]["taints"] = json!([]);
        }
        self.0["spec"]["taints"]
            .as_array_mut()
            .unwrap()
            .push(json!({"key": key, "value": value, "effect": effect}));
        self
    }

    pub fn cordon(mut self) -> Self {
        self.0["spec"]["unschedulable"] = json!(true);
        self
    }

    pub fn build(&self) -> Node {
        let n: k8s::Node =
            serde_json::from_value(self.0.clone()).expect("test node is a valid k8s Node");
        Node::from_k8s(&n).expect("test node converts")
    }
}

/// A pod under construction, as Kubernetes JSON.
#[derive(Clone)]
pub struct PodB(pub Value);

impl PodB {
    /// Pending pod `name` in namespace `default` for [`SCHED`], one
    /// container requesting nothing, created at 2026-01-01T00:00:00Z.
    pub fn new(name: &str) -> Self {
        Self(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"schedulerName": SCHED, "containers": [{"name": "main", "image": "x"}]}
        }))
    }

    pub fn ns(mut self, ns: &str) -> Self {
        self.0["metadata"]["namespace"] = json!(ns);
        self
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.0["metadata"]["uid"] = json!(uid);
        self
    }

    pub fn labels(mut self, pairs: &[(&str, &str)]) -> Self {
        self.0["metadata"]["labels"] = kv(pairs);
        self
    }

    /// Requests of the (single) container.
    pub fn req(mut self, pairs: &[(&str, &str)]) -> Self {
        self.0["spec"]["containers"][0]["resources"] = json!({"requests": kv(pairs)});
        self
    }

    pub fn cpu(self, cpu: &str) -> Self {
        self.req(&[("cpu", cpu)])
    }

    pub fn priority(mut self, p: i32) -> Self {
        self.0["spec"]["priority"] = json!(p);
        self
    }

    /// `creationTimestamp`, RFC 3339.
    pub fn created(mut self, ts: &str) -> Self {
        self.0["metadata"]["creationTimestamp"] = json!(ts);
        self
    }

    /// `creationTimestamp` at second `s` of 2026-01-01T00:00.
    pub fn created_at(self, s: u32) -> Self {
        self.created(&format!("2026-01-01T00:00:{s:02}Z"))
    }

    pub fn scheduler(mut self, name: &str) -> Self {
        self.0["spec"]["schedulerName"] = json!(name);
        self
    }

    pub fn node_selector(mut self, pairs: &[(&str, &str)]) -> Self {
        self.0["spec"]["nodeSelector"] = kv(pairs);
        self
    }

    pub fn bound_to(mut self, node: &str) -> Self {
        self.0["spec"]["nodeName"] = json!(node);
        self.0["status"] = json!({"phase": "Running"});
        self
    }

    pub fn spec(mut self, key: &str, value: Value) -> Self {
        self.0["spec"][key] = value;
        self
    }

    /// Required pod affinity to pods labelled `key=value` on the same
    /// `topology_key`.
    pub fn requires_affinity(self, key: &str, value: &str, topology_key: &str) -> Self {
        self.spec(
            "affinity",
            json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topology_key}
            ]}}),
        )
    }

    pub fn build(&self) -> Pod {
        let p: k8s::Pod =
            serde_json::from_value(self.0.clone()).expect("test pod is a valid k8s Pod");
        Pod::from_k8s(&p).expect("test pod converts")
    }
}

/// `n` nodes `node-000`, `node-001`, ... with the same allocatable.
pub fn identical_nodes(n: usize, cpu: &str, memory: &str) -> Vec<Node> {
    (0..n)
        .map(|i| {
            NodeB::new(&format!("node-{i:03}"))
                .alloc(&[("cpu", cpu), ("memory", memory)])
                .build()
        })
        .collect()
}

/// A configuration of one profile, [`SCHED`], with upstream's default
/// native plugins and none of the built-in wasm plugins (they take
/// seconds to compile in a debug build), two workers, and `extra` YAML
/// appended to the profile (indented by four spaces by the caller).
pub fn native_config_with(profile_extra: &str) -> ConfigFile {
    let text = format!(
        "parallelism: 2\nprofiles:\n- schedulerName: {SCHED}\n  plugins:\n    multiPoint:\n      disabled: [{{name: GpuTopology}}, {{name: NetworkLocality}}]\n{profile_extra}"
    );
    config::parse(&text).unwrap_or_else(|e| panic!("test config parses: {e}\n{text}"))
}

pub fn native_config() -> ConfigFile {
    native_config_with("")
}

pub fn build(file: &ConfigFile, seed: u64) -> Scheduler {
    config::build(file, Path::new("."), seed).unwrap_or_else(|e| panic!("config builds: {e}"))
}

pub fn manifests(nodes: Vec<Node>, pods: Vec<Pod>) -> Manifests {
    Manifests {
        nodes,
        pods,
        ..Default::default()
    }
}

/// Simulates `pods` on `nodes` with `scheduler`.
pub fn simulate(scheduler: &Scheduler, nodes: Vec<Node>, pods: Vec<Pod>) -> Report {
    simulate::run(
        scheduler,
        manifests(nodes, pods),
        &simulate::Options::default(),
    )
    .expect("simulation runs")
}

/// `namespace/pod` -> node of every scheduled pod.
pub fn placements(r: &Report) -> BTreeMap<String, String> {
    r.scheduled
        .iter()
        .map(|s| (format!("{}/{}", s.namespace, s.pod), s.node.clone()))
        .collect()
}

/// `namespace/pod` in the order they were scheduled.
pub fn scheduled_order(r: &Report) -> Vec<String> {
    r.scheduled
        .iter()
        .map(|s| format!("{}/{}", s.namespace, s.pod))
        .collect()
}

/// `namespace/pod` -> FitError message of every unschedulable pod.
pub fn failures(r: &Report) -> BTreeMap<String, String> {
    r.unschedulable
        .iter()
        .map(|u| (format!("{}/{}", u.namespace, u.pod), u.message.clone()))
        .collect()
}

/// Writes nodes and pods (Kubernetes JSON) as one multi-document YAML file.
pub fn write_manifest(path: &Path, objects: &[Value]) {
    let docs: Vec<String> = objects
        .iter()
        .map(|o| serde_saphyr::to_string(o).unwrap())
        .collect();
    std::fs::write(path, docs.join("---\n")).unwrap();
}

/// The repository root (parent of `host/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn gpu_example() -> PathBuf {
    repo_root().join("examples/gpu-cluster")
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn chaos_wasm() -> PathBuf {
    Path::new(env!("WASMSCHED_TEST_PLUGIN_DIR")).join("chaos.wasm")
}

/// What a run of the binary produced.
#[derive(Debug)]
pub struct Output {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `wasmsched ARGS` (in `cwd` when given) with logging at its
/// default level, whatever the caller's environment says.
pub fn wasmsched_in(cwd: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = wasmsched_command(args);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    cmd.output().expect("running wasmsched").into()
}

/// The command `wasmsched ARGS` with logging at its default level,
/// whatever the caller's environment says (for callers that wire its
/// standard streams themselves).
pub fn wasmsched_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmsched"));
    cmd.args(args)
        .env_remove("WASMSCHED_LOG")
        .env_remove("RUST_LOG");
    cmd
}

impl From<std::process::Output> for Output {
    fn from(o: std::process::Output) -> Self {
        Output {
            success: o.status.success(),
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

pub fn wasmsched(args: &[&str]) -> Output {
    wasmsched_in(None, args)
}

/// Asserts the run failed with exactly one non-empty stderr line that
/// starts with `error:` and contains every one of `needles`; returns it.
pub fn assert_one_line_error(o: &Output, needles: &[&str]) -> String {
    assert!(
        !o.success,
        "expected failure, got success\nstdout:\n{}\nstderr:\n{}",
        o.stdout, o.stderr
    );
    assert_eq!(o.code, Some(1), "exit code; stderr:\n{}", o.stderr);
    let lines: Vec<&str> = o.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one stderr line, got:\n{}",
        o.stderr
    );
    let line = lines[0];
    assert!(line.starts_with("error: "), "{line}");
    for n in needles {
        assert!(
            line.contains(n),
            "stderr line does not contain {n:?}:\n{line}"
        );
    }
    assert!(
        o.stdout.is_empty(),
        "nothing on stdout on error, got:\n{}",
        o.stdout
    );
    line.to_string()
}

/// `cargo package --offline --no-verify` of the Rust SDK and the crate it
/// depends on (what `cargo publish` uploads), into a target directory of
/// the tests; returns the directory the two `.crate` files were unpacked
/// in (`wasmsched-shared-VERSION/`, `wasmsched-plugin-sdk-VERSION/`).
pub fn package_sdk(name: &str) -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let out = Command::new(env!("CARGO"))
        .current_dir(repo_root())
        .args([
            "package",
            "--offline",
            "--no-verify",
            "--allow-dirty",
            "-p",
            "wasmsched-shared",
            "-p",
            "wasmsched-plugin-sdk",
            "--target-dir",
        ])
        .arg(&target)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("running cargo package");
    assert!(
        out.status.success(),
        "cargo package failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unpacked = target.join("unpacked");
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    for krate in ["wasmsched-shared", "wasmsched-plugin-sdk"] {
        let file = target.join(format!("package/{krate}-{version}.crate"));
        let ok = Command::new("tar")
            .arg("-xzf")
            .arg(&file)
            .arg("-C")
            .arg(&unpacked)
            .status()
            .expect("running tar");
        assert!(ok.success(), "unpacking {}", file.display());
    }
    unpacked
}
