/*
 * algo_pp_only.c — `pp-only`: pipeline and data parallelism, no tensor
 * parallelism (GPipe / PipeDream style): the fewest pipeline stages whose
 * stages fit in memory, data-parallel replicas of that pipeline on the
 * remaining GPUs, micro-batch 1 (inference: one micro-batch per replica),
 * ZeRO-1 over the replicas, full recompute only if nothing fits without it.
 *
 * This is the worked example of docs/adding-an-algorithm.md: a space
 * (mspace.h's points with tp = 1), a rule for walking it, and the shared
 * evaluator to judge each step.
 */
#include "planner/compare/mspace.h"

static loom_status pp_only_run(loom_algo_ctx *ctx, loom_algo_result *out, loom_error *err)
{
    const bool train = !loom_algo_ctx_request(ctx)->problem.inference;
    loom_mspace sp;
    loom_status s = loom_mspace_build(ctx, &sp, err);
    if (s) return s;
    out->space = sp.n;
    bool done = false;
    for (int rc = 0; rc < (train ? 2 : 1) && !done && !s; rc++)
        for (int64_t pp = 1; pp <= loom_algo_ctx_blocks(ctx) && !done && !s; pp++) {
            const loom_parallel *p = loom_mspace_pick(
                &sp, train, 1, pp, rc ? LOOM_RECOMPUTE_FULL : LOOM_RECOMPUTE_NONE);
            if (!p) continue;   /* pp does not divide the GPUs, the batch, … */
            if (loom_algo_ctx_stop(ctx)) break;
            loom_search_config cfg;
            loom_algo_score sc;
            if ((s = loom_mspace_eval(ctx, p, &cfg, &sc, err))) break;
            loom_algo_offer(out, &cfg, &sc);   /* keeps the best seen */
            done = sc.valid && sc.fits;
        }
    loom_mspace_free(&sp);
    return s;
}

const loom_algo loom_algo_pp_only = {
    .name = "pp-only",
    .summary = "no tensor parallelism: the fewest pipeline stages that fit, DP over the rest",
    .run = pp_only_run,
};
