/*
 * engine.c — the engines' documented defaults (engine.h).
 *
 * Sources, by engine (the versions the published runs of
 * examples/calibration/serving-runs.json used, 2024–2025):
 *
 * vLLM V1 (vllm/engine/arg_utils.py, EngineArgs._set_default_args_v1,
 * v0.8–v0.10): on a GPU with >= 70 GiB that is not an A100 (H100, H200,
 * B200, MI300) `vllm serve` defaults to max_num_seqs 1024 and
 * max_num_batched_tokens 8192; otherwise 256 and 2048. block_size 16,
 * gpu_memory_utilization 0.9 (vllm/config.py CacheConfig). Chunked prefill
 * is always on in V1 and a chunk rides with the decodes. CUDA graphs are
 * captured for batch sizes 1, 2, 4 and 8..512 step 8 (CompilationConfig,
 * max_capture_size 512: 67 graphs).
 *
 * SGLang (python/sglang/srt/server_args.py, v0.4.x): chunked_prefill_size
 * 8192 (2048 on GPUs under 25 GB); mem_fraction_static 0.88 at tp 1, 0.87 at
 * tp >= 2, 0.85 at tp >= 4, 0.81 at tp >= 8, 0.79 at tp >= 16; page_size 1;
 * cuda_graph_max_bs 160; the request pool holds at most 4096 requests
 * (model_runner.py: max_num_reqs clamped to [2048, 4096]); a new request's
 * future decode tokens are reserved at new_token_ratio, which starts at 0.7
 * and decays to its floor 0.14 (SGLANG_INIT_NEW_TOKEN_RATIO,
 * min_new_token_ratio = 0.14) — under sustained load the floor governs.
 * Prefill batches do not carry decodes unless --enable-mixed-chunk.
 *
 * TensorRT-LLM (tensorrt_llm/llmapi/llm_args.py, trtllm-serve, PyTorch
 * backend, v0.19–1.0): max_batch_size 2048, max_num_tokens 8192,
 * KvCacheConfig.free_gpu_memory_fraction 0.9 of the memory free after the
 * model is loaded, tokens_per_block 32, capacity scheduler
 * GUARANTEED_NO_EVICT (a request is admitted when its prompt and its whole
 * maximum output fit), enable_chunked_prefill false, CUDA graphs for batch
 * sizes up to 128 (cuda_graph_config). That is the PyTorch backend, the
 * default since 1.0 and what `--engine trtllm` models; releases before
 * 1.0, NIM 1.x and NVIDIA's MLPerf harnesses run built TensorRT engines
 * from the C++ executor instead (compiled_runtime: no eager launch cost,
 * the C++ per-sequence cost), which the serving records mark by version.
 *
 * vLLM V0 multi-step scheduling (v0.6.0, vllm/engine/arg_utils.py and
 * vllm/core/scheduler.py; removed with V0): --num-scheduler-steps k makes a
 * decode-only batch k forward passes long, scheduled and prepared on the
 * host once (later steps advance the inputs on the GPU), with k tokens per
 * streamed chunk; prefills are scheduled first and run as one step of their
 * own. 0.6.0 refuses it with chunked prefill, and V0 enables chunked prefill
 * by itself only past a 32K context, so prompts are whole.
 */
#include "costs/serve/engine.h"

#include <string.h>
#include <strings.h>

static const char *const names[] = {
#define LOOM_X(n, s) s,
    LOOM_ENGINE_LIST(LOOM_X)
#undef LOOM_X
};
_Static_assert(sizeof names / sizeof names[0] == LOOM_ENGINE_COUNT, "engine name table");

const char *loom_engine_name(loom_engine_kind k)
{
    return (unsigned)k < LOOM_ENGINE_COUNT ? names[k] : "?";
}

const char *loom_serve_frontend_name(loom_serve_frontend f)
{
    return f == LOOM_FRONTEND_NIM ? "nim" : f == LOOM_FRONTEND_NONE ? "none" : "server";
}

const char *loom_serve_client_name(loom_serve_client c)
{
    return c == LOOM_CLIENT_PARALLEL ? "parallel" : c == LOOM_CLIENT_USERS ? "users" : "python";
}

bool loom_engine_parse(const char *s, loom_engine_kind *out)
{
    for (int k = 0; k < LOOM_ENGINE_COUNT; k++)
        if (strcasecmp(s, names[k]) == 0) {
            *out = (loom_engine_kind)k;
            return true;
        }
    if (strcasecmp(s, "tensorrt-llm") == 0 || strcasecmp(s, "trt-llm") == 0) {
        *out = LOOM_ENGINE_TRTLLM;
        return true;
    }
    return false;
}

