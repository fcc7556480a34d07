//! Reads Nodes and Pods (the volume objects: PersistentVolumes, claims,
//! StorageClasses, CSINodes; and the PriorityClasses and
//! PodDisruptionBudgets preemption uses; the Namespaces affinity terms'
//! `namespaceSelector` reads; the Services, ReplicationControllers,
//! ReplicaSets and StatefulSets whose selectors PodTopologySpread's default
//! constraints spread by) from YAML or JSON files and
//! directories, as `kubectl get -o yaml` prints them: single objects,
//! multi-document YAML, and `List` objects, from files, directories
//! or stdin (`-`). Other kinds are skipped, and counted by kind.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1 as k8s;
use serde_json::Value;
use thiserror::Error;

use crate::escape;
use crate::framework::objects::{object_key, ApiKind};
use crate::input::{self, yaml, Limits, ReadBudget};
use crate::model::budget::DisruptionBudget;
use crate::model::namespace::Namespaces;
use crate::model::priority::PriorityClass;
use crate::model::{ModelError, Node, Pod};

/// A manifest that cannot be used: the file, the document and the cause.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{file}: {location}{cause}")]
pub struct ManifestError {
    pub file: String,
    /// `document N (Kind name): ` or empty.
    pub location: String,
    pub cause: String,
}

/// The objects found.
#[derive(Debug, Default, Clone)]
pub struct Manifests {
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    /// Objects of the kinds plugins read beside Nodes and Pods (the
    /// registry's [`crate::framework::registry::OBJECT_KINDS`]; PodGroups
    /// for Coscheduling), checked, in file order.
    pub objects: Vec<PluginObject>,
    pub priority_classes: Vec<PriorityClass>,
    /// PodDisruptionBudgets (`policy/v1` or `policy/v1beta1`).
    pub budgets: Vec<DisruptionBudget>,
    /// Namespaces with their labels (for affinity terms'
    /// `namespaceSelector`).
    pub namespaces: Namespaces,
    /// The selectors of Services and controllers (PodTopologySpread's
    /// default constraints).
    pub workloads: crate::model::workload::Workloads,
    /// PersistentVolumes, claims, StorageClasses, CSINodes, CSIDrivers and
    /// CSIStorageCapacities.
    pub volumes: crate::framework::volumes::VolumeManifests,
    /// Objects of kinds not read, counted by (kind, apiVersion); see
    /// [`Manifests::skipped_line`].
    pub skipped: BTreeMap<(String, String), usize>,
    /// Manifest files read (stdin counts as one).
    pub files: usize,
    /// Objects found in them (`List` items one by one), read or skipped.
    pub objects_read: usize,
}

