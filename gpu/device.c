/*
 * device.c — device probe, context, CUDA status translation (device.h).
 *
 * The kernel driver's release is not exposed by the CUDA runtime (NVML has
 * it); on Linux the driver publishes it in /proc/driver/nvidia/version
 * ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  …"), which is
 * read when present.
 */
#include "gpu/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "gpu/kernels.h"

#define WORKSPACE_BYTES ((size_t)32 << 20)   /* cuBLASLt's recommendation for Hopper */

struct loom_gpu {
    loom_gpu_info info;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *workspace;
    void *flush;
    size_t flush_bytes;
};

loom_status loom_gpu_check(cudaError_t e, const char *what, loom_error *err)
{
    if (e == cudaSuccess) return LOOM_OK;
    return loom_error_set(err, LOOM_ERR_DEVICE, "%s: %s: %s", what, cudaGetErrorName(e),
                          cudaGetErrorString(e));
}

void loom_gpu_version_string(int v, char *out, size_t n)
{
    snprintf(out, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

static void driver_release(char *out, size_t n)
{
    /* "NVRM version: NVIDIA UNIX [Open ]Kernel Module [for x86_64]  580.159.04  Release
     * Build ...": the release is the first word after "Kernel Module" that
     * starts with a digit and holds a dot. */
    out[0] = '\0';
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char line[512];
    if (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "Kernel Module");
        for (p = p ? p + strlen("Kernel Module") : NULL; p && *p;) {
            while (*p == ' ' || *p == '\t') p++;
            size_t k = 0;
            while (p[k] && p[k] != ' ' && p[k] != '\t' && p[k] != '\n') k++;
            if (k && k < n && *p >= '0' && *p <= '9' && memchr(p, '.', k)) {
                memcpy(out, p, k);
                out[k] = '\0';
                break;
            }
            p += k;
        }
    }
    fclose(f);
}

loom_status loom_gpu_probe(int ordinal, loom_gpu_info *info, loom_error *err)
{
    memset(info, 0, sizeof *info);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return loom_error_set(err, LOOM_ERR_DEVICE, "no CUDA device: %s", cudaGetErrorString(e));
    if (count == 0)
        return loom_error_set(err, LOOM_ERR_DEVICE,
                              "no CUDA device: the CUDA runtime found 0 devices");
    if (ordinal < 0 || ordinal >= count)
        return loom_error_set(err, LOOM_ERR_DEVICE,
                              "no CUDA device %d: the CUDA runtime found %d device%s", ordinal,
                              count, count == 1 ? "" : "s");
    struct cudaDeviceProp p;
    loom_status s;
    if ((s = loom_gpu_check(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties", err)))
        return s;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->ordinal = ordinal;
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->mem_bytes = (int64_t)p.totalGlobalMem;
    int v = 0;
    struct { enum cudaDeviceAttr a; int *dst; } attrs[] = {
        {cudaDevAttrMultiProcessorCount, &info->sm_count},
        {cudaDevAttrMaxSharedMemoryPerBlockOptin, &info->max_smem_optin},
        {cudaDevAttrClockRate, &info->clock_khz},
        {cudaDevAttrL2CacheSize, &v},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
        if ((s = loom_gpu_check(cudaDeviceGetAttribute(attrs[i].dst, attrs[i].a, ordinal),
                                "cudaDeviceGetAttribute", err)))
            return s;
    info->l2_bytes = v;
    if ((s = loom_gpu_check(cudaRuntimeGetVersion(&info->runtime_version), "cudaRuntimeGetVersion",
                            err)) ||
        (s = loom_gpu_check(cudaDriverGetVersion(&info->driver_api_version), "cudaDriverGetVersion",
                            err)))
        return s;
    driver_release(info->driver, sizeof info->driver);
    return LOOM_OK;
}

loom_status loom_gpu_create(int ordinal, loom_gpu **out, loom_error *err)
{
    *out = NULL;
    loom_gpu *g = calloc(1, sizeof *g);
    if (!g) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory creating the GPU context");
    loom_status s;
    if ((s = loom_gpu_probe(ordinal, &g->info, err)) ||
        (s = loom_gpu_check(cudaSetDevice(ordinal), "cudaSetDevice", err)) ||
        (s = loom_gpu_check(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking),
                            "cudaStreamCreate", err)))
        goto fail;
    cublasStatus_t bs = cublasLtCreate(&g->lt);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        g->lt = NULL;
        s = loom_error_set(err, LOOM_ERR_DEVICE, "cublasLtCreate: %s", cublasLtGetStatusString(bs));
        goto fail;
    }
    g->flush_bytes = (size_t)(g->info.l2_bytes > 0 ? 2 * g->info.l2_bytes : 256 << 20);
    if ((s = loom_gpu_alloc(WORKSPACE_BYTES, "cuBLASLt workspace", &g->workspace, err)) ||
        (s = loom_gpu_alloc(g->flush_bytes, "L2 flush buffer", &g->flush, err)))
        goto fail;
    *out = g;
    return LOOM_OK;
fail:
    loom_gpu_destroy(g);
    return s;
}

void loom_gpu_destroy(loom_gpu *g)
{
    if (!g) return;
    if (g->stream) cudaStreamSynchronize(g->stream);
    cudaFree(g->workspace);
    cudaFree(g->flush);
    if (g->lt) cublasLtDestroy(g->lt);
    if (g->stream) cudaStreamDestroy(g->stream);
    free(g);
}

const loom_gpu_info *loom_gpu_info_of(const loom_gpu *g) { return &g->info; }
cudaStream_t loom_gpu_stream(const loom_gpu *g) { return g->stream; }
void *loom_gpu_cublaslt(const loom_gpu *g) { return g->lt; }

void *loom_gpu_workspace(const loom_gpu *g, size_t *bytes)
{
    *bytes = WORKSPACE_BYTES;
    return g->workspace;
}

bool loom_gpu_has_fp8(const loom_gpu *g)
{
    return g->info.cc_major * 10 + g->info.cc_minor >= 89;
}

loom_status loom_gpu_flush_l2(loom_gpu *g, loom_error *err)
{
    return loom_gpu_check(loom_k_zero(g->flush, (int64_t)g->flush_bytes, g->stream), "L2 flush", err);
}

loom_status loom_gpu_alloc(size_t bytes, const char *what, void **out, loom_error *err)
{
    *out = NULL;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e == cudaSuccess) return LOOM_OK;
    *out = NULL;
    cudaGetLastError();   /* an allocation failure is not sticky: clear it */
    /* Too big for this GPU is a property of the request, not a broken
     * device: the profiler skips it and goes on. */
    return loom_error_set(err, e == cudaErrorMemoryAllocation ? LOOM_ERR_UNSUPPORTED : LOOM_ERR_DEVICE,
                          "cudaMalloc of %zu bytes for %s: %s", bytes, what, cudaGetErrorString(e));
}
