/*
 * compare_json.c — the JSON side of `loom compare` (compare.h): reading a
 * loom-suite/1 suite, writing and reading loom-compare/1 reports, and
 * merging the reports of shards.
 *
 * Everything a report prints (markdown, CSV, SVG) is in its JSON, and
 * doubles are written shortest-round-trip (loom_json_print), so a report
 * read back is the report that was written, bit for bit: that is what
 * makes `compare-merge` of N shards byte-identical to one unsharded run.
 * A gap that does not exist (a plan that does not fit) is null.
 *
 * Reading goes through base/json: line:col for malformed JSON, duplicate
 * keys, unknown members with the allowed list, integer ranges, and every
 * message names the file and the JSON path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/cluster.h"
#include "base/json.h"
#include "planner/cli/cli.h"
#include "planner/compare/compare.h"

#define TRY(x)                   \
    do {                         \
        if ((s = (x))) goto done; \
    } while (0)

/* ---- the suite ------------------------------------------------------------------------------ */

/* A model or cluster value: relative to the suite's folder, as given, or a
 * bundled name (examples/<kind>/). */
static bool resolve(const char *suite_path, const char *v, const char *kind, char *out, size_t n)
{
    if (v[0] != '/') {
        const char *slash = strrchr(suite_path, '/');
        if (slash) {
            char p[LOOM_COMPARE_PATH_MAX];
            int w = snprintf(p, sizeof p, "%.*s/%s", (int)(slash - suite_path), suite_path, v);
            FILE *f = w > 0 && (size_t)w < sizeof p ? fopen(p, "r") : NULL;
            if (f) {
                fclose(f);
                snprintf(out, n, "%s", p);
                return true;
            }
        }
    }
    return loom_cli_find_data(v, kind, out, n);
}

typedef struct {
    int64_t gbs, seq;
    const char *mode, *objective, *dtype;
    double latency_bound_ms;
} case_fields;

static loom_status read_fields(const loom_jctx *c, const cJSON *o, const char *path,
                               case_fields *f)
{
    loom_status s;
    TRY(loom_json_get_int(c, o, path, "gbs", false, 1, (int64_t)1 << 30, &f->gbs));
    TRY(loom_json_get_int(c, o, path, "seq", false, 1, LOOM_MODEL_MAX_SEQ, &f->seq));
    TRY(loom_json_get_str(c, o, path, "mode", false, &f->mode));
    TRY(loom_json_get_str(c, o, path, "objective", false, &f->objective));
    TRY(loom_json_get_str(c, o, path, "dtype", false, &f->dtype));
    TRY(loom_json_get_num(c, o, path, "latency_bound_ms", false, 0, 1e9, &f->latency_bound_ms));
done:
    return s;
}

/* Fails at PATH.key. */
static loom_status fail_at(const loom_jctx *c, const char *path, const char *key, const char *fmt,
                           const char *a, const char *b)
{
    char p[96];
    snprintf(p, sizeof p, "%s.%s", path, key);
    return loom_json_fail(c, p, fmt, a, b);
}

