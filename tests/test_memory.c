/*
 * test_memory.c — the memory model (costs/memory.c) against Korthikanti et
 * al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
 * (arXiv 2205.05198), Table 2 / §4, per-layer activation bytes in 16-bit:
 *
 *   no parallelism          sbh(34 + 5as/h)
 *   tensor parallel         sbh(10 + 24/t + 5as/(ht))
 *   tensor + sequence par.  sbh/t · (34 + 5as/h)
 *   selective recompute+SP  34 · sbh/t
 *   full recompute          2sbh
 *
 * on a GPT-3-175B layer (s 2048, h 12288, a 96, t 8) built here by hand in
 * the graph conventions (graph.h), and through the ingest path when the
 * bundled gpt3-175b config is present; plus ZeRO-1/2/3 model-state bytes,
 * micro-batches in flight and the KV cache (also multi-head latent
 * attention's, DeepSeek-V3), all computed by hand.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "costs/memory.h"
#include "costs/recompute.h"
#include "graph/graph.h"
#include "graph/model.h"

#define S 2048
#define H 12288
#define A 96
#define T 8

static int32_t tensor(loom_graph *g, const char *name, int nd, const char *const *dn,
                      const int64_t *sz, bool w)
{
    loom_dim d[LOOM_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        snprintf(d[i].name, sizeof d[i].name, "%s", dn[i]);
        d[i].size = sz[i];
    }
    int32_t id = -1;
    loom_error e;
    if (loom_graph_add_tensor(g, name, LOOM_DTYPE_BF16, nd, d, w, &id, &e)) {
        fprintf(stderr, "add_tensor %s: %s\n", name, e.msg);
        exit(2);
    }
    return id;
}

static int32_t op(loom_graph *g, loom_op_kind kind, const char *name, int layer, const char *fn,
                  int n_in, const int32_t *in, int32_t out, uint32_t saves)
{
    loom_op o = {.kind = kind, .layer = layer, .n_in = n_in, .n_out = 1, .saves = saves};
    snprintf(o.name, sizeof o.name, "%s", name);
    snprintf(o.fn, sizeof o.fn, "%s", fn);
    for (int i = 0; i < n_in; i++) o.in[i] = in[i];
    o.out[0] = out;
    loom_error e;
    if (loom_graph_add_op(g, &o, NULL, &e)) {
        fprintf(stderr, "add_op %s: %s\n", name, e.msg);
        exit(2);
    }
    return out;
}

static int32_t einsum(loom_graph *g, const char *name, int layer, const char *sub, int n_in,
                      const int32_t *in, int n_w, const int32_t *w, uint32_t saves)
{
    int32_t out;
    loom_error e;
    if (loom_graph_einsum(g, name, layer, sub, n_in, in, n_w, w, saves, &out, &e)) {
        fprintf(stderr, "einsum %s: %s\n", name, e.msg);
        exit(2);
    }
    return out;
}

/* `layers` GPT-3 blocks (layernorm, q/k/v/o projections, attention, dropouts,
 * gelu MLP with f = 4h), with unfused or fused attention, batch b. */
