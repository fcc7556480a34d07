//! The `wasmsched` command.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

mod bench_command;
mod oci_command;

use bench_command::{bench, BenchArgs};
use wasmsched::{config, escape, manifest, output, simulate, wasm};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A Kubernetes scheduler whose policies are WebAssembly components.
#[derive(Parser)]
#[command(name = "wasmsched", version, about, long_about = None, args_override_self = true)]
struct Cli {
    /// Log verbosity, with klog's meanings: 0 warnings and errors, 1
    /// start-up, 2 one line per binding and per failed attempt, 4 and
    /// more per-plugin detail, 10 every score (`-v 2`, `-v=2`, `--v=2`).
    #[arg(
        short = 'v',
        long = "v",
        global = true,
        value_name = "LEVEL",
        default_value_t = 0
    )]
    v: u8,
    /// Log format: `text`, or `json` (klog's JSON: `ts`, `v`, `msg`, and the
    /// fields; `pod`, `node`, `plugin`, `err`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    logging_format: LogFormat,
    /// Log filter (tracing env-filter syntax), e.g. `info` or
    /// `wasmsched=debug`, instead of the levels -v sets.
    #[arg(long, global = true, env = "WASMSCHED_LOG")]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Copy, Clone, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Schedule the pending pods of a cluster described in YAML/JSON
    /// manifests (Nodes and Pods as `kubectl get -o yaml` prints them) and
    /// report where each lands, or why it cannot. Objects of other kinds
    /// are skipped and counted in one line on stderr; input without Nodes,
    /// Pods or a pending Pod is an error.
    Simulate(SimulateArgs),
    /// Run the scheduler against a Kubernetes API server: watch Nodes and
    /// Pods, schedule the pending pods whose `spec.schedulerName` a profile
    /// serves, bind them, and report events, with leader election and an
    /// HTTPS port for /metrics (delegated authentication and authorization
    /// through the API server, as kube-scheduler's) and /configz, and
    /// /healthz, /livez and /readyz open to the probes; with a
    /// `deletionCost` section, the leader also runs the deletion-cost
    /// controller. Stops cleanly on SIGTERM; a replica that loses the
    /// lease steps down and competes again. Takes kube-scheduler's configuration file and
    /// flags as they are (docs/migrating.md); a flag given twice takes
    /// its last value, as kube-scheduler's do.
    #[command(args_override_self = true)]
    Run(Box<RunArgs>),
    /// Plugin tools.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Benchmark the scheduling engine on a synthetic cluster (in process).
    Bench(BenchArgs),
    /// Compute the pod-deletion-cost of every pod of the opted-in
    /// ReplicaSets once (the controller's pass, see docs/deletion-cost.md)
    /// and, unless --dry-run, write the costs that moved; prints a table.
    DeletionCost(DeletionCostArgs),
    /// List the pods the ReplicaSet controller would delete to scale a
    /// Deployment or ReplicaSet down to --replicas, in order, with the rule
    /// that decided each comparison: of a live workload (--workload, via
    /// the kubeconfig), or of manifest files (PATH...).
    ScaleDownPreview(PreviewArgs),
    /// Print each profile's plugin chain per extension point, where each
    /// plugin comes from (the defaults, the file, a fragment it includes),
    /// its effective percentageOfNodesToScore, each plugin's args as it
    /// runs with them (the file's pluginConfig over the args the defaults
    /// add), and the wasm plugins (of the built-in configuration, or of
    /// --config FILE).
    Profiles {
        /// Configuration file (default: the built-in configuration).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Why is a pod pending? Asks a running scheduler (its HTTPS port,
    /// with the same authentication as /metrics: a bearer token allowed
    /// `get` on /explain/*) to attempt the pending pod NAMESPACE/POD now and
    /// prints that attempt as `simulate --explain` does: every node with
    /// each Filter plugin's verdict and each Score plugin's scores.
    Explain(ExplainArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell), e.g. `wasmsched completion bash > /etc/bash_completion.d/wasmsched`.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// Manifest files or directories (searched for .yaml, .yml, .json);
    /// `-` reads YAML or JSON from stdin (multi-document), as kubectl's
    /// `-f -`.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Scheduler configuration (default: built in, profile `gpu-scheduler`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Output format (kubectl's `-o`).
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// Explain one pod (NAMESPACE/NAME): every node with each plugin's
    /// filter verdict and each score, and why a node that passed has no
    /// score (not evaluated once percentageOfNodesToScore had enough
    /// feasible nodes, the only feasible node, or a failed attempt).
    #[arg(long, value_name = "NS/POD")]
    explain: Option<String>,
    /// Node metrics for the plugins, as `run` gets them from Prometheus
    /// (the config's `nodeMetrics` names and staleness): Prometheus text
    /// format (dcgm-exporter's /metrics) or a query API answer as curl
    /// prints it (docs/node-metrics.md).
    #[arg(long, value_name = "FILE")]
    metrics: Option<PathBuf>,
    /// Seed of the tie-break between equally scored nodes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Schedule every pending pod with the first profile, whatever its
    /// schedulerName.
    #[arg(long)]
    all_pods: bool,
    /// Exit with status 3 when a pod is left unschedulable (after the
    /// report is printed), for CI gates.
    #[arg(long)]
    fail_on_unschedulable: bool,
}

