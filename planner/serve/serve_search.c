/*
 * serve_search.c — the serving deployment search (serve_plan.h).
 *
 * 1. Shapes. Every instance shape that fits (serve_space.h), and what one
 *    instance of each carries in each role under the SLOs (serve_pool.h).
 * 2. Candidates. Aggregated: each shape, with as many replicas as the
 *    cluster holds (under `gpus`: as many as the rate needs). Disaggregated:
 *    each (prefill shape, decode shape) pair, with the pool sizes (n_p, n_d)
 *    that maximise min(n_p · λ_p, n_d · λ_d) / GPUs within the cluster when
 *    the objective finds a rate (at a given load: min(n_p · λ_p, n_d · λ_d)
 *    itself, the most the cluster carries) —
 *    λ_p the prefill rate whose TTFT fits what the KV transfer and the
 *    decode's first iteration leave of the bound, λ_d the decode rate whose
 *    TPOT meets its bound — ties going to the larger deployment (under
 *    `gpus`: n = ⌈rate / λ⌉ each). The pairing considers both links: NVLink
 *    when the deployment fits one node, the NIC otherwise. Prefill shapes
 *    may have pipeline stages: a lone prompt passes through them one after
 *    the other (costs/serve/step.h).
 * 3. Ranking. Each candidate's steady-state figures at the objective's
 *    operating point give its score (serve_plan.h); infeasible ones sink.
 * 4. Re-check. The best `recheck` of each kind are simulated: goodput and
 *    throughput without a load search the rate by simulation (from the
 *    steady estimate, up or down by 15–20%, then bisection to 3%); a given
 *    load is simulated as is; `gpus` adds an instance to the pool that
 *    misses its bound (TTFT: prefill, TPOT: decode or another replica) until
 *    the simulated attainment holds or the cluster is full. The simulation
 *    decides.
 */
#include "planner/serve/serve_plan.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "graph/model.h"
#include "planner/serve/serve_pareto.h"
#include "planner/serve/serve_pool.h"

static const char *const obj_names[] = {
#define LOOM_X(n, s) s,
    LOOM_SERVE_OBJECTIVE_LIST(LOOM_X)
#undef LOOM_X
};
_Static_assert(sizeof obj_names / sizeof obj_names[0] == LOOM_SERVE_OBJ_COUNT, "objective names");

const char *loom_serve_objective_name(loom_serve_objective o)
{
    return (unsigned)o < LOOM_SERVE_OBJ_COUNT ? obj_names[o] : "?";
}

const char *loom_serve_disagg_name(loom_serve_disagg_mode m)
{
    return m == LOOM_DISAGG_ON ? "on" : m == LOOM_DISAGG_OFF ? "off" : "auto";
}

typedef struct {
    loom_serve_plan *p;
    loom_serve_pool_stats *stats;
    loom_serve_option *opt[2];     /* ranked candidates per kind */
    int32_t n_opt[2], cap_opt[2];
    int64_t gpus_total;
} search_t;

static void note(loom_serve_plan *p, const char *fmt, ...)
{
    if (p->n_notes >= (int32_t)(sizeof p->notes / sizeof p->notes[0])) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->notes[p->n_notes++], sizeof p->notes[0], fmt, ap);
    va_end(ap);
}

static bool rate_objective(const loom_serve_plan *p)
{
    return p->req.objective == LOOM_SERVE_OBJ_GOODPUT ||
           (p->req.objective == LOOM_SERVE_OBJ_THROUGHPUT && p->req.work.load == LOOM_LOAD_OFFLINE);
}

/* ---- scores ------------------------------------------------------------------- */

static double s_gpus(const loom_serve_plan *p)
{
    return (double)loom_cluster_gpus(p->req.space.cluster);
}

