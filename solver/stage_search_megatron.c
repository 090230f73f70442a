/*
 * stage_search_megatron.c — Megatron-LM's own pipeline splits as
 * candidates, unclustered, so every split Megatron can run is one whatever
 * the layer clustering of the DPs: pp ranks on equal sub-meshes with v
 * chunks each (1F1B, or interleaved 1F1B for v = 2..8), blocks split
 * evenly or with first and last chunks any number of blocks lighter
 * (--pipeline-model-parallel-layout), one logical mesh and recompute
 * setting for the whole model, including full recompute of only the first
 * n blocks of each chunk (--recompute-num-layers, which Megatron counts
 * per virtual chunk).
 * Options are estimated from the layer tables (T ≈ M·max t_r +
 * (Σ t_r - max t_r)/v, memory with the schedule's in-flight
 * micro-batches) and the best that fits is evaluated exactly.
 *
 * Units: seconds, bytes per GPU.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/memory.h"
#include "solver/stage_search_impl.h"

static int space_kind(loom_search_space sp)
{
    return !sp.megatron ? LOOM_SEARCH_KIND_FULL
           : sp.cp      ? LOOM_SEARCH_KIND_MEGATRON_CP
                        : LOOM_SEARCH_KIND_MEGATRON_DP;
}

/* Blocks per chunk of Megatron's even split and its uneven variants
 * (--pipeline-model-parallel-layout, --decoder-first/last-pipeline-num-
 * layers): variant k of nb blocks over C chunks gives the middle chunks
 * the even share q = ceil(nb / C) each and the first and last chunks the
 * rest, split every way that leaves each of them 1 .. q blocks: they also
 * hold the embedding and the head, which weigh differently (a 128k-256k
 * vocabulary's head outweighs a small model's block several times; Meta's
 * Llama 3.1 405B layout: 1 + 62 × 2 + 1). The most even split comes first,
 * then the last chunk heaviest first. Middle chunks above the even share
 * are left to the stage DP (1F1B): tried here (up to 2 more) they changed
 * no plan and cost 60 % more planning time on 405B. Returns false when
 * there is no such variant k. */
static bool chunk_counts(int32_t nb, int64_t C, int k, int32_t *count)
{
    if (C == 1) {
        if (k) return false;
        count[0] = nb;
        return true;
    }
    int found = 0;
    int64_t q = (nb + C - 1) / C, rest = (int64_t)nb - (C - 2) * q, even_l = rest - rest / 2;
    for (int64_t i = 0; i < rest; i++) {
        int64_t l = i == 0 ? even_l : rest - i, f = rest - l;
        if ((i > 0 && l == even_l) || f < 1 || l < 1 || f > q || l > q) continue;
        if (found++ < k) continue;
        for (int64_t c = 0; c < C; c++) count[c] = (int32_t)q;
        count[0] = (int32_t)f, count[C - 1] = (int32_t)l;
        return true;
    }
    return false;
}

/* The fewest blocks n (Megatron's --recompute-num-layers, one for all
 * chunks) whose full recompute at the head of each chunk lets every rank
 * of a split (chunk c = layers lo_of[c] .. lo_of[c+1], on rank c mod pp;
 * v chunks per rank) fit by the table estimate, on option (mesh m, entry
 * si). Megatron's block method runs per TransformerBlock, one per virtual
 * chunk, so n counts in each chunk. False when there is no such n strictly
 * between none (n = 0: recompute is not needed) and full (n as large as a
 * chunk's blocks). */
