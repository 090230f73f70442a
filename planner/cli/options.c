/*
 * options.c — the option-table parser and the --help it generates
 * (options.h).
 *
 * One pass over argv: "-h"/"--help" prints the help; a word that starts with
 * '-' (not "-" alone) is looked up in the table by the part before any '=',
 * takes its value from after the '=' or from the next word (whatever it
 * looks like, so "--seed -1" reaches the range check), and is converted by
 * its kind into its field; any other word is positional. Values are checked
 * as they come, so the first bad word is the one reported.
 *
 * The help is the spec's synopsis and prose around one generated line group
 * per row: "  --name METAVAR   help (default D)". The default is read from
 * a copy of the args struct that spec->init filled, so it is the value the
 * command starts from, not a number retyped in a string.
 */
#include "planner/cli/options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cli/cli.h"

#define HELP_COLUMN_MAX 22   /* labels wider than this put their help on the next line */
#define HELP_WIDTH 96        /* a default that would pass this column goes on a line of its own */

/* ---- fields ------------------------------------------------------------------------ */

static void *field_ptr(void *args, loom_cli_field f) { return (char *)args + f.at - 1; }

static void set_int(void *args, loom_cli_field f, int64_t v)
{
    void *p = field_ptr(args, f);
    if (f.size == sizeof(int64_t)) *(int64_t *)p = v;
    else if (f.size == sizeof(int32_t)) *(int32_t *)p = (int32_t)v;
    else *(bool *)p = v != 0;   /* an ENUM of two values into a bool (spec_check: size 1) */
}

static int64_t get_int(const void *args, loom_cli_field f)
{
    const void *p = (const char *)args + f.at - 1;
    if (f.size == sizeof(int64_t)) return *(const int64_t *)p;
    if (f.size == sizeof(int32_t)) return *(const int32_t *)p;
    return *(const bool *)p;
}

/* ---- values ------------------------------------------------------------------------ */

/* An integer (with size_suffix: and a K/M/G suffix) in [lo, hi]; false
 * after a usage error naming cmd, opt and value. */
