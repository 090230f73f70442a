/*
 * serve_json.c — a serving plan as JSON (loom_serve_plan_to_json,
 * serve_plan.h): a loom-plan/1 document whose inputs say mode "serve" and
 * whose `serving` section (format "loom-serving/1") holds the workload,
 * the SLOs, the chosen deployment's pools and KV transfer, its predicted
 * figures, the deployments compared and the Pareto fronts. The members and
 * their units are documented in docs/plan-format.md, "Serving plans".
 * Deterministic: same inputs, same bytes (search time 0 with no_timings).
 */
#include <cJSON.h>
#include <stdlib.h>

#include "base/json.h"
#include "graph/model.h"
#include "planner/serve/serve_plan.h"

#define LOOM_SERVING_FORMAT "loom-serving/1"

static void num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }
static void str(cJSON *o, const char *k, const char *v) { cJSON_AddStringToObject(o, k, v); }

static void dist(cJSON *o, const char *k, const loom_serve_dist *d)
{
    cJSON *x = cJSON_AddObjectToObject(o, k);
    num(x, "mean", d->mean);
    num(x, "p50", d->p50);
    num(x, "p90", d->p90);
    num(x, "p99", d->p99);
}

static const char *len_dist_name(loom_len_dist d)
{
    return d == LOOM_LEN_UNIFORM ? "uniform" : d == LOOM_LEN_LOGNORMAL ? "lognormal" : "fixed";
}

static void pool(cJSON *arr, const loom_serve_plan *p, const char *role, int32_t shape,
                 int64_t count)
{
    const loom_serve_cand *c = &p->space.cand[shape];
    const loom_serve_memory *m = loom_serve_model_memory(c->m);
    const loom_serve_engine *e = loom_serve_model_engine(c->m);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, o);
    str(o, "role", role);
    num(o, "instances", (double)count);
    num(o, "tp", (double)c->inst.tp);
    num(o, "pp", (double)c->inst.pp);
    num(o, "ep", (double)c->inst.ep);
    num(o, "attention_dp", (double)c->inst.attn_dp);
    num(o, "gpus_per_instance", (double)c->gpus);
    cJSON *eng = cJSON_AddObjectToObject(o, "engine");
    num(eng, "max_num_seqs", (double)e->max_num_seqs);
    num(eng, "max_batched_tokens", (double)e->max_batched_tokens);
    num(eng, "block_size", (double)e->block_size);
    num(eng, "mem_fraction", e->mem_fraction);
    num(o, "kv_capacity_tokens", (double)m->kv_capacity_tokens);
    num(o, "max_concurrency", (double)m->max_concurrency);
    cJSON *mb = cJSON_AddObjectToObject(o, "memory_bytes");
    num(mb, "weights", (double)m->weights_bytes);
    num(mb, "kv_cache", (double)m->kv_bytes);
    num(mb, "activations", (double)m->activation_bytes);
    num(mb, "cuda_graphs", (double)m->cuda_graph_bytes);
    num(mb, "communication", (double)m->comm_bytes);
    num(mb, "cuda_context", (double)m->context_bytes);
    num(mb, "total", (double)m->total_bytes);
}

static cJSON *deployment(const loom_serve_plan *p, const loom_serve_deploy *d)
{
    cJSON *o = cJSON_CreateObject();
    str(o, "kind", d->disagg ? "disaggregated" : "aggregated");
    num(o, "gpus", (double)d->gpus);
    cJSON *pools = cJSON_AddArrayToObject(o, "pools");
    if (d->disagg) {
        pool(pools, p, "prefill", d->prefill, d->n_prefill);
        pool(pools, p, "decode", d->decode, d->n_decode);
        cJSON *x = cJSON_AddObjectToObject(o, "kv_transfer");
        str(x, "link", d->kv_nvlink ? "nvlink" : "nic");
        num(x, "bytes_per_request", d->kv_bytes);
        num(x, "bandwidth_Bps", d->kv_link_Bps);
        num(x, "time_s", d->kv_transfer_s);
    } else {
        pool(pools, p, "both", d->agg, d->replicas);
    }
    return o;
}

