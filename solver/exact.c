/*
 * exact.c — exact references for the sharding ILP (ilp.h), independent of
 * GLPK, so tests can prove the ILP finds the optimum.
 *
 * Brute force: enumerates all Π k_v assignments as a mixed-radix counter
 * and keeps the cheapest one within the memory budget (ties: the first in
 * counter order). Exponential; for graphs of a handful of nodes.
 *
 * Chain DP: when every edge joins node i and node i+1 (either direction,
 * possibly several edges per pair), the objective is a sum of terms on
 * consecutive pairs, so
 *     F_0(j) = c_0[j],
 *     F_i(j) = c_i[j] + min_l ( F_{i-1}(l) + Σ_edges R[cls(l)][cls(j)] ),
 * optimum = min_j F_{V-1}(j), recovered by back-pointers. O(Σ k_{i-1} k_i).
 *
 * Units: seconds (costs), bytes (memory).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "solver/ilp.h"
#include "solver/ilp_impl.h"

loom_status loom_ilp_solve_brute(const loom_ilp *p, double memory_budget, int64_t max_assignments,
                                 loom_ilp_solution *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    int32_t V = p->n_nodes;
    int64_t count = 1;
    for (int32_t v = 0; v < V; v++) {
        if (count > max_assignments / p->nodes[v].k)
            return loom_error_set(err, LOOM_ERR_LIMIT,
                                  "brute force: more than %lld assignments", (long long)max_assignments);
        count *= p->nodes[v].k;
    }
    int32_t *x = calloc((size_t)V + 1, sizeof(int32_t));
    int32_t *best = malloc(((size_t)V + 1) * sizeof(int32_t));
    if (!x || !best) {
        free(x);
        free(best);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory in brute force");
    }
    double best_f = INFINITY;
    for (int64_t n = 0; n < count; n++) {
        if (!(memory_budget > 0) || loom_ilp_memory(p, x) <= memory_budget) {
            double f = loom_ilp_objective(p, x);
            if (f < best_f) {
                best_f = f;
                memcpy(best, x, (size_t)V * sizeof(int32_t));
            }
        }
        for (int32_t v = 0; v < V; v++) {   /* next assignment */
            if (++x[v] < p->nodes[v].k) break;
            x[v] = 0;
        }
    }
    free(x);
    if (isinf(best_f)) {
        free(best);
        out->status = LOOM_ILP_INFEASIBLE;
        return LOOM_OK;
    }
    out->status = LOOM_ILP_OPTIMAL;
    out->objective = out->bound = best_f;
    out->choice = best;
    return LOOM_OK;
}

loom_status loom_ilp_solve_chain_dp(const loom_ilp *p, loom_ilp_solution *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    int32_t V = p->n_nodes;
    for (int32_t i = 0; i < p->n_edges; i++) {
        int32_t d = p->edges[i].u - p->edges[i].v;
        if (d != 1 && d != -1)
            return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                  "chain DP: edge %d joins nodes %d and %d, not neighbours", i,
                                  p->edges[i].u, p->edges[i].v);
    }
    if (V == 0) {
        out->status = LOOM_ILP_OPTIMAL;
        return LOOM_OK;
    }
    int64_t total = 0;
    for (int32_t v = 0; v < V; v++) total += p->nodes[v].k;
    double *F = malloc((size_t)total * sizeof(double));
    int32_t *back = malloc((size_t)total * sizeof(int32_t));
    int64_t *base = malloc((size_t)V * sizeof(int64_t));
    int32_t *x = malloc((size_t)V * sizeof(int32_t));
    if (!F || !back || !base || !x) {
        free(F), free(back), free(base), free(x);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory in chain DP");
    }
    for (int32_t v = 0, b = 0; v < V; b += p->nodes[v].k, v++) base[v] = b;
    for (int32_t j = 0; j < p->nodes[0].k; j++) F[j] = p->nodes[0].cost[j], back[j] = -1;
    for (int32_t v = 1; v < V; v++) {
        const loom_ilp_node *a = &p->nodes[v - 1], *b = &p->nodes[v];
        for (int32_t j = 0; j < b->k; j++) {
            double best = INFINITY;
            int32_t arg = 0;
            for (int32_t l = 0; l < a->k; l++) {
                double f = F[base[v - 1] + l];
                for (int32_t i = 0; i < p->n_edges; i++) {
                    const loom_ilp_edge *e = &p->edges[i];
                    if (e->u == v - 1 && e->v == v)
                        f += e->R[(int64_t)e->cu[l] * e->kv + e->cv[j]];
                    else if (e->u == v && e->v == v - 1)
                        f += e->R[(int64_t)e->cu[j] * e->kv + e->cv[l]];
                }
                if (f < best) best = f, arg = l;
            }
            F[base[v] + j] = best + b->cost[j];
            back[base[v] + j] = arg;
        }
    }
    double best = INFINITY;
    for (int32_t j = 0; j < p->nodes[V - 1].k; j++)
        if (F[base[V - 1] + j] < best) best = F[base[V - 1] + j], x[V - 1] = j;
    for (int32_t v = V - 1; v > 0; v--) x[v - 1] = back[base[v] + x[v]];
    free(F), free(back), free(base);
    out->status = LOOM_ILP_OPTIMAL;
    out->choice = x;
    out->objective = out->bound = loom_ilp_objective(p, x);
    return LOOM_OK;
}
