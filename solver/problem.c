/*
 * problem.c — the problem's defaults and the objective name table
 * (problem.h), generated from LOOM_OBJECTIVE_LIST so names and values never
 * drift apart.
 */
#include "solver/problem.h"

#include <string.h>

static const char *const objective_names[] = {
#define LOOM_X(n, s) s,
    LOOM_OBJECTIVE_LIST(LOOM_X)
#undef LOOM_X
};
_Static_assert(sizeof objective_names / sizeof objective_names[0] == LOOM_OBJ_COUNT,
               "objective name table out of step");

const char *loom_problem_objective_name(loom_objective o)
{
    return (unsigned)o < LOOM_OBJ_COUNT ? objective_names[o] : "?";
}

bool loom_problem_objective_parse(const char *s, loom_objective *out)
{
    for (int i = 0; i < LOOM_OBJ_COUNT; i++)
        if (strcmp(s, objective_names[i]) == 0) {
            *out = (loom_objective)i;
            return true;
        }
    return false;
}

void loom_problem_init(loom_problem *p)
{
    memset(p, 0, sizeof *p);
    p->seq = 2048;
    p->dtype = LOOM_DTYPE_BF16;
    p->flash_attention = true;
    p->objective = LOOM_OBJ_TIME;
}
