/*
 * solver_graphs.h — small operator graphs built by hand with the graph API
 * for the solver tests (test_strategy.c, test_intra.c), independent of the
 * model readers: a Llama-style decoder stack and an MLP block.
 *
 * Llama block (layer L), dims b s h heads kvh dh f:
 *   in_norm (rmsnorm) -> q/k/v_proj -> q/k_rope -> sdpa (GQA) -> o_proj
 *   -> attn_add (+x) -> post_norm -> gate/up_proj -> act (swiglu) -> down_proj
 *   -> mlp_add (+) : 15 ops, the HF Llama layer's shape (graph/hf_llama.c).
 * Layer 0 is a single rmsnorm over the input (a stand-in for the embedding).
 */
#ifndef LOOM_TEST_SOLVER_GRAPHS_H
#define LOOM_TEST_SOLVER_GRAPHS_H

#include <stdio.h>
#include <string.h>
#include "graph/graph.h"

typedef struct {
    int64_t b, s, h, heads, kvh, dh, f;
    int layers;
} sg_llama;

static int sg_failed;   /* set when a builder call fails (tests check it) */

static int32_t sg_tensor(loom_graph *g, const char *n, int nd, const loom_dim *d, bool w)
{
    int32_t id = -1;
    loom_error e;
    if (loom_graph_add_tensor(g, n, LOOM_DTYPE_BF16, nd, d, w, &id, &e)) {
        fprintf(stderr, "tensor %s: %s\n", n, e.msg);
        sg_failed = 1;
    }
    return id;
}

/* An op of `kind` whose one output is shaped like in[0]. */
static int32_t sg_op(loom_graph *g, const char *name, int layer, loom_op_kind kind, const char *fn,
                     int nin, const int32_t *in, int32_t w, uint32_t saves)
{
    /* copy the dims: adding a tensor may move the graph's tensor array */
    const loom_tensor *x = loom_graph_tensor(g, in[0]);
    loom_dim dims[LOOM_MAX_DIMS];
    int nd = x->ndim;
    memcpy(dims, x->dims, sizeof dims);
    char tn[LOOM_NAME_MAX + 8];
    snprintf(tn, sizeof tn, "%s.out", name);
    int32_t y = sg_tensor(g, tn, nd, dims, false);
    loom_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind, op.layer = layer, op.n_in = nin, op.n_out = 1, op.out[0] = y, op.saves = saves;
    for (int i = 0; i < nin; i++) op.in[i] = in[i];
    if (w >= 0) op.n_w = 1, op.w[0] = w;
    snprintf(op.name, sizeof op.name, "%s", name);
    if (fn) snprintf(op.fn, sizeof op.fn, "%s", fn);
    loom_error e;
    if (loom_graph_add_op(g, &op, NULL, &e)) {
        fprintf(stderr, "op %s: %s\n", name, e.msg);
        sg_failed = 1;
    }
    return y;
}

static int32_t sg_linear(loom_graph *g, const char *name, int layer, int32_t x, const char *sub,
                         int nd, const loom_dim *wd)
{
    char wn[LOOM_NAME_MAX + 8];
    snprintf(wn, sizeof wn, "%s.weight", name);
    int32_t w = sg_tensor(g, wn, nd, wd, true), y = -1;
    loom_error e;
    if (loom_graph_einsum(g, name, layer, sub, 1, &x, 1, &w, LOOM_SAVE_IN(0), &y, &e)) {
        fprintf(stderr, "einsum %s: %s\n", name, e.msg);
        sg_failed = 1;
    }
    return y;
}

static int32_t sg_norm(loom_graph *g, const char *name, int layer, int32_t x, int64_t h)
{
    char wn[LOOM_NAME_MAX + 8];
    snprintf(wn, sizeof wn, "%s.weight", name);
    loom_dim hd = {"h", h};
    int32_t w = sg_tensor(g, wn, 1, &hd, true);
    return sg_op(g, name, layer, LOOM_OP_NORM, "rmsnorm", 1, &x, w, LOOM_SAVE_IN(0));
}

