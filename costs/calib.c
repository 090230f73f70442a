/*
 * calib.c — default efficiencies per device, range checks, and the
 * size-dependent GEMM efficiency.
 *
 * The prior (loom_calib_prior) is the starting point before `loom calibrate`
 * fits a device from measured runs; it is deliberately round numbers with a
 * stated basis, not fits (the defaults add the shipped fit, below):
 *   gemm_eff_max   large cuBLAS GEMMs: ~0.85 of peak on A100 (~265 of 312
 *                  TF), ~0.78 on H100/H200 (~770 of 989 TF; 700 W clocks),
 *                  0.75 assumed on B200, 0.8 on V100 (~100 of 125 TF).
 *   gemm_half_flops  the work a GEMM loses to fixed per-kernel costs: 3 us at
 *                  peak (launch + prologue + tail wave), i.e. 3e-6 · peak.
 *   attn_eff       flash attention fwd+bwd: FlashAttention-2 reaches ~0.55-
 *                  0.7 of A100 peak forward and less backward (Dao 2023);
 *                  on Hopper FA2/cuDNN reach ~0.45-0.6.
 *   attn_half_flops  the work an attention kernel loses to fixed costs (one
 *                  wave of query tiles, softmax prologue): 21 us at peak.
 *                  Measured on an H100 (docs/profile-db.md, 19 causal shapes,
 *                  seq 4k-128k): cuDNN reaches eff_max·F/(F + F_half) with
 *                  F_half 20 GFLOP forward and 22 backward, FlashAttention-2
 *                  25, i.e. 20-25 us at the 989 TFLOP/s peak.
 *   attn_fa2_frac  FlashAttention-2's speed relative to the fused kernel on
 *                  the same GPU. Hopper and newer: 0.56, measured on an H100
 *                  over the same shapes (fwd + 2.5x-work bwd time: cuDNN's
 *                  eff_max 0.63 / 0.535 against FA2's 0.33 / 0.31; FA2 has no
 *                  wgmma/TMA path). Ampere and older: 1 (FA2 is the fast
 *                  kernel there; cuDNN's is no faster). Blackwell takes the
 *                  Hopper figure, unmeasured.
 *   mem_eff        streaming kernels reach ~0.8-0.9 of HBM bandwidth.
 *   eager_mem_eff  the same prior, and not fitted: eager PyTorch's chains of
 *                  ATen element-wise kernels (eager.h) are plain streaming
 *                  kernels, while the fitted mem_eff is an in-run residual
 *                  of Megatron steps (0.40 on H100) whose runs have no eager
 *                  chain. torchtitan's one eager / compiled pair (Llama 3 8B,
 *                  FSDP on 8 and 128 Grand Teton H100s, the same
 *                  configuration: benchmarks/llama3_h100_202412_torchtitan.md
 *                  Tables 1 and 3) measures eager 1.157x and 1.162x the
 *                  compiled step; the chains at the prior put it 1.15x, at
 *                  the fitted 0.40 1.41x.
 *   link effs      NCCL bus bandwidth / wire rate: NCCL's own model caps
 *                  A100 NVLink at 235 of 300 GB/s = 0.78 (tuning.cc); ~0.8
 *                  on H100 NVLink4; ~0.9 of an InfiniBand NIC.
 *   kernel_overhead_s  2 us of idle GPU between dependent kernels.
 *   grad_sync_overlap  0: no overlap assumed until fitted.
 * Units: fractions, FLOPs, seconds.
 */
#include "costs/calib.h"

#include <math.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

#define HALF_S 3e-6
#define ATTN_HALF_S 21e-6
#define FA2_FRAC_HOPPER 0.56
/* bench/training_accuracy.py's fits to the Blackwell and the Hopper runs
 * of examples/calibration/training-runs.json (family_fit below) */
#define BLACKWELL_GEMM_EFF 0.50
#define BLACKWELL_ATTN_EFF 0.44
#define HOPPER_GEMM_EFF 0.633
#define HOPPER_ATTN_EFF 0.328

/* Hopper and newer: a fused attention kernel (cuDNN, FA3) that uses the
 * warpgroup tensor-core instructions FlashAttention-2 does not. */
static bool hopper_or_newer(const char *name)
{
    static const char *const prefixes[] = {"H100", "H200", "H800", "H20-", "GH200", "B200", "B300",
                                           "GB200", "GB300"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) return true;
    return false;
}

