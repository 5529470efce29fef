/*
 * storage.c - where the values the backend stores live in its one arena
 * (xnn_plan_storage, xnn_graph.h).
 *
 * A value lives from the node that writes it to the last node that reads
 * it; two values whose lives do not meet may share bytes. A node's output
 * never shares with its inputs, since both are alive at that node. The
 * float32 storage of an fp16 / bf16 external value lives through the whole
 * call (bind widens into it before the first node, the end narrows out of
 * it after the last).
 *
 * A StaticReshape only renames bytes: where its input and output are both
 * stored here with the same datatype, the output is the input's storage
 * (its node then moves nothing), and the pair lives as one.
 *
 * Placement is XNNPACK's greedy one: the largest first, each at the lowest
 * offset clear of every placed value whose life meets its own. Offsets and
 * sizes are multiples of 64 bytes. A graph whose values never meet ends up
 * as large as one allocation per value (what the backend did before); the
 * nets of a model zoo come out at a few times their largest activation,
 * which keeps a layer's input and output in cache where they fit.
 */
#include <stdint.h>
#include <stdlib.h>

#include "backends/xnnpack/xnn_graph.h"
#include "core/error.h"

typedef struct {
  uint32_t first, last; /* node indices, inclusive */
  uint64_t size, off;
  uint32_t value;       /* the group's root value */
} life;

static uint32_t root_of(uint32_t *root, uint32_t v) {
  while (root[v] != v) v = root[v] = root[root[v]];
  return v;
}

static int by_size(const void *a, const void *b) {
  const life *x = a, *y = b;
  if (x->size != y->size) return x->size < y->size ? 1 : -1;
  return x->first < y->first ? -1 : x->first > y->first;
}

static int by_off(const void *a, const void *b) {
  const life *x = *(const life *const *)a, *y = *(const life *const *)b;
  return x->off < y->off ? -1 : x->off > y->off;
}

static uint64_t round64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

static bool aliasable(const xnn_graph *g, const xnn_node *nd) {
  if (nd->type != XNN_NODE_static_reshape || nd->nin < 1 || nd->nout < 1) return false;
  if (nd->in[0] >= g->nvalues || nd->out[0] >= g->nvalues) return false;
  const xnn_value *x = &g->values[nd->in[0]], *y = &g->values[nd->out[0]];
  return xnn_stored_here(x) && xnn_stored_here(y) && !x->flags && !y->flags && x->datatype == y->datatype &&
         x->datatype != XNN_DT_QDINT8;
}

pyexec_status xnn_plan_storage(const xnn_graph *g, uint64_t *offsets, uint64_t *total) {
  const uint32_t nv = g->nvalues, nn = g->nnodes;
  uint32_t *root = malloc(sizeof *root * ((size_t)nv + 1));
  life *lives = malloc(sizeof *lives * ((size_t)nv + 1));
  const life **placed = malloc(sizeof *placed * ((size_t)nv + 1));
  if (!root || !lives || !placed) {
    free(root), free(lives), free(placed);
    return px_no_memory("XNNPACK intermediate values");
  }
  for (uint32_t v = 0; v < nv; v++) {
    root[v] = v;
    /* untouched values: a life after the last node (nothing reads them) */
    lives[v] = (life){UINT32_MAX, 0, 0, 0, v};
    if (xnn_stored_here(&g->values[v]) && g->values[v].flags) lives[v].first = 0, lives[v].last = nn;
  }
  for (uint32_t i = 0; i < nn; i++) {
    const xnn_node *nd = &g->nodes[i];
    if (aliasable(g, nd)) root[root_of(root, nd->out[0])] = root_of(root, nd->in[0]);
    for (uint32_t k = 0; k < nd->nin + nd->nout; k++) {
      uint32_t v = k < nd->nin ? nd->in[k] : nd->out[k - nd->nin];
      if (v >= nv) continue; /* an absent optional input */
      /* read before any node writes it (no such payload is valid): alive from the start */
      if (lives[v].first == UINT32_MAX) lives[v].first = k < nd->nin ? 0 : i;
      if (lives[v].last < i) lives[v].last = i;
    }
  }
  /* each group's life and size at its root; a value no node reads or writes
   * (one a load-time rewrite took out of the graph) needs no bytes */
  for (uint32_t v = 0; v < nv; v++) {
    const bool untouched = lives[v].first == UINT32_MAX;
    if (untouched) lives[v].first = lives[v].last = nn;
    lives[v].size = xnn_stored_here(&g->values[v]) && !untouched ? round64(g->values[v].capacity) : 0;
  }
  for (uint32_t v = 0; v < nv; v++) {
    uint32_t r = root_of(root, v);
    if (r == v) continue;
    life *a = &lives[r];
    const life *b = &lives[v];
    if (b->first < a->first) a->first = b->first;
    if (b->last > a->last) a->last = b->last;
    if (b->size > a->size) a->size = b->size;
  }
  uint32_t ng = 0;
  for (uint32_t v = 0; v < nv; v++)
    if (root_of(root, v) == v && lives[v].size) lives[ng++] = lives[v];
  qsort(lives, ng, sizeof *lives, by_size);
  uint64_t end = 0;
  for (uint32_t i = 0; i < ng; i++) {
    life *l = &lives[i];
    uint32_t np = 0;
    for (uint32_t j = 0; j < i; j++)
      if (lives[j].first <= l->last && l->first <= lives[j].last) placed[np++] = &lives[j];
    qsort(placed, np, sizeof *placed, by_off);
    uint64_t off = 0;
    for (uint32_t j = 0; j < np && placed[j]->off < off + l->size; j++)
      if (placed[j]->off + placed[j]->size > off) off = placed[j]->off + placed[j]->size;
    l->off = off;
    if (off + l->size > end) end = off + l->size;
  }
  /* offsets by value: through the root's group (placed's memory is done with) */
  free(placed);
  uint64_t *group_off = malloc(sizeof *group_off * ((size_t)nv + 1));
  if (!group_off) {
    free(root), free(lives);
    return px_no_memory("XNNPACK intermediate values");
  }
  for (uint32_t v = 0; v < nv; v++) group_off[v] = UINT64_MAX;
  for (uint32_t i = 0; i < ng; i++) group_off[lives[i].value] = lives[i].off;
  for (uint32_t v = 0; v < nv; v++) {
    offsets[v] = UINT64_MAX;
    if (!xnn_stored_here(&g->values[v])) continue;
    const uint64_t o = group_off[root_of(root, v)];
    offsets[v] = o == UINT64_MAX ? 0 : o; /* an empty value (nothing placed): the arena's start */
  }
  *total = end;
  free(root), free(lives), free(group_off);
  return PYEXEC_OK;
}
