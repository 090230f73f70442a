/*
 * test_eval.c — loom_eval_megatron (costs/eval.c) on small GPT-2-shaped
 * models, against expectations computed here through other paths:
 *   - one GPU: step = M × Σ_ops (fwd + bwd) of loom_cost_op_time + the Adam
 *     step streaming 34 bytes per parameter through HBM;
 *   - model FLOPs = Korthikanti et al.'s 72·B·L·s·h²·(1 + s/6h + V/12hL)
 *     (within the GPT-2 biases' share); full recompute adds one forward of
 *     the blocks' matmuls (their HFU);
 *   - data-parallel sync = one ring all-reduce of the fp32 gradients
 *     (costs/collective.h), exposed when overlap is off;
 *   - the breakdown adds up to the step time; interleaving shrinks the
 *     bubble; memory fits at exactly the GPU's capacity and not one byte
 *     below;
 *   - fp8 (Transformer Engine): GPT-3 175B on 128 H100 runs 1.3-1.6x
 *     faster than bf16, not 2x: only the Linear GEMMs move to fp8 (plus
 *     cast-transpose kernels); attention, TP collectives and p2p stay bf16;
 *   - impossible configurations fail with messages naming the options;
 *   - a pipeline layout that spells out the even split, a first/last split
 *     or an interleaved split costs what that split does; others place the
 *     blocks where they say and are checked.
 */
#include <stdlib.h>

#include "check.h"
#include "costs/collective.h"
#include "costs/eval.h"
#include "costs/pipeline.h"
#include "graph/model.h"

#define H 256
#define L 4
#define HEADS 8
#define V 1024
#define SEQ 128

static loom_graph *build(const char *config, int64_t mbs, bool flash)
{
    cJSON *cfg = cJSON_Parse(config);
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = SEQ;
    o.batch = mbs;
    o.flash_attention = flash;
    loom_graph *g = NULL;
    loom_error e;
    if (loom_model_build_hf("tiny", cfg, "tiny-gpt", &o, &g, &e)) {
        fprintf(stderr, "build: %s\n", e.msg);
        exit(2);
    }
    cJSON_Delete(cfg);
    return g;
}

static loom_graph *gpt(int64_t mbs, bool flash)
{
    return build("{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 256, \"n_layer\": 4, "
                 "\"n_head\": 8, \"vocab_size\": 1024, \"n_positions\": 128}", mbs, flash);
}

static loom_cost_model *model_on(const char *preset, loom_cluster *c)
{
    loom_error e;
    loom_cost_model *cm = NULL;
    if (loom_cluster_preset(preset, c, &e) || loom_cost_model_create(c, NULL, NULL, &cm, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        exit(2);
    }
    return cm;
}

static loom_parallel config(int64_t tp, int64_t pp, int64_t dp, int64_t mbs, int64_t gbs)
{
    loom_parallel p;
    loom_parallel_init(&p);
    p.tp = tp, p.pp = pp, p.dp = dp, p.mbs = mbs, p.gbs = gbs, p.seq = SEQ;
    return p;
}

static double breakdown_sum(const loom_eval_result *r)
{
    const loom_step_breakdown *b = &r->breakdown;
    return b->compute_s + b->tp_comm_s + b->bubble_s + b->p2p_s + b->grad_sync_s + b->optimizer_s +
           b->offload_s;
}

static void test_one_gpu(void)
{
    loom_cluster c;
    loom_cost_model *cm = model_on("dgx-h100-x1", &c);
    c.gpus_per_node = 1;   /* a one-GPU "cluster" */
    loom_cost_model_destroy(cm);
    loom_error e;
    CHECK_INT_EQ(loom_cost_model_create(&c, NULL, NULL, &cm, &e), LOOM_OK);
    loom_graph *g = gpt(2, true);
    loom_parallel p = config(1, 1, 1, 2, 8);   /* 4 micro-batches */
    loom_eval_result r;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);

    double ops = 0;
    for (int32_t i = 0; i < loom_graph_num_ops(g); i++) {
        loom_op_time t;
        CHECK_INT_EQ(loom_cost_op_time(cm, g, i, NULL, 0, &t, &e), LOOM_OK);
        ops += t.fwd_s + t.bwd_s;
    }
    loom_graph_totals tot;
    loom_graph_totals_get(g, &tot);
    double opt = loom_cost_memory_time_s(cm, (double)LOOM_OPTIM_STEP_BYTES_PER_PARAM * (double)tot.params);
    CHECK_INT_EQ(r.microbatches, 4);
    CHECK_NEAR_REL(r.step_time_s, 4 * ops + opt, 1e-9);
    CHECK_NEAR_REL(r.breakdown.optimizer_s, opt, 1e-9);
    CHECK_NEAR_REL(breakdown_sum(&r), r.step_time_s, 1e-12);
    CHECK(r.breakdown.tp_comm_s == 0 && r.breakdown.bubble_s == 0 && r.breakdown.grad_sync_s == 0);
    CHECK_NEAR_REL(r.tokens_per_s, 8.0 * SEQ / r.step_time_s, 1e-12);

    /* Korthikanti Eq. 7, B = 8 sequences; GPT-2's biases add 1/(2·K) of a
     * matmul's FLOPs, well under 1% here. */
    double s = SEQ, h = H;
    double korth = 72.0 * 8 * L * s * h * h * (1 + s / (6 * h) + (double)V / (12 * h * L));
    CHECK_NEAR_REL(r.model_flops, korth, 0.01);
    CHECK_NEAR_REL(r.hardware_flops, r.model_flops, 1e-12);
    CHECK_NEAR_REL(r.mfu, r.model_flops / (r.step_time_s * 989.4e12), 1e-3);
    /* causal: the attention-score share (12·B·L·s²·h) halved */
    CHECK_NEAR_REL(r.model_flops - r.model_flops_causal, 6.0 * 8 * L * s * s * h, 1e-9);
    loom_eval_result_free(&r);

    /* Full recompute reruns the blocks' forward matmuls: 24·b·s·h²·(1 + s/6h)
     * per layer and micro-batch, 2·b·s·h per bias-carrying linear aside. */
    p.recompute = LOOM_RECOMPUTE_FULL;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    double fwd_blocks = 0;
    for (int32_t i = 0; i < loom_graph_num_ops(g); i++) {
        const loom_op *op = loom_graph_op(g, i);
        if (op->layer >= 1 && op->layer <= L &&
            (op->kind == LOOM_OP_EINSUM || op->kind == LOOM_OP_ATTENTION))
            fwd_blocks += (double)op->fwd_flops;
    }
    CHECK_NEAR_REL(r.hardware_flops - r.model_flops, 4 * fwd_blocks, 1e-9);
    CHECK_NEAR_REL(fwd_blocks, 2.0 * L * 24 * s * h * h * (1 + s / (6 * h)), 0.01);
    CHECK(r.step_time_s > 4 * ops);
    loom_eval_result_free(&r);
    loom_graph_destroy(g);
    loom_cost_model_destroy(cm);
}

