/*
 * megatron_cmdline.c — the training command of a launch script, split into
 * launcher words and Megatron-LM arguments with their values, argparse's way
 * (megatron_cmdline.h). Lookups go by the argument's index in the compiled
 * table (megatron_args.h), so each name costs one binary search.
 */
#include "planner/import/megatron_cmdline.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/export/megatron_args.h"

loom_status loom_megatron_line_vfail(const loom_megatron_line *l, int line, const char *fmt,
                                     va_list ap)
{
    char msg[LOOM_ERROR_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return loom_error_set(l->err, LOOM_ERR_INVALID, "%s:%d: %s", l->source, line ? line : l->line,
                          msg);
}

loom_status loom_megatron_line_fail(const loom_megatron_line *l, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    loom_status s = loom_megatron_line_vfail(l, line, fmt, ap);
    va_end(ap);
    return s;
}

static const loom_megatron_given *find(const loom_megatron_line *c, const char *name)
{
    const loom_megatron_arg *a = loom_megatron_arg_find(name);
    LOOM_ASSERT(a != NULL);   /* only listed names are asked for */
    const loom_megatron_given *g = &c->given[a - loom_megatron_arg_at(0)];
    return g->set ? g : NULL;
}

bool loom_megatron_line_has(const loom_megatron_line *c, const char *name)
{
    return find(c, name) != NULL;
}
int loom_megatron_line_at(const loom_megatron_line *c, const char *name)
{
    const loom_megatron_given *g = find(c, name);
    return g ? g->line : c->line;
}

/* Strict integer parse of a whole string. */
bool loom_megatron_parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE) return false;
    *out = v;
    return true;
}

