/*
 * einsum_plan.h — how loom-profile runs a two-operand einsum as one
 * (strided-batched) cuBLASLt matmul, plus the transposes it needs.
 *
 * For Z = einsum("X,Y->Z") every letter is one of
 *   batch  in X, Y and Z      (e in "ech,ehf->ecf")
 *   M      in X and Z only    (b, s in "bsh,hf->bsf")
 *   N      in Y and Z only    (f)
 *   K      in X and Y only    (h: contracted)
 * Letters of a group are merged into one matrix dim when they are adjacent in
 * every operand, so the einsum is the row-major batched product
 *     Z'[Bt][M][N] = L'[Bt][M][K] · R'[Bt][K][N]
 * with L = X, R = Y (or swapped when Z is stored [Bt][N][M]). An operand
 * whose letters are not in such an order (the batch letters not leading, a
 * group split) is first copied into that order by a permute kernel, exactly
 * what a framework's .contiguous() would do; the copies are part of the op's
 * measured time. Each operand may also be stored transposed ([K][M], [N][K]),
 * which cuBLAS absorbs with its transpose flags.
 *
 * cuBLAS is column-major: a row-major [r][c] buffer is the column-major c×r
 * matrix with ld = c. So Z'ᵀ (N×M, ldc = N) = R'ᵀ · L'ᵀ, i.e. cuBLAS
 *     A = R' (op(A) is N×K), B = L' (op(B) is K×M), m = N, n = M, k = K.
 * FP8 (cuBLASLt on sm_89+) accepts only the "TN" form: A transposed, B not,
 * i.e. R' stored [N][K] and L' stored [M][K]; fp8_tn forces that.
 *
 * This file is plain C (no CUDA) so tests can check plans on any machine.
 */
#ifndef LOOM_GPU_EINSUM_PLAN_H
#define LOOM_GPU_EINSUM_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "graph/graph.h"

#define LOOM_EINSUM_PLAN_MAX_RANK 8

/* dst dim i is src dim perm[i]; src is row-major with sizes src_sizes. */
typedef struct {
    int ndim;
    int64_t src_sizes[LOOM_EINSUM_PLAN_MAX_RANK];
    int perm[LOOM_EINSUM_PLAN_MAX_RANK];
} loom_permute_desc;

/* One cuBLAS(Lt) strided-batched call in column-major terms. */
typedef struct {
    bool trans_a, trans_b;
    int64_t m, n, k;
    int64_t lda, ldb, ldc;
    int64_t batch;
    int64_t stride_a, stride_b, stride_c;
} loom_gemm_desc;

typedef struct {
    bool swap;                 /* L = Y, R = X (Z is stored [Bt][N][M]) */
    bool perm_x, perm_y, perm_z;
    loom_permute_desc px;      /* X -> X' */
    loom_permute_desc py;      /* Y -> Y' */
    loom_permute_desc pz;      /* Z' -> Z */
    loom_gemm_desc g;          /* A = R', B = L', C = Z' */
    int64_t x_elems, y_elems, z_elems;
    int64_t flops;             /* 2 · Bt · M · N · K */
} loom_einsum_plan;

/* Plans "X,Y->Z" given every letter's size (dims named by letter, as in a
 * profile key). LOOM_ERR_UNSUPPORTED for einsums that are not one matmul
 * (not two operands, a letter repeated in an operand or summed over one
 * operand only); LOOM_ERR_INVALID for malformed subscripts or a letter
 * without a size. */
loom_status loom_einsum_plan_make(const char *sig, const loom_dim *letters, int n_letters,
                                  bool fp8_tn, loom_einsum_plan *out, loom_error *err);

/* The subscripts of the gradient einsums of "X,Y->Z":
 * which = 0: dX = "Z,Y->X"; which = 1: dY = "X,Z->Y". */
loom_status loom_einsum_grad_sig(const char *sig, int which, char *out, int out_size,
                                 loom_error *err);

/* Sizes of the permute's destination, dim by dim. */
void loom_permute_dst_sizes(const loom_permute_desc *p, int64_t *dst_sizes);

#endif
