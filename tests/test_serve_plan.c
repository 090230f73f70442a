/*
 * test_serve_plan.c — the serving deployment planner (planner/serve/):
 * the Pareto front against a brute-force dominance check, the decode pool's
 * cached-prompt workload (simulator and steady state agree, no prefill
 * runs), the KV transfer against a hand computation, the per-request
 * records against the simulator's own means, the disaggregation margin of
 * --disagg auto, and the errors of requests that cannot be planned.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "costs/serve/sim.h"
#include "costs/serve/steady.h"
#include "graph/model.h"
#include "planner/serve/serve_pareto.h"
#include "planner/serve/serve_plan.h"

static loom_graph *load(const char *path)
{
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    mo.seq = 1;
    mo.batch = 1;
    loom_graph *g = NULL;
    loom_error err = {0};
    if (loom_model_load(path, &mo, &g, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return g;
}

static loom_cluster cluster(const char *name)
{
    loom_cluster c;
    loom_error err = {0};
    if (loom_cluster_load(name, &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return c;
}

/* The front keeps exactly the points no other point beats on both axes. */
static void test_pareto_front(void)
{
    enum { N = 300 };
    loom_serve_front_point pts[N], all[N];
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double v = (double)(s >> 11) / 9007199254740992.0;
        /* a trade-off cloud: user speed against GPU throughput, with noise */
        pts[i] = (loom_serve_front_point){.tokens_per_s_user = 10 + 90 * u,
                                          .tokens_per_s_gpu = (100 - 90 * u) * (0.5 + 0.5 * v),
                                          .shape = i, .prefill_shape = -1};
        all[i] = pts[i];
    }
    int32_t n = loom_serve_pareto_front(pts, N);
    int expect = 0;
    for (int i = 0; i < N; i++) {
        bool dominated = false;
        for (int j = 0; j < N && !dominated; j++)
            dominated = all[j].tokens_per_s_user >= all[i].tokens_per_s_user &&
                        all[j].tokens_per_s_gpu >= all[i].tokens_per_s_gpu &&
                        (all[j].tokens_per_s_user > all[i].tokens_per_s_user ||
                         all[j].tokens_per_s_gpu > all[i].tokens_per_s_gpu);
        if (dominated) continue;
        expect++;
        bool kept = false;
        for (int k = 0; k < n; k++) kept |= pts[k].shape == all[i].shape;
        CHECK(kept);
    }
    CHECK_INT_EQ(n, expect);
    for (int k = 1; k < n; k++) {   /* falling user speed, rising GPU throughput */
        CHECK(pts[k].tokens_per_s_user < pts[k - 1].tokens_per_s_user);
        CHECK(pts[k].tokens_per_s_gpu > pts[k - 1].tokens_per_s_gpu);
    }
    printf("pareto: %d of %d points on the front\n", (int)n, N);
}

/* A decode instance (prompt cached): nothing is prefilled, the first token
 * is one decode iteration after admission, and the simulator agrees with
 * the steady state; the per-request records average to the simulator's
 * own means. */
