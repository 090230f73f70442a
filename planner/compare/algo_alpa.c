/*
 * algo_alpa.c — `alpa` and `alpa-megatron`: loom's main planner
 * (solver/stage_search.h: intra-op ILP tables, Alpa's stage DP over
 * sub-meshes, micro-batch and replica search, interleaving), run as is.
 *
 * `alpa` searches the full space: any strategy the ILP finds on any logical
 * mesh, the general stage DP for replicas up to 16 GPUs, uniform stages
 * above. `alpa-megatron` is `loom plan --space megatron`: uniform stages and
 * Megatron's strategies only, i.e. plans Megatron-LM can run.
 *
 * The planner scores its candidates with loom_search_eval, the shared
 * evaluator itself, and counts them (configs_evaluated) — those are its
 * evaluations here. Its work limit (and time limit, if any) is what is
 * left of the budgets. The
 * planner creates its own caches, so its search time includes every ILP it
 * solves, like everybody else's.
 */
#include <math.h>

#include "planner/compare/algo.h"

static loom_status alpa_common(loom_algo_ctx *ctx, bool megatron, loom_algo_result *out,
                               loom_error *err)
{
    const loom_algo_request *req = loom_algo_ctx_request(ctx);
    loom_search_options r;
    loom_algo_search_options(req, &r);
    r.megatron_only = megatron;
    double left = loom_algo_ctx_remaining_s(ctx);
    if (isfinite(left)) r.time_limit_s = left > 1e-3 ? left : 1e-3;
    if (req->max_work > 0) {
        int64_t w = req->max_work - loom_algo_ctx_work(ctx);
        r.max_work = w > 1 ? w : 1;
    }
    loom_search *s;
    loom_status st = loom_search_create(&req->problem, &r, &s, err);
    if (st) return st;
    const loom_search_result *res;
    loom_error e2 = {0};
    st = loom_search_run(s, &res, &e2);
    out->evals = res->configs_evaluated;
    out->timed_out = res->timed_out;
    out->min_memory_bytes = res->min_memory_bytes;
    if (st == LOOM_OK) {
        /* a provisional score: loom_algo_run re-scores the plan */
        loom_algo_score sc = {.valid = true, .mem_ok = res->eval.fits, .fits = res->eval.fits,
                              .score = res->eval.score, .step_s = res->eval.step_s,
                              .memory_per_gpu_bytes = res->eval.memory_per_gpu_bytes};
        loom_algo_offer(out, &res->best, &sc);
    } else if (st == LOOM_ERR_INFEASIBLE || st == LOOM_ERR_LIMIT) {
        st = LOOM_OK;   /* nothing fits / nothing found in time: found stays false */
    } else {
        *err = e2;
    }
    loom_search_destroy(s);
    return st;
}

static loom_status alpa_run(loom_algo_ctx *ctx, loom_algo_result *out, loom_error *err)
{
    return alpa_common(ctx, false, out, err);
}

static loom_status alpa_megatron_run(loom_algo_ctx *ctx, loom_algo_result *out, loom_error *err)
{
    return alpa_common(ctx, true, out, err);
}

const loom_algo loom_algo_alpa = {
    .name = "alpa",
    .summary = "loom's planner: intra-op ILP + Alpa's inter-op stage DP, full strategy space",
    .run = alpa_run,
};

const loom_algo loom_algo_alpa_megatron = {
    .name = "alpa-megatron",
    .summary = "loom's planner restricted to Megatron-runnable plans (loom plan --space megatron)",
    .run = alpa_megatron_run,
};
