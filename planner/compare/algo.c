/*
 * algo.c — the search-algorithm interface (algo.h): the registry, the
 * run context with the shared evaluator, the evaluation counter and the
 * budget clock, and the rule that picks the best of what an algorithm saw.
 *
 * The evaluator is loom_search_eval (stage_eval.c) on one loom_search
 * instance made here; it takes every setting it prices (ZeRO stage,
 * interleaving, layout) from the configuration. Before scoring, a
 * configuration is checked for the invariants the evaluator assumes (layers
 * covered once, in order; GPU counts adding up; micro-batches × size ×
 * replicas = sequences), so that a buggy algorithm gets an error instead of
 * a meaningless number.
 *
 * Units: seconds, bytes per GPU.
 */
#include "planner/compare/algo.h"
#include "base/clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/memory.h"

struct loom_algo_ctx {
    loom_algo_request req;
    const loom_cluster *c;
    loom_search *ev;
    int32_t layers, blocks;
    bool *is_block;                 /* [layers] */
    int64_t evals;
    double t0;
    bool timed_out;
};

void loom_algo_request_init(loom_algo_request *r)
{
    memset(r, 0, sizeof *r);
    loom_problem_init(&r->problem);
    r->max_evals = 48;
    r->seed = 1;
    r->max_micro_batch = 8;
}

/* ---- the registry ----------------------------------------------------------------------- */

/* Order of reports and of `--algos` defaults. Adding an algorithm: one line
 * here and its extern in algo.h. */
static const loom_algo *const registry[] = {
    &loom_algo_alpa,  &loom_algo_alpa_megatron, &loom_algo_grid,   &loom_algo_genetic,
    &loom_algo_random, &loom_algo_rules,        &loom_algo_greedy, &loom_algo_pp_only,
};
#define N_ALGOS (sizeof registry / sizeof registry[0])

size_t loom_algo_count(void) { return N_ALGOS; }

const loom_algo *loom_algo_at(size_t i) { return i < N_ALGOS ? registry[i] : NULL; }

const loom_algo *loom_algo_find(const char *name)
{
    for (size_t i = 0; i < N_ALGOS; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}

const char *loom_algo_names(void)
{
    static char buf[256];
    if (!buf[0]) {
        size_t off = 0;
        for (size_t i = 0; i < N_ALGOS && off < sizeof buf; i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "",
                                    registry[i]->name);
    }
    return buf;
}

/* ---- the context and its evaluator ------------------------------------------------------- */

void loom_algo_search_options(const loom_algo_request *req, loom_search_options *out)
{
    loom_search_options_init(out);
    out->max_micro_batch = req->max_micro_batch;
}

loom_status loom_algo_ctx_create(const loom_algo_request *req, loom_algo_ctx **out,
                                 loom_error *err)
{
    *out = NULL;
    if (!req->problem.model || !req->problem.cm || req->problem.gbs < 1 || req->problem.seq < 1)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "search: needs a model, a cost model, gbs >= 1 and seq >= 1");
    loom_algo_ctx *c = calloc(1, sizeof *c);
    if (!c) return loom_error_set(err, LOOM_ERR_NOMEM, "search: out of memory");
    c->req = *req;
    if (c->req.max_micro_batch < 1) c->req.max_micro_batch = 8;
    if (c->req.max_evals < 1) c->req.max_evals = 48;
    c->c = loom_cost_model_cluster(req->problem.cm);
    const loom_graph *g;
    loom_search_options o;
    loom_algo_search_options(&c->req, &o);
    loom_status s = loom_search_create(&c->req.problem, &o, &c->ev, err);
    if (!s) s = loom_search_graph(c->ev, 1, &g, err);
    if (s) {
        loom_algo_ctx_destroy(c);
        return s;
    }
    c->layers = loom_graph_layer_count(g);
    c->is_block = calloc((size_t)c->layers + 1, sizeof *c->is_block);
    if (!c->is_block) {
        loom_algo_ctx_destroy(c);
        return loom_error_set(err, LOOM_ERR_NOMEM, "search: out of memory");
    }
    for (int32_t l = 0; l < c->layers; l++) {
        c->is_block[l] = loom_memory_is_block(g, l);
        c->blocks += c->is_block[l];
    }
    c->t0 = loom_clock_s();
    *out = c;
    return LOOM_OK;
}

void loom_algo_ctx_destroy(loom_algo_ctx *c)
{
    if (!c) return;
    loom_search_destroy(c->ev);
    free(c->is_block);
    free(c);
}

