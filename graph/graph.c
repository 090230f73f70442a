/*
 * graph.c — storage, building and per-op accounting of the operator graph.
 *
 * FLOPs per op kind (forward; backward in parentheses), all for the whole op
 * at the graph's batch and sequence:
 *   einsum       2 · Π(size of every distinct letter)          (2 × fwd: dX and dW,
 *                                                                or both inputs)
 *   attention    4 · b · heads · s · t' · dh — QKᵀ and PV, full (non-causal)
 *                count as in Korthikanti et al.'s model FLOPs   (2.5 × fwd: the
 *                two matmul gradients plus flash's recomputed QKᵀ); t' = t, or
 *                min(t, window) for sliding-window and min(t, chunk) for
 *                chunked attention (each query sees at most t' keys)
 *   elementwise  c · numel(out), c = 1 add/mul/scale/dropout, 3 rope, 4 silu,
 *                5 swiglu, 8 gelu, 9 geglu                             (1 × linear, 2 × others)
 *   norm         5 · numel (layernorm), 4 · numel (rmsnorm)    (2 ×)
 *   softmax      5 · numel                                     (1 ×)
 *   cross_ent.   4 · numel(logits)                             (0.5 ×)
 *   moe_route    4 · numel(router logits)                      (1 ×)
 *   moe_combine  2 · topk · numel(token output)                (1 ×)
 *   embedding, moe_dispatch, reshape, transpose: 0 FLOPs (data movement).
 * Bytes moved are the operands read plus written, zero for views.
 */
#include "graph/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "graph/validate.h"

struct loom_graph {
    char name[LOOM_NAME_MAX];
    loom_model_info info;
    loom_tensor *tensors;
    int32_t n_tensors, cap_tensors;
    loom_op *ops;
    int32_t n_ops, cap_ops;
    int32_t n_layers;
    int32_t *layer_first, *layer_count;   /* built by finalize */
    int32_t *saved_by;                    /* tensor id -> first op saving it, -1 */
    uint64_t fingerprint;                 /* set by finalize (loom_graph_fingerprint) */
    bool finalized;
    char warnings[LOOM_GRAPH_MAX_WARNINGS][LOOM_GRAPH_WARNING_MAX];
    int32_t n_warnings;
};

/* ---- name tables ---------------------------------------------------------- */

static const char *const op_kind_names[] = {
#define LOOM_X(n, s) s,
    LOOM_OP_KIND_LIST(LOOM_X)
#undef LOOM_X
};
_Static_assert(sizeof(op_kind_names) / sizeof(op_kind_names[0]) == LOOM_OP_KIND_COUNT,
               "op kind name table out of step");

const char *loom_op_kind_name(loom_op_kind k)
{
    return (unsigned)k < LOOM_OP_KIND_COUNT ? op_kind_names[k] : "?";
}

bool loom_op_kind_parse(const char *s, loom_op_kind *out)
{
    for (int i = 0; i < LOOM_OP_KIND_COUNT; i++)
        if (strcmp(s, op_kind_names[i]) == 0) {
            *out = (loom_op_kind)i;
            return true;
        }
    return false;
}

/* ---- tensors -------------------------------------------------------------- */

int64_t loom_tensor_numel(const loom_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->dims[i].size;
    return n;
}

int64_t loom_tensor_bytes(const loom_tensor *t)
{
    return loom_tensor_numel(t) * loom_dtype_bytes(t->dtype);
}

int loom_tensor_dim_index(const loom_tensor *t, const char *name)
{
    for (int i = 0; i < t->ndim; i++)
        if (strcmp(t->dims[i].name, name) == 0) return i;
    return -1;
}

/* ---- lifecycle ------------------------------------------------------------ */

loom_status loom_graph_create(const char *name, loom_graph **out, loom_error *err)
{
    *out = NULL;
    loom_graph *g = calloc(1, sizeof *g);
    if (!g) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory creating graph");
    snprintf(g->name, sizeof g->name, "%s", name ? name : "model");
    g->info.dtype = LOOM_DTYPE_BF16;
    *out = g;
    return LOOM_OK;
}

