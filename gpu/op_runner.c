/*
 * op_runner.c — profile keys as runnable forward / backward launches (see
 * op_runner.h for what each kind runs).
 *
 * Every buffer is one cudaMalloc registered under a name, so the byte count
 * (the op's peak device memory) and the cleanup are uniform. Inputs are
 * uniform in [-1, 1) from a counter hash (kernels.h), index buffers are
 * hashed into range or built on the host (MoE routing tables); the data is
 * ready when create returns.
 */
#include "gpu/op_runner.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gemm.h"
#include "gpu/kernels.h"

#define MAX_BUFS 16
#define ROPE_PERIOD 4096.f
#define DROPOUT_P 0.1f
#define SCALE_C 0.5f
#define NORM_EPS 1e-5f

struct loom_gpu_op {
    loom_gpu *g;
    loom_profile_key key;
    loom_op_kind kind;
    loom_dtype dt;
    loom_gpu_buf buf[MAX_BUFS];
    int n_buf;
    int64_t bytes;
    uint64_t seed;
    loom_gemm *gf, *gdx, *gdy;   /* einsum: forward and the two gradients */
    loom_ew_fn fn;
    bool rms;
    int64_t n, d, v, h, e, c;
    int k, parts;
    float param;
    loom_attn_shape ash;
};

static loom_status need(const loom_gpu_op *op, const char *name, int64_t *out, loom_error *err)
{
    *out = loom_profile_key_dim(&op->key, name);
    if (*out < 1)
        return loom_error_set(err, LOOM_ERR_INVALID, "%s %s: the shape has no dim \"%s\"",
                              op->key.op, op->key.sig, name);
    return LOOM_OK;
}

static loom_status add_buf(loom_gpu_op *op, const char *name, loom_dtype dt, int64_t numel,
                           loom_error *err)
{
    int64_t bytes;
    /* both checks before the sum: a signed overflow tested after the fact is
     * undefined behaviour */
    if (numel < 1 || __builtin_mul_overflow(numel, (int64_t)loom_dtype_bytes(dt), &bytes) ||
        bytes > INT64_MAX - op->bytes)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "%s %s: buffer %s is too large to allocate",
                              op->key.op, op->key.sig, name);
    LOOM_ASSERT(op->n_buf < MAX_BUFS);
    void *p;
    char what[96];
    snprintf(what, sizeof what, "%s buffer %s", op->key.op, name);
    loom_status s = loom_gpu_alloc((size_t)bytes, what, &p, err);
    if (s) return s;
    op->buf[op->n_buf++] = (loom_gpu_buf){name, p, dt, numel};
    op->bytes += bytes;
    return LOOM_OK;
}

const loom_gpu_buf *loom_gpu_op_buffer(const loom_gpu_op *op, const char *name)
{
    for (int i = 0; i < op->n_buf; i++)
        if (strcmp(op->buf[i].name, name) == 0) return &op->buf[i];
    return NULL;
}

static void *P(const loom_gpu_op *op, const char *name)
{
    const loom_gpu_buf *b = loom_gpu_op_buffer(op, name);
    return b ? b->ptr : NULL;
}

/* Fills the named float buffers with uniform [-1, 1) data. */
static loom_status fill(loom_gpu_op *op, const char *const *names, loom_error *err)
{
    for (const char *const *nm = names; *nm; nm++) {
        const loom_gpu_buf *b = loom_gpu_op_buffer(op, *nm);
        LOOM_ASSERT(b);
        loom_status s = loom_gpu_check(loom_k_fill_uniform(b->dtype, b->ptr, b->numel,
                                                           op->seed + (uint64_t)(nm - names), -1.f,
                                                           1.f, loom_gpu_stream(op->g)),
                                       "fill kernel", err);
        if (s) return s;
    }
    return LOOM_OK;
}

static loom_status upload(loom_gpu_op *op, const char *name, const int32_t *host, loom_error *err)
{
    const loom_gpu_buf *b = loom_gpu_op_buffer(op, name);
    return loom_gpu_check(cudaMemcpy(b->ptr, host, (size_t)b->numel * sizeof *host,
                                     cudaMemcpyHostToDevice), "cudaMemcpy", err);
}

