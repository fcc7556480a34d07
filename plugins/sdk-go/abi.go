package sdk

// The canonical ABI of the component model for the contract's functions:
// lifting the host's arguments out of linear memory into Go values, and
// lowering results into memory the host reads. Layouts (wasm32, sizes and
// field offsets in bytes) follow the canonical ABI's rules: a field sits at
// the next multiple of its alignment, a variant's payload after its u8
// discriminant at the payload's largest alignment, a record's size is
// rounded up to its alignment. A string or list is (pointer, length).
//
// The memory primitives (load8/32/64, store8/32/64, loadString, argument
// and result allocation) are in mem_wasm.go, over the module's own linear
// memory, and mem_native.go, over a byte slice that stands in for it so
// that `go test` checks this file natively. The exported functions
// themselves (`//go:wasmexport`, named after the contract's version) are
// generated into export_*_gen.go by internal/gencontract.

import "errors"

// Sizes of list elements.
const (
	sizeString       = 8
	sizeKeyValue     = 16  // tuple<string, string>
	sizeResource     = 16  // resource-amount {name, amount: s64 @8}
	sizeTaint        = 20  // taint {key, value @8, effect @16}
	sizeToleration   = 28  // toleration {key: option<string>, operator @12, value @16, effect: option<taint-effect> @24}
	sizeMetric       = 16  // tuple<string, f64 @8>
	sizeDelta        = 128 // variant delta: discriminant, payload @8
	sizeVictim       = 136 // victim {pod, deletion-cost @112, start-time-ms @120, violates-budget @128}
	sizeCandidate    = 16  // candidate {node, victims @4, budget-violations @12}
	sizeOptRejection = 16  // option<rejection>: discriminant, reason @4, unresolvable @12
)

// Offsets in a pod record (size 112, alignment 8).
const (
	podUID         = 0
	podNamespace   = 8
	podName        = 16
	podLabels      = 24
	podAnnotations = 32
	podRequests    = 40
	podLimits      = 48
	podTolerations = 56
	podPriority    = 64
	podCreation    = 72
	podOwner       = 80  // option<owner>: discriminant, kind @84, name @92
	podNodeName    = 100 // option<string>: discriminant, string @104
	sizePod        = 112
)

// Offsets in a node record (size 52, alignment 4).
const (
	nodeName          = 0
	nodeLabels        = 8
	nodeAnnotations   = 16
	nodeAllocatable   = 24
	nodeTaints        = 32
	nodeUnschedulable = 40
	nodeMetrics       = 44
)

// Offsets in a pod-status record (size 144, alignment 8) and in the
// parameters of deletion-cost, (pod-status, list<tuple<string, f64>>).
const (
	statusPod           = 0
	statusPhase         = 112
	statusReady         = 120
	statusAge           = 128
	statusRestarts      = 136
	deletionCostMetrics = 144
)

func liftBool(a uint32) bool { return load8(a) != 0 }

// liftDiscriminant reads a variant's discriminant, which must be below
// cases (the canonical ABI traps otherwise).
func liftDiscriminant(a uint32, cases uint8, what string) uint8 {
	d := load8(a)
	if d >= cases {
		panic("wasmsched sdk: invalid " + what + " discriminant")
	}
	return d
}

func liftString(a uint32) string { return loadString(load32(a), load32(a+4)) }

func liftOptionString(a uint32) *string {
	if liftDiscriminant(a, 2, "option") == 0 {
		return nil
	}
	s := liftString(a + 4)
	return &s
}

func liftStringMap(a uint32) StringMap {
	p, n := load32(a), load32(a+4)
	if n == 0 {
		return nil
	}
	m := make(StringMap, n)
	for i := range m {
		e := p + uint32(i)*sizeKeyValue
		m[i] = KeyValue{Key: liftString(e), Value: liftString(e + 8)}
	}
	return m
}

func liftStrings(a uint32) []string {
	p, n := load32(a), load32(a+4)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = liftString(p + uint32(i)*sizeString)
	}
	return out
}

func liftResources(a uint32) []ResourceAmount {
	p, n := load32(a), load32(a+4)
	if n == 0 {
		return nil
	}
	out := make([]ResourceAmount, n)
	for i := range out {
		e := p + uint32(i)*sizeResource
		out[i] = ResourceAmount{Name: liftString(e), Amount: int64(load64(e + 8))}
	}
	return out
}

