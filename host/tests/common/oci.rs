//! The OCI registries of `scripts/test-servers` (the CNCF distribution
//! registry on loopback), components to push, and what a test needs to
//! look at or tamper with what the registry stored.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sha2::{Digest, Sha256};

/// The registries' addresses and files.
pub struct Registries {
    /// `127.0.0.1:PORT`: anonymous, plain HTTP, pushes allowed.
    pub plain: String,
    /// Its storage (`docker/registry/v2/...`).
    pub data: PathBuf,
    /// `127.0.0.1:PORT`: htpasswd over HTTPS.
    pub auth: String,
    /// A `.dockerconfigjson` with the credentials of `auth`.
    pub auth_config: PathBuf,
    /// The CA of `auth`'s certificate.
    pub ca: PathBuf,
}

pub fn registries() -> Registries {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!(
                "{name} is not set: these tests need the OCI registries of scripts/test-servers; run `scripts/test` \
                 (or `scripts/test-servers start-registry DIR` and export the variables in DIR/env)"
            )
        })
    };
    Registries {
        plain: var("WASMSCHED_TEST_REGISTRY"),
        data: var("WASMSCHED_TEST_REGISTRY_DATA").into(),
        auth: var("WASMSCHED_TEST_REGISTRY_AUTH"),
        auth_config: var("WASMSCHED_TEST_REGISTRY_AUTH_CONFIG").into(),
        ca: var("WASMSCHED_TEST_REGISTRY_CA").into(),
    }
}

/// The built-in GpuTopology component, as the binary embeds it.
pub fn gpu_component() -> Vec<u8> {
    wasmsched::wasm::loader::builtin("gpu-topology")
        .expect("gpu-topology is built in")
        .to_vec()
}

/// `component` with a custom section appended: the same plugin, other
/// bytes (so a test's blob is its own: the registry stores blobs once per
/// digest, whatever the repository, and a tampered one would break the
/// other tests).
pub fn variant(component: &[u8], tag: &str) -> Vec<u8> {
    let name = b"wasmsched-test";
    let payload = tag.as_bytes();
    let mut section = Vec::new();
    leb(&mut section, name.len() as u64);
    section.extend_from_slice(name);
    section.extend_from_slice(payload);
    let mut out = component.to_vec();
    out.push(0);
    leb(&mut out, section.len() as u64);
    out.extend_from_slice(&section);
    out
}

fn leb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A name no other test run used.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{:x}{:x}", std::process::id(), nanos % (1 << 40))
}

pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// What `wasmsched ARGS` printed.
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    pub seconds: f64,
}

impl Run {
    /// The value of an `  key:  value` line of the output.
    pub fn field(&self, key: &str) -> String {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}:")))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {key}: line in\n{}\n{}", self.stdout, self.stderr))
    }
}

pub fn wasmsched(args: &[&str]) -> Run {
    let started = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(args)
        .env_remove("WASMSCHED_LOG")
        .env_remove("WASMSCHED_PLUGIN_CACHE")
        .env("HOME", "/nonexistent") // no ~/.docker/config.json
        .output()
        .expect("running wasmsched");
    Run {
        success: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Pushes `component` to the plain registry as `REPO:TAG`; returns the
/// manifest digest.
pub fn push(r: &Registries, dir: &Path, component: &[u8], repo: &str, tag: &str) -> String {
    let file = dir.join(format!("{}.wasm", repo.replace('/', "-")));
    std::fs::write(&file, component).unwrap();
    let run = wasmsched(&[
        "plugin",
        "push",
        file.to_str().unwrap(),
        &format!("{}/{repo}:{tag}", r.plain),
        "--plain-http",
    ]);
    assert!(run.success, "push failed: {}{}", run.stdout, run.stderr);
    run.field("digest")
}

/// `GET path` on the plain registry: (status, headers, body).
pub fn get(r: &Registries, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let mut s = std::net::TcpStream::connect(&r.plain).expect("connect to the registry");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n",
        r.plain
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP answer");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head, raw[split + 4..].to_vec())
}

/// The file the registry keeps blob (or manifest) `digest` in.
pub fn blob_file(r: &Registries, digest: &str) -> PathBuf {
    let hex = digest.strip_prefix("sha256:").unwrap();
    r.data
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data")
}

/// Flips one byte in the middle of a stored blob: what a compromised
/// registry or a corrupted disk serves.
pub fn tamper(r: &Registries, digest: &str) {
    let file = blob_file(r, digest);
    let mut bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&file, bytes).unwrap();
}

/// A configuration: the built-in profile, with `GpuTopology` from `path`
/// (`entry`: more fields of its `wasmPlugins` entry, `top`: more top-level
/// fields, each a YAML line or lines).
pub fn gpu_config(path: &str, registry: &str, entry: &str, top: &str) -> String {
    format!(
        "apiVersion: wasmsched.io/v1alpha1\nkind: WasmSchedulerConfiguration\n\
         wasmPlugins:\n- name: GpuTopology\n  path: {path}\n{entry}\
         pluginRegistry:\n  plainHTTP: [\"{registry}\"]\n  timeout: 10s\n  retries: 1\n{top}"
    )
}
