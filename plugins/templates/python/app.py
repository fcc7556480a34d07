"""{{name}}: a wasmsched scheduling policy, made by `wasmsched plugin new`.

- Filter: a node labelled `example.com/avoid: "true"` takes no pods
  (`node(s) marked example.com/avoid`, unresolvable).
- Score: a node labelled `example.com/preferred: "true"` scores 100, any
  other 0.

One class per exported interface of the world in wit/world.wit, named after
it. The scheduler keeps this instance's copy of the cluster current through
`apply`; `filter` and `score` get node indices only. Build, check and test:
README.md.
"""

import json
from typing import Dict, List, Optional, Tuple

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports.types import CyclePlan, Delta, Delta_NodeRemove, Delta_NodeSet, Pod, Rejection

# Written by build.sh from wit/deps/plugin.wit's package line.
from contract import CONTRACT_VERSION

AVOID_LABEL = "example.com/avoid"
PREFERRED_LABEL = "example.com/preferred"
AVOID_REASON = "node(s) marked example.com/avoid"

# What the policy keeps of each node, by node index: (avoid, preferred).
nodes: Dict[int, Tuple[bool, bool]] = {}


def label(pairs, key: str) -> Optional[str]:
    for k, v in pairs:
        if k == key:
            return v
    return None


class Lifecycle(exports.Lifecycle):
    def contract_version(self) -> str:
        return CONTRACT_VERSION

    def init(self, args: str) -> None:
        # The plugin's args (its `pluginConfig`): none yet.
        try:
            parsed = json.loads(args) if args.strip() else {}
        except ValueError as e:
            raise Err(f"{{name}} args: {e}")
        if parsed != {}:
            raise Err("{{name}} args: expected {} (this policy takes no args)")
        nodes.clear()

    def apply(self, deltas: List[Delta]) -> None:
        for d in deltas:
            if isinstance(d, Delta_NodeSet):
                index, node = d.value
                nodes[index] = (
                    label(node.labels, AVOID_LABEL) == "true",
                    label(node.labels, PREFERRED_LABEL) == "true",
                )
            elif isinstance(d, Delta_NodeRemove):
                nodes.pop(d.value, None)

    def cycle_start(self, pod: Pod) -> CyclePlan:
        return CyclePlan(filter=True, score=True)


class Filter(exports.Filter):
    def filter(self, indices: List[int]) -> List[Optional[Rejection]]:
        return [
            Rejection(reason=AVOID_REASON, unresolvable=True) if nodes.get(i, (False, False))[0] else None
            for i in indices
        ]


class Score(exports.Score):
    def score(self, indices: List[int]) -> List[int]:
        return [100 if nodes.get(i, (False, False))[1] else 0 for i in indices]
