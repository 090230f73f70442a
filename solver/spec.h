/*
 * spec.h — sharding specs of a tensor on a 2-D logical mesh, the mesh's
 * communication groups, and the resharding cost between two specs
 * (docs/design.md §5).
 *
 * A spec gives each tensor dim a set of mesh axes it is split over: none
 * (replicated), axis 0, axis 1, or both (the dim is split n0·n1 ways, axis 0
 * major). Each axis splits at most one dim. Written in dim names: "b@0 s h@1",
 * "f@01"; a plain name is replicated along the axes it does not carry.
 *
 * Resharding a tensor from spec `from` to spec `to`, axis by axis
 * (the ring costs of costs/collective.h, B = the buffer named there):
 *   same dim on both sides          nothing
 *   split -> replicated             all-gather over the axis
 *   replicated -> split             a local slice, free
 *   dim d -> another dim d'         all-to-all over the axis
 * Slices go first (they shrink the buffer), then all-to-alls, then
 * all-gathers (in the cheaper order when both axes gather).
 *
 * The backward pass moves the gradient the other way. A consumer whose
 * computation splits a dim the tensor lacks (a contraction: Megatron's
 * column-parallel input) holds a PARTIAL gradient over that axis; it is
 * reduced on the edge: a reduce-scatter when the producer's spec is split
 * over that axis (Megatron's sequence parallelism: RS instead of AR + slice),
 * else an all-reduce; then the remaining axes reshard as above. A producer
 * that accepts partial sums over an axis (a fan-out node that sums its
 * consumers' gradients first) defers that reduction.
 *
 * Units: bytes, seconds.
 */
#ifndef LOOM_SPEC_H
#define LOOM_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/collective.h"
#include "graph/graph.h"

#define LOOM_AXIS0 1u
#define LOOM_AXIS1 2u
#define LOOM_AXES_BOTH 3u
/* A collective's group only (never a spec's): axis 0 together with the
 * ep_span - 1 pipeline replicas beside the mesh, the expert-parallel group
 * of Megatron-Core's MoE parallel folding when it spans data-parallel
 * replicas (loom_mesh_ctx.ep_span). */
#define LOOM_AXIS0_EP_SPAN 4u

typedef struct {
    uint8_t ax[LOOM_MAX_DIMS];   /* per dim: LOOM_AXIS0 | LOOM_AXIS1 bits */
} loom_spec;

/* The mesh as the solver sees it: sizes and the collective groups. */
typedef struct {
    const loom_cluster *cluster;
    const loom_calib *calib;
    loom_mesh_shape mesh;
    loom_group group[4];         /* by axes mask: [1] axis 0, [2] axis 1, [3] whole mesh */
    /* Expert parallelism beyond the mesh: experts split over axis 0 are
     * split over ep_span replicas too (Megatron-Core's parallel folding: EP
     * × expert TP divides TP × CP × DP), so an expert weight split over
     * axis 0 holds 1 / (n0 · ep_span) of the experts, and the token
     * all-to-all runs over ep_group: n0 · ep_span ranks at stride n1, the
     * replicas side by side as the planner lays them out (stage_search.h)
     * and Megatron orders its ranks (tp, cp, dp). 1: inside the mesh. */
    int64_t ep_span;
    loom_group ep_group;
    /* ... and with the experts over axis 1 too (expert TP 1,
     * strategy.h expert_fold; a collective over LOOM_AXIS0_EP_SPAN |
     * LOOM_AXIS1): the n0 · n1 · ep_span consecutive GPUs of ep_span
     * neighbouring replicas, Megatron's expert group with etp 1 */
    loom_group ep_fold_group;
} loom_mesh_ctx;

void loom_mesh_ctx_init(loom_mesh_ctx *m, const loom_cluster *c, const loom_calib *cal,
                        loom_mesh_shape mesh);
/* Sets the expert-parallel span (see loom_mesh_ctx; span >= 1). */
void loom_mesh_ctx_set_ep_span(loom_mesh_ctx *m, int64_t span);
/* Ranks along the axes in mask (1 for an empty mask; LOOM_AXIS0_EP_SPAN counts
 * axis 0 times ep_span). */
int64_t loom_mesh_parts(const loom_mesh_ctx *m, unsigned axes);
/* Time of collective k over the axes in mask (0 when they hold one rank). */
double loom_mesh_coll_s(const loom_mesh_ctx *m, loom_collective k, unsigned axes, double bytes);

/* OR of the axes the spec uses. */
unsigned loom_spec_axes(const loom_spec *s, int ndim);
/* The axes the dims of t named `dim` are split over under s; with dim NULL,
 * the axes any dim is split over. */
unsigned loom_spec_dim_axes(const loom_spec *s, const loom_tensor *t, const char *dim);
/* The dim carrying `axis` (0 or 1), or -1. */
int loom_spec_axis_dim(const loom_spec *s, int ndim, int axis);
/* Number of pieces the tensor is cut into (product over its split dims). */
int64_t loom_spec_shards(const loom_spec *s, int ndim, const loom_mesh_ctx *m);
/* Each axis used at most once, on a mesh axis of size > 1, and every split
 * dim divisible by its parts (or paddable, below, and at least that large). */
bool loom_spec_valid(const loom_spec *s, const loom_tensor *t, const loom_mesh_ctx *m);
/* Dims that may be split unevenly: the vocabulary "v", which Megatron-LM
 * pads to a multiple of the tensor-parallel degree (--make-vocab-size-
 * divisible-by) so that GPT-2's 50257 rows split 8 ways. A shard is then
 * costed as 1/parts of the whole (what costs/eval.c does). */
bool loom_spec_dim_paddable(const char *name);
/* size splits into `parts` (divides, or the dim is paddable and >= parts). */
bool loom_spec_dim_splits(const loom_dim *d, int64_t parts);
bool loom_spec_eq(const loom_spec *a, const loom_spec *b, int ndim);
/* Bytes of the tensor on one GPU under s. */
double loom_spec_bytes(const loom_spec *s, const loom_tensor *t, const loom_mesh_ctx *m);
/* "b@0 s h@1" (dim names; "@01" both axes). */
void loom_spec_format(const loom_spec *s, const loom_tensor *t, char *buf, size_t n);

typedef struct {
    double time_s;
    double bytes;   /* collective buffer bytes (per GPU) */
} loom_comm;

/* Forward resharding of t from `from` to `to`. */
loom_comm loom_reshard_fwd(const loom_mesh_ctx *m, const loom_tensor *t, const loom_spec *from,
                           const loom_spec *to);
/* Backward: the gradient of t, held in spec `cons` with partial sums over
 * the axes cons_partial, brought to spec `prod` where partial sums over
 * prod_partial may stay. */
loom_comm loom_reshard_bwd(const loom_mesh_ctx *m, const loom_tensor *t, const loom_spec *cons,
                           unsigned cons_partial, const loom_spec *prod, unsigned prod_partial);

#endif
