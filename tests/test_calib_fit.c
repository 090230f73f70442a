/*
 * test_calib_fit.c — measured-run records and the fit of `loom calibrate`
 * (costs/calib_fit.c):
 *   - the published runs (examples/calibration/published-runs.json) parse
 *     into the configurations their text describes, with the assumptions
 *     for null fields stated;
 *   - bad records fail with the file and the JSON path of the problem;
 *   - the shipped defaults (loom_calib_default) ARE the fit: refitting the
 *     published runs from loom_calib_prior reproduces them;
 *   - the fit recovers a known calibration from times it generated itself;
 *   - the shipped defaults predict the published runs with median error
 *     <= 10% (docs/design.md §10).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "costs/calib_fit.h"
#include "base/fileio.h"

#define RUNS "examples/calibration/published-runs.json"

static char dir[64];

static const char *put(const char *name, const char *text)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    loom_error e;
    if (loom_write_file_atomic(path, text, strlen(text), &e)) exit(2);
    return path;
}

static void test_published(void)
{
    loom_calib_record *r = NULL;
    size_t n = 0;
    loom_error e;
    CHECK_INT_EQ(loom_calib_records_load(RUNS, &r, &n, &e), LOOM_OK);
    CHECK_INT_EQ(n, 17);
    if (n != 17) return;
    /* Korthikanti et al. 175B, SP + selective: as stated */
    const loom_calib_record *k = &r[2];
    CHECK_STR_CONTAINS(k->model, "175B");
    CHECK_STR_CONTAINS(k->gpu, "A100-SXM4-80GB");
    CHECK(k->par.tp == 8 && k->par.pp == 8 && k->par.dp == 1 && k->par.vpp == 3);
    CHECK(k->par.sp && k->par.recompute == LOOM_RECOMPUTE_SELECTIVE && !k->par.flash);
    CHECK(k->par.mbs == 1 && k->par.gbs == 64 && k->par.seq == 2048);
    CHECK_NEAR_REL(k->measured_s, 13.75, 1e-12);
    CHECK_INT_EQ(strlen(k->assumed), 0);
    /* Megatron-core table, 32B: micro batch and SP assumed; overlaps from
     * the source's words */
    const loom_calib_record *m = &r[11];
    CHECK_STR_CONTAINS(m->model, "32B");
    CHECK(m->par.mbs == 1 && m->par.sp && m->par.tp_comm_overlap && m->par.dist_opt);
    CHECK(m->par.flash && m->par.recompute == LOOM_RECOMPUTE_NONE && !m->par.grad_reduce_bf16);
    CHECK_STR_CONTAINS(m->assumed, "micro batch 1");
    CHECK_STR_CONTAINS(m->assumed, "sequence parallel");
    CHECK_INT_EQ(m->ffn, 28672);
    free(r);
}

static void expect_bad(const char *name, const char *text, const char *needle1,
                       const char *needle2)
{
    const char *path = put(name, text);
    loom_calib_record *r = NULL;
    size_t n = 0;
    loom_error e = {0};
    CHECK(loom_calib_records_load(path, &r, &n, &e) != LOOM_OK);
    CHECK(r == NULL && n == 0);
    CHECK_STR_CONTAINS(e.msg, path);
    CHECK_STR_CONTAINS(e.msg, needle1);
    if (needle2) CHECK_STR_CONTAINS(e.msg, needle2);
}

/* A valid record with one member replaced (or removed with "") . */
static const char *record(const char *key, const char *value)
{
    static char buf[2048];
    const char *keys[] = {"model", "gpu", "layers", "hidden", "heads", "seq_len", "vocab",
                          "global_batch", "micro_batch", "num_gpus", "tp", "pp", "dp",
                          "recompute", "iteration_time_s"};
    const char *vals[] = {"\"t\"", "\"H100\"", "4", "256", "8", "128", "1024", "8", "1", "8",
                          "1", "1", "8", "null", "0.01"};
    size_t n = 0;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{\"records\": [{");
    bool first = true;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = strcmp(keys[i], key) == 0 ? value : vals[i];
        if (!*v) continue;
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\"%s\": %s", first ? "" : ", ", keys[i], v);
        first = false;
    }
    snprintf(buf + n, sizeof buf - n, "}]}");
    return buf;
}