/// `simulate`'s exit status when --fail-on-unschedulable finds a pod left
/// unschedulable (1 is an error, 2 a usage error).
const UNSCHEDULABLE_EXIT: u8 = 3;

#[derive(clap::Args)]
struct ExplainArgs {
    /// The pending pod.
    #[arg(value_name = "NS/POD")]
    pod: String,
    /// The scheduler's port (the leader's: a standby answers 503).
    #[arg(long, default_value = "https://127.0.0.1:10259")]
    server: String,
    /// Bearer token (default: $WASMSCHED_TOKEN, then --token-file).
    #[arg(long, env = "WASMSCHED_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// File holding the bearer token (a ServiceAccount token file).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// PEM CA of the port's certificate.
    #[arg(long, value_name = "FILE")]
    certificate_authority: Option<PathBuf>,
    /// Do not verify the port's certificate (self-signed by default).
    #[arg(long)]
    insecure_skip_tls_verify: bool,
    /// Output format (`table`: the text of `simulate --explain`).
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

#[derive(clap::Args)]
struct DeletionCostArgs {
    /// Configuration file with a `deletionCost` section (default: the
    /// built-in policy, no metric source, opt-in label
    /// `deletion-cost.wasmsched.io/enabled=true`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config, then the
    /// in-cluster service account).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Compute and print, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

#[derive(clap::Args)]
struct PreviewArgs {
    /// The replica count to scale down to.
    #[arg(long)]
    replicas: u32,
    /// NAMESPACE/KIND/NAME of a Deployment or ReplicaSet: live, unless
    /// PATHs are given (then it picks the workload among the manifests).
    #[arg(long, value_name = "NS/KIND/NAME")]
    workload: Option<String>,
    /// Manifest files or directories with the Pods (and their ReplicaSets
    /// and Deployments), as `kubectl get -o yaml` prints them.
    paths: Vec<PathBuf>,
    /// The time ages are computed at (RFC 3339; default: now).
    #[arg(long)]
    now: Option<String>,
    /// Kubeconfig file for a live workload.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Scheduler configuration: wasmsched's (`WasmSchedulerConfiguration`)
    /// or kube-scheduler's own `KubeSchedulerConfiguration` as it is
    /// (default: built in, profile `gpu-scheduler`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Kubeconfig file (default: `clientConnection.kubeconfig`, then
    /// $KUBECONFIG or ~/.kube/config, then the in-cluster service
    /// account). With a `KubeSchedulerConfiguration` whose
    /// `clientConnection.kubeconfig` is set, that file wins, as in
    /// kube-scheduler (the flag is then named at start as ignored).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// IP address the HTTPS port (/metrics, /healthz, /livez, /readyz,
    /// /configz) listens on, as kube-scheduler's flag [default: 0.0.0.0].
    #[arg(long, value_name = "IP")]
    bind_address: Option<std::net::IpAddr>,
    /// The HTTPS port, as kube-scheduler's flag [default: 10259].
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    secure_port: Option<u16>,
    /// Address and port at once, `IP:PORT` or `:PORT` (every address),
    /// instead of --bind-address and --secure-port.
    #[arg(long, value_name = "[IP]:PORT", value_parser = parse_listen,
          conflicts_with_all = ["bind_address", "secure_port"])]
    listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    serving: ServingArgs,
    /// This replica's identity in the leader-election Lease (default:
    /// $POD_NAME or the host name, plus a random suffix).
    #[arg(long)]
    identity: Option<String>,
    #[command(flatten)]
    leader_election: LeaderElectionArgs,
    #[command(flatten)]
    client: DeprecatedClientArgs,
    /// kube-scheduler's feature gates, `Gate=true|false,...`: every gate
    /// of Kubernetes 1.37 is accepted by name; one whose feature wasmsched
    /// does not have cannot be turned on, one it always has cannot be
    /// turned off (docs/migrating.md). Unknown gates are refused.
    #[arg(long, value_name = "GATE=BOOL,...")]
    feature_gates: Vec<String>,
    /// Seed of the tie-break between equally scored nodes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Fault testing: pause before every bind call.
    #[arg(long, hide = true, default_value = "0s", value_parser = humantime::parse_duration)]
    bind_delay: std::time::Duration,
}

