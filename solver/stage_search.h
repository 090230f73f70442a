/*
 * stage_search.h — the Alpa planner end to end on real costs: stage DP
 * (stage_dp.h) over cost tables from the intra-op ILP (intra.h), searched
 * over micro-batch size, data-parallel replication of the whole pipeline,
 * the uniform-stage and interleaved variants, for training or inference
 * (docs/design.md §6).
 *
 * THE SEARCH
 *
 * A cluster of G GPUs runs `dp` identical pipeline replicas of D = G / dp
 * GPUs each (fewer GPUs in all when the objective is cost or energy). Each
 * replica processes gbs / dp sequences per step as M micro-batches of b
 * sequences. For every (D, b) and every ZeRO stage on offer (below) the
 * search
 *   1. builds the graph for a micro-batch of b sequences and asks the ILP for
 *      each layer's best strategies on every logical mesh of every sub-mesh
 *      shape that fits in D (one solve per distinct layer and mesh, cached);
 *   2. forms the stage cost table: per layer cluster, sub-mesh and option
 *      (logical mesh × strategy space × recompute none/full, and selective
 *      with unfused attention, see below):
 *      time per micro-batch including
 *      the gradient synchronisation amortised over M, resident bytes
 *      (weights, gradients, Adam state under the ZeRO stage, or weights and
 *      KV cache for inference) and activation bytes per micro-batch;
 *   3. runs the stage DP: the general one (every sub-mesh shape up to
 *      general_max_gpus GPUs) for replicas of at most general_max_gpus
 *      GPUs, the uniform one (one sub-mesh shape for all stages: up to a
 *      node, or 2, 4, 8, … nodes, or the whole replica) for all replicas,
 *      over layer clusters; plus Megatron's own splits on every uniform
 *      sub-mesh, unclustered: blocks even over the stages, or first and
 *      last stage lighter by up to two blocks (a layout), with 1F1B and
 *      with interleaving at every depth v = 2..8 chunks per rank (M a
 *      multiple of pp). Without these a clustered DP cannot form, e.g.,
 *      15 stages of 7 of GPT-530B's 105 layers;
 *   4. evaluates each resulting configuration exactly (loom_search_eval:
 *      stage ranges re-solved as ranges, memory per pipeline rank — all its
 *      chunks when interleaving — with fragmentation and workspace, 1F1B or
 *      interleaved step with p2p, exposed gradient sync and optimizer,
 *      costs/pipeline.h) and keeps the best by the objective.
 *
 * Strategy spaces. The ILP minimises time and knows nothing of memory, so
 * on its own it replicates weights whenever that is faster; the memory that
 * costs is only seen by the DP. Each mesh therefore offers several options:
 * the ILP's optimum over all strategies, and its optimum over Megatron's
 * space (tensor parallelism with sequence parallelism on axis 1; axis 0
 * data parallel, or — training, fused attention, the sequence in 2·n0
 * chunks — context parallel: every op on its rank's chunk of the sequence,
 * ring attention), which shards weights like Megatron does. Megatron's
 * spaces price TP communication overlap (--tp-comm-overlap) wherever the
 * mesh has a TP axis: each collective then adds max(0, comm - GEMM) <= comm,
 * so over the same strategies it is never slower, and the variant without
 * it is not searched (--no-tp-comm-overlap leaves it out). The DP picks per
 * stage the fastest option that fits.
 *
 * Data parallelism is one group. A weight replicated along mesh axes that
 * split the batch, the sequence or the expert tokens (in Megatron's spaces
 * axis 0 only: its axis 1 is tensor parallel) is a data-parallel copy: its
 * gradient is reduced, and ZeRO shards its state, over those copies times
 * the pipeline replicas in ONE group (loom_search_dp_group), as Megatron's
 * data-parallel group spans dp × cp ranks — not in the mesh first and
 * across replicas after, which priced a context-parallel stage's sync
 * several times over (Llama-3-70B on 1,024 H100s: 0.79 s of exposed sync
 * instead of 0.12 s) and kept its optimizer state unsharded. Because the DP's estimate can rank options
 * differently from the exact step, every candidate a Megatron-only search
 * evaluates (one DP per Megatron option on a uniform sub-mesh, Megatron's
 * splits weighed over Megatron options only) the full space evaluates too,
 * besides its own: the full space contains the Megatron space by
 * construction, and its plan is never the worse one.
 *
 * Why per-layer costs add up: the ILP solves each distinct layer once per
 * mesh with a periodic boundary (intra.h), so a stage's cost is the sum over
 * its layers; only the resharding where layers of different kinds meet
 * (embedding → first block) is left out of the table and put back by the
 * exact evaluation.
 *
 * THE MODELS BEHIND THE NUMBERS
 *
 * Full recompute keeps a block's input only (its bytes on one GPU under the
 * chosen spec) and reruns the block's forward in its backward: each op's
 * forward compute, forward collectives and the forward resharding of its
 * inputs (loom_intra_op_cost); its working set is one block's
 * activations, paid once per stage.
 *
 * Partial recompute (Megatron's --recompute-method block
 * --recompute-num-layers N, loom eval's --recompute-layers N): only the
 * first N blocks of each pipeline rank rerun, the rest keep everything.
 * Each block more only costs time, so the candidate is the fewest blocks
 * that fit: Megatron's splits with 1F1B (interleaving would count N per
 * chunk in Megatron and per rank in loom eval, so it is left out) take,
 * on each option, the largest over ranks of the fewest blocks whose
 * recompute lets the rank fit by the table estimate (one N for the whole
 * model, as Megatron sets it), and when that estimate wins, exact
 * evaluations walk N down while it still fits or up, to full recompute,
 * until it does. Selective recompute (the attention core's ops rerun,
 * their s x t tensors not kept, as loom eval prices it) is a third option
 * beside none and full with unfused attention; with fused attention
 * (Megatron's default, and loom's) it reruns and frees nothing, so it is
 * the same plan as none and is not searched.
 *
 * GPU layout. Like Megatron's rank order (tensor, data, then pipeline
 * parallel outermost), the copies of one stage in all dp replicas sit side
 * by side — a block of dp × (stage GPUs), replica r at offset r × (stage
 * GPUs) — so that the gradient sync, the largest transfer of a step, stays
 * inside nodes where it can; stage-to-stage transfers, which are small,
 * cross nodes instead. When those blocks cannot tile the cluster (dp not a
 * power of two) replicas are consecutive blocks of D GPUs instead.
 *
 * Data-parallel replicas synchronise each stage's gradients as eval.c does,
 * under the configuration's ZeRO stage: an all-reduce of fp32 gradients
 * (ZeRO-0); with ZeRO-1/2 reduce-scatter of gradients plus all-gather of
 * weights once per step; with ZeRO-3 two weight all-gathers (forward,
 * backward) and a gradient reduce-scatter per micro-batch, hidden behind
 * all of the step's compute up to the calibrated overlap; over dp ranks at
 * the stage's replica stride. The gradient reduction inside a stage's mesh
 * comes from the ILP. ZeRO-1 (Megatron's distributed optimizer) is the
 * default; unless the options fix the stage, the search also tries
 * ZeRO-2 (gradients sharded) and ZeRO-3 (weights too) over the replicas —
 * for one-stage replicas only, since pipelines do not combine with them
 * (DeepSpeed; loom_parallel_check) — and keeps them where they make a plan
 * fit or faster. ZeRO-0 is never better than ZeRO-1 and is not tried.
 *
 * Inference plans one decode step: the graph is built with one new token
 * per sequence (seq 1) and b sequences per micro-batch; each attention layer
 * also streams its KV cache (2 · kv_heads · head_dim · bytes · context per
 * sequence, split like the attention's K input; with multi-head latent
 * attention the latent, kv_lora_rank + qk_rope_head_dim numbers per token,
 * split only with the batch, costs/memory.h) through HBM; every stage
 * holds the weights and the KV cache of all gbs / dp sequences of its
 * replica. A token of one sequence takes latency = max(Σ t_i + (S-1) · p2p,
 * M · max t_i); the replica produces gbs / dp tokens per latency.
 *
 * NVLink domains larger than a board. On a cluster whose nodes (NVLink
 * domains) have a power-of-two tile (cluster.h: 64 of GB200 NVL72's 72
 * GPUs) every point above is searched twice: on all the GPUs, whose
 * domains of 72 = 8 · 9 hold tensor- and expert-parallel groups of up to 8
 * GPUs (2^k heads and experts), and on the tile view, the tile of every
 * domain with the rest idle, whose sub-meshes of 16 and 32 GPUs and whole
 * tiles of 64 hold groups of 16, 32 and 64 on NVLink. Each layout is an
 * ordinary cluster to the code below (sub-meshes aligned to their size
 * never straddle a node, so never a domain); the configuration says which
 * one it runs on (loom_search_config.tiled), and the result keeps the best
 * of the other layout too, so a plan can say what the tile bought or what
 * it would have cost. Mixed tilings of one domain (64 + 8, 32 + 32 + 8)
 * are left out: the stage DP counts GPUs, not which domain they are in,
 * so it would accept stages of 64 + 64 + 16 on two domains that cannot hold
 * them (docs/design.md §6).
 *
 * Objectives: time (step), cost (step × GPUs × price), energy (step × GPUs
 * × power: GPUs are counted at full power for the whole step), latency
 * (per token), throughput (tokens/s: concurrent sequences up to gbs, the
 * largest throughput whose latency meets latency_bound_s).
 *
 * Units: seconds, bytes per GPU, sequences.
 */