impl Manifests {
    /// The one line that names what was skipped, by kind (`skipped 3
    /// objects: 2 NetworkPolicy, 1 Pdo`); with the apiVersion where the
    /// kind alone would not say why (`1 PodGroup
    /// (scheduling.k8s.io/v1beta1)`: a kind read in other versions, or one
    /// skipped in several). `None` when nothing was skipped.
    pub fn skipped_line(&self) -> Option<String> {
        let total: usize = self.skipped.values().sum();
        if total == 0 {
            return None;
        }
        let mut counts: Vec<(&(String, String), &usize)> = self.skipped.iter().collect();
        // Most first, then by kind.
        counts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let versions = |kind: &str| self.skipped.keys().filter(|(k, _)| k == kind).count();
        let mut line = format!("skipped {total} {}:", plural(total, "object"));
        for (i, ((kind, api_version), n)) in counts.into_iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            let _ = write!(line, "{sep}{n} {}", escape::name(kind));
            if read_in_another_version(kind) || versions(kind) > 1 {
                let shown = if api_version.is_empty() {
                    "no apiVersion".into()
                } else {
                    escape::name(api_version)
                };
                let _ = write!(line, " ({shown})");
            }
        }
        Some(line)
    }

    /// Nothing to simulate: no Nodes, no Pods, or no Pod left to
    /// schedule; the cause, for a one-line error that names `paths`.
    pub fn check_schedulable(&self, paths: &[PathBuf]) -> Result<(), String> {
        let shown: Vec<String> = paths.iter().map(|p| input::files::display(p)).collect();
        let read = format!(
            "read {} {} from {} {}",
            self.objects_read,
            plural(self.objects_read, "object"),
            self.files,
            plural(self.files, "file"),
        );
        let cause = if self.files == 0 {
            "no manifest files (.yaml, .yml or .json) found".to_string()
        } else if self.nodes.is_empty() && self.pods.is_empty() {
            format!("no Nodes or Pods in the manifests ({read})")
        } else if self.nodes.is_empty() {
            format!("no Nodes in the manifests ({read})")
        } else if self.pods.is_empty() {
            format!("no Pods in the manifests ({read})")
        } else if !self.pods.iter().any(is_pending) {
            let n = self.pods.len();
            let are = if n == 1 { "Pod is" } else { "Pods are" };
            format!(
                "no pending Pods to schedule: the {n} {are} bound to nodes or finished ({read})"
            )
        } else {
            return Ok(());
        };
        Err(format!("{}: {cause}", shown.join(", ")))
    }
}

/// Neither bound to a node nor finished.
fn is_pending(p: &Pod) -> bool {
    p.node_name.is_none() && !matches!(p.phase.as_str(), "Succeeded" | "Failed")
}

/// `word` or `words` after `n`.
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

/// Whether `kind` is read from a manifest in some apiVersion (a plugin's
/// kind, such as Coscheduling's PodGroup).
fn read_in_another_version(kind: &str) -> bool {
    crate::framework::registry::OBJECT_KINDS
        .iter()
        .any(|r| r.kind.kind == kind)
}

/// An object of a kind a plugin reads.
#[derive(Debug, Clone)]
pub struct PluginObject {
    pub kind: ApiKind,
    pub version: &'static str,
    pub value: Value,
}

/// Reads every path (files, or directories searched recursively for
/// `.yaml`, `.yml` and `.json`, in name order; see
/// [`input::manifest_files`]) within the default [`Limits`].
pub fn load(paths: &[PathBuf]) -> Result<Manifests, ManifestError> {
    load_within(paths, &Limits::DEFAULT)
}

/// [`load`] within `limits`.
pub fn load_within(paths: &[PathBuf], limits: &Limits) -> Result<Manifests, ManifestError> {
    let mut out = Manifests::default();
    let mut seen_nodes: HashMap<String, String> = HashMap::new();
    let mut seen_pods: HashMap<String, String> = HashMap::new();
    let mut budget = ReadBudget::new(*limits);
    for file in files(paths)? {
        out.files += 1;
        load_file(
            &file,
            &mut budget,
            &mut out,
            &mut seen_nodes,
            &mut seen_pods,
        )?;
    }
    Ok(out)
}

/// The manifest files of every path, in order.
fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ManifestError> {
    let mut files = Vec::new();
    if paths.iter().filter(|p| input::files::is_stdin(p)).count() > 1 {
        return Err(ManifestError {
            file: "stdin".into(),
            location: String::new(),
            cause: "`-` given more than once".into(),
        });
    }
    for path in paths {
        input::manifest_files(path, &mut files).map_err(|(p, e)| ManifestError {
            file: p.display().to_string(),
            location: String::new(),
            cause: e.to_string(),
        })?;
    }
    Ok(files)
}

