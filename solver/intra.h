/*
 * intra.h — intra-operator planning of a range of layers on one logical mesh
 * (docs/design.md §5): the API the stage DP, `loom shard` and the plan writer call.
 *
 * loom_intra_solve picks one sharding strategy per op of layers
 * [layer_first, layer_last] on the logical mesh (n0, n1) and returns the
 * per-micro-batch time, memory and per-op specs. Inside, each distinct layer
 * (loom_graph_layer_signature) is solved once per mesh by the ILP of ilp.h
 * after follow-merging (merge.h); identical neighbours use a periodic
 * boundary (the layer's output spec feeds its own input), so a run of
 * identical layers costs n × (one layer's periodic optimum) and the solve
 * time does not grow with depth. With a loom_intra_cache the per-layer solves
 * are kept across calls, keyed by (signature, periodic wiring, mesh, the
 * options that change costs), so a call for layers i..j costs O(j - i)
 * lookups once each layer kind has been solved.
 *
 * Layers of different kinds that meet inside the range (embedding -> first
 * block, last block -> head) are each solved on their own; the resharding
 * between them is then added for the chosen specs (not optimised across).
 *
 * Time model per op (strategy.h): compute of the shard from
 * loom_cost_op_time (fwd + bwd when training), the strategy's collectives
 * (forward and the mirrored backward ones), resharding on the edges, and the
 * gradient synchronisation of weights that are replicated over a mesh axis
 * along which the batch-like dims are split — once per step, so the ILP
 * charges grad_sync / micro_batches.
 *
 * Memory model per GPU (for the optional budget): parameters × bytes per
 * parameter (mixed-precision Adam 2 + 4 + 12, costs/memory.h; ZeRO divides
 * by dp_degree_outside) + saved activations × act_multiplier.
 *
 * Not thread-safe: one cache per thread (GLPK keeps per-thread state too).
 *
 * Units: seconds, bytes per GPU.
 */
#ifndef LOOM_INTRA_H
#define LOOM_INTRA_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/collective.h"
#include "costs/compute.h"
#include "graph/graph.h"
#include "solver/ilp.h"
#include "solver/spec.h"

typedef struct loom_intra_cache loom_intra_cache;

loom_status loom_intra_cache_create(loom_intra_cache **out, loom_error *err);
void loom_intra_cache_destroy(loom_intra_cache *c);
/* Distinct layer solves done and lookups answered from the cache. */
void loom_intra_cache_stats(const loom_intra_cache *c, int64_t *solves, int64_t *hits);

typedef struct {
    bool train;                    /* fwd + bwd + grads (default true); false: forward only */
    double time_limit_s;           /* per ILP solve (default 10) */
    int64_t memory_budget_bytes;   /* per GPU for the whole range; 0 = none */
    int64_t dp_degree_outside;     /* data-parallel replicas of this stage (default 1) */
    int zero_stage;                /* 0..3: divides optimizer / grads / params by dp_degree_outside */
    int64_t micro_batches;         /* grad sync amortised over these (default 1) */
    int64_t act_multiplier;        /* micro-batches in flight, for the budget (default 1) */
    bool megatron_only;            /* only Megatron-expressible strategies: data parallel (b,
                                      experts) on axis 0, tensor parallel (heads, kvh, f, v;
                                      every linear layer split, the embedding vocab-parallel;
                                      sequence parallel s in between) on axis 1 */
    bool megatron_cp;              /* with megatron_only: axis 0 context parallel instead (the
                                      sequence split in every op, ring attention) */
    bool tp_comm_overlap;          /* with megatron_only: TP collectives beside their GEMMs
                                      (Megatron's --tp-comm-overlap; strategy.h) */
    int64_t ep_span;               /* with megatron_only: experts split over axis 0 are split
                                      over this many data-parallel replicas too (spec.h
                                      loom_mesh_ctx.ep_span; 0 or 1: inside the mesh) */
    int expert_split;              /* with megatron_only: 1 experts split over axis 0, -1 never
                                      split, 0 the ILP's choice (strategy.h; a pinned EP) */
    bool expert_fold;              /* with megatron_only: expert TP 1, the experts split over
                                      axis 1 too (strategy.h expert_fold) */
    loom_intra_cache *cache;       /* NULL: no reuse across calls */
    const char *debug_lp_path;     /* non-NULL: write each layer's ILP (glp_write_lp) to
                                      "<path>.L<layer>.lp" */
} loom_intra_opts;

/* train, 10 s, no budget, dp 1, ZeRO 0, 1 micro-batch, 1 in flight, full space, no cache. */
void loom_intra_opts_init(loom_intra_opts *o);

typedef struct loom_intra_layer loom_intra_layer;   /* a solved layer (shared, internal) */

