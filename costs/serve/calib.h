/*
 * calib.h — serving efficiencies: how close one engine instance gets to the
 * roofline, fitted separately from the training calibration
 * (costs/calib.h; docs/design.md §11). A decode step streams weights and KV
 * through HBM in large GEMVs and paged-attention kernels, a training step is
 * big GEMMs: the memory efficiency of one says little about the other.
 *
 * What each parameter stands for, and its prior (calib.c gives the basis):
 *   decode_mem_eff     fraction of HBM bandwidth reached by memory-bound
 *                      kernels (weight GEMVs, paged KV reads)
 *   gemm_eff           fraction of tensor-core peak of large GEMMs (prefill)
 *   attn_eff           fraction of tensor-core peak of prefill flash attention
 *   ar_latency_s       fixed time of one small all-reduce (custom one-shot /
 *                      NCCL LL), added to its bandwidth term
 *   kernel_gap_s       per kernel inside a CUDA graph (launch + tail)
 *   eager_gap_s        extra per kernel outside a CUDA graph (prefill and
 *                      mixed iterations, decode batches above the captured sizes)
 *   iter_<engine>_s    CPU time per iteration that the GPU waits for
 *                      (scheduling, input preparation, sampling hand-off);
 *                      iter_vllm_s is vLLM's V1 engine core (0.8 on),
 *                      iter_vllm_v0_s its V0 loop (engine.h v0_loop)
 *   seq_overhead_s     per running sequence per iteration (sampler,
 *                      detokeniser, streaming the token out) in an engine
 *                      loop written in Python (vLLM, SGLang, TensorRT-LLM's
 *                      PyTorch backend)
 *   seq_compiled_s     the same in TensorRT-LLM's C++ executor running a
 *                      built engine (engine.h compiled_runtime)
 *   seq_nim_s          added to it behind NIM's server, whose Python process
 *                      drives the executor and takes every running
 *                      sequence's token off it each iteration (MLPerf's and
 *                      trtllm-bench's C++ harnesses do not)
 *   request_overhead_s per request in the API server, one at a time
 *                      (HTTP, tokenisation, admission and teardown): the
 *                      front end is a serial queue in front of the engine
 *   stream_token_s     per streamed output token, one at a time: the
 *                      server's detokenisation and SSE chunk (one Python
 *                      process); a serial queue behind the engine that
 *                      caps the observed output rate at 1 / stream_token_s
 *   client_chunk_s     per streamed chunk in a benchmark client that is one
 *                      Python asyncio process (engine.h LOOM_CLIENT_PYTHON:
 *                      aiohttp's read of the SSE line, json.loads, the
 *                      timestamp): a second serial queue behind the
 *                      server's, in another process, so the two add to a
 *                      token's latency but the slower alone caps the rate
 *   latency_<engine>_s per request, not queued: the HTTP round trip, the
 *                      front end's tokeniser call and its hop to the engine
 *                      and back (vLLM's and SGLang's Python API servers and
 *                      ZMQ hops; trtllm-serve's Python server; NIM's
 *                      server in front of TensorRT-LLM: latency_nim_s);
 *                      added to TTFT and E2E, not to throughput
 * The front-end terms (request_overhead_s, stream_token_s,
 * client_chunk_s, latency_<engine>_s) belong to an OpenAI-compatible server and a streaming
 * benchmark client; a run whose harness calls the engine in-process with
 * token ids (MLPerf's LoadGen harnesses, trtllm-bench) has none of them
 * (LOOM_FRONTEND_NONE).
 *
 * Units: fractions in (0, 1]; seconds.
 */
#ifndef LOOM_SERVE_CALIB_H
#define LOOM_SERVE_CALIB_H

#include "base/error.h"
#include "costs/device.h"
#include "costs/serve/engine.h"

#define LOOM_SERVE_CALIB_FORMAT "loom-serve-calib/1"


/* X(name, lo, hi): every field with its fit bounds, in file order. A field
 * with lo == hi is measured, not fitted: gemm_eff and attn_eff are the
 * kernels' own efficiencies timed on an H100, decode_mem_eff and
 * kernel_gap_s those of decode GEMVs replayed from CUDA graphs on an H200
 * (calib.c), so that the fit's freedom goes to the overheads the roofline
 * does not see. */
#define LOOM_SERVE_CALIB_FIELDS(X)      \
    X(decode_mem_eff, 0.89, 0.89)       \
    X(gemm_eff, 0.70, 0.70)             \
    X(attn_eff, 0.63, 0.63)             \
    X(ar_latency_s, 3e-6, 25e-6)        \
    X(kernel_gap_s, 2.8e-6, 2.8e-6)     \
    X(eager_gap_s, 5e-6, 20e-6)         \
    X(iter_vllm_s, 0.0, 20e-3)          \
    X(iter_vllm_v0_s, 0.0, 20e-3)       \
    X(iter_sglang_s, 0.0, 20e-3)        \
    X(iter_trtllm_s, 0.0, 20e-3)        \
    X(iter_compiled_s, 0.0, 20e-3)      \
    X(seq_overhead_s, 0.0, 100e-6)     \
    X(seq_compiled_s, 0.0, 200e-6)     \
    X(seq_nim_s, 0.0, 200e-6)          \
    X(request_overhead_s, 0.0, 4e-3)    \
    X(stream_token_s, 0.0, 2e-3)        \
    X(client_chunk_s, 0.0, 2e-3)        \
    X(latency_vllm_s, 0.0, 0.2)         \
    X(latency_sglang_s, 0.0, 0.2)       \
    X(latency_trtllm_s, 0.0, 0.2)       \
    X(latency_nim_s, 0.0, 0.03)

typedef struct {
    char device[48];   /* "" = any */
    char note[160];    /* provenance */
#define LOOM_X(name, lo, hi) double name;
    LOOM_SERVE_CALIB_FIELDS(LOOM_X)
#undef LOOM_X
} loom_serve_calib;

#define LOOM_SERVE_CALIB_NFIELDS 21

/* The shipped values (examples/calibration/serving-calib.json, the fit of
 * examples/calibration/serving-runs.json, compiled in), one row for every
 * device; d only names the device. */
void loom_serve_calib_default(const loom_device *d, loom_serve_calib *out);
/* The round-number prior the fit starts from and is pulled towards. */
void loom_serve_calib_prior(const loom_device *d, loom_serve_calib *out);

/* The per-iteration overhead of engine e (its kind, and for vLLM its
 * engine loop); the per-request latency of front end f in front of engine k. */
double loom_serve_calib_iter_s(const loom_serve_calib *c, const loom_serve_engine *e);
double loom_serve_calib_latency_s(const loom_serve_calib *c, loom_engine_kind k,
                                  loom_serve_frontend f);

/* Field access by index (file order), for the fitter and the JSON code. */
const char *loom_serve_calib_field_name(int i);
double *loom_serve_calib_field(loom_serve_calib *c, int i);
void loom_serve_calib_field_bounds(int i, double *lo, double *hi);

/* Every field inside its bounds; errors name it. */
loom_status loom_serve_calib_validate(const loom_serve_calib *c, loom_error *err);

/* "loom-serve-calib/1" files: absent fields keep the device's defaults. */
loom_status loom_serve_calib_load(const char *path, loom_serve_calib *out, loom_error *err);
loom_status loom_serve_calib_save(const char *path, const loom_serve_calib *c, loom_error *err);
/* The same as text (malloc'd, caller frees); NULL when out of memory. */
char *loom_serve_calib_json(const loom_serve_calib *c);

#endif
