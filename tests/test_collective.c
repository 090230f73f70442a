/*
 * test_collective.c — alpha-beta collective times against hand-computed
 * values (docs/design.md §4 table), intra vs inter node, the hierarchical
 * all-reduce, and the rank groups of logical mesh axes.
 *
 * Hand values use round links so the arithmetic is checkable on paper:
 *   flat link: bw = 100 GB/s, α = 5 us, B = 1 GB, n = 4
 *     all-reduce 2·3/4 · 0.01 s + 2·3 · 5 us = 0.015 + 30e-6 = 0.015030 s
 *     all-gather 3/4 · 0.01 + 3 · 5 us = 0.007515 s (= reduce-scatter = all-to-all)
 *     send/recv  0.01 + 5 us = 0.010005 s
 *   dgx-h100-x2 with link efficiencies 1: intra 450 GB/s, 3 us; inter 50 GB/s, 8 us.
 */
#include <math.h>

#include "costs/collective.h"
#include "costs/dp_sync.h"
#include "costs/parallel.h"
#include "check.h"

static loom_calib unit_calib(const loom_cluster *c)
{
    loom_calib cal;
    loom_calib_default(&c->gpu, &cal);
    cal.intra_link_eff = 1;
    cal.inter_link_eff = 1;
    return cal;
}

static void flat_formulas(void)
{
    loom_link l = {100e9, 5e-6};
    double B = 1e9;
    CHECK_NEAR_REL(loom_collective_time_s(LOOM_COLL_ALL_REDUCE, 4, B, l), 0.015030, 1e-12);
    CHECK_NEAR_REL(loom_collective_time_s(LOOM_COLL_ALL_GATHER, 4, B, l), 0.007515, 1e-12);
    CHECK_NEAR_REL(loom_collective_time_s(LOOM_COLL_REDUCE_SCATTER, 4, B, l), 0.007515, 1e-12);
    CHECK_NEAR_REL(loom_collective_time_s(LOOM_COLL_ALL_TO_ALL, 4, B, l), 0.007515, 1e-12);
    CHECK_NEAR_REL(loom_collective_time_s(LOOM_COLL_SEND_RECV, 2, B, l), 0.010005, 1e-12);
    /* n = 2 all-reduce: 2·1/2 · 0.01 + 2 · 5 us = 0.01001 */
    CHECK_NEAR_REL(loom_collective_time_s(LOOM_COLL_ALL_REDUCE, 2, B, l), 0.010010, 1e-12);
    /* Large n: the bandwidth term tends to 2·B/bw, latency grows linearly:
     * n = 1000: 2·999/1000 · 0.01 + 1998 · 5 us = 0.01998 + 0.00999 */
    CHECK_NEAR_REL(loom_collective_time_s(LOOM_COLL_ALL_REDUCE, 1000, B, l), 0.02997, 1e-12);
    /* Degenerate: one rank or nothing to send costs nothing. */
    CHECK(loom_collective_time_s(LOOM_COLL_ALL_REDUCE, 1, B, l) == 0);
    CHECK(loom_collective_time_s(LOOM_COLL_ALL_GATHER, 8, 0, l) == 0);
    /* A missing link (bandwidth 0) is never chosen: infinite time. */
    loom_link none = {0, 8e-6};
    CHECK(isinf(loom_collective_time_s(LOOM_COLL_ALL_REDUCE, 2, B, none)));
    CHECK(strcmp(loom_collective_name(LOOM_COLL_REDUCE_SCATTER), "reduce-scatter") == 0);
}

