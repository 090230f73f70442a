/*
 * hf_build.c — transformer building blocks shared by the HF model families
 * (see hf_build.h for the naming, dim and "saves" conventions).
 *
 * What each block saves for backward is what makes activation memory come
 * out right. Korthikanti et al., "Reducing Activation Recomputation in Large
 * Transformer Models" (2022), §4.1, count for one GPT-3 layer with s tokens,
 * batch b, hidden h, a heads, 2-byte activations and 1-byte dropout masks:
 *
 *   attention: QKV input 2sbh, Q and K 4sbh, softmax output 2as²b,
 *              its dropout mask as²b, dropout output 2as²b and V 2sbh,
 *              output-projection input 2sbh, output dropout mask sbh
 *                                                  = 11sbh + 5as²b
 *   MLP:       fc1 input 2sbh, GeLU input 8sbh, fc2 input 8sbh, mask sbh = 19sbh
 *   norms:     2 × 2sbh                                              = 4sbh
 *
 * for sbh(34 + 5as/h) bytes. A fused (flash) attention keeps Q, K, V and its
 * output instead of the s² terms, leaving 34sbh. Each tensor is charged once
 * (to the first op that saves it, graph.c), so a tensor read by several
 * savers (the norm output feeding Q, K and V) is not double counted.
 */
#include "graph/hf_build.h"
#include "base/limits.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Bound on user-given sizes: large enough for any real model, small enough
 * that products of a few of them are caught by graph.c's 2^53 element cap
 * rather than overflowing first. */
#define HF_NAME_BUF 256

void loom_hf_name(char *dst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, HF_NAME_BUF, fmt, ap);
    va_end(ap);
}

/* ---- config reading -------------------------------------------------------- */

loom_status loom_hf_size(const loom_jctx *c, const cJSON *cfg, const char *key, bool required,
                         int64_t hi, int64_t *out)
{
    return loom_json_get_int(c, cfg, "$", key, required, 1, hi, out);
}

loom_status loom_hf_prob(const loom_jctx *c, const cJSON *cfg, const char *key, double *out)
{
    /* A rate of 1 would drop everything; HF configs use [0, 1). */
    loom_status s = loom_json_get_num(c, cfg, "$", key, false, 0.0, 1.0, out);
    if (s == LOOM_OK && *out >= 1.0)
        return loom_json_fail(c, "$", "field \"%s\": a dropout rate must be below 1, found %g",
                              key, *out);
    return s;
}

loom_status loom_hf_heads(const loom_jctx *c, int64_t hidden, int64_t heads, int64_t kv_heads,
                          const char *hidden_key, const char *heads_key, const char *kv_key)
{
    if (hidden_key && hidden % heads != 0)
        return loom_json_fail(c, "$", "%s = %lld does not divide %s = %lld (the head dim would "
                              "not be whole; give \"head_dim\" explicitly if the model uses one)",
                              heads_key, (long long)heads, hidden_key, (long long)hidden);
    if (kv_heads > heads || heads % kv_heads != 0)
        return loom_json_fail(c, "$", "%s = %lld does not divide %s = %lld (each kv head must "
                              "serve a whole group of query heads)",
                              kv_key, (long long)kv_heads, heads_key, (long long)heads);
    return LOOM_OK;
}

/* ---- tensors and generic ops ------------------------------------------------------ */

loom_status loom_hf_tensor(loom_hf_builder *hb, const char *name, loom_dtype dt, int32_t ndim,
                           const loom_dim *dims, int32_t *id)
{
    return loom_graph_add_tensor(hb->g, name, dt, ndim, dims, false, id, hb->err);
}

loom_status loom_hf_weight(loom_hf_builder *hb, const char *op, const char *suffix, int32_t ndim,
                           const loom_dim *dims, int32_t *id)
{
    char name[HF_NAME_BUF];
    loom_hf_name(name, "%s.%s", op, suffix);
    return loom_graph_add_tensor(hb->g, name, hb->dt, ndim, dims, true, id, hb->err);
}

/* An op template named `name`, or an error when the name does not fit. */
static loom_status op_init(loom_hf_builder *hb, loom_op *op, const char *name, loom_op_kind kind,
                           int32_t layer)
{
    memset(op, 0, sizeof *op);
    if (strlen(name) >= LOOM_NAME_MAX)
        return loom_error_set(hb->err, LOOM_ERR_INVALID, "op name too long (max %d chars): %s",
                              LOOM_NAME_MAX - 1, name);
    snprintf(op->name, sizeof op->name, "%s", name);
    op->kind = kind;
    op->layer = layer;
    return LOOM_OK;
}

/* Sets op's operands (inputs, weights and one output) and adds it. */
static loom_status add_op(loom_hf_builder *hb, loom_op *op, int32_t n_in, const int32_t *in,
                          int32_t n_w, const int32_t *w, int32_t out, uint32_t saves)
{
    op->n_in = n_in;
    op->n_w = n_w;
    op->n_out = 1;
    op->out[0] = out;
    op->saves = saves;
    if (n_in) memcpy(op->in, in, (size_t)n_in * sizeof *in);
    if (n_w) memcpy(op->w, w, (size_t)n_w * sizeof *w);
    return loom_graph_add_op(hb->g, op, NULL, hb->err);
}