/* The objective's value of a point (higher is better) and whether it counts. */
static void score(const loom_serve_plan *p, loom_serve_option *o, const loom_serve_point *pt)
{
    const loom_serve_slo *slo = &p->req.slo;
    bool sim = pt->simulated;
    double g = (double)o->dep.gpus;
    switch (p->req.objective) {
    case LOOM_SERVE_OBJ_GOODPUT:
        o->feasible = pt->rate_rps > 0 && (sim ? loom_serve_point_meets(slo, pt)
                                               : loom_serve_point_meets_means(slo, pt));
        o->score = pt->rate_rps / g;
        break;
    case LOOM_SERVE_OBJ_THROUGHPUT:
        if (p->req.work.load == LOOM_LOAD_OFFLINE) {
            o->feasible = pt->rate_rps > 0 && loom_serve_point_meets_means(slo, pt);
            o->score = pt->output_tokens_per_s / g;
        } else {
            /* the clients are given: what they get from the cluster, per
             * GPU of the cluster (a smaller deployment would win per own
             * GPU by leaving the rest idle); among equals the smaller */
            o->feasible = sim ? loom_serve_point_meets(slo, pt) : loom_serve_point_meets_means(slo, pt);
            o->score = pt->output_tokens_per_s / (double)s_gpus(p) * (1 - 1e-9 * g);
        }
        break;
    case LOOM_SERVE_OBJ_LATENCY:
        o->feasible = sim ? loom_serve_point_meets(slo, pt) : loom_serve_point_meets_means(slo, pt);
        o->score = -pt->e2e.mean;
        break;
    case LOOM_SERVE_OBJ_GPUS:
    default:
        o->feasible = sim ? loom_serve_point_meets(slo, pt) : loom_serve_point_meets_means(slo, pt);
        /* fewest GPUs; among equals the lowest latency */
        o->score = -g - 1e-3 * (pt->e2e.mean / (1 + pt->e2e.mean));
        break;
    }
}

/* Feasible first, then by score; a stable order for equal scores. */
static int cmp_opt(const void *a, const void *b)
{
    const loom_serve_option *x = a, *y = b;
    if (x->feasible != y->feasible) return x->feasible ? -1 : 1;
    /* scores within the simulations' resolution (a rate search settles
     * to the realised rate of its last run: variants that never reach
     * their caps differ by ~1e-7) are equal */
    double tol = 1e-6 * fmax(fabs(x->score), fabs(y->score));
    if (fabs(x->score - y->score) > tol) return x->score > y->score ? -1 : 1;
    if (x->dep.gpus != y->dep.gpus) return x->dep.gpus > y->dep.gpus ? -1 : 1;
    /* a tie goes to the earlier shape: an engine's defaults come before
     * its smaller-chunk and capped variants (serve_space.c) */
    if (x->dep.agg != y->dep.agg) return x->dep.agg < y->dep.agg ? -1 : 1;
    if (x->dep.prefill != y->dep.prefill) return x->dep.prefill < y->dep.prefill ? -1 : 1;
    if (x->dep.decode != y->dep.decode) return x->dep.decode < y->dep.decode ? -1 : 1;
    return 0;
}

static loom_status push(search_t *s, int kind, const loom_serve_option *o, loom_error *err)
{
    if (s->n_opt[kind] == s->cap_opt[kind]) {
        int32_t nc = s->cap_opt[kind] ? 2 * s->cap_opt[kind] : 64;
        loom_serve_option *x = realloc(s->opt[kind], (size_t)nc * sizeof *x);
        if (!x) return loom_error_set(err, LOOM_ERR_NOMEM, "serving plan: out of memory");
        s->opt[kind] = x;
        s->cap_opt[kind] = nc;
    }
    s->opt[kind][s->n_opt[kind]++] = *o;
    return LOOM_OK;
}

