// gpu-origin: the "origin" policy of the built-in GpuTopology
// (plugins/gpu-topology, docs/gpu-topology.md) ported to Go with the SDK in
// plugins/sdk-go. It places pods as GpuTopology does with args
// `{policy: origin}` on clusters that use only what is ported
// (host/tests/go_sdk.rs compares the two on examples/gpu-cluster and
// examples/gpu-fragmentation):
//
//   - node GPUs from the labels gpu.nvidia.com/{count,model,memory}, else
//     GPU Feature Discovery's nvidia.com/gpu.{count,product,memory};
//     capacity capped by allocatable nvidia.com/gpu; utilization from the
//     annotation gpu.nvidia.com/utilization (fraction or percent), else the
//     DCGM_FI_DEV_GPU_UTIL metric, else unknownUtilization;
//   - pod demand: whole GPUs (the larger of the nvidia.com/gpu request and
//     limit), the annotations gpu.nvidia.com/model (model matching by
//     dash-separated tokens, case-insensitive) and gpu.nvidia.com/memory
//     (MiB per GPU), gpu.nvidia.com/policy (origin only);
//   - Filter, in GpuTopology's order and with its reasons: labels valid,
//     `Not enough GPUs`, `GPU model mismatch`, `Not enough GPU memory`,
//     utilization annotation valid, `Not enough free GPUs`;
//   - Score: `fit = clamp(100 - 10*|free - k|, 0, 100)`, `util = 100 - U`,
//     `(fit*fitWeight + util*utilizationWeight) / (fitWeight +
//     utilizationWeight)`; pods that use no GPU prefer nodes without GPUs
//     (cpuPodsAvoidGpuNodes: 100, else 50*(C-F)/C on a GPU node).
//
// Not ported (GpuTopology does them; docs/writing-plugins.md, "Go"): the
// binpack and spread policies, NVLink topology (gpu.nvidia.com/topology is
// not read, so no topology penalty), fractional sharing by memory (a pod
// with gpu.nvidia.com/memory and no nvidia.com/gpu uses no GPU here, as
// with `fractional: false`), gpu.nvidia.com/assigned-gpus on placed pods,
// modelAliases and modelMatching, HAMi nodes, and preemption advice.
//
// Build: go run wasmsched.io/plugin-sdk-go/cmd/build-plugin -o gpu-origin-go.wasm .
package main

import (
	"errors"
	"math"
	"strconv"
	"strings"

	sdk "wasmsched.io/plugin-sdk-go"
	"wasmsched.io/plugin-sdk-go/args"
)

const (
	GPUResource        = "nvidia.com/gpu"
	LabelCount         = "gpu.nvidia.com/count"
	LabelModel         = "gpu.nvidia.com/model"
	LabelMemory        = "gpu.nvidia.com/memory"
	GFDCount           = "nvidia.com/gpu.count"
	GFDProduct         = "nvidia.com/gpu.product"
	GFDMemory          = "nvidia.com/gpu.memory"
	AnnModel           = "gpu.nvidia.com/model"
	AnnMemory          = "gpu.nvidia.com/memory"
	AnnPolicy          = "gpu.nvidia.com/policy"
	AnnUtilization     = "gpu.nvidia.com/utilization"
	MetricUtilization  = "DCGM_FI_DEV_GPU_UTIL"
	MaxGPUs            = 256
	NotEnoughGPUs      = "Not enough GPUs"
	NotEnoughFreeGPUs  = "Not enough free GPUs"
	ModelMismatch      = "GPU model mismatch"
	NotEnoughGPUMemory = "Not enough GPU memory"
)

// Config is the validated args.
type Config struct {
	FitWeight, UtilizationWeight int64
	UnknownUtilizationPct        int64
	CPUPodsAvoidGPUNodes         bool
}

// GpuOrigin is the policy: its config and what it read of each node.
type GpuOrigin struct {
	cfg   Config
	facts []*nodeFacts // by node index, kept by Observe
	// Nodes whose unknown utilization has been logged.
	unknownLogged map[string]bool
}

