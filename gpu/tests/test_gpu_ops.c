/*
 * test_gpu_ops.c — every op kind loom-profile runs, forward and backward on
 * the GPU, checked against independent host references in double precision
 * on small shapes (odd sizes, to exercise tails, padding and masks).
 * Exits 77 (skipped) without a CUDA device.
 *
 * Tolerances: results are compared as max |got - ref| / max |ref| over the
 * tensor; bf16 storage carries 8 mantissa bits (relative rounding 2^-9),
 * so bf16/fp16 cases allow 2.5e-2 (attention, whose P is rounded to bf16
 * before P·V, 3e-2), fp32 cases 1e-4.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu/device.h"
#include "gpu/op_runner.h"
#include "gpu_test.h"

static loom_gpu *gpu;

/* ---- host decoding of device data -------------------------------------------- */

static double bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double fp16(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static double fp8e4m3(uint8_t b)
{
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v = (e == 15 && m == 7) ? NAN : e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return s ? -v : v;
}

/* The named buffer as doubles (malloc'd). */
static double *fetch(const loom_gpu_op *op, const char *name)
{
    const loom_gpu_buf *b = loom_gpu_op_buffer(op, name);
    if (!b) {
        fprintf(stderr, "no buffer %s\n", name);
        exit(1);
    }
    size_t eb = (size_t)loom_dtype_bytes(b->dtype), n = (size_t)b->numel;
    unsigned char *raw = malloc(n * eb);
    double *d = malloc(n * sizeof *d);
    if (cudaMemcpy(raw, b->ptr, n * eb, cudaMemcpyDeviceToHost) != cudaSuccess) {
        fprintf(stderr, "copy of %s failed\n", name);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        int32_t i32;
        float f;
        switch (b->dtype) {
        case LOOM_DTYPE_BF16: memcpy(&h, raw + 2 * i, 2), d[i] = bf16(h); break;
        case LOOM_DTYPE_FP16: memcpy(&h, raw + 2 * i, 2), d[i] = fp16(h); break;
        case LOOM_DTYPE_FP8: d[i] = fp8e4m3(raw[i]); break;
        case LOOM_DTYPE_FP32: memcpy(&f, raw + 4 * i, 4), d[i] = f; break;
        case LOOM_DTYPE_INT32: memcpy(&i32, raw + 4 * i, 4), d[i] = i32; break;
        default: d[i] = raw[i]; break;
        }
    }
    free(raw);
    return d;
}

/* max |got - ref| / max |ref| <= tol */
static void near(const char *what, const double *got, const double *ref, int64_t n, double tol)
{
    double err = 0, mag = 0;
    int64_t worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(got[i] - ref[i]);
        if (!(e <= err)) err = e, worst = i;   /* NaN counts as worst */
        if (fabs(ref[i]) > mag) mag = fabs(ref[i]);
    }
    double rel = mag > 0 ? err / mag : err;
    if (!(rel <= tol))
        fprintf(stderr, "%s: relative error %.3g > %.3g (element %lld: %.6g vs %.6g)\n", what, rel,
                tol, (long long)worst, got[worst], ref[worst]);
    CHECK(rel <= tol);
}

/* Creates, runs forward and backward, synchronises. */
static loom_gpu_op *run(const loom_profile_key *k)
{
    loom_error err;
    loom_gpu_op *op = NULL;
    if (loom_gpu_op_create(gpu, k, 7, &op, &err) || loom_gpu_op_forward(op, &err) ||
        loom_gpu_op_backward(op, &err) ||
        loom_gpu_check(cudaDeviceSynchronize(), "sync", &err)) {
        fprintf(stderr, "%s %s: %s\n", k->op, k->sig, err.msg);
        CHECK(0);
        loom_gpu_op_destroy(op);
        return NULL;
    }
    return op;
}

/* ---- einsum ----------------------------------------------------------------- */

static int64_t lsize(const loom_profile_key *k, char c)
{
    char nm[2] = {c, 0};
    return loom_profile_key_dim(k, nm);
}

