//! The pod annotations that declare network peers.
//!
//! ```text
//! network.wasmsched.io/peers:           entry ( (";" | newline) entry )*
//!     entry  := selector [ ":" weight ]     weight: integer 1..=1000, default 1
//! network.wasmsched.io/peer-namespaces: "*" | namespace ( "," namespace )*
//! network.wasmsched.io/max-distance:    "node" | "zone" | "region"
//! ```
//!
//! Entries are separated by `;` or line breaks because `,` already
//! separates the requirements of one selector (`app=db,tier=primary`).
//! Label keys and values cannot contain `:` or `;`, so neither is ambiguous.
//! Empty entries (a trailing `;`, blank lines) are ignored.

use std::fmt;

use crate::selector::{LabelLookup, Selector};

/// Peer selectors and their traffic weights.
pub const PEERS_ANNOTATION: &str = "network.wasmsched.io/peers";
/// Namespaces the peer selectors look in (default: the pod's own).
pub const PEER_NAMESPACES_ANNOTATION: &str = "network.wasmsched.io/peer-namespaces";
/// Opt-in Filter: how far the pod may be placed from its placed peers.
pub const MAX_DISTANCE_ANNOTATION: &str = "network.wasmsched.io/max-distance";

/// Largest weight an entry may carry.
pub const MAX_WEIGHT: u32 = 1000;

/// One peer declaration: pods matching `selector` exchange traffic of
/// relative volume `weight` with the declaring pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerEntry {
    pub selector: Selector,
    pub weight: u32,
}

/// Where a pod's peer selectors look.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PeerNamespaces {
    /// The declaring pod's namespace (the default).
    #[default]
    Own,
    /// These namespaces (sorted, without duplicates).
    List(Vec<String>),
    /// `*`: every namespace.
    All,
}

impl PeerNamespaces {
    /// Whether a pod in `target_ns` is in scope for a declaration made by a
    /// pod in `own_ns`.
    pub fn contains(&self, own_ns: &str, target_ns: &str) -> bool {
        match self {
            PeerNamespaces::Own => own_ns == target_ns,
            PeerNamespaces::List(list) => {
                list.binary_search_by(|n| n.as_str().cmp(target_ns)).is_ok()
            }
            PeerNamespaces::All => true,
        }
    }
}

/// A pod's parsed peers and peer-namespaces annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSpec {
    pub entries: Vec<PeerEntry>,
    pub namespaces: PeerNamespaces,
}

impl PeerSpec {
    /// Parses the two annotations' values. Errors name the annotation:
    /// `invalid annotation network.wasmsched.io/peers: entry 2 "app in (a": unclosed parenthesis`.
    pub fn parse(peers: &str, namespaces: Option<&str>) -> Result<Self, String> {
        let entries = parse_peers(peers).map_err(|e| invalid(PEERS_ANNOTATION, &e))?;
        let namespaces = match namespaces {
            Some(text) => {
                parse_peer_namespaces(text).map_err(|e| invalid(PEER_NAMESPACES_ANNOTATION, &e))?
            }
            None => PeerNamespaces::Own,
        };
        Ok(Self {
            entries,
            namespaces,
        })
    }

    /// Reads a pod's annotations: `Ok(None)` without a peers annotation
    /// (a peer-namespaces annotation alone is still validated).
    pub fn from_annotations<A: LabelLookup + ?Sized>(
        annotations: &A,
    ) -> Result<Option<Self>, String> {
        let namespaces = annotations.lookup(PEER_NAMESPACES_ANNOTATION);
        match annotations.lookup(PEERS_ANNOTATION) {
            Some(peers) => Self::parse(peers, namespaces).map(Some),
            None => {
                if let Some(text) = namespaces {
                    parse_peer_namespaces(text)
                        .map_err(|e| invalid(PEER_NAMESPACES_ANNOTATION, &e))?;
                }
                Ok(None)
            }
        }
    }

    /// The weight of the traffic this declaration (made by a pod in
    /// `own_ns`) gives a pod in `target_ns` with `target_labels`: the
    /// largest weight among the entries that select it, `None` when none
    /// does. Overlapping entries do not add up.
    pub fn weight_for<L: LabelLookup + ?Sized>(
        &self,
        own_ns: &str,
        target_ns: &str,
        target_labels: &L,
    ) -> Option<u32> {
        if !self.namespaces.contains(own_ns, target_ns) {
            return None;
        }
        self.entries
            .iter()
            .filter(|e| e.selector.matches(target_labels))
            .map(|e| e.weight)
            .max()
    }
}

