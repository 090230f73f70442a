/*
 * stage_search.c — the search loops of the Alpa planner (stage_search.h):
 * GPUs used × replicas × micro-batch size, and for each the general and
 * uniform stage DPs and Megatron's even / first-last-uneven splits with
 * 1F1B and interleaving v = 2..8 (unclustered, so every such split is a
 * candidate whatever the clustering), every candidate evaluated exactly (stage_costs.c) and the best kept.
 *
 * Pruning that never loses a plan: a replica whose GPUs cannot even hold
 * the model state (weights, gradients, sharded Adam state, KV cache) is
 * skipped before any ILP runs — counting a routed expert's state as spread
 * over every replica, since Megatron's expert groups may span them all (it
 * used to count the whole model on one replica, which ruled out
 * DeepSeek-V3 on 16 replicas of 16 GPUs with EP 8 over 4 of them). Everything else is bounded by sizes: layers
 * are clustered (24 clusters for the general DP, 64 for the uniform one),
 * stage sub-meshes span at most general_max_gpus GPUs, and the general DP
 * runs only for replicas of at most general_max_gpus GPUs; larger replicas
 * use uniform stages, which is also what keeps 16K-GPU clusters fast.
 *
 * Units: seconds, bytes per GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/memory.h"
#include "base/clock.h"
#include "solver/stage_search_impl.h"

#define MAX_LOGICAL 8              /* logical shapes per sub-mesh */
#define MAX_SPACES 19               /* strategy spaces per logical mesh: full, Megatron data
                                        or context parallel on axis 0, each of those two
                                        with expert parallelism across 2 .. 256 replicas */
#define MAX_SHAPES (MAX_SPACES * MAX_LOGICAL)
#define MAX_VPP 8      /* interleaving depths tried: 2 .. MAX_VPP chunks per rank */
#define DP_GAP 0.005   /* t_max candidates closer than 0.5 % are skipped */

void loom_search_options_init(loom_search_options *o)
{
    memset(o, 0, sizeof *o);
    o->max_clusters = 24;
    o->max_micro_batch = 8;
    o->general_max_gpus = 16;
    o->zero = -1;
}

loom_status loom_search_create(const loom_problem *p, const loom_search_options *o,
                               loom_search **out, loom_error *err)
{
    *out = NULL;
    if (!p->model || !p->cm || p->gbs < 1)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "stage search: needs a model, a cost model and gbs >= 1");
    loom_search *s = calloc(1, sizeof *s);
    if (!s) return loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
    s->pb = *p;
    if (o) s->opt = *o;
    else loom_search_options_init(&s->opt);
    if (s->opt.max_clusters < 1) s->opt.max_clusters = 24;
    if (s->opt.max_micro_batch < 1) s->opt.max_micro_batch = 8;
    if (s->opt.general_max_gpus < 1) s->opt.general_max_gpus = 16;
    s->c = loom_cost_model_cluster(p->cm);
    s->cm = p->cm;
    s->cal = loom_cost_model_calib(p->cm);
    s->context = p->seq > 0 ? p->seq : 2048;
    s->seq_tokens = s->context;
    loom_status st = loom_intra_cache_create(&s->cache, err);
    if (!st) st = loom_stage_workspace_create(&s->ws, err);
    /* an NVLink domain with a power-of-two tile: the second layout */
    s->has_tile = loom_cluster_tile(s->c, &s->tile);
    s->track_groups = s->c->gpus_per_node > 8;
    if (!st && s->has_tile) st = loom_cost_model_view(p->cm, &s->tile, &s->tile_cm, err);
    if (st) {
        loom_intra_cache_destroy(s->cache);
        loom_stage_workspace_destroy(s->ws);
        free(s);
        return st;
    }
    *out = s;
    return LOOM_OK;
}

void loom_search_destroy(loom_search *s)
{
    if (!s) return;
    for (int i = 0; i < s->ng; i++) {
        loom_graph_destroy(s->graphs[i]);
        free(s->sigs[i]);
    }
    loom_search_tabs_free(s);
    loom_search_eval_free(&s->res.eval);
    loom_intra_cache_destroy(s->cache);
    loom_stage_workspace_destroy(s->ws);
    loom_cost_model_destroy(s->tile_cm);
    free(s->keys);
    free(s);
}

const loom_problem *loom_search_problem(const loom_search *s) { return &s->pb; }

bool loom_search_use_layout(loom_search *s, bool tiled)
{
    bool was = s->tiled;
    s->tiled = tiled && s->has_tile;
    s->c = s->tiled ? &s->tile : loom_cost_model_cluster(s->pb.cm);
    s->cm = s->tiled ? s->tile_cm : s->pb.cm;
    return was;
}

const loom_cluster *loom_search_cluster(const loom_search *s, const loom_search_config *cfg)
{
    return cfg->tiled && s->has_tile ? &s->tile : loom_cost_model_cluster(s->pb.cm);
}

loom_status loom_search_graph(loom_search *s, int64_t b, const loom_graph **out, loom_error *err)
{
    for (int i = 0; i < s->ng; i++)
        if (s->graph_b[i] == b) {
            *out = s->graphs[i];
            return LOOM_OK;
        }
    if (s->ng == LOOM_SEARCH_MAX_GRAPHS)
        return loom_error_set(err, LOOM_ERR_LIMIT, "stage search: too many micro-batch sizes");
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = s->pb.seq;
    o.dtype = s->pb.dtype;
    o.flash_attention = s->pb.flash_attention;
    o.batch = b;
    if (s->pb.inference) o.seq = 1;   /* one decode step: a new token per sequence */
    loom_graph *g;
    loom_status st = loom_model_source_build(s->pb.model, &o, &g, err);
    if (st) return st;
    int32_t n = loom_graph_layer_count(g);
    uint64_t *sig = malloc(sizeof *sig * ((size_t)n + 1));
    if (!sig) {
        loom_graph_destroy(g);
        return loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
    }
    for (int32_t l = 0; l < n; l++) sig[l] = loom_graph_layer_signature(g, l);
    s->graph_b[s->ng] = b;
    s->sigs[s->ng] = sig;
    s->graphs[s->ng++] = g;
    *out = g;
    return LOOM_OK;
}

const uint64_t *loom_search_sigs(const loom_search *s, const loom_graph *g)
{
    for (int i = 0; i < s->ng; i++)
        if (s->graphs[i] == g) return s->sigs[i];
    return NULL;
}

/* ---- one (replica size, replicas, micro-batch) point ------------------------------ */

typedef struct {
    int64_t D, dp, b, M, seqs;
    int zs[3], nz;                       /* ZeRO stages on offer whose model state fits */
    int zero;                            /* the one being tried */
    int32_t nm;                          /* sub-meshes */
    loom_submesh sub[LOOM_STAGE_MAX_MESHES];
    int32_t nshape[LOOM_STAGE_MAX_MESHES];   /* (logical shape, strategy space) entries */
    int64_t shape[LOOM_STAGE_MAX_MESHES][MAX_SHAPES][2];
    loom_search_space space[LOOM_STAGE_MAX_MESHES][MAX_SHAPES];
    const loom_layer_tab *tab[LOOM_STAGE_MAX_MESHES][MAX_SHAPES];
    int32_t n_rc;                        /* recompute options: none (and full, and selective
                                            with unfused attention): RC_* below */
    int32_t n_layers;
    const loom_graph *g;
} point;

int64_t loom_search_work(const loom_search *s)
{
    int64_t solves = 0;
    loom_intra_cache_stats(s->cache, &solves, NULL);
    return s->res.configs_evaluated + solves;
}

static bool stop_now(loom_search *s)
{
    if (s->opt.stop && *s->opt.stop) {
        s->res.stopped = true;
        return true;
    }
    /* the time limit takes effect once there is a plan to return */
    if (s->have_best && s->opt.time_limit_s > 0 &&
        loom_clock_s() - s->t_start > s->opt.time_limit_s) {
        s->res.timed_out = true;
        return true;
    }
    /* so does the work limit: the same point on every machine */
    if (s->have_best && s->opt.max_work > 0 && loom_search_work(s) >= s->opt.max_work) {
        s->res.timed_out = true;
        return true;
    }
    return false;
}

