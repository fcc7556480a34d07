//! Hostile input: files that would exhaust memory or time, directory
//! walks that would never end, values the API server refuses, and names
//! that would inject lines or escape sequences into the terminal. Each is
//! refused at a cap with one line naming the file and the cause, skipped
//! with a warning, or printed escaped. Inputs are small: the caps, not
//! the clock, decide.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1 as k8s;
use serde_json::{json, Value};

use common::*;
use wasmsched::input::Limits;
use wasmsched::model::{Node, Pod};
use wasmsched::simulate::{Report, UnschedulablePod};
use wasmsched::{config, manifest, output};

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn native_config_file() -> String {
    s(&fixtures().join("native-config.yaml"))
}

fn simulate(paths: &[&Path]) -> Output {
    let mut args = vec!["simulate".to_string()];
    args.extend(paths.iter().map(|p| s(p)));
    args.extend(["--config".into(), native_config_file(), "--all-pods".into()]);
    wasmsched(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Like [`wasmsched`], but a run that blocks (on a FIFO, say) is killed
/// and fails the test rather than hanging it. A liveness guard, not a
/// timing check: a correct run ends in well under a second.
fn wasmsched_unless_blocked(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(args)
        .env_remove("WASMSCHED_LOG")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("wasmsched {args:?} blocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    Output {
        success: o.status.success(),
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

fn node_yaml(name: &str) -> String {
    format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nstatus: {{allocatable: {{cpu: \"4\", pods: \"10\"}}}}\n")
}

/// A Node and a pending Pod: something for `simulate` to schedule.
fn cluster_yaml() -> String {
    format!(
        "{}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: default}}\n\
         spec: {{schedulerName: gpu-scheduler, containers: [{{name: c, image: x}}]}}\n",
        node_yaml("n1")
    )
}

// ------------------------------------------------------- files and walks

#[test]
fn alias_bomb_in_a_real_field_is_refused_at_the_cap() {
    // 200 KiB of file; written out, 4000 copies of a 64 KiB string (250
    // MiB). Before the cap: gigabytes and minutes.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bomb.yaml");
    let big = "x".repeat(64 << 10);
    let uses = vec!["*s"; 4000].join(", ");
    std::fs::write(
        &f,
        format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    a: &s \"{big}\"\nspec:\n  containers:\n  - name: main\n    image: x\n    args: [{uses}]\n"),
    )
    .unwrap();
    let line = assert_one_line_error(
        &simulate(&[&f]),
        &[
            &format!("error: {}: document 1: ", f.display()),
            "aliases expand the document past the limit of 128 MiB on one file",
            "(the alias is at line 11 column ",
        ],
    );
    assert!(!line.contains("not valid YAML"), "{line}");
}

#[test]
fn alias_bomb_of_many_small_nodes_is_refused_at_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("lol.yaml");
    let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..9 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    text.push_str(
        "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: main, image: x, args: *a8}]}\n",
    );
    std::fs::write(&f, text).unwrap();
    let e = manifest::load(std::slice::from_ref(&f)).unwrap_err();
    assert_eq!(e.location, "document 1: ");
    assert!(
        e.cause
            .starts_with("aliases expand past the limit of 1000000 YAML nodes at line "),
        "{e}"
    );
}

#[test]
fn deep_nesting_is_refused_at_the_cap() {
    // 100,000 levels: before the cap, over a minute to refuse.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("deep.yaml");
    let depth = 100_000;
    std::fs::write(
        &f,
        format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n  labels: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        ),
    )
    .unwrap();
    assert_one_line_error(
        &simulate(&[&f]),
        &[&format!(
            "error: {}: document 1: nested deeper than the limit of 128 levels at line 5 column ",
            f.display()
        )],
    );
    // Block style too.
    std::fs::write(&f, format!("kind: Node\nx:\n{}y\n", "- ".repeat(depth))).unwrap();
    assert_one_line_error(
        &simulate(&[&f]),
        &["document 1: nested deeper than the limit of 128 levels at line 3 column "],
    );
}

#[test]
fn file_over_the_size_limit_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("big.yaml");
    // Sparse: 200 MiB that take no disk and no time to make.
    std::fs::File::create(&f)
        .unwrap()
        .set_len(200 << 20)
        .unwrap();
    let line = assert_one_line_error(&simulate(&[&f]), &[]);
    assert_eq!(
        line,
        format!(
            "error: {}: larger than the limit of 128 MiB on one file",
            f.display()
        )
    );
    // The configuration is read within the same limit.
    let o = wasmsched(&["simulate", &s(&f), "--config", &s(&f)]);
    assert_one_line_error(
        &o,
        &[&format!(
            "error: config {}: larger than the limit of 128 MiB on one file",
            f.display()
        )],
    );
}

#[test]
fn input_over_the_total_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for i in 0..3 {
        let p = dir.path().join(format!("{i}.yaml"));
        let padding = format!("# {}\n", "-".repeat(2000));
        std::fs::write(&p, format!("{padding}{}", node_yaml(&format!("n{i}")))).unwrap();
        paths.push(p);
    }
    let limits = Limits {
        file_bytes: 4 << 10,
        total_bytes: 6 << 10,
        ..Limits::DEFAULT
    };
    let e = manifest::load_within(&paths, &limits).unwrap_err();
    assert_eq!(e.file, s(&paths[2]));
    assert_eq!(
        e.cause,
        "the input files together are larger than the limit of 6 KiB"
    );
    assert!(manifest::load_within(&paths[..2], &limits).is_ok());
}

#[test]
fn fifo_in_a_manifest_directory_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nodes.yaml"), cluster_yaml()).unwrap();
    let fifo = dir.path().join("stuck.yaml");
    mkfifo(&fifo);
    // Before: the walk opened the FIFO and waited for a writer forever.
    let o = wasmsched_unless_blocked(&[
        "simulate",
        &s(dir.path()),
        "--config",
        &native_config_file(),
    ]);
    assert!(o.success, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "{}: skipped: a FIFO, not a regular file",
            fifo.display()
        )),
        "{}",
        o.stderr
    );
}

