//! NodePorts: a pod's host ports must be free on the node.
//!
//! Conflicts follow upstream `HostPortInfo.CheckConflict`: ports collide on
//! the same protocol and port number when either side binds `0.0.0.0` (all
//! addresses) or both bind the same address.

use std::sync::Arc;

use crate::framework::{CycleContext, CycleState, FilterPlugin, NodeInfo, Plugin, Rejection};
use crate::model::pod::HostPort;

pub const NAME: &str = "NodePorts";

/// Upstream `ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// The address meaning "every address of the node".
const BIND_ALL: &str = "0.0.0.0";

#[derive(Debug, Clone, Copy, Default)]
pub struct NodePorts;

/// Upstream `sanitize`: empty address means all addresses, empty protocol TCP.
fn normalized(p: &HostPort) -> (&str, &str) {
    let ip = if p.ip.is_empty() {
        BIND_ALL
    } else {
        p.ip.as_str()
    };
    let proto = if p.protocol.is_empty() {
        "TCP"
    } else {
        p.protocol.as_str()
    };
    (ip, proto)
}

/// Whether `want` collides with any of `used`.
pub fn conflicts(used: &[HostPort], want: &HostPort) -> bool {
    if want.port <= 0 {
        return false;
    }
    let (ip, proto) = normalized(want);
    used.iter().any(|u| {
        let (uip, uproto) = normalized(u);
        u.port == want.port && uproto == proto && (ip == BIND_ALL || uip == BIND_ALL || uip == ip)
    })
}

impl Plugin for NodePorts {
    fn name(&self) -> &str {
        NAME
    }
}

impl FilterPlugin for NodePorts {
    fn filter(
        &self,
        ctx: &CycleContext,
        _state: &CycleState,
        node: &NodeInfo,
    ) -> Result<(), Rejection> {
        if ctx
            .pod
            .host_ports
            .iter()
            .any(|p| conflicts(&node.used_ports, p))
        {
            // Preempting the pod holding the port frees it.
            Err(Rejection::new(ERR_REASON))
        } else {
            Ok(())
        }
    }
}

/// The registry's factory.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &crate::framework::handle::Handle,
) -> Result<crate::framework::PluginBundle, String> {
    super::helpers::no_args(NAME, args)?;
    let p = Arc::new(NodePorts);
    Ok(crate::framework::PluginBundle::new(p.clone()).with_filter(&p))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::framework::plugins::testutil::*;

    /// Whether a pod asking for `want` fits next to a pod holding `used`.
    fn fits(used: Value, want: Value) -> bool {
        let snap = cluster(
            vec![N::new("n1").build()],
            vec![("n1", P::new("existing").ports(used).build())],
        );
        let pod = P::new("p").ports(want).build();
        match filter_all(&NodePorts, &pod, &snap)
            .remove("n1")
            .expect("n1")
        {
            Ok(()) => true,
            Err(r) => {
                assert_eq!(r, Rejection::new(ERR_REASON));
                false
            }
        }
    }

    fn port(ip: &str, proto: &str, port: i32) -> Value {
        json!([{"containerPort": 80, "hostIP": ip, "protocol": proto, "hostPort": port}])
    }

    #[test]
    fn pod_without_host_ports_always_fits() {
        assert!(fits(
            port("127.0.0.1", "TCP", 8080),
            json!([{"containerPort": 8080}])
        ));
    }

    #[test]
    fn same_ip_protocol_and_port_conflict() {
        assert!(!fits(
            port("127.0.0.1", "UDP", 8080),
            port("127.0.0.1", "UDP", 8080)
        ));
    }

    #[test]
    fn other_port_or_protocol_or_ip_does_not_conflict() {
        assert!(fits(
            port("127.0.0.1", "UDP", 8080),
            port("127.0.0.1", "UDP", 9090)
        ));
        assert!(fits(
            port("127.0.0.1", "UDP", 8080),
            port("127.0.0.1", "TCP", 8080)
        ));
        assert!(fits(
            port("127.0.0.1", "TCP", 8080),
            port("127.0.0.2", "TCP", 8080)
        ));
    }

    #[test]
    fn wildcard_address_conflicts_with_any_address() {
        // Existing binds all addresses, new pod binds one.
        assert!(!fits(
            port("0.0.0.0", "TCP", 8001),
            port("127.0.0.1", "TCP", 8001)
        ));
        // Existing binds one address, new pod binds all.
        assert!(!fits(
            port("10.0.10.10", "TCP", 8001),
            port("0.0.0.0", "TCP", 8001)
        ));
        // Wildcard on both sides.
        assert!(!fits(
            port("0.0.0.0", "TCP", 8001),
            port("0.0.0.0", "TCP", 8001)
        ));
        // ...but still only for the same protocol.
        assert!(fits(
            port("0.0.0.0", "UDP", 8001),
            port("127.0.0.1", "TCP", 8001)
        ));
    }

    #[test]
    fn absent_host_ip_and_protocol_mean_all_addresses_and_tcp() {
        let implicit = json!([{"containerPort": 80, "hostPort": 8001}]);
        assert!(!fits(port("10.0.0.1", "TCP", 8001), implicit.clone()));
        assert!(fits(port("10.0.0.1", "UDP", 8001), implicit));
    }

    #[test]
    fn conflicts_sanitizes_empty_fields() {
        let used = vec![HostPort {
            ip: String::new(),
            protocol: String::new(),
            port: 53,
        }];
        let want = HostPort {
            ip: "1.2.3.4".into(),
            protocol: "TCP".into(),
            port: 53,
        };
        assert!(conflicts(&used, &want));
        let zero = HostPort {
            ip: "1.2.3.4".into(),
            protocol: "TCP".into(),
            port: 0,
        };
        assert!(!conflicts(&used, &zero));
    }
}
