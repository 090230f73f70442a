/*
 * follow.c — the strategy of a "follower" op (elementwise, norm, softmax,
 * cross_entropy, moe_route, reshape, transpose) given the spec of its main
 * input (strategy.h).
 *
 * Dims are matched by NAME: the main input's spec says which axes split the
 * dims called "b", "s", "h", …, and every other operand splits its dims of
 * the same names the same way (a broadcast operand without a dim is simply
 * not split along it; a dim that would not divide stays whole). Views map
 * dims through the reshape instead: input and output dims are grouped into
 * runs of equal size products ([heads] <-> [kvh, grp]); a split on the
 * outermost dim of a run moves to the outermost dim of the other side when
 * its size divides, any other split cannot be expressed and the view
 * gathers it (an all-gather). Views whose products do not line up (slices
 * of a fused tensor) fall back to names.
 *
 * A follower that reduces over its last dim pays, when that dim is split
 * over axes A, an all-reduce over A of per-row statistics (fp32, rows =
 * elements / last dim on this GPU):
 *     layernorm  fwd mean + variance 8 B/row, bwd two sums 8 B/row
 *     rmsnorm    fwd 4 B/row, bwd 4 B/row
 *     softmax    fwd max + sum 8 B/row, bwd Σ p·dp 4 B/row
 *     loss       fwd max, sum, target logit: three all-reduces of 4 B/row
 *                (Megatron's vocab-parallel cross entropy, and costs/eval.c;
 *                one of 12 B/row in a decode step, whose graph keeps the
 *                op), bwd local
 *     top-k      fwd all-gather of the router logits
 *
 * Units: seconds, bytes per GPU.
 */
#include <string.h>

#include "solver/strategy.h"
#include "solver/strategy_impl.h"

typedef struct {
    const char *name[LOOM_MAX_DIMS];
    uint8_t mask[LOOM_MAX_DIMS];
    int n;
} name_map;

static unsigned map_get(const name_map *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->name[i], name)) return m->mask[i];
    return 0;
}

/* Spec of t by dim names; dims that do not divide stay whole. */
static void by_name(const loom_mesh_ctx *mc, const name_map *m, const loom_tensor *t, loom_spec *s)
{
    memset(s, 0, sizeof *s);
    unsigned used = 0;
    for (int d = 0; d < t->ndim; d++) {
        unsigned a = map_get(m, t->dims[d].name) & ~used;
        if (a && loom_spec_dim_splits(&t->dims[d], loom_mesh_parts(mc, a))) {
            s->ax[d] = (uint8_t)a;
            used |= a;
        }
    }
}

/* Maps spec ss of view input src onto output dst through the reshape's
 * runs of equal products. Returns false when the runs do not line up;
 * *lost collects the axes that cannot be carried over. */
static bool view_map(const loom_mesh_ctx *mc, const loom_tensor *src, const loom_spec *ss,
                     const loom_tensor *dst, loom_spec *ds, unsigned *lost)
{
    memset(ds, 0, sizeof *ds);
    *lost = 0;
    if (loom_tensor_numel(src) != loom_tensor_numel(dst)) return false;
    int i = 0, j = 0;
    while (i < src->ndim || j < dst->ndim) {
        int i0 = i, j0 = j;
        int64_t ps = 1, pd = 1;
        if (i < src->ndim) ps = src->dims[i++].size;
        if (j < dst->ndim) pd = dst->dims[j++].size;
        while (ps != pd) {
            if (ps < pd && i < src->ndim) ps *= src->dims[i++].size;
            else if (pd < ps && j < dst->ndim) pd *= dst->dims[j++].size;
            else return false;
        }
        /* run src[i0, i) <-> dst[j0, j) */
        int outer_s = i0, outer_d = j0;
        while (outer_s < i - 1 && src->dims[outer_s].size == 1) outer_s++;
        while (outer_d < j - 1 && dst->dims[outer_d].size == 1) outer_d++;
        for (int d = i0; d < i; d++) {
            unsigned a = ss->ax[d];
            if (!a) continue;
            if (d == outer_s && outer_d < j &&
                dst->dims[outer_d].size % loom_mesh_parts(mc, a) == 0)
                ds->ax[outer_d] |= (uint8_t)a;
            else
                *lost |= a;
        }
    }
    return true;
}

/* Bytes per row of the statistics a split reduction exchanges, fwd / bwd. */
static void reduction_bytes(const loom_op *o, bool train, double *fwd, double *bwd,
                            int *fwd_calls, bool *gather)
{
    *fwd = *bwd = 0;
    *fwd_calls = 1;
    *gather = false;
    switch (o->kind) {
    case LOOM_OP_NORM:
        *fwd = *bwd = strcmp(o->fn, "rmsnorm") ? 8 : 4;
        break;
    case LOOM_OP_SOFTMAX: *fwd = 8, *bwd = 4; break;
    case LOOM_OP_CROSS_ENTROPY:
        *fwd = train ? 4 : 12, *fwd_calls = train ? 3 : 1;
        break;
    case LOOM_OP_MOE_ROUTE: *gather = true; break;
    default: break;
    }
}

