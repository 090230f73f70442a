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
 *   the tensor-parallel axis is the one with the stage's tensor_parallel GPUs
 *     (none: weights are split over both axes, 2-D tensor parallelism);
 *   the data-parallel axis may split only   b (batch), c (tokens per expert),
 *                                           e (experts)
 *   the tensor-parallel axis only           heads, kvh, f, v, e, s
 *   both at once only                       b, e (experts over all ranks)
 *   every activation with a b dim splits b over the data-parallel axis
 *
 * (the whitelists are those of the solver's megatron_only space, solver/intra.h,
 * plus expert parallelism over data-parallel ranks, which Megatron's EP is).
 *
 * Degrees: TP = the stages' tensor_parallel; DP = replicas of the pipeline ×
 * the stages' in-stage replicas; the runtime's micro-batch (per GPU) is the
 * plan's (per replica) over the in-stage replicas; EP and expert TP from the axes the expert
 * weights split e and f over; CP = 1 (a plan splits no sequence across a
 * data-parallel axis without it being an obstacle above).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/export.h"

/* One kind of non-Megatron sharding: how many ops, and the first one. */
typedef struct {
    int64_t count;
    char example[200];
} issue;

enum { ISSUE_2D_TP, ISSUE_BOTH_AXES, ISSUE_DP_AXIS, ISSUE_TP_AXIS, ISSUE_BATCH, ISSUE_COUNT };

static bool in_list(const char *dim, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(dim, *list) == 0) return true;
    return false;
}

/* What each axis of a Megatron-style stage may split (solver/intra.h's
 * megatron_only space, plus experts over data-parallel ranks = Megatron EP). */
static const char *const dp_dims[] = {"b", "c", "e", NULL};
static const char *const tp_dims[] = {"heads", "kvh", "f", "v", "e", "s", NULL};
static const char *const both_dims[] = {"b", "e", NULL};

static void note_issue(issue *is, const loom_plan_op *op, const char *which, const char *tok)
{
    if (is->count++ == 0)
        snprintf(is->example, sizeof is->example, "%s (%s %s)", op->name, which, tok);
}

/* The roles of a stage's two mesh axes: the tensor-parallel one has the
 * stage's tensor_parallel GPUs. Returns false when neither axis alone does
 * (weights split over both: 2-D tensor parallelism). */
static bool axis_roles(const loom_plan_stage *s, int *dp_axis, int *tp_axis)
{
    if (s->mesh[1] == s->tensor_parallel) *tp_axis = 1, *dp_axis = 0;
    else if (s->mesh[0] == s->tensor_parallel) *tp_axis = 0, *dp_axis = 1;
    else return false;
    return true;
}

/* Checks one operand spec ("b@0 s h@1, b@0 s h@1") of op in stage s. */
static void check_spec(const loom_plan_op *op, const char *which, const char *spec,
                       const loom_plan_stage *st, issue *issues)
{
    int dp_axis, tp_axis;
    if (!axis_roles(st, &dp_axis, &tp_axis)) {
        if (strchr(spec, '@')) note_issue(&issues[ISSUE_2D_TP], op, which, spec);
        return;
    }
    char buf[LOOM_PLAN_SPEC_MAX];
    snprintf(buf, sizeof buf, "%s", spec);
    /* each operand separately: the batch rule is per tensor */
    char *save_op = NULL;
    for (char *operand = strtok_r(buf, ",", &save_op); operand;
         operand = strtok_r(NULL, ",", &save_op)) {
        bool has_b = false, b_split = false;
        char *save_tok = NULL;
        for (char *tok = strtok_r(operand, " ", &save_tok); tok; tok = strtok_r(NULL, " ", &save_tok)) {
            char *at = strchr(tok, '@');
            char dim[LOOM_DIM_NAME_MAX + 8];
            snprintf(dim, sizeof dim, "%.*s", at ? (int)(at - tok) : (int)strlen(tok), tok);
            if (strcmp(dim, "b") == 0) has_b = true;
            if (!at) continue;
            char dc = (char)('0' + dp_axis), tc = (char)('0' + tp_axis);
            bool on_dp = strchr(at + 1, dc) && st->mesh[dp_axis] > 1;
            bool on_tp = strchr(at + 1, tc) && st->mesh[tp_axis] > 1;
            if (on_dp && strcmp(dim, "b") == 0) b_split = true;
            if (on_dp && on_tp) {
                if (!in_list(dim, both_dims)) note_issue(&issues[ISSUE_BOTH_AXES], op, which, tok);
            } else if (on_dp && !in_list(dim, dp_dims)) {
                note_issue(&issues[ISSUE_DP_AXIS], op, which, tok);
            } else if (on_tp && !in_list(dim, tp_dims)) {
                note_issue(&issues[ISSUE_TP_AXIS], op, which, tok);
            }
        }
        if (has_b && !b_split && st->mesh[dp_axis] > 1)
            note_issue(&issues[ISSUE_BATCH], op, which, "b");
    }
}

/* Product of the mesh axes named after '@' in token "e@01". */
static int64_t axes_size(const char *at, const int64_t mesh[2])
{
    int64_t n = 1;
    if (strchr(at, '0')) n *= mesh[0];
    if (strchr(at, '1')) n *= mesh[1];
    return n;
}

/* Expert parallel and expert TP degrees of an expert weight spec
 * ("e@0 h f@1"): the axes its e and f dims split over. Returns false when
 * the spec has no e dim (not an expert weight). */
