/*
 * intra.c — intra-operator planning of a layer range (intra.h): per-layer
 * ILP solves shared between identical layers and cached across calls,
 * joined by the resharding at the boundaries between different layers.
 *
 * THE LAYER KIND. Two layers are solved once when they have the same
 * signature (graph.h: kinds, shapes and wiring) and the same periodic wiring
 * (which op of the layer feeds which input of the next copy). A kind is
 * solved on a mesh with the options that change costs; the solution is a
 * refcounted loom_intra_layer holding each op's strategy, typed specs
 * and costs, so results share it instead of copying.
 *
 * PERIODIC BOUNDARY. Layer l of a run of identical layers reads the
 * previous copy's outputs; the links of l+1 (or of l, for the last of the
 * run) tell which op of the layer produces what the next copy reads, and the
 * ILP prices that edge: the optimum is the cheapest STEADY layout of the
 * run, whose cost per layer does not depend on the run's length.
 *
 * MEMORY BUDGET. The budget B is for the whole range. The range first takes
 * every layer's unconstrained optimum; if that does not fit, layer l gets
 * b_l = B · min_l / Σ min (min_l: the least memory any assignment of l can
 * have, a sum of per-node minima, so Σ b_l = B and every b_l ≥ min_l keeps
 * each layer feasible). b_l is rounded down to a 2^(1/32) grid (never
 * below min_l) so that ranges of different lengths share solves. Σ min > B
 * is reported as infeasible without an ILP.
 *
 * Units: seconds, bytes per GPU.
 */
#include "solver/intra.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/memory.h"
#include "solver/merge.h"
#include "solver/strategy.h"

#define MAX_LINKS 64

typedef struct {
    char strategy[LOOM_STRATEGY_NAME_MAX];
    loom_spec in[LOOM_MAX_IO], w[LOOM_MAX_IO], out[LOOM_MAX_IO];
    uint8_t in_partial[LOOM_MAX_IO];
    loom_intra_op_cost cost;
} intra_op;

struct loom_intra_layer {
    int32_t refs;
    loom_ilp_status status;
    loom_layer_totals tot;
    double min_mem;               /* least memory of any assignment */
    double gap, solve_time_s;
    int32_t n_vars, n_cons, core_vars, core_cons, ops_before, ops_after;
    int32_t n_ops;
    intra_op *ops;                /* NULL when infeasible */
};

typedef struct {
    uint64_t sig, links;          /* layer signature, periodic wiring hash */
    int64_t n0, n1;
    uint64_t opts;                /* options that change costs */
    const void *cm;
    uint64_t cm_fp;               /* the cost model's cluster and calibration */
    double budget;                /* per-layer bytes, 0 = none */
} layer_key;

typedef struct {
    layer_key key;
    uint64_t hash;
    loom_intra_layer *layer;
} cache_slot;

struct loom_intra_cache {
    cache_slot *slots;            /* open addressing, power-of-two size */
    int64_t cap, used;
    int64_t solves, hits;
    /* per-graph memo, by address and a fingerprint (a graph rebuilt at the
     * same address with other shapes must not reuse it) */
    const loom_graph *g;
    uint64_t g_fp;
    uint64_t *sig, *links;
    int32_t *saved_by;
};

/* ---- options ------------------------------------------------------------------ */

