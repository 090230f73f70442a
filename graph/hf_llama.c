/*
 * hf_llama.c — the Llama-like decoders from an HF config.json (config
 * reading in hf_llama_cfg.c): Llama 1/2/3, Mistral and Mixtral (sliding
 * window), Qwen2/2.5 (bias on q/k/v), Qwen3 (QK-norm, explicit head_dim),
 * Qwen2-MoE (gated shared expert) and Qwen3-MoE, Phi-3/4, Gemma 2/3 (sandwich
 * norms, GeGLU, scaled tied embeddings, local/global layers), Llama 4 text
 * (chunked local attention, routed + shared expert) and gpt-oss (biases,
 * router bias, alternating sliding-window layers).
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
 *
 * Not in the graph, each under 0.05% of the parameters and FLOPs: gpt-oss's
 * per-head attention sinks and its expert biases (loom_model_info's
 * expert_bias says they exist: Megatron-Core adds the output one in eager
 * kernels whose time costs/compute.c prices), Gemma 2's tanh logit
 * soft-capping (a fused elementwise step of the attention and head kernels),
 * Llama 4's weightless L2 QK-norm.
 */
#include <stdio.h>
#include <string.h>

#include "graph/hf_llama.h"
#include "graph/model_facts.h"

/* q/k/v projections, QK-norm, RoPE, attention (windowed or chunked on local
 * layers) and o_proj of layer i on the normed input xn. */
static loom_status attention(loom_hf_builder *hb, const loom_hf_llama_cfg *lc, int64_t i,
                             int32_t L, const char *a, int32_t xn, int32_t *y)
{
    const loom_model_info *m = &lc->m;
    char n[256], n2[256], n3[256];
    int32_t q, k, v, qr, kr, o;
    loom_dim h = {"h", m->hidden}, nh = {"heads", m->heads}, kvh = {"kvh", m->kv_heads},
             dh = {"dh", m->head_dim};
    int qb = lc->attn_bias ? 2 : 0;
    loom_status s;
    loom_hf_name(n, "%s.q_proj", a);
    loom_hf_name(n2, "%s.k_proj", a);
    loom_hf_name(n3, "%s.v_proj", a);
    if ((s = loom_hf_linear(hb, n, L, xn, "bsh,hnd->bsnd", LOOM_HF_DIMS(h, nh, dh), qb, &q)) ||
        (s = loom_hf_linear(hb, n2, L, xn, "bsh,hkd->bskd", LOOM_HF_DIMS(h, kvh, dh), qb, &k)) ||
        (s = loom_hf_linear(hb, n3, L, xn, "bsh,hkd->bskd", LOOM_HF_DIMS(h, kvh, dh), qb, &v)))
        return s;
    if (lc->qk_norm) {   /* Qwen3 / Gemma 3: RMSNorm over each head's dh, weight [dh] */
        loom_hf_name(n, "%s.q_norm", a);
        loom_hf_name(n2, "%s.k_norm", a);
        if ((s = loom_hf_norm(hb, n, L, "rmsnorm", q, &q)) ||
            (s = loom_hf_norm(hb, n2, L, "rmsnorm", k, &k)))
            return s;
    }
    /* RoPE is a rotation: its backward needs only cos/sin, nothing saved. */
    loom_hf_name(n, "%s.q_rope", a);
    loom_hf_name(n2, "%s.k_rope", a);
    loom_hf_span span = {0};
    if (lc->local[i]) span = lc->chunk > 0 ? (loom_hf_span){.chunk = lc->chunk}
                                           : (loom_hf_span){.window = lc->window};
    if ((s = loom_hf_elementwise(hb, n, L, "rope", 1, &q, 0, &qr)) ||
        (s = loom_hf_elementwise(hb, n2, L, "rope", 1, &k, 0, &kr)) ||
        (s = loom_hf_attention(hb, a, L, qr, kr, v, 0.0, &span, &o)))
        return s;
    loom_hf_name(n, "%s.o_proj", a);
    return loom_hf_linear(hb, n, L, o, "bsnd,ndh->bsh", LOOM_HF_DIMS(nh, dh, h),
                          lc->o_bias ? 1 : 0, y);
}