static int64_t offset_of(const char *subs, const loom_profile_key *k, const int64_t *val)
{
    int64_t off = 0;
    for (const char *p = subs; *p; p++) off = off * lsize(k, *p) + val[(unsigned char)*p];
    return off;
}

/* z = einsum(sig)(x, y) over all letter assignments. */
static void host_einsum(const char *sig, const loom_profile_key *k, const double *x,
                        const double *y, double *z, int64_t nz)
{
    char xs[9] = "", ys[9] = "", zs[9] = "";
    sscanf(sig, "%8[a-zA-Z],%8[a-zA-Z]->%8[a-zA-Z]", xs, ys, zs);
    for (int64_t i = 0; i < nz; i++) z[i] = 0;
    int64_t val[128] = {0};
    int n = k->n_dims;
    for (;;) {
        z[offset_of(zs, k, val)] += x[offset_of(xs, k, val)] * y[offset_of(ys, k, val)];
        int i = n - 1;
        while (i >= 0 && ++val[(unsigned char)k->shape[i].name[0]] == k->shape[i].size)
            val[(unsigned char)k->shape[i--].name[0]] = 0;
        if (i < 0) break;
    }
}

static void test_einsum(const char *sig, loom_dtype dt, const char *names, const int64_t *sizes,
                        double tol)
{
    loom_profile_key k = test_key("einsum", sig, dt, names, sizes);
    loom_gpu_op *op = run(&k);
    if (!op) return;
    const loom_gpu_buf *bz = loom_gpu_op_buffer(op, "z"), *bx = loom_gpu_op_buffer(op, "x"),
                       *by = loom_gpu_op_buffer(op, "y");
    double *x = fetch(op, "x"), *y = fetch(op, "y"), *z = fetch(op, "z"), *dz = fetch(op, "dz");
    double *dx = fetch(op, "dx"), *dy = fetch(op, "dy");
    double *rz = malloc((size_t)bz->numel * sizeof *rz), *rdx = malloc((size_t)bx->numel * sizeof *rdx);
    double *rdy = malloc((size_t)by->numel * sizeof *rdy);
    char gx[64], gy[64], xs[9], ys[9], zs[9];
    sscanf(sig, "%8[a-zA-Z],%8[a-zA-Z]->%8[a-zA-Z]", xs, ys, zs);
    snprintf(gx, sizeof gx, "%s,%s->%s", zs, ys, xs);
    snprintf(gy, sizeof gy, "%s,%s->%s", xs, zs, ys);
    host_einsum(sig, &k, x, y, rz, bz->numel);
    host_einsum(gx, &k, dz, y, rdx, bx->numel);
    host_einsum(gy, &k, x, dz, rdy, by->numel);
    char what[96];
    snprintf(what, sizeof what, "einsum %s %s z", sig, loom_dtype_name(dt));
    near(what, z, rz, bz->numel, tol);
    snprintf(what, sizeof what, "einsum %s %s dx", sig, loom_dtype_name(dt));
    near(what, dx, rdx, bx->numel, tol);
    snprintf(what, sizeof what, "einsum %s %s dy", sig, loom_dtype_name(dt));
    near(what, dy, rdy, by->numel, tol);
    free(x), free(y), free(z), free(dz), free(dx), free(dy), free(rz), free(rdx), free(rdy);
    loom_gpu_op_destroy(op);
}

/* ---- attention ------------------------------------------------------------------ */

