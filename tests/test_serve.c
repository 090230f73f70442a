/*
 * test_serve.c — the serving model of one engine instance (costs/serve/):
 * a decode step against a hand computation, weights and KV at their real
 * bytes, the FP8/int4 deployments that must fit, the simulator against the
 * steady-state estimate, determinism, vLLM V0's multi-step rounds by hand,
 * and the errors for bad input.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "costs/serve/sim.h"
#include "costs/serve/steady.h"
#include "graph/model.h"

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

static loom_serve_model *make(loom_graph *g, const char *cluster, loom_engine_kind k,
                              loom_serve_parallel par, int64_t seq, loom_error *err)
{
    static loom_cluster c;
    if (loom_cluster_load(cluster, &c, err)) return NULL;
    loom_serve_model_opts o = {.graph = g, .cluster = &c, .par = par, .seq_tokens = seq};
    loom_serve_engine_defaults(k, &c.gpu, par.tp, &o.engine);
    loom_serve_model *m = NULL;
    loom_serve_model_create(&o, &m, err);
    return m;
}

/* Llama-3-70B, TP 8 on 8 H100, bf16, one sequence decoding: the step reads
 * every GPU's weight shard once and runs 2 all-reduces per layer. By hand
 * from the config (80 layers, h 8192, 64 heads, 8 KV heads of 128, ffn
 * 28672, vocab 128256): per layer 8192·128·(2·64 + 2·8) = 151.0M attention
 * + 3·8192·28672 = 704.6M MLP parameters; 80 layers 68.45B; embedding and
 * LM head 2·128256·8192 = 2.10B; 70.55B · 2 bytes / 8 = 17.64 GB per GPU.
 * At a realistic decode HBM efficiency of 0.6–0.9 of 3.35 TB/s that is
 * 5.85–8.78 ms, plus 160 all-reduces (+1 for the vocab-parallel embedding)
 * of 16 KiB at 3–25 us each, plus one launch per kernel — 12–16 kernels
 * per layer (2 norms, 4 attention GEMMs, rotary, attention, 2 MLP GEMMs,
 * the activation, 2 residual adds, …) at 1–4 us each from a CUDA graph —
 * plus at most 3 ms of engine overhead. */
static void test_decode_band(void)
{
    loom_graph *g = load("examples/models/llama-3-70b.json");
    loom_serve_parallel p;
    loom_serve_parallel_init(&p);
    p.tp = 8;
    loom_error err = {0};
    loom_serve_model *m = make(g, "dgx-h100-x1", LOOM_ENGINE_VLLM, p, 2048, &err);
    CHECK(m != NULL);
    if (!m) goto done;
    const loom_serve_shape *s = loom_serve_model_shape(m);
    double params = 80.0 * (8192.0 * 128 * (2 * 64 + 2 * 8) + 3.0 * 8192 * 28672) +
                    2.0 * 128256 * 8192;
    double w = params * 2 / 8;
    CHECK_NEAR_REL(s->weight_bytes_gpu, w, 0.002);
    CHECK_INT_EQ(s->allreduces, 161);
    CHECK_NEAR_REL(s->kv_bytes_per_token, 2.0 * 80 * 1 * 128 * 2, 1e-12);   /* 40 KiB */
    double bw = 3.35e12;
    CHECK(s->kernels >= 12 * 80 && s->kernels <= 16 * 80 + 16);
    double lo = w / (bw * 0.9) + 160 * 3e-6 + 12 * 80 * 1e-6,
           hi = w / (bw * 0.6) + 161 * 25e-6 + (16 * 80 + 16) * 4e-6 + 3e-3;
    loom_serve_iter it;
    loom_serve_batch b = {.n_decode = 1, .decode_ctx = 1024, .n_sampled = 1};
    double t = loom_serve_iter_time(m, &b, &it);
    printf("llama-3-70b tp8 h100 decode b=1: %.2f ms (band %.2f–%.2f; gemm %.2f comm %.2f "
           "overhead %.2f)\n", t * 1e3, lo * 1e3, hi * 1e3, it.gemm_s * 1e3, it.comm_s * 1e3,
           it.overhead_s * 1e3);
    CHECK(t >= lo && t <= hi);
    /* weights dominate and decode is memory-bound: 8 sequences cost < 15% more */
    CHECK(loom_serve_decode_time(m, 8, 1024) < 1.15 * t);
    /* prefill is compute-bound: 8192 tokens take ≥ 2·70.55B·8192/8 FLOPs at peak */
    CHECK(loom_serve_prefill_time(m, 8192) > 2 * params * 8192 / 8 / 989e12);
    loom_serve_model_destroy(m);
done:
    loom_graph_destroy(g);
}

/* Llama-3-70B on one DGX H100 under vLLM, TP 4 alone (m[0]) and TP 4 × PP 2
 * (m[1]), for sequences up to seq tokens: the pair the pipeline tests set
 * side by side. */
static void tp4_pp2_pair(loom_graph *g, int64_t seq, loom_serve_model *m[2], loom_error *err)
{
    loom_serve_parallel p[2];
    for (int i = 0; i < 2; i++) {
        loom_serve_parallel_init(&p[i]);
        p[i].tp = 4;
        p[i].pp = i + 1;
        m[i] = make(g, "dgx-h100-x1", LOOM_ENGINE_VLLM, p[i], seq, err);
    }
}

