/*
 * test_strategy.c — sharding specs, resharding costs and per-op strategies
 * (solver/spec.h, solver/strategy.h). Expected values are derived by hand
 * from the definitions: strategy counts by enumerating letter assignments on
 * paper, collective times from costs/collective.h's group formula with the
 * buffer sizes the model prescribes, compute from loom_cost_op_time of the
 * shard.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/cluster.h"
#include "costs/compute.h"
#include "costs/moe.h"
#include "solver/spec.h"
#include "solver/strategy.h"
#include "tests/check.h"
#include "tests/solver_graphs.h"

static loom_cluster cl8, cl4x2;   /* one 8-GPU node; two nodes of 4 GPUs */
static loom_cost_model *cm8, *cm4x2;

static void setup(void)
{
    loom_error e;
    CHECK(loom_cluster_load("dgx-h100-x1", &cl8, &e) == LOOM_OK);
    CHECK(loom_cluster_load("dgx-h100-x2", &cl4x2, &e) == LOOM_OK);
    cl4x2.gpus_per_node = 4;
    CHECK(loom_cost_model_create(&cl8, NULL, NULL, &cm8, &e) == LOOM_OK);
    CHECK(loom_cost_model_create(&cl4x2, NULL, NULL, &cm4x2, &e) == LOOM_OK);
}

static double coll(const loom_cost_model *cm, loom_collective k, loom_group g, double bytes)
{
    return loom_group_collective_time_s(loom_cost_model_cluster(cm), loom_cost_model_calib(cm), k,
                                        g, bytes);
}

static const loom_strategy *find_strategy(const loom_strategy *s, int32_t n, const char *name)
{
    for (int32_t i = 0; i < n; i++)
        if (!strcmp(s[i].name, name)) return &s[i];
    return NULL;
}

static void test_specs_and_groups(void)
{
    loom_mesh_ctx m;
    loom_mesh_ctx_init(&m, &cl4x2, NULL, (loom_mesh_shape){2, 4});
    /* axis 1 inside a node; axis 0 across the two nodes; the mesh: 4 per node */
    CHECK_INT_EQ(m.group[2].ranks, 4);
    CHECK_INT_EQ(m.group[2].ranks_per_node, 4);
    CHECK_INT_EQ(m.group[1].ranks, 2);
    CHECK_INT_EQ(m.group[1].ranks_per_node, 1);
    CHECK_INT_EQ(m.group[3].ranks, 8);
    CHECK_INT_EQ(m.group[3].ranks_per_node, 4);
    CHECK_INT_EQ(loom_mesh_parts(&m, LOOM_AXES_BOTH), 8);

    loom_tensor t = {.name = "x", .dtype = LOOM_DTYPE_BF16, .ndim = 3,
                     .dims = {{"b", 8}, {"s", 1024}, {"h", 4096}}};
    loom_spec s = {{LOOM_AXIS0, 0, LOOM_AXIS1}};
    char buf[64];
    loom_spec_format(&s, &t, buf, sizeof buf);
    CHECK(strcmp(buf, "b@0 s h@1") == 0);
    loom_spec both = {{0, LOOM_AXES_BOTH, 0}};
    loom_spec_format(&both, &t, buf, sizeof buf);
    CHECK(strcmp(buf, "b s@01 h") == 0);
    CHECK(loom_spec_valid(&s, &t, &m));
    CHECK(loom_spec_valid(&both, &t, &m));
    CHECK_INT_EQ(loom_spec_shards(&s, 3, &m), 8);
    CHECK_NEAR_REL(loom_spec_bytes(&s, &t, &m), 8.0 * 1024 * 4096 * 2 / 8, 1e-15);
    loom_spec twice = {{LOOM_AXIS1, 0, LOOM_AXIS1}};   /* axis 1 on two dims */
    CHECK(!loom_spec_valid(&twice, &t, &m));
    t.dims[0].size = 3;   /* 3 does not split 2 ways */
    CHECK(!loom_spec_valid(&s, &t, &m));
    t.dims[0].size = 8;

    loom_strategy_ctx c;
    loom_strategy_ctx_init(&c, NULL, cm4x2, (loom_mesh_shape){2, 4}, true, false);
    loom_spec specs[64];
    /* (3 dims + none)² layouts, all divide: 16; on (1, 8) only axis 1: 4 */
    CHECK_INT_EQ(loom_strategy_tensor_specs(&c, &t, specs, 64), 16);
    loom_strategy_ctx c18;
    loom_strategy_ctx_init(&c18, NULL, cm8, (loom_mesh_shape){1, 8}, true, false);
    CHECK_INT_EQ(loom_strategy_tensor_specs(&c18, &t, specs, 64), 4);
    /* Megatron: axis 0 is data parallel, so b splits there (always: a
     * replicated batch would be redundant work, not DP); axis 1 only s
     * (sequence parallel) or nothing here: b@0 and b@0 s@1 */
    c.megatron_only = true;
    CHECK_INT_EQ(loom_strategy_tensor_specs(&c, &t, specs, 64), 2);
    for (int i = 0; i < 2; i++) CHECK(specs[i].ax[0] == LOOM_AXIS0);
}

