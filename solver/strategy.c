/*
 * strategy.c — the context strategies are enumerated and priced in, and the
 * cost of one strategy (strategy.h): its compute (a roofline or profiled op
 * time of the splits that divide), the collectives of its own layout
 * (beside the GEMMs under TP communication overlap), ring attention exposed
 * past the kernel, the parameter shards and their data-parallel gradient
 * sync, and the activations it saves. Which strategies exist is
 * strategy_enumerate.c; which of them Megatron can express,
 * strategy_megatron.c; followers' specs, follow.c.
 *
 * Units: seconds, bytes per GPU.
 */
#include "solver/strategy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/dp_sync.h"
#include "costs/moe.h"
#include "solver/strategy_impl.h"

void loom_strategy_ctx_init(loom_strategy_ctx *c, const loom_graph *g, const loom_cost_model *cm,
                            loom_mesh_shape mesh, bool train, bool megatron_only)
{
    memset(c, 0, sizeof *c);
    c->g = g;
    c->cm = cm;
    c->train = train;
    c->megatron_only = megatron_only;
    loom_mesh_ctx_init(&c->mesh, loom_cost_model_cluster(cm), loom_cost_model_calib(cm), mesh);
}

/* Data-parallel sync per step of a weight shard of n elements whose
 * gradient is partial over `axes` (dp_sync.h, as the replica sync and
 * costs/eval.c, over mesh axes). */
static double dp_sync_s(const loom_strategy_ctx *c, unsigned axes, double n)
{
    loom_dp_sync_op ops[LOOM_DP_SYNC_MAX_OPS];
    int k = loom_dp_sync_ops(n, c->zero, false, c->micro_batches, ops);
    double t = 0;
    for (int i = 0; i < k; i++) t += ops[i].per_step * loom_mesh_coll_s(&c->mesh, ops[i].kind, axes, ops[i].bytes);
    return t;
}

loom_status loom_strategy_saved_by(const loom_graph *g, int32_t **out, loom_error *err)
{
    int32_t nt = loom_graph_num_tensors(g), no = loom_graph_num_ops(g);
    int32_t *s = malloc(((size_t)nt + 1) * sizeof(int32_t));
    if (!s) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory (saved-tensor table)");
    for (int32_t t = 0; t < nt; t++) s[t] = -1;
    for (int32_t i = 0; i < no; i++) {
        const loom_op *op = loom_graph_op(g, i);
        for (int k = 0; k < op->n_in; k++)
            if ((op->saves & LOOM_SAVE_IN(k)) && s[op->in[k]] < 0) s[op->in[k]] = i;
        for (int k = 0; k < op->n_out; k++)
            if ((op->saves & LOOM_SAVE_OUT(k)) && s[op->out[k]] < 0) s[op->out[k]] = i;
    }
    *out = s;
    return LOOM_OK;
}

bool loom_strategy_is_follower(loom_op_kind k)
{
    return k == LOOM_OP_ELEMENTWISE || k == LOOM_OP_NORM || k == LOOM_OP_SOFTMAX ||
           k == LOOM_OP_CROSS_ENTROPY || k == LOOM_OP_MOE_ROUTE || k == LOOM_OP_RESHAPE ||
           k == LOOM_OP_TRANSPOSE;
}

int loom_strategy_default_main(const loom_graph *g, int32_t op)
{
    const loom_op *o = loom_graph_op(g, op);
    int best = -1;
    int64_t most = -1;
    for (int k = 0; k < o->n_in; k++) {
        const loom_tensor *t = loom_graph_tensor(g, o->in[k]);
        if (!loom_strategy_float(t->dtype)) continue;
        if (loom_tensor_numel(t) > most) most = loom_tensor_numel(t), best = k;
    }
    return best;
}
bool loom_strategy_charged(const loom_strategy_ctx *c, int32_t op, int32_t tensor)
{
    if (c->saved_by) return c->saved_by[tensor] == op;
    for (int32_t i = 0; i < op; i++) {
        const loom_op *o = loom_graph_op(c->g, i);
        for (int k = 0; k < o->n_in; k++)
            if (o->in[k] == tensor && (o->saves & LOOM_SAVE_IN(k))) return false;
        for (int k = 0; k < o->n_out; k++)
            if (o->out[k] == tensor && (o->saves & LOOM_SAVE_OUT(k))) return false;
    }
    return true;
}