#[test]
fn fifo_named_on_the_command_line_is_read() {
    // `simulate <(kubectl get nodes -o yaml)` passes a pipe.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, node_yaml("piped")).unwrap())
    };
    let m = manifest::load(std::slice::from_ref(&fifo)).unwrap();
    writer.join().unwrap();
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(m.nodes[0].name, "piped");
}

#[test]
fn symlink_loop_in_a_manifest_directory_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cluster");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("sub").join("nodes.yaml"), cluster_yaml()).unwrap();
    let link = root.join("sub").join("back");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    // Before: the walk went round the loop until the kernel refused the
    // path, loading nodes.yaml again on every turn.
    let o = wasmsched_unless_blocked(&["simulate", &s(&root), "--config", &native_config_file()]);
    assert!(o.success, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "{}: skipped: a directory already searched (a symlink loop, or a second link to it)",
            link.display()
        )),
        "{}",
        o.stderr
    );
    let m = manifest::load(&[root]).unwrap();
    assert_eq!(m.nodes.len(), 1);
}

#[test]
fn configuration_alias_bomb_is_refused() {
    let big = "x".repeat(64 << 10);
    let uses = vec!["*s"; 4000].join(", ");
    let text = format!("profiles:\n- schedulerName: &s \"{big}\"\n  pluginConfig: [{{name: NodeResourcesFit, args: {{ignoredResources: [{uses}]}}}}]\n");
    let e = config::parse(&text).unwrap_err();
    assert_eq!(e.field, "config");
    assert!(
        e.cause
            .starts_with("aliases expand the document past the limit of 128 MiB on one file"),
        "{e}"
    );
}

// ------------------------------------------------------ values

fn pod_error(p: Value) -> String {
    let p: k8s::Pod = serde_json::from_value(p).unwrap();
    let e = Pod::from_k8s(&p).unwrap_err();
    format!("{}: {}", e.field, e.cause)
}

fn node_error(n: Value) -> String {
    let n: k8s::Node = serde_json::from_value(n).unwrap();
    let e = Node::from_k8s(&n).unwrap_err();
    format!("{}: {}", e.field, e.cause)
}

#[test]
fn negative_overhead_is_refused() {
    // It would take 49 CPUs off a 50-CPU pod's request: the pod would
    // fit on a 1-CPU node.
    let p = PodB::new("big")
        .cpu("50")
        .spec("overhead", json!({"cpu": "-49"}));
    assert_eq!(
        pod_error(p.0),
        "spec.overhead.cpu: must not be negative, got \"-49\""
    );
}

