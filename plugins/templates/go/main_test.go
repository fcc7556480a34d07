package main

import (
	"testing"

	sdk "wasmsched.io/plugin-sdk-go"
)

func TestAvoidedNodesAreFilteredAndPreferredOnesScore100(t *testing.T) {
	h, err := sdk.NewHarness(New, "{}")
	if err != nil {
		t.Fatal(err)
	}
	h.Apply(
		sdk.NodeSet{Index: 0, Node: sdk.Node{Name: "plain"}},
		sdk.NodeSet{Index: 1, Node: sdk.Node{Name: "preferred", Labels: sdk.StringMap{{Key: PreferredLabel, Value: "true"}}}},
		sdk.NodeSet{Index: 2, Node: sdk.Node{Name: "avoided", Labels: sdk.StringMap{{Key: AvoidLabel, Value: "true"}}}},
	)
	if _, err := h.CycleStart(sdk.Pod{UID: "u", Namespace: "default", Name: "p"}); err != nil {
		t.Fatal(err)
	}
	verdicts := h.Filter(0, 1, 2)
	if verdicts[0] != nil || verdicts[1] != nil || verdicts[2] == nil || verdicts[2].Reason != AvoidReason {
		t.Fatalf("filter: %+v", verdicts)
	}
	scores, err := h.Score(0, 1)
	if err != nil || scores[0] != 0 || scores[1] != 100 {
		t.Fatalf("score: %v, %v", scores, err)
	}
	if _, err := sdk.NewHarness(New, `{"unknown": 1}`); err == nil {
		t.Fatal("unknown args accepted")
	}
}