/// kube-scheduler's leader-election flags; each overrides its field of
/// `leaderElection` in the configuration file, as in kube-scheduler.
#[derive(clap::Args)]
struct LeaderElectionArgs {
    /// Leader election on a Lease: `--leader-elect`, `--leader-elect=false`
    /// or `--leader-elect false` (overrides `leaderElection.leaderElect`,
    /// default true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    leader_elect: Option<bool>,
    /// How long a lease holds after its last renewal (`15s`).
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    leader_elect_lease_duration: Option<String>,
    /// How long the leader tries to renew before it gives up (`10s`).
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    leader_elect_renew_deadline: Option<String>,
    /// Time between attempts to acquire or renew (`2s`).
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    leader_elect_retry_period: Option<String>,
    /// The lock's kind: only `leases`.
    #[arg(long, value_name = "KIND")]
    leader_elect_resource_lock: Option<String>,
    /// The Lease's name (default `wasmsched`; kube-scheduler's is
    /// `kube-scheduler`: name it to replace kube-scheduler).
    #[arg(long, value_name = "NAME")]
    leader_elect_resource_name: Option<String>,
    /// The Lease's namespace (`kube-system`).
    #[arg(long, value_name = "NAMESPACE")]
    leader_elect_resource_namespace: Option<String>,
}

impl LeaderElectionArgs {
    /// Writes the flags given into the file's `leaderElection`.
    fn apply(&self, file: &mut config::ConfigFile) {
        let le = file.leader_election.get_or_insert_with(Default::default);
        let set = |field: &mut Option<String>, flag: &Option<String>| {
            if let Some(v) = flag {
                *field = Some(v.clone());
            }
        };
        if let Some(v) = self.leader_elect {
            le.leader_elect = Some(v);
        }
        set(&mut le.lease_duration, &self.leader_elect_lease_duration);
        set(&mut le.renew_deadline, &self.leader_elect_renew_deadline);
        set(&mut le.retry_period, &self.leader_elect_retry_period);
        set(&mut le.resource_lock, &self.leader_elect_resource_lock);
        set(&mut le.resource_name, &self.leader_elect_resource_name);
        set(
            &mut le.resource_namespace,
            &self.leader_elect_resource_namespace,
        );
    }
}

/// kube-scheduler's deprecated flags for its client and profiling:
/// used without --config, ignored (and named) with it, as in
/// kube-scheduler.
#[derive(clap::Args)]
struct DeprecatedClientArgs {
    /// Sustained API requests per second (`clientConnection.qps`, 50).
    #[arg(long, value_name = "QPS")]
    kube_api_qps: Option<f32>,
    /// Burst of API requests (`clientConnection.burst`, 100).
    #[arg(long, value_name = "N")]
    kube_api_burst: Option<u32>,
    /// kube-scheduler's wire format; wasmsched's client speaks JSON.
    #[arg(long, value_name = "TYPE")]
    kube_api_content_type: Option<String>,
    /// Go's /debug/pprof handlers: accepted, none exist here.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    profiling: Option<bool>,
    /// Go's block profiling: accepted, none exists here.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    contention_profiling: Option<bool>,
}

impl DeprecatedClientArgs {
    /// Without --config: writes the flags given into the (built-in)
    /// file. With it: one note per flag given, which kube-scheduler
    /// ignores then too.
    fn apply(&self, file: &mut config::ConfigFile, with_config: bool, notes: &mut Vec<String>) {
        let given: Vec<&str> = [
            ("--kube-api-qps", self.kube_api_qps.is_some()),
            ("--kube-api-burst", self.kube_api_burst.is_some()),
            (
                "--kube-api-content-type",
                self.kube_api_content_type.is_some(),
            ),
            ("--profiling", self.profiling.is_some()),
            (
                "--contention-profiling",
                self.contention_profiling.is_some(),
            ),
        ]
        .into_iter()
        .filter_map(|(flag, set)| set.then_some(flag))
        .collect();
        if with_config {
            for flag in given {
                notes.push(format!(
                    "{flag} ignored: with --config the file's setting applies, as in kube-scheduler"
                ));
            }
            return;
        }
        let cc = file.client_connection.get_or_insert_with(Default::default);
        if let Some(q) = self.kube_api_qps {
            cc.qps = Some(q);
        }
        if let Some(b) = self.kube_api_burst {
            cc.burst = Some(b);
        }
        if let Some(t) = &self.kube_api_content_type {
            cc.content_type = Some(t.clone());
        }
        if let Some(p) = self.profiling {
            file.enable_profiling = Some(p);
        }
        if let Some(p) = self.contention_profiling {
            file.enable_contention_profiling = Some(p);
        }
    }
}

/// `--listen`: `IP:PORT`, or `:PORT` for every address (Go's form).
fn parse_listen(s: &str) -> Result<std::net::SocketAddr, String> {
    let full = match s.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => s.to_string(),
    };
    full.parse()
        .map_err(|_| format!("{s:?} is not IP:PORT or :PORT"))
}

/// A duration as Go writes it (`15s`, `1m0s`, `500ms`), checked here so
/// that the error names the flag.
fn go_duration(s: &str) -> Result<String, String> {
    humantime::parse_duration(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("{s:?} is not a duration such as 15s or 1m0s: {e}"))
}

