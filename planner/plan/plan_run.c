/*
 * plan_run.c — `loom plan` without the command line (plan_run.h): load,
 * search, assemble, validate.
 *
 * Assembly turns a search configuration into a plan. From each stage's
 * intra-op result come the per-op strategies and specs; from its specs the
 * Megatron-style summary exporters need: the tensor-parallel size is the
 * product of the mesh axes any weight is split over (Megatron's TP splits
 * weights; batch-only axes are data parallel), the in-stage data-parallel
 * size the rest of the stage's GPUs, and sequence parallelism means a norm's
 * input is split along s on such a tensor-parallel axis.
 *
 * Predictions (Korthikanti et al. 2022 for model FLOPs, as eval.c):
 *   tokens/s         = gbs · seq / step (training), sequences / latency (inference)
 *   TFLOP/s per GPU  = model FLOPs per step / (step · GPUs used)
 *   MFU              = that / the GPU's dense peak in the plan's dtype
 *   cost per step    = step · GPUs used · price per GPU-hour / 3600
 *   energy per step  = step · GPUs used · power per GPU (full power throughout)
 * Per token: divided by the tokens a step processes.
 *
 * Units: seconds, bytes, FLOP/s, US dollars, joules.
 */
#include "planner/plan/plan_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/memory.h"
#include "costs/profile_db.h"

void loom_plan_request_init(loom_plan_request *r)
{
    memset(r, 0, sizeof *r);
    loom_problem_init(&r->problem);
    r->problem.gbs = 256;
    r->problem.seq = 4096;
    loom_search_options_init(&r->search);
    r->memory_headroom = -1;   /* the cluster's */
}

/* ---- specs -------------------------------------------------------------------- */

/* The plan's text of the specs of operands of kind `which` (plan_json.c). */
static void join_specs(const loom_intra_result *r, const loom_graph *g, int32_t op,
                       loom_operand which, int n, char *dst, size_t cap)
{
    loom_spec specs[LOOM_MAX_IO];
    const loom_tensor *ts[LOOM_MAX_IO];
    int m = 0;
    for (int k = 0; k < n && m < LOOM_MAX_IO; k++)
        if (loom_intra_op_spec(r, g, op, which, k, &specs[m]))
            ts[m++] = loom_graph_tensor(g, loom_intra_operand(g, op, which, k));
    loom_plan_specs_format(specs, ts, m, dst, cap);
}

/* Axes the dims named `dim` (NULL: any dim) of operand k's spec use (0
 * when it has none). */
static unsigned spec_axes(const loom_intra_result *r, const loom_graph *g, int32_t op,
                          loom_operand which, int k, const char *dim)
{
    loom_spec sp;
    if (!loom_intra_op_spec(r, g, op, which, k, &sp)) return 0;
    return loom_spec_dim_axes(&sp, loom_graph_tensor(g, loom_intra_operand(g, op, which, k)), dim);
}

/* Fills the stage's ops, its tensor/data-parallel sizes and whether its
 * norms run sequence-parallel; *has_norm says whether it has any norm to
 * tell by (an embedding-only stage has none). */
