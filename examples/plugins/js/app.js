// spot-affinity in JavaScript (ComponentizeJS): the same policy as
// examples/plugins/rust/src/lib.rs.
//
// - A pod's class is its `wasmsched.io/workload-class` label: `batch` or
//   `latency-critical` (absent: unclassified; anything else is an error that
//   makes the pod unschedulable, naming the label).
// - Filter: a node labelled `wasmsched.io/reserved-for: CLASS` takes only
//   pods of that class.
// - Score: on spot capacity (`karpenter.sh/capacity-type: spot`), batch pods
//   score 100 and latency-critical pods 0; elsewhere the reverse.
//   Unclassified pods skip Score.
//
// Bindings (ComponentizeJS / jco conventions): each exported interface is an
// exported object named after it; records are objects with camelCase fields;
// `list<tuple<string, string>>` is an array of [key, value]; a variant is
// `{tag, val}`; `option` is a value or undefined; `s64` is a BigInt; a
// `result`'s error is thrown.

import { log } from 'wasmsched:plugin/host@0.1.0';

const CLASS_LABEL = 'wasmsched.io/workload-class';
const RESERVED_LABEL = 'wasmsched.io/reserved-for';
const CAPACITY_LABEL = 'karpenter.sh/capacity-type';
const RESERVED_REASON = 'node(s) reserved for another workload class';
const CLASSES = ['batch', 'latency-critical'];

// What this policy keeps of each node, by node index.
const nodes = new Map();
// The current cycle's pod class (undefined: unclassified).
let cycleClass;

function label(pairs, key) {
  for (const [k, v] of pairs) {
    if (k === key) return v;
  }
  return undefined;
}

export const lifecycle = {
  contractVersion() {
    return '0.1.0';
  },

  init(args) {
    let parsed = {};
    if (args.trim() !== '') {
      try {
        parsed = JSON.parse(args);
      } catch (e) {
        throw `spot-affinity args: ${e.message}`;
      }
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) ||
        Object.keys(parsed).length !== 0) {
      throw 'spot-affinity args: expected {} (this policy takes no args)';
    }
    nodes.clear();
    log('debug', 'spot-affinity (JavaScript) ready');
  },

  apply(deltas) {
    for (const d of deltas) {
      if (d.tag === 'node-set') {
        const [index, node] = d.val;
        nodes.set(index, {
          spot: label(node.labels, CAPACITY_LABEL) === 'spot',
          reservedFor: label(node.labels, RESERVED_LABEL),
        });
      } else if (d.tag === 'node-remove') {
        nodes.delete(d.val);
      }
      // Placed pods do not matter to this policy.
    }
  },

  cycleStart(pod) {
    const cls = label(pod.labels, CLASS_LABEL);
    if (cls !== undefined && !CLASSES.includes(cls)) {
      throw `invalid label ${CLASS_LABEL}="${cls}": expected batch or latency-critical`;
    }
    cycleClass = cls;
    return { filter: true, score: cls !== undefined };
  },
};

export const filter = {
  filter(indices) {
    return Array.from(indices, (i) => {
      const node = nodes.get(i);
      if (node === undefined) {
        return { reason: 'node unknown to plugin', unresolvable: true };
      }
      if (node.reservedFor !== undefined && node.reservedFor !== cycleClass) {
        return { reason: RESERVED_REASON, unresolvable: true };
      }
      return undefined;
    });
  },
};

export const score = {
  score(indices) {
    return Array.from(indices, (i) => {
      const node = nodes.get(i);
      if (node === undefined) throw `node index ${i} unknown to plugin`;
      const prefers = (cycleClass === 'batch' && node.spot) ||
        (cycleClass === 'latency-critical' && !node.spot);
      return prefers ? 100n : 0n;
    });
  },
};
