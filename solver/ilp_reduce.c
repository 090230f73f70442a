/*
 * ilp_reduce.c — exact elimination of low-degree nodes before the ILP.
 *
 * The objective of ilp.h is a sum of node terms and pairwise edge terms, so
 * a node x whose edges all lead to ONE other node y (any number of parallel
 * edges) can be minimised out: for every choice j of y,
 *     T[j] = min_i ( c_x[i] + Σ_edges R(i, j) ),
 * which becomes part of y's cost, and x's best reply A[j] is remembered.
 * A node with edges to exactly TWO nodes y and z is replaced by one new
 * edge y - z:
 *     R'(a, b) = min_i ( c_x[i] + Σ_(x,y) R(i, a) + Σ_(x,z) R(i, b) ),
 * with a and b the classes of y and z on x's edges (tuples over parallel
 * edges), again remembering the argmin. A node with no edge takes its
 * cheapest choice. This is variable elimination for min-sum problems
 * (Bertelè & Brioschi, "Nonserial Dynamic Programming", 1972): chains and
 * trees vanish entirely, and in a transformer layer the projections, the
 * attention and most fan-out nodes go, leaving GLPK a small core. A
 * degree-2 elimination is only done when the new edge has no more cells
 * than the edges it replaces, so the core never grows.
 *
 * Memory budgets couple all nodes, so the reduction is skipped when one is
 * set (the caller's choice). Back-substitution runs the eliminations in
 * reverse: each eliminated node reads its argmin table at the choices of
 * the nodes it was attached to, which are known by then.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "solver/ilp_impl.h"

typedef struct {
    int32_t u, v, ku, kv;
    int32_t *cu, *cv;   /* per choice of u / v */
    double *R;          /* ku * kv */
    bool dead;
} redge;

typedef struct {
    int32_t x, y, z;    /* eliminated node, its partners (-1 when absent) */
    int32_t ka, kb;     /* classes of y and z */
    int32_t *ya, *zb;   /* per choice of y / z: its class */
    int32_t *arg;       /* [ka * kb]: x's best choice */
} elim;

struct loom_ilp_reduction {
    int32_t n_nodes;    /* of the original problem */
    int32_t *core_of;   /* original node -> core node, -1 if eliminated */
    int32_t *orig_of;   /* core node -> original node */
    elim *steps;
    int32_t n_steps;
    double constant;    /* Σ of the minima of nodes eliminated alone */
};

void loom_ilp_reduction_free(loom_ilp_reduction *r)
{
    if (!r) return;
    for (int32_t i = 0; i < r->n_steps; i++) free(r->steps[i].ya), free(r->steps[i].zb), free(r->steps[i].arg);
    free(r->steps), free(r->core_of), free(r->orig_of);
    free(r);
}

/* Classes of node y over a set of edges to x: distinct tuples of y's
 * classes on those edges. Fills cls[k_y]; returns the count. */
static int32_t tuple_classes(const redge *E, const int32_t *which, int n, int32_t y, int32_t ky,
                             int32_t *cls, int32_t *rep)
{
    int32_t nc = 0;
    for (int32_t j = 0; j < ky; j++) {
        int32_t c = 0;
        for (; c < nc; c++) {
            bool same = true;
            for (int q = 0; q < n && same; q++) {
                const redge *e = &E[which[q]];
                const int32_t *m = e->u == y ? e->cu : e->cv;
                same = m[j] == m[rep[c]];
            }
            if (same) break;
        }
        if (c == nc) rep[nc++] = j;
        cls[j] = c;
    }
    return nc;
}

/* Σ over x's edges to partner p of R(i, p's choice j). */
static double edge_sum(const redge *E, const int32_t *which, int n, int32_t x, int32_t i, int32_t j)
{
    double s = 0;
    for (int q = 0; q < n; q++) {
        const redge *e = &E[which[q]];
        s += e->u == x ? e->R[(int64_t)e->cu[i] * e->kv + e->cv[j]]
                       : e->R[(int64_t)e->cu[j] * e->kv + e->cv[i]];
    }
    return s;
}

