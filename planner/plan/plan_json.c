/*
 * plan_json.c — loom-plan/1 JSON: writer and reader (schema:
 * docs/plan-format.md; field names of docs/design.md §7 are the contract that
 * exporters and other tools read).
 *
 * Writing builds a cJSON tree in a fixed member order and prints it with
 * loom_json_print, whose doubles are shortest round-trip, so the same plan
 * always gives the same bytes. The one value that differs run to run,
 * search.time_s, is written as 0 under LOOM_PLAN_JSON_NO_TIMINGS. The
 * solver hands back typed specs (solver/spec.h); their text is made here,
 * by loom_plan_specs_format, when the planner assembles a plan.
 *
 * Reading goes through base/json (line:col for malformed JSON, duplicate
 * keys, non-finite numbers, unknown members with the allowed list, ranges on
 * every integer), then loom_plan_check, so a plan that comes back from disk
 * is as trustworthy as one the planner just made. Members the writer omits
 * when they do not apply (costs without a price) are optional.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/json.h"
#include "graph/model_facts.h"
#include "planner/plan/plan.h"

/* ---- spec text --------------------------------------------------------------- */

/* Longest text of one spec: LOOM_MAX_DIMS dims of a name and "@01". */
#define SPEC_TEXT_MAX 96

void loom_plan_specs_format(const loom_spec *specs, const loom_tensor *const *ts, int n,
                            char *dst, size_t cap)
{
    size_t len = 0;
    dst[0] = '\0';
    for (int k = 0; k < n; k++) {
        char one[SPEC_TEXT_MAX];
        loom_spec_format(&specs[k], ts[k], one, sizeof one);
        int w = snprintf(dst + len, cap - len, "%s%s", len ? ", " : "", one);
        if (w < 0 || (size_t)w >= cap - len) break;   /* truncated: keep what fits */
        len += (size_t)w;
    }
}

/* ---- writing --------------------------------------------------------------- */

static void num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }
static void str(cJSON *o, const char *k, const char *v) { cJSON_AddStringToObject(o, k, v); }
static void pair(cJSON *o, const char *k, int64_t a, int64_t b)
{
    cJSON *arr = cJSON_AddArrayToObject(o, k);
    cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)a));
    cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)b));
}

static void write_memory(cJSON *o, const loom_plan_memory *m)
{
    num(o, "params", (double)m->params);
    num(o, "grads", (double)m->grads);
    num(o, "optimizer", (double)m->optimizer);
    num(o, "activations", (double)m->activations);
    num(o, "kv_cache", (double)m->kv_cache);
    num(o, "other", (double)m->other);
    num(o, "total", (double)m->total);
}

static void write_stage(cJSON *arr, const loom_plan_stage *s, int flags)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, o);
    num(o, "index", s->index);
    num(o, "group", s->group);
    pair(o, "layers", s->first_layer, s->last_layer);
    cJSON *g = cJSON_AddArrayToObject(o, "gpus");
    for (int64_t i = 0; i < s->n_gpus; i++)
        cJSON_AddItemToArray(g, cJSON_CreateNumber((double)s->gpus[i]));
    num(o, "replica_stride", (double)s->replica_stride);
    pair(o, "submesh", s->submesh_nodes, s->submesh_gpus);
    pair(o, "mesh", s->mesh[0], s->mesh[1]);
    loom_plan_roles ro;
    loom_plan_stage_roles(s, &ro);
    cJSON *ax = cJSON_AddArrayToObject(o, "mesh_axes");
    for (int a = 0; a < 2; a++)
        cJSON_AddItemToArray(ax, cJSON_CreateString(loom_plan_axis_role_name(ro.axis[a])));
    /* the degrees as the ops' specs give them (the stage's fields when it
     * has no weighted op): the file never disagrees with its own ops */
    num(o, "tensor_parallel", (double)ro.tp);
    num(o, "context_parallel", (double)ro.cp);
    num(o, "data_parallel", (double)ro.dp);
    num(o, "expert_parallel", (double)ro.ep);
    /* written when the experts span replicas only: plans without it read
     * (and write) as before */
    if (s->ep_span > 1 && ro.ep > 1) num(o, "expert_parallel_replicas", (double)s->ep_span);
    /* written when the experts' TP is not the stage's (MoE parallel
     * folding, --expert-tensor-parallel-size): plans without it read as
     * before */
    if (ro.etp > 0 && ro.etp != ro.tp) num(o, "expert_tensor_parallel", (double)ro.etp);
    cJSON_AddBoolToObject(o, "sequence_parallel", s->sequence_parallel);
    /* written when on only: plans without it read (and write) as before */
    if (s->tp_comm_overlap) cJSON_AddBoolToObject(o, "tp_comm_overlap", true);
    str(o, "recompute", loom_recompute_name(s->recompute));
    /* written when partial only: plans without it read (and write) as before */
    if (s->recompute_layers > 0) num(o, "recompute_layers", (double)s->recompute_layers);
    num(o, "zero", s->zero);
    num(o, "in_flight", s->in_flight);
    if (!(flags & LOOM_PLAN_JSON_NO_OPS)) {
        cJSON *ops = cJSON_AddArrayToObject(o, "ops");
        for (int32_t i = 0; i < s->n_ops; i++) {
            const loom_plan_op *op = &s->ops[i];
            cJSON *x = cJSON_CreateObject();
            cJSON_AddItemToArray(ops, x);
            str(x, "name", op->name);
            num(x, "layer", op->layer);
            str(x, "strategy", op->strategy);
            cJSON *sp = cJSON_AddObjectToObject(x, "specs");
            str(sp, "input", op->input);
            str(sp, "weight", op->weight);
            str(sp, "output", op->output);
        }
    }
    write_memory(cJSON_AddObjectToObject(o, "memory_bytes"), &s->memory);
    cJSON *t = cJSON_AddObjectToObject(o, "time_s");
    num(t, "compute", s->compute_s);
    num(t, "comm", s->comm_s);
    num(t, "grad_sync", s->grad_sync_s);
    num(t, "stage", s->time_s);
}

