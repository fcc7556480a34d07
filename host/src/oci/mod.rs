//! Plugins distributed as OCI artifacts: `wasmsched plugin push` and
//! `pull`, and `path: oci://REGISTRY/NAME@sha256:...` in a configuration.
//!
//! The layout is the CNCF wasm OCI artifact's ([`artifact`]), the one
//! wasm-pkg-tools writes and Kubewarden reads. A pull verifies the
//! manifest's digest (against the reference's digest, or the registry's
//! `Docker-Content-Digest` for a tag) and the component's (against the
//! manifest's layer descriptor, while it arrives, never reading more than
//! the descriptor's size, itself at most the loader's 256 MiB); the
//! component's sha256 is then the precompiled cache's key as for any file.
//! Credentials come from a docker config file ([`auth`]); requests have a
//! timeout and are retried with backoff ([`client`]). What was pulled can
//! be kept on disk by digest ([`store`]), so a restart with a pinned
//! reference needs no registry.
//!
//! The client is written on the host's own HTTP stack (reqwest, rustls):
//! the `oci-client` crate (and `oci-wasm` over it) would add 29 crates to
//! the build, a second reqwest among them, for the four requests used here.

pub mod artifact;
pub mod auth;
pub mod client;
pub mod reference;
pub mod store;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use client::Pulled;
pub use reference::{is_oci, Reference};
pub use store::Store;

/// How the registries are reached (the configuration's `pluginRegistry`,
/// or `plugin push`/`pull`'s flags).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// A docker config file (`.dockerconfigjson`).
    pub credentials: Option<PathBuf>,
    /// More trusted CA certificates (PEM), beside the public roots.
    pub ca_file: Option<PathBuf>,
    /// Registries (`host:port`) spoken to over plain HTTP.
    pub plain_http: Vec<String>,
    /// Deadline of each request (a blob download included).
    pub timeout: Duration,
    /// Attempts after the first on connection errors, timeouts, 408, 429
    /// and 5xx.
    pub retries: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            credentials: None,
            ca_file: None,
            plain_http: Vec::new(),
            timeout: Duration::from_secs(60),
            retries: 3,
        }
    }
}

impl Settings {
    pub fn is_plain_http(&self, registry: &str) -> bool {
        self.plain_http
            .iter()
            .any(|h| h.eq_ignore_ascii_case(registry))
    }
}

/// A plugin's component in a registry, as a configuration names it.
#[derive(Debug, Clone, PartialEq)]
pub struct OciSource {
    pub reference: Reference,
    pub settings: Settings,
}

/// A failed pull or push, as one line: the operation, the reference and
/// the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op} {reference}: {cause}")]
pub struct OciError {
    pub op: &'static str,
    pub reference: String,
    pub cause: String,
    /// Trying again later may work (the registry was unreachable or
    /// overloaded), unlike a refused digest or a missing manifest.
    pub transient: bool,
}

/// Pulls the component `reference` names (see the module docs). With a
/// store, a digest-pinned artifact stored before is read from it without
/// any request, and what is pulled is stored.
pub fn pull(
    reference: &Reference,
    settings: &Settings,
    store: Option<&Store>,
) -> Result<Pulled, OciError> {
    let err = |cause: String, transient| OciError {
        op: "pull",
        reference: reference.to_string(),
        cause,
        transient,
    };
    let started = Instant::now();
    let stored = store
        .zip(reference.digest.as_deref())
        .and_then(|(s, d)| client::stored(s, d, crate::wasm::source::MAX_MODULE_SIZE));
    let pulled = match stored {
        Some(p) => p,
        None => {
            let client = client::Client::new(settings).map_err(|c| err(c, false))?;
            block_on(client.pull(reference, store))
                .map_err(|c| err(c, false))?
                .map_err(|f| err(f.cause, f.transient))?
        }
    };
    tracing::info!(
        reference = %reference,
        manifest = %pulled.manifest_digest,
        layer = %pulled.layer.digest,
        bytes = pulled.bytes.len(),
        from = if pulled.from_store { "store" } else { "registry" },
        ms = started.elapsed().as_millis() as u64,
        "pulled plugin component"
    );
    Ok(pulled)
}

/// What a push stored.
#[derive(Debug, Clone)]
pub struct Pushed {
    pub manifest_digest: String,
    pub layer_digest: String,
    /// The reference pinned to the manifest's digest, for a configuration.
    pub pinned: String,
}

/// Pushes `component` as a wasm artifact under `reference` (its tag, or
/// by digest only when it has none). `created` is the config's RFC 3339
/// creation time.
pub fn push(
    reference: &Reference,
    settings: &Settings,
    component: Vec<u8>,
    info: artifact::ComponentInfo,
    created: String,
    annotations: BTreeMap<String, String>,
) -> Result<Pushed, OciError> {
    let err = |cause: String| OciError {
        op: "push",
        reference: reference.to_string(),
        cause,
        transient: false,
    };
    if reference.digest.is_some() {
        return Err(err(
            "a push names a tag (or nothing), not a digest: the digest is the result".into(),
        ));
    }
    let (config, manifest) = artifact::build(&component, info, created, annotations);
    let layer_digest = artifact::digest_of(&component);
    let client = client::Client::new(settings).map_err(err)?;
    let digest = block_on(client.push(reference, component.into(), config.into(), manifest.into()))
        .map_err(err)?
        .map_err(|f| err(f.cause))?;
    Ok(Pushed {
        pinned: reference.by_digest(&digest),
        manifest_digest: digest,
        layer_digest,
    })
}

/// Runs `fut` to completion on a thread of its own with a single-threaded
/// runtime, so that it can be called from any context (a plain thread,
/// the configuration's loading, or inside another runtime).
fn block_on<T: Send>(fut: impl Future<Output = T> + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("oci-client".into())
            .spawn_scoped(s, || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map(|rt| rt.block_on(fut))
            })
            .map_err(|e| format!("no thread for the registry client: {e}"))?;
        handle
            .join()
            .map_err(|_| "the registry client stopped unexpectedly".to_string())?
            .map_err(|e| format!("no runtime for the registry client: {e}"))
    })
}
