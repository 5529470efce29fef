/*
 * program.c - loading a .pte file: the (optional) extended header, segments,
 * constant and mutable-buffer data, the plans, and validated tensor
 * descriptions, the plans' inputs, outputs and operator names. The queries
 * that need the kernel registry or the backends (what a method uses and
 * lacks, its inputs' metadata) are runtime/program_info.c's.
 */
#include "loader/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/error.h"
#include "core/limits.h"
#include "loader/bundle.h"
#include "loader/file_map.h"

#define BAD(...) px_invalid_program(__VA_ARGS__)

static uint64_t rd_u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static uint32_t rd_u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* Bytes [off, off+n) of the file, or an error naming `what`. */
static pyexec_status file_range(const pyexec_program *p, uint64_t off, uint64_t n,
                                const char *what, const uint8_t **out) {
  if (off > p->size || n > p->size - off)
    return BAD("%s (offset %llu, %llu bytes) lies outside the %zu-byte file", what,
               (unsigned long long)off, (unsigned long long)n, p->size);
  *out = p->data + off;
  return PYEXEC_OK;
}

static pyexec_status segment_bytes(const pyexec_program *p, uint32_t index, const char *what,
                                   const uint8_t **base, size_t *len) {
  if (index >= p->segments.count)
    return BAD("%s refers to segment %u, but the program has %u segments", what, index,
               p->segments.count);
  px_fb_table seg;
  uint64_t off, size;
  if (!px_fb_vec_table(&p->segments, index, &seg) ||
      !px_fb_u64(&seg, SEGMENT_OFFSET, 0, &off) || !px_fb_u64(&seg, SEGMENT_SIZE, 0, &size))
    return BAD("segment %u is malformed", index);
  if (p->seg_base == 0 && size > 0)
    return BAD("%s: segment %u holds data, but the file has no extended header locating segments", what, index);
  if (off > UINT64_MAX - p->seg_base)
    return BAD("segment %u offset overflows", index);
  pyexec_status st = file_range(p, p->seg_base + off, size, what, base);
  if (st) return st;
  *len = (size_t)size;
  return PYEXEC_OK;
}