static void test_bad_records(void)
{
    /* the template itself is good */
    const char *path = put("good.json", record("", ""));
    loom_calib_record *r = NULL;
    size_t n = 0;
    loom_error e;
    CHECK_INT_EQ(loom_calib_records_load(path, &r, &n, &e), LOOM_OK);
    CHECK_INT_EQ(n, 1);
    free(r);

    expect_bad("list.json", "[1, 2]", "$", "\"records\"");
    expect_bad("none.json", "{\"records\": []}", "$.records", "at least one record");
    expect_bad("malformed.json", "{\"records\": [", "malformed", NULL);
    expect_bad("no_tp.json", record("tp", ""), "$.records[0]", "tp");
    expect_bad("gpu.json", record("gpu", "\"Z100\""), "$.records[0].gpu", "unknown GPU \"Z100\"");
    expect_bad("kv.json", record("heads", "8, \"kv_heads\": 2"), "$.records[0].kv_heads",
               "grouped-query");
    expect_bad("time.json", record("iteration_time_s", ""), "$.records[0]",
               "no measured time");
    expect_bad("rc.json", record("recompute", "\"partial\""), "$.records[0].recompute",
               "\"partial\"");
    expect_bad("neg.json", record("layers", "-4"), "$.records[0].layers", "-4");
    expect_bad("world.json", record("dp", "2"), "$.records[0]",
               "tp 1 × pp 1 × dp 2 × cp 1 = 2 GPUs, but the cluster has 8");
}

static double field_rel(double a, double b)
{
    return fabs(a - b) / fmax(fabs(b), 1e-3);
}

/* Refitting the published runs reproduces the shipped published-runs fit
 * (loom_calib_default then puts each family's GEMM and attention fractions
 * over it: test_defaults_inherit). */
