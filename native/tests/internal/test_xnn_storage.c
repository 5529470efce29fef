/*
 * test_xnn_storage.c - the XNNPACK backend's arena plan
 * (backends/xnnpack/storage.c, xnn_plan_storage) on random graphs, checked
 * against what the plan must keep: every stored value at a 64-byte offset
 * inside the arena with its capacity; two values whose lives meet (from
 * the node that writes one to the last node that reads it) never sharing a
 * byte, unless one is a StaticReshape's output aliasing its input; the
 * float32 storage of an fp16 external value clear of everything; values
 * stored elsewhere (constants, externals) given no offset. And that it
 * shares at all: a chain of same-sized nodes needs two buffers, not one per
 * value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/xnn_graph.h"
#include "check.h"

enum { MAXV = 48, MAXN = 40 };

static uint32_t first_of[MAXV], last_of[MAXV];

/* Lives as the plan defines them, computed the plain way. */
static void lives(const xnn_graph *g) {
  for (uint32_t v = 0; v < g->nvalues; v++) first_of[v] = UINT32_MAX, last_of[v] = 0;
  for (uint32_t i = 0; i < g->nnodes; i++) {
    const xnn_node *nd = &g->nodes[i];
    for (uint32_t k = 0; k < nd->nin; k++) {
      uint32_t v = nd->in[k];
      if (first_of[v] == UINT32_MAX) first_of[v] = 0;
      if (last_of[v] < i) last_of[v] = i;
    }
    for (uint32_t k = 0; k < nd->nout; k++) {
      uint32_t v = nd->out[k];
      if (first_of[v] == UINT32_MAX) first_of[v] = i;
      if (last_of[v] < i) last_of[v] = i;
    }
  }
  for (uint32_t v = 0; v < g->nvalues; v++) {
    if (g->values[v].half && g->values[v].flags) first_of[v] = 0, last_of[v] = g->nnodes;
    if (first_of[v] == UINT32_MAX) first_of[v] = last_of[v] = g->nnodes;
  }
}

/* v is y's input through a chain of aliasing reshapes (or y itself). */
static bool aliased(const xnn_graph *g, uint32_t x, uint32_t y) {
  for (int hops = 0; hops <= MAXN; hops++) {
    if (x == y) return true;
    uint32_t up = UINT32_MAX;
    for (uint32_t i = 0; i < g->nnodes; i++)
      if (g->nodes[i].type == XNN_NODE_static_reshape && g->nodes[i].out[0] == y) up = g->nodes[i].in[0];
    if (up == UINT32_MAX) return false;
    const xnn_value *a = &g->values[up], *b = &g->values[y];
    if (!xnn_stored_here(a) || a->flags || b->flags || a->datatype != b->datatype) return false;
    y = up;
  }
  return false;
}

static bool same_group(const xnn_graph *g, uint32_t a, uint32_t b) {
  /* both reach a common root through reshapes */
  for (uint32_t r = 0; r < g->nvalues; r++)
    if (aliased(g, r, a) && aliased(g, r, b)) return true;
  return false;
}

static void check_plan(const xnn_graph *g, const char *what) {
  uint64_t off[MAXV], total = 0;
  check_label = what;
  CHECK(xnn_plan_storage(g, off, &total) == PYEXEC_OK);
  lives(g);
  for (uint32_t v = 0; v < g->nvalues; v++) {
    const xnn_value *a = &g->values[v];
    if (!xnn_stored_here(a)) {
      CHECK(off[v] == UINT64_MAX, "value %u is stored elsewhere but got offset %llu", v, (unsigned long long)off[v]);
      continue;
    }
    CHECK(off[v] % 64 == 0 && off[v] + a->capacity <= total, "value %u at %llu (+%zu) in %llu bytes", v,
          (unsigned long long)off[v], a->capacity, (unsigned long long)total);
    for (uint32_t w = 0; w < v; w++) {
      const xnn_value *b = &g->values[w];
      if (!xnn_stored_here(b) || !a->capacity || !b->capacity) continue;
      bool meet = first_of[v] <= last_of[w] && first_of[w] <= last_of[v];
      bool overlap = off[v] < off[w] + b->capacity && off[w] < off[v] + a->capacity;
      if (same_group(g, v, w))
        CHECK(off[v] == off[w], "values %u and %u: a reshape's output is not its input's storage", w, v);
      else
        CHECK(!(meet && overlap), "values %u [%u, %u] and %u [%u, %u] share bytes", w, first_of[w], last_of[w], v,
              first_of[v], last_of[v]);
    }
  }
}

