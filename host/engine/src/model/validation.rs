//! The API server's checks on create (Kubernetes 1.37.2,
//! pkg/apis/core/validation) for the fields the scheduler reads, applied
//! to objects from files: a manifest cannot hand the scheduler a Node or
//! Pod that no cluster would hold (a negative overhead that frees CPU, a
//! host port outside 1..65535, a label key that is not a qualified name).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity::{milli_value, value};
use super::resources::CPU;

/// A field that fails a check: (field path, cause).
pub type Invalid = (String, String);

/// How much of an invalid value an error quotes.
const QUOTE_CHARS: usize = 80;

/// `s` quoted and escaped as Rust's `{:?}` does, cut after [`QUOTE_CHARS`].
pub fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_CHARS) {
        None => format!("{s:?}"),
        Some((i, _)) => format!("{:?}... ({} bytes)", &s[..i], s.len()),
    }
}

fn alnum_ends(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && b[0].is_ascii_alphanumeric() && b[b.len() - 1].is_ascii_alphanumeric()
}

fn is_dns_label(s: &str) -> bool {
    s.len() <= 63
        && alnum_ends(s)
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            alnum_ends(part)
                && part
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        })
}

/// A label value, or the name part of a qualified name when not empty.
fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && alnum_ends(s)
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
}

/// `IsDNS1123Subdomain`: object names (Pods, Nodes).
pub fn dns_subdomain(s: &str) -> Result<(), String> {
    if is_dns_subdomain(s) {
        return Ok(());
    }
    Err(format!(
        "{} is not a lowercase RFC 1123 subdomain (at most 253 of a-z, 0-9, '-' and '.', alphanumeric at both ends)",
        quote(s)
    ))
}

/// `IsDNS1123Label`: namespaces.
pub fn dns_label(s: &str) -> Result<(), String> {
    if is_dns_label(s) {
        return Ok(());
    }
    Err(format!(
        "{} is not a lowercase RFC 1123 label (at most 63 of a-z, 0-9 and '-', alphanumeric at both ends)",
        quote(s)
    ))
}

/// `IsQualifiedName`: label keys, taint keys.
pub fn qualified_name(s: &str) -> Result<(), String> {
    let ok = match s.split_once('/') {
        None => !s.is_empty() && is_label_value(s),
        Some((prefix, name)) => {
            is_dns_subdomain(prefix) && !name.is_empty() && is_label_value(name)
        }
    };
    if ok {
        return Ok(());
    }
    Err(format!(
        "{} is not a qualified name (an optional DNS subdomain and '/', then at most 63 of A-Z, a-z, 0-9, '-', '_' and '.', alphanumeric at both ends)",
        quote(s)
    ))
}

/// `IsValidLabelValue`.
pub fn label_value(s: &str) -> Result<(), String> {
    if is_label_value(s) {
        return Ok(());
    }
    Err(format!(
        "{} is not a valid label value (empty, or at most 63 of A-Z, a-z, 0-9, '-', '_' and '.', alphanumeric at both ends)",
        quote(s)
    ))
}

/// `ValidateLabels`: every key a qualified name, every value a label value.
pub fn labels(map: Option<&BTreeMap<String, String>>, path: &str) -> Result<(), Invalid> {
    for (k, v) in map.into_iter().flatten() {
        qualified_name(k).map_err(|c| (path.to_string(), c))?;
        label_value(v).map_err(|c| (format!("{path}.{k}"), c))?;
    }
    Ok(())
}

/// `ValidateResourceQuantityValue` over a resource list: each amount
/// parses and is not negative.
pub fn resources(list: Option<&BTreeMap<String, Quantity>>, path: &str) -> Result<(), Invalid> {
    for (name, q) in list.into_iter().flatten() {
        let field = || format!("{path}.{name}");
        let v = if name == CPU {
            milli_value(&q.0)
        } else {
            value(&q.0)
        }
        .map_err(|e| (field(), e.to_string()))?;
        if v < 0 {
            return Err((
                field(),
                format!("must not be negative, got {}", quote(&q.0)),
            ));
        }
    }
    Ok(())
}

