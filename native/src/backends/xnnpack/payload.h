/*
 * payload.h - parsing an XnnpackBackend payload into a checked xnn_graph
 * (private; payload.c).
 */
#ifndef PX_XNN_PAYLOAD_H
#define PX_XNN_PAYLOAD_H

#include "backends/backend.h"
#include "backends/xnnpack/xnn_graph.h"

/* The most external values a graph may declare (ExecuTorch's limit). */
#define XNN_MAX_EXTERNS 4096

/* Parses blob[0..size) (an XH00 header with its XNNGraph flatbuffer and
 * constant region, or a bare legacy flatbuffer) into g: values with their
 * constants resolved (from named data, the constant region or the legacy
 * constant_buffer), nodes with their parameters, every id, count, dim,
 * permutation, offset and key checked. Quantized values and node types
 * pyexec does not run are refused (Unsupported, naming the first). On
 * failure g is left for xnn_graph_free. */
pyexec_status xnn_parse(const uint8_t *blob, size_t size, const px_named_data *named, xnn_graph *g);

/* The backend's describe hook (backend.h): the node types blob[0..size)
 * uses, sorted, "!" before those pyexec does not run (a type without a node
 * function, or a node with a quantized or otherwise unsupported value),
 * checked as xnn_parse checks it except for the constants, which are not
 * read. InvalidProgram naming the field for a malformed payload. */
pyexec_status xnn_describe(const uint8_t *blob, size_t size, char *buf, size_t cap, size_t *needed,
                           size_t *unsupported);

/* Frees what xnn_parse allocated (values, nodes, copies of constants). */
void xnn_graph_free(xnn_graph *g);

#endif /* PX_XNN_PAYLOAD_H */
