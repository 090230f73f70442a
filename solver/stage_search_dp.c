/*
 * stage_search_dp.c — the stage DPs the search runs (stage_dp.h solves
 * them). A point's layer tables become a DP problem: per cluster of layers,
 * per sub-mesh and per option (logical mesh and strategy space × recompute)
 * its time, model-state bytes and activation bytes, where a layer's share
 * of the data-parallel gradient sync is its parameters times the sync rate
 * of the whole model over the same group (loom_search_sync_rates). A DP's
 * plan becomes a configuration placed on the replica's GPUs
 * (loom_search_layout) and is evaluated exactly (stage_eval.c); which
 * option sets a DP sees is loom_search_try_dps's essay.
 *
 * Units: seconds, bytes per GPU.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/memory.h"
#include "solver/stage_search_impl.h"

#define DP_GAP 0.005   /* t_max candidates closer than 0.5 % are skipped */

/* Seconds per step per parameter of the data-parallel sync of shape entry
 * si on sub-mesh m, by the data-parallel mesh axes a weight's gradient is
 * partial over (loom_search_dp_group): the whole model's sync over that
 * group divided by its parameters (linear in bytes but for latency terms,
 * so each layer is charged its share). The replicas sit side by side when
 * their blocks tile nodes (loom_search_layout), else one after another. */
void loom_search_sync_rates(const loom_search *s, const loom_search_point *pt, int32_t m,
                            int32_t si, double rate[4])
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

loom_recompute loom_search_rc_setting(int rc)
{
    return rc == LOOM_SEARCH_RC_FULL || rc == LOOM_SEARCH_RC_PARTIAL ? LOOM_RECOMPUTE_FULL
           : rc == LOOM_SEARCH_RC_SELECTIVE              ? LOOM_RECOMPUTE_SELECTIVE
                                             : LOOM_RECOMPUTE_NONE;
}

/* Per layer costs of option (mesh m, shape entry si, recompute rc:
 * LOOM_SEARCH_RC_NONE, _FULL or _SELECTIVE) into c; rate:
 * loom_search_sync_rates of the entry. */
void loom_search_layer_cost(loom_search *s, const loom_search_point *pt, int32_t l, int32_t m,
                            int32_t si, int rc, const double rate[4], loom_stage_cost *c)
{
    const loom_layer_tab *t = pt->tab[m][si];
    if (!t || !t->ok) {
        *c = (loom_stage_cost){INFINITY, 0, 0};
        return;
    }
    bool block = loom_memory_is_block(pt->g, l);
    bool r = rc == LOOM_SEARCH_RC_FULL && block, sel = rc == LOOM_SEARCH_RC_SELECTIVE;
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
static loom_status build_problem(loom_search *s, const loom_search_point *pt,
                                 const int32_t *meshes, int32_t n_meshes, const int32_t *first,
                                 int32_t K,
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
            if (t) loom_search_sync_rates(s, pt, m, si, rate);
            int64_t work = 0;
            if (t && t->ok) {
                if (s->pb.inference)
                    for (int32_t l = 0; l < pt->n_layers; l++)
                        work = t->act_bytes[l] > work ? t->act_bytes[l] : work;
                else if (rc == LOOM_SEARCH_RC_FULL)
                    work = t->max_block_act;
                else if (rc == LOOM_SEARCH_RC_SELECTIVE)
                    work = t->max_core;
            }
            once[mi * NO + o] = (int64_t)((double)work * (1 + LOOM_MEM_FRAGMENTATION) + 0.5);
            for (int32_t k = 0; k < K; k++) {
                loom_stage_cost *c =
                    &cost[((size_t)k * (size_t)n_meshes + (size_t)mi) * (size_t)NO + (size_t)o];
                *c = (loom_stage_cost){0, 0, 0};
                for (int32_t l = first[k]; l < first[k + 1]; l++) {
                    loom_stage_cost one;
                    loom_search_layer_cost(s, pt, l, m, si, rc, rate, &one);
                    c->time_s += one.time_s;
                    c->static_bytes += one.static_bytes;
                    c->act_bytes += one.act_bytes;
                }
            }
        }
    }
    *p = (loom_stage_problem){
        .n_layers = K, .n_meshes = n_meshes, .n_options = NO,
        .mesh_devices = dev, .cost = cost, .stage_bytes = once,
        .devices = pt->D, .micro_batches = pt->M,
        .capacity_bytes = loom_cluster_usable_bytes(s->c) - LOOM_MEM_RESERVED_BYTES,
        .one_in_flight = s->pb.inference, .tmax_rel_gap = DP_GAP,
        .stop = s->opt.stop, .ws = s->ws};
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

void loom_search_set_space(loom_search_stage *st, loom_search_space sp)
{
    st->megatron = sp.megatron;
    st->context_parallel = sp.cp;
    st->tp_comm_overlap = sp.tp_overlap;
    st->ep_span = loom_search_space_ep_span(sp);
    st->expert_split = sp.megatron ? sp.experts : 0;
    st->expert_fold = sp.megatron && sp.expert_fold;
}

/* Turns a DP solution into a configuration (placing the sub-meshes). */
static loom_status to_config(loom_search *s, const loom_search_point *pt, const int32_t *meshes,
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
        loom_search_set_space(st, pt->space[m][si]);
        st->recompute = loom_search_rc_setting(codes[ch->option] % pt->n_rc);
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
static loom_status run_dp(loom_search *s, const loom_search_point *pt, const int32_t *meshes,
                          int32_t nm, const int32_t *first, int32_t K, const int32_t *codes,
                          int32_t NO, bool evaluate, double *estimate, loom_search_config *cfg,
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
        loom_search_consider(s, cfg, &ev);
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
loom_status loom_search_try_dps(loom_search *s, const loom_search_point *pt,
                                const int32_t *meshes, int32_t nm, const int32_t *first,
                                int32_t K, loom_error *err)
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
        int32_t codes[LOOM_SEARCH_MAX_SHAPES * 3], n = 0;   /* shape entries x recompute options */
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