static void test_reshard(void)
{
    loom_mesh_ctx m;
    loom_mesh_ctx_init(&m, &cl4x2, loom_cost_model_calib(cm4x2), (loom_mesh_shape){2, 4});
    loom_tensor t = {.name = "x", .dtype = LOOM_DTYPE_BF16, .ndim = 3,
                     .dims = {{"b", 8}, {"s", 1024}, {"h", 4096}}};
    double full = 8.0 * 1024 * 4096 * 2;
    loom_spec repl = {{0}}, h1 = {{0, 0, LOOM_AXIS1}}, s1 = {{0, LOOM_AXIS1, 0}},
              b0h1 = {{LOOM_AXIS0, 0, LOOM_AXIS1}}, b0 = {{LOOM_AXIS0, 0, 0}};
    loom_group g0 = m.group[1], g1 = m.group[2];

    /* split -> replicated: all-gather of the whole tensor over axis 1 */
    loom_comm r = loom_reshard_fwd(&m, &t, &h1, &repl);
    CHECK_NEAR_REL(r.time_s, coll(cm4x2, LOOM_COLL_ALL_GATHER, g1, full), 1e-12);
    CHECK_NEAR_REL(r.bytes, full, 1e-15);
    /* replicated -> split: a local slice */
    r = loom_reshard_fwd(&m, &t, &repl, &s1);
    CHECK(r.time_s == 0 && r.bytes == 0);
    /* same spec: nothing */
    r = loom_reshard_fwd(&m, &t, &b0h1, &b0h1);
    CHECK(r.time_s == 0);
    /* b@0 h@1 -> b@0: gather over axis 1 of the half each axis-0 row holds */
    r = loom_reshard_fwd(&m, &t, &b0h1, &b0);
    CHECK_NEAR_REL(r.time_s, coll(cm4x2, LOOM_COLL_ALL_GATHER, g1, full / 2), 1e-12);
    /* h@1 -> s@1: all-to-all of each rank's quarter */
    r = loom_reshard_fwd(&m, &t, &h1, &s1);
    CHECK_NEAR_REL(r.time_s, coll(cm4x2, LOOM_COLL_ALL_TO_ALL, g1, full / 4), 1e-12);
    /* b@0 h@1 -> replicated: two gathers, the cheaper order */
    double o1 = coll(cm4x2, LOOM_COLL_ALL_GATHER, g0, full / 4) + coll(cm4x2, LOOM_COLL_ALL_GATHER, g1, full);
    double o2 = coll(cm4x2, LOOM_COLL_ALL_GATHER, g1, full / 2) + coll(cm4x2, LOOM_COLL_ALL_GATHER, g0, full);
    r = loom_reshard_fwd(&m, &t, &b0h1, &repl);
    CHECK_NEAR_REL(r.time_s, fmin(o1, o2), 1e-12);
    CHECK(o1 != o2);   /* the order matters across nodes */

    /* backward: a partial gradient over axis 1 reduce-scatters into a
     * producer split over axis 1 (sequence parallel) ... */
    r = loom_reshard_bwd(&m, &t, &repl, LOOM_AXIS1, &s1, 0);
    CHECK_NEAR_REL(r.time_s, coll(cm4x2, LOOM_COLL_REDUCE_SCATTER, g1, full), 1e-12);
    /* ... all-reduces for a replicated producer ... */
    r = loom_reshard_bwd(&m, &t, &repl, LOOM_AXIS1, &repl, 0);
    CHECK_NEAR_REL(r.time_s, coll(cm4x2, LOOM_COLL_ALL_REDUCE, g1, full), 1e-12);
    /* ... and waits when the producer side accepts partial sums */
    r = loom_reshard_bwd(&m, &t, &repl, LOOM_AXIS1, &repl, LOOM_AXIS1);
    CHECK(r.time_s == 0);
    /* a split gradient going to a replicated producer is gathered */
    r = loom_reshard_bwd(&m, &t, &s1, 0, &repl, 0);
    CHECK_NEAR_REL(r.time_s, coll(cm4x2, LOOM_COLL_ALL_GATHER, g1, full), 1e-12);
}

