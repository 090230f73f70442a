/*
 * compare_run.c — running the algorithms of a comparison on one case, the
 * gap to the best plan, and the one-line plan description (compare.h).
 *
 * Each case builds its cluster and cost model once; every algorithm then
 * runs through loom_algo_run, which gives it a fresh evaluator, times it,
 * and re-scores its answer, so all rows of a case are numbers of the same
 * function. The gap is score / best - 1 with best the least score among
 * the case's plans that fit: 0 for the winner, 0.05 for a plan 5 % slower
 * (5 % dearer for the cost objective; for throughput the score is
 * 1 / tokens per second, so 0.05 means the winner serves 5 % more tokens/s).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/cluster.h"
#include "costs/compute.h"
#include "planner/compare/compare.h"
#include "planner/plan/plan_run.h"

static const char *const status_names[LOOM_CMP_STATUS_COUNT] = {"ok", "no-fit", "over-bound",
                                                                 "none"};

const char *loom_compare_status_name(loom_compare_status s)
{
    return s < LOOM_CMP_STATUS_COUNT ? status_names[s] : "?";
}

bool loom_compare_status_parse(const char *s, loom_compare_status *out)
{
    for (int i = 0; i < LOOM_CMP_STATUS_COUNT; i++)
        if (!strcmp(s, status_names[i])) {
            *out = (loom_compare_status)i;
            return true;
        }
    return false;
}

loom_status loom_compare_report_init(loom_compare_report *r, const loom_compare_suite *s,
                                     const char *const *algos, int n_algos, double budget_s,
                                     int64_t max_work, int64_t max_evals, uint64_t seed, bool timings,
                                     int32_t shard_k, int32_t shard_n, loom_error *err)
{
    memset(r, 0, sizeof *r);
    if (n_algos < 1 || n_algos > LOOM_COMPARE_MAX_ALGOS)
        return loom_error_set(err, LOOM_ERR_INVALID, "compare: between 1 and %d algorithms, got %d",
                              LOOM_COMPARE_MAX_ALGOS, n_algos);
    for (int i = 0; i < n_algos; i++) {
        if (!loom_algo_find(algos[i]))
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "compare: unknown algorithm '%s' (known: %s)", algos[i],
                                  loom_algo_names());
        for (int j = 0; j < i; j++)
            if (!strcmp(algos[i], algos[j]))
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "compare: algorithm '%s' is listed twice", algos[i]);
        snprintf(r->algos[i], sizeof r->algos[i], "%s", algos[i]);
    }
    snprintf(r->suite, sizeof r->suite, "%s", s->name);
    r->suite_cases = s->n_cases;
    r->n_algos = n_algos;
    r->budget_s = budget_s;
    r->max_work = max_work;
    r->max_evals = max_evals;
    r->seed = seed;
    r->timings = timings;
    r->shard_k = shard_k;
    r->shard_n = shard_n;
    return LOOM_OK;
}

void loom_compare_report_free(loom_compare_report *r)
{
    if (!r) return;
    for (int32_t i = 0; i < r->n_cases; i++) free(r->cases[i].rows);
    free(r->cases);
    r->cases = NULL;
    r->n_cases = 0;
}

void loom_compare_gaps(loom_compare_report *r)
{
    for (int32_t i = 0; i < r->n_cases; i++) {
        loom_compare_case_result *c = &r->cases[i];
        double best = INFINITY;
        for (int32_t k = 0; k < c->n_rows; k++)
            if (c->rows[k].status == LOOM_CMP_OK) best = fmin(best, c->rows[k].score);
        for (int32_t k = 0; k < c->n_rows; k++) {
            loom_compare_row *row = &c->rows[k];
            row->gap = row->status == LOOM_CMP_OK && best > 0 ? row->score / best - 1 : NAN;
        }
    }
}

void loom_compare_describe(const loom_search_config *cfg, char *buf, size_t n)
{
    size_t k = 0;
#define PUT(...)                                                                 \
    do {                                                                         \
        if (k < n) {                                                             \
            int w_ = snprintf(buf + k, n - k, __VA_ARGS__);                      \
            k = w_ < 0 ? n : k + (size_t)w_;                                     \
        }                                                                        \
    } while (0)
    buf[0] = '\0';
    PUT("dp%lld pp%lld", (long long)cfg->dp, (long long)cfg->pp);
    if (cfg->vpp > 1) PUT(" v%lld", (long long)cfg->vpp);
    /* distinct stage meshes in stage order; "m": Megatron's strategies, "mc":
     * with context parallelism on axis 0 */
    PUT(" /");
    int recomputed = 0;
    for (int32_t i = 0; i < cfg->n_stages; i++) {
        const loom_search_stage *s = &cfg->stages[i];
        recomputed += s->recompute != LOOM_RECOMPUTE_NONE;
        bool seen = false;
        for (int32_t j = 0; j < i && !seen; j++)
            seen = cfg->stages[j].mesh.n0 == s->mesh.n0 && cfg->stages[j].mesh.n1 == s->mesh.n1 &&
                   cfg->stages[j].megatron == s->megatron &&
                   cfg->stages[j].context_parallel == s->context_parallel;
        if (!seen)
            PUT("%s%lldx%lld%s", i ? "," : " ", (long long)s->mesh.n0, (long long)s->mesh.n1,
                !s->megatron ? "" : s->context_parallel ? "mc" : "m");
    }
    PUT(" / mbs%lld x%lld", (long long)cfg->mbs, (long long)cfg->micro_batches);
    if (cfg->zero > 0) PUT(" / zero%d", cfg->zero);
    if (recomputed) PUT(" / recompute %d/%d", recomputed, (int)cfg->n_stages);
