/*
 * merge.c — builds one layer's sharding ILP: union-find follow-merge,
 * per-set strategy tables, periodic links, dominance pruning and the ILP
 * itself (merge.h). The edges' class cost matrices and fan-out nodes are
 * merge_edges.c; reading a solution back, merge_solution.c.
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
#include "solver/merge_impl.h"

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
int32_t loom_merge_internal_producer(const loom_layer_problem *p, int32_t rel, int slot, int *oslot)
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

lnode *loom_merge_add_node(loom_layer_problem *p)
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

static double member_cost(const loom_layer_weights *w, const loom_strategy *s)
{
    return s->compute_s + s->comm_s + s->grad_sync_s * w->grad_sync_weight;
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
            int32_t pr = loom_merge_internal_producer(p, i, order[q], &oslot);
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
        lnode *n = loom_merge_add_node(p);
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
                    n->mem[j] += loom_merge_member_mem(w, &p->ops[i].st[j]);
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
            int32_t pr = loom_merge_internal_producer(p, v, k, &oslot);
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
        if ((s = loom_merge_connect(p, uses + i, j - i, err))) goto fail;
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
