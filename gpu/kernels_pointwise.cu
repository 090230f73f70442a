/*
 * kernels_pointwise.cu — fills, conversions, the permute (transpose copy)
 * and the pointwise ops (add, mul, scale, dropout, gelu, silu, swiglu, rope)
 * forward and backward. Formulas in kernels.h.
 *
 * Pointwise kernels are memory-bound, so they move 16-byte packs (8 bf16 or
 * 4 fp32 elements per load) in a grid-stride loop; a scalar tail handles n
 * not a multiple of the pack. Buffers come from cudaMalloc (256-byte
 * aligned), which the pack loads rely on.
 */
#include <string.h>

#include "gpu/kernels_common.cuh"

using namespace loomk;

namespace {

const int THREADS = 256;

template <typename T, int V> struct alignas(16) Pack {
    T v[V];
};

/* One pointwise step: reads up to 3 inputs (x), writes up to 2 outputs (o)
 * and a mask byte, for element index i. */
struct OpArgs {
    loom_ew_fn fn;
    bool bwd;
    float param;
    uint64_t seed;
};

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + __expf(-x)); }

__device__ __forceinline__ void gelu_both(float x, float *y, float *dy)
{
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    float u = k0 * (x + k1 * x * x * x), t = tanhf(u);
    *y = 0.5f * x * (1.f + t);
    *dy = 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * k0 * (1.f + 3.f * k1 * x * x);
}

/* Forward x = {a, b}; backward x = {a, b, g}. */
__device__ __forceinline__ void apply(const OpArgs &op, const float *x, float *o, int64_t i,
                                      uint8_t *m)
{
    float y, d, s;
    if (!op.bwd) {
        switch (op.fn) {
        case LOOM_EW_ADD: o[0] = x[0] + x[1]; break;
        case LOOM_EW_MUL: o[0] = x[0] * x[1]; break;
        case LOOM_EW_SCALE: o[0] = op.param * x[0]; break;
        case LOOM_EW_DROPOUT:
            *m = unit(op.seed, (uint64_t)i) >= op.param;
            o[0] = *m ? x[0] / (1.f - op.param) : 0.f;
            break;
        case LOOM_EW_GELU: gelu_both(x[0], &o[0], &d); break;
        case LOOM_EW_SILU: o[0] = x[0] * sigmoid(x[0]); break;
        case LOOM_EW_SWIGLU: o[0] = x[0] * sigmoid(x[0]) * x[1]; break;
        default: break;
        }
        return;
    }
    float g = x[2];
    switch (op.fn) {
    case LOOM_EW_ADD: o[0] = g + x[0]; break;   /* the two branch gradients meet */
    case LOOM_EW_MUL: o[0] = g * x[1], o[1] = g * x[0]; break;
    case LOOM_EW_SCALE: o[0] = op.param * g; break;
    case LOOM_EW_DROPOUT: o[0] = *m ? g / (1.f - op.param) : 0.f; break;
    case LOOM_EW_GELU: gelu_both(x[0], &y, &d), o[0] = g * d; break;
    case LOOM_EW_SILU: s = sigmoid(x[0]), o[0] = g * s * (1.f + x[0] * (1.f - s)); break;
    case LOOM_EW_SWIGLU:
        s = sigmoid(x[0]);
        o[0] = g * x[1] * s * (1.f + x[0] * (1.f - s));
        o[1] = g * x[0] * s;
        break;
    default: break;
    }
}

template <typename T>
__global__ void loom_map_kernel(int64_t n, const T *__restrict__ a, const T *__restrict__ b,
                           const T *__restrict__ g, T *__restrict__ o0, T *__restrict__ o1,
                           const uint8_t *__restrict__ mask_in, uint8_t *__restrict__ mask_out,
                           OpArgs op)
{
    constexpr int V = 16 / sizeof(T);
    typedef Pack<T, V> P;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x, nv = n / V;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < nv; p += stride) {
        int64_t base = p * V;
        P pa, pb, pg, r0, r1;
        if (a) pa = *reinterpret_cast<const P *>(a + base);
        if (b) pb = *reinterpret_cast<const P *>(b + base);
        if (g) pg = *reinterpret_cast<const P *>(g + base);
#pragma unroll
        for (int v = 0; v < V; v++) {
            float x[3] = {a ? to_f(pa.v[v]) : 0.f, b ? to_f(pb.v[v]) : 0.f,
                          g ? to_f(pg.v[v]) : 0.f};
            float o[2] = {0.f, 0.f};
            uint8_t m = mask_in ? mask_in[base + v] : 0;
            apply(op, x, o, base + v, &m);
            if (mask_out) mask_out[base + v] = m;
            r0.v[v] = from_f<T>(o[0]);
            r1.v[v] = from_f<T>(o[1]);
        }
        *reinterpret_cast<P *>(o0 + base) = r0;
        if (o1) *reinterpret_cast<P *>(o1 + base) = r1;
    }
    for (int64_t i = nv * V + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float x[3] = {a ? to_f(a[i]) : 0.f, b ? to_f(b[i]) : 0.f, g ? to_f(g[i]) : 0.f};
        float o[2] = {0.f, 0.f};
        uint8_t m = mask_in ? mask_in[i] : 0;
        apply(op, x, o, i, &m);
        if (mask_out) mask_out[i] = m;
        o0[i] = from_f<T>(o[0]);
        if (o1) o1[i] = from_f<T>(o[1]);
    }
}

