//go:build !wasip1

package sdk

// Tests of the canonical-ABI glue (abi.go), natively: a small encoder
// written from the canonical ABI's rules (alignment, sizes, variant
// payload offsets: computed here, not taken from abi.go's constants)
// writes the host's side of each call into the stand-in memory of
// mem_native.go, calls the exported functions' bodies, and reads their
// results back the same way.

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// A WIT type, for the encoder.
type ty interface{}

type (
	tBool    struct{}
	tU8      struct{}
	tU32     struct{}
	tS32     struct{}
	tS64     struct{}
	tF64     struct{}
	tString  struct{}
	tList    struct{ elem ty }
	tRecord  []ty // fields (or a tuple's members) in order
	tVariant []ty // cases' payloads; nil for none
)

// A variant value: case index and payload.
type vcase struct {
	i int
	v any
}

func tOption(t ty) tVariant { return tVariant{nil, t} }
func tEnum(n int) tVariant  { return make(tVariant, n) }

func alignUp(n, a uint32) uint32 { return (n + a - 1) &^ (a - 1) }

func alignOf(t ty) uint32 {
	switch t := t.(type) {
	case tBool, tU8:
		return 1
	case tU32, tS32, tString, tList:
		return 4
	case tS64, tF64:
		return 8
	case tRecord:
		a := uint32(1)
		for _, f := range t {
			a = max(a, alignOf(f))
		}
		return a
	case tVariant:
		return max(1, payloadAlign(t))
	}
	panic("type")
}

func payloadAlign(t tVariant) uint32 {
	a := uint32(1)
	for _, c := range t {
		if c != nil {
			a = max(a, alignOf(c))
		}
	}
	return a
}

func sizeOf(t ty) uint32 {
	switch t := t.(type) {
	case tBool, tU8:
		return 1
	case tU32, tS32:
		return 4
	case tS64, tF64:
		return 8
	case tString, tList:
		return 8
	case tRecord:
		var s uint32
		for _, f := range t {
			s = alignUp(s, alignOf(f)) + sizeOf(f)
		}
		return alignUp(s, alignOf(t))
	case tVariant:
		var m uint32
		for _, c := range t {
			if c != nil {
				m = max(m, sizeOf(c))
			}
		}
		return alignUp(alignUp(1, payloadAlign(t))+m, alignOf(t))
	}
	panic("type")
}

// put writes v of type t at a, as the host lowers it.
func put(t ty, v any, a uint32) {
	switch t := t.(type) {
	case tBool:
		store8(a, b2u(v.(bool)))
	case tU8:
		store8(a, v.(uint8))
	case tU32:
		store32(a, v.(uint32))
	case tS32:
		store32(a, uint32(v.(int32)))
	case tS64:
		store64(a, uint64(v.(int64)))
	case tF64:
		store64(a, math.Float64bits(v.(float64)))
	case tString:
		s := v.(string)
		p := cabiRealloc(0, 0, 1, uint32(len(s)))
		copy(memory[p:], s)
		store32(a, p)
		store32(a+4, uint32(len(s)))
	case tList:
		items := v.([]any)
		p := cabiRealloc(0, 0, alignOf(t.elem), uint32(len(items))*sizeOf(t.elem))
		for i, item := range items {
			put(t.elem, item, p+uint32(i)*sizeOf(t.elem))
		}
		store32(a, p)
		store32(a+4, uint32(len(items)))
	case tRecord:
		fields := v.([]any)
		var off uint32
		for i, f := range t {
			off = alignUp(off, alignOf(f))
			put(f, fields[i], a+off)
			off += sizeOf(f)
		}
	case tVariant:
		c := v.(vcase)
		store8(a, uint8(c.i))
		if t[c.i] != nil {
			put(t[c.i], c.v, a+alignUp(1, payloadAlign(t)))
		}
	default:
		panic("type")
	}
}

