//! `wasmsched run`: the scheduler against a real API server.
//!
//! Pieces, each in its own module, wired together by [`run`]:
//! - [`informer`]: watches Nodes and Pods into the [`Cache`];
//! - [`volume_watch`]: watches PVs, claims, StorageClasses, CSINodes,
//!   CSIDrivers and CSIStorageCapacities into the cache's volume store;
//! - [`namespace_watch`], [`workload_watch`]: Namespaces' labels, and the
//!   selectors of Services and controllers (PodTopologySpread's defaults);
//! - [`scheduling`]: the scheduling loop (one pod per cycle, assume);
//! - [`binder`]: bindings, asynchronous with bounded concurrency;
//! - [`events`]: `Scheduled` / `FailedScheduling` events and the pod
//!   condition, without flooding;
//! - [`leader`]: leader election on a Lease;
//! - [`reflector`], [`cache_sync`]: the watches' list-and-watch loop, and
//!   whether the cache is current (scheduling and binding wait while a
//!   watch is lost or relisting);
//! - [`client`]: the API client (request metrics, timeouts, the server's
//!   Retry-After) and the write rate limit;
//! - [`server`]: `/metrics`, `/healthz`, `/readyz`;
//! - [`metrics`]: kube-scheduler's metric names plus wasm ones.
//!
//! Informers run on every replica (a standby's cache is warm when it takes
//! over); only the leader schedules and binds.

pub mod binder;
pub mod cache_sync;
pub mod client;
pub mod dra_metrics;
mod event_sink;
pub mod events;
pub mod explain;
pub mod gpu_metrics;
pub mod informer;
pub mod leader;
pub mod metrics;
pub mod namespace_watch;
pub mod node_lock;
pub mod object_watch;
mod ops_metrics;
pub mod policy_watch;
pub mod preemption;
pub mod reflector;
pub mod scheduling;
pub mod served;
pub mod server;
mod verbose;
pub mod volume_watch;
pub mod workload_watch;

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
    /// Whether every watch (Nodes, Pods, the volume kinds, Namespaces,
    /// workloads, budgets, PriorityClasses, the kinds plugins read) is
    /// listed and connected. kube-scheduler also waits for every informer
    /// before its first cycle; here the cache must stay current after
    /// that too.
    pub cache_sync: Arc<cache_sync::CacheSync>,
    /// PriorityClasses, for pods that arrive without `spec.priority`.
    pub priority_classes: parking_lot::RwLock<crate::model::priority::PriorityClasses>,
    start: Instant,
    /// When the scheduling loop last turned (ms since start).
    loop_seen_ms: AtomicU64,
    /// `/configz`'s document, set at start.
    pub configz: std::sync::OnceLock<String>,
}

pub use crate::framework::cache::Cache;

impl Shared {
    fn new(
        scheduler: Arc<Scheduler>,
        metrics: Arc<metrics::SchedulerMetrics>,
        leadership: Arc<Leadership>,
    ) -> Arc<Self> {
        Arc::new(Self {
            cache: Mutex::new(scheduler.new_cache()),
            wake: Condvar::new(),
            scheduler,
            metrics,
            leadership,
            stopping: AtomicBool::new(false),
            cache_sync: cache_sync::CacheSync::new(
                cache_sync::SyncMetrics::new()
                    .register(crate::metrics::Metrics::global().registry()),
            ),
            priority_classes: Default::default(),
            start: Instant::now(),
            loop_seen_ms: AtomicU64::new(0),
            configz: std::sync::OnceLock::new(),
        })
    }

    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Whether a profile serves pods with this `schedulerName`.
    pub fn served(&self, scheduler_name: &str) -> bool {
        self.scheduler.profile(scheduler_name).is_some()
    }

    /// Every watch listed and connected: the cache may be scheduled on.
    pub fn synced(&self) -> bool {
        self.cache_sync.current()
    }

    fn heartbeat(&self) {
        self.loop_seen_ms.store(self.now_ms(), Ordering::Release);
    }

