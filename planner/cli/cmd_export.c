/*
 * cmd_export.c — `loom export PLAN --to megatron|vllm|deepspeed|torchtitan
 * [-o FILE] [--nearest]`: a plan as the configuration a runtime runs
 * (export.h; docs/export.md).
 *
 * The plan is read and validated (plan_json.c), turned into a runtime
 * configuration (export_plan.c), checked against the target and rendered.
 * When the target cannot run the plan as planned, every obstacle is listed
 * on stderr, nothing is written and the exit code is 1; with --nearest the
 * plan's inputs are planned again inside the Megatron-style space, then if
 * need be the target's own space is searched (export_nearest.c); the
 * fastest configuration that fits is exported instead, and the predicted
 * cost of the restriction is reported next to the original plan's. When
 * nothing the target runs fits, the exit code is 3 and nothing is written. Notes (an
 * environment variable to set, code the model must call) go to stderr and,
 * where the format has comments, into the file.
 *
 * Output goes to stdout, or with -o atomically to FILE (fileio.h): a failed
 * export never leaves a file behind. A serving plan (loom plan --mode serve)
 * goes to cmd_export_serve.c instead: --to vllm or sglang, --pool.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/cluster.h"
#include "base/fileio.h"
#include "planner/cli/cli.h"
#include "planner/export/export.h"
#include "planner/export/export_nearest.h"
#include "planner/export/export_serve.h"
#include "planner/plan/plan.h"

typedef struct {
    const char *plan_path, *out_path, *pool;
    loom_export_target to;
    bool to_given, nearest;
    loom_export_nearest_opts nopts;
} export_args;

static void export_args_init(void *p)
{
    export_args *a = p;
    memset(a, 0, sizeof *a);
    loom_export_nearest_opts_init(&a->nopts);
}

/* SGLang runs serving plans only (cmd_export_serve.c): no placement-plan
 * target of export.h, so it takes the value after them. */
#define TARGET_SGLANG LOOM_EXPORT_TARGET_COUNT
static const loom_cli_choice target_choices[] = {
#define LOOM_X(n, s) {s, LOOM_EXPORT_##n, false},
    LOOM_EXPORT_TARGET_LIST(LOOM_X)
#undef LOOM_X
    {"sglang", TARGET_SGLANG, false},
    {NULL, 0, false}};

#define F(m) LOOM_CLI_FIELD(export_args, m)
static const loom_cli_option export_opts[] = {
    {.name = "--to", .kind = LOOM_CLI_ENUM, .field = F(to), .given = F(to_given),
     .choices = target_choices, .metavar = "T", .help = "the runtime (required)",
     .def = LOOM_CLI_NO_DEFAULT},
    {.name = "--output", .short_name = "-o", .kind = LOOM_CLI_STR, .field = F(out_path),
     .metavar = "FILE", .help = "write FILE (atomically) instead of stdout"},
    {.name = "--nearest", .kind = LOOM_CLI_FLAG, .field = F(nearest),
     .help = "when the runtime cannot run the plan as planned, plan the same inputs\n"
             "again inside the Megatron-style space the runtimes share; if the runtime\n"
             "still cannot run that, or it does not fit, search the runtime's own space;\n"
             "export the fastest that fits and report its predicted cost against the\n"
             "plan's (exit 3, nothing written, when nothing fits)"},
    {.name = "--calib", .kind = LOOM_CLI_STR, .field = F(nopts.calib_path), .metavar = "FILE",
     .help = "calibration for --nearest", .def = "the device's shipped one"},
    {.name = "--profile", .kind = LOOM_CLI_STR, .field = F(nopts.profile_path), .metavar = "DB",
     .help = "profile db for --nearest"},
    {.name = "--pool", .kind = LOOM_CLI_STR, .field = F(pool), .metavar = "P",
     .help = "a disaggregated serving plan (loom plan --mode serve): the pool to\n"
             "export, prefill or decode", .def = LOOM_CLI_NO_DEFAULT},
};