// New parses the args: the subset of GpuTopology's that the port has.
func New(text string) (*GpuOrigin, error) {
	var a struct {
		Policy               *string  `json:"policy"`
		FitWeight            *uint32  `json:"fitWeight"`
		UtilizationWeight    *uint32  `json:"utilizationWeight"`
		UnknownUtilization   *float64 `json:"unknownUtilization"`
		CPUPodsAvoidGPUNodes *bool    `json:"cpuPodsAvoidGpuNodes"`
	}
	if err := args.Parse("gpu-origin", text, &a); err != nil {
		return nil, err
	}
	field := func(name, msg string) error { return errors.New("gpu-origin args: field " + name + ": " + msg) }
	cfg := Config{FitWeight: 7, UtilizationWeight: 3, UnknownUtilizationPct: 50, CPUPodsAvoidGPUNodes: true}
	if a.Policy != nil && *a.Policy != "origin" {
		return nil, field("policy", "only origin is ported to Go, got "+strconv.Quote(*a.Policy))
	}
	for _, w := range []struct {
		name string
		v    *uint32
		slot *int64
	}{{"fitWeight", a.FitWeight, &cfg.FitWeight}, {"utilizationWeight", a.UtilizationWeight, &cfg.UtilizationWeight}} {
		if w.v == nil {
			continue
		}
		if *w.v > 1000 {
			return nil, field(w.name, "must be at most 1000, got "+strconv.FormatUint(uint64(*w.v), 10))
		}
		*w.slot = int64(*w.v)
	}
	if cfg.FitWeight+cfg.UtilizationWeight == 0 {
		return nil, field("fitWeight", "fitWeight and utilizationWeight cannot both be 0")
	}
	if u := a.UnknownUtilization; u != nil {
		if !(*u >= 0 && *u <= 1) {
			return nil, field("unknownUtilization", "must be a fraction in 0..=1, got "+strconv.FormatFloat(*u, 'g', -1, 64))
		}
		cfg.UnknownUtilizationPct = int64(math.Round(*u * 100))
	}
	if a.CPUPodsAvoidGPUNodes != nil {
		cfg.CPUPodsAvoidGPUNodes = *a.CPUPodsAvoidGPUNodes
	}
	sdk.Log(sdk.LogDebug, "config: policy origin, fitWeight "+strconv.FormatInt(cfg.FitWeight, 10)+
		", utilizationWeight "+strconv.FormatInt(cfg.UtilizationWeight, 10)+
		", unknownUtilization "+strconv.FormatInt(cfg.UnknownUtilizationPct, 10)+
		"%, cpuPodsAvoidGpuNodes "+strconv.FormatBool(cfg.CPUPodsAvoidGPUNodes))
	return &GpuOrigin{cfg: cfg, unknownLogged: map[string]bool{}}, nil
}

func init() { sdk.Register(New) }

// Demand is what a pod asks of GPUs (the cycle state); Uses false for a
// pod that uses no GPU.
type Demand struct {
	Uses      bool
	Whole     uint32
	MemoryMiB uint64
	Model     string // "" when the pod names none
}

func badAnnotation(name, value, why string) error {
	return errors.New("invalid annotation " + name + "=" + strconv.Quote(value) + ": " + why)
}

