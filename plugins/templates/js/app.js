// {{name}}: a wasmsched scheduling policy, made by `wasmsched plugin new`.
//
// - Filter: a node labelled `example.com/avoid: "true"` takes no pods
//   (`node(s) marked example.com/avoid`, unresolvable).
// - Score: a node labelled `example.com/preferred: "true"` scores 100, any
//   other 0.
//
// One exported object per exported interface of the world in wit/world.wit,
// named after it in camelCase. Records are objects with camelCase fields,
// `list<tuple<string, string>>` an array of [key, value], a variant
// `{tag, val}`, `option` a value or undefined, `s64` a BigInt; a `result`'s
// error is thrown. CONTRACT_VERSION is defined by build.sh from
// wit/deps/plugin.wit's package line. Build, check and test: README.md.

const AVOID_LABEL = 'example.com/avoid';
const PREFERRED_LABEL = 'example.com/preferred';
const AVOID_REASON = 'node(s) marked example.com/avoid';

// What the policy keeps of each node, by node index.
const nodes = new Map();

function label(pairs, key) {
  for (const [k, v] of pairs) {
    if (k === key) return v;
  }
  return undefined;
}

export const lifecycle = {
  contractVersion() {
    return CONTRACT_VERSION;
  },

  init(args) {
    // The plugin's args (its `pluginConfig`): none yet.
    let parsed = {};
    if (args.trim() !== '') {
      try {
        parsed = JSON.parse(args);
      } catch (e) {
        throw `{{name}} args: ${e.message}`;
      }
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) ||
        Object.keys(parsed).length !== 0) {
      throw '{{name}} args: expected {} (this policy takes no args)';
    }
    nodes.clear();
  },

  apply(deltas) {
    for (const d of deltas) {
      if (d.tag === 'node-set') {
        const [index, node] = d.val;
        nodes.set(index, {
          avoid: label(node.labels, AVOID_LABEL) === 'true',
          preferred: label(node.labels, PREFERRED_LABEL) === 'true',
        });
      } else if (d.tag === 'node-remove') {
        nodes.delete(d.val);
      }
    }
  },

  cycleStart(pod) {
    return { filter: true, score: true };
  },
};

export const filter = {
  filter(indices) {
    return Array.from(indices, (i) =>
      nodes.get(i)?.avoid ? { reason: AVOID_REASON, unresolvable: true } : undefined);
  },
};

export const score = {
  score(indices) {
    return Array.from(indices, (i) => (nodes.get(i)?.preferred ? 100n : 0n));
  },
};
