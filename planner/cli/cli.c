/* cli.c — option parsing and data-file resolution for the `loom` CLI (cli.h). */
#include "planner/cli/cli.h"

#include <errno.h>
#include <math.h>
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

int loom_cli_opt(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        *i += 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "loom %s: option %s needs a value\n", argv[0], name);
        return -1;
    }
    *value = argv[*i + 1];
    *i += 2;
    return 1;
}

bool loom_cli_int(const char *cmd, const char *opt, const char *value, int64_t lo, int64_t hi,
                  int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    int64_t mult = 1;
    if (end != value && (*end == 'K' || *end == 'k')) mult = 1024, end++;
    else if (end != value && (*end == 'M' || *end == 'm')) mult = 1024 * 1024, end++;
    if (end == value || *end != '\0' || errno == ERANGE) {
        loom_cli_usage_error(cmd, "%s expects an integer, got '%s'", opt, value);
        return false;
    }
    if (v > INT64_MAX / mult || v < INT64_MIN / mult || v * mult < lo || v * mult > hi) {
        loom_cli_usage_error(cmd, "%s must be in [%lld, %lld], got '%s'", opt, (long long)lo,
                             (long long)hi, value);
        return false;
    }
    *out = (int64_t)v * mult;
    return true;
}

bool loom_cli_num(const char *cmd, const char *opt, const char *value, double lo, double hi,
                  double *out)
{
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end != '\0' || !isfinite(v)) {
        loom_cli_usage_error(cmd, "%s expects a number, got '%s'", opt, value);
        return false;
    }
    if (v < lo || v > hi) {
        loom_cli_usage_error(cmd, "%s must be in [%g, %g], got '%s'", opt, lo, hi, value);
        return false;
    }
    *out = v;
    return true;
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