/* The steady point of a candidate at the objective's operating point. */
static loom_status steady_point(search_t *s, loom_serve_option *o, double rate, loom_error *err)
{
    loom_serve_plan *p = s->p;
    loom_serve_load l = p->load;
    if (rate_objective(p)) {
        if (!(rate > 0)) {
            memset(&o->steady, 0, sizeof o->steady);
            o->feasible = false;
            o->score = 0;
            return LOOM_OK;
        }
        l = (loom_serve_load){.kind = LOOM_LOAD_QPS, .rate = rate};
    }
    loom_status st = loom_serve_deploy_steady(&p->ctx, &o->dep, &l, &o->steady, err);
    if (st) return st;
    score(p, o, &o->steady);
    return LOOM_OK;
}

/* ---- candidates ---------------------------------------------------------------- */

static loom_status aggregated(search_t *s, loom_error *err)
{
    loom_serve_plan *p = s->p;
    for (int32_t i = 0; i < p->space.n; i++) {
        const loom_serve_pool_stats *ps = &s->stats[i];
        int64_t g = p->space.cand[i].gpus, r = s->gpus_total / g;
        if (p->req.objective == LOOM_SERVE_OBJ_GPUS) {
            if (!(ps->agg_rate_rps > 0)) continue;
            r = (int64_t)ceil(p->load.rate / ps->agg_rate_rps - 1e-9);
            if (r < 1) r = 1;
            if (r * g > s->gpus_total) continue;
        }
        loom_serve_option o = {0};
        o.dep = (loom_serve_deploy){.agg = i, .replicas = r, .prefill = -1, .decode = -1};
        loom_serve_deploy_finish(&p->ctx, &o.dep);
        loom_status st = steady_point(s, &o, ps->agg_rate_rps * (double)r, err);
        if (!st) st = push(s, 0, &o, err);
        if (st) return st;
    }
    return LOOM_OK;
}

/* The prefill rate of shape i paired with decode shape j over a link of
 * transfer time tx (0 when the TTFT is not bounded: 95% of capacity). */
static double prefill_rate(const search_t *s, int32_t i, int32_t j, double tx)
{
    const loom_serve_slo *slo = &s->p->req.slo;
    double budget = slo->ttft_s > 0 ? slo->ttft_s - tx - s->stats[j].decode_ttft_s : INFINITY;
    double r = loom_serve_prefill_rate_within(&s->stats[i], budget);
    double link = 0.9 / tx;   /* the send queue below 90% */
    return r < link ? r : link;
}

/* Pool sizes of the pair (i prefill, j decode) for the objective. */
static bool size_pools(const search_t *s, int32_t i, int32_t j, loom_serve_deploy *best)
{
    const loom_serve_plan *p = s->p;
    int64_t gp = p->space.cand[i].gpus, gd = p->space.cand[j].gpus, N = s->gpus_total;
    double ld = s->stats[j].decode_rate_rps;
    if (!(ld > 0)) return false;
    loom_serve_deploy d = {.disagg = true, .agg = -1, .prefill = i, .decode = j,
                           .n_prefill = 1, .n_decode = 1};
    if (p->req.objective == LOOM_SERVE_OBJ_GPUS) {
        /* size on the NIC's rate, then again on NVLink's if it fits a node */
        for (int pass = 0; pass < 2; pass++) {
            loom_serve_deploy_finish(&p->ctx, &d);
            double lp = prefill_rate(s, i, j, d.kv_transfer_s);
            if (!(lp > 0)) return false;
            d.n_prefill = (int64_t)ceil(p->load.rate / lp - 1e-9);
            d.n_decode = (int64_t)ceil(p->load.rate / ld - 1e-9);
            if (d.n_prefill < 1) d.n_prefill = 1;
            if (d.n_decode < 1) d.n_decode = 1;
        }
        loom_serve_deploy_finish(&p->ctx, &d);
        *best = d;
        return d.gpus <= N;
    }
    /* a rate to find: the best rate per GPU; a load given: the most the
     * cluster carries (then the fewest GPUs) */
    bool per_gpu = rate_objective(p);
    double best_score = -1, best_rate = 0;
    for (int64_t np = 1; np * gp + gd <= N; np++) {
        /* the decode pool that balances np prefill instances, on either link */
        int64_t cands[5] = {1, (N - np * gp) / gd, 0, 0, 0};
        int nc = 2;
        for (int link = 0; link < 2; link++) {
            loom_serve_deploy t = d;
            t.n_prefill = np;
            t.n_decode = link == 0 ? 1 : (N - np * gp) / gd;
            loom_serve_deploy_finish(&p->ctx, &t);
            double lp = prefill_rate(s, i, j, t.kv_transfer_s);
            double nd = (double)np * lp / ld;
            cands[nc++] = (int64_t)floor(nd);
            if (nc < 5) cands[nc++] = (int64_t)ceil(nd);
        }
        for (int k = 0; k < nc; k++) {
            int64_t nd = cands[k];
            if (nd < 1 || np * gp + nd * gd > N) continue;
            loom_serve_deploy t = d;
            t.n_prefill = np;
            t.n_decode = nd;
            loom_serve_deploy_finish(&p->ctx, &t);
            double lp = prefill_rate(s, i, j, t.kv_transfer_s);
            double a = (double)np * lp, b = (double)nd * ld, rate = a < b ? a : b;
            double sc = per_gpu ? rate / (double)t.gpus : rate * (1 - 1e-9 * (double)t.gpus);
            if (sc > best_score * (1 + 1e-9) || (sc >= best_score * (1 - 1e-9) && rate > best_rate)) {
                best_score = sc;
                best_rate = rate;
                *best = t;
            }
        }
    }
    return best_score > 0;
}

