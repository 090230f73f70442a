/*
 * test_stage_dp.c — the inter-op stage DP against brute force.
 *
 * The reference enumerates every way to cut L ≤ 8 layers into contiguous
 * stages (2^(L-1) cut sets) and every assignment of sub-meshes to those stages
 * that uses exactly D GPUs, takes for each stage its fastest option that fits
 * in memory with the micro-batches 1F1B keeps in flight (stage i of S holds
 * min(S-i, M)), and evaluates T = Σ t_i + (M-1)·max t_i directly. Picking each
 * stage's option independently is exact because T only grows with each t_i.
 * Random cost tables (fixed seeds) cover times, memory pressure and
 * infeasible options; the DP must match the reference to rounding. So must
 * it on real tables: every layer of a small model solved by the intra-op
 * ILP on every logical mesh of every sub-mesh of one 8-GPU node.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "costs/cluster.h"
#include "base/fileio.h"
#include "graph/model.h"
#include "solver/intra.h"
#include "solver/stage_dp.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(next_u64() >> 11) / 9007199254740992.0;
}
static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1)); }

/* ---- brute force -------------------------------------------------------------- */

typedef struct {
    const loom_stage_problem *p;
    int32_t first[LOOM_STAGE_MAX], last[LOOM_STAGE_MAX];
    int32_t S;
    int32_t mesh[LOOM_STAGE_MAX];
    double best;
    int64_t best_mem;   /* min over plans of the max stage memory (least-memory option) */
} brute;

static void stage_best(const loom_stage_problem *p, int32_t i, int32_t S, int32_t k, int32_t j,
                       int32_t m, double *t_out, int64_t *minmem_out)
{
    int64_t fl = p->one_in_flight ? 1 : ((S - i) < p->micro_batches ? (S - i) : p->micro_batches);
    double bt = INFINITY;
    int64_t bm = INT64_MAX;
    for (int32_t o = 0; o < p->n_options; o++) {
        double t = 0;
        int64_t stat = 0, act = 0;
        for (int32_t l = k; l <= j; l++) {
            const loom_stage_cost *c = &p->cost[((size_t)l * p->n_meshes + m) * p->n_options + o];
            t += c->time_s;
            stat += c->static_bytes;
            act += c->act_bytes;
        }
        int64_t mem = stat + fl * act + (p->stage_bytes ? p->stage_bytes[m * p->n_options + o] : 0);
        if (t == INFINITY) continue;
        if (mem < bm) bm = mem;
        if (mem <= p->capacity_bytes && t < bt) bt = t;
    }
    *t_out = bt;
    *minmem_out = bm;
}

static void assign(brute *b, int32_t i, int64_t used)
{
    const loom_stage_problem *p = b->p;
    if (i == b->S) {
        if (used != p->devices) return;
        double sum = 0, mx = 0;
        int64_t mem = 0;
        bool ok = true;
        for (int32_t q = 0; q < b->S; q++) {
            double t;
            int64_t mm;
            stage_best(p, q, b->S, b->first[q], b->last[q], b->mesh[q], &t, &mm);
            if (mm > mem) mem = mm;
            if (t == INFINITY) ok = false;
            sum += t;
            if (t > mx) mx = t;
        }
        if (mem < b->best_mem) b->best_mem = mem;
        if (!ok) return;
        double T = sum + (double)(p->micro_batches - 1) * mx;
        if (T < b->best) b->best = T;
        return;
    }
    for (int32_t m = 0; m < p->n_meshes; m++) {
        if (used + p->mesh_devices[m] > p->devices) continue;
        b->mesh[i] = m;
        assign(b, i + 1, used + p->mesh_devices[m]);
    }
}

static void brute_solve(const loom_stage_problem *p, double *best, int64_t *best_mem)
{
    brute b = {.p = p, .best = INFINITY, .best_mem = INT64_MAX};
    int32_t L = p->n_layers;
    for (uint32_t cuts = 0; cuts < (1u << (L - 1)); cuts++) {
        b.S = 0;
        int32_t start = 0;
        for (int32_t l = 0; l < L; l++)
            if (l == L - 1 || (cuts >> l & 1)) {
                b.first[b.S] = start, b.last[b.S] = l, b.S++;
                start = l + 1;
            }
        if (p->max_stages > 0 && b.S > p->max_stages) continue;
        assign(&b, 0, 0);
    }
    *best = b.best;
    *best_mem = b.best_mem;
}

