/*
 * main.c — the loom-profile command: measures per-operator kernel times on
 * one GPU and writes a profile db (docs/profile-db.md, docs/design.md §8).
 *
 * Inputs: a requests file from `loom plan --emit-profile-requests`, or a
 * model (+ cluster) whose ops are enumerated on their Megatron shards
 * (enumerate.h). Each key is measured with profile.h's protocol and written
 * into the db atomically, at least once a second and at the end, so an
 * interrupted run (Ctrl-C stops after the current op) resumes with
 * --resume. --layer-check runs one transformer layer's ops back to back and
 * prints the composability error; --roofline-check compares a db with the
 * cost model's roofline per op kind (no GPU needed). Exit codes: 0 done,
 * 1 failure (including no CUDA device), 2 usage error.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "costs/cluster.h"
#include "costs/profile_db.h"
#include "gpu/cupti_timer.h"
#include "gpu/device.h"
#include "gpu/enumerate.h"
#include "gpu/kernel_log.h"
#include "gpu/profile.h"
#include "gpu/roofline_check.h"
#include "graph/model.h"

#ifndef LOOM_SOURCE_DIR
#define LOOM_SOURCE_DIR "."
#endif

static const char usage_text[] =
    "usage: loom-profile --requests FILE [options]\n"
    "       loom-profile --model M [--cluster C] [options]\n"
    "       loom-profile --model M [--cluster C] --emit-requests FILE   (no GPU needed)\n"
    "       loom-profile --layer-check --model M [--tp N] [--layer L] [options]\n"
    "       loom-profile --roofline-check DB --model M --cluster C      (no GPU needed)\n"
    "\n"
    "Times each operator slice (forward and backward) on one GPU with CUPTI and\n"
    "writes a loom-profile/1 db for `loom plan --profile DB`.\n"
    "\n"
    "  -o, --out DB        profile db to write (default profile.json)\n"
    "  --resume            keep the entries already in DB, measure only the rest\n"
    "  --warmup N          unrecorded passes per op (default 5)\n"
    "  --repeats N         timed passes per op (default 20)\n"
    "  --no-flush-l2       keep L2 warm between passes (default: flushed)\n"
    "  --reference-attention  also time attention with loom's reference kernel (slow:\n"
    "                      attention requests are skipped without it)\n"
    "  --device N          CUDA device ordinal (default 0)\n"
    "  --clock-note TEXT   recorded in the db, e.g. \"SM clock locked at 1755 MHz\"\n"
    "  --seq N, --batch N, --dtype T   shapes when enumerating a model (2048, 1, bf16)\n"
    "  --max-tp N          TP degrees 1..N (default: the cluster's GPUs per node, else 8)\n"
    "  --tp N, --layer L   layer check: TP degree (1) and layer (1, the first block)\n";

typedef struct {
    const char *requests, *model, *cluster, *out, *emit, *clock_note, *roofline;
    bool resume, layer_check, reference_attention;
    int64_t device, seq, batch, max_tp, tp, layer;
    loom_dtype dtype;
    loom_profile_opts prof;
} options;

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "loom-profile: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see `loom-profile --help`)\n");
    return 2;
}

static int fail(const loom_error *err)
{
    fprintf(stderr, "loom-profile: %s\n", err->msg[0] ? err->msg : loom_status_str(err->status));
    return 1;
}

static bool parse_int(const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "loom-profile: %s expects an integer in [%lld, %lld], got '%s'\n", opt,
                (long long)lo, (long long)hi, v);
        return false;
    }
    *out = x;
    return true;
}

/* Returns 0 when parsed, else the exit code (-1: --help printed). */
static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->out = "profile.json";
    o->seq = 2048, o->batch = 1, o->tp = 1, o->layer = 1;
    o->dtype = LOOM_DTYPE_BF16;
    loom_profile_opts_init(&o->prof);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return -1;
        }
        if (!strcmp(a, "--resume")) { o->resume = true; continue; }
        if (!strcmp(a, "--layer-check")) { o->layer_check = true; continue; }
        if (!strcmp(a, "--no-flush-l2")) { o->prof.flush_l2 = false; continue; }
        if (!strcmp(a, "--reference-attention")) { o->reference_attention = true; continue; }
        static const char *const valued[] = {"--requests", "--model", "--cluster", "-o", "--out",
                                             "--emit-requests", "--clock-note", "--warmup",
                                             "--repeats", "--device", "--seq", "--batch", "--dtype",
                                             "--max-tp", "--tp", "--layer", "--roofline-check",
                                             NULL};
        int k = 0;
        while (valued[k] && strcmp(a, valued[k])) k++;
        if (!valued[k]) return usage_error("unknown option '%s'", a);
        if (!v) return usage_error("option %s needs a value", a);
        i++;
        switch (k) {
        case 0: o->requests = v; break;
        case 1: o->model = v; break;
        case 2: o->cluster = v; break;
        case 3: case 4: o->out = v; break;
        case 5: o->emit = v; break;
        case 6: o->clock_note = v; break;
        case 7: if (!parse_int(a, v, 0, 1000, &x)) return 2; o->prof.warmup = (int)x; break;
        case 8: if (!parse_int(a, v, 1, 1000, &x)) return 2; o->prof.repeats = (int)x; break;
        case 9: if (!parse_int(a, v, 0, 1024, &o->device)) return 2; break;
        case 10: if (!parse_int(a, v, 1, LOOM_MODEL_MAX_SEQ, &o->seq)) return 2; break;
        case 11: if (!parse_int(a, v, 1, LOOM_MODEL_MAX_BATCH, &o->batch)) return 2; break;
        case 12: if (!loom_dtype_parse(v, &o->dtype)) return usage_error("unknown dtype '%s'", v); break;
        case 13: if (!parse_int(a, v, 1, 63, &o->max_tp)) return 2; break;
        case 14: if (!parse_int(a, v, 1, 63, &o->tp)) return 2; break;
        case 15: if (!parse_int(a, v, 0, 1000000, &o->layer)) return 2; break;
        case 16: o->roofline = v; break;
        }
    }
    if (o->roofline && (!o->model || !o->cluster))
        return usage_error("%s", "--roofline-check needs --model and --cluster");
    if (o->layer_check ? !o->model : !o->requests == !o->model)
        return usage_error("%s", o->layer_check ? "--layer-check needs --model"
                                                : "give either --requests FILE or --model M");
    if (o->emit && !o->model) return usage_error("%s", "--emit-requests needs --model");
    return 0;
}

