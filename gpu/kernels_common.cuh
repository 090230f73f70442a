/*
 * kernels_common.cuh — shared device helpers for loom's kernels: fp32
 * load/store of every element type, a dtype -> C++ type dispatch, a
 * counter-based hash for reproducible random numbers, block reductions and
 * grid sizing. Math is always fp32; storage is the op's dtype.
 */
#ifndef LOOM_GPU_KERNELS_COMMON_CUH
#define LOOM_GPU_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu/kernels.h"

namespace loomk {

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_fp8_e4m3 x) { return float(x); }

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x)
{
    return __float2bfloat16(x);
}
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half(x); }
template <> __device__ __forceinline__ __nv_fp8_e4m3 from_f<__nv_fp8_e4m3>(float x)
{
    return __nv_fp8_e4m3(x);
}

/* splitmix64: a counter hash, so "random" data is reproducible and needs no state. */
__device__ __forceinline__ uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [0, 1) from 24 hash bits. */
__device__ __forceinline__ float unit(uint64_t seed, uint64_t i)
{
    return (float)(mix(seed * 0x100000001b3ull ^ i) >> 40) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum (or max) over the block (blockDim.x a multiple of 32, <= 1024);
 * every thread gets the result. `sh` holds 32 floats; the block must reach
 * this call together. */
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = MAX ? warp_max(v) : warp_sum(v);
    __syncthreads();   /* sh may still be read by a previous reduction */
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (MAX ? -INFINITY : 0.f);
    return MAX ? warp_max(v) : warp_sum(v);
}
__device__ __forceinline__ float block_sum(float v, float *sh) { return block_reduce<false>(v, sh); }
__device__ __forceinline__ float block_max(float v, float *sh) { return block_reduce<true>(v, sh); }

/* Blocks for a grid-stride loop over n items: enough to fill the GPU a few
 * times over, never more than the work. */
static inline unsigned grid_for(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b > 65535 * 8) b = 65535 * 8;
    return (unsigned)(b < 1 ? 1 : b);
}

} // namespace loomk

/* Runs the statements given with T bound to dt's C++ type (bf16, fp16, fp32). */
#define LOOM_DISPATCH_FLOAT(dt, T, ...)                       \
    switch (dt) {                                            \
    case LOOM_DTYPE_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; break; } \
    case LOOM_DTYPE_FP16: { typedef __half T; __VA_ARGS__; break; }        \
    case LOOM_DTYPE_FP32: { typedef float T; __VA_ARGS__; break; }         \
    default: return cudaErrorInvalidValue;                   \
    }

/* As above, plus fp8 e4m3. */
#define LOOM_DISPATCH_ANY(dt, T, ...)                         \
    switch (dt) {                                            \
    case LOOM_DTYPE_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; break; } \
    case LOOM_DTYPE_FP16: { typedef __half T; __VA_ARGS__; break; }        \
    case LOOM_DTYPE_FP32: { typedef float T; __VA_ARGS__; break; }         \
    case LOOM_DTYPE_FP8: { typedef __nv_fp8_e4m3 T; __VA_ARGS__; break; }  \
    default: return cudaErrorInvalidValue;                   \
    }

#endif
