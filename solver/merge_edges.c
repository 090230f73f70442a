/*
 * merge_edges.c — the edges of one layer's sharding ILP (merge.h): for
 * each produced tensor, the class cost matrices of resharding it from its
 * producer's spec to each consumer's (a fan-out node between them when
 * there are several), in forward and backward, with the overlaps Megatron
 * runs beside its GEMMs and the gathers its sequence-parallel linears
 * redo in backward. A node's choices collapse into classes of equal
 * (spec, partial, windows), so a matrix is classes × classes, not
 * choices × choices.
 *
 * Units: seconds, bytes per GPU.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "solver/merge_impl.h"

/* One end of an edge: the distinct (spec, partial, windows) classes of its
 * node's choices. */
typedef struct {
    int32_t n;
    loom_spec *spec;
    uint8_t *part;
    double *win;      /* consumer end: backward overlap window (overlap_window) */
    double *fwin;     /* consumer end: forward overlap window (fwd_window) */
    int32_t *cls;     /* per choice */
} end_classes;

static void free_end(end_classes *e)
{
    free(e->spec), free(e->part), free(e->win), free(e->fwin), free(e->cls);
}

static bool classify(end_classes *e, int32_t k, int nd, const loom_spec *const *specs,
                     const uint8_t *parts, const double *wins, const double *fwins)
{
    e->n = 0;
    if (k < 0) return false;
    e->spec = malloc((size_t)k * sizeof(loom_spec));
    e->part = malloc((size_t)k);
    e->win = malloc((size_t)k * sizeof(double));
    e->fwin = malloc((size_t)k * sizeof(double));
    e->cls = malloc((size_t)k * sizeof(int32_t));
    if (!e->spec || !e->part || !e->win || !e->fwin || !e->cls) return false;
    for (int32_t i = 0; i < k; i++) {
        int32_t c = 0;
        while (c < e->n && !(loom_spec_eq(&e->spec[c], specs[i], nd) && e->part[c] == parts[i] &&
                             e->win[c] == wins[i] && e->fwin[c] == fwins[i]))
            c++;
        if (c == e->n) {
            e->spec[c] = *specs[i];
            e->part[c] = parts[i];
            e->win[c] = wins[i];
            e->fwin[c] = fwins[i];
            e->n++;
        }
        e->cls[i] = c;
    }
    return true;
}

static bool weighted_matmul(const loom_op *o) { return loom_strategy_weighted_matmul(o); }

/* How long a backward collective on the gradient of an input of op o
 * (strategy s) can run beside o's own backward GEMMs: half its backward
 * compute. Megatron's column-parallel linear (Shoeybi et al. 2019; the
 * sequence-parallel version, Korthikanti et al. 2022 §4.2.2,
 * LinearWithGradAccumulationAndAsyncCommunication) issues the input
 * gradient's all-reduce / reduce-scatter asynchronously right after the
 * dgrad GEMM and runs the wgrad GEMM meanwhile; with sequence parallelism
 * the re-gather of the saved input runs beside the dgrad GEMM. Each GEMM
 * is about half of the backward; costs/eval.c charges these collectives
 * the same way (beside half the backward). 0 for ops without weights. */
static double overlap_window(const loom_op *o, const loom_strategy *s)
{
    return weighted_matmul(o) ? 0.5 * s->bwd_compute_s : 0;
}

/* How long the forward gather of a sequence-parallel input of op o can run
 * beside o's forward GEMM: with TP communication overlap (Megatron's
 * --tp-comm-overlap: userbuffers pipeline the all-gather with the GEMM it
 * feeds, costs/eval.c's `exposed`), its forward compute; 0 otherwise. */
static double fwd_window(const loom_strategy_ctx *c, const loom_op *o, const loom_strategy *s)
{
    return c->tp_overlap && weighted_matmul(o) ? s->compute_s - s->bwd_compute_s : 0;
}

static double beside(double comm_s, double gemm_s) { return loom_strategy_beside(comm_s, gemm_s); }

/* `to` only gathers, over the tensor-parallel axis 1, the tokens (dim "s",
 * or "c" in expert buffers) that `from` splits: the gather of a
 * sequence-parallel input that TP communication overlap hides. */
static bool tp_token_gather(const loom_tensor *t, const loom_spec *from, const loom_spec *to)
{
    bool fewer = false;
    for (int d = 0; d < t->ndim; d++) {
        if (to->ax[d] == from->ax[d]) continue;
        if ((to->ax[d] & ~from->ax[d]) || (from->ax[d] & ~to->ax[d]) != LOOM_AXIS1) return false;
        if (strcmp(t->dims[d].name, "s") && strcmp(t->dims[d].name, "c")) return false;
        fewer = true;
    }
    return fewer;
}