static bool parse_int(const char *cmd, const char *opt, const char *value, bool size_suffix,
                      int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    int64_t mult = 1;
    if (size_suffix && end != value) {
        switch (*end) {
        case 'K': case 'k': mult = (int64_t)1 << 10, end++; break;
        case 'M': case 'm': mult = (int64_t)1 << 20, end++; break;
        case 'G': case 'g': mult = (int64_t)1 << 30, end++; break;
        default: break;
        }
    }
    if (end == value || *end != '\0' || errno == ERANGE) {
        loom_cli_usage_error(cmd, "%s expects an integer%s, got '%s'", opt,
                             size_suffix ? " (K, M or G suffix allowed)" : "", value);
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

static bool parse_num(const char *cmd, const char *opt, const char *value, double lo, double hi,
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

/* "a, b or c" (sep ", ") or "a|b|c" (sep "|") of the listed choices. */
static void join_choices(const loom_cli_choice *c, const char *sep, char *buf, size_t n)
{
    int total = 0, k = 0;
    for (const loom_cli_choice *x = c; x->name; x++) total += !x->hidden;
    size_t off = 0;
    buf[0] = '\0';
    for (const loom_cli_choice *x = c; x->name && off < n; x++) {
        if (x->hidden) continue;
        const char *s = k == 0 ? "" : !strcmp(sep, "|") ? "|" : k == total - 1 ? " or " : sep;
        int w = snprintf(buf + off, n - off, "%s%s", s, x->name);
        if (w < 0) break;
        off += (size_t)w;
        k++;
    }
}

static const char *choice_name(const loom_cli_choice *c, int64_t v)
{
    for (; c->name; c++)
        if (!c->hidden && c->value == v) return c->name;
    return NULL;
}

/* Converts value into o's field; false after a usage error. */
static bool apply(const loom_cli_spec *s, const loom_cli_option *o, const char *opt,
                  const char *value, void *args)
{
    int64_t iv;
    double dv;
    switch (o->kind) {
    case LOOM_CLI_INT:
    case LOOM_CLI_SIZE:
        if (!parse_int(s->cmd, opt, value, o->kind == LOOM_CLI_SIZE, o->lo, o->hi, &iv))
            return false;
        set_int(args, o->field, iv);
        return true;
    case LOOM_CLI_NUM:
        if (!parse_num(s->cmd, opt, value, o->min, o->max, &dv)) return false;
        *(double *)field_ptr(args, o->field) = dv;
        return true;
    case LOOM_CLI_STR:
        *(const char **)field_ptr(args, o->field) = value;
        return true;
    case LOOM_CLI_ENUM:
        for (const loom_cli_choice *c = o->choices; c->name; c++)
            if (!strcmp(c->name, value)) {
                set_int(args, o->field, c->value);
                return true;
            }
        {
            char names[512];
            join_choices(o->choices, ", ", names, sizeof names);
            loom_cli_usage_error(s->cmd, "%s expects %s, got '%s'", opt, names, value);
        }
        return false;
    case LOOM_CLI_CUSTOM:
        return o->parse(s->cmd, opt, value, args);
    case LOOM_CLI_FLAG:
        break;
    }
    return false;
}

/* ---- lookup and suggestions ------------------------------------------------------------ */

static bool same(const char *name, const char *word, size_t len)
{
    return name && strlen(name) == len && !strncmp(name, word, len);
}

static const loom_cli_option *find(const loom_cli_spec *s, const char *word, size_t len)
{
    for (size_t k = 0; k < s->n_opts; k++)
        if (same(s->opts[k].name, word, len) || same(s->opts[k].short_name, word, len))
            return &s->opts[k];
    return NULL;
}

/* Levenshtein distance of a[0..la) and b, two rows of a small table. */
static size_t edit_distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b), row[2][64];
    if (la >= 63 || lb >= 63) return (size_t)-1;
    for (size_t j = 0; j <= lb; j++) row[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t *prev = row[(i - 1) & 1], *cur = row[i & 1];
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    }
    return row[la & 1][lb];
}

/* The known option closest to word[0..len), or NULL when none is close. */
static const char *suggest(const loom_cli_spec *s, const char *word, size_t len)
{
    const char *best = NULL, *prefixed = NULL;
    size_t best_d = (size_t)-1;
    int n_prefixed = 0;
    for (size_t k = 0; k <= s->n_opts; k++) {
        const char *names[2] = {k < s->n_opts ? s->opts[k].name : "--help",
                                k < s->n_opts ? s->opts[k].short_name : NULL};
        for (int j = 0; j < 2; j++) {
            const char *nm = names[j];
            if (!nm) continue;
            size_t d = edit_distance(word, len, nm), lim = strlen(nm) / 3;
            if (lim < 2) lim = 2;
            if (d <= lim && d < best_d) best = nm, best_d = d;
            if (len >= 4 && strlen(nm) > len && !strncmp(nm, word, len)) prefixed = nm, n_prefixed++;
        }
    }
    if (best) return best;
    return n_prefixed == 1 ? prefixed : NULL;
}

static int unknown_option(const loom_cli_spec *s, const char *arg, size_t len)
{
    const char *near = suggest(s, arg, len);
    if (near) return loom_cli_usage_error(s->cmd, "unknown option '%s' (did you mean %s?)", arg, near);
    if (s->n_opts > 4) return loom_cli_usage_error(s->cmd, "unknown option '%s'", arg);
    /* a short table: name all of it */
    char list[256];
    size_t off = 0;
    list[0] = '\0';
    for (size_t k = 0; k < s->n_opts && off < sizeof list; k++) {
        const char *nm = s->opts[k].short_name ? s->opts[k].short_name : s->opts[k].name;
        int w = snprintf(list + off, sizeof list - off, "%s%s", k ? ", " : "", nm);
        if (w < 0) break;
        off += (size_t)w;
    }
    return loom_cli_usage_error(s->cmd, "unknown option '%s' (%s takes %s)", arg, s->cmd, list);
}

/* ---- positional arguments -------------------------------------------------------------- */

static int positional(const loom_cli_spec *s, const char *arg, void *args)
{
    const loom_cli_positional *p = &s->pos;
    if (p->max == 0)
        return loom_cli_usage_error(s->cmd, "unexpected argument '%s'%s", arg,
                                    p->too_many ? p->too_many : "");
    if (p->max == 1) {
        const char **slot = field_ptr(args, p->field);
        if (!*slot) {
            *slot = arg;
            return LOOM_CLI_RUN;
        }
        if (p->too_many) return loom_cli_usage_error(s->cmd, p->too_many, *slot, arg);
        return loom_cli_usage_error(s->cmd, "one %s expected, got '%s' and '%s'", p->noun, *slot,
                                    arg);
    }
    const char **list = field_ptr(args, p->field);
    int *count = field_ptr(args, p->count);
    if (*count >= p->max)
        return loom_cli_usage_error(s->cmd, "at most %d %s", p->max, p->noun);
    list[(*count)++] = arg;
    return LOOM_CLI_RUN;
}

/* ---- the parser ------------------------------------------------------------------------ */

int loom_cli_parse(const loom_cli_spec *s, int argc, char **argv, void *args)
{
    s->init(args);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            loom_cli_help(s, stdout);
            return LOOM_EXIT_OK;
        }
        if (a[0] != '-' || a[1] == '\0') {
            int rc = positional(s, a, args);
            if (rc != LOOM_CLI_RUN) return rc;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const loom_cli_option *o = find(s, a, len);
        if (!o) return unknown_option(s, a, len);
        char opt[64];   /* the option as written, for messages */
        snprintf(opt, sizeof opt, "%.*s", (int)len, a);
        if (o->kind == LOOM_CLI_FLAG) {
            if (eq) return loom_cli_usage_error(s->cmd, "option %s takes no value, got '%s'", opt, a);
            *(bool *)field_ptr(args, o->field) = true;
        } else {
            const char *value = eq ? eq + 1 : NULL;
            if (!value) {
                if (i + 1 >= argc)
                    return loom_cli_usage_error(s->cmd, "option %s needs a value", opt);
                value = argv[++i];
            }
            if (!apply(s, o, opt, value, args)) return LOOM_EXIT_USAGE;
        }
        if (o->given.at) *(bool *)field_ptr(args, o->given) = true;
    }
    return LOOM_CLI_RUN;
}