static pyexec_status parse(pyexec_program *p) {
  const uint8_t *d = p->data;
  if (p->size < 8) return BAD("file is %zu bytes, too small for an ExecuTorch program", p->size);
  if (memcmp(d + 4, "ET12", 4) != 0) {
    if (d[4] == 'E' && d[5] == 'T')
      return px_unsupported("program file identifier '%.4s' is not supported (expected 'ET12')",
                            (const char *)d + 4);
    return BAD("not an ExecuTorch program: file identifier is not 'ET12'%s",
               p->bundle ? " (in the program inside the bundled program)" : "");
  }
  size_t fb_len = p->size;
  p->seg_base = 0;
  if (p->size >= 16 && memcmp(d + 8, "eh00", 4) == 0) {
    uint32_t hlen = rd_u32(d + 12);
    if (hlen < 24 || 8 + (uint64_t)hlen > p->size)
      return BAD("extended header length %u is invalid", hlen);
    uint64_t program_size = rd_u64(d + 16);
    uint64_t seg_base = rd_u64(d + 24);
    uint64_t seg_size = hlen >= 32 ? rd_u64(d + 32) : 0;
    if (program_size < 8 || program_size > p->size)
      return BAD("header says the program is %llu bytes, the file has %zu",
                 (unsigned long long)program_size, p->size);
    if (seg_base != 0) {
      if (seg_base < program_size || seg_base > p->size)
        return BAD("segment base offset %llu is outside the file", (unsigned long long)seg_base);
      if (seg_size > p->size - seg_base)
        return BAD("file is truncated: segments need %llu bytes after offset %llu, the file has %zu",
                   (unsigned long long)seg_size, (unsigned long long)seg_base, p->size);
    }
    fb_len = (size_t)program_size;
    p->seg_base = seg_base;
  }
  if (!px_fb_root(d, fb_len, &p->root)) return BAD("program root table is out of bounds");

  px_fb_vec plans;
  if (!px_fb_vector(&p->root, PROG_PLANS, 4, &plans)) return BAD("execution_plan is malformed");
  if (!px_fb_vector(&p->root, PROG_SEGMENTS, 4, &p->segments)) return BAD("segments are malformed");

  p->plans = calloc(plans.count ? plans.count : 1, sizeof *p->plans);
  if (!p->plans) return px_no_memory("plan table");
  for (uint32_t i = 0; i < plans.count; i++) {
    px_plan *pl = &p->plans[i];
    const char *s;
    uint32_t n;
    if (!px_fb_vec_table(&plans, i, &pl->table) || !px_fb_string(&pl->table, PLAN_NAME, &s, &n))
      return BAD("execution plan %u is malformed", i);
    if (!px_fb_valid_name(s, n)) return BAD("execution plan %u: name is not valid UTF-8", i);
    pl->name = malloc((size_t)n + 1);
    if (!pl->name) return px_no_memory("plan name");
    memcpy(pl->name, s, n);
    pl->name[n] = 0;
    p->nplans = i + 1;
  }

  /* Constants. */
  px_fb_table cs;
  bool present;
  if (!px_fb_subtable(&p->root, PROG_CONST_SEGMENT, &cs, &present))
    return BAD("constant_segment is malformed");
  if (present) {
    uint32_t seg;
    if (!px_fb_u32(&cs, SUBSEG_INDEX, 0, &seg) || !px_fb_vector(&cs, SUBSEG_OFFSETS, 8, &p->const_offsets))
      return BAD("constant_segment is malformed");
    if (p->const_offsets.count > 1) {
      pyexec_status st = segment_bytes(p, seg, "constant segment", &p->const_base, &p->const_len);
      if (st) return st;
      p->const_in_segment = true;
    }
  }
  if (!px_fb_vector(&p->root, PROG_CONST_BUFFER, 4, &p->const_buffers))
    return BAD("constant_buffer is malformed");

  /* Initial values of mutable buffers (ExecuTorch uses entry 0 only). */
  px_fb_vec muts;
  if (!px_fb_vector(&p->root, PROG_MUTABLE_SEGMENTS, 4, &muts))
    return BAD("mutable_data_segments is malformed");
  if (muts.count > 0) {
    px_fb_table m;
    uint32_t seg;
    if (!px_fb_vec_table(&muts, 0, &m) || !px_fb_u32(&m, SUBSEG_INDEX, 0, &seg) ||
        !px_fb_vector(&m, SUBSEG_OFFSETS, 8, &p->mut_offsets))
      return BAD("mutable_data_segments[0] is malformed");
    pyexec_status st = segment_bytes(p, seg, "mutable data segment", &p->mut_base, &p->mut_len);
    if (st) return st;
    p->has_mutable = true;
  }

  /* Data for backends: read per delegate / key, checked when used. */
  if (!px_fb_vector(&p->root, PROG_DELEGATE_DATA, 4, &p->delegate_data))
    return BAD("backend_delegate_data is malformed");
  if (!px_fb_vector(&p->root, PROG_NAMED_DATA, 4, &p->named_data)) return BAD("named_data is malformed");
  return PYEXEC_OK;
}

static pyexec_status finish_load(pyexec_program *p, pyexec_program **out) {
  pyexec_status st = px_bundle_unwrap(p);
  if (!st) st = parse(p);
  if (st) {
    px_program_free(p);
    return st;
  }
  *out = p;
  return PYEXEC_OK;
}

