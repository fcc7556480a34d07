//! Throughput on the real API server: wasmsched against kube-scheduler
//! (built by `scripts/test-servers` from the same release as the API
//! server), same cluster, same pods, same client QPS. Ignored in the test
//! suite; run by `scripts/bench-kube`, which prints the tables BENCHMARKS.md
//! keeps. `BENCH_WORKLOAD` names one of upstream's scheduler_perf workloads
//! (`wasmsched bench --workload`'s shapes, the same objects created on the
//! server); without it the cluster is BENCHMARKS.md's main one (32-cpu
//! nodes, plain pods); `BENCH_WORKLOAD=dra` is upstream's DRA workload
//! (`bench_dra`).

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::Client;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};
use wasmsched::bench::workloads::{self, Workload};

use crate::bench_dra;
use crate::env::*;

const NS: &str = "bench";
const SCHED: &str = "bench-scheduler";

fn size(var: &str, default: usize) -> usize {
    number(var).unwrap_or(default)
}

/// A number the environment sets for the benchmark, if set; a value that
/// is not one stops the run with one line naming the variable.
fn number<T: std::str::FromStr>(var: &str) -> Option<T> {
    let v = std::env::var(var).ok()?;
    match v.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{var}={v:?}: not a number"),
    }
}

/// What the benchmark creates: the nodes, the pods bound beforehand
/// (upstream's `initPods`, not measured) and the pending pods measured, of
/// which `expected` can be bound.
struct Shape {
    nodes: Vec<Value>,
    init: Vec<Value>,
    pending: Vec<Value>,
    expected: usize,
}

/// BENCHMARKS.md's main cluster: nodes of 32 cpu / 128Gi / 110 pods in
/// three zones, pods of 100m / 128Mi with 20 app labels.
fn plain_shape(nodes: usize, pods: usize) -> Shape {
    let nodes = (0..nodes)
        .map(|i| {
            let zone = ["a", "b", "c"][i % 3];
            json!({
                "metadata": {"name": format!("bench-{i:05}"), "labels": {
                    "kubernetes.io/hostname": format!("bench-{i:05}"),
                    "topology.kubernetes.io/zone": zone}},
                "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}
            })
        })
        .collect();
    let pending = (0..pods)
        .map(|i| {
            json!({
                "metadata": {"name": format!("p-{i:06}"), "namespace": NS,
                    "labels": {"app": format!("app-{}", i % 20)}},
                "spec": {"schedulerName": SCHED, "containers": [{"name": "c", "image": "x",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
            })
        })
        .collect();
    Shape {
        nodes,
        init: Vec::new(),
        pending,
        expected: pods,
    }
}

/// `workload`'s cluster as `wasmsched bench --workload` builds it, as API
/// objects: the same nodes, the init pods bound to the same nodes, the same
/// measured pods (under this benchmark's scheduler name).
fn workload_shape(workload: Workload, nodes: usize, pods: usize) -> Shape {
    assert!(
        !workload.churns() && workload.upstream_threshold().is_some(),
        "BENCH_WORKLOAD={}: not one of the real-server workloads (scheduling-basic, node-affinity, \
         preferred-affinity, preferred-anti-affinity, required-affinity, extended-resources, unschedulable)",
        workload.name()
    );
    let mut rng = StdRng::seed_from_u64(1);
    let node_objects: Vec<Value> = (0..nodes)
        .map(|i| workloads::node_json(workload, i))
        .collect();
    let n = nodes.max(1) as u64;
    let init = (0..workload.init_pods(nodes))
        .map(|i| {
            let mut p = workloads::pod_json(workload, &format!("init-{i:05}"), i, &mut rng);
            let at = ((i as u64 * 7919) % n) as usize;
            p["spec"]["nodeName"] = node_objects[at]["metadata"]["name"].clone();
            p
        })
        .collect();
    let measured = workload.measured_pods(pods);
    let pending = (0..measured)
        .map(|i| {
            let mut p = workloads::pod_json(workload, &format!("pod-{i:05}"), i, &mut rng);
            p["spec"]["schedulerName"] = json!(SCHED);
            p
        })
        .collect();
    let expected = if workload == Workload::Unschedulable {
        // One pod in ten asks for 1000 cpu (workloads::pod_json).
        measured - measured / 10
    } else {
        measured
    };
    Shape {
        nodes: node_objects,
        init,
        pending,
        expected,
    }
}

async fn create_all<K>(api: &Api<K>, objects: &[Value])
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    futures::stream::iter(objects)
        .for_each_concurrent(32, |o| {
            let api = api.clone();
            async move {
                let object: K = serde_json::from_value(o.clone()).unwrap();
                api.create(&PostParams::default(), &object).await.unwrap();
            }
        })
        .await;
}

/// Upstream's `SchedulingWithResourceClaimTemplate`: `nodes` nodes of 10
/// devices, `init` of them held by claims allocated beforehand
/// (`bench_dra::create_devices`), `pods` pods with a claim template.
fn dra_shape(nodes: usize, pods: usize) -> Shape {
    Shape {
        nodes: (0..nodes).map(bench_dra::node).collect(),
        init: Vec::new(),
        pending: (0..pods)
            .map(|i| bench_dra::pod(&format!("pod-{i:05}"), NS, SCHED))
            .collect(),
        expected: pods,
    }
}

/// Creates the shape's nodes, for DRA its devices and `init_claims`
/// allocated claims, its init pods (bound) and its pending pods, and for
/// DRA waits for kube-controller-manager's claims of the pending pods.
async fn create(client: &Client, shape: &Shape, dra: Option<usize>) {
    create_all(&Api::<Node>::all(client.clone()), &shape.nodes).await;
    if let Some(init_claims) = dra {
        bench_dra::clean(client, NS).await;
        bench_dra::create_devices(client, NS, shape.nodes.len(), init_claims).await;
    }
    let pods = Api::<Pod>::namespaced(client.clone(), NS);
    create_all(&pods, &shape.init).await;
    create_all(&pods, &shape.pending).await;
    if dra.is_some() {
        bench_dra::wait_for_claims(client, NS, shape.pending.len()).await;
    }
}

/// Seconds from a scheduler's start until its first binding, and until
/// every pod is bound.
#[derive(serde::Serialize, serde::Deserialize)]
struct Timing {
    first: f64,
    all: f64,
    /// CPU seconds over the run: the API server with etcd, and the
    /// scheduler.
    server_cpu: f64,
    scheduler_cpu: f64,
}

/// CPU seconds (user + system) process `pid` has used, from
/// `/proc/<pid>/stat`; 0 when it cannot be read.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The fields after the command (which may hold spaces), from `state`.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    // In USER_HZ, 100 on every Linux architecture (the proc ABI's).
    ticks as f64 / 100.0
}

/// The least-squares line `y = slope * x + intercept` through `points`
/// (`None` for fewer than two distinct `x`): `(slope, intercept)`.
fn fit_line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (points.len() >= 2 && sxx > 1e-9).then(|| {
        let slope = sxy / sxx;
        (slope, my - slope * mx)
    })
}

