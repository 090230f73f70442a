/*
 * ilp_glpk.c — solves the sharding ILP of ilp.h with GLPK. This is the only
 * file of loom that includes glpk.h.
 *
 * The model is the class-aggregated transportation form of ilp.h: binary
 * s_v[i] per node choice, continuous e_uv[p][q] ≥ 0 per edge and pair of
 * USED classes, a one-hot row per node, a row-sum and a column-sum row per
 * used class of each edge, and the optional memory row. Three exact
 * reductions keep it small before GLPK sees it:
 *   - costs are shifted per node / per edge by their minimum (a constant)
 *     and scaled so the largest coefficient is 1000: GLPK's tolerances are
 *     absolute (1e-7 on reduced costs) and our costs are seconds ~1e-6;
 *   - an edge whose one end uses a single class has e fixed by the other
 *     end's s, so its costs fold into that node's costs (no e, no rows);
 *   - an edge with equal costs in every used cell is a constant and dropped.
 * The returned objective is recomputed from the raw costs of the assignment.
 *
 * GLPK reports fatal errors (bad calls, internal failures) by calling the
 * error hook and then abort(); we install a hook that longjmps back here,
 * free GLPK's environment (its documented recovery: glp_free_env) and turn
 * the captured terminal text into a loom error. Terminal output goes to a
 * hook that keeps the last lines and prints nothing. GLPK's state is per
 * thread, so concurrent solves need one thread each.
 */
#include "solver/ilp.h"
#include "base/clock.h"
#include "base/fileio.h"

#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "solver/ilp_impl.h"

int loom_ilp_glpk_fault_next;

typedef struct {
    jmp_buf jb;
    char text[512];   /* the tail of GLPK's terminal output */
} glpk_trap;

static int term_hook(void *info, const char *s)
{
    glpk_trap *t = info;
    size_t have = strlen(t->text), add = strlen(s);
    if (add >= sizeof t->text) {
        s += add - (sizeof t->text - 1);
        add = sizeof t->text - 1;
    }
    if (have + add >= sizeof t->text) {   /* keep the tail */
        size_t drop = have + add - (sizeof t->text - 1);
        memmove(t->text, t->text + drop, have - drop + 1);
        have -= drop;
    }
    memcpy(t->text + have, s, add + 1);
    return 1;   /* handled: GLPK prints nothing */
}

static void error_hook(void *info)
{
    glpk_trap *t = info;
    longjmp(t->jb, 1);
}

typedef struct {
    bool have_bound;
    double bound;     /* GLPK's best open node bound (scaled objective) */
} cb_state;

/* Records the global lower bound: the bound of the best open node. */
static void mip_callback(glp_tree *T, void *info)
{
    cb_state *st = info;
    int best = glp_ios_best_node(T);
    if (best != 0) {
        st->bound = glp_ios_node_bound(T, best);
        st->have_bound = true;
    }
}

/* One sparse matrix in GLPK's 1-based triplet form. */
typedef struct {
    int *ia, *ja;
    double *ar;
    int n, cap;
} triplets;

static bool trip_add(triplets *t, int i, int j, double v)
{
    if (t->n + 2 > t->cap) {
        int nc = t->cap ? t->cap * 2 : 1024;
        int *ia = realloc(t->ia, (size_t)nc * sizeof(int));
        if (ia) t->ia = ia;
        int *ja = realloc(t->ja, (size_t)nc * sizeof(int));
        if (ja) t->ja = ja;
        double *ar = realloc(t->ar, (size_t)nc * sizeof(double));
        if (ar) t->ar = ar;
        if (!ia || !ja || !ar) return false;
        t->cap = nc;
    }
    t->n++;
    t->ia[t->n] = i, t->ja[t->n] = j, t->ar[t->n] = v;
    return true;
}

/* What the model builder produced, for reading the solution back. */
typedef struct {
    double *cost;        /* per node choice, shifted, edges folded: [Σ k] */
    int *col0;           /* first s column (1-based) of each node */
    double scale;        /* GLPK objective = scale · (ours - offset) */
    double offset;
} model_map;

