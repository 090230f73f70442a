/*
 * algo_random.c — `random`: max_evals points of the Megatron-style space
 * drawn uniformly without replacement (a partial Fisher-Yates shuffle
 * driven by the request's seed), each scored by the shared evaluator.
 *
 * The same seed draws the same points on every machine; the budget is in
 * evaluations, so the answer does not depend on how fast they run (the
 * time budget still caps it). Drawing at least the whole space is `grid`
 * in another order, and gives grid's optimum.
 */
#include <stdlib.h>

#include "planner/compare/mspace.h"

static loom_status random_run(loom_algo_ctx *ctx, loom_algo_result *out, loom_error *err)
{
    const loom_algo_request *req = loom_algo_ctx_request(ctx);
    loom_mspace sp;
    loom_status s = loom_mspace_build(ctx, &sp, err);
    if (s) return s;
    out->space = sp.n;
    int64_t k = req->max_evals < sp.n ? req->max_evals : sp.n;
    int64_t *idx = malloc(sizeof *idx * (size_t)(sp.n ? sp.n : 1));
    if (!idx) {
        loom_mspace_free(&sp);
        return loom_error_set(err, LOOM_ERR_NOMEM, "random: out of memory");
    }
    for (int64_t i = 0; i < sp.n; i++) idx[i] = i;
    uint64_t rng = req->seed;
    for (int64_t i = 0; i < k; i++) {
        int64_t j = i + loom_algo_rand_below(&rng, sp.n - i);
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    s = loom_mspace_sweep(ctx, &sp, idx, k, out, err);
    free(idx);
    loom_mspace_free(&sp);
    return s;
}

const loom_algo loom_algo_random = {
    .name = "random",
    .summary = "seeded uniform sample (max_evals points) of the grid's space",
    .run = random_run,
};