/* "ij,jk->ik", all sizes 4, mesh (2, 2): by hand 32 strategies (see below);
 * with j = 2 the nine that split j over both axes go: 23. */
static void test_einsum_counts(void)
{
    for (int jsize = 4; jsize >= 2; jsize -= 2) {
        loom_graph *g;
        loom_error e;
        CHECK(loom_graph_create("ij", &g, &e) == LOOM_OK);
        loom_dim ad[2] = {{"i", 4}, {"j", jsize}}, bd[2] = {{"j", jsize}, {"k", 4}};
        int32_t a = sg_tensor(g, "a", 2, ad, false), b = sg_tensor(g, "b", 2, bd, true), y;
        CHECK(loom_graph_einsum(g, "mm", 0, "ij,jk->ik", 1, &a, 1, &b, 0, &y, &e) == LOOM_OK);
        CHECK(loom_graph_finalize(g, &e) == LOOM_OK);
        loom_strategy_ctx c;
        loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){2, 2}, true, false);
        loom_strategy *s;
        int32_t n;
        CHECK(loom_strategy_enumerate(&c, 0, -1, &s, &n, &e) == LOOM_OK);
        /* none: 1; i/k on one or two axes without j: 8; j on one axis alone:
         * 3 reductions each (AR, RS onto i, RS onto k) = 6; j on both: 3 × 3;
         * j with i or k on the other axis: 2 reductions × 4 = 8 */
        CHECK_INT_EQ(n, jsize == 4 ? 32 : 23);
        const loom_strategy *r = find_strategy(s, n, "j@0 AR@0");
        CHECK(r != NULL);
        if (r) {
            /* all-reduce of the whole output over axis 0; d(a) is complete */
            CHECK_INT_EQ(r->n_fwd, 1);
            CHECK_INT_EQ(r->fwd[0].kind, LOOM_COLL_ALL_REDUCE);
            CHECK_NEAR_REL(r->fwd[0].bytes, 4.0 * 4 * 2, 1e-15);
            CHECK_INT_EQ(r->in_partial[0], 0);
            CHECK_INT_EQ(r->n_bwd, 0);
        }
        r = find_strategy(s, n, "j@1 RS@1>i");
        CHECK(r != NULL);
        if (r) {   /* reduce-scatter forward, its all-gather backward */
            CHECK_INT_EQ(r->fwd[0].kind, LOOM_COLL_REDUCE_SCATTER);
            CHECK_INT_EQ(r->bwd[0].kind, LOOM_COLL_ALL_GATHER);
            CHECK_INT_EQ(r->out[0].ax[0], LOOM_AXIS1);
        }
        free(s);
        loom_graph_destroy(g);
    }
}

