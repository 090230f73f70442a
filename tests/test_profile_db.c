/*
 * test_profile_db.c — the profile db (costs/profile_db.c): JSON round trip,
 * byte-identical saves, exact lookup, log-space interpolation against
 * hand-computed power laws, no extrapolation, bad input naming file and JSON
 * path, atomic writes, the requests file, and op -> key on a small graph.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "costs/profile_db.h"
#include "base/fileio.h"

static char tmpdir[64];

static const char *tmp_path(const char *name)
{
    static char buf[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static char *slurp(const char *path)
{
    char *d = NULL;
    size_t n;
    loom_error err;
    if (loom_read_file(path, 0, &d, &n, &err) != LOOM_OK) return NULL;
    return d;
}

/* An entry of `op`/`sig` bf16 with dims (name, size) pairs. */
static loom_profile_entry mk(const char *op, const char *sig, int n, const char *const *names,
                             const int64_t *sizes, int64_t fwd, int64_t bwd)
{
    loom_profile_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.key.op, sizeof e.key.op, "%s", op);
    snprintf(e.key.sig, sizeof e.key.sig, "%s", sig);
    e.key.dtype = LOOM_DTYPE_BF16;
    e.key.n_dims = n;
    for (int i = 0; i < n; i++) {
        snprintf(e.key.shape[i].name, LOOM_DIM_NAME_MAX, "%s", names[i]);
        e.key.shape[i].size = sizes[i];
    }
    e.fwd_ns = fwd;
    e.bwd_ns = bwd;
    return e;
}

