/*
 * moe_overlap.h — Megatron-Core's expert-parallel all-to-all overlap
 * (--overlap-moe-expert-parallel-comm; megatron/core/pipeline_parallel/
 * combined_1f1b.py, models/common/model_chunk_schedule_plan.py,
 * models/gpt/fine_grained_callables.py): what a MoE layer costs when the
 * forward of one micro-batch runs beside the backward of another.
 *
 * The schedule. In the steady state of the (interleaved) 1F1B schedule each
 * iteration pairs micro-batch k+1's forward with micro-batch k's backward,
 * layer by layer. A MoE layer is split into four nodes, two on the compute
 * stream and two on a communication stream:
 *
 *   pre       attention, the pre-MLP norm, the shared experts, the router and
 *             the dispatcher's permute                         (compute)
 *   dispatch  the dispatch all-to-all                            (comm)
 *   mlp       the routed experts                                 (compute)
 *   combine   the combine all-to-all, unpermute and the residual (comm)
 *
 * TransformerLayerSchedulePlan.run issues, for a forward layer f and a
 * backward layer b:
 *     comm:     combine_b | dispatch_f, dispatch_b | combine_f
 *     compute:  pre_f     | mlp_b, mlp_f           | pre_b
 * and every node of one micro-batch waits for the node of that micro-batch
 * issued before it (a CUDA event per micro-batch). Walking the two streams
 * with those waits, the phases run side by side in pairs and the pair
 * takes
 *     T = max(combine_b, pre_f) + max(dispatch_f, mlp_b)
 *       + max(dispatch_b, mlp_f) + max(combine_f, pre_b)
 * against the sum of all eight parts when nothing overlaps (tests/
 * test_moe_overlap.c walks the event graph and compares).
 *
 * Which passes pair. The interleaved schedule runs one more warm-up forward
 * with the overlap ((S-r-1)·2 + (v-1)·S + 1 on rank r of S, v chunks, of
 * v·M passes); warm-up forwards and cool-down backwards run alone. Without a
 * pipeline (forward_backward_no_pipelining) the first forward and the last
 * backward run alone. Megatron refuses the overlap with PP > 1 and no
 * interleaving, without expert parallelism, and with full recompute.
 *
 * Units: seconds.
 */
#ifndef LOOM_MOE_OVERLAP_H
#define LOOM_MOE_OVERLAP_H

#include <stdint.h>

/* One pass (forward or backward) of a MoE layer, split as the overlap
 * splits it; each part includes its kernels' exposed communication. */
typedef struct {
    double pre_s;       /* compute stream: attention through the permute */
    double dispatch_s;  /* communication stream: the dispatch all-to-all */
    double mlp_s;       /* compute stream: the routed experts */
    double combine_s;   /* communication stream: the combine and what follows it */
} loom_moe_phases;

/* A forward layer beside a backward layer: the formula above. */
double loom_moe_overlap_pair_s(const loom_moe_phases *fwd, const loom_moe_phases *bwd);

/* The same two passes one after the other: the sum of the eight parts. */
double loom_moe_overlap_serial_s(const loom_moe_phases *fwd, const loom_moe_phases *bwd);

/* Fraction of rank `rank`'s v·M forward (and backward) passes that run
 * paired: (v·M - w) / (v·M) with w its warm-up forwards under the overlap
 * ((S-r-1)·2 + (v-1)·S + 1 with S > 1 stages; 1 without a pipeline); 0
 * when every pass is warm-up or an argument is < 1. */
double loom_moe_overlap_paired_fraction(int64_t stages, int64_t rank, int64_t vpp,
                                        int64_t microbatches);

#endif
