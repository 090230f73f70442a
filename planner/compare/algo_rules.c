/*
 * algo_rules.c — `rules`: the rule of thumb practitioners start from
 * (docs/design.md §9), asking the shared evaluator only "does it fit?":
 *
 *   1. the model trains on one GPU      → pure data parallelism;
 *   2. it fits in one node              → tensor parallel inside the node
 *                                         (the smallest power of two that
 *                                         fits) + data parallel;
 *   3. otherwise                        → tensor parallel over the whole
 *                                         node, pipeline stages across nodes
 *                                         (the fewest that fit) + data
 *                                         parallel over what is left.
 *
 * Micro-batch 1 for training (one micro-batch per replica for inference,
 * as a serving engine batches its sequences), no interleaving, ZeRO-1 (Megatron's distributed
 * optimizer) whenever there are data-parallel replicas; full activation
 * recompute only when nothing fits without it. Every point it tries is a
 * point of the grid's space, so `grid` is never worse.
 */
#include "planner/compare/mspace.h"

/* Evaluates p (if it exists); *done when it fits. */
static loom_status try_point(loom_algo_ctx *ctx, const loom_parallel *p, loom_algo_result *out,
                             bool *done, loom_error *err)
{
    if (!p || *done || loom_algo_ctx_stop(ctx)) return LOOM_OK;
    loom_search_config cfg;
    loom_algo_score sc;
    loom_status s = loom_mspace_eval(ctx, p, &cfg, &sc, err);
    if (s) return s;
    loom_algo_offer(out, &cfg, &sc);
    *done = sc.valid && sc.fits;
    return LOOM_OK;
}

static loom_status rules_run(loom_algo_ctx *ctx, loom_algo_result *out, loom_error *err)
{
    const bool train = !loom_algo_ctx_request(ctx)->problem.inference;
    const int64_t g = loom_algo_ctx_cluster(ctx)->gpus_per_node;
    const int64_t L = loom_algo_ctx_blocks(ctx);
    loom_mspace sp;
    loom_status s = loom_mspace_build(ctx, &sp, err);
    if (s) return s;
    out->space = sp.n;
    bool done = false;
    for (int rc = 0; rc < (train ? 2 : 1) && !s && !done; rc++) {
        loom_recompute r = rc ? LOOM_RECOMPUTE_FULL : LOOM_RECOMPUTE_NONE;
        s = try_point(ctx, loom_mspace_pick(&sp, train, 1, 1, r), out, &done, err);
        for (int64_t tp = 2; tp <= g && !s && !done; tp *= 2)
            s = try_point(ctx, loom_mspace_pick(&sp, train, tp, 1, r), out, &done, err);
        for (int64_t pp = 2; pp <= L && !s && !done; pp++)
            s = try_point(ctx, loom_mspace_pick(&sp, train, g, pp, r), out, &done, err);
    }
    loom_mspace_free(&sp);
    return s;
}

const loom_algo loom_algo_rules = {
    .name = "rules",
    .summary = "rule of thumb: DP if it fits a GPU, else TP in a node, else TP in node + PP",
    .run = rules_run,
};
