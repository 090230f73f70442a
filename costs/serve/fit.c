/*
 * fit.c — the serving fit (fit.h).
 *
 * What is fitted. The serving calibration's efficiencies and overheads
 * (calib.h), one set for all GPUs and engines except the per-iteration
 * overhead, which is per engine. Published runs pin them through
 * different metrics: small-batch TPOT/ITL pins the decode HBM efficiency,
 * the all-reduce latency and the overheads; TTFT pins prefill (GEMM and
 * attention efficiency); throughput at large batch pins all of them
 * together with the policy (batch sizes, KV capacity).
 *
 * Loss. Over the cases used and the metrics each has, the Huber loss
 * (base/huber.h: quadratic up to a log error of 0.2, i.e. 22%, linear
 * beyond) of the log error of the steady-state prediction, weights TPOT (or
 * ITL) 1, TTFT 0.5, output throughput 1. Not the squared log error: runs
 * the model cannot explain (MLPerf Server runs at the capacity knee, TTFT
 * off 100x; the DLI course's high-concurrency TTFT, half the published)
 * pulled every shared overhead towards themselves; with Huber's loss
 * leave-one-source-out ITL went from 15.1% to 11.1%, TTFT 37.7% -> 35.7%,
 * output throughput 10.3% -> 10.8% (1,219 records). Plus a pull towards the
 * prior, 0.05 · Σ
 * (log(x / x_prior))² over the parameters, so that a parameter the records
 * do not constrain stays physical: a factor e away from its prior costs a
 * parameter as much as a 22% miss on one metric of one record. (The pull
 * matters most in leave-one-source-out fits, where a held-out publisher
 * leaves a handful of records that cannot pin 13 parameters.)
 *
 * Steady state, not the simulator: it is three orders faster and agrees
 * with it on TPOT and throughput at moderate load (tests); the accuracy
 * benchmark reports the simulator. Not on TTFT under a benchmark's
 * clients, which start together and stay together when outputs have one
 * length (sim.c): each round's prompts queue behind one another, which the
 * steady state, pricing one prompt, does not see (DLI course's runs: TTFT
 * 55-91% below the simulator's at 5-250 clients, medians). Fitted as it
 * was, the fit made up the queue with a fixed per-request latency at its 30 ms bound
 * (NIM), which then put 30 ms on every single-client TTFT (+63% median at 1
 * client). So each case's steady TTFT, the fixed latency left out (it adds
 * to the queue, it does not scale with it), is scaled by the simulator's
 * ratio to it, taken once at the prior (loom_serve_cases_anchor): the fit
 * then matches TTFT as the benchmark reports it, and NIM's latency came to
 * 3 ms. 1,219 records, in-sample: TTFT 26.9% -> 22.9%, ITL 11.9% -> 11.7%,
 * throughput 9.7% -> 10.1%; leave-one-source-out: TTFT 27.1% -> 23.5%, ITL
 * 12.0% -> 14.5%, throughput 10.5% -> 13.8% (with the DLI course held out
 * NIM's per-sequence cost is pinned by AWS's runs and NIM's guide alone,
 * which without the made-up latency put it lower). Scaling the whole TTFT,
 * latency included, gave 23.3%, 13.5% and 13.0%, but mis-fits records
 * made by the simulator itself (tests/test_serve_fit.c).
 *
 * Search. Coordinate descent in log space within the bounds of
 * LOOM_SERVE_CALIB_FIELDS: each parameter tries × and ÷ its step, keeps
 * the better while it improves, and the steps halve when a sweep finds none
 * (from a factor 1.5 down to 1.002). The loss is not convex in all parameters, but
 * the prior and the bounds keep the search in one basin; the result is
 * deterministic.
 */
#include "costs/serve/fit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/huber.h"
#include "costs/serve/sim.h"
#include "costs/serve/steady.h"

/* The log error up to which a record's miss counts quadratically (22%). */
#define HUBER_DELTA 0.2