static loom_status read_case(const loom_jctx *c, const char *file, const cJSON *o,
                             const char *path, const case_fields *defaults, int32_t index,
                             loom_compare_case *out)
{
    static const char *const keys[] = {"name", "model", "cluster", "gbs", "seq", "mode",
                                       "objective", "dtype", "latency_bound_ms", NULL};
    loom_status s;
    const char *name = NULL, *model = NULL, *cluster = NULL;
    case_fields f = *defaults;
    memset(out, 0, sizeof *out);
    out->index = index;
    TRY(loom_json_check_keys(c, o, path, keys));
    TRY(loom_json_get_str(c, o, path, "name", true, &name));
    TRY(loom_json_get_str(c, o, path, "model", true, &model));
    TRY(loom_json_get_str(c, o, path, "cluster", true, &cluster));
    TRY(read_fields(c, o, path, &f));
    if (!name[0] || strlen(name) >= sizeof out->name || strpbrk(name, "|,\"\n"))
        return fail_at(c, path, "name", "expected 1 to 63 characters without | , \" or "
                       "newlines, found \"%s\"%s", name, "");
    if (strlen(model) >= sizeof out->model || strlen(cluster) >= sizeof out->cluster)
        return fail_at(c, path, strlen(model) >= sizeof out->model ? "model" : "cluster",
                       "longer than %s characters%s", "1023", "");
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->model, sizeof out->model, "%s", model);
    snprintf(out->cluster, sizeof out->cluster, "%s", cluster);
    if (f.gbs < 1) return fail_at(c, path, "gbs", "missing, and no default%s%s", "", "");
    out->gbs = f.gbs;
    out->seq = f.seq;
    if (!loom_plan_mode_parse(f.mode, &out->mode))
        return fail_at(c, path, "mode", "expected \"train\" or \"infer\", found \"%s\"%s", f.mode,
                       "");
    const char *obj = f.objective ? f.objective : out->mode == LOOM_PLAN_TRAIN ? "time" : "latency";
    bool infer_obj = !strcmp(obj, "latency") || !strcmp(obj, "throughput");
    if (!loom_problem_objective_parse(obj, &out->objective) ||
        infer_obj != (out->mode == LOOM_PLAN_INFER))
        return fail_at(c, path, "objective", "expected %s, found \"%s\"",
                       out->mode == LOOM_PLAN_TRAIN ? "time, cost or energy for mode train"
                                                    : "latency or throughput for mode infer",
                       obj);
    if (!loom_dtype_parse(f.dtype, &out->dtype) ||
        (out->dtype != LOOM_DTYPE_BF16 && out->dtype != LOOM_DTYPE_FP16 &&
         out->dtype != LOOM_DTYPE_FP8 && out->dtype != LOOM_DTYPE_FP32))
        return fail_at(c, path, "dtype", "expected bf16, fp16, fp32 or fp8, found \"%s\"%s",
                       f.dtype, "");
    out->latency_bound_s = f.latency_bound_ms / 1e3;
    if (!resolve(file, model, "models", out->model_path, sizeof out->model_path))
        return fail_at(c, path, "model", "'%s' is neither a file (relative to the suite) nor a "
                       "bundled model%s", model, "");
    if (loom_cluster_is_preset_name(cluster))
        snprintf(out->cluster_path, sizeof out->cluster_path, "%s", cluster);
    else if (!resolve(file, cluster, "clusters", out->cluster_path, sizeof out->cluster_path))
        return fail_at(c, path, "cluster", "'%s' is neither a preset (dgx-h100-x16, …), a file "
                       "(relative to the suite) nor a bundled cluster%s", cluster, "");
done:
    return s;
}

