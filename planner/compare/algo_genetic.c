/*
 * algo_genetic.c — `genetic`: a steady-state genetic algorithm over the
 * grid's Megatron-style space (mspace.h), seeded and deterministic.
 *
 * GENOME. A point is seven genes: tp, pp, micro-batch, vpp, recompute, ZeRO,
 * cp (dp follows from tp · cp · pp). Not every combination is a valid point
 * (degrees must divide the GPUs, layers and batch), so a child is REPAIRED
 * to the valid point sharing the most genes with it (ties: the first in
 * enumeration order) — the repair never leaves the grid's space.
 *
 * LOOP (after Goldberg 1989, "steady state" replacement as in Whitley's
 * GENITOR):
 *   population   POP points drawn without replacement (seeded);
 *   selection    binary tournament (the better by loom_algo_better);
 *   crossover    uniform: each gene from either parent with probability ½;
 *   mutation     each gene redrawn from its observed values with
 *                probability 1/7 (one gene per child on average);
 *   replacement  the child replaces the worst member when it is better and
 *                not already present.
 * Scores are memoised by point, so max_evals counts distinct points. The
 * run stops at max_evals, at the time budget, or when STALL children in a
 * row brought no unseen point (the space, or its reachable part, is
 * exhausted).
 *
 * Fitness is the shared evaluator's order: feasible plans by the objective,
 * infeasible ones by memory, so the population climbs towards "fits" first.
 */
#include <stdlib.h>
#include <string.h>

#include "planner/compare/mspace.h"

#define POP 12
#define STALL 400
#define N_GENES 7

typedef struct {
    loom_algo_ctx *ctx;
    const loom_mspace *sp;
    loom_algo_result *out;
    loom_algo_score *score;   /* [n] memo */
    bool *seen;               /* [n] */
    int64_t vals[N_GENES][32];
    int n_vals[N_GENES];
    uint64_t rng;
    loom_search_config cfg;   /* scratch */
} ga;

static int64_t gene(const loom_parallel *p, int k)
{
    switch (k) {
    case 0: return p->tp;
    case 1: return p->pp;
    case 2: return p->mbs;
    case 3: return p->vpp;
    case 4: return (int64_t)p->recompute;
    case 5: return p->zero;
    default: return p->cp;
    }
}

/* The distinct values each gene takes in the space, in first-seen order. */
static void collect_values(ga *x)
{
    for (int k = 0; k < N_GENES; k++) x->n_vals[k] = 0;
    for (int64_t i = 0; i < x->sp->n; i++)
        for (int k = 0; k < N_GENES; k++) {
            int64_t v = gene(&x->sp->points[i], k);
            int j = 0;
            while (j < x->n_vals[k] && x->vals[k][j] != v) j++;
            if (j == x->n_vals[k] && j < 32) x->vals[k][x->n_vals[k]++] = v;
        }
}

/* The valid point with the most genes equal to g (first on ties). */
static int64_t repair(const ga *x, const int64_t *g)
{
    int64_t best = 0;
    int best_match = -1;
    for (int64_t i = 0; i < x->sp->n && best_match < N_GENES; i++) {
        int m = 0;
        for (int k = 0; k < N_GENES; k++) m += gene(&x->sp->points[i], k) == g[k];
        if (m > best_match) best_match = m, best = i;
    }
    return best;
}

/* Score of point i (evaluated once). */
static loom_status fitness(ga *x, int64_t i, loom_error *err)
{
    if (x->seen[i]) return LOOM_OK;
    loom_status s = loom_mspace_eval(x->ctx, &x->sp->points[i], &x->cfg, &x->score[i], err);
    if (s) return s;
    x->seen[i] = true;
    loom_algo_offer(x->out, &x->cfg, &x->score[i]);
    return LOOM_OK;
}

static int64_t tournament(ga *x, const int64_t *pop, int n)
{
    int64_t a = pop[loom_algo_rand_below(&x->rng, n)], b = pop[loom_algo_rand_below(&x->rng, n)];
    return loom_algo_better(&x->score[b], &x->score[a]) ? b : a;
}

static loom_status evolve(ga *x, loom_error *err)
{
    const loom_algo_request *req = loom_algo_ctx_request(x->ctx);
    const int64_t n = x->sp->n, budget = req->max_evals;
    int64_t pop[POP];
    int np = 0;
    loom_status s = LOOM_OK;

    /* initial population: distinct points in seeded order */
    for (int64_t tries = 0; np < POP && np < n && tries < 64 * POP; tries++) {
        int64_t i = loom_algo_rand_below(&x->rng, n);
        bool dup = false;
        for (int k = 0; k < np; k++) dup |= pop[k] == i;
        if (dup) continue;
        if (loom_algo_ctx_evals(x->ctx) >= budget || loom_algo_ctx_stop(x->ctx)) return LOOM_OK;
        if ((s = fitness(x, i, err))) return s;
        pop[np++] = i;
    }
    for (int stall = 0; np > 0 && stall < STALL;) {
        if (loom_algo_ctx_evals(x->ctx) >= budget || loom_algo_ctx_stop(x->ctx)) break;
        const loom_parallel *a = &x->sp->points[tournament(x, pop, np)];
        const loom_parallel *b = &x->sp->points[tournament(x, pop, np)];
        int64_t g[N_GENES];
        for (int k = 0; k < N_GENES; k++) {
            g[k] = loom_algo_rand_below(&x->rng, 2) ? gene(b, k) : gene(a, k);
            if (loom_algo_rand_below(&x->rng, N_GENES) == 0)
                g[k] = x->vals[k][loom_algo_rand_below(&x->rng, x->n_vals[k])];
        }
        int64_t child = repair(x, g);
        bool fresh = !x->seen[child];
        if ((s = fitness(x, child, err))) return s;
        stall = fresh ? 0 : stall + 1;
        bool present = false;
        int worst = 0;
        for (int k = 0; k < np; k++) {
            present |= pop[k] == child;
            if (loom_algo_better(&x->score[pop[worst]], &x->score[pop[k]])) worst = k;
        }
        if (!present && loom_algo_better(&x->score[child], &x->score[pop[worst]]))
            pop[worst] = child;
    }
    return LOOM_OK;
}

static loom_status genetic_run(loom_algo_ctx *ctx, loom_algo_result *out, loom_error *err)
{
    ga *x = calloc(1, sizeof *x);
    if (!x) return loom_error_set(err, LOOM_ERR_NOMEM, "genetic: out of memory");
    loom_mspace sp;
    loom_status s = loom_mspace_build(ctx, &sp, err);
    if (s) {
        free(x);
        return s;
    }
    out->space = sp.n;
    x->ctx = ctx, x->sp = &sp, x->out = out;
    x->rng = loom_algo_ctx_request(ctx)->seed;
    x->score = calloc((size_t)sp.n + 1, sizeof *x->score);
    x->seen = calloc((size_t)sp.n + 1, sizeof *x->seen);
    if (!x->score || !x->seen) s = loom_error_set(err, LOOM_ERR_NOMEM, "genetic: out of memory");
    if (!s) {
        collect_values(x);
        s = evolve(x, err);
    }
    free(x->score);
    free(x->seen);
    free(x);
    loom_mspace_free(&sp);
    return s;
}

const loom_algo loom_algo_genetic = {
    .name = "genetic",
    .summary = "seeded steady-state genetic algorithm over the grid's space (max_evals points)",
    .run = genetic_run,
};
