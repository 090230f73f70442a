/*
 * test_serve_fit.c — the serving fit recovers a calibration: records whose
 * "published" metrics are the model's own predictions under a known
 * calibration (a decode HBM efficiency of 0.65, 3 ms of vLLM overhead,
 * 12 us all-reduces) are fitted from the prior, and the fit reproduces
 * them within 3%, leaving the measured (not fitted) GEMM and attention
 * efficiencies at their values; on records whose TTFT is the simulator's
 * (clients that start together queue their prompts), the fit scaled by the
 * simulator's TTFT ratio stays at the truth's 20 ms front-end latency where
 * the steady state alone makes the queue up with latency (34 ms, single-
 * client TTFT +24%); the records reader marks a record it cannot predict
 * with the reason and its path.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "costs/serve/fit.h"
#include "graph/model.h"

/* Writes one record of a 100 + 10 token qps run on an H100 with the JSON
 * members `fields` added to path, and reads it back. */
static loom_status load_one(const char *path, const char *fields, loom_serve_record **rr, size_t *n,
                            loom_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f) return loom_error_set(err, LOOM_ERR_IO, "cannot write %s", path);
    fprintf(f, "{\"records\": [{\"source\": \"x\", \"gpu\": \"H100\", \"isl\": 100, \"osl\": 10, "
               "\"load\": {\"kind\": \"qps\", \"value\": 1}, "
               "\"metrics\": {\"tpot_mean_s\": 0.01}, %s}]}\n",
            fields);
    fclose(f);
    *rr = NULL;
    return loom_serve_records_load(path, rr, n, err);
}

