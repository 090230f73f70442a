/*
 * profile.c — warm-up, repeats, CUPTI sums, medians and spread; the layer
 * check (see profile.h for the protocol).
 *
 * External ids: pass r of a measurement uses 2r+1 (forward) and 2r+2
 * (backward); the log is cleared before each measurement, so ids restart.
 * Warm-up passes push no id and are ignored by the log.
 */
#include "gpu/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cupti_timer.h"
#include "gpu/kernel_log.h"

#define MAX_REPEATS 1000

void loom_profile_opts_init(loom_profile_opts *o)
{
    o->warmup = 5;
    o->repeats = 20;
    o->flush_l2 = true;
    o->seed = 20240601;
}

typedef loom_status (*pass_fn)(void *ctx, loom_error *err);

/* Enqueues one timed window: [flush] ev_a push(ext) pass pop ev_b. */
static loom_status window(loom_gpu *g, const loom_profile_opts *o, uint64_t ext, cudaEvent_t a,
                          cudaEvent_t b, pass_fn fn, void *ctx, loom_error *err)
{
    cudaStream_t st = loom_gpu_stream(g);
    loom_status s;
    if (o->flush_l2 && (s = loom_gpu_flush_l2(g, err))) return s;
    if (a && (s = loom_gpu_check(cudaEventRecord(a, st), "cudaEventRecord", err))) return s;
    if (ext && (s = loom_cupti_push(ext, err))) return s;
    loom_status run = fn(ctx, err);
    if (ext && (s = loom_cupti_pop(err)) && !run) return s;
    if (run) return run;
    if (b && (s = loom_gpu_check(cudaEventRecord(b, st), "cudaEventRecord", err))) return s;
    return LOOM_OK;
}

static loom_status op_fwd(void *op, loom_error *err) { return loom_gpu_op_forward(op, err); }
static loom_status op_bwd(void *op, loom_error *err) { return loom_gpu_op_backward(op, err); }

typedef struct {
    loom_gpu_op **ops;
    int n;
} layer_ctx;

static loom_status layer_fwd(void *p, loom_error *err)
{
    layer_ctx *c = p;
    for (int i = 0; i < c->n; i++) {
        loom_status s = loom_gpu_op_forward(c->ops[i], err);
        if (s) return s;
    }
    return LOOM_OK;
}

static loom_status layer_bwd(void *p, loom_error *err)
{
    layer_ctx *c = p;
    for (int i = c->n - 1; i >= 0; i--) {
        loom_status s = loom_gpu_op_backward(c->ops[i], err);
        if (s) return s;
    }
    return LOOM_OK;
}

/* Per-pass results of one measurement. */
typedef struct {
    int n;
    double *busy[2], *span[2], *ev[2];   /* [fwd, bwd][pass] in ns */
    cudaEvent_t *evs;                    /* 4 per pass */
} samples;

static void samples_free(samples *sm)
{
    for (int i = 0; sm->evs && i < 4 * sm->n; i++)
        if (sm->evs[i]) cudaEventDestroy(sm->evs[i]);
    free(sm->evs);
    for (int d = 0; d < 2; d++) free(sm->busy[d]), free(sm->span[d]), free(sm->ev[d]);
}

/* Runs warm-up and repeats of (fwd, bwd) and gathers CUPTI and event times. */
static loom_status run_passes(loom_gpu *g, const loom_profile_opts *o, pass_fn fwd, pass_fn bwd,
                              void *ctx, samples *sm, const loom_kernel_log **log_out,
                              loom_error *err)
{
    memset(sm, 0, sizeof *sm);
    if (o->repeats < 1 || o->repeats > MAX_REPEATS || o->warmup < 0)
        return loom_error_set(err, LOOM_ERR_INVALID, "repeats must be in 1..%d and warm-up >= 0",
                              MAX_REPEATS);
    int R = o->repeats;
    sm->n = R;
    sm->evs = calloc((size_t)(4 * R), sizeof *sm->evs);
    for (int d = 0; d < 2; d++) {
        sm->busy[d] = calloc((size_t)R, sizeof(double));
        sm->span[d] = calloc((size_t)R, sizeof(double));
        sm->ev[d] = calloc((size_t)R, sizeof(double));
        if (!sm->busy[d] || !sm->span[d] || !sm->ev[d])
            return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory for samples");
    }
    if (!sm->evs) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory for events");
    loom_status s;
    for (int i = 0; i < 4 * R; i++)
        if ((s = loom_gpu_check(cudaEventCreate(&sm->evs[i]), "cudaEventCreate", err))) return s;
    cudaStream_t st = loom_gpu_stream(g);
    for (int r = 0; r < o->warmup; r++)
        if ((s = window(g, o, 0, NULL, NULL, fwd, ctx, err)) ||
            (s = window(g, o, 0, NULL, NULL, bwd, ctx, err)))
            return s;
    if ((s = loom_gpu_check(cudaStreamSynchronize(st), "warm-up", err))) return s;
    loom_cupti_clear();
    for (int r = 0; r < R; r++)
        if ((s = window(g, o, 2 * (uint64_t)r + 1, sm->evs[4 * r], sm->evs[4 * r + 1], fwd, ctx, err)) ||
            (s = window(g, o, 2 * (uint64_t)r + 2, sm->evs[4 * r + 2], sm->evs[4 * r + 3], bwd, ctx, err)))
            return s;
    if ((s = loom_gpu_check(cudaStreamSynchronize(st), "timed passes", err))) return s;
    const loom_kernel_log *log;
    if ((s = loom_cupti_collect(&log, err))) return s;
    for (int r = 0; r < R; r++)
        for (int d = 0; d < 2; d++) {
            loom_kernel_sum k = loom_kernel_log_sum(log, 2 * (uint64_t)r + 1 + (uint64_t)d);
            if (k.kernels == 0)
                return loom_error_set(err, LOOM_ERR_DEVICE,
                                      "CUPTI recorded no kernels for the %s pass %d (is another "
                                      "profiler attached?)", d ? "backward" : "forward", r);
            sm->busy[d][r] = (double)k.busy_ns;
            sm->span[d][r] = (double)k.span_ns;
            float ms = 0;
            if ((s = loom_gpu_check(cudaEventElapsedTime(&ms, sm->evs[4 * r + 2 * d], sm->evs[4 * r + 2 * d + 1]),
                                    "cudaEventElapsedTime", err)))
                return s;
            sm->ev[d][r] = (double)ms * 1e6;
        }
    *log_out = log;
    return LOOM_OK;
}

