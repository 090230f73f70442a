/*
 * shell_arith.h — the integer arithmetic of bash's $(( … )), as launch
 * scripts use it to compute batch sizes and GPU counts: + - * / % with the
 * usual precedence, unary signs, parentheses, variables by name or $name
 * (unset or empty = 0, as in bash).
 */
#ifndef LOOM_IMPORT_SHELL_ARITH_H
#define LOOM_IMPORT_SHELL_ARITH_H

#include <stddef.h>
#include <stdint.h>

/* The value of the variable name[0 .. n), or NULL when unset. */
typedef const char *(*loom_sh_lookup)(const void *ctx, const char *name, size_t n);

/* Evaluates expr into *out. Returns NULL, or the first problem as a short
 * phrase ("division by zero", "overflow", "nested too deeply", …). */
const char *loom_sh_arith(const char *expr, loom_sh_lookup lookup, const void *ctx, int64_t *out);

#endif