static loom_status top_k(const loom_gpu_op *op, int *k, loom_error *err)
{
    if (sscanf(op->key.sig, "top%d", k) != 1 || *k < 1 || *k > 8)
        return loom_error_set(err, LOOM_ERR_INVALID, "%s: sig \"%s\" (expected top1 .. top8)",
                              op->key.op, op->key.sig);
    return LOOM_OK;
}

/* Balanced routing: token t's j-th choice is expert (t·k + j) mod e, slots
 * filled in token order, dropped beyond capacity c. */
static loom_status routing(loom_gpu_op *op, bool want_src, bool want_inv, loom_error *err)
{
    int64_t nk = op->n * op->k, ec = op->e * op->c;
    int32_t *slot = malloc((size_t)nk * sizeof *slot), *src = malloc((size_t)ec * sizeof *src);
    int32_t *inv = malloc((size_t)ec * sizeof *inv);
    int64_t *count = calloc((size_t)op->e, sizeof *count);
    loom_status s = LOOM_OK;
    if (!slot || !src || !inv || !count) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory building MoE routing tables");
        goto done;
    }
    for (int64_t i = 0; i < ec; i++) src[i] = inv[i] = -1;
    for (int64_t t = 0; t < op->n; t++)
        for (int j = 0; j < op->k; j++) {
            int64_t ex = (t * op->k + j) % op->e;
            slot[t * op->k + j] = -1;
            if (count[ex] >= op->c) continue;
            int64_t sl = ex * op->c + count[ex]++;
            slot[t * op->k + j] = (int32_t)sl;
            src[sl] = (int32_t)t;
            inv[sl] = (int32_t)(t * op->k + j);
        }
    if ((s = upload(op, "slot", slot, err))) goto done;
    if (want_src && (s = upload(op, "src_row", src, err))) goto done;
    if (want_inv && (s = upload(op, "inv", inv, err))) goto done;
done:
    free(slot);
    free(src);
    free(inv);
    free(count);
    return s;
}

static loom_status create_einsum(loom_gpu_op *op, loom_error *err)
{
    char gx[LOOM_EINSUM_MAX + 8], gy[LOOM_EINSUM_MAX + 8];
    const loom_dim *L = op->key.shape;
    int nl = op->key.n_dims;
    loom_status s;
    if ((s = loom_einsum_grad_sig(op->key.sig, 0, gx, sizeof gx, err)) ||
        (s = loom_einsum_grad_sig(op->key.sig, 1, gy, sizeof gy, err)) ||
        (s = loom_gemm_create(op->g, op->key.sig, L, nl, op->dt, &op->gf, err)) ||
        (s = loom_gemm_create(op->g, gx, L, nl, op->dt, &op->gdx, err)) ||
        (s = loom_gemm_create(op->g, gy, L, nl, op->dt, &op->gdy, err)))
        return s;
    const loom_einsum_plan *p = loom_gemm_plan(op->gf);
    loom_dtype od = loom_gemm_out_dtype(op->gf);
    op->bytes += loom_gemm_scratch_bytes(op->gf) + loom_gemm_scratch_bytes(op->gdx) +
                 loom_gemm_scratch_bytes(op->gdy);
    static const char *const inputs[] = {"x", "y", "dz", NULL};
    if ((s = add_buf(op, "x", op->dt, p->x_elems, err)) || (s = add_buf(op, "y", op->dt, p->y_elems, err)) ||
        (s = add_buf(op, "z", od, p->z_elems, err)) || (s = add_buf(op, "dz", op->dt, p->z_elems, err)) ||
        (s = add_buf(op, "dx", od, p->x_elems, err)) || (s = add_buf(op, "dy", od, p->y_elems, err)))
        return s;
    return fill(op, inputs, err);
}

