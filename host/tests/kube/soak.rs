//! The churn soak of issue 30 (`scripts/soak` runs it for as long as it
//! is told; the test suite for a minute): `wasmsched run` with its
//! default profile (the core plugins and both built-in wasm policies,
//! GpuTopology and NetworkLocality) and leader election, talking to the
//! real API server through the fault proxy, while pods (a fifth of them
//! asking for a GPU) are created at a steady rate and deleted, nodes are
//! replaced, and a fault from the list of the fault tests is injected
//! every few seconds in turn: connections reset, latency, a bandwidth
//! limit, a black hole longer than the renew deadline, refused
//! connections, and etcd compacted with an API server restart.
//!
//! At the end every pod that exists is bound (each fits: the cluster has
//! room for twice the pods kept), bound once (the binding audit, one
//! `Scheduled` event each), no node is over its allocatable, and the
//! process's peak RSS stayed under [`PEAK_RSS_LIMIT`]. It reports the
//! recovery after each fault: from the fault's end to the first binding
//! of a pod created at that moment.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use serde_json::json;

use crate::audit::*;
use crate::env::*;
use crate::outages::{alive, config, delete_lease, lease_holder, through, NS};
use crate::proxy::FaultProxy;

/// Peak resident memory allowed to the scheduler over the whole soak.
const PEAK_RSS_LIMIT: u64 = 200 << 20;
/// Nodes kept (each 4 CPUs, and on every other one 4 GPUs).
const NODES: usize = 12;
/// Pods kept at most (500m CPU each): a third of the cluster's CPU.
const LIVE_PODS: usize = 32;
/// Pods created per second.
const RATE: f64 = 5.0;
/// A fault this long after the last one ended, lasting [`FAULT_LENGTH`]
/// (the black hole: longer than the renew deadline of 3 s): every kind
/// once a minute.
const FAULT_EVERY: Duration = Duration::from_secs(6);
const FAULT_LENGTH: Duration = Duration::from_secs(4);
/// A node replaced every this often.
const NODE_EVERY: Duration = Duration::from_secs(15);
/// How long a pod that fits may stay pending once the faults are over.
const SETTLE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
enum Fault {
    Reset,
    Latency,
    Blackhole,
    Bandwidth,
    Refuse,
    Compaction,
}

const FAULTS: [Fault; 6] = [
    Fault::Reset,
    Fault::Latency,
    Fault::Blackhole,
    Fault::Bandwidth,
    Fault::Refuse,
    Fault::Compaction,
];

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Reset => "reset",
            Fault::Latency => "latency 300ms",
            Fault::Blackhole => "black hole",
            Fault::Bandwidth => "bandwidth 16KB/s",
            Fault::Refuse => "refused",
            Fault::Compaction => "compaction + API server restart",
        }
    }

    /// How long it lasts: a reset and a compaction (with its restart,
    /// awaited) are over once done, so recovery counts from then.
    fn length(self) -> Duration {
        match self {
            Fault::Reset | Fault::Compaction => Duration::ZERO,
            _ => FAULT_LENGTH,
        }
    }

    /// Starts the fault; [`FaultProxy::heal`] ends every one.
    async fn start(self, proxy: &FaultProxy) {
        match self {
            Fault::Reset => proxy.reset_all(),
            Fault::Latency => proxy.set_latency(Duration::from_millis(300)),
            Fault::Blackhole => proxy.set_blackhole(true),
            Fault::Bandwidth => proxy.set_bandwidth(Some(16 * 1024)),
            Fault::Refuse => {
                proxy.set_refuse(true);
                proxy.reset_all();
            }
            Fault::Compaction => {
                // The watches reconnect from versions etcd no longer has
                // (the restarted API server's watch cache starts at the
                // compacted revision): 410 Gone, a relist.
                compact_etcd(&etcd_url()).await;
                tokio::task::spawn_blocking(|| servers("restart-apiserver"))
                    .await
                    .unwrap();
            }
        }
    }
}

fn soak_length() -> Duration {
    let secs = std::env::var("WASMSCHED_SOAK_SECONDS")
        .ok()
        .map(|s| {
            s.parse::<u64>()
                .unwrap_or_else(|_| panic!("WASMSCHED_SOAK_SECONDS={s}: not a number of seconds"))
        })
        .unwrap_or(60);
    Duration::from_secs(secs)
}