static void test_attention(bool causal, loom_dtype dt, int64_t b, int64_t s, int64_t t,
                           int64_t heads, int64_t kvh, int64_t dqk, int64_t dv)
{
    loom_profile_key k = test_key("attention", causal ? "causal" : "full", dt, "b s t heads kvh dqk dv",
                             (int64_t[]){b, s, t, heads, kvh, dqk, dv});
    loom_gpu_op *op = run(&k);
    if (!op) return;
    double *q = fetch(op, "q"), *kk = fetch(op, "k"), *v = fetch(op, "v"), *o = fetch(op, "o");
    double *dO = fetch(op, "do"), *dq = fetch(op, "dq"), *dk = fetch(op, "dk"), *dvv = fetch(op, "dv");
    int64_t nq = b * s * heads, nk = b * t * kvh;
    double *ro = calloc((size_t)(nq * dv), sizeof *ro), *rdq = calloc((size_t)(nq * dqk), sizeof *rdq);
    double *rdk = calloc((size_t)(nk * dqk), sizeof *rdk), *rdv = calloc((size_t)(nk * dv), sizeof *rdv);
    double *p = malloc((size_t)t * sizeof *p), *dp = malloc((size_t)t * sizeof *dp);
    double scale = 1 / sqrt((double)dqk);
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < s; i++) {
                int64_t hk = h / (heads / kvh);
                const double *qi = q + ((bi * s + i) * heads + h) * dqk;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < t; j++) {
                    bool vis = !causal || j <= i + (t - s);
                    double acc = 0;
                    for (int64_t c = 0; c < dqk; c++) acc += qi[c] * kk[((bi * t + j) * kvh + hk) * dqk + c];
                    p[j] = vis ? acc * scale : -INFINITY;
                    if (p[j] > mx) mx = p[j];
                }
                for (int64_t j = 0; j < t; j++) sum += (p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx));
                for (int64_t j = 0; j < t; j++) p[j] = sum > 0 ? p[j] / sum : 0;
                double *oi = ro + ((bi * s + i) * heads + h) * dv;
                const double *doi = dO + ((bi * s + i) * heads + h) * dv;
                double D = 0;
                for (int64_t j = 0; j < t; j++) {
                    const double *vj = v + ((bi * t + j) * kvh + hk) * dv;
                    dp[j] = 0;
                    for (int64_t c = 0; c < dv; c++) oi[c] += p[j] * vj[c], dp[j] += doi[c] * vj[c];
                    D += p[j] * dp[j];
                }
                for (int64_t j = 0; j < t; j++) {
                    double ds = p[j] * (dp[j] - D) * scale;
                    const double *kj = kk + ((bi * t + j) * kvh + hk) * dqk;
                    for (int64_t c = 0; c < dqk; c++) {
                        rdq[((bi * s + i) * heads + h) * dqk + c] += ds * kj[c];
                        rdk[((bi * t + j) * kvh + hk) * dqk + c] += ds * qi[c];
                    }
                    for (int64_t c = 0; c < dv; c++) rdv[((bi * t + j) * kvh + hk) * dv + c] += p[j] * doi[c];
                }
            }
    char what[96];
    snprintf(what, sizeof what, "attention %s s=%lld t=%lld o", causal ? "causal" : "full", (long long)s, (long long)t);
    near(what, o, ro, nq * dv, 3e-2);
    what[strlen(what) - 1] = 0, strcat(what, "dq"), near(what, dq, rdq, nq * dqk, 3e-2);
    what[strlen(what) - 2] = 0, strcat(what, "dk"), near(what, dk, rdk, nk * dqk, 3e-2);
    what[strlen(what) - 2] = 0, strcat(what, "dv"), near(what, dvv, rdv, nk * dv, 3e-2);
    /* lse = log Σ exp(scale·q·k) of the visible keys: checked through o already. */
    free(q), free(kk), free(v), free(o), free(dO), free(dq), free(dk), free(dvv);
    free(ro), free(rdq), free(rdk), free(rdv), free(p), free(dp);
    loom_gpu_op_destroy(op);
}

/* ---- pointwise -------------------------------------------------------------------- */

static double sig_(double x) { return 1 / (1 + exp(-x)); }

