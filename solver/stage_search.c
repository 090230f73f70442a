/*
 * stage_search.c — the search's driver (stage_search.h): the handle's life
 * (create, destroy, the graph of each micro-batch size, the layouts: all
 * GPUs or the tile of every NVLink domain) and loom_search_run, which walks
 * GPUs used × replicas × micro-batch size and hands each point to
 * stage_search_point.c. The search's parts:
 *
 *   stage_search_point.c     one (replica size, replicas, micro-batch) point:
 *                            sub-meshes, logical meshes, strategy spaces,
 *                            their layer tables, then the runs below
 *   stage_search_dp.c        the general and uniform stage DPs over those
 *                            tables, their plans turned into configurations
 *   stage_search_megatron.c  Megatron's even / first-last-uneven splits with
 *                            1F1B and interleaving v = 2..8, partial recompute
 *   stage_search_keep.c      which evaluated configurations are kept: pins,
 *                            fit, the best, the runners-up, the best per layout
 *   stage_costs.c            the layer tables (one ILP run per mesh and space)
 *   stage_eval.c             the exact evaluation of a configuration
 *
 * Every candidate is evaluated exactly (stage_eval.c) and the best kept.
 * Pruning that never loses a plan: a replica whose GPUs cannot even hold
 * the model state (weights, gradients, sharded Adam state, KV cache) is
 * skipped before any ILP runs — counting a routed expert's state as spread
 * over every replica, since Megatron's expert groups may span them all (it
 * used to count the whole model on one replica, which ruled out
 * DeepSeek-V3 on 16 replicas of 16 GPUs with EP 8 over 4 of them).
 * Everything else is bounded by sizes: layers are clustered (24 clusters
 * for the general DP, 64 for the uniform one), stage sub-meshes span at
 * most general_max_gpus GPUs, and the general DP runs only for replicas of
 * at most general_max_gpus GPUs; larger replicas use uniform stages, which
 * is also what keeps 16K-GPU clusters fast.
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
    /* training builds the multi-token-prediction layers; one decode step
     * (a new token per sequence) does not run them */
    o.mtp = !s->pb.inference;
    if (s->pb.inference) o.seq = 1;
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

int64_t loom_search_work(const loom_search *s)
{
    int64_t solves = 0;
    loom_intra_cache_stats(s->cache, &solves, NULL);
    return s->res.configs_evaluated + solves;
}

bool loom_search_stop_now(loom_search *s)
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

/* A replica of D GPUs is a valid pipeline block: whole nodes, or a power of
 * two dividing a node. */
bool loom_search_valid_replica(int64_t D, int64_t g)
{
    if (D % g == 0) return true;
    return D < g && g % D == 0 && (D & (D - 1)) == 0;
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
    if (s->opt.pin_etp > 1 && experts <= 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "%s has no experts: an expert tensor-parallel size of %lld applies "
                              "to mixture-of-experts models only",
                              loom_model_source_name(s->pb.model), (long long)s->opt.pin_etp);
    /* The Megatron space gives the experts the TP or expert TP 1: an expert
     * TP strictly between needs a third mesh axis (docs/design-notes.md;
     * bench/etp_gap.sh measures what it would give) */
    if (s->opt.pin_etp > 1 && s->opt.pin_tp > 0 && s->opt.pin_etp != s->opt.pin_tp)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "an expert tensor-parallel size of %lld under a TP of %lld is not "
                              "in loom plan's space, which gives the experts the TP or 1 (loom "
                              "eval --etp prices it)",
                              (long long)s->opt.pin_etp, (long long)s->opt.pin_tp);
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
            if (loom_search_valid_replica(u, g) || u == G) used[lay][n_used[lay]++] = u;
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
                        if (U % dp || B % dp || !loom_search_valid_replica(U / dp, g)) continue;
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
                        /* The micro-batch b is the replica's; Megatron's is a
                         * data-parallel rank's, b / n0 on a mesh whose axis 0
                         * is data parallel. Above the cap, b = cap x 2^k up to
                         * the replica's GPUs in a node, tried as one stage per
                         * replica on meshes with b / n0 <= cap (try_point):
                         * DeepSeek-V3 on 256 H100 runs ZeRO-3 replicas of dp
                         * 4 x tp 2 with 32 sequences (Megatron mbs 8).
                         * Training only: inference keeps the cap per replica. */
                        const int64_t cap = s->opt.max_micro_batch,
                                      in_node = s->pb.inference ? 1 : D < g ? D : g;
                        for (int64_t b = 1; b <= B / dp && b <= cap * in_node; b++) {
                            if (b > cap && (b % cap || ((b / cap) & (b / cap - 1)))) continue;
                            if ((B / dp) % b || (fixed_b > 0 && b != fixed_b)) continue;
                            if (s->opt.pin_mbs && b != s->opt.pin_mbs) continue;
                            if (pass == 0) {
                                total++;
                                continue;
                            }
                            if (loom_search_stop_now(s)) goto out;
                            loom_search_point *pt = calloc(1, sizeof *pt);
                            if (!pt) {
                                st = loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
                                goto out;
                            }
                            pt->D = D, pt->dp = dp, pt->b = b, pt->M = B / dp / b, pt->seqs = B;
                            memcpy(pt->zs, zs, sizeof zs);
                            pt->nz = nz;
                            st = loom_search_try_point(s, pt, err);
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
        if (s->pinned_candidates == 0 && !s->state_pruned && loom_search_pins_given(&s->opt)) {
            char pins[160];
            loom_search_pins_text(&s->opt, pins, sizeof pins);
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