static void test_roundtrip_and_exact(void)
{
    loom_error err;
    loom_profile_db *db;
    CHECK_INT_EQ(loom_profile_db_create("NVIDIA H100 80GB HBM3", "13.0", "580.1", "default clocks",
                                        &db, &err), LOOM_OK);
    static const char *const n_bshf[] = {"b", "s", "h", "f"};
    int64_t s1[] = {1, 4096, 8192, 3584};
    loom_profile_entry e = mk("einsum", "bsh,hf->bsf", 4, n_bshf, s1, 123456, 234567);
    e.spread = 0.02;
    e.repeats = 20;
    e.events_fwd_ns = 125000;
    e.events_bwd_ns = 236000;
    e.peak_bytes = 1 << 20;
    e.n_kernels = 2;
    strcpy(e.kernels[0], "sm90_xmma_gemm_bf16bf16_bf16f32");
    strcpy(e.kernels[1], "loom_permute");
    CHECK_INT_EQ(loom_profile_db_put(db, &e, &err), LOOM_OK);
    static const char *const n_nd[] = {"n", "d"};
    int64_t s2[] = {4096, 8192};
    loom_profile_entry e2 = mk("norm", "rmsnorm", 2, n_nd, s2, 5000, 9000);
    CHECK_INT_EQ(loom_profile_db_put(db, &e2, &err), LOOM_OK);
    /* Replacing: same key, new times, count unchanged. */
    e2.fwd_ns = 5100;
    CHECK_INT_EQ(loom_profile_db_put(db, &e2, &err), LOOM_OK);
    CHECK_INT_EQ(loom_profile_db_count(db), 2);

    const char *p1 = tmp_path("db1.json"), *p2 = tmp_path("db2.json");
    CHECK_INT_EQ(loom_profile_db_save(db, p1, &err), LOOM_OK);
    loom_profile_db *back = NULL;
    CHECK_INT_EQ(loom_profile_db_load(p1, &back, &err), LOOM_OK);
    if (!back) {
        fprintf(stderr, "load failed: %s\n", err.msg);
        loom_profile_db_destroy(db);
        return;
    }
    CHECK_INT_EQ(loom_profile_db_count(back), 2);
    CHECK(strcmp(loom_profile_db_device(back), "NVIDIA H100 80GB HBM3") == 0);
    CHECK(strcmp(loom_profile_db_cuda(back), "13.0") == 0);
    CHECK(strcmp(loom_profile_db_driver(back), "580.1") == 0);
    CHECK(strcmp(loom_profile_db_clock_note(back), "default clocks") == 0);
    const loom_profile_entry *f = loom_profile_db_find(back, &e.key);
    CHECK(f != NULL);
    if (f) {
        CHECK_INT_EQ(f->fwd_ns, 123456);
        CHECK_INT_EQ(f->bwd_ns, 234567);
        CHECK_NEAR_REL(f->spread, 0.02, 1e-12);
        CHECK_INT_EQ(f->repeats, 20);
        CHECK_INT_EQ(f->events_fwd_ns, 125000);
        CHECK_INT_EQ(f->peak_bytes, 1 << 20);
        CHECK_INT_EQ(f->n_kernels, 2);
        CHECK(strcmp(f->kernels[1], "loom_permute") == 0);
    }
    /* Saved again: byte-identical. */
    CHECK_INT_EQ(loom_profile_db_save(back, p2, &err), LOOM_OK);
    char *t1 = slurp(p1), *t2 = slurp(p2);
    CHECK(t1 && t2 && strcmp(t1, t2) == 0);
    CHECK_STR_CONTAINS(t1, "\"format\":\t\"loom-profile/1\"");
    /* Sorted by key: "einsum" before "norm". */
    CHECK(t1 && strstr(t1, "\"einsum\"") < strstr(t1, "\"norm\""));
    free(t1);
    free(t2);

    /* Exact lookup, dims given in another order: seconds out. */
    loom_dim q[] = {{"f", 3584}, {"h", 8192}, {"b", 1}, {"s", 4096}};
    double fw = 0, bw = 0;
    loom_time_source src = LOOM_SRC_ROOFLINE;
    CHECK(loom_profile_db_lookup(back, "einsum", "bsh,hf->bsf", LOOM_DTYPE_BF16, q, 4, &fw, &bw,
                                 &src));
    CHECK_NEAR_REL(fw, 123456e-9, 1e-12);
    CHECK_NEAR_REL(bw, 234567e-9, 1e-12);
    CHECK_INT_EQ(src, LOOM_SRC_MEASURED);
    /* Other dtype, other sig, extra dim, NULL db: no answer, outputs untouched. */
    fw = -1;
    CHECK(!loom_profile_db_lookup(back, "einsum", "bsh,hf->bsf", LOOM_DTYPE_FP16, q, 4, &fw, &bw, &src));
    CHECK(!loom_profile_db_lookup(back, "einsum", "bsh,fh->bsf", LOOM_DTYPE_BF16, q, 4, &fw, &bw, &src));
    CHECK(!loom_profile_db_lookup(back, "einsum", "bsh,hf->bsf", LOOM_DTYPE_BF16, q, 3, &fw, &bw, &src));
    CHECK(!loom_profile_db_lookup(NULL, "einsum", "bsh,hf->bsf", LOOM_DTYPE_BF16, q, 4, &fw, &bw, &src));
    CHECK(fw == -1);
    CHECK(strcmp(loom_time_source_name(LOOM_SRC_INTERPOLATED), "interpolated") == 0);
    loom_profile_db_destroy(back);
    loom_profile_db_destroy(db);
    loom_profile_db_destroy(NULL);
}

/* t = 100 ns · b · s^1.5: a separable power law, which multilinear
 * interpolation of ln t over ln sizes reproduces exactly. */
static int64_t law(int64_t b, int64_t s) { return (int64_t)llround(100.0 * (double)b * pow((double)s, 1.5)); }

