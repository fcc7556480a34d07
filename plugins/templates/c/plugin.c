// {{name}}: a wasmsched scheduling policy, made by `wasmsched plugin new`.
//
// - Filter: a node labelled `example.com/avoid: "true"` takes no pods
//   (`node(s) marked example.com/avoid`, unresolvable).
// - Score: a node labelled `example.com/preferred: "true"` scores 100, any
//   other 0.
//
// The functions are the ones `wit-bindgen c` declares for the world in
// wit/world.wit ({{name_snake}}.h). Ownership: an exported function owns
// its arguments and frees them (the generated *_free functions); what it
// returns is freed by the generated post-return code, so returned strings
// are heap copies ({{name_snake}}_string_dup). CONTRACT_VERSION is defined
// by build.sh from wit/deps/plugin.wit's package line. Build, check and
// test: README.md.

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "{{name_snake}}.h"

#ifndef CONTRACT_VERSION
#error "CONTRACT_VERSION is defined by build.sh (from wit/deps/plugin.wit)"
#endif

#define AVOID_LABEL "example.com/avoid"
#define PREFERRED_LABEL "example.com/preferred"
#define AVOID_REASON "node(s) marked example.com/avoid"

typedef {{name_snake}}_string_t string_t;

// What the policy keeps of a node.
typedef struct {
  bool avoid;
  bool preferred;
} node_entry;

// Nodes by node index (small and dense: the scheduler's node table).
static node_entry *nodes = NULL;
static size_t nodes_len = 0;

static bool eq(const string_t *s, const char *lit) {
  size_t n = strlen(lit);
  return s->len == n && memcmp(s->ptr, lit, n) == 0;
}

static bool label_is(const wasmsched_plugin_types_string_map_t *map, const char *key, const char *value) {
  for (size_t i = 0; i < map->len; i++) {
    if (eq(&map->ptr[i].f0, key)) return eq(&map->ptr[i].f1, value);
  }
  return false;
}

void exports_wasmsched_plugin_lifecycle_contract_version(string_t *ret) {
  {{name_snake}}_string_dup(ret, CONTRACT_VERSION);
}

static bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool exports_wasmsched_plugin_lifecycle_init(string_t *args, string_t *err) {
  // The plugin's args (its `pluginConfig`): none yet, so empty text or {}.
  char seen[3] = {0};
  size_t n = 0;
  bool ok = true;
  for (size_t i = 0; i < args->len && ok; i++) {
    if (is_space(args->ptr[i])) continue;
    if (n == 2) ok = false; else seen[n++] = (char)args->ptr[i];
  }
  ok = ok && (n == 0 || (n == 2 && seen[0] == '{' && seen[1] == '}'));
  {{name_snake}}_string_free(args);
  if (!ok) {
    {{name_snake}}_string_dup(err, "{{name}} args: expected {} (this policy takes no args)");
    return false;
  }
  free(nodes);
  nodes = NULL;
  nodes_len = 0;
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
  nodes[index] = (node_entry){
    .avoid = label_is(&node->labels, AVOID_LABEL, "true"),
    .preferred = label_is(&node->labels, PREFERRED_LABEL, "true"),
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
        if (d->val.node_remove < nodes_len) nodes[d->val.node_remove] = (node_entry){0};
        break;
      default:
        break;  // Placed pods do not matter to this policy.
    }
  }
  exports_wasmsched_plugin_lifecycle_list_delta_free(deltas);
}

bool exports_wasmsched_plugin_lifecycle_cycle_start(exports_wasmsched_plugin_lifecycle_pod_t *pod,
                                                    exports_wasmsched_plugin_lifecycle_cycle_plan_t *ret,
                                                    string_t *err) {
  (void)err;
  ret->filter = true;
  ret->score = true;
  wasmsched_plugin_types_pod_free(pod);
  return true;
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
    bool avoid = index < nodes_len && nodes[index].avoid;
    ret->ptr[i].is_some = avoid;
    if (avoid) {
      {{name_snake}}_string_dup(&ret->ptr[i].val.reason, AVOID_REASON);
      ret->ptr[i].val.unresolvable = true;
    }
  }
  exports_wasmsched_plugin_filter_list_node_index_free(indices);
}

bool exports_wasmsched_plugin_score_score(exports_wasmsched_plugin_score_list_node_index_t *indices,
                                          {{name_snake}}_list_s64_t *ret, string_t *err) {
  (void)err;
  ret->len = indices->len;
  ret->ptr = NULL;
  if (indices->len > 0) {
    ret->ptr = malloc(indices->len * sizeof *ret->ptr);
    if (ret->ptr == NULL) abort();
  }
  for (size_t i = 0; i < indices->len; i++) {
    uint32_t index = indices->ptr[i];
    ret->ptr[i] = index < nodes_len && nodes[index].preferred ? 100 : 0;
  }
  exports_wasmsched_plugin_score_list_node_index_free(indices);
  return true;
}