static void test_einsum_costs(void)
{
    loom_graph *g = sg_mlp_build(8, 512, 1024, 4096);
    CHECK(g != NULL);
    if (!g) return;
    int32_t fc1 = sg_find(g, "fc1"), fc2 = sg_find(g, "fc2");
    loom_error e;
    loom_strategy_ctx c;
    loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){1, 8}, true, false);
    loom_strategy *s;
    int32_t n;
    /* bsh,hf->bsf on (1, 8): none, b, s, f (4) + h with AR or RS onto b, s, f (4) */
    CHECK(loom_strategy_enumerate(&c, fc1, -1, &s, &n, &e) == LOOM_OK);
    CHECK_INT_EQ(n, 8);
    const loom_strategy *col = find_strategy(s, n, "f@1");
    CHECK(col != NULL);
    if (col) {
        /* column parallel: no forward comm, d(x) partial over axis 1 */
        CHECK_INT_EQ(col->n_fwd, 0);
        CHECK_INT_EQ(col->in_partial[0], LOOM_AXIS1);
        CHECK_INT_EQ(col->param_count, 1024 * 4096 / 8);
        CHECK(col->grad_sync_s == 0);
        loom_op_time t;
        loom_dim_split sp = {"f", 8};
        CHECK(loom_cost_op_time(cm8, g, fc1, &sp, 1, &t, &e) == LOOM_OK);
        CHECK_NEAR_REL(col->compute_s, t.fwd_s + t.bwd_s, 1e-12);
        /* saves its input x: replicated, 8·512·1024 bf16 */
        CHECK_NEAR_REL(col->act_bytes, 8.0 * 512 * 1024 * 2, 1e-15);
    }
    free(s);

    CHECK(loom_strategy_enumerate(&c, fc2, -1, &s, &n, &e) == LOOM_OK);
    const loom_strategy *row = find_strategy(s, n, "f@1 AR@1");
    CHECK(row != NULL);
    if (row) {
        /* row parallel: all-reduce of the full output over axis 1 */
        loom_mesh_ctx m;
        loom_mesh_ctx_init(&m, &cl8, loom_cost_model_calib(cm8), (loom_mesh_shape){1, 8});
        CHECK_NEAR_REL(row->comm_s, coll(cm8, LOOM_COLL_ALL_REDUCE, m.group[2], 8.0 * 512 * 1024 * 2),
                       1e-12);
        CHECK_INT_EQ(row->in_partial[0], 0);
        CHECK_NEAR_REL(row->act_bytes, 8.0 * 512 * 4096 * 2 / 8, 1e-15);   /* saved input shard */
    }
    free(s);

    /* data parallel on (8, 1): the replicated weight's gradient is
     * all-reduced over axis 0 (once per step) in fp32, as Megatron-LM
     * reduces bf16 training's gradients; under ZeRO-1 reduce-scattered in
     * fp32 with the bf16 weights all-gathered */
    loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){8, 1}, true, false);
    CHECK(loom_strategy_enumerate(&c, fc2, -1, &s, &n, &e) == LOOM_OK);
    const loom_strategy *dp = find_strategy(s, n, "b@0");
    CHECK(dp != NULL);
    if (dp) {
        loom_mesh_ctx m;
        loom_mesh_ctx_init(&m, &cl8, loom_cost_model_calib(cm8), (loom_mesh_shape){8, 1});
        CHECK_NEAR_REL(dp->grad_sync_s, coll(cm8, LOOM_COLL_ALL_REDUCE, m.group[1], 4096.0 * 1024 * 4),
                       1e-12);
        CHECK(dp->comm_s == 0);
        CHECK_INT_EQ(dp->param_count, 4096 * 1024);
        /* ZeRO shards the 8 data-parallel copies */
        CHECK_INT_EQ(dp->param_count_local, 4096 * 1024 / 8);
    }
    free(s);
    c.zero = 1;
    CHECK(loom_strategy_enumerate(&c, fc2, -1, &s, &n, &e) == LOOM_OK);
    dp = find_strategy(s, n, "b@0");
    CHECK(dp != NULL);
    if (dp) {
        loom_mesh_ctx m;
        loom_mesh_ctx_init(&m, &cl8, loom_cost_model_calib(cm8), (loom_mesh_shape){8, 1});
        CHECK_NEAR_REL(dp->grad_sync_s,
                       coll(cm8, LOOM_COLL_REDUCE_SCATTER, m.group[1], 4096.0 * 1024 * 4) +
                           coll(cm8, LOOM_COLL_ALL_GATHER, m.group[1], 4096.0 * 1024 * 2),
                       1e-12);
    }
    free(s);

    /* inference: forward only, no gradient sync, no saved activations */
    loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){8, 1}, false, false);
    CHECK(loom_strategy_enumerate(&c, fc2, -1, &s, &n, &e) == LOOM_OK);
    dp = find_strategy(s, n, "b@0");
    CHECK(dp && dp->grad_sync_s == 0 && dp->act_bytes == 0);
    if (dp) {
        loom_op_time t;
        loom_dim_split sp = {"b", 8};
        CHECK(loom_cost_op_time(cm8, g, fc2, &sp, 1, &t, &e) == LOOM_OK);
        CHECK_NEAR_REL(dp->compute_s, t.fwd_s, 1e-12);
    }
    free(s);

    /* Megatron space on (2, 4): axis 0 only batch; axis 1 only f (or the
     * sequence as a reduce-scatter target: sequence parallelism, which is
     * Megatron's one switch, so a row-parallel op never all-reduces when
     * the sequence can take the reduce-scatter) */
    loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){2, 4}, true, true);
    CHECK(loom_strategy_enumerate(&c, fc2, -1, &s, &n, &e) == LOOM_OK);
    CHECK(n > 0);
    for (int32_t i = 0; i < n; i++) {
        const loom_tensor *w = loom_graph_tensor(g, loom_graph_op(g, fc2)->w[0]);
        for (int d = 0; d < 2; d++) {
            CHECK(!(s[i].w[0].ax[d] & LOOM_AXIS0));   /* weights never split over data parallel */
            if (s[i].w[0].ax[d] & LOOM_AXIS1) CHECK(strcmp(w->dims[d].name, "f") == 0);
        }
    }
    const loom_strategy *meg = find_strategy(s, n, "b@0 f@1 RS@1>s");
    CHECK(meg != NULL);
    if (meg) {   /* a quarter of the weight per GPU, its 2 data-parallel copies sharded */
        CHECK_INT_EQ(meg->param_count, 4096 * 1024 / 4);
        CHECK_INT_EQ(meg->param_count_local, 4096 * 1024 / 8);
        /* ... and synced over axis 0 with the replicas: the data-parallel class */
        CHECK_NEAR_REL(meg->dp_params[LOOM_AXIS0], 4096.0 * 1024 / 4, 1e-15);
        CHECK(meg->dp_params[0] == 0 && meg->other_sync_s == 0);
    }
    CHECK(find_strategy(s, n, "b@0 f@1 AR@1") == NULL);
    CHECK(find_strategy(s, n, "h@1 AR@1") == NULL);
    free(s);
    loom_graph_destroy(g);
}

