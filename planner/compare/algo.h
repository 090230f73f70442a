/*
 * algo.h — search algorithms for parallel plans behind one interface and
 * ONE evaluator, so that `loom compare` compares them on equal terms
 * (docs/design.md §9).
 *
 * THE PROBLEM. A loom_algo_request embeds the planner's loom_problem
 * (solver/problem.h): a parsed model, a cost model (cluster, calibration,
 * profile db), the batch (gbs sequences of seq tokens), the mode (train /
 * infer) and the objective; plus the comparison's own budgets. An algorithm searches for a
 * configuration — the stage-level decisions of a plan: data-parallel
 * replicas, micro-batch size and count, pipeline stages with their layer
 * ranges, sub-meshes and logical meshes, strategy space, recompute, ZeRO,
 * interleaving — written as a loom_search_config (solver/stage_search.h),
 * the same value the Alpa planner produces.
 *
 * THE EVALUATOR, AND WHY THE COMPARISON IS FAIR. Every configuration any
 * algorithm looks at, and the one it returns, is scored by loom_algo_eval,
 * which is loom_search_eval (solver/stage_eval.c): each stage's layers are
 * solved on its logical mesh by the intra-op ILP (restricted to Megatron's
 * strategies when the stage says so), compute comes from
 * loom_cost_op_time, collectives from loom_group_collective_time_s, memory
 * from costs/memory.h and the step from loom_pipeline_step. The Alpa
 * planner scores its own candidates with that very function. So:
 *   - a Megatron-style point (grid, genetic, random, rules, pp-only) is
 *     turned into the configuration Megatron-LM would run (mspace.h) and
 *     scored like an Alpa plan — not by a second model such as
 *     loom_eval_megatron;
 *   - an algorithm never reports its own number: loom_algo_run re-scores
 *     the configuration it returns on a fresh evaluator (the test suite
 *     checks that this reproduces Alpa's own prediction);
 *   - every run starts from cold caches (graphs, ILP solutions), so the
 *     search times compare too.
 * loom_search_eval takes what it prices from the configuration (ZeRO
 * stage, interleaving, layout), so one instance scores every algorithm's
 * configurations; memory is per pipeline rank (all its chunks).
 *
 * What the shared evaluator cannot express is left out of every space
 * alike: expert parallelism over the pipeline replicas (only over a
 * stage's mesh axis) and selective recompute. Megatron's context
 * parallelism (a stage mesh (cp, tp)) and TP communication overlap are in.
 *
 * BUDGETS, IN WORK. max_work caps each algorithm run in units of work:
 * configurations evaluated plus distinct ILP solves (an ILP solve is the
 * expensive part of a first evaluation on a mesh; later ones hit the
 * cache). It is polled between evaluations (the Alpa planner gets what is
 * left as its loom_search_options.max_work); an algorithm that reaches it
 * returns its best so far with timed_out set. Work, unlike time, is the
 * same on every machine, loaded or not, so a comparison is reproducible
 * byte for byte. budget_s is a wall-clock cap on top, for a user who asks
 * for one (0 = none, the default): results under it depend on the machine.
 * Sampling algorithms (random, genetic) also stop after max_evals
 * evaluations.
 *
 * ADDING AN ALGORITHM: docs/adding-an-algorithm.md.
 *
 * Units: seconds, bytes per GPU.
 */
#ifndef LOOM_COMPARE_ALGO_H
#define LOOM_COMPARE_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "costs/compute.h"
#include "graph/model.h"
#include "solver/problem.h"
#include "solver/stage_search.h"

typedef struct {
    loom_problem problem;          /* what to plan (solver/problem.h) */
    double budget_s;               /* wall-clock cap per algorithm run (0 = none): only as
                                      an explicit user limit, results then depend on the
                                      machine */
    int64_t max_work;              /* evaluations + ILP solves per algorithm run (0 = none) */
    int64_t max_evals;             /* random / genetic: evaluations (default 48) */
    uint64_t seed;                 /* random / genetic (default 1) */
    int64_t max_micro_batch;       /* largest micro-batch any algorithm tries (default 8) */
} loom_algo_request;

/* loom_problem_init's problem; no budgets, 48 evaluations, seed 1,
 * micro-batches up to 8. */
void loom_algo_request_init(loom_algo_request *r);

/* A configuration's score under the shared evaluator. */
typedef struct {
    bool valid;                    /* the evaluator could price it (strategies exist) */
    bool mem_ok;                   /* every GPU within its HBM */
    bool fits;                     /* mem_ok, and within the latency bound (throughput) */
    double score;                  /* the objective, lower is better (INFINITY if !valid) */
    double step_s;                 /* train: step; infer: latency per token */
    double tokens_per_s;
    double mfu;                    /* model FLOPs / (step · GPUs · dense peak); train only */
    int64_t memory_per_gpu_bytes;  /* largest pipeline rank (all its chunks) */
    int64_t gpus_used;
} loom_algo_score;

/* One algorithm run: the evaluator (cold caches), the evaluation counter
 * and the clock. Opaque. */
typedef struct loom_algo_ctx loom_algo_ctx;

