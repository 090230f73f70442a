/*
 * einsum_plan.c — an einsum as permutes + one strided-batched matmul (see
 * einsum_plan.h for the derivation).
 *
 * Choices, in order: (1) the group orders of batch, M and N letters are
 * Z's, so the output needs no copy when Z is already [Bt][M][N] or
 * [Bt][N][M] (then X and Y swap roles); (2) the K order is taken from the
 * left or the right operand, whichever saves a copy; (3) an operand not in a
 * usable order is permuted into [Bt][M][K] (left) or [Bt][K][N] (right;
 * [Bt][N][K] under FP8's TN rule).
 */
#include "gpu/einsum_plan.h"

#include <stdio.h>
#include <string.h>

enum { G_BATCH, G_M, G_N, G_K };

typedef struct {
    char s[LOOM_EINSUM_PLAN_MAX_RANK + 1];
    int n;
} opnd;

static loom_status split_sig(const char *sig, opnd *x, opnd *y, opnd *z, loom_error *err)
{
    const char *arrow = strstr(sig, "->"), *comma = strchr(sig, ',');
    int commas = 0;
    for (const char *p = sig; arrow && p < arrow; p++) commas += *p == ',';
    if (arrow && commas > 1)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "einsum \"%s\": only two-operand einsums run as one matmul", sig);
    if (!arrow || commas != 1 || strchr(arrow, ','))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "einsum \"%s\": expected \"X,Y->Z\" subscripts", sig);
    const char *parts[3][2] = {{sig, comma}, {comma + 1, arrow}, {arrow + 2, arrow + 2 + strlen(arrow + 2)}};
    opnd *o[3] = {x, y, z};
    for (int i = 0; i < 3; i++) {
        int n = (int)(parts[i][1] - parts[i][0]);
        if (n < 1 || n > LOOM_EINSUM_PLAN_MAX_RANK)
            return loom_error_set(err, n < 1 ? LOOM_ERR_INVALID : LOOM_ERR_UNSUPPORTED,
                                  "einsum \"%s\": operand %d has %d letters (expected 1..%d)", sig,
                                  i, n, LOOM_EINSUM_PLAN_MAX_RANK);
        memcpy(o[i]->s, parts[i][0], (size_t)n);
        o[i]->s[n] = '\0';
        o[i]->n = n;
        for (int a = 0; a < n; a++) {
            char c = o[i]->s[a];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
                return loom_error_set(err, LOOM_ERR_INVALID, "einsum \"%s\": '%c' is not a letter",
                                      sig, c);
            for (int b = 0; b < a; b++)
                if (o[i]->s[b] == c)
                    return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                          "einsum \"%s\": letter '%c' repeats in one operand "
                                          "(a diagonal is not a matmul)", sig, c);
        }
    }
    return LOOM_OK;
}

static bool has(const opnd *o, char c) { return strchr(o->s, c) != NULL; }

/* Concatenation of groups g0, g1, g2 (each a letter string). */
static void cat3(char *dst, const char *g0, const char *g1, const char *g2)
{
    const char *g[3] = {g0, g1, g2};
    int n = 0;
    for (int i = 0; i < 3; i++)
        for (const char *c = g[i]; *c && n < LOOM_EINSUM_PLAN_MAX_RANK; c++) dst[n++] = *c;
    dst[n] = '\0';
}

/* Letters of group g in the order they appear in o. */
static void group_in(const opnd *o, const int *group_of, int g, char *dst)
{
    int n = 0;
    for (int i = 0; i < o->n; i++)
        if (group_of[(unsigned char)o->s[i]] == g) dst[n++] = o->s[i];
    dst[n] = '\0';
}

static void make_perm(const opnd *src, const char *dst_order, const int64_t *size,
                      loom_permute_desc *p)
{
    p->ndim = src->n;
    for (int i = 0; i < src->n; i++) {
        p->src_sizes[i] = size[(unsigned char)src->s[i]];
        p->perm[i] = (int)(strchr(src->s, dst_order[i]) - src->s);
    }
}

static int64_t prod(const char *letters, const int64_t *size)
{
    int64_t p = 1;
    for (const char *c = letters; *c; c++) p *= size[(unsigned char)*c];
    return p;
}

void loom_permute_dst_sizes(const loom_permute_desc *p, int64_t *dst_sizes)
{
    for (int i = 0; i < p->ndim; i++) dst_sizes[i] = p->src_sizes[p->perm[i]];
}