void loom_serve_engine_defaults(loom_engine_kind k, const loom_device *d, int64_t tp,
                                loom_serve_engine *out)
{
    const double gib = (double)((int64_t)1 << 30);
    double mem = d ? (double)d->hbm_bytes : 80 * gib;
    bool big = mem >= 70 * gib && !(d && strstr(d->name, "A100"));
    memset(out, 0, sizeof *out);
    out->kind = k;
    switch (k) {
    case LOOM_ENGINE_SGLANG:
        out->max_num_seqs = 4096;
        out->max_batched_tokens = mem < 25e9 ? 2048 : 8192;
        out->block_size = 1;
        out->mem_fraction = tp >= 16 ? 0.79 : tp >= 8 ? 0.81 : tp >= 4 ? 0.85 : tp >= 2 ? 0.87 : 0.88;
        out->chunked_prefill = true;
        out->mixed_batches = false;
        out->decode_reserve_ratio = 0.14;
        out->cuda_graph_max_bs = 160;
        out->overlap_host = true;
        out->cuda_graph_count = 23;   /* 1, 2, 4, 8, 16, 24, …, 160 */
        break;
    case LOOM_ENGINE_TRTLLM:
        out->max_num_seqs = 2048;
        out->max_batched_tokens = 8192;
        out->block_size = 32;
        out->mem_fraction = 0.9;
        out->mem_fraction_of_free = true;
        out->chunked_prefill = false;
        out->mixed_batches = true;
        out->reserve_full_output = true;
        out->cuda_graph_max_bs = 128;
        out->cuda_graph_count = 19;
        out->overlap_host = true;
        break;
    case LOOM_ENGINE_VLLM:
    default:
        out->kind = LOOM_ENGINE_VLLM;
        out->max_num_seqs = big ? 1024 : 256;
        out->max_batched_tokens = big ? 8192 : 2048;
        out->block_size = 16;
        out->mem_fraction = 0.9;
        out->chunked_prefill = true;
        out->mixed_batches = true;
        out->cuda_graph_max_bs = 512;
        out->cuda_graph_count = 67;
        break;
    }
}

void loom_serve_engine_multi_step(loom_serve_engine *e, int32_t k, int64_t max_model_len)
{
    e->scheduler_steps = k;
    if (k <= 1) return;
    e->v0_loop = true;   /* multi-step scheduling exists only in V0 */
    e->chunked_prefill = false;
    e->mixed_batches = false;
    e->max_num_seqs = 256;   /* V0's default on every GPU */
    if (max_model_len > 0) e->max_batched_tokens = max_model_len > 2048 ? max_model_len : 2048;
}

loom_status loom_serve_engine_validate(const loom_serve_engine *e, loom_error *err)
{
    if ((unsigned)e->kind >= LOOM_ENGINE_COUNT)
        return loom_error_set(err, LOOM_ERR_INVALID, "engine: unknown kind %d", (int)e->kind);
    const struct { const char *name; int64_t v, lo, hi; } ints[] = {
        {"max_num_seqs", e->max_num_seqs, 1, (int64_t)1 << 24},
        {"max_batched_tokens", e->max_batched_tokens, 1, (int64_t)1 << 26},
        {"block_size", e->block_size, 1, 1 << 16},
        {"cuda_graph_max_bs", e->cuda_graph_max_bs, 0, (int64_t)1 << 24},
        {"scheduler_steps", e->scheduler_steps, 0, 1024},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].v < ints[i].lo || ints[i].v > ints[i].hi)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "%s engine: %s: expected an integer in [%lld, %lld], found %lld",
                                  loom_engine_name(e->kind), ints[i].name, (long long)ints[i].lo,
                                  (long long)ints[i].hi, (long long)ints[i].v);
    if (!(e->mem_fraction > 0 && e->mem_fraction <= 1))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "%s engine: memory fraction: expected a number in (0, 1], found %g",
                              loom_engine_name(e->kind), e->mem_fraction);
    if (!(e->decode_reserve_ratio >= 0 && e->decode_reserve_ratio <= 1))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "%s engine: decode reserve ratio: expected [0, 1], found %g",
                              loom_engine_name(e->kind), e->decode_reserve_ratio);
    return LOOM_OK;
}

loom_status loom_serve_engine_check_prompt(const loom_serve_engine *e, int64_t prompt,
                                           loom_error *err)
{
    if (e->chunked_prefill || prompt <= e->max_batched_tokens) return LOOM_OK;
    const char *chunk = e->kind == LOOM_ENGINE_TRTLLM ? " or chunk them (--chunked-context)" : "";
    return loom_error_set(err, LOOM_ERR_INVALID,
                          "a prompt of %lld tokens exceeds the %s engine's token budget of %lld "
                          "and prompts are not chunked: raise the budget (--max-batched-tokens)%s",
                          (long long)prompt, loom_engine_name(e->kind),
                          (long long)e->max_batched_tokens, chunk);
}