loom_status loom_compare_suite_read(const char *path, loom_compare_suite *out, loom_error *err)
{
    static const char *const keys[] = {"format", "name", "description", "defaults", "cases", NULL};
    static const char *const dkeys[] = {"gbs", "seq", "mode", "objective", "dtype",
                                        "latency_bound_ms", NULL};
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    loom_json_limits lim = LOOM_JSON_LIMITS_REPORT;
    loom_status s = loom_json_parse_file_limited(path, &lim, &root, err);
    if (s) return s;
    loom_jctx c = {path, err};
    const char *format = NULL, *name = NULL, *desc = NULL;
    const cJSON *defaults = NULL, *cases = NULL;
    case_fields d = {.gbs = 0, .seq = 4096, .mode = "train", .objective = NULL, .dtype = "bf16"};
    if (!cJSON_IsObject(root)) {
        s = loom_json_fail(&c, "$", "expected an object, found %s", loom_json_type_name(root));
        goto done;
    }
    TRY(loom_json_get_str(&c, root, "$", "format", true, &format));
    if (strcmp(format, LOOM_SUITE_FORMAT)) {
        s = loom_json_fail(&c, "$.format", "expected \"%s\", found \"%s\"", LOOM_SUITE_FORMAT,
                           format);
        goto done;
    }
    TRY(loom_json_check_keys(&c, root, "$", keys));
    TRY(loom_json_get_str(&c, root, "$", "name", true, &name));
    TRY(loom_json_get_str(&c, root, "$", "description", false, &desc));
    if (!name[0] || strlen(name) >= sizeof out->name) {
        s = loom_json_fail(&c, "$.name", "expected 1 to %d characters", (int)sizeof out->name - 1);
        goto done;
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    TRY(loom_json_get_object(&c, root, "$", "defaults", false, &defaults));
    if (defaults) {
        TRY(loom_json_check_keys(&c, defaults, "$.defaults", dkeys));
        TRY(read_fields(&c, defaults, "$.defaults", &d));
    }
    TRY(loom_json_get_array(&c, root, "$", "cases", true, &cases));
    int n = cJSON_GetArraySize(cases);
    if (n < 1) {
        s = loom_json_fail(&c, "$.cases", "expected at least one case");
        goto done;
    }
    out->cases = calloc((size_t)n, sizeof *out->cases);
    if (!out->cases) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, cases)
    {
        char p[48];
        snprintf(p, sizeof p, "$.cases[%d]", i);
        if (!cJSON_IsObject(it)) {
            s = loom_json_fail(&c, p, "expected an object, found %s", loom_json_type_name(it));
            goto done;
        }
        TRY(read_case(&c, path, it, p, &d, i, &out->cases[i]));
        for (int j = 0; j < i; j++)
            if (!strcmp(out->cases[j].name, out->cases[i].name)) {
                char other[32];
                snprintf(other, sizeof other, "$.cases[%d]", j);
                s = fail_at(&c, p, "name", "\"%s\" is also the name of %s", out->cases[i].name,
                            other);
                goto done;
            }
        out->n_cases = ++i;
    }
done:
    cJSON_Delete(root);
    if (s) loom_compare_suite_free(out);
    return s;
}

void loom_compare_suite_free(loom_compare_suite *s)
{
    if (!s) return;
    free(s->cases);
    s->cases = NULL;
    s->n_cases = 0;
}

/* ---- writing a report ------------------------------------------------------------------------ */

static void num(cJSON *o, const char *k, double v)
{
    if (isfinite(v)) loom_json_add_exact_number(o, k, v);   /* merged shards must match */
    else cJSON_AddNullToObject(o, k);
}

