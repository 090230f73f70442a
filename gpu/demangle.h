/*
 * demangle.h — readable kernel names for the profile db.
 *
 * CUPTI reports C++ kernels by their mangled names
 * ("_ZN12_GLOBAL__N_120loom_attn_fwd_kernelI13__nv_bfloat16EEvPKT_"). The db
 * keeps the demangled name without its return type, parameter list and
 * "(anonymous namespace)::" qualifiers ("loom_attn_fwd_kernel<__nv_bfloat16>"),
 * which still tells template instances apart. Plain names (cuBLAS's
 * "sm90_xmma_gemm_…") and names that fail to demangle are kept as they are.
 */
#ifndef LOOM_GPU_DEMANGLE_H
#define LOOM_GPU_DEMANGLE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the readable form of `name` into out (n bytes, truncated). */
void loom_demangle(const char *name, char *out, size_t n);

#ifdef __cplusplus
}
#endif

#endif