// get reads a value of type t at a, as the host lifts it.
func get(t ty, a uint32) any {
	switch t := t.(type) {
	case tBool:
		return load8(a) != 0
	case tU8:
		return load8(a)
	case tU32:
		return load32(a)
	case tS32:
		return int32(load32(a))
	case tS64:
		return int64(load64(a))
	case tF64:
		return loadF64(a)
	case tString:
		return loadString(load32(a), load32(a+4))
	case tList:
		p, n := load32(a), load32(a+4)
		out := []any{}
		for i := uint32(0); i < n; i++ {
			out = append(out, get(t.elem, p+i*sizeOf(t.elem)))
		}
		return out
	case tRecord:
		var out []any
		var off uint32
		for _, f := range t {
			off = alignUp(off, alignOf(f))
			out = append(out, get(f, a+off))
			off += sizeOf(f)
		}
		return out
	case tVariant:
		i := int(load8(a))
		if t[i] == nil {
			return vcase{i, nil}
		}
		return vcase{i, get(t[i], a+alignUp(1, payloadAlign(t)))}
	}
	panic("type")
}

// The contract's types (wit/plugin.wit, interface types).
var (
	wStringMap  = tList{tRecord{tString{}, tString{}}}
	wResource   = tRecord{tString{}, tS64{}}
	wTaint      = tRecord{tString{}, tString{}, tEnum(3)}
	wToleration = tRecord{tOption(tString{}), tEnum(2), tString{}, tOption(tEnum(3))}
	wOwner      = tRecord{tString{}, tString{}}
	wPod        = tRecord{tString{}, tString{}, tString{}, wStringMap, wStringMap,
		tList{wResource}, tList{wResource}, tList{wToleration}, tS32{}, tS64{},
		tOption(wOwner), tOption(tString{})}
	wMetrics    = tList{tRecord{tString{}, tF64{}}}
	wNode       = tRecord{tString{}, wStringMap, wStringMap, tList{wResource}, tList{wTaint}, tBool{}, wMetrics}
	wDelta      = tVariant{tRecord{tU32{}, wNode}, tU32{}, tRecord{tU32{}, wPod}, tRecord{tU32{}, tString{}}}
	wRejection  = tRecord{tString{}, tBool{}}
	wPodStatus  = tRecord{wPod, tString{}, tBool{}, tS64{}, tU32{}}
	wVictim     = tRecord{wPod, tS32{}, tS64{}, tBool{}}
	wCandidate  = tRecord{tU32{}, tList{wVictim}, tU32{}}
	wKeySel     = tVariant{nil, nil, tList{tString{}}}
	wStrings    = tList{tString{}}
	wUnitResult = tVariant{nil, tString{}}
)

func result(ok ty) tVariant { return tVariant{ok, tString{}} }

// TestLayoutsFollowTheCanonicalABI checks abi.go's hand-computed sizes and
// offsets against the rules.
func TestLayoutsFollowTheCanonicalABI(t *testing.T) {
	for _, c := range []struct {
		name      string
		t         ty
		have      uint32
		haveAlign uint32
	}{
		{"pod", wPod, sizePod, 8},
		{"tuple<string, string>", wStringMap.elem, sizeKeyValue, 4},
		{"resource-amount", wResource, sizeResource, 8},
		{"taint", wTaint, sizeTaint, 4},
		{"toleration", wToleration, sizeToleration, 4},
		{"tuple<string, f64>", wMetrics.elem, sizeMetric, 8},
		{"delta", wDelta, sizeDelta, 8},
		{"victim", wVictim, sizeVictim, 8},
		{"candidate", wCandidate, sizeCandidate, 4},
		{"option<rejection>", tOption(wRejection), sizeOptRejection, 4},
		{"pod-status", wPodStatus, 144, 8},
		{"key-interests", tRecord{wKeySel, wKeySel, wKeySel, wKeySel}, 48, 4},
	} {
		if got := sizeOf(c.t); got != c.have {
			t.Errorf("%s: size %d, abi.go has %d", c.name, got, c.have)
		}
		if got := alignOf(c.t); got != c.haveAlign {
			t.Errorf("%s: alignment %d, want %d", c.name, got, c.haveAlign)
		}
	}
	// The largest flat result record must fit the static result area.
	for _, r := range []ty{result(tList{tS64{}}), result(tRecord{wStrings, tList{tU32{}}}),
		tRecord{tVariant{nil, tU32{}, tString{}}, wStrings}, tRecord{wKeySel, wKeySel, wKeySel, wKeySel}} {
		if sizeOf(r) > 64 {
			t.Errorf("a result of %d bytes does not fit the result area", sizeOf(r))
		}
	}
}

func kv(pairs ...string) []any {
	out := []any{}
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, []any{pairs[i], pairs[i+1]})
	}
	return out
}