/* Output tensor "<name>.out" shaped like `like`, of dtype dt. */
static loom_status out_like(loom_hf_builder *hb, const char *name, int32_t like, loom_dtype dt,
                            int32_t *id)
{
    const loom_tensor *t = loom_graph_tensor(hb->g, like);
    loom_dim dims[LOOM_MAX_DIMS];
    int32_t nd = t->ndim;
    memcpy(dims, t->dims, sizeof dims);
    char tn[HF_NAME_BUF];
    loom_hf_name(tn, "%s.out", name);
    return loom_hf_tensor(hb, tn, dt, nd, dims, id);
}

loom_status loom_hf_einsum(loom_hf_builder *hb, const char *name, int32_t layer, const char *sub,
                           int32_t n_in, const int32_t *in, int32_t n_w, const int32_t *w,
                           int bias_ndim, uint32_t saves, int32_t *y)
{
    loom_op op;
    loom_status s = op_init(hb, &op, name, LOOM_OP_EINSUM, layer);
    if (s) return s;
    const char *arrow = strstr(sub, "->");
    int32_t nops = n_in + n_w;
    if (!arrow || n_in > LOOM_MAX_IO || n_w + (bias_ndim > 0) > LOOM_MAX_IO || strlen(sub) >= LOOM_EINSUM_MAX)
        return loom_error_set(hb->err, LOOM_ERR_INVALID, "op %s: bad einsum \"%s\"", name, sub);
    /* Each output letter takes the name and size of the first operand dim
     * that carries it (graph.c then checks every operand agrees). */
    const char *outs = arrow + 2;
    int32_t nd = (int32_t)strlen(outs);
    if (nd > LOOM_MAX_DIMS)
        return loom_error_set(hb->err, LOOM_ERR_INVALID, "op %s: einsum output has %d dims",
                              name, (int)nd);
    loom_dim dims[LOOM_MAX_DIMS];
    for (int32_t d = 0; d < nd; d++) {
        const char *p = sub;
        bool found = false;
        for (int32_t k = 0; k < nops && !found; k++) {
            const loom_tensor *t = loom_graph_tensor(hb->g, k < n_in ? in[k] : w[k - n_in]);
            for (int32_t j = 0; j < t->ndim && p + j < arrow && p[j] != ','; j++)
                if (p[j] == outs[d]) {
                    dims[d] = t->dims[j];
                    found = true;
                    break;
                }
            while (p < arrow && *p != ',') p++;
            if (*p == ',') p++;
        }
        if (!found)
            return loom_error_set(hb->err, LOOM_ERR_INVALID,
                                  "op %s: einsum output letter '%c' appears in no operand", name,
                                  outs[d]);
    }
    char tn[HF_NAME_BUF];
    loom_hf_name(tn, "%s.out", name);
    int32_t out, wb[LOOM_MAX_IO];
    if ((s = loom_hf_tensor(hb, tn, loom_graph_tensor(hb->g, in[0])->dtype, nd, dims, &out)))
        return s;
    snprintf(op.einsum, sizeof op.einsum, "%s", sub);
    if (n_w > 0) memcpy(wb, w, (size_t)n_w * sizeof *w);   /* w may be NULL when n_w == 0 */
    if (bias_ndim > 0) {
        if (bias_ndim > nd)
            return loom_error_set(hb->err, LOOM_ERR_INVALID, "op %s: bias has more dims than the output",
                                  name);
        if ((s = loom_hf_weight(hb, name, "bias", bias_ndim, dims + nd - bias_ndim, &wb[n_w++])))
            return s;
        op.bias = true;
    }
    if ((s = add_op(hb, &op, n_in, in, n_w, wb, out, saves))) return s;
    *y = out;
    return LOOM_OK;
}

loom_status loom_hf_linear(loom_hf_builder *hb, const char *name, int32_t layer, int32_t x,
                           const char *sub, int32_t wndim, const loom_dim *wdims, int bias_ndim,
                           int32_t *y)
{
    int32_t w;
    loom_status s = loom_hf_weight(hb, name, "weight", wndim, wdims, &w);
    if (s) return s;
    return loom_hf_einsum(hb, name, layer, sub, 1, &x, 1, &w, bias_ndim, LOOM_SAVE_IN(0), y);
}

/* An op of `kind` over in[] whose one output is shaped like in[0]. */
static loom_status unary(loom_hf_builder *hb, const char *name, int32_t layer, loom_op_kind kind,
                         const char *fn, int32_t n_in, const int32_t *in, int32_t n_w,
                         const int32_t *w, uint32_t saves, int32_t *y)
{
    loom_op op;
    loom_status s = op_init(hb, &op, name, kind, layer);
    if (s) return s;
    int32_t out;
    if ((s = out_like(hb, name, in[0], loom_graph_tensor(hb->g, in[0])->dtype, &out))) return s;
    snprintf(op.fn, sizeof op.fn, "%s", fn ? fn : "");
    if ((s = add_op(hb, &op, n_in, in, n_w, w, out, saves))) return s;
    *y = out;
    return LOOM_OK;
}

