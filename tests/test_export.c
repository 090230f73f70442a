/*
 * test_export.c — the exporters and the Megatron-LM importer (planner/export*.c,
 * megatron_args.c, megatron_import.c, shell_words.c, megatron_model_json.c).
 *
 *  1. The compiled argument table equals planner/export/megatron_args.txt line for
 *     line, is sorted (binary search), and finds / suggests names.
 *  2. Plans built here (dense Llama-3-70B and MoE Mixtral-8x7B, training and
 *     serving) are written as loom-plan/1 fixtures and exported to every
 *     target that can run them; the outputs are compared with the golden
 *     files under tests/golden/export/ (LOOM_UPDATE_GOLDEN=1 rewrites them),
 *     and each is checked against its runtime's own identities: DeepSpeed's
 *     train_batch_size = micro × accumulation × DP world, torchtitan's and
 *     vLLM's degrees multiplying to the GPU count.
 *  3. Every Megatron-LM argument emitted for a set of configurations is in
 *     the list, with a value exactly when the list says it takes one.
 *  4. Round trip: parse(export(c)) == c for those configurations.
 *  5. Obstacles: plans a target cannot run are refused with messages naming
 *     the reason (per-stage TP sizes, 2-D sharding, ZeRO-1 for torchtitan, …).
 *  6. Importing launch scripts (variables, arrays, $(( )), quotes, layouts)
 *     gives the values a hand reading gives; unknown and contradictory flags
 *     give the expected messages with file and line.
 *  7. The model built from a launch line has the parameter count of the
 *     same model built from its HF config.json.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "base/fileio.h"
#include "base/json.h"
#include "graph/model.h"
#include "planner/export/export.h"
#include "planner/export/export_nearest.h"
#include "planner/export/export_target.h"
#include "planner/export/megatron_args.h"
#include "planner/import/megatron_import.h"
#include "planner/plan/plan.h"

#define GOLDEN "tests/golden/export/"
#define GIB ((int64_t)1 << 30)

static bool update_golden(void)
{
    const char *u = getenv("LOOM_UPDATE_GOLDEN");
    return u && *u && strcmp(u, "0");
}

/* Compares text with the golden file (or rewrites it). */
static void check_golden(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, GOLDEN "%s", name);
    loom_error err;
    if (update_golden()) {
        CHECK(loom_write_file_atomic(path, text, strlen(text), &err) == LOOM_OK);
        return;
    }
    char *want = NULL;
    size_t len = 0;
    if (loom_read_file(path, 0, &want, &len, &err)) {
        fprintf(stderr, "missing golden %s (%s); run with LOOM_UPDATE_GOLDEN=1\n", path, err.msg);
        CHECK(false);
        return;
    }
    if (strcmp(want, text) != 0) {
        fprintf(stderr, "%s differs from the output:\n----\n%s----\n", path, text);
        CHECK(false);
    } else {
        CHECK(true);
    }
    free(want);
}

/* ---- 1. the argument table ------------------------------------------------------- */

static void test_arg_table(void)
{
    char *text = NULL;
    size_t len = 0;
    loom_error err;
    CHECK(loom_read_file("planner/export/megatron_args.txt", 0, &text, &len, &err) == LOOM_OK);
    if (!text) return;
    /* every listed line is in the table with its kind, and the counts agree */
    size_t listed = 0;
    bool all_found = true;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || line[0] == '\0') continue;
        char name[128], kind[16];
        if (sscanf(line, "%127s %15s", name, kind) != 2) continue;
        listed++;
        const loom_megatron_arg *a = loom_megatron_arg_find(name);
        if (!a || strcmp(loom_megatron_arg_kind_name(a->kind), kind) != 0) {
            fprintf(stderr, "megatron_args.txt: %s %s not in the compiled table\n", name, kind);
            all_found = false;
        }
    }
    free(text);
    CHECK(all_found);
    CHECK_INT_EQ(loom_megatron_arg_count(), listed);
    CHECK(listed > 500);
    bool sorted = true;
    for (size_t i = 1; i < loom_megatron_arg_count(); i++)
        if (strcmp(loom_megatron_arg_at(i - 1)->name, loom_megatron_arg_at(i)->name) >= 0)
            sorted = false;
    CHECK(sorted);

    const loom_megatron_arg *tp = loom_megatron_arg_find("--tensor-model-parallel-size");
    CHECK(tp && tp->kind == LOOM_MARG_INT);
    const loom_megatron_arg *sp = loom_megatron_arg_find("--sequence-parallel");
    CHECK(sp && sp->kind == LOOM_MARG_FLAG);
    const loom_megatron_arg *dp = loom_megatron_arg_find("--data-path");
    CHECK(dp && dp->kind == LOOM_MARG_LIST);
    CHECK(loom_megatron_arg_find("--tensor-parallel-size") == NULL);
    CHECK(loom_megatron_arg_find("--num-layers ") == NULL);
    CHECK(strcmp(loom_megatron_arg_nearest("--tensor-parallel-size"),
                 "--tensor-model-parallel-size") == 0);
    CHECK(strcmp(loom_megatron_arg_nearest("--micro-batch"), "--micro-batch-size") == 0);
    CHECK(strcmp(loom_megatron_arg_nearest("--squence-parallel"), "--sequence-parallel") == 0);
    CHECK_STR_CONTAINS(loom_megatron_args_source, "arguments.py");
}

/* ---- 2. plans ------------------------------------------------------------------------ */

typedef enum { OPS_NONE, OPS_DENSE, OPS_MOE_DP, OPS_MOE_ALL, OPS_CP } ops_kind;

typedef struct {
    const char *name;
    const char *model;            /* bundled config under examples/models/ */
    loom_plan_mode mode;
    int64_t nodes, gpn;
    int64_t replicas, pp, vpp, tp, dp_in;   /* stage mesh (dp_in, tp) */
    int64_t micro_batch, gbs, seq;          /* micro_batch per replica */
    int32_t chunks[16];                     /* blocks per stage; {0} = even */
    bool sp;
    loom_recompute rc;
    int zero;
    ops_kind ops;
} plan_spec;

/* Representative ops of a Megatron-style stage on mesh (dp_in, tp): axis 0
 * splits the batch (and experts for EP), axis 1 heads and MLP columns. */
static void add_ops(loom_plan_stage *s, int32_t layer, ops_kind k, bool sp)
{
    loom_error err;
    int32_t n = k == OPS_DENSE || k == OPS_CP ? 3 : 2;
    if (loom_plan_stage_set_ops(s, n, &err)) return;
    loom_plan_op *o = s->ops;
    snprintf(o[0].name, sizeof o[0].name, "model.layers.%d.self_attn.q_proj", (int)layer - 1);
    snprintf(o[0].strategy, sizeof o[0].strategy, "heads@1");
    snprintf(o[0].input, sizeof o[0].input, "b@0 s h");
    snprintf(o[0].weight, sizeof o[0].weight, "h heads@1 dh");
    snprintf(o[0].output, sizeof o[0].output, "b@0 s heads@1 dh");
    if (k == OPS_CP) {
        /* context parallel on axis 0: every activation holds a slice of the
         * sequence of the whole (unsplit) batch; TP on axis 1 */
        snprintf(o[0].input, sizeof o[0].input, "b s@0 h");
        snprintf(o[0].output, sizeof o[0].output, "b s@0 heads@1 dh");
        snprintf(o[1].name, sizeof o[1].name, "model.layers.%d.self_attn.sdpa", (int)layer - 1);
        snprintf(o[1].strategy, sizeof o[1].strategy, "heads@1 cp@0");
        snprintf(o[1].input, sizeof o[1].input, "b s@0 heads@1 dh, b s kvh@1 dh, b s kvh@1 dh");
        snprintf(o[1].output, sizeof o[1].output, "b s@0 heads@1 dh");
        snprintf(o[2].name, sizeof o[2].name, "model.layers.%d.mlp.down_proj", (int)layer - 1);
        snprintf(o[2].strategy, sizeof o[2].strategy, "f@1 AR@1");
        snprintf(o[2].input, sizeof o[2].input, "b s@0 f@1");
        snprintf(o[2].weight, sizeof o[2].weight, "f@1 h");
        snprintf(o[2].output, sizeof o[2].output, "b s@0 h");
    } else if (k == OPS_DENSE) {
        snprintf(o[1].name, sizeof o[1].name, "model.layers.%d.mlp.down_proj", (int)layer - 1);
        snprintf(o[1].strategy, sizeof o[1].strategy, "f@1 %s@1", sp ? "RS" : "AR");
        snprintf(o[1].input, sizeof o[1].input, "b@0 s f@1");
        snprintf(o[1].weight, sizeof o[1].weight, "f@1 h");
        snprintf(o[1].output, sizeof o[1].output, sp ? "b@0 s@1 h" : "b@0 s h");
        snprintf(o[2].name, sizeof o[2].name, "model.layers.%d.post_attention_layernorm",
                 (int)layer - 1);
        snprintf(o[2].strategy, sizeof o[2].strategy, sp ? "s@1" : "replicated");
        snprintf(o[2].input, sizeof o[2].input, sp ? "b@0 s@1 h" : "b@0 s h");
        snprintf(o[2].weight, sizeof o[2].weight, "h");
        snprintf(o[2].output, sizeof o[2].output, sp ? "b@0 s@1 h" : "b@0 s h");
    } else {
        const char *e = k == OPS_MOE_ALL ? "e@01" : "e@0";
        snprintf(o[1].name, sizeof o[1].name, "model.layers.%d.block_sparse_moe.experts.w1",
                 (int)layer - 1);
        snprintf(o[1].strategy, sizeof o[1].strategy, "%s", e);
        snprintf(o[1].input, sizeof o[1].input, "%s c h", e);
        snprintf(o[1].weight, sizeof o[1].weight, "%s h f", e);
        snprintf(o[1].output, sizeof o[1].output, "%s c f", e);
    }
    for (int32_t i = 0; i < n; i++) o[i].layer = layer;
}

