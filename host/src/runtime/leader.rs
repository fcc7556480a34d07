//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! semantics: a candidate takes the lease only when its holder has not
//! renewed it for `leaseDuration` (measured on the candidate's own clock
//! from when it last saw the record change), and the leader stops
//! scheduling when it could not renew for `renewDeadline`. Because
//! `renewDeadline < leaseDuration`, a leader that loses its lease has
//! stopped before anyone else may start. A leader that stepped down does
//! not exit: it stays a candidate under the same identity (client-go's
//! callers exit and restart with a new one, and then wait a whole
//! `leaseDuration` for their own old lease).
//!
//! Writes use the Lease's resourceVersion, so two candidates racing for
//! an expired lease cannot both win: the API server rejects the second
//! update with a conflict.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::{mpsc, watch};

use super::client::Backoff;
use super::events::Report;
use crate::config::LeaderElection;

/// Whether this process may schedule right now. Shared with the
/// scheduling thread and the binder, which check it before every cycle
/// and every bind call.
#[derive(Debug)]
pub struct Leadership {
    start: Instant,
    /// Milliseconds since `start` until which this process leads;
    /// `u64::MAX` without leader election; 0 when not leading.
    until_ms: AtomicU64,
}

impl Leadership {
    pub fn new(always: bool) -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            until_ms: AtomicU64::new(if always { u64::MAX } else { 0 }),
        })
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// True while the last successful renewal is younger than the renew
    /// deadline (checked against the clock, so a stuck renewal loop
    /// cannot keep an old leader scheduling).
    pub fn leading(&self) -> bool {
        self.now_ms() < self.until_ms.load(Ordering::Acquire)
    }

    fn renewed(&self, at: Instant, deadline: Duration) {
        let until = (at - self.start + deadline).as_millis() as u64;
        self.until_ms.store(until, Ordering::Release);
    }

    fn resign(&self) {
        self.until_ms.store(0, Ordering::Release);
    }
}

/// What the elector observed of the current holder.
#[derive(Debug, Clone, PartialEq)]
struct Observed {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    lease_seconds: Option<i32>,
}

/// Why a leader stepped down.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Renewal {
    /// SIGTERM: release the lease and stop.
    Shutdown,
    /// Another replica holds the lease, or it could not be renewed within
    /// `renewDeadline`.
    Lost(String),
}

/// Competes for the lease.
pub struct Elector {
    api: Api<Lease>,
    cfg: LeaderElection,
    identity: String,
    leadership: Arc<Leadership>,
    observed: Option<(Observed, Instant)>,
    reports: Option<mpsc::UnboundedSender<Report>>,
}

