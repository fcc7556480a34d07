//! The HTTPS port against the real API server: `/metrics` behind
//! delegated authentication and authorization (TokenReview and
//! SubjectAccessReview, with `deploy/`'s RBAC), the probes open, a flood
//! of idle connections that does not starve the probes, the connection
//! limit, the certificate, and the refusal of a plain-HTTP API server.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::deploy::{kubectl, service_account_token};
use crate::env::*;

/// `deploy/`'s ServiceAccount with its RBAC (the scheduler's role, with
/// the review rights, and the metrics reader role), and two callers in
/// namespace `serving`: `scraper`, bound to the metrics reader role, and
/// `nobody`.
fn accounts() {
    let deploy = repo().join("deploy");
    for f in [
        "namespace.yaml",
        "serviceaccount.yaml",
        "rbac.yaml",
        "metrics-reader.yaml",
    ] {
        let (ok, out) = kubectl(&["apply", "-f", deploy.join(f).to_str().unwrap()]);
        assert!(ok, "{out}");
    }
    for sa in ["scraper", "nobody"] {
        let _ = kubectl(&["create", "serviceaccount", sa, "-n", "serving"]);
    }
    let _ = kubectl(&["delete", "clusterrolebinding", "serving-scraper"]);
    let (ok, out) = kubectl(&[
        "create",
        "clusterrolebinding",
        "serving-scraper",
        "--clusterrole=wasmsched-metrics-reader",
        "--serviceaccount=serving:scraper",
    ]);
    assert!(ok, "{out}");
}

/// A kubeconfig for `deploy/`'s ServiceAccount (the admin kubeconfig with
/// its token), without a YAML library: the admin file's token line is
/// replaced.
fn scheduler_kubeconfig(dir: &Path) -> std::path::PathBuf {
    let admin = std::fs::read_to_string(&env().kubeconfig).unwrap();
    let token = service_account_token("wasmsched", "wasmsched");
    let text = admin.replace(&admin_token(), &token);
    assert_ne!(text, admin, "the admin kubeconfig carries the admin token");
    let path = dir.join("scheduler-kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

/// A client that verifies the port's certificate against the test CA.
fn verifying_client() -> reqwest::Client {
    let ca = std::fs::read(env().servers.join("pki/ca.crt")).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_a_token_allowed_by_rbac_and_the_probes_need_none() {
    let _g = serial();
    let client = client().await;
    reset(&client, &["serving"]).await;
    accounts();
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = scheduler_kubeconfig(tmp.path());
    let pki = env().servers.join("pki");
    let (cert, key) = (pki.join("serving.crt"), pki.join("serving.key"));
    let sched = Scheduler::start(
        tmp.path(),
        "serving",
        &kubeconfig,
        &[
            "--leader-elect=false",
            "--tls-cert-file",
            cert.to_str().unwrap(),
            "--tls-private-key-file",
            key.to_str().unwrap(),
        ],
    );
    sched.wait_ready().await;
    // The server's version is logged at start, and a supported one (the
    // test servers run the newest release) gets no warning.
    let version = client.apiserver_version().await.unwrap().git_version;
    let logs = sched.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("API server") && l.contains(&version)),
        "{logs}"
    );
    assert!(
        !logs.contains("oldest release wasmsched supports"),
        "{logs}"
    );

    let scraper = service_account_token("serving", "scraper");
    let nobody = service_account_token("serving", "nobody");
    let (status, body) = sched.get_as("/metrics", Some(&scraper)).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("wasmsched_plugin_info"), "{body}");
    let (status, body) = sched.get_as("/metrics", Some(&nobody)).await.unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(
            r#"forbidden: User "system:serviceaccount:serving:nobody" cannot get path "/metrics""#
        ),
        "{body}"
    );
    assert_eq!(sched.get_as("/metrics", None).await.unwrap().0, 401);
    let forged = format!("{scraper}x");
    assert_eq!(
        sched.get_as("/metrics", Some(&forged)).await.unwrap().0,
        401
    );
    for path in ["/healthz", "/readyz"] {
        assert_eq!(sched.get_as(path, None).await.unwrap().0, 200, "{path}");
        // A bad token does not matter where none is needed.
        assert_eq!(sched.get_as(path, Some(&forged)).await.unwrap().0, 200);
    }
    // Cached answers stay right: the same tokens again.
    assert_eq!(
        sched.get_as("/metrics", Some(&scraper)).await.unwrap().0,
        200
    );
    assert_eq!(
        sched.get_as("/metrics", Some(&nobody)).await.unwrap().0,
        403
    );

    // The given certificate is served: a client that verifies it against
    // the test CA connects; nothing is served in the clear.
    let r = verifying_client().get(sched.url("/healthz")).send().await;
    assert_eq!(r.unwrap().status().as_u16(), 200);
    let plain = sched.url("/healthz").replace("https://", "http://");
    assert!(reqwest::get(&plain).await.is_err(), "plain HTTP was served");
    let logs = sched.logs();
    assert!(!logs.contains("forbidden"), "a review was refused:\n{logs}");
    drop(sched);

    // Turned off: /metrics among the always-allowed paths.
    let open = Scheduler::start(
        tmp.path(),
        "serving-open",
        &kubeconfig,
        &[
            "--leader-elect=false",
            "--authorization-always-allow-paths",
            "/healthz,/readyz,/metrics",
        ],
    );
    open.wait_ready().await;
    let (status, body) = open.get_as("/metrics", None).await.unwrap();
    assert_eq!(status, 200, "{body}");
    // The default certificate is self-signed: a verifying client refuses it.
    let r = verifying_client().get(open.url("/healthz")).send().await;
    assert!(r.is_err(), "a self-signed certificate verified: {r:?}");
    let _ = kubectl(&["delete", "clusterrolebinding", "serving-scraper"]);
}