static void test_attention(void)
{
    sg_llama d = {.b = 1, .s = 256, .h = 1024, .heads = 32, .kvh = 8, .dh = 32, .f = 2048, .layers = 1};
    loom_graph *g = sg_llama_build(&d);
    CHECK(g != NULL);
    if (!g) return;
    int32_t at = sg_find(g, "L1.sdpa");
    loom_error e;
    loom_strategy_ctx c;
    loom_strategy *s;
    int32_t n;
    /* (1, 8), b = 1: none, heads, sequence (context parallel) */
    loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){1, 8}, true, false);
    CHECK(loom_strategy_enumerate(&c, at, -1, &s, &n, &e) == LOOM_OK);
    CHECK_INT_EQ(n, 3);
    const loom_strategy *hs = find_strategy(s, n, "heads@1");
    CHECK(hs != NULL);
    if (hs) {   /* 8 kv heads split 8 ways with the query heads */
        CHECK_INT_EQ(hs->in[1].ax[2], LOOM_AXIS1);
        CHECK_INT_EQ(hs->in_partial[1], 0);
    }
    const loom_strategy *cp = find_strategy(s, n, "s@1 cp");
    CHECK(cp != NULL);
    if (cp) {
        /* ring attention (Megatron's context parallelism, as loom eval
         * prices it): queries, keys and values all split along the
         * sequence, nothing partial; each rank does 1/8 of the work */
        CHECK_INT_EQ(cp->in[0].ax[1], LOOM_AXIS1);
        CHECK_INT_EQ(cp->in[1].ax[1], LOOM_AXIS1);
        CHECK_INT_EQ(cp->in[2].ax[1], LOOM_AXIS1);
        CHECK_INT_EQ(cp->in_partial[1], 0);
        CHECK_INT_EQ(cp->in_partial[2], 0);
        CHECK_INT_EQ(cp->ring_axes, LOOM_AXIS1);
        loom_op_time t;
        CHECK(loom_cost_op_time(cm8, g, at, NULL, 0, &t, &e) == LOOM_OK);
        CHECK_NEAR_REL(cp->compute_s, (t.fwd_s + t.bwd_s) / 8, 1e-12);
        /* K and V shards (b 1, s 256/8, kvh 8, dh 32, bf16) go 7 steps round
         * the ring forward and 14 backward, beside the kernel (fwd, bwd / 8):
         * only the excess is charged */
        double kv = 2.0 * 1 * (256 / 8) * 8 * 32 * 2;
        double step = coll(cm8, LOOM_COLL_SEND_RECV, (loom_group){2, 2}, kv);
        double rf = fmax(0, 7 * step - t.fwd_s / 8), rb = fmax(0, 14 * step - t.bwd_s / 8);
        CHECK(rf + rb > 0);   /* at s 256 the ring outlasts the kernel */
        CHECK_NEAR_REL(cp->comm_s, rf + rb, 1e-9);
        CHECK_NEAR_REL(cp->ring_fwd_s, rf, 1e-9);
    }
    free(s);
    /* (1, 16) over two nodes: 8 kv heads cannot split 16 ways: replicated */
    loom_cluster two;
    CHECK(loom_cluster_load("dgx-h100-x2", &two, &e) == LOOM_OK);
    loom_cost_model *cm16;
    CHECK(loom_cost_model_create(&two, NULL, NULL, &cm16, &e) == LOOM_OK);
    loom_strategy_ctx_init(&c, g, cm16, (loom_mesh_shape){1, 16}, true, false);
    CHECK(loom_strategy_enumerate(&c, at, -1, &s, &n, &e) == LOOM_OK);
    hs = find_strategy(s, n, "heads@1 kv-replicated");
    CHECK(hs != NULL);
    if (hs) {
        CHECK_INT_EQ(hs->in[1].ax[2], 0);
        CHECK_INT_EQ(hs->in_partial[1], LOOM_AXIS1);   /* dK summed over the query groups */
    }
    free(s);
    loom_cost_model_destroy(cm16);
    loom_graph_destroy(g);
}

