/*
 * device.h — the GPU loom-profile measures on: probing (with the runtime's
 * own reason when there is none), a context holding the stream, the
 * cuBLASLt handle and workspace, and an L2-flush buffer, plus the CUDA ->
 * loom_error translation every gpu/ file uses.
 *
 * CUDA status codes are translated here and in gemm.c / cupti_timer.c only
 * (docs/design.md §2: a third-party error mechanism stops at its one file).
 */
#ifndef LOOM_GPU_DEVICE_H
#define LOOM_GPU_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include "base/error.h"

typedef struct {
    char name[256];              /* cudaDeviceProp.name, e.g. "NVIDIA H100 80GB HBM3" */
    int ordinal;
    int cc_major, cc_minor;      /* compute capability */
    int sm_count;
    int64_t mem_bytes;           /* total device memory */
    int64_t l2_bytes;
    int max_smem_optin;          /* shared memory per block with opt-in, bytes */
    int clock_khz;               /* peak SM clock */
    int runtime_version;         /* 13000 = CUDA 13.0 */
    int driver_api_version;      /* highest CUDA version the driver supports */
    char driver[64];             /* kernel driver release ("580.65.06"), "" if unknown */
} loom_gpu_info;

/* Fills info for device `ordinal`. No usable device: LOOM_ERR_DEVICE with
 * "no CUDA device: <cudaGetErrorString of the runtime's answer>". */
loom_status loom_gpu_probe(int ordinal, loom_gpu_info *info, loom_error *err);

/* "13.0" from 13000. */
void loom_gpu_version_string(int v, char *out, size_t n);

/* Translates a CUDA runtime status: LOOM_OK, or LOOM_ERR_DEVICE with
 * "WHAT: <error name>: <error string>". */
loom_status loom_gpu_check(cudaError_t e, const char *what, loom_error *err);

typedef struct loom_gpu loom_gpu;

/* Selects the device and creates the stream, the cuBLASLt handle, a 32 MiB
 * matmul workspace and a 2 × L2 buffer for cache flushes. */
loom_status loom_gpu_create(int ordinal, loom_gpu **out, loom_error *err);
void loom_gpu_destroy(loom_gpu *g);

const loom_gpu_info *loom_gpu_info_of(const loom_gpu *g);
cudaStream_t loom_gpu_stream(const loom_gpu *g);
void *loom_gpu_cublaslt(const loom_gpu *g);          /* cublasLtHandle_t */
void *loom_gpu_workspace(const loom_gpu *g, size_t *bytes);
/* FP8 tensor-core GEMMs (Ada, Hopper and later: compute capability >= 8.9). */
bool loom_gpu_has_fp8(const loom_gpu *g);

/* Evicts the L2 cache by zeroing a buffer twice its size (a kernel on the
 * stream, outside any op's external correlation id). */
loom_status loom_gpu_flush_l2(loom_gpu *g, loom_error *err);

/* cudaMalloc with the size and purpose in the error: LOOM_ERR_UNSUPPORTED
 * when the device is out of memory, LOOM_ERR_DEVICE otherwise. */
loom_status loom_gpu_alloc(size_t bytes, const char *what, void **out, loom_error *err);

#endif