static void test_parallel(void)
{
    loom_cluster c;
    loom_cost_model *cm = model_on("dgx-h100-x1", &c);
    const loom_calib *cal = loom_cost_model_calib(cm);
    loom_graph *g = gpt(1, true);
    loom_error e;
    loom_eval_result r, r2;

    /* dp 8 in one node, overlap off: the whole all-reduce of fp32 grads */
    loom_parallel p = config(1, 1, 8, 1, 16);
    p.overlap_grad_reduce = false;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    loom_graph_totals tot;
    loom_graph_totals_get(g, &tot);
    double ar = loom_group_collective_time_s(&c, cal, LOOM_COLL_ALL_REDUCE, (loom_group){8, 8},
                                             4.0 * (double)tot.params);
    CHECK_NEAR_REL(r.breakdown.grad_sync_s, ar, 1e-9);
    CHECK_NEAR_REL(breakdown_sum(&r), r.step_time_s, 1e-12);
    /* distributed optimizer: reduce-scatter fp32 + all-gather bf16 */
    p.dist_opt = true;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r2, &e), LOOM_OK);
    double rsag = loom_group_collective_time_s(&c, cal, LOOM_COLL_REDUCE_SCATTER, (loom_group){8, 8},
                                               4.0 * (double)tot.params) +
                  loom_group_collective_time_s(&c, cal, LOOM_COLL_ALL_GATHER, (loom_group){8, 8},
                                               2.0 * (double)tot.params);
    CHECK_NEAR_REL(r2.breakdown.grad_sync_s, rsag, 1e-9);
    /* and its optimizer state is 1/8 */
    CHECK_INT_EQ(r2.stages[0].mem.optimizer_bytes, (12 * tot.params + 7) / 8);
    loom_eval_result_free(&r);
    loom_eval_result_free(&r2);

    /* tp 2 × pp 2 × dp 2: the parts still add up; the TP comm is there;
     * interleaving (vpp 2) shrinks the bubble */
    p = config(2, 2, 2, 1, 16);
    p.sp = true;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    CHECK_NEAR_REL(breakdown_sum(&r), r.step_time_s, 1e-12);
    CHECK(r.breakdown.tp_comm_s > 0 && r.breakdown.bubble_s > 0 && r.breakdown.p2p_s > 0);
    CHECK_INT_EQ(r.n_stages, 2);
    CHECK_INT_EQ(r.stages[0].first_layer, 0);     /* embedding with the first blocks */
    CHECK_INT_EQ(r.stages[0].last_layer, 2);
    CHECK_INT_EQ(r.stages[1].last_layer, L + 1);  /* head with the last */
    /* 1F1B: stage 0 holds 2 micro-batches in flight, stage 1 one */
    CHECK(r.stages[0].mem.inflight == 2 && r.stages[1].mem.inflight == 1);
    p.vpp = 2;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r2, &e), LOOM_OK);
    CHECK(r2.breakdown.bubble_s < r.breakdown.bubble_s);
    CHECK_NEAR_REL(breakdown_sum(&r2), r2.step_time_s, 1e-12);
    loom_eval_result_free(&r);
    loom_eval_result_free(&r2);
    loom_graph_destroy(g);
    loom_cost_model_destroy(cm);
}

