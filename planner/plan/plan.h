/*
 * plan.h — a placement plan: the answer `loom plan` gives (docs/design.md §7).
 *
 * A plan says, for one model on one cluster, how every layer is placed:
 * which pipeline stage holds it, on which GPUs, on what logical device mesh,
 * and — per op — which sharding strategy and operand specs it uses; plus the
 * schedule (micro-batches, data-parallel replicas) and what the cost model
 * predicts for it (step time with its breakdown, throughput, MFU, memory per
 * GPU per stage, cost and energy when the cluster gives prices and power).
 *
 * The value is a transparent struct (tests build plans with designated
 * initialisers; exporters read the fields) with heap arrays for the stages,
 * their GPU ids and ops, created and freed through the functions below.
 * On disk it is "loom-plan/1" JSON (plan_json.c; schema in
 * docs/plan-format.md); loom_plan_check validates either.
 *
 * GPU numbering: global id = node · gpus_per_node + local GPU. A plan on
 * the tile of every NVLink domain (costs/cluster.h: 64 of GB200 NVL72's
 * 72 GPUs) numbers the GPUs it uses: gpus_per_node is the tile, and
 * idle_gpus_per_node the domain's others, which it leaves idle. Stage GPU
 * lists are those of data-parallel replica 0; replica r runs the same stage
 * on ids + r · replica_stride. The planner puts a stage's copies side by
 * side (stride = the stage's GPUs, Megatron's tensor-data-pipeline rank
 * order) so gradient syncs stay inside nodes, or replicas one after the
 * other (stride = gpus_per_replica) when those blocks do not tile.
 *
 * Layers are the graph's layer slots: for HF models 0 = embedding,
 * 1..L = transformer blocks, L+1 = final norm, head and loss (and, for
 * DeepSeek in training, the multi-token-prediction layers: graph/hf_build.c).
 *
 * Interleaved schedules (virtual_stages v > 1) list pp · v stages in layer
 * order; stage i runs on pipeline rank `group` = i mod pp, and stages of the
 * same group share their GPUs.
 *
 * Units: seconds, bytes per GPU, FLOP/s, US dollars, joules.
 */
#ifndef LOOM_PLAN_H
#define LOOM_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "costs/parallel.h"
#include "costs/pipeline.h"
#include "base/error.h"
#include "graph/graph.h"
#include "solver/problem.h"
#include "solver/spec.h"

#define LOOM_PLAN_FORMAT "loom-plan/1"
#define LOOM_PLAN_SPEC_MAX 192
#define LOOM_PLAN_STRATEGY_MAX 96
#define LOOM_PLAN_TEXT_MAX 256

typedef enum { LOOM_PLAN_TRAIN, LOOM_PLAN_INFER } loom_plan_mode;

const char *loom_plan_mode_name(loom_plan_mode m);   /* "train", "infer" */
bool loom_plan_mode_parse(const char *s, loom_plan_mode *out);

/* One op of a stage: its strategy and the specs of its operands in dim names
 * ("b@0 s h@1": dim h split over mesh axis 1; "@01" both axes; a plain name
 * is replicated). Several inputs (or weights) are joined with ", ". */
typedef struct {
    char name[LOOM_NAME_MAX];        /* HF module path */
    int32_t layer;
    char strategy[LOOM_PLAN_STRATEGY_MAX];
    char input[LOOM_PLAN_SPEC_MAX];
    char weight[LOOM_PLAN_SPEC_MAX];  /* "" for ops without weights */
    char output[LOOM_PLAN_SPEC_MAX];
} loom_plan_op;

typedef struct {
    int64_t params, grads, optimizer, activations, kv_cache, other;
    int64_t total;                   /* the sum of the six */
} loom_plan_memory;

