/*
 * test_pipeline.c — 1F1B / interleaved step time (costs/pipeline.c) against
 * hand computations, and the 1F1B formula against a discrete-event
 * simulation of the schedule (every rank runs its warm-up forwards, then
 * alternates one forward / one backward, then drains; a forward waits for
 * the previous rank's forward of the same micro-batch, a backward for the
 * next rank's backward).
 */
#include "check.h"
#include "costs/pipeline.h"

/* Makespan of 1F1B with per-rank forward f[i] and backward b[i]. */
static double simulate_1f1b(int S, int M, const double *f, const double *b)
{
    double F[16][64], B[16][64], free_at[16] = {0};
    /* rank i's task order: warm-up min(S-i-1, M) forwards, then 1F1B, then
     * the remaining backwards */
    int order[16][128], n_order[16] = {0};
    for (int i = 0; i < S; i++) {
        int warm = S - i - 1 < M ? S - i - 1 : M, nf = 0, nb = 0;
        for (int k = 0; k < warm; k++) order[i][n_order[i]++] = +(++nf);
        while (nf < M) {
            order[i][n_order[i]++] = +(++nf);
            order[i][n_order[i]++] = -(++nb);
        }
        while (nb < M) order[i][n_order[i]++] = -(++nb);
    }
    int pos[16] = {0}, done = 0, total = 0;
    for (int i = 0; i < S; i++) total += n_order[i];
    for (int i = 0; i < S; i++)
        for (int m = 0; m < M; m++) F[i][m] = B[i][m] = -1;
    while (done < total) {
        int progressed = 0;
        for (int i = 0; i < S; i++) {
            if (pos[i] >= n_order[i]) continue;
            int task = order[i][pos[i]];
            int m = (task > 0 ? task : -task) - 1;
            double ready;
            if (task > 0) {
                if (i > 0 && F[i - 1][m] < 0) continue;
                ready = i > 0 ? F[i - 1][m] : 0;
                double start = ready > free_at[i] ? ready : free_at[i];
                F[i][m] = free_at[i] = start + f[i];
            } else {
                double dep = i < S - 1 ? B[i + 1][m] : F[i][m];
                if (dep < 0) continue;
                double start = dep > free_at[i] ? dep : free_at[i];
                B[i][m] = free_at[i] = start + b[i];
            }
            pos[i]++;
            done++;
            progressed = 1;
        }
        if (!progressed) return -1;   /* deadlock: schedule bug */
    }
    double end = 0;
    for (int i = 0; i < S; i++)
        if (free_at[i] > end) end = free_at[i];
    return end;
}

static loom_pipeline_out step(int64_t S, int64_t M, int64_t v, const double *t, double p2p)
{
    loom_pipeline_in in = {.stages = S, .microbatches = M, .vpp = v, .stage_s = t, .p2p_s = p2p};
    loom_pipeline_out out;
    loom_error e;
    loom_status s = loom_pipeline_step(&in, &out, &e);
    CHECK_INT_EQ(s, LOOM_OK);
    return out;
}

static void test_formulas(void)
{
    /* uniform: T = (M + S - 1) t */
    const double one[4] = {1, 1, 1, 1};
    loom_pipeline_out o = step(4, 8, 1, one, 0);
    CHECK_NEAR_REL(o.step_s, 11.0, 1e-12);
    CHECK_NEAR_REL(o.compute_s, 8.0, 1e-12);
    CHECK_NEAR_REL(o.bubble_s, 3.0, 1e-12);
    /* non-uniform: Σ t + (M-1) max t = 5.5 + 3·2 */
    const double t[4] = {1, 2, 1.5, 1};
    o = step(4, 4, 1, t, 0);
    CHECK_NEAR_REL(o.step_s, 11.5, 1e-12);
    CHECK_INT_EQ(o.bottleneck, 1);
    CHECK_NEAR_REL(o.bubble_s, 3.5, 1e-12);
    /* interleaved v = 2: bubble (S-1)t/v = 1.5; bubble fraction (S-1)/(vM) */
    o = step(4, 8, 2, one, 0);
    CHECK_NEAR_REL(o.bubble_s, 1.5, 1e-12);
    CHECK_NEAR_REL(o.step_s, 9.5, 1e-12);
    CHECK_NEAR_REL(o.bubble_s / o.compute_s, loom_pipeline_bubble_fraction(4, 8, 2), 1e-12);
    /* p2p, 1F1B: two blocking exchanges per micro-batch on a middle rank
     * plus fill and drain, 2M + 2S - 5 = 19 transfers (the schedule's event
     * simulation, tests/test_pipeline_p2p.c); interleaved run blocking
     * (overlap_p2p off), v = 3: 2v per micro-batch, 6 · 0.01 · (8 + 1) */
    o = step(4, 8, 1, one, 0.01);
    CHECK_NEAR_REL(o.p2p_s, 0.19, 1e-12);
    o = step(4, 8, 3, one, 0.01);
    CHECK_NEAR_REL(o.p2p_s, 0.54, 1e-12);
    /* one stage: no bubble, no p2p */
    o = step(1, 5, 1, one, 0.5);
    CHECK_NEAR_REL(o.step_s, 5.0, 1e-12);
    CHECK(o.p2p_s == 0 && o.bubble_s == 0);
}