func liftTaints(a uint32) []Taint {
	p, n := load32(a), load32(a+4)
	if n == 0 {
		return nil
	}
	out := make([]Taint, n)
	for i := range out {
		e := p + uint32(i)*sizeTaint
		out[i] = Taint{
			Key:    liftString(e),
			Value:  liftString(e + 8),
			Effect: TaintEffect(liftDiscriminant(e+16, 3, "taint-effect")),
		}
	}
	return out
}

func liftTolerations(a uint32) []Toleration {
	p, n := load32(a), load32(a+4)
	if n == 0 {
		return nil
	}
	out := make([]Toleration, n)
	for i := range out {
		e := p + uint32(i)*sizeToleration
		t := Toleration{
			Key:      liftOptionString(e),
			Operator: TolerationOperator(liftDiscriminant(e+12, 2, "toleration-operator")),
			Value:    liftString(e + 16),
		}
		if liftDiscriminant(e+24, 2, "option") == 1 {
			effect := TaintEffect(liftDiscriminant(e+25, 3, "taint-effect"))
			t.Effect = &effect
		}
		out[i] = t
	}
	return out
}

func liftMetrics(a uint32) []Metric {
	p, n := load32(a), load32(a+4)
	if n == 0 {
		return nil
	}
	out := make([]Metric, n)
	for i := range out {
		e := p + uint32(i)*sizeMetric
		out[i] = Metric{Name: liftString(e), Value: loadF64(e + 8)}
	}
	return out
}

func liftPod(a uint32) Pod {
	pod := Pod{
		UID:                 liftString(a + podUID),
		Namespace:           liftString(a + podNamespace),
		Name:                liftString(a + podName),
		Labels:              liftStringMap(a + podLabels),
		Annotations:         liftStringMap(a + podAnnotations),
		Requests:            liftResources(a + podRequests),
		Limits:              liftResources(a + podLimits),
		Tolerations:         liftTolerations(a + podTolerations),
		Priority:            int32(load32(a + podPriority)),
		CreationTimestampMs: int64(load64(a + podCreation)),
		NodeName:            liftOptionString(a + podNodeName),
	}
	if liftDiscriminant(a+podOwner, 2, "option") == 1 {
		pod.Owner = &Owner{Kind: liftString(a + podOwner + 4), Name: liftString(a + podOwner + 12)}
	}
	return pod
}

func liftNode(a uint32) Node {
	return Node{
		Name:          liftString(a + nodeName),
		Labels:        liftStringMap(a + nodeLabels),
		Annotations:   liftStringMap(a + nodeAnnotations),
		Allocatable:   liftResources(a + nodeAllocatable),
		Taints:        liftTaints(a + nodeTaints),
		Unschedulable: liftBool(a + nodeUnschedulable),
		Metrics:       liftMetrics(a + nodeMetrics),
	}
}

func liftDelta(a uint32) Delta {
	switch liftDiscriminant(a, 4, "delta") {
	case 0: // node-set(tuple<node-index, node>): index @8, node @12
		return NodeSet{Index: load32(a + 8), Node: liftNode(a + 12)}
	case 1: // node-remove(node-index)
		return NodeRemove{Index: load32(a + 8)}
	case 2: // pod-add(placement {node, pod @8})
		return PodAdd{Placement{Node: load32(a + 8), Pod: liftPod(a + 16)}}
	default: // pod-remove(removal {node, pod-uid @4})
		return PodRemove{Removal{Node: load32(a + 8), PodUID: liftString(a + 12)}}
	}
}

func liftDeltas(p, n uint32) []Delta {
	out := make([]Delta, n)
	for i := range out {
		out[i] = liftDelta(p + uint32(i)*sizeDelta)
	}
	return out
}

func liftPodStatus(a uint32) PodStatus {
	return PodStatus{
		Pod:        liftPod(a + statusPod),
		Phase:      liftString(a + statusPhase),
		Ready:      liftBool(a + statusReady),
		AgeSeconds: int64(load64(a + statusAge)),
		Restarts:   load32(a + statusRestarts),
	}
}

