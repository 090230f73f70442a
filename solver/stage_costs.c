/*
 * stage_costs.c — what a layer and a stage cost, for the stage search
 * (stage_search.h explains the models; this file computes them).
 *
 * Layer tables. For a micro-batch size b and a logical mesh, one ILP run
 * over the whole model (loom_intra_solve; each distinct layer is solved once
 * and cached) chooses every op's strategy; summing loom_intra_op_cost_get
 * over a layer's ops gives that layer's time per micro-batch, its in-mesh
 * gradient sync, parameters and saved activations per GPU. From the specs
 * come the bytes a layer input occupies on one GPU (kept by full recompute)
 * and the KV cache of one sequence on one GPU (inference). A spec (spec.h)
 * gives each dim the mesh axes it is split over, so the parts a tensor is
 * cut into are the product of the sizes of the axes it uses.
 *
 * Exact evaluation. A configuration's stages are solved as ranges (so the
 * resharding where different layer kinds meet is included), their memory
 * follows costs/memory.c's conventions (saved activations × micro-batches in
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
#include "solver/stage_search_impl.h"

int loom_search_zero(const loom_search *s)
{
    if (s->pb.inference) return 0;
    if (s->opt.zero >= 0) return s->opt.zero;
    /* ZeRO-1 even with one replica: the data-parallel group also spans the
     * copies of a weight inside a stage's mesh, which it then shards */
    return 1;
}

int loom_search_zero_options(const loom_search *s, int64_t dp, int out[3])
{
    (void)dp;   /* one replica too: the group also spans a stage's in-mesh copies (cp) */
    if (s->pb.inference || s->opt.zero >= 0) {
        out[0] = loom_search_zero(s);
        return 1;
    }
    /* ZeRO-0 is left out: ZeRO-1 moves fewer bytes (reduce-scatter of the
     * gradients + all-gather of the bf16 weights vs an all-reduce of the
     * gradients) and holds less, so it is never worse. With one replica
     * ZeRO-3 over the context-parallel copies can pay: its per-block
     * gathers hide behind compute (costs/dp_sync.h). */
    out[0] = 1, out[1] = 2, out[2] = 3;
    return 3;
}

int64_t loom_search_state_bytes(const loom_search *s, int64_t n_params, int64_t n_local,
                                int64_t dp, int zero)
{
    loom_model_state ms;
    loom_memory_model_state_local(n_params, n_local, dp, zero, !s->pb.inference, &ms);
    return ms.params_bytes + ms.grads_bytes + ms.optimizer_bytes;
}

loom_group loom_search_dp_group(const loom_search *s, loom_mesh_shape mesh, unsigned axes,
                                int64_t dp, int64_t replica_stride, int64_t first_gpu)
{
    const int64_t g = s->c->gpus_per_node;
    const int64_t n0 = axes & 1u ? mesh.n0 : 1, n1 = axes & 2u ? mesh.n1 : 1;
    if (dp < 1) dp = 1;
    /* members: first_gpu + i0·mesh.n1 + i1 + r·replica_stride (axis 1
     * fastest, mesh.h); per mesh offset, the replicas r that land in the
     * node of first_gpu form a range */
    const int64_t lo = first_gpu / g * g, hi = lo + g;
    int64_t per_node = 0;
    for (int64_t i0 = 0; i0 < n0; i0++)
        for (int64_t i1 = 0; i1 < n1; i1++) {
            int64_t at = first_gpu + i0 * mesh.n1 + i1;
            if (dp == 1 || replica_stride <= 0) {
                per_node += at >= lo && at < hi;
                continue;
            }
            /* r in [ceil((lo - at) / stride), ceil((hi - at) / stride)) ∩ [0, dp) */
            int64_t r_lo = at >= lo ? 0 : (lo - at + replica_stride - 1) / replica_stride;
            int64_t r_hi = at >= hi ? 0 : (hi - at + replica_stride - 1) / replica_stride;
            if (r_hi > dp) r_hi = dp;
            if (r_hi > r_lo) per_node += r_hi - r_lo;
        }
    return (loom_group){n0 * n1 * dp, per_node > 0 ? per_node : 1};
}

