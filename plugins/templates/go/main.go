// {{name}}: a wasmsched scheduling policy, made by `wasmsched plugin new`.
//
//   - Filter: a node labelled `example.com/avoid: "true"` takes no pods
//     (`node(s) marked example.com/avoid`, unresolvable).
//   - Score: a node labelled `example.com/preferred: "true"` scores 100, any
//     other 0.
//
// The SDK keeps the cluster the scheduler streams to the plugin, answers
// `contract-version`, and exports exactly the points Policy implements.
// Build, check and test: README.md.
package main

import (
	sdk "wasmsched.io/plugin-sdk-go"
)

const (
	AvoidLabel     = "example.com/avoid"
	PreferredLabel = "example.com/preferred"
	AvoidReason    = "node(s) marked example.com/avoid"
)

// Policy is the plugin; its methods are the extension points it takes
// part in (docs/writing-plugins.md lists them all).
type Policy struct{}

// State is what CycleStart computes once per pod (kube-scheduler's
// CycleState), handed to Filter and Score: nothing yet.
type State struct{}

// New parses the plugin's args (its `pluginConfig`): none yet.
func New(args string) (*Policy, error) {
	if err := sdk.NoArgs("{{name}}", args); err != nil {
		return nil, err
	}
	return &Policy{}, nil
}

func init() { sdk.Register(New) }

func (*Policy) CycleStart(_ *sdk.Pod, _ *sdk.Cluster) (State, error) {
	return State{}, nil
}

func (*Policy) Filter(_ State, _ *sdk.Pod, node *sdk.NodeInfo, _ *sdk.Cluster) *sdk.Rejection {
	if v, _ := node.Label(AvoidLabel); v == "true" {
		return sdk.RejectUnresolvable(AvoidReason)
	}
	return nil
}

func (*Policy) Score(_ State, _ *sdk.Pod, node *sdk.NodeInfo, _ *sdk.Cluster) (int64, error) {
	if v, _ := node.Label(PreferredLabel); v == "true" {
		return 100, nil
	}
	return 0, nil
}

func main() {}
