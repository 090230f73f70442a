/*
 * stage_dp.h — inter-operator planning: slicing layers into pipeline stages
 * and giving each stage a sub-mesh of GPUs (Alpa, OSDI '22, §5; docs/design.md §6).
 *
 * THE PROBLEM
 *
 * A model is a sequence of layers 0..L-1 (after clustering, see below). A
 * pipeline replica owns D GPUs. A plan cuts the layers into S contiguous
 * stages and gives stage i a sub-mesh of n_i GPUs with Σ n_i = D. Micro-batches
 * flow through the stages; under the 1F1B schedule with M micro-batches the
 * time of one training step is (Narayanan et al., SC '21; Alpa eq. 2)
 *
 *     T = Σ_i t_i  +  (M - 1) · max_i t_i                                  (1)
 *
 * where t_i is stage i's forward+backward time per micro-batch. The first sum
 * is the pipeline's fill and drain, the second the steady state paced by the
 * slowest stage. A stage must also fit in memory: under 1F1B, stage i of S
 * keeps the activations of min(S - i, M) micro-batches alive at once.
 *
 * THE STAGE COST TABLE
 *
 * For each layer l, sub-mesh m and "option" o (a logical mesh shape of m,
 * possibly combined with a memory-saving variant such as recompute) the caller
 * gives a loom_stage_cost: time per micro-batch, bytes that stay resident
 * (parameters, gradients, optimizer state, KV cache) and bytes of activations
 * per micro-batch in flight. The intra-op ILP solves a layer once per unique
 * layer signature and mesh, so costs are additive over layers and a stage's
 * cost is a sum. Within a stage one option is used throughout (one logical
 * mesh per stage, as in Alpa), so
 *
 *     t(i, j, m, s) = min over options o with
 *                     once(m,o) + Σ_l static(l,m,o) + min(s, M) · Σ_l act(l,m,o)
 *                     ≤ capacity
 *                     of Σ_{l=i..j} time(l, m, o)
 *
 * where s is the number of micro-batches the stage keeps in flight and once()
 * is paid once per stage whatever its length (full recompute re-materialises
 * one layer at a time: its working set). Prefix sums make each entry
 * O(options).
 *
 * THE DYNAMIC PROGRAM
 *
 * Equation (1) couples all stages through the max, so Alpa fixes it: for a
 * candidate bound t_max, let F(s, k, d) be the least Σ t_i that places layers
 * k..L-1 into exactly s stages on exactly d GPUs with every stage time ≤ t_max:
 *
 *     F(0, L, 0) = 0
 *     F(s, k, d) = min over j ≥ k, m with n_m ≤ d, t(k, j, m, s) ≤ t_max of
 *                  t(k, j, m, s) + F(s - 1, j + 1, d - n_m)
 *
 * Counting stages from the back is what makes memory exact: the stage that
 * starts a suffix of s stages is stage S - s of S and holds s micro-batches.
 * The step time for this bound is min_s F(s, 0, D) + (M - 1) · t_max, and the
 * optimum of (1) is the best of these over all candidate t_max — the distinct
 * values of t(i, j, m, s): the optimal plan's own max stage time is one of
 * them, and at that bound F finds a Σ no larger than the plan's.
 *
 * Three things keep the enumeration short, none of them losing optimality:
 *  - F(∞) = the unconstrained least Σ is a lower bound on every F, so once
 *    (M - 1) · t_max + F(∞) ≥ the best step found, no larger bound can win
 *    (Alpa's early stopping, tightened by F(∞));
 *  - whether any plan exists under t_max is monotone in t_max, so the smallest
 *    feasible candidate is found by bisection instead of a scan;
 *  - t(k, j, m, s) and its memory only grow with j, so the inner loop over j
 *    stops at the first entry above t_max or over capacity.
 * An optional relative gap (tmax_rel_gap) skips candidates closer than that to
 * the last one tried; with it the result is within that factor of optimal.
 *
 * Cost per t_max: O(S · L² · D_u · |M|) with D_u = D / gcd(n_m) GPU counts.
 * With a single sub-mesh (the uniform-stage mode) the stage count is fixed by
 * D / n and the d dimension disappears: O(S · L²).
 *
 * SUB-MESHES AND THEIR PLACEMENT
 *
 * Sub-mesh shapes are Alpa's: (1, 1), (1, 2), (1, 4), … up to (1, g) inside
 * one node (powers of two dividing g, g = GPUs per node), then whole nodes
 * (n, g). Any multiset of these whose sizes sum to whole nodes can be placed
 * without overlap: whole-node meshes take consecutive nodes, and the
 * sub-node meshes, placed largest first at the lowest free aligned slot, fill
 * each node exactly because every size divides every larger one and g
 * (buddy allocation). loom_stage_place does that placement. A node whose
 * size is not a power of two (a 72-GPU NVLink domain) only has sub-node
 * meshes up to 8 here; the stage search adds its 64-GPU tile as a second
 * cluster of nodes of 64 (costs/cluster.h, stage_search.h).
 *
 * LAYER CLUSTERING
 *
 * The DP is cubic in the number of layers, so a 126-layer model is first cut
 * into at most K clusters of consecutive layers with as equal weights (e.g.
 * FLOPs) as possible: the partition minimising Σ w_c², itself a small DP.
 * Identical layers form equal clusters, so the planning time stops depending
 * on depth.
 *
 * Units: seconds, bytes per GPU, GPUs.
 */
