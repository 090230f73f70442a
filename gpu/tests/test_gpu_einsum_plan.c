/*
 * test_gpu_einsum_plan.c — einsum -> permutes + one cuBLAS call, checked on
 * the host (no GPU needed): each plan is executed by a literal emulator of
 * the permute kernel and of cuBLAS's column-major strided-batched GEMM
 * semantics (op(A), lda, strides), and compared with a naive einsum. The
 * gradient einsums of each case are planned and checked the same way, with
 * and without FP8's TN restriction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu/einsum_plan.h"

typedef struct {
    const char *sig;
    const char *letters;
    int64_t sizes[8];
} ecase;

static const ecase cases[] = {
    {"bsh,hf->bsf", "bshf", {2, 3, 4, 5}},
    {"bsh,hnd->bsnd", "bshnd", {2, 3, 4, 2, 3}},
    {"bsnd,ndh->bsh", "bsndh", {2, 3, 2, 3, 4}},
    {"bsh,vh->bsv", "bshv", {2, 3, 4, 7}},                /* tied lm_head: weight [v, h] */
    {"ech,ehf->ecf", "echf", {3, 4, 5, 2}},               /* experts: batch e leads */
    {"bsnd,btnd->bnst", "bsndt", {2, 3, 2, 4, 5}},        /* unfused attention scores */
    {"bnst,btnd->bsnd", "bnstd", {2, 2, 3, 5, 4}},        /* attention context */
    {"bsh,hqnd->bsqnd", "bshqnd", {1, 3, 4, 3, 2, 2}},    /* GPT-2 fused c_attn */
    {"hf,bsh->bsf", "hfbs", {4, 5, 2, 3}},                /* operands given weight first */
    {"bsh,hf->fbs", "bshf", {2, 3, 4, 5}},                /* output stored [N][M] */
    {"sbh,hf->bsf", "sbhf", {3, 2, 4, 5}},                /* M group out of order */
};

static int64_t letter_size(const ecase *c, char l)
{
    const char *p = strchr(c->letters, l);
    return p ? c->sizes[p - c->letters] : 0;
}

/* Splits "X,Y->Z". */
static void parts(const char *sig, char *x, char *y, char *z)
{
    const char *comma = strchr(sig, ','), *arrow = strstr(sig, "->");
    memcpy(x, sig, (size_t)(comma - sig));
    x[comma - sig] = '\0';
    memcpy(y, comma + 1, (size_t)(arrow - comma - 1));
    y[arrow - comma - 1] = '\0';
    strcpy(z, arrow + 2);
}

/* Row-major offset of the element whose letters take values val[letter]. */
static int64_t offset(const char *subs, const ecase *c, const int64_t *val)
{
    int64_t off = 0;
    for (const char *p = subs; *p; p++) off = off * letter_size(c, *p) + val[(unsigned char)*p];
    return off;
}