loom_status loom_hf_elementwise(loom_hf_builder *hb, const char *name, int32_t layer,
                                const char *fn, int32_t n_in, const int32_t *in, uint32_t saves,
                                int32_t *y)
{
    return unary(hb, name, layer, LOOM_OP_ELEMENTWISE, fn, n_in, in, 0, NULL, saves, y);
}

loom_status loom_hf_residual(loom_hf_builder *hb, const char *block, const char *what,
                             int32_t layer, int32_t x, int32_t r, int32_t *y)
{
    char name[HF_NAME_BUF];
    int32_t two[2] = {x, r};
    loom_hf_name(name, "%s.%s_residual", block, what);
    return loom_hf_elementwise(hb, name, layer, "add", 2, two, 0, y);
}

loom_status loom_hf_dropout(loom_hf_builder *hb, const char *name, int32_t layer, double p,
                            int32_t x, int32_t *y)
{
    if (p <= 0) {
        *y = x;
        return LOOM_OK;
    }
    return loom_hf_elementwise(hb, name, layer, "dropout", 1, &x, LOOM_SAVE_MASK, y);
}

loom_status loom_hf_norm(loom_hf_builder *hb, const char *name, int32_t layer, const char *fn,
                         int32_t x, int32_t *y)
{
    const loom_tensor *t = loom_graph_tensor(hb->g, x);
    loom_dim d = t->dims[t->ndim - 1];
    int32_t w[2];
    int32_t nw = strcmp(fn, "layernorm") == 0 ? 2 : 1;
    loom_status s = loom_hf_weight(hb, name, "weight", 1, &d, &w[0]);
    if (s == LOOM_OK && nw == 2) s = loom_hf_weight(hb, name, "bias", 1, &d, &w[1]);
    if (s) return s;
    return unary(hb, name, layer, LOOM_OP_NORM, fn, 1, &x, nw, w, LOOM_SAVE_IN(0), y);
}

loom_status loom_hf_view(loom_hf_builder *hb, const char *name, int32_t layer, int32_t n_in,
                         const int32_t *in, int32_t n_out, const int32_t *out_ndim,
                         const loom_dim *const *out_dims, int32_t *out)
{
    loom_op op;
    loom_status s = op_init(hb, &op, name, LOOM_OP_RESHAPE, layer);
    if (s) return s;
    loom_dtype dt = loom_graph_tensor(hb->g, in[0])->dtype;
    for (int32_t i = 0; i < n_out; i++) {
        char tn[HF_NAME_BUF];
        if (n_out == 1) loom_hf_name(tn, "%s.out", name);
        else loom_hf_name(tn, "%s.out%d", name, (int)i);
        if ((s = loom_hf_tensor(hb, tn, dt, out_ndim[i], out_dims[i], &out[i]))) return s;
        op.out[i] = out[i];
    }
    op.n_in = n_in;
    op.n_out = n_out;
    for (int32_t i = 0; i < n_in; i++) op.in[i] = in[i];
    return loom_graph_add_op(hb->g, &op, NULL, hb->err);
}

/* ---- attention -------------------------------------------------------------------- */

static loom_status attention_fused(loom_hf_builder *hb, const char *prefix, int32_t layer,
                                   int32_t q, int32_t k, int32_t v, const loom_hf_span *sp,
                                   int32_t *o)
{
    char name[HF_NAME_BUF], tn[HF_NAME_BUF];
    loom_hf_name(name, "%s.sdpa", prefix);
    loom_op op;
    loom_status s = op_init(hb, &op, name, LOOM_OP_ATTENTION, layer);
    if (s) return s;
    const loom_tensor *tq = loom_graph_tensor(hb->g, q), *tv = loom_graph_tensor(hb->g, v);
    loom_dim dims[4] = {tq->dims[0], tq->dims[1], tq->dims[2], tv->dims[3]};
    loom_hf_name(tn, "%s.out", name);
    if ((s = loom_hf_tensor(hb, tn, tq->dtype, 4, dims, o))) return s;
    op.n_in = 3;
    op.in[0] = q, op.in[1] = k, op.in[2] = v;
    op.n_out = 1;
    op.out[0] = *o;
    op.causal = true;
    op.window = sp ? sp->window : 0;
    op.chunk = sp ? sp->chunk : 0;
    /* Flash attention keeps Q, K, V and O (plus a per-row logsumexp, b·heads·s
     * floats, negligible next to them) and recomputes the s² scores. */
    op.saves = LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1) | LOOM_SAVE_IN(2) | LOOM_SAVE_OUT(0);
    return loom_graph_add_op(hb->g, &op, NULL, hb->err);
}

