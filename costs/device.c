/*
 * device.c — the GPU presets and their lookup by name.
 *
 * Every figure is from ../shared/data/hardware.json unless its comment says
 * otherwise; that file cites, per GPU, the vendor datasheet and the MLPerf
 * system descriptions it was checked against. Conventions:
 *   - peak_flops are DENSE tensor-core FLOP/s (datasheets headline 2:4-sparse
 *     figures, twice these: "specifications 1/2 lower without sparsity");
 *   - fp32 is the TF32 tensor-core figure (what cuBLAS uses for fp32 GEMMs
 *     under PyTorch's default allow_tf32 for matmul on Ampere+);
 *   - nvlink_Bps is per direction: half the "bidirectional per GPU" figure;
 *   - HBM capacities are nominal GB read as GiB (HBM stacks are binary-sized:
 *     an 80 GB A100/H100 has five 16 GiB stacks).
 * GB in the sources are 10^9 bytes for bandwidths.
 */
#include "costs/device.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define T 1e12   /* tera */
#define G 1e9    /* giga */
#define GIB ((int64_t)1 << 30)

/* Dtype order of loom_dtype: BF16, FP16, FP32, FP8, INT64, INT32, U8. */
#define PEAKS(bf16, fp16, fp32, fp8) {(bf16), (fp16), (fp32), (fp8), 0, 0, 0}

_Static_assert(LOOM_DTYPE_BF16 == 0 && LOOM_DTYPE_FP16 == 1 && LOOM_DTYPE_FP32 == 2 &&
                   LOOM_DTYPE_FP8 == 3 && LOOM_DTYPE_COUNT == 7,
               "PEAKS() lists dtypes in loom_dtype order");

/* The last field, the host link per GPU and direction (CPU activation
 * offloading, costs/eval.c): PCIe x16 at its nominal 16 (Gen3), 32 (Gen4) or
 * 64 GB/s (Gen5) for the discrete boards; a GB200 superchip's NVLink-C2C
 * gives its Grace CPU 900 GB/s bidirectional to its two B200s, 225 GB/s per
 * GPU and direction. */
