/*
 * algo_greedy.c — `greedy`: the plan a one-pass, no-lookahead planner
 * builds from per-op costs, without the ILP or the stage DP.
 *
 *   Per-op cheapest. On a logical mesh, each op is charged the cost of its
 *   individually cheapest strategy (loom_strategy_enumerate: compute +
 *   its own collectives + gradient sync amortised over 8 micro-batches, as
 *   the ILP tables are), ignoring the resharding between neighbours that
 *   the ILP would weigh. A layer's greedy cost is the sum over its ops.
 *   Identical layers (same signature) are costed once per mesh.
 *
 *   Equal-layer stages. A replica of D GPUs is cut into pp = D / m stages
 *   of m GPUs holding equal numbers of blocks (Megatron's split,
 *   mspace.h), one sub-mesh shape for all.
 *
 *   Greedy order. Replica sizes are tried smallest first (the most data
 *   parallelism, the usual first choice); for each, the (sub-mesh, logical
 *   mesh) whose greedy estimate Σ t_i + (M - 1) · max t_i (training) or
 *   max(Σ t_i, M · max t_i) (inference) is least is taken, with micro-batch
 *   1 (inference: one micro-batch per replica when it may be that large),
 *   and the first plan that fits — without, then with full recompute —
 *   is the answer.
 *
 * The plan is scored by the shared evaluator like every other algorithm's:
 * the stages' strategies are then the evaluator's ILP optimum on greedy's
 * meshes, so greedy is judged by its mesh and stage decisions. (Keeping
 * its per-op choices in the scored plan would need the intra-op solver to
 * accept a fixed assignment; loom_intra_solve has no such option.)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/compare/mspace.h"
#include "solver/strategy.h"

#define SYNC_AMORTISE 8.0     /* micro-batches the gradient sync is spread over */
#define MAX_SHAPES 16

typedef struct {
    loom_algo_ctx *ctx;
    const loom_graph *g;
    const loom_cost_model *cm;
    int32_t *saved_by;
    int32_t n;                /* layer slots */
    bool train;
} greedy;

/* Σ over ops of the cheapest strategy's cost, per layer slot, on mesh;
 * INFINITY everywhere when an op cannot be enumerated on it. */
static loom_status layer_costs(const greedy *x, loom_mesh_shape mesh, double *cost,
                               loom_error *err)
{
    loom_strategy_ctx sc;
    loom_strategy_ctx_init(&sc, x->g, x->cm, mesh, x->train, false);
    sc.saved_by = x->saved_by;
    for (int32_t l = 0; l < x->n; l++) {
        uint64_t sig = loom_graph_layer_signature(x->g, l);
        int32_t same = -1;
        for (int32_t k = 0; k < l && same < 0; k++)
            if (loom_graph_layer_signature(x->g, k) == sig) same = k;
        if (same >= 0) {
            cost[l] = cost[same];
            continue;
        }
        int32_t first, count;
        loom_graph_layer_ops(x->g, l, &first, &count);
        cost[l] = 0;
        for (int32_t i = first; i < first + count && isfinite(cost[l]); i++) {
            loom_strategy *v;
            int32_t nv;
            loom_error e2;
            loom_status s = loom_strategy_enumerate(&sc, i, -1, &v, &nv, &e2);
            if (s == LOOM_ERR_UNSUPPORTED) {
                cost[l] = INFINITY;
                continue;
            }
            if (s) {
                *err = e2;
                return s;
            }
            double best = INFINITY;
            for (int32_t k = 0; k < nv; k++)
                best = fmin(best, v[k].compute_s + v[k].comm_s + v[k].grad_sync_s / SYNC_AMORTISE);
            free(v);
            cost[l] += best;
        }
    }
    return LOOM_OK;
}

static double estimate(const greedy *x, const double *cost, const int32_t *bound, int64_t pp,
                       int64_t M)
{
    double sum = 0, mx = 0;
    for (int64_t i = 0; i < pp; i++) {
        double t = 0;
        for (int32_t l = bound[i]; l < bound[i + 1]; l++) t += cost[l];
        sum += t;
        mx = fmax(mx, t);
    }
    return x->train ? sum + (double)(M - 1) * mx : fmax(sum, (double)M * mx);
}

/* Replica sizes worth trying: divisors of G that are valid sub-mesh blocks
 * and powers of two (× a node) or all of G, ascending. */
