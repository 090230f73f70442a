/*
 * shape.c — per-token work of one GPU of an engine instance (shape.h).
 *
 * Walk the graph once (it is built for one token, so every size is per
 * token) and sort each op into one of four buckets:
 *   einsum with a weight  a GEMM class: 2·|W_shard| FLOPs per token,
 *                         |W_shard| stored bytes, its activations; expert
 *                         weights ([e, …, f]) per expert shard;
 *   attention             per-pair FLOPs 2·heads_local·(dqk + dv) (prefill,
 *                         causal flash); decode per cached token the same,
 *                         or for MLA in the absorbed form vLLM and SGLang
 *                         decode with, 2·heads_local·(2·kv_lora + rope)
 *                         (DeepSeek-V2 §2.1.3: W_UK folds into the query,
 *                         W_UV into the output);
 *   the LM head           only sampled tokens pay it;
 *   everything else       bytes per token (memory-bound).
 * The loss (cross_entropy) is a training op and is skipped.
 */
#include "costs/serve/shape.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "costs/memory.h"
#include "costs/parallel.h"

static const char *const weight_names[] = {
#define LOOM_X(n, s) s,
    LOOM_SERVE_WEIGHTS_LIST(LOOM_X)
#undef LOOM_X
};

loom_dtype loom_serve_default_kv_dtype(loom_serve_weights w, bool nim)
{
    /* Why NIM's fp8 profiles hold fp8 KV, from the published runs and not
     * the fit: at saturation, output tokens/s x inter-token latency is the
     * number of sequences in flight. NIM's guide (Llama-3.3-70B fp8, 2 x
     * H100, 5000 + 500 tokens) holds 920 x 0.093 = 86; AWS's (Llama-3-70B
     * fp8, 4 x H100, 7000 + 1000) holds ~113 at 128 clients; the DLI
     * course's (Llama-3-8B fp8, 1 x H100, 7000 + 1000) 1352 x 0.0825 = 111.
     * All are above what a bf16 cache of those GPUs holds (~45, ~88, ~62)
     * and within an fp8 one. */
    return nim && w == LOOM_WEIGHTS_FP8 ? LOOM_DTYPE_FP8 : LOOM_DTYPE_BF16;
}

const char *loom_serve_weights_name(loom_serve_weights w)
{
    return (unsigned)w < LOOM_WEIGHTS_COUNT ? weight_names[w] : "?";
}

bool loom_serve_weights_parse(const char *s, loom_serve_weights *out)
{
    for (int i = 0; i < LOOM_WEIGHTS_COUNT; i++)
        if (strcasecmp(s, weight_names[i]) == 0) {
            *out = (loom_serve_weights)i;
            return true;
        }
    if (strcasecmp(s, "awq") == 0 || strcasecmp(s, "gptq") == 0 || strcasecmp(s, "w4a16") == 0) {
        *out = LOOM_WEIGHTS_INT4;
        return true;
    }
    if (strcasecmp(s, "bfloat16") == 0 || strcasecmp(s, "fp16") == 0 ||
        strcasecmp(s, "float16") == 0 || strcasecmp(s, "auto") == 0) {
        *out = LOOM_WEIGHTS_BF16;
        return true;
    }
    return false;
}

loom_status loom_serve_weights_check(loom_serve_weights w, const loom_device *d, loom_error *err)
{
    if (w == LOOM_WEIGHTS_NVFP4 && !(d->fp4_flops > 0))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "--weights nvfp4 runs its GEMMs on FP4 tensor cores, which %s does not "
                              "have (Blackwell: B200, GB200); use fp8 or int4 there",
                              d->name);
    return LOOM_OK;
}

double loom_serve_weights_bytes(loom_serve_weights w)
{
    switch (w) {
    case LOOM_WEIGHTS_FP8: return 1.0;
    case LOOM_WEIGHTS_INT4: return 0.5 + 4.0 / 128;   /* 16-bit scale and zero per 128 */
    case LOOM_WEIGHTS_MXFP4: return 0.5 + 1.0 / 32;   /* 8-bit scale per 32 */
    case LOOM_WEIGHTS_NVFP4: return 0.5 + 1.0 / 16;   /* fp8 scale per 16 */
    default: return 2.0;
    }
}