/* Gated MLP "<prefix>.{gate,up,down}_proj" of width f. */
static loom_status dense_mlp(loom_hf_builder *hb, const loom_hf_llama_cfg *lc, int32_t L,
                             const char *prefix, int64_t f, int32_t x, int32_t *y)
{
    char n[4][256];
    const char *sfx[4] = {"gate_proj", "up_proj", "down_proj", "act_fn"};
    for (int j = 0; j < 4; j++) loom_hf_name(n[j], "%s.%s", prefix, sfx[j]);
    loom_dim h = {"h", lc->m.hidden}, fd = {"f", f};
    loom_hf_swiglu ml = {.gate = n[0], .up = n[1], .down = n[2], .act = n[3],
                         .act_fn = lc->geglu ? "geglu" : NULL,
                         .sub_in = "bsh,hf->bsf", .sub_out = "bsf,fh->bsh", .wndim = 2,
                         .w_in = (loom_dim[]){h, fd}, .w_out = (loom_dim[]){fd, h},
                         .bias_ndim = lc->mlp_bias ? 1 : 0};
    return loom_hf_swiglu_mlp(hb, L, &ml, x, y);
}

/* Routed experts (+ a shared expert, gated for Qwen2-MoE) of layer p. */
static loom_status moe_mlp(loom_hf_builder *hb, const loom_hf_llama_cfg *lc, int32_t L,
                           const char *p, int32_t x, int32_t *y)
{
    const loom_model_info *m = &lc->m;
    bool mixtral = strcmp(lc->names, "llama") == 0, llama4 = strcmp(lc->names, "llama4") == 0;
    const char *grp = mixtral ? "block_sparse_moe" : llama4 ? "feed_forward" : "mlp";
    const char *router = mixtral || strcmp(lc->names, "qwen_moe") == 0 ? "gate" : "router";
    const char *ex[4] = {"experts.gate_proj", "experts.up_proj", "experts.down_proj",
                         "experts.act_fn"};
    if (mixtral) ex[0] = "experts.w1", ex[1] = "experts.w3", ex[2] = "experts.w2";
    char nm[8][256], n[256], n2[256];
    loom_hf_name(nm[0], "%s.%s.%s", p, grp, router);
    loom_hf_name(nm[1], "%s.%s.route", p, grp);
    loom_hf_name(nm[2], "%s.%s.dispatch", p, grp);
    loom_hf_name(nm[3], "%s.%s.combine", p, grp);
    for (int j = 0; j < 4; j++) loom_hf_name(nm[4 + j], "%s.%s.%s", p, grp, ex[j]);
    loom_hf_moe mb = {.gate = nm[0], .route = nm[1], .dispatch = nm[2], .combine = nm[3],
                      .w_gate = nm[4], .w_up = nm[5], .w_down = nm[6], .act = nm[7],
                      .experts = m->experts, .topk = m->experts_topk, .f = m->moe_ffn,
                      .gate_bias = lc->router_bias};
    loom_status s = loom_hf_moe_block(hb, L, &mb, x, y);
    if (s || lc->shared_ffn == 0) return s;
    int32_t shared, two[2];
    loom_hf_name(n, "%s.%s.shared_expert", p, grp);
    if ((s = dense_mlp(hb, lc, L, n, lc->shared_ffn, x, &shared))) return s;
    if (lc->shared_gate) {   /* Qwen2-MoE: sigmoid(x · w) [b, s, 1] scales the shared output */
        int32_t g, gated;
        loom_hf_name(n, "%s.%s.shared_expert_gate", p, grp);
        loom_hf_name(n2, "%s.%s.shared_expert_scale", p, grp);
        two[0] = shared;
        if ((s = loom_hf_linear(hb, n, L, x, "bsh,hg->bsg",
                                LOOM_HF_DIMS({"h", m->hidden}, {"g", 1}), 0, &g)))
            return s;
        two[1] = g;
        if ((s = loom_hf_elementwise(hb, n2, L, "mul", 2, two, LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1),
                                     &gated)))
            return s;
        shared = gated;
    }
    two[0] = *y, two[1] = shared;
    loom_hf_name(n, "%s.%s.shared_add", p, grp);
    return loom_hf_elementwise(hb, n, L, "add", 2, two, 0, y);
}