/* Megatron moves tokens to their experts only by the dispatcher's
 * all-to-all (strategy.c: the MoE dispatch and combine ops, priced as
 * Megatron's alltoall dispatcher, costs/moe.h): an expert buffer [e, c, h]
 * never reshards its experts e between axes on an edge, which would be an
 * all-to-all of the token slots without the dispatcher's counts,
 * probabilities and load imbalance (gpt-oss-20b, EP 8 on 8 H100s: 2.5%
 * faster than loom eval prices the same configuration). The edge gets a
 * cost no plan takes: the dispatcher's own modes always exist. */
#define MEGATRON_FORBIDDEN_S 1e3
static bool expert_reshard(const loom_strategy_ctx *c, const loom_tensor *t, const loom_spec *from,
                           const loom_spec *to)
{
    if (!c->megatron_only) return false;
    int de = -1;
    bool slots = false;
    for (int d = 0; d < t->ndim; d++) {
        if (!strcmp(t->dims[d].name, "e")) de = d;
        slots |= !strcmp(t->dims[d].name, "c");
    }
    return de >= 0 && slots && from->ax[de] != to->ax[de];
}

/* `to` only gathers the sequence (dim "s") that `from` splits: what a
 * sequence-parallel linear layer all-gathers itself, and can therefore
 * keep sharded for its backward (nothing else moves or is sliced). */
bool loom_merge_seq_gather(const loom_tensor *t, const loom_spec *from, const loom_spec *to)
{
    bool fewer = false;
    for (int d = 0; d < t->ndim; d++) {
        if (to->ax[d] & ~from->ax[d]) return false;
        if (to->ax[d] == from->ax[d]) continue;
        if (strcmp(t->dims[d].name, "s")) return false;
        fewer = true;
    }
    return fewer;
}

/* Fills end classes for node `node` seen as the producer (out slot) or the
 * consumer (in slot) of tensor t at op `rel`; rel < 0 means a fan-out node. */
static bool node_end(const loom_layer_problem *p, int32_t node, int32_t rel, bool consumer,
                     int slot, int nd, end_classes *e)
{
    const lnode *n = &p->nodes[node];
    const loom_spec **specs = malloc((size_t)n->k * sizeof *specs);
    uint8_t *parts = malloc((size_t)n->k);
    double *wins = malloc((size_t)n->k * sizeof(double));
    double *fwins = malloc((size_t)n->k * sizeof(double));
    bool ok = specs && parts && wins && fwins;
    for (int32_t i = 0; ok && i < n->k; i++) {
        if (rel < 0) {
            specs[i] = &n->fspec[i];
            parts[i] = n->fpart[i];
            wins[i] = consumer && n->fwin ? n->fwin[i] : 0;
            fwins[i] = consumer && n->ffwin ? n->ffwin[i] : 0;
        } else {
            const loom_strategy *s = &p->ops[rel].st[i];
            const loom_op *o = loom_graph_op(p->c->g, p->first + rel);
            specs[i] = consumer ? &s->in[slot] : &s->out[slot];
            parts[i] = consumer ? s->in_partial[slot] : 0;
            wins[i] = consumer ? overlap_window(o, s) : 0;
            fwins[i] = consumer ? fwd_window(p->c, o, s) : 0;
        }
    }
    ok = ok && classify(e, n->k, nd, specs, parts, wins, fwins);
    free((void *)specs);
    free(parts);
    free(wins);
    free(fwins);
    return ok;
}

/* Adds the edge src -> dst carrying tensor t, with its cost matrices.
 * Backward collectives on the gradient run beside the consumer's backward
 * GEMMs (b's windows, overlap_window). `regather`: the consumer is a
 * matmul that saves t; when the forward only all-gathers t's sequence it
 * keeps the producer's shard instead (Megatron's sequence-parallel linear
 * layers) and gathers it again for its wgrad GEMM, beside the dgrad GEMM. */
