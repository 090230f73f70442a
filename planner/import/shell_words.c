/*
 * shell_words.c — bash word rules for launch scripts (see shell_words.h).
 *
 * One left-to-right pass: the lexer reads a word at a time and expands it at
 * once against the variables assigned so far, which is the order bash runs a
 * script in when it has no control flow. A word being built may become
 * several (an unquoted expansion containing blanks, "${ARR[@]}"), so the
 * builder appends finished words to a target list: the current command's
 * words, or the elements of an array assignment.
 *
 * Arithmetic $(( … )) is evaluated by shell_arith.c.
 */
#include "planner/import/shell_words.h"
#include "planner/import/shell_arith.h"
#include "planner/import/shell_vars.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct loom_sh_script {
    loom_sh_command *cmds;
    int n_cmds, cap_cmds;
    loom_sh_vars vars;
};

/* A growing list of words (a command's, or an array's elements). */
typedef struct {
    loom_sh_word *w;
    int n, cap;
} wordlist;

typedef struct {
    const char *source;
    const char *p;
    int line;
    loom_error *err;
    loom_sh_script *s;
    bool oom;
    /* the word being built */
    char *buf;
    size_t len, cap;
    bool active;         /* a word exists (even empty, e.g. "") */
    bool passthrough;    /* it came from "$@" / "$*" */
    bool unresolved;
    char raw[64];
    int start_line;
    wordlist *target;    /* where finished words go */
    bool in_array;       /* inside NAME=( … ): newlines are blanks, ')' ends */
    bool no_split;       /* a scalar assignment's value: expansions stay whole */
} lexer;

/* ---- small helpers ------------------------------------------------------- */

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
static bool is_ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool is_ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

static loom_status fail(lexer *lx, const char *fmt, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, what);
    return loom_error_set(lx->err, LOOM_ERR_PARSE, "%s:%d: %s", lx->source, lx->line, msg);
}

static void putc_w(lexer *lx, char c)
{
    if (lx->len + 2 > lx->cap) {
        size_t cap = lx->cap ? 2 * lx->cap : 64;
        char *nb = realloc(lx->buf, cap);
        if (!nb) {
            lx->oom = true;
            return;
        }
        lx->buf = nb;
        lx->cap = cap;
    }
    if (!lx->active) lx->start_line = lx->line;
    lx->buf[lx->len++] = c;
    lx->buf[lx->len] = '\0';
    lx->active = true;
}

static void mark(lexer *lx)
{
    if (!lx->active) lx->start_line = lx->line;
    lx->active = true;
}

static void mark_unresolved(lexer *lx, const char *raw, size_t n)
{
    mark(lx);
    if (!lx->unresolved) {
        if (n >= sizeof lx->raw) n = sizeof lx->raw - 1;
        memcpy(lx->raw, raw, n);
        lx->raw[n] = '\0';
    }
    lx->unresolved = true;
}

static void push_word(lexer *lx, wordlist *l, loom_sh_word w)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        loom_sh_word *nw = realloc(l->w, (size_t)cap * sizeof *nw);
        if (!nw) {
            free(w.text);
            lx->oom = true;
            return;
        }
        l->w = nw;
        l->cap = cap;
    }
    l->w[l->n++] = w;
}

/* Ends the word being built and appends it to the target list. */
static void finish(lexer *lx)
{
    if (lx->active && !(lx->passthrough && lx->len == 0 && !lx->unresolved)) {
        loom_sh_word w = {dupn(lx->buf ? lx->buf : "", lx->len), lx->start_line, lx->unresolved,
                          ""};
        if (!w.text)
            lx->oom = true;
        else {
            memcpy(w.raw, lx->raw, sizeof w.raw);
            push_word(lx, lx->target, w);
        }
    }
    lx->len = 0;
    if (lx->buf) lx->buf[0] = '\0';
    lx->active = lx->passthrough = lx->unresolved = false;
    lx->raw[0] = '\0';
}

/* Appends an expansion's value: verbatim when quoted, split on blanks
 * when not (bash's word splitting with the default IFS). */
