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
#include "costs/cluster.h"
#include <cJSON.h>

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

/* The bundled names of `kind` (examples/<kind>/NAME.json in the source tree,
 * else the installed data dir), without ".json", loom graphs left out, into
 * names[0..cap); returns how many. */
static int bundled_names(const char *kind, char (*names)[LOOM_NAME_MAX], int cap)
{
    int k = 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/examples/%s", LOOM_SOURCE_DIR, kind);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(dir, sizeof dir, "%s/%s", LOOM_DATA_DIR, kind);
        d = opendir(dir);
    }
    struct dirent *de;
    while (d && k < cap && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0 || len - 5 >= LOOM_NAME_MAX ||
            strstr(de->d_name, ".graph."))
            continue;
        snprintf(names[k], LOOM_NAME_MAX, "%.*s", (int)(len - 5), de->d_name);
        k++;
    }
    if (d) closedir(d);
    return k;
}

/* Whether hay contains needle, case ignored. */
static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0) return true;
    return n == 0;
}

/* "did you mean A or B? " for the candidates nearest to arg (edit distance,
 * case ignored, within a third of arg's length and at least 2), appended at
 * out + *used; failing that, those that contain `stem` (case ignored, at
 * least 3 characters; NULL: none); nothing when none qualifies. A name is
 * offered once. */
static void did_you_mean(const char *arg, const char *stem, const char *const *cand, int k,
                         char *out, size_t n, size_t *used)
{
    int best = 1 << 30;
    for (int i = 0; i < k; i++) {
        int dd = edit_distance(arg, cand[i]);
        if (dd < best) best = dd;
    }
    int lim = (int)strlen(arg) / 3 > 2 ? (int)strlen(arg) / 3 : 2;
    bool by_stem = best > lim;
    if (by_stem && (!stem || strlen(stem) < 3)) return;
    int shown = 0;
    for (int i = 0; i < k && *used < n; i++) {
        bool pick = by_stem ? contains_nocase(cand[i], stem) : edit_distance(arg, cand[i]) == best;
        for (int j = 0; pick && j < i; j++)
            if (strcasecmp(cand[j], cand[i]) == 0) pick = false;   /* shown already */
        if (pick)
            *used += (size_t)snprintf(out + *used, n - *used, "%s%s",
                                      shown++ ? " or " : "did you mean ", cand[i]);
    }
    if (shown && *used < n) *used += (size_t)snprintf(out + *used, n - *used, "? ");
}

