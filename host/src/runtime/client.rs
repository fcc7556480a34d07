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
    build(config(kubeconfig).await?)
}

/// As [`client`], refusing an `http://` API server unless `allow_http`:
/// the scheduler's credentials, and the tokens of `/metrics` requests it
/// sends for review, would travel in the clear. `flag` names the option
/// the kubeconfig came from, for the error.
pub async fn secure_client(
    kubeconfig: Option<&Path>,
    flag: &str,
    allow_http: bool,
) -> anyhow::Result<Client> {
    let config = config(kubeconfig).await?;
    if !allow_http && config.cluster_url.scheme_str() == Some("http") {
        let source = match kubeconfig {
            Some(p) => format!("{flag} {}", p.display()),
            None => "the cluster configuration ($KUBECONFIG or ~/.kube/config)".into(),
        };
        anyhow::bail!(
            "{source}: API server {} is plain HTTP: the scheduler's credentials and the bearer \
             tokens of /metrics requests (sent to it for review) would travel in the clear; \
             use https, or pass --allow-http-apiserver",
            config.cluster_url
        );
    }
    build(config)
}

fn build(config: Config) -> anyhow::Result<Client> {
    super::rest_metrics::client(config).map_err(|e| anyhow::anyhow!("building the API client: {e}"))
}

/// The client configuration [`client`] uses.
async fn config(kubeconfig: Option<&Path>) -> anyhow::Result<Config> {
    Ok(match kubeconfig {
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
    })
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