/* "assumed": the inputs taken from loom's defaults (plan.h), in this order. */
static const struct {
    unsigned bit;
    const char *name;
} assumed_names[] = {{LOOM_PLAN_ASSUMED_SEQ, "seq"},
                     {LOOM_PLAN_ASSUMED_GBS, "gbs"},
                     {LOOM_PLAN_ASSUMED_ZERO, "zero"}};
#define N_ASSUMED (int)(sizeof assumed_names / sizeof assumed_names[0])

char *loom_plan_to_json(const loom_plan *p, int flags)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    str(root, "format", LOOM_PLAN_FORMAT);

    cJSON *in = cJSON_AddObjectToObject(root, "inputs");
    str(in, "model", p->model);
    str(in, "cluster", p->cluster);
    str(in, "mode", loom_plan_mode_name(p->mode));
    num(in, "gbs", (double)p->gbs);
    num(in, "seq", (double)p->seq);
    str(in, "dtype", loom_dtype_name(p->dtype));
    str(in, "objective", loom_problem_objective_name(p->objective));
    str(in, "space", p->space);
    if (p->latency_bound_s > 0) num(in, "latency_bound_s", p->latency_bound_s);
    if (p->assumed) {   /* which of the inputs were loom's defaults */
        cJSON *as = cJSON_AddArrayToObject(in, "assumed");
        for (int i = 0; i < N_ASSUMED; i++)
            if (p->assumed & assumed_names[i].bit)
                cJSON_AddItemToArray(as, cJSON_CreateString(assumed_names[i].name));
    }

    const loom_model_info *mi = &p->model_info;
    cJSON *mo = cJSON_AddObjectToObject(root, "model");
    str(mo, "arch", mi->arch);
    num(mo, "params", (double)p->model_params);
    num(mo, "layer_slots", p->layer_count);
    num(mo, "layers", (double)mi->layers);
    num(mo, "hidden", (double)mi->hidden);
    num(mo, "heads", (double)mi->heads);
    num(mo, "kv_heads", (double)mi->kv_heads);
    num(mo, "head_dim", (double)mi->head_dim);
    num(mo, "ffn", (double)mi->ffn);
    num(mo, "vocab", (double)mi->vocab);
    num(mo, "experts", (double)mi->experts);
    num(mo, "experts_topk", (double)mi->experts_topk);
    num(mo, "shared_experts", (double)mi->shared_experts);
    num(mo, "moe_ffn", (double)mi->moe_ffn);
    num(mo, "first_dense", (double)mi->first_dense);
    if (mi->kv_lora_rank > 0) {   /* multi-latent attention (DeepSeek) */
        num(mo, "q_lora_rank", (double)mi->q_lora_rank);
        num(mo, "kv_lora_rank", (double)mi->kv_lora_rank);
        num(mo, "qk_rope_head_dim", (double)mi->qk_rope_head_dim);
        num(mo, "v_head_dim", (double)mi->v_head_dim);
    }
    cJSON_AddBoolToObject(mo, "tied_embeddings", mi->tied_embeddings);
    cJSON_AddBoolToObject(mo, "gated_mlp", mi->gated_mlp);
    cJSON_AddBoolToObject(mo, "qkv_bias", mi->qkv_bias);
    cJSON_AddBoolToObject(mo, "flash_attention", mi->flash_attention);
    /* written only when set, as the MLA ranks: the q/k norms (Qwen3) change
     * compute and activations, and an export that lost them rebuilt another
     * family (--qk-layernorm missing from the Megatron-LM line) */
    if (mi->qk_norm) cJSON_AddBoolToObject(mo, "qk_norm", true);
    if (mi->facts.known) cJSON_AddItemToObject(mo, "facts", loom_model_facts_to_json(&mi->facts));

    cJSON *hw = cJSON_AddObjectToObject(root, "hardware");
    num(hw, "nodes", (double)p->nodes);
    num(hw, "gpus_per_node", (double)p->gpus_per_node);
    if (p->idle_gpus_per_node > 0) num(hw, "idle_gpus_per_node", (double)p->idle_gpus_per_node);
    str(hw, "gpu", p->gpu);
    num(hw, "gpu_memory_bytes", (double)p->gpu_memory_bytes);
    num(hw, "gpu_peak_flops", p->gpu_peak_flops);
    num(hw, "price_per_gpu_hour_usd", p->price_per_gpu_hour_usd);
    num(hw, "power_w", p->power_w);

    cJSON *sc = cJSON_AddObjectToObject(root, "schedule");
    str(sc, "kind", p->schedule_kind);
    num(sc, "micro_batch", (double)p->micro_batch);
    num(sc, "micro_batches", (double)p->micro_batches);
    num(sc, "virtual_stages", (double)p->virtual_stages);
    num(sc, "pipeline_stages", (double)p->pipeline_stages);
    num(sc, "data_parallel", (double)p->data_parallel);
    num(sc, "gpus_per_replica", (double)p->gpus_per_replica);

    cJSON *st = cJSON_AddArrayToObject(root, "stages");
    for (int32_t i = 0; i < p->n_stages; i++) write_stage(st, &p->stages[i], flags);

    cJSON *pr = cJSON_AddObjectToObject(root, "predicted");
    num(pr, "step_time_s", p->step_time_s);
    num(pr, "tokens_per_s", p->tokens_per_s);
    if (p->mode == LOOM_PLAN_INFER) num(pr, "latency_per_token_s", p->latency_per_token_s);
    num(pr, "model_tflops_per_gpu", p->model_tflops_per_gpu);
    num(pr, "mfu", p->mfu);
    num(pr, "memory_per_gpu_bytes", (double)p->memory_per_gpu_bytes);
    cJSON *bd = cJSON_AddObjectToObject(pr, "breakdown_s");
    num(bd, "compute", p->breakdown.compute_s);
    num(bd, "tp_comm", p->breakdown.tp_comm_s);
    num(bd, "bubble", p->breakdown.bubble_s);
    num(bd, "p2p", p->breakdown.p2p_s);
    num(bd, "grad_sync", p->breakdown.grad_sync_s);
    num(bd, "optimizer", p->breakdown.optimizer_s);
    if (p->cost_per_step_usd >= 0) {
        num(pr, "cost_per_step_usd", p->cost_per_step_usd);
        num(pr, "cost_per_mtoken_usd", p->cost_per_mtoken_usd);
    }
    if (p->energy_per_step_j >= 0) {
        num(pr, "energy_per_step_j", p->energy_per_step_j);
        num(pr, "energy_per_token_j", p->energy_per_token_j);
    }
    num(pr, "measured_share", p->measured_share);
    const loom_plan_alternative *alts[2] = {&p->nvlink_groups_alt, &p->nvlink_layout_alt};
    static const char *const alt_keys[2] = {"nvlink_groups_alternative",
                                            "nvlink_layout_alternative"};
    for (int i = 0; i < 2; i++) {
        const loom_plan_alternative *a = alts[i];
        if (a->gpus <= 0) continue;
        cJSON *al = cJSON_AddObjectToObject(pr, alt_keys[i]);
        num(al, "gpus", (double)a->gpus);
        num(al, "step_time_s", a->step_time_s);
        num(al, "tensor_parallel", (double)a->tensor_parallel);
        num(al, "expert_parallel", (double)a->expert_parallel);
    }

    cJSON *se = cJSON_AddObjectToObject(root, "search");
    str(se, "algorithm", p->algorithm);
    num(se, "time_s", (flags & LOOM_PLAN_JSON_NO_TIMINGS) ? 0.0 : p->search_time_s);
    num(se, "ilp_solves", (double)p->ilp_solves);
    num(se, "dp_runs", (double)p->dp_runs);
    num(se, "configs_evaluated", (double)p->configs_evaluated);
    str(se, "status", p->search_status);

    char *text = loom_json_print(root);
    cJSON_Delete(root);
    return text;
}

