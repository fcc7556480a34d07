// spot-affinity in Go (the SDK in plugins/sdk-go, standard Go's wasip1
// port): the same policy as examples/plugins/rust/src/lib.rs.
//
//   - A pod's class is its `wasmsched.io/workload-class` label: `batch` or
//     `latency-critical` (absent: unclassified; anything else is an error
//     that makes the pod unschedulable, naming the label).
//   - Filter: a node labelled `wasmsched.io/reserved-for: CLASS` takes only
//     pods of that class.
//   - Score: on spot capacity (`karpenter.sh/capacity-type: spot`), batch
//     pods score 100 and latency-critical pods 0; elsewhere the reverse.
//     Unclassified pods skip Score.
//
// Build: go run wasmsched.io/plugin-sdk-go/cmd/build-plugin -o spot-affinity-go.wasm .
package main

import (
	"errors"
	"strconv"

	sdk "wasmsched.io/plugin-sdk-go"
)

const (
	ClassLabel     = "wasmsched.io/workload-class"
	ReservedLabel  = "wasmsched.io/reserved-for"
	CapacityLabel  = "karpenter.sh/capacity-type"
	ReservedReason = "node(s) reserved for another workload class"
)

// Class is a pod's workload class; "" is unclassified.
type Class string

const (
	Batch           Class = "batch"
	LatencyCritical Class = "latency-critical"
)

// SpotAffinity keeps nothing of its own: the SDK keeps the nodes.
type SpotAffinity struct{}

// New takes no args: `{}` (or nothing) only.
func New(args string) (*SpotAffinity, error) {
	if err := sdk.NoArgs("spot-affinity", args); err != nil {
		return nil, err
	}
	sdk.Log(sdk.LogDebug, "spot-affinity (Go) ready")
	return &SpotAffinity{}, nil
}

func init() { sdk.Register(New) }

// CycleStart reads the pod's class, once per cycle (the cycle state).
func (*SpotAffinity) CycleStart(pod *sdk.Pod, _ *sdk.Cluster) (Class, error) {
	value, ok := pod.Label(ClassLabel)
	switch {
	case !ok:
		return "", nil
	case Class(value) == Batch || Class(value) == LatencyCritical:
		return Class(value), nil
	}
	return "", errors.New("invalid label " + ClassLabel + "=" + strconv.Quote(value) +
		": expected batch or latency-critical")
}

// Plan skips Score for unclassified pods.
func (*SpotAffinity) Plan(class Class, _ *sdk.Pod) sdk.CyclePlan {
	return sdk.CyclePlan{Filter: true, Score: class != ""}
}

// Filter keeps pods off nodes reserved for another class.
func (*SpotAffinity) Filter(class Class, _ *sdk.Pod, node *sdk.NodeInfo, _ *sdk.Cluster) *sdk.Rejection {
	if reserved, ok := node.Label(ReservedLabel); ok && (class == "" || reserved != string(class)) {
		return sdk.RejectUnresolvable(ReservedReason)
	}
	return nil
}

// Score prefers spot capacity for batch pods, the rest for latency-critical
// ones.
func (*SpotAffinity) Score(class Class, _ *sdk.Pod, node *sdk.NodeInfo, _ *sdk.Cluster) (int64, error) {
	capacity, _ := node.Label(CapacityLabel)
	spot := capacity == "spot"
	if (class == Batch && spot) || (class == LatencyCritical && !spot) {
		return 100, nil
	}
	return 0, nil
}

func main() {}