char *loom_compare_json(const loom_compare_report *r)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "format", LOOM_COMPARE_FORMAT);
    cJSON_AddStringToObject(root, "suite", r->suite);
    num(root, "suite_cases", r->suite_cases);
    num(root, "budget_s", r->budget_s);
    num(root, "max_work", (double)r->max_work);
    num(root, "max_evals", (double)r->max_evals);
    num(root, "seed", (double)r->seed);
    cJSON_AddBoolToObject(root, "timings", r->timings);
    char shard[32];
    snprintf(shard, sizeof shard, "%d/%d", (int)r->shard_k, (int)r->shard_n);
    cJSON_AddStringToObject(root, "shard", shard);
    cJSON *al = cJSON_AddArrayToObject(root, "algorithms");
    for (int32_t i = 0; i < r->n_algos; i++)
        cJSON_AddItemToArray(al, cJSON_CreateString(r->algos[i]));
    cJSON *cases = cJSON_AddArrayToObject(root, "cases");
    for (int32_t i = 0; i < r->n_cases; i++) {
        const loom_compare_case_result *c = &r->cases[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(cases, o);
        num(o, "index", c->index);
        cJSON_AddStringToObject(o, "name", c->name);
        cJSON_AddStringToObject(o, "model", c->model);
        cJSON_AddStringToObject(o, "cluster", c->cluster);
        num(o, "gpus", (double)c->gpus);
        cJSON_AddStringToObject(o, "gpu", c->gpu);
        cJSON_AddStringToObject(o, "mode", loom_plan_mode_name(c->mode));
        cJSON_AddStringToObject(o, "objective", loom_problem_objective_name(c->objective));
        num(o, "gbs", (double)c->gbs);
        num(o, "seq", (double)c->seq);
        cJSON_AddStringToObject(o, "dtype", loom_dtype_name(c->dtype));
        cJSON *rows = cJSON_AddArrayToObject(o, "results");
        for (int32_t k = 0; k < c->n_rows; k++) {
            const loom_compare_row *w = &c->rows[k];
            cJSON *x = cJSON_CreateObject();
            cJSON_AddItemToArray(rows, x);
            cJSON_AddStringToObject(x, "algorithm", w->algorithm);
            cJSON_AddStringToObject(x, "status", loom_compare_status_name(w->status));
            num(x, "step_time_s", w->step_s);
            num(x, "score", w->score);
            num(x, "gap", w->gap);
            num(x, "memory_per_gpu_bytes", (double)w->memory_per_gpu_bytes);
            num(x, "mfu", w->mfu);
            num(x, "tokens_per_s", w->tokens_per_s);
            num(x, "search_time_s", w->search_s);
            num(x, "evals", (double)w->evals);
            num(x, "space", (double)w->space);
            cJSON_AddBoolToObject(x, "timed_out", w->timed_out);
            cJSON_AddStringToObject(x, "plan", w->plan);
        }
    }
    char *text = loom_json_print(root);
    cJSON_Delete(root);
    return text;
}

/* ---- reading a report ------------------------------------------------------------------------ */

static loom_status copy_str(const loom_jctx *c, const cJSON *o, const char *path, const char *key,
                            char *dst, size_t n)
{
    const char *v;
    loom_status s = loom_json_get_str(c, o, path, key, true, &v);
    if (s) return s;
    if (strlen(v) >= n)
        return loom_json_fail(c, path, "%s: longer than %d characters", key, (int)n - 1);
    snprintf(dst, n, "%s", v);
    return LOOM_OK;
}

/* A number that may be null (NAN). */
static loom_status opt_num(const loom_jctx *c, const cJSON *o, const char *path, const char *key,
                           double lo, double hi, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return loom_json_fail(c, path, "%s: missing", key);
    if (cJSON_IsNull(v)) {
        *out = NAN;
        return LOOM_OK;
    }
    return loom_json_get_num(c, o, path, key, true, lo, hi, out);
}

static loom_status read_row(const loom_jctx *c, const cJSON *o, const char *path,
                            loom_compare_row *w)
{
    static const char *const keys[] = {"algorithm", "status", "step_time_s", "score", "gap",
                                       "memory_per_gpu_bytes", "mfu", "tokens_per_s",
                                       "search_time_s", "evals", "space", "timed_out", "plan",
                                       NULL};
    loom_status s;
    const char *st;
    memset(w, 0, sizeof *w);
    TRY(loom_json_check_keys(c, o, path, keys));
    TRY(copy_str(c, o, path, "algorithm", w->algorithm, sizeof w->algorithm));
    TRY(loom_json_get_str(c, o, path, "status", true, &st));
    if (!loom_compare_status_parse(st, &w->status)) {
        s = loom_json_fail(c, path, "status: expected ok, no-fit, over-bound or none, found \"%s\"",
                           st);
        goto done;
    }
    TRY(loom_json_get_num(c, o, path, "step_time_s", true, 0, 1e30, &w->step_s));
    TRY(loom_json_get_num(c, o, path, "score", true, 0, 1e300, &w->score));
    TRY(opt_num(c, o, path, "gap", 0, 1e300, &w->gap));
    TRY(loom_json_get_int(c, o, path, "memory_per_gpu_bytes", true, 0, INT64_MAX / 2,
                          &w->memory_per_gpu_bytes));
    TRY(loom_json_get_num(c, o, path, "mfu", true, 0, 1e3, &w->mfu));
    TRY(loom_json_get_num(c, o, path, "tokens_per_s", true, 0, 1e300, &w->tokens_per_s));
    TRY(loom_json_get_num(c, o, path, "search_time_s", true, 0, 1e12, &w->search_s));
    TRY(loom_json_get_int(c, o, path, "evals", true, 0, INT64_MAX / 2, &w->evals));
    TRY(loom_json_get_int(c, o, path, "space", true, 0, INT64_MAX / 2, &w->space));
    TRY(loom_json_get_bool(c, o, path, "timed_out", true, &w->timed_out));
    TRY(copy_str(c, o, path, "plan", w->plan, sizeof w->plan));
done:
    return s;
}

