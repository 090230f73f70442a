/*
 * cmd_calibrate_serve.c — `loom calibrate --serving RECORDS.json`: fit the
 * serving calibration (costs/serve/fit.h) to published serving runs and
 * write a loom-serve-calib/1 file; with --evaluate, print predicted vs
 * published metrics of every record, the median and max |error| per metric,
 * and with --loso the same leave-one-source-out (each source predicted by a
 * fit of the others). bench/serve_accuracy.sh runs it.
 *
 *   loom calibrate --serving runs.json [-o serve-calib.json]
 *   loom calibrate --serving runs.json --evaluate [--loso] [--steady]
 *                  [--serve-calib FILE] [--json]
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "costs/serve/fit.h"
#include "graph/model.h"
#include "planner/cli/cli.h"

typedef struct {
    const char *records, *out, *serve_calib;
    bool serving, evaluate, loso, steady, json;
} cal_args;

static void cal_args_init(void *p) { memset(p, 0, sizeof(cal_args)); }

#define F(f) LOOM_CLI_FIELD(cal_args, f)
static const loom_cli_option cal_opts[] = {
    {.name = "--serving", .kind = LOOM_CLI_FLAG, .field = F(serving),
     .help = "the records are serving runs (this command)"},
    {.name = "--output", .short_name = "-o", .kind = LOOM_CLI_STR, .field = F(out),
     .metavar = "FILE", .help = "write the calibration there (atomically)", .def = "stdout"},
    {.name = "--evaluate", .kind = LOOM_CLI_FLAG, .field = F(evaluate),
     .help = "fit nothing: predicted vs published metrics of every record"},
    {.name = "--loso", .kind = LOOM_CLI_FLAG, .field = F(loso),
     .help = "with --evaluate: also leave-one-source-out (refit without each source)"},
    {.name = "--steady", .kind = LOOM_CLI_FLAG, .field = F(steady),
     .help = "with --evaluate: the steady-state estimate instead of the simulator"},
    {.name = "--serve-calib", .kind = LOOM_CLI_STR, .field = F(serve_calib), .metavar = "FILE",
     .help = "with --evaluate: the serving calibration to use",
     .def = "a fit of all the records (in-sample)"},
    {.name = "--json", .kind = LOOM_CLI_FLAG, .field = F(json),
     .help = "with --evaluate: one JSON object"},
};

const loom_cli_spec loom_cli_spec_calibrate_serve = {
    .cmd = "calibrate",
    .usage = "usage: loom calibrate --serving RECORDS.json [-o serve-calib.json]\n"
             "       loom calibrate --serving RECORDS.json --evaluate [--loso] [--steady]\n"
             "                      [--serve-calib FILE] [--json]\n",
    .about = "Fits the serving efficiencies (decode HBM efficiency, prefill GEMM and attention\n"
             "efficiency, small all-reduce latency, kernel gaps, per-iteration overhead of each\n"
             "engine, per-sequence overhead) to published serving runs, separately from the\n"
             "training fit, and writes a loom-serve-calib/1 file for `loom eval --serve-calib`.\n"
             "The fit runs the steady-state estimate; each record's TTFT is scaled by the\n"
             "simulator's ratio to it (one simulation per record before fitting), so that the\n"
             "queue of clients that start together is matched as benchmarks report it.\n"
             "RECORDS.json is in the examples/calibration/serving-runs.json format.\n",
    .opts = cal_opts,
    .n_opts = sizeof cal_opts / sizeof cal_opts[0],
    .pos = {.metavar = "RECORDS.json", .field = F(records), .max = 1, .noun = "RECORDS file",
            .help = "published serving runs"},
    .args_size = sizeof(cal_args),
    .init = cal_args_init,
};
#undef F

/* The metrics the table reports, in order. */
static const loom_serve_metric shown[] = {LOOM_SM_TTFT, LOOM_SM_TTFT_P99, LOOM_SM_TPOT,
                                          LOOM_SM_ITL, LOOM_SM_ITL_P99, LOOM_SM_E2E,
                                          LOOM_SM_OUT_TPS, LOOM_SM_RPS, LOOM_SM_TTFT_P50,
                                          LOOM_SM_TPOT_P50, LOOM_SM_ITL_P50, LOOM_SM_E2E_P50};
#define N_SHOWN (sizeof shown / sizeof shown[0])

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Cases of the records: each record's model (its hf_id, else its name) as
 * a bundled config, its cluster. Records whose model is not bundled are
 * skipped with a note. */
typedef struct {
    loom_serve_case *cases;
    loom_graph **graphs;
    size_t n;
} case_set;

