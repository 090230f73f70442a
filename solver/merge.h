/*
 * merge.h — turning one layer's ops into the ILP of ilp.h (docs/design.md §5):
 * follow-merging, fan-out nodes, periodic boundary, edge cost matrices.
 *
 * FOLLOW-MERGE. A follower op (strategy.h: pointwise, norm, softmax, loss,
 * router, views) whose main input is produced inside the layer adopts its
 * producer's layout: a union-find joins it to the producer's set, and the set
 * is ONE ILP node whose choices are the strategies of its root (the one
 * member that is not following anybody). For each root choice every member's
 * strategy is derived along the chain (loom_strategy_follow), and the node's
 * cost is the sum of its members' costs. A Llama layer of ~15 ops becomes
 * ~9 nodes; the merged edges vanish (their resharding is zero by
 * construction).
 *
 * EDGES. Every other use of a tensor produced in the layer is an edge from
 * the producer's node to the consumer's node, costed on the CLASSES of
 * choices: the distinct (spec of the tensor at that end, partial-gradient
 * axes, backward overlap window). R[p][q] = forward resharding p -> q +
 * backward q -> p (spec.h), the backward part beside the consumer's
 * backward GEMMs: a matmul's input gradient comes out of its dgrad GEMM
 * and is reduced while its wgrad GEMM runs (Megatron's column-parallel
 * linear; costs/eval.c charges the same), so only what exceeds half the
 * consumer's backward is paid. In Megatron's space a matmul that gathers
 * its sequence-sharded input keeps the shard, and gathers it again beside
 * its dgrad GEMM (sequence parallelism, Korthikanti et al. 2022 §4.2.2).
 *
 * FAN-OUT. A tensor read by two or more unmerged consumers (the normed
 * activation feeding q, k and v; the residual stream) gets a node of its own
 * whose choices are a layout σ (any spec one of its ends uses) and a set P
 * of axes over which it accepts partial gradients. The producer reshards
 * to σ once and reduces P once — so three column-parallel projections cost
 * one all-reduce in backward, as in Megatron, not three.
 *
 * PRUNING. Before the ILP, a choice i of a node is dropped when another
 * choice j is no worse in EVERY context: cost_j + Σ_edges max_q R(j, q) ≤
 * cost_i + Σ_edges min_q R(i, q) (and, when memory matters, mem_j ≤ mem_i),
 * the max / min over the neighbours' surviving choices; repeated until
 * nothing changes. Exact: some optimum survives. It removes most of the
 * strategies that leave a mesh axis idle.
 *
 * PERIODIC BOUNDARY. For a layer solved once on behalf of a run of identical
 * layers, `links` name, for inputs that come from the previous layer, the op
 * of THIS layer that produces them in the previous copy: the layer's output
 * spec then feeds its own input, and the ILP prices that boundary.
 *
 * Units: seconds, bytes per GPU.
 */
#ifndef LOOM_MERGE_H
#define LOOM_MERGE_H

#include <stdint.h>
#include "solver/ilp.h"
#include "solver/strategy.h"

/* Input `slot` of op `cons` reads output `out_slot` of op `prod` of the
 * previous copy of the layer (indices relative to the layer's first op). */
typedef struct {
    int32_t cons, slot, prod, out_slot;
} loom_periodic_link;

/* How per-op costs and bytes enter the ILP. */
typedef struct {
    double grad_sync_weight;   /* 1 / micro-batches: the sync happens once per step */
    double mem_param_bytes;    /* × a strategy's param_bytes (weights, own dtype) */
    double mem_param_count;    /* × param_count (gradient + optimizer bytes per parameter) */
    double mem_act;            /* × act_bytes (micro-batches in flight) */
    bool memory_matters;       /* a budget will be set: pruning keeps memory-lean choices */
    bool no_prune;             /* keep every choice (the reference the tests compare with) */
} loom_layer_weights;

typedef struct loom_layer_problem loom_layer_problem;

/* Builds the problem of ops [first_op, first_op + n_ops) of c->g. The context
 * must outlive the problem. */
loom_status loom_layer_problem_build(const loom_strategy_ctx *c, int32_t first_op, int32_t n_ops,
                                     const loom_periodic_link *links, int32_t n_links,
                                     const loom_layer_weights *w, loom_layer_problem **out,
                                     loom_error *err);
void loom_layer_problem_destroy(loom_layer_problem *p);

const loom_ilp *loom_layer_problem_ilp(const loom_layer_problem *p);
/* ILP nodes that are op sets (fan-out nodes not counted). */
int32_t loom_layer_problem_num_sets(const loom_layer_problem *p);
/* Strategy of op `rel` under the ILP assignment x. */
const loom_strategy *loom_layer_problem_strategy(const loom_layer_problem *p, int32_t rel,
                                                 const int32_t *x);
/* Saved-activation bytes per GPU of op `rel` under x. In Megatron's space
 * a weighted matmul whose saved input arrives with its sequence
 * all-gathered keeps the producer's shard and gathers it again in backward
 * (Megatron's sequence parallelism saves 1/tp of a column-parallel input;
 * Korthikanti et al. 2022 §4.2.2), so it is charged at the producer's spec. The ILP's memory (budgets, pruning)
 * charges the gathered bytes: an upper bound. */
double loom_layer_problem_act_bytes(const loom_layer_problem *p, int32_t rel, const int32_t *x);
/* The resharding time under x of the edges charged to op `rel`: those
 * into its inputs, and those of a fan-out node whose first reader it is;
 * forward and backward. Over all ops they add up to the totals' reshard_s. */
void loom_layer_problem_op_reshard(const loom_layer_problem *p, int32_t rel, const int32_t *x,
                                   double *fwd_s, double *bwd_s);
/* Σ over nodes of their least memory: below this no assignment fits. */
double loom_layer_problem_min_memory(const loom_layer_problem *p);

typedef struct {
    double compute_s, comm_s, reshard_s, grad_sync_s;
    double objective_s;        /* compute + comm + reshard + grad_sync · weight */
    double comm_bytes_fwd;     /* ops' forward collectives + forward resharding */
    int64_t param_count, param_count_local;
    double param_bytes, act_bytes, mem_bytes;
    double dp_params[4], other_sync_s;   /* strategy.h */
} loom_layer_totals;

/* Totals of assignment x (consistent with the ILP objective). */
void loom_layer_problem_eval(const loom_layer_problem *p, const int32_t *x, loom_layer_totals *out);

#endif