/// CPU seconds the API server and etcd of the test servers have used.
fn server_cpu_seconds() -> f64 {
    ["apiserver.pid", "etcd.pid"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(env().servers.join(f)).ok())
        .filter_map(|p| p.trim().parse::<u32>().ok())
        .map(cpu_seconds)
        .sum()
}

/// Starts a scheduler on the prepared cluster and measures the time from
/// its start until its first binding and until every pod is bound.
/// Bindings are counted from a watch opened (and listed) before the start:
/// polling a list of 10000 pods would cost the API server, which shares
/// the machine with the scheduler measured, about as much as the
/// scheduler's own requests.
async fn measure(client: &Client, pods: usize, mut start: impl FnMut() -> Child) -> Timing {
    // Pods bound before the start are the init pods, which are not counted.
    let measured =
        |p: &Pod| p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()) == Some(SCHED);
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
    let mut bound = HashSet::new();
    loop {
        match events.next().await.expect("the watch ended").unwrap() {
            watcher::Event::InitDone => break,
            watcher::Event::InitApply(p) if is_bound(&p) && measured(&p) => {
                bound.insert(p.metadata.name.unwrap());
            }
            _ => {}
        }
    }
    assert!(
        bound.is_empty(),
        "pods were bound before the scheduler started"
    );
    let t0 = Instant::now();
    let server0 = server_cpu_seconds();
    let mut child = start();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut first = None;
    while bound.len() < pods {
        tokio::select! {
            event = events.next() => match event.expect("the watch ended") {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))
                    if is_bound(&p) && measured(&p) =>
                {
                    first.get_or_insert_with(|| t0.elapsed().as_secs_f64());
                    bound.insert(p.metadata.name.unwrap());
                }
                Ok(_) => {}
                Err(e) => eprintln!("watch: {e}"),
            },
            _ = tick.tick() => alive(&mut child, t0, 1800),
        }
    }
    finish(child, t0, server0, first)
}

