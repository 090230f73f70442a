/*
 * pipeline.h — step time of a synchronous pipeline-parallel training step
 * (docs/design.md §4 "Pipeline and step time"; derivation in pipeline.c).
 *
 * For S pipeline ranks with per-micro-batch forward+backward times t_i and
 * M micro-batches, 1F1B (Narayanan et al. 2021, "Efficient Large-Scale
 * Language Model Training on GPU Clusters Using Megatron-LM", §2.2):
 *
 *     T = Σ t_i + (M - 1) · max t_i
 *       = M · max t_i            (compute: the bottleneck rank's work)
 *       + (Σ t_i - max t_i)      (bubble; ÷ v with v interleaved chunks)
 *
 * plus the exposed stage-to-stage transfers (all of them with 1F1B's
 * blocking exchanges; only the fill and drain with the interleaved
 * schedule's overlapped ones, Megatron's overlap_p2p_comm), the exposed part
 * of the data-parallel gradient synchronisation and the optimizer step. The
 * parts are returned separately and add up to the step time.
 *
 * Units: seconds.
 */
#ifndef LOOM_PIPELINE_H
#define LOOM_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"

/* Bytes an Adam step streams through HBM per local parameter: reads the
 * fp32 gradient, master weight, m and v (16), writes master, m, v (12) and
 * the bf16 weight (2), plus one more read of the gradient for the global
 * gradient norm of clipping (4). */
#define LOOM_OPTIM_STEP_BYTES_PER_PARAM 34

typedef struct {
    int64_t stages;             /* S: pipeline ranks (>= 1) */
    int64_t microbatches;       /* M: micro-batches per step per replica (>= 1) */
    int64_t vpp;                /* v: model chunks per rank (1 = plain 1F1B) */
    const double *stage_s;      /* [S] fwd+bwd of one micro-batch on rank i (all its chunks) */
    const double *bwd_s;        /* [S] backward part of stage_s (NULL = none; the
                                   p2p overlap then takes backward = 2 x forward) */
    double p2p_s;               /* one activation (or gradient) transfer between
                                   adjacent ranks, one micro-batch, one chunk */
    bool overlap_p2p;           /* Megatron's overlap_p2p_comm: the interleaved
                                   schedule's steady-state transfers run behind
                                   compute (only with vpp > 1; see
                                   loom_pipeline_overlaps_p2p) */
    const double *grad_sync_s;  /* [S] data-parallel gradient sync of rank i (NULL = none) */
    const double *sync_window_s;/* [S] compute the sync can hide behind on rank i
                                   (NULL = its last micro-batch's backward, bwd_s) */
    double sync_overlap;        /* at most this fraction of a sync is hidden (0..1) */
    const double *sync_overlap_of; /* [S] rank i's own fraction instead (NULL = sync_overlap):
                                   ZeRO-3's per-block collectives, loom_dp_sync_zero3_overlap */
    const double *optimizer_s;  /* [S] optimizer step of rank i (NULL = none) */
} loom_pipeline_in;

typedef struct {
    double step_s;
    double compute_s;      /* M · max t_i */
    double bubble_s;       /* (Σ t_i - max t_i) / v */
    double p2p_s;          /* exposed transfers (pipeline.c) */
    double grad_sync_s;    /* exposed part */
    double optimizer_s;    /* slowest rank */
    int64_t bottleneck;    /* rank with max t_i */
} loom_pipeline_out;

/* Where the step time goes; the fields add up to the step time. The one
 * breakdown of a step: `loom eval` (eval.h), the stage search
 * (solver/stage_search.h) and plans (plan.h) all report it. */
typedef struct {
    double compute_s;     /* M × the bottleneck rank's fwd+bwd(+recompute) of a micro-batch */
    double tp_comm_s;     /* exposed TP collectives (+ CP exchange, EP all-to-all) in that */
    double bubble_s;      /* pipeline fill and drain */
    double p2p_s;         /* stage-to-stage transfers */
    double grad_sync_s;   /* exposed data-parallel gradient synchronisation */
    double optimizer_s;   /* the optimizer step */
    double offload_s;     /* exposed CPU activation-offload copies, out of compute (loom
                           * eval's --cpu-offload-layers; plans do not offload: 0) */
} loom_step_breakdown;

/* The breakdown of step `po` of M micro-batches: the exposed tensor-
 * parallel communication of the bottleneck rank (M × comm_s[bottleneck],
 * comm_s[S] per micro-batch) and its exposed CPU-offload copies (likewise
 * offload_s[S]; NULL: none) are split out of compute; the other parts are
 * po's. The one place a step's breakdown is finished. */
void loom_pipeline_breakdown(const loom_pipeline_out *po, const double *comm_s,
                             const double *offload_s, int64_t M, loom_step_breakdown *b);

/* Step time; LOOM_ERR_INVALID naming the bad field when S, M or v < 1, a
 * time is negative or not finite, or a required array is NULL. */
loom_status loom_pipeline_step(const loom_pipeline_in *in, loom_pipeline_out *out,
                               loom_error *err);

/* Whether a schedule of v chunks per rank overlaps its transfers with
 * compute: Megatron-LM (megatron/training/arguments.py) and NeMo /
 * Megatron-Bridge's comm-overlap configuration turn overlap_p2p_comm on
 * whenever the schedule is interleaved (v > 1); plain 1F1B always exchanges
 * blocking, and other frameworks' schedules are charged as blocking. The one
 * rule `loom eval` and the planner (which plans for Megatron) both apply. */
bool loom_pipeline_overlaps_p2p(int64_t vpp, bool megatron);

/* Transfers on the critical path when each one hides behind the compute the
 * schedule puts around it (pipeline.c): 1F1B 2M + 2S - 5 (M + 1 with two
 * stages, 2(S - 1) with one micro-batch); interleaved blocking
 * 2(v·M + S - 1), overlapped 2(S·v - 1). p2p_s of a step = this × one
 * transfer in that regime. */
double loom_pipeline_exposed_transfers(int64_t stages, int64_t microbatches, int64_t vpp,
                                       bool overlap_p2p);

/* Pipeline bubble fraction of the ideal (uniform stages): (S-1) / (v·M). */
double loom_pipeline_bubble_fraction(int64_t stages, int64_t microbatches, int64_t vpp);

#endif