// parseUint reads a non-negative decimal integer without sign, spaces or
// units.
func parseUint(v string) (uint64, bool) {
	if v == "" {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// CycleStart parses the pod's demand; a malformed annotation or a negative
// nvidia.com/gpu is an error naming it.
func (g *GpuOrigin) CycleStart(pod *sdk.Pod, _ *sdk.Cluster) (Demand, error) {
	req, lim := pod.Request(GPUResource), pod.Limit(GPUResource)
	if req < 0 || lim < 0 {
		return Demand{}, errors.New("invalid " + GPUResource + " amount " + strconv.FormatInt(min(req, lim), 10) +
			": not a non-negative count")
	}
	d := Demand{Whole: uint32(min(max(req, lim), math.MaxUint32))}
	if v, ok := pod.Annotation(AnnMemory); ok {
		m, ok := parseUint(v)
		if !ok {
			return Demand{}, badAnnotation(AnnMemory, v, "not a non-negative integer (MiB)")
		}
		d.MemoryMiB = m
	}
	if v, ok := pod.Annotation(AnnModel); ok {
		if !hasAlnum(v) {
			return Demand{}, badAnnotation(AnnModel, v, "not a GPU model name")
		}
		d.Model = v
	}
	if v, ok := pod.Annotation(AnnPolicy); ok {
		switch v {
		case "origin":
		case "binpack", "spread":
			return Demand{}, badAnnotation(AnnPolicy, v, "only origin is ported to Go")
		default:
			return Demand{}, badAnnotation(AnnPolicy, v, "expected binpack, spread or origin")
		}
	}
	d.Uses = d.Whole > 0
	return d, nil
}

// Plan: a pod that uses no GPU passes every Filter; its Score matters only
// when CPU pods are steered away from GPU nodes.
func (g *GpuOrigin) Plan(d Demand, _ *sdk.Pod) sdk.CyclePlan {
	return sdk.CyclePlan{Filter: d.Uses, Score: d.Uses || g.cfg.CPUPodsAvoidGPUNodes}
}

// Interests: the host sends only the keys the policy reads.
func (g *GpuOrigin) Interests() sdk.KeyInterests {
	return sdk.KeyInterests{
		PodLabels:       sdk.NoKeys{},
		PodAnnotations:  sdk.Keys{AnnModel, AnnMemory, AnnPolicy},
		NodeLabels:      sdk.Keys{LabelCount, LabelModel, LabelMemory, GFDCount, GFDProduct, GFDMemory},
		NodeAnnotations: sdk.Keys{AnnUtilization},
	}
}

// nodeFacts is what a node's labels and annotations say, read once per
// node change.
type nodeFacts struct {
	labelsErr   *sdk.Rejection // malformed GPU labels
	capacity    uint32
	model       string // "" when none
	memoryMiB   uint64
	hasMemory   bool
	utilErr     *sdk.Rejection // malformed utilization annotation
	utilization int64          // percent, -1 when unknown
}

// Observe keeps each node's facts, parsed when the node changes.
func (g *GpuOrigin) Observe(delta sdk.Delta, _ *sdk.Cluster) {
	switch d := delta.(type) {
	case sdk.NodeSet:
		for int(d.Index) >= len(g.facts) {
			g.facts = append(g.facts, nil)
		}
		g.facts[d.Index] = readNode(&d.Node)
	case sdk.NodeRemove:
		if int(d.Index) < len(g.facts) {
			g.facts[d.Index] = nil
		}
	}
}

func (g *GpuOrigin) factsOf(n *sdk.NodeInfo) *nodeFacts {
	if int(n.Index) < len(g.facts) && g.facts[n.Index] != nil {
		return g.facts[n.Index]
	}
	return readNode(&n.Node)
}

// firstLabel is the first of two labels the node carries.
func firstLabel(n *sdk.Node, a, b string) (name, value string, ok bool) {
	if v, ok := n.Label(a); ok {
		return a, v, true
	}
	if v, ok := n.Label(b); ok {
		return b, v, true
	}
	return "", "", false
}

func readNode(n *sdk.Node) *nodeFacts {
	f := &nodeFacts{utilization: -1}
	bad := func(label string) *nodeFacts {
		f.labelsErr = sdk.RejectUnresolvable("invalid node label " + label)
		return f
	}
	count, hasCount := uint64(0), false
	if name, v, ok := firstLabel(n, LabelCount, GFDCount); ok {
		c, ok := parseUint(v)
		if !ok || c > MaxGPUs {
			return bad(name)
		}
		count, hasCount = c, true
	}
	alloc, hasAlloc := int64(0), false
	for _, r := range n.Allocatable {
		if r.Name == GPUResource {
			alloc, hasAlloc = max(r.Amount, 0), true
			break
		}
	}
	switch {
	case hasCount && hasAlloc:
		f.capacity = uint32(min(count, uint64(min(alloc, MaxGPUs))))
	case hasCount:
		f.capacity = uint32(count)
	case hasAlloc && alloc > MaxGPUs:
		f.labelsErr = sdk.RejectUnresolvable("unsupported node allocatable " + GPUResource)
		return f
	case hasAlloc:
		f.capacity = uint32(alloc)
	}
	if name, v, ok := firstLabel(n, LabelModel, GFDProduct); ok {
		if strings.TrimSpace(v) == "" {
			return bad(name)
		}
		f.model = v
	}
	if name, v, ok := firstLabel(n, LabelMemory, GFDMemory); ok {
		m, ok := parseUint(v)
		if !ok {
			return bad(name)
		}
		f.memoryMiB, f.hasMemory = m, true
	}
	if v, ok := n.Annotation(AnnUtilization); ok {
		p, ok := parseUtilization(v)
		if !ok {
			f.utilErr = sdk.RejectUnresolvable("invalid node annotation " + AnnUtilization)
		}
		f.utilization = p
	} else if m, ok := n.Metric(MetricUtilization); ok && !math.IsInf(m, 0) && !math.IsNaN(m) {
		f.utilization = int64(math.Round(min(max(m, 0), 100)))
	}
	return f
}

// parseUtilization reads a fraction 0..=1 (`0.35`) or a percent
// 0%..=100% (`35%`), rounded to a whole percent.
func parseUtilization(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	number, limit, scale := v, 1.0, 100.0
	if p, ok := strings.CutSuffix(v, "%"); ok {
		number, limit, scale = strings.TrimSpace(p), 100, 1
	}
	x, err := strconv.ParseFloat(number, 64)
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) || x < 0 || x > limit {
		return 0, false
	}
	return min(int64(math.Round(x*scale)), 100), true
}

func hasAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			return true
		}
	}
	return false
}