impl Elector {
    pub fn new(
        client: Client,
        cfg: LeaderElection,
        identity: String,
        leadership: Arc<Leadership>,
    ) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            identity,
            leadership,
            observed: None,
            reports: None,
        }
    }

    /// Where the `LeaderElection` events go.
    pub fn report_to(mut self, reports: mpsc::UnboundedSender<Report>) -> Self {
        self.reports = Some(reports);
        self
    }

    fn lease(&self) -> String {
        format!("{}/{}", self.cfg.namespace, self.cfg.name)
    }

    fn event(&self, message: String) {
        if let Some(r) = &self.reports {
            let _ = r.send(Report::Scheduler {
                warning: false,
                reason: "LeaderElection",
                message,
            });
        }
    }

    /// How long one attempt on the lease may take: a retry period (at
    /// least a second), never more than the renew deadline. A request
    /// lost in a black-holed connection must not hold up the next try.
    fn attempt_timeout(&self) -> Duration {
        self.cfg
            .retry_period
            .max(Duration::from_secs(1))
            .min(self.cfg.renew_deadline)
    }

    /// Competes for the lease until `shutdown` fires (then releases it if
    /// held). A leader that cannot renew within `renewDeadline`, or finds
    /// the lease taken, steps down — stops scheduling and binding, before
    /// another replica may take the lease, since `renewDeadline <
    /// leaseDuration` — and competes again under the same identity, so it
    /// takes the lease back at once if no one else did. `leading` reports
    /// transitions.
    pub async fn run(mut self, leading: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        loop {
            if !self.acquire(&mut shutdown).await {
                return;
            }
            tracing::info!(identity = %self.identity, lease = %self.lease(), "became leader");
            self.event(format!("{} became leader", self.identity));
            let _ = leading.send(true);
            let renewal = self.renew(&mut shutdown).await;
            self.leadership.resign();
            let _ = leading.send(false);
            match renewal {
                Renewal::Shutdown => {
                    self.release().await;
                    return;
                }
                Renewal::Lost(why) => {
                    tracing::warn!(
                        identity = %self.identity,
                        lease = %self.lease(),
                        reason = %why,
                        "stepped down: stopped scheduling and binding; competing for the lease again"
                    );
                    self.event(format!("{} stopped leading: {why}", self.identity));
                }
            }
        }
    }

    /// Tries every `retryPeriod` (with jitter, from the start of one try
    /// to the next) until the lease is ours; after a failed try (no
    /// answer, an error) sooner, backing off from a quarter of the period
    /// up to it, so a replica takes the lease back within a second or two
    /// of the API server's return. False on shutdown.
    async fn acquire(&mut self, shutdown: &mut watch::Receiver<bool>) -> bool {
        let mut logged = String::new();
        let quick = (self.cfg.retry_period / 4).max(Duration::from_millis(100));
        let mut failing = Backoff::new(quick, self.cfg.retry_period);
        loop {
            if *shutdown.borrow() {
                return false;
            }
            let attempt = Instant::now();
            let timeout = self.attempt_timeout();
            let failure = match tokio::time::timeout(timeout, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => {
                    self.leadership.renewed(attempt, self.cfg.renew_deadline);
                    return true;
                }
                Ok(Ok(false)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {timeout:?}")),
            };
            let next = match failure {
                None => {
                    logged.clear();
                    failing.reset();
                    attempt + jitter(self.cfg.retry_period)
                }
                Some(line) => {
                    if line != logged {
                        tracing::warn!(error = %line, "leader election: acquiring the lease failed; retrying");
                        logged = line;
                    }
                    Instant::now() + failing.next_delay()
                }
            };
            tokio::select! {
                _ = tokio::time::sleep_until(next.into()) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// Renews every `retryPeriod` while leading; returns why it ended.
    async fn renew(&mut self, shutdown: &mut watch::Receiver<bool>) -> Renewal {
        let mut last_ok = Instant::now();
        let mut last_error = String::from("no renewal tried");
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
                _ = shutdown.changed() => {}
            }
            if *shutdown.borrow() {
                return Renewal::Shutdown;
            }
            let left = self.cfg.renew_deadline.saturating_sub(last_ok.elapsed());
            if left.is_zero() || !self.leadership.leading() {
                // Frozen, or every renewal failed: the deadline passed.
                return Renewal::Lost(format!(
                    "could not renew the lease within {:?} (last error: {last_error})",
                    self.cfg.renew_deadline
                ));
            }
            let attempt = Instant::now();
            let timeout = left.min(self.attempt_timeout());
            match tokio::time::timeout(timeout, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => {
                    self.leadership.renewed(attempt, self.cfg.renew_deadline);
                    last_ok = attempt;
                }
                Ok(Ok(false)) => return Renewal::Lost("another replica holds the lease".into()),
                Ok(Err(e)) => last_error = e.to_string(),
                Err(_) => last_error = format!("no answer within {timeout:?}"),
            }
            if last_ok.elapsed() >= self.cfg.renew_deadline {
                return Renewal::Lost(format!(
                    "could not renew the lease within {:?} (last error: {last_error})",
                    self.cfg.renew_deadline
                ));
            }
        }
    }

    /// One attempt: creates the lease, renews it if held, or takes it if
    /// its holder let it expire. Ok(false): someone else holds it.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let lease_seconds = self.cfg.lease_duration.as_secs().max(1) as i32;
        let existing = match self.api.get_opt(&self.cfg.name).await? {
            Some(l) => l,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.cfg.name.clone()),
                        namespace: Some(self.cfg.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: Some(lease_seconds),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(e),
                };
            }
        };
        let spec = existing.spec.clone().unwrap_or_default();
        let observed = Observed {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.clone(),
            lease_seconds: spec.lease_duration_seconds,
        };
        let seen_at = match &self.observed {
            Some((o, at)) if *o == observed => *at,
            _ => {
                self.observed = Some((observed.clone(), Instant::now()));
                Instant::now()
            }
        };
        let mine = observed.holder.as_deref() == Some(self.identity.as_str());
        if let Some(holder) = &observed.holder {
            let held_for =
                Duration::from_secs(observed.lease_seconds.unwrap_or(lease_seconds).max(1) as u64);
            if !mine && seen_at.elapsed() < held_for {
                tracing::debug!(%holder, "lease held by another replica");
                return Ok(false);
            }
        }
        let mut lease = existing;
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(lease_seconds),
            acquire_time: if mine {
                spec.acquire_time
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if mine { transitions } else { transitions + 1 }),
            ..Default::default()
        });
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(l) => {
                let s = l.spec.unwrap_or_default();
                self.observed = Some((
                    Observed {
                        holder: s.holder_identity,
                        renew_time: s.renew_time,
                        lease_seconds: s.lease_duration_seconds,
                    },
                    Instant::now(),
                ));
                Ok(true)
            }
            // Someone else wrote first (resourceVersion mismatch).
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up so another replica takes over at once (client-go's
    /// ReleaseOnCancel: empty holder, 1 s duration).
    async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.cfg.name).await else {
            return;
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        lease.spec = Some(spec);
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!("released the lease"),
            Err(e) => tracing::warn!(error = %e, "releasing the lease failed"),
        }
    }
}

/// client-go waits retryPeriod * (1 + up to 1.2) between acquire attempts
/// so candidates do not retry in lockstep.
fn jitter(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.subsec_nanos())
        .unwrap_or(0);
    d + d.mul_f64(f64::from(nanos % 1000) / 1000.0 * 0.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leadership_ends_at_the_renew_deadline() {
        assert!(Leadership::new(true).leading(), "no election: always leads");
        let l = Leadership::new(false);
        assert!(!l.leading(), "a candidate does not lead before acquiring");
        l.renewed(Instant::now(), Duration::from_secs(3600));
        assert!(l.leading());
        // Renewed at start, deadline already passed: no longer leading,
        // even though nothing told it so.
        l.renewed(l.start, Duration::from_millis(0));
        assert!(!l.leading());
        l.renewed(Instant::now(), Duration::from_secs(3600));
        l.resign();
        assert!(!l.leading());
    }
}
