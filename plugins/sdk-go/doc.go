// Package sdk writes wasmsched scheduling policies in standard Go (1.24 or
// newer, GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared): the contract's
// types (wit/plugin.wit), kube-scheduler-shaped extension points, and the
// canonical-ABI glue that exports them from a WebAssembly component.
//
// A plugin is a type with a CycleStart method (its PreFilter and PreScore)
// and any of the extension-point interfaces (FilterPlugin, ScorePlugin,
// NormalizeScorePlugin, PostFilterPlugin, ReservePlugin, PermitPlugin,
// PreBindPlugin, InterestsPlugin, DeletionCostPlugin), registered from
// package main:
//
//	type Prefer struct{}
//
//	func New(args string) (*Prefer, error) { return &Prefer{}, sdk.NoArgs("prefer", args) }
//	func init()                             { sdk.Register(New) }
//
//	func (*Prefer) CycleStart(pod *sdk.Pod, _ *sdk.Cluster) (struct{}, error) { return struct{}{}, nil }
//	func (*Prefer) Score(_ struct{}, _ *sdk.Pod, n *sdk.NodeInfo, _ *sdk.Cluster) (int64, error) {
//		if v, _ := n.Label("capacity"); v == "spot" {
//			return 100, nil
//		}
//		return 0, nil
//	}
//	func main() {}
//
// The SDK keeps the cluster the host streams to the instance (Cluster, a
// NodeInfo per node with its placed pods), the cycle's pod and the
// plugin's cycle state, so per-node calls see whole nodes while the host
// passes only node indices. Build a component in one step with
//
//	go run wasmsched.io/plugin-sdk-go/cmd/build-plugin -o prefer.wasm .
//
// which exports exactly the interfaces the plugin implements. Unit-test a
// plugin natively with NewHarness. docs/writing-plugins.md ("Go") has the
// details.
package sdk
