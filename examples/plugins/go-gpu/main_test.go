package main

import (
	"testing"

	sdk "wasmsched.io/plugin-sdk-go"
)

func kv(pairs ...string) sdk.StringMap {
	var m sdk.StringMap
	for i := 0; i < len(pairs); i += 2 {
		m = append(m, sdk.KeyValue{Key: pairs[i], Value: pairs[i+1]})
	}
	return m
}

func gpuNode(name, model, memory, count string, util string) sdk.Node {
	n := sdk.Node{Name: name, Labels: kv(LabelCount, count, LabelMemory, memory, LabelModel, model),
		Allocatable: []sdk.ResourceAmount{{Name: GPUResource, Amount: 8}}}
	if util != "" {
		n.Annotations = kv(AnnUtilization, util)
	}
	return n
}

func gpuPod(uid string, gpus int64, annotations ...string) sdk.Pod {
	return sdk.Pod{UID: uid, Name: uid, Namespace: "ml", Annotations: kv(annotations...),
		Limits: []sdk.ResourceAmount{{Name: GPUResource, Amount: gpus}}}
}

func harness(t *testing.T, args string) *sdk.Harness {
	t.Helper()
	h, err := sdk.NewHarness(New, args)
	if err != nil {
		t.Fatal(err)
	}
	h.Apply(
		sdk.NodeSet{Index: 0, Node: gpuNode("a100", "A100", "40960", "8", "25%")},
		sdk.NodeSet{Index: 1, Node: gpuNode("gfd", "", "", "", "")},
		sdk.NodeSet{Index: 2, Node: sdk.Node{Name: "cpu"}},
		sdk.NodeSet{Index: 3, Node: gpuNode("bad", "A100", "40Gi", "8", "")},
	)
	// GPU Feature Discovery labels on node 1.
	h.Apply(sdk.NodeSet{Index: 1, Node: sdk.Node{Name: "gfd", Labels: kv(GFDCount, "4", GFDMemory, "81920", GFDProduct, "NVIDIA-A100-SXM4-80GB"),
		Allocatable: []sdk.ResourceAmount{{Name: GPUResource, Amount: 4}}}})
	return h
}

func TestOriginScoresAsTheDocsSay(t *testing.T) {
	h := harness(t, `{"policy": "origin"}`)
	if got := h.Points(); got != sdk.PointFilter|sdk.PointScore|sdk.PointInterests {
		t.Fatalf("points %v", got)
	}
	if _, err := h.CycleStart(gpuPod("p", 2, AnnModel, "A100")); err != nil {
		t.Fatal(err)
	}
	// 8 free of 8, U = 25, 2 GPUs: fit 40, util 75, (280+225)/10 = 50.
	// 4 free of 4, U unknown (50): fit 80, (560+150)/10 = 71.
	if s, err := h.Score(0, 1); err != nil || s[0] != 50 || s[1] != 71 {
		t.Fatalf("scores %v %v", s, err)
	}
	v := h.Filter(0, 1, 2, 3)
	if v[0] != nil || v[1] != nil || v[2] == nil || v[2].Reason != NotEnoughGPUs || v[3] == nil || v[3].Reason != "invalid node label gpu.nvidia.com/memory" {
		t.Fatalf("verdicts %+v %+v %+v %+v", v[0], v[1], v[2], v[3])
	}
	// Six GPUs taken on node 0: 2 free, exactly the request.
	h.Apply(sdk.PodAdd{Placement: sdk.Placement{Node: 0, Pod: gpuPod("running", 6)}})
	if s, _ := h.Score(0); s[0] != (100*7+75*3)/10 {
		t.Fatalf("score on a node with exactly 2 free: %v", s)
	}
	if _, err := h.CycleStart(gpuPod("big", 4)); err != nil {
		t.Fatal(err)
	}
	if v := h.Filter(0); v[0] == nil || v[0].Reason != NotEnoughFreeGPUs || v[0].Unresolvable {
		t.Fatalf("full node: %+v", v[0])
	}
}

