/*
 * roofline_check.h — how far loom's analytical roofline is from measured
 * kernel times, per op kind: for every op of a model on its Megatron TP
 * shards (enumerate.h) whose key the profile db measured exactly,
 *     error = (roofline fwd + bwd) / (measured fwd + bwd) - 1
 * (> 0: the roofline is slower than the GPU). The roofline is the cost
 * model's (costs/compute.h) with the cluster's default calibration and no db.
 *
 * Plain C over graph/ and costs/ (no CUDA): `loom-profile --roofline-check DB`
 * runs it on any machine once a db exists.
 */
#ifndef LOOM_GPU_ROOFLINE_CHECK_H
#define LOOM_GPU_ROOFLINE_CHECK_H

#include <stdint.h>
#include "costs/cluster.h"
#include "costs/profile_db.h"
#include "graph/graph.h"

typedef struct {
    char op[LOOM_PROFILE_OP_MAX];
    int32_t n;                   /* distinct keys compared */
    double median_err;           /* signed */
    double median_abs_err;
    double max_abs_err;
    double measured_s, roofline_s;   /* sums over the keys, fwd + bwd */
} loom_roofline_row;

/* Fills rows[0..*n_rows) (at most LOOM_OP_KIND_COUNT, in op-kind order,
 * kinds without a compared key left out). */
loom_status loom_roofline_check(const loom_graph *g, const loom_cluster *c,
                                const loom_profile_db *db, int64_t max_tp,
                                loom_roofline_row *rows, int *n_rows, loom_error *err);

#endif
