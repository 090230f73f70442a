/*
 * merge.c — builds one layer's sharding ILP: union-find follow-merge,
 * per-set strategy tables, fan-out nodes, periodic links and the class
 * cost matrices of every edge (merge.h).
 *
 * Node order in the ILP: op sets in the order of their roots' op ids, then
 * fan-out nodes in the order of their tensors' first use — deterministic, so
 * identical inputs give identical plans.
 */
#include "solver/merge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "solver/strategy_impl.h"

typedef struct {
    int32_t set;          /* ILP node */
    int main_in;          /* followed input slot, -1 for a root */
    int32_t main_prod;    /* relative producer of that input */
    loom_strategy *st;    /* [k of the set] */
} lop;

typedef struct {
    int32_t root;         /* relative op, or -1 for a fan-out node */
    int32_t k;            /* choices */
    double *cost, *mem;   /* [k]: members' costs (self edges folded in), memory */
    loom_spec *fspec;     /* fan-out choices */
    uint8_t *fpart;
    double *fwin;         /* fan-out: backward overlap window of each choice (overlap_window) */
    double *ffwin;        /* fan-out: forward overlap window of each choice (fwd_window) */
    int32_t nk;           /* choices that survive pruning: keep[0..nk) */
    int32_t *keep;
} lnode;

typedef struct {
    int32_t tensor, src, dst;       /* nodes (src == dst: folded into the node) */
    int32_t charge;                 /* relative op its cost is reported on */
    int32_t nsrc, ndst;
    int32_t *src_cls, *dst_cls;     /* per choice of src / dst */
    double *fwd_s, *bwd_s, *fwd_bytes;   /* [nsrc * ndst] */
} ledge;

struct loom_layer_problem {
    const loom_strategy_ctx *c;
    int32_t first, n_ops, n_sets;
    lop *ops;
    lnode *nodes;
    int32_t n_nodes, cap_nodes;
    ledge *edges;
    int32_t n_edges, cap_edges;
    loom_layer_weights w;
    loom_periodic_link *links;   /* copied from the build call */
    int32_t n_links;
    loom_ilp *ilp;
};

/* A use of a produced tensor: op `cons` input `slot` reads output `oslot`
 * of op `prod` (relative indices). */
typedef struct {
    int32_t prod, oslot, cons, slot;
} use;

static int cmp_use(const void *a, const void *b)
{
    const use *x = a, *y = b;
    if (x->prod != y->prod) return x->prod < y->prod ? -1 : 1;
    if (x->oslot != y->oslot) return x->oslot < y->oslot ? -1 : 1;
    if (x->cons != y->cons) return x->cons < y->cons ? -1 : 1;
    return (x->slot > y->slot) - (x->slot < y->slot);
}

