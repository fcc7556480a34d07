package sdk

// Read helpers on the contract's records.

// Well-known labels.
const (
	ZoneLabel         = "topology.kubernetes.io/zone"
	RegionLabel       = "topology.kubernetes.io/region"
	LegacyZoneLabel   = "failure-domain.beta.kubernetes.io/zone"
	LegacyRegionLabel = "failure-domain.beta.kubernetes.io/region"
	HostnameLabel     = "kubernetes.io/hostname"
)

func amount(list []ResourceAmount, name string) int64 {
	for i := range list {
		if list[i].Name == name {
			return list[i].Amount
		}
	}
	return 0
}

// Label returns the value of the pod's label key, and whether it is set.
func (p *Pod) Label(key string) (string, bool) { return p.Labels.Get(key) }

// Annotation returns the value of the pod's annotation key, and whether it
// is set.
func (p *Pod) Annotation(key string) (string, bool) { return p.Annotations.Get(key) }

// Request is the pod's effective request of resource (0 when absent).
func (p *Pod) Request(resource string) int64 { return amount(p.Requests, resource) }

// Limit is the pod's effective limit of resource (0 when absent).
func (p *Pod) Limit(resource string) int64 { return amount(p.Limits, resource) }

// Label returns the value of the node's label key, and whether it is set.
func (n *Node) Label(key string) (string, bool) { return n.Labels.Get(key) }

// Annotation returns the value of the node's annotation key, and whether
// it is set.
func (n *Node) Annotation(key string) (string, bool) { return n.Annotations.Get(key) }

// AllocatableOf is the node's allocatable amount of resource (0 when
// absent).
func (n *Node) AllocatableOf(resource string) int64 { return amount(n.Allocatable, resource) }

// Metric returns the node's live measurement name, and whether the host
// has it.
func (n *Node) Metric(name string) (float64, bool) {
	for i := range n.Metrics {
		if n.Metrics[i].Name == name {
			return n.Metrics[i].Value, true
		}
	}
	return 0, false
}

// Zone is the node's topology.kubernetes.io/zone label (or the legacy beta
// label).
func (n *Node) Zone() (string, bool) {
	if z, ok := n.Label(ZoneLabel); ok {
		return z, true
	}
	return n.Label(LegacyZoneLabel)
}

// Region is the node's topology.kubernetes.io/region label (or the legacy
// beta label).
func (n *Node) Region() (string, bool) {
	if r, ok := n.Label(RegionLabel); ok {
		return r, true
	}
	return n.Label(LegacyRegionLabel)
}

// Hostname is the node's kubernetes.io/hostname label, else its name.
func (n *Node) Hostname() string {
	if h, ok := n.Label(HostnameLabel); ok {
		return h
	}
	return n.Name
}