void loom_serve_case_opts(const loom_serve_case *c, const loom_serve_calib *cal,
                          loom_serve_model_opts *o)
{
    const loom_serve_record *r = c->rec;
    memset(o, 0, sizeof *o);
    o->graph = c->graph;
    o->cluster = &c->cluster;
    o->serve_calib = cal;
    o->par = r->par;
    o->frontend = r->frontend;
    o->client = r->client;
    const loom_model_info *mi = loom_graph_info_c(c->graph);
    int64_t dp = r->par.replicas;
    if (dp > 1 && (r->dp_attention || (mi->experts > 0 && r->par.ep > 1))) {
        o->par.attn_dp = dp;
        o->par.replicas = 1;
        /* SGLang counts the attention-DP ranks inside its --tp */
        if (r->engine == LOOM_ENGINE_SGLANG && r->par.tp % dp == 0 && r->par.tp >= dp)
            o->par.tp = r->par.tp / dp;
    }
    loom_serve_engine_defaults(r->engine, &c->cluster.gpu, o->par.tp * o->par.attn_dp, &o->engine);
    o->engine.compiled_runtime = r->compiled_runtime;
    loom_serve_engine_multi_step(&o->engine, r->scheduler_steps, r->max_model_len);
    if (r->vllm_v0) o->engine.v0_loop = true;
    if (r->overlap_off) o->engine.overlap_host = false;
    if (r->overlap_on) o->engine.overlap_host = true;
    if (r->chunked_context) o->engine.chunked_prefill = true;
    if (r->max_num_seqs > 0) o->engine.max_num_seqs = r->max_num_seqs;
    if (r->max_batched_tokens > 0) o->engine.max_batched_tokens = r->max_batched_tokens;
    if (r->mem_fraction > 0 && r->mem_fraction <= 1) o->engine.mem_fraction = r->mem_fraction;
    o->seq_tokens = loom_serve_workload_max_isl(&r->work) + loom_serve_workload_max_osl(&r->work);
}

loom_status loom_serve_case_predict(const loom_serve_case *c, const loom_serve_calib *cal,
                                    bool simulate, loom_serve_metrics *out, loom_error *err)
{
    loom_serve_model_opts o;
    loom_serve_case_opts(c, cal, &o);
    loom_serve_model *m = NULL;
    loom_status s = loom_serve_model_create(&o, &m, err);
    if (s) return s;
    if (!loom_serve_model_memory(m)->fits) {
        loom_serve_model_destroy(m);
        return loom_error_set(err, LOOM_ERR_INFEASIBLE, "%s on %lld × %s: does not fit",
                              c->rec->model, (long long)c->rec->num_gpus, c->rec->gpu);
    }
    if (simulate) {
        loom_serve_sim_result *r = malloc(sizeof *r);
        if (!r) s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
        else if (!(s = loom_serve_simulate(m, &c->rec->work, r, err))) *out = r->m;
        free(r);
    } else {
        loom_serve_steady_result r;
        if (!(s = loom_serve_steady(m, &c->rec->work, &r, err))) *out = r.m;
    }
    loom_serve_model_destroy(m);
    return s;
}

void loom_serve_cases_anchor(loom_serve_case *cases, size_t n, const loom_serve_calib *cal)
{
    for (size_t i = 0; i < n; i++) {
        cases[i].ttft_sim_ratio = 0;
        loom_serve_model_opts o;
        loom_serve_case_opts(&cases[i], cal, &o);
        loom_serve_model *m = NULL;
        loom_error ignore;
        if (loom_serve_model_create(&o, &m, &ignore)) continue;
        loom_serve_sim_result *sim = malloc(sizeof *sim);
        loom_serve_steady_result st;
        double hop = loom_serve_model_latency_s(m);
        if (sim && loom_serve_model_memory(m)->fits &&
            !loom_serve_simulate(m, &cases[i].rec->work, sim, &ignore) &&
            !loom_serve_steady(m, &cases[i].rec->work, &st, &ignore) &&
            sim->m.ttft.mean > hop && st.m.ttft.mean > hop)
            cases[i].ttft_sim_ratio = (sim->m.ttft.mean - hop) / (st.m.ttft.mean - hop);
        free(sim);
        loom_serve_model_destroy(m);
    }
}

static double sq(double x) { return x * x; }

/* The steady-state metrics of case i's model m under cal. */
static bool predict_fast(loom_serve_model *m, const loom_serve_case *c, const loom_serve_calib *cal,
                         loom_serve_metrics *out)
{
    loom_serve_model_set_calib(m, cal);
    loom_serve_steady_result r;
    loom_error ignore;
    if (loom_serve_steady(m, &c->rec->work, &r, &ignore)) return false;
    *out = r.m;
    return true;
}

