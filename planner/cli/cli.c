/* cli.c — messages, the LOOM_DETERMINISTIC rule and data-file resolution for the
 * `loom` CLI (cli.h). */
#include "planner/cli/cli.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <strings.h>
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
    /* Bundled names are case-insensitive ("Llama-3-8B"), as cluster presets are. */
    for (size_t r = 0; r < 2; r++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", roots[r], kind);
        DIR *d = opendir(dir);
        struct dirent *de;
        bool found = false;
        while (d && !found && (de = readdir(d))) {
            size_t len = strlen(de->d_name), al = strlen(arg);
            found = strcasecmp(de->d_name, arg) == 0 ||
                    (len == al + 5 && strncasecmp(de->d_name, arg, al) == 0 &&
                     strcmp(de->d_name + al, ".json") == 0);
            if (found) snprintf(out, n, "%s/%s", dir, de->d_name);
        }
        if (d) closedir(d);
        if (found) return true;
    }
    return false;
}

/* Levenshtein distance, case-insensitive, of short names (capped at 63 chars). */
static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b), row[64];
    if (la > 63) la = 63;
    if (lb > 63) lb = 63;
    for (int j = 0; j <= lb; j++) row[j] = j;
    for (int i = 1; i <= la; i++) {
        int prev = row[0];
        row[0] = i;
        for (int j = 1; j <= lb; j++) {
            int cur = row[j];
            int sub = prev + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            int best = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            prev = cur;
        }
    }
    return row[lb];
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void loom_cli_suggest(const char *arg, const char *kind, const char *const *extra, char *out,
                      size_t n)
{
    char names[128][LOOM_NAME_MAX];
    const char *list[160];
    int k = 0;
    DIR *d;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/examples/%s", LOOM_SOURCE_DIR, kind);
    d = opendir(dir);
    if (!d) {
        snprintf(dir, sizeof dir, "%s/%s", LOOM_DATA_DIR, kind);
        d = opendir(dir);
    }
    struct dirent *de;
    while (d && k < 128 && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0 || len - 5 >= LOOM_NAME_MAX ||
            strstr(de->d_name, ".graph."))
            continue;
        snprintf(names[k], LOOM_NAME_MAX, "%.*s", (int)(len - 5), de->d_name);
        list[k] = names[k];
        k++;
    }
    if (d) closedir(d);
    for (; extra && *extra && k < 160; extra++) list[k++] = *extra;
    qsort(list, (size_t)k, sizeof list[0], cmp_str);
    /* the nearest names: distance within a third of the length (at least 2) */
    int best = 1 << 30;
    for (int i = 0; i < k; i++) {
        int dd = edit_distance(arg, list[i]);
        if (dd < best) best = dd;
    }
    int lim = (int)strlen(arg) / 3 > 2 ? (int)strlen(arg) / 3 : 2;
    size_t used = 0;
    out[0] = '\0';
    if (best <= lim) {
        used += (size_t)snprintf(out + used, n - used, "did you mean ");
        int shown = 0;
        for (int i = 0; i < k && used < n; i++)
            if (edit_distance(arg, list[i]) == best)
                used += (size_t)snprintf(out + used, n - used, "%s%s", shown++ ? " or " : "", list[i]);
        if (used < n) used += (size_t)snprintf(out + used, n - used, "? ");
    }
    if (used < n) used += (size_t)snprintf(out + used, n - used, "known: ");
    for (int i = 0; i < k && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", list[i]);
}

int loom_cli_no_model(const char *who, const char *arg)
{
    char hint[2048];
    loom_cli_suggest(arg, "models", NULL, hint, sizeof hint);
    fprintf(stderr, "%s: %s: no such file, and no bundled model of that name; %s\n", who, arg,
            hint);
    return LOOM_EXIT_FAIL;
}

void loom_cli_print_warnings(const loom_graph *g)
{
    for (int32_t i = 0; i < loom_graph_num_warnings(g); i++)
        fprintf(stderr, "loom: warning: %s: %s\n", loom_graph_name(g), loom_graph_warning(g, i));
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