static loom_status create_attention(loom_gpu_op *op, loom_error *err)
{
    loom_attn_shape *a = &op->ash;
    loom_status s;
    if ((s = need(op, "b", &a->b, err)) || (s = need(op, "s", &a->s, err)) ||
        (s = need(op, "t", &a->t, err)) || (s = need(op, "heads", &a->heads, err)) ||
        (s = need(op, "kvh", &a->kvh, err)) || (s = need(op, "dqk", &a->dqk, err)) ||
        (s = need(op, "dv", &a->dv, err)))
        return s;
    if (op->dt != LOOM_DTYPE_BF16 && op->dt != LOOM_DTYPE_FP16)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "attention in %s is not profiled: loom's fused kernel runs bf16 and fp16",
                              loom_dtype_name(op->dt));
    if (a->heads % a->kvh || a->dqk > 256 || a->dv > 256)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "attention: needs heads a multiple of kvh and head dims <= 256 "
                              "(found heads %lld, kvh %lld, dqk %lld, dv %lld)", (long long)a->heads,
                              (long long)a->kvh, (long long)a->dqk, (long long)a->dv);
    a->causal = strcmp(op->key.sig, "causal") == 0;
    a->scale = 1.f / sqrtf((float)a->dqk);
    int64_t nq = a->b * a->s * a->heads, nk = a->b * a->t * a->kvh;
    static const char *const inputs[] = {"q", "k", "v", "do", NULL};
    if ((s = add_buf(op, "q", op->dt, nq * a->dqk, err)) || (s = add_buf(op, "k", op->dt, nk * a->dqk, err)) ||
        (s = add_buf(op, "v", op->dt, nk * a->dv, err)) || (s = add_buf(op, "o", op->dt, nq * a->dv, err)) ||
        (s = add_buf(op, "lse", LOOM_DTYPE_FP32, nq, err)) || (s = add_buf(op, "do", op->dt, nq * a->dv, err)) ||
        (s = add_buf(op, "dq", op->dt, nq * a->dqk, err)) || (s = add_buf(op, "dk", op->dt, nk * a->dqk, err)) ||
        (s = add_buf(op, "dv", op->dt, nk * a->dv, err)) ||
        (s = add_buf(op, "scratch", LOOM_DTYPE_U8, loom_k_attn_bwd_scratch_bytes(a), err)))
        return s;
    return fill(op, inputs, err);
}