void loom_calib_prior(const loom_device *d, loom_calib *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->note, sizeof out->note, "defaults");
    out->gemm_eff_max = 0.75;
    out->attn_eff = 0.5;
    out->mem_eff = 0.8;
    out->eager_mem_eff = 0.8;
    out->vector_eff = 0.5;
    out->intra_link_eff = 0.8;
    out->inter_link_eff = 0.9;
    out->kernel_overhead_s = 2e-6;
    out->grad_sync_overlap = 0;
    out->gemm_half_flops = 3e9;   /* generic: 3 us at ~1 PFLOP/s */
    out->attn_half_flops = 21e9;
    out->attn_fa2_frac = 1;
    if (!d) return;
    snprintf(out->device, sizeof out->device, "%s", d->name);
    double peak = d->peak_flops[LOOM_DTYPE_BF16] > d->peak_flops[LOOM_DTYPE_FP16]
                      ? d->peak_flops[LOOM_DTYPE_BF16]
                      : d->peak_flops[LOOM_DTYPE_FP16];
    if (peak > 0) out->gemm_half_flops = HALF_S * peak;
    if (peak > 0) out->attn_half_flops = ATTN_HALF_S * peak;
    if (hopper_or_newer(d->name)) out->attn_fa2_frac = FA2_FRAC_HOPPER;
    if (strncmp(d->name, "A100", 4) == 0) {
        out->gemm_eff_max = 0.85;
        out->attn_eff = 0.55;
        out->intra_link_eff = 0.78;
    } else if (strncmp(d->name, "H100", 4) == 0 || strncmp(d->name, "H200", 4) == 0) {
        out->gemm_eff_max = 0.78;
        out->attn_eff = 0.5;
        out->mem_eff = 0.85;
        out->eager_mem_eff = 0.85;
    } else if (strncmp(d->name, "V100", 4) == 0) {
        out->gemm_eff_max = 0.8;
        out->intra_link_eff = 0.7;   /* DGX-1 hybrid cube-mesh: rings share links */
    }
}

/* The shipped fit: `loom calibrate examples/calibration/published-runs.json
 * --gpu G` from loom_calib_prior, the LOOM_CALIB_FIT_PARAMS of calib_fit.h
 * (tests/test_calib_fit.c refits and compares). A100-SXM4-40GB shares the
 * A100-80GB's chip and NVLink, H200 the H100's compute die and NVLink4:
 * they take the same fractions. */
static const struct {
    const char *prefix;
    double gemm_eff_max, mem_eff, attn_eff, intra_link_eff, grad_sync_overlap;
} fitted[] = {
    {"A100", 0.750170, 0.654800, 0.550000, 0.639771, 0.000000},
    {"H100", 0.670966, 0.400095, 0.286594, 0.949905, 0.626165},
    {"H200", 0.670966, 0.400095, 0.286594, 0.949905, 0.626165},
};

/* Devices with no published run in the fit take the fractions of peak that
 * the same software stack (Megatron-Core, Transformer Engine, cuBLAS,
 * FlashAttention, NCCL) reaches on the generation before, which is fitted:
 * the fit absorbs framework overheads the roofline does not see, and those
 * are not specific to one chip. Without this, a Blackwell GPU would keep the
 * optimistic prior while its predecessor runs at the fitted fractions. The
 * check is bench/training_accuracy.py's B200 and GB200 rows, which no fit
 * sees. */
static const struct {
    const char *prefix, *like;
} inherits[] = {
    {"B200", "H100"}, {"H800", "H100"}, {"H20-", "H100"},
};

/* Each GPU family's GEMM and attention fractions of peak, fitted by
 * bench/training_accuracy.py to the training-runs.json records of the
 * family (cyclic golden-section search per parameter, Huber loss on
 * |ln(pred / meas)|), its rows there predicted leave-one-source-out: each
 * source by the fit to the other sources. They replace the published-runs
 * fit's two for the family; its memory, link and overlap fractions stay.
 *   Hopper   published-runs.json pins H100's two on nine runs of one
 *            source (Megatron-LM's weak-scaling table, GPT 1.7B-462B at 4k
 *            tokens), which cannot tell the two apart; the 66 SXM runs of
 *            eleven sources (Megatron-Bridge, NeMo, MLPerf, torchtitan,
 *            llm-foundry, FMS-FSDP, DGX Cloud, ...) can: the 8k-token Llama 3
 *            8B runs came out +12% to +20% on that pair and the GEMM-bound
 *            175B-405B runs -11% to -13%. The fit to all 75 (the nine
 *            included) puts GEMMs lower and attention higher (0.671 ->
 *            0.633, 0.287 -> 0.328). Both stay below what a kernel reaches
 *            alone (GEMM 0.71-0.83, cuDNN attention 0.54-0.63:
 *            docs/profile-db.md): the in-run fraction also pays for NCCL's
 *            contention, clocks under power and what the roofline does not
 *            see.
 *   Blackwell  inheriting Hopper's put the published Blackwell runs off in
 *            a pattern no single constant explains: GEMM-bound runs too fast
 *            (Llama 3.1 405B on 128-2,496 GB200/B200 -11% to -18%,
 *            DeepSeek-V3 on 256 B200 -22%) and attention-bound ones too slow
 *            (Llama 3 8B at 8k tokens +8% to +12%, at 32k-128k with CP +22%
 *            to +35%). The dense peak is quoted at the boost tensor clock
 *            (B200: 148 SMs x 8,192 bf16 FLOP/clk at 1.86 GHz = 2.25 PF;
 *            GB200's 2.5 PF is the same silicon at 2.06 GHz under a 1,200 W
 *            cap), which a dense GEMM cannot hold at the power limit: it
 *            draws 2.3x Hopper's tensor throughput from 1.4-1.7x its power
 *            (GB200 runs Megatron-Bridge's Llama 3 8B recipe 1.045x as fast
 *            as B200, not the spec's 1.11x); cuDNN's fused attention on
 *            Blackwell (tcgen05 MMAs from tensor memory, 2-CTA backward)
 *            reaches a larger share of the bf16 peak. */