static loom_status fill_ops(const loom_search_stage *cs, const loom_stage_eval *se,
                            const loom_graph *g, loom_plan_stage *ps, bool *has_norm,
                            loom_error *err)
{
    int32_t first, count, last_first, last_count;
    loom_graph_layer_ops(g, cs->first_layer, &first, &count);
    loom_graph_layer_ops(g, cs->last_layer, &last_first, &last_count);
    int32_t n = last_first + last_count - first;
    loom_status st = loom_plan_stage_set_ops(ps, n, err);
    if (st) return st;
    unsigned tp_axes = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = first + i;
        const loom_op *op = loom_graph_op(g, id);
        loom_plan_op *po = &ps->ops[i];
        snprintf(po->name, sizeof po->name, "%s", op->name);
        po->layer = op->layer;
        const char *strat = loom_intra_op_strategy(&se->intra, g, id);
        snprintf(po->strategy, sizeof po->strategy, "%s", strat ? strat : "replicated");
        join_specs(&se->intra, g, id, LOOM_OPERAND_INPUT, op->n_in, po->input, sizeof po->input);
        join_specs(&se->intra, g, id, LOOM_OPERAND_WEIGHT, op->n_w, po->weight, sizeof po->weight);
        join_specs(&se->intra, g, id, LOOM_OPERAND_OUTPUT, op->n_out, po->output,
                   sizeof po->output);
        /* an axis splitting the experts (dim e) is expert, not tensor, parallel */
        for (int k = 0; k < op->n_w; k++)
            tp_axes |= spec_axes(&se->intra, g, id, LOOM_OPERAND_WEIGHT, k, NULL) &
                       ~spec_axes(&se->intra, g, id, LOOM_OPERAND_WEIGHT, k, "e");
    }
    int64_t sizes[2] = {cs->mesh.n0, cs->mesh.n1};
    ps->tensor_parallel = (tp_axes & 1 ? sizes[0] : 1) * (tp_axes & 2 ? sizes[1] : 1);
    ps->data_parallel = ps->n_gpus / ps->tensor_parallel;
    ps->sequence_parallel = false;
    *has_norm = false;
    for (int32_t i = 0; i < n && tp_axes; i++) {
        const loom_op *op = loom_graph_op(g, first + i);
        if (op->kind != LOOM_OP_NORM) continue;
        *has_norm = true;
        unsigned s_axes = spec_axes(&se->intra, g, first + i, LOOM_OPERAND_INPUT, 0, "s");
        if (s_axes & tp_axes) ps->sequence_parallel = true;
    }
    return LOOM_OK;
}