/// The opt-in Filter's bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MaxDistance {
    /// On the same node as a peer.
    Node,
    /// In the same zone as a peer (or on its node).
    Zone,
    /// In the same region as a peer (or its zone, or its node).
    Region,
}

impl MaxDistance {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "node" => Ok(MaxDistance::Node),
            "zone" => Ok(MaxDistance::Zone),
            "region" => Ok(MaxDistance::Region),
            other => Err(invalid(
                MAX_DISTANCE_ANNOTATION,
                &format!("{other:?}: must be node, zone or region"),
            )),
        }
    }

    /// Reads the pod's max-distance annotation, `Ok(None)` when absent.
    pub fn from_annotations<A: LabelLookup + ?Sized>(
        annotations: &A,
    ) -> Result<Option<Self>, String> {
        annotations
            .lookup(MAX_DISTANCE_ANNOTATION)
            .map(Self::parse)
            .transpose()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MaxDistance::Node => "node",
            MaxDistance::Zone => "zone",
            MaxDistance::Region => "region",
        }
    }
}

impl fmt::Display for MaxDistance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn invalid(annotation: &str, message: &str) -> String {
    format!("invalid annotation {annotation}: {message}")
}

/// Parses the peers annotation's value (errors without the annotation
/// name: `entry 2 "app in (a": unclosed parenthesis`).
pub fn parse_peers(text: &str) -> Result<Vec<PeerEntry>, String> {
    let mut entries = Vec::new();
    for raw in text.split([';', '\n']) {
        let entry = raw.trim();
        if entry.is_empty() {
            continue;
        }
        let n = entries.len() + 1;
        let parsed = parse_entry(entry).map_err(|e| format!("entry {n} {entry:?}: {e}"))?;
        entries.push(parsed);
    }
    if entries.is_empty() {
        return Err("no peer entries".to_string());
    }
    Ok(entries)
}

fn parse_entry(entry: &str) -> Result<PeerEntry, String> {
    let (selector, weight) = match entry.split_once(':') {
        Some((sel, w)) => (sel, Some(w.trim())),
        None => (entry, None),
    };
    let weight = match weight {
        None => 1,
        Some(w) if w.contains([':', ',']) => {
            return Err(format!(
                "weight {w:?} must end the entry; separate peers with \";\""
            ))
        }
        Some(w) => parse_weight(w)?,
    };
    let selector = Selector::parse(selector)?;
    Ok(PeerEntry { selector, weight })
}

fn parse_weight(w: &str) -> Result<u32, String> {
    let bad = || format!("weight {w:?} must be an integer from 1 to {MAX_WEIGHT}");
    if w.is_empty() || !w.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match w.parse::<u32>() {
        Ok(n) if (1..=MAX_WEIGHT).contains(&n) => Ok(n),
        _ => Err(bad()),
    }
}

/// Parses the peer-namespaces annotation's value.
pub fn parse_peer_namespaces(text: &str) -> Result<PeerNamespaces, String> {
    let text = text.trim();
    if text == "*" {
        return Ok(PeerNamespaces::All);
    }
    let mut list = Vec::new();
    for (i, raw) in text.split(',').enumerate() {
        let ns = raw.trim();
        if ns == "*" {
            return Err("\"*\" must be the whole value".to_string());
        }
        if !valid_namespace(ns) {
            return Err(format!(
                "namespace {} {ns:?} is not a valid namespace name",
                i + 1
            ));
        }
        list.push(ns.to_string());
    }
    list.sort();
    list.dedup();
    Ok(PeerNamespaces::List(list))
}

