//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! semantics: a candidate takes the lease only when its holder has not
//! renewed it for `leaseDuration` (measured on the candidate's own clock
//! from when it last saw the record change), and the leader stops
//! scheduling when it could not renew for `renewDeadline`. Because
//! `renewDeadline < leaseDuration`, a leader that loses its lease has
//! stopped before anyone else may start.
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
use tokio::sync::watch;

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

/// Why leading ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lost the lease {namespace}/{name}: could not renew it within {deadline:?} (last error: {last_error})")]
    Lost {
        namespace: String,
        name: String,
        deadline: Duration,
        last_error: String,
    },
}

/// Competes for the lease.
pub struct Elector {
    api: Api<Lease>,
    cfg: LeaderElection,
    identity: String,
    leadership: Arc<Leadership>,
    observed: Option<(Observed, Instant)>,
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
        }
    }

    /// Acquires the lease (waiting as long as another holder keeps it),
    /// then renews it every `retryPeriod`. Returns `Ok` when `shutdown`
    /// fires (after releasing the lease), and an error when the lease is
    /// lost. `leading` reports transitions.
    pub async fn run(
        mut self,
        leading: watch::Sender<bool>,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<(), LeaderError> {
        // Acquire.
        loop {
            if *shutdown.borrow() {
                return Ok(());
            }
            let attempt = Instant::now();
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    self.leadership.renewed(attempt, self.cfg.renew_deadline);
                    break;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "leader election: acquiring the lease failed"),
            }
            tokio::select! {
                _ = tokio::time::sleep(jitter(self.cfg.retry_period)) => {}
                _ = shutdown.changed() => {}
            }
        }
        tracing::info!(identity = %self.identity, lease = %format!("{}/{}", self.cfg.namespace, self.cfg.name), "became leader");
        let _ = leading.send(true);
        // Renew.
        let mut last_ok = Instant::now();
        let mut last_error = String::new();
        let mut taken = false;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
                _ = shutdown.changed() => {}
            }
            if *shutdown.borrow() {
                self.leadership.resign();
                let _ = leading.send(false);
                self.release().await;
                return Ok(());
            }
            let attempt = Instant::now();
            let result = tokio::time::timeout(
                self.cfg.renew_deadline.saturating_sub(last_ok.elapsed()),
                self.try_acquire_or_renew(),
            )
            .await;
            match result {
                Ok(Ok(true)) => {
                    self.leadership.renewed(attempt, self.cfg.renew_deadline);
                    last_ok = attempt;
                }
                Ok(Ok(false)) => {
                    taken = true;
                    last_error = "another replica holds the lease".into();
                }
                Ok(Err(e)) => last_error = e.to_string(),
                Err(_) => last_error = "renewal timed out".into(),
            }
            if taken || last_ok.elapsed() >= self.cfg.renew_deadline {
                self.leadership.resign();
                let _ = leading.send(false);
                return Err(LeaderError::Lost {
                    namespace: self.cfg.namespace.clone(),
                    name: self.cfg.name.clone(),
                    deadline: self.cfg.renew_deadline,
                    last_error,
                });
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