loom_status loom_plan_write(const loom_plan *p, const char *path, int flags, loom_error *err)
{
    char *text = loom_plan_to_json(p, flags);
    if (!text) return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory writing the plan", path);
    loom_status s = loom_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return s;
}

/* ---- reading ----------------------------------------------------------------- */

#define I64MAX ((int64_t)1 << 53)   /* integers survive a double exactly below this */

static loom_status copy_str(const loom_jctx *c, const cJSON *o, const char *path,
                            const char *key, bool req, char *dst, size_t n)
{
    const char *v = NULL;
    loom_status s = loom_json_get_str(c, o, path, key, req, &v);
    if (s || !v) return s;
    if (strlen(v) >= n)
        return loom_json_fail(c, path, "field \"%s\": string longer than %zu characters", key,
                              n - 1);
    memcpy(dst, v, strlen(v) + 1);
    return LOOM_OK;
}

static loom_status get_pair(const loom_jctx *c, const cJSON *o, const char *path,
                            const char *key, int64_t lo, int64_t hi, int64_t out[2])
{
    const cJSON *a;
    loom_status s = loom_json_get_array(c, o, path, key, true, &a);
    if (s) return s;
    char sub[512];
    snprintf(sub, sizeof sub, "%s.%s", path, key);
    if (cJSON_GetArraySize(a) != 2)
        return loom_json_fail(c, sub, "expected an array of 2 integers, found %d items",
                              cJSON_GetArraySize(a));
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetArrayItem(a, i);
        double d = cJSON_IsNumber(v) ? v->valuedouble : -1e300;
        if (!cJSON_IsNumber(v) || d < (double)lo || d > (double)hi || d != (double)(int64_t)d)
            return loom_json_fail(c, sub, "item %d: expected an integer in [%lld, %lld], found %s",
                                  i, (long long)lo, (long long)hi,
                                  cJSON_IsNumber(v) ? "a number out of range"
                                                    : loom_json_type_name(v));
        out[i] = (int64_t)d;
    }
    return LOOM_OK;
}

