/*
 * graph_json.h — the loom graph file ("format": "loom-graph/1"): reader and
 * writer. The schema is documented in docs/graph-format.md.
 *
 * The reader accepts only what the schema names: unknown fields, unknown op
 * kinds, tensors referenced but not declared, tensors declared twice,
 * non-positive or overflowing sizes, shapes that disagree with an einsum,
 * dangling tensors and cycles (the ops on the cycle named) are errors, each
 * reported as "FILE: $.ops[3].inputs[1]: what was expected, what was found".
 *
 * The writer emits the same schema with a stable key order, so reading a
 * written graph and writing it again gives byte-identical text.
 */
#ifndef LOOM_GRAPH_JSON_H
#define LOOM_GRAPH_JSON_H

#include <cJSON.h>
#include "base/error.h"
#include "graph/graph.h"

#define LOOM_GRAPH_FORMAT "loom-graph/1"

/* Builds a finalized graph from a parsed loom-graph/1 document; `file` names
 * it in messages. */
loom_status loom_graph_json_parse(const char *file, const cJSON *root, loom_graph **out,
                                  loom_error *err);
/* Reads and parses a loom-graph/1 file. */
loom_status loom_graph_json_read(const char *path, loom_graph **out, loom_error *err);

/* Serialises a (finalized) graph; *out_text is a heap string ending in '\n'. */
loom_status loom_graph_json_dump(const loom_graph *g, char **out_text, loom_error *err);
/* Writes the graph to `path` atomically ("-" = stdout). */
loom_status loom_graph_json_write(const loom_graph *g, const char *path, loom_error *err);

#endif