static const loom_device presets[] = {
    /* A100 datasheet: 312 TF dense bf16/fp16, 156 TF TF32, no fp8; 19.5 TF
     * FP32 CUDA-core (datasheet "FP32 19.5 TFLOPS"); 1,555 GB/s HBM2; NVLink3
     * 600 GB/s bidirectional; 400 W. */
    {"A100-SXM4-40GB", PEAKS(312 * T, 312 * T, 156 * T, 0), 19.5 * T, 1555 * G, 40 * GIB,
     300 * G, 400, 0, 32 * G},
    /* A100 80GB: same compute; 2,039 GB/s HBM2e (datasheet; MLPerf v2.0
     * dgxa100 system JSON for NVLink/NICs). */
    {"A100-SXM4-80GB", PEAKS(312 * T, 312 * T, 156 * T, 0), 19.5 * T, 2039 * G, 80 * GIB,
     300 * G, 400, 0, 32 * G},
    /* H100 SXM5 datasheet (dense = sparse / 2): 989.4 TF bf16/fp16, 494.7
     * TF32, 1,978.9 fp8; 66.9 TF FP32 CUDA-core (datasheet "FP32 67
     * TFLOPS"); 3.35 TB/s HBM3; NVLink4 900 GB/s bidirectional; 700 W. */
    {"H100-SXM5-80GB", PEAKS(989.4 * T, 989.4 * T, 494.7 * T, 1978.9 * T), 66.9 * T, 3350 * G,
     80 * GIB, 450 * G, 700, 0, 64 * G},
    /* H200 SXM: H100's compute (hardware.json: "same compute as H100 SXM"),
     * 141 GB HBM3e at 4.8 TB/s, NVLink4, 700 W. */
    {"H200-SXM-141GB", PEAKS(989.4 * T, 989.4 * T, 494.7 * T, 1978.9 * T), 66.9 * T, 4800 * G,
     141 * GIB, 450 * G, 700, 0, 64 * G},
    /* HGX B200 spec table (per GPU, 1000 W): 2,250 TF bf16 dense, 1,100
     * TF32, 4,500 fp8; 180 GB at 7.7 TB/s (the HGX table; the GTC-2024
     * announcement said 192 GB / 8 TB/s); NVLink5 1,800 GB/s bidirectional.
     * FP32 CUDA-core 75 TF: HGX B200 table "FP32 600 TFLOPS" per 8 GPUs
     * (not in hardware.json; medium confidence). Dense FP4 (NVFP4) 9,000 TF
     * (hardware.json, docs/data/devices-new.json: 18 PF sparse). */
    {"B200-HGX-180GB", PEAKS(2250 * T, 2250 * T, 1100 * T, 4500 * T), 75 * T, 7700 * G,
     180 * GIB, 900 * G, 1000, 9000 * T, 64 * G},
    /* V100 SXM2 16GB: 125 TF fp16 tensor cores, no bf16, no TF32 (fp32 is
     * the 15.7 TF CUDA-core peak), no fp8; 900 GB/s HBM2; NVLink2 300 GB/s
     * bidirectional. 300 W is the V100 SXM2 datasheet TDP (not in
     * hardware.json). */
    {"V100-SXM2-16GB", PEAKS(0, 125 * T, 15.7 * T, 0), 15.7 * T, 900 * G, 16 * GIB, 150 * G,
     300, 0, 16 * G},
    /* The presets below are from docs/data/devices-new.json, whose "sources"
     * field cites each figure (datasheets, vendor docs, DeepSeek-V3 report). */
    /* H800 SXM5: H100's die and tensor throughput; NVLink cut to 400 GB/s
     * bidirectional (NVIDIA H800 datasheet; DeepSeek-V3 arXiv:2412.19437
     * §3.2.2 measures ~160 GB/s usable); 3.35 TB/s HBM3; 700 W. */
    {"H800-SXM5-80GB", PEAKS(989.4 * T, 989.4 * T, 494.7 * T, 1978.9 * T), 66.9 * T, 3350 * G,
     80 * GIB, 200 * G, 700, 0, 64 * G},
    /* H20 96GB (partner spec sheet as reproduced by alibaba/InferSim, medium
     * confidence): 148 TF bf16, 74 TF32, 296 fp8; 4.0 TB/s; NVLink 900
     * GB/s bidirectional; 400 W. */
    {"H20-96GB", PEAKS(148 * T, 148 * T, 74 * T, 296 * T), 44 * T, 4000 * G, 96 * GIB, 450 * G,
     400, 0, 64 * G},
    /* B200 in a GB200 NVL72 rack (1,200 W): 2,500 TF bf16 dense, 1,250
     * TF32, 5,000 fp8; 186 GB at 8 TB/s; NVLink5 1,800 GB/s bidirectional
     * to all 72 GPUs of the rack through the NVLink switch trays. Dense FP4
     * 10,000 TF (20 PF sparse; docs/data/devices-new.json). */
    {"B200-NVL72-186GB", PEAKS(2500 * T, 2500 * T, 1250 * T, 5000 * T), 80 * T, 8000 * G,
     186 * GIB, 900 * G, 1200, 10000 * T, 225 * G},
    /* AMD Instinct MI300X (OAM, 750 W; AMD datasheet): 1,307.4 TF bf16
     * dense, 653.7 TF32, 2,614.9 fp8; 163.4 TF FP32 vector; 192 GB HBM3 at
     * 5.3 TB/s; Infinity Fabric 7 × 64 GB/s = 448 GB/s per direction to the
     * other 7 GPUs of the node (RCCL's collectives use it as NVLink). */
    {"MI300X-192GB", PEAKS(1307.4 * T, 1307.4 * T, 653.7 * T, 2614.9 * T), 163.4 * T, 5300 * G,
     192 * GIB, 448 * G, 750, 0, 64 * G},
    /* MI325X (1000 W): MI300X's compute, 256 GB HBM3e at 6 TB/s. */
    {"MI325X-256GB", PEAKS(1307.4 * T, 1307.4 * T, 653.7 * T, 2614.9 * T), 163.4 * T, 6000 * G,
     256 * GIB, 448 * G, 1000, 0, 64 * G},
    /* L40S (PCIe, Ada, 350 W; NVIDIA datasheet, dense = sparse / 2): 362 TF
     * bf16, 183 TF32, 733 fp8; 48 GB GDDR6 at 864 GB/s; no NVLink
     * (nvlink_Bps 0: GPUs talk over PCIe Gen4, cluster.c). */
    {"L40S-48GB", PEAKS(362.05 * T, 362.05 * T, 183 * T, 733 * T), 91.6 * T, 864 * G, 48 * GIB,
     0, 350, 0, 32 * G},
    /* H100 96GB HBM2e (Meta's Grand Teton, 500 W): H100's die and
     * NVLink4; 96 GB of HBM2e at 2.4 TB/s (torchtitan's benchmarks/
     * llama3_h100_202412_torchtitan.md and asyncTP_llama3_h100_2025-06_
     * torchtitan.md: "Each H100 GPU is equipped with 96GB HBM2e with 2.4
     * TB/sec peak memory bandwidth", "We used the default 500W power
     * limit"). The dense peaks are the SXM5's: what the 500 W cap takes off
     * the tensor clock is not published. The "H100" prefix gives it the
     * H100 fit's fractions (calib.c). */
    {"H100-96GB-HBM2e", PEAKS(989.4 * T, 989.4 * T, 494.7 * T, 1978.9 * T), 66.9 * T, 2400 * G,
     96 * GIB, 450 * G, 500, 0, 64 * G},
};

