/*
 * kernels_rows.cu — row reductions: layernorm / rmsnorm, softmax,
 * cross-entropy (forward and backward) and the MoE router's softmax + top-k.
 * Formulas in kernels.h.
 *
 * One block per row in a grid-stride loop over rows; the block size grows
 * with the row length (one warp per 256 elements, 1..8 warps) so short rows
 * do not leave most threads idle. The norms' weight gradients are reduced in
 * two deterministic passes (Apex / Megatron style): each block accumulates
 * its rows into its own partial row, then one thread per column sums the
 * partial rows. The router uses one warp per token.
 */
#include "gpu/kernels_common.cuh"

using namespace loomk;

namespace {

int row_threads(int64_t d)
{
    int64_t w = (d + 255) / 256;
    return 32 * (int)(w < 1 ? 1 : w > 8 ? 8 : w);
}

unsigned row_grid(int64_t rows)
{
    return (unsigned)(rows < 65535 * 4 ? (rows < 1 ? 1 : rows) : 65535 * 4);
}

template <typename T>
__global__ void loom_norm_fwd_kernel(bool rms, int64_t rows, int64_t d, const T *__restrict__ x,
                                const T *__restrict__ gamma, const T *__restrict__ beta,
                                T *__restrict__ y, float *__restrict__ mean_out,
                                float *__restrict__ rstd_out, float eps)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * d;
        float mean = 0.f;
        if (!rms) {
            float s = 0.f;
            for (int64_t c = threadIdx.x; c < d; c += blockDim.x) s += to_f(xr[c]);
            mean = block_sum(s, sh) / (float)d;
        }
        float v = 0.f;
        for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
            float t = to_f(xr[c]) - mean;
            v += t * t;
        }
        float rstd = rsqrtf(block_sum(v, sh) / (float)d + eps);
        for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
            float t = (to_f(xr[c]) - mean) * rstd * to_f(gamma[c]);
            y[r * d + c] = from_f<T>(rms ? t : t + to_f(beta[c]));
        }
        if (threadIdx.x == 0) {
            if (mean_out) mean_out[r] = mean;
            rstd_out[r] = rstd;
        }
    }
}

template <typename T>
__global__ void loom_norm_bwd_kernel(bool rms, int64_t rows, int64_t d, const T *__restrict__ x,
                                const T *__restrict__ gamma, const T *__restrict__ g,
                                const float *__restrict__ mean_in, const float *__restrict__ rstd_in,
                                T *__restrict__ dx, float *__restrict__ part, int parts)
{
    __shared__ float sh[32];
    float *pg = part + (int64_t)blockIdx.x * d, *pb = part + ((int64_t)parts + blockIdx.x) * d;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
        pg[c] = 0.f;
        if (!rms) pb[c] = 0.f;
    }
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * d, *gr = g + r * d;
        float mean = rms ? 0.f : mean_in[r], rstd = rstd_in[r];
        float s1 = 0.f, s2 = 0.f;
        for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
            float xh = (to_f(xr[c]) - mean) * rstd, gh = to_f(gr[c]) * to_f(gamma[c]);
            s1 += gh;
            s2 += gh * xh;
        }
        s1 = rms ? 0.f : block_sum(s1, sh) / (float)d;
        s2 = block_sum(s2, sh) / (float)d;
        for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
            float xh = (to_f(xr[c]) - mean) * rstd, gv = to_f(gr[c]);
            dx[r * d + c] = from_f<T>(rstd * (gv * to_f(gamma[c]) - s1 - xh * s2));
            pg[c] += gv * xh;
            if (!rms) pb[c] += gv;
        }
    }
}

template <typename T>
__global__ void loom_column_sum_kernel(const float *__restrict__ part, int parts, int64_t d,
                                  T *__restrict__ out)
{
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < d;
         c += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int p = 0; p < parts; p++) s += part[(int64_t)p * d + c];
        out[c] = from_f<T>(s);
    }
}

/* Row max and Σ exp(x - max) of one row in one pass (the online softmax
 * normaliser of Milakov & Gimelshein, 2018): each thread keeps a running
 * max m_t and sum s_t, rescaling s_t by exp(m_old - m_new) when m_t grows;
 * the block combines s = Σ_t s_t · exp(m_t - m). Every thread gets both. */
template <typename T>
__device__ void row_max_sum(const T *xr, int64_t d, float *sh, float *mx, float *sum)
{
    float m = -INFINITY, s = 0.f;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
        float v = to_f(xr[c]);
        if (v > m) {
            s = s * __expf(m - v) + 1.f;   /* exp(-inf) = 0 on the first element */
            m = v;
        } else if (v > -INFINITY) {   /* a masked -inf adds nothing (and no NaN) */
            s += __expf(v - m);
        }
    }
    float bm = block_max(m, sh);
    *mx = bm;
    *sum = block_sum(m == -INFINITY ? 0.f : s * __expf(m - bm), sh);
}

