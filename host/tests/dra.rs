//! Dynamic Resource Allocation over many pods, claims and restarts: no
//! device is ever allocated to two claims, and a restart rebuilds every
//! allocation from the claims' status.
//!
//! Each seed builds a random cluster (nodes publishing GPUs of two models
//! on two PCIe roots, some nodes with none) and schedules rounds of random
//! pods (one to three claims each: named claims, some shared by two pods,
//! or a template; one to four devices of a model or of any model, some
//! with `matchAttribute` on the root). Between rounds the scheduler is
//! "restarted": the next round is a new `simulate` run whose input is the
//! cluster as the API would show it (the claims with the `status.allocation`
//! and `reservedFor` written so far, the bound pods with their nodes), plus
//! new pending pods. Every round, with the default profile (GpuTopology
//! ranking devices) and with first fit alike, must keep earlier
//! allocations as they were and never give a device to two claims.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use wasmsched::{config, manifest, simulate};

const DRIVER: &str = "gpu.example.com";

/// What the API shows of a claim after a round.
#[derive(Clone, Debug, PartialEq)]
struct Allocated {
    node: String,
    /// (request, device) pairs.
    results: Vec<(String, String)>,
    reserved_for: Vec<String>,
}

struct Cluster {
    nodes: Vec<(String, usize)>,
    /// Claim name -> its spec's requests and constraints.
    claims: BTreeMap<String, Value>,
    /// Pods so far: name -> (claim names, node once bound).
    pods: BTreeMap<String, (Vec<String>, Option<String>)>,
    allocated: BTreeMap<String, Allocated>,
}

fn spec(rng: &mut StdRng) -> Value {
    let count = rng.random_range(1..=4);
    let mut exactly = json!({"deviceClassName": "gpu", "count": count});
    match rng.random_range(0..3) {
        0 => {
            exactly["selectors"] = json!([{"cel": {"expression":
            format!("device.attributes[\"{DRIVER}\"].model == \"A100\"")}}])
        }
        1 => {
            exactly["selectors"] = json!([{"cel": {"expression":
            format!("device.attributes[\"{DRIVER}\"].model == \"H100\"")}}])
        }
        _ => {}
    }
    let constraints = if count > 1 && rng.random_bool(0.5) {
        json!([{"requests": ["gpus"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}])
    } else {
        json!([])
    };
    json!({"requests": [{"name": "gpus", "exactly": exactly}], "constraints": constraints})
}

impl Cluster {
    fn new(rng: &mut StdRng) -> Self {
        let nodes = (0..rng.random_range(3..8))
            .map(|i| {
                // The first node always has GPUs.
                let gpus = if i == 0 {
                    8
                } else {
                    [0, 4, 8][rng.random_range(0..3)]
                };
                (format!("node-{i}"), gpus)
            })
            .collect();
        Self {
            nodes,
            claims: BTreeMap::new(),
            pods: BTreeMap::new(),
            allocated: BTreeMap::new(),
        }
    }

    /// New pending pods for a round.
    fn add_pods(&mut self, rng: &mut StdRng, round: usize) {
        for p in 0..rng.random_range(4..12) {
            let name = format!("r{round}-p{p}");
            let mut claims = Vec::new();
            for c in 0..rng.random_range(1..=3) {
                // Sometimes share an existing claim (allocated or not).
                if c == 0 && !self.claims.is_empty() && rng.random_bool(0.2) {
                    let k = rng.random_range(0..self.claims.len());
                    let existing = self.claims.keys().nth(k).unwrap().clone();
                    claims.push(existing);
                    continue;
                }
                let claim = format!("{name}-c{c}");
                self.claims.insert(claim.clone(), spec(rng));
                claims.push(claim);
            }
            self.pods.insert(name, (claims, None));
        }
    }

    /// The cluster as the API would show it.
    fn manifests(&self) -> String {
        let mut docs = vec![
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}),
        ];
        for (node, gpus) in &self.nodes {
            docs.push(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
                "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                    "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"}}}));
            if *gpus == 0 {
                continue;
            }
            let devices: Vec<Value> = (0..*gpus)
                .map(|g| {
                    json!({"name": format!("gpu-{g}"), "attributes": {
                    "model": {"string": if g % 4 < 2 { "A100" } else { "H100" }},
                    "resource.kubernetes.io/pcieRoot": {"string": format!("pci{}", g % 2)}}})
                })
                .collect();
            docs.push(
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": format!("{node}-gpus")},
                "spec": {"driver": DRIVER, "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices}}),
            );
        }
        for (name, spec) in &self.claims {
            let mut claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
                "spec": {"devices": spec}});
            if let Some(a) = self.allocated.get(name) {
                let results: Vec<Value> = a
                    .results
                    .iter()
                    .map(|(request, id)| {
                        let mut parts = id.splitn(3, '/').skip(1);
                        let pool = parts.next().unwrap();
                        let device = parts.next().unwrap();
                        json!({"request": request, "driver": DRIVER, "pool": pool, "device": device})
                    })
                    .collect();
                let reserved: Vec<Value> = a
                    .reserved_for
                    .iter()
                    .map(|p| json!({"resource": "pods", "name": p, "uid": format!("uid-{p}")}))
                    .collect();
                claim["status"] = json!({
                    "allocation": {"devices": {"results": results},
                        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [a.node]}]}]}},
                    "reservedFor": reserved});
            }
            docs.push(claim);
        }
        for (name, (claims, node)) in &self.pods {
            let rc: Vec<Value> = claims
                .iter()
                .enumerate()
                .map(|(i, c)| json!({"name": format!("claim-{i}"), "resourceClaimName": c}))
                .collect();
            let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
                "spec": {"resourceClaims": rc, "containers": [{"name": "c", "image": "x",
                    "resources": {"requests": {"cpu": "100m"}}}]}});
            if let Some(n) = node {
                pod["spec"]["nodeName"] = json!(n);
                pod["status"] = json!({"phase": "Running"});
            }
            docs.push(pod);
        }
        docs.iter()
            .map(|d| serde_json::to_string(d).unwrap())
            .collect::<Vec<_>>()
            .join("\n---\n")
    }
}

