/*
 * gpu_test.h — helpers shared by the gpu/ tests: a profile key from
 * space-separated dim names and their sizes, and (when gpu/device.h is
 * included first) opening GPU 0, exiting 77 — ctest's "skipped" — when the
 * machine has none.
 */
#ifndef LOOM_GPU_TEST_H
#define LOOM_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/profile_db.h"

/* test_key("einsum", "bsh,hf->bsf", LOOM_DTYPE_BF16, "b s h f", (int64_t[]){1, 2, 3, 4}) */
static inline loom_profile_key test_key(const char *op, const char *sig, loom_dtype dt,
                                        const char *names, const int64_t *sizes)
{
    loom_profile_key k;
    memset(&k, 0, sizeof k);
    snprintf(k.op, sizeof k.op, "%s", op);
    snprintf(k.sig, sizeof k.sig, "%s", sig);
    k.dtype = dt;
    for (const char *p = names; *p && k.n_dims < LOOM_PROFILE_MAX_DIMS;) {
        while (*p == ' ') p++;
        size_t len = strcspn(p, " ");
        if (!len) break;
        snprintf(k.shape[k.n_dims].name, LOOM_DIM_NAME_MAX, "%.*s", (int)len, p);
        k.shape[k.n_dims].size = sizes[k.n_dims];
        k.n_dims++;
        p += len;
    }
    return k;
}

#ifdef LOOM_GPU_DEVICE_H
/* GPU 0, or exit(77) with the runtime's reason when there is none. */
static inline loom_gpu *test_open_gpu(loom_gpu_info *info)
{
    loom_error err;
    loom_gpu *g = NULL;
    if (loom_gpu_probe(0, info, &err)) {
        printf("skipped: %s\n", err.msg);
        exit(77);
    }
    if (loom_gpu_create(0, &g, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    printf("device: %s (sm_%d%d)\n", info->name, info->cc_major, info->cc_minor);
    return g;
}
#endif

#endif