static loom_status read_case_result(const loom_jctx *c, const cJSON *o, const char *path,
                                    const loom_compare_report *r, loom_compare_case_result *x)
{
    static const char *const keys[] = {"index", "name", "model", "cluster", "gpus", "gpu",
                                       "mode", "objective", "gbs", "seq", "dtype", "results",
                                       NULL};
    loom_status s;
    const char *mode, *obj, *dt;
    const cJSON *rows;
    int64_t index;
    TRY(loom_json_check_keys(c, o, path, keys));
    TRY(loom_json_get_int(c, o, path, "index", true, 0, r->suite_cases - 1, &index));
    x->index = (int32_t)index;
    TRY(copy_str(c, o, path, "name", x->name, sizeof x->name));
    TRY(copy_str(c, o, path, "model", x->model, sizeof x->model));
    TRY(copy_str(c, o, path, "cluster", x->cluster, sizeof x->cluster));
    TRY(loom_json_get_int(c, o, path, "gpus", true, 1, INT64_MAX / 2, &x->gpus));
    TRY(copy_str(c, o, path, "gpu", x->gpu, sizeof x->gpu));
    TRY(loom_json_get_str(c, o, path, "mode", true, &mode));
    TRY(loom_json_get_str(c, o, path, "objective", true, &obj));
    TRY(loom_json_get_str(c, o, path, "dtype", true, &dt));
    if (!loom_plan_mode_parse(mode, &x->mode) || !loom_problem_objective_parse(obj, &x->objective) ||
        !loom_dtype_parse(dt, &x->dtype)) {
        s = loom_json_fail(c, path, "mode / objective / dtype: unknown value (\"%s\", \"%s\", "
                           "\"%s\")", mode, obj, dt);
        goto done;
    }
    TRY(loom_json_get_int(c, o, path, "gbs", true, 1, (int64_t)1 << 30, &x->gbs));
    TRY(loom_json_get_int(c, o, path, "seq", true, 1, LOOM_MODEL_MAX_SEQ, &x->seq));
    TRY(loom_json_get_array(c, o, path, "results", true, &rows));
    if (cJSON_GetArraySize(rows) != r->n_algos) {
        s = loom_json_fail(c, path, "results: expected %d (one per algorithm), found %d",
                           (int)r->n_algos, cJSON_GetArraySize(rows));
        goto done;
    }
    x->rows = calloc((size_t)r->n_algos, sizeof *x->rows);
    if (!x->rows) {
        s = loom_error_set(c->err, LOOM_ERR_NOMEM, "%s: out of memory", c->file);
        goto done;
    }
    x->n_rows = r->n_algos;
    const cJSON *it;
    int k = 0;
    cJSON_ArrayForEach(it, rows)
    {
        char p[96];
        snprintf(p, sizeof p, "%s.results[%d]", path, k);
        if (!cJSON_IsObject(it)) {
            s = loom_json_fail(c, p, "expected an object, found %s", loom_json_type_name(it));
            goto done;
        }
        TRY(read_row(c, it, p, &x->rows[k]));
        if (strcmp(x->rows[k].algorithm, r->algos[k])) {
            s = loom_json_fail(c, p, "algorithm: expected \"%s\" (the order of $.algorithms), "
                               "found \"%s\"", r->algos[k], x->rows[k].algorithm);
            goto done;
        }
        k++;
    }
done:
    return s;
}

