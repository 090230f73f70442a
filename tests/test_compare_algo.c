/*
 * test_compare_algo.c — the search-algorithm interface (planner/compare/algo.h) and the
 * Megatron-style space (planner/compare/mspace.h).
 *
 * What is checked, and why each claim holds by construction:
 *   - the space of a small case has exactly the points counted by hand;
 *     layer splits (even, and Megatron's uneven first/last stages) and the
 *     GPU layout of a point's configuration are the ones Megatron runs;
 *   - nesting: rules, random, genetic and pp-only only ever return points
 *     of the grid's space (asserted: loom_mspace_find), and grid evaluates
 *     every point with the same deterministic evaluator, so grid's optimum
 *     is never worse; random drawing the whole space equals grid;
 *   - alpa --space megatron vs grid: when the planner's winner is a point of
 *     the grid's space (asserted for the case used), grid has evaluated that
 *     very configuration, so grid <= alpa-megatron;
 *   - fairness: loom_algo_run re-scores the planner's answer on a fresh
 *     evaluator and gets the planner's own prediction back;
 *   - determinism: the same seed gives the same answers and counts;
 *   - interleaving: a pipeline rank holds all its chunks, so its memory
 *     grows with v only through the in-flight activations, by at most
 *     (3pp - 1) / 2pp for v = 2 (Narayanan et al. 2021; memory.h);
 *   - malformed configurations and a spent budget are reported.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "costs/cluster.h"
#include "costs/compute.h"
#include "costs/memory.h"
#include "planner/compare/mspace.h"
#include "planner/compare/algo.h"

static loom_cost_model *cost_model(const char *cluster)
{
    loom_cluster c;
    loom_error err = {0};
    loom_cost_model *cm = NULL;
    if (loom_cluster_load(cluster, &c, &err)) fprintf(stderr, "setup: %s\n", err.msg);
    /* the worked examples (docs/adding-an-algorithm.md) are sized to the
     * whole HBM: no headroom */
    c.memory_headroom = 0;
    if (loom_cost_model_create(&c, NULL, NULL, &cm, &err)) fprintf(stderr, "setup: %s\n", err.msg);
    return cm;
}

/* The model every test plans, parsed once. */
static loom_model_source *src_8b;

static loom_model_source *llama_8b(void)
{
    loom_error err = {0};
    if (!src_8b && loom_model_open("examples/models/llama-3-8b.json", &src_8b, &err))
        fprintf(stderr, "setup: %s\n", err.msg);
    return src_8b;
}

static void request(loom_algo_request *r, loom_cost_model *cm, int64_t gbs, int64_t seq,
                    bool infer)
{
    loom_algo_request_init(r);
    r->problem.model = llama_8b();
    r->problem.cm = cm;
    r->problem.gbs = gbs;
    r->problem.seq = seq;
    r->problem.inference = infer;
    r->problem.objective = infer ? LOOM_OBJ_LATENCY : LOOM_OBJ_TIME;
}

static loom_algo_result *run(const char *name, const loom_algo_request *r)
{
    static loom_algo_result slots[16];
    static int next;
    loom_algo_result *res = &slots[next++ % 16];
    loom_error err = {0};
    loom_status s = loom_algo_run(loom_algo_find(name), r, res, &err);
    if (s) fprintf(stderr, "%s: %s\n", name, err.msg);
    CHECK(s == LOOM_OK);
    CHECK(res->found);
    return res;
}

/* 8 H100s, Llama-3-8B (32 blocks, 32 heads, 8 kv heads), gbs 8, seq 2048.
 * Points per (tp, cp, pp, dp), counted by hand: mbs divides 8/dp; vpp 2 or
 * 4 needs pp >= 2, 32 % (pp·v) = 0 and M % pp = 0; recompute ×2; ZeRO ×4
 * (pp = 1, dp > 1), ×2 (pp > 1, dp > 1), ×1 (dp = 1). The count depends on
 * (pp, dp) only:
 *   tp1: pp1 dp8 8, pp2 dp4 16, pp4 dp2 20, pp8 dp1 12
 *   tp2: pp1 dp4 16, pp2 dp2 28, pp4 dp1 16
 *   tp4: pp1 dp2 24, pp2 dp1 20;   tp8: pp1 dp1 8        cp 1: 168
 *   cp2: tp1 16 + 28 + 16, tp2 24 + 20, tp4 8 = 112; cp4: tp1 24 + 20,
 *   tp2 8 = 52; cp8: tp1 8                               cp > 1: 172
 * (2048 splits into 2·cp chunks for every cp), 340 in all.
 * e.g. tp1 pp8 dp1: mbs 1,2,4,8 × 2 rc = 8 plain, + v2 and v4 with M = 8
 * (mbs 1) × 2 rc = 4. */