#ifndef LOOM_STAGE_SEARCH_H
#define LOOM_STAGE_SEARCH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include "costs/compute.h"
#include "costs/parallel.h"
#include "costs/pipeline.h"
#include "costs/profile_db.h"
#include "graph/model.h"
#include "solver/intra.h"
#include "solver/problem.h"
#include "solver/stage_dp.h"

/* How to search (the problem, what to plan, is a loom_problem). */
typedef struct {
    bool megatron_only;            /* --space megatron: uniform stages, Megatron strategies */
    double time_limit_s;           /* whole search (0 = none): once a plan has been found,
                                      the best so far when reached */
    double ilp_time_limit_s;       /* per ILP solve (0 = intra's default) */
    int64_t max_work;              /* whole search (0 = none): configurations evaluated +
                                      ILP solves; once a plan has been found, the best so
                                      far when reached. Unlike time_limit_s it gives the
                                      same plan on every machine, loaded or not */
    int32_t max_clusters;          /* layer clusters for the DP (default 24) */
    int64_t max_micro_batch;       /* largest micro-batch tried (default 8) */
    int64_t general_max_gpus;      /* replicas up to this size get the general DP (16) */
    int zero;                      /* ZeRO stage over replicas; -1 = the search picks
                                      (1 with replicas; 2 or 3 for one-stage ones) */
    bool no_recompute;             /* do not consider full recompute */
    bool no_tp_comm_overlap;       /* Megatron's spaces without --tp-comm-overlap */
    bool no_context_parallel;      /* no Megatron context-parallel space */
    /* Pins (0 = searched): tensor-parallel size (every stage's logical mesh
     * axis 1), pipeline ranks, replicas, micro-batch, chunks per rank. A
     * pinned pp or vpp leaves only uniform stages. */
    int64_t pin_tp, pin_pp, pin_dp, pin_mbs, pin_vpp;
    int64_t pin_cp;                /* Megatron context-parallel size (0 = searched; 1 = none;
                                      > 1: every stage in Megatron's context-parallel space) */
    int64_t pin_ep;                /* expert-parallel size of every stage with experts (0 =
                                      searched; a MoE model's stages then in Megatron's spaces,
                                      experts split over axis 0 × the replicas the group spans,
                                      or for 1 split nowhere; a dense model takes 1 only) */
    int64_t pin_etp;               /* expert tensor-parallel size of a MoE model's stages (0 =
                                      searched; 1 = Megatron's spaces with the experts over the
                                      TP ranks, or TP 1; t = TP t, the experts' f split t ways) */
    int32_t top;                   /* runners-up kept in the result (0/1: the best only) */
    bool collect_profile_keys;     /* gather loom_search_profile_keys (they cost time) */
    const volatile sig_atomic_t *stop;   /* non-zero: stop and return the best so far (a
                                            signal handler's flag) */
    void (*progress)(void *ctx, double done, const char *what);   /* optional */
    void *progress_ctx;
} loom_search_options;