typedef struct {
    loom_ilp_status status;        /* worst over the layers: infeasible > feasible > optimal */
    double time_s;                 /* one micro-batch, fwd+bwd (train): compute_s + comm_s */
    double compute_s;
    double comm_s;                 /* strategies' collectives + resharding (fwd + bwd) */
    double reshard_s;              /* the resharding part of comm_s */
    double grad_sync_s;            /* per step: gradient sync over the mesh axes */
    double objective_s;            /* ILP objective summed: time_s + grad_sync_s / micro_batches */
    int64_t comm_bytes_fwd;        /* collective buffer bytes, forward, per GPU */
    int64_t param_count_per_gpu;   /* parameters (elements) on each GPU */
    int64_t param_count_local_per_gpu;   /* the same, each weight divided by its
                                            data-parallel copies in the mesh (strategy.h) */
    double dp_params_per_gpu[4];   /* float parameters by the data-parallel mesh axes their
                                      gradient is partial over (strategy.h dp_params) */
    double other_sync_s;           /* per step: sync over the other partial axes */
    int64_t param_bytes_per_gpu;   /* those parameters in their dtype */
    int64_t act_bytes_per_gpu;     /* saved activations of one micro-batch */
    int64_t memory_bytes_per_gpu;  /* the budget's measure (see above) */
    double gap;                    /* largest relative MIP gap over the layer solves */
    double solve_time_s;           /* ILP time spent in this call (0 when all cached) */
    int32_t n_vars, n_cons;        /* ILP size, summed over the distinct layer solves */
    int32_t core_vars, core_cons;  /* what GLPK solved after exact elimination (ilp.h) */
    int32_t ops_before_merge, ops_after_merge;   /* likewise (ILP nodes after merging) */
    int32_t layer_first, layer_last;
    int32_t n_solves, n_cache_hits;
    loom_intra_layer **layers;     /* [layer_last - layer_first + 1], internal */
} loom_intra_result;

/* Solves layers [layer_first, layer_last] of g (finalized) on mesh. An
 * infeasible memory budget is LOOM_OK with out->status INFEASIBLE (no
 * strategies then); a layer ILP stopped by the time limit makes the status
 * FEASIBLE with its gap. Errors: bad range or mesh (LOOM_ERR_INVALID), cost
 * model failures, GLPK failures (LOOM_ERR_SOLVER). Free out with
 * loom_intra_result_free (also after an error: it is then empty). */
loom_status loom_intra_solve(const loom_graph *g, const loom_cost_model *cm, int32_t layer_first,
                             int32_t layer_last, loom_mesh_shape mesh, const loom_intra_opts *o,
                             loom_intra_result *out, loom_error *err);

void loom_intra_result_free(loom_intra_result *r);

/* ---- per-op answers (op ids of g inside the solved range) ---------------- */

typedef enum { LOOM_OPERAND_INPUT, LOOM_OPERAND_WEIGHT, LOOM_OPERAND_OUTPUT } loom_operand;

/* Strategy of op `op`, e.g. "f@1" (column parallel on axis 1), "f@1 AR@1"
 * (row parallel: all-reduce over axis 1), "b@0 h@1", "replicated". NULL if
 * the op is outside the range or the result is infeasible. */
const char *loom_intra_op_strategy(const loom_intra_result *r, const loom_graph *g, int32_t op);

/* The tensor id of operand k of op (its k-th input, weight or output), or
 * -1 when op has no such operand. */
int32_t loom_intra_operand(const loom_graph *g, int32_t op, loom_operand which, int k);

/* Spec of operand k of op (spec.h: the mesh axes each dim of the tensor
 * loom_intra_operand names is split over); false when absent (op outside
 * the range, no such operand, infeasible result). Text ("b@0 s h@1") is
 * for output only: loom_spec_format. */
bool loom_intra_op_spec(const loom_intra_result *r, const loom_graph *g, int32_t op,
                        loom_operand which, int k, loom_spec *out);

typedef struct {
    double compute_s;       /* shard compute, fwd (+ bwd) */
    double comm_s;          /* the strategy's own collectives, fwd (+ bwd) */
    double grad_sync_s;     /* per step */
    int64_t comm_bytes_fwd;
    int64_t param_count;    /* per GPU */
    int64_t param_count_local;   /* per GPU, divided by the data-parallel copies (strategy.h) */
    double dp_params[4];    /* strategy.h */
    double other_sync_s;
    int64_t act_bytes;      /* saved activations per GPU */
    int64_t core_act_bytes; /* of them, the attention core's (strategy.h) */
    double fwd_compute_s;   /* the forward parts of compute_s and comm_s */
    double fwd_comm_s;
    double reshard_fwd_s;   /* resharding of the op's inputs inside its layer, forward and */
    double reshard_bwd_s;   /* backward (a shared input's: on its first reader) */
} loom_intra_op_cost;

/* Costs of op's chosen strategy; false when op is outside the range. */
bool loom_intra_op_cost_get(const loom_intra_result *r, const loom_graph *g, int32_t op,
                            loom_intra_op_cost *out);

#endif
