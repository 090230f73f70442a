/*
 * stage_eval.c — the exact evaluation of a configuration (loom_search_eval),
 * the one evaluator every search algorithm's plans are scored by, and the
 * tensor- and expert-parallel group sizes read off its chosen specs.
 *
 * A configuration's stages are solved as ranges (so the resharding where
 * different layer kinds meet is included), their memory follows
 * costs/memory.c's conventions (saved activations × micro-batches in
 * flight + working set, 10 % fragmentation, 1 GiB workspace), and the step
 * goes through costs/pipeline.h exactly as eval.c does for Megatron plans,
 * so plans of every search algorithm are compared on the same terms.
 *
 * Units: seconds, bytes per GPU.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/dp_sync.h"
#include "base/clock.h"
#include "costs/memory.h"
#include "costs/pipeline.h"
#include "costs/recompute.h"
#include "solver/stage_search_impl.h"

/* ---- group sizes ------------------------------------------------------------------ */

/* The tensor- and expert-parallel group sizes of stage st, read off the
 * specs its evaluation chose (r) by the rule loom_plan_stage_roles names
 * roles with (planner/plan): an op whose weights carry e and f is an
 * expert op (EP over the axes splitting e, times the replicas its group
 * spans), any other weight is tensor parallel over every axis it splits.
 * *ep is 0 for a stage without expert ops. */
static void stage_groups(const loom_graph *g, const loom_search_stage *st,
                         const loom_intra_result *r, int64_t *tp_out, int64_t *ep_out)
{
    unsigned tp = 0, ep = 0;
    bool experts = false;
    int32_t first, count, last_first, last_count;
    loom_graph_layer_ops(g, st->first_layer, &first, &count);
    loom_graph_layer_ops(g, st->last_layer, &last_first, &last_count);
    for (int32_t op = first; op < last_first + last_count; op++) {
        const loom_op *o = loom_graph_op(g, op);
        unsigned all = 0, e = 0;
        bool has_e = false, has_f = false;
        for (int k = 0; k < o->n_w; k++) {
            loom_spec sp;
            int32_t t = loom_intra_operand(g, op, LOOM_OPERAND_WEIGHT, k);
            if (t < 0 || !loom_intra_op_spec(r, g, op, LOOM_OPERAND_WEIGHT, k, &sp)) continue;
            const loom_tensor *ten = loom_graph_tensor(g, t);
            for (int d = 0; d < ten->ndim; d++) {
                has_e |= !strcmp(ten->dims[d].name, "e");
                has_f |= !strcmp(ten->dims[d].name, "f");
            }
            all |= loom_spec_dim_axes(&sp, ten, NULL);
            e |= loom_spec_dim_axes(&sp, ten, "e");
        }
        if (has_e && has_f) ep |= e, experts = true;
        else tp |= all;
    }
    *tp_out = loom_search_axes_parts(tp, st->mesh);
    *ep_out = !experts ? 0
                       : loom_search_axes_parts(ep, st->mesh) *
                             (ep ? loom_search_space_ep_span(loom_search_stage_space(st)) : 1);
}

int64_t loom_search_largest_group(const loom_graph *g, const loom_search_config *cfg,
                                  const loom_search_eval_result *ev)
{
    int64_t largest = 1;
    for (int32_t i = 0; i < cfg->n_stages && i < ev->n_stages; i++) {
        int64_t t, x;
        stage_groups(g, &cfg->stages[i], &ev->stages[i].intra, &t, &x);
        if (t > largest) largest = t;
        if (x > largest) largest = x;
    }
    return largest;
}

bool loom_search_ep_is(const loom_graph *g, const loom_search_config *cfg,
                       const loom_search_eval_result *ev, int64_t ep)
{
    for (int32_t i = 0; i < cfg->n_stages && i < ev->n_stages; i++) {
        int64_t t, x;
        stage_groups(g, &cfg->stages[i], &ev->stages[i].intra, &t, &x);
        if (x != 0 && x != ep) return false;
    }
    return true;
}

/* ---- exact evaluation -------------------------------------------------------------- */

void loom_search_eval_free(loom_search_eval_result *r)
{
    if (!r) return;
    for (int32_t i = 0; i < r->n_stages; i++) loom_intra_result_free(&r->stages[i].intra);
    free(r->stages);
    memset(r, 0, sizeof *r);
}