/* An offline flood of n requests of isl + osl tokens. */
static loom_serve_workload offline_flood(int64_t isl, int64_t osl, int64_t n)
{
    loom_serve_workload w;
    loom_serve_workload_init(&w);
    w.isl = isl;
    w.osl = osl;
    w.load = LOOM_LOAD_OFFLINE;
    w.num_requests = n;
    return w;
}

/* Pipeline parallelism does not split a lone prompt: at pp 2 (TP 4 per
 * stage) one 8192-token prompt passes through both stages one after the
 * other, so its prefill takes about what TP 4 alone takes (the same
 * FLOPs per GPU-stage, plus a p2p hand-off), not half. Many decoding
 * sequences do spread: 64 of them at pp 2 pass through micro-batches of
 * 32, whose GEMMs and attention take what 32 decoding at pp 1 take. */
static void test_pp_lone_prompt(void)
{
    loom_graph *g = load("examples/models/llama-3-70b.json");
    loom_error err = {0};
    loom_serve_model *pair[2];
    tp4_pp2_pair(g, 9000, pair, &err);
    loom_serve_model *m1 = pair[0], *m2 = pair[1];
    CHECK(m1 != NULL && m2 != NULL);
    if (m1 && m2) {
        double t1 = loom_serve_prefill_time(m1, 8192), t2 = loom_serve_prefill_time(m2, 8192);
        printf("llama-3-70b prefill 8192: tp4 %.1f ms, tp4 x pp2 %.1f ms\n", t1 * 1e3, t2 * 1e3);
        CHECK(t2 > 0.95 * t1 && t2 < 1.1 * t1);
        loom_serve_iter i1, i2;
        loom_serve_batch b1 = {.n_decode = 32, .decode_ctx = 32 * 1024.0, .n_sampled = 32};
        loom_serve_batch b2 = {.n_decode = 64, .decode_ctx = 64 * 1024.0, .n_sampled = 64};
        loom_serve_iter_time(m1, &b1, &i1);
        loom_serve_iter_time(m2, &b2, &i2);
        CHECK_NEAR_REL(i2.gemm_s + i2.attn_s, i1.gemm_s + i1.attn_s, 0.02);
    }
    loom_serve_model_destroy(m1);
    loom_serve_model_destroy(m2);
    loom_graph_destroy(g);
}

/* Each of the pp micro-batches in flight is scheduled with its own token
 * budget (sim.c iter_budget). An offline flood of 4096-token prompts with
 * one output token is prefill only: at tp 4 × pp 2 an iteration is one
 * micro-batch's pass through every stage (about tp 4's prefill time of the
 * same chunk, test_pp_lone_prompt) and carries two chunks, so the flood
 * drains in about half tp 4's time, not the same time (one budget an
 * iteration would give ~1.0). */
static void test_pp_budget(void)
{
    loom_graph *g = load("examples/models/llama-3-70b.json");
    loom_error err = {0};
    loom_serve_model *m[2];
    tp4_pp2_pair(g, 4100, m, &err);
    double tps[2] = {0, 0};
    for (int i = 0; i < 2 && m[0] && m[1]; i++) {
        loom_serve_workload w = offline_flood(4096, 1, 64);
        loom_serve_sim_result *r = malloc(sizeof *r);
        CHECK(r && loom_serve_simulate(m[i], &w, r, &err) == LOOM_OK);
        if (r) tps[i] = r->m.requests_per_s;
        free(r);
    }
    printf("llama-3-70b 64 x 4096-token prefills: tp4 %.2f req/s, tp4 x pp2 %.2f req/s\n", tps[0],
           tps[1]);
    CHECK(tps[1] > 1.7 * tps[0] && tps[1] < 2.1 * tps[0]);
    loom_serve_model_destroy(m[0]);
    loom_serve_model_destroy(m[1]);
    loom_graph_destroy(g);
}

/* The steady-state estimate budgets iterations as the simulator does
 * (loom_serve_iter_budget): at tp 4 × pp 2 with a 2048-token budget, 7000-
 * token prompts and 64-token outputs keep every iteration full of prompt
 * chunks, one per micro-batch. The steady capacity must match the rate at
 * which the simulator drains an offline flood (within 10%); one budget an
 * iteration in the estimate halved it (1.63 against the simulator's 3.14
 * requests/s). */
static void test_pp_steady_budget(void)
{
    loom_graph *g = load("examples/models/llama-3-70b.json");
    loom_error err = {0};
    static loom_cluster c;
    CHECK(loom_cluster_load("dgx-h100-x1", &c, &err) == LOOM_OK);
    loom_serve_model_opts o = {.graph = g, .cluster = &c, .seq_tokens = 7064};
    loom_serve_parallel_init(&o.par);
    o.par.tp = 4;
    o.par.pp = 2;
    loom_serve_engine_defaults(LOOM_ENGINE_VLLM, &c.gpu, 4, &o.engine);
    o.engine.max_batched_tokens = 2048;
    loom_serve_model *m = NULL;
    CHECK(loom_serve_model_create(&o, &m, &err) == LOOM_OK);
    if (m) {
        loom_serve_workload w = offline_flood(7000, 64, 300);
        loom_serve_steady_result st;
        loom_serve_sim_result *r = malloc(sizeof *r);
        CHECK(r && loom_serve_simulate(m, &w, r, &err) == LOOM_OK);
        CHECK(loom_serve_steady(m, &w, &st, &err) == LOOM_OK);
        if (r) {
            printf("llama-3-70b tp4 x pp2, 300 x 7000 + 64 offline: sim %.2f req/s, steady "
                   "capacity %.2f req/s\n", r->m.requests_per_s, st.capacity_rps);
            CHECK_NEAR_REL(st.capacity_rps, r->m.requests_per_s, 0.10);
        }
        free(r);
    }
    loom_serve_model_destroy(m);
    loom_graph_destroy(g);
}

