/*
 * serve_pareto.c — Pareto fronts of tokens/s per GPU against tokens/s per
 * user (serve_pareto.h).
 */
#include "planner/serve/serve_pareto.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    loom_serve_front_point *v;
    int32_t n, cap;
} list_t;

static loom_status add(list_t *l, const loom_serve_front_point *pt, loom_error *err)
{
    if (l->n == l->cap) {
        int32_t nc = l->cap ? 2 * l->cap : 128;
        loom_serve_front_point *x = realloc(l->v, (size_t)nc * sizeof *x);
        if (!x) return loom_error_set(err, LOOM_ERR_NOMEM, "serving plan: out of memory");
        l->v = x;
        l->cap = nc;
    }
    l->v[l->n++] = *pt;
    return LOOM_OK;
}

static int cmp_user(const void *a, const void *b)
{
    const loom_serve_front_point *x = a, *y = b;
    if (x->tokens_per_s_user != y->tokens_per_s_user)
        return x->tokens_per_s_user > y->tokens_per_s_user ? -1 : 1;
    if (x->tokens_per_s_gpu != y->tokens_per_s_gpu)
        return x->tokens_per_s_gpu > y->tokens_per_s_gpu ? -1 : 1;
    return 0;
}

int32_t loom_serve_pareto_front(loom_serve_front_point *pts, int32_t n)
{
    if (n <= 0) return 0;
    qsort(pts, (size_t)n, sizeof *pts, cmp_user);
    /* falling user speed: a point stays when it beats every faster one on GPU throughput */
    int32_t k = 0;
    double best = -1;
    for (int32_t i = 0; i < n; i++)
        if (pts[i].tokens_per_s_gpu > best) {
            best = pts[i].tokens_per_s_gpu;
            pts[k++] = pts[i];
        }
    return k;
}

/* 1, 2, 4, … below the most, then the most itself. */
static int64_t next_clients(int64_t c, int64_t most)
{
    if (c >= most) return 0;
    return 2 * c < most ? 2 * c : most;
}

static loom_status aggregated(const loom_serve_ctx *ctx, const loom_serve_pool_stats *stats,
                              list_t *l, loom_error *err)
{
    const loom_serve_slo *slo = &ctx->slo;
    for (int32_t i = 0; i < ctx->space->n; i++) {
        int64_t most = (int64_t)floor(stats[i].agg_batch_max), g = ctx->space->cand[i].gpus;
        if (most < 1) most = 1;
        for (int64_t c = 1; c > 0; c = next_clients(c, most)) {
            loom_serve_steady_result st;
            loom_status s = loom_serve_role_steady_clients(ctx, i, LOOM_SERVE_ROLE_AGG, c, &st, err);
            if (s) return s;
            if (slo->ttft_s > 0 && st.m.ttft.mean > slo->ttft_s) continue;
            if (!(st.m.tpot.mean > 0)) continue;
            loom_serve_front_point pt = {.tokens_per_s_gpu = st.m.output_tokens_per_s / (double)g,
                                         .tokens_per_s_user = 1 / st.m.tpot.mean,
                                         .ttft_s = st.m.ttft.mean, .shape = i,
                                         .prefill_shape = -1, .concurrency = c};
            if ((s = add(l, &pt, err))) return s;
        }
    }
    return LOOM_OK;
}

/* The prefill shape that needs the fewest GPUs per request/s, paired with
 * decode shape j whose own TTFT is ttft_d; its rate and TTFT. */
static int32_t best_prefill(const loom_serve_ctx *ctx, const loom_serve_pool_stats *stats,
                            int32_t j, double ttft_d, double *rate, double *ttft)
{
    const loom_cluster *c = ctx->opts->cluster;
    int32_t best = -1;
    double best_cost = INFINITY;
    for (int32_t i = 0; i < ctx->space->n; i++) {
        int64_t gp = ctx->space->cand[i].gpus, gd = ctx->space->cand[j].gpus;
        /* the link of a large deployment: the NIC unless the cluster is one node */
        const loom_link *link = loom_cluster_gpus(c) <= c->gpus_per_node ? &c->intra : &c->inter;
        double tx = link->latency_s + (double)ctx->work.isl * ctx->kv_bytes_per_token /
                                          ((double)(gp < gd ? gp : gd) * link->bandwidth_Bps);
        double budget = ctx->slo.ttft_s > 0 ? ctx->slo.ttft_s - tx - ttft_d : INFINITY;
        double r = loom_serve_prefill_rate_within(&stats[i], budget);
        if (r > 0.9 / tx) r = 0.9 / tx;
        if (!(r > 0)) continue;
        double cost = (double)gp / r;
        if (cost < best_cost) {
            best_cost = cost;
            best = i;
            *rate = r;
            /* the TTFT at that rate: within the budget by construction */
            *ttft = (isfinite(budget) ? budget : stats[i].prefill_ttft_s[LOOM_SERVE_PREFILL_TABLE - 1]) +
                    tx + ttft_d;
        }
    }
    return best;
}

static loom_status disaggregated(const loom_serve_ctx *ctx, const loom_serve_pool_stats *stats,
                                 list_t *l, loom_error *err)
{
    double O = (double)ctx->work.osl;
    for (int32_t j = 0; j < ctx->space->n; j++) {
        int64_t most = (int64_t)floor(stats[j].decode_batch_max), gd = ctx->space->cand[j].gpus;
        if (most < 1) most = 1;
        for (int64_t c = 1; c > 0; c = next_clients(c, most)) {
            loom_serve_steady_result st;
            loom_status s =
                loom_serve_role_steady_clients(ctx, j, LOOM_SERVE_ROLE_DECODE, c, &st, err);
            if (s) return s;
            double ld = st.m.requests_per_s, rate = 0, ttft = 0;
            if (!(ld > 0) || !(st.m.tpot.mean > 0)) continue;
            int32_t i = best_prefill(ctx, stats, j, st.m.ttft.mean, &rate, &ttft);
            if (i < 0) continue;
            double ratio = ld / rate;
            double gpus = (double)gd + ratio * (double)ctx->space->cand[i].gpus;
            loom_serve_front_point pt = {.tokens_per_s_gpu = ld * O / gpus,
                                         .tokens_per_s_user = 1 / st.m.tpot.mean,
                                         .ttft_s = ttft, .shape = j, .prefill_shape = i,
                                         .prefill_per_decode = ratio, .concurrency = c};
            if ((s = add(l, &pt, err))) return s;
        }
    }
    return LOOM_OK;
}

loom_status loom_serve_pareto_build(const loom_serve_ctx *ctx, const loom_serve_pool_stats *stats,
                                    bool disagg, loom_serve_front_point **out, int32_t *n,
                                    loom_error *err)
{
    list_t l = {0};
    *out = NULL;
    *n = 0;
    loom_status s = disagg ? disaggregated(ctx, stats, &l, err) : aggregated(ctx, stats, &l, err);
    if (s) {
        free(l.v);
        return s;
    }
    *n = loom_serve_pareto_front(l.v, l.n);
    if (*n == 0) {
        free(l.v);
        return LOOM_OK;
    }
    *out = l.v;
    return LOOM_OK;
}