static void test_defaults_reproduce(void)
{
    loom_calib_record *r = NULL;
    size_t n = 0;
    loom_error e;
    CHECK_INT_EQ(loom_calib_records_load(RUNS, &r, &n, &e), LOOM_OK);
    const char *gpus[] = {"A100-SXM4-80GB", "H100-SXM5-80GB"};
    for (size_t k = 0; k < 2; k++) {
        const loom_device *d = loom_device_find(gpus[k]);
        loom_calib fit, def;
        loom_calib_prior(d, &fit);
        loom_calib_fit_stats st;
        CHECK_INT_EQ(loom_calib_fit(r, n, gpus[k], &fit, &st, &e), LOOM_OK);
        loom_calib_published_fit(d, &def);
#define LOOM_X(f, lo, hi, open)                                                          \
        if (field_rel(fit.f, def.f) > 1e-4) {                                             \
            check_failures++;                                                             \
            fprintf(stderr, "%s: %s refits to %.6f but loom_calib_default has %.6f\n",    \
                    gpus[k], #f, fit.f, def.f);                                           \
        } else check_passes++;
        LOOM_CALIB_FIELDS(LOOM_X)
#undef LOOM_X
        CHECK(st.n >= 8 && st.median_abs_err < 0.10);
    }
    free(r);
}

/* A GPU with no published run in the fit (Blackwell, H800) takes its
 * predecessor's fitted fractions of peak, not the prior, while the fixed
 * per-GEMM cost stays its own (3 us at its own peak); Blackwell's GEMM and
 * attention fractions are its own fit (calib.c: 0.50 and 0.44, from
 * bench/training_accuracy.py's fit to the B200/GB200 runs), H800's are the
 * H100's. */
static void test_defaults_inherit(void)
{
    loom_calib h100, b200, prior;
    loom_calib_default(loom_device_find("H100-SXM5-80GB"), &h100);
    const char *kids[] = {"B200-HGX-180GB", "B200-NVL72-186GB", "H800-SXM5-80GB"};
    for (size_t k = 0; k < 3; k++) {
        const loom_device *d = loom_device_find(kids[k]);
        CHECK(d != NULL);
        loom_calib_default(d, &b200);
        loom_calib_prior(d, &prior);
        bool blackwell = strncmp(kids[k], "B200", 4) == 0;
        CHECK_NEAR_REL(b200.gemm_eff_max, blackwell ? 0.50 : h100.gemm_eff_max, 1e-12);
        CHECK_NEAR_REL(b200.attn_eff, blackwell ? 0.44 : h100.attn_eff, 1e-12);
        CHECK_NEAR_REL(b200.mem_eff, h100.mem_eff, 1e-12);
        CHECK_NEAR_REL(b200.intra_link_eff, h100.intra_link_eff, 1e-12);
        CHECK_NEAR_REL(b200.gemm_half_flops, 3e-6 * d->peak_flops[LOOM_DTYPE_BF16], 1e-12);
        CHECK_NEAR_REL(b200.gemm_half_flops, prior.gemm_half_flops, 1e-12);
        CHECK_STR_CONTAINS(b200.note, "H100");
    }
    /* H100 itself: the published-runs fit's memory and link fractions with
     * the Hopper family's GEMM and attention pair (calib.c HOPPER_*, from
     * bench/training_accuracy.py's fit to the 66 Hopper runs) */
    loom_calib pub;
    loom_calib_published_fit(loom_device_find("H100-SXM5-80GB"), &pub);
    CHECK_NEAR_REL(h100.gemm_eff_max, 0.633, 1e-12);
    CHECK_NEAR_REL(h100.attn_eff, 0.328, 1e-12);
    CHECK(fabs(pub.gemm_eff_max - 0.633) > 0.01);
    CHECK_NEAR_REL(h100.mem_eff, pub.mem_eff, 1e-12);
    CHECK_NEAR_REL(h100.grad_sync_overlap, pub.grad_sync_overlap, 1e-12);
    /* a device of its own family with no fitted predecessor keeps the prior */
    loom_calib mi, mip;
    loom_calib_default(loom_device_find("MI300X-192GB"), &mi);
    loom_calib_prior(loom_device_find("MI300X-192GB"), &mip);
    CHECK_NEAR_REL(mi.gemm_eff_max, mip.gemm_eff_max, 1e-12);
}

/* Times generated by a known calibration are fitted back to near zero error. */
static void test_recovery(void)
{
    loom_calib_record *r = NULL;
    size_t n = 0;
    loom_error e;
    CHECK_INT_EQ(loom_calib_records_load(RUNS, &r, &n, &e), LOOM_OK);
    /* four H100 runs: small / large, with and without pipelines */
    loom_calib_record sub[4] = {r[8], r[9], r[12], r[15]};
    loom_calib truth;
    loom_calib_prior(loom_device_find("H100"), &truth);
    truth.gemm_eff_max = 0.62, truth.mem_eff = 0.7, truth.attn_eff = 0.45;
    truth.intra_link_eff = 0.7, truth.grad_sync_overlap = 0.4;
    double t[4];
    CHECK_INT_EQ(loom_calib_predict(sub, 4, &truth, t, &e), LOOM_OK);
    for (int i = 0; i < 4; i++) sub[i].measured_s = t[i];
    loom_calib fit;
    loom_calib_prior(loom_device_find("H100"), &fit);
    loom_calib_fit_stats st;
    CHECK_INT_EQ(loom_calib_fit(sub, 4, "H100", &fit, &st, &e), LOOM_OK);
    CHECK(st.rms_log_err < 0.01);
    CHECK(st.max_abs_err < 0.02);
    /* the dominant parameter comes back */
    CHECK_NEAR_REL(fit.gemm_eff_max, 0.62, 0.05);
    /* no record of that GPU */
    CHECK_INT_EQ(loom_calib_fit(sub, 4, "V100", &fit, &st, &e), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "no record was measured on V100");
    free(r);
}

static void test_accuracy(void)
{
    loom_calib_record *r = NULL;
    size_t n = 0;
    loom_error e;
    CHECK_INT_EQ(loom_calib_records_load(RUNS, &r, &n, &e), LOOM_OK);
    double *p = calloc(n, sizeof *p), *err = calloc(n, sizeof *err);
    CHECK_INT_EQ(loom_calib_predict(r, n, NULL, p, &e), LOOM_OK);
    for (size_t i = 0; i < n; i++) err[i] = fabs(p[i] / r[i].measured_s - 1);
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0 && err[b] < err[b - 1]; b--) {
            double x = err[b];
            err[b] = err[b - 1];
            err[b - 1] = x;
        }
    double median = n % 2 ? err[n / 2] : (err[n / 2 - 1] + err[n / 2]) / 2;
    CHECK(median <= 0.10);
    printf("published runs with the shipped calibration: median |error| %.1f%%, max %.1f%%\n",
           100 * median, 100 * err[n - 1]);
    free(p);
    free(err);
    free(r);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/loom_test_calib_XXXXXX");
    check_tmpdir(dir);
    test_published();
    test_bad_records();
    test_defaults_reproduce();
    test_defaults_inherit();
    test_recovery();
    test_accuracy();
    check_tmpdir_remove(dir);
    return check_done();
}
