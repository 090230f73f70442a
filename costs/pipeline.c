/*
 * pipeline.c — 1F1B / interleaved step time (pipeline.h).
 *
 * Compute and bubble. In 1F1B every rank runs M forward and M backward
 * passes; the slowest rank (time t_max per micro-batch) is busy M·t_max,
 * and the first micro-batch must first reach it and the last one must drain
 * back through the others: Σ t_i - t_max of fill and drain, the "bubble"
 * (for uniform stages (S-1)·t, Narayanan et al. 2021 §2.2). With v model
 * chunks per rank (interleaved schedule) the fill and drain move in steps
 * of 1/v of a stage, so the bubble shrinks to (Σ t_i - t_max)/v (ibid.
 * §2.2.2).
 *
 * Point-to-point transfers. Each micro-batch crosses every chunk boundary
 * forward (activations, one transfer p2p_s) and backward (their gradients).
 * How many of those transfers the step waits for depends on when the
 * schedule posts and waits on them (Megatron-Core,
 * megatron/core/pipeline_parallel/schedules.py):
 *
 *   blocking (1F1B: forward_backward_pipelining_without_interleaving waits
 *   on every recv_forward, send_forward_recv_backward,
 *   send_backward_recv_forward, send_backward). A middle rank's steady
 *   iteration holds two exchanges (after its forward: activation out,
 *   gradient in; after its backward: gradient out, activation in), each one
 *   transfer on the critical path, and the fill and drain add theirs; the
 *   first and last ranks have one exchange per iteration. An event
 *   simulation of the schedule (tests/test_pipeline_p2p.c) finds, for M >= 2,
 *   2M + 2S - 5 transfers exposed with S >= 3 stages and M + 1 with two
 *   (each rank is an end rank); one micro-batch pays 2(S - 1), down and
 *   back. The interleaved schedule run blocking (--no-overlap-p2p-
 *   communication, batch_p2p_comm) is charged two transfers per chunk per
 *   micro-batch plus the fill and drain, 2(v·M + S - 1): an upper bound, as
 *   it batches a forward's and a backward's transfers into one exchange.
 *
 *   overlapped (interleaved with overlap_p2p_comm, Megatron's default for
 *   v > 1). Warm-up and cool-down still exchange blocking (their
 *   send_forward_recv_forward / send_backward_recv_backward wait at once),
 *   so the first micro-batch's forward pays every one of the S·v - 1 chunk
 *   boundaries as it fills the pipeline and the last micro-batch's backward
 *   pays them again as it drains: 2(S·v - 1) transfers. In the steady state
 *   a forward's receive for the next forward is posted after it and waited
 *   before the next forward, with a backward between them; a backward's
 *   receive is posted after it and waited before the next backward, with a
 *   forward between them. A transfer hides behind that compute, so one
 *   steady iteration (a forward and a backward) exposes
 *       e = max(0, p2p_s - min(f_c, b_c))
 *   (f_c, b_c: one chunk's forward and backward on the bottleneck rank,
 *   (t - bwd) / v and bwd / v), and the last rank runs the most of them,
 *   v·M - (v-1)·S. In all
 *       p2p = 2(S·v - 1)·p2p_s + (v·M - (v-1)·S)·e.
 *   For uniform stages this is an event simulation of Megatron's schedule
 *   exactly while p2p_s <= min(f_c, b_c), and within one e beyond
 *   (tests/test_pipeline.c). With one stage there is nothing to send.
 *
 * Gradient synchronisation. With overlapped gradient reduction (Megatron's
 * --overlap-grad-reduce, PyTorch DDP buckets) a rank starts reducing
 * gradient buckets while its last micro-batch's backward still runs, so
 * only the part of its sync that does not fit behind that backward is
 * exposed. Ranks later in the pipeline finish their last backward earlier
 * — the last micro-batch's gradient still has to travel back through ranks
 * i-1 … 0 — so rank i also hides its sync behind Σ_{j<i} bwd_j. A fraction
 * (1 - sync_overlap) of every sync is never hidden (the last bucket, launch
 * gaps, contention with compute):
 *     exposed_i = sync_i - min(sync_overlap · sync_i, window_i + Σ_{j<i} bwd_j)
 * and the step waits for the worst rank. ZeRO-3 / FSDP give each rank its
 * own fraction (sync_overlap_of, costs/dp_sync.h): there the sync is one
 * collective per block, prefetched behind the neighbouring block's compute.
 *
 * Optimizer. All ranks step at once; the slowest one counts. (Its time is
 * memory-bound: LOOM_OPTIM_STEP_BYTES_PER_PARAM per local parameter.)
 *
 * Units: seconds.
 */
#include "costs/pipeline.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

double loom_pipeline_bubble_fraction(int64_t stages, int64_t microbatches, int64_t vpp)
{
    if (stages < 1 || microbatches < 1 || vpp < 1) return 0;
    return (double)(stages - 1) / ((double)vpp * (double)microbatches);
}

bool loom_pipeline_overlaps_p2p(int64_t vpp, bool megatron)
{
    return vpp > 1 && megatron;
}

double loom_pipeline_exposed_transfers(int64_t stages, int64_t microbatches, int64_t vpp,
                                       bool overlap_p2p)
{
    if (stages < 2 || microbatches < 1 || vpp < 1) return 0;
    double S = (double)stages, M = (double)microbatches, v = (double)vpp;
    if (vpp > 1) return overlap_p2p ? 2.0 * (S * v - 1) : 2.0 * (v * M + S - 1);
    if (microbatches == 1) return 2.0 * (S - 1);   /* down and back up, nothing else */
    return stages == 2 ? M + 1 : 2.0 * M + 2.0 * S - 5;
}