#define TRY(x)              \
    do {                    \
        s = (x);            \
        if (s) return s;    \
    } while (0)

static loom_status read_memory(const loom_jctx *c, const cJSON *o, const char *path,
                               loom_plan_memory *m)
{
    static const char *const keys[] = {"params", "grads", "optimizer", "activations",
                                       "kv_cache", "other", "total", NULL};
    loom_status s;
    TRY(loom_json_check_keys(c, o, path, keys));
    int64_t *f[] = {&m->params, &m->grads, &m->optimizer, &m->activations,
                    &m->kv_cache, &m->other, &m->total};
    for (int i = 0; i < 7; i++) TRY(loom_json_get_int(c, o, path, keys[i], true, 0, I64MAX, f[i]));
    return LOOM_OK;
}

static loom_status read_op(const loom_jctx *c, const cJSON *o, const char *path, loom_plan_op *op)
{
    static const char *const keys[] = {"name", "layer", "strategy", "specs", NULL};
    static const char *const skeys[] = {"input", "weight", "output", NULL};
    loom_status s;
    int64_t layer = 0;
    if (!cJSON_IsObject(o)) return loom_json_fail(c, path, "expected an object, found %s",
                                                  loom_json_type_name(o));
    TRY(loom_json_check_keys(c, o, path, keys));
    TRY(copy_str(c, o, path, "name", true, op->name, sizeof op->name));
    TRY(loom_json_get_int(c, o, path, "layer", true, 0, INT32_MAX, &layer));
    op->layer = (int32_t)layer;
    TRY(copy_str(c, o, path, "strategy", true, op->strategy, sizeof op->strategy));
    const cJSON *sp;
    TRY(loom_json_get_object(c, o, path, "specs", true, &sp));
    char sub[600];
    snprintf(sub, sizeof sub, "%s.specs", path);
    TRY(loom_json_check_keys(c, sp, sub, skeys));
    TRY(copy_str(c, sp, sub, "input", true, op->input, sizeof op->input));
    TRY(copy_str(c, sp, sub, "weight", true, op->weight, sizeof op->weight));
    TRY(copy_str(c, sp, sub, "output", true, op->output, sizeof op->output));
    return LOOM_OK;
}

