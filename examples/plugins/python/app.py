"""spot-affinity in Python (componentize-py): the same policy as
examples/plugins/rust/src/lib.rs.

- A pod's class is its `wasmsched.io/workload-class` label: `batch` or
  `latency-critical` (absent: unclassified; anything else is an error that
  makes the pod unschedulable, naming the label).
- Filter: a node labelled `wasmsched.io/reserved-for: CLASS` takes only pods
  of that class.
- Score: on spot capacity (`karpenter.sh/capacity-type: spot`), batch pods
  score 100 and latency-critical pods 0; elsewhere the reverse.
  Unclassified pods skip Score.

The host keeps this instance's copy of the cluster current through
`apply`; per-node calls pass only node indices.
"""

import json
from typing import List, Optional

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import (
    CyclePlan,
    Delta,
    Delta_NodeRemove,
    Delta_NodeSet,
    LogLevel,
    Pod,
    Rejection,
)

CLASS_LABEL = "wasmsched.io/workload-class"
RESERVED_LABEL = "wasmsched.io/reserved-for"
CAPACITY_LABEL = "karpenter.sh/capacity-type"
RESERVED_REASON = "node(s) reserved for another workload class"
CLASSES = ("batch", "latency-critical")

# What this policy keeps of each node, by node index:
# (is spot capacity, reserved-for class or None).
nodes: dict = {}
# The current cycle's pod class (None: unclassified).
cycle_class: Optional[str] = None


def label(pairs, key: str) -> Optional[str]:
    for k, v in pairs:
        if k == key:
            return v
    return None


class Lifecycle(exports.Lifecycle):
    def contract_version(self) -> str:
        return "0.1.0"

    def init(self, args: str) -> None:
        try:
            parsed = json.loads(args) if args.strip() else {}
        except ValueError as e:
            raise Err(f"spot-affinity args: {e}")
        if parsed != {}:
            raise Err("spot-affinity args: expected {} (this policy takes no args)")
        nodes.clear()
        host.log(LogLevel.DEBUG, "spot-affinity (Python) ready")

    def apply(self, deltas: List[Delta]) -> None:
        for d in deltas:
            if isinstance(d, Delta_NodeSet):
                index, node = d.value
                nodes[index] = (
                    label(node.labels, CAPACITY_LABEL) == "spot",
                    label(node.labels, RESERVED_LABEL),
                )
            elif isinstance(d, Delta_NodeRemove):
                nodes.pop(d.value, None)
            # Placed pods do not matter to this policy.

    def cycle_start(self, pod: Pod) -> CyclePlan:
        global cycle_class
        cls = label(pod.labels, CLASS_LABEL)
        if cls is not None and cls not in CLASSES:
            raise Err(
                f'invalid label {CLASS_LABEL}="{cls}": expected batch or latency-critical'
            )
        cycle_class = cls
        return CyclePlan(filter=True, score=cls is not None)


class Filter(exports.Filter):
    def filter(self, indices: List[int]) -> List[Optional[Rejection]]:
        out: List[Optional[Rejection]] = []
        for i in indices:
            node = nodes.get(i)
            if node is None:
                out.append(Rejection(reason="node unknown to plugin", unresolvable=True))
            elif node[1] is not None and node[1] != cycle_class:
                out.append(Rejection(reason=RESERVED_REASON, unresolvable=True))
            else:
                out.append(None)
        return out


class Score(exports.Score):
    def score(self, indices: List[int]) -> List[int]:
        out: List[int] = []
        for i in indices:
            node = nodes.get(i)
            if node is None:
                raise Err(f"node index {i} unknown to plugin")
            spot = node[0]
            if (cycle_class == "batch" and spot) or (
                cycle_class == "latency-critical" and not spot
            ):
                out.append(100)
            else:
                out.append(0)
        return out
