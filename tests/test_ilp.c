/*
 * test_ilp.c — the GLPK sharding ILP (solver/ilp.h) against exact
 * references: brute force on many small random problems (random costs,
 * classes, cycles, parallel and self edges, memory budgets), the chain DP on
 * longer random chains, a hand-solved instance, infeasible budgets, the
 * LP-file writer and GLPK's fatal-error path.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "solver/ilp.h"
#include "tests/check.h"

static uint64_t rng_state;
static uint64_t rnd(void)   /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rint_(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }
static double runif(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

/* A random problem: V nodes, up to E edges between random (possibly equal)
 * nodes with random class maps; costs in [0, 1) scaled by `scale`. */
static loom_ilp *random_problem(int V, int E, bool chain, double scale, bool with_mem)
{
    loom_ilp *p;
    loom_error err;
    CHECK(loom_ilp_create(&p, &err) == LOOM_OK);
    int k[16];
    for (int v = 0; v < V; v++) {
        k[v] = rint_(1, chain ? 6 : 4);
        double c[8], m[8];
        for (int i = 0; i < k[v]; i++) c[i] = scale * runif(), m[i] = (double)rint_(1, 100);
        CHECK(loom_ilp_add_node(p, k[v], c, with_mem ? m : NULL, NULL, &err) == LOOM_OK);
    }
    for (int e = 0; e < E; e++) {
        int u, v;
        if (chain) {
            u = rint_(0, V - 2), v = u + 1;
            if (rnd() & 1) u = v, v = u - 1;
        } else {
            u = rint_(0, V - 1), v = rint_(0, V - 1);
        }
        int ku = rint_(1, k[u]), kv = rint_(1, k[v]);
        int32_t cu[8], cv[8];
        for (int i = 0; i < k[u]; i++) cu[i] = rint_(0, ku - 1);
        for (int i = 0; i < k[v]; i++) cv[i] = rint_(0, kv - 1);
        double R[64];
        for (int i = 0; i < ku * kv; i++) R[i] = scale * runif();
        CHECK(loom_ilp_add_edge(p, u, v, ku, cu, kv, cv, R, &err) == LOOM_OK);
    }
    return p;
}

static void property_vs_brute(void)
{
    int agree = 0, infeasible = 0, cases = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        rng_state = seed;
        int V = rint_(1, 7), E = rint_(0, 10);
        /* costs of seconds-like magnitude in some cases (GLPK's tolerances
         * are absolute; the solver must rescale) */
        double scale = (seed % 3 == 0) ? 1e-6 : 1.0;
        bool mem = seed % 2 == 0;
        loom_ilp *p = random_problem(V, E, false, scale, mem);
        double budget = 0;
        if (mem) budget = 30.0 * V * runif() + 20.0 * V;   /* sometimes infeasible */
        loom_error err;
        loom_ilp_solution bs, gs;
        CHECK(loom_ilp_solve_brute(p, budget, 10000000, &bs, &err) == LOOM_OK);
        loom_ilp_opts o;
        loom_ilp_opts_init(&o);
        o.memory_budget = budget;
        o.no_reduce = seed % 4 == 1;   /* the reduction applies without a budget */
        loom_status st = loom_ilp_solve_glpk(p, &o, &gs, &err);
        CHECK_INT_EQ(st, LOOM_OK);
        if (st) fprintf(stderr, "seed %llu: %s\n", (unsigned long long)seed, err.msg);
        cases++;
        CHECK_INT_EQ(gs.status, bs.status);
        if (bs.status == LOOM_ILP_INFEASIBLE) {
            infeasible++;
            CHECK(gs.choice == NULL);
        } else if (gs.choice) {
            CHECK_NEAR_REL(gs.objective, bs.objective, 1e-7);
            if (budget > 0) CHECK(loom_ilp_memory(p, gs.choice) <= budget);
            /* the reported objective is that of the returned assignment */
            CHECK_NEAR_REL(loom_ilp_objective(p, gs.choice), gs.objective, 1e-12);
            if (gs.objective <= bs.objective * (1 + 1e-7) + 1e-300) agree++;
            else fprintf(stderr, "seed %llu: glpk %.12g brute %.12g\n", (unsigned long long)seed,
                         gs.objective, bs.objective);
        }
        loom_ilp_solution_free(&bs);
        loom_ilp_solution_free(&gs);
        loom_ilp_destroy(p);
    }
    printf("random problems: %d, ILP = brute force on %d feasible, %d infeasible\n", cases, agree,
           infeasible);
    CHECK(infeasible > 5 && infeasible < cases - 100);   /* the generator covers both */
    CHECK_INT_EQ(agree + infeasible, cases);
}