loom_status loom_compare_read(const char *path, loom_compare_report *out, loom_error *err)
{
    static const char *const keys[] = {"format", "suite", "suite_cases", "budget_s", "max_work", "max_evals",
                                       "seed", "timings", "shard", "algorithms", "cases", NULL};
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    loom_json_limits lim = LOOM_JSON_LIMITS_REPORT;
    loom_status s = loom_json_parse_file_limited(path, &lim, &root, err);
    if (s) return s;
    loom_jctx c = {path, err};
    const char *format, *shard;
    const cJSON *al, *cases, *it;
    int64_t n, seed;
    if (!cJSON_IsObject(root)) {
        s = loom_json_fail(&c, "$", "expected an object, found %s", loom_json_type_name(root));
        goto done;
    }
    TRY(loom_json_get_str(&c, root, "$", "format", true, &format));
    if (strcmp(format, LOOM_COMPARE_FORMAT)) {
        s = loom_json_fail(&c, "$.format", "expected \"%s\", found \"%s\"", LOOM_COMPARE_FORMAT,
                           format);
        goto done;
    }
    TRY(loom_json_check_keys(&c, root, "$", keys));
    TRY(copy_str(&c, root, "$", "suite", out->suite, sizeof out->suite));
    TRY(loom_json_get_int(&c, root, "$", "suite_cases", true, 1, 1 << 24, &n));
    out->suite_cases = (int32_t)n;
    TRY(loom_json_get_num(&c, root, "$", "budget_s", true, 0, 1e9, &out->budget_s));
    TRY(loom_json_get_int(&c, root, "$", "max_work", false, 0, INT64_MAX / 2, &out->max_work));
    TRY(loom_json_get_int(&c, root, "$", "max_evals", true, 1, INT64_MAX / 2, &out->max_evals));
    TRY(loom_json_get_int(&c, root, "$", "seed", true, 0, (int64_t)1 << 53, &seed));
    out->seed = (uint64_t)seed;
    TRY(loom_json_get_bool(&c, root, "$", "timings", true, &out->timings));
    TRY(loom_json_get_str(&c, root, "$", "shard", true, &shard));
    int k, nn;
    char tail;
    if (sscanf(shard, "%d/%d%c", &k, &nn, &tail) != 2 || nn < 1 || k < 0 || k >= nn) {
        s = loom_json_fail(&c, "$.shard", "expected K/N with 0 <= K < N, found \"%s\"", shard);
        goto done;
    }
    out->shard_k = k, out->shard_n = nn;
    TRY(loom_json_get_array(&c, root, "$", "algorithms", true, &al));
    cJSON_ArrayForEach(it, al)
    {
        if (!cJSON_IsString(it) || out->n_algos == LOOM_COMPARE_MAX_ALGOS ||
            strlen(it->valuestring) >= sizeof out->algos[0]) {
            s = loom_json_fail(&c, "$.algorithms", "expected at most %d algorithm names",
                               LOOM_COMPARE_MAX_ALGOS);
            goto done;
        }
        snprintf(out->algos[out->n_algos++], sizeof out->algos[0], "%s", it->valuestring);
    }
    if (out->n_algos == 0) {
        s = loom_json_fail(&c, "$.algorithms", "expected at least one algorithm");
        goto done;
    }
    TRY(loom_json_get_array(&c, root, "$", "cases", true, &cases));
    int nc = cJSON_GetArraySize(cases);
    out->cases = calloc((size_t)nc + 1, sizeof *out->cases);
    if (!out->cases) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    cJSON_ArrayForEach(it, cases)
    {
        char p[48];
        snprintf(p, sizeof p, "$.cases[%d]", (int)out->n_cases);
        if (!cJSON_IsObject(it)) {
            s = loom_json_fail(&c, p, "expected an object, found %s", loom_json_type_name(it));
            goto done;
        }
        s = read_case_result(&c, it, p, out, &out->cases[out->n_cases]);
        out->n_cases++;   /* owns its rows even on failure */
        if (s) goto done;
    }
done:
    cJSON_Delete(root);
    if (s) loom_compare_report_free(out);
    return s;
}

