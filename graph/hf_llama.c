/*
 * hf_llama.c — the Llama family from an HF config.json: Llama 1/2/3,
 * Mistral, Qwen2 (bias on q/k/v), Qwen3 (explicit head_dim, no bias; its
 * q/k RMSNorm is left out), Mixtral and Qwen3-MoE (top-k mixture of experts).
 *
 * One decoder layer (HF LlamaDecoderLayer; module paths are op names):
 *
 *   x ─ input_layernorm (RMSNorm) ─ q_proj, k_proj, v_proj ─ RoPE(q, k)
 *     ─ attention (GQA: kvh kv heads shared by heads/kvh query heads each)
 *     ─ o_proj ─ (+x) ─ post_attention_layernorm ─ SwiGLU MLP
 *       (gate_proj, up_proj, act_fn, down_proj) or Mixtral's
 *       block_sparse_moe (gate, route, dispatch, experts.w1/w3/w2, combine)
 *     ─ (+) ─ next layer
 *
 * Parameters per layer (dense): h·dh·(2·heads + 2·kvh) for attention,
 * 3·h·f for the MLP (e·3·h·f + h·e for Mixtral), 2h for the norms; plus
 * v·h for embed_tokens, v·h for an untied lm_head and h for model.norm.
 * Llama-3-8B: 32 · 218.1M + 2 · 525.3M + 4096 = 8.03B (Meta's model card).
 */
#include <stdio.h>
#include <string.h>

#include "graph/hf_build.h"

typedef struct {
    loom_model_info m;          /* sizes and flags, copied into the graph */
    bool attn_bias, mlp_bias;   /* Llama's attention_bias (q/k/v/o) and mlp_bias */
} llama_cfg;

/* Reads and checks the config fields this family uses. */
static loom_status read_cfg(const loom_jctx *c, const cJSON *cfg, const char *arch, llama_cfg *lc)
{
    const int64_t big = (int64_t)1 << 40, max_layers = 100000;
    loom_model_info *m = &lc->m;
    memset(lc, 0, sizeof *lc);
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    m->gated_mlp = true;
    loom_status s;
    if ((s = loom_hf_size(c, cfg, "hidden_size", true, big, &m->hidden)) ||
        (s = loom_hf_size(c, cfg, "num_hidden_layers", true, max_layers, &m->layers)) ||
        (s = loom_hf_size(c, cfg, "num_attention_heads", true, big, &m->heads)) ||
        (s = loom_hf_size(c, cfg, "intermediate_size", true, big, &m->ffn)) ||
        (s = loom_hf_size(c, cfg, "vocab_size", true, big, &m->vocab)))
        return s;
    m->kv_heads = m->heads;
    if ((s = loom_hf_size(c, cfg, "num_key_value_heads", false, big, &m->kv_heads)) ||
        (s = loom_hf_size(c, cfg, "head_dim", false, big, &m->head_dim)) ||
        (s = loom_hf_size(c, cfg, "max_position_embeddings", false, big, &m->max_positions)) ||
        (s = loom_json_get_bool(c, cfg, "$", "tie_word_embeddings", false, &m->tied_embeddings)) ||
        (s = loom_json_get_bool(c, cfg, "$", "attention_bias", false, &lc->attn_bias)) ||
        (s = loom_json_get_bool(c, cfg, "$", "mlp_bias", false, &lc->mlp_bias)))
        return s;
    /* An explicit head_dim (Mistral-Nemo, Qwen3) need not equal hidden/heads. */
    bool derive = m->head_dim == 0;
    if ((s = loom_hf_heads(c, m->hidden, m->heads, m->kv_heads, derive ? "hidden_size" : NULL,
                           "num_attention_heads", "num_key_value_heads")))
        return s;
    if (derive) m->head_dim = m->hidden / m->heads;
    m->qkv_bias = lc->attn_bias || strcmp(arch, "qwen2") == 0;
    if (strcmp(arch, "qwen3_moe") == 0) {
        /* Qwen3-MoE: every block is sparse (decoder_sparse_step 1, no
         * mlp_only_layers), experts of moe_intermediate_size, no shared
         * expert; q/k RMSNorm is left out (h-sized, negligible) */
        if ((s = loom_hf_size(c, cfg, "num_experts", true, 1 << 20, &m->experts)) ||
            (s = loom_hf_size(c, cfg, "num_experts_per_tok", true, 1 << 20, &m->experts_topk)) ||
            (s = loom_hf_size(c, cfg, "moe_intermediate_size", true, big, &m->moe_ffn)))
            return s;
        m->ffn = m->moe_ffn;
    }
    if (strcmp(arch, "mixtral") == 0) {
        if ((s = loom_hf_size(c, cfg, "num_local_experts", true, 1 << 20, &m->experts)) ||
            (s = loom_hf_size(c, cfg, "num_experts_per_tok", true, 1 << 20, &m->experts_topk)))
            return s;
        if (m->experts_topk > m->experts)
            return loom_json_fail(c, "$", "num_experts_per_tok = %lld exceeds num_local_experts = %lld",
                                  (long long)m->experts_topk, (long long)m->experts);
        m->moe_ffn = m->ffn;   /* Mixtral's intermediate_size is each expert's */
    }
    return LOOM_OK;
}

