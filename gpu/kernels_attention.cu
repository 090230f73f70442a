/*
 * kernels_attention.cu — loom's fused (flash-style) attention, forward and
 * backward, on tensor cores through WMMA (bf16 / fp16 in, fp32 accumulate).
 *
 * Forward (Dao et al., FlashAttention, 2022, Alg. 1 with FA-2's loop order):
 * a block owns BM query rows of one head; it walks the key/value tiles of BN
 * keys, computing S = q kᵀ (WMMA, into shared memory), the online softmax
 * (running row max m and sum l; the output accumulator O is rescaled by
 * exp(m_old - m_new) whenever the max grows), and O += P v (WMMA). At the end
 * O /= l and lse = m + ln l is kept for the backward. Causal masking is
 * bottom-right aligned (key j visible to query i iff j <= i + t - s), and key
 * tiles wholly above the diagonal are skipped.
 *
 * Backward (FA-2, Alg. 2): D_i = Σ_c dO_ic O_ic first; then a block owns BN
 * keys of one QUERY head and walks the query tiles that can see them,
 * recomputing P = exp(S·scale - lse), dS = P ∘ (dP - D)·scale with
 * dP = dO vᵀ, and accumulating dV += Pᵀ dO, dK += dSᵀ q in shared memory,
 * dQ += dS k into an fp32 buffer with atomics. With grouped-query attention
 * (kvh < heads) each query head writes its own fp32 dK/dV slice, and a final
 * kernel sums a group's slices into dk/dv (as FlashAttention-2 does), which
 * keeps heads × key-tiles blocks busy instead of kvh × key-tiles.
 *
 * Head dims that are not multiples of 16 are zero-padded in shared memory
 * (the pad adds nothing to q·k and its output columns are dropped). Tile
 * sizes are chosen per launch from the device's opt-in shared memory.
 * Layouts: q [b,s,heads,dqk], k [b,t,kvh,dqk], v [b,t,kvh,dv], o [b,s,heads,dv],
 * lse and D [b,heads,s] fp32.
 */
#include <mma.h>
#include <type_traits>

#include "gpu/kernels_common.cuh"

using namespace loomk;
using namespace nvcuda;

namespace {

const int WARPS = 4, THREADS = 32 * WARPS;

struct Args {
    int64_t b, s, t, heads, kvh, dqk, dv;
    int dqkp, dvp;   /* head dims padded to 16 */
    int bm, bn;      /* query rows and keys per tile */
    bool causal;
    float scale;
};

/* Shared-memory plan: offsets in bytes, each region 128-byte aligned. */
struct Smem {
    int ldq, ldv, lds, ldp, ldof, ldkf;   /* leading dims (elements) */
    size_t q, k, v, p, ds, dO, s, dp, o, dk, dv, dq, m, l, total;
};

size_t al(size_t x) { return (x + 127) & ~(size_t)127; }

Smem plan(const Args &a, bool bwd, int elem)
{
    Smem p;
    p.ldq = a.dqkp + 8, p.ldv = a.dvp + 8, p.lds = a.bn + 4, p.ldp = a.bn + 8;
    p.ldof = a.dvp + 4, p.ldkf = a.dqkp + 4;
    size_t off = 0;
    p.q = off, off += al((size_t)a.bm * p.ldq * elem);
    p.k = off, off += al((size_t)a.bn * p.ldq * elem);
    p.v = off, off += al((size_t)a.bn * p.ldv * elem);
    p.p = off, off += al((size_t)a.bm * p.ldp * elem);
    p.s = off, off += al((size_t)a.bm * p.lds * 4);
    p.m = off, off += al((size_t)a.bm * 4);
    p.l = off, off += al((size_t)a.bm * 4);
    if (!bwd) {
        p.o = off, off += al((size_t)a.bm * p.ldof * 4);
        p.ds = p.dO = p.dp = p.dk = p.dv = p.dq = 0;
    } else {
        p.ds = off, off += al((size_t)a.bm * p.ldp * elem);
        p.dO = off, off += al((size_t)a.bm * p.ldv * elem);
        p.dp = off, off += al((size_t)a.bm * p.lds * 4);
        p.dk = off, off += al((size_t)a.bn * p.ldkf * 4);
        p.dv = off, off += al((size_t)a.bn * p.ldof * 4);
        p.dq = off, off += al((size_t)a.bm * p.ldkf * 4);
        p.o = 0;
    }
    p.total = off;
    return p;
}

/* rows × cols tile of a [.., row_stride] tensor into shared memory (ld),
 * zero outside rows_valid × cols_valid. 16-byte loads when the rows are
 * whole and aligned (head dims that are multiples of 8), else element-wise. */
template <typename T>
__device__ void load_tile(T *sm, int ld, const T *g, int64_t row_stride, int rows, int cols,
                          int64_t rows_valid, int64_t cols_valid)
{
    const int V = 16 / sizeof(T);
    if (cols_valid == cols && cols % V == 0 && row_stride % V == 0 && ld % V == 0 &&
        (uintptr_t)g % 16 == 0) {
        int cv = cols / V;
        for (int idx = threadIdx.x; idx < rows * cv; idx += blockDim.x) {
            int r = idx / cv, c = idx % cv * V;
            uint4 val = r < rows_valid ? *reinterpret_cast<const uint4 *>(g + (int64_t)r * row_stride + c)
                                       : make_uint4(0, 0, 0, 0);
            *reinterpret_cast<uint4 *>(sm + r * ld + c) = val;
        }
        return;
    }
    for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x) {
        int r = idx / cols, c = idx % cols;
        sm[r * ld + c] = (r < rows_valid && c < cols_valid) ? g[(int64_t)r * row_stride + c] : from_f<T>(0.f);
    }
}