void loom_graph_destroy(loom_graph *g)
{
    if (!g) return;
    free(g->tensors);
    free(g->ops);
    free(g->layer_first);
    free(g->layer_count);
    free(g->saved_by);
    free(g);
}

const char *loom_graph_name(const loom_graph *g) { return g->name; }

void loom_graph_warn(loom_graph *g, const char *fmt, ...)
{
    if (g->n_warnings >= LOOM_GRAPH_MAX_WARNINGS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->warnings[g->n_warnings++], LOOM_GRAPH_WARNING_MAX, fmt, ap);
    va_end(ap);
}

int32_t loom_graph_num_warnings(const loom_graph *g) { return g->n_warnings; }

const char *loom_graph_warning(const loom_graph *g, int32_t i)
{
    return i >= 0 && i < g->n_warnings ? g->warnings[i] : NULL;
}
loom_model_info *loom_graph_info(loom_graph *g) { return &g->info; }
const loom_model_info *loom_graph_info_c(const loom_graph *g) { return &g->info; }
int32_t loom_graph_num_tensors(const loom_graph *g) { return g->n_tensors; }
int32_t loom_graph_num_ops(const loom_graph *g) { return g->n_ops; }
int32_t loom_graph_layer_count(const loom_graph *g) { return g->n_layers; }

const loom_tensor *loom_graph_tensor(const loom_graph *g, int32_t id)
{
    LOOM_ASSERT(id >= 0 && id < g->n_tensors);
    return &g->tensors[id];
}

const loom_op *loom_graph_op(const loom_graph *g, int32_t id)
{
    LOOM_ASSERT(id >= 0 && id < g->n_ops);
    return &g->ops[id];
}

void loom_graph_layer_ops(const loom_graph *g, int32_t layer, int32_t *first, int32_t *count)
{
    LOOM_ASSERT(g->finalized && layer >= 0 && layer < g->n_layers);
    *first = g->layer_first[layer];
    *count = g->layer_count[layer];
}

/* ---- building --------------------------------------------------------------- */

#define LOOM_MAX_ELEMENTS ((int64_t)1 << 53)   /* keeps FLOP products in int64 */

loom_status loom_graph_add_tensor(loom_graph *g, const char *name, loom_dtype dtype,
                                  int32_t ndim, const loom_dim *dims, bool is_weight,
                                  int32_t *out_id, loom_error *err)
{
    if (ndim < 0 || ndim > LOOM_MAX_DIMS)
        return loom_error_set(err, LOOM_ERR_INVALID, "tensor %s: %d dims (at most %d)", name,
                              ndim, LOOM_MAX_DIMS);
    if ((unsigned)dtype >= LOOM_DTYPE_COUNT)
        return loom_error_set(err, LOOM_ERR_INVALID, "tensor %s: bad dtype", name);
    if (strlen(name) >= LOOM_NAME_MAX)
        return loom_error_set(err, LOOM_ERR_INVALID, "tensor name too long (%zu chars, max %d): %.40s...",
                              strlen(name), LOOM_NAME_MAX - 1, name);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i].size <= 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "tensor %s: dim %s has size %lld (must be positive)", name,
                                  dims[i].name, (long long)dims[i].size);
        if (dims[i].name[0] == '\0' || memchr(dims[i].name, '\0', LOOM_DIM_NAME_MAX) == NULL)
            return loom_error_set(err, LOOM_ERR_INVALID, "tensor %s: dim %d has a bad name", name, i);
        if (numel > LOOM_MAX_ELEMENTS / dims[i].size)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "tensor %s: element count overflows (more than 2^53)", name);
        numel *= dims[i].size;
    }
    if (!loom_grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, sizeof(loom_tensor)))
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory adding tensor %s", name);
    loom_tensor *t = &g->tensors[g->n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    t->producer = -1;
    t->is_weight = is_weight;
    if (out_id) *out_id = g->n_tensors;
    g->n_tensors++;
    g->finalized = false;
    return LOOM_OK;
}

/* Bounds that keep every int64 sum over a graph exact: one op at most 2^60
 * FLOPs forward or backward, the whole graph's FLOPs and tensor bytes at
 * most 2^62 (checked in loom_graph_finalize). */