/* ---- the help -------------------------------------------------------------------------- */

/* "-o, --output FILE", "--gbs N", "--mode train|infer", "--json". */
static void label(const loom_cli_option *o, char *buf, size_t n)
{
    char choices[256] = "";
    const char *mv = o->metavar;
    if (!mv && o->kind == LOOM_CLI_ENUM) {
        join_choices(o->choices, "|", choices, sizeof choices);
        mv = choices;
    }
    snprintf(buf, n, "%s%s%s%s%s", o->short_name ? o->short_name : "",
             o->short_name && o->name ? ", " : "", o->name ? o->name : "",
             o->kind != LOOM_CLI_FLAG && mv ? " " : "", o->kind != LOOM_CLI_FLAG && mv ? mv : "");
}

/* The "(default …)" note of o, from the initialised args; "" when none. */
static void default_note(const loom_cli_option *o, const void *init, char *buf, size_t n)
{
    char d[128] = "";
    if (o->def) {
        snprintf(d, sizeof d, "%s", o->def);
    } else if (init && o->field.at) {
        const void *p = (const char *)init + o->field.at - 1;
        switch (o->kind) {
        case LOOM_CLI_INT:
        case LOOM_CLI_SIZE:
            snprintf(d, sizeof d, "%lld", (long long)get_int(init, o->field));
            break;
        case LOOM_CLI_NUM:
            snprintf(d, sizeof d, "%g", *(const double *)p);
            break;
        case LOOM_CLI_ENUM: {
            const char *nm = choice_name(o->choices, get_int(init, o->field));
            if (nm) snprintf(d, sizeof d, "%s", nm);
            break;
        }
        case LOOM_CLI_STR:
            if (*(const char *const *)p) snprintf(d, sizeof d, "%s", *(const char *const *)p);
            break;
        case LOOM_CLI_FLAG:
        case LOOM_CLI_CUSTOM:
            break;
        }
    }
    /* "(default 256)", "(default: GPUs / (tp·pp·cp))" for a phrase */
    if (d[0]) snprintf(buf, n, "(default%s %s)", strchr(d, ' ') ? ":" : "", d);
    else buf[0] = '\0';
}