/* Does cfg (evaluated: ev) respect the pinned dimensions? */
static bool pinned_ok(loom_search *s, const loom_search_config *cfg,
                      const loom_search_eval_result *ev)
{
    const loom_search_options *o = &s->opt;
    const loom_graph *g;
    loom_error e2;
    if (o->pin_ep && (loom_search_graph(s, cfg->mbs, &g, &e2) != LOOM_OK ||
                      !loom_search_ep_is(g, cfg, ev, o->pin_ep)))
        return false;
    if ((o->pin_dp && cfg->dp != o->pin_dp) || (o->pin_pp && cfg->pp != o->pin_pp) ||
        (o->pin_vpp && cfg->vpp != o->pin_vpp) || (o->pin_mbs && cfg->mbs != o->pin_mbs))
        return false;
    for (int32_t i = 0; o->pin_tp && i < cfg->n_stages; i++)
        if (cfg->stages[i].mesh.n1 != o->pin_tp) return false;
    for (int32_t i = 0; o->pin_cp && i < cfg->n_stages; i++) {
        const loom_search_stage *x = &cfg->stages[i];
        if ((x->megatron && x->context_parallel ? x->mesh.n0 : 1) != o->pin_cp ||
            (o->pin_cp > 1 && !x->megatron))
            return false;
    }
    return true;
}

static bool pins_given(const loom_search_options *o)
{
    return o->pin_tp || o->pin_pp || o->pin_dp || o->pin_mbs || o->pin_vpp || o->pin_cp ||
           o->pin_ep;
}

/* "tp 8, ep 4": the pinned sizes, for messages. */
static void pins_text(const loom_search_options *o, char *dst, size_t cap)
{
    const char *names[] = {"tp", "pp", "dp", "cp", "ep", "mbs", "vpp"};
    int64_t vals[] = {o->pin_tp, o->pin_pp, o->pin_dp, o->pin_cp, o->pin_ep, o->pin_mbs,
                      o->pin_vpp};
    size_t n = 0;
    dst[0] = '\0';
    for (int i = 0; i < 7 && n < cap; i++)
        if (vals[i])
            n += (size_t)snprintf(dst + n, cap - n, "%s%s %lld", n ? ", " : "", names[i],
                                  (long long)vals[i]);
}

/* Keeps (cfg, ev) among the top runners-up when it is distinct from them
 * or better than its twin. */
static void keep_top(loom_search *s, const loom_search_config *cfg, const loom_search_eval_result *ev)
{
    int32_t cap = s->opt.top < LOOM_SEARCH_TOP_MAX ? s->opt.top : LOOM_SEARCH_TOP_MAX;
    if (cap < 1) cap = 1;
    const loom_search_stage *s0 = &cfg->stages[0];
    loom_search_top e = {.dp = cfg->dp, .pp = cfg->pp, .vpp = cfg->vpp, .mbs = cfg->mbs,
                         .micro_batches = cfg->micro_batches, .tp = s0->mesh.n1,
                         .stage_dp = s0->context_parallel ? 1 : s0->mesh.n0,
                         .cp = s0->context_parallel ? s0->mesh.n0 : 1, .zero = cfg->zero,
                         .megatron = true, .tp_comm_overlap = true, .tiled = cfg->tiled,
                         .step_s = s->pb.inference ? ev->latency_s : ev->step_s,
                         .score = ev->score, .memory_per_gpu_bytes = ev->memory_per_gpu_bytes};
    for (int32_t i = 0; i < cfg->n_stages; i++) {
        const loom_search_stage *x = &cfg->stages[i];
        e.megatron &= x->megatron;
        e.tp_comm_overlap &= x->tp_comm_overlap;
        e.recompute_stages += x->recompute != LOOM_RECOMPUTE_NONE;
        if (x->mesh.n1 != e.tp) e.tp = 0;   /* mixed: no one TP size */
        if ((x->context_parallel ? x->mesh.n0 : 1) != e.cp) e.cp = 0;
    }
    loom_search_top *t = s->res.top;
    int32_t n = s->res.n_top, at = n;
    for (int32_t i = 0; i < n; i++)
        if (t[i].dp == e.dp && t[i].pp == e.pp && t[i].vpp == e.vpp && t[i].mbs == e.mbs &&
            t[i].tp == e.tp && t[i].stage_dp == e.stage_dp && t[i].cp == e.cp &&
            t[i].zero == e.zero && t[i].megatron == e.megatron &&
            t[i].tp_comm_overlap == e.tp_comm_overlap && t[i].tiled == e.tiled &&
            t[i].recompute_stages == e.recompute_stages) {
            if (t[i].score <= e.score) return;
            at = i;   /* its twin, now replaced */
            break;
        }
    if (at == n) {
        if (n == cap && t[n - 1].score <= e.score) return;
        if (n < cap) s->res.n_top = ++n;
        at = n - 1;
    }
    while (at > 0 && t[at - 1].score > e.score) t[at] = t[at - 1], at--;
    t[at] = e;
}

/* Keeps cfg if it fits and beats the best; takes ownership of ev either way. */
static void consider(loom_search *s, const loom_search_config *cfg, loom_search_eval_result *ev)
{
    s->res.configs_evaluated++;
    bool pinned = pinned_ok(s, cfg, ev);
    s->pinned_candidates += pinned;
    bool ok = ev->fits && pinned;
    if (s->pb.objective == LOOM_OBJ_THROUGHPUT && s->pb.latency_bound_s > 0 &&
        ev->latency_s > s->pb.latency_bound_s)
        ok = false;
    if (ok) keep_top(s, cfg, ev);
    /* the best of each layout, for the plan's account of the NVLink domain */
    int lay = cfg->tiled ? 1 : 0;
    if (ok && (!s->have_lay[lay] || ev->score < s->lay_score[lay] * (1 - 1e-12))) {
        s->have_lay[lay] = true;
        s->lay_score[lay] = ev->score;
        s->lay_step[lay] = s->pb.inference ? ev->latency_s : ev->step_s;
        s->lay_best[lay] = *cfg;
    }
    /* ... and on each side of 8 GPUs per tensor- or expert-parallel group */
    const loom_graph *g;
    loom_error e2;
    if (ok && s->track_groups && loom_search_graph(s, cfg->mbs, &g, &e2) == LOOM_OK) {
        int big = loom_search_largest_group(g, cfg, ev) > 8;
        if (!s->have_grp[big] || ev->score < s->grp_score[big] * (1 - 1e-12)) {
            s->have_grp[big] = true;
            s->grp_score[big] = ev->score;
            s->grp_step[big] = s->pb.inference ? ev->latency_s : ev->step_s;
            s->grp_best[big] = *cfg;
        }
    }
    if (!ev->fits && pinned &&
        (s->res.min_memory_bytes == 0 || ev->memory_per_gpu_bytes < s->res.min_memory_bytes))
        s->res.min_memory_bytes = ev->memory_per_gpu_bytes;
    if (ok && (!s->have_best || ev->score < s->res.eval.score * (1 - 1e-12))) {
        loom_search_eval_free(&s->res.eval);
        s->res.eval = *ev;
        s->res.best = *cfg;
        s->have_best = true;
        memset(ev, 0, sizeof *ev);
        return;
    }
    loom_search_eval_free(ev);
}

/* Seconds per step per parameter of the data-parallel sync of shape entry
 * si on sub-mesh m, by the data-parallel mesh axes a weight's gradient is
 * partial over (loom_search_dp_group): the whole model's sync over that
 * group divided by its parameters (linear in bytes but for latency terms,
 * so each layer is charged its share). The replicas sit side by side when
 * their blocks tile nodes (loom_search_layout), else one after another. */