static loom_graph *gpt_layers(int layers, int64_t b, bool fused)
{
    loom_graph *g;
    loom_error e;
    if (loom_graph_create("gpt3-layers", &g, &e)) exit(2);
    const int64_t dh = H / A;
    const char *bsh[] = {"b", "s", "h"};
    int64_t bsh_sz[] = {b, S, H};
    int32_t x = tensor(g, "x", 3, bsh, bsh_sz, false);
    for (int l = 0; l < layers; l++) {
        char n[96];
#define NAME(s) (snprintf(n, sizeof n, "l%d.%s", l, s), n)
        const char *hnd[] = {"h", "heads", "dh"}, *ndh[] = {"heads", "dh", "h"};
        const char *hf[] = {"h", "f"}, *fh[] = {"f", "h"}, *hh[] = {"h"};
        int64_t hnd_sz[] = {H, A, dh}, ndh_sz[] = {A, dh, H}, hf_sz[] = {H, 4 * H},
                fh_sz[] = {4 * H, H}, h_sz[] = {H};
        int32_t wq = tensor(g, NAME("wq"), 3, hnd, hnd_sz, true);
        int32_t wk = tensor(g, NAME("wk"), 3, hnd, hnd_sz, true);
        int32_t wv = tensor(g, NAME("wv"), 3, hnd, hnd_sz, true);
        int32_t wo = tensor(g, NAME("wo"), 3, ndh, ndh_sz, true);
        int32_t w1 = tensor(g, NAME("w1"), 2, hf, hf_sz, true);
        int32_t w2 = tensor(g, NAME("w2"), 2, fh, fh_sz, true);
        int32_t g1 = tensor(g, NAME("ln1.w"), 1, hh, h_sz, true);
        int32_t g2 = tensor(g, NAME("ln2.w"), 1, hh, h_sz, true);

        /* ln1 saves its input: 2sbh */
        loom_op ln = {.kind = LOOM_OP_NORM, .layer = l, .n_in = 1, .n_w = 1, .n_out = 1,
                      .saves = LOOM_SAVE_IN(0)};
        snprintf(ln.name, sizeof ln.name, "l%d.ln1", l);
        snprintf(ln.fn, sizeof ln.fn, "layernorm");
        ln.in[0] = x;
        ln.w[0] = g1;
        ln.out[0] = tensor(g, NAME("ln1.out"), 3, bsh, bsh_sz, false);
        if (loom_graph_add_op(g, &ln, NULL, &e)) exit(2);
        int32_t y = ln.out[0];
        /* q, k, v projections save their (shared) input once: 2sbh */
        int32_t q = einsum(g, NAME("q"), l, "bsh,hnd->bsnd", 1, &y, 1, &wq, LOOM_SAVE_IN(0));
        int32_t k = einsum(g, NAME("k"), l, "bsh,hnd->bsnd", 1, &y, 1, &wk, LOOM_SAVE_IN(0));
        int32_t v = einsum(g, NAME("v"), l, "bsh,hnd->bsnd", 1, &y, 1, &wv, LOOM_SAVE_IN(0));
        const char *bnd_s[] = {"b", "s", "heads", "dh"}, *bnd_t[] = {"b", "t", "heads", "dh"};
        int64_t bnd_sz[] = {b, S, A, dh};
        int32_t ctx;
        if (fused) {
            /* fused attention saves q, k, v and its output: 8sbh */
            int32_t kt = op(g, LOOM_OP_RESHAPE, NAME("k.t"), l, "", 1, &k,
                            tensor(g, NAME("kt"), 4, bnd_t, bnd_sz, false), 0);
            int32_t vt = op(g, LOOM_OP_RESHAPE, NAME("v.t"), l, "", 1, &v,
                            tensor(g, NAME("vt"), 4, bnd_t, bnd_sz, false), 0);
            loom_op at = {.kind = LOOM_OP_ATTENTION, .layer = l, .n_in = 3, .n_out = 1,
                          .causal = true,
                          .saves = LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1) | LOOM_SAVE_IN(2) |
                                   LOOM_SAVE_OUT(0)};
            snprintf(at.name, sizeof at.name, "l%d.attn", l);
            at.in[0] = q, at.in[1] = kt, at.in[2] = vt;
            at.out[0] = tensor(g, NAME("attn.out"), 4, bnd_s, bnd_sz, false);
            if (loom_graph_add_op(g, &at, NULL, &e)) {
                fprintf(stderr, "%s\n", e.msg);
                exit(2);
            }
            ctx = at.out[0];
        } else {
            int32_t kt = op(g, LOOM_OP_RESHAPE, NAME("k.t"), l, "", 1, &k,
                            tensor(g, NAME("kt"), 4, bnd_t, bnd_sz, false), 0);
            int32_t vt = op(g, LOOM_OP_RESHAPE, NAME("v.t"), l, "", 1, &v,
                            tensor(g, NAME("vt"), 4, bnd_t, bnd_sz, false), 0);
            /* scores save q and k: 4sbh; softmax its output: 2as²b; dropout a
             * mask: as²b; context einsum probs and v: 2as²b + 2sbh */
            int32_t qk[] = {q, kt};
            int32_t sc = einsum(g, NAME("scores"), l, "bsnd,btnd->bnst", 2, qk, 0, NULL,
                                LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1));
            const char *bnst[] = {"b", "heads", "s", "t"};
            int64_t bnst_sz[] = {b, A, S, S};
            int32_t pr = op(g, LOOM_OP_SOFTMAX, NAME("softmax"), l, "", 1, &sc,
                            tensor(g, NAME("probs"), 4, bnst, bnst_sz, false), LOOM_SAVE_OUT(0));
            int32_t pd = op(g, LOOM_OP_ELEMENTWISE, NAME("attn_drop"), l, "dropout", 1, &pr,
                            tensor(g, NAME("probs_d"), 4, bnst, bnst_sz, false), LOOM_SAVE_MASK);
            int32_t pv[] = {pd, vt};
            ctx = einsum(g, NAME("context"), l, "bnst,btnd->bsnd", 2, pv, 0, NULL,
                         LOOM_SAVE_IN(0) | LOOM_SAVE_IN(1));
        }
        /* o_proj saves its input: 2sbh; dropout mask sbh */
        int32_t o = einsum(g, NAME("o"), l, "bsnd,ndh->bsh", 1, &ctx, 1, &wo, LOOM_SAVE_IN(0));
        int32_t od = op(g, LOOM_OP_ELEMENTWISE, NAME("resid_drop1"), l, "dropout", 1, &o,
                        tensor(g, NAME("o_d"), 3, bsh, bsh_sz, false), LOOM_SAVE_MASK);
        int32_t r1in[] = {x, od};
        int32_t r1 = op(g, LOOM_OP_ELEMENTWISE, NAME("add1"), l, "add", 2, r1in,
                        tensor(g, NAME("r1"), 3, bsh, bsh_sz, false), 0);
        /* ln2 input 2sbh; fc1 input 2sbh; gelu input 8sbh; fc2 input 8sbh;
         * dropout mask sbh */
        loom_op ln2 = ln;
        snprintf(ln2.name, sizeof ln2.name, "l%d.ln2", l);
        ln2.in[0] = r1;
        ln2.w[0] = g2;
        ln2.out[0] = tensor(g, NAME("ln2.out"), 3, bsh, bsh_sz, false);
        if (loom_graph_add_op(g, &ln2, NULL, &e)) exit(2);
        int32_t m1 = einsum(g, NAME("fc1"), l, "bsh,hf->bsf", 1, &ln2.out[0], 1, &w1,
                            LOOM_SAVE_IN(0));
        const char *bsf[] = {"b", "s", "f"};
        int64_t bsf_sz[] = {b, S, 4 * H};
        int32_t ge = op(g, LOOM_OP_ELEMENTWISE, NAME("gelu"), l, "gelu", 1, &m1,
                        tensor(g, NAME("gelu.out"), 3, bsf, bsf_sz, false), LOOM_SAVE_IN(0));
        int32_t m2 = einsum(g, NAME("fc2"), l, "bsf,fh->bsh", 1, &ge, 1, &w2, LOOM_SAVE_IN(0));
        int32_t md = op(g, LOOM_OP_ELEMENTWISE, NAME("resid_drop2"), l, "dropout", 1, &m2,
                        tensor(g, NAME("m_d"), 3, bsh, bsh_sz, false), LOOM_SAVE_MASK);
        int32_t r2in[] = {r1, md};
        x = op(g, LOOM_OP_ELEMENTWISE, NAME("add2"), l, "add", 2, r2in,
               tensor(g, NAME("r2"), 3, bsh, bsh_sz, false), 0);