static loom_status disaggregated(search_t *s, loom_error *err)
{
    loom_serve_plan *p = s->p;
    for (int32_t i = 0; i < p->space.n; i++)
        for (int32_t j = 0; j < p->space.n; j++) {
            loom_serve_option o = {0};
            if (p->space.cand[i].agg_only || p->space.cand[j].agg_only) continue;
            if (!size_pools(s, i, j, &o.dep)) continue;
            double lp = prefill_rate(s, i, j, o.dep.kv_transfer_s) * (double)o.dep.n_prefill;
            double ld = s->stats[j].decode_rate_rps * (double)o.dep.n_decode;
            loom_status st = steady_point(s, &o, lp < ld ? lp : ld, err);
            if (!st) st = push(s, 1, &o, err);
            if (st) return st;
        }
    return LOOM_OK;
}

/* ---- re-check by simulation ------------------------------------------------------ */

static bool sim_ok(const loom_serve_plan *p, const loom_serve_point *pt)
{
    if (p->req.objective == LOOM_SERVE_OBJ_THROUGHPUT)
        return loom_serve_point_meets_means(&p->req.slo, pt);
    return loom_serve_point_meets(&p->req.slo, pt);
}

/* The highest rate the simulation accepts, from the steady estimate. */
static loom_status sim_rate_search(search_t *s, loom_serve_option *o, loom_error *err)
{
    loom_serve_plan *p = s->p;
    double start = o->steady.rate_rps, lo = 0, hi = INFINITY, r = start;
    loom_serve_point pt, lo_pt = {0};
    for (int k = 0; k < 14 && r > start * 0.02; k++) {
        loom_serve_load l = {.kind = LOOM_LOAD_QPS, .rate = r};
        loom_status st = loom_serve_deploy_simulate(&p->ctx, &o->dep, &l, &pt, err);
        if (st) return st;
        if (sim_ok(p, &pt)) {
            lo = r;
            lo_pt = pt;
        } else {
            hi = r;
            if (lo == 0) lo_pt = pt;   /* the closest miss, if nothing passes */
        }
        if (lo > 0 && isfinite(hi) && hi / lo < 1.03) break;
        r = lo == 0 ? r * 0.8 : isinf(hi) ? r * 1.15 : (lo + hi) / 2;
    }
    o->sim = lo_pt;
    score(p, o, &o->sim);
    if (lo == 0) o->feasible = false;
    return LOOM_OK;
}