pyexec_status px_program_load_file(const char *path, pyexec_program **out) {
  if (!path || !out) return px_invalid_argument("path and out must not be NULL");
  void *map;
  size_t size;
  px_file_id id;
  pyexec_status st = px_map_file(path, NULL, &map, &size, &id);
  if (st) return st;
  if (size < 8) {
    if (map) munmap(map, size);
    return BAD("'%s' is %zu bytes, too small for an ExecuTorch program", path, size);
  }
  pyexec_program *p = calloc(1, sizeof *p);
  if (!p) {
    munmap(map, size);
    return px_no_memory("program");
  }
  p->map = map;
  p->map_len = size;
  p->data = map;
  p->size = size;
  p->file_id = id;
  return finish_load(p, out);
}

pyexec_status px_program_load_buffer(const void *data, size_t size, pyexec_program **out) {
  if ((!data && size) || !out) return px_invalid_argument("data and out must not be NULL");
  pyexec_program *p = calloc(1, sizeof *p);
  if (!p) return px_no_memory("program");
  p->owned = aligned_alloc(64, (size + 63) & ~(size_t)63);
  if (!p->owned && size) {
    free(p);
    return px_no_memory("program copy");
  }
  if (size) memcpy(p->owned, data, size);
  p->data = p->owned;
  p->size = size;
  return finish_load(p, out);
}

pyexec_status px_program_load_borrowed(const void *data, size_t size, pyexec_program **out) {
  if ((!data && size) || !out) return px_invalid_argument("data and out must not be NULL");
  if ((uintptr_t)data % 16)
    return px_invalid_argument("borrowed program data must be 16-byte aligned");
  pyexec_program *p = calloc(1, sizeof *p);
  if (!p) return px_no_memory("program");
  p->data = data;
  p->size = size;
  return finish_load(p, out);
}

void px_program_free(pyexec_program *p) {
  if (!p) return;
  for (uint32_t i = 0; i < p->nplans; i++) free(p->plans[i].name);
  free(p->plans);
  px_data_map_free(p->data_map);
  px_bundle_free(p);
  if (p->map) munmap(p->map, p->map_len);
  free(p->owned);
  free(p);
}

size_t px_program_method_count(const pyexec_program *p) {
  return p ? p->nplans : 0;
}

const char *px_program_method_name(const pyexec_program *p, size_t index) {
  return p && index < p->nplans ? p->plans[index].name : NULL;
}

