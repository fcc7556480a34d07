//! `wasmsched run`: the scheduler against a real API server.
//!
//! Pieces, each in its own module, wired together by [`run`]:
//! - [`informer`]: watches Nodes and Pods into the [`Cache`];
//! - [`scheduling`]: the scheduling loop (one pod per cycle, assume);
//! - [`binder`]: bindings, asynchronous with bounded concurrency;
//! - [`events`]: `Scheduled` / `FailedScheduling` events and the pod
//!   condition, without flooding;
//! - [`leader`]: leader election on a Lease;
//! - [`server`]: `/metrics`, `/healthz`, `/readyz`;
//! - [`metrics`]: kube-scheduler's metric names plus wasm ones.
//!
//! Informers run on every replica (a standby's cache is warm when it takes
//! over); only the leader schedules and binds.

pub mod binder;

pub mod client;
pub mod events;
pub mod informer;
pub mod leader;
pub mod metrics;
pub mod policy_watch;
pub mod preemption;
pub mod scheduling;
pub mod server;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::{mpsc, watch};

use crate::config::{ConfigFile, RuntimeSettings, Scheduler};
use leader::Leadership;

/// State shared by the loop, the binder, the watches and the HTTP server.
pub struct Shared {
    pub cache: Mutex<Cache>,
    /// Signalled when the cache changes or leadership/shutdown may have.
    pub wake: Condvar,
    pub scheduler: Arc<Scheduler>,
    pub metrics: Arc<metrics::SchedulerMetrics>,
    pub leadership: Arc<Leadership>,
    pub stopping: AtomicBool,
    pub nodes_synced: AtomicBool,
    pub pods_synced: AtomicBool,
    /// PriorityClasses, for pods that arrive without `spec.priority`.
    pub priority_classes: parking_lot::RwLock<crate::model::priority::PriorityClasses>,
    start: Instant,
    /// When the scheduling loop last turned (ms since start).
    loop_seen_ms: AtomicU64,
}

pub use crate::framework::cache::Cache;

impl Shared {
    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Whether a profile serves pods with this `schedulerName`.
    pub fn served(&self, scheduler_name: &str) -> bool {
        self.scheduler.profile(scheduler_name).is_some()
    }

    pub fn synced(&self) -> bool {
        self.nodes_synced.load(Ordering::Acquire) && self.pods_synced.load(Ordering::Acquire)
    }

    fn heartbeat(&self) {
        self.loop_seen_ms.store(self.now_ms(), Ordering::Release);
    }

    /// `/readyz`: caches synced; on the leader, the loop turning (a cycle
    /// longer than 30 s means it is stuck).
    pub fn readiness(&self) -> Result<(), String> {
        if self.stopping.load(Ordering::Acquire) {
            return Err("shutting down".into());
        }
        if !self.synced() {
            return Err("caches not synced".into());
        }
        if self.leadership.leading() {
            let idle = self
                .now_ms()
                .saturating_sub(self.loop_seen_ms.load(Ordering::Acquire));
            if idle > 30_000 {
                return Err(format!("scheduling loop stalled for {} s", idle / 1000));
            }
        }
        Ok(())
    }
}

/// What `wasmsched run` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// Overrides `clientConnection.kubeconfig`.
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Address of `/metrics`, `/healthz`, `/readyz`.
    pub listen: SocketAddr,
    /// TLS, authentication and connection limits of that port.
    pub serving: server::ServingOptions,
    /// Accept an `http://` API server (tokens in the clear).
    pub allow_http_apiserver: bool,
    /// This replica's name in the Lease (default: host name + random suffix).
    pub identity: Option<String>,
    /// Pause before each bind call (fault tests only).
    pub bind_delay: Duration,
    /// Override of `leaderElection.leaderElect`.
    pub leader_elect: Option<bool>,
}

/// Exit status of a run that ended without a configuration or start-up
/// error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// SIGTERM or SIGINT: stopped cleanly.
    Signal,
    /// The lease was lost: stopped scheduling; the process should exit
    /// non-zero so it is restarted as a candidate.
    LeaseLost,
}

fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "wasmsched".into());
    let suffix: u32 = rand::random();
    format!("{host}_{suffix:08x}")
}