    /// `/readyz`: the API server reached and the cache current (every
    /// watch listed and connected); on the leader, the loop turning (a
    /// cycle longer than 30 s means it is stuck). The first failure.
    pub fn readiness(&self) -> Result<(), String> {
        self.readiness_checks()
            .into_iter()
            .find_map(|(_, r)| r.err())
            .map_or(Ok(()), Err)
    }

    /// `/readyz`'s checks by name, as kube-scheduler names its own
    /// (`sched-handler-sync`: the caches synced and current).
    pub fn readiness_checks(&self) -> Vec<(&'static str, Result<(), String>)> {
        let shutdown = if self.stopping.load(Ordering::Acquire) {
            Err("shutting down".to_string())
        } else {
            Ok(())
        };
        let sync = if self.synced() {
            Ok(())
        } else {
            let api = client::ApiHealth::global();
            if !api.reached() {
                Err(format!(
                    "API server not reached yet: {}",
                    api.last_error().unwrap_or_else(|| "no answer yet".into())
                ))
            } else {
                Err(format!("cache not current: {}", self.cache_sync.describe()))
            }
        };
        let mut loop_turning = Ok(());
        if self.leadership.leading() {
            let idle = self
                .now_ms()
                .saturating_sub(self.loop_seen_ms.load(Ordering::Acquire));
            if idle > 30_000 {
                loop_turning = Err(format!("scheduling loop stalled for {} s", idle / 1000));
            }
        }
        vec![
            ("ping", Ok(())),
            ("shutdown", shutdown),
            ("sched-handler-sync", sync),
            ("scheduling-loop", loop_turning),
        ]
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
    /// The configuration file the scheduler was built from: followed by
    /// hot reload for changed `oci://` plugin references.
    pub config: Option<std::path::PathBuf>,
    /// `--feature-gates` as set (for `/configz`).
    pub feature_gates: Vec<(String, bool)>,
}

/// How a run that had no configuration or start-up error ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// SIGTERM or SIGINT: stopped cleanly. (A lost lease does not end a
    /// run: the replica steps down and competes again.)
    Signal,
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

/// A multi-threaded tokio runtime with two workers, for the commands that
/// talk to a cluster.
pub fn tokio_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// [`run`] on a runtime of its own ([`tokio_runtime`]) until it ends: the
/// `run` command. Plugin instances and watches are given a second to stop,
/// not waited for. (Blocking here rather than in the binary compiles the
/// run's futures once, with the library, not again for the binary.)
pub fn run_blocking(
    scheduler: Arc<Scheduler>,
    file: &ConfigFile,
    base: &Path,
    settings: RuntimeSettings,
    deletion_cost: Option<crate::deletion_cost::DeletionCostConfig>,
    opts: Options,
) -> anyhow::Result<Ending> {
    let rt = tokio_runtime()?;
    let ending = rt.block_on(run(scheduler, file, base, settings, deletion_cost, opts));
    rt.shutdown_timeout(Duration::from_secs(1));
    ending
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
    let node_metrics = crate::node_metrics::NodeMetricsConfig::from_file(file)?;
    let (client, http) = connect(&opts, &settings).await?;
    let metrics = register_metrics(&scheduler);
    let leader_elect = settings.leader_election.enabled;
    let leadership = Leadership::new(!leader_elect);
    let lease_name = format!(
        "{}/{}",
        settings.leader_election.namespace, settings.leader_election.name
    );
    metrics::register_leader_status(
        crate::metrics::Metrics::global().registry(),
        leadership.clone(),
        &lease_name,
    );
    let shared = Shared::new(scheduler.clone(), metrics.clone(), leadership.clone());
    let _ = shared.configz.set(server::configz::document(
        file,
        &scheduler,
        &settings,
        &opts.feature_gates,
    ));
    gpu_metrics::register(crate::metrics::Metrics::global().registry(), &shared);
    dra_metrics::register(crate::metrics::Metrics::global().registry());
    let identity = opts.identity.clone().unwrap_or_else(default_identity);
    let throttle = client::Throttle::new(settings.qps, settings.burst);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let _watcher = plugin_watcher(&scheduler, file, base, opts.config.clone())?;
    if let Some(w) = &_watcher {
        requeue_after_reloads(w.reloader().subscribe(), shared.clone());
    }

    let http = tokio::spawn(server::serve(http, shared.clone(), shutdown_rx.clone()));
    // The API server may be away at start: every piece retries on its
    // own; its version is logged once it answers.
    let version = tokio::spawn(log_server_version(client.clone()));
    let (report_tx, report_rx) = mpsc::unbounded_channel();
    shared.cache_sync.report_to(report_tx.clone());
    // Events have their own budget, as kube-scheduler's event client has
    // its own rate limiter: a burst of failures never delays bindings.
    let recorder = events::Recorder::new(
        client.clone(),
        client::Throttle::new(settings.qps, settings.burst),
        identity.clone(),
        metrics.clone(),
    )
    .about(events::Subject {
        api_version: "coordination.k8s.io/v1",
        kind: "Lease",
        namespace: settings.leader_election.namespace.clone(),
        name: settings.leader_election.name.clone(),
    });
    let recorder = tokio::spawn(recorder.run(report_rx));
    let api_watch = tokio::spawn(report_api_pressure(report_tx.clone()));
    let mut watches = Watches::start(&shared, &client, &throttle, &report_tx);
    if let Some(cfg) = node_metrics {
        // Its own task: a slow Prometheus never holds the cache's lock.
        let shared = shared.clone();
        let apply = move |m| {
            shared.cache.lock().replace_node_metrics(m);
        };
        let source = crate::node_metrics::source::run(cfg, apply);
        watches.tasks.push(tokio::spawn(source));
    }
    let (preempt_tx, [budgets, classes, evictor]) =
        preemption::spawn(&shared, &client, &throttle, &identity, &opts.feature_gates);
    watches.tasks.extend([budgets, classes]);

    let (bind_tx, bind_rx) = mpsc::unbounded_channel();
    let binder = binder::Binder {
        shared: shared.clone(),
        client: client.clone(),
        throttle: throttle.clone(),
        reports: report_tx.clone(),
        concurrency: settings.bind_concurrency,
        delay: opts.bind_delay,
        gates: Default::default(),
    };
    let binder = tokio::spawn(binder.run(bind_rx));
    let loop_thread = {
        let shared = shared.clone();
        let reports = report_tx.clone();
        std::thread::Builder::new()
            .name("scheduling-loop".into())
            .spawn(move || scheduling::run(shared, bind_tx, reports, preempt_tx))?
    };
    let (leading_tx, leading_rx) = watch::channel(!leader_elect);
    let elector = leader_elect.then(|| {
        let e = leader::Elector::new(
            client.clone(),
            settings.leader_election.clone(),
            identity.clone(),
            leadership.clone(),
        )
        .report_to(report_tx.clone());
        tokio::spawn(e.run(leading_tx, shutdown_rx.clone()))
    });
    drop(report_tx);
    tracing::info!(%identity, listen = %opts.listen, leader_elect, lease = %lease_name, "wasmsched running");

    // The deletion-cost controller runs while this replica leads.
    let mut controller = LeaderController::new(client.clone(), deletion_cost);
    if !leader_elect {
        controller.start();
    }
    let ending = wait_for_end(&shared, leading_rx, &mut controller).await;

    // Graceful stop: no new cycles, the bindings in flight finish, then
    // the lease is released so a standby takes over at once.
    tracing::info!(?ending, "stopping");
    shared.stopping.store(true, Ordering::Release);
    shared.wake.notify_all();
    let stopped = controller.stop();
    let _ = tokio::task::spawn_blocking(move || loop_thread.join()).await;
    let _ = binder.await;
    let _ = evictor.await;
    watches.stop().await;
    version.abort();
    api_watch.abort();
    let _ = api_watch.await;
    shared.cache_sync.stop_reporting();
    let _ = shutdown_tx.send(true);
    if let Some(e) = elector {
        let _ = e.await;
    }
    stopped.await;
    let _ = recorder.await;
    let _ = http.await;
    Ok(ending)
}

/// The plugin files' metrics, and the scheduler's (its profiles' timings
/// report to them).
fn register_metrics(scheduler: &Arc<Scheduler>) -> Arc<metrics::SchedulerMetrics> {
    for (name, module) in &scheduler.modules {
        crate::metrics::Metrics::global().register_plugin(name, &module.digest);
    }
    let registry = crate::metrics::Metrics::global().registry();
    let metrics = metrics::SchedulerMetrics::register(registry, scheduler.clone());
    ops_metrics::OpsMetrics::global();
    for fw in &scheduler.profiles {
        fw.timings.set_sink(fw.scheduler_name(), metrics.clone());
    }
    metrics
}

/// Plugin hot reload, as `plugin watch` does (none without plugin files
/// or `oci://` plugins).
fn plugin_watcher(
    scheduler: &Arc<Scheduler>,
    file: &ConfigFile,
    base: &Path,
    config: Option<std::path::PathBuf>,
) -> anyhow::Result<Option<crate::reload::PluginWatcher>> {
    if crate::config::plugin_sources(file, base)?.is_empty() {
        return Ok(None);
    }
    let reloader = Arc::new(crate::reload::Reloader::from_config(
        scheduler.clone(),
        file,
        base,
        crate::reload::Options {
            config,
            ..Default::default()
        },
    )?);
    Ok(Some(crate::reload::PluginWatcher::start(reloader)?))
}

/// A new version of a plugin may accept pods the old one rejected: after
/// each successful reload the unschedulable pods go back to the queue (after
/// their backoff), as after a cluster event. Without this a pod the old
/// policy rejected would wait for an unrelated cluster change.
fn requeue_after_reloads(
    events: std::sync::mpsc::Receiver<crate::reload::ReloadEvent>,
    shared: Arc<Shared>,
) {
    let spawned = std::thread::Builder::new()
        .name("reload-requeue".into())
        .spawn(move || {
            for event in events {
                if event.result == crate::reload::ReloadResult::Success {
                    let now = shared.now_ms();
                    shared.cache.lock().queue.on_cluster_event(now);
                    shared.wake.notify_all();
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no thread to requeue pods after plugin reloads");
    }
}

/// The watches that feed the cache (Nodes, Pods, PodGroups, the volume
/// objects), stopped together.
struct Watches {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watches {
    fn start(
        shared: &Arc<Shared>,
        client: &kube::Client,
        throttle: &client::Throttle,
        reports: &mpsc::UnboundedSender<events::Report>,
    ) -> Self {
        let sync = &shared.cache_sync;
        let mut tasks = object_watch::start(shared, client, throttle.clone());
        tasks.push(tokio::spawn(informer::watch_nodes(
            shared.clone(),
            client.clone(),
            sync.register("nodes"),
        )));
        tasks.push(tokio::spawn(informer::watch_pods(
            shared.clone(),
            client.clone(),
            reports.clone(),
            sync.register("pods"),
        )));
        tasks.extend(volume_watch::spawn(shared, client));
        tasks.push(tokio::spawn(namespace_watch::watch_namespaces(
            shared.clone(),
            client.clone(),
            sync.register("namespaces"),
        )));
        tasks.extend(workload_watch::spawn(shared, client));
        Self { tasks }
    }

    async fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// The deletion-cost controller, running while this replica leads:
/// started when it becomes leader, stopped when it steps down (and with
/// the scheduler).
struct LeaderController {
    client: kube::Client,
    cfg: Option<crate::deletion_cost::DeletionCostConfig>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    stop_tx: watch::Sender<bool>,
}

impl LeaderController {
    fn new(client: kube::Client, cfg: Option<crate::deletion_cost::DeletionCostConfig>) -> Self {
        Self {
            client,
            cfg,
            task: None,
            stop_tx: watch::channel(false).0,
        }
    }

    fn start(&mut self) {
        if self.task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let Some(cfg) = self.cfg.clone() else {
            return;
        };
        let _ = self.stop_tx.send(false);
        let client = self.client.clone();
        let mut stop = self.stop_tx.subscribe();
        let registry = crate::metrics::Metrics::global().registry();
        self.task = Some(tokio::spawn(async move {
            crate::deletion_cost::run_controller(client, cfg, registry, async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await
        }));
    }

    /// Stops a running controller (leadership ended); it can start again.
    fn pause(&mut self) {
        let _ = self.stop_tx.send(true);
        if let Some(t) = self.task.take() {
            tokio::spawn(async move {
                match t.await {
                    Ok(Err(e)) => tracing::error!(error = %e, "deletion-cost controller failed"),
                    Err(e) => tracing::error!(error = %e, "deletion-cost controller task failed"),
                    Ok(Ok(())) => {}
                }
            });
        }
    }

    /// Tells the controller to stop; the future waits for it.
    fn stop(self) -> impl std::future::Future<Output = ()> {
        let _ = self.stop_tx.send(true);
        async move {
            if let Some(c) = self.task {
                match c.await {
                    Ok(Err(e)) => tracing::error!(error = %e, "deletion-cost controller failed"),
                    Err(e) => tracing::error!(error = %e, "deletion-cost controller task failed"),
                    Ok(Ok(())) => {}
                }
            }
        }
    }
}

/// Waits for a signal; follows leadership meanwhile (the loop woken, the
/// controller started and stopped).
async fn wait_for_end(
    shared: &Shared,
    mut leading_rx: watch::Receiver<bool>,
    controller: &mut LeaderController,
) -> Ending {
    // One signal listener for the whole wait (a listener made afresh on
    // each turn could miss the signal), and the leadership channel
    // followed while it is open (without an elector its sender is gone).
    let signal = shutdown_signal();
    tokio::pin!(signal);
    let mut following = true;
    loop {
        tokio::select! {
            () = &mut signal => return Ending::Signal,
            changed = leading_rx.changed(), if following => {
                if changed.is_err() {
                    following = false;
                    continue;
                }
                let now_leading = *leading_rx.borrow();
                shared.wake.notify_all();
                if now_leading {
                    controller.start();
                } else {
                    controller.pause();
                }
            }
        }
    }
}

/// Logs the API server's version once it answers (retried with backoff
/// while it does not: an API server away at start is waited for, not a
/// reason to exit).
async fn log_server_version(client: kube::Client) {
    let mut retry = client::Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
    let mut logged = String::new();
    loop {
        match client.apiserver_version().await {
            Ok(v) => {
                served::log(&v);
                return;
            }
            Err(e) => {
                let line = e.to_string();
                if line != logged {
                    tracing::warn!(error = %line, "API server not reachable; retrying");
                    logged = line;
                }
                tokio::time::sleep(retry.next_delay()).await;
            }
        }
    }
}

/// Every 5 s: when the API server throttled requests (429) or said it was
/// unavailable (503, 504) since the last look, a log line and an Event
/// (`APIThrottled`, `APIUnavailable`; the recorder writes one per reason
/// per 30 s at most). The writes themselves wait as asked
/// ([`client::Throttle::wait`]).
async fn report_api_pressure(reports: mpsc::UnboundedSender<events::Report>) {
    let api = client::ApiHealth::global();
    let (mut throttled, mut unavailable) = (api.throttled(), api.unavailable());
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tick.tick().await;
        let (t, u) = (api.throttled(), api.unavailable());
        if t > throttled {
            let message = format!(
                "the API server throttled {} request(s) in the last 5 s (429 Too Many Requests, Retry-After {} s); writes wait as asked, scheduling goes on from the cache",
                t - throttled,
                api.last_retry_after()
            );
            tracing::warn!("{message}");
            let _ = reports.send(events::Report::Scheduler {
                warning: true,
                reason: "APIThrottled",
                message,
            });
        }
        if u > unavailable {
            let message = format!(
                "the API server answered {} request(s) with 503/504 in the last 5 s; they are retried with backoff",
                u - unavailable
            );
            tracing::warn!("{message}");
            let _ = reports.send(events::Report::Scheduler {
                warning: true,
                reason: "APIUnavailable",
                message,
            });
        }
        (throttled, unavailable) = (t, u);
    }
}

/// The API client and the prepared HTTPS port, whose reviews go through
/// the same client unless `--authentication-kubeconfig` /
/// `--authorization-kubeconfig` say otherwise. Every kubeconfig must name
/// an `https://` server unless `--allow-http-apiserver`. The API server is
/// not asked anything here: one that is away at start is waited for by
/// every piece, with backoff, not a reason to exit (a crash loop).
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
