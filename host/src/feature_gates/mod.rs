//! kube-scheduler's `--feature-gates`: every gate of the Kubernetes
//! release wasmsched follows is accepted by name (the table in
//! `kubernetes.rs`, generated from the release's sources by
//! `scripts/gen-feature-gates`), with kube-scheduler's own checks (an
//! unknown gate, a locked gate set against its lock). A gate that changes
//! how kube-scheduler schedules is accepted only at a value whose
//! behaviour wasmsched has, or at its default, named then when wasmsched
//! does not have the feature yet; every other gate is accepted and named
//! as having no effect on scheduling.

mod gate;
mod kubernetes;

use thiserror::Error;

pub use gate::{Gate, Stage};
pub use kubernetes::VERSION as KUBERNETES_VERSION;

/// Every gate of the release, by name.
pub fn gates() -> &'static [Gate] {
    kubernetes::GATES
}

/// What wasmsched does about a gate that changes kube-scheduler's
/// decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Implemented, and always on.
    On,
    /// Implemented both ways: the gate turns it on or off, as in
    /// kube-scheduler.
    Switch,
    /// Not implemented: wasmsched schedules as with the gate off. The
    /// text says what is missing and where it is tracked.
    Missing(&'static str),
}

/// The gates kube-scheduler reads (its `pkg/scheduler` and the helpers it
/// calls), with what wasmsched does about each. Gates not listed do not
/// change scheduling.
pub const SCHEDULING: &[(&str, Support)] = &[
    ("DynamicResourceAllocation", Support::On),
    ("DRAPrioritizedList", Support::On),
    ("DRAAdminAccess", Support::On),
    ("DRAPartitionableDevices", Support::On),
    ("DRASchedulerFilterTimeout", Support::On),
    ("DRAResourceClaimDeviceStatus", Support::On),
    ("DRADeviceTaints", Support::On),
    ("PodLevelResources", Support::On),
    ("NodeInclusionPolicyInPodTopologySpread", Support::On),
    ("MatchLabelKeysInPodTopologySpread", Support::On),
    ("StorageCapacityScoring", Support::On),
    ("VolumeAttributesClass", Support::On),
    ("InterPodAffinityHostnameFastPath", Support::On),
    ("SchedulerAsyncAPICalls", Support::On),
    ("NodeDeclaredFeatures", Support::On),
    ("InPlacePodVerticalScaling", Support::On),
    ("InPlacePodLevelResourcesVerticalScaling", Support::On),
    (
        "InPlacePodVerticalScalingSchedulerPreemption",
        Support::Missing("no issue yet"),
    ),
    ("DRAConsumableCapacity", Support::On),
    ("DRAExtendedResource", Support::On),
    ("DRADeviceTaintRules", Support::On),
    ("DRADeviceBindingConditions", Support::On),
    ("SchedulerAsyncPreemption", Support::Switch),
    ("OpportunisticBatching", Support::Missing("issue 52")),
    ("SchedulerPreQueueingHints", Support::Missing("issue 52")),
    ("SchedulerPopFromBackoffQ", Support::Missing("issue 52")),
    (
        "NominatedNodeNameForExpectation",
        Support::Missing("no issue yet"),
    ),
    ("GenericWorkload", Support::Missing("issue 50")),
    ("CompositePodGroup", Support::Missing("issue 50")),
    (
        "TopologyAwareWorkloadScheduling",
        Support::Missing("issue 50"),
    ),
    ("PodGroupPreemptionPolicy", Support::Missing("issue 50")),
    ("DRAWorkloadResourceClaims", Support::Missing("issue 50")),
    (
        "DRANodeAllocatableResources",
        Support::Missing("no issue yet"),
    ),
    (
        "DRAOptionalNodeOperations",
        Support::Missing("no issue yet"),
    ),
    ("DRAListTypeAttributes", Support::Missing("no issue yet")),
    (
        "DRAFractionalCapacityRange",
        Support::Missing("no issue yet"),
    ),
    (
        "DRADeviceCompatibilityGroups",
        Support::Missing("no issue yet"),
    ),
    ("DRADerivedAttributes", Support::Missing("no issue yet")),
    ("VolumeLimitScaling", Support::On),
    (
        "TaintTolerationComparisonOperators",
        Support::Missing("no issue yet"),
    ),
];

