/*
 * moe_overlap.c — the expert-parallel all-to-all overlap's pair time and
 * the share of passes it pairs (moe_overlap.h has the schedule).
 *
 * The pair time, step by step. Both streams start free; combine_b and
 * pre_f start at 0. mlp_b waits for combine_b (its micro-batch) and for
 * pre_f (the compute stream), dispatch_f for pre_f and combine_b (the
 * communication stream): both start at a = max(combine_b, pre_f). With
 * delay_wgrad_compute the expert wgrad follows mlp_b's dgrad on the compute
 * stream before dispatch_b may start; as one node they end together at
 * a + mlp_b. dispatch_b then starts at max(a + dispatch_f, a + mlp_b) =
 * a + x, x = max(dispatch_f, mlp_b), and mlp_f (waiting for dispatch_f and
 * the compute stream) at the same a + x. combine_f waits for mlp_f and the
 * communication stream, pre_b for dispatch_b and the compute stream: both
 * start at a + x + max(dispatch_b, mlp_f) and end at
 * a + x + max(dispatch_b, mlp_f) + {combine_f, pre_b}; the next pair starts
 * when both have ended. Hence the sum of four maxima.
 *
 * Units: seconds.
 */
#include "costs/moe_overlap.h"

#include <math.h>

double loom_moe_overlap_pair_s(const loom_moe_phases *fwd, const loom_moe_phases *bwd)
{
    return fmax(bwd->combine_s, fwd->pre_s) + fmax(fwd->dispatch_s, bwd->mlp_s) +
           fmax(bwd->dispatch_s, fwd->mlp_s) + fmax(fwd->combine_s, bwd->pre_s);
}

double loom_moe_overlap_serial_s(const loom_moe_phases *fwd, const loom_moe_phases *bwd)
{
    return fwd->pre_s + fwd->dispatch_s + fwd->mlp_s + fwd->combine_s + bwd->pre_s +
           bwd->dispatch_s + bwd->mlp_s + bwd->combine_s;
}

double loom_moe_overlap_paired_fraction(int64_t stages, int64_t rank, int64_t vpp,
                                        int64_t microbatches)
{
    if (stages < 1 || vpp < 1 || microbatches < 1 || rank < 0 || rank >= stages) return 0;
    double total = (double)vpp * (double)microbatches;
    double warm = stages > 1 ? (double)((stages - rank - 1) * 2 + (vpp - 1) * stages + 1) : 1;
    return warm >= total ? 0 : (total - warm) / total;
}