/// Node number `serial`: in zone a, b or c by turns, every other one
/// with GPUs.
async fn add_node(client: &Client, serial: usize) -> String {
    let name = format!("soak-{serial:04}");
    let zone = ["a", "b", "c"][serial % 3];
    let mut alloc = json!({"cpu": "4", "memory": "32Gi", "pods": "110"});
    let mut labels = json!({"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone});
    if serial.is_multiple_of(2) {
        alloc["nvidia.com/gpu"] = json!("4");
        labels["nvidia.com/gpu.product"] = json!("NVIDIA-A100-SXM4-80GB");
    }
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": alloc, "capacity": alloc}
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    name
}

async fn add_pod(client: &Client, name: &str, gpu: bool) {
    let mut requests = json!({"cpu": "500m", "memory": "64Mi"});
    if gpu {
        requests["nvidia.com/gpu"] = json!("1");
    }
    let limits = if gpu {
        json!({"nvidia.com/gpu": "1"})
    } else {
        json!({})
    };
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulerName": "gpu-scheduler", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": requests, "limits": limits}}]}
    }))
    .unwrap();
    let api = Api::<Pod>::namespaced(client.clone(), NS);
    retry(&format!("creating pod {name}"), || async {
        match api.create(&PostParams::default(), &p).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    })
    .await;
}