fn load_file(
    file: &Path,
    budget: &mut ReadBudget,
    out: &mut Manifests,
    seen_nodes: &mut HashMap<String, String>,
    seen_pods: &mut HashMap<String, String>,
) -> Result<(), ManifestError> {
    let name = input::files::display(file);
    let fail = |location: String, cause: String| ManifestError {
        file: name.clone(),
        location,
        cause,
    };
    for (doc, kind, obj) in file_objects(file, budget)? {
        out.objects_read += 1;
        let label = object_label(&kind, &obj);
        let at = format!("document {doc} ({label}): ");
        let here = format!("{name} document {doc}");
        match kind.as_str() {
            "Node" => {
                let n: k8s::Node = decode(obj).map_err(|c| fail(at.clone(), c))?;
                let n = Node::from_k8s(&n).map_err(|e| fail(at.clone(), model_cause(e)))?;
                if let Some(prev) = seen_nodes.insert(n.name.clone(), here) {
                    return Err(fail(
                        at,
                        format!("duplicate Node {} (first in {prev})", n.name),
                    ));
                }
                out.nodes.push(n);
            }
            "Pod" => {
                let p: k8s::Pod = decode(obj).map_err(|c| fail(at.clone(), c))?;
                let p = Pod::from_k8s(&p).map_err(|e| fail(at.clone(), model_cause(e)))?;
                if let Some(prev) = seen_pods.insert(p.key(), here.clone()) {
                    return Err(fail(
                        at,
                        format!("duplicate Pod {} (first in {prev})", p.key()),
                    ));
                }
                // A uid set in the manifest must be unique too: the
                // scheduler tracks placed pods by uid.
                if p.uid != p.key() {
                    if let Some(prev) = seen_pods.insert(format!("uid:{}", p.uid), here) {
                        return Err(fail(
                            at,
                            format!("metadata.uid: duplicate uid {:?} (first in {prev})", p.uid),
                        ));
                    }
                }
                out.pods.push(p);
            }
            k if plugin_kind(&obj, k).is_some() => {
                let (row, version) = plugin_kind(&obj, k).expect("checked in the guard");
                let key = (row.check)(&obj)
                    .map_err(|c| fail(at.clone(), escape::escape(&c).into_owned()))?;
                let duplicate = out
                    .objects
                    .iter()
                    .any(|o| o.kind == row.kind && object_key(&o.kind, &o.value) == key);
                if duplicate {
                    return Err(fail(at, format!("duplicate {k} {key}")));
                }
                out.objects.push(PluginObject {
                    kind: row.kind,
                    version,
                    value: obj,
                });
            }
            "PriorityClass" => {
                let c: k8s_openapi::api::scheduling::v1::PriorityClass =
                    decode(obj).map_err(|c| fail(at.clone(), c))?;
                let c =
                    PriorityClass::from_k8s(&c).map_err(|e| fail(at.clone(), model_cause(e)))?;
                out.priority_classes.push(c);
            }
            "PodDisruptionBudget" => {
                let b = DisruptionBudget::from_json(obj).map_err(|c| fail(at.clone(), c))?;
                out.budgets.push(b);
            }
            "Namespace" => {
                let n: k8s::Namespace = decode(obj).map_err(|c| fail(at.clone(), c))?;
                let (name, labels) = namespace_labels(&n);
                if name.is_empty() {
                    return Err(fail(at, "metadata.name: must not be empty".into()));
                }
                if out.namespaces.contains(&name) {
                    return Err(fail(at, format!("duplicate Namespace {name}")));
                }
                out.namespaces.set(&name, labels);
            }
            "Service" | "ReplicationController" | "ReplicaSet" | "StatefulSet" => {
                add_workload(&kind, obj, &mut out.workloads).map_err(|c| fail(at, c))?;
            }
            k if crate::framework::volumes::manifest::KINDS.contains(&k) => {
                use crate::framework::volumes::RawVolume;
                let raw = match k {
                    "PersistentVolume" => decode(obj).map(|o| RawVolume::Pv(Box::new(o))),
                    "PersistentVolumeClaim" => decode(obj).map(|o| RawVolume::Pvc(Box::new(o))),
                    "StorageClass" => decode(obj).map(|o| RawVolume::Class(Box::new(o))),
                    "CSINode" => decode(obj).map(|o| RawVolume::CsiNode(Box::new(o))),
                    "CSIDriver" => decode(obj).map(|o| RawVolume::CsiDriver(Box::new(o))),
                    _ => decode(obj).map(|o| RawVolume::CsiCapacity(Box::new(o))),
                }
                .map_err(|c| fail(at.clone(), c))?;
                out.volumes.add(raw, here).map_err(|c| fail(at, c))?;
            }
            // A scheduler configuration beside the manifests (as the
            // examples keep theirs): `--config` reads it, not skipped.
            "WasmSchedulerConfiguration" | "KubeSchedulerConfiguration" => {}
            other => {
                let api_version = obj.get("apiVersion").and_then(Value::as_str);
                let key = (other.to_string(), api_version.unwrap_or("").to_string());
                *out.skipped.entry(key).or_insert(0) += 1
            }
        }
    }
    Ok(())
}

