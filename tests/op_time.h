/*
 * op_time.h — the cost model's time of one op of a hand-built graph, for
 * the cost tests (test_compute.c, test_eager.c): a failure is reported and
 * counted (check.h), and the time comes back as {-1, -1} so that the test's
 * own checks fail too.
 */
#ifndef LOOM_TEST_OP_TIME_H
#define LOOM_TEST_OP_TIME_H

#include <stdio.h>
#include "check.h"
#include "costs/compute.h"

static inline loom_op_time test_op_time(const loom_cost_model *m, const loom_graph *g, int32_t id,
                                        const loom_dim_split *sp, int n)
{
    loom_op_time t = {-1, -1, LOOM_SRC_MEASURED};
    loom_error err;
    loom_status s = loom_cost_op_time(m, g, id, sp, n, &t, &err);
    if (s) fprintf(stderr, "unexpected: %s\n", err.msg);
    CHECK_INT_EQ(s, LOOM_OK);
    return t;
}

#endif
