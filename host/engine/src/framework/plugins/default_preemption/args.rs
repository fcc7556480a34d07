//! `DefaultPreemptionArgs`: upstream's candidate sampling, plus this
//! scheduler's deletion-cost tie-break.

use serde_json::Value;

use super::super::helpers::{args_object, int_in, json_type, reject_unknown};
/// The plugin's name.
pub const NAME: &str = "DefaultPreemption";

/// How many candidates preemption looks for, and how it breaks ties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Args {
    /// Upstream `minCandidateNodesPercentage` (default 10).
    pub min_candidate_nodes_percentage: u32,
    /// Upstream `minCandidateNodesAbsolute` (default 100).
    pub min_candidate_nodes_absolute: u32,
    /// Among candidates upstream ranks equal, prefer the one whose victims
    /// have the lower summed `controller.kubernetes.io/pod-deletion-cost`
    /// (default off: upstream takes the first).
    pub prefer_lower_deletion_cost: bool,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100,
            prefer_lower_deletion_cost: false,
        }
    }
}

impl Args {
    /// Parses and validates the args as upstream's
    /// `ValidateDefaultPreemptionArgs` does; errors name the field.
    pub fn parse(args: Option<&Value>) -> Result<Self, String> {
        let mut out = Self::default();
        let Some(obj) = args_object(NAME, args)? else {
            return Ok(out);
        };
        reject_unknown(
            &obj,
            &[
                "minCandidateNodesPercentage",
                "minCandidateNodesAbsolute",
                "preferLowerDeletionCost",
            ],
            "",
        )?;
        if let Some(v) = obj.get("minCandidateNodesPercentage") {
            out.min_candidate_nodes_percentage =
                int_in(v, 0..=100, "minCandidateNodesPercentage")? as u32;
        }
        if let Some(v) = obj.get("minCandidateNodesAbsolute") {
            out.min_candidate_nodes_absolute =
                int_in(v, 0..=i64::from(i32::MAX), "minCandidateNodesAbsolute")? as u32;
        }
        if out.min_candidate_nodes_percentage == 0 && out.min_candidate_nodes_absolute == 0 {
            return Err(
                "minCandidateNodesPercentage and minCandidateNodesAbsolute: cannot both be zero"
                    .into(),
            );
        }
        if let Some(v) = obj.get("preferLowerDeletionCost") {
            out.prefer_lower_deletion_cost = v.as_bool().ok_or_else(|| {
                format!(
                    "preferLowerDeletionCost: expected a boolean, got {}",
                    json_type(v)
                )
            })?;
        }
        Ok(out)
    }

    /// Upstream `calculateNumCandidates`: how many candidates the dry run
    /// looks for among `nodes` potential nodes.
    pub fn num_candidates(&self, nodes: usize) -> usize {
        let pct = nodes * self.min_candidate_nodes_percentage as usize / 100;
        pct.max(self.min_candidate_nodes_absolute as usize)
            .min(nodes)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn args_parse_validate_and_size_the_dry_run() {
        let d = Args::parse(None).unwrap();
        assert_eq!(d, Args::default());
        assert_eq!(d.num_candidates(50), 50);
        assert_eq!(d.num_candidates(5000), 500);
        assert_eq!(d.num_candidates(500), 100);
        let a = Args::parse(Some(&json!({
            "minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 3,
            "preferLowerDeletionCost": true
        })))
        .unwrap();
        assert_eq!(a.num_candidates(5000), 3);
        assert!(a.prefer_lower_deletion_cost);
        let e = Args::parse(Some(&json!({"minCandidateNodesPercentage": 101}))).unwrap_err();
        assert!(e.starts_with("minCandidateNodesPercentage:"), "{e}");
        let e = Args::parse(Some(
            &json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}),
        ))
        .unwrap_err();
        assert!(e.contains("cannot both be zero"), "{e}");
        let e = Args::parse(Some(&json!({"preferLowerDeletionCost": "yes"}))).unwrap_err();
        assert_eq!(
            e,
            "preferLowerDeletionCost: expected a boolean, got a string"
        );
        assert!(Args::parse(Some(&json!({"minCandidates": 1}))).is_err());
    }
}