static void test_against_simulation(void)
{
    /* Uniform stages with backward = 2 × forward: exact. */
    double f[8], b[8], t[8];
    for (int S = 1; S <= 8; S++)
        for (int M = 1; M <= 16; M *= 2) {
            for (int i = 0; i < S; i++) f[i] = 1, b[i] = 2, t[i] = 3;
            CHECK_NEAR_REL(step(S, M, 1, t, 0).step_s, simulate_1f1b(S, M, f, b), 1e-12);
        }
    /* Unequal stages: docs/design.md §4's formula charges the whole fill and drain
     * (Σ t_i - max t_i) although the fast ranks partly run in the slow
     * rank's shadow, so it is an upper bound on the schedule's makespan:
     * 7% over for a 1.5× slow middle rank, 12% over for a 2× slow first
     * rank, and within 1.5% for the 10% imbalance of real stage cuts. */
    double f2[4] = {1, 1.5, 1, 1}, b2[4] = {2, 3, 2, 2}, t2[4] = {3, 4.5, 3, 3};
    double sim = simulate_1f1b(4, 8, f2, b2), model = step(4, 8, 1, t2, 0).step_s;
    CHECK(model >= sim);
    CHECK_NEAR_REL(model, sim, 0.08);
    double f3[4] = {2, 1, 1, 1}, b3[4] = {4, 2, 2, 2}, t3[4] = {6, 3, 3, 3};
    sim = simulate_1f1b(4, 8, f3, b3), model = step(4, 8, 1, t3, 0).step_s;
    CHECK(model >= sim);
    CHECK_NEAR_REL(model, sim, 0.12);
    double f4[4] = {1, 1.1, 1, 1.05}, b4[4] = {2, 2.2, 2, 2.1}, t4[4] = {3, 3.3, 3, 3.15};
    sim = simulate_1f1b(4, 16, f4, b4), model = step(4, 16, 1, t4, 0).step_s;
    CHECK(model >= sim);
    CHECK_NEAR_REL(model, sim, 0.015);
}

static void test_grad_sync_and_optimizer(void)
{
    const double t[2] = {1, 1}, bwd[2] = {0.6, 0.6}, opt[2] = {0.05, 0.07};
    double sync[2] = {1, 1};
    loom_pipeline_in in = {.stages = 2, .microbatches = 4, .vpp = 1, .stage_s = t, .bwd_s = bwd,
                           .grad_sync_s = sync, .sync_overlap = 0.8, .optimizer_s = opt};
    loom_pipeline_out o;
    loom_error e;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_OK);
    /* rank 0 hides min(0.8·1, 0.6) = 0.6 → 0.4 exposed; rank 1 hides
     * min(0.8, 0.6 + 0.6) → 0.2; the worst is 0.4 */
    CHECK_NEAR_REL(o.grad_sync_s, 0.4, 1e-12);
    CHECK_NEAR_REL(o.optimizer_s, 0.07, 1e-12);
    CHECK_NEAR_REL(o.step_s, 4 + 1 + 0.4 + 0.07, 1e-12);
    /* a small sync: only the never-hidden 20% shows */
    sync[0] = sync[1] = 0.5;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_OK);
    CHECK_NEAR_REL(o.grad_sync_s, 0.1, 1e-12);
    /* no overlap: the whole sync */
    in.sync_overlap = 0;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_OK);
    CHECK_NEAR_REL(o.grad_sync_s, 0.5, 1e-12);
    /* an explicit window replaces the backward */
    const double win[2] = {0.1, 0.1};
    in.sync_overlap = 1;
    in.sync_window_s = win;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_OK);
    CHECK_NEAR_REL(o.grad_sync_s, 0.4, 1e-12);
    /* each rank's own fraction (ZeRO-3's prefetch): with room to hide,
     * rank 0 exposes (1 - 0.9)·0.5 = 0.05, rank 1 (1 - 0.5)·0.5 = 0.25 */
    const double roomy[2] = {2, 2}, own[2] = {0.9, 0.5};
    in.sync_window_s = roomy;
    in.sync_overlap_of = own;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_OK);
    CHECK_NEAR_REL(o.grad_sync_s, 0.25, 1e-12);
    const double bad_own[2] = {0.9, 1.5};
    in.sync_overlap_of = bad_own;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "sync_overlap_of[1]");
    in.sync_overlap_of = NULL;

    /* bad input */
    in.stages = 0;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "stages (0)");
    in.stages = 2;
    const double neg[2] = {1, -1};
    in.stage_s = neg;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "stage_s[1]");
    in.stage_s = NULL;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "stage_s is missing");
    in.stage_s = t;
    in.sync_overlap = 1.5;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_ERR_INVALID);
}

int main(void)
{
    test_formulas();
    test_against_simulation();
    test_grad_sync_and_optimizer();
    return check_done();
}