loom_status loom_ilp_reduce(const loom_ilp *p, loom_ilp **core, loom_ilp_reduction **out,
                            loom_error *err)
{
    *core = NULL;
    *out = NULL;
    int32_t V = p->n_nodes;
    loom_status s = LOOM_OK;
    loom_ilp_reduction *r = calloc(1, sizeof *r);
    double **cost = calloc((size_t)V + 1, sizeof *cost);
    bool *gone = calloc((size_t)V + 1, 1);
    redge *E = NULL;
    int32_t nE = 0, capE = 0, cap_steps = 0, n_orig_edges = 0;
    int32_t *which_y = NULL, *which_z = NULL, *rep = NULL;
    double *R = NULL;
    if (!r || !cost || !gone) goto oom;
    r->n_nodes = V;
    int32_t maxk = 1;
    for (int32_t v = 0; v < V; v++) {
        maxk = p->nodes[v].k > maxk ? p->nodes[v].k : maxk;
        if (!(cost[v] = malloc((size_t)p->nodes[v].k * sizeof(double)))) goto oom;
        memcpy(cost[v], p->nodes[v].cost, (size_t)p->nodes[v].k * sizeof(double));
    }
    /* working copy of the edges; arrays are shared with p until replaced */
    for (int32_t i = 0; i < p->n_edges; i++) {
        if (!loom_grow((void **)&E, &capE, nE + 1, sizeof *E)) goto oom;
        const loom_ilp_edge *e = &p->edges[i];
        E[nE++] = (redge){e->u, e->v, e->ku, e->kv, e->cu, e->cv, e->R, false};
    }
    n_orig_edges = nE;
    rep = malloc((size_t)maxk * sizeof(int32_t));
    if (!rep) goto oom;

    for (bool progress = true; progress;) {
        progress = false;
        for (int32_t x = 0; x < V; x++) {
            if (gone[x]) continue;
            /* partners of x and its edges to each */
            int32_t y = -1, z = -1, ny = 0, nz = 0, more = 0;
            free(which_y), free(which_z);
            which_y = malloc(((size_t)nE + 1) * sizeof(int32_t));
            which_z = malloc(((size_t)nE + 1) * sizeof(int32_t));
            if (!which_y || !which_z) goto oom;
            for (int32_t i = 0; i < nE && !more; i++) {
                if (E[i].dead || (E[i].u != x && E[i].v != x)) continue;
                int32_t o = E[i].u == x ? E[i].v : E[i].u;
                if (y < 0 || o == y) y = o, which_y[ny++] = i;
                else if (z < 0 || o == z) z = o, which_z[nz++] = i;
                else more = 1;
            }
            if (more) continue;
            int32_t kx = p->nodes[x].k, ky = y >= 0 ? p->nodes[y].k : 1, kz = z >= 0 ? p->nodes[z].k : 1;
            elim st = {x, y, z, 1, 1, NULL, NULL, NULL};
            st.ya = calloc((size_t)ky, sizeof(int32_t));
            st.zb = calloc((size_t)kz, sizeof(int32_t));
            if (!st.ya || !st.zb) {
                free(st.ya), free(st.zb);
                goto oom;
            }
            if (y >= 0) st.ka = tuple_classes(E, which_y, ny, y, ky, st.ya, rep);
            int32_t *rep_y = NULL;
            if (z >= 0) {
                /* remember y's representatives before rep is reused */
                rep_y = malloc((size_t)st.ka * sizeof(int32_t));
                if (!rep_y) {
                    free(st.ya), free(st.zb);
                    goto oom;
                }
                memcpy(rep_y, rep, (size_t)st.ka * sizeof(int32_t));
                st.kb = tuple_classes(E, which_z, nz, z, kz, st.zb, rep);
                int64_t old_cells = 0;
                for (int q = 0; q < ny; q++) old_cells += (int64_t)E[which_y[q]].ku * E[which_y[q]].kv;
                for (int q = 0; q < nz; q++) old_cells += (int64_t)E[which_z[q]].ku * E[which_z[q]].kv;
                if ((int64_t)st.ka * st.kb > old_cells) {   /* would grow the core */
                    free(rep_y), free(st.ya), free(st.zb);
                    continue;
                }
            } else if (y >= 0) {
                rep_y = malloc((size_t)st.ka * sizeof(int32_t));
                if (!rep_y) {
                    free(st.ya), free(st.zb);
                    goto oom;
                }
                memcpy(rep_y, rep, (size_t)st.ka * sizeof(int32_t));
            }
            st.arg = malloc((size_t)st.ka * (size_t)st.kb * sizeof(int32_t));
            R = malloc((size_t)st.ka * (size_t)st.kb * sizeof(double));
            if (!st.arg || !R) {
                free(rep_y), free(st.ya), free(st.zb), free(st.arg);
                goto oom;
            }
            for (int32_t a = 0; a < st.ka; a++)
                for (int32_t b = 0; b < st.kb; b++) {
                    double best = INFINITY;
                    int32_t arg = 0;
                    for (int32_t i = 0; i < kx; i++) {
                        double f = cost[x][i];
                        if (y >= 0) f += edge_sum(E, which_y, ny, x, i, rep_y[a]);
                        if (z >= 0) f += edge_sum(E, which_z, nz, x, i, rep[b]);
                        if (f < best) best = f, arg = i;
                    }
                    R[(size_t)a * (size_t)st.kb + (size_t)b] = best;
                    st.arg[(size_t)a * (size_t)st.kb + (size_t)b] = arg;
                }
            free(rep_y);
            for (int q = 0; q < ny; q++) E[which_y[q]].dead = true;
            for (int q = 0; q < nz; q++) E[which_z[q]].dead = true;
            if (z >= 0) {
                /* the new edge y - z owns its arrays */
                int32_t *cu = malloc((size_t)ky * sizeof(int32_t)), *cv = malloc((size_t)kz * sizeof(int32_t));
                if (!cu || !cv || !loom_grow((void **)&E, &capE, nE + 1, sizeof *E)) {
                    free(cu), free(cv), free(st.ya), free(st.zb), free(st.arg);
                    goto oom;
                }
                memcpy(cu, st.ya, (size_t)ky * sizeof(int32_t));
                memcpy(cv, st.zb, (size_t)kz * sizeof(int32_t));
                E[nE++] = (redge){y, z, st.ka, st.kb, cu, cv, R, false};
                R = NULL;
            } else if (y >= 0) {
                for (int32_t j = 0; j < ky; j++) cost[y][j] += R[st.ya[j]];
            } else {
                r->constant += R[0];
            }
            free(R);
            R = NULL;
            if (!loom_grow((void **)&r->steps, &cap_steps, r->n_steps + 1, sizeof *r->steps)) {
                free(st.ya), free(st.zb), free(st.arg);
                goto oom;
            }
            r->steps[r->n_steps++] = st;
            gone[x] = true;
            progress = true;
        }
    }

    /* the core: surviving nodes and edges */
    r->core_of = malloc(((size_t)V + 1) * sizeof(int32_t));
    r->orig_of = malloc(((size_t)V + 1) * sizeof(int32_t));
    if (!r->core_of || !r->orig_of) goto oom;
    if ((s = loom_ilp_create(core, err))) goto fail;
    int32_t nc = 0;
    for (int32_t v = 0; v < V; v++) {
        r->core_of[v] = gone[v] ? -1 : nc;
        if (gone[v]) continue;
        r->orig_of[nc++] = v;
        if ((s = loom_ilp_add_node(*core, p->nodes[v].k, cost[v], p->nodes[v].mem, NULL, err))) goto fail;
    }
    for (int32_t i = 0; i < nE; i++)
        if (!E[i].dead &&
            (s = loom_ilp_add_edge(*core, r->core_of[E[i].u], r->core_of[E[i].v], E[i].ku, E[i].cu,
                                   E[i].kv, E[i].cv, E[i].R, err)))
            goto fail;
    goto done;
oom:
    s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory reducing the ILP");
fail:
    loom_ilp_destroy(*core);
    *core = NULL;
    loom_ilp_reduction_free(r);
    r = NULL;
done:
    for (int32_t i = n_orig_edges; E && i < nE; i++) free(E[i].cu), free(E[i].cv), free(E[i].R);
    free(E), free(which_y), free(which_z), free(rep), free(R), free(gone);
    for (int32_t v = 0; cost && v < V; v++) free(cost[v]);
    free(cost);
    *out = r;
    return s;
}

void loom_ilp_expand(const loom_ilp_reduction *r, const int32_t *core_x, int32_t *x)
{
    for (int32_t v = 0; v < r->n_nodes; v++)
        if (r->core_of[v] >= 0) x[v] = core_x[r->core_of[v]];
    for (int32_t i = r->n_steps - 1; i >= 0; i--) {
        const elim *st = &r->steps[i];
        int32_t a = st->y >= 0 ? st->ya[x[st->y]] : 0, b = st->z >= 0 ? st->zb[x[st->z]] : 0;
        x[st->x] = st->arg[(size_t)a * (size_t)st->kb + (size_t)b];
    }
}

double loom_ilp_reduction_constant(const loom_ilp_reduction *r) { return r->constant; }