static void put_value(lexer *lx, const char *v, bool quoted)
{
    if (quoted || lx->no_split) {
        mark(lx);
        for (; *v; v++) putc_w(lx, *v);
        return;
    }
    for (; *v; v++) {
        if (is_blank(*v) || *v == '\n') finish(lx);
        else putc_w(lx, *v);
    }
}

static void free_list(wordlist *l)
{
    for (int i = 0; i < l->n; i++) free(l->w[i].text);
    free(l->w);
    l->w = NULL;
    l->n = l->cap = 0;
}

/* ---- variables ------------------------------------------------------------ */

/* Sets NAME to a scalar (elems NULL) or to an array of the words in elems
 * (their text moves into the variable). */
static void set_var(lexer *lx, const char *name, size_t n, const char *value, wordlist *elems)
{
    bool unresolved = lx->unresolved;
    char **words = NULL;
    int n_words = 0;
    if (elems) {
        words = calloc((size_t)elems->n + 1, sizeof *words);
        if (!words) {
            lx->oom = true;
            return;
        }
        for (int i = 0; i < elems->n; i++) {
            unresolved |= elems->w[i].unresolved;
            words[n_words++] = elems->w[i].text;   /* ownership moves */
            elems->w[i].text = NULL;
        }
    }
    if (!loom_sh_vars_set(&lx->s->vars, name, n, value, words, n_words, unresolved)) lx->oom = true;
}

/* The arithmetic evaluator reads variables through this. */
static const char *arith_lookup(const void *ctx, const char *name, size_t n)
{
    const loom_sh_var_entry *v = loom_sh_vars_find(&((const loom_sh_script *)ctx)->vars, name, n);
    return v ? v->value : NULL;
}

/* ---- expansions ----------------------------------------------------------------- */

/* Index just past the ')' that closes the '(' at open (nesting counted). */
static const char *close_paren(const char *open)
{
    int depth = 0;
    for (const char *q = open; *q; q++) {
        if (*q == '(') depth++;
        else if (*q == ')' && --depth == 0) return q + 1;
    }
    return NULL;
}

static void put_var(lexer *lx, const loom_sh_var_entry *v, bool all_elems, bool quoted)
{
    if (v->unresolved) {
        char raw[64];
        snprintf(raw, sizeof raw, "$%s", v->name);
        mark_unresolved(lx, raw, strlen(raw));
    }
    if (v->is_array && all_elems) {
        if (v->n_elems == 0 && quoted) lx->passthrough = true;   /* "${A[@]}" of nothing: no word */
        for (int i = 0; i < v->n_elems; i++) {
            if (i && lx->no_split) putc_w(lx, ' ');
            else if (i) finish(lx);
            put_value(lx, v->elems[i], quoted);
        }
    } else {
        put_value(lx, v->is_array ? (v->n_elems ? v->elems[0] : "") : v->value, quoted);
    }
}