typedef struct {
    int32_t index;
    int32_t group;                   /* pipeline rank holding it (= index without interleaving) */
    int32_t first_layer, last_layer; /* inclusive */
    int64_t submesh_nodes, submesh_gpus;   /* physical: nodes × GPUs per node */
    int64_t mesh[2];                 /* logical mesh (n0, n1), n0 · n1 = GPUs */
    int64_t n_gpus;
    int64_t *gpus;                   /* [n_gpus] global ids, replica 0 */
    int64_t replica_stride;          /* replica r: gpus[k] + r · replica_stride */
    int64_t tensor_parallel;         /* GPUs a dense weight is split over (its axes' product) */
    int64_t context_parallel;        /* GPUs the sequence is split over outside TP (CP) */
    int64_t data_parallel;           /* in-stage replicas: n_gpus / (tensor · context parallel) */
    int64_t expert_parallel;         /* GPUs the experts are split over (1: none) */
    int64_t ep_span;                 /* the expert-parallel group spans this many neighbouring
                                        replicas of the stage (Megatron-Core's MoE parallel
                                        folding: EP over CP × DP ranks); 0 or 1: the mesh */
    bool sequence_parallel;          /* activations split along s on the TP axis (Megatron SP) */
    bool tp_comm_overlap;            /* TP collectives overlapped with their GEMMs (Megatron's
                                        --tp-comm-overlap; needs SP and TP > 1) */
    loom_recompute recompute;
    int64_t recompute_layers;        /* full recompute of only the first this many blocks of
                                        the stage's pipeline rank (Megatron's
                                        --recompute-method block --recompute-num-layers);
                                        0: every block */
    int zero;                        /* ZeRO stage across the data-parallel replicas */
    double in_flight;                /* micro-batches whose activations it holds */
    double compute_s, comm_s;        /* one micro-batch, fwd (+ bwd) */
    double grad_sync_s;              /* per step, over all its data-parallel ranks */
    double time_s;                   /* per micro-batch as the schedule uses it */
    loom_plan_memory memory;         /* per GPU: this stage's share of its rank's GPUs (with
                                        interleaving the rank's workspace allowance and
                                        recompute working set sit on its first chunk) */
    int32_t n_ops;
    loom_plan_op *ops;               /* [n_ops], layer order */
} loom_plan_stage;

/* Another plan the search found, as the plan's account of an NVLink domain
 * larger than 8 GPUs quotes it (gpus 0: none). */
typedef struct {
    int64_t gpus;                    /* the GPUs it runs on */
    double step_time_s;              /* its step (inference: its decode step) */
    int64_t tensor_parallel, expert_parallel;   /* its largest groups */
} loom_plan_alternative;

/* The inputs a plan can have taken from loom's shared defaults (the CLI's
 * LOOM_CLI_DEFAULT_*) rather than from the user, as "assumed" names them. */
#define LOOM_PLAN_ASSUMED_SEQ  1u
#define LOOM_PLAN_ASSUMED_GBS  2u
#define LOOM_PLAN_ASSUMED_ZERO 4u

