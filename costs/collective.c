/*
 * collective.c — alpha-beta collective times, flat and across nodes.
 *
 * Flat ring (one link, n ranks, B bytes; Thakur et al. 2005; the same step
 * counts as NCCL's tuning model, src/graph/tuning.cc):
 *   all-reduce      2(n-1) steps of B/n each:  2(n-1)/n · B/bw + 2(n-1)·α
 *   all-gather /    (n-1) steps of B/n:         (n-1)/n · B/bw + (n-1)·α
 *   reduce-scatter
 *   all-to-all      every rank sends B/n to each of n-1 peers, pairwise
 *                   exchanges:                  (n-1)/n · B/bw + (n-1)·α
 *   send/recv       one message:                B/bw + α
 * Across nodes an all-reduce may instead run NCCL's double binary tree
 * (tuning.cc): about the ring's bus bandwidth, latency 2·ceil(log2 m)·α
 * instead of 2(m-1)·α; the cheaper is taken, as NCCL's tuner does. Inside a
 * node NCCL rings over NVLink; all-gather and reduce-scatter are ring-only.
 *
 * A group of n ranks spanning m = n/p nodes with p ranks in each (p > 1):
 *   all-reduce      hierarchical (as NCCL's tree/ring-of-rings and
 *                   Megatron's two-level DP): reduce-scatter inside the node
 *                   over p ranks (B), all-reduce across nodes over m ranks of
 *                   the B/p shard each GPU owns (all p GPUs of a node do this
 *                   at once, each through its own NIC), all-gather inside the
 *                   node (B):
 *                     RS_intra(p, B) + AR_inter(m, B/p) + AG_intra(p, B)
 *   all-gather      inter-node all-gather among same-local-rank GPUs (their
 *                   gathered output is B/p), then intra-node all-gather of B:
 *                     AG_inter(m, B/p) + AG_intra(p, B)
 *   reduce-scatter  the mirror: RS_intra(p, B) + RS_inter(m, B/p)
 *   all-to-all      each rank sends B/n to each peer: (p-1) of them over
 *                   NVLink, (n-p) over its NIC, concurrently, so the slower
 *                   part bounds it:
 *                     max((p-1)/n · B/bw_i + (p-1)α_i, (n-p)/n · B/bw_e + (n-p)α_e)
 * With p = 1 every formula reduces to the flat one on the inter link, and
 * with p >= n to the flat one on the intra link.
 *
 * Effective bandwidth = link bandwidth × calibrated link efficiency (NCCL's
 * bus bandwidth is below the wire rate: its model caps A100 NVLink at
 * 235 of 300 GB/s, tuning.cc). Units: bytes, seconds.
 */
#include "costs/collective.h"

#include <math.h>

static const char *const coll_names[LOOM_COLL_COUNT] = {
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send/recv",
};

const char *loom_collective_name(loom_collective k)
{
    return (int)k >= 0 && k < LOOM_COLL_COUNT ? coll_names[k] : "?";
}

double loom_collective_time_s(loom_collective k, int64_t ranks, double bytes, loom_link link)
{
    if (!(bytes > 0)) return 0;
    if (k != LOOM_COLL_SEND_RECV && ranks <= 1) return 0;
    if (!(link.bandwidth_Bps > 0)) return HUGE_VAL;   /* no such link */
    double n = (double)ranks, b = bytes / link.bandwidth_Bps, a = link.latency_s;
    switch (k) {
    case LOOM_COLL_ALL_REDUCE: return 2 * (n - 1) / n * b + 2 * (n - 1) * a;
    case LOOM_COLL_ALL_GATHER:
    case LOOM_COLL_REDUCE_SCATTER:
    case LOOM_COLL_ALL_TO_ALL: return (n - 1) / n * b + (n - 1) * a;
    case LOOM_COLL_SEND_RECV: return b + a;
    default: return HUGE_VAL;
    }
}

