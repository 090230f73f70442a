/*
 * compare.h — `loom compare`: several search algorithms (planner/compare/algo.h)
 * over a suite of (model, cluster, batch) cases, scored by one evaluator,
 * reported as markdown, CSV, JSON and an SVG chart (docs/design.md §9).
 *
 * Suite (docs/compare.md): "loom-suite/1" JSON, a name and a list of cases
 * {name, model, cluster, gbs, seq, mode, objective, dtype,
 * latency_bound_ms}, with optional "defaults" for the last six. Models and
 * clusters are bundled names (examples/models, examples/clusters), preset
 * names (dgx-h100-x16) or paths relative to the suite file.
 *
 * Report: per case, per algorithm, the predicted step time (training) or
 * per-token latency (inference), the objective's score and its gap to the
 * best plan any algorithm found for that case (score / best - 1, among the
 * plans that fit), whether it fits and its memory per GPU, the search's
 * wall time and evaluations, and a one-line description of the plan.
 * "loom-compare/1" JSON holds all of it and is what shards write and
 * `loom compare-merge` reads back; markdown and CSV are derived from the
 * same data, so a merged report is byte-identical to an unsharded one
 * (with --no-timings, every run of the same suite is).
 *
 * Units: seconds, bytes per GPU.
 */
#ifndef LOOM_COMPARE_H
#define LOOM_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "graph/graph.h"
#include "planner/plan/plan.h"
#include "planner/compare/algo.h"

#define LOOM_SUITE_FORMAT "loom-suite/1"
#define LOOM_COMPARE_FORMAT "loom-compare/1"
#define LOOM_COMPARE_NAME_MAX 64
#define LOOM_COMPARE_PATH_MAX 1024
#define LOOM_COMPARE_MAX_ALGOS 16

/* ---- the suite ------------------------------------------------------------------------ */

typedef struct {
    int32_t index;                            /* position in the suite */
    char name[LOOM_COMPARE_NAME_MAX];
    char model[LOOM_COMPARE_PATH_MAX];        /* as written */
    char cluster[LOOM_COMPARE_PATH_MAX];
    char model_path[LOOM_COMPARE_PATH_MAX];   /* resolved */
    char cluster_path[LOOM_COMPARE_PATH_MAX]; /* a preset name or a file */
    loom_plan_mode mode;
    loom_objective objective;
    int64_t gbs, seq;
    loom_dtype dtype;
    double latency_bound_s;                   /* infer throughput (0 = none) */
} loom_compare_case;

typedef struct {
    char name[LOOM_COMPARE_NAME_MAX];
    int32_t n_cases;
    loom_compare_case *cases;
} loom_compare_suite;

/* Reads a suite; errors name the file and the JSON path (unknown keys,
 * duplicate case names, a model or cluster that cannot be found). */
loom_status loom_compare_suite_read(const char *path, loom_compare_suite *out, loom_error *err);
void loom_compare_suite_free(loom_compare_suite *s);

/* ---- results ------------------------------------------------------------------------------ */

typedef enum {
    LOOM_CMP_OK,        /* a plan that fits */
    LOOM_CMP_NO_FIT,    /* its best plan does not fit in memory */
    LOOM_CMP_OVER_BOUND,/* its best plan fits but misses the latency bound */
    LOOM_CMP_NONE,      /* it found no plan at all (nothing fits / stopped) */
    LOOM_CMP_STATUS_COUNT
} loom_compare_status;

/* "ok", "no-fit", "over-bound", "none" */
const char *loom_compare_status_name(loom_compare_status s);
bool loom_compare_status_parse(const char *s, loom_compare_status *out);

typedef struct {
    char algorithm[32];
    loom_compare_status status;
    double step_s;                 /* train: step; infer: latency per token (0 if none) */
    double score;                  /* the objective (0 if none) */
    double gap;                    /* score / best - 1; NAN when it does not fit */
    int64_t memory_per_gpu_bytes;  /* of its plan; none: least any plan it saw needs (0 unknown) */
    double mfu;                    /* train */
    double tokens_per_s;
    double search_s;               /* 0 with --no-timings */
    int64_t evals;
    int64_t space;                 /* points in its space (0: not enumerable) */
    bool timed_out;                /* the budget cut it short */
    char plan[160];                /* "dp8 pp4 v2 / 1x4m / mbs1 x64 / zero1" */
} loom_compare_row;

typedef struct {
    int32_t index;
    char name[LOOM_COMPARE_NAME_MAX];
    char model[LOOM_COMPARE_PATH_MAX], cluster[LOOM_COMPARE_PATH_MAX];
    int64_t gpus;
    char gpu[48];
    loom_plan_mode mode;
    loom_objective objective;
    int64_t gbs, seq;
    loom_dtype dtype;
    int32_t n_rows;
    loom_compare_row *rows;        /* one per algorithm, in the report's order */
} loom_compare_case_result;

typedef struct {
    char suite[LOOM_COMPARE_NAME_MAX];
    int32_t suite_cases;           /* cases in the suite (all shards) */
    double budget_s;               /* wall-clock cap per algorithm and case (0 = none) */
    int64_t max_work;              /* evaluations + ILP solves per algorithm and case (0 = none) */
    int64_t max_evals;
    uint64_t seed;
    bool timings;                  /* false: --no-timings (search times written as 0) */
    int32_t n_algos;
    char algos[LOOM_COMPARE_MAX_ALGOS][32];
    int32_t shard_k, shard_n;      /* this report holds cases index % n == k (n = 1: all) */
    int32_t n_cases;
    loom_compare_case_result *cases;   /* by ascending index */
} loom_compare_report;

/* Empty report for the suite, the given algorithms and settings. */
loom_status loom_compare_report_init(loom_compare_report *r, const loom_compare_suite *s,
                                     const char *const *algos, int n_algos, double budget_s,
                                     int64_t max_work, int64_t max_evals, uint64_t seed, bool timings,
                                     int32_t shard_k, int32_t shard_n, loom_error *err);
void loom_compare_report_free(loom_compare_report *r);

/* Runs every algorithm of r on case c and appends the case's results
 * (gaps filled). Errors: the case's model or cluster cannot be loaded, or
 * an algorithm failed on valid input. */
loom_status loom_compare_run_case(loom_compare_report *r, const loom_compare_case *c,
                                  loom_error *err);

/* Fills every row's gap from its case's best fitting score. */
void loom_compare_gaps(loom_compare_report *r);

/* A one-line description of a configuration (the `plan` column). */
void loom_compare_describe(const loom_search_config *cfg, char *buf, size_t n);

/* ---- output (compare_report.c, compare_json.c) --------------------------------------------- */

/* Heap strings ending in '\n'; NULL when out of memory. Same report, same bytes. */
char *loom_compare_markdown(const loom_compare_report *r);
char *loom_compare_csv(const loom_compare_report *r);
char *loom_compare_json(const loom_compare_report *r);
/* Gap (log scale) against search time (log scale; evaluations when the
 * report has no timings), one point per case and algorithm. */
char *loom_compare_svg(const loom_compare_report *r);

/* Reads a loom-compare/1 file (path-named errors). */
loom_status loom_compare_read(const char *path, loom_compare_report *out, loom_error *err);

/* Joins shard reports of one suite run into one: same suite, algorithms and
 * settings, no case twice, every case of the suite present. parts are left
 * untouched. `names` label the parts in messages. */
loom_status loom_compare_merge(const loom_compare_report *parts, const char *const *names, int n,
                               loom_compare_report *out, loom_error *err);

#endif