static loom_plan *make_plan(const plan_spec *ps)
{
    loom_error err;
    char path[256];
    snprintf(path, sizeof path, "examples/models/%s.json", ps->model);
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    mo.seq = ps->seq;
    loom_graph *g = NULL;
    if (loom_model_load(path, &mo, &g, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        exit(2);
    }
    loom_plan *p = NULL;
    if (loom_plan_create(&p, &err)) exit(2);
    loom_graph_totals tot;
    loom_graph_totals_get(g, &tot);
    snprintf(p->model, sizeof p->model, "%s", ps->model);
    snprintf(p->cluster, sizeof p->cluster, "dgx-h100-x%lld", (long long)ps->nodes);
    p->mode = ps->mode;
    p->gbs = ps->gbs;
    p->seq = ps->seq;
    p->dtype = LOOM_DTYPE_BF16;
    p->objective = ps->mode == LOOM_PLAN_INFER ? LOOM_OBJ_THROUGHPUT : LOOM_OBJ_TIME;
    snprintf(p->space, sizeof p->space, "full");
    p->model_info = *loom_graph_info_c(g);
    p->model_params = tot.params;
    p->layer_count = loom_graph_layer_count(g);
    loom_graph_destroy(g);
    p->nodes = ps->nodes;
    p->gpus_per_node = ps->gpn;
    snprintf(p->gpu, sizeof p->gpu, "H100-SXM-80GB");
    p->gpu_memory_bytes = 80 * GIB;
    p->gpu_peak_flops = 989e12;
    p->price_per_gpu_hour_usd = 2.5;
    p->power_w = 700;
    snprintf(p->schedule_kind, sizeof p->schedule_kind, "%s",
             ps->mode == LOOM_PLAN_INFER ? "inference" : ps->vpp > 1 ? "interleaved" : "1f1b");
    p->micro_batch = ps->micro_batch;
    p->micro_batches = ps->gbs / ps->replicas / ps->micro_batch;
    p->virtual_stages = ps->vpp;
    p->pipeline_stages = ps->pp;
    p->data_parallel = ps->replicas;
    int64_t G = ps->tp * ps->dp_in;
    p->gpus_per_replica = ps->pp * G;

    int32_t n = (int32_t)(ps->pp * ps->vpp), L = (int32_t)p->model_info.layers;
    if (loom_plan_set_stages(p, n, &err)) exit(2);
    int32_t next_block = 1;
    int64_t worst = 0;
    bool uneven = false;   /* {0} = even; a 0 among others is an empty stage */
    for (int32_t i = 0; i < n && i < 16; i++) uneven = uneven || ps->chunks[i] != 0;
    for (int32_t i = 0; i < n; i++) {
        loom_plan_stage *s = &p->stages[i];
        int32_t blocks = uneven ? ps->chunks[i] : L / n;
        s->group = (int32_t)(i % ps->pp);
        s->first_layer = i == 0 ? 0 : next_block;
        s->last_layer = next_block + blocks - 1 + (i == n - 1 ? 1 : 0);
        int32_t first_block = next_block;
        next_block += blocks;
        if (G <= ps->gpn) s->submesh_nodes = 1, s->submesh_gpus = G;
        else s->submesh_nodes = G / ps->gpn, s->submesh_gpus = ps->gpn;
        s->mesh[0] = ps->dp_in;
        s->mesh[1] = ps->tp;
        if (loom_plan_stage_set_gpus(s, G, &err)) exit(2);
        /* Megatron's rank order: a stage's replicas side by side, then the next rank */
        for (int64_t k = 0; k < G; k++) s->gpus[k] = s->group * G * ps->replicas + k;
        s->replica_stride = G;
        s->tensor_parallel = ps->tp;
        s->data_parallel = ps->dp_in;
        s->sequence_parallel = ps->sp;
        s->recompute = ps->rc;
        s->zero = ps->zero;
        s->in_flight = ps->mode == LOOM_PLAN_INFER ? 1 : (double)(ps->pp - s->group);
        s->compute_s = 0.25 + 0.01 * i;
        s->comm_s = 0.05;
        s->grad_sync_s = 0.5;
        s->time_s = s->compute_s + s->comm_s;
        s->memory = (loom_plan_memory){.params = 10 * GIB + i,
                                       .grads = 5 * GIB,
                                       .optimizer = 20 * GIB,
                                       .activations = 12 * GIB,
                                       .kv_cache = 0,
                                       .other = 3 * GIB};
        loom_plan_memory_sum(&s->memory);
        if (s->memory.total > worst) worst = s->memory.total;
        if (ps->ops != OPS_NONE && blocks > 0) add_ops(s, first_block, ps->ops, ps->sp);
    }
    p->step_time_s = 12.5;
    p->tokens_per_s = (double)ps->gbs * (double)ps->seq / 12.5;
    p->latency_per_token_s = ps->mode == LOOM_PLAN_INFER ? 0.025 : 0;
    p->model_tflops_per_gpu = 400;
    p->mfu = 0.4;
    p->memory_per_gpu_bytes = worst;
    p->breakdown = (loom_step_breakdown){.compute_s = 10.0, .tp_comm_s = 1.0, .bubble_s = 1.0,
                                          .p2p_s = 0.25, .grad_sync_s = 0.15, .optimizer_s = 0.1};
    p->cost_per_step_usd = p->cost_per_mtoken_usd = -1;
    p->energy_per_step_j = p->energy_per_token_j = -1;
    p->measured_share = 0;
    if (loom_plan_check(p, ps->name, &err)) {
        fprintf(stderr, "test plan %s invalid: %s\n", ps->name, err.msg);
        exit(2);
    }
    return p;
}

/* The plans of the golden files. */
static const plan_spec specs[] = {
    /* 64 H100: PP 4 x TP 8 x 2 replicas, uneven first/last stage, SP, selective, dist-opt */
    {"llama-3-70b-pp4", "llama-3-70b", LOOM_PLAN_TRAIN, 8, 8, 2, 4, 1, 8, 1, 1, 128, 8192,
     {19, 20, 20, 21}, true, LOOM_RECOMPUTE_SELECTIVE, 1, OPS_DENSE},
    /* 64 H100: TP 8 x DP 8, full recompute, ZeRO-2: Megatron, DeepSpeed and torchtitan */
    {"llama-3-70b-tp8", "llama-3-70b", LOOM_PLAN_TRAIN, 8, 8, 8, 1, 1, 8, 1, 1, 64, 8192, {0},
     false, LOOM_RECOMPUTE_FULL, 2, OPS_DENSE},
    /* 32 H100: PP 2 of a (8, 2) mesh: EP 8 over the in-stage data-parallel axis, TP 2 + SP */
    {"mixtral-8x7b-ep8", "mixtral-8x7b", LOOM_PLAN_TRAIN, 4, 8, 1, 2, 1, 2, 8, 8, 256, 4096, {0},
     true, LOOM_RECOMPUTE_NONE, 1, OPS_MOE_DP},
    /* 32 H100: pure data parallel (8 replicas of a (4, 1) mesh), EP 4, ZeRO-3 */
    {"mixtral-8x7b-dp", "mixtral-8x7b", LOOM_PLAN_TRAIN, 4, 8, 8, 1, 1, 1, 4, 4, 128, 4096, {0},
     false, LOOM_RECOMPUTE_FULL, 3, OPS_MOE_DP},
    /* 8 H100: Llama-3-8B, pure data parallel, ZeRO-2 */
    {"llama-3-8b-dp", "llama-3-8b", LOOM_PLAN_TRAIN, 1, 8, 8, 1, 1, 1, 1, 1, 64, 8192, {0},
     false, LOOM_RECOMPUTE_NONE, 2, OPS_DENSE},
    /* 512 H100: Llama-3.1-405B, TP 8 x PP 16 x 4 replicas, 7-layer first and last stages */
    {"llama-3.1-405b-pp16", "llama-3.1-405b", LOOM_PLAN_TRAIN, 64, 8, 4, 16, 1, 8, 1, 1, 256, 8192,
     {7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7}, true, LOOM_RECOMPUTE_FULL, 1, OPS_DENSE},
    /* 256 H100: DeepSeek-V3, PP 16 with an embedding-only first stage, TP 2, EP 8 */
    {"deepseek-v3-pp16", "deepseek-v3", LOOM_PLAN_TRAIN, 32, 8, 1, 16, 1, 2, 8, 8, 256, 4096,
     {0, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5}, true, LOOM_RECOMPUTE_FULL, 1, OPS_MOE_DP},
    /* serving: 16 H100, TP 8 x PP 2 with an uneven split */
    {"llama-3-70b-serve", "llama-3-70b", LOOM_PLAN_INFER, 2, 8, 1, 2, 1, 8, 1, 32, 64, 8192,
     {41, 39}, false, LOOM_RECOMPUTE_NONE, 0, OPS_DENSE},
    /* serving: 8 H100, a (2, 4) mesh, experts over all 8 GPUs (vLLM expert parallel) */
    {"mixtral-8x7b-serve", "mixtral-8x7b", LOOM_PLAN_INFER, 1, 8, 1, 1, 1, 4, 2, 64, 64, 16384,
     {0}, false, LOOM_RECOMPUTE_NONE, 0, OPS_MOE_ALL},
};
#define N_SPECS (int)(sizeof specs / sizeof specs[0])

static const char *const ext[LOOM_EXPORT_TARGET_COUNT] = {"sh", "yaml", "json", "py"};

/* Value of `key = v` / `key: v` / `"key": v` in rendered text, or -1. */
static long long find_num(const char *text, const char *key)
{
    char pat[96];
    const char *forms[] = {"%s = ", "%s: ", "\"%s\": ", "%s="};
    for (int f = 0; f < 4; f++) {
        snprintf(pat, sizeof pat, forms[f], key);
        const char *at = strstr(text, pat);
        if (at && (at == text || at[-1] == '\n' || at[-1] == ' ')) return atoll(at + strlen(pat));
    }
    return -1;
}

/* Each runtime's own consistency rules on its rendered config. */
static void check_identities(const loom_runtime_config *c, loom_export_target t, const char *text)
{
    int64_t gpus = loom_runtime_gpus(c);
    if (t == LOOM_EXPORT_DEEPSPEED) {
        cJSON *j = NULL;
        loom_error err;
        CHECK(loom_json_parse("deepspeed", text, strlen(text), &j, &err) == LOOM_OK);
        cJSON_Delete(j);
        /* DeepSpeed (runtime/config.py _batch_assertion at edaa7221):
         * train_batch_size = micro x accumulation x world, where world is the
         * DP size when an mpu is passed (PipelineModule's grid) and every rank
         * when not (AutoTP training without PP); then the key is left out and
         * DeepSpeed derives it. Either way micro x accumulation x DP = gbs. */
        long long tbs = find_num(text, "train_batch_size"),
                  mb = find_num(text, "train_micro_batch_size_per_gpu"),
                  gas = find_num(text, "gradient_accumulation_steps");
        long long tpd = find_num(text, "autotp_size");
        if (tpd < 0) tpd = 1;
        long long dp = gpus / (tpd * c->par.pp);
        long long world = c->par.pp > 1 ? dp : gpus / c->par.pp;
        CHECK_INT_EQ(mb * gas * dp, c->par.gbs);
        if (tpd > 1 && c->par.pp == 1) CHECK_INT_EQ(tbs, -1);
        else CHECK_INT_EQ(tbs, mb * gas * world);
    } else if (t == LOOM_EXPORT_TORCHTITAN) {
        /* torchtitan: replicate x shard x cp x tp x pp = world; global = local x dp x accumulation */
        long long rep = find_num(text, "data_parallel_replicate_degree"),
                  shard = find_num(text, "data_parallel_shard_degree"),
                  tpd = find_num(text, "tensor_parallel_degree"),
                  cpd = find_num(text, "context_parallel_degree"),
                  ppd = find_num(text, "pipeline_parallel_degree");
        CHECK_INT_EQ(rep * shard * tpd * cpd * ppd, gpus);
        long long local = find_num(text, "t.num_tokens_per_microbatch_per_dp_rank"),
                  global = find_num(text, "t.num_tokens_per_train_step");
        CHECK_INT_EQ(global, c->par.gbs * c->par.seq);
        /* trainer.py at b5bcd76c: local is one pipeline micro-batch, the
         * step reads num_pp_microbatches of them per DP rank */
        long long mb = ppd > 1 ? find_num(text, "num_pp_microbatches") : 1;
        CHECK(global % (local * mb * rep * shard) == 0);
        CHECK_INT_EQ(local, c->par.mbs * c->par.seq);
        if (ppd > 1) CHECK_INT_EQ(mb, loom_runtime_microbatches(c));
    } else if (t == LOOM_EXPORT_VLLM) {
        long long tpd = find_num(text, "tensor-parallel-size"),
                  ppd = find_num(text, "pipeline-parallel-size"),
                  dpd = find_num(text, "data-parallel-size");
        CHECK_INT_EQ(tpd * ppd * dpd, gpus);
        CHECK(find_num(text, "max-num-batched-tokens") >= find_num(text, "max-num-seqs"));
    }
}

/* Exports every fixture to every target: golden where it runs, obstacles
 * where it does not; `expect` lists, per spec, which targets run it. */
static void test_goldens(void)
{
    static const bool runs[N_SPECS][LOOM_EXPORT_TARGET_COUNT] = {
        /* megatron vllm deepspeed torchtitan */
        {true, false, false, false},
        {true, false, true, true},
        {true, false, false, false},
        {true, false, true, false},
        {true, false, true, true},
        {true, false, false, false},
        {true, false, false, false},
        {false, true, false, false},
        {false, true, false, false},
    };
    for (int i = 0; i < N_SPECS; i++) {
        loom_plan *p = make_plan(&specs[i]);
        char name[128], source[160];
        snprintf(name, sizeof name, "%s.plan.json", specs[i].name);
        snprintf(source, sizeof source, GOLDEN "%s", name);
        char *json = loom_plan_to_json(p, LOOM_PLAN_JSON_NO_TIMINGS);
        CHECK(json != NULL);
        if (json) check_golden(name, json);
        loom_plan_destroy(p);
        /* export from the plan as read back from its JSON */
        p = NULL;
        loom_error err;
        CHECK(loom_plan_parse(source, json, strlen(json), &p, &err) == LOOM_OK);
        free(json);
        if (!p) continue;
        loom_runtime_config c;
        loom_export_list obs = {0};
        CHECK(loom_export_from_plan(p, &c, &obs, &err) == LOOM_OK);
        if (obs.n)
            fprintf(stderr, "%s: unexpected plan obstacle: %s\n", specs[i].name, obs.item[0]);
        CHECK_INT_EQ(obs.n, 0);
        for (int t = 0; t < LOOM_EXPORT_TARGET_COUNT; t++) {
            char *text = NULL;
            loom_export_list notes = {0}, ob = {0};
            loom_status s =
                loom_export_render(&c, (loom_export_target)t, source, &text, &notes, &ob, &err);
            if (runs[i][t]) {
                if (s) fprintf(stderr, "%s -> %s: %s (%s)\n", specs[i].name,
                               loom_export_target_name(t), err.msg, ob.n ? ob.item[0] : "");
                CHECK(s == LOOM_OK);
                if (!text) continue;
                snprintf(name, sizeof name, "%s.%s.%s", specs[i].name, loom_export_target_name(t),
                         ext[t]);
                check_golden(name, text);
                check_identities(&c, (loom_export_target)t, text);
                /* deterministic: the same config renders the same bytes */
                char *again = NULL;
                CHECK(loom_export_render(&c, (loom_export_target)t, source, &again, NULL, NULL,
                                         &err) == LOOM_OK);
                CHECK(again && strcmp(again, text) == 0);
                free(again);
            } else {
                CHECK(s == LOOM_ERR_UNSUPPORTED);
                CHECK(text == NULL);
                CHECK(ob.n > 0);
                CHECK_STR_CONTAINS(err.msg, "cannot run this plan as planned");
            }
            free(text);
        }
        loom_plan_destroy(p);
    }
}

/* ---- 3 + 4. configurations: every flag listed; parse(export(c)) == c ------------------ */

static bool has_item(const loom_export_list *l, const char *needle)
{
    for (int i = 0; i < l->n; i++)
        if (strstr(l->item[i], needle)) return true;
    fprintf(stderr, "no obstacle mentions \"%s\"; got:\n", needle);
    for (int i = 0; i < l->n; i++) fprintf(stderr, "  %s\n", l->item[i]);
    return false;
}

static loom_model_info model_of(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "examples/models/%s.json", name);
    loom_graph *g = NULL;
    loom_error err;
    if (loom_model_load(path, NULL, &g, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        exit(2);
    }
    loom_model_info m = *loom_graph_info_c(g);
    loom_graph_destroy(g);
    return m;
}

static loom_runtime_config base_config(const char *model, int64_t tp, int64_t pp, int64_t dp,
                                       int64_t mbs, int64_t gbs, int64_t seq)
{
    loom_runtime_config c;
    loom_runtime_config_init(&c);
    c.model = model_of(model);
    snprintf(c.model_name, sizeof c.model_name, "%s", model);
    c.par.tp = tp, c.par.pp = pp, c.par.dp = dp, c.par.mbs = mbs, c.par.gbs = gbs, c.par.seq = seq;
    return c;
}

static void check_same_config(const char *what, const loom_runtime_config *a,
                              const loom_runtime_config *b)
{
    const loom_parallel *x = &a->par, *y = &b->par;
    int before = check_failures;
    CHECK_INT_EQ(x->tp, y->tp);
    CHECK_INT_EQ(x->pp, y->pp);
    CHECK_INT_EQ(x->dp, y->dp);
    CHECK_INT_EQ(x->cp, y->cp);
    CHECK_INT_EQ(x->ep, y->ep);
    CHECK_INT_EQ(x->etp, y->etp);
    CHECK_INT_EQ(x->vpp, y->vpp);
    CHECK_INT_EQ(x->mbs, y->mbs);
    CHECK_INT_EQ(x->gbs, y->gbs);
    CHECK_INT_EQ(x->seq, y->seq);
    CHECK_INT_EQ(x->sp, y->sp);
    CHECK_INT_EQ(x->recompute, y->recompute);
    CHECK_INT_EQ(x->recompute_layers, y->recompute_layers);
    CHECK_INT_EQ(x->zero, y->zero);
    CHECK_INT_EQ(x->dist_opt, y->dist_opt);
    CHECK_INT_EQ(x->dtype, y->dtype);
    CHECK_INT_EQ(x->flash, y->flash);
    CHECK_INT_EQ(x->first_stage_layers, y->first_stage_layers);
    CHECK_INT_EQ(x->last_stage_layers, y->last_stage_layers);
    CHECK_INT_EQ(x->overlap_grad_reduce, y->overlap_grad_reduce);
    CHECK_INT_EQ(x->tp_comm_overlap, y->tp_comm_overlap);
    CHECK_INT_EQ(x->overlap_p2p, y->overlap_p2p);
    CHECK_INT_EQ(x->moe_a2a_overlap, y->moe_a2a_overlap);
    CHECK_INT_EQ(x->moe_hybridep, y->moe_hybridep);
    CHECK_INT_EQ(a->n_chunks, b->n_chunks);
    for (int32_t i = 0; i < a->n_chunks && i < b->n_chunks; i++)
        CHECK_INT_EQ(a->chunk_layers[i], b->chunk_layers[i]);
    CHECK_INT_EQ(a->gpus_per_node, b->gpus_per_node);
    const loom_model_info *m = &a->model, *n = &b->model;
    CHECK_INT_EQ(m->layers, n->layers);
    CHECK_INT_EQ(m->hidden, n->hidden);
    CHECK_INT_EQ(m->heads, n->heads);
    CHECK_INT_EQ(m->kv_heads, n->kv_heads);
    CHECK_INT_EQ(m->head_dim, n->head_dim);
    CHECK_INT_EQ(m->ffn, n->ffn);
    CHECK_INT_EQ(m->vocab, n->vocab);
    CHECK_INT_EQ(m->experts, n->experts);
    CHECK_INT_EQ(m->experts_topk, n->experts_topk);
    CHECK_INT_EQ(m->moe_ffn, n->moe_ffn);
    CHECK_INT_EQ(m->shared_experts, n->shared_experts);
    CHECK_INT_EQ(m->first_dense, n->first_dense);
    CHECK_INT_EQ(m->tied_embeddings, n->tied_embeddings);
    CHECK_INT_EQ(m->gated_mlp, n->gated_mlp);
    CHECK_INT_EQ(m->qkv_bias, n->qkv_bias);
    CHECK_INT_EQ(m->q_lora_rank, n->q_lora_rank);
    CHECK_INT_EQ(m->kv_lora_rank, n->kv_lora_rank);
    CHECK_INT_EQ(m->qk_rope_head_dim, n->qk_rope_head_dim);
    CHECK_INT_EQ(m->v_head_dim, n->v_head_dim);
    if (strncmp(m->arch, "deepseek", 8) == 0) CHECK(strcmp(m->arch, n->arch) == 0);
    if (check_failures != before) fprintf(stderr, "  (round trip of %s)\n", what);
}

static void test_configs(void)
{
    loom_runtime_config cs[16];
    const char *what[16];
    int n = 0;
    loom_error err;

    /* dense, PP 4 x TP 8 x DP 2, SP, selective, dist-opt, uneven first/last */
    cs[n] = base_config("llama-3-70b", 8, 4, 2, 1, 128, 8192);
    cs[n].par.sp = true, cs[n].par.recompute = LOOM_RECOMPUTE_SELECTIVE, cs[n].par.zero = 1;
    cs[n].n_chunks = 4;
    memcpy(cs[n].chunk_layers, (int32_t[]){19, 20, 20, 21}, 4 * sizeof(int32_t));
    what[n++] = "llama-3-70b first/last";
    /* interleaved 2 chunks per rank, even; full recompute of 3 layers per stage; fp8 */
    cs[n] = base_config("llama-3-70b", 8, 4, 2, 1, 256, 8192);
    cs[n].par.vpp = 2, cs[n].par.recompute = LOOM_RECOMPUTE_FULL, cs[n].par.recompute_layers = 3;
    cs[n].par.dtype = LOOM_DTYPE_FP8, cs[n].par.sp = true, cs[n].par.tp_comm_overlap = true;
    what[n++] = "llama-3-70b interleaved";
    /* interleaved with an uneven split: a layout; embedding alone on chunk 0;
     * blocking p2p (--no-overlap-p2p-communication) */
    cs[n] = base_config("llama-3-70b", 8, 4, 1, 1, 64, 8192);
    cs[n].par.vpp = 2, cs[n].n_chunks = 8, cs[n].par.overlap_p2p = false;
    memcpy(cs[n].chunk_layers, (int32_t[]){0, 12, 12, 12, 11, 11, 11, 11}, 8 * sizeof(int32_t));
    what[n++] = "llama-3-70b layout";
    /* PP 2, the first stage lighter; unfused attention; fp16; context parallel 2 */
    cs[n] = base_config("llama-3-8b", 4, 2, 2, 2, 64, 8192);
    cs[n].par.cp = 2, cs[n].par.dtype = LOOM_DTYPE_FP16, cs[n].par.flash = false;
    cs[n].model.flash_attention = false;
    cs[n].n_chunks = 2;
    memcpy(cs[n].chunk_layers, (int32_t[]){14, 18}, 2 * sizeof(int32_t));
    what[n++] = "llama-3-8b pp2";
    /* MoE: EP 8, expert TP 1, ZeRO-1; interleaved with the EP all-to-all overlap */
    cs[n] = base_config("mixtral-8x7b", 2, 2, 8, 1, 256, 4096);
    cs[n].par.ep = 8, cs[n].par.etp = 1, cs[n].par.sp = true, cs[n].par.zero = 1;
    cs[n].par.vpp = 2, cs[n].par.moe_a2a_overlap = true;
    what[n++] = "mixtral ep8";
    /* MoE: pure DP + EP, ZeRO-3 (Megatron FSDP), the HybridEP dispatcher
     * (--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend
     * hybridep, read back as moe_hybridep) */
    cs[n] = base_config("mixtral-8x7b", 1, 1, 32, 1, 128, 4096);
    cs[n].par.ep = 4, cs[n].par.zero = 3, cs[n].par.recompute = LOOM_RECOMPUTE_FULL;
    cs[n].par.moe_hybridep = true;
    what[n++] = "mixtral fsdp";
    /* GPT-2: LayerNorm, learned positions, biases, tied */
    cs[n] = base_config("gpt2", 1, 1, 8, 8, 512, 1024);
    cs[n].par.zero = 2;
    what[n++] = "gpt2";
    /* Qwen2: q/k/v bias, GQA, untied */
    cs[n] = base_config("qwen2-72b", 8, 2, 4, 1, 64, 4096);
    cs[n].par.sp = true;
    what[n++] = "qwen2-72b";
    /* Mistral with 16 GPUs per node */
    cs[n] = base_config("mistral-7b", 2, 1, 16, 2, 128, 4096);
    cs[n].gpus_per_node = 16;
    what[n++] = "mistral-7b";

    /* DeepSeek-V3: MLA ranks, shared experts, dense first layers, sigmoid router */
    int deepseek = n;
    cs[n] = base_config("deepseek-v3", 8, 16, 8, 1, 1024, 4096);
    cs[n].par.ep = 64, cs[n].par.etp = 1, cs[n].n_chunks = 16;
    for (int i = 0; i < 16; i++) cs[n].chunk_layers[i] = i < 15 ? 4 : 1;
    what[n++] = "deepseek-v3";

    for (int i = 0; i < n; i++) {
        CHECK(loom_runtime_config_normalize(&cs[i], &err) == LOOM_OK);
        int32_t chunks[LOOM_EXPORT_MAX_CHUNKS];
        CHECK(loom_runtime_chunks(&cs[i], chunks, &err) == LOOM_OK);
        loom_megatron_kv kv[LOOM_MEGATRON_MAX_ARGS];
        int na = loom_export_megatron_args(&cs[i], chunks, kv);
        CHECK(na > 10 && na < LOOM_MEGATRON_MAX_ARGS);
        for (int k = 0; k < na; k++) {
            const loom_megatron_arg *a = loom_megatron_arg_find(kv[k].name);
            if (!a)
                fprintf(stderr, "%s: emitted %s, which Megatron-LM does not have\n", what[i],
                        kv[k].name);
            CHECK(a != NULL);
            if (!a) continue;
            /* a value exactly when the argument takes one */
            CHECK((a->kind == LOOM_MARG_FLAG) == (kv[k].value[0] == '\0'));
            if (a->kind == LOOM_MARG_INT)
                CHECK(strspn(kv[k].value, "0123456789") == strlen(kv[k].value));
        }

        /* round trip through the rendered launch script */
        char *text = NULL;
        loom_export_list obs = {0}, notes = {0};
        loom_status s =
            loom_export_render(&cs[i], LOOM_EXPORT_MEGATRON, "test", &text, &notes, &obs, &err);
        if (i == deepseek && text) {
            /* DeepSeek-V3's config.json: q_lora_rank 1536, kv_lora_rank 512,
             * qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128 */
            CHECK_STR_CONTAINS(text, "--q-lora-rank 1536");
            CHECK_STR_CONTAINS(text, "--kv-lora-rank 512");
            CHECK_STR_CONTAINS(text, "--qk-head-dim 128");
            CHECK_STR_CONTAINS(text, "--qk-pos-emb-head-dim 64");
            CHECK_STR_CONTAINS(text, "--v-head-dim 128");
            CHECK_STR_CONTAINS(text, "--moe-router-score-function sigmoid");
            CHECK_STR_CONTAINS(text, "--moe-layer-freq '([0]*3+[1]*58)'");
            CHECK_STR_CONTAINS(text, "--moe-shared-expert-intermediate-size 2048");
            CHECK_STR_CONTAINS(text, "--decoder-last-pipeline-num-layers 1");
        }
        if (s) fprintf(stderr, "%s: %s %s\n", what[i], err.msg, obs.n ? obs.item[0] : "");
        CHECK(s == LOOM_OK);
        if (!text) continue;
        loom_megatron_launch *l = malloc(sizeof *l);
        s = loom_megatron_parse("exported.sh", text, 0, l, &err);
        if (s) fprintf(stderr, "%s: re-import failed: %s\n%s\n", what[i], err.msg, text);
        CHECK(s == LOOM_OK);
        if (s == LOOM_OK) {
            CHECK(l->world_from_line);
            CHECK_INT_EQ(l->world_size, loom_runtime_gpus(&cs[i]));
            CHECK(strcmp(l->script, "pretrain_gpt.py") == 0);
            check_same_config(what[i], &cs[i], &l->config);
        }
        free(l);
        free(text);
    }
}

/* ---- 5. obstacles --------------------------------------------------------------------------- */


static void test_obstacles(void)
{
    loom_error err;
    loom_export_list obs = {0};
    loom_runtime_config c;

    /* plan level: a stage with another TP size */
    loom_plan *p = make_plan(&specs[0]);
    p->stages[2].tensor_parallel = 4, p->stages[2].data_parallel = 2;
    p->stages[2].mesh[0] = 2, p->stages[2].mesh[1] = 4;
    CHECK(loom_export_from_plan(p, &c, &obs, &err) == LOOM_OK);
    CHECK(has_item(&obs, "different tensor-parallel sizes (stage 0: 8, stage 2: 4)"));
    /* … whose MLP weight is split over both axes (2-D TP) */
    snprintf(p->stages[2].ops[1].weight, LOOM_PLAN_SPEC_MAX, "f@1 h@0");
    obs = (loom_export_list){0};
    CHECK(loom_export_from_plan(p, &c, &obs, &err) == LOOM_OK);
    CHECK(has_item(&obs, "2-D tensor parallelism"));
    CHECK(has_item(&obs, "model.layers.39.self_attn.q_proj (input b@0 s h)"));
    /* … or with the hidden dim of an activation on the data-parallel axis,
     * and the batch not split there */
    snprintf(p->stages[2].ops[1].weight, LOOM_PLAN_SPEC_MAX, "f@1 h");
    snprintf(p->stages[2].ops[2].input, LOOM_PLAN_SPEC_MAX, "b s h@0");
    obs = (loom_export_list){0};
    CHECK(loom_export_from_plan(p, &c, &obs, &err) == LOOM_OK);
    CHECK(has_item(&obs, "split over the data-parallel mesh axis"));
    CHECK(has_item(&obs, "post_attention_layernorm (input h@0)"));
    CHECK(has_item(&obs, "whole batch"));
    /* the hidden dim on the TP axis */
    loom_plan_destroy(p);
    p = make_plan(&specs[0]);
    snprintf(p->stages[1].ops[0].weight, LOOM_PLAN_SPEC_MAX, "h@1 heads dh");
    obs = (loom_export_list){0};
    CHECK(loom_export_from_plan(p, &c, &obs, &err) == LOOM_OK);
    CHECK(has_item(&obs, "not a Megatron-style strategy"));
    CHECK(has_item(&obs, "in 1 op operand,"));
    /* per-stage recompute differs */
    loom_plan_destroy(p);
    p = make_plan(&specs[0]);
    p->stages[3].recompute = LOOM_RECOMPUTE_FULL;
    obs = (loom_export_list){0};
    CHECK(loom_export_from_plan(p, &c, &obs, &err) == LOOM_OK);
    CHECK(has_item(&obs, "different recompute settings"));
    loom_plan_destroy(p);

    /* target level */
    p = make_plan(&specs[0]);
    obs = (loom_export_list){0};
    CHECK(loom_export_from_plan(p, &c, &obs, &err) == LOOM_OK);
    CHECK_INT_EQ(obs.n, 0);
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_DEEPSPEED, &obs);
    CHECK(has_item(&obs, "TP 8 with PP 4"));
    CHECK(has_item(&obs, "sequence parallelism"));
    CHECK(has_item(&obs, "selective recompute"));
    CHECK(has_item(&obs, "uneven pipeline stages"));
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_TORCHTITAN, &obs);
    CHECK(has_item(&obs, "ZeRO-1"));
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_VLLM, &obs);
    CHECK(has_item(&obs, "training plan"));
    CHECK_INT_EQ(obs.n, 1);
    /* the error names the count */
    char *text = NULL;
    CHECK(loom_export_render(&c, LOOM_EXPORT_DEEPSPEED, "x", &text, NULL, NULL, &err) ==
          LOOM_ERR_UNSUPPORTED);
    CHECK(text == NULL);
    CHECK_STR_CONTAINS(err.msg, "deepspeed cannot run this plan as planned (4 obstacles");
    loom_plan_destroy(p);

    /* Megatron: TP must divide the kv head groups (Llama-3-70B has 8) */
    c = base_config("llama-3-70b", 16, 1, 4, 1, 64, 8192);
    CHECK(loom_runtime_config_normalize(&c, &err) == LOOM_OK);
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_MEGATRON, &obs);
    CHECK(has_item(&obs, "TP 16 does not divide the 8 key/value head groups"));
    /* … which vLLM runs by replicating kv heads */
    c.inference = true, c.max_num_seqs = 8, c.max_model_len = 8192, c.max_num_batched_tokens = 8192;
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_VLLM, &obs);
    CHECK_INT_EQ(obs.n, 0);
    /* vLLM's EP is TP x DP or nothing */
    c = base_config("mixtral-8x7b", 4, 1, 4, 1, 64, 4096);
    c.inference = true, c.par.ep = 8;
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_VLLM, &obs);
    CHECK(has_item(&obs, "spans all TP x DP = 16 ranks"));
    /* DeepSpeed: context parallelism; torchtitan: fp16 and EP without FSDP */
    c = base_config("llama-3-8b", 1, 1, 4, 1, 64, 8192);
    c.par.cp = 2, c.par.dtype = LOOM_DTYPE_FP16;
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_DEEPSPEED, &obs);
    CHECK(has_item(&obs, "context parallelism (CP 2)"));
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_TORCHTITAN, &obs);
    CHECK(has_item(&obs, "fp16"));
    c = base_config("mixtral-8x7b", 1, 1, 8, 1, 64, 4096);
    c.par.ep = 4;
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_TORCHTITAN, &obs);
    CHECK(has_item(&obs, "borrows the FSDP ranks"));
    /* a bad split is an error, not an obstacle */
    c = base_config("llama-3-8b", 1, 3, 1, 1, 8, 2048);
    CHECK(loom_export_render(&c, LOOM_EXPORT_MEGATRON, "x", &text, NULL, NULL, &err) ==
          LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "32 layers do not split evenly into 3 pipeline chunks");
}