static loom_status create_rows(loom_gpu_op *op, loom_error *err)
{
    loom_status s;
    if ((s = need(op, "n", &op->n, err)) || (s = need(op, "d", &op->d, err))) return s;
    int64_t nd = op->n * op->d;
    if (op->kind == LOOM_OP_ELEMENTWISE) {
        if (!loom_ew_parse(op->key.sig, &op->fn))
            return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                  "elementwise \"%s\" has no kernel (add, mul, scale, dropout, gelu, "
                                  "silu, swiglu, rope)", op->key.sig);
        if (op->fn == LOOM_EW_ROPE && op->d % 2)
            return loom_error_set(err, LOOM_ERR_INVALID, "rope over an odd dim d = %lld", (long long)op->d);
        op->param = op->fn == LOOM_EW_DROPOUT ? DROPOUT_P : op->fn == LOOM_EW_SCALE ? SCALE_C
                  : op->fn == LOOM_EW_ROPE ? ROPE_PERIOD : 0.f;
        bool two_in = loom_ew_inputs(op->fn) == 2;
        bool two_out = op->fn == LOOM_EW_MUL || op->fn == LOOM_EW_SWIGLU;
        static const char *const in1[] = {"a", "g", NULL}, *const in2[] = {"a", "b", "g", NULL};
        if ((s = add_buf(op, "a", op->dt, nd, err)) || (two_in && (s = add_buf(op, "b", op->dt, nd, err))) ||
            (s = add_buf(op, "y", op->dt, nd, err)) ||
            (op->fn == LOOM_EW_DROPOUT && (s = add_buf(op, "mask", LOOM_DTYPE_U8, nd, err))) ||
            (s = add_buf(op, "g", op->dt, nd, err)) || (s = add_buf(op, "da", op->dt, nd, err)) ||
            (two_out && (s = add_buf(op, "db", op->dt, nd, err))))
            return s;
        return fill(op, two_in ? in2 : in1, err);
    }
    if (op->kind == LOOM_OP_SOFTMAX) {
        static const char *const in[] = {"x", "g", NULL};
        if ((s = add_buf(op, "x", op->dt, nd, err)) || (s = add_buf(op, "y", op->dt, nd, err)) ||
            (s = add_buf(op, "g", op->dt, nd, err)) || (s = add_buf(op, "dx", op->dt, nd, err)))
            return s;
        return fill(op, in, err);
    }
    /* norm */
    if (strcmp(op->key.sig, "layernorm") && strcmp(op->key.sig, "rmsnorm"))
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "norm \"%s\" (expected layernorm or rmsnorm)",
                              op->key.sig);
    op->rms = strcmp(op->key.sig, "rmsnorm") == 0;
    op->parts = loom_k_norm_bwd_parts(op->n, loom_gpu_info_of(op->g)->sm_count);
    static const char *const in_ln[] = {"x", "gamma", "beta", "g", NULL}, *const in_rms[] = {"x", "gamma", "g", NULL};
    if ((s = add_buf(op, "x", op->dt, nd, err)) || (s = add_buf(op, "gamma", op->dt, op->d, err)) ||
        (!op->rms && (s = add_buf(op, "beta", op->dt, op->d, err))) ||
        (s = add_buf(op, "y", op->dt, nd, err)) ||
        (!op->rms && (s = add_buf(op, "mean", LOOM_DTYPE_FP32, op->n, err))) ||
        (s = add_buf(op, "rstd", LOOM_DTYPE_FP32, op->n, err)) || (s = add_buf(op, "g", op->dt, nd, err)) ||
        (s = add_buf(op, "dx", op->dt, nd, err)) ||
        (s = add_buf(op, "part", LOOM_DTYPE_FP32, (int64_t)op->parts * op->d * (op->rms ? 1 : 2), err)) ||
        (s = add_buf(op, "dgamma", op->dt, op->d, err)) ||
        (!op->rms && (s = add_buf(op, "dbeta", op->dt, op->d, err))))
        return s;
    return fill(op, op->rms ? in_rms : in_ln, err);
}