/* Capacity planning: add instances until the simulated attainment holds. */
static loom_status sim_grow(search_t *s, loom_serve_option *o, loom_error *err)
{
    loom_serve_plan *p = s->p;
    const loom_serve_slo *slo = &p->req.slo;
    for (int k = 0; k < 6; k++) {
        loom_status st = loom_serve_deploy_simulate(&p->ctx, &o->dep, &p->load, &o->sim, err);
        if (st) return st;
        score(p, o, &o->sim);
        if (o->feasible) return LOOM_OK;
        loom_serve_deploy d = o->dep;
        if (!d.disagg) d.replicas++;
        else if (slo->ttft_s > 0 && o->sim.ttft.p90 > slo->ttft_s) d.n_prefill++;
        else d.n_decode++;
        loom_serve_deploy_finish(&p->ctx, &d);
        if (d.gpus > s->gpus_total) return LOOM_OK;
        o->dep = d;
    }
    return LOOM_OK;
}

static loom_status recheck(search_t *s, loom_error *err)
{
    loom_serve_plan *p = s->p;
    int32_t k_max = p->req.recheck > 0 ? p->req.recheck : 3;
    for (int kind = 0; kind < 2; kind++) {
        /* aggregated options at the engine's default chunk and at a smaller
         * one are re-checked k_max each: the steady estimate sees a chunk's
         * TPOT gain but not all of its TTFT cost, so it must not crowd the
         * default out */
        int32_t done_of[2] = {0, 0};
        for (int32_t i = 0; i < s->n_opt[kind] && (done_of[0] < k_max || done_of[1] < k_max); i++) {
            loom_serve_option o = s->opt[kind][i];
            int v = !o.dep.disagg && p->space.cand[o.dep.agg].agg_only;
            int32_t *done_p = &done_of[v];
            if (*done_p >= k_max) continue;
            int32_t done = *done_p;
            if (!o.feasible && done > 0) break;
            loom_status st;
            if (rate_objective(p)) st = o.feasible ? sim_rate_search(s, &o, err) : LOOM_OK;
            else if (p->req.objective == LOOM_SERVE_OBJ_GPUS) st = sim_grow(s, &o, err);
            else {
                st = loom_serve_deploy_simulate(&p->ctx, &o.dep, &p->load, &o.sim, err);
                if (!st) score(p, &o, &o.sim);
            }
            if (st) return st;
            (*done_p)++;
            if (!o.sim.simulated) continue;
            p->checked[p->n_checked++] = o;
        }
    }
    qsort(p->checked, (size_t)p->n_checked, sizeof *p->checked, cmp_opt);
    for (int32_t i = 0; i < p->n_checked; i++) {
        const loom_serve_option *o = &p->checked[i];
        int kind = o->dep.disagg ? 1 : 0;
        if (!p->have_kind[kind] && o->feasible) {
            p->have_kind[kind] = true;
            p->best_kind[kind] = *o;
        }
    }
    /* disaggregation must win by the margin (serve_plan.h) */
    if (p->have_kind[0] || p->have_kind[1]) {
        int kind = p->have_kind[0] ? 0 : 1;
        if (p->have_kind[0] && p->have_kind[1]) {
            double a = p->best_kind[0].score, d = p->best_kind[1].score;
            kind = d > a + LOOM_SERVE_DISAGG_MARGIN * fabs(a) ? 1 : 0;
        }
        p->have_best = true;
        p->best = p->best_kind[kind];
    }
    return LOOM_OK;
}

/* ---- the run --------------------------------------------------------------------- */