const loom_algo_request *loom_algo_ctx_request(const loom_algo_ctx *c) { return &c->req; }
const loom_cluster *loom_algo_ctx_cluster(const loom_algo_ctx *c) { return c->c; }
int32_t loom_algo_ctx_layers(const loom_algo_ctx *c) { return c->layers; }
int32_t loom_algo_ctx_blocks(const loom_algo_ctx *c) { return c->blocks; }
int64_t loom_algo_ctx_evals(const loom_algo_ctx *c) { return c->evals; }
const bool *loom_algo_ctx_block_mask(const loom_algo_ctx *c) { return c->is_block; }

loom_status loom_algo_ctx_graph(loom_algo_ctx *c, int64_t b, const loom_graph **out,
                                loom_error *err)
{
    return loom_search_graph(c->ev, b, out, err);
}

int64_t loom_algo_ctx_work(const loom_algo_ctx *c) { return c->evals + loom_search_work(c->ev); }

bool loom_algo_ctx_stop(loom_algo_ctx *c)
{
    if (c->req.max_work > 0 && loom_algo_ctx_work(c) >= c->req.max_work) c->timed_out = true;
    if (c->req.budget_s > 0 && loom_clock_s() - c->t0 > c->req.budget_s) c->timed_out = true;
    return c->timed_out;
}

double loom_algo_ctx_remaining_s(const loom_algo_ctx *c)
{
    if (c->req.budget_s <= 0) return INFINITY;
    double left = c->req.budget_s - (loom_clock_s() - c->t0);
    return left > 0 ? left : 0;
}

/* The invariants loom_search_eval relies on. */
static loom_status check_config(const loom_algo_ctx *c, const loom_search_config *cfg,
                                loom_error *err)
{
    int64_t G = loom_cluster_gpus(c->c);
    if (cfg->n_stages < 1 || cfg->n_stages > LOOM_STAGE_MAX || cfg->pp < 1 || cfg->vpp < 1 ||
        cfg->n_stages != cfg->pp * cfg->vpp)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "search: configuration has %d stages for pp %lld × vpp %lld",
                              (int)cfg->n_stages, (long long)cfg->pp, (long long)cfg->vpp);
    if (cfg->mbs < 1 || cfg->micro_batches < 1 || cfg->dp < 1 || cfg->gpus_per_replica < 1 ||
        cfg->dp * cfg->gpus_per_replica > G || cfg->zero < 0 || cfg->zero > 3)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "search: configuration uses %lld replicas of %lld GPUs (mbs %lld, "
                              "%lld micro-batches, ZeRO %d) on a cluster of %lld GPUs",
                              (long long)cfg->dp, (long long)cfg->gpus_per_replica,
                              (long long)cfg->mbs, (long long)cfg->micro_batches, cfg->zero,
                              (long long)G);
    int64_t seqs = cfg->mbs * cfg->micro_batches * cfg->dp;
    if (seqs != cfg->sequences || (c->req.problem.inference ? seqs > c->req.problem.gbs : seqs != c->req.problem.gbs))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "search: mbs %lld × %lld micro-batches × dp %lld = %lld sequences, "
                              "expected %lld", (long long)cfg->mbs, (long long)cfg->micro_batches,
                              (long long)cfg->dp, (long long)seqs,
                              (long long)(c->req.problem.inference ? cfg->sequences : c->req.problem.gbs));
    int32_t next = 0;
    for (int32_t i = 0; i < cfg->n_stages; i++) {
        const loom_search_stage *s = &cfg->stages[i];
        int64_t dev = loom_submesh_devices(s->submesh);
        if (s->first_layer != next || s->last_layer < s->first_layer ||
            s->last_layer >= c->layers || s->group < 0 || s->group >= cfg->pp ||
            s->mesh.n0 < 1 || s->mesh.n1 < 1 || dev != s->mesh.n0 * s->mesh.n1 ||
            dev > cfg->gpus_per_replica)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "search: stage %d (layers %d..%d, pipeline rank %d, mesh "
                                  "%lldx%lld on %lld GPUs) does not continue at layer %d or does "
                                  "not fit its replica of %lld GPUs", (int)i, (int)s->first_layer,
                                  (int)s->last_layer, (int)s->group, (long long)s->mesh.n0,
                                  (long long)s->mesh.n1, (long long)dev, (int)next,
                                  (long long)cfg->gpus_per_replica);
        next = s->last_layer + 1;
    }
    if (next != c->layers)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "search: the stages end at layer %d of %d", (int)next - 1,
                              (int)c->layers);
    return LOOM_OK;
}

