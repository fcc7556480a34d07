//! The API client and its write rate limit.

use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// A client from a kubeconfig file if given, else `$KUBECONFIG` or
/// `~/.kube/config`, else the in-cluster service account.
pub async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?
        }
        None => Config::infer().await.map_err(|e| {
            anyhow::anyhow!(
                "no cluster configuration (--kubeconfig, $KUBECONFIG, or in-cluster): {e}"
            )
        })?,
    };
    Client::try_from(config).map_err(|e| anyhow::anyhow!("building the API client: {e}"))
}

/// kube-scheduler's client QPS and burst, applied to the writes this
/// scheduler makes (bindings, events, status): its reads are watches,
/// which are long-lived single requests.
#[derive(Clone)]
pub struct Throttle(Arc<DefaultDirectRateLimiter>);

impl Throttle {
    pub fn new(qps: f32, burst: u32) -> Self {
        // governor counts whole cells per period: express qps as one cell
        // per 1/qps seconds.
        let period = std::time::Duration::from_secs_f64(1.0 / f64::from(qps));
        let quota = Quota::with_period(period)
            .expect("qps is validated positive")
            .allow_burst(NonZeroU32::new(burst.max(1)).expect("burst >= 1"));
        Self(Arc::new(RateLimiter::direct(quota)))
    }

    /// Waits for a write slot.
    pub async fn wait(&self) {
        self.0.until_ready().await;
    }
}
