//! ImageLocality: nodes that already hold the pod's images score higher,
//! by the images' sizes, scaled down for images most nodes have
//! (upstream `plugins/imagelocality`, kube-scheduler 1.37).

use std::collections::HashMap;
use std::sync::Arc;

use crate::framework::{
    CycleContext, CycleState, Decision, NodeInfo, Plugin, PluginError, PreScorePlugin, ScorePlugin,
};

pub const NAME: &str = "ImageLocality";

const MB: i64 = 1024 * 1024;
/// Below this many (scaled) bytes a node scores 0.
const MIN_THRESHOLD: i64 = 23 * MB;
/// Per image of the pod, the (scaled) bytes that score 100.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

const PRE_SCORE_KEY: &str = "PreScoreImageLocality";

#[derive(Debug, Clone, Copy, Default)]
pub struct ImageLocality;

impl Plugin for ImageLocality {
    fn name(&self) -> &str {
        NAME
    }
}

/// How many of the cluster's nodes hold each of the pod's images, and the
/// number of nodes (upstream's `ImageStateSummary.NumNodes` and
/// `totalNumNodes`, over the whole snapshot).
#[derive(Debug, Clone, Default)]
struct Spread {
    holders: HashMap<String, usize>,
    total: usize,
}

impl Spread {
    fn compute(ctx: &CycleContext) -> Self {
        let holders = ctx
            .pod
            .images
            .iter()
            .map(|i| (i.clone(), ctx.snapshot.image_holders(i)))
            .collect();
        Self {
            holders,
            total: ctx.snapshot.num_nodes(),
        }
    }

    /// Upstream `sumImageScores` and `calculatePriority`.
    fn score(&self, pod_images: &[String], node: &NodeInfo) -> i64 {
        let mut sum: i64 = 0;
        for image in pod_images {
            let Some(&size) = node.node.images.get(image) else {
                continue;
            };
            let holders = self.holders.get(image).copied().unwrap_or(0);
            let spread = holders as f64 / self.total.max(1) as f64;
            sum = sum.saturating_add((size as f64 * spread) as i64);
        }
        calculate_priority(sum, pod_images.len())
    }
}

/// Upstream `calculatePriority`: the sum clamped to
/// [23 MiB, 1000 MiB x images], mapped onto 0..=100.
fn calculate_priority(sum: i64, image_count: usize) -> i64 {
    let max_threshold = MAX_CONTAINER_THRESHOLD.saturating_mul(image_count as i64);
    if max_threshold <= MIN_THRESHOLD {
        return 0;
    }
    let sum = sum.clamp(MIN_THRESHOLD, max_threshold);
    crate::framework::interface::MAX_NODE_SCORE * (sum - MIN_THRESHOLD)
        / (max_threshold - MIN_THRESHOLD)
}

impl PreScorePlugin for ImageLocality {
    /// Counts the holders of the pod's images once per cycle; Skip when no
    /// node holds any (every score would be 0).
    fn pre_score(
        &self,
        ctx: &CycleContext,
        state: &mut CycleState,
        _feasible: &[&NodeInfo],
    ) -> Result<Decision, PluginError> {
        let spread = Spread::compute(ctx);
        if spread.holders.values().all(|&n| n == 0) {
            return Ok(Decision::Skip);
        }
        state.write(PRE_SCORE_KEY, spread);
        Ok(Decision::Run)
    }
}