static cJSON *point(const loom_serve_point *pt, double gpus)
{
    cJSON *o = cJSON_CreateObject();
    str(o, "source", pt->simulated ? "simulator" : "steady-state");
    num(o, "requests_per_s", pt->rate_rps);
    if (pt->concurrency > 0) num(o, "concurrency", (double)pt->concurrency);
    dist(o, "ttft_s", &pt->ttft);
    dist(o, "tpot_s", &pt->tpot);
    dist(o, "e2e_s", &pt->e2e);
    num(o, "output_tokens_per_s", pt->output_tokens_per_s);
    num(o, "output_tokens_per_s_per_gpu", pt->output_tokens_per_s / gpus);
    num(o, "output_tokens_per_s_per_user", pt->tpot.mean > 0 ? 1 / pt->tpot.mean : 0);
    num(o, "slo_attainment", pt->attainment);
    cJSON_AddBoolToObject(o, "saturated", pt->saturated);
    return o;
}

static cJSON *front(const loom_serve_plan *p, int kind)
{
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; i < p->n_front[kind]; i++) {
        const loom_serve_front_point *q = &p->front[kind][i];
        const loom_serve_inst *in = &p->space.cand[q->shape].inst;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(a, o);
        num(o, "tokens_per_s_per_gpu", q->tokens_per_s_gpu);
        num(o, "tokens_per_s_per_user", q->tokens_per_s_user);
        num(o, "ttft_s", q->ttft_s);
        num(o, "concurrency", (double)q->concurrency);
        double v[4] = {(double)in->tp, (double)in->pp, (double)in->ep, (double)in->attn_dp};
        cJSON_AddItemToObject(o, kind ? "decode" : "instance", cJSON_CreateDoubleArray(v, 4));
        if (q->prefill_shape >= 0) {
            const loom_serve_inst *pi = &p->space.cand[q->prefill_shape].inst;
            double w[4] = {(double)pi->tp, (double)pi->pp, (double)pi->ep, (double)pi->attn_dp};
            cJSON_AddItemToObject(o, "prefill", cJSON_CreateDoubleArray(w, 4));
            num(o, "prefill_per_decode", q->prefill_per_decode);
        }
    }
    return a;
}

