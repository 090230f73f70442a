/*
 * mspace.c — enumerating the Megatron-style space and turning its points
 * into configurations for the shared evaluator (mspace.h).
 *
 * Layer split. With L transformer blocks on pp ranks and v chunks per
 * rank, chunk c holds blocks [c·L/(pp·v), (c+1)·L/(pp·v)); when pp does
 * not divide L the first and last ranks hold q - ⌈r/2⌉ and q - ⌊r/2⌋
 * blocks (q = ⌈L/pp⌉, r = pp·q - L) and the others q. The embedding slot
 * goes with the first chunk, the head slot with the last (Megatron's
 * pre_process / post_process stages), which is also what loom_eval_megatron
 * assumes.
 *
 * Layout (Megatron's rank order: tensor fastest, then data, then pipeline):
 * pipeline rank r owns the block [r·tp·dp, (r+1)·tp·dp) and replica k runs
 * at offset k·tp inside it, when those blocks tile nodes; otherwise
 * replicas are consecutive blocks of tp·pp GPUs: loom_search_layout, the
 * Alpa planner's own, so one configuration has one placement whichever
 * algorithm produced it.
 */
#include "planner/compare/mspace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* A replica of D GPUs on nodes of g: whole nodes, or a power of two that
 * divides a node (the sub-meshes of stage_dp.h). */
static bool valid_replica(int64_t D, int64_t g)
{
    if (D % g == 0) return true;
    return D < g && g % D == 0 && (D & (D - 1)) == 0;
}

bool loom_mspace_uneven(int64_t L, int64_t pp, int64_t *first, int64_t *last)
{
    *first = *last = 0;
    if (L % pp == 0) return true;
    if (pp < 2) return false;
    int64_t q = (L + pp - 1) / pp, r = pp * q - L;
    *first = q - (r + 1) / 2;
    *last = q - r / 2;
    return *first >= 1 && *last >= 1;
}

static loom_status push(loom_mspace *s, int64_t *cap, const loom_parallel *p, loom_error *err)
{
    if (s->n == *cap) {
        int64_t nc = *cap ? 2 * *cap : 256;
        loom_parallel *np = realloc(s->points, sizeof *np * (size_t)nc);
        if (!np) return loom_error_set(err, LOOM_ERR_NOMEM, "Megatron space: out of memory");
        s->points = np;
        *cap = nc;
    }
    s->points[s->n++] = *p;
    return LOOM_OK;
}

typedef struct {
    const loom_algo_request *req;
    loom_model_info mi;       /* layers = the blocks */
    int64_t G, g, L;
    loom_mspace *out;
    int64_t cap;
} builder;

/* Every (micro-batch, vpp, recompute, ZeRO) of degrees (tp, cp, pp, dp)
 * and B sequences, in that order. */
static loom_status add_degrees(builder *b, int64_t tp, int64_t cp, int64_t pp, int64_t dp,
                               int64_t B, int64_t first, int64_t last, loom_error *err)
{
    static const int64_t vpps[] = {1, 2, 4};
    const loom_algo_request *req = b->req;
    const bool train = !req->problem.inference;
    for (int64_t mbs = 1; mbs <= req->max_micro_batch && mbs <= B / dp; mbs++) {
        if ((B / dp) % mbs) continue;
        int64_t M = B / dp / mbs;
        for (size_t vi = 0; vi < sizeof vpps / sizeof vpps[0]; vi++) {
            int64_t v = vpps[vi];
            if (v > 1 && (!train || pp < 2 || first > 0 || b->L % (pp * v) || M % pp)) continue;
            for (int rc = 0; rc < (train ? 2 : 1); rc++) {
                int zmax = train && dp > 1 ? (pp == 1 ? 3 : 1) : 0;
                for (int z = 0; z <= zmax; z++) {
                    loom_parallel p;
                    loom_parallel_init(&p);
                    p.tp = tp, p.cp = cp, p.pp = pp, p.dp = dp, p.vpp = v;
                    p.sp = tp > 1;
                    p.tp_comm_overlap = train && tp > 1;
                    p.mbs = mbs, p.gbs = B, p.seq = req->problem.seq;
                    p.dtype = req->problem.dtype, p.flash = req->problem.flash_attention;
                    p.recompute = rc ? LOOM_RECOMPUTE_FULL : LOOM_RECOMPUTE_NONE;
                    p.zero = z;
                    p.first_stage_layers = first, p.last_stage_layers = last;
                    loom_error ignored;
                    if (loom_parallel_check(&p, &b->mi, b->G, &ignored) != LOOM_OK) continue;
                    loom_status s = push(b->out, &b->cap, &p, err);
                    if (s) return s;
                }
            }
        }
    }
    return LOOM_OK;
}