static void sync_rates(const loom_search *s, const point *pt, int32_t m, int32_t si,
                       double rate[4])
{
    const loom_layer_tab *t = pt->tab[m][si];
    int64_t size = loom_submesh_devices(pt->sub[m]), g = s->c->gpus_per_node;
    int64_t block = size * pt->dp;
    int64_t stride = block % g == 0 || (block < g && g % block == 0) ? size : pt->D;
    loom_mesh_shape mesh = {pt->shape[m][si][0], pt->shape[m][si][1]};
    for (unsigned a = 0; a < 4; a++) {
        double p_ref = 0;
        for (int32_t l = 0; t && t->ok && l < pt->n_layers; l++) p_ref += t->dp_params[4 * l + a];
        rate[a] = p_ref > 0 ? loom_search_dp_sync_s(s, p_ref,
                                                    loom_search_weight_dp_group(
                                                        s, mesh, a, pt->dp, stride, 0,
                                                        pt->space[m][si]),
                                                    pt->zero, pt->M, 1, false) /
                                  p_ref
                            : 0;
    }
}

/* Recompute options: a DP option code's rc (< n_rc) is one of the first
 * three; Megatron's splits also weigh partial recompute (try_interleaved). */
enum { RC_NONE, RC_FULL, RC_SELECTIVE, RC_PARTIAL };

static loom_recompute rc_setting(int rc)
{
    return rc == RC_FULL || rc == RC_PARTIAL ? LOOM_RECOMPUTE_FULL
           : rc == RC_SELECTIVE              ? LOOM_RECOMPUTE_SELECTIVE
                                             : LOOM_RECOMPUTE_NONE;
}

/* Per layer costs of option (mesh m, shape entry si, recompute rc: RC_NONE,
 * RC_FULL or RC_SELECTIVE) into c; rate: sync_rates of the entry. */
static void layer_cost(loom_search *s, const point *pt, int32_t l, int32_t m, int32_t si,
                       int rc, const double rate[4], loom_stage_cost *c)
{
    const loom_layer_tab *t = pt->tab[m][si];
    if (!t || !t->ok) {
        *c = (loom_stage_cost){INFINITY, 0, 0};
        return;
    }
    bool block = loom_memory_is_block(pt->g, l);
    bool r = rc == RC_FULL && block, sel = rc == RC_SELECTIVE;
    double sync = t->sync_s[l];
    for (int a = 0; a < 4; a++) sync += rate[a] * t->dp_params[4 * l + a];
    c->time_s = t->time_s[l] + (r ? t->rc_s[l] : 0) + (sel ? t->sel_s[l] : 0) + t->kv_read_s[l] +
                sync / (double)pt->M;
    c->static_bytes = loom_search_state_bytes(s, t->params[l], t->params_local[l], pt->dp, pt->zero) +
                      t->kv_per_seq[l] * (pt->seqs / pt->dp);
    int64_t act = s->pb.inference ? 0
                  : r             ? t->input_bytes[l]
                                  : t->act_bytes[l] - (sel ? t->core_bytes[l] : 0);
    c->act_bytes = (int64_t)((double)act * (1 + LOOM_MEM_FRAGMENTATION) + 0.5);
}

/* Fills the DP problem over clusters first[0..K] for the given meshes. */
/* Options are codes si · n_rc + rc (shape entry si, recompute rc); a DP
 * sees the codes in `codes[0..NO)`. */
static loom_status build_problem(loom_search *s, const point *pt, const int32_t *meshes,
                                 int32_t n_meshes, const int32_t *first, int32_t K,
                                 const int32_t *codes, int32_t NO,
                                 loom_stage_problem *p, loom_stage_cost **cost_out,
                                 int64_t **dev_out, int64_t **once_out, loom_error *err)
{
    loom_stage_cost *cost = calloc((size_t)K * (size_t)n_meshes * (size_t)NO, sizeof *cost);
    int64_t *dev = calloc((size_t)n_meshes, sizeof *dev);
    int64_t *once = calloc((size_t)n_meshes * (size_t)NO, sizeof *once);
    if (!cost || !dev || !once) {
        free(cost), free(dev), free(once);
        return loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
    }
    for (int32_t mi = 0; mi < n_meshes; mi++) {
        int32_t m = meshes[mi];
        dev[mi] = loom_submesh_devices(pt->sub[m]);
        for (int32_t o = 0; o < NO; o++) {
            int32_t si = codes[o] / pt->n_rc, rc = codes[o] % pt->n_rc;
            const loom_layer_tab *t = si < pt->nshape[m] ? pt->tab[m][si] : NULL;
            double rate[4] = {0};
            if (t) sync_rates(s, pt, m, si, rate);
            int64_t work = 0;
            if (t && t->ok) {
                if (s->pb.inference)
                    for (int32_t l = 0; l < pt->n_layers; l++)
                        work = t->act_bytes[l] > work ? t->act_bytes[l] : work;
                else if (rc == RC_FULL)
                    work = t->max_block_act;
                else if (rc == RC_SELECTIVE)
                    work = t->max_core;
            }
            once[mi * NO + o] = (int64_t)((double)work * (1 + LOOM_MEM_FRAGMENTATION) + 0.5);
            for (int32_t k = 0; k < K; k++) {
                loom_stage_cost *c =
                    &cost[((size_t)k * (size_t)n_meshes + (size_t)mi) * (size_t)NO + (size_t)o];
                *c = (loom_stage_cost){0, 0, 0};
                for (int32_t l = first[k]; l < first[k + 1]; l++) {
                    loom_stage_cost one;
                    layer_cost(s, pt, l, m, si, rc, rate, &one);
                    c->time_s += one.time_s;
                    c->static_bytes += one.static_bytes;
                    c->act_bytes += one.act_bytes;
                }
            }
        }
    }
    memset(p, 0, sizeof *p);
    p->n_layers = K;
    p->n_meshes = n_meshes;
    p->n_options = NO;
    p->mesh_devices = dev;
    p->cost = cost;
    p->stage_bytes = once;
    p->devices = pt->D;
    p->micro_batches = pt->M;
    p->capacity_bytes = loom_cluster_usable_bytes(s->c) - LOOM_MEM_RESERVED_BYTES;
    p->one_in_flight = s->pb.inference;
    p->tmax_rel_gap = DP_GAP;
    p->stop = s->opt.stop;
    p->ws = s->ws;
    *cost_out = cost, *dev_out = dev, *once_out = once;
    return LOOM_OK;
}

void loom_search_layout(int64_t gpus_per_node, loom_search_config *cfg)
{
    int64_t g = gpus_per_node, dp = cfg->dp, D = cfg->gpus_per_replica;
    int64_t pp = cfg->pp;
    loom_submesh super[LOOM_STAGE_MAX];
    int64_t first[LOOM_STAGE_MAX];
    int32_t rank_stage[LOOM_STAGE_MAX];
    bool ok = dp > 1 && pp <= LOOM_STAGE_MAX;
    for (int64_t r = 0; r < pp && ok; r++) {
        rank_stage[r] = -1;
        for (int32_t i = 0; i < cfg->n_stages && rank_stage[r] < 0; i++)
            if (cfg->stages[i].group == r) rank_stage[r] = i;
        if (rank_stage[r] < 0) ok = false;
        if (!ok) break;
        loom_submesh m = cfg->stages[rank_stage[r]].submesh;
        int64_t size = loom_submesh_devices(m) * dp;
        if (m.gpus == g) super[r] = (loom_submesh){m.nodes * dp, g};
        else if (size <= g && g % size == 0) super[r] = (loom_submesh){1, size};
        else if (size % g == 0) super[r] = (loom_submesh){size / g, g};
        else ok = false;
    }
    loom_error e;
    if (ok && loom_stage_place(super, (int32_t)pp, g, D * dp, first, &e) == LOOM_OK) {
        for (int32_t i = 0; i < cfg->n_stages; i++) {
            loom_search_stage *st = &cfg->stages[i];
            st->first_gpu = first[st->group];
            st->replica_stride = loom_submesh_devices(st->submesh);
        }
        return;
    }
    for (int32_t i = 0; i < cfg->n_stages; i++) cfg->stages[i].replica_stride = D;
}

static void set_space(loom_search_stage *st, loom_search_space sp)
{
    st->megatron = sp.megatron;
    st->context_parallel = sp.cp;
    st->tp_comm_overlap = sp.tp_overlap;
    st->ep_span = loom_search_space_ep_span(sp);
    st->expert_split = sp.megatron ? sp.experts : 0;
}