const px_plan *px_program_plan(const pyexec_program *p, const char *name) {
  for (uint32_t i = 0; i < p->nplans; i++)
    if (strcmp(p->plans[i].name, name) == 0) return &p->plans[i];
  size_t cap;
  char *buf = px_error_buffer(&cap);
  size_t n = (size_t)snprintf(buf, cap, "program has no method '%s' (methods:", name);
  for (uint32_t i = 0; i < p->nplans && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s '%s'", i ? "," : "", p->plans[i].name);
  if (n < cap) snprintf(buf + n, cap - n, ")");
  return NULL;
}

/* ---- values and tensors ----------------------------------------------- */

pyexec_status px_plan_value(const pyexec_program *p, const px_plan *plan, int64_t index,
                            int *tag, px_fb_table *payload) {
  (void)p;
  px_fb_vec values;
  if (!px_fb_vector(&plan->table, PLAN_VALUES, 4, &values)) return BAD("values are malformed");
  if (index < 0 || index >= values.count)
    return BAD("value index %lld is out of range (%u values)", (long long)index, values.count);
  px_fb_table ev;
  uint8_t type;
  bool present;
  if (!px_fb_vec_table(&values, (uint32_t)index, &ev) || !px_fb_u8(&ev, EVALUE_TYPE, 0, &type))
    return BAD("value %lld is malformed", (long long)index);
  if (type > PX_V_OPT_TENSOR_LIST)
    return BAD("value %lld has unknown type %u", (long long)index, type);
  if (type <= 1) {
    *tag = PX_V_NONE;
    return PYEXEC_OK;
  }
  if (!px_fb_subtable(&ev, EVALUE_VAL, payload, &present) || !present)
    return BAD("value %lld has no payload", (long long)index);
  *tag = type;
  return PYEXEC_OK;
}

pyexec_status px_parse_tensor(const pyexec_program *p, const px_fb_table *t, const char *where,
                              px_tensor_desc *d) {
  (void)p;
  memset(d, 0, sizeof *d);
  int8_t st, dyn, layout;
  int32_t storage_offset;
  px_fb_vec sizes, order;
  if (!px_fb_i8(t, TENSOR_SCALAR_TYPE, 0, &st) ||
      !px_fb_i32(t, TENSOR_STORAGE_OFFSET, 0, &storage_offset) ||
      !px_fb_vector(t, TENSOR_SIZES, 4, &sizes) || !px_fb_vector(t, TENSOR_DIM_ORDER, 1, &order) ||
      !px_fb_u32(t, TENSOR_DATA_BUFFER_IDX, 0, &d->data_buffer_idx) ||
      !px_fb_i8(t, TENSOR_LAYOUT, 0, &layout) || !px_fb_i8(t, TENSOR_SHAPE_DYNAMISM, 0, &dyn))
    return BAD("%s: tensor is malformed", where);
  if (!px_dtype_supported(st))
    return px_unsupported("%s: dtype %s (ScalarType %d) is not supported", where,
                          px_dtype_name(st), st);
  if (storage_offset != 0)
    return px_unsupported("%s: tensor has storage_offset %d (only 0 is supported)", where,
                          storage_offset);
  if (dyn == 2)
    return px_unsupported("%s: unbounded dynamic shapes (DYNAMIC_UNBOUND) are not supported", where);
  if (dyn < 0 || dyn > 2) return BAD("%s: unknown shape_dynamism %d", where, dyn);
  if (layout != 0) return px_unsupported("%s: only strided tensors are supported (layout %d)", where, layout);
  if (sizes.count > PX_MAX_DIM)
    return px_unsupported("%s: rank %u exceeds the maximum of %d", where, sizes.count, PX_MAX_DIM);
  if (order.count != sizes.count)
    return BAD("%s: dim_order has %u entries for a rank-%u tensor", where, order.count, sizes.count);
  d->dtype = st;
  d->dim = (int)sizes.count;
  d->dynamic = dyn == 1;
  d->contiguous = true;
  unsigned seen = 0;
  /* numel, and span: the product of the nonzero sizes, which the strides
   * are (a zero size makes numel 0 however large the others are) */
  uint64_t numel = 1, span = 1;
  const uint64_t limit = (uint64_t)1 << 56;
  for (int k = 0; k < d->dim; k++) {
    int32_t s = px_fb_vec_i32(&sizes, (uint32_t)k);
    uint8_t o = px_fb_vec_u8(&order, (uint32_t)k);
    if (s < 0) return BAD("%s: negative size %d at dim %d", where, s, k);
    if (o >= d->dim || (seen & (1u << o))) return BAD("%s: dim_order is not a permutation", where);
    seen |= 1u << o;
    d->sizes[k] = s;
    d->dim_order[k] = o;
    if (o != k) d->contiguous = false;
    if (s && span > limit / (uint64_t)s) return BAD("%s: element count overflows", where);
    if (s) span *= (uint64_t)s;
    numel *= (uint64_t)s;
  }
  if (numel * px_elsize(st) > px_max_declared_bytes)
    return BAD("%s: tensor of %llu bytes exceeds the limit of %llu bytes", where,
               (unsigned long long)(numel * px_elsize(st)), (unsigned long long)px_max_declared_bytes);
  d->nbytes = (size_t)(numel * px_elsize(st));

  px_fb_table extra;
  bool present;
  if (!px_fb_subtable(t, TENSOR_EXTRA_INFO, &extra, &present)) return BAD("%s: extra_tensor_info is malformed", where);
  if (present) {
    int8_t loc, dev;
    if (!px_fb_i8(&extra, EXTRA_LOCATION, 0, &loc) || !px_fb_i8(&extra, EXTRA_DEVICE_TYPE, 0, &dev))
      return BAD("%s: extra_tensor_info is malformed", where);
    /* The name: an external tensor's key in the data file; a mutable
     * buffer's (or parameter's) name when the exporter emits it, which makes
     * the tensor one of the method's attributes. */
    if (!px_fb_string(&extra, EXTRA_FQN, &d->fqn, &d->fqn_len))
      return BAD("%s: extra_tensor_info.fully_qualified_name is malformed", where);
    if (d->fqn_len && !px_fb_valid_name(d->fqn, d->fqn_len))
      return BAD("%s: extra_tensor_info.fully_qualified_name is not valid UTF-8", where);
    if (loc == 1) { /* EXTERNAL: the bytes are in a data file, under the tensor's name */
      if (d->fqn_len == 0)
        return BAD("%s: tensor is external but has no fully_qualified_name", where);
      d->external = true;
    } else if (loc != 0) {
      return BAD("%s: extra_tensor_info.location %d is unknown", where, loc);
    }
    if (dev != 0)
      return px_unsupported("%s: tensor is on device %s (device type %d), and pyexec runs tensors on the CPU only",
                            where, dev == 1 ? "cuda" : "other than the CPU", dev);
  }
  px_fb_table alloc;
  if (!px_fb_subtable(t, TENSOR_ALLOCATION_INFO, &alloc, &present)) return BAD("%s: allocation_info is malformed", where);
  if (present) {
    uint32_t lo, hi;
    if (!px_fb_u32(&alloc, ALLOC_MEMORY_ID, 0, &d->memory_id) || !px_fb_u32(&alloc, ALLOC_OFFSET_LOW, 0, &lo) ||
        !px_fb_u32(&alloc, ALLOC_OFFSET_HIGH, 0, &hi))
      return BAD("%s: allocation_info is malformed", where);
    d->has_alloc = true;
    d->offset = ((uint64_t)hi << 32) | lo;
  }
  return PYEXEC_OK;
}

pyexec_status px_program_constant(const pyexec_program *p, uint32_t idx, size_t nbytes, size_t align,
                                  const uint8_t **out) {
  const uint8_t *ptr;
  if (p->const_in_segment) {
    if (idx >= p->const_offsets.count)
      return BAD("constant %u is out of range (%u constants)", idx, p->const_offsets.count);
    uint64_t off = px_fb_vec_u64(&p->const_offsets, idx);
    if (off > p->const_len || nbytes > p->const_len - off)
      return BAD("constant %u (%zu bytes at offset %llu) lies outside the %zu-byte constant segment",
                 idx, nbytes, (unsigned long long)off, p->const_len);
    ptr = p->const_base + off;
  } else {
    if (idx >= p->const_buffers.count)
      return BAD("constant %u is out of range (%u constant buffers)", idx, p->const_buffers.count);
    px_fb_table b;
    px_fb_vec storage;
    if (!px_fb_vec_table(&p->const_buffers, idx, &b) || !px_fb_vector(&b, BUFFER_STORAGE, 1, &storage))
      return BAD("constant buffer %u is malformed", idx);
    if (nbytes > storage.count)
      return BAD("constant buffer %u holds %u bytes, the tensor needs %zu", idx, storage.count, nbytes);
    ptr = storage.buf + storage.pos;
  }
  if (align > 1 && (uintptr_t)ptr % align)
    return BAD("constant %u is not aligned to its element size", idx);
  *out = ptr;
  return PYEXEC_OK;
}

pyexec_status px_program_mutable_init(const pyexec_program *p, uint32_t idx, size_t nbytes,
                                      const uint8_t **out) {
  if (!p->has_mutable)
    return BAD("tensor refers to mutable data %u, but the program has no mutable data segment", idx);
  if (idx >= p->mut_offsets.count)
    return BAD("mutable data %u is out of range (%u entries)", idx, p->mut_offsets.count);
  uint64_t off = px_fb_vec_u64(&p->mut_offsets, idx);
  if (off > p->mut_len || nbytes > p->mut_len - off)
    return BAD("mutable data %u (%zu bytes at offset %llu) lies outside its %zu-byte segment", idx,
               nbytes, (unsigned long long)off, p->mut_len);
  *out = p->mut_base + off;
  return PYEXEC_OK;
}

/* ---- external data (.ptd) ------------------------------------------------ */

/* "float32[8, 4]", with " dim_order (1, 0)" when not row-major. */
static void format_layout(char *buf, size_t cap, int dtype, int dim, const int64_t *sizes, const uint8_t *order) {
  size_t n = (size_t)snprintf(buf, cap, "%s[", px_dtype_name(dtype));
  for (int k = 0; k < dim && n < cap; k++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", k ? ", " : "", (long long)sizes[k]);
  if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "]");
  bool row_major = true;
  for (int k = 0; k < dim; k++) row_major = row_major && order[k] == k;
  if (row_major) return;
  for (int k = 0; k < dim && n < cap; k++) n += (size_t)snprintf(buf + n, cap - n, "%s%u", k ? ", " : " dim_order (", order[k]);
  if (n < cap) snprintf(buf + n, cap - n, ")");
}

pyexec_status px_program_external_tensor(const pyexec_program *p, const px_tensor_desc *d, const char *where,
                                         const uint8_t **out) {
  char key[96];
  px_data_key_display(d->fqn, d->fqn_len, key, sizeof key);
  if (!p->data_map)
    return BAD("%s: tensor '%s' is stored in a separate data file (.ptd); load the program with its data file",
               where, key);
  const px_data_entry *e = px_data_map_find(p->data_map, d->fqn, d->fqn_len);
  if (!e) return BAD("%s: tensor '%s' is not in the data file (%u entries)", where, key, p->data_map->count);
  px_data_layout lay;
  pyexec_status st = px_data_map_layout(p->data_map, e, &lay);
  if (st) return st;
  if (!lay.present) return BAD("%s: tensor '%s': the data file's entry has no tensor layout", where, key);
  bool same = lay.dtype == d->dtype && lay.dim == d->dim;
  for (int k = 0; same && k < d->dim; k++) same = lay.sizes[k] == d->sizes[k] && lay.dim_order[k] == d->dim_order[k];
  if (!same) {
    char want[256], have[256];
    format_layout(want, sizeof want, d->dtype, d->dim, d->sizes, d->dim_order);
    format_layout(have, sizeof have, lay.dtype, lay.dim, lay.sizes, lay.dim_order);
    return BAD("%s: tensor '%s' layout mismatch: the program expects %s, the data file holds %s", where, key, want,
               have);
  }
  if (e->size < d->nbytes)
    return BAD("%s: tensor '%s' needs %zu bytes, the data file holds %zu", where, key, d->nbytes, e->size);
  size_t align = px_elsize(d->dtype);
  if (align > 1 && (uintptr_t)e->data % align)
    return BAD("%s: tensor '%s' is not aligned to its element size in the data file", where, key);
  *out = e->data;
  return PYEXEC_OK;
}

static pyexec_status attach(pyexec_program *p, px_data_map *dm) {
  /* The merged map delegates see holds each key once. */
  for (uint32_t i = 0; i < p->named_data.count; i++) {
    px_fb_table nd;
    const char *k;
    uint32_t kn;
    if (!px_fb_vec_table(&p->named_data, i, &nd) || !px_fb_string(&nd, NAMED_DATA_KEY, &k, &kn)) {
      px_data_map_free(dm);
      return BAD("named_data[%u] is malformed", i);
    }
    if (px_data_map_find(dm, k, kn)) {
      char shown[96];
      px_data_key_display(k, kn, shown, sizeof shown);
      px_data_map_free(dm);
      return BAD("named data key '%s' is both in the data file and in the program", shown);
    }
  }
  p->data_map = dm;
  return PYEXEC_OK;
}

pyexec_status px_program_attach_data_file(pyexec_program *p, const char *path) {
  if (!p || !path) return px_invalid_argument("program and path must not be NULL");
  if (p->data_map) return px_invalid_argument("the program already has a data file");
  px_data_map *dm;
  pyexec_status st = px_data_map_load_file(path, &dm);
  return st ? st : attach(p, dm);
}

pyexec_status px_program_attach_data_buffer(pyexec_program *p, const void *data, size_t size) {
  if (!p || (!data && size)) return px_invalid_argument("program and data must not be NULL");
  if (p->data_map) return px_invalid_argument("the program already has a data file");
  px_data_map *dm;
  pyexec_status st = px_data_map_load_buffer(data, size, &dm);
  return st ? st : attach(p, dm);
}

/* ---- delegates and named data -------------------------------------------- */

pyexec_status px_plan_delegate_count(const px_plan *plan, uint32_t *count) {
  px_fb_vec dels;
  if (!px_fb_vector(&plan->table, PLAN_DELEGATES, 4, &dels)) return BAD("delegates are malformed");
  *count = dels.count;
  return PYEXEC_OK;
}

pyexec_status px_plan_delegate(const pyexec_program *p, const px_plan *plan, uint32_t index,
                               px_delegate_desc *out) {
  memset(out, 0, sizeof *out);
  px_fb_vec dels;
  px_fb_table d, ref;
  bool present;
  if (!px_fb_vector(&plan->table, PLAN_DELEGATES, 4, &dels)) return BAD("delegates are malformed");
  if (index >= dels.count) return BAD("delegate %u is out of range (%u delegates)", index, dels.count);
  if (!px_fb_vec_table(&dels, index, &d) || !px_fb_string(&d, DELEGATE_ID, &out->id, &out->id_len))
    return BAD("delegate %u is malformed", index);
  if (!px_fb_valid_name(out->id, out->id_len)) return BAD("delegate %u: id is not valid UTF-8", index);
  if (!px_fb_vector(&d, DELEGATE_COMPILE_SPECS, 4, &out->specs))
    return BAD("delegate %u: compile_specs are malformed", index);
  if (!px_fb_subtable(&d, DELEGATE_PROCESSED, &ref, &present)) return BAD("delegate %u: processed is malformed", index);
  if (!present) return BAD("delegate %u: processed (the payload reference) is missing", index);
  uint8_t loc;
  uint32_t di;
  if (!px_fb_u8(&ref, DATAREF_LOCATION, 0, &loc) || !px_fb_u32(&ref, DATAREF_INDEX, 0, &di))
    return BAD("delegate %u: processed is malformed", index);
  char what[64];
  snprintf(what, sizeof what, "delegate %u payload", index);
  if (loc == DATALOC_SEGMENT) return segment_bytes(p, di, what, &out->data, &out->size);
  if (loc != DATALOC_INLINE) return BAD("delegate %u: processed.location %u is unknown", index, loc);
  if (di >= p->delegate_data.count)
    return BAD("delegate %u: processed.index %u is out of range (%u inline payloads)", index, di,
               p->delegate_data.count);
  px_fb_table inl;
  px_fb_vec bytes;
  if (!px_fb_vec_table(&p->delegate_data, di, &inl) || !px_fb_vector(&inl, INLINE_DATA, 1, &bytes))
    return BAD("backend_delegate_data[%u] is malformed", di);
  out->data = bytes.buf + bytes.pos;
  out->size = bytes.count;
  return PYEXEC_OK;
}

pyexec_status px_program_compile_spec(const px_delegate_desc *d, uint32_t k, const char **key,
                                      uint32_t *key_len, const uint8_t **value, size_t *value_len) {
  px_fb_table cs;
  px_fb_vec v;
  if (k >= d->specs.count || !px_fb_vec_table(&d->specs, k, &cs) ||
      !px_fb_string(&cs, COMPILE_SPEC_KEY, key, key_len) || !px_fb_vector(&cs, COMPILE_SPEC_VALUE, 1, &v))
    return BAD("delegate '%.*s': compile spec %u is malformed", (int)(d->id_len > 200 ? 200 : d->id_len), d->id, k);
  *value = v.buf + v.pos;
  *value_len = v.count;
  return PYEXEC_OK;
}

/* The program's own named data entry under key[0..n): its index, or -1. */
static pyexec_status own_named_data(const pyexec_program *p, const char *key, size_t n, int64_t *index,
                                    uint32_t *segment) {
  *index = -1;
  for (uint32_t i = 0; i < p->named_data.count; i++) {
    px_fb_table nd;
    const char *k;
    uint32_t kn, seg;
    if (!px_fb_vec_table(&p->named_data, i, &nd) || !px_fb_string(&nd, NAMED_DATA_KEY, &k, &kn) ||
        !px_fb_u32(&nd, NAMED_DATA_SEGMENT, 0, &seg))
      return BAD("named_data[%u] is malformed", i);
    if (kn == n && memcmp(k, key, n) == 0) {
      *index = i;
      *segment = seg;
      return PYEXEC_OK;
    }
  }
  return PYEXEC_OK;
}

pyexec_status px_program_named_data(const pyexec_program *p, const char *key, size_t n,
                                    const uint8_t **data, size_t *size) {
  const px_data_entry *e = px_data_map_find(p->data_map, key, n);
  if (e) {
    *data = e->data;
    *size = e->size;
    return PYEXEC_OK;
  }
  /* Messages show the key only when it is printable ASCII (it came from a file). */
  char shown[96];
  px_data_key_display(key, n, shown, sizeof shown);
  int64_t index;
  uint32_t seg = 0;
  pyexec_status st = own_named_data(p, key, n, &index, &seg);
  if (st) return st;
  if (index >= 0) {
    char what[128];
    snprintf(what, sizeof what, "named data '%s'", shown);
    return segment_bytes(p, seg, what, data, size);
  }
  if (p->data_map)
    return BAD("named data '%s' is in neither the data file (%u entries) nor the program (%u entries)", shown,
               p->data_map->count, p->named_data.count);
  return BAD("named data '%s' is not in the program (%u entries), and no data file (.ptd) is attached: a "
             "program exported with external weights needs its data file", shown, p->named_data.count);
}

/* ---- plan-level queries ------------------------------------------------ */

pyexec_status px_plan_io_count(const pyexec_program *p, const px_plan *plan, size_t *nin, size_t *nout) {
  (void)p;
  px_fb_vec in, out;
  if (!px_fb_vector(&plan->table, PLAN_INPUTS, 4, &in) || !px_fb_vector(&plan->table, PLAN_OUTPUTS, 4, &out))
    return BAD("method '%s': inputs/outputs are malformed", plan->name);
  *nin = in.count;
  *nout = out.count;
  return PYEXEC_OK;
}

pyexec_status px_plan_operator_name(const px_plan *plan, uint32_t i, char *buf, size_t cap) {
  px_fb_vec ops;
  px_fb_table op;
  const char *name, *ovl;
  uint32_t nn, no;
  if (!px_fb_vector(&plan->table, PLAN_OPERATORS, 4, &ops) || !px_fb_vec_table(&ops, i, &op) ||
      !px_fb_string(&op, OPERATOR_NAME, &name, &nn) || !px_fb_string(&op, OPERATOR_OVERLOAD, &ovl, &no))
    return BAD("operator %u is malformed", i);
  if (nn + no + 2 > cap || nn == 0) return BAD("operator %u has an invalid name", i);
  memcpy(buf, name, nn);
  size_t n = nn;
  if (no) {
    buf[n++] = '.';
    memcpy(buf + n, ovl, no);
    n += no;
  }
  buf[n] = 0;
  if (!px_fb_valid_name(buf, n)) return BAD("operator %u has an invalid name", i);
  return PYEXEC_OK;
}