static loom_status eval_stage(loom_search *s, const loom_graph *g, const loom_search_config *cfg,
                              int32_t i, loom_stage_eval *e, loom_error *err)
{
    const loom_search_stage *st = &cfg->stages[i];
    bool train = !s->pb.inference;
    loom_intra_opts o;
    loom_search_intra_opts(s, loom_search_stage_space(st), &o);
    loom_status rs = loom_intra_solve(g, s->cm, st->first_layer, st->last_layer, st->mesh, &o,
                                      &e->intra, err);
    if (rs) return rs;
    if (e->intra.status == LOOM_ILP_INFEASIBLE)
        return loom_error_set(err, LOOM_ERR_INFEASIBLE,
                              "stage %d: no strategies for layers %d..%d on mesh %lldx%lld",
                              (int)i, (int)st->first_layer, (int)st->last_layer,
                              (long long)st->mesh.n0, (long long)st->mesh.n1);
    const loom_layer_tab *t;
    rs = loom_search_layer_tab(s, cfg->mbs, st->mesh, loom_search_stage_space(st), &t, err);
    if (rs) return rs;

    bool rc = st->recompute == LOOM_RECOMPUTE_FULL && train;
    /* selective recompute: the attention core's ops (Megatron's default
     * core_attn module: the unfused s×t chain, or the fused kernel) rerun,
     * its s×t tensors are not kept (costs/recompute.h) */
    bool sel = st->recompute == LOOM_RECOMPUTE_SELECTIVE && train;
    /* Partial recompute (Megatron's --recompute-method block
     * --recompute-num-layers N): only the first N blocks of the chunk
     * rerun (the method runs per TransformerBlock, one per virtual chunk;
     * loom eval counts them so, costs/eval.c); the rest keep all their
     * activations. */
    int64_t rc_left = rc && st->recompute_blocks > 0 ? st->recompute_blocks : INT64_MAX;
    double bwd = 0, rerun = 0, kv_read = 0, resh = 0;
    int64_t saved = 0, work = 0, kv = 0, blocks = 0;
    /* Identical layers share one solved layer (intra.h), so their sums are
     * computed once: the stage costs O(distinct layers), not O(layers). */
    typedef struct {
        const loom_intra_layer *layer;
        double bwd, rerun, flops, measured, total, resh, sel;
    } layer_sums;
    layer_sums seen[8];
    int n_seen = 0;
    for (int32_t l = st->first_layer; l <= st->last_layer; l++) {
        int32_t first, count;
        loom_graph_layer_ops(g, l, &first, &count);
        bool block = loom_memory_is_block(g, l);
        blocks += block;
        bool redo = rc && block && rc_left-- > 0;   /* this block reruns its forward */
        const loom_intra_layer *lay = e->intra.layers[l - st->first_layer];
        int k = 0;
        while (k < n_seen && seen[k].layer != lay) k++;   /* identity only: the type is opaque */
        layer_sums one = {lay, 0, 0, 0, 0, 0, 0, 0};
        if (k < n_seen) one = seen[k];
        for (int32_t q = first; q < first + count && k == n_seen; q++) {
            loom_intra_op_cost c;
            if (!loom_intra_op_cost_get(&e->intra, g, q, &c)) continue;
            const loom_op *op = loom_graph_op(g, q);
            /* the rerun forward: compute, collectives and input resharding (eval.c) */
            if (train)
                one.bwd += c.compute_s - c.fwd_compute_s + c.comm_s - c.fwd_comm_s + c.reshard_bwd_s;
            one.resh += c.reshard_fwd_s + c.reshard_bwd_s;
            if (rc && block) one.rerun += c.fwd_compute_s + c.fwd_comm_s + c.reshard_fwd_s;
            if (sel && (loom_recompute_op_modules(g, q) & LOOM_RC_CORE_ATTN))
                one.sel += c.fwd_compute_s + c.fwd_comm_s;
            if (loom_search_is_matmul(op)) one.flops += (train ? 3.0 : 1.0) * (double)op->fwd_flops;
            if (!s->want_measured) continue;
            /* where the compute time comes from (profile db or roofline) */
            loom_dim div[LOOM_PROFILE_MAX_DIMS];
            int nd = loom_search_op_splits(&e->intra, g, q, st->mesh, div, LOOM_PROFILE_MAX_DIMS);
            loom_dim_split sp[LOOM_PROFILE_MAX_DIMS];
            for (int d = 0; d < nd; d++) sp[d] = (loom_dim_split){div[d].name, div[d].size};
            loom_op_time ot;
            loom_error eo;
            if (loom_cost_op_time(s->cm, g, q, sp, nd, &ot, &eo) == LOOM_OK) {
                double tt = ot.fwd_s + (train ? ot.bwd_s : 0);
                one.total += tt;
                if (ot.source != LOOM_SRC_ROOFLINE) one.measured += tt;
            }
        }
        if (k == n_seen && n_seen < 8) seen[n_seen++] = one;
        bwd += one.bwd, rerun += (redo ? one.rerun : 0) + one.sel, resh += one.resh;
        e->model_flops += one.flops;
        e->measured_s += one.measured, e->total_s += one.total;
        if (train) {
            saved += redo ? t->input_bytes[l] : t->act_bytes[l] - (sel ? t->core_bytes[l] : 0);
            if (redo && t->act_bytes[l] > work) work = t->act_bytes[l];
            if (sel && t->core_bytes[l] > work) work = t->core_bytes[l];
        } else {
            if (t->act_bytes[l] > work) work = t->act_bytes[l];
            kv += t->kv_per_seq[l];
            kv_read += t->kv_read_s[l];
        }
    }
    /* resharding between layer kinds: half forward, half backward */
    bwd += train ? 0.5 * (e->intra.reshard_s - resh) : 0;
    e->compute_s = e->intra.compute_s + rerun + kv_read;
    e->comm_s = e->intra.comm_s;
    e->time_s = e->intra.time_s + rerun + kv_read;
    e->bwd_s = train ? bwd + rerun : 0;
    e->params = e->intra.param_count_per_gpu;
    e->in_flight = train ? loom_memory_inflight_microbatches(cfg->pp, st->group, cfg->vpp,
                                                             cfg->micro_batches)
                         : 1.0;

    /* the chunk's own part; rank_memory() adds the working set and the
     * workspace allowance once per pipeline rank */
    loom_model_state ms;
    loom_memory_model_state_local(e->params, e->intra.param_count_local_per_gpu, cfg->dp,
                                  cfg->zero, train, &ms);
    e->mem_params = ms.params_bytes;
    e->mem_grads = ms.grads_bytes;
    e->mem_optimizer = ms.optimizer_bytes;
    e->mem_activations = (int64_t)((double)saved * e->in_flight + 0.5);
    e->mem_work = work;
    e->mem_kv = kv * (cfg->sequences / cfg->dp);
    if (train) {
        /* each weight's gradient over its one data-parallel group (its
         * data-parallel copies in the mesh × the replicas), and over the
         * other axes it is partial over inside the mesh */
        e->grad_sync_s = e->intra.other_sync_s;
        e->grad_sync_unhidden_s = 0;
        for (unsigned a = 0; a < 4; a++) {
            loom_group grp = loom_search_weight_dp_group(s, st->mesh, a, cfg->dp,
                                                         st->replica_stride, st->first_gpu,
                                                         loom_search_stage_space(st));
            double n = e->intra.dp_params_per_gpu[a];
            e->grad_sync_s += loom_search_dp_sync_s(s, n, grp, cfg->zero, cfg->micro_batches,
                                                    blocks, rc);
            e->grad_sync_unhidden_s += loom_search_dp_unhidden_s(s, n, grp, cfg->zero,
                                                                 cfg->micro_batches, blocks, rc);
        }
        double local = cfg->zero >= 1
                           ? ceil((double)e->intra.param_count_local_per_gpu / (double)cfg->dp)
                           : (double)e->params;
        e->optimizer_s = loom_cost_memory_time_s(s->cm, LOOM_OPTIM_STEP_BYTES_PER_PARAM * local);
    }
    return LOOM_OK;
}