/* Rotate-half RoPE: one thread per (row, pair). sign = +1 forward, -1 backward. */
template <typename T>
__global__ void loom_rope_kernel(int64_t rows, int64_t d, const T *__restrict__ x, T *__restrict__ y,
                            int64_t period, float sign)
{
    const int64_t half = d / 2, n = rows * half;
    const float log2_theta = 13.287712379549449f;   /* log2(10000) */
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = p / half, i = p % half;
        float inv_freq = exp2f(-(float)(2 * i) / (float)d * log2_theta);
        float s, c;
        sincosf((float)(r % period) * inv_freq, &s, &c);
        s *= sign;
        float x1 = to_f(x[r * d + i]), x2 = to_f(x[r * d + i + half]);
        y[r * d + i] = from_f<T>(x1 * c - x2 * s);
        y[r * d + i + half] = from_f<T>(x2 * c + x1 * s);
    }
}

template <typename T>
__global__ void loom_fill_kernel(T *x, int64_t n, uint64_t seed, float lo, float hi)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = from_f<T>(lo + (hi - lo) * unit(seed, (uint64_t)i));
}

__global__ void loom_fill_index_kernel(int32_t *x, int64_t n, int32_t modulo, uint64_t seed)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = (int32_t)(mix(seed * 0x100000001b3ull ^ (uint64_t)i) % (uint64_t)modulo);
}

__global__ void loom_zero_kernel(uint4 *x16, int64_t n16, uint8_t *tail, int64_t n_tail)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride)
        x16[i] = make_uint4(0, 0, 0, 0);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_tail; i += stride)
        tail[i] = 0;
}

template <typename A, typename B>
__global__ void loom_convert_kernel(const A *src, B *dst, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = from_f<B>(to_f(src[i]));
}

struct PermArgs {
    int ndim;
    int64_t dst_sizes[8];
    int64_t src_stride_of_dst[8];   /* src stride of dst dim i */
};

template <typename E>
__global__ void loom_permute_kernel(const E *__restrict__ src, E *__restrict__ dst, int64_t n,
                               PermArgs a)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t rem = i, off = 0;
        for (int k = a.ndim - 1; k >= 0; k--) {
            off += (rem % a.dst_sizes[k]) * a.src_stride_of_dst[k];
            rem /= a.dst_sizes[k];
        }
        dst[i] = src[off];
    }
}

} // namespace

