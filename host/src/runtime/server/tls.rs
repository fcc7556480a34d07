//! The serving certificate: PEM files (`--tls-cert-file`,
//! `--tls-private-key-file`), or, as kube-scheduler does without them, a
//! self-signed certificate generated at start (kept in memory: the root
//! filesystem is read-only in `deploy/`). Prometheus scrapes a
//! self-signed port with `insecureSkipVerify`, as it scrapes
//! kube-scheduler's.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Largest certificate or key file read.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// Why the serving certificate could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("--tls-cert-file and --tls-private-key-file go together (only {0} was given)")]
    Half(&'static str),
    #[error("{flag} {path}: {cause}")]
    File {
        flag: &'static str,
        path: String,
        cause: String,
    },
    #[error("the certificate and key: {0}")]
    Rustls(String),
    #[error("generating a self-signed certificate: {0}")]
    Generate(String),
}

/// A rustls server configuration (HTTP/1.1, ring, TLS 1.2 and 1.3).
pub fn server_config(
    cert: Option<&Path>,
    key: Option<&Path>,
    listen: SocketAddr,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let (chain, key) = match (cert, key) {
        (Some(c), Some(k)) => (load_chain(c)?, load_key(k)?),
        (None, None) => self_signed(listen)?,
        (Some(_), None) => return Err(TlsError::Half("--tls-cert-file")),
        (None, Some(_)) => return Err(TlsError::Half("--tls-private-key-file")),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// For the start-up log line.
pub fn describe(cert: Option<&Path>) -> String {
    match cert {
        Some(p) => p.display().to_string(),
        None => "self-signed, generated at start".into(),
    }
}

fn read_pem(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    crate::input::read_regular(path, MAX_PEM_BYTES).map_err(|e| TlsError::File {
        flag,
        path: path.display().to_string(),
        cause: e.to_string(),
    })
}

fn load_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    const FLAG: &str = "--tls-cert-file";
    let pem = read_pem(FLAG, path)?;
    let fail = |cause: String| TlsError::File {
        flag: FLAG,
        path: path.display().to_string(),
        cause,
    };
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(fail("no CERTIFICATE block".into()));
    }
    Ok(chain)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    const FLAG: &str = "--tls-private-key-file";
    let pem = read_pem(FLAG, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError::File {
        flag: FLAG,
        path: path.display().to_string(),
        cause: format!("no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
    })
}

/// A self-signed certificate (ECDSA P-256) for localhost, the loopback
/// addresses, the host name and the listen address.
fn self_signed(
    listen: SocketAddr,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let gen = |e: rcgen::Error| TlsError::Generate(e.to_string());
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if let Some(host) = host_name() {
        names.push(host);
    }
    if !listen.ip().is_unspecified() && !listen.ip().is_loopback() {
        names.push(listen.ip().to_string());
    }
    let mut params = rcgen::CertificateParams::new(names).map_err(gen)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("wasmsched@{now}"));
    let key = rcgen::KeyPair::generate().map_err(gen)?;
    let cert = params.self_signed(&key).map_err(gen)?;
    let key = PrivatePkcs8KeyDer::from(key.serialize_der());
    Ok((vec![cert.der().clone()], key.into()))
}

fn host_name() -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s.is_ascii() && s.parse::<std::net::IpAddr>().is_err())
}
