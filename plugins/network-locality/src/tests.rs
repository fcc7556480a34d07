//! The plugin driven through the SDK runtime, as the host drives it.

use wasmsched_plugin_sdk::runtime;
use wasmsched_plugin_sdk::types::{Delta, Node, Placement, Pod, Rejection, Removal};

use crate::locality::MaxDistance;
use crate::{normalize_costs, too_far_reason, NetworkLocality};

type P = NetworkLocality;

const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const PEERS: &str = "network.wasmsched.io/peers";
const PEER_NS: &str = "network.wasmsched.io/peer-namespaces";
const MAX_DISTANCE: &str = "network.wasmsched.io/max-distance";

fn sorted(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

fn node(name: &str, zone: Option<&str>, region: Option<&str>) -> Node {
    let mut labels = vec![("kubernetes.io/hostname", name)];
    if let Some(z) = zone {
        labels.push((ZONE, z));
    }
    if let Some(r) = region {
        labels.push((REGION, r));
    }
    Node {
        name: name.to_string(),
        labels: sorted(&labels),
        annotations: Vec::new(),
        allocatable: Vec::new(),
        taints: Vec::new(),
        unschedulable: false,
        metrics: Vec::new(),
    }
}

fn pod(namespace: &str, name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Pod {
    Pod {
        uid: format!("{namespace}/{name}"),
        namespace: namespace.to_string(),
        name: name.to_string(),
        labels: sorted(labels),
        annotations: sorted(annotations),
        requests: Vec::new(),
        limits: Vec::new(),
        tolerations: Vec::new(),
        priority: 0,
        creation_timestamp_ms: 0,
        owner: None,
        node_name: None,
    }
}

fn place(index: u32, mut pod: Pod, nodes: &[Node]) -> Delta {
    pod.node_name = Some(nodes[index as usize].name.clone());
    Delta::PodAdd(Placement { node: index, pod })
}

/// Region r1 has zones r1a (nodes 0, 1) and r1b (nodes 2, 3); region r2
/// has zone r2a (nodes 4, 5); node 6 has no topology labels.
fn topology() -> Vec<Node> {
    vec![
        node("a0", Some("r1a"), Some("r1")),
        node("a1", Some("r1a"), Some("r1")),
        node("b0", Some("r1b"), Some("r1")),
        node("b1", Some("r1b"), Some("r1")),
        node("c0", Some("r2a"), Some("r2")),
        node("c1", Some("r2a"), Some("r2")),
        node("bare", None, None),
    ]
}

const ALL: [u32; 7] = [0, 1, 2, 3, 4, 5, 6];

/// A fresh instance with `args`, the topology and `placed` pods
/// (`(node index, pod)`).
fn setup(args: &str, placed: Vec<(u32, Pod)>) -> Vec<Node> {
    let nodes = topology();
    runtime::init::<P>(args).unwrap();
    let mut deltas: Vec<Delta> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Delta::NodeSet((i as u32, n.clone())))
        .collect();
    deltas.extend(placed.into_iter().map(|(i, p)| place(i, p, &nodes)));
    runtime::apply::<NetworkLocality>(deltas);
    nodes
}

/// Normalized scores of `pod` on `feasible`, checked to be in 0..=100.
fn scores(pod: Pod, feasible: &[u32]) -> Vec<i64> {
    runtime::cycle_start::<P>(pod).unwrap();
    let raw = runtime::score::<P>(feasible).unwrap();
    let out = runtime::normalize::<P>(feasible, raw).unwrap();
    assert!(out.iter().all(|s| (0..=100).contains(s)), "{out:?}");
    out
}

fn raw_scores(pod: Pod, feasible: &[u32]) -> Vec<i64> {
    runtime::cycle_start::<P>(pod).unwrap();
    runtime::score::<P>(feasible).unwrap()
}

fn filter(pod: Pod, nodes: &[u32]) -> Vec<Option<Rejection>> {
    runtime::cycle_start::<P>(pod).unwrap();
    runtime::filter::<P>(nodes)
}

/// The feasible node with the highest score (first on ties).
fn winner(feasible: &[u32], scores: &[i64]) -> u32 {
    let best = scores.iter().max().unwrap();
    feasible[scores.iter().position(|s| s == best).unwrap()]
}

fn db(name: &str) -> Pod {
    pod("shop", name, &[("app", "db")], &[])
}

fn frontend(annotations: &[(&str, &str)]) -> Pod {
    pod("shop", "web-x", &[("app", "web")], annotations)
}

#[test]
fn frontend_lands_in_the_zone_of_its_backend() {
    setup("{}", vec![(2, db("db-0"))]);
    let s = scores(frontend(&[(PEERS, "app=db")]), &ALL);
    // Costs 10, 10, 0, 1, 100, 100, 100 (unknown).
    assert_eq!(s, vec![90, 90, 100, 99, 0, 0, 0]);
    assert_eq!(winner(&ALL, &s), 2);
    // Without the backend's node, its zone still wins.
    let feasible = [0, 1, 3, 4, 5, 6];
    let s = scores(frontend(&[(PEERS, "app=db")]), &feasible);
    assert_eq!(winner(&feasible, &s), 3);
    assert_eq!(s, vec![91, 91, 100, 0, 0, 0]);
}

#[test]
fn same_region_beats_cross_region_when_the_peer_zone_is_filtered_out() {
    setup("{}", vec![(2, db("db-0"))]);
    let feasible = [0, 4, 6];
    let s = scores(frontend(&[(PEERS, "app=db")]), &feasible);
    assert_eq!(s, vec![100, 0, 0]);
}

#[test]
fn no_placed_peers_scores_zero_everywhere() {
    setup(
        "{}",
        vec![(2, pod("shop", "cache-0", &[("app", "cache")], &[]))],
    );
    assert_eq!(scores(frontend(&[]), &ALL), vec![0; 7]);
    assert_eq!(scores(frontend(&[(PEERS, "app=db")]), &ALL), vec![0; 7]);
    // Peers in another namespace are out of scope by default.
    setup("{}", vec![(2, pod("other", "db-0", &[("app", "db")], &[]))]);
    assert_eq!(scores(frontend(&[(PEERS, "app=db")]), &ALL), vec![0; 7]);
    // ... and in scope when named.
    let s = scores(
        frontend(&[(PEERS, "app=db"), (PEER_NS, "shop,other")]),
        &ALL,
    );
    assert_eq!(winner(&ALL, &s), 2);
    let s = scores(frontend(&[(PEERS, "app=db"), (PEER_NS, "*")]), &ALL);
    assert_eq!(winner(&ALL, &s), 2);
}

#[test]
fn all_equal_costs_score_100() {
    setup("{}", vec![(2, db("db-0"))]);
    assert_eq!(
        scores(frontend(&[(PEERS, "app=db")]), &[4, 5]),
        vec![100, 100]
    );
}

#[test]
fn max_distance_zone_rejects_every_node_outside_the_peer_zone() {
    setup("{}", vec![(2, db("db-0"))]);
    let reason = "node(s) too far from network peers (max-distance zone)";
    assert_eq!(too_far_reason(MaxDistance::Zone), reason);
    let out = filter(
        frontend(&[(PEERS, "app=db"), (MAX_DISTANCE, "zone")]),
        &[0, 1, 4, 5, 6],
    );
    for r in &out {
        let r = r.as_ref().expect("rejected");
        assert_eq!(r.reason, reason);
        assert!(r.unresolvable);
    }
    let out = filter(
        frontend(&[(PEERS, "app=db"), (MAX_DISTANCE, "zone")]),
        &[2, 3],
    );
    assert!(out.iter().all(Option::is_none));
    // region: the other zone of the region passes, the other region does not.
    let out = filter(
        frontend(&[(PEERS, "app=db"), (MAX_DISTANCE, "region")]),
        &ALL,
    );
    let passed: Vec<bool> = out.iter().map(Option::is_none).collect();
    assert_eq!(passed, vec![true, true, true, true, false, false, false]);
    // node: only the peer's node.
    let out = filter(frontend(&[(PEERS, "app=db"), (MAX_DISTANCE, "node")]), &ALL);
    let passed: Vec<bool> = out.iter().map(Option::is_none).collect();
    assert_eq!(passed, vec![false, false, true, false, false, false, false]);
    assert_eq!(
        out[0].as_ref().unwrap().reason,
        "node(s) too far from network peers (max-distance node)"
    );
}

#[test]
fn max_distance_needs_one_placed_pod_of_each_selector() {
    setup(
        "{}",
        vec![
            (2, db("db-0")),
            (4, db("db-1")),
            (0, pod("shop", "cache-0", &[("app", "cache")], &[])),
        ],
    );
    // Any db replica is close enough: zones r1b and r2a pass.
    let out = filter(frontend(&[(PEERS, "app=db"), (MAX_DISTANCE, "zone")]), &ALL);
    let passed: Vec<bool> = out.iter().map(Option::is_none).collect();
    assert_eq!(passed, vec![false, false, true, true, true, true, false]);
    // db and cache in different zones: no zone has both ...
    let both = [(PEERS, "app=db; app=cache"), (MAX_DISTANCE, "zone")];
    assert!(filter(frontend(&both), &ALL).iter().all(Option::is_some));
    // ... but region r1 has both.
    let both = [(PEERS, "app=db; app=cache"), (MAX_DISTANCE, "region")];
    let passed: Vec<bool> = filter(frontend(&both), &ALL)
        .iter()
        .map(Option::is_none)
        .collect();
    assert_eq!(passed, vec![true, true, true, true, false, false, false]);
    // A selector with no placed pod does not constrain.
    let some = [(PEERS, "app=db; app=queue"), (MAX_DISTANCE, "node")];
    let passed: Vec<bool> = filter(frontend(&some), &ALL)
        .iter()
        .map(Option::is_none)
        .collect();
    assert_eq!(passed, vec![false, false, true, false, true, false, false]);
}

#[test]
fn pods_without_placed_peers_pass_the_filter() {
    setup("{}", vec![]);
    let out = filter(frontend(&[(PEERS, "app=db"), (MAX_DISTANCE, "node")]), &ALL);
    assert!(out.iter().all(Option::is_none));
    // max-distance without peers constrains nothing.
    let out = filter(frontend(&[(MAX_DISTANCE, "zone")]), &ALL);
    assert!(out.iter().all(Option::is_none));
    // Reverse dependencies do not constrain either: the filter is about
    // the pod's own declarations.
    setup(
        "{}",
        vec![(
            4,
            pod(
                "shop",
                "client",
                &[("app", "client")],
                &[(PEERS, "app=web")],
            ),
        )],
    );
    let out = filter(frontend(&[(MAX_DISTANCE, "zone")]), &ALL);
    assert!(out.iter().all(Option::is_none));
}

#[test]
fn reverse_dependencies_pull_a_late_backend_to_its_clients() {
    let client = |name: &str| pod("shop", name, &[("app", "web")], &[(PEERS, "app=api:5")]);
    setup("{}", vec![(4, client("web-0")), (5, client("web-1"))]);
    let api = pod("shop", "api-0", &[("app", "api")], &[]);
    let s = scores(api.clone(), &ALL);
    // Costs 1000 (four nodes in r1), 5, 5, 1000 (unlabelled).
    assert_eq!(s, vec![0, 0, 0, 0, 100, 100, 0]);
    assert_eq!(winner(&ALL, &s), 4);
    // A client in another namespace does not declare this backend.
    setup(
        "{}",
        vec![(
            4,
            pod("other", "web-0", &[("app", "web")], &[(PEERS, "app=api:5")]),
        )],
    );
    assert_eq!(scores(api.clone(), &ALL), vec![0; 7]);
    // ... unless its peer-namespaces includes the backend's.
    setup(
        "{}",
        vec![(
            4,
            pod(
                "other",
                "web-0",
                &[("app", "web")],
                &[(PEERS, "app=api:5"), (PEER_NS, "shop")],
            ),
        )],
    );
    assert_eq!(winner(&ALL, &scores(api, &ALL)), 4);
}

#[test]
fn both_directions_add_up_and_same_node_costs_same_node() {
    // web declares db with 2; db declares web with 3: the pair weighs 5.
    setup(
        "{}",
        vec![(
            0,
            pod("shop", "db-0", &[("app", "db")], &[(PEERS, "app=web:3")]),
        )],
    );
    let raw = raw_scores(frontend(&[(PEERS, "app=db:2")]), &ALL);
    assert_eq!(raw, vec![0, 5, 50, 50, 500, 500, 500]);
    // Overlapping entries take the largest weight, not the sum.
    setup(
        "{}",
        vec![(
            0,
            pod("shop", "db-0", &[("app", "db"), ("tier", "data")], &[]),
        )],
    );
    let raw = raw_scores(frontend(&[(PEERS, "app=db:2; tier=data:7")]), &[2]);
    assert_eq!(raw, vec![70]);
}

#[test]
fn a_pod_does_not_pair_with_itself() {
    let me = pod("shop", "web-0", &[("app", "web")], &[(PEERS, "app=web")]);
    setup("{}", vec![(4, me.clone())]);
    assert_eq!(scores(me.clone(), &ALL), vec![0; 7]);
    // Its replicas are peers, though.
    setup(
        "{}",
        vec![(
            4,
            pod("shop", "web-1", &[("app", "web")], &[(PEERS, "app=web")]),
        )],
    );
    assert_eq!(winner(&ALL, &scores(me, &ALL)), 4);
}

#[test]
fn weights_change_the_winner() {
    let placed = || {
        vec![
            (0, db("db-0")),
            (4, pod("shop", "cache-0", &[("app", "cache")], &[])),
        ]
    };
    setup("{}", placed());
    let s = scores(frontend(&[(PEERS, "app=db:1; app=cache:5")]), &ALL);
    assert_eq!(winner(&ALL, &s), 4);
    setup("{}", placed());
    let s = scores(frontend(&[(PEERS, "app=db:5; app=cache:1")]), &ALL);
    assert_eq!(winner(&ALL, &s), 0);
    // Equal weights: a tie between the two peers' nodes.
    let s = scores(frontend(&[(PEERS, "app=db; app=cache")]), &ALL);
    assert_eq!(s[0], s[4]);
}

#[test]
fn the_cost_matrix_overrides_topology_costs() {
    // db in r1a; candidates in r1b (same region: 10) and r2a (other region: 100).
    let feasible = [2, 4];
    setup("{}", vec![(0, db("db-0"))]);
    assert_eq!(
        scores(frontend(&[(PEERS, "app=db")]), &feasible),
        vec![100, 0]
    );
    // r2a is well connected to r1a (given in one direction only).
    setup(
        r#"{"zoneCosts": {"r2a": {"r1a": 3}}}"#,
        vec![(0, db("db-0"))],
    );
    assert_eq!(
        scores(frontend(&[(PEERS, "app=db")]), &feasible),
        vec![0, 100]
    );
    assert_eq!(
        raw_scores(frontend(&[(PEERS, "app=db")]), &[0, 1, 2, 4]),
        vec![0, 1, 10, 3]
    );
    // Per-proximity costs are configurable too.
    setup(
        r#"{"costs": {"sameRegion": 500, "sameNode": 7}}"#,
        vec![(0, db("db-0"))],
    );
    assert_eq!(
        raw_scores(frontend(&[(PEERS, "app=db")]), &[0, 1, 2, 4, 6]),
        vec![7, 1, 500, 100, 100]
    );
    setup(r#"{"costs": {"unknown": 0}}"#, vec![(0, db("db-0"))]);
    let s = scores(frontend(&[(PEERS, "app=db")]), &[1, 6]);
    assert_eq!(s, vec![0, 100]);
}

#[test]
fn bad_pod_annotations_fail_the_cycle_naming_the_annotation() {
    setup("{}", vec![(2, db("db-0"))]);
    let table = [
        (
            vec![(PEERS, "app=db, app in (a")],
            "invalid annotation network.wasmsched.io/peers: entry 1 \"app=db, app in (a\": unclosed parenthesis",
        ),
        (
            vec![(PEERS, "app=db; app in (a")],
            "invalid annotation network.wasmsched.io/peers: entry 2 \"app in (a\": unclosed parenthesis",
        ),
        (
            vec![(PEERS, "app=db:-1")],
            "invalid annotation network.wasmsched.io/peers: entry 1 \"app=db:-1\": weight \"-1\" must be an integer from 1 to 1000",
        ),
        (
            vec![(PEERS, "app=db:heavy")],
            "invalid annotation network.wasmsched.io/peers: entry 1 \"app=db:heavy\": weight \"heavy\" must be an integer from 1 to 1000",
        ),
        (
            vec![(PEERS, "app=db:10, app=cache")],
            "invalid annotation network.wasmsched.io/peers: entry 1 \"app=db:10, app=cache\": weight \"10, app=cache\" must end the entry; separate peers with \";\"",
        ),
        (vec![(PEERS, "")], "invalid annotation network.wasmsched.io/peers: no peer entries"),
        (
            vec![(PEERS, "app=db"), (MAX_DISTANCE, "rack")],
            "invalid annotation network.wasmsched.io/max-distance: \"rack\": must be node, zone or region",
        ),
        (
            vec![(MAX_DISTANCE, "Zone")],
            "invalid annotation network.wasmsched.io/max-distance: \"Zone\": must be node, zone or region",
        ),
        (
            vec![(PEERS, "app=db"), (PEER_NS, "shop,,x")],
            "invalid annotation network.wasmsched.io/peer-namespaces: namespace 2 \"\" is not a valid namespace name",
        ),
    ];
    for (annotations, want) in table {
        let err = runtime::cycle_start::<P>(frontend(&annotations)).unwrap_err();
        assert_eq!(err, want);
    }
}

#[test]
fn a_placed_pod_with_a_bad_peers_annotation_is_ignored() {
    setup(
        "{}",
        vec![
            (
                4,
                pod(
                    "shop",
                    "web-0",
                    &[("app", "web")],
                    &[(PEERS, "app in (api")],
                ),
            ),
            (
                5,
                pod(
                    "shop",
                    "web-1",
                    &[("app", "web")],
                    &[(PEERS, "app=api"), (PEER_NS, "Bad")],
                ),
            ),
        ],
    );
    let api = pod("shop", "api-0", &[("app", "api")], &[]);
    assert_eq!(scores(api.clone(), &ALL), vec![0; 7]);
    // Cached: a second cycle behaves the same.
    assert_eq!(scores(api, &ALL), vec![0; 7]);
    // The broken pods can still be selected by a valid declaration.
    let s = scores(
        pod("shop", "api-1", &[("app", "api")], &[(PEERS, "app=web")]),
        &ALL,
    );
    assert_eq!(s[4], 100);
    assert_eq!(s[5], 100);
}

#[test]
fn follows_cluster_changes() {
    let nodes = setup("{}", vec![(2, db("db-0"))]);
    assert_eq!(
        winner(&ALL, &scores(frontend(&[(PEERS, "app=db")]), &ALL)),
        2
    );
    runtime::apply::<NetworkLocality>(vec![
        Delta::PodRemove(Removal {
            node: 2,
            pod_uid: "shop/db-0".to_string(),
        }),
        place(5, db("db-1"), &nodes),
    ]);
    assert_eq!(
        winner(&ALL, &scores(frontend(&[(PEERS, "app=db")]), &ALL)),
        5
    );
    // A node relabelled into another zone moves its pods with it.
    runtime::apply::<NetworkLocality>(vec![Delta::NodeSet((
        5,
        node("c1", Some("r1a"), Some("r1")),
    ))]);
    let s = scores(frontend(&[(PEERS, "app=db")]), &ALL);
    assert_eq!(s[0], 99);
    assert_eq!(s[4], 0);
    runtime::apply::<NetworkLocality>(vec![Delta::NodeRemove(5)]);
    assert_eq!(
        scores(frontend(&[(PEERS, "app=db")]), &[0, 1, 2, 3, 4, 6]),
        vec![0; 6]
    );
}

#[test]
fn bad_args_fail_init_naming_the_field() {
    let table = [
        ("{\"cost\": {}}", "network-locality args: cost: unknown field (expected costs, zoneCosts)"),
        (
            "{\"costs\": {\"sameZon\": 1}}",
            "network-locality args: costs.sameZon: unknown field (expected sameNode, sameZone, sameRegion, crossRegion, unknown)",
        ),
        (
            "{\"costs\": {\"sameZone\": -1}}",
            "network-locality args: costs.sameZone: must be an integer from 0 to 1000000, got -1",
        ),
        (
            "{\"costs\": {\"crossRegion\": \"high\"}}",
            "network-locality args: costs.crossRegion: must be an integer from 0 to 1000000, got \"high\"",
        ),
        (
            "{\"costs\": {\"unknown\": 1.5}}",
            "network-locality args: costs.unknown: must be an integer from 0 to 1000000, got 1.5",
        ),
        ("{\"costs\": 3}", "network-locality args: costs: must be an object"),
        ("{\"zoneCosts\": []}", "network-locality args: zoneCosts: must be an object"),
        (
            "{\"zoneCosts\": {\"a\": 5}}",
            "network-locality args: zoneCosts.a: must be an object of zone: cost",
        ),
        (
            "{\"zoneCosts\": {\"a\": {\"b\": 2000000}}}",
            "network-locality args: zoneCosts.a.b: must be an integer from 0 to 1000000, got 2000000",
        ),
        (
            "{\"zoneCosts\": {\"a\": {\"b\": 5}, \"b\": {\"a\": 7}}}",
            "network-locality args: zoneCosts.b.a: 7 conflicts with zoneCosts.a.b: 5 (costs are symmetric)",
        ),
        ("[1]", "network-locality args: must be a JSON object"),
    ];
    for (args, want) in table {
        let err = match runtime::init::<P>(args) {
            Ok(()) => panic!("{args} accepted"),
            Err(e) => e,
        };
        assert_eq!(err, want, "{args}");
    }
    assert!(runtime::init::<P>("{not json")
        .unwrap_err()
        .starts_with("network-locality args: not valid JSON: "));
    // Accepted forms.
    for args in [
        "{}",
        "",
        "null",
        r#"{"zoneCosts": {"a": {"b": 5}, "b": {"a": 5}}}"#,
    ] {
        runtime::init::<P>(args).unwrap_or_else(|e| panic!("{args}: {e}"));
    }
    let full = r#"{"costs": {"sameNode":0,"sameZone":1,"sameRegion":10,"crossRegion":100,"unknown":100},
                   "zoneCosts": {"us-east-1a": {"us-east-1b": 5}}}"#;
    let model = crate::parse_args(full).unwrap();
    assert_eq!(model.zone_cost("us-east-1b", "us-east-1a"), Some(5));
    assert_eq!(model.costs, crate::locality::Costs::default());
}

#[test]
fn normalization_is_inverse_min_max() {
    let mut s = vec![0, 1, 10, 100, 55];
    normalize_costs(&mut s);
    assert_eq!(s, vec![100, 99, 90, 0, 45]);
    let mut s = vec![7, 7];
    normalize_costs(&mut s);
    assert_eq!(s, vec![100, 100]);
    let mut s = vec![0, i64::MAX, 1];
    normalize_costs(&mut s);
    assert_eq!(s, vec![100, 0, 100]);
    let mut s: Vec<i64> = vec![];
    normalize_costs(&mut s);
    assert!(s.is_empty());
}