// asciiEqualFold compares ASCII letters case-insensitively (as Rust's
// eq_ignore_ascii_case, which GpuTopology uses).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// ModelMatches: case-insensitive equality, or every dash-separated token of
// the pod's model is a token of the node's (`A100` matches
// `NVIDIA-A100-SXM4-40GB`, `A10` does not).
func ModelMatches(wanted, nodeModel string) bool {
	if asciiEqualFold(wanted, nodeModel) {
		return true
	}
	any := false
	for _, t := range strings.Split(wanted, "-") {
		if t == "" {
			continue
		}
		any = true
		found := false
		for _, n := range strings.Split(nodeModel, "-") {
			if asciiEqualFold(n, t) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return any
}

// free is the node's whole GPUs that no placed pod holds: each placed pod
// takes the larger of its nvidia.com/gpu request and limit, and never
// more than capacity minus the placed pods' requests are free.
func free(n *sdk.NodeInfo, capacity uint32) uint32 {
	c := int64(capacity)
	held := int64(0)
	for _, p := range n.Pods {
		held += min(max(p.Request(GPUResource), p.Limit(GPUResource), 0), math.MaxUint32)
	}
	byRequests := c - n.Requested(GPUResource)
	if held == 0 {
		return uint32(min(max(byRequests, 0), c))
	}
	return uint32(max(min(max(c-held, 0), byRequests), 0))
}

// placement is where a pod fits: free GPUs before it, and the utilization.
type placement struct {
	capacity, free uint32
	utilization    int64 // percent; -1 when unknown
}

// place runs Filter's checks, in GpuTopology's order.
func (g *GpuOrigin) place(d Demand, n *sdk.NodeInfo) (placement, *sdk.Rejection) {
	f := g.factsOf(n)
	if f.labelsErr != nil {
		return placement{}, f.labelsErr
	}
	if f.capacity < max(d.Whole, 1) {
		return placement{}, sdk.RejectUnresolvable(NotEnoughGPUs)
	}
	if d.Model != "" && (f.model == "" || !ModelMatches(d.Model, f.model)) {
		return placement{}, sdk.RejectUnresolvable(ModelMismatch)
	}
	if d.MemoryMiB > 0 && (!f.hasMemory || d.MemoryMiB > f.memoryMiB) {
		return placement{}, sdk.RejectUnresolvable(NotEnoughGPUMemory)
	}
	if f.utilErr != nil {
		return placement{}, f.utilErr
	}
	fr := free(n, f.capacity)
	if fr < d.Whole {
		return placement{}, sdk.Reject(NotEnoughFreeGPUs)
	}
	return placement{capacity: f.capacity, free: fr, utilization: f.utilization}, nil
}

// Filter: enough free GPUs of the model and memory asked for.
func (g *GpuOrigin) Filter(d Demand, _ *sdk.Pod, n *sdk.NodeInfo, _ *sdk.Cluster) *sdk.Rejection {
	if !d.Uses {
		return nil
	}
	_, r := g.place(d, n)
	return r
}

// Score: the origin formula mixed with utilization; for pods that use no
// GPU, nodes without GPUs first.
func (g *GpuOrigin) Score(d Demand, _ *sdk.Pod, n *sdk.NodeInfo, _ *sdk.Cluster) (int64, error) {
	if !d.Uses {
		return g.cpuPodScore(n), nil
	}
	p, r := g.place(d, n)
	if r != nil {
		return 0, nil // Filter rejected it; never scored by the host
	}
	u := p.utilization
	if u < 0 {
		g.noteUnknownUtilization(n.Name)
		u = g.cfg.UnknownUtilizationPct
	}
	diff := int64(p.free) - int64(d.Whole)
	if diff < 0 {
		diff = -diff
	}
	fit := min(max(100-10*diff, 0), 100)
	util := 100 - min(u, 100)
	wf, wu := g.cfg.FitWeight, g.cfg.UtilizationWeight
	return min(max((fit*wf+util*wu)/(wf+wu), 0), 100), nil
}

func (g *GpuOrigin) cpuPodScore(n *sdk.NodeInfo) int64 {
	if !g.cfg.CPUPodsAvoidGPUNodes {
		return 0
	}
	f := g.factsOf(n)
	if f.labelsErr != nil {
		return 0
	}
	if f.capacity == 0 {
		return 100
	}
	c := int64(f.capacity)
	return 50 * (c - min(int64(free(n, f.capacity)), c)) / c
}

func (g *GpuOrigin) noteUnknownUtilization(node string) {
	if g.unknownLogged[node] {
		return
	}
	g.unknownLogged[node] = true
	sdk.Log(sdk.LogDebug, "node "+node+": GPU utilization unknown (no "+AnnUtilization+" annotation, no "+
		MetricUtilization+" metric); scoring it as "+strconv.FormatInt(g.cfg.UnknownUtilizationPct, 10)+
		"% busy (unknownUtilization)")
}

func main() {}