#[test]
fn negative_requests_limits_and_allocatable_are_refused() {
    assert_eq!(
        pod_error(PodB::new("p").req(&[("memory", "-1Gi")]).0),
        "spec.containers[0].resources.requests.memory: must not be negative, got \"-1Gi\""
    );
    let mut p = PodB::new("p").0;
    p["spec"]["initContainers"] =
        json!([{"name": "init", "image": "x", "resources": {"limits": {"cpu": "-1"}}}]);
    assert_eq!(
        pod_error(p),
        "spec.initContainers[0].resources.limits.cpu: must not be negative, got \"-1\""
    );
    assert_eq!(
        node_error(NodeB::new("n").alloc(&[("cpu", "-4")]).0),
        "status.allocatable.cpu: must not be negative, got \"-4\""
    );
    let mut n = NodeB::new("n").0;
    n["status"]["capacity"] = json!({"nvidia.com/gpu": "-8"});
    assert_eq!(
        node_error(n),
        "status.capacity.nvidia.com/gpu: must not be negative, got \"-8\""
    );
}

#[test]
fn a_node_with_allocatable_pods_zero_takes_no_pod() {
    let scheduler = build(&native_config(), 1);
    let full = NodeB::new("full").alloc(&[("pods", "0")]).build();
    let r = common::simulate(&scheduler, vec![full], vec![PodB::new("p").build()]);
    assert_eq!(
        failures(&r)["default/p"],
        "0/1 nodes are available: 1 Too many pods. preemption: \
         0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    // A node that states no pod capacity gets kubelet's default (110).
    let mut unstated = NodeB::new("unstated");
    unstated.0["status"]["allocatable"]
        .as_object_mut()
        .unwrap()
        .remove("pods");
    let r = common::simulate(
        &scheduler,
        vec![unstated.build()],
        vec![PodB::new("p").build()],
    );
    assert_eq!(placements(&r)["default/p"], "unstated");
}

#[test]
fn host_ports_outside_1_to_65535_are_refused() {
    for (port, at) in [(70000, "hostPort"), (-1, "hostPort")] {
        let p = PodB::new("p").spec(
            "containers",
            json!([{"name": "main", "image": "x", "ports": [{"containerPort": 80, "hostPort": port}]}]),
        );
        assert_eq!(
            pod_error(p.0),
            format!("spec.containers[0].ports[0].{at}: must be between 1 and 65535, inclusive, got {port}")
        );
    }
    let p = PodB::new("p").spec(
        "containers",
        json!([{"name": "main", "image": "x", "ports": [{"containerPort": 0}]}]),
    );
    assert_eq!(
        pod_error(p.0),
        "spec.containers[0].ports[0].containerPort: must be between 1 and 65535, inclusive, got 0"
    );
}

#[test]
fn min_domains_must_be_positive_and_only_with_do_not_schedule() {
    let spread = |min: i32, when: &str| {
        PodB::new("p")
            .spec(
                "topologySpreadConstraints",
                json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": when, "minDomains": min}]),
            )
            .0
    };
    assert_eq!(
        pod_error(spread(-1, "DoNotSchedule")),
        "spec.topologySpreadConstraints[0].minDomains: must be greater than zero, got -1"
    );
    assert_eq!(
        pod_error(spread(2, "ScheduleAnyway")),
        "spec.topologySpreadConstraints[0].minDomains: can only be used with whenUnsatisfiable DoNotSchedule, not \"ScheduleAnyway\""
    );
    let p: k8s::Pod = serde_json::from_value(spread(2, "DoNotSchedule")).unwrap();
    assert!(Pod::from_k8s(&p).is_ok());
}

#[test]
fn names_label_keys_and_values_are_checked_as_the_api_server_does() {
    assert!(pod_error(PodB::new("p").labels(&[("bad key", "v")]).0)
        .starts_with("metadata.labels: \"bad key\" is not a qualified name"));
    assert!(pod_error(PodB::new("p").labels(&[("app", "-web")]).0)
        .starts_with("metadata.labels.app: \"-web\" is not a valid label value"));
    assert!(
        pod_error(PodB::new("p").node_selector(&[("example.com/", "x")]).0)
            .starts_with("spec.nodeSelector: \"example.com/\" is not a qualified name")
    );
    assert!(pod_error(PodB::new("Web_1").0)
        .starts_with("metadata.name: \"Web_1\" is not a lowercase RFC 1123 subdomain"));
    assert!(pod_error(PodB::new("p").ns("a.b").0)
        .starts_with("metadata.namespace: \"a.b\" is not a lowercase RFC 1123 label"));
    assert!(node_error(NodeB::new("n").label("k", &"v".repeat(64)).0)
        .starts_with("metadata.labels.k: \"vvvvv"));
    assert!(
        node_error(NodeB::new("n").taint("bad/key/x", "v", "NoSchedule").0)
            .starts_with("spec.taints[0].key: \"bad/key/x\" is not a qualified name")
    );
    // Valid keys with prefixes and the longest values are accepted.
    NodeB::new("n")
        .label("example.com/Some_Key.1", &"v".repeat(63))
        .build();
}

#[test]
fn parallelism_beyond_the_cap_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("scheduler.yaml");
    let run = |text: &str| {
        std::fs::write(&c, text).unwrap();
        wasmsched(&[
            "simulate",
            &s(&fixtures().join("one-node.yaml")),
            "--config",
            &s(&c),
        ])
    };
    let line = assert_one_line_error(&run("parallelism: 100000\n"), &[]);
    assert_eq!(
        line,
        format!(
            "error: config {}: parallelism: must be at most 1024, got 100000",
            c.display()
        )
    );
    // Before: a thread pool of a trillion threads, aborting with a
    // backtrace.
    let line = assert_one_line_error(&run("parallelism: 1e12\n"), &[]);
    assert_eq!(
        line,
        format!("error: config {}: parallelism: invalid value \"1e12\", expected a non-negative integer at line 1 column 14", c.display())
    );
    assert_one_line_error(
        &run("parallelism: 1000000000000\n"),
        &["parallelism: must be at most 1024, got 1000000000000"],
    );
    let e = config::parse("bindConcurrency: 4294967296\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "bindConcurrency: must be at most 1024, got 4294967296"
    );
}