impl ScorePlugin for ImageLocality {
    fn score(
        &self,
        ctx: &CycleContext,
        state: &CycleState,
        node: &NodeInfo,
    ) -> Result<i64, PluginError> {
        Ok(match state.read::<Spread>(PRE_SCORE_KEY) {
            Some(s) => s.score(&ctx.pod.images, node),
            None => Spread::compute(ctx).score(&ctx.pod.images, node),
        })
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<crate::framework::PluginBundle, String> {
    super::helpers::no_args(NAME, args)?;
    let p = Arc::new(ImageLocality);
    Ok(crate::framework::PluginBundle::new(p.clone())
        .with_pre_score(&p)
        .with_score(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::framework::plugins::testutil::*;

    const MIB: i64 = 1024 * 1024;

    /// A node with `status.images` as the kubelet reports it, read
    /// through `Node::from_k8s`.
    fn node(name: &str, images: &[(&[&str], i64)]) -> crate::model::Node {
        let images: Vec<Value> = images
            .iter()
            .map(|(names, mib)| json!({"names": names, "sizeBytes": mib * MIB}))
            .collect();
        let k: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4"}, "images": images}
        }))
        .unwrap();
        crate::model::Node::from_k8s(&k).unwrap()
    }

    fn pod(spec: Value) -> crate::model::Pod {
        let mut p = P::new("p");
        for (k, v) in spec.as_object().unwrap() {
            p = p.spec(k, v.clone());
        }
        p.build()
    }

    fn containers(images: &[&str]) -> Value {
        let c: Vec<Value> = images
            .iter()
            .enumerate()
            .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
            .collect();
        json!(c)
    }

    fn scores(p: &crate::model::Pod, nodes: Vec<crate::model::Node>) -> Vec<i64> {
        let snap = cluster(nodes, vec![]);
        raw_scores(&ImageLocality, p, &snap).into_values().collect()
    }

    // Upstream image_locality_test.go's node statuses.
    fn n403002000(name: &str) -> crate::model::Node {
        node(
            name,
            &[
                (&["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
                (&["gcr.io/300:latest", "gcr.io/300:v1"], 300),
                (&["gcr.io/2000:latest"], 2000),
            ],
        )
    }

    fn n25010(name: &str) -> crate::model::Node {
        node(
            name,
            &[
                (&["gcr.io/250:latest"], 250),
                (&["gcr.io/10:latest", "gcr.io/10:v1"], 10),
            ],
        )
    }

    fn n60040900(name: &str) -> crate::model::Node {
        node(
            name,
            &[
                (&["gcr.io/600:latest"], 600),
                (&["gcr.io/40:latest"], 40),
                (&["gcr.io/900:latest"], 900),
            ],
        )
    }

    fn n300600900(name: &str) -> crate::model::Node {
        node(
            name,
            &[
                (&["gcr.io/300:latest"], 300),
                (&["gcr.io/600:latest"], 600),
                (&["gcr.io/900:latest"], 900),
            ],
        )
    }

    fn n400030(name: &str) -> crate::model::Node {
        node(
            name,
            &[(&["gcr.io/4000:latest"], 4000), (&["gcr.io/30:latest"], 30)],
        )
    }

    fn n203040(name: &str) -> crate::model::Node {
        node(
            name,
            &[
                (&["gcr.io/20:latest"], 20),
                (&["gcr.io/30:latest"], 30),
                (&["gcr.io/40:latest"], 40),
            ],
        )
    }

    /// Upstream image_locality_test.go's TestImageLocalityPriority, case
    /// by case (its node statuses, pods and expected scores).
    #[test]
    fn scores_are_upstreams() {
        let empty = |name| node(name, &[]);
        let c = |images: &[&str]| pod(json!({"containers": containers(images)}));
        let cases: Vec<(&str, crate::model::Pod, Vec<crate::model::Node>, Vec<i64>)> = vec![
            (
                "two images spread on two nodes, prefer the larger image one",
                c(&["gcr.io/40", "gcr.io/250"]),
                vec![n403002000("node1"), n25010("node2")],
                vec![0, 5],
            ),
            (
                "two images on one node, prefer this node",
                c(&["gcr.io/40", "gcr.io/300"]),
                vec![n403002000("node1"), n25010("node2")],
                vec![7, 0],
            ),
            (
                "if exceed limit, use limit",
                c(&["gcr.io/10", "gcr.io/4000"]),
                vec![n400030("node1"), n25010("node2")],
                vec![100, 0],
            ),
            (
                "if exceed limit, use limit (with node which has no images present)",
                c(&["gcr.io/10", "gcr.io/4000"]),
                vec![n400030("node1"), n25010("node2"), empty("node3")],
                vec![66, 0, 0],
            ),
            (
                "pod with multiple large images, node2 is preferred",
                c(&["gcr.io/300", "gcr.io/600", "gcr.io/900"]),
                vec![n60040900("node1"), n300600900("node2"), empty("node3")],
                vec![32, 36, 0],
            ),
            (
                "pod with multiple small images",
                c(&["gcr.io/30", "gcr.io/40"]),
                vec![n203040("node1"), n400030("node2")],
                vec![1, 0],
            ),
            (
                "pod with ImageVolume",
                pod(json!({
                    "containers": containers(&["gcr.io/30"]),
                    "volumes": [{"name": "v", "image": {"reference": "gcr.io/300"}}],
                })),
                vec![n300600900("node1"), n400030("node2")],
                vec![6, 0],
            ),
            (
                "same images as ImageVolume pod but as regular container images",
                c(&["gcr.io/30", "gcr.io/300"]),
                vec![n300600900("node1"), n400030("node2")],
                vec![6, 0],
            ),
            (
                "include InitContainers: two images spread on two nodes, prefer the larger image one",
                pod(json!({
                    "containers": containers(&["gcr.io/30"]),
                    "initContainers": [{"name": "i", "image": "gcr.io/300"}],
                })),
                vec![n403002000("node1"), n203040("node2")],
                vec![6, 0],
            ),
        ];
        for (name, p, nodes, want) in cases {
            assert_eq!(scores(&p, nodes), want, "{name}");
        }
    }

    #[test]
    fn untagged_names_mean_latest_and_no_holder_skips() {
        use crate::model::pod::normalized_image_name as norm;
        assert_eq!(norm("nginx"), "nginx:latest");
        assert_eq!(norm("registry:5000/app"), "registry:5000/app:latest");
        assert_eq!(norm("app:v2"), "app:v2");
        let snap = cluster(vec![node("n", &[(&["a:latest"], 500)])], vec![]);
        let p = pod(json!({"containers": containers(&["example.com/none"])}));
        let c = ctx(&p, &snap);
        let mut state = CycleState::default();
        let all: Vec<&NodeInfo> = snap.nodes().collect();
        assert_eq!(
            ImageLocality.pre_score(&c, &mut state, &all).unwrap(),
            Decision::Skip
        );
    }

    #[test]
    fn a_huge_image_size_saturates() {
        let nodes = vec![node("n", &[(&["x:latest"], i64::MAX / MIB)])];
        let p = pod(json!({"containers": containers(&["x"])}));
        assert_eq!(scores(&p, nodes), vec![100]);
    }
}