static void test_elementwise(const char *fn, loom_dtype dt, int64_t n, int64_t d, double tol)
{
    loom_profile_key k = test_key("elementwise", fn, dt, "n d", (int64_t[]){n, d});
    loom_gpu_op *op = run(&k);
    if (!op) return;
    int64_t m = n * d;
    bool two_in = !strcmp(fn, "add") || !strcmp(fn, "mul") || !strcmp(fn, "swiglu");
    bool two_out = !strcmp(fn, "mul") || !strcmp(fn, "swiglu");
    double prm = loom_gpu_op_param(op);
    double *a = fetch(op, "a"), *b = two_in ? fetch(op, "b") : NULL, *y = fetch(op, "y");
    double *g = fetch(op, "g"), *da = fetch(op, "da"), *db = two_out ? fetch(op, "db") : NULL;
    double *mask = !strcmp(fn, "dropout") ? fetch(op, "mask") : NULL;
    double *ry = malloc((size_t)m * sizeof *ry), *rda = malloc((size_t)m * sizeof *rda);
    double *rdb = malloc((size_t)m * sizeof *rdb);
    int64_t kept = 0;
    for (int64_t i = 0; i < m; i++) {
        double x = a[i], gi = g[i];
        if (!strcmp(fn, "add")) ry[i] = x + b[i], rda[i] = gi + x;
        else if (!strcmp(fn, "mul")) ry[i] = x * b[i], rda[i] = gi * b[i], rdb[i] = gi * x;
        else if (!strcmp(fn, "scale")) ry[i] = prm * x, rda[i] = prm * gi;
        else if (!strcmp(fn, "dropout")) {
            kept += mask[i] != 0;
            ry[i] = mask[i] ? x / (1 - prm) : 0, rda[i] = mask[i] ? gi / (1 - prm) : 0;
        } else if (!strcmp(fn, "gelu")) {
            /* d/dx of the tanh form, by central difference (an independent route). */
            const double c = 0.7978845608028654;   /* sqrt(2 / pi) */
            double f = 0.5 * x * (1 + tanh(c * (x + 0.044715 * x * x * x))), hh = 1e-6;
            double fp = 0.5 * (x + hh) * (1 + tanh(c * ((x + hh) + 0.044715 * pow(x + hh, 3))));
            double fm = 0.5 * (x - hh) * (1 + tanh(c * ((x - hh) + 0.044715 * pow(x - hh, 3))));
            ry[i] = f, rda[i] = gi * (fp - fm) / (2 * hh);
        } else if (!strcmp(fn, "silu")) {
            ry[i] = x * sig_(x), rda[i] = gi * (sig_(x) + x * sig_(x) * (1 - sig_(x)));
        } else if (!strcmp(fn, "swiglu")) {
            double sl = x * sig_(x), dsl = sig_(x) + x * sig_(x) * (1 - sig_(x));
            ry[i] = sl * b[i], rda[i] = gi * b[i] * dsl, rdb[i] = gi * sl;
        } else if (!strcmp(fn, "rope")) {
            int64_t r = i / d, c = i % d, half = d / 2, pair = c < half ? c : c - half;
            double ang = (double)(r % (int64_t)prm) * pow(10000.0, -2.0 * (double)pair / (double)d);
            double x1 = a[r * d + pair], x2 = a[r * d + pair + half];
            double g1 = g[r * d + pair], g2 = g[r * d + pair + half];
            ry[i] = c < half ? x1 * cos(ang) - x2 * sin(ang) : x2 * cos(ang) + x1 * sin(ang);
            /* backward rotates g by -ang */
            rda[i] = c < half ? g1 * cos(ang) + g2 * sin(ang) : g2 * cos(ang) - g1 * sin(ang);
        }
    }
    char what[64];
    snprintf(what, sizeof what, "%s %s y", fn, loom_dtype_name(dt));
    near(what, y, ry, m, tol);
    snprintf(what, sizeof what, "%s %s da", fn, loom_dtype_name(dt));
    near(what, da, rda, m, tol);
    if (two_out) {
        snprintf(what, sizeof what, "%s %s db", fn, loom_dtype_name(dt));
        near(what, db, rdb, m, tol);
    }
    if (mask) {
        double frac = (double)kept / (double)m;   /* Bernoulli(0.9) over 6400 draws: sd 0.004 */
        CHECK(frac > 0.87 && frac < 0.93);
    }
    free(a), free(b), free(y), free(g), free(da), free(db), free(mask), free(ry), free(rda), free(rdb);
    loom_gpu_op_destroy(op);
}