static bool partial_blocks(loom_search *s, const point *pt, int32_t m, int32_t si,
                           const double rate[4], const int32_t *lo_of, int64_t pp, double cap,
                           int64_t *n_out);

/* The kinds of strategy space try_interleaved weighs apart. */
enum { KIND_FULL, KIND_MEGATRON_DP, KIND_MEGATRON_CP, KIND_COUNT };

static int space_kind(loom_search_space sp)
{
    return !sp.megatron ? KIND_FULL : sp.cp ? KIND_MEGATRON_CP : KIND_MEGATRON_DP;
}

/* Turns a DP solution into a configuration (placing the sub-meshes). */
static loom_status to_config(loom_search *s, const point *pt, const int32_t *meshes,
                             const int32_t *first, const int32_t *codes,
                             const loom_stage_solution *sol, loom_search_config *cfg,
                             loom_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->mbs = pt->b, cfg->micro_batches = pt->M, cfg->dp = pt->dp;
    cfg->gpus_per_replica = pt->D, cfg->vpp = 1, cfg->pp = sol->n_stages;
    cfg->sequences = pt->seqs, cfg->zero = pt->zero, cfg->tiled = s->tiled;
    cfg->n_stages = sol->n_stages;
    loom_submesh subs[LOOM_STAGE_MAX];
    int64_t firsts[LOOM_STAGE_MAX];
    for (int32_t i = 0; i < sol->n_stages; i++) {
        const loom_stage_choice *ch = &sol->stages[i];
        int32_t m = meshes[ch->mesh], si = codes[ch->option] / pt->n_rc;
        loom_search_stage *st = &cfg->stages[i];
        st->first_layer = first[ch->first];
        st->last_layer = first[ch->last + 1] - 1;
        st->group = i;
        st->submesh = subs[i] = pt->sub[m];
        st->mesh = (loom_mesh_shape){pt->shape[m][si][0], pt->shape[m][si][1]};
        set_space(st, pt->space[m][si]);
        st->recompute = rc_setting(codes[ch->option] % pt->n_rc);
    }
    loom_status st = loom_stage_place(subs, sol->n_stages, s->c->gpus_per_node, pt->D, firsts, err);
    if (st) return st;
    for (int32_t i = 0; i < sol->n_stages; i++) cfg->stages[i].first_gpu = firsts[i];
    loom_search_layout(s->c->gpus_per_node, cfg);
    return LOOM_OK;
}

/* Runs one DP over the given meshes and options. Its plan goes into *cfg
 * and its estimated step into *estimate (INFINITY when nothing fits); with
 * `evaluate` the plan is also evaluated exactly and considered. */
static loom_status run_dp(loom_search *s, const point *pt, const int32_t *meshes, int32_t nm,
                          const int32_t *first, int32_t K, const int32_t *codes, int32_t NO,
                          bool evaluate, double *estimate, loom_search_config *cfg,
                          loom_error *err)
{
    loom_stage_problem p;
    loom_stage_cost *cost = NULL;
    int64_t *dev = NULL, *once = NULL;
    *estimate = INFINITY;
    loom_status st = build_problem(s, pt, meshes, nm, first, K, codes, NO, &p, &cost, &dev,
                                   &once, err);
    if (st) return st;
    loom_stage_solution *sol = malloc(sizeof *sol);
    if (!sol) {
        st = loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
        goto done;
    }
    loom_error e2 = {0};
    st = loom_stage_dp_solve(&p, sol, &e2);
    s->res.dp_runs += sol->dp_runs;
    if (st == LOOM_ERR_INFEASIBLE) {
        s->pinned_candidates++;   /* its options carry the pins; none fits */
        int64_t need = loom_stage_dp_min_memory(&p);
        if (need < INT64_MAX - LOOM_MEM_RESERVED_BYTES) need += LOOM_MEM_RESERVED_BYTES;
        if (s->res.min_memory_bytes == 0 || need < s->res.min_memory_bytes)
            s->res.min_memory_bytes = need;
        st = LOOM_OK;
        goto done;
    }
    if (st) {
        *err = e2;
        goto done;
    }
    if (sol->stopped) s->res.stopped = true;
    if ((st = to_config(s, pt, meshes, first, codes, sol, cfg, err))) goto done;
    *estimate = sol->step_s;
    if (evaluate) {
        loom_search_eval_result ev;
        if ((st = loom_search_eval(s, pt->g, cfg, &ev, err))) goto done;
        consider(s, cfg, &ev);
    }
done:
    free(sol);
    free(cost), free(dev), free(once);
    return st;
}

/* The DP over the given meshes, each plan evaluated exactly:
 *
 *  - once per Megatron-space option (logical mesh × recompute), on one
 *    sub-mesh: Megatron-LM takes one tensor-parallel size and one recompute
 *    setting for the whole model, so every stage uses the same option. This
 *    is the whole of a Megatron-only search's DP, and the full space runs
 *    it too, so that the full space's candidates contain the Megatron
 *    space's ones and its plan is never worse (issue 19);
 *  - in the full space also three times over mixed options: all of them,
 *    the Megatron-space ones, the full-space ones. Why the single-space
 *    runs: the DP charges a stage's gradient sync amortised per micro-batch
 *    while the step exposes it whole, so mixing the spaces it can favour
 *    weight-replicating options (large syncs) on stages that are not the
 *    bottleneck. Why the per-option runs as well: for the same reason the
 *    DP's estimate can rank one option above another that the exact step
 *    prefers (llama-3-8b on 8 H100, 2 replicas of 4 GPUs, ZeRO-2: tensor
 *    parallelism 2 is estimated at 3.422 s and a 4-way in-mesh data split
 *    at 3.433 s; exactly they take 3.376 s and 3.296 s), and a DP returns
 *    only its estimated best. */
static loom_status try_dps(loom_search *s, const point *pt, const int32_t *meshes, int32_t nm,
                           const int32_t *first, int32_t K, loom_error *err)
{
    loom_search_config *cfg = malloc(sizeof *cfg);
    if (!cfg) return loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
    int32_t NO = 0;
    for (int32_t mi = 0; mi < nm; mi++)
        if (pt->nshape[meshes[mi]] * pt->n_rc > NO) NO = pt->nshape[meshes[mi]] * pt->n_rc;
    loom_status st = LOOM_OK;
    bool meg_only = s->opt.megatron_only;
    int mixed = meg_only ? 0 : 3;
    /* passes 0..mixed-1: mixed; then one per option (one sub-mesh only) */
    int passes = mixed + (nm == 1 ? NO : 0);
    for (int pass = 0; pass < passes && !st; pass++) {
        int32_t codes[MAX_SHAPES * 3], n = 0;   /* shape entries x recompute options */
        for (int32_t o = 0; o < NO; o++) {
            int32_t si = o / pt->n_rc;
            bool meg = false;   /* entry si is the same space on every mesh holding it */
            for (int32_t mi = 0; mi < nm && !meg; mi++)
                meg = si < pt->nshape[meshes[mi]] && pt->space[meshes[mi]][si].megatron;
            if (pass < mixed ? pass == 0 || (pass == 1) == meg : o == pass - mixed && meg)
                codes[n++] = o;
        }
        double est;
        if (n) st = run_dp(s, pt, meshes, nm, first, K, codes, n, true, &est, cfg, err);
    }
    free(cfg);
    return st;
}

/* Blocks per chunk of Megatron's even split and its uneven variants
 * (--pipeline-model-parallel-layout, --decoder-first/last-pipeline-num-
 * layers): variant k of nb blocks over C chunks gives the middle chunks q
 * blocks each and the first and last chunks the rest, as evenly as
 * possible, each with 0..2 blocks fewer than q (they also hold the
 * embedding and the head; Meta's Llama 3.1 405B layout: 1 + 62 × 2 + 1).
 * Returns false when there is no such variant k. */
static bool chunk_counts(int32_t nb, int64_t C, int k, int32_t *count)
{
    if (C == 1) {
        if (k) return false;
        count[0] = nb;
        return true;
    }
    int found = 0;
    for (int32_t q = (int32_t)((nb + C - 1) / C); q >= 1; q--) {
        int64_t rest = (int64_t)nb - (C - 2) * q;
        if (rest < 2) continue;
        int64_t f = rest / 2, l = rest - f;
        if (l > q || q - f > 2) continue;
        if (found++ < k) continue;
        for (int64_t c = 0; c < C; c++) count[c] = q;
        count[0] = (int32_t)f, count[C - 1] = (int32_t)l;
        return true;
    }
    return false;
}