void loom_intra_opts_init(loom_intra_opts *o)
{
    memset(o, 0, sizeof *o);
    o->train = true;
    o->time_limit_s = 10.0;
    o->dp_degree_outside = 1;
    o->micro_batches = 1;
    o->act_multiplier = 1;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* Expert parallelism beyond the mesh is Megatron's (MoE parallel folding). */
static int64_t intra_ep_span(const loom_intra_opts *o)
{
    return o->megatron_only && o->ep_span > 1 ? o->ep_span : 1;
}

static uint64_t opts_hash(const loom_intra_opts *o)
{
    int64_t v[11] = {o->train, o->megatron_only, o->micro_batches, o->zero_stage,
                     o->dp_degree_outside, o->act_multiplier,
                     o->megatron_only && o->megatron_cp, o->megatron_only && o->tp_comm_overlap,
                     intra_ep_span(o), o->megatron_only ? o->expert_split : 0,
                     o->megatron_only && o->expert_fold};
    return fnv(14695981039346656037ull, v, sizeof v);
}

static uint64_t key_hash(const layer_key *k)
{
    uint64_t h = fnv(14695981039346656037ull, &k->sig, sizeof k->sig);
    h = fnv(h, &k->links, sizeof k->links);
    int64_t m[2] = {k->n0, k->n1};
    h = fnv(h, m, sizeof m);
    h = fnv(h, &k->opts, sizeof k->opts);
    h = fnv(h, &k->cm, sizeof k->cm);
    h = fnv(h, &k->cm_fp, sizeof k->cm_fp);
    return fnv(h, &k->budget, sizeof k->budget);
}

static bool key_eq(const layer_key *a, const layer_key *b)
{
    return a->sig == b->sig && a->links == b->links && a->n0 == b->n0 && a->n1 == b->n1 &&
           a->opts == b->opts && a->cm == b->cm && a->cm_fp == b->cm_fp && a->budget == b->budget;
}

/* ---- solved layers ----------------------------------------------------------------- */

static void layer_unref(loom_intra_layer *l)
{
    if (!l || --l->refs > 0) return;
    free(l->ops);
    free(l);
}

/* ---- the cache ------------------------------------------------------------------------ */

loom_status loom_intra_cache_create(loom_intra_cache **out, loom_error *err)
{
    loom_intra_cache *c = calloc(1, sizeof *c);
    if (c) c->slots = calloc(64, sizeof *c->slots);
    if (!c || !c->slots) {
        free(c);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory creating the intra-op cache");
    }
    c->cap = 64;
    *out = c;
    return LOOM_OK;
}

static void forget_graph(loom_intra_cache *c)
{
    free(c->sig), free(c->links), free(c->saved_by);
    c->sig = c->links = NULL;
    c->saved_by = NULL;
    c->g = NULL;
}

void loom_intra_cache_destroy(loom_intra_cache *c)
{
    if (!c) return;
    for (int64_t i = 0; i < c->cap; i++) layer_unref(c->slots[i].layer);
    free(c->slots);
    forget_graph(c);
    free(c);
}

void loom_intra_cache_stats(const loom_intra_cache *c, int64_t *solves, int64_t *hits)
{
    if (solves) *solves = c ? c->solves : 0;
    if (hits) *hits = c ? c->hits : 0;
}

static loom_intra_layer *cache_get(loom_intra_cache *c, const layer_key *k, uint64_t h)
{
    for (int64_t i = (int64_t)(h & (uint64_t)(c->cap - 1));; i = (i + 1) & (c->cap - 1)) {
        if (!c->slots[i].layer) return NULL;
        if (c->slots[i].hash == h && key_eq(&c->slots[i].key, k)) return c->slots[i].layer;
    }
}

static bool cache_put(loom_intra_cache *c, const layer_key *k, uint64_t h, loom_intra_layer *l)
{
    if (2 * (c->used + 1) > c->cap) {
        int64_t nc = 2 * c->cap;
        cache_slot *ns = calloc((size_t)nc, sizeof *ns);
        if (!ns) return false;
        for (int64_t i = 0; i < c->cap; i++) {
            if (!c->slots[i].layer) continue;
            int64_t j = (int64_t)(c->slots[i].hash & (uint64_t)(nc - 1));
            while (ns[j].layer) j = (j + 1) & (nc - 1);
            ns[j] = c->slots[i];
        }
        free(c->slots);
        c->slots = ns;
        c->cap = nc;
    }
    int64_t i = (int64_t)(h & (uint64_t)(c->cap - 1));
    while (c->slots[i].layer) i = (i + 1) & (c->cap - 1);
    c->slots[i] = (cache_slot){*k, h, l};
    l->refs++;
    c->used++;
    return true;
}

/* ---- layer kinds: signatures and periodic links ----------------------------------------- */

/* Periodic links of layer l (relative to its first op), from the pair
 * (l, l+1) or (l-1, l) of identical layers; 0 links when l has no identical
 * neighbour. */
static int32_t layer_links(const loom_graph *g, int32_t l, const uint64_t *sig,
                           loom_periodic_link *links)
{
    int32_t L = loom_graph_layer_count(g), a = -1;
    if (l + 1 < L && sig[l + 1] == sig[l]) a = l;
    else if (l > 0 && sig[l - 1] == sig[l]) a = l - 1;
    if (a < 0) return 0;
    int32_t fa, na, fb, nb, n = 0;
    loom_graph_layer_ops(g, a, &fa, &na);
    loom_graph_layer_ops(g, a + 1, &fb, &nb);
    for (int32_t i = 0; i < nb; i++) {
        const loom_op *o = loom_graph_op(g, fb + i);
        for (int k = 0; k < o->n_in; k++) {
            int32_t p = loom_graph_tensor(g, o->in[k])->producer;
            if (p < fa || p >= fa + na) continue;
            const loom_op *po = loom_graph_op(g, p);
            int os = 0;
            while (os < po->n_out && po->out[os] != o->in[k]) os++;
            if (n < MAX_LINKS) links[n++] = (loom_periodic_link){i, k, p - fa, os};
        }
    }
    return n;
}

static uint64_t links_hash(const loom_periodic_link *links, int32_t n)
{
    return n ? fnv(1469598103934665603ull, links, (size_t)n * sizeof *links) : 0;
}

/* Per-graph data: signatures, link hashes, the saved-tensor table. */
typedef struct {
    uint64_t *sig, *links;
    int32_t *saved_by;
    bool owned;
} graph_memo;

/* Computed once by loom_graph_finalize: O(1) here, and any change of batch,
 * sequence or sizes shows. */
static uint64_t graph_fingerprint(const loom_graph *g) { return loom_graph_fingerprint(g); }

static loom_status memo_get(loom_intra_cache *c, const loom_graph *g, graph_memo *m, loom_error *err)
{
    uint64_t fp = c ? graph_fingerprint(g) : 0;
    if (c && c->g == g && c->g_fp == fp) {
        *m = (graph_memo){c->sig, c->links, c->saved_by, false};
        return LOOM_OK;
    }
    int32_t L = loom_graph_layer_count(g);
    m->sig = malloc(((size_t)L + 1) * sizeof(uint64_t));
    m->links = malloc(((size_t)L + 1) * sizeof(uint64_t));
    m->saved_by = NULL;
    m->owned = true;
    if (!m->sig || !m->links) {
        free(m->sig), free(m->links);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (layer signatures)");
    }
    for (int32_t l = 0; l < L; l++) m->sig[l] = loom_graph_layer_signature(g, l);
    for (int32_t l = 0; l < L; l++) {
        loom_periodic_link links[MAX_LINKS];
        m->links[l] = links_hash(links, layer_links(g, l, m->sig, links));
    }
    loom_status s = loom_strategy_saved_by(g, &m->saved_by, err);
    if (s) {
        free(m->sig), free(m->links);
        return s;
    }
    if (c) {
        forget_graph(c);
        c->g = g;
        c->g_fp = fp;
        c->sig = m->sig, c->links = m->links, c->saved_by = m->saved_by;
        m->owned = false;
    }
    return LOOM_OK;
}

static void memo_free(graph_memo *m)
{
    if (!m->owned) return;
    free(m->sig), free(m->links), free(m->saved_by);
}

/* ---- solving one layer ------------------------------------------------------------------ */

typedef struct {
    const loom_graph *g;
    const loom_cost_model *cm;
    const loom_intra_opts *o;
    loom_strategy_ctx sctx;
    loom_layer_weights w;
    graph_memo memo;
    loom_intra_cache *cache;
    uint64_t cm_fp;
    double solve_time_s;
    int32_t solves, hits;
} run_ctx;

/* The cost model's identity beyond its address: the cluster's shape, links
 * and device, and every calibrated efficiency. */
static uint64_t cost_model_fingerprint(const loom_cost_model *cm)
{
    const loom_cluster *c = loom_cost_model_cluster(cm);
    const loom_calib *k = loom_cost_model_calib(cm);
    double v[] = {(double)c->nodes, (double)c->gpus_per_node, c->intra.bandwidth_Bps,
                  c->intra.latency_s, c->inter.bandwidth_Bps, c->inter.latency_s,
                  c->gpu.hbm_bw_Bps, (double)c->gpu.hbm_bytes, k->gemm_eff_max, k->gemm_half_flops,
                  k->attn_eff, k->mem_eff, k->vector_eff, k->intra_link_eff, k->inter_link_eff,
                  k->kernel_overhead_s, k->attn_half_flops, k->attn_fa2_frac,
                  (double)loom_cost_model_attention(cm)};
    uint64_t h = fnv(14695981039346656037ull, v, sizeof v);
    h = fnv(h, c->gpu.peak_flops, sizeof c->gpu.peak_flops);
    return fnv(h, c->gpu.name, strlen(c->gpu.name));
}

static void fill_op(const loom_strategy *s, double act_bytes, intra_op *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->strategy, sizeof d->strategy, "%s", s->name);
    memcpy(d->in, s->in, sizeof d->in);
    memcpy(d->w, s->w, sizeof d->w);
    memcpy(d->out, s->out, sizeof d->out);
    memcpy(d->in_partial, s->in_partial, sizeof d->in_partial);
    d->cost = (loom_intra_op_cost){.compute_s = s->compute_s,
                                   .comm_s = s->comm_s,
                                   .grad_sync_s = s->grad_sync_s,
                                   .comm_bytes_fwd = (int64_t)llround(s->comm_bytes_fwd),
                                   .param_count = s->param_count,
                                   .param_count_local = s->param_count_local,
                                   .other_sync_s = s->other_sync_s,
                                   .act_bytes = (int64_t)llround(act_bytes),
                                   .core_act_bytes = (int64_t)llround(s->core_act_bytes),
                                   .fwd_compute_s = s->compute_s - s->bwd_compute_s,
                                   .fwd_comm_s = s->fwd_comm_s};
    memcpy(d->cost.dp_params, s->dp_params, sizeof s->dp_params);
}