/* ---- checks on a returned solution ------------------------------------------------ */

static void check_solution(const loom_stage_problem *p, const loom_stage_solution *s)
{
    CHECK(s->n_stages >= 1);
    int32_t next = 0;
    int64_t dev = 0;
    double sum = 0, mx = 0;
    for (int32_t i = 0; i < s->n_stages; i++) {
        const loom_stage_choice *c = &s->stages[i];
        CHECK_INT_EQ(c->first, next);
        CHECK(c->last >= c->first);
        next = c->last + 1;
        dev += p->mesh_devices[c->mesh];
        int64_t fl = p->one_in_flight ? 1
                     : (s->n_stages - i < p->micro_batches ? s->n_stages - i : p->micro_batches);
        CHECK_INT_EQ(c->in_flight, fl);
        double t;
        int64_t mem;
        loom_stage_range_cost(p, c->first, c->last, c->mesh, c->option, fl, &t, &mem);
        CHECK_NEAR_REL(c->time_s, t, 1e-12);
        CHECK_INT_EQ(c->mem_bytes, mem);
        CHECK(mem <= p->capacity_bytes);
        sum += t;
        if (t > mx) mx = t;
    }
    CHECK_INT_EQ(next, p->n_layers);
    CHECK_INT_EQ(dev, p->devices);
    CHECK_NEAR_REL(s->step_s, sum + (double)(p->micro_batches - 1) * mx, 1e-12);
}

/* Solves p with the DP and compares with brute force; returns 1 when they
 * agree (both infeasible, or the same step time and a valid solution). */
static int dp_matches_brute(const loom_stage_problem *p, loom_stage_solution *sol)
{
    double ref;
    int64_t ref_mem;
    brute_solve(p, &ref, &ref_mem);
    loom_error err = {0};
    loom_status s = loom_stage_dp_solve(p, sol, &err);
    CHECK_INT_EQ(loom_stage_dp_min_memory(p), ref_mem);
    if (ref == INFINITY) {
        CHECK_INT_EQ(s, LOOM_ERR_INFEASIBLE);
        return s == LOOM_ERR_INFEASIBLE;
    }
    CHECK_INT_EQ(s, LOOM_OK);
    if (s != LOOM_OK) return 0;
    CHECK_NEAR_REL(sol->step_s, ref, 1e-9);
    check_solution(p, sol);
    return fabs(sol->step_s - ref) <= 1e-9 * ref;
}

/* ---- random problems ---------------------------------------------------------------- */

#define MAXC (8 * 8 * 4)

static void random_problem(loom_stage_problem *p, loom_stage_cost *cost, int64_t *devs,
                           int32_t L, int32_t NO, int64_t g, int64_t D, bool tight)
{
    loom_submesh sm[16];
    int32_t NM = loom_stage_submeshes(g, D, 0, sm, 16);
    for (int32_t m = 0; m < NM; m++) devs[m] = loom_submesh_devices(sm[m]);
    for (int32_t l = 0; l < L; l++) {
        double work = uniform(0.5, 3.0);   /* seconds on one GPU */
        int64_t w_bytes = irand(1, 40) << 20, a_bytes = irand(1, 20) << 20;
        for (int32_t m = 0; m < NM; m++)
            for (int32_t o = 0; o < NO; o++) {
                loom_stage_cost *c = &cost[((size_t)l * NM + m) * NO + o];
                /* Imperfect scaling with a per-entry jitter; option o trades
                 * time for memory, as recompute does. */
                double eff = uniform(0.6, 1.0);
                c->time_s = work / (double)devs[m] / eff * (1.0 + 0.3 * o);
                c->static_bytes = w_bytes / devs[m];
                c->act_bytes = a_bytes / devs[m] / (1 + 2 * o);
                if (next_u64() % 13 == 0) c->time_s = INFINITY;   /* no strategy */
            }
    }
    memset(p, 0, sizeof *p);
    p->n_layers = L, p->n_meshes = NM, p->n_options = NO;
    p->mesh_devices = devs, p->cost = cost;
    p->devices = D;
    p->micro_batches = irand(1, 12);
    p->capacity_bytes = tight ? irand(20, 120) << 20 : INT64_MAX;
}

