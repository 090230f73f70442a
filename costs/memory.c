/*
 * memory.c — per-GPU memory of a pipeline stage (memory.h).
 *
 * How much memory does one GPU need to train its share of a transformer?
 * Five things live in HBM at the worst moment of a training step.
 *
 * 1. Model state. Mixed-precision Adam keeps, per parameter, the bf16
 *    weights (2 bytes), an fp32 gradient accumulator (4) and the fp32
 *    optimizer state — master weights, first and second moments (12). A GPU
 *    holds the parameters of its pipeline stage divided by tensor
 *    parallelism (weights with a dim named heads, kvh, f, v or qkv are
 *    split tp ways, expert weights (dims e and f) are split ep ways; norms and
 *    biases over h are replicated). Data parallelism replicates all of it
 *    unless the optimizer is sharded: ZeRO-1 (and Megatron's distributed
 *    optimizer) divide the optimizer state by the data-parallel degree,
 *    ZeRO-2 also the gradients, ZeRO-3 also the weights (Rajbhandari et al.
 *    2020). Context-parallel ranks hold the same weights, so the
 *    data-parallel group of dense weights is dp·cp; expert weights are
 *    replicated over dp·cp/ep ranks. Hybrid sharding (HSDP, --fsdp-shard)
 *    divides the sharded parts by the shard group only (fsdp_shard·cp
 *    ranks for the dense weights), replicating them over the others.
 *    torchtitan under pipelining is the exception to ZeRO-3's sharding: it
 *    keeps the stage's weights gathered and its gradients unsharded for
 *    the whole step (2 + 4 bytes a parameter on top of the shards).
 *
 * 2. Activations saved for the backward pass. The graph says which tensor
 *    every op saves (graph.h: matmuls their activation input, gelu its input,
 *    norms their input, unfused attention q, k, softmax output, dropout mask,
 *    probabilities and v, …; a tensor saved by several ops is counted once).
 *    Summed over a GPT layer in 16-bit this is Korthikanti et al. 2022's
 *    sbh(34 + 5as/h) bytes, and the parallel variants follow from the dims'
 *    names alone:
 *      - tensor parallel splits every tensor carrying a TP dim (heads, kvh,
 *        f, v, qkv) tp ways: the 24sbh of q, k, v, attention output, gelu
 *        input/output and the 5as²b of the attention core; the layernorm
 *        inputs, the inputs of the QKV and fc1 matmuls and the dropout masks
 *        stay whole: sbh(10 + 24/t + 5as/(ht));
 *      - sequence parallel splits, by tp, the sequence dim s of the tensors
 *        that have no TP dim: sbh/t·(34 + 5as/h);
 *      - context parallel splits s (and the key sequence t) cp ways;
 *      - selective recompute drops the attention core — the tensors with
 *        both a query (s) and a key (t) sequence dim: softmax output, its
 *        dropout mask and output — and recomputes it: 34·sbh/t with SP;
 *        Megatron's other --recompute-modules drop what their ops produce
 *        (recompute.h: the residual norms' outputs, the experts'
 *        activation, MLA's up-projected q, k, v, a dense MLP's or a MoE
 *        layer's insides);
 *      - full recompute keeps only each block's input, 2sbh (2sbh/t with
 *        SP), and recomputes the layer's forward during its backward;
 *      - flash attention needs no switch here: the fused attention op saves
 *        q, k, v and its output, never an s×t tensor;
 *      - under Transformer Engine's FP8 recipe (te_fp8.h) a GEMM keeps its
 *        input's fp8 copy, 1 byte an element, once for the GEMMs that read
 *        it, beside any 16-bit copy another op keeps: a GPT layer with flash
 *        attention saves 29sbh instead of 34sbh.
 *    Kv heads that are fewer than tp are replicated (min(tp, kvh) parts).
 *    Expert activations are NOT divided by ep: with expert parallelism a GPU
 *    holds e/ep experts but each receives the tokens of ep data-parallel
 *    ranks, so the per-GPU bytes of the [e, c, …] buffers stay e·c·…; their
 *    f is split by the expert-TP degree etp, and their tokens c by tp/etp
 *    (each etp-group of a TP group gathers only its own tokens).
 *
 * 3. Micro-batches in flight. A 1F1B pipeline stage i of S runs S-i forward
 *    passes before its first backward, so it holds min(M, S-i) micro-batches
 *    of activations (Narayanan et al. 2021). The interleaved schedule with v
 *    model chunks per GPU warms up with 2(S-i-1) + (v-1)S chunk-forwards;
 *    plus the one in steady state that is min(M·v, …)/v stage-equivalents,
 *    S(1 + (S-1)/(S·v)) on the first stage (Korthikanti et al. §4.2.3;
 *    Megatron's theoretical_memory_usage.py).
 *
 *    Megatron's CPU activation offloading (--cpu-offload-layers N, pp 1)
 *    moves the first N blocks' saved tensors to host memory after their
 *    forward; the GPU holds one layer of them at a time, in transit.
 *
 * 4. Recompute working set. Recomputing a layer re-materialises its
 *    dropped activations for one micro-batch during its backward: the
 *    attention core (selective) or the whole layer (full).
 *
 *
 * 5. The rest: CUDA context, cuBLAS and NCCL workspaces, communication
 *    buffers (a fixed LOOM_MEM_RESERVED_BYTES) and the caching allocator's
 *    fragmentation (LOOM_MEM_FRAGMENTATION of the activations).
 *
 * Inference keeps only the weights, the KV cache
 * 2 · layers · kv_heads · head_dim · bytes · tokens (with multi-head latent
 * attention, layers · (kv_lora_rank + qk_rope_head_dim) · bytes · tokens,
 * whole on every TP rank) and the activations of the largest layer of one
 * forward pass.
 *
 * Units: bytes; parameter counts; micro-batches.
 */
