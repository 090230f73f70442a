/*
 * eval.h — predicted step time, throughput, MFU and memory of one
 * Megatron-style configuration (`loom eval`; docs/design.md §1, §4). The model is
 * explained in eval.c.
 *
 * The graph must be built for ONE micro-batch: batch = p->mbs sequences of
 * p->seq tokens (loom_model_opts {seq, batch = mbs, dtype, flash}); every
 * time below is derived from it, scaled by the number of micro-batches.
 *
 * Model FLOPs count attention in full (non-causal), as Korthikanti et al.
 * 2022 (Eq. 7: 72·B·L·s·h²·(1 + s/6h + V/12hL) for GPT) and Megatron-LM's
 * num_floating_point_operations do: 3 × the graph's forward matmul FLOPs.
 * model_flops_causal halves the attention-score part instead.
 *
 * Units: seconds, FLOPs, bytes, tokens/s.
 */
#ifndef LOOM_EVAL_H
#define LOOM_EVAL_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/compute.h"
#include "costs/memory.h"
#include "costs/parallel.h"
#include "costs/pipeline.h"
#include "graph/graph.h"

/* Kinds of work a rank's micro-batch time is made of (loom eval --ops):
 * what a profiler's kernel summary would group together. The attention
 * core is the fused kernel or the unfused chain on the s×t scores
 * (recompute.h); expert GEMMs are the grouped GEMMs on routed tokens; MoE
 * routing is the router's top-k and the dispatch / combine kernels
 * (permute, sort, padding); communication is the exposed TP / CP / EP part;
 * the EP all-to-all overlap's saving is its own (negative) row. */
#define LOOM_EVAL_WORK_LIST(X)                                        \
    X(GEMM, "gemm", "GEMMs")                                          \
    X(EXPERT_GEMM, "expert_gemm", "expert GEMMs")                     \
    X(ATTENTION, "attention", "attention")                            \
    X(NORM, "norm", "norms")                                          \
    X(ELEMENTWISE, "elementwise", "element-wise")                     \
    X(MOE_ROUTING, "moe_routing", "MoE routing")                      \
    X(EMBEDDING_LOSS, "embedding_loss", "embedding and loss")         \
    X(COMM, "comm", "exposed communication")                          \
    X(OFFLOAD, "offload", "CPU offload copies")                       \
    X(A2A_HIDDEN, "a2a_hidden", "hidden by the EP a2a overlap")

typedef enum {
#define LOOM_X(n, key, label) LOOM_WORK_##n,
    LOOM_EVAL_WORK_LIST(LOOM_X)
#undef LOOM_X
    LOOM_WORK_COUNT
} loom_eval_work;

/* "gemm", … (the JSON key) and "GEMMs", … (the text label) of a kind. */
const char *loom_eval_work_key(loom_eval_work k);
const char *loom_eval_work_label(loom_eval_work k);

typedef struct {
    double fwd_s, bwd_s;   /* the passes' own */
    double rerun_s;        /* the forward rerun in the backward (recompute) */
} loom_eval_work_time;

typedef struct {
    int32_t first_layer, last_layer;   /* graph layers held (interleaved: first / last chunk) */
    int32_t n_layers;                  /* graph layers held (all chunks) */
    double fwd_s, bwd_s;               /* one micro-batch, compute + exposed comm (bwd incl.
                                          recompute) */
    double comm_s;                     /* the exposed TP / CP / EP part of fwd_s + bwd_s */
    double grad_sync_s;                /* its full data-parallel sync (before overlap) */
    loom_eval_work_time work[LOOM_WORK_COUNT];   /* fwd_s + bwd_s by kind: Σ = fwd_s + bwd_s */
    loom_memory_breakdown mem;         /* per GPU */
    bool fits;
} loom_eval_stage;

typedef struct {
    double step_time_s;
    double tokens_per_s;               /* gbs · seq / step */
    int64_t microbatches;              /* per data-parallel replica and step */
    int64_t gpus;                      /* the GPUs the configuration runs on */
    int64_t idle_gpus;                 /* the cluster's others: on the tile of every NVLink
                                          domain (cluster.h), the rest of each domain */
    double model_flops;                /* per step, all GPUs; full attention */
    double model_flops_causal;         /* per step, attention scores halved */
    double hardware_flops;             /* model FLOPs + recomputed forward matmuls */
    double model_tflops_per_gpu, hardware_tflops_per_gpu;
    double mfu, hfu;                   /* vs the device's dense peak for p->dtype */
    double peak_flops;                 /* that peak, FLOP/s per GPU */
    int64_t memory_per_gpu_bytes;      /* largest stage */
    int64_t memory_capacity_bytes;     /* the GPU's HBM */
    bool fits;                         /* every stage fits */
    double measured_fraction;          /* share of compute time from the profile db */
    loom_step_breakdown breakdown;
    /* the bottleneck rank's stages[].work × the micro-batches: Σ = breakdown's
     * compute_s + tp_comm_s + offload_s */
    loom_eval_work_time work[LOOM_WORK_COUNT];
    int64_t n_stages;
    loom_eval_stage *stages;           /* [n_stages], owned: loom_eval_result_free */
} loom_eval_result;

/* Evaluates configuration p on the cost model's cluster. Checks p first
 * (loom_parallel_check against the graph's model info and the cluster's GPU
 * count) and that the graph was built for (mbs, seq, dtype). The GPU count
 * tp · pp · dp · cp is all of the cluster's, or on a cluster whose NVLink
 * domains have a power-of-two tile (GB200 NVL72: 64 of 72) the tile of every
 * domain: the configuration then runs on the tile view (cluster.h), its
 * ranks in order on the first tile GPUs of each domain. The result
 * must be released with loom_eval_result_free (also after a failure). */
loom_status loom_eval_megatron(const loom_graph *g, const loom_cost_model *cm,
                               const loom_parallel *p, loom_eval_result *out, loom_error *err);

void loom_eval_result_free(loom_eval_result *r);

/* For callers that evaluate one graph many times (calibration, grid and
 * genetic search): identical layers are costed once; their classes can be
 * computed once per graph. cls[l] (caller-allocated, layer_count entries)
 * is the lowest layer with l's signature and block-ness. LOOM_ERR_NOMEM
 * when its scratch space cannot be allocated. */
loom_status loom_eval_layer_classes(const loom_graph *g, int32_t *cls, loom_error *err);

typedef struct {
    const int32_t *layer_class;   /* from loom_eval_layer_classes, or NULL (computed) */
    bool time_only;               /* skip memory: stages[].mem, fits and memory_* stay 0 */
    /* Any pipeline layout (Megatron's --pipeline-model-parallel-layout):
     * transformer blocks in each of n_chunks = pp · vpp chunks, chunk c =
     * vpp_rank · pp + pp_rank, the embedding with chunk 0 and the head with
     * the last. Overrides p's even or first/last split; n_chunks 0 = p's. */
    const int32_t *chunk_layers;
    int32_t n_chunks;
} loom_eval_opts;

/* loom_eval_megatron with options (o NULL = defaults: the same result). */
loom_status loom_eval_megatron_ex(const loom_graph *g, const loom_cost_model *cm,
                                  const loom_parallel *p, const loom_eval_opts *o,
                                  loom_eval_result *out, loom_error *err);

#endif