/// A DNS-1123 label.
fn valid_namespace(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_entries_and_weights() {
        let entries = parse_peers("app=db:10; app in (cache,queue):2 ;tier=frontend;").unwrap();
        let shown: Vec<(String, u32)> = entries
            .iter()
            .map(|e| (e.selector.to_string(), e.weight))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("app=db".to_string(), 10),
                ("app in (cache,queue)".to_string(), 2),
                ("tier=frontend".to_string(), 1),
            ]
        );
        // Line breaks separate entries too (a YAML block scalar).
        let entries = parse_peers("app=db,tier=primary : 5\n\n  app=cache\n").unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].selector.requirements.len(), 2);
        assert_eq!(entries[0].weight, 5);
        assert_eq!(entries[1].weight, 1);
    }

    #[test]
    fn rejects_bad_peers() {
        let table = [
            ("app=db; app in (a", "entry 2 \"app in (a\": unclosed parenthesis"),
            ("app=db:-3", "entry 1 \"app=db:-3\": weight \"-3\" must be an integer from 1 to 1000"),
            ("app=db:ten", "entry 1 \"app=db:ten\": weight \"ten\" must be an integer from 1 to 1000"),
            ("app=db:0", "entry 1 \"app=db:0\": weight \"0\" must be an integer from 1 to 1000"),
            ("app=db:1001", "entry 1 \"app=db:1001\": weight \"1001\" must be an integer from 1 to 1000"),
            ("app=db:1.5", "entry 1 \"app=db:1.5\": weight \"1.5\" must be an integer from 1 to 1000"),
            ("app=db:", "entry 1 \"app=db:\": weight \"\" must be an integer from 1 to 1000"),
            (":5", "entry 1 \":5\": empty selector"),
            (
                "app=db:10, app=cache:2",
                "entry 1 \"app=db:10, app=cache:2\": weight \"10, app=cache:2\" must end the entry; separate peers with \";\"",
            ),
            ("  ;  ", "no peer entries"),
        ];
        for (text, want) in table {
            assert_eq!(parse_peers(text).unwrap_err(), want, "{text:?}");
        }
    }

    #[test]
    fn annotation_errors_name_the_annotation() {
        let bad = map(&[(PEERS_ANNOTATION, "app=db; app in (a")]);
        assert_eq!(
            PeerSpec::from_annotations(&bad).unwrap_err(),
            "invalid annotation network.wasmsched.io/peers: entry 2 \"app in (a\": unclosed parenthesis"
        );
        let bad = map(&[
            (PEERS_ANNOTATION, "app=db"),
            (PEER_NAMESPACES_ANNOTATION, "prod, Bad"),
        ]);
        assert_eq!(
            PeerSpec::from_annotations(&bad).unwrap_err(),
            "invalid annotation network.wasmsched.io/peer-namespaces: namespace 2 \"Bad\" is not a valid namespace name"
        );
        let bad = map(&[(PEER_NAMESPACES_ANNOTATION, "a,*")]);
        assert_eq!(
            PeerSpec::from_annotations(&bad).unwrap_err(),
            "invalid annotation network.wasmsched.io/peer-namespaces: \"*\" must be the whole value"
        );
        let bad = map(&[(MAX_DISTANCE_ANNOTATION, "rack")]);
        assert_eq!(
            MaxDistance::from_annotations(&bad).unwrap_err(),
            "invalid annotation network.wasmsched.io/max-distance: \"rack\": must be node, zone or region"
        );
        assert_eq!(PeerSpec::from_annotations(&map(&[])).unwrap(), None);
        assert_eq!(MaxDistance::from_annotations(&map(&[])).unwrap(), None);
        assert_eq!(
            MaxDistance::from_annotations(&map(&[(MAX_DISTANCE_ANNOTATION, "zone")])).unwrap(),
            Some(MaxDistance::Zone)
        );
    }

    #[test]
    fn weight_for_takes_the_largest_matching_entry_in_scope() {
        let spec = PeerSpec::parse("app=db:10; tier=backend:3", Some("prod, shared")).unwrap();
        let db = map(&[("app", "db"), ("tier", "backend")]);
        let api = map(&[("app", "api"), ("tier", "backend")]);
        let web = map(&[("app", "web")]);
        assert_eq!(spec.weight_for("prod", "prod", &db), Some(10));
        assert_eq!(spec.weight_for("prod", "shared", &api), Some(3));
        assert_eq!(spec.weight_for("prod", "prod", &web), None);
        assert_eq!(spec.weight_for("prod", "other", &db), None);
        let own = PeerSpec::parse("app=db", None).unwrap();
        assert_eq!(own.weight_for("a", "a", &db), Some(1));
        assert_eq!(own.weight_for("a", "b", &db), None);
        let all = PeerSpec::parse("app=db", Some(" * ")).unwrap();
        assert_eq!(all.weight_for("a", "b", &db), Some(1));
    }
}