static loom_status read_stage(const loom_jctx *c, const cJSON *o, const char *path,
                              loom_plan_stage *st)
{
    static const char *const keys[] = {"index", "group", "layers", "gpus", "replica_stride",
                                       "submesh", "mesh", "mesh_axes",
                                       "tensor_parallel", "context_parallel", "data_parallel",
                                       "expert_parallel", "expert_parallel_replicas",
                                       "expert_tensor_parallel", "sequence_parallel", "tp_comm_overlap",
                                       "recompute", "recompute_layers", "zero", "in_flight",
                                       "ops", "memory_bytes",
                                       "time_s", NULL};
    static const char *const tkeys[] = {"compute", "comm", "grad_sync", "stage", NULL};
    loom_status s;
    char sub[512];
    int64_t v = 0, pr[2];
    if (!cJSON_IsObject(o)) return loom_json_fail(c, path, "expected an object, found %s",
                                                  loom_json_type_name(o));
    TRY(loom_json_check_keys(c, o, path, keys));
    TRY(loom_json_get_int(c, o, path, "index", true, 0, INT32_MAX, &v));
    st->index = (int32_t)v;
    TRY(loom_json_get_int(c, o, path, "group", true, 0, INT32_MAX, &v));
    st->group = (int32_t)v;
    TRY(get_pair(c, o, path, "layers", 0, INT32_MAX, pr));
    st->first_layer = (int32_t)pr[0], st->last_layer = (int32_t)pr[1];
    const cJSON *g;
    TRY(loom_json_get_array(c, o, path, "gpus", true, &g));
    int n = cJSON_GetArraySize(g);
    loom_error *err = c->err;
    TRY(loom_plan_stage_set_gpus(st, n, err));
    snprintf(sub, sizeof sub, "%s.gpus", path);
    for (int i = 0; i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(g, i);
        double d = cJSON_IsNumber(x) ? x->valuedouble : -1;
        if (!cJSON_IsNumber(x) || d < 0 || d > (double)I64MAX || d != (double)(int64_t)d)
            return loom_json_fail(c, sub, "item %d: expected a GPU id (integer >= 0), found %s", i,
                                  cJSON_IsNumber(x) ? "a number out of range"
                                                    : loom_json_type_name(x));
        st->gpus[i] = (int64_t)d;
    }
    TRY(loom_json_get_int(c, o, path, "replica_stride", true, 1, I64MAX, &st->replica_stride));
    TRY(get_pair(c, o, path, "submesh", 1, I64MAX, pr));
    st->submesh_nodes = pr[0], st->submesh_gpus = pr[1];
    TRY(get_pair(c, o, path, "mesh", 1, I64MAX, st->mesh));
    TRY(loom_json_get_int(c, o, path, "tensor_parallel", true, 1, I64MAX, &st->tensor_parallel));
    /* context_parallel and expert_parallel came later: a plan without them
     * counted the context-parallel GPUs in data_parallel (fixed up below,
     * once the ops are read) */
    bool has_cp = cJSON_GetObjectItemCaseSensitive(o, "context_parallel") != NULL;
    st->context_parallel = 1, st->expert_parallel = 1;
    TRY(loom_json_get_int(c, o, path, "context_parallel", false, 1, I64MAX, &st->context_parallel));
    TRY(loom_json_get_int(c, o, path, "data_parallel", true, 1, I64MAX, &st->data_parallel));
    TRY(loom_json_get_int(c, o, path, "expert_parallel", false, 1, I64MAX, &st->expert_parallel));
    st->ep_span = 1;
    TRY(loom_json_get_int(c, o, path, "expert_parallel_replicas", false, 1, I64MAX, &st->ep_span));
    TRY(loom_json_get_bool(c, o, path, "sequence_parallel", true, &st->sequence_parallel));
    st->tp_comm_overlap = false;   /* came later: optional */
    TRY(loom_json_get_bool(c, o, path, "tp_comm_overlap", false, &st->tp_comm_overlap));
    const char *rc = NULL;
    TRY(loom_json_get_str(c, o, path, "recompute", true, &rc));
    if (!loom_recompute_parse(rc, &st->recompute))
        return loom_json_fail(c, path, "field \"recompute\": expected none, selective or full, "
                                       "found \"%s\"", rc);
    st->recompute_layers = 0;   /* came later: optional */
    TRY(loom_json_get_int(c, o, path, "recompute_layers", false, 0, I64MAX, &st->recompute_layers));
    if (st->recompute_layers > 0 && st->recompute != LOOM_RECOMPUTE_FULL)
        return loom_json_fail(c, path, "field \"recompute_layers\": %lld blocks of recompute, "
                                       "but \"recompute\" is \"%s\", not \"full\"",
                              (long long)st->recompute_layers, rc);
    TRY(loom_json_get_int(c, o, path, "zero", true, 0, 3, &v));
    st->zero = (int)v;
    TRY(loom_json_get_num(c, o, path, "in_flight", true, 0, 1e9, &st->in_flight));
    const cJSON *ops;
    TRY(loom_json_get_array(c, o, path, "ops", false, &ops));
    if (ops) {
        n = cJSON_GetArraySize(ops);
        TRY(loom_plan_stage_set_ops(st, n, err));
        int i = 0;
        for (const cJSON *x = ops->child; x; x = x->next, i++) {
            snprintf(sub, sizeof sub, "%s.ops[%d]", path, i);
            TRY(read_op(c, x, sub, &st->ops[i]));
        }
    }
    if (!has_cp && st->n_ops > 0) {   /* an older plan: its ops say what CP and EP are */
        loom_plan_roles ro;
        loom_plan_stage_roles(st, &ro);
        if (ro.cp > 1 && st->data_parallel == ro.cp * ro.dp) {
            st->context_parallel = ro.cp;
            st->data_parallel = ro.dp;
        }
        if (!cJSON_GetObjectItemCaseSensitive(o, "expert_parallel")) st->expert_parallel = ro.ep;
    }
    const cJSON *m;
    TRY(loom_json_get_object(c, o, path, "memory_bytes", true, &m));
    snprintf(sub, sizeof sub, "%s.memory_bytes", path);
    TRY(read_memory(c, m, sub, &st->memory));
    const cJSON *t;
    TRY(loom_json_get_object(c, o, path, "time_s", true, &t));
    snprintf(sub, sizeof sub, "%s.time_s", path);
    TRY(loom_json_check_keys(c, t, sub, tkeys));
    double *tf[] = {&st->compute_s, &st->comm_s, &st->grad_sync_s, &st->time_s};
    for (int i = 0; i < 4; i++) TRY(loom_json_get_num(c, t, sub, tkeys[i], true, 0, 1e12, tf[i]));
    return LOOM_OK;
}

