// spot-affinity in C (clang + wasi-libc, bindings from `wit-bindgen c`):
// the same policy as examples/plugins/rust/src/lib.rs.
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
// Ownership (wit-bindgen's C ABI): an exported function owns its arguments
// and must free them (the generated *_free functions); what it returns is
// heap memory that the generated post-return code frees, so returned
// strings are duplicated (spot_affinity_string_dup), never static.

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spot_affinity.h"

#define CLASS_LABEL "wasmsched.io/workload-class"
#define RESERVED_LABEL "wasmsched.io/reserved-for"
#define CAPACITY_LABEL "karpenter.sh/capacity-type"
#define RESERVED_REASON "node(s) reserved for another workload class"

typedef enum { CLASS_NONE, CLASS_BATCH, CLASS_LATENCY_CRITICAL } pod_class;

// What this policy keeps of a node.
typedef struct {
  bool present;
  bool spot;
  // The reserved-for label: no label, one of the two classes, or another
  // value (which no pod's class can match).
  bool reserved;
  pod_class reserved_for;
} node_entry;

// Nodes by node index (indices are small and dense: the host's node table).
static node_entry *nodes = NULL;
static size_t nodes_len = 0;
// The current cycle's pod class.
static pod_class cycle_class = CLASS_NONE;

typedef spot_affinity_string_t string_t;

static bool eq(const string_t *s, const char *lit) {
  size_t n = strlen(lit);
  return s->len == n && memcmp(s->ptr, lit, n) == 0;
}

// The value of `key` in a label list, or NULL.
static const string_t *label(const wasmsched_plugin_types_string_map_t *map, const char *key) {
  for (size_t i = 0; i < map->len; i++) {
    if (eq(&map->ptr[i].f0, key)) return &map->ptr[i].f1;
  }
  return NULL;
}

// CLASS_NONE for a value that is not a class (callers tell the cases apart).
static pod_class class_of(const string_t *v) {
  if (eq(v, "batch")) return CLASS_BATCH;
  if (eq(v, "latency-critical")) return CLASS_LATENCY_CRITICAL;
  return CLASS_NONE;
}

static void log_debug(const char *message) {
  string_t s;
  spot_affinity_string_set(&s, message);  // borrowed by the import
  wasmsched_plugin_host_log(WASMSCHED_PLUGIN_TYPES_LOG_LEVEL_DEBUG, &s);
}

void exports_wasmsched_plugin_lifecycle_contract_version(string_t *ret) {
  spot_affinity_string_dup(ret, "0.1.0");
}

static bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool exports_wasmsched_plugin_lifecycle_init(string_t *args, string_t *err) {
  // The policy takes no args: empty text or an empty JSON object.
  char seen[3] = {0};
  size_t n = 0;
  bool ok = true;
  for (size_t i = 0; i < args->len && ok; i++) {
    if (is_space(args->ptr[i])) continue;
    if (n == 2) ok = false; else seen[n++] = (char)args->ptr[i];
  }
  ok = ok && (n == 0 || (n == 2 && seen[0] == '{' && seen[1] == '}'));
  spot_affinity_string_free(args);
  if (!ok) {
    spot_affinity_string_dup(err, "spot-affinity args: expected {} (this policy takes no args)");
    return false;
  }
  free(nodes);
  nodes = NULL;
  nodes_len = 0;
  log_debug("spot-affinity (C) ready");
  return true;
}

static void node_set(uint32_t index, const wasmsched_plugin_types_node_t *node) {
  if (index >= nodes_len) {
    size_t len = (size_t)index + 1;
    node_entry *grown = realloc(nodes, len * sizeof(node_entry));
    if (grown == NULL) abort();
    memset(grown + nodes_len, 0, (len - nodes_len) * sizeof(node_entry));
    nodes = grown;
    nodes_len = len;
  }
  const string_t *capacity = label(&node->labels, CAPACITY_LABEL);
  const string_t *reserved = label(&node->labels, RESERVED_LABEL);
  nodes[index] = (node_entry){
    .present = true,
    .spot = capacity != NULL && eq(capacity, "spot"),
    .reserved = reserved != NULL,
    .reserved_for = reserved != NULL ? class_of(reserved) : CLASS_NONE,
  };
}