static void intra_vs_inter(void)
{
    loom_cluster c;
    loom_error err;
    CHECK_INT_EQ(loom_cluster_load("dgx-h100-x2", &c, &err), LOOM_OK);
    loom_calib cal = unit_calib(&c);
    double B = 1e9;
    /* 8 ranks in one node: 2·7/8 · 1e9/450e9 + 14 · 3 us */
    double intra8 = 1.75e9 / 450e9 + 14 * 3e-6;
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_REDUCE,
                                                (loom_group){8, 8}, B), intra8, 1e-12);
    /* ranks_per_node >= ranks means one node, whatever the excess. */
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_REDUCE,
                                                (loom_group){8, 64}, B), intra8, 1e-12);
    /* 2 ranks on 2 nodes: 2·1/2 · 1e9/50e9 + 2 · 8 us = 0.020016 */
    double inter2 = 0.020016;
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_REDUCE,
                                                (loom_group){2, 1}, B), inter2, 1e-12);
    /* the same pair inside a node: 1e9/450e9 + 2 · 3 us */
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_REDUCE,
                                                (loom_group){2, 2}, B), 1e9 / 450e9 + 6e-6,
                   1e-12);
    /* send/recv: same node over NVLink, across nodes over the NIC. */
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_SEND_RECV,
                                                (loom_group){2, 2}, B), 1e9 / 450e9 + 3e-6, 1e-12);
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_SEND_RECV,
                                                (loom_group){2, 1}, B), 0.020008, 1e-12);

    /* Calibrated efficiency scales the bandwidth only: with the default
     * H100 NVLink efficiency e, 2·7/8 · B/(450e9 · e) + 14 · 3 us. */
    loom_calib def;
    loom_calib_default(&c.gpu, &def);
    CHECK(def.intra_link_eff > 0 && def.intra_link_eff < 1);
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, NULL, LOOM_COLL_ALL_REDUCE,
                                                (loom_group){8, 8}, B),
                   1.75e9 / (450e9 * def.intra_link_eff) + 42e-6, 1e-12);
}

static void hierarchical(void)
{
    loom_cluster c;
    loom_error err;
    CHECK_INT_EQ(loom_cluster_load("dgx-h100-x2", &c, &err), LOOM_OK);
    loom_calib cal = unit_calib(&c);
    double B = 1e9;
    loom_group g16 = {16, 8};   /* 2 nodes × 8 */
    /* all-reduce = RS_intra(8, B) + AR_inter(2, B/8) + AG_intra(8, B):
     *   RS/AG intra: 7/8 · 1e9/450e9 + 7 · 3 us = 0.0019444… + 21e-6
     *   AR inter:    2·1/2 · 1.25e8/50e9 + 2 · 8 us = 0.0025 + 16e-6      */
    double rs_intra = 0.875e9 / 450e9 + 21e-6;
    double ar_inter = 0.0025 + 16e-6;
    double hier = 2 * rs_intra + ar_inter;
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_REDUCE, g16, B), hier,
                   1e-12);
    /* …which beats a flat all-reduce over the NICs, where NCCL's double
     * binary tree (2·log2 16 = 8 latencies) beats the ring (30):
     * 2·15/16 · 0.02 + 8 · 8 us */
    double flat = 2.0 * 15 / 16 * 0.02 + 8 * 8e-6;
    CHECK(hier < flat / 5);
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_REDUCE,
                                                (loom_group){16, 1}, B), flat, 1e-12);
    /* all-gather = AG_inter(2, B/8) + AG_intra(8, B); reduce-scatter mirrors it. */
    double ag_inter = 0.5 * 1.25e8 / 50e9 + 8e-6;
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_GATHER, g16, B),
                   ag_inter + rs_intra, 1e-12);
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_REDUCE_SCATTER, g16, B),
                   ag_inter + rs_intra, 1e-12);
    /* all-to-all: 7 peers over NVLink, 8 over the NIC, concurrently:
     *   max(7/16 · 1e9/450e9 + 7 · 3 us, 8/16 · 1e9/50e9 + 8 · 8 us) = 0.010064 */
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_TO_ALL, g16, B),
                   0.010064, 1e-12);
    /* The same all-to-all written to every peer at once (HybridEP): one
     * latency per link level, max(7/16 · 1e9/450e9 + 3 us, 8/16 · 1e9/50e9
     * + 8 us) = max(0.0009752…, 0.010008) = 0.010008; inside one node of 8,
     * 7/8 · 1e9/450e9 + 3 us = 0.0019474… where NCCL's is 0.0019444… + 21 us;
     * one rank moves nothing. */
    CHECK_NEAR_REL(loom_group_all_to_all_direct_s(&c, &cal, g16, B), 0.010008, 1e-12);
    CHECK_NEAR_REL(loom_group_all_to_all_direct_s(&c, &cal, (loom_group){8, 8}, B),
                   0.875e9 / 450e9 + 3e-6, 1e-12);
    CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_TO_ALL,
                                                (loom_group){8, 8}, B),
                   0.875e9 / 450e9 + 21e-6, 1e-12);
    CHECK(loom_group_all_to_all_direct_s(&c, &cal, (loom_group){1, 1}, B) == 0);
    /* Its traffic given per level (HybridEP's forwarded dispatch): 0.3 GB
     * over NVLink and 0.1 GB over the NIC take max(0.3e9/450e9 + 3 us,
     * 0.1e9/50e9 + 8 us) = 0.002008; with nothing for the NIC, only the
     * NVLink term. */
    CHECK_NEAR_REL(loom_group_all_to_all_split_s(&c, &cal, g16, 0.3e9, 0.1e9), 0.002008, 1e-12);
    CHECK_NEAR_REL(loom_group_all_to_all_split_s(&c, &cal, g16, 0.3e9, 0), 0.3e9 / 450e9 + 3e-6,
                   1e-12);
    /* Brute force over (p, m): the hierarchical all-reduce with p ranks per
     * node equals the sum of its three flat phases for every split of 16. */
    for (int64_t p = 2; p < 16; p *= 2) {
        int64_t m = 16 / p;
        double ring = loom_collective_time_s(LOOM_COLL_ALL_REDUCE, m, B / (double)p, c.inter);
        double tree = 2.0 * (m - 1) / m * B / (double)p / c.inter.bandwidth_Bps +
                      2 * ceil(log2((double)m)) * c.inter.latency_s;
        double want = loom_collective_time_s(LOOM_COLL_REDUCE_SCATTER, p, B, c.intra) +
                      (m > 2 && tree < ring ? tree : ring) +
                      loom_collective_time_s(LOOM_COLL_ALL_GATHER, p, B, c.intra);
        CHECK_NEAR_REL(loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_REDUCE,
                                                    (loom_group){16, p}, B), want, 1e-12);
    }
}