/* DeepSpeed's other sections, each a golden under tests/golden/export/deepspeed/
 * named NAME-wWORLD-ppPP.json (tools/deepspeed_check reads the world and the
 * pipeline size from the name and runs DeepSpeed's own parsing on them):
 * fp16 with its loss scaler; PP with full recompute (the pipeline engine's
 * activation_checkpoint_interval); AutoEP with AutoTP at ZeRO-2; AutoEP with
 * PP. And what DeepSpeed refuses: AutoEP + AutoTP under ZeRO-3, expert TP. */
static void test_deepspeed_sections(void)
{
    loom_runtime_config cs[4];
    const char *name[4];
    int n = 0;
    cs[n] = base_config("llama-3-8b", 1, 1, 8, 2, 64, 4096);
    cs[n].par.dtype = LOOM_DTYPE_FP16, cs[n].par.zero = 1;
    name[n++] = "llama-3-8b-fp16-w8-pp1";
    cs[n] = base_config("llama-3-8b", 1, 4, 4, 1, 64, 4096);
    cs[n].par.recompute = LOOM_RECOMPUTE_FULL, cs[n].par.zero = 1;
    name[n++] = "llama-3-8b-pp4-full-w16-pp4";
    cs[n] = base_config("mixtral-8x7b", 4, 1, 8, 1, 64, 4096);
    cs[n].par.ep = 8, cs[n].par.zero = 2;
    name[n++] = "mixtral-8x7b-tp4-ep8-w32-pp1";
    cs[n] = base_config("mixtral-8x7b", 1, 2, 8, 1, 64, 4096);
    cs[n].par.ep = 8, cs[n].par.zero = 1;
    name[n++] = "mixtral-8x7b-pp2-ep8-w16-pp2";
    loom_error err;
    for (int i = 0; i < n; i++) {
        CHECK(loom_runtime_config_normalize(&cs[i], &err) == LOOM_OK);
        char *text = NULL, path[128];
        loom_export_list notes = {0}, obs = {0};
        CHECK(loom_export_render(&cs[i], LOOM_EXPORT_DEEPSPEED, name[i], &text, &notes, &obs,
                                 &err) == LOOM_OK);
        if (obs.n) fprintf(stderr, "%s: %s\n", name[i], obs.item[0]);
        if (!text) continue;
        snprintf(path, sizeof path, "deepspeed/%s.json", name[i]);
        check_golden(path, text);
        check_identities(&cs[i], LOOM_EXPORT_DEEPSPEED, text);
        if (cs[i].model.experts > 0) {
            CHECK_STR_CONTAINS(text, "\"expert_parallel\": {\n    \"enabled\": true,\n"
                                     "    \"autoep_size\": 8\n  }");
            CHECK(has_item(&notes, "AutoEP (expert_parallel.autoep_size 8)"));
        }
        free(text);
    }
    /* AutoEP + AutoTP folding (auto_ep_folding.py) refuses ZeRO-3 */
    loom_export_list obs = {0};
    cs[0] = base_config("mixtral-8x7b", 4, 1, 8, 1, 64, 4096);
    cs[0].par.ep = 8, cs[0].par.zero = 3;
    CHECK(loom_runtime_config_normalize(&cs[0], &err) == LOOM_OK);
    loom_export_check(&cs[0], LOOM_EXPORT_DEEPSPEED, &obs);
    CHECK(has_item(&obs, "EP 8 with TP 4 under ZeRO-3"));
    CHECK_INT_EQ(obs.n, 1);
    /* without TP, AutoEP runs under ZeRO-3 (DeepSpeed's MoE layer would not) */
    cs[0] = base_config("mixtral-8x7b", 1, 1, 32, 1, 128, 4096);
    cs[0].par.ep = 8, cs[0].par.zero = 3;
    CHECK(loom_runtime_config_normalize(&cs[0], &err) == LOOM_OK);
    obs = (loom_export_list){0};
    loom_export_check(&cs[0], LOOM_EXPORT_DEEPSPEED, &obs);
    CHECK_INT_EQ(obs.n, 0);
}