/* Prints "  LABEL  help" with the help's further lines under its first and
 * the note after its last line (or under it when the line would be long). */
static void item(FILE *f, int col, const char *lab, const char *help, const char *note)
{
    int w = fprintf(f, "  %s", lab);
    const char *h = help ? help : "";
    bool first = true;
    int line_w = w;
    do {
        const char *nl = strchr(h, '\n');
        int len = nl ? (int)(nl - h) : (int)strlen(h);
        if (!first || line_w > col + 2) {
            fprintf(f, "\n%*s", col + 4, "");
            line_w = col + 4;
        } else {
            fprintf(f, "%*s", col + 4 - line_w, "");
            line_w = col + 4;
        }
        fprintf(f, "%.*s", len, h);
        line_w += len;
        first = false;
        h = nl ? nl + 1 : NULL;
    } while (h && *h);
    if (note[0]) {
        bool empty = !help || !help[0];
        if (!empty && line_w + 1 + (int)strlen(note) > HELP_WIDTH)
            fprintf(f, "\n%*s%s", col + 4, "", note);
        else fprintf(f, "%s%s", empty ? "" : " ", note);
    }
    fputc('\n', f);
}

void loom_cli_help(const loom_cli_spec *s, FILE *f)
{
    void *init = calloc(1, s->args_size ? s->args_size : 1);
    if (init) s->init(init);
    char lab[160], note[192];
    int col = 0;
    if (s->pos.max > 0) col = (int)strlen(s->pos.metavar);
    for (size_t k = 0; k < s->n_opts; k++) {
        label(&s->opts[k], lab, sizeof lab);
        int w = (int)strlen(lab);
        if (w <= HELP_COLUMN_MAX && w > col) col = w;
    }
    fputs(s->usage, f);
    if (s->about) fprintf(f, "\n%s", s->about);
    fputc('\n', f);
    if (s->pos.max > 0 && s->pos.help) item(f, col, s->pos.metavar, s->pos.help, "");
    for (size_t k = 0; k < s->n_opts; k++) {
        label(&s->opts[k], lab, sizeof lab);
        default_note(&s->opts[k], init, note, sizeof note);
        item(f, col, lab, s->opts[k].help, note);
        if (s->opts[k].kind == LOOM_CLI_SIZE)
            fprintf(f, "%*s%s\n", col + 4, "", "a K, M or G suffix multiplies by 1024: 32K = 32768");
    }
    if (s->epilogue) fprintf(f, "\n%s", s->epilogue);
    if (s->epilogue_fn) fprintf(f, "%s\n", s->epilogue_fn());
    free(init);
}

/* ---- table checks ---------------------------------------------------------------------- */

static bool fail_check(char *msg, size_t n, const char *cmd, const char *what, const char *name)
{
    snprintf(msg, n, "loom %s: %s: %s", cmd, name ? name : "(row)", what);
    return false;
}

/* Is the option word[0..len) in the synopsis an option of s? */
static bool synopsis_word_known(const loom_cli_spec *s, const char *word, size_t len)
{
    return find(s, word, len) || same("--help", word, len) || same("-h", word, len);
}