/* The eager chain QKᵀ -> softmax -> dropout -> ·V. Keys and values get the
 * key-sequence dim t through a free view; with GQA the queries are viewed
 * as [b, s, kvh, grp, dh] so each kv head meets its group of query heads. */
static loom_status attention_unfused(loom_hf_builder *hb, const char *prefix, int32_t layer,
                                     int32_t q, int32_t k, int32_t v, double p,
                                     const loom_hf_span *sp, int32_t *o)
{
    char name[HF_NAME_BUF];
    const loom_tensor *tq = loom_graph_tensor(hb->g, q), *tk = loom_graph_tensor(hb->g, k),
                      *tv = loom_graph_tensor(hb->g, v);
    loom_dim qd[4], kd[4], vd[4];
    memcpy(qd, tq->dims, sizeof qd);
    memcpy(kd, tk->dims, sizeof kd);
    memcpy(vd, tv->dims, sizeof vd);
    int64_t heads = qd[2].size, kvh = kd[2].size;
    bool gqa = heads != kvh;
    /* A window or chunk keeps the scores banded: [.., s, t'] with t' keys per
     * query (the eager kernels of Mistral / Gemma compute and save only the
     * band when they are written for it; an s x s masked matrix would not
     * be the model's cost). */
    loom_op span = {.window = sp ? sp->window : 0, .chunk = sp ? sp->chunk : 0};
    loom_dim t = {"t", loom_op_attention_span(&span, kd[1].size)};

    /* keys and values over t; in plain multi-head attention they share the
     * query head dim's name so the einsum letter n means one dim */
    loom_dim kv_dims[2][4] = {{kd[0], t, gqa ? kd[2] : qd[2], kd[3]},
                              {vd[0], t, gqa ? vd[2] : qd[2], vd[3]}};
    const loom_dim *kvp[2] = {kv_dims[0], kv_dims[1]};
    int32_t kv_in[2] = {k, v}, kv_out[2], nd4[2] = {4, 4};
    loom_hf_name(name, "%s.kv_view", prefix);
    loom_status s = loom_hf_view(hb, name, layer, 2, kv_in, 2, nd4, kvp, kv_out);
    if (s) return s;

    int32_t qq = q;
    const char *sub_scores = "bsnd,btnd->bnst", *sub_ctx = "bnst,btnd->bsnd";
    if (gqa) {
        loom_dim g5[5] = {qd[0], qd[1], kd[2], {"grp", heads / kvh}, qd[3]};
        const loom_dim *gp = g5;
        int32_t nd5 = 5;
        loom_hf_name(name, "%s.q_view", prefix);
        if ((s = loom_hf_view(hb, name, layer, 1, &q, 1, &nd5, &gp, &qq))) return s;
        sub_scores = "bskgd,btkd->bkgst";
        sub_ctx = "bkgst,btkd->bskgd";
    }
    int32_t in2[2] = {qq, kv_out[0]}, scores, probs, dropped, ctx;
    loom_hf_name(name, "%s.scores", prefix);
    if ((s = loom_hf_einsum(hb, name, layer, sub_scores, 2, in2, 0, NULL, 0,
                            LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1), &scores)))
        return s;
    /* The 1/sqrt(dh) scale and causal mask are fused into the softmax
     * (Megatron's fused kernel); backward needs only its output. */
    loom_hf_name(name, "%s.softmax", prefix);
    if ((s = unary(hb, name, layer, LOOM_OP_SOFTMAX, NULL, 1, &scores, 0, NULL, LOOM_SAVE_OUT(0),
                   &probs)))
        return s;
    loom_hf_name(name, "%s.attn_dropout", prefix);
    if ((s = loom_hf_dropout(hb, name, layer, p, probs, &dropped))) return s;
    int32_t in_ctx[2] = {dropped, kv_out[1]};
    loom_hf_name(name, "%s.context", prefix);
    if ((s = loom_hf_einsum(hb, name, layer, sub_ctx, 2, in_ctx, 0, NULL, 0,
                            LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1), &ctx)))
        return s;
    if (!gqa) {
        *o = ctx;
        return LOOM_OK;
    }
    loom_dim od[4] = {qd[0], qd[1], qd[2], vd[3]};
    const loom_dim *op4 = od;
    int32_t nd = 4;
    loom_hf_name(name, "%s.o_view", prefix);
    return loom_hf_view(hb, name, layer, 1, &ctx, 1, &nd, &op4, o);
}

loom_status loom_hf_attention(loom_hf_builder *hb, const char *prefix, int32_t layer, int32_t q,
                              int32_t k, int32_t v, double attn_pdrop, const loom_hf_span *span,
                              int32_t *o)
{
    if (hb->flash) return attention_fused(hb, prefix, layer, q, k, v, span, o);
    return attention_unfused(hb, prefix, layer, q, k, v, attn_pdrop, span, o);
}

/* ---- MLPs and experts ----------------------------------------------------------------- */

