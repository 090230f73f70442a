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
 * The exact evaluation of a whole configuration, which reuses this file's
 * spec helpers (stage_search_impl.h), is stage_eval.c.
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

int64_t loom_search_axes_parts(unsigned axes, loom_mesh_shape m)
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
    return loom_search_axes_parts(loom_spec_dim_axes(&sp, loom_graph_tensor(g, t), dim), m);
}

/* Per dim name, the largest split any operand spec of op gives it. */
int loom_search_op_splits(const loom_intra_result *r, const loom_graph *g, int32_t op,
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
                int64_t parts = loom_search_axes_parts(sp.ax[d] & LOOM_AXES_BOTH, m);
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

bool loom_search_is_matmul(const loom_op *o)
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

void loom_search_intra_opts(const loom_search *s, loom_search_space space,
                            loom_intra_opts *o)
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
    o->expert_fold = space.megatron && space.expert_fold;
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
    loom_search_intra_opts(s, t->space, &o);
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
            if (loom_recompute_op_modules(g, i) & LOOM_RC_CORE_ATTN)
                t->sel_s[l] += c.fwd_compute_s + c.fwd_comm_s;
            if (s->pb.inference && op->kind == LOOM_OP_ATTENTION)
                t->kv_per_seq[l] += kv_per_seq(s, &r, g, i, m);
            if (fresh && s->opt.collect_profile_keys && op->kind != LOOM_OP_RESHAPE &&
                op->kind != LOOM_OP_TRANSPOSE) {
                loom_dim div[LOOM_PROFILE_MAX_DIMS];
                int nd = loom_search_op_splits(&r, g, i, m, div, LOOM_PROFILE_MAX_DIMS);
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

void loom_search_profile_keys(const loom_search *s, const loom_profile_key **keys, int32_t *n)
{
    *keys = s->keys;
    *n = s->n_keys;
}