void loom_cli_suggest(const char *arg, const char *kind, const char *const *extra, char *out,
                      size_t n)
{
    char names[128][LOOM_NAME_MAX];
    const char *list[160];
    int k = bundled_names(kind, names, 128);
    for (int i = 0; i < k; i++) list[i] = names[i];
    for (; extra && *extra && k < 160; extra++) list[k++] = *extra;
    qsort(list, (size_t)k, sizeof list[0], cmp_str);
    size_t used = 0;
    out[0] = '\0';
    did_you_mean(arg, NULL, list, k, out, n, &used);
    if (used < n) used += (size_t)snprintf(out + used, n - used, "known: ");
    for (int i = 0; i < k && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", list[i]);
}

const char *loom_cli_cluster_arg(const char *who, const char *arg, char *buf, size_t n)
{
    loom_cluster c;
    loom_error err = {0};
    if (!arg || !*arg) return arg;   /* loom_cluster_load says what is missing */
    if (loom_cluster_preset(arg, &c, &err) == LOOM_OK) return arg;
    if (loom_cli_find_data(arg, "clusters", buf, n)) return buf;
    /* a preset's name with a bad node count: its own message says what N may be */
    if (loom_cluster_is_preset_name(arg)) return arg;
    /* Candidates: each preset with the node count the user wrote (digits
     * ending arg after "-", "x" or "-x": "dgx-h10-16" -> dgx-h100-x16), else
     * one node, and the bundled cluster files. The stem, arg without its node
     * count ("h800" of "h800-x256"), finds names that contain it. */
    size_t len = strlen(arg);
    const char *digits = arg + len;
    while (digits > arg && digits[-1] >= '0' && digits[-1] <= '9') digits--;
    const char *cut = digits;
    if (cut > arg && (cut[-1] == 'x' || cut[-1] == 'X')) cut--;
    if (cut > arg && cut[-1] == '-') cut--;
    if (cut == digits || !*digits || strlen(digits) > 7) digits = "1", cut = arg + len;
    char stem[LOOM_NAME_MAX];
    snprintf(stem, sizeof stem, "%.*s", (int)(cut - arg), arg);
    char presets[32][LOOM_NAME_MAX], files[64][LOOM_NAME_MAX];
    const char *cand[96];
    int np = 0, nf = bundled_names("clusters", files, 64), k = 0;
    for (size_t i = 0; i < loom_cluster_preset_count() && np < 32; i++, np++)
        snprintf(presets[np], LOOM_NAME_MAX, "%s-x%s", loom_cluster_preset_prefix(i), digits);
    for (int i = 0; i < np; i++) cand[k++] = presets[i];
    for (int i = 0; i < nf; i++) cand[k++] = files[i];
    char hint[3072];
    size_t used = 0;
    hint[0] = '\0';
    did_you_mean(arg, stem, cand, k, hint, sizeof hint, &used);
    if (used < sizeof hint) used += (size_t)snprintf(hint + used, sizeof hint - used, "presets: ");
    for (size_t i = 0; i < loom_cluster_preset_count() && used < sizeof hint; i++)
        used += (size_t)snprintf(hint + used, sizeof hint - used, "%s%s-xN", i ? ", " : "",
                                 loom_cluster_preset_prefix(i));
    qsort(cand + np, (size_t)nf, sizeof cand[0], cmp_str);
    for (int i = 0; i < nf && used < sizeof hint; i++)
        used += (size_t)snprintf(hint + used, sizeof hint - used, "%s%s", i ? ", " : "; bundled files: ",
                                 cand[np + i]);
    fprintf(stderr, "%s: cluster '%s': not a preset, a file or a bundled cluster; %s\n", who, arg,
            hint);
    return NULL;
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

/* Plausible per-GPU, per-direction bandwidths: inside a node from PCIe 3
 * x16 (~12 GB/s usable) up to NVLink 5 (900 GB/s); across nodes from a
 * 10 Gb/s NIC (1.25 GB/s) up to 800 Gb/s per GPU (100 GB/s). */
#define INTRA_MIN_BPS 4e9
#define INTRA_MAX_BPS 1.2e12
#define INTER_MIN_BPS 1e9
#define INTER_MAX_BPS 1.0e11

int loom_cli_warn_inputs(const char *cmd, const char *cluster_file, const loom_cluster *c,
                         int64_t max_positions, int64_t gbs, int64_t seq, bool inference)
{
    int n = 0;
    double intra = c->intra.bandwidth_Bps, inter = c->inter.bandwidth_Bps;
    /* where the value came from: the file and its field, or the preset */
    char at[4200];
    if (c->gpus_per_node > 1 && (intra < INTRA_MIN_BPS || intra > INTRA_MAX_BPS)) {
        if (cluster_file)
            snprintf(at, sizeof at, "%s: %s", cluster_file,
                     c->intra_given ? "$.intra_node.bandwidth_GBps"
                                    : "$.gpu.nvlink_GBps (the intra-node default)");
        else snprintf(at, sizeof at, "cluster %s: intra-node bandwidth", c->name);
        fprintf(stderr, "loom %s: warning: %s: %.4g GB/s per GPU is outside what NVLink, xGMI or "
                        "PCIe give (%.0f-%.0f GB/s)\n",
                cmd, at, intra / 1e9, INTRA_MIN_BPS / 1e9, INTRA_MAX_BPS / 1e9);
        n++;
    }
    if (c->nodes > 1 && (inter < INTER_MIN_BPS || inter > INTER_MAX_BPS)) {
        if (cluster_file)
            snprintf(at, sizeof at, "%s: $.inter_node.bandwidth_GBps", cluster_file);
        else snprintf(at, sizeof at, "cluster %s: inter-node bandwidth", c->name);
        fprintf(stderr, "loom %s: warning: %s: %.4g GB/s per GPU is outside what a NIC gives "
                        "(%.0f-%.0f GB/s)%s\n",
                cmd, at, inter / 1e9, INTER_MIN_BPS / 1e9, INTER_MAX_BPS / 1e9,
                inter > INTER_MAX_BPS ? "; a NIC's Gb/s written as GB/s? 400 Gb/s is 50 GB/s" : "");
        n++;
    }
    int64_t gpus = loom_cluster_gpus(c);
    if (!inference && gbs > 0 && gbs * 8 < gpus) {
        fprintf(stderr, "loom %s: warning: a batch of %lld sequences cannot feed %lld GPUs: "
                        "with one sequence per data-parallel replica each sequence is split over "
                        "%lld or more GPUs, and utilisation drops; try --gbs %lld or more\n",
                cmd, (long long)gbs, (long long)gpus, (long long)((gpus + gbs - 1) / gbs),
                (long long)((gpus + 7) / 8));
        n++;
    }
    if (max_positions > 0 && seq > max_positions) {
        fprintf(stderr, "loom %s: warning: sequence %lld is beyond the model's %lld positions "
                        "(max_position_embeddings); the model was not trained for it\n",
                cmd, (long long)seq, (long long)max_positions);
        n++;
    }
    return n;
}

int64_t loom_cli_default_seq(const char *model_path)
{
    char *text = NULL;
    size_t len = 0;
    loom_error err = {0};
    int64_t seq = LOOM_CLI_DEFAULT_SEQ;
    if (!model_path || loom_read_file(model_path, 0, &text, &len, &err)) return seq;
    cJSON *root = cJSON_ParseWithLength(text, len);
    const cJSON *np = root ? cJSON_GetObjectItemCaseSensitive(root, "n_positions") : NULL;
    if (cJSON_IsNumber(np) && np->valuedouble >= 1 && np->valuedouble < (double)seq)
        seq = (int64_t)np->valuedouble;
    cJSON_Delete(root);
    free(text);
    return seq;
}