/* Megatron's context-parallel space and TP communication overlap, by hand
 * on one MLP block (b 2, s 512, h 1024, f 4096) on a (2, 4) mesh. */
static void test_megatron_cp_overlap(void)
{
    loom_graph *g = sg_mlp_build(2, 512, 1024, 4096);
    CHECK(g != NULL);
    if (!g) return;
    int32_t fc2 = sg_find(g, "fc2");
    loom_error e;
    loom_strategy_ctx c;
    loom_strategy *s;
    int32_t n;
    loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){2, 4}, true, true);
    c.megatron_cp = true;
    CHECK(loom_strategy_enumerate(&c, fc2, -1, &s, &n, &e) == LOOM_OK);
    /* axis 0 splits the sequence, never the batch; the row-parallel
     * reduce-scatter lands on the sequence already split over axis 0 */
    for (int32_t i = 0; i < n; i++) CHECK(!(s[i].in[0].ax[0] & LOOM_AXIS0));
    const loom_strategy *cp = find_strategy(s, n, "s@0 f@1 RS@1>s");
    CHECK(cp != NULL);
    CHECK(find_strategy(s, n, "s@0 f@1 AR@1") == NULL);
    loom_strategy plain = {0};
    if (cp) {
        CHECK_INT_EQ(cp->out[0].ax[1], LOOM_AXIS0 | LOOM_AXIS1);   /* y: b s@01 h */
        /* the weight's 2 copies along the context-parallel axis are
         * data-parallel copies: ZeRO shards them, and their gradient is
         * synced with the replicas (Megatron's dp × cp group) */
        CHECK_INT_EQ(cp->param_count, 4096 * 1024 / 4);
        CHECK_INT_EQ(cp->param_count_local, 4096 * 1024 / 8);
        CHECK_NEAR_REL(cp->dp_params[LOOM_AXIS0], 4096.0 * 1024 / 4, 1e-15);
        /* reduce-scatter of y's shard (b 2, s 512/2, h 1024, bf16) over axis 1
         * forward, its all-gather backward */
        CHECK_INT_EQ(cp->n_fwd, 1);
        CHECK_INT_EQ(cp->fwd[0].kind, LOOM_COLL_REDUCE_SCATTER);
        CHECK_NEAR_REL(cp->fwd[0].bytes, 2.0 * 256 * 1024 * 2, 1e-15);
        plain = *cp;
    }
    free(s);
    /* with TP communication overlap the same collectives run beside the
     * GEMMs: forward beside the forward, backward beside half the backward */
    c.tp_overlap = true;
    CHECK(loom_strategy_enumerate(&c, fc2, -1, &s, &n, &e) == LOOM_OK);
    const loom_strategy *ov = find_strategy(s, n, "s@0 f@1 RS@1>s");
    CHECK(ov != NULL);
    if (ov && cp) {
        loom_mesh_ctx m;
        loom_mesh_ctx_init(&m, &cl8, loom_cost_model_calib(cm8), (loom_mesh_shape){2, 4});
        double rs = loom_mesh_coll_s(&m, LOOM_COLL_REDUCE_SCATTER, LOOM_AXIS1, plain.fwd[0].bytes);
        double ag = loom_mesh_coll_s(&m, LOOM_COLL_ALL_GATHER, LOOM_AXIS1, plain.bwd[0].bytes);
        CHECK_NEAR_REL(plain.comm_s, rs + ag, 1e-12);
        double fwd = plain.compute_s - plain.bwd_compute_s, half = plain.bwd_compute_s / 2;
        CHECK_NEAR_REL(ov->comm_s + 1e-30, fmax(0, rs - fwd) + fmax(0, ag - half) + 1e-30, 1e-9);
        CHECK(ov->comm_s < plain.comm_s);
        CHECK_NEAR_REL(ov->compute_s, plain.compute_s, 1e-15);
    }
    free(s);
    loom_graph_destroy(g);

    /* attention in the context-parallel space: the sequence over axis 0
     * (ring), the heads over axis 1; never the batch */
    sg_llama d = {.b = 2, .s = 256, .h = 1024, .heads = 32, .kvh = 8, .dh = 32, .f = 2048, .layers = 1};
    g = sg_llama_build(&d);
    CHECK(g != NULL);
    if (!g) return;
    loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){2, 4}, true, true);
    c.megatron_cp = true;
    CHECK(loom_strategy_enumerate(&c, sg_find(g, "L1.sdpa"), -1, &s, &n, &e) == LOOM_OK);
    CHECK_INT_EQ(n, 1);
    if (n == 1) {
        CHECK(strstr(s[0].name, "s@0") && strstr(s[0].name, "heads@1") && strstr(s[0].name, "cp"));
        CHECK_INT_EQ(s[0].ring_axes, LOOM_AXIS0);
        CHECK_INT_EQ(s[0].in[0].ax[0], 0);
    }
    free(s);
    loom_graph_destroy(g);
}