void loom_serve_parallel_init(loom_serve_parallel *p)
{
    memset(p, 0, sizeof *p);
    p->tp = p->pp = p->ep = p->attn_dp = p->replicas = 1;
    p->weights = LOOM_WEIGHTS_BF16;
    p->kv_dtype = LOOM_DTYPE_BF16;
}

void loom_serve_shape_free(loom_serve_shape *s)
{
    if (!s) return;
    free(s->gemm);
    s->gemm = NULL;
    s->n_gemm = 0;
}

static loom_status add_gemm(loom_serve_shape *s, loom_serve_gemm g, int32_t *cap, loom_error *err)
{
    for (int32_t i = 0; i < s->n_gemm; i++) {
        loom_serve_gemm *h = &s->gemm[i];
        if (h->expert == g.expert && h->fp8 == g.fp8 && h->fp4 == g.fp4 &&
            h->flops_per_token == g.flops_per_token &&
            h->weight_bytes == g.weight_bytes && h->act_bytes_per_token == g.act_bytes_per_token) {
            h->count++;
            return LOOM_OK;
        }
    }
    if (s->n_gemm == *cap) {
        int32_t n = *cap ? 2 * *cap : 16;
        loom_serve_gemm *p = realloc(s->gemm, (size_t)n * sizeof *p);
        if (!p) return loom_error_set(err, LOOM_ERR_NOMEM, "serving shape: out of memory");
        s->gemm = p;
        *cap = n;
    }
    g.count = 1;
    s->gemm[s->n_gemm++] = g;
    return LOOM_OK;
}

static double act_bytes(const loom_graph *g, int32_t id, const loom_parallel *p)
{
    const loom_tensor *t = loom_graph_tensor(g, id);
    return (double)loom_memory_tensor_shard_bytes(t, p, false);
}

static loom_status check(const loom_model_info *m, const loom_serve_parallel *p,
                         const char *name, loom_error *err)
{
    if (m->layers <= 0)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "%s: serving needs a model config (an HF config.json: layers, heads, "
                              "KV heads), not a hand-written graph", name);
    const struct { const char *opt; int64_t v; } deg[] = {
        {"--tp", p->tp}, {"--pp", p->pp}, {"--ep", p->ep}, {"--dp", p->attn_dp},
        {"replicas", p->replicas}};
    for (size_t i = 0; i < sizeof deg / sizeof deg[0]; i++)
        if (deg[i].v < 1 || deg[i].v > 1 << 20)
            return loom_error_set(err, LOOM_ERR_INVALID, "%s: expected an integer in [1, %d], "
                                  "found %lld", deg[i].opt, 1 << 20, (long long)deg[i].v);
    if (m->heads % p->tp != 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "--tp %lld does not divide the %lld attention heads of %s",
                              (long long)p->tp, (long long)m->heads, name);
    int64_t kvh = m->kv_heads > 0 ? m->kv_heads : m->heads;
    if (m->kv_lora_rank == 0 && kvh % p->tp != 0 && p->tp % kvh != 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "--tp %lld and the %lld KV heads of %s: vLLM, SGLang and "
                              "TensorRT-LLM need one to divide the other (KV heads are split "
                              "or replicated across the tensor-parallel ranks)",
                              (long long)p->tp, (long long)kvh, name);
    if (p->pp > m->layers)
        return loom_error_set(err, LOOM_ERR_INVALID, "--pp %lld exceeds the %lld layers of %s",
                              (long long)p->pp, (long long)m->layers, name);
    if (m->experts == 0 && p->ep > 1)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "--ep %lld: %s has no experts (expert parallelism needs a MoE model)",
                              (long long)p->ep, name);
    if (m->experts > 0 && (m->experts % p->ep != 0 || (p->tp * p->attn_dp) % p->ep != 0))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "--ep %lld must divide the %lld experts of %s and the %lld GPUs of "
                              "a stage (tp %lld × dp %lld)",
                              (long long)p->ep, (long long)m->experts, name,
                              (long long)(p->tp * p->attn_dp), (long long)p->tp,
                              (long long)p->attn_dp);
    if (p->kv_dtype != LOOM_DTYPE_BF16 && p->kv_dtype != LOOM_DTYPE_FP16 &&
        p->kv_dtype != LOOM_DTYPE_FP8)
        return loom_error_set(err, LOOM_ERR_INVALID, "--kv-dtype: expected bf16 or fp8, found %s",
                              loom_dtype_name(p->kv_dtype));
    if ((unsigned)p->weights >= LOOM_WEIGHTS_COUNT)
        return loom_error_set(err, LOOM_ERR_INVALID, "--weights: unknown kind %d", (int)p->weights);
    return LOOM_OK;
}