/* torchtitan's pipeline and expert-parallel forms, each a golden under
 * tests/golden/export/torchtitan/NAME-wWORLD.py (tools/torchtitan_check
 * loads them into torchtitan's own config classes): PP with
 * module_fqns_per_model_part and one pipeline micro-batch of tokens per
 * batch; interleaved PP under FSDP; DeepSeek-V3 with EP borrowed from FSDP;
 * Llama-3.1-405B, whose recipe's float8 layers are dropped. */
static void test_torchtitan_sections(void)
{
    loom_runtime_config cs[4];
    const char *name[4];
    int n = 0;
    cs[n] = base_config("llama-3-70b", 8, 4, 2, 1, 128, 8192);
    name[n++] = "llama-3-70b-tp8-pp4-w64";
    cs[n] = base_config("llama-3-70b", 4, 2, 8, 1, 256, 8192);
    cs[n].par.vpp = 2, cs[n].par.zero = 3, cs[n].par.sp = true;
    cs[n].par.recompute = LOOM_RECOMPUTE_SELECTIVE;
    name[n++] = "llama-3-70b-pp2-vpp2-fsdp-w64";
    cs[n] = base_config("deepseek-v3", 1, 1, 256, 1, 512, 4096);
    cs[n].par.ep = 64, cs[n].par.zero = 3, cs[n].par.recompute = LOOM_RECOMPUTE_FULL;
    name[n++] = "deepseek-v3-ep64-w256";
    cs[n] = base_config("llama-3.1-405b", 8, 1, 64, 1, 256, 8192);
    cs[n].par.zero = 3, cs[n].par.sp = true, cs[n].par.recompute = LOOM_RECOMPUTE_FULL;
    name[n++] = "llama-3.1-405b-tp8-w512";
    loom_error err;
    for (int i = 0; i < n; i++) {
        CHECK(loom_runtime_config_normalize(&cs[i], &err) == LOOM_OK);
        char *text = NULL, path[128];
        loom_export_list notes = {0}, obs = {0};
        CHECK(loom_export_render(&cs[i], LOOM_EXPORT_TORCHTITAN, name[i], &text, &notes, &obs,
                                 &err) == LOOM_OK);
        if (obs.n) fprintf(stderr, "%s: %s\n", name[i], obs.item[0]);
        if (!text) continue;
        snprintf(path, sizeof path, "torchtitan/%s.py", name[i]);
        check_golden(path, text);
        check_identities(&cs[i], LOOM_EXPORT_TORCHTITAN, text);
        /* CUDA graphs: torchtitan refuses them with PP (Trainer.Config) */
        bool off = cs[i].par.pp > 1 || cs[i].par.ep > 1;
        CHECK(off == (strstr(text, "t.disable_cuda_graphs = True") != NULL));
        free(text);
    }
}

