/*
 * serve_deploy.c — a deployment's steady-state estimate and simulation
 * (serve_deploy.h has the model: pools, KV transfer, pairing).
 */
#include "planner/serve/serve_deploy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/serve/sim.h"
#include "costs/serve/steady.h"

loom_status loom_serve_ctx_init(loom_serve_ctx *ctx, loom_error *err)
{
    loom_serve_parallel par;
    loom_serve_parallel_init(&par);
    par.weights = ctx->opts->weights;
    par.kv_dtype = ctx->opts->kv_dtype;
    loom_serve_shape sh;
    loom_status s = loom_serve_shape_build(ctx->opts->graph, &par, &sh, err);
    if (s) return s;
    ctx->kv_bytes_per_token = sh.kv_bytes_per_token;
    loom_serve_shape_free(&sh);
    return LOOM_OK;
}

static const loom_serve_cand *cand(const loom_serve_ctx *ctx, int32_t i)
{
    return &ctx->space->cand[i];
}

void loom_serve_deploy_finish(const loom_serve_ctx *ctx, loom_serve_deploy *d)
{
    if (!d->disagg) {
        d->gpus = d->replicas * cand(ctx, d->agg)->gpus;
        d->kv_nvlink = false;
        d->kv_bytes = d->kv_transfer_s = d->kv_link_Bps = 0;
        return;
    }
    const loom_cluster *c = ctx->opts->cluster;
    int64_t gp = cand(ctx, d->prefill)->gpus, gd = cand(ctx, d->decode)->gpus;
    d->gpus = d->n_prefill * gp + d->n_decode * gd;
    d->kv_nvlink = d->gpus <= c->gpus_per_node;
    const loom_link *link = d->kv_nvlink ? &c->intra : &c->inter;
    d->kv_link_Bps = (double)(gp < gd ? gp : gd) * link->bandwidth_Bps;
    d->kv_bytes = (double)ctx->work.isl * ctx->kv_bytes_per_token;
    d->kv_transfer_s = link->latency_s + d->kv_bytes / d->kv_link_Bps;
}

bool loom_serve_point_meets_means(const loom_serve_slo *slo, const loom_serve_point *p)
{
    if (p->saturated) return false;
    if (slo->ttft_s > 0 && p->ttft.mean > slo->ttft_s) return false;
    if (slo->tpot_s > 0 && p->tpot.mean > slo->tpot_s) return false;
    return true;
}

bool loom_serve_point_meets(const loom_serve_slo *slo, const loom_serve_point *p)
{
    return !p->saturated && p->attainment >= slo->attainment;
}

static loom_serve_dist flat(double v) { return (loom_serve_dist){v, v, v, v}; }

/* The workload one instance of a pool sees. */
static loom_serve_workload instance_work(const loom_serve_ctx *ctx, loom_serve_role role, double rate)
{
    loom_serve_workload w = ctx->work;
    w.load = LOOM_LOAD_QPS;
    w.rate = rate;
    w.num_requests = 0;
    w.prompt_cached = role == LOOM_SERVE_ROLE_DECODE;
    if (role == LOOM_SERVE_ROLE_PREFILL) {   /* the prefill instance's output is the first token */
        w.osl = 1;
        w.osl_dist = LOOM_LEN_FIXED;
        w.osl_spread = 0;
    }
    return w;
}

/* ---- steady state ----------------------------------------------------------- */

static loom_status agg_steady(const loom_serve_ctx *ctx, const loom_serve_deploy *d,
                              const loom_serve_load *l, loom_serve_point *out, loom_error *err)
{
    const loom_serve_cand *c = cand(ctx, d->agg);
    double r = (double)d->replicas;
    loom_serve_workload w = instance_work(ctx, LOOM_SERVE_ROLE_AGG, l->rate / r);
    if (l->kind == LOOM_LOAD_CONCURRENCY) {
        w.load = LOOM_LOAD_CONCURRENCY;
        w.concurrency = (l->concurrency + d->replicas - 1) / d->replicas;
    }
    loom_serve_steady_result st;
    loom_status s = loom_serve_steady(c->m, &w, &st, err);
    if (s) return s;
    memset(out, 0, sizeof *out);
    out->concurrency = l->kind == LOOM_LOAD_CONCURRENCY ? l->concurrency : 0;
    out->rate_rps = l->kind == LOOM_LOAD_QPS ? l->rate : st.m.requests_per_s * r;
    out->ttft = st.m.ttft;
    out->tpot = st.m.tpot;
    out->e2e = st.m.e2e;
    out->output_tokens_per_s = st.m.output_tokens_per_s * r;
    out->mean_running = st.batch;
    out->saturated = st.m.saturated;
    return LOOM_OK;
}

