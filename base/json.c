/*
 * json.c — checked JSON parsing and field access (see json.h).
 *
 * cJSON stays lenient in three ways that matter for hand-edited files; we
 * close them in one pass over the parsed tree (check_tree): duplicate keys in
 * an object (cJSON keeps both, GetObjectItem returns the first — a silent
 * surprise), numbers that overflowed to ±inf, and nesting deeper than a sane
 * config needs. The pass is O(n log n) in the members of an object, so that
 * no input makes it hang.
 */
#include "base/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"

loom_status loom_json_fail(const loom_jctx *c, const char *path, const char *fmt, ...)
{
    char body[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    loom_status s = LOOM_ERR_INVALID;
    return loom_error_set(c->err, s, "%s: %s: %s", c->file, path, body);
}

const char *loom_json_type_name(const cJSON *v)
{
    if (!v) return "nothing";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an invalid value";
}

/* Appends ".key" or "[i]" to a path buffer. */
static void path_child(char *dst, size_t n, const char *path, const cJSON *item, int index)
{
    if (item->string) snprintf(dst, n, "%s.%s", path, item->string);
    else snprintf(dst, n, "%s[%d]", path, index);
}

/* A member of a large object, for the sorted duplicate-key check. */
typedef struct {
    const cJSON *item;
    int pos;
} member_ref;

static int member_cmp(const void *a, const void *b)
{
    const member_ref *x = a, *y = b;
    int c = strcmp(x->item->string, y->item->string);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* Position of the first member (in document order) whose key an earlier
 * member already has, or -1. Small objects compare pairwise; large ones
 * sort (name, position) so that a file with 10^5 keys in one object takes
 * milliseconds, not minutes: the answer is the smallest second position of
 * any name. *status is LOOM_ERR_NOMEM when the sort buffer cannot be had. */
static int first_duplicate(const cJSON *obj, loom_status *status)
{
    int n = 0, dup = -1;
    for (const cJSON *ch = obj->child; ch; ch = ch->next) n++;
    if (n <= 64) {
        int i = 0;
        for (const cJSON *ch = obj->child; ch && dup < 0; ch = ch->next, i++)
            for (const cJSON *o = obj->child; o != ch; o = o->next)
                if (strcmp(o->string, ch->string) == 0) {
                    dup = i;
                    break;
                }
        return dup;
    }
    member_ref *m = malloc((size_t)n * sizeof *m);
    if (!m) {
        *status = LOOM_ERR_NOMEM;
        return -1;
    }
    int i = 0;
    for (const cJSON *ch = obj->child; ch; ch = ch->next, i++) m[i] = (member_ref){ch, i};
    qsort(m, (size_t)n, sizeof *m, member_cmp);
    for (i = 1; i < n; i++)
        if (strcmp(m[i - 1].item->string, m[i].item->string) == 0 &&
            (i < 2 || strcmp(m[i - 2].item->string, m[i].item->string) != 0) &&
            (dup < 0 || m[i].pos < dup))
            dup = m[i].pos;
    free(m);
    return dup;
}

static loom_status check_tree(const loom_jctx *c, const cJSON *v, const char *path, int depth)
{
    if (depth > LOOM_JSON_MAX_DEPTH)
        return loom_json_fail(c, path, "nesting deeper than %d levels", LOOM_JSON_MAX_DEPTH);
    if (cJSON_IsNumber(v) && !isfinite(v->valuedouble))
        return loom_json_fail(c, path, "number out of range (not finite)");
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) return LOOM_OK;
    int dup = -1;
    if (cJSON_IsObject(v)) {
        loom_status st = LOOM_OK;
        dup = first_duplicate(v, &st);
        if (st) return loom_error_set(c->err, st, "%s: %s: out of memory", c->file, path);
    }
    int i = 0;
    for (const cJSON *ch = v->child; ch; ch = ch->next, i++) {
        char sub[512];
        path_child(sub, sizeof sub, path, ch, i);
        if (i == dup) return loom_json_fail(c, sub, "duplicate key \"%s\"", ch->string);
        loom_status s = check_tree(c, ch, sub, depth + 1);
        if (s) return s;
    }
    return LOOM_OK;
}

/* Line and column (from 1) of byte `at` of text. */
static void line_col(const char *text, const char *at, int *line, int *col)
{
    *line = 1, *col = 1;
    for (const char *p = text; p < at; p++) {
        if (*p == '\n') ++*line, *col = 1;
        else ++*col;
    }
}

/* The pass before cJSON: nesting depth and the number of values, outside
 * strings, counted as opening brackets + commas + 1 (every value but the
 * first of each container; within a factor of two of the true count, and
 * exact for the flat arrays that cost the most). Malformed text is left to
 * cJSON to report. */
#define PRESCAN_MAX_DEPTH 512

static loom_status prescan(const char *file, const char *text, size_t len,
                           const loom_json_limits *lim, loom_error *err)
{
    size_t values = 1;
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = false;
            continue;
        }
        if (ch == '"') {
            in_str = true;
        } else if (ch == '[' || ch == '{') {
            values++;
            /* far past the limit (cJSON itself gives up at 1000 and would
             * call it malformed): refused here; 65 to 512 levels reach
             * check_tree, which names the JSON path */
            if (++depth > PRESCAN_MAX_DEPTH) {
                int line, col;
                line_col(text, text + i, &line, &col);
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "%s:%d:%d: nesting deeper than %d levels", file, line, col,
                                      LOOM_JSON_MAX_DEPTH);
            }
        } else if (ch == ']' || ch == '}') {
            depth--;
        } else if (ch == ',') {
            values++;
        }
        if (values > lim->max_values)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "%s: $: more than %zu JSON values, more than this kind of file "
                                  "holds (docs/robustness.md, \"Limits\")",
                                  file, lim->max_values);
    }
    return LOOM_OK;
}

