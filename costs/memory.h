/*
 * memory.h — per-GPU memory of a pipeline stage under a Megatron-style
 * configuration (docs/design.md §4 "Memory"; the model is explained in memory.c).
 *
 *   total = params + grads + optimizer            (model state, ZeRO / dist-opt)
 *         + activations × micro-batches in flight (1F1B / interleaved)
 *         + recompute working set                 (one layer, one micro-batch)
 *         + KV cache                              (inference)
 *         + workspace allowance                   (CUDA context, NCCL, cuBLAS,
 *                                                  allocator fragmentation)
 *
 * The building blocks are exported because the stage DP of the planner uses
 * them too: model-state bytes for a parameter count, micro-batches in flight
 * on a stage, the per-GPU bytes of one tensor under a configuration, and the
 * saved-activation bytes of every layer.
 *
 * Units: bytes (int64_t), parameter counts (int64_t), micro-batches (double:
 * the interleaved schedule holds fractional stage-equivalents).
 */
#ifndef LOOM_MEMORY_H
#define LOOM_MEMORY_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/parallel.h"
#include "graph/graph.h"

/* Mixed-precision Adam (Rajbhandari et al. 2020 "ZeRO", §3.1; Megatron-LM's
 * distributed-optimizer table): per parameter, 2 bytes of bf16/fp16 weights,
 * 4 bytes of fp32 gradient accumulation (Megatron's main_grad), 12 bytes of
 * optimizer state (fp32 master weights, Adam m and v). */
#define LOOM_MEM_PARAM_BYTES 2
#define LOOM_MEM_GRAD_BYTES 4
#define LOOM_MEM_OPTIM_BYTES 12

/* Workspace allowance: a fixed reserve for the CUDA context, cuBLAS / NCCL
 * workspaces and communication buffers, plus a fraction of the activations
 * for the caching allocator's fragmentation. */
#define LOOM_MEM_RESERVED_BYTES ((int64_t)1 << 30)
#define LOOM_MEM_FRAGMENTATION 0.10

typedef struct {
    int64_t params_bytes;
    int64_t grads_bytes;
    int64_t optimizer_bytes;
} loom_model_state;

/* Model state of n_params parameters that are replicated over `dp`
 * data-parallel ranks: ZeRO-1 and Megatron's distributed optimizer divide
 * the optimizer state by dp, ZeRO-2 also the gradients, ZeRO-3 also the
 * parameters (each rounded up). Inference (training false): weights only. */
void loom_memory_model_state(int64_t n_params, int64_t dp, int zero, bool dist_opt,
                             bool training, loom_model_state *out);

/* The same for a framework (loom_framework, parallel.h) and the dtype the
 * gradients are kept in: DeepSpeed keeps 2-byte gradients; Megatron keeps
 * its main-gradient buffers in the reduce dtype (fp32, or bf16 with
 * --grad-reduce-in-bf16); FSDP2 casts the reduced gradient back to its
 * fp32 sharded parameters whatever the reduce dtype. */
void loom_memory_model_state_fw(int64_t n_params, int64_t dp, int zero, bool dist_opt,
                                int framework, bool grad_reduce_bf16, bool training,
                                loom_model_state *out);

/* The same for a pipeline stage whose mesh also holds data-parallel copies
 * of its weights: of the n_params on a GPU, n_local are left once each
 * weight is divided by its copies along the mesh axes that split the batch
 * (the data-parallel group of a runtime such as Megatron-LM spans those
 * and the stage's dp replicas). The ZeRO-sharded parts are n_local / dp,
 * the others n_params. */
void loom_memory_model_state_local(int64_t n_params, int64_t n_local, int64_t dp, int zero,
                                   bool training, loom_model_state *out);

/* Micro-batches whose activations stage `stage` (0-based) of `pp` holds at
 * its peak, out of m per step, in units of the stage's full layer set:
 *   1F1B (vpp = 1):  min(m, pp - stage)       (Narayanan et al. 2021, §2.2)
 *   interleaved:     min(m·v, 2(pp-stage-1) + (v-1)·pp + 1) / v
 * (Megatron's interleaved warm-up plus the one in steady state, counted in
 * model chunks of 1/v of the stage; for stage 0 this is Megatron's
 * pp·(1 + (pp-1)/(pp·v)), Korthikanti et al. 2022 §4.2.3). */
double loom_memory_inflight_microbatches(int64_t pp, int64_t stage, int64_t vpp, int64_t m);

/* KV cache of inference: 2 (K and V) · layers · kv_heads · head_dim ·
 * dtype bytes · tokens, with kv heads split over min(tp, kv_heads) GPUs
 * (Megatron/vLLM replicate kv heads when tp exceeds them). */
int64_t loom_memory_kv_cache_bytes(int64_t layers, int64_t kv_heads, int64_t head_dim,
                                   loom_dtype dtype, int64_t tokens, int64_t tp);

/* KV cache of multi-head latent attention (DeepSeek-V2 §2.1, V3; the
 * MLA form vLLM and SGLang serve): a token of a layer caches the
 * compressed latent c_kv (kv_lora_rank numbers) and the rope key shared by
 * all heads (qk_rope_head_dim), not 2 · heads · head_dim; every head reads
 * the whole latent, so a tensor-parallel split of the heads does not divide
 * it: kv_lora_rank + qk_rope_head_dim numbers · dtype bytes · layers ·
 * tokens on every GPU of the split. */