loom_group loom_search_weight_dp_group(const loom_search *s, loom_mesh_shape mesh, unsigned axes,
                                       int64_t dp, int64_t replica_stride, int64_t first_gpu,
                                       loom_search_space space)
{
    /* In Megatron's spaces on a mesh with axis 0, every weight but the
     * experts split over it is a data-parallel copy along axis 0 (the
     * batch or the sequence splits there in every op), so the weights
     * partial over no mesh axis are those experts: with expert parallelism
     * across ep_span replicas, their copies are the replicas ep_span apart
     * (Megatron's expert data-parallel group, costs/eval.c) */
    int64_t span = loom_search_space_ep_span(space);
    if (axes == 0 && span > 1 && mesh.n0 > 1 && dp % span == 0)
        return loom_search_dp_group(s, mesh, 0, dp / span, replica_stride * span, first_gpu);
    return loom_search_dp_group(s, mesh, axes, dp, replica_stride, first_gpu);
}

/* Megatron-LM's rule, as loom eval prices a Megatron configuration */
static loom_dp_sync_in megatron_sync(double n, loom_group grp, int zero, int64_t micro_batches,
                                     int64_t blocks, bool full_recompute)
{
    return (loom_dp_sync_in){.params = n, .zero = zero, .framework = LOOM_FRAMEWORK_MEGATRON,
                             .full_recompute = full_recompute, .micro_batches = micro_batches,
                             .blocks = blocks > 0 ? blocks : 1, .dp = grp.ranks};
}

double loom_search_dp_sync_s(const loom_search *s, double n, loom_group grp, int zero,
                             int64_t micro_batches, int64_t blocks, bool full_recompute)
{
    if (s->pb.inference || !(n > 0)) return 0;
    loom_dp_sync_in in = megatron_sync(n, grp, zero, micro_batches, blocks, full_recompute);
    return loom_dp_sync_time_s(s->c, s->cal, &in, grp);
}

double loom_search_dp_unhidden_s(const loom_search *s, double n, loom_group grp, int zero,
                                 int64_t micro_batches, int64_t blocks, bool full_recompute)
{
    if (s->pb.inference || !(n > 0)) return 0;
    loom_dp_sync_in in = megatron_sync(n, grp, zero, micro_batches, blocks, full_recompute);
    return loom_dp_sync_unhidden_s(s->c, s->cal, &in, grp);
}

/* ---- specs ------------------------------------------------------------------- */

static int64_t axes_parts(unsigned axes, loom_mesh_shape m)
{
    return (axes & 1 ? m.n0 : 1) * (axes & 2 ? m.n1 : 1);
}

/* Parts the spec of operand k of op cuts its tensor into (only along the
 * dims named `dim` when it is not NULL): each mesh axis splits at most one
 * dim, so this is the product of the sizes of the axes it uses. An absent
 * spec is one part. */
static int64_t spec_parts(const loom_intra_result *r, const loom_graph *g, int32_t op,
                          loom_operand which, int k, const char *dim, loom_mesh_shape m)
{
    loom_spec sp;
    int32_t t = loom_intra_operand(g, op, which, k);
    if (t < 0 || !loom_intra_op_spec(r, g, op, which, k, &sp)) return 1;
    return axes_parts(loom_spec_dim_axes(&sp, loom_graph_tensor(g, t), dim), m);
}

/* Per dim name, the largest split any operand spec of op gives it. */
static int op_splits(const loom_intra_result *r, const loom_graph *g, int32_t op,
                     loom_mesh_shape m, loom_dim *div, int cap)
{
    const loom_op *o = loom_graph_op(g, op);
    int n = 0;
    const loom_operand kinds[3] = {LOOM_OPERAND_INPUT, LOOM_OPERAND_WEIGHT, LOOM_OPERAND_OUTPUT};
    const int counts[3] = {o->n_in, o->n_w, o->n_out};
    for (int w = 0; w < 3; w++)
        for (int k = 0; k < counts[w]; k++) {
            loom_spec sp;
            if (!loom_intra_op_spec(r, g, op, kinds[w], k, &sp)) continue;
            const loom_tensor *t = loom_graph_tensor(g, loom_intra_operand(g, op, kinds[w], k));
            for (int d = 0; d < t->ndim; d++) {
                const char *name = t->dims[d].name;
                size_t len = strlen(name);
                int64_t parts = axes_parts(sp.ax[d] & LOOM_AXES_BOTH, m);
                if (parts <= 1 || len == 0 || len >= LOOM_DIM_NAME_MAX) continue;
                int q = 0;
                while (q < n && strcmp(div[q].name, name)) q++;
                if (q == n) {
                    if (n == cap) continue;
                    memcpy(div[n].name, name, len + 1);
                    div[n].size = 1;
                    n++;
                }
                if (parts > div[q].size) div[q].size = parts;
            }
        }
    return n;
}