static void test_fits_boundary(void)
{
    loom_cluster c;
    loom_cost_model *cm = model_on("dgx-h100-x1", &c);
    loom_graph *g = gpt(4, false);
    loom_parallel p = config(2, 2, 2, 4, 64);
    p.flash = false;
    loom_error e;
    loom_eval_result r;
    if (loom_eval_megatron(g, cm, &p, &r, &e) != LOOM_OK) {
        CHECK_STR_CONTAINS(e.msg, "(no error)");
        return;
    }
    int64_t need = r.memory_per_gpu_bytes;
    /* the largest stage (stage 0: two micro-batches in flight) is the total
     * of its own breakdown */
    const loom_memory_breakdown *m = &r.stages[0].mem;
    CHECK_INT_EQ(m->total_bytes, m->params_bytes + m->grads_bytes + m->optimizer_bytes +
                                     m->activations_bytes + m->kv_cache_bytes + m->other_bytes);
    CHECK_INT_EQ(need, m->total_bytes);
    CHECK(need > r.stages[1].mem.total_bytes);
    loom_eval_result_free(&r);
    loom_cost_model_destroy(cm);

    c.memory_headroom = 0;    /* capacity = HBM */
    c.gpu.hbm_bytes = need;   /* exactly enough */
    CHECK_INT_EQ(loom_cost_model_create(&c, NULL, NULL, &cm, &e), LOOM_OK);
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    CHECK(r.fits && r.stages[0].fits);
    loom_eval_result_free(&r);
    loom_cost_model_destroy(cm);
    c.gpu.hbm_bytes = need - 1;   /* one byte short */
    CHECK_INT_EQ(loom_cost_model_create(&c, NULL, NULL, &cm, &e), LOOM_OK);
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    CHECK(!r.fits && !r.stages[0].fits);
    loom_eval_result_free(&r);
    loom_cost_model_destroy(cm);
    /* a 1 GiB headroom on need + 1 GiB of HBM fits; on 1 byte less it does not */
    c.memory_headroom = 1;
    c.gpu.hbm_bytes = need + ((int64_t)1 << 30);
    CHECK_INT_EQ(loom_cluster_usable_bytes(&c), need);
    CHECK_INT_EQ(loom_cost_model_create(&c, NULL, NULL, &cm, &e), LOOM_OK);
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    CHECK(r.fits);
    loom_eval_result_free(&r);
    loom_cost_model_destroy(cm);
    c.gpu.hbm_bytes -= 1;
    CHECK_INT_EQ(loom_cost_model_create(&c, NULL, NULL, &cm, &e), LOOM_OK);
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    CHECK(!r.fits);
    loom_eval_result_free(&r);
    loom_cost_model_destroy(cm);
    loom_graph_destroy(g);
}

static void expect_error(const loom_graph *g, const loom_cost_model *cm, loom_parallel p,
                         loom_status want, const char *msg)
{
    loom_eval_result r;
    loom_error e = {0};
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), want);
    CHECK_STR_CONTAINS(e.msg, msg);
    loom_eval_result_free(&r);
}

static void test_impossible(void)
{
    loom_cluster c;
    loom_cost_model *cm = model_on("dgx-a100-80g-x1", &c);
    loom_graph *g = gpt(1, true);
    expect_error(g, cm, config(2, 1, 3, 1, 6), LOOM_ERR_INVALID,
                 "tp 2 × pp 1 × dp 3 × cp 1 = 6 GPUs, but the cluster has 8");
    loom_parallel p = config(8, 1, 1, 1, 8);
    p.pp = 1, p.dp = 1, p.tp = 8;
    /* 12 heads over tp 8 */
    loom_graph *g3 = build("{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 384, "
                           "\"n_layer\": 2, \"n_head\": 12, \"vocab_size\": 512, "
                           "\"n_positions\": 128}", 1, true);
    expect_error(g3, cm, p, LOOM_ERR_INVALID, "12 attention heads are not divisible by --tp 8");
    loom_graph_destroy(g3);
    expect_error(g, cm, config(1, 8, 1, 1, 8), LOOM_ERR_INVALID,
                 "--pp 8 stages but the model has only 4 layers");
    expect_error(g, cm, config(1, 1, 8, 1, 12), LOOM_ERR_INVALID,
                 "--gbs 12 is not a multiple of --mbs 1 × --dp 8 = 8");
    expect_error(g, cm, config(1, 1, 8, 2, 16), LOOM_ERR_INVALID,
                 "built for a batch of 1 but --mbs is 2");
    p = config(2, 2, 2, 1, 8);
    p.vpp = 4;   /* 4 layers into 2 × 4 chunks */
    expect_error(g, cm, p, LOOM_ERR_INVALID, "4 layers do not split evenly into --pp 2 × --vpp 4");
    p = config(1, 1, 8, 1, 8);
    p.zero = 3;
    p.dist_opt = true;
    expect_error(g, cm, p, LOOM_ERR_INVALID, "pick one");
    p = config(1, 2, 4, 1, 8);
    p.zero = 2;
    expect_error(g, cm, p, LOOM_ERR_INVALID, "--zero 2 cannot be combined with pipeline");
    p = config(1, 1, 8, 1, 8);
    p.ep = 2;
    expect_error(g, cm, p, LOOM_ERR_INVALID, "expert parallelism needs a mixture-of-experts model");
    p = config(1, 1, 8, 1, 8);
    p.dtype = LOOM_DTYPE_FP8;
    expect_error(g, cm, p, LOOM_ERR_INVALID, "built for bf16 but --dtype is fp8");
    loom_graph_destroy(g);
    loom_cost_model_destroy(cm);
}

