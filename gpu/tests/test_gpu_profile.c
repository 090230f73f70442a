/*
 * test_gpu_profile.c — the measurement protocol end to end on a GPU: CUPTI
 * records joined per op, multi-kernel ops summed, entries complete, the
 * layer check, and a db round trip. Exits 77 (skipped) without a CUDA
 * device. No timing thresholds (house rule): only facts that hold on any
 * GPU — times are positive, a permute + GEMM op reports both kernels, a
 * layer's kernel-busy time is at least its largest op's, the peak bytes are
 * the buffers' sizes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpu/cupti_timer.h"
#include "gpu/device.h"
#include "gpu/profile.h"
#include "gpu/enumerate.h"
#include "graph/model.h"
#include "gpu_test.h"

int main(void)
{
    loom_error err;
    loom_gpu_info info;
    loom_gpu *g = test_open_gpu(&info);
    if (loom_cupti_start(&err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    loom_profile_opts o;
    loom_profile_opts_init(&o);
    o.warmup = 2;
    o.repeats = 10;

    /* A plain GEMM: buffers x, y, z, dz, dx, dy, no scratch. */
    loom_profile_key k1 = test_key("einsum", "bsh,hf->bsf", LOOM_DTYPE_BF16, "b s h f",
                                   (int64_t[]){1, 512, 1024, 768});
    loom_profile_entry e;
    CHECK_INT_EQ(loom_profile_measure(g, &k1, &o, &e, &err), LOOM_OK);
    CHECK(e.fwd_ns > 0 && e.bwd_ns > 0);
    CHECK(e.events_fwd_ns > 0 && e.events_bwd_ns > 0);
    CHECK_INT_EQ(e.repeats, 10);
    CHECK(e.n_kernels >= 1);
    CHECK(e.spread >= 0);
    int64_t x = 512 * 1024, y = 1024 * 768, z = 512 * 768;
    CHECK_INT_EQ(e.peak_bytes, 2 * 2 * (x + y + z));
    CHECK(loom_profile_key_equal(&e.key, &k1));
    printf("einsum 512x1024x768: fwd %lld ns (events %lld), bwd %lld ns (events %lld), %s\n",
           (long long)e.fwd_ns, (long long)e.events_fwd_ns, (long long)e.bwd_ns,
           (long long)e.events_bwd_ns, e.kernels[0]);

    /* Attention scores the unfused way: two permutes + a batched GEMM; both
     * kernel kinds must be in the entry (the external id caught them all). */
    loom_profile_key k2 = test_key("einsum", "bsnd,btnd->bnst", LOOM_DTYPE_BF16, "b s n d t",
                                   (int64_t[]){2, 256, 8, 64, 256});
    CHECK_INT_EQ(loom_profile_measure(g, &k2, &o, &e, &err), LOOM_OK);
    bool saw_permute = false, saw_other = false;
    for (int i = 0; i < e.n_kernels; i++) {
        if (strstr(e.kernels[i], "permute")) saw_permute = true;
        else saw_other = true;
    }
    CHECK(saw_permute && saw_other);

    /* Layer check on tiny-gpt's first block. */
    loom_graph *gr = NULL;
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    if (loom_model_load("examples/models/tiny-gpt.graph.json", &mo, &gr, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int32_t first, count, n = 0;
    loom_graph_layer_ops(gr, 1, &first, &count);
    loom_profile_key *keys = calloc((size_t)count, sizeof *keys);
    int32_t *ids = calloc((size_t)count, sizeof *ids);
    loom_gpu_op **ops = calloc((size_t)count, sizeof *ops);
    loom_profile_entry *per = calloc((size_t)count, sizeof *per);
    CHECK_INT_EQ(loom_profile_layer_keys(gr, 1, 1, keys, ids, &n, &err), LOOM_OK);
    CHECK(n > 0);
    bool made = true;
    for (int32_t i = 0; i < n; i++)
        if (loom_gpu_op_create(g, &keys[i], 5, &ops[i], &err)) {
            fprintf(stderr, "%s\n", err.msg);
            made = false;
        }
    CHECK(made);
    loom_layer_check lc;
    if (made) {
        CHECK_INT_EQ(loom_profile_layer(g, ops, keys, n, &o, per, &lc, &err), LOOM_OK);
        double largest = 0;
        for (int32_t i = 0; i < n; i++)
            if ((double)per[i].fwd_ns > largest) largest = (double)per[i].fwd_ns;
        CHECK(lc.sum_fwd_ns > 0 && lc.sum_bwd_ns > 0);
        CHECK(lc.busy_fwd_ns >= largest * 0.5);   /* the layer ran every op's kernels */
        CHECK(lc.span_fwd_ns >= lc.busy_fwd_ns * 0.99);   /* span covers the busy time */
        printf("layer: sum %.1f + %.1f us, span %.1f + %.1f us, error %+.1f%%\n",
               lc.sum_fwd_ns / 1e3, lc.sum_bwd_ns / 1e3, lc.span_fwd_ns / 1e3, lc.span_bwd_ns / 1e3,
               100 * lc.error);
    }
    for (int32_t i = 0; i < n; i++) loom_gpu_op_destroy(ops[i]);

    /* Entries go into a db that reads back identically. */
    loom_profile_db *db, *back;
    char cuda[16];
    loom_gpu_version_string(info.runtime_version, cuda, sizeof cuda);
    loom_profile_db_create(info.name, cuda, info.driver, "test", &db, &err);
    CHECK_INT_EQ(loom_profile_db_put(db, &e, &err), LOOM_OK);
    char path[] = "/tmp/loom_gpu_profile_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    CHECK_INT_EQ(loom_profile_db_save(db, path, &err), LOOM_OK);
    CHECK_INT_EQ(loom_profile_db_load(path, &back, &err), LOOM_OK);
    const loom_profile_entry *f = loom_profile_db_find(back, &e.key);
    CHECK(f && f->fwd_ns == e.fwd_ns && f->bwd_ns == e.bwd_ns && f->n_kernels == e.n_kernels);
    remove(path);
    loom_profile_db_destroy(back);
    loom_profile_db_destroy(db);
    free(keys), free(ids), free(ops), free(per);
    loom_graph_destroy(gr);
    loom_cupti_stop();
    loom_gpu_destroy(g);
    return check_done();
}