/* Memory per GPU of every pipeline rank. A rank holds all its chunks at
 * once (vpp of them when interleaving): their model state, KV cache and
 * saved activations (each chunk's × the rank's in-flight count, which
 * memory.h gives in units of the rank's whole layer set), plus ONE
 * recompute working set (the largest of its chunks': one block is rerun at
 * a time) and ONE workspace allowance (LOOM_MEM_RESERVED_BYTES +
 * fragmentation × activations, costs/memory.h). Both are booked on the
 * rank's first chunk, so that the rank's memory is the sum of its chunks'
 * totals; with vpp = 1 each stage is a rank and this is memory.c's total. */
static void rank_memory(const loom_search *s, const loom_search_config *cfg,
                        loom_search_eval_result *out)
{
    out->memory_per_gpu_bytes = 0;
    out->fits = true;
    for (int64_t r = 0; r < cfg->pp; r++) {
        int32_t first = -1;
        int64_t work = 0, sum = 0;
        for (int32_t i = 0; i < out->n_stages; i++) {
            if (cfg->stages[i].group != r) continue;
            if (first < 0) first = i;
            if (out->stages[i].mem_work > work) work = out->stages[i].mem_work;
        }
        for (int32_t i = first; i >= 0 && i < out->n_stages; i++) {
            if (cfg->stages[i].group != r) continue;
            loom_stage_eval *e = &out->stages[i];
            e->mem_work = i == first ? work : 0;
            e->mem_activations += e->mem_work;
            e->mem_other = (i == first ? LOOM_MEM_RESERVED_BYTES : 0) +
                           (int64_t)((double)e->mem_activations * LOOM_MEM_FRAGMENTATION + 0.5);
            e->mem_total = e->mem_params + e->mem_grads + e->mem_optimizer + e->mem_activations +
                           e->mem_kv + e->mem_other;
            sum += e->mem_total;
        }
        if (sum > out->memory_per_gpu_bytes) out->memory_per_gpu_bytes = sum;
        if (sum > loom_cluster_usable_bytes(s->c)) out->fits = false;
    }
}