/// Deletes a pod at once (no kubelet here), retried while the API server
/// is away; gone already is fine.
async fn delete_pod(pods: &Api<Pod>, name: &str) {
    retry(&format!("deleting pod {name}"), || async {
        match pods.delete(name, &now()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    })
    .await;
}

/// Retries `f` for up to a minute (the test's own requests go straight
/// to the API server, which the compaction fault restarts).
async fn retry<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let start = Instant::now();
    loop {
        match f().await {
            Ok(()) => return,
            Err(e) => {
                assert!(start.elapsed() < Duration::from_secs(60), "{what}: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

fn now() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_soak_with_periodic_faults() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[NS]).await;
    let tmp = tempfile::tempdir().unwrap();
    let lease = "soak-test";
    delete_lease(&client, lease).await;
    let length = soak_length();
    let cfg = config(tmp.path(), lease, Some(("4s", "3s", "500ms")));
    // The default profile (no `profiles`): both built-in wasm policies.
    let text = std::fs::read_to_string(&cfg).unwrap();
    let cut = text.find("profiles:").unwrap();
    std::fs::write(&cfg, &text[..cut]).unwrap();
    let mut node_serial = 0;
    let mut nodes: VecDeque<String> = VecDeque::new();
    for _ in 0..NODES {
        nodes.push_back(add_node(&client, node_serial).await);
        node_serial += 1;
    }
    let proxy = FaultProxy::start(&env().servers, &apiserver_url()).await;
    let mut sched = through(&proxy, tmp.path(), "soak", &["--config", &cfg]);
    sched.wait_ready().await;
    wait_until("the lease", Duration::from_secs(30), || async {
        lease_holder(&client, lease).await.as_deref() == Some("soak")
    })
    .await;
    let pid = sched.child.id();
    let rss_start = rss(pid);
    let audit = BindingAudit::start(&client, NS).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let node_api: Api<Node> = Api::all(client.clone());

    let start = Instant::now();
    let gap = Duration::from_secs_f64(1.0 / RATE);
    let (mut created, mut deleted, mut replaced) = (0usize, 0usize, 0usize);
    let mut live: VecDeque<String> = VecDeque::new();
    let mut next_fault = start + FAULT_EVERY;
    let mut next_node = start + NODE_EVERY;
    let mut fault_ends: Option<(Fault, Instant)> = None;
    let mut fault_no = 0usize;
    // (fault, the probe pod created as it ended, when it ended)
    let mut probes: Vec<(Fault, String, Instant)> = Vec::new();
    let mut rss_samples: Vec<(Duration, u64)> = vec![(Duration::ZERO, rss_start)];
    let mut next_sample = start + Duration::from_secs(10);
    while start.elapsed() < length {
        let tick = Instant::now();
        let name = format!("p-{created:06}");
        add_pod(&client, &name, created % 5 == 0).await;
        live.push_back(name);
        created += 1;
        // Keep at most LIVE_PODS: the oldest go (bound or not).
        while live.len() > LIVE_PODS {
            let old = live.pop_front().unwrap();
            delete_pod(&pods, &old).await;
            deleted += 1;
        }
        if tick >= next_node {
            next_node += NODE_EVERY;
            // The oldest node and its pods go; a new node comes.
            let gone = nodes.pop_front().unwrap();
            let on_it: Vec<String> = pods
                .list(&ListParams::default().fields(&format!("spec.nodeName={gone}")))
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect();
            for p in &on_it {
                delete_pod(&pods, p).await;
                live.retain(|l| l != p);
                deleted += 1;
            }
            node_api.delete(&gone, &now()).await.unwrap();
            nodes.push_back(add_node(&client, node_serial).await);
            node_serial += 1;
            replaced += 1;
        }
        match fault_ends {
            Some((f, end)) if tick >= end => {
                proxy.heal();
                let healed = Instant::now();
                let probe = format!("probe-{fault_no:03}");
                add_pod(&client, &probe, false).await;
                probes.push((f, probe, healed));
                fault_ends = None;
                next_fault = healed + FAULT_EVERY;
            }
            None if tick >= next_fault => {
                let f = FAULTS[fault_no % FAULTS.len()];
                fault_no += 1;
                f.start(&proxy).await;
                fault_ends = Some((f, Instant::now() + f.length()));
            }
            _ => {}
        }
        if tick >= next_sample {
            next_sample += Duration::from_secs(10);
            rss_samples.push((start.elapsed(), rss(pid)));
        }
        tokio::time::sleep_until((tick + gap).into()).await;
    }
    if fault_ends.is_some() {
        proxy.heal();
    }
    let churn = start.elapsed();

    // Every pod that exists fits: each is bound within SETTLE.
    let mut left: Vec<String> = live.iter().cloned().collect();
    left.extend(probes.iter().map(|(_, p, _)| p.clone()));
    wait_all_bound(&audit, &left, SETTLE).await;
    assert!(alive(&mut sched), "the scheduler exited:\n{}", sched.logs());
    invariants_after_churn(&client, &audit).await;
    assert_eq!(
        lease_holder(&client, lease).await.as_deref(),
        Some("soak"),
        "the replica did not take its lease back"
    );
    let relists = sched
        .metric("wasmsched_watch_relists_total", &[("resource", "pods")])
        .await;
    let watch_errors = sched
        .metric("wasmsched_watch_errors_total", &[("resource", "pods")])
        .await;
    let rss_end = rss(pid);
    let peak = peak_rss(pid);

    // Recovery per fault kind: the fault's end to its probe's binding.
    let mut recovery: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for (f, probe, healed) in &probes {
        let at = audit.of(probe).expect("probe bound").at;
        recovery
            .entry(f.name())
            .or_default()
            .push(at.saturating_duration_since(*healed));
    }
    let mut all: Vec<Duration> = recovery.values().flatten().copied().collect();
    all.sort();
    eprintln!(
        "soak: {:.0} s of churn; {created} pods created, {deleted} deleted, {replaced} nodes replaced, {} faults injected; {} bindings, {relists} Pod relists, {watch_errors} Pod watch errors",
        churn.as_secs_f64(),
        probes.len(),
        audit.bound_count(),
    );
    eprintln!(
        "soak: recovery after a fault (its end to the first binding of a pod created then): p50 {:.2} s, p99 {:.2} s, max {:.2} s",
        percentile(&all, 0.5).as_secs_f64(),
        percentile(&all, 0.99).as_secs_f64(),
        all.last().copied().unwrap_or_default().as_secs_f64()
    );
    for (f, mut d) in recovery {
        d.sort();
        eprintln!(
            "soak:   {f}: {} times, p50 {:.2} s, p99 {:.2} s",
            d.len(),
            percentile(&d, 0.5).as_secs_f64(),
            percentile(&d, 0.99).as_secs_f64()
        );
    }
    eprintln!(
        "soak: RSS {:.1} MB at start, {:.1} MB at the end, peak {:.1} MB (limit {} MB); samples: {}",
        rss_start as f64 / 1e6,
        rss_end as f64 / 1e6,
        peak as f64 / 1e6,
        PEAK_RSS_LIMIT >> 20,
        rss_samples
            .iter()
            .map(|(t, r)| format!("{}s {:.1}", t.as_secs(), *r as f64 / 1e6))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(
        probes.len() >= FAULTS.len().min((length.as_secs() / 12) as usize),
        "only {} faults injected",
        probes.len()
    );
    assert!(
        peak < PEAK_RSS_LIMIT,
        "peak RSS {peak} bytes over {PEAK_RSS_LIMIT}"
    );
    if probes
        .iter()
        .any(|(f, _, _)| matches!(f, Fault::Compaction))
    {
        assert!(relists >= 1.0, "no relist after the compaction");
    }
}

/// No pod bound twice or reported scheduled twice, no node over its
/// allocatable.
async fn invariants_after_churn(client: &Client, audit: &BindingAudit) {
    audit.assert_no_rebinding();
    assert_one_scheduled_event_each(client, NS).await;
    assert_within_allocatable(client).await;
}