/// `IsValidPortNum`.
fn port(p: i32, field: String) -> Result<(), Invalid> {
    if (1..=65535).contains(&p) {
        return Ok(());
    }
    Err((
        field,
        format!("must be between 1 and 65535, inclusive, got {p}"),
    ))
}

fn container(c: &k8s::Container, path: &str) -> Result<(), Invalid> {
    for (i, p) in c.ports.iter().flatten().enumerate() {
        port(p.container_port, format!("{path}.ports[{i}].containerPort"))?;
        if let Some(hp) = p.host_port.filter(|hp| *hp != 0) {
            port(hp, format!("{path}.ports[{i}].hostPort"))?;
        }
    }
    let r = c.resources.as_ref();
    resources(
        r.and_then(|r| r.limits.as_ref()),
        &format!("{path}.resources.limits"),
    )?;
    resources(
        r.and_then(|r| r.requests.as_ref()),
        &format!("{path}.resources.requests"),
    )
}

fn spread(c: &k8s::TopologySpreadConstraint, path: &str) -> Result<(), Invalid> {
    let Some(min) = c.min_domains else {
        return Ok(());
    };
    let field = format!("{path}.minDomains");
    if min <= 0 {
        return Err((field, format!("must be greater than zero, got {min}")));
    }
    if c.when_unsatisfiable != "DoNotSchedule" {
        return Err((
            field,
            format!(
                "can only be used with whenUnsatisfiable DoNotSchedule, not {}",
                quote(&c.when_unsatisfiable)
            ),
        ));
    }
    Ok(())
}

/// The API server's cap on an object's annotations, keys and values
/// together (`TotalAnnotationSizeLimitB`).
pub const ANNOTATION_BYTES: usize = 256 << 10;

/// `ValidateAnnotations`: every key a qualified name, all keys and values
/// together at most [`ANNOTATION_BYTES`].
pub fn annotations(map: Option<&BTreeMap<String, String>>) -> Result<(), Invalid> {
    let mut total = 0usize;
    for (k, v) in map.into_iter().flatten() {
        qualified_name(k).map_err(|c| ("metadata.annotations".to_string(), c))?;
        total += k.len() + v.len();
    }
    if total > ANNOTATION_BYTES {
        return Err((
            "metadata.annotations".into(),
            format!("{total} bytes in all, more than the API server's limit of {ANNOTATION_BYTES}"),
        ));
    }
    Ok(())
}

/// `ValidateObjectMeta` for what the scheduler reads: the name (checked
/// with `name_ok`), the namespace, the labels and the annotations.
pub fn meta(
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    name_ok: fn(&str) -> Result<(), String>,
) -> Result<(), Invalid> {
    let name = m.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Err(("metadata.name".into(), "missing".into()));
    }
    name_ok(name).map_err(|c| ("metadata.name".to_string(), c))?;
    if let Some(ns) = m.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        dns_label(ns).map_err(|c| ("metadata.namespace".to_string(), c))?;
    }
    labels(m.labels.as_ref(), "metadata.labels")?;
    annotations(m.annotations.as_ref())
}

/// A Pod as `ValidatePod` checks it, in the fields the scheduler uses.
pub fn pod(pod: &k8s::Pod) -> Result<(), Invalid> {
    meta(&pod.metadata, dns_subdomain)?;
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    labels(spec.node_selector.as_ref(), "spec.nodeSelector")?;
    if let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        dns_subdomain(n).map_err(|c| ("spec.nodeName".to_string(), c))?;
    }
    if let Some(n) = spec
        .priority_class_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        dns_subdomain(n).map_err(|c| ("spec.priorityClassName".to_string(), c))?;
    }
    for (i, c) in spec.containers.iter().enumerate() {
        container(c, &format!("spec.containers[{i}]"))?;
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        container(c, &format!("spec.initContainers[{i}]"))?;
    }
    resources(spec.overhead.as_ref(), "spec.overhead")?;
    if let Some(r) = &spec.resources {
        resources(r.limits.as_ref(), "spec.resources.limits")?;
        resources(r.requests.as_ref(), "spec.resources.requests")?;
    }
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        spread(c, &format!("spec.topologySpreadConstraints[{i}]"))?;
    }
    Ok(())
}

