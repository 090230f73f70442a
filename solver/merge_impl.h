/*
 * merge_impl.h — the layer problem's internals, shared by merge.c (the
 * follow-merge, pruning and the ILP), merge_edges.c (the edges' class cost
 * matrices) and merge_solution.c (reading a solved assignment back).
 * Internal to solver/: not installed API.
 */
#ifndef LOOM_MERGE_IMPL_H
#define LOOM_MERGE_IMPL_H

#include "solver/merge.h"
#include "solver/strategy_impl.h"

typedef struct {
    int32_t set;          /* ILP node */
    int main_in;          /* followed input slot, -1 for a root */
    int32_t main_prod;    /* relative producer of that input */
    loom_strategy *st;    /* [k of the set] */
} lop;

typedef struct {
    int32_t root;         /* relative op, or -1 for a fan-out node */
    int32_t k;            /* choices */
    double *cost, *mem;   /* [k]: members' costs (self edges folded in), memory */
    loom_spec *fspec;     /* fan-out choices */
    uint8_t *fpart;
    double *fwin;         /* fan-out: backward overlap window of each choice (overlap_window) */
    double *ffwin;        /* fan-out: forward overlap window of each choice (fwd_window) */
    int32_t nk;           /* choices that survive pruning: keep[0..nk) */
    int32_t *keep;
} lnode;

typedef struct {
    int32_t tensor, src, dst;       /* nodes (src == dst: folded into the node) */
    int32_t charge;                 /* relative op its cost is reported on */
    int32_t nsrc, ndst;
    int32_t *src_cls, *dst_cls;     /* per choice of src / dst */
    double *fwd_s, *bwd_s, *fwd_bytes;   /* [nsrc * ndst] */
} ledge;

struct loom_layer_problem {
    const loom_strategy_ctx *c;
    int32_t first, n_ops, n_sets;
    lop *ops;
    lnode *nodes;
    int32_t n_nodes, cap_nodes;
    ledge *edges;
    int32_t n_edges, cap_edges;
    loom_layer_weights w;
    loom_periodic_link *links;   /* copied from the build call */
    int32_t n_links;
    loom_ilp *ilp;
};

/* A use of a produced tensor: op `cons` input `slot` reads output `oslot`
 * of op `prod` (relative indices). */
typedef struct {
    int32_t prod, oslot, cons, slot;
} use;

/* A member's memory under the layer's weights (merge.h). */
static inline double loom_merge_member_mem(const loom_layer_weights *w, const loom_strategy *s)
{
    return w->mem_param_bytes * s->param_bytes + w->mem_param_count * (double)s->param_count +
           w->mem_act * s->act_bytes;
}

/* merge.c: the relative producer of input `slot` of relative op `rel` (its
 * output slot in *oslot), or -1; a new zeroed node, or NULL out of memory. */
int32_t loom_merge_internal_producer(const loom_layer_problem *p, int32_t rel, int slot,
                                     int *oslot);
lnode *loom_merge_add_node(loom_layer_problem *p);

/* merge_edges.c: the edges (and a fan-out node when there are several uses)
 * for all uses of one produced tensor; whether relative op `rel` saves its
 * input `slot` as a sequence-parallel shard it gathers again; whether
 * from -> to gathers the sequence over axis 1 (Megatron's SP input gather). */
loom_status loom_merge_connect(loom_layer_problem *p, const use *uses, int n, loom_error *err);
bool loom_merge_saves_input(const loom_layer_problem *p, int32_t rel, int slot);
bool loom_merge_seq_gather(const loom_tensor *t, const loom_spec *from, const loom_spec *to);

#endif