#undef NAME
    }
    if (loom_graph_finalize(g, &e)) {
        fprintf(stderr, "finalize: %s\n", e.msg);
        exit(2);
    }
    return g;
}

static loom_parallel cfg(int64_t tp, bool sp, loom_recompute rc)
{
    loom_parallel p;
    loom_parallel_init(&p);
    p.tp = tp;
    p.sp = sp;
    p.recompute = rc;
    return p;
}

static int64_t layer_saved(const loom_graph *g, loom_parallel p, int layer)
{
    loom_layer_act acts[4];
    loom_memory_layer_acts(g, &p, acts);
    return acts[layer].saved_bytes;
}

static void test_korthikanti(void)
{
    const double s = S, h = H, a = A, t = T, b = 1;
    const double sbh = s * b * h;
    loom_graph *g = gpt_layers(2, 1, false);

    /* The independent per-op count in graph.c agrees with ours. */
    loom_graph_totals tot;
    loom_graph_layer_totals(g, 1, &tot);
    CHECK_INT_EQ(layer_saved(g, cfg(1, false, LOOM_RECOMPUTE_NONE), 1), tot.activation_bytes);

    for (int l = 0; l < 2; l++) {
        CHECK_NEAR_REL(layer_saved(g, cfg(1, false, LOOM_RECOMPUTE_NONE), l),
                       sbh * (34 + 5 * a * s / h), 0.02);
        CHECK_NEAR_REL(layer_saved(g, cfg(T, false, LOOM_RECOMPUTE_NONE), l),
                       sbh * (10 + 24 / t + 5 * a * s / (h * t)), 0.02);
        CHECK_NEAR_REL(layer_saved(g, cfg(T, true, LOOM_RECOMPUTE_NONE), l),
                       sbh / t * (34 + 5 * a * s / h), 0.02);
        CHECK_NEAR_REL(layer_saved(g, cfg(T, true, LOOM_RECOMPUTE_SELECTIVE), l), 34 * sbh / t,
                       0.02);
        /* selective without SP: Table 2 row "TP + selective", sbh(10 + 24/t) */
        CHECK_NEAR_REL(layer_saved(g, cfg(T, false, LOOM_RECOMPUTE_SELECTIVE), l),
                       sbh * (10 + 24 / t), 0.02);
        CHECK_NEAR_REL(layer_saved(g, cfg(T, false, LOOM_RECOMPUTE_FULL), l), 2 * sbh, 0.02);
        CHECK_NEAR_REL(layer_saved(g, cfg(T, true, LOOM_RECOMPUTE_FULL), l), 2 * sbh / t, 0.02);
    }
    /* Exact values: the formulas are exact for this layer (no biases). */
    CHECK_INT_EQ(layer_saved(g, cfg(1, false, LOOM_RECOMPUTE_NONE), 0),
                 (int64_t)(34 * sbh + 5 * a * s * s * b));
    /* Context parallel (cp 2) halves every sequence-carrying tensor. */
    loom_parallel cp = cfg(1, false, LOOM_RECOMPUTE_NONE);
    cp.cp = 2;
    CHECK_INT_EQ(layer_saved(g, cp, 0), (int64_t)(34 * sbh + 5 * a * s * s * b) / 2);
    /* The recompute working set: the attention core (selective, 5as²b/t) or
     * the whole layer (full). */
    loom_layer_act acts[2];
    loom_parallel sel = cfg(T, true, LOOM_RECOMPUTE_SELECTIVE);
    loom_memory_layer_acts(g, &sel, acts);
    CHECK_NEAR_REL(acts[0].work_bytes, 5 * a * s * s * b / t, 1e-9);
    loom_parallel full = cfg(T, true, LOOM_RECOMPUTE_FULL);
    loom_memory_layer_acts(g, &full, acts);
    CHECK_NEAR_REL(acts[0].work_bytes, sbh / t * (34 + 5 * a * s / h), 0.02);
    loom_graph_destroy(g);

    /* Flash (fused) attention: no s×t tensors, 34sbh; selective changes nothing. */
    g = gpt_layers(1, 2, true);
    CHECK_NEAR_REL(layer_saved(g, cfg(1, false, LOOM_RECOMPUTE_NONE), 0), 34 * sbh * 2, 0.02);
    CHECK_INT_EQ(layer_saved(g, cfg(T, true, LOOM_RECOMPUTE_SELECTIVE), 0),
                 layer_saved(g, cfg(T, true, LOOM_RECOMPUTE_NONE), 0));
    CHECK_NEAR_REL(layer_saved(g, cfg(T, true, LOOM_RECOMPUTE_NONE), 0), 34 * sbh * 2 / t, 0.02);
    loom_graph_destroy(g);

    /* Transformer Engine's FP8 recipe (te_fp8.h): each GEMM keeps the fp8
     * copy of its input, 1 byte an element. By hand, of the 34sbh: the QKV
     * input (ln1's output, read by q, k and v: one copy) 2sbh -> sbh, fc1's
     * input 2sbh -> sbh, fc2's (the gelu output) 8sbh -> 4sbh; the
     * attention output stays 2sbh for the attention backward and o_proj
     * adds its fp8 copy, sbh. Flash: 34 - 1 - 1 - 4 + 1 = 29sbh. Unfused
     * (nothing else saves the attention output): 34 - 1 - 1 - 4 - 1 = 27sbh,
     * plus the attention core 5as^2b. */
    g = gpt_layers(1, 2, true);
    loom_graph_info(g)->dtype = LOOM_DTYPE_FP8;
    CHECK_INT_EQ(layer_saved(g, cfg(1, false, LOOM_RECOMPUTE_NONE), 0), (int64_t)(29 * sbh * 2));
    CHECK_NEAR_REL(layer_saved(g, cfg(T, true, LOOM_RECOMPUTE_NONE), 0), 29 * sbh * 2 / t, 0.02);
    loom_graph_destroy(g);
    g = gpt_layers(1, 1, false);
    loom_graph_info(g)->dtype = LOOM_DTYPE_FP8;
    CHECK_INT_EQ(layer_saved(g, cfg(1, false, LOOM_RECOMPUTE_NONE), 0),
                 (int64_t)(27 * sbh + 5 * a * s * s * b));
    loom_graph_destroy(g);
}

