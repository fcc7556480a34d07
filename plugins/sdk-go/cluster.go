package sdk

import "iter"

// NodeInfo is a node and the pods placed on it: what Filter, Score and the
// other per-node points see (kube-scheduler's NodeInfo). The SDK keeps one
// per node from the host's deltas, so the host passes only node indices on
// the hot path.
type NodeInfo struct {
	Node
	Index NodeIndex
	// Pods are the pods placed (bound or reserved) on the node.
	Pods      []*Pod
	requested map[string]int64
}

// Requested is the sum of the placed pods' requests of resource.
func (n *NodeInfo) Requested(resource string) int64 { return n.requested[resource] }

// Free is allocatable minus requested, never negative.
func (n *NodeInfo) Free(resource string) int64 {
	return max(n.AllocatableOf(resource)-n.Requested(resource), 0)
}

func (n *NodeInfo) add(pod *Pod) {
	for _, r := range pod.Requests {
		n.requested[r.Name] += r.Amount
	}
	n.Pods = append(n.Pods, pod)
}

func (n *NodeInfo) remove(uid string) {
	for i, p := range n.Pods {
		if p.UID == uid {
			for _, r := range p.Requests {
				n.requested[r.Name] -= r.Amount
			}
			last := len(n.Pods) - 1
			n.Pods[i] = n.Pods[last]
			n.Pods[last] = nil
			n.Pods = n.Pods[:last]
			return
		}
	}
}

// Cluster is every node the host told this instance about, by node index,
// with the pods placed on them.
type Cluster struct {
	nodes   []*NodeInfo
	podNode map[string]NodeIndex
}

// Node is the node at index, or nil when there is none.
func (c *Cluster) Node(index NodeIndex) *NodeInfo {
	if int(index) < len(c.nodes) {
		return c.nodes[index]
	}
	return nil
}

// Nodes yields every node, by index.
func (c *Cluster) Nodes() iter.Seq[*NodeInfo] {
	return func(yield func(*NodeInfo) bool) {
		for _, n := range c.nodes {
			if n != nil && !yield(n) {
				return
			}
		}
	}
}

// Pods yields every placed pod with its node.
func (c *Cluster) Pods() iter.Seq2[*NodeInfo, *Pod] {
	return func(yield func(*NodeInfo, *Pod) bool) {
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			for _, p := range n.Pods {
				if !yield(n, p) {
					return
				}
			}
		}
	}
}

// NodeOf is the node a pod (by uid) is placed on, or nil.
func (c *Cluster) NodeOf(podUID string) *NodeInfo {
	if i, ok := c.podNode[podUID]; ok {
		return c.Node(i)
	}
	return nil
}

// Apply applies one change.
func (c *Cluster) Apply(d Delta) {
	if c.podNode == nil {
		c.podNode = map[string]NodeIndex{}
	}
	switch d := d.(type) {
	case NodeSet:
		i := int(d.Index)
		if i >= len(c.nodes) {
			c.nodes = append(c.nodes, make([]*NodeInfo, i+1-len(c.nodes))...)
		}
		if n := c.nodes[i]; n != nil {
			n.Node = d.Node
		} else {
			c.nodes[i] = &NodeInfo{Node: d.Node, Index: d.Index, requested: map[string]int64{}}
		}
	case NodeRemove:
		if n := c.Node(d.Index); n != nil {
			for _, p := range n.Pods {
				delete(c.podNode, p.UID)
			}
			c.nodes[d.Index] = nil
		}
	case PodAdd:
		c.removePod(d.Pod.UID)
		if n := c.Node(d.Node); n != nil {
			pod := d.Pod
			n.add(&pod)
			c.podNode[pod.UID] = d.Node
		}
	case PodRemove:
		if n := c.Node(d.Node); n != nil {
			n.remove(d.PodUID)
		}
		delete(c.podNode, d.PodUID)
	}
}

func (c *Cluster) removePod(uid string) {
	if i, ok := c.podNode[uid]; ok {
		delete(c.podNode, uid)
		if n := c.Node(i); n != nil {
			n.remove(uid)
		}
	}
}