fn run(dir: &std::path::Path, input: &str, first_fit: bool) -> simulate::Report {
    let file = dir.join("cluster.yaml");
    std::fs::write(&file, input).unwrap();
    let cfg = if first_fit {
        let c = dir.join("first-fit.yaml");
        std::fs::write(
            &c,
            "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\nprofiles:\n\
             - schedulerName: gpu-scheduler\n  pluginConfig:\n  - name: DynamicResources\n    args: {rankedSets: 0}\n",
        )
        .unwrap();
        config::load(&c).unwrap()
    } else {
        config::ConfigFile::default()
    };
    let scheduler = config::build(&cfg, dir, 1).unwrap();
    let manifests = manifest::load(&[file]).unwrap();
    let opts = simulate::Options {
        all_pods: true,
        ..Default::default()
    };
    simulate::run(&scheduler, manifests, &opts).unwrap()
}

fn rounds(seed: u64, first_fit: bool) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut c = Cluster::new(&mut rng);
    let dir = tempfile::tempdir().unwrap();
    for round in 0..4 {
        c.add_pods(&mut rng, round);
        let report = run(dir.path(), &c.manifests(), first_fit);
        for s in &report.scheduled {
            c.pods.get_mut(&s.pod).unwrap().1 = Some(s.node.clone());
        }
        let claims = report.plugins["resource_claims"]
            .as_array()
            .unwrap()
            .clone();
        let mut owner: BTreeMap<String, String> = BTreeMap::new();
        for claim in &claims {
            let name = claim["name"].as_str().unwrap().to_string();
            let results: Vec<(String, String)> = claim["devices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    (
                        d["request"].as_str().unwrap().to_string(),
                        d["device"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            for (_, dev) in &results {
                if let Some(other) = owner.insert(dev.clone(), name.clone()) {
                    panic!("seed {seed} round {round}: {dev} allocated to {other} and {name}");
                }
            }
            let mut reserved: Vec<String> = claim["reservedFor"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap().to_string())
                .collect();
            reserved.sort();
            if results.is_empty() {
                assert!(
                    !c.allocated.contains_key(&name),
                    "seed {seed} round {round}: {name} lost its allocation"
                );
                continue;
            }
            let node = results[0].1.split('/').nth(1).unwrap().to_string();
            let now = Allocated {
                node,
                results,
                reserved_for: reserved,
            };
            if let Some(before) = c.allocated.get(&name) {
                assert_eq!(
                    (&before.node, &before.results),
                    (&now.node, &now.results),
                    "seed {seed} round {round}: {name} changed across a restart"
                );
            }
            // Every consumer runs where the claim's devices are.
            for p in &now.reserved_for {
                assert_eq!(
                    c.pods[p].1.as_deref(),
                    Some(now.node.as_str()),
                    "seed {seed} round {round}: {p} is not on its claim's node"
                );
            }
            c.allocated.insert(name, now);
        }
        // A bound pod's claims are all allocated on its node.
        for (pod, (claims, node)) in &c.pods {
            if let Some(n) = node {
                for claim in claims {
                    let a = c.allocated.get(claim).unwrap_or_else(|| {
                        panic!("seed {seed} round {round}: {pod} bound without {claim}")
                    });
                    assert_eq!(&a.node, n, "seed {seed} round {round}: {pod} / {claim}");
                }
            }
        }
    }
    let bound = c.pods.values().filter(|p| p.1.is_some()).count();
    assert!(bound > 0, "seed {seed}: nothing was ever bound");
}

#[test]
fn no_device_is_allocated_twice_across_restarts_with_ranking() {
    for seed in 0..12 {
        rounds(seed, false);
    }
}

#[test]
fn no_device_is_allocated_twice_across_restarts_with_first_fit() {
    for seed in 100..112 {
        rounds(seed, true);
    }
}