/// Fails the bench when it ran over `limit` seconds or the scheduler
/// exited.
fn alive(child: &mut Child, t0: Instant, limit: u64) {
    assert!(t0.elapsed() < Duration::from_secs(limit), "bench timed out");
    if let Some(status) = child.try_wait().unwrap() {
        panic!("scheduler exited: {status}");
    }
}

/// Stops the scheduler started at `t0` and reads the run's CPU.
fn finish(mut child: Child, t0: Instant, server0: f64, first: Option<f64>) -> Timing {
    let all = t0.elapsed().as_secs_f64();
    let server_cpu = server_cpu_seconds() - server0;
    let scheduler_cpu = cpu_seconds(child.id());
    let _ = child.kill();
    let _ = child.wait();
    Timing {
        first: first.unwrap_or(all),
        all,
        server_cpu,
        scheduler_cpu,
    }
}

/// Upstream's steady state (`steadyState: true`): `in_flight` pods wait
/// at any time; each pod bound is deleted (as a pod whose node has no
/// kubelet must be: at once) and another with a claim template created.
/// Counts the bindings over `secs` seconds from the first; `all` is the
/// end of that window.
async fn measure_steady(
    client: &Client,
    secs: f64,
    mut start: impl FnMut() -> Child,
) -> (Timing, usize) {
    let measured =
        |p: &Pod| p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()) == Some(SCHED);
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut events = std::pin::pin!(watcher(api.clone(), watcher::Config::default()));
    loop {
        if let watcher::Event::InitDone = events.next().await.expect("the watch ended").unwrap() {
            break;
        }
    }
    let t0 = Instant::now();
    let server0 = server_cpu_seconds();
    let mut child = start();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let (mut first, mut bound, mut counted) = (None::<f64>, HashSet::new(), 0usize);
    loop {
        if first.is_some_and(|f| t0.elapsed().as_secs_f64() >= f + secs) {
            break;
        }
        tokio::select! {
            event = events.next() => match event.expect("the watch ended") {
                Ok(watcher::Event::Apply(p)) if is_bound(&p) && measured(&p) => {
                    let name = p.metadata.name.unwrap();
                    if !bound.insert(name.clone()) {
                        continue;
                    }
                    let at = *first.get_or_insert_with(|| t0.elapsed().as_secs_f64());
                    if t0.elapsed().as_secs_f64() < at + secs {
                        counted += 1;
                    }
                    let api = api.clone();
                    let next = bench_dra::pod(&format!("steady-{:06}", bound.len()), NS, SCHED);
                    tokio::spawn(async move {
                        let now = kube::api::DeleteParams {
                            grace_period_seconds: Some(0),
                            ..Default::default()
                        };
                        let _ = api.delete(&name, &now).await;
                        let pod: Pod = serde_json::from_value(next).unwrap();
                        api.create(&PostParams::default(), &pod).await.unwrap();
                    });
                }
                Ok(_) => {}
                Err(e) => eprintln!("watch: {e}"),
            },
            _ = tick.tick() => alive(&mut child, t0, 600),
        }
    }
    (finish(child, t0, server0, first), counted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: scripts/bench-kube"]
async fn bench_against_kube_scheduler() {
    let _g = serial();
    let nodes = size("BENCH_NODES", 500);
    let qps = size("BENCH_QPS", 500);
    let name = std::env::var("BENCH_WORKLOAD").ok();
    // DRA: 5000pods_500nodes, half of the devices held beforehand.
    let dra = (name.as_deref() == Some("dra")).then(|| size("BENCH_INIT_CLAIMS", nodes * 5));
    // DRA's steady state: BENCH_STEADY seconds of BENCH_PODS (10) pods
    // waiting at any time.
    let steady = number::<f64>("BENCH_STEADY");
    assert!(
        steady.is_none() || dra.is_some(),
        "BENCH_STEADY: upstream's steady state is a DRA workload (set BENCH_WORKLOAD=dra)"
    );
    if let Some(s) = steady {
        assert!(
            s.is_finite() && s > 0.0,
            "BENCH_STEADY={s}: a number of seconds, more than 0"
        );
    }
    let pods = size(
        "BENCH_PODS",
        match (dra, steady) {
            (Some(_), Some(_)) => 10,
            (Some(_), None) => nodes * 5,
            _ => 2000,
        },
    );
    let workload = name.filter(|_| dra.is_none()).map(|w| {
        <Workload as clap::ValueEnum>::from_str(&w, false)
            .unwrap_or_else(|e| panic!("BENCH_WORKLOAD={w}: {e} (or dra)"))
    });
    let shape = match (workload, dra) {
        (_, Some(_)) => dra_shape(nodes, pods),
        (Some(w), None) => workload_shape(w, nodes, pods),
        (None, None) => plain_shape(nodes, pods),
    };
    if dra.is_some() {
        controller_manager("resourceclaim-controller");
    }
    let version = std::env::var("WASMSCHED_TEST_KUBE_VERSION").unwrap_or_default();
    let client = client().await;
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = env().kubeconfig.to_str().unwrap().to_string();

    let kube_cfg = tmp.path().join("kube-scheduler.yaml");
    std::fs::write(
        &kube_cfg,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             clientConnection: {{kubeconfig: {kubeconfig}, qps: {qps}, burst: {burst}}}\n\
             leaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: {SCHED}\n",
            burst = qps * 2
        ),
    )
    .unwrap();
    // As deployed (deploy/config.yaml): compiled plugins kept in a cache
    // directory, warm as after any restart.
    let common = format!(
        "leaderElection: {{leaderElect: false}}\nclientConnection: {{qps: {qps}, burst: {burst}}}\n\
         pluginCacheDir: {cache}\n{parallelism}",
        burst = qps * 2,
        cache = tmp.path().join("plugin-cache").display(),
        parallelism = std::env::var("BENCH_PARALLELISM")
            .map(|p| format!("parallelism: {p}\n"))
            .unwrap_or_default(),
    );
    let core_cfg = tmp.path().join("wasmsched-core.yaml");
    std::fs::write(
        &core_cfg,
        format!(
            "{common}profiles:\n- schedulerName: {SCHED}\n  plugins:\n    multiPoint:\n      disabled:\n      \
             - {{name: GpuTopology}}\n      - {{name: NetworkLocality}}\n"
        ),
    )
    .unwrap();
    let wasm_cfg = tmp.path().join("wasmsched-wasm.yaml");
    std::fs::write(
        &wasm_cfg,
        format!("{common}profiles:\n- schedulerName: {SCHED}\n"),
    )
    .unwrap();
    // One warm-up compiles every component either configuration loads (the
    // core one disables two of the as-shipped one's plugins).
    let warm = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(["profiles", "--config"])
        .arg(&wasm_cfg)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(
        warm.success(),
        "wasmsched profiles --config {}",
        wasm_cfg.display()
    );

    // BENCH_ROWS=FILE: each row measured is added to FILE, and the table
    // holds every row in it (scripts/bench-kube runs each scheduler on
    // servers of its own, one invocation each).
    let rows_file = std::env::var_os("BENCH_ROWS").map(std::path::PathBuf::from);
    let mut rows = rows_file.as_deref().map(earlier_rows).unwrap_or_default();
    type Start = Box<dyn Fn() -> Child>;
    let runs: Vec<(String, Start)> = vec![
        (
            format!("kube-scheduler {version} (default plugins)"),
            Box::new({
                let kube_cfg = kube_cfg.clone();
                let log = tmp.path().join("kube-scheduler.log");
                move || kube_scheduler(&kube_cfg, &log, 1)
            }),
        ),
        (
            "wasmsched, core plugins".to_string(),
            Box::new({
                let cfg = core_cfg.clone();
                move || wasmsched(&cfg)
            }),
        ),
        (
            "wasmsched, core + GpuTopology + NetworkLocality (wasm)".to_string(),
            Box::new({
                let cfg = wasm_cfg.clone();
                move || wasmsched(&cfg)
            }),
        ),
    ];
    // BENCH_ONLY=kube|core|wasm (comma-separated) runs some of the three.
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let keys = ["kube", "core", "wasm"];
    for ((name, start), key) in runs.into_iter().zip(keys) {
        if !only.is_empty() && !only.split(',').any(|o| o.trim() == key) {
            continue;
        }
        reset(&client, &[NS]).await;
        create(&client, &shape, dra).await;
        if let Some(secs) = steady {
            let (t, bound) = measure_steady(&client, secs, start).await;
            let rate = bound as f64 / secs;
            eprintln!(
                "{name}: steady state, {} pods waiting: {bound} pods bound in {secs} s from the first binding \
                 (at {:.1} s): {rate:.0} pods/s; CPU from the start: API server + etcd {:.1} s, scheduler {:.1} s \
                 ({:.2} and {:.2} ms per pod bound)",
                shape.expected,
                t.first,
                t.server_cpu,
                t.scheduler_cpu,
                t.server_cpu * 1000.0 / bound.max(1) as f64,
                t.scheduler_cpu * 1000.0 / bound.max(1) as f64,
            );
            continue;
        }
        let pods = shape.expected;
        let t = measure(&client, pods, start).await;
        if dra.is_some() {
            assert_eq!(bench_dra::check_allocations(&client, NS).await, pods);
        }
        let (rate, steady) = (pods as f64 / t.all, (pods - 1) as f64 / (t.all - t.first));
        eprintln!(
            "{name}: {pods} pods on {nodes} nodes in {:.1} s ({rate:.0} pods/s; first binding at {:.1} s, {steady:.0} pods/s after); \
             CPU: API server + etcd {:.1} s ({:.2} ms per pod), scheduler {:.1} s ({:.2} ms per pod)",
            t.all,
            t.first,
            t.server_cpu,
            t.server_cpu * 1000.0 / pods as f64,
            t.scheduler_cpu,
            t.scheduler_cpu * 1000.0 / pods as f64,
        );
        let row = Row {
            name,
            timing: t,
            rate,
            steady,
        };
        if let Some(file) = &rows_file {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
                .unwrap_or_else(|e| panic!("BENCH_ROWS={}: {e}", file.display()));
            let line = serde_json::to_string(&row).unwrap();
            std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
        }
        rows.push(row);
    }
    if dra.is_some() {
        // Thousands of claims and slices would slow every later test.
        reset(&client, &[NS]).await;
        bench_dra::clean(&client, NS).await;
    }
    if std::env::var("BENCH_TABLE").as_deref() == Ok("0") {
        return;
    }
    println!(
        "\n{}: {nodes} nodes, {} pods bound beforehand, {} pending pods ({} bindable), client qps {qps} / burst {}; \
         seconds from the scheduler's start:\n",
        match (workload, dra) {
            (_, Some(init)) => format!(
                "SchedulingWithResourceClaimTemplate (DRA, one device per pod, {init} claims allocated beforehand)"
            ),
            (Some(w), None) => w.name(),
            (None, None) => "plain pods".to_string(),
        },
        shape.init.len(),
        shape.pending.len(),
        shape.expected,
        qps * 2
    );
    println!(
        "| scheduler | first binding | every pod bound | pods/s | pods/s after the first binding | API server + etcd CPU ms per pod | scheduler CPU ms per pod |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for Row {
        name,
        timing: t,
        rate,
        steady,
    } in &rows
    {
        println!(
            "| {name} | {:.1} | {:.1} | {rate:.0} | {steady:.0} | {:.2} | {:.2} |",
            t.first,
            t.all,
            t.server_cpu * 1000.0 / shape.expected as f64,
            t.scheduler_cpu * 1000.0 / shape.expected as f64,
        );
    }
    // What the API server alone allows. Its CPU over a run is a cost per
    // pod (the same writes, whichever scheduler makes them) plus a cost per
    // second (watches, leases, controllers): fitted over the runs, which
    // bind the same pods in different times. The rest of the machine at
    // the per-pod cost is the most any scheduler sharing it can bind.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let points: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (r.timing.all, r.timing.server_cpu))
        .collect();
    if let Some((per_second, per_run)) = fit_line(&points) {
        let per_pod = per_run / shape.expected as f64;
        if per_pod > 0.0 && (0.0..cores).contains(&per_second) {
            println!(
                "\nThe API server and etcd used {:.2} ms of CPU per pod and {:.2} cores besides \
                 (fitted over the runs): on {cores} cores, no scheduler sharing this machine can \
                 bind more than {:.0} pods/s.",
                per_pod * 1000.0,
                per_second,
                (cores - per_second) / per_pod
            );
        }
    }
}

/// One scheduler's result: its name, its timing, pods/s and pods/s after
/// the first binding.
#[derive(serde::Serialize, serde::Deserialize)]
struct Row {
    name: String,
    timing: Timing,
    rate: f64,
    steady: f64,
}

/// The rows an earlier invocation added to a BENCH_ROWS file (none when
/// there is no file yet).
fn earlier_rows(file: &std::path::Path) -> Vec<Row> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => panic!("BENCH_ROWS={}: {e}", file.display()),
    };
    text.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("BENCH_ROWS={}: {e}: {line}", file.display()))
        })
        .collect()
}

/// Starts scripts/test-servers' kube-controller-manager with `controllers`.
fn controller_manager(controllers: &str) {
    let status = Command::new(repo().join("scripts/test-servers"))
        .args([
            "start-controller-manager",
            env().servers.to_str().unwrap(),
            controllers,
        ])
        .status()
        .unwrap();
    assert!(status.success(), "test-servers start-controller-manager");
}

fn wasmsched(cfg: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(["run", "--config"])
        .arg(cfg)
        .arg("--kubeconfig")
        .arg(&env().kubeconfig)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .env("WASMSCHED_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}
