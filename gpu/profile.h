/*
 * profile.h — the measurement protocol of loom-profile.
 *
 * One op: `warmup` unrecorded forward+backward passes (cuBLASLt algorithm
 * selection, lazy module loading and clocks settle), then `repeats` recorded
 * ones. Each recorded pass is enqueued as
 *     [L2 flush] ev0 push(fwd id) forward pop ev1 [L2 flush] ev2 push(bwd id) backward pop ev3
 * with no host synchronisation in between, so the GPU is never waiting on
 * the CPU inside a window; CUPTI gives each pass's kernel time as the sum of
 * its kernels' durations (kernel_log.h), CUDA events give the wall time of
 * the same window as a cross-check. The entry stores the medians, the spread
 * (p90 - p10) / median (the larger of fwd and bwd), the events' medians, the
 * kernel names and the op's device bytes. The L2 flush (on by default) makes
 * every pass start cold, as an op does inside a real step.
 *
 * Layer check: the ops of one transformer layer run back to back (forward in
 * order, backward in reverse) under one external id per pass; the layer's
 * span (first kernel start to last kernel end) is compared with the sum of
 * the per-op medians measured alone: the composability error. The ops keep
 * their own buffers (outputs are not wired to inputs), so the check measures
 * launch gaps, tails and cache interference between kernels, not data reuse.
 */
#ifndef LOOM_GPU_PROFILE_H
#define LOOM_GPU_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/profile_db.h"
#include "gpu/device.h"
#include "gpu/op_runner.h"

typedef struct {
    int warmup;        /* default 5 */
    int repeats;       /* default 20 */
    bool flush_l2;     /* default true */
    uint64_t seed;     /* input data */
} loom_profile_opts;

void loom_profile_opts_init(loom_profile_opts *o);

/* Measures one key: fills e (key, fwd_ns, bwd_ns, spread, repeats,
 * events_*, peak_bytes, kernels). CUPTI must be started. */
loom_status loom_profile_measure(loom_gpu *g, const loom_profile_key *key,
                                 const loom_profile_opts *o, loom_profile_entry *e,
                                 loom_error *err);
/* The same for an op already created (the layer check reuses its ops). */
loom_status loom_profile_measure_op(loom_gpu *g, loom_gpu_op *op, const loom_profile_key *key,
                                    const loom_profile_opts *o, loom_profile_entry *e,
                                    loom_error *err);

typedef struct {
    double sum_fwd_ns, sum_bwd_ns;          /* Σ of the ops' medians, each run alone */
    double span_fwd_ns, span_bwd_ns;        /* layer pass: first kernel start to last end (median) */
    double busy_fwd_ns, busy_bwd_ns;        /* layer pass: Σ kernel durations (median) */
    double events_fwd_ns, events_bwd_ns;    /* layer pass: CUDA events (median) */
    double error;                           /* (span_fwd + span_bwd) / (sum_fwd + sum_bwd) - 1 */
} loom_layer_check;

/* Runs ops[0..n) (created from keys[0..n)) alone and then as one layer;
 * per[i] receives op i's entry. */
loom_status loom_profile_layer(loom_gpu *g, loom_gpu_op **ops, const loom_profile_key *keys,
                               int n, const loom_profile_opts *o, loom_profile_entry *per,
                               loom_layer_check *out, loom_error *err);

#endif