#define N_PRESETS (sizeof presets / sizeof presets[0])

/* Other spellings users and tools write: short names, the docs/design.md §4 example
 * ("H100-SXM-80GB") and the device strings nvidia-smi / CUDA report, which a
 * profile db records. */
static const struct {
    const char *alias;
    int preset;
} aliases[] = {
    {"A100-40GB", 0},        {"A100-SXM-40GB", 0},       {"A100-40G", 0},
    {"NVIDIA A100-SXM4-40GB", 0},
    {"A100", 1},             {"A100-80GB", 1},           {"A100-SXM-80GB", 1},
    {"A100-80G", 1},         {"NVIDIA A100-SXM4-80GB", 1},
    {"H100", 2},             {"H100-SXM", 2},            {"H100-SXM5", 2},
    {"H100-SXM-80GB", 2},    {"H100-80GB", 2},           {"NVIDIA H100 80GB HBM3", 2},
    {"H200", 3},             {"H200-SXM", 3},            {"H200-141GB", 3},
    {"NVIDIA H200", 3},
    {"B200", 4},             {"HGX-B200", 4},            {"B200-180GB", 4},
    {"NVIDIA B200", 4},
    {"V100", 5},             {"V100-SXM2", 5},           {"V100-16GB", 5},
    {"Tesla V100-SXM2-16GB", 5},
    {"H800", 6},             {"H800-SXM", 6},            {"NVIDIA H800", 6},
    {"H20", 7},              {"NVIDIA H20", 7},
    {"GB200", 8},            {"B200-NVL72", 8},
    {"MI300X", 9},           {"AMD Instinct MI300X", 9},
    {"MI325X", 10},          {"AMD Instinct MI325X", 10},
    {"L40S", 11},            {"NVIDIA L40S", 11},
};

const loom_device *loom_device_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcasecmp(name, presets[i].name) == 0) return &presets[i];
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcasecmp(name, aliases[i].alias) == 0) return &presets[aliases[i].preset];
    return NULL;
}

size_t loom_device_count(void)
{
    return N_PRESETS;
}

const loom_device *loom_device_at(size_t i)
{
    return i < N_PRESETS ? &presets[i] : NULL;
}

char *loom_device_list_names(char *buf, size_t n)
{
    if (!buf || n == 0) return buf;
    buf[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < N_PRESETS && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s", i ? ", " : "", presets[i].name);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

double loom_device_peak_flops(const loom_device *d, loom_dtype t)
{
    if (!d || (int)t < 0 || t >= LOOM_DTYPE_COUNT) return 0;
    return d->peak_flops[t];
}