/* Builds and solves layer l's ILP with the given per-layer budget. */
static loom_status solve_layer(run_ctx *r, int32_t l, double budget, loom_intra_layer **out,
                               loom_error *err)
{
    *out = NULL;
    const loom_graph *g = r->g;
    int32_t first, count;
    loom_graph_layer_ops(g, l, &first, &count);
    loom_periodic_link links[MAX_LINKS];
    int32_t nl = layer_links(g, l, r->memo.sig, links);
    loom_layer_problem *p = NULL;
    loom_ilp_solution sol = {0};
    loom_intra_layer *L = calloc(1, sizeof *L);
    if (!L) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (layer solution)");
    /* with a budget, pruning must keep memory-lean choices */
    loom_layer_weights w = r->w;
    w.memory_matters = budget > 0;
    loom_status s = loom_layer_problem_build(&r->sctx, first, count, links, nl, &w, &p, err);
    if (s) goto fail;
    loom_ilp_opts io;
    loom_ilp_opts_init(&io);
    io.time_limit_s = r->o->time_limit_s;
    io.memory_budget = budget;
    char lp[4096];
    if (r->o->debug_lp_path) {
        snprintf(lp, sizeof lp, "%s.L%d.lp", r->o->debug_lp_path, (int)l);
        io.lp_path = lp;
    }
    if ((s = loom_ilp_solve_glpk(loom_layer_problem_ilp(p), &io, &sol, err))) goto fail;
    r->solve_time_s += sol.solve_time_s;
    r->solves++;
    L->status = sol.status;
    L->min_mem = loom_layer_problem_min_memory(p);
    L->gap = sol.gap;
    L->solve_time_s = sol.solve_time_s;
    L->n_vars = sol.n_vars, L->n_cons = sol.n_cons;
    L->core_vars = sol.core_vars, L->core_cons = sol.core_cons;
    L->ops_before = count;
    L->ops_after = loom_layer_problem_num_sets(p);
    L->n_ops = count;
    if (sol.status != LOOM_ILP_INFEASIBLE) {
        loom_layer_problem_eval(p, sol.choice, &L->tot);
        L->ops = calloc((size_t)count, sizeof *L->ops);
        if (!L->ops) {
            s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (layer solution)");
            goto fail;
        }
        for (int32_t i = 0; i < count; i++) {
            fill_op(loom_layer_problem_strategy(p, i, sol.choice),
                    loom_layer_problem_act_bytes(p, i, sol.choice), &L->ops[i]);
            loom_layer_problem_op_reshard(p, i, sol.choice, &L->ops[i].cost.reshard_fwd_s,
                                          &L->ops[i].cost.reshard_bwd_s);
        }
    }
    loom_ilp_solution_free(&sol);
    loom_layer_problem_destroy(p);
    L->refs = 1;
    *out = L;
    return LOOM_OK;
fail:
    if (s) loom_error_prefix(err, "layer %d on mesh %lldx%lld", (int)l,
                             (long long)r->sctx.mesh.mesh.n0, (long long)r->sctx.mesh.mesh.n1);
    loom_ilp_solution_free(&sol);
    loom_layer_problem_destroy(p);
    free(L->ops);
    free(L);
    return s;
}