bool loom_cli_spec_check(const loom_cli_spec *s, char *msg, size_t n)
{
    const char *cmd = s->cmd;
    void *init = calloc(1, s->args_size ? s->args_size : 1);
    if (!init) return fail_check(msg, n, cmd, "out of memory", NULL);
    s->init(init);
    bool ok = true;
    for (size_t k = 0; k < s->n_opts && ok; k++) {
        const loom_cli_option *o = &s->opts[k];
        const char *nm = o->name ? o->name : o->short_name;
        size_t fs = o->field.size;
        if (!nm) ok = fail_check(msg, n, cmd, "a row without a name", NULL);
        else if ((o->name && strncmp(o->name, "--", 2)) ||
                 (o->short_name && (o->short_name[0] != '-' || strlen(o->short_name) != 2)))
            ok = fail_check(msg, n, cmd, "names are --long and -s", nm);
        else if (o->name && find(s, o->name, strlen(o->name)) != o)
            ok = fail_check(msg, n, cmd, "listed twice", nm);
        else if (o->short_name && find(s, o->short_name, strlen(o->short_name)) != o)
            ok = fail_check(msg, n, cmd, "short name listed twice", nm);
        else if (!o->help || !o->help[0])
            ok = fail_check(msg, n, cmd, "no help text", nm);
        else if (o->kind != LOOM_CLI_CUSTOM && !o->field.at)
            ok = fail_check(msg, n, cmd, "no field", nm);
        else if (o->given.at && o->given.size != sizeof(bool))
            ok = fail_check(msg, n, cmd, "`given` is not a bool", nm);
        else if (o->kind == LOOM_CLI_FLAG && fs != sizeof(bool))
            ok = fail_check(msg, n, cmd, "a flag fills a bool", nm);
        else if ((o->kind == LOOM_CLI_INT || o->kind == LOOM_CLI_SIZE) &&
                 !(fs == sizeof(int64_t) || (fs == sizeof(int32_t) && o->lo >= INT32_MIN &&
                                             o->hi <= INT32_MAX)))
            ok = fail_check(msg, n, cmd, "an integer fills an int64_t, or an int32_t its range fits",
                            nm);
        else if ((o->kind == LOOM_CLI_INT || o->kind == LOOM_CLI_SIZE) && o->lo > o->hi)
            ok = fail_check(msg, n, cmd, "empty range", nm);
        else if (o->kind == LOOM_CLI_NUM && (fs != sizeof(double) || !(o->min <= o->max)))
            ok = fail_check(msg, n, cmd, "a number fills a double and has a range", nm);
        else if (o->kind == LOOM_CLI_STR && fs != sizeof(const char *))
            ok = fail_check(msg, n, cmd, "a string fills a const char *", nm);
        else if (o->kind == LOOM_CLI_ENUM &&
                 (!o->choices || !o->choices[0].name ||
                  !(fs == sizeof(int32_t) || fs == sizeof(int64_t) || fs == sizeof(bool))))
            ok = fail_check(msg, n, cmd, "an enum has choices and fills an int or a bool", nm);
        else if (o->kind == LOOM_CLI_CUSTOM && !o->parse)
            ok = fail_check(msg, n, cmd, "a custom option has parse()", nm);
        else if ((o->kind == LOOM_CLI_INT || o->kind == LOOM_CLI_SIZE) && !o->def &&
                 (get_int(init, o->field) < o->lo || get_int(init, o->field) > o->hi))
            ok = fail_check(msg, n, cmd, "the default shown is out of range (give `def`)", nm);
        else if (o->kind == LOOM_CLI_NUM && !o->def &&
                 (*(double *)field_ptr(init, o->field) < o->min ||
                  *(double *)field_ptr(init, o->field) > o->max))
            ok = fail_check(msg, n, cmd, "the default shown is out of range (give `def`)", nm);
        else if (o->kind == LOOM_CLI_ENUM && !o->def &&
                 !choice_name(o->choices, get_int(init, o->field)))
            ok = fail_check(msg, n, cmd, "the default is none of the choices (give `def`)", nm);
    }
    const loom_cli_positional *p = &s->pos;
    if (ok && p->max == 1 && (p->field.size != sizeof(const char *) || !p->noun))
        ok = fail_check(msg, n, cmd, "one positional fills a const char * and has a noun", "pos");
    if (ok && p->max > 1 &&
        (p->field.size != (size_t)p->max * sizeof(const char *) || p->count.size != sizeof(int)))
        ok = fail_check(msg, n, cmd, "a positional list fills a const char *[max] and an int", "pos");
    /* every option the synopsis names is in the table */
    for (const char *u = s->usage; ok && *u; u++) {
        if (*u != '-' || (u > s->usage && u[-1] != ' ' && u[-1] != '[')) continue;
        size_t len = strspn(u, "-abcdefghijklmnopqrstuvwxyz0123456789");
        if (len < 2 || u[1] == ' ') continue;
        if (!synopsis_word_known(s, u, len)) {
            char word[64];
            snprintf(word, sizeof word, "%.*s", (int)len, u);
            ok = fail_check(msg, n, cmd, "the synopsis names an option the table lacks", word);
        }
        u += len - 1;
    }
    free(init);
    return ok;
}