char *loom_serve_plan_to_json(const loom_serve_plan *p, const char *model_label, bool no_timings)
{
    const loom_serve_plan_request *r = &p->req;
    const loom_cluster *c = r->space.cluster;
    const loom_model_info *mi = loom_graph_info_c(r->space.graph);
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    str(root, "format", "loom-plan/1");
    cJSON *in = cJSON_AddObjectToObject(root, "inputs");
    str(in, "model", model_label ? model_label : loom_graph_name(r->space.graph));
    str(in, "cluster", c->name);
    str(in, "mode", "serve");
    str(in, "objective", loom_serve_objective_name(r->objective));

    cJSON *mo = cJSON_AddObjectToObject(root, "model");
    str(mo, "arch", mi->arch);
    num(mo, "layers", (double)mi->layers);
    num(mo, "hidden", (double)mi->hidden);
    num(mo, "heads", (double)mi->heads);
    num(mo, "kv_heads", (double)mi->kv_heads);
    num(mo, "head_dim", (double)mi->head_dim);
    num(mo, "vocab", (double)mi->vocab);
    num(mo, "experts", (double)mi->experts);
    num(mo, "experts_topk", (double)mi->experts_topk);
    num(mo, "max_positions", (double)mi->max_positions);

    cJSON *hw = cJSON_AddObjectToObject(root, "hardware");
    num(hw, "nodes", (double)c->nodes);
    num(hw, "gpus_per_node", (double)c->gpus_per_node);
    str(hw, "gpu", c->gpu.name);
    num(hw, "gpu_memory_bytes", (double)c->gpu.hbm_bytes);

    cJSON *sv = cJSON_AddObjectToObject(root, "serving");
    str(sv, "format", LOOM_SERVING_FORMAT);
    str(sv, "engine", loom_engine_name(r->space.engine));
    str(sv, "frontend", loom_serve_frontend_name(r->space.frontend));
    if (r->space.trt_engine || r->space.frontend == LOOM_FRONTEND_NIM)
        cJSON_AddBoolToObject(sv, "trt_engine", 1);
    str(sv, "weights", loom_serve_weights_name(r->space.weights));
    str(sv, "kv_dtype", loom_dtype_name(r->space.kv_dtype));
    cJSON *w = cJSON_AddObjectToObject(sv, "workload");
    num(w, "isl", (double)r->work.isl);
    num(w, "osl", (double)r->work.osl);
    num(w, "max_tokens", (double)r->space.seq_tokens);
    str(w, "lengths", len_dist_name(r->work.isl_dist));
    num(w, "spread", r->work.isl_spread);
    const char *load = r->work.load == LOOM_LOAD_QPS           ? "qps"
                       : r->work.load == LOOM_LOAD_CONCURRENCY ? "concurrency"
                                                               : "none";
    str(w, "load", load);
    if (r->work.load == LOOM_LOAD_QPS) num(w, "rate", r->work.rate);
    if (r->work.load == LOOM_LOAD_CONCURRENCY) num(w, "concurrency", (double)r->work.concurrency);
    num(w, "seed", (double)r->work.seed);
    cJSON *slo = cJSON_AddObjectToObject(sv, "slo");
    if (r->slo.ttft_s > 0) num(slo, "ttft_s", r->slo.ttft_s);
    if (r->slo.tpot_s > 0) num(slo, "tpot_s", r->slo.tpot_s);
    num(slo, "attainment", r->slo.attainment);
    str(sv, "disaggregation", loom_serve_disagg_name(r->disagg));
    cJSON_AddItemToObject(sv, "deployment", deployment(p, &p->best.dep));
    cJSON *pr = point(&p->best.sim, (double)p->best.dep.gpus);
    cJSON_AddItemToObject(pr, "steady_state", point(&p->best.steady, (double)p->best.dep.gpus));
    cJSON_AddItemToObject(sv, "predicted", pr);
    cJSON *alt = cJSON_AddArrayToObject(sv, "compared");
    for (int32_t i = 0; i < p->n_checked; i++) {
        const loom_serve_option *o = &p->checked[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddItemToArray(alt, x);
        cJSON_AddItemToObject(x, "deployment", deployment(p, &o->dep));
        cJSON_AddItemToObject(x, "predicted", point(&o->sim, (double)o->dep.gpus));
        cJSON_AddBoolToObject(x, "meets_slo", o->feasible);
    }
    cJSON *pa = cJSON_AddObjectToObject(sv, "pareto");
    cJSON_AddItemToObject(pa, "aggregated", front(p, 0));
    cJSON_AddItemToObject(pa, "disaggregated", front(p, 1));

    cJSON *se = cJSON_AddObjectToObject(root, "search");
    str(se, "algorithm", "serve");
    num(se, "time_s", no_timings ? 0 : p->time_s);
    num(se, "shapes", p->space.tried);
    num(se, "shapes_refused", p->space.refused);
    num(se, "shapes_no_fit", p->space.no_fit);
    num(se, "ranked_aggregated", p->n_ranked[0]);
    num(se, "ranked_disaggregated", p->n_ranked[1]);
    num(se, "simulated", p->n_checked);
    num(se, "simulations", p->ctx.sims);
    str(se, "status", "complete");
    char *text = loom_json_print(root);
    cJSON_Delete(root);
    return text;
}
