/*
 * hf_deepseek.c — DeepSeek-V2 / V3 from an HF config.json: multi-head latent
 * attention (MLA) and a mixture of routed + shared experts.
 *
 * MLA (DeepSeek-V2 paper, §2.1; HF DeepseekV3Attention), training form:
 *
 *   q:  x ─ q_a_proj [h, ql] ─ q_a_layernorm ─ q_b_proj [ql, heads, dn+dr]
 *       (or q_proj [h, heads, dn+dr] when q_lora_rank is null)
 *   kv: x ─ kv_a_proj_with_mqa [h, kvl+dr] ─ split: c_kv [kvl] and k_pe [dr]
 *       c_kv ─ kv_a_layernorm ─ kv_b_proj [kvl, heads, dn+dv] ─ split: k_nope, v
 *   RoPE on q and on k_pe (one rope key shared by all heads), k = [k_nope, k_pe]
 *   attention over heads with q/k head dim dn+dr and value head dim dv,
 *   o_proj [heads, dv, h].
 *
 * MLP: layers before first_k_dense_replace (and off the moe_layer_freq grid)
 * are dense SwiGLU of intermediate_size; the others route each token to
 * num_experts_per_tok of n_routed_experts experts of moe_intermediate_size
 * and add n_shared_experts always-on experts (one SwiGLU of
 * n_shared · moe_intermediate_size). V3's router carries an
 * e_score_correction_bias [e] used for top-k selection.
 *
 * DeepSeek-V3 (h 7168, 61 layers, 3 dense): MLA 187.1M, dense MLP 396.4M,
 * MoE 256·44.04M + 44.04M + 1.84M per layer, embeddings 2·926.6M:
 * 671.0B in all — the published 671B main model.
 *
 * Multi-token prediction (num_nextn_predict_layers = 1 in V3) is trained
 * but not served: with loom_model_opts.mtp the graph gains, in the head
 * layer, one more block of this kind (HF's "model.layers.61": MLA + MoE,
 * 11.51B), enorm, hnorm and eh_proj [2h, h] (102.8M) and a second
 * vocabulary projection and loss through the shared embedding table and
 * lm_head (hf_build.c): 11.61B more parameters. HF's checkpoint stores
 * the MTP module with its own embed_tokens and shared_head.head copies
 * (2·926.6M), which make its published 14B: 671.0 + 11.61 + 1.85 = 684.5B,
 * the "685B" of the model card.
 */
#include <stdio.h>
#include <string.h>

#include "graph/hf_build.h"
#include "graph/model_facts.h"

typedef struct {
    loom_model_info m;     /* sizes copied into the graph (head_dim = nope + rope) */
    int64_t nope, freq;    /* qk_nope_head_dim, moe_layer_freq */
    bool route_bias;       /* V3's e_score_correction_bias */
} ds_cfg;

static loom_status read_cfg(const loom_jctx *c, const cJSON *cfg, const char *arch, ds_cfg *dc)
{
    const int64_t big = (int64_t)1 << 40;
    loom_model_info *m = &dc->m;
    memset(dc, 0, sizeof *dc);
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    m->gated_mlp = true;
    dc->freq = 1;
    loom_status s;
    if ((s = loom_hf_size(c, cfg, "hidden_size", true, LOOM_MAX_WIDTH, &m->hidden)) ||
        (s = loom_hf_size(c, cfg, "num_hidden_layers", true, LOOM_MAX_LAYERS, &m->layers)) ||
        (s = loom_hf_size(c, cfg, "num_attention_heads", true, LOOM_MAX_WIDTH, &m->heads)) ||
        (s = loom_hf_size(c, cfg, "intermediate_size", true, LOOM_MAX_FFN, &m->ffn)) ||
        (s = loom_hf_size(c, cfg, "vocab_size", true, LOOM_MAX_VOCAB, &m->vocab)) ||
        (s = loom_hf_size(c, cfg, "kv_lora_rank", true, LOOM_MAX_WIDTH, &m->kv_lora_rank)) ||
        (s = loom_hf_size(c, cfg, "qk_nope_head_dim", true, LOOM_MAX_WIDTH, &dc->nope)) ||
        (s = loom_hf_size(c, cfg, "qk_rope_head_dim", true, LOOM_MAX_WIDTH, &m->qk_rope_head_dim)) ||
        (s = loom_hf_size(c, cfg, "v_head_dim", true, LOOM_MAX_WIDTH, &m->v_head_dim)) ||
        (s = loom_hf_size(c, cfg, "q_lora_rank", false, LOOM_MAX_WIDTH, &m->q_lora_rank)) ||
        (s = loom_hf_size(c, cfg, "max_position_embeddings", false, big, &m->max_positions)) ||
        (s = loom_hf_size(c, cfg, "n_routed_experts", false, LOOM_MAX_EXPERTS, &m->experts)) ||
        (s = loom_json_get_bool(c, cfg, "$", "tie_word_embeddings", false, &m->tied_embeddings)))
        return s;
    /* MLA attends with as many kv heads as query heads (the latent is shared,
     * the per-head keys and values are not). */
    m->kv_heads = m->heads;
    m->head_dim = dc->nope + m->qk_rope_head_dim;
    if (m->experts > 0) {
        if ((s = loom_hf_size(c, cfg, "num_experts_per_tok", true, LOOM_MAX_EXPERTS, &m->experts_topk)) ||
            (s = loom_hf_size(c, cfg, "moe_intermediate_size", true, LOOM_MAX_FFN, &m->moe_ffn)) ||
            (s = loom_json_get_int(c, cfg, "$", "n_shared_experts", false, 0, LOOM_MAX_EXPERTS,
                                   &m->shared_experts)) ||
            (s = loom_json_get_int(c, cfg, "$", "first_k_dense_replace", false, 0, 100000,
                                   &m->first_dense)) ||
            (s = loom_hf_size(c, cfg, "moe_layer_freq", false, 100000, &dc->freq)))
            return s;
        if (m->experts_topk > m->experts)
            return loom_json_fail(c, "$", "num_experts_per_tok = %lld exceeds n_routed_experts = %lld",
                                  (long long)m->experts_topk, (long long)m->experts);
    }
    dc->route_bias = strcmp(arch, "deepseek_v3") == 0;
    return LOOM_OK;
}