/* The same step and memory, stage by stage. */
static void check_same(const loom_eval_result *a, const loom_eval_result *b)
{
    CHECK_NEAR_REL(a->step_time_s, b->step_time_s, 1e-12);
    CHECK_INT_EQ(a->memory_per_gpu_bytes, b->memory_per_gpu_bytes);
    CHECK_INT_EQ(a->n_stages, b->n_stages);
    for (int64_t i = 0; i < a->n_stages && i < b->n_stages; i++) {
        CHECK_INT_EQ(a->stages[i].first_layer, b->stages[i].first_layer);
        CHECK_INT_EQ(a->stages[i].n_layers, b->stages[i].n_layers);
        CHECK_INT_EQ(a->stages[i].mem.total_bytes, b->stages[i].mem.total_bytes);
    }
}

static void test_layout(void)
{
    loom_cluster c;
    loom_cost_model *cm = model_on("dgx-h100-x1", &c);
    loom_graph *g = gpt(1, true);
    loom_error e;
    loom_eval_result r, r2;

    /* [2, 2] on pp 2 is the even split */
    loom_parallel p = config(2, 2, 2, 1, 16);
    loom_eval_opts o = {.chunk_layers = (int32_t[]){2, 2}, .n_chunks = 2};
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    CHECK_INT_EQ(loom_eval_megatron_ex(g, cm, &p, &o, &r2, &e), LOOM_OK);
    check_same(&r, &r2);
    loom_eval_result_free(&r);
    loom_eval_result_free(&r2);

    /* [1, 3] is --first-stage-layers 1; [3, 1] --last-stage-layers 1 */
    p.first_stage_layers = 1;
    o.chunk_layers = (int32_t[]){1, 3};
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    CHECK_INT_EQ(loom_eval_megatron_ex(g, cm, &p, &o, &r2, &e), LOOM_OK);
    check_same(&r, &r2);
    CHECK_INT_EQ(r2.stages[0].n_layers, 2);   /* the embedding and one block */
    loom_eval_result_free(&r);
    loom_eval_result_free(&r2);
    p.first_stage_layers = 0, p.last_stage_layers = 1;
    o.chunk_layers = (int32_t[]){3, 1};
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    CHECK_INT_EQ(loom_eval_megatron_ex(g, cm, &p, &o, &r2, &e), LOOM_OK);
    check_same(&r, &r2);
    loom_eval_result_free(&r);
    loom_eval_result_free(&r2);

    /* interleaved, pp 2 × vpp 2: chunks 0 and 2 on rank 0, 1 and 3 on rank 1 */
    p.last_stage_layers = 0, p.vpp = 2;
    o.chunk_layers = (int32_t[]){1, 1, 1, 1}, o.n_chunks = 4;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    CHECK_INT_EQ(loom_eval_megatron_ex(g, cm, &p, &o, &r2, &e), LOOM_OK);
    check_same(&r, &r2);
    loom_eval_result_free(&r);
    loom_eval_result_free(&r2);

    /* a split neither option expresses: [0, 3, 0, 1] puts blocks 0-2 on
     * rank 1 and block 3 on rank 1 too; rank 0 keeps only the embedding */
    o.chunk_layers = (int32_t[]){0, 3, 0, 1};
    CHECK_INT_EQ(loom_eval_megatron_ex(g, cm, &p, &o, &r, &e), LOOM_OK);
    CHECK_INT_EQ(r.stages[0].n_layers, 1);
    CHECK_INT_EQ(r.stages[1].n_layers, L + 1);
    CHECK(r.stages[1].fwd_s > r.stages[0].fwd_s);
    CHECK_NEAR_REL(breakdown_sum(&r), r.step_time_s, 1e-12);
    loom_eval_result_free(&r);

    /* and bad layouts are refused */
    o.chunk_layers = (int32_t[]){1, 1, 1}, o.n_chunks = 3;
    CHECK_INT_EQ(loom_eval_megatron_ex(g, cm, &p, &o, &r, &e), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "has 3 chunks, expected --pp 2 x --vpp 2 = 4");
    loom_eval_result_free(&r);
    o.chunk_layers = (int32_t[]){1, 1, 1, 2}, o.n_chunks = 4;
    CHECK_INT_EQ(loom_eval_megatron_ex(g, cm, &p, &o, &r, &e), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "holds 5 layers, the model has 4");
    loom_eval_result_free(&r);
    o.chunk_layers = (int32_t[]){2, -1, 2, 1};
    CHECK_INT_EQ(loom_eval_megatron_ex(g, cm, &p, &o, &r, &e), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "chunk 1 holds -1 layers");
    loom_eval_result_free(&r);
    loom_graph_destroy(g);
    loom_cost_model_destroy(cm);
}