static loom_status add_edge(loom_layer_problem *p, int32_t tensor, int32_t src, const end_classes *a,
                            int32_t dst, const end_classes *b, bool regather, int32_t charge,
                            loom_error *err)
{
    const loom_tensor *t = loom_graph_tensor(p->c->g, tensor);
    const loom_mesh_ctx *m = &p->c->mesh;
    bool grad = p->c->train && loom_strategy_float(t->dtype);
    if (!loom_grow((void **)&p->edges, &p->cap_edges, p->n_edges + 1, sizeof *p->edges))
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (ILP edges)");
    ledge *e = &p->edges[p->n_edges];
    memset(e, 0, sizeof *e);
    e->tensor = tensor, e->src = src, e->dst = dst, e->nsrc = a->n, e->ndst = b->n;
    e->charge = charge;
    size_t cells = (size_t)a->n * (size_t)b->n;
    int32_t ks = p->nodes[src].k, kd = p->nodes[dst].k;
    e->src_cls = malloc((size_t)ks * sizeof(int32_t));
    e->dst_cls = malloc((size_t)kd * sizeof(int32_t));
    e->fwd_s = malloc(cells * sizeof(double));
    e->bwd_s = malloc(cells * sizeof(double));
    e->fwd_bytes = malloc(cells * sizeof(double));
    if (!e->src_cls || !e->dst_cls || !e->fwd_s || !e->bwd_s || !e->fwd_bytes) {
        free(e->src_cls), free(e->dst_cls), free(e->fwd_s), free(e->bwd_s), free(e->fwd_bytes);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (ILP edges)");
    }
    p->n_edges++;
    memcpy(e->src_cls, a->cls, (size_t)ks * sizeof(int32_t));
    memcpy(e->dst_cls, b->cls, (size_t)kd * sizeof(int32_t));
    for (int32_t i = 0; i < a->n; i++)
        for (int32_t j = 0; j < b->n; j++) {
            size_t c = (size_t)i * (size_t)b->n + (size_t)j;
            loom_comm f = loom_reshard_fwd(m, t, &a->spec[i], &b->spec[j]);
            /* with TP communication overlap the gather of a sequence-parallel
             * input runs beside the GEMM it feeds (fwd_window) */
            double fwd = b->fwin[j] > 0 && tp_token_gather(t, &a->spec[i], &b->spec[j])
                             ? beside(f.time_s, b->fwin[j])
                             : f.time_s;
            double bwd = 0;
            if (grad) {
                bwd = beside(loom_reshard_bwd(m, t, &b->spec[j], b->part[j], &a->spec[i], a->part[i]).time_s,
                             b->win[j]);
                if (regather && loom_merge_seq_gather(t, &a->spec[i], &b->spec[j]))
                    bwd += beside(f.time_s, b->win[j]);
            }
            if (expert_reshard(p->c, t, &a->spec[i], &b->spec[j])) fwd = MEGATRON_FORBIDDEN_S;
            e->fwd_s[c] = fwd;
            e->fwd_bytes[c] = f.bytes;
            e->bwd_s[c] = bwd;
        }
    if (src == dst) {   /* both ends see the same choice: a node cost */
        lnode *n = &p->nodes[src];
        for (int32_t i = 0; i < n->k; i++) {
            size_t c = (size_t)e->src_cls[i] * (size_t)e->ndst + (size_t)e->dst_cls[i];
            n->cost[i] += e->fwd_s[c] + e->bwd_s[c];
        }
    }
    return LOOM_OK;
}

/* The fan-out node of tensor t (produced by `prod`, read by uses[0..n)):
 * choices = distinct specs of its ends × partial-gradient sets. */
static loom_status add_fanout(loom_layer_problem *p, int32_t tensor, const use *uses, int n,
                              int32_t *node, loom_error *err)
{
    const loom_tensor *t = loom_graph_tensor(p->c->g, tensor);
    int32_t cap = 0;
    const lop *pr = &p->ops[uses[0].prod];
    cap += p->nodes[pr->set].k;
    for (int u = 0; u < n; u++) cap += p->nodes[p->ops[uses[u].cons].set].k;
    loom_spec *sig = malloc((size_t)cap * sizeof(loom_spec));
    if (!sig) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (fan-out)");
    int32_t ns = 0;
    unsigned uni = 0;
    for (int u = -1; u < n; u++) {
        const lop *o = u < 0 ? pr : &p->ops[uses[u].cons];
        for (int32_t i = 0; i < p->nodes[o->set].k; i++) {
            const loom_spec *s = u < 0 ? &o->st[i].out[uses[0].oslot] : &o->st[i].in[uses[u].slot];
            if (u >= 0) uni |= o->st[i].in_partial[uses[u].slot];
            int32_t c = 0;
            while (c < ns && !loom_spec_eq(&sig[c], s, t->ndim)) c++;
            if (c == ns) sig[ns++] = *s;
        }
    }
    if (!p->c->train || !loom_strategy_float(t->dtype)) uni = 0;
    lnode *f = loom_merge_add_node(p);
    if (!f) {
        free(sig);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (fan-out)");
    }
    f->root = -1;
    f->fspec = malloc((size_t)ns * 4 * sizeof(loom_spec));
    f->fpart = malloc((size_t)ns * 4);
    if (!f->fspec || !f->fpart) {
        free(sig);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (fan-out)");
    }
    for (int32_t i = 0; i < ns; i++)
        for (unsigned P = 0; P < 4; P++) {
            /* partial sums only over axes some consumer leaves partial and
             * the layout does not split */
            if ((P & ~uni) || (P & loom_spec_axes(&sig[i], t->ndim))) continue;
            f->fspec[f->k] = sig[i];
            f->fpart[f->k] = (uint8_t)P;
            f->k++;
        }
    free(sig);
    f->cost = calloc((size_t)f->k + 1, sizeof(double));
    f->mem = calloc((size_t)f->k + 1, sizeof(double));
    f->fwin = calloc((size_t)f->k + 1, sizeof(double));
    f->ffwin = calloc((size_t)f->k + 1, sizeof(double));
    if (!f->cost || !f->mem || !f->fwin || !f->ffwin)
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (fan-out)");
    /* The reduction a choice defers to the producer edge runs beside the
     * backward of the first weighted matmul among the consumers that can
     * read it (Megatron's fused QKV / fc1 GEMM: q_proj's, gate_proj's);
     * with TP communication overlap the gather it needs, beside that
     * matmul's forward (as costs/eval.c's first column-parallel reader). */
    for (int32_t i = 0; i < f->k; i++) {
        double w = -1, fw = -1;
        for (int u = 0; u < n && w < 0; u++) {
            const lop *o = &p->ops[uses[u].cons];
            const loom_op *op = loom_graph_op(p->c->g, p->first + uses[u].cons);
            if (!weighted_matmul(op)) continue;
            for (int32_t j = 0; j < p->nodes[o->set].k; j++) {
                const loom_strategy *s = &o->st[j];
                if (!loom_spec_eq(&s->in[uses[u].slot], &f->fspec[i], t->ndim) ||
                    s->in_partial[uses[u].slot] != f->fpart[i])
                    continue;
                double x = overlap_window(op, s), y = fwd_window(p->c, op, s);
                if (w < 0 || x < w) w = x;
                if (fw < 0 || y < fw) fw = y;
            }
        }
        f->fwin[i] = w > 0 ? w : 0;
        f->ffwin[i] = fw > 0 ? fw : 0;
    }
    *node = p->n_nodes - 1;
    return LOOM_OK;
}

