/*
 * strategy_impl.h — helpers shared by strategy.c, strategy_enumerate.c,
 * strategy_megatron.c and follow.c. Internal to
 * solver/: not installed API.
 */
#ifndef LOOM_STRATEGY_IMPL_H
#define LOOM_STRATEGY_IMPL_H

#include <stdio.h>
#include <string.h>
#include "solver/strategy.h"

/* Floating-point tensors carry gradients; ids and indices do not. */
static inline bool loom_strategy_float(loom_dtype t)
{
    return t == LOOM_DTYPE_BF16 || t == LOOM_DTYPE_FP16 || t == LOOM_DTYPE_FP32 ||
           t == LOOM_DTYPE_FP8;
}

static inline void loom_strategy_add_event(loom_comm_event *ev, int *n, loom_collective k,
                                           unsigned axes, double bytes)
{
    if (!axes || !(bytes > 0) || *n >= LOOM_STRATEGY_MAX_COMM) return;
    ev[*n] = (loom_comm_event){k, (uint8_t)axes, bytes};
    (*n)++;
}

/* A matmul with weights (einsum, embedding): its backward is a dgrad GEMM
 * then a wgrad GEMM, and a collective it feeds or drains can run beside
 * them (Megatron's overlaps). */
static inline bool loom_strategy_weighted_matmul(const loom_op *o)
{
    return (o->kind == LOOM_OP_EINSUM || o->kind == LOOM_OP_EMBEDDING) &&
           o->n_w > (o->bias ? 1 : 0);
}

/* What a collective of comm_s adds beside a GEMM of gemm_s. */
static inline double loom_strategy_beside(double comm_s, double gemm_s)
{
    return comm_s > gemm_s ? comm_s - gemm_s : 0;
}

/* Whether saved tensor `tensor` is charged to op (the first op that saves
 * it, graph.h). */
bool loom_strategy_charged(const loom_strategy_ctx *c, int32_t op, int32_t tensor);

static inline bool loom_strategy_tensor_has_dim(const loom_tensor *t, const char *name)
{
    for (int d = 0; d < t->ndim; d++)
        if (!strcmp(t->dims[d].name, name)) return true;
    return false;
}

/* Megatron's placement rules (strategy_megatron.c). A tensor-parallel dim
 * (heads, kv heads, query groups, MLP hidden f, vocabulary): */
bool loom_strategy_megatron_tp_dim(const char *dim);
/* dim may split over mesh axis `axis` (0 or 1) in a Megatron space; compute:
 * as a computation's split (a contraction) rather than a tensor's layout */
bool loom_strategy_megatron_ok(const loom_strategy_ctx *c, const char *dim, int axis, bool compute);
/* a batch of that size must split over an in-mesh data-parallel axis 0 */
bool loom_strategy_megatron_dp_forced(const loom_strategy_ctx *c, int64_t batch);

/* Appends "name@axes" for each split (name, mask) pair to buf. */
static inline void loom_strategy_name_add(char *buf, size_t n, const char *dim, unsigned axes)
{
    static const char *const suffix[4] = {"", "@0", "@1", "@01"};
    size_t len = strlen(buf);
    if (len < n) snprintf(buf + len, n - len, "%s%s%s", len ? " " : "", dim, suffix[axes & 3]);
}

#endif
