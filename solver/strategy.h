/*
 * strategy.h — the sharding strategies of one op on a 2-D logical mesh and
 * their costs (docs/design.md §5).
 *
 * A strategy fixes the spec (spec.h) of every operand of the op, the dims its
 * computation is split over, and the collectives the op itself must run:
 *
 *   einsum        every subscript letter goes to axis 0, axis 1, both or
 *                 none, each axis used by at most one letter. A split
 *                 contraction letter leaves partial sums over its axes: an
 *                 all-reduce of the output, or a reduce-scatter onto an output
 *                 letter that stays split on that axis (Megatron's sequence
 *                 parallelism; ZeRO-like sharding). Column/row parallel,
 *                 data parallel and 2-D tensor parallel are all points here.
 *   embedding     the einsum "ids, [rows h] -> ids h" with the row letter
 *                 contracted: vocab parallel = rows split + all-reduce.
 *   attention     over batch, query heads (kv heads split too when they
 *                 divide, else replicated: GQA), or the query sequence
 *                 (context parallel: K and V stay whole on that axis, so
 *                 their all-gather and the reduce-scatter of their gradients
 *                 appear as resharding on the edges).
 *   moe_dispatch  per axis: hidden split, token split (local), expert split
 *   moe_combine   from token-split inputs (all-to-all: expert parallel) or
 *                 from replicated tokens (local select / all-reduce).
 *   followers     elementwise, norm, softmax, cross_entropy, moe_route,
 *                 reshape, transpose adopt the spec of one input (their
 *                 "main" input) by dim name (views map dims through the
 *                 reshape); a split reduced dim (norm / softmax / loss over
 *                 a split last dim) pays a small all-reduce of row
 *                 statistics. They are enumerated over their main input's
 *                 specs when they have no producer to follow.
 * Strategies whose splits do not divide the dims are dropped.
 *
 * Costs (loom_strategy_cost):
 *   compute_s    loom_cost_op_time of the shard, fwd (+ bwd when training)
 *   comm_s       the op's collectives, forward and their mirror in backward
 *                (all-reduce -> none, reduce-scatter -> all-gather,
 *                all-gather -> reduce-scatter, all-to-all -> all-to-all),
 *                plus the reduction statistics
 *   grad_sync_s  per weight: dW is a partial sum over the axes the
 *                computation is split along but the weight is not (data
 *                parallelism): an all-reduce of its shard, once per step
 *   in_partial   per input: the axes over which its gradient leaves this op
 *                as a partial sum (reduced on the edge, spec.h)
 *   bytes        parameters on each GPU, saved activations on each GPU
 *                (tensors charged to the first op that saves them, graph.h)
 *   dp_params    the weights again, by the DATA-PARALLEL axes their
 *                gradient is partial over: those splitting the batch b, the
 *                sequence s or the expert tokens c (in Megatron's spaces
 *                only axis 0: its axis 1 splits s for sequence parallelism
 *                inside a tensor-parallel group). Copies along them are
 *                data-parallel copies: ZeRO shards them (param_count_local)
 *                and their gradients are reduced in one group with the
 *                pipeline replicas, as Megatron's data-parallel group spans
 *                dp × cp ranks (stage_costs.c); grad_sync_s, the ILP's
 *                in-mesh estimate, syncs them over the mesh alone.
 *
 * TP communication overlap (tp_overlap, Megatron's space): a weighted
 * matmul's own collectives over axis 1 hide behind its GEMMs, forward
 * behind the forward, backward behind half the backward (one of its two
 * GEMMs), as costs/eval.c's `exposed` charges them.
 *
 * Units: seconds, bytes per GPU.
 */
#ifndef LOOM_STRATEGY_H
#define LOOM_STRATEGY_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/compute.h"
#include "graph/graph.h"
#include "solver/spec.h"

#define LOOM_STRATEGY_MAX_COMM 4
#define LOOM_STRATEGY_NAME_MAX 64

typedef struct {
    loom_collective kind;
    uint8_t axes;        /* LOOM_AXIS0 | LOOM_AXIS1 */
    double bytes;        /* the collective's buffer (collective.h), per GPU */
} loom_comm_event;