/* The solved layer l (new reference), from the cache when possible. */
static loom_status get_layer(run_ctx *r, int32_t l, double budget, loom_intra_layer **out,
                             loom_error *err)
{
    layer_key k = {r->memo.sig[l], r->memo.links[l], r->sctx.mesh.mesh.n0, r->sctx.mesh.mesh.n1,
                   opts_hash(r->o), (const void *)r->cm, r->cm_fp, budget};
    uint64_t h = key_hash(&k);
    loom_intra_layer *L = r->cache ? cache_get(r->cache, &k, h) : NULL;
    if (L) {
        r->hits++;
        r->cache->hits++;
        L->refs++;
        *out = L;
        return LOOM_OK;
    }
    loom_status s = solve_layer(r, l, budget, &L, err);
    if (s) return s;
    if (r->cache) {
        r->cache->solves++;
        if (!cache_put(r->cache, &k, h, L)) {
            layer_unref(L);
            return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (intra-op cache)");
        }
    }
    *out = L;
    return LOOM_OK;
}

/* ---- ranges ------------------------------------------------------------------------------- */

/* Resharding between layer l and l+1 of different kinds, for their chosen
 * specs (not optimised across the boundary). */
static void boundary(const run_ctx *r, int32_t l, const loom_intra_layer *a,
                     const loom_intra_layer *b, loom_comm *fwd, double *bwd_s)
{
    const loom_graph *g = r->g;
    int32_t fa, na, fb, nb;
    loom_graph_layer_ops(g, l, &fa, &na);
    loom_graph_layer_ops(g, l + 1, &fb, &nb);
    *fwd = (loom_comm){0, 0};
    *bwd_s = 0;
    for (int32_t i = 0; i < nb; i++) {
        const loom_op *o = loom_graph_op(g, fb + i);
        for (int k = 0; k < o->n_in; k++) {
            const loom_tensor *t = loom_graph_tensor(g, o->in[k]);
            if (t->producer < fa || t->producer >= fa + na) continue;
            const loom_op *po = loom_graph_op(g, t->producer);
            int os = 0;
            while (os < po->n_out && po->out[os] != o->in[k]) os++;
            const intra_op *src = &a->ops[t->producer - fa], *dst = &b->ops[i];
            loom_comm f = loom_reshard_fwd(&r->sctx.mesh, t, &src->out[os], &dst->in[k]);
            fwd->time_s += f.time_s;
            fwd->bytes += f.bytes;
            if (r->o->train)
                *bwd_s += loom_reshard_bwd(&r->sctx.mesh, t, &dst->in[k], dst->in_partial[k],
                                           &src->out[os], 0).time_s;
        }
    }
}

