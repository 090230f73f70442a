/*
 * kernels_gather.cu — row gathers and scatters: the embedding lookup and its
 * gradient, MoE dispatch (gather tokens into expert buffers) and combine
 * (weighted sum of each token's expert outputs), forward and backward.
 *
 * Rows are copied by one block per row (grid-stride over rows), threads
 * across the row. The embedding gradient accumulates into an fp32 table with
 * atomics (as PyTorch's embedding_dense_backward does for unsorted ids);
 * combine's backward instead gathers through the inverse slot map, so it is
 * deterministic.
 */
#include "gpu/kernels_common.cuh"

using namespace loomk;

namespace {

int cols_threads(int64_t h) { return h >= 1024 ? 256 : h >= 256 ? 128 : 64; }

unsigned rows_grid(int64_t rows)
{
    return (unsigned)(rows < 65535 * 4 ? (rows < 1 ? 1 : rows) : 65535 * 4);
}

template <typename T>
__global__ void loom_gather_kernel(int64_t n_dst, int64_t h, const T *__restrict__ src,
                              const int32_t *__restrict__ row, T *__restrict__ dst)
{
    for (int64_t r = blockIdx.x; r < n_dst; r += gridDim.x) {
        int64_t s = row[r];
        if (s >= 0) {
            for (int64_t c = threadIdx.x; c < h; c += blockDim.x) dst[r * h + c] = src[s * h + c];
        } else {
            for (int64_t c = threadIdx.x; c < h; c += blockDim.x) dst[r * h + c] = from_f<T>(0.f);
        }
    }
}

template <typename T>
__global__ void loom_embedding_bwd_kernel(int64_t n, int64_t h, const int32_t *__restrict__ ids,
                                     const T *__restrict__ g, float *__restrict__ dtable)
{
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        float *dst = dtable + (int64_t)ids[r] * h;
        for (int64_t c = threadIdx.x; c < h; c += blockDim.x) atomicAdd(dst + c, to_f(g[r * h + c]));
    }
}

template <typename T>
__global__ void loom_combine_fwd_kernel(int64_t n, int k, int64_t h, const T *__restrict__ buf,
                                   const T *__restrict__ w, const int32_t *__restrict__ slot,
                                   T *__restrict__ out)
{
    for (int64_t t = blockIdx.x; t < n; t += gridDim.x)
        for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
            float acc = 0.f;
            for (int j = 0; j < k; j++) {
                int64_t s = slot[t * k + j];
                if (s >= 0) acc += (w ? to_f(w[t * k + j]) : 1.f) * to_f(buf[s * h + c]);
            }
            out[t * h + c] = from_f<T>(acc);
        }
}

template <typename T>
__global__ void loom_combine_dbuf_kernel(int64_t n_slots, int k, int64_t h, const T *__restrict__ w,
                                    const int32_t *__restrict__ inv, const T *__restrict__ g,
                                    T *__restrict__ dbuf)
{
    for (int64_t s = blockIdx.x; s < n_slots; s += gridDim.x) {
        int64_t tj = inv[s];
        float wv = tj >= 0 ? to_f(w[tj]) : 0.f;
        int64_t t = tj >= 0 ? tj / k : 0;
        for (int64_t c = threadIdx.x; c < h; c += blockDim.x)
            dbuf[s * h + c] = from_f<T>(tj >= 0 ? wv * to_f(g[t * h + c]) : 0.f);
    }
}

template <typename T>
__global__ void loom_combine_dw_kernel(int64_t n, int k, int64_t h, const T *__restrict__ buf,
                                  const int32_t *__restrict__ slot, const T *__restrict__ g,
                                  T *__restrict__ dw)
{
    __shared__ float sh[32];
    for (int64_t t = blockIdx.x; t < n; t += gridDim.x)
        for (int j = 0; j < k; j++) {
            int64_t s = slot[t * k + j];
            float acc = 0.f;
            if (s >= 0)
                for (int64_t c = threadIdx.x; c < h; c += blockDim.x)
                    acc += to_f(g[t * h + c]) * to_f(buf[s * h + c]);
            acc = block_sum(acc, sh);
            if (threadIdx.x == 0) dw[t * k + j] = from_f<T>(acc);
        }
}

} // namespace

extern "C" {

cudaError_t loom_k_gather_rows(loom_dtype dt, int64_t n_dst, int64_t h, const void *src,
                               const int32_t *src_row, void *dst, cudaStream_t stream)
{
    LOOM_DISPATCH_FLOAT(dt, T, (loom_gather_kernel<T><<<rows_grid(n_dst), cols_threads(h), 0, stream>>>(
                                    n_dst, h, (const T *)src, src_row, (T *)dst)));
    return cudaGetLastError();
}

cudaError_t loom_k_embedding_fwd(loom_dtype dt, int64_t n, int64_t h, const int32_t *ids,
                                 const void *table, void *y, cudaStream_t stream)
{
    return loom_k_gather_rows(dt, n, h, table, ids, y, stream);
}

cudaError_t loom_k_embedding_bwd(loom_dtype dt, int64_t n, int64_t h, const int32_t *ids,
                                 const void *g, float *dtable, cudaStream_t stream)
{
    LOOM_DISPATCH_FLOAT(dt, T, (loom_embedding_bwd_kernel<T><<<rows_grid(n), cols_threads(h), 0, stream>>>(
                                    n, h, ids, (const T *)g, dtable)));
    return cudaGetLastError();
}

cudaError_t loom_k_combine_fwd(loom_dtype dt, int64_t n, int k, int64_t h, const void *buf,
                               const void *w, const int32_t *slot, void *out,
                               cudaStream_t stream)
{
    if (k < 1) return cudaErrorInvalidValue;
    LOOM_DISPATCH_FLOAT(dt, T, (loom_combine_fwd_kernel<T><<<rows_grid(n), cols_threads(h), 0, stream>>>(
                                    n, k, h, (const T *)buf, (const T *)w, slot, (T *)out)));
    return cudaGetLastError();
}

cudaError_t loom_k_combine_bwd(loom_dtype dt, int64_t n, int k, int64_t h, int64_t n_slots,
                               const void *buf, const void *w, const int32_t *slot,
                               const int32_t *inv, const void *g, void *dbuf, void *dw,
                               cudaStream_t stream)
{
    if (k < 1) return cudaErrorInvalidValue;
    LOOM_DISPATCH_FLOAT(dt, T, {
        loom_combine_dbuf_kernel<T><<<rows_grid(n_slots), cols_threads(h), 0, stream>>>(
            n_slots, k, h, (const T *)w, inv, (const T *)g, (T *)dbuf);
        loom_combine_dw_kernel<T><<<rows_grid(n), cols_threads(h), 0, stream>>>(
            n, k, h, (const T *)buf, slot, (const T *)g, (T *)dw);
    });
    return cudaGetLastError();
}

} // extern "C"