/* GPT-3 175B (Brown et al. 2020) on dgx-h100-x16, tp8 pp8 dp2 vpp4, SP,
 * distributed optimizer: the fp8/bf16 step-time ratio and its breakdown. */
static void test_fp8_175b(void)
{
    const char *cfg = "{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 12288, "
                      "\"n_layer\": 96, \"n_head\": 96, \"vocab_size\": 50257, "
                      "\"n_positions\": 2048}";
    loom_cluster c;
    loom_cost_model *cm = model_on("dgx-h100-x16", &c);
    loom_eval_result r[2];
    loom_dtype dts[2] = {LOOM_DTYPE_BF16, LOOM_DTYPE_FP8};
    for (int i = 0; i < 2; i++) {
        cJSON *j = cJSON_Parse(cfg);
        loom_model_opts o;
        loom_model_opts_init(&o);
        o.seq = 2048;
        o.dtype = dts[i];
        loom_graph *g = NULL;
        loom_error e;
        CHECK(loom_model_build_hf("gpt3", j, "gpt3", &o, &g, &e) == LOOM_OK);
        cJSON_Delete(j);
        loom_parallel p = config(8, 8, 2, 1, 256);
        p.seq = 2048, p.vpp = 4, p.sp = true, p.dist_opt = true, p.dtype = dts[i];
        CHECK(loom_eval_megatron(g, cm, &p, &r[i], &e) == LOOM_OK);
        loom_graph_destroy(g);
    }
    double ratio = r[0].step_time_s / r[1].step_time_s;
    printf("fp8 175B H100: bf16 %.3f s (compute %.3f, tp %.3f, p2p %.3f), fp8 %.3f s (compute "
           "%.3f, tp %.3f, p2p %.3f): %.2fx\n", r[0].step_time_s, r[0].breakdown.compute_s,
           r[0].breakdown.tp_comm_s, r[0].breakdown.p2p_s, r[1].step_time_s,
           r[1].breakdown.compute_s, r[1].breakdown.tp_comm_s, r[1].breakdown.p2p_s, ratio);
    CHECK(ratio > 1.3 && ratio < 1.6);
    /* communication is bf16 in both; compute falls by less than half */
    CHECK_NEAR_REL(r[1].breakdown.tp_comm_s, r[0].breakdown.tp_comm_s, 1e-9);
    CHECK_NEAR_REL(r[1].breakdown.p2p_s, r[0].breakdown.p2p_s, 1e-9);
    CHECK(r[1].breakdown.compute_s > 0.5 * r[0].breakdown.compute_s);
    /* the same bf16 weights and gradients; the activations keep the GEMM
     * inputs' fp8 copies (te_fp8.h): less memory, by a few percent here */
    CHECK(r[1].memory_per_gpu_bytes < r[0].memory_per_gpu_bytes);
    CHECK(r[1].memory_per_gpu_bytes > 0.9 * (double)r[0].memory_per_gpu_bytes);
    for (int i = 0; i < 2; i++) loom_eval_result_free(&r[i]);
    loom_cost_model_destroy(cm);
}

/* ZeRO-3 under DeepSpeed, GPT-3 175B, tp8 on H100 nodes (one DP rank per
 * node), full recompute, a fixed global batch of 128 with mbs = 128/dp:
 * compute halves as dp doubles but every rank still gathers the whole
 * model three times and reduce-scatters it once per step, one call per
 * block, with a ring latency growing with dp; past the point where that
 * dominates the step stops falling. */
