/*
 * gemm.c — an einsum as cuBLASLt calls (gemm.h).
 *
 * Mapping of the plan (einsum_plan.h, cuBLAS column-major terms) onto
 * cuBLASLt: the stored A is (trans_a ? k×m : m×k) with ld lda, the stored B
 * is (trans_b ? n×k : k×n) with ldb, C and D are m×n with ldc; batches use
 * CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT and _STRIDED_BATCH_OFFSET. The
 * algorithm is the first answer of cublasLtMatmulAlgoGetHeuristic with the
 * context's 32 MiB workspace, chosen once at creation as a framework would
 * after its first call. cuBLAS status codes are translated here.
 */
#include "gpu/gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "gpu/kernels.h"

struct loom_gemm {
    loom_gpu *g;
    char sig[LOOM_EINSUM_MAX];
    loom_einsum_plan plan;
    loom_dtype in_dt, out_dt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulHeuristicResult_t algo;
    void *xp, *yp, *zp;   /* permuted copies (NULL when not needed) */
    int64_t scratch_bytes;
};

static loom_status lt_check(cublasStatus_t st, const char *what, const char *sig, loom_error *err)
{
    if (st == CUBLAS_STATUS_SUCCESS) return LOOM_OK;
    return loom_error_set(err, LOOM_ERR_DEVICE, "einsum \"%s\": %s: %s", sig, what,
                          cublasLtGetStatusString(st));
}

static cudaDataType_t cuda_type(loom_dtype dt)
{
    switch (dt) {
    case LOOM_DTYPE_FP16: return CUDA_R_16F;
    case LOOM_DTYPE_FP32: return CUDA_R_32F;
    case LOOM_DTYPE_FP8: return CUDA_R_8F_E4M3;
    default: return CUDA_R_16BF;
    }
}

/* A layout of rows × cols (column-major, ld), batched when batch > 1. */
static cublasStatus_t layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows,
                             int64_t cols, int64_t ld, int64_t batch, int64_t stride)
{
    cublasStatus_t st = cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld);
    if (st != CUBLAS_STATUS_SUCCESS || batch <= 1) return st;
    int32_t bc = (int32_t)batch;
    st = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    return cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &stride, sizeof stride);
}

loom_status loom_gemm_create(loom_gpu *g, const char *sig, const loom_dim *letters, int n_letters,
                             loom_dtype dt, loom_gemm **out, loom_error *err)
{
    *out = NULL;
    if (dt != LOOM_DTYPE_BF16 && dt != LOOM_DTYPE_FP16 && dt != LOOM_DTYPE_FP32 && dt != LOOM_DTYPE_FP8)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "einsum \"%s\": dtype %s has no GEMM path",
                              sig, loom_dtype_name(dt));
    if (dt == LOOM_DTYPE_FP8 && !loom_gpu_has_fp8(g))
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "einsum \"%s\": fp8 GEMMs need compute capability 8.9 or newer; "
                              "this GPU is %d.%d", sig, loom_gpu_info_of(g)->cc_major,
                              loom_gpu_info_of(g)->cc_minor);
    loom_gemm *m = calloc(1, sizeof *m);
    if (!m) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    m->g = g;
    snprintf(m->sig, sizeof m->sig, "%s", sig);
    m->in_dt = dt;
    m->out_dt = dt == LOOM_DTYPE_FP8 ? LOOM_DTYPE_BF16 : dt;
    loom_status s = loom_einsum_plan_make(sig, letters, n_letters, dt == LOOM_DTYPE_FP8, &m->plan, err);
    if (s) goto fail;
    const loom_einsum_plan *p = &m->plan;
    const loom_gemm_desc *d = &p->g;
    size_t ein = (size_t)loom_dtype_bytes(dt), eout = (size_t)loom_dtype_bytes(m->out_dt);
    if ((p->perm_x && (s = loom_gpu_alloc((size_t)p->x_elems * ein, "an einsum operand copy", &m->xp, err))) ||
        (p->perm_y && (s = loom_gpu_alloc((size_t)p->y_elems * ein, "an einsum operand copy", &m->yp, err))) ||
        (p->perm_z && (s = loom_gpu_alloc((size_t)p->z_elems * eout, "an einsum result copy", &m->zp, err))))
        goto fail;
    m->scratch_bytes = (int64_t)((p->perm_x ? (size_t)p->x_elems * ein : 0) +
                                 (p->perm_y ? (size_t)p->y_elems * ein : 0) +
                                 (p->perm_z ? (size_t)p->z_elems * eout : 0));

    cublasOperation_t ta = d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t tin = cuda_type(dt), tout = cuda_type(m->out_dt);
    if ((s = lt_check(cublasLtMatmulDescCreate(&m->op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                      "cublasLtMatmulDescCreate", sig, err)) ||
        (s = lt_check(cublasLtMatmulDescSetAttribute(m->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                      "set TRANSA", sig, err)) ||
        (s = lt_check(cublasLtMatmulDescSetAttribute(m->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                      "set TRANSB", sig, err)) ||
        (s = lt_check(layout(&m->a, tin, d->trans_a ? d->k : d->m, d->trans_a ? d->m : d->k, d->lda,
                             d->batch, d->stride_a), "layout A", sig, err)) ||
        (s = lt_check(layout(&m->b, tin, d->trans_b ? d->n : d->k, d->trans_b ? d->k : d->n, d->ldb,
                             d->batch, d->stride_b), "layout B", sig, err)) ||
        (s = lt_check(layout(&m->c, tout, d->m, d->n, d->ldc, d->batch, d->stride_c), "layout C", sig,
                      err)))
        goto fail;

    cublasLtMatmulPreference_t pref = NULL;
    size_t ws_bytes;
    loom_gpu_workspace(g, &ws_bytes);
    uint64_t ws = ws_bytes;
    int found = 0;
    if (!(s = lt_check(cublasLtMatmulPreferenceCreate(&pref), "preference", sig, err)) &&
        !(s = lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &ws, sizeof ws), "workspace preference", sig, err)))
        s = lt_check(cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)loom_gpu_cublaslt(g), m->op, m->a,
                                                    m->b, m->c, m->c, pref, 1, &m->algo, &found),
                     "cublasLtMatmulAlgoGetHeuristic", sig, err);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (s) goto fail;
    if (found < 1) {
        s = loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                           "einsum \"%s\" (%s): cuBLASLt has no algorithm for m=%lld n=%lld k=%lld "
                           "batch=%lld", sig, loom_dtype_name(dt), (long long)d->m, (long long)d->n,
                           (long long)d->k, (long long)d->batch);
        goto fail;
    }
    *out = m;
    return LOOM_OK;