#include "costs/memory.h"

#include "costs/recompute.h"
#include "costs/te_fp8.h"

#include <stdlib.h>
#include <string.h>

static int64_t ceil_div(int64_t a, int64_t b) { return b > 1 ? (a + b - 1) / b : a; }

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

void loom_memory_model_state(int64_t n_params, int64_t dp, int zero, bool dist_opt,
                             bool training, loom_model_state *out)
{
    loom_memory_model_state_fw(n_params, dp, zero, dist_opt, LOOM_FRAMEWORK_MEGATRON, false,
                               training, out);
}

/* Bytes per parameter by framework (parallel.h): Megatron bf16 weights +
 * main gradients in the reduce dtype (fp32 by default; bf16 with
 * --grad-reduce-in-bf16: the buffers of megatron/core/distributed/
 * param_and_grad_buffer.py take the param dtype then) + fp32 master/m/v
 * (2 + 4 + 12, or 2 + 2 + 12); DeepSpeed keeps the gradients in the 16-bit
 * dtype (2 + 2 + 12, the ZeRO paper's 16Ψ); FSDP2 (torchtitan) keeps the
 * bf16 working weights (unsharded unless ZeRO-3), and fp32 gradients on its
 * sharded fp32 weights + m + v whatever the reduce dtype: 2 + 4 + 12. */
void loom_memory_model_state_fw(int64_t n_params, int64_t dp, int zero, bool dist_opt,
                                int framework, bool grad_reduce_bf16, bool training,
                                loom_model_state *out)
{
    if (dp < 1) dp = 1;
    int64_t wb = LOOM_MEM_PARAM_BYTES, gb = LOOM_MEM_GRAD_BYTES, ob = LOOM_MEM_OPTIM_BYTES;
    if (framework == LOOM_FRAMEWORK_DEEPSPEED) gb = 2;
    if (framework == LOOM_FRAMEWORK_MEGATRON && grad_reduce_bf16) gb = 2;
    out->params_bytes = n_params * wb;
    out->grads_bytes = training ? n_params * gb : 0;
    out->optimizer_bytes = training ? n_params * ob : 0;
    if (!training) return;
    if (zero >= 1 || dist_opt) out->optimizer_bytes = ceil_div(out->optimizer_bytes, dp);
    if (zero >= 2) out->grads_bytes = ceil_div(out->grads_bytes, dp);
    if (zero >= 3) out->params_bytes = ceil_div(out->params_bytes, dp);
}