/// The registry's row for an object a plugin reads, with its version.
fn plugin_kind(
    obj: &Value,
    kind: &str,
) -> Option<(
    &'static crate::framework::registry::ObjectKindRow,
    &'static str,
)> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str)?;
    crate::framework::registry::object_kind(api_version, kind)
}

/// A Service or a controller of pods (what PodTopologySpread's default
/// constraints select by), recorded under its namespace and name.
fn add_workload(
    kind: &str,
    obj: Value,
    out: &mut crate::model::workload::Workloads,
) -> Result<(), String> {
    use crate::model::selector::LabelSelector;
    use crate::model::workload::ControllerKind;
    let parse = |s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector| {
        LabelSelector::parse(s).map_err(|c| format!("spec.selector: {c}"))
    };
    let (kind, meta, selector) = match kind {
        "Service" => {
            let o: k8s::Service = decode(obj)?;
            let (ns, name) = namespaced(&o.metadata);
            out.set_service(&ns, &name, o.spec.and_then(|s| s.selector));
            return Ok(());
        }
        "ReplicationController" => {
            let o: k8s::ReplicationController = decode(obj)?;
            let sel = o.spec.and_then(|s| s.selector);
            (
                ControllerKind::ReplicationController,
                o.metadata,
                sel.map(|l| LabelSelector::from_labels(&l)),
            )
        }
        "ReplicaSet" => {
            let o: k8s_openapi::api::apps::v1::ReplicaSet = decode(obj)?;
            let sel = parse(&o.spec.selector)?;
            (ControllerKind::ReplicaSet, o.metadata, Some(sel))
        }
        _ => {
            let o: k8s_openapi::api::apps::v1::StatefulSet = decode(obj)?;
            let sel = parse(&o.spec.selector)?;
            (ControllerKind::StatefulSet, o.metadata, Some(sel))
        }
    };
    let (ns, name) = namespaced(&meta);
    out.set_controller(&ns, kind, &name, selector);
    Ok(())
}

/// Splits `List` objects into their items; returns (kind, object) pairs.
fn flatten(value: Value, out: &mut Vec<(String, Value)>) -> Result<(), String> {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| "missing `kind` (expected Node, Pod or List)".to_string())?
        .to_string();
    if kind == "List" || kind.ends_with("List") {
        let items = match value {
            Value::Object(mut m) => match m.remove("items") {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        let item_kind = kind
            .strip_suffix("List")
            .filter(|k| !k.is_empty())
            .map(str::to_string);
        for mut item in items {
            if item.get("kind").is_none() {
                match (&item_kind, item.as_object_mut()) {
                    (Some(k), Some(m)) => {
                        m.insert("kind".into(), k.clone().into());
                    }
                    _ => return Err(format!("{} item without `kind`", escape::name(&kind))),
                }
            }
            flatten(item, out)?;
        }
        return Ok(());
    }
    out.push((kind, value));
    Ok(())
}

/// The kinds read that live in a namespace (named `namespace/name`).
const NAMESPACED: &[&str] = &[
    "Pod",
    "PersistentVolumeClaim",
    "PodDisruptionBudget",
    "PodGroup",
    "Service",
    "ReplicationController",
    "ReplicaSet",
    "StatefulSet",
    "CSIStorageCapacity",
];

fn object_label(kind: &str, obj: &Value) -> String {
    let meta = obj.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    let kind = escape::name(kind);
    match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) if NAMESPACED.contains(&kind.as_ref()) => {
            format!("{kind} {}/{}", escape::name(ns), escape::name(name))
        }
        _ => format!("{kind} {}", escape::name(name)),
    }
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(obj: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(obj).map_err(|e| {
        let path = escape::escape(&e.path().to_string()).into_owned();
        format!("{path}: {}", e.into_inner())
    })
}