static loom_status create_gather(loom_gpu_op *op, loom_error *err)
{
    loom_status s;
    cudaStream_t st = loom_gpu_stream(op->g);
    if ((s = need(op, "n", &op->n, err))) return s;
    switch (op->kind) {
    case LOOM_OP_EMBEDDING: {
        static const char *const in[] = {"table", "g", NULL};
        if ((s = need(op, "v", &op->v, err)) || (s = need(op, "h", &op->h, err)) ||
            (s = add_buf(op, "ids", LOOM_DTYPE_INT32, op->n, err)) ||
            (s = add_buf(op, "table", op->dt, op->v * op->h, err)) ||
            (s = add_buf(op, "y", op->dt, op->n * op->h, err)) || (s = add_buf(op, "g", op->dt, op->n * op->h, err)) ||
            (s = add_buf(op, "dtable", LOOM_DTYPE_FP32, op->v * op->h, err)) || (s = fill(op, in, err)))
            return s;
        if (op->v > INT32_MAX) return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "embedding: vocab too large");
        if ((s = loom_gpu_check(loom_k_fill_index(P(op, "ids"), op->n, (int32_t)op->v, op->seed, st),
                                "fill kernel", err)))
            return s;
        return loom_gpu_check(loom_k_zero(P(op, "dtable"), op->v * op->h * 4, st), "zero kernel", err);
    }
    case LOOM_OP_CROSS_ENTROPY: {
        static const char *const in[] = {"logits", NULL};
        if ((s = need(op, "v", &op->v, err)) || (s = add_buf(op, "logits", op->dt, op->n * op->v, err)) ||
            (s = add_buf(op, "labels", LOOM_DTYPE_INT32, op->n, err)) ||
            (s = add_buf(op, "loss", LOOM_DTYPE_FP32, op->n, err)) || (s = add_buf(op, "lse", LOOM_DTYPE_FP32, op->n, err)) ||
            (s = add_buf(op, "dlogits", op->dt, op->n * op->v, err)) || (s = fill(op, in, err)))
            return s;
        if (op->v > INT32_MAX) return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "cross_entropy: vocab too large");
        return loom_gpu_check(loom_k_fill_index(P(op, "labels"), op->n, (int32_t)op->v, op->seed, st),
                              "fill kernel", err);
    }
    case LOOM_OP_MOE_ROUTE: {
        static const char *const in[] = {"logits", "dw", NULL};
        if ((s = need(op, "e", &op->e, err)) || (s = top_k(op, &op->k, err))) return s;
        if (op->e > 1024 || op->k > op->e)
            return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "moe_route: needs k <= e <= 1024");
        if ((s = add_buf(op, "logits", op->dt, op->n * op->e, err)) || (s = add_buf(op, "w", op->dt, op->n * op->k, err)) ||
            (s = add_buf(op, "idx", LOOM_DTYPE_INT32, op->n * op->k, err)) ||
            (s = add_buf(op, "dw", op->dt, op->n * op->k, err)) ||
            (s = add_buf(op, "dlogits", op->dt, op->n * op->e, err)))
            return s;
        return fill(op, in, err);
    }
    default:
        break;
    }
    /* dispatch / combine */
    bool disp = op->kind == LOOM_OP_MOE_DISPATCH;
    if ((s = need(op, "e", &op->e, err)) || (s = need(op, "c", &op->c, err)) ||
        (s = need(op, "h", &op->h, err)) || (s = top_k(op, &op->k, err)))
        return s;
    int64_t ec = op->e * op->c, nh = op->n * op->h;
    if (ec > INT32_MAX || op->n * op->k > INT32_MAX)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "%s: too many slots", op->key.op);
    if (disp) {
        static const char *const in[] = {"x", "dbuf", NULL};
        if ((s = add_buf(op, "x", op->dt, nh, err)) || (s = add_buf(op, "src_row", LOOM_DTYPE_INT32, ec, err)) ||
            (s = add_buf(op, "slot", LOOM_DTYPE_INT32, op->n * op->k, err)) ||
            (s = add_buf(op, "buf", op->dt, ec * op->h, err)) || (s = add_buf(op, "dbuf", op->dt, ec * op->h, err)) ||
            (s = add_buf(op, "dx", op->dt, nh, err)) || (s = fill(op, in, err)))
            return s;
        return routing(op, true, false, err);
    }
    static const char *const in[] = {"buf", "w", "g", NULL};
    if ((s = add_buf(op, "buf", op->dt, ec * op->h, err)) || (s = add_buf(op, "w", op->dt, op->n * op->k, err)) ||
        (s = add_buf(op, "slot", LOOM_DTYPE_INT32, op->n * op->k, err)) ||
        (s = add_buf(op, "inv", LOOM_DTYPE_INT32, ec, err)) || (s = add_buf(op, "y", op->dt, nh, err)) ||
        (s = add_buf(op, "g", op->dt, nh, err)) || (s = add_buf(op, "dbuf", op->dt, ec * op->h, err)) ||
        (s = add_buf(op, "dw", op->dt, op->n * op->k, err)) || (s = fill(op, in, err)))
        return s;
    return routing(op, false, true, err);
}