static void test_zero3_scaling(void)
{
    const char *cfg = "{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 12288, "
                      "\"n_layer\": 96, \"n_head\": 96, \"vocab_size\": 50257, "
                      "\"n_positions\": 2048}";
    double step[4], compute[4];
    for (int i = 0; i < 4; i++) {
        int64_t dp = (int64_t)16 << i;
        loom_cluster c;
        loom_cost_model *cm = NULL;
        loom_error e;
        CHECK(loom_cluster_preset("dgx-h100-x16", &c, &e) == LOOM_OK);
        c.nodes = dp;
        CHECK(loom_cost_model_create(&c, NULL, NULL, &cm, &e) == LOOM_OK);
        cJSON *j = cJSON_Parse(cfg);
        loom_model_opts o;
        loom_model_opts_init(&o);
        o.seq = 2048, o.batch = 128 / dp;
        loom_graph *g = NULL;
        CHECK(loom_model_build_hf("gpt3", j, "gpt3", &o, &g, &e) == LOOM_OK);
        cJSON_Delete(j);
        loom_parallel p = config(8, 1, dp, 128 / dp, 128);
        p.seq = 2048, p.zero = 3, p.recompute = LOOM_RECOMPUTE_FULL;
        p.framework = LOOM_FRAMEWORK_DEEPSPEED;
        loom_eval_result r;
        loom_eval_opts eo = {.time_only = true};
        CHECK(loom_eval_megatron_ex(g, cm, &p, &eo, &r, &e) == LOOM_OK);
        step[i] = r.step_time_s, compute[i] = r.breakdown.compute_s;
        printf("zero-3 175B dp %lld: step %.3f s, compute %.3f s, sync %.3f s\n", (long long)dp,
               r.step_time_s, r.breakdown.compute_s, r.breakdown.grad_sync_s);
        loom_eval_result_free(&r);
        loom_graph_destroy(g);
        loom_cost_model_destroy(cm);
    }
    CHECK(compute[3] < 0.55 * compute[2]);
    CHECK(step[1] < 0.8 * step[0]);    /* still compute-bound at 16 -> 32 */
    CHECK(step[3] >= 0.95 * step[2]);  /* communication-bound at 64 -> 128 */
}

/* NVLink-domain tiles (costs/cluster.h). On gb200-nvl72-x1 a configuration
 * of 64 GPUs runs on the first 64 of the rack's 72: it must cost exactly
 * what it costs on a cluster of one 64-GPU node with the same GPU and links
 * (built here by hand), run on 64 GPUs and leave 8 idle; 72 GPUs are the
 * whole rack; other counts are refused, naming both. On two racks a TP
 * group of 16 over all 144 GPUs straddles the racks (GPUs 64-79) and pays
 * the NIC, so its TP communication per micro-batch exceeds that of the
 * same TP 16 on the tiles. */
static void test_tiles(void)
{
    loom_graph *g = build("{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 512, "
                          "\"n_layer\": 4, \"n_head\": 16, \"vocab_size\": 1024, "
                          "\"n_positions\": 128}", 1, true);
    loom_cluster rack, by_hand;
    loom_cost_model *cm = model_on("gb200-nvl72-x1", &rack), *ref = NULL;
    loom_error e = {0};
    by_hand = rack;
    by_hand.gpus_per_node = 64;
    CHECK_INT_EQ(loom_cost_model_create(&by_hand, NULL, NULL, &ref, &e), LOOM_OK);
    const int64_t shapes[][3] = {{16, 4, 1}, {16, 2, 2}, {8, 4, 2}, {16, 1, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        loom_parallel p = config(shapes[i][0], shapes[i][1], shapes[i][2], 1, 64);
        p.sp = true;
        loom_eval_result a, b;
        CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &a, &e), LOOM_OK);
        CHECK_INT_EQ(loom_eval_megatron(g, ref, &p, &b, &e), LOOM_OK);
        check_same(&a, &b);
        CHECK_NEAR_REL(a.breakdown.tp_comm_s, b.breakdown.tp_comm_s, 1e-12);
        CHECK_INT_EQ(a.gpus, 64);
        CHECK_INT_EQ(a.idle_gpus, 8);
        CHECK_INT_EQ(b.idle_gpus, 0);
        loom_eval_result_free(&a);
        loom_eval_result_free(&b);
    }
    loom_parallel whole = config(8, 1, 9, 1, 72);
    loom_eval_result r;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &whole, &r, &e), LOOM_OK);
    CHECK_INT_EQ(r.gpus, 72);
    CHECK_INT_EQ(r.idle_gpus, 0);
    loom_eval_result_free(&r);
    expect_error(g, cm, config(16, 2, 1, 1, 64), LOOM_ERR_INVALID,
                 "= 32 GPUs, but the cluster has 72, or 64 on the 64-GPU tile of each 72-GPU "
                 "NVLink domain");
    loom_cost_model_destroy(cm);
    loom_cost_model_destroy(ref);

    /* messages large enough for bandwidth to rule (128 MiB per all-reduce:
     * 1 × 8192 tokens × 8192 × 2 bytes) */
    cJSON *big = cJSON_Parse("{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 8192, "
                             "\"n_layer\": 2, \"n_head\": 64, \"vocab_size\": 1024, "
                             "\"n_positions\": 8192}");
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = 8192;
    loom_graph_destroy(g);
    g = NULL;
    CHECK_INT_EQ(loom_model_build_hf("big", big, "big-gpt", &o, &g, &e), LOOM_OK);
    cJSON_Delete(big);
    cm = model_on("gb200-nvl72-x2", &rack);
    loom_parallel across = config(16, 1, 9, 1, 72), tiled = config(16, 1, 8, 1, 72);
    across.sp = tiled.sp = false;
    across.seq = tiled.seq = 8192;
    loom_eval_result x, t;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &across, &x, &e), LOOM_OK);
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &tiled, &t, &e), LOOM_OK);
    CHECK_INT_EQ(x.gpus, 144);
    CHECK_INT_EQ(t.gpus, 128);
    CHECK(x.stages[0].comm_s > 1.5 * t.stages[0].comm_s);
    loom_eval_result_free(&x);
    loom_eval_result_free(&t);
    loom_cost_model_destroy(cm);
    loom_graph_destroy(g);
}

