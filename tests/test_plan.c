/*
 * test_plan.c — plans: the value, loom-plan/1 JSON (golden file, round
 * trip, byte-identical reruns, path-named read errors), the validator (good
 * plans pass, broken ones are refused with the place named; an interleaved
 * rank's memory is the sum of its chunks'), and end-to-end
 * planning runs, every plan of which must pass the validator:
 *   - GPT-2 on one GPU is a single stage;
 *   - Llama-3-8B on 8 H100 (gbs 256, seq 4096) is predicted at least as fast
 *     as the best Megatron configuration found by evaluating every
 *     TP × PP × DP × micro-batch (× ZeRO-0/1 × recompute none/full)
 *     combination with loom eval's model (costs/eval.h);
 *   - Llama-3-70B on 64 H100 and Llama-3.1-405B on 16,384 H100 (gbs 2048,
 *     seq 8192) give valid plans;
 *   - inference plans hold a KV cache and no optimizer state;
 *   - a model that cannot fit reports at least the model state's share of
 *     memory per GPU (P · 18 bytes / GPUs, mixed-precision Adam).
 * Set LOOM_UPDATE_GOLDEN=1 to rewrite tests/golden/plan_small.json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "costs/cluster.h"
#include "costs/eval.h"
#include "base/fileio.h"
#include "graph/model.h"
#include "planner/export/export.h"
#include "planner/plan/plan.h"
#include "planner/plan/plan_run.h"

#define GOLDEN "tests/golden/plan_small.json"

/* ---- a hand-made plan --------------------------------------------------------- */

/* 2 nodes x 4 GPUs; 4 layer slots; 2 stages of 2 GPUs each; 2 replicas side
 * by side (stride 2): stage 0 on {0,1} and {2,3}, stage 1 on {4,5} and {6,7}. */
static loom_plan *small_plan(void)
{
    loom_plan *p;
    loom_error err = {0};
    if (loom_plan_create(&p, &err)) return NULL;
    snprintf(p->model, sizeof p->model, "tiny");
    snprintf(p->cluster, sizeof p->cluster, "two-by-four");
    p->gbs = 8, p->seq = 16;
    p->model_info = (loom_model_info){.layers = 2, .hidden = 16, .heads = 2, .kv_heads = 2,
                                      .head_dim = 8, .ffn = 64, .vocab = 32};
    snprintf(p->model_info.arch, sizeof p->model_info.arch, "gpt");
    p->model_params = 6816;
    p->layer_count = 4;
    p->nodes = 2, p->gpus_per_node = 4;
    snprintf(p->gpu, sizeof p->gpu, "H100-SXM5-80GB");
    p->gpu_memory_bytes = (int64_t)80 << 30;
    p->gpu_peak_flops = 989e12;
    p->price_per_gpu_hour_usd = 2.5, p->power_w = 700;
    p->micro_batch = 1, p->micro_batches = 4, p->pipeline_stages = 2, p->data_parallel = 2;
    p->gpus_per_replica = 4;
    loom_plan_set_stages(p, 2, &err);
    for (int i = 0; i < 2; i++) {
        loom_plan_stage *s = &p->stages[i];
        s->first_layer = 2 * i, s->last_layer = 2 * i + 1;
        s->submesh_nodes = 1, s->submesh_gpus = 2;
        s->mesh[0] = 1, s->mesh[1] = 2;
        loom_plan_stage_set_gpus(s, 2, &err);
        s->gpus[0] = 4 * i, s->gpus[1] = 4 * i + 1;
        s->replica_stride = 2;
        s->tensor_parallel = 2, s->data_parallel = 1, s->sequence_parallel = true;
        s->zero = 1;
        s->in_flight = 2 - i;
        s->compute_s = 0.25 + i, s->comm_s = 0.125, s->grad_sync_s = 0.5, s->time_s = 0.375 + i;
        s->memory = (loom_plan_memory){1000, 2000, 3000, 4000 + i, 0, 1 << 30, 0};
        loom_plan_memory_sum(&s->memory);
        loom_plan_stage_set_ops(s, 2, &err);
        for (int k = 0; k < 2; k++) {
            loom_plan_op *o = &s->ops[k];
            snprintf(o->name, sizeof o->name, "layers.%d.mlp", 2 * i + k);
            o->layer = 2 * i + k;
            snprintf(o->strategy, sizeof o->strategy, "f@1");
            snprintf(o->input, sizeof o->input, "b s@1 h");
            snprintf(o->weight, sizeof o->weight, "h f@1");
            snprintf(o->output, sizeof o->output, "b s f@1");
        }
    }
    p->step_time_s = 2.5, p->tokens_per_s = 51.2, p->model_tflops_per_gpu = 1e-6, p->mfu = 1e-9;
    p->memory_per_gpu_bytes = p->stages[1].memory.total;
    p->breakdown = (loom_step_breakdown){.compute_s = 1.5, .tp_comm_s = 0.5, .bubble_s = 0.25,
                                          .p2p_s = 0.125, .grad_sync_s = 0.0625,
                                          .optimizer_s = 0.0625};
    p->cost_per_step_usd = 0.0138, p->cost_per_mtoken_usd = 107.8;
    p->energy_per_step_j = 14000, p->energy_per_token_j = 109.375;
    p->search_time_s = 0.5, p->ilp_solves = 12, p->dp_runs = 30, p->configs_evaluated = 7;
    return p;
}

