/*
 * problem.h — what to plan: the one description of a planning problem that
 * the stage search (stage_search.h), `loom plan` (planner/plan/plan_run.h)
 * and `loom compare` (planner/compare/algo.h) share, and the one objective
 * enum.
 *
 * A problem is a parsed model (graph/model.h: never a path, so nothing
 * below the planner opens a file), the cost model of a cluster, the mode
 * (training or inference), the batch (gbs sequences of seq tokens), the
 * numeric format, the objective and its limit. How to search it (strategy
 * space, largest micro-batch, time limits, clustering) is apart, in the
 * search's options (loom_search_options) — as Alpa keeps its StageOption
 * apart from the computation it plans. Callers embed a loom_problem in their
 * own requests rather than copying its fields.
 *
 * Ownership: the model source and the cost model are borrowed; they must
 * outlive every search made from the problem.
 *
 * Units: seconds, sequences, tokens.
 */
#ifndef LOOM_PROBLEM_H
#define LOOM_PROBLEM_H

#include <stdbool.h>
#include <stdint.h>
#include "base/dtype.h"
#include "costs/compute.h"
#include "graph/model.h"

/* Objectives: training minimises step time, dollars or joules per step
 * (fewer GPUs may then win); inference minimises per-token latency or
 * maximises tokens/s (under latency_bound_s when given). The names are
 * those of plan files and --objective. */
#define LOOM_OBJECTIVE_LIST(X) \
    X(TIME, "time")            \
    X(COST, "cost")            \
    X(ENERGY, "energy")        \
    X(LATENCY, "latency")      \
    X(THROUGHPUT, "throughput")

typedef enum {
#define LOOM_X(n, s) LOOM_OBJ_##n,
    LOOM_OBJECTIVE_LIST(LOOM_X)
#undef LOOM_X
    LOOM_OBJ_COUNT
} loom_objective;

/* "time", "cost", …; "?" out of range. */
const char *loom_problem_objective_name(loom_objective o);
bool loom_problem_objective_parse(const char *s, loom_objective *out);

typedef struct {
    const loom_model_source *model;   /* the parsed model file (borrowed) */
    const loom_cost_model *cm;        /* the cluster and its costs (borrowed) */
    bool inference;                   /* plan a decode step rather than a training step */
    int64_t gbs;                      /* train: sequences per step; infer: concurrent sequences */
    int64_t seq;                      /* train: tokens per sequence; infer: context length */
    loom_dtype dtype;                 /* weights and activations */
    bool flash_attention;
    loom_objective objective;
    double latency_bound_s;           /* throughput objective: per-token latency bound (0 = none) */
} loom_problem;

/* Training, seq 2048, bf16, flash attention, objective time, no bound;
 * model, cm and gbs empty. */
void loom_problem_init(loom_problem *p);

#endif
