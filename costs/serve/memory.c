/*
 * memory.c — serving memory and KV capacity (memory.h has the model).
 */
#include "costs/serve/memory.h"

#include <string.h>

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

loom_status loom_serve_memory_compute(const loom_serve_shape *s, const loom_serve_engine *e,
                                      const loom_device *d, int64_t seq_tokens,
                                      loom_serve_memory *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    if (seq_tokens < 1)
        return loom_error_set(err, LOOM_ERR_INVALID, "serving memory: request length %lld < 1",
                              (long long)seq_tokens);
    const loom_serve_parallel *p = &s->par;
    out->capacity_bytes = d->hbm_bytes;
    out->weights_bytes = (int64_t)(s->weight_bytes_stage + 0.5);
    /* tokens of the largest iteration on one attention-DP rank */
    double tokens = (double)e->max_batched_tokens;
    double seqs = (double)e->max_num_seqs / (double)p->attn_dp;
    double logits = seqs * (double)s->vocab / (double)p->tp * 4.0 * 2;   /* fp32 logits + sampler */
    if (logits > 4.0 * (double)((int64_t)1 << 30)) logits = 4.0 * (double)((int64_t)1 << 30);
    out->activation_bytes = (int64_t)(2.0 * tokens * s->act_bytes_per_token_peak + logits);
    out->cuda_graph_bytes = e->cuda_graph_count * LOOM_SERVE_GRAPH_BYTES;
    out->comm_bytes = s->gpus > 1 ? LOOM_SERVE_COMM_BYTES : 0;
    out->context_bytes = LOOM_SERVE_CONTEXT_BYTES;
    double hbm = (double)d->hbm_bytes, kv;
    switch (e->kind) {
    case LOOM_ENGINE_SGLANG:
        kv = e->mem_fraction * hbm - (double)out->weights_bytes;
        break;
    case LOOM_ENGINE_TRTLLM:
        kv = (hbm - (double)(out->weights_bytes + out->context_bytes + out->comm_bytes +
                             out->activation_bytes + out->cuda_graph_bytes));
        if (e->mem_fraction_of_free) kv *= e->mem_fraction;
        break;
    case LOOM_ENGINE_VLLM:
    default:
        kv = e->mem_fraction * hbm - (double)(out->weights_bytes + out->activation_bytes +
                                              out->context_bytes + out->comm_bytes);
        break;
    }
    out->kv_bytes_per_token = s->kv_bytes_per_token / (double)p->pp;
    int64_t blocks = 0;
    if (kv > 0 && out->kv_bytes_per_token > 0)
        blocks = (int64_t)(kv / (out->kv_bytes_per_token * (double)e->block_size));
    out->kv_bytes = (int64_t)((double)blocks * (double)e->block_size * out->kv_bytes_per_token);
    out->kv_capacity_tokens = blocks * e->block_size * p->attn_dp;
    out->total_bytes = out->weights_bytes + out->activation_bytes + out->cuda_graph_bytes +
                       out->comm_bytes + out->context_bytes + out->kv_bytes;
    /* blocks one request needs at its longest, on its attention-DP rank */
    int64_t per_req = (seq_tokens + e->block_size - 1) / e->block_size * e->block_size;
    out->max_concurrency = out->kv_capacity_tokens / per_req;
    if (out->max_concurrency > e->max_num_seqs) out->max_concurrency = e->max_num_seqs;
    out->fits = out->max_concurrency >= 1 && out->total_bytes <= max64(out->capacity_bytes, 0);
    return LOOM_OK;
}