static void test_zero(void)
{
    /* 1e9 parameters over dp = 8, by hand (bytes: 2 weights, 4 grads, 12 Adam). */
    const int64_t n = 1000000000;
    const int64_t want[4][3] = {
        {2 * n, 4 * n, 12 * n},          /* ZeRO-0: replicated           */
        {2 * n, 4 * n, 12 * n / 8},      /* ZeRO-1: optimizer / dp        */
        {2 * n, 4 * n / 8, 12 * n / 8},  /* ZeRO-2: + gradients / dp      */
        {2 * n / 8, 4 * n / 8, 12 * n / 8},  /* ZeRO-3: + parameters / dp */
    };
    for (int z = 0; z < 4; z++) {
        loom_model_state m;
        loom_memory_model_state(n, 8, z, false, true, &m);
        CHECK_INT_EQ(m.params_bytes, want[z][0]);
        CHECK_INT_EQ(m.grads_bytes, want[z][1]);
        CHECK_INT_EQ(m.optimizer_bytes, want[z][2]);
    }
    /* Megatron's distributed optimizer = ZeRO-1: 6 + 12/d bytes per param. */
    loom_model_state m;
    loom_memory_model_state(n, 8, 0, true, true, &m);
    CHECK_INT_EQ(m.params_bytes + m.grads_bytes + m.optimizer_bytes, 6 * n + 12 * n / 8);
    /* Inference: weights only. */
    loom_memory_model_state(n, 8, 3, false, false, &m);
    CHECK_INT_EQ(m.params_bytes, 2 * n);
    CHECK_INT_EQ(m.grads_bytes + m.optimizer_bytes, 0);
    /* A stage whose mesh holds 4 copies of its weights (n_local = n/4) in
     * 8 replicas: ZeRO divides by the whole group, 32; what it does not
     * shard stays n. */
    for (int z = 0; z < 4; z++) {
        loom_memory_model_state_local(n, n / 4, 8, z, true, &m);
        CHECK_INT_EQ(m.params_bytes, z >= 3 ? 2 * n / 32 : 2 * n);
        CHECK_INT_EQ(m.grads_bytes, z >= 2 ? 4 * n / 32 : 4 * n);
        CHECK_INT_EQ(m.optimizer_bytes, z >= 1 ? 12 * n / 32 : 12 * n);
    }
}

/* A whole stage, by hand: two fused-attention GPT-3 blocks at b = 1 under
 * tp 8 + SP, dp 4, ZeRO-2, 3 micro-batches in flight. */