loom_status loom_mspace_build(loom_algo_ctx *ctx, loom_mspace *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    const loom_algo_request *req = loom_algo_ctx_request(ctx);
    const loom_cluster *c = loom_algo_ctx_cluster(ctx);
    const loom_graph *g1;
    loom_status s = loom_algo_ctx_graph(ctx, 1, &g1, err);
    if (s) return s;
    builder b = {.req = req, .mi = *loom_graph_info_c(g1), .G = loom_cluster_gpus(c),
                 .g = c->gpus_per_node, .L = loom_algo_ctx_blocks(ctx), .out = out};
    b.mi.layers = b.L;
    /* Sequences served at once: gbs; the throughput objective may also
     * serve fewer (the powers of two below gbs), as the planner does. */
    int64_t batches[64];
    int nb = 0;
    batches[nb++] = req->problem.gbs;
    if (req->problem.inference && req->problem.objective == LOOM_OBJ_THROUGHPUT)
        for (int64_t q = 1; q < req->problem.gbs && nb < 64; q *= 2) batches[nb++] = q;
    /* context parallelism: training with fused attention (Megatron's ring) */
    bool cp_ok = !req->problem.inference && req->problem.flash_attention;
    for (int bi = 0; bi < nb && !s; bi++)
        for (int64_t tp = 1; tp <= b.g && !s; tp *= 2) {
            if (b.g % tp) continue;
            for (int64_t cp = 1; tp * cp <= b.G && (cp == 1 || cp_ok) && !s; cp *= 2)
                for (int64_t pp = 1; pp <= b.L && tp * cp * pp <= b.G && !s; pp++) {
                    int64_t D = tp * cp * pp, first, last;
                    if (b.G % D || !valid_replica(D, b.g) ||
                        !loom_mspace_uneven(b.L, pp, &first, &last) || batches[bi] % (b.G / D))
                        continue;
                    s = add_degrees(&b, tp, cp, pp, b.G / D, batches[bi], first, last, err);
                }
        }
    if (s) loom_mspace_free(out);
    return s;
}

void loom_mspace_free(loom_mspace *s)
{
    if (!s) return;
    free(s->points);
    s->points = NULL;
    s->n = 0;
}

void loom_mspace_config(const loom_algo_ctx *ctx, const loom_parallel *p, loom_search_config *cfg)
{
    const int64_t pp = p->pp, v = p->vpp, chunks = pp * v, cp = p->cp > 1 ? p->cp : 1;
    const int64_t size = p->tp * cp;   /* a stage's GPUs */
    /* a configuration on the tile of every NVLink domain (costs/cluster.h)
     * is laid out on the tile view, as loom eval places it */
    const loom_cluster *c = loom_algo_ctx_cluster(ctx);
    loom_cluster view;
    bool tiled = loom_cluster_job_view(c, size * pp * p->dp, &view) &&
                 view.idle_per_node > c->idle_per_node;
    const int64_t g = tiled ? view.gpus_per_node : c->gpus_per_node;
    memset(cfg, 0, sizeof *cfg);
    cfg->tiled = tiled;
    cfg->mbs = p->mbs;
    cfg->micro_batches = p->gbs / (p->dp * p->mbs);
    cfg->dp = p->dp;
    cfg->gpus_per_replica = size * pp;
    cfg->vpp = v;
    cfg->pp = pp;
    cfg->sequences = p->gbs;
    cfg->zero = p->zero;
    cfg->n_stages = (int32_t)chunks;

    int32_t bound[LOOM_STAGE_MAX + 1];
    loom_mspace_split(ctx, chunks, p->first_stage_layers, p->last_stage_layers, bound);
    for (int64_t ch = 0; ch < chunks; ch++) {
        loom_search_stage *st = &cfg->stages[ch];
        st->first_layer = bound[ch];
        st->last_layer = bound[ch + 1] - 1;
        st->group = (int32_t)(ch % pp);
        st->submesh = size > g ? (loom_submesh){size / g, g} : (loom_submesh){1, size};
        st->mesh = (loom_mesh_shape){cp, p->tp};
        st->megatron = true;
        st->context_parallel = cp > 1;
        st->tp_comm_overlap = p->tp_comm_overlap && p->tp > 1;
        /* expert parallelism beyond the context-parallel ranks spans
         * ep / cp neighbouring replicas (Megatron's rank order tp-cp-dp;
         * the expert group ep-edp over the same ranks) */
        st->ep_span = cp > 1 && p->ep > cp && p->ep % cp == 0 ? p->ep / cp : 1;
        /* expert TP 1 under a TP: the experts over the TP ranks too (EP tp,
         * or tp x cp x the ep / (tp x cp) replicas the group spans) */
        st->expert_fold = p->etp == 1 && p->tp > 1;
        if (st->expert_fold) {
            int64_t mesh = p->tp * cp;
            st->ep_span = cp > 1 && p->ep > mesh && p->ep % mesh == 0 ? p->ep / mesh : 1;
            st->expert_split = cp > 1 && p->ep >= mesh ? 1 : -1;
        }
        st->recompute = p->recompute;
        st->recompute_blocks = p->recompute == LOOM_RECOMPUTE_FULL ? p->recompute_layers : 0;
        st->first_gpu = st->group * size;   /* inside replica 0 */
    }
    loom_search_layout(g, cfg);
}