static double loss(const loom_serve_case *cases, size_t n, loom_serve_model **models,
                   const loom_serve_calib *cal, const loom_serve_calib *prior)
{
    double L = 0;
    for (size_t i = 0; i < n; i++) {
        if (!models[i]) continue;
        const double *meas = cases[i].rec->measured;
        loom_serve_metrics m;
        if (!predict_fast(models[i], &cases[i], cal, &m)) continue;
        if (cases[i].ttft_sim_ratio > 0) {   /* the engine's part; the hop is a constant */
            double hop = loom_serve_model_latency_s(models[i]);
            m.ttft.mean = hop + (m.ttft.mean - hop) * cases[i].ttft_sim_ratio;
        }
        /* a mean where published, else the median (many reports give only
         * medians; the steady state has one value for both) */
        double tpot = meas[LOOM_SM_TPOT] > 0       ? meas[LOOM_SM_TPOT]
                      : meas[LOOM_SM_ITL] > 0      ? meas[LOOM_SM_ITL]
                      : meas[LOOM_SM_TPOT_P50] > 0 ? meas[LOOM_SM_TPOT_P50]
                                                   : meas[LOOM_SM_ITL_P50];
        double ttft = meas[LOOM_SM_TTFT] > 0 ? meas[LOOM_SM_TTFT] : meas[LOOM_SM_TTFT_P50];
        if (tpot > 0 && m.tpot.mean > 0) L += loom_huber(log(m.tpot.mean / tpot), HUBER_DELTA);
        if (ttft > 0 && m.ttft.mean > 0) L += 0.5 * loom_huber(log(m.ttft.mean / ttft), HUBER_DELTA);
        if (meas[LOOM_SM_OUT_TPS] > 0 && m.output_tokens_per_s > 0)
            L += loom_huber(log(m.output_tokens_per_s / meas[LOOM_SM_OUT_TPS]), HUBER_DELTA);
    }
    for (int k = 0; k < LOOM_SERVE_CALIB_NFIELDS; k++) {
        double x = *loom_serve_calib_field((loom_serve_calib *)cal, k);
        double p = *loom_serve_calib_field((loom_serve_calib *)prior, k);
        if (x > 0 && p > 0) L += 0.05 * sq(log(x / p));
    }
    return L;
}

loom_status loom_serve_fit(const loom_serve_case *cases, size_t n, const bool *use,
                           loom_serve_calib *cal, double *final_loss, loom_error *err)
{
    loom_status s = loom_serve_calib_validate(cal, err);
    if (s) return s;
    loom_serve_calib prior = *cal, best = *cal;
    /* one model per case used, built once (a case that does not fit: NULL) */
    loom_serve_model **models = calloc(n ? n : 1, sizeof *models);
    if (!models) return loom_error_set(err, LOOM_ERR_NOMEM, "serving fit: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (use && !use[i]) continue;
        loom_serve_model_opts o;
        loom_serve_case_opts(&cases[i], cal, &o);
        loom_error ignore;
        if (loom_serve_model_create(&o, &models[i], &ignore)) continue;
        if (!loom_serve_model_memory(models[i])->fits) {
            loom_serve_model_destroy(models[i]);
            models[i] = NULL;
        }
    }
    /* zero-valued parameters (overheads) start from a small positive value
     * so that a multiplicative step can move them */
    for (int k = 0; k < LOOM_SERVE_CALIB_NFIELDS; k++) {
        double lo, hi, *x = loom_serve_calib_field(&best, k);
        loom_serve_calib_field_bounds(k, &lo, &hi);
        if (*x <= 0) *x = lo > 0 ? lo : hi * 1e-3;
    }
    double L = loss(cases, n, models, &best, &prior);
    for (double step = 1.5; step > 1.002; step = 1 + (step - 1) / 2) {
        bool improved = true;
        for (int sweep = 0; sweep < 40 && improved; sweep++) {
            improved = false;
            for (int k = 0; k < LOOM_SERVE_CALIB_NFIELDS; k++) {
                double lo, hi;
                loom_serve_calib_field_bounds(k, &lo, &hi);
                /* the better of × and ÷ step, repeated while it improves */
                for (bool moved = true; moved;) {
                    moved = false;
                    loom_serve_calib cand[2] = {best, best};
                    double Lc[2];
                    for (int dir = 0; dir < 2; dir++) {
                        double *x = loom_serve_calib_field(&cand[dir], k);
                        *x = dir ? *x * step : *x / step;
                        if (*x < lo) *x = lo;
                        if (*x > hi) *x = hi;
                        Lc[dir] = *x == *loom_serve_calib_field(&best, k)
                                      ? L
                                      : loss(cases, n, models, &cand[dir], &prior);
                    }
                    int d = Lc[1] < Lc[0] ? 1 : 0;
                    if (Lc[d] < L - 1e-12) {
                        L = Lc[d];
                        best = cand[d];
                        improved = moved = true;
                    }
                }
            }
        }
    }
    for (size_t i = 0; i < n; i++) loom_serve_model_destroy(models[i]);
    free(models);
    *cal = best;
    if (final_loss) *final_loss = L;
    return LOOM_OK;
}
