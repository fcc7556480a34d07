package sdk

import (
	"errors"
	"strconv"
	"strings"
)

// Plugin is what every policy implements: the start of a pod's scheduling
// cycle (kube-scheduler's PreFilter and PreScore in one call). S is the
// plugin's CycleState: what CycleStart precomputes from the pod, handed to
// every later point of the same cycle. An error makes the pod
// unschedulable on every node with that message (use it for bad pod
// labels or annotations).
//
// Implement any of the extension-point interfaces below beside it
// (FilterPlugin, ScorePlugin, ...): Register finds them, and the build
// (cmd/build-plugin) exports exactly those from the component.
type Plugin[S any] interface {
	CycleStart(pod *Pod, cluster *Cluster) (S, error)
}

// Planner says which extension points matter for the cycle's pod; without
// it both do. Return Filter false when Filter would pass every node and
// Score false when Score would not tell nodes apart: the host then does not
// call them for this pod (upstream's Skip).
type Planner[S any] interface {
	Plan(state S, pod *Pod) CyclePlan
}

// Observer sees each cluster change before the SDK applies it to the
// Cluster, so a plugin can keep an index of its own.
type Observer interface {
	Observe(delta Delta, cluster *Cluster)
}

// FilterPlugin is the Filter extension point: nil when pod fits node.
type FilterPlugin[S any] interface {
	Filter(state S, pod *Pod, node *NodeInfo, cluster *Cluster) *Rejection
}

// ScorePlugin is the Score extension point: the score of pod on a feasible
// node, in 0..=100 unless the plugin also implements NormalizeScorePlugin.
type ScorePlugin[S any] interface {
	Score(state S, pod *Pod, node *NodeInfo, cluster *Cluster) (int64, error)
}

// NormalizeScorePlugin maps the raw scores of all scored nodes (same order
// as nodes) to 0..=100, in place.
type NormalizeScorePlugin[S any] interface {
	NormalizeScore(state S, pod *Pod, nodes []NodeIndex, scores []int64) error
}

// PostFilterPlugin advises preemption for a pod that fits nowhere:
// candidates are the nodes where evicting their victims lets the pod fit,
// in the host's order.
type PostFilterPlugin[S any] interface {
	PostFilter(state S, pod *Pod, candidates []Candidate, cluster *Cluster) (PreemptionAdvice, error)
}

// ReservePlugin is Reserve and Unreserve. Reserve claims what the cycle's
// pod will use on node (an error fails the cycle; the pod is retried).
// Unreserve undoes the reservation of pod podUID on node (nil when the node
// is gone), possibly long after its cycle.
type ReservePlugin[S any] interface {
	Reserve(state S, pod *Pod, node *NodeInfo, cluster *Cluster) error
	Unreserve(podUID string, node *NodeInfo, cluster *Cluster)
}

// PermitPlugin is Permit, after Reserve: allow, wait or reject the cycle's
// pod, and name the waiting pods this plugin now allows.
type PermitPlugin[S any] interface {
	Permit(state S, pod *Pod, node *NodeInfo, cluster *Cluster) PermitResult
}

// PreBindPlugin returns labels and annotations to write on the cycle's pod
// before it is bound (called right after Reserve, in the same cycle).
type PreBindPlugin[S any] interface {
	PreBind(state S, pod *Pod, node *NodeInfo, cluster *Cluster) (PodPatch, error)
}

// InterestsPlugin says which label and annotation keys the plugin reads;
// the host then sends only those. Called once per instance, after init.
type InterestsPlugin interface {
	Interests() KeyInterests
}

// DeletionCostPlugin is the pod-deletion-cost point: the cost for pod given
// its metrics, or ok false for no opinion.
type DeletionCostPlugin interface {
	DeletionCost(pod *PodStatus, metrics []Metric) (cost int32, ok bool, err error)
}

// Point is one of the contract's optional exported interfaces.
type Point uint16

const (
	PointFilter Point = 1 << iota
	PointScore
	PointNormalizeScore
	PointPostFilter
	PointReserve
	PointPermit
	PointPreBind
	PointInterests
	PointDeletionCost
)

// pointNames are the WIT interface names, in the order the contract's
// `plugin` world exports them.
var pointNames = []struct {
	point Point
	name  string
}{
	{PointInterests, "interests"},
	{PointFilter, "filter"},
	{PointScore, "score"},
	{PointNormalizeScore, "normalize-score"},
	{PointPostFilter, "post-filter"},
	{PointReserve, "reserve"},
	{PointPermit, "permit"},
	{PointPreBind, "pre-bind"},
	{PointDeletionCost, "deletion-cost"},
}