static void free_trip(triplets *t)
{
    free(t->ia);
    free(t->ja);
    free(t->ar);
}

/* Marks the classes of e's ends that some choice uses; counts them and
 * returns the last one seen at each end (the only one when the count is 1). */
static void used_classes(const loom_ilp *p, const loom_ilp_edge *e, bool *used_u, bool *used_v,
                         int32_t maxcls, int *nu, int *nv, int *pu, int *qv)
{
    memset(used_u, 0, (size_t)maxcls);
    memset(used_v, 0, (size_t)maxcls);
    *nu = *nv = 0;
    *pu = *qv = -1;
    for (int32_t c = 0; c < p->nodes[e->u].k; c++)
        if (!used_u[e->cu[c]]) used_u[e->cu[c]] = true, (*nu)++, *pu = e->cu[c];
    for (int32_t c = 0; c < p->nodes[e->v].k; c++)
        if (!used_v[e->cv[c]]) used_v[e->cv[c]] = true, (*nv)++, *qv = e->cv[c];
}

/* True when every used cell of e costs the same (lowest value in *lo). */
static bool edge_constant(const loom_ilp_edge *e, const bool *used_u, const bool *used_v, double *lo)
{
    double l = INFINITY, hi = -INFINITY;
    for (int32_t a = 0; a < e->ku; a++)
        for (int32_t b = 0; b < e->kv; b++)
            if (used_u[a] && used_v[b]) {
                double r = e->R[(int64_t)a * e->kv + b];
                l = fmin(l, r), hi = fmax(hi, r);
            }
    *lo = l;
    return hi - l <= 1e-15 * fmax(1.0, fabs(hi));
}

static int32_t max_classes(const loom_ilp *p)
{
    int32_t m = 1;
    for (int32_t i = 0; i < p->n_edges; i++) {
        if (p->edges[i].ku > m) m = p->edges[i].ku;
        if (p->edges[i].kv > m) m = p->edges[i].kv;
    }
    return m;
}

/* Size of the model build() makes: s columns, e columns of the edges that
 * keep them; one row per node, per used class of those edges, budget. */
static bool model_size(const loom_ilp *p, double budget, int32_t *vars, int32_t *cons)
{
    int32_t maxcls = max_classes(p);
    bool *used_u = malloc((size_t)maxcls), *used_v = malloc((size_t)maxcls);
    if (!used_u || !used_v) {
        free(used_u), free(used_v);
        return false;
    }
    int64_t nvar = 0, ncon = p->n_nodes + (budget > 0);
    for (int32_t v = 0; v < p->n_nodes; v++) nvar += p->nodes[v].k;
    for (int32_t i = 0; i < p->n_edges; i++) {
        int nu, nv, pu, qv;
        double lo;
        used_classes(p, &p->edges[i], used_u, used_v, maxcls, &nu, &nv, &pu, &qv);
        if (nu == 1 || nv == 1 || edge_constant(&p->edges[i], used_u, used_v, &lo)) continue;
        nvar += (int64_t)nu * nv;
        ncon += nu + nv;
    }
    free(used_u), free(used_v);
    *vars = nvar > INT32_MAX ? INT32_MAX : (int32_t)nvar;
    *cons = ncon > INT32_MAX ? INT32_MAX : (int32_t)ncon;
    return true;
}

