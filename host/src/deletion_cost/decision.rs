//! Whether to write a pod's cost: ownership first, then hysteresis.

use super::annotation::Ownership;

/// Why a pod's cost was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// `metadata.deletionTimestamp` is set: the pod is going anyway.
    Terminating,
    /// Succeeded or Failed: not among the pods a scale-down orders.
    Inactive,
    /// Someone else set the cost: never overwritten.
    UserSet,
    /// The policy has no opinion on this pod.
    NoOpinion,
    /// The cost on the pod is already the computed one.
    Unchanged,
    /// The computed cost moved by no more than the hysteresis threshold.
    Hysteresis,
    /// A metric could not be read or was garbage: the cost is held.
    MetricsFault,
    /// The policy failed for this pod: the cost is held.
    PluginError,
    /// The pod does not convert into the contract's record.
    PodInvalid,
    /// The pod was deleted before the write.
    Gone,
}

impl SkipReason {
    /// The `reason` label of `wasmsched_deletion_cost_skips_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Terminating => "terminating",
            SkipReason::Inactive => "inactive",
            SkipReason::UserSet => "user-set",
            SkipReason::NoOpinion => "no-opinion",
            SkipReason::Unchanged => "unchanged",
            SkipReason::Hysteresis => "hysteresis",
            SkipReason::MetricsFault => "metrics-fault",
            SkipReason::PluginError => "plugin-error",
            SkipReason::PodInvalid => "pod-invalid",
            SkipReason::Gone => "gone",
        }
    }
}

/// What to do with one pod's computed cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Write { from: Option<i32>, to: i32 },
    Skip(SkipReason),
}

/// The action for a pod whose annotations say `ownership`, given the
/// policy's answer. A first cost is always written; an owned one only when
/// it moves by more than `hysteresis`.
pub fn decide(ownership: &Ownership, computed: Option<i32>, hysteresis: u32) -> Action {
    let Some(to) = computed else {
        return Action::Skip(match ownership {
            Ownership::Foreign(_) => SkipReason::UserSet,
            _ => SkipReason::NoOpinion,
        });
    };
    match ownership {
        Ownership::Foreign(_) => Action::Skip(SkipReason::UserSet),
        Ownership::Free => Action::Write { from: None, to },
        Ownership::Ours(cur) if *cur == to => Action::Skip(SkipReason::Unchanged),
        Ownership::Ours(cur)
            if (i64::from(to) - i64::from(*cur)).unsigned_abs() <= u64::from(hysteresis) =>
        {
            Action::Skip(SkipReason::Hysteresis)
        }
        Ownership::Ours(cur) => Action::Write {
            from: Some(*cur),
            to,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hysteresis_and_ownership() {
        use Action::*;
        assert_eq!(
            decide(&Ownership::Free, Some(5), 10),
            Write { from: None, to: 5 }
        );
        assert_eq!(
            decide(&Ownership::Ours(100), Some(100), 10),
            Skip(SkipReason::Unchanged)
        );
        assert_eq!(
            decide(&Ownership::Ours(100), Some(110), 10),
            Skip(SkipReason::Hysteresis)
        );
        assert_eq!(
            decide(&Ownership::Ours(100), Some(90), 10),
            Skip(SkipReason::Hysteresis)
        );
        assert_eq!(
            decide(&Ownership::Ours(100), Some(111), 10),
            Write {
                from: Some(100),
                to: 111
            }
        );
        assert_eq!(
            decide(&Ownership::Ours(i32::MIN), Some(i32::MAX), 10),
            Write {
                from: Some(i32::MIN),
                to: i32::MAX
            }
        );
        assert_eq!(
            decide(&Ownership::Foreign("7".into()), Some(500), 0),
            Skip(SkipReason::UserSet)
        );
        assert_eq!(
            decide(&Ownership::Ours(3), None, 0),
            Skip(SkipReason::NoOpinion)
        );
    }
}
