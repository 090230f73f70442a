/*
 * export_plan.c — from a loom-plan/1 plan to the runtime configuration every
 * exporter renders (loom_export_from_plan, export.h), and what in the plan no
 * Megatron-style runtime can run.
 *
 * Megatron-LM, vLLM, DeepSpeed and torchtitan all run the same shape of
 * parallelism: one tensor-parallel size for the whole model, the same number
 * of GPUs per pipeline stage, and inside a stage a 2-D grid of GPUs whose
 * first axis splits the batch (data parallelism; experts for expert
 * parallelism) and whose second splits attention heads, MLP columns, the
 * vocabulary and experts (tensor parallelism, Megatron-style; the sequence
 * with sequence parallelism). An Alpa plan may leave that shape: stages with
 * different meshes, a weight split over both axes (2-D tensor parallelism),
 * the hidden dim split, an op computed on the whole batch. Each such use is
 * an obstacle, counted over the ops and named with a first example:
 *
 *   the tensor-parallel axes are those the stage's dense weights (weights
 *     without an expert dim) split over; both: 2-D tensor parallelism;
 *   a context-parallel axis is another one over which activations split the
 *     sequence s but not the batch b;
 *   the other axes are data-parallel;
 *   a data-parallel axis may split only     b (batch), c (tokens per expert),
 *                                           e (experts)
 *   the tensor-parallel axis only           heads, kvh, f, v, e, c, s
 *   a context-parallel axis only            s, c, e
 *   every activation with a b dim splits b over every data-parallel axis
 *
 * (the whitelists are those of the solver's megatron_only space, solver/intra.h,
 * plus expert parallelism over data-parallel ranks, which Megatron's EP is).
 *
 * Degrees: TP and CP = the GPUs of those axes; DP = replicas of the
 * pipeline × the stage's other GPUs; the runtime's micro-batch (per GPU) is
 * the plan's (per replica) over those in-stage data-parallel GPUs; EP and
 * expert TP from the axes the expert weights (dims e and f) split e and f
 * over. A plan written without per-op specs falls back on the stages'
 * tensor_parallel and data_parallel fields.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/export/export.h"

/* One kind of non-Megatron sharding: how many ops, and the first one. */
typedef struct {
    int64_t count;
    char example[200];
} issue;

enum { ISSUE_2D_TP, ISSUE_DP_AXIS, ISSUE_TP_AXIS, ISSUE_CP_AXIS, ISSUE_BATCH, ISSUE_COUNT };

static bool in_list(const char *dim, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(dim, *list) == 0) return true;
    return false;
}

/* What each axis of a Megatron-style stage may split (solver/intra.h's
 * megatron_only space; experts over data-parallel, context-parallel or
 * tensor-parallel ranks = Megatron EP, with the tokens c they receive). */
static const char *const dp_dims[] = {"b", "c", "e", NULL};
static const char *const tp_dims[] = {"heads", "kvh", "f", "v", "e", "c", "s", NULL};
static const char *const cp_dims[] = {"s", "c", "e", NULL};

static void note_issue(issue *is, const loom_plan_op *op, const char *which, const char *tok)
{
    if (is->count++ == 0)
        snprintf(is->example, sizeof is->example, "%s (%s %s)", op->name, which, tok);
}

/* Mesh axes (bit 0, bit 1) dim `dim` of one operand token list splits
 * over; any dim when dim is NULL; only axes of more than one GPU. With
 * `found`, also whether the dim occurs at all. */
static unsigned dim_axes(const char *spec, const char *dim, const int64_t mesh[2], bool *found)
{
    unsigned axes = 0;
    if (found) *found = false;
    for (const char *p = spec; *p;) {
        while (*p == ' ' || *p == ',') p++;
        const char *name = p;
        while (*p && *p != ' ' && *p != ',' && *p != '@') p++;
        size_t len = (size_t)(p - name);
        unsigned a = 0;
        if (*p == '@')
            for (p++; *p == '0' || *p == '1'; p++) a |= *p == '0' ? 1u : 2u;
        while (*p && *p != ' ' && *p != ',') p++;
        if (!dim || (strlen(dim) == len && strncmp(dim, name, len) == 0)) {
            axes |= a;
            if (found && len) *found = true;
        }
    }
    if (mesh[0] <= 1) axes &= ~1u;
    if (mesh[1] <= 1) axes &= ~2u;
    return axes;
}