/* Does relative op `rel`, a weighted matmul, save its input `slot` the way
 * Megatron's sequence-parallel linear layers do (the shard, gathered again
 * for the backward)? Only in Megatron's space: elsewhere a gathered input
 * is saved gathered, which costs no second gather. */
bool loom_merge_saves_input(const loom_layer_problem *p, int32_t rel, int slot)
{
    const loom_op *o = loom_graph_op(p->c->g, p->first + rel);
    return p->c->megatron_only && weighted_matmul(o) && (o->saves & LOOM_SAVE_IN(slot));
}

/* Edges for all uses of one produced tensor. */
loom_status loom_merge_connect(loom_layer_problem *p, const use *uses, int n, loom_error *err)
{
    const loom_op *po = loom_graph_op(p->c->g, p->first + uses[0].prod);
    int32_t tensor = po->out[uses[0].oslot];
    int nd = loom_graph_tensor(p->c->g, tensor)->ndim;
    int32_t psrc = p->ops[uses[0].prod].set;
    end_classes a = {0}, b = {0};
    loom_status s = LOOM_OK;
    if (!node_end(p, psrc, uses[0].prod, false, uses[0].oslot, nd, &a)) goto oom;
    if (n == 1) {
        if (!node_end(p, p->ops[uses[0].cons].set, uses[0].cons, true, uses[0].slot, nd, &b)) goto oom;
        s = add_edge(p, tensor, psrc, &a, p->ops[uses[0].cons].set, &b,
                     loom_merge_saves_input(p, uses[0].cons, uses[0].slot), uses[0].cons, err);
        goto done;
    }
    int32_t fan = -1;
    if ((s = add_fanout(p, tensor, uses, n, &fan, err))) goto done;
    /* producer -> fan-out: the fan-out is a consumer with partial P; a
     * layout it gathers is gathered once for all its consumers, and again
     * in backward when one of them saves it */
    bool regather = false;
    for (int u = 0; u < n; u++) regather |= loom_merge_saves_input(p, uses[u].cons, uses[u].slot);
    if (!node_end(p, fan, -1, true, 0, nd, &b)) goto oom;
    if ((s = add_edge(p, tensor, psrc, &a, fan, &b, regather, uses[0].cons, err))) goto done;
    free_end(&a);
    a = b;   /* fan-out as the source: accepts partial P */
    memset(&b, 0, sizeof b);
    for (int u = 0; u < n && !s; u++) {
        free_end(&b);
        memset(&b, 0, sizeof b);
        int32_t dst = p->ops[uses[u].cons].set;
        if (!node_end(p, dst, uses[u].cons, true, uses[u].slot, nd, &b)) goto oom;
        s = add_edge(p, tensor, fan, &a, dst, &b, loom_merge_saves_input(p, uses[u].cons, uses[u].slot),
                     uses[u].cons, err);
    }
    goto done;
oom:
    s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (ILP edges)");
done:
    free_end(&a);
    free_end(&b);
    return s;
}