loom_status loom_hf_swiglu_mlp(loom_hf_builder *hb, int32_t layer, const loom_hf_swiglu *m,
                               int32_t x, int32_t *y)
{
    int32_t gate, up, act;
    loom_status s;
    if ((s = loom_hf_linear(hb, m->gate, layer, x, m->sub_in, m->wndim, m->w_in, m->bias_ndim, &gate)) ||
        (s = loom_hf_linear(hb, m->up, layer, x, m->sub_in, m->wndim, m->w_in, m->bias_ndim, &up)))
        return s;
    /* silu(gate) · up, one fused op keeping both inputs for backward. */
    int32_t in2[2] = {gate, up};
    if ((s = loom_hf_elementwise(hb, m->act, layer, m->act_fn ? m->act_fn : "swiglu", 2, in2,
                                 LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1), &act)))
        return s;
    return loom_hf_linear(hb, m->down, layer, act, m->sub_out, m->wndim, m->w_out, m->bias_ndim, y);
}

loom_status loom_hf_moe_block(loom_hf_builder *hb, int32_t layer, const loom_hf_moe *m,
                              int32_t x, int32_t *y)
{
    const loom_tensor *tx = loom_graph_tensor(hb->g, x);
    loom_dim b = tx->dims[0], sq = tx->dims[1], h = tx->dims[2];
    loom_dim e = {"e", m->experts}, f = {"f", m->f}, k = {"topk", m->topk};
    /* Tokens per expert with perfect balance (no capacity factor): each of
     * the b·s tokens goes to topk experts. */
    int64_t tokens = b.size * sq.size;
    loom_dim c = {"c", (tokens * m->topk + m->experts - 1) / m->experts};
    int32_t logits, r_out[2], buf, ex_out;
    loom_status s;
    if ((s = loom_hf_linear(hb, m->gate, layer, x, "bsh,he->bse", LOOM_HF_DIMS(h, e),
                            m->gate_bias ? 1 : 0, &logits)))
        return s;

    loom_op op;
    if ((s = op_init(hb, &op, m->route, LOOM_OP_MOE_ROUTE, layer))) return s;
    char tn[HF_NAME_BUF];
    loom_hf_name(tn, "%s.weights", m->route);
    if ((s = loom_hf_tensor(hb, tn, hb->dt, LOOM_HF_DIMS(b, sq, k), &r_out[0]))) return s;
    loom_hf_name(tn, "%s.indices", m->route);
    if ((s = loom_hf_tensor(hb, tn, LOOM_DTYPE_INT32, LOOM_HF_DIMS(b, sq, k), &r_out[1]))) return s;
    op.n_in = 1, op.in[0] = logits;
    op.n_out = 2, op.out[0] = r_out[0], op.out[1] = r_out[1];
    op.topk = (int32_t)m->topk;
    op.saves = LOOM_SAVE_IN(0);   /* softmax / sigmoid backward */
    if (m->route_bias) {
        if ((s = loom_hf_weight(hb, m->gate, "e_score_correction_bias", 1, &e, &op.w[0]))) return s;
        op.n_w = 1;
    }
    if ((s = loom_graph_add_op(hb->g, &op, NULL, hb->err))) return s;

    /* Dispatch is a permutation: backward gathers by the (tiny) indices. */
    if ((s = op_init(hb, &op, m->dispatch, LOOM_OP_MOE_DISPATCH, layer))) return s;
    loom_hf_name(tn, "%s.out", m->dispatch);
    if ((s = loom_hf_tensor(hb, tn, hb->dt, LOOM_HF_DIMS(e, c, h), &buf))) return s;
    op.n_in = 2, op.in[0] = x, op.in[1] = r_out[1];
    op.n_out = 1, op.out[0] = buf;
    op.topk = (int32_t)m->topk;
    if ((s = loom_graph_add_op(hb->g, &op, NULL, hb->err))) return s;

    loom_hf_swiglu ex = {.gate = m->w_gate, .up = m->w_up, .down = m->w_down, .act = m->act,
                         .sub_in = "ech,ehf->ecf", .sub_out = "ecf,efh->ech", .wndim = 3,
                         .w_in = (loom_dim[]){e, h, f}, .w_out = (loom_dim[]){e, f, h}};
    if ((s = loom_hf_swiglu_mlp(hb, layer, &ex, buf, &ex_out))) return s;

    /* y = Σ_k w_k · E_k(x): backward needs both the expert outputs (for dw)
     * and the routing weights (for dE). */
    if ((s = op_init(hb, &op, m->combine, LOOM_OP_MOE_COMBINE, layer))) return s;
    if ((s = out_like(hb, m->combine, x, hb->dt, y))) return s;
    op.n_in = 3, op.in[0] = ex_out, op.in[1] = r_out[0], op.in[2] = r_out[1];
    op.n_out = 1, op.out[0] = *y;
    op.topk = (int32_t)m->topk;
    op.saves = LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1);
    return loom_graph_add_op(hb->g, &op, NULL, hb->err);
}

/* ---- embedding and head ------------------------------------------------------------------ */

