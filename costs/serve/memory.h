/*
 * memory.h — memory of one GPU of a serving instance and the KV capacity it
 * leaves (docs/design.md §11 "Memory").
 *
 *   weights      the stage's shard at stored bytes (shape.h)
 *   activations  the workspace of the largest iteration: max_batched_tokens
 *                tokens through the largest layer, the logits of every
 *                running sequence (fp32, vocab / tp), the sampler's copy
 *   cuda graphs  captured decode graphs (≈ 16 MiB each: vLLM logs 0.5–1.5
 *                GiB for its 67)
 *   comm         NCCL and custom all-reduce buffers (≈ 0.5 GiB when tp > 1)
 *   context      CUDA context, cuBLAS workspaces, allocator slack (≈ 1 GiB)
 *   KV           what the engine's memory fraction leaves:
 *       vLLM     gpu_memory_utilization · HBM − weights − peak activations
 *                − non-torch memory (context, comm) — CUDA graphs are
 *                captured after the KV cache, outside the budget (worker
 *                determine_available_memory, v0.8–0.10);
 *       SGLang   mem_fraction_static · HBM − weights (activations and graphs
 *                live in the remaining 1 − fraction);
 *       TRT-LLM  free_gpu_memory_fraction · (HBM − weights − context −
 *                comm − activations − graphs).
 * The capacity in tokens is KV bytes / KV bytes per token, rounded down to
 * whole blocks, times the attention-DP ranks (each holds its own
 * sequences); max concurrency is capacity / (prompt + output), as vLLM
 * logs it, capped by max_num_seqs.
 *
 * Units: bytes, tokens, sequences.
 */
#ifndef LOOM_SERVE_MEMORY_H
#define LOOM_SERVE_MEMORY_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "costs/device.h"
#include "costs/serve/engine.h"
#include "costs/serve/shape.h"

#define LOOM_SERVE_CONTEXT_BYTES ((int64_t)1 << 30)
#define LOOM_SERVE_COMM_BYTES ((int64_t)1 << 29)
#define LOOM_SERVE_GRAPH_BYTES ((int64_t)16 << 20)

typedef struct {
    int64_t capacity_bytes;      /* the GPU's HBM */
    int64_t weights_bytes;
    int64_t activation_bytes;
    int64_t cuda_graph_bytes;
    int64_t comm_bytes;
    int64_t context_bytes;
    int64_t kv_bytes;            /* the KV pool, per GPU */
    int64_t total_bytes;         /* all of the above */
    double kv_bytes_per_token;   /* per GPU, the stage's layers */
    int64_t kv_capacity_tokens;  /* per instance */
    int64_t max_concurrency;     /* sequences of prompt + output tokens that fit at once */
    bool fits;                   /* weights and workspace leave room for at least one request */
} loom_serve_memory;

/* Memory of a GPU of the instance shaped s under engine e on device d, for
 * requests of up to seq_tokens (prompt + output). Fails only on invalid
 * arguments; an instance that does not fit is reported by fits = false. */
loom_status loom_serve_memory_compute(const loom_serve_shape *s, const loom_serve_engine *e,
                                      const loom_device *d, int64_t seq_tokens,
                                      loom_serve_memory *out, loom_error *err);

#endif
