/*
 * ilp_impl.h — the storage layout of a loom_ilp, shared by ilp.c and its
 * solvers (ilp_glpk.c, exact.c). Internal to solver/: not installed API.
 */
#ifndef LOOM_ILP_IMPL_H
#define LOOM_ILP_IMPL_H

#include "solver/ilp.h"

typedef struct {
    int32_t k;        /* choices */
    double *cost;     /* [k] seconds */
    double *mem;      /* [k] bytes */
} loom_ilp_node;

typedef struct {
    int32_t u, v;     /* u != v */
    int32_t ku, kv;   /* classes at each end */
    int32_t *cu;      /* [nodes[u].k] -> [0, ku) */
    int32_t *cv;      /* [nodes[v].k] -> [0, kv) */
    double *R;        /* [ku * kv] row-major */
} loom_ilp_edge;

struct loom_ilp {
    loom_ilp_node *nodes;
    int32_t n_nodes, cap_nodes;
    loom_ilp_edge *edges;
    int32_t n_edges, cap_edges;
};

#endif
