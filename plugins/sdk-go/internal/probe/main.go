// Command probe is a test plugin, not an example: it implements every
// extension point and answers with what it was given, so that
// host/tests/go_sdk.rs can check the SDK's canonical-ABI glue end to end
// through wasmtime (every record, option, variant and list of the
// contract, both ways). Build: go run ./cmd/build-plugin ./internal/probe.
package main

import (
	"errors"
	"strconv"
	"strings"

	sdk "wasmsched.io/plugin-sdk-go"
)

type probe struct{ unreserved []string }

func New(args string) (*probe, error) {
	if strings.Contains(args, "refuse") {
		return nil, errors.New("probe args: refused as asked")
	}
	sdk.Log(sdk.LogInfo, "probe ready: "+args)
	return &probe{}, nil
}

func init() { sdk.Register(New) }

// describe writes every field of a pod in one line.
func describe(p *sdk.Pod) string {
	var b strings.Builder
	b.WriteString(p.UID + " " + p.Namespace + "/" + p.Name)
	for _, kv := range p.Labels {
		b.WriteString(" l:" + kv.Key + "=" + kv.Value)
	}
	for _, kv := range p.Annotations {
		b.WriteString(" a:" + kv.Key + "=" + kv.Value)
	}
	for _, r := range p.Requests {
		b.WriteString(" req:" + r.Name + "=" + strconv.FormatInt(r.Amount, 10))
	}
	for _, r := range p.Limits {
		b.WriteString(" lim:" + r.Name + "=" + strconv.FormatInt(r.Amount, 10))
	}
	for _, t := range p.Tolerations {
		key, effect := "*", "*"
		if t.Key != nil {
			key = *t.Key
		}
		if t.Effect != nil {
			effect = t.Effect.String()
		}
		b.WriteString(" tol:" + key + "," + t.Operator.String() + "," + t.Value + "," + effect)
	}
	b.WriteString(" prio:" + strconv.Itoa(int(p.Priority)) + " created:" + strconv.FormatInt(p.CreationTimestampMs, 10))
	if p.Owner != nil {
		b.WriteString(" owner:" + p.Owner.Kind + "/" + p.Owner.Name)
	}
	if p.NodeName != nil {
		b.WriteString(" on:" + *p.NodeName)
	}
	return b.String()
}

func describeNode(n *sdk.NodeInfo) string {
	var b strings.Builder
	b.WriteString(n.Name + " #" + strconv.Itoa(int(n.Index)))
	for _, kv := range n.Labels {
		b.WriteString(" l:" + kv.Key + "=" + kv.Value)
	}
	for _, kv := range n.Annotations {
		b.WriteString(" a:" + kv.Key + "=" + kv.Value)
	}
	for _, r := range n.Allocatable {
		b.WriteString(" alloc:" + r.Name + "=" + strconv.FormatInt(r.Amount, 10))
	}
	for _, t := range n.Taints {
		b.WriteString(" taint:" + t.Key + "=" + t.Value + ":" + t.Effect.String())
	}
	if n.Unschedulable {
		b.WriteString(" cordoned")
	}
	for _, m := range n.Metrics {
		b.WriteString(" m:" + m.Name + "=" + strconv.FormatFloat(m.Value, 'g', -1, 64))
	}
	b.WriteString(" pods:" + strconv.Itoa(len(n.Pods)) + " cpu:" + strconv.FormatInt(n.Requested("cpu"), 10))
	return b.String()
}

// The cycle state is the pod's description.
func (*probe) CycleStart(pod *sdk.Pod, _ *sdk.Cluster) (string, error) {
	if pod.Name == "bad" {
		return "", errors.New("bad pod ✗")
	}
	return describe(pod), nil
}

func (*probe) Plan(_ string, pod *sdk.Pod) sdk.CyclePlan {
	_, skip := pod.Label("skip-score")
	return sdk.CyclePlan{Filter: true, Score: !skip}
}

