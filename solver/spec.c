/*
 * spec.c — sharding specs, mesh groups and resharding costs (spec.h).
 *
 * The resharding model is per axis (spec.h); buffers are the per-GPU bytes
 * of the tensor in the state before (all-to-all, reduce) or after
 * (all-gather) the step, as costs/collective.h defines B.
 */
#include "solver/spec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void loom_mesh_ctx_init(loom_mesh_ctx *m, const loom_cluster *c, const loom_calib *cal,
                        loom_mesh_shape mesh)
{
    memset(m, 0, sizeof *m);
    m->cluster = c;
    m->calib = cal;
    m->mesh = mesh;
    m->group[0] = (loom_group){1, 1};
    m->group[1] = loom_mesh_axis_group(c, mesh, 0);
    m->group[2] = loom_mesh_axis_group(c, mesh, 1);
    /* The whole mesh, filled node-major from a node boundary. */
    int64_t n = mesh.n0 * mesh.n1, gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    m->group[3] = (loom_group){n, n < gpn ? n : gpn};
    loom_mesh_ctx_set_ep_span(m, 1);
}

void loom_mesh_ctx_set_ep_span(loom_mesh_ctx *m, int64_t span)
{
    m->ep_span = span > 1 ? span : 1;
    m->ep_group = m->ep_span > 1
                      ? loom_strided_group(m->cluster, m->mesh.n0 * m->ep_span, m->mesh.n1,
                                           m->mesh.n0 * m->mesh.n1 * m->ep_span)
                      : m->group[1];
    int64_t n = m->mesh.n0 * m->mesh.n1 * m->ep_span;
    m->ep_fold_group = m->ep_span > 1 ? loom_strided_group(m->cluster, n, 1, n) : m->group[3];
}

int64_t loom_mesh_parts(const loom_mesh_ctx *m, unsigned axes)
{
    if (axes & LOOM_AXIS0_EP_SPAN) axes |= LOOM_AXIS0;
    return ((axes & LOOM_AXIS0) ? m->mesh.n0 : 1) * ((axes & LOOM_AXIS1) ? m->mesh.n1 : 1) *
           ((axes & LOOM_AXIS0_EP_SPAN) ? m->ep_span : 1);
}

double loom_mesh_coll_s(const loom_mesh_ctx *m, loom_collective k, unsigned axes, double bytes)
{
    if (axes == LOOM_AXIS0_EP_SPAN || axes == (LOOM_AXIS0_EP_SPAN | LOOM_AXIS0))
        return m->mesh.n0 * m->ep_span > 1 && bytes > 0
                   ? loom_group_collective_time_s(m->cluster, m->calib, k, m->ep_group, bytes)
                   : 0;
    if ((axes & LOOM_AXIS0_EP_SPAN) && (axes & LOOM_AXIS1))
        return loom_mesh_parts(m, axes) > 1 && bytes > 0
                   ? loom_group_collective_time_s(m->cluster, m->calib, k, m->ep_fold_group, bytes)
                   : 0;
    axes &= LOOM_AXES_BOTH;
    if (!axes || loom_mesh_parts(m, axes) <= 1 || !(bytes > 0)) return 0;
    return loom_group_collective_time_s(m->cluster, m->calib, k, m->group[axes], bytes);
}

unsigned loom_spec_axes(const loom_spec *s, int ndim)
{
    unsigned a = 0;
    for (int d = 0; d < ndim; d++) a |= s->ax[d];
    return a;
}

unsigned loom_spec_dim_axes(const loom_spec *s, const loom_tensor *t, const char *dim)
{
    unsigned a = 0;
    for (int d = 0; d < t->ndim; d++)
        if (!dim || strcmp(t->dims[d].name, dim) == 0) a |= s->ax[d] & LOOM_AXES_BOTH;
    return a;
}

int loom_spec_axis_dim(const loom_spec *s, int ndim, int axis)
{
    unsigned bit = 1u << axis;
    for (int d = 0; d < ndim; d++)
        if (s->ax[d] & bit) return d;
    return -1;
}

int64_t loom_spec_shards(const loom_spec *s, int ndim, const loom_mesh_ctx *m)
{
    return loom_mesh_parts(m, loom_spec_axes(s, ndim));
}

bool loom_spec_valid(const loom_spec *s, const loom_tensor *t, const loom_mesh_ctx *m)
{
    unsigned seen = 0;
    for (int d = 0; d < t->ndim; d++) {
        unsigned a = s->ax[d];
        if (a & ~LOOM_AXES_BOTH) return false;
        if (a & seen) return false;
        seen |= a;
        if (((a & LOOM_AXIS0) && m->mesh.n0 <= 1) || ((a & LOOM_AXIS1) && m->mesh.n1 <= 1))
            return false;
        if (a && !loom_spec_dim_splits(&t->dims[d], loom_mesh_parts(m, a))) return false;
    }
    for (int d = t->ndim; d < LOOM_MAX_DIMS; d++)
        if (s->ax[d]) return false;
    return true;
}

bool loom_spec_dim_paddable(const char *name)
{
    return strcmp(name, "v") == 0;
}

bool loom_spec_dim_splits(const loom_dim *d, int64_t parts)
{
    if (parts <= 1 || d->size % parts == 0) return true;
    return loom_spec_dim_paddable(d->name) && d->size >= parts;
}

bool loom_spec_eq(const loom_spec *a, const loom_spec *b, int ndim)
{
    for (int d = 0; d < ndim; d++)
        if (a->ax[d] != b->ax[d]) return false;
    return true;
}