static void test_followers(void)
{
    loom_graph *g = sg_mlp_build(2, 64, 1024, 4096);
    CHECK(g != NULL);
    if (!g) return;
    int32_t nm = sg_find(g, "norm");
    loom_error e;
    loom_strategy_ctx c;
    loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){1, 8}, true, false);
    loom_mesh_ctx m;
    loom_mesh_ctx_init(&m, &cl8, loom_cost_model_calib(cm8), (loom_mesh_shape){1, 8});
    loom_spec hsplit = {{0, 0, LOOM_AXIS1}};
    loom_strategy s;
    CHECK(loom_strategy_follow(&c, nm, 0, &hsplit, &s, &e) == LOOM_OK);
    /* rmsnorm over a split h: one fp32 sum of squares per row (b·s rows),
     * all-reduced forward and backward; the weight follows h */
    CHECK_INT_EQ(s.n_fwd, 1);
    CHECK_NEAR_REL(s.fwd[0].bytes, 2.0 * 64 * 4, 1e-15);
    CHECK_NEAR_REL(s.comm_s, 2 * coll(cm8, LOOM_COLL_ALL_REDUCE, m.group[2], 2.0 * 64 * 4), 1e-12);
    CHECK_INT_EQ(s.w[0].ax[0], LOOM_AXIS1);
    CHECK_INT_EQ(s.out[0].ax[2], LOOM_AXIS1);
    CHECK(strcmp(s.name, "h@1") == 0);
    /* split along s: no statistics; the weight's gradient is partial */
    loom_spec ssplit = {{0, LOOM_AXIS1, 0}};
    CHECK(loom_strategy_follow(&c, nm, 0, &ssplit, &s, &e) == LOOM_OK);
    CHECK_INT_EQ(s.n_fwd, 0);
    CHECK(s.grad_sync_s > 0);
    /* the residual add follows one input; the other is read in the same layout */
    int32_t add = sg_find(g, "residual");
    CHECK(loom_strategy_follow(&c, add, 1, &ssplit, &s, &e) == LOOM_OK);
    CHECK_INT_EQ(s.in[0].ax[1], LOOM_AXIS1);
    CHECK_INT_EQ(s.in_partial[0], 0);
    loom_graph_destroy(g);

    /* views: [b s heads dh] -> [b s h] keeps a heads split on h; a dh
     * split cannot be expressed and is gathered */
    CHECK(loom_graph_create("view", &g, &e) == LOOM_OK);
    loom_dim a4[4] = {{"b", 2}, {"s", 64}, {"heads", 16}, {"dh", 64}}, a3[3] = {{"b", 2}, {"s", 64}, {"h", 1024}};
    int32_t x = sg_tensor(g, "x", 4, a4, false), y = sg_tensor(g, "y", 3, a3, false);
    loom_op op;
    memset(&op, 0, sizeof op);
    snprintf(op.name, sizeof op.name, "merge_heads");
    op.kind = LOOM_OP_RESHAPE, op.n_in = 1, op.in[0] = x, op.n_out = 1, op.out[0] = y;
    CHECK(loom_graph_add_op(g, &op, NULL, &e) == LOOM_OK);
    CHECK(loom_graph_finalize(g, &e) == LOOM_OK);
    loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){1, 8}, true, false);
    loom_spec heads = {{0, 0, LOOM_AXIS1, 0}}, dh = {{0, 0, 0, LOOM_AXIS1}};
    CHECK(loom_strategy_follow(&c, 0, 0, &heads, &s, &e) == LOOM_OK);
    CHECK_INT_EQ(s.out[0].ax[2], LOOM_AXIS1);
    CHECK(s.compute_s == 0 && s.comm_s == 0);
    CHECK(loom_strategy_follow(&c, 0, 0, &dh, &s, &e) == LOOM_OK);
    CHECK_INT_EQ(s.out[0].ax[2], 0);
    CHECK_STR_CONTAINS(s.name, "gather@1");
    CHECK_INT_EQ(s.fwd[0].kind, LOOM_COLL_ALL_GATHER);
    loom_graph_destroy(g);
}

