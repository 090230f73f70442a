/*
 * shell_arith.c — bash arithmetic $(( … )) for launch scripts (see
 * shell_arith.h).
 *
 * Recursive descent over int64: expr = term (+|- term)*, term = factor
 * (*|/|% factor)*, factor = ( expr ) | -factor | +factor | variable |
 * digits. Overflow, division by zero and INT64_MIN / -1 are errors, never
 * undefined behaviour; a variable's value is itself evaluated, as bash does.
 */
#include "planner/import/shell_arith.h"

#include <ctype.h>
#include <stdbool.h>

typedef struct {
    const char *p;
    loom_sh_lookup lookup;
    const void *ctx;
    const char *err;   /* first problem, or NULL */
    int depth;         /* parentheses, signs and variables being evaluated */
} arith;

/* Recursion bound (bash stops at 1024 too): deeper nesting, a sign chain or
 * a variable that names itself (X=X; $((X))) is an error, not a stack
 * overflow. */
#define ARITH_MAX_DEPTH 1024

static int64_t a_expr(arith *a);

static void a_blank(arith *a)
{
    while (*a->p == ' ' || *a->p == '\t' || *a->p == '\r' || *a->p == '\n') a->p++;
}

static int64_t a_factor(arith *a)
{
    a_blank(a);
    if ((*a->p == '(' || *a->p == '-' || *a->p == '+') && a->depth >= ARITH_MAX_DEPTH)
        return a->err = "nested too deeply", 0;
    if (*a->p == '(') {
        a->p++;
        a->depth++;
        int64_t v = a_expr(a);
        a->depth--;
        a_blank(a);
        if (*a->p != ')') a->err = a->err ? a->err : "missing ')'";
        else a->p++;
        return v;
    }
    if (*a->p == '-') {
        a->p++;
        a->depth++;
        int64_t v = a_factor(a);
        a->depth--;
        return v == INT64_MIN ? (a->err = "overflow", 0) : -v;
    }
    if (*a->p == '+') {
        a->p++;
        a->depth++;
        int64_t v = a_factor(a);
        a->depth--;
        return v;
    }
    if (*a->p == '$') a->p++;
    bool braced = *a->p == '{';
    if (braced) a->p++;
    if (isalpha((unsigned char)*a->p) || *a->p == '_') {
        const char *n = a->p;
        while (isalnum((unsigned char)*a->p) || *a->p == '_') a->p++;
        size_t len = (size_t)(a->p - n);
        if (braced) {
            if (*a->p != '}') return a->err = "bad ${...}", 0;
            a->p++;
        }
        const char *value = a->lookup(a->ctx, n, len);
        if (!value || !value[0]) return 0;
        arith sub = {value, a->lookup, a->ctx, NULL, a->depth + 1};
        if (sub.depth > ARITH_MAX_DEPTH) return a->err = "a variable that refers to itself", 0;
        int64_t r = a_expr(&sub);
        a_blank(&sub);
        if (sub.err || *sub.p) a->err = sub.err ? sub.err : "a variable that is not a number";
        return r;
    }
    if (isdigit((unsigned char)*a->p)) {
        int64_t v = 0;
        while (isdigit((unsigned char)*a->p)) {
            int d = *a->p++ - '0';
            if (v > (INT64_MAX - d) / 10) return a->err = "overflow", 0;
            v = v * 10 + d;
        }
        return v;
    }
    a->err = "expected a number or a variable";
    return 0;
}

static int64_t a_term(arith *a)
{
    int64_t v = a_factor(a);
    for (;;) {
        a_blank(a);
        char op = *a->p;
        if (op != '*' && op != '/' && op != '%') return v;
        a->p++;
        int64_t r = a_factor(a);
        if (a->err) return 0;
        if (op == '*') {
            if (v != 0 && (r > INT64_MAX / (v < 0 ? -v : v) || r < -(INT64_MAX / (v < 0 ? -v : v))))
                return a->err = "overflow", 0;
            v *= r;
        } else {
            if (r == 0) return a->err = "division by zero", 0;
            if (r == -1 && v == INT64_MIN) return a->err = "overflow", 0;   /* traps on x86 */
            v = op == '/' ? v / r : v % r;
        }
    }
}

static int64_t a_expr(arith *a)
{
    int64_t v = a_term(a);
    for (;;) {
        a_blank(a);
        char op = *a->p;
        if (op != '+' && op != '-') return v;
        a->p++;
        int64_t r = a_term(a);
        if (a->err) return 0;
        if ((op == '+' && ((r > 0 && v > INT64_MAX - r) || (r < 0 && v < INT64_MIN - r))) ||
            (op == '-' && ((r < 0 && v > INT64_MAX + r) || (r > 0 && v < INT64_MIN + r))))
            return a->err = "overflow", 0;
        v = op == '+' ? v + r : v - r;
    }
}

const char *loom_sh_arith(const char *expr, loom_sh_lookup lookup, const void *ctx, int64_t *out)
{
    arith a = {expr, lookup, ctx, NULL, 0};
    int64_t v = a_expr(&a);
    a_blank(&a);
    if (!a.err && *a.p) a.err = "unexpected text";
    *out = a.err ? 0 : v;
    return a.err;
}