typedef struct {
    /* inputs */
    char model[LOOM_PLAN_TEXT_MAX];       /* as given: path or bundled name */
    char cluster[64];
    loom_plan_mode mode;
    int64_t gbs;                          /* training: sequences per step; inference:
                                             concurrent sequences */
    int64_t seq;
    loom_dtype dtype;
    loom_objective objective;
    char space[16];                       /* "full" | "megatron" */
    double latency_bound_s;               /* inference throughput bound (0 = none) */
    unsigned assumed;                     /* LOOM_PLAN_ASSUMED_*: inputs loom's defaults
                                             chose, not the user (0: all given) */

    /* model shape and the cluster, for exporters and the validator */
    loom_model_info model_info;
    int64_t model_params;
    int32_t layer_count;                  /* layer slots of the graph */
    int64_t nodes, gpus_per_node;
    int64_t idle_gpus_per_node;           /* on NVLink-domain tiles: the rest of each domain */
    char gpu[48];
    int64_t gpu_memory_bytes;
    double gpu_peak_flops;                /* dense, in the plan's dtype */
    double price_per_gpu_hour_usd, power_w;

    /* schedule */
    char schedule_kind[16];               /* "1f1b" | "interleaved" | "inference" */
    int64_t micro_batch, micro_batches;
    int64_t virtual_stages;               /* v */
    int64_t pipeline_stages;              /* pipeline ranks pp (= n_stages / v) */
    int64_t data_parallel;                /* replicas of the whole pipeline */
    int64_t gpus_per_replica;

    int32_t n_stages;
    loom_plan_stage *stages;

    /* predicted */
    double step_time_s;                   /* training: one step; inference: one decode step */
    double tokens_per_s;
    double latency_per_token_s;           /* inference (0 for training) */
    double model_tflops_per_gpu;
    double mfu;
    int64_t memory_per_gpu_bytes;         /* the largest stage */
    loom_step_breakdown breakdown;        /* costs/pipeline.h */
    double cost_per_step_usd, cost_per_mtoken_usd;   /* -1 when the cluster has no price */
    double energy_per_step_j, energy_per_token_j;    /* -1 when it has no power figure */
    double measured_share;                /* of predicted compute from the profile db */
    /* Nodes (NVLink domains) of more than 8 GPUs: the best plan on the other
     * side of 8 GPUs from this plan's largest tensor- or expert-parallel
     * group; and where the domains have a power-of-two tile
     * (costs/cluster.h), the best plan of the other layout: all the GPUs
     * when this plan runs on the tiles, the tiles when it runs on all. */
    loom_plan_alternative nvlink_groups_alt, nvlink_layout_alt;

    /* search */
    char algorithm[32];
    double search_time_s;
    int64_t ilp_solves;
    int64_t dp_runs;
    int64_t configs_evaluated;
    char search_status[32];               /* "optimal" | "feasible" | "stopped" */
} loom_plan;

/* An empty plan (all counts zero, dtype bf16, objective time). */
loom_status loom_plan_create(loom_plan **out, loom_error *err);
void loom_plan_destroy(loom_plan *p);

/* Sets the stage count (previous stages freed); stages start zeroed with
 * index i and group i, context and expert parallel 1. */
loom_status loom_plan_set_stages(loom_plan *p, int32_t n, loom_error *err);
/* Gives stage s room for n GPU ids / n ops (zeroed). */
loom_status loom_plan_stage_set_gpus(loom_plan_stage *s, int64_t n, loom_error *err);
loom_status loom_plan_stage_set_ops(loom_plan_stage *s, int32_t n, loom_error *err);

/* Sum of a memory breakdown into its total. */
void loom_plan_memory_sum(loom_plan_memory *m);

/* Bytes per GPU of pipeline rank `rank`: the sum of its stages' (chunks')
 * memory totals. */
int64_t loom_plan_rank_memory(const loom_plan *p, int32_t rank);

/* Transformer blocks in stage s (its layers minus embedding/head slots). */
int64_t loom_plan_stage_blocks(const loom_plan *p, const loom_plan_stage *s);

/* ---- roles and labels (plan_roles.c) ------------------------------------------------ */

/* What one mesh axis of a stage does: tensor, context (sequence), expert or
 * data parallelism; NONE for an axis of one GPU. */
typedef enum { LOOM_AXIS_NONE, LOOM_AXIS_TP, LOOM_AXIS_CP, LOOM_AXIS_EP, LOOM_AXIS_DP } loom_plan_axis_role;

typedef struct {
    loom_plan_axis_role axis[2];     /* per mesh axis; TP on both: 2-D tensor parallelism */
    int64_t tp, cp, dp;              /* degrees: tp · cp · dp = the stage's GPUs */
    int64_t ep;                      /* GPUs the expert weights split e over (1: none) */
    int64_t etp;                     /* GPUs the expert weights split their hidden f over (the
                                        experts' TP; 0: no expert weight, or none to read) */
} loom_plan_roles;

/* "tp", "cp", "ep", "dp", "-". */
const char *loom_plan_axis_role_name(loom_plan_axis_role r);

/* The roles of stage s's mesh axes, read off its ops' specs (the rule is in
 * plan_roles.c; exports, tables and pictures all use it). A stage with no
 * weighted op keeps its tensor_/context_/expert_parallel fields. */
