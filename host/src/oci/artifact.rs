//! The CNCF wasm OCI artifact layout (the one wasm-pkg-tools' `oci-wasm`
//! writes and Kubewarden reads): an OCI image manifest whose config has
//! media type `application/vnd.wasm.config.v0+json` and whose one layer is
//! the component, media type `application/wasm`.
//!
//! Pulling also accepts the older wasm-to-oci layout (config
//! `application/vnd.wasm.config.v1+json`, layer
//! `application/vnd.wasm.content.layer.v1+wasm`), which Kubewarden's
//! policies were first published with.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const INDEX_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
const LEGACY_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v1+json";
const LEGACY_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";

/// What a manifest request accepts (indexes too, to say what they are).
pub fn accept_header() -> String {
    [MANIFEST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE]
        .iter()
        .chain(INDEX_MEDIA_TYPES)
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A content descriptor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// An image manifest (what a wasm artifact is).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The config blob of a component (`application/vnd.wasm.config.v0+json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    pub created: String,
    pub architecture: String,
    pub os: String,
    pub layer_digests: Vec<String>,
    pub component: ComponentInfo,
}

/// The component's imports and exports, as `namespace:package/interface@version`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComponentInfo {
    pub exports: Vec<String>,
    pub imports: Vec<String>,
    pub target: Option<String>,
}

/// Builds the config and the manifest for a component; returns (config
/// bytes, manifest bytes).
pub fn build(
    component: &[u8],
    info: ComponentInfo,
    created: String,
    annotations: BTreeMap<String, String>,
) -> (Vec<u8>, Vec<u8>) {
    let layer = Descriptor {
        media_type: LAYER_MEDIA_TYPE.into(),
        digest: digest_of(component),
        size: component.len() as u64,
        annotations: None,
    };
    let config = WasmConfig {
        created,
        architecture: "wasm".into(),
        os: "wasip2".into(),
        layer_digests: vec![layer.digest.clone()],
        component: info,
    };
    let config = serde_json::to_vec(&config).expect("a config serializes");
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.into()),
        config: Descriptor {
            media_type: CONFIG_MEDIA_TYPE.into(),
            digest: digest_of(&config),
            size: config.len() as u64,
            annotations: None,
        },
        layers: vec![layer],
        annotations: (!annotations.is_empty()).then_some(annotations),
    };
    let manifest = serde_json::to_vec(&manifest).expect("a manifest serializes");
    (config, manifest)
}

/// Reads a manifest's JSON and finds the component layer: the manifest
/// must be an image manifest of a wasm artifact with exactly one wasm
/// layer, whose size is within `max_size`. `content_type` is the
/// response's, for manifests that do not say their media type.
pub fn component_layer(
    body: &[u8],
    content_type: Option<&str>,
    max_size: u64,
) -> Result<Descriptor, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("manifest is not JSON: {e}"))?;
    let media_type = value
        .get("mediaType")
        .and_then(|m| m.as_str())
        .or(content_type.map(|c| c.split(';').next().unwrap_or(c).trim()));
    if media_type.is_some_and(|m| INDEX_MEDIA_TYPES.contains(&m))
        || value.get("manifests").is_some()
    {
        return Err(
            "is an image index (several platforms), not a wasm artifact: name the wasm artifact's own manifest".into(),
        );
    }
    let manifest: Manifest =
        serde_json::from_value(value).map_err(|e| format!("not an image manifest: {e}"))?;
    if manifest.schema_version != 2 {
        return Err(format!(
            "manifest schemaVersion {} is not supported (only 2)",
            manifest.schema_version
        ));
    }
    let config = manifest.config.media_type.as_str();
    if config != CONFIG_MEDIA_TYPE && config != LEGACY_CONFIG_MEDIA_TYPE {
        return Err(format!(
            "config media type {config:?} is not a wasm artifact's ({CONFIG_MEDIA_TYPE}): is this a container image?"
        ));
    }
    let wasm: Vec<&Descriptor> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == LAYER_MEDIA_TYPE || l.media_type == LEGACY_LAYER_MEDIA_TYPE)
        .collect();
    let [layer] = wasm.as_slice() else {
        let types: Vec<&str> = manifest
            .layers
            .iter()
            .map(|l| l.media_type.as_str())
            .collect();
        return Err(format!(
            "has {} {LAYER_MEDIA_TYPE} layers, not one (layers: [{}])",
            wasm.len(),
            types.join(", ")
        ));
    };
    super::reference::parse_digest(&layer.digest).map_err(|e| format!("layer: {e}"))?;
    if layer.size > max_size {
        return Err(format!(
            "layer {} is {} bytes, over the {}",
            layer.digest,
            layer.size,
            crate::input::regular::limit_text(max_size)
        ));
    }
    Ok((*layer).clone())
}

/// RFC 3339 UTC time of `secs` since the epoch, for the config's `created`.
pub fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_manifests_are_read_back() {
        let info = ComponentInfo {
            exports: vec!["wasmsched:plugin/lifecycle@0.2.0".into()],
            imports: vec![],
            target: None,
        };
        let (config, manifest) = build(b"\0asm\x0d\0\x01\0", info, rfc3339(0), BTreeMap::new());
        let layer = component_layer(&manifest, None, 1 << 20).unwrap();
        assert_eq!(layer.digest, digest_of(b"\0asm\x0d\0\x01\0"));
        assert_eq!(layer.media_type, "application/wasm");
        let c: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(c["os"], "wasip2");
        assert_eq!(c["created"], "1970-01-01T00:00:00Z");
        assert_eq!(c["layerDigests"][0], layer.digest.as_str());
        let m: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
        assert_eq!(m["config"]["mediaType"], CONFIG_MEDIA_TYPE);
        assert_eq!(m["config"]["digest"], digest_of(&config).as_str());
        // Over the size limit: refused before any download.
        let e = component_layer(&manifest, None, 4).unwrap_err();
        assert!(e.contains("is 8 bytes, over the 4-byte limit"), "{e}");
    }

    #[test]
    fn container_images_and_indexes_are_refused_saying_what_they_are() {
        let image = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
            "config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:00","size":1},
            "layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:00","size":1}]}"#;
        let e = component_layer(image, None, 1 << 20).unwrap_err();
        assert!(e.contains("is this a container image?"), "{e}");
        let index = br#"{"schemaVersion":2,"manifests":[]}"#;
        let e = component_layer(index, None, 1 << 20).unwrap_err();
        assert!(e.starts_with("is an image index"), "{e}");
        let two = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"{CONFIG_MEDIA_TYPE}","digest":"sha256:00","size":1}},"layers":[]}}"#
        );
        let e = component_layer(two.as_bytes(), None, 1 << 20).unwrap_err();
        assert_eq!(e, "has 0 application/wasm layers, not one (layers: [])");
    }
}
