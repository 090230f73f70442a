/*
 * profile_db_key.c — the profile key of a graph op on its shard
 * (loom_profile_key_from_op, declared in profile_db.h).
 *
 * The shard divides every operand dim whose name is in the divisor list;
 * the key then takes the canonical per-kind shape of profile_db.h: einsum
 * letters (each named by its letter, in order of first appearance), the
 * attention dims by position, rows × last dim for pointwise / norm /
 * softmax, tokens and table sizes for embedding, loss and the MoE ops.
 * Because the planner (costs/compute.c) and the profiler (gpu/enumerate.c)
 * both build keys here, a request and its measurement cannot disagree.
 */
#include "costs/profile_db.h"

#include <stdio.h>
#include <string.h>

/* Size of dim d on the shard: divided by the degree of the first div entry
 * naming it. */
static loom_status shard_size(const loom_op *op, const loom_dim *d, const loom_dim *div,
                              int n_div, int64_t *out, loom_error *err)
{
    *out = d->size;
    for (int i = 0; i < n_div; i++) {
        if (strcmp(div[i].name, d->name) != 0) continue;
        if (div[i].size < 1 || d->size % div[i].size != 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: dim \"%s\" of size %lld cannot be split %lld ways",
                                  op->name, d->name, (long long)d->size, (long long)div[i].size);
        *out = d->size / div[i].size;
        return LOOM_OK;
    }
    return LOOM_OK;
}

static void key_add(loom_profile_key *k, const char *name, int64_t size)
{
    LOOM_ASSERT(k->n_dims < LOOM_PROFILE_MAX_DIMS);
    snprintf(k->shape[k->n_dims].name, LOOM_DIM_NAME_MAX, "%s", name);
    k->shape[k->n_dims++].size = size;
}

/* Sharded sizes of tensor t's dims into sz[]; *rows = product of all but the last. */
static loom_status shard_tensor(const loom_op *op, const loom_tensor *t, const loom_dim *div,
                                int n_div, int64_t *sz, int64_t *rows, loom_error *err)
{
    *rows = 1;
    for (int d = 0; d < t->ndim; d++) {
        loom_status s = shard_size(op, &t->dims[d], div, n_div, &sz[d], err);
        if (s) return s;
        if (d < t->ndim - 1) *rows *= sz[d];
    }
    return LOOM_OK;
}

static loom_status einsum_key(const loom_graph *g, const loom_op *op, const loom_dim *div,
                              int n_div, loom_profile_key *k, loom_error *err)
{
    int32_t ids[2 * LOOM_MAX_IO + 1];
    int n = 0;
    for (int i = 0; i < op->n_in; i++) ids[n++] = op->in[i];
    for (int i = 0; i < op->n_w - (op->bias ? 1 : 0); i++) ids[n++] = op->w[i];
    ids[n++] = op->out[0];
    const char *p = op->einsum;
    bool seen[128] = {false};
    for (int opnd = 0; opnd < n; opnd++) {
        const loom_tensor *t = loom_graph_tensor(g, ids[opnd]);
        for (int d = 0; d < t->ndim; d++, p++) {
            while (*p == ',' || *p == '-' || *p == '>') p++;
            unsigned char c = (unsigned char)*p;
            if (c >= 128 || !c)
                return loom_error_set(err, LOOM_ERR_INVALID, "op %s: einsum \"%s\" does not match "
                                      "its operands", op->name, op->einsum);
            if (seen[c]) continue;
            seen[c] = true;
            if (k->n_dims == LOOM_PROFILE_MAX_DIMS)
                return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                      "op %s: einsum has more than %d letters", op->name,
                                      LOOM_PROFILE_MAX_DIMS);
            int64_t size;
            loom_status s = shard_size(op, &t->dims[d], div, n_div, &size, err);
            if (s) return s;
            char letter[2] = {(char)c, '\0'};
            key_add(k, letter, size);
        }
    }
    snprintf(k->sig, sizeof k->sig, "%s", op->einsum);
    return LOOM_OK;
}

