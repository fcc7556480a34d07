//! The `wasmsched bench` command line (a module of the binary): one run,
//! or with `--all` each run in its own process (so that peak RSS is its
//! own) and the Markdown tables of BENCHMARKS.md.

use std::process::ExitCode;

use anyhow::Result;
use wasmsched::bench::{self, BenchResult, Scenario, Workload};

use crate::Format;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Nodes in the synthetic cluster.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Pending pods to schedule.
    #[arg(long, default_value_t = 10000)]
    pods: usize,
    /// Seed of the generator and the tie-break.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Give every pod a `kubectl.kubernetes.io/last-applied-configuration`
    /// annotation of this many bytes (what `kubectl apply` leaves on real
    /// pods), to show the plugins' memory does not grow with it.
    #[arg(long, default_value_t = 0)]
    annotation_bytes: usize,
    /// Give every node 8 GPUs' DCGM node metrics (18 values, as the
    /// node-metrics source would) and change them all every this many
    /// measured pods (a pass of the source); 0: no node metrics.
    #[arg(long, default_value_t = 0)]
    node_metrics: usize,
    /// Which plugins run.
    #[arg(long, value_enum, default_value_t = Scenario::Wasm)]
    scenario: Scenario,
    /// Worker threads evaluating nodes.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Run every scenario (each in its own process, so peak RSS is its
    /// own) and print the Markdown table of BENCHMARKS.md.
    #[arg(long)]
    all: bool,
    /// Output format of a single run.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// The gang workload instead: this many PodGroups of --gang-size
    /// one-GPU members, with Coscheduling (docs/gangs.md).
    #[arg(long, default_value_t = 0)]
    gangs: usize,
    /// Members (and minMember) of each group of the gang workload.
    #[arg(long, default_value_t = 8)]
    gang_size: usize,
    /// The workload: `mixed` (the default: GPU and microservice pods),
    /// `fractional` (HAMi nodes with 8 shared GPUs each and pods asking for
    /// fractions of a GPU, through Reserve and PreBind; reports GPUs left
    /// whole), or one of kube-scheduler's scheduler_perf workloads
    /// (BENCHMARKS.md). `--all` with `mixed` prints every table of
    /// BENCHMARKS.md; with a scheduler_perf workload, only the
    /// scheduler_perf table.
    #[arg(long, value_enum, default_value_t = Workload::Mixed)]
    workload: Workload,
    /// GpuTopology's HAMi policies for `--workload fractional`.
    #[arg(long, value_enum, default_value_t = bench::fractional::Policies::Default)]
    policies: bench::fractional::Policies,
}

/// `wasmsched bench`.
pub fn bench(a: BenchArgs) -> Result<ExitCode> {
    if a.workload == Workload::Fractional {
        return bench_fractional(&a);
    }
    if a.gangs > 0 {
        return bench_gangs(&a);
    }
    if !a.all {
        let r = bench::run_workload(
            a.workload,
            spec(&a, a.nodes),
            a.scenario,
            a.workers,
            matches!(a.output, Format::Table),
        )?;
        match a.output {
            Format::Json => println!("{}", serde_json::to_string(&r)?),
            Format::Yaml => print!("{}", crate::yaml(&r)?),
            Format::Table => print_one(&r),
        }
        return Ok(ExitCode::SUCCESS);
    }
    if a.workload != Workload::Mixed {
        return upstream_table(&a);
    }
    main_table(&a)
}

fn spec(a: &BenchArgs, nodes: usize) -> bench::Spec {
    bench::Spec {
        nodes,
        pods: a.pods,
        seed: a.seed,
        annotation_bytes: a.annotation_bytes,
        node_metrics: a.node_metrics,
    }
}

fn print_one(r: &BenchResult) {
    println!(
        "{} {:?} x{}: {} nodes, {} pods: {:.0} pods/s, p50 {:.2} ms, p99 {:.2} ms, peak RSS {:.0} MiB ({} scheduled, {} unschedulable)",
        r.workload.name(), r.scenario, r.workers, r.nodes, r.pods, r.pods_per_second, r.p50_ms, r.p99_ms, r.peak_rss_mib, r.scheduled, r.unschedulable
    );
    for (plugin, point, ms, calls) in &r.plugins {
        println!("  {plugin:<34} {point:<10} {ms:>10.1} ms  {calls:>9} calls");
    }
    for (plugin, bytes) in &r.plugin_memory {
        println!(
            "  {plugin:<34} linear memory per instance: {:.1} MiB",
            *bytes as f64 / (1u64 << 20) as f64
        );
    }
}