static void test_stage(void)
{
    loom_graph *g = gpt_layers(2, 1, true);
    loom_parallel p = cfg(T, true, LOOM_RECOMPUTE_NONE);
    p.dp = 4;
    p.zero = 2;
    bool in_stage[2] = {true, true};
    loom_stage_memory_opts o = {.in_stage = in_stage, .inflight = 3};
    loom_memory_breakdown m;
    loom_error e;
    CHECK_INT_EQ(loom_memory_stage(g, &p, &o, &m, &e), LOOM_OK);
    /* per layer 12h² weights split 8 ways plus 2h of layernorm weights */
    int64_t params = 2 * (12LL * H * H / T + 2 * H);
    CHECK_INT_EQ(m.params, params);
    CHECK_INT_EQ(m.params_bytes, 2 * params);
    CHECK_INT_EQ(m.grads_bytes, (4 * params + 3) / 4);
    CHECK_INT_EQ(m.optimizer_bytes, 12 * params / 4);
    int64_t act = 2 * 34LL * S * H / T;   /* exact for this layer with SP */
    CHECK_INT_EQ(m.activations_bytes, 3 * act);
    CHECK_INT_EQ(m.other_bytes, LOOM_MEM_RESERVED_BYTES + (int64_t)(3 * act * 0.1 + 0.5));
    CHECK_INT_EQ(m.total_bytes, m.params_bytes + m.grads_bytes + m.optimizer_bytes +
                                    m.activations_bytes + m.other_bytes);
    /* only the second layer */
    in_stage[0] = false;
    CHECK_INT_EQ(loom_memory_stage(g, &p, &o, &m, &e), LOOM_OK);
    CHECK_INT_EQ(m.params, params / 2);

    /* full recompute of only the first block of the stage (recompute_layers 1) */
    in_stage[0] = true;
    p.recompute = LOOM_RECOMPUTE_FULL;
    p.recompute_layers = 1;
    CHECK_INT_EQ(loom_memory_stage(g, &p, &o, &m, &e), LOOM_OK);
    int64_t input = 2LL * S * H / T;
    CHECK_INT_EQ(m.activations_bytes, 3 * (input + act / 2) + act / 2);

    /* Interleaved: Megatron's block method counts in each virtual chunk
     * (megatron/core/recompute.py runs per TransformerBlock, one per
     * chunk). A rank holding chunks [0, 1] and [3] of four blocks with
     * recompute_layers 1 reruns blocks 0 and 3 and keeps block 1 whole;
     * counted over the rank it would rerun block 0 only. */
    loom_graph *g4 = gpt_layers(4, 1, true);
    bool chunks[4] = {true, true, false, true};
    loom_stage_memory_opts o4 = {.in_stage = chunks, .inflight = 3};
    CHECK_INT_EQ(loom_memory_stage(g4, &p, &o4, &m, &e), LOOM_OK);
    CHECK_INT_EQ(m.activations_bytes, 3 * (2 * input + act / 2) + act / 2);
    loom_graph_destroy(g4);

    /* bad arguments */
    o.inflight = -1;
    CHECK_INT_EQ(loom_memory_stage(g, &p, &o, &m, &e), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "in-flight");
    o.in_stage = NULL;
    CHECK_INT_EQ(loom_memory_stage(g, &p, &o, &m, &e), LOOM_ERR_INVALID);
    loom_graph_destroy(g);
}

static void test_inflight_and_kv(void)
{
    /* 1F1B: stage i of S holds min(M, S - i). */
    CHECK(loom_memory_inflight_microbatches(4, 0, 1, 16) == 4);
    CHECK(loom_memory_inflight_microbatches(4, 3, 1, 16) == 1);
    CHECK(loom_memory_inflight_microbatches(4, 0, 1, 2) == 2);
    /* Interleaved, stage 0: p(1 + (p-1)/(pv)); p 4, v 2: 5.5. Stage 3:
     * ((v-1)p + 1)/v = 2.5. */
    CHECK_NEAR_REL(loom_memory_inflight_microbatches(4, 0, 2, 16), 4 * (1 + 3.0 / 8), 1e-12);
    CHECK_NEAR_REL(loom_memory_inflight_microbatches(4, 3, 2, 16), 2.5, 1e-12);
    CHECK_NEAR_REL(loom_memory_inflight_microbatches(8, 0, 3, 64), 8 * (1 + 7.0 / 24), 1e-12);
    CHECK_NEAR_REL(loom_memory_inflight_microbatches(4, 0, 2, 1), 1.0, 1e-12);

    /* Llama-3-8B: 32 layers, 8 kv heads of 128, bf16: 128 KiB per token. */
    CHECK_INT_EQ(loom_memory_kv_cache_bytes(32, 8, 128, LOOM_DTYPE_BF16, 1, 1), 131072);
    CHECK_INT_EQ(loom_memory_kv_cache_bytes(32, 8, 128, LOOM_DTYPE_BF16, 8192, 2),
                 131072LL * 8192 / 2);
    /* tp 16 > 8 kv heads: each GPU still holds one kv head */
    CHECK_INT_EQ(loom_memory_kv_cache_bytes(32, 8, 128, LOOM_DTYPE_BF16, 1, 16), 131072 / 8);

    /* Inference stage: weights, the KV cache from the attention ops, one layer. */
    loom_graph *g = gpt_layers(2, 1, true);
    loom_parallel p = cfg(1, false, LOOM_RECOMPUTE_NONE);
    bool in_stage[2] = {true, true};
    loom_stage_memory_opts o = {.in_stage = in_stage, .inference = true, .kv_tokens = 1000};
    loom_memory_breakdown m;
    loom_error e;
    CHECK_INT_EQ(loom_memory_stage(g, &p, &o, &m, &e), LOOM_OK);
    CHECK_INT_EQ(m.kv_cache_bytes, 2LL * 2 * H * 2 * 1000);
    CHECK_INT_EQ(m.grads_bytes + m.optimizer_bytes, 0);
    CHECK_NEAR_REL(m.activations_bytes, 34.0 * S * H, 0.02);
    loom_graph_destroy(g);
}