/// A PodGroup as the API server checks a custom resource's metadata
/// (name a DNS subdomain, namespace, labels), and its `minResources`
/// amounts as a pod's.
pub fn pod_group(
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    min_resources: Option<&BTreeMap<String, Quantity>>,
) -> Result<(), Invalid> {
    meta(m, dns_subdomain)?;
    resources(min_resources, "spec.minResources")
}

/// A Node as `ValidateNode` checks it: name, labels, taints, and the
/// capacity and allocatable amounts.
pub fn node(node: &k8s::Node) -> Result<(), Invalid> {
    meta(&node.metadata, dns_subdomain)?;
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    for (i, t) in taints.into_iter().flatten().enumerate() {
        let path = format!("spec.taints[{i}]");
        qualified_name(&t.key).map_err(|c| (format!("{path}.key"), c))?;
        label_value(t.value.as_deref().unwrap_or_default())
            .map_err(|c| (format!("{path}.value"), c))?;
    }
    let status = node.status.as_ref();
    resources(status.and_then(|s| s.capacity.as_ref()), "status.capacity")?;
    resources(
        status.and_then(|s| s.allocatable.as_ref()),
        "status.allocatable",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_as_the_api_server_caps_them() {
        let map =
            |k: &str, bytes: usize| Some(BTreeMap::from([(k.to_string(), "x".repeat(bytes))]));
        let key = "kubectl.kubernetes.io/last-applied-configuration";
        assert!(annotations(map(key, ANNOTATION_BYTES - key.len()).as_ref()).is_ok());
        let (field, cause) = annotations(map(key, ANNOTATION_BYTES).as_ref()).unwrap_err();
        assert_eq!(field, "metadata.annotations");
        assert!(
            cause.contains("more than the API server's limit of 262144"),
            "{cause}"
        );
        assert!(annotations(map("bad key", 1).as_ref()).is_err());
    }

    #[test]
    fn names_as_the_api_server_checks_them() {
        for ok in ["a", "web-1", "node-1.example.com", &"a".repeat(253)] {
            assert!(dns_subdomain(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Web",
            "web_1",
            "-a",
            "a.",
            "a..b",
            "a\nb",
            &"a".repeat(254),
        ] {
            assert!(dns_subdomain(bad).is_err(), "{bad:?}");
        }
        assert!(dns_label("kube-system").is_ok());
        for bad in ["a.b", "A", &"a".repeat(64)] {
            assert!(dns_label(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn label_keys_and_values() {
        for ok in [
            "app",
            "App_1.x",
            "example.com/gpu",
            "kubernetes.io/hostname",
        ] {
            assert!(qualified_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a/b/c",
            "Ex.com/a",
            "-a",
            "a b",
            "a\u{1b}[0m",
        ] {
            assert!(qualified_name(bad).is_err(), "{bad:?}");
        }
        for ok in ["", "v", "V_1.2-x"] {
            assert!(label_value(ok).is_ok(), "{ok}");
        }
        for bad in ["-v", "v ", "a/b", &"v".repeat(64)] {
            assert!(label_value(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn quotes_escape_and_clip() {
        assert_eq!(quote("a\nb"), "\"a\\nb\"");
        let long = quote(&"x".repeat(10_000));
        assert!(
            long.len() < 120 && long.ends_with("... (10000 bytes)"),
            "{long}"
        );
    }
}