static loom_status check_request(const loom_serve_plan_request *r, loom_error *err)
{
    bool slo = r->slo.ttft_s > 0 || r->slo.tpot_s > 0;
    loom_load_kind l = r->work.load;
    if (!(r->slo.attainment > 0 && r->slo.attainment <= 1))
        return loom_error_set(err, LOOM_ERR_INVALID, "--attainment: expected a share in (0, 1], "
                              "found %g", r->slo.attainment);
    switch (r->objective) {
    case LOOM_SERVE_OBJ_GOODPUT:
        if (!slo)
            return loom_error_set(err, LOOM_ERR_INVALID, "--objective goodput counts the requests "
                                  "that meet the SLOs: give --ttft S and/or --tpot S");
        if (l != LOOM_LOAD_OFFLINE)
            return loom_error_set(err, LOOM_ERR_INVALID, "--objective goodput finds the request "
                                  "rate itself: drop --%s (or use --objective throughput, "
                                  "latency or gpus)", l == LOOM_LOAD_QPS ? "qps" : "concurrency");
        break;
    case LOOM_SERVE_OBJ_THROUGHPUT:
        if (l == LOOM_LOAD_QPS)
            return loom_error_set(err, LOOM_ERR_INVALID, "--objective throughput at a fixed "
                                  "--qps: every deployment that keeps up serves the same tokens/s; "
                                  "use --objective gpus (fewest GPUs for that rate), goodput or "
                                  "latency");
        break;
    case LOOM_SERVE_OBJ_GPUS:
        if (l != LOOM_LOAD_QPS)
            return loom_error_set(err, LOOM_ERR_INVALID, "--objective gpus sizes the deployment "
                                  "to a request rate: give --qps R");
        break;
    default:
        break;
    }
    return LOOM_OK;
}

/* Why nothing fits: the shapes the space tried. */
static loom_status no_shape(const loom_serve_plan *p, loom_error *err)
{
    const loom_serve_space_opts *o = &p->req.space;
    return loom_error_set(err, LOOM_ERR_INFEASIBLE,
                          "no instance of %s fits %s: of %d shapes up to %lld GPUs, %d leave no "
                          "KV cache for a request of %lld tokens (%s weights on %s) and %d are "
                          "refused by the engine's sharding rules",
                          loom_graph_name(o->graph), o->cluster->name, (int)p->space.tried,
                          (long long)loom_cluster_gpus(o->cluster), (int)p->space.no_fit,
                          (long long)o->seq_tokens, loom_serve_weights_name(o->weights),
                          o->cluster->gpu.name, (int)p->space.refused);
}