void loom_memory_model_state_local(int64_t n_params, int64_t n_local, int64_t dp, int zero,
                                   bool training, loom_model_state *out)
{
    loom_model_state all, local;
    loom_memory_model_state(n_params, 1, 0, false, training, &all);
    loom_memory_model_state(n_local, dp, zero, false, training, &local);
    out->params_bytes = zero >= 3 ? local.params_bytes : all.params_bytes;
    out->grads_bytes = zero >= 2 ? local.grads_bytes : all.grads_bytes;
    out->optimizer_bytes = zero >= 1 ? local.optimizer_bytes : all.optimizer_bytes;
}

double loom_memory_inflight_microbatches(int64_t pp, int64_t stage, int64_t vpp, int64_t m)
{
    if (pp < 1) pp = 1;
    if (stage < 0) stage = 0;
    if (stage >= pp) stage = pp - 1;
    if (m < 1) m = 1;
    if (vpp <= 1) return (double)(m < pp - stage ? m : pp - stage);
    /* Megatron's interleaved schedule: warm-up of 2(p-r-1) + (v-1)p chunk
     * forwards, plus the steady-state one; never more than all m·v. */
    int64_t chunks = 2 * (pp - stage - 1) + (vpp - 1) * pp + 1;
    if (chunks > m * vpp) chunks = m * vpp;
    return (double)chunks / (double)vpp;
}

int64_t loom_memory_kv_cache_bytes(int64_t layers, int64_t kv_heads, int64_t head_dim,
                                   loom_dtype dtype, int64_t tokens, int64_t tp)
{
    int64_t parts = tp < kv_heads ? tp : kv_heads;
    int64_t per_token = 2 * layers * ceil_div(kv_heads, parts > 0 ? parts : 1) * head_dim *
                        loom_dtype_bytes(dtype);
    return per_token * tokens;
}

int64_t loom_memory_mla_kv_cache_bytes(int64_t layers, int64_t kv_lora_rank,
                                       int64_t qk_rope_head_dim, loom_dtype dtype,
                                       int64_t tokens)
{
    return layers * (kv_lora_rank + qk_rope_head_dim) * loom_dtype_bytes(dtype) * tokens;
}

int64_t loom_memory_kv_bytes_per_token(const loom_model_info *info, int64_t tp)
{
    if (info->kv_lora_rank > 0)
        return loom_memory_mla_kv_cache_bytes(1, info->kv_lora_rank, info->qk_rope_head_dim,
                                              info->dtype, 1);
    int64_t kvh = info->kv_heads > 0 ? info->kv_heads : info->heads;
    return loom_memory_kv_cache_bytes(1, kvh, info->head_dim, info->dtype, 1, tp);
}

/* ---- tensors -------------------------------------------------------------- */

static bool has_dim(const loom_tensor *t, const char *name)
{
    return loom_tensor_dim_index(t, name) >= 0;
}

/* Megatron's tensor-parallel dims, in order of preference when a tensor has
 * several (GPT-2's fused c_attn output carries both qkv and heads). */
static const char *const tp_dims[] = {"heads", "f", "v", "kvh", "qkv"};

bool loom_memory_is_expert_tensor(const loom_tensor *t)
{
    return has_dim(t, "e") && (has_dim(t, "c") || has_dim(t, "f"));
}