/* All-reduce among m ranks one per node: ring or double binary tree. */
static double inter_all_reduce(int64_t m, double bytes, loom_link l)
{
    double ring = loom_collective_time_s(LOOM_COLL_ALL_REDUCE, m, bytes, l);
    if (m <= 2 || !(bytes > 0) || !(l.bandwidth_Bps > 0)) return ring;
    double n = (double)m;
    double tree = 2 * (n - 1) / n * bytes / l.bandwidth_Bps + 2 * ceil(log2(n)) * l.latency_s;
    return tree < ring ? tree : ring;
}

/* A link with its bandwidth scaled by a calibrated efficiency. */
static loom_link scaled(loom_link l, double eff)
{
    l.bandwidth_Bps *= eff > 0 ? eff : 1;
    return l;
}

double loom_group_collective_time_s(const loom_cluster *c, const loom_calib *cal,
                                    loom_collective k, loom_group g, double bytes)
{
    loom_calib def;
    if (!cal) {
        loom_calib_default(&c->gpu, &def);
        cal = &def;
    }
    loom_link intra = scaled(c->intra, cal->intra_link_eff);
    loom_link inter = scaled(c->inter, cal->inter_link_eff);
    if (k == LOOM_COLL_SEND_RECV)
        return loom_collective_time_s(k, 2, bytes, g.ranks_per_node >= 2 ? intra : inter);
    int64_t n = g.ranks, p = g.ranks_per_node < 1 ? 1 : g.ranks_per_node;
    if (n <= 1 || !(bytes > 0)) return 0;
    if (p >= n) return loom_collective_time_s(k, n, bytes, intra);
    if (p == 1)
        return k == LOOM_COLL_ALL_REDUCE ? inter_all_reduce(n, bytes, inter)
                                         : loom_collective_time_s(k, n, bytes, inter);
    /* m nodes of p ranks; a group whose size is not a multiple of p is
     * charged as if its last node were full (ceil). */
    int64_t m = (n + p - 1) / p;
    double shard = bytes / (double)p;
    switch (k) {
    case LOOM_COLL_ALL_REDUCE:
        return loom_collective_time_s(LOOM_COLL_REDUCE_SCATTER, p, bytes, intra) +
               inter_all_reduce(m, shard, inter) +
               loom_collective_time_s(LOOM_COLL_ALL_GATHER, p, bytes, intra);
    case LOOM_COLL_ALL_GATHER:
        return loom_collective_time_s(LOOM_COLL_ALL_GATHER, m, shard, inter) +
               loom_collective_time_s(LOOM_COLL_ALL_GATHER, p, bytes, intra);
    case LOOM_COLL_REDUCE_SCATTER:
        return loom_collective_time_s(LOOM_COLL_REDUCE_SCATTER, p, bytes, intra) +
               loom_collective_time_s(LOOM_COLL_REDUCE_SCATTER, m, shard, inter);
    case LOOM_COLL_ALL_TO_ALL: {
        double nn = (double)n, pp = (double)p;
        double t_in = (pp - 1) / nn * bytes / intra.bandwidth_Bps + (pp - 1) * intra.latency_s;
        double t_out = inter.bandwidth_Bps > 0
                           ? (nn - pp) / nn * bytes / inter.bandwidth_Bps +
                                 (nn - pp) * inter.latency_s
                           : HUGE_VAL;
        return t_in > t_out ? t_in : t_out;
    }
    default: return HUGE_VAL;
    }
}

double loom_group_all_to_all_split_s(const loom_cluster *c, const loom_calib *cal, loom_group g,
                                     double intra_bytes, double inter_bytes)
{
    loom_calib def;
    if (!cal) {
        loom_calib_default(&c->gpu, &def);
        cal = &def;
    }
    if (g.ranks <= 1) return 0;
    loom_link intra = scaled(c->intra, cal->intra_link_eff);
    loom_link inter = scaled(c->inter, cal->inter_link_eff);
    double t_in = 0, t_out = 0;
    if (intra_bytes > 0) {
        if (!(intra.bandwidth_Bps > 0)) return HUGE_VAL;
        t_in = intra_bytes / intra.bandwidth_Bps + intra.latency_s;
    }
    if (inter_bytes > 0) {
        if (!(inter.bandwidth_Bps > 0)) return HUGE_VAL;
        t_out = inter_bytes / inter.bandwidth_Bps + inter.latency_s;
    }
    return t_in > t_out ? t_in : t_out;
}