static void test_interpolation(void)
{
    loom_error err;
    loom_profile_db *db;
    loom_profile_db_create("gpu", NULL, NULL, NULL, &db, &err);
    static const char *const n_bs[] = {"b", "s"};
    int64_t bs[] = {1, 4}, ss[] = {1024, 4096};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            int64_t sz[] = {bs[i], ss[j]};
            loom_profile_entry e = mk("attention", "causal", 2, n_bs, sz, law(bs[i], ss[j]), 0);
            CHECK_INT_EQ(loom_profile_db_put(db, &e, &err), LOOM_OK);
        }
    /* Noise in another group must not matter. */
    int64_t other[] = {2, 2048};
    loom_profile_entry noise = mk("attention", "full", 2, n_bs, other, 1, 1);
    loom_profile_db_put(db, &noise, &err);

    /* 1-D: b measured (1), s = 2048 between 1024 and 4096. By hand:
     * w = ln(2048/1024)/ln(4096/1024) = 1/2, t = sqrt(t(1024)·t(4096))
     * = 100·sqrt(1024^1.5 · 4096^1.5) = 100 · 2048^1.5 = 9,268,190.9 ns
     * (the corners are rounded to integer ns, hence the 1e-6 tolerance). */
    loom_dim q1[] = {{"b", 1}, {"s", 2048}};
    double fw, bw;
    loom_time_source src;
    CHECK(loom_profile_db_lookup(db, "attention", "causal", LOOM_DTYPE_BF16, q1, 2, &fw, &bw, &src));
    CHECK_NEAR_REL(fw, 100.0 * pow(2048.0, 1.5) * 1e-9, 1e-6);
    CHECK_NEAR_REL(fw, 9268190.9e-9, 1e-6);
    CHECK_INT_EQ(src, LOOM_SRC_INTERPOLATED);
    /* Backward is 0 at every corner: linear, stays 0. */
    CHECK(bw == 0);

    /* 2-D: b = 2, s = 3000: w_b = ln2/ln4 = 0.5, w_s = ln(3000/1024)/ln4;
     * the box reproduces the power law: 100 · 2 · 3000^1.5 ns. */
    loom_dim q2[] = {{"s", 3000}, {"b", 2}};
    CHECK(loom_profile_db_lookup(db, "attention", "causal", LOOM_DTYPE_BF16, q2, 2, &fw, &bw, &src));
    CHECK_NEAR_REL(fw, 200.0 * pow(3000.0, 1.5) * 1e-9, 1e-6);
    CHECK_INT_EQ(src, LOOM_SRC_INTERPOLATED);

    /* No extrapolation: beyond the largest or below the smallest size. */
    loom_dim q3[] = {{"b", 1}, {"s", 8192}};
    CHECK(!loom_profile_db_lookup(db, "attention", "causal", LOOM_DTYPE_BF16, q3, 2, &fw, &bw, &src));
    loom_dim q4[] = {{"b", 8}, {"s", 2048}};
    CHECK(!loom_profile_db_lookup(db, "attention", "causal", LOOM_DTYPE_BF16, q4, 2, &fw, &bw, &src));
    loom_dim q5[] = {{"b", 1}, {"s", 512}};
    CHECK(!loom_profile_db_lookup(db, "attention", "causal", LOOM_DTYPE_BF16, q5, 2, &fw, &bw, &src));

    /* A missing corner: remove (4, 4096) by rebuilding without it. */
    loom_profile_db *db2;
    loom_profile_db_create("gpu", NULL, NULL, NULL, &db2, &err);
    for (int32_t i = 0; i < loom_profile_db_count(db); i++) {
        const loom_profile_entry *e = loom_profile_db_entry(db, i);
        if (loom_profile_key_dim(&e->key, "b") == 4 && loom_profile_key_dim(&e->key, "s") == 4096)
            continue;
        loom_profile_db_put(db2, e, &err);
    }
    CHECK(!loom_profile_db_lookup(db2, "attention", "causal", LOOM_DTYPE_BF16, q2, 2, &fw, &bw, &src));
    /* ...but the 1-D query along b = 1 still works. */
    CHECK(loom_profile_db_lookup(db2, "attention", "causal", LOOM_DTYPE_BF16, q1, 2, &fw, &bw, &src));

    /* Irregular grid: the exact-dim pass picks the brackets among entries
     * that share the measured size. Entries (b=1,s=1024), (b=1,s=4096) and
     * (b=3, s=2048): query (1, 2048) must bracket s within b = 1 only. */
    loom_profile_db *db3;
    loom_profile_db_create("gpu", NULL, NULL, NULL, &db3, &err);
    int64_t a1[] = {1, 1024}, a2[] = {1, 4096}, a3[] = {3, 2048};
    loom_profile_entry x1 = mk("einsum", "bs,s->b", 2, n_bs, a1, 1000, 2000);
    loom_profile_entry x2 = mk("einsum", "bs,s->b", 2, n_bs, a2, 4000, 8000);
    loom_profile_entry x3 = mk("einsum", "bs,s->b", 2, n_bs, a3, 77, 77);
    loom_profile_db_put(db3, &x1, &err);
    loom_profile_db_put(db3, &x2, &err);
    loom_profile_db_put(db3, &x3, &err);
    CHECK(loom_profile_db_lookup(db3, "einsum", "bs,s->b", LOOM_DTYPE_BF16, q1, 2, &fw, &bw, &src));
    /* t ∝ s between the two: 2000 ns fwd, 4000 ns bwd. */
    CHECK_NEAR_REL(fw, 2000e-9, 1e-9);
    CHECK_NEAR_REL(bw, 4000e-9, 1e-9);
    loom_profile_db_destroy(db3);
    loom_profile_db_destroy(db2);
    loom_profile_db_destroy(db);
}