/* Megatron's schedules on uniform stages: pp ranks on sub-mesh m, v chunks
 * each (v = 1: plain 1F1B; v > 1: interleaved 1F1B, which needs the
 * micro-batches to be a multiple of pp), blocks split evenly or with
 * lighter first and last chunks (chunk_counts), the embedding with the
 * first chunk and the head with the last. Every (split, logical mesh,
 * recompute) option is first estimated from the layer tables — rank time
 * t_r, memory with the interleaved in-flight count,
 * T ≈ M·max t_r + (Σ t_r - max t_r)/v — and the best one that fits is
 * evaluated exactly. Together with the stage DP this makes every even or
 * first/last-uneven split Megatron can run a candidate, whatever the layer
 * clustering. Only the options of one kind of strategy space are weighed
 * at a time (`kind`: full, Megatron data parallel on axis 0, Megatron
 * context parallel): the full space runs this for every kind, so its
 * candidates contain a Megatron-only search's ones even where the estimate
 * would rank another kind's option first and the exact step would not. */
static loom_status try_interleaved(loom_search *s, const point *pt, int32_t m, int64_t v,
                                   int kind, loom_error *err)
{
    const loom_graph *g = pt->g;
    int32_t n = pt->n_layers, nb = 0, b0 = -1;
    for (int32_t l = 0; l < n; l++)
        if (loom_memory_is_block(g, l)) {
            if (b0 < 0) b0 = l;
            nb++;
        }
    int64_t size = loom_submesh_devices(pt->sub[m]), pp = pt->D / size, chunks = pp * v;
    if (nb == 0 || nb < chunks || (v > 1 && (pp < 2 || pt->M % pp)) ||
        chunks > LOOM_STAGE_MAX || pp > 64)
        return LOOM_OK;
    for (int32_t l = b0; l < b0 + nb; l++)   /* blocks must be contiguous slots */
        if (!loom_memory_is_block(g, l)) return LOOM_OK;
    int32_t count[LOOM_STAGE_MAX], best_count[LOOM_STAGE_MAX];
    double cap = (double)(loom_cluster_usable_bytes(s->c) - LOOM_MEM_RESERVED_BYTES);
    int32_t best_si = -1;
    int best_rc = RC_NONE;
    int64_t best_n = 0;
    double best_est = INFINITY, least = INFINITY;   /* least: the leanest option's peak rank */
    for (int k = 0; chunk_counts(nb, chunks, k, count); k++) {
        int32_t lo_of[LOOM_STAGE_MAX + 1];
        lo_of[0] = 0;
        for (int64_t c = 0, at = b0; c < chunks; c++) {
            at += count[c];
            lo_of[c + 1] = c == chunks - 1 ? n : (int32_t)at;
        }
        for (int32_t si = 0; si < pt->nshape[m]; si++) {
            const loom_layer_tab *t = pt->tab[m][si];
            if (!t || !t->ok || space_kind(pt->space[m][si]) != kind) continue;
            double rate[4];
            sync_rates(s, pt, m, si, rate);
            /* the DP's options, and full recompute on the first n blocks
             * of each rank only (1F1B; partial_blocks) */
            for (int rc = RC_NONE; rc <= RC_PARTIAL; rc++) {
                if (rc < RC_PARTIAL ? rc >= pt->n_rc : pt->n_rc < 2 || v != 1) continue;
                double tr[64] = {0}, st_b[64] = {0}, act_b[64] = {0};
                int64_t head = 0;   /* RC_PARTIAL: blocks recomputed at the head of each rank */
                if (rc == RC_PARTIAL && !partial_blocks(s, pt, m, si, rate, lo_of, pp, cap, &head))
                    continue;
                for (int64_t c = 0; c < chunks; c++)
                    for (int64_t l = lo_of[c], left = head; l < lo_of[c + 1]; l++) {
                        int one_rc = rc != RC_PARTIAL ? rc
                                     : loom_memory_is_block(g, (int32_t)l) && left-- > 0 ? RC_FULL
                                                                                         : RC_NONE;
                        loom_stage_cost one;
                        layer_cost(s, pt, (int32_t)l, m, si, one_rc, rate, &one);
                        tr[c % pp] += one.time_s;
                        st_b[c % pp] += (double)one.static_bytes;
                        act_b[c % pp] += (double)one.act_bytes;
                    }
                double mx = 0, sum = 0, peak = 0;
                double once = (double)(rc == RC_SELECTIVE ? t->max_core
                                       : rc != RC_NONE    ? t->max_block_act
                                                          : 0) *
                              (1 + LOOM_MEM_FRAGMENTATION);
                for (int64_t r = 0; r < pp; r++) {
                    double inflight = loom_memory_inflight_microbatches(pp, r, v, pt->M);
                    peak = fmax(peak, st_b[r] + inflight * act_b[r] + once);
                    sum += tr[r];
                    if (tr[r] > mx) mx = tr[r];
                }
                bool fits = peak <= cap;
                least = fmin(least, peak);
                double est = (double)pt->M * mx + (sum - mx) / (double)v;
                if (fits && est < best_est * (1 - 1e-12)) {
                    best_est = est, best_si = si, best_rc = rc, best_n = head;
                    memcpy(best_count, count, sizeof *count * (size_t)chunks);
                }
            }
        }
    }
    if (best_si < 0) {
        /* nothing fits: what the leanest option would need, for the message */
        if (least < 1e18) {
            s->pinned_candidates++;
            int64_t need = (int64_t)least + LOOM_MEM_RESERVED_BYTES;
            if (s->res.min_memory_bytes == 0 || need < s->res.min_memory_bytes)
                s->res.min_memory_bytes = need;
        }
        return LOOM_OK;
    }
    loom_search_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
    cfg->mbs = pt->b, cfg->micro_batches = pt->M, cfg->dp = pt->dp;
    cfg->gpus_per_replica = pt->D, cfg->vpp = v, cfg->pp = pp;
    cfg->sequences = pt->seqs, cfg->zero = pt->zero, cfg->tiled = s->tiled;
    cfg->n_stages = (int32_t)chunks;
    int32_t most = 0;   /* blocks of the fullest rank (v = 1: chunk) */
    for (int64_t c = 0, at = b0; c < chunks; c++) {
        loom_search_stage *x = &cfg->stages[c];
        x->first_layer = c == 0 ? 0 : (int32_t)at;
        at += best_count[c];
        if (best_count[c] > most) most = best_count[c];
        x->last_layer = c == chunks - 1 ? n - 1 : (int32_t)at - 1;
        x->group = (int32_t)(c % pp);
        x->submesh = pt->sub[m];
        x->mesh = (loom_mesh_shape){pt->shape[m][best_si][0], pt->shape[m][best_si][1]};
        set_space(x, pt->space[m][best_si]);
        x->recompute = rc_setting(best_rc);
        x->first_gpu = x->group * size;   /* equal sub-meshes tile in rank order */
    }
    loom_search_layout(s->c->gpus_per_node, cfg);
    /* Partial recompute: the estimate's n, then exactly the fewest blocks
     * that fit next to it (each block more only costs time): down while
     * n - 1 still fits, or up, to full recompute, until one does. */
    loom_status st = LOOM_OK;
    for (int dir = 0, step = 0; !st && step < 8; step++) {
        for (int32_t c = 0; c < cfg->n_stages; c++) cfg->stages[c].recompute_blocks = best_n;
        loom_search_eval_result ev;
        if ((st = loom_search_eval(s, g, cfg, &ev, err))) break;
        bool fits = ev.fits;
        consider(s, cfg, &ev);
        if (best_rc != RC_PARTIAL || best_n == 0) break;   /* not partial, or full reached */
        if (dir == 0) dir = fits ? -1 : 1;
        if ((dir < 0) != fits || (dir < 0 && best_n == 1)) break;
        best_n += dir;
        if (best_n >= most) best_n = 0;   /* every block: full recompute */
    }
    free(cfg);
    return st;
}