static bool is_matmul(const loom_op *o)
{
    return o->kind == LOOM_OP_EINSUM || o->kind == LOOM_OP_ATTENTION;
}

/* The first tensor a layer reads from outside itself (its input), or -1. */
static int32_t layer_input(const loom_graph *g, int32_t layer, int32_t *op_out, int *k_out)
{
    int32_t first, count;
    loom_graph_layer_ops(g, layer, &first, &count);
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *o = loom_graph_op(g, i);
        for (int k = 0; k < o->n_in; k++) {
            const loom_tensor *t = loom_graph_tensor(g, o->in[k]);
            if (t->is_weight || (t->producer >= first && t->producer < first + count)) continue;
            *op_out = i, *k_out = k;
            return o->in[k];
        }
    }
    return -1;
}

static void add_key(loom_search *s, const loom_profile_key *k)
{
    for (int32_t i = s->n_keys - 1; i >= 0 && i >= s->n_keys - 4096; i--)
        if (loom_profile_key_equal(&s->keys[i], k)) return;
    if (s->n_keys == s->cap_keys) {
        int32_t nc = s->cap_keys ? 2 * s->cap_keys : 256;
        loom_profile_key *nk = realloc(s->keys, sizeof *nk * (size_t)nc);
        if (!nk) return;   /* requests are best effort; the plan does not depend on them */
        s->keys = nk, s->cap_keys = nc;
    }
    s->keys[s->n_keys++] = *k;
}

/* ---- layer tables --------------------------------------------------------------- */

static void tab_free(loom_layer_tab *t)
{
    free(t->time_s);
    free(t->rc_s);
    free(t->sel_s);
    free(t->core_bytes);
    free(t->sync_s);
    free(t->dp_params);
    free(t->kv_read_s);
    free(t->params);
    free(t->params_local);
    free(t->act_bytes);
    free(t->input_bytes);
    free(t->kv_per_seq);
}

void loom_search_tabs_free(loom_search *s)
{
    for (int32_t i = 0; i < s->n_tabs; i++) {
        tab_free(s->tabs[i]);
        free(s->tabs[i]);
    }
    free(s->tabs);
    s->tabs = NULL;
    s->n_tabs = s->cap_tabs = 0;
}

static void intra_opts(const loom_search *s, loom_search_space space, loom_intra_opts *o)
{
    loom_intra_opts_init(o);
    o->train = !s->pb.inference;
    if (s->opt.ilp_time_limit_s > 0) o->time_limit_s = s->opt.ilp_time_limit_s;
    o->micro_batches = LOOM_SEARCH_ILP_MICRO_BATCHES;
    /* the in-stage gradient sync under the default ZeRO stage (one table
     * serves every configuration; ZeRO-2/3 are only offered to one-stage
     * replicas) */
    o->zero_stage = loom_search_zero(s);
    o->megatron_only = space.megatron;
    o->megatron_cp = space.cp;
    o->tp_comm_overlap = space.tp_overlap;
    o->ep_span = loom_search_space_ep_span(space);
    o->expert_split = space.megatron ? space.experts : 0;
    o->cache = s->cache;
}

