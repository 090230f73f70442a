/*
 * stage_search_point.c — one point of the search (loom_search_try_point):
 * a replica of D GPUs, dp replicas, micro-batch b. It enumerates the
 * candidates' building blocks: the sub-meshes a stage may take (those of
 * the general DP, and wider ones of whole nodes for uniform stages), each
 * one's logical meshes (axis 1 inside a node), and on each logical mesh the
 * strategy spaces on offer (mesh_spaces: the ILP's full space, Megatron's
 * data or context parallel axis 0, expert parallelism across replicas, a
 * pinned TP / CP / EP). Each (logical mesh, space) gets its layer table
 * from one ILP run (stage_costs.c); then for every ZeRO stage on offer the
 * general DP runs over the small sub-meshes, and per uniform sub-mesh the
 * uniform DP and Megatron's own splits (stage_search_dp.c,
 * stage_search_megatron.c).
 *
 * Units: seconds, bytes per GPU.
 */
#include <stdlib.h>

#include "solver/stage_search_impl.h"

#define MAX_VPP 8      /* interleaving depths tried: 2 .. MAX_VPP chunks per rank */

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
static int mesh_spaces(const loom_search *s, const loom_search_point *pt, int64_t n0,
                       int64_t n1, loom_search_space out[LOOM_SEARCH_MAX_SPACES])
{
    int64_t b = pt->b;
    int n = 0;
    bool train = !s->pb.inference;
    int64_t seq = s->seq_tokens;
    /* overlap runs on sequence parallelism, which splits the sequence over
     * the TP ranks (and the CP ranks): loom_parallel_check's rules */
    bool overlap = train && n1 > 1 && !s->opt.no_tp_comm_overlap;
    int64_t pin = s->opt.pin_cp;   /* > 1: only that context-parallel size */
    if (!s->opt.megatron_only && pin <= 1) out[n++] = (loom_search_space){false, false, false, 1, 0, false};
    /* Megatron's axis 0 is data parallel: it splits the micro-batch, so the
     * micro-batch must divide over it (strategy_megatron.c:
     * loom_strategy_megatron_dp_forced) */
    if (pin <= 1 && b % n0 == 0) out[n++] = (loom_search_space){true, false, overlap && seq % n1 == 0, 1, 0, false};
    if (train && n0 > 1 && s->pb.flash_attention && seq % (2 * n0) == 0 &&
        !s->opt.no_context_parallel && (pin == 0 || pin == n0))
        out[n++] = (loom_search_space){true, true, overlap && seq % (n0 * n1) == 0, 1, 0, false};
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
                            loom_search_valid_replica(n0 * n1 * k, g) && n < LOOM_SEARCH_MAX_SPACES;
             k *= 2) {
            out[n] = out[base];
            out[n++].ep_span = k;
        }
    }
    /* Expert TP 1 (MoE parallel folding, --expert-tensor-parallel-size 1):
     * each Megatron space inside the mesh again with the experts split
     * over the TP ranks (axis 1) instead of their hidden f, the expert-
     * parallel group spanning them: EP n1 (experts = -1: never over axis
     * 0), and EP n0 · n1 with the experts over axis 0 too (experts = 1;
     * stated, as the context-parallel space would otherwise keep the
     * token slots c on axis 0). Not over a group spanning replicas: the
     * strategies price it (spec.h ep_fold_group; tests/test_consistency.c),
     * but its variants, one per span, take a sub-mesh past the stage DP's
     * 127 options (Qwen3-30B-A3B on 256 H100). A pinned expert TP keeps
     * only the spaces that give it. */
    int64_t pin_etp = s->opt.pin_etp;
    for (int base = n - 1; train && experts > 0 && n1 > 1 && experts % n1 == 0 && base >= 0; base--) {
        if (!out[base].megatron || loom_search_space_ep_span(out[base]) != 1 ||
            (pin_etp != 0 && pin_etp != 1))
            continue;
        for (int ex = -1; ex <= 1 && n < LOOM_SEARCH_MAX_SPACES; ex += 2) {
            if (ex > 0 && (n0 == 1 || experts % (n0 * n1))) continue;
            out[n] = out[base];
            out[n].experts = ex;
            out[n++].expert_fold = true;
        }
    }
    if (pin_etp > 0 && experts > 0) {
        int kept = 0;
        for (int i = 0; i < n; i++)
            if (out[i].megatron && (out[i].expert_fold ? 1 : n1) == pin_etp) out[kept++] = out[i];
        n = kept;
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
            /* expert TP 1: EP n1 (experts -1) or n0 · n1 (experts 1) */
            if (sp.expert_fold) {
                if (pin_ep == (sp.experts > 0 ? n0 * n1 : n1)) out[kept++] = sp;
                continue;
            }
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

loom_status loom_search_try_point(loom_search *s, loom_search_point *pt, loom_error *err)
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
    /* a micro-batch above the cap (stage_search.c): one stage per replica,
     * on meshes whose data-parallel axis 0 brings each rank's share under it */
    int64_t cap = s->opt.max_micro_batch;
    bool wide = pt->b > cap;

    /* Which sub-meshes are used: all of up to general_max_gpus GPUs for the
     * general DP; for uniform stages those that cut the replica into at
     * most 64 stages. Logical meshes keep axis 1 in a node. */
    bool use[LOOM_STAGE_MAX_MESHES], uni[LOOM_STAGE_MAX_MESHES];
    for (int32_t m = 0; m < pt->nm; m++) {
        int64_t size = loom_submesh_devices(pt->sub[m]);
        uni[m] = pt->D % size == 0 && pt->D / size <= 64 && pt->D / size <= pt->n_layers &&
                 ((staged && !wide) || size == pt->D);
        use[m] = (general && staged && !wide && size <= s->opt.general_max_gpus) || uni[m];
        pt->nshape[m] = 0;
        if (!use[m]) continue;
        int64_t shapes[LOOM_SEARCH_MAX_LOGICAL][2];
        int32_t ns = loom_stage_logical_meshes(pt->sub[m], shapes, LOOM_SEARCH_MAX_LOGICAL);
        if (ns > LOOM_SEARCH_MAX_LOGICAL) ns = LOOM_SEARCH_MAX_LOGICAL;
        for (int32_t si = 0; si < ns; si++) {
            if (shapes[si][1] > g) continue;
            if (s->opt.pin_tp && shapes[si][1] != s->opt.pin_tp) continue;
            if (wide && pt->b > cap * shapes[si][0]) continue;
            loom_search_space spaces[LOOM_SEARCH_MAX_SPACES];
            int nsp = mesh_spaces(s, pt, shapes[si][0], shapes[si][1], spaces);
            for (int var = 0; var < nsp; var++) {
                /* above the cap only where axis 0 splits the batch (a
                 * context-parallel axis 0 leaves each rank all of it) */
                if (wide && spaces[var].cp) continue;
                /* the stage DP takes at most 127 options (shape entries x
                 * recompute settings) per sub-mesh: expert TP 1, the last
                 * added, gives way where a sub-mesh would pass that */
                if (spaces[var].expert_fold && (pt->nshape[m] + 1) * pt->n_rc > 127) continue;
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
            if (loom_search_stop_now(s)) return LOOM_OK;
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
    for (int zi = 0; zi < pt->nz && !st && !loom_search_stop_now(s); zi++) {
        pt->zero = pt->zs[zi];
        bool one_stage = pt->zero >= 2;
        if (general && !one_stage) {
            int32_t nmg = 0;
            for (int32_t m = 0; m < pt->nm; m++)
                if (loom_submesh_devices(pt->sub[m]) <= s->opt.general_max_gpus) meshes[nmg++] = m;
            int32_t K = loom_stage_cluster(w, pt->n_layers, s->opt.max_clusters, first);
            st = loom_search_try_dps(s, pt, meshes, nmg, first, K, err);
        }
        for (int32_t m = 0; m < pt->nm && !st && !loom_search_stop_now(s); m++) {
            if (!uni[m]) continue;
            /* pp uniform stages: 4 clusters per stage leave the DP room to
             * balance, up to 64 clusters */
            int64_t pp = pt->D / loom_submesh_devices(pt->sub[m]);
            if (one_stage && pp != 1) continue;
            if (s->opt.pin_pp && pp != s->opt.pin_pp) continue;
            int32_t want = (int32_t)(4 * pp < 64 ? 4 * pp : (pp > 64 ? pp : 64));
            int32_t K = loom_stage_cluster(w, pt->n_layers, want, first);
            if (pp > K) continue;
            if (s->opt.pin_vpp <= 1) st = loom_search_try_dps(s, pt, &m, 1, first, K, err);
            /* Megatron's own splits, 1F1B and every interleaving depth up
             * to MAX_VPP chunks per rank */
            int64_t max_v = s->pb.inference ? 1 : s->opt.pin_vpp > MAX_VPP ? s->opt.pin_vpp : MAX_VPP;
            for (int64_t v = 1; v <= max_v && !st; v++)
                for (int kind = s->opt.megatron_only ? LOOM_SEARCH_KIND_MEGATRON_DP
                                                     : LOOM_SEARCH_KIND_FULL;
                     kind < LOOM_SEARCH_KIND_COUNT && !st; kind++)
                    if (!s->opt.pin_vpp || v == s->opt.pin_vpp)
                        st = loom_search_try_interleaved(s, pt, m, v, kind, err);
        }
    }
    free(w);
    free(first);
    return st;
}