static int32_t find(int32_t *parent, int32_t i)
{
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

static int out_slot_of(const loom_op *o, int32_t tensor)
{
    for (int k = 0; k < o->n_out; k++)
        if (o->out[k] == tensor) return k;
    return -1;
}

/* The relative producer of input `slot` of relative op `rel`, or -1. */
static int32_t internal_producer(const loom_layer_problem *p, int32_t rel, int slot, int *oslot)
{
    const loom_op *o = loom_graph_op(p->c->g, p->first + rel);
    int32_t prod = loom_graph_tensor(p->c->g, o->in[slot])->producer;
    if (prod < p->first || prod >= p->first + p->n_ops) return -1;
    *oslot = out_slot_of(loom_graph_op(p->c->g, prod), o->in[slot]);
    return prod - p->first;
}

void loom_layer_problem_destroy(loom_layer_problem *p)
{
    if (!p) return;
    for (int32_t i = 0; p->ops && i < p->n_ops; i++) free(p->ops[i].st);
    for (int32_t i = 0; i < p->n_nodes; i++) {
        lnode *n = &p->nodes[i];
        free(n->fspec), free(n->fpart), free(n->fwin), free(n->ffwin), free(n->cost), free(n->mem);
        free(n->keep);
    }
    for (int32_t i = 0; i < p->n_edges; i++) {
        ledge *e = &p->edges[i];
        free(e->src_cls), free(e->dst_cls), free(e->fwd_s), free(e->bwd_s), free(e->fwd_bytes);
    }
    free(p->ops);
    free(p->nodes);
    free(p->edges);
    free(p->links);
    loom_ilp_destroy(p->ilp);
    free(p);
}

static lnode *add_node(loom_layer_problem *p)
{
    if (!loom_grow((void **)&p->nodes, &p->cap_nodes, p->n_nodes + 1, sizeof *p->nodes)) return NULL;
    lnode *n = &p->nodes[p->n_nodes++];
    memset(n, 0, sizeof *n);
    return n;
}

/* Derives member `rel`'s strategy table from its producer's (recursively). */
static loom_status derive(loom_layer_problem *p, int32_t rel, loom_error *err)
{
    lop *m = &p->ops[rel];
    if (m->st) return LOOM_OK;
    loom_status s = derive(p, m->main_prod, err);
    if (s) return s;
    const lop *prod = &p->ops[m->main_prod];
    const loom_op *o = loom_graph_op(p->c->g, p->first + rel);
    int oslot = out_slot_of(loom_graph_op(p->c->g, p->first + m->main_prod), o->in[m->main_in]);
    int32_t k = p->nodes[m->set].k;
    m->st = malloc((size_t)k * sizeof(loom_strategy));
    if (!m->st) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (merged strategies)");
    for (int32_t i = 0; i < k; i++) {
        s = loom_strategy_follow(p->c, p->first + rel, m->main_in, &prod->st[i].out[oslot],
                                 &m->st[i], err);
        if (s) return s;
    }
    return LOOM_OK;
}

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
static bool seq_gather(const loom_tensor *t, const loom_spec *from, const loom_spec *to)
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
                if (regather && seq_gather(t, &a->spec[i], &b->spec[j]))
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
    lnode *f = add_node(p);
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
static bool saves_input(const loom_layer_problem *p, int32_t rel, int slot)
{
    const loom_op *o = loom_graph_op(p->c->g, p->first + rel);
    return p->c->megatron_only && weighted_matmul(o) && (o->saves & LOOM_SAVE_IN(slot));
}

/* Edges for all uses of one produced tensor. */
static loom_status connect(loom_layer_problem *p, const use *uses, int n, loom_error *err)
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
                     saves_input(p, uses[0].cons, uses[0].slot), uses[0].cons, err);
        goto done;
    }
    int32_t fan = -1;
    if ((s = add_fanout(p, tensor, uses, n, &fan, err))) goto done;
    /* producer -> fan-out: the fan-out is a consumer with partial P; a
     * layout it gathers is gathered once for all its consumers, and again
     * in backward when one of them saves it */
    bool regather = false;
    for (int u = 0; u < n; u++) regather |= saves_input(p, uses[u].cons, uses[u].slot);
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
        s = add_edge(p, tensor, fan, &a, dst, &b, saves_input(p, uses[u].cons, uses[u].slot),
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

static double member_cost(const loom_layer_weights *w, const loom_strategy *s)
{
    return s->compute_s + s->comm_s + s->grad_sync_s * w->grad_sync_weight;
}

static double member_mem(const loom_layer_weights *w, const loom_strategy *s)
{
    return w->mem_param_bytes * s->param_bytes + w->mem_param_count * (double)s->param_count +
           w->mem_act * s->act_bytes;
}

/* Dominance pruning (merge.h): drops choice i of a node when a surviving
 * choice j is no worse in every context of its neighbours:
 *     cost_j - cost_i + Σ_edges max_q (R(j, q) - R(i, q)) ≤ 0
 * with q over the neighbour's surviving classes (edges to the same
 * neighbour are bounded separately, which only weakens the test), and
 * mem_j ≤ mem_i when memory matters. Exact ties go to the lower index and
 * choices are dropped one at a time, so one of two interchangeable choices
 * always survives. */
static bool prune(loom_layer_problem *p)
{
    int32_t V = p->n_nodes, maxk = 1, maxc = 1, maxdeg = 1;
    for (int32_t v = 0; v < V; v++) maxk = p->nodes[v].k > maxk ? p->nodes[v].k : maxk;
    for (int32_t i = 0; i < p->n_edges; i++) {
        maxc = p->edges[i].nsrc > maxc ? p->edges[i].nsrc : maxc;
        maxc = p->edges[i].ndst > maxc ? p->edges[i].ndst : maxc;
    }
    for (int32_t v = 0; v < V; v++) {
        int32_t deg = 0;
        for (int32_t i = 0; i < p->n_edges; i++)
            deg += p->edges[i].src != p->edges[i].dst && (p->edges[i].src == v || p->edges[i].dst == v);
        maxdeg = deg > maxdeg ? deg : maxdeg;
    }
    bool **alive = calloc((size_t)V + 1, sizeof *alive);
    double *D = malloc((size_t)maxdeg * (size_t)maxc * (size_t)maxc * sizeof(double));
    const int32_t **mcls = malloc((size_t)maxdeg * sizeof *mcls);
    int32_t *mine = malloc((size_t)maxdeg * sizeof(int32_t));
    bool *seen = malloc((size_t)maxc);
    bool ok = alive && D && mcls && mine && seen;
    for (int32_t v = 0; ok && v < V; v++) {
        alive[v] = malloc((size_t)p->nodes[v].k);
        if (!alive[v]) ok = false;
        else memset(alive[v], 1, (size_t)p->nodes[v].k);
    }
    for (int round = 0, changed = !p->w.no_prune; ok && changed && round < 8; round++) {
        changed = 0;
        for (int32_t v = 0; v < V; v++) {
            const lnode *n = &p->nodes[v];
            int32_t deg = 0;
            for (int32_t ei = 0; ei < p->n_edges; ei++) {
                const ledge *e = &p->edges[ei];
                if (e->src == e->dst || (e->src != v && e->dst != v)) continue;
                bool at_src = e->src == v;
                int32_t other = at_src ? e->dst : e->src, m = at_src ? e->nsrc : e->ndst;
                int32_t no = at_src ? e->ndst : e->nsrc;
                const int32_t *ocls = at_src ? e->dst_cls : e->src_cls;
                memset(seen, 0, (size_t)no);
                for (int32_t j = 0; j < p->nodes[other].k; j++)
                    if (alive[other][j]) seen[ocls[j]] = true;
                /* D[a][b] = max_q R(a, q) - R(b, q) */
                double *Dm = D + (size_t)deg * (size_t)maxc * (size_t)maxc;
                for (int32_t a = 0; a < m; a++)
                    for (int32_t b = 0; b < m; b++) {
                        double worst = -INFINITY;
                        for (int32_t q = 0; q < no; q++) {
                            if (!seen[q]) continue;
                            size_t ca = at_src ? (size_t)a * (size_t)e->ndst + (size_t)q
                                               : (size_t)q * (size_t)e->ndst + (size_t)a;
                            size_t cb = at_src ? (size_t)b * (size_t)e->ndst + (size_t)q
                                               : (size_t)q * (size_t)e->ndst + (size_t)b;
                            worst = fmax(worst, (e->fwd_s[ca] + e->bwd_s[ca]) - (e->fwd_s[cb] + e->bwd_s[cb]));
                        }
                        Dm[(size_t)a * (size_t)maxc + (size_t)b] = worst;
                    }
                mcls[deg] = at_src ? e->src_cls : e->dst_cls;
                mine[deg] = m;
                deg++;
            }
            for (int32_t i = 0; i < n->k; i++) {
                if (!alive[v][i]) continue;
                for (int32_t j = 0; j < n->k; j++) {
                    if (j == i || !alive[v][j]) continue;
                    if (p->w.memory_matters && n->mem[j] > n->mem[i]) continue;
                    double d = n->cost[j] - n->cost[i];
                    for (int32_t q = 0; q < deg; q++)
                        d += D[(size_t)q * (size_t)maxc * (size_t)maxc +
                               (size_t)mcls[q][j] * (size_t)maxc + (size_t)mcls[q][i]];
                    if (d < 0 || (d == 0 && j < i)) {
                        alive[v][i] = false;
                        changed = 1;
                        break;
                    }
                }
            }
        }
    }
    for (int32_t v = 0; ok && v < V; v++) {
        lnode *n = &p->nodes[v];
        n->keep = malloc((size_t)n->k * sizeof(int32_t));
        if (!n->keep) {
            ok = false;
            break;
        }
        n->nk = 0;
        for (int32_t i = 0; i < n->k; i++)
            if (alive[v][i]) n->keep[n->nk++] = i;
    }
    for (int32_t v = 0; alive && v < V; v++) free(alive[v]);
    free(alive), free(D), free((void *)mcls), free(mine), free(seen);
    return ok;
}

/* The ILP over the surviving choices. */
static loom_status emit_ilp(loom_layer_problem *p, loom_error *err)
{
    loom_status s = LOOM_OK;
    int32_t maxk = 1;
    for (int32_t v = 0; v < p->n_nodes; v++) maxk = p->nodes[v].k > maxk ? p->nodes[v].k : maxk;
    double *c = malloc((size_t)maxk * sizeof(double)), *m = malloc((size_t)maxk * sizeof(double));
    int32_t *cu = malloc((size_t)maxk * sizeof(int32_t)), *cv = malloc((size_t)maxk * sizeof(int32_t));
    if (!c || !m || !cu || !cv) s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (ILP)");
    for (int32_t v = 0; !s && v < p->n_nodes; v++) {
        const lnode *n = &p->nodes[v];
        for (int32_t i = 0; i < n->nk; i++) c[i] = n->cost[n->keep[i]], m[i] = n->mem[n->keep[i]];
        s = loom_ilp_add_node(p->ilp, n->nk, c, m, NULL, err);
    }
    for (int32_t i = 0; !s && i < p->n_edges; i++) {
        const ledge *e = &p->edges[i];
        if (e->src == e->dst) continue;
        const lnode *a = &p->nodes[e->src], *b = &p->nodes[e->dst];
        for (int32_t j = 0; j < a->nk; j++) cu[j] = e->src_cls[a->keep[j]];
        for (int32_t j = 0; j < b->nk; j++) cv[j] = e->dst_cls[b->keep[j]];
        size_t cells = (size_t)e->nsrc * (size_t)e->ndst;
        double *R = malloc(cells * sizeof(double));
        if (!R) {
            s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (ILP)");
            break;
        }
        for (size_t q = 0; q < cells; q++) R[q] = e->fwd_s[q] + e->bwd_s[q];
        s = loom_ilp_add_edge(p->ilp, e->src, e->dst, e->nsrc, cu, e->ndst, cv, R, err);
        free(R);
    }
    free(c), free(m), free(cu), free(cv);
    return s;
}

loom_status loom_layer_problem_build(const loom_strategy_ctx *c, int32_t first_op, int32_t n_ops,
                                     const loom_periodic_link *links, int32_t n_links,
                                     const loom_layer_weights *w, loom_layer_problem **out,
                                     loom_error *err)
{
    *out = NULL;
    loom_status s = LOOM_OK;
    loom_layer_problem *p = calloc(1, sizeof *p);
    int32_t *parent = malloc(((size_t)n_ops + 1) * sizeof(int32_t));
    use *uses = NULL;
    if (!p || !parent) goto oom;
    p->c = c, p->first = first_op, p->n_ops = n_ops, p->w = *w;
    p->ops = calloc((size_t)n_ops + 1, sizeof *p->ops);
    p->links = malloc(((size_t)n_links + 1) * sizeof *p->links);
    if (!p->ops || !p->links) goto oom;
    if (n_links > 0) memcpy(p->links, links, (size_t)n_links * sizeof *links);
    p->n_links = n_links;
    if ((s = loom_ilp_create(&p->ilp, err))) goto fail;

    /* Union-find: each follower joins the producer of its main input. */
    for (int32_t i = 0; i < n_ops; i++) parent[i] = i, p->ops[i].main_in = -1;
    for (int32_t i = 0; i < n_ops; i++) {
        const loom_op *o = loom_graph_op(c->g, first_op + i);
        if (!loom_strategy_is_follower(o->kind)) continue;
        int pref = loom_strategy_default_main(c->g, first_op + i), oslot;
        int order[LOOM_MAX_IO + 1], no = 0;
        if (pref >= 0) order[no++] = pref;
        for (int k = 0; k < o->n_in; k++)
            if (k != pref && loom_strategy_float(loom_graph_tensor(c->g, o->in[k])->dtype)) order[no++] = k;
        for (int q = 0; q < no; q++) {
            int32_t pr = internal_producer(p, i, order[q], &oslot);
            if (pr < 0) continue;
            p->ops[i].main_in = order[q];
            p->ops[i].main_prod = pr;
            parent[find(parent, i)] = find(parent, pr);
            break;
        }
    }
    /* One ILP node per set, numbered in root order; roots enumerate. */
    for (int32_t i = 0; i < n_ops; i++) {
        if (p->ops[i].main_in >= 0) continue;
        lnode *n = add_node(p);
        if (!n) goto oom;
        n->root = i;
        p->ops[i].set = p->n_nodes - 1;
        int32_t k;
        if ((s = loom_strategy_enumerate(c, first_op + i, -1, &p->ops[i].st, &k, err))) goto fail;
        p->nodes[p->ops[i].set].k = k;
    }
    p->n_sets = p->n_nodes;
    for (int32_t i = 0; i < n_ops; i++)
        if (p->ops[i].main_in >= 0) p->ops[i].set = p->ops[find(parent, i)].set;
    for (int32_t i = 0; i < n_ops; i++)
        if ((s = derive(p, i, err))) goto fail;

    for (int32_t v = 0; v < p->n_sets; v++) {
        lnode *n = &p->nodes[v];
        n->cost = calloc((size_t)n->k + 1, sizeof(double));
        n->mem = calloc((size_t)n->k + 1, sizeof(double));
        if (!n->cost || !n->mem) goto oom;
        for (int32_t i = 0; i < n_ops; i++)
            if (p->ops[i].set == v)
                for (int32_t j = 0; j < n->k; j++) {
                    n->cost[j] += member_cost(w, &p->ops[i].st[j]);
                    n->mem[j] += member_mem(w, &p->ops[i].st[j]);
                }
    }

    /* Uses of produced tensors that are not merged, grouped by tensor. */
    int32_t nu = 0, cap = 0;
    for (int32_t i = 0; i < n_ops; i++) cap += loom_graph_op(c->g, first_op + i)->n_in;
    uses = malloc(((size_t)cap + 1) * sizeof *uses);
    if (!uses) goto oom;
    for (int32_t v = 0; v < n_ops; v++) {
        const loom_op *o = loom_graph_op(c->g, first_op + v);
        for (int k = 0; k < o->n_in; k++) {
            int oslot = -1;
            int32_t pr = internal_producer(p, v, k, &oslot);
            if (pr >= 0 && p->ops[v].main_in == k) continue;   /* merged */
            if (pr < 0)
                for (int32_t l = 0; l < n_links; l++)
                    if (links[l].cons == v && links[l].slot == k) {
                        pr = links[l].prod, oslot = links[l].out_slot;
                        break;
                    }
            if (pr < 0 || pr >= n_ops || oslot < 0) continue;   /* from outside: free */
            uses[nu++] = (use){pr, oslot, v, k};
        }
    }
    qsort(uses, (size_t)nu, sizeof *uses, cmp_use);
    for (int32_t i = 0; i < nu;) {
        int32_t j = i;
        while (j < nu && uses[j].prod == uses[i].prod && uses[j].oslot == uses[i].oslot) j++;
        if ((s = connect(p, uses + i, j - i, err))) goto fail;
        i = j;
    }
    if (!prune(p)) goto oom;
    if ((s = emit_ilp(p, err))) goto fail;
    free(uses);
    free(parent);
    *out = p;
    return LOOM_OK;
oom:
    s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory building the layer ILP");
fail:
    free(uses), free(parent);
    loom_layer_problem_destroy(p);
    return s;
}

const loom_ilp *loom_layer_problem_ilp(const loom_layer_problem *p) { return p->ilp; }
int32_t loom_layer_problem_num_sets(const loom_layer_problem *p) { return p->n_sets; }

/* The original choice of node v under ILP assignment x. */
static int32_t orig(const loom_layer_problem *p, int32_t v, const int32_t *x)
{
    return p->nodes[v].keep[x[v]];
}

const loom_strategy *loom_layer_problem_strategy(const loom_layer_problem *p, int32_t rel,
                                                 const int32_t *x)
{
    LOOM_ASSERT(rel >= 0 && rel < p->n_ops);
    return &p->ops[rel].st[orig(p, p->ops[rel].set, x)];
}

double loom_layer_problem_min_memory(const loom_layer_problem *p)
{
    double total = 0;
    for (int32_t v = 0; v < p->n_sets; v++) {
        double lo = INFINITY;
        for (int32_t j = 0; j < p->nodes[v].k; j++) lo = fmin(lo, p->nodes[v].mem[j]);
        total += lo;
    }
    return total;
}

double loom_layer_problem_act_bytes(const loom_layer_problem *p, int32_t rel, const int32_t *x)
{
    const loom_strategy *s = loom_layer_problem_strategy(p, rel, x);
    double bytes = s->act_bytes;
    if (!p->c->train) return bytes;
    const loom_op *o = loom_graph_op(p->c->g, p->first + rel);
    for (int k = 0; k < o->n_in; k++) {
        if (!saves_input(p, rel, k) || !loom_strategy_charged(p->c, p->first + rel, o->in[k]))
            continue;
        int oslot = -1;
        int32_t prod = internal_producer(p, rel, k, &oslot);
        for (int32_t l = 0; prod < 0 && l < p->n_links; l++)
            if (p->links[l].cons == rel && p->links[l].slot == k)
                prod = p->links[l].prod, oslot = p->links[l].out_slot;
        if (prod < 0 || prod >= p->n_ops || oslot < 0) continue;
        const loom_tensor *t = loom_graph_tensor(p->c->g, o->in[k]);
        const loom_spec *from = &loom_layer_problem_strategy(p, prod, x)->out[oslot];
        if (seq_gather(t, from, &s->in[k]))
            bytes += loom_spec_bytes(from, t, &p->c->mesh) - loom_spec_bytes(&s->in[k], t, &p->c->mesh);
    }
    return bytes;
}

void loom_layer_problem_op_reshard(const loom_layer_problem *p, int32_t rel, const int32_t *x,
                                   double *fwd_s, double *bwd_s)
{
    *fwd_s = *bwd_s = 0;
    for (int32_t i = 0; i < p->n_edges; i++) {
        const ledge *e = &p->edges[i];
        if (e->charge != rel) continue;
        size_t c = (size_t)e->src_cls[orig(p, e->src, x)] * (size_t)e->ndst +
                   (size_t)e->dst_cls[orig(p, e->dst, x)];
        *fwd_s += e->fwd_s[c];
        *bwd_s += e->bwd_s[c];
    }
}

void loom_layer_problem_eval(const loom_layer_problem *p, const int32_t *x, loom_layer_totals *out)
{
    memset(out, 0, sizeof *out);
    for (int32_t i = 0; i < p->n_ops; i++) {
        const loom_strategy *s = loom_layer_problem_strategy(p, i, x);
        out->compute_s += s->compute_s;
        out->comm_s += s->comm_s;
        out->grad_sync_s += s->grad_sync_s;
        out->comm_bytes_fwd += s->comm_bytes_fwd;
        out->param_count += s->param_count;
        out->param_count_local += s->param_count_local;
        out->param_bytes += s->param_bytes;
        for (int a = 0; a < 4; a++) out->dp_params[a] += s->dp_params[a];
        out->other_sync_s += s->other_sync_s;
        out->act_bytes += loom_layer_problem_act_bytes(p, i, x);
        out->mem_bytes += member_mem(&p->w, s);
    }
    for (int32_t i = 0; i < p->n_edges; i++) {
        const ledge *e = &p->edges[i];
        size_t c = (size_t)e->src_cls[orig(p, e->src, x)] * (size_t)e->ndst +
                   (size_t)e->dst_cls[orig(p, e->dst, x)];
        out->reshard_s += e->fwd_s[c] + e->bwd_s[c];
        out->comm_bytes_fwd += e->fwd_bytes[c];
    }
    out->objective_s = out->compute_s + out->comm_s + out->reshard_s +
                       out->grad_sync_s * p->w.grad_sync_weight;
}
