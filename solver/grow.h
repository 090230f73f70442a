/*
 * grow.h — the doubling array growth the solver's builders share. Internal
 * to solver/: not installed API.
 */
#ifndef LOOM_SOLVER_GROW_H
#define LOOM_SOLVER_GROW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Makes *arr (of *cap elements of elem bytes) hold at least `need`,
 * doubling from 16; false when out of memory (the array is unchanged). */
static inline bool loom_solver_grow(void **arr, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap) return true;
    int32_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*arr, (size_t)nc * elem);
    if (!q) return false;
    *arr = q;
    *cap = nc;
    return true;
}

#endif