static void test_decode_pool(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    loom_cluster c = cluster("dgx-h100-x1");
    loom_serve_model_opts o = {.graph = g, .cluster = &c, .seq_tokens = 2048 + 256};
    loom_serve_parallel_init(&o.par);
    loom_serve_engine_defaults(LOOM_ENGINE_VLLM, &c.gpu, 1, &o.engine);
    loom_serve_model *m = NULL;
    loom_error err = {0};
    CHECK(loom_serve_model_create(&o, &m, &err) == LOOM_OK);
    if (!m) goto done;
    loom_serve_workload w;
    loom_serve_workload_init(&w);
    w.isl = 2048;
    w.osl = 256;
    w.load = LOOM_LOAD_QPS;
    w.rate = 4;   /* about 4 · 256 · 10 ms ≈ 10 sequences decoding */
    w.num_requests = 600;
    w.prompt_cached = true;
    loom_serve_steady_result st;
    CHECK(loom_serve_steady(m, &w, &st, &err) == LOOM_OK);
    loom_serve_sim_result *sim = malloc(sizeof *sim);
    double *tt = malloc(600 * sizeof *tt), *tp = malloc(600 * sizeof *tp);
    loom_serve_sim_record rec = {.ttft_s = tt, .tpot_s = tp, .cap = 600};
    CHECK(loom_serve_simulate_record(m, &w, &rec, sim, &err) == LOOM_OK);
    CHECK_INT_EQ(rec.n, 600);
    CHECK(sim->m.input_tokens_per_s == 0);   /* no prompt token ever computed */
    CHECK_NEAR_REL(sim->m.tpot.mean, st.m.tpot.mean, 0.05);
    CHECK_NEAR_REL(sim->m.output_tokens_per_s, st.m.output_tokens_per_s, 0.05);
    /* TTFT: the admission wait (under one iteration) plus one iteration,
     * plus the front end's per-request time */
    const loom_serve_calib *sc = loom_serve_model_calib(m);
    double T = st.round_s, front = sc->request_overhead_s + loom_serve_model_latency_s(m);
    CHECK(sim->m.ttft.p50 >= T * 0.9 + front * 0.9 && sim->m.ttft.p50 <= 2.2 * T + 2 * front);
    double a = 0, b = 0;
    for (int64_t i = 0; i < rec.n; i++) a += tt[i], b += tp[i];
    CHECK_NEAR_REL(a / (double)rec.n, sim->m.ttft.mean, 1e-9);
    CHECK_NEAR_REL(b / (double)rec.n, sim->m.tpot.mean, 1e-9);
    printf("decode pool 8B: TPOT sim %.2f ms, steady %.2f ms; TTFT p50 %.2f ms (round %.2f ms)\n",
           sim->m.tpot.mean * 1e3, st.m.tpot.mean * 1e3, sim->m.ttft.p50 * 1e3, T * 1e3);
    free(sim);
    free(tt);
    free(tp);
done:
    loom_serve_model_destroy(m);
    loom_graph_destroy(g);
}

static loom_serve_plan_request request(loom_graph *g, const loom_cluster *c);

/* The engine settings offered beside each shape's defaults: vLLM on an H100
 * (defaults 1024 sequences, 8192 tokens) gets chunks of 512, 1024, 2048 and
 * 4096 tokens with max_num_seqs lowered to the chunk where it is larger
 * (vLLM refuses a budget below it) and caps of 32, 64, 128 and 256 sequences at the default chunk;
 * TensorRT-LLM (2048 sequences, no chunking) only the caps. Variants serve
 * aggregated deployments only and are not counted as shapes. */
static void test_engine_variants(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    loom_cluster c = cluster("dgx-h100-x1");
    for (int k = 0; k < 2; k++) {
        loom_serve_space_opts o = {.graph = g, .cluster = &c,
                                   .engine = k ? LOOM_ENGINE_TRTLLM : LOOM_ENGINE_VLLM,
                                   .weights = LOOM_WEIGHTS_BF16, .kv_dtype = LOOM_DTYPE_BF16,
                                   .seq_tokens = 2048};
        loom_serve_space sp;
        loom_error err = {0};
        CHECK(loom_serve_space_build(&o, &sp, &err) == LOOM_OK);
        int shapes = 0, chunks = 0, caps = 0;
        for (int32_t i = 0; i < sp.n; i++) {
            const loom_serve_cand *cd = &sp.cand[i];
            const loom_serve_engine *e = loom_serve_model_engine(cd->m);
            if (!cd->agg_only) {
                shapes++;
                CHECK(cd->inst.chunk == 0 && cd->inst.seqs == 0);
                CHECK_INT_EQ(e->max_num_seqs, k ? 2048 : 1024);
                continue;
            }
            if (cd->inst.chunk > 0) {
                chunks++;
                CHECK_INT_EQ(e->max_batched_tokens, cd->inst.chunk);
                CHECK_INT_EQ(e->max_num_seqs, cd->inst.chunk < 1024 ? cd->inst.chunk : 1024);
            } else {
                caps++;
                CHECK_INT_EQ(e->max_num_seqs, cd->inst.seqs);
                CHECK_INT_EQ(e->max_batched_tokens, 8192);
            }
        }
        CHECK_INT_EQ(sp.tried, shapes + sp.refused + sp.no_fit);
        CHECK_INT_EQ(chunks, k ? 0 : 4 * shapes);
        CHECK_INT_EQ(caps, 4 * shapes);
        loom_serve_space_free(&sp);
    }
    loom_graph_destroy(g);
}