static void test_random_vs_brute(void)
{
    int agree = 0, infeasible = 0, runs = 0;
    loom_stage_workspace *ws = NULL;
    loom_error werr = {0};
    CHECK_INT_EQ(loom_stage_workspace_create(&ws, &werr), LOOM_OK);
    for (int trial = 0; trial < 300; trial++) {
        int32_t L = (int32_t)irand(1, 8), NO = (int32_t)irand(1, 3);
        int64_t g = trial % 3 == 0 ? 2 : 4;
        int64_t D = trial % 2 ? 8 : (trial % 3 == 1 ? 4 : 2 * g);
        static loom_stage_cost cost[MAXC * 3];
        int64_t devs[16];
        loom_stage_problem p;
        random_problem(&p, cost, devs, L, NO, g, D, trial % 4 != 0);
        p.one_in_flight = trial % 7 == 0;
        static int64_t once[16 * 3];
        for (int q = 0; q < p.n_meshes * NO; q++) once[q] = irand(0, 8) << 20;
        if (trial % 3 == 2) p.stage_bytes = once;
        if (trial % 5 == 0) p.max_stages = (int32_t)irand(1, 4);
        if (trial % 2) p.ws = ws;   /* reused buffers must not change answers */
        loom_stage_solution sol;
        int ok = dp_matches_brute(&p, &sol);
        runs++;
        agree += ok;
        if (!ok)
            fprintf(stderr, "  trial %d: L %d, %d options, D %lld, M %lld\n", trial, (int)L,
                    (int)NO, (long long)D, (long long)p.micro_batches);
        else if (sol.n_stages == 0)   /* the DP said infeasible, and so did brute force */
            infeasible++;
    }
    loom_stage_workspace_destroy(ws);
    loom_stage_workspace_destroy(NULL);
    printf("stage DP vs brute force: %d agree, %d infeasible, of %d\n", agree, infeasible, runs);
    CHECK_INT_EQ(agree, runs);
    CHECK(infeasible > 5);              /* the cases exercise memory limits */
    CHECK(runs - infeasible > 150);     /* and mostly have plans */
}

/* A hand-checkable case: 4 identical layers, sub-meshes of 1, 2 and 4 GPUs,
 * 4 GPUs, M = 8, perfect scaling (1 s per layer on 1 GPU). One stage on 4 GPUs:
 * t = 1 s, T = 1 + 7·1 = 8 s; two 2-layer stages on 2 + 2 GPUs: t = 1 s each,
 * T = 2 + 7 = 9 s; four stages: 4 + 7 = 11 s. With no bubble, one stage wins. */