static void cases_free(case_set *cs)
{
    for (size_t i = 0; i < cs->n; i++) loom_graph_destroy(cs->graphs[i]);
    free(cs->graphs);
    free(cs->cases);
}

static int build_cases(const loom_serve_record *r, size_t n, case_set *cs)
{
    memset(cs, 0, sizeof *cs);
    cs->cases = calloc(n ? n : 1, sizeof *cs->cases);
    cs->graphs = calloc(n ? n : 1, sizeof *cs->graphs);
    if (!cs->cases || !cs->graphs) return LOOM_EXIT_FAIL;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        if (r[i].skip[0]) {
            fprintf(stderr, "loom calibrate: note: record %zu skipped: %s\n", i, r[i].skip);
            continue;
        }
        if (!(r[i].hf_id[0] && loom_cli_find_model_id(r[i].hf_id, path, sizeof path)) &&
            !loom_cli_find_model_id(r[i].model, path, sizeof path)) {
            fprintf(stderr, "loom calibrate: note: record %zu (%s): model '%s' is not bundled; "
                    "skipped\n", i, r[i].source, r[i].hf_id[0] ? r[i].hf_id : r[i].model);
            continue;
        }
        loom_model_opts mo;
        loom_model_opts_init(&mo);
        mo.seq = 1;
        mo.batch = 1;
        loom_error err = {0};
        loom_graph *g = NULL;
        if (loom_model_load(path, &mo, &g, &err)) return loom_cli_fail(&err);
        char cl[64];
        const loom_device *d = loom_device_find(r[i].gpu);
        const char *fam = strstr(d->name, "H200") ? "dgx-h200" : strstr(d->name, "B200") ? "dgx-b200"
                          : strstr(d->name, "A100-SXM4-40") ? "dgx-a100-40g"
                          : strstr(d->name, "A100") ? "dgx-a100-80g" : "dgx-h100";
        int64_t nodes = (r[i].num_gpus + 7) / 8;
        snprintf(cl, sizeof cl, "%s-x%lld", fam, (long long)(nodes > 0 ? nodes : 1));
        loom_serve_case *c = &cs->cases[cs->n];
        if (loom_cluster_preset(cl, &c->cluster, &err)) {
            loom_graph_destroy(g);
            return loom_cli_fail(&err);
        }
        c->cluster.gpu = *d;
        c->rec = &r[i];
        c->graph = g;
        cs->graphs[cs->n++] = g;
    }
    return LOOM_EXIT_OK;
}

/* Records of one publisher are one source for leave-one-source-out: the
 * source text up to its first comma ("GPUStack Performance Lab", "NVIDIA
 * NIM for LLMs Benchmarking Guide"), so that the pages of one lab do not
 * vouch for each other. */
static bool same_source(const char *a, const char *b)
{
    size_t la = strcspn(a, ","), lb = strcspn(b, ",");
    return la == lb && strncmp(a, b, la) == 0;
}

/* predicted[i][k] of every case under cal (fit per held-out source when
 * loso): -1 where a case cannot be predicted. */
static int predict_all(const case_set *cs, const loom_serve_calib *cal, bool loso, bool simulate,
                       double (*pred)[LOOM_SM_COUNT])
{
    for (size_t i = 0; i < cs->n; i++)
        for (int k = 0; k < LOOM_SM_COUNT; k++) pred[i][k] = -1;
    bool *use = calloc(cs->n ? cs->n : 1, 1), *done = calloc(cs->n ? cs->n : 1, 1);
    if (!use || !done) {
        free(use);
        free(done);
        return LOOM_EXIT_FAIL;
    }
    for (size_t i = 0; i < cs->n; i++) {
        if (done[i]) continue;
        loom_serve_calib c = *cal;
        const char *src = cs->cases[i].rec->source;
        if (loso) {
            for (size_t j = 0; j < cs->n; j++) use[j] = !same_source(cs->cases[j].rec->source, src);
            loom_serve_calib_prior(NULL, &c);
            loom_error err = {0};
            if (loom_serve_fit(cs->cases, cs->n, use, &c, NULL, &err)) {
                free(use);
                free(done);
                return loom_cli_fail(&err);
            }
        }
        for (size_t j = i; j < cs->n; j++) {
            if (done[j] || (loso && !same_source(cs->cases[j].rec->source, src))) continue;
            if (!loso && j != i) continue;
            done[j] = true;
            loom_serve_metrics m;
            loom_error err = {0};
            if (loom_serve_case_predict(&cs->cases[j], &c, simulate, &m, &err)) {
                fprintf(stderr, "loom calibrate: note: record %s/%s: %s\n",
                        cs->cases[j].rec->source, cs->cases[j].rec->source_id, err.msg);
                continue;
            }
            for (int k = 0; k < LOOM_SM_COUNT; k++)
                pred[j][k] = loom_serve_metric_of(&m, (loom_serve_metric)k);
        }
    }
    free(use);
    free(done);
    return LOOM_EXIT_OK;
}