/* The fewest blocks n (Megatron's --recompute-num-layers, one for all
 * ranks) whose full recompute at the head of each pipeline rank lets every
 * rank of a 1F1B split (chunk r = rank r, layers lo_of[r] .. lo_of[r+1])
 * fit by the table estimate, on option (mesh m, entry si). False when
 * there is no such n strictly between none (n = 0: recompute is not
 * needed) and full (n as large as a rank's blocks). */
static bool partial_blocks(loom_search *s, const point *pt, int32_t m, int32_t si,
                           const double rate[4], const int32_t *lo_of, int64_t pp, double cap,
                           int64_t *n_out)
{
    const loom_layer_tab *t = pt->tab[m][si];
    double once = (double)t->max_block_act * (1 + LOOM_MEM_FRAGMENTATION);
    int64_t need = 0, most = 0;
    for (int64_t r = 0; r < pp; r++) {
        double st_b = 0, act = 0, inflight = loom_memory_inflight_microbatches(pp, r, 1, pt->M);
        int64_t blocks = 0;
        for (int32_t l = lo_of[r]; l < lo_of[r + 1]; l++) {
            loom_stage_cost one;
            layer_cost(s, pt, l, m, si, RC_NONE, rate, &one);
            st_b += (double)one.static_bytes, act += (double)one.act_bytes;
            blocks += loom_memory_is_block(pt->g, l);
        }
        if (blocks > most) most = blocks;
        /* recompute the rank's blocks one more at a time, in order */
        int64_t k = 0;
        for (int32_t l = lo_of[r]; l < lo_of[r + 1] && st_b + inflight * act + (k ? once : 0) > cap;
             l++) {
            if (!loom_memory_is_block(pt->g, l)) continue;
            loom_stage_cost none, full;
            layer_cost(s, pt, l, m, si, RC_NONE, rate, &none);
            layer_cost(s, pt, l, m, si, RC_FULL, rate, &full);
            act += (double)(full.act_bytes - none.act_bytes);
            k++;
        }
        if (st_b + inflight * act + (k ? once : 0) > cap) return false;   /* not even full fits */
        if (k > need) need = k;
    }
    *n_out = need;
    return need > 0 && need < most;
}

/* A replica of D GPUs is a valid pipeline block: whole nodes, or a power of
 * two dividing a node. */
static bool valid_replica(int64_t D, int64_t g)
{
    if (D % g == 0) return true;
    return D < g && g % D == 0 && (D & (D - 1)) == 0;
}

/* The strategy spaces offered on logical mesh (n0, n1): the ILP's full
 * space (unless Megatron-only), Megatron's with data parallelism on axis 0,
 * and for training Megatron's with context parallelism on axis 0 where
 * Megatron allows it (n0 > 1 ranks, fused attention, the sequence in 2·n0
 * load-balanced chunks: loom_parallel_check's rules). Megatron's spaces
 * come with TP communication overlap when n1 > 1 (training, unless the
 * options rule it out): it hides each collective behind the GEMM it feeds
 * or drains and exposes max(0, comm - GEMM) <= comm, so over the same
 * strategies it is never slower and the variant without it is not
 * searched. Returns the count. */
static int mesh_spaces(const loom_search *s, const point *pt, int64_t n0, int64_t n1,
                       loom_search_space out[MAX_SPACES])
{
    int64_t b = pt->b;
    int n = 0;
    bool train = !s->pb.inference;
    int64_t seq = s->seq_tokens;
    /* overlap runs on sequence parallelism, which splits the sequence over
     * the TP ranks (and the CP ranks): loom_parallel_check's rules */
    bool overlap = train && n1 > 1 && !s->opt.no_tp_comm_overlap;
    int64_t pin = s->opt.pin_cp;   /* > 1: only that context-parallel size */
    if (!s->opt.megatron_only && pin <= 1) out[n++] = (loom_search_space){false, false, false, 1, 0};
    /* Megatron's axis 0 is data parallel: it splits the micro-batch, so the
     * micro-batch must divide over it (strategy.c: megatron_dp_forced) */
    if (pin <= 1 && b % n0 == 0) out[n++] = (loom_search_space){true, false, overlap && seq % n1 == 0, 1, 0};
    if (train && n0 > 1 && s->pb.flash_attention && seq % (2 * n0) == 0 &&
        !s->opt.no_context_parallel && (pin == 0 || pin == n0))
        out[n++] = (loom_search_space){true, true, overlap && seq % (n0 * n1) == 0, 1, 0};
    /* Expert parallelism across replicas (Megatron-Core's MoE parallel
     * folding: EP × expert TP divides TP × CP × DP): each Megatron space
     * with experts split over axis 0 again with the expert-parallel group
     * spanning 2, 4, 8, … neighbouring replicas, the experts dividing
     * over the group and the replicas over the spans */
    int64_t experts = loom_graph_info_c(pt->g)->experts, g = s->c->gpus_per_node;
    int64_t block = n0 * n1 * pt->dp;   /* a stage's copies side by side (loom_search_layout) */
    bool side_by_side = block % g == 0 || (block < g && g % block == 0);
    for (int base = n - 1; train && experts > 0 && n0 > 1 && side_by_side && base >= 0; base--) {
        if (!out[base].megatron) continue;
        /* the group's GPUs (k meshes side by side) form a block the layout
         * allows, as a sub-mesh does: whole nodes or a power of two inside
         * one (on 72-GPU NVLink domains: up to 8, stage_search.h) */
        for (int64_t k = 2; k <= pt->dp && pt->dp % k == 0 && experts % (n0 * k) == 0 &&
                            valid_replica(n0 * n1 * k, g) && n < MAX_SPACES;
             k *= 2) {
            out[n] = out[base];
            out[n++].ep_span = k;
        }
    }
    /* A pinned expert-parallel size (MoE models; loom_search_run refuses
     * EP > 1 for dense ones): Megatron's spaces only, each forced to the
     * pinned size: the experts split over axis 0 (× the replicas the
     * group spans) where that is the size and the experts divide, nowhere
     * for EP 1. Forced rather than only filtered: the ILP's optimum on a
     * mesh has one EP, and a pin asks for the best plan of another. */
    int64_t pin_ep = s->opt.pin_ep;
    if (pin_ep > 0 && experts > 0) {
        int kept = 0;
        for (int i = 0; i < n; i++) {
            loom_search_space sp = out[i];
            int64_t span = loom_search_space_ep_span(sp);
            if (!sp.megatron) continue;
            if (pin_ep == 1 && span == 1) sp.experts = -1;
            else if (pin_ep > 1 && n0 * span == pin_ep && n0 > 1 && experts % pin_ep == 0)
                sp.experts = 1;
            else continue;
            out[kept++] = sp;
        }
        n = kept;
    }
    return n;
}

