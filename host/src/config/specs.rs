//! `wasmPlugins`: where each wasm plugin's component comes from and how
//! it runs (limits, failure policy), with the built-ins as defaults.

use std::collections::HashMap;
use std::path::Path;

use crate::framework::registry;
use crate::oci::{self, OciSource, Reference};
use crate::wasm::{FailurePolicy, Limits, Source};

use super::file::{ConfigFile, PluginRegistryFile, WasmPluginFile};
use super::{duration, err, ConfigError};

/// How a wasm plugin is loaded and run.
#[derive(Debug, Clone)]
pub struct WasmSpec {
    pub source: Source,
    pub limits: Limits,
    pub failure_policy: FailurePolicy,
    /// Field path of its `wasmPlugins` entry (or the built-in), for errors.
    pub field: String,
}

/// Every wasm plugin a configuration can name: the built-ins compiled into
/// this binary, then the `wasmPlugins` entries (which may re-configure a
/// built-in).
pub fn wasm_specs(
    file: &ConfigFile,
    base: &Path,
) -> Result<HashMap<String, WasmSpec>, ConfigError> {
    let mut specs = HashMap::new();
    for (name, krate) in registry::builtin_wasm() {
        if crate::wasm::loader::builtin(krate).is_some() {
            let spec = WasmSpec {
                source: Source::Builtin(krate),
                limits: Limits::default(),
                failure_policy: FailurePolicy::Fail,
                field: format!("built-in plugin {name}"),
            };
            specs.insert(name.to_string(), spec);
        }
    }
    let registry = registry_settings(file.plugin_registry.as_ref(), base)?;
    for (i, w) in file.wasm_plugins.iter().enumerate() {
        let field = format!("wasmPlugins[{i}]");
        let source = source_of(w, &field, base, &specs, &registry)?;
        let spec = WasmSpec {
            source,
            limits: limits_of(w, &field)?,
            failure_policy: w.failure_policy.unwrap_or_default(),
            field,
        };
        specs.insert(w.name.clone(), spec);
    }
    Ok(specs)
}

/// The entry's component: its `path` (a file or an `oci://` artifact), or
/// the built-in it re-configures.
fn source_of(
    w: &WasmPluginFile,
    field: &str,
    base: &Path,
    specs: &HashMap<String, WasmSpec>,
    registry: &oci::Settings,
) -> Result<Source, ConfigError> {
    if w.name.is_empty() {
        return Err(err(format!("{field}.name"), "must not be empty"));
    }
    if registry::native(&w.name).is_some() {
        return Err(err(
            format!("{field}.name"),
            format!("{:?} is a native core plugin", w.name),
        ));
    }
    let oci_path = w
        .path
        .as_ref()
        .and_then(|p| p.to_str())
        .filter(|p| oci::is_oci(p));
    if let Some(text) = oci_path {
        return oci_source(text, w.allow_tags == Some(true), field, registry).map(Source::Oci);
    }
    if w.allow_tags.is_some() {
        return Err(err(format!("{field}.allowTags"), "only for an oci:// path"));
    }
    match (&w.path, specs.get(&w.name)) {
        (Some(p), _) => Ok(Source::File(if p.is_absolute() {
            p.clone()
        } else {
            base.join(p)
        })),
        (None, Some(existing)) => Ok(existing.source.clone()),
        (None, None) => Err(err(
            format!("{field}.path"),
            format!("required: {:?} is not a built-in plugin", w.name),
        )),
    }
}

/// An `oci://` path: digest-pinned, or a tag with `allowTags: true`.
fn oci_source(
    text: &str,
    allow_tags: bool,
    field: &str,
    registry: &oci::Settings,
) -> Result<OciSource, ConfigError> {
    let reference = Reference::parse(text).map_err(|e| err(format!("{field}.path"), e))?;
    if reference.digest.is_none() {
        let cause = match (&reference.tag, allow_tags) {
            (Some(t), false) => format!(
                "{reference} names the tag {t:?}, which can move: pin the digest (oci://{}/{}@sha256:...; `wasmsched plugin pull` prints it) or set allowTags: true",
                reference.registry, reference.repository
            ),
            (Some(_), true) => String::new(),
            (None, _) => format!("{reference} names no digest: add @sha256:DIGEST"),
        };
        if !cause.is_empty() {
            return Err(err(format!("{field}.path"), cause));
        }
    }
    Ok(OciSource {
        reference,
        settings: registry.clone(),
    })
}

/// `pluginRegistry`, checked; relative files are relative to `base`.
pub fn registry_settings(
    r: Option<&PluginRegistryFile>,
    base: &Path,
) -> Result<oci::Settings, ConfigError> {
    let defaults = oci::Settings::default();
    let Some(r) = r else {
        return Ok(defaults);
    };
    let retries = r.retries.unwrap_or(defaults.retries);
    if retries > 10 {
        return Err(err(
            "pluginRegistry.retries",
            format!("must be at most 10, got {retries}"),
        ));
    }
    for (i, h) in r.plain_http.iter().enumerate() {
        if h.is_empty() || h.contains('/') {
            return Err(err(
                format!("pluginRegistry.plainHTTP[{i}]"),
                format!("{h:?} is not a HOST:PORT"),
            ));
        }
    }
    Ok(oci::Settings {
        credentials: r.credentials_file.as_ref().map(|p| base.join(p)),
        ca_file: r.ca_file.as_ref().map(|p| base.join(p)),
        plain_http: r.plain_http.clone(),
        timeout: duration("pluginRegistry.timeout", &r.timeout, defaults.timeout)?,
        retries,
    })
}

/// The entry's deadlines and memory cap, with the defaults.
fn limits_of(w: &WasmPluginFile, field: &str) -> Result<Limits, ConfigError> {
    let defaults = Limits::default();
    let memory = match &w.memory_limit {
        None => defaults.memory,
        Some(q) => {
            let v = crate::model::quantity::value(q)
                .map_err(|e| err(format!("{field}.memoryLimit"), e.to_string()))?;
            if v < (1 << 20) {
                return Err(err(format!("{field}.memoryLimit"), "must be at least 1Mi"));
            }
            v as usize
        }
    };
    Ok(Limits {
        call_timeout: duration(
            &format!("{field}.timeout"),
            &w.timeout,
            defaults.call_timeout,
        )?,
        init_timeout: duration(
            &format!("{field}.initTimeout"),
            &w.init_timeout,
            defaults.init_timeout,
        )?,
        memory,
    })
}