/* C (rows16 × cols16 tiles, fp32, ldc) = [C +] A · B over kt 16-wide steps.
 * A is row-major (lda) or, with a_col, its transpose read column-major; B is
 * row-major (ldb) or column-major with b_col. Warps take tiles round-robin. */
template <typename T, bool A_COL, bool B_COL>
__device__ void mma_tiles(float *C, int ldc, const T *A, int lda, const T *B, int ldb, int tiles_m,
                          int tiles_n, int kt, bool accumulate)
{
    typedef typename std::conditional<A_COL, wmma::col_major, wmma::row_major>::type LA;
    typedef typename std::conditional<B_COL, wmma::col_major, wmma::row_major>::type LB;
    int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int tile = warp; tile < tiles_m * tiles_n; tile += nw) {
        int tm = tile / tiles_n, tn = tile % tiles_n;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        float *c = C + tm * 16 * ldc + tn * 16;
        if (accumulate) wmma::load_matrix_sync(acc, c, ldc, wmma::mem_row_major);
        else wmma::fill_fragment(acc, 0.f);
        for (int kk = 0; kk < kt; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
            /* Row-major A: rows tm, cols kk. Column-major A (= Xᵀ of a
             * row-major X): element (r, c) at A[c·lda + r]. Same for B. */
            const T *pa = A_COL ? A + kk * 16 * lda + tm * 16 : A + tm * 16 * lda + kk * 16;
            const T *pb = B_COL ? B + tn * 16 * ldb + kk * 16 : B + kk * 16 * ldb + tn * 16;
            wmma::load_matrix_sync(fa, pa, lda);
            wmma::load_matrix_sync(fb, pb, ldb);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(c, acc, ldc, wmma::mem_row_major);
    }
}

__device__ __forceinline__ bool visible(const Args &a, int64_t i, int64_t j)
{
    return i < a.s && j < a.t && (!a.causal || j <= i + (a.t - a.s));
}