static void property_vs_chain_dp(void)
{
    for (uint64_t seed = 1000; seed < 1040; seed++) {
        rng_state = seed;
        int V = rint_(2, 14), E = rint_(V - 1, 2 * V);
        loom_ilp *p = random_problem(V, E, true, seed % 2 ? 1e-5 : 3.0, false);
        loom_error err;
        loom_ilp_solution ds, gs;
        CHECK(loom_ilp_solve_chain_dp(p, &ds, &err) == LOOM_OK);
        loom_ilp_opts o;
        loom_ilp_opts_init(&o);
        o.no_reduce = seed % 2 == 0;
        CHECK(loom_ilp_solve_glpk(p, &o, &gs, &err) == LOOM_OK);
        CHECK_INT_EQ(gs.status, LOOM_ILP_OPTIMAL);
        CHECK_NEAR_REL(gs.objective, ds.objective, 1e-7);
        if (!o.no_reduce) CHECK_INT_EQ(gs.core_vars, 0);   /* a chain reduces away */
        if (V <= 7) {   /* the DP itself against brute force */
            loom_ilp_solution bs;
            CHECK(loom_ilp_solve_brute(p, 0, 10000000, &bs, &err) == LOOM_OK);
            CHECK_NEAR_REL(ds.objective, bs.objective, 1e-12);
            loom_ilp_solution_free(&bs);
        }
        loom_ilp_solution_free(&ds);
        loom_ilp_solution_free(&gs);
        loom_ilp_destroy(p);
    }
}

/* Two nodes, two choices each, one edge: the optimum by hand. Node costs
 * a = (1, 3), b = (4, 1); edge cost 0 on equal choices, 5 otherwise:
 * (0,0) = 5, (0,1) = 7, (1,0) = 12, (1,1) = 4 -> (1,1), 4. */