extern "C" {

bool loom_ew_parse(const char *name, loom_ew_fn *out)
{
    static const char *const names[LOOM_EW_COUNT] = {"add",  "mul",  "scale",  "dropout",
                                                     "gelu", "silu", "swiglu", "rope"};
    for (int i = 0; i < LOOM_EW_COUNT; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (loom_ew_fn)i;
            return true;
        }
    return false;
}

int loom_ew_inputs(loom_ew_fn fn)
{
    return fn == LOOM_EW_ADD || fn == LOOM_EW_MUL || fn == LOOM_EW_SWIGLU ? 2 : 1;
}

cudaError_t loom_k_fill_uniform(loom_dtype dt, void *x, int64_t n, uint64_t seed, float lo,
                                float hi, cudaStream_t stream)
{
    LOOM_DISPATCH_ANY(dt, T, (loom_fill_kernel<T><<<grid_for(n, THREADS), THREADS, 0, stream>>>(
                                  (T *)x, n, seed, lo, hi)));
    return cudaGetLastError();
}

cudaError_t loom_k_fill_index(int32_t *x, int64_t n, int32_t modulo, uint64_t seed,
                              cudaStream_t stream)
{
    if (modulo < 1) return cudaErrorInvalidValue;
    loom_fill_index_kernel<<<grid_for(n, THREADS), THREADS, 0, stream>>>(x, n, modulo, seed);
    return cudaGetLastError();
}

cudaError_t loom_k_zero(void *x, int64_t bytes, cudaStream_t stream)
{
    /* A kernel rather than cudaMemsetAsync so CUPTI's kernel records see it. */
    int64_t n16 = bytes / 16;
    loom_zero_kernel<<<grid_for(n16 > 0 ? n16 : 1, THREADS), THREADS, 0, stream>>>(
        (uint4 *)x, n16, (uint8_t *)x + n16 * 16, bytes - n16 * 16);
    return cudaGetLastError();
}

cudaError_t loom_k_convert(loom_dtype from, const void *src, loom_dtype to, void *dst, int64_t n,
                           cudaStream_t stream)
{
    LOOM_DISPATCH_ANY(from, A, LOOM_DISPATCH_ANY(to, B, (loom_convert_kernel<A, B><<<grid_for(n, THREADS),
                                                          THREADS, 0, stream>>>((const A *)src,
                                                                                (B *)dst, n))));
    return cudaGetLastError();
}

cudaError_t loom_k_permute(int elem_bytes, const void *src, void *dst, int ndim,
                           const int64_t *src_sizes, const int *perm, cudaStream_t stream)
{
    if (ndim < 1 || ndim > 8) return cudaErrorInvalidValue;
    PermArgs a;
    a.ndim = ndim;
    int64_t stride[8], n = 1, st = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = st;
        st *= src_sizes[i];
    }
    for (int i = 0; i < ndim; i++) {
        a.dst_sizes[i] = src_sizes[perm[i]];
        a.src_stride_of_dst[i] = stride[perm[i]];
        n *= a.dst_sizes[i];
    }
    unsigned grid = grid_for(n, THREADS);
    switch (elem_bytes) {
    case 1: loom_permute_kernel<uint8_t><<<grid, THREADS, 0, stream>>>((const uint8_t *)src, (uint8_t *)dst, n, a); break;
    case 2: loom_permute_kernel<uint16_t><<<grid, THREADS, 0, stream>>>((const uint16_t *)src, (uint16_t *)dst, n, a); break;
    case 4: loom_permute_kernel<uint32_t><<<grid, THREADS, 0, stream>>>((const uint32_t *)src, (uint32_t *)dst, n, a); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

cudaError_t loom_k_ew_fwd(loom_ew_fn fn, loom_dtype dt, int64_t rows, int64_t d, const void *a,
                          const void *b, void *y, uint8_t *mask, float param, uint64_t seed,
                          cudaStream_t stream)
{
    int64_t n = rows * d;
    if (fn == LOOM_EW_ROPE) {
        if (d % 2 || param < 1) return cudaErrorInvalidValue;
        LOOM_DISPATCH_FLOAT(dt, T, (loom_rope_kernel<T><<<grid_for(n / 2, THREADS), THREADS, 0, stream>>>(
                                        rows, d, (const T *)a, (T *)y, (int64_t)param, 1.f)));
        return cudaGetLastError();
    }
    if (loom_ew_inputs(fn) == 2 && !b) return cudaErrorInvalidValue;
    if (fn == LOOM_EW_DROPOUT && (!mask || !(param >= 0 && param < 1))) return cudaErrorInvalidValue;
    OpArgs op = {fn, false, param, seed};
    LOOM_DISPATCH_FLOAT(dt, T, (loom_map_kernel<T><<<grid_for(n / (16 / sizeof(T)) + 1, THREADS), THREADS,
                                                0, stream>>>(n, (const T *)a,
                                                             loom_ew_inputs(fn) == 2 ? (const T *)b : NULL,
                                                             NULL, (T *)y, NULL, NULL,
                                                             fn == LOOM_EW_DROPOUT ? mask : NULL, op)));
    return cudaGetLastError();
}

cudaError_t loom_k_ew_bwd(loom_ew_fn fn, loom_dtype dt, int64_t rows, int64_t d, const void *a,
                          const void *b, const void *g, const uint8_t *mask, float param,
                          void *da, void *db, cudaStream_t stream)
{
    int64_t n = rows * d;
    if (fn == LOOM_EW_ROPE) {
        if (d % 2 || param < 1) return cudaErrorInvalidValue;
        LOOM_DISPATCH_FLOAT(dt, T, (loom_rope_kernel<T><<<grid_for(n / 2, THREADS), THREADS, 0, stream>>>(
                                        rows, d, (const T *)g, (T *)da, (int64_t)param, -1.f)));
        return cudaGetLastError();
    }
    bool two_out = fn == LOOM_EW_MUL || fn == LOOM_EW_SWIGLU;
    /* scale and dropout need only g (and the mask); the others read a. */
    bool needs_a = fn != LOOM_EW_SCALE && fn != LOOM_EW_DROPOUT;
    if ((two_out && (!b || !db)) || (needs_a && !a) || (fn == LOOM_EW_DROPOUT && !mask))
        return cudaErrorInvalidValue;
    OpArgs op = {fn, true, param, 0};
    LOOM_DISPATCH_FLOAT(dt, T, (loom_map_kernel<T><<<grid_for(n / (16 / sizeof(T)) + 1, THREADS), THREADS,
                                                0, stream>>>(n, needs_a ? (const T *)a : NULL,
                                                             two_out ? (const T *)b : NULL,
                                                             (const T *)g, (T *)da,
                                                             two_out ? (T *)db : NULL,
                                                             fn == LOOM_EW_DROPOUT ? mask : NULL,
                                                             NULL, op)));
    return cudaGetLastError();
}

} // extern "C"
