//! The deletion-cost controller: every interval, for each pod of an
//! opted-in ReplicaSet, read its metrics, ask the policy for a cost and
//! write it into `controller.kubernetes.io/pod-deletion-cost` when it moved
//! by more than the hysteresis threshold, under a global write rate limit.
//!
//! Writes are merge patches carrying the `resourceVersion` the decision was
//! made on: a pod changed in between (say, a person set the cost) makes the
//! API server answer 409 Conflict, and the controller reads the pod again
//! and decides again, rather than overwriting what it has not seen.

use std::collections::{BTreeMap, HashSet};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use prometheus::Registry;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::annotation::{self, Ownership};
use super::cluster::{self, WatchedInventory};
use super::config::DeletionCostConfig;
use super::decision::{decide, Action, SkipReason};
use super::facts::PodFacts;
use super::history::{LastValues, Resolved};
use super::metrics_source::Collector;
use super::policy::{self, CostPolicy};
use super::report::{Outcome, PodRow, Report};
use super::telemetry::Telemetry;
use super::workload::Inventory;

/// Attempts of one write when the pod keeps changing under it.
pub const MAX_WRITE_ATTEMPTS: u32 = 4;

/// Whether a pass writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Apply,
    DryRun,
}

/// Why the controller cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("deletion-cost policy {plugin} failed to start: {cause}")]
    Policy {
        plugin: String,
        cause: crate::wasm::PluginFailure,
    },
    #[error("registering the deletion-cost metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// The controller's state across passes.
pub struct Controller {
    cfg: DeletionCostConfig,
    policy: Arc<CostPolicy>,
    collector: Collector,
    history: LastValues,
    telemetry: Telemetry,
    limiter: DefaultDirectRateLimiter,
}

/// One policy call: (candidate, the pod's record or why it has none, its
/// metrics).
type PolicyJob = (
    usize,
    Result<policy::WitPodStatus, String>,
    Vec<(String, f64)>,
);

/// A pod whose cost is computed this pass.
struct Candidate<'a> {
    facts: &'a PodFacts,
    row: usize,
    ownership: Ownership,
}

fn quota(writes_per_second: f64) -> Quota {
    let period = Duration::from_secs_f64(1.0 / writes_per_second);
    let burst =
        NonZeroU32::new(writes_per_second.ceil().max(1.0) as u32).unwrap_or(NonZeroU32::MIN);
    Quota::with_period(period)
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(burst)
}

impl Controller {
    /// Starts the policy (its `init` runs with the configured args) and
    /// registers the metrics in `registry`.
    pub fn new(cfg: DeletionCostConfig, registry: &Registry) -> Result<Self, StartError> {
        let policy = CostPolicy::new(&cfg.policy).map_err(|cause| StartError::Policy {
            plugin: cfg.policy.name.clone(),
            cause,
        })?;
        let telemetry = Telemetry::register(registry)?;
        Ok(Controller {
            collector: Collector::new(cfg.prometheus.clone(), cfg.pod_metrics.clone()),
            limiter: RateLimiter::direct(quota(cfg.writes_per_second)),
            policy: Arc::new(policy),
            history: LastValues::default(),
            telemetry,
            cfg,
        })
    }

    pub fn config(&self) -> &DeletionCostConfig {
        &self.cfg
    }

    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    /// One pass over the managed pods of `inventory`, at `now`: list the
    /// pods, read their metrics, ask the policy, write the costs that
    /// moved, count.
    pub async fn pass(
        &mut self,
        client: &Client,
        inventory: &Inventory,
        mode: Mode,
        now: Timestamp,
    ) -> Report {
        let mut report = Report {
            dry_run: mode == Mode::DryRun,
            ..Report::default()
        };
        let (row_facts, candidates) = self.list(inventory, &mut report);
        let computable = self.read_metrics(&candidates, now, &mut report).await;
        let answers = self.ask_policy(&candidates, computable, now).await;
        let writes = self.decide_writes(&candidates, answers, &mut report);
        for (i, from, to) in writes {
            let c = &candidates[i];
            let outcome = match mode {
                Mode::DryRun => Outcome::WouldWrite { from, to },
                Mode::Apply => self.write(client, c.facts, to, &mut report).await,
            };
            report.pods[c.row].outcome = outcome;
        }
        self.count(&row_facts, &report);
        report
    }

