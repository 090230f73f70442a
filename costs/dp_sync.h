/*
 * dp_sync.h — which collectives one training step's data-parallel gradient
 * synchronisation runs, by ZeRO stage. One rule for every caller: the
 * evaluator (eval.c, over Megatron's data-parallel group), the stage
 * search's replica sync and the ILP's per-op sync over mesh axes (solver/);
 * each prices the collectives on its own group.
 *
 *   ZeRO-0   all-reduce of the gradients                      once per step
 *   ZeRO-1   reduce-scatter of the gradients + all-gather of
 *            the updated weights (= Megatron's distributed
 *            optimizer)                                        once per step
 *   ZeRO-2   the reduce-scatter every micro-batch (no local
 *            accumulation of a partitioned gradient), the
 *            all-gather once                                   (DeepSpeed)
 *   ZeRO-3   also the weights gathered for each forward and
 *            backward, every micro-batch
 *
 * Gradients are reduced in fp32 (LOOM_MEM_GRAD_BYTES per parameter), as
 * Megatron-LM does for bf16 training, or in bf16 when asked; weights are
 * gathered in bf16 (LOOM_MEM_PARAM_BYTES).
 */
#ifndef LOOM_DP_SYNC_H
#define LOOM_DP_SYNC_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/collective.h"

typedef struct {
    loom_collective kind;
    double bytes;       /* the collective's buffer, per GPU (collective.h) */
    double per_step;    /* how many times a step runs it */
} loom_dp_sync_op;

#define LOOM_DP_SYNC_MAX_OPS 2

/* The collectives syncing n parameters under ZeRO stage `zero` (0..3) with
 * micro_batches per step (< 1 counts as 1); returns how many (<= 2). */
int loom_dp_sync_ops(double n, int zero, bool grad_bf16, int64_t micro_batches,
                     loom_dp_sync_op out[LOOM_DP_SYNC_MAX_OPS]);

#endif
