package sdk

// The contract's records (wit/plugin.wit, interface `types`) as Go types.
// WIT `option<T>` is a pointer (nil: none), `list<T>` a slice, `result<T,
// string>` a (T, error) return, an enum a small integer type whose String
// is the WIT name, and a variant a sealed interface with one type per case.

// NodeIndex is the index of a node in the host's node table. Stable while
// the node exists; an index may be reused after a NodeRemove for it.
type NodeIndex = uint32

// KeyValue is one entry of a StringMap.
type KeyValue struct {
	Key   string
	Value string
}

// StringMap is a list of key/value pairs (labels, annotations), sorted by
// key (WIT `string-map`).
type StringMap []KeyValue

// Get returns the value of key, and whether it is present.
func (m StringMap) Get(key string) (string, bool) {
	for i := range m {
		if m[i].Key == key {
			return m[i].Value, true
		}
	}
	return "", false
}

// ResourceAmount is an amount of one resource. `cpu` is in millicores;
// every other resource (memory and ephemeral-storage in bytes, `pods`,
// `nvidia.com/gpu` and other extended resources in units) is the Kubernetes
// quantity rounded up to an integer, as kube-scheduler counts.
type ResourceAmount struct {
	Name   string
	Amount int64
}

// TaintEffect is what a taint does to pods that do not tolerate it.
type TaintEffect uint8

const (
	NoSchedule TaintEffect = iota
	PreferNoSchedule
	NoExecute
)

func (e TaintEffect) String() string {
	switch e {
	case NoSchedule:
		return "no-schedule"
	case PreferNoSchedule:
		return "prefer-no-schedule"
	case NoExecute:
		return "no-execute"
	}
	return "invalid taint-effect"
}

// Taint is a node taint (`spec.taints[]`).
type Taint struct {
	Key    string
	Value  string
	Effect TaintEffect
}

// TolerationOperator is how a toleration matches a taint's value.
type TolerationOperator uint8

const (
	OpEqual TolerationOperator = iota
	OpExists
)

func (o TolerationOperator) String() string {
	switch o {
	case OpEqual:
		return "equal"
	case OpExists:
		return "exists"
	}
	return "invalid toleration-operator"
}

// Toleration is a pod toleration (`spec.tolerations[]`). A nil Key with
// operator OpExists tolerates every taint; a nil Effect matches every
// effect.
type Toleration struct {
	Key      *string
	Operator TolerationOperator
	Value    string
	Effect   *TaintEffect
}

// Owner is the controller that owns a pod, for example ReplicaSet web-7d9f.
type Owner struct {
	Kind string
	Name string
}

// Pod is what a plugin sees of a pod.
type Pod struct {
	// UID is `metadata.uid`, or namespace/name when a manifest has none:
	// always unique and non-empty.
	UID         string
	Namespace   string
	Name        string
	Labels      StringMap
	Annotations StringMap
	// Requests are the effective requests as kube-scheduler computes them
	// (containers, init containers, overhead); resources with no request
	// are absent.
	Requests []ResourceAmount
	// Limits are the effective limits, computed the same way.
	Limits      []ResourceAmount
	Tolerations []Toleration
	// Priority is `spec.priority` (0 when unset).
	Priority int32
	// CreationTimestampMs is `metadata.creationTimestamp` in milliseconds
	// since the Unix epoch.
	CreationTimestampMs int64
	Owner               *Owner
	// NodeName is `spec.nodeName` for a bound pod, nil for a pending one.
	NodeName *string
}

// Metric is one live measurement, by name (a node's metrics, the metrics
// given to DeletionCost).
type Metric struct {
	Name  string
	Value float64
}

// Node is what a plugin sees of a node.
type Node struct {
	Name        string
	Labels      StringMap
	Annotations StringMap
	// Allocatable is `status.allocatable`.
	Allocatable []ResourceAmount
	Taints      []Taint
	// Unschedulable is `spec.unschedulable` (cordoned).
	Unschedulable bool
	// Metrics are the live measurements the host has for the node (for
	// example DCGM_FI_DEV_GPU_UTIL); empty when it has none.
	Metrics []Metric
}

// Placement is a pod placed on (bound to, or reserved on) a node.
type Placement struct {
	Node NodeIndex
	Pod  Pod
}

// Removal is a pod leaving a node.
type Removal struct {
	Node   NodeIndex
	PodUID string
}

// Delta is one change to the cluster state (WIT variant `delta`): a
// NodeSet, NodeRemove, PodAdd or PodRemove.
type Delta interface{ isDelta() }

// NodeSet: a node appeared or changed. Its placed pods are kept.
type NodeSet struct {
	Index NodeIndex
	Node  Node
}

// NodeRemove: a node and all pods placed on it are gone.
type NodeRemove struct{ Index NodeIndex }

// PodAdd: a pod was placed on a node (pods reserved by the scheduler in
// the current run too).
type PodAdd struct{ Placement }

// PodRemove: a pod left a node (deleted, or a reservation undone).
type PodRemove struct{ Removal }

func (NodeSet) isDelta()    {}
func (NodeRemove) isDelta() {}
func (PodAdd) isDelta()     {}
func (PodRemove) isDelta()  {}

