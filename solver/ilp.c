/*
 * ilp.c — storage of the abstract sharding problem of ilp.h: nodes with
 * per-choice cost and memory, edges with class maps and a class × class
 * cost matrix, and the objective of a full assignment. The solvers
 * (ilp_glpk.c, exact.c) read it through the internal layout in ilp_impl.h.
 *
 * Invariant: every class map entry lies in [0, classes) and every class of a
 * map is used by at least one choice is NOT required — unused classes are
 * simply rows / columns no choice selects (the GLPK builder skips them).
 */
#include "solver/ilp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "solver/ilp_impl.h"

static const char *const status_names[] = {"optimal", "feasible", "infeasible"};
_Static_assert(sizeof status_names / sizeof status_names[0] == LOOM_ILP_INFEASIBLE + 1,
               "ilp status names out of step");

const char *loom_ilp_status_name(loom_ilp_status s)
{
    return (unsigned)s <= LOOM_ILP_INFEASIBLE ? status_names[s] : "?";
}

loom_status loom_ilp_create(loom_ilp **out, loom_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory creating an ILP");
    return LOOM_OK;
}

void loom_ilp_destroy(loom_ilp *p)
{
    if (!p) return;
    for (int32_t i = 0; i < p->n_nodes; i++) {
        free(p->nodes[i].cost);
        free(p->nodes[i].mem);
    }
    for (int32_t i = 0; i < p->n_edges; i++) {
        free(p->edges[i].cu);
        free(p->edges[i].cv);
        free(p->edges[i].R);
    }
    free(p->nodes);
    free(p->edges);
    free(p);
}

static bool finite_array(const double *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return false;
    return true;
}

loom_status loom_ilp_add_node(loom_ilp *p, int32_t k, const double *cost, const double *mem,
                              int32_t *id, loom_error *err)
{
    if (k < 1) return loom_error_set(err, LOOM_ERR_INVALID, "ILP node with %d choices", k);
    if (!finite_array(cost, k) || (mem && !finite_array(mem, k)))
        return loom_error_set(err, LOOM_ERR_INVALID, "ILP node %d: non-finite cost or memory",
                              p->n_nodes);
    if (!loom_grow((void **)&p->nodes, &p->cap_nodes, p->n_nodes + 1, sizeof *p->nodes))
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory adding an ILP node");
    loom_ilp_node *n = &p->nodes[p->n_nodes];
    n->k = k;
    n->cost = malloc((size_t)k * sizeof(double));
    n->mem = calloc((size_t)k, sizeof(double));
    if (!n->cost || !n->mem) {
        free(n->cost);
        free(n->mem);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory adding an ILP node");
    }
    memcpy(n->cost, cost, (size_t)k * sizeof(double));
    if (mem) memcpy(n->mem, mem, (size_t)k * sizeof(double));
    if (id) *id = p->n_nodes;
    p->n_nodes++;
    return LOOM_OK;
}

static bool classes_ok(const int32_t *c, int32_t k, int32_t ncls)
{
    for (int32_t i = 0; i < k; i++)
        if (c[i] < 0 || c[i] >= ncls) return false;
    return true;
}

loom_status loom_ilp_add_edge(loom_ilp *p, int32_t u, int32_t v, int32_t ku_cls,
                              const int32_t *cu, int32_t kv_cls, const int32_t *cv,
                              const double *R, loom_error *err)
{
    if (u < 0 || u >= p->n_nodes || v < 0 || v >= p->n_nodes)
        return loom_error_set(err, LOOM_ERR_INVALID, "ILP edge %d -> %d: no such node (%d nodes)",
                              u, v, p->n_nodes);
    if (ku_cls < 1 || kv_cls < 1 || !classes_ok(cu, p->nodes[u].k, ku_cls) ||
        !classes_ok(cv, p->nodes[v].k, kv_cls))
        return loom_error_set(err, LOOM_ERR_INVALID, "ILP edge %d -> %d: class map out of range",
                              u, v);
    if (!finite_array(R, (int64_t)ku_cls * kv_cls))
        return loom_error_set(err, LOOM_ERR_INVALID, "ILP edge %d -> %d: non-finite cost", u, v);
    if (u == v) {
        /* A self edge sees the same choice at both ends: fold its diagonal. */
        loom_ilp_node *n = &p->nodes[u];
        for (int32_t i = 0; i < n->k; i++) n->cost[i] += R[(int64_t)cu[i] * kv_cls + cv[i]];
        return LOOM_OK;
    }
    if (!loom_grow((void **)&p->edges, &p->cap_edges, p->n_edges + 1, sizeof *p->edges))
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory adding an ILP edge");
    loom_ilp_edge *e = &p->edges[p->n_edges];
    memset(e, 0, sizeof *e);
    e->u = u, e->v = v, e->ku = ku_cls, e->kv = kv_cls;
    size_t nu = (size_t)p->nodes[u].k, nv = (size_t)p->nodes[v].k;
    e->cu = malloc(nu * sizeof(int32_t));
    e->cv = malloc(nv * sizeof(int32_t));
    e->R = malloc((size_t)ku_cls * (size_t)kv_cls * sizeof(double));
    if (!e->cu || !e->cv || !e->R) {
        free(e->cu);
        free(e->cv);
        free(e->R);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory adding an ILP edge");
    }
    memcpy(e->cu, cu, nu * sizeof(int32_t));
    memcpy(e->cv, cv, nv * sizeof(int32_t));
    memcpy(e->R, R, (size_t)ku_cls * (size_t)kv_cls * sizeof(double));
    p->n_edges++;
    return LOOM_OK;
}