/* median and max |error| of metric k over the cases (count in *n). */
static void summary(const case_set *cs, double (*pred)[LOOM_SM_COUNT], loom_serve_metric k,
                    double *med, double *mx, int *n)
{
    double *e = malloc((cs->n ? cs->n : 1) * sizeof *e);
    int c = 0;
    for (size_t i = 0; e && i < cs->n; i++) {
        double meas = cs->cases[i].rec->measured[k];
        if (meas > 0 && pred[i][k] > 0) e[c++] = fabs(pred[i][k] / meas - 1);
    }
    *n = c;
    *med = *mx = 0;
    if (c > 0) {
        qsort(e, (size_t)c, sizeof *e, cmp_d);
        *med = c % 2 ? e[c / 2] : (e[c / 2 - 1] + e[c / 2]) / 2;
        *mx = e[c - 1];
    }
    free(e);
}

static int evaluate(const cal_args *a, const case_set *cs, const loom_serve_calib *cal)
{
    size_t n = cs->n ? cs->n : 1;
    double (*in)[LOOM_SM_COUNT] = calloc(n, sizeof *in);
    double (*lo)[LOOM_SM_COUNT] = calloc(n, sizeof *lo);
    int rc = LOOM_EXIT_FAIL;
    if (!in || !lo) goto done;
    if ((rc = predict_all(cs, cal, false, !a->steady, in))) goto done;
    if (a->loso && (rc = predict_all(cs, cal, true, !a->steady, lo))) goto done;
    if (a->json) {
        cJSON *o = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(o, "records");
        cJSON_AddStringToObject(o, "predictor", a->steady ? "steady-state" : "simulator");
        for (size_t i = 0; i < cs->n; i++) {
            const loom_serve_record *r = cs->cases[i].rec;
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "source", r->source);
            cJSON_AddStringToObject(x, "source_id", r->source_id);
            cJSON_AddNumberToObject(x, "index", (double)r->index);
            cJSON_AddStringToObject(x, "model", r->model);
            cJSON_AddStringToObject(x, "engine", loom_engine_name(r->engine));
            cJSON_AddStringToObject(x, "gpu", r->gpu);
            cJSON_AddNumberToObject(x, "num_gpus", (double)r->num_gpus);
            for (size_t s = 0; s < N_SHOWN; s++) {
                loom_serve_metric k = shown[s];
                if (!(r->measured[k] > 0)) continue;
                cJSON *m = cJSON_AddObjectToObject(x, loom_serve_metric_key(k));
                cJSON_AddNumberToObject(m, "published", r->measured[k]);
                if (in[i][k] > 0) cJSON_AddNumberToObject(m, "predicted", in[i][k]);
                if (a->loso && lo[i][k] > 0) cJSON_AddNumberToObject(m, "predicted_loso", lo[i][k]);
            }
            cJSON_AddItemToArray(rows, x);
        }
        cJSON *sum = cJSON_AddObjectToObject(o, "summary");
        for (size_t s = 0; s < N_SHOWN; s++) {
            double med, mx;
            int cnt;
            cJSON *m = cJSON_AddObjectToObject(sum, loom_serve_metric_key(shown[s]));
            summary(cs, in, shown[s], &med, &mx, &cnt);
            cJSON_AddNumberToObject(m, "n", cnt);
            cJSON_AddNumberToObject(m, "median_abs_err", med);
            cJSON_AddNumberToObject(m, "max_abs_err", mx);
            if (a->loso) {
                summary(cs, lo, shown[s], &med, &mx, &cnt);
                cJSON_AddNumberToObject(m, "loso_median_abs_err", med);
                cJSON_AddNumberToObject(m, "loso_max_abs_err", mx);
            }
        }
        char *text = loom_json_print(o);
        cJSON_Delete(o);
        if (text) fputs(text, stdout);
        free(text);
        rc = text ? LOOM_EXIT_OK : LOOM_EXIT_FAIL;
        goto done;
    }
    printf("%-28s %-7s %-10s %4s", "source/id", "engine", "gpu", "gpus");
    for (size_t s = 0; s < N_SHOWN; s++) printf(" %13s", loom_serve_metric_label(shown[s]));
    printf("\n");
    for (size_t i = 0; i < cs->n; i++) {
        const loom_serve_record *r = cs->cases[i].rec;
        char id[64];
        snprintf(id, sizeof id, "%.14s/%.12s", r->source, r->source_id);
        printf("%-28s %-7s %-10.10s %4lld", id, loom_engine_name(r->engine), r->gpu,
               (long long)r->num_gpus);
        for (size_t s = 0; s < N_SHOWN; s++) {
            loom_serve_metric k = shown[s];
            if (r->measured[k] > 0 && in[i][k] > 0)
                printf("   %+9.0f%% ", 100 * (in[i][k] / r->measured[k] - 1));
            else printf(" %13s", "-");
        }
        printf("\n");
    }
    printf("\n%-16s %5s %12s %12s", "metric", "n", "median |err|", "max |err|");
    if (a->loso) printf(" %14s %12s", "LOSO median", "LOSO max");
    printf("\n");
    for (size_t s = 0; s < N_SHOWN; s++) {
        double med, mx;
        int cnt;
        summary(cs, in, shown[s], &med, &mx, &cnt);
        printf("%-16s %5d %11.1f%% %11.1f%%", loom_serve_metric_label(shown[s]), cnt, 100 * med,
               100 * mx);
        if (a->loso) {
            summary(cs, lo, shown[s], &med, &mx, &cnt);
            printf(" %13.1f%% %11.1f%%", 100 * med, 100 * mx);
        }
        printf("\n");
    }
    rc = LOOM_EXIT_OK;