/* What an algorithm returns (filled through loom_algo_offer). */
typedef struct {
    bool found;                    /* some configuration was evaluated */
    loom_search_config config;     /* the best: feasible before infeasible, then by score,
                                      infeasible ones by memory; first found wins ties */
    loom_algo_score score;         /* of config, as loom_algo_run re-scored it */
    int64_t evals;                 /* configurations evaluated */
    int64_t space;                 /* size of the space it searched (0 = not enumerable) */
    double time_s;                 /* wall time of the search */
    bool timed_out;                /* max_work (or budget_s) ran out first */
    int64_t min_memory_bytes;      /* nothing fit: least memory per GPU seen (0 = unknown) */
} loom_algo_result;

typedef struct {
    const char *name;              /* "grid", "alpa", … (lower case, no spaces) */
    const char *summary;           /* one line for --help and reports */
    loom_status (*run)(loom_algo_ctx *ctx, loom_algo_result *out, loom_error *err);
} loom_algo;

/* ---- the registry ----------------------------------------------------------------- */

extern const loom_algo loom_algo_alpa;           /* algo_alpa.c */
extern const loom_algo loom_algo_alpa_megatron;  /* algo_alpa.c */
extern const loom_algo loom_algo_grid;           /* algo_grid.c */
extern const loom_algo loom_algo_genetic;        /* algo_genetic.c */
extern const loom_algo loom_algo_random;         /* algo_random.c */
extern const loom_algo loom_algo_rules;          /* algo_rules.c */
extern const loom_algo loom_algo_greedy;         /* algo_greedy.c */
extern const loom_algo loom_algo_pp_only;        /* algo_pp_only.c (worked example) */

size_t loom_algo_count(void);
const loom_algo *loom_algo_at(size_t i);
/* By name; NULL if unknown. */
const loom_algo *loom_algo_find(const char *name);
/* "alpa, alpa-megatron, grid, …" for messages. */
const char *loom_algo_names(void);

/* ---- running one ------------------------------------------------------------------- */

/* Runs algorithm a on the problem with a fresh context, times it and
 * re-scores its answer. An algorithm that finds nothing returns LOOM_OK
 * with out->found false; errors are for broken inputs (model, cluster). */
loom_status loom_algo_run(const loom_algo *a, const loom_algo_request *req, loom_algo_result *out,
                          loom_error *err);

/* ---- for algorithms ------------------------------------------------------------------ */

/* The search options (stage_search.h) of a run: what the evaluator's
 * instances and the alpa algorithms are created with, with req->problem. */
void loom_algo_search_options(const loom_algo_request *req, loom_search_options *out);

loom_status loom_algo_ctx_create(const loom_algo_request *req, loom_algo_ctx **out,
                                 loom_error *err);
void loom_algo_ctx_destroy(loom_algo_ctx *c);

const loom_algo_request *loom_algo_ctx_request(const loom_algo_ctx *c);
const loom_cluster *loom_algo_ctx_cluster(const loom_algo_ctx *c);
/* The graph for micro-batch b (built on first use; b = 1 is always there). */
loom_status loom_algo_ctx_graph(loom_algo_ctx *c, int64_t b, const loom_graph **out,
                                loom_error *err);
/* Layer slots of the model and its transformer blocks (loom_memory_is_block). */
int32_t loom_algo_ctx_layers(const loom_algo_ctx *c);
int32_t loom_algo_ctx_blocks(const loom_algo_ctx *c);
/* [layers]: whether each layer slot is a transformer block. */
const bool *loom_algo_ctx_block_mask(const loom_algo_ctx *c);

/* Scores cfg with the shared evaluator and counts one evaluation. A
 * configuration the evaluator cannot price (no strategy for a stage, ILP
 * limit) is scored !valid rather than failing; malformed configurations
 * (layers not covered in order, GPU counts that do not add up) are
 * LOOM_ERR_INVALID. */
loom_status loom_algo_eval(loom_algo_ctx *c, const loom_search_config *cfg, loom_algo_score *out,
                           loom_error *err);
int64_t loom_algo_ctx_evals(const loom_algo_ctx *c);
/* Work so far (max_work's units): evaluations plus the evaluator's ILP
 * solves. */
int64_t loom_algo_ctx_work(const loom_algo_ctx *c);

/* True once max_work or budget_s is spent (sets the context's timed-out
 * flag). */
bool loom_algo_ctx_stop(loom_algo_ctx *c);
/* Seconds left of the budget (INFINITY when there is none). */
double loom_algo_ctx_remaining_s(const loom_algo_ctx *c);

/* Deterministic pseudo-random numbers (splitmix64, Steele et al. 2014):
 * the next value of *state, and a value in [0, n) (n >= 1). */
uint64_t loom_algo_rand(uint64_t *state);
int64_t loom_algo_rand_below(uint64_t *state, int64_t n);

/* Is score a better than b? Feasible beats infeasible, then lower score.
 * Among infeasible ones, a plan that fits in memory but misses the latency
 * bound beats one that does not fit, and compares by latency; plans that
 * do not fit compare by memory. */
bool loom_algo_better(const loom_algo_score *a, const loom_algo_score *b);
/* Keeps (cfg, score) in out when it is better than out's best. */
void loom_algo_offer(loom_algo_result *out, const loom_search_config *cfg,
                     const loom_algo_score *score);

#endif