#define GRAPH_MAX_OP_FLOPS ((int64_t)1 << 60)
#define GRAPH_MAX_SUM ((int64_t)1 << 62)

/* Saturating multiply for FLOP counts (sizes are capped so this rarely bites). */
static int64_t mul_sat(int64_t a, int64_t b)
{
    if (a == 0 || b == 0) return 0;
    if (a > INT64_MAX / b) return INT64_MAX;
    return a * b;
}

/* Checks an einsum against its operands and returns its forward FLOPs. */
static loom_status einsum_flops(const loom_graph *g, const loom_op *op, int64_t *flops,
                                loom_error *err)
{
    const char *sub = op->einsum;
    const char *arrow = strstr(sub, "->");
    if (!arrow)
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: einsum \"%s\" has no \"->\"",
                              op->name, sub);
    int64_t size[128] = {0};
    const char *name[128] = {0};
    int32_t ops_ids[2 * LOOM_MAX_IO];
    int n = 0;
    for (int i = 0; i < op->n_in; i++) ops_ids[n++] = op->in[i];
    for (int i = 0; i < op->n_w - (op->bias ? 1 : 0); i++) ops_ids[n++] = op->w[i];
    const char *p = sub;
    for (int k = 0; k <= n; k++) {
        bool is_out = (k == n);
        const char *end;
        if (is_out) {
            p = arrow + 2;
            end = p + strlen(p);
        } else {
            end = p;
            while (*end && *end != ',' && end != arrow) end++;
            if ((k < n - 1) != (*end == ','))
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "op %s: einsum \"%s\" names %s operands than the op has (%d)",
                                      op->name, sub, k < n - 1 ? "fewer" : "more", n);
        }
        const loom_tensor *t = &g->tensors[is_out ? op->out[0] : ops_ids[k]];
        if (end - p != t->ndim)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: einsum operand %d \"%.*s\" has %d letters but tensor %s has %d dims",
                                  op->name, k, (int)(end - p), p, (int)(end - p), t->name, t->ndim);
        for (int d = 0; d < t->ndim; d++) {
            unsigned char c = (unsigned char)p[d];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "op %s: einsum \"%s\": '%c' is not a letter", op->name, sub, c);
            if (is_out && size[c] == 0)
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "op %s: einsum output letter '%c' appears in no input", op->name, c);
            if (name[c] && strcmp(name[c], t->dims[d].name) != 0)
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "op %s: einsum letter '%c' names dim \"%s\" in one operand and \"%s\" in %s",
                                      op->name, c, name[c], t->dims[d].name, t->name);
            name[c] = t->dims[d].name;
            if (size[c] && size[c] != t->dims[d].size)
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "op %s: einsum letter '%c' is %lld in one operand and %lld in %s",
                                      op->name, c, (long long)size[c], (long long)t->dims[d].size,
                                      t->name);
            size[c] = t->dims[d].size;
        }
        p = end + 1;
    }
    int64_t f = 2;
    for (int c = 0; c < 128; c++)
        if (size[c]) f = mul_sat(f, size[c]);
    if (op->bias) {
        /* The bias covers the output's trailing dims; adding it is one FLOP
         * per output element. */
        const loom_tensor *b = &g->tensors[op->w[op->n_w - 1]], *o = &g->tensors[op->out[0]];
        bool ok = b->ndim <= o->ndim;
        for (int d = 0; ok && d < b->ndim; d++)
            ok = b->dims[d].size == o->dims[o->ndim - b->ndim + d].size;
        if (!ok)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: bias %s does not match the output's trailing dims",
                                  op->name, b->name);
        f = f > INT64_MAX - loom_tensor_numel(o) ? INT64_MAX : f + loom_tensor_numel(o);
    }
    *flops = f;
    return LOOM_OK;
}

static int elementwise_cost(const char *fn, bool *linear)
{
    static const struct { const char *fn; int c; bool lin; } tab[] = {
        {"add", 1, true}, {"mul", 1, true}, {"scale", 1, true}, {"dropout", 1, true},
        {"rope", 3, true}, {"silu", 4, false}, {"swiglu", 5, false}, {"gelu", 8, false},
        {"geglu", 9, false},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(fn, tab[i].fn) == 0) {
            *linear = tab[i].lin;
            return tab[i].c;
        }
    return -1;
}