static const struct {
    const char *prefix;
    double gemm_eff_max, attn_eff;
    const char *family;
} family_fit[] = {
    {"B200", BLACKWELL_GEMM_EFF, BLACKWELL_ATTN_EFF, "Blackwell"},
    {"H100", HOPPER_GEMM_EFF, HOPPER_ATTN_EFF, "Hopper"},
    {"H200", HOPPER_GEMM_EFF, HOPPER_ATTN_EFF, "Hopper"},
};

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* The GPU whose published-runs fit a device takes: its own name, or the
 * predecessor it inherits from (inherits[]). */
static const char *fitted_like(const char *name)
{
    for (size_t i = 0; i < sizeof inherits / sizeof inherits[0]; i++)
        if (has_prefix(name, inherits[i].prefix)) return inherits[i].like;
    return name;
}

/* The published-runs fit of d's own name, else of the GPU it inherits
 * from. */
void loom_calib_published_fit(const loom_device *d, loom_calib *out)
{
    loom_calib_prior(d, out);
    if (!d) return;
    const char *name = fitted_like(d->name);
    for (size_t i = 0; i < sizeof fitted / sizeof fitted[0]; i++) {
        if (!has_prefix(name, fitted[i].prefix)) continue;
        out->gemm_eff_max = fitted[i].gemm_eff_max;
        out->mem_eff = fitted[i].mem_eff;
        out->attn_eff = fitted[i].attn_eff;
        out->intra_link_eff = fitted[i].intra_link_eff;
        out->grad_sync_overlap = fitted[i].grad_sync_overlap;
        snprintf(out->note, sizeof out->note,
                 "fitted by loom calibrate to examples/calibration/published-runs.json%s%s%s",
                 name != d->name ? " (" : "", name != d->name ? name : "",
                 name != d->name ? "'s fractions of peak)" : "");
        break;
    }
}

void loom_calib_default(const loom_device *d, loom_calib *out)
{
    loom_calib_published_fit(d, out);
    if (!d) return;
    /* the family of d's own name first (B200 inherits H100's other
     * fractions but has its own pair), else of the GPU it inherits from */
    const char *names[2] = {d->name, fitted_like(d->name)};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof family_fit / sizeof family_fit[0]; i++) {
            if (!has_prefix(names[k], family_fit[i].prefix)) continue;
            out->gemm_eff_max = family_fit[i].gemm_eff_max;
            out->attn_eff = family_fit[i].attn_eff;
            snprintf(out->note, sizeof out->note,
                     "H100's fit to published-runs.json, GEMM and attention fitted to the %s "
                     "runs of many sources (bench/training_accuracy.py)",
                     family_fit[i].family);
            return;
        }
}

loom_status loom_calib_validate(const loom_calib *c, loom_error *err)
{
    const struct { const char *name; double v, lo, hi; bool lo_open; } f[] = {
#define LOOM_X(name, lo, hi, open) {#name, c->name, lo, hi, open},
        LOOM_CALIB_FIELDS(LOOM_X)
#undef LOOM_X
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        double v = f[i].v;
        if (!isfinite(v) || v > f[i].hi || v < f[i].lo || (f[i].lo_open && v == f[i].lo))
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "calibration %s: expected a number in %c%g, %g], found %g",
                                  f[i].name, f[i].lo_open ? '(' : '[', f[i].lo, f[i].hi, v);
    }
    return LOOM_OK;
}

double loom_calib_gemm_eff(const loom_calib *cal, double flops)
{
    if (!(flops > 0)) return cal->gemm_eff_max;
    return cal->gemm_eff_max * flops / (flops + cal->gemm_half_flops);
}