/* torchtitan's op-level selective checkpointing reruns every second weight
 * GEMM of a block in the backward (wk, wo and up of q k v o gate up down).
 * For a Llama block of hidden h = 256, 8 heads (head dim 32) over 2 kv
 * heads, ffn f = 512, seq 128, micro-batch 2, the rerun forward FLOPs per
 * block and micro-batch are
 *     2·b·s·(h·kvh·dh + heads·dh·h + h·f) = 2·256·(256·64 + 256·256 + 256·512)
 *                                         = 109,051,904,
 * × 4 blocks × 16 micro-batches per step (gbs 32 over dp 8): the hardware
 * FLOPs exceed the model FLOPs by that; under Megatron's selective
 * recompute by the fused attention's forward alone. */
static void test_torchtitan_op_sac(void)
{
    loom_graph *g = build("{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 256, "
                          "\"intermediate_size\": 512, \"num_hidden_layers\": 4, "
                          "\"num_attention_heads\": 8, \"num_key_value_heads\": 2, "
                          "\"vocab_size\": 1024, \"max_position_embeddings\": 128}", 2, true);
    loom_cluster c;
    loom_cost_model *cm = model_on("dgx-h100-x1", &c);
    loom_error e;
    double extra[2];
    for (int i = 0; i < 2; i++) {
        loom_parallel p = config(1, 1, 8, 2, 32);
        p.recompute = LOOM_RECOMPUTE_SELECTIVE;
        p.framework = i ? LOOM_FRAMEWORK_TORCHTITAN : LOOM_FRAMEWORK_MEGATRON;
        loom_eval_result r;
        loom_eval_opts eo = {.time_only = true};
        CHECK(loom_eval_megatron_ex(g, cm, &p, &eo, &r, &e) == LOOM_OK);
        extra[i] = r.hardware_flops - r.model_flops;
        loom_eval_result_free(&r);
    }
    double hand = 2.0 * 2 * 128 * (256 * 64 + 256 * 256 + 256 * 512) * 4 * 16;
    printf("op-level SAC: rerun %.6g FLOPs per step (hand %.6g), Megatron selective %.3g\n",
           extra[1], hand, extra[0]);
    CHECK_NEAR_REL(extra[1], hand, 1e-12);
    /* Megatron's selective recompute (core_attn) reruns the fused attention's
     * forward: 4·b·s²·heads·dh FLOPs (scores and context, counted in full)
     * per layer, 4 layers, 16 micro-batch passes as above */
    CHECK_NEAR_REL(extra[0], 4.0 * 2 * 128 * 128 * 8 * 32 * 4 * 16, 1e-12);
    loom_cost_model_destroy(cm);
    loom_graph_destroy(g);
}

/* ZeRO-3 prefetch: with compute longer than the sync, what a step exposes
 * of it is its unhidden part, one block's gather and one block's
 * reduce-scatter per micro-batch (dp_sync.h), not the fitted
 * grad_sync_overlap's (1 - 0.63) of the whole sync. tp 1, dp 8 on one
 * node, torchtitan (fp32 reduce, two gathers), 4 blocks, 2 micro-batches:
 * unhidden = 2 · (AG(2n/4) + RS(4n/4)) over NVLink for the stage's n
 * dense parameters; bandwidth alone would make it 2 / (2·2·4 + 2·4) = 1/12
 * of the sync, the per-call ring latency makes it more. */
static void test_zero3_prefetch(void)
{
    loom_graph *g = gpt(1, true);
    loom_cluster c;
    loom_cost_model *cm = model_on("dgx-h100-x1", &c);
    loom_error e;
    loom_parallel p = config(1, 1, 8, 1, 16);
    p.zero = 3, p.framework = LOOM_FRAMEWORK_TORCHTITAN;
    loom_eval_result r;
    loom_eval_opts eo = {.time_only = true};
    CHECK(loom_eval_megatron_ex(g, cm, &p, &eo, &r, &e) == LOOM_OK);
    bool *all = malloc((size_t)loom_graph_layer_count(g));
    for (int32_t l = 0; l < loom_graph_layer_count(g); l++) all[l] = true;
    int64_t dense, expert;
    loom_memory_stage_params(g, &p, all, &dense, &expert);
    free(all);
    loom_calib cal;
    loom_calib_default(&c.gpu, &cal);
    loom_link nv = c.intra;
    nv.bandwidth_Bps *= cal.intra_link_eff;
    double n = (double)dense;
    double hand = 2 * (loom_collective_time_s(LOOM_COLL_ALL_GATHER, 8, 2 * n / 4, nv) +
                       loom_collective_time_s(LOOM_COLL_REDUCE_SCATTER, 8, 4 * n / 4, nv));
    double sync = r.stages[0].grad_sync_s;
    printf("zero-3 prefetch: sync %.4g ms, exposed %.4g ms (hand %.4g ms), fitted overlap would "
           "expose %.4g ms\n", 1e3 * sync, 1e3 * r.breakdown.grad_sync_s, 1e3 * hand,
           1e3 * (1 - cal.grad_sync_overlap) * sync);
    CHECK(r.breakdown.compute_s > sync);   /* the window holds the rest */
    CHECK_NEAR_REL(r.breakdown.grad_sync_s, hand, 1e-9);
    CHECK(hand > sync / 12 && hand < (1 - cal.grad_sync_overlap) * sync);
    loom_eval_result_free(&r);
    loom_cost_model_destroy(cm);
    loom_graph_destroy(g);
}