static int replica_sizes(int64_t G, int64_t g, int64_t *out, int cap)
{
    int n = 0;
    for (int64_t D = 1; D <= G && n < cap; D *= 2)
        if (G % D == 0 && (D < g ? g % D == 0 : D % g == 0)) out[n++] = D;
    for (int64_t k = 1; k * g <= G && n < cap; k *= 2)
        if (G % (k * g) == 0 && ((k * g) & (k * g - 1))) out[n++] = k * g;
    if (n < cap && (n == 0 || out[n - 1] != G)) {
        bool have = false;
        for (int i = 0; i < n; i++) have |= out[i] == G;
        if (!have) out[n++] = G;
    }
    for (int i = 1; i < n; i++)   /* insertion sort: few entries */
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int64_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static loom_status plan_replica(greedy *x, int64_t D, loom_algo_result *out, bool *done,
                                loom_search_config *cfg, double *cost, loom_error *err)
{
    const loom_algo_request *req = loom_algo_ctx_request(x->ctx);
    const loom_cluster *c = loom_algo_ctx_cluster(x->ctx);
    const int64_t G = loom_cluster_gpus(c), g = c->gpus_per_node, L = loom_algo_ctx_blocks(x->ctx);
    const int64_t dp = G / D;
    /* training: micro-batch 1; inference: a replica's sequences in as few
     * micro-batches as max_micro_batch allows */
    int64_t mbs = 1;
    for (int64_t b = 2; !x->train && b <= req->max_micro_batch && b <= req->problem.gbs / dp; b++)
        if ((req->problem.gbs / dp) % b == 0) mbs = b;
    const int64_t M = req->problem.gbs / dp / mbs;
    double best = INFINITY;
    loom_submesh best_sub = {0, 0};
    loom_mesh_shape best_mesh = {0, 0};
    int64_t best_pp = 0, bf = 0, bl = 0;
    int32_t bound[LOOM_STAGE_MAX + 1];
    for (int64_t m = 1; m <= D; m *= 2) {
        int64_t pp = D / m, f, l;
        if (D % m || (m > g ? m % g : g % m) || pp > L || pp > LOOM_STAGE_MAX ||
            !loom_mspace_uneven(L, pp, &f, &l))
            continue;
        loom_submesh sub = m > g ? (loom_submesh){m / g, g} : (loom_submesh){1, m};
        int64_t shapes[MAX_SHAPES][2];
        int32_t ns = loom_stage_logical_meshes(sub, shapes, MAX_SHAPES);
        loom_mspace_split(x->ctx, pp, f, l, bound);
        for (int32_t k = 0; k < ns && k < MAX_SHAPES; k++) {
            loom_mesh_shape mesh = {shapes[k][0], shapes[k][1]};
            loom_status s = layer_costs(x, mesh, cost, err);
            if (s) return s;
            double e = estimate(x, cost, bound, pp, M);
            if (e < best) best = e, best_sub = sub, best_mesh = mesh, best_pp = pp, bf = f, bl = l;
        }
        if (loom_algo_ctx_stop(x->ctx)) return LOOM_OK;
    }
    if (!isfinite(best)) return LOOM_OK;
    memset(cfg, 0, sizeof *cfg);
    cfg->mbs = mbs, cfg->micro_batches = M, cfg->dp = dp, cfg->gpus_per_replica = D;
    cfg->vpp = 1, cfg->pp = best_pp, cfg->sequences = req->problem.gbs;
    cfg->zero = x->train && dp > 1 ? 1 : 0;
    cfg->n_stages = (int32_t)best_pp;
    loom_mspace_split(x->ctx, best_pp, bf, bl, bound);
    for (int rc = 0; rc < (x->train ? 2 : 1) && !*done && !loom_algo_ctx_stop(x->ctx); rc++) {
        for (int32_t i = 0; i < cfg->n_stages; i++) {
            loom_search_stage *st = &cfg->stages[i];
            st->first_layer = bound[i];
            st->last_layer = bound[i + 1] - 1;
            st->group = i;
            st->submesh = best_sub;
            st->mesh = best_mesh;
            st->megatron = false;
            st->recompute = rc ? LOOM_RECOMPUTE_FULL : LOOM_RECOMPUTE_NONE;
            st->first_gpu = i * loom_submesh_devices(best_sub);   /* replicas consecutive */
            st->replica_stride = D;
        }
        loom_algo_score sc;
        loom_status s = loom_algo_eval(x->ctx, cfg, &sc, err);
        if (s) return s;
        loom_algo_offer(out, cfg, &sc);
        *done = sc.valid && sc.fits;
    }
    return LOOM_OK;
}

static loom_status greedy_run(loom_algo_ctx *ctx, loom_algo_result *out, loom_error *err)
{
    const loom_algo_request *req = loom_algo_ctx_request(ctx);
    const loom_cluster *c = loom_algo_ctx_cluster(ctx);
    greedy x = {.ctx = ctx, .cm = req->problem.cm, .train = !req->problem.inference,
                .n = loom_algo_ctx_layers(ctx)};
    loom_status s = loom_algo_ctx_graph(ctx, 1, &x.g, err);
    if (s) return s;
    double *cost = malloc(sizeof *cost * (size_t)x.n);
    loom_search_config *cfg = malloc(sizeof *cfg);
    if (!cost || !cfg || (s = loom_strategy_saved_by(x.g, &x.saved_by, err))) {
        free(cost), free(cfg);
        return s ? s : loom_error_set(err, LOOM_ERR_NOMEM, "greedy: out of memory");
    }
    int64_t sizes[64];
    int n = replica_sizes(loom_cluster_gpus(c), c->gpus_per_node, sizes, 64);
    bool done = false;
    for (int i = 0; i < n && !done && !s && !loom_algo_ctx_stop(ctx); i++) {
        int64_t dp = loom_cluster_gpus(c) / sizes[i];
        if (req->problem.gbs % dp) continue;
        s = plan_replica(&x, sizes[i], out, &done, cfg, cost, err);
    }
    free(x.saved_by);
    free(cost);
    free(cfg);
    return s;
}

const loom_algo loom_algo_greedy = {
    .name = "greedy",
    .summary = "per-op cheapest strategies pick the mesh, equal-layer stages, most DP that fits",
    .run = greedy_run,
};