/* KV bytes on one GPU per sequence of the replica for attention op `a`. */
static int64_t kv_per_seq(const loom_search *s, const loom_intra_result *r, const loom_graph *g,
                          int32_t a, loom_mesh_shape m)
{
    const loom_op *o = loom_graph_op(g, a);
    if (o->n_in < 3) return 0;
    const loom_tensor *k = loom_graph_tensor(g, o->in[1]), *v = loom_graph_tensor(g, o->in[2]);
    if (k->ndim < 2) return 0;
    const loom_model_info *info = loom_graph_info_c(g);
    /* A sliding window or a chunk bounds what the layer keeps: its last
     * `window` tokens, or the current chunk (graph.h). */
    int64_t ctx = loom_op_attention_span(o, s->context);
    if (info->kv_lora_rank > 0) {
        /* multi-head latent attention caches the latent, not k and v
         * (memory.h): whole on every GPU of a head split, divided only by a
         * split of the batch, i.e. of the sequences */
        int64_t parts = spec_parts(r, g, a, LOOM_OPERAND_INPUT, 1, k->dims[0].name, m);
        return loom_memory_kv_bytes_per_token(info, 1) * ctx / (parts > 0 ? parts : 1);
    }
    int64_t bt = k->dims[0].size * k->dims[1].size;   /* k: [b, t, kvh, dqk] */
    int64_t per_token = (loom_tensor_bytes(k) + loom_tensor_bytes(v)) / (bt > 0 ? bt : 1);
    /* One GPU's share: a batch split holds fewer sequences, a head split
     * less of each; averaged per sequence either way. */
    int64_t parts = spec_parts(r, g, a, LOOM_OPERAND_INPUT, 1, NULL, m);
    return per_token * ctx / (parts > 0 ? parts : 1);
}

/* Whether op is part of the attention core that selective recompute reruns:
 * an input or output with a query and a key sequence dim (s and t; costs/
 * eval.c's rule; with fused attention no tensor has both). */
static bool attention_core_op(const loom_graph *g, const loom_op *op)
{
    for (int k = 0; k < op->n_in + op->n_out; k++) {
        const loom_tensor *t = loom_graph_tensor(g, k < op->n_in ? op->in[k] : op->out[k - op->n_in]);
        bool s = false, tt = false;
        for (int d = 0; d < t->ndim; d++) {
            s |= !strcmp(t->dims[d].name, "s");
            tt |= !strcmp(t->dims[d].name, "t");
        }
        if (s && tt) return true;
    }
    return false;
}