loom_status loom_serve_role_steady(const loom_serve_ctx *ctx, int32_t i, loom_serve_role role,
                                   double rate, loom_serve_steady_result *st, loom_error *err)
{
    loom_serve_workload w = instance_work(ctx, role, rate);
    return loom_serve_steady(cand(ctx, i)->m, &w, st, err);
}

loom_status loom_serve_role_steady_clients(const loom_serve_ctx *ctx, int32_t i,
                                           loom_serve_role role, int64_t clients,
                                           loom_serve_steady_result *st, loom_error *err)
{
    loom_serve_workload w = instance_work(ctx, role, 1);
    w.load = LOOM_LOAD_CONCURRENCY;
    w.concurrency = clients;
    return loom_serve_steady(cand(ctx, i)->m, &w, st, err);
}

/* The mean wait of the KV send queue at per-prefill-instance rate lp; < 0
 * when the link is saturated. */
static double kv_wait_s(const loom_serve_deploy *d, double lp)
{
    double rho = lp * d->kv_transfer_s;
    return rho < 0.98 ? rho / (2 * (1 - rho)) * d->kv_transfer_s : -1;
}

static loom_status disagg_rate_steady(const loom_serve_ctx *ctx, const loom_serve_deploy *d,
                                      double rate, loom_serve_point *out, loom_error *err)
{
    double lp = rate / (double)d->n_prefill, ld = rate / (double)d->n_decode;
    loom_serve_steady_result p, q;
    loom_status s = loom_serve_role_steady(ctx, d->prefill, LOOM_SERVE_ROLE_PREFILL, lp, &p, err);
    if (!s) s = loom_serve_role_steady(ctx, d->decode, LOOM_SERVE_ROLE_DECODE, ld, &q, err);
    if (s) return s;
    double wait = kv_wait_s(d, lp);
    memset(out, 0, sizeof *out);
    out->rate_rps = rate;
    double ttft = p.m.ttft.mean + d->kv_transfer_s + (wait > 0 ? wait : 0) + q.m.ttft.mean;
    out->ttft = flat(ttft);
    out->tpot = q.m.tpot;
    out->e2e = flat(ttft + ((double)ctx->work.osl - 1) * q.m.tpot.mean);
    double rp = p.m.requests_per_s * (double)d->n_prefill, rq = q.m.requests_per_s * (double)d->n_decode;
    out->output_tokens_per_s = (rp < rq ? rp : rq) * (double)ctx->work.osl;
    out->mean_running = q.batch;
    out->saturated = p.m.saturated || q.m.saturated || wait < 0 || lp >= p.capacity_rps ||
                     ld >= q.capacity_rps;
    return LOOM_OK;
}

/* The most requests/s the pools and the link sustain. */
static loom_status disagg_cap(const loom_serve_ctx *ctx, const loom_serve_deploy *d, double *cap,
                              loom_error *err)
{
    loom_serve_steady_result p, q;
    loom_status s = loom_serve_role_steady(ctx, d->prefill, LOOM_SERVE_ROLE_PREFILL, 1e-3, &p, err);
    if (!s) s = loom_serve_role_steady(ctx, d->decode, LOOM_SERVE_ROLE_DECODE, 1e-3, &q, err);
    if (s) return s;
    double a = p.capacity_rps * (double)d->n_prefill, b = q.capacity_rps * (double)d->n_decode;
    double x = 0.98 / d->kv_transfer_s * (double)d->n_prefill;
    *cap = a < b ? a : b;
    if (x < *cap) *cap = x;
    return LOOM_OK;
}

/* C clients: the rate λ with λ · E2E(λ) = C (Little), by bisection. */
static loom_status disagg_conc_rate(const loom_serve_ctx *ctx, const loom_serve_deploy *d,
                                    int64_t clients, double *rate, double *extra_wait_s,
                                    loom_error *err)
{
    double cap, C = (double)clients;
    loom_status s = disagg_cap(ctx, d, &cap, err);
    if (s) return s;
    double hi = cap * 0.999, lo = 0;
    loom_serve_point pt;
    if ((s = disagg_rate_steady(ctx, d, hi, &pt, err))) return s;
    *extra_wait_s = 0;
    if (hi * pt.e2e.mean <= C) {   /* more clients than the deployment serves: they queue */
        *rate = hi;
        *extra_wait_s = (C - hi * pt.e2e.mean) / hi;
        return LOOM_OK;
    }
    for (int k = 0; k < 30; k++) {
        double mid = (lo + hi) / 2;
        if ((s = disagg_rate_steady(ctx, d, mid, &pt, err))) return s;
        if (mid * pt.e2e.mean < C) lo = mid;
        else hi = mid;
    }
    *rate = (lo + hi) / 2;
    return LOOM_OK;
}