typedef struct {
    char name[LOOM_STRATEGY_NAME_MAX];   /* "f@1", "h@1 AR@1", "b@0 heads@1", … */
    loom_spec in[LOOM_MAX_IO], w[LOOM_MAX_IO], out[LOOM_MAX_IO];
    uint8_t in_partial[LOOM_MAX_IO];     /* axes of d(input) partial sums */
    uint8_t compute_axes;                /* axes the computation is split along */
    int n_splits;
    loom_dim_split splits[LOOM_MAX_DIMS + 2];   /* dim names point into the graph */
    double compute_scale;                /* extra factor on compute (context parallel) */
    uint8_t ring_axes;                   /* attention split along the sequence: the cp
                                            ring's axes (K and V go round it) */
    int n_fwd, n_bwd;
    loom_comm_event fwd[LOOM_STRATEGY_MAX_COMM], bwd[LOOM_STRATEGY_MAX_COMM];

    /* filled by loom_strategy_cost */
    double compute_s, comm_s, grad_sync_s;
    double bwd_compute_s;                /* the backward part of compute_s (0 without training) */
    double ring_fwd_s;                   /* the forward part of the ring's exposed time (in
                                            comm_s; loom_ring_attention_exposed_s) */
    double fwd_comm_s;                   /* the forward part of comm_s (what a recompute reruns) */
    double comm_bytes_fwd;
    int64_t param_count;                 /* per GPU */
    int64_t param_count_local;           /* per GPU, each weight divided by its copies
                                            along the mesh axes that split the batch:
                                            what ZeRO shards inside a stage (memory.h) */
    double param_bytes;                  /* per GPU, weights' dtype */
    double act_bytes;                    /* saved for backward, per GPU */
    double core_act_bytes;               /* of act_bytes, the attention core's: tensors with
                                            a query and a key sequence dim (s and t), what
                                            selective recompute frees (costs/memory.c) */
    /* For the exact data-parallel sync (solver/stage_costs.c): float
     * weight elements per GPU by the data-parallel mesh axes their
     * gradient is partial over (index: axis mask, 0 = none), which sync
     * in ONE group with the pipeline replicas; and the sync over the other
     * partial axes (a norm's weight under sequence parallelism, partial
     * over the tensor-parallel axis), per step. */
    double dp_params[4];
    double other_sync_s;
} loom_strategy;

typedef struct {
    const loom_graph *g;
    const loom_cost_model *cm;
    loom_mesh_ctx mesh;
    bool train;
    bool megatron_only;
    bool megatron_cp;          /* Megatron's space with axis 0 context parallel (the
                                  sequence s and expert tokens c split; ring attention)
                                  instead of data parallel (batch b) */
    bool tp_overlap;           /* Megatron's --tp-comm-overlap: the tensor-parallel
                                  collectives (axis 1) of a weighted matmul, and the
                                  gather of its sequence-parallel input, run beside its
                                  GEMMs; only what exceeds them is exposed (costs/eval.c) */
    int expert_split;          /* Megatron's space, a pinned expert-parallel size: 1 = the
                                  expert GEMMs and the dispatcher split the experts e over
                                  axis 0 (EP = n0 · ep_span), -1 = no op splits e (EP 1;
                                  with expert_fold: not over axis 0, EP n1), 0 = the ILP's
                                  choice */
    bool expert_fold;          /* Megatron's space with expert TP 1 (MoE parallel folding,
                                  --expert-tensor-parallel-size 1): every expert GEMM and
                                  expert buffer splits the experts e over axis 1 (and
                                  never their hidden f or token slots c there), the
                                  dispatcher's all-to-all runs over axis 1 too; EP spans
                                  the TP ranks */
    int zero;                  /* ZeRO stage of the data-parallel gradient sync (0..3) */
    int64_t micro_batches;     /* per step: ZeRO-2/3 sync every micro-batch (0 = 1) */
    const int32_t *saved_by;   /* tensor id -> first op that saves it (-1 none);
                                  NULL: found by scanning the ops */
} loom_strategy_ctx;

/* cm supplies the cluster and calibration of the mesh groups. */
void loom_strategy_ctx_init(loom_strategy_ctx *c, const loom_graph *g, const loom_cost_model *cm,
                            loom_mesh_shape mesh, bool train, bool megatron_only);

/* The saved_by table of g: malloc'd array of loom_graph_num_tensors(g). */
loom_status loom_strategy_saved_by(const loom_graph *g, int32_t **out, loom_error *err);

/* Kinds that adopt their main input's spec (merge.c follows them). */
bool loom_strategy_is_follower(loom_op_kind k);

/* The input a follower follows by default: its first floating-point input
 * with the most elements; -1 when it has none. */
int loom_strategy_default_main(const loom_graph *g, int32_t op);

/* All strategies of op (costed), in a deterministic order. Followers are
 * enumerated over the specs of input `main_in` (-1: the default main).
 * *out is malloc'd (free it); *n may be 0 only if nothing divides, which
 * cannot happen: the replicated strategy always exists. */
loom_status loom_strategy_enumerate(const loom_strategy_ctx *c, int32_t op, int main_in,
                                    loom_strategy **out, int32_t *n, loom_error *err);

/* The strategy of follower op when its input k has spec `spec` (costed;
 * follow.c). */
loom_status loom_strategy_follow(const loom_strategy_ctx *c, int32_t op, int k,
                                 const loom_spec *spec, loom_strategy *out, loom_error *err);

/* Fills the cost fields of s from its specs, splits and events. */
loom_status loom_strategy_cost(const loom_strategy_ctx *c, int32_t op, loom_strategy *s,
                               loom_error *err);

/* Every valid spec of tensor t on the mesh (each axis on one dim or none),
 * replicated first. With megatron, only Megatron-expressible layouts
 * (strategy.c rules: b/e/c on axis 0; heads/kvh/grp/f/v and the sequence
 * s, c on axis 1). Returns the count (at most cap written). */
int loom_strategy_tensor_specs(const loom_strategy_ctx *c, const loom_tensor *t, loom_spec *out,
                               int cap);

#endif
