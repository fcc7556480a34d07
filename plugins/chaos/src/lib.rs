//! A test plugin whose misbehaviour is chosen by its args, so the host's
//! containment (deadline, memory cap, traps, range checks) is tested with a
//! real component rather than a mock.
//!
//! Args: `{"misbehave": "loop"|"grow"|"trap"|"bad-score"|"sleep"|"spam"|"host-error"|"none",
//! "at": "init"|"cycle"|"filter"|"score"|"post-filter", "only_pod": "name",
//! "max_pods": N, "veto_label": "key", "rank_by_node_label": "key"}`. With
//! `only_pod`, the misbehaviour happens only in that pod's cycle.
//! `sleep` sleeps forever (through `wasi:clocks` and `wasi:io/poll`),
//! `spam` writes 4 MiB of lines with escape sequences to stderr, and
//! `host-error` asks WASI for more random bytes than it gives (a host call
//! that returns an error). Behaviour when not misbehaving: Filter rejects
//! nodes labelled `chaos/reject: "true"` with reason `chaos says no`, and
//! (with `max_pods`) nodes already holding that many pods with reason
//! `chaos: too many pods` (which evicting pods resolves: preemption's
//! what-ifs must show the plugin the node without its victims); Score is
//! the integer in label `chaos/score` (0 when absent). PostFilter
//! (preemption advice): vetoes victims carrying label `veto_label`, and
//! ranks the candidates by the integer in their node's label
//! `rank_by_node_label` (lowest first).

use serde::Deserialize;
use wasmsched_plugin_sdk::types::{Candidate, Pod, PreemptionAdvice};
use wasmsched_plugin_sdk::{export_plugin, reject, Cluster, NodeExt, NodeState, Plugin, Rejection};

#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "kebab-case")]
enum Misbehave {
    #[default]
    None,
    Loop,
    Grow,
    Trap,
    BadScore,
    Sleep,
    Spam,
    HostError,
}

// The one WASI function `host-error` calls, declared here (its signature
// is WASI 0.2's) so the plugin needs no WASI bindings crate.
wasmsched_plugin_sdk::__wit_bindgen::generate!({
    inline: "package wasi:random@0.2.0; interface random { get-random-bytes: func(len: u64) -> list<u8>; get-random-u64: func() -> u64; } world chaos-imports { import random; }",
    world: "chaos-imports",
    runtime_path: "::wasmsched_plugin_sdk::__wit_bindgen::rt",
});

#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "kebab-case")]
enum At {
    Init,
    Cycle,
    Filter,
    #[default]
    Score,
    PostFilter,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    misbehave: Misbehave,
    #[serde(default)]
    at: At,
    only_pod: Option<String>,
    max_pods: Option<usize>,
    veto_label: Option<String>,
    rank_by_node_label: Option<String>,
}

pub struct Chaos {
    args: Args,
}

/// Whether this cycle misbehaves.
pub struct Cycle(bool);

fn act(m: Misbehave) {
    match m {
        Misbehave::Loop => {
            let mut x: u64 = 0;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        Misbehave::Grow => {
            let mut hog: Vec<Vec<u8>> = Vec::new();
            loop {
                hog.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hog);
            }
        }
        Misbehave::Trap => std::process::abort(),
        Misbehave::Sleep => loop {
            std::thread::sleep(std::time::Duration::from_secs(3));
        },
        Misbehave::Spam => {
            let line = format!("chaos \x1b[31mred\x1b[0m {}", "x".repeat(4000));
            for _ in 0..1024 {
                eprintln!("{line}");
            }
        }
        Misbehave::HostError => {
            std::hint::black_box(wasi::random::random::get_random_bytes(u64::MAX));
        }
        Misbehave::None | Misbehave::BadScore => {}
    }
}

impl Plugin for Chaos {
    type Cycle = Cycle;

    fn init(args: &str) -> Result<Self, String> {
        let args: Args = serde_json::from_str(args).map_err(|e| format!("chaos args: {e}"))?;
        if args.at == At::Init {
            act(args.misbehave);
        }
        Ok(Self { args })
    }

    fn cycle_start(&self, pod: &Pod, _cluster: &Cluster) -> Result<Cycle, String> {
        let on = self.args.only_pod.as_ref().is_none_or(|p| *p == pod.name);
        if on && self.args.at == At::Cycle {
            act(self.args.misbehave);
        }
        Ok(Cycle(on))
    }

    fn filter(
        &self,
        cycle: &Cycle,
        _pod: &Pod,
        node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<(), Rejection> {
        if cycle.0 && self.args.at == At::Filter {
            act(self.args.misbehave);
        }
        if node.node.label("chaos/reject") == Some("true") {
            return Err(reject("chaos says no"));
        }
        if self.args.max_pods.is_some_and(|max| node.pods.len() >= max) {
            return Err(reject("chaos: too many pods"));
        }
        Ok(())
    }

    fn post_filter(
        &self,
        cycle: &Cycle,
        _pod: &Pod,
        candidates: &[Candidate],
        cluster: &Cluster,
    ) -> Result<PreemptionAdvice, String> {
        if cycle.0 && self.args.at == At::PostFilter {
            act(self.args.misbehave);
        }
        let vetoed = match &self.args.veto_label {
            Some(key) => candidates
                .iter()
                .flat_map(|c| &c.victims)
                .filter(|v| v.pod.labels.iter().any(|(k, _)| k == key))
                .map(|v| v.pod.uid.clone())
                .collect(),
            None => Vec::new(),
        };
        let mut ranking: Vec<u32> = Vec::new();
        if let Some(key) = &self.args.rank_by_node_label {
            let rank = |c: &Candidate| {
                cluster
                    .node(c.node)
                    .and_then(|n| n.node.label(key))
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(i64::MAX)
            };
            ranking = (0..candidates.len() as u32).collect();
            ranking.sort_by_key(|&i| rank(&candidates[i as usize]));
        }
        Ok(PreemptionAdvice { vetoed, ranking })
    }

    fn score(
        &self,
        cycle: &Cycle,
        _pod: &Pod,
        node: &NodeState,
        _cluster: &Cluster,
    ) -> Result<i64, String> {
        if cycle.0 && self.args.at == At::Score {
            act(self.args.misbehave);
            if self.args.misbehave == Misbehave::BadScore {
                return Ok(1000);
            }
        }
        Ok(node
            .node
            .label("chaos/score")
            .and_then(|s| s.parse().ok())
            .unwrap_or(0))
    }
}

export_plugin!(Chaos: filter, score, post_filter);