/* Full space, no time limits, 24 clusters, micro-batches up to 8, the
 * general DP up to 16 GPUs, ZeRO picked by the search, recompute on offer. */
void loom_search_options_init(loom_search_options *o);

/* One stage of a configuration. */
typedef struct {
    int32_t first_layer, last_layer;   /* graph layer slots, inclusive */
    int32_t group;                     /* pipeline rank (interleaving: index mod pp) */
    loom_submesh submesh;
    loom_mesh_shape mesh;              /* logical */
    bool megatron;                     /* strategies from Megatron's space (TP on axis 1,
                                          data parallel on axis 0) rather than the ILP's
                                          unrestricted, usually weight-replicating optimum */
    bool context_parallel;             /* Megatron's space with axis 0 context parallel
                                          (the sequence split, ring attention) */
    bool tp_comm_overlap;              /* Megatron's space with --tp-comm-overlap */
    int64_t ep_span;                   /* Megatron's space: experts split over axis 0 are
                                          split over this many neighbouring replicas too,
                                          one expert-parallel group of n0 · ep_span ranks
                                          (MoE parallel folding; 0 or 1: inside the mesh) */
    int expert_split;                  /* Megatron's space under a pinned EP: 1 = every expert
                                          op splits the experts over axis 0, -1 = none does
                                          (EP 1), 0 = the ILP's choice */
    bool expert_fold;                  /* Megatron's space with expert TP 1: the experts split
                                          over axis 1 too, never their hidden f (strategy.h
                                          expert_fold; --expert-tensor-parallel-size 1) */
    loom_recompute recompute;
    int64_t recompute_blocks;          /* full recompute of only the first this many blocks of
                                          the stage (each virtual chunk counts its own)
                                          (Megatron's --recompute-method block
                                          --recompute-num-layers; loom eval's
                                          --recompute-layers); 0: every block. The same on
                                          every stage of a configuration */
    int64_t first_gpu;                 /* global id of replica 0's first GPU of the stage */
    int64_t replica_stride;            /* replica r runs it on ids + r · stride */
} loom_search_stage;

