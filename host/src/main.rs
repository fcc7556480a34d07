//! The `wasmsched` command.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use wasmsched::{config, manifest, output, simulate, wasm};

/// A Kubernetes scheduler whose policies are WebAssembly components.
#[derive(Parser)]
#[command(name = "wasmsched", version, about, long_about = None)]
struct Cli {
    /// Log filter (tracing env-filter syntax), e.g. `info` or `wasmsched=debug`.
    #[arg(long, global = true, default_value = "warn", env = "WASMSCHED_LOG")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Schedule the pending pods of a cluster described in YAML/JSON
    /// manifests (Nodes and Pods as `kubectl get -o yaml` prints them) and
    /// report where each lands, or why it cannot.
    Simulate(SimulateArgs),
    /// Plugin tools.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Print the built-in default configuration's profiles and plugins.
    Profiles {
        /// Configuration file (default: the built-in configuration).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// Manifest files or directories (searched for .yaml, .yml, .json).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Scheduler configuration (default: built in, profile `gpu-scheduler`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// Explain one pod (NAMESPACE/NAME): every node with each plugin's
    /// filter verdict and each score.
    #[arg(long, value_name = "NS/POD")]
    explain: Option<String>,
    /// Seed of the tie-break between equally scored nodes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Schedule every pending pod with the first profile, whatever its
    /// schedulerName.
    #[arg(long)]
    all_pods: bool,
}

#[derive(Copy, Clone, ValueEnum)]
enum Format {
    Table,
    Json,
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Validate a component against the contract: exports, contract
    /// version, size, compile time, and the init call with ARGS.
    Check {
        file: PathBuf,
        /// Plugin args as JSON.
        #[arg(long, default_value = "{}")]
        args: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&cli.log)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            // One line: the context chain, outermost first.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Builds the profiles, naming the configuration file in errors.
fn build_scheduler(
    path: &Option<PathBuf>,
    file: &config::ConfigFile,
    base: &std::path::Path,
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
            let report = simulate::run(
                &scheduler,
                manifests,
                &simulate::Options {
                    all_pods: a.all_pods,
                    explain: a.explain,
                },
            )?;
            match a.output {
                Format::Table => print!("{}", output::table(&report)),
                Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plugin(PluginCommand::Check { file, args }) => {
            let bytes = std::fs::read(&file).with_context(|| format!("{}", file.display()))?;
            let module = wasm::PluginModule::compile(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            println!("file:        {}", file.display());
            println!("size:        {} bytes", module.size);
            println!("sha256:      {}", module.digest);
            println!(
                "compile:     {:.1} ms",
                module.compile_time.as_secs_f64() * 1e3
            );
            println!("contract:    wasmsched:plugin@{}", wasm::CONTRACT_VERSION);
            println!("exports:     {}", module.exports);
            let started = Instant::now();
            let settings = wasm::WasmSettings {
                args,
                limits: wasm::Limits::default(),
                failure_policy: wasm::FailurePolicy::Fail,
            };
            wasm::WasmPlugin::new("check", module, settings, 0)
                .map_err(|e| anyhow::anyhow!("{}: init failed: {e}", file.display()))?;
            println!(
                "init:        ok ({:.1} ms)",
                started.elapsed().as_secs_f64() * 1e3
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Profiles { config: path } => {
            let (file, base) = load_config(&path)?;
            let scheduler = build_scheduler(&path, &file, &base, 0)?;
            for fw in &scheduler.profiles {
                let p = fw.profile();
                println!("profile {}", p.scheduler_name);
                println!(
                    "  filter: {}",
                    p.filters
                        .iter()
                        .map(|f| f.name().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                println!(
                    "  score:  {}",
                    p.scores
                        .iter()
                        .map(|s| format!("{} (weight {})", s.plugin.name(), s.weight))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            for (name, m) in &scheduler.modules {
                println!(
                    "wasm plugin {name}: {} bytes, sha256 {}, exports {}",
                    m.size,
                    &m.digest[..12],
                    m.exports
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