/* Time to pass the activations from stage i-1 to stage i. */
static double p2p_time(loom_search *s, const loom_search_config *cfg, int32_t i,
                       const loom_layer_tab *t)
{
    const loom_search_stage *a = &cfg->stages[i - 1], *b = &cfg->stages[i];
    int64_t g = s->c->gpus_per_node;
    bool same_node = a->submesh.nodes == 1 && b->submesh.nodes == 1 &&
                     a->first_gpu / g == b->first_gpu / g;
    double bytes = (double)t->input_bytes[b->first_layer];
    return loom_group_collective_time_s(s->c, s->cal, LOOM_COLL_SEND_RECV,
                                        (loom_group){2, same_node ? 2 : 1}, bytes);
}

static loom_status eval_config(loom_search *s, const loom_graph *g, const loom_search_config *cfg,
                               loom_search_eval_result *out, loom_error *err);

loom_status loom_search_eval(loom_search *s, const loom_graph *g, const loom_search_config *cfg,
                             loom_search_eval_result *out, loom_error *err)
{
    /* on the layout the configuration is for, then back */
    bool was = loom_search_use_layout(s, cfg->tiled);
    loom_status st = eval_config(s, g, cfg, out, err);
    loom_search_use_layout(s, was);
    return st;
}

static loom_status eval_config(loom_search *s, const loom_graph *g, const loom_search_config *cfg,
                               loom_search_eval_result *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    if (cfg->tiled && !s->has_tile)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "stage search: a configuration on NVLink-domain tiles, but %s has "
                              "none", s->c->name);
    bool train = !s->pb.inference;
    int32_t S = cfg->n_stages;
    int64_t pp = cfg->pp;
    loom_status st = LOOM_OK;
    out->stages = calloc((size_t)S, sizeof *out->stages);
    double *arr = calloc((size_t)pp * 9, sizeof *arr);
    if (!out->stages || !arr) {
        free(arr);
        return loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
    }
    out->n_stages = S;
    double *ts = arr, *bs = arr + pp, *sync = arr + 2 * pp, *win = arr + 3 * pp,
           *opt = arr + 4 * pp, *comm = arr + 5 * pp, *fw = arr + 6 * pp,
           *unhidden = arr + 7 * pp, *overlap_of = arr + 8 * pp;
    double p2p = 0, mb_flops = 0, measured = 0, total = 0;
    for (int32_t i = 0; i < S; i++) {
        loom_stage_eval *e = &out->stages[i];
        if ((st = eval_stage(s, g, cfg, i, e, err))) goto done;
        int32_t r = cfg->stages[i].group;
        ts[r] += e->time_s;
        bs[r] += e->bwd_s;
        fw[r] += e->time_s - e->bwd_s;
        sync[r] += e->grad_sync_s;
        unhidden[r] += e->grad_sync_unhidden_s;
        opt[r] += e->optimizer_s;
        comm[r] += e->comm_s;
        mb_flops += e->model_flops;
        measured += e->measured_s;
        total += e->total_s;
        if (i > 0) {
            const loom_layer_tab *t;
            if ((st = loom_search_layer_tab(s, cfg->mbs, cfg->stages[i].mesh,
                                            loom_search_stage_space(&cfg->stages[i]), &t, err)))
                goto done;
            double x = p2p_time(s, cfg, i, t);
            if (x > p2p) p2p = x;
        }
    }
    rank_memory(s, cfg, out);
    out->measured_share = total > 0 ? measured / total : 0;
    int64_t M = cfg->micro_batches;
    out->gpus_used = cfg->dp * cfg->gpus_per_replica;
    out->model_flops = mb_flops * (double)(cfg->sequences / cfg->mbs);
    if (train) {
        /* what the sync can hide behind (eval.c): the last backward, and the
         * next first forward for a sharded optimizer's weight all-gather;
         * ZeRO-3's per-micro-batch gathers and scatters, every micro-batch */
        bool sharded = cfg->zero >= 1;
        for (int64_t r = 0; r < pp; r++) {
            win[r] = cfg->zero >= 3   ? (double)M * ts[r]
                     : cfg->zero == 2 ? (double)M * bs[r] + fw[r]
                                      : bs[r] + (sharded ? fw[r] : 0);
            /* ZeRO-3's prefetch hides all but its unhidden part (eval.c) */
            overlap_of[r] = cfg->zero >= 3 && sync[r] > 0 ? fmax(0, 1 - unhidden[r] / sync[r])
                                                          : s->cal->grad_sync_overlap;
        }
        /* the planner plans for Megatron (its exports' schedule) */
        loom_pipeline_in pin = {.stages = pp, .microbatches = M, .vpp = cfg->vpp, .stage_s = ts,
                                .bwd_s = bs, .p2p_s = p2p,
                                .overlap_p2p = loom_pipeline_overlaps_p2p(cfg->vpp, true),
                                .grad_sync_s = sync,
                                .sync_window_s = win, .sync_overlap = s->cal->grad_sync_overlap,
                                .sync_overlap_of = overlap_of,
                                .optimizer_s = opt};
        loom_pipeline_out po;
        if ((st = loom_pipeline_step(&pin, &po, err))) goto done;
        out->step_s = po.step_s;
        loom_pipeline_breakdown(&po, comm, NULL, M, &out->breakdown);
        out->tokens_per_s = (double)cfg->sequences * (double)s->seq_tokens / out->step_s;
    } else {
        /* A decode step: a token goes through every stage; the pipeline
         * paces at M micro-batches per slowest rank. */
        double sum = 0, mx = 0;
        int64_t bott = 0;
        for (int64_t r = 0; r < pp; r++) {
            sum += ts[r];
            if (ts[r] > mx) mx = ts[r], bott = r;
        }
        double through = sum + (double)(pp - 1) * p2p, paced = (double)M * mx;
        out->latency_s = through > paced ? through : paced;
        out->step_s = out->latency_s;
        loom_step_breakdown *b = &out->breakdown;
        b->p2p_s = through > paced ? (double)(pp - 1) * p2p : 0;
        b->tp_comm_s = through > paced ? 0 : (double)M * comm[bott];
        if (through > paced)
            for (int64_t r = 0; r < pp; r++) b->tp_comm_s += comm[r];
        b->compute_s = out->step_s - b->p2p_s - b->tp_comm_s;
        out->tokens_per_s = (double)cfg->sequences / out->latency_s;
    }
    double price = s->c->price_per_gpu_hour_usd, power = s->c->power_w > 0 ? s->c->power_w
                                                                           : s->c->gpu.tdp_w;
    switch (s->pb.objective) {
    case LOOM_OBJ_COST:
        out->score = out->step_s * (double)out->gpus_used * (price > 0 ? price / 3600 : 1);
        break;
    case LOOM_OBJ_ENERGY:
        out->score = out->step_s * (double)out->gpus_used * (power > 0 ? power : 1);
        break;
    case LOOM_OBJ_THROUGHPUT: out->score = 1.0 / out->tokens_per_s; break;
    default: out->score = out->step_s; break;
    }
done:
    free(arr);
    if (st) loom_search_eval_free(out);
    return st;
}