func (*probe) Filter(_ string, _ *sdk.Pod, n *sdk.NodeInfo, _ *sdk.Cluster) *sdk.Rejection {
	if reason, ok := n.Label("reject"); ok {
		return sdk.RejectUnresolvable(reason)
	}
	if n.Unschedulable {
		return sdk.Reject("cordoned")
	}
	return nil
}

func (*probe) Score(_ string, _ *sdk.Pod, n *sdk.NodeInfo, _ *sdk.Cluster) (int64, error) {
	return int64(n.Index)*1000 - 7, nil
}

func (*probe) NormalizeScore(_ string, _ *sdk.Pod, _ []sdk.NodeIndex, scores []int64) error {
	for i := range scores {
		scores[i] = max(min(scores[i]/100, 100), 0)
	}
	return nil
}

func (*probe) PostFilter(_ string, _ *sdk.Pod, cands []sdk.Candidate, _ *sdk.Cluster) (sdk.PreemptionAdvice, error) {
	var adv sdk.PreemptionAdvice
	for i := len(cands) - 1; i >= 0; i-- {
		adv.Ranking = append(adv.Ranking, uint32(i))
		for _, v := range cands[i].Victims {
			if v.ViolatesBudget || v.DeletionCost > 0 || v.StartTimeMs == 42 {
				adv.Vetoed = append(adv.Vetoed, v.Pod.UID+"@"+strconv.Itoa(int(cands[i].Node))+
					"/"+strconv.Itoa(int(cands[i].BudgetViolations))+"/"+strconv.Itoa(int(v.DeletionCost)))
			}
		}
	}
	return adv, nil
}

func (p *probe) Reserve(_ string, pod *sdk.Pod, n *sdk.NodeInfo, _ *sdk.Cluster) error {
	if _, ok := n.Label("refuse-reserve"); ok {
		return errors.New("reserve refused on " + n.Name)
	}
	return nil
}

func (p *probe) Unreserve(uid string, n *sdk.NodeInfo, _ *sdk.Cluster) {
	name := "gone"
	if n != nil {
		name = n.Name
	}
	p.unreserved = append(p.unreserved, uid+"@"+name)
}

func (p *probe) Permit(_ string, pod *sdk.Pod, n *sdk.NodeInfo, _ *sdk.Cluster) sdk.PermitResult {
	switch n.Index {
	case 0:
		return sdk.PermitResult{Decision: sdk.PermitWait(1500), AllowWaiting: append([]string{"w1"}, p.unreserved...)}
	case 1:
		return sdk.PermitResult{Decision: sdk.PermitReject("no room for " + pod.Name)}
	}
	return sdk.Allow()
}

func (*probe) PreBind(state string, _ *sdk.Pod, n *sdk.NodeInfo, _ *sdk.Cluster) (sdk.PodPatch, error) {
	return sdk.PodPatch{
		Labels:      sdk.StringMap{{Key: "probe/node", Value: n.Name}},
		Annotations: sdk.StringMap{{Key: "probe/node-seen", Value: describeNode(n)}, {Key: "probe/pod-seen", Value: state}},
	}, nil
}

func (*probe) Interests() sdk.KeyInterests {
	return sdk.KeyInterests{PodLabels: sdk.AllKeys{}, PodAnnotations: sdk.Keys{"probe/*", "x"}, NodeLabels: sdk.AllKeys{}, NodeAnnotations: sdk.NoKeys{}}
}

func (*probe) DeletionCost(p *sdk.PodStatus, metrics []sdk.Metric) (int32, bool, error) {
	if p.Phase == "Failed" {
		return 0, false, errors.New("failed pod " + p.Pod.Name)
	}
	if !p.Ready {
		return 0, false, nil
	}
	sum := float64(p.AgeSeconds) + float64(p.Restarts)*1000
	for _, m := range metrics {
		sum += m.Value
	}
	return int32(sum), true, nil
}

func main() {}