template <typename T>
__global__ void loom_softmax_fwd_kernel(int64_t rows, int64_t d, const T *__restrict__ x, T *__restrict__ y)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float m, s;
        row_max_sum(x + r * d, d, sh, &m, &s);
        float inv = 1.f / s;
        for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
            y[r * d + c] = from_f<T>(__expf(to_f(x[r * d + c]) - m) * inv);
    }
}

template <typename T>
__global__ void loom_softmax_bwd_kernel(int64_t rows, int64_t d, const T *__restrict__ y,
                                   const T *__restrict__ g, T *__restrict__ dx)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float s = 0.f;
        for (int64_t c = threadIdx.x; c < d; c += blockDim.x) s += to_f(y[r * d + c]) * to_f(g[r * d + c]);
        s = block_sum(s, sh);
        for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
            dx[r * d + c] = from_f<T>(to_f(y[r * d + c]) * (to_f(g[r * d + c]) - s));
    }
}

template <typename T>
__global__ void loom_xent_fwd_kernel(int64_t n, int64_t v, const T *__restrict__ x,
                                const int32_t *__restrict__ labels, float *__restrict__ loss,
                                float *__restrict__ lse)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        float m, s;
        row_max_sum(x + r * v, v, sh, &m, &s);
        if (threadIdx.x == 0) {
            float l = m + __logf(s);
            lse[r] = l;
            loss[r] = l - to_f(x[r * v + labels[r]]);
        }
    }
}

template <typename T>
__global__ void loom_xent_bwd_kernel(int64_t n, int64_t v, const T *__restrict__ x,
                                const int32_t *__restrict__ labels, const float *__restrict__ lse,
                                float dloss, T *__restrict__ dx)
{
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        float l = lse[r];
        int64_t lab = labels[r];
        for (int64_t c = threadIdx.x; c < v; c += blockDim.x)
            dx[r * v + c] = from_f<T>(dloss * (__expf(to_f(x[r * v + c]) - l) - (c == lab ? 1.f : 0.f)));
    }
}

/* Max and Σ exp(x - max) of one token's e router logits, by its warp. */
template <typename T>
__device__ void warp_softmax_stats(const T *lr, int e, int lane, float *mx, float *sum)
{
    float m = -INFINITY;
    for (int j = lane; j < e; j += 32) m = fmaxf(m, to_f(lr[j]));
    m = warp_max(m);
    float s = 0.f;
    for (int j = lane; j < e; j += 32) s += __expf(to_f(lr[j]) - m);
    *mx = m;
    *sum = warp_sum(s);
}

/* One warp per token: p = softmax(logits), top-k of p (ties: lower index). */
template <typename T>
__global__ void loom_route_fwd_kernel(int64_t n, int e, int k, const T *__restrict__ logits,
                                 T *__restrict__ w, int32_t *__restrict__ idx)
{
    int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t t = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); t < n; t += warps) {
        const T *lr = logits + t * e;
        float m, s;
        warp_softmax_stats(lr, e, lane, &m, &s);
        int chosen[8];
        for (int r = 0; r < k; r++) {
            float best = -INFINITY;
            int bi = e;
            for (int j = lane; j < e; j += 32) {
                bool taken = false;
                for (int q = 0; q < r; q++) taken |= chosen[q] == j;
                float lv = to_f(lr[j]);
                if (!taken && (lv > best || (lv == best && j < bi))) best = lv, bi = j;
            }
            for (int o = 16; o > 0; o >>= 1) {
                float ob = __shfl_xor_sync(0xffffffffu, best, o);
                int oi = __shfl_xor_sync(0xffffffffu, bi, o);
                if (ob > best || (ob == best && oi < bi)) best = ob, bi = oi;
            }
            chosen[r] = bi;
            if (lane == 0) {
                idx[t * k + r] = bi;
                w[t * k + r] = from_f<T>(__expf(best - m) / s);
            }
        }
    }
}

template <typename T>
__global__ void loom_route_bwd_kernel(int64_t n, int e, int k, const T *__restrict__ logits,
                                 const int32_t *__restrict__ idx, const T *__restrict__ dw,
                                 T *__restrict__ dlogits)
{
    int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t t = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); t < n; t += warps) {
        const T *lr = logits + t * e;
        float m, s;
        warp_softmax_stats(lr, e, lane, &m, &s);
        /* dlogit_j = p_j (g_j - Σ_sel g_i p_i), g_j = dw for selected j, else 0. */
        float dot = 0.f;
        for (int r = 0; r < k; r++)
            dot += to_f(dw[t * k + r]) * __expf(to_f(lr[idx[t * k + r]]) - m) / s;
        for (int j = lane; j < e; j += 32) {
            float gj = 0.f;
            for (int r = 0; r < k; r++)
                if (idx[t * k + r] == j) gj += to_f(dw[t * k + r]);
            float p = __expf(to_f(lr[j]) - m) / s;
            dlogits[t * e + j] = from_f<T>(p * (gj - dot));
        }
    }
}

} // namespace

