/*
 * step.h — one engine instance and the time of one of its iterations
 * (docs/design.md §11 "Per-iteration cost of one instance").
 *
 * An iteration runs d decode tokens (one per running sequence, each reading
 * its whole KV cache) and p prefill tokens (prompt chunks) through every
 * layer. Per GPU, each GEMM class costs the roofline
 *     t = max(F / (peak · eff(F)), (W + a·n) / (hbm · decode_mem_eff))
 * with F its FLOPs for the n tokens (expert GEMMs: the tokens routed to this
 * GPU's experts, and W only for the experts some token touched:
 * E_local · (1 − (1 − k/E)^N) of them for N tokens, top-k of E); attention
 * is the prefill pairs at the flash-attention efficiency plus the decode
 * KV stream, each max(compute, memory); the rest streams bytes. Kernels cost
 * a gap each (smaller inside a CUDA graph). Collectives are the cost model's
 * (costs/collective.h) over the instance's groups with the serving
 * calibration's small-message latency: an all-reduce of [n, h] per TP
 * point, the EP all-to-all dispatch and combine, and for pp > 1 the p2p
 * hand-off. The engine adds its per-iteration CPU overhead and a
 * per-sequence one.
 *
 * Pipeline parallelism: vLLM and SGLang keep pp micro-batches in flight
 * (virtual engines), so a sequence advances one token per pass through
 * all stages while the GPUs work on the other micro-batches. The iteration
 * here is that pass for one micro-batch of 1/pp of the running batch; its
 * time is the sequence's inter-token interval, and pp of them run at once.
 * A sequence lives in one micro-batch (and one attention-DP rank): with
 * fewer sequences than pp · dp, each carries its whole share, so a lone
 * prompt's chunk is not spread over micro-batches it cannot be split into.
 * Each micro-batch is scheduled with its own token budget, so an
 * iteration of the simulator carries pp budgets, a sequence's chunk at
 * most one (sim.c iter_budget).
 *
 * Units: seconds.
 */
#ifndef LOOM_SERVE_STEP_H
#define LOOM_SERVE_STEP_H

#include <stdint.h>
#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/serve/calib.h"
#include "costs/serve/engine.h"
#include "costs/serve/memory.h"
#include "costs/serve/shape.h"
#include "graph/graph.h"

/* One iteration's work, for the whole instance (all attention-DP ranks). */
typedef struct {
    int64_t n_decode;        /* decoding sequences (one token each) */
    double decode_ctx;       /* Σ cached tokens of the decoding sequences */
    int64_t n_prefill;       /* prefill tokens */
    int64_t n_prefill_seqs;  /* requests those tokens belong to (0 = as many as needed to
                                fill every micro-batch) */
    double prefill_pairs;    /* Σ over chunks of q · (prefix + (q + 1) / 2): causal pairs */
    double prefill_prefix;   /* Σ over chunks of the prefix already cached */
    int64_t n_sampled;       /* sequences sampling a token (decodes + prompts completed) */
} loom_serve_batch;

/* Where an iteration's time goes; the fields add up to total_s. */
typedef struct {
    double gemm_s, attn_s, other_s, comm_s, overhead_s, total_s;
} loom_serve_iter;

typedef struct loom_serve_model loom_serve_model;

typedef struct {
    const loom_graph *graph;        /* built for one token (seq 1, batch 1), HF config */
    const loom_cluster *cluster;
    const loom_calib *calib;        /* training calibration: GEMM roll-off (NULL = defaults) */
    const loom_serve_calib *serve_calib;   /* NULL = loom_serve_calib_default of the GPU */
    loom_serve_parallel par;
    loom_serve_engine engine;
    int64_t seq_tokens;             /* longest request (prompt + output), for max concurrency */
    loom_serve_frontend frontend;   /* what serves the requests (calib.h) */
    loom_serve_client client;       /* what reads the stream (engine.h) */
} loom_serve_model_opts;

/* The per-request latency of the instance's front end (calib.h latency_*_s;
 * 0 without one). */
double loom_serve_model_latency_s(const loom_serve_model *m);
loom_serve_frontend loom_serve_model_frontend(const loom_serve_model *m);
loom_serve_client loom_serve_model_client(const loom_serve_model *m);

/* Builds the instance: its shape, its memory, the constants of its
 * iteration time. Errors name the option at fault (shape.h), a device
 * without the weights' tensor cores (fp8 before Hopper), or an instance with
 * more GPUs than the cluster. A model that does not fit is built (memory
 * fits = false): callers decide. */
loom_status loom_serve_model_create(const loom_serve_model_opts *o, loom_serve_model **out,
                                    loom_error *err);
void loom_serve_model_destroy(loom_serve_model *m);

const loom_serve_shape *loom_serve_model_shape(const loom_serve_model *m);
const loom_serve_memory *loom_serve_model_memory(const loom_serve_model *m);
const loom_serve_engine *loom_serve_model_engine(const loom_serve_model *m);
const loom_serve_calib *loom_serve_model_calib(const loom_serve_model *m);
const loom_cluster *loom_serve_model_cluster(const loom_serve_model *m);

/* Replaces the serving calibration (the fit re-costs one model under many
 * calibrations; shape and memory do not depend on it). */
void loom_serve_model_set_calib(loom_serve_model *m, const loom_serve_calib *c);

/* The token budget of an iteration: the engine's per micro-batch, once per
 * pipeline stage, since each of the pp micro-batches in flight is
 * scheduled with its own (TensorRT-LLM's and vLLM's virtual engines;
 * loom_serve_iter_time prices one micro-batch's pass). One sequence's
 * prompt chunk stays within one micro-batch's budget. */
int64_t loom_serve_iter_budget(const loom_serve_model *m);

/* Time of one iteration (bd may be NULL). Pure; safe to call from several
 * threads on one model. */
double loom_serve_iter_time(const loom_serve_model *m, const loom_serve_batch *b,
                            loom_serve_iter *bd);

/* Shorthands: a decode-only iteration of n sequences with mean context ctx;
 * a prefill-only iteration of one prompt of n tokens (no prefix). */
double loom_serve_decode_time(const loom_serve_model *m, int64_t n, double ctx);
double loom_serve_prefill_time(const loom_serve_model *m, int64_t n);

#endif
