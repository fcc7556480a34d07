//! The index, kept through random cluster changes, against a scan of the
//! SDK's cluster: the same placed pods, and candidates that never miss a
//! match in either direction.

use std::collections::BTreeSet;

use wasmsched_plugin_sdk::locality::PeerSpec;
use wasmsched_plugin_sdk::types::{Delta, Node, Placement, Pod, Removal};
use wasmsched_plugin_sdk::{Cluster, Plugin};

use crate::NetworkLocality;

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const KEYS: [&str; 3] = ["app", "tier", "team"];
const VALUES: [&str; 3] = ["a", "b", "c"];
const SELECTORS: [&str; 9] = [
    "app=a",
    "app in (a,b)",
    "tier",
    "app=b,tier=c",
    "app!=a",
    "!team",
    "team notin (a)",
    "tier,app notin (c)",
    "team=c,app",
];

fn node(i: u32) -> Node {
    let zone = format!("z{}", i % 3);
    Node {
        name: format!("n{i}"),
        labels: vec![("topology.kubernetes.io/zone".to_string(), zone)],
        annotations: Vec::new(),
        allocatable: Vec::new(),
        taints: Vec::new(),
        unschedulable: false,
        metrics: Vec::new(),
    }
}

fn random_labels(rng: &mut Rng) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    for k in KEYS {
        if rng.below(3) > 0 {
            labels.push((k.to_string(), VALUES[rng.below(3) as usize].to_string()));
        }
    }
    labels.sort();
    labels
}

fn random_pod(rng: &mut Rng) -> Pod {
    let uid = format!("p{}", rng.below(40));
    let mut annotations = Vec::new();
    match rng.below(4) {
        0 => {}
        1 => annotations.push((
            "network.wasmsched.io/peers".to_string(),
            "app in (a".to_string(),
        )),
        _ => {
            let a = SELECTORS[rng.below(9) as usize];
            let b = SELECTORS[rng.below(9) as usize];
            annotations.push((
                "network.wasmsched.io/peers".to_string(),
                format!("{a}:2;{b}"),
            ));
        }
    }
    Pod {
        uid: uid.clone(),
        namespace: "ns".to_string(),
        name: uid,
        labels: random_labels(rng),
        annotations,
        requests: Vec::new(),
        limits: Vec::new(),
        tolerations: Vec::new(),
        priority: 0,
        creation_timestamp_ms: 0,
        owner: None,
        node_name: None,
    }
}

fn random_delta(rng: &mut Rng, cluster: &Cluster) -> Delta {
    let placed: Vec<(u32, String)> = cluster
        .pods()
        .map(|(n, p)| (n.index, p.uid.clone()))
        .collect();
    match rng.below(10) {
        0 => Delta::NodeRemove(rng.below(8) as u32),
        1 => {
            let i = rng.below(8) as u32;
            Delta::NodeSet((i, node(i)))
        }
        2 | 3 if !placed.is_empty() => {
            let (node, pod_uid) = placed[rng.below(placed.len() as u64) as usize].clone();
            Delta::PodRemove(Removal { node, pod_uid })
        }
        _ => Delta::PodAdd(Placement {
            node: rng.below(8) as u32,
            pod: random_pod(rng),
        }),
    }
}

/// Placed pods (uid) the scan finds selected by `spec`.
fn scan_selected(cluster: &Cluster, spec: &PeerSpec) -> BTreeSet<String> {
    cluster
        .pods()
        .filter(|(_, p)| {
            spec.entries
                .iter()
                .any(|e| e.selector.matches(p.labels.as_slice()))
        })
        .map(|(_, p)| p.uid.clone())
        .collect()
}

/// (node, uid, labels) of a placed pod.
type PlacedPod = (u32, String, Vec<(String, String)>);

fn check(plugin: &NetworkLocality, cluster: &Cluster, rng: &mut Rng) {
    let index = plugin.index.borrow();
    let in_index: BTreeSet<PlacedPod> = index
        .all()
        .map(|p| (p.node, p.uid.clone(), p.labels.clone()))
        .collect();
    let in_cluster: BTreeSet<PlacedPod> = cluster
        .pods()
        .map(|(n, p)| (n.index, p.uid.clone(), p.labels.clone()))
        .collect();
    assert_eq!(in_index, in_cluster);
    for n in cluster.nodes() {
        let (zone, _) = index.location(index.node_location(n.index).unwrap());
        assert_eq!(zone, Some(format!("z{}", n.index % 3).as_str()));
    }
    // Forward: the pod's own selectors.
    let text = format!(
        "{};{}",
        SELECTORS[rng.below(9) as usize],
        SELECTORS[rng.below(9) as usize]
    );
    let spec = PeerSpec::parse(&text, None).unwrap();
    let found: BTreeSet<String> = match index.selected_candidates(&spec) {
        Some(slots) => slots
            .iter()
            .map(|&s| index.get(s).unwrap())
            .collect::<Vec<_>>(),
        None => index.all().collect(),
    }
    .into_iter()
    .filter(|p| {
        spec.entries
            .iter()
            .any(|e| e.selector.matches(p.labels.as_slice()))
    })
    .map(|p| p.uid.clone())
    .collect();
    assert_eq!(found, scan_selected(cluster, &spec), "{text}");
    // Reverse: declaring pods whose selectors match a pod's labels.
    let labels = random_labels(rng);
    let declares = |p: &Pod| -> bool {
        let Some(text) = p.annotations.first().map(|(_, v)| v.as_str()) else {
            return false;
        };
        PeerSpec::parse(text, None).is_ok_and(|s| {
            s.entries
                .iter()
                .any(|e| e.selector.matches(labels.as_slice()))
        })
    };
    let scanned: BTreeSet<String> = cluster
        .pods()
        .filter(|(_, p)| declares(p))
        .map(|(_, p)| p.uid.clone())
        .collect();
    let found: BTreeSet<String> = index
        .declaring_candidates(&labels)
        .iter()
        .map(|&s| index.get(s).unwrap())
        .filter(|p| {
            p.spec.as_ref().is_some_and(|s| {
                s.entries
                    .iter()
                    .any(|e| e.selector.matches(labels.as_slice()))
            })
        })
        .map(|p| p.uid.clone())
        .collect();
    assert_eq!(found, scanned, "{labels:?}");
}

#[test]
fn index_kept_through_changes_matches_a_scan() {
    for seed in 1..=20u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let plugin = NetworkLocality::init("{}").unwrap();
        let mut cluster = Cluster::default();
        for i in 0..8 {
            let d = Delta::NodeSet((i, node(i)));
            plugin.observe(&d, &cluster);
            cluster.apply(d);
        }
        for _ in 0..300 {
            let d = random_delta(&mut rng, &cluster);
            plugin.observe(&d, &cluster);
            cluster.apply(d);
            check(&plugin, &cluster, &mut rng);
        }
    }
}