/* A plan with context parallelism: read as CP 2 x TP 4, exported to the
 * runtimes that have it and refused by those that do not (seq 8192: Llama-3-8B's
 * max_position_embeddings, beyond which loom refuses a config without rope_scaling). */
static void test_context_parallel(void)
{
    static const plan_spec cp = {"llama-3-8b-cp", "llama-3-8b", LOOM_PLAN_TRAIN, 2, 8, 2, 1, 1, 4, 2, 1,
                                 16, 8192, {0}, false, LOOM_RECOMPUTE_NONE, 0, OPS_CP};
    loom_plan *p = make_plan(&cp);
    loom_runtime_config c;
    loom_export_list obs = {0};
    loom_error err;
    CHECK(loom_export_from_plan(p, &c, &obs, &err) == LOOM_OK);
    if (obs.n) fprintf(stderr, "cp plan: %s\n", obs.item[0]);
    CHECK_INT_EQ(obs.n, 0);
    CHECK_INT_EQ(c.par.cp, 2);
    CHECK_INT_EQ(c.par.tp, 4);
    CHECK_INT_EQ(c.par.dp, 2);    /* the two replicas; the mesh's axis 0 is CP, not DP */
    CHECK_INT_EQ(c.par.mbs, 1);
    CHECK_INT_EQ(loom_runtime_gpus(&c), 16);
    char *text = NULL;
    CHECK(loom_export_render(&c, LOOM_EXPORT_MEGATRON, "cp", &text, NULL, NULL, &err) == LOOM_OK);
    CHECK_STR_CONTAINS(text, "--context-parallel-size 2 \\\n");
    free(text);
    text = NULL;
    CHECK(loom_export_render(&c, LOOM_EXPORT_TORCHTITAN, "cp", &text, NULL, NULL, &err) == LOOM_OK);
    CHECK_INT_EQ(find_num(text, "context_parallel_degree"), 2);
    if (text) check_identities(&c, LOOM_EXPORT_TORCHTITAN, text);
    free(text);
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_DEEPSPEED, &obs);
    CHECK(has_item(&obs, "context parallelism (CP 2)"));
    /* an activation with its hidden dim on the CP axis is not Megatron's CP */
    snprintf(p->stages[0].ops[2].output, LOOM_PLAN_SPEC_MAX, "b s@0 h@0");
    obs = (loom_export_list){0};
    CHECK(loom_export_from_plan(p, &c, &obs, &err) == LOOM_OK);
    CHECK(has_item(&obs, "split over the context-parallel mesh axis"));
    loom_plan_destroy(p);
}