int64_t loom_memory_tensor_parts(const loom_tensor *t, const loom_parallel *p, bool weight)
{
    bool expert = loom_memory_is_expert_tensor(t);
    int64_t tp = expert && p->etp > 0 ? p->etp : p->tp;
    if (tp < 1) tp = 1;
    int64_t parts = 1;
    int tp_dim = -1;
    for (size_t k = 0; k < sizeof tp_dims / sizeof tp_dims[0] && tp_dim < 0; k++)
        tp_dim = loom_tensor_dim_index(t, tp_dims[k]);
    if (tp_dim >= 0) {
        /* kv heads fewer than tp are replicated: min(tp, kvh) distinct parts */
        int64_t n = t->dims[tp_dim].size;
        parts = strcmp(t->dims[tp_dim].name, "kvh") == 0 && n < tp ? n : tp;
    }
    bool seq = has_dim(t, "s") || has_dim(t, "t") || has_dim(t, "c");
    if (weight) {
        if (expert && p->ep > 1) parts *= p->ep;
        return parts;
    }
    if (expert) {
        /* Megatron's MoE layer: each group of etp ranks of a TP group
         * gathers its own tokens (sequence parallel), so the tokens per
         * expert c are split tp/etp ways (and cp ways) */
        int64_t groups = p->tp > tp && p->tp % tp == 0 ? p->tp / tp : 1;
        if (has_dim(t, "c")) parts *= groups * (p->cp > 1 ? p->cp : 1);
        return parts;
    }
    if (tp_dim < 0 && p->sp && seq) parts = tp;   /* sequence parallel regions */
    if (p->cp > 1 && seq) parts *= p->cp;
    return parts;
}

int64_t loom_memory_tensor_shard_bytes(const loom_tensor *t, const loom_parallel *p, bool weight)
{
    return ceil_div(loom_tensor_bytes(t), loom_memory_tensor_parts(t, p, weight));
}

bool loom_memory_is_block(const loom_graph *g, int32_t layer)
{
    const loom_model_info *info = loom_graph_info_c(g);
    int32_t n = loom_graph_layer_count(g);
    if (info->layers > 0 && n == info->layers + 2) return layer >= 1 && layer <= info->layers;
    return true;
}

int64_t loom_memory_layer_input_bytes(const loom_graph *g, const loom_parallel *p, int32_t layer,
                                      int32_t *scratch)
{
    int32_t first, count;
    int64_t b = 0;
    loom_graph_layer_ops(g, layer, &first, &count);
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *op = loom_graph_op(g, i);
        for (int k = 0; k < op->n_in; k++) {
            int32_t tid = op->in[k];
            const loom_tensor *t = loom_graph_tensor(g, tid);
            if (t->is_weight || scratch[tid] == layer + 1) continue;
            if (t->producer >= 0 && loom_graph_op(g, t->producer)->layer >= layer) continue;
            scratch[tid] = layer + 1;
            b += loom_memory_tensor_shard_bytes(t, p, false);
        }
    }
    return b;
}

/* Parts of tensor t as op saves it. The token dispatcher works on a rank's
 * own sequence-parallel tokens: an expert buffer that the combine (or the
 * dispatch) keeps is the reduce-scattered one, its slots c split over the
 * whole expert-TP group too (Megatron's alltoall dispatcher reduce-scatters
 * the expert outputs before un-permuting them). */
static int64_t saved_parts(const loom_op *op, const loom_tensor *t, const loom_parallel *p)
{
    int64_t parts = loom_memory_tensor_parts(t, p, false);
    bool dispatcher = op->kind == LOOM_OP_MOE_DISPATCH || op->kind == LOOM_OP_MOE_COMBINE;
    int64_t etp = p->etp > 0 ? p->etp : p->tp;
    if (dispatcher && p->sp && etp > 1 && loom_memory_is_expert_tensor(t) && has_dim(t, "c"))
        parts *= etp;
    return parts;
}

