/*
 * records.c — reading published serving runs (records.h).
 */
#include "costs/serve/records.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/json.h"
#include "costs/device.h"

static const char *const keys[] = {
#define LOOM_X(n, key, label) key,
    LOOM_SERVE_METRIC_LIST(LOOM_X)
#undef LOOM_X
};
static const char *const labels[] = {
#define LOOM_X(n, key, label) label,
    LOOM_SERVE_METRIC_LIST(LOOM_X)
#undef LOOM_X
};

const char *loom_serve_metric_key(loom_serve_metric m) { return keys[m]; }
const char *loom_serve_metric_label(loom_serve_metric m) { return labels[m]; }

double loom_serve_metric_of(const loom_serve_metrics *m, loom_serve_metric k)
{
    switch (k) {
    case LOOM_SM_TTFT: return m->ttft.mean;
    case LOOM_SM_TTFT_P99: return m->ttft.p99;
    case LOOM_SM_TPOT: return m->tpot.mean;
    case LOOM_SM_ITL: return m->itl.mean;
    case LOOM_SM_ITL_P99: return m->itl.p99;
    case LOOM_SM_E2E: return m->e2e.mean;
    case LOOM_SM_OUT_TPS: return m->output_tokens_per_s;
    case LOOM_SM_RPS: return m->requests_per_s;
    case LOOM_SM_TTFT_P50: return m->ttft.p50;
    case LOOM_SM_TPOT_P50: return m->tpot.p50;
    case LOOM_SM_ITL_P50: return m->itl.p50;
    case LOOM_SM_E2E_P50: return m->e2e.p50;
    default: return 0;
    }
}

static void copy_str(const cJSON *o, const char *k, char *dst, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v)) snprintf(dst, n, "%s", v->valuestring);
}