static loom_status build_tab(loom_search *s, const loom_graph *g, loom_layer_tab *t,
                             loom_error *err)
{
    loom_mesh_shape m = {t->n0, t->n1};
    int32_t n = loom_graph_layer_count(g);
    t->n = n;
    t->time_s = calloc((size_t)n, sizeof *t->time_s);
    t->rc_s = calloc((size_t)n, sizeof *t->rc_s);
    t->sel_s = calloc((size_t)n, sizeof *t->sel_s);
    t->core_bytes = calloc((size_t)n, sizeof *t->core_bytes);
    t->sync_s = calloc((size_t)n, sizeof *t->sync_s);
    t->dp_params = calloc((size_t)n * 4, sizeof *t->dp_params);
    t->kv_read_s = calloc((size_t)n, sizeof *t->kv_read_s);
    t->params = calloc((size_t)n, sizeof *t->params);
    t->params_local = calloc((size_t)n, sizeof *t->params_local);
    t->act_bytes = calloc((size_t)n, sizeof *t->act_bytes);
    t->input_bytes = calloc((size_t)n, sizeof *t->input_bytes);
    t->kv_per_seq = calloc((size_t)n, sizeof *t->kv_per_seq);
    if (!t->time_s || !t->rc_s || !t->sel_s || !t->core_bytes || !t->sync_s || !t->dp_params || !t->kv_read_s || !t->params ||
        !t->params_local ||
        !t->act_bytes ||
        !t->input_bytes || !t->kv_per_seq)
        return loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
    loom_intra_opts o;
    intra_opts(s, t->space, &o);
    loom_intra_result r;
    memset(&r, 0, sizeof r);
    loom_error e2 = {0};
    loom_status st = loom_intra_solve(g, s->cm, 0, n - 1, m, &o, &r, &e2);
    if (st == LOOM_ERR_LIMIT || st == LOOM_ERR_INVALID || st == LOOM_ERR_UNSUPPORTED ||
        (st == LOOM_OK && r.status == LOOM_ILP_INFEASIBLE)) {
        t->ok = false;   /* this mesh is not an option */
        loom_intra_result_free(&r);
        return LOOM_OK;
    }
    if (st) {
        *err = e2;
        loom_intra_result_free(&r);
        return st;
    }
    t->ok = true;
    const uint64_t *sigs = loom_search_sigs(s, g);
    uint64_t seen_sig[64];
    int n_seen = 0;
    for (int32_t l = 0; l < n; l++) {
        int32_t first, count;
        loom_graph_layer_ops(g, l, &first, &count);
        bool block = loom_memory_is_block(g, l);
        /* a layer solved like an earlier one (same shared solution, same
         * role) costs what it does: copy instead of summing its ops again */
        int32_t same = -1;
        for (int32_t q = l - 1; q >= 0 && q >= l - 2 && same < 0; q--)
            if (r.layers[q] == r.layers[l] && loom_memory_is_block(g, q) == block) same = q;
        if (same >= 0) {
            t->time_s[l] = t->time_s[same], t->sync_s[l] = t->sync_s[same];
            memcpy(&t->dp_params[4 * l], &t->dp_params[4 * same], 4 * sizeof *t->dp_params);
            t->rc_s[l] = t->rc_s[same], t->kv_read_s[l] = t->kv_read_s[same];
            t->sel_s[l] = t->sel_s[same], t->core_bytes[l] = t->core_bytes[same];
            t->params[l] = t->params[same], t->act_bytes[l] = t->act_bytes[same];
            t->params_local[l] = t->params_local[same];
            t->input_bytes[l] = t->input_bytes[same], t->kv_per_seq[l] = t->kv_per_seq[same];
            continue;
        }
        uint64_t sig = sigs ? sigs[l] : loom_graph_layer_signature(g, l);
        bool fresh = true;
        for (int q = 0; q < n_seen; q++) fresh &= seen_sig[q] != sig;
        if (fresh && n_seen < 64) seen_sig[n_seen++] = sig;
        for (int32_t i = first; i < first + count; i++) {
            loom_intra_op_cost c;
            if (!loom_intra_op_cost_get(&r, g, i, &c)) continue;
            const loom_op *op = loom_graph_op(g, i);
            t->time_s[l] += c.compute_s + c.comm_s;
            t->sync_s[l] += c.other_sync_s;
            for (int a = 0; a < 4; a++) t->dp_params[4 * l + a] += c.dp_params[a];
            t->params[l] += c.param_count;
            t->params_local[l] += c.param_count_local;
            t->act_bytes[l] += c.act_bytes;
            if (block) t->rc_s[l] += c.fwd_compute_s + c.fwd_comm_s + c.reshard_fwd_s;
            t->core_bytes[l] += c.core_act_bytes;
            if (attention_core_op(g, op)) t->sel_s[l] += c.fwd_compute_s + c.fwd_comm_s;
            if (s->pb.inference && op->kind == LOOM_OP_ATTENTION)
                t->kv_per_seq[l] += kv_per_seq(s, &r, g, i, m);
            if (fresh && s->opt.collect_profile_keys && op->kind != LOOM_OP_RESHAPE &&
                op->kind != LOOM_OP_TRANSPOSE) {
                loom_dim div[LOOM_PROFILE_MAX_DIMS];
                int nd = op_splits(&r, g, i, m, div, LOOM_PROFILE_MAX_DIMS);
                loom_profile_key key;
                loom_error ek;
                if (loom_profile_key_from_op(g, i, div, nd, &key, &ek) == LOOM_OK) add_key(s, &key);
            }
        }
        if (s->pb.inference)   /* each GPU streams its share of b sequences' caches */
            t->kv_read_s[l] = loom_cost_memory_time_s(s->cm, (double)t->kv_per_seq[l] * (double)t->b);
        int32_t iop;
        int ik;
        int32_t in = block ? layer_input(g, l, &iop, &ik) : -1;
        if (in >= 0) {
            int64_t parts = spec_parts(&r, g, iop, LOOM_OPERAND_INPUT, ik, NULL, m);
            t->input_bytes[l] = loom_tensor_bytes(loom_graph_tensor(g, in)) / (parts > 0 ? parts : 1);
        } else {
            t->input_bytes[l] = t->act_bytes[l];
        }
        if (block && t->act_bytes[l] > t->max_block_act) t->max_block_act = t->act_bytes[l];
        if (t->core_bytes[l] > t->max_core) t->max_core = t->core_bytes[l];
    }
    /* Resharding where layer kinds meet is not in the per-op costs; spread
     * it over the layers so the table's total matches the solve's. */
    if (r.reshard_s > 0)
        for (int32_t l = 0; l < n; l++) t->time_s[l] += r.reshard_s / n;
    loom_intra_result_free(&r);
    return LOOM_OK;
}

