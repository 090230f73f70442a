/*
 * hf_gpt2.c — GPT-2 (GPT2LMHeadModel) from an HF config.json; GPT-3-shaped
 * models are written in the same format (n_layer 96, n_embd 12288, …).
 *
 * One block (HF GPT2Block; module paths are op names):
 *
 *   x ─ ln_1 ─ attn.c_attn (fused q/k/v: "bsh,hqnd->bsqnd", qkv = 3, with
 *     bias) ─ attn.split (free view into q, k, v) ─ attention
 *     (attn.attn_dropout when unfused) ─ attn.c_proj ─ attn.resid_dropout
 *     ─ (+x) ─ ln_2 ─ mlp.c_fc ─ mlp.act (GeLU) ─ mlp.c_proj ─ mlp.dropout ─ (+)
 *
 * Embedding: wte [v, h] + wpe [n_positions, h], then transformer.drop; the
 * head is ln_f and an lm_head tied to wte (tie_word_embeddings, default
 * true). Dropouts are present when their rate (resid_pdrop, attn_pdrop,
 * embd_pdrop; HF default 0.1) is above zero.
 *
 * Parameters: 12h² + 13h per block (4h² + 4h attention, 8h² + 5h MLP, 4h
 * norms), (v + n_positions)·h embeddings, 2h for ln_f. GPT-3 175B:
 * 96·1811.99M + 642.7M + 24.6K = 174.6B (Brown et al. 2020, Table 2.1;
 * Narayanan et al. 2021 count 174.6B).
 */
#include <stdio.h>
#include <string.h>

#include "graph/hf_build.h"
#include "graph/model_facts.h"

typedef struct {
    loom_model_info m;               /* sizes copied into the graph */
    double resid_p, attn_p, embd_p;  /* dropout rates */
} gpt2_cfg;

static loom_status read_cfg(const loom_jctx *c, const cJSON *cfg, gpt2_cfg *gc)
{
    loom_model_info *m = &gc->m;
    memset(gc, 0, sizeof *gc);
    snprintf(m->arch, sizeof m->arch, "gpt2");
    m->qkv_bias = true;
    /* HF GPT2Config defaults for the optional fields. */
    gc->resid_p = gc->attn_p = gc->embd_p = 0.1;
    m->tied_embeddings = true;
    loom_status s;
    if ((s = loom_hf_size(c, cfg, "n_embd", true, LOOM_MAX_WIDTH, &m->hidden)) ||
        (s = loom_hf_size(c, cfg, "n_layer", true, LOOM_MAX_LAYERS, &m->layers)) ||
        (s = loom_hf_size(c, cfg, "n_head", true, LOOM_MAX_WIDTH, &m->heads)) ||
        (s = loom_hf_size(c, cfg, "vocab_size", true, LOOM_MAX_VOCAB, &m->vocab)) ||
        (s = loom_hf_size(c, cfg, "n_positions", true, LOOM_MAX_SEQ, &m->max_positions)))
        return s;
    m->ffn = 4 * m->hidden;   /* n_inner: null means 4 · n_embd */
    if ((s = loom_hf_size(c, cfg, "n_inner", false, LOOM_MAX_FFN, &m->ffn)) ||
        (s = loom_hf_prob(c, cfg, "resid_pdrop", &gc->resid_p)) ||
        (s = loom_hf_prob(c, cfg, "attn_pdrop", &gc->attn_p)) ||
        (s = loom_hf_prob(c, cfg, "embd_pdrop", &gc->embd_p)) ||
        (s = loom_json_get_bool(c, cfg, "$", "tie_word_embeddings", false, &m->tied_embeddings)) ||
        (s = loom_hf_heads(c, m->hidden, m->heads, m->heads, "n_embd", "n_head", "n_head")))
        return s;
    m->kv_heads = m->heads;
    m->head_dim = m->hidden / m->heads;
    return LOOM_OK;
}