static double num_or(const cJSON *o, const char *k, double dflt)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static loom_status one(const loom_jctx *c, const cJSON *o, const char *path, loom_serve_record *r)
{
    memset(r, 0, sizeof *r);
    loom_serve_parallel_init(&r->par);
    loom_serve_workload_init(&r->work);
    copy_str(o, "source", r->source, sizeof r->source);
    copy_str(o, "source_id", r->source_id, sizeof r->source_id);
    copy_str(o, "model", r->model, sizeof r->model);
    copy_str(o, "hf_id", r->hf_id, sizeof r->hf_id);
    const char *s = NULL;
    bool client_genai_perf = false;
    loom_status st;
    if ((st = loom_json_get_str(c, o, path, "engine", true, &s))) return st;
    if (!strncasecmp(s, "tensorrt", 8) || !strncasecmp(s, "nvidia-nim", 10)) r->engine = LOOM_ENGINE_TRTLLM;
    if (!strncasecmp(s, "nvidia-nim", 10)) r->frontend = LOOM_FRONTEND_NIM;
    else if (!loom_engine_parse(s, &r->engine)) {
        snprintf(r->skip, sizeof r->skip, "%.64s: engine \"%.40s\" has no policy in loom "
                 "(vllm, sglang, trtllm)", path, s);
        return LOOM_OK;
    }
    /* TensorRT-LLM ran built TensorRT engines from its C++ executor until
     * 1.0 made the PyTorch backend the default; NIM 1.x ships such engines.
     * A record says so itself ("trt_engine": true, e.g. NVIDIA's MLPerf
     * harnesses, whose version is not a release number), else the version
     * decides. */
    if (r->engine == LOOM_ENGINE_TRTLLM) {
        const char *v = NULL;
        bool stated = false;
        if ((st = loom_json_get_str(c, o, path, "engine_version", false, &v)) ||
            (st = loom_json_get_bool(c, o, path, "trt_engine", false, &stated)))
            return st;
        r->compiled_runtime = stated || r->frontend == LOOM_FRONTEND_NIM ||
                              (v && !strncmp(v, "0.", 2));
    }
    /* vLLM's V1 engine became the default in 0.8 (engine.h v0_loop); a
     * version that is not a release number (a nightly build) is V1 */
    if (r->engine == LOOM_ENGINE_VLLM) {
        const char *v = NULL;
        if ((st = loom_json_get_str(c, o, path, "engine_version", false, &v))) return st;
        r->vllm_v0 = v && v[0] == '0' && v[1] == '.' && v[2] >= '1' && v[2] <= '7' &&
                     (v[3] == '.' || v[3] == 0);
    }
    /* SGLang's overlap scheduler (engine.h overlap_host) came with 0.4 */
    if (r->engine == LOOM_ENGINE_SGLANG) {
        const char *v = NULL;
        if ((st = loom_json_get_str(c, o, path, "engine_version", false, &v))) return st;
        r->overlap_off = v && (!strncmp(v, "0.1", 3) || !strncmp(v, "0.2", 3) || !strncmp(v, "0.3", 3));
    }
    if ((st = loom_json_get_str(c, o, path, "gpu", true, &s))) return st;
    const loom_device *d = loom_device_find(s);
    if (!d) {
        snprintf(r->skip, sizeof r->skip, "%.64s: unknown GPU \"%.40s\"", path, s);
        return LOOM_OK;
    }
    snprintf(r->gpu, sizeof r->gpu, "%s", d->name);
    const int64_t big = 1 << 20;
    int64_t dp = 1;
    if ((st = loom_json_get_int(c, o, path, "num_gpus", false, 1, big, &r->num_gpus)) ||
        (st = loom_json_get_int(c, o, path, "tp", false, 1, big, &r->par.tp)) ||
        (st = loom_json_get_int(c, o, path, "pp", false, 1, big, &r->par.pp)) ||
        (st = loom_json_get_int(c, o, path, "ep", false, 1, big, &r->par.ep)) ||
        (st = loom_json_get_int(c, o, path, "dp", false, 1, big, &dp)))
        return st;
    /* mean lengths of a dataset run may be fractional: rounded */
    double isl = -1, osl = -1;
    if ((st = loom_json_get_num(c, o, path, "isl", false, 0, 1 << 24, &isl)) ||
        (st = loom_json_get_num(c, o, path, "osl", false, 0, 1 << 24, &osl)))
        return st;
    if (!(isl >= 1 && osl >= 1)) {
        snprintf(r->skip, sizeof r->skip, "%.64s: prompt or output length not stated", path);
        return LOOM_OK;
    }
    r->work.isl = (int64_t)(isl + 0.5);
    r->work.osl = (int64_t)(osl + 0.5);
    r->par.replicas = dp;
    s = NULL;
    if ((st = loom_json_get_str(c, o, path, "weights", false, &s))) return st;
    if (s) {
        if (!strncasecmp(s, "fp8", 3)) r->par.weights = LOOM_WEIGHTS_FP8;
        else if (!strncasecmp(s, "mxfp4", 5)) r->par.weights = LOOM_WEIGHTS_MXFP4;
        else if (!strncasecmp(s, "nvfp4", 5) || !strncasecmp(s, "fp4", 3))
            r->par.weights = LOOM_WEIGHTS_NVFP4;
        else if (!strncasecmp(s, "int4", 4) || strstr(s, "awq") || strstr(s, "gptq"))
            r->par.weights = LOOM_WEIGHTS_INT4;
        else if (!strncasecmp(s, "bf16", 4) || !strncasecmp(s, "fp16", 4)) r->par.weights = LOOM_WEIGHTS_BF16;
        else {
            snprintf(r->skip, sizeof r->skip, "%.64s: weights \"%.40s\" not modelled", path, s);
            return LOOM_OK;
        }
    }
    s = NULL;
    if ((st = loom_json_get_str(c, o, path, "kv_dtype", false, &s))) return st;
    /* a dtype the source does not state ("not stated ...", "unknown ...")
     * is the deployment's default */
    if (s && (!strncasecmp(s, "not stated", 10) || !strncasecmp(s, "unknown", 7))) s = NULL;
    r->par.kv_dtype = s ? (strncasecmp(s, "fp8", 3) == 0 ? LOOM_DTYPE_FP8 : LOOM_DTYPE_BF16)
                        : loom_serve_default_kv_dtype(r->par.weights,
                                                      r->frontend == LOOM_FRONTEND_NIM);
    s = NULL;
    if ((st = loom_json_get_str(c, o, path, "frontend", false, &s))) return st;
    if (s) {
        if (!strcmp(s, "none")) r->frontend = LOOM_FRONTEND_NONE;
        else if (strcmp(s, "openai-server"))
            return loom_json_fail(c, path, "field \"frontend\": expected \"none\" (the harness "
                                  "calls the engine in-process) or \"openai-server\", found \"%.40s\"", s);
    }
    /* the benchmark client (engine.h loom_serve_client): genai-perf's
     * streams are read by perf_analyzer's C++ threads, AIPerf's by worker
     * processes; vllm bench serve, sglang bench_serving and their kin are
     * one Python asyncio process (the default) */
    s = NULL;
    if ((st = loom_json_get_str(c, o, path, "client", false, &s))) return st;
    if (s) {
        client_genai_perf = !strcmp(s, "genai-perf");
        if (!strcmp(s, "genai-perf") || !strcmp(s, "aiperf")) r->client = LOOM_CLIENT_PARALLEL;
        else if (strcmp(s, "python"))
            return loom_json_fail(c, path, "field \"client\": expected \"python\", \"genai-perf\" "
                                  "or \"aiperf\", found \"%.40s\"", s);
    }
    s = NULL;
    if ((st = loom_json_get_str(c, o, path, "length_distribution", false, &s))) return st;
    /* vLLM's and SGLang's "random" datasets default to a range ratio of 0
     * (fixed lengths; vLLM >= 0.10, sglang bench_serving --random-range-ratio
     * is stated when used); ShareGPT lengths are heavy-tailed (below) */
    if (s && strstr(s, "uniform")) {
        r->work.isl_dist = r->work.osl_dist = LOOM_LEN_UNIFORM;
        r->work.isl_spread = r->work.osl_spread = 0.5;
    } else if (s && (strstr(s, "sharegpt") || strstr(s, "lognormal"))) {
        r->work.isl_dist = r->work.osl_dist = LOOM_LEN_LOGNORMAL;
        /* ShareGPT (with the benchmarks' filter: prompt <= 1024, total <= 2048)
         * is heavy-tailed: median E2E of published runs puts the median
         * output near 0.6 of the mean, a log-normal of CV 1.3; with 0.8 the
         * accuracy benchmark's E2E medians were off by 52.5% leave-one-
         * source-out, with 1.3 by 23.2% */
        r->work.isl_spread = r->work.osl_spread = 1.3;
    }
    const cJSON *load = NULL;
    if ((st = loom_json_get_object(c, o, path, "load", true, &load))) return st;
    char lp[160];
    snprintf(lp, sizeof lp, "%s.load", path);
    if ((st = loom_json_get_str(c, load, lp, "kind", true, &s))) return st;
    double v = num_or(load, "value", 0);
    r->work.num_requests = (int64_t)num_or(load, "num_requests", 0);
    if (!strcmp(s, "qps")) {
        r->work.load = LOOM_LOAD_QPS;
        r->work.rate = v;
        if (!(v > 0)) return loom_json_fail(c, lp, "field \"value\": a qps load needs a rate > 0");
    } else if (!strcmp(s, "concurrency")) {
        r->work.load = LOOM_LOAD_CONCURRENCY;
        r->work.concurrency = (int64_t)v;
        if (v < 1) return loom_json_fail(c, lp, "field \"value\": a concurrency >= 1");
    } else if (!strcmp(s, "offline") || !strcmp(s, "batch")) {
        r->work.load = LOOM_LOAD_OFFLINE;
        if (!strcmp(s, "batch") && v >= 1) r->work.num_requests = (int64_t)v;
    } else
        return loom_json_fail(c, lp, "field \"kind\": expected qps, concurrency, offline or "
                              "batch, found \"%s\"", s);
    /* What a genai-perf concurrency run measures when its record states no
     * request count: genai-perf's default, max(10, 2 · concurrency)
     * requests (genai_perf/config/generate/perf_analyzer_config.py
     * _calculate_request_count, config_defaults.py REQUEST_COUNT 10), sent
     * from a cold start (no warm-up requests) and all of them measured
     * (perf_analyzer's inference_profiler.cc: with a request count it takes
     * one window, clamped to the first request's start and the last one's
     * end). The N clients start together, so the first N requests' TTFT
     * carries the start's queue in front of the prefill: on the DLI
     * course's NIM sweeps the published TTFT grows with N as that first
     * round does (A100 70B TP 4, 200 tokens in: 0.38 s at 10 clients,
     * 2.7 s at 100, 6.3 s at 250). genai-perf releases before 2025 measured
     * three time windows from the start instead (10 s each by default; the
     * DLI course's own exports show them), and AWS's sweeps state a 50 s
     * window: loom does not model time windows and gives those runs the
     * same population. */
    if (client_genai_perf && r->work.load == LOOM_LOAD_CONCURRENCY && r->work.num_requests <= 0)
        r->work.num_requests = 2 * r->work.concurrency > 10 ? 2 * r->work.concurrency : 10;
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(o, "engine_settings");
    if (cJSON_IsObject(es)) {
        r->max_num_seqs = (int64_t)num_or(es, "max_num_seqs", num_or(es, "max_running_requests",
                                          num_or(es, "max_batch_size", 0)));
        r->max_batched_tokens = (int64_t)num_or(es, "max_num_batched_tokens",
                                                num_or(es, "chunked_prefill_size",
                                                       num_or(es, "max_num_tokens", 0)));
        r->mem_fraction = num_or(es, "gpu_memory_utilization",
                                 num_or(es, "mem_fraction_static",
                                        num_or(es, "free_gpu_memory_fraction", 0)));
        const cJSON *dpa = cJSON_GetObjectItemCaseSensitive(es, "enable_dp_attention");
        r->dp_attention = cJSON_IsTrue(dpa);
    }
    const cJSON *met = NULL;
    if ((st = loom_json_get_object(c, o, path, "metrics", true, &met))) return st;
    int have = 0;
    for (int k = 0; k < LOOM_SM_COUNT; k++) {
        r->measured[k] = num_or(met, keys[k], -1);
        if (!(r->measured[k] > 0)) r->measured[k] = -1;
        else have++;
    }
    /* a harness that gathers queries into batches before the engine
     * schedules them (AMD's MLPerf harness, --enable-batcher) runs its own
     * policy, which loom does not model: such a run says so and is kept
     * out, like an engine without a policy */
    if (es && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(es, "harness_batcher"))) {
        snprintf(r->skip, sizeof r->skip, "%.64s: a harness batches the queries before the "
                 "engine (its own policy, not the engine's)", path);
        return LOOM_OK;
    }
    /* the overlap scheduler (engine.h overlap_host), as the run's launch line
     * set it: engine_settings "async_scheduling" (vLLM --async-scheduling),
     * "overlap_schedule": false (SGLang --disable-overlap-schedule) */
    if (es && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(es, "overlap_schedule")))
        r->overlap_off = true;
    if (es && r->engine == LOOM_ENGINE_VLLM &&
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(es, "async_scheduling")))
        r->overlap_on = true;
    /* TensorRT-LLM prices prompts whole unless the run enables context
     * chunking: enable_chunked_context (the C++ executor's name, as MLPerf's
     * harness sets it with budgets below its longest prompt) or
     * enable_chunked_prefill / chunked_prefill (trtllm-serve's
     * --enable_chunked_prefill, the LLM API's name) */
    if (es && r->engine == LOOM_ENGINE_TRTLLM &&
        (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(es, "enable_chunked_context")) ||
         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(es, "enable_chunked_prefill")) ||
         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(es, "chunked_prefill"))))
        r->chunked_context = true;
    /* vLLM's multi-step scheduling (--num-scheduler-steps k, v0.6): engine.h */
    if (es) {
        double k = num_or(es, "num_scheduler_steps", 1);
        r->scheduler_steps = k >= 1 && k <= 1024 ? (int32_t)k : 1;
        r->max_model_len = (int64_t)num_or(es, "max_model_len", 0);
    }
    if (!have) snprintf(r->skip, sizeof r->skip, "%.64s: no metric loom predicts", path);
    const cJSON *dpa = es ? cJSON_GetObjectItemCaseSensitive(es, "dp_attention") : NULL;
    if (cJSON_IsTrue(dpa)) r->dp_attention = true;
    return LOOM_OK;
}

loom_status loom_serve_records_load(const char *path, loom_serve_record **out, size_t *n,
                                    loom_error *err)
{
    *out = NULL;
    *n = 0;
    cJSON *root = NULL;
    loom_status s = loom_json_parse_file(path, &root, err);
    if (s) return s;
    loom_jctx c = {path, err};
    const cJSON *arr = root;
    const char *base = "$";
    if (cJSON_IsObject(root)) {
        if ((s = loom_json_get_array(&c, root, "$", "records", true, &arr))) goto done;
        base = "$.records";
    } else if (!cJSON_IsArray(root)) {
        s = loom_json_fail(&c, "$", "expected an object with \"records\" or an array");
        goto done;
    }
    int cnt = cJSON_GetArraySize(arr);
    loom_serve_record *r = calloc((size_t)(cnt > 0 ? cnt : 1), sizeof *r);
    if (!r) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    int i = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        char p[96];
        snprintf(p, sizeof p, "%s[%d]", base, i);
        if ((s = one(&c, o, p, &r[i]))) {
            free(r);
            goto done;
        }
        r[i].index = i;
        i++;
    }
    *out = r;
    *n = (size_t)i;
done:
    cJSON_Delete(root);
    return s;
}