loom_status loom_gpu_op_create(loom_gpu *g, const loom_profile_key *key, uint64_t seed,
                               loom_gpu_op **out, loom_error *err)
{
    *out = NULL;
    loom_gpu_op *op = calloc(1, sizeof *op);
    if (!op) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    op->g = g;
    op->key = *key;
    op->dt = key->dtype;
    op->seed = seed;
    loom_status s;
    if (!loom_op_kind_parse(key->op, &op->kind)) {
        s = loom_error_set(err, LOOM_ERR_INVALID, "unknown op kind \"%s\"", key->op);
        goto fail;
    }
    if (op->kind != LOOM_OP_EINSUM && op->kind != LOOM_OP_ATTENTION && op->dt != LOOM_DTYPE_BF16 &&
        op->dt != LOOM_DTYPE_FP16 && op->dt != LOOM_DTYPE_FP32) {
        s = loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                           "%s in %s is not profiled: loom's kernels run bf16, fp16 and fp32",
                           key->op, loom_dtype_name(op->dt));
        goto fail;
    }
    switch (op->kind) {
    case LOOM_OP_EINSUM: s = create_einsum(op, err); break;
    case LOOM_OP_ATTENTION: s = create_attention(op, err); break;
    case LOOM_OP_ELEMENTWISE:
    case LOOM_OP_NORM:
    case LOOM_OP_SOFTMAX: s = create_rows(op, err); break;
    case LOOM_OP_EMBEDDING:
    case LOOM_OP_CROSS_ENTROPY:
    case LOOM_OP_MOE_ROUTE:
    case LOOM_OP_MOE_DISPATCH:
    case LOOM_OP_MOE_COMBINE: s = create_gather(op, err); break;
    default:
        s = loom_error_set(err, LOOM_ERR_UNSUPPORTED, "%s ops are free views: nothing to profile",
                           key->op);
        break;
    }
    if (!s) s = loom_gpu_check(cudaStreamSynchronize(loom_gpu_stream(g)), "preparing inputs", err);
    if (s) goto fail;
    *out = op;
    return LOOM_OK;
fail:
    loom_gpu_op_destroy(op);
    return s;
}

void loom_gpu_op_destroy(loom_gpu_op *op)
{
    if (!op) return;
    loom_gemm_destroy(op->gf);
    loom_gemm_destroy(op->gdx);
    loom_gemm_destroy(op->gdy);
    for (int i = 0; i < op->n_buf; i++) cudaFree(op->buf[i].ptr);
    free(op);
}

int64_t loom_gpu_op_bytes(const loom_gpu_op *op) { return op->bytes; }
float loom_gpu_op_param(const loom_gpu_op *op) { return op->param; }

loom_status loom_gpu_op_forward(loom_gpu_op *op, loom_error *err)
{
    cudaStream_t st = loom_gpu_stream(op->g);
    int smem = loom_gpu_info_of(op->g)->max_smem_optin;
    cudaError_t e = cudaSuccess;
    switch (op->kind) {
    case LOOM_OP_EINSUM: return loom_gemm_run(op->gf, P(op, "x"), P(op, "y"), P(op, "z"), err);
    case LOOM_OP_ATTENTION:
        e = loom_k_attn_fwd(op->dt, &op->ash, P(op, "q"), P(op, "k"), P(op, "v"), P(op, "o"),
                            P(op, "lse"), smem, st);
        break;
    case LOOM_OP_ELEMENTWISE:
        e = loom_k_ew_fwd(op->fn, op->dt, op->n, op->d, P(op, "a"), P(op, "b"), P(op, "y"),
                          P(op, "mask"), op->param, op->seed, st);
        break;
    case LOOM_OP_NORM:
        e = loom_k_norm_fwd(op->rms, op->dt, op->n, op->d, P(op, "x"), P(op, "gamma"), P(op, "beta"),
                            P(op, "y"), P(op, "mean"), P(op, "rstd"), NORM_EPS, st);
        break;
    case LOOM_OP_SOFTMAX: e = loom_k_softmax_fwd(op->dt, op->n, op->d, P(op, "x"), P(op, "y"), st); break;
    case LOOM_OP_EMBEDDING:
        e = loom_k_embedding_fwd(op->dt, op->n, op->h, P(op, "ids"), P(op, "table"), P(op, "y"), st);
        break;
    case LOOM_OP_CROSS_ENTROPY:
        e = loom_k_xent_fwd(op->dt, op->n, op->v, P(op, "logits"), P(op, "labels"), P(op, "loss"),
                            P(op, "lse"), st);
        break;
    case LOOM_OP_MOE_ROUTE:
        e = loom_k_moe_route_fwd(op->dt, op->n, op->e, op->k, P(op, "logits"), P(op, "w"), P(op, "idx"), st);
        break;
    case LOOM_OP_MOE_DISPATCH:
        e = loom_k_gather_rows(op->dt, op->e * op->c, op->h, P(op, "x"), P(op, "src_row"), P(op, "buf"), st);
        break;
    case LOOM_OP_MOE_COMBINE:
        e = loom_k_combine_fwd(op->dt, op->n, op->k, op->h, P(op, "buf"), P(op, "w"), P(op, "slot"),
                               P(op, "y"), st);
        break;
    default: break;
    }
    char what[128];
    snprintf(what, sizeof what, "%s %s forward", op->key.op, op->key.sig);
    return loom_gpu_check(e, what, err);
}