static int32_t sg_llama_layer(loom_graph *g, const sg_llama *d, int L, int32_t x)
{
    char n[64];
    loom_dim h = {"h", d->h}, nh = {"heads", d->heads}, kv = {"kvh", d->kvh}, dh = {"dh", d->dh},
             f = {"f", d->f};
#define SG_NAME(sfx) (snprintf(n, sizeof n, "L%d.%s", L, sfx), n)
    int32_t xn = sg_norm(g, SG_NAME("in_norm"), L, x, d->h);
    int32_t q = sg_linear(g, SG_NAME("q_proj"), L, xn, "bsh,hnd->bsnd", 3, (loom_dim[]){h, nh, dh});
    int32_t k = sg_linear(g, SG_NAME("k_proj"), L, xn, "bsh,hkd->bskd", 3, (loom_dim[]){h, kv, dh});
    int32_t v = sg_linear(g, SG_NAME("v_proj"), L, xn, "bsh,hkd->bskd", 3, (loom_dim[]){h, kv, dh});
    int32_t qr = sg_op(g, SG_NAME("q_rope"), L, LOOM_OP_ELEMENTWISE, "rope", 1, &q, -1, 0);
    int32_t kr = sg_op(g, SG_NAME("k_rope"), L, LOOM_OP_ELEMENTWISE, "rope", 1, &k, -1, 0);
    int32_t o = sg_op(g, SG_NAME("sdpa"), L, LOOM_OP_ATTENTION, NULL, 3, (int32_t[]){qr, kr, v}, -1,
                      LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1) | LOOM_SAVE_IN(2) | LOOM_SAVE_OUT(0));
    int32_t ao = sg_linear(g, SG_NAME("o_proj"), L, o, "bsnd,ndh->bsh", 3, (loom_dim[]){nh, dh, h});
    int32_t x2 = sg_op(g, SG_NAME("attn_add"), L, LOOM_OP_ELEMENTWISE, "add", 2, (int32_t[]){x, ao}, -1, 0);
    int32_t xn2 = sg_norm(g, SG_NAME("post_norm"), L, x2, d->h);
    int32_t gt = sg_linear(g, SG_NAME("gate_proj"), L, xn2, "bsh,hf->bsf", 2, (loom_dim[]){h, f});
    int32_t up = sg_linear(g, SG_NAME("up_proj"), L, xn2, "bsh,hf->bsf", 2, (loom_dim[]){h, f});
    int32_t ac = sg_op(g, SG_NAME("act"), L, LOOM_OP_ELEMENTWISE, "swiglu", 2, (int32_t[]){gt, up}, -1,
                       LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1));
    int32_t dn = sg_linear(g, SG_NAME("down_proj"), L, ac, "bsf,fh->bsh", 2, (loom_dim[]){f, h});
    return sg_op(g, SG_NAME("mlp_add"), L, LOOM_OP_ELEMENTWISE, "add", 2, (int32_t[]){x2, dn}, -1, 0);
#undef SG_NAME
}

/* Layer 0: rmsnorm over the input; layers 1..d->layers: Llama blocks. */
static loom_graph *sg_llama_build(const sg_llama *d)
{
    loom_graph *g;
    loom_error e;
    if (loom_graph_create("llama-like", &g, &e)) return NULL;
    loom_dim xd[3] = {{"b", d->b}, {"s", d->s}, {"h", d->h}};
    int32_t x = sg_tensor(g, "x", 3, xd, false);
    x = sg_norm(g, "pre", 0, x, d->h);
    for (int L = 1; L <= d->layers; L++) x = sg_llama_layer(g, d, L, x);
    if (sg_failed || loom_graph_finalize(g, &e)) {
        fprintf(stderr, "llama-like graph: %s\n", e.msg);
        loom_graph_destroy(g);
        return NULL;
    }
    return g;
}

/* One MLP block in layer 0: rmsnorm -> fc1 (bsh,hf->bsf) -> gelu ->
 * fc2 (bsf,fh->bsh) -> residual add. */
static loom_graph *sg_mlp_build(int64_t b, int64_t s, int64_t h, int64_t f)
{
    loom_graph *g;
    loom_error e;
    if (loom_graph_create("mlp", &g, &e)) return NULL;
    loom_dim xd[3] = {{"b", b}, {"s", s}, {"h", h}}, hd = {"h", h}, fd = {"f", f};
    int32_t x = sg_tensor(g, "x", 3, xd, false);
    int32_t xn = sg_norm(g, "norm", 0, x, h);
    int32_t y1 = sg_linear(g, "fc1", 0, xn, "bsh,hf->bsf", 2, (loom_dim[]){hd, fd});
    int32_t y2 = sg_op(g, "gelu", 0, LOOM_OP_ELEMENTWISE, "gelu", 1, &y1, -1, LOOM_SAVE_IN(0));
    int32_t y3 = sg_linear(g, "fc2", 0, y2, "bsf,fh->bsh", 2, (loom_dim[]){fd, hd});
    sg_op(g, "residual", 0, LOOM_OP_ELEMENTWISE, "add", 2, (int32_t[]){x, y3}, -1, 0);
    if (sg_failed || loom_graph_finalize(g, &e)) {
        fprintf(stderr, "mlp graph: %s\n", e.msg);
        loom_graph_destroy(g);
        return NULL;
    }
    return g;
}

/* Op id by name, -1 if absent. */
static int32_t sg_find(const loom_graph *g, const char *name)
{
    for (int32_t i = 0; i < loom_graph_num_ops(g); i++)
        if (!strcmp(loom_graph_op(g, i)->name, name)) return i;
    return -1;
}

#endif