static void mesh_axes(void)
{
    loom_cluster c;
    loom_error err;
    CHECK_INT_EQ(loom_cluster_load("dgx-h100-x4", &c, &err), LOOM_OK);
    struct { int64_t n0, n1; int axis; int64_t ranks, rpn; } cases[] = {
        {4, 8, 1, 8, 8},    /* axis 1 = a whole node */
        {4, 8, 0, 4, 1},    /* axis 0 strided by a node: one rank per node */
        {2, 4, 1, 4, 4},    /* half a node */
        {2, 4, 0, 2, 2},    /* GPUs 0 and 4: same node */
        {1, 16, 1, 16, 8},  /* axis 1 spans 2 nodes of 8 */
        {8, 2, 0, 8, 4},    /* GPUs 0,2,4,…,14: 4 per node, 2 nodes */
        {8, 2, 1, 2, 2},
        {2, 16, 0, 2, 1},   /* stride 16 > node */
        {1, 1, 0, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loom_group g = loom_mesh_axis_group(&c, (loom_mesh_shape){cases[i].n0, cases[i].n1},
                                            cases[i].axis);
        CHECK_INT_EQ(g.ranks, cases[i].ranks);
        CHECK_INT_EQ(g.ranks_per_node, cases[i].rpn);
    }
    /* Mesh (4, 8) on 4 nodes: all-reduce along axis 1 runs on NVLink, along
     * axis 0 on the NICs, and costs accordingly (effs 1, B = 1 GB). */
    loom_calib cal = unit_calib(&c);
    loom_mesh_shape m = {4, 8};
    double t1 = loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_REDUCE,
                                             loom_mesh_axis_group(&c, m, 1), 1e9);
    double t0 = loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_REDUCE,
                                             loom_mesh_axis_group(&c, m, 0), 1e9);
    CHECK_NEAR_REL(t1, 1.75e9 / 450e9 + 42e-6, 1e-12);
    CHECK_NEAR_REL(t0, 1.5e9 / 50e9 + 4 * 8e-6, 1e-12);   /* tree: 2·log2 4 latencies */
}