/* Expands the $-expression at lx->p (which points at '$'). */
static loom_status expand(lexer *lx, bool quoted)
{
    const char *d = lx->p;
    if (d[1] == '(' && d[2] == '(') {
        const char *end = close_paren(d + 1);
        if (!end || end[-2] != ')') return fail(lx, "unterminated %s", "$((");
        char *expr = dupn(d + 3, (size_t)(end - 2 - (d + 3)));
        if (!expr) return loom_error_set(lx->err, LOOM_ERR_NOMEM, "out of memory");
        int64_t v = 0;
        const char *problem = loom_sh_arith(expr, arith_lookup, lx->s, &v);
        free(expr);
        if (problem) return fail(lx, "bad arithmetic in $(( )): %s", problem);
        char num[32];
        snprintf(num, sizeof num, "%lld", (long long)v);
        put_value(lx, num, quoted);
        lx->p = end;
        return LOOM_OK;
    }
    if (d[1] == '(') {
        const char *end = close_paren(d + 1);
        if (!end) return fail(lx, "unterminated %s", "$(");
        mark_unresolved(lx, d, (size_t)(end - d));
        lx->p = end;
        return LOOM_OK;
    }
    if (d[1] == '{') {
        const char *end = strchr(d + 2, '}');
        if (!end) return fail(lx, "unterminated %s", "${");
        const char *n = d + 2;
        size_t nlen = 0;
        while (is_ident(n[nlen])) nlen++;
        const char *q = n + nlen;
        bool all = false;
        if (nlen && (strncmp(q, "[@]", 3) == 0 || strncmp(q, "[*]", 3) == 0)) {
            all = true;
            q += 3;
        }
        const loom_sh_var_entry *v = nlen && is_ident_start(n[0]) ? loom_sh_vars_find(&lx->s->vars, n, nlen) : NULL;
        bool set = v && v->value && (v->value[0] || v->is_array);
        lx->p = end + 1;
        if (q == end) {
            if (v) put_var(lx, v, all, quoted);
            else mark_unresolved(lx, d, (size_t)(end + 1 - d));
            return LOOM_OK;
        }
        /* ${NAME:-word} ${NAME-word} ${NAME:=word} ${NAME=word} */
        bool colon = *q == ':';
        if (colon) q++;
        if ((*q == '-' || *q == '=') && nlen && !all) {
            bool use_default = colon ? !set : !v;
            if (!use_default) {
                put_var(lx, v, false, quoted);
                return LOOM_OK;
            }
            const char *w = q + 1;
            size_t wl = (size_t)(end - w);
            if (wl >= 2 && (w[0] == '"' || w[0] == '\'') && w[wl - 1] == w[0]) w++, wl -= 2;
            char *word = dupn(w, wl);
            if (!word) return loom_error_set(lx->err, LOOM_ERR_NOMEM, "out of memory");
            /* a default that is itself a plain $NAME */
            const loom_sh_var_entry *dv = word[0] == '$' ? loom_sh_vars_find(&lx->s->vars, word + 1, strlen(word + 1)) : NULL;
            if (word[0] == '$' && !dv) mark_unresolved(lx, word, strlen(word));
            else put_value(lx, dv ? dv->value : word, quoted);
            if (*q == '=' && !dv) set_var(lx, n, nlen, word, NULL);
            free(word);
            return LOOM_OK;
        }
        mark_unresolved(lx, d, (size_t)(end + 1 - d));
        return LOOM_OK;
    }
    if (d[1] == '@' || d[1] == '*') {
        lx->passthrough = true;   /* the script's extra arguments: none here */
        mark(lx);
        lx->p = d + 2;
        return LOOM_OK;
    }
    if (isdigit((unsigned char)d[1]) || (d[1] && strchr("#?$!-", d[1]))) {
        mark_unresolved(lx, d, 2);
        lx->p = d + 2;
        return LOOM_OK;
    }
    if (is_ident_start(d[1])) {
        size_t nlen = 1;
        while (is_ident(d[1 + nlen])) nlen++;
        const loom_sh_var_entry *v = loom_sh_vars_find(&lx->s->vars, d + 1, nlen);
        if (v) put_var(lx, v, false, quoted);
        else mark_unresolved(lx, d, nlen + 1);
        lx->p = d + 1 + nlen;
        return LOOM_OK;
    }
    putc_w(lx, '$');
    lx->p = d + 1;
    return LOOM_OK;
}

/* ---- words ------------------------------------------------------------------------- */

static bool ends_word(const lexer *lx, char c)
{
    if (c == '\0' || is_blank(c)) return true;
    if (lx->in_array) return c == '\n' || c == ')';
    return c == '\n' || c == ';' || c == '&' || c == '|';
}

