/*
 * sim.h — a request-level discrete-event simulator of one engine instance
 * (docs/design.md §11 "Workload → metrics"), after Vidur (Agrawal et al.,
 * MLSys'24): requests arrive (Poisson, closed-loop clients or all at once),
 * wait, are admitted when the engine's caps and KV blocks allow, prefill in
 * chunks under the iteration's token budget, decode one token per iteration
 * and leave; a decode that finds no free KV block preempts the most recently
 * admitted sequence, which later recomputes its prompt and the tokens it had
 * produced (vLLM's recompute preemption; SGLang's retraction). Each
 * iteration's time is loom_serve_iter_time of the batch the policy formed
 * (step.h), so the simulator and the steady-state estimate (steady.h) share
 * one cost model and differ only in how they aggregate it.
 *
 * Replicas share the load evenly (vLLM's and SGLang's data-parallel routers
 * balance requests): one replica is simulated with 1/replicas of the rate,
 * clients and requests, and throughputs are scaled back.
 *
 * Cost: O(total output tokens + iterations · log) time, O(requests) memory;
 * 10,000 requests run in well under a second (bench/serve_sim_speed.c).
 *
 * Units: seconds, tokens.
 */
#ifndef LOOM_SERVE_SIM_H
#define LOOM_SERVE_SIM_H

#include <stdint.h>
#include "costs/serve/step.h"
#include "costs/serve/workload.h"

#define LOOM_SERVE_TIMELINE_MAX 512

typedef struct {
    loom_serve_metrics m;
    int64_t iterations;
    /* KV utilisation over time: n_timeline samples (t_s, share of blocks in
     * use), evenly thinned to at most LOOM_SERVE_TIMELINE_MAX */
    int32_t n_timeline;
    double timeline_t_s[LOOM_SERVE_TIMELINE_MAX];
    double timeline_kv[LOOM_SERVE_TIMELINE_MAX];
} loom_serve_sim_result;

/* Simulates workload w on model m. Errors: the workload's checks
 * (workload.h), a request that can never fit the KV cache (its prompt and
 * output exceed the capacity), out of memory. */
/* Mean and linear-interpolated p50/p90/p99 of v[0..n), as the simulator
 * reports them; sorts v. */
loom_serve_dist loom_serve_dist_of(double *v, int64_t n);

loom_status loom_serve_simulate(const loom_serve_model *m, const loom_serve_workload *w,
                                loom_serve_sim_result *out, loom_error *err);

/* Per-request times of the simulated replica, for SLO attainment (the share
 * of requests meeting both a TTFT and a TPOT bound needs each request's pair,
 * not the percentiles). Entry i is the replica's request i in arrival order. */
typedef struct {
    double *ttft_s, *tpot_s;   /* caller's arrays of cap entries */
    int64_t cap;
    int64_t n;                 /* set by the call: entries written, min(cap, requests) */
} loom_serve_sim_record;

/* loom_serve_simulate that also fills rec (may be NULL). */
loom_status loom_serve_simulate_record(const loom_serve_model *m, const loom_serve_workload *w,
                                       loom_serve_sim_record *rec, loom_serve_sim_result *out,
                                       loom_error *err);

#endif