/// Runs the scheduler until a signal or the loss of the lease.
///
/// `deletion_cost`: the deletion-cost controller's configuration, if the
/// file has a `deletionCost` section; the controller runs on the leader.
pub async fn run(
    scheduler: Arc<Scheduler>,
    file: &ConfigFile,
    base: &Path,
    settings: RuntimeSettings,
    deletion_cost: Option<crate::deletion_cost::DeletionCostConfig>,
    opts: Options,
) -> anyhow::Result<Ending> {
    let (client, http) = connect(&opts, &settings).await?;
    for (name, module) in &scheduler.modules {
        crate::metrics::Metrics::global().register_plugin(name, &module.digest);
    }
    let registry = crate::metrics::Metrics::global().registry();
    let metrics = metrics::SchedulerMetrics::register(registry, scheduler.clone());
    for fw in &scheduler.profiles {
        fw.timings.set_sink(fw.scheduler_name(), metrics.clone());
    }
    let leader_elect = opts
        .leader_elect
        .unwrap_or(settings.leader_election.enabled);
    let leadership = Leadership::new(!leader_elect);
    let shared = Arc::new(Shared {
        cache: Mutex::new(Cache::default()),
        wake: Condvar::new(),
        scheduler: scheduler.clone(),
        metrics: metrics.clone(),
        leadership: leadership.clone(),
        stopping: AtomicBool::new(false),
        nodes_synced: AtomicBool::new(false),
        pods_synced: AtomicBool::new(false),
        priority_classes: Default::default(),
        start: Instant::now(),
        loop_seen_ms: AtomicU64::new(0),
    });
    let identity = opts.identity.clone().unwrap_or_else(default_identity);
    let throttle = client::Throttle::new(settings.qps, settings.burst);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);

    // Plugin hot reload, as `plugin watch` does.
    let _watcher = if crate::config::plugin_files(file, base).is_empty() {
        None
    } else {
        let reloader = Arc::new(crate::reload::Reloader::from_config(
            scheduler.clone(),
            file,
            base,
            crate::reload::Options::default(),
        )?);
        Some(crate::reload::PluginWatcher::start(reloader)?)
    };

    let http = tokio::spawn(server::serve(http, shared.clone(), shutdown_rx.clone()));
    let (report_tx, report_rx) = mpsc::unbounded_channel();
    // Events have their own budget, as kube-scheduler's event client has
    // its own rate limiter: a burst of failures never delays bindings.
    let recorder = events::Recorder::new(
        client.clone(),
        client::Throttle::new(settings.qps, settings.burst),
        identity.clone(),
        metrics.clone(),
    );
    let recorder = tokio::spawn(recorder.run(report_rx));
    let nodes = tokio::spawn(informer::watch_nodes(shared.clone(), client.clone()));
    let pods = tokio::spawn(informer::watch_pods(
        shared.clone(),
        client.clone(),
        report_tx.clone(),
    ));

    let (preempt_tx, [budgets, classes, evictor]) =
        preemption::spawn(&shared, &client, &throttle, &identity);
    let (bind_tx, bind_rx) = mpsc::unbounded_channel();
    let binder = binder::Binder {
        shared: shared.clone(),
        client: client.clone(),
        throttle: throttle.clone(),
        reports: report_tx.clone(),
        concurrency: settings.bind_concurrency,
        delay: opts.bind_delay,
    };
    let binder = tokio::spawn(binder.run(bind_rx));
    let loop_thread = {
        let shared = shared.clone();
        let reports = report_tx.clone();
        std::thread::Builder::new()
            .name("scheduling-loop".into())
            .spawn(move || scheduling::run(shared, bind_tx, reports, preempt_tx))?
    };
    drop(report_tx);

    let (leading_tx, mut leading_rx) = watch::channel(!leader_elect);
    let elector = if leader_elect {
        let e = leader::Elector::new(
            client.clone(),
            settings.leader_election.clone(),
            identity.clone(),
            leadership.clone(),
        );
        let rx = shutdown_rx.clone();
        Some(tokio::spawn(e.run(leading_tx, rx)))
    } else {
        None
    };
    let lease_name = format!(
        "{}/{}",
        settings.leader_election.namespace, settings.leader_election.name
    );
    tracing::info!(%identity, listen = %opts.listen, leader_elect, "wasmsched running");
    metrics
        .leader
        .with_label_values(&[&lease_name])
        .set(i64::from(!leader_elect));

    // The deletion-cost controller runs while this replica leads.
    let (controller_stop_tx, controller_stop_rx) = watch::channel(false);
    let mut deletion_cost = deletion_cost;
    let mut controller: Option<tokio::task::JoinHandle<anyhow::Result<()>>> = None;
    let start_controller = |cfg: Option<crate::deletion_cost::DeletionCostConfig>| {
        cfg.map(|cfg| {
            let client = client.clone();
            let mut stop = controller_stop_rx.clone();
            tokio::spawn(async move {
                crate::deletion_cost::run_controller(client, cfg, registry, async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await
            })
        })
    };
    if !leader_elect {
        controller = start_controller(deletion_cost.take());
    }

    // Wait for a signal or the loss of the lease.
    let mut elector = elector;
    let ending = loop {
        tokio::select! {
            _ = shutdown_signal() => break Ending::Signal,
            changed = leading_rx.changed() => {
                if changed.is_err() { continue; }
                let now_leading = *leading_rx.borrow();
                metrics.leader.with_label_values(&[&lease_name]).set(i64::from(now_leading));
                shared.wake.notify_all();
                if now_leading && controller.is_none() {
                    controller = start_controller(deletion_cost.take());
                }
            }
            r = async { elector.as_mut().expect("guarded").await }, if elector.is_some() => {
                elector = None;
                match r {
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, "stopping: leadership lost");
                        break Ending::LeaseLost;
                    }
                    Ok(Ok(())) => break Ending::Signal,
                    Err(e) => {
                        tracing::error!(error = %e, "leader election task failed");
                        break Ending::LeaseLost;
                    }
                }
            }
        }
    };

    // Graceful stop: no new cycles, the bindings in flight finish, then
    // the lease is released so a standby takes over at once.
    tracing::info!(?ending, "stopping");
    let _ = controller_stop_tx.send(true);
    shared.stopping.store(true, Ordering::Release);
    shared.wake.notify_all();
    let _ = tokio::task::spawn_blocking(move || loop_thread.join()).await;
    let _ = binder.await;
    let _ = evictor.await;
    for watch in [nodes, pods, budgets, classes] {
        watch.abort();
        let _ = watch.await;
    }
    let _ = recorder.await;
    if let Some(c) = controller {
        match c.await {
            Ok(Err(e)) => tracing::error!(error = %e, "deletion-cost controller failed"),
            Err(e) => tracing::error!(error = %e, "deletion-cost controller task failed"),
            Ok(Ok(())) => {}
        }
    }
    let _ = shutdown_tx.send(true);
    if let Some(e) = elector {
        let _ = e.await;
    }
    metrics.leader.with_label_values(&[&lease_name]).set(0);
    let _ = http.await;
    Ok(ending)
}