// A pod with every field set, as the host lowers it, and as Go sees it.
func testPod(uid string) ([]any, Pod) {
	key, effect := "gpu", NoExecute
	node := "n1"
	value := []any{uid, "ml", "train-" + uid, kv("app", "train", "tier", "batch"), kv("note", "ünïcödé"),
		[]any{[]any{"cpu", int64(1500)}, []any{"nvidia.com/gpu", int64(2)}},
		[]any{[]any{"memory", int64(1 << 34)}},
		[]any{
			[]any{vcase{1, "gpu"}, vcase{0, nil}, "yes", vcase{1, vcase{2, nil}}},
			[]any{vcase{0, nil}, vcase{1, nil}, "", vcase{0, nil}},
		},
		int32(-7), int64(1_700_000_000_123), vcase{1, []any{"ReplicaSet", "train-7d9f"}}, vcase{1, node}}
	want := Pod{
		UID: uid, Namespace: "ml", Name: "train-" + uid,
		Labels:      StringMap{{"app", "train"}, {"tier", "batch"}},
		Annotations: StringMap{{"note", "ünïcödé"}},
		Requests:    []ResourceAmount{{"cpu", 1500}, {"nvidia.com/gpu", 2}},
		Limits:      []ResourceAmount{{"memory", 1 << 34}},
		Tolerations: []Toleration{
			{Key: &key, Operator: OpEqual, Value: "yes", Effect: &effect},
			{Operator: OpExists},
		},
		Priority: -7, CreationTimestampMs: 1_700_000_000_123,
		Owner:    &Owner{Kind: "ReplicaSet", Name: "train-7d9f"},
		NodeName: &node,
	}
	return value, want
}

func testNode(name string, labels ...string) ([]any, Node) {
	value := []any{name, kv(labels...), kv(), []any{[]any{"nvidia.com/gpu", int64(8)}},
		[]any{[]any{"dedicated", "gpu", vcase{1, nil}}}, true, []any{[]any{"DCGM_FI_DEV_GPU_UTIL", 42.5}}}
	var l StringMap
	for i := 0; i < len(labels); i += 2 {
		l = append(l, KeyValue{labels[i], labels[i+1]})
	}
	want := Node{Name: name, Labels: l, Allocatable: []ResourceAmount{{"nvidia.com/gpu", 8}},
		Taints: []Taint{{"dedicated", "gpu", PreferNoSchedule}}, Unschedulable: true,
		Metrics: []Metric{{"DCGM_FI_DEV_GPU_UTIL", 42.5}}}
	return value, want
}

func lowered(t ty, v any) uint32 {
	a := cabiRealloc(0, 0, alignOf(t), sizeOf(t))
	put(t, v, a)
	return a
}

func TestLiftPodNodeAndDeltas(t *testing.T) {
	pv, pod := testPod("p1")
	if got := liftPod(lowered(wPod, pv)); !reflect.DeepEqual(got, pod) {
		t.Fatalf("pod:\n got %+v\nwant %+v", got, pod)
	}
	nv, node := testNode("gpu-1", "a", "b")
	if got := liftNode(lowered(wNode, nv)); !reflect.DeepEqual(got, node) {
		t.Fatalf("node:\n got %+v\nwant %+v", got, node)
	}
	deltas := []any{vcase{0, []any{uint32(3), nv}}, vcase{2, []any{uint32(3), pv}},
		vcase{3, []any{uint32(3), "p1"}}, vcase{1, uint32(3)}}
	a := lowered(tList{wDelta}, deltas)
	got := liftDeltas(load32(a), load32(a+4))
	want := []Delta{NodeSet{3, node}, PodAdd{Placement{3, pod}}, PodRemove{Removal{3, "p1"}}, NodeRemove{3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("deltas:\n got %+v\nwant %+v", got, want)
	}
}

func TestBadDiscriminantPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "invalid delta discriminant") {
			t.Fatalf("recovered %v", r)
		}
	}()
	a := cabiRealloc(0, 0, 8, sizeDelta)
	store8(a, 4)
	liftDelta(a)
}

// everything implements every point, answering from what it was given so
// that the results show what was lifted.
type everything struct{ log []string }

type cycle struct{ pod string }