static double rel_spread(const double *v, int n)
{
    double med = loom_quantile(v, n, 0.5);
    return med > 0 ? (loom_quantile(v, n, 0.9) - loom_quantile(v, n, 0.1)) / med : 0;
}

loom_status loom_profile_measure_op(loom_gpu *g, loom_gpu_op *op, const loom_profile_key *key,
                                    const loom_profile_opts *o, loom_profile_entry *e,
                                    loom_error *err)
{
    memset(e, 0, sizeof *e);
    e->key = *key;
    samples sm;
    const loom_kernel_log *log = NULL;
    loom_status s = run_passes(g, o, op_fwd, op_bwd, op, &sm, &log, err);
    if (!s) {
        int R = sm.n;
        e->fwd_ns = llround(loom_quantile(sm.busy[0], R, 0.5));
        e->bwd_ns = llround(loom_quantile(sm.busy[1], R, 0.5));
        double a = rel_spread(sm.busy[0], R), b = rel_spread(sm.busy[1], R);
        e->spread = a > b ? a : b;
        e->repeats = R;
        e->events_fwd_ns = llround(loom_quantile(sm.ev[0], R, 0.5));
        e->events_bwd_ns = llround(loom_quantile(sm.ev[1], R, 0.5));
        e->peak_bytes = loom_gpu_op_bytes(op);
        e->n_kernels = loom_kernel_log_names(log, 1, 2 * (uint64_t)R + 1, &e->kernels[0][0],
                                             LOOM_PROFILE_KERNEL_NAME_MAX, LOOM_PROFILE_MAX_KERNELS);
    }
    samples_free(&sm);
    loom_cupti_clear();
    return s;
}

loom_status loom_profile_measure(loom_gpu *g, const loom_profile_key *key,
                                 const loom_profile_opts *o, loom_profile_entry *e,
                                 loom_error *err)
{
    loom_gpu_op *op;
    loom_status s = loom_gpu_op_create(g, key, o->seed, &op, err);
    if (s) return s;
    s = loom_profile_measure_op(g, op, key, o, e, err);
    loom_gpu_op_destroy(op);
    return s;
}

loom_status loom_profile_layer(loom_gpu *g, loom_gpu_op **ops, const loom_profile_key *keys,
                               int n, const loom_profile_opts *o, loom_profile_entry *per,
                               loom_layer_check *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    loom_status s;
    for (int i = 0; i < n; i++) {
        if ((s = loom_profile_measure_op(g, ops[i], &keys[i], o, &per[i], err))) return s;
        out->sum_fwd_ns += (double)per[i].fwd_ns;
        out->sum_bwd_ns += (double)per[i].bwd_ns;
    }
    /* The layer pass flushes L2 once before the layer, never between ops. */
    layer_ctx ctx = {ops, n};
    samples sm;
    const loom_kernel_log *log = NULL;
    s = run_passes(g, o, layer_fwd, layer_bwd, &ctx, &sm, &log, err);
    if (!s) {
        int R = sm.n;
        out->span_fwd_ns = loom_quantile(sm.span[0], R, 0.5);
        out->span_bwd_ns = loom_quantile(sm.span[1], R, 0.5);
        out->busy_fwd_ns = loom_quantile(sm.busy[0], R, 0.5);
        out->busy_bwd_ns = loom_quantile(sm.busy[1], R, 0.5);
        out->events_fwd_ns = loom_quantile(sm.ev[0], R, 0.5);
        out->events_bwd_ns = loom_quantile(sm.ev[1], R, 0.5);
        double sum = out->sum_fwd_ns + out->sum_bwd_ns;
        out->error = sum > 0 ? (out->span_fwd_ns + out->span_bwd_ns) / sum - 1 : 0;
    }
    samples_free(&sm);
    loom_cupti_clear();
    return s;
}