void loom_memory_layer_acts(const loom_graph *g, const loom_parallel *p, loom_layer_act *acts)
{
    int32_t n_layers = loom_graph_layer_count(g), n_t = loom_graph_num_tensors(g);
    /* drop[l]: what layer l's selective recompute drops (recompute.h) */
    int64_t *drop = calloc((size_t)n_layers + 1, sizeof *drop);
    /* seen[t]: tensor t already charged (to the first op that saves it, as
     * loom_op_saved_bytes does); seen_in: scratch for the inputs. */
    bool *seen = calloc((size_t)n_t + 1, 1), *seen_fp8 = calloc((size_t)n_t + 1, 1);
    int32_t *seen_in = calloc((size_t)n_t + 1, sizeof *seen_in);
    LOOM_ASSERT(drop && seen && seen_fp8 && seen_in);
    memset(acts, 0, (size_t)n_layers * sizeof *acts);
    for (int32_t i = 0; i < loom_graph_num_ops(g); i++) {
        const loom_op *op = loom_graph_op(g, i);
        loom_layer_act *a = &acts[op->layer];
        for (int k = 0; k < op->n_in + op->n_out; k++) {
            int32_t tid = k < op->n_in ? op->in[k] : op->out[k - op->n_in];
            uint32_t bit = k < op->n_in ? LOOM_SAVE_IN(k) : LOOM_SAVE_OUT(k - op->n_in);
            const loom_tensor *t = loom_graph_tensor(g, tid);
            if (!(op->saves & bit)) continue;
            if (k < op->n_in && loom_te_fp8_gemm(g, op, t->dtype)) {
                /* TE's FP8 GEMM keeps its input's fp8 copy, 1 byte an
                 * element, once however many GEMMs read it (te_fp8.h);
                 * an op that saves the 16-bit tensor too keeps both */
                if (!seen_fp8[tid]) {
                    seen_fp8[tid] = true;
                    int64_t b = ceil_div(loom_tensor_numel(t), saved_parts(op, t, p));
                    a->full_bytes += b;
                    if (loom_recompute_drops(g, p, i, tid)) drop[op->layer] += b;
                }
            } else if (!seen[tid]) {
                seen[tid] = true;
                int64_t b = ceil_div(loom_tensor_bytes(t), saved_parts(op, t, p));
                a->full_bytes += b;
                if (loom_recompute_drops(g, p, i, tid)) drop[op->layer] += b;
            }
        }
        if (op->saves & LOOM_SAVE_MASK) {
            /* one byte per element of output 0, split like that output */
            const loom_tensor *o = loom_graph_tensor(g, op->out[0]);
            int64_t b = ceil_div(loom_tensor_numel(o), loom_memory_tensor_parts(o, p, false));
            a->full_bytes += b;
            if (loom_recompute_drops(g, p, i, op->out[0])) drop[op->layer] += b;
        }
    }
    for (int32_t l = 0; l < n_layers; l++) {
        loom_layer_act *a = &acts[l];
        a->input_bytes = loom_memory_layer_input_bytes(g, p, l, seen_in);
        a->saved_bytes = a->full_bytes;
        a->work_bytes = 0;
        if (p->recompute == LOOM_RECOMPUTE_SELECTIVE) {
            a->saved_bytes = a->full_bytes - drop[l];
            a->work_bytes = drop[l];
        } else if (p->recompute == LOOM_RECOMPUTE_FULL && loom_memory_is_block(g, l) &&
                   a->input_bytes < a->full_bytes) {
            a->saved_bytes = a->input_bytes;
            a->work_bytes = a->full_bytes;
        }
    }
    free(drop);
    free(seen);
    free(seen_fp8);
    free(seen_in);
}

/* ---- stage ------------------------------------------------------------------ */

bool loom_memory_weight_first_use(const loom_graph *g, int32_t op, int k, int32_t *first_op)
{
    int32_t w = loom_graph_op(g, op)->w[k];
    if (first_op[w] == 0) first_op[w] = op + 1;
    return first_op[w] == op + 1;
}