extern "C" {

cudaError_t loom_k_norm_fwd(bool rms, loom_dtype dt, int64_t rows, int64_t d, const void *x,
                            const void *gamma, const void *beta, void *y, float *mean,
                            float *rstd, float eps, cudaStream_t stream)
{
    if ((!rms && (!beta || !mean)) || !rstd) return cudaErrorInvalidValue;
    LOOM_DISPATCH_FLOAT(dt, T, (loom_norm_fwd_kernel<T><<<row_grid(rows), row_threads(d), 0, stream>>>(
                                    rms, rows, d, (const T *)x, (const T *)gamma, (const T *)beta,
                                    (T *)y, rms ? NULL : mean, rstd, eps)));
    return cudaGetLastError();
}

int loom_k_norm_bwd_parts(int64_t rows, int sm_count)
{
    int64_t p = 4 * (int64_t)(sm_count > 0 ? sm_count : 1);
    if (p > 1024) p = 1024;
    return (int)(rows < p ? (rows < 1 ? 1 : rows) : p);
}

cudaError_t loom_k_norm_bwd(bool rms, loom_dtype dt, int64_t rows, int64_t d, const void *x,
                            const void *gamma, const void *g, const float *mean,
                            const float *rstd, void *dx, float *part, int parts, void *dgamma,
                            void *dbeta, cudaStream_t stream)
{
    if ((!rms && (!mean || !dbeta)) || parts < 1) return cudaErrorInvalidValue;
    unsigned cols = grid_for(d, 256);
    LOOM_DISPATCH_FLOAT(dt, T, {
        loom_norm_bwd_kernel<T><<<(unsigned)parts, row_threads(d), 0, stream>>>(
            rms, rows, d, (const T *)x, (const T *)gamma, (const T *)g, mean, rstd, (T *)dx, part,
            parts);
        loom_column_sum_kernel<T><<<cols, 256, 0, stream>>>(part, parts, d, (T *)dgamma);
        if (!rms)
            loom_column_sum_kernel<T><<<cols, 256, 0, stream>>>(part + (int64_t)parts * d, parts, d,
                                                          (T *)dbeta);
    });
    return cudaGetLastError();
}

cudaError_t loom_k_softmax_fwd(loom_dtype dt, int64_t rows, int64_t d, const void *x, void *y,
                               cudaStream_t stream)
{
    LOOM_DISPATCH_FLOAT(dt, T, (loom_softmax_fwd_kernel<T><<<row_grid(rows), row_threads(d), 0, stream>>>(
                                    rows, d, (const T *)x, (T *)y)));
    return cudaGetLastError();
}

cudaError_t loom_k_softmax_bwd(loom_dtype dt, int64_t rows, int64_t d, const void *y,
                               const void *g, void *dx, cudaStream_t stream)
{
    LOOM_DISPATCH_FLOAT(dt, T, (loom_softmax_bwd_kernel<T><<<row_grid(rows), row_threads(d), 0, stream>>>(
                                    rows, d, (const T *)y, (const T *)g, (T *)dx)));
    return cudaGetLastError();
}

cudaError_t loom_k_xent_fwd(loom_dtype dt, int64_t n, int64_t v, const void *logits,
                            const int32_t *labels, float *loss, float *lse, cudaStream_t stream)
{
    LOOM_DISPATCH_FLOAT(dt, T, (loom_xent_fwd_kernel<T><<<row_grid(n), row_threads(v), 0, stream>>>(
                                    n, v, (const T *)logits, labels, loss, lse)));
    return cudaGetLastError();
}

cudaError_t loom_k_xent_bwd(loom_dtype dt, int64_t n, int64_t v, const void *logits,
                            const int32_t *labels, const float *lse, float dloss, void *dlogits,
                            cudaStream_t stream)
{
    LOOM_DISPATCH_FLOAT(dt, T, (loom_xent_bwd_kernel<T><<<row_grid(n), row_threads(v), 0, stream>>>(
                                    n, v, (const T *)logits, labels, lse, dloss, (T *)dlogits)));
    return cudaGetLastError();
}

cudaError_t loom_k_moe_route_fwd(loom_dtype dt, int64_t n, int64_t e, int k, const void *logits,
                                 void *weights, int32_t *idx, cudaStream_t stream)
{
    if (k < 1 || k > 8 || k > e || e > 1024) return cudaErrorInvalidValue;
    unsigned grid = grid_for(n, 8);   /* 8 warps (tokens) per block */
    LOOM_DISPATCH_FLOAT(dt, T, (loom_route_fwd_kernel<T><<<grid, 256, 0, stream>>>(
                                    n, (int)e, k, (const T *)logits, (T *)weights, idx)));
    return cudaGetLastError();
}

cudaError_t loom_k_moe_route_bwd(loom_dtype dt, int64_t n, int64_t e, int k, const void *logits,
                                 const int32_t *idx, const void *dweights, void *dlogits,
                                 cudaStream_t stream)
{
    if (k < 1 || k > 8 || k > e || e > 1024) return cudaErrorInvalidValue;
    unsigned grid = grid_for(n, 8);
    LOOM_DISPATCH_FLOAT(dt, T, (loom_route_bwd_kernel<T><<<grid, 256, 0, stream>>>(
                                    n, (int)e, k, (const T *)logits, idx, (const T *)dweights,
                                    (T *)dlogits)));
    return cudaGetLastError();
}

} // extern "C"