static xnn_value value(size_t capacity) {
  xnn_value v;
  memset(&v, 0, sizeof v);
  v.datatype = XNN_DT_FP32;
  v.num_dims = 1;
  v.capacity = capacity;
  v.external_id = XNN_INVALID_ID;
  return v;
}

static xnn_node node(uint8_t type, uint32_t nin, const uint32_t *in, uint32_t out) {
  xnn_node n;
  memset(&n, 0, sizeof n);
  n.type = type;
  n.nin = nin;
  for (uint32_t k = 0; k < nin; k++) n.in[k] = in[k];
  n.nout = 1;
  n.out[0] = out;
  return n;
}

/* A chain v0 -> v1 -> ... of equal sizes: two buffers, whatever its length. */
static void test_chain(void) {
  xnn_value vals[MAXV];
  xnn_node nodes[MAXN];
  xnn_graph g = {vals, 21, nodes, 20, 0, NULL, 0};
  for (uint32_t v = 0; v < g.nvalues; v++) vals[v] = value(1000);
  vals[0].flags = XNN_VALUE_EXTERNAL_INPUT;
  vals[20].flags = XNN_VALUE_EXTERNAL_OUTPUT;
  for (uint32_t i = 0; i < g.nnodes; i++) nodes[i] = node(XNN_NODE_clamp, 1, &i, i + 1);
  check_plan(&g, "chain");
  uint64_t off[MAXV], total = 0;
  xnn_plan_storage(&g, off, &total);
  CHECK(total == 2 * 1024, "a chain of 19 stored 1000-byte values takes %llu bytes", (unsigned long long)total);
}

/* Random graphs: each node reads one to three earlier values (or a
 * constant), some are reshapes, some values external or fp16 externals. */
static void test_random(void) {
  char label[64];
  for (int t = 0; t < 400; t++) {
    xnn_value vals[MAXV];
    xnn_node nodes[MAXN];
    const uint32_t nconst = 3, nin = 2, nn = (uint32_t)rnd_int(1, MAXN - 8);
    xnn_graph g = {vals, nconst + nin + nn, nodes, nn, 0, NULL, 0};
    for (uint32_t v = 0; v < g.nvalues; v++) vals[v] = value((size_t)rnd_int(0, 5000));
    for (uint32_t v = 0; v < nconst; v++) vals[v].constant = &vals[v];
    for (uint32_t v = nconst; v < nconst + nin; v++) {
      vals[v].flags = XNN_VALUE_EXTERNAL_INPUT;
      if (rnd() % 3 == 0) vals[v].half = XNN_DT_FP16;
    }
    for (uint32_t i = 0; i < nn; i++) {
      const uint32_t out = nconst + nin + i, avail = out;
      uint32_t in[3], k = (uint32_t)rnd_int(1, 3);
      for (uint32_t j = 0; j < k; j++) in[j] = rnd() % 4 == 0 ? rnd() % avail : avail - 1 - rnd() % (avail < 6 ? avail : 6);
      bool reshape = rnd() % 4 == 0;
      nodes[i] = node(reshape ? XNN_NODE_static_reshape : XNN_NODE_add, reshape ? 1 : k, in, out);
      if (reshape && rnd() % 5 == 0) vals[out].datatype = XNN_DT_QINT8; /* a different datatype: no alias */
      if (rnd() % 8 == 0) {
        vals[out].flags = XNN_VALUE_EXTERNAL_OUTPUT;
        if (rnd() % 2) vals[out].half = XNN_DT_BF16;
      }
    }
    snprintf(label, sizeof label, "random graph %d (%u nodes)", t, nn);
    check_plan(&g, label);
  }
}

int main(void) {
  test_chain();
  test_random();
  printf("test_xnn_storage: %d checks, %d failures\n", checks, failures);
  return failures != 0;
}