/* Rank groups that do not tile the nodes (loom_strided_group): Megatron's
 * TP groups of 16 consecutive ranks on 72-GPU NVLink domains are 0-15 …
 * 48-63 inside domain 0, then 64-79 with 8 ranks on each side of the
 * boundary; the slowest group has 8 ranks in a node. By hand, on
 * gb200-nvl72-x4 with link efficiencies 1 (NVLink 900 GB/s, 3 us; NIC
 * 50 GB/s, 8 us), B = 1 GB:
 *   straddling (p = 8, m = 2): RS_nv(8) + AR_nic(2, B/8) + AG_nv(8)
 *     = 2 · (7/8 · 1e9/900e9 + 7 · 3 us) + (1/2 · 2 · 0.125e9/50e9 + 2 · 8 us)
 *   inside a 64-GPU tile (p = 16): 2 · 15/16 · 1e9/900e9 + 30 · 3 us. */
static void straddling_groups(void)
{
    loom_cluster c, tile;
    loom_error err = {0};
    CHECK_INT_EQ(loom_cluster_preset("gb200-nvl72-x4", &c, &err), LOOM_OK);
    loom_group g = loom_strided_group(&c, 16, 1, 288);
    CHECK_INT_EQ(g.ranks, 16);
    CHECK_INT_EQ(g.ranks_per_node, 8);
    g = loom_strided_group(&c, 8, 1, 288);   /* 72 = 9 groups of 8: aligned */
    CHECK_INT_EQ(g.ranks_per_node, 8);
    /* 18 ranks 16 apart (dp over tp 16): 4 or 5 of them per domain */
    CHECK_INT_EQ(loom_strided_group(&c, 18, 16, 288).ranks_per_node, 4);
    /* the first block alone (a mesh placed from GPU 0) does not straddle */
    CHECK_INT_EQ(loom_strided_group(&c, 16, 1, 16).ranks_per_node, 16);
    loom_calib cal = unit_calib(&c);
    double t = loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_REDUCE,
                                            loom_strided_group(&c, 16, 1, 288), 1e9);
    CHECK_NEAR_REL(t, 2 * (0.875e9 / 900e9 + 21e-6) + (0.125e9 / 50e9 + 16e-6), 1e-12);
    CHECK(loom_cluster_tile(&c, &tile));
    g = loom_strided_group(&tile, 16, 1, 256);
    CHECK_INT_EQ(g.ranks_per_node, 16);
    t = loom_group_collective_time_s(&tile, &cal, LOOM_COLL_ALL_REDUCE, g, 1e9);
    CHECK_NEAR_REL(t, 2 * 15.0 / 16 * 1e9 / 900e9 + 30 * 3e-6, 1e-12);
    /* on 8-GPU nodes too: 3 ranks 4 apart are 0, 4 | 8 — one alone in its node */
    CHECK_INT_EQ(loom_cluster_preset("dgx-h100-x3", &c, &err), LOOM_OK);
    CHECK_INT_EQ(loom_strided_group(&c, 3, 4, 24).ranks_per_node, 1);
    CHECK_INT_EQ(loom_strided_group(&c, 2, 4, 24).ranks_per_node, 2);   /* aligned */
}

/* ZeRO's data-parallel sync, by hand: 1e9 parameters, 8 micro-batches,
 * fp32 gradients (4 GB) and bf16 weights (2 GB). */