static void test_hand_case(void)
{
    int64_t devs[3] = {1, 2, 4};
    loom_stage_cost cost[4 * 3];
    for (int l = 0; l < 4; l++)
        for (int m = 0; m < 3; m++) cost[l * 3 + m] = (loom_stage_cost){1.0 / (double)devs[m], 0, 0};
    loom_stage_problem p = {.n_layers = 4, .n_meshes = 3, .n_options = 1, .mesh_devices = devs,
                            .cost = cost, .devices = 4, .micro_batches = 8,
                            .capacity_bytes = INT64_MAX};
    loom_stage_solution sol;
    loom_error err = {0};
    CHECK_INT_EQ(loom_stage_dp_solve(&p, &sol, &err), LOOM_OK);
    CHECK_INT_EQ(sol.n_stages, 1);
    CHECK_NEAR_REL(sol.step_s, 8.0, 1e-12);

    /* Now 4 GPUs scale badly (a 4-way stage takes 0.5 s/layer, not 0.25):
     * one stage: 2 + 7·2 = 16; two 2-layer stages on 2 GPUs: 1 + 1 + 7·1 = 9;
     * four 1-layer stages on 1 GPU: 4 + 7 = 11. Best: two stages, 9 s. */
    for (int l = 0; l < 4; l++) cost[l * 3 + 2].time_s = 0.5;
    CHECK_INT_EQ(loom_stage_dp_solve(&p, &sol, &err), LOOM_OK);
    CHECK_INT_EQ(sol.n_stages, 2);
    CHECK_NEAR_REL(sol.step_s, 9.0, 1e-12);

    /* Memory: a layer holds 6 MiB static and 2 MiB of activations per
     * micro-batch, divided over its stage's GPUs; capacity 9 MiB. One stage
     * on 4 GPUs: 4·1.5 + 1·4·0.5 = 8 MiB, fits. Two stages on 2 + 2: the
     * first holds 2 micro-batches: 1 layer → 3 + 2·1 = 5 but then the second
     * has 3 layers: 9 + 3 = 12; 2 layers → 6 + 2·2 = 10. Every plan with a
     * 1-GPU stage holding ≥ 2 micro-batches needs ≥ 6 + 2·2 = 10, and the
     * last stage alone on 1 GPU forces another stage to hold 2. So only the
     * single stage fits: 16 s, 8 MiB — also the least memory any plan needs. */
    for (int l = 0; l < 4; l++)
        for (int m = 0; m < 3; m++) {
            cost[l * 3 + m].static_bytes = (6 << 20) / devs[m];
            cost[l * 3 + m].act_bytes = (2 << 20) / devs[m];
        }
    p.capacity_bytes = 9 << 20;
    CHECK_INT_EQ(loom_stage_dp_solve(&p, &sol, &err), LOOM_OK);
    CHECK_INT_EQ(sol.n_stages, 1);
    CHECK_NEAR_REL(sol.step_s, 16.0, 1e-12);
    CHECK_INT_EQ(sol.stages[0].mem_bytes, 8 << 20);
    p.capacity_bytes = 7 << 20;
    CHECK_INT_EQ(loom_stage_dp_solve(&p, &sol, &err), LOOM_ERR_INFEASIBLE);
    CHECK_STR_CONTAINS(err.msg, "fits in");
    CHECK_INT_EQ(loom_stage_dp_min_memory(&p), 8 << 20);
}

/* The relative gap trades exactness for speed: the answer stays within it. */
static void test_gap(void)
{
    for (int trial = 0; trial < 40; trial++) {
        static loom_stage_cost cost[MAXC * 2];
        int64_t devs[16];
        loom_stage_problem p;
        random_problem(&p, cost, devs, 8, 2, 4, 8, false);
        loom_stage_solution exact, approx;
        loom_error err = {0};
        CHECK_INT_EQ(loom_stage_dp_solve(&p, &exact, &err), LOOM_OK);
        p.tmax_rel_gap = 0.05;
        CHECK_INT_EQ(loom_stage_dp_solve(&p, &approx, &err), LOOM_OK);
        CHECK(approx.step_s >= exact.step_s * (1 - 1e-12));
        CHECK(approx.step_s <= exact.step_s * 1.05 * (1 + 1e-12));
        CHECK(approx.dp_runs <= exact.dp_runs);
    }
}

/* A raised stop flag still returns a valid (incumbent) plan. */
static void test_stop(void)
{
    static loom_stage_cost cost[MAXC];
    int64_t devs[16];
    loom_stage_problem p;
    random_problem(&p, cost, devs, 8, 1, 4, 8, false);
    volatile sig_atomic_t stop = 1;
    p.stop = &stop;
    loom_stage_solution sol;
    loom_error err = {0};
    CHECK_INT_EQ(loom_stage_dp_solve(&p, &sol, &err), LOOM_OK);
    CHECK(sol.stopped);
    check_solution(&p, &sol);
}

