/*
 * kernels.h — loom's own CUDA kernels, as C-callable launchers.
 *
 * Every launcher enqueues on `stream` and returns the launch status
 * (cudaGetLastError); it never synchronises. Tensors are row-major device
 * buffers of `dt` (bf16, fp16 or fp32; fp8 e4m3 where noted), math is fp32.
 * Shapes are as in the profile key (costs/profile_db.h): pointwise, norm and
 * softmax ops see [rows, d] with the op along d.
 *
 * Formulas (forward / backward), x the input, y the output, g = dL/dy:
 *   gelu    y = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))  (GPT-2's tanh form)
 *   silu    y = x·σ(x);              dx = g·σ(x)(1 + x(1 - σ(x)))
 *   swiglu  y = silu(a)·b;           da = g·b·silu'(a), db = g·silu(a)
 *   dropout y = x·m/(1-p), m ~ Bernoulli(1-p) from a counter hash
 *   rope    rotate-half (HF Llama): pairs (i, i + d/2) of row r turned by
 *           (r mod period)·θ^(-2i/d), θ = 10000; backward turns by minus
 *   norm    layernorm ŷ = (x-μ)/σ, y = ŷγ + β; rmsnorm ŷ = x/rms(x), y = ŷγ,
 *           dx = (1/σ)(ĝ - mean(ĝ) - ŷ·mean(ĝŷ)), ĝ = gγ (rms: no mean(ĝ))
 *   softmax dx = y ∘ (g - Σ g∘y)
 *   xent    loss = lse(x) - x[label]; dx = dloss·(softmax(x) - onehot)
 *   attention (flash, Dao et al. 2022/2023): o = softmax(q kᵀ/√dqk) v with
 *           online softmax over key tiles, lse kept for the backward, which
 *           recomputes P tile by tile.
 */
#ifndef LOOM_GPU_KERNELS_H
#define LOOM_GPU_KERNELS_H

#include <stdbool.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include "graph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    LOOM_EW_ADD,      /* y = a + b;   bwd: da = g, db = g (one copy: gradient accumulation) */
    LOOM_EW_MUL,      /* y = a · b */
    LOOM_EW_SCALE,    /* y = c · a */
    LOOM_EW_DROPOUT,  /* param = p */
    LOOM_EW_GELU,
    LOOM_EW_SILU,
    LOOM_EW_SWIGLU,   /* a = gate, b = up */
    LOOM_EW_ROPE,     /* param = period (positions) */
    LOOM_EW_COUNT
} loom_ew_fn;

/* "add", … -> fn; false for an unknown name. */
bool loom_ew_parse(const char *name, loom_ew_fn *out);
/* Inputs the forward reads (1 or 2). */
int loom_ew_inputs(loom_ew_fn fn);

/* ---- fills and copies ------------------------------------------------------ */

/* x[i] = uniform in [lo, hi) from a counter hash of (seed, i); dt may be fp8. */
cudaError_t loom_k_fill_uniform(loom_dtype dt, void *x, int64_t n, uint64_t seed, float lo,
                                float hi, cudaStream_t stream);
/* x[i] = hash(seed, i) mod modulo (token ids, labels). */
cudaError_t loom_k_fill_index(int32_t *x, int64_t n, int32_t modulo, uint64_t seed,
                              cudaStream_t stream);
cudaError_t loom_k_zero(void *x, int64_t bytes, cudaStream_t stream);
/* dst[i] = (to) src[i]; bf16/fp16/fp32/fp8 each way. */
cudaError_t loom_k_convert(loom_dtype from, const void *src, loom_dtype to, void *dst, int64_t n,
                           cudaStream_t stream);
/* Transposes a row-major tensor: dst dim i is src dim perm[i] (ndim <= 8);
 * elem_bytes 1, 2 or 4. */
cudaError_t loom_k_permute(int elem_bytes, const void *src, void *dst, int ndim,
                           const int64_t *src_sizes, const int *perm, cudaStream_t stream);

/* ---- pointwise --------------------------------------------------------------- */

/* y = fn(a[, b]); mask (dropout) is written, one byte per element. */
cudaError_t loom_k_ew_fwd(loom_ew_fn fn, loom_dtype dt, int64_t rows, int64_t d, const void *a,
                          const void *b, void *y, uint8_t *mask, float param, uint64_t seed,
                          cudaStream_t stream);
/* da[, db] from g; reads a (and b) where the derivative needs them. */
cudaError_t loom_k_ew_bwd(loom_ew_fn fn, loom_dtype dt, int64_t rows, int64_t d, const void *a,
                          const void *b, const void *g, const uint8_t *mask, float param,
                          void *da, void *db, cudaStream_t stream);

/* ---- norms and softmax (one row per block) ---------------------------------------- */

/* beta NULL for rmsnorm; mean unused (may be NULL) for rmsnorm. */
cudaError_t loom_k_norm_fwd(bool rms, loom_dtype dt, int64_t rows, int64_t d, const void *x,
                            const void *gamma, const void *beta, void *y, float *mean,
                            float *rstd, float eps, cudaStream_t stream);