/// The HTTPS port's flags, named after kube-scheduler's.
#[derive(clap::Args)]
struct ServingArgs {
    /// Serving certificate of the port (PEM, with its chain); with
    /// --tls-private-key-file. Without both, a self-signed certificate is
    /// generated at start.
    #[arg(long, value_name = "FILE")]
    tls_cert_file: Option<PathBuf>,
    /// Private key of --tls-cert-file (PEM).
    #[arg(long, value_name = "FILE")]
    tls_private_key_file: Option<PathBuf>,
    /// Kubeconfig whose API server reviews the bearer tokens of /metrics,
    /// /configz and /explain requests (TokenReview; default: the
    /// scheduler's own kubeconfig).
    #[arg(long, value_name = "FILE")]
    authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig whose API server authorizes those requests
    /// (SubjectAccessReview, `get` on the non-resource URL; default: the
    /// scheduler's own kubeconfig).
    #[arg(long, value_name = "FILE")]
    authorization_kubeconfig: Option<PathBuf>,
    /// Paths served to anyone, without a token (comma-separated, `/path`
    /// or `/prefix/*`). Add /metrics to turn its authentication off.
    #[arg(long, value_delimiter = ',', default_value = "/healthz,/readyz,/livez")]
    authorization_always_allow_paths: Vec<String>,
    /// Connections the port serves at once; more are closed when accepted.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    http_max_connections: u32,
    /// Time a connection has for its TLS handshake, then for each request's
    /// headers (also how long it may stay idle between requests).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    http_header_timeout: std::time::Duration,
    /// Accept an http:// API server in a kubeconfig (the scheduler's
    /// credentials and the tokens it reviews then travel in the clear).
    #[arg(long)]
    allow_http_apiserver: bool,
}

impl ServingArgs {
    fn options(self) -> wasmsched::runtime::server::ServingOptions {
        use wasmsched::runtime::server::{conn::Limits, ServingOptions};
        ServingOptions {
            tls_cert_file: self.tls_cert_file,
            tls_private_key_file: self.tls_private_key_file,
            authentication_kubeconfig: self.authentication_kubeconfig,
            authorization_kubeconfig: self.authorization_kubeconfig,
            always_allow_paths: self.authorization_always_allow_paths,
            limits: Limits {
                max_connections: self.http_max_connections as usize,
                header_timeout: self.http_header_timeout,
                ..Limits::default()
            },
        }
    }
}

#[derive(Copy, Clone, ValueEnum)]
pub(crate) enum Format {
    Table,
    Json,
    Yaml,
}

/// `report` as `format` on stdout (`table`: `table`'s rendering).
fn print_as<T: serde::Serialize>(
    format: Format,
    report: &T,
    table: impl FnOnce() -> String,
) -> Result<()> {
    match format {
        Format::Table => print!("{}", table()),
        Format::Json => println!("{}", serde_json::to_string_pretty(report)?),
        Format::Yaml => print!("{}", yaml(report)?),
    }
    Ok(())
}