/* ---- rows: norms, softmax, loss ------------------------------------------------------------ */

static void test_norm(bool rms, loom_dtype dt, int64_t n, int64_t d, double tol)
{
    loom_profile_key k = test_key("norm", rms ? "rmsnorm" : "layernorm", dt, "n d", (int64_t[]){n, d});
    loom_gpu_op *op = run(&k);
    if (!op) return;
    double *x = fetch(op, "x"), *gm = fetch(op, "gamma"), *bt = rms ? NULL : fetch(op, "beta");
    double *y = fetch(op, "y"), *g = fetch(op, "g"), *dx = fetch(op, "dx"), *dg = fetch(op, "dgamma");
    double *dbt = rms ? NULL : fetch(op, "dbeta");
    double *ry = malloc((size_t)(n * d) * sizeof *ry), *rdx = malloc((size_t)(n * d) * sizeof *rdx);
    double *rdg = calloc((size_t)d, sizeof *rdg), *rdb = calloc((size_t)d, sizeof *rdb);
    for (int64_t r = 0; r < n; r++) {
        const double *xr = x + r * d, *gr = g + r * d;
        double mean = 0, var = 0;
        if (!rms) {
            for (int64_t c = 0; c < d; c++) mean += xr[c];
            mean /= d;
        }
        for (int64_t c = 0; c < d; c++) var += (xr[c] - mean) * (xr[c] - mean);
        double rstd = 1 / sqrt(var / d + 1e-5), s1 = 0, s2 = 0;
        for (int64_t c = 0; c < d; c++) {
            double xh = (xr[c] - mean) * rstd;
            ry[r * d + c] = xh * gm[c] + (rms ? 0 : bt[c]);
            s1 += gr[c] * gm[c];
            s2 += gr[c] * gm[c] * xh;
            rdg[c] += gr[c] * xh;
            rdb[c] += gr[c];
        }
        for (int64_t c = 0; c < d; c++) {
            double xh = (xr[c] - mean) * rstd;
            rdx[r * d + c] = rstd * (gr[c] * gm[c] - (rms ? 0 : s1 / d) - xh * s2 / d);
        }
    }
    const char *nm = rms ? "rmsnorm" : "layernorm";
    char what[64];
    snprintf(what, sizeof what, "%s y", nm), near(what, y, ry, n * d, tol);
    snprintf(what, sizeof what, "%s dx", nm), near(what, dx, rdx, n * d, tol);
    snprintf(what, sizeof what, "%s dgamma", nm), near(what, dg, rdg, d, tol);
    if (!rms) snprintf(what, sizeof what, "%s dbeta", nm), near(what, dbt, rdb, d, tol);
    free(x), free(gm), free(bt), free(y), free(g), free(dx), free(dg), free(dbt);
    free(ry), free(rdx), free(rdg), free(rdb);
    loom_gpu_op_destroy(op);
}