/* Weights at their stored bytes: FP8 halves the block GEMMs; the real FP8
 * and int4 deployments fit (the "no fit" cases). */
static void test_fits(void)
{
    const struct {
        const char *model, *cluster;
        int64_t tp;
        loom_serve_weights wt;
        loom_dtype kv;
        bool fits;
        double kv_gib_min;
    } cases[] = {
        {"examples/models/deepseek-v3.json", "dgx-h200-x1", 8, LOOM_WEIGHTS_FP8, LOOM_DTYPE_BF16, true, 20},
        {"examples/models/llama-3.1-405b.json", "dgx-h100-x1", 8, LOOM_WEIGHTS_FP8, LOOM_DTYPE_BF16, true, 10},
        {"examples/models/llama-3-70b.json", "dgx-h100-x1", 1, LOOM_WEIGHTS_INT4, LOOM_DTYPE_BF16, true, 10},
        {"examples/models/mixtral-8x7b.json", "dgx-h100-x1", 1, LOOM_WEIGHTS_FP8, LOOM_DTYPE_FP8, true, 10},
        {"examples/models/llama-3.1-405b.json", "dgx-h100-x1", 8, LOOM_WEIGHTS_BF16, LOOM_DTYPE_BF16, false, 0},
        {"examples/models/llama-3-70b.json", "dgx-h100-x1", 1, LOOM_WEIGHTS_BF16, LOOM_DTYPE_BF16, false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loom_graph *g = load(cases[i].model);
        loom_serve_parallel p;
        loom_serve_parallel_init(&p);
        p.tp = cases[i].tp;
        p.weights = cases[i].wt;
        p.kv_dtype = cases[i].kv;
        loom_error err = {0};
        loom_serve_model *m = make(g, cases[i].cluster, LOOM_ENGINE_VLLM, p, 4096, &err);
        CHECK(m != NULL);
        if (m) {
            const loom_serve_memory *mem = loom_serve_model_memory(m);
            printf("%s %s tp%lld %s: weights %.1f GiB, KV %.1f GiB = %lld tokens, fits %d\n",
                   cases[i].model, cases[i].cluster, (long long)p.tp,
                   loom_serve_weights_name(p.weights), mem->weights_bytes / 1073741824.0,
                   mem->kv_bytes / 1073741824.0, (long long)mem->kv_capacity_tokens, mem->fits);
            CHECK_INT_EQ(mem->fits, cases[i].fits);
            if (cases[i].fits) CHECK(mem->kv_bytes / 1073741824.0 >= cases[i].kv_gib_min);
        }
        loom_serve_model_destroy(m);
        loom_graph_destroy(g);
    }
    /* FP8 KV halves the bytes per token; MLA caches the latent: 61 layers ·
     * (512 + 64) numbers, not divided by tp */
    loom_graph *g = load("examples/models/deepseek-v3.json");
    loom_serve_parallel p;
    loom_serve_parallel_init(&p);
    p.tp = 8;
    p.weights = LOOM_WEIGHTS_FP8;
    p.kv_dtype = LOOM_DTYPE_FP8;
    loom_serve_shape s;
    loom_error err = {0};
    CHECK(loom_serve_shape_build(g, &p, &s, &err) == LOOM_OK);
    CHECK_NEAR_REL(s.kv_bytes_per_token, 61.0 * 576, 1e-12);
    /* 671B parameters of which ~14.5B bf16 (embedding, head, norms, routers) */
    CHECK(s.weight_bytes_gpu * 8 > 660e9 && s.weight_bytes_gpu * 8 < 720e9);
    loom_serve_shape_free(&s);
    loom_graph_destroy(g);

    /* gpt-oss-120b as OpenAI ships it: MXFP4 experts (0.5 + 1/32 bytes per
     * parameter), everything else bf16. By hand from its config.json: the
     * experts are 36 layers · 128 · 3 · 2880² weights (+ 128 · (2·2880 +
     * 2880) biases, bf16-sized in the graph: negligible, < 0.1%); the rest
     * is 36 · (q 2880·4096 + k, v 2 · 2880·512 + o 4096·2880) attention,
     * 2 · 201088 · 2880 embedding and head, and the routers 36 · 2880 · 128. */
    g = load("examples/models/gpt-oss-120b.json");
    loom_serve_parallel_init(&p);
    p.weights = LOOM_WEIGHTS_MXFP4;
    CHECK(loom_serve_shape_build(g, &p, &s, &err) == LOOM_OK);
    double experts = 36.0 * 128 * 3 * 2880.0 * 2880;
    double rest = 36.0 * (2 * 2880.0 * 4096 + 2 * 2880.0 * 512) + 2 * 201088.0 * 2880 +
                  36.0 * 2880 * 128;
    double by_hand = experts * (0.5 + 1.0 / 32) + rest * 2;
    printf("gpt-oss-120b mxfp4: %.2f GB (by hand %.2f GB)\n", s.weight_bytes_gpu / 1e9, by_hand / 1e9);
    CHECK_NEAR_REL(s.weight_bytes_gpu, by_hand, 0.01);
    loom_serve_shape_free(&s);
    loom_serve_model *m = make(g, "dgx-h100-x1", LOOM_ENGINE_VLLM, p, 4096, &err);
    CHECK(m != NULL);   /* one 80 GB GPU serves it, as OpenAI states */
    if (m) CHECK(loom_serve_model_memory(m)->fits && loom_serve_model_memory(m)->kv_bytes > 5e9);
    loom_serve_model_destroy(m);
    loom_graph_destroy(g);

    /* Llama-3.1-70B in NVFP4 (ModelOpt: 4-bit elements, an fp8 scale per
     * 16, the block GEMMs only): by hand 80 layers · (151.0M attention +
     * 704.6M MLP) = 68.45B at 0.5 + 1/16 bytes, the embedding and LM head
     * 2 · 128256 · 8192 at 2 bytes, the norms (80 · 2 + 1) · 8192 at 2. On
     * a B200 its GEMMs run on the FP4 tensor cores at twice the fp8 rate:
     * a compute-bound 8192-token prefill's GEMM time is half the fp8
     * deployment's but for the size roll-off term (tc_s: F + half); an
     * H100 has no FP4 tensor cores, and the model says so. */
    g = load("examples/models/llama-3.1-70b.json");
    loom_serve_parallel_init(&p);
    p.weights = LOOM_WEIGHTS_NVFP4;
    CHECK(loom_serve_shape_build(g, &p, &s, &err) == LOOM_OK);
    double gemms = 80.0 * (8192.0 * (8192 + 2 * 1024 + 8192) + 3 * 8192.0 * 28672);
    by_hand = gemms * (0.5 + 1.0 / 16) + 2 * 128256.0 * 8192 * 2 + 161.0 * 8192 * 2;
    printf("llama-3.1-70b nvfp4: %.3f GB (by hand %.3f GB)\n", s.weight_bytes_gpu / 1e9, by_hand / 1e9);
    CHECK_NEAR_REL(s.weight_bytes_gpu, by_hand, 1e-4);
    loom_serve_shape_free(&s);
    double gemm_s[2];
    for (int k = 0; k < 2; k++) {
        p.weights = k ? LOOM_WEIGHTS_NVFP4 : LOOM_WEIGHTS_FP8;
        m = make(g, "dgx-b200-x1", LOOM_ENGINE_TRTLLM, p, 16384, &err);
        CHECK(m != NULL);
        gemm_s[k] = 0;
        if (!m) continue;
        loom_serve_batch b = {.n_prefill = 8192, .n_prefill_seqs = 1,
                              .prefill_pairs = 8192.0 * 8193 / 2, .n_sampled = 1};
        loom_serve_iter bd;
        loom_serve_iter_time(m, &b, &bd);
        gemm_s[k] = bd.gemm_s;
        loom_serve_model_destroy(m);
    }
    printf("prefill 8192 on B200: GEMMs fp8 %.1f ms, nvfp4 %.1f ms\n", gemm_s[0] * 1e3, gemm_s[1] * 1e3);
    CHECK(gemm_s[1] > 0.5 * gemm_s[0] && gemm_s[1] < 0.56 * gemm_s[0]);
    m = make(g, "dgx-h100-x1", LOOM_ENGINE_TRTLLM, p, 4096, &err);
    CHECK(m == NULL && strstr(err.msg, "FP4 tensor cores") != NULL);
    loom_graph_destroy(g);
}

/* The simulator and the steady-state estimate agree at moderate load. */
static void test_sim_vs_steady(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    for (int k = 0; k < LOOM_ENGINE_COUNT; k++) {
        loom_serve_parallel p;
        loom_serve_parallel_init(&p);
        loom_error err = {0};
        loom_serve_model *m = make(g, "dgx-h100-x1", (loom_engine_kind)k, p, 1200, &err);
        CHECK(m != NULL);
        if (!m) continue;
        loom_serve_workload w;
        loom_serve_workload_init(&w);
        w.isl = 1000;
        w.osl = 200;
        w.load = LOOM_LOAD_QPS;
        w.rate = 1;
        w.num_requests = 2000;
        /* half the capacity the steady state finds */
        loom_serve_steady_result st;
        CHECK(loom_serve_steady(m, &w, &st, &err) == LOOM_OK);
        w.rate = 0.5 * st.capacity_rps;
        CHECK(loom_serve_steady(m, &w, &st, &err) == LOOM_OK);
        loom_serve_sim_result *r = malloc(sizeof *r);
        CHECK(loom_serve_simulate(m, &w, r, &err) == LOOM_OK);
        printf("%s at %.1f req/s: sim %.0f tok/s tpot %.2f ms, steady %.0f tok/s tpot %.2f ms\n",
               loom_engine_name((loom_engine_kind)k), w.rate, r->m.output_tokens_per_s,
               r->m.tpot.mean * 1e3, st.m.output_tokens_per_s, st.m.tpot.mean * 1e3);
        CHECK_NEAR_REL(st.m.output_tokens_per_s, r->m.output_tokens_per_s, 0.05);
        CHECK_NEAR_REL(st.m.tpot.mean, r->m.tpot.mean, 0.05);
        /* determinism: the same seed gives the same run, another seed another */
        loom_serve_sim_result *r2 = malloc(sizeof *r2);
        CHECK(loom_serve_simulate(m, &w, r2, &err) == LOOM_OK);
        CHECK(memcmp(&r->m, &r2->m, sizeof r->m) == 0);
        w.seed = 7;
        CHECK(loom_serve_simulate(m, &w, r2, &err) == LOOM_OK);
        CHECK(r->m.ttft.p99 != r2->m.ttft.p99);
        /* percentiles are ordered; ITL ≈ TPOT; TTFT ≥ one prefill */
        CHECK(r->m.ttft.p50 <= r->m.ttft.p90 && r->m.ttft.p90 <= r->m.ttft.p99);
        CHECK_NEAR_REL(r->m.itl.mean, r->m.tpot.mean, 0.05);
        CHECK(r->m.ttft.mean >= 0.9 * loom_serve_prefill_time(m, 1000));
        free(r);
        free(r2);
        loom_serve_model_destroy(m);
    }
    loom_graph_destroy(g);
}

/* Overload: a KV cache that cannot hold everyone preempts (vLLM) and the
 * utilisation reaches the top; TensorRT-LLM's reservation never preempts. */
static void test_pressure(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    loom_serve_parallel p;
    loom_serve_parallel_init(&p);
    loom_error err = {0};
    loom_serve_workload w;
    loom_serve_workload_init(&w);
    w.isl = 1000;
    w.osl = 1000;
    w.num_requests = 1500;
    loom_serve_sim_result *r = malloc(sizeof *r);
    loom_serve_model *m = make(g, "dgx-h100-x1", LOOM_ENGINE_VLLM, p, 2000, &err);
    CHECK(loom_serve_simulate(m, &w, r, &err) == LOOM_OK);
    CHECK(r->m.preemptions > 0);
    CHECK(r->m.kv_util_peak > 0.95);
    CHECK(r->n_timeline > 10);
    loom_serve_model_destroy(m);
    m = make(g, "dgx-h100-x1", LOOM_ENGINE_TRTLLM, p, 2000, &err);
    CHECK(loom_serve_simulate(m, &w, r, &err) == LOOM_OK);
    CHECK_INT_EQ(r->m.preemptions, 0);
    CHECK_INT_EQ(r->m.completed, 1500);
    loom_serve_model_destroy(m);
    free(r);
    loom_graph_destroy(g);
}

/* Bad input gets an error naming the place. */
static void test_errors(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    loom_serve_parallel p;
    loom_serve_parallel_init(&p);
    loom_error err = {0};
    loom_serve_model *m = make(g, "dgx-h100-x1", LOOM_ENGINE_VLLM, p, 2000, &err);
    loom_serve_workload w;
    loom_serve_workload_init(&w);
    w.isl = 8000;
    w.osl = 1000;   /* 9000 > 8192 positions */
    loom_serve_steady_result st;
    CHECK(loom_serve_steady(m, &w, &st, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "--isl 8000 + --osl 1000");
    CHECK_STR_CONTAINS(err.msg, "8192");
    w.isl = 100;
    w.load = LOOM_LOAD_QPS;
    w.rate = 0;
    CHECK(loom_serve_steady(m, &w, &st, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "--qps");
    w.rate = -3;
    CHECK(loom_serve_steady(m, &w, &st, &err) == LOOM_ERR_INVALID);
    w.load = LOOM_LOAD_CONCURRENCY;
    w.concurrency = 0;
    CHECK(loom_serve_steady(m, &w, &st, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "--concurrency");
    loom_serve_model_destroy(m);
    /* heads 32: tp 3 does not divide them; MoE-only flags on a dense model */
    p.tp = 3;
    CHECK(make(g, "dgx-h100-x1", LOOM_ENGINE_VLLM, p, 2000, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "--tp 3");
    p.tp = 1;
    p.ep = 2;
    CHECK(make(g, "dgx-h100-x1", LOOM_ENGINE_VLLM, p, 2000, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "--ep 2");
    p.ep = 1;
    p.tp = 16;   /* 16 GPUs on an 8-GPU cluster */
    CHECK(make(g, "dgx-h100-x1", LOOM_ENGINE_VLLM, p, 2000, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "16 GPUs");
    loom_graph_destroy(g);

    /* 40 heads, 8 KV heads: tp 5 divides the heads but not the KV heads */
    char dir[] = "/tmp/loom_serve_XXXXXX";
    check_tmpdir(dir);
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
          "\"hidden_size\": 5120, \"num_hidden_layers\": 2, \"num_attention_heads\": 40, "
          "\"num_key_value_heads\": 8, \"intermediate_size\": 1024, \"vocab_size\": 1000, "
          "\"max_position_embeddings\": 4096}\n", f);
    fclose(f);
    g = load(path);
    p.tp = 5;
    CHECK(make(g, "dgx-h100-x1", LOOM_ENGINE_SGLANG, p, 2000, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "8 KV heads");
    loom_graph_destroy(g);
    check_tmpdir_remove(dir);

    loom_serve_engine e;
    loom_serve_engine_defaults(LOOM_ENGINE_VLLM, NULL, 1, &e);
    e.max_num_seqs = 0;
    CHECK(loom_serve_engine_validate(&e, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "max_num_seqs");
    loom_engine_kind k;
    CHECK(!loom_engine_parse("tgi", &k));
}

/* The documented defaults. */
static void test_engine_defaults(void)
{
    const loom_device *h100 = loom_device_find("H100"), *a100 = loom_device_find("A100-40GB");
    loom_serve_engine e;
    loom_serve_engine_defaults(LOOM_ENGINE_VLLM, h100, 8, &e);
    CHECK_INT_EQ(e.max_num_seqs, 1024);
    CHECK_INT_EQ(e.max_batched_tokens, 8192);
    CHECK_INT_EQ(e.block_size, 16);
    loom_serve_engine_defaults(LOOM_ENGINE_VLLM, a100, 8, &e);
    CHECK_INT_EQ(e.max_num_seqs, 256);
    CHECK_INT_EQ(e.max_batched_tokens, 2048);
    loom_serve_engine_defaults(LOOM_ENGINE_SGLANG, h100, 8, &e);
    CHECK_NEAR_REL(e.mem_fraction, 0.81, 1e-12);
    CHECK(!e.mixed_batches);
    loom_serve_engine_defaults(LOOM_ENGINE_TRTLLM, h100, 1, &e);
    CHECK(e.reserve_full_output && e.mem_fraction_of_free);
}


/* One DGX H100 box, loaded once (tests that set engine fields before the
 * model is created). */
static const loom_cluster *h100_x1(void)
{
    static loom_cluster c;
    static bool loaded;
    loom_error err = {0};
    if (!loaded && loom_cluster_load("dgx-h100-x1", &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    loaded = true;
    return &c;
}

/* vLLM V0 multi-step scheduling (engine.h scheduler_steps): one request of
 * 128 prompt and 13 output tokens, k = 4. After the prefill step gives the
 * first token, three decode rounds of 4 steps each produce the other 12;
 * round j's steps run at contexts 129 + 4j .. 132 + 4j and pay the host
 * work (the iteration's overhead_s) once, so by hand
 *     R_j = sum over its 4 steps of iter(1 decode, ctx) - 3 * overhead,
 * each round reaches the client as one chunk: ITL = mean R_j over the 3
 * chunks, TPOT = (R_0 + R_1 + R_2) / 12. With k = 1 every step is its own
 * chunk and pays its host work. */
static void test_multi_step(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    const loom_cluster *c = h100_x1();
    loom_error err = {0};
    loom_serve_parallel p;
    loom_serve_parallel_init(&p);
    loom_serve_workload w;
    loom_serve_workload_init(&w);
    w.isl = 128;
    w.osl = 13;
    w.load = LOOM_LOAD_CONCURRENCY;
    w.concurrency = 1;
    w.num_requests = 1;
    for (int32_t k = 1; k <= 4; k += 3) {
        loom_serve_model_opts o = {.graph = g, .cluster = c, .par = p, .seq_tokens = 256};
        loom_serve_engine_defaults(LOOM_ENGINE_VLLM, &c->gpu, 1, &o.engine);
        loom_serve_engine_multi_step(&o.engine, k, 4096);
        CHECK(o.engine.max_batched_tokens == (k > 1 ? 4096 : 8192));
        CHECK(o.engine.chunked_prefill == (k == 1) && o.engine.max_num_seqs == (k > 1 ? 256 : 1024));
        loom_serve_model *m = NULL;
        CHECK(loom_serve_model_create(&o, &m, &err) == LOOM_OK);
        if (!m) continue;
        double rounds = 0;
        int chunks = 0;
        for (int64_t ctx = 129; ctx <= 140; ctx += k, chunks++) {
            for (int32_t s = 0; s < k; s++) {
                loom_serve_batch b = {.n_decode = 1, .decode_ctx = (double)(ctx + s), .n_sampled = 1};
                loom_serve_iter bd;
                rounds += loom_serve_iter_time(m, &b, &bd) - (s > 0 ? bd.overhead_s : 0);
            }
        }
        loom_serve_sim_result *r = malloc(sizeof *r);
        CHECK(loom_serve_simulate(m, &w, r, &err) == LOOM_OK);
        printf("multi-step k %d: ITL %.3f ms (hand %.3f), TPOT %.3f ms (hand %.3f)\n", (int)k,
               r->m.itl.mean * 1e3, rounds / chunks * 1e3, r->m.tpot.mean * 1e3, rounds / 12 * 1e3);
        CHECK(chunks == (k == 1 ? 12 : 3));
        CHECK_NEAR_REL(r->m.itl.mean, rounds / chunks, 1e-9);
        CHECK_NEAR_REL(r->m.tpot.mean, rounds / 12, 1e-9);
        free(r);
        loom_serve_model_destroy(m);
    }
    loom_graph_destroy(g);
}

/* The overlap scheduler (engine.h overlap_host: SGLang since 0.4,
 * TensorRT-LLM's PyTorch backend): the host prepares the next iteration
 * while the GPU runs this one, so an iteration takes max(GPU, host); vLLM
 * V1, a disabled overlap and the C++ executor take their sum. Checked on
 * its own breakdown at a small batch (host-bound: 1 sequence) and a large
 * one (GPU-bound: 256). */
static void test_overlap_host(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    const loom_cluster *c = h100_x1();
    loom_error err = {0};
    loom_serve_parallel p;
    loom_serve_parallel_init(&p);
    for (int k = 0; k < LOOM_ENGINE_COUNT; k++)
        for (int off = 0; off < 2; off++) {
            loom_serve_model_opts o = {.graph = g, .cluster = c, .par = p, .seq_tokens = 2048};
            loom_serve_engine_defaults((loom_engine_kind)k, &c->gpu, 1, &o.engine);
            CHECK(o.engine.overlap_host == (k != LOOM_ENGINE_VLLM));
            if (off) o.engine.overlap_host = false;
            loom_serve_model *m = NULL;
            CHECK(loom_serve_model_create(&o, &m, &err) == LOOM_OK);
            if (!m) continue;
            for (int64_t n = 1; n <= 256; n *= 256) {
                loom_serve_batch b = {.n_decode = n, .decode_ctx = (double)n * 1000, .n_sampled = n};
                loom_serve_iter bd;
                double t = loom_serve_iter_time(m, &b, &bd);
                double gpu = bd.gemm_s + bd.attn_s + bd.other_s + bd.comm_s;
                double want = o.engine.overlap_host ? (gpu > bd.overhead_s ? gpu : bd.overhead_s)
                                                    : gpu + bd.overhead_s;
                CHECK(bd.overhead_s > 0);
                CHECK_NEAR_REL(t, want, 1e-12);
            }
            loom_serve_model_destroy(m);
        }
    loom_graph_destroy(g);
}

/* TensorRT-LLM's C++ executor pays seq_compiled_s per running sequence an
 * iteration; behind NIM's server seq_nim_s more (calib.h), behind an
 * in-process harness (MLPerf) nothing more. Same engine, same batch: the
 * two iterations' host overheads differ by exactly n · seq_nim_s, and the
 * GPU parts not at all. */
static void test_nim_seq_cost(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    const loom_cluster *c = h100_x1();
    loom_error err = {0};
    loom_serve_parallel p;
    loom_serve_parallel_init(&p);
    loom_serve_calib sc;
    loom_serve_calib_default(&c->gpu, &sc);
    sc.seq_compiled_s = 20e-6;
    sc.seq_nim_s = 90e-6;
    loom_serve_iter bd[2];
    for (int nim = 0; nim < 2; nim++) {
        loom_serve_model_opts o = {.graph = g, .cluster = c, .par = p, .seq_tokens = 2048,
                                   .serve_calib = &sc,
                                   .frontend = nim ? LOOM_FRONTEND_NIM : LOOM_FRONTEND_NONE};
        loom_serve_engine_defaults(LOOM_ENGINE_TRTLLM, &c->gpu, 1, &o.engine);
        o.engine.compiled_runtime = true;
        loom_serve_model *m = NULL;
        CHECK(loom_serve_model_create(&o, &m, &err) == LOOM_OK);
        if (!m) return;
        loom_serve_batch b = {.n_decode = 64, .decode_ctx = 64.0 * 1000, .n_sampled = 64};
        loom_serve_iter_time(m, &b, &bd[nim]);
        loom_serve_model_destroy(m);
    }
    CHECK_NEAR_REL(bd[1].overhead_s - bd[0].overhead_s, 64 * 90e-6, 1e-9);
    CHECK_NEAR_REL(bd[1].gemm_s + bd[1].attn_s, bd[0].gemm_s + bd[0].attn_s, 1e-12);
    loom_graph_destroy(g);
}

/* The two stream queues (calib.h stream_token_s, client_chunk_s): the
 * server's and a Python benchmark client's, in different processes. A
 * token passes both, so with nothing queued a lone request sees each of its
 * tokens a + b after the engine emits it (TTFT grows by a + b, the gaps do
 * not); under an offline flood of 200 requests × 1024 tokens the slower
 * queue alone paces what the client sees, 1 / max(a, b) tokens/s (one
 * queue of a + b would give 1 / (a + b)), whichever of the two it is, and
 * a client that does not serialise the streams (genai-perf, AIPerf) leaves
 * the server's 1 / a. The simulator and the steady state both. */
static void test_stream_queues(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    const loom_cluster *c = h100_x1();
    loom_error err = {0};
    loom_serve_parallel p;
    loom_serve_parallel_init(&p);
    const double ab[3][2] = {{0.5e-3, 2e-3}, {2e-3, 0.5e-3}, {1e-3, 2e-3}};
    double ttft0 = 0, itl0 = 0;
    for (int k = -1; k < 3; k++) {
        loom_serve_calib sc;
        loom_serve_calib_default(&c->gpu, &sc);
        sc.request_overhead_s = 0;
        sc.stream_token_s = k < 0 ? 0 : ab[k][0];
        sc.client_chunk_s = k < 0 ? 0 : ab[k][1];
        loom_serve_model_opts o = {.graph = g, .cluster = c, .par = p, .seq_tokens = 256,
                                   .serve_calib = &sc,
                                   .client = k == 2 ? LOOM_CLIENT_PARALLEL : LOOM_CLIENT_PYTHON};
        loom_serve_engine_defaults(LOOM_ENGINE_VLLM, &c->gpu, 1, &o.engine);
        loom_serve_model *m = NULL;
        CHECK(loom_serve_model_create(&o, &m, &err) == LOOM_OK);
        if (!m) continue;
        loom_serve_workload w;
        loom_serve_workload_init(&w);
        w.isl = 128;
        w.osl = 64;
        w.load = LOOM_LOAD_CONCURRENCY;
        w.concurrency = 1;
        w.num_requests = 1;
        loom_serve_sim_result *r = malloc(sizeof *r);
        CHECK(loom_serve_simulate(m, &w, r, &err) == LOOM_OK);
        if (k < 0) {
            ttft0 = r->m.ttft.mean;
            itl0 = r->m.itl.mean;
        } else if (k < 2) {
            CHECK_NEAR_REL(r->m.ttft.mean, ttft0 + ab[k][0] + ab[k][1], 1e-9);
            CHECK_NEAR_REL(r->m.itl.mean, itl0, 1e-9);
        }
        w.load = LOOM_LOAD_OFFLINE;
        w.num_requests = 200;
        w.osl = 1024;   /* 204,800 tokens: the prefill before the first ones is < 1% of the run */
        CHECK(loom_serve_simulate(m, &w, r, &err) == LOOM_OK);
        loom_serve_steady_result st;
        CHECK(loom_serve_steady(m, &w, &st, &err) == LOOM_OK);
        if (k >= 0) {
            double pace = k == 2 ? ab[k][0] : (ab[k][0] > ab[k][1] ? ab[k][0] : ab[k][1]);
            printf("stream queues %.1f + %.1f ms%s: %.0f tokens/s simulated, %.0f steady (1 / pace %.0f)\n",
                   ab[k][0] * 1e3, ab[k][1] * 1e3, k == 2 ? " (parallel client)" : "",
                   r->m.output_tokens_per_s, st.m.output_tokens_per_s, 1 / pace);
            CHECK_NEAR_REL(r->m.output_tokens_per_s, 1 / pace, 0.02);
            CHECK_NEAR_REL(st.m.output_tokens_per_s, 1 / pace, 0.05);
        }
        free(r);
        loom_serve_model_destroy(m);
    }
    loom_graph_destroy(g);
}

/* Independent users against a benchmark's start (sim.c). Llama-3-8B on
 * one H100, 4096-token prompts and 64 output tokens, 8 clients: started
 * together, the queue the start builds in front of the prefill comes round
 * with every wave; users' first requests are spread over a request's
 * duration. The start changes when requests are prefilled, not how much
 * the engine does: throughput within 3% either way; users wait less for
 * their first token, never less than an unqueued prefill; one client has
 * no one to be out of step with: the two are the same. */
static void test_users_start(void)
{
    loom_graph *g = load("examples/models/llama-3-8b.json");
    const loom_cluster *c = h100_x1();
    loom_error err = {0};
    loom_serve_parallel p;
    loom_serve_parallel_init(&p);
    loom_serve_metrics got[2][2];
    double prefill = 0;
    for (int users = 0; users < 2; users++) {
        loom_serve_model_opts o = {.graph = g, .cluster = c, .par = p, .seq_tokens = 4160,
                                   .client = users ? LOOM_CLIENT_USERS : LOOM_CLIENT_PARALLEL};
        loom_serve_engine_defaults(LOOM_ENGINE_VLLM, &c->gpu, 1, &o.engine);
        loom_serve_model *m = NULL;
        CHECK(loom_serve_model_create(&o, &m, &err) == LOOM_OK);
        if (!m) continue;
        prefill = loom_serve_prefill_time(m, 4096);
        for (int k = 0; k < 2; k++) {
            loom_serve_workload w;
            loom_serve_workload_init(&w);
            w.isl = 4096;
            w.osl = 64;
            w.load = LOOM_LOAD_CONCURRENCY;
            w.concurrency = k ? 8 : 1;
            w.num_requests = k ? 400 : 20;
            w.seed = 3;
            loom_serve_sim_result *r = malloc(sizeof *r);
            CHECK(loom_serve_simulate(m, &w, r, &err) == LOOM_OK);
            got[users][k] = r->m;
            free(r);
        }
        loom_serve_model_destroy(m);
    }
    printf("8 clients, 4096 + 64 tokens: TTFT %.1f ms started together, %.1f ms users "
           "(prefill alone %.1f ms); %.0f and %.0f tokens/s\n",
           got[0][1].ttft.mean * 1e3, got[1][1].ttft.mean * 1e3, prefill * 1e3,
           got[0][1].output_tokens_per_s, got[1][1].output_tokens_per_s);
    CHECK_NEAR_REL(got[1][0].ttft.mean, got[0][0].ttft.mean, 1e-9);
    CHECK_NEAR_REL(got[1][0].output_tokens_per_s, got[0][0].output_tokens_per_s, 1e-9);
    CHECK_NEAR_REL(got[1][1].output_tokens_per_s, got[0][1].output_tokens_per_s, 0.03);
    CHECK(got[1][1].ttft.mean < 0.8 * got[0][1].ttft.mean);
    CHECK(got[1][1].ttft.mean >= prefill);
    loom_graph_destroy(g);
}

int main(void)
{
    test_pp_budget();
    test_pp_steady_budget();
    test_nim_seq_cost();
    test_engine_defaults();
    test_decode_band();
    test_pp_lone_prompt();
    test_fits();
    test_sim_vs_steady();
    test_multi_step();
    test_overlap_host();
    test_stream_queues();
    test_users_start();
    test_pressure();
    test_errors();
    return check_done();
}