loom_status loom_serve_deploy_steady(const loom_serve_ctx *ctx, const loom_serve_deploy *d,
                                     const loom_serve_load *l, loom_serve_point *out,
                                     loom_error *err)
{
    loom_status s;
    if (!d->disagg) {
        s = agg_steady(ctx, d, l, out, err);
    } else if (l->kind == LOOM_LOAD_QPS) {
        s = disagg_rate_steady(ctx, d, l->rate, out, err);
    } else {
        double rate, extra;
        s = disagg_conc_rate(ctx, d, l->concurrency, &rate, &extra, err);
        if (!s) s = disagg_rate_steady(ctx, d, rate, out, err);
        if (!s) {
            out->concurrency = l->concurrency;
            out->ttft = flat(out->ttft.mean + extra);
            out->e2e = flat(out->e2e.mean + extra);
            out->saturated = false;   /* closed loop: extra clients wait, the rate holds */
        }
    }
    if (s) return s;
    out->attainment = loom_serve_point_meets_means(&ctx->slo, out) ? 1 : 0;
    return LOOM_OK;
}

/* ---- simulation --------------------------------------------------------------- */


static bool request_meets(const loom_serve_slo *slo, double ttft, double tpot)
{
    return (slo->ttft_s <= 0 || ttft <= slo->ttft_s) && (slo->tpot_s <= 0 || tpot <= slo->tpot_s);
}

/* Arrays for one simulated instance's per-request times. */
typedef struct {
    loom_serve_sim_record rec;
    loom_serve_sim_result res;
} run_t;

static loom_status run_alloc(run_t *r, int64_t n, loom_error *err)
{
    memset(&r->rec, 0, sizeof r->rec);
    r->rec.ttft_s = malloc((size_t)n * sizeof(double));
    r->rec.tpot_s = malloc((size_t)n * sizeof(double));
    r->rec.cap = n;
    if (!r->rec.ttft_s || !r->rec.tpot_s)
        return loom_error_set(err, LOOM_ERR_NOMEM, "serving plan: out of memory (%lld requests)",
                              (long long)n);
    return LOOM_OK;
}

static void run_free(run_t *r)
{
    free(r->rec.ttft_s);
    free(r->rec.tpot_s);
    r->rec.ttft_s = r->rec.tpot_s = NULL;
}

static loom_status agg_simulate(loom_serve_ctx *ctx, const loom_serve_deploy *d,
                                const loom_serve_load *l, loom_serve_point *out, loom_error *err)
{
    loom_serve_model *m = NULL;
    run_t *r = calloc(1, sizeof *r);
    if (!r) return loom_error_set(err, LOOM_ERR_NOMEM, "serving plan: out of memory");
    loom_status s = loom_serve_space_model(ctx->opts, &cand(ctx, d->agg)->inst, d->replicas, &m, err);
    if (s) goto done;
    /* the whole load, split over the replicas by the simulator (as loom eval does) */
    loom_serve_workload w = ctx->work;
    w.prompt_cached = false;
    w.load = l->kind;
    w.rate = l->rate;
    w.concurrency = l->concurrency;
    int64_t per = (loom_serve_workload_requests(&w) + d->replicas - 1) / d->replicas;
    if ((s = run_alloc(r, per, err))) goto done;
    if ((s = loom_serve_simulate_record(m, &w, &r->rec, &r->res, err))) goto done;
    ctx->sims++;
    const loom_serve_metrics *mt = &r->res.m;
    int64_t met = 0;
    for (int64_t i = 0; i < r->rec.n; i++)
        met += request_meets(&ctx->slo, r->rec.ttft_s[i], r->rec.tpot_s[i]);
    memset(out, 0, sizeof *out);
    out->simulated = true;
    out->concurrency = l->kind == LOOM_LOAD_CONCURRENCY ? l->concurrency : 0;
    out->rate_rps = l->kind == LOOM_LOAD_QPS ? l->rate : mt->requests_per_s;
    out->ttft = mt->ttft;
    out->tpot = mt->tpot;
    out->e2e = mt->e2e;
    out->output_tokens_per_s = mt->output_tokens_per_s;
    out->mean_running = mt->mean_running;
    out->saturated = mt->saturated;
    out->attainment = r->rec.n > 0 ? (double)met / (double)r->rec.n : 0;
done:
    run_free(r);
    free(r);
    loom_serve_model_destroy(m);
    return s;
}

