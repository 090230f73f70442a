/*
 * cmd_calibrate.c — `loom calibrate RECORDS.json`: fit the cost model's
 * efficiencies to measured training runs (costs/calib_fit.h) and write a
 * loom-calib/1 file; with --evaluate, print predicted vs measured iteration
 * time of every record under a calibration instead (bench/accuracy).
 *
 *   loom calibrate runs.json [--gpu NAME] [-o calib.json]
 *   loom calibrate runs.json --evaluate [--calib FILE] [--json]
 *
 * A calibration is per GPU: records of other GPUs are ignored by the fit
 * (--gpu picks one when the file has several). Without -o the calibration
 * goes to stdout; the fit summary always goes to stderr.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/calib.h"
#include "costs/calib_fit.h"
#include "costs/device.h"
#include "base/json.h"
#include "planner/cli/cli.h"

typedef struct {
    const char *records, *out, *gpu, *calib;
    bool eval_only, json;
} calibrate_args;

static void calibrate_args_init(void *p) { memset(p, 0, sizeof(calibrate_args)); }

#define F(m) LOOM_CLI_FIELD(calibrate_args, m)
static const loom_cli_option calibrate_opts[] = {
    {.name = "--gpu", .kind = LOOM_CLI_STR, .field = F(gpu), .metavar = "NAME",
     .help = "fit the records of this GPU (needed when the file has several)"},
    {.short_name = "-o", .kind = LOOM_CLI_STR, .field = F(out), .metavar = "FILE",
     .help = "write the calibration there (atomically)", .def = "stdout"},
    {.name = "--evaluate", .kind = LOOM_CLI_FLAG, .field = F(eval_only),
     .help = "fit nothing: print predicted vs measured time of every record"},
    {.name = "--calib", .kind = LOOM_CLI_STR, .field = F(calib), .metavar = "F",
     .help = "with --evaluate: the calibration to use", .def = "shipped values"},
    {.name = "--json", .kind = LOOM_CLI_FLAG, .field = F(json),
     .help = "with --evaluate: one JSON object"},
};

const loom_cli_spec loom_cli_spec_calibrate = {
    .cmd = "calibrate",
    .usage = "usage: loom calibrate RECORDS.json [--gpu NAME] [-o calib.json]\n"
             "       loom calibrate RECORDS.json --evaluate [--calib FILE] [--json]\n",
    .about = "Fits the cost model's efficiencies (large-GEMM efficiency and its size roll-off, HBM\n"
             "efficiency, flash-attention efficiency, NVLink efficiency, overlap of the gradient\n"
             "sync) to measured iteration times, minimising squared log errors, and writes a\n"
             "loom-calib/1 file for `loom eval --calib` (stdout without -o).\n"
             "Serving runs have their own fit: loom calibrate --serving RECORDS (its -h).\n",
    .opts = calibrate_opts,
    .n_opts = sizeof calibrate_opts / sizeof calibrate_opts[0],
    .pos = {.metavar = "RECORDS.json", .field = F(records), .max = 1, .noun = "RECORDS file",
            .help = "measured runs, in the examples/calibration/published-runs.json format"},
    .args_size = sizeof(calibrate_args),
    .init = calibrate_args_init,
};
#undef F

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int evaluate(const char *file, const loom_calib_record *r, size_t n,
                    const loom_calib *cal, bool json)
{
    loom_error err = {0};
    double *pred = calloc(n, sizeof *pred), *abs_err = calloc(n, sizeof *abs_err);
    if (!pred || !abs_err) {
        free(pred);
        free(abs_err);
        fprintf(stderr, "loom calibrate: out of memory\n");
        return LOOM_EXIT_FAIL;
    }
    if (loom_calib_predict(r, n, cal, pred, &err)) {
        free(pred);
        free(abs_err);
        return loom_cli_fail(&err);
    }
    for (size_t i = 0; i < n; i++) abs_err[i] = fabs(pred[i] / r[i].measured_s - 1);
    double *sorted = malloc(n * sizeof *sorted);
    if (sorted) {
        memcpy(sorted, abs_err, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, cmp_double);
    }
    double median = !sorted ? 0 : n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    double max = sorted ? sorted[n - 1] : 0;
    free(sorted);
    if (json) {
        cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "records");
        cJSON_AddStringToObject(o, "records_file", file);
        for (size_t i = 0; i < n; i++) {
            const loom_parallel *p = &r[i].par;
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "model", r[i].model);
            cJSON_AddStringToObject(e, "gpu", r[i].gpu);
            cJSON_AddNumberToObject(e, "gpus", (double)r[i].gpus);
            char cfg[160];
            snprintf(cfg, sizeof cfg, "tp%lld pp%lld dp%lld%s mbs%lld gbs%lld%s %s%s",
                     (long long)p->tp, (long long)p->pp, (long long)p->dp,
                     p->vpp > 1 ? " vpp" : "", (long long)p->mbs, (long long)p->gbs,
                     p->sp ? " sp" : "", loom_recompute_name(p->recompute),
                     p->flash ? " flash" : " unfused");
            cJSON_AddStringToObject(e, "config", cfg);
            cJSON_AddNumberToObject(e, "measured_s", r[i].measured_s);
            cJSON_AddNumberToObject(e, "predicted_s", pred[i]);
            cJSON_AddNumberToObject(e, "error", pred[i] / r[i].measured_s - 1);
            cJSON_AddStringToObject(e, "assumed", r[i].assumed);
            cJSON_AddItemToArray(arr, e);
        }
        cJSON_AddNumberToObject(o, "median_abs_error", median);
        cJSON_AddNumberToObject(o, "max_abs_error", max);
        char *text = loom_json_print(o);
        cJSON_Delete(o);
        if (text) fputs(text, stdout);
        free(text);
    } else {
        printf("%-12s %-15s %-34s %10s %10s %8s\n", "model", "gpu", "configuration", "measured",
               "predicted", "error");
        for (size_t i = 0; i < n; i++) {
            const loom_parallel *p = &r[i].par;
            char cfg[96];
            snprintf(cfg, sizeof cfg, "tp%lld pp%lld dp%lld v%lld mbs%lld %s%s",
                     (long long)p->tp, (long long)p->pp, (long long)p->dp, (long long)p->vpp,
                     (long long)p->mbs, loom_recompute_name(p->recompute), p->sp ? " sp" : "");
            printf("%-12s %-15s %-34s %9.3fs %9.3fs %+7.1f%%\n", r[i].model, r[i].gpu, cfg,
                   r[i].measured_s, pred[i], 100 * (pred[i] / r[i].measured_s - 1));
        }
        printf("\n%zu records: median |error| %.1f%%, max %.1f%%\n", n, 100 * median, 100 * max);
    }
    free(pred);
    free(abs_err);
    return LOOM_EXIT_OK;
}

int loom_cmd_calibrate(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)   /* serving records: their own fit (cmd_calibrate_serve.c) */
        if (!strcmp(argv[i], "--serving")) return loom_cmd_calibrate_serve(argc, argv);
    calibrate_args args;
    int prc = loom_cli_parse(&loom_cli_spec_calibrate, argc, argv, &args);
    if (prc != LOOM_CLI_RUN) return prc;
    const char *records = args.records, *out = args.out, *gpu = args.gpu, *calib = args.calib;
    bool eval_only = args.eval_only, json = args.json;
    if (!records) return loom_cli_usage_error("calibrate", "missing RECORDS.json");
    if (eval_only && (out || gpu))
        return loom_cli_usage_error("calibrate", "--evaluate fits nothing: -o and --gpu do not apply");
    if (!eval_only && (calib || json))
        return loom_cli_usage_error("calibrate", "--calib and --json go with --evaluate");

    const loom_cli_path ins[] = {{"RECORDS", records}, {"--calib", calib}};
    const loom_cli_path outs[] = {{"-o", out}};
    int bad = loom_cli_check_outputs("calibrate", ins, 2, outs, 1);
    if (bad) return bad;

    loom_error err = {0};
    loom_calib_record *r = NULL;
    size_t n = 0;
    if (loom_calib_records_load(records, &r, &n, &err)) return loom_cli_fail(&err);
    int rc;
    if (eval_only) {
        loom_calib cal;
        if (calib && loom_calib_load(calib, &cal, &err)) {
            free(r);
            return loom_cli_fail(&err);
        }
        rc = evaluate(records, r, n, calib ? &cal : NULL, json);
        free(r);
        return rc;
    }

    /* The GPU to fit: --gpu, or the only one in the file. */
    const loom_device *d = gpu ? loom_device_find(gpu) : loom_device_find(r[0].gpu);
    if (gpu && !d) {
        char names[512];
        free(r);
        return loom_cli_usage_error("calibrate", "--gpu: unknown GPU '%s' (known: %s)", gpu,
                                    loom_device_list_names(names, sizeof names));
    }
    if (!gpu)
        for (size_t i = 1; i < n; i++)
            if (loom_device_find(r[i].gpu) != d) {
                fprintf(stderr, "loom calibrate: %s has runs on several GPUs (%s, %s, …); a "
                        "calibration is per GPU: choose one with --gpu\n", records, r[0].gpu,
                        r[i].gpu);
                free(r);
                return LOOM_EXIT_USAGE;
            }
    loom_calib cal;
    loom_calib_prior(d, &cal);
    loom_calib_fit_stats st;
    if (loom_calib_fit(r, n, d->name, &cal, &st, &err)) {
        free(r);
        return loom_cli_fail(&err);
    }
    free(r);
    fprintf(stderr, "loom calibrate: %s: fitted %s to %zu runs: rms log error %.4f, median "
            "|error| %.1f%%, max %.1f%% (%d sweeps)\n", records, d->name, st.n, st.rms_log_err,
            100 * st.median_abs_err, 100 * st.max_abs_err, st.sweeps);
    if (loom_calib_save(out ? out : "-", &cal, &err)) return loom_cli_fail(&err);
    return LOOM_EXIT_OK;
}
