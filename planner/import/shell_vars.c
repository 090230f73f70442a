/*
 * shell_vars.c — the variables of a launch script (see shell_vars.h).
 *
 * Found through a hash index (FNV-1a, open addressing, kept under half
 * full): a 4 MiB script of assignments that each read the one before took
 * minutes with a linear search.
 */
#include "planner/import/shell_vars.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static uint32_t var_hash(const char *name, size_t n)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)name[i]) * 16777619u;
    return h;
}

loom_sh_var_entry *loom_sh_vars_find(const loom_sh_vars *s, const char *name, size_t n)
{
    if (!s->slot) return NULL;
    for (uint32_t i = var_hash(name, n) & s->mask; s->slot[i]; i = (i + 1) & s->mask) {
        loom_sh_var_entry *v = &s->vars[s->slot[i] - 1];
        if (strlen(v->name) == n && strncmp(v->name, name, n) == 0) return v;
    }
    return NULL;
}

/* Indexes vars[id]; grows (and rebuilds) the index to stay under half full. */
static bool index_var(loom_sh_vars *s, int id)
{
    if (!s->slot || 2u * (uint32_t)s->n_vars > s->mask) {
        uint32_t cap = s->slot ? 2 * (s->mask + 1) : 64;
        int32_t *slot = calloc(cap, sizeof *slot);
        if (!slot) return false;
        free(s->slot);
        s->slot = slot;
        s->mask = cap - 1;
        for (int k = 0; k < s->n_vars; k++) {
            if (k == id) continue;
            uint32_t i = var_hash(s->vars[k].name, strlen(s->vars[k].name)) & s->mask;
            while (s->slot[i]) i = (i + 1) & s->mask;
            s->slot[i] = k + 1;
        }
    }
    uint32_t i = var_hash(s->vars[id].name, strlen(s->vars[id].name)) & s->mask;
    while (s->slot[i]) i = (i + 1) & s->mask;
    s->slot[i] = id + 1;
    return true;
}

static void clear_var(loom_sh_var_entry *v)
{
    free(v->value);
    for (int i = 0; i < v->n_elems; i++) free(v->elems[i]);
    free(v->elems);
    v->value = NULL;
    v->elems = NULL;
    v->n_elems = 0;
}


bool loom_sh_vars_set(loom_sh_vars *s, const char *name, size_t n, const char *value,
                      char **elems, int n_elems, bool unresolved)
{
    loom_sh_var_entry *v = loom_sh_vars_find(s, name, n);
    if (!v) {
        if (s->n_vars == s->cap_vars) {
            int cap = s->cap_vars ? 2 * s->cap_vars : 16;
            loom_sh_var_entry *nv = realloc(s->vars, (size_t)cap * sizeof *nv);
            if (!nv) goto fail;
            s->vars = nv;
            s->cap_vars = cap;
        }
        v = &s->vars[s->n_vars++];
        memset(v, 0, sizeof *v);
        v->name = dupn(name, n);
        if (!v->name || !index_var(s, s->n_vars - 1)) {
            if (!v->name) s->n_vars--;   /* nothing to index or free by name */
            goto fail;
        }
    } else {
        clear_var(v);
    }
    v->is_array = elems != NULL;
    v->unresolved = unresolved;
    if (!elems) {
        v->value = dupn(value, strlen(value));
        return v->value != NULL;
    }
    v->elems = elems;
    v->n_elems = n_elems;
    size_t total = 1;
    for (int i = 0; i < n_elems; i++) total += strlen(elems[i]) + 1;
    v->value = calloc(total, 1);
    if (!v->value) return false;
    char *end = v->value;   /* appended in place: strcat was quadratic */
    for (int i = 0; i < n_elems; i++) {
        if (i) *end++ = ' ';
        size_t l = strlen(elems[i]);
        memcpy(end, elems[i], l);
        end += l;
    }
    return true;
fail:
    for (int i = 0; i < n_elems; i++) free(elems[i]);
    free(elems);
    return false;
}

void loom_sh_vars_free(loom_sh_vars *s)
{
    for (int i = 0; i < s->n_vars; i++) {
        clear_var(&s->vars[i]);
        free(s->vars[i].name);
    }
    free(s->vars);
    free(s->slot);
    memset(s, 0, sizeof *s);
}