loom_status loom_serve_shape_build(const loom_graph *g, const loom_serve_parallel *p,
                                   loom_serve_shape *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    const loom_model_info *m = loom_graph_info_c(g);
    loom_status s = check(m, p, loom_graph_name(g), err);
    if (s) return s;
    out->par = *p;
    out->gpus = p->tp * p->attn_dp * p->pp;
    out->moe_tp = m->experts > 0 ? p->tp * p->attn_dp / p->ep : 1;
    out->layers = m->layers;
    out->hidden = m->hidden;
    out->vocab = m->vocab;
    out->max_positions = m->max_positions;
    out->experts = m->experts;
    out->topk = m->experts_topk;
    out->experts_local = m->experts / p->ep;
    out->mla = m->kv_lora_rank > 0;

    /* The cost model's sharding rules, with the instance's degrees. */
    loom_parallel lp;
    loom_parallel_init(&lp);
    lp.tp = p->tp;
    lp.ep = p->ep;
    lp.etp = out->moe_tp;
    lp.dtype = m->dtype;

    const double wq = loom_serve_weights_bytes(p->weights);
    const double kvb = loom_dtype_bytes(p->kv_dtype);
    int32_t n_ops = loom_graph_num_ops(g), cap = 0;
    int32_t n_layers = loom_graph_layer_count(g);
    char *seen = calloc((size_t)loom_graph_num_tensors(g) + 1, 1);
    if (!seen) return loom_error_set(err, LOOM_ERR_NOMEM, "serving shape: out of memory");
    double block_w = 0, embed_w = 0, head_w = 0;

    for (int32_t i = 0; i < n_ops; i++) {
        const loom_op *op = loom_graph_op(g, i);
        bool block = op->layer >= 1 && op->layer <= m->layers;
        bool head = op->layer > m->layers;
        /* weights at their stored bytes, each tensor once */
        for (int k = 0; k < op->n_w; k++) {
            const loom_tensor *t = loom_graph_tensor(g, op->w[k]);
            if (seen[op->w[k]]) continue;
            seen[op->w[k]] = 1;
            double numel = (double)loom_tensor_numel(t) / (double)loom_memory_tensor_parts(t, &lp, true);
            bool quant = block && op->kind == LOOM_OP_EINSUM && t->ndim >= 2 &&
                         !(loom_tensor_dim_index(t, "e") >= 0 && loom_tensor_dim_index(t, "f") < 0) &&
                         (p->weights != LOOM_WEIGHTS_MXFP4 || loom_memory_is_expert_tensor(t));
            double b = numel * (quant ? wq : 2.0);
            if (block) block_w += b;
            else if (head) head_w += b;
            else embed_w += b;
        }
        if (op->kind == LOOM_OP_RESHAPE || op->kind == LOOM_OP_TRANSPOSE ||
            op->kind == LOOM_OP_CROSS_ENTROPY)
            continue;
        out->kernels++;
        if (op->kind == LOOM_OP_EINSUM && op->n_w > 0) {
            const loom_tensor *w = loom_graph_tensor(g, op->w[0]);
            double numel = (double)loom_tensor_numel(w);
            double parts = (double)loom_memory_tensor_parts(w, &lp, true);
            bool expert = loom_memory_is_expert_tensor(w);
            bool quant = block && w->ndim >= 2 &&
                         !(loom_tensor_dim_index(w, "e") >= 0 && !expert) &&
                         (p->weights != LOOM_WEIGHTS_MXFP4 || expert);
            double bytes_pp = quant ? wq : 2.0;
            if (head) {   /* LM head: per sampled token */
                out->head_flops_per_token += 2 * numel / parts;
                out->head_weight_bytes += numel / parts * bytes_pp;
                continue;
            }
            loom_serve_gemm gm = {0};
            gm.expert = expert;
            gm.fp8 = quant && p->weights == LOOM_WEIGHTS_FP8;
            gm.fp4 = quant && p->weights == LOOM_WEIGHTS_NVFP4;
            if (expert) {
                /* one expert's shard: numel / e / moe_tp */
                double per = numel / (double)m->experts / (double)out->moe_tp;
                gm.flops_per_token = 2 * per;
                gm.weight_bytes = per * bytes_pp;
                gm.act_bytes_per_token = 2.0 * (double)(m->hidden + m->moe_ffn / out->moe_tp);
            } else {
                gm.flops_per_token = 2 * numel / parts;
                gm.weight_bytes = numel / parts * bytes_pp;
                gm.act_bytes_per_token = act_bytes(g, op->in[0], &lp) + act_bytes(g, op->out[0], &lp);
            }
            if ((s = add_gemm(out, gm, &cap, err))) goto fail;
            if (gm.act_bytes_per_token > out->act_bytes_per_token_peak)
                out->act_bytes_per_token_peak = gm.act_bytes_per_token;
            continue;
        }
        if (op->kind == LOOM_OP_ATTENTION) {
            const loom_tensor *q = loom_graph_tensor(g, op->in[0]);
            const loom_tensor *v = loom_graph_tensor(g, op->in[2]);
            double heads_local = (double)q->dims[2].size / (double)p->tp;
            double dqk = (double)q->dims[3].size, dv = (double)v->dims[3].size;
            out->attn_prefill_flops_per_pair += 2 * heads_local * (dqk + dv);
            if (out->mla)
                out->attn_decode_flops_per_ctx +=
                    2 * heads_local * (double)(2 * m->kv_lora_rank + m->qk_rope_head_dim);
            else
                out->attn_decode_flops_per_ctx += 2 * heads_local * (dqk + dv);
            if (out->mla)
                out->kv_bytes_per_token += (double)(m->kv_lora_rank + m->qk_rope_head_dim) * kvb;
            else {
                int64_t kvh = m->kv_heads > 0 ? m->kv_heads : m->heads;
                int64_t split = p->tp < kvh ? p->tp : kvh;
                out->kv_bytes_per_token += 2.0 * (double)(kvh / split) * (double)m->head_dim * kvb;
            }
            continue;
        }
        if (op->kind == LOOM_OP_MOE_ROUTE || op->kind == LOOM_OP_MOE_DISPATCH ||
            op->kind == LOOM_OP_MOE_COMBINE) {
            /* permute / un-permute topk copies of each token (read + write) */
            out->other_bytes_per_token += 4.0 * (double)(m->hidden * m->experts_topk);
            continue;
        }
        if (op->kind == LOOM_OP_EMBEDDING) {
            out->other_bytes_per_token += 4.0 * (double)m->hidden;
            continue;
        }
        double b = 0;
        for (int k = 0; k < op->n_in; k++) b += act_bytes(g, op->in[k], &lp);
        for (int k = 0; k < op->n_out; k++) b += act_bytes(g, op->out[k], &lp);
        out->other_bytes_per_token += b;
    }
    /* collectives per forward: an all-reduce after attention and after the
     * MLP of each block when tp > 1; a MoE block with ep > 1 dispatches and
     * combines by all-to-all instead of reducing */
    for (int32_t l = 1; l < n_layers && l <= m->layers; l++) {
        int32_t first, count;
        bool moe = false;
        loom_graph_layer_ops(g, l, &first, &count);
        for (int32_t i = first; i < first + count && !moe; i++)
            moe = loom_graph_op(g, i)->kind == LOOM_OP_MOE_DISPATCH;
        if (p->tp > 1) out->allreduces++;
        if (moe) {
            out->moe_layers++;
            if (p->ep > 1) out->alltoalls += 2;
            else if (p->tp * p->attn_dp > 1) out->allreduces++;
        } else if (p->tp > 1)
            out->allreduces++;
    }
    if (p->tp > 1) out->allreduces++;   /* the vocab-parallel embedding */
    out->weight_bytes_gpu = block_w + embed_w + head_w;
    out->weight_bytes_stage = p->pp > 1 ? block_w / (double)p->pp + (embed_w > head_w ? embed_w : head_w)
                                        : out->weight_bytes_gpu;
    free(seen);
    return LOOM_OK;
fail:
    free(seen);
    loom_serve_shape_free(out);
    return s;
}