loom_status loom_plan_from_config(loom_search *s, const loom_graph *g,
                                  const loom_search_config *cfg,
                                  const loom_search_eval_result *ev,
                                  const loom_plan_request *req, loom_plan **out,
                                  loom_error *err)
{
    *out = NULL;
    loom_plan *p;
    loom_status st = loom_plan_create(&p, err);
    if (st) return st;
    const loom_cluster *c = loom_search_cluster(s, cfg);   /* or its tile view */
    bool train = !req->problem.inference;

    snprintf(p->model, sizeof p->model, "%s",
             req->model_label ? req->model_label : loom_model_source_name(loom_search_problem(s)->model));
    snprintf(p->cluster, sizeof p->cluster, "%s", c->name);
    p->mode = train ? LOOM_PLAN_TRAIN : LOOM_PLAN_INFER;
    p->gbs = req->problem.gbs;
    /* a loom graph file brings its own sequence length */
    p->seq = train && loom_graph_info_c(g)->seq > 0 ? loom_graph_info_c(g)->seq : req->problem.seq;
    p->dtype = req->problem.dtype;
    p->objective = req->problem.objective;
    snprintf(p->space, sizeof p->space, "%s", req->search.megatron_only ? "megatron" : "full");
    p->latency_bound_s = req->problem.latency_bound_s;

    p->model_info = *loom_graph_info_c(g);
    loom_graph_totals tot;
    loom_graph_totals_get(g, &tot);
    p->model_params = tot.params;
    p->layer_count = loom_graph_layer_count(g);
    p->nodes = c->nodes;
    p->gpus_per_node = c->gpus_per_node;
    p->idle_gpus_per_node = c->idle_per_node;
    snprintf(p->gpu, sizeof p->gpu, "%s", c->gpu.name);
    p->gpu_memory_bytes = c->gpu.hbm_bytes;
    p->gpu_peak_flops = loom_device_peak_flops(&c->gpu, req->problem.dtype);
    p->price_per_gpu_hour_usd = c->price_per_gpu_hour_usd;
    p->power_w = c->power_w;

    snprintf(p->schedule_kind, sizeof p->schedule_kind, "%s",
             !train ? "inference" : cfg->vpp > 1 ? "interleaved" : "1f1b");
    p->micro_batch = cfg->mbs;
    p->micro_batches = cfg->micro_batches;
    p->virtual_stages = cfg->vpp;
    p->pipeline_stages = cfg->pp;
    p->data_parallel = cfg->dp;
    p->gpus_per_replica = cfg->gpus_per_replica;
    /* inference with fewer concurrent sequences than asked (throughput) */
    if (!train) p->gbs = cfg->sequences;

    if ((st = loom_plan_set_stages(p, cfg->n_stages, err))) goto fail;
    bool has_norm[LOOM_STAGE_MAX];
    int64_t g_node = c->gpus_per_node;
    for (int32_t i = 0; i < cfg->n_stages; i++) {
        const loom_search_stage *cs = &cfg->stages[i];
        const loom_stage_eval *se = &ev->stages[i];
        loom_plan_stage *ps = &p->stages[i];
        ps->group = cs->group;
        ps->first_layer = cs->first_layer;
        ps->last_layer = cs->last_layer;
        ps->submesh_nodes = cs->submesh.nodes;
        ps->submesh_gpus = cs->submesh.gpus;
        ps->mesh[0] = cs->mesh.n0;
        ps->mesh[1] = cs->mesh.n1;
        if ((st = loom_plan_stage_set_gpus(ps, loom_submesh_devices(cs->submesh), err))) goto fail;
        int64_t k = 0;
        for (int64_t n = 0; n < cs->submesh.nodes; n++)
            for (int64_t q = 0; q < cs->submesh.gpus; q++) ps->gpus[k++] = cs->first_gpu + n * g_node + q;
        ps->replica_stride = cs->replica_stride;
        ps->ep_span = cs->megatron && cs->ep_span > 1 ? cs->ep_span : 1;
        ps->recompute = cs->recompute;
        ps->recompute_layers = cs->recompute == LOOM_RECOMPUTE_FULL ? cs->recompute_blocks : 0;
        ps->zero = cfg->zero;
        ps->in_flight = se->in_flight;
        ps->compute_s = se->compute_s;
        ps->comm_s = se->comm_s;
        ps->grad_sync_s = se->grad_sync_s;
        ps->time_s = se->time_s;
        ps->memory = (loom_plan_memory){se->mem_params, se->mem_grads, se->mem_optimizer,
                                        se->mem_activations, se->mem_kv, se->mem_other, 0};
        loom_plan_memory_sum(&ps->memory);
        if ((st = fill_ops(cs, se, g, ps, &has_norm[i], err))) goto fail;
        /* TP, CP, DP and EP as every reader of the plan names them */
        loom_plan_roles ro;
        loom_plan_stage_roles(ps, &ro);
        ps->tensor_parallel = ro.tp;
        ps->context_parallel = ro.cp;
        ps->data_parallel = ro.dp;
        ps->expert_parallel = ro.ep;
    }
    /* A stage without norms (the embedding alone) has no sequence-parallel
     * region of its own: it takes its neighbour's setting, as Megatron-LM
     * sets SP once for the whole model. */
    for (int32_t i = 0; i < cfg->n_stages; i++) {
        if (has_norm[i]) continue;
        for (int32_t d = 1; d < cfg->n_stages; d++) {
            int32_t j = i + d < cfg->n_stages && has_norm[i + d] ? i + d
                        : i - d >= 0 && has_norm[i - d]        ? i - d
                                                                : -1;
            if (j < 0) continue;
            p->stages[i].sequence_parallel =
                p->stages[j].sequence_parallel && p->stages[i].tensor_parallel > 1;
            break;
        }
    }
    /* TP communication overlap as the stage was priced; Megatron-LM runs
     * it on sequence-parallel tensor-parallel groups only */
    for (int32_t i = 0; i < cfg->n_stages; i++) {
        loom_plan_stage *ps = &p->stages[i];
        ps->tp_comm_overlap = cfg->stages[i].tp_comm_overlap && ps->sequence_parallel &&
                              ps->tensor_parallel > 1;
    }

    p->step_time_s = ev->step_s;
    p->tokens_per_s = ev->tokens_per_s;
    p->latency_per_token_s = train ? 0 : ev->latency_s;
    double gpu_s = ev->step_s * (double)ev->gpus_used;
    p->model_tflops_per_gpu = gpu_s > 0 ? ev->model_flops / gpu_s / 1e12 : 0;
    p->mfu = gpu_s > 0 && p->gpu_peak_flops > 0 ? ev->model_flops / gpu_s / p->gpu_peak_flops : 0;
    p->memory_per_gpu_bytes = ev->memory_per_gpu_bytes;
    p->breakdown = ev->breakdown;
    double tokens = train ? (double)cfg->sequences * (double)req->problem.seq : (double)cfg->sequences;
    if (c->price_per_gpu_hour_usd > 0) {
        p->cost_per_step_usd = gpu_s * c->price_per_gpu_hour_usd / 3600.0;
        p->cost_per_mtoken_usd = p->cost_per_step_usd / tokens * 1e6;
    }
    if (c->power_w > 0) {
        p->energy_per_step_j = gpu_s * c->power_w;
        p->energy_per_token_j = p->energy_per_step_j / tokens;
    }
    p->measured_share = ev->measured_share;
    if ((st = loom_plan_check(p, "planner", err))) goto fail;
    *out = p;
    return LOOM_OK;
fail:
    loom_plan_destroy(p);
    return st;
}

