/*
 * serve_pool.c — per-instance rates under the SLOs (serve_pool.h).
 */
#include "planner/serve/serve_pool.h"

#include <math.h>
#include <string.h>

#define BISECT_STEPS 24

/* Whether an instance of shape i in role r meets the bounds at rate λ. */
static loom_status ok_at(const loom_serve_ctx *ctx, int32_t i, loom_serve_role r, double rate,
                         double cap, bool *ok, loom_error *err)
{
    loom_serve_steady_result st;
    loom_status s = loom_serve_role_steady(ctx, i, r, rate, &st, err);
    if (s) return s;
    const loom_serve_slo *slo = &ctx->slo;
    *ok = !st.m.saturated && rate < cap &&
          (r == LOOM_SERVE_ROLE_DECODE || slo->ttft_s <= 0 || st.m.ttft.mean <= slo->ttft_s) &&
          (slo->tpot_s <= 0 || st.m.tpot.mean <= slo->tpot_s);
    return LOOM_OK;
}

/* The highest rate in (0, cap) at which role r meets the bounds; 0 if none. */
static loom_status max_rate(const loom_serve_ctx *ctx, int32_t i, loom_serve_role r, double cap,
                            double *out, loom_error *err)
{
    double lo = 0, hi = cap;
    bool ok;
    loom_status s = ok_at(ctx, i, r, cap * 1e-3, cap, &ok, err);
    if (s) return s;
    if (!ok) {
        *out = 0;
        return LOOM_OK;
    }
    lo = cap * 1e-3;
    for (int k = 0; k < BISECT_STEPS; k++) {
        double mid = (lo + hi) / 2;
        if ((s = ok_at(ctx, i, r, mid, cap, &ok, err))) return s;
        if (ok) lo = mid;
        else hi = mid;
    }
    *out = lo;
    return LOOM_OK;
}

loom_status loom_serve_pool_stats_compute(const loom_serve_ctx *ctx, int32_t i,
                                          loom_serve_pool_stats *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    loom_serve_steady_result st;
    loom_status s;
    /* capacities: the steady state at a negligible rate reports them */
    if ((s = loom_serve_role_steady(ctx, i, LOOM_SERVE_ROLE_AGG, 1e-3, &st, err))) return s;
    out->agg_cap_rps = st.capacity_rps;
    out->agg_batch_max = st.batch_max;
    if ((s = max_rate(ctx, i, LOOM_SERVE_ROLE_AGG, out->agg_cap_rps, &out->agg_rate_rps, err)))
        return s;

    if ((s = loom_serve_role_steady(ctx, i, LOOM_SERVE_ROLE_PREFILL, 1e-3, &st, err))) return s;
    out->prefill_cap_rps = st.capacity_rps;
    for (int k = 0; k < LOOM_SERVE_PREFILL_TABLE; k++) {
        /* denser towards capacity, where the queue grows fastest */
        double f = 0.95 * (1 - pow(1 - (double)(k + 1) / LOOM_SERVE_PREFILL_TABLE, 1.5));
        double rate = f * out->prefill_cap_rps;
        if ((s = loom_serve_role_steady(ctx, i, LOOM_SERVE_ROLE_PREFILL, rate, &st, err))) return s;
        out->prefill_rate_rps[k] = rate;
        out->prefill_ttft_s[k] = st.m.saturated ? INFINITY : st.m.ttft.mean;
    }

    if ((s = loom_serve_role_steady(ctx, i, LOOM_SERVE_ROLE_DECODE, 1e-3, &st, err))) return s;
    out->decode_cap_rps = st.capacity_rps;
    out->decode_batch_max = st.batch_max;
    if ((s = max_rate(ctx, i, LOOM_SERVE_ROLE_DECODE, out->decode_cap_rps, &out->decode_rate_rps,
                      err)))
        return s;
    if (out->decode_rate_rps > 0) {
        if ((s = loom_serve_role_steady(ctx, i, LOOM_SERVE_ROLE_DECODE, out->decode_rate_rps, &st,
                                        err)))
            return s;
        out->decode_ttft_s = st.m.ttft.mean;
    }
    return LOOM_OK;
}

double loom_serve_prefill_rate_within(const loom_serve_pool_stats *s, double budget_s)
{
    const int n = LOOM_SERVE_PREFILL_TABLE;
    if (!(s->prefill_ttft_s[0] <= budget_s)) return 0;
    for (int k = 1; k < n; k++) {
        if (s->prefill_ttft_s[k] <= budget_s) continue;
        /* between k − 1 (within) and k (beyond): linear in the TTFT */
        double t0 = s->prefill_ttft_s[k - 1], t1 = s->prefill_ttft_s[k];
        double r0 = s->prefill_rate_rps[k - 1], r1 = s->prefill_rate_rps[k];
        if (!isfinite(t1)) return r0;
        return r0 + (r1 - r0) * (budget_s - t0) / (t1 - t0);
    }
    return s->prefill_rate_rps[n - 1];
}