loom_status loom_hf_ids(loom_hf_builder *hb, const char *name, int32_t *id)
{
    return loom_hf_tensor(hb, name, LOOM_DTYPE_INT64, LOOM_HF_DIMS({"b", hb->b}, {"s", hb->s}), id);
}

/* The lookup of ids [b, s] in an existing [rows, h] table. */
static loom_status lookup(loom_hf_builder *hb, const char *name, int32_t layer, int32_t ids,
                          int32_t table, int64_t h, int32_t *y)
{
    loom_op op;
    loom_status s = op_init(hb, &op, name, LOOM_OP_EMBEDDING, layer);
    if (s) return s;
    char tn[HF_NAME_BUF];
    loom_hf_name(tn, "%s.out", name);
    if ((s = loom_hf_tensor(hb, tn, hb->dt, LOOM_HF_DIMS({"b", hb->b}, {"s", hb->s}, {"h", h}), y)))
        return s;
    op.n_in = 1, op.in[0] = ids;
    op.n_w = 1, op.w[0] = table;
    op.n_out = 1, op.out[0] = *y;
    return loom_graph_add_op(hb->g, &op, NULL, hb->err);
}

loom_status loom_hf_embedding(loom_hf_builder *hb, const char *name, int32_t layer, int32_t ids,
                              loom_dim rows, int64_t h, int32_t *table, int32_t *y)
{
    loom_status s = loom_hf_weight(hb, name, "weight", LOOM_HF_DIMS(rows, {"h", h}), table);
    if (s) return s;
    return lookup(hb, name, layer, ids, *table, h, y);
}

/* Names of a head's ops: its norm, the vocabulary projection, the labels
 * and the loss. */
typedef struct {
    const char *norm, *proj, *labels, *loss;
} head_names;

/* Final norm, the vocabulary projection "bsh,vh->bsv" with weight *w (a
 * new [v, h] "lm_head.weight" when *w < 0) and a cross-entropy loss against
 * labels [b, s] that keeps the logits for backward. */
static loom_status head(loom_hf_builder *hb, int32_t layer, const head_names *nm, const char *fn,
                        int32_t x, int32_t *w, int64_t v, int32_t *loss)
{
    int32_t xn, logits, labels;
    char tn[HF_NAME_BUF];
    loom_status s = loom_hf_norm(hb, nm->norm, layer, fn, x, &xn);
    if (s) return s;
    int64_t h = loom_graph_tensor(hb->g, xn)->dims[2].size;
    if (*w < 0 &&
        (s = loom_hf_weight(hb, "lm_head", "weight", LOOM_HF_DIMS({"v", v}, {"h", h}), w)))
        return s;
    if ((s = loom_hf_einsum(hb, nm->proj, layer, "bsh,vh->bsv", 1, &xn, 1, w, 0,
                            LOOM_SAVE_IN(0), &logits)) ||
        (s = loom_hf_ids(hb, nm->labels, &labels)))
        return s;
    loom_op op;
    loom_hf_name(tn, "%s.out", nm->loss);
    if ((s = op_init(hb, &op, nm->loss, LOOM_OP_CROSS_ENTROPY, layer)) ||
        (s = loom_hf_tensor(hb, tn, LOOM_DTYPE_FP32, 0, NULL, loss)))
        return s;
    op.n_in = 2, op.in[0] = logits, op.in[1] = labels;
    op.n_out = 1, op.out[0] = *loss;
    op.saves = LOOM_SAVE_IN(0);   /* softmax(logits) - onehot needs the logits */
    return loom_graph_add_op(hb->g, &op, NULL, hb->err);
}

/* ---- multi-token prediction ------------------------------------------------------------- */

/* DeepSeek-V3's multi-token prediction (DeepSeek-V3 report §2.2), as
 * Megatron-LM trains it (--mtp-num-layers D; megatron/core/transformer/
 * multi_token_prediction.py). Depth k = 1..D turns the previous depth's
 * hidden states h (the main model's last block output for k = 1) into a
 * prediction of the token k+1 ahead:
 *
 *   e  = embed(ids shifted by k)           the main embedding table, shared
 *   x  = eh_proj([enorm(e), hnorm(h)])     Linear(2h -> h), no bias
 *   h' = block(x)                          one decoder layer (MLA + MoE)
 *   loss_k = CE(shared_head.norm(h') · W_head^T, labels shifted by k)
 *
 * with the main model's output weight W_head. All of it runs on the last
 * pipeline stage, so its ops join the head layer L+1 (which eval, memory and
 * the stage search place there). The table and W_head are the graph's own
 * tensors: on a pipeline of several stages the last one holds its own copy of
 * the table (Megatron's language_module.py keeps a duplicate embedding on the
 * MTP stage, all-reduced with the first stage's), which memory counts because
 * it counts each weight once per stage that uses it. Op names are HF's
 * checkpoint names of the module ("model.layers.61.eh_proj"); the labels and
 * ids are the batch's, rolled. */