/* Lexes one shell word at lx->p into the builder; the caller finishes it. */
static loom_status lex_word(lexer *lx)
{
    loom_status s;
    while (!ends_word(lx, *lx->p)) {
        char c = *lx->p;
        if (c == '\\') {
            if (lx->p[1] == '\n') {
                lx->p += 2;
                lx->line++;
            } else if (lx->p[1] == '\0') {
                lx->p++;
            } else {
                putc_w(lx, lx->p[1]);
                lx->p += 2;
            }
        } else if (c == '\'') {
            mark(lx);
            int line0 = lx->line;
            for (lx->p++; *lx->p && *lx->p != '\''; lx->p++) {
                if (*lx->p == '\n') lx->line++;
                putc_w(lx, *lx->p);
            }
            if (!*lx->p) {
                lx->line = line0;
                return fail(lx, "unterminated %s quote", "single");
            }
            lx->p++;
        } else if (c == '"') {
            mark(lx);
            int line0 = lx->line;
            for (lx->p++; *lx->p && *lx->p != '"';) {
                if (*lx->p == '\\' && lx->p[1] && strchr("$`\"\\\n", lx->p[1])) {
                    if (lx->p[1] == '\n') lx->line++;
                    else putc_w(lx, lx->p[1]);
                    lx->p += 2;
                } else if (*lx->p == '$') {
                    if ((s = expand(lx, true))) return s;
                } else if (*lx->p == '`') {
                    const char *end = strchr(lx->p + 1, '`');
                    if (!end) return fail(lx, "unterminated %s", "`");
                    mark_unresolved(lx, lx->p, (size_t)(end + 1 - lx->p));
                    lx->p = end + 1;
                } else {
                    if (*lx->p == '\n') lx->line++;
                    putc_w(lx, *lx->p++);
                }
            }
            if (!*lx->p) {
                lx->line = line0;
                return fail(lx, "unterminated %s quote", "double");
            }
            lx->p++;
        } else if (c == '$') {
            if ((s = expand(lx, false))) return s;
        } else if (c == '`') {
            const char *end = strchr(lx->p + 1, '`');
            if (!end) return fail(lx, "unterminated %s", "`");
            mark_unresolved(lx, lx->p, (size_t)(end + 1 - lx->p));
            lx->p = end + 1;
        } else {
            putc_w(lx, c);
            lx->p++;
        }
        if (lx->oom) return loom_error_set(lx->err, LOOM_ERR_NOMEM, "out of memory");
    }
    return LOOM_OK;
}

/* Skips blanks (newlines too inside an array) and comments. */
static void skip_blanks(lexer *lx)
{
    for (;;) {
        char c = *lx->p;
        if (is_blank(c)) lx->p++;
        else if (c == '\\' && lx->p[1] == '\n') lx->p += 2, lx->line++;
        else if (c == '\n' && lx->in_array) lx->p++, lx->line++;
        else if (c == '#') {
            while (*lx->p && *lx->p != '\n') lx->p++;
        } else return;
    }
}

/* NAME= at lx->p? Sets *nlen to the name's length. */
static bool at_assignment(const lexer *lx, size_t *nlen)
{
    const char *q = lx->p;
    if (!is_ident_start(*q)) return false;
    while (is_ident(*q)) q++;
    if (*q != '=') return false;
    *nlen = (size_t)(q - lx->p);
    return true;
}

/* NAME=value or NAME=( words ) at lx->p. */
static loom_status assignment(lexer *lx, size_t nlen)
{
    const char *name = lx->p;
    lx->p += nlen + 1;
    wordlist vals = {0};
    wordlist *saved = lx->target;
    loom_status s = LOOM_OK;
    lx->target = &vals;   /* array elements; a scalar value stays in the builder */
    if (*lx->p == '(') {
        int line0 = lx->line;
        lx->p++;
        lx->in_array = true;
        for (;;) {
            skip_blanks(lx);
            if (*lx->p == ')') {
                lx->p++;
                break;
            }
            if (!*lx->p) {
                lx->line = line0;
                s = fail(lx, "unterminated array %s", "( ... )");
                break;
            }
            if ((s = lex_word(lx))) break;
            finish(lx);
        }
        lx->in_array = false;
        if (s == LOOM_OK) set_var(lx, name, nlen, NULL, &vals);
    } else {
        /* the value is one word: bash does not split assignments */
        lx->no_split = true;
        s = lex_word(lx);
        lx->no_split = false;
        if (s == LOOM_OK) set_var(lx, name, nlen, lx->buf ? lx->buf : "", NULL);
        if (lx->buf) lx->buf[0] = '\0';
        lx->len = 0;
        lx->active = lx->passthrough = lx->unresolved = false;
    }
    free_list(&vals);
    lx->target = saved;
    if (s == LOOM_OK && lx->oom) s = loom_error_set(lx->err, LOOM_ERR_NOMEM, "out of memory");
    return s;
}