static loom_status try_point(loom_search *s, point *pt, loom_error *err)
{
    int64_t g = s->c->gpus_per_node;
    int64_t max_nodes = s->opt.general_max_gpus / g;
    if (max_nodes < 1) max_nodes = 1;
    pt->nm = loom_stage_submeshes(g, pt->D, max_nodes, pt->sub, LOOM_STAGE_MAX_MESHES);
    if (pt->nm > LOOM_STAGE_MAX_MESHES) pt->nm = LOOM_STAGE_MAX_MESHES;
    /* Wider sub-meshes for uniform stages (docs/design.md §6: (2, g), (4, g), …):
     * 2, 4, 8, … nodes dividing the replica, and the whole replica as one
     * stage. A multi-node stage is not only more data parallelism inside
     * the stage: its ILP may split experts, heads or the FFN across nodes,
     * which is how a model too large for one node's pipeline stage runs
     * with few stages (e.g. MoE serving). */
    for (int64_t k = max_nodes + 1; pt->D % g == 0 && k * g <= pt->D; k++) {
        if ((pt->D / g) % k || ((k & (k - 1)) && k * g != pt->D)) continue;
        if (pt->nm == LOOM_STAGE_MAX_MESHES) break;
        pt->sub[pt->nm++] = (loom_submesh){k, g};
    }
    /* selective recompute reruns the attention core, which only unfused
     * attention has (with fused attention it is the same plan as none) */
    pt->n_rc = s->pb.inference || s->opt.no_recompute ? 1 : s->pb.flash_attention ? 2 : 3;
    loom_status st = loom_search_graph(s, pt->b, &pt->g, err);
    if (st) return st;
    /* A loom graph file has fixed shapes: only its own batch is a micro-batch. */
    int64_t gb = loom_graph_info_c(pt->g)->batch;
    if (gb > 0 && gb != pt->b) return LOOM_OK;
    pt->n_layers = loom_graph_layer_count(pt->g);
    bool general = !s->opt.megatron_only && pt->D <= s->opt.general_max_gpus &&
                   !s->opt.pin_pp && !s->opt.pin_vpp;
    /* only ZeRO-2/3 fit: one-stage replicas only (below) */
    bool staged = pt->zs[0] <= 1;

    /* Which sub-meshes are used: all of up to general_max_gpus GPUs for the
     * general DP; for uniform stages those that cut the replica into at
     * most 64 stages. Logical meshes keep axis 1 in a node. */
    bool use[LOOM_STAGE_MAX_MESHES], uni[LOOM_STAGE_MAX_MESHES];
    for (int32_t m = 0; m < pt->nm; m++) {
        int64_t size = loom_submesh_devices(pt->sub[m]);
        uni[m] = pt->D % size == 0 && pt->D / size <= 64 && pt->D / size <= pt->n_layers &&
                 (staged || size == pt->D);
        use[m] = (general && staged && size <= s->opt.general_max_gpus) || uni[m];
        pt->nshape[m] = 0;
        if (!use[m]) continue;
        int64_t shapes[MAX_LOGICAL][2];
        int32_t ns = loom_stage_logical_meshes(pt->sub[m], shapes, MAX_LOGICAL);
        if (ns > MAX_LOGICAL) ns = MAX_LOGICAL;
        for (int32_t si = 0; si < ns; si++) {
            if (shapes[si][1] > g) continue;
            if (s->opt.pin_tp && shapes[si][1] != s->opt.pin_tp) continue;
            loom_search_space spaces[MAX_SPACES];
            int nsp = mesh_spaces(s, pt, shapes[si][0], shapes[si][1], spaces);
            for (int var = 0; var < nsp; var++) {
                int32_t k = pt->nshape[m]++;
                pt->shape[m][k][0] = shapes[si][0], pt->shape[m][k][1] = shapes[si][1];
                pt->space[m][k] = spaces[var];
                int64_t before = 0, hits = 0, after = 0;
                loom_intra_cache_stats(s->cache, &before, &hits);
                st = loom_search_layer_tab(s, pt->b,
                                           (loom_mesh_shape){shapes[si][0], shapes[si][1]},
                                           spaces[var], &pt->tab[m][k], err);
                loom_intra_cache_stats(s->cache, &after, &hits);
                s->res.ilp_solves += after - before;
                if (st) return st;
            }
            if (stop_now(s)) return LOOM_OK;
        }
    }
    double *w = malloc(sizeof *w * (size_t)pt->n_layers);
    int32_t *first = malloc(sizeof *first * ((size_t)pt->n_layers + 1));
    int32_t meshes[LOOM_STAGE_MAX_MESHES];
    if (!w || !first) {
        free(w), free(first);
        return loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
    }
    /* Cluster by forward FLOPs (Alpa §5.2), at least 1 so empty layers count. */
    for (int32_t l = 0; l < pt->n_layers; l++) {
        loom_graph_totals tot;
        loom_graph_layer_totals(pt->g, l, &tot);
        w[l] = (double)tot.fwd_flops + 1.0;
    }
    /* Every ZeRO stage on offer. ZeRO-2 and -3 shard gradients and weights
     * over the replicas, which pipelines do not combine with (DeepSpeed's
     * rule, loom_parallel_check): with them a replica is one stage. */
    for (int zi = 0; zi < pt->nz && !st && !stop_now(s); zi++) {
        pt->zero = pt->zs[zi];
        bool one_stage = pt->zero >= 2;
        if (general && !one_stage) {
            int32_t nmg = 0;
            for (int32_t m = 0; m < pt->nm; m++)
                if (loom_submesh_devices(pt->sub[m]) <= s->opt.general_max_gpus) meshes[nmg++] = m;
            int32_t K = loom_stage_cluster(w, pt->n_layers, s->opt.max_clusters, first);
            st = try_dps(s, pt, meshes, nmg, first, K, err);
        }
        for (int32_t m = 0; m < pt->nm && !st && !stop_now(s); m++) {
            if (!uni[m]) continue;
            /* pp uniform stages: 4 clusters per stage leave the DP room to
             * balance, up to 64 clusters */
            int64_t pp = pt->D / loom_submesh_devices(pt->sub[m]);
            if (one_stage && pp != 1) continue;
            if (s->opt.pin_pp && pp != s->opt.pin_pp) continue;
            int32_t want = (int32_t)(4 * pp < 64 ? 4 * pp : (pp > 64 ? pp : 64));
            int32_t K = loom_stage_cluster(w, pt->n_layers, want, first);
            if (pp > K) continue;
            if (s->opt.pin_vpp <= 1) st = try_dps(s, pt, &m, 1, first, K, err);
            /* Megatron's own splits, 1F1B and every interleaving depth up
             * to MAX_VPP chunks per rank */
            int64_t max_v = s->pb.inference ? 1 : s->opt.pin_vpp > MAX_VPP ? s->opt.pin_vpp : MAX_VPP;
            for (int64_t v = 1; v <= max_v && !st; v++)
                for (int kind = s->opt.megatron_only ? KIND_MEGATRON_DP : KIND_FULL;
                     kind < KIND_COUNT && !st; kind++)
                    if (!s->opt.pin_vpp || v == s->opt.pin_vpp)
                        st = try_interleaved(s, pt, m, v, kind, err);
        }
    }
    free(w);
    free(first);
    return st;
}


/* Parameters of the routed experts' weights (those with dims e and f, as
 * plan_roles.c names expert weights), each tensor counted once. */
static int64_t routed_expert_params(const loom_graph *g)
{
    int64_t n = 0;
    int32_t nt = loom_graph_num_tensors(g);
    bool *seen = calloc((size_t)nt + 1, 1);
    if (!seen) return 0;   /* out of memory: the plain bound, as before */
    for (int32_t i = 0; i < loom_graph_num_ops(g); i++) {
        const loom_op *o = loom_graph_op(g, i);
        for (int k = 0; k < o->n_w; k++) {
            int32_t w = o->w[k];
            if (w < 0 || w >= nt || seen[w]) continue;
            seen[w] = true;
            const loom_tensor *t = loom_graph_tensor(g, w);
            bool e = false, f = false;
            for (int d = 0; d < t->ndim; d++) {
                e |= !strcmp(t->dims[d].name, "e");
                f |= !strcmp(t->dims[d].name, "f");
            }
            if (e && f) n += loom_tensor_numel(t);
        }
    }
    free(seen);
    return n;
}