/* Fills fwd/bwd FLOPs and bytes of op from its kind and operand shapes. */
static loom_status account(const loom_graph *g, loom_op *op, loom_error *err)
{
    const loom_tensor *in0 = op->n_in ? &g->tensors[op->in[0]] : NULL;
    const loom_tensor *out0 = op->n_out ? &g->tensors[op->out[0]] : NULL;
    int64_t fwd = 0, bwd = 0;
    switch (op->kind) {
    case LOOM_OP_EINSUM: {
        if (op->n_out != 1)
            return loom_error_set(err, LOOM_ERR_INVALID, "op %s: an einsum has exactly one output",
                                  op->name);
        loom_status s = einsum_flops(g, op, &fwd, err);
        if (s) return s;
        bwd = mul_sat(fwd, 2);
        break;
    }
    case LOOM_OP_ATTENTION: {
        /* q [b, s, heads, dqk], k [b, t, kvh, dqk], v [b, t, kvh, dv]. */
        if (op->n_in < 3 || op->n_out < 1 || in0->ndim != 4 || g->tensors[op->in[1]].ndim != 4 ||
            g->tensors[op->in[2]].ndim != 4)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: attention takes q [b,s,heads,dqk], k [b,t,kvh,dqk] and "
                                  "v [b,t,kvh,dv]", op->name);
        const loom_tensor *k = &g->tensors[op->in[1]], *v = &g->tensors[op->in[2]];
        int64_t heads = in0->dims[2].size, kvh = k->dims[2].size;
        if (kvh <= 0 || heads % kvh != 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: %lld query heads are not a multiple of %lld kv heads",
                                  op->name, (long long)heads, (long long)kvh);
        if (op->window < 0 || op->chunk < 0 || (op->window > 0 && op->chunk > 0))
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: window (%lld) and chunk (%lld) must be >= 0 and not "
                                  "both set", op->name, (long long)op->window, (long long)op->chunk);
        /* QKᵀ: 2·b·heads·s·t'·dqk; PV: 2·b·heads·s·t'·dv (t' keys per query). */
        fwd = mul_sat(mul_sat(mul_sat(2 * in0->dims[0].size, heads), in0->dims[1].size),
                      mul_sat(loom_op_attention_span(op, k->dims[1].size),
                              in0->dims[3].size + v->dims[3].size));
        bwd = mul_sat(fwd / 2, 5);
        break;
    }
    case LOOM_OP_ELEMENTWISE: {
        bool lin = true;
        int c = elementwise_cost(op->fn, &lin);
        if (c < 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: unknown elementwise function \"%s\" (expected add, mul, "
                                  "scale, dropout, rope, silu, swiglu, gelu or geglu)", op->name, op->fn);
        fwd = c * loom_tensor_numel(out0);
        bwd = lin ? fwd : 2 * fwd;
        break;
    }
    case LOOM_OP_NORM:
        if (strcmp(op->fn, "layernorm") && strcmp(op->fn, "rmsnorm"))
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: norm \"%s\" (expected layernorm or rmsnorm)", op->name, op->fn);
        fwd = (strcmp(op->fn, "rmsnorm") == 0 ? 4 : 5) * loom_tensor_numel(in0);
        bwd = 2 * fwd;
        break;
    case LOOM_OP_SOFTMAX:
        fwd = bwd = 5 * loom_tensor_numel(in0);
        break;
    case LOOM_OP_CROSS_ENTROPY:
        fwd = 4 * loom_tensor_numel(in0);
        bwd = fwd / 2;
        break;
    case LOOM_OP_MOE_ROUTE:
        fwd = bwd = 4 * loom_tensor_numel(in0);
        break;
    case LOOM_OP_MOE_COMBINE:
        fwd = bwd = mul_sat(2 * (op->topk > 0 ? op->topk : 1), loom_tensor_numel(out0));
        break;
    case LOOM_OP_EMBEDDING:
    case LOOM_OP_MOE_DISPATCH:
    case LOOM_OP_RESHAPE:
    case LOOM_OP_TRANSPOSE:
        break;
    default:
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: unknown op kind %d", op->name, (int)op->kind);
    }
    /* Sizes are capped per tensor (2^53 elements), not per op: an einsum of
     * three 2^26 dims has 2^79 FLOPs. Refuse such ops instead of carrying a
     * saturated count into sums (graph_max_sum below bounds the sums). */
    if (fwd > GRAPH_MAX_OP_FLOPS || bwd > GRAPH_MAX_OP_FLOPS)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "op %s: more than 2^60 FLOPs per pass (the operand sizes are too "
                              "large to count in 64 bits)", op->name);
    int64_t bytes = 0;
    if (op->kind != LOOM_OP_RESHAPE && op->kind != LOOM_OP_TRANSPOSE) {
        for (int i = 0; i < op->n_in; i++) bytes += loom_tensor_bytes(&g->tensors[op->in[i]]);
        for (int i = 0; i < op->n_w; i++) bytes += loom_tensor_bytes(&g->tensors[op->w[i]]);
        for (int i = 0; i < op->n_out; i++) bytes += loom_tensor_bytes(&g->tensors[op->out[i]]);
        if (op->kind == LOOM_OP_EMBEDDING) /* reads only the gathered rows, not the table */
            bytes = 2 * loom_tensor_bytes(out0);
    }
    op->fwd_flops = fwd;
    op->bwd_flops = bwd;
    op->bytes_moved = bytes;
    return LOOM_OK;
}