void loom_plan_stage_roles(const loom_plan_stage *s, loom_plan_roles *r);

/* The roles as one label in mesh order: "cp32 x tp4", "dp2 x tp4",
 * "tp2x2" (2-D), "ep8", "no split" (every axis of one GPU). */
void loom_plan_roles_label(const loom_plan_roles *r, const int64_t mesh[2], char *dst, size_t cap);

/* Layer slots first..last in the model's own numbering: for HF models
 * "emb+0-4", "5-9", "120-125+head" (block k is model.layers.k); for other
 * graphs the slots themselves. */
void loom_plan_layers_label(const loom_plan *p, int32_t first, int32_t last, char *dst,
                            size_t cap);

/* ---- text (plan_text.c) ----------------------------------------------------------- */

/* The summary table `loom plan` prints: inputs, schedule, prediction, one
 * row per stage (layers in the model's numbering, parallelism by role),
 * the search. Heap string; NULL when out of memory. */
char *loom_plan_table(const loom_plan *p);

/* ---- JSON (plan_json.c) ---------------------------------------------------------- */

enum {
    LOOM_PLAN_JSON_NO_TIMINGS = 1,   /* write search.time_s as 0: byte-identical reruns */
    LOOM_PLAN_JSON_NO_OPS = 2,       /* omit per-op specs (summaries) */
};

/* The text of n operand specs as a plan holds them: each in dim names
 * (loom_spec_format of spec i on tensor ts[i]: "b@0 s h@1"), joined with
 * ", " into dst; what does not fit in cap is left out. The one place the
 * solver's typed specs become plan text. */
void loom_plan_specs_format(const loom_spec *specs, const loom_tensor *const *ts, int n,
                            char *dst, size_t cap);

/* The plan as loom-plan/1 JSON text (heap, ends in '\n'); NULL when out of
 * memory. Same plan, same flags → same bytes. */
char *loom_plan_to_json(const loom_plan *p, int flags);
/* Writes it atomically to path ("-" = stdout). */
loom_status loom_plan_write(const loom_plan *p, const char *path, int flags, loom_error *err);

/* Reads a loom-plan/1 file; errors name the file and the JSON path. The
 * plan is validated (loom_plan_check) before it is returned. */
loom_status loom_plan_read(const char *path, loom_plan **out, loom_error *err);
loom_status loom_plan_parse(const char *file, const char *text, size_t len, loom_plan **out,
                            loom_error *err);

/* ---- validation (plan_check.c) --------------------------------------------------- */

/* Checks that the plan is one a cluster can run: every layer 0..layer_count-1
 * in exactly one stage, in order; each stage's GPU ids distinct and inside
 * the cluster in every replica, the count matching its sub-mesh and logical
 * mesh, one node per sub-node sub-mesh; different pipeline ranks and
 * replicas on disjoint GPUs, every rank of every replica placed;
 * memory within the GPU's capacity and its parts summing up; degrees
 * consistent (tp · dp = GPUs of the stage, micro_batch · micro_batches ·
 * data_parallel = gbs for training, stages = pp · v, replicas fit in the
 * cluster); every op inside its stage's layers. `where` (e.g. the file name)
 * prefixes messages, which give the JSON path of the offending field. */
loom_status loom_plan_check(const loom_plan *p, const char *where, loom_error *err);

/* ---- SVG (plan_svg.c) -------------------------------------------------------------- */

/* An SVG picture of the plan: where it runs (the cluster's GPUs coloured by
 * pipeline rank, or on large clusters replica 0 in full and a summary of
 * the rest; a legend naming each rank's layers and parallelism as the table
 * does) and the schedule the step model costs (1F1B, interleaved with v
 * chunks, or forward-only decode), drawn to the predicted step time.
 * Heap string, deterministic. */
char *loom_plan_svg(const loom_plan *p);
loom_status loom_plan_svg_write(const loom_plan *p, const char *path, loom_error *err);

#endif
