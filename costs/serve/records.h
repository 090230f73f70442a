/*
 * records.h — published serving measurements (the
 * examples/calibration/serving-runs.json format), for the serving fit and
 * the accuracy benchmark (bench/serve_accuracy.sh).
 *
 *   { "records": [ { "source": "...", "source_id": "...", "engine": "vllm",
 *       "engine_version": "0.6.3", "model": "...", "hf_id": "meta-llama/...",
 *       "gpu": "H100-SXM5-80GB", "num_gpus": 8, "tp": 8, "pp": 1, "ep": 1,
 *       "dp": 1, "weights": "bf16", "kv_dtype": "bf16", "isl": 1024,
 *       "osl": 128, "length_distribution": "fixed",
 *       "load": {"kind": "qps", "value": 4, "num_requests": 1000},
 *       "metrics": {"ttft_mean_s": …, "ttft_p50_s": …, "ttft_p99_s": …,
 *                   "tpot_mean_s": …, "itl_mean_s": …, "itl_p99_s": …,
 *                   "e2e_mean_s": …, "output_tokens_per_s": …,
 *                   "requests_per_s": …},
 *       "frontend": "none",   (optional: no API server or streaming client)
 *       "trt_engine": true,   (optional: TensorRT-LLM on a built engine; else
 *                              versions before 1.0 and NIM are)
 *       "engine_settings": {…}, "notes": "…", "confidence": "…" } ] }
 * engine_settings loom reads: max_num_seqs / max_running_requests /
 * max_batch_size, max_num_batched_tokens / chunked_prefill_size /
 * max_num_tokens, the memory fraction, enable_dp_attention,
 * async_scheduling, overlap_schedule, num_scheduler_steps, max_model_len,
 * harness_batcher, and for TensorRT-LLM enable_chunked_context (or
 * trtllm-serve's enable_chunked_prefill, also as chunked_prefill).
 * (a bare array of records is accepted too). Metrics may be null or
 * absent: a record is used for the metrics it has. Load kind "batch" is a
 * static batch of `value` requests sent at once (offline). Fields loom does
 * not use are ignored.
 *
 * Units: seconds, tokens/s, requests/s.
 */
#ifndef LOOM_SERVE_RECORDS_H
#define LOOM_SERVE_RECORDS_H

#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "costs/serve/engine.h"
#include "costs/serve/shape.h"
#include "costs/serve/workload.h"

#define LOOM_SERVE_METRIC_LIST(X)                  \
    X(TTFT, "ttft_mean_s", "TTFT")                 \
    X(TTFT_P99, "ttft_p99_s", "TTFT p99")          \
    X(TPOT, "tpot_mean_s", "TPOT")                 \
    X(ITL, "itl_mean_s", "ITL")                    \
    X(ITL_P99, "itl_p99_s", "ITL p99")             \
    X(E2E, "e2e_mean_s", "E2E")                    \
    X(OUT_TPS, "output_tokens_per_s", "output tok/s") \
    X(RPS, "requests_per_s", "requests/s")         \
    X(TTFT_P50, "ttft_p50_s", "TTFT p50")          \
    X(TPOT_P50, "tpot_p50_s", "TPOT p50")          \
    X(ITL_P50, "itl_p50_s", "ITL p50")             \
    X(E2E_P50, "e2e_p50_s", "E2E p50")

typedef enum {
#define LOOM_X(n, key, label) LOOM_SM_##n,
    LOOM_SERVE_METRIC_LIST(LOOM_X)
#undef LOOM_X
    LOOM_SM_COUNT
} loom_serve_metric;

const char *loom_serve_metric_key(loom_serve_metric m);     /* "ttft_mean_s" */
const char *loom_serve_metric_label(loom_serve_metric m);   /* "TTFT" */
/* The metric's value in a metrics struct. */
double loom_serve_metric_of(const loom_serve_metrics *m, loom_serve_metric k);

typedef struct {
    char source[96], source_id[96], model[96], hf_id[128], gpu[48];
    loom_engine_kind engine;
    int64_t num_gpus;
    loom_serve_parallel par;      /* tp, pp, ep; dp → attention DP (MoE) or replicas */
    bool dp_attention;            /* engine_settings say attention DP */
    bool compiled_runtime;        /* TensorRT-LLM before 1.0, NIM, MLPerf: engine.h */
    loom_serve_frontend frontend; /* "frontend": "none" (the harness calls the engine
                                     in-process: MLPerf LoadGen, trtllm-bench); engine
                                     "nvidia-nim": NIM's server; else the engine's own */
    loom_serve_client client;     /* "client": "genai-perf" or "aiperf" (PARALLEL); absent or
                                     "python": one Python process reads the streams */
    loom_serve_workload work;
    int64_t max_num_seqs, max_batched_tokens;   /* engine_settings (0 = default) */
    bool overlap_off;             /* no overlap scheduler: SGLang < 0.4 or its launch line's
                                     --disable-overlap-schedule */
    bool overlap_on;              /* vLLM's launch line asks for --async-scheduling */
    bool chunked_context;         /* TensorRT-LLM's enable_chunked_context: prompts longer
                                     than the token budget are split (engine.h chunked_prefill) */
    bool vllm_v0;                 /* vLLM before 0.8: the V0 engine loop (engine.h v0_loop) */
    int32_t scheduler_steps;      /* engine_settings num_scheduler_steps (vLLM V0 multi-step) */
    int64_t max_model_len;        /* engine_settings max_model_len (0 = not stated) */
    double mem_fraction;
    double measured[LOOM_SM_COUNT];   /* < 0 = not measured */
    int64_t index;                /* position in the file's records */
    char skip[320];               /* why loom cannot predict the record ("" = it can) */
} loom_serve_record;

/* Reads a records file; *out (free()) holds *n records. A record loom
 * cannot predict — an engine it has no policy for (LMDeploy), lengths not
 * stated, no metric — is kept with `skip` saying why (naming its JSON
 * path); a field of the wrong type is an error naming the file and path.
 * NVIDIA NIM runs TensorRT-LLM and is read as it. */
loom_status loom_serve_records_load(const char *path, loom_serve_record **out, size_t *n,
                                    loom_error *err);

#endif