/* HSDP end to end (--fsdp-shard): the tiny GPT, dp 64 on eight 8-GPU H100
 * nodes, ZeRO-3 under torchtitan, shard groups of 8. Each GPU holds 1/8 of
 * the n parameters' bf16 weights, fp32 gradients and fp32 master + Adam
 * state (2n/8, 4n/8, 12n/8 bytes), not 1/64; the sync is, per block (4)
 * and micro-batch (1), a reduce-scatter of 4n/4 and two gathers of 2n/4
 * over the node's NVLink ring plus, once per step, the replica group's
 * all-reduce of the shard's gradients, (4n/4)/8 per block, over 8 ranks one
 * per node. A shard that does not divide dp, or one without a sharded
 * optimizer, is refused. */
static void test_hsdp(void)
{
    loom_graph *g = gpt(1, true);
    loom_cluster c;
    loom_cost_model *cm = model_on("dgx-h100-x8", &c);
    loom_error e;
    loom_parallel p = config(1, 1, 64, 1, 64);
    p.zero = 3, p.framework = LOOM_FRAMEWORK_TORCHTITAN, p.fsdp_shard = 8;
    loom_eval_result r;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    bool *all = malloc((size_t)loom_graph_layer_count(g));
    for (int32_t l = 0; l < loom_graph_layer_count(g); l++) all[l] = true;
    int64_t n, expert;
    loom_memory_stage_params(g, &p, all, &n, &expert);
    free(all);
    const loom_memory_breakdown *m = &r.stages[0].mem;
    CHECK_INT_EQ(m->params_bytes, (2 * n + 7) / 8);
    CHECK_INT_EQ(m->grads_bytes, (4 * n + 7) / 8);
    CHECK_INT_EQ(m->optimizer_bytes, (12 * n + 7) / 8);
    loom_calib cal;
    loom_calib_default(&c.gpu, &cal);
    loom_link nv = c.intra, nic = c.inter;
    nv.bandwidth_Bps *= cal.intra_link_eff, nic.bandwidth_Bps *= cal.inter_link_eff;
    double dn = (double)n;
    double hand = 4 * (loom_collective_time_s(LOOM_COLL_REDUCE_SCATTER, 8, 4 * dn / 4, nv) +
                       2 * loom_collective_time_s(LOOM_COLL_ALL_GATHER, 8, 2 * dn / 4, nv) +
                       2 * 7.0 / 8 * (4 * dn / 4 / 8) / nic.bandwidth_Bps + 6 * nic.latency_s);
    printf("hsdp tiny GPT dp 64 shard 8: model state %.3f MB/GPU, sync %.4g ms (hand %.4g ms)\n",
           (double)(m->params_bytes + m->grads_bytes + m->optimizer_bytes) / 1e6,
           1e3 * r.stages[0].grad_sync_s, 1e3 * hand);
    CHECK_NEAR_REL(r.stages[0].grad_sync_s, hand, 1e-9);
    loom_eval_result_free(&r);
    p.fsdp_shard = 64;   /* all of dp: full sharding, the default's numbers */
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r, &e), LOOM_OK);
    loom_eval_result r0;
    p.fsdp_shard = 0;
    CHECK_INT_EQ(loom_eval_megatron(g, cm, &p, &r0, &e), LOOM_OK);
    CHECK(r.step_time_s == r0.step_time_s && r.memory_per_gpu_bytes == r0.memory_per_gpu_bytes);
    CHECK_INT_EQ(r0.stages[0].mem.params_bytes, (2 * n + 63) / 64);
    loom_eval_result_free(&r);
    loom_eval_result_free(&r0);
    p.fsdp_shard = 3;
    expect_error(g, cm, p, LOOM_ERR_INVALID, "--fsdp-shard 3 must divide --dp 64");
    p.fsdp_shard = 8, p.zero = 0;
    expect_error(g, cm, p, LOOM_ERR_INVALID, "--zero is 0");
    loom_cost_model_destroy(cm);
    loom_graph_destroy(g);
}

int main(void)
{
    test_hsdp();
    test_torchtitan_op_sac();
    test_zero3_prefetch();
    test_tiles();
    test_fp8_175b();
    test_zero3_scaling();
    test_one_gpu();
    test_parallel();
    test_fits_boundary();
    test_impossible();
    test_layout();
    return check_done();
}