void loom_memory_stage_params(const loom_graph *g, const loom_parallel *p, const bool *in_stage,
                              int64_t *dense, int64_t *expert)
{
    int32_t n_t = loom_graph_num_tensors(g);
    int32_t *seen = calloc((size_t)n_t + 1, sizeof *seen);
    LOOM_ASSERT(seen);
    *dense = *expert = 0;
    for (int32_t l = 0, first, count; l < loom_graph_layer_count(g); l++) {
        if (!in_stage[l]) continue;
        loom_graph_layer_ops(g, l, &first, &count);
        for (int32_t i = first; i < first + count; i++) {
            const loom_op *op = loom_graph_op(g, i);
            for (int k = 0; k < op->n_w; k++) {
                bool again = seen[op->w[k]] == i + 1;   /* the same op reads it twice */
                if (!loom_memory_weight_first_use(g, i, k, seen) || again) continue;
                const loom_tensor *w = loom_graph_tensor(g, op->w[k]);
                int64_t n = ceil_div(loom_tensor_numel(w), loom_memory_tensor_parts(w, p, true));
                if (loom_memory_is_expert_tensor(w)) *expert += n;
                else *dense += n;
            }
        }
    }
    free(seen);
}

/* KV-cache bytes per token of one layer: from the model info (2·kvh·dh·bytes,
 * or MLA's latent), else from the layer's fused attention ops (k and v per
 * token). */
static int64_t kv_bytes_per_token(const loom_graph *g, const loom_parallel *p, int32_t layer)
{
    const loom_model_info *info = loom_graph_info_c(g);
    if (info->heads > 0 && info->head_dim > 0 && loom_memory_is_block(g, layer))
        return loom_memory_kv_bytes_per_token(info, p->tp);
    int32_t first, count;
    int64_t b = 0;
    loom_graph_layer_ops(g, layer, &first, &count);
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *op = loom_graph_op(g, i);
        if (op->kind != LOOM_OP_ATTENTION) continue;
        for (int k = 1; k <= 2; k++) {
            const loom_tensor *t = loom_graph_tensor(g, op->in[k]);
            int64_t tokens = t->dims[0].size * t->dims[1].size;   /* [b, t, kvh, d] */
            loom_parallel one = *p;
            one.sp = false;
            one.cp = 1;
            b += ceil_div(loom_tensor_bytes(t), tokens * loom_memory_tensor_parts(t, &one, false));
        }
    }
    return b;
}

/* Tokens layer `layer` caches out of kv_tokens = batch × context: a sliding
 * window or chunk keeps min(context, w) per sequence. */
static int64_t kv_layer_tokens(const loom_graph *g, int32_t layer, int64_t kv_tokens,
                               int64_t context)
{
    if (context <= 0) return kv_tokens;
    int32_t first, count;
    loom_graph_layer_ops(g, layer, &first, &count);
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *op = loom_graph_op(g, i);
        if (op->kind != LOOM_OP_ATTENTION) continue;
        int64_t span = loom_op_attention_span(op, context);
        if (span < context) return kv_tokens / context * span;
    }
    return kv_tokens;
}

