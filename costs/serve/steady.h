/*
 * steady.h — the fast steady-state estimate of an engine instance under a
 * workload: closed forms over the iteration time (step.h), for search
 * (docs/design.md §11). It answers the same metrics as the simulator
 * (sim.h), means only — percentiles are set to the mean — in a few dozen
 * iteration-time evaluations, with no allocation: a deployment search can
 * call it for every candidate. The formulas are in steady.c.
 *
 * Units: seconds, tokens/s, requests/s.
 */
#ifndef LOOM_SERVE_STEADY_H
#define LOOM_SERVE_STEADY_H

#include "costs/serve/step.h"
#include "costs/serve/workload.h"

typedef struct {
    loom_serve_metrics m;
    double batch;              /* running sequences in steady state (per replica) */
    double batch_max;          /* the most the caps, the KV cache and the budget allow */
    double round_s;            /* one decode round at that batch, prefill amortised */
    double capacity_rps;       /* requests/s the deployment sustains at batch_max */
} loom_serve_steady_result;

/* The steady-state estimate of workload w on model m. Errors: the
 * workload's checks (workload.h); a request larger than the KV cache. */
loom_status loom_serve_steady(const loom_serve_model *m, const loom_serve_workload *w,
                              loom_serve_steady_result *out, loom_error *err);

#endif
