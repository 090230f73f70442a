/*
 * graph_tensor.h — one tensor added to a hand-built graph, for the cost
 * tests (test_compute.c, test_eager.c): dims named by single letters
 * ("sh": s, h), sizes given; a builder failure ends the test (exit 2), as
 * the graph is the test's input, not what it checks.
 */
#ifndef LOOM_TEST_GRAPH_TENSOR_H
#define LOOM_TEST_GRAPH_TENSOR_H

#include <stdio.h>
#include <stdlib.h>
#include "graph/graph.h"

static inline int32_t test_tensor(loom_graph *g, const char *name, loom_dtype dt, int nd,
                                  const char *names, const int64_t *sizes, bool weight)
{
    loom_dim dims[LOOM_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        dims[i].name[0] = names[i];
        dims[i].name[1] = '\0';
        dims[i].size = sizes[i];
    }
    int32_t id = -1;
    loom_error err;
    if (loom_graph_add_tensor(g, name, dt, nd, dims, weight, &id, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return id;
}

#endif