int64_t loom_op_attention_span(const loom_op *op, int64_t t)
{
    int64_t w = op->window > 0 ? op->window : op->chunk;
    return w > 0 && w < t ? w : t;
}

static loom_status check_ids(const loom_graph *g, const loom_op *op, const char *what, int n,
                             const int32_t *ids, loom_error *err)
{
    if (n < 0 || n > LOOM_MAX_IO)
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: %d %s (at most %d)", op->name, n,
                              what, LOOM_MAX_IO);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= g->n_tensors)
            return loom_error_set(err, LOOM_ERR_INVALID, "op %s: %s %d is not a tensor", op->name,
                                  what, i);
    return LOOM_OK;
}

loom_status loom_graph_add_op(loom_graph *g, const loom_op *src, int32_t *out_id, loom_error *err)
{
    loom_op op = *src;
    op.name[LOOM_NAME_MAX - 1] = '\0';
    op.einsum[LOOM_EINSUM_MAX - 1] = '\0';
    op.fn[sizeof op.fn - 1] = '\0';
    loom_status s;
    if ((unsigned)op.kind >= LOOM_OP_KIND_COUNT)
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: unknown op kind", op.name);
    if (op.layer < 0 || op.layer > 1000000)
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: layer %d out of range", op.name, op.layer);
    if ((s = check_ids(g, &op, "inputs", op.n_in, op.in, err)) ||
        (s = check_ids(g, &op, "outputs", op.n_out, op.out, err)) ||
        (s = check_ids(g, &op, "weights", op.n_w, op.w, err)))
        return s;
    if (op.n_out < 1)
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: has no output", op.name);
    if (op.n_in < 1 && op.kind != LOOM_OP_EMBEDDING)
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: has no input", op.name);
    for (int i = 0; i < op.n_out; i++) {
        const loom_tensor *t = &g->tensors[op.out[i]];
        if (t->producer >= 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: output %s is already produced by op %s", op.name,
                                  t->name, g->ops[t->producer].name);
        if (t->is_weight)
            return loom_error_set(err, LOOM_ERR_INVALID, "op %s: output %s is a weight", op.name,
                                  t->name);
    }
    for (int i = 0; i < op.n_w; i++)
        if (!g->tensors[op.w[i]].is_weight)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: weight operand %s is not marked as a weight", op.name,
                                  g->tensors[op.w[i]].name);
    if ((s = account(g, &op, err))) return s;
    if (!loom_grow((void **)&g->ops, &g->cap_ops, g->n_ops + 1, sizeof(loom_op)))
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory adding op %s", op.name);
    int32_t id = g->n_ops++;
    g->ops[id] = op;
    for (int i = 0; i < op.n_out; i++) g->tensors[op.out[i]].producer = id;
    if (op.layer + 1 > g->n_layers) g->n_layers = op.layer + 1;
    g->finalized = false;
    if (out_id) *out_id = id;
    return LOOM_OK;
}