loom_status loom_gpu_op_backward(loom_gpu_op *op, loom_error *err)
{
    cudaStream_t st = loom_gpu_stream(op->g);
    int smem = loom_gpu_info_of(op->g)->max_smem_optin;
    cudaError_t e = cudaSuccess;
    loom_status s;
    switch (op->kind) {
    case LOOM_OP_EINSUM:
        if ((s = loom_gemm_run(op->gdx, P(op, "dz"), P(op, "y"), P(op, "dx"), err))) return s;
        return loom_gemm_run(op->gdy, P(op, "x"), P(op, "dz"), P(op, "dy"), err);
    case LOOM_OP_ATTENTION:
        e = loom_k_attn_bwd(op->dt, &op->ash, P(op, "q"), P(op, "k"), P(op, "v"), P(op, "o"),
                            P(op, "do"), P(op, "lse"), P(op, "scratch"), P(op, "dq"), P(op, "dk"),
                            P(op, "dv"), smem, st);
        break;
    case LOOM_OP_ELEMENTWISE:
        e = loom_k_ew_bwd(op->fn, op->dt, op->n, op->d, P(op, "a"), P(op, "b"), P(op, "g"),
                          P(op, "mask"), op->param, P(op, "da"), P(op, "db"), st);
        break;
    case LOOM_OP_NORM:
        e = loom_k_norm_bwd(op->rms, op->dt, op->n, op->d, P(op, "x"), P(op, "gamma"), P(op, "g"),
                            P(op, "mean"), P(op, "rstd"), P(op, "dx"), P(op, "part"), op->parts,
                            P(op, "dgamma"), P(op, "dbeta"), st);
        break;
    case LOOM_OP_SOFTMAX: e = loom_k_softmax_bwd(op->dt, op->n, op->d, P(op, "y"), P(op, "g"), P(op, "dx"), st); break;
    case LOOM_OP_EMBEDDING:
        e = loom_k_embedding_bwd(op->dt, op->n, op->h, P(op, "ids"), P(op, "g"), P(op, "dtable"), st);
        break;
    case LOOM_OP_CROSS_ENTROPY:
        e = loom_k_xent_bwd(op->dt, op->n, op->v, P(op, "logits"), P(op, "labels"), P(op, "lse"),
                            1.f / (float)op->n, P(op, "dlogits"), st);
        break;
    case LOOM_OP_MOE_ROUTE:
        e = loom_k_moe_route_bwd(op->dt, op->n, op->e, op->k, P(op, "logits"), P(op, "idx"), P(op, "dw"),
                                 P(op, "dlogits"), st);
        break;
    case LOOM_OP_MOE_DISPATCH:
        e = loom_k_combine_fwd(op->dt, op->n, op->k, op->h, P(op, "dbuf"), NULL, P(op, "slot"), P(op, "dx"), st);
        break;
    case LOOM_OP_MOE_COMBINE:
        e = loom_k_combine_bwd(op->dt, op->n, op->k, op->h, op->e * op->c, P(op, "buf"), P(op, "w"),
                               P(op, "slot"), P(op, "inv"), P(op, "g"), P(op, "dbuf"), P(op, "dw"), st);
        break;
    default: break;
    }
    char what[128];
    snprintf(what, sizeof what, "%s %s backward", op->key.op, op->key.sig);
    return loom_gpu_check(e, what, err);
}
