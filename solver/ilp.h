/*
 * ilp.h — the intra-operator sharding problem in abstract form, and its
 * solvers: GLPK (ilp_glpk.c), brute force and a chain DP (exact.c).
 *
 * THE PROBLEM (docs/design.md §5)
 *
 * Nodes v = 0..V-1 each pick one choice i out of k_v, at cost c_v[i] (seconds)
 * and memory m_v[i] (bytes). Edges (u, v) add a cost that depends on the
 * pair of choices — but only through two CLASSES: choice i of u maps to class
 * cu[i] in 0..K_u-1, choice j of v to class cv[j] in 0..K_v-1, and the edge
 * costs R[cu[i]][cv[j]]. (A class is the sharding spec of the tensor the edge
 * carries: many strategies of an op share the spec of one operand, so the
 * edge matrix is over distinct specs, not strategies.) The objective is
 *
 *     minimise   Σ_v c_v[x_v]  +  Σ_(u,v) R_uv[cu(x_u)][cv(x_v)]
 *     subject to Σ_v m_v[x_v] ≤ M            (optional memory budget)
 *
 * As an integer program (the transportation form of Alpa, OSDI '22, §4.2,
 * aggregated by class): one-hot s_v[i] per node, e_uv[p][q] ≥ 0 per edge and
 * class pair,
 *
 *     minimise   Σ_v Σ_i c_v[i] s_v[i] + Σ_uv Σ_pq R_uv[p][q] e_uv[p][q]
 *     s.t.       Σ_i s_v[i] = 1
 *                Σ_q e_uv[p][q] = Σ_{i: cu[i]=p} s_u[i]      (row sums)
 *                Σ_p e_uv[p][q] = Σ_{j: cv[j]=q} s_v[j]      (column sums)
 *                Σ_v Σ_i m_v[i] s_v[i] ≤ M
 *                s binary, e continuous.
 * Given binary s, the row sums of e are the unit vector of u's class and the
 * column sums that of v's class, so e is forced to the single cell
 * [cu(x_u)][cv(x_v)]: e need not be integer, and the LP relaxation of this
 * form is tight on chains and trees (often integral on general graphs).
 *
 * Edges may form cycles (the periodic boundary of a shared layer) and may
 * join a node to itself (u == v: then only the diagonal of the choice pair
 * counts, R[cu(i)][cv(i)]; the builder folds such edges into c_v).
 *
 * Units: seconds for costs, bytes for memory.
 */
#ifndef LOOM_ILP_H
#define LOOM_ILP_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"

typedef struct loom_ilp loom_ilp;

typedef enum {
    LOOM_ILP_OPTIMAL,      /* proven optimal (gap 0 within GLPK's tolerance) */
    LOOM_ILP_FEASIBLE,     /* time limit hit: best found, gap reported */
    LOOM_ILP_INFEASIBLE,   /* no choice satisfies the memory budget */
} loom_ilp_status;

const char *loom_ilp_status_name(loom_ilp_status s);   /* "optimal", "feasible", "infeasible" */

loom_status loom_ilp_create(loom_ilp **out, loom_error *err);
void loom_ilp_destroy(loom_ilp *p);

/* Adds a node with k choices; cost[k] seconds, mem[k] bytes (mem NULL = 0).
 * Returns its id in *id. */
loom_status loom_ilp_add_node(loom_ilp *p, int32_t k, const double *cost, const double *mem,
                              int32_t *id, loom_error *err);

/* Adds an edge u -> v: cu[k_u] and cv[k_v] map choices to classes in
 * [0, ku_cls) and [0, kv_cls); R is ku_cls × kv_cls, row-major. u == v is
 * folded into the node's costs (diagonal). Arrays are copied. */
loom_status loom_ilp_add_edge(loom_ilp *p, int32_t u, int32_t v, int32_t ku_cls,
                              const int32_t *cu, int32_t kv_cls, const int32_t *cv,
                              const double *R, loom_error *err);