loom_status loom_graph_einsum(loom_graph *g, const char *name, int32_t layer,
                              const char *subscripts, int32_t n_in, const int32_t *in,
                              int32_t n_w, const int32_t *w, uint32_t saves,
                              int32_t *out_tensor, loom_error *err)
{
    const char *arrow = strstr(subscripts, "->");
    if (!arrow || n_in + n_w > 2 * LOOM_MAX_IO || n_in > LOOM_MAX_IO || n_w > LOOM_MAX_IO)
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: bad einsum \"%s\"", name, subscripts);
    /* Name and size each output letter after the first operand dim carrying it. */
    loom_dim dims[LOOM_MAX_DIMS];
    const char *outs = arrow + 2;
    int nd = (int)strlen(outs);
    if (nd > LOOM_MAX_DIMS)
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: einsum output has %d dims", name, nd);
    for (int d = 0; d < nd; d++) {
        bool found = false;
        const char *p = subscripts;
        for (int k = 0; k < n_in + n_w && !found; k++) {
            int32_t tid = k < n_in ? in[k] : w[k - n_in];
            if (tid < 0 || tid >= g->n_tensors)
                return loom_error_set(err, LOOM_ERR_INVALID, "op %s: operand %d is not a tensor", name, k);
            const loom_tensor *t = &g->tensors[tid];
            for (int j = 0; j < t->ndim && p[j] && p[j] != ',' && p + j != arrow; j++)
                if (p[j] == outs[d]) {
                    dims[d] = t->dims[j];
                    found = true;
                    break;
                }
            while (*p && *p != ',' && p != arrow) p++;
            if (*p == ',') p++;
        }
        if (!found)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s: einsum output letter '%c' appears in no operand", name, outs[d]);
    }
    char tname[LOOM_NAME_MAX + 8];
    snprintf(tname, sizeof tname, "%s.out", name);
    tname[LOOM_NAME_MAX - 1] = '\0';
    int32_t tid;
    loom_dtype dt = n_in ? g->tensors[in[0]].dtype : g->info.dtype;
    loom_status s = loom_graph_add_tensor(g, tname, dt, nd, dims, false, &tid, err);
    if (s) return s;
    loom_op op = {.kind = LOOM_OP_EINSUM, .layer = layer, .n_in = n_in, .n_w = n_w, .n_out = 1,
                  .saves = saves};
    snprintf(op.name, sizeof op.name, "%s", name);
    snprintf(op.einsum, sizeof op.einsum, "%s", subscripts);
    for (int i = 0; i < n_in; i++) op.in[i] = in[i];
    for (int i = 0; i < n_w; i++) op.w[i] = w[i];
    op.out[0] = tid;
    s = loom_graph_add_op(g, &op, NULL, err);
    if (s) {
        g->n_tensors--;   /* drop the output tensor we just made */
        return s;
    }
    if (out_tensor) *out_tensor = tid;
    return LOOM_OK;
}