static void test_small_plan(void)
{
    loom_plan *p = small_plan();
    CHECK(p != NULL);
    if (!p) return;
    loom_error err = {0};
    CHECK_INT_EQ(loom_plan_check(p, "small", &err), LOOM_OK);
    /* HF layout (2 blocks in 4 slots): slot 0 embeds, slot 3 is the head */
    CHECK_INT_EQ(loom_plan_stage_blocks(p, &p->stages[0]), 1);
    CHECK_INT_EQ(loom_plan_stage_blocks(p, &p->stages[1]), 1);

    /* golden file: the writer's exact bytes, timings zeroed */
    char *text = loom_plan_to_json(p, LOOM_PLAN_JSON_NO_TIMINGS);
    CHECK(text != NULL);
    if (getenv("LOOM_UPDATE_GOLDEN"))
        CHECK_INT_EQ(loom_write_file_atomic(GOLDEN, text, strlen(text), &err), LOOM_OK);
    char *golden = NULL;
    size_t glen = 0;
    CHECK_INT_EQ(loom_read_file(GOLDEN, 0, &golden, &glen, &err), LOOM_OK);
    CHECK(golden && text && strcmp(golden, text) == 0);
    CHECK_STR_CONTAINS(text, "\"format\":\t\"loom-plan/1\"");
    CHECK_STR_CONTAINS(text, "\"time_s\":\t0,");   /* search.time_s under NO_TIMINGS */

    /* read(write(plan)) gives the same plan: re-written it is the same bytes */
    loom_plan *q = NULL;
    CHECK_INT_EQ(loom_plan_parse("small.json", text, strlen(text), &q, &err), LOOM_OK);
    if (q) {
        char *again = loom_plan_to_json(q, LOOM_PLAN_JSON_NO_TIMINGS);
        CHECK(again && strcmp(again, text) == 0);
        free(again);
        CHECK_INT_EQ(q->stages[1].gpus[1], 5);
        CHECK_INT_EQ(q->stages[1].replica_stride, 2);
        CHECK_INT_EQ(q->stages[0].memory.total, p->stages[0].memory.total);
        CHECK(q->stages[0].sequence_parallel);
        CHECK_STR_CONTAINS(q->stages[1].ops[1].weight, "h f@1");
        CHECK_NEAR_REL(q->cost_per_mtoken_usd, 107.8, 1e-15);
    }
    loom_plan_destroy(q);

    /* a failed write leaves nothing behind */
    const char *path = "/tmp/loom_test_plan_write.json";
    unlink(path);
    loom_fileio_fail_next_write = 1;
    CHECK(loom_plan_write(p, path, 0, &err) != LOOM_OK);
    CHECK(access(path, F_OK) != 0);
    CHECK_INT_EQ(loom_plan_write(p, path, 0, &err), LOOM_OK);
    loom_plan *r = NULL;
    CHECK_INT_EQ(loom_plan_read(path, &r, &err), LOOM_OK);
    loom_plan_destroy(r);
    unlink(path);

    /* the picture: deterministic SVG */
    char *s1 = loom_plan_svg(p), *s2 = loom_plan_svg(p);
    CHECK(s1 && s2 && strcmp(s1, s2) == 0);
    CHECK(s1 && strncmp(s1, "<svg", 4) == 0);
    /* slots 2-3 of a 2-block model: block 1 and the head, in the model's numbering */
    CHECK_STR_CONTAINS(s1, "rank 1: layers 1+head");
    free(s1), free(s2);
    free(text), free(golden);
    loom_plan_destroy(p);
}