/* A configuration: what a plan decides globally and per stage. */
typedef struct {
    int64_t mbs, micro_batches, dp, gpus_per_replica, vpp, pp;
    int64_t sequences;                 /* train: gbs; infer: concurrent sequences used */
    int zero;
    bool tiled;                        /* runs on the tile of every NVLink domain (cluster.h:
                                          loom_cluster_tile); GPU ids are the tile view's */
    int32_t n_stages;                  /* pp · vpp */
    loom_search_stage stages[LOOM_STAGE_MAX];
} loom_search_config;

/* Exact evaluation of one stage. */
typedef struct {
    loom_intra_result intra;           /* its layers solved as a range on its mesh (owned) */
    double time_s;                     /* one micro-batch: fwd (+ bwd + recompute), + KV reads */
    double compute_s, comm_s;          /* ILP parts of time_s (recompute and KV added to compute) */
    double bwd_s;                      /* backward share of time_s */
    double grad_sync_s;                /* per step: in-mesh + across replicas, before overlap */
    double grad_sync_unhidden_s;       /* of it, what ZeRO-3's prefetch cannot hide (dp_sync.h) */
    double optimizer_s;
    double in_flight;
    int64_t params;                    /* parameters per GPU */
    /* Memory per GPU of this stage's share of its pipeline rank: a rank
     * holding several chunks (interleaving) books its one recompute working
     * set (mem_work, inside mem_activations) and its one workspace allowance
     * (in mem_other) on its first chunk, so the rank's memory is the sum of
     * its chunks' mem_total (one stage per rank: the stage's memory). */
    int64_t mem_params, mem_grads, mem_optimizer, mem_activations, mem_kv, mem_other, mem_total;
    int64_t mem_work;
    double model_flops;                /* 3 × (train) or 1 × forward matmul FLOPs, one micro-batch */
    double measured_s, total_s;        /* compute resting on the profile db / all compute */
} loom_stage_eval;

#define LOOM_SEARCH_TOP_MAX 32

/* One of the best configurations (loom_search_result.top). */
typedef struct {
    int64_t dp, pp, vpp, mbs, micro_batches, tp, stage_dp;
    int64_t cp;                        /* Megatron context-parallel size (0: mixed) */
    int zero;
    bool megatron;                     /* every stage in Megatron's strategy space */
    bool tp_comm_overlap;              /* every stage with TP communication overlap */
    int32_t recompute_stages;          /* stages with full recompute */
    bool tiled;                        /* on the tile of every NVLink domain */
    double step_s, score;
    int64_t memory_per_gpu_bytes;
} loom_search_top;