static void test_softmax_xent(void)
{
    int64_t n = 13, d = 77;
    loom_profile_key k = test_key("softmax", "", LOOM_DTYPE_FP32, "n d", (int64_t[]){n, d});
    loom_gpu_op *op = run(&k);
    if (op) {
        double *x = fetch(op, "x"), *y = fetch(op, "y"), *g = fetch(op, "g"), *dx = fetch(op, "dx");
        double *ry = malloc((size_t)(n * d) * sizeof *ry), *rdx = malloc((size_t)(n * d) * sizeof *rdx);
        for (int64_t r = 0; r < n; r++) {
            double mx = -INFINITY, s = 0, dot = 0;
            for (int64_t c = 0; c < d; c++) mx = fmax(mx, x[r * d + c]);
            for (int64_t c = 0; c < d; c++) s += exp(x[r * d + c] - mx);
            for (int64_t c = 0; c < d; c++) ry[r * d + c] = exp(x[r * d + c] - mx) / s;
            for (int64_t c = 0; c < d; c++) dot += ry[r * d + c] * g[r * d + c];
            for (int64_t c = 0; c < d; c++) rdx[r * d + c] = ry[r * d + c] * (g[r * d + c] - dot);
        }
        near("softmax y", y, ry, n * d, 1e-4);
        near("softmax dx", dx, rdx, n * d, 1e-4);
        free(x), free(y), free(g), free(dx), free(ry), free(rdx);
        loom_gpu_op_destroy(op);
    }
    int64_t v = 33;
    k = test_key("cross_entropy", "", LOOM_DTYPE_FP32, "n v", (int64_t[]){9, v});
    op = run(&k);
    if (!op) return;
    double *x = fetch(op, "logits"), *lab = fetch(op, "labels"), *loss = fetch(op, "loss");
    double *dx = fetch(op, "dlogits");
    double rl[9], rdx[9 * 33];
    for (int r = 0; r < 9; r++) {
        double mx = -INFINITY, s = 0;
        for (int64_t c = 0; c < v; c++) mx = fmax(mx, x[r * v + c]);
        for (int64_t c = 0; c < v; c++) s += exp(x[r * v + c] - mx);
        double lse = mx + log(s);
        CHECK(lab[r] >= 0 && lab[r] < v);
        rl[r] = lse - x[r * v + (int64_t)lab[r]];
        for (int64_t c = 0; c < v; c++) rdx[r * v + c] = (exp(x[r * v + c] - lse) - (c == (int64_t)lab[r])) / 9;
    }
    near("cross_entropy loss", loss, rl, 9, 1e-4);
    near("cross_entropy dlogits", dx, rdx, 9 * v, 1e-4);
    free(x), free(lab), free(loss), free(dx);
    loom_gpu_op_destroy(op);
}

/* ---- embedding and experts ----------------------------------------------------------------------- */

static void test_embedding(void)
{
    int64_t n = 50, v = 20, h = 48;
    loom_profile_key k = test_key("embedding", "", LOOM_DTYPE_BF16, "n v h", (int64_t[]){n, v, h});
    loom_gpu_op *op = run(&k);
    if (!op) return;
    double *ids = fetch(op, "ids"), *tab = fetch(op, "table"), *y = fetch(op, "y");
    double *g = fetch(op, "g"), *dt = fetch(op, "dtable");
    double *ry = malloc((size_t)(n * h) * sizeof *ry), *rdt = calloc((size_t)(v * h), sizeof *rdt);
    for (int64_t t = 0; t < n; t++) {
        int64_t r = (int64_t)ids[t];
        CHECK(r >= 0 && r < v);
        for (int64_t c = 0; c < h; c++) ry[t * h + c] = tab[r * h + c], rdt[r * h + c] += g[t * h + c];
    }
    near("embedding y", y, ry, n * h, 0);   /* a copy: exact */
    near("embedding dtable", dt, rdt, v * h, 1e-5);
    free(ids), free(tab), free(y), free(g), free(dt), free(ry), free(rdt);
    loom_gpu_op_destroy(op);
}