/* ---- finalize --------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n);

loom_status loom_graph_finalize(loom_graph *g, loom_error *err)
{
    if (g->n_ops == 0) return loom_error_set(err, LOOM_ERR_INVALID, "graph %s has no ops", g->name);
    free(g->layer_first);
    free(g->layer_count);
    free(g->saved_by);
    g->layer_first = calloc((size_t)g->n_layers, sizeof(int32_t));
    g->layer_count = calloc((size_t)g->n_layers, sizeof(int32_t));
    g->saved_by = malloc((size_t)g->n_tensors * sizeof(int32_t) + 1);
    if (!g->layer_first || !g->layer_count || !g->saved_by)
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory finalizing graph");

    /* Layers must be contiguous runs of op ids, in increasing layer order. */
    for (int32_t i = 0; i < g->n_ops; i++) {
        int32_t l = g->ops[i].layer;
        if (i > 0 && l < g->ops[i - 1].layer)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "op %s (layer %d) comes after op %s (layer %d): ops must be "
                                  "listed layer by layer", g->ops[i].name, l, g->ops[i - 1].name,
                                  g->ops[i - 1].layer);
        if (g->layer_count[l]++ == 0) g->layer_first[l] = i;
    }

    /* Every tensor is used; every activation has a producer. */
    bool *used = calloc((size_t)g->n_tensors + 1, 1);
    if (!used) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory finalizing graph");
    for (int32_t i = 0; i < g->n_ops; i++) {
        const loom_op *op = &g->ops[i];
        for (int k = 0; k < op->n_in; k++) used[op->in[k]] = true;
        for (int k = 0; k < op->n_w; k++) used[op->w[k]] = true;
        for (int k = 0; k < op->n_out; k++) used[op->out[k]] = true;
    }
    for (int32_t t = 0; t < g->n_tensors; t++)
        if (!used[t]) {
            free(used);
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "tensor %s is dangling: no op reads or writes it", g->tensors[t].name);
        }
    free(used);

    /* Saved tensors are charged to the first op that saves them. */
    for (int32_t t = 0; t < g->n_tensors; t++) g->saved_by[t] = -1;
    for (int32_t i = 0; i < g->n_ops; i++) {
        const loom_op *op = &g->ops[i];
        for (int k = 0; k < op->n_in; k++)
            if ((op->saves & LOOM_SAVE_IN(k)) && g->saved_by[op->in[k]] < 0) g->saved_by[op->in[k]] = i;
        for (int k = 0; k < op->n_out; k++)
            if ((op->saves & LOOM_SAVE_OUT(k)) && g->saved_by[op->out[k]] < 0)
                g->saved_by[op->out[k]] = i;
    }

    /* Totals, per-layer costs and memory add these up: bound the sums once. */
    int64_t flops = 0, bytes = 0;
    for (int32_t i = 0; i < g->n_ops; i++) {
        flops += g->ops[i].fwd_flops + g->ops[i].bwd_flops;   /* each <= 2^60 */
        if (flops > GRAPH_MAX_SUM)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "graph %s: more than 2^62 FLOPs per step (at op %s): too large "
                                  "to count in 64 bits", g->name, g->ops[i].name);
    }
    for (int32_t t = 0; t < g->n_tensors; t++) {
        bytes += loom_tensor_bytes(&g->tensors[t]);   /* each < 2^57 */
        if (bytes > GRAPH_MAX_SUM)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "graph %s: tensors of more than 2^62 bytes in all (at %s): too "
                                  "large to count in 64 bits", g->name, g->tensors[t].name);
    }

    loom_status s = loom_graph_check_dag(g, err);
    if (s) return s;
    g->finalized = true;
    int64_t counts[3] = {g->n_ops, g->n_tensors, g->n_layers};
    g->fingerprint = fnv(14695981039346656037ull, counts, sizeof counts);
    for (int32_t l = 0; l < g->n_layers; l++) {
        uint64_t sig = loom_graph_layer_signature(g, l);
        g->fingerprint = fnv(g->fingerprint, &sig, sizeof sig);
    }
    return LOOM_OK;
}

uint64_t loom_graph_fingerprint(const loom_graph *g)
{
    LOOM_ASSERT(g->finalized);
    return g->fingerprint;
}

int64_t loom_op_saved_bytes(const loom_graph *g, int32_t id)
{
    LOOM_ASSERT(g->finalized);
    const loom_op *op = &g->ops[id];
    int64_t b = 0;
    for (int k = 0; k < op->n_in; k++)
        if ((op->saves & LOOM_SAVE_IN(k)) && g->saved_by[op->in[k]] == id)
            b += loom_tensor_bytes(&g->tensors[op->in[k]]);
    for (int k = 0; k < op->n_out; k++)
        if ((op->saves & LOOM_SAVE_OUT(k)) && g->saved_by[op->out[k]] == id)
            b += loom_tensor_bytes(&g->tensors[op->out[k]]);
    if (op->saves & LOOM_SAVE_MASK) b += loom_tensor_numel(&g->tensors[op->out[0]]);
    return b;
}