    /// A row per managed pod (once, even when two ReplicaSets list it);
    /// returns every pod's facts (aligned with `report.pods`) and the pods
    /// whose cost may be computed.
    fn list<'a>(
        &mut self,
        inventory: &'a Inventory,
        report: &mut Report,
    ) -> (Vec<&'a PodFacts>, Vec<Candidate<'a>>) {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut row_facts: Vec<&PodFacts> = Vec::new();
        let mut candidates: Vec<Candidate> = Vec::new();
        for rs in inventory.managed(&self.cfg.opt_in) {
            for facts in rs.pods.iter().copied() {
                if !seen.insert(facts.uid.as_str()) {
                    continue;
                }
                let row = report.pods.len();
                row_facts.push(facts);
                report.pods.push(PodRow {
                    namespace: facts.namespace.clone(),
                    pod: facts.name.clone(),
                    replica_set: rs.name.clone(),
                    current: facts.annotations.get(annotation::COST).cloned(),
                    cost: None,
                    outcome: skipped(SkipReason::NoOpinion, None),
                    metrics: BTreeMap::new(),
                    faults: Vec::new(),
                });
                let ownership = Ownership::of(&facts.annotations);
                match early_skip(facts, &ownership) {
                    Some(reason) => report.pods[row].outcome = skipped(reason, None),
                    None => candidates.push(Candidate {
                        facts,
                        row,
                        ownership,
                    }),
                }
            }
        }
        self.history.retain(&seen);
        (row_facts, candidates)
    }

    /// Reads the candidates' metrics; returns (candidate, its resolved
    /// metrics) for those whose metrics are usable.
    async fn read_metrics(
        &mut self,
        candidates: &[Candidate<'_>],
        now: Timestamp,
        report: &mut Report,
    ) -> Vec<(usize, Resolved)> {
        let pods: Vec<&PodFacts> = candidates.iter().map(|c| c.facts).collect();
        let readings = self.collector.collect(&pods).await;
        let mut computable = Vec::new();
        for (i, c) in candidates.iter().enumerate() {
            let none = BTreeMap::new();
            let r = readings.get(&c.facts.uid).unwrap_or(&none);
            let resolved = self
                .history
                .resolve(&c.facts.uid, r, now, self.cfg.stale_after);
            let row = &mut report.pods[c.row];
            row.metrics = resolved.metrics.iter().cloned().collect();
            row.faults = resolved
                .faults
                .iter()
                .map(|(m, f)| format!("{m}: {f}"))
                .collect();
            if let Some((metric, fault)) = resolved.faults.first() {
                for (m, f) in &resolved.faults {
                    self.telemetry.error(f.cause());
                    tracing::warn!(pod = %c.facts.key(), metric = %m, fault = %f, "metric unusable; the pod's cost is held");
                }
                row.outcome = skipped(SkipReason::MetricsFault, Some(format!("{metric}: {fault}")));
                continue;
            }
            computable.push((i, resolved));
        }
        computable
    }

    /// The policy's cost for each computable candidate. The policy is
    /// synchronous wasm: the batch runs off the async runtime.
    async fn ask_policy(
        &self,
        candidates: &[Candidate<'_>],
        computable: Vec<(usize, Resolved)>,
        now: Timestamp,
    ) -> Vec<(usize, PolicyAnswer)> {
        let jobs: Vec<PolicyJob> = computable
            .into_iter()
            .map(|(i, r)| (i, policy::pod_status(candidates[i].facts, now), r.metrics))
            .collect();
        let policy = self.policy.clone();
        tokio::task::spawn_blocking(move || {
            jobs.into_iter()
                .map(|(i, status, metrics)| {
                    let answer = match status {
                        Err(e) => Err((SkipReason::PodInvalid, e)),
                        Ok(s) => policy
                            .cost(&s, &metrics)
                            .map_err(|f| (SkipReason::PluginError, f.to_string())),
                    };
                    (i, answer)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default()
    }

    /// Records each answer; returns the writes to make, biggest moves
    /// first (under the rate limit they matter most).
    fn decide_writes(
        &self,
        candidates: &[Candidate<'_>],
        answers: Vec<(usize, PolicyAnswer)>,
        report: &mut Report,
    ) -> Vec<(usize, Option<i32>, i32)> {
        let mut writes: Vec<(usize, Option<i32>, i32)> = Vec::new();
        for (i, answer) in answers {
            let c = &candidates[i];
            let row = &mut report.pods[c.row];
            match answer {
                Err((reason, message)) => {
                    self.telemetry.error(match reason {
                        SkipReason::PodInvalid => "pod-invalid",
                        _ => "plugin",
                    });
                    tracing::warn!(pod = %c.facts.key(), plugin = %self.policy.name(), %message, "no cost computed; the pod's cost is held");
                    row.outcome = skipped(reason, Some(message));
                }
                Ok(cost) => {
                    row.cost = cost;
                    match decide(&c.ownership, cost, self.cfg.hysteresis) {
                        Action::Skip(reason) => row.outcome = skipped(reason, None),
                        Action::Write { from, to } => writes.push((i, from, to)),
                    }
                }
            }
        }
        writes.sort_by_key(|(_, from, to)| {
            std::cmp::Reverse((i64::from(*to) - i64::from(from.unwrap_or(0))).unsigned_abs())
        });
        writes
    }

    /// Counts the pass's outcomes and publishes the costs the ReplicaSet
    /// controller will use now.
    fn count(&self, row_facts: &[&PodFacts], report: &Report) {
        for row in &report.pods {
            match &row.outcome {
                Outcome::Written { .. } => self.telemetry.updates.inc(),
                Outcome::Skipped { reason, .. } => self.telemetry.skip(reason.as_str()),
                Outcome::WouldWrite { .. } | Outcome::Failed { .. } => {}
            }
        }
        let costs: Vec<i32> = row_facts
            .iter()
            .zip(&report.pods)
            .filter(|(facts, _)| facts.active())
            .map(|(facts, row)| match &row.outcome {
                Outcome::Written { to, .. } => *to,
                _ => facts.deletion_cost(),
            })
            .collect();
        self.telemetry.costs.publish(&costs);
    }

    /// Patches one pod's cost, retrying on conflicts after reading the pod
    /// again (and deciding again: it may have been taken over meanwhile).
    async fn write(
        &self,
        client: &Client,
        facts: &PodFacts,
        to: i32,
        report: &mut Report,
    ) -> Outcome {
        let api: Api<Pod> = Api::namespaced(client.clone(), &facts.namespace);
        let mut resource_version = facts.resource_version.clone();
        let mut from = match Ownership::of(&facts.annotations) {
            Ownership::Ours(v) => Some(v),
            _ => None,
        };
        for attempt in 1..=MAX_WRITE_ATTEMPTS {
            self.limiter.until_ready().await;
            let value = to.to_string();
            let patch = json!({"metadata": {
                "resourceVersion": resource_version,
                "annotations": {annotation::COST: value, annotation::MANAGED: value},
            }});
            match api
                .patch(&facts.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    tracing::info!(pod = %facts.key(), from = ?from, to, "pod-deletion-cost written");
                    return Outcome::Written { from, to };
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    return skipped(SkipReason::Gone, None)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    report.conflicts_retried += 1;
                    tracing::debug!(pod = %facts.key(), attempt, "conflict writing the cost; reading the pod again");
                    let fresh = match api.get_opt(&facts.name).await {
                        Ok(Some(p)) => p,
                        Ok(None) => return skipped(SkipReason::Gone, None),
                        Err(e) => return self.failed("api", e.to_string()),
                    };
                    if fresh.metadata.deletion_timestamp.is_some() {
                        return skipped(SkipReason::Terminating, None);
                    }
                    let annotations = fresh.metadata.annotations.clone().unwrap_or_default();
                    let ownership = Ownership::of(&annotations);
                    match decide(&ownership, Some(to), self.cfg.hysteresis) {
                        Action::Skip(reason) => {
                            return skipped(reason, Some("after a conflict".into()))
                        }
                        Action::Write { from: f, .. } => from = f,
                    }
                    resource_version = fresh.metadata.resource_version;
                }
                Err(e) => return self.failed("api", e.to_string()),
            }
        }
        self.failed(
            "api-conflict",
            format!("the pod kept changing: {MAX_WRITE_ATTEMPTS} conflicting writes"),
        )
    }

    fn failed(&self, cause: &str, message: String) -> Outcome {
        self.telemetry.error(cause);
        tracing::warn!(cause, %message, "writing a pod-deletion-cost failed");
        Outcome::Failed {
            cause: cause.to_string(),
            message,
        }
    }
}

fn skipped(reason: SkipReason, detail: Option<String>) -> Outcome {
    Outcome::Skipped { reason, detail }
}

/// One pass against the cluster, with a fresh read of the managed
/// workloads: `wasmsched deletion-cost`. Registers the metrics in
/// `registry` (once per registry: call it once per process, or use
/// [`Controller`] for repeated passes).
pub async fn reconcile_once(
    client: &Client,
    cfg: DeletionCostConfig,
    registry: &Registry,
    mode: Mode,
) -> anyhow::Result<Report> {
    let mut controller = Controller::new(cfg, registry)?;
    let inventory = cluster::list_managed(client, &controller.cfg.opt_in).await?;
    Ok(controller
        .pass(client, &inventory, mode, Timestamp::now())
        .await)
}

/// [`reconcile_once`] with a client from `kubeconfig` (or the in-cluster
/// configuration) on a runtime of its own: the `deletion-cost` command.
pub fn reconcile_once_blocking(
    kubeconfig: Option<&std::path::Path>,
    cfg: DeletionCostConfig,
    mode: Mode,
) -> anyhow::Result<Report> {
    crate::runtime::tokio_runtime()?.block_on(async {
        let client = crate::runtime::client::client(kubeconfig).await?;
        reconcile_once(&client, cfg, &Registry::new(), mode).await
    })
}

/// The controller of `wasmsched run`: watches Deployments, ReplicaSets and
/// Pods, and runs a pass every `cfg.interval` until `shutdown` completes
/// (for example `async move { let _ = rx.wait_for(|stop| *stop).await; }`
/// with a `tokio::sync::watch::Receiver<bool>`, or a
/// `CancellationToken::cancelled_owned()`). Only the leader should run it:
/// end it with the lease. Fails only at start (the policy does not start,
/// the metrics cannot be registered); a pass's errors are logged and
/// counted in the metrics.
pub async fn run_controller(
    client: Client,
    cfg: DeletionCostConfig,
    registry: &Registry,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut controller = Controller::new(cfg, registry)?;
    let interval = controller.cfg.interval;
    let stop = CancellationToken::new();
    // The watches end with this function, however it ends.
    let _stop_watches = stop.clone().drop_guard();
    let watched = WatchedInventory::start(client.clone(), stop);
    tokio::pin!(shutdown);
    tokio::select! {
        _ = &mut shutdown => return Ok(()),
        r = watched.ready() => r?,
    }
    tracing::info!(interval = ?interval, plugin = %controller.policy.name(), "deletion-cost controller started");
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = ticker.tick() => {}
        }
        let inventory = watched.snapshot(&controller.cfg.opt_in);
        let report = tokio::select! {
            _ = &mut shutdown => break,
            r = controller.pass(&client, &inventory, Mode::Apply, Timestamp::now()) => r,
        };
        tracing::info!(summary = %report.summary(), "deletion-cost pass");
    }
    tracing::info!("deletion-cost controller stopped");
    Ok(())
}

/// Why a pod is skipped before its metrics are read, if it is.
fn early_skip(facts: &PodFacts, ownership: &Ownership) -> Option<SkipReason> {
    if facts.terminating {
        Some(SkipReason::Terminating)
    } else if !facts.active() {
        Some(SkipReason::Inactive)
    } else if matches!(ownership, Ownership::Foreign(_)) {
        // Not even its metrics are read.
        Some(SkipReason::UserSet)
    } else {
        None
    }
}

/// The policy's answer for one pod: its cost, or why there is none.
type PolicyAnswer = Result<Option<i32>, (SkipReason, String)>;