static void test_moe(void)
{
    int64_t n = 10, e = 8, kk = 2;
    loom_profile_key k = test_key("moe_route", "top2", LOOM_DTYPE_FP32, "n e", (int64_t[]){n, e});
    loom_gpu_op *op = run(&k);
    if (op) {
        double *lg = fetch(op, "logits"), *w = fetch(op, "w"), *idx = fetch(op, "idx");
        double *dw = fetch(op, "dw"), *dl = fetch(op, "dlogits");
        double rw[20], rdl[80];
        int ri[20];
        for (int64_t t = 0; t < n; t++) {
            double mx = -INFINITY, s = 0, p[8];
            for (int j = 0; j < e; j++) mx = fmax(mx, lg[t * e + j]);
            for (int j = 0; j < e; j++) s += (p[j] = exp(lg[t * e + j] - mx));
            for (int j = 0; j < e; j++) p[j] /= s;
            for (int r = 0; r < kk; r++) {   /* r-th largest, ties to the lower index */
                int best = -1;
                for (int j = 0; j < e; j++)
                    if ((r == 0 || j != ri[t * kk]) && (best < 0 || p[j] > p[best])) best = j;
                ri[t * kk + r] = best;
                rw[t * kk + r] = p[best];
            }
            double dot = 0;
            for (int r = 0; r < kk; r++) dot += dw[t * kk + r] * p[ri[t * kk + r]];
            for (int j = 0; j < e; j++) {
                double gj = 0;
                for (int r = 0; r < kk; r++) gj += ri[t * kk + r] == j ? dw[t * kk + r] : 0;
                rdl[t * e + j] = p[j] * (gj - dot);
            }
        }
        int bad = 0;
        for (int i = 0; i < n * kk; i++) bad += (int)idx[i] != ri[i];
        CHECK_INT_EQ(bad, 0);
        near("moe_route w", w, rw, n * kk, 1e-5);
        near("moe_route dlogits", dl, rdl, n * e, 1e-4);
        free(lg), free(w), free(idx), free(dw), free(dl);
        loom_gpu_op_destroy(op);
    }
    /* dispatch / combine: n 12 tokens, top-2 of e 4 experts, capacity c 6
     * (= 12·2/4: every slot used); token t's j-th choice is expert (2t + j) mod 4. */
    int64_t c = 6, h = 16, nk = 24, ec = 24;
    k = test_key("moe_dispatch", "top2", LOOM_DTYPE_BF16, "n e c h", (int64_t[]){12, 4, c, h});
    op = run(&k);
    if (op) {
        double *x = fetch(op, "x"), *buf = fetch(op, "buf"), *dbuf = fetch(op, "dbuf"), *dx = fetch(op, "dx");
        double *slot = fetch(op, "slot"), rb[24 * 16], rdx[12 * 16] = {0};
        int count[4] = {0};
        for (int t = 0; t < 12; t++)
            for (int j = 0; j < 2; j++) {
                int ex = (2 * t + j) % 4, sl = ex * (int)c + count[ex]++;
                CHECK_INT_EQ((int)slot[t * 2 + j], sl);
                for (int q = 0; q < h; q++) rb[sl * h + q] = x[t * h + q], rdx[t * h + q] += dbuf[sl * h + q];
            }
        near("moe_dispatch buf", buf, rb, ec * h, 0);
        near("moe_dispatch dx", dx, rdx, 12 * h, 2.5e-2);
        free(x), free(buf), free(dbuf), free(dx), free(slot);
        loom_gpu_op_destroy(op);
    }
    k = test_key("moe_combine", "top2", LOOM_DTYPE_FP32, "n e c h", (int64_t[]){12, 4, c, h});
    op = run(&k);
    if (!op) return;
    double *buf = fetch(op, "buf"), *w = fetch(op, "w"), *slot = fetch(op, "slot"), *y = fetch(op, "y");
    double *g = fetch(op, "g"), *dbuf = fetch(op, "dbuf"), *dw = fetch(op, "dw");
    double ry[12 * 16] = {0}, rdb[24 * 16] = {0}, rdw[24] = {0};
    for (int t = 0; t < 12; t++)
        for (int j = 0; j < 2; j++) {
            int sl = (int)slot[t * 2 + j];
            for (int q = 0; q < h; q++) {
                ry[t * h + q] += w[t * 2 + j] * buf[sl * h + q];
                rdb[sl * h + q] = w[t * 2 + j] * g[t * h + q];
                rdw[t * 2 + j] += g[t * h + q] * buf[sl * h + q];
            }
        }
    near("moe_combine y", y, ry, 12 * h, 1e-5);
    near("moe_combine dbuf", dbuf, rdb, ec * h, 1e-5);
    near("moe_combine dw", dw, rdw, nk, 1e-5);
    free(buf), free(w), free(slot), free(y), free(g), free(dbuf), free(dw);
    loom_gpu_op_destroy(op);
}