// ------------------------------------------------------ output injection

#[test]
fn a_name_with_a_newline_or_escape_sequence_prints_escaped_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("pods.yaml");
    for (name, shown) in [
        ("web\nerror: all good", "web\\nerror: all good"),
        ("web\u{1b}[2J\u{0}", "web\\u{1b}[2J\\u{0}"),
    ] {
        std::fs::write(
            &f,
            serde_json::to_string(&json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name}, "spec": {"containers": [{"name": "main", "image": "x"}]}}))
            .unwrap(),
        )
        .unwrap();
        let line = assert_one_line_error(&simulate(&[&f]), &[]);
        assert!(
            line.starts_with(&format!(
                "error: {}: document 1 (Pod {shown}): metadata.name: ",
                f.display()
            )),
            "{line}"
        );
        assert!(!line.chars().any(char::is_control), "{line:?}");
    }
}

#[test]
fn tables_escape_what_they_print() {
    let report = Report {
        unschedulable: vec![UnschedulablePod {
            namespace: "default".into(),
            pod: "p\u{1b}]0;title\u{7}".into(),
            message: "0/1 nodes are available: 1 plugin says\nSUCCESS".into(),
            profile: "s".into(),
        }],
        ..Report::default()
    };
    let table = output::table(&report);
    assert!(
        table.contains(
            "  default/p\\u{1b}]0;title\\u{7}: 0/1 nodes are available: 1 plugin says\\nSUCCESS\n"
        ),
        "{table}"
    );
    assert!(
        !table.chars().any(|c| c.is_control() && c != '\n'),
        "{table:?}"
    );
    // Valid names print as they are.
    let plain = Report {
        unschedulable: vec![UnschedulablePod {
            namespace: "shop".into(),
            pod: "web-1.v2".into(),
            message: "0/1 nodes are available: 1 Too many pods.".into(),
            profile: "s".into(),
        }],
        ..Report::default()
    };
    assert!(output::table(&plain)
        .contains("  shop/web-1.v2: 0/1 nodes are available: 1 Too many pods.\n"));
}

#[test]
fn log_lines_escape_names_from_input() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nodes.yaml"), cluster_yaml()).unwrap();
    let fifo: PathBuf = dir.path().join("evil\n\u{1b}[31mWARN forged.yaml");
    mkfifo(&fifo);
    let o = wasmsched_unless_blocked(&[
        "simulate",
        &s(dir.path()),
        "--config",
        &native_config_file(),
    ]);
    assert!(o.success, "{}", o.stderr);
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{:?}", o.stderr);
    assert!(
        lines[0].contains("evil\\n\\u{1b}[31mWARN forged.yaml: skipped: a FIFO"),
        "{:?}",
        lines[0]
    );
}