loom_status loom_einsum_plan_make(const char *sig, const loom_dim *letters, int n_letters,
                                  bool fp8_tn, loom_einsum_plan *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    opnd x, y, z;
    loom_status s = split_sig(sig, &x, &y, &z, err);
    if (s) return s;
    int64_t size[128] = {0};
    for (int i = 0; i < n_letters; i++)
        if (letters[i].name[0] && !letters[i].name[1] && (unsigned char)letters[i].name[0] < 128)
            size[(unsigned char)letters[i].name[0]] = letters[i].size;
    int group_of[128];
    for (int i = 0; i < 128; i++) group_of[i] = -1;
    const opnd *all[3] = {&x, &y, &z};
    for (int o = 0; o < 3; o++)
        for (int i = 0; i < all[o]->n; i++) {
            char c = all[o]->s[i];
            if (size[(unsigned char)c] < 1)
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "einsum \"%s\": no size given for letter '%c'", sig, c);
            bool ix = has(&x, c), iy = has(&y, c), iz = has(&z, c);
            int g = ix && iy && iz ? G_BATCH : ix && iz ? G_M : iy && iz ? G_N : ix && iy ? G_K : -1;
            if (g < 0)
                return loom_error_set(err, iz ? LOOM_ERR_INVALID : LOOM_ERR_UNSUPPORTED,
                                      iz ? "einsum \"%s\": output letter '%c' is in no input"
                                         : "einsum \"%s\": letter '%c' is summed over one operand "
                                           "only (not a matmul)", sig, c);
            group_of[(unsigned char)c] = g;
        }
    /* (1) Batch, M, N orders from Z; swap when Z is [Bt][N][M]. */
    char gb[9], gm[9], gn[9], gk[9], want[9];
    group_in(&z, group_of, G_BATCH, gb);
    group_in(&z, group_of, G_M, gm);
    group_in(&z, group_of, G_N, gn);
    cat3(want, gb, gm, gn);
    if (strcmp(z.s, want) != 0) {
        cat3(want, gb, gn, gm);
        if (strcmp(z.s, want) == 0) out->swap = true;
    }
    const opnd *L = out->swap ? &y : &x, *R = out->swap ? &x : &y;
    if (out->swap) {   /* M and N exchange roles */
        char t[9];
        strcpy(t, gm), strcpy(gm, gn), strcpy(gn, t);
    }
    cat3(want, gb, gm, gn);
    out->perm_z = strcmp(z.s, want) != 0;
    /* Z' -> Z: Z's dim i is Z' dim (position of z[i] in Z'). */
    if (out->perm_z) {
        opnd zp;
        strcpy(zp.s, want);
        zp.n = z.n;
        make_perm(&zp, z.s, size, &out->pz);
    }

    /* (2) K order: L's or R's, whichever leaves fewer operands to copy. */
    char kl[9], kr[9];
    group_in(L, group_of, G_K, kl);
    group_in(R, group_of, G_K, kr);
    bool l_ok[2][2], r_ok[2][2];   /* [k order from L/R][stored plain/transposed] */
    const char *kord[2] = {kl, kr};
    for (int c = 0; c < 2; c++) {
        char f[9];
        cat3(f, gb, gm, kord[c]), l_ok[c][0] = strcmp(L->s, f) == 0;
        cat3(f, gb, kord[c], gm), l_ok[c][1] = !fp8_tn && strcmp(L->s, f) == 0;
        cat3(f, gb, kord[c], gn), r_ok[c][0] = !fp8_tn && strcmp(R->s, f) == 0;
        cat3(f, gb, gn, kord[c]), r_ok[c][1] = strcmp(R->s, f) == 0;
    }
    int copies[2];
    for (int c = 0; c < 2; c++)
        copies[c] = !(l_ok[c][0] || l_ok[c][1]) + !(r_ok[c][0] || r_ok[c][1]);
    int c = copies[1] < copies[0] ? 1 : 0;
    strcpy(gk, kord[c]);

    /* (3) Layouts of L' and R' and the permutes into them. */
    bool l_trans = !l_ok[c][0] && l_ok[c][1];
    bool r_trans = fp8_tn || (!r_ok[c][0] && r_ok[c][1]);
    bool perm_l = !(l_ok[c][0] || l_ok[c][1]), perm_r = !(r_ok[c][0] || r_ok[c][1]);
    char lo[9], ro[9];
    if (l_trans) cat3(lo, gb, gk, gm);
    else cat3(lo, gb, gm, gk);
    if (r_trans) cat3(ro, gb, gn, gk);
    else cat3(ro, gb, gk, gn);
    loom_permute_desc *pl = out->swap ? &out->py : &out->px, *pr = out->swap ? &out->px : &out->py;
    if (perm_l) make_perm(L, lo, size, pl);
    if (perm_r) make_perm(R, ro, size, pr);
    out->perm_x = out->swap ? perm_r : perm_l;
    out->perm_y = out->swap ? perm_l : perm_r;

    int64_t B = prod(gb, size), M = prod(gm, size), N = prod(gn, size), K = prod(gk, size);
    loom_gemm_desc *g = &out->g;
    g->m = N, g->n = M, g->k = K;
    g->trans_a = r_trans;                /* R' [N][K] is op(A) = R'ᵀ... see header */
    g->lda = r_trans ? K : N;
    g->trans_b = l_trans;
    g->ldb = l_trans ? M : K;
    g->ldc = N;
    g->batch = B;
    g->stride_a = B > 1 ? K * N : 0;
    g->stride_b = B > 1 ? M * K : 0;
    g->stride_c = B > 1 ? M * N : 0;
    out->x_elems = prod(x.s, size);
    out->y_elems = prod(y.s, size);
    out->z_elems = prod(z.s, size);
    out->flops = 2 * B * M * N * K;
    return LOOM_OK;
}

loom_status loom_einsum_grad_sig(const char *sig, int which, char *dst, int dst_size,
                                 loom_error *err)
{
    opnd x, y, z;
    loom_status s = split_sig(sig, &x, &y, &z, err);
    if (s) return s;
    int n = which == 0 ? snprintf(dst, (size_t)dst_size, "%s,%s->%s", z.s, y.s, x.s)
                       : snprintf(dst, (size_t)dst_size, "%s,%s->%s", x.s, z.s, y.s);
    if (n < 0 || n >= dst_size)
        return loom_error_set(err, LOOM_ERR_INVALID, "einsum \"%s\": gradient subscripts too long",
                              sig);
    return LOOM_OK;
}
