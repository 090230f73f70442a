/*
 * step.c — the instance handle and the time of one iteration (step.h has
 * the model). Everything the time needs is folded into constants at
 * create, so an iteration costs a few dozen roofline terms: the simulator
 * calls it once per engine iteration.
 */
#include "costs/serve/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/collective.h"

struct loom_serve_model {
    loom_serve_shape shape;
    loom_serve_memory mem;
    loom_serve_engine engine;
    loom_serve_calib sc;
    loom_calib cal;
    loom_cluster cluster;        /* intra latency zeroed: the serving calibration has it */
    double peak_bf16, peak_fp8, peak_fp4, hbm_Bps;
    loom_group tp_group, stage_group, p2p_group;
    double iter_overhead_s;   /* the engine's, from sc */
    double seq_s;             /* per sequence per iteration, from sc */
    double latency_s;         /* the front end's per-request hop, from sc */
    loom_serve_frontend frontend;
    loom_serve_client client;
};

/* Takes the serving calibration c: the engine's own overheads, and no
 * front end when the harness has none. */
static void apply_calib(loom_serve_model *m, const loom_serve_calib *c)
{
    m->sc = *c;
    if (m->frontend == LOOM_FRONTEND_NONE)
        m->sc.request_overhead_s = m->sc.stream_token_s = m->sc.client_chunk_s = 0;
    if (m->client != LOOM_CLIENT_PYTHON) m->sc.client_chunk_s = 0;
    m->iter_overhead_s = m->engine.compiled_runtime ? m->sc.iter_compiled_s
                                                    : loom_serve_calib_iter_s(&m->sc, &m->engine);
    m->seq_s = m->engine.compiled_runtime ? m->sc.seq_compiled_s : m->sc.seq_overhead_s;
    if (m->frontend == LOOM_FRONTEND_NIM) m->seq_s += m->sc.seq_nim_s;
    m->latency_s = loom_serve_calib_latency_s(&m->sc, m->engine.kind, m->frontend);
}

static double maxd(double a, double b) { return a > b ? a : b; }

loom_status loom_serve_model_create(const loom_serve_model_opts *o, loom_serve_model **out,
                                    loom_error *err)
{
    *out = NULL;
    loom_serve_model *m = calloc(1, sizeof *m);
    if (!m) return loom_error_set(err, LOOM_ERR_NOMEM, "serving model: out of memory");
    loom_status s;
    const loom_cluster *c = o->cluster;
    if ((s = loom_serve_shape_build(o->graph, &o->par, &m->shape, err))) goto fail;
    if ((s = loom_serve_engine_validate(&o->engine, err))) goto fail;
    if ((s = loom_serve_weights_check(o->par.weights, &c->gpu, err))) goto fail;
    int64_t gpus = m->shape.gpus * o->par.replicas, have = loom_cluster_gpus(c);
    if (gpus > have) {
        s = loom_error_set(err, LOOM_ERR_INVALID,
                           "tp %lld × dp %lld × pp %lld × replicas %lld = %lld GPUs, but cluster "
                           "%s has %lld",
                           (long long)o->par.tp, (long long)o->par.attn_dp, (long long)o->par.pp,
                           (long long)o->par.replicas, (long long)gpus, c->name, (long long)have);
        goto fail;
    }
    m->engine = o->engine;
    m->frontend = o->frontend;
    m->client = o->client;
    loom_serve_calib sc;
    if (o->serve_calib) sc = *o->serve_calib;
    else loom_serve_calib_default(&c->gpu, &sc);
    if ((s = loom_serve_calib_validate(&sc, err))) goto fail;
    apply_calib(m, &sc);
    if (o->calib) m->cal = *o->calib;
    else loom_calib_default(&c->gpu, &m->cal);
    m->cluster = *c;
    m->cluster.intra.latency_s = 0;
    m->peak_bf16 = loom_device_peak_flops(&c->gpu, LOOM_DTYPE_BF16);
    if (!(m->peak_bf16 > 0)) m->peak_bf16 = loom_device_peak_flops(&c->gpu, LOOM_DTYPE_FP16);
    m->peak_fp8 = loom_device_peak_flops(&c->gpu, LOOM_DTYPE_FP8);
    /* fp8 weights without fp8 tensor cores (A100): weight-only FP8 (Marlin)
     * upcasts and multiplies in 16 bits */
    if (!(m->peak_fp8 > 0)) m->peak_fp8 = m->peak_bf16;
    m->peak_fp4 = c->gpu.fp4_flops;
    m->hbm_Bps = c->gpu.hbm_bw_Bps;
    int64_t gpn = c->gpus_per_node, stage = o->par.tp * o->par.attn_dp;
    m->tp_group = (loom_group){o->par.tp, o->par.tp < gpn ? o->par.tp : gpn};
    m->stage_group = (loom_group){stage, stage < gpn ? stage : gpn};
    m->p2p_group = (loom_group){2, 2 * stage <= gpn ? 2 : 1};
    int64_t seq = o->seq_tokens > 0 ? o->seq_tokens : 2048;
    if ((s = loom_serve_memory_compute(&m->shape, &m->engine, &c->gpu, seq, &m->mem, err))) goto fail;
    *out = m;
    return LOOM_OK;
fail:
    loom_serve_model_destroy(m);
    return s;
}