void exports_wasmsched_plugin_lifecycle_apply(exports_wasmsched_plugin_lifecycle_list_delta_t *deltas) {
  for (size_t i = 0; i < deltas->len; i++) {
    const wasmsched_plugin_types_delta_t *d = &deltas->ptr[i];
    switch (d->tag) {
      case WASMSCHED_PLUGIN_TYPES_DELTA_NODE_SET:
        node_set(d->val.node_set.f0, &d->val.node_set.f1);
        break;
      case WASMSCHED_PLUGIN_TYPES_DELTA_NODE_REMOVE:
        if (d->val.node_remove < nodes_len) nodes[d->val.node_remove].present = false;
        break;
      default:
        break;  // Placed pods do not matter to this policy.
    }
  }
  exports_wasmsched_plugin_lifecycle_list_delta_free(deltas);
}

// `invalid label wasmsched.io/workload-class="VALUE": expected batch or latency-critical`
static void bad_class(string_t *err, const string_t *value) {
  static const char head[] = "invalid label " CLASS_LABEL "=\"";
  static const char tail[] = "\": expected batch or latency-critical";
  size_t len = sizeof head - 1 + value->len + sizeof tail - 1;
  char *msg = malloc(len);
  if (msg == NULL) abort();
  memcpy(msg, head, sizeof head - 1);
  memcpy(msg + sizeof head - 1, value->ptr, value->len);
  memcpy(msg + sizeof head - 1 + value->len, tail, sizeof tail - 1);
  err->ptr = (uint8_t *)msg;
  err->len = len;
}

bool exports_wasmsched_plugin_lifecycle_cycle_start(exports_wasmsched_plugin_lifecycle_pod_t *pod,
                                                    exports_wasmsched_plugin_lifecycle_cycle_plan_t *ret,
                                                    string_t *err) {
  const string_t *value = label(&pod->labels, CLASS_LABEL);
  pod_class cls = value != NULL ? class_of(value) : CLASS_NONE;
  bool ok = value == NULL || cls != CLASS_NONE;
  if (ok) {
    cycle_class = cls;
    ret->filter = true;
    ret->score = cls != CLASS_NONE;
  } else {
    bad_class(err, value);
  }
  wasmsched_plugin_types_pod_free(pod);
  return ok;
}

void exports_wasmsched_plugin_filter_filter(exports_wasmsched_plugin_filter_list_node_index_t *indices,
                                            exports_wasmsched_plugin_filter_list_option_rejection_t *ret) {
  ret->len = indices->len;
  ret->ptr = NULL;
  if (indices->len > 0) {
    ret->ptr = calloc(indices->len, sizeof *ret->ptr);
    if (ret->ptr == NULL) abort();
  }
  for (size_t i = 0; i < indices->len; i++) {
    uint32_t index = indices->ptr[i];
    exports_wasmsched_plugin_filter_option_rejection_t *out = &ret->ptr[i];
    const char *reason = NULL;
    if (index >= nodes_len || !nodes[index].present) {
      reason = "node unknown to plugin";
    } else if (nodes[index].reserved &&
               (nodes[index].reserved_for == CLASS_NONE || nodes[index].reserved_for != cycle_class)) {
      reason = RESERVED_REASON;
    }
    out->is_some = reason != NULL;
    if (reason != NULL) {
      spot_affinity_string_dup(&out->val.reason, reason);
      out->val.unresolvable = true;
    }
  }
  exports_wasmsched_plugin_filter_list_node_index_free(indices);
}

bool exports_wasmsched_plugin_score_score(exports_wasmsched_plugin_score_list_node_index_t *indices,
                                          spot_affinity_list_s64_t *ret, string_t *err) {
  bool ok = true;
  ret->len = indices->len;
  ret->ptr = NULL;
  if (indices->len > 0) {
    ret->ptr = malloc(indices->len * sizeof *ret->ptr);
    if (ret->ptr == NULL) abort();
  }
  for (size_t i = 0; i < indices->len && ok; i++) {
    uint32_t index = indices->ptr[i];
    if (index >= nodes_len || !nodes[index].present) {
      spot_affinity_string_dup(err, "node index unknown to plugin");
      ok = false;
      break;
    }
    bool spot = nodes[index].spot;
    bool prefers = (cycle_class == CLASS_BATCH && spot) || (cycle_class == CLASS_LATENCY_CRITICAL && !spot);
    ret->ptr[i] = prefers ? 100 : 0;
  }
  if (!ok) {
    free(ret->ptr);
    ret->ptr = NULL;
    ret->len = 0;
  }
  exports_wasmsched_plugin_score_list_node_index_free(indices);
  return ok;
}