/* The splits of s that divide every operand dim they name, into sp; the
 * others (a padded vocabulary, spec.h) multiply *uneven: the op is timed
 * with that dim whole and divided, as costs/eval.c does. */
static int split_dividing(const loom_graph *g, const loom_op *o, const loom_strategy *s,
                          loom_dim_split *sp, double *uneven)
{
    int n = 0;
    *uneven = 1;
    for (int i = 0; i < s->n_splits; i++) {
        bool divides = true;
        for (int q = 0; q < o->n_in + o->n_w + o->n_out; q++) {
            int32_t tid = q < o->n_in ? o->in[q]
                          : q < o->n_in + o->n_w ? o->w[q - o->n_in]
                                                 : o->out[q - o->n_in - o->n_w];
            const loom_tensor *t = loom_graph_tensor(g, tid);
            int d = loom_tensor_dim_index(t, s->splits[i].dim);
            if (d >= 0 && t->dims[d].size % s->splits[i].parts) divides = false;
        }
        if (divides) sp[n++] = s->splits[i];
        else *uneven *= (double)s->splits[i].parts;
    }
    return n;
}


/* An expert weight (it has experts e and no token slots c) split over axis
 * 0 on a mesh whose expert parallelism spans replicas (spec.h ep_span). */
static bool expert_spanned(const loom_strategy_ctx *c, const loom_tensor *w, const loom_spec *sp)
{
    if (c->mesh.ep_span <= 1 || loom_strategy_tensor_has_dim(w, "c")) return false;
    for (int d = 0; d < w->ndim; d++)
        if (!strcmp(w->dims[d].name, "e") && (sp->ax[d] & LOOM_AXIS0)) return true;
    return false;
}

/* Whether op runs on experts split over axis 0 under strategy s (an
 * operand with e on axis 0) on a mesh whose expert parallelism spans
 * replicas. */
static bool op_expert_spanned(const loom_strategy_ctx *c, const loom_op *o, const loom_strategy *s)
{
    if (c->mesh.ep_span <= 1) return false;
    const loom_spec *specs[3] = {s->in, s->w, s->out};
    const int32_t *ids[3] = {o->in, o->w, o->out};
    int counts[3] = {o->n_in, o->n_w, o->n_out};
    for (int g = 0; g < 3; g++)
        for (int k = 0; k < counts[g]; k++) {
            const loom_tensor *t = loom_graph_tensor(c->g, ids[g][k]);
            for (int d = 0; d < t->ndim; d++)
                if (!strcmp(t->dims[d].name, "e") && (specs[g][k].ax[d] & LOOM_AXIS0)) return true;
        }
    return false;
}

