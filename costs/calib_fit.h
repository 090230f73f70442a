/*
 * calib_fit.h — measured training runs, and fitting the cost model's
 * efficiencies to them (`loom calibrate`; the method is in calib_fit.c).
 *
 * A records file (the ../shared/data/calibration.json format; a copy ships
 * as examples/calibration/published-runs.json):
 *
 *   { "about": "...", "records": [ { "model": "GPT 175B", "layers": 96,
 *       "hidden": 12288, "heads": 96, "ffn_hidden": 49152, "seq_len": 2048,
 *       "vocab": 51200, "global_batch": 64, "micro_batch": 1, "num_gpus": 64,
 *       "gpu": "A100-SXM4-80GB", "tp": 8, "pp": 8, "dp": 1,
 *       "virtual_stages": 3, "sequence_parallel": true,
 *       "recompute": "selective (attention core only)",
 *       "precision": "bf16/fp16 mixed", "iteration_time_s": 13.75,
 *       "source": "...", "notes": "...", ... } ] }
 *
 * Each record is a GPT (GPT-2-style blocks: layernorm, MHA, GeLU MLP) of the
 * given shape trained with the given Megatron configuration on
 * num_gpus / 8 DGX nodes of the named GPU. Fields that may be null and what
 * loom then assumes (reported per record in `assumed`): micro_batch 1,
 * sequence_parallel on when tp > 1, recompute none, cp / ep /
 * virtual_stages 1, kv_heads = heads. Overlap settings come from the words
 * of "source" and "notes" ("tp-comm-overlap"; "param-gather" or
 * "distributed optimizer" → Megatron's distributed optimizer;
 * "grad-reduce-in-bf16"); the gradient reduction is overlapped with the
 * backward (Megatron-core recipes) and in fp32 unless stated. Attention is fused (flash)
 * unless the record recomputes the attention core selectively or the GPU
 * predates Hopper (A100 / V100-era Megatron ran unfused attention with a
 * fused softmax). Fields loom does not use are ignored.
 *
 * Units: seconds.
 */
#ifndef LOOM_CALIB_FIT_H
#define LOOM_CALIB_FIT_H

#include <stddef.h>
#include <stdbool.h>
#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/parallel.h"
#include "graph/graph.h"

typedef struct {
    char model[64];
    char gpu[48];            /* canonical device name */
    int64_t layers, hidden, heads, ffn, vocab, gpus;
    loom_parallel par;       /* the configuration, with assumptions filled in */
    double measured_s;       /* iteration time */
    char assumed[192];       /* what was not in the record and was assumed ("" = none) */
} loom_calib_record;

/* Reads a records file. *out (free() it) holds *n records. Errors name the
 * file and the JSON path ("$.records[3].tp: expected an integer in [1, …]"). */
loom_status loom_calib_records_load(const char *path, loom_calib_record **out, size_t *n,
                                    loom_error *err);

/* The record's graph (one micro-batch) and cluster (num_gpus / 8 DGX nodes). */
loom_status loom_calib_record_graph(const loom_calib_record *r, loom_graph **out,
                                    loom_error *err);
loom_status loom_calib_record_cluster(const loom_calib_record *r, loom_cluster *out,
                                      loom_error *err);
/* Whether a record's GPU has a DGX preset its cluster can be built from,
 * and their names ("A100-SXM4-80GB, …") into buf. */
bool loom_calib_record_has_preset(const char *gpu);
const char *loom_calib_record_presets(char *buf, size_t n);

/* Predicted iteration time of every record under calibration cal (NULL =
 * loom_calib_default of each record's GPU): predicted[i]. */
loom_status loom_calib_predict(const loom_calib_record *recs, size_t n, const loom_calib *cal,
                               double *predicted, loom_error *err);

/* The parameters `loom calibrate` fits, with their physical bounds:
 * X(field, lo, hi, per_peak). A per_peak parameter's bounds are seconds of
 * work at the device's dense bf16 peak, searched in log space (for a FLOP
 * count such as gemm_half_flops; it stays at the prior's 3 us fixed cost per
 * GEMM: fitting it, within 1-10 us, did not improve the fit or the
 * leave-one-out errors on the published runs). */
#define LOOM_CALIB_FIT_PARAMS(X)                                                   \
    X(gemm_eff_max, 0.30, 0.95, false)    /* large-GEMM fraction of peak */        \
    X(mem_eff, 0.40, 0.95, false)         /* HBM fraction of memory-bound kernels */\
    X(attn_eff, 0.20, 0.90, false)        /* flash attention fraction of peak */   \
    X(intra_link_eff, 0.40, 0.95, false)  /* NVLink fraction NCCL reaches */       \
    X(grad_sync_overlap, 0.0, 1.0, false) /* share of the DP sync hidden */

typedef struct {
    size_t n;               /* records of the device used */
    double rms_log_err;     /* sqrt(mean (ln pred/meas)²) after the fit */
    double median_abs_err;  /* |pred - meas| / meas */
    double max_abs_err;
    int sweeps;             /* coordinate-descent sweeps run */
} loom_calib_fit_stats;

/* Fits the LOOM_CALIB_FIT_PARAMS of the records measured on `device` (a
 * name loom_device_find knows), starting from and writing into *cal (which
 * should hold loom_calib_prior of the device; it is also the prior). Errors: no record of the
 * device; a record that cannot be evaluated (named). */
loom_status loom_calib_fit(const loom_calib_record *recs, size_t n, const char *device,
                           loom_calib *cal, loom_calib_fit_stats *st, loom_error *err);

#endif