loom_status loom_algo_eval(loom_algo_ctx *c, const loom_search_config *cfg, loom_algo_score *out,
                           loom_error *err)
{
    memset(out, 0, sizeof *out);
    out->score = INFINITY;
    out->step_s = INFINITY;
    loom_status s = check_config(c, cfg, err);
    if (s) return s;
    const loom_graph *g;
    if ((s = loom_search_graph(c->ev, cfg->mbs, &g, err))) return s;
    c->evals++;
    loom_search_eval_result r;
    loom_error e2 = {0};
    s = loom_search_eval(c->ev, g, cfg, &r, &e2);
    if (s == LOOM_ERR_INFEASIBLE || s == LOOM_ERR_LIMIT) return LOOM_OK;   /* cannot be priced */
    if (s) {
        *err = e2;
        return s;
    }
    out->valid = true;
    out->memory_per_gpu_bytes = r.memory_per_gpu_bytes;
    out->mem_ok = out->fits = r.fits;
    if (c->req.problem.inference && c->req.problem.objective == LOOM_OBJ_THROUGHPUT &&
        c->req.problem.latency_bound_s > 0 && r.latency_s > c->req.problem.latency_bound_s)
        out->fits = false;
    out->score = r.score;
    out->step_s = c->req.problem.inference ? r.latency_s : r.step_s;
    out->tokens_per_s = r.tokens_per_s;
    out->gpus_used = r.gpus_used;
    double peak = loom_device_peak_flops(&c->c->gpu, c->req.problem.dtype);
    if (!c->req.problem.inference && peak > 0 && r.step_s > 0 && r.gpus_used > 0)
        out->mfu = r.model_flops / (r.step_s * (double)r.gpus_used * peak);
    loom_search_eval_free(&r);
    return LOOM_OK;
}

/* ---- random numbers ---------------------------------------------------------------------- */

uint64_t loom_algo_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t loom_algo_rand_below(uint64_t *state, int64_t n)
{
    /* the top 53 bits as a fraction of n: bias below 2^-53 · n */
    double u = (double)(loom_algo_rand(state) >> 11) * (1.0 / 9007199254740992.0);
    int64_t k = (int64_t)(u * (double)n);
    return k < n ? k : n - 1;
}

/* ---- keeping the best --------------------------------------------------------------------- */

bool loom_algo_better(const loom_algo_score *a, const loom_algo_score *b)
{
    if (a->valid != b->valid) return a->valid;
    if (a->fits != b->fits) return a->fits;
    if (a->fits) return a->score < b->score;
    if (a->mem_ok != b->mem_ok) return a->mem_ok;
    if (a->mem_ok) return a->step_s < b->step_s;
    return a->memory_per_gpu_bytes < b->memory_per_gpu_bytes;
}

void loom_algo_offer(loom_algo_result *out, const loom_search_config *cfg,
                     const loom_algo_score *score)
{
    if (score->valid && !score->mem_ok &&
        (out->min_memory_bytes == 0 || score->memory_per_gpu_bytes < out->min_memory_bytes))
        out->min_memory_bytes = score->memory_per_gpu_bytes;
    if (out->found && !loom_algo_better(score, &out->score)) return;
    out->found = true;
    out->config = *cfg;
    out->score = *score;
}

/* ---- running an algorithm ----------------------------------------------------------------- */

loom_status loom_algo_run(const loom_algo *a, const loom_algo_request *req, loom_algo_result *out,
                          loom_error *err)
{
    memset(out, 0, sizeof *out);
    loom_algo_ctx *c;
    loom_status s = loom_algo_ctx_create(req, &c, err);
    if (s) return s;
    c->t0 = loom_clock_s();
    s = a->run(c, out, err);
    out->time_s = loom_clock_s() - c->t0;
    out->evals += c->evals;   /* the Alpa planner counts its own evaluations in out->evals */
    out->timed_out |= c->timed_out;
    loom_algo_ctx_destroy(c);
    if (s) {
        loom_error_prefix(err, "%s", a->name);
        return s;
    }
    if (!out->found) return LOOM_OK;
    /* The answer is re-scored on a fresh evaluator: no algorithm reports
     * its own number, and no cache state can leak into it. */
    loom_algo_request quiet = *req;
    quiet.budget_s = 0;
    quiet.max_work = 0;
    if ((s = loom_algo_ctx_create(&quiet, &c, err))) return s;
    s = loom_algo_eval(c, &out->config, &out->score, err);
    loom_algo_ctx_destroy(c);
    if (s) loom_error_prefix(err, "%s: re-scoring its plan", a->name);
    return s;
}
