/*
 * plan_run.h — planning end to end: a problem in, a plan out (docs/design.md §6–7).
 *
 * loom_plan_run opens the model file (once: the search builds its graphs
 * from the parsed source, graph/model.h) and loads the cluster (and the calibration and
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
#include "solver/problem.h"
#include "solver/stage_search.h"

typedef struct {
    loom_problem problem;          /* what to plan (solver/problem.h). problem.model may
                                      be NULL: model_path is then opened, once; problem.cm
                                      is made by loom_plan_run from the cluster below */
    loom_search_options search;    /* how (stage_search.h) */
    const char *model_path;        /* HF config.json or loom graph (when problem.model is NULL) */
    const char *model_label;       /* inputs.model in the plan (NULL: the model's file) */
    const char *cluster;           /* preset name or loom-cluster/1 file */
    const char *calib_path;        /* NULL: the device's defaults */
    const char *profile_db_path;   /* NULL: roofline only */
    const char *profile_requests_path;   /* write the profile requests here (NULL: no) */
    double memory_headroom;        /* HBM to leave free (cluster.h); < 0: the cluster's */
} loom_plan_request;

/* loom_problem_init's problem with gbs 256 and seq 4096, and the search's
 * default options (full space, ZeRO automatic); everything else empty. */
void loom_plan_request_init(loom_plan_request *r);

/* What a run can tell besides the plan: why it failed, or the runners-up
 * (may be NULL). */
typedef struct {
    int32_t n_top;                 /* the best distinct configurations (search.top) */
    loom_search_top top[LOOM_SEARCH_TOP_MAX];
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

/* Assembles configuration cfg of search s (graph g built for cfg->mbs,
 * ev = loom_search_eval of it) into a plan: inputs from req, per-op specs,
 * GPU ids, memory and the prediction; validated before it is returned. */
loom_status loom_plan_from_config(loom_search *s, const loom_graph *g,
                                  const loom_search_config *cfg,
                                  const loom_search_eval_result *ev,
                                  const loom_plan_request *req, loom_plan **out,
                                  loom_error *err);

#endif