static loom_status nothing_meets(const search_t *s, loom_error *err)
{
    const loom_serve_plan *p = s->p;
    char slo[96] = "";
    int k = 0;
    if (p->req.slo.ttft_s > 0) k += snprintf(slo + k, sizeof slo - (size_t)k, "TTFT ≤ %g s", p->req.slo.ttft_s);
    if (p->req.slo.tpot_s > 0)
        snprintf(slo + k, sizeof slo - (size_t)k, "%sTPOT ≤ %g ms", k ? ", " : "", p->req.slo.tpot_s * 1e3);
    const loom_serve_option *c = p->n_checked > 0 ? &p->checked[0] : NULL;
    char lab[256] = "none";
    if (c) loom_serve_deploy_label(&p->ctx, &c->dep, lab, sizeof lab);
    if (!c && p->req.objective == LOOM_SERVE_OBJ_GPUS) {
        /* no deployment fits the cluster: what the best shape per GPU would need */
        double best = 0;
        int32_t at = 0;
        for (int32_t i = 0; i < p->space.n; i++) {
            double r = s->stats[i].agg_rate_rps / (double)p->space.cand[i].gpus;
            if (r > best) best = r, at = i;
        }
        loom_serve_inst_label(&p->space.cand[at].inst, lab, sizeof lab);
        if (best > 0)
            return loom_error_set(err, LOOM_ERR_INFEASIBLE,
                                  "no deployment on %s (%lld GPUs) serves %g requests/s with %.0f%% "
                                  "of requests within %s: instances of %s carry %.3g requests/s per "
                                  "GPU within them (steady state), about %.0f GPUs",
                                  p->req.space.cluster->name, (long long)s->gpus_total,
                                  p->load.rate, 100 * p->req.slo.attainment,
                                  slo[0] ? slo : "the SLOs", lab, best, ceil(p->load.rate / best));
    }
    if (!c) {   /* nothing came close enough to simulate: the fastest instance unloaded */
        double best_tpot = INFINITY, ttft = 0;
        int32_t at = 0;
        for (int32_t i = 0; i < p->space.n; i++) {
            loom_serve_steady_result st;
            loom_error ignore = {0};
            if (loom_serve_role_steady(&p->ctx, i, LOOM_SERVE_ROLE_AGG, 1e-3, &st, &ignore)) continue;
            if (st.m.tpot.mean < best_tpot) {
                best_tpot = st.m.tpot.mean;
                ttft = st.m.ttft.mean;
                at = i;
            }
        }
        loom_serve_inst_label(&p->space.cand[at].inst, lab, sizeof lab);
        return loom_error_set(err, LOOM_ERR_INFEASIBLE,
                              "no deployment on %s meets %s for %.0f%% of requests at any load: "
                              "the fastest instance, %s, takes %.3g ms per output token and %.3g "
                              "ms to the first with no other load",
                              p->req.space.cluster->name, slo[0] ? slo : "the SLOs",
                              100 * p->req.slo.attainment, lab, best_tpot * 1e3, ttft * 1e3);
    }
    if (p->req.objective == LOOM_SERVE_OBJ_GPUS)
        return loom_error_set(err, LOOM_ERR_INFEASIBLE,
                              "no deployment on %s (%lld GPUs) serves %g requests/s with %.0f%% "
                              "of requests within %s; the closest, %s, reaches %.0f%%",
                              p->req.space.cluster->name, (long long)s->gpus_total, p->load.rate,
                              100 * p->req.slo.attainment, slo[0] ? slo : "the SLOs", lab,
                              c ? 100 * c->sim.attainment : 0.0);
    return loom_error_set(err, LOOM_ERR_INFEASIBLE,
                          "no deployment on %s meets %s for %.0f%% of requests at any load; the "
                          "closest, %s, reaches %.0f%% (TTFT p90 %.3g s, TPOT p90 %.3g ms)",
                          p->req.space.cluster->name, slo[0] ? slo : "the SLOs",
                          100 * p->req.slo.attainment, lab, c ? 100 * c->sim.attainment : 0.0,
                          c ? c->sim.ttft.p90 : 0.0, c ? c->sim.tpot.p90 * 1e3 : 0.0);
}

/* What the chosen deployment does to the asked load, said on stderr. */
static void reductions(loom_serve_plan *p)
{
    if (!p->have_best || p->load.kind != LOOM_LOAD_CONCURRENCY) return;
    const loom_serve_deploy *d = &p->best.dep;
    int32_t shape = d->disagg ? d->decode : d->agg;
    int64_t inst = d->disagg ? d->n_decode : d->replicas;
    const loom_serve_model *m = p->space.cand[shape].m;
    const loom_serve_memory *mem = loom_serve_model_memory(m);
    const loom_serve_engine *e = loom_serve_model_engine(m);
    int64_t per = (p->load.concurrency + inst - 1) / inst;
    int64_t most = mem->max_concurrency < e->max_num_seqs ? mem->max_concurrency : e->max_num_seqs;
    if (per > most)
        note(p, "%lld clients over %lld %sinstance%s is %lld each, but an instance runs at most "
             "%lld sequences at once (%s: %lld KV tokens at %lld per request, max_num_seqs %lld): "
             "the other clients wait in the queue",
             (long long)p->load.concurrency, (long long)inst, d->disagg ? "decode " : "",
             inst > 1 ? "s" : "", (long long)per, (long long)most,
             mem->max_concurrency < e->max_num_seqs ? "the KV cache" : "the engine's cap",
             (long long)mem->kv_capacity_tokens, (long long)p->req.space.seq_tokens,
             (long long)e->max_num_seqs);
}