/// A PromQL query's result vector from the test Prometheus.
async fn prometheus_query(query: &str) -> Vec<serde_json::Value> {
    let url = std::env::var("WASMSCHED_TEST_PROMETHEUS").expect("WASMSCHED_TEST_PROMETHEUS");
    let r = reqwest::Client::new()
        .get(format!("{url}/api/v1/query"))
        .query(&[("query", query)])
        .send()
        .await;
    let Ok(r) = r else { return Vec::new() };
    let v: serde_json::Value = r.json().await.unwrap_or_default();
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_port_as_the_service_monitor_says() {
    let _g = serial();
    let client = client().await;
    reset(&client, &["serving"]).await;
    accounts();
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = scheduler_kubeconfig(tmp.path());
    let sched = Scheduler::start(
        tmp.path(),
        "scraped",
        &kubeconfig,
        &["--leader-elect=false"],
    );
    sched.wait_ready().await;
    // The job `tests-https` of scripts/test-servers: HTTPS without
    // verification and a bearer token from a file, as the ServiceMonitor;
    // the token is the `scraper` account's, allowed by
    // deploy/metrics-reader.yaml's role.
    let servers = &env().servers;
    let token = service_account_token("serving", "scraper");
    std::fs::write(servers.join("prometheus-scrape-token"), token).unwrap();
    let target = format!("127.0.0.1:{}", sched.port);
    let targets = servers.join("prometheus-https-targets/wasmsched.json");
    let sd = serde_json::json!([{"targets": [target], "labels": {"test": "serving"}}]);
    std::fs::write(&targets, sd.to_string()).unwrap();
    let query = format!("wasmsched_plugin_info{{job=\"tests-https\",instance=\"{target}\"}}");
    wait_until(
        "Prometheus scraped /metrics",
        Duration::from_secs(60),
        || async { !prometheus_query(&query).await.is_empty() },
    )
    .await;
    let up = format!("up{{job=\"tests-https\",instance=\"{target}\"}}");
    let r = prometheus_query(&up).await;
    assert_eq!(r[0]["value"][1], "1", "{r:?}");
    let _ = std::fs::remove_file(&targets);
    let _ = kubectl(&["delete", "clusterrolebinding", "serving-scraper"]);
}

/// Opens `n` TCP connections to the port that send nothing.
async fn idle_connections(port: u16, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    out
}

/// Whether the server closed `conn` within `limit` (EOF or reset).
async fn closed_within(conn: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(limit, conn.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_do_not_starve_the_probes_and_are_closed() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[]).await;
    let tmp = tempfile::tempdir().unwrap();
    let sched = Scheduler::start(
        tmp.path(),
        "idle",
        &env().kubeconfig,
        &["--leader-elect=false", "--http-header-timeout", "3s"],
    );
    sched.wait_ready().await;
    let started = Instant::now();
    let mut idle = idle_connections(sched.port, 400).await;
    // Half-open at the HTTP level too: a TLS handshake never finished.
    for c in idle.iter_mut().take(100) {
        use tokio::io::AsyncWriteExt;
        c.write_all(&[0x16, 0x03, 0x01, 0x00, 0xff]).await.unwrap();
    }
    let mut latencies = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let (status, _) = sched
            .get_as("/healthz", None)
            .await
            .expect("/healthz answers");
        latencies.push(t.elapsed());
        assert_eq!(status, 200);
    }
    eprintln!(
        "/healthz with 400 idle connections open: {:?} (opened {:?} before)",
        latencies,
        started.elapsed()
    );
    // The server closes every one after the header timeout.
    let deadline = Instant::now() + Duration::from_secs(60);
    for (i, c) in idle.iter_mut().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            closed_within(c, left).await,
            "idle connection {i} still open"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_are_closed_at_once() {
    let _g = serial();
    let client = client().await;
    reset(&client, &[]).await;
    let tmp = tempfile::tempdir().unwrap();
    // A header timeout far longer than the test waits: a connection closed
    // sooner was closed for the limit.
    let sched = Scheduler::start(
        tmp.path(),
        "limit",
        &env().kubeconfig,
        &[
            "--leader-elect=false",
            "--http-max-connections",
            "16",
            "--http-header-timeout",
            "300s",
        ],
    );
    sched.wait_ready().await;
    // The readiness probes' connections are closed by their clients; let
    // the server see it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut held = idle_connections(sched.port, 16).await;
    let mut extra = idle_connections(sched.port, 4).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    for (i, c) in extra.iter_mut().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            closed_within(c, left).await,
            "connection {i} over the limit was kept"
        );
    }
    for c in held.iter_mut() {
        assert!(!closed_within(c, Duration::from_millis(10)).await);
    }
    // Freed slots serve again.
    drop(held);
    wait_until(
        "/healthz after the idle clients left",
        Duration::from_secs(30),
        || async {
            sched
                .get_as("/healthz", None)
                .await
                .is_some_and(|(s, _)| s == 200)
        },
    )
    .await;
    assert!(
        sched.logs().contains("connection limit reached"),
        "{}",
        sched.logs()
    );
}

