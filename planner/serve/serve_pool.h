/*
 * serve_pool.h — what one instance shape can carry in each role under the
 * SLOs, by the steady-state estimate (docs/design.md §12). The deployment
 * search forms pools from these figures without evaluating every pool
 * size: a deployment of n instances carries n times an instance's rate.
 *
 *   aggregated  the highest Poisson rate at which the mean TTFT and the mean
 *               TPOT meet their bounds and the instance keeps up;
 *   prefill     its mean TTFT at rising rates (a table up to 95% of its
 *               capacity): the pairing with a decode pool subtracts the KV
 *               transfer and the decode's first iteration from the TTFT
 *               bound and reads the rate that fits the rest;
 *   decode      the highest rate at which the mean TPOT meets its bound,
 *               and the TTFT (admission wait and first iteration) there.
 * The rate searches are bisections on the rate (TTFT and TPOT grow with it).
 *
 * Units: requests/s per instance, seconds.
 */
#ifndef LOOM_SERVE_POOL_H
#define LOOM_SERVE_POOL_H

#include "planner/serve/serve_deploy.h"

#define LOOM_SERVE_PREFILL_TABLE 20

typedef struct {
    double agg_cap_rps;       /* the most requests/s an aggregated instance sustains */
    double agg_rate_rps;      /* the highest rate whose means meet the SLOs (0: none) */
    double agg_batch_max;     /* sequences it can run at once (caps, KV, budget) */
    double prefill_cap_rps;
    double prefill_rate_rps[LOOM_SERVE_PREFILL_TABLE];
    double prefill_ttft_s[LOOM_SERVE_PREFILL_TABLE];
    double decode_cap_rps;
    double decode_rate_rps;   /* the highest rate whose mean TPOT meets its bound (0: none) */
    double decode_ttft_s;     /* a decode instance's own TTFT at that rate */
    double decode_batch_max;
} loom_serve_pool_stats;

/* The figures of shape i. Errors: the steady state's (workload checks). */
loom_status loom_serve_pool_stats_compute(const loom_serve_ctx *ctx, int32_t i,
                                          loom_serve_pool_stats *out, loom_error *err);

/* The highest rate of one prefill instance whose mean TTFT is at most
 * budget_s (interpolated in the table); 0 when even the lowest misses it. */
double loom_serve_prefill_rate_within(const loom_serve_pool_stats *s, double budget_s);

#endif
