/*
 * algo_grid.c — `grid`: every point of the Megatron-style space (mspace.h:
 * TP × PP × DP × micro-batch × interleaving × recompute × ZeRO), each
 * scored by the shared evaluator, the best kept.
 *
 * Exhaustive, so within its space nothing can beat it: the `genetic`,
 * `random`, `rules` and `pp-only` algorithms search subsets of the same
 * points and can at best tie (tests/test_compare_algo.c checks this). Its cost
 * is one evaluation per point; the first evaluation of a micro-batch size
 * and tensor-parallel degree also pays the ILP of each distinct layer on
 * that mesh, later ones hit the cache.
 */
#include "planner/compare/mspace.h"

static loom_status grid_run(loom_algo_ctx *ctx, loom_algo_result *out, loom_error *err)
{
    loom_mspace sp;
    loom_status s = loom_mspace_build(ctx, &sp, err);
    if (s) return s;
    out->space = sp.n;
    s = loom_mspace_sweep(ctx, &sp, NULL, sp.n, out, err);
    loom_mspace_free(&sp);
    return s;
}

const loom_algo loom_algo_grid = {
    .name = "grid",
    .summary = "exhaustive Megatron-style TP x PP x DP x micro-batch x vpp x recompute x ZeRO",
    .run = grid_run,
};
