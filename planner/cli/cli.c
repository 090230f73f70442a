/* cli.c — messages, the LOOM_DETERMINISTIC rule and data-file resolution for the
 * `loom` CLI (cli.h). */
#include "planner/cli/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"

#ifndef LOOM_SOURCE_DIR
#define LOOM_SOURCE_DIR "."
#endif
#ifndef LOOM_DATA_DIR
#define LOOM_DATA_DIR "/usr/local/share/loom"
#endif

int loom_cli_fail(const loom_error *err)
{
    fprintf(stderr, "loom: %s\n", err->msg[0] ? err->msg : loom_status_str(err->status));
    return err->status == LOOM_ERR_INFEASIBLE ? LOOM_EXIT_INFEASIBLE : LOOM_EXIT_FAIL;
}

int loom_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "loom %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see `loom %s --help`)\n", cmd);
    return LOOM_EXIT_USAGE;
}

bool loom_cli_deterministic(void)
{
    const char *v = getenv("LOOM_DETERMINISTIC");
    return v && v[0] && strcmp(v, "0") != 0;
}

static bool exists(const char *p) { return access(p, R_OK) == 0; }

bool loom_cli_find_data(const char *arg, const char *kind, char *out, size_t n)
{
    if (exists(arg)) {
        snprintf(out, n, "%s", arg);
        return true;
    }
    if (strchr(arg, '/')) return false;
    const char *roots[] = {LOOM_SOURCE_DIR "/examples", LOOM_DATA_DIR};
    const char *exts[] = {"", ".json"};
    for (size_t r = 0; r < 2; r++)
        for (size_t e = 0; e < 2; e++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s/%s%s", roots[r], kind, arg, exts[e]);
            if (exists(p)) {
                snprintf(out, n, "%s", p);
                return true;
            }
        }
    return false;
}

int loom_cli_check_outputs(const char *cmd, const loom_cli_path *inputs, int n_inputs,
                           const loom_cli_path *outputs, int n_outputs)
{
    for (int i = 0; i < n_outputs; i++) {
        const loom_cli_path *o = &outputs[i];
        if (!o->path) continue;
        loom_error err = {0};
        if (loom_output_check(o->path, &err))
            return loom_cli_usage_error(cmd, "%s %s", o->opt, err.msg);
        for (int j = 0; j < n_inputs; j++)
            if (inputs[j].path && loom_same_file(o->path, inputs[j].path))
                return loom_cli_usage_error(cmd, "%s %s is also the input %s %s: it would be "
                                                 "overwritten; write elsewhere",
                                            o->opt, o->path, inputs[j].opt, inputs[j].path);
        for (int j = 0; j < i; j++)
            if (outputs[j].path && loom_same_file(o->path, outputs[j].path))
                return loom_cli_usage_error(cmd, "%s %s and %s %s are one file: one output "
                                                 "would overwrite the other",
                                            outputs[j].opt, outputs[j].path, o->opt, o->path);
    }
    return 0;
}