int32_t loom_ilp_num_nodes(const loom_ilp *p) { return p->n_nodes; }

int32_t loom_ilp_node_choices(const loom_ilp *p, int32_t v)
{
    LOOM_ASSERT(v >= 0 && v < p->n_nodes);
    return p->nodes[v].k;
}

double loom_ilp_objective(const loom_ilp *p, const int32_t *x)
{
    double f = 0;
    for (int32_t v = 0; v < p->n_nodes; v++) f += p->nodes[v].cost[x[v]];
    for (int32_t i = 0; i < p->n_edges; i++) {
        const loom_ilp_edge *e = &p->edges[i];
        f += e->R[(int64_t)e->cu[x[e->u]] * e->kv + e->cv[x[e->v]]];
    }
    return f;
}

double loom_ilp_memory(const loom_ilp *p, const int32_t *x)
{
    double m = 0;
    for (int32_t v = 0; v < p->n_nodes; v++) m += p->nodes[v].mem[x[v]];
    return m;
}

/* Cost of node v taking choice c, given the others' choices in x: its own
 * cost plus every edge it touches. */
static double local_cost(const loom_ilp *p, const int32_t *x, int32_t v, int32_t c)
{
    double f = p->nodes[v].cost[c];
    for (int32_t i = 0; i < p->n_edges; i++) {
        const loom_ilp_edge *e = &p->edges[i];
        if (e->u == v) f += e->R[(int64_t)e->cu[c] * e->kv + e->cv[x[e->v]]];
        else if (e->v == v) f += e->R[(int64_t)e->cu[x[e->u]] * e->kv + e->cv[c]];
    }
    return f;
}

bool loom_ilp_local_search(const loom_ilp *p, double memory_budget, int32_t *x)
{
    bool budget = memory_budget > 0;
    double mem = 0;
    for (int32_t v = 0; v < p->n_nodes; v++) {
        const loom_ilp_node *n = &p->nodes[v];
        int32_t best = 0;
        for (int32_t c = 1; c < n->k; c++) {
            bool better = budget ? (n->mem[c] < n->mem[best] ||
                                    (n->mem[c] == n->mem[best] && n->cost[c] < n->cost[best]))
                                 : n->cost[c] < n->cost[best];
            if (better) best = c;
        }
        x[v] = best;
        mem += n->mem[best];
    }
    if (budget && mem > memory_budget) return false;
    /* each accepted move lowers the objective strictly: this terminates;
     * the sweep cap only bounds the time */
    for (int sweep = 0; sweep < 50; sweep++) {
        bool moved = false;
        for (int32_t v = 0; v < p->n_nodes; v++) {
            const loom_ilp_node *n = &p->nodes[v];
            double cur = local_cost(p, x, v, x[v]), best = cur;
            int32_t arg = x[v];
            for (int32_t c = 0; c < n->k; c++) {
                if (budget && mem - n->mem[x[v]] + n->mem[c] > memory_budget) continue;
                double f = local_cost(p, x, v, c);
                if (f < best - 1e-12 * fabs(cur)) best = f, arg = c;
            }
            if (arg != x[v]) {
                mem += n->mem[arg] - n->mem[x[v]];
                x[v] = arg;
                moved = true;
            }
        }
        if (!moved) break;
    }
    return true;
}

double loom_ilp_trivial_bound(const loom_ilp *p)
{
    double b = 0;
    for (int32_t v = 0; v < p->n_nodes; v++) {
        double lo = INFINITY;
        for (int32_t c = 0; c < p->nodes[v].k; c++) lo = fmin(lo, p->nodes[v].cost[c]);
        b += lo;
    }
    for (int32_t i = 0; i < p->n_edges; i++) {
        const loom_ilp_edge *e = &p->edges[i];
        double lo = INFINITY;
        for (int64_t c = 0; c < (int64_t)e->ku * e->kv; c++) lo = fmin(lo, e->R[c]);
        b += lo;
    }
    return b;
}

void loom_ilp_opts_init(loom_ilp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->time_limit_s = 10.0;
}

void loom_ilp_solution_free(loom_ilp_solution *s)
{
    if (!s) return;
    free(s->choice);
    s->choice = NULL;
}