loom_status loom_profile_key_from_op(const loom_graph *g, int32_t op_id, const loom_dim *div,
                                     int n_div, loom_profile_key *out, loom_error *err)
{
    const loom_op *op = loom_graph_op(g, op_id);
    loom_profile_key k;
    memset(&k, 0, sizeof k);
    snprintf(k.op, sizeof k.op, "%s", loom_op_kind_name(op->kind));
    const loom_tensor *in0 = op->n_in ? loom_graph_tensor(g, op->in[0]) : NULL;
    const loom_tensor *out0 = loom_graph_tensor(g, op->out[0]);
    k.dtype = in0 ? in0->dtype : out0->dtype;
    int64_t a[LOOM_MAX_DIMS], b[LOOM_MAX_DIMS], c[LOOM_MAX_DIMS], rows;
    loom_status s = LOOM_OK;
    switch (op->kind) {
    case LOOM_OP_EINSUM:
        s = einsum_key(g, op, div, n_div, &k, err);
        break;
    case LOOM_OP_ATTENTION: {
        /* q [b,s,heads,dqk], k [b,t,kvh,dqk], v [b,t,kvh,dv] by position. */
        const loom_tensor *kt = loom_graph_tensor(g, op->in[1]), *vt = loom_graph_tensor(g, op->in[2]);
        if ((s = shard_tensor(op, in0, div, n_div, a, &rows, err)) ||
            (s = shard_tensor(op, kt, div, n_div, b, &rows, err)) ||
            (s = shard_tensor(op, vt, div, n_div, c, &rows, err)))
            break;
        if (a[2] % b[2] != 0) {
            s = loom_error_set(err, LOOM_ERR_INVALID, "op %s: %lld query heads per shard are not "
                               "a multiple of %lld kv heads", op->name, (long long)a[2],
                               (long long)b[2]);
            break;
        }
        key_add(&k, "b", a[0]);
        key_add(&k, "s", a[1]);
        key_add(&k, "t", b[1]);
        key_add(&k, "heads", a[2]);
        key_add(&k, "kvh", b[2]);
        key_add(&k, "dqk", a[3]);
        key_add(&k, "dv", c[3]);
        snprintf(k.sig, sizeof k.sig, "%s", op->causal ? "causal" : "full");
        break;
    }
    case LOOM_OP_ELEMENTWISE:
    case LOOM_OP_NORM:
    case LOOM_OP_SOFTMAX:
        if ((s = shard_tensor(op, out0, div, n_div, a, &rows, err))) break;
        key_add(&k, "n", rows);
        key_add(&k, "d", a[out0->ndim - 1]);
        if (op->kind != LOOM_OP_SOFTMAX) snprintf(k.sig, sizeof k.sig, "%s", op->fn);
        k.dtype = out0->dtype;
        break;
    case LOOM_OP_EMBEDDING: {
        const loom_tensor *table = loom_graph_tensor(g, op->w[0]);
        if ((s = shard_tensor(op, out0, div, n_div, a, &rows, err)) ||
            (s = shard_tensor(op, table, div, n_div, b, &rows, err)))
            break;
        int64_t tok = 1;
        for (int d = 0; d < out0->ndim - 1; d++) tok *= a[d];
        key_add(&k, "n", tok);
        key_add(&k, "v", b[0]);
        key_add(&k, "h", a[out0->ndim - 1]);
        k.dtype = table->dtype;
        break;
    }
    case LOOM_OP_CROSS_ENTROPY:
    case LOOM_OP_MOE_ROUTE:
        if ((s = shard_tensor(op, in0, div, n_div, a, &rows, err))) break;
        key_add(&k, "n", rows);
        key_add(&k, op->kind == LOOM_OP_MOE_ROUTE ? "e" : "v", a[in0->ndim - 1]);
        if (op->kind == LOOM_OP_MOE_ROUTE)
            snprintf(k.sig, sizeof k.sig, "top%d", (int)(op->topk > 0 ? op->topk : 1));
        break;
    case LOOM_OP_MOE_DISPATCH:
    case LOOM_OP_MOE_COMBINE: {
        /* dispatch: tokens [..., h] -> buffers [e, c, h]; combine: the reverse. */
        bool disp = op->kind == LOOM_OP_MOE_DISPATCH;
        const loom_tensor *tok = disp ? in0 : out0, *buf = disp ? out0 : in0;
        int64_t ntok;
        if ((s = shard_tensor(op, tok, div, n_div, a, &ntok, err)) ||
            (s = shard_tensor(op, buf, div, n_div, b, &rows, err)))
            break;
        if (buf->ndim != 3) {
            s = loom_error_set(err, LOOM_ERR_UNSUPPORTED, "op %s: expert buffers must be "
                               "[e, c, h] to be profiled", op->name);
            break;
        }
        key_add(&k, "n", ntok);
        key_add(&k, "e", b[0]);
        key_add(&k, "c", b[1]);
        key_add(&k, "h", b[2]);
        snprintf(k.sig, sizeof k.sig, "top%d", (int)(op->topk > 0 ? op->topk : 1));
        break;
    }
    default:
        s = loom_error_set(err, LOOM_ERR_UNSUPPORTED, "op %s: %s ops are free views and are "
                           "never profiled", op->name, k.op);
        break;
    }
    if (s) return s;
    *out = k;
    return LOOM_OK;
}