/* ---- signatures --------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_tensor(uint64_t h, const loom_tensor *t)
{
    int32_t v[2] = {(int32_t)t->dtype, t->ndim};
    h = fnv(h, v, sizeof v);
    for (int d = 0; d < t->ndim; d++) {
        h = fnv(h, t->dims[d].name, strlen(t->dims[d].name));
        h = fnv(h, &t->dims[d].size, sizeof t->dims[d].size);
    }
    return h;
}

uint64_t loom_graph_layer_signature(const loom_graph *g, int32_t layer)
{
    int32_t first, count;
    loom_graph_layer_ops(g, layer, &first, &count);
    uint64_t h = 14695981039346656037ull;
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *op = &g->ops[i];
        int32_t attrs[6] = {(int32_t)op->kind, op->n_in, op->n_out, op->n_w, op->causal, op->topk};
        h = fnv(h, attrs, sizeof attrs);
        if (op->window || op->chunk) {   /* (keeps the hashes of full attention as they were) */
            int64_t span[2] = {op->window, op->chunk};
            h = fnv(h, span, sizeof span);
        }
        h = fnv(h, &op->saves, sizeof op->saves);
        h = fnv(h, op->einsum, strlen(op->einsum));
        h = fnv(h, op->fn, strlen(op->fn));
        for (int k = 0; k < op->n_in; k++) {
            const loom_tensor *t = &g->tensors[op->in[k]];
            /* Wiring inside the layer by relative position; anything from
             * outside the layer is just "external" of its shape. */
            int32_t where = -1;
            if (t->producer >= first && t->producer < i) where = t->producer - first;
            h = fnv(h, &where, sizeof where);
            h = hash_tensor(h, t);
        }
        for (int k = 0; k < op->n_w; k++) h = hash_tensor(h, &g->tensors[op->w[k]]);
        for (int k = 0; k < op->n_out; k++) h = hash_tensor(h, &g->tensors[op->out[k]]);
    }
    return h;
}

/* ---- totals --------------------------------------------------------------------- */

static void add_ops(const loom_graph *g, int32_t first, int32_t count, bool *seen_w,
                    loom_graph_totals *t)
{
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *op = &g->ops[i];
        t->fwd_flops += op->fwd_flops;
        t->bwd_flops += op->bwd_flops;
        t->activation_bytes += loom_op_saved_bytes(g, i);
        for (int k = 0; k < op->n_w; k++) {
            const loom_tensor *w = &g->tensors[op->w[k]];
            if (seen_w[op->w[k]]) continue;
            seen_w[op->w[k]] = true;
            int64_t n = loom_tensor_numel(w);
            t->params += n;
            if (op->kind == LOOM_OP_EMBEDDING) t->params_embedding += n;
            /* A routed expert's weights ([e, …, f, …]) serve topk of e experts per token. */
            int e = loom_tensor_dim_index(w, "e");
            int64_t topk = g->info.experts_topk;
            if (e >= 0 && loom_tensor_dim_index(w, "f") >= 0 && topk > 0 && topk < w->dims[e].size)
                n = n / w->dims[e].size * topk;
            t->params_active += n;
        }
    }
}

void loom_graph_totals_get(const loom_graph *g, loom_graph_totals *out)
{
    memset(out, 0, sizeof *out);
    bool *seen = calloc((size_t)g->n_tensors + 1, 1);
    LOOM_ASSERT(seen);
    add_ops(g, 0, g->n_ops, seen, out);
    free(seen);
}

void loom_graph_layer_totals(const loom_graph *g, int32_t layer, loom_graph_totals *out)
{
    memset(out, 0, sizeof *out);
    int32_t first, count;
    loom_graph_layer_ops(g, layer, &first, &count);
    bool *seen = calloc((size_t)g->n_tensors + 1, 1);
    LOOM_ASSERT(seen);
    add_ops(g, first, count, seen, out);
    free(seen);
}