template <typename T>
__global__ void __launch_bounds__(THREADS) loom_attn_fwd_kernel(Args a, Smem sp, const T *__restrict__ q,
                                                      const T *__restrict__ k, const T *__restrict__ v,
                                                      T *__restrict__ o, float *__restrict__ lse)
{
    extern __shared__ __align__(128) unsigned char smem[];
    T *Qs = (T *)(smem + sp.q), *Ks = (T *)(smem + sp.k), *Vs = (T *)(smem + sp.v), *Ps = (T *)(smem + sp.p);
    float *Ss = (float *)(smem + sp.s), *Os = (float *)(smem + sp.o);
    float *ms = (float *)(smem + sp.m), *ls = (float *)(smem + sp.l);
    const int64_t bi = blockIdx.z, h = blockIdx.y, i0 = (int64_t)blockIdx.x * a.bm;
    const int64_t hk = h / (a.heads / a.kvh);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    load_tile(Qs, sp.ldq, q + ((bi * a.s + i0) * a.heads + h) * a.dqk, a.heads * a.dqk, a.bm, a.dqkp,
              a.s - i0, a.dqk);
    for (int idx = threadIdx.x; idx < a.bm * sp.ldof; idx += blockDim.x) Os[idx] = 0.f;
    for (int r = threadIdx.x; r < a.bm; r += blockDim.x) ms[r] = -INFINITY, ls[r] = 0.f;

    int64_t kv_end = a.t;
    if (a.causal) {
        int64_t last_i = (i0 + a.bm < a.s ? i0 + a.bm : a.s) - 1;
        kv_end = last_i + (a.t - a.s) + 1;
        kv_end = kv_end < 0 ? 0 : kv_end > a.t ? a.t : kv_end;
    }
    for (int64_t j0 = 0; j0 < kv_end; j0 += a.bn) {
        __syncthreads();   /* the previous tile's K, V and P are consumed */
        load_tile(Ks, sp.ldq, k + ((bi * a.t + j0) * a.kvh + hk) * a.dqk, a.kvh * a.dqk, a.bn, a.dqkp,
                  a.t - j0, a.dqk);
        load_tile(Vs, sp.ldv, v + ((bi * a.t + j0) * a.kvh + hk) * a.dv, a.kvh * a.dv, a.bn, a.dvp,
                  a.t - j0, a.dv);
        __syncthreads();
        mma_tiles<T, false, true>(Ss, sp.lds, Qs, sp.ldq, Ks, sp.ldq, a.bm / 16, a.bn / 16,
                                  a.dqkp / 16, false);
        __syncthreads();
        for (int r = warp; r < a.bm; r += WARPS) {
            int64_t i = i0 + r;
            float mx = -INFINITY;
            for (int c = lane; c < a.bn; c += 32) {
                float sv = visible(a, i, j0 + c) ? Ss[r * sp.lds + c] * a.scale : -INFINITY;
                Ss[r * sp.lds + c] = sv;
                mx = fmaxf(mx, sv);
            }
            mx = warp_max(mx);
            float m_old = ms[r], m_new = fmaxf(m_old, mx);
            /* Nothing visible yet: keep O (zero) and l (zero) as they are. */
            float alpha = m_new == -INFINITY ? 1.f : __expf(m_old - m_new), sum = 0.f;
            for (int c = lane; c < a.bn; c += 32) {
                float p = m_new == -INFINITY ? 0.f : __expf(Ss[r * sp.lds + c] - m_new);
                Ps[r * sp.ldp + c] = from_f<T>(p);
                sum += p;
            }
            sum = warp_sum(sum);
            for (int c = lane; c < a.dvp; c += 32) Os[r * sp.ldof + c] *= alpha;
            if (lane == 0) ms[r] = m_new, ls[r] = ls[r] * alpha + sum;
        }
        __syncthreads();
        mma_tiles<T, false, false>(Os, sp.ldof, Ps, sp.ldp, Vs, sp.ldv, a.bm / 16, a.dvp / 16,
                                   a.bn / 16, true);
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < a.bm * a.dv; idx += blockDim.x) {
        int r = idx / (int)a.dv, c = idx % (int)a.dv;
        int64_t i = i0 + r;
        if (i >= a.s) continue;
        float l = ls[r];
        o[((bi * a.s + i) * a.heads + h) * a.dv + c] = from_f<T>(l > 0.f ? Os[r * sp.ldof + c] / l : 0.f);
    }
    for (int r = threadIdx.x; r < a.bm; r += blockDim.x)
        if (i0 + r < a.s)
            lse[(bi * a.heads + h) * a.s + i0 + r] = ls[r] > 0.f ? ms[r] + __logf(ls[r]) : -INFINITY;
}

/* D[b,h,i] = Σ_c dO·O, one warp per row. */
template <typename T>
__global__ void loom_attn_dot_kernel(Args a, const T *__restrict__ o, const T *__restrict__ dout,
                           float *__restrict__ D)
{
    int64_t rows = a.b * a.s * a.heads, warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        /* r enumerates [b, s, heads] rows of o; D is [b, heads, s]. */
        float acc = 0.f;
        for (int64_t c = threadIdx.x & 31; c < a.dv; c += 32) acc += to_f(o[r * a.dv + c]) * to_f(dout[r * a.dv + c]);
        acc = warp_sum(acc);
        int64_t h = r % a.heads, i = (r / a.heads) % a.s, bi = r / (a.heads * a.s);
        if ((threadIdx.x & 31) == 0) D[(bi * a.heads + h) * a.s + i] = acc;
    }
}

