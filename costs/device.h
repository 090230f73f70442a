/*
 * device.h — GPU device presets: peak dense FLOP/s per dtype, HBM bandwidth
 * and capacity, NVLink bandwidth, TDP (docs/design.md §4).
 *
 * Figures come from ../shared/data/hardware.json (vendor datasheets, MLPerf
 * system descriptions); device.c cites the source of each. Peak FLOP/s are
 * DENSE tensor-core figures (the sparse "2:4" numbers vendors headline are
 * twice these). peak_flops[LOOM_DTYPE_FP32] is the TF32 tensor-core figure
 * where the GPU has one (V100 has none: its FP32 CUDA-core peak). A zero
 * entry means the dtype is not supported by the tensor cores (fp8 before
 * Hopper, bf16 on V100). vector_flops is the non-tensor (CUDA-core) FP32
 * peak, which bounds pointwise/norm/softmax kernels.
 *
 * Units: FLOP/s, bytes/s, bytes, watts.
 */
#ifndef LOOM_DEVICE_H
#define LOOM_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include "graph/graph.h"

typedef struct {
    char name[48];                        /* canonical, e.g. "H100-SXM5-80GB" */
    double peak_flops[LOOM_DTYPE_COUNT];  /* dense tensor-core FLOP/s per dtype (0 = unsupported) */
    double vector_flops;                  /* FP32 CUDA-core FLOP/s (non-matmul kernels) */
    double hbm_bw_Bps;                    /* HBM bandwidth, bytes/s */
    int64_t hbm_bytes;                    /* HBM capacity, bytes */
    double nvlink_Bps;                    /* NVLink per direction per GPU, bytes/s */
    double tdp_w;                         /* board power, watts */
    double fp4_flops;                     /* dense block-scaled FP4 (NVFP4, MXFP4) tensor-core
                                             FLOP/s; 0 before Blackwell */
    double host_Bps;                      /* link to host memory per direction per GPU, bytes/s
                                             (PCIe, NVLink-C2C); 0: PCIe Gen4 x16 assumed */
} loom_device;

/* A GPU's host link when the device does not say (host_Bps 0): PCIe Gen4
 * x16, 32 GB/s per direction. */
#define LOOM_HOST_LINK_DEFAULT_BPS 32e9

/* Case-insensitive lookup of a canonical name ("H100-SXM5-80GB") or an alias
 * ("H100", "H100-SXM", "H100-SXM-80GB", "A100-80GB", "A100-40GB", "H200",
 * "B200", "V100", …). NULL if unknown. */
const loom_device *loom_device_find(const char *name);

/* The presets, in a fixed order (for listing in error messages). */
size_t loom_device_count(void);
const loom_device *loom_device_at(size_t i);

/* Writes "A100-SXM4-40GB, A100-SXM4-80GB, …" (the canonical names) into buf;
 * for "unknown gpu" messages. Returns buf. */
char *loom_device_list_names(char *buf, size_t n);

/* Peak FLOP/s of d for dtype t (0 when unsupported or t out of range). */
double loom_device_peak_flops(const loom_device *d, loom_dtype t);

#endif