// Names lists the points' WIT interface names.
func (p Point) Names() []string {
	var out []string
	for _, n := range pointNames {
		if p&n.point != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

func (p Point) String() string {
	if p == 0 {
		return "none"
	}
	return strings.Join(p.Names(), ", ")
}

// Register makes newPlugin the component's plugin; call it once, from an
// init function of package main. newPlugin receives the plugin's
// `pluginConfig` args as JSON text (`{}` when none are given; package args
// reads them, NoArgs refuses any) and its error refuses the plugin at start, with the message.
//
// The extension points are those the plugin type P implements; the
// component must export exactly those, which cmd/build-plugin arranges.
func Register[S any, P Plugin[S]](newPlugin func(args string) (P, error)) {
	if registered != nil {
		panic("wasmsched sdk: Register called twice")
	}
	inst := newInstance[S](newPlugin)
	registered = inst
	registeredHook(inst.implements)
}

func newInstance[S any, P Plugin[S]](newPlugin func(args string) (P, error)) *instance[S] {
	return &instance[S]{
		newPlugin:  func(args string) (Plugin[S], error) { return newPlugin(args) },
		implements: implemented[S](*new(P)),
	}
}

// implemented finds which points a plugin type implements, from a zero
// value of it.
func implemented[S any](p any) Point {
	var points Point
	{
		if _, ok := p.(FilterPlugin[S]); ok {
			points |= PointFilter
		}
		if _, ok := p.(ScorePlugin[S]); ok {
			points |= PointScore
		}
		if _, ok := p.(NormalizeScorePlugin[S]); ok {
			points |= PointNormalizeScore
		}
		if _, ok := p.(PostFilterPlugin[S]); ok {
			points |= PointPostFilter
		}
		if _, ok := p.(ReservePlugin[S]); ok {
			points |= PointReserve
		}
		if _, ok := p.(PermitPlugin[S]); ok {
			points |= PointPermit
		}
		if _, ok := p.(PreBindPlugin[S]); ok {
			points |= PointPreBind
		}
		if _, ok := p.(InterestsPlugin); ok {
			points |= PointInterests
		}
		if _, ok := p.(DeletionCostPlugin); ok {
			points |= PointDeletionCost
		}
	}
	return points
}

// dispatcher is the registered plugin behind the exported functions, with
// its type parameter erased.
type dispatcher interface {
	points() Point
	init(args string) error
	apply(deltas []Delta)
	cycleStart(pod Pod) (CyclePlan, error)
	filter(nodes []NodeIndex) []*Rejection
	score(nodes []NodeIndex) ([]int64, error)
	normalizeScore(nodes []NodeIndex, scores []int64) ([]int64, error)
	postFilter(candidates []Candidate) (PreemptionAdvice, error)
	reserve(node NodeIndex) error
	unreserve(podUID string, node NodeIndex)
	permit(node NodeIndex) PermitResult
	preBind(node NodeIndex) (PodPatch, error)
	interests() KeyInterests
	deletionCost(pod PodStatus, metrics []Metric) (int32, bool, error)
}

// registered is the plugin of this component (Register sets it).
var registered dispatcher

var (
	errNotInit  = errors.New("plugin called before init")
	errNoCycle  = errors.New("no cycle started")
	errNoPlugin = errors.New("no plugin registered: call sdk.Register from an init function of package main")
)

// instance is one plugin instance's state: the plugin, the resident
// cluster and the current cycle. A component instance is single-threaded,
// so no locks.
type instance[S any] struct {
	newPlugin  func(args string) (Plugin[S], error)
	implements Point

	plugin  Plugin[S]
	cluster Cluster
	inCycle bool
	pod     Pod
	state   S
}

func (in *instance[S]) points() Point { return in.implements }

func (in *instance[S]) init(args string) error {
	if err := exportsMismatch(in); err != nil {
		return err
	}
	p, err := in.newPlugin(args)
	if err != nil {
		return err
	}
	var zero S
	in.plugin, in.cluster, in.inCycle, in.pod, in.state = p, Cluster{}, false, Pod{}, zero
	return nil
}

func (in *instance[S]) apply(deltas []Delta) {
	obs, _ := in.plugin.(Observer)
	for _, d := range deltas {
		if obs != nil {
			obs.Observe(d, &in.cluster)
		}
		in.cluster.Apply(d)
	}
}

func (in *instance[S]) cycleStart(pod Pod) (CyclePlan, error) {
	if in.plugin == nil {
		return CyclePlan{}, errNotInit
	}
	state, err := in.plugin.CycleStart(&pod, &in.cluster)
	if err != nil {
		return CyclePlan{}, err
	}
	plan := CyclePlan{Filter: true, Score: true}
	if p, ok := in.plugin.(Planner[S]); ok {
		plan = p.Plan(state, &pod)
	}
	in.inCycle, in.pod, in.state = true, pod, state
	return plan, nil
}

func (in *instance[S]) ready() error {
	if in.plugin == nil {
		return errNotInit
	}
	if !in.inCycle {
		return errNoCycle
	}
	return nil
}

func unknownNode(i NodeIndex) error {
	return errors.New("node index " + strconv.FormatUint(uint64(i), 10) + " unknown to plugin")
}

func (in *instance[S]) filter(nodes []NodeIndex) []*Rejection {
	out := make([]*Rejection, len(nodes))
	if err := in.ready(); err != nil {
		for i := range out {
			out[i] = Reject(err.Error())
		}
		return out
	}
	f := in.plugin.(FilterPlugin[S])
	for i, idx := range nodes {
		node := in.cluster.Node(idx)
		if node == nil {
			out[i] = RejectUnresolvable("node unknown to plugin")
			continue
		}
		out[i] = f.Filter(in.state, &in.pod, node, &in.cluster)
	}
	return out
}

func (in *instance[S]) score(nodes []NodeIndex) ([]int64, error) {
	if err := in.ready(); err != nil {
		return nil, err
	}
	s := in.plugin.(ScorePlugin[S])
	out := make([]int64, len(nodes))
	for i, idx := range nodes {
		node := in.cluster.Node(idx)
		if node == nil {
			return nil, unknownNode(idx)
		}
		v, err := s.Score(in.state, &in.pod, node, &in.cluster)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (in *instance[S]) normalizeScore(nodes []NodeIndex, scores []int64) ([]int64, error) {
	if len(nodes) != len(scores) {
		return nil, errors.New(strconv.Itoa(len(nodes)) + " nodes but " + strconv.Itoa(len(scores)) + " scores")
	}
	if err := in.ready(); err != nil {
		return nil, err
	}
	if err := in.plugin.(NormalizeScorePlugin[S]).NormalizeScore(in.state, &in.pod, nodes, scores); err != nil {
		return nil, err
	}
	return scores, nil
}

func (in *instance[S]) postFilter(candidates []Candidate) (PreemptionAdvice, error) {
	if err := in.ready(); err != nil {
		return PreemptionAdvice{}, err
	}
	return in.plugin.(PostFilterPlugin[S]).PostFilter(in.state, &in.pod, candidates, &in.cluster)
}

func (in *instance[S]) cycleNode(idx NodeIndex) (*NodeInfo, error) {
	if err := in.ready(); err != nil {
		return nil, err
	}
	node := in.cluster.Node(idx)
	if node == nil {
		return nil, unknownNode(idx)
	}
	return node, nil
}

func (in *instance[S]) reserve(idx NodeIndex) error {
	node, err := in.cycleNode(idx)
	if err != nil {
		return err
	}
	return in.plugin.(ReservePlugin[S]).Reserve(in.state, &in.pod, node, &in.cluster)
}

func (in *instance[S]) unreserve(podUID string, idx NodeIndex) {
	if in.plugin == nil {
		return
	}
	in.plugin.(ReservePlugin[S]).Unreserve(podUID, in.cluster.Node(idx), &in.cluster)
}

func (in *instance[S]) permit(idx NodeIndex) PermitResult {
	node, err := in.cycleNode(idx)
	if err != nil {
		return PermitResult{Decision: PermitReject(err.Error())}
	}
	return in.plugin.(PermitPlugin[S]).Permit(in.state, &in.pod, node, &in.cluster)
}

func (in *instance[S]) preBind(idx NodeIndex) (PodPatch, error) {
	node, err := in.cycleNode(idx)
	if err != nil {
		return PodPatch{}, err
	}
	return in.plugin.(PreBindPlugin[S]).PreBind(in.state, &in.pod, node, &in.cluster)
}

func (in *instance[S]) interests() KeyInterests {
	if p, ok := in.plugin.(InterestsPlugin); ok {
		return p.Interests()
	}
	return KeyInterests{PodLabels: AllKeys{}, PodAnnotations: AllKeys{}, NodeLabels: AllKeys{}, NodeAnnotations: AllKeys{}}
}

func (in *instance[S]) deletionCost(pod PodStatus, metrics []Metric) (int32, bool, error) {
	if in.plugin == nil {
		return 0, false, errNotInit
	}
	return in.plugin.(DeletionCostPlugin).DeletionCost(&pod, metrics)
}

// exportsMismatch is the error when the component's exports (the build's
// tags) differ from the points the plugin type implements.
func exportsMismatch(d dispatcher) error {
	built, ok := builtExports()
	if !ok || built == d.points() {
		return nil
	}
	return errors.New("the component exports [" + built.String() + "] but the plugin implements [" +
		d.points().String() + "]: build it with `go run wasmsched.io/plugin-sdk-go/cmd/build-plugin`")
}

// NoArgs accepts the args of a plugin that takes none: empty text or an
// empty JSON object. Its error reads `NAME args: expected {} (this policy
// takes no args)`.
func NoArgs(plugin, text string) error {
	compact := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, text)
	if compact == "" || compact == "{}" {
		return nil
	}
	return errors.New(plugin + " args: expected {} (this policy takes no args)")
}