static loom_status pool_simulate(loom_serve_ctx *ctx, int32_t i, loom_serve_role role, double rate,
                                 run_t *r, loom_error *err)
{
    loom_serve_workload w = instance_work(ctx, role, rate);
    loom_status s = run_alloc(r, loom_serve_workload_requests(&w), err);
    if (!s) s = loom_serve_simulate_record(cand(ctx, i)->m, &w, &r->rec, &r->res, err);
    if (!s) ctx->sims++;
    return s;
}

static loom_status disagg_simulate(loom_serve_ctx *ctx, const loom_serve_deploy *d, double rate,
                                   loom_serve_point *out, loom_error *err)
{
    double lp = rate / (double)d->n_prefill, ld = rate / (double)d->n_decode;
    run_t *r = calloc(2, sizeof *r);
    double *ttft = NULL, *tpot = NULL, *e2e = NULL;
    loom_status s;
    if (!r) return loom_error_set(err, LOOM_ERR_NOMEM, "serving plan: out of memory");
    if ((s = pool_simulate(ctx, d->prefill, LOOM_SERVE_ROLE_PREFILL, lp, &r[0], err))) goto done;
    if ((s = pool_simulate(ctx, d->decode, LOOM_SERVE_ROLE_DECODE, ld, &r[1], err))) goto done;
    int64_t n = r[0].rec.n < r[1].rec.n ? r[0].rec.n : r[1].rec.n;
    ttft = malloc((size_t)n * sizeof *ttft);
    tpot = malloc((size_t)n * sizeof *tpot);
    e2e = malloc((size_t)n * sizeof *e2e);
    if (!ttft || !tpot || !e2e) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "serving plan: out of memory");
        goto done;
    }
    double wait = kv_wait_s(d, lp), x = d->kv_transfer_s + (wait > 0 ? wait : 0);
    double O = (double)ctx->work.osl;
    int64_t met = 0;
    for (int64_t i = 0; i < n; i++) {
        ttft[i] = r[0].rec.ttft_s[i] + x + r[1].rec.ttft_s[i];
        tpot[i] = r[1].rec.tpot_s[i];
        e2e[i] = ttft[i] + (O - 1) * tpot[i];
        met += request_meets(&ctx->slo, ttft[i], tpot[i]);
    }
    memset(out, 0, sizeof *out);
    out->simulated = true;
    out->rate_rps = rate;
    out->attainment = n > 0 ? (double)met / (double)n : 0;
    out->ttft = loom_serve_dist_of(ttft, n);
    out->tpot = loom_serve_dist_of(tpot, n);
    out->e2e = loom_serve_dist_of(e2e, n);
    double rp = r[0].res.m.requests_per_s * (double)d->n_prefill;
    double rq = r[1].res.m.requests_per_s * (double)d->n_decode;
    out->output_tokens_per_s = (rp < rq ? rp : rq) * O;
    out->mean_running = r[1].res.m.mean_running;
    out->saturated = r[0].res.m.saturated || r[1].res.m.saturated || wait < 0;
done:
    if (r) {
        run_free(&r[0]);
        run_free(&r[1]);
    }
    free(r);
    free(ttft);
    free(tpot);
    free(e2e);
    return s;
}

loom_status loom_serve_deploy_simulate(loom_serve_ctx *ctx, const loom_serve_deploy *d,
                                       const loom_serve_load *l, loom_serve_point *out,
                                       loom_error *err)
{
    if (!d->disagg) return agg_simulate(ctx, d, l, out, err);
    if (l->kind == LOOM_LOAD_QPS) return disagg_simulate(ctx, d, l->rate, out, err);
    double rate, extra;
    loom_status s = disagg_conc_rate(ctx, d, l->concurrency, &rate, &extra, err);
    if (!s) s = disagg_simulate(ctx, d, rate, out, err);
    if (!s) out->concurrency = l->concurrency;
    return s;
}

void loom_serve_deploy_label(const loom_serve_ctx *ctx, const loom_serve_deploy *d, char *buf,
                             size_t n)
{
    char a[96], b[96];
    if (!d->disagg) {
        loom_serve_inst_label(&cand(ctx, d->agg)->inst, a, sizeof a);
        snprintf(buf, n, "%lld × (%s)", (long long)d->replicas, a);
        return;
    }
    loom_serve_inst_label(&cand(ctx, d->prefill)->inst, a, sizeof a);
    loom_serve_inst_label(&cand(ctx, d->decode)->inst, b, sizeof b);
    snprintf(buf, n, "prefill %lld × (%s) + decode %lld × (%s)", (long long)d->n_prefill, a,
             (long long)d->n_decode, b);
}