/* Number of partial rows of the weight-gradient reduction (the bwd grid). */
int loom_k_norm_bwd_parts(int64_t rows, int sm_count);
/* part: parts × d fp32 scratch (two of them for layernorm: γ then β). */
cudaError_t loom_k_norm_bwd(bool rms, loom_dtype dt, int64_t rows, int64_t d, const void *x,
                            const void *gamma, const void *g, const float *mean,
                            const float *rstd, void *dx, float *part, int parts, void *dgamma,
                            void *dbeta, cudaStream_t stream);
cudaError_t loom_k_softmax_fwd(loom_dtype dt, int64_t rows, int64_t d, const void *x, void *y,
                               cudaStream_t stream);
cudaError_t loom_k_softmax_bwd(loom_dtype dt, int64_t rows, int64_t d, const void *y,
                               const void *g, void *dx, cudaStream_t stream);

/* ---- embedding, loss, experts ------------------------------------------------------ */

cudaError_t loom_k_embedding_fwd(loom_dtype dt, int64_t n, int64_t h, const int32_t *ids,
                                 const void *table, void *y, cudaStream_t stream);
/* dtable[ids[t]] += g[t] in fp32 (atomics; the caller zeroes dtable). */
cudaError_t loom_k_embedding_bwd(loom_dtype dt, int64_t n, int64_t h, const int32_t *ids,
                                 const void *g, float *dtable, cudaStream_t stream);
/* Per-row loss and lse (fp32). */
cudaError_t loom_k_xent_fwd(loom_dtype dt, int64_t n, int64_t v, const void *logits,
                            const int32_t *labels, float *loss, float *lse, cudaStream_t stream);
cudaError_t loom_k_xent_bwd(loom_dtype dt, int64_t n, int64_t v, const void *logits,
                            const int32_t *labels, const float *lse, float dloss, void *dlogits,
                            cudaStream_t stream);
/* Softmax over e experts, top-k (k <= 8, e <= 1024): weights [n,k] (dt) and
 * indices [n,k]. */
cudaError_t loom_k_moe_route_fwd(loom_dtype dt, int64_t n, int64_t e, int k, const void *logits,
                                 void *weights, int32_t *idx, cudaStream_t stream);
cudaError_t loom_k_moe_route_bwd(loom_dtype dt, int64_t n, int64_t e, int k, const void *logits,
                                 const int32_t *idx, const void *dweights, void *dlogits,
                                 cudaStream_t stream);
/* dst[r] = src_row[r] >= 0 ? src[src_row[r]] : 0 for r < n_dst (rows of h). */
cudaError_t loom_k_gather_rows(loom_dtype dt, int64_t n_dst, int64_t h, const void *src,
                               const int32_t *src_row, void *dst, cudaStream_t stream);
/* out[t] = Σ_j w[t,j] · buf[slot[t,j]] (w NULL: weight 1; slot < 0 skipped). */
cudaError_t loom_k_combine_fwd(loom_dtype dt, int64_t n, int k, int64_t h, const void *buf,
                               const void *w, const int32_t *slot, void *out,
                               cudaStream_t stream);
/* dbuf[s] = w[t,j] · g[t] for (t, j) = inv[s] (zero when inv[s] < 0), and
 * dw[t,j] = <g[t], buf[slot[t,j]]>. inv[s] = t·k + j. */
cudaError_t loom_k_combine_bwd(loom_dtype dt, int64_t n, int k, int64_t h, int64_t n_slots,
                               const void *buf, const void *w, const int32_t *slot,
                               const int32_t *inv, const void *g, void *dbuf, void *dw,
                               cudaStream_t stream);

/* ---- attention ------------------------------------------------------------------------ */

typedef struct {
    int64_t b, s, t, heads, kvh, dqk, dv;
    bool causal;      /* key j visible to query i iff j <= i + (t - s) */
    float scale;      /* usually 1/sqrt(dqk) */
} loom_attn_shape;

/* q [b,s,heads,dqk], k [b,t,kvh,dqk], v [b,t,kvh,dv] -> o [b,s,heads,dv],
 * lse [b,heads,s] fp32. dt bf16 or fp16; dqk, dv <= 256. max_smem: the
 * device's opt-in shared memory per block (picks the tile sizes). */
cudaError_t loom_k_attn_fwd(loom_dtype dt, const loom_attn_shape *sh, const void *q,
                            const void *k, const void *v, void *o, float *lse, int max_smem,
                            cudaStream_t stream);
/* Scratch sizes in bytes for the backward (fp32 accumulators). */
int64_t loom_k_attn_bwd_scratch_bytes(const loom_attn_shape *sh);
cudaError_t loom_k_attn_bwd(loom_dtype dt, const loom_attn_shape *sh, const void *q,
                            const void *k, const void *v, const void *o, const void *dout,
                            const float *lse, void *scratch, void *dq, void *dk, void *dv,
                            int max_smem, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
