/*
 * cmd_export.c — `loom export PLAN --to megatron|vllm|deepspeed|torchtitan
 * [-o FILE] [--nearest]`: a plan as the configuration a runtime runs
 * (export.h; docs/export.md).
 *
 * The plan is read and validated (plan_json.c), turned into a runtime
 * configuration (export_plan.c), checked against the target and rendered.
 * When the target cannot run the plan as planned, every obstacle is listed
 * on stderr, nothing is written and the exit code is 1; with --nearest the
 * plan's inputs are planned again inside the Megatron-style space
 * (export_nearest.c), that plan is exported instead, and the predicted cost
 * of the restriction is reported next to the original plan's. Notes (an
 * environment variable to set, code the model must call) go to stderr and,
 * where the format has comments, into the file.
 *
 * Output goes to stdout, or with -o atomically to FILE (fileio.h): a failed
 * export never leaves a file behind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/cluster.h"
#include "base/fileio.h"
#include "planner/cli/cli.h"
#include "planner/export/export.h"
#include "planner/export/export_nearest.h"
#include "planner/plan/plan.h"

static const char *const usage_text =
    "usage: loom export PLAN --to megatron|vllm|deepspeed|torchtitan [-o FILE] [--nearest]\n"
    "                   [--calib FILE] [--profile DB]\n"
    "\n"
    "Writes the configuration a runtime needs to run a loom-plan/1 file:\n"
    "  megatron    a bash launch script: torchrun ... pretrain_gpt.py --tensor-model-parallel-size "
    "...\n"
    "  vllm        a YAML file for `vllm serve MODEL --config FILE` (serving plans)\n"
    "  deepspeed   a DeepSpeed JSON config\n"
    "  torchtitan  the [training], [parallelism] and [activation_checkpoint] TOML sections\n"
    "\n"
    "  --to T         the runtime (required)\n"
    "  -o FILE        write FILE (atomically) instead of stdout\n"
    "  --nearest      when the runtime cannot run the plan as planned, plan the same inputs\n"
    "                 again inside the Megatron-style space the runtimes share, export that,\n"
    "                 and report its predicted cost against the original plan's\n"
    "  --calib FILE   calibration for --nearest (default: the device's shipped one)\n"
    "  --profile DB   profile db for --nearest\n"
    "\n"
    "A plan the runtime cannot run (different tensor-parallel sizes per stage, 2-D tensor\n"
    "sharding, ...) is refused: each obstacle is listed, nothing is written, exit 1.\n"
    "Exit codes: 0 written, 1 bad plan or obstacles, 2 usage, 3 --nearest found no plan.\n";

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

int loom_cmd_export(int argc, char **argv)
{
    const char *plan_path = NULL, *to = NULL, *out_path = NULL, *v;
    loom_export_nearest_opts nopts;
    loom_export_nearest_opts_init(&nopts);
    bool nearest = false;
    for (int i = 1; i < argc;) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return LOOM_EXIT_OK;
        } else if (!strcmp(argv[i], "--nearest")) {
            nearest = true, i++;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--to", &v)) != 0) {
            if (r < 0) return LOOM_EXIT_USAGE;
            to = v;
        } else if ((r = loom_cli_opt(argc, argv, &i, "-o", &v)) != 0 ||
                   (r = loom_cli_opt(argc, argv, &i, "--output", &v)) != 0) {
            if (r < 0) return LOOM_EXIT_USAGE;
            out_path = v;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--calib", &v)) != 0) {
            if (r < 0) return LOOM_EXIT_USAGE;
            nopts.calib_path = v;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--profile", &v)) != 0) {
            if (r < 0) return LOOM_EXIT_USAGE;
            nopts.profile_path = v;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return loom_cli_usage_error("export", "unknown option '%s'", argv[i]);
        } else if (plan_path) {
            return loom_cli_usage_error("export", "one PLAN expected, got '%s' and '%s'", plan_path,
                                        argv[i]);
        } else {
            plan_path = argv[i++];
        }
    }
    if (!plan_path) return loom_cli_usage_error("export", "missing PLAN (a loom-plan/1 file)");
    loom_export_target t;
    if (!to)
        return loom_cli_usage_error("export", "missing --to megatron|vllm|deepspeed|torchtitan");
    if (!loom_export_target_parse(to, &t))
        return loom_cli_usage_error("export",
                                    "--to expects megatron, vllm, deepspeed or torchtitan, "
                                    "got '%s'",
                                    to);

    const loom_cli_path ins[] = {
        {"PLAN", plan_path}, {"--calib", nopts.calib_path}, {"--profile", nopts.profile_path}};
    const loom_cli_path outs[] = {{"-o", out_path}};
    int bad = loom_cli_check_outputs("export", ins, 3, outs, 1);
    if (bad) return bad;

    loom_error err = {0};
    loom_plan *plan = NULL;
    if (loom_plan_read(plan_path, &plan, &err)) return loom_cli_fail(&err);
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
    nopts.model_path = model_path;
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
    if (!near.fits)
        fprintf(stderr, "  warning: loom predicts the nearest plan needs %.1f GiB per GPU, more "
                        "than the GPU has\n",
                (double)near.memory_per_gpu_bytes / (1024.0 * 1024.0 * 1024.0));
    rc = write_config(c, t, plan_path, out_path);
done:
    free(c);
    loom_plan_destroy(plan);
    return rc;
}