/* ---- the run -------------------------------------------------------------------- */

/* Another configuration the search found (the best of the other NVLink-
 * domain layout, or on the other side of 8 GPUs per group: stage_search.h),
 * as the plan's account of the domain quotes it: its GPUs, step and largest
 * tensor- and expert-parallel groups, read from the plan it assembles into. */
static loom_status alternative(loom_search *s, const loom_search_config *cfg,
                               const loom_plan_request *req, loom_plan_alternative *out,
                               loom_error *err)
{
    const loom_graph *g;
    loom_search_eval_result ev;
    loom_plan *alt = NULL;
    loom_status st = loom_search_graph(s, cfg->mbs, &g, err);
    if (st) return st;
    if ((st = loom_search_eval(s, g, cfg, &ev, err))) return st;
    st = loom_plan_from_config(s, g, cfg, &ev, req, &alt, err);
    loom_search_eval_free(&ev);
    if (st) return st;
    *out = (loom_plan_alternative){alt->data_parallel * alt->gpus_per_replica, alt->step_time_s,
                                   1, 1};
    for (int32_t i = 0; i < alt->n_stages; i++) {
        const loom_plan_stage *x = &alt->stages[i];
        if (x->tensor_parallel > out->tensor_parallel) out->tensor_parallel = x->tensor_parallel;
        if (x->expert_parallel > out->expert_parallel) out->expert_parallel = x->expert_parallel;
    }
    loom_plan_destroy(alt);
    return LOOM_OK;
}

static loom_status check_request(const loom_plan_request *r, loom_error *err)
{
    if ((!r->model_path && !r->problem.model) || !r->cluster)
        return loom_error_set(err, LOOM_ERR_INVALID, "plan: a model and a cluster are needed");
    if (r->problem.gbs < 1 || r->problem.seq < 1)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "plan: batch (%lld) and sequence length (%lld) must be >= 1",
                              (long long)r->problem.gbs, (long long)r->problem.seq);
    bool infer_obj = r->problem.objective == LOOM_OBJ_LATENCY || r->problem.objective == LOOM_OBJ_THROUGHPUT;
    if (r->problem.inference != infer_obj && r->problem.objective != LOOM_OBJ_TIME)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "plan: objective %s is for %s, not %s",
                              loom_problem_objective_name(r->problem.objective),
                              infer_obj ? "inference" : "training",
                              r->problem.inference ? "inference" : "training");
    return LOOM_OK;
}