static void test_space(loom_cost_model *cm)
{
    loom_algo_request r;
    request(&r, cm, 8, 2048, false);
    loom_algo_ctx *ctx;
    loom_error err = {0};
    CHECK(loom_algo_ctx_create(&r, &ctx, &err) == LOOM_OK);
    CHECK_INT_EQ(loom_algo_ctx_layers(ctx), 34);
    CHECK_INT_EQ(loom_algo_ctx_blocks(ctx), 32);
    loom_mspace sp;
    CHECK(loom_mspace_build(ctx, &sp, &err) == LOOM_OK);
    CHECK_INT_EQ(sp.n, 340);

    /* tp2 pp4 dp1: stage r on GPUs 2r, 2r+1 (one replica: stride 8);
     * embedding + 8 blocks, 8, 8, 8 blocks + head; with tp > 1 the space's
     * points run sequence parallelism and TP communication overlap */
    loom_parallel p;
    loom_parallel_init(&p);
    p.tp = 2, p.pp = 4, p.dp = 1, p.mbs = 2, p.gbs = 8, p.seq = 2048;
    p.sp = p.tp_comm_overlap = true;
    loom_search_config cfg;
    loom_mspace_config(ctx, &p, &cfg);
    CHECK_INT_EQ(cfg.n_stages, 4);
    CHECK_INT_EQ(cfg.micro_batches, 4);
    int32_t first[4] = {0, 9, 17, 25}, last[4] = {8, 16, 24, 33};
    for (int i = 0; i < 4; i++) {
        CHECK_INT_EQ(cfg.stages[i].first_layer, first[i]);
        CHECK_INT_EQ(cfg.stages[i].last_layer, last[i]);
        CHECK_INT_EQ(cfg.stages[i].first_gpu, 2 * i);
        CHECK_INT_EQ(cfg.stages[i].replica_stride, 8);
        CHECK_INT_EQ(cfg.stages[i].mesh.n1, 2);
        CHECK(cfg.stages[i].megatron);
    }
    CHECK(loom_mspace_find(ctx, &sp, &cfg) >= 0);
    /* tp2 pp2 dp2, Megatron's rank order: rank r owns GPUs 4r..4r+3,
     * replica k at offset 2k */
    p.pp = 2, p.dp = 2, p.mbs = 1;
    loom_mspace_config(ctx, &p, &cfg);
    CHECK_INT_EQ(cfg.stages[1].first_gpu, 4);
    CHECK_INT_EQ(cfg.stages[1].replica_stride, 2);
    /* interleaved v2 on pp2: chunks of 8 blocks, rank = chunk mod 2 */
    p.vpp = 2, p.mbs = 1;
    loom_mspace_config(ctx, &p, &cfg);
    CHECK_INT_EQ(cfg.n_stages, 4);
    CHECK_INT_EQ(cfg.stages[2].group, 0);
    CHECK_INT_EQ(cfg.stages[2].first_layer, 17);
    CHECK_INT_EQ(cfg.stages[3].last_layer, 33);
    /* context parallel, tp2 cp2 pp2 dp1: each rank's 4 GPUs are a (2, 2)
     * mesh, the sequence over axis 0 and the heads over axis 1 */
    p.vpp = 1, p.dp = 1, p.cp = 2;
    loom_mspace_config(ctx, &p, &cfg);
    CHECK_INT_EQ(cfg.gpus_per_replica, 8);
    CHECK_INT_EQ(cfg.stages[1].first_gpu, 4);
    CHECK_INT_EQ(cfg.stages[1].submesh.gpus, 4);
    CHECK_INT_EQ(cfg.stages[1].mesh.n0, 2);
    CHECK_INT_EQ(cfg.stages[1].mesh.n1, 2);
    CHECK(cfg.stages[1].context_parallel && cfg.stages[1].tp_comm_overlap);
    CHECK(loom_mspace_find(ctx, &sp, &cfg) >= 0);
    p.cp = 1;
    /* 32 blocks on 3 stages: q = 11, r = 1: first 10, last 11 */
    p.pp = 3, p.vpp = 1, p.dp = 1;
    CHECK(loom_mspace_uneven(32, 3, &p.first_stage_layers, &p.last_stage_layers));
    CHECK_INT_EQ(p.first_stage_layers, 10);
    CHECK_INT_EQ(p.last_stage_layers, 11);
    loom_mspace_config(ctx, &p, &cfg);
    CHECK_INT_EQ(cfg.stages[0].last_layer, 10);
    CHECK_INT_EQ(cfg.stages[1].last_layer, 21);
    CHECK_INT_EQ(cfg.stages[2].first_layer, 22);

    /* Llama 3 405B: 126 layers on 16 stages of 8, one fewer at each end */
    int64_t f, l;
    CHECK(loom_mspace_uneven(126, 16, &f, &l));
    CHECK_INT_EQ(f, 7);
    CHECK_INT_EQ(l, 7);
    CHECK(loom_mspace_uneven(61, 4, &f, &l));   /* 14 + 16 + 16 + 15 */
    CHECK_INT_EQ(f, 14);
    CHECK_INT_EQ(l, 15);
    CHECK(!loom_mspace_uneven(5, 8, &f, &l));

    /* a configuration that skips a layer is refused, naming the stage */
    p.pp = 2, p.dp = 2, p.tp = 2, p.first_stage_layers = p.last_stage_layers = 0;
    loom_mspace_config(ctx, &p, &cfg);
    cfg.stages[1].first_layer++;
    loom_algo_score sc;
    CHECK(loom_algo_eval(ctx, &cfg, &sc, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "stage 1");
    loom_mspace_free(&sp);
    loom_algo_ctx_destroy(ctx);
}

/* Inference, 8 GPUs, 8 sequences: no vpp, recompute or ZeRO, mbs divides
 * 8/dp. Per tp: tp1 1+2+3+4 (pp 1, 2, 4, 8), tp2 2+3+4, tp4 3+4, tp8 4 =
 * 30. The throughput objective also serves 1, 2 or 4 sequences: dp must
 * divide them; B=1: 4 points (dp 1 only), B=2: 4·2 + 3·1 = 11, B=4:
 * 4·3 + 3·2 + 2·1 = 20; 65 in all. */
static void test_inference_space(loom_cost_model *cm)
{
    loom_algo_request r;
    request(&r, cm, 8, 2048, true);
    for (int thr = 0; thr < 2; thr++) {
        r.problem.objective = thr ? LOOM_OBJ_THROUGHPUT : LOOM_OBJ_LATENCY;
        loom_algo_ctx *ctx;
        loom_error err = {0};
        loom_mspace sp;
        CHECK(loom_algo_ctx_create(&r, &ctx, &err) == LOOM_OK);
        CHECK(loom_mspace_build(ctx, &sp, &err) == LOOM_OK);
        CHECK_INT_EQ(sp.n, thr ? 65 : 30);
        loom_mspace_free(&sp);
        loom_algo_ctx_destroy(ctx);
    }
}

/* v = 2 on pp = 4: each rank holds the same layers, activations in flight
 * grow from pp = 4 to (3pp - 1)/2 = 5.5 micro-batches of its layers. */
static void test_interleaved_memory(loom_cost_model *cm)
{
    loom_algo_request r;
    request(&r, cm, 16, 2048, false);   /* M = 8: M·v = 16 >= 11, nothing capped */
    loom_algo_ctx *ctx;
    loom_error err = {0};
    CHECK(loom_algo_ctx_create(&r, &ctx, &err) == LOOM_OK);
    loom_parallel p;
    loom_parallel_init(&p);
    p.tp = 1, p.pp = 4, p.dp = 2, p.mbs = 1, p.gbs = 16, p.seq = 2048, p.zero = 1;
    loom_algo_score s1, s2;
    CHECK(loom_mspace_eval(ctx, &p, NULL, &s1, &err) == LOOM_OK);
    p.vpp = 2;
    CHECK(loom_mspace_eval(ctx, &p, NULL, &s2, &err) == LOOM_OK);
    CHECK(s2.memory_per_gpu_bytes > s1.memory_per_gpu_bytes);
    CHECK(s2.memory_per_gpu_bytes <= 5.5 / 4 * (double)s1.memory_per_gpu_bytes);
    loom_algo_ctx_destroy(ctx);
}

/* Every answer of a subset algorithm lies in the grid's space. */
static bool in_space(const loom_algo_request *r, const loom_search_config *cfg)
{
    loom_algo_ctx *ctx;
    loom_error err = {0};
    loom_mspace sp;
    if (loom_algo_ctx_create(r, &ctx, &err) || loom_mspace_build(ctx, &sp, &err)) return false;
    bool in = loom_mspace_find(ctx, &sp, cfg) >= 0;
    loom_mspace_free(&sp);
    loom_algo_ctx_destroy(ctx);
    return in;
}

static void test_nesting(loom_cost_model *cm, bool infer)
{
    loom_algo_request r;
    request(&r, cm, infer ? 16 : 32, 2048, infer);
    r.max_evals = 12;
    loom_algo_result *grid = run("grid", &r);
    CHECK(grid->space > 12);
    CHECK_INT_EQ(grid->evals, grid->space);
    CHECK(grid->score.fits);
    const char *subsets[] = {"random", "genetic", "rules", "pp-only"};
    for (int i = 0; i < 4; i++) {
        loom_algo_result *a = run(subsets[i], &r);
        CHECK(in_space(&r, &a->config));
        CHECK(!loom_algo_better(&a->score, &grid->score));
        if (a->score.fits) CHECK(grid->score.score <= a->score.score);
        if (i < 2) CHECK(a->evals <= 12);
    }
    /* random over the whole space is grid in another order: same optimum */
    r.max_evals = grid->space;
    loom_algo_result *all = run("random", &r);
    CHECK_INT_EQ(all->evals, grid->space);
    CHECK(all->score.score == grid->score.score);

    loom_algo_result *am = run("alpa-megatron", &r);
    CHECK(in_space(&r, &am->config));   /* the precondition of the claim */
    CHECK(grid->score.score <= am->score.score);
}

/* The planner's own prediction, and the re-scored one. */
static void test_alpa_rescored(loom_cost_model *cm)
{
    loom_algo_request r;
    request(&r, cm, 32, 2048, false);
    loom_algo_result *a = run("alpa", &r);

    loom_problem q = r.problem;   /* the same problem, the search's default options */
    q.cm = cm;
    loom_search *s;
    loom_error err = {0};
    const loom_search_result *res;
    CHECK(loom_search_create(&q, NULL, &s, &err) == LOOM_OK);
    CHECK(loom_search_run(s, &res, &err) == LOOM_OK);
    CHECK_NEAR_REL(a->score.score, res->eval.score, 1e-9);
    CHECK_INT_EQ(a->evals, res->configs_evaluated);
    CHECK_INT_EQ(a->config.n_stages, res->best.n_stages);
    loom_search_destroy(s);
}

static void test_determinism(loom_cost_model *cm)
{
    loom_algo_request r;
    request(&r, cm, 32, 2048, false);
    r.max_evals = 10;
    r.seed = 7;
    const char *names[] = {"genetic", "random"};
    for (int i = 0; i < 2; i++) {
        loom_algo_result *a = run(names[i], &r), *b = run(names[i], &r);
        CHECK(a->score.score == b->score.score);
        CHECK_INT_EQ(a->evals, b->evals);
        CHECK(!memcmp(&a->config, &b->config, sizeof a->config));
    }
}

/* The worked example of docs/adding-an-algorithm.md: Llama-3-8B, seq 4096,
 * on 16 A100-40GB. Without tensor parallelism one or two stages do not fit,
 * four do: pp-only must answer pp 4, tp 1, no recompute, after exactly the
 * three evaluations pp = 1, 2, 4 (pp = 3 does not divide 16 GPUs). */
static void test_pp_only(void)
{
    loom_cost_model *cm = cost_model("dgx-a100-40g-x2");
    loom_algo_request r;
    request(&r, cm, 32, 4096, false);
    loom_algo_result *a = run("pp-only", &r);
    CHECK(a->score.fits);
    CHECK_INT_EQ(a->config.pp, 4);
    CHECK_INT_EQ(a->config.dp, 4);
    CHECK_INT_EQ(a->evals, 3);
    for (int32_t i = 0; i < a->config.n_stages; i++) {
        CHECK_INT_EQ(a->config.stages[i].mesh.n0 * a->config.stages[i].mesh.n1, 1);
        CHECK(a->config.stages[i].recompute == LOOM_RECOMPUTE_NONE);
    }
    loom_algo_ctx *ctx;
    loom_error err = {0};
    loom_mspace sp;
    CHECK(loom_algo_ctx_create(&r, &ctx, &err) == LOOM_OK);
    CHECK(loom_mspace_build(ctx, &sp, &err) == LOOM_OK);
    for (int64_t pp = 1; pp <= 2; pp++) {   /* fewer stages do not fit */
        loom_algo_score sc;
        const loom_parallel *p = loom_mspace_pick(&sp, true, 1, pp, LOOM_RECOMPUTE_NONE);
        CHECK(p && loom_mspace_eval(ctx, p, NULL, &sc, &err) == LOOM_OK && !sc.fits);
    }
    loom_mspace_free(&sp);
    loom_algo_ctx_destroy(ctx);
    loom_cost_model_destroy(cm);
}

static void test_budget(loom_cost_model *cm)
{
    loom_algo_request r;
    request(&r, cm, 32, 2048, false);
    r.budget_s = 1e-9;
    loom_algo_result res;
    loom_error err = {0};
    CHECK(loom_algo_run(loom_algo_find("grid"), &r, &res, &err) == LOOM_OK);
    CHECK(res.timed_out);
    CHECK(res.evals < res.space);

    /* A work budget stops every algorithm at the same point on any machine:
     * two runs agree exactly, and the Alpa planner stops early too. */
    r.budget_s = 0;
    r.max_work = 40;
    const char *names[] = {"grid", "alpa", "alpa-megatron", "greedy"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        loom_algo_result a, b, full;
        r.max_work = 40;
        CHECK(loom_algo_run(loom_algo_find(names[k]), &r, &a, &err) == LOOM_OK);
        CHECK(loom_algo_run(loom_algo_find(names[k]), &r, &b, &err) == LOOM_OK);
        CHECK(a.found == b.found && a.evals == b.evals && a.timed_out == b.timed_out);
        if (a.found) CHECK(a.score.score == b.score.score);
        r.max_work = 0;
        CHECK(loom_algo_run(loom_algo_find(names[k]), &r, &full, &err) == LOOM_OK);
        CHECK(!full.timed_out);
        if (a.timed_out) CHECK(a.evals <= full.evals);
        if (!strcmp(names[k], "grid")) CHECK(a.timed_out && a.evals < full.evals);
    }
}

static void test_registry(void)
{
    CHECK(loom_algo_count() >= 8);
    for (size_t i = 0; i < loom_algo_count(); i++)
        CHECK(loom_algo_find(loom_algo_at(i)->name) == loom_algo_at(i));
    CHECK(loom_algo_find("simulated-annealing") == NULL);
    CHECK_STR_CONTAINS(loom_algo_names(), "grid, genetic");
}

int main(void)
{
    loom_cost_model *cm1 = cost_model("dgx-h100-x1"), *cm2 = cost_model("dgx-h100-x2");
    CHECK(cm1 && cm2);
    if (!cm1 || !cm2) return check_done();
    test_registry();
    test_space(cm1);
    test_interleaved_memory(cm1);
    test_inference_space(cm1);
    test_nesting(cm2, false);
    test_nesting(cm1, true);
    test_alpa_rescored(cm2);
    test_determinism(cm2);
    test_budget(cm2);
    test_pp_only();
    loom_cost_model_destroy(cm1);
    loom_cost_model_destroy(cm2);
    loom_model_source_destroy(src_8b);
    return check_done();
}