func TestModelAndMemory(t *testing.T) {
	h := harness(t, "")
	for _, c := range []struct {
		ann  []string
		want [2]string
	}{
		{[]string{AnnModel, "V100"}, [2]string{ModelMismatch, ModelMismatch}},
		{[]string{AnnModel, "a100-80gb"}, [2]string{ModelMismatch, ""}},
		{[]string{AnnMemory, "65536"}, [2]string{NotEnoughGPUMemory, ""}},
	} {
		if _, err := h.CycleStart(gpuPod("p", 1, c.ann...)); err != nil {
			t.Fatal(err)
		}
		v := h.Filter(0, 1)
		for i, want := range c.want {
			if (want == "") != (v[i] == nil) || v[i] != nil && v[i].Reason != want {
				t.Errorf("%v on node %d: %+v, want %q", c.ann, i, v[i], want)
			}
		}
	}
	if !ModelMatches("A100", "NVIDIA-A100-SXM4-40GB") || ModelMatches("A10", "NVIDIA-A100-SXM4-40GB") || !ModelMatches("t4", "Tesla-T4") {
		t.Error("token matching")
	}
}

func TestCPUPodsAvoidGPUNodes(t *testing.T) {
	h := harness(t, "{}")
	plan, err := h.CycleStart(sdk.Pod{UID: "web", Name: "web"})
	if err != nil || plan.Filter || !plan.Score {
		t.Fatalf("plan %+v %v", plan, err)
	}
	h.Apply(sdk.PodAdd{Placement: sdk.Placement{Node: 0, Pod: gpuPod("running", 6)}})
	if s, _ := h.Score(0, 1, 2, 3); s[0] != 50*6/8 || s[1] != 0 || s[2] != 100 || s[3] != 0 {
		t.Fatalf("scores %v", s)
	}
	h2 := harness(t, `{"cpuPodsAvoidGpuNodes": false}`)
	if plan, _ := h2.CycleStart(sdk.Pod{UID: "web"}); plan.Score {
		t.Fatal("score planned with cpuPodsAvoidGpuNodes off")
	}
}

func TestBadInput(t *testing.T) {
	h := harness(t, "{}")
	for _, c := range []struct {
		pod  sdk.Pod
		want string
	}{
		{gpuPod("p", -1), "invalid nvidia.com/gpu amount -1: not a non-negative count"},
		{gpuPod("p", 1, AnnMemory, "abc"), `invalid annotation gpu.nvidia.com/memory="abc": not a non-negative integer (MiB)`},
		{gpuPod("p", 1, AnnModel, "--"), `invalid annotation gpu.nvidia.com/model="--": not a GPU model name`},
		{gpuPod("p", 1, AnnPolicy, "pack"), `invalid annotation gpu.nvidia.com/policy="pack": expected binpack, spread or origin`},
		{gpuPod("p", 1, AnnPolicy, "binpack"), `invalid annotation gpu.nvidia.com/policy="binpack": only origin is ported to Go`},
	} {
		if _, err := h.CycleStart(c.pod); err == nil || err.Error() != c.want {
			t.Errorf("error %v, want %s", err, c.want)
		}
	}
	for args, want := range map[string]string{
		`{"policy": "binpack"}`:                    `gpu-origin args: field policy: only origin is ported to Go, got "binpack"`,
		`{"fitWeight": 1001}`:                      "gpu-origin args: field fitWeight: must be at most 1000, got 1001",
		`{"fitWeight": 0, "utilizationWeight": 0}`: "gpu-origin args: field fitWeight: fitWeight and utilizationWeight cannot both be 0",
		`{"topologyPenalty": 5}`:                   `gpu-origin args: unknown field "topologyPenalty"`,
		`{"unknownUtilization": 2}`:                "gpu-origin args: field unknownUtilization: must be a fraction in 0..=1, got 2",
	} {
		if _, err := New(args); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", args, err, want)
		}
	}
}
