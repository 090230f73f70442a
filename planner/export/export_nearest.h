/*
 * export_nearest.h — `loom export --nearest`: when a runtime cannot run a
 * plan as planned, the plan the runtime can run that loom predicts to be
 * best, and what the restriction costs (export_nearest.c).
 *
 * The plan's inputs (model, cluster, batch, sequence, dtype, mode,
 * objective) are planned again with the search restricted to the
 * Megatron-style space every runtime shares (`loom plan --space megatron`:
 * uniform stages, data parallelism on one mesh axis and Megatron tensor
 * parallelism on the other). What the target still cannot run of that plan
 * is then changed to its closest setting (e.g. ZeRO-1 to FSDP for
 * torchtitan) and the configuration evaluated again.
 */
#ifndef LOOM_EXPORT_NEAREST_H
#define LOOM_EXPORT_NEAREST_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "graph/model.h"
#include "planner/export/export.h"
#include "planner/plan/plan.h"

typedef struct {
    const loom_model_source *model;   /* the plan's model, opened (required; not owned) */
    const char *cluster;        /* the plan's cluster: a preset name or a file (required) */
    const char *calib_path;     /* NULL: the device's default calibration */
    const char *profile_path;   /* NULL: roofline only */
    double time_limit_s;        /* search time limit (default 60) */
} loom_export_nearest_opts;

void loom_export_nearest_opts_init(loom_export_nearest_opts *o);

typedef struct {
    double step_time_s;            /* predicted for the exported configuration */
    int64_t memory_per_gpu_bytes;
    bool fits;
    char how[160];                 /* one line: how the configuration was found */
    loom_export_list changes;      /* what differs from the plan as given */
} loom_export_nearest_result;

/* Step 2 alone: changes what target t cannot run of c to the closest
 * setting it can (the table in export_nearest.c), naming each change in
 * `changes`; returns whether anything changed. c stays to be normalized. */
bool loom_export_adjust(loom_runtime_config *c, loom_export_target t, loom_export_list *changes);

/* Fills c with the nearest configuration target t can run (no obstacles)
 * and out with its prediction. LOOM_ERR_INFEASIBLE when the restricted
 * search finds nothing that fits; LOOM_ERR_UNSUPPORTED when even the
 * nearest plan keeps an obstacle for t (named in the message). */
loom_status loom_export_nearest(const loom_plan *p, loom_export_target t,
                                const loom_export_nearest_opts *o, loom_runtime_config *c,
                                loom_export_nearest_result *out, loom_error *err);

#endif