/* The same formulas through the ingest path: the bundled GPT-3 175B config
 * (GPT-2 format, biases, dropout 0.1) built with unfused attention; every
 * transformer block must match, the embedding and head layers are not
 * blocks. */
static void test_gpt3_config(void)
{
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = S;
    o.batch = 1;
    o.flash_attention = false;
    loom_graph *g = NULL;
    loom_error e;
    CHECK_INT_EQ(loom_model_load("examples/models/gpt3-175b.json", &o, &g, &e), LOOM_OK);
    if (!g) {
        fprintf(stderr, "%s\n", e.msg);
        return;
    }
    const double s = S, h = H, a = A, t = T, sbh = s * h;
    int32_t n = loom_graph_layer_count(g);
    CHECK_INT_EQ(n, 98);
    loom_layer_act *acts = calloc((size_t)n, sizeof *acts);
    const struct { int64_t tp; bool sp; loom_recompute rc; double want; } cases[] = {
        {1, false, LOOM_RECOMPUTE_NONE, sbh * (34 + 5 * a * s / h)},
        {T, false, LOOM_RECOMPUTE_NONE, sbh * (10 + 24 / t + 5 * a * s / (h * t))},
        {T, true, LOOM_RECOMPUTE_NONE, sbh / t * (34 + 5 * a * s / h)},
        {T, true, LOOM_RECOMPUTE_SELECTIVE, 34 * sbh / t},
        {T, false, LOOM_RECOMPUTE_FULL, 2 * sbh},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        loom_parallel p = cfg(cases[k].tp, cases[k].sp, cases[k].rc);
        loom_memory_layer_acts(g, &p, acts);
        CHECK(!loom_memory_is_block(g, 0) && !loom_memory_is_block(g, 97));
        CHECK_NEAR_REL(acts[1].saved_bytes, cases[k].want, 0.02);
        CHECK_NEAR_REL(acts[96].saved_bytes, cases[k].want, 0.02);
        CHECK_INT_EQ(acts[50].saved_bytes, acts[1].saved_bytes);
    }
    free(acts);
    loom_graph_destroy(g);
}

/* Multi-head latent attention (DeepSeek-V3: 61 layers, kv_lora_rank 512,
 * qk_rope_head_dim 64) caches 512 + 64 = 576 bf16 numbers per token and
 * layer: 1,152 bytes, 70,272 bytes per token for the model, on every GPU of
 * a tensor-parallel group (not 2 · 128 heads · 192 / tp). */
static void test_mla_kv(void)
{
    CHECK_INT_EQ(loom_memory_mla_kv_cache_bytes(61, 512, 64, LOOM_DTYPE_BF16, 1), 70272);
    CHECK_INT_EQ(loom_memory_mla_kv_cache_bytes(61, 512, 64, LOOM_DTYPE_FP8, 4096), 35136LL * 4096);
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = 1;
    loom_graph *g = NULL;
    loom_error e = {0};
    CHECK_INT_EQ(loom_model_load("examples/models/deepseek-v3.json", &o, &g, &e), LOOM_OK);
    if (!g) return;
    const loom_model_info *mi = loom_graph_info_c(g);
    CHECK_INT_EQ(loom_memory_kv_bytes_per_token(mi, 8), 1152);
    /* 16 sequences of 4,096 tokens on a TP-8 stage holding every layer */
    int32_t n = loom_graph_layer_count(g);
    bool *in_stage = calloc((size_t)n, sizeof *in_stage);
    for (int32_t l = 0; in_stage && l < n; l++) in_stage[l] = true;
    loom_parallel p = cfg(8, false, LOOM_RECOMPUTE_NONE);
    loom_stage_memory_opts so = {.in_stage = in_stage, .inference = true, .kv_tokens = 16 * 4096};
    loom_memory_breakdown m;
    CHECK_INT_EQ(loom_memory_stage(g, &p, &so, &m, &e), LOOM_OK);
    CHECK_INT_EQ(m.kv_cache_bytes, 4605345792LL);   /* 70,272 × 65,536 */
    free(in_stage);
    loom_graph_destroy(g);
}

/* Rajbhandari et al. 2020 (ZeRO), Figure 1: a 7.5B-parameter model on 64
 * GPUs with mixed-precision Adam (K = 12) needs 120 GB per GPU replicated,
 * 31.4 GB with P_os (ZeRO-1), 16.6 GB with P_os+g (ZeRO-2) and 1.9 GB with
 * P_os+g+p (ZeRO-3): 2Ψ + 2Ψ + KΨ with the last terms divided by Nd. Under
 * --framework deepspeed (2-byte gradients) loom's model state must be
 * within 10% of each; Megatron's 4-byte fp32 main gradients would make
 * ZeRO-1 1.48x the figure. */
static void test_zero_paper(void)
{
    const int64_t n = 7500000000;
    const double published_gb[4] = {120, 31.4, 16.6, 1.9};
    for (int z = 0; z < 4; z++) {
        loom_model_state m;
        loom_memory_model_state_fw(n, 64, z, false, LOOM_FRAMEWORK_DEEPSPEED, false, true, &m);
        double gb = (double)(m.params_bytes + m.grads_bytes + m.optimizer_bytes) / 1e9;
        printf("ZeRO-%d 7.5B/64 deepspeed: %.2f GB (published %.1f)\n", z, gb, published_gb[z]);
        CHECK_NEAR_REL(gb, published_gb[z], 0.10);
    }
}