static bool json_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

loom_status loom_json_parse_limited(const char *file, const char *text, size_t len,
                                    const loom_json_limits *lim, cJSON **out, loom_error *err)
{
    *out = NULL;
    loom_json_limits def = LOOM_JSON_LIMITS_DEFAULT;
    if (!lim) lim = &def;
    if (len > lim->max_bytes)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "%s: $: %zu bytes, larger than this kind of file can be (%zu bytes)",
                              file, len, lim->max_bytes);
    loom_status ps = prescan(file, text, len, lim, err);
    if (ps) return ps;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        /* cJSON points at (or just after) the offending byte. */
        const char *at = end ? end : text;
        if (at < text || at > text + len) at = text + len;
        int line, col;
        line_col(text, at, &line, &col);
        char near[24] = "";
        if (at < text + len) {
            size_t k = 0;
            for (const char *p = at; p < text + len && k < 16 && *p != '\n'; p++)
                near[k++] = (*p >= 32 && *p < 127) ? *p : '?';
            near[k] = '\0';
        }
        if (len == 0 || at >= text + len)
            return loom_error_set(err, LOOM_ERR_PARSE,
                                  "%s:%d:%d: malformed JSON: unexpected end of input", file,
                                  line, col);
        return loom_error_set(err, LOOM_ERR_PARSE, "%s:%d:%d: malformed JSON near '%s'", file,
                              line, col, near);
    }
    /* one value per file: a second object appended, or garbage, is an error */
    if (end && end >= text && end <= text + len) {
        const char *p = end;
        while (p < text + len && json_space(*p)) p++;
        if (p < text + len) {
            int line, col;
            line_col(text, p, &line, &col);
            char near[24];
            size_t k = 0;
            for (const char *q = p; q < text + len && k < 16 && *q != '\n'; q++)
                near[k++] = (*q >= 32 && *q < 127) ? *q : '?';
            near[k] = '\0';
            cJSON_Delete(root);
            return loom_error_set(err, LOOM_ERR_PARSE,
                                  "%s:%d:%d: unexpected data after the JSON value ('%s'): a "
                                  "file holds one value",
                                  file, line, col, near);
        }
    }
    loom_jctx c = {file, err};
    loom_status s = check_tree(&c, root, "$", 0);
    if (s) {
        cJSON_Delete(root);
        return s;
    }
    *out = root;
    return LOOM_OK;
}