/* Builds the GLPK problem; returns false on out-of-memory. */
static bool build(glp_prob *lp, const loom_ilp *p, const loom_ilp_opts *o, model_map *mm,
                  triplets *tr, int *kept_edges)
{
    int32_t V = p->n_nodes;
    int64_t total = 0;
    int32_t *base = malloc(((size_t)V + 1) * sizeof(int32_t));
    if (!base) return false;
    for (int32_t v = 0; v < V; v++) base[v] = (int32_t)total, total += p->nodes[v].k;
    base[V] = (int32_t)total;
    mm->cost = malloc((size_t)(total ? total : 1) * sizeof(double));
    mm->col0 = malloc(((size_t)V + 1) * sizeof(int));
    bool *keep = calloc((size_t)p->n_edges + 1, 1);
    bool ok = mm->cost && mm->col0 && keep;
    double offset = 0;
    for (int32_t v = 0; ok && v < V; v++)
        memcpy(mm->cost + base[v], p->nodes[v].cost, (size_t)p->nodes[v].k * sizeof(double));

    /* Fold single-class ends and constant edges into node costs. */
    int32_t maxcls = max_classes(p);
    bool *used_u = calloc((size_t)maxcls, 1), *used_v = calloc((size_t)maxcls, 1);
    ok = ok && used_u && used_v;
    for (int32_t i = 0; ok && i < p->n_edges; i++) {
        const loom_ilp_edge *e = &p->edges[i];
        int nu, nv, pu, qv;
        used_classes(p, e, used_u, used_v, maxcls, &nu, &nv, &pu, &qv);
        if (nu == 1) {
            for (int32_t c = 0; c < p->nodes[e->v].k; c++)
                mm->cost[base[e->v] + c] += e->R[(int64_t)pu * e->kv + e->cv[c]];
            continue;
        }
        if (nv == 1) {
            for (int32_t c = 0; c < p->nodes[e->u].k; c++)
                mm->cost[base[e->u] + c] += e->R[(int64_t)e->cu[c] * e->kv + qv];
            continue;
        }
        double lo;
        if (edge_constant(e, used_u, used_v, &lo)) {
            offset += lo;
            continue;
        }
        keep[i] = true;
    }

    /* Shift every node's and edge's costs by their minimum; find the scale. */
    double maxc = 0;
    for (int32_t v = 0; ok && v < V; v++) {
        double lo = INFINITY;
        for (int32_t c = 0; c < p->nodes[v].k; c++) lo = fmin(lo, mm->cost[base[v] + c]);
        offset += lo;
        for (int32_t c = 0; c < p->nodes[v].k; c++) {
            mm->cost[base[v] + c] -= lo;
            maxc = fmax(maxc, mm->cost[base[v] + c]);
        }
    }
    double *edge_lo = calloc((size_t)p->n_edges + 1, sizeof(double));
    ok = ok && edge_lo;
    for (int32_t i = 0; ok && i < p->n_edges; i++) {
        if (!keep[i]) continue;
        const loom_ilp_edge *e = &p->edges[i];
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t c = 0; c < (int64_t)e->ku * e->kv; c++) lo = fmin(lo, e->R[c]), hi = fmax(hi, e->R[c]);
        edge_lo[i] = lo;
        offset += lo;
        maxc = fmax(maxc, hi - lo);
    }
    mm->offset = offset;
    mm->scale = maxc > 0 ? 1000.0 / maxc : 1.0;

    /* Columns: s per node choice, then e per kept edge and used class pair. */
    int ncols = (int)total, nrows = V;
    for (int32_t i = 0; ok && i < p->n_edges; i++) {
        if (!keep[i]) continue;
        int nu, nv, pu, qv;
        used_classes(p, &p->edges[i], used_u, used_v, maxcls, &nu, &nv, &pu, &qv);
        ncols += nu * nv;
        nrows += nu + nv;
    }
    bool budget = o->memory_budget > 0;
    if (budget) nrows++;
    if (ok) {
        glp_set_obj_dir(lp, GLP_MIN);
        glp_add_cols(lp, ncols > 0 ? ncols : 1);
        glp_add_rows(lp, nrows);
    }
    int col = 1, row = 1;
    for (int32_t v = 0; ok && v < V; v++) {
        mm->col0[v] = col;
        for (int32_t c = 0; c < p->nodes[v].k; c++, col++) {
            glp_set_col_kind(lp, col, GLP_BV);
            glp_set_obj_coef(lp, col, mm->scale * mm->cost[base[v] + c]);
            ok = ok && trip_add(tr, row, col, 1.0);
        }
        glp_set_row_bnds(lp, row, GLP_FX, 1.0, 1.0);
        row++;
    }
    int *rowof_u = malloc((size_t)maxcls * sizeof(int)), *rowof_v = malloc((size_t)maxcls * sizeof(int));
    ok = ok && rowof_u && rowof_v;
    int kept = 0;
    for (int32_t i = 0; ok && i < p->n_edges; i++) {
        if (!keep[i]) continue;
        kept++;
        const loom_ilp_edge *e = &p->edges[i];
        for (int32_t c = 0; c < maxcls; c++) rowof_u[c] = rowof_v[c] = 0;
        for (int32_t c = 0; c < p->nodes[e->u].k; c++)
            if (!rowof_u[e->cu[c]]) {
                rowof_u[e->cu[c]] = row;
                glp_set_row_bnds(lp, row++, GLP_FX, 0.0, 0.0);
            }
        for (int32_t c = 0; c < p->nodes[e->v].k; c++)
            if (!rowof_v[e->cv[c]]) {
                rowof_v[e->cv[c]] = row;
                glp_set_row_bnds(lp, row++, GLP_FX, 0.0, 0.0);
            }
        /* - s terms of the row / column sums */
        for (int32_t c = 0; ok && c < p->nodes[e->u].k; c++)
            ok = trip_add(tr, rowof_u[e->cu[c]], mm->col0[e->u] + c, -1.0);
        for (int32_t c = 0; ok && c < p->nodes[e->v].k; c++)
            ok = trip_add(tr, rowof_v[e->cv[c]], mm->col0[e->v] + c, -1.0);
        for (int32_t a = 0; ok && a < e->ku; a++) {
            if (!rowof_u[a]) continue;
            for (int32_t b = 0; ok && b < e->kv; b++) {
                if (!rowof_v[b]) continue;
                glp_set_col_bnds(lp, col, GLP_LO, 0.0, 0.0);
                glp_set_obj_coef(lp, col, mm->scale * (e->R[(int64_t)a * e->kv + b] - edge_lo[i]));
                ok = trip_add(tr, rowof_u[a], col, 1.0) && trip_add(tr, rowof_v[b], col, 1.0);
                col++;
            }
        }
    }
    if (ok && budget) {
        /* Σ m/M · s ≤ 1: bytes scaled so the row is O(1). */
        for (int32_t v = 0; ok && v < V; v++)
            for (int32_t c = 0; ok && c < p->nodes[v].k; c++)
                if (p->nodes[v].mem[c] != 0)
                    ok = trip_add(tr, row, mm->col0[v] + c, p->nodes[v].mem[c] / o->memory_budget);
        glp_set_row_bnds(lp, row++, GLP_UP, 0.0, 1.0);
    }
    if (ok && ncols == 0) glp_set_col_bnds(lp, 1, GLP_FX, 0.0, 0.0);
    if (ok) glp_load_matrix(lp, tr->n, tr->ia, tr->ja, tr->ar);
    *kept_edges = kept;
    free(rowof_u);
    free(rowof_v);
    free(edge_lo);
    free(used_u);
    free(used_v);
    free(keep);
    free(base);
    return ok;
}