/* --nearest's step 2: each target's closest settings, and what stays. */
static void test_adjust(void)
{
    loom_error err;
    loom_export_list ch = {0}, obs = {0};
    /* DeepSpeed: SP, selective recompute and the uneven split go; TP with PP stays */
    loom_runtime_config c = base_config("llama-3-70b", 8, 4, 2, 1, 128, 8192);
    c.par.sp = true, c.par.recompute = LOOM_RECOMPUTE_SELECTIVE, c.par.zero = 1;
    c.n_chunks = 4;
    memcpy(c.chunk_layers, (int32_t[]){19, 20, 20, 21}, 4 * sizeof(int32_t));
    CHECK(loom_runtime_config_normalize(&c, &err) == LOOM_OK);
    CHECK(loom_export_adjust(&c, LOOM_EXPORT_DEEPSPEED, &ch));
    CHECK(loom_runtime_config_normalize(&c, &err) == LOOM_OK);
    CHECK(has_item(&ch, "sequence parallelism off"));
    CHECK(has_item(&ch, "selective recompute -> full recompute"));
    CHECK(has_item(&ch, "uneven stages -> 20 layers per stage"));
    CHECK(!c.par.sp && c.par.recompute == LOOM_RECOMPUTE_FULL && c.n_chunks == 0);
    loom_export_check(&c, LOOM_EXPORT_DEEPSPEED, &obs);
    CHECK_INT_EQ(obs.n, 1);
    CHECK(has_item(&obs, "TP 8 with PP 4"));
    /* torchtitan: the distributed optimizer becomes FSDP without PP, DDP with it */
    c = base_config("llama-3-8b", 1, 1, 8, 1, 64, 4096);
    c.par.dist_opt = true;
    ch = (loom_export_list){0};
    CHECK(loom_export_adjust(&c, LOOM_EXPORT_TORCHTITAN, &ch));
    CHECK_INT_EQ(loom_runtime_zero(&c), 2);
    c = base_config("llama-3-8b", 2, 4, 1, 1, 64, 4096);
    c.par.dist_opt = true;
    CHECK(loom_export_adjust(&c, LOOM_EXPORT_TORCHTITAN, &ch));
    CHECK_INT_EQ(loom_runtime_zero(&c), 0);
    CHECK(has_item(&ch, "ZeRO-1 -> ZeRO-0 (DDP)"));
    /* … and EP needs FSDP ranks: without them experts are replicated */
    c = base_config("mixtral-8x7b", 1, 2, 8, 1, 64, 4096);
    c.par.ep = 4, c.par.dist_opt = true;
    ch = (loom_export_list){0};
    CHECK(loom_export_adjust(&c, LOOM_EXPORT_TORCHTITAN, &ch));
    CHECK_INT_EQ(c.par.ep, 1);
    obs = (loom_export_list){0};
    loom_export_check(&c, LOOM_EXPORT_TORCHTITAN, &obs);
    CHECK(has_item(&obs, "no Mixtral"));   /* torchtitan has no Mixtral model */
    /* vLLM: EP becomes TP x DP when that divides the experts, else 1 */
    c = base_config("mixtral-8x7b", 4, 1, 2, 1, 64, 4096);
    c.inference = true, c.par.ep = 2;
    CHECK(loom_export_adjust(&c, LOOM_EXPORT_VLLM, &ch));
    CHECK_INT_EQ(c.par.ep, 8);
    c.par.tp = 2, c.par.dp = 6, c.par.ep = 2;
    CHECK(loom_export_adjust(&c, LOOM_EXPORT_VLLM, &ch));
    CHECK_INT_EQ(c.par.ep, 1);
    /* nothing to change */
    c = base_config("llama-3-8b", 1, 1, 8, 1, 64, 4096);
    CHECK(!loom_export_adjust(&c, LOOM_EXPORT_MEGATRON, &ch));
}

/* ---- 6. importing launch scripts ----------------------------------------------------- */

static loom_megatron_launch *import(const char *text, int64_t gpus, loom_status *s, loom_error *err)
{
    loom_megatron_launch *l = malloc(sizeof *l);
    *s = loom_megatron_parse("launch.sh", text, gpus, l, err);
    return l;
}

static void expect_error(const char *text, int64_t gpus, const char *needle)
{
    loom_error err = {0};
    loom_status s;
    free(import(text, gpus, &s, &err));
    CHECK(s != LOOM_OK);
    CHECK_STR_CONTAINS(err.msg, needle);
}

static const char *const example_script =
    "#!/bin/bash\n"
    "# a launch script in the style of Megatron-LM's examples\n"
    "export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
    "GPUS_PER_NODE=8\n"
    "NUM_NODES=4\n"
    "WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))\n"
    "CHECKPOINT_PATH=$1\n"
    "TP=4; PP=2\n"
    "DISTRIBUTED_ARGS=(\n"
    "    --nproc_per_node $GPUS_PER_NODE   # one process per GPU\n"
    "    --nnodes $NUM_NODES\n"
    "    --master_addr ${MASTER_ADDR:-localhost}\n"
    ")\n"
    "MODEL_ARGS=\"--num-layers 32 --hidden-size 4096 --num-attention-heads 32 \\\n"
    "    --group-query-attention --num-query-groups 8 --ffn-hidden-size 14336\"\n"
    "torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \\\n"
    "    --tensor-model-parallel-size $TP --pipeline-model-parallel-size=$PP \\\n"
    "    $MODEL_ARGS \\\n"
    "    --seq-length 8192 --max-position-embeddings 8192 --vocab-size 128256 \\\n"
    "    --swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear \\\n"
    "    --untie-embeddings-and-output-weights \\\n"
    "    --micro-batch-size 2 --global-batch-size 128 --sequence-parallel \\\n"
    "    --recompute-granularity full --recompute-method block --recompute-num-layers 4 \\\n"
    "    --use-distributed-optimizer --overlap-grad-reduce --bf16 \\\n"
    "    --data-path 0.5 /data/a 0.5 \"/data/b c\" --split 99,1,0 \\\n"
    "    --save \"$CHECKPOINT_PATH\" --lr=3e-4 --lr-decay-style cosine \"$@\"\n";

