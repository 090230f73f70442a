/*
 * test_moe_overlap.c — the expert-parallel all-to-all overlap
 * (costs/moe_overlap.c): the pair time against hand computations and
 * against a walk of the nodes as Megatron-Core issues them (two CUDA
 * streams, one event per micro-batch), and the share of passes the
 * interleaved schedule pairs against Megatron's warm-up counts.
 */
#include "check.h"
#include "costs/moe_overlap.h"

enum { COMP, COMM };
enum { F, B };   /* the forward micro-batch's chain and the backward one's */

typedef struct {
    int stream, chain;
    double dur;
} node;

/* Runs `pairs` consecutive layer pairs issued as
 * TransformerLayerSchedulePlan.run does (combine_b, pre_f, mlp_b,
 * dispatch_f, dispatch_b, mlp_f, combine_f, pre_b); a node starts when its
 * stream is free and the last node of its micro-batch has ended. Returns
 * when the last node ends. */
static double walk(const loom_moe_phases *f, const loom_moe_phases *b, int pairs)
{
    const node order[8] = {
        {COMM, B, b->combine_s}, {COMP, F, f->pre_s},  {COMP, B, b->mlp_s},
        {COMM, F, f->dispatch_s}, {COMM, B, b->dispatch_s}, {COMP, F, f->mlp_s},
        {COMM, F, f->combine_s}, {COMP, B, b->pre_s},
    };
    double stream_free[2] = {0, 0}, chain_end[2] = {0, 0}, end = 0;
    for (int k = 0; k < pairs; k++)
        for (int i = 0; i < 8; i++) {
            const node *n = &order[i];
            double start = fmax(stream_free[n->stream], chain_end[n->chain]);
            stream_free[n->stream] = chain_end[n->chain] = start + n->dur;
            end = fmax(end, start + n->dur);
        }
    return end;
}

static void test_hand_computed(void)
{
    /* compute-bound: every all-to-all hides; the pair costs its compute,
     * max(2,3) + max(2,8) + max(2,4) + max(2,6) = 3 + 8 + 4 + 6 = 21 */
    loom_moe_phases f = {.pre_s = 3, .dispatch_s = 2, .mlp_s = 4, .combine_s = 2};
    loom_moe_phases b = {.pre_s = 6, .dispatch_s = 2, .mlp_s = 8, .combine_s = 2};
    CHECK_NEAR_REL(loom_moe_overlap_pair_s(&f, &b), 21, 1e-12);
    CHECK_NEAR_REL(loom_moe_overlap_serial_s(&f, &b), 29, 1e-12);
    /* communication-bound: the compute hides instead; 5 + 5 + 5 + 5 */
    loom_moe_phases f2 = {.pre_s = 1, .dispatch_s = 5, .mlp_s = 2, .combine_s = 5};
    loom_moe_phases b2 = {.pre_s = 2, .dispatch_s = 5, .mlp_s = 4, .combine_s = 5};
    CHECK_NEAR_REL(loom_moe_overlap_pair_s(&f2, &b2), 20, 1e-12);
    /* no communication: nothing to overlap, the sum */
    loom_moe_phases f3 = {.pre_s = 1, .mlp_s = 2}, b3 = {.pre_s = 2, .mlp_s = 4};
    CHECK_NEAR_REL(loom_moe_overlap_pair_s(&f3, &b3), loom_moe_overlap_serial_s(&f3, &b3),
                   1e-12);
}

static void test_against_walk(void)
{
    /* a fixed pseudo-random sweep of parts (LCG), one pair and five in a
     * row: the streams' schedule repeats with the formula's period */
    unsigned s = 12345;
    for (int trial = 0; trial < 500; trial++) {
        double v[8];
        for (int i = 0; i < 8; i++) {
            s = s * 1103515245u + 12345u;
            v[i] = 0.1 + (double)((s >> 8) % 1000) / 100.0;
        }
        loom_moe_phases f = {v[0], v[1], v[2], v[3]}, b = {v[4], v[5], v[6], v[7]};
        double pair = loom_moe_overlap_pair_s(&f, &b);
        CHECK_NEAR_REL(walk(&f, &b, 1), pair, 1e-12);
        CHECK_NEAR_REL(walk(&f, &b, 5), 5 * pair, 1e-12);
        CHECK(pair <= loom_moe_overlap_serial_s(&f, &b) + 1e-12);
    }
}

static void test_paired_fraction(void)
{
    /* no pipeline: the first forward and the last backward run alone */
    CHECK_NEAR_REL(loom_moe_overlap_paired_fraction(1, 0, 1, 4), 0.75, 1e-12);
    /* S 4, v 2, M 8: rank 0 warms up (4-0-1)·2 + 1·4 + 1 = 11 of 16 passes,
     * rank 3 0 + 4 + 1 = 5 */
    CHECK_NEAR_REL(loom_moe_overlap_paired_fraction(4, 0, 2, 8), 5.0 / 16, 1e-12);
    CHECK_NEAR_REL(loom_moe_overlap_paired_fraction(4, 3, 2, 8), 11.0 / 16, 1e-12);
    /* all warm-up: nothing pairs; bad arguments: 0 */
    CHECK(loom_moe_overlap_paired_fraction(4, 0, 2, 4) == 0);
    CHECK(loom_moe_overlap_paired_fraction(0, 0, 1, 4) == 0);
    CHECK(loom_moe_overlap_paired_fraction(4, 4, 2, 8) == 0);
}

int main(void)
{
    test_hand_computed();
    test_against_walk();
    test_paired_fraction();
    return check_done();
}