/* Naive einsum over every assignment of all letters. */
static void naive(const char *sig, const ecase *c, const double *x, const double *y, double *z,
                  int64_t nz)
{
    char xs[9], ys[9], zs[9];
    parts(sig, xs, ys, zs);
    char all[16] = "";
    for (const char *s = sig; *s; s++)
        if (((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')) && !strchr(all, *s))
            strncat(all, s, 1);
    memset(z, 0, (size_t)nz * sizeof *z);
    int64_t val[128] = {0};
    int n = (int)strlen(all);
    for (;;) {
        z[offset(zs, c, val)] += x[offset(xs, c, val)] * y[offset(ys, c, val)];
        int i = n - 1;
        while (i >= 0 && ++val[(unsigned char)all[i]] == letter_size(c, all[i])) val[(unsigned char)all[i--]] = 0;
        if (i < 0) break;
    }
}

/* The permute kernel's semantics: dst dim i is src dim perm[i]. */
static void emu_permute(const loom_permute_desc *p, const double *src, double *dst)
{
    int64_t dsz[LOOM_EINSUM_PLAN_MAX_RANK], sstride[LOOM_EINSUM_PLAN_MAX_RANK], n = 1;
    loom_permute_dst_sizes(p, dsz);
    for (int i = p->ndim - 1, st = 1; i >= 0; i--) {
        sstride[i] = st;
        st *= (int)p->src_sizes[i];
    }
    for (int i = 0; i < p->ndim; i++) n *= dsz[i];
    for (int64_t lin = 0; lin < n; lin++) {
        int64_t rem = lin, off = 0;
        for (int i = p->ndim - 1; i >= 0; i--) {
            off += (rem % dsz[i]) * sstride[p->perm[i]];
            rem /= dsz[i];
        }
        dst[lin] = src[off];
    }
}

/* cuBLAS column-major: C[i + j·ldc] = Σ_l op(A)(i,l) · op(B)(l,j), where
 * op(A)(i,l) = A[i + l·lda] (N) or A[l + i·lda] (T). */
static void emu_gemm(const loom_gemm_desc *g, const double *A, const double *B, double *C)
{
    for (int64_t bt = 0; bt < g->batch; bt++) {
        const double *a = A + bt * g->stride_a, *b = B + bt * g->stride_b;
        double *cc = C + bt * g->stride_c;
        for (int64_t i = 0; i < g->m; i++)
            for (int64_t j = 0; j < g->n; j++) {
                double acc = 0;
                for (int64_t l = 0; l < g->k; l++) {
                    double av = g->trans_a ? a[l + i * g->lda] : a[i + l * g->lda];
                    double bv = g->trans_b ? b[j + l * g->ldb] : b[l + j * g->ldb];
                    acc += av * bv;
                }
                cc[i + j * g->ldc] = acc;
            }
    }
}

static void emu_plan(const loom_einsum_plan *p, const double *x, const double *y, double *z)
{
    double *xp = malloc((size_t)p->x_elems * sizeof *xp), *yp = malloc((size_t)p->y_elems * sizeof *yp);
    double *zp = malloc((size_t)p->z_elems * sizeof *zp);
    if (p->perm_x) emu_permute(&p->px, x, xp);
    else memcpy(xp, x, (size_t)p->x_elems * sizeof *xp);
    if (p->perm_y) emu_permute(&p->py, y, yp);
    else memcpy(yp, y, (size_t)p->y_elems * sizeof *yp);
    const double *L = p->swap ? yp : xp, *R = p->swap ? xp : yp;
    emu_gemm(&p->g, R, L, p->perm_z ? zp : z);
    if (p->perm_z) emu_permute(&p->pz, zp, z);
    free(xp);
    free(yp);
    free(zp);
}

static int64_t numel(const char *subs, const ecase *c)
{
    int64_t n = 1;
    for (const char *p = subs; *p; p++) n *= letter_size(c, *p);
    return n;
}

static void check_sig(const char *sig, const ecase *c, bool fp8)
{
    loom_dim dims[8];
    int nl = (int)strlen(c->letters);
    for (int i = 0; i < nl; i++) {
        dims[i].name[0] = c->letters[i];
        dims[i].name[1] = '\0';
        dims[i].size = c->sizes[i];
    }
    loom_einsum_plan p;
    loom_error err;
    loom_status s = loom_einsum_plan_make(sig, dims, nl, fp8, &p, &err);
    CHECK_INT_EQ(s, LOOM_OK);
    if (s) {
        fprintf(stderr, "  %s: %s\n", sig, err.msg);
        return;
    }
    if (fp8) CHECK(p.g.trans_a && !p.g.trans_b);
    char xs[9], ys[9], zs[9];
    parts(sig, xs, ys, zs);
    int64_t nx = numel(xs, c), ny = numel(ys, c), nz = numel(zs, c);
    CHECK_INT_EQ(p.x_elems, nx);
    CHECK_INT_EQ(p.z_elems, nz);
    double *x = malloc((size_t)nx * sizeof *x), *y = malloc((size_t)ny * sizeof *y);
    double *z1 = malloc((size_t)nz * sizeof *z1), *z2 = malloc((size_t)nz * sizeof *z2);
    /* Small integers: sums are exact in double. */
    for (int64_t i = 0; i < nx; i++) x[i] = (double)((i * 7 + 3) % 11) - 5;
    for (int64_t i = 0; i < ny; i++) y[i] = (double)((i * 5 + 1) % 13) - 6;
    naive(sig, c, x, y, z1, nz);
    emu_plan(&p, x, y, z2);
    int bad = 0;
    for (int64_t i = 0; i < nz; i++) bad += z1[i] != z2[i];
    if (bad) fprintf(stderr, "  %s (fp8 %d): %d of %lld elements differ\n", sig, fp8, bad, (long long)nz);
    CHECK_INT_EQ(bad, 0);
    free(x);
    free(y);
    free(z1);
    free(z2);
}

int main(void)
{
    loom_error err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int fp8 = 0; fp8 < 2; fp8++) {
            check_sig(cases[i].sig, &cases[i], fp8);
            for (int w = 0; w < 2; w++) {
                char g[64];
                CHECK_INT_EQ(loom_einsum_grad_sig(cases[i].sig, w, g, sizeof g, &err), LOOM_OK);
                check_sig(g, &cases[i], fp8);
            }
        }

    /* Plans that need no copies, and ones that do. */
    loom_dim d4[] = {{"b", 2}, {"s", 3}, {"h", 4}, {"f", 5}, {"v", 7}};
    loom_einsum_plan p;
    CHECK_INT_EQ(loom_einsum_plan_make("bsh,hf->bsf", d4, 5, false, &p, &err), LOOM_OK);
    CHECK(!p.perm_x && !p.perm_y && !p.perm_z && !p.swap && !p.g.trans_a && !p.g.trans_b);
    CHECK_INT_EQ(p.g.m, 5);
    CHECK_INT_EQ(p.g.n, 6);
    CHECK_INT_EQ(p.g.k, 4);
    CHECK_INT_EQ(p.g.batch, 1);
    CHECK_INT_EQ(p.flops, 2 * 2 * 3 * 4 * 5);
    CHECK_INT_EQ(loom_einsum_plan_make("bsh,vh->bsv", d4, 5, false, &p, &err), LOOM_OK);
    CHECK(!p.perm_x && !p.perm_y && p.g.trans_a && !p.g.trans_b);
    /* FP8's TN rule: the weight [h][f] must be copied to [f][h]. */
    CHECK_INT_EQ(loom_einsum_plan_make("bsh,hf->bsf", d4, 5, true, &p, &err), LOOM_OK);
    CHECK(!p.perm_x && p.perm_y && p.g.trans_a);
    /* dW = "bsh,bsf->hf": K = b,s leads X: transposed B, no copy (not fp8). */
    CHECK_INT_EQ(loom_einsum_plan_make("bsh,bsf->hf", d4, 5, false, &p, &err), LOOM_OK);
    CHECK(!p.perm_x && !p.perm_y && p.g.trans_b);
    CHECK_INT_EQ(p.g.k, 6);
    loom_dim da[] = {{"b", 2}, {"s", 3}, {"n", 2}, {"d", 4}, {"t", 5}};
    CHECK_INT_EQ(loom_einsum_plan_make("bsnd,btnd->bnst", da, 5, false, &p, &err), LOOM_OK);
    CHECK(p.perm_x && p.perm_y && !p.perm_z);
    CHECK_INT_EQ(p.g.batch, 4);
    CHECK_INT_EQ(p.g.stride_c, 15);
    CHECK_INT_EQ(loom_einsum_plan_make("ech,ehf->ecf", (loom_dim[]){{"e", 3}, {"c", 4}, {"h", 5}, {"f", 2}},
                                       4, false, &p, &err), LOOM_OK);
    CHECK(!p.perm_x && !p.perm_y && !p.perm_z);
    CHECK_INT_EQ(p.g.batch, 3);
    CHECK_INT_EQ(p.g.stride_b, 20);

    /* What is not one matmul, and malformed input. */
    CHECK(loom_einsum_plan_make("ab,bc,cd->ad", d4, 5, false, &p, &err) == LOOM_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "only two-operand");
    CHECK(loom_einsum_plan_make("bsh,hf->bs", d4, 5, false, &p, &err) == LOOM_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "letter 'f' is summed over one operand");
    CHECK(loom_einsum_plan_make("bbh,hf->bf", d4, 5, false, &p, &err) == LOOM_ERR_UNSUPPORTED);
    CHECK(loom_einsum_plan_make("bsh,hx->bsx", d4, 5, false, &p, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "no size given for letter 'x'");
    CHECK(loom_einsum_plan_make("bsh->bsh", d4, 5, false, &p, &err) == LOOM_ERR_INVALID);
    CHECK(loom_einsum_plan_make("bsh,hf-bsf", d4, 5, false, &p, &err) == LOOM_ERR_INVALID);
    return check_done();
}