/* One decoder layer: HF index i, loom layer i + 1. Gemma's sandwich adds a
 * norm after attention and around the MLP:
 *   x ─ input_layernorm ─ attn ─ post_attention_layernorm ─ (+x)
 *     ─ pre_feedforward_layernorm ─ mlp ─ post_feedforward_layernorm ─ (+) */
static loom_status layer(loom_hf_builder *hb, const void *cfg, int64_t i, int32_t x, int32_t *y)
{
    const loom_hf_llama_cfg *lc = cfg;
    const loom_model_info *m = &lc->m;
    char p[256], a[256], n[256];
    int32_t L = (int32_t)i + 1, xn, attn, x2, xn2, mlp;
    bool llama4 = strcmp(lc->names, "llama4") == 0;
    loom_status s;
    loom_hf_name(p, "model.layers.%lld", (long long)i);
    loom_hf_name(a, "%s.self_attn", p);

    loom_hf_name(n, "%s.input_layernorm", p);
    if ((s = loom_hf_norm(hb, n, L, "rmsnorm", x, &xn)) ||
        (s = attention(hb, lc, i, L, a, xn, &attn)))
        return s;
    if (lc->sandwich) {
        loom_hf_name(n, "%s.post_attention_layernorm", p);
        if ((s = loom_hf_norm(hb, n, L, "rmsnorm", attn, &attn))) return s;
    }
    if ((s = loom_hf_residual(hb, p, "attn", L, x, attn, &x2))) return s;
    loom_hf_name(n, lc->sandwich ? "%s.pre_feedforward_layernorm" : "%s.post_attention_layernorm", p);
    if ((s = loom_hf_norm(hb, n, L, "rmsnorm", x2, &xn2))) return s;

    if (m->experts > 0 && lc->moe[i]) {
        s = moe_mlp(hb, lc, L, p, xn2, &mlp);
    } else {
        loom_hf_name(n, llama4 ? "%s.feed_forward" : "%s.mlp", p);
        s = dense_mlp(hb, lc, L, n, m->ffn, xn2, &mlp);
    }
    if (s) return s;
    if (lc->sandwich) {
        loom_hf_name(n, "%s.post_feedforward_layernorm", p);
        if ((s = loom_hf_norm(hb, n, L, "rmsnorm", mlp, &mlp))) return s;
    }
    return loom_hf_residual(hb, p, "mlp", L, x2, mlp, y);
}

/* Gemma: token embeddings scaled by sqrt(hidden) (one elementwise op). */
static loom_status gemma_embed(loom_hf_builder *hb, const void *cfg, int32_t ids, int32_t *table,
                               int32_t *x)
{
    const loom_hf_llama_cfg *lc = cfg;
    int32_t e;
    loom_status s = loom_hf_embedding(hb, "model.embed_tokens", 0, ids,
                                      (loom_dim){"v", lc->m.vocab}, lc->m.hidden, table, &e);
    if (s) return s;
    return loom_hf_elementwise(hb, "model.embed_scale", 0, "scale", 1, &e, 0, x);
}

loom_status loom_hf_build_llama(const loom_jctx *c, const cJSON *cfg, const char *name,
                                const char *arch, const loom_model_opts *o, loom_graph **out)
{
    loom_hf_llama_cfg lc;
    *out = NULL;
    loom_status s = loom_hf_llama_cfg_read(c, cfg, arch, &lc);
    if (s == LOOM_OK) s = loom_model_facts_from_hf(c, cfg, arch, &lc.m.facts);
    if (s) {
        loom_hf_llama_cfg_free(&lc);
        return s;
    }
    loom_hf_family f = {.info = lc.m, .final_norm = "model.norm", .norm_fn = "rmsnorm",
                        .embed = lc.embed_scale ? gemma_embed : NULL, .block = layer, .cfg = &lc,
                        .rope_scaling = lc.rope_type, .rope_factor = lc.rope_factor,
                        .n_warnings = lc.n_warn, .warnings = lc.warn};
    s = loom_hf_build(c, name, o, &f, out);
    loom_hf_llama_cfg_free(&lc);
    return s;
}