static bool expert_degrees(const char *spec, const int64_t mesh[2], int64_t *ep, int64_t *etp)
{
    bool has_e = false;
    *ep = *etp = 1;
    char buf[LOOM_PLAN_SPEC_MAX];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
        char *at = strchr(tok, '@');
        size_t len = at ? (size_t)(at - tok) : strlen(tok);
        if (len == 1 && tok[0] == 'e') {
            has_e = true;
            if (at) *ep = axes_size(at + 1, mesh);
        } else if (len == 1 && tok[0] == 'f' && at) {
            *etp = axes_size(at + 1, mesh);
        }
    }
    return has_e;
}

/* Adds "what differs across stages" when stage values are not all equal. */
static bool uniform_i64(const loom_plan *p, int64_t (*get)(const loom_plan_stage *), const char *what,
                        loom_export_list *obs)
{
    for (int32_t i = 1; i < p->n_stages; i++)
        if (get(&p->stages[i]) != get(&p->stages[0])) {
            loom_export_list_add(obs, "stages use different %s (stage 0: %lld, stage %d: %lld); the "
                                      "runtime sets one for the whole model",
                                 what, (long long)get(&p->stages[0]), (int)i,
                                 (long long)get(&p->stages[i]));
            return false;
        }
    return true;
}

static int64_t get_tp(const loom_plan_stage *s) { return s->tensor_parallel; }
static int64_t get_dp(const loom_plan_stage *s) { return s->data_parallel; }
static int64_t get_sp(const loom_plan_stage *s) { return s->sequence_parallel; }
static int64_t get_rc(const loom_plan_stage *s) { return s->recompute; }
static int64_t get_zero(const loom_plan_stage *s) { return s->zero; }

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
    uniform_i64(p, get_tp, "tensor-parallel sizes", obs);
    uniform_i64(p, get_dp, "in-stage data-parallel sizes (GPUs per stage / TP)", obs);
    uniform_i64(p, get_sp, "sequence-parallel settings (0 off, 1 on)", obs);
    uniform_i64(p, get_rc, "recompute settings (0 none, 1 selective, 2 full)", obs);
    uniform_i64(p, get_zero, "ZeRO stages", obs);

    /* op by op: only Megatron-style sharding; expert degrees on the way */
    issue issues[ISSUE_COUNT];
    memset(issues, 0, sizeof issues);
    int64_t ep = 0, etp = 0;
    bool ep_mixed = false;
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_stage *s = &p->stages[i];
        for (int32_t k = 0; k < s->n_ops; k++) {
            const loom_plan_op *op = &s->ops[k];
            check_spec(op, "input", op->input, s, issues);
            check_spec(op, "weight", op->weight, s, issues);
            check_spec(op, "output", op->output, s, issues);
            int64_t e, t;
            if (op->weight[0] && expert_degrees(op->weight, s->mesh, &e, &t)) {
                if (ep == 0) ep = e, etp = t;
                else if (e != ep || t != etp) ep_mixed = true;
            }
        }
    }
    static const char *const what[ISSUE_COUNT] = {
        [ISSUE_2D_TP] = "2-D tensor parallelism (weights split over both axes of a stage's mesh)",
        [ISSUE_BOTH_AXES] = "2-D sharding (one dim split over both mesh axes)",
        [ISSUE_DP_AXIS] = "a dim other than batch, tokens or experts split over the data-parallel "
                          "mesh axis (2-D tensor parallelism)",
        [ISSUE_TP_AXIS] = "a dim other than heads, MLP, vocabulary, experts or sequence split over "
                          "the tensor-parallel mesh axis (not a Megatron-style strategy)",
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
    par->tp = s0->tensor_parallel > 0 ? s0->tensor_parallel : 1;
    par->pp = pp;
    par->vpp = v;
    par->dp = (p->data_parallel > 0 ? p->data_parallel : 1) *
              (s0->data_parallel > 0 ? s0->data_parallel : 1);
    par->cp = 1;
    par->ep = ep > 0 ? ep : 1;
    par->etp = etp > 0 && etp != par->tp ? etp : 0;
    /* the plan's micro-batch enters a stage whole and is split over its
     * in-stage data-parallel GPUs; a runtime's micro-batch is per GPU */
    int64_t dp_in = s0->data_parallel > 0 ? s0->data_parallel : 1;
    int64_t b = p->micro_batch > 0 ? p->micro_batch : 1;
    if (b % dp_in)
        loom_export_list_add(obs, "the micro-batch of %lld sequences is split over %lld "
                                  "data-parallel GPUs per stage, not evenly",
                             (long long)b, (long long)dp_in);
    par->mbs = b % dp_in ? b : b / dp_in;
    par->gbs = p->gbs;
    par->seq = p->seq;
    par->sp = s0->sequence_parallel;
    par->recompute = s0->recompute;
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
            double need = ceil(100.0 * (double)p->memory_per_gpu_bytes / (double)p->gpu_memory_bytes) / 100.0 + 0.02;
            c->gpu_memory_utilization = need > 0.9 ? (need < 0.98 ? need : 0.98) : 0.9;
        }
        c->predicted_step_s = p->latency_per_token_s > 0 ? p->latency_per_token_s : p->step_time_s;
    } else {
        c->predicted_step_s = p->step_time_s;
    }
    c->predicted_memory_bytes = p->memory_per_gpu_bytes;
    return loom_runtime_config_normalize(c, err);
}