/* A finite number, the whole string. */
static bool parse_num(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

static loom_status unresolved_value(const loom_megatron_line *c, const char *name,
                                    const loom_megatron_given *g)
{
    return loom_megatron_line_fail(c, g->line,
                                   "%s: its value %s is not set in the launch text (a variable or "
                                   "command output loom cannot know)",
                                   name, g->raw && g->raw[0] ? g->raw : "(empty)");
}

/* Integer argument `name` in [lo, hi]; dflt when absent. */
loom_status loom_megatron_line_int(const loom_megatron_line *c, const char *name, int64_t dflt,
                                   int64_t lo, int64_t hi, int64_t *out)
{
    const loom_megatron_given *g = find(c, name);
    if (!g) {
        *out = dflt;
        return LOOM_OK;
    }
    if (g->unresolved) return unresolved_value(c, name, g);
    int64_t v;
    if (!loom_megatron_parse_i64(g->value, &v))
        return loom_megatron_line_fail(c, g->line, "%s expects an integer, found '%s'", name,
                                       g->value);
    if (v < lo || v > hi)
        return loom_megatron_line_fail(c, g->line, "%s must be in [%lld, %lld], found %lld", name,
                                       (long long)lo, (long long)hi, (long long)v);
    *out = v;
    return LOOM_OK;
}

loom_status loom_megatron_line_num(const loom_megatron_line *c, const char *name, double dflt,
                                   double *out)
{
    const loom_megatron_given *g = find(c, name);
    if (!g) {
        *out = dflt;
        return LOOM_OK;
    }
    if (g->unresolved) return unresolved_value(c, name, g);
    double v;
    if (!parse_num(g->value, &v))
        return loom_megatron_line_fail(c, g->line, "%s expects a number, found '%s'", name,
                                       g->value);
    *out = v;
    return LOOM_OK;
}

/* String argument, or dflt; fails on an unresolved value. */
loom_status loom_megatron_line_str(const loom_megatron_line *c, const char *name, const char *dflt,
                                   const char **out)
{
    const loom_megatron_given *g = find(c, name);
    if (!g) {
        *out = dflt;
        return LOOM_OK;
    }
    if (g->unresolved) return unresolved_value(c, name, g);
    *out = g->value;
    return LOOM_OK;
}

/* ---- the training command ---------------------------------------------------------- */

static const char *basename_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static bool is_script(const char *w)
{
    size_t n = strlen(w);
    return n > 3 && strcmp(w + n - 3, ".py") == 0;
}

/* The command and word index of the training script; -1 when none. */
static void find_script(const loom_sh_script *s, int *cmd, int *word)
{
    *cmd = *word = -1;
    bool best_pref = false;
    for (int i = 0; i < loom_sh_command_count(s); i++) {
        const loom_sh_command *c = loom_sh_command_at(s, i);
        for (int k = 0; k < c->n_words; k++) {
            if (!is_script(c->words[k].text)) continue;
            const char *b = basename_of(c->words[k].text);
            bool pref = strncmp(b, "pretrain", 8) == 0 || strncmp(b, "train", 5) == 0;
            if (pref || !best_pref) {
                *cmd = i;
                *word = k;
                best_pref = pref;
            }
            break;
        }
    }
}

/* Launcher options before the script: nodes × processes per node. */
static loom_status read_launcher(const loom_megatron_line *c, const loom_sh_command *cmd, int end,
                                 int64_t *nodes, int64_t *per_node)
{
    static const struct {
        const char *name;
        bool nodes;
    } opts[] = {
        {"--nnodes", true},           {"--nproc-per-node", false}, {"--nproc_per_node", false},
        {"--num_nodes", true},        {"--num_gpus", false},       {"--num-nodes", true},
        {"--num-gpus", false},        {"-N", true},                {"--nodes", true},
        {"--ntasks-per-node", false},
    };
    *nodes = *per_node = 0;
    for (int k = 0; k < end; k++) {
        const loom_sh_word *w = &cmd->words[k];
        if (strcmp(w->text, "--standalone") == 0 && *nodes == 0) *nodes = 1;
        for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
            size_t n = strlen(opts[o].name);
            const loom_sh_word *vw = NULL;
            const char *v = NULL;
            if (strncmp(w->text, opts[o].name, n) != 0) continue;
            if (w->text[n] == '=')
                v = w->text + n + 1, vw = w;
            else if (w->text[n] == '\0' && k + 1 < end)
                v = cmd->words[k + 1].text, vw = &cmd->words[k + 1];
            else
                continue;
            int64_t x;
            if (vw->unresolved) break;   /* unknown: the caller's GPU count decides */
            if (strchr(v, ':'))
                return loom_megatron_line_fail(
                    c, w->line,
                    "%s %s: elastic (min:max) node counts are not a fixed "
                    "world size; give one number",
                    opts[o].name, v);
            if (!loom_megatron_parse_i64(v, &x) || x < 1) {
                if (opts[o].nodes)
                    return loom_megatron_line_fail(
                        c, w->line, "%s expects a node count, found '%s'", opts[o].name, v);
                break; /* "gpu", "auto": as many as the node has, unknown here */
            }
            if (opts[o].nodes) *nodes = x;
            else *per_node = x;
        }
    }
    return LOOM_OK;
}