loom_status loom_strategy_cost(const loom_strategy_ctx *c, int32_t op, loom_strategy *s,
                               loom_error *err)
{
    const loom_op *o = loom_graph_op(c->g, op);
    const loom_mesh_ctx *m = &c->mesh;
    loom_op_time t = {0, 0, LOOM_SRC_ROOFLINE};
    double uneven = 1;   /* parts of splits of a padded dim that do not divide it */
    if (o->kind != LOOM_OP_RESHAPE && o->kind != LOOM_OP_TRANSPOSE) {
        loom_dim_split sp[LOOM_MAX_DIMS + 2];
        int n = split_dividing(c->g, o, s, sp, &uneven);
        /* experts spanning replicas: a GPU holds 1/ep_span of the axis-0
         * shard's experts and receives ep_span times the tokens for each
         * (fewer, larger expert GEMMs), as loom eval prices it */
        int64_t span = op_expert_spanned(c, o, s) ? m->ep_span : 1;
        loom_status st = span > 1 ? loom_cost_op_time_ep(c->cm, c->g, op, sp, n, span, &t, err)
                                  : loom_cost_op_time(c->cm, c->g, op, sp, n, &t, err);
        if (st) return st;
    }
    s->compute_s = (t.fwd_s + (c->train ? t.bwd_s : 0)) * s->compute_scale / uneven;
    s->bwd_compute_s = c->train ? t.bwd_s * s->compute_scale / uneven : 0;
    /* With TP communication overlap a weighted matmul's collectives over
     * the tensor-parallel axis run beside its GEMMs: the forward one beside
     * the forward GEMM, a backward one beside half the backward (eval.c). */
    bool overlap = c->tp_overlap && loom_strategy_weighted_matmul(o);
    double fwd_win = overlap ? s->compute_s - s->bwd_compute_s : 0;
    double bwd_win = overlap ? 0.5 * s->bwd_compute_s : 0;
    s->comm_s = 0;
    s->fwd_comm_s = 0;
    s->comm_bytes_fwd = 0;
    for (int i = 0; i < s->n_fwd; i++) {
        double x = loom_mesh_coll_s(m, s->fwd[i].kind, s->fwd[i].axes, s->fwd[i].bytes);
        if (s->fwd[i].axes == LOOM_AXIS1) x = loom_strategy_beside(x, fwd_win);
        s->fwd_comm_s += x;
        s->comm_bytes_fwd += s->fwd[i].bytes;
    }
    s->comm_s = s->fwd_comm_s;
    if (c->train)
        for (int i = 0; i < s->n_bwd; i++) {
            double x = loom_mesh_coll_s(m, s->bwd[i].kind, s->bwd[i].axes, s->bwd[i].bytes);
            if (s->bwd[i].axes == LOOM_AXIS1) x = loom_strategy_beside(x, bwd_win);
            s->comm_s += x;
        }
    /* Context parallel attention: K and V go round the ring beside the
     * kernel, exposed only where the ring outlasts it (as loom eval). */
    s->ring_fwd_s = 0;
    if (s->ring_axes && o->n_in >= 3) {
        double kv = loom_spec_bytes(&s->in[1], loom_graph_tensor(c->g, o->in[1]), m) +
                    loom_spec_bytes(&s->in[2], loom_graph_tensor(c->g, o->in[2]), m);
        double rf, rb;
        loom_ring_attention_exposed_s(m->cluster, m->calib, m->group[s->ring_axes & 3], kv,
                                      s->compute_s - s->bwd_compute_s, s->bwd_compute_s, &rf, &rb);
        s->ring_fwd_s = rf;
        s->fwd_comm_s += rf;
        s->comm_s += rf + (c->train ? rb : 0);
    }

    /* Parameters and the data-parallel gradient sync of their shards. */
    s->param_count = 0;
    s->param_count_local = 0;
    /* mesh axes splitting an input's batch b, sequence s or expert tokens c
     * (strategy.h: data-parallel axes; Megatron's axis 1 is tensor parallel
     * whatever it splits) */
    unsigned data_axes = 0;
    for (int k = 0; k < o->n_in; k++) {
        const loom_tensor *x = loom_graph_tensor(c->g, o->in[k]);
        for (int d = 0; d < x->ndim; d++)
            if (!strcmp(x->dims[d].name, "b") || !strcmp(x->dims[d].name, "s") ||
                !strcmp(x->dims[d].name, "c"))
                data_axes |= s->in[k].ax[d];
    }
    if (c->megatron_only) data_axes &= LOOM_AXIS0;
    s->param_bytes = 0;
    s->grad_sync_s = 0;
    s->other_sync_s = 0;
    memset(s->dp_params, 0, sizeof s->dp_params);
    for (int k = 0; k < o->n_w; k++) {
        bool dup = false;
        for (int j = 0; j < k; j++) dup = dup || o->w[j] == o->w[k];
        if (dup) continue;
        const loom_tensor *w = loom_graph_tensor(c->g, o->w[k]);
        /* experts split over axis 0 are split over the ep_span replicas
         * too (spec.h): 1 / ep_span of the shard here, and its gradient
         * syncs over dp / ep_span replicas, which ZeRO shards it over: the
         * local count (shard / copies, divided by dp at the stage) stays
         * that of the unspanned shard */
        int64_t span = expert_spanned(c, w, &s->w[k]) ? m->ep_span : 1;
        int64_t shards = loom_spec_shards(&s->w[k], w->ndim, m) * span;
        int64_t shard = (loom_tensor_numel(w) + shards - 1) / shards;   /* padded: ceil */
        s->param_count += shard;
        double b = loom_spec_bytes(&s->w[k], w, m) / (double)span;
        s->param_bytes += b;
        unsigned partial = s->compute_axes & ~loom_spec_axes(&s->w[k], w->ndim);
        /* copies ZeRO shards: along the data-parallel axes; in Megatron's
         * space a norm's copies along the sequence-parallel axis stay whole,
         * as Megatron-LM's distributed optimizer keeps them */
        unsigned dp_axes = partial & data_axes;
        int64_t copies = loom_mesh_parts(m, dp_axes);
        s->param_count_local += (shard * span + copies - 1) / copies;
        if (!c->train || !loom_strategy_float(w->dtype)) continue;
        s->dp_params[dp_axes] += (double)shard;
        if (partial) s->grad_sync_s += dp_sync_s(c, partial, (double)shard);
        /* Megatron coalesces its sequence-parallel norms' gradients into one
         * small all-reduce over the TP group, which loom eval leaves out;
         * so does the exact step in Megatron's spaces (one price for one
         * configuration). The ILP's estimate above keeps it. */
        if ((partial & ~dp_axes) && !c->megatron_only)
            s->other_sync_s += dp_sync_s(c, partial & ~dp_axes, (double)shard);
    }

    /* Saved activations, charged to the first op that saves each tensor;
     * the attention core's (s and t dims) counted apart too */
    s->act_bytes = s->core_act_bytes = 0;
    if (c->train) {
        for (int k = 0; k < o->n_in; k++)
            if ((o->saves & LOOM_SAVE_IN(k)) && loom_strategy_charged(c, op, o->in[k])) {
                const loom_tensor *x = loom_graph_tensor(c->g, o->in[k]);
                double b = loom_spec_bytes(&s->in[k], x, m);
                s->act_bytes += b;
                if (loom_strategy_tensor_has_dim(x, "s") && loom_strategy_tensor_has_dim(x, "t")) s->core_act_bytes += b;
            }
        for (int k = 0; k < o->n_out; k++)
            if ((o->saves & LOOM_SAVE_OUT(k)) && loom_strategy_charged(c, op, o->out[k])) {
                const loom_tensor *x = loom_graph_tensor(c->g, o->out[k]);
                double b = loom_spec_bytes(&s->out[k], x, m);
                s->act_bytes += b;
                if (loom_strategy_tensor_has_dim(x, "s") && loom_strategy_tensor_has_dim(x, "t")) s->core_act_bytes += b;
            }
        if (o->saves & LOOM_SAVE_MASK) {
            const loom_tensor *y = loom_graph_tensor(c->g, o->out[0]);
            double b = (double)loom_tensor_numel(y) / (double)loom_spec_shards(&s->out[0], y->ndim, m);
            s->act_bytes += b;
            if (loom_strategy_tensor_has_dim(y, "s") && loom_strategy_tensor_has_dim(y, "t")) s->core_act_bytes += b;
        }
    }
    return LOOM_OK;
}