func (e *everything) CycleStart(pod *Pod, c *Cluster) (cycle, error) {
	if pod.Name == "bad" {
		return cycle{}, errors.New("bad pod")
	}
	return cycle{pod: pod.UID}, nil
}
func (e *everything) Plan(s cycle, pod *Pod) CyclePlan { return CyclePlan{Filter: true, Score: false} }
func (e *everything) Filter(s cycle, pod *Pod, n *NodeInfo, c *Cluster) *Rejection {
	if reason, ok := n.Label("reject"); ok {
		return RejectUnresolvable(reason)
	}
	if n.Free("nvidia.com/gpu") < pod.Request("nvidia.com/gpu") {
		return Reject("Insufficient nvidia.com/gpu")
	}
	return nil
}
func (e *everything) Score(s cycle, pod *Pod, n *NodeInfo, c *Cluster) (int64, error) {
	if n.Name == "fail" {
		return 0, errors.New("cannot score " + n.Name)
	}
	return int64(n.Index)*10 - 5, nil
}
func (e *everything) NormalizeScore(s cycle, pod *Pod, nodes []NodeIndex, scores []int64) error {
	for i := range scores {
		scores[i] = scores[i] * 2
	}
	return nil
}
func (e *everything) PostFilter(s cycle, pod *Pod, cands []Candidate, c *Cluster) (PreemptionAdvice, error) {
	var adv PreemptionAdvice
	for i := len(cands) - 1; i >= 0; i-- {
		adv.Ranking = append(adv.Ranking, uint32(i))
		for _, v := range cands[i].Victims {
			if v.ViolatesBudget {
				adv.Vetoed = append(adv.Vetoed, v.Pod.UID)
			}
		}
	}
	return adv, nil
}
func (e *everything) Reserve(s cycle, pod *Pod, n *NodeInfo, c *Cluster) error {
	if n.Unschedulable {
		return errors.New("cordoned")
	}
	return nil
}
func (e *everything) Unreserve(uid string, n *NodeInfo, c *Cluster) {
	e.log = append(e.log, "unreserve "+uid+" "+n.Name)
}
func (e *everything) Permit(s cycle, pod *Pod, n *NodeInfo, c *Cluster) PermitResult {
	switch n.Index {
	case 0:
		return PermitResult{Decision: PermitWait(1500), AllowWaiting: []string{"a", "b"}}
	case 1:
		return PermitResult{Decision: PermitReject("gang incomplete")}
	}
	return Allow()
}
func (e *everything) PreBind(s cycle, pod *Pod, n *NodeInfo, c *Cluster) (PodPatch, error) {
	return PodPatch{Annotations: StringMap{{"wasmsched.io/node", n.Name}, {"bad-utf8", "\xff"}}}, nil
}
func (e *everything) Interests() KeyInterests {
	return KeyInterests{PodLabels: Keys{"app", "network.wasmsched.io/*"}, PodAnnotations: NoKeys{}, NodeLabels: AllKeys{}}
}
func (e *everything) DeletionCost(p *PodStatus, m []Metric) (int32, bool, error) {
	if p.Phase != "Running" {
		return 0, false, nil
	}
	return int32(p.Restarts) + int32(p.AgeSeconds) + int32(m[0].Value), true, nil
}

func register(t *testing.T) *everything {
	t.Helper()
	e := &everything{}
	saved := registered
	registered = newInstance[cycle](func(string) (*everything, error) { return e, nil })
	t.Cleanup(func() { registered = saved })
	return e
}

func call(t *testing.T, name string, ret uint32, rt ty) any {
	t.Helper()
	v := get(rt, ret)
	abiPostReturn()
	return v
}

func str(s string) (uint32, uint32) {
	p := cabiRealloc(0, 0, 1, uint32(len(s)))
	copy(memory[p:], s)
	return p, uint32(len(s))
}

func list(t ty, items []any) (uint32, uint32) {
	a := lowered(tList{t}, items)
	return load32(a), load32(a + 4)
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}