static loom_status mtp(loom_hf_builder *hb, const loom_hf_family *f, int32_t x, int32_t table,
                       int32_t w_head)
{
    const loom_model_info *m = &f->info;
    int32_t layer = (int32_t)m->layers + 1;
    loom_dim h = {"h", m->hidden}, hc = {"hc", 2 * m->hidden};
    loom_status s = LOOM_OK;
    for (int64_t k = 0; s == LOOM_OK && k < f->mtp_layers; k++) {
        char p[HF_NAME_BUF], n[HF_NAME_BUF], nm[4][HF_NAME_BUF];
        int32_t ids, e, en, hn, cat, xp, loss, pair[2];
        loom_hf_name(p, "model.layers.%lld", (long long)(m->layers + k));
        loom_hf_name(n, "%s.input_ids", p);
        if ((s = loom_hf_ids(hb, n, &ids))) break;
        loom_hf_name(n, "%s.embed_tokens", p);
        if ((s = lookup(hb, n, layer, ids, table, m->hidden, &e))) break;
        loom_hf_name(n, "%s.enorm", p);
        if ((s = loom_hf_norm(hb, n, layer, f->norm_fn, e, &en))) break;
        loom_hf_name(n, "%s.hnorm", p);
        if ((s = loom_hf_norm(hb, n, layer, f->norm_fn, x, &hn))) break;
        /* torch.cat: a copy next to the projections' cost, saved by nothing */
        {
            loom_dim d[3] = {{"b", hb->b}, {"s", hb->s}, hc};
            const loom_dim *pd = d;
            int32_t nd = 3;
            pair[0] = en, pair[1] = hn;
            loom_hf_name(n, "%s.concat", p);
            if ((s = loom_hf_view(hb, n, layer, 2, pair, 1, &nd, &pd, &cat))) break;
        }
        loom_hf_name(n, "%s.eh_proj", p);
        if ((s = loom_hf_linear(hb, n, layer, cat, "bsc,ch->bsh", LOOM_HF_DIMS(hc, h), 0, &xp)) ||
            (s = f->block(hb, f->cfg, m->layers + k, xp, &x)))
            break;
        loom_hf_name(nm[0], "%s.shared_head.norm", p);
        loom_hf_name(nm[1], "%s.shared_head.head", p);
        loom_hf_name(nm[2], "%s.labels", p);
        loom_hf_name(nm[3], "%s.loss", p);
        head_names hn4 = {nm[0], nm[1], nm[2], nm[3]};
        s = head(hb, layer, &hn4, f->norm_fn, x, &w_head, m->vocab, &loss);
    }
    return s;
}

/* ---- the decoder driver ------------------------------------------------------------------- */

/* Resolves and checks seq and batch (see loom_model_opts). */
static loom_status shape(const loom_jctx *c, const loom_model_opts *o, const loom_hf_family *f,
                         int64_t *seq)
{
    int64_t max_pos = f->info.max_positions, s = o->seq;
    if (s == 0) {
        s = 2048;
        if (max_pos > 0 && s > max_pos) s = max_pos;
    }
    if (s < 1 || s > LOOM_MODEL_MAX_SEQ)
        return loom_error_set(c->err, LOOM_ERR_INVALID, "%s: sequence length %lld is outside [1, %lld]",
                              c->file, (long long)s, (long long)LOOM_MODEL_MAX_SEQ);
    if (f->learned_positions && s > max_pos)
        return loom_error_set(c->err, LOOM_ERR_INVALID,
                              "%s: sequence length %lld exceeds the learned position table "
                              "(n_positions = %lld); use a sequence of at most %lld",
                              c->file, (long long)s, (long long)max_pos, (long long)max_pos);
    if (!f->learned_positions && max_pos > 0 && s > max_pos && !f->rope_scaling)
        return loom_error_set(c->err, LOOM_ERR_INVALID,
                              "%s: sequence length %lld exceeds the %lld positions the model was "
                              "trained for (max_position_embeddings) and the config has no "
                              "rope_scaling; use a sequence of at most %lld",
                              c->file, (long long)s, (long long)max_pos, (long long)max_pos);
    if (o->batch < 1 || o->batch > LOOM_MODEL_MAX_BATCH)
        return loom_error_set(c->err, LOOM_ERR_INVALID, "%s: batch %lld is outside [1, %lld]",
                              c->file, (long long)o->batch, (long long)LOOM_MODEL_MAX_BATCH);
    if (o->dtype != LOOM_DTYPE_BF16 && o->dtype != LOOM_DTYPE_FP16 && o->dtype != LOOM_DTYPE_FP32 &&
        o->dtype != LOOM_DTYPE_FP8)
        return loom_error_set(c->err, LOOM_ERR_INVALID,
                              "%s: dtype %s cannot hold weights (expected bf16, fp16, fp32 or fp8)",
                              c->file, loom_dtype_name(o->dtype));
    *seq = s;
    return LOOM_OK;
}

/* Refuses a model whose dimensions, each within its bound (base/limits.h),
 * multiply past LOOM_MAX_PARAMS, naming them, before any tensor is sized.
 * The count is an upper estimate in doubles (it cannot overflow): per layer
 * the attention projections (MLA's low-rank ones included), a dense gated
 * MLP, every routed and shared expert; the embedding and an untied head. */