typedef struct {
    int32_t n_stages;
    loom_stage_eval *stages;           /* [n_stages], owned */
    double step_s;                     /* train: step; infer: one decode step (= latency) */
    double latency_s;                  /* infer: per token */
    double tokens_per_s;
    loom_step_breakdown breakdown;     /* where step_s goes (costs/pipeline.h) */
    double model_flops;                /* per step, all GPUs */
    int64_t memory_per_gpu_bytes;      /* the largest over pipeline ranks */
    bool fits;                         /* every rank within the GPU's memory */
    double measured_share;             /* of compute time, from the profile db */
    double score;                      /* the objective, lower is better */
    int64_t gpus_used;
} loom_search_eval_result;

typedef struct {
    loom_search_config best;
    loom_search_eval_result eval;      /* of best (owned) */
    const loom_graph *graph;           /* the graph of best.mbs (owned by the search) */
    int64_t configs_evaluated, ilp_solves, dp_runs;
    double time_s;
    bool stopped, timed_out;
    int64_t min_memory_bytes;          /* infeasible: least per-GPU memory any plan needs */
    /* The best distinct configurations, best first (options.top of them):
     * distinct by dp, pp, vpp, mbs, tp, ZeRO, strategy space and recompute. */
    int32_t n_top;
    loom_search_top top[LOOM_SEARCH_TOP_MAX];
    /* On a cluster with NVLink-domain tiles: the best configuration of the
     * layout the best one is not on (all GPUs, or the tile of every
     * domain), and its step and score; have_other false when that layout
     * has no plan or the cluster no tile. */
    bool have_other;
    loom_search_config other;
    double other_step_s, other_score;
    /* On a cluster whose nodes have more than 8 GPUs: the best configuration
     * on the other side of 8 GPUs from the best one's largest tensor- or
     * expert-parallel group (at most 8 when the best has more, and the other
     * way round); have_other_groups false when there is none. */
    bool have_other_groups;
    int64_t largest_group;             /* of best */
    loom_search_config other_groups;
    double other_groups_step_s;
} loom_search_result;

typedef struct loom_search loom_search;

/* Work done so far: configurations evaluated plus distinct ILP solves
 * (the units of max_work). */
int64_t loom_search_work(const loom_search *s);

/* Creates a search of problem p (copied; its model and cost model are
 * borrowed) with options o (NULL: the defaults). Builds no graph yet. */
loom_status loom_search_create(const loom_problem *p, const loom_search_options *o,
                               loom_search **out, loom_error *err);
void loom_search_destroy(loom_search *s);

/* Runs it. LOOM_ERR_INFEASIBLE when nothing fits (result->min_memory_bytes
 * then says how much a GPU would need); the result is owned by the search. */
loom_status loom_search_run(loom_search *s, const loom_search_result **result, loom_error *err);

/* Evaluates one configuration exactly (also for configurations made by
 * other algorithms). The graph must be built for cfg->mbs. */
loom_status loom_search_eval(loom_search *s, const loom_graph *g, const loom_search_config *cfg,
                             loom_search_eval_result *out, loom_error *err);
void loom_search_eval_free(loom_search_eval_result *r);

/* Lays cfg's stages out on a cluster of gpus_per_node-GPU nodes (see "GPU
 * layout" above): with dp > 1 replicas, each pipeline rank gets a block
 * holding its sub-mesh in all replicas (replica_stride = the sub-mesh's
 * GPUs; first_gpu = the block's first id) when those blocks tile the
 * cluster; otherwise replicas are consecutive blocks of gpus_per_replica
 * GPUs (replica_stride = gpus_per_replica, first_gpu left as given). On
 * entry first_gpu must hold each stage's offset inside replica 0. */
void loom_search_layout(int64_t gpus_per_node, loom_search_config *cfg);

/* The graph for micro-batch b (built on first use, owned by the search). */
loom_status loom_search_graph(loom_search *s, int64_t b, const loom_graph **out, loom_error *err);

/* The problem the search solves. */
const loom_problem *loom_search_problem(const loom_search *s);

/* The cluster configuration cfg runs on: the problem's, or its tile view
 * when cfg->tiled (a value the search owns). */
const loom_cluster *loom_search_cluster(const loom_search *s, const loom_search_config *cfg);

/* The distinct (op, dtype, shard shape) keys of the strategies the search
 * chose on every mesh it tabled: the profile requests of
 * `--emit-profile-requests` (only with options.collect_profile_keys; none
 * otherwise). *keys is owned by the search. */
void loom_search_profile_keys(const loom_search *s, const loom_profile_key **keys, int32_t *n);

#endif