loom_status loom_json_parse(const char *file, const char *text, size_t len, cJSON **out,
                            loom_error *err)
{
    return loom_json_parse_limited(file, text, len, NULL, out, err);
}

loom_status loom_json_parse_file_limited(const char *path, const loom_json_limits *lim,
                                         cJSON **out, loom_error *err)
{
    loom_json_limits def = LOOM_JSON_LIMITS_DEFAULT;
    if (!lim) lim = &def;
    char *text;
    size_t len;
    *out = NULL;
    loom_status s = loom_read_file(path, lim->max_bytes, &text, &len, err);
    if (s) return s;
    s = loom_json_parse_limited(path, text, len, lim, out, err);
    free(text);
    return s;
}

loom_status loom_json_parse_file(const char *path, cJSON **out, loom_error *err)
{
    return loom_json_parse_file_limited(path, NULL, out, err);
}

/* Skips a JSON string starting at text[i] == '"'; returns the index after
 * its closing quote, or len. */
static size_t skip_string(const char *text, size_t len, size_t i)
{
    for (i++; i < len; i++) {
        if (text[i] == '\\') i++;
        else if (text[i] == '"') return i + 1;
    }
    return len;
}

bool loom_json_peek_top_string(const char *text, size_t len, const char *key, char *out,
                               size_t n)
{
    size_t i = 0, klen = strlen(key);
    while (i < len && json_space(text[i])) i++;
    if (i + 3 <= len && (unsigned char)text[i] == 0xEF) i += 3;   /* UTF-8 BOM */
    while (i < len && json_space(text[i])) i++;
    if (i >= len || text[i] != '{') return false;
    i++;
    for (;;) {
        while (i < len && json_space(text[i])) i++;
        if (i >= len || text[i] != '"') return false;
        size_t k0 = i + 1, k1 = skip_string(text, len, i);
        bool match = k1 - 1 - k0 == klen && memcmp(text + k0, key, klen) == 0;
        i = k1;
        while (i < len && json_space(text[i])) i++;
        if (i >= len || text[i] != ':') return false;
        i++;
        while (i < len && json_space(text[i])) i++;
        if (i >= len) return false;
        if (match) {
            if (text[i] != '"') return false;
            size_t v0 = i + 1, v1 = skip_string(text, len, i);
            if (v1 > len || v1 - 1 < v0) return false;
            size_t vl = v1 - 1 - v0;
            if (vl >= n) return false;
            memcpy(out, text + v0, vl);
            out[vl] = '\0';
            return true;
        }
        /* skip the value to the next ',' or '}' at this level */
        int depth = 0;
        while (i < len) {
            char ch = text[i];
            if (ch == '"') {
                i = skip_string(text, len, i);
                continue;
            }
            if (ch == '[' || ch == '{') depth++;
            else if (ch == ']' || ch == '}') {
                if (depth == 0) break;
                depth--;
            } else if (ch == ',' && depth == 0) break;
            i++;
        }
        if (i >= len || text[i] != ',') return false;
        i++;
    }
}

/* Finds member `key`; reports a missing required one. *v is NULL when absent
 * or JSON null. */
static loom_status member(const loom_jctx *c, const cJSON *obj, const char *path,
                          const char *key, bool required, const cJSON **v)
{
    *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (*v && cJSON_IsNull(*v)) *v = NULL;
    if (!*v && required) return loom_json_fail(c, path, "missing required field \"%s\"", key);
    return LOOM_OK;
}

loom_status loom_json_get_int(const loom_jctx *c, const cJSON *obj, const char *path,
                              const char *key, bool required, int64_t lo, int64_t hi,
                              int64_t *out)
{
    const cJSON *v;
    loom_status s = member(c, obj, path, key, required, &v);
    if (s || !v) return s;
    char sub[512];
    snprintf(sub, sizeof sub, "%s.%s", path, key);
    if (!cJSON_IsNumber(v))
        return loom_json_fail(c, sub, "expected an integer, found %s", loom_json_type_name(v));
    double d = v->valuedouble;
    /* 2^63 is exactly representable; anything at or beyond it overflows int64. */
    if (d != floor(d)) return loom_json_fail(c, sub, "expected an integer, found %g", d);
    if (d >= 9223372036854775808.0 || d < -9223372036854775808.0 || d < (double)lo ||
        d > (double)hi)
        return loom_json_fail(c, sub, "expected an integer in [%lld, %lld], found %.17g",
                              (long long)lo, (long long)hi, d);
    *out = (int64_t)d;
    return LOOM_OK;
}

