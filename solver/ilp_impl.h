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

/* ilp_reduce.c: exact elimination of nodes with at most two neighbours.
 * The core keeps the surviving nodes (renumbered, in order); its optimum
 * plus loom_ilp_reduction_constant is the problem's optimum, and
 * loom_ilp_expand turns a core assignment into a full one that attains it.
 * Ignores memory: callers with a budget must not reduce. */
typedef struct loom_ilp_reduction loom_ilp_reduction;
loom_status loom_ilp_reduce(const loom_ilp *p, loom_ilp **core, loom_ilp_reduction **out,
                            loom_error *err);
void loom_ilp_expand(const loom_ilp_reduction *r, const int32_t *core_x, int32_t *x);
double loom_ilp_reduction_constant(const loom_ilp_reduction *r);
void loom_ilp_reduction_free(loom_ilp_reduction *r);

#endif
