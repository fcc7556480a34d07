//! `wasmsched plugin push` and `plugin pull`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, Context, Result};

use wasmsched::oci::{self, Reference};
use wasmsched::wasm;

/// How the registry is reached (the configuration's `pluginRegistry` as
/// flags).
#[derive(clap::Args)]
pub struct RegistryArgs {
    /// Docker config file with the registry's credentials (a
    /// `.dockerconfigjson`, as `docker login` or a Kubernetes
    /// docker-registry Secret holds them). Default: $DOCKER_CONFIG/config.json
    /// or ~/.docker/config.json when it exists, else anonymous.
    #[arg(long, value_name = "FILE")]
    credentials: Option<PathBuf>,
    /// CA certificates (PEM) to trust beside the public roots.
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// Speak plain HTTP to the registry (a registry on loopback).
    #[arg(long)]
    plain_http: bool,
    /// Deadline of each request.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Attempts after the first on connection errors, timeouts, 429 and 5xx
    /// (with backoff).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=10))]
    retries: u32,
}

impl RegistryArgs {
    fn settings(&self, reference: &Reference) -> oci::Settings {
        let credentials = self.credentials.clone().or_else(|| {
            let dir = std::env::var_os("DOCKER_CONFIG")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker")))?;
            Some(dir.join("config.json")).filter(|p| p.is_file())
        });
        oci::Settings {
            credentials,
            ca_file: self.ca_file.clone(),
            plain_http: if self.plain_http {
                vec![reference.registry.clone()]
            } else {
                Vec::new()
            },
            timeout: self.timeout,
            retries: self.retries,
        }
    }
}

fn parse_reference(text: &str) -> Result<Reference> {
    Reference::parse(text).map_err(|e| anyhow!("{text}: {e}"))
}

/// `plugin push FILE REF`: checks the component against the contract (as
/// `plugin check` does, without `init`), pushes it, prints the digest.
pub fn push(
    file: &Path,
    reference: &str,
    registry: &RegistryArgs,
    annotations: &[String],
) -> Result<ExitCode> {
    let reference = parse_reference(reference)?;
    let annotations = annotations
        .iter()
        .map(|a| {
            a.split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| anyhow!("--annotation {a:?}: expected KEY=VALUE"))
        })
        .collect::<Result<BTreeMap<_, _>>>()?;
    let cache = wasm::DiskCache::env_dir()
        .map(|d| wasm::DiskCache::new(&d).with_context(|| format!("cache dir {}", d.display())))
        .transpose()?;
    let loader = wasm::Loader::new(cache);
    let source = loader.read_file(file)?;
    let (module, _) = loader.compile("push", &file.display().to_string(), &source.bytes)?;
    let (imports, exports) = module.interfaces();
    let info = oci::artifact::ComponentInfo {
        exports,
        imports,
        target: None,
    };
    // Reproducible when SOURCE_DATE_EPOCH is set: the same component gives
    // the same manifest digest.
    let created = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
    let size = source.bytes.len();
    let started = Instant::now();
    let pushed = oci::push(
        &reference,
        &registry.settings(&reference),
        source.bytes,
        info,
        oci::artifact::rfc3339(created),
        annotations,
    )?;
    println!(
        "pushed:      {reference} ({size} bytes in {:.2} s)",
        started.elapsed().as_secs_f64()
    );
    println!("digest:      {}", pushed.manifest_digest);
    println!(
        "component:   {} (the precompiled cache's key)",
        pushed.layer_digest
    );
    println!("exports:     {}", module.exports);
    println!("pin it:      path: {}", pushed.pinned);
    Ok(ExitCode::SUCCESS)
}

/// `plugin pull REF [-o FILE]`: pulls and verifies, writes the component.
pub fn pull(reference: &str, output: Option<PathBuf>, registry: &RegistryArgs) -> Result<ExitCode> {
    let reference = parse_reference(reference)?;
    let started = Instant::now();
    let pulled = oci::pull(&reference, &registry.settings(&reference), None)?;
    let elapsed = started.elapsed();
    let out = output.unwrap_or_else(|| {
        let name = reference.repository.rsplit('/').next().unwrap_or("plugin");
        PathBuf::from(format!("{name}.wasm"))
    });
    write_atomic(&out, &pulled.bytes).with_context(|| format!("writing {}", out.display()))?;
    println!(
        "pulled:      {reference} ({} bytes in {:.2} s)",
        pulled.bytes.len(),
        elapsed.as_secs_f64()
    );
    println!("digest:      {}", pulled.manifest_digest);
    println!("component:   {}", pulled.layer.digest);
    println!("written:     {}", out.display());
    println!(
        "pin it:      path: {}",
        reference.by_digest(&pulled.manifest_digest)
    );
    Ok(ExitCode::SUCCESS)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
