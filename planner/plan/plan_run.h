/*
 * plan_run.h — planning end to end: a problem in, a plan out (docs/design.md §6–7).
 *
 * loom_plan_run loads the model and the cluster (and the calibration and
 * profile db when given), builds the cost model, runs the Alpa search
 * (solver/stage_search.h: intra-op ILP + stage DP over micro-batch size and
 * data-parallel replicas) and assembles the winner into a loom_plan with
 * per-op specs, GPU ids and the predicted step, then validates it.
 *
 * loom_plan_from_config does the assembly alone, so any search algorithm
 * that produces a loom_search_config gets the same plan and the same
 * numbers (the comparison tools use this).
 *
 * Units: seconds, bytes, sequences, tokens.
 */
#ifndef LOOM_PLAN_RUN_H
#define LOOM_PLAN_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include "planner/plan/plan.h"
#include "solver/stage_search.h"

typedef struct {
    const char *model_path;        /* HF config.json or loom graph */
    const char *model_label;       /* inputs.model in the plan (NULL: model_path) */
    const char *cluster;           /* preset name or loom-cluster/1 file */
    const char *calib_path;        /* NULL: the device's defaults */
    const char *profile_db_path;   /* NULL: roofline only */
    loom_plan_mode mode;
    loom_plan_objective objective; /* train: time|cost|energy; infer: latency|throughput */
    int64_t gbs;                   /* train: sequences per step; infer: concurrent sequences */
    int64_t seq;                   /* train: tokens per sequence; infer: context length */
    loom_dtype dtype;
    bool flash_attention;
    bool megatron_space;           /* --space megatron */
    double latency_bound_s;        /* infer throughput: per-token bound (0 = none) */
    double time_limit_s;           /* 0 = none */
    int64_t max_micro_batch;       /* 0 = the search's default */
    int zero;                      /* -1 = the search picks (stage_search.h) */
    bool no_recompute;
    const char *profile_requests_path;   /* write the profile requests here (NULL: no) */
    const volatile int *stop;      /* Ctrl-C: stop and plan with the best so far */
    void (*progress)(void *ctx, double done, const char *what);
    void *progress_ctx;
} loom_plan_request;

/* mode train, objective time, gbs 256, seq 4096, bf16, flash, full space,
 * zero automatic; everything else empty. */
void loom_plan_request_init(loom_plan_request *r);

/* What a failed run can tell (may be NULL). */
typedef struct {
    int64_t min_memory_bytes;      /* infeasible: least per-GPU memory any plan needs (0 = unknown) */
    int64_t gpu_memory_bytes;      /* the GPU's capacity */
    int64_t gpus;                  /* the cluster's GPUs */
    int64_t gpus_per_node;
    char gpu[48];
} loom_plan_diag;

/* Plans req. LOOM_ERR_INFEASIBLE when nothing fits (diag says how much
 * memory a GPU would need); LOOM_ERR_LIMIT when stopped before any plan was
 * found. A stopped search that has a plan returns it with
 * search_status "stopped". */
loom_status loom_plan_run(const loom_plan_request *req, loom_plan **out, loom_plan_diag *diag,
                          loom_error *err);

/* The search's objective for a plan objective (time, cost, energy,
 * latency, throughput map one to one). */
loom_search_objective loom_plan_search_objective(loom_plan_objective o);

/* Assembles configuration cfg of search s (graph g built for cfg->mbs,
 * ev = loom_search_eval of it) into a plan: inputs from req, per-op specs,
 * GPU ids, memory and the prediction; validated before it is returned. */
loom_status loom_plan_from_config(loom_search *s, const loom_graph *g,
                                  const loom_search_config *cfg,
                                  const loom_search_eval_result *ev,
                                  const loom_plan_request *req, loom_plan **out,
                                  loom_error *err);

#endif