/* ---- merging shards -------------------------------------------------------------------------- */

static int by_index(const void *a, const void *b)
{
    const loom_compare_case_result *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

loom_status loom_compare_merge(const loom_compare_report *parts, const char *const *names, int n,
                               loom_compare_report *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    if (n < 1) return loom_error_set(err, LOOM_ERR_INVALID, "compare-merge: no reports");
    const loom_compare_report *a = &parts[0];
    int32_t total = 0;
    for (int i = 0; i < n; i++) {
        const loom_compare_report *b = &parts[i];
        bool same = !strcmp(a->suite, b->suite) && a->suite_cases == b->suite_cases &&
                    a->budget_s == b->budget_s && a->max_work == b->max_work &&
                    a->max_evals == b->max_evals &&
                    a->seed == b->seed && a->timings == b->timings && a->n_algos == b->n_algos;
        for (int32_t k = 0; same && k < a->n_algos; k++) same = !strcmp(a->algos[k], b->algos[k]);
        if (!same)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "compare-merge: %s and %s are not shards of one run (suite, "
                                  "algorithms, budget, evaluations, seed and timings must match)",
                                  names[0], names[i]);
        total += b->n_cases;
    }
    *out = *a;
    out->shard_k = 0, out->shard_n = 1;
    out->n_cases = 0;
    out->cases = calloc((size_t)total + 1, sizeof *out->cases);
    if (!out->cases) return loom_error_set(err, LOOM_ERR_NOMEM, "compare-merge: out of memory");
    for (int i = 0; i < n; i++)
        for (int32_t k = 0; k < parts[i].n_cases; k++) {
            loom_compare_case_result *x = &out->cases[out->n_cases];
            *x = parts[i].cases[k];
            x->rows = malloc(sizeof *x->rows * (size_t)(x->n_rows ? x->n_rows : 1));
            if (!x->rows) {
                loom_compare_report_free(out);
                return loom_error_set(err, LOOM_ERR_NOMEM, "compare-merge: out of memory");
            }
            memcpy(x->rows, parts[i].cases[k].rows, sizeof *x->rows * (size_t)x->n_rows);
            out->n_cases++;
        }
    qsort(out->cases, (size_t)out->n_cases, sizeof *out->cases, by_index);
    loom_status s = LOOM_OK;
    for (int32_t i = 0; i + 1 < out->n_cases && !s; i++)
        if (out->cases[i].index == out->cases[i + 1].index)
            s = loom_error_set(err, LOOM_ERR_INVALID,
                               "compare-merge: case %d (%s) appears in more than one report",
                               (int)out->cases[i].index, out->cases[i].name);
    if (!s && out->n_cases != out->suite_cases) {
        char missing[256] = "";
        size_t off = 0;
        int32_t j = 0;
        for (int32_t idx = 0; idx < out->suite_cases && off < sizeof missing - 16; idx++) {
            while (j < out->n_cases && out->cases[j].index < idx) j++;
            if (j < out->n_cases && out->cases[j].index == idx) continue;
            off += (size_t)snprintf(missing + off, sizeof missing - off, "%s%d", off ? ", " : "",
                                    (int)idx);
        }
        s = loom_error_set(err, LOOM_ERR_INVALID,
                           "compare-merge: the reports hold %d of the suite's %d cases; missing "
                           "case indices: %s", (int)out->n_cases, (int)out->suite_cases, missing);
    }
    if (s) loom_compare_report_free(out);
    else loom_compare_gaps(out);
    return s;
}