/* Reads the Megatron-LM arguments words[from..n) into c->g. */
static loom_status read_args(loom_megatron_line *c, const loom_sh_command *cmd, int from,
                             int *n_args)
{
    *n_args = 0;
    for (int k = from; k < cmd->n_words;) {
        const loom_sh_word *w = &cmd->words[k];
        if (w->unresolved && w->text[0] == '\0') {
            k++;   /* an unset "$EXTRA_ARGS": nothing there */
            continue;
        }
        if (strncmp(w->text, "--", 2) != 0)
            return loom_megatron_line_fail(
                c, w->line, "expected a Megatron-LM argument (--name), found '%s'", w->text);
        char name[128];
        const char *eq = strchr(w->text, '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - w->text) : (int)strlen(w->text),
                 w->text);
        const loom_megatron_arg *a = loom_megatron_arg_find(name);
        if (!a)
            return loom_megatron_line_fail(c, w->line,
                                           "unknown Megatron-LM argument %s (did you mean %s?)",
                                           name, loom_megatron_arg_nearest(name));
        loom_megatron_given *g = &c->given[a - loom_megatron_arg_at(0)];
        free(g->owned);
        *g = (loom_megatron_given){
            .set = true, .line = w->line, .unresolved = w->unresolved, .raw = w->raw};
        (*n_args)++;
        k++;
        if (a->kind == LOOM_MARG_FLAG) {
            if (eq)
                return loom_megatron_line_fail(
                    c, w->line, "%s is a flag and takes no value, found '%s'", name, w->text);
            continue;
        }
        if (a->kind == LOOM_MARG_LIST) {
            size_t len = eq ? strlen(eq + 1) + 1 : 1;
            int k0 = k;
            while (k < cmd->n_words && strncmp(cmd->words[k].text, "--", 2) != 0)
                len += strlen(cmd->words[k++].text) + 1;
            g->owned = calloc(len, 1);
            if (!g->owned) return loom_error_set(c->err, LOOM_ERR_NOMEM, "out of memory");
            if (eq) strcat(g->owned, eq + 1);
            for (int j = k0; j < k; j++) {
                if (g->owned[0]) strcat(g->owned, " ");
                strcat(g->owned, cmd->words[j].text);
                g->unresolved |= cmd->words[j].unresolved;
                if (cmd->words[j].unresolved && !(g->raw && g->raw[0])) g->raw = cmd->words[j].raw;
            }
            g->value = g->owned;
            continue;
        }
        const loom_sh_word *vw = w;
        if (eq) {
            g->value = eq + 1;
        } else {
            if (k >= cmd->n_words || strncmp(cmd->words[k].text, "--", 2) == 0)
                return loom_megatron_line_fail(c, w->line, "%s expects a value (%s)", name,
                                               loom_megatron_arg_kind_name(a->kind));
            vw = &cmd->words[k++];
            g->value = vw->text;
            g->unresolved = vw->unresolved;
            g->raw = vw->raw;
        }
        if (g->unresolved) continue;
        if (a->kind == LOOM_MARG_INT) {
            int64_t x;
            if (!loom_megatron_parse_i64(g->value, &x))
                return loom_megatron_line_fail(c, vw->line, "%s expects an integer, found '%s'",
                                               name, g->value);
        } else if (a->kind == LOOM_MARG_FLOAT) {
            double x;
            if (!parse_num(g->value, &x))
                return loom_megatron_line_fail(c, vw->line, "%s expects a number, found '%s'", name,
                                               g->value);
        }
    }
    return LOOM_OK;
}

loom_status loom_megatron_line_read(const char *source, const loom_sh_script *sh,
                                    loom_megatron_line *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    out->source = source;
    out->err = err;
    out->line = 1;
    out->given = calloc(loom_megatron_arg_count(), sizeof *out->given);
    if (!out->given) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    int ci, wi;
    find_script(sh, &ci, &wi);
    const loom_sh_command *cmd = NULL;
    loom_status s = LOOM_OK;
    if (ci >= 0) {
        cmd = loom_sh_command_at(sh, ci);
        snprintf(out->script, sizeof out->script, "%s", basename_of(cmd->words[wi].text));
        out->line = cmd->words[wi].line;
        s = read_launcher(out, cmd, wi, &out->nodes, &out->per_node);
    } else {
        /* bare arguments: one command whose first word is an argument */
        cmd = loom_sh_command_at(sh, 0);
        wi = -1;
        if (!cmd || strncmp(cmd->words[0].text, "--", 2) != 0 || loom_sh_command_count(sh) > 1)
            s = loom_error_set(err, LOOM_ERR_PARSE,
                               "%s: no training command found: expected `torchrun ... "
                               "pretrain_gpt.py --tensor-model-parallel-size ...` or Megatron-LM "
                               "arguments",
                               source);
        else out->line = cmd->words[0].line;
    }
    if (s == LOOM_OK) s = read_args(out, cmd, wi + 1, &out->n_args);
    if (s) loom_megatron_line_free(out);
    return s;
}

void loom_megatron_line_free(loom_megatron_line *l)
{
    if (!l->given) return;
    for (size_t i = 0; i < loom_megatron_arg_count(); i++) free(l->given[i].owned);
    free(l->given);
    l->given = NULL;
}