#ifndef LOOM_STAGE_DP_H
#define LOOM_STAGE_DP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"

#define LOOM_STAGE_MAX 512        /* stages in one solution, and layers in one DP */
#define LOOM_STAGE_MAX_MESHES 64  /* sub-mesh shapes in one DP */

/* ---- sub-meshes ------------------------------------------------------------ */

/* A physical sub-mesh: `nodes` nodes × `gpus` GPUs per node (nodes > 1 only
 * with gpus = the cluster's GPUs per node). */
typedef struct {
    int64_t nodes, gpus;
} loom_submesh;

static inline int64_t loom_submesh_devices(loom_submesh m) { return m.nodes * m.gpus; }

/* Alpa's sub-mesh shapes for a replica of `devices` GPUs on nodes of
 * gpus_per_node: (1, 2^k) for 2^k dividing gpus_per_node and ≤ devices, then
 * (1, gpus_per_node) and (n, gpus_per_node) for n = 2 .. devices / gpus_per_node.
 * When max_nodes > 0, only n ≤ max_nodes whole-node shapes. Fills out[0..cap)
 * in increasing size; returns how many there are (may exceed cap). */
int32_t loom_stage_submeshes(int64_t gpus_per_node, int64_t devices, int64_t max_nodes,
                             loom_submesh *out, int32_t cap);

/* Logical mesh shapes (n0, n1), n0 · n1 = the sub-mesh's GPUs, with axis 1
 * inside a node where it fits: n1 ranges over the powers of two dividing the
 * sub-mesh's GPUs per node, plus the whole sub-mesh as one axis (n0 = 1).
 * Writes pairs into out[2*i], out[2*i+1]; returns the count (may exceed cap). */
int32_t loom_stage_logical_meshes(loom_submesh m, int64_t (*out)[2], int32_t cap);

/* Assigns GPU ids to stages: stage i gets a sub-mesh of shape meshes[i]
 * inside the first `devices` GPUs (devices a multiple of gpus_per_node, or a
 * power of two below it). first_gpu[i] is the stage's first global GPU id; its
 * GPUs are first_gpu[i] + node*gpus_per_node + k for node < nodes, k < gpus.
 * Fails (LOOM_ERR_INVALID) if the shapes do not tile the devices. */
loom_status loom_stage_place(const loom_submesh *meshes, int32_t n, int64_t gpus_per_node,
                             int64_t devices, int64_t *first_gpu, loom_error *err);

/* ---- clustering -------------------------------------------------------------- */

/* Cuts weights[0..n) into k = min(n, max_clusters) contiguous clusters
 * minimising Σ (cluster weight)², i.e. as even as possible. Writes the first
 * layer of each cluster into first[0..k) and first[k] = n; returns k. */