static double quantize_budget(double b, double lo)
{
    /* round down to the grid 2^(k/32), never below lo */
    double q = exp2(floor(log2(b) * 32.0) / 32.0);
    return q < lo ? lo : q;
}

static void layer_weights(const loom_intra_opts *o, loom_layer_weights *w)
{
    double dp = o->dp_degree_outside > 1 ? (double)o->dp_degree_outside : 1.0;
    w->grad_sync_weight = o->train ? 1.0 / (double)(o->micro_batches > 0 ? o->micro_batches : 1) : 0;
    /* mixed-precision Adam (costs/memory.h), ZeRO stages dividing by dp */
    w->mem_param_bytes = o->zero_stage >= 3 ? 1.0 / dp : 1.0;
    w->mem_param_count = o->train ? LOOM_MEM_GRAD_BYTES / (o->zero_stage >= 2 ? dp : 1.0) +
                                        LOOM_MEM_OPTIM_BYTES / (o->zero_stage >= 1 ? dp : 1.0)
                                  : 0;
    w->mem_act = o->train ? (double)(o->act_multiplier > 0 ? o->act_multiplier : 1) : 0;
}

void loom_intra_result_free(loom_intra_result *r)
{
    if (!r) return;
    if (r->layers)
        for (int32_t i = 0; i <= r->layer_last - r->layer_first; i++) layer_unref(r->layers[i]);
    free(r->layers);
    r->layers = NULL;
}