/// One run of this binary in a child process, its JSON result.
fn child(
    a: &BenchArgs,
    workload: Workload,
    scenario: Scenario,
    workers: usize,
    nodes: usize,
) -> Result<BenchResult> {
    let name = serde_json::to_value(scenario)?
        .as_str()
        .unwrap_or_default()
        .to_string();
    eprintln!(
        "running {} {name} with {workers} worker(s) on {nodes} nodes...",
        workload.name()
    );
    let out = std::process::Command::new(std::env::current_exe()?)
        .args([
            "bench",
            "--output",
            "json",
            "--scenario",
            &name,
            "--workload",
            &workload.name(),
        ])
        .args(["--nodes", &nodes.to_string(), "--pods", &a.pods.to_string()])
        .args([
            "--seed",
            &a.seed.to_string(),
            "--workers",
            &workers.to_string(),
        ])
        .args(["--annotation-bytes", &a.annotation_bytes.to_string()])
        .args(["--node-metrics", &a.node_metrics.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "bench {} {name} x{workers} failed",
        workload.name()
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// `bench --all`: the scenarios on the mixed workload, 1 and 2 workers,
/// the node-count scaling, then the scheduler_perf table.
fn main_table(a: &BenchArgs) -> Result<ExitCode> {
    let mut runs = vec![(Scenario::Core, a.workers), (Scenario::Wasm, a.workers)];
    if cfg!(feature = "native-builtins") {
        runs.push((Scenario::Native, a.workers));
    }
    runs.push((Scenario::Wasm, 1));
    if a.workers != 2 {
        runs.push((Scenario::Wasm, 2));
    }
    let mut results = Vec::new();
    for (scenario, workers) in runs {
        results.push(child(a, Workload::Mixed, scenario, workers, a.nodes)?);
    }
    println!("| scenario | workers | nodes | pods | scheduled | pods/s | p50 ms | p99 ms | peak RSS MiB |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &results {
        println!(
            "| {:?} | {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.0} |",
            r.scenario,
            r.workers,
            r.nodes,
            r.pods,
            r.scheduled,
            r.pods_per_second,
            r.p50_ms,
            r.p99_ms,
            r.peak_rss_mib
        );
    }
    scaling_table(a)?;
    for r in &results {
        println!("\nTime per plugin and extension point, {:?} x{} (ms, summed over worker threads for Filter and Score):\n", r.scenario, r.workers);
        println!("| plugin | extension point | ms | calls |");
        println!("|---|---|---:|---:|");
        for (plugin, point, ms, calls) in &r.plugins {
            println!("| {plugin} | {point} | {ms:.1} | {calls} |");
        }
    }
    println!();
    upstream_table(a)
}

/// The as-shipped scenario on 1000, 5000 and 15000 nodes: the cost per
/// pod against the node count.
fn scaling_table(a: &BenchArgs) -> Result<()> {
    println!("\n| nodes | pods | pods/s | µs per pod | µs per pod per 1000 nodes | p99 ms | peak RSS MiB |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for nodes in [1000, 5000, 15000] {
        let r = child(a, Workload::Mixed, Scenario::Wasm, a.workers, nodes)?;
        let us = 1e6 / r.pods_per_second;
        println!(
            "| {nodes} | {} | {:.0} | {us:.0} | {:.0} | {:.2} | {:.0} |",
            r.pods,
            r.pods_per_second,
            us * 1000.0 / nodes as f64,
            r.p99_ms,
            r.peak_rss_mib
        );
    }
    Ok(())
}

/// The scheduler_perf workloads, core plugins and as shipped, beside
/// upstream's threshold and this project's target.
fn upstream_table(a: &BenchArgs) -> Result<ExitCode> {
    println!("| workload | nodes | measured pods | upstream threshold | target | core pods/s | as shipped pods/s | p50 / p99 ms (as shipped) | unschedulable | peak RSS MiB |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for w in Workload::UPSTREAM {
        let core = child(a, w, Scenario::Core, a.workers, a.nodes)?;
        let shipped = child(a, w, Scenario::Wasm, a.workers, a.nodes)?;
        let or_dash = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
        println!(
            "| {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.2} / {:.2} | {} | {:.0} |",
            w.name(),
            shipped.nodes,
            shipped.pods,
            or_dash(w.upstream_threshold()),
            or_dash(w.target()),
            core.pods_per_second,
            shipped.pods_per_second,
            shipped.p50_ms,
            shipped.p99_ms,
            shipped.unschedulable,
            shipped.peak_rss_mib.max(core.peak_rss_mib)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `bench --workload fractional`: one run, or with `--all` each policy
/// set in its own process and the Markdown rows of BENCHMARKS.md.
fn bench_fractional(a: &BenchArgs) -> Result<ExitCode> {
    use wasmsched::bench::fractional::{self, FractionalResult, Policies};
    if !a.all {
        let r = fractional::run(a.nodes, a.pods, a.seed, a.policies, a.workers)?;
        match a.output {
            Format::Json => println!("{}", serde_json::to_string(&r)?),
            Format::Yaml => print!("{}", crate::yaml(&r)?),
            Format::Table => println!(
                "fractional ({:?}) x{}: {} nodes, {} GPUs, {} pods: {:.0} pods/s, p50 {:.2} ms, p99 {:.2} ms, peak RSS {:.0} MiB; {} scheduled, {} unschedulable; {} GPUs and {} nodes left whole",
                r.policies, r.workers, r.nodes, r.gpus, r.pods, r.pods_per_second, r.p50_ms, r.p99_ms,
                r.peak_rss_mib, r.scheduled, r.unschedulable, r.gpus_whole, r.nodes_whole
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let exe = std::env::current_exe()?;
    println!("| policies | nodes x GPUs | pods | workers | pods/s | p50 ms | p99 ms | scheduled | GPUs left whole | nodes left whole | peak RSS MiB |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for p in [Policies::Default, Policies::Hami, Policies::Spread] {
        let name = serde_json::to_value(p)?
            .as_str()
            .unwrap_or_default()
            .to_string();
        eprintln!("running the fractional workload with {name} policies...");
        let out = std::process::Command::new(&exe)
            .args([
                "bench",
                "--workload",
                "fractional",
                "--output",
                "json",
                "--policies",
                &name,
            ])
            .args([
                "--nodes",
                &a.nodes.to_string(),
                "--pods",
                &a.pods.to_string(),
            ])
            .args([
                "--seed",
                &a.seed.to_string(),
                "--workers",
                &a.workers.to_string(),
            ])
            .stderr(std::process::Stdio::inherit())
            .output()?;
        if !out.status.success() {
            anyhow::bail!("the {name} run failed");
        }
        let r: FractionalResult = serde_json::from_slice(&out.stdout)?;
        println!(
            "| {name} | {} x 8 | {} | {} | {:.0} | {:.2} | {:.2} | {} | {} of {} | {} of {} | {:.0} |",
            r.nodes, r.pods, r.workers, r.pods_per_second, r.p50_ms, r.p99_ms, r.scheduled,
            r.gpus_whole, r.gpus, r.nodes_whole, r.nodes, r.peak_rss_mib
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `bench --gangs N`: the gang workload, one line (or JSON).
fn bench_gangs(a: &BenchArgs) -> Result<ExitCode> {
    let spec = bench::Spec {
        nodes: a.nodes,
        pods: 0,
        seed: a.seed,
        annotation_bytes: a.annotation_bytes,
        node_metrics: a.node_metrics,
    };
    let r = bench::gangs::run(spec, a.gangs, a.gang_size, a.scenario, a.workers)?;
    match a.output {
        Format::Json => println!("{}", serde_json::to_string(&r)?),
        Format::Yaml => print!("{}", crate::yaml(&r)?),
        Format::Table => println!(
            "{:?} x{}: {} nodes, {} groups of {}: {:.1} groups/s ({:.0} pods/s), {} complete, {} partial, {:.2} s, peak RSS {:.0} MiB",
            r.scenario, r.workers, r.nodes, r.groups, r.group_size, r.groups_per_second,
            r.pods_per_second, r.complete, r.partial, r.seconds, r.peak_rss_mib
        ),
    }
    anyhow::ensure!(r.partial == 0, "{} partial group(s)", r.partial);
    Ok(ExitCode::SUCCESS)
}