void loom_serve_model_destroy(loom_serve_model *m)
{
    if (!m) return;
    loom_serve_shape_free(&m->shape);
    free(m);
}

void loom_serve_model_set_calib(loom_serve_model *m, const loom_serve_calib *c)
{
    apply_calib(m, c);
}

const loom_serve_shape *loom_serve_model_shape(const loom_serve_model *m) { return &m->shape; }
const loom_serve_memory *loom_serve_model_memory(const loom_serve_model *m) { return &m->mem; }
const loom_serve_engine *loom_serve_model_engine(const loom_serve_model *m) { return &m->engine; }
const loom_serve_calib *loom_serve_model_calib(const loom_serve_model *m) { return &m->sc; }
double loom_serve_model_latency_s(const loom_serve_model *m) { return m->latency_s; }
loom_serve_frontend loom_serve_model_frontend(const loom_serve_model *m) { return m->frontend; }
loom_serve_client loom_serve_model_client(const loom_serve_model *m) { return m->client; }
const loom_cluster *loom_serve_model_cluster(const loom_serve_model *m) { return &m->cluster; }

int64_t loom_serve_iter_budget(const loom_serve_model *m)
{
    return m->engine.max_batched_tokens * m->shape.par.pp;
}

/* A tensor-core kernel of F FLOPs: F / (peak · eff · F/(F + half)). */
static double tc_s(const loom_serve_model *m, double flops, double peak, double eff)
{
    if (!(flops > 0)) return 0;
    return (flops + m->cal.gemm_half_flops) / (peak * eff);
}

static double mem_s(const loom_serve_model *m, double bytes)
{
    return bytes > 0 ? bytes / (m->hbm_Bps * m->sc.decode_mem_eff) : 0;
}