loom_status loom_memory_stage(const loom_graph *g, const loom_parallel *p,
                              const loom_stage_memory_opts *o, loom_memory_breakdown *out,
                              loom_error *err)
{
    memset(out, 0, sizeof *out);
    if (!o || !o->in_stage)
        return loom_error_set(err, LOOM_ERR_INVALID, "memory model: no stage layers given");
    if (!(o->inflight >= 0) || o->kv_tokens < 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "memory model: in-flight micro-batches (%g) and KV tokens (%lld) "
                              "must be >= 0", o->inflight, (long long)o->kv_tokens);
    int32_t n_layers = loom_graph_layer_count(g);
    loom_layer_act *owned = NULL;
    const loom_layer_act *acts = o->acts;
    if (!acts) {
        owned = calloc((size_t)n_layers + 1, sizeof *owned);
        if (!owned) return loom_error_set(err, LOOM_ERR_NOMEM, "memory model: out of memory");
        loom_memory_layer_acts(g, p, owned);
        acts = owned;
    }

    int64_t dense, expert;
    loom_memory_stage_params(g, p, o->in_stage, &dense, &expert);
    /* HSDP shards over the shard group only (loom_parallel_shard_ranks) */
    int64_t dp_dense = loom_parallel_shard_ranks(p, p->dp * (p->cp > 0 ? p->cp : 1));
    int64_t dp_expert = loom_parallel_shard_ranks(p, loom_parallel_expert_dp(p));
    loom_model_state sd, se;
    loom_memory_model_state_fw(dense, dp_dense, p->zero, p->dist_opt, p->framework,
                               p->grad_reduce_bf16, !o->inference, &sd);
    loom_memory_model_state_fw(expert, dp_expert, p->zero, p->dist_opt, p->framework,
                               p->grad_reduce_bf16, !o->inference, &se);
    if (!o->inference && p->framework == LOOM_FRAMEWORK_TORCHTITAN && p->zero >= 3 && p->pp > 1) {
        /* torchtitan under pipelining keeps FSDP's weights gathered through
         * the step and accumulates unsharded gradients until the last
         * backward (costs/dp_sync.h), in FSDP2's reduce dtype (fp32):
         * bf16 weights whole, fp32 gradients whole besides the sharded ones */
        sd.params_bytes = dense * LOOM_MEM_PARAM_BYTES;
        se.params_bytes = expert * LOOM_MEM_PARAM_BYTES;
        sd.grads_bytes += dense * LOOM_MEM_GRAD_BYTES;
        se.grads_bytes += expert * LOOM_MEM_GRAD_BYTES;
    }
    out->params = dense + expert;
    out->params_bytes = sd.params_bytes + se.params_bytes;
    out->grads_bytes = sd.grads_bytes + se.grads_bytes;
    out->optimizer_bytes = sd.optimizer_bytes + se.optimizer_bytes;

    int64_t saved = 0, work = 0, blocks = 0, offloaded = 0;
    for (int32_t l = 0; l < n_layers; l++) {
        if (!o->in_stage[l]) continue;
        const loom_layer_act *a = &acts[l];
        if (o->inference) {
            /* one forward at a time: the largest layer's tensors */
            work = max64(work, a->full_bytes);
            out->kv_cache_bytes +=
                kv_bytes_per_token(g, p, l) * kv_layer_tokens(g, l, o->kv_tokens, o->kv_context);
            continue;
        }
        bool block = loom_memory_is_block(g, l);
        /* --recompute-num-layers k (Megatron's "block" method): only the
         * first k blocks of each of the rank's chunks are recomputed (the
         * method runs per TransformerBlock, one per virtual chunk:
         * megatron/core/recompute.py), the others keep everything */
        if (l == 0 || !o->in_stage[l - 1]) blocks = 0;
        if (p->recompute == LOOM_RECOMPUTE_FULL && block && p->recompute_layers > 0 &&
            blocks >= p->recompute_layers)
            saved += a->full_bytes;
        else if (block && blocks < p->cpu_offload_layers) {
            /* offloaded (--cpu-offload-layers): on the host from its forward
             * to its backward; its tensors pass through the GPU one layer
             * at a time (Transformer Engine double-buffers the copies) */
            offloaded += a->saved_bytes;
            work = max64(work, a->saved_bytes);
        } else {
            saved += a->saved_bytes;
            work = max64(work, a->work_bytes);
        }
        if (block) blocks++;
    }
    out->inflight = o->inference ? 1.0 : o->inflight;
    out->activations_bytes = (int64_t)((double)saved * out->inflight + 0.5) + work;
    out->offloaded_bytes = (int64_t)((double)offloaded * out->inflight + 0.5);
    out->other_bytes = LOOM_MEM_RESERVED_BYTES +
                       (int64_t)((double)out->activations_bytes * LOOM_MEM_FRAGMENTATION + 0.5);
    out->total_bytes = out->params_bytes + out->grads_bytes + out->optimizer_bytes +
                       out->activations_bytes + out->kv_cache_bytes + out->other_bytes;
    free(owned);
    return LOOM_OK;
}