static unsigned spec_axes(const char *spec, const char *dim, const int64_t mesh[2])
{
    return dim_axes(spec, dim, mesh, NULL);
}

/* Expert parallel and expert TP degrees of an expert weight spec
 * ("e@0 h f@1"): the mesh GPUs its e and f dims split over. Returns false
 * when the spec is not an expert weight (one with both an e and an f dim;
 * the router's "h e" has no f). */
static bool expert_degrees(const char *spec, const int64_t mesh[2], int64_t *ep, int64_t *etp)
{
    bool has_e, has_f;
    unsigned e = dim_axes(spec, "e", mesh, &has_e), f = dim_axes(spec, "f", mesh, &has_f);
    if (!has_e || !has_f) return false;
    *ep = ((e & 1u) ? mesh[0] : 1) * ((e & 2u) ? mesh[1] : 1);
    *etp = ((f & 1u) ? mesh[0] : 1) * ((f & 2u) ? mesh[1] : 1);
    return true;
}

/* How a stage uses its mesh, Megatron's way: loom_plan_stage_roles (plan.h),
 * the one reading the plan's table and picture use too, as axis bits. */
typedef struct {
    unsigned tp_axes;        /* bit 0, bit 1; both: 2-D tensor parallelism */
    unsigned cp_axes;
    int64_t tp, cp, dp_in;
} stage_roles;

static stage_roles roles_of(const loom_plan_stage *s)
{
    loom_plan_roles ro;
    loom_plan_stage_roles(s, &ro);
    stage_roles r = {0, 0, ro.tp, ro.cp, ro.dp};
    for (int a = 0; a < 2; a++) {
        if (ro.axis[a] == LOOM_AXIS_TP) r.tp_axes |= 1u << a;
        if (ro.axis[a] == LOOM_AXIS_CP) r.cp_axes |= 1u << a;
    }
    return r;
}

/* Checks one operand spec ("b@0 s h@1, b@0 s h@1") of op in stage s. */
static void check_spec(const loom_plan_op *op, const char *which, const char *spec,
                       const loom_plan_stage *st, const stage_roles *r, issue *issues)
{
    if (r->tp_axes == 3u) {
        if (strchr(spec, '@')) note_issue(&issues[ISSUE_2D_TP], op, which, spec);
        return;
    }
    unsigned dp_axes = 3u & ~r->tp_axes & ~r->cp_axes;
    if (st->mesh[0] <= 1) dp_axes &= ~1u;
    if (st->mesh[1] <= 1) dp_axes &= ~2u;
    char buf[LOOM_PLAN_SPEC_MAX];
    snprintf(buf, sizeof buf, "%s", spec);
    /* each operand separately: the batch rule is per tensor */
    char *save_op = NULL;
    for (char *operand = strtok_r(buf, ",", &save_op); operand;
         operand = strtok_r(NULL, ",", &save_op)) {
        bool has_b = false;
        unsigned b_axes = 0;
        char *save_tok = NULL;
        for (char *tok = strtok_r(operand, " ", &save_tok); tok;
             tok = strtok_r(NULL, " ", &save_tok)) {
            char *at = strchr(tok, '@');
            char dim[LOOM_DIM_NAME_MAX + 8];
            snprintf(dim, sizeof dim, "%.*s", at ? (int)(at - tok) : (int)strlen(tok), tok);
            if (strcmp(dim, "b") == 0) has_b = true;
            unsigned axes = spec_axes(tok, NULL, st->mesh);
            if (!axes) continue;
            if (strcmp(dim, "b") == 0) b_axes = axes;
            /* each axis the dim is split over must allow it in its role */
            if ((axes & dp_axes) && !in_list(dim, dp_dims))
                note_issue(&issues[ISSUE_DP_AXIS], op, which, tok);
            if ((axes & r->tp_axes) && !in_list(dim, tp_dims))
                note_issue(&issues[ISSUE_TP_AXIS], op, which, tok);
            if ((axes & r->cp_axes) && !in_list(dim, cp_dims))
                note_issue(&issues[ISSUE_CP_AXIS], op, which, tok);
        }
        /* every data-parallel axis must split the batch, or GPUs repeat work */
        if (has_b && (b_axes & dp_axes) != dp_axes)
            note_issue(&issues[ISSUE_BATCH], op, which, "b");
    }
}