func TestEveryExportThroughTheABI(t *testing.T) {
	e := register(t)
	eq(t, "contract-version", call(t, "contract-version", abiContractVersion(), tString{}), ContractVersion)
	eq(t, "init", call(t, "init", abiInit(str("{}")), wUnitResult), vcase{0, nil})

	n0, _ := testNode("gpu-0")
	n1, _ := testNode("gpu-1", "reject", "GPU model mismatch")
	n2, _ := testNode("fail")
	pv, _ := testPod("running")
	abiApply(list(wDelta, []any{
		vcase{0, []any{uint32(0), n0}}, vcase{0, []any{uint32(1), n1}}, vcase{0, []any{uint32(2), n2}},
		vcase{2, []any{uint32(0), pv}}, // 2 of gpu-0's 8 GPUs
	}))

	bad, _ := testPod("x")
	bad[2] = "bad"
	eq(t, "cycle-start error", call(t, "cycle-start", abiCycleStart(lowered(wPod, bad)), result(tRecord{tBool{}, tBool{}})),
		vcase{1, "bad pod"})
	pod, _ := testPod("pending")
	pod[5] = []any{[]any{"nvidia.com/gpu", int64(7)}}
	eq(t, "cycle-start", call(t, "cycle-start", abiCycleStart(lowered(wPod, pod)), result(tRecord{tBool{}, tBool{}})),
		vcase{0, []any{true, false}})

	p, n := list(tU32{}, []any{uint32(0), uint32(1), uint32(2), uint32(9)})
	eq(t, "filter", call(t, "filter", abiFilter(p, n), tList{tOption(wRejection)}), []any{
		vcase{1, []any{"Insufficient nvidia.com/gpu", false}},
		vcase{1, []any{"GPU model mismatch", true}},
		vcase{0, nil},
		vcase{1, []any{"node unknown to plugin", true}},
	})

	p, n = list(tU32{}, []any{uint32(2), uint32(0)})
	eq(t, "score error", call(t, "score", abiScore(p, n), result(tList{tS64{}})), vcase{1, "cannot score fail"})
	p, n = list(tU32{}, []any{uint32(1), uint32(0)})
	eq(t, "score", call(t, "score", abiScore(p, n), result(tList{tS64{}})), vcase{0, []any{int64(5), int64(-5)}})
	p, n = list(tU32{}, []any{uint32(7)})
	eq(t, "score unknown", call(t, "score", abiScore(p, n), result(tList{tS64{}})), vcase{1, "node index 7 unknown to plugin"})

	np, nn := list(tU32{}, []any{uint32(1), uint32(0)})
	sp, sn := list(tS64{}, []any{int64(5), int64(-5)})
	eq(t, "normalize", call(t, "normalize-score", abiNormalizeScore(np, nn, sp, sn), result(tList{tS64{}})),
		vcase{0, []any{int64(10), int64(-10)}})
	sp, sn = list(tS64{}, []any{int64(5)})
	eq(t, "normalize mismatch", call(t, "normalize-score", abiNormalizeScore(np, nn, sp, sn), result(tList{tS64{}})),
		vcase{1, "2 nodes but 1 scores"})

	v1, _ := testPod("v1")
	v2, _ := testPod("v2")
	cp, cn := list(wCandidate, []any{
		[]any{uint32(0), []any{[]any{v1, int32(-3), int64(99), false}}, uint32(0)},
		[]any{uint32(2), []any{[]any{v2, int32(5), int64(100), true}}, uint32(1)},
	})
	eq(t, "post-filter", call(t, "post-filter", abiPostFilter(cp, cn), result(tRecord{wStrings, tList{tU32{}}})),
		vcase{0, []any{[]any{"v2"}, []any{uint32(1), uint32(0)}}})

	eq(t, "reserve", call(t, "reserve", abiReserve(0), wUnitResult), vcase{1, "cordoned"}) // test nodes are cordoned
	eq(t, "reserve unknown", call(t, "reserve", abiReserve(5), wUnitResult), vcase{1, "node index 5 unknown to plugin"})
	up, un := str("pending")
	abiUnreserve(up, un, 1)
	eq(t, "unreserve", e.log, []string{"unreserve pending gpu-1"})

	permit := tRecord{tVariant{nil, tU32{}, tString{}}, wStrings}
	eq(t, "permit wait", call(t, "permit", abiPermit(0), permit), []any{vcase{1, uint32(1500)}, []any{"a", "b"}})
	eq(t, "permit reject", call(t, "permit", abiPermit(1), permit), []any{vcase{2, "gang incomplete"}, []any{}})
	eq(t, "permit allow", call(t, "permit", abiPermit(2), permit), []any{vcase{0, nil}, []any{}})

	eq(t, "pre-bind", call(t, "pre-bind", abiPreBind(2), result(tRecord{wStringMap, wStringMap})),
		vcase{0, []any{[]any{}, kv("wasmsched.io/node", "fail", "bad-utf8", "\uFFFD")}})

	eq(t, "interests", call(t, "interests", abiInterests(), tRecord{wKeySel, wKeySel, wKeySel, wKeySel}),
		[]any{vcase{2, []any{"app", "network.wasmsched.io/*"}}, vcase{1, nil}, vcase{0, nil}, vcase{0, nil}})

	status, _ := testPod("web-1")
	dc := tRecord{wPodStatus, wMetrics}
	args := func(phase string) uint32 {
		return lowered(dc, []any{[]any{status, phase, true, int64(3600), uint32(4)}, []any{[]any{"cpu", 0.5}, []any{"x", 9.0}}})
	}
	eq(t, "deletion-cost", call(t, "deletion-cost", abiDeletionCost(args("Running")), result(tOption(tS32{}))),
		vcase{0, vcase{1, int32(3604)}})
	eq(t, "deletion-cost none", call(t, "deletion-cost", abiDeletionCost(args("Pending")), result(tOption(tS32{}))),
		vcase{0, vcase{0, nil}})
}