int32_t loom_stage_cluster(const double *weights, int32_t n, int32_t max_clusters,
                           int32_t *first);

/* ---- the DP -------------------------------------------------------------------- */

/* Optional buffers reused across solves (a search solves thousands of small
 * DPs). Not thread-safe: one per thread. */
typedef struct loom_stage_workspace loom_stage_workspace;
loom_status loom_stage_workspace_create(loom_stage_workspace **out, loom_error *err);
void loom_stage_workspace_destroy(loom_stage_workspace *w);

/* One (layer, sub-mesh, option) entry of the stage cost table. An option that
 * does not exist (the ILP found no strategy, the shape does not divide) has
 * time_s = INFINITY. */
typedef struct {
    double time_s;          /* per micro-batch: fwd+bwd (training) or fwd (inference) */
    int64_t static_bytes;   /* per GPU, resident whatever the schedule */
    int64_t act_bytes;      /* per GPU, per micro-batch in flight */
} loom_stage_cost;

typedef struct {
    int32_t n_layers;               /* L ≤ LOOM_STAGE_MAX */
    int32_t n_meshes;               /* ≤ LOOM_STAGE_MAX_MESHES */
    int32_t n_options;              /* options per (layer, mesh) */
    const int64_t *mesh_devices;    /* [n_meshes] GPUs of each sub-mesh */
    const loom_stage_cost *cost;    /* [(layer * n_meshes + mesh) * n_options + option] */
    const int64_t *stage_bytes;     /* [mesh * n_options + option]: bytes added once per
                                       stage (e.g. recompute's working set); NULL = none */
    int64_t devices;                /* D: the stages use exactly this many GPUs */
    int64_t micro_batches;          /* M ≥ 1 */
    int64_t capacity_bytes;         /* per GPU, for static + in-flight activations */
    bool one_in_flight;             /* inference: every stage holds 1 micro-batch */
    int32_t max_stages;             /* 0 = up to min(L, D / gcd) */
    double tmax_rel_gap;            /* 0 = exact; e.g. 0.005 skips near-equal bounds */
    const volatile sig_atomic_t *stop;   /* optional: non-zero asks to stop (Ctrl-C) */
    loom_stage_workspace *ws;       /* optional: buffers kept between solves */
} loom_stage_problem;

typedef struct {
    int32_t first, last;    /* layers, inclusive */
    int32_t mesh, option;
    int64_t in_flight;      /* micro-batches whose activations it holds */
    double time_s;
    int64_t mem_bytes;      /* once + static + in_flight · act */
} loom_stage_choice;

typedef struct {
    int32_t n_stages;
    loom_stage_choice stages[LOOM_STAGE_MAX];
    double step_s;          /* Σ t_i + (M - 1) · max t_i */
    double sum_s, max_s;
    int64_t tmax_candidates;    /* distinct stage times */
    int64_t dp_runs;            /* F evaluations (one per t_max tried) */
    bool stopped;               /* *stop was raised: the best found so far */
} loom_stage_solution;

/* Solves the problem exactly (tmax_rel_gap = 0). LOOM_ERR_INFEASIBLE when no
 * partition fits in memory; LOOM_ERR_INVALID for a malformed problem. */
loom_status loom_stage_dp_solve(const loom_stage_problem *p, loom_stage_solution *out,
                                loom_error *err);

/* The least, over every partition and sub-mesh assignment using exactly D
 * GPUs, of the largest per-GPU memory of its stages (each stage with its
 * least-memory option): what "cannot fit" reports. INT64_MAX if no partition
 * exists at all. */
int64_t loom_stage_dp_min_memory(const loom_stage_problem *p);

/* Memory and time of layers [first, last] on (mesh, option) with `in_flight`
 * micro-batches: the quantities the DP uses, for callers and tests. */
void loom_stage_range_cost(const loom_stage_problem *p, int32_t first, int32_t last,
                           int32_t mesh, int32_t option, int64_t in_flight, double *time_s,
                           int64_t *mem_bytes);

#endif