static loom_serve_plan_request request(loom_graph *g, const loom_cluster *c)
{
    loom_serve_plan_request r = {0};
    r.space = (loom_serve_space_opts){.graph = g, .cluster = c, .engine = LOOM_ENGINE_VLLM,
                                      .weights = LOOM_WEIGHTS_BF16, .kv_dtype = LOOM_DTYPE_BF16};
    loom_serve_workload_init(&r.work);
    r.slo.attainment = 0.9;
    return r;
}

/* Llama-3.1-70B KV per token: 2 (K, V) · 80 layers · 8 heads · 128 · 2
 * bytes = 327,680; a prompt of 8192 tokens is 2.684 GB. Two instances of
 * tp 4 within one node move it over 4 NVLinks; across nodes over 4 NICs
 * of 400 Gb/s (50 GB/s each): 2.684e9 / 200e9 = 13.42 ms plus a latency. */
static void test_kv_transfer(void)
{
    loom_graph *g = load("examples/models/llama-3.1-70b.json");
    loom_cluster c = cluster("dgx-h100-x2");
    loom_serve_plan_request r = request(g, &c);
    r.work.isl = 8192;
    r.work.osl = 256;
    r.work.load = LOOM_LOAD_CONCURRENCY;
    r.work.concurrency = 8;
    r.objective = LOOM_SERVE_OBJ_LATENCY;
    r.disagg = LOOM_DISAGG_ON;
    r.recheck = 1;
    loom_serve_plan *p = NULL;
    loom_error err = {0};
    CHECK(loom_serve_plan_run(&r, &p, &err) == LOOM_OK);
    if (!p) {
        fprintf(stderr, "%s\n", err.msg);
        goto done;
    }
    CHECK_NEAR_REL(p->ctx.kv_bytes_per_token, 327680, 1e-12);
    int32_t tp4 = -1;
    for (int32_t i = 0; i < p->space.n; i++)
        if (p->space.cand[i].inst.tp == 4 && p->space.cand[i].inst.pp == 1 &&
            !p->space.cand[i].agg_only)
            tp4 = i;
    CHECK(tp4 >= 0);
    loom_serve_deploy d = {.disagg = true, .prefill = tp4, .decode = tp4, .n_prefill = 1,
                           .n_decode = 1};
    loom_serve_deploy_finish(&p->ctx, &d);
    CHECK(d.kv_nvlink);
    CHECK_INT_EQ(d.gpus, 8);
    CHECK_NEAR_REL(d.kv_bytes, 8192.0 * 327680, 1e-12);
    CHECK_NEAR_REL(d.kv_link_Bps, 4 * c.intra.bandwidth_Bps, 1e-12);
    d.n_prefill = 3;
    loom_serve_deploy_finish(&p->ctx, &d);
    CHECK(!d.kv_nvlink);
    CHECK_INT_EQ(d.gpus, 16);
    CHECK_NEAR_REL(d.kv_link_Bps, 200e9, 1e-9);
    CHECK_NEAR_REL(d.kv_transfer_s, 8192.0 * 327680 / 200e9 + c.inter.latency_s, 1e-9);
    printf("kv transfer 70B, 8192 tokens: %.3f GB, %.2f ms over the NIC\n", d.kv_bytes / 1e9,
           d.kv_transfer_s * 1e3);
done:
    loom_serve_plan_destroy(p);
    loom_graph_destroy(g);
}

/* --disagg auto takes the disaggregated deployment only when it beats the
 * best aggregated one by the margin; each of on/off plans its own kind. */