done:
    free(in);
    free(lo);
    return rc;
}

int loom_cmd_calibrate_serve(int argc, char **argv)
{
    cal_args a;
    int rc = loom_cli_parse(&loom_cli_spec_calibrate_serve, argc, argv, &a);
    if (rc != LOOM_CLI_RUN) return rc;
    if (!a.records) return loom_cli_usage_error("calibrate", "missing RECORDS.json");
    if ((a.loso || a.steady || a.json || a.serve_calib) && !a.evaluate)
        return loom_cli_usage_error("calibrate", "--loso, --steady, --serve-calib and --json go "
                                    "with --evaluate");
    loom_error err = {0};
    loom_serve_record *recs = NULL;
    size_t n = 0;
    if (loom_serve_records_load(a.records, &recs, &n, &err)) return loom_cli_fail(&err);
    case_set cs;
    if ((rc = build_cases(recs, n, &cs)) != LOOM_EXIT_OK) goto done;
    loom_serve_calib cal;
    if (!a.serve_calib || a.loso) {   /* a fit will run: its TTFT anchor, at the prior */
        loom_serve_calib_prior(NULL, &cal);
        loom_serve_cases_anchor(cs.cases, cs.n, &cal);
    }
    if (a.serve_calib) {
        if (loom_serve_calib_load(a.serve_calib, &cal, &err)) {
            rc = loom_cli_fail(&err);
            goto done;
        }
    } else if (a.evaluate) {   /* in-sample: the fit of every record */
        loom_serve_calib_prior(NULL, &cal);
        if (loom_serve_fit(cs.cases, cs.n, NULL, &cal, NULL, &err)) {
            rc = loom_cli_fail(&err);
            goto done;
        }
    }
    if (a.evaluate) {
        rc = evaluate(&a, &cs, &cal);
        goto done;
    }
    loom_serve_calib_prior(NULL, &cal);
    double L = 0;
    if (loom_serve_fit(cs.cases, cs.n, NULL, &cal, &L, &err)) {
        rc = loom_cli_fail(&err);
        goto done;
    }
    snprintf(cal.note, sizeof cal.note, "fit of %zu serving runs in %s", cs.n, a.records);
    fprintf(stderr, "loom calibrate: %zu serving records, loss %.4f\n", cs.n, L);
    for (int k = 0; k < LOOM_SERVE_CALIB_NFIELDS; k++)
        fprintf(stderr, "  %-16s %.6g\n", loom_serve_calib_field_name(k),
                *loom_serve_calib_field(&cal, k));
    if (a.out) {
        if (loom_serve_calib_save(a.out, &cal, &err)) rc = loom_cli_fail(&err);
        else rc = LOOM_EXIT_OK;
    } else {
        char *text = loom_serve_calib_json(&cal);
        if (text) fputs(text, stdout);
        rc = text ? LOOM_EXIT_OK : LOOM_EXIT_FAIL;
        free(text);
    }
done:
    cases_free(&cs);
    free(recs);
    return rc;
}