fn model_cause(e: ModelError) -> String {
    format!("{}: {}", e.field, e.cause)
}

/// One object of a manifest, not yet decoded: for commands that read
/// kinds other than Nodes and Pods (the scale-down preview reads
/// Deployments and ReplicaSets too).
#[derive(Debug, Clone)]
pub struct RawObject {
    pub kind: String,
    pub value: Value,
    pub file: String,
    /// `document N (Kind name): `, for errors.
    pub location: String,
}

impl RawObject {
    /// Decodes the object, naming the file, document and field on error.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, ManifestError> {
        decode(self.value.clone()).map_err(|cause| ManifestError {
            file: self.file.clone(),
            location: self.location.clone(),
            cause,
        })
    }
}

/// Every object in `paths` (files, or directories searched as [`load`]
/// does), `List`s flattened, in file order.
pub fn raw_objects(paths: &[PathBuf]) -> Result<Vec<RawObject>, ManifestError> {
    let mut budget = ReadBudget::new(Limits::DEFAULT);
    let mut out = Vec::new();
    for file in files(paths)? {
        let name = input::files::display(&file);
        for (doc, kind, obj) in file_objects(&file, &mut budget)? {
            let location = format!("document {doc} ({}): ", object_label(&kind, &obj));
            out.push(RawObject {
                kind,
                value: obj,
                file: name.clone(),
                location,
            });
        }
    }
    Ok(out)
}

/// The objects of one file as (document number from 1, kind, object),
/// `List`s flattened.
fn file_objects(
    file: &Path,
    budget: &mut ReadBudget,
) -> Result<Vec<(usize, String, Value)>, ManifestError> {
    let name = input::files::display(file);
    let fail = |location: String, cause: String| ManifestError {
        file: name.clone(),
        location,
        cause,
    };
    let text = budget
        .read(file)
        .map_err(|e| fail(String::new(), e.to_string()))?;
    let docs = yaml::documents(&text, budget.limits()).map_err(|(doc, e)| {
        let cause = if e.limit {
            e.message
        } else {
            format!("not valid YAML/JSON: {}", e.message)
        };
        fail(format!("document {doc}: "), cause)
    })?;
    let mut out = Vec::new();
    for (doc, value) in docs {
        if value.is_null() {
            continue;
        }
        let mut objects = Vec::new();
        flatten(value, &mut objects).map_err(|c| fail(format!("document {doc}: "), c))?;
        out.extend(objects.into_iter().map(|(kind, obj)| (doc, kind, obj)));
    }
    Ok(out)
}

/// A Namespace's name and labels, with the `kubernetes.io/metadata.name`
/// label the API server sets on every namespace.
pub fn namespace_labels(n: &k8s::Namespace) -> (String, BTreeMap<String, String>) {
    let name = n.metadata.name.clone().unwrap_or_default();
    let mut labels = n.metadata.labels.clone().unwrap_or_default();
    labels.insert(NAMESPACE_NAME_LABEL.into(), name.clone());
    (name, labels)
}

/// The label the API server puts on every namespace, its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// (namespace, name) of a namespaced object; a manifest without a
/// namespace means `default`, as kubectl applies it.
fn namespaced(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}
