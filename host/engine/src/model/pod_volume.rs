//! The volumes of a pod that kube-scheduler's volume plugins look at:
//! claims (VolumeBinding, VolumeZone, NodeVolumeLimits) and the in-tree
//! disks VolumeRestrictions checks for conflicts. Other volume types
//! (emptyDir, configMap, hostPath, ...) matter to no scheduling decision.

use k8s_openapi::api::core::v1 as k8s;

/// What a pod volume refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeSource {
    /// `persistentVolumeClaim`, in the pod's namespace.
    Claim { claim: String, read_only: bool },
    /// `gcePersistentDisk`.
    GcePersistentDisk { pd_name: String, read_only: bool },
    /// `awsElasticBlockStore`.
    AwsElasticBlockStore { volume_id: String },
    /// `iscsi`.
    Iscsi { iqn: String, read_only: bool },
    /// `rbd` (the pool defaults to `rbd`, as the API server defaults it).
    Rbd {
        monitors: Vec<String>,
        pool: String,
        image: String,
        read_only: bool,
    },
    /// `ephemeral` (a generic ephemeral volume): not supported yet; a pod
    /// with one is reported unschedulable rather than placed without its
    /// claim.
    Ephemeral,
}

/// One `spec.volumes[]` entry the volume plugins read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolume {
    pub name: String,
    pub source: VolumeSource,
}

impl PodVolume {
    /// The claim this volume mounts, if it is one.
    pub fn claim(&self) -> Option<&str> {
        match &self.source {
            VolumeSource::Claim { claim, .. } => Some(claim),
            _ => None,
        }
    }
}

/// Why a pod with these volumes cannot be scheduled by wasmsched, if it
/// cannot (the pod's `unsupported` message).
pub fn unsupported(volumes: &[PodVolume]) -> Option<String> {
    volumes
        .iter()
        .find(|v| v.source == VolumeSource::Ephemeral)
        .map(|v| {
            format!(
                "pod uses generic ephemeral volume {:?}; wasmsched does not schedule \
                 such pods yet",
                v.name
            )
        })
}

/// What [`pod_volumes`] found wrong: (field path, cause).
pub type VolumeError = (String, String);

/// The volumes of `spec` the volume plugins read, in order.
pub fn pod_volumes(spec: &k8s::PodSpec) -> Result<Vec<PodVolume>, VolumeError> {
    let mut out = Vec::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let path = format!("spec.volumes[{i}]");
        if let Some(source) = source(v, &path)? {
            out.push(PodVolume {
                name: v.name.clone(),
                source,
            });
        }
    }
    Ok(out)
}

fn source(v: &k8s::Volume, path: &str) -> Result<Option<VolumeSource>, VolumeError> {
    let ro = |r: Option<bool>| r.unwrap_or(false);
    if v.ephemeral.is_some() {
        return Ok(Some(VolumeSource::Ephemeral));
    }
    if let Some(c) = &v.persistent_volume_claim {
        if c.claim_name.is_empty() {
            return Err((
                format!("{path}.persistentVolumeClaim.claimName"),
                "must not be empty".into(),
            ));
        }
        return Ok(Some(VolumeSource::Claim {
            claim: c.claim_name.clone(),
            read_only: ro(c.read_only),
        }));
    }
    Ok(if let Some(d) = &v.gce_persistent_disk {
        Some(VolumeSource::GcePersistentDisk {
            pd_name: d.pd_name.clone(),
            read_only: ro(d.read_only),
        })
    } else if let Some(d) = &v.aws_elastic_block_store {
        Some(VolumeSource::AwsElasticBlockStore {
            volume_id: d.volume_id.clone(),
        })
    } else if let Some(d) = &v.iscsi {
        Some(VolumeSource::Iscsi {
            iqn: d.iqn.clone(),
            read_only: ro(d.read_only),
        })
    } else {
        v.rbd.as_ref().map(|d| VolumeSource::Rbd {
            monitors: d.monitors.clone(),
            pool: d.pool.clone().unwrap_or_else(|| "rbd".into()),
            image: d.image.clone(),
            read_only: ro(d.read_only),
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(volumes: serde_json::Value) -> k8s::PodSpec {
        serde_json::from_value(json!({"containers": [], "volumes": volumes})).unwrap()
    }

    #[test]
    fn keeps_claims_and_in_tree_disks_in_order() {
        let v = pod_volumes(&spec(json!([
            {"name": "tmp", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "ds", "readOnly": true}},
            {"name": "pd", "gcePersistentDisk": {"pdName": "disk-1"}},
            {"name": "ceph", "rbd": {"monitors": ["m1"], "image": "img"}}
        ])))
        .unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].claim(), Some("ds"));
        assert_eq!(
            v[0].source,
            VolumeSource::Claim {
                claim: "ds".into(),
                read_only: true
            }
        );
        assert_eq!(
            v[2].source,
            VolumeSource::Rbd {
                monitors: vec!["m1".into()],
                pool: "rbd".into(),
                image: "img".into(),
                read_only: false
            }
        );
    }

    #[test]
    fn rejects_empty_claim_names_and_ephemeral_volumes() {
        let e = pod_volumes(&spec(json!([
            {"name": "data", "persistentVolumeClaim": {"claimName": ""}}
        ])))
        .unwrap_err();
        assert_eq!(e.0, "spec.volumes[0].persistentVolumeClaim.claimName");
        let v = pod_volumes(&spec(json!([
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
        ])))
        .unwrap();
        let why = unsupported(&v).unwrap();
        assert!(why.contains("\"scratch\""), "{why}");
        assert_eq!(unsupported(&[]), None);
    }
}
