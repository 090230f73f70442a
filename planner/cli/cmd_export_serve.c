/*
 * cmd_export_serve.c — `loom export SERVING_PLAN --to vllm|sglang [--pool
 * prefill|decode] [-o FILE]`: a plan of `loom plan --mode serve` as an
 * engine's launch configuration (planner/export/export_serve.h). Called by
 * cmd_export.c when the plan has a serving section. Notes go to stderr;
 * what the engine cannot run is listed and nothing is written (exit 1).
 * Output goes to stdout, or atomically to FILE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "planner/cli/cli.h"
#include "planner/export/export_serve.h"

int loom_cmd_export_serve(const char *plan_path, const char *out_path, bool sglang,
                          const char *pool)
{
    loom_error err = {0};
    loom_serve_export x;
    if (loom_serve_export_read(plan_path, &x, &err)) return loom_cli_fail(&err);
    loom_export_list notes = {0}, obstacles = {0};
    char *text = NULL;
    loom_serve_export_engine e = sglang ? LOOM_SERVE_EXPORT_SGLANG : LOOM_SERVE_EXPORT_VLLM;
    loom_status s = loom_serve_export_render(&x, e, pool, plan_path, &text, &notes, &obstacles, &err);
    if (s == LOOM_ERR_INVALID) return loom_cli_usage_error("export", "%s", err.msg);
    if (s) {
        if (obstacles.n) {
            fprintf(stderr, "loom export: %s cannot run this deployment:\n", sglang ? "sglang" : "vllm");
            for (int i = 0; i < obstacles.n; i++) fprintf(stderr, "  - %s\n", obstacles.item[i]);
            fprintf(stderr, "loom export: nothing written\n");
            return LOOM_EXIT_FAIL;
        }
        return loom_cli_fail(&err);
    }
    for (int i = 0; i < notes.n; i++) fprintf(stderr, "loom export: note: %s\n", notes.item[i]);
    s = loom_write_file_atomic(out_path ? out_path : "-", text, strlen(text), &err);
    free(text);
    return s ? loom_cli_fail(&err) : LOOM_EXIT_OK;
}
