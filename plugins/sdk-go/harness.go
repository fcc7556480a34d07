package sdk

// Harness drives a plugin natively, in unit tests (`go test`), through the
// same code the component's exported functions call, minus the canonical
// ABI: init, deltas, a cycle, then any extension point.
//
//	h, err := sdk.NewHarness(New, "{}")
//	h.Apply(sdk.NodeSet{Index: 0, Node: sdk.Node{Name: "spot-1", Labels: ...}})
//	plan, err := h.CycleStart(sdk.Pod{UID: "u", Labels: ...})
//	verdicts := h.Filter(0)
type Harness struct{ d dispatcher }

// NewHarness makes a plugin instance with newPlugin (what the plugin passes
// to Register) and initializes it with args.
func NewHarness[S any, P Plugin[S]](newPlugin func(args string) (P, error), args string) (*Harness, error) {
	h := &Harness{d: newInstance[S](newPlugin)}
	if err := h.d.init(args); err != nil {
		return nil, err
	}
	return h, nil
}

// Points are the extension points the plugin implements (and a component
// built from it exports).
func (h *Harness) Points() Point { return h.d.points() }

// Apply applies cluster changes (lifecycle.apply).
func (h *Harness) Apply(deltas ...Delta) { h.d.apply(deltas) }

// CycleStart starts the cycle of pod (lifecycle.cycle-start).
func (h *Harness) CycleStart(pod Pod) (CyclePlan, error) { return h.d.cycleStart(pod) }

// Filter filters the cycle's pod against nodes: nil where a node fits.
func (h *Harness) Filter(nodes ...NodeIndex) []*Rejection { return h.d.filter(nodes) }

// Score scores the cycle's pod on nodes.
func (h *Harness) Score(nodes ...NodeIndex) ([]int64, error) { return h.d.score(nodes) }

// NormalizeScore normalizes scores of nodes.
func (h *Harness) NormalizeScore(nodes []NodeIndex, scores []int64) ([]int64, error) {
	return h.d.normalizeScore(nodes, scores)
}

// PostFilter asks for preemption advice on candidates.
func (h *Harness) PostFilter(candidates ...Candidate) (PreemptionAdvice, error) {
	return h.d.postFilter(candidates)
}

// Reserve reserves the cycle's pod on node.
func (h *Harness) Reserve(node NodeIndex) error { return h.d.reserve(node) }

// Unreserve undoes the reservation of podUID on node.
func (h *Harness) Unreserve(podUID string, node NodeIndex) { h.d.unreserve(podUID, node) }

// Permit asks Permit about the cycle's pod on node.
func (h *Harness) Permit(node NodeIndex) PermitResult { return h.d.permit(node) }

// PreBind asks for the cycle's pod's PreBind patch on node.
func (h *Harness) PreBind(node NodeIndex) (PodPatch, error) { return h.d.preBind(node) }

// Interests are the plugin's key interests (every key without Interests).
func (h *Harness) Interests() KeyInterests { return h.d.interests() }

// DeletionCost asks for a pod's deletion cost.
func (h *Harness) DeletionCost(pod PodStatus, metrics ...Metric) (int32, bool, error) {
	return h.d.deletionCost(pod, metrics)
}