int main(void)
{
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    mo.seq = 1;
    mo.batch = 1;
    loom_graph *g8 = NULL, *g70 = NULL;
    loom_error err = {0};
    if (loom_model_load("examples/models/llama-3-8b.json", &mo, &g8, &err) ||
        loom_model_load("examples/models/llama-3-70b.json", &mo, &g70, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    loom_serve_calib truth;
    loom_serve_calib_prior(NULL, &truth);
    truth.iter_vllm_s = 3e-3;
    truth.ar_latency_s = 12e-6;

    enum { N = 8 };
    loom_serve_record recs[N];
    loom_serve_case cases[N] = {0};   /* ttft_sim_ratio 0: the steady TTFT until anchored */
    const struct { int big; int64_t tp, isl, osl; loom_load_kind load; double v; } spec[N] = {
        {0, 1, 1000, 200, LOOM_LOAD_CONCURRENCY, 1},  {0, 1, 1000, 200, LOOM_LOAD_CONCURRENCY, 32},
        {0, 1, 2000, 100, LOOM_LOAD_QPS, 4},          {0, 1, 500, 500, LOOM_LOAD_OFFLINE, 0},
        {1, 8, 1000, 200, LOOM_LOAD_CONCURRENCY, 1},  {1, 8, 1000, 200, LOOM_LOAD_CONCURRENCY, 64},
        {1, 4, 2000, 200, LOOM_LOAD_QPS, 2},          {1, 8, 1000, 1000, LOOM_LOAD_OFFLINE, 0},
    };
    for (int i = 0; i < N; i++) {
        loom_serve_record *r = &recs[i];
        memset(r, 0, sizeof *r);
        snprintf(r->source, sizeof r->source, "synthetic-%d", i % 3);
        snprintf(r->model, sizeof r->model, spec[i].big ? "llama-3-70b" : "llama-3-8b");
        snprintf(r->gpu, sizeof r->gpu, "H100-SXM5-80GB");
        r->engine = LOOM_ENGINE_VLLM;
        r->num_gpus = spec[i].tp;
        loom_serve_parallel_init(&r->par);
        r->par.tp = spec[i].tp;
        loom_serve_workload_init(&r->work);
        r->work.isl = spec[i].isl;
        r->work.osl = spec[i].osl;
        r->work.load = spec[i].load;
        r->work.rate = spec[i].v;
        r->work.concurrency = (int64_t)spec[i].v;
        r->work.num_requests = 400;
        cases[i].rec = r;
        cases[i].graph = spec[i].big ? g70 : g8;
        CHECK(loom_cluster_preset("dgx-h100-x1", &cases[i].cluster, &err) == LOOM_OK);
        loom_serve_metrics m;
        CHECK(loom_serve_case_predict(&cases[i], &truth, false, &m, &err) == LOOM_OK);
        for (int k = 0; k < LOOM_SM_COUNT; k++) r->measured[k] = -1;
        r->measured[LOOM_SM_TPOT] = m.tpot.mean;
        r->measured[LOOM_SM_TTFT] = m.ttft.mean;
        r->measured[LOOM_SM_OUT_TPS] = m.output_tokens_per_s;
    }
    loom_serve_calib fit;
    loom_serve_calib_prior(NULL, &fit);
    /* start (and prior) a factor 1.5 from the truth: the V1 prior of 0.5 ms
     * would pull a 3 ms truth too hard for 8 records to recover it */
    fit.iter_vllm_s = 2e-3;
    double L = -1;
    CHECK(loom_serve_fit(cases, N, NULL, &fit, &L, &err) == LOOM_OK);
    printf("fit: loss %.5f, seq %.1f us, iter_vllm %.2f ms, ar %.1f us, gemm %.2f\n", L,
           fit.seq_overhead_s * 1e6, fit.iter_vllm_s * 1e3, fit.ar_latency_s * 1e6, fit.gemm_eff);
    for (int i = 0; i < N; i++) {
        loom_serve_metrics m;
        CHECK(loom_serve_case_predict(&cases[i], &fit, false, &m, &err) == LOOM_OK);
        CHECK_NEAR_REL(m.tpot.mean, recs[i].measured[LOOM_SM_TPOT], 0.04);
        CHECK_NEAR_REL(m.output_tokens_per_s, recs[i].measured[LOOM_SM_OUT_TPS], 0.04);
    }
    CHECK_NEAR_REL(fit.iter_vllm_s, 3e-3, 0.1);
    CHECK_NEAR_REL(fit.ar_latency_s, 12e-6, 0.25);
    /* measured, not fitted (calib.h: bounds lo == hi) */
    CHECK_NEAR_REL(fit.gemm_eff, 0.70, 0);
    CHECK_NEAR_REL(fit.attn_eff, 0.63, 0);
    CHECK_NEAR_REL(fit.decode_mem_eff, 0.89, 0);
    CHECK_NEAR_REL(fit.kernel_gap_s, 2.8e-6, 0);

    /* One record the model cannot explain (its TPOT and throughput 2.5x
     * off, as a run with an unstated setting would be) must not drag the
     * fit: the Huber loss counts it linearly, so the fit still matches the
     * seven others (iteration cost 3.5 ms for a truth of 3). Under a squared
     * loss it pulls the vLLM iteration cost to 5.2 ms and three others' TPOT
     * 11-25% off. */
    recs[1].measured[LOOM_SM_TPOT] *= 2.5;
    recs[1].measured[LOOM_SM_OUT_TPS] /= 2.5;
    loom_serve_calib robust;
    loom_serve_calib_prior(NULL, &robust);
    robust.iter_vllm_s = 2e-3;
    CHECK(loom_serve_fit(cases, N, NULL, &robust, &L, &err) == LOOM_OK);
    printf("fit with an outlier: iter_vllm %.2f ms, ar %.1f us, seq %.1f us\n",
           robust.iter_vllm_s * 1e3, robust.ar_latency_s * 1e6, robust.seq_overhead_s * 1e6);
    for (int i = 0; i < N; i++) {
        if (i == 1) continue;
        loom_serve_metrics m;
        CHECK(loom_serve_case_predict(&cases[i], &robust, false, &m, &err) == LOOM_OK);
        CHECK_NEAR_REL(m.tpot.mean, recs[i].measured[LOOM_SM_TPOT], 0.08);
    }
    recs[1].measured[LOOM_SM_TPOT] /= 2.5;
    recs[1].measured[LOOM_SM_OUT_TPS] *= 2.5;

    /* TTFT as the simulator has it. A benchmark's clients start together,
     * so under concurrency each round's prompts queue behind one another;
     * the steady state prices one prompt. Records whose TTFT is the
     * simulator's (latency 20 ms, truth above) are fitted: scaled by the
     * simulator's ratio to it at the prior (loom_serve_cases_anchor), the
     * fit finds the latency; on the steady TTFT alone it makes the queue up
     * with latency instead. */
    truth.latency_vllm_s = 20e-3;
    /* short prompts and many clients, as in the DLI course's sweeps */
    recs[1].work.isl = recs[5].work.isl = 200;
    recs[1].work.osl = recs[5].work.osl = 200;
    recs[1].work.concurrency = 100;
    recs[5].work.concurrency = 200;
    for (int i = 0; i < N; i++) {
        loom_serve_metrics m;
        CHECK(loom_serve_case_predict(&cases[i], &truth, true, &m, &err) == LOOM_OK);
        recs[i].measured[LOOM_SM_TPOT] = m.tpot.mean;
        recs[i].measured[LOOM_SM_TTFT] = m.ttft.mean;
        recs[i].measured[LOOM_SM_OUT_TPS] = m.output_tokens_per_s;
    }
    loom_serve_calib anchored, plain;
    loom_serve_calib_prior(NULL, &anchored);
    anchored.iter_vllm_s = 2e-3;
    anchored.latency_vllm_s = 20e-3;   /* start (and prior) at the truth: does it stay? */
    plain = anchored;
    CHECK(loom_serve_fit(cases, N, NULL, &plain, &L, &err) == LOOM_OK);
    loom_serve_cases_anchor(cases, N, &anchored);
    CHECK(loom_serve_fit(cases, N, NULL, &anchored, &L, &err) == LOOM_OK);
    printf("TTFT fit: latency %.1f ms anchored, %.1f ms on the steady TTFT (truth 20)\n",
           anchored.latency_vllm_s * 1e3, plain.latency_vllm_s * 1e3);
    CHECK(cases[1].ttft_sim_ratio > 5 && cases[5].ttft_sim_ratio > 5);   /* 100, 200 clients */
    CHECK_NEAR_REL(cases[0].ttft_sim_ratio, 1, 0.05);                    /* one client: none */
    CHECK_NEAR_REL(anchored.latency_vllm_s, 20e-3, 0.1);
    CHECK(plain.latency_vllm_s > 1.3 * 20e-3);
    for (int i = 0; i < N; i++) {
        loom_serve_metrics a, p;
        CHECK(loom_serve_case_predict(&cases[i], &anchored, true, &a, &err) == LOOM_OK);
        CHECK(loom_serve_case_predict(&cases[i], &plain, true, &p, &err) == LOOM_OK);
        double ea = a.ttft.mean / recs[i].measured[LOOM_SM_TTFT] - 1,
               ep = p.ttft.mean / recs[i].measured[LOOM_SM_TTFT] - 1;
        printf("  case %d: TTFT %.4f s, anchored %+.1f%%, plain %+.1f%%\n", i,
               recs[i].measured[LOOM_SM_TTFT], 100 * ea, 100 * ep);
        CHECK(fabs(ea) < 0.06);
        if (i == 0) CHECK(ep > 0.1);   /* the made-up latency on one client's TTFT */
    }

    /* the reader: a bad engine names the record */
    char dir[] = "/tmp/loom_sfit_XXXXXX";
    check_tmpdir(dir);
    char path[256];
    snprintf(path, sizeof path, "%s/runs.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"records\": [{\"source\": \"x\", \"engine\": \"vllm\", \"gpu\": \"H100\", \"tp\": 1, "
          "\"isl\": 100, \"osl\": 10, \"load\": {\"kind\": \"qps\", \"value\": 1}, "
          "\"metrics\": {\"tpot_mean_s\": 0.01}}, {\"source\": \"y\", \"engine\": \"tgi\", "
          "\"gpu\": \"H100\", \"isl\": 1, \"osl\": 1, \"load\": {\"kind\": \"offline\"}, "
          "\"metrics\": {\"tpot_mean_s\": 0.01}}]}\n", f);
    fclose(f);
    loom_serve_record *rr = NULL;
    size_t n = 0;
    CHECK(loom_serve_records_load(path, &rr, &n, &err) == LOOM_OK);
    CHECK_INT_EQ(n, 2);
    if (n == 2) {
        CHECK_INT_EQ(rr[0].skip[0], 0);
        CHECK_STR_CONTAINS(rr[1].skip, "$.records[1]");
        CHECK_STR_CONTAINS(rr[1].skip, "tgi");
    }
    free(rr);

    /* the benchmark client and vLLM's engine loop, as a record states them:
     * genai-perf and AIPerf do not read the streams in one Python process;
     * vLLM releases before 0.8 ran the V0 loop (0.10.2 is V1: not "0.1") */
    const char *vers[] = {"0.6.3", "0.7.3", "0.8.0", "0.10.2", "0.11.0", "nightly"};
    const bool v0[] = {true, true, false, false, false, false};
    const char *clients[] = {"\"genai-perf\"", "\"aiperf\"", "\"python\"", NULL, NULL, NULL};
    char fields[256];
    for (int i = 0; i < 6; i++) {
        snprintf(fields, sizeof fields, "\"engine\": \"vllm\", \"engine_version\": \"%s\"%s%s",
                 vers[i], clients[i] ? ", \"client\": " : "", clients[i] ? clients[i] : "");
        CHECK(load_one(path, fields, &rr, &n, &err) == LOOM_OK);
        if (rr && n == 1) {
            CHECK_INT_EQ(rr[0].vllm_v0, v0[i]);
            CHECK_INT_EQ(rr[0].client, i < 2 ? LOOM_CLIENT_PARALLEL : LOOM_CLIENT_PYTHON);
        }
        free(rr);
    }
    CHECK(load_one(path, "\"engine\": \"vllm\", \"client\": \"locust\"", &rr, &n, &err) != LOOM_OK);
    CHECK_STR_CONTAINS(err.msg, "$.records[0]");
    CHECK_STR_CONTAINS(err.msg, "locust");
    free(rr);

    /* the KV dtype a record does not state is its deployment's default:
     * fp8 for NIM serving fp8 weights (Model Optimizer FP8 checkpoints
     * quantise the KV cache), bf16 for the rest; a stated one stands */
    const char *kv_eng[] = {"nvidia-nim", "nvidia-nim", "nvidia-nim", "vllm", "nvidia-nim"};
    const char *kv_w[] = {"fp8", "fp8", "fp16", "fp8", "fp8"};
    const char *kv_s[] = {"not stated (engine default)", NULL, "not stated", "unknown (not stated)",
                          "bf16"};
    const loom_dtype kv_want[] = {LOOM_DTYPE_FP8, LOOM_DTYPE_FP8, LOOM_DTYPE_BF16, LOOM_DTYPE_BF16,
                                  LOOM_DTYPE_BF16};
    for (int i = 0; i < 5; i++) {
        snprintf(fields, sizeof fields, "\"engine\": \"%s\", \"weights\": \"%s\"%s%s%s", kv_eng[i],
                 kv_w[i], kv_s[i] ? ", \"kv_dtype\": \"" : "", kv_s[i] ? kv_s[i] : "",
                 kv_s[i] ? "\"" : "");
        CHECK(load_one(path, fields, &rr, &n, &err) == LOOM_OK);
        if (rr && n == 1) CHECK_INT_EQ(rr[0].par.kv_dtype, kv_want[i]);
        free(rr);
    }
    /* TensorRT-LLM's context chunking is read from engine_settings, under
     * the C++ executor's name or trtllm-serve's, and only for TensorRT-LLM
     * (vLLM and SGLang chunk by their own defaults) */
    const char *ch[] = {"\"engine\": \"tensorrt-llm\", \"engine_settings\": {\"enable_chunked_context\": true}",
                        "\"engine\": \"tensorrt-llm\", \"engine_settings\": {\"enable_chunked_prefill\": true}",
                        "\"engine\": \"tensorrt-llm\", \"engine_settings\": {\"chunked_prefill\": true}",
                        "\"engine\": \"tensorrt-llm\", \"engine_settings\": {\"enable_chunked_context\": false}",
                        "\"engine\": \"tensorrt-llm\"",
                        "\"engine\": \"vllm\", \"engine_settings\": {\"enable_chunked_context\": true}"};
    for (int i = 0; i < 6; i++) {
        CHECK(load_one(path, ch[i], &rr, &n, &err) == LOOM_OK);
        if (rr && n == 1) CHECK_INT_EQ(rr[0].chunked_context, i <= 2);
        free(rr);
    }
    /* A genai-perf concurrency run that states no request count measured
     * genai-perf's default, max(10, 2 N) requests from a cold start; a
     * stated count stands, and other clients keep the simulator's default */
    const char *loads[] = {
        "{\"kind\": \"concurrency\", \"value\": 3}, \"client\": \"genai-perf\"",
        "{\"kind\": \"concurrency\", \"value\": 250}, \"client\": \"genai-perf\"",
        "{\"kind\": \"concurrency\", \"value\": 250, \"num_requests\": 40}, \"client\": \"genai-perf\"",
        "{\"kind\": \"concurrency\", \"value\": 250}, \"client\": \"aiperf\"",
        "{\"kind\": \"concurrency\", \"value\": 250}"};
    const int64_t want_n[] = {10, 500, 40, 0, 0};
    for (int i = 0; i < 5; i++) {
        FILE *fp = fopen(path, "w");
        fprintf(fp, "{\"records\": [{\"source\": \"x\", \"engine\": \"nvidia-nim\", "
                    "\"gpu\": \"H100\", \"isl\": 100, \"osl\": 10, "
                    "\"metrics\": {\"ttft_mean_s\": 0.1}, \"load\": %s}]}\n",
                loads[i]);
        fclose(fp);
        rr = NULL;
        CHECK(loom_serve_records_load(path, &rr, &n, &err) == LOOM_OK);
        if (rr && n == 1) CHECK_INT_EQ(rr[0].work.num_requests, want_n[i]);
        free(rr);
    }
    check_tmpdir_remove(dir);
    loom_graph_destroy(g8);
    loom_graph_destroy(g70);
    return check_done();
}