const loom_cli_spec loom_cli_spec_export = {
    .cmd = "export",
    .usage = "usage: loom export PLAN --to megatron|vllm|deepspeed|torchtitan [-o FILE] [--nearest]\n"
             "                   [--calib FILE] [--profile DB]\n"
             "       loom export SERVING_PLAN --to vllm|sglang [--pool prefill|decode] [-o FILE]\n",
    .about = "Writes the configuration a runtime needs to run a loom-plan/1 file:\n"
             "  megatron    a bash launch script: torchrun ... pretrain_gpt.py "
             "--tensor-model-parallel-size ...\n"
             "  vllm        a YAML file for `vllm serve MODEL --config FILE` (serving plans)\n"
             "  sglang      a bash script running sglang.launch_server (plans of\n"
             "              loom plan --mode serve; vllm takes those too, one pool per file)\n"
             "  deepspeed   a DeepSpeed JSON config\n"
             "  torchtitan  a Python job config: torchrun -m torchtitan.train --module F --config loom_job\n",
    .epilogue = "A plan the runtime cannot run (different tensor-parallel sizes per stage, 2-D tensor\n"
                "sharding, ...) is refused: each obstacle is listed, nothing is written, exit 1.\n"
                "Exit codes: 0 written, 1 bad plan or obstacles, 2 usage, 3 --nearest found nothing that\n"
                "fits in memory (the reason and what would make it fit on stderr).\n",
    .opts = export_opts,
    .n_opts = sizeof export_opts / sizeof export_opts[0],
    .pos = {.metavar = "PLAN", .field = F(plan_path), .max = 1, .noun = "PLAN",
            .help = "a loom-plan/1 file (loom plan -o)"},
    .args_size = sizeof(export_args),
    .init = export_args_init,
};
#undef F

static void print_list(const char *head, const loom_export_list *l)
{
    for (int i = 0; i < l->n; i++) fprintf(stderr, "%s%s\n", head, l->item[i]);
    if (l->dropped) fprintf(stderr, "%s(%d more)\n", head, l->dropped);
}

/* Renders c and writes it; prints notes. */
static int write_config(const loom_runtime_config *c, loom_export_target t, const char *source,
                        const char *out_path)
{
    loom_export_list notes = {0}, obstacles = {0};
    loom_error err = {0};
    char *text = NULL;
    if (loom_export_render(c, t, source, &text, &notes, &obstacles, &err)) {
        if (obstacles.n) {
            fprintf(stderr, "loom export: %s cannot run this plan as planned:\n",
                    loom_export_target_name(t));
            print_list("  - ", &obstacles);
            return LOOM_EXIT_FAIL;
        }
        return loom_cli_fail(&err);
    }
    print_list("loom export: note: ", &notes);
    loom_status s = loom_write_file_atomic(out_path ? out_path : "-", text, strlen(text), &err);
    free(text);
    return s ? loom_cli_fail(&err) : LOOM_EXIT_OK;
}

/* Whether path holds a model (an HF config.json or a loom graph) rather
 * than a plan: the usual mistake behind "missing required field format". */
static bool looks_like_model(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    loom_error e = {0};
    if (loom_read_file(path, 0, &text, &len, &e)) return false;
    cJSON *root = cJSON_ParseWithLength(text, len);
    const cJSON *fmt = root ? cJSON_GetObjectItemCaseSensitive(root, "format") : NULL;
    bool model = root && (cJSON_GetObjectItemCaseSensitive(root, "architectures") ||
                          cJSON_GetObjectItemCaseSensitive(root, "model_type") ||
                          (cJSON_IsString(fmt) && strncmp(fmt->valuestring, "loom-graph/", 11) == 0));
    cJSON_Delete(root);
    free(text);
    return model;
}