static loom_status write_lp(glp_prob *lp, const char *path, loom_error *err)
{
    /* Atomic like every loom output: GLPK writes a temporary that we created
     * exclusively (base/fileio.h; no planted symlink is followed), we rename. */
    char tmp[4096 + 64];
    loom_status s = loom_fileio_reserve_tmp(path, tmp, sizeof tmp, err);
    if (s) return s;
    if (glp_write_lp(lp, NULL, tmp) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return loom_error_set(err, LOOM_ERR_IO, "%s: cannot write the LP file", path);
    }
    return LOOM_OK;
}

/* The solve proper; its parameters are never reassigned (setjmp). With
 * write_only, builds the model, writes o->lp_path and stops. */
static loom_status solve(const loom_ilp *p, const loom_ilp_opts *o, bool write_only,
                         loom_ilp_solution *out, loom_error *err)
{
    double t0 = loom_clock_s();
    glpk_trap trap;
    trap.text[0] = '\0';
    /* Locals assigned after setjmp and read after a longjmp are volatile. */
    glp_prob *volatile lp = NULL;
    model_map mm_v = {0};
    model_map *volatile mm = &mm_v;
    triplets tr_v = {0};
    triplets *volatile tr = &tr_v;
    int32_t *volatile choice = NULL;
    volatile loom_status st = LOOM_OK;

    if (setjmp(trap.jb)) {
        /* GLPK hit a fatal error: its environment is unusable; free it all. */
        glp_free_env();
        free(mm->cost);
        free(mm->col0);
        free_trip(tr);
        free(choice);
        char *t = trap.text;
        size_t n = strlen(t);
        while (n && (t[n - 1] == '\n' || t[n - 1] == ' ')) t[--n] = '\0';
        for (char *c = t; *c; c++)
            if (*c == '\n') *c = ' ';
        return loom_error_set(err, LOOM_ERR_SOLVER, "GLPK fatal error: %s",
                              n ? t : "(no message)");
    }
    glp_term_hook(term_hook, &trap);
    glp_error_hook(error_hook, &trap);

    lp = glp_create_prob();
    int kept = 0;
    if (!build(lp, p, o, mm, tr, &kept)) {
        st = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory building the ILP");
        goto fail;
    }
    if (loom_ilp_glpk_fault_next) {
        /* Test hook: a call GLPK rejects as fatal (column 0 does not exist). */
        loom_ilp_glpk_fault_next = 0;
        glp_set_col_kind(lp, 0, GLP_BV);
    }
    out->n_vars = out->core_vars = glp_get_num_cols(lp);
    out->n_cons = out->core_cons = glp_get_num_rows(lp);
    if (o->lp_path) {
        /* Readable names for the debug file: s<node>_<choice>, e<edge>_<p>_<q>. */
        char name[64];
        for (int32_t v = 0; v < p->n_nodes; v++)
            for (int32_t c = 0; c < p->nodes[v].k; c++) {
                snprintf(name, sizeof name, "s%d_%d", v, c);
                glp_set_col_name(lp, mm->col0[v] + c, name);
            }
        if ((st = write_lp(lp, o->lp_path, err))) goto fail;
        if (write_only) goto done;
    }

    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    parm.mip_gap = 0.0;
    parm.tm_lim = o->time_limit_s > 0 && o->time_limit_s < INT_MAX / 1000.0
                      ? (int)ceil(o->time_limit_s * 1000.0)
                      : INT_MAX;
    cb_state cbs = {0};
    parm.cb_func = mip_callback;
    parm.cb_info = &cbs;
    int ret = glp_intopt(lp, &parm);
    int ms = glp_mip_status(lp);
    if (ret == GLP_ENOPFS || ms == GLP_NOFEAS) {
        out->status = LOOM_ILP_INFEASIBLE;
        goto done;
    }
    bool stopped = ret == GLP_ETMLIM || ret == GLP_ESTOP;
    if (stopped) {
        out->status = ms == GLP_OPT ? LOOM_ILP_OPTIMAL : LOOM_ILP_FEASIBLE;
    } else if (ret != 0 || ms != GLP_OPT) {
        st = loom_error_set(err, LOOM_ERR_SOLVER,
                            "GLPK glp_intopt failed (return code %d, MIP status %d) on an ILP of "
                            "%d variables and %d constraints", ret, ms, out->n_vars, out->n_cons);
        goto fail;
    } else {
        out->status = LOOM_ILP_OPTIMAL;
    }

    choice = malloc((size_t)p->n_nodes * sizeof(int32_t));
    if (!choice) {
        st = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory reading the ILP solution");
        goto fail;
    }
    bool have = ms == GLP_FEAS || ms == GLP_OPT;
    for (int32_t v = 0; have && v < p->n_nodes; v++) {
        int32_t best = -1;
        double bv = 0.5;
        for (int32_t c = 0; c < p->nodes[v].k; c++) {
            double x = glp_mip_col_val(lp, mm->col0[v] + c);
            if (x > bv) bv = x, best = c;
        }
        if (best < 0) {
            st = loom_error_set(err, LOOM_ERR_SOLVER,
                                "GLPK returned no choice for ILP node %d", v);
            goto fail;
        }
        choice[v] = best;
    }
    if (out->status == LOOM_ILP_FEASIBLE) {
        /* Stopped early: keep the better of GLPK's incumbent (if any) and a
         * local search; bound by what GLPK proved or the trivial bound. */
        int32_t *ls = malloc((size_t)p->n_nodes * sizeof(int32_t));
        if (!ls) {
            st = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory reading the ILP solution");
            goto fail;
        }
        if (loom_ilp_local_search(p, o->memory_budget, ls) &&
            (!have || loom_ilp_objective(p, ls) < loom_ilp_objective(p, choice)))
            memcpy(choice, ls, (size_t)p->n_nodes * sizeof(int32_t)), have = true;
        free(ls);
        if (!have) {
            out->status = LOOM_ILP_INFEASIBLE;
            goto done;
        }
    }
    out->choice = choice;
    choice = NULL;
    out->objective = loom_ilp_objective(p, out->choice);
    if (out->status == LOOM_ILP_OPTIMAL) {
        out->bound = out->objective;
    } else {
        double b = loom_ilp_trivial_bound(p);
        if (cbs.have_bound) b = fmax(b, cbs.bound / mm->scale + mm->offset);
        out->bound = fmin(b, out->objective);
        out->gap = (out->objective - out->bound) / fmax(fabs(out->objective), 1e-12);
    }
done:
    out->solve_time_s = loom_clock_s() - t0;
fail:
    glp_delete_prob(lp);
    glp_error_hook(NULL, NULL);
    glp_term_hook(NULL, NULL);
    free(mm->cost);
    free(mm->col0);
    free_trip(tr);
    free(choice);
    (void)kept;
    if (st) {
        free(out->choice);
        out->choice = NULL;
    }
    return st;
}