/// The API client (checked against the server) and the prepared HTTPS
/// port, whose reviews go through the same client unless
/// `--authentication-kubeconfig` / `--authorization-kubeconfig` say
/// otherwise. Every kubeconfig must name an `https://` server unless
/// `--allow-http-apiserver`.
async fn connect(
    opts: &Options,
    settings: &RuntimeSettings,
) -> anyhow::Result<(kube::Client, server::Prepared)> {
    // What needs no API server first: bad flags fail before any call.
    let s = &opts.serving;
    let tls = server::tls::server_config(
        s.tls_cert_file.as_deref(),
        s.tls_private_key_file.as_deref(),
        opts.listen,
    )?;
    let always_allow = server::auth::AllowPaths::parse(&s.always_allow_paths)?;
    let allow_http = opts.allow_http_apiserver;
    let kubeconfig = opts.kubeconfig.clone().or(settings.kubeconfig.clone());
    let client = client::secure_client(kubeconfig.as_deref(), "kubeconfig", allow_http).await?;
    // Fail fast on a wrong address or credentials, with the cause.
    client
        .apiserver_version()
        .await
        .map_err(|e| anyhow::anyhow!("API server: {e}"))?;
    let review_client = |path: &Option<std::path::PathBuf>, flag: &'static str| {
        let client = client.clone();
        let path = path.clone();
        async move {
            match path {
                Some(p) => client::secure_client(Some(&p), flag, allow_http).await,
                None => Ok(client),
            }
        }
    };
    let clients = server::auth::Clients {
        authentication: review_client(&s.authentication_kubeconfig, "--authentication-kubeconfig")
            .await?,
        authorization: review_client(&s.authorization_kubeconfig, "--authorization-kubeconfig")
            .await?,
    };
    let guard = server::auth::Guard::new(always_allow, clients);
    let http = server::Prepared::new(opts.listen, s, tls, guard).await?;
    Ok((client, http))
}

/// SIGTERM (what Kubernetes sends) or SIGINT.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