func liftCandidates(p, n uint32) []Candidate {
	out := make([]Candidate, n)
	for i := range out {
		e := p + uint32(i)*sizeCandidate
		vp, vn := load32(e+4), load32(e+8)
		victims := make([]Victim, vn)
		for j := range victims {
			v := vp + uint32(j)*sizeVictim
			victims[j] = Victim{
				Pod:            liftPod(v),
				DeletionCost:   int32(load32(v + 112)),
				StartTimeMs:    int64(load64(v + 120)),
				ViolatesBudget: liftBool(v + 128),
			}
		}
		out[i] = Candidate{Node: load32(e), Victims: victims, BudgetViolations: load32(e + 12)}
	}
	return out
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// lowerStringAt writes s as (pointer, length) at a; its bytes stay valid
// until the call's post-return.
func lowerStringAt(a uint32, s string) {
	p, n := lowerString(s)
	store32(a, p)
	store32(a+4, n)
}

func lowerStringMapAt(a uint32, m StringMap) {
	buf := resultAlloc(uint32(len(m))*sizeKeyValue, 4)
	for i, kv := range m {
		e := buf + uint32(i)*sizeKeyValue
		lowerStringAt(e, kv.Key)
		lowerStringAt(e+8, kv.Value)
	}
	store32(a, buf)
	store32(a+4, uint32(len(m)))
}

func lowerStringsAt(a uint32, list []string) {
	buf := resultAlloc(uint32(len(list))*sizeString, 4)
	for i, s := range list {
		lowerStringAt(buf+uint32(i)*sizeString, s)
	}
	store32(a, buf)
	store32(a+4, uint32(len(list)))
}

// lowerErr writes the error case of a `result<_, string>` whose payload
// sits at offset 4 (every result of the contract).
func lowerErr(ret uint32, err error) {
	store8(ret, 1)
	lowerStringAt(ret+4, err.Error())
}

// lowerUnitResult writes a `result<_, string>`.
func lowerUnitResult(ret uint32, err error) {
	if err != nil {
		lowerErr(ret, err)
		return
	}
	store8(ret, 0)
}

func lowerS64sAt(a uint32, values []int64) {
	buf := resultAlloc(uint32(len(values))*8, 8)
	for i, v := range values {
		store64(buf+uint32(i)*8, uint64(v))
	}
	store32(a, buf)
	store32(a+4, uint32(len(values)))
}

func lowerKeySelectorAt(a uint32, k KeySelector) {
	switch k := k.(type) {
	case NoKeys:
		store8(a, 1)
	case Keys:
		store8(a, 2)
		lowerStringsAt(a+4, k)
	default: // AllKeys, or nil
		store8(a, 0)
	}
}

var errNoPluginForCall = errors.New("wasmsched sdk: plugin called without sdk.Register")

func plugin() dispatcher {
	if registered == nil {
		panic(errNoPluginForCall)
	}
	return registered
}

// The exported functions' bodies. Each returns the address of the result
// area where results do not fit one core value, as the canonical ABI has
// it; results stay valid until the function's post-return (releaseResults).

// lifecycle.contract-version: () -> string
func abiContractVersion() uint32 {
	ret := resultArea()
	lowerStringAt(ret, ContractVersion)
	return ret
}

// lifecycle.init: (args: string) -> result<_, string>
func abiInit(p, n uint32) uint32 {
	args := loadString(p, n)
	releaseArgs()
	ret := resultArea()
	if registered == nil {
		lowerErr(ret, errNoPlugin)
		return ret
	}
	lowerUnitResult(ret, registered.init(args))
	return ret
}

// lifecycle.apply: (deltas: list<delta>)
func abiApply(p, n uint32) {
	deltas := liftDeltas(p, n)
	releaseArgs()
	plugin().apply(deltas)
}

// lifecycle.cycle-start: (pod: pod) -> result<cycle-plan, string>; the
// pod's 26 core values exceed 16, so it arrives in memory at a.
func abiCycleStart(a uint32) uint32 {
	pod := liftPod(a)
	releaseArgs()
	ret := resultArea()
	plan, err := plugin().cycleStart(pod)
	if err != nil {
		lowerErr(ret, err)
		return ret
	}
	store8(ret, 0)
	store8(ret+4, b2u(plan.Filter))
	store8(ret+5, b2u(plan.Score))
	return ret
}

// filter.filter: (nodes: list<node-index>) -> list<option<rejection>>
func abiFilter(p, n uint32) uint32 {
	nodes := loadU32s(p, n)
	releaseArgs()
	verdicts := plugin().filter(nodes)
	buf := resultAlloc(uint32(len(verdicts))*sizeOptRejection, 4)
	for i, r := range verdicts {
		e := buf + uint32(i)*sizeOptRejection
		if r == nil {
			store8(e, 0)
			continue
		}
		store8(e, 1)
		lowerStringAt(e+4, r.Reason)
		store8(e+12, b2u(r.Unresolvable))
	}
	ret := resultArea()
	store32(ret, buf)
	store32(ret+4, uint32(len(verdicts)))
	return ret
}

// score.score: (nodes: list<node-index>) -> result<list<s64>, string>
func abiScore(p, n uint32) uint32 {
	nodes := loadU32s(p, n)
	releaseArgs()
	ret := resultArea()
	scores, err := plugin().score(nodes)
	if err != nil {
		lowerErr(ret, err)
		return ret
	}
	store8(ret, 0)
	lowerS64sAt(ret+4, scores)
	return ret
}

// normalize-score.normalize-score: (nodes: list<node-index>, scores:
// list<s64>) -> result<list<s64>, string>
func abiNormalizeScore(np, nn, sp, sn uint32) uint32 {
	nodes := loadU32s(np, nn)
	scores := loadS64s(sp, sn)
	releaseArgs()
	ret := resultArea()
	out, err := plugin().normalizeScore(nodes, scores)
	if err != nil {
		lowerErr(ret, err)
		return ret
	}
	store8(ret, 0)
	lowerS64sAt(ret+4, out)
	return ret
}

// deletion-cost.deletion-cost: (pod: pod-status, metrics: list<tuple<string,
// f64>>) -> result<option<s32>, string>; the parameters arrive in memory.
func abiDeletionCost(a uint32) uint32 {
	status := liftPodStatus(a)
	metrics := liftMetrics(a + deletionCostMetrics)
	releaseArgs()
	ret := resultArea()
	cost, ok, err := plugin().deletionCost(status, metrics)
	if err != nil {
		lowerErr(ret, err)
		return ret
	}
	store8(ret, 0)
	store8(ret+4, b2u(ok))
	store32(ret+8, uint32(cost))
	return ret
}

// interests.interests: () -> key-interests (four key-selectors of 12 bytes)
func abiInterests() uint32 {
	ki := plugin().interests()
	ret := resultArea()
	lowerKeySelectorAt(ret, ki.PodLabels)
	lowerKeySelectorAt(ret+12, ki.PodAnnotations)
	lowerKeySelectorAt(ret+24, ki.NodeLabels)
	lowerKeySelectorAt(ret+36, ki.NodeAnnotations)
	return ret
}

// post-filter.post-filter: (candidates: list<candidate>) ->
// result<preemption-advice, string>
func abiPostFilter(p, n uint32) uint32 {
	candidates := liftCandidates(p, n)
	releaseArgs()
	ret := resultArea()
	advice, err := plugin().postFilter(candidates)
	if err != nil {
		lowerErr(ret, err)
		return ret
	}
	store8(ret, 0)
	lowerStringsAt(ret+4, advice.Vetoed)
	buf := resultAlloc(uint32(len(advice.Ranking))*4, 4)
	for i, r := range advice.Ranking {
		store32(buf+uint32(i)*4, r)
	}
	store32(ret+12, buf)
	store32(ret+16, uint32(len(advice.Ranking)))
	return ret
}

// reserve.reserve: (node: node-index) -> result<_, string>
func abiReserve(node uint32) uint32 {
	ret := resultArea()
	lowerUnitResult(ret, plugin().reserve(node))
	return ret
}

// reserve.unreserve: (pod-uid: string, node: node-index)
func abiUnreserve(p, n, node uint32) {
	uid := loadString(p, n)
	releaseArgs()
	plugin().unreserve(uid, node)
}

// permit.permit: (node: node-index) -> permit-result {decision:
// permit-decision, allow-waiting @12}
func abiPermit(node uint32) uint32 {
	res := plugin().permit(node)
	ret := resultArea()
	switch d := res.Decision.(type) {
	case PermitWait:
		store8(ret, 1)
		store32(ret+4, uint32(d))
	case PermitReject:
		store8(ret, 2)
		lowerStringAt(ret+4, string(d))
	default: // PermitAllow, or nil
		store8(ret, 0)
	}
	lowerStringsAt(ret+12, res.AllowWaiting)
	return ret
}

// pre-bind.pre-bind: (node: node-index) -> result<pod-patch, string>
func abiPreBind(node uint32) uint32 {
	ret := resultArea()
	patch, err := plugin().preBind(node)
	if err != nil {
		lowerErr(ret, err)
		return ret
	}
	store8(ret, 0)
	lowerStringMapAt(ret+4, patch.Labels)
	lowerStringMapAt(ret+12, patch.Annotations)
	return ret
}

// abiPostReturn is every function's post-return: the results have been
// read, so their memory is let go.
func abiPostReturn() { releaseResults() }