/* Transfers the overlapped schedule exposes in its steady state (pipeline.c):
 * v·M - (v-1)·S iterations of the last rank, each exposing what the
 * transfer takes beyond the bottleneck rank's chunk forward or backward
 * (whichever is shorter) that runs while it is in flight. */
static double steady_excess_s(const loom_pipeline_in *in, int64_t bottleneck)
{
    double v = (double)in->vpp, t = in->stage_s[bottleneck];
    double bwd = in->bwd_s ? in->bwd_s[bottleneck] : 2.0 * t / 3.0;
    double hide = fmax(0, fmin(t - bwd, bwd)) / v;
    double iters = v * (double)in->microbatches - (v - 1) * (double)in->stages;
    return iters > 0 && in->p2p_s > hide ? iters * (in->p2p_s - hide) : 0;
}

static loom_status check_times(const char *name, const double *t, int64_t n, bool required,
                               loom_error *err)
{
    if (!t) {
        if (required)
            return loom_error_set(err, LOOM_ERR_INVALID, "pipeline: %s is missing", name);
        return LOOM_OK;
    }
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(t[i]) || t[i] < 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "pipeline: %s[%lld] must be a finite time >= 0, found %g", name,
                                  (long long)i, t[i]);
    return LOOM_OK;
}

void loom_pipeline_breakdown(const loom_pipeline_out *po, const double *comm_s,
                             const double *offload_s, int64_t M, loom_step_breakdown *b)
{
    b->tp_comm_s = (double)M * comm_s[po->bottleneck];
    b->offload_s = offload_s ? (double)M * offload_s[po->bottleneck] : 0;
    b->compute_s = po->compute_s - b->tp_comm_s - b->offload_s;
    b->bubble_s = po->bubble_s;
    b->p2p_s = po->p2p_s;
    b->grad_sync_s = po->grad_sync_s;
    b->optimizer_s = po->optimizer_s;
}

loom_status loom_pipeline_step(const loom_pipeline_in *in, loom_pipeline_out *out,
                               loom_error *err)
{
    memset(out, 0, sizeof *out);
    if (in->stages < 1 || in->microbatches < 1 || in->vpp < 1)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "pipeline: stages (%lld), micro-batches (%lld) and virtual stages "
                              "(%lld) must all be >= 1", (long long)in->stages,
                              (long long)in->microbatches, (long long)in->vpp);
    if (!isfinite(in->p2p_s) || in->p2p_s < 0 || !(in->sync_overlap >= 0) ||
        in->sync_overlap > 1)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "pipeline: p2p_s must be >= 0 (found %g) and sync_overlap in [0, 1] "
                              "(found %g)", in->p2p_s, in->sync_overlap);
    const int64_t S = in->stages;
    for (int64_t i = 0; in->sync_overlap_of && i < S; i++)
        if (!(in->sync_overlap_of[i] >= 0) || in->sync_overlap_of[i] > 1)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "pipeline: sync_overlap_of[%lld] must be in [0, 1] (found %g)",
                                  (long long)i, in->sync_overlap_of[i]);
    loom_status s;
    if ((s = check_times("stage_s", in->stage_s, S, true, err)) ||
        (s = check_times("bwd_s", in->bwd_s, S, false, err)) ||
        (s = check_times("grad_sync_s", in->grad_sync_s, S, false, err)) ||
        (s = check_times("sync_window_s", in->sync_window_s, S, false, err)) ||
        (s = check_times("optimizer_s", in->optimizer_s, S, false, err)))
        return s;

    double sum = 0, max = -1;
    for (int64_t i = 0; i < S; i++) {
        sum += in->stage_s[i];
        if (in->stage_s[i] > max) {
            max = in->stage_s[i];
            out->bottleneck = i;
        }
    }
    const double M = (double)in->microbatches, v = (double)in->vpp;
    out->compute_s = M * max;
    out->bubble_s = (sum - max) / v;
    bool overlap = in->overlap_p2p && in->vpp > 1;
    if (S > 1)
        out->p2p_s = loom_pipeline_exposed_transfers(S, in->microbatches, in->vpp, overlap) *
                         in->p2p_s +
                     (overlap ? steady_excess_s(in, out->bottleneck) : 0);

    double drained = 0;   /* Σ_{j<i} bwd_j: how much earlier rank i finishes */
    for (int64_t i = 0; i < S; i++) {
        double window = in->sync_window_s ? in->sync_window_s[i] : in->bwd_s ? in->bwd_s[i] : 0;
        if (in->grad_sync_s) {
            double sync = in->grad_sync_s[i];
            double f = in->sync_overlap_of ? in->sync_overlap_of[i] : in->sync_overlap;
            double hidden = fmin(f * sync, window + drained);
            double exposed = sync - hidden;
            if (exposed > out->grad_sync_s) out->grad_sync_s = exposed;
        }
        if (in->optimizer_s && in->optimizer_s[i] > out->optimizer_s)
            out->optimizer_s = in->optimizer_s[i];
        drained += in->bwd_s ? in->bwd_s[i] : 0;
    }
    out->step_s = out->compute_s + out->bubble_s + out->p2p_s + out->grad_sync_s +
                  out->optimizer_s;
    return LOOM_OK;
}