static loom_status read_inputs(const loom_jctx *c, const cJSON *root, loom_plan *p)
{
    static const char *const keys[] = {"model", "cluster", "mode", "gbs", "seq", "dtype",
                                       "objective", "space", "latency_bound_s", "assumed",
                                       NULL};
    loom_status s;
    const cJSON *o;
    TRY(loom_json_get_object(c, root, "$", "inputs", true, &o));
    const char *P = "$.inputs", *v = NULL;
    TRY(loom_json_check_keys(c, o, P, keys));
    TRY(copy_str(c, o, P, "model", true, p->model, sizeof p->model));
    TRY(copy_str(c, o, P, "cluster", true, p->cluster, sizeof p->cluster));
    TRY(loom_json_get_str(c, o, P, "mode", true, &v));
    if (!loom_plan_mode_parse(v, &p->mode))
        return loom_json_fail(c, P, "field \"mode\": expected train or infer, found \"%s\"", v);
    TRY(loom_json_get_int(c, o, P, "gbs", true, 1, I64MAX, &p->gbs));
    TRY(loom_json_get_int(c, o, P, "seq", true, 1, I64MAX, &p->seq));
    TRY(loom_json_get_str(c, o, P, "dtype", true, &v));
    if (!loom_dtype_parse(v, &p->dtype))
        return loom_json_fail(c, P, "field \"dtype\": unknown dtype \"%s\"", v);
    TRY(loom_json_get_str(c, o, P, "objective", true, &v));
    if (!loom_problem_objective_parse(v, &p->objective))
        return loom_json_fail(c, P, "field \"objective\": expected time, cost, energy, latency "
                                    "or throughput, found \"%s\"", v);
    TRY(copy_str(c, o, P, "space", true, p->space, sizeof p->space));
    TRY(loom_json_get_num(c, o, P, "latency_bound_s", false, 0, 1e9, &p->latency_bound_s));
    const cJSON *as = NULL;
    TRY(loom_json_get_array(c, o, P, "assumed", false, &as));
    int idx = 0;
    for (const cJSON *e = as ? as->child : NULL; e; e = e->next, idx++) {
        int i = 0;
        while (i < N_ASSUMED && !(cJSON_IsString(e) && !strcmp(e->valuestring, assumed_names[i].name)))
            i++;
        if (i == N_ASSUMED) {
            char sub[64];
            snprintf(sub, sizeof sub, "%s.assumed[%d]", P, idx);
            return loom_json_fail(c, sub, "expected \"seq\", \"gbs\" or \"zero\"");
        }
        p->assumed |= assumed_names[i].bit;
    }
    return LOOM_OK;
}

