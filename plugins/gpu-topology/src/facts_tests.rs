//! The node facts kept through random cluster changes against the same
//! questions answered by parsing the nodes afresh (an instance that never
//! saw a change).

use super::*;

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

fn random_node(rng: &mut Rng, i: u32) -> Node {
    let n = match rng.below(6) {
        0 => node(),
        1 => gfd_node(4, "NVIDIA-A100-SXM4-40GB", 40960).alloc(4),
        2 => origin_node(8, "A100", 40960)
            .alloc(8)
            .topo("0,1,2,3;4,5,6,7"),
        3 => origin_node(4, "T4", 16384).alloc(4).util("35%"),
        4 => origin_node(8, "V100", 16384)
            .alloc(8)
            .metric(METRIC_UTILIZATION, 70.0),
        _ => origin_node(4, "A100", 40960).label(LABEL_COUNT, "x"),
    };
    n.build(&format!("node-{i}"))
}

fn random_pod(rng: &mut Rng) -> P {
    let name = format!("p{}", rng.below(30));
    let p = match rng.below(5) {
        0 => pod(&name),
        1 => gpu_pod(&name, 1 + rng.below(3) as i64),
        2 => gpu_pod(&name, 1).assigned(["0", "1", "5"][rng.below(3) as usize]),
        3 => pod(&name).mem(["4096", "8192", "junk"][rng.below(3) as usize]),
        _ => gpu_pod(&name, 2).model(["A100", "t4"][rng.below(2) as usize]),
    };
    p.created(rng.below(100) as i64)
}

fn random_delta(rng: &mut Rng, mirror: &Cluster) -> Delta {
    let placed: Vec<(u32, String)> = mirror
        .pods()
        .map(|(n, p)| (n.index, p.uid.clone()))
        .collect();
    match rng.below(12) {
        0 => Delta::NodeRemove(rng.below(6) as u32),
        1 => {
            let i = rng.below(6) as u32;
            Delta::NodeSet((i, random_node(rng, i)))
        }
        2 | 3 if !placed.is_empty() => {
            let (node, pod_uid) = placed[rng.below(placed.len() as u64) as usize].clone();
            Delta::PodRemove(wasmsched_plugin_sdk::types::Removal { node, pod_uid })
        }
        _ => Delta::PodAdd(Bind {
            node: rng.below(6) as u32,
            pod: random_pod(rng).build(),
        }),
    }
}

fn shown(r: Result<Placement, Rejection>) -> Result<Placement, (String, bool)> {
    r.map_err(|r| (r.reason, r.unresolvable))
}

#[test]
fn kept_facts_answer_as_parsing_afresh() {
    let fresh = GpuTopology::new(Config::default());
    let demands: Vec<Demand> = [
        gpu_pod("d", 1),
        gpu_pod("d", 3),
        gpu_pod("d", 2).model("A100"),
        pod("d").mem("8192"),
        gpu_pod("d", 1).mem("20000"),
    ]
    .iter()
    .map(|p| fresh.demand(&p.build()).unwrap().unwrap())
    .collect();
    for seed in 1..=10u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let kept = GpuTopology::new(Config::default());
        let mut mirror = Cluster::default();
        for _ in 0..400 {
            let d = random_delta(&mut rng, &mirror);
            kept.observe(&d, &mirror);
            mirror.apply(d);
            for ns in mirror.nodes() {
                for d in &demands {
                    assert_eq!(shown(kept.place(d, ns)), shown(fresh.place(d, ns)));
                    assert_eq!(
                        kept.place_on(d, ns, false).is_ok(),
                        fresh.place(d, ns).is_ok()
                    );
                }
                assert_eq!(kept.cpu_pod_score(ns), fresh.cpu_pod_score(ns));
            }
        }
    }
}