/* Uniform mode: one sub-mesh → the stage count is D / n; matches brute force. */
static void test_single_mesh(void)
{
    for (int trial = 0; trial < 60; trial++) {
        int32_t L = (int32_t)irand(2, 8);
        int64_t n = irand(1, 2), D = n * irand(1, 4);
        if (D / n > L) continue;
        static loom_stage_cost cost[8 * 2];
        for (int32_t l = 0; l < L; l++)
            for (int32_t o = 0; o < 2; o++)
                cost[l * 2 + o] = (loom_stage_cost){uniform(0.1, 2.0), irand(1, 9), irand(1, 5)};
        int64_t devs[1] = {n};
        loom_stage_problem p = {.n_layers = L, .n_meshes = 1, .n_options = 2,
                                .mesh_devices = devs, .cost = cost, .devices = D,
                                .micro_batches = irand(1, 9), .capacity_bytes = irand(10, 60)};
        double ref;
        int64_t ref_mem;
        brute_solve(&p, &ref, &ref_mem);
        loom_stage_solution sol;
        loom_error err = {0};
        loom_status s = loom_stage_dp_solve(&p, &sol, &err);
        if (ref == INFINITY) CHECK_INT_EQ(s, LOOM_ERR_INFEASIBLE);
        else {
            CHECK_INT_EQ(s, LOOM_OK);
            CHECK_NEAR_REL(sol.step_s, ref, 1e-9);
            CHECK_INT_EQ(sol.n_stages, D / n);
            check_solution(&p, &sol);
        }
        CHECK_INT_EQ(loom_stage_dp_min_memory(&p), ref_mem);
    }
}

/* ---- sub-meshes, placement, clustering --------------------------------------------- */

static void test_submeshes(void)
{
    loom_submesh sm[32];
    int32_t n = loom_stage_submeshes(8, 32, 0, sm, 32);
    /* (1,1) (1,2) (1,4) (1,8) (2,8) (3,8) (4,8) */
    CHECK_INT_EQ(n, 7);
    int64_t want[7][2] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 8}, {3, 8}, {4, 8}};
    for (int i = 0; i < 7 && i < n; i++) {
        CHECK_INT_EQ(sm[i].nodes, want[i][0]);
        CHECK_INT_EQ(sm[i].gpus, want[i][1]);
    }
    CHECK_INT_EQ(loom_stage_submeshes(8, 4, 0, sm, 32), 3);     /* a replica inside a node */
    CHECK_INT_EQ(loom_stage_submeshes(8, 64, 2, sm, 32), 5);    /* capped at 2 nodes */
    CHECK_INT_EQ(loom_stage_submeshes(6, 12, 0, sm, 32), 4);    /* 1, 2, (1,6), (2,6) */

    int64_t lm[16][2];
    CHECK_INT_EQ(loom_stage_logical_meshes((loom_submesh){1, 8}, lm, 16), 4);
    CHECK_INT_EQ(lm[3][0], 1);
    CHECK_INT_EQ(lm[3][1], 8);
    int32_t k = loom_stage_logical_meshes((loom_submesh){2, 8}, lm, 16);
    CHECK_INT_EQ(k, 5);   /* (16,1) (8,2) (4,4) (2,8) (1,16) */
    for (int i = 0; i < k; i++) CHECK_INT_EQ(lm[i][0] * lm[i][1], 16);
    CHECK_INT_EQ(loom_stage_logical_meshes((loom_submesh){1, 6}, lm, 16), 3);   /* n1 = 1, 2, 6 */
}

