/*
 * mspace.h — the Megatron-style search space shared by `grid`, `genetic`,
 * `random`, `rules` and `pp-only` (docs/design.md §9), and its mapping onto the
 * configurations the shared evaluator scores (algo.h).
 *
 * A point is a loom_parallel value (costs/parallel.h): tensor parallel tp,
 * context parallel cp, pipeline parallel pp, data parallel dp with
 * tp · cp · pp · dp = the cluster's GPUs, micro-batch mbs, interleaving vpp,
 * recompute none / full, ZeRO stage; with tp > 1 sequence parallelism and,
 * for training, TP communication overlap (the planner's Megatron spaces
 * take it wherever it applies: over the same strategies it is never
 * slower, solver/stage_search_point.c). The space holds every point that
 *   - Megatron-LM accepts (loom_parallel_check: heads and kv heads divide
 *     by tp, layers split over pp (× vpp), gbs a multiple of mbs · dp,
 *     ZeRO-2/3 only without pipelining, …);
 *   - keeps tp inside a node (tp a power of two dividing the GPUs per
 *     node), cp a power of two (training, fused attention), with a pipeline
 *     replica of tp · cp · pp GPUs that is whole nodes or a power of two
 *     inside one (the sub-meshes Alpa's planner uses too);
 *   - has mbs ≤ max_micro_batch; interleaving (vpp 2, 4) needs the
 *     micro-batch count to be a multiple of pp, as Megatron's schedule does;
 *   - training only: recompute ∈ {none, full}, ZeRO ∈ {0..3} when dp > 1
 *     (0 when dp = 1, where all stages are the same plan).
 * When pp does not divide the layers, the first and last stages hold fewer
 * (Megatron's --decoder-first/last-pipeline-num-layers, as Llama 3 405B
 * was trained: 126 layers on 16 stages of 8, minus one at each end).
 *
 * Enumeration order is fixed (tp, cp, pp, mbs, vpp, recompute, zero, each
 * ascending), so index i names the same point on every run.
 *
 * The configuration of a point is what Megatron runs: pp uniform stages
 * (pp · vpp model chunks, chunk c on pipeline rank c mod pp, the embedding
 * with the first chunk and the head with the last) on sub-meshes of
 * tp · cp GPUs, logical mesh (cp, tp) with Megatron's strategies (tensor and
 * sequence parallel on axis 1; with cp > 1 context parallel on axis 0),
 * dp replicas laid out in Megatron's rank order (tensor, context, data,
 * then pipeline parallel outermost).
 */
#ifndef LOOM_MSPACE_H
#define LOOM_MSPACE_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/parallel.h"
#include "planner/compare/algo.h"

typedef struct {
    loom_parallel *points;   /* [n], in enumeration order */
    int64_t n;
} loom_mspace;

/* Enumerates the space of ctx's problem. */
loom_status loom_mspace_build(loom_algo_ctx *ctx, loom_mspace *out, loom_error *err);
void loom_mspace_free(loom_mspace *s);

/* The configuration Megatron would run for point p (see above). */
void loom_mspace_config(const loom_algo_ctx *ctx, const loom_parallel *p, loom_search_config *cfg);

/* Index of the point whose configuration is cfg (every decision equal:
 * schedule, stage layers, meshes, strategy space, recompute, placement), or
 * -1. What the nesting tests use: a configuration in the space is one that
 * `grid` evaluates. */
int64_t loom_mspace_find(const loom_algo_ctx *ctx, const loom_mspace *s,
                         const loom_search_config *cfg);

/* Scores point p with the shared evaluator; cfg (optional) receives its
 * configuration. */
loom_status loom_mspace_eval(loom_algo_ctx *ctx, const loom_parallel *p, loom_search_config *cfg,
                             loom_algo_score *out, loom_error *err);

/* Evaluates points idx[0..n) in order, offering each to out, until the
 * budget runs out; the loop of grid and random. */
loom_status loom_mspace_sweep(loom_algo_ctx *ctx, const loom_mspace *s, const int64_t *idx,
                              int64_t n, loom_algo_result *out, loom_error *err);

/* The rule-of-thumb point with degrees (tp, pp), no interleaving,
 * recompute rc, ZeRO-1 when there are data-parallel replicas (training),
 * and micro-batch 1 for training or the largest micro-batch for inference
 * (a serving engine batches a replica's sequences together). NULL when the
 * space has no such point. Used by rules and pp-only. */
const loom_parallel *loom_mspace_pick(const loom_mspace *s, bool train, int64_t tp, int64_t pp,
                                      loom_recompute rc);

/* Blocks of the first and last stage when pp does not divide the L blocks
 * (0, 0 when it does); false when no such split exists. */
bool loom_mspace_uneven(int64_t L, int64_t pp, int64_t *first_blocks, int64_t *last_blocks);

/* Layer slots of `chunks` consecutive stages holding the model's blocks
 * evenly (first_blocks / last_blocks > 0: the first and last stage hold
 * that many, the others the rest evenly), the embedding slot with the
 * first and the head slot with the last: stage c is slots
 * [bound[c], bound[c + 1]), bound[chunks] = the layer count. */
void loom_mspace_split(const loom_algo_ctx *ctx, int64_t chunks, int64_t first_blocks,
                       int64_t last_blocks, int32_t *bound);

#endif