static loom_status check_args(const loom_graph *g, const loom_cost_model *cm, int32_t lf,
                              int32_t ll, loom_mesh_shape mesh, loom_error *err)
{
    int32_t L = loom_graph_layer_count(g);
    if (!cm) return loom_error_set(err, LOOM_ERR_INVALID, "intra-op solve: no cost model");
    if (lf < 0 || ll < lf || ll >= L)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "intra-op solve: layer range [%d, %d] is not inside [0, %d] of %s",
                              (int)lf, (int)ll, (int)L - 1, loom_graph_name(g));
    if (mesh.n0 < 1 || mesh.n1 < 1 || mesh.n0 > 1048576 || mesh.n1 > 1048576)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "intra-op solve: mesh %lldx%lld (expected sizes >= 1)",
                              (long long)mesh.n0, (long long)mesh.n1);
    for (int32_t l = lf; l <= ll; l++) {
        int32_t f, n;
        loom_graph_layer_ops(g, l, &f, &n);
        if (n == 0)
            return loom_error_set(err, LOOM_ERR_INVALID, "intra-op solve: layer %d of %s has no ops",
                                  (int)l, loom_graph_name(g));
    }
    return LOOM_OK;
}

/* ---- tied weights --------------------------------------------------------------------------- */

/* Each layer is solved on its own, so a weight two layers read (a tied
 * embedding: the token table is also the lm_head) is counted by both. A
 * GPU holding both holds the tensor once and synchronises its gradient
 * once (loom_memory_weight_first_use, the rule loom eval applies too):
 * take the later readers' shares of it back out of the totals. */
static loom_status tied_weights(const run_ctx *r, loom_intra_result *out, loom_error *err)
{
    const loom_graph *g = r->g;
    int32_t *first_op = calloc((size_t)loom_graph_num_tensors(g) + 1, sizeof *first_op);
    if (!first_op) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (tied weights)");
    for (int32_t l = out->layer_first; l <= out->layer_last; l++) {
        const loom_intra_layer *L = out->layers[l - out->layer_first];
        int32_t first, count;
        loom_graph_layer_ops(g, l, &first, &count);
        for (int32_t i = first; L->ops && i < first + count; i++) {
            const loom_op *o = loom_graph_op(g, i);
            const intra_op *d = &L->ops[i - first];
            /* the op's parameters per GPU, and the share of tensors read before */
            double all = 0, tied = 0, tied_bytes = 0;
            for (int k = 0; k < o->n_w; k++) {
                bool dup = false;
                for (int j = 0; j < k; j++) dup = dup || o->w[j] == o->w[k];
                bool fresh = loom_memory_weight_first_use(g, i, k, first_op);
                if (dup) continue;
                const loom_tensor *w = loom_graph_tensor(g, o->w[k]);
                int64_t shards = loom_spec_shards(&d->w[k], w->ndim, &r->sctx.mesh);
                double shard = (double)((loom_tensor_numel(w) + shards - 1) / shards);
                all += shard;
                if (!fresh) tied += shard, tied_bytes += loom_spec_bytes(&d->w[k], w, &r->sctx.mesh);
            }
            if (!(tied > 0) || !(all > 0)) continue;
            double f = tied / all;
            const loom_intra_op_cost *c = &d->cost;
            out->param_count_per_gpu -= (int64_t)llround(tied);
            out->param_count_local_per_gpu -= (int64_t)llround(f * (double)c->param_count_local);
            out->param_bytes_per_gpu -= (int64_t)llround(tied_bytes);
            out->grad_sync_s -= f * c->grad_sync_s;
            out->other_sync_s -= f * c->other_sync_s;
            for (int a = 0; a < 4; a++) out->dp_params_per_gpu[a] -= f * c->dp_params[a];
            out->objective_s -= f * c->grad_sync_s / (double)(r->o->micro_batches > 0 ? r->o->micro_batches : 1);
        }
    }
    free(first_op);
    return LOOM_OK;
}