/* MLA of layer i (loom layer L) on the normed input xn. */
static loom_status mla(loom_hf_builder *hb, const ds_cfg *dc, const char *a, int32_t L, int32_t xn,
                       int32_t *o)
{
    const loom_model_info *m = &dc->m;
    int64_t rope = m->qk_rope_head_dim;
    char n[256], n2[256];
    loom_dim h = {"h", m->hidden}, nh = {"heads", m->heads}, dh = {"dh", m->head_dim},
             ql = {"ql", m->q_lora_rank}, kva = {"kva", m->kv_lora_rank + rope},
             kvl = {"kvl", m->kv_lora_rank}, dr = {"dr", rope}, dkv = {"dkv", dc->nope + m->v_head_dim},
             dn = {"dn", dc->nope}, dv = {"dv", m->v_head_dim};
    int32_t q, qa, qan, kvp, parts[2], ckv, kvb, kv[2], qr, kpe, k;
    loom_status s;
    if (m->q_lora_rank > 0) {
        loom_hf_name(n, "%s.q_a_proj", a);
        if ((s = loom_hf_linear(hb, n, L, xn, "bsh,hq->bsq", LOOM_HF_DIMS(h, ql), 0, &qa))) return s;
        loom_hf_name(n, "%s.q_a_layernorm", a);
        if ((s = loom_hf_norm(hb, n, L, "rmsnorm", qa, &qan))) return s;
        loom_hf_name(n, "%s.q_b_proj", a);
        if ((s = loom_hf_linear(hb, n, L, qan, "bsq,qnd->bsnd", LOOM_HF_DIMS(ql, nh, dh), 0, &q)))
            return s;
    } else {
        loom_hf_name(n, "%s.q_proj", a);
        if ((s = loom_hf_linear(hb, n, L, xn, "bsh,hnd->bsnd", LOOM_HF_DIMS(h, nh, dh), 0, &q)))
            return s;
    }
    loom_hf_name(n, "%s.kv_a_proj_with_mqa", a);
    if ((s = loom_hf_linear(hb, n, L, xn, "bsh,hr->bsr", LOOM_HF_DIMS(h, kva), 0, &kvp))) return s;
    const loom_tensor *t = loom_graph_tensor(hb->g, kvp);
    loom_dim b = t->dims[0], sq = t->dims[1];
    {
        loom_dim d0[3] = {b, sq, kvl}, d1[3] = {b, sq, dr};
        const loom_dim *pd[2] = {d0, d1};
        int32_t nd[2] = {3, 3};
        loom_hf_name(n, "%s.kv_a_split", a);
        if ((s = loom_hf_view(hb, n, L, 1, &kvp, 2, nd, pd, parts))) return s;
    }
    loom_hf_name(n, "%s.kv_a_layernorm", a);
    if ((s = loom_hf_norm(hb, n, L, "rmsnorm", parts[0], &ckv))) return s;
    loom_hf_name(n, "%s.kv_b_proj", a);
    if ((s = loom_hf_linear(hb, n, L, ckv, "bsc,cnd->bsnd", LOOM_HF_DIMS(kvl, nh, dkv), 0, &kvb)))
        return s;
    {
        loom_dim d0[4] = {b, sq, nh, dn}, d1[4] = {b, sq, nh, dv};
        const loom_dim *pd[2] = {d0, d1};
        int32_t nd[2] = {4, 4};
        loom_hf_name(n, "%s.kv_b_split", a);
        if ((s = loom_hf_view(hb, n, L, 1, &kvb, 2, nd, pd, kv))) return s;
    }
    loom_hf_name(n, "%s.q_rope", a);
    loom_hf_name(n2, "%s.k_rope", a);
    if ((s = loom_hf_elementwise(hb, n, L, "rope", 1, &q, 0, &qr)) ||
        (s = loom_hf_elementwise(hb, n2, L, "rope", 1, &parts[1], 0, &kpe)))
        return s;
    /* k = [k_nope, k_pe broadcast over heads]: modelled as a view (the copy
     * is cheap next to the projections and is not saved). */
    {
        loom_dim d[4] = {b, sq, nh, dh};
        const loom_dim *pd = d;
        int32_t nd = 4, in[2] = {kv[0], kpe};
        loom_hf_name(n, "%s.k_concat", a);
        if ((s = loom_hf_view(hb, n, L, 2, in, 1, &nd, &pd, &k))) return s;
    }
    return loom_hf_attention(hb, a, L, qr, k, kv[1], 0.0, NULL, o);
}