loom_status loom_strategy_follow(const loom_strategy_ctx *c, int32_t op, int k,
                                 const loom_spec *spec, loom_strategy *s, loom_error *err)
{
    const loom_graph *g = c->g;
    const loom_op *o = loom_graph_op(g, op);
    const loom_mesh_ctx *mc = &c->mesh;
    memset(s, 0, sizeof *s);
    s->compute_scale = 1.0;
    if (k < 0 || k >= o->n_in)
        return loom_error_set(err, LOOM_ERR_INVALID, "op %s: no input %d to follow", o->name, k);
    const loom_tensor *main_t = loom_graph_tensor(g, o->in[k]);
    name_map map = {.n = 0};
    for (int d = 0; d < main_t->ndim; d++) {
        map.name[map.n] = main_t->dims[d].name;
        map.mask[map.n++] = spec->ax[d];
    }
    bool view = o->kind == LOOM_OP_RESHAPE || o->kind == LOOM_OP_TRANSPOSE;
    for (int i = 0; i < o->n_in; i++) {
        if (i == k) s->in[i] = *spec;
        else by_name(mc, &map, loom_graph_tensor(g, o->in[i]), &s->in[i]);
    }
    for (int i = 0; i < o->n_w; i++) by_name(mc, &map, loom_graph_tensor(g, o->w[i]), &s->w[i]);
    unsigned lost = 0;
    for (int i = 0; i < o->n_out; i++) {
        const loom_tensor *y = loom_graph_tensor(g, o->out[i]);
        if (view) {
            int src = i < o->n_in ? i : o->n_in - 1;
            unsigned l = 0;
            if (view_map(mc, loom_graph_tensor(g, o->in[src]), &s->in[src], y, &s->out[i], &l)) {
                if (l) {
                    /* the view materialises the gathered layout */
                    lost |= l;
                    loom_strategy_add_event(s->fwd, &s->n_fwd, LOOM_COLL_ALL_GATHER, l,
                                            loom_spec_bytes(&s->out[i], y, mc));
                }
                continue;
            }
        }
        by_name(mc, &map, y, &s->out[i]);
    }

    /* Split reduced dim: statistics all-reduce (or the router's gather). */
    const loom_tensor *x0 = loom_graph_tensor(g, o->in[0]);
    unsigned red = x0->ndim ? s->in[0].ax[x0->ndim - 1] : 0;
    double fb, bb;
    int fwd_calls;
    bool gather;
    reduction_bytes(o, c->train, &fb, &bb, &fwd_calls, &gather);
    if (red && !view) {
        int64_t rows = loom_tensor_numel(x0) / x0->dims[x0->ndim - 1].size;
        double local_rows = (double)rows /
                            (double)loom_mesh_parts(mc, loom_spec_axes(&s->in[0], x0->ndim) & ~red);
        if (gather) {
            loom_spec full = s->in[0];
            full.ax[x0->ndim - 1] = 0;
            loom_strategy_add_event(s->fwd, &s->n_fwd, LOOM_COLL_ALL_GATHER, red,
                                    loom_spec_bytes(&full, x0, mc));
        }
        for (int i = 0; i < fwd_calls; i++)
            loom_strategy_add_event(s->fwd, &s->n_fwd, LOOM_COLL_ALL_REDUCE, red, fb * local_rows);
        loom_strategy_add_event(s->bwd, &s->n_bwd, LOOM_COLL_ALL_REDUCE, red, bb * local_rows);
    }

    /* Compute splits: each split name whose every operand dim divides. */
    if (!view) {
        for (int i = 0; i < map.n; i++) {
            unsigned a = map.mask[i];
            if (!a) continue;
            int64_t parts = loom_mesh_parts(mc, a);
            bool ok = true;
            for (int q = 0; q < o->n_in + o->n_w + o->n_out && ok; q++) {
                int32_t tid = q < o->n_in ? o->in[q]
                              : q < o->n_in + o->n_w ? o->w[q - o->n_in]
                                                     : o->out[q - o->n_in - o->n_w];
                const loom_tensor *t = loom_graph_tensor(g, tid);
                int d = loom_tensor_dim_index(t, map.name[i]);
                ok = d < 0 || loom_spec_dim_splits(&t->dims[d], parts);
            }
            if (ok && s->n_splits < (int)(sizeof s->splits / sizeof s->splits[0])) {
                s->splits[s->n_splits++] = (loom_dim_split){map.name[i], parts};
                s->compute_axes |= (uint8_t)a;
            }
        }
        for (int i = 0; i < o->n_in; i++) {
            const loom_tensor *t = loom_graph_tensor(g, o->in[i]);
            if (i != k && loom_strategy_float(t->dtype))
                s->in_partial[i] = (uint8_t)(s->compute_axes & ~loom_spec_axes(&s->in[i], t->ndim));
        }
    }
    for (int d = 0; d < main_t->ndim; d++)
        if (spec->ax[d]) loom_strategy_name_add(s->name, sizeof s->name, main_t->dims[d].name, spec->ax[d]);
    if (lost) loom_strategy_name_add(s->name, sizeof s->name, "gather", lost);
    if (!s->name[0]) snprintf(s->name, sizeof s->name, "replicated");
    return loom_strategy_cost(c, op, s, err);
}
