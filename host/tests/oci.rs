//! Plugins as OCI artifacts, against the CNCF distribution registry that
//! `scripts/test-servers` builds and starts on loopback: the built-in
//! GpuTopology pushed in the CNCF wasm layout, pulled and verified by
//! digest, loaded by `simulate` from a configuration that names it by
//! digest (and from the local store when the registry is gone), a
//! tampered blob or manifest and a wrong digest refused with one line,
//! tags only with `allowTags`, credentials from a docker config file, and
//! hot reload keeping the running version when a new reference is refused.
//! (`wasmsched run` with an `oci://` plugin: `tests/kube/oci.rs`.)

mod common;
#[path = "common/oci.rs"]
mod oci;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use oci::*;
use wasmsched::reload::{Options, ReloadResult, Reloader, Stage};

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn one_line_error(run: &Run, needles: &[&str]) -> String {
    assert!(
        !run.success,
        "expected a failure:\n{}{}",
        run.stdout, run.stderr
    );
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "one line expected:\n{}", run.stderr);
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} not in:\n{}", lines[0]);
    }
    assert!(lines[0].starts_with("error: "), "{}", lines[0]);
    lines[0].to_string()
}

#[test]
fn the_gpu_policy_is_pushed_in_the_cncf_wasm_layout_and_pulled_back_by_digest() {
    let r = registries();
    let dir = tempfile::tempdir().unwrap();
    let component = gpu_component();
    let repo = unique("policies/gpu");
    let file = dir.path().join("gpu.wasm");
    std::fs::write(&file, &component).unwrap();
    let push = wasmsched(&[
        "plugin",
        "push",
        file.to_str().unwrap(),
        &format!("{}/{repo}:v1", r.plain),
        "--plain-http",
        "--annotation",
        "org.opencontainers.image.source=https://example.com/gpu",
    ]);
    assert!(push.success, "{}{}", push.stdout, push.stderr);
    let digest = push.field("digest");
    assert_eq!(
        push.field("component"),
        format!("{} (the precompiled cache's key)", sha256(&component))
    );
    assert_eq!(
        push.field("pin it"),
        format!("path: oci://{}/{repo}@{digest}", r.plain)
    );
    // The layout, read straight from the registry.
    let (status, head, manifest) = get(
        &r,
        &format!("/v2/{repo}/manifests/{digest}"),
        "application/vnd.oci.image.manifest.v1+json",
    );
    assert_eq!(status, 200, "{head}");
    assert_eq!(sha256(&manifest), digest);
    let m: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(m["schemaVersion"], 2);
    assert_eq!(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    assert_eq!(
        m["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(m["layers"].as_array().unwrap().len(), 1);
    assert_eq!(m["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(m["layers"][0]["digest"], sha256(&component).as_str());
    assert_eq!(m["layers"][0]["size"], component.len());
    assert_eq!(
        m["annotations"]["org.opencontainers.image.source"],
        "https://example.com/gpu"
    );
    let config_digest = m["config"]["digest"].as_str().unwrap();
    let (_, _, config) = get(&r, &format!("/v2/{repo}/blobs/{config_digest}"), "*/*");
    let c: serde_json::Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(
        (c["architecture"].as_str(), c["os"].as_str()),
        (Some("wasm"), Some("wasip2"))
    );
    assert_eq!(c["layerDigests"][0], sha256(&component).as_str());
    let lifecycle = format!(
        "wasmsched:plugin/lifecycle@{}",
        wasmsched::wasm::CONTRACT_VERSION
    );
    let exports: Vec<&str> = c["component"]["exports"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    assert!(exports.contains(&lifecycle.as_str()), "{exports:?}");
    let imports = c["component"]["imports"].as_array().unwrap();
    assert!(
        imports
            .iter()
            .any(|i| i.as_str().unwrap().starts_with("wasmsched:plugin/host@")),
        "{imports:?}"
    );

    // Pulled back by digest and by tag: the same bytes, the same digest.
    let out = dir.path().join("pulled.wasm");
    let pull = wasmsched(&[
        "plugin",
        "pull",
        &format!("oci://{}/{repo}@{digest}", r.plain),
        "-o",
        out.to_str().unwrap(),
        "--plain-http",
    ]);
    assert!(pull.success, "{}{}", pull.stdout, pull.stderr);
    assert_eq!(std::fs::read(&out).unwrap(), component);
    assert_eq!(pull.field("digest"), digest);
    let by_tag = wasmsched(&[
        "plugin",
        "pull",
        &format!("{}/{repo}:v1", r.plain),
        "-o",
        out.to_str().unwrap(),
        "--plain-http",
    ]);
    assert!(by_tag.success, "{}", by_tag.stderr);
    assert_eq!(
        by_tag.field("pin it"),
        format!("path: oci://{}/{repo}@{digest}", r.plain)
    );
    eprintln!(
        "gpu-topology ({} bytes): push {:.2} s, pull {:.2} s (the processes included)",
        component.len(),
        push.seconds,
        pull.seconds
    );
    // What was pushed is a plugin: the pulled file passes `plugin check`.
    let check = wasmsched(&["plugin", "check", out.to_str().unwrap()]);
    assert!(check.success, "{}", check.stderr);
}

#[test]
fn simulate_loads_the_gpu_policy_by_digest_and_again_from_the_store_without_the_registry() {
    let r = registries();
    let dir = tempfile::tempdir().unwrap();
    let repo = unique("policies/gpu-sim");
    let digest = push(&r, dir.path(), &gpu_component(), &repo, "v1");
    let reference = format!("oci://{}/{repo}@{digest}", r.plain);
    let cache = dir.path().join("cache");
    let top = format!("pluginCacheDir: {}\n", cache.display());
    let config = write(
        dir.path(),
        "config.yaml",
        &gpu_config(&reference, &r.plain, "", &top),
    );
    let example = common::gpu_example();
    let builtin = wasmsched(&["simulate", example.to_str().unwrap(), "--output", "json"]);
    assert!(builtin.success, "{}", builtin.stderr);
    let pulled = wasmsched(&[
        "simulate",
        example.to_str().unwrap(),
        "--config",
        &config,
        "--output",
        "json",
    ]);
    assert!(pulled.success, "{}", pulled.stderr);
    assert_eq!(
        pulled.stdout, builtin.stdout,
        "the pulled GpuTopology schedules as the built-in one"
    );
    // Stored by digest beside the precompiled cache.
    let layer = sha256(&gpu_component());
    assert!(cache
        .join("oci/sha256")
        .join(&digest["sha256:".len()..])
        .is_file());
    assert!(cache
        .join("oci/sha256")
        .join(&layer["sha256:".len()..])
        .is_file());
    // The same digest from a registry that does not answer: read from the
    // store, no request made.
    let gone = "127.0.0.1:9";
    let offline = format!("oci://{gone}/{repo}@{digest}");
    let config = write(
        dir.path(),
        "offline.yaml",
        &gpu_config(&offline, gone, "", &top),
    );
    let again = wasmsched(&[
        "simulate",
        example.to_str().unwrap(),
        "--config",
        &config,
        "--output",
        "json",
    ]);
    assert!(again.success, "{}", again.stderr);
    assert_eq!(again.stdout, builtin.stdout);
    // Without the store, that registry is an error naming the reference.
    let config = write(
        dir.path(),
        "nostore.yaml",
        &gpu_config(&offline, gone, "", ""),
    );
    let run = wasmsched(&["simulate", example.to_str().unwrap(), "--config", &config]);
    one_line_error(
        &run,
        &[
            "wasmPlugins[0].path",
            &format!("pull {offline}"),
            "cannot connect",
            "(after 2 attempts)",
        ],
    );
}

#[test]
fn a_tampered_blob_a_tampered_manifest_and_a_wrong_digest_are_refused_with_one_line() {
    let r = registries();
    let dir = tempfile::tempdir().unwrap();
    let example = common::gpu_example();
    let simulate = |reference: &str, name: &str| {
        let config = write(dir.path(), name, &gpu_config(reference, &r.plain, "", ""));
        wasmsched(&["simulate", example.to_str().unwrap(), "--config", &config])
    };
    // A layer whose bytes changed in the registry's storage.
    let component = variant(&gpu_component(), &unique("tampered-layer"));
    let repo = unique("policies/tampered");
    let digest = push(&r, dir.path(), &component, &repo, "v1");
    tamper(&r, &sha256(&component));
    let reference = format!("oci://{}/{repo}@{digest}", r.plain);
    let line = one_line_error(
        &simulate(&reference, "layer.yaml"),
        &[
            &format!("pull {reference}"),
            "layer digest mismatch",
            &sha256(&component),
        ],
    );
    eprintln!("{line}");
    let pull = wasmsched(&[
        "plugin",
        "pull",
        &reference,
        "-o",
        dir.path().join("x.wasm").to_str().unwrap(),
        "--plain-http",
    ]);
    one_line_error(&pull, &["layer digest mismatch"]);
    assert!(!dir.path().join("x.wasm").exists(), "nothing written");
    // A manifest whose bytes changed.
    let component = variant(&gpu_component(), &unique("tampered-manifest"));
    let repo = unique("policies/tampered-manifest");
    let digest = push(&r, dir.path(), &component, &repo, "v1");
    tamper(&r, &digest);
    let reference = format!("oci://{}/{repo}@{digest}", r.plain);
    one_line_error(
        &simulate(&reference, "manifest.yaml"),
        &[
            &format!("pull {reference}"),
            "manifest digest mismatch",
            &format!("asked for {digest}"),
        ],
    );
    // A digest the repository does not have.
    let wrong = sha256(b"not a manifest");
    let reference = format!("oci://{}/{repo}@{wrong}", r.plain);
    one_line_error(
        &simulate(&reference, "wrong.yaml"),
        &[
            &format!("pull {reference}"),
            "404 Not Found",
            "MANIFEST_UNKNOWN",
        ],
    );
    // Not a wasm artifact: the layer's digest given as a manifest's.
    let config_is_layer = format!("oci://{}/{repo}@{}", r.plain, sha256(&component));
    one_line_error(
        &simulate(&config_is_layer, "notmanifest.yaml"),
        &["404 Not Found"],
    );
}

#[test]
fn tags_are_refused_unless_allowed() {
    let r = registries();
    let dir = tempfile::tempdir().unwrap();
    let repo = unique("policies/tagged");
    push(&r, dir.path(), &gpu_component(), &repo, "stable");
    let reference = format!("oci://{}/{repo}:stable", r.plain);
    let example = common::gpu_example();
    let config = write(
        dir.path(),
        "tag.yaml",
        &gpu_config(&reference, &r.plain, "", ""),
    );
    let run = wasmsched(&["simulate", example.to_str().unwrap(), "--config", &config]);
    one_line_error(
        &run,
        &[
            "wasmPlugins[0].path",
            "names the tag \"stable\", which can move",
            "allowTags: true",
        ],
    );
    let config = write(
        dir.path(),
        "allowed.yaml",
        &gpu_config(&reference, &r.plain, "  allowTags: true\n", ""),
    );
    let run = wasmsched(&["simulate", example.to_str().unwrap(), "--config", &config]);
    assert!(run.success, "{}", run.stderr);
    // allowTags on a file path is a mistake worth saying.
    let config = write(
        dir.path(),
        "file.yaml",
        &gpu_config("gpu.wasm", &r.plain, "  allowTags: true\n", ""),
    );
    let run = wasmsched(&["simulate", example.to_str().unwrap(), "--config", &config]);
    one_line_error(&run, &["wasmPlugins[0].allowTags: only for an oci:// path"]);
}

#[test]
fn credentials_come_from_a_docker_config_secret() {
    let r = registries();
    let dir = tempfile::tempdir().unwrap();
    let component = gpu_component();
    let file = dir.path().join("gpu.wasm");
    std::fs::write(&file, &component).unwrap();
    let repo = unique("policies/private");
    let reference = format!("{}/{repo}:v1", r.auth);
    let (creds, ca) = (r.auth_config.to_str().unwrap(), r.ca.to_str().unwrap());
    // Anonymous: refused, saying why.
    let anon = wasmsched(&[
        "plugin",
        "push",
        file.to_str().unwrap(),
        &reference,
        "--ca-file",
        ca,
    ]);
    one_line_error(
        &anon,
        &[
            &format!("push oci://{reference}"),
            "requires credentials (401); no credentials file is configured",
        ],
    );
    // Wrong password: refused, naming the file.
    let wrong = write(
        dir.path(),
        "wrong.json",
        &format!(
            "{{\"auths\":{{\"{}\":{{\"username\":\"wasmsched\",\"password\":\"nope\"}}}}}}",
            r.auth
        ),
    );
    let bad = wasmsched(&[
        "plugin",
        "push",
        file.to_str().unwrap(),
        &reference,
        "--ca-file",
        ca,
        "--credentials",
        &wrong,
    ]);
    one_line_error(
        &bad,
        &["refused the credentials (from", "wrong.json", "401"],
    );
    // Without the CA: the certificate is not trusted.
    let untrusted = wasmsched(&[
        "plugin",
        "push",
        file.to_str().unwrap(),
        &reference,
        "--credentials",
        creds,
        "--retries",
        "0",
    ]);
    one_line_error(&untrusted, &["cannot connect", "certificate"]);
    // With both.
    let ok = wasmsched(&[
        "plugin",
        "push",
        file.to_str().unwrap(),
        &reference,
        "--ca-file",
        ca,
        "--credentials",
        creds,
    ]);
    assert!(ok.success, "{}", ok.stderr);
    let digest = ok.field("digest");
    // A configuration: the Secret's file and the CA, relative to it.
    std::fs::copy(&r.auth_config, dir.path().join(".dockerconfigjson")).unwrap();
    std::fs::copy(&r.ca, dir.path().join("ca.crt")).unwrap();
    let path = format!("oci://{}/{repo}@{digest}", r.auth);
    let config = format!(
        "wasmPlugins:\n- name: GpuTopology\n  path: {path}\n\
         pluginRegistry:\n  credentialsFile: .dockerconfigjson\n  caFile: ca.crt\n"
    );
    let config = write(dir.path(), "config.yaml", &config);
    let example = common::gpu_example();
    let run = wasmsched(&["simulate", example.to_str().unwrap(), "--config", &config]);
    assert!(run.success, "{}", run.stderr);
    // The Secret's file missing: one line naming it.
    std::fs::remove_file(dir.path().join(".dockerconfigjson")).unwrap();
    let run = wasmsched(&["simulate", example.to_str().unwrap(), "--config", &config]);
    one_line_error(
        &run,
        &[
            &format!("pull {path}"),
            "credentials file",
            ".dockerconfigjson",
        ],
    );
}

/// A configuration that names new references while the scheduler runs:
/// refused ones leave the running version in place, a good one is swapped
/// in (the reload of `wasmsched run` and `plugin watch`; `tests/kube/oci.rs`
/// shows it through `run`).
#[test]
fn a_refused_reference_keeps_the_running_version() {
    let r = registries();
    let dir = tempfile::tempdir().unwrap();
    let good = gpu_component();
    let repo = unique("policies/reload");
    let v1 = push(&r, dir.path(), &good, &repo, "v1");
    let at = |digest: &str| format!("oci://{}/{repo}@{digest}", r.plain);
    let config_path = dir.path().join("config.yaml");
    std::fs::write(&config_path, gpu_config(&at(&v1), &r.plain, "", "")).unwrap();
    let file = wasmsched::config::load(&config_path).unwrap();
    let scheduler = Arc::new(wasmsched::config::build(&file, dir.path(), 0).unwrap());
    let options = Options {
        config: Some(config_path.clone()),
        ..Default::default()
    };
    let reloader = Reloader::from_config(scheduler, &file, dir.path(), options).unwrap();
    let running = reloader.status()[0].digest.clone();
    assert_eq!(format!("sha256:{running}"), sha256(&good));
    assert_eq!(reloader.status()[0].source, at(&v1));
    let set = |reference: &str| {
        std::fs::write(&config_path, gpu_config(reference, &r.plain, "", "")).unwrap();
        reloader.config_changed()
    };
    // Unchanged: nothing to do.
    assert!(set(&at(&v1)).is_empty());
    // A tampered layer.
    let tampered = variant(&good, &unique("reload-tampered"));
    let v2 = push(&r, dir.path(), &tampered, &repo, "v2");
    tamper(&r, &sha256(&tampered));
    let events = set(&at(&v2));
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(
        (e.result, e.stage),
        (ReloadResult::Rejected, Some(Stage::Pull))
    );
    assert!(e.message.contains("layer digest mismatch"), "{}", e.message);
    let line = e.to_string();
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.contains(&format!("GpuTopology rejected at pull: pull {}", at(&v2))),
        "{line}"
    );
    assert!(
        line.ends_with(&format!("; keeping {}", &running[..12])),
        "{line}"
    );
    // The same reference again: not pulled and reported again.
    assert!(reloader.config_changed().is_empty());
    // A digest the registry does not have.
    let wrong = sha256(b"no such manifest");
    let events = set(&at(&wrong));
    assert_eq!(events.len(), 1);
    assert!(
        events[0].message.contains("MANIFEST_UNKNOWN"),
        "{}",
        events[0].message
    );
    let status = &reloader.status()[0];
    assert_eq!(
        (status.version, status.digest.as_str()),
        (1, running.as_str())
    );
    assert_eq!(status.source, at(&v1), "still the first version");
    // A good new version: swapped in.
    let newer = variant(&good, &unique("reload-good"));
    let v3 = push(&r, dir.path(), &newer, &repo, "v3");
    let events = set(&at(&v3));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].result, ReloadResult::Success, "{}", events[0]);
    let status = &reloader.status()[0];
    assert_eq!(status.version, 2);
    assert_eq!(format!("sha256:{}", status.digest), sha256(&newer));
    assert_eq!(status.source, at(&v3));
    // A change beyond oci:// paths is logged, not applied.
    std::fs::write(
        &config_path,
        gpu_config(&at(&v3), &r.plain, "  timeout: 99ms\n", ""),
    )
    .unwrap();
    assert!(reloader.config_changed().is_empty());
    assert_eq!(reloader.status()[0].version, 2);
}

/// A registry that never answers: retried with backoff, then one line.
#[test]
fn an_unreachable_registry_is_retried_then_reported() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let reference = format!("127.0.0.1:{port}/policies/gpu@{}", sha256(b"x"));
    let run = wasmsched(&[
        "plugin",
        "pull",
        &reference,
        "--plain-http",
        "--retries",
        "2",
        "-o",
        "/nonexistent/x.wasm",
    ]);
    one_line_error(
        &run,
        &[
            &format!("pull oci://{reference}"),
            "cannot connect",
            "(after 3 attempts)",
        ],
    );
    // Two pauses of 0.5 s and 1 s (±25%) before giving up.
    assert!(run.seconds > 1.1, "{} s", run.seconds);
}

/// The `config.yaml` of the chart's rendered configuration ConfigMap, with
/// the pod's mount points moved under `root` (the credentials Secret and
/// the CA ConfigMap as the kubelet would mount them there).
fn chart_config(rendered: &str, root: &Path) -> String {
    let start = rendered
        .find("  config.yaml: |\n")
        .expect("a config.yaml key")
        + "  config.yaml: |\n".len();
    rendered[start..]
        .lines()
        .take_while(|l| l.starts_with("    ") || l.is_empty())
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("/etc/wasmsched/", &format!("{}/", root.display()))
        .replace(
            "/var/cache/wasmsched",
            &root.join("cache").display().to_string(),
        )
}

/// `helm template` of the chart with `values` files: the manifests, or
/// helm's error.
fn helm_template(values: &[&str]) -> Result<String, String> {
    let helm = Command::new(common::repo_root().join("scripts/test-servers"))
        .arg("helm")
        .output()
        .expect("scripts/test-servers helm");
    assert!(
        helm.status.success(),
        "{}",
        String::from_utf8_lossy(&helm.stderr)
    );
    let chart = common::repo_root().join("deploy/chart/wasmsched");
    let mut cmd = Command::new(String::from_utf8_lossy(&helm.stdout).trim());
    cmd.args(["template", "wasmsched", chart.to_str().unwrap()]);
    for v in values {
        cmd.args(["--values", v]);
    }
    let out = cmd.output().expect("helm template");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// An entry with both a file and an artifact is refused by the chart.
#[test]
fn the_chart_refuses_a_plugin_with_a_file_and_an_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let digest = sha256(b"x");
    let both = write(
        dir.path(),
        "both.yaml",
        &format!(
            "plugins:\n- {{name: X, file: x.wasm, base64: AA==, oci: \"oci://r.io/x@{digest}\"}}\n"
        ),
    );
    let err = helm_template(&[&both]).unwrap_err();
    assert!(
        err.contains("plugins[X]: oci names the component: no file, base64 or image beside it"),
        "{err}"
    );
    let bad = write(
        dir.path(),
        "bad.yaml",
        "plugins:\n- {name: X, oci: \"r.io/x\"}\n",
    );
    let err = helm_template(&[&bad]).unwrap_err();
    assert!(
        err.contains("plugins[X].oci: \"r.io/x\" does not start with oci://"),
        "{err}"
    );
}

/// The Helm chart's `plugins[].oci` and `pluginRegistry`: the rendered
/// Deployment mounts the docker-config Secret and the CA ConfigMap, and
/// the rendered configuration, with those files where the mounts put them,
/// pulls GpuTopology from the registry that requires the credentials and
/// schedules the example as the built-in does.
#[test]
fn the_charts_oci_plugin_pulls_with_the_secrets_credentials() {
    let r = registries();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gpu.wasm");
    std::fs::write(&file, variant(&gpu_component(), &unique("chart"))).unwrap();
    let repo = unique("policies/chart");
    let push = wasmsched(&[
        "plugin",
        "push",
        file.to_str().unwrap(),
        &format!("{}/{repo}", r.auth),
        "--credentials",
        r.auth_config.to_str().unwrap(),
        "--ca-file",
        r.ca.to_str().unwrap(),
    ]);
    assert!(push.success, "{}{}", push.stdout, push.stderr);
    let pinned = push
        .field("pin it")
        .strip_prefix("path: ")
        .unwrap()
        .to_string();
    let values = write(
        dir.path(),
        "values.yaml",
        &format!(
            "builtinPlugins:\n- {{name: NetworkLocality, failurePolicy: Ignore}}\n\
             plugins:\n- {{name: GpuTopology, oci: \"{pinned}\", failurePolicy: Fail}}\n\
             pluginRegistry:\n  secretName: registry-creds\n  caConfigMap: registry-ca\n  timeout: 10s\n  retries: 1\n"
        ),
    );
    let rendered = helm_template(&[&values]).expect("helm template");
    for want in [
        "secretName: registry-creds",
        "- {key: .dockerconfigjson, path: .dockerconfigjson}",
        "mountPath: /etc/wasmsched/registry\n",
        "name: registry-ca\n",
        "mountPath: /etc/wasmsched/registry-ca\n",
        "credentialsFile: /etc/wasmsched/registry/.dockerconfigjson",
        "caFile: /etc/wasmsched/registry-ca/ca.crt",
        &format!("path: {pinned}"),
    ] {
        assert!(
            rendered.contains(want),
            "{want:?} not in the rendered chart:\n{rendered}"
        );
    }
    // The mounts, as the kubelet would make them.
    let root = dir.path().join("etc");
    std::fs::create_dir_all(root.join("registry")).unwrap();
    std::fs::create_dir_all(root.join("registry-ca")).unwrap();
    std::fs::copy(&r.auth_config, root.join("registry/.dockerconfigjson")).unwrap();
    std::fs::copy(&r.ca, root.join("registry-ca/ca.crt")).unwrap();
    let config = write(
        dir.path(),
        "chart-oci.yaml",
        &chart_config(&rendered, &root),
    );
    let builtin = write(
        dir.path(),
        "chart-builtin.yaml",
        &chart_config(&helm_template(&[]).expect("helm template"), &root),
    );
    let example = common::gpu_example();
    let simulate = |config: &str| {
        let run = wasmsched(&[
            "simulate",
            example.to_str().unwrap(),
            "--config",
            config,
            "--output",
            "json",
        ]);
        assert!(run.success, "{config}: {}", run.stderr);
        run.stdout
    };
    assert_eq!(simulate(&config), simulate(&builtin));
}
