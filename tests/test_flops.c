/*
 * test_flops.c — FLOP counts of small models computed by hand, and of
 * GPT-3 against the closed form of Narayanan et al. (SC '21), §5.1:
 *
 *     forward FLOPs per token = 24·l·h²·(1 + s/(6h) + V/(16·l·h))
 *
 * The hand counts use the per-kind rules of docs/design.md §3 / graph.c: an einsum
 * costs 2·Π(distinct letter sizes); attention 2·b·heads·s·t·(dqk + dv);
 * layernorm 5, rmsnorm 4, gelu 8, swiglu 5, rope 3, add 1 FLOP per element;
 * cross-entropy 4 per logit; the router 4 per logit; the MoE combine
 * 2·topk per output element. Backward: 2× for einsums and nonlinear
 * pointwise ops and norms, 2.5× attention, 1× linear pointwise ops,
 * 0.5× cross-entropy.
 */
#include <stdint.h>

#include "check.h"
#include "graph/graph.h"
#include "graph/model.h"

static int64_t op_flops(const loom_graph *g, const char *name, int64_t *bwd)
{
    for (int32_t i = 0; i < loom_graph_num_ops(g); i++) {
        const loom_op *op = loom_graph_op(g, i);
        if (strcmp(op->name, name) == 0) {
            if (bwd) *bwd = op->bwd_flops;
            return op->fwd_flops;
        }
    }
    fprintf(stderr, "no op %s\n", name);
    return -1;
}

/* examples/models/tiny-gpt.graph.json: b 2, s 8, h 16, 2 heads of 8,
 * f 64, v 32, two layers, lm_head tied to wte. */
static void test_tiny_gpt(void)
{
    loom_graph *g = NULL;
    loom_error err = {0};
    CHECK(loom_model_load("examples/models/tiny-gpt.graph.json", NULL, &g, &err) == LOOM_OK);
    if (!g) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    const int64_t bs = 2 * 8, h = 16, heads = 2, dh = 8, f = 64, v = 32, s = 8;
    int64_t ln = 5 * bs * h;                      /* 1,280 */
    int64_t proj = 2 * bs * h * heads * dh;       /* 8,192 each of q, k, v, o */
    int64_t attn = 2 * 2 * heads * s * s * (dh + dh); /* 8,192 */
    int64_t add = bs * h;                         /* 256 */
    int64_t fc = 2 * bs * h * f;                  /* 32,768 each */
    int64_t gelu = 8 * bs * f;                    /* 8,192 */
    int64_t layer = 2 * ln + 4 * proj + attn + 2 * add + 2 * fc + gelu;   /* 117,760 */
    int64_t head = ln + 2 * bs * h * v + 4 * bs * v;                      /* 19,712 */
    CHECK_INT_EQ(layer, 117760);
    CHECK_INT_EQ(op_flops(g, "h.0.attn.sdpa", NULL), attn);
    CHECK_INT_EQ(op_flops(g, "h.1.mlp.act", NULL), gelu);
    CHECK_INT_EQ(op_flops(g, "lm_head", NULL), 2 * bs * h * v);

    loom_graph_totals t, l1;
    loom_graph_totals_get(g, &t);
    loom_graph_layer_totals(g, 1, &l1);
    CHECK_INT_EQ(l1.fwd_flops, layer);
    CHECK_INT_EQ(t.fwd_flops, 2 * layer + head);   /* 255,232 */

    int64_t layer_bwd = 2 * (2 * ln) + 2 * (4 * proj) + attn * 5 / 2 + 2 * add + 2 * (2 * fc) + 2 * gelu;
    int64_t head_bwd = 2 * ln + 2 * (2 * bs * h * v) + 4 * bs * v / 2;
    CHECK_INT_EQ(t.bwd_flops, 2 * layer_bwd + head_bwd);   /* 514,560 */

    /* params: wte 32·16 (shared with lm_head), per layer 2 layernorms (2·2h),
     * q/k/v/o 4h², fc1/fc2 2hf; ln_f 2h */
    CHECK_INT_EQ(t.params, v * h + 2 * (4 * h + 4 * h * h + 2 * h * f) + 2 * h);
    CHECK_INT_EQ(t.params_embedding, v * h);
    /* saved per layer: x, ln_1 out, q, k, v, attention out, residual,
     * ln_2 out (2 bytes × 256 each = 8 × 512) + gelu in and out (2 × 2,048) */
    CHECK_INT_EQ(l1.activation_bytes, 8 * 512 + 2 * 2048);
    loom_graph_destroy(g);
}