loom_status loom_plan_run(const loom_plan_request *req, loom_plan **out, loom_plan_diag *diag,
                          loom_error *err)
{
    *out = NULL;
    loom_plan_diag dummy;
    if (!diag) diag = &dummy;
    memset(diag, 0, sizeof *diag);
    loom_status st = check_request(req, err);
    if (st) return st;
    loom_cluster c;
    if ((st = loom_cluster_load(req->cluster, &c, err))) return st;
    if (req->memory_headroom >= 0) c.memory_headroom = req->memory_headroom;
    diag->gpu_memory_bytes = c.gpu.hbm_bytes;
    diag->gpus = loom_cluster_gpus(&c);
    diag->gpus_per_node = c.gpus_per_node;
    snprintf(diag->gpu, sizeof diag->gpu, "%s", c.gpu.name);
    if (!(loom_device_peak_flops(&c.gpu, req->problem.dtype) > 0))
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "%s has no %s tensor cores (--dtype %s)",
                              c.gpu.name, loom_dtype_name(req->problem.dtype), loom_dtype_name(req->problem.dtype));
    loom_calib cal, *calp = NULL;
    if (req->calib_path) {
        if ((st = loom_calib_load(req->calib_path, &cal, err))) return st;
        calp = &cal;
    }
    loom_cost_model *cm = NULL;
    loom_search *s = NULL;
    loom_model_source *opened = NULL;
    const loom_model_source *src = req->problem.model;
    if ((st = loom_cost_model_create(&c, calp, req->profile_db_path, &cm, err))) return st;
    if (!src) {   /* the one read of the model file */
        if ((st = loom_model_open(req->model_path, &opened, err))) goto done;
        src = opened;
    }

    loom_problem pb = req->problem;
    pb.model = src;
    pb.cm = cm;
    loom_search_options so = req->search;
    so.collect_profile_keys = req->profile_requests_path != NULL;
    if ((st = loom_search_create(&pb, &so, &s, err))) goto done;
    const loom_search_result *res;
    st = loom_search_run(s, &res, err);
    diag->min_memory_bytes = res->min_memory_bytes;
    if (st) goto done;
    diag->n_top = res->n_top;
    memcpy(diag->top, res->top, sizeof *res->top * (size_t)res->n_top);
    if ((st = loom_plan_from_config(s, res->graph, &res->best, &res->eval, req, out, err)))
        goto done;
    if (req->profile_requests_path) {   /* only once the plan stands */
        const loom_profile_key *keys;
        int32_t nk;
        loom_search_profile_keys(s, &keys, &nk);
        if ((st = loom_profile_requests_write(req->profile_requests_path,
                                              req->model_label ? req->model_label
                                                               : loom_model_source_name(src),
                                              keys, nk, err))) {
            loom_plan_destroy(*out);
            *out = NULL;
            goto done;
        }
    }
    loom_plan *p = *out;
    if ((res->have_other_groups &&
         (st = alternative(s, &res->other_groups, req, &p->nvlink_groups_alt, err))) ||
        (res->have_other && (st = alternative(s, &res->other, req, &p->nvlink_layout_alt, err)))) {
        loom_plan_destroy(*out);
        *out = NULL;
        goto done;
    }
    snprintf(p->algorithm, sizeof p->algorithm, "alpa");
    p->search_time_s = res->time_s;
    p->ilp_solves = res->ilp_solves;
    p->dp_runs = res->dp_runs;
    p->configs_evaluated = res->configs_evaluated;
    snprintf(p->search_status, sizeof p->search_status, "%s",
             res->stopped ? "stopped" : res->timed_out ? "time-limit" : "complete");
done:
    loom_search_destroy(s);
    loom_model_source_destroy(opened);
    loom_cost_model_destroy(cm);
    return st;
}
