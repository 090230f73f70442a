/*
 * serve_plan.h — the serving deployment planner: `loom plan --mode serve`
 * (docs/design.md §12).
 *
 * Given a model, a cluster, a workload (prompt and output lengths, and a
 * load: a request rate, a number of clients, or none) and SLOs (TTFT and
 * TPOT bounds met by a share of requests), it searches aggregated and
 * prefill/decode-disaggregated deployments (serve_deploy.h) for the best
 * under one objective:
 *   goodput     the highest Poisson request rate at which at least the SLO
 *               share of requests meets both bounds, per GPU;
 *   throughput  output tokens/s: of the given clients on the cluster (per
 *               GPU of the cluster), or per GPU of the deployment at
 *               the highest rate whose mean TTFT and TPOT meet the bounds;
 *   latency     the lowest mean end-to-end latency at the given load (one
 *               client when none is given), within the SLOs;
 *   gpus        capacity planning: the fewest GPUs that serve the given
 *               rate within the SLOs.
 * Aggregated deployments fill the cluster with replicas, disaggregated ones
 * with the pool sizes whose rates balance best (serve_search.c), except
 * under `gpus`, which sizes them to the rate. With both kinds allowed, a
 * disaggregated deployment is chosen only when it beats the best
 * aggregated one by more than LOOM_SERVE_DISAGG_MARGIN of the objective:
 * it runs two pools and a KV-transfer path, and a win within the model's
 * error is no reason to take them on.
 *
 * Two stages, as the cost model has two evaluators: the steady-state
 * estimate ranks every candidate deployment; the best few of each kind are
 * then simulated request by request, and the simulation decides (its
 * figures are the ones reported). The Pareto fronts of output tokens/s per
 * GPU against tokens/s per user (serve_pareto.h) come from the steady-state
 * estimate over each deployment's load range.
 *
 * Units: seconds, requests/s, tokens/s, GPUs.
 */
#ifndef LOOM_SERVE_PLAN_H
#define LOOM_SERVE_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "planner/serve/serve_deploy.h"

#define LOOM_SERVE_OBJECTIVE_LIST(X) \
    X(GOODPUT, "goodput")            \
    X(THROUGHPUT, "throughput")      \
    X(LATENCY, "latency")            \
    X(GPUS, "gpus")

typedef enum {
#define LOOM_X(n, s) LOOM_SERVE_OBJ_##n,
    LOOM_SERVE_OBJECTIVE_LIST(LOOM_X)
#undef LOOM_X
    LOOM_SERVE_OBJ_COUNT
} loom_serve_objective;

const char *loom_serve_objective_name(loom_serve_objective o);

#define LOOM_SERVE_DISAGG_MARGIN 0.05

typedef enum {
    LOOM_DISAGG_AUTO,   /* both kinds; the objective picks */
    LOOM_DISAGG_ON,     /* disaggregated only */
    LOOM_DISAGG_OFF,    /* aggregated only */
} loom_serve_disagg_mode;

const char *loom_serve_disagg_name(loom_serve_disagg_mode m);

typedef struct {
    loom_serve_space_opts space;   /* model, cluster, calibrations, engine, dtypes
                                      (seq_tokens is set from the workload) */
    loom_serve_workload work;      /* lengths and seed; the load: QPS (--qps),
                                      CONCURRENCY (--concurrency) or OFFLINE = none given */
    loom_serve_slo slo;
    loom_serve_objective objective;
    loom_serve_disagg_mode disagg;
    int32_t recheck;               /* deployments of each kind simulated (0: 3) */
} loom_serve_plan_request;

/* One candidate deployment and its figures at the objective's operating
 * point (the load given, or the rate the objective found). */
typedef struct {
    loom_serve_deploy dep;
    loom_serve_point steady;       /* ranking */
    loom_serve_point sim;          /* re-check (sim.simulated: it was simulated) */
    double score;                  /* the objective's value, higher is better */
    bool feasible;                 /* meets the SLOs at the operating point */
} loom_serve_option;

/* A point of a Pareto front: one deployment shape at one concurrency. */
typedef struct {
    double tokens_per_s_gpu, tokens_per_s_user;
    double ttft_s;
    int32_t shape;                 /* aggregated: its shape; disaggregated: the decode shape */
    int32_t prefill_shape;         /* disaggregated: the prefill shape (else -1) */
    double prefill_per_decode;     /* disaggregated: prefill instances per decode instance */
    int64_t concurrency;           /* sequences per (decode) instance */
} loom_serve_front_point;

/* The plan: owned by the handle; arrays live as long as it does. */
typedef struct {
    loom_serve_plan_request req;
    loom_serve_space space;
    loom_serve_ctx ctx;
    loom_serve_load load;          /* the operating load the objective used */
    bool have_best;
    loom_serve_option best;        /* the chosen deployment */
    bool have_kind[2];             /* [0] aggregated, [1] disaggregated */
    loom_serve_option best_kind[2];   /* the best simulated deployment of each kind */
    loom_serve_option *checked;    /* every simulated deployment, best first */
    int32_t n_checked;
    int32_t n_ranked[2];           /* deployments ranked by the steady state, per kind */
    loom_serve_front_point *front[2];
    int32_t n_front[2];
    double time_s;
    char notes[8][320];            /* what the CLI says on stderr: reductions of the ask */
    int32_t n_notes;
} loom_serve_plan;

/* Plans req. LOOM_ERR_INFEASIBLE when no deployment fits or meets the SLOs
 * (the message says what came closest); LOOM_ERR_INVALID for requests that
 * cannot be planned (an objective without what it needs: goodput without
 * an SLO, gpus without a rate). */
loom_status loom_serve_plan_run(const loom_serve_plan_request *req, loom_serve_plan **out,
                                loom_error *err);
void loom_serve_plan_destroy(loom_serve_plan *p);

/* The plan as the text `loom plan --mode serve` prints (malloc'd; NULL
 * when out of memory); model_label names the model (NULL: the graph's name). */
char *loom_serve_plan_text(const loom_serve_plan *p, const char *model_label);

/* The plan's serving section as JSON text (docs/plan-format.md, "Serving
 * plans"); malloc'd, NULL when out of memory. no_timings writes time_s 0. */
char *loom_serve_plan_to_json(const loom_serve_plan *p, const char *model_label, bool no_timings);

#endif