double loom_serve_iter_time(const loom_serve_model *m, const loom_serve_batch *b,
                            loom_serve_iter *bd)
{
    const loom_serve_shape *s = &m->shape;
    const loom_serve_calib *sc = &m->sc;
    const loom_serve_parallel *p = &s->par;
    loom_serve_iter it = {0};
    int64_t n_all = b->n_decode + b->n_prefill;
    if (n_all <= 0) {
        if (bd) *bd = it;
        return 0;
    }
    /* one micro-batch on one attention-DP rank: the running sequences are
     * spread over pp · dp of them, but a sequence is never split, so with
     * fewer sequences than that each one is a micro-batch of its own */
    double ways = (double)(p->pp * p->attn_dp);
    double dec_share = 1.0 / fmin(ways, fmax((double)b->n_decode, 1));
    double pre_seqs = b->n_prefill_seqs > 0 ? (double)b->n_prefill_seqs : ways;
    double pre_share = 1.0 / fmin(ways, pre_seqs);
    double share = (double)n_all > 0
                       ? ((double)b->n_decode * dec_share + (double)b->n_prefill * pre_share) /
                             (double)n_all
                       : 1.0 / ways;
    double n = (double)n_all * share;
    double n_group = n * (double)p->attn_dp;   /* tokens reaching the experts */

    for (int32_t i = 0; i < s->n_gemm; i++) {
        const loom_serve_gemm *g = &s->gemm[i];
        double peak = g->fp4 ? m->peak_fp4 : g->fp8 ? m->peak_fp8 : m->peak_bf16, f, w, a;
        if (g->expert) {
            double slots = n_group * (double)s->topk / (double)p->ep;
            double touched = (double)s->experts_local *
                             (1 - pow(1 - (double)s->topk / (double)s->experts, n_group));
            f = g->flops_per_token * slots;
            w = g->weight_bytes * touched;
            a = g->act_bytes_per_token * slots;
        } else {
            f = g->flops_per_token * n;
            w = g->weight_bytes;
            a = g->act_bytes_per_token * n;
        }
        it.gemm_s += g->count * maxd(tc_s(m, f, peak, sc->gemm_eff), mem_s(m, w + a));
    }
    /* the LM head for the sampled tokens */
    double ns = (double)b->n_sampled / fmin(ways, fmax((double)b->n_sampled, 1));
    if (ns > 0)
        it.gemm_s += maxd(tc_s(m, s->head_flops_per_token * ns, m->peak_bf16, sc->gemm_eff),
                          mem_s(m, s->head_weight_bytes + ns * 4.0 * (double)s->vocab / (double)p->tp));
    /* attention: decode streams the KV; prefill computes causal pairs */
    double ctx = b->decode_ctx * dec_share;
    if (ctx > 0)
        it.attn_s += maxd(s->attn_decode_flops_per_ctx * ctx / (m->peak_bf16 * sc->attn_eff),
                          mem_s(m, s->kv_bytes_per_token * ctx));
    if (b->n_prefill > 0) {
        double pairs = b->prefill_pairs * pre_share, prefix = b->prefill_prefix * pre_share;
        it.attn_s += maxd(s->attn_prefill_flops_per_pair * pairs / (m->peak_bf16 * sc->attn_eff),
                          mem_s(m, s->kv_bytes_per_token * (prefix + (double)b->n_prefill * pre_share)));
    }
    it.other_s = mem_s(m, s->other_bytes_per_token * n);
    bool graphed = m->engine.compiled_runtime ||
                   (n <= (double)m->engine.cuda_graph_max_bs &&
                    (b->n_prefill == 0 || m->engine.kind == LOOM_ENGINE_VLLM));
    it.other_s += (double)s->kernels * (sc->kernel_gap_s + (graphed ? 0 : sc->eager_gap_s));
    /* collectives: all-reduces of [n, h] bf16, EP all-to-all of the routed copies */
    double hb = 2.0 * (double)s->hidden;
    if (s->allreduces > 0)
        it.comm_s += (double)s->allreduces *
                     (sc->ar_latency_s + loom_group_collective_time_s(&m->cluster, &m->cal,
                                                                      LOOM_COLL_ALL_REDUCE,
                                                                      m->tp_group, n * hb));
    if (s->alltoalls > 0)
        it.comm_s += (double)s->alltoalls *
                     (sc->ar_latency_s + loom_group_collective_time_s(
                                             &m->cluster, &m->cal, LOOM_COLL_ALL_TO_ALL,
                                             m->stage_group, n * hb * (double)s->topk));
    if (p->pp > 1)
        it.comm_s += (double)(p->pp - 1) *
                     (sc->ar_latency_s / 2 + loom_group_collective_time_s(&m->cluster, &m->cal,
                                                                          LOOM_COLL_SEND_RECV,
                                                                          m->p2p_group, n * hb));
    it.overhead_s = m->iter_overhead_s + m->seq_s * (double)b->n_sampled;
    double gpu_s = it.gemm_s + it.attn_s + it.other_s + it.comm_s;
    /* an overlap scheduler prepares iteration i+1 on the host while the GPU
     * runs iteration i: the longer of the two paces the loop */
    if (m->engine.overlap_host && !m->engine.compiled_runtime)
        it.total_s = gpu_s > it.overhead_s ? gpu_s : it.overhead_s;
    else it.total_s = gpu_s + it.overhead_s;
    if (bd) *bd = it;
    return it.total_s;
}

double loom_serve_decode_time(const loom_serve_model *m, int64_t n, double ctx)
{
    loom_serve_batch b = {.n_decode = n, .decode_ctx = (double)n * ctx, .n_sampled = n};
    return loom_serve_iter_time(m, &b, NULL);
}

double loom_serve_prefill_time(const loom_serve_model *m, int64_t n)
{
    loom_serve_batch b = {.n_prefill = n, .n_prefill_seqs = 1,
                          .prefill_pairs = (double)n * ((double)n + 1) / 2,
                          .n_sampled = 1};
    return loom_serve_iter_time(m, &b, NULL);
}