loom_status loom_intra_solve(const loom_graph *g, const loom_cost_model *cm, int32_t layer_first,
                             int32_t layer_last, loom_mesh_shape mesh, const loom_intra_opts *o,
                             loom_intra_result *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    loom_intra_opts defaults;
    if (!o) loom_intra_opts_init(&defaults), o = &defaults;
    loom_status s = check_args(g, cm, layer_first, layer_last, mesh, err);
    if (s) return s;
    run_ctx r = {.g = g, .cm = cm, .o = o, .cache = o->cache, .cm_fp = cost_model_fingerprint(cm)};
    loom_strategy_ctx_init(&r.sctx, g, cm, mesh, o->train, o->megatron_only);
    r.sctx.megatron_cp = o->megatron_only && o->megatron_cp;
    loom_mesh_ctx_set_ep_span(&r.sctx.mesh, intra_ep_span(o));
    r.sctx.tp_overlap = o->megatron_only && o->tp_comm_overlap;
    r.sctx.expert_split = o->megatron_only ? o->expert_split : 0;
    r.sctx.expert_fold = o->megatron_only && o->expert_fold;
    r.sctx.zero = o->zero_stage;
    r.sctx.micro_batches = o->micro_batches;
    layer_weights(o, &r.w);
    if ((s = memo_get(o->cache, g, &r.memo, err))) return s;
    r.sctx.saved_by = r.memo.saved_by;

    int32_t n = layer_last - layer_first + 1;
    out->layer_first = layer_first;
    out->layer_last = layer_last;
    out->layers = calloc((size_t)n, sizeof *out->layers);
    if (!out->layers) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (intra-op result)");
        goto fail;
    }
    /* Within one call, identical layers share a solve even without a cache. */
    loom_intra_cache *local = NULL;
    if (!r.cache) {
        if ((s = loom_intra_cache_create(&local, err))) goto fail;
        r.cache = local;
    }
    double mem = 0, min_sum = 0;
    for (int32_t i = 0; i < n && !s; i++) {
        s = get_layer(&r, layer_first + i, 0, &out->layers[i], err);
        if (!s) mem += out->layers[i]->tot.mem_bytes, min_sum += out->layers[i]->min_mem;
    }
    double B = (double)o->memory_budget_bytes;
    bool infeasible = false;
    if (!s && B > 0 && mem > B) {
        if (min_sum > B) infeasible = true;
        for (int32_t i = 0; i < n && !s && !infeasible; i++) {
            loom_intra_layer *L = out->layers[i];
            double b = quantize_budget(B * L->min_mem / min_sum, L->min_mem);
            if (b >= L->tot.mem_bytes) continue;   /* already fits its share */
            loom_intra_layer *nl;
            if ((s = get_layer(&r, layer_first + i, b, &nl, err))) break;
            layer_unref(L);
            out->layers[i] = nl;
            if (nl->status == LOOM_ILP_INFEASIBLE) infeasible = true;
        }
    }
    loom_intra_cache_destroy(local);
    if (s) goto fail;

    /* Totals: each layer, then the boundaries between different kinds. */
    out->status = LOOM_ILP_OPTIMAL;
    for (int32_t i = 0; i < n; i++) {
        const loom_intra_layer *L = out->layers[i];
        if (L->status > out->status) out->status = L->status;
        bool first_of_kind = true;
        for (int32_t j = 0; j < i && first_of_kind; j++) first_of_kind = out->layers[j] != L;
        if (first_of_kind) {
            out->n_vars += L->n_vars, out->n_cons += L->n_cons;
            out->core_vars += L->core_vars, out->core_cons += L->core_cons;
            out->ops_before_merge += L->ops_before, out->ops_after_merge += L->ops_after;
        }
        out->gap = fmax(out->gap, L->gap);
        if (L->status == LOOM_ILP_INFEASIBLE) continue;
        out->compute_s += L->tot.compute_s;
        out->comm_s += L->tot.comm_s + L->tot.reshard_s;
        out->reshard_s += L->tot.reshard_s;
        out->grad_sync_s += L->tot.grad_sync_s;
        out->objective_s += L->tot.objective_s;
        out->comm_bytes_fwd += (int64_t)llround(L->tot.comm_bytes_fwd);
        out->param_count_per_gpu += L->tot.param_count;
        out->param_count_local_per_gpu += L->tot.param_count_local;
        for (int a = 0; a < 4; a++) out->dp_params_per_gpu[a] += L->tot.dp_params[a];
        out->other_sync_s += L->tot.other_sync_s;
        out->param_bytes_per_gpu += (int64_t)llround(L->tot.param_bytes);
        out->act_bytes_per_gpu += (int64_t)llround(L->tot.act_bytes);
        out->memory_bytes_per_gpu += (int64_t)llround(L->tot.mem_bytes);
    }
    if (infeasible) out->status = LOOM_ILP_INFEASIBLE;
    if (out->status != LOOM_ILP_INFEASIBLE && (s = tied_weights(&r, out, err))) goto fail;
    for (int32_t i = 0; i + 1 < n && out->status != LOOM_ILP_INFEASIBLE; i++) {
        int32_t l = layer_first + i;
        if (r.memo.sig[l] == r.memo.sig[l + 1]) continue;   /* priced by the periodic edge */
        loom_comm f;
        double b;
        boundary(&r, l, out->layers[i], out->layers[i + 1], &f, &b);
        out->comm_s += f.time_s + b;
        out->reshard_s += f.time_s + b;
        out->objective_s += f.time_s + b;
        out->comm_bytes_fwd += (int64_t)llround(f.bytes);
    }
    out->time_s = out->compute_s + out->comm_s;
    out->solve_time_s = r.solve_time_s;
    out->n_solves = r.solves;
    out->n_cache_hits = o->cache ? r.hits : 0;
    memo_free(&r.memo);
    return LOOM_OK;
