/*
 * cupti_timer.h — kernel timing with the CUPTI Activity API.
 *
 * loom_cupti_start enables CONCURRENT_KERNEL records (start/end of every
 * kernel, without serialising kernels as the KERNEL kind would), RUNTIME and
 * DRIVER API records (external correlation records are emitted only for API
 * records) and EXTERNAL_CORRELATION records. Around each op's launches the
 * profiler pushes an external id (CUSTOM0 kind); after a flush the kernel
 * log (kernel_log.h) holds every kernel joined to its op.
 *
 * CUPTI is process-global, so this is a singleton; the buffer callbacks may
 * run on CUPTI's worker thread and are serialised by a mutex.
 */
#ifndef LOOM_GPU_CUPTI_TIMER_H
#define LOOM_GPU_CUPTI_TIMER_H

#include <stdint.h>
#include "base/error.h"
#include "gpu/kernel_log.h"

loom_status loom_cupti_start(loom_error *err);
/* Disables the activity kinds and flushes; safe to call when not started. */
void loom_cupti_stop(void);

/* Kernels launched by this thread until the matching pop belong to `ext`. */
loom_status loom_cupti_push(uint64_t ext, loom_error *err);
loom_status loom_cupti_pop(loom_error *err);

/* Flushes every buffer (forced), resolves the log and returns it (owned by
 * the timer; valid until the next clear). Synchronise the device first. */
loom_status loom_cupti_collect(const loom_kernel_log **log, loom_error *err);
/* Forgets collected records. */
void loom_cupti_clear(void);

#endif