static loom_status read_model(const loom_jctx *c, const cJSON *root, loom_plan *p)
{
    static const char *const keys[] = {
        "arch", "params", "layer_slots", "layers", "hidden", "heads", "kv_heads", "head_dim",
        "ffn", "vocab", "experts", "experts_topk", "shared_experts", "moe_ffn", "first_dense",
        "tied_embeddings", "gated_mlp", "qkv_bias", "flash_attention",
        "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "facts", "qk_norm", NULL};
    loom_status s;
    const cJSON *o;
    TRY(loom_json_get_object(c, root, "$", "model", true, &o));
    const char *P = "$.model";
    loom_model_info *mi = &p->model_info;
    TRY(loom_json_check_keys(c, o, P, keys));
    TRY(copy_str(c, o, P, "arch", true, mi->arch, sizeof mi->arch));
    TRY(loom_json_get_int(c, o, P, "params", true, 0, I64MAX, &p->model_params));
    int64_t slots = 0;
    TRY(loom_json_get_int(c, o, P, "layer_slots", true, 1, INT32_MAX, &slots));
    p->layer_count = (int32_t)slots;
    int64_t *f[] = {&mi->layers, &mi->hidden, &mi->heads, &mi->kv_heads, &mi->head_dim,
                    &mi->ffn, &mi->vocab, &mi->experts, &mi->experts_topk,
                    &mi->shared_experts, &mi->moe_ffn, &mi->first_dense};
    for (int i = 0; i < 12; i++) TRY(loom_json_get_int(c, o, P, keys[3 + i], true, 0, I64MAX, f[i]));
    bool *b[] = {&mi->tied_embeddings, &mi->gated_mlp, &mi->qkv_bias, &mi->flash_attention};
    for (int i = 0; i < 4; i++) TRY(loom_json_get_bool(c, o, P, keys[15 + i], true, b[i]));
    int64_t *mla[] = {&mi->q_lora_rank, &mi->kv_lora_rank, &mi->qk_rope_head_dim,
                      &mi->v_head_dim};   /* MLA models only */
    for (int i = 0; i < 4; i++)
        TRY(loom_json_get_int(c, o, P, keys[19 + i], false, 0, I64MAX, mla[i]));
    TRY(loom_json_get_bool(c, o, P, "qk_norm", false, &mi->qk_norm));   /* absent: false */
    const cJSON *facts = NULL;
    TRY(loom_json_get_object(c, o, P, "facts", false, &facts));
    if (facts) TRY(loom_model_facts_from_json(c, facts, "$.model.facts", &mi->facts));
    mi->seq = p->seq;
    mi->batch = p->micro_batch;
    mi->dtype = p->dtype;
    return LOOM_OK;
}

static loom_status read_hardware_schedule(const loom_jctx *c, const cJSON *root, loom_plan *p)
{
    static const char *const hkeys[] = {"nodes", "gpus_per_node", "idle_gpus_per_node", "gpu",
                                        "gpu_memory_bytes", "gpu_peak_flops",
                                        "price_per_gpu_hour_usd", "power_w", NULL};
    static const char *const skeys[] = {"kind", "micro_batch", "micro_batches", "virtual_stages",
                                        "pipeline_stages", "data_parallel", "gpus_per_replica",
                                        NULL};
    loom_status s;
    const cJSON *o;
    const char *P = "$.hardware";
    TRY(loom_json_get_object(c, root, "$", "hardware", true, &o));
    TRY(loom_json_check_keys(c, o, P, hkeys));
    TRY(loom_json_get_int(c, o, P, "nodes", true, 1, I64MAX, &p->nodes));
    TRY(loom_json_get_int(c, o, P, "gpus_per_node", true, 1, I64MAX, &p->gpus_per_node));
    TRY(loom_json_get_int(c, o, P, "idle_gpus_per_node", false, 0, I64MAX,
                          &p->idle_gpus_per_node));
    TRY(copy_str(c, o, P, "gpu", true, p->gpu, sizeof p->gpu));
    TRY(loom_json_get_int(c, o, P, "gpu_memory_bytes", true, 1, I64MAX, &p->gpu_memory_bytes));
    TRY(loom_json_get_num(c, o, P, "gpu_peak_flops", true, 0, 1e20, &p->gpu_peak_flops));
    TRY(loom_json_get_num(c, o, P, "price_per_gpu_hour_usd", true, 0, 1e9,
                          &p->price_per_gpu_hour_usd));
    TRY(loom_json_get_num(c, o, P, "power_w", true, 0, 1e9, &p->power_w));

    P = "$.schedule";
    TRY(loom_json_get_object(c, root, "$", "schedule", true, &o));
    TRY(loom_json_check_keys(c, o, P, skeys));
    TRY(copy_str(c, o, P, "kind", true, p->schedule_kind, sizeof p->schedule_kind));
    if (strcmp(p->schedule_kind, "1f1b") && strcmp(p->schedule_kind, "interleaved") &&
        strcmp(p->schedule_kind, "inference"))
        return loom_json_fail(c, P, "field \"kind\": expected 1f1b, interleaved or inference, "
                                    "found \"%s\"", p->schedule_kind);
    int64_t *f[] = {&p->micro_batch, &p->micro_batches, &p->virtual_stages, &p->pipeline_stages,
                    &p->data_parallel, &p->gpus_per_replica};
    for (int i = 0; i < 6; i++) TRY(loom_json_get_int(c, o, P, skeys[1 + i], true, 1, I64MAX, f[i]));
    return LOOM_OK;
}

static loom_status read_predicted_search(const loom_jctx *c, const cJSON *root, loom_plan *p)
{
    static const char *const pkeys[] = {
        "step_time_s", "tokens_per_s", "latency_per_token_s", "model_tflops_per_gpu", "mfu",
        "memory_per_gpu_bytes", "breakdown_s", "cost_per_step_usd", "cost_per_mtoken_usd",
        "energy_per_step_j", "energy_per_token_j", "measured_share",
        "nvlink_groups_alternative", "nvlink_layout_alternative", NULL};
    static const char *const akeys[] = {"gpus", "step_time_s", "tensor_parallel",
                                        "expert_parallel", NULL};
    static const char *const bkeys[] = {"compute", "tp_comm", "bubble", "p2p", "grad_sync",
                                        "optimizer", NULL};
    static const char *const skeys[] = {"algorithm", "time_s", "ilp_solves", "dp_runs",
                                        "configs_evaluated", "status", NULL};
    loom_status s;
    const cJSON *o, *b;
    const char *P = "$.predicted";
    TRY(loom_json_get_object(c, root, "$", "predicted", true, &o));
    TRY(loom_json_check_keys(c, o, P, pkeys));
    TRY(loom_json_get_num(c, o, P, "step_time_s", true, 0, 1e12, &p->step_time_s));
    TRY(loom_json_get_num(c, o, P, "tokens_per_s", true, 0, 1e18, &p->tokens_per_s));
    TRY(loom_json_get_num(c, o, P, "latency_per_token_s", false, 0, 1e12,
                          &p->latency_per_token_s));
    TRY(loom_json_get_num(c, o, P, "model_tflops_per_gpu", true, 0, 1e9,
                          &p->model_tflops_per_gpu));
    TRY(loom_json_get_num(c, o, P, "mfu", true, 0, 1e3, &p->mfu));
    TRY(loom_json_get_int(c, o, P, "memory_per_gpu_bytes", true, 0, I64MAX,
                          &p->memory_per_gpu_bytes));
    TRY(loom_json_get_object(c, o, P, "breakdown_s", true, &b));
    TRY(loom_json_check_keys(c, b, "$.predicted.breakdown_s", bkeys));
    double *bf[] = {&p->breakdown.compute_s, &p->breakdown.tp_comm_s, &p->breakdown.bubble_s,
                    &p->breakdown.p2p_s, &p->breakdown.grad_sync_s, &p->breakdown.optimizer_s};
    for (int i = 0; i < 6; i++)
        TRY(loom_json_get_num(c, b, "$.predicted.breakdown_s", bkeys[i], true, 0, 1e12, bf[i]));
    TRY(loom_json_get_num(c, o, P, "cost_per_step_usd", false, 0, 1e15, &p->cost_per_step_usd));
    TRY(loom_json_get_num(c, o, P, "cost_per_mtoken_usd", false, 0, 1e15,
                          &p->cost_per_mtoken_usd));
    TRY(loom_json_get_num(c, o, P, "energy_per_step_j", false, 0, 1e18, &p->energy_per_step_j));
    TRY(loom_json_get_num(c, o, P, "energy_per_token_j", false, 0, 1e18,
                          &p->energy_per_token_j));
    TRY(loom_json_get_num(c, o, P, "measured_share", true, 0, 1, &p->measured_share));
    static const char *const alt_paths[2] = {"$.predicted.nvlink_groups_alternative",
                                             "$.predicted.nvlink_layout_alternative"};
    loom_plan_alternative *alts[2] = {&p->nvlink_groups_alt, &p->nvlink_layout_alt};
    for (int i = 0; i < 2; i++) {
        const cJSON *al = NULL;
        const char *A = alt_paths[i];
        TRY(loom_json_get_object(c, o, P, A + strlen("$.predicted."), false, &al));
        if (!al) continue;
        loom_plan_alternative *a = alts[i];
        TRY(loom_json_check_keys(c, al, A, akeys));
        TRY(loom_json_get_int(c, al, A, "gpus", true, 1, I64MAX, &a->gpus));
        TRY(loom_json_get_num(c, al, A, "step_time_s", true, 0, 1e12, &a->step_time_s));
        TRY(loom_json_get_int(c, al, A, "tensor_parallel", true, 1, I64MAX, &a->tensor_parallel));
        TRY(loom_json_get_int(c, al, A, "expert_parallel", true, 1, I64MAX, &a->expert_parallel));
    }

    P = "$.search";
    TRY(loom_json_get_object(c, root, "$", "search", true, &o));
    TRY(loom_json_check_keys(c, o, P, skeys));
    TRY(copy_str(c, o, P, "algorithm", true, p->algorithm, sizeof p->algorithm));
    TRY(loom_json_get_num(c, o, P, "time_s", true, 0, 1e12, &p->search_time_s));
    TRY(loom_json_get_int(c, o, P, "ilp_solves", true, 0, I64MAX, &p->ilp_solves));
    TRY(loom_json_get_int(c, o, P, "dp_runs", true, 0, I64MAX, &p->dp_runs));
    TRY(loom_json_get_int(c, o, P, "configs_evaluated", true, 0, I64MAX, &p->configs_evaluated));
    TRY(copy_str(c, o, P, "status", true, p->search_status, sizeof p->search_status));
    return LOOM_OK;
}

static loom_status read_root(const loom_jctx *c, const cJSON *root, loom_plan *p)
{
    static const char *const keys[] = {"format", "inputs", "model", "hardware", "schedule",
                                       "stages", "predicted", "search", NULL};
    loom_status s;
    if (!cJSON_IsObject(root))
        return loom_json_fail(c, "$", "expected an object, found %s", loom_json_type_name(root));
    const char *fmt = NULL;
    TRY(loom_json_get_str(c, root, "$", "format", true, &fmt));
    if (strcmp(fmt, LOOM_PLAN_FORMAT) != 0)
        return loom_json_fail(c, "$.format", "expected \"%s\", found \"%s\"", LOOM_PLAN_FORMAT,
                              fmt);
    if (cJSON_GetObjectItemCaseSensitive(root, "serving"))   /* docs/plan-format.md, serving plans */
        return loom_json_fail(c, "$.serving", "a serving plan (loom plan --mode serve): it has no "
                              "stages to read as a placement plan (loom export --to vllm or "
                              "--to sglang reads its deployment)");
    TRY(loom_json_check_keys(c, root, "$", keys));
    TRY(read_inputs(c, root, p));
    TRY(read_hardware_schedule(c, root, p));
    TRY(read_model(c, root, p));
    const cJSON *st;
    TRY(loom_json_get_array(c, root, "$", "stages", true, &st));
    int n = cJSON_GetArraySize(st);
    if (n < 1) return loom_json_fail(c, "$.stages", "expected at least one stage");
    TRY(loom_plan_set_stages(p, n, c->err));
    int i = 0;
    for (const cJSON *x = st->child; x; x = x->next, i++) {
        char sub[64];
        snprintf(sub, sizeof sub, "$.stages[%d]", i);
        TRY(read_stage(c, x, sub, &p->stages[i]));
    }
    TRY(read_predicted_search(c, root, p));
    return LOOM_OK;
}

/* The plan in a parsed tree, validated; takes ownership of root. */
static loom_status from_tree(const char *file, cJSON *root, loom_plan **out, loom_error *err)
{
    loom_plan *p = NULL;
    loom_status s = loom_plan_create(&p, err);
    if (!s) {
        loom_jctx c = {file, err};
        s = read_root(&c, root, p);
    }
    if (!s) s = loom_plan_check(p, file, err);
    cJSON_Delete(root);
    if (s) {
        loom_plan_destroy(p);
        return s;
    }
    *out = p;
    return LOOM_OK;
}

loom_status loom_plan_parse(const char *file, const char *text, size_t len, loom_plan **out,
                            loom_error *err)
{
    cJSON *root = NULL;
    *out = NULL;
    loom_json_limits lim = LOOM_JSON_LIMITS_PLAN;
    loom_status s = loom_json_parse_limited(file, text, len, &lim, &root, err);
    return s ? s : from_tree(file, root, out, err);
}

loom_status loom_plan_read(const char *path, loom_plan **out, loom_error *err)
{
    cJSON *root = NULL;
    *out = NULL;
    loom_status s = loom_json_parse_file(path, &root, err);
    return s ? s : from_tree(path, root, out, err);
}