/* Megatron's main-gradient buffers take the reduce dtype: 1B parameters
 * on dp 8 with the distributed optimizer hold 2 + 4 + 12/8 = 7.5 B per
 * parameter by default and 2 + 2 + 12/8 = 5.5 B with --grad-reduce-in-bf16.
 * FSDP2 casts the reduced gradient back to its fp32 shards: still 4 B. */
static void test_megatron_grad_dtype(void)
{
    const int64_t n = 1000000000;
    loom_model_state fp32, bf16, fsdp;
    loom_memory_model_state_fw(n, 8, 0, true, LOOM_FRAMEWORK_MEGATRON, false, true, &fp32);
    loom_memory_model_state_fw(n, 8, 0, true, LOOM_FRAMEWORK_MEGATRON, true, true, &bf16);
    loom_memory_model_state_fw(n, 8, 0, true, LOOM_FRAMEWORK_TORCHTITAN, true, true, &fsdp);
    CHECK_INT_EQ(fp32.params_bytes + fp32.grads_bytes + fp32.optimizer_bytes, 7500000000);
    CHECK_INT_EQ(bf16.params_bytes + bf16.grads_bytes + bf16.optimizer_bytes, 5500000000);
    CHECK_INT_EQ(fsdp.grads_bytes, 4000000000);
}

/* Llama-3.1-405B in its published layout: TP8 PP16 DP128 (16,384 H100),
 * seq 8192, mbs 1, SP, flash attention, no recompute, first and last stage
 * 7 blocks (126 = 7 + 14·8 + 7), FSDP sharding gradients and optimizer
 * state (torchtitan semantics, ZeRO-2). Stage 1 (8 blocks, 15 micro-batches
 * in flight under 1F1B) by hand, h = 16384, f = 53248, 8 kv heads of 128:
 *   params/block/GPU = (h·(h + 2·1024) + h·h + 3·h·f) / 8 = 398.5M
 *   model state      = 8 · 398.5M · (2 + (4 + 12)/128) B = 6.32 GiB
 *   activations/block (Megatron-core, SP, bf16, bytes per sbh/t):
 *     norm in 2, QKV in 2, q 2, k+v 2·2·1024/h, attn out 2, norm in 2,
 *     fc1 in 2, fc1 out (gate+up) 4f/h, fc2 in 2f/h  = 8.25 + 6f/h = 27.75 + 0.25
 *   so 32 · sbh/t (sbh/t = 8192·16384/8) = 0.50 GiB, × 8 blocks × 15
 *   = 59.5 GiB, + 1 GiB workspace + 10% fragmentation = 72.8 GiB: it fits
 *   80 GiB less the 5% headroom (76 GiB). Under Megatron's distributed
 *   optimizer the unsharded fp32 main-gradient buffer adds 11.8 GiB:
 *   84.6 GiB, the over-count the published run did not pay. */
/* (ZeRO-3 on the same stage, below: torchtitan's pipelining keeps the
 * weights gathered and the gradients unsharded.) */
static void test_llama405b_layout(void)
{
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = 8192;
    loom_graph *g = NULL;
    loom_error e = {0};
    CHECK_INT_EQ(loom_model_load("examples/models/llama-3.1-405b.json", &o, &g, &e), LOOM_OK);
    if (!g) return;
    int32_t n = loom_graph_layer_count(g);
    bool *in_stage = calloc((size_t)n, sizeof *in_stage);
    int32_t blk = 0;
    for (int32_t l = 0; l < n; l++)
        if (loom_memory_is_block(g, l)) {
            in_stage[l] = blk >= 7 && blk < 15;   /* stage 1: blocks 7..14 */
            blk++;
        }
    loom_parallel p;
    loom_parallel_init(&p);
    p.tp = 8, p.pp = 16, p.dp = 128, p.seq = 8192, p.sp = true, p.gbs = 2048;
    p.zero = 2, p.framework = LOOM_FRAMEWORK_TORCHTITAN;
    loom_stage_memory_opts so = {.in_stage = in_stage, .inflight = 15};
    loom_memory_breakdown m;
    CHECK_INT_EQ(loom_memory_stage(g, &p, &so, &m, &e), LOOM_OK);
    const double GiB = 1073741824.0, h = 16384, f = 53248, sbh_t = 8192.0 * h / 8;
    double per_block = (h * (h + 2048) + h * h + 3 * h * f) / 8;
    double state = 8 * per_block * (2 + 16.0 / 128);
    double act = 8 * 15 * sbh_t * (2 + 2 + 2 + 4.0 * 1024 / h + 2 + 2 + 2 + 4 * f / h + 2 * f / h);
    double total = state + act * 1.10 + GiB;
    printf("405B stage 1: loom %.2f GiB (state %.2f, act %.2f), hand %.2f GiB\n",
           (double)m.total_bytes / GiB,
           (double)(m.params_bytes + m.grads_bytes + m.optimizer_bytes) / GiB,
           (double)m.activations_bytes / GiB, total / GiB);
    CHECK_NEAR_REL((double)m.total_bytes, total, 0.02);
    CHECK((double)m.total_bytes < 0.95 * 80 * GiB);
    /* ZeRO-3 under torchtitan's pipelining keeps the stage's n weights
     * gathered (2n bytes) and accumulates unsharded fp32 gradients (4n)
     * beside the shards (4n/128), through the whole step; Megatron's
     * ZeRO-3 shards them (2n/128 and 4n/128) */
    p.zero = 3;
    CHECK_INT_EQ(loom_memory_stage(g, &p, &so, &m, &e), LOOM_OK);
    int64_t np = m.params;
    CHECK_INT_EQ(m.params_bytes, 2 * np);
    CHECK_INT_EQ(m.grads_bytes, 4 * np + (4 * np + 127) / 128);
    p.framework = LOOM_FRAMEWORK_MEGATRON;
    CHECK_INT_EQ(loom_memory_stage(g, &p, &so, &m, &e), LOOM_OK);
    CHECK_INT_EQ(m.params_bytes, (2 * np + 127) / 128);
    CHECK_INT_EQ(m.grads_bytes, (4 * np + 127) / 128);
    free(in_stage);
    loom_graph_destroy(g);
}