template <typename T>
__global__ void __launch_bounds__(THREADS) loom_attn_bwd_kernel(Args a, Smem sp, const T *__restrict__ q,
                                                      const T *__restrict__ k, const T *__restrict__ v,
                                                      const T *__restrict__ dout,
                                                      const float *__restrict__ lse,
                                                      const float *__restrict__ D,
                                                      float *__restrict__ dq_acc,
                                                      float *__restrict__ dk_exp,
                                                      float *__restrict__ dv_exp)
{
    extern __shared__ __align__(128) unsigned char smem[];
    T *Qs = (T *)(smem + sp.q), *Ks = (T *)(smem + sp.k), *Vs = (T *)(smem + sp.v);
    T *Ps = (T *)(smem + sp.p), *dSs = (T *)(smem + sp.ds), *dOs = (T *)(smem + sp.dO);
    float *Ss = (float *)(smem + sp.s), *dPs = (float *)(smem + sp.dp);
    float *dKs = (float *)(smem + sp.dk), *dVs = (float *)(smem + sp.dv), *dQs = (float *)(smem + sp.dq);
    float *lse_s = (float *)(smem + sp.m), *D_s = (float *)(smem + sp.l);
    const int64_t bi = blockIdx.z, h = blockIdx.y, j0 = (int64_t)blockIdx.x * a.bn;
    const int64_t hk = h / (a.heads / a.kvh);

    load_tile(Ks, sp.ldq, k + ((bi * a.t + j0) * a.kvh + hk) * a.dqk, a.kvh * a.dqk, a.bn, a.dqkp,
              a.t - j0, a.dqk);
    load_tile(Vs, sp.ldv, v + ((bi * a.t + j0) * a.kvh + hk) * a.dv, a.kvh * a.dv, a.bn, a.dvp,
              a.t - j0, a.dv);
    for (int idx = threadIdx.x; idx < a.bn * sp.ldkf; idx += blockDim.x) dKs[idx] = 0.f;
    for (int idx = threadIdx.x; idx < a.bn * sp.ldof; idx += blockDim.x) dVs[idx] = 0.f;

    /* First query that sees key j0: i >= j0 - (t - s). */
    int64_t i_first = a.causal ? j0 - (a.t - a.s) : 0;
    i_first = i_first < 0 ? 0 : i_first / a.bm * a.bm;
    for (int64_t i0 = i_first; i0 < a.s; i0 += a.bm) {
        __syncthreads();
        load_tile(Qs, sp.ldq, q + ((bi * a.s + i0) * a.heads + h) * a.dqk, a.heads * a.dqk, a.bm,
                  a.dqkp, a.s - i0, a.dqk);
        load_tile(dOs, sp.ldv, dout + ((bi * a.s + i0) * a.heads + h) * a.dv, a.heads * a.dv, a.bm,
                  a.dvp, a.s - i0, a.dv);
        for (int r = threadIdx.x; r < a.bm; r += blockDim.x) {
            bool in = i0 + r < a.s;
            lse_s[r] = in ? lse[(bi * a.heads + h) * a.s + i0 + r] : -INFINITY;
            D_s[r] = in ? D[(bi * a.heads + h) * a.s + i0 + r] : 0.f;
        }
        __syncthreads();
        mma_tiles<T, false, true>(Ss, sp.lds, Qs, sp.ldq, Ks, sp.ldq, a.bm / 16, a.bn / 16,
                                  a.dqkp / 16, false);
        mma_tiles<T, false, true>(dPs, sp.lds, dOs, sp.ldv, Vs, sp.ldv, a.bm / 16, a.bn / 16,
                                  a.dvp / 16, false);
        __syncthreads();
        for (int idx = threadIdx.x; idx < a.bm * a.bn; idx += blockDim.x) {
            int r = idx / a.bn, c = idx % a.bn;
            float l = lse_s[r];
            float p = visible(a, i0 + r, j0 + c) && l != -INFINITY
                          ? __expf(Ss[r * sp.lds + c] * a.scale - l) : 0.f;
            Ps[r * sp.ldp + c] = from_f<T>(p);
            dSs[r * sp.ldp + c] = from_f<T>(p * (dPs[r * sp.lds + c] - D_s[r]) * a.scale);
        }
        __syncthreads();
        mma_tiles<T, true, false>(dVs, sp.ldof, Ps, sp.ldp, dOs, sp.ldv, a.bn / 16, a.dvp / 16,
                                  a.bm / 16, true);
        mma_tiles<T, true, false>(dKs, sp.ldkf, dSs, sp.ldp, Qs, sp.ldq, a.bn / 16, a.dqkp / 16,
                                  a.bm / 16, true);
        mma_tiles<T, false, false>(dQs, sp.ldkf, dSs, sp.ldp, Ks, sp.ldq, a.bm / 16, a.dqkp / 16,
                                   a.bn / 16, false);
        __syncthreads();
        for (int idx = threadIdx.x; idx < a.bm * a.dqk; idx += blockDim.x) {
            int r = idx / (int)a.dqk, c = idx % (int)a.dqk;
            if (i0 + r < a.s)
                atomicAdd(dq_acc + ((bi * a.s + i0 + r) * a.heads + h) * a.dqk + c, dQs[r * sp.ldkf + c]);
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < a.bn * a.dqk; idx += blockDim.x) {
        int r = idx / (int)a.dqk, c = idx % (int)a.dqk;
        if (j0 + r < a.t) dk_exp[((bi * a.t + j0 + r) * a.heads + h) * a.dqk + c] = dKs[r * sp.ldkf + c];
    }
    for (int idx = threadIdx.x; idx < a.bn * a.dv; idx += blockDim.x) {
        int r = idx / (int)a.dv, c = idx % (int)a.dv;
        if (j0 + r < a.t) dv_exp[((bi * a.t + j0 + r) * a.heads + h) * a.dv + c] = dVs[r * sp.ldof + c];
    }
}

/* out[b,j,hk,c] = Σ_{h in group hk} x[b,j,h,c]. */
template <typename T>
__global__ void loom_attn_group_sum_kernel(int64_t rows /* b·t */, int64_t heads, int64_t kvh, int64_t d,
                                 const float *__restrict__ x, T *__restrict__ out)
{
    int64_t n = rows * kvh * d, g = heads / kvh;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = idx % d, hk = (idx / d) % kvh, row = idx / (d * kvh);
        float acc = 0.f;
        for (int64_t j = 0; j < g; j++) acc += x[(row * heads + hk * g + j) * d + c];
        out[idx] = from_f<T>(acc);
    }
}