/* A model argument: a path, or a bundled name under examples/models/. */
static const char *model_path(const char *arg, char *buf, size_t n)
{
    struct stat st;
    if (stat(arg, &st) == 0) return arg;
    snprintf(buf, n, "%s/examples/models/%s%s", LOOM_SOURCE_DIR, arg,
             strstr(arg, ".json") ? "" : ".json");
    return stat(buf, &st) == 0 ? buf : arg;
}

static loom_status load_model(const options *o, loom_graph **g, loom_error *err)
{
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    mo.seq = o->seq;
    mo.batch = o->batch;
    mo.dtype = o->dtype;
    mo.flash_attention = true;
    char buf[1024];
    return loom_model_load(model_path(o->model, buf, sizeof buf), &mo, g, err);
}

/* The keys to measure, from --requests or --model (+ --cluster). */
static loom_status gather_keys(const options *o, loom_profile_key **keys, int32_t *n,
                               char *source, size_t source_n, loom_error *err)
{
    if (o->requests) {
        snprintf(source, source_n, "%s", o->requests);
        return loom_profile_requests_read(o->requests, keys, n, err);
    }
    int64_t max_tp = o->max_tp ? o->max_tp : 8;
    if (o->cluster && !o->max_tp) {
        loom_cluster c;
        loom_status s = loom_cluster_load(o->cluster, &c, err);
        if (s) return s;
        max_tp = c.gpus_per_node < 63 ? c.gpus_per_node : 63;
    }
    loom_graph *g;
    loom_status s = load_model(o, &g, err);
    if (s) return s;
    uint64_t degrees;
    s = loom_profile_enumerate(g, max_tp, keys, n, &degrees, err);
    int len = snprintf(source, source_n, "%s seq %lld batch %lld %s, TP", loom_graph_name(g),
                       (long long)o->seq, (long long)o->batch, loom_dtype_name(o->dtype));
    for (int t = 1; t <= 63 && len > 0 && (size_t)len < source_n; t++)
        if (degrees >> t & 1) len += snprintf(source + len, source_n - (size_t)len, " %d", t);
    loom_graph_destroy(g);
    return s;
}

