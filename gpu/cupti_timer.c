/*
 * cupti_timer.c — the CUPTI Activity API glue (cupti_timer.h).
 *
 * Buffers: CUPTI asks for a buffer whenever it needs one (8 MiB, 8-byte
 * aligned) and hands it back full, or when flushed; every record is parsed
 * into the kernel log under the mutex and the buffer is freed. Kernel records
 * are read as CUpti_ActivityKernel10 (the layout this toolkit's CUPTI emits
 * for CONCURRENT_KERNEL); external-correlation records carry
 * (correlationId -> externalId). Records dropped by CUPTI are counted, and a
 * measurement with drops is reported as an error by the profiler, since its
 * sums would be short. CUPTI result codes are translated here.
 */
#include "gpu/cupti_timer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cupti.h>

#include "gpu/demangle.h"

#define BUFFER_BYTES ((size_t)8 << 20)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static loom_kernel_log *log_g;
static int started;

static loom_status cupti_check(CUptiResult r, const char *what, loom_error *err)
{
    if (r == CUPTI_SUCCESS) return LOOM_OK;
    const char *msg = NULL;
    if (cuptiGetResultString(r, &msg) != CUPTI_SUCCESS || !msg) msg = "unknown CUPTI error";
    return loom_error_set(err, LOOM_ERR_DEVICE, "CUPTI %s: %s", what, msg);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;   /* as many as fit */
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&mu);
    while (log_g && valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            char name[512];
            loom_demangle(k->name, name, sizeof name);
            loom_kernel_log_add_kernel(log_g, k->correlationId, name, k->start, k->end);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
            const CUpti_ActivityExternalCorrelation *e = (const CUpti_ActivityExternalCorrelation *)rec;
            if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
                loom_kernel_log_add_external(log_g, e->correlationId, e->externalId);
        }
    }
    size_t dropped = 0;
    if (log_g && cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped)
        loom_kernel_log_add_dropped(log_g, dropped);
    pthread_mutex_unlock(&mu);
    free(buffer);
}

static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

loom_status loom_cupti_start(loom_error *err)
{
    if (started) return LOOM_OK;
    loom_status s;
    pthread_mutex_lock(&mu);
    if (!log_g) s = loom_kernel_log_create(&log_g, err);
    else s = LOOM_OK;
    pthread_mutex_unlock(&mu);
    if (s) return s;
    if ((s = cupti_check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                         "cuptiActivityRegisterCallbacks", err)))
        return s;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if ((s = cupti_check(cuptiActivityEnable(kinds[i]), "cuptiActivityEnable", err))) {
            for (size_t j = 0; j < i; j++) cuptiActivityDisable(kinds[j]);
            return s;
        }
    started = 1;
    return LOOM_OK;
}

void loom_cupti_stop(void)
{
    if (!started) return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) cuptiActivityDisable(kinds[i]);
    started = 0;
    pthread_mutex_lock(&mu);
    loom_kernel_log_destroy(log_g);
    log_g = NULL;
    pthread_mutex_unlock(&mu);
}

loom_status loom_cupti_push(uint64_t ext, loom_error *err)
{
    return cupti_check(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, ext),
                       "cuptiActivityPushExternalCorrelationId", err);
}

loom_status loom_cupti_pop(loom_error *err)
{
    uint64_t last = 0;
    return cupti_check(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
                       "cuptiActivityPopExternalCorrelationId", err);
}

loom_status loom_cupti_collect(const loom_kernel_log **out, loom_error *err)
{
    *out = NULL;
    if (!started) return loom_error_set(err, LOOM_ERR_DEVICE, "CUPTI timing was not started");
    loom_status s = cupti_check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                                "cuptiActivityFlushAll", err);
    if (s) return s;
    pthread_mutex_lock(&mu);
    loom_kernel_log_resolve(log_g);
    size_t dropped = loom_kernel_log_dropped(log_g);
    pthread_mutex_unlock(&mu);
    if (dropped)
        return loom_error_set(err, LOOM_ERR_DEVICE,
                              "CUPTI dropped %zu activity records (buffers full); the kernel sums "
                              "would be short", dropped);
    *out = log_g;
    return LOOM_OK;
}

void loom_cupti_clear(void)
{
    pthread_mutex_lock(&mu);
    if (log_g) loom_kernel_log_clear(log_g);
    pthread_mutex_unlock(&mu);
}