loom_status loom_json_get_num(const loom_jctx *c, const cJSON *obj, const char *path,
                              const char *key, bool required, double lo, double hi,
                              double *out)
{
    const cJSON *v;
    loom_status s = member(c, obj, path, key, required, &v);
    if (s || !v) return s;
    char sub[512];
    snprintf(sub, sizeof sub, "%s.%s", path, key);
    if (!cJSON_IsNumber(v))
        return loom_json_fail(c, sub, "expected a number, found %s", loom_json_type_name(v));
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return loom_json_fail(c, sub, "expected a number in [%g, %g], found %g", lo, hi,
                              v->valuedouble);
    *out = v->valuedouble;
    return LOOM_OK;
}

loom_status loom_json_get_bool(const loom_jctx *c, const cJSON *obj, const char *path,
                               const char *key, bool required, bool *out)
{
    const cJSON *v;
    loom_status s = member(c, obj, path, key, required, &v);
    if (s || !v) return s;
    if (!cJSON_IsBool(v))
        return loom_json_fail(c, path, "field \"%s\": expected true or false, found %s", key,
                              loom_json_type_name(v));
    *out = cJSON_IsTrue(v);
    return LOOM_OK;
}

loom_status loom_json_get_str(const loom_jctx *c, const cJSON *obj, const char *path,
                              const char *key, bool required, const char **out)
{
    const cJSON *v;
    loom_status s = member(c, obj, path, key, required, &v);
    if (s || !v) return s;
    if (!cJSON_IsString(v))
        return loom_json_fail(c, path, "field \"%s\": expected a string, found %s", key,
                              loom_json_type_name(v));
    *out = v->valuestring;
    return LOOM_OK;
}

loom_status loom_json_get_object(const loom_jctx *c, const cJSON *obj, const char *path,
                                 const char *key, bool required, const cJSON **out)
{
    const cJSON *v;
    loom_status s = member(c, obj, path, key, required, &v);
    if (s) return s;
    if (v && !cJSON_IsObject(v))
        return loom_json_fail(c, path, "field \"%s\": expected an object, found %s", key,
                              loom_json_type_name(v));
    *out = v;
    return LOOM_OK;
}

loom_status loom_json_get_array(const loom_jctx *c, const cJSON *obj, const char *path,
                                const char *key, bool required, const cJSON **out)
{
    const cJSON *v;
    loom_status s = member(c, obj, path, key, required, &v);
    if (s) return s;
    if (v && !cJSON_IsArray(v))
        return loom_json_fail(c, path, "field \"%s\": expected an array, found %s", key,
                              loom_json_type_name(v));
    *out = v;
    return LOOM_OK;
}

loom_status loom_json_check_keys(const loom_jctx *c, const cJSON *obj, const char *path,
                                 const char *const *allowed)
{
    for (const cJSON *ch = obj->child; ch; ch = ch->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, ch->string) == 0) ok = 1;
        if (ok) continue;
        char list[512] = "";
        size_t n = 0;
        for (const char *const *a = allowed; *a && n < sizeof list - 1; a++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", a == allowed ? "" : ", ",
                                  *a);
        return loom_json_fail(c, path, "unknown field \"%s\" (expected one of: %s)",
                              ch->string, list);
    }
    return LOOM_OK;
}

cJSON *loom_json_add_exact_number(cJSON *obj, const char *key, double v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (!isfinite(v) || strtod(buf, NULL) == v) return cJSON_AddNumberToObject(obj, key, v);
    snprintf(buf, sizeof buf, "%.17g", v);
    return cJSON_AddRawToObject(obj, key, buf);
}

char *loom_json_print(const cJSON *v)
{
    char *s = cJSON_Print(v);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *r = realloc(s, n + 2);
    if (!r) {
        free(s);
        return NULL;
    }
    r[n] = '\n';
    r[n + 1] = '\0';
    return r;
}