static void test_import(void)
{
    loom_error err = {0};
    loom_status s;

    /* a Megatron-style script, read by hand:
     * 4 nodes x 8 = 32 GPUs, TP 4, PP 2 -> DP 4; 128 / (2 x 4) = 16 micro-batches */
    loom_megatron_launch *l = import(example_script, 0, &s, &err);
    if (s) fprintf(stderr, "example script: %s\n", err.msg);
    CHECK(s == LOOM_OK);
    if (s == LOOM_OK) {
        const loom_parallel *p = &l->config.par;
        CHECK_INT_EQ(l->world_size, 32);
        CHECK_INT_EQ(p->tp, 4);
        CHECK_INT_EQ(p->pp, 2);
        CHECK_INT_EQ(p->dp, 4);
        CHECK_INT_EQ(p->mbs, 2);
        CHECK_INT_EQ(p->gbs, 128);
        CHECK_INT_EQ(loom_runtime_microbatches(&l->config), 16);
        CHECK(p->sp);
        CHECK_INT_EQ(p->recompute, LOOM_RECOMPUTE_FULL);
        CHECK_INT_EQ(p->recompute_layers, 4);
        CHECK(p->dist_opt && p->zero == 0);
        CHECK_INT_EQ(loom_runtime_zero(&l->config), 1);
        CHECK(p->overlap_grad_reduce);
        CHECK_INT_EQ(p->seq, 8192);
        CHECK_INT_EQ(l->config.model.layers, 32);
        CHECK_INT_EQ(l->config.model.kv_heads, 8);
        CHECK_INT_EQ(l->config.model.head_dim, 128);
        CHECK_INT_EQ(l->config.model.ffn, 14336);
        CHECK(!l->config.model.tied_embeddings);
        CHECK(!l->config.model.qkv_bias);
        CHECK(strcmp(l->config.model.arch, "llama") == 0);
        CHECK(l->has_model_shape);
        CHECK_INT_EQ(l->config.gpus_per_node, 8);
        CHECK(strcmp(l->script, "pretrain_gpt.py") == 0);
        /* its model is Llama-3-8B's: same parameters as the HF config */
        loom_model_opts o;
        loom_model_opts_init(&o);
        o.seq = 8192;
        loom_graph *g1 = NULL, *g2 = NULL;
        CHECK(loom_megatron_build_model(l, &o, &g1, &err) == LOOM_OK);
        CHECK(loom_model_load("examples/models/llama-3-8b.json", &o, &g2, &err) == LOOM_OK);
        if (g1 && g2) {
            loom_graph_totals t1, t2;
            loom_graph_totals_get(g1, &t1);
            loom_graph_totals_get(g2, &t2);
            /* Megatron pads the 128256-token vocabulary to a multiple of
             * 128 x TP 4 = 512: 128512 rows in the embedding and the head */
            CHECK_INT_EQ(l->config.model.vocab, 128512);
            CHECK_INT_EQ(t1.params - t2.params, (int64_t)(128512 - 128256) * 4096 * 2);
            CHECK(loom_megatron_check_model(l, loom_graph_info_c(g2), &err) == LOOM_OK);
            const loom_model_info *m70 = NULL;
            loom_graph *g3 = NULL;
            CHECK(loom_model_load("examples/models/llama-3-70b.json", &o, &g3, &err) == LOOM_OK);
            if (g3) m70 = loom_graph_info_c(g3);
            if (m70) {
                CHECK(loom_megatron_check_model(l, m70, &err) == LOOM_ERR_INVALID);
                CHECK_STR_CONTAINS(err.msg, "--num-layers 32 but the model has 80");
            }
            loom_graph_destroy(g3);
        }
        loom_graph_destroy(g1);
        loom_graph_destroy(g2);
    }
    free(l);

    /* bare arguments, the world from the cluster; a layout; account for embedding */
    l = import("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --num-layers 20 "
               "--hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --micro-batch-size 1 "
               "--pipeline-model-parallel-layout 'Et*4|(t*6|)*2t*4L'",
               16, &s, &err);
    CHECK(s == LOOM_OK);
    if (s == LOOM_OK) {
        CHECK_INT_EQ(l->config.par.dp, 2);
        CHECK_INT_EQ(l->config.par.gbs, 2);   /* Megatron's default: mbs x dp */
        CHECK_INT_EQ(l->config.n_chunks, 4);
        int32_t want[4] = {4, 6, 6, 4};
        for (int i = 0; i < 4; i++) CHECK_INT_EQ(l->config.chunk_layers[i], want[i]);
        CHECK(!l->world_from_line);
        CHECK(!l->has_model_shape);   /* no vocabulary size */
    }
    free(l);
    l = import(
        "--pipeline-model-parallel-size 4 --num-layers 31 --hidden-size 1024 "
        "--num-attention-heads 16 --seq-length 2048 --micro-batch-size 1 "
        "--account-for-embedding-in-pipeline-split --num-layers-per-virtual-pipeline-stage 4",
        8, &s, &err);
    if (s) fprintf(stderr, "account-for-embedding: %s\n", err.msg);
    CHECK(s == LOOM_OK);
    if (s == LOOM_OK) {
        /* 32 units / 4 ranks = 8 per rank = 2 chunks of 4; chunk 0 gives one to E */
        CHECK_INT_EQ(l->config.par.vpp, 2);
        CHECK_INT_EQ(l->config.n_chunks, 8);
        CHECK_INT_EQ(l->config.chunk_layers[0], 3);
        CHECK_INT_EQ(l->config.chunk_layers[1], 4);
        CHECK_INT_EQ(l->config.chunk_layers[7], 4);
    }
    free(l);
    /* uneven with virtual stages: first/last ranks split over their chunks */
    l = import("--pipeline-model-parallel-size 4 --num-layers 28 --hidden-size 1024 "
               "--num-attention-heads 16 --seq-length 2048 --micro-batch-size 1 "
               "--num-virtual-stages-per-pipeline-rank 2 --decoder-first-pipeline-num-layers 4 "
               "--decoder-last-pipeline-num-layers 8",
               4, &s, &err);
    CHECK(s == LOOM_OK);
    if (s == LOOM_OK) {
        /* middle ranks: (28 - 4 - 8) / 2 = 8 each, 4 per chunk; chunk c = vpp_rank x pp + rank */
        int32_t want[8] = {2, 4, 4, 4, 2, 4, 4, 4};
        for (int i = 0; i < 8; i++) CHECK_INT_EQ(l->config.chunk_layers[i], want[i]);
    }
    free(l);

    /* errors: unknown, contradictory, malformed */
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py \\\n  --tensor-parallel-size 8", 0,
                 "launch.sh:2: unknown Megatron-LM argument --tensor-parallel-size (did you mean "
                 "--tensor-model-parallel-size?)");
    expect_error(
        "python pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
        "--seq-length 128 --micro-batch-size 1 --sequence-parallel",
        8, "--sequence-parallel needs tensor parallelism, but --tensor-model-parallel-size is 1");
    expect_error("WORLD_SIZE=16 torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py "
                 "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
                 "--micro-batch-size 1",
                 0, "WORLD_SIZE=16 but the launcher starts 1 x 8 = 8 processes");
    expect_error("torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 32 "
                 "--hidden-size 64 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
                 "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 3",
                 0,
                 "--num-layers-per-virtual-pipeline-stage 3 does not divide the 8 layers of each "
                 "of the 4 pipeline stages");
    expect_error("torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 "
                 "--hidden-size 64 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1",
                 64, "the launch line starts 16 GPUs but the cluster has 64");
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 64 "
                 "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
                 "--tensor-model-parallel-size $TP",
                 0, "--tensor-model-parallel-size: its value $TP is not set in the launch text");
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py --batch-size 4", 0,
                 "--batch-size is no longer accepted by Megatron-LM; use --micro-batch-size");
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py --micro-batch-size one", 0,
                 "launch.sh:1: --micro-batch-size expects an integer, found 'one'");
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 768 "
                 "--num-attention-heads 12 --seq-length 128 --micro-batch-size 1 "
                 "--tensor-model-parallel-size 8",
                 0, "--tensor-model-parallel-size 8 does not divide --num-attention-heads 12");
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 64 "
                 "--num-attention-heads 4 --seq-length 128 --micro-batch-size 2 "
                 "--global-batch-size 100",
                 0, "--global-batch-size 100 is not a multiple of --micro-batch-size 2 x "
                    "data-parallel size 8");
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py --sequence-parallel=true", 0,
                 "--sequence-parallel is a flag and takes no value");
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --micro-batch-size", 0,
                 "--micro-batch-size expects a value (int)");
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 64 "
                 "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --fp16 --bf16",
                 0, "--fp16 and --bf16 together");
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 64 "
                 "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
                 "--recompute-granularity full",
                 0, "--recompute-granularity full needs --recompute-method");
    expect_error("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 64 "
                 "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
                 "--expert-model-parallel-size 2",
                 0, "--expert-model-parallel-size 2 without --num-experts");
    expect_error("echo hello", 8, "no training command found");
    /* found by fuzzing: uneven first and last stages on a single stage; an
     * empty quoted first word */
    expect_error("--decoder-first-pipeline-num-layers 19 --decoder-last-pipeline-num-layers 21 "
                 "--micro-batch-size 1 --num-layers 80 --hidden-size 64 --num-attention-heads 4 "
                 "--seq-length 128",
                 8, "need at least 2 pipeline stages, --pipeline-model-parallel-size is 1");
    expect_error("\"\" --num-layers 2", 8, "no training command found");
    expect_error("torchrun pretrain_gpt.py --data-path \"/a\n--num-layers 2\n", 8,
                 "launch.sh:1: unterminated double quote");
    expect_error("torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                 "--seq-length 128 --micro-batch-size 1",
                 0, "the world size is unknown");
    expect_error("torchrun --nproc-per-node 4 pretrain_gpt.py --num-layers 4 --hidden-size 64 "
                 "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
                 "--pipeline-model-parallel-size 2 --num-layers 5 --pipeline-model-parallel-layout "
                 "'Et*3|tL'",
                 0, "places 4 transformer layers");
}

/* 8. The model a runtime builds from the export is loom's model: for each
 * bundled model the Megatron-LM arguments are read back (megatron_import.c,
 * which follows Megatron's defaults and its vocabulary padding) and built;
 * the parameter count equals that of the graph loom planned on, exactly, and
 * every model fact (RoPE base and scaling, norm epsilon, MTP, router)
 * survives. Independent values from the HF configs are checked as text. */
static void check_facts_equal(const char *what, const loom_model_facts *a, const loom_model_facts *b)
{
    int before = check_failures;
    CHECK(a->known && b->known);
    CHECK(a->norm_eps == b->norm_eps);
    CHECK(a->rope_theta == b->rope_theta);
    CHECK(a->rotary_fraction == b->rotary_fraction);
    CHECK(strcmp(a->rope_scaling, b->rope_scaling) == 0);
    CHECK(a->rope_factor == b->rope_factor);
    CHECK(a->rope_low_freq == b->rope_low_freq && a->rope_high_freq == b->rope_high_freq);
    CHECK_INT_EQ(a->rope_original_max, b->rope_original_max);
    CHECK(a->yarn_beta_fast == b->yarn_beta_fast && a->yarn_beta_slow == b->yarn_beta_slow);
    CHECK(a->yarn_mscale == b->yarn_mscale && a->yarn_mscale_all_dim == b->yarn_mscale_all_dim);
    CHECK_INT_EQ(a->mtp_layers, b->mtp_layers);
    CHECK(strcmp(a->router_score, b->router_score) == 0);
    CHECK_INT_EQ(a->router_expert_bias, b->router_expert_bias);
    CHECK_INT_EQ(a->router_norm_topk, b->router_norm_topk);
    CHECK((a->router_scaling == 0 ? 1 : a->router_scaling) ==
          (b->router_scaling == 0 ? 1 : b->router_scaling));
    CHECK_INT_EQ(a->router_groups, b->router_groups);
    CHECK_INT_EQ(a->router_group_topk, b->router_group_topk);
    CHECK(strcmp(a->router_balance, b->router_balance) == 0);
    CHECK(a->router_aux_coeff == b->router_aux_coeff);
    if (check_failures != before) fprintf(stderr, "  (model facts of %s)\n", what);
}