int64_t loom_memory_mla_kv_cache_bytes(int64_t layers, int64_t kv_lora_rank,
                                       int64_t qk_rope_head_dim, loom_dtype dtype,
                                       int64_t tokens);

/* KV-cache bytes per token of one transformer block on one GPU of a
 * tensor-parallel group of tp, from the model's hyper-parameters: MLA's
 * latent when the model has one (kv_lora_rank > 0), else
 * loom_memory_kv_cache_bytes of its kv heads (all heads without GQA). */
int64_t loom_memory_kv_bytes_per_token(const loom_model_info *info, int64_t tp);

/* An expert's tensor: its weights (dims e and f) and the token buffers
 * routed to it (dims e and c). The router's weight [h, e] and logits
 * [b, s, e] are not: they are dense and follow the tokens. */
bool loom_memory_is_expert_tensor(const loom_tensor *t);

/* Into how many parts a tensor is split on one GPU under p: activations
 * (weight false) and weights (weight true). See memory.c for the rules. */
int64_t loom_memory_tensor_parts(const loom_tensor *t, const loom_parallel *p, bool weight);
/* ceil(bytes / parts). */
int64_t loom_memory_tensor_shard_bytes(const loom_tensor *t, const loom_parallel *p, bool weight);

/* True for the transformer blocks of a model graph (layers 1..L of an HF
 * model); every layer of a hand-written graph (model info layers == 0). */
bool loom_memory_is_block(const loom_graph *g, int32_t layer);

/* Bytes, per GPU under p, of the activations layer `layer` reads from
 * earlier layers or the graph's inputs (what full recompute keeps; what a
 * pipeline stage boundary sends). scratch: loom_graph_num_tensors ints,
 * zeroed before the first call (reusable across layers). */
int64_t loom_memory_layer_input_bytes(const loom_graph *g, const loom_parallel *p, int32_t layer,
                                      int32_t *scratch);

/* Per-layer activation figures for one micro-batch (the graph's batch), per
 * GPU, under p's tp / cp / sp / recompute: */
typedef struct {
    int64_t saved_bytes;   /* kept until the backward under p->recompute */
    int64_t full_bytes;    /* what the layer saves without recompute */
    int64_t work_bytes;    /* re-materialised transiently when recomputing it */
    int64_t input_bytes;   /* the layer's inputs from earlier layers */
} loom_layer_act;

/* Fills acts[0 .. layer_count) (caller-allocated). The graph must be
 * finalized. Full recompute keeps only each block's input (non-block
 * layers keep everything); selective drops the attention core's s×t
 * tensors; p->recompute_layers > 0 limits full recompute to that many
 * blocks per virtual chunk (Megatron's block method), which is the caller's business (see
 * loom_memory_stage). */
void loom_memory_layer_acts(const loom_graph *g, const loom_parallel *p, loom_layer_act *acts);

/* Tied weights (GPT-2's wte as lm_head, Llama-3.2's embed_tokens): a stage
 * holds, updates and synchronises a weight once however many of its ops
 * read it. True when weight k of op is the first use of its tensor among
 * the ops offered so far, or a repeat inside the same op; first_op[]
 * (loom_graph_num_tensors entries, zeroed by the caller) remembers each
 * tensor's first reader + 1. The one rule behind loom_memory_stage_params
 * (loom eval) and the planner's stage totals (solver/intra.c). */
bool loom_memory_weight_first_use(const loom_graph *g, int32_t op, int k, int32_t *first_op);

/* Parameters one GPU holds for the layers in_stage[] (after tp / ep
 * splits; tied weights once): dense ones, and expert ones (loom_memory_is_expert_tensor). */
void loom_memory_stage_params(const loom_graph *g, const loom_parallel *p, const bool *in_stage,
                              int64_t *dense, int64_t *expert);

/* Memory of one GPU holding a stage. */
typedef struct {
    int64_t params;              /* parameter count held (after tp/ep, before ZeRO-3) */
    int64_t params_bytes, grads_bytes, optimizer_bytes;
    int64_t activations_bytes;   /* saved × in-flight + recompute working set */
    int64_t kv_cache_bytes;
    int64_t other_bytes;         /* workspace allowance */
    int64_t offloaded_bytes;     /* activations held in host memory (--cpu-offload-layers),
                                    not in total_bytes */
    int64_t total_bytes;
    double inflight;             /* micro-batches in flight used */
} loom_memory_breakdown;

typedef struct {
    const bool *in_stage;    /* [layer_count]: the layers this GPU holds */
    double inflight;         /* training: loom_memory_inflight_microbatches() */
    bool inference;          /* no grads / optimizer / stored activations; KV cache */
    int64_t kv_tokens;       /* inference: tokens cached (batch × context) */
    int64_t kv_context;      /* inference: the context of each sequence; with it a layer whose
                                attention has a window or chunk w < kv_context caches
                                kv_tokens · w / kv_context tokens (0: every layer caches all) */
    const loom_layer_act *acts; /* loom_memory_layer_acts(g, p) when the caller has
                                   them (evaluating many stages); NULL = computed here */
} loom_stage_memory_opts;

/* Memory of one GPU of a stage. Dense parameters are data-parallel over
 * dp·cp ranks, expert parameters over dp·cp/ep (Megatron's
 * expert-data-parallel group). Fails only on invalid arguments. */
loom_status loom_memory_stage(const loom_graph *g, const loom_parallel *p,
                              const loom_stage_memory_opts *o, loom_memory_breakdown *out,
                              loom_error *err);

#endif
