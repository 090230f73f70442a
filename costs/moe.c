/*
 * moe.c — the mixture-of-experts layer's router, token movement and load
 * imbalance in Megatron-Core's alltoall dispatcher (moe.h has the model and
 * its sources).
 *
 * Units: bytes; counts of kernels.
 */
#include "costs/moe.h"

#include <math.h>

/* Standard normal CDF. */
static double phi_cdf(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0));
}

/* E[max] = ∫_0^∞ P(max > x) dx - ∫_0^∞ P(max < -x) dx
 *        = ∫_0^∞ [1 - Φ(x)^n - Φ(-x)^n] dx,
 * by composite Simpson on [0, 8] with h = 1/15: past 8 the integrand is
 * below n · 7e-16, and the rule is within 1e-9 of a 960-step one on [0, 12]
 * up to n = 65536. */
double loom_moe_expected_max_normal(int64_t n)
{
    if (n <= 1) return 0;
    const int steps = 120;   /* even */
    const double hi = 8.0, h = hi / steps, dn = (double)n;
    double sum = 0;
    for (int i = 0; i <= steps; i++) {
        double x = i * h;
        double f = 1 - pow(phi_cdf(x), dn) - pow(phi_cdf(-x), dn);
        sum += f * (i == 0 || i == steps ? 1 : (i % 2 ? 4 : 2));
    }
    return sum * h / 3;
}

double loom_moe_max_load_factor(int64_t experts, int64_t topk, int64_t ep, double tokens)
{
    if (ep <= 1 || topk < 1 || experts < 2 || topk >= experts || experts % ep != 0 ||
        !(tokens > 0))
        return 1;
    double E = (double)experts, k = (double)topk, P = (double)ep;
    double q = 1 / P;   /* the rank's share of the experts, m / E */
    /* copies of one token on the rank: Hypergeometric(E, m, k) */
    double var = k * q * (1 - q) * (E - k) / (E - 1);
    double mean_load = tokens * k / P, sd = sqrt(tokens * var);
    return 1 + sd * sqrt(P / (P - 1)) * loom_moe_expected_max_normal(ep) / mean_load;
}

double loom_moe_remote_domain_copies(int64_t experts, int64_t topk, int64_t ep,
                                     int64_t ranks_per_domain)
{
    if (ranks_per_domain < 1 || ep <= ranks_per_domain || topk < 1 || experts < 1) return 0;
    double D = (double)((ep + ranks_per_domain - 1) / ranks_per_domain);
    double E = (double)experts, Ed = E / D, none = 1;
    for (int64_t i = 0; i < topk && none > 0; i++) {
        double left = E - Ed - (double)i;
        none *= left > 0 ? left / (E - (double)i) : 0;
    }
    return (D - 1) * (1 - none);
}

/* fp32 routing probability carried with each dispatched row */
#define PROB_BYTES 4.0

void loom_moe_permute_passes(const loom_moe_side *s, bool dispatch, loom_moe_pass *fwd,
                             loom_moe_pass *bwd)
{
    *fwd = *bwd = (loom_moe_pass){0, 0};
    double T = s->tokens > 0 ? s->tokens : 0, k = s->topk > 0 ? (double)s->topk : 1;
    double lf = s->load_factor >= 1 ? s->load_factor : 1;
    double row = s->row_bytes + (dispatch ? PROB_BYTES : 0);
    double own = T * k, recv = own * lf;   /* rows sent, rows the busiest rank received */
    /* permute / unpermute: T token rows <-> T·k slot rows; TE computes its
     * row-id map in a kernel of its own (dispatch forward) */
    double perm = T * s->row_bytes + own * row;
    fwd->bytes += perm, bwd->bytes += perm;
    fwd->kernels += dispatch ? 2 : 1, bwd->kernels += 1;
    /* sort_chunks_by_idxs: a read and a write of the received rows */
    if (s->local_experts > 1) {
        fwd->bytes += 2 * recv * row, bwd->bytes += 2 * recv * row;
        fwd->kernels += dispatch ? 2 : 1, bwd->kernels += 1;
    }
    /* Fp8Padding / Fp8Unpadding: a copy of the received rows (the
     * probabilities are padded by a kernel of their own) */
    if (s->fp8_padding) {
        double copy = 2 * recv * s->row_bytes + (dispatch ? 2 * recv * PROB_BYTES : 0);
        fwd->bytes += copy, bwd->bytes += copy;
        fwd->kernels += dispatch ? 2 : 1, bwd->kernels += dispatch ? 2 : 1;
    }
}

void loom_moe_router_passes(double tokens, int64_t experts, bool aux_loss, loom_moe_pass *fwd,
                            loom_moe_pass *bwd)
{
    double te = (tokens > 0 ? tokens : 0) * (double)(experts > 0 ? experts : 0);
    /* forward: top-k reads the bf16 logits (2 B) and writes fp32 scores
     * (4 B) and a bool map (1 B); backward reads the fp32 gradient and the
     * saved scores and writes the bf16 logit gradient (4 + 4 + 2 B) */
    *fwd = (loom_moe_pass){7 * te, 1};
    *bwd = (loom_moe_pass){10 * te, 1};
    if (!aux_loss) return;
    /* the aux loss: its scores as top-k's (7 B), the per-expert count reads
     * the map (1 B), the loss reads the scores (4 B); backward: the loss
     * writes the scores' gradient (4 B), the score function's backward as
     * top-k's (10 B, written in fp32: 12 B), and the two logit gradients are
     * summed (reads 4 + 4 B, writes 2 B) */
    fwd->bytes += (7 + 1 + 4) * te, fwd->kernels += 3;
    bwd->bytes += (4 + 12 + 10) * te, bwd->kernels += 3;
}

int loom_moe_comm_ops(const loom_moe_side *s, bool dispatch, int64_t experts,
                      loom_moe_comm out[LOOM_MOE_MAX_COMM])
{
    if (s->ep <= 1 || !(s->tokens > 0)) return 0;
    double k = s->topk > 0 ? (double)s->topk : 1, lf = s->load_factor >= 1 ? s->load_factor : 1;
    double rows = s->tokens * k * lf;
    int n = 0;
    if (dispatch) {
        /* num_global_tokens_per_expert: every rank's int64 counts */
        out[n++] = (loom_moe_comm){LOOM_COLL_ALL_GATHER, 8.0 * (double)experts * (double)s->ep, false};
        out[n++] = (loom_moe_comm){LOOM_COLL_ALL_TO_ALL, rows * s->row_bytes, false};
        out[n++] = (loom_moe_comm){LOOM_COLL_ALL_TO_ALL, rows * PROB_BYTES, false};
        out[n++] = (loom_moe_comm){LOOM_COLL_ALL_TO_ALL, rows * s->row_bytes, true};
        out[n++] = (loom_moe_comm){LOOM_COLL_ALL_TO_ALL, rows * PROB_BYTES, true};
    } else {
        out[n++] = (loom_moe_comm){LOOM_COLL_ALL_TO_ALL, rows * s->row_bytes, false};
        out[n++] = (loom_moe_comm){LOOM_COLL_ALL_TO_ALL, rows * s->row_bytes, true};
    }
    return n;
}