void loom_mspace_split(const loom_algo_ctx *ctx, int64_t chunks, int64_t first_blocks,
                       int64_t last_blocks, int32_t *bound)
{
    const int32_t n = loom_algo_ctx_layers(ctx);
    const bool *is_block = loom_algo_ctx_block_mask(ctx);
    const int64_t L = loom_algo_ctx_blocks(ctx);
    bool uneven = first_blocks > 0 || last_blocks > 0;
    int64_t end_block = 0;   /* blocks in chunks 0..ch */
    int32_t l = 0;           /* slot holding block number end_block - 1 */
    int64_t seen = 0;
    bound[0] = 0;
    for (int64_t ch = 0; ch + 1 < chunks; ch++) {
        end_block += !uneven ? L / chunks
                   : ch == 0 ? first_blocks
                   : (L - first_blocks - last_blocks) / (chunks - 2);
        while (l < n && !(is_block[l] && seen + 1 == end_block)) seen += is_block[l++];
        seen += l < n && is_block[l];
        bound[ch + 1] = ++l;
    }
    bound[chunks] = n;
}

static bool same_stage(const loom_search_stage *a, const loom_search_stage *b)
{
    return a->first_layer == b->first_layer && a->last_layer == b->last_layer &&
           a->group == b->group && a->submesh.nodes == b->submesh.nodes &&
           a->submesh.gpus == b->submesh.gpus && a->mesh.n0 == b->mesh.n0 &&
           a->mesh.n1 == b->mesh.n1 && a->megatron == b->megatron &&
           a->context_parallel == b->context_parallel &&
           a->tp_comm_overlap == b->tp_comm_overlap &&
           (a->ep_span > 1 ? a->ep_span : 1) == (b->ep_span > 1 ? b->ep_span : 1) &&
           a->expert_fold == b->expert_fold && a->recompute == b->recompute && a->recompute_blocks == b->recompute_blocks &&
           a->first_gpu == b->first_gpu &&
           a->replica_stride == b->replica_stride;
}

int64_t loom_mspace_find(const loom_algo_ctx *ctx, const loom_mspace *s,
                         const loom_search_config *cfg)
{
    loom_search_config *x = malloc(sizeof *x);
    if (!x) return -1;
    int64_t found = -1;
    for (int64_t i = 0; i < s->n && found < 0; i++) {
        const loom_parallel *p = &s->points[i];
        if (p->pp != cfg->pp || p->vpp != cfg->vpp || p->dp != cfg->dp || p->mbs != cfg->mbs ||
            p->zero != cfg->zero || p->cp * p->tp * p->pp != cfg->gpus_per_replica)
            continue;
        loom_mspace_config(ctx, p, x);
        bool same = x->micro_batches == cfg->micro_batches &&
                    x->gpus_per_replica == cfg->gpus_per_replica &&
                    x->sequences == cfg->sequences && x->n_stages == cfg->n_stages;
        for (int32_t k = 0; same && k < x->n_stages; k++)
            same = same_stage(&x->stages[k], &cfg->stages[k]);
        if (same) found = i;
    }
    free(x);
    return found;
}

loom_status loom_mspace_eval(loom_algo_ctx *ctx, const loom_parallel *p, loom_search_config *cfg,
                             loom_algo_score *out, loom_error *err)
{
    loom_search_config *x = cfg ? cfg : malloc(sizeof *x);
    if (!x) return loom_error_set(err, LOOM_ERR_NOMEM, "Megatron space: out of memory");
    loom_mspace_config(ctx, p, x);
    loom_status s = loom_algo_eval(ctx, x, out, err);
    if (!cfg) free(x);
    return s;
}

loom_status loom_mspace_sweep(loom_algo_ctx *ctx, const loom_mspace *s, const int64_t *idx,
                              int64_t n, loom_algo_result *out, loom_error *err)
{
    loom_search_config *cfg = malloc(sizeof *cfg);
    if (!cfg) return loom_error_set(err, LOOM_ERR_NOMEM, "Megatron space: out of memory");
    loom_status st = LOOM_OK;
    for (int64_t i = 0; i < n && !st && !loom_algo_ctx_stop(ctx); i++) {
        loom_algo_score sc;
        st = loom_mspace_eval(ctx, &s->points[idx ? idx[i] : i], cfg, &sc, err);
        if (!st) loom_algo_offer(out, cfg, &sc);
    }
    free(cfg);
    return st;
}

const loom_parallel *loom_mspace_pick(const loom_mspace *s, bool train, int64_t tp, int64_t pp,
                                      loom_recompute rc)
{
    const loom_parallel *best = NULL;
    for (int64_t i = 0; i < s->n; i++) {
        const loom_parallel *p = &s->points[i];
        int zero = train && p->dp > 1 ? 1 : 0;
        if (p->tp != tp || p->pp != pp || p->cp != 1 || p->vpp != 1 || p->recompute != rc ||
            p->zero != zero)
            continue;
        if (train ? p->mbs == 1 : !best || p->mbs > best->mbs) best = p;
        if (train && best) break;
    }
    return best;
}