static void expect_load_error(const char *name, const char *text, const char *needle)
{
    const char *path = tmp_path(name);
    write_text(path, text);
    loom_error err;
    loom_profile_db *db = (loom_profile_db *)&err;   /* must be reset to NULL */
    loom_status s = loom_profile_db_load(path, &db, &err);
    CHECK(s != LOOM_OK);
    CHECK(db == NULL);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, needle);
}

#define HDR "{\"format\": \"loom-profile/1\", \"device\": \"X\", \"entries\": ["
#define OK_ENTRY "{\"op\": \"einsum\", \"sig\": \"ab,bc->ac\", \"dtype\": \"bf16\", " \
                 "\"shape\": {\"a\": 2, \"b\": 3, \"c\": 4}, \"fwd_ns\": 10, \"bwd_ns\": 20}"

static void test_bad_input(void)
{
    expect_load_error("bad1.json", HDR OK_ENTRY ",\n {\"op\": ]}", "2:");
    expect_load_error("bad2.json", "{\"format\": \"loom-profile/2\", \"device\": \"X\", \"entries\": []}",
                      "$.format: expected \"loom-profile/1\"");
    expect_load_error("bad3.json", HDR OK_ENTRY ", {\"op\": \"einsum\", \"dtype\": \"bf16\", "
                      "\"shape\": {\"a\": 2}, \"fwd_ns\": 1, \"bwd_ns\": 1, \"fwd_nss\": 3}]}",
                      "$.entries[1]: unknown field \"fwd_nss\"");
    expect_load_error("bad4.json", HDR "{\"op\": \"einsum\", \"dtype\": \"bf16\", "
                      "\"shape\": {\"a\": 2, \"h\": -3}, \"fwd_ns\": 1, \"bwd_ns\": 1}]}",
                      "$.entries[0].shape.h: expected an integer in [1,");
    expect_load_error("bad5.json", HDR "{\"op\": \"matmul\", \"dtype\": \"bf16\", "
                      "\"shape\": {\"a\": 2}, \"fwd_ns\": 1, \"bwd_ns\": 1}]}",
                      "$.entries[0].op: unknown op kind \"matmul\"");
    expect_load_error("bad6.json", HDR "{\"op\": \"norm\", \"dtype\": \"bf17\", "
                      "\"shape\": {\"a\": 2}, \"fwd_ns\": 1, \"bwd_ns\": 1}]}",
                      "$.entries[0].dtype: unknown dtype \"bf17\"");
    expect_load_error("bad7.json", HDR OK_ENTRY ", " OK_ENTRY "]}",
                      "$.entries[1]: duplicate entry");
    expect_load_error("bad8.json", HDR "{\"op\": \"norm\", \"dtype\": \"bf16\", "
                      "\"shape\": {\"a\": 2}, \"fwd_ns\": 1.5, \"bwd_ns\": 1}]}",
                      "$.entries[0].fwd_ns: expected an integer");
    expect_load_error("bad9.json", HDR "{\"op\": \"norm\", \"dtype\": \"bf16\", "
                      "\"shape\": {}, \"fwd_ns\": 1, \"bwd_ns\": 1}]}",
                      "$.entries[0].shape: expected at least one dim");
    expect_load_error("bad10.json", HDR "{\"op\": \"norm\", \"dtype\": \"bf16\", \"shape\": {\"a\": 2}, "
                      "\"fwd_ns\": 1, \"bwd_ns\": 1, \"kernels\": [\"k\", 3]}]}",
                      "$.entries[0].kernels[1]: expected a kernel name string");
    expect_load_error("bad11.json", "{\"format\": \"loom-profile/1\", \"entries\": []}",
                      "missing required field \"device\"");
    expect_load_error("bad12.json", HDR OK_ENTRY "], \"entries\": []}", "duplicate key \"entries\"");
    expect_load_error("bad13.json", HDR "{\"op\": \"norm\", \"dtype\": \"bf16\", \"shape\": {\"a\": 2}, "
                      "\"fwd_ns\": 1, \"bwd_ns\": 1e999}]}", "not finite");
    loom_error err;
    loom_profile_db *db;
    CHECK(loom_profile_db_load(tmp_path("missing.json"), &db, &err) == LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "missing.json");

    /* put() validates what it is given. */
    loom_profile_db_create("gpu", NULL, NULL, NULL, &db, &err);
    static const char *const nn[] = {"a", "a"};
    int64_t sz[] = {2, 3};
    loom_profile_entry e = mk("norm", "rmsnorm", 2, nn, sz, 1, 1);
    CHECK(loom_profile_db_put(db, &e, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "dim \"a\" appears twice");
    static const char *const nb[] = {"a", "b"};
    e = mk("norm", "rmsnorm", 2, nb, sz, -1, 1);
    CHECK(loom_profile_db_put(db, &e, &err) == LOOM_ERR_INVALID);
    CHECK_INT_EQ(loom_profile_db_count(db), 0);
    loom_profile_db_destroy(db);
}

static void test_atomic_write(void)
{
    loom_error err;
    loom_profile_db *db;
    loom_profile_db_create("gpu", "13.0", "d", "c", &db, &err);
    static const char *const nb[] = {"n", "d"};
    int64_t sz[] = {8, 16};
    loom_profile_entry e = mk("softmax", "", 2, nb, sz, 10, 10);
    loom_profile_db_put(db, &e, &err);
    const char *p = tmp_path("atomic.json");
    loom_fileio_fail_next_write = 1;
    CHECK(loom_profile_db_save(db, p, &err) != LOOM_OK);
    CHECK(!exists(p));
    /* An existing db is not clobbered by a failed save. */
    CHECK_INT_EQ(loom_profile_db_save(db, p, &err), LOOM_OK);
    char *before = slurp(p);
    e.key.shape[0].size = 16;
    loom_profile_db_put(db, &e, &err);
    loom_fileio_fail_next_write = 1;
    CHECK(loom_profile_db_save(db, p, &err) != LOOM_OK);
    char *after = slurp(p);
    CHECK(before && after && strcmp(before, after) == 0);
    free(before);
    free(after);
    loom_profile_db_destroy(db);
}

static void test_requests(void)
{
    loom_error err;
    static const char *const n_mk[] = {"m", "k"};
    int64_t s1[] = {64, 32}, s2[] = {16, 32};
    loom_profile_key keys[4];
    keys[0] = mk("norm", "layernorm", 2, n_mk, s1, 0, 0).key;
    keys[1] = mk("einsum", "mk,kn->mn", 2, n_mk, s2, 0, 0).key;
    keys[2] = keys[0];                              /* duplicate */
    keys[3] = mk("norm", "layernorm", 2, n_mk, s2, 0, 0).key;
    const char *p = tmp_path("req.json"), *p2 = tmp_path("req2.json");
    CHECK_INT_EQ(loom_profile_requests_write(p, "tiny-gpt", keys, 4, &err), LOOM_OK);
    loom_profile_key *back = NULL;
    int32_t n = 0;
    CHECK_INT_EQ(loom_profile_requests_read(p, &back, &n, &err), LOOM_OK);
    CHECK_INT_EQ(n, 3);   /* duplicate dropped */
    if (n == 3) {
        /* sorted: einsum first, then the two norms by size of m */
        CHECK(strcmp(back[0].op, "einsum") == 0);
        CHECK(loom_profile_key_equal(&back[1], &keys[3]));
        CHECK(loom_profile_key_equal(&back[2], &keys[0]));
        CHECK(strcmp(back[0].sig, "mk,kn->mn") == 0);
    }
    /* Writing what was read gives the same bytes (order-independent input). */
    loom_profile_key rev[3];
    for (int i = 0; i < n && i < 3; i++) rev[i] = back[n - 1 - i];
    CHECK_INT_EQ(loom_profile_requests_write(p2, "tiny-gpt", rev, n, &err), LOOM_OK);
    char *a = slurp(p), *b = slurp(p2);
    CHECK(a && b && strcmp(a, b) == 0);
    CHECK_STR_CONTAINS(a, "loom-profile-requests/1");
    free(a);
    free(b);
    free(back);

    const char *bad = tmp_path("req_bad.json");
    write_text(bad, "{\"format\": \"loom-profile-requests/1\", \"requests\": [{\"op\": \"norm\", "
                    "\"dtype\": \"bf16\", \"shape\": {\"n\": 4}, \"fwd_ns\": 3}]}");
    CHECK(loom_profile_requests_read(bad, &back, &n, &err) != LOOM_OK);
    CHECK_STR_CONTAINS(err.msg, "req_bad.json: $.requests[0]: unknown field \"fwd_ns\"");
    CHECK(back == NULL && n == 0);
    write_text(bad, "{\"format\": \"loom-profile-requests/1\", \"requests\": [3]}");
    CHECK(loom_profile_requests_read(bad, &back, &n, &err) != LOOM_OK);
    CHECK_STR_CONTAINS(err.msg, "$.requests[0]: expected an object, found a number");
    /* Invalid keys are refused by the writer, and nothing is written. */
    keys[1].shape[0].size = 0;
    const char *p3 = tmp_path("req3.json");
    CHECK(loom_profile_requests_write(p3, NULL, keys, 2, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "profile request 1");
    CHECK(!exists(p3));
}

/* A one-layer slice: x [b,s,h] -> q_proj (bsh,hnd->bsnd) -> attention -> norm. */
static void test_key_from_op(void)
{
    loom_error err;
    loom_graph *g;
    loom_graph_create("t", &g, &err);
    loom_dim dx[] = {{"b", 2}, {"s", 128}, {"h", 64}};
    loom_dim dw[] = {{"h", 64}, {"heads", 8}, {"dh", 8}};
    loom_dim dk[] = {{"b", 2}, {"s", 128}, {"kvh", 2}, {"dh", 8}};
    int32_t x, w, q, kk, vv, o, y;
    CHECK_INT_EQ(loom_graph_add_tensor(g, "x", LOOM_DTYPE_BF16, 3, dx, false, &x, &err), LOOM_OK);
    CHECK_INT_EQ(loom_graph_add_tensor(g, "wq", LOOM_DTYPE_BF16, 3, dw, true, &w, &err), LOOM_OK);
    CHECK_INT_EQ(loom_graph_add_tensor(g, "k", LOOM_DTYPE_BF16, 4, dk, false, &kk, &err), LOOM_OK);
    CHECK_INT_EQ(loom_graph_add_tensor(g, "v", LOOM_DTYPE_BF16, 4, dk, false, &vv, &err), LOOM_OK);
    CHECK_INT_EQ(loom_graph_einsum(g, "q_proj", 1, "bsh,hnd->bsnd", 1, &x, 1, &w, 0, &q, &err),
                 LOOM_OK);
    loom_dim dq[] = {{"b", 2}, {"s", 128}, {"heads", 8}, {"dh", 8}};
    CHECK_INT_EQ(loom_graph_add_tensor(g, "o", LOOM_DTYPE_BF16, 4, dq, false, &o, &err), LOOM_OK);
    loom_op at = {.name = "attn", .kind = LOOM_OP_ATTENTION, .layer = 1, .n_in = 3,
                  .in = {q, kk, vv}, .n_out = 1, .out = {o}, .causal = true};
    int32_t at_id, nm_id;
    CHECK_INT_EQ(loom_graph_add_op(g, &at, &at_id, &err), LOOM_OK);
    CHECK_INT_EQ(loom_graph_add_tensor(g, "y", LOOM_DTYPE_BF16, 3, dx, false, &y, &err), LOOM_OK);
    loom_op nm = {.name = "ln", .kind = LOOM_OP_NORM, .layer = 1, .n_in = 1, .in = {x},
                  .n_out = 1, .out = {y}, .fn = "rmsnorm"};
    CHECK_INT_EQ(loom_graph_add_op(g, &nm, &nm_id, &err), LOOM_OK);

    /* TP 2: heads and kvh halve; the einsum's letter n carries "heads". */
    loom_dim tp2[] = {{"heads", 2}, {"kvh", 2}, {"f", 2}};
    loom_profile_key k;
    CHECK_INT_EQ(loom_profile_key_from_op(g, 0, tp2, 3, &k, &err), LOOM_OK);
    CHECK(strcmp(k.op, "einsum") == 0 && strcmp(k.sig, "bsh,hnd->bsnd") == 0);
    CHECK_INT_EQ(k.n_dims, 5);
    CHECK(strcmp(k.shape[0].name, "b") == 0 && strcmp(k.shape[3].name, "n") == 0);
    CHECK_INT_EQ(loom_profile_key_dim(&k, "n"), 4);
    CHECK_INT_EQ(loom_profile_key_dim(&k, "h"), 64);
    CHECK_INT_EQ(loom_profile_key_dim(&k, "d"), 8);
    CHECK_INT_EQ(k.dtype, LOOM_DTYPE_BF16);

    CHECK_INT_EQ(loom_profile_key_from_op(g, at_id, tp2, 3, &k, &err), LOOM_OK);
    CHECK(strcmp(k.sig, "causal") == 0);
    CHECK_INT_EQ(loom_profile_key_dim(&k, "heads"), 4);
    CHECK_INT_EQ(loom_profile_key_dim(&k, "kvh"), 1);
    CHECK_INT_EQ(loom_profile_key_dim(&k, "t"), 128);
    CHECK_INT_EQ(loom_profile_key_dim(&k, "dqk"), 8);
    CHECK_INT_EQ(loom_profile_key_dim(&k, "dv"), 8);

    /* Sequence parallel on the norm: rows n = b·s/2, d = h. */
    loom_dim sp[] = {{"s", 2}};
    CHECK_INT_EQ(loom_profile_key_from_op(g, nm_id, sp, 1, &k, &err), LOOM_OK);
    CHECK(strcmp(k.sig, "rmsnorm") == 0);
    CHECK_INT_EQ(loom_profile_key_dim(&k, "n"), 128);
    CHECK_INT_EQ(loom_profile_key_dim(&k, "d"), 64);

    /* 3 does not divide 8 heads. */
    loom_dim tp3[] = {{"heads", 3}};
    CHECK(loom_profile_key_from_op(g, 0, tp3, 1, &k, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "op q_proj: dim \"heads\" of size 8 cannot be split 3 ways");
    loom_graph_destroy(g);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/loom_profile_db_XXXXXX");
    check_tmpdir(tmpdir);
    test_roundtrip_and_exact();
    test_interpolation();
    test_bad_input();
    test_atomic_write();
    test_requests();
    test_key_from_op();
    check_tmpdir_remove(tmpdir);
    return check_done();
}