static bool partial_blocks(loom_search *s, const loom_search_point *pt, int32_t m,
                           int32_t si, const double rate[4], const int32_t *lo_of, int64_t pp,
                           int64_t v, double cap, int64_t *n_out)
{
    const loom_layer_tab *t = pt->tab[m][si];
    double once = (double)t->max_block_act * (1 + LOOM_MEM_FRAGMENTATION);
    int64_t need = 0, most = 0;
    for (int64_t r = 0; r < pp; r++) {
        double st_b = 0, act = 0, inflight = loom_memory_inflight_microbatches(pp, r, v, pt->M);
        int64_t rank_most = 0;   /* blocks of the rank's fullest chunk */
        int32_t next[LOOM_STAGE_MAX];   /* per chunk of the rank: the next block to recompute */
        for (int64_t c = r, j = 0; c < pp * v; c += pp, j++) {
            int64_t blocks = 0;
            next[j] = lo_of[c];
            for (int32_t l = lo_of[c]; l < lo_of[c + 1]; l++) {
                loom_stage_cost one;
                loom_search_layer_cost(s, pt, l, m, si, LOOM_SEARCH_RC_NONE, rate, &one);
                st_b += (double)one.static_bytes, act += (double)one.act_bytes;
                blocks += loom_memory_is_block(pt->g, l);
            }
            if (blocks > rank_most) rank_most = blocks;
        }
        if (rank_most > most) most = rank_most;
        /* recompute one more block of each chunk at a time, in order */
        int64_t k = 0;
        while (k < rank_most && st_b + inflight * act + (k ? once : 0) > cap) {
            for (int64_t c = r, j = 0; c < pp * v; c += pp, j++) {
                int32_t l = next[j];
                while (l < lo_of[c + 1] && !loom_memory_is_block(pt->g, l)) l++;
                if (l >= lo_of[c + 1]) continue;   /* this chunk is all recomputed */
                loom_stage_cost none, full;
                loom_search_layer_cost(s, pt, l, m, si, LOOM_SEARCH_RC_NONE, rate, &none);
                loom_search_layer_cost(s, pt, l, m, si, LOOM_SEARCH_RC_FULL, rate, &full);
                act += (double)(full.act_bytes - none.act_bytes);
                next[j] = l + 1;
            }
            k++;
        }
        if (st_b + inflight * act + (k ? once : 0) > cap) return false;   /* not even full fits */
        if (k > need) need = k;
    }
    *n_out = need;
    return need > 0 && need < most;
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
loom_status loom_search_try_interleaved(loom_search *s, const loom_search_point *pt, int32_t m,
                                        int64_t v, int kind, loom_error *err)
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
    int best_rc = LOOM_SEARCH_RC_NONE;
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
            loom_search_sync_rates(s, pt, m, si, rate);
            /* the DP's options, and full recompute on the first n blocks
             * of each chunk only (partial_blocks) */
            for (int rc = LOOM_SEARCH_RC_NONE; rc <= LOOM_SEARCH_RC_PARTIAL; rc++) {
                if (rc < LOOM_SEARCH_RC_PARTIAL ? rc >= pt->n_rc : pt->n_rc < 2) continue;
                double tr[64] = {0}, st_b[64] = {0}, act_b[64] = {0};
                int64_t head = 0;   /* partial: blocks recomputed at the head of each chunk */
                if (rc == LOOM_SEARCH_RC_PARTIAL &&
                    !partial_blocks(s, pt, m, si, rate, lo_of, pp, v, cap, &head))
                    continue;
                for (int64_t c = 0; c < chunks; c++)
                    for (int64_t l = lo_of[c], left = head; l < lo_of[c + 1]; l++) {
                        int one_rc = rc != LOOM_SEARCH_RC_PARTIAL ? rc
                                     : loom_memory_is_block(g, (int32_t)l) && left-- > 0
                                         ? LOOM_SEARCH_RC_FULL
                                         : LOOM_SEARCH_RC_NONE;
                        loom_stage_cost one;
                        loom_search_layer_cost(s, pt, (int32_t)l, m, si, one_rc, rate, &one);
                        tr[c % pp] += one.time_s;
                        st_b[c % pp] += (double)one.static_bytes;
                        act_b[c % pp] += (double)one.act_bytes;
                    }
                double mx = 0, sum = 0, peak = 0;
                double once = (double)(rc == LOOM_SEARCH_RC_SELECTIVE ? t->max_core
                                       : rc != LOOM_SEARCH_RC_NONE    ? t->max_block_act
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
    int32_t most = 0;   /* blocks of the fullest chunk */
    for (int64_t c = 0, at = b0; c < chunks; c++) {
        loom_search_stage *x = &cfg->stages[c];
        x->first_layer = c == 0 ? 0 : (int32_t)at;
        at += best_count[c];
        if (best_count[c] > most) most = best_count[c];
        x->last_layer = c == chunks - 1 ? n - 1 : (int32_t)at - 1;
        x->group = (int32_t)(c % pp);
        x->submesh = pt->sub[m];
        x->mesh = (loom_mesh_shape){pt->shape[m][best_si][0], pt->shape[m][best_si][1]};
        loom_search_set_space(x, pt->space[m][best_si]);
        x->recompute = loom_search_rc_setting(best_rc);
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
        loom_search_consider(s, cfg, &ev);
        /* not partial, or full reached */
        if (best_rc != LOOM_SEARCH_RC_PARTIAL || best_n == 0) break;
        if (dir == 0) dir = fits ? -1 : 1;
        if ((dir < 0) != fits || (dir < 0 && best_n == 1)) break;
        best_n += dir;
        if (best_n >= most) best_n = 0;   /* every block: full recompute */
    }
    free(cfg);
    return st;
}