// Rejection says why a node does not fit the pod.
type Rejection struct {
	// Reason is short and countable, in kube-scheduler's style (`Not
	// enough GPU memory`): identical reasons are summed in the FitError
	// message, so put no node names or numbers here.
	Reason string
	// Unresolvable is true when no change on the node (such as evicting
	// pods) can make it fit: kube-scheduler's UnschedulableAndUnresolvable.
	Unresolvable bool
}

// Reject is a rejection the scheduler may resolve by changing the node
// (for example by preempting pods).
func Reject(reason string) *Rejection { return &Rejection{Reason: reason} }

// RejectUnresolvable is a rejection no change on the node can resolve
// (a wrong model, a label).
func RejectUnresolvable(reason string) *Rejection {
	return &Rejection{Reason: reason, Unresolvable: true}
}

// PodStatus is a running pod as the deletion-cost controller sees it.
type PodStatus struct {
	Pod Pod
	// Phase is `status.phase`: Pending, Running, Succeeded, Failed, Unknown.
	Phase string
	// Ready is the pod's Ready condition.
	Ready bool
	// AgeSeconds is the time since the pod was created.
	AgeSeconds int64
	// Restarts is the sum of container restart counts.
	Restarts uint32
}

// CyclePlan says which extension points matter for one pod
// (kube-scheduler's Skip from PreFilter and PreScore): a skipped Filter
// passes every node, a skipped Score counts for nothing.
type CyclePlan struct {
	Filter bool
	Score  bool
}

// LogLevel is the severity of a message logged through the host.
type LogLevel uint8

const (
	LogDebug LogLevel = iota
	LogInfo
	LogWarn
	LogError
)

func (l LogLevel) String() string {
	switch l {
	case LogDebug:
		return "debug"
	case LogInfo:
		return "info"
	case LogWarn:
		return "warn"
	case LogError:
		return "error"
	}
	return "invalid log-level"
}

// KeySelector says which keys of a label or annotation map a plugin reads
// (WIT variant `key-selector`): AllKeys, NoKeys or Keys.
type KeySelector interface{ isKeySelector() }

// AllKeys selects every key (what a plugin without Interests gets).
type AllKeys struct{}

// NoKeys selects no key: the map always arrives empty.
type NoKeys struct{}

// Keys selects these keys only; a key ending in `*` is a prefix
// (`network.wasmsched.io/*`).
type Keys []string

func (AllKeys) isKeySelector() {}
func (NoKeys) isKeySelector()  {}
func (Keys) isKeySelector()    {}

// KeyInterests says what a plugin reads of pods' and nodes' labels and
// annotations; the host then sends only those keys.
type KeyInterests struct {
	PodLabels       KeySelector
	PodAnnotations  KeySelector
	NodeLabels      KeySelector
	NodeAnnotations KeySelector
}

// PodPatch holds labels and annotations to write on a pod before it is
// bound (PreBind output). Empty maps write nothing.
type PodPatch struct {
	Labels      StringMap
	Annotations StringMap
}

// PermitDecision is Permit's verdict on the cycle's pod (WIT variant
// `permit-decision`): PermitAllow, PermitWait or PermitReject.
type PermitDecision interface{ isPermitDecision() }

// PermitAllow: bind now, as far as this plugin is concerned.
type PermitAllow struct{}

// PermitWait: keep the pod reserved and wait at most this many
// milliseconds; when the time is up the pod is rejected and unreserved.
type PermitWait uint32

// PermitReject: do not bind; unreserve the pod, with this reason.
type PermitReject string

func (PermitAllow) isPermitDecision()  {}
func (PermitWait) isPermitDecision()   {}
func (PermitReject) isPermitDecision() {}

// PermitResult is Permit's answer: the verdict on the cycle's pod, and the
// waiting pods (by uid) this plugin now allows.
type PermitResult struct {
	Decision     PermitDecision
	AllowWaiting []string
}

// Allow is Permit's plain "allow".
func Allow() PermitResult { return PermitResult{Decision: PermitAllow{}} }

// Victim is a pod that preemption would evict.
type Victim struct {
	Pod Pod
	// DeletionCost is `controller.kubernetes.io/pod-deletion-cost`, 0 when
	// unset or invalid.
	DeletionCost int32
	// StartTimeMs is `status.startTime` in milliseconds since the Unix
	// epoch (creation time when unknown).
	StartTimeMs int64
	// ViolatesBudget: evicting it would violate a PodDisruptionBudget.
	ViolatesBudget bool
}

// Candidate is a node where evicting Victims lets the preemptor fit.
type Candidate struct {
	Node    NodeIndex
	Victims []Victim
	// BudgetViolations is how many victims violate a PodDisruptionBudget.
	BudgetViolations uint32
}

// PreemptionAdvice is a policy's advice on preemption.
type PreemptionAdvice struct {
	// Vetoed pods (by uid) must not be evicted: every candidate that would
	// evict one of them is dropped.
	Vetoed []string
	// Ranking lists candidate positions (into the list given), best first.
	// Positions not listed keep the host's order after the listed ones; an
	// empty list keeps the host's order.
	Ranking []uint32
}