template <typename T>
__global__ void loom_attn_to_type_kernel(const float *__restrict__ x, T *__restrict__ y, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = from_f<T>(x[i]);
}

int pad16(int64_t d) { return (int)((d + 15) / 16 * 16); }

/* Largest tiles whose shared memory fits. */
bool choose_tiles(Args *a, bool bwd, int elem, int max_smem, Smem *sp)
{
    static const int cand[][2] = {{64, 64}, {32, 64}, {64, 32}, {32, 32}, {16, 32}, {16, 16}};
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        a->bm = cand[i][0], a->bn = cand[i][1];
        *sp = plan(*a, bwd, elem);
        if (sp->total <= (size_t)max_smem) return true;
    }
    return false;
}

cudaError_t make_args(loom_dtype dt, const loom_attn_shape *sh, Args *a)
{
    if ((dt != LOOM_DTYPE_BF16 && dt != LOOM_DTYPE_FP16) || sh->kvh < 1 || sh->heads % sh->kvh ||
        sh->dqk < 1 || sh->dv < 1 || sh->dqk > 256 || sh->dv > 256 || sh->b < 1 || sh->s < 1 ||
        sh->t < 1 || sh->b > 65535 || sh->heads > 65535)
        return cudaErrorInvalidValue;
    *a = Args{sh->b, sh->s, sh->t, sh->heads, sh->kvh, sh->dqk, sh->dv, pad16(sh->dqk), pad16(sh->dv),
              0, 0, sh->causal, sh->scale};
    return cudaSuccess;
}

template <typename T>
cudaError_t launch_fwd(Args a, int max_smem, const void *q, const void *k, const void *v, void *o,
                       float *lse, cudaStream_t stream)
{
    Smem sp;
    if (!choose_tiles(&a, false, sizeof(T), max_smem, &sp)) return cudaErrorInvalidConfiguration;
    cudaError_t e = cudaFuncSetAttribute(loom_attn_fwd_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)sp.total);
    if (e != cudaSuccess) return e;
    dim3 grid((unsigned)((a.s + a.bm - 1) / a.bm), (unsigned)a.heads, (unsigned)a.b);
    loom_attn_fwd_kernel<T><<<grid, THREADS, sp.total, stream>>>(a, sp, (const T *)q, (const T *)k,
                                                       (const T *)v, (T *)o, lse);
    return cudaGetLastError();
}