static loom_status block(loom_hf_builder *hb, const void *cfg, int64_t i, int32_t x, int32_t *y)
{
    const gpt2_cfg *gc = cfg;
    const loom_model_info *m = &gc->m;
    char p[256], n[256];
    int32_t L = (int32_t)i + 1, xn, qkv, parts[3], o, proj, dr, x2, xn2, fc, act, fc2, dr2;
    int64_t dh = m->head_dim;
    loom_dim h = {"h", m->hidden}, three = {"qkv", 3}, nh = {"heads", m->heads}, d = {"dh", dh},
             f = {"f", m->ffn};
    loom_status s;
    loom_hf_name(p, "transformer.h.%lld", (long long)i);

    loom_hf_name(n, "%s.ln_1", p);
    if ((s = loom_hf_norm(hb, n, L, "layernorm", x, &xn))) return s;
    loom_hf_name(n, "%s.attn.c_attn", p);
    if ((s = loom_hf_linear(hb, n, L, xn, "bsh,hqnd->bsqnd", LOOM_HF_DIMS(h, three, nh, d), 3, &qkv)))
        return s;
    /* Splitting the fused projection along qkv is a view, not a copy. */
    const loom_tensor *t = loom_graph_tensor(hb->g, qkv);
    loom_dim qd[4] = {t->dims[0], t->dims[1], nh, d};
    const loom_dim *pd[3] = {qd, qd, qd};
    int32_t nd[3] = {4, 4, 4};
    loom_hf_name(n, "%s.attn.split", p);
    if ((s = loom_hf_view(hb, n, L, 1, &qkv, 3, nd, pd, parts))) return s;
    loom_hf_name(n, "%s.attn", p);
    if ((s = loom_hf_attention(hb, n, L, parts[0], parts[1], parts[2], gc->attn_p, NULL, &o))) return s;
    loom_hf_name(n, "%s.attn.c_proj", p);
    if ((s = loom_hf_linear(hb, n, L, o, "bsnd,ndh->bsh", LOOM_HF_DIMS(nh, d, h), 1, &proj))) return s;
    loom_hf_name(n, "%s.attn.resid_dropout", p);
    if ((s = loom_hf_dropout(hb, n, L, gc->resid_p, proj, &dr))) return s;
    if ((s = loom_hf_residual(hb, p, "attn", L, x, dr, &x2))) return s;

    loom_hf_name(n, "%s.ln_2", p);
    if ((s = loom_hf_norm(hb, n, L, "layernorm", x2, &xn2))) return s;
    loom_hf_name(n, "%s.mlp.c_fc", p);
    if ((s = loom_hf_linear(hb, n, L, xn2, "bsh,hf->bsf", LOOM_HF_DIMS(h, f), 1, &fc))) return s;
    loom_hf_name(n, "%s.mlp.act", p);
    if ((s = loom_hf_elementwise(hb, n, L, "gelu", 1, &fc, LOOM_SAVE_IN(0), &act))) return s;
    loom_hf_name(n, "%s.mlp.c_proj", p);
    if ((s = loom_hf_linear(hb, n, L, act, "bsf,fh->bsh", LOOM_HF_DIMS(f, h), 1, &fc2))) return s;
    loom_hf_name(n, "%s.mlp.dropout", p);
    if ((s = loom_hf_dropout(hb, n, L, gc->resid_p, fc2, &dr2))) return s;
    return loom_hf_residual(hb, p, "mlp", L, x2, dr2, y);
}

/* wte(input_ids) + wpe(position_ids), then transformer.drop. */
static loom_status embed(loom_hf_builder *hb, const void *cfg, int32_t ids, int32_t *wte, int32_t *x)
{
    const gpt2_cfg *gc = cfg;
    int32_t pos, wpe, te, pe, sum;
    loom_status s;
    if ((s = loom_hf_ids(hb, "position_ids", &pos)) ||
        (s = loom_hf_embedding(hb, "transformer.wte", 0, ids, (loom_dim){"v", gc->m.vocab},
                               gc->m.hidden, wte, &te)) ||
        (s = loom_hf_embedding(hb, "transformer.wpe", 0, pos, (loom_dim){"pos", gc->m.max_positions},
                               gc->m.hidden, &wpe, &pe)))
        return s;
    int32_t two[2] = {te, pe};
    if ((s = loom_hf_elementwise(hb, "transformer.embed_add", 0, "add", 2, two, 0, &sum))) return s;
    return loom_hf_dropout(hb, "transformer.drop", 0, gc->embd_p, sum, x);
}

loom_status loom_hf_build_gpt2(const loom_jctx *c, const cJSON *cfg, const char *name,
                               const loom_model_opts *o, loom_graph **out)
{
    gpt2_cfg gc;
    *out = NULL;
    loom_status s = read_cfg(c, cfg, &gc);
    if (s == LOOM_OK) s = loom_model_facts_from_hf(c, cfg, "gpt2", &gc.m.facts);
    if (s) return s;
    loom_hf_family f = {.info = gc.m, .learned_positions = true, .final_norm = "transformer.ln_f",
                        .norm_fn = "layernorm", .embed = embed, .block = block, .cfg = &gc};
    return loom_hf_build(c, name, o, &f, out);
}