static loom_status check_model_size(const loom_jctx *c, const loom_model_info *m)
{
    double h = (double)m->hidden, hd = (double)m->head_dim, vd = (double)m->v_head_dim;
    double qw = (double)m->heads * (hd > vd ? hd : vd);
    double attn = h * (double)(m->heads + 2 * m->kv_heads) * hd + qw * h +
                  (double)m->q_lora_rank * (h + qw) + (double)m->kv_lora_rank * (h + 2 * qw);
    double expert_ffn = (double)(m->moe_ffn > m->ffn ? m->moe_ffn : m->ffn);
    double mlp = 3 * h * (double)m->ffn +
                 3 * h * expert_ffn * (double)(m->experts + m->shared_experts) +
                 h * (double)m->experts;
    double total = (double)m->layers * (attn + mlp) + 2 * (double)m->vocab * h;
    if (total <= LOOM_MAX_PARAMS) return LOOM_OK;
    return loom_json_fail(c, "$",
                          "the config describes about %.3g parameters, more than loom's bound "
                          "of %.3g (2^50; base/limits.h): %lld layers, hidden %lld, %lld heads "
                          "of %lld, ffn %lld, %lld experts of %lld, vocabulary %lld; one of "
                          "these is far larger than any model's",
                          total, LOOM_MAX_PARAMS, (long long)m->layers, (long long)m->hidden,
                          (long long)m->heads, (long long)m->head_dim, (long long)m->ffn,
                          (long long)m->experts, (long long)m->moe_ffn, (long long)m->vocab);
}

loom_status loom_hf_build(const loom_jctx *c, const char *name, const loom_model_opts *o,
                          const loom_hf_family *f, loom_graph **out)
{
    /* fp8 training keeps bf16 tensors; only the GEMMs run in fp8 */
    loom_dtype stored = o->dtype == LOOM_DTYPE_FP8 && !o->fp8_weights ? LOOM_DTYPE_BF16 : o->dtype;
    loom_hf_builder hb = {.err = c->err, .dt = stored, .b = o->batch, .flash = o->flash_attention};
    *out = NULL;
    loom_status s = check_model_size(c, &f->info);
    if (s == LOOM_OK) s = shape(c, o, f, &hb.s);
    if (s == LOOM_OK) s = loom_graph_create(name, &hb.g, c->err);
    if (s) return s;
    loom_model_info *info = loom_graph_info(hb.g);
    *info = f->info;
    info->seq = hb.s;
    info->batch = hb.b;
    info->dtype = o->dtype;
    info->flash_attention = o->flash_attention;
    for (int w = 0; w < f->n_warnings; w++) loom_graph_warn(hb.g, "%s", f->warnings[w]);
    if (!f->learned_positions && f->info.max_positions > 0 && hb.s > f->info.max_positions)
        loom_graph_warn(hb.g, "sequence length %lld exceeds max_position_embeddings = %lld; the "
                        "config's RoPE scaling (rope_scaling %s, factor %g) is what stretches "
                        "positions this far: quality beyond the trained context is not "
                        "guaranteed", (long long)hb.s, (long long)f->info.max_positions,
                        f->rope_scaling, f->rope_factor);

    int32_t ids, table, x, loss, L = (int32_t)f->info.layers;
    s = loom_hf_ids(&hb, "input_ids", &ids);
    if (s == LOOM_OK)
        s = f->embed ? f->embed(&hb, f->cfg, ids, &table, &x)
                     : loom_hf_embedding(&hb, "model.embed_tokens", 0, ids,
                                         (loom_dim){"v", f->info.vocab}, f->info.hidden, &table, &x);
    for (int32_t i = 0; s == LOOM_OK && i < L; i++) s = f->block(&hb, f->cfg, i, x, &x);
    int32_t w_head = f->info.tied_embeddings ? table : -1;
    head_names main_head = {f->final_norm, "lm_head", "labels", "loss"};
    if (s == LOOM_OK) s = head(&hb, L + 1, &main_head, f->norm_fn, x, &w_head, f->info.vocab, &loss);
    if (s == LOOM_OK && o->mtp && f->mtp_layers > 0) {
        /* the parameters the depths add: the weights created from here on */
        int32_t before = loom_graph_num_tensors(hb.g);
        s = mtp(&hb, f, x, table, w_head);
        for (int32_t t = before; s == LOOM_OK && t < loom_graph_num_tensors(hb.g); t++) {
            const loom_tensor *tt = loom_graph_tensor(hb.g, t);
            if (tt->is_weight) info->mtp_params += loom_tensor_numel(tt);
        }
    }
    if (s == LOOM_OK) s = loom_graph_finalize(hb.g, c->err);
    if (s) {
        loom_error_prefix(c->err, "%s", c->file);
        loom_graph_destroy(hb.g);
        return s;
    }
    *out = hb.g;
    return LOOM_OK;
}
