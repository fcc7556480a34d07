package main

import (
	"testing"

	sdk "wasmsched.io/plugin-sdk-go"
)

func labels(kv ...string) sdk.StringMap {
	var m sdk.StringMap
	for i := 0; i < len(kv); i += 2 {
		m = append(m, sdk.KeyValue{Key: kv[i], Value: kv[i+1]})
	}
	return m
}

func setup(t *testing.T) *sdk.Harness {
	t.Helper()
	h, err := sdk.NewHarness(New, "{}")
	if err != nil {
		t.Fatal(err)
	}
	h.Apply(
		sdk.NodeSet{Index: 0, Node: sdk.Node{Name: "spot", Labels: labels(CapacityLabel, "spot")}},
		sdk.NodeSet{Index: 1, Node: sdk.Node{Name: "on-demand", Labels: labels(CapacityLabel, "on-demand")}},
		sdk.NodeSet{Index: 2, Node: sdk.Node{Name: "reserved", Labels: labels(ReservedLabel, "batch")}},
	)
	return h
}

func pod(l sdk.StringMap) sdk.Pod {
	return sdk.Pod{UID: "u", Namespace: "default", Name: "p", Labels: l}
}

func TestExportsFilterAndScore(t *testing.T) {
	if got := setup(t).Points(); got != sdk.PointFilter|sdk.PointScore {
		t.Fatalf("points %v", got)
	}
}

func TestBatchPrefersSpotAndLatencyCriticalAvoidsIt(t *testing.T) {
	h := setup(t)
	for _, c := range []struct {
		class string
		want  []int64
	}{{"batch", []int64{100, 0, 0}}, {"latency-critical", []int64{0, 100, 100}}} {
		if _, err := h.CycleStart(pod(labels(ClassLabel, c.class))); err != nil {
			t.Fatal(err)
		}
		got, err := h.Score(0, 1, 2)
		if err != nil || len(got) != 3 || got[0] != c.want[0] || got[1] != c.want[1] || got[2] != c.want[2] {
			t.Fatalf("%s: scores %v, %v; want %v", c.class, got, err, c.want)
		}
	}
}

func TestReservedNodesTakeOnlyTheirClass(t *testing.T) {
	h := setup(t)
	plan, err := h.CycleStart(pod(nil))
	if err != nil || !plan.Filter || plan.Score {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	v := h.Filter(0, 2, 7)
	if v[0] != nil || v[1] == nil || v[1].Reason != ReservedReason || !v[1].Unresolvable {
		t.Fatalf("verdicts %+v %+v", v[0], v[1])
	}
	if v[2] == nil || v[2].Reason != "node unknown to plugin" {
		t.Fatalf("unknown node: %+v", v[2])
	}
	if _, err := h.CycleStart(pod(labels(ClassLabel, "batch"))); err != nil {
		t.Fatal(err)
	}
	if v := h.Filter(2); v[0] != nil {
		t.Fatalf("batch pod on the batch pool: %+v", v[0])
	}
}

func TestBadClassAndArgsAreErrors(t *testing.T) {
	h := setup(t)
	_, err := h.CycleStart(pod(labels(ClassLabel, "web")))
	want := `invalid label wasmsched.io/workload-class="web": expected batch or latency-critical`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	if _, err := sdk.NewHarness(New, `{"x": 1}`); err == nil || err.Error() != "spot-affinity args: expected {} (this policy takes no args)" {
		t.Fatalf("args error: %v", err)
	}
	if _, err := sdk.NewHarness(New, ""); err != nil {
		t.Fatalf("empty args: %v", err)
	}
}