func TestCallsBeforeInitAndWithoutACycle(t *testing.T) {
	register(t)
	p, n := list(tU32{}, []any{uint32(0)})
	eq(t, "filter before init", call(t, "filter", abiFilter(p, n), tList{tOption(wRejection)}),
		[]any{vcase{1, []any{"plugin called before init", false}}})
	abiInit(str(""))
	abiPostReturn()
	eq(t, "score without a cycle", call(t, "score", abiScore(p, n), result(tList{tS64{}})), vcase{1, "no cycle started"})
	eq(t, "permit without a cycle", call(t, "permit", abiPermit(0), tRecord{tVariant{nil, tU32{}, tString{}}, wStrings}),
		[]any{vcase{2, "no cycle started"}, []any{}})
}

func TestPointsAndExportsCheck(t *testing.T) {
	e := register(t)
	_ = e
	if got := registered.points(); got != PointFilter|PointScore|PointNormalizeScore|PointPostFilter|PointReserve|PointPermit|PointPreBind|PointInterests|PointDeletionCost {
		t.Fatalf("points %v", got)
	}
	if got := implemented[int](struct{}{}); got != 0 {
		t.Fatalf("a type with no methods implements %v", got)
	}
	if err := NoArgs("p", " { \n} "); err != nil {
		t.Fatal(err)
	}
	if err := NoArgs("p", `{"a":1}`); err == nil || err.Error() != "p args: expected {} (this policy takes no args)" {
		t.Fatalf("NoArgs: %v", err)
	}
}

func TestClusterKeepsRequestsAndPods(t *testing.T) {
	var c Cluster
	_, node := testNode("n")
	_, pod := testPod("a")
	c.Apply(NodeSet{Index: 2, Node: node})
	c.Apply(PodAdd{Placement{Node: 2, Pod: pod}})
	c.Apply(PodAdd{Placement{Node: 2, Pod: pod}}) // the same pod again: replaced, not doubled
	n := c.Node(2)
	if n.Requested("nvidia.com/gpu") != 2 || n.Free("nvidia.com/gpu") != 6 || len(n.Pods) != 1 || c.NodeOf("a") != n {
		t.Fatalf("requested %d, free %d, pods %d", n.Requested("nvidia.com/gpu"), n.Free("nvidia.com/gpu"), len(n.Pods))
	}
	c.Apply(PodRemove{Removal{Node: 2, PodUID: "a"}})
	if n.Requested("nvidia.com/gpu") != 0 || len(n.Pods) != 0 || c.NodeOf("a") != nil {
		t.Fatal("pod not removed")
	}
	c.Apply(PodAdd{Placement{Node: 2, Pod: pod}})
	c.Apply(NodeRemove{Index: 2})
	if c.Node(2) != nil || c.NodeOf("a") != nil || c.Node(99) != nil {
		t.Fatal("node not removed")
	}
	count := 0
	for range c.Nodes() {
		count++
	}
	if count != 0 {
		t.Fatalf("%d nodes left", count)
	}
}