/// The plugin through which kube-scheduler applies a gate of
/// [`SCHEDULING`]; `None`: the scheduler itself (its queue, its loop).
pub fn carrier(gate: &str) -> Option<&'static str> {
    Some(match gate {
        g if g.starts_with("DRA") || g == "DynamicResourceAllocation" => "DynamicResources",
        "PodLevelResources"
        | "InPlacePodVerticalScaling"
        | "InPlacePodLevelResourcesVerticalScaling" => "NodeResourcesFit",
        "NodeDeclaredFeatures" => "NodeDeclaredFeatures",
        "NodeInclusionPolicyInPodTopologySpread" | "MatchLabelKeysInPodTopologySpread" => {
            "PodTopologySpread"
        }
        "StorageCapacityScoring" | "VolumeAttributesClass" => "VolumeBinding",
        "VolumeLimitScaling" => "NodeVolumeLimits",
        "InterPodAffinityHostnameFastPath" => "InterPodAffinity",
        "TaintTolerationComparisonOperators" => "TaintToleration",
        "SchedulerAsyncPreemption" | "InPlacePodVerticalScalingSchedulerPreemption" => {
            "DefaultPreemption"
        }
        "GenericWorkload" | "CompositePodGroup" | "PodGroupPreemptionPolicy" => "GangScheduling",
        "TopologyAwareWorkloadScheduling" => "TopologyPlacementGenerator",
        _ => return None,
    })
}

/// What a profile makes of the gates of [`SCHEDULING`] that are on by
/// default in the release.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ProfileGates {
    /// Implemented, and the plugin carrying it is in the profile.
    pub honoured: Vec<&'static str>,
    /// Implemented, but the profile leaves its plugin out: (gate, plugin).
    pub plugin_off: Vec<(&'static str, &'static str)>,
    /// Not implemented: (gate, where it is tracked).
    pub missing: Vec<(&'static str, &'static str)>,
}

/// The gates on by default (or as `set` sets them) for a profile whose
/// plugins are `plugins`.
pub fn for_profile(plugins: &[&str], set: &[(String, bool)]) -> ProfileGates {
    let mut out = ProfileGates::default();
    for (name, support) in SCHEDULING {
        if !enabled(set, name) {
            continue;
        }
        match (support, carrier(name)) {
            (Support::Missing(issue), _) => out.missing.push((name, issue)),
            (_, Some(plugin)) if !plugins.contains(&plugin) => out.plugin_off.push((name, plugin)),
            _ => out.honoured.push(name),
        }
    }
    out
}

/// The table of docs/compatibility.md: every gate of [`SCHEDULING`] with
/// its stage and default in the release, the plugin carrying it, and
/// wasmsched's status.
pub fn markdown_table() -> String {
    let mut out =
        String::from("| gate | stage and default | applied by | wasmsched |\n|---|---|---|---|\n");
    let mut rows: Vec<_> = SCHEDULING.iter().collect();
    // On by default first, then by name.
    rows.sort_by_key(|(name, _)| (!enabled(&[], name), *name));
    for (name, support) in rows {
        let Some(gate) = gates().iter().find(|g| g.name == *name) else {
            continue;
        };
        let status = match support {
            Support::On => "implemented".to_string(),
            Support::Switch => "implemented; `--feature-gates` turns it off".to_string(),
            Support::Missing(issue) => format!("not implemented ({issue})"),
        };
        out.push_str(&format!(
            "| {name} | {}, {} | {} | {status} |\n",
            gate.stage.as_str(),
            if gate.default { "on" } else { "off" },
            carrier(name).unwrap_or("the scheduler"),
        ));
    }
    out
}

/// Whether `name` is on, given the gates a command line set (`set`, as
/// [`FeatureGates::set`]): its value there, else the release's default.
pub fn enabled(set: &[(String, bool)], name: &str) -> bool {
    set.iter()
        .rev()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
        .or_else(|| gates().iter().find(|g| g.name == name).map(|g| g.default))
        .unwrap_or(false)
}

/// A `--feature-gates` value that cannot be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("--feature-gates: {0}")]
pub struct GateError(String);

/// The gates a command line set, and what wasmsched makes of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// (gate, value) as set, in order.
    pub set: Vec<(String, bool)>,
    /// One line per gate that is accepted but changes nothing here.
    pub notes: Vec<String>,
}