/* Adds "what differs across stages" when the values are not all equal. */
static void uniform(const int64_t *v, int32_t n, const char *what, loom_export_list *obs)
{
    for (int32_t i = 1; i < n; i++)
        if (v[i] != v[0]) {
            loom_export_list_add(obs,
                                 "stages use different %s (stage 0: %lld, stage %d: %lld); the "
                                 "runtime sets one for the whole model",
                                 what, (long long)v[0], (int)i, (long long)v[i]);
            return;
        }
}

loom_status loom_export_from_plan(const loom_plan *p, loom_runtime_config *c,
                                  loom_export_list *obs, loom_error *err)
{
    loom_runtime_config_init(c);
    if (p->n_stages < 1 || !p->stages)
        return loom_error_set(err, LOOM_ERR_INVALID, "the plan has no stages");
    int64_t pp = p->pipeline_stages > 0 ? p->pipeline_stages : p->n_stages;
    int64_t v = p->virtual_stages > 0 ? p->virtual_stages : 1;
    if (pp * v != p->n_stages)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "the plan has %d stages, expected pipeline_stages %lld x "
                              "virtual_stages %lld",
                              (int)p->n_stages, (long long)pp, (long long)v);
    if (p->n_stages > LOOM_EXPORT_MAX_CHUNKS)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "the plan has %d stages, exporters handle "
                                                          "at most %d",
                              (int)p->n_stages, LOOM_EXPORT_MAX_CHUNKS);
    const loom_plan_stage *s0 = &p->stages[0];

    /* stage-wide choices must agree: the runtimes take them once */
    int32_t n = p->n_stages;
    stage_roles *roles = malloc((size_t)n * sizeof *roles);
    int64_t *val = malloc((size_t)n * sizeof *val);
    if (!roles || !val) {
        free(roles);
        free(val);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory");
    }
    for (int32_t i = 0; i < n; i++) roles[i] = roles_of(&p->stages[i]);
    for (int32_t i = 0; i < n; i++) val[i] = roles[i].tp;
    uniform(val, n, "tensor-parallel sizes", obs);
    for (int32_t i = 0; i < n; i++) val[i] = roles[i].cp;
    uniform(val, n, "context-parallel sizes", obs);
    for (int32_t i = 0; i < n; i++) val[i] = roles[i].dp_in;
    uniform(val, n, "in-stage data-parallel sizes (GPUs per stage / TP)", obs);
    for (int32_t i = 0; i < n; i++) val[i] = p->stages[i].sequence_parallel;
    uniform(val, n, "sequence-parallel settings (0 off, 1 on)", obs);
    for (int32_t i = 0; i < n; i++) val[i] = p->stages[i].tp_comm_overlap;
    uniform(val, n, "TP communication overlap settings (0 off, 1 on)", obs);
    for (int32_t i = 0; i < n; i++) val[i] = p->stages[i].recompute;
    uniform(val, n, "recompute settings (0 none, 1 selective, 2 full)", obs);
    for (int32_t i = 0; i < n; i++) val[i] = p->stages[i].recompute_layers;
    uniform(val, n, "recomputed blocks per pipeline rank (0 every one)", obs);
    for (int32_t i = 0; i < n; i++) val[i] = p->stages[i].zero;
    uniform(val, n, "ZeRO stages", obs);
    free(val);

    /* op by op: only Megatron-style sharding; expert degrees on the way */
    issue issues[ISSUE_COUNT];
    memset(issues, 0, sizeof issues);
    int64_t ep = 0, etp = 0;
    bool ep_mixed = false;
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_stage *s = &p->stages[i];
        for (int32_t k = 0; k < s->n_ops; k++) {
            const loom_plan_op *op = &s->ops[k];
            check_spec(op, "input", op->input, s, &roles[i], issues);
            check_spec(op, "weight", op->weight, s, &roles[i], issues);
            check_spec(op, "output", op->output, s, &roles[i], issues);
            int64_t e, t;
            if (op->weight[0] && expert_degrees(op->weight, s->mesh, &e, &t)) {
                /* an expert group spanning replicas (plan.h ep_span) */
                if (e > 1 && s->ep_span > 1) e *= s->ep_span;
                if (ep == 0) ep = e, etp = t;
                else if (e != ep || t != etp) ep_mixed = true;
            }
        }
    }
    static const char *const what[ISSUE_COUNT] = {
        [ISSUE_2D_TP] = "2-D tensor parallelism (weights split over both axes of a stage's mesh)",
        [ISSUE_DP_AXIS] = "a dim other than batch, tokens or experts split over the data-parallel "
                          "mesh axis (2-D tensor parallelism)",
        [ISSUE_TP_AXIS] = "a dim other than heads, MLP, vocabulary, experts or sequence split over "
                          "the tensor-parallel mesh axis (not a Megatron-style strategy)",
        [ISSUE_CP_AXIS] = "a dim other than the sequence or experts split over the "
                          "context-parallel mesh axis",
        [ISSUE_BATCH] = "an op computed on its stage's whole batch (not split over the "
                        "data-parallel mesh axis)",
    };
    for (int k = 0; k < ISSUE_COUNT; k++)
        if (issues[k].count)
            loom_export_list_add(obs, "%s in %lld op operand%s, e.g. %s", what[k],
                                 (long long)issues[k].count, issues[k].count == 1 ? "" : "s",
                                 issues[k].example);
    if (ep_mixed)
        loom_export_list_add(obs, "MoE layers use different expert-parallel layouts; the runtime "
                                  "sets one expert-parallel size");

    /* the configuration */
    loom_parallel *par = &c->par;
    c->model = p->model_info;
    snprintf(c->model_name, sizeof c->model_name, "%s", p->model);
    c->inference = p->mode == LOOM_PLAN_INFER;
    c->gpus_per_node = p->gpus_per_node > 0 ? p->gpus_per_node : 8;
    c->idle_gpus_per_node = p->idle_gpus_per_node;
    par->tp = roles[0].tp;
    par->pp = pp;
    par->vpp = v;
    int64_t dp_in = roles[0].dp_in;
    par->dp = (p->data_parallel > 0 ? p->data_parallel : 1) * dp_in;
    par->cp = roles[0].cp;
    par->ep = ep > 0 ? ep : 1;
    par->etp = etp > 0 && etp != par->tp ? etp : 0;
    /* the plan's micro-batch enters a stage whole and is split over its
     * in-stage data-parallel GPUs; a runtime's micro-batch is per GPU */
    int64_t b = p->micro_batch > 0 ? p->micro_batch : 1;
    if (b % dp_in)
        loom_export_list_add(obs, "the micro-batch of %lld sequences is split over %lld "
                                  "data-parallel GPUs per stage, not evenly",
                             (long long)b, (long long)dp_in);
    par->mbs = b % dp_in ? b : b / dp_in;
    par->gbs = p->gbs;
    par->seq = p->seq;
    par->sp = s0->sequence_parallel;
    par->tp_comm_overlap = s0->tp_comm_overlap;
    par->recompute = s0->recompute;
    par->recompute_layers = s0->recompute == LOOM_RECOMPUTE_FULL ? s0->recompute_layers : 0;
    par->zero = s0->zero;
    par->dist_opt = s0->zero == 1;
    par->dtype = p->dtype;
    par->flash = p->model_info.flash_attention;
    c->n_chunks = p->n_stages;
    for (int32_t i = 0; i < p->n_stages; i++)
        c->chunk_layers[i] = (int32_t)loom_plan_stage_blocks(p, &p->stages[i]);

    if (c->inference) {
        /* per replica: vLLM's data-parallel engines each take their share */
        c->max_num_seqs = p->gbs / par->dp > 0 ? p->gbs / par->dp : 1;
        c->max_model_len = p->seq;
        c->max_num_batched_tokens = p->seq > c->max_num_seqs ? p->seq : c->max_num_seqs;
        /* vLLM takes this fraction of HBM and fills what the weights and
         * activations leave with KV cache: at least what the plan needs, with
         * 2% headroom, and never below vLLM's default 0.9 */
        if (p->gpu_memory_bytes > 0 && p->memory_per_gpu_bytes > 0) {
            double share = (double)p->memory_per_gpu_bytes / (double)p->gpu_memory_bytes;
            double need = ceil(100.0 * share) / 100.0 + 0.02;
            c->gpu_memory_utilization = need > 0.9 ? (need < 0.98 ? need : 0.98) : 0.9;
        }
        c->predicted_step_s = p->latency_per_token_s > 0 ? p->latency_per_token_s : p->step_time_s;
    } else {
        c->predicted_step_s = p->step_time_s;
    }
    c->predicted_memory_bytes = p->memory_per_gpu_bytes;
    free(roles);
    return loom_runtime_config_normalize(c, err);
}