loom_status loom_search_run(loom_search *s, const loom_search_result **result, loom_error *err)
{
    *result = &s->res;
    s->t_start = loom_clock_s();
    loom_search_use_layout(s, false);
    loom_status st = LOOM_OK;
    const loom_graph *g1;
    if ((st = loom_search_graph(s, 1, &g1, err))) return st;
    loom_graph_totals tot;
    loom_graph_totals_get(g1, &tot);
    int64_t routed_params = routed_expert_params(g1);
    /* A loom graph file has fixed shapes (the options do not apply to it):
     * then its own batch is the only micro-batch and its seq the sequence. */
    int64_t fixed_b = 0;
    if (loom_model_source_fixed_shapes(s->pb.model)) {
        const loom_model_info *mi = loom_graph_info_c(g1);
        fixed_b = mi->batch > 0 ? mi->batch : 1;
        if (mi->seq > 0) s->seq_tokens = mi->seq;
    }
    if (fixed_b > 0 && s->pb.inference)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "%s: inference plans a decode step, which needs a model config "
                              "(HF config.json); a loom graph file has fixed shapes",
                              loom_model_source_name(s->pb.model));

    /* a dense model has no expert groups to pin: EP 1 is what it runs; a
     * MoE model's EP splits its experts evenly (Megatron's rule) */
    int64_t experts = loom_graph_info_c(g1)->experts;
    if (s->opt.pin_ep > 1 && experts <= 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "%s has no experts: an expert-parallel size of %lld applies to "
                              "mixture-of-experts models only",
                              loom_model_source_name(s->pb.model), (long long)s->opt.pin_ep);
    if (s->opt.pin_ep > 1 && experts % s->opt.pin_ep)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "%s has %lld experts, which do not split %lld ways: the "
                              "expert-parallel size must divide them",
                              loom_model_source_name(s->pb.model), (long long)experts,
                              (long long)s->opt.pin_ep);

    /* The layouts (all GPUs; the tile of every NVLink domain when the
     * nodes have one) and in each the GPU counts to try: all of them, or
     * for cost/energy also fewer. */
    int n_lay = s->has_tile ? 2 : 1;
    int64_t used[2][64];
    int n_used[2] = {0, 0};
    for (int lay = 0; lay < n_lay; lay++) {
        const loom_cluster *c = lay ? &s->tile : s->c;
        const int64_t G = loom_cluster_gpus(c), g = c->gpus_per_node;
        for (int64_t u = G; u >= 1 && n_used[lay] < 64; u = u % 2 ? 0 : u / 2) {
            if (valid_replica(u, g) || u == G) used[lay][n_used[lay]++] = u;
            if (s->pb.objective != LOOM_OBJ_COST && s->pb.objective != LOOM_OBJ_ENERGY) break;
        }
    }
    /* Concurrent sequences: the given count, or for throughput every power
     * of two below it too. */
    int64_t seqs[64];
    int n_seqs = 0;
    seqs[n_seqs++] = s->pb.gbs;
    if (s->pb.inference && s->pb.objective == LOOM_OBJ_THROUGHPUT)
        for (int64_t q = 1; q < s->pb.gbs && n_seqs < 64; q *= 2) seqs[n_seqs++] = q;

    /* Count the points for progress reports. */
    int64_t total = 0, done = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int lay = 0; lay < n_lay; lay++)   /* all GPUs, then the tiles */
            for (int ui = 0; ui < n_used[lay]; ui++)
                for (int qi = 0; qi < n_seqs; qi++)
                    for (int64_t dp = 1; dp <= used[lay][ui]; dp++) {
                        loom_search_use_layout(s, lay == 1);
                        const int64_t g = s->c->gpus_per_node;
                        int64_t U = used[lay][ui], B = seqs[qi];
                        if (U % dp || B % dp || !valid_replica(U / dp, g)) continue;
                        if (s->opt.pin_dp && dp != s->opt.pin_dp) continue;
                        int64_t D = U / dp;
                        /* the model state alone must fit on the replica's GPUs
                         * under some ZeRO stage on offer */
                        int zs[3], nz = 0;
                        double state = INFINITY;
                        /* expert groups may span all dp replicas (MoE parallel
                         * folding): a routed expert's state then spreads over
                         * D x dp GPUs, so that is the bound for its share */
                        int64_t routed = s->pb.inference || dp == 1 ? 0 : routed_params;
                        for (int k = 0, all[3], n_all = loom_search_zero_options(s, dp, all); k < n_all;
                             k++) {
                            double x = ((double)loom_search_state_bytes(s, tot.params - routed,
                                                                        tot.params - routed, dp,
                                                                        all[k]) +
                                        (double)loom_search_state_bytes(s, routed / dp, routed / dp,
                                                                        1, all[k])) /
                                       (double)D;
                            if (x <= (double)(loom_cluster_usable_bytes(s->c) - LOOM_MEM_RESERVED_BYTES))
                                zs[nz++] = all[k];
                            if (x < state) state = x;
                        }
                        if (nz == 0) {
                            s->state_pruned = true;
                            if (pass == 1 && (s->res.min_memory_bytes == 0 ||
                                              state + LOOM_MEM_RESERVED_BYTES < s->res.min_memory_bytes))
                                s->res.min_memory_bytes = (int64_t)state + LOOM_MEM_RESERVED_BYTES;
                            continue;
                        }
                        for (int64_t b = 1; b <= B / dp && b <= s->opt.max_micro_batch; b++) {
                            if ((B / dp) % b || (fixed_b > 0 && b != fixed_b)) continue;
                            if (s->opt.pin_mbs && b != s->opt.pin_mbs) continue;
                            if (pass == 0) {
                                total++;
                                continue;
                            }
                            if (stop_now(s)) goto out;
                            point *pt = calloc(1, sizeof *pt);
                            if (!pt) {
                                st = loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
                                goto out;
                            }
                            pt->D = D, pt->dp = dp, pt->b = b, pt->M = B / dp / b, pt->seqs = B;
                            memcpy(pt->zs, zs, sizeof zs);
                            pt->nz = nz;
                            st = try_point(s, pt, err);
                            free(pt);
                            if (st) goto out;
                            done++;
                            if (s->opt.progress) {
                                char what[128];
                                snprintf(what, sizeof what, "%lld replica(s) of %lld GPUs%s, micro-batch %lld",
                                         (long long)dp, (long long)D,
                                         lay ? " on NVLink-domain tiles" : "", (long long)b);
                                s->opt.progress(s->opt.progress_ctx, (double)done / (double)total, what);
                            }
                        }
                    }
out:
    loom_search_use_layout(s, false);
    s->res.time_s = loom_clock_s() - s->t_start;
    if (st) return st;
    if (!s->have_best) {
        if (s->res.stopped)
            return loom_error_set(err, LOOM_ERR_LIMIT,
                                  "the search was stopped before it found a plan");
        /* nothing with the pins was even priced (fitting or not): the pins
         * themselves rule every configuration out */
        if (s->pinned_candidates == 0 && !s->state_pruned && pins_given(&s->opt)) {
            char pins[160];
            pins_text(&s->opt, pins, sizeof pins);
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "no configuration of %s on %s has the pinned sizes (%s): "
                                  "none divides the model and the cluster that way",
                                  loom_model_source_name(s->pb.model), s->c->name, pins);
        }
        double need = (double)s->res.min_memory_bytes / 1073741824.0;
        return loom_error_set(err, LOOM_ERR_INFEASIBLE,
                              "no plan fits: every plan needs at least %.1f GiB per GPU, the %s "
                              "has %.1f GiB of which %.1f GiB are usable (memory headroom %g; "
                              "--memory-headroom to change)",
                              s->res.min_memory_bytes > 0 ? need : INFINITY, s->c->gpu.name,
                              (double)s->c->gpu.hbm_bytes / 1073741824.0,
                              (double)loom_cluster_usable_bytes(s->c) / 1073741824.0,
                              s->c->memory_headroom);
    }
    const loom_graph *gb;
    if ((st = loom_search_graph(s, s->res.best.mbs, &gb, err))) return st;
    s->res.graph = gb;
    /* The winner once more, now also asking where each op's time comes from. */
    loom_search_eval_result ev;
    s->want_measured = true;
    st = loom_search_eval(s, gb, &s->res.best, &ev, err);
    s->want_measured = false;
    if (st) return st;
    loom_search_eval_free(&s->res.eval);
    s->res.eval = ev;
    /* the best of the other layout, for the plan's account of the domain */
    int other = s->res.best.tiled ? 0 : 1;
    s->res.have_other = s->have_lay[other];
    if (s->res.have_other) {
        s->res.other = s->lay_best[other];
        s->res.other_step_s = s->lay_step[other];
        s->res.other_score = s->lay_score[other];
    }
    s->res.largest_group = loom_search_largest_group(gb, &s->res.best, &s->res.eval);
    int side = s->res.largest_group > 8 ? 0 : 1;
    s->res.have_other_groups = s->track_groups && s->have_grp[side];
    if (s->res.have_other_groups) {
        s->res.other_groups = s->grp_best[side];
        s->res.other_groups_step_s = s->grp_step[side];
    }
    return LOOM_OK;
}