template <typename T>
cudaError_t launch_bwd(Args a, int max_smem, const void *q, const void *k, const void *v,
                       const void *o, const void *dout, const float *lse, void *scratch, void *dq,
                       void *dk, void *dv, cudaStream_t stream)
{
    Smem sp;
    if (!choose_tiles(&a, true, sizeof(T), max_smem, &sp)) return cudaErrorInvalidConfiguration;
    float *dq_acc = (float *)scratch, *D = dq_acc + a.b * a.s * a.heads * a.dqk;
    float *dk_exp = D + a.b * a.heads * a.s, *dv_exp = dk_exp + a.b * a.t * a.heads * a.dqk;
    cudaError_t e = loom_k_zero(dq_acc, a.b * a.s * a.heads * a.dqk * 4, stream);
    if (e != cudaSuccess) return e;
    loom_attn_dot_kernel<T><<<grid_for(a.b * a.s * a.heads, WARPS), THREADS, 0, stream>>>(a, (const T *)o,
                                                                             (const T *)dout, D);
    if ((e = cudaFuncSetAttribute(loom_attn_bwd_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)sp.total)) != cudaSuccess)
        return e;
    dim3 grid((unsigned)((a.t + a.bn - 1) / a.bn), (unsigned)a.heads, (unsigned)a.b);
    loom_attn_bwd_kernel<T><<<grid, THREADS, sp.total, stream>>>(a, sp, (const T *)q, (const T *)k,
                                                       (const T *)v, (const T *)dout, lse, D,
                                                       dq_acc, dk_exp, dv_exp);
    int64_t nk = a.b * a.t * a.kvh * a.dqk, nv = a.b * a.t * a.kvh * a.dv, nq = a.b * a.s * a.heads * a.dqk;
    loom_attn_group_sum_kernel<T><<<grid_for(nk, 256), 256, 0, stream>>>(a.b * a.t, a.heads, a.kvh, a.dqk,
                                                              dk_exp, (T *)dk);
    loom_attn_group_sum_kernel<T><<<grid_for(nv, 256), 256, 0, stream>>>(a.b * a.t, a.heads, a.kvh, a.dv,
                                                              dv_exp, (T *)dv);
    loom_attn_to_type_kernel<T><<<grid_for(nq, 256), 256, 0, stream>>>(dq_acc, (T *)dq, nq);
    return cudaGetLastError();
}

} // namespace

extern "C" {

cudaError_t loom_k_attn_fwd(loom_dtype dt, const loom_attn_shape *sh, const void *q,
                            const void *k, const void *v, void *o, float *lse, int max_smem,
                            cudaStream_t stream)
{
    Args a;
    cudaError_t e = make_args(dt, sh, &a);
    if (e != cudaSuccess) return e;
    if (dt == LOOM_DTYPE_BF16) return launch_fwd<__nv_bfloat16>(a, max_smem, q, k, v, o, lse, stream);
    return launch_fwd<__half>(a, max_smem, q, k, v, o, lse, stream);
}

int64_t loom_k_attn_bwd_scratch_bytes(const loom_attn_shape *sh)
{
    return 4 * (sh->b * sh->s * sh->heads * sh->dqk + sh->b * sh->heads * sh->s +
                sh->b * sh->t * sh->heads * (sh->dqk + sh->dv));
}

cudaError_t loom_k_attn_bwd(loom_dtype dt, const loom_attn_shape *sh, const void *q,
                            const void *k, const void *v, const void *o, const void *dout,
                            const float *lse, void *scratch, void *dq, void *dk, void *dv,
                            int max_smem, cudaStream_t stream)
{
    Args a;
    cudaError_t e = make_args(dt, sh, &a);
    if (e != cudaSuccess) return e;
    if (dt == LOOM_DTYPE_BF16)
        return launch_bwd<__nv_bfloat16>(a, max_smem, q, k, v, o, dout, lse, scratch, dq, dk, dv, stream);
    return launch_bwd<__half>(a, max_smem, q, k, v, o, dout, lse, scratch, dq, dk, dv, stream);
}

} // extern "C"
