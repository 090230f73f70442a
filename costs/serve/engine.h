/*
 * engine.h — the scheduling policy of one serving-engine instance (vLLM,
 * SGLang, TensorRT-LLM) as data: caps, token budget, KV paging, memory
 * fraction and how prefill and decode share an iteration (docs/design.md §11).
 *
 * All three run continuous (iteration-level) batching (Yu et al., Orca,
 * OSDI'22): every iteration carries one decode token of each running
 * sequence plus, up to a token budget, prefill tokens of waiting or
 * partially prefilled requests. They differ in
 *   - whether prompts are chunked (Sarathi-Serve, OSDI'24) and whether a
 *     prefill chunk rides in the same iteration as the decodes (vLLM V1:
 *     yes; SGLang: prefill batches alternate with decode batches unless
 *     --enable-mixed-chunk; TensorRT-LLM: context and generation requests
 *     share an iteration, context chunking off by default);
 *   - admission: vLLM admits when the prompt's KV blocks are free and
 *     preempts (recomputes) the newest sequence when a decode finds no
 *     block; SGLang reserves a share (new_token_ratio) of each running
 *     request's remaining output and retracts on overflow; TensorRT-LLM's
 *     GUARANTEED_NO_EVICT admits only when prompt + max output fit, so it
 *     never preempts;
 *   - the memory fraction: of the whole HBM (vLLM gpu_memory_utilization,
 *     SGLang mem_fraction_static) or of the memory left free after the
 *     weights (TensorRT-LLM kv_cache_config.free_gpu_memory_fraction).
 * Each default is cited in engine.c with the file it comes from.
 *
 * Units: tokens, sequences, fractions; seconds for overheads.
 */
#ifndef LOOM_SERVE_ENGINE_H
#define LOOM_SERVE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "costs/device.h"

#define LOOM_ENGINE_LIST(X)          \
    X(VLLM, "vllm")                  \
    X(SGLANG, "sglang")              \
    X(TRTLLM, "trtllm")

typedef enum {
#define LOOM_X(n, s) LOOM_ENGINE_##n,
    LOOM_ENGINE_LIST(LOOM_X)
#undef LOOM_X
    LOOM_ENGINE_COUNT
} loom_engine_kind;

/* What serves the requests: the engine's own OpenAI-compatible server
 * (vllm serve, SGLang's server, trtllm-serve), NVIDIA NIM's server in front
 * of TensorRT-LLM, or nothing (a harness that calls the engine in-process
 * with token ids: MLPerf LoadGen, trtllm-bench). */
typedef enum {
    LOOM_FRONTEND_ENGINE,
    LOOM_FRONTEND_NIM,
    LOOM_FRONTEND_NONE,
} loom_serve_frontend;

/* Who sends the requests and reads the streams: one Python process that
 * parses every streamed chunk of every request on one asyncio loop (vllm
 * bench serve, sglang bench_serving, benchmark_serving.py: the default), a
 * benchmark client that does not serialise them (genai-perf's C++
 * perf_analyzer, AIPerf's worker processes), or independent users. The
 * first is a serial queue behind the server's (calib.h client_chunk_s).
 * Both benchmark clients start their N clients together; users come and go
 * on their own, so under a concurrency load their first requests are
 * spread over one request's duration (sim.c says why it matters). */
typedef enum {
    LOOM_CLIENT_PYTHON,
    LOOM_CLIENT_PARALLEL,
    LOOM_CLIENT_USERS,
} loom_serve_client;

const char *loom_engine_name(loom_engine_kind k);
const char *loom_serve_client_name(loom_serve_client c);   /* "python", "parallel", "users" */
const char *loom_serve_frontend_name(loom_serve_frontend f);   /* "server", "nim", "none" */
bool loom_engine_parse(const char *s, loom_engine_kind *out);