impl FeatureGates {
    /// Parses `--feature-gates` values (`A=true,B=false`, possibly given
    /// several times) with kube-scheduler's checks and wasmsched's.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<Self, GateError> {
        let mut out = Self::default();
        for item in values
            .iter()
            .flat_map(|v| v.as_ref().split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| GateError(format!("missing bool value for {item}")))?;
            // kube-scheduler's `component:gate=value` form: only the
            // `kube` component has gates.
            let name = match name.trim().split_once(':') {
                Some(("kube", gate)) => gate.trim(),
                Some((component, _)) => {
                    return Err(GateError(format!(
                        "component {component:?} of {item}: unrecognized (only \"kube\")"
                    )))
                }
                None => name.trim(),
            };
            let value: bool = value.trim().parse().map_err(|_| {
                GateError(format!(
                    "invalid value of {name}={}, err: not a bool (true or false)",
                    value.trim()
                ))
            })?;
            let prefix = format!("--feature-gates {name}=");
            out.notes.retain(|n| !n.starts_with(&prefix));
            out.check(name, value)?;
            out.set.retain(|(n, _)| n != name);
            out.set.push((name.to_string(), value));
        }
        Ok(out)
    }

    fn check(&mut self, name: &str, value: bool) -> Result<(), GateError> {
        if name == "AllAlpha" || name == "AllBeta" {
            if value {
                return Err(GateError(format!(
                    "{name}=true turns on gates whose features wasmsched does not implement; name the gates one by one"
                )));
            }
            return Ok(());
        }
        let gate = gates()
            .iter()
            .find(|g| g.name == name)
            .ok_or_else(|| GateError(format!("unrecognized feature gate: {name}")))?;
        if gate.locked && value != gate.default {
            return Err(GateError(format!(
                "cannot set feature gate {name} to {value}, feature is locked to {}",
                gate.default
            )));
        }
        let support = SCHEDULING.iter().find(|(n, _)| *n == name).map(|(_, s)| *s);
        match support {
            None => self.notes.push(format!(
                "--feature-gates {name}={value}: no effect on scheduling (accepted, as kube-scheduler accepts every gate of Kubernetes {})",
                kubernetes::VERSION
            )),
            Some(Support::On) if !value => {
                return Err(GateError(format!(
                    "{name}=false: wasmsched always has this feature (kube-scheduler {}'s default); it cannot be turned off",
                    kubernetes::VERSION
                )))
            }
            Some(Support::On) | Some(Support::Switch) => {}
            Some(Support::Missing(issue)) if value && !gate.default => {
                return Err(GateError(format!(
                    "{name}=true: not implemented in wasmsched yet ({issue})"
                )))
            }
            Some(Support::Missing(issue)) if value => self.notes.push(format!(
                "--feature-gates {name}=true: on by default in kube-scheduler {}, not implemented in wasmsched yet ({issue}); scheduling is as with it off",
                kubernetes::VERSION
            )),
            // Off: what wasmsched does.
            Some(Support::Missing(_)) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<FeatureGates, String> {
        FeatureGates::parse(&[s]).map_err(|e| e.to_string())
    }

    #[test]
    fn every_scheduling_gate_is_a_gate_of_the_release() {
        for (name, _) in SCHEDULING {
            assert!(
                gates().iter().any(|g| g.name == *name),
                "{name} is not a gate of Kubernetes {}",
                kubernetes::VERSION
            );
        }
    }

    #[test]
    fn kube_scheduler_checks() {
        assert_eq!(
            parse("NoSuchGate=true").unwrap_err(),
            "--feature-gates: unrecognized feature gate: NoSuchGate"
        );
        assert_eq!(
            parse("DynamicResourceAllocation=false").unwrap_err(),
            "--feature-gates: cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"
        );
        assert_eq!(
            parse("PodLevelResources").unwrap_err(),
            "--feature-gates: missing bool value for PodLevelResources"
        );
        assert!(parse("PodLevelResources=maybe")
            .unwrap_err()
            .contains("PodLevelResources=maybe"));
    }

    #[test]
    fn values_wasmsched_has_are_accepted_the_others_refused() {
        // Its defaults, and what it does.
        let ok =
            parse("PodLevelResources=true, SchedulerAsyncPreemption=false,AllAlpha=false").unwrap();
        assert_eq!(ok.set.len(), 3);
        assert!(ok.notes.is_empty(), "{:?}", ok.notes);
        // A feature it has cannot be turned off.
        assert!(parse("PodLevelResources=false")
            .unwrap_err()
            .contains("cannot be turned off"));
        // One it lacks cannot be turned on, naming the issue.
        assert_eq!(
            parse("GenericWorkload=true").unwrap_err(),
            "--feature-gates: GenericWorkload=true: not implemented in wasmsched yet (issue 50)"
        );
        // One it lacks, set to its default (on): accepted and named.
        let named = parse("OpportunisticBatching=true").unwrap();
        assert_eq!(named.notes.len(), 1);
        assert!(named.notes[0].contains("not implemented in wasmsched yet (issue 52)"));
        // A gate that does not touch scheduling: accepted and named.
        let other = parse("APIResponseCompression=false").unwrap();
        assert!(other.notes[0].contains("no effect on scheduling"));
        assert!(parse("AllAlpha=true").is_err());
    }

    #[test]
    fn the_kube_component_prefix_is_kube_schedulers_form() {
        let g = parse("kube:SchedulerAsyncPreemption=false").unwrap();
        assert_eq!(g.set, [("SchedulerAsyncPreemption".to_string(), false)]);
        assert!(parse("wardle:featureA=true")
            .unwrap_err()
            .contains("component \"wardle\""));
    }

    #[test]
    fn the_last_value_of_a_gate_wins() {
        let g = FeatureGates::parse(&[
            "SchedulerAsyncPreemption=true",
            "SchedulerAsyncPreemption=false",
        ])
        .unwrap();
        assert_eq!(g.set, [("SchedulerAsyncPreemption".to_string(), false)]);
    }

    /// docs/compatibility.md shows [`markdown_table`] between its
    /// markers; `WASMSCHED_BLESS=1` rewrites it there.
    #[test]
    fn the_compatibility_page_lists_every_scheduling_gate() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/compatibility.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (begin, end) = ("<!-- gates:begin -->\n", "<!-- gates:end -->");
        let start = doc.find(begin).expect("the gates:begin marker") + begin.len();
        let stop = doc.find(end).expect("the gates:end marker");
        let table = markdown_table();
        if doc[start..stop] != table {
            if std::env::var_os("WASMSCHED_BLESS").is_some() {
                let new = format!("{}{table}{}", &doc[..start], &doc[stop..]);
                std::fs::write(path, new).unwrap();
            } else {
                panic!("docs/compatibility.md's gate table is stale (WASMSCHED_BLESS=1 rewrites it); expected:\n{table}");
            }
        }
        for (name, _) in SCHEDULING {
            assert!(table.contains(&format!("| {name} |")), "{name}");
        }
    }

    #[test]
    fn a_profile_honours_the_gates_of_its_plugins() {
        let all = ["DynamicResources", "NodeResourcesFit", "DefaultPreemption"];
        let g = for_profile(&all, &[]);
        assert!(g.honoured.contains(&"SchedulerAsyncPreemption"));
        assert!(g.missing.iter().any(|(n, _)| *n == "OpportunisticBatching"));
        // Off by default: not listed at all.
        assert!(!g.missing.iter().any(|(n, _)| *n == "GenericWorkload"));
        let without = for_profile(&["NodeResourcesFit"], &[]);
        assert!(without
            .plugin_off
            .contains(&("DynamicResourceAllocation", "DynamicResources")));
        // A gate turned off is not listed.
        let off = [("SchedulerAsyncPreemption".to_string(), false)];
        let g = for_profile(&all, &off);
        assert!(!g.honoured.contains(&"SchedulerAsyncPreemption"));
    }

    #[test]
    fn a_switchable_gate_takes_both_values_and_defaults_to_the_release() {
        for v in [true, false] {
            let g = parse(&format!("SchedulerAsyncPreemption={v}")).unwrap();
            assert!(g.notes.is_empty(), "{:?}", g.notes);
            assert_eq!(enabled(&g.set, "SchedulerAsyncPreemption"), v);
        }
        assert!(enabled(&[], "SchedulerAsyncPreemption"), "beta, on in 1.37");
        assert!(!enabled(&[], "GenericWorkload"), "beta, off in 1.37");
        assert!(!enabled(&[], "NoSuchGate"));
    }
}