loom_status loom_serve_plan_run(const loom_serve_plan_request *req, loom_serve_plan **out,
                                loom_error *err)
{
    *out = NULL;
    double t0 = loom_clock_s();
    loom_status st = check_request(req, err);
    if (st) return st;
    loom_serve_plan *p = calloc(1, sizeof *p);
    search_t s = {.p = p};
    if (!p) return loom_error_set(err, LOOM_ERR_NOMEM, "serving plan: out of memory");
    p->req = *req;
    const loom_model_info *mi = loom_graph_info_c(req->space.graph);
    if ((st = loom_serve_workload_check(&req->work, mi->max_positions, err))) goto fail;
    p->req.space.seq_tokens =
        loom_serve_workload_max_isl(&req->work) + loom_serve_workload_max_osl(&req->work);
    s.gpus_total = loom_cluster_gpus(req->space.cluster);
    if ((st = loom_serve_space_build(&p->req.space, &p->space, err))) goto fail;
    if (p->space.n == 0) {
        st = no_shape(p, err);
        goto fail;
    }
    p->ctx = (loom_serve_ctx){.space = &p->space, .opts = &p->req.space, .work = req->work,
                              .slo = req->slo};
    if ((st = loom_serve_ctx_init(&p->ctx, err))) goto fail;
    if (req->work.load == LOOM_LOAD_QPS) p->load = (loom_serve_load){LOOM_LOAD_QPS, req->work.rate, 0};
    else if (req->work.load == LOOM_LOAD_CONCURRENCY)
        p->load = (loom_serve_load){LOOM_LOAD_CONCURRENCY, 0, req->work.concurrency};
    else p->load = (loom_serve_load){LOOM_LOAD_CONCURRENCY, 0, 1};   /* latency: one client */

    s.stats = calloc((size_t)p->space.n, sizeof *s.stats);
    if (!s.stats) {
        st = loom_error_set(err, LOOM_ERR_NOMEM, "serving plan: out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < p->space.n; i++)
        if ((st = loom_serve_pool_stats_compute(&p->ctx, i, &s.stats[i], err))) goto fail;
    if (req->disagg != LOOM_DISAGG_ON && (st = aggregated(&s, err))) goto fail;
    if (req->disagg != LOOM_DISAGG_OFF && (st = disaggregated(&s, err))) goto fail;
    for (int k = 0; k < 2; k++) {
        p->n_ranked[k] = s.n_opt[k];
        if (s.n_opt[k] > 0) qsort(s.opt[k], (size_t)s.n_opt[k], sizeof *s.opt[k], cmp_opt);
    }
    int32_t k_max = req->recheck > 0 ? req->recheck : 3;
    p->checked = calloc((size_t)(3 * k_max), sizeof *p->checked);   /* agg, agg variants, disagg */
    if (!p->checked) {
        st = loom_error_set(err, LOOM_ERR_NOMEM, "serving plan: out of memory");
        goto fail;
    }
    if ((st = recheck(&s, err))) goto fail;
    if (!p->have_best) {
        st = nothing_meets(&s, err);
        goto fail;
    }
    reductions(p);
    for (int k = 0; k < 2; k++) {
        if ((k == 0 && req->disagg == LOOM_DISAGG_ON) || (k == 1 && req->disagg == LOOM_DISAGG_OFF))
            continue;
        if ((st = loom_serve_pareto_build(&p->ctx, s.stats, k == 1, &p->front[k], &p->n_front[k],
                                          err)))
            goto fail;
    }
    p->time_s = loom_clock_s() - t0;
    free(s.stats);
    free(s.opt[0]);
    free(s.opt[1]);
    *out = p;
    return LOOM_OK;
fail:
    free(s.stats);
    free(s.opt[0]);
    free(s.opt[1]);
    loom_serve_plan_destroy(p);
    return st;
}

void loom_serve_plan_destroy(loom_serve_plan *p)
{
    if (!p) return;
    loom_serve_space_free(&p->space);
    free(p->checked);
    free(p->front[0]);
    free(p->front[1]);
    free(p);
}