static void describe(const loom_profile_key *k, char *out, size_t n)
{
    int len = snprintf(out, n, "%s %s %s {", k->op, k->sig, loom_dtype_name(k->dtype));
    for (int i = 0; i < k->n_dims && len > 0 && (size_t)len < n; i++)
        len += snprintf(out + len, n - (size_t)len, "%s%s:%lld", i ? "," : "", k->shape[i].name,
                        (long long)k->shape[i].size);
    if (len > 0 && (size_t)len < n) snprintf(out + len, n - (size_t)len, "}");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A new db for this device, or the one being resumed. */
static loom_status open_db(const options *o, const loom_gpu_info *info, loom_profile_db **db,
                           loom_error *err)
{
    struct stat st;
    if (o->resume && stat(o->out, &st) == 0) {
        loom_status s = loom_profile_db_load(o->out, db, err);
        if (s) return s;
        if (strcmp(loom_profile_db_device(*db), info->name)) {
            s = loom_error_set(err, LOOM_ERR_INVALID,
                               "%s was measured on \"%s\", this GPU is \"%s\": resume on the same "
                               "GPU or write another db", o->out, loom_profile_db_device(*db), info->name);
            loom_profile_db_destroy(*db);
            *db = NULL;
        }
        return s;
    }
    char cuda[16], drv[128], api[16], note[LOOM_PROFILE_META_MAX];
    loom_gpu_version_string(info->runtime_version, cuda, sizeof cuda);
    loom_gpu_version_string(info->driver_api_version, api, sizeof api);
    snprintf(drv, sizeof drv, "%s%s(CUDA %s driver API)", info->driver, info->driver[0] ? " " : "", api);
    if (o->clock_note) snprintf(note, sizeof note, "%s", o->clock_note);
    else
        snprintf(note, sizeof note, "clocks not locked (peak SM clock %d MHz); %s L2 flush before "
                 "each pass", info->clock_khz / 1000, o->prof.flush_l2 ? "with" : "no");
    return loom_profile_db_create(info->name, cuda, drv, note, db, err);
}

static int run_profile(const options *o, loom_gpu *g, const loom_profile_key *keys, int32_t n)
{
    loom_error err;
    loom_profile_db *db = NULL;
    loom_status s = open_db(o, loom_gpu_info_of(g), &db, &err);
    if (s) return fail(&err);
    int32_t done = 0, skipped = 0, kept = 0;
    double *diff = malloc(((size_t)n + 1) * sizeof *diff), last_save = now_s();
    int n_diff = 0;
    int rc = 0;
    for (int32_t i = 0; i < n && !interrupted; i++) {
        char what[256];
        describe(&keys[i], what, sizeof what);
        if (o->resume && loom_profile_db_find(db, &keys[i])) {
            kept++;
            continue;
        }
        if (!o->reference_attention && !strcmp(keys[i].op, "attention")) {
            printf("[%d/%d] %s: skipped: loom-profile's attention kernel is a correctness "
                   "reference, 15-25x slower than FlashAttention/cuDNN on an H100 "
                   "(bench/profile_attention_torch.py measures those; --reference-attention "
                   "times it anyway)\n", (int)i + 1, (int)n, what);
            skipped++;
            continue;
        }
        loom_profile_entry e;
        s = loom_profile_measure(g, &keys[i], &o->prof, &e, &err);
        if (s == LOOM_ERR_UNSUPPORTED || s == LOOM_ERR_INVALID) {
            printf("[%d/%d] %s: skipped: %s\n", (int)i + 1, (int)n, what, err.msg);
            skipped++;
            continue;
        }
        if (s || (s = loom_profile_db_put(db, &e, &err))) {
            fprintf(stderr, "loom-profile: %s: %s\n", what, err.msg);
            rc = 1;
            break;
        }
        double cupti = (double)(e.fwd_ns + e.bwd_ns), ev = (double)(e.events_fwd_ns + e.events_bwd_ns);
        if (diff && cupti > 0) diff[n_diff++] = ev / cupti - 1;
        printf("[%d/%d] %s: fwd %.1f us, bwd %.1f us, spread %.1f%%, events %+.1f%%, %d kernel%s\n",
               (int)i + 1, (int)n, what, (double)e.fwd_ns / 1e3, (double)e.bwd_ns / 1e3,
               100 * e.spread, cupti > 0 ? 100 * (ev / cupti - 1) : 0.0, (int)e.n_kernels,
               e.n_kernels == 1 ? "" : "s");
        fflush(stdout);
        done++;
        if (now_s() - last_save >= 1.0) {
            if ((s = loom_profile_db_save(db, o->out, &err))) {
                rc = fail(&err);
                break;
            }
            last_save = now_s();
        }
    }
    if ((s = loom_profile_db_save(db, o->out, &err))) rc = fail(&err);
    printf("%s: %d measured, %d kept from before, %d skipped; %d entries\n", o->out, (int)done,
           (int)kept, (int)skipped, (int)loom_profile_db_count(db));
    if (n_diff > 0)
        printf("CUDA events vs CUPTI kernel time: median %+.2f%%, p10 %+.2f%%, p90 %+.2f%%\n",
               100 * loom_quantile(diff, n_diff, 0.5), 100 * loom_quantile(diff, n_diff, 0.1),
               100 * loom_quantile(diff, n_diff, 0.9));
    if (interrupted) {
        fprintf(stderr, "loom-profile: interrupted; rerun with --resume to finish\n");
        rc = 1;
    }
    free(diff);
    loom_profile_db_destroy(db);
    return rc;
}

static int run_layer_check(const options *o, loom_gpu *g)
{
    loom_error err;
    loom_graph *gr = NULL;
    loom_status s = load_model(o, &gr, &err);
    if (s) return fail(&err);
    int32_t first, count, n = 0;
    if (o->layer >= loom_graph_layer_count(gr)) {
        loom_error_set(&err, LOOM_ERR_INVALID, "layer %lld: the model has layers 0..%d",
                       (long long)o->layer, (int)loom_graph_layer_count(gr) - 1);
        loom_graph_destroy(gr);
        return fail(&err);
    }
    loom_graph_layer_ops(gr, (int32_t)o->layer, &first, &count);
    loom_profile_key *keys = calloc((size_t)count + 1, sizeof *keys);
    loom_profile_entry *per = calloc((size_t)count + 1, sizeof *per);
    int32_t *ids = calloc((size_t)count + 1, sizeof *ids);
    loom_gpu_op **ops = calloc((size_t)count + 1, sizeof *ops);
    int rc = 1;
    loom_layer_check lc;
    if (!keys || !per || !ids || !ops) {
        loom_error_set(&err, LOOM_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((s = loom_profile_layer_keys(gr, (int32_t)o->layer, o->tp, keys, ids, &n, &err))) goto done;
    for (int32_t i = 0; i < n; i++)
        if ((s = loom_gpu_op_create(g, &keys[i], o->prof.seed + (uint64_t)i, &ops[i], &err))) {
            loom_error_prefix(&err, "op %s", loom_graph_op(gr, ids[i])->name);
            goto done;
        }
    if ((s = loom_profile_layer(g, ops, keys, n, &o->prof, per, &lc, &err))) goto done;
    printf("layer %lld of %s (seq %lld, batch %lld, %s, TP %lld) on %s\n", (long long)o->layer,
           loom_graph_name(gr), (long long)o->seq, (long long)o->batch, loom_dtype_name(o->dtype),
           (long long)o->tp, loom_gpu_info_of(g)->name);
    printf("  %-48s %12s %12s\n", "op", "fwd us", "bwd us");
    for (int32_t i = 0; i < n; i++)
        printf("  %-48s %12.1f %12.1f\n", loom_graph_op(gr, ids[i])->name, (double)per[i].fwd_ns / 1e3,
               (double)per[i].bwd_ns / 1e3);
    printf("  %-48s %12.1f %12.1f\n", "sum of ops, each alone", lc.sum_fwd_ns / 1e3, lc.sum_bwd_ns / 1e3);
    printf("  %-48s %12.1f %12.1f\n", "layer back to back: span (CUPTI)", lc.span_fwd_ns / 1e3, lc.span_bwd_ns / 1e3);
    printf("  %-48s %12.1f %12.1f\n", "layer back to back: kernel busy (CUPTI)", lc.busy_fwd_ns / 1e3, lc.busy_bwd_ns / 1e3);
    printf("  %-48s %12.1f %12.1f\n", "layer back to back: CUDA events", lc.events_fwd_ns / 1e3, lc.events_bwd_ns / 1e3);
    printf("composability error (layer span / sum of ops - 1): %+.2f%%\n", 100 * lc.error);
    rc = 0;
done:
    if (rc) fail(&err);
    for (int32_t i = 0; ops && i < n; i++) loom_gpu_op_destroy(ops[i]);
    free(ops);
    free(ids);
    free(per);
    free(keys);
    loom_graph_destroy(gr);
    return rc;
}

/* Roofline vs the db's measurements, per op kind. No GPU involved. */
static int run_roofline_check(const options *o)
{
    loom_error err;
    loom_cluster c;
    loom_graph *g = NULL;
    loom_profile_db *db = NULL;
    loom_roofline_row rows[LOOM_OP_KIND_COUNT];
    int n = 0, rc = 1;
    int64_t max_tp;
    if (loom_cluster_load(o->cluster, &c, &err) || load_model(o, &g, &err) ||
        loom_profile_db_load(o->roofline, &db, &err))
        goto done;
    max_tp = o->max_tp ? o->max_tp : (c.gpus_per_node < 63 ? c.gpus_per_node : 63);
    if (loom_roofline_check(g, &c, db, max_tp, rows, &n, &err)) goto done;
    printf("roofline (%s, default calibration) vs %s measured on %s; %s seq %lld batch %lld, TP 1..%lld\n",
           c.gpu.name, o->roofline, loom_profile_db_device(db), loom_graph_name(g), (long long)o->seq,
           (long long)o->batch, (long long)max_tp);
    printf("  %-14s %5s %12s %13s %10s %14s %14s\n", "op", "keys", "median err", "median |err|",
           "max |err|", "measured ms", "roofline ms");
    for (int i = 0; i < n; i++)
        printf("  %-14s %5d %+11.1f%% %12.1f%% %9.1f%% %14.3f %14.3f\n", rows[i].op, (int)rows[i].n,
               100 * rows[i].median_err, 100 * rows[i].median_abs_err, 100 * rows[i].max_abs_err,
               1e3 * rows[i].measured_s, 1e3 * rows[i].roofline_s);
    if (n == 0) printf("  (no op of the model has a measured key in %s)\n", o->roofline);
    rc = 0;
done:
    if (rc) fail(&err);
    loom_profile_db_destroy(db);
    loom_graph_destroy(g);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (o.roofline) return run_roofline_check(&o);
    loom_error err;
    loom_profile_key *keys = NULL;
    int32_t n = 0;
    char source[256];
    if (!o.layer_check) {
        if (gather_keys(&o, &keys, &n, source, sizeof source, &err)) return fail(&err);
        if (o.emit) {
            rc = loom_profile_requests_write(o.emit, source, keys, n, &err) ? fail(&err) : 0;
            if (!rc) printf("%s: %d profile requests (%s)\n", o.emit, (int)n, source);
            free(keys);
            return rc;
        }
    }
    loom_gpu_info info;
    loom_gpu *g = NULL;
    if (loom_gpu_probe((int)o.device, &info, &err) || loom_gpu_create((int)o.device, &g, &err) ||
        loom_cupti_start(&err)) {
        free(keys);
        loom_gpu_destroy(g);
        return fail(&err);
    }
    signal(SIGINT, on_sigint);
    rc = o.layer_check ? run_layer_check(&o, g) : run_profile(&o, g, keys, n);
    loom_cupti_stop();
    loom_gpu_destroy(g);
    free(keys);
    return rc;
}
