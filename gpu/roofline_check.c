/*
 * roofline_check.c — roofline vs measured, per op kind (roofline_check.h).
 *
 * Every (op, TP degree, sequence-parallel or not) gives a key; a key is
 * compared once, with the first op that produced it. Errors are collected
 * per kind and summarised by their median (signed and absolute) and worst.
 */
#include "gpu/roofline_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/compute.h"
#include "gpu/enumerate.h"
#include "gpu/kernel_log.h"

typedef struct {
    double *v;
    int32_t n, cap;
    double measured_s, roofline_s;
} errs;

static bool push(errs *e, double x)
{
    if (e->n == e->cap) {
        int32_t cap = e->cap ? 2 * e->cap : 32;
        double *p = realloc(e->v, (size_t)cap * sizeof *p);
        if (!p) return false;
        e->v = p;
        e->cap = cap;
    }
    e->v[e->n++] = x;
    return true;
}

static int key_cmp(const void *a, const void *b) { return loom_profile_key_cmp(a, b); }

loom_status loom_roofline_check(const loom_graph *g, const loom_cluster *c,
                                const loom_profile_db *db, int64_t max_tp,
                                loom_roofline_row *rows, int *n_rows, loom_error *err)
{
    *n_rows = 0;
    loom_cost_model *m = NULL;
    loom_status s = loom_cost_model_create(c, NULL, NULL, &m, err);
    if (s) return s;
    errs per[LOOM_OP_KIND_COUNT];
    memset(per, 0, sizeof per);
    int32_t n_ops = loom_graph_num_ops(g);
    size_t n_seen = 0, cap_seen = (size_t)n_ops * 2 * (size_t)(max_tp > 0 ? max_tp : 1);
    loom_profile_key *seen = malloc(cap_seen * sizeof *seen);
    if (!seen) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t tp = 1; tp <= max_tp; tp++)
        for (int sp = 0; sp < 2 && (sp == 0 || tp > 1); sp++) {
            loom_dim div[6];
            int nd = loom_profile_tp_divisors(g, tp, sp, div);
            loom_dim_split splits[6];
            for (int i = 0; i < nd; i++) splits[i] = (loom_dim_split){div[i].name, div[i].size};
            for (int32_t id = 0; id < n_ops; id++) {
                loom_profile_key k;
                loom_error ignore;
                if (loom_profile_key_from_op(g, id, div, nd, &k, &ignore)) continue;
                /* Keys seen so far are kept sorted: binary search, insert. */
                size_t lo = 0, hi = n_seen;
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    if (key_cmp(&seen[mid], &k) < 0) lo = mid + 1;
                    else hi = mid;
                }
                if (lo < n_seen && key_cmp(&seen[lo], &k) == 0) continue;
                if (n_seen == cap_seen) continue;   /* cannot happen: at most one key per (op, tp, sp) */
                memmove(&seen[lo + 1], &seen[lo], (n_seen - lo) * sizeof *seen);
                seen[lo] = k;
                n_seen++;
                const loom_profile_entry *e = loom_profile_db_find(db, &k);
                loom_op_time t;
                if (!e || e->fwd_ns + e->bwd_ns <= 0 ||
                    loom_cost_op_time(m, g, id, splits, nd, &t, &ignore))
                    continue;
                double meas = (double)(e->fwd_ns + e->bwd_ns) * 1e-9, roof = t.fwd_s + t.bwd_s;
                errs *pe = &per[loom_graph_op(g, id)->kind];
                if (!push(pe, roof / meas - 1)) {
                    s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
                    goto done;
                }
                pe->measured_s += meas;
                pe->roofline_s += roof;
            }
        }
    for (int kind = 0; kind < LOOM_OP_KIND_COUNT; kind++) {
        errs *pe = &per[kind];
        if (pe->n == 0) continue;
        loom_roofline_row *r = &rows[(*n_rows)++];
        memset(r, 0, sizeof *r);
        strcpy(r->op, loom_op_kind_name((loom_op_kind)kind));
        r->n = pe->n;
        r->median_err = loom_quantile(pe->v, pe->n, 0.5);
        for (int32_t i = 0; i < pe->n; i++) {
            if (fabs(pe->v[i]) > r->max_abs_err) r->max_abs_err = fabs(pe->v[i]);
            pe->v[i] = fabs(pe->v[i]);
        }
        r->median_abs_err = loom_quantile(pe->v, pe->n, 0.5);
        r->measured_s = pe->measured_s;
        r->roofline_s = pe->roofline_s;
    }
done:
    for (int kind = 0; kind < LOOM_OP_KIND_COUNT; kind++) free(per[kind].v);
    free(seen);
    loom_cost_model_destroy(m);
    return s;
}
