/*
 * calib.h — calibrated efficiencies of the cost model (docs/design.md §4).
 *
 * The roofline and alpha-beta formulas give ideal times; real kernels and
 * NCCL reach a fraction of peak. These fractions live here, with defaults per
 * device (loom_calib_default) and a JSON file ("format": "loom-calib/1")
 * that `loom calibrate` fits from measured runs and `--calib` reads.
 *
 * GEMM efficiency rolls off for small GEMMs (fixed per-kernel costs: launch,
 * tail waves, prologue/epilogue):
 *     eff(F) = gemm_eff_max · F / (F + gemm_half_flops)
 * so the time F / (peak · eff) = (F + gemm_half_flops) / (peak · gemm_eff_max):
 * a linear cost plus a fixed one worth gemm_half_flops of work.
 *
 * Units: efficiencies are fractions in (0, 1]; gemm_half_flops in FLOPs;
 * kernel_overhead_s in seconds.
 */
#ifndef LOOM_CALIB_H
#define LOOM_CALIB_H

#include "costs/device.h"
#include "base/error.h"

#define LOOM_CALIB_FORMAT "loom-calib/1"

typedef struct {
    char device[48];          /* device the values are for ("" = any) */
    char note[160];           /* provenance: "defaults" or what it was fitted from */
    double gemm_eff_max;      /* fraction of tensor-core peak large GEMMs reach */
    double gemm_half_flops;   /* GEMM FLOPs at which efficiency is half of gemm_eff_max */
    double attn_eff;          /* fraction of peak of fused (flash) attention, fwd and bwd */
    double attn_half_flops;   /* attention FLOPs at which efficiency is half of attn_eff */
    double attn_fa2_frac;     /* FlashAttention-2's speed relative to the fused kernel of
                                 attn_eff (cuDNN / FA3 on Hopper): runs whose attention is
                                 PyTorch SDPA or flash-attn 2 (loom_cost_model_set_attention) */
    double mem_eff;           /* fraction of HBM bandwidth memory-bound kernels reach */
    double eager_mem_eff;     /* fraction of HBM bandwidth plain streaming kernels reach:
                                 eager PyTorch's chains of ATen element-wise kernels
                                 (--elementwise eager, eager.h) and the MoE dispatcher's
                                 permutation kernels (compute.c pass_s) */
    double vector_eff;        /* fraction of the CUDA-core peak of pointwise math */
    double intra_link_eff;    /* fraction of NVLink bandwidth NCCL reaches (bus bandwidth) */
    double inter_link_eff;    /* fraction of NIC bandwidth NCCL reaches across nodes */
    double kernel_overhead_s; /* per kernel launch gap, added to each kernel */
    double grad_sync_overlap; /* fraction of data-parallel gradient sync hidden behind backward */
} loom_calib;

/* The numeric fields with their valid ranges (lo, hi, whether lo itself is
 * excluded), in file order: one list for validation, the JSON reader and
 * writer, and the fitter's bounds. X(name, lo, hi, lo_open). */
#define LOOM_CALIB_FIELDS(X)                \
    X(gemm_eff_max, 0, 1, true)             \
    X(gemm_half_flops, 0, 1e18, false)      \
    X(attn_eff, 0, 1, true)                 \
    X(attn_half_flops, 0, 1e18, false)      \
    X(attn_fa2_frac, 0, 1, true)            \
    X(mem_eff, 0, 1, true)                  \
    X(eager_mem_eff, 0, 1, true)            \
    X(vector_eff, 0, 1, true)               \
    X(intra_link_eff, 0, 1, true)           \
    X(inter_link_eff, 0, 1, true)           \
    X(kernel_overhead_s, 0, 1e-2, false)    \
    X(grad_sync_overlap, 0, 1, false)

/* Defaults for device d (NULL = generic values): loom_calib_published_fit,
 * with the GEMM and attention fractions of peak of its GPU family (Hopper,
 * Blackwell) fitted by bench/training_accuracy.py to the published training
 * runs of many sources (examples/calibration/training-runs.json). */
void loom_calib_default(const loom_device *d, loom_calib *out);

/* loom_calib_prior with the fit `loom calibrate
 * examples/calibration/published-runs.json` gives for the GPUs that have
 * runs there, and their fractions of peak for the GPUs that inherit them
 * (tests/test_calib_fit.c refits and compares). */
void loom_calib_published_fit(const loom_device *d, loom_calib *out);

/* The round-number starting point (stated basis in calib.c) that
 * `loom calibrate` fits from and pulls towards. */
void loom_calib_prior(const loom_device *d, loom_calib *out);

/* Checks every field's range; errors name the field ("gemm_eff_max: expected
 * a number in (0, 1], found 1.5"). */
loom_status loom_calib_validate(const loom_calib *c, loom_error *err);

/* GEMM efficiency eff(F) = gemm_eff_max · F / (F + gemm_half_flops). */
double loom_calib_gemm_eff(const loom_calib *cal, double flops);

/* Reads a "loom-calib/1" file. Fields absent from the file keep the defaults
 * of the file's "device" (generic if absent). Errors name file + JSON path. */
loom_status loom_calib_load(const char *path, loom_calib *out, loom_error *err);
/* Writes c atomically (temp + rename); deterministic text. */
loom_status loom_calib_save(const char *path, const loom_calib *c, loom_error *err);

#endif