static void zero_sync(void)
{
    const double n = 1e9, G = 4e9, W = 2e9;
    const struct {
        int zero, k;
        loom_dp_sync_op want[2];
    } cases[] = {
        {0, 1, {{LOOM_COLL_ALL_REDUCE, G, 1, 1, false}}},
        {1, 2, {{LOOM_COLL_REDUCE_SCATTER, G, 1, 1, false}, {LOOM_COLL_ALL_GATHER, W, 1, 1, false}}},
        {2, 2, {{LOOM_COLL_REDUCE_SCATTER, G, 8, 1, false}, {LOOM_COLL_ALL_GATHER, W, 1, 1, false}}},
        {3, 2, {{LOOM_COLL_REDUCE_SCATTER, G, 8, 1, false}, {LOOM_COLL_ALL_GATHER, W, 16, 1, false}}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        loom_dp_sync_op ops[LOOM_DP_SYNC_MAX_OPS];
        int k = loom_dp_sync_ops(n, cases[c].zero, false, 8, ops);
        CHECK_INT_EQ(k, cases[c].k);
        for (int i = 0; i < k && i < cases[c].k; i++) {
            CHECK_INT_EQ(ops[i].kind, cases[c].want[i].kind);
            CHECK(ops[i].bytes == cases[c].want[i].bytes);
            CHECK(ops[i].per_step == cases[c].want[i].per_step);
        }
    }
    loom_dp_sync_op ops[LOOM_DP_SYNC_MAX_OPS];   /* --grad-reduce-in-bf16 halves the gradients */
    CHECK_INT_EQ(loom_dp_sync_ops(n, 0, true, 0, ops), 1);
    CHECK(ops[0].bytes == 2e9 && ops[0].per_step == 1);
}

/* ZeRO-3 per framework, and the per-rank growth of its exposed cost.
 * DeepSpeed, 1e9 parameters in 24 blocks, full recompute, one micro-batch:
 * bf16 gradients reduce-scattered (2 GB) and bf16 weights gathered three
 * times (forward, recomputed forward, backward), one call per block each.
 * On a flat inter-node ring (bandwidth bw, latency a) the step's sync is
 *   T(n) = Σ_ops per_step · calls · [(n-1)/n · (B/calls)/bw + (n-1)·a]
 *        = Σ per_step · B/bw · (n-1)/n  +  (n-1) · a · Σ per_step · calls
 * so one more rank adds a · Σ per_step·calls = a · (1 + 3) · 24 = 96 a of
 * latency, plus B/bw·(1/n - 1/(n+1)) of bandwidth: with a fixed global
 * batch, dp doubling halves compute but not this. */
static void zero3_growth(void)
{
    loom_dp_sync_in in = {.params = 1e9, .zero = 3, .framework = LOOM_FRAMEWORK_DEEPSPEED,
                          .full_recompute = true, .micro_batches = 1, .blocks = 24, .dp = 64};
    loom_dp_sync_op ops[LOOM_DP_SYNC_MAX_OPS];
    CHECK_INT_EQ(loom_dp_sync_ops_ex(&in, ops), 2);
    CHECK(ops[0].kind == LOOM_COLL_REDUCE_SCATTER && ops[0].bytes == 2e9 && ops[0].calls == 24);
    CHECK(ops[1].kind == LOOM_COLL_ALL_GATHER && ops[1].bytes == 2e9 && ops[1].per_step == 3);
    in.framework = LOOM_FRAMEWORK_TORCHTITAN;   /* FSDP2: fp32 reduce, 2 gathers */
    loom_dp_sync_ops_ex(&in, ops);
    CHECK(ops[0].bytes == 4e9 && ops[1].per_step == 2);
    in.framework = LOOM_FRAMEWORK_MEGATRON, in.zero = 1;   /* pipelined buckets: one latency */
    loom_dp_sync_ops_ex(&in, ops);
    CHECK(ops[0].calls == 1 && ops[0].bytes == 4e9);

    in.framework = LOOM_FRAMEWORK_DEEPSPEED, in.zero = 3;
    loom_dp_sync_ops_ex(&in, ops);
    loom_link link = {.bandwidth_Bps = 25e9, .latency_s = 10e-6};
    double t[2];
    for (int k = 0; k < 2; k++) {
        int64_t n = 64 + k;
        t[k] = 0;
        for (int i = 0; i < 2; i++)
            t[k] += ops[i].per_step * ops[i].calls *
                    loom_collective_time_s(ops[i].kind, n, ops[i].bytes / ops[i].calls, link);
    }
    double hand = 96 * 10e-6 + (2e9 + 3 * 2e9) / 25e9 * (1.0 / 64 - 1.0 / 65);
    printf("zero-3 deepspeed: one more rank at 64 adds %.3f ms (hand %.3f ms)\n",
           1e3 * (t[1] - t[0]), 1e3 * hand);
    CHECK_NEAR_REL(t[1] - t[0], hand, 1e-9);
}

/* ZeRO-3's unhidden part (dp_sync.h): torchtitan, 1e9 parameters in 32
 * blocks, 4 micro-batches, 8 ranks of one node: per micro-batch one
 * block's gather of 2e9/32 bf16 bytes and one block's reduce-scatter of
 * 4e9/32 fp32 bytes (2e9/32 with FSDP's reduce_dtype bf16), each a flat
 * NVLink ring: (n-1)/n · B/bw + (n-1)·α. Below ZeRO-3, or on one rank, 0.
 * Under pipelining torchtitan gathers and scatters once per step. */
static void zero3_unhidden(void)
{
    loom_cluster c;
    loom_error e;
    CHECK(loom_cluster_preset("dgx-h100-x1", &c, &e) == LOOM_OK);
    loom_calib cal;
    loom_calib_default(&c.gpu, &cal);
    double bw = c.intra.bandwidth_Bps * cal.intra_link_eff, a = c.intra.latency_s;
    loom_dp_sync_in in = {.params = 1e9, .zero = 3, .framework = LOOM_FRAMEWORK_TORCHTITAN,
                          .micro_batches = 4, .blocks = 32, .dp = 8};
    loom_group node = {8, 8};
    double ag = 7.0 / 8 * (2e9 / 32) / bw + 7 * a, rs = 7.0 / 8 * (4e9 / 32) / bw + 7 * a;
    double got = loom_dp_sync_unhidden_s(&c, &cal, &in, node);
    printf("zero-3 unhidden: %.4f ms of a %.4f ms sync (hand %.4f ms)\n", 1e3 * got,
           1e3 * loom_dp_sync_time_s(&c, &cal, &in, node), 1e3 * 4 * (ag + rs));
    CHECK_NEAR_REL(got, 4 * (ag + rs), 1e-12);
    CHECK_NEAR_REL(loom_dp_sync_time_s(&c, &cal, &in, node), 4 * 32 * (2 * ag + rs), 1e-12);
    in.grad_reduce_bf16 = true;   /* FSDP MixedPrecision(reduce_dtype=bf16) halves the scatter */
    CHECK(loom_dp_sync_grad_bytes(LOOM_FRAMEWORK_TORCHTITAN, true) == 2);
    CHECK(loom_dp_sync_grad_bytes(LOOM_FRAMEWORK_TORCHTITAN, false) == 4);
    CHECK_NEAR_REL(loom_dp_sync_unhidden_s(&c, &cal, &in, node), 4 * (2 * ag), 1e-12);
    /* torchtitan with pipelining keeps the weights gathered for the step:
     * one gather and one (bf16 here) reduce-scatter per block per step, and
     * one block's of each unhidden instead of 4 micro-batches' */
    in.pipelined = true;
    loom_dp_sync_op ops[LOOM_DP_SYNC_MAX_OPS];
    CHECK_INT_EQ(loom_dp_sync_ops_ex(&in, ops), 2);
    CHECK(ops[0].per_step == 1 && ops[1].per_step == 1 && ops[1].calls == 32);
    CHECK_NEAR_REL(loom_dp_sync_time_s(&c, &cal, &in, node), 32 * (2 * ag), 1e-12);
    CHECK_NEAR_REL(loom_dp_sync_unhidden_s(&c, &cal, &in, node), 2 * ag, 1e-12);
    in.framework = LOOM_FRAMEWORK_MEGATRON;   /* Megatron-FSDP: still per micro-batch */
    loom_dp_sync_ops_ex(&in, ops);
    CHECK(ops[0].per_step == 4 && ops[1].per_step == 8);
    /* DeepSpeed prefetches 5e7 elements ahead: 1e10 parameters in 32
     * blocks (312.5M a block) fetch 16% of a block ahead, so of the 4 · 2 ·
     * 32 gathers all but the 4 first are 84% exposed; 2-byte gradients */
    in.framework = LOOM_FRAMEWORK_DEEPSPEED, in.pipelined = false, in.params = 1e10;
    double ag10 = 7.0 / 8 * (2e10 / 32) / bw + 7 * a, rs10 = 7.0 / 8 * (2e10 / 32) / bw + 7 * a;
    double ahead = 5e7 / (1e10 / 32);
    CHECK_NEAR_REL(loom_dp_sync_unhidden_s(&c, &cal, &in, node),
                   4 * (ag10 + rs10) + (4 * 2 * 32 - 4) * ag10 * (1 - ahead), 1e-12);
    in.params = 1e9;   /* 31.25M a block: all of it ahead, as FSDP */
    CHECK_NEAR_REL(loom_dp_sync_unhidden_s(&c, &cal, &in, node), 4 * (2 * ag), 1e-12);
    in.framework = LOOM_FRAMEWORK_TORCHTITAN;
    in.zero = 1;
    CHECK(loom_dp_sync_unhidden_s(&c, &cal, &in, node) == 0);
    in.zero = 3;
    CHECK(loom_dp_sync_unhidden_s(&c, &cal, &in, (loom_group){1, 1}) == 0);
}

/* HSDP (dp_sync.h), by hand: Llama-2-7B-sized, 7e9 parameters in 32
 * blocks, FSDP2 (torchtitan: fp32 reduce, two gathers per micro-batch),
 * one micro-batch, dp 64 on eight 8-GPU H100 nodes, shard groups of 8.
 *   groups   shard: 8 ranks, all in one node (NVLink ring);
 *            replica: 8 ranks, one per node (the NIC)
 *   per block and step, one call each:
 *            reduce-scatter of 4·7e9/32 = 875 MB over the shard group,
 *            2 all-gathers of 2·7e9/32 = 437.5 MB over the shard group,
 *            all-reduce of the shard's gradients, 875 MB / 8 = 109.4 MB,
 *            over the replica group, once per step (3.5 GB in all)
 *   times    ring over NVLink: (n-1)/n · B/bw + (n-1)·α; the replica
 *            all-reduce one rank per node: 2(n-1)/n · B/bw + the double
 *            binary tree's 2·log2(8)·α = 6α (cheaper than the ring's 14α)
 *   unhidden one block's reduce-scatter + gather + replica all-reduce.
 * Full sharding over all 64 (shard 0) keeps two ops over the whole group. */
static void hsdp_sync(void)
{
    loom_group sg, rg;
    loom_dp_sync_groups((loom_group){64, 8}, 8, &sg, &rg);
    CHECK(sg.ranks == 8 && sg.ranks_per_node == 8 && rg.ranks == 8 && rg.ranks_per_node == 1);
    loom_dp_sync_groups((loom_group){64, 8}, 16, &sg, &rg);   /* a shard group of 2 nodes */
    CHECK(sg.ranks == 16 && sg.ranks_per_node == 8 && rg.ranks == 4 && rg.ranks_per_node == 1);
    loom_dp_sync_groups((loom_group){64, 16}, 4, &sg, &rg);   /* 4 shard groups a node */
    CHECK(sg.ranks == 4 && sg.ranks_per_node == 4 && rg.ranks == 16 && rg.ranks_per_node == 4);
    loom_dp_sync_groups((loom_group){64, 8}, 0, &sg, &rg);    /* full sharding */
    CHECK(sg.ranks == 64 && sg.ranks_per_node == 8 && rg.ranks == 1);

    loom_dp_sync_in in = {.params = 7e9, .zero = 3, .framework = LOOM_FRAMEWORK_TORCHTITAN,
                          .micro_batches = 1, .blocks = 32, .dp = 64, .shard = 8};
    loom_dp_sync_op ops[LOOM_DP_SYNC_MAX_OPS];
    CHECK_INT_EQ(loom_dp_sync_ops_ex(&in, ops), 3);
    CHECK(ops[0].kind == LOOM_COLL_REDUCE_SCATTER && ops[0].bytes == 28e9 && ops[0].calls == 32 &&
          ops[0].per_step == 1 && !ops[0].replica);
    CHECK(ops[1].kind == LOOM_COLL_ALL_GATHER && ops[1].bytes == 14e9 && ops[1].calls == 32 &&
          ops[1].per_step == 2 && !ops[1].replica);
    CHECK(ops[2].kind == LOOM_COLL_ALL_REDUCE && ops[2].bytes == 3.5e9 && ops[2].calls == 32 &&
          ops[2].per_step == 1 && ops[2].replica);

    loom_cluster c;
    loom_error e;
    CHECK(loom_cluster_preset("dgx-h100-x8", &c, &e) == LOOM_OK);
    loom_calib cal;
    loom_calib_default(&c.gpu, &cal);
    double bi = c.intra.bandwidth_Bps * cal.intra_link_eff, ai = c.intra.latency_s;
    double bo = c.inter.bandwidth_Bps * cal.inter_link_eff, ao = c.inter.latency_s;
    double rs = 7.0 / 8 * (28e9 / 32) / bi + 7 * ai, ag = 7.0 / 8 * (14e9 / 32) / bi + 7 * ai;
    double ar = 2 * 7.0 / 8 * (3.5e9 / 32) / bo + 6 * ao;
    loom_group dp = {64, 8};
    double t = loom_dp_sync_time_s(&c, &cal, &in, dp);
    printf("hsdp 7B dp 64 shard 8: sync %.2f ms (hand %.2f ms: per block rs %.3f, ag %.3f, "
           "replica ar %.3f ms), unhidden %.3f ms\n", 1e3 * t, 1e3 * 32 * (rs + 2 * ag + ar),
           1e3 * rs, 1e3 * ag, 1e3 * ar, 1e3 * loom_dp_sync_unhidden_s(&c, &cal, &in, dp));
    CHECK_NEAR_REL(t, 32 * (rs + 2 * ag + ar), 1e-12);
    CHECK_NEAR_REL(loom_dp_sync_unhidden_s(&c, &cal, &in, dp), rs + ag + ar, 1e-12);
    /* 4 micro-batches: the shard group's collectives 4 times, the replica's once */
    in.micro_batches = 4;
    CHECK_NEAR_REL(loom_dp_sync_time_s(&c, &cal, &in, dp), 32 * (4 * (rs + 2 * ag) + ar), 1e-12);
    CHECK_NEAR_REL(loom_dp_sync_unhidden_s(&c, &cal, &in, dp), 4 * (rs + ag) + ar, 1e-12);
    /* full sharding (shard 0 or 64): the two ops over all 64, as before */
    in.micro_batches = 1;
    for (int64_t shard = 0; shard <= 64; shard += 64) {
        in.shard = shard;
        CHECK_INT_EQ(loom_dp_sync_ops_ex(&in, ops), 2);
        double full = 32 * (loom_group_collective_time_s(&c, &cal, LOOM_COLL_REDUCE_SCATTER, dp,
                                                         28e9 / 32) +
                            2 * loom_group_collective_time_s(&c, &cal, LOOM_COLL_ALL_GATHER, dp,
                                                             14e9 / 32));
        CHECK_NEAR_REL(loom_dp_sync_time_s(&c, &cal, &in, dp), full, 1e-12);
    }
    /* ZeRO-0 has nothing sharded: one all-reduce over the whole group */
    in.shard = 8, in.zero = 0;
    CHECK_INT_EQ(loom_dp_sync_ops_ex(&in, ops), 1);
    /* ZeRO-1 (Megatron's distributed-optimizer instances): reduce-scatter
     * and gather over the shard group, the replica all-reduce of 1/8 */
    in.zero = 1, in.framework = LOOM_FRAMEWORK_MEGATRON;
    CHECK_INT_EQ(loom_dp_sync_ops_ex(&in, ops), 3);
    CHECK(ops[2].replica && ops[2].bytes == 28e9 / 8 && ops[2].per_step == 1 &&
          ops[2].calls == 1);
}

int main(void)
{
    hsdp_sync();
    zero3_growth();
    zero3_unhidden();
    flat_formulas();
    intra_vs_inter();
    hierarchical();
    mesh_axes();
    straddling_groups();
    zero_sync();
    return check_done();
}