double loom_group_all_to_all_direct_s(const loom_cluster *c, const loom_calib *cal, loom_group g,
                                      double bytes)
{
    int64_t n = g.ranks, p = g.ranks_per_node < 1 ? 1 : g.ranks_per_node;
    if (n <= 1 || !(bytes > 0)) return 0;
    if (p > n) p = n;
    double nn = (double)n, pp = (double)p;
    return loom_group_all_to_all_split_s(c, cal, g, (pp - 1) / nn * bytes, (nn - pp) / nn * bytes);
}

/* Greatest common divisor, for the period of a group pattern. */
static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

loom_group loom_strided_group(const loom_cluster *c, int64_t count, int64_t stride, int64_t span)
{
    int64_t gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    if (count < 1) count = 1;
    if (stride < 1) stride = 1;
    int64_t block = count * stride;
    /* Aligned patterns: every group sits in the nodes as the first one
     * does (members a node apart, blocks inside a node, or blocks of whole
     * nodes each holding gpn / stride members of every group), and
     * k · stride < gpn <=> k < ceil(gpn / stride) counts its ranks there. */
    if (stride % gpn == 0 || gpn % block == 0 || (block % gpn == 0 && gpn % stride == 0)) {
        int64_t in_node = (gpn + stride - 1) / stride;
        return (loom_group){count, count < in_node ? count : in_node};
    }
    /* Otherwise some group straddles a node boundary (a TP group of 16 on
     * 72-GPU nodes: GPUs 64-79). The slowest group is the one with the
     * fewest ranks in one node: those ranks carry its inter-node traffic
     * through the fewest NICs. The pattern repeats every lcm(gpn, block)
     * GPUs, so one period (or the span, if shorter) is scanned. */
    int64_t period = gpn / gcd64(gpn, block) * block;
    int64_t limit = span > 0 && span < period ? span : period, fewest = count;
    for (int64_t b = 0; b + block <= limit || b == 0; b += block)
        for (int64_t j = 0; j < stride; j++) {
            int64_t run = 0, node = -1;
            for (int64_t k = 0; k < count; k++) {
                int64_t at = (b + j + k * stride) / gpn;
                if (at != node) {
                    if (node >= 0 && run < fewest) fewest = run;
                    node = at, run = 0;
                }
                run++;
            }
            if (run < fewest) fewest = run;
        }
    return (loom_group){count, fewest};
}

loom_group loom_mesh_axis_group(const loom_cluster *c, loom_mesh_shape m, int axis)
{
    int64_t span = m.n0 * m.n1;
    if (axis == 1) return loom_strided_group(c, m.n1, 1, span);
    return loom_strided_group(c, m.n0, m.n1 > 0 ? m.n1 : 1, span);
}

void loom_ring_attention_exposed_s(const loom_cluster *c, const loom_calib *cal, loom_group ring,
                                   double kv_bytes, double attn_fwd_s, double attn_bwd_s,
                                   double *fwd_s, double *bwd_s)
{
    *fwd_s = *bwd_s = 0;
    if (ring.ranks <= 1) return;
    /* neighbours share a node when the ring has two or more ranks per node */
    double step = loom_group_collective_time_s(c, cal, LOOM_COLL_SEND_RECV,
                                               (loom_group){2, ring.ranks_per_node >= 2 ? 2 : 1},
                                               kv_bytes);
    double fwd = (double)(ring.ranks - 1) * step;
    *fwd_s = fwd > attn_fwd_s ? fwd - attn_fwd_s : 0;
    *bwd_s = 2 * fwd > attn_bwd_s ? 2 * fwd - attn_bwd_s : 0;
}