/* Each broken plan is refused, naming the field. */
static void expect_bad(loom_plan *p, const char *where, const char *what)
{
    loom_error err = {0};
    CHECK_INT_EQ(loom_plan_check(p, "bad.json", &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "bad.json");
    CHECK_STR_CONTAINS(err.msg, where);
    CHECK_STR_CONTAINS(err.msg, what);
    loom_plan_destroy(p);
}

static void test_validator(void)
{
    loom_plan *p = small_plan();
    p->stages[1].gpus[0] = 1;   /* overlaps stage 0 */
    expect_bad(p, "$.stages[1].gpus[0]", "also used by stage 0");

    p = small_plan();
    p->stages[1].replica_stride = 1;   /* replica 1 of stage 1: {5,6}, overlaps replica 0 */
    expect_bad(p, "$.stages[1].gpus[1]", "GPU 5 (replica 0) is also used by stage 1");

    p = small_plan();
    p->stages[1].first_layer = 3;   /* layer 2 nowhere */
    expect_bad(p, "$.stages[1].layers", "layer 2 is in no stage");

    p = small_plan();
    p->stages[0].last_layer = 2;   /* layer 2 twice */
    expect_bad(p, "$.stages[1].layers", "already in stage 0");

    p = small_plan();
    p->stages[1].last_layer = 2;   /* layer 3 nowhere */
    p->stages[1].n_ops = 1;        /* (its op would be outside the stage) */
    expect_bad(p, "$.stages", "layers 3..3 are in no stage");

    p = small_plan();
    p->stages[0].memory.activations = (int64_t)90 << 30;
    loom_plan_memory_sum(&p->stages[0].memory);
    p->memory_per_gpu_bytes = p->stages[0].memory.total;
    expect_bad(p, "$.stages[0].memory_bytes", "exceeds the H100-SXM5-80GB");

    p = small_plan();
    p->stages[0].memory.total += 1;   /* parts do not sum */
    expect_bad(p, "$.stages[0].memory_bytes", "parts sum to");

    p = small_plan();
    p->stages[0].tensor_parallel = 4;
    expect_bad(p, "$.stages[0]", "tensor_parallel 4 x data_parallel 1 != 2 GPUs");

    p = small_plan();
    p->micro_batches = 3;
    expect_bad(p, "$.schedule.micro_batches", "!= gbs 8");

    p = small_plan();
    p->data_parallel = 4, p->micro_batches = 2;   /* 4 replicas of 4 GPUs in 8 */
    expect_bad(p, "$.schedule.data_parallel", "4 replicas of 4 GPUs do not fit");

    p = small_plan();
    p->stages[1].gpus[1] = 7;   /* {4,7}: replica 1 = {6,9} */
    expect_bad(p, "$.stages[1].gpus[1]", "outside the cluster");

    p = small_plan();
    p->stages[0].submesh_gpus = 4, p->stages[0].mesh[1] = 4;
    expect_bad(p, "$.stages[0]", "2 GPUs listed, sub-mesh (1, 4)");

    p = small_plan();
    p->stages[1].ops[0].layer = 0;
    expect_bad(p, "$.stages[1].ops[0].layer", "outside the stage's layers 2..3");

    p = small_plan();
    p->pipeline_stages = 1;   /* 2 stages but 1 rank x 1 virtual */
    expect_bad(p, "$.schedule.pipeline_stages", "!= 2 stages");
}

/* small_plan interleaved: one pipeline rank, 2 chunks on the same 2 GPUs
 * (2 replicas), each chunk `act` bytes of activations. */
static loom_plan *interleaved_plan(int64_t act)
{
    loom_plan *p = small_plan();
    snprintf(p->schedule_kind, sizeof p->schedule_kind, "interleaved");
    p->pipeline_stages = 1, p->virtual_stages = 2, p->gpus_per_replica = 2;
    loom_plan_stage *s = &p->stages[1];
    s->group = 0;
    s->gpus[0] = 0, s->gpus[1] = 1;
    for (int i = 0; i < 2; i++) {
        p->stages[i].memory.activations = act;
        loom_plan_memory_sum(&p->stages[i].memory);
    }
    p->memory_per_gpu_bytes = p->stages[0].memory.total + p->stages[1].memory.total;
    return p;
}

static void test_rank_memory(void)
{
    /* a rank's GPUs hold all its chunks: the plan's memory is their sum */
    loom_plan *p = interleaved_plan((int64_t)10 << 30);
    loom_error err = {0};
    CHECK_INT_EQ(loom_plan_check(p, "interleaved", &err), LOOM_OK);
    CHECK_INT_EQ(loom_plan_rank_memory(p, 0),
                 p->stages[0].memory.total + p->stages[1].memory.total);
    p->memory_per_gpu_bytes = p->stages[0].memory.total;
    expect_bad(p, "$.predicted.memory_per_gpu_bytes", "the largest pipeline rank needs");
    /* 2 × 46 GiB: each chunk fits in 80 GiB, the rank does not */
    p = interleaved_plan((int64_t)45 << 30);
    CHECK(p->stages[0].memory.total < p->gpu_memory_bytes);
    expect_bad(p, "$.stages[0].memory_bytes", "(all chunks of its pipeline rank) exceeds");

    /* one objective enum for plans and the search: its names are the plan's */
    loom_objective o;
    CHECK(loom_problem_objective_parse("throughput", &o) && o == LOOM_OBJ_THROUGHPUT);
    CHECK(strcmp(loom_problem_objective_name(LOOM_OBJ_ENERGY), "energy") == 0);
}

/* Reading: malformed text and wrong values name the file and the place. */
static void expect_read_error(const char *text, const char *what1, const char *what2)
{
    loom_plan *p = NULL;
    loom_error err = {0};
    CHECK(loom_plan_parse("in.json", text, strlen(text), &p, &err) != LOOM_OK);
    CHECK(p == NULL);
    CHECK_STR_CONTAINS(err.msg, "in.json");
    CHECK_STR_CONTAINS(err.msg, what1);
    CHECK_STR_CONTAINS(err.msg, what2);
}

static char *replace(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    if (!at) return NULL;
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    if (!out) return NULL;
    snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    return out;
}

/* "assumed" (the inputs loom's defaults chose) round-trips, in a fixed order,
 * and is left out when nothing was assumed. */
static void test_assumed(void)
{
    loom_plan *p = small_plan();
    loom_error err = {0};
    char *none = loom_plan_to_json(p, 0);
    CHECK(none && !strstr(none, "assumed"));
    p->assumed = LOOM_PLAN_ASSUMED_ZERO | LOOM_PLAN_ASSUMED_SEQ;
    char *text = loom_plan_to_json(p, 0);
    CHECK(text && strstr(text, "\"assumed\":\t[\"seq\", \"zero\"]"));
    loom_plan *q = NULL;
    CHECK_INT_EQ(loom_plan_parse("as.json", text, strlen(text), &q, &err), LOOM_OK);
    if (q) CHECK_INT_EQ(q->assumed, LOOM_PLAN_ASSUMED_ZERO | LOOM_PLAN_ASSUMED_SEQ);
    loom_plan_destroy(q);
    loom_plan_destroy(p);
    free(none);
    free(text);
}

/* A plan on the tile of every NVLink domain (idle GPUs per node) with the
 * two plans its account quotes round-trips; the fields are left out when
 * absent, and bad values are refused with their JSON path. */
static void test_nvlink_fields(void)
{
    loom_plan *p = small_plan();
    loom_error err = {0};
    char *none = loom_plan_to_json(p, 0);
    CHECK(none && !strstr(none, "idle_gpus_per_node") && !strstr(none, "nvlink_"));
    p->idle_gpus_per_node = 8;
    p->nvlink_groups_alt = (loom_plan_alternative){256, 1.721, 2, 8};
    p->nvlink_layout_alt = (loom_plan_alternative){288, 2.02, 8, 8};
    char *text = loom_plan_to_json(p, 0);
    loom_plan *q = NULL;
    CHECK_INT_EQ(loom_plan_parse("nv.json", text, strlen(text), &q, &err), LOOM_OK);
    char *again = q ? loom_plan_to_json(q, 0) : NULL;
    CHECK(again && text && strcmp(again, text) == 0);
    if (q) {
        CHECK_INT_EQ(q->idle_gpus_per_node, 8);
        CHECK_INT_EQ(q->nvlink_groups_alt.gpus, 256);
        CHECK_INT_EQ(q->nvlink_groups_alt.expert_parallel, 8);
        CHECK_NEAR_REL(q->nvlink_layout_alt.step_time_s, 2.02, 1e-12);
    }
    char *bad = text ? replace(text, "\"idle_gpus_per_node\":\t8", "\"idle_gpus_per_node\":\t-8")
                     : NULL;
    CHECK(bad != NULL);
    if (bad) expect_read_error(bad, "$.hardware", "idle_gpus_per_node");
    free(bad);
    bad = text ? replace(text, "\"gpus\":\t288", "\"gpus\":\t0") : NULL;
    CHECK(bad != NULL);
    if (bad) expect_read_error(bad, "$.predicted.nvlink_layout_alternative", "gpus");
    free(bad);
    loom_plan_destroy(q);
    loom_plan_destroy(p);
    free(none), free(text), free(again);
}

static void test_reader_errors(void)
{
    loom_plan *p = small_plan();
    char *good = loom_plan_to_json(p, 0);
    loom_plan_destroy(p);
    if (!good) return;
    expect_read_error("{\"format\": \"loom-plan/1\",\n  \"inputs\": {,}}", "in.json:2:", "malformed");
    struct {
        const char *from, *to, *w1, *w2;
    } cases[] = {
        {"\"loom-plan/1\"", "\"loom-plan/9\"", "$.format", "expected \"loom-plan/1\""},
        {"\"replica_stride\":\t2", "\"replica_strid\":\t2", "$.stages[0]",
         "unknown field \"replica_strid\""},
        {"\"gpus\":\t[0, 1]", "\"gpus\":\t[\"zero\", 1]", "$.stages[0].gpus", "item 0"},
        {"\"micro_batch\":\t1", "\"micro_batch\":\t1.5", "$.schedule.micro_batch",
         "expected an integer"},
        {"\"mode\":\t\"train\"", "\"mode\":\t\"serve\"", "$.inputs", "train or infer"},
        {"\"recompute\":\t\"none\"", "\"recompute\":\t\"some\"", "$.stages[0]",
         "none, selective or full"},
        {"\"layers\":\t[0, 1]", "\"layers\":\t[0]", "$.stages[0].layers", "2 integers"},
        {"\"gpus\":\t[4, 5]", "\"gpus\":\t[1, 5]", "$.stages[1].gpus[0]", "also used by stage 0"},
        {"\"params\":\t1000", "\"params\":\t-1000", "$.stages[0].memory_bytes.params",
         "expected an integer"},
        {"\"step_time_s\":\t2.5", "\"step_time_s\":\t2.5, \"step_time_s\": 3", "step_time_s",
         "duplicate"},
        {"\"space\":\t\"full\"", "\"space\":\t\"full\", \"assumed\": [\"seq\", \"mbs\"]",
         "$.inputs.assumed[1]", "expected \"seq\", \"gbs\" or \"zero\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *bad = replace(good, cases[i].from, cases[i].to);
        CHECK(bad != NULL);
        if (!bad) {
            fprintf(stderr, "  case %zu: '%s' not in the plan text\n", i, cases[i].from);
            continue;
        }
        expect_read_error(bad, cases[i].w1, cases[i].w2);
        free(bad);
    }
    free(good);
}

/* ---- end-to-end planning ----------------------------------------------------------- */

/* Plans, checks the validator and the JSON round trip; returns the plan. */
static loom_plan *plan_ok(loom_plan_request *req, const char *what)
{
    loom_plan *p = NULL;
    loom_error err = {0};
    loom_status st = loom_plan_run(req, &p, NULL, &err);
    if (st) fprintf(stderr, "%s: %s\n", what, err.msg);
    CHECK_INT_EQ(st, LOOM_OK);
    if (!p) return NULL;
    CHECK_INT_EQ(loom_plan_check(p, what, &err), LOOM_OK);
    char *text = loom_plan_to_json(p, LOOM_PLAN_JSON_NO_TIMINGS);
    loom_plan *q = NULL;
    CHECK_INT_EQ(loom_plan_parse(what, text, strlen(text), &q, &err), LOOM_OK);
    char *again = q ? loom_plan_to_json(q, LOOM_PLAN_JSON_NO_TIMINGS) : NULL;
    CHECK(again && strcmp(again, text) == 0);
    free(text), free(again);
    loom_plan_destroy(q);
    printf("%-34s %3d stage(s) x %4lld replica(s), mb %lld x %lld, step %.4g s, %.1f GiB/GPU, "
           "search %.2f s\n",
           what, (int)p->n_stages, (long long)p->data_parallel, (long long)p->micro_batch,
           (long long)p->micro_batches, p->step_time_s,
           (double)p->memory_per_gpu_bytes / 1073741824.0, p->search_time_s);
    return p;
}

static void train_request(loom_plan_request *r, const char *model, const char *cluster,
                          int64_t gbs, int64_t seq)
{
    loom_plan_request_init(r);
    r->model_path = model;
    r->cluster = cluster;
    r->problem.gbs = gbs;
    r->problem.seq = seq;
}

static void test_gpt2_one_gpu(void)
{
    loom_plan_request r;
    train_request(&r, "examples/models/gpt2.json", "tests/data/plan/one-h100.json", 8, 1024);
    loom_plan *p = plan_ok(&r, "gpt2 on one H100");
    if (!p) return;
    CHECK_INT_EQ(p->n_stages, 1);
    CHECK_INT_EQ(p->stages[0].first_layer, 0);
    CHECK_INT_EQ(p->stages[0].last_layer, p->layer_count - 1);
    CHECK_INT_EQ(p->stages[0].n_gpus, 1);
    /* cost and energy from the cluster's price and power, per formula */
    CHECK_NEAR_REL(p->cost_per_step_usd, p->step_time_s * 2.5 / 3600, 1e-12);
    CHECK_NEAR_REL(p->energy_per_token_j, p->step_time_s * 700 / (8.0 * 1024), 1e-12);

    /* the same problem twice: the same bytes */
    loom_plan *q = plan_ok(&r, "gpt2 on one H100 (again)");
    if (q) {
        char *a = loom_plan_to_json(p, LOOM_PLAN_JSON_NO_TIMINGS);
        char *b = loom_plan_to_json(q, LOOM_PLAN_JSON_NO_TIMINGS);
        CHECK(a && b && strcmp(a, b) == 0);
        free(a), free(b);
    }
    loom_plan_destroy(q);
    loom_plan_destroy(p);
}

/* The best Megatron configuration by loom eval's model over the grid. */
static double megatron_best(const char *model, const char *cluster, int64_t gbs, int64_t seq,
                            char *desc, size_t n)
{
    loom_cluster c;
    loom_error err = {0};
    loom_cost_model *cm = NULL;
    if (loom_cluster_load(cluster, &c, &err) || loom_cost_model_create(&c, NULL, NULL, &cm, &err))
        return -1;
    int64_t G = loom_cluster_gpus(&c);
    double best = 1e300;
    for (int64_t mbs = 1; mbs <= 8; mbs *= 2) {
        loom_model_opts o;
        loom_model_opts_init(&o);
        o.seq = seq, o.batch = mbs;
        loom_graph *g = NULL;
        if (loom_model_load(model, &o, &g, &err)) break;
        for (int64_t tp = 1; tp <= G; tp *= 2)
            for (int64_t pp = 1; tp * pp <= G; pp *= 2) {
                int64_t dp = G / (tp * pp);
                for (int zero = 0; zero <= 1; zero++)
                    for (int rc = 0; rc <= 1; rc++) {
                        loom_parallel p;
                        loom_parallel_init(&p);
                        p.tp = tp, p.pp = pp, p.dp = dp, p.mbs = mbs, p.gbs = gbs, p.seq = seq;
                        p.zero = zero, p.sp = tp > 1;
                        p.recompute = rc ? LOOM_RECOMPUTE_FULL : LOOM_RECOMPUTE_NONE;
                        loom_eval_result e;
                        loom_error e2 = {0};
                        if (loom_eval_megatron(g, cm, &p, &e, &e2) == LOOM_OK && e.fits &&
                            e.step_time_s < best) {
                            best = e.step_time_s;
                            snprintf(desc, n, "tp %lld pp %lld dp %lld mbs %lld zero %d %s",
                                     (long long)tp, (long long)pp, (long long)dp, (long long)mbs,
                                     zero, rc ? "full recompute" : "no recompute");
                        }
                        loom_eval_result_free(&e);
                    }
            }
        loom_graph_destroy(g);
    }
    loom_cost_model_destroy(cm);
    return best;
}

static void test_llama8b_vs_megatron(void)
{
    loom_plan_request r;
    train_request(&r, "examples/models/llama-3-8b.json", "dgx-h100-x1", 256, 4096);
    loom_plan *p = plan_ok(&r, "llama-3-8b on 8 H100");
    char desc[128] = "";
    double mega = megatron_best("examples/models/llama-3-8b.json", "dgx-h100-x1", 256, 4096, desc,
                                sizeof desc);
    printf("  best Megatron by loom eval: %s, %.4g s; the plan: %.4g s\n", desc, mega,
           p ? p->step_time_s : -1.0);
    CHECK(mega > 0 && mega < 1e300);
    if (p) CHECK(p->step_time_s <= mega * (1 + 1e-9));
    loom_plan_destroy(p);
}

/* A --space megatron plan: uniform stages with one logical mesh and one
 * recompute setting, which the Megatron exporter takes without obstacles. */
static void megatron_expressible(const loom_plan *p)
{
    if (!p) return;
    for (int32_t i = 0; i < p->n_stages; i++) {
        CHECK_INT_EQ(p->stages[i].n_gpus, p->stages[0].n_gpus);
        CHECK_INT_EQ(p->stages[i].mesh[0], p->stages[0].mesh[0]);
        CHECK_INT_EQ(p->stages[i].recompute, p->stages[0].recompute);
    }
    loom_runtime_config c;
    loom_export_list obs = {0};
    loom_error err;
    CHECK_INT_EQ(loom_export_from_plan(p, &c, &obs, &err), LOOM_OK);
    for (int i = 0; i < obs.n; i++) fprintf(stderr, "megatron obstacle: %s\n", obs.item[i]);
    CHECK_INT_EQ(obs.n, 0);
}

static void test_large(void)
{
    loom_plan_request r;
    train_request(&r, "examples/models/llama-3-70b.json", "dgx-h100-x8", 2048, 8192);
    loom_plan *p = plan_ok(&r, "llama-3-70b on 64 H100");
    if (p) CHECK(p->memory_per_gpu_bytes <= p->gpu_memory_bytes);
    loom_plan_destroy(p);

    train_request(&r, "examples/models/llama-3.1-405b.json", "dgx-h100-x2048", 2048, 8192);
    p = plan_ok(&r, "llama-3.1-405b on 16384 H100");
    if (p) {
        CHECK_INT_EQ(p->data_parallel * p->gpus_per_replica, 16384);
        CHECK(p->pipeline_stages > 1);   /* 405B does not fit in one node's stage */
    }
    loom_plan_destroy(p);

    /* Megatron's space: uniform stages whose tensor parallelism exporters can express */
    train_request(&r, "examples/models/llama-3-70b.json", "dgx-h100-x8", 256, 4096);
    r.search.megatron_only = true;
    p = plan_ok(&r, "llama-3-70b, --space megatron");
    megatron_expressible(p);
    loom_plan_destroy(p);
    /* DeepSeek-V3: a mixed plan once put full recompute on some stages only */
    train_request(&r, "examples/models/deepseek-v3.json", "dgx-h100-x32", 256, 4096);
    r.search.megatron_only = true;
    p = plan_ok(&r, "deepseek-v3, --space megatron");
    megatron_expressible(p);
    loom_plan_destroy(p);
}

static void test_inference(void)
{
    loom_plan_request r;
    train_request(&r, "examples/models/llama-3-8b.json", "dgx-h100-x1", 32, 8192);
    r.problem.inference = true;
    r.problem.objective = LOOM_OBJ_LATENCY;
    loom_plan *p = plan_ok(&r, "llama-3-8b serving, latency");
    if (p) {
        CHECK(p->latency_per_token_s > 0);
        CHECK_NEAR_REL(p->tokens_per_s, 32.0 / p->latency_per_token_s, 1e-12);
        int64_t kv = 0;
        for (int32_t i = 0; i < p->n_stages; i++) {
            kv += p->stages[i].memory.kv_cache * p->stages[i].n_gpus;
            CHECK_INT_EQ(p->stages[i].memory.optimizer, 0);
            CHECK_INT_EQ(p->stages[i].memory.grads, 0);
        }
        /* the whole KV cache of one replica: 2·layers·kv_heads·head_dim·2 bytes per token
         * (Llama-3-8B: 32 layers, 8 kv heads of 128) × its sequences × 8192 tokens */
        double want = 2.0 * 32 * 8 * 128 * 2 * 8192 * (32.0 / (double)p->data_parallel);
        CHECK_NEAR_REL((double)kv, want, 0.01);
    }
    loom_plan_destroy(p);

    r.problem.objective = LOOM_OBJ_THROUGHPUT;
    r.problem.latency_bound_s = 1.0;
    p = plan_ok(&r, "llama-3-8b serving, throughput");
    if (p) CHECK(p->latency_per_token_s <= 1.0);
    loom_plan_destroy(p);
}

static void test_cannot_fit(void)
{
    loom_plan_request r;
    train_request(&r, "examples/models/llama-3.1-405b.json", "dgx-h100-x1", 16, 8192);
    loom_plan *p = NULL;
    loom_plan_diag dg;
    loom_error err = {0};
    CHECK_INT_EQ(loom_plan_run(&r, &p, &dg, &err), LOOM_ERR_INFEASIBLE);
    CHECK(p == NULL);
    CHECK_STR_CONTAINS(err.msg, "no plan fits");
    /* 405B parameters at 18 bytes each (Adam, mixed precision) over 8 GPUs */
    loom_model_opts o;
    loom_model_opts_init(&o);
    loom_graph *g = NULL;
    CHECK_INT_EQ(loom_model_load("examples/models/llama-3.1-405b.json", &o, &g, &err), LOOM_OK);
    loom_graph_totals t;
    loom_graph_totals_get(g, &t);
    double state = (double)t.params * 18 / 8;
    printf("405B on 8 GPUs: needs %.1f GiB per GPU (model state alone %.1f GiB)\n",
           (double)dg.min_memory_bytes / 1073741824.0, state / 1073741824.0);
    CHECK((double)dg.min_memory_bytes >= state);
    CHECK((double)dg.min_memory_bytes <= 1.3 * state);
    loom_graph_destroy(g);

    /* bad requests */
    train_request(&r, "examples/models/gpt2.json", "dgx-h100-x1", 8, 1024);
    r.problem.objective = LOOM_OBJ_LATENCY;
    CHECK_INT_EQ(loom_plan_run(&r, &p, NULL, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "latency is for inference");
    train_request(&r, "examples/models/no-such-model.json", "dgx-h100-x1", 8, 1024);
    CHECK(loom_plan_run(&r, &p, NULL, &err) != LOOM_OK);
    CHECK_STR_CONTAINS(err.msg, "no-such-model.json");
}

int main(void)
{
    test_small_plan();
    test_validator();
    test_rank_memory();
    test_assumed();
    test_nvlink_fields();
    test_reader_errors();
    test_gpt2_one_gpu();
    test_llama8b_vs_megatron();
    test_large();
    test_inference();
    test_cannot_fit();
    return check_done();
}