static void hand_instance(void)
{
    loom_ilp *p;
    loom_error err;
    CHECK(loom_ilp_create(&p, &err) == LOOM_OK);
    double a[2] = {1, 3}, b[2] = {4, 1}, R[4] = {0, 5, 5, 0};
    int32_t id = (int32_t)-7, cls[2] = {0, 1};
    CHECK(loom_ilp_add_node(p, 2, a, NULL, &id, &err) == LOOM_OK);
    CHECK_INT_EQ(id, 0);
    CHECK(loom_ilp_add_node(p, 2, b, NULL, &id, &err) == LOOM_OK);
    CHECK(loom_ilp_add_edge(p, 0, 1, 2, cls, 2, cls, R, &err) == LOOM_OK);
    loom_ilp_solution s;
    /* reduced: a chain of two is solved by elimination alone */
    CHECK(loom_ilp_solve_glpk(p, NULL, &s, &err) == LOOM_OK);
    CHECK_INT_EQ(s.status, LOOM_ILP_OPTIMAL);
    CHECK_NEAR_REL(s.objective, 4.0, 1e-12);
    CHECK_INT_EQ(s.choice[0], 1);
    CHECK_INT_EQ(s.choice[1], 1);
    CHECK_INT_EQ(s.core_vars, 0);
    CHECK(s.n_vars >= 4);   /* the model it stands for */
    loom_ilp_solution_free(&s);
    /* GLPK on the whole problem */
    loom_ilp_opts whole;
    loom_ilp_opts_init(&whole);
    whole.no_reduce = true;
    CHECK(loom_ilp_solve_glpk(p, &whole, &s, &err) == LOOM_OK);
    CHECK_NEAR_REL(s.objective, 4.0, 1e-12);
    CHECK(s.n_vars >= 4 && s.n_cons >= 2);
    CHECK(s.gap == 0);
    loom_ilp_solution_free(&s);

    /* bad edges are refused with a message */
    int32_t badcls[2] = {0, 2};
    CHECK(loom_ilp_add_edge(p, 0, 1, 2, badcls, 2, cls, R, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "class map");
    CHECK(loom_ilp_add_edge(p, 0, 5, 2, cls, 2, cls, R, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "no such node");

    /* memory: choice 1 of node 0 needs 10 bytes, the others 1; a budget of
     * 5 forces node 0 to choice 0: best (0,0) = 5. A budget of 1 is infeasible. */
    loom_ilp_destroy(p);
    CHECK(loom_ilp_create(&p, &err) == LOOM_OK);
    double ma[2] = {1, 10}, mb[2] = {1, 1};
    CHECK(loom_ilp_add_node(p, 2, a, ma, NULL, &err) == LOOM_OK);
    CHECK(loom_ilp_add_node(p, 2, b, mb, NULL, &err) == LOOM_OK);
    CHECK(loom_ilp_add_edge(p, 0, 1, 2, cls, 2, cls, R, &err) == LOOM_OK);
    loom_ilp_opts o;
    loom_ilp_opts_init(&o);
    o.memory_budget = 5;
    CHECK(loom_ilp_solve_glpk(p, &o, &s, &err) == LOOM_OK);
    CHECK_INT_EQ(s.status, LOOM_ILP_OPTIMAL);
    CHECK_NEAR_REL(s.objective, 5.0, 1e-12);
    loom_ilp_solution_free(&s);
    o.memory_budget = 1;
    CHECK(loom_ilp_solve_glpk(p, &o, &s, &err) == LOOM_OK);
    CHECK_INT_EQ(s.status, LOOM_ILP_INFEASIBLE);
    CHECK(s.choice == NULL);
    CHECK(strcmp(loom_ilp_status_name(s.status), "infeasible") == 0);

    /* the LP file: written atomically, CPLEX LP text */
    char path[256];
    snprintf(path, sizeof path, "/tmp/loom_test_ilp_%ld.lp", (long)getpid());
    o.memory_budget = 0;
    o.no_reduce = true;
    o.lp_path = path;
    CHECK(loom_ilp_solve_glpk(p, &o, &s, &err) == LOOM_OK);
    loom_ilp_solution_free(&s);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        char buf[4096] = {0};
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        CHECK_STR_CONTAINS(buf, "Minimize");
        CHECK_STR_CONTAINS(buf, "Generals");
        CHECK_STR_CONTAINS(buf, "s0_1");   /* columns are named after node and choice */
        remove(path);
    }
    o.lp_path = "/nonexistent-dir/x.lp";
    CHECK(loom_ilp_solve_glpk(p, &o, &s, &err) == LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent-dir/x.lp");

    /* GLPK's fatal error comes back as a loom error, and GLPK works after */
    o.lp_path = NULL;
    loom_ilp_glpk_fault_next = 1;
    CHECK(loom_ilp_solve_glpk(p, &o, &s, &err) == LOOM_ERR_SOLVER);
    CHECK_STR_CONTAINS(err.msg, "GLPK fatal error");
    CHECK_STR_CONTAINS(err.msg, "glp_set_col_kind");
    CHECK(loom_ilp_solve_glpk(p, &o, &s, &err) == LOOM_OK);
    CHECK_NEAR_REL(s.objective, 4.0, 1e-12);
    loom_ilp_solution_free(&s);
    loom_ilp_destroy(p);
    loom_ilp_destroy(NULL);
}

/* A problem GLPK needs far more than 5 ms for (15 nodes of 6 choices, 50
 * random edges: about 0.3 s): stopped by the time limit it returns a
 * feasible assignment whose bound lies below the true optimum. */
static void time_limit(void)
{
    rng_state = 4242;
    loom_ilp *p;
    loom_error err;
    CHECK(loom_ilp_create(&p, &err) == LOOM_OK);
    for (int v = 0; v < 15; v++) {
        double c[6];
        for (int i = 0; i < 6; i++) c[i] = runif();
        CHECK(loom_ilp_add_node(p, 6, c, NULL, NULL, &err) == LOOM_OK);
    }
    int32_t id[6] = {0, 1, 2, 3, 4, 5};
    for (int k = 0; k < 50; k++) {
        int u = rint_(0, 14), v = rint_(0, 14);
        double R[36];
        for (int i = 0; i < 36; i++) R[i] = runif();
        CHECK(loom_ilp_add_edge(p, u, v, 6, id, 6, id, R, &err) == LOOM_OK);
    }
    loom_ilp_opts o;
    loom_ilp_opts_init(&o);
    o.no_reduce = true;   /* GLPK itself must be stopped */
    loom_ilp_solution full, quick;
    CHECK(loom_ilp_solve_glpk(p, &o, &full, &err) == LOOM_OK);
    CHECK_INT_EQ(full.status, LOOM_ILP_OPTIMAL);
    o.time_limit_s = 0.005;
    CHECK(loom_ilp_solve_glpk(p, &o, &quick, &err) == LOOM_OK);
    CHECK(quick.status == LOOM_ILP_FEASIBLE || quick.status == LOOM_ILP_OPTIMAL);
    printf("time limit 5 ms: %s, objective %.6f (optimum %.6f), bound %.6f, gap %.3g\n",
           loom_ilp_status_name(quick.status), quick.objective, full.objective, quick.bound, quick.gap);
    CHECK(quick.choice != NULL);
    if (quick.choice) CHECK_NEAR_REL(loom_ilp_objective(p, quick.choice), quick.objective, 1e-12);
    CHECK(quick.objective >= full.objective * (1 - 1e-9));
    CHECK(quick.bound <= full.objective * (1 + 1e-9));
    CHECK(quick.bound >= loom_ilp_trivial_bound(p) - 1e-12);
    CHECK_NEAR_REL(quick.gap * quick.objective, quick.objective - quick.bound, 1e-9);
    if (quick.status == LOOM_ILP_OPTIMAL) CHECK_NEAR_REL(quick.objective, full.objective, 1e-9);
    /* the local search alone: feasible, no better than the optimum */
    int32_t x[15];
    CHECK(loom_ilp_local_search(p, 0, x));
    CHECK(loom_ilp_objective(p, x) >= full.objective * (1 - 1e-9));
    loom_ilp_solution_free(&full);
    loom_ilp_solution_free(&quick);
    loom_ilp_destroy(p);
}

int main(void)
{
    time_limit();
    hand_instance();
    property_vs_brute();
    property_vs_chain_dp();
    return check_done();
}