static loom_status end_command(lexer *lx, wordlist *cmd)
{
    finish(lx);
    if (cmd->n > 0) {
        loom_sh_script *s = lx->s;
        if (s->n_cmds == s->cap_cmds) {
            int cap = s->cap_cmds ? 2 * s->cap_cmds : 8;
            loom_sh_command *nc = realloc(s->cmds, (size_t)cap * sizeof *nc);
            if (!nc) return loom_error_set(lx->err, LOOM_ERR_NOMEM, "out of memory");
            s->cmds = nc;
            s->cap_cmds = cap;
        }
        s->cmds[s->n_cmds++] = (loom_sh_command){cmd->n, cmd->w};
        *cmd = (wordlist){0};
    }
    return LOOM_OK;
}

loom_status loom_sh_parse(const char *source, const char *text, loom_sh_script **out,
                          loom_error *err)
{
    *out = NULL;
    loom_sh_script *s = calloc(1, sizeof *s);
    if (!s) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    wordlist cmd = {0};
    lexer lx = {.source = source, .p = text, .line = 1, .err = err, .s = s, .target = &cmd};
    loom_status st = LOOM_OK;
    bool assign_pos = true;   /* NAME=value here is an assignment */
    bool after_kw = false;    /* after export / declare …: options are skipped */
    while (st == LOOM_OK) {
        skip_blanks(&lx);
        char c = *lx.p;
        if (c == '\0') break;
        if (c == '\n' || c == ';' || c == '&' || c == '|') {
            if (c == '\n') lx.line++;
            lx.p += (c != '\n' && c != ';' && lx.p[1] == c) ? 2 : 1;
            st = end_command(&lx, &cmd);
            assign_pos = true;
            after_kw = false;
            continue;
        }
        size_t nlen;
        if (assign_pos && at_assignment(&lx, &nlen)) {
            st = assignment(&lx, nlen);
            continue;
        }
        st = lex_word(&lx);
        if (st) break;
        bool keyword = cmd.n == 0 && lx.len > 0 && !lx.unresolved &&
                       (!strcmp(lx.buf, "export") || !strcmp(lx.buf, "declare") ||
                        !strcmp(lx.buf, "local") || !strcmp(lx.buf, "readonly") ||
                        !strcmp(lx.buf, "typeset"));
        bool option = after_kw && cmd.n == 0 && lx.len > 0 && lx.buf[0] == '-';
        if (keyword) after_kw = true;
        if (keyword || option) {
            /* `export A=1 B=2`, `declare -a X=(…)`: the words after are
             * assignments, and the keyword is not a command */
            lx.len = 0;
            lx.active = lx.passthrough = lx.unresolved = false;
            continue;
        }
        finish(&lx);
        assign_pos = false;
        if (lx.oom) st = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    }
    if (st == LOOM_OK) st = end_command(&lx, &cmd);
    free(lx.buf);
    free_list(&cmd);
    if (st) {
        loom_sh_destroy(s);
        return st;
    }
    *out = s;
    return LOOM_OK;
}

void loom_sh_destroy(loom_sh_script *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_cmds; i++) {
        for (int k = 0; k < s->cmds[i].n_words; k++) free(s->cmds[i].words[k].text);
        free(s->cmds[i].words);
    }
    free(s->cmds);
    loom_sh_vars_free(&s->vars);
    free(s);
}

int loom_sh_command_count(const loom_sh_script *s) { return s ? s->n_cmds : 0; }

const loom_sh_command *loom_sh_command_at(const loom_sh_script *s, int i)
{
    return s && i >= 0 && i < s->n_cmds ? &s->cmds[i] : NULL;
}

const char *loom_sh_var(const loom_sh_script *s, const char *name)
{
    const loom_sh_var_entry *v = loom_sh_vars_find(&s->vars, name, strlen(name));
    return v ? v->value : NULL;
}