/// Runs `wasmsched run ARGS`, which must fail at start; its stderr.
fn run_fails(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .arg("run")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("WASMSCHED_LOG")
        .output()
        .unwrap();
    assert!(!out.status.success(), "wasmsched run {args:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_http_api_server_is_refused_unless_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    // Nothing listens on port 1: the refusal comes before any connection.
    let kc = tmp.path().join("http-kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:1'}\n\
         users:\n- name: u\n  user: {token: secret}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n\
         current-context: x\n",
    )
    .unwrap();
    let kc_s = kc.to_str().unwrap();
    let err = run_fails(&["--kubeconfig", kc_s]);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(
        err.trim(),
        format!(
            "error: kubeconfig {kc_s}: API server http://127.0.0.1:1/ is plain HTTP: the \
             scheduler's credentials and the bearer tokens of /metrics requests (sent to it for \
             review) would travel in the clear; use https, or pass --allow-http-apiserver"
        )
    );
    // Allowed, it gets as far as connecting: nothing answers, and an API
    // server away at start is waited for (docs/faults.md), not an exit.
    let log = tmp.path().join("allowed.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .arg("run")
        .args([
            "--listen",
            "127.0.0.1:0",
            "--kubeconfig",
            kc_s,
            "--allow-http-apiserver",
        ])
        .env_remove("WASMSCHED_LOG")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("API server not reachable; retrying")
            || started.elapsed() > Duration::from_secs(30)
        {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let alive = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(alive, "it exited: {text}");
    assert!(
        text.contains("API server not reachable; retrying"),
        "{text}"
    );
    // Flags checked before the API server is called.
    let err = run_fails(&["--kubeconfig", kc_s, "--tls-cert-file", "/nonexistent.crt"]);
    assert!(
        err.contains("--tls-cert-file and --tls-private-key-file go together"),
        "{err}"
    );
    let err = run_fails(&[
        "--kubeconfig",
        kc_s,
        "--tls-cert-file",
        "/dev/zero",
        "--tls-private-key-file",
        "/dev/zero",
    ]);
    assert!(
        err.contains("--tls-cert-file /dev/zero: is a character device, not a regular file"),
        "{err}"
    );
    let err = run_fails(&[
        "--kubeconfig",
        kc_s,
        "--authorization-always-allow-paths",
        "metrics",
    ]);
    assert!(err.contains("\"metrics\" must start with '/'"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_review_kubeconfig_is_refused() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let admin = std::fs::read_to_string(&env().kubeconfig).unwrap();
    let https = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("server line")
        .to_string();
    let kc = tmp.path().join("http-kubeconfig");
    std::fs::write(
        &kc,
        admin.replace(&https, &https.replace("https://", "http://")),
    )
    .unwrap();
    let kc_s = kc.to_str().unwrap();
    for flag in ["--authentication-kubeconfig", "--authorization-kubeconfig"] {
        let err = run_fails(&[
            "--kubeconfig",
            env().kubeconfig.to_str().unwrap(),
            "--leader-elect=false",
            flag,
            kc_s,
        ]);
        assert!(
            err.starts_with(&format!("error: {flag} {kc_s}: API server http://")),
            "{err}"
        );
    }
}

/// The families kube-scheduler's dashboards and alerts read beyond the
/// scheduler's own: `process_*`, client-go's `rest_client_*` for the API
/// client, and upstream's `scheduler_pod_scheduling_sli_duration_seconds`,
/// `scheduler_unschedulable_pods` and `scheduler_plugin_evaluation_total`,
/// with their labels and buckets, scraped by the real Prometheus through
/// the secure port as the ServiceMonitor scrapes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_kube_schedulers_families() {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::{Api, PostParams};
    let _g = serial();
    let client = client().await;
    reset(&client, &["serving"]).await;
    accounts();
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "serving-node"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = scheduler_kubeconfig(tmp.path());
    let sched = Scheduler::start(
        tmp.path(),
        "families",
        &kubeconfig,
        &["--leader-elect=false"],
    );
    sched.wait_ready().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "serving");
    for (name, cpu) in [("fits", "1"), ("too-big", "100")] {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "serving"},
            "spec": {"schedulerName": "gpu-scheduler", "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let servers = &env().servers;
    let token = service_account_token("serving", "scraper");
    std::fs::write(servers.join("prometheus-scrape-token"), token).unwrap();
    let target = format!("127.0.0.1:{}", sched.port);
    let targets = servers.join("prometheus-https-targets/families.json");
    let sd = serde_json::json!([{"targets": [target], "labels": {"test": "families"}}]);
    std::fs::write(&targets, sd.to_string()).unwrap();
    let at = format!("job=\"tests-https\",instance=\"{target}\"");
    let queries = [
        format!("process_resident_memory_bytes{{{at}}} > 1e6"),
        format!("process_cpu_seconds_total{{{at}}} > 0"),
        format!("process_open_fds{{{at}}} > 0"),
        format!("process_start_time_seconds{{{at}}} > 1.7e9"),
        format!("rest_client_requests_total{{{at},code=\"200\",method=\"GET\"}} > 0"),
        format!("rest_client_requests_total{{{at},code=\"201\",method=\"POST\"}} > 0"),
        format!("rest_client_request_duration_seconds_bucket{{{at},verb=\"GET\",le=\"60\"}} > 0"),
        format!("rest_client_request_duration_seconds_bucket{{{at},verb=\"GET\",le=\"0.005\"}}"),
        format!("scheduler_pod_scheduling_sli_duration_seconds_count{{{at},attempts=\"1\"}} >= 1"),
        format!("scheduler_pod_scheduling_sli_duration_seconds_bucket{{{at},attempts=\"1\",le=\"5242.88\"}} >= 1"),
        format!("scheduler_unschedulable_pods{{{at},plugin=\"NodeResourcesFit\",profile=\"gpu-scheduler\"}} == 1"),
        format!("scheduler_plugin_evaluation_total{{{at},plugin=\"NodeResourcesFit\",extension_point=\"Filter\",profile=\"gpu-scheduler\"}} > 0"),
        format!("sum(scheduler_plugin_evaluation_total{{{at},extension_point=\"PreFilter\",profile=\"gpu-scheduler\"}}) > 0"),
    ];
    for q in &queries {
        wait_until(q, Duration::from_secs(60), || async {
            !prometheus_query(q).await.is_empty()
        })
        .await;
    }
    // The unschedulable pod leaves the gauge when it is deleted.
    pods.delete("too-big", &Default::default()).await.unwrap();
    let gone = format!(
        "scheduler_unschedulable_pods{{{at},plugin=\"NodeResourcesFit\",profile=\"gpu-scheduler\"}} == 0"
    );
    wait_until(&gone, Duration::from_secs(60), || async {
        !prometheus_query(&gone).await.is_empty()
    })
    .await;
    let _ = std::fs::remove_file(&targets);
    let _ = kubectl(&["delete", "clusterrolebinding", "serving-scraper"]);
}