fail:
    memo_free(&r.memo);
    loom_intra_result_free(out);
    return s;
}

/* ---- per-op answers --------------------------------------------------------------------------- */

static const intra_op *op_of(const loom_intra_result *r, const loom_graph *g, int32_t op)
{
    if (!r->layers || r->status == LOOM_ILP_INFEASIBLE || op < 0 || op >= loom_graph_num_ops(g))
        return NULL;
    int32_t l = loom_graph_op(g, op)->layer;
    if (l < r->layer_first || l > r->layer_last) return NULL;
    const loom_intra_layer *L = r->layers[l - r->layer_first];
    if (!L || !L->ops) return NULL;
    int32_t first, count;
    loom_graph_layer_ops(g, l, &first, &count);
    return &L->ops[op - first];
}

const char *loom_intra_op_strategy(const loom_intra_result *r, const loom_graph *g, int32_t op)
{
    const intra_op *d = op_of(r, g, op);
    return d ? d->strategy : NULL;
}

int32_t loom_intra_operand(const loom_graph *g, int32_t op, loom_operand which, int k)
{
    if (op < 0 || op >= loom_graph_num_ops(g) || (unsigned)which > LOOM_OPERAND_OUTPUT || k < 0)
        return -1;
    const loom_op *o = loom_graph_op(g, op);
    int n = which == LOOM_OPERAND_INPUT ? o->n_in : which == LOOM_OPERAND_WEIGHT ? o->n_w : o->n_out;
    if (k >= n) return -1;
    return which == LOOM_OPERAND_INPUT ? o->in[k] : which == LOOM_OPERAND_WEIGHT ? o->w[k] : o->out[k];
}

bool loom_intra_op_spec(const loom_intra_result *r, const loom_graph *g, int32_t op,
                        loom_operand which, int k, loom_spec *out)
{
    const intra_op *d = op_of(r, g, op);
    if (!d || loom_intra_operand(g, op, which, k) < 0) return false;
    *out = which == LOOM_OPERAND_INPUT ? d->in[k] : which == LOOM_OPERAND_WEIGHT ? d->w[k] : d->out[k];
    return true;
}

bool loom_intra_op_cost_get(const loom_intra_result *r, const loom_graph *g, int32_t op,
                            loom_intra_op_cost *out)
{
    const intra_op *d = op_of(r, g, op);
    if (!d) return false;
    *out = d->cost;
    return true;
}
