/*
 * serve_deploy.h — a serving deployment and what it delivers at a load
 * (docs/design.md §12).
 *
 * A deployment is either
 *   aggregated      r replicas of one instance shape, each running prefill
 *                   and decode (continuous batching with chunked prefill);
 *   disaggregated   a prefill pool of n_p instances of one shape and a
 *                   decode pool of n_d instances of another (DistServe,
 *                   Zhong et al., OSDI'24; Splitwise, Patel et al.,
 *                   ISCA'24): a request prefills in the first, its prompt's
 *                   KV cache moves to the second, which decodes.
 * The load is shared evenly over the instances of a pool (the engines'
 * routers balance requests).
 *
 * KV transfer. A request's cache is isl · kv_bytes_per_token bytes (the
 * whole model's: every layer, every KV head once). Each GPU of the prefill
 * instance sends its shard in parallel to the decode instance, so the
 * transfer runs over min(g_p, g_d) links of the kind that joins the pools:
 * NVLink when the whole deployment sits in one node, the NIC otherwise:
 *     t_x = latency + bytes / (min(g_p, g_d) · link bandwidth)
 * plus an M/D/1 wait ρ/(2(1 − ρ)) · t_x at the prefill instance's send
 * load ρ = λ_p · t_x (the link is saturated at ρ → 1).
 *
 * Two evaluators, as for one instance (costs/serve/): the steady-state
 * estimate (means, for ranking every candidate) and the request-level
 * simulator (percentiles and SLO attainment, which decides). A
 * disaggregated deployment is simulated as one prefill instance (each
 * request's output is its first token) and one decode instance whose
 * requests arrive with the prompt cached (workload prompt_cached), both
 * with the same seeded lengths; request i of one is paired with request i
 * of the other: TTFT_i = TTFT_prefill,i + t_x + TTFT_decode,i (the client
 * sees the decode instance's stream, as vLLM's and SGLang's P/D proxies
 * serve it), TPOT_i = TPOT_decode,i. The pools' queues are thereby taken
 * as independent. A concurrency load of C clients on a disaggregated
 * deployment is run as the request rate it reaches, λ with λ · E2E(λ) = C
 * (Little's law on the steady-state estimate), with Poisson arrivals.
 *
 * Units: seconds, requests/s, tokens/s, bytes.
 */
#ifndef LOOM_SERVE_DEPLOY_H
#define LOOM_SERVE_DEPLOY_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "costs/serve/steady.h"
#include "costs/serve/workload.h"
#include "planner/serve/serve_space.h"

/* Service-level objectives: bounds on TTFT and TPOT, and the share of
 * requests that must meet both. */
typedef struct {
    double ttft_s, tpot_s;   /* 0 = no bound */
    double attainment;       /* in (0, 1]; 0.9 by default */
} loom_serve_slo;

typedef struct {
    bool disagg;
    int32_t agg;                  /* aggregated: the shape (index into the space) */
    int64_t replicas;
    int32_t prefill, decode;      /* disaggregated: the pools' shapes */
    int64_t n_prefill, n_decode;  /* instances per pool */
    bool kv_nvlink;               /* the KV transfer stays inside a node */
    double kv_bytes;              /* per request */
    double kv_transfer_s;         /* per request, on an idle link */
    double kv_link_Bps;           /* the transfer's bandwidth (all its links) */
    int64_t gpus;
} loom_serve_deploy;

/* A load: a Poisson rate or closed-loop clients, over the whole deployment. */
typedef struct {
    loom_load_kind kind;          /* LOOM_LOAD_QPS or LOOM_LOAD_CONCURRENCY */
    double rate;
    int64_t concurrency;
} loom_serve_load;

/* What a deployment delivers at a load. */
typedef struct {
    double rate_rps;              /* requests/s arriving (concurrency: the rate reached) */
    int64_t concurrency;          /* the clients, for a concurrency load (else 0) */
    loom_serve_dist ttft, tpot, e2e;
    double output_tokens_per_s;   /* whole deployment */
    double attainment;            /* share meeting both SLOs; steady: 1 when the means do */
    double mean_running;          /* sequences decoding per (decode) instance */
    bool saturated;               /* the load exceeds what the deployment sustains */
    bool simulated;
} loom_serve_point;

/* What the evaluators share: the space, its options, the lengths of the
 * workload (its load is ignored) and the SLOs. */
typedef struct {
    const loom_serve_space *space;
    const loom_serve_space_opts *opts;
    loom_serve_workload work;
    loom_serve_slo slo;
    double kv_bytes_per_token;    /* the whole model's KV of one token */
    int32_t sims;                 /* simulations run (counted here) */
} loom_serve_ctx;

/* Fills ctx->kv_bytes_per_token from the model's tp-1 shape. */
loom_status loom_serve_ctx_init(loom_serve_ctx *ctx, loom_error *err);

/* Sets gpus and the KV transfer of d from its shapes and counts. */
void loom_serve_deploy_finish(const loom_serve_ctx *ctx, loom_serve_deploy *d);

/* The steady-state estimate of d at load l (means; percentiles = means). */
loom_status loom_serve_deploy_steady(const loom_serve_ctx *ctx, const loom_serve_deploy *d,
                                     const loom_serve_load *l, loom_serve_point *out,
                                     loom_error *err);

/* The simulation of d at load l, with each request's SLO check. */
loom_status loom_serve_deploy_simulate(loom_serve_ctx *ctx, const loom_serve_deploy *d,
                                       const loom_serve_load *l, loom_serve_point *out,
                                       loom_error *err);

/* What one instance does in a deployment. */
typedef enum {
    LOOM_SERVE_ROLE_AGG,       /* prefill and decode */
    LOOM_SERVE_ROLE_PREFILL,   /* prompts only: each request's output is its first token */
    LOOM_SERVE_ROLE_DECODE,    /* requests arrive with the prompt cached */
} loom_serve_role;

/* The steady state of one instance of shape i in role r at `rate`
 * requests/s (Poisson), with its capacity (steady.h). */
loom_status loom_serve_role_steady(const loom_serve_ctx *ctx, int32_t i, loom_serve_role role,
                                   double rate, loom_serve_steady_result *st, loom_error *err);
/* The same under `clients` closed-loop clients. */
loom_status loom_serve_role_steady_clients(const loom_serve_ctx *ctx, int32_t i,
                                           loom_serve_role role, int64_t clients,
                                           loom_serve_steady_result *st, loom_error *err);

/* Whether a point meets the SLOs: by the means (steady) or by attainment. */
bool loom_serve_point_meets_means(const loom_serve_slo *slo, const loom_serve_point *p);
bool loom_serve_point_meets(const loom_serve_slo *slo, const loom_serve_point *p);

/* "4 × (tp 2)" or "prefill 3 × (tp 4) + decode 1 × (tp 8)". */
void loom_serve_deploy_label(const loom_serve_ctx *ctx, const loom_serve_deploy *d, char *buf,
                             size_t n);

#endif