loom_status loom_ilp_solve_glpk(const loom_ilp *p, const loom_ilp_opts *o, loom_ilp_solution *out,
                                loom_error *err)
{
    memset(out, 0, sizeof *out);
    loom_ilp_opts defaults;
    if (!o) loom_ilp_opts_init(&defaults), o = &defaults;
    if (p->n_nodes == 0) {
        out->status = LOOM_ILP_OPTIMAL;
        return LOOM_OK;
    }
    if (o->memory_budget > 0 || o->no_reduce) return solve(p, o, false, out, err);

    /* Eliminate what dynamic programming can, solve the core, expand. The
     * debug file shows the whole model. */
    double t0 = loom_clock_s();
    loom_ilp *core;
    loom_ilp_reduction *red;
    loom_status s;
    if (o->lp_path) {
        loom_ilp_solution w;
        if ((s = solve(p, o, true, &w, err))) return s;
    }
    loom_ilp_opts co = *o;
    co.lp_path = NULL;
    if ((s = loom_ilp_reduce(p, &core, &red, err))) return s;
    loom_ilp_solution cs = {.status = LOOM_ILP_OPTIMAL};
    if (core->n_nodes > 0 && (s = solve(core, &co, false, &cs, err))) goto done;
    if (!model_size(p, 0, &out->n_vars, &out->n_cons)) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory sizing the ILP");
        goto done;
    }
    out->choice = malloc((size_t)p->n_nodes * sizeof(int32_t));
    if (!out->choice) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory expanding the ILP solution");
        goto done;
    }
    loom_ilp_expand(red, cs.choice, out->choice);
    out->status = cs.status;
    out->core_vars = cs.core_vars;
    out->core_cons = cs.core_cons;
    out->objective = loom_ilp_objective(p, out->choice);
    if (cs.status == LOOM_ILP_OPTIMAL) {
        out->bound = out->objective;
    } else {
        /* the core's bound plus what was minimised out bounds the whole */
        out->bound = fmin(out->objective, fmax(loom_ilp_trivial_bound(p),
                                               cs.bound + loom_ilp_reduction_constant(red)));
        out->gap = (out->objective - out->bound) / fmax(fabs(out->objective), 1e-12);
    }
done:
    out->solve_time_s = loom_clock_s() - t0;
    loom_ilp_solution_free(&cs);
    loom_ilp_destroy(core);
    loom_ilp_reduction_free(red);
    if (s) loom_ilp_solution_free(out);
    return s;
}