int main(void)
{
    loom_error err;
    loom_gpu_info info;
    gpu = test_open_gpu(&info);

    test_einsum("bsh,hf->bsf", LOOM_DTYPE_BF16, "b s h f", (int64_t[]){2, 3, 64, 40}, 2.5e-2);
    test_einsum("bsh,hf->bsf", LOOM_DTYPE_FP32, "b s h f", (int64_t[]){2, 3, 17, 9}, 1e-4);
    test_einsum("bsnd,btnd->bnst", LOOM_DTYPE_FP32, "b s n d t", (int64_t[]){2, 5, 3, 16, 7}, 1e-4);
    test_einsum("bnst,btnd->bsnd", LOOM_DTYPE_BF16, "b n s t d", (int64_t[]){2, 3, 5, 7, 16}, 2.5e-2);
    test_einsum("bsh,vh->bsv", LOOM_DTYPE_FP16, "b s h v", (int64_t[]){1, 8, 32, 24}, 2.5e-2);
    test_einsum("ech,ehf->ecf", LOOM_DTYPE_BF16, "e c h f", (int64_t[]){3, 8, 32, 16}, 2.5e-2);
    if (loom_gpu_has_fp8(gpu))   /* e4m3 operands (3 mantissa bits), bf16 result */
        test_einsum("bsh,hf->bsf", LOOM_DTYPE_FP8, "b s h f", (int64_t[]){1, 32, 64, 48}, 2.5e-2);

    test_attention(true, LOOM_DTYPE_BF16, 2, 40, 40, 4, 2, 24, 16);
    test_attention(false, LOOM_DTYPE_FP16, 1, 24, 40, 2, 2, 32, 32);
    test_attention(true, LOOM_DTYPE_BF16, 1, 24, 70, 4, 1, 64, 64);    /* bottom-right causal */
    test_attention(true, LOOM_DTYPE_BF16, 1, 130, 130, 2, 2, 128, 128);

    static const char *const fns[] = {"add", "mul", "scale", "dropout", "gelu", "silu", "swiglu", "rope"};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        test_elementwise(fns[i], LOOM_DTYPE_BF16, 64, 100, 2.5e-2);
        test_elementwise(fns[i], LOOM_DTYPE_FP32, 7, 130, 1e-4);
    }
    test_norm(false, LOOM_DTYPE_FP32, 37, 300, 1e-4);
    test_norm(true, LOOM_DTYPE_FP32, 1100, 64, 1e-4);   /* more rows than partial rows */
    test_norm(true, LOOM_DTYPE_BF16, 5, 2100, 2.5e-2);
    test_softmax_xent();
    test_embedding();
    test_moe();

    /* Refusals, with reasons. */
    loom_profile_key k = test_key("attention", "causal", LOOM_DTYPE_FP32, "b s t heads kvh dqk dv",
                             (int64_t[]){1, 8, 8, 2, 2, 16, 16});
    loom_gpu_op *op = NULL;
    CHECK(loom_gpu_op_create(gpu, &k, 1, &op, &err) == LOOM_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "attention in fp32");
    k = test_key("reshape", "", LOOM_DTYPE_BF16, "n", (int64_t[]){8});
    CHECK(loom_gpu_op_create(gpu, &k, 1, &op, &err) == LOOM_ERR_UNSUPPORTED);
    k = test_key("elementwise", "tanh", LOOM_DTYPE_BF16, "n d", (int64_t[]){2, 8});
    CHECK(loom_gpu_op_create(gpu, &k, 1, &op, &err) == LOOM_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "\"tanh\"");
    loom_gpu_destroy(gpu);
    return check_done();
}
