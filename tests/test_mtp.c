/*
 * test_mtp.c — DeepSeek-V3's multi-token-prediction (MTP) layer in the
 * training graph (graph/hf_build.c, loom_model_opts.mtp) and what it costs
 * the last pipeline stage in eval and memory.
 *
 * Independent references:
 *   - the MTP module's parameters in closed form from the config (one MLA +
 *     MoE decoder layer, enorm, hnorm, eh_proj [2h, h], shared_head.norm),
 *     and the model card's 685B = 671B main + 14B MTP, whose 14B counts the
 *     module's own embed_tokens and shared_head.head copies in the HF
 *     checkpoint (2·v·h), which training shares with the main model;
 *   - the extra vocabulary projection's forward FLOPs 2·tokens·h·v and
 *     eh_proj's 2·tokens·2h·h, by hand;
 *   - the last stage's parameters on one GPU of Megatron-Bridge's B200
 *     layout Et*4|(tttt|)*14tmL (pp 16, ep 8): the MTP layer's dense weights,
 *     1/ep of its routed experts, and the copy of the embedding table that
 *     Megatron keeps on the MTP stage (language_module.py), which a one-stage
 *     pipeline shares instead;
 *   - Megatron-LM's default of no MTP layers: a launch line builds them
 *     only with --mtp-num-layers, and only as many as the model has.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/cluster.h"
#include "costs/compute.h"
#include "costs/eval.h"
#include "graph/model.h"
#include "planner/import/megatron_import.h"
#include "tests/check.h"

#define MODEL "examples/models/deepseek-v3.json"
#define SEQ 4096

/* DeepSeek-V3's config.json */
static const int64_t h = 7168, heads = 128, ql = 1536, kvl = 512, nope = 128, rope = 64,
                     vd = 128, e = 256, fe = 2048, v = 129280;