static void test_disagg_margin(void)
{
    loom_graph *g = load("examples/models/llama-3.1-70b.json");
    loom_cluster c = cluster("dgx-h100-x2");
    const int64_t lens[2][2] = {{8192, 256}, {128, 512}};
    for (int k = 0; k < 2; k++) {
        double score[3] = {0};
        bool disagg[3] = {0};
        for (int mode = 0; mode < 3; mode++) {
            loom_serve_plan_request r = request(g, &c);
            r.work.isl = lens[k][0];
            r.work.osl = lens[k][1];
            r.slo = (loom_serve_slo){.ttft_s = 3, .tpot_s = 0.03, .attainment = 0.9};
            r.objective = LOOM_SERVE_OBJ_GOODPUT;
            r.disagg = (loom_serve_disagg_mode)mode;
            loom_serve_plan *p = NULL;
            loom_error err = {0};
            CHECK(loom_serve_plan_run(&r, &p, &err) == LOOM_OK);
            if (!p) {
                fprintf(stderr, "%s\n", err.msg);
                continue;
            }
            score[mode] = p->best.score;
            disagg[mode] = p->best.dep.disagg;
            CHECK(p->best.sim.simulated);
            CHECK(p->best.sim.attainment >= 0.9);
            loom_serve_plan_destroy(p);
        }
        CHECK(disagg[LOOM_DISAGG_ON] && !disagg[LOOM_DISAGG_OFF]);
        bool want = score[LOOM_DISAGG_ON] > score[LOOM_DISAGG_OFF] * (1 + LOOM_SERVE_DISAGG_MARGIN);
        CHECK(disagg[LOOM_DISAGG_AUTO] == want);
        CHECK_NEAR_REL(score[LOOM_DISAGG_AUTO], want ? score[LOOM_DISAGG_ON] : score[LOOM_DISAGG_OFF],
                       1e-12);
        printf("ISL %lld OSL %lld: goodput/GPU aggregated %.3f, disaggregated %.3f -> %s\n",
               (long long)lens[k][0], (long long)lens[k][1], score[LOOM_DISAGG_OFF],
               score[LOOM_DISAGG_ON], disagg[LOOM_DISAGG_AUTO] ? "disaggregated" : "aggregated");
    }
    loom_graph_destroy(g);
}

static void test_bad_requests(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    loom_cluster c = cluster("dgx-h100-x1");
    loom_serve_plan *p = NULL;
    loom_error err = {0};
    loom_serve_plan_request r = request(g, &c);
    r.objective = LOOM_SERVE_OBJ_GOODPUT;   /* no SLO */
    CHECK(loom_serve_plan_run(&r, &p, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "--ttft");
    r.objective = LOOM_SERVE_OBJ_GPUS;      /* no rate */
    r.slo.ttft_s = 1;
    CHECK(loom_serve_plan_run(&r, &p, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "--qps");
    r.work.load = LOOM_LOAD_QPS;
    r.work.rate = 5;
    r.objective = LOOM_SERVE_OBJ_THROUGHPUT;
    CHECK(loom_serve_plan_run(&r, &p, &err) == LOOM_ERR_INVALID);
    CHECK(p == NULL);
    loom_graph_destroy(g);

    /* 405B in bf16 (810 GB) does not fit 8 H100s in any shape */
    g = load("examples/models/llama-3.1-405b.json");
    r = request(g, &c);
    r.work.load = LOOM_LOAD_CONCURRENCY;
    r.work.concurrency = 4;
    r.objective = LOOM_SERVE_OBJ_THROUGHPUT;
    CHECK(loom_serve_plan_run(&r, &p, &err) == LOOM_ERR_INFEASIBLE);
    CHECK_STR_CONTAINS(err.msg, "no instance of");
    loom_graph_destroy(g);
}

int main(void)
{
    test_pareto_front();
    test_decode_pool();
    test_kv_transfer();
    test_engine_variants();
    test_disagg_margin();
    test_bad_requests();
    return check_done();
}