/// `value` as YAML.
pub(crate) fn yaml<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_saphyr::to_string(value).map_err(|e| anyhow::anyhow!("YAML output: {e}"))
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Validate a component against the contract: exports, contract
    /// version, size, compile time, and the init call with ARGS.
    Check {
        /// The component: `.wasm`, or compressed `.wasm.gz` / `.wasm.zst`.
        file: PathBuf,
        /// Plugin args as JSON.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Precompiled-component cache directory: reports whether the
        /// module came from it, and fills it.
        #[arg(long, env = "WASMSCHED_PLUGIN_CACHE", value_name = "DIR")]
        cache_dir: Option<PathBuf>,
    },
    /// Load a configuration, watch its wasm plugins' files (and the
    /// configuration itself for changed `oci://` references, pulled and
    /// verified) and reload them as a running scheduler does, printing one
    /// line per reload event (new version, rejection with its cause,
    /// deleted file). Runs until interrupted (Ctrl-C).
    Watch {
        /// Scheduler configuration whose `wasmPlugins` paths are watched.
        #[arg(long)]
        config: PathBuf,
        /// Quiet period after the last file event before a check.
        #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration)]
        debounce: std::time::Duration,
    },
    /// Write a new plugin project in Rust, Go, Python, JavaScript or C: a
    /// policy that filters and scores on two node labels, its test cases
    /// (cases.yaml), a configuration running it, and a README with the
    /// build, check and test commands. It builds with the language's
    /// toolchain and passes `plugin check` and `plugin test` as written.
    New {
        /// The plugin's name: lower-case words joined by '-' (my-policy).
        name: String,
        /// The language.
        #[arg(long, value_parser = ["rust", "go", "python", "js", "c"])]
        lang: String,
        /// Where to write the project (default: ./NAME); it must not exist,
        /// or be empty.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Where a Rust or Go project takes the SDK from: a wasmsched
        /// checkout (its plugins/sdk or plugins/sdk-go), or `crates.io`
        /// (Rust: `wasmsched-plugin-sdk = "VERSION"`). Default: the checkout
        /// this binary was built from, when it is there, else crates.io.
        #[arg(long, value_name = "DIR|crates.io")]
        sdk: Option<String>,
    },
    /// Push a component to an OCI registry as a wasm artifact (the CNCF
    /// layout wasm-pkg-tools and Kubewarden use: config
    /// application/vnd.wasm.config.v0+json, one application/wasm layer),
    /// after checking it against the contract; prints the manifest digest
    /// to pin in a configuration (`path: oci://REGISTRY/NAME@sha256:...`).
    Push {
        /// The component: `.wasm`, or `.wasm.gz` / `.wasm.zst` (pushed
        /// decompressed).
        file: PathBuf,
        /// REGISTRY/NAME[:TAG] (`oci://` optional); without a tag the
        /// manifest is stored by digest only.
        reference: String,
        #[command(flatten)]
        registry: oci_command::RegistryArgs,
        /// An annotation on the manifest (repeatable).
        #[arg(long = "annotation", value_name = "KEY=VALUE")]
        annotations: Vec<String>,
    },
    /// Pull a wasm artifact's component from an OCI registry, verify the
    /// manifest's and the component's digests, and write it to a file;
    /// prints the digest to pin in a configuration.
    Pull {
        /// REGISTRY/NAME@sha256:DIGEST or REGISTRY/NAME:TAG (`oci://`
        /// optional).
        reference: String,
        /// Where to write the component (default: NAME.wasm, after the
        /// repository's last component).
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        registry: oci_command::RegistryArgs,
    },
    /// Run a plugin's Filter, Score and deletion-cost on the fixture nodes
    /// and pods of a YAML case file and compare with the expected verdicts
    /// and scores, printing a diff; exits non-zero when a case fails (see
    /// docs/writing-plugins.md for the file format).
    Test {
        /// The component: `.wasm`, or compressed `.wasm.gz` / `.wasm.zst`.
        plugin: PathBuf,
        /// The case file (YAML).
        #[arg(long)]
        cases: PathBuf,
        /// Plugin args as JSON, instead of the case file's `args`.
        #[arg(long)]
        args: Option<String>,
        /// Precompiled-component cache directory (a second run of a
        /// Python or JavaScript component then starts in milliseconds).
        #[arg(long, env = "WASMSCHED_PLUGIN_CACHE", value_name = "DIR")]
        cache_dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !cli.command.serves() {
        end_quietly_on_closed_pipe();
    }
    init_logging(&cli);
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            // One line: the context chain, outermost first, with any
            // newline or escape sequence from input shown escaped.
            eprintln!("error: {}", escape::escape(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

impl Command {
    /// A long-running command whose sockets and child processes must not
    /// end the process when their peer goes away (`run`, `plugin watch`).
    fn serves(&self) -> bool {
        matches!(
            self,
            Command::Run(_) | Command::Plugin(PluginCommand::Watch { .. })
        )
    }
}

/// A reader that stops early (`wasmsched simulate ... | head -3`) ends
/// the command as it ends `cat`: SIGPIPE's default action, a quiet exit
/// (status 141 in a shell), instead of a panic on the next `print!` (Rust
/// ignores SIGPIPE, so a write to a closed pipe fails with EPIPE). Sockets
/// are not concerned: the standard library and tokio write to them with
/// `MSG_NOSIGNAL`.
fn end_quietly_on_closed_pipe() {
    // SAFETY: called at start, before any other thread exists; SIG_DFL is
    // a valid disposition for SIGPIPE.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The log subscriber: -v's levels (or --log's filter) in --logging-format.
fn init_logging(cli: &Cli) {
    use wasmsched::logging;
    logging::set_verbosity(cli.v);
    let mut directives = match &cli.log {
        Some(l) => logging::with_internals_capped(l),
        None => logging::filter(cli.v),
    };
    if !directives.contains("kube_client") {
        // kube's client logs every failed request at ERROR (dozens a
        // second while the API server is away); the runtime logs each
        // failure once and counts them all (rest_client_requests_total).
        // `--log ...,kube_client=debug` brings them back.
        directives.push_str(",kube_client::client::builder=off");
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(logging::filter(cli.v)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.logging_format {
        LogFormat::Text => builder
            .fmt_fields(escaped_fields())
            // Colours only for a person at a terminal, not in files and pipes.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder.event_format(logging::KubeJson).init(),
    }
}

/// Log fields as the default format writes them (`message key=value`),
/// with control characters from input (a pod name with a newline)
/// escaped, so that one event stays one line.
fn escaped_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> {
    use std::fmt::Write;
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(
        |w: &mut tracing_subscriber::fmt::format::Writer<'_>,
         field: &tracing::field::Field,
         value: &dyn std::fmt::Debug| {
            let mut w = escape::EscapingWriter(w);
            match field.name() {
                "message" => write!(w, "{value:?}"),
                name => write!(w, "{name}={value:?}"),
            }
        },
    )
    .delimited(" ")
}

/// Builds the profiles, naming the configuration file in errors.
fn build_scheduler(
    path: &Option<PathBuf>,
    file: &config::ConfigFile,
    base: &Path,
    seed: u64,
) -> Result<config::Scheduler> {
    config::build(file, base, seed).map_err(|e| match path {
        Some(p) => anyhow::anyhow!("config {}: {e}", p.display()),
        None => anyhow::anyhow!("built-in config: {e}"),
    })
}

fn load_config(path: &Option<PathBuf>) -> Result<(config::ConfigFile, PathBuf)> {
    Ok(match path {
        Some(p) => (
            config::load(p).map_err(|e| anyhow::anyhow!("config {e}"))?,
            p.parent().map(PathBuf::from).unwrap_or_default(),
        ),
        None => (config::ConfigFile::default(), PathBuf::from(".")),
    })
}

fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Simulate(a) => {
            let (file, base) = load_config(&a.config)?;
            let manifests = manifest::load(&a.paths)?;
            let scheduler = build_scheduler(&a.config, &file, &base, a.seed)?;
            // What was skipped: with the error when nothing is left to
            // schedule (a typo'd kind is then the likely cause), else
            // before the report; other errors stay one line.
            let skipped = manifests.skipped_line();
            if let Err(cause) = manifests.check_schedulable(&a.paths) {
                if let Some(line) = &skipped {
                    eprintln!("{line}");
                }
                anyhow::bail!(cause);
            }
            for note in scheduler.notes(&file) {
                tracing::warn!("{note}");
            }
            let metrics = match &a.metrics {
                None => None,
                Some(path) => {
                    let naming = wasmsched::node_metrics::NodeMetricsConfig::from_file(&file)?
                        .map(|c| c.naming)
                        .unwrap_or_default();
                    Some(wasmsched::node_metrics::snapshot::load(path, &naming)?)
                }
            };
            let report = simulate::run(
                &scheduler,
                manifests,
                &simulate::Options {
                    all_pods: a.all_pods,
                    explain: a.explain,
                    metrics,
                },
            )?;
            if let Some(line) = skipped {
                eprintln!("{line}");
            }
            print_as(a.output, &report, || output::table(&report))?;
            if a.fail_on_unschedulable && !report.unschedulable.is_empty() {
                eprintln!(
                    "error: {} pod(s) unschedulable (--fail-on-unschedulable)",
                    report.unschedulable.len()
                );
                return Ok(ExitCode::from(UNSCHEDULABLE_EXIT));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Explain(a) => explain(a),
        Command::Completion { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, "wasmsched", &mut script);
            match std::io::Write::write_all(&mut std::io::stdout(), &script) {
                // A reader that stopped early (`| head`) is not an error.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(anyhow::anyhow!("writing the completion script: {e}"))
                }
                _ => Ok(ExitCode::SUCCESS),
            }
        }
        Command::Bench(a) => bench(a),
        Command::Run(a) => run_scheduler(*a),
        Command::DeletionCost(a) => deletion_cost(a),
        Command::ScaleDownPreview(a) => scale_down_preview(a),
        Command::Plugin(PluginCommand::Watch { config, debounce }) => {
            plugin_watch(config, debounce)
        }
        Command::Plugin(PluginCommand::Test {
            plugin,
            cases,
            args,
            cache_dir,
        }) => wasmsched::plugin_test::run_files(
            &plugin,
            &cases,
            args.as_deref(),
            cache_dir.as_deref(),
        ),
        Command::Plugin(PluginCommand::New {
            name,
            lang,
            dir,
            sdk,
        }) => plugin_new(name, &lang, dir, sdk),
        Command::Plugin(PluginCommand::Push {
            file,
            reference,
            registry,
            annotations,
        }) => oci_command::push(&file, &reference, &registry, &annotations),
        Command::Plugin(PluginCommand::Pull {
            reference,
            output,
            registry,
        }) => oci_command::pull(&reference, output, &registry),
        Command::Plugin(PluginCommand::Check {
            file,
            args,
            cache_dir,
        }) => plugin_check(&file, args, cache_dir),
        Command::Profiles { config: path } => print_profiles(&path),
    }
}

/// `plugin new`: writes the project, prints what to run next.
fn plugin_new(
    name: String,
    lang: &str,
    dir: Option<PathBuf>,
    sdk: Option<String>,
) -> Result<ExitCode> {
    use wasmsched::scaffold;
    let lang: scaffold::Lang = lang.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
    let options = scaffold::Options {
        name: name.clone(),
        lang,
        dir: dir.clone(),
        sdk: match sdk {
            Some(s) => s.parse().map_err(|e: String| anyhow::anyhow!(e))?,
            None => scaffold::Sdk::Default,
        },
    };
    let files =
        scaffold::create(&options).map_err(|e| anyhow::anyhow!("plugin new {name}: {e}"))?;
    println!(
        "created {} ({lang}, contract wasmsched:plugin@{}):",
        dir.display(),
        scaffold::contract_version()
    );
    for f in files {
        println!("  {}", f.display());
    }
    println!(
        "next: the build, check and test commands in {}",
        dir.join("README.md").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `plugin check`: loads a component as the scheduler would and starts it.
fn plugin_check(file: &Path, args: String, cache_dir: Option<PathBuf>) -> Result<ExitCode> {
    let disk = cache_dir
        .map(|d| wasm::DiskCache::new(&d).with_context(|| format!("cache dir {}", d.display())))
        .transpose()?;
    let loader = wasm::Loader::new(disk);
    let source = loader.read_file(file)?;
    let label = file.display().to_string();
    let (module, report) = loader.compile("check", &label, &source.bytes)?;
    match source.compression {
        wasm::source::Compression::None => println!("file:        {}", file.display()),
        c => println!(
            "file:        {} ({}, {} bytes)",
            file.display(),
            c.as_str(),
            source.file_size
        ),
    }
    println!("size:        {} bytes", module.size);
    println!("sha256:      {}", module.digest);
    let how = match report.origin {
        wasm::Origin::Disk => "loaded from the disk cache",
        _ => "compiled",
    };
    println!(
        "compile:     {:.1} ms ({how})",
        report.elapsed.as_secs_f64() * 1e3
    );
    print_cache(&loader, &report);
    println!("contract:    wasmsched:plugin@{}", wasm::CONTRACT_VERSION);
    println!("exports:     {}", module.exports);
    let started = Instant::now();
    let settings = wasm::WasmSettings {
        args,
        limits: wasm::Limits::default(),
        failure_policy: wasm::FailurePolicy::Fail,
    };
    loader
        .start("check", module, settings, 0, Default::default())
        .map_err(|e| anyhow::anyhow!("{}: init failed: {e}", file.display()))?;
    println!(
        "init:        ok ({:.1} ms)",
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(ExitCode::SUCCESS)
}

/// `plugin check`'s cache line.
fn print_cache(loader: &wasm::Loader, report: &wasm::CompileReport) {
    match (&loader.cache, report.origin) {
        (None, _) => println!("cache:       off (--cache-dir or WASMSCHED_PLUGIN_CACHE)"),
        (Some(_), wasm::Origin::Disk) => println!("cache:       hit"),
        (Some(d), _) => println!(
            "cache:       miss{}; stored in {}",
            report
                .cache_note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
            d.dir().display()
        ),
    }
}

/// `profiles`: each profile's plugin chain and where it comes from.
fn print_profiles(path: &Option<PathBuf>) -> Result<ExitCode> {
    let (file, base) = load_config(path)?;
    let scheduler = build_scheduler(path, &file, &base, 0)?;
    print!("{}", config::describe::describe(&scheduler));
    let notes = scheduler.notes(&file);
    if !notes.is_empty() {
        println!("\nread but not acted on:");
        for note in notes {
            println!("  {note}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `wasmsched run`.
fn run_scheduler(a: RunArgs) -> Result<ExitCode> {
    use std::sync::Arc;
    use wasmsched::runtime;
    let gates = wasmsched::feature_gates::FeatureGates::parse(&a.feature_gates)?;
    let mut notes = gates.notes.clone();
    let (mut file, base) = load_config(&a.config)?;
    let named = |e: &dyn std::fmt::Display| match &a.config {
        Some(p) => anyhow::anyhow!("config {}: {e}", p.display()),
        None => anyhow::anyhow!("built-in config: {e}"),
    };
    a.leader_election.apply(&mut file);
    a.client.apply(&mut file, a.config.is_some(), &mut notes);
    let settings = config::runtime(&file, &base).map_err(|e| named(&e))?;
    // kube-scheduler ignores --kubeconfig when its file is given; a
    // file that names no kubeconfig (as `--write-config-to` writes it)
    // takes the flag's here rather than falling back to in-cluster.
    let kubeconfig = match (&a.kubeconfig, &settings.kubeconfig) {
        (Some(flag), Some(from_file)) if config::file::is_kube_scheduler_file(&file) => {
            notes.push(format!(
                "--kubeconfig {} ignored: the file's clientConnection.kubeconfig ({}) applies, as in kube-scheduler",
                flag.display(),
                from_file.display()
            ));
            None
        }
        (flag, _) => flag.clone(),
    };
    let scheduler = Arc::new(build_scheduler(&a.config, &file, &base, a.seed)?);
    notes.extend(scheduler.notes(&file));
    let deletion_cost = wasmsched::deletion_cost::DeletionCostConfig::from_file(&file, &base)
        .map_err(|e| named(&e))?;
    for note in &notes {
        tracing::warn!("{note}");
    }
    let listen = a.listen.unwrap_or_else(|| {
        std::net::SocketAddr::new(
            a.bind_address
                .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into()),
            a.secure_port.unwrap_or(10259),
        )
    });
    let ending = runtime::run_blocking(
        scheduler,
        &file,
        &base,
        settings,
        deletion_cost,
        runtime::Options {
            kubeconfig,
            listen,
            allow_http_apiserver: a.serving.allow_http_apiserver,
            serving: a.serving.options(),
            identity: a.identity,
            bind_delay: a.bind_delay,
            config: a.config.clone(),
            feature_gates: gates.set,
        },
    )?;
    Ok(match ending {
        runtime::Ending::Signal => ExitCode::SUCCESS,
    })
}

/// `wasmsched explain NS/POD`: a running scheduler's view of a pending pod.
fn explain(a: ExplainArgs) -> Result<ExitCode> {
    use wasmsched::runtime::explain::{ask_blocking, AskOptions};
    let token = match (&a.token, &a.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(f)) => Some(
            std::fs::read_to_string(f).with_context(|| format!("--token-file {}", f.display()))?,
        ),
        (None, None) => None,
    };
    let options = AskOptions {
        server: a.server,
        token,
        ca: a.certificate_authority,
        insecure: a.insecure_skip_tls_verify,
        json: !matches!(a.output, Format::Table),
    };
    let body = ask_blocking(&a.pod, &options)?;
    match a.output {
        Format::Yaml => {
            let v: serde_json::Value = serde_json::from_str(&body)?;
            print!("{}", yaml(&v)?);
        }
        _ => print!("{body}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `wasmsched deletion-cost`: one controller pass.
fn deletion_cost(a: DeletionCostArgs) -> Result<ExitCode> {
    use wasmsched::deletion_cost::{self as dc, DeletionCostConfig};
    let cfg = match &a.config {
        Some(path) => {
            let (file, base) = load_config(&a.config)?;
            DeletionCostConfig::from_file(&file, &base)
                .map_err(|e| anyhow::anyhow!("config {}: {e}", path.display()))?
                .ok_or_else(|| {
                    anyhow::anyhow!("config {}: no deletionCost section", path.display())
                })?
        }
        None => DeletionCostConfig::builtin_default()
            .map_err(|e| anyhow::anyhow!("built-in config: {e}"))?,
    };
    let mode = if a.dry_run {
        dc::Mode::DryRun
    } else {
        dc::Mode::Apply
    };
    let report = dc::reconcile_once_blocking(a.kubeconfig.as_deref(), cfg, mode)?;
    print_as(a.output, &report, || report.table())?;
    Ok(ExitCode::SUCCESS)
}

/// `wasmsched scale-down-preview`.
fn scale_down_preview(a: PreviewArgs) -> Result<ExitCode> {
    use wasmsched::deletion_cost::{preview, WorkloadRef};
    let now = match &a.now {
        Some(t) => t
            .parse::<k8s_openapi::jiff::Timestamp>()
            .map_err(|e| anyhow::anyhow!("--now {t:?}: {e}"))?,
        None => k8s_openapi::jiff::Timestamp::now(),
    };
    let workload = a
        .workload
        .as_deref()
        .map(str::parse::<WorkloadRef>)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--workload: {e}"))?;
    let p = if a.paths.is_empty() {
        let workload = workload.ok_or_else(|| {
            anyhow::anyhow!("give --workload NS/KIND/NAME (live) or manifest PATHs")
        })?;
        preview::live_blocking(a.kubeconfig.as_deref(), &workload, a.replicas, now)?
    } else {
        let inventory = preview::load_manifests(&a.paths)?;
        let workload = match workload {
            Some(w) => w,
            None => inventory.single_workload()?,
        };
        preview::preview(&inventory.resolve(&workload)?, a.replicas, now)
    };
    print_as(a.output, &p, || p.table())?;
    Ok(ExitCode::SUCCESS)
}

/// `wasmsched plugin watch`: the reload machinery of a running scheduler,
/// without a cluster, printing each reload event.
fn plugin_watch(path: PathBuf, debounce: std::time::Duration) -> Result<ExitCode> {
    use std::sync::Arc;
    use wasmsched::reload;
    let config_path = Some(path);
    let (file, base) = load_config(&config_path)?;
    let shown = config_path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if config::plugin_sources(&file, &base)
        .map_err(|e| anyhow::anyhow!("config {shown}: {e}"))?
        .is_empty()
    {
        anyhow::bail!("config {shown}: no wasmPlugins entry with a path (a file or an oci:// artifact) to follow");
    }
    let scheduler = Arc::new(build_scheduler(&config_path, &file, &base, 0)?);
    let options = reload::Options {
        debounce,
        config: config_path.clone(),
        ..Default::default()
    };
    let reloader = Arc::new(reload::Reloader::from_config(
        scheduler, &file, &base, options,
    )?);
    let events = reloader.subscribe();
    let watcher = reload::PluginWatcher::start(reloader)?;
    for status in watcher.reloader().status() {
        print!("{status}");
    }
    println!("watching; Ctrl-C to stop");
    for event in events {
        println!("{event}");
    }
    Ok(ExitCode::SUCCESS)
}
