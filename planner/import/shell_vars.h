/*
 * shell_vars.h — the variables a launch script assigns, as the shell lexer
 * (shell_words.c) expands them: name -> scalar, or array of words whose
 * value is the words joined by spaces. Internal to planner/import/.
 */
#ifndef LOOM_IMPORT_SHELL_VARS_H
#define LOOM_IMPORT_SHELL_VARS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *name;
    char *value;       /* scalar value, or the elements joined by spaces */
    char **elems;      /* arrays: n_elems words */
    int n_elems;
    bool is_array;
    bool unresolved;   /* its value came from something unknowable ($1, $(…)) */
} loom_sh_var_entry;

/* A zeroed value is an empty table. */
typedef struct {
    loom_sh_var_entry *vars;
    int n_vars, cap_vars;
    int32_t *slot;     /* name -> var: open addressing, var index + 1, 0 = empty */
    uint32_t mask;     /* slots - 1 (a power of two above 2 * n_vars) */
} loom_sh_vars;

/* The variable name[0 .. n), or NULL. */
loom_sh_var_entry *loom_sh_vars_find(const loom_sh_vars *s, const char *name, size_t n);

/* Sets name[0 .. n) to the scalar `value` (elems NULL) or to the array of
 * n_elems words in elems, whose ownership (the array and its strings) moves
 * into the table. False when out of memory (elems are then freed). */
bool loom_sh_vars_set(loom_sh_vars *s, const char *name, size_t n, const char *value,
                      char **elems, int n_elems, bool unresolved);

/* Frees every variable; the table is empty again. */
void loom_sh_vars_free(loom_sh_vars *s);

#endif