int loom_cmd_export(int argc, char **argv)
{
    export_args args;
    int prc = loom_cli_parse(&loom_cli_spec_export, argc, argv, &args);
    if (prc != LOOM_CLI_RUN) return prc;
    const char *plan_path = args.plan_path, *out_path = args.out_path;
    loom_export_nearest_opts nopts = args.nopts;
    bool nearest = args.nearest;
    if (!plan_path) return loom_cli_usage_error("export", "missing PLAN (a loom-plan/1 file)");
    if (!args.to_given)
        return loom_cli_usage_error("export", "missing --to megatron|vllm|deepspeed|torchtitan|sglang");
    loom_export_target t = args.to;

    const loom_cli_path ins[] = {
        {"PLAN", plan_path}, {"--calib", nopts.calib_path}, {"--profile", nopts.profile_path}};
    const loom_cli_path outs[] = {{"-o", out_path}};
    int bad = loom_cli_check_outputs("export", ins, 3, outs, 1);
    if (bad) return bad;
    if (loom_serve_export_is_serving(plan_path)) {
        if (nearest)
            return loom_cli_usage_error("export", "--nearest replans placement plans; a serving "
                                        "plan is planned in the engines' own space already");
        if (t != LOOM_EXPORT_VLLM && t != TARGET_SGLANG)
            return loom_cli_usage_error("export", "%s is a serving plan (loom plan --mode serve): "
                                        "export it --to vllm or --to sglang", plan_path);
        return loom_cmd_export_serve(plan_path, out_path, t == TARGET_SGLANG, args.pool);
    }
    if (args.pool)
        return loom_cli_usage_error("export", "--pool is for disaggregated serving plans (loom "
                                    "plan --mode serve); %s is a placement plan", plan_path);
    if (t == TARGET_SGLANG)
        return loom_cli_usage_error("export", "--to sglang exports serving deployments (loom plan "
                                    "--mode serve -o); %s is a placement plan: --to vllm",
                                    plan_path);

    loom_error err = {0};
    loom_plan *plan = NULL;
    loom_model_source *model_src = NULL;
    if (loom_plan_read(plan_path, &plan, &err)) {
        if (looks_like_model(plan_path)) {
            fprintf(stderr, "loom export: %s is a model, not a plan: plan it first, e.g.\n"
                            "  loom plan %s --cluster dgx-h100-x16 -o plan.json\n"
                            "  loom export plan.json --to megatron\n",
                    plan_path, plan_path);
            return LOOM_EXIT_FAIL;
        }
        return loom_cli_fail(&err);
    }
    loom_runtime_config *c = malloc(sizeof *c);
    if (!c) {
        loom_plan_destroy(plan);
        fprintf(stderr, "loom: out of memory\n");
        return LOOM_EXIT_FAIL;
    }
    loom_export_list obstacles = {0};
    int rc;
    if (loom_export_from_plan(plan, c, &obstacles, &err)) {
        rc = loom_cli_fail(&err);
        goto done;
    }
    /* a plan written before plans carried the model facts: take them from
     * the model the plan names, when it can be found */
    char facts_path[4096];
    if (!c->model.facts.known && c->model.arch[0] &&
        loom_cli_find_data(plan->model, "models", facts_path, sizeof facts_path)) {
        loom_model_opts mo;
        loom_graph *g = NULL;
        loom_error ferr = {0};
        loom_runtime_model_opts(&c->par, &mo);
        if (loom_model_load(facts_path, &mo, &g, &ferr) == LOOM_OK &&
            loom_graph_info_c(g)->facts.known) {
            c->model.facts = loom_graph_info_c(g)->facts;
            fprintf(stderr, "loom export: note: the plan carries no model facts (RoPE base, norm "
                            "epsilon, ...); taken from %s\n", facts_path);
        }
        loom_graph_destroy(g);
    }
    loom_export_check(c, t, &obstacles);
    if (obstacles.n == 0) {
        rc = write_config(c, t, plan_path, out_path);
        goto done;
    }
    fprintf(stderr, "loom export: %s cannot run this plan as planned:\n",
            loom_export_target_name(t));
    print_list("  - ", &obstacles);
    if (!nearest) {
        if (c->inference == (t == LOOM_EXPORT_VLLM))
            fprintf(stderr, "loom export: nothing written; --nearest plans again inside the space "
                            "%s can run and exports that\n",
                    loom_export_target_name(t));
        else
            fprintf(stderr, "loom export: nothing written\n");
        rc = LOOM_EXIT_FAIL;
        goto done;
    }

    /* --nearest: the best plan the target can run, and what it costs */
    char model_path[4096], cluster_path[4096];
    if (!loom_cli_find_data(plan->model, "models", model_path, sizeof model_path)) {
        fprintf(stderr, "loom export: --nearest: the plan's model %s: no such file, and no bundled "
                        "model of that name\n",
                plan->model);
        rc = LOOM_EXIT_FAIL;
        goto done;
    }
    if (loom_model_open(model_path, &model_src, &err)) {   /* read once: replan and evaluate */
        rc = loom_cli_fail(&err);
        goto done;
    }
    nopts.model = model_src;
    nopts.cluster =
        loom_cli_find_data(plan->cluster, "clusters", cluster_path, sizeof cluster_path) &&
                !loom_cluster_is_preset_name(plan->cluster)
            ? cluster_path
            : plan->cluster;
    loom_export_nearest_result near;
    if (loom_export_nearest(plan, t, &nopts, c, &near, &err)) {
        rc = loom_cli_fail(&err);
        goto done;
    }
    fprintf(stderr, "loom export: nearest plan %s can run (%s):\n", loom_export_target_name(t),
            near.how);
    print_list("  changed: ", &near.changes);
    if (plan->step_time_s > 0 && near.step_time_s > 0)
        fprintf(stderr, "  predicted %s: %.4g s planned, %.4g s as exported (%+.1f%%)\n",
                c->inference ? "time per token" : "step time", plan->step_time_s, near.step_time_s,
                100.0 * (near.step_time_s - plan->step_time_s) / plan->step_time_s);
    /* loom_export_nearest fails (LOOM_ERR_INFEASIBLE, exit 3) rather than
     * return a configuration that does not fit */
    LOOM_ASSERT(near.fits);
    rc = write_config(c, t, plan_path, out_path);
done:
    loom_model_source_destroy(model_src);
    free(c);
    loom_plan_destroy(plan);
    return rc;
}