static void test_model_rebuilt(void)
{
    static const struct {
        const char *model;
        int64_t tp, pp, dp, ep;
        int32_t n_chunks, chunks[16];
        const char *want[4];   /* text the export must contain */
    } cases[] = {
        {"llama-3-8b", 1, 1, 8, 1, 0, {0}, {"--rotary-base 500000", "--norm-epsilon 1e-05"}},
        {"llama-3-70b", 8, 4, 2, 1, 4, {19, 20, 20, 21},
         {"--rotary-base 500000", "--make-vocab-size-divisible-by 32"}},
        {"llama-3.1-405b", 8, 16, 4, 1, 16, {7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7},
         {"--rotary-base 500000", "--use-rope-scaling", "--rope-scaling-factor 8"}},
        {"mixtral-8x7b", 2, 2, 8, 8, 0, {0},
         {"--rotary-base 1000000", "--moe-aux-loss-coeff 0.02"}},
        {"deepseek-v3", 2, 16, 8, 8, 16, {0, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5},
         {"--pipeline-model-parallel-layout 'E|(t*4|)*14t*5,mL'", "--norm-epsilon 1e-06",
          "--mtp-num-layers 1"}},
        {"qwen2-72b", 8, 1, 1, 1, 0, {0}, {"--rotary-base 1000000", "--add-qkv-bias"}},
        {"mistral-7b", 4, 1, 2, 1, 0, {0}, {"--rotary-base"}},
        {"gpt2", 1, 1, 8, 1, 0, {0}, {"--make-vocab-size-divisible-by 1", "--norm-epsilon 1e-05"}},
        {"qwen3-30b-a3b", 2, 1, 4, 4, 0, {0}, {"--moe-router-load-balancing-type aux_loss"}},
        {"glm-4.5-air", 2, 2, 4, 4, 0, {0},
         {"--rotary-percent 0.5", "--moe-router-score-function sigmoid",
          "--moe-router-enable-expert-bias", "--moe-layer-freq '([0]*1+[1]*45)'"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loom_runtime_config *c = malloc(sizeof *c);
        *c = base_config(cases[i].model, cases[i].tp, cases[i].pp, cases[i].dp, 1,
                         8 * cases[i].dp, strcmp(cases[i].model, "gpt2") ? 4096 : 1024);
        c->par.ep = cases[i].ep;
        c->par.sp = cases[i].tp > 1;
        c->n_chunks = cases[i].n_chunks;
        for (int32_t k = 0; k < c->n_chunks; k++) c->chunk_layers[k] = cases[i].chunks[k];
        loom_error err = {0};
        char *text = NULL;
        loom_export_list obstacles = {0};
        CHECK(loom_runtime_config_normalize(c, &err) == LOOM_OK);
        loom_status s = loom_export_render(c, LOOM_EXPORT_MEGATRON, NULL, &text, NULL, &obstacles, &err);
        CHECK(s == LOOM_OK);
        if (s) {
            fprintf(stderr, "%s: %s %s\n", cases[i].model, err.msg, obstacles.n ? obstacles.item[0] : "");
            free(c);
            continue;
        }
        for (int k = 0; k < 4 && cases[i].want[k]; k++) CHECK_STR_CONTAINS(text, cases[i].want[k]);
        CHECK(strstr(text, "-pipeline-num-layers 0 ") == NULL);
        loom_megatron_launch *l = import(text, 0, &s, &err);
        CHECK(s == LOOM_OK);
        loom_graph *rebuilt = NULL, *orig = NULL;
        loom_model_opts mo;
        loom_runtime_model_opts(&c->par, &mo);
        char path[256];
        snprintf(path, sizeof path, "examples/models/%s.json", cases[i].model);
        if (s == LOOM_OK) s = loom_megatron_build_model(l, &mo, &rebuilt, &err);
        if (s == LOOM_OK) s = loom_model_load(path, &mo, &orig, &err);
        CHECK(s == LOOM_OK);
        if (s == LOOM_OK) {
            loom_graph_totals a, b;
            loom_graph_totals_get(orig, &a);
            loom_graph_totals_get(rebuilt, &b);
            if (a.params != b.params) fprintf(stderr, "  (parameters of %s)\n", cases[i].model);
            CHECK_INT_EQ(a.params, b.params);
            check_facts_equal(cases[i].model, &loom_graph_info_c(orig)->facts,
                              &loom_graph_info_c(rebuilt)->facts);
        } else {
            fprintf(stderr, "%s: %s\n", cases[i].model, err.msg);
        }
        loom_graph_destroy(rebuilt);
        loom_graph_destroy(orig);
        free(l);
        free(text);
        free(c);
    }
}

/* 9. The same through a plan file, as `loom plan` -> `loom export` runs: the
 * model facts a plan's JSON keeps are the ones the export writes. A plan file
 * that dropped Qwen3's q/k norms exported no --qk-layernorm, and the model
 * rebuilt from the launch line was another family: 48 x 2 x 128 parameters
 * fewer for Qwen3-30B-A3B, and on 64 H100 a step 2.0% shorter than eval of
 * the plan (tests/export_cli.sh checks the step time end to end). */
static void test_model_through_plan(void)
{
    static const plan_spec cases[] = {
        {"qwen3-30b-a3b-dp", "qwen3-30b-a3b", LOOM_PLAN_TRAIN, 1, 8, 2, 1, 1, 1, 4, 4, 64, 4096,
         {0}, false, LOOM_RECOMPUTE_NONE, 1, OPS_MOE_DP},
        {"qwen3-8b-tp2", "qwen3-8b", LOOM_PLAN_TRAIN, 1, 8, 4, 1, 1, 2, 1, 1, 64, 4096, {0},
         true, LOOM_RECOMPUTE_NONE, 1, OPS_DENSE},
        {"llama-3-8b-dp", "llama-3-8b", LOOM_PLAN_TRAIN, 1, 8, 8, 1, 1, 1, 1, 1, 64, 4096, {0},
         false, LOOM_RECOMPUTE_NONE, 1, OPS_DENSE},
    };
    /* the HF configs: Qwen3 (dense and MoE) norms q and k per head, Llama does not */
    static const bool qk_norm[] = {true, true, false};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loom_plan *p = make_plan(&cases[i]), *back = NULL;
        int64_t params = p->model_params;
        CHECK_INT_EQ(p->model_info.qk_norm, qk_norm[i]);
        char *json = loom_plan_to_json(p, LOOM_PLAN_JSON_NO_TIMINGS);
        loom_plan_destroy(p);
        loom_error err = {0};
        CHECK(json && loom_plan_parse(cases[i].name, json, strlen(json), &back, &err) == LOOM_OK);
        free(json);
        if (!back) {
            fprintf(stderr, "%s: %s\n", cases[i].name, err.msg);
            continue;
        }
        CHECK_INT_EQ(back->model_info.qk_norm, qk_norm[i]);
        loom_runtime_config c;
        loom_export_list obs = {0};
        char *text = NULL;
        loom_status s = loom_export_from_plan(back, &c, &obs, &err);
        if (s == LOOM_OK)
            s = loom_export_render(&c, LOOM_EXPORT_MEGATRON, cases[i].name, &text, NULL, NULL,
                                   &err);
        CHECK(s == LOOM_OK);
        if (s == LOOM_OK) {
            CHECK((strstr(text, "--qk-layernorm") != NULL) == qk_norm[i]);
            loom_megatron_launch *l = import(text, 0, &s, &err);
            loom_graph *rebuilt = NULL;
            loom_model_opts mo;
            loom_runtime_model_opts(&c.par, &mo);
            if (s == LOOM_OK) s = loom_megatron_build_model(l, &mo, &rebuilt, &err);
            CHECK(s == LOOM_OK);
            if (s == LOOM_OK) {
                loom_graph_totals t;
                loom_graph_totals_get(rebuilt, &t);
                if (t.params != params) fprintf(stderr, "  (parameters of %s)\n", cases[i].name);
                CHECK_INT_EQ(t.params, params);
                CHECK_INT_EQ(loom_graph_info_c(rebuilt)->qk_norm, qk_norm[i]);
            } else {
                fprintf(stderr, "%s: %s\n", cases[i].name, err.msg);
            }
            loom_graph_destroy(rebuilt);
            free(l);
        } else {
            fprintf(stderr, "%s: %s\n", cases[i].name, err.msg);
        }
        free(text);
        loom_plan_destroy(back);
    }
}

/* The example script with `extra` after --overlap-grad-reduce (caller frees). */
static char *example_with(const char *extra)
{
    const char *flag = "--overlap-grad-reduce";
    const char *at = strstr(example_script, flag) + strlen(flag);
    size_t head = (size_t)(at - example_script), n = strlen(example_script) + strlen(extra) + 2;
    char *t = malloc(n);
    snprintf(t, n, "%.*s %s%s", (int)head, example_script, extra, at);
    return t;
}

/* The parallel configuration the example script imports to with `extra`
 * after --overlap-grad-reduce (NULL: the script as it is); false when it
 * does not import. */
static bool import_par(const char *extra, loom_parallel *out)
{
    loom_error err = {0};
    loom_status s;
    char *t = extra ? example_with(extra) : NULL;
    loom_megatron_launch *l = import(t ? t : example_script, 0, &s, &err);
    if (s == LOOM_OK) *out = l->config.par;
    free(l);
    free(t);
    return s == LOOM_OK;
}

/* Megatron's --num-distributed-optimizer-instances k is hybrid sharding:
 * the example's DP 4 in k = 2 instances shards the optimizer over 2 ranks
 * (fsdp_shard 2); k must divide DP and needs a sharded optimizer. */
static void test_import_hsdp(void)
{
    loom_parallel p;
    CHECK(import_par("--num-distributed-optimizer-instances 2", &p));
    CHECK_INT_EQ(p.fsdp_shard, 2);
    CHECK(import_par(NULL, &p));   /* one instance: full sharding */
    CHECK_INT_EQ(p.fsdp_shard, 0);
    char *t = example_with("--num-distributed-optimizer-instances 3");
    expect_error(t, 0,
                 "--num-distributed-optimizer-instances 3 does not divide the data-parallel size 4");
    free(t);
}

/* --grad-reduce-in-bf16 is read: Megatron-LM then reduces the gradients in
 * bf16, half the bytes of its fp32 default for bf16 runs. */
static void test_import_grad_reduce_bf16(void)
{
    loom_parallel p;
    CHECK(import_par("--grad-reduce-in-bf16", &p));
    CHECK(p.grad_reduce_bf16);
    CHECK(import_par(NULL, &p));
    CHECK(!p.grad_reduce_bf16);
}

int main(void)
{
    test_arg_table();
    test_goldens();
    test_configs();
    test_obstacles();
    test_context_parallel();
    test_deepspeed_sections();
    test_torchtitan_sections();
    test_adjust();
    test_import();
    test_import_hsdp();
    test_import_grad_reduce_bf16();
    test_model_rebuilt();
    test_model_through_plan();
    return check_done();
}
