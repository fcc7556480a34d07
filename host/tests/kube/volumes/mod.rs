//! Volume scheduling compared with kube-scheduler (1.37), on the real API
//! server with the real PV controller (kube-controller-manager 1.37
//! running only `persistentvolume-binder`, started by
//! `scripts/test-servers start-controller-manager`) and a test
//! provisioner: each scenario runs once under kube-scheduler and once
//! under `wasmsched run`, from the same objects. Per scenario: the same
//! feasibility, the same FailedScheduling messages, the same nodes where
//! only one is right, and after each run every PV bound to at most one
//! claim and every scheduled pod's claims bound to PVs its node may use.

pub mod cluster;
mod provisioner;
mod scenarios;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use kube::Client;
use serde_json::json;

use crate::env::*;
use cluster::Outcome;
use scenarios::{Scenario, SCHED};

/// Which scheduler runs a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    KubeScheduler,
    Wasmsched,
}

/// A running scheduler; stopped on drop.
enum Running {
    Kube(std::process::Child, std::path::PathBuf),
    Wasm(Scheduler),
}

impl Running {
    fn log(&self) -> String {
        match self {
            Running::Kube(_, log) => std::fs::read_to_string(log).unwrap_or_default(),
            Running::Wasm(s) => s.logs(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Kube(c, _) = self {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The PV controller for the duration of a test.
pub struct ControllerManager;

impl ControllerManager {
    pub fn start() -> Self {
        test_servers("start-controller-manager");
        Self
    }
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        test_servers("stop-controller-manager");
    }
}

fn test_servers(command: &str) {
    let status = Command::new(repo().join("scripts/test-servers"))
        .arg(command)
        .arg(&env().servers)
        .status()
        .expect("running scripts/test-servers");
    assert!(status.success(), "scripts/test-servers {command} failed");
}

fn start(which: Which, dir: &Path) -> Running {
    match which {
        Which::KubeScheduler => {
            let cfg = dir.join("kube-scheduler.yaml");
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
            let log = dir.join("kube-scheduler.log");
            Running::Kube(kube_scheduler(&cfg, &log, 2), log)
        }
        Which::Wasmsched => {
            let cfg = dir.join("wasmsched.json");
            let file = json!({
                "apiVersion": "wasmsched.io/v1alpha1",
                "kind": "WasmSchedulerConfiguration",
                "profiles": [{
                    "schedulerName": SCHED,
                    "plugins": {"multiPoint": {"disabled": [
                        {"name": "GpuTopology"}, {"name": "NetworkLocality"}]}}
                }]
            });
            std::fs::write(&cfg, file.to_string()).unwrap();
            Running::Wasm(Scheduler::start(
                dir,
                "volumes",
                &env().kubeconfig,
                &["--config", cfg.to_str().unwrap(), "--leader-elect", "false"],
            ))
        }
    }
}

/// What one scheduler made of a scenario.
struct Run {
    outcomes: BTreeMap<String, Outcome>,
}

async fn run(client: &Client, s: &Scenario, which: Which, dir: &Path) -> Run {
    cluster::reset_volumes(client, scenarios::NS).await;
    cluster::set_up(client, s).await;
    let sched = start(which, dir);
    let provisioner = tokio::spawn(provisioner::run(client.clone()));
    let log = || sched.log();
    let mut outcomes = BTreeMap::new();
    let mut created = Vec::new();
    for p in &s.pods {
        let c = cluster::create(client, p).await;
        if !s.together {
            let name = p["metadata"]["name"].as_str().unwrap().to_string();
            outcomes.insert(name, cluster::outcome(client, &c, &log).await);
        }
        created.push(c);
    }
    if s.together {
        for c in &created {
            let name = c["metadata"]["name"].as_str().unwrap().to_string();
            outcomes.insert(name, cluster::outcome(client, c, &log).await);
        }
    }
    let b = cluster::bindings(client).await;
    provisioner.abort();
    let _ = provisioner.await;
    if let Err(e) = cluster::check_bindings(&b, &s.pods, &outcomes) {
        panic!(
            "{which:?}, {}: {e}\noutcomes: {outcomes:#?}\nlog:\n{}",
            s.name,
            log()
        );
    }
    drop(sched);
    Run { outcomes }
}

/// The outcomes as compared: by pod, or as a multiset for pods created
/// together; nodes only where the scenario says one is right.
fn comparable(s: &Scenario, r: &Run) -> Vec<String> {
    let shown = |o: &Outcome| match o {
        Outcome::Bound(n) if s.same_nodes => format!("bound to {n}"),
        Outcome::Bound(_) => "bound".to_string(),
        Outcome::Unschedulable(m) => format!("unschedulable: {m}"),
    };
    let mut out: Vec<String> = r
        .outcomes
        .iter()
        .map(|(pod, o)| {
            if s.together {
                shown(o)
            } else {
                format!("{pod}: {}", shown(o))
            }
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_scheduling_matches_kube_scheduler() {
    let _g = serial();
    let client = client().await;
    let _pv_controller = ControllerManager::start();
    let tmp = tempfile::tempdir().unwrap();
    let mut differences = Vec::new();
    let mut unschedulable = 0;
    for s in scenarios::all() {
        let kube = run(&client, &s, Which::KubeScheduler, tmp.path()).await;
        let ws = run(&client, &s, Which::Wasmsched, tmp.path()).await;
        let (k, w) = (comparable(&s, &kube), comparable(&s, &ws));
        println!(
            "{}:\n  kube-scheduler: {k:?}\n  wasmsched:      {w:?}",
            s.name
        );
        unschedulable += k.iter().filter(|o| o.contains("unschedulable")).count();
        if k != w {
            differences.push(format!(
                "{}:\n  kube-scheduler: {k:#?}\n  wasmsched: {w:#?}",
                s.name
            ));
        }
    }
    cluster::reset_volumes(&client, scenarios::NS).await;
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // One pod per scenario cannot fit (two in the missing-class one).
    assert_eq!(unschedulable, 9, "unschedulable pods under kube-scheduler");
}
