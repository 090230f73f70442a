/*
 * grow.h — doubling array growth, the one helper every builder of a growing
 * array (graph ops and tensors, ILP nodes and edges, strategy lists) uses.
 * Amortised O(1) appends; capacities are int32_t like the ids they index.
 */
#ifndef LOOM_BASE_GROW_H
#define LOOM_BASE_GROW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Makes *arr (of *cap elements of elem bytes) hold at least `need`,
 * doubling from 16; false when out of memory (the array is unchanged). */
static inline bool loom_grow(void **arr, int32_t *cap, int32_t need, size_t elem)
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
