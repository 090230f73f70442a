/*
 * collective.h — alpha-beta times of NCCL-style collectives (docs/design.md §4).
 *
 * For n ranks, B bytes, link bandwidth bw (per direction per GPU) and
 * latency α (ring algorithms; Thakur, Rabenseifner & Gropp 2005,
 * "Optimization of Collective Communication Operations in MPICH"):
 *   all-reduce          2(n-1)/n · B/bw + 2(n-1)·α
 *   all-gather          (n-1)/n · B/bw + (n-1)·α
 *   reduce-scatter      (n-1)/n · B/bw + (n-1)·α
 *   all-to-all          (n-1)/n · B/bw + (n-1)·α
 *   send/recv           B/bw + α
 * B is the FULL buffer: all-reduce: the buffer each rank holds; all-gather:
 * the gathered output; reduce-scatter: the input being reduced; all-to-all:
 * each rank's buffer; send/recv: the message. One rank (n <= 1) costs 0
 * (except send/recv, which ignores n).
 *
 * Groups that span nodes (collective.c): all-reduce is hierarchical
 * (intra-node reduce-scatter, inter-node all-reduce of B/p, intra-node
 * all-gather, p = ranks per node); all-gather / reduce-scatter are the
 * two-level versions; all-to-all is bounded by the slower of its intra and
 * inter parts. Link bandwidths are scaled by the calibrated efficiencies.
 *
 * Units: bytes, seconds.
 */
#ifndef LOOM_COLLECTIVE_H
#define LOOM_COLLECTIVE_H

#include <stdint.h>
#include "costs/calib.h"
#include "costs/cluster.h"

typedef enum {
    LOOM_COLL_ALL_REDUCE,
    LOOM_COLL_ALL_GATHER,
    LOOM_COLL_REDUCE_SCATTER,
    LOOM_COLL_ALL_TO_ALL,
    LOOM_COLL_SEND_RECV,
    LOOM_COLL_COUNT
} loom_collective;

const char *loom_collective_name(loom_collective k);   /* "all-reduce", … */

/* Flat ring time on one link, exactly the table above (no efficiency). */
double loom_collective_time_s(loom_collective k, int64_t ranks, double bytes, loom_link link);

/* A group of `ranks` GPUs, `ranks_per_node` of them in each node (1 = every
 * rank in a different node; ranks_per_node >= ranks = all in one node). For
 * send/recv, ranks is 2 and ranks_per_node >= 2 means both ends share a node. */
typedef struct {
    int64_t ranks, ranks_per_node;
} loom_group;

/* Time of collective k over group g on cluster c: intra link inside a node,
 * inter link across nodes, hierarchical when spanning nodes with > 1 rank per
 * node; bandwidths × cal's link efficiencies (cal NULL = defaults for c's gpu). */
/* An all-to-all whose peers are all written at once: every rank's n - 1
 * transfers start together (HybridEP/DeepEP dispatch kernels copy straight
 * into the peers' buffers over NVLink, and RDMA across domains), so the
 * startup latency is paid once per link level, where NCCL's grouped
 * send/recv steps through its peers and loom_group_collective_time_s
 * charges one per peer:
 *     max((p-1)/n · B / bw_intra + α_intra, (n-p)/n · B / bw_inter + α_inter)
 * for n ranks, p of them per node (the second term only when n > p). */
double loom_group_all_to_all_direct_s(const loom_cluster *c, const loom_calib *cal, loom_group g,
                                      double bytes);

/* The same all-at-once all-to-all with its traffic given per link level:
 * intra_bytes leave this rank over NVLink, inter_bytes over the network
 *     max(intra_bytes / bw_intra + α_intra, inter_bytes / bw_inter + α_inter)
 * (a level with no bytes costs nothing). A dispatcher that forwards through
 * a peer (HybridEP, DeepEP: moe.h loom_moe_remote_domain_copies) sends
 * fewer bytes across nodes than the flat n-way split above. */
double loom_group_all_to_all_split_s(const loom_cluster *c, const loom_calib *cal, loom_group g,
                                     double intra_bytes, double inter_bytes);

double loom_group_collective_time_s(const loom_cluster *c, const loom_calib *cal,
                                    loom_collective k, loom_group g, double bytes);

/* Logical 2-D mesh (n0, n1) over a sub-mesh of n0·n1 GPUs placed node-major
 * from a node boundary: axis 1 is the fastest-varying (inside a node when
 * n1 <= gpus_per_node); axis 0 is strided by n1. */
typedef struct {
    int64_t n0, n1;
} loom_mesh_shape;

/* The group of ranks along `axis` (0 or 1) of mesh m on c: the slowest of
 * them, loom_strided_group over the mesh's n0 · n1 GPUs. */
loom_group loom_mesh_axis_group(const loom_cluster *c, loom_mesh_shape m, int axis);

/* Groups of `count` ranks `stride` GPUs apart, in blocks of count · stride
 * GPUs repeated over the first `span` GPUs of c (Megatron's rank groups;
 * a mesh axis): the slowest group, the one with the fewest ranks in one of
 * its nodes, ranks_per_node being that number. Where the blocks align with
 * the nodes that is every group; a block that does not (16 on 72-GPU
 * nodes) leaves a group straddling two nodes. */
loom_group loom_strided_group(const loom_cluster *c, int64_t count, int64_t stride, int64_t span);

/* Context parallelism's ring attention (Megatron's p2p ring): each rank of
 * the cp ring `ring` passes its K and V shards (kv_bytes on one GPU) to its
 * neighbour, ring.ranks - 1 steps forward and twice that backward (K, V,
 * then their gradients), each step beside the attention kernel's block of
 * the chunk it holds. *fwd_s / *bwd_s get the exposed part: what the ring
 * takes beyond the kernel's attn_fwd_s / attn_bwd_s on that rank. The one
 * price of a sequence-split attention: loom eval (costs/eval.c) and the
 * planner's strategies (solver/strategy.c) both call it. */
void loom_ring_attention_exposed_s(const loom_cluster *c, const loom_calib *cal, loom_group ring,
                                   double kv_bytes, double attn_fwd_s, double attn_bwd_s,
                                   double *fwd_s, double *bwd_s);

#endif