/* Megatron's --recompute-modules (costs/recompute.h), by hand on bundled
 * models at seq 4096, batch 1, no parallelism, 16-bit: what each module
 * stops keeping of one layer.
 *   gpt-oss-120b (h = f = 2880, 128 experts top-4: c = 4096·4/128 = 128
 *   tokens an expert):
 *     layernorm  the two residual norms' outputs (the q/k/v projections'
 *                and the router's input): 2·s·h·2
 *     moe_act    the experts' activation output (down_proj's input): e·c·f·2
 *     core_attn  nothing (flash attention keeps q, k, v, o; it reruns)
 *     moe        all the layer keeps inside its MoE block: router logits
 *                s·e·2, routing weights s·k·2, the dispatched tokens e·c·h·2,
 *                gate and up outputs 2·e·c·f·2, activation e·c·f·2, expert
 *                outputs e·c·h·2 (the block's input, the norm's output, stays)
 *   deepseek-v3 (128 heads, q/k head dim 192, v 128; layer 1 is dense, f 18432):
 *     mla_up_proj  the attention's q, k, v: s·128·(192 + 192 + 128)·2
 *     mlp          gate and up outputs 2·s·f·2 and the activation s·f·2 */
static int64_t saved_with(const loom_graph *g, const char *mods, int layer)
{
    loom_parallel p = cfg(1, false, mods ? LOOM_RECOMPUTE_SELECTIVE : LOOM_RECOMPUTE_NONE);
    if (mods) CHECK(loom_recompute_modules_parse(mods, &p.recompute_modules, NULL, 0));
    loom_layer_act *acts = calloc((size_t)loom_graph_layer_count(g), sizeof *acts);
    if (!acts) return -1;
    loom_memory_layer_acts(g, &p, acts);
    int64_t saved = acts[layer].saved_bytes;
    free(acts);
    return saved;
}

static void test_recompute_modules(void)
{
    const int64_t s = 4096, h = 2880, f = 2880, e = 128, c = 128, k = 4;
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = s;
    loom_graph *g = NULL;
    loom_error err = {0};
    CHECK_INT_EQ(loom_model_load("examples/models/gpt-oss-120b.json", &o, &g, &err), LOOM_OK);
    if (g) {
        int64_t none = saved_with(g, NULL, 1);
        CHECK_INT_EQ(none - saved_with(g, "layernorm", 1), 2 * s * h * 2);
        CHECK_INT_EQ(none - saved_with(g, "moe_act", 1), e * c * f * 2);
        CHECK_INT_EQ(none - saved_with(g, "layernorm,moe_act", 1), 2 * s * h * 2 + e * c * f * 2);
        CHECK_INT_EQ(none - saved_with(g, "core_attn", 1), 0);
        CHECK_INT_EQ(none - saved_with(g, "moe", 1),
                     s * e * 2 + s * k * 2 + e * c * h * 2 + 2 * e * c * f * 2 + e * c * f * 2 +
                         e * c * h * 2);
        loom_graph_destroy(g);
    }
    g = NULL;
    CHECK_INT_EQ(loom_model_load("examples/models/deepseek-v3.json", &o, &g, &err), LOOM_OK);
    if (g) {
        const int64_t heads = 128, fd = 18432;
        int64_t none = saved_with(g, NULL, 1);
        CHECK_INT_EQ(none - saved_with(g, "mla_up_proj", 1), s * heads * (192 + 192 + 128) * 2);
        CHECK_INT_EQ(none - saved_with(g, "mlp", 1), 2 * s * fd * 2 + s * fd * 2);
        /* a dense layer has no MoE block: moe drops nothing there */
        CHECK_INT_EQ(none - saved_with(g, "moe", 1), 0);
        loom_graph_destroy(g);
    }
    uint32_t bits;
    char bad[32];
    CHECK(!loom_recompute_modules_parse("mlp,attn", &bits, bad, sizeof bad));
    CHECK(strcmp(bad, "attn") == 0);
    CHECK(loom_recompute_modules_parse("mla_up_proj mlp", &bits, NULL, 0));
    CHECK_INT_EQ(bits, LOOM_RC_MLA_UP_PROJ | LOOM_RC_MLP);
}

int main(void)
{
    test_recompute_modules();
    test_zero_paper();
    test_megatron_grad_dtype();
    test_llama405b_layout();
    test_korthikanti();
    test_gpt3_config();
    test_zero();
    test_stage();
    test_inflight_and_kv();
    test_mla_kv();
    return check_done();
}
