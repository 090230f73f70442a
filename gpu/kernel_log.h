/*
 * kernel_log.h — what CUPTI reported, grouped by op: kernel records joined
 * to the external correlation id loom pushed around each op's launches.
 *
 * CUPTI's activity buffers deliver two kinds of records (in any order, from
 * any buffer): a kernel record (correlation id of the launching API call,
 * name, start and end in ns) and an external-correlation record (that API
 * call's correlation id -> the id loom pushed with
 * cuptiActivityPushExternalCorrelationId). Resolving joins them, so an op
 * made of several kernels (permute + GEMM, norm backward + its reduction)
 * sums correctly, and kernels launched outside any op are ignored.
 *
 * Plain C, no CUDA: the CUPTI glue (cupti_timer.c) feeds it, and tests feed
 * it synthetic records. Not thread-safe; the feeder serialises.
 */
#ifndef LOOM_GPU_KERNEL_LOG_H
#define LOOM_GPU_KERNEL_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"

typedef struct loom_kernel_log loom_kernel_log;

typedef struct {
    int64_t busy_ns;   /* Σ (end - start) over the kernels: GPU time of the op */
    int64_t span_ns;   /* last end - first start: includes gaps between kernels */
    int32_t kernels;   /* how many kernels ran */
} loom_kernel_sum;

loom_status loom_kernel_log_create(loom_kernel_log **out, loom_error *err);
void loom_kernel_log_destroy(loom_kernel_log *log);
/* Forgets every record (keeps the memory). */
void loom_kernel_log_clear(loom_kernel_log *log);

/* Add records; false when out of memory (the record is counted as dropped). */
bool loom_kernel_log_add_external(loom_kernel_log *log, uint32_t correlation_id,
                                  uint64_t external_id);
bool loom_kernel_log_add_kernel(loom_kernel_log *log, uint32_t correlation_id, const char *name,
                                uint64_t start_ns, uint64_t end_ns);
/* Records CUPTI itself dropped (buffer full) or that could not be stored. */
void loom_kernel_log_add_dropped(loom_kernel_log *log, size_t n);
size_t loom_kernel_log_dropped(const loom_kernel_log *log);

/* Joins kernels to external ids; call once all records are in (after
 * cuptiActivityFlushAll), before the queries below. */
void loom_kernel_log_resolve(loom_kernel_log *log);

/* The kernels that ran under external id `ext` (zeros if none). */
loom_kernel_sum loom_kernel_log_sum(const loom_kernel_log *log, uint64_t ext);

/* Distinct kernel names under external ids [lo, hi), in order of first
 * start; at most `max` names of up to name_size-1 characters. */
int loom_kernel_log_names(const loom_kernel_log *log, uint64_t lo, uint64_t hi, char *names,
                          int name_size, int max);

/* q-quantile (0..1) of v[0..n) by linear interpolation between order
 * statistics (Hyndman & Fan type 7, numpy's default); v is not modified.
 * n must be >= 1. */
double loom_quantile(const double *v, int n, double q);

#endif