static loom_status layer(loom_hf_builder *hb, const void *cfg, int64_t i, int32_t x, int32_t *y)
{
    const ds_cfg *dc = cfg;
    const loom_model_info *m = &dc->m;
    char p[256], a[256], n[256], nm[8][256];
    /* the multi-token-prediction depths (i >= layers) run in the head layer */
    int32_t L = (int32_t)(i < m->layers ? i + 1 : m->layers + 1), xn, o, attn, x2, xn2, mlp;
    loom_dim h = {"h", m->hidden}, nh = {"heads", m->heads}, dv = {"dv", m->v_head_dim};
    loom_status s;
    loom_hf_name(p, "model.layers.%lld", (long long)i);
    loom_hf_name(a, "%s.self_attn", p);
    loom_hf_name(n, "%s.input_layernorm", p);
    if ((s = loom_hf_norm(hb, n, L, "rmsnorm", x, &xn)) || (s = mla(hb, dc, a, L, xn, &o))) return s;
    loom_hf_name(n, "%s.o_proj", a);
    if ((s = loom_hf_linear(hb, n, L, o, "bsnd,ndh->bsh", LOOM_HF_DIMS(nh, dv, h), 0, &attn))) return s;
    if ((s = loom_hf_residual(hb, p, "attn", L, x, attn, &x2))) return s;
    loom_hf_name(n, "%s.post_attention_layernorm", p);
    if ((s = loom_hf_norm(hb, n, L, "rmsnorm", x2, &xn2))) return s;

    bool moe = m->experts > 0 && i >= m->first_dense && i % dc->freq == 0;
    const char *sfx[8] = {"gate_proj", "up_proj", "down_proj", "act_fn"};
    const char *grp = moe ? "mlp.shared_experts" : "mlp";
    int64_t f = moe ? m->moe_ffn * m->shared_experts : m->ffn;
    int32_t dense = -1;
    if (f > 0) {
        for (int j = 0; j < 4; j++) loom_hf_name(nm[j], "%s.%s.%s", p, grp, sfx[j]);
        loom_dim fd = {"f", f};
        loom_hf_swiglu ml = {.gate = nm[0], .up = nm[1], .down = nm[2], .act = nm[3],
                             .sub_in = "bsh,hf->bsf", .sub_out = "bsf,fh->bsh", .wndim = 2,
                             .w_in = (loom_dim[]){h, fd}, .w_out = (loom_dim[]){fd, h}};
        if ((s = loom_hf_swiglu_mlp(hb, L, &ml, xn2, &dense))) return s;
    }
    mlp = dense;
    if (moe) {
        const char *ms[8] = {"gate", "route", "dispatch", "combine", "experts.gate_proj",
                             "experts.up_proj", "experts.down_proj", "experts.act_fn"};
        for (int j = 0; j < 8; j++) loom_hf_name(nm[j], "%s.mlp.%s", p, ms[j]);
        loom_hf_moe mb = {.gate = nm[0], .route = nm[1], .dispatch = nm[2], .combine = nm[3],
                          .w_gate = nm[4], .w_up = nm[5], .w_down = nm[6], .act = nm[7],
                          .experts = m->experts, .topk = m->experts_topk, .f = m->moe_ffn,
                          .route_bias = dc->route_bias};
        int32_t routed;
        if ((s = loom_hf_moe_block(hb, L, &mb, xn2, &routed))) return s;
        mlp = routed;
        if (dense >= 0) {
            int32_t two[2] = {routed, dense};
            loom_hf_name(n, "%s.mlp.shared_add", p);
            if ((s = loom_hf_elementwise(hb, n, L, "add", 2, two, 0, &mlp))) return s;
        }
    }
    return loom_hf_residual(hb, p, "mlp", L, x2, mlp, y);
}

loom_status loom_hf_build_deepseek(const loom_jctx *c, const cJSON *cfg, const char *name,
                                   const char *arch, const loom_model_opts *o, loom_graph **out)
{
    ds_cfg dc;
    *out = NULL;
    loom_status s = read_cfg(c, cfg, arch, &dc);
    if (s == LOOM_OK) s = loom_model_facts_from_hf(c, cfg, arch, &dc.m.facts);
    if (s) return s;
    loom_hf_family f = {.info = dc.m, .final_norm = "model.norm", .norm_fn = "rmsnorm",
                        .block = layer, .cfg = &dc, .mtp_layers = dc.m.facts.mtp_layers};
    return loom_hf_build(c, name, o, &f, out);
}