/* A one-layer Mixtral-style model built from an HF config, counted op by op. */
static void test_tiny_mixtral(void)
{
    const char *cfg = "{\"architectures\": [\"MixtralForCausalLM\"], \"hidden_size\": 8, "
                      "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
                      "\"num_key_value_heads\": 1, \"intermediate_size\": 16, \"vocab_size\": 10, "
                      "\"num_local_experts\": 4, \"num_experts_per_tok\": 2}";
    cJSON *c = cJSON_Parse(cfg);
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = 4;
    loom_graph *g = NULL;
    loom_error err = {0};
    CHECK(loom_model_build_hf("mix.json", c, "mix", &o, &g, &err) == LOOM_OK);
    cJSON_Delete(c);
    if (!g) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    /* tokens 4, h 8, heads 2 x dh 4, 1 kv head, f 16, e 4, top-2:
     * c = ceil(4·2/4) = 2 tokens per expert */
    static const struct {
        const char *op;
        int64_t fwd;
    } tab[] = {
        {"model.layers.0.input_layernorm", 4 * 4 * 8},            /* 128 */
        {"model.layers.0.self_attn.q_proj", 2 * 4 * 8 * 2 * 4},   /* 512 */
        {"model.layers.0.self_attn.k_proj", 2 * 4 * 8 * 1 * 4},   /* 256 */
        {"model.layers.0.self_attn.v_proj", 2 * 4 * 8 * 1 * 4},
        {"model.layers.0.self_attn.q_rope", 3 * 4 * 2 * 4},       /* 96 */
        {"model.layers.0.self_attn.k_rope", 3 * 4 * 1 * 4},       /* 48 */
        {"model.layers.0.self_attn.sdpa", 2 * 2 * 4 * 4 * (4 + 4)}, /* 512 */
        {"model.layers.0.self_attn.o_proj", 2 * 4 * 2 * 4 * 8},   /* 512 */
        {"model.layers.0.attn_residual", 4 * 8},
        {"model.layers.0.post_attention_layernorm", 4 * 4 * 8},
        {"model.layers.0.block_sparse_moe.gate", 2 * 4 * 8 * 4},  /* 256 */
        {"model.layers.0.block_sparse_moe.route", 4 * 4 * 4},     /* 64 */
        {"model.layers.0.block_sparse_moe.dispatch", 0},
        {"model.layers.0.block_sparse_moe.experts.w1", 2 * 4 * 2 * 8 * 16}, /* 2,048 */
        {"model.layers.0.block_sparse_moe.experts.w3", 2 * 4 * 2 * 8 * 16},
        {"model.layers.0.block_sparse_moe.experts.act_fn", 5 * 4 * 2 * 16}, /* 640 */
        {"model.layers.0.block_sparse_moe.experts.w2", 2 * 4 * 2 * 16 * 8},
        {"model.layers.0.block_sparse_moe.combine", 2 * 2 * 4 * 8},  /* 128 */
        {"model.layers.0.mlp_residual", 4 * 8},
        {"model.norm", 4 * 4 * 8},
        {"lm_head", 2 * 4 * 8 * 10},                              /* 640 */
        {"loss", 4 * 4 * 10},                                     /* 160 */
    };
    int64_t sum = 0;
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        int64_t got = op_flops(g, tab[i].op, NULL);
        if (got != tab[i].fwd) fprintf(stderr, "  %s\n", tab[i].op);
        CHECK_INT_EQ(got, tab[i].fwd);
        sum += tab[i].fwd;
    }
    loom_graph_totals t;
    loom_graph_totals_get(g, &t);
    CHECK_INT_EQ(sum, 10672);
    CHECK_INT_EQ(t.fwd_flops, sum);   /* and no op was left out of the table */
    loom_graph_destroy(g);
}

static void test_gpt3_closed_form(void)
{
    loom_model_opts o;
    loom_model_opts_init(&o);
    loom_graph *g = NULL;
    loom_error err = {0};
    CHECK(loom_model_load("examples/models/gpt3-175b.json", &o, &g, &err) == LOOM_OK);
    if (!g) return;
    double l = 96, h = 12288, s = 2048, V = 50257;
    double fwd = 24 * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    loom_graph_totals t;
    loom_graph_totals_get(g, &t);
    CHECK_NEAR_REL((double)t.fwd_flops / s, fwd, 0.005);
    /* training: backward is 2× forward for matmuls (the closed form's
     * 3× overall); flash attention's recompute adds a little */
    CHECK_NEAR_REL((double)(t.fwd_flops + t.bwd_flops) / s, 3 * fwd, 0.01);
    loom_graph_destroy(g);
}

int main(void)
{
    test_tiny_gpt();
    test_tiny_mixtral();
    test_gpt3_closed_form();
    return check_done();
}
