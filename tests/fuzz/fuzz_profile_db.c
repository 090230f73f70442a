/*
 * fuzz_profile_db.c — libFuzzer target for the profile db reader and the
 * profile requests reader (costs/profile_db.c: "loom-profile/1" and
 * "loom-profile-requests/1"). Each input is offered to both readers.
 *
 * Any input: no crash, no undefined behaviour, failures naming the file.
 * An accepted db must
 *   - answer a lookup of each entry's own key with that entry's times
 *     ("measured"), and any lookup with finite, non-negative times
 *     (interpolation takes logs of times and sizes: zeros must not leak
 *     out as NaN or infinity);
 *   - survive its writer: saved, loaded and saved again, the same bytes.
 * Accepted requests must survive a write and read with the same keys.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "costs/profile_db.h"
#include "fuzz_common.h"

static void check_lookups(const loom_profile_db *db)
{
    for (int32_t i = 0; i < loom_profile_db_count(db); i++) {
        const loom_profile_entry *e = loom_profile_db_entry(db, i);
        const loom_profile_key *k = &e->key;
        double fwd = -1, bwd = -1;
        loom_time_source src;
        if (!loom_profile_db_lookup(db, k->op, k->sig, k->dtype, k->shape, k->n_dims, &fwd, &bwd,
                                    &src) ||
            src != LOOM_SRC_MEASURED || fwd != (double)e->fwd_ns * 1e-9 ||
            bwd != (double)e->bwd_ns * 1e-9)
            fuzz_die("an entry's own key does not find its times", k->op);
        /* A shape between this entry and its neighbours: every dim one up. */
        loom_dim q[LOOM_PROFILE_MAX_DIMS];
        for (int d = 0; d < k->n_dims; d++) {
            q[d] = k->shape[d];
            if (q[d].size < INT64_MAX) q[d].size++;
        }
        if (loom_profile_db_lookup(db, k->op, k->sig, k->dtype, q, k->n_dims, &fwd, &bwd, &src) &&
            !(fwd >= 0 && bwd >= 0 && isfinite(fwd) && isfinite(bwd)))
            fuzz_die("a lookup gave a time that is not finite and >= 0", k->op);
    }
}

static void fuzz_db(const char *path)
{
    loom_error err = {0};
    loom_profile_db *db = NULL, *db2 = NULL;
    loom_status s = loom_profile_db_load(path, &db, &err);
    fuzz_check_failure(s, &err, path);
    if (s != LOOM_OK) return;
    check_lookups(db);
    const char *out = fuzz_out_file();
    if (loom_profile_db_save(db, out, &err) != LOOM_OK) fuzz_die("save failed", err.msg);
    char *first = fuzz_slurp(out);
    if (loom_profile_db_load(out, &db2, &err) != LOOM_OK) fuzz_die("saved db does not load", err.msg);
    if (loom_profile_db_save(db2, out, &err) != LOOM_OK) fuzz_die("save failed", err.msg);
    char *second = fuzz_slurp(out);
    fuzz_check_same(first, second, "profile db save(load(save(db))) != save(db)");
    free(first);
    free(second);
    loom_profile_db_destroy(db2);
    loom_profile_db_destroy(db);
}

static void fuzz_requests(const char *path)
{
    loom_error err = {0};
    loom_profile_key *keys = NULL, *keys2 = NULL;
    int32_t n = 0, n2 = 0;
    loom_status s = loom_profile_requests_read(path, &keys, &n, &err);
    fuzz_check_failure(s, &err, path);
    if (s != LOOM_OK) return;
    const char *out = fuzz_out_file();
    if (loom_profile_requests_write(out, "fuzz", keys, n, &err) != LOOM_OK)
        fuzz_die("requests write failed", err.msg);
    if (loom_profile_requests_read(out, &keys2, &n2, &err) != LOOM_OK)
        fuzz_die("written requests do not read back", err.msg);
    /* The writer drops duplicates, so the count can only shrink. */
    if (n2 > n) fuzz_die("requests grew in a round trip", "");
    for (int32_t i = 0; i < n2; i++) {
        bool found = false;
        for (int32_t j = 0; j < n && !found; j++) found = loom_profile_key_equal(&keys2[i], &keys[j]);
        if (!found) fuzz_die("a written request was not in the input", keys2[i].op);
    }
    free(keys);
    free(keys2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    fuzz_db(path);
    fuzz_requests(path);
    return 0;
}