fail:
    loom_gemm_destroy(m);
    return s;
}

void loom_gemm_destroy(loom_gemm *m)
{
    if (!m) return;
    if (m->a) cublasLtMatrixLayoutDestroy(m->a);
    if (m->b) cublasLtMatrixLayoutDestroy(m->b);
    if (m->c) cublasLtMatrixLayoutDestroy(m->c);
    if (m->op) cublasLtMatmulDescDestroy(m->op);
    cudaFree(m->xp);
    cudaFree(m->yp);
    cudaFree(m->zp);
    free(m);
}

static loom_status permute(const loom_permute_desc *p, int elem, const void *src, void *dst,
                           cudaStream_t st, loom_error *err)
{
    return loom_gpu_check(loom_k_permute(elem, src, dst, p->ndim, p->src_sizes, p->perm, st),
                          "permute kernel", err);
}

loom_status loom_gemm_run(loom_gemm *m, const void *x, const void *y, void *z, loom_error *err)
{
    const loom_einsum_plan *p = &m->plan;
    cudaStream_t st = loom_gpu_stream(m->g);
    int ein = loom_dtype_bytes(m->in_dt), eout = loom_dtype_bytes(m->out_dt);
    loom_status s;
    if (p->perm_x) {
        if ((s = permute(&p->px, ein, x, m->xp, st, err))) return s;
        x = m->xp;
    }
    if (p->perm_y) {
        if ((s = permute(&p->py, ein, y, m->yp, st, err))) return s;
        y = m->yp;
    }
    /* cuBLAS A = R' (the right operand), B = L'. */
    const void *A = p->swap ? x : y, *B = p->swap ? y : x;
    void *C = p->perm_z ? m->zp : z;
    size_t ws_bytes;
    void *ws = loom_gpu_workspace(m->g, &ws_bytes);
    float alpha = 1.f, beta = 0.f;
    cublasStatus_t bs = cublasLtMatmul((cublasLtHandle_t)loom_gpu_cublaslt(m->g), m->op, &alpha, A,
                                       m->a, B, m->b, &beta, C, m->c, C, m->c, &m->algo.algo, ws,
                                       ws_bytes, st);
    if (bs != CUBLAS_STATUS_SUCCESS) return lt_check(bs, "cublasLtMatmul", m->sig, err);
    if (p->perm_z && (s = permute(&p->pz, eout, m->zp, z, st, err))) return s;
    return LOOM_OK;
}

const loom_einsum_plan *loom_gemm_plan(const loom_gemm *m) { return &m->plan; }
int64_t loom_gemm_scratch_bytes(const loom_gemm *m) { return m->scratch_bytes; }
loom_dtype loom_gemm_out_dtype(const loom_gemm *m) { return m->out_dt; }