int32_t loom_ilp_num_nodes(const loom_ilp *p);
int32_t loom_ilp_node_choices(const loom_ilp *p, int32_t v);

/* Objective and memory of a full assignment x[V]. */
double loom_ilp_objective(const loom_ilp *p, const int32_t *x);
double loom_ilp_memory(const loom_ilp *p, const int32_t *x);

/* A good feasible assignment fast (iterated conditional modes): start from
 * every node's cheapest choice (its least-memory one under a budget), then
 * move one node at a time to the choice that lowers the objective most while
 * the budget holds, until no move helps. Fills x[V]; false when even the
 * least-memory assignment exceeds the budget (budget 0 = none). */
bool loom_ilp_local_search(const loom_ilp *p, double memory_budget, int32_t *x);
/* A lower bound on the objective: Σ_v min c_v + Σ_e min R_e. */
double loom_ilp_trivial_bound(const loom_ilp *p);

typedef struct {
    double time_limit_s;        /* GLPK wall-clock limit (default 10) */
    double memory_budget;       /* bytes; 0 = none */
    const char *lp_path;        /* non-NULL: write the model in CPLEX LP format there */
    bool no_reduce;             /* give GLPK the whole problem (see below) */
} loom_ilp_opts;

void loom_ilp_opts_init(loom_ilp_opts *o);

typedef struct {
    loom_ilp_status status;
    double objective;           /* Σ costs of the returned assignment */
    double bound;               /* best lower bound (= objective when optimal) */
    double gap;                 /* (objective - bound) / max(|objective|, 1e-12) */
    double solve_time_s;
    int32_t n_vars, n_cons;     /* size of the integer program (transportation form) */
    int32_t core_vars, core_cons;   /* what GLPK solved after elimination (0: nothing left) */
    int32_t *choice;            /* [V]: chosen choice per node (malloc; free with
                                   loom_ilp_solution_free); NULL when infeasible */
} loom_ilp_solution;

void loom_ilp_solution_free(loom_ilp_solution *s);

/* GLPK glp_intopt on the transportation form: presolve on, time limit, MIP
 * gap 0, terminal output off. Without a memory budget, nodes with at most
 * two neighbours are first eliminated exactly (ilp_reduce.c: variable
 * elimination, as dynamic programming does on chains) and GLPK solves the
 * remaining core (core_vars / core_cons; n_vars / n_cons stay the whole
 * model's, which lp_path receives). A problem that reduces to nothing needs
 * no GLPK call. GLPK's fatal errors come back as
 * LOOM_ERR_SOLVER. When the time limit stops the search, the better of
 * GLPK's incumbent and loom_ilp_local_search's assignment is returned as
 * FEASIBLE, with the best lower bound known (GLPK's best open node, or
 * loom_ilp_trivial_bound) and the relative gap to it. An infeasible budget
 * is LOOM_OK with status INFEASIBLE. */
loom_status loom_ilp_solve_glpk(const loom_ilp *p, const loom_ilp_opts *o, loom_ilp_solution *out,
                                loom_error *err);

/* Test hook: when set, the next GLPK solve makes a call GLPK treats as fatal,
 * to exercise the error-hook path. Used by tests only. */
extern int loom_ilp_glpk_fault_next;

/* Exact references (exact.c). Brute force enumerates every assignment
 * (fails with LOOM_ERR_LIMIT above max_assignments). The chain DP applies when
 * every edge joins node i to node i+1 (any number of parallel edges, no
 * memory budget): O(Σ k_i · k_{i+1}); LOOM_ERR_UNSUPPORTED otherwise. */
loom_status loom_ilp_solve_brute(const loom_ilp *p, double memory_budget, int64_t max_assignments,
                                 loom_ilp_solution *out, loom_error *err);
loom_status loom_ilp_solve_chain_dp(const loom_ilp *p, loom_ilp_solution *out, loom_error *err);

#endif