typedef struct {
    loom_engine_kind kind;
    int64_t max_num_seqs;        /* running sequences at most (vLLM max_num_seqs, SGLang
                                    max_running_requests, TRT-LLM max_batch_size); 0 = KV-bound */
    int64_t max_batched_tokens;  /* tokens per iteration, decodes included (vLLM
                                    max_num_batched_tokens, SGLang chunked_prefill_size,
                                    TRT-LLM max_num_tokens) */
    int64_t block_size;          /* KV tokens per page (vLLM block_size, SGLang page_size,
                                    TRT-LLM tokens_per_block) */
    double mem_fraction;         /* share of HBM the engine may use, or of the memory
                                    free after weights when mem_fraction_of_free */
    bool mem_fraction_of_free;   /* TensorRT-LLM's free_gpu_memory_fraction semantics */
    bool chunked_prefill;        /* prompts longer than the budget are split */
    bool mixed_batches;          /* prefill chunks share iterations with decodes */
    bool reserve_full_output;    /* admission reserves prompt + whole output (no eviction) */
    double decode_reserve_ratio; /* share of the remaining output reserved at admission
                                    (SGLang new_token_ratio; 0 = the prompt only) */
    int64_t cuda_graph_max_bs;   /* decode batches up to this size replay a CUDA graph */
    int64_t cuda_graph_count;    /* graphs captured (memory, not time) */
    int32_t scheduler_steps;     /* vLLM V0 multi-step scheduling (--num-scheduler-steps k,
                                    v0.6-0.7): a decode-only batch runs k forward passes per
                                    scheduling, its host work paid once, and streams its k
                                    tokens as one chunk; a prefill runs alone, one step.
                                    0 or 1: every iteration is scheduled */
    bool overlap_host;           /* the host schedules and prepares iteration i+1 while the
                                    GPU runs iteration i (SGLang's overlap scheduler since
                                    v0.4, TensorRT-LLM's PyTorch backend): an iteration takes
                                    max(GPU, host), not their sum; vLLM V1 runs them in turn
                                    unless --async-scheduling */
    bool v0_loop;                /* vLLM's V0 engine (releases before 0.8, and any run with
                                    --num-scheduler-steps): scheduler, input preparation,
                                    sampler bookkeeping and output processing in one Python
                                    loop around each step (calib.h iter_vllm_v0_s); V1 (0.8
                                    on) keeps a persistent batch, prepares inputs in numpy
                                    and moves detokenising and streaming to the API-server
                                    process (iter_vllm_s) */
    bool compiled_runtime;       /* TensorRT-LLM executing a built TensorRT engine from its
                                    C++ executor (releases before 1.0, NIM 1.x, MLPerf
                                    harnesses): every kernel is launched from C++ ahead of
                                    the GPU, so no iteration pays eager per-kernel launch
                                    costs; 1.0's default PyTorch backend launches from
                                    Python outside its CUDA graphs, as vLLM and SGLang do */
} loom_serve_engine;

/* The engine's documented defaults on device d (some depend on its memory),
 * for a deployment of tp GPUs per model replica (SGLang's memory fraction
 * depends on it). */
void loom_serve_engine_defaults(loom_engine_kind k, const loom_device *d, int64_t tp,
                                loom_serve_engine *out);

/* vLLM V0 with --num-scheduler-steps k > 1 (v0.6.0 refuses it with chunked
 * prefill): V0's default policy comes with it — prompts whole, prefill
 * batches alone ahead of decodes, 256 sequences, a budget of
 * max(max_model_len, 2048) tokens (EngineArgs without chunked prefill). max_model_len <= 0: unknown,
 * the budget is left as it is. */
void loom_serve_engine_multi_step(loom_serve_engine *e, int32_t k, int64_t max_model_len);

/* Range checks; errors name the field ("max_num_seqs: expected >= 1, found 0"). */
loom_status loom_serve_engine_validate(const loom_serve_engine *e, loom_error *err);

/* Whether the engine can take a prompt of `prompt` tokens: without chunked
 * prefill a prompt runs whole in one iteration, so it must fit the token
 * budget (TensorRT-LLM without enable_chunked_context requires
 * max_num_tokens >= the longest input; vLLM V0 refuses a budget below
 * max_model_len). An error names the budget and the way out. */
loom_status loom_serve_engine_check_prompt(const loom_serve_engine *e, int64_t prompt,
                                           loom_error *err);

#endif