static void test_moe(void)
{
    loom_graph *g;
    loom_error e;
    CHECK(loom_graph_create("moe", &g, &e) == LOOM_OK);
    loom_dim xd[3] = {{"b", 2}, {"s", 64}, {"h", 256}}, id3[3] = {{"b", 2}, {"s", 64}, {"topk", 2}},
             ed[3] = {{"e", 8}, {"c", 32}, {"h", 256}};
    int32_t x = sg_tensor(g, "x", 3, xd, false), buf = sg_tensor(g, "buf", 3, ed, false), idx;
    CHECK(loom_graph_add_tensor(g, "idx", LOOM_DTYPE_INT32, 3, id3, false, &idx, &e) == LOOM_OK);
    loom_op op;
    memset(&op, 0, sizeof op);
    snprintf(op.name, sizeof op.name, "dispatch");
    op.kind = LOOM_OP_MOE_DISPATCH, op.n_in = 2, op.in[0] = x, op.in[1] = idx, op.n_out = 1;
    op.out[0] = buf, op.topk = 2;
    CHECK(loom_graph_add_op(g, &op, NULL, &e) == LOOM_OK);
    CHECK(loom_graph_finalize(g, &e) == LOOM_OK);
    loom_strategy_ctx c;
    loom_strategy_ctx_init(&c, g, cm8, (loom_mesh_shape){1, 8}, true, false);
    loom_strategy *s;
    int32_t n;
    CHECK(loom_strategy_enumerate(&c, 0, -1, &s, &n, &e) == LOOM_OK);
    /* on (1, 8) with b = 2: none, h, tok (s -> c), ep (s -> e), ep-local */
    CHECK_INT_EQ(n, 5);
    const loom_strategy *ep = find_strategy(s, n, "ep@1");
    CHECK(ep != NULL);
    if (ep) {
        /* expert parallel from sequence-split tokens, Megatron's alltoall
         * dispatcher (costs/moe.h): forward the 8 experts' int64 counts of
         * 8 ranks gathered (512 B), each rank's 16 tokens × 2 slots of
         * 512 B and their fp32 probabilities to all (the busiest receiver's
         * share: × the load factor of 8 ranks routing 128 tokens);
         * backward both all-to-alls again */
        double lf = loom_moe_max_load_factor(8, 2, 8, 128);
        CHECK_INT_EQ(ep->n_fwd, 3);
        CHECK_INT_EQ(ep->fwd[0].kind, LOOM_COLL_ALL_GATHER);
        CHECK_NEAR_REL(ep->fwd[0].bytes, 512, 1e-15);
        CHECK_INT_EQ(ep->fwd[1].kind, LOOM_COLL_ALL_TO_ALL);
        CHECK_NEAR_REL(ep->fwd[1].bytes, 16.0 * 2 * 512 * lf, 1e-15);
        CHECK_NEAR_REL(ep->fwd[2].bytes, 16.0 * 2 * 4 * lf, 1e-15);
        CHECK_INT_EQ(ep->n_bwd, 2);
        CHECK_INT_EQ(ep->bwd[0].kind, LOOM_COLL_ALL_TO_ALL);
        CHECK_NEAR_REL(ep->bwd[0].bytes, 16.0 * 2 * 512 * lf, 1e-15);
        CHECK_INT_EQ(ep->out[0].ax[0], LOOM_AXIS1);
        CHECK_INT_EQ(ep->in[0].ax[1], LOOM_AXIS1);
        CHECK_INT_EQ(ep->in[1].ax[1], LOOM_AXIS1);   /* the indices follow the tokens */
    }
    const loom_strategy *loc = find_strategy(s, n, "ep-local@1");
    CHECK(loc != NULL);
    if (loc) {   /* replicated tokens: local select, gradient summed on the edge */
        CHECK_INT_EQ(loc->n_fwd, 0);
        CHECK_INT_EQ(loc->in_partial[0], LOOM_AXIS1);
        CHECK_INT_EQ(loc->in_partial[1], 0);   /* integer indices carry no gradient */
    }
    free(s);
    loom_graph_destroy(g);
}

int main(void)
{
    setup();
    test_specs_and_groups();
    test_reshard();
    test_einsum_counts();
    test_einsum_costs();
    test_attention();
    test_megatron_cp_overlap();
    test_followers();
    test_moe();
    loom_cost_model_destroy(cm8);
    loom_cost_model_destroy(cm4x2);
    return check_done();
}