/* One decoder layer: HF index i, loom layer i + 1. */
static loom_status layer(loom_hf_builder *hb, const void *cfg, int64_t i, int32_t x, int32_t *y)
{
    const llama_cfg *lc = cfg;
    const loom_model_info *m = &lc->m;
    char p[256], a[256], n[256], n2[256], n3[256], n4[256];
    int32_t L = (int32_t)i + 1, xn, q, k, v, qr, kr, o, attn, x2, xn2, mlp;
    loom_dim h = {"h", m->hidden}, nh = {"heads", m->heads}, kvh = {"kvh", m->kv_heads},
             dh = {"dh", m->head_dim}, f = {"f", m->ffn};
    int qb = m->qkv_bias ? 2 : 0;
    loom_status s;
    loom_hf_name(p, "model.layers.%lld", (long long)i);
    loom_hf_name(a, "%s.self_attn", p);

    loom_hf_name(n, "%s.input_layernorm", p);
    if ((s = loom_hf_norm(hb, n, L, "rmsnorm", x, &xn))) return s;
    loom_hf_name(n, "%s.q_proj", a);
    loom_hf_name(n2, "%s.k_proj", a);
    loom_hf_name(n3, "%s.v_proj", a);
    if ((s = loom_hf_linear(hb, n, L, xn, "bsh,hnd->bsnd", LOOM_HF_DIMS(h, nh, dh), qb, &q)) ||
        (s = loom_hf_linear(hb, n2, L, xn, "bsh,hkd->bskd", LOOM_HF_DIMS(h, kvh, dh), qb, &k)) ||
        (s = loom_hf_linear(hb, n3, L, xn, "bsh,hkd->bskd", LOOM_HF_DIMS(h, kvh, dh), qb, &v)))
        return s;
    /* RoPE is a rotation: its backward needs only cos/sin, nothing saved. */
    loom_hf_name(n, "%s.q_rope", a);
    loom_hf_name(n2, "%s.k_rope", a);
    if ((s = loom_hf_elementwise(hb, n, L, "rope", 1, &q, 0, &qr)) ||
        (s = loom_hf_elementwise(hb, n2, L, "rope", 1, &k, 0, &kr)) ||
        (s = loom_hf_attention(hb, a, L, qr, kr, v, 0.0, &o)))
        return s;
    loom_hf_name(n, "%s.o_proj", a);
    if ((s = loom_hf_linear(hb, n, L, o, "bsnd,ndh->bsh", LOOM_HF_DIMS(nh, dh, h),
                            lc->attn_bias ? 1 : 0, &attn)))
        return s;
    if ((s = loom_hf_residual(hb, p, "attn", L, x, attn, &x2))) return s;
    loom_hf_name(n, "%s.post_attention_layernorm", p);
    if ((s = loom_hf_norm(hb, n, L, "rmsnorm", x2, &xn2))) return s;

    if (m->experts > 0) {
        char moe[256], names[8][256];
        loom_hf_name(moe, "%s.block_sparse_moe", p);
        const char *sfx[8] = {"gate", "route", "dispatch", "combine", "experts.w1", "experts.w3",
                              "experts.w2", "experts.act_fn"};
        for (int j = 0; j < 8; j++) loom_hf_name(names[j], "%s.%s", moe, sfx[j]);
        loom_hf_moe mb = {.gate = names[0], .route = names[1], .dispatch = names[2],
                          .combine = names[3], .w_gate = names[4], .w_up = names[5],
                          .w_down = names[6], .act = names[7], .experts = m->experts,
                          .topk = m->experts_topk, .f = m->ffn};
        if ((s = loom_hf_moe_block(hb, L, &mb, xn2, &mlp))) return s;
    } else {
        loom_hf_name(n, "%s.mlp.gate_proj", p);
        loom_hf_name(n2, "%s.mlp.up_proj", p);
        loom_hf_name(n3, "%s.mlp.down_proj", p);
        loom_hf_name(n4, "%s.mlp.act_fn", p);
        loom_hf_swiglu ml = {.gate = n, .up = n2, .down = n3, .act = n4,
                             .sub_in = "bsh,hf->bsf", .sub_out = "bsf,fh->bsh", .wndim = 2,
                             .w_in = (loom_dim[]){h, f}, .w_out = (loom_dim[]){f, h},
                             .bias_ndim = lc->mlp_bias ? 1 : 0};
        if ((s = loom_hf_swiglu_mlp(hb, L, &ml, xn2, &mlp))) return s;
    }
    return loom_hf_residual(hb, p, "mlp", L, x2, mlp, y);
}

loom_status loom_hf_build_llama(const loom_jctx *c, const cJSON *cfg, const char *name,
                                const char *arch, const loom_model_opts *o, loom_graph **out)
{
    llama_cfg lc;
    *out = NULL;
    loom_status s = read_cfg(c, cfg, arch, &lc);
    if (s) return s;
    loom_hf_family f = {.info = lc.m, .final_norm = "model.norm", .norm_fn = "rmsnorm",
                        .block = layer, .cfg = &lc};
    return loom_hf_build(c, name, o, &f, out);
}