static loom_graph *build(bool mtp)
{
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = SEQ;
    o.batch = 1;
    o.mtp = mtp;
    loom_graph *g = NULL;
    loom_error err = {0};
    if (loom_model_load(MODEL, &o, &g, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return g;
}

/* One MLA + MoE decoder layer with its two norms (the MTP layer's block). */
static int64_t moe_layer_params(void)
{
    int64_t mla = h * ql + ql + ql * heads * (nope + rope) + h * (kvl + rope) + kvl +
                  kvl * heads * (nope + vd) + heads * vd * h;
    int64_t moe = e * 3 * h * fe + 1 * 3 * h * fe + h * e + e;   /* + router bias */
    return mla + moe + 2 * h;
}

/* The MTP layer: the block, enorm, hnorm, shared_head.norm and eh_proj. */
static int64_t mtp_params(void) { return moe_layer_params() + 3 * h + 2 * h * h; }

static const loom_op *op_named(const loom_graph *g, const char *name)
{
    for (int32_t i = 0; i < loom_graph_num_ops(g); i++)
        if (strcmp(loom_graph_op(g, i)->name, name) == 0) return loom_graph_op(g, i);
    return NULL;
}

static void test_graph(const loom_graph *g0, const loom_graph *g1)
{
    loom_graph_totals t0, t1;
    loom_graph_totals_get(g0, &t0);
    loom_graph_totals_get(g1, &t1);
    const loom_model_info *i0 = loom_graph_info_c(g0), *i1 = loom_graph_info_c(g1);
    CHECK_INT_EQ(t1.params - t0.params, mtp_params());
    CHECK_INT_EQ(i1->mtp_params, mtp_params());
    CHECK_INT_EQ(i0->mtp_params, 0);
    /* 11.61B here; with the checkpoint's own embedding and head copies the
     * module is the card's 14B (13.46B) and the model its 685B (684.49B).
     * The card rounds 685 and 671 to whole billions, so their difference,
     * 14, is good to ±1B, and so is 685 here (the checkpoint also stores
     * fp8 scale tensors, ~1/16384 of the weights, which HF's count adds) */
    int64_t hf_mtp = mtp_params() + 2 * v * h;
    CHECK(hf_mtp > 13.0e9 && hf_mtp < 15.0e9);
    CHECK_NEAR_REL((double)(t1.params + 2 * v * h), 685e9, 1e9 / 685e9);
    CHECK_NEAR_REL((double)t0.params, 671e9, 0.5e9 / 671e9);

    /* still embedding, 61 blocks and the head layer, which now holds the MTP */
    CHECK_INT_EQ(loom_graph_layer_count(g1), 63);
    CHECK_INT_EQ(loom_graph_layer_count(g0), 63);
    const loom_op *head = op_named(g1, "model.layers.61.shared_head.head"),
                  *eh = op_named(g1, "model.layers.61.eh_proj"),
                  *moe = op_named(g1, "model.layers.61.mlp.experts.down_proj");
    CHECK(head && eh && moe && !op_named(g0, "model.layers.61.eh_proj"));
    if (!head || !eh || !moe) return;
    CHECK_INT_EQ(head->layer, 62);
    CHECK_INT_EQ(eh->layer, 62);
    CHECK_INT_EQ(moe->layer, 62);
    CHECK_INT_EQ(head->fwd_flops, 2 * (int64_t)SEQ * h * v);
    CHECK_INT_EQ(eh->fwd_flops, 2 * (int64_t)SEQ * 2 * h * h);
    /* the shared weights: the MTP head projects with lm_head's, its lookup
     * reads the main table */
    CHECK_INT_EQ(head->w[0], op_named(g1, "lm_head")->w[0]);
    CHECK_INT_EQ(op_named(g1, "model.layers.61.embed_tokens")->w[0],
                 op_named(g1, "model.embed_tokens")->w[0]);

    /* the head layer grows by one decoder layer of the last block's kind,
     * eh_proj and a second head (norm, vocabulary projection, loss), plus
     * the lookup and two norms (element-wise, < 0.1% of the rest) */
    loom_graph_totals head0, head1, block;
    loom_graph_layer_totals(g0, 62, &head0);
    loom_graph_layer_totals(g1, 62, &head1);
    loom_graph_layer_totals(g0, 61, &block);
    CHECK_INT_EQ(block.params, moe_layer_params());
    CHECK_NEAR_REL((double)(head1.fwd_flops - head0.fwd_flops),
                   (double)(block.fwd_flops + eh->fwd_flops + head0.fwd_flops), 1e-3);
    /* a layer's totals count each weight it uses: the MTP lookup's table too */
    CHECK_INT_EQ(head1.params - head0.params, mtp_params() + v * h);
}

static loom_cost_model *model_on(const char *preset)
{
    loom_cluster c;
    loom_cost_model *cm = NULL;
    loom_error err = {0};
    if (loom_cluster_preset(preset, &c, &err) || loom_cost_model_create(&c, NULL, NULL, &cm, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return cm;
}

static void eval(const loom_graph *g, const loom_cost_model *cm, const loom_parallel *p,
                 const loom_eval_opts *o, loom_eval_result *r)
{
    loom_error err = {0};
    loom_status s = loom_eval_megatron_ex(g, cm, p, o, r, &err);
    if (s) fprintf(stderr, "eval: %s\n", err.msg);
    CHECK_INT_EQ(s, LOOM_OK);
}

/* Megatron-Bridge's B200 run: pp 16, layout Et*4|(tttt|)*14tmL, ep 8. */
static void test_last_stage(const loom_graph *g0, const loom_graph *g1)
{
    loom_cost_model *cm = model_on("dgx-b200-x32");
    loom_parallel p;
    loom_parallel_init(&p);
    p.pp = 16, p.dp = 16, p.ep = 8, p.mbs = 1, p.gbs = 2048, p.seq = SEQ, p.dist_opt = true;
    int32_t chunks[16];
    for (int i = 0; i < 15; i++) chunks[i] = 4;
    chunks[15] = 1;
    loom_eval_opts o = {.chunk_layers = chunks, .n_chunks = 16};
    loom_eval_result r0, r1;
    eval(g0, cm, &p, &o, &r0);
    eval(g1, cm, &p, &o, &r1);
    if (r0.n_stages == 16 && r1.n_stages == 16) {
        const loom_eval_stage *a = &r0.stages[15], *b = &r1.stages[15];
        int64_t experts = e * 3 * h * fe;
        /* dense weights whole, routed experts 1/ep, and the table's copy */
        CHECK_INT_EQ(b->mem.params - a->mem.params, mtp_params() - experts + experts / 8 + v * h);
        CHECK_INT_EQ(b->mem.params_bytes - a->mem.params_bytes,
                     2 * (mtp_params() - experts + experts / 8 + v * h));
        CHECK(b->mem.activations_bytes > a->mem.activations_bytes);
        for (int s = 0; s < 15; s++)
            CHECK_INT_EQ(r1.stages[s].mem.total_bytes, r0.stages[s].mem.total_bytes);
        /* the last stage held one block and the head; the MTP depth is one
         * more of each plus eh_proj (2·s·2h·h, 5% of the head's 2·s·h·v),
         * two norms and a lookup */
        double grow = (b->fwd_s - a->fwd_s) / a->fwd_s;
        printf("last stage forward %.4f -> %.4f s (+%.1f%%), step %.4f -> %.4f s\n", a->fwd_s,
               b->fwd_s, 100 * grow, r0.step_time_s, r1.step_time_s);
        CHECK(grow > 1.0 && grow < 1.1);
        CHECK(r1.step_time_s > r0.step_time_s);
        /* model FLOPs per step: 3 × forward of the added matmuls, for each
         * of the gbs sequences; the block's from the last main block */
        double mm = 0;
        int32_t first, count;
        loom_graph_layer_ops(g0, 61, &first, &count);
        for (int32_t i = first; i < first + count; i++) {
            const loom_op *op = loom_graph_op(g0, i);
            if (op->kind == LOOM_OP_EINSUM || op->kind == LOOM_OP_ATTENTION)
                mm += (double)op->fwd_flops;
        }
        double hand = 3.0 * 2048 * (mm + 2.0 * SEQ * 2 * h * h + 2.0 * SEQ * h * v);
        CHECK_NEAR_REL(r1.model_flops - r0.model_flops, hand, 1e-9);
    } else {
        CHECK(false);
    }
    loom_eval_result_free(&r0);
    loom_eval_result_free(&r1);

    /* one stage: the table is the same tensor as the embedding's, held once */
    p.pp = 1, p.dp = 256;
    eval(g0, cm, &p, NULL, &r0);
    eval(g1, cm, &p, NULL, &r1);
    if (r0.n_stages == 1 && r1.n_stages == 1) {
        int64_t experts = e * 3 * h * fe;
        CHECK_INT_EQ(r1.stages[0].mem.params - r0.stages[0].mem.params,
                     mtp_params() - experts + experts / 8);
    }
    loom_eval_result_free(&r0);
    loom_eval_result_free(&r1);
    loom_cost_model_destroy(cm);
}

/* The launch line, not the framework, says whether MTP layers are built. */
static void test_launch_line(void)
{
    static const char *const lines[] = {
        "pretrain_gpt.py --num-layers 61 --hidden-size 7168 --num-attention-heads 128 "
        "--num-experts 256 --seq-length 4096 --micro-batch-size 1",
        "pretrain_gpt.py --num-layers 61 --hidden-size 7168 --num-attention-heads 128 "
        "--num-experts 256 --seq-length 4096 --micro-batch-size 1 "
        "--mtp-num-layers 1",
        "pretrain_gpt.py --num-layers 61 --hidden-size 7168 --num-attention-heads 128 "
        "--num-experts 256 --seq-length 4096 --micro-batch-size 1 "
        "--mtp-num-layers 2",
    };
    for (int i = 0; i < 3; i++) {
        loom_parallel p;
        int32_t layout[LOOM_EXPORT_MAX_CHUNKS], n = 0;
        loom_graph *g = NULL;
        loom_export_list notes = {0};
        loom_error err = {0};
        loom_status s = loom_megatron_eval_setup(lines[i], MODEL, 8, &p, layout, &n, &g, &notes, &err);
        if (i < 2) {
            CHECK_INT_EQ(s, LOOM_OK);
            if (s) fprintf(stderr, "%s\n", err.msg);
            else CHECK_INT_EQ(loom_graph_info_c(g)->mtp_params, i ? mtp_params() : 0);
        } else {
            CHECK(s != LOOM_OK && strstr(err.msg, "--mtp-num-layers 2") &&
                  strstr(err.msg, "has 1"));
        }
        loom_graph_destroy(g);
    }
}

int main(void)
{
    test_launch_line();
    loom_graph *g0 = build(false), *g1 = build(true);
    test_graph(g0, g1);
    test_last_stage(g0, g1);
    /* the families whose MTP layers a training graph builds: DeepSeek's
     * (hf_deepseek.c passes them to the builder), not GLM-4.5's */
    CHECK(loom_model_builds_mtp("deepseek_v3"));
    CHECK(loom_model_builds_mtp("deepseek_v2"));
    CHECK(!loom_model_builds_mtp("glm4_moe"));
    CHECK(!loom_model_builds_mtp("llama"));
    CHECK(!loom_model_builds_mtp("no_such_model"));
    CHECK_INT_EQ(loom_graph_info_c(g1)->mtp_params > 0, loom_model_builds_mtp(loom_graph_info_c(g1)->arch));
    loom_graph_destroy(g0);
    loom_graph_destroy(g1);
    return check_done();
}