#undef PUT
}

static void fill_row(const loom_compare_report *r, const char *name, const loom_algo_result *res,
                     loom_compare_row *row)
{
    memset(row, 0, sizeof *row);
    snprintf(row->algorithm, sizeof row->algorithm, "%s", name);
    row->status = !res->found || !res->score.valid ? LOOM_CMP_NONE
                : res->score.fits                  ? LOOM_CMP_OK
                : res->score.mem_ok                ? LOOM_CMP_OVER_BOUND
                                                   : LOOM_CMP_NO_FIT;
    row->gap = NAN;
    if (row->status != LOOM_CMP_NONE) {
        row->step_s = res->score.step_s;
        row->score = res->score.score;
        row->memory_per_gpu_bytes = res->score.memory_per_gpu_bytes;
        row->mfu = res->score.mfu;
        row->tokens_per_s = res->score.tokens_per_s;
        loom_compare_describe(&res->config, row->plan, sizeof row->plan);
    } else {
        row->memory_per_gpu_bytes = res->min_memory_bytes;
    }
    row->search_s = r->timings ? res->time_s : 0;
    row->evals = res->evals;
    row->space = res->space;
    row->timed_out = res->timed_out;
}

loom_status loom_compare_run_case(loom_compare_report *r, const loom_compare_case *c,
                                  loom_error *err)
{
    loom_cluster cl;
    loom_cost_model *cm = NULL;
    loom_algo_result *res = NULL;
    loom_compare_row *rows = NULL;
    loom_model_source *src = NULL;
    loom_status s = loom_cluster_load(c->cluster_path, &cl, err);
    if (!s) s = loom_cost_model_create(&cl, NULL, NULL, &cm, err);
    if (!s) s = loom_model_open(c->model_path, &src, err);   /* once for every algorithm */
    if (s) goto done;
    res = malloc(sizeof *res);
    rows = calloc((size_t)r->n_algos, sizeof *rows);
    loom_compare_case_result *grown =
        realloc(r->cases, sizeof *grown * ((size_t)r->n_cases + 1));
    if (!res || !rows || !grown) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "compare: out of memory");
        if (grown) r->cases = grown;
        goto done;
    }
    r->cases = grown;

    loom_algo_request req;
    loom_algo_request_init(&req);
    req.problem.model = src;
    req.problem.seq = c->seq;
    req.problem.dtype = c->dtype;
    req.problem.cm = cm;
    req.problem.inference = c->mode == LOOM_PLAN_INFER;
    req.problem.gbs = c->gbs;
    req.problem.objective = c->objective;
    req.problem.latency_bound_s = c->latency_bound_s;
    req.budget_s = r->budget_s;
    req.max_work = r->max_work;
    req.max_evals = r->max_evals;
    req.seed = r->seed;
    for (int32_t k = 0; k < r->n_algos; k++) {
        const loom_algo *a = loom_algo_find(r->algos[k]);
        if ((s = loom_algo_run(a, &req, res, err))) goto done;
        fill_row(r, a->name, res, &rows[k]);
    }

    loom_compare_case_result *out = &r->cases[r->n_cases];
    memset(out, 0, sizeof *out);
    out->index = c->index;
    snprintf(out->name, sizeof out->name, "%s", c->name);
    snprintf(out->model, sizeof out->model, "%s", c->model);
    snprintf(out->cluster, sizeof out->cluster, "%s", c->cluster);
    out->gpus = loom_cluster_gpus(&cl);
    snprintf(out->gpu, sizeof out->gpu, "%s", cl.gpu.name);
    out->mode = c->mode;
    out->objective = c->objective;
    out->gbs = c->gbs;
    out->seq = c->seq;
    out->dtype = c->dtype;
    out->n_rows = r->n_algos;
    out->rows = rows;
    rows = NULL;
    r->n_cases++;
    loom_compare_gaps(r);
done:
    if (s) loom_error_prefix(err, "case '%s'", c->name);
    free(rows);
    free(res);
    loom_model_source_destroy(src);
    loom_cost_model_destroy(cm);
    return s;
}
