/*
 * serve_space.h — the engine instances a serving deployment can be made of
 * (docs/design.md §12): every parallel shape of one instance that the
 * serving cost model (costs/serve/) can run on the cluster and that fits a
 * GPU's memory with room for at least one request in its KV cache.
 *
 * Shapes. tp divides the GPUs of a node (a tensor-parallel group never
 * leaves its NVLink domain) and the attention heads; pp ∈ {1, 2, 4, …}
 * up to the layers; MoE models add attention data parallelism (attn_dp ∈
 * {1, 2, 4, …}, each rank its own sequences, as SGLang's
 * --enable-dp-attention and vLLM's -dp run DeepSeek) and expert
 * parallelism over the tp · attn_dp GPUs of a stage (ep = 1 or all of
 * them). A stage's tp · attn_dp GPUs divide a node or fill whole nodes, so
 * that replicas pack the cluster without straddling nodes. Shapes the cost
 * model refuses (tp against the KV heads, ep against the experts) are
 * counted and skipped.
 *
 * Chunk size. With a long prompt in the running batch, every iteration
 * that carries one of its chunks is as long as the chunk takes, and the
 * decodes riding in it wait that long (Agrawal et al., Sarathi-Serve,
 * OSDI'24): a smaller token budget trades prefill efficiency (TTFT) for a
 * tighter TPOT. So an aggregated instance of vLLM or SGLang is also offered
 * with budgets of 512 … 4096 tokens below the engine's default (vLLM's
 * max_num_seqs is lowered to the budget with it, as vLLM requires).
 * Disaggregated pools keep the default: a prefill instance has no decodes
 * to protect and a decode instance no prefill to chunk. TensorRT-LLM does
 * not chunk by default and is offered as it is. Likewise every engine's
 * instance is offered with its running sequences capped at 32 … 256: a cap
 * holds the decode batch, and so the TPOT, where the SLO wants it and lets
 * the queue (TTFT) take the excess.
 *
 * Each surviving shape carries one serving model (costs/serve/step.h) of a
 * single instance: the search evaluates it at any load, and a deployment
 * of r replicas or of a pool is r such instances sharing the load.
 *
 * Units: GPUs, tokens.
 */
#ifndef LOOM_SERVE_SPACE_H
#define LOOM_SERVE_SPACE_H

#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/serve/step.h"
#include "graph/graph.h"

/* The parallel shape of one engine instance, its prefill chunk and its
 * sequence cap. */
typedef struct {
    int64_t tp, pp, ep, attn_dp;
    int64_t chunk;   /* tokens per iteration (vLLM max_num_batched_tokens, SGLang
                        chunked_prefill_size); 0 = the engine's default */
    int64_t seqs;    /* running sequences at most (vLLM max_num_seqs, SGLang
                        max_running_requests, TRT-LLM max_batch_size); 0 = default */
} loom_serve_inst;

/* What every instance of the search shares. */
typedef struct {
    const loom_graph *graph;              /* built for one token (seq 1, batch 1) */
    const loom_cluster *cluster;
    const loom_calib *calib;              /* NULL: the device's defaults */
    const loom_serve_calib *serve_calib;  /* NULL: the shipped serving calibration */
    loom_engine_kind engine;
    loom_serve_frontend frontend;         /* what serves the requests (engine.h) */
    loom_serve_client client;             /* what reads the streams (engine.h) */
    bool trt_engine;                      /* TensorRT-LLM on a built engine (engine.h) */
    loom_serve_weights weights;
    loom_dtype kv_dtype;
    int64_t seq_tokens;                   /* the longest request: prompt + output */
} loom_serve_space_opts;

/* One shape that fits, with its model (replicas 1). */
typedef struct {
    loom_serve_inst inst;
    int64_t gpus;               /* tp · attn_dp · pp */
    loom_serve_model *m;        /* owned by the space */
    bool agg_only;              /* a chunk or cap variant: aggregated deployments only */
} loom_serve_cand;

typedef struct {
    loom_serve_cand *cand;      /* owned: loom_serve_space_free */
    int32_t n;
    int32_t tried;              /* shapes enumerated */
    int32_t refused;            /* the cost model refused the shape (heads, experts) */
    int32_t no_fit;             /* weights and workspace leave no KV for one request */
} loom_serve_space;

/* Enumerates and builds the shapes of o. A space with no shape that fits
 * is returned with n = 0 (the caller says why, with refused/no_fit).
 * Errors: out of memory. */
loom_status loom_serve_space_build(const loom_serve_space_opts *o, loom_serve_space *out,
                                   loom_error *err);
void loom_serve_space_free(loom_serve_space *s);

/* The model of one instance of shape inst as `replicas` replicas that share
 * the load (the simulator splits a workload over them as loom eval does).
 * Errors: those of loom_serve_model_create. */
loom_status loom_serve_space_model(const loom_serve_space_opts *o, const loom_serve_inst *inst,
                                   int64_t replicas, loom_serve_model **out, loom_error *err);

/* "tp 4", "tp 8 × pp 2", "tp 1 × attention-dp 8, ep 8", "tp 4, chunk 1024",
 * "tp 4, seqs 64". */
void loom_serve_inst_label(const loom_serve_inst *i, char *buf, size_t n);

#endif