double loom_spec_bytes(const loom_spec *s, const loom_tensor *t, const loom_mesh_ctx *m)
{
    return (double)loom_tensor_bytes(t) / (double)loom_spec_shards(s, t->ndim, m);
}

void loom_spec_format(const loom_spec *s, const loom_tensor *t, char *buf, size_t n)
{
    static const char *const suffix[4] = {"", "@0", "@1", "@01"};
    size_t off = 0;
    if (n) buf[0] = '\0';
    for (int d = 0; d < t->ndim && off < n; d++) {
        int w = snprintf(buf + off, n - off, "%s%s%s", d ? " " : "", t->dims[d].name,
                         suffix[s->ax[d] & LOOM_AXES_BOTH]);
        if (w < 0) break;
        off += (size_t)w;
    }
}

/* Per-GPU bytes of t in spec s (double: shards divide exactly when valid). */
static double shard_bytes(const loom_mesh_ctx *m, const loom_tensor *t, const loom_spec *s)
{
    return loom_spec_bytes(s, t, m);
}

loom_comm loom_reshard_fwd(const loom_mesh_ctx *m, const loom_tensor *t, const loom_spec *from,
                           const loom_spec *to)
{
    loom_comm c = {0, 0};
    int nd = t->ndim;
    loom_spec cur = *from;
    int di[2], dj[2];
    for (int a = 0; a < 2; a++) {
        di[a] = loom_spec_axis_dim(from, nd, a);
        dj[a] = loom_spec_axis_dim(to, nd, a);
    }
    /* 1. slices: replicated -> split, free */
    for (int a = 0; a < 2; a++)
        if (di[a] < 0 && dj[a] >= 0) cur.ax[dj[a]] |= (uint8_t)(1u << a);
    /* 2. all-to-all: split on one dim -> split on another */
    for (int a = 0; a < 2; a++)
        if (di[a] >= 0 && dj[a] >= 0 && di[a] != dj[a]) {
            double b = shard_bytes(m, t, &cur);
            c.time_s += loom_mesh_coll_s(m, LOOM_COLL_ALL_TO_ALL, 1u << a, b);
            c.bytes += b;
            cur.ax[di[a]] &= (uint8_t)~(1u << a);
            cur.ax[dj[a]] |= (uint8_t)(1u << a);
        }
    /* 3. all-gathers: split -> replicated */
    unsigned ag = 0;
    for (int a = 0; a < 2; a++)
        if (di[a] >= 0 && dj[a] < 0) ag |= 1u << a;
    if (ag == LOOM_AXIS0 || ag == LOOM_AXIS1) {
        int a = ag == LOOM_AXIS0 ? 0 : 1;
        cur.ax[di[a]] &= (uint8_t)~ag;
        double b = shard_bytes(m, t, &cur);
        c.time_s += loom_mesh_coll_s(m, LOOM_COLL_ALL_GATHER, ag, b);
        c.bytes += b;
    } else if (ag == LOOM_AXES_BOTH) {
        /* Gather one axis then the other; take the cheaper order. */
        double best = INFINITY, best_b = 0;
        for (int first = 0; first < 2; first++) {
            loom_spec s1 = cur;
            s1.ax[di[first]] &= (uint8_t)~(1u << first);
            double b1 = shard_bytes(m, t, &s1);
            loom_spec s2 = s1;
            s2.ax[di[1 - first]] &= (uint8_t)~(1u << (1 - first));
            double b2 = shard_bytes(m, t, &s2);
            double tm = loom_mesh_coll_s(m, LOOM_COLL_ALL_GATHER, 1u << first, b1) +
                        loom_mesh_coll_s(m, LOOM_COLL_ALL_GATHER, 1u << (1 - first), b2);
            if (tm < best) best = tm, best_b = b1 + b2;
        }
        c.time_s += best;
        c.bytes += best_b;
    }
    return c;
}

loom_comm loom_reshard_bwd(const loom_mesh_ctx *m, const loom_tensor *t, const loom_spec *cons,
                           unsigned cons_partial, const loom_spec *prod, unsigned prod_partial)
{
    loom_comm c = {0, 0};
    int nd = t->ndim;
    loom_spec cur = *cons;
    unsigned reduce = cons_partial & ~prod_partial & LOOM_AXES_BOTH;
    unsigned ar = 0;
    for (int a = 0; a < 2; a++) {
        if (!(reduce & (1u << a)) || loom_mesh_parts(m, 1u << a) <= 1) continue;
        int d = loom_spec_axis_dim(prod, nd, a);
        if (d >= 0) {
            /* reduce-scatter straight into the producer's split */
            double b = shard_bytes(m, t, &cur);
            c.time_s += loom_mesh_coll_s(m, LOOM_COLL_REDUCE_SCATTER, 1u << a, b);
            c.bytes += b;
            cur.ax[d] |= (uint8_t)(1u << a);
        } else {
            ar |= 1u << a;
        }
    }
    if (ar) {
        /* one all-reduce over the axes still partial */
        double b = shard_bytes(m, t, &cur);
        c.time_s += loom_mesh_coll_s(m, LOOM_COLL_ALL_REDUCE, ar, b);
        c.bytes += b;
    }
    loom_comm r = loom_reshard_fwd(m, t, &cur, prod);
    c.time_s += r.time_s;
    c.bytes += r.bytes;
    return c;
}