static void test_place(void)
{
    for (int trial = 0; trial < 400; trial++) {
        int64_t g = trial % 2 ? 8 : 4, nodes = irand(1, 4), D = g * nodes;
        loom_submesh shapes[16];
        int32_t ns = loom_stage_submeshes(g, D, 0, shapes, 16);
        loom_submesh meshes[64];
        int32_t n = 0;
        int64_t left = D;
        while (left > 0 && n < 64) {   /* random multiset summing to D */
            loom_submesh m = shapes[irand(0, ns - 1)];
            if (loom_submesh_devices(m) > left) continue;
            if (m.gpus == g && left % g) continue;   /* whole nodes need whole-node room */
            meshes[n++] = m;
            left -= loom_submesh_devices(m);
        }
        if (left) continue;
        int64_t first[64];
        loom_error err = {0};
        loom_status s = loom_stage_place(meshes, n, g, D, first, &err);
        if (s) fprintf(stderr, "place failed: %s\n", err.msg);
        CHECK_INT_EQ(s, LOOM_OK);
        unsigned char used[64] = {0};
        for (int32_t i = 0; i < n && s == LOOM_OK; i++) {
            int64_t size = loom_submesh_devices(meshes[i]);
            CHECK(first[i] >= 0 && first[i] + size <= D);
            if (meshes[i].gpus < g) CHECK_INT_EQ(first[i] / g, (first[i] + size - 1) / g);
            else CHECK_INT_EQ(first[i] % g, 0);
            for (int64_t q = first[i]; q < first[i] + size; q++) {
                CHECK(!used[q]);
                used[q] = 1;
            }
        }
    }
    loom_submesh bad[2] = {{1, 4}, {1, 3}};
    int64_t first[2];
    loom_error err = {0};
    CHECK_INT_EQ(loom_stage_place(bad, 2, 8, 8, first, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "(1, 3)");
}

static void test_cluster(void)
{
    for (int trial = 0; trial < 200; trial++) {
        int32_t n = (int32_t)irand(1, 12), K = (int32_t)irand(1, 6);
        double w[12];
        for (int32_t i = 0; i < n; i++) w[i] = uniform(0.1, 5.0);
        int32_t first[13];
        int32_t k = loom_stage_cluster(w, n, K, first);
        CHECK_INT_EQ(k, n < K ? n : K);
        CHECK_INT_EQ(first[0], 0);
        CHECK_INT_EQ(first[k], n);
        double got = 0;
        for (int32_t c = 0; c < k; c++) {
            CHECK(first[c + 1] > first[c]);
            double s = 0;
            for (int32_t i = first[c]; i < first[c + 1]; i++) s += w[i];
            got += s * s;
        }
        /* brute force over all cut sets with exactly k clusters */
        double best = INFINITY;
        for (uint32_t cuts = 0; cuts < (1u << (n - 1)); cuts++) {
            if (__builtin_popcount(cuts) != k - 1) continue;
            double tot = 0, s = 0;
            for (int32_t i = 0; i < n; i++) {
                s += w[i];
                if (i == n - 1 || (cuts >> i & 1)) tot += s * s, s = 0;
            }
            if (tot < best) best = tot;
        }
        CHECK_NEAR_REL(got, best, 1e-12);
    }
    /* 130 identical layers into 32 clusters: sizes 4 or 5, never further apart. */
    double w[130];
    for (int i = 0; i < 130; i++) w[i] = 1.0;
    int32_t first[131];
    CHECK_INT_EQ(loom_stage_cluster(w, 130, 32, first), 32);
    for (int c = 0; c < 32; c++) CHECK(first[c + 1] - first[c] == 4 || first[c + 1] - first[c] == 5);
}

/* Beyond 1024 layers the clustering takes the divide-and-conquer route
 * (stage_dp.c cluster_row): its cuts must cost what the plain O(k n^2)
 * scan's optimum costs, on random and on uniform weights. */
static double cluster_cost(const double *w, const int32_t *first, int32_t k)
{
    double sum = 0;
    for (int32_t c = 0; c < k; c++) {
        double seg = 0;
        for (int32_t i = first[c]; i < first[c + 1]; i++) seg += w[i];
        sum += seg * seg;
    }
    return sum;
}

static double scan_optimum(const double *w, int32_t n, int32_t k)
{
    double *C = malloc(sizeof *C * (size_t)(k + 1) * (size_t)(n + 1)), *pre = malloc(sizeof *pre * (size_t)(n + 1));
    pre[0] = 0;
    for (int32_t i = 0; i < n; i++) pre[i + 1] = pre[i] + w[i];
    for (size_t q = 0; q < (size_t)(k + 1) * (size_t)(n + 1); q++) C[q] = INFINITY;
    C[0] = 0;
    for (int32_t c = 1; c <= k; c++)
        for (int32_t i = c; i <= n; i++)
            for (int32_t j = c - 1; j < i; j++) {
                double v = C[(size_t)(c - 1) * (size_t)(n + 1) + (size_t)j] + (pre[i] - pre[j]) * (pre[i] - pre[j]);
                if (v < C[(size_t)c * (size_t)(n + 1) + (size_t)i]) C[(size_t)c * (size_t)(n + 1) + (size_t)i] = v;
            }
    double best = C[(size_t)k * (size_t)(n + 1) + (size_t)n];
    free(C);
    free(pre);
    return best;
}

static void test_cluster_large(void)
{
    const int32_t n = 1500;
    double *w = malloc(sizeof *w * n);
    int32_t *first = malloc(sizeof *first * (n + 1));
    uint64_t x = 12345;
    for (int round = 0; round < 3; round++) {
        for (int32_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            w[i] = round == 0 ? 1.0 : round == 1 ? 1.0 + (double)(x % 1000) : (i % 7 == 0 ? 50.0 : 1.0);
        }
        const int32_t ks[] = {3, 17, 64};
        for (int t = 0; t < 3; t++) {
            int32_t k = loom_stage_cluster(w, n, ks[t], first);
            CHECK_INT_EQ(k, ks[t]);
            CHECK_INT_EQ(first[0], 0);
            CHECK_INT_EQ(first[k], n);
            for (int32_t c = 0; c < k; c++) CHECK(first[c] < first[c + 1]);
            double got = cluster_cost(w, first, k), want = scan_optimum(w, n, ks[t]);
            CHECK(fabs(got - want) <= 1e-9 * want);
        }
    }
    free(w);
    free(first);
}

static void test_bad_problem(void)
{
    loom_stage_problem p = {0};
    loom_stage_solution sol;
    loom_error err = {0};
    CHECK_INT_EQ(loom_stage_dp_solve(&p, &sol, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "0 layers");
    int64_t devs[1] = {3};
    loom_stage_cost cost[1] = {{1.0, 0, 0}};
    p = (loom_stage_problem){.n_layers = 1, .n_meshes = 1, .n_options = 1, .mesh_devices = devs,
                             .cost = cost, .devices = 4, .micro_batches = 1,
                             .capacity_bytes = INT64_MAX};
    CHECK_INT_EQ(loom_stage_dp_solve(&p, &sol, &err), LOOM_ERR_INFEASIBLE);   /* 3 ∤ 4 */
    CHECK_STR_CONTAINS(err.msg, "multiples of 3");
}

/* ---- real ILP costs ------------------------------------------------------------------ */

/* Fills a cost table for graph g on one node of cluster c: per layer, per
 * sub-mesh, per logical mesh: the ILP's time, its parameters at 18 bytes
 * (mixed-precision Adam) and its saved activations. */
static int real_table(const loom_graph *g, const loom_cost_model *cm, int64_t gpn,
                      loom_stage_cost *cost, int64_t *devs, int32_t *nm_out, int32_t *no_out)
{
    loom_submesh sm[8];
    int32_t NM = loom_stage_submeshes(gpn, gpn, 0, sm, 8), NO = 0;
    int64_t shapes[8][8][2];
    int32_t ns[8];
    for (int32_t m = 0; m < NM; m++) {
        devs[m] = loom_submesh_devices(sm[m]);
        ns[m] = loom_stage_logical_meshes(sm[m], shapes[m], 8);
        if (ns[m] > NO) NO = ns[m];
    }
    int32_t L = loom_graph_layer_count(g), solved = 0;
    loom_intra_cache *cache = NULL;
    loom_error err = {0};
    if (loom_intra_cache_create(&cache, &err)) return 0;
    for (int32_t l = 0; l < L; l++)
        for (int32_t m = 0; m < NM; m++)
            for (int32_t o = 0; o < NO; o++) {
                loom_stage_cost *c = &cost[((size_t)l * NM + m) * NO + o];
                *c = (loom_stage_cost){INFINITY, 0, 0};
                if (o >= ns[m]) continue;
                loom_intra_opts io;
                loom_intra_opts_init(&io);
                io.cache = cache;
                io.micro_batches = 4;
                loom_intra_result r;
                loom_mesh_shape mesh = {shapes[m][o][0], shapes[m][o][1]};
                if (loom_intra_solve(g, cm, l, l, mesh, &io, &r, &err) == LOOM_OK &&
                    r.status != LOOM_ILP_INFEASIBLE) {
                    *c = (loom_stage_cost){r.time_s, r.param_count_per_gpu * 18,
                                           r.act_bytes_per_gpu};
                    solved++;
                }
                loom_intra_result_free(&r);
            }
    loom_intra_cache_destroy(cache);
    *nm_out = NM, *no_out = NO;
    return solved;
}

static void test_real_costs(void)
{
    loom_cluster c;
    loom_error err = {0};
    loom_cost_model *cm = NULL;
    CHECK_INT_EQ(loom_cluster_load("dgx-h100-x1", &c, &err), LOOM_OK);
    CHECK_INT_EQ(loom_cost_model_create(&c, NULL, NULL, &cm, &err), LOOM_OK);
    if (!cm) return;
    /* a 6-block Llama (8 layer slots) and the 2-block tiny GPT graph (4 slots) */
    const char *llama = "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
                        "\"hidden_size\": 1024, \"intermediate_size\": 2816, "
                        "\"num_attention_heads\": 16, \"num_key_value_heads\": 4, "
                        "\"num_hidden_layers\": 6, \"vocab_size\": 32000, "
                        "\"max_position_embeddings\": 4096, \"tie_word_embeddings\": false}\n";
    const char *path = "/tmp/loom_test_stage_dp_llama6.json";
    CHECK_INT_EQ(loom_write_file_atomic(path, llama, strlen(llama), &err), LOOM_OK);
    const char *models[2] = {path, "examples/models/tiny-gpt.graph.json"};
    int agree = 0, total = 0;
    for (int mi = 0; mi < 2; mi++) {
        loom_model_opts o;
        loom_model_opts_init(&o);
        o.seq = 1024, o.batch = 4;
        loom_graph *g = NULL;
        CHECK_INT_EQ(loom_model_load(models[mi], &o, &g, &err), LOOM_OK);
        if (!g) continue;
        static loom_stage_cost cost[8 * 8 * 8];
        int64_t devs[8];
        int32_t NM = 0, NO = 0, L = loom_graph_layer_count(g);
        CHECK(L <= 8);
        int solved = real_table(g, cm, 8, cost, devs, &NM, &NO);
        CHECK(solved > L * NM);   /* most (layer, mesh) pairs have strategies */
        /* memory: from no limit down to tighter than some plans need */
        int64_t most = 0;
        for (int32_t l = 0; l < L; l++) most += cost[(size_t)l * NM * NO].static_bytes +
                                              4 * cost[(size_t)l * NM * NO].act_bytes;
        for (int trial = 0; trial < 12; trial++) {
            loom_stage_problem p = {.n_layers = L, .n_meshes = NM, .n_options = NO,
                                    .mesh_devices = devs, .cost = cost, .devices = 8,
                                    .micro_batches = 1 + trial % 6,
                                    .capacity_bytes = trial < 3 ? INT64_MAX : most / (trial - 1)};
            loom_stage_solution sol;
            memset(&sol, 0, sizeof sol);
            total++;
            agree += dp_matches_brute(&p, &sol);
            if (getenv("LOOM_TEST_VERBOSE"))
                printf("  model %d: M %lld, capacity %lld: %d stages, %.4g s\n", mi,
                       (long long)p.micro_batches, (long long)p.capacity_bytes,
                       (int)sol.n_stages, sol.step_s);
        }
        loom_graph_destroy(g);
    }
    printf("stage DP vs brute force on ILP costs: %d of %d agree\n", agree, total);
    CHECK_INT_EQ(agree, total);
    unlink(path);
    loom_cost_model_destroy(cm);
}

int main(void)
{
    test_hand_case();
    test_random_vs_brute();
    test_single_mesh();
    test_gap();
    test_stop();
    test_submeshes();
    test_place();
    test_cluster();
    test_cluster_large();
    test_bad_problem();
    test_real_costs();
    return check_done();
}