loom_status loom_search_layer_tab(loom_search *s, int64_t b, loom_mesh_shape mesh,
                                  loom_search_space space, const loom_layer_tab **out,
                                  loom_error *err)
{
    for (int32_t i = 0; i < s->n_tabs; i++) {
        const loom_layer_tab *t = s->tabs[i];
        if (t->b == b && t->n0 == mesh.n0 && t->n1 == mesh.n1 && t->tiled == s->tiled &&
            loom_search_space_eq(t->space, space)) {
            *out = t;
            return LOOM_OK;
        }
    }
    const loom_graph *g;
    loom_status st = loom_search_graph(s, b, &g, err);
    if (st) return st;
    if (s->n_tabs == s->cap_tabs) {
        int32_t nc = s->cap_tabs ? 2 * s->cap_tabs : 32;
        loom_layer_tab **nt = realloc(s->tabs, sizeof *nt * (size_t)nc);
        if (!nt) return loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
        s->tabs = nt, s->cap_tabs = nc;
    }
    loom_layer_tab *t = calloc(1, sizeof *t);
    if (!t) return loom_error_set(err, LOOM_ERR_NOMEM, "stage search: out of memory");
    t->b = b, t->n0 = mesh.n0, t->n1 = mesh.n1, t->tiled = s->tiled, t->space = space;
    st = build_tab(s, g, t, err);
    if (st) {
        tab_free(t);
        free(t);
        return st;
    }
    s->tabs[s->n_tabs++] = t;
    *out = t;
    return LOOM_OK;
}

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
    *tp_out = axes_parts(tp, st->mesh);
    *ep_out = !experts ? 0
                       : axes_parts(ep, st->mesh) *
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
    intra_opts(s, loom_search_stage_space(st), &o);
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
    /* selective recompute: the attention core's ops rerun, its tensors are
     * not kept (eval.c, memory.c) */
    bool sel = st->recompute == LOOM_RECOMPUTE_SELECTIVE && train;
    /* Partial recompute (Megatron's --recompute-method block
     * --recompute-num-layers N): only the first N blocks of the pipeline
     * rank rerun, counted over its chunks in order as loom eval counts
     * them (costs/eval.c); the rest keep all their activations. */
    int64_t rc_left = INT64_MAX;
    if (rc && st->recompute_blocks > 0) {
        rc_left = st->recompute_blocks;
        for (int32_t j = 0; j < i; j++)
            if (cfg->stages[j].group == st->group)
                for (int32_t l = cfg->stages[j].first_layer; l <= cfg->stages[j].last_layer; l++)
                    rc_left -= loom_memory_is_block(g, l);
    }
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
            if (sel && attention_core_op(g, op)) one.sel += c.fwd_compute_s + c.fwd_comm_s;
            if (is_matmul(op)) one.flops += (train ? 3.0 : 1.0) * (double)op->fwd_flops;
            if (!s->want_measured) continue;
            /* where the compute time comes from (profile db or roofline) */
            loom_dim div[LOOM_PROFILE_MAX_DIMS];
            int nd = op_splits(&e->intra, g, q, st->mesh, div, LOOM_PROFILE_MAX_DIMS);
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
        loom_pipeline_breakdown(&po, comm, M, &out->breakdown);
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

void loom_search_profile_keys(const loom_search *s, const loom_profile_key **keys, int32_t *n)
{
    *keys = s->keys;
    *n = s->n_keys;
}
