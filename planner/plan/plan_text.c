/*
 * plan_text.c — the plan as the text table `loom plan` prints
 * (loom_plan_table, plan.h).
 *
 * The header names what was assumed (sequence, batch, dtype, ZeRO,
 * objective) and what was predicted; one row per stage names its layers in
 * the model's own numbering (loom_plan_layers_label) and its parallelism by
 * role (loom_plan_stage_roles: "cp32 x tp4", never a context-parallel axis
 * called data-parallel), with the degrees tp · cp · dp = its GPUs and the
 * expert-parallel size. Deterministic text; search time as the plan has it.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "planner/plan/plan.h"

static const char *gib(int64_t bytes, char *buf, size_t n)
{
    snprintf(buf, n, "%.1f GiB", (double)bytes / 1073741824.0);
    return buf;
}

/* One alternative (plan.h) against the plan: its GPUs, largest groups and
 * step, and how much longer it takes. */
static void alternative_line(FILE *f, const loom_plan *p, const char *why,
                             const loom_plan_alternative *a)
{
    if (!(p->step_time_s > 0)) return;
    double more = a->step_time_s / p->step_time_s - 1;
    char how[96];
    if (fabs(more) < 5e-4) snprintf(how, sizeof how, "the same to 0.1%%");
    else if (more >= 0) snprintf(how, sizeof how, "%.1f%% longer", 100 * more);
    else
        snprintf(how, sizeof how, "%.1f%% shorter but worse by the objective (%s)", -100 * more,
                 loom_problem_objective_name(p->objective));
    fprintf(f, "              %s (%lld GPUs, largest tp %lld, ep %lld) takes %.4g s per %s, %s\n",
            why, (long long)a->gpus, (long long)a->tensor_parallel, (long long)a->expert_parallel,
            a->step_time_s, p->mode == LOOM_PLAN_TRAIN ? "step" : "decode step", how);
}

/* An NVLink domain larger than an 8-GPU board (GB200 NVL72): where a
 * group's collectives run, how large this plan's groups are, and — where
 * the domain has a power-of-two tile (costs/cluster.h) — which layout the
 * plan took and what the best plan of the other one takes: the reason a
 * group is, or is not, larger than 8. */
static void nvlink_account(FILE *f, const loom_plan *p)
{
    int64_t domain = p->gpus_per_node + p->idle_gpus_per_node, tp = 1, ep = 1;
    for (int32_t i = 0; i < p->n_stages; i++) {
        loom_plan_roles ro;
        loom_plan_stage_roles(&p->stages[i], &ro);
        if (ro.tp > tp) tp = ro.tp;
        if (ro.ep > ep) ep = ro.ep;
    }
    fprintf(f, "  nvlink      %lld GPUs share one NVLink domain (a node here): a TP or EP group "
               "inside it runs on NVLink, one across domains on the NICs; largest here: tp "
               "%lld, ep %lld\n",
            (long long)domain, (long long)tp, (long long)ep);
    int64_t used = p->data_parallel * p->gpus_per_replica, two = 1;
    while (domain % (2 * two) == 0) two *= 2;   /* 72 = 8 x 9 */
    if (p->idle_gpus_per_node > 0)
        fprintf(f, "              on the first %lld GPUs of each domain (%lld of the %lld GPUs "
                   "in use, numbered node x %lld + k below; the other %lld of each domain "
                   "idle): a power-of-two share, over which 2^k heads, experts and batches "
                   "split into groups of up to %lld, as they do not over %lld = %lld x %lld\n",
                (long long)p->gpus_per_node, (long long)used, (long long)(p->nodes * domain),
                (long long)p->gpus_per_node, (long long)p->idle_gpus_per_node,
                (long long)p->gpus_per_node, (long long)domain, (long long)two,
                (long long)(domain / two));
    const loom_plan_alternative *g = &p->nvlink_groups_alt, *l = &p->nvlink_layout_alt;
    if (g->gpus > 0)
        alternative_line(f, p,
                         tp > 8 || ep > 8
                             ? "why a group above 8: its collectives stay on NVLink inside "
                               "the domain, and the best plan whose groups stay within 8 GPUs"
                             : "why no group above 8: the best plan with one",
                         g);
    if (l->gpus > 0 && !(l->gpus == g->gpus && l->step_time_s == g->step_time_s))
        alternative_line(f, p,
                         p->idle_gpus_per_node > 0
                             ? "why the tile: the best plan on whole domains"
                             : "why not the tile: the best plan on the tile of each domain",
                         l);
}

static void table(FILE *f, const loom_plan *p)
{
    char a[32], b[32];
    bool train = p->mode == LOOM_PLAN_TRAIN;
    fprintf(f, "loom plan: %s on %s (%lld x %s), %s, %s %lld x seq %lld, %s, objective %s\n",
            p->model, p->cluster,
            (long long)(p->nodes * (p->gpus_per_node + p->idle_gpus_per_node)), p->gpu,
            train ? "training" : "inference", train ? "gbs" : "sequences", (long long)p->gbs,
            (long long)p->seq, loom_dtype_name(p->dtype), loom_problem_objective_name(p->objective));
    const char *kind = !train ? "forward only (decode)"
                       : p->virtual_stages > 1 ? "interleaved 1F1B"
                                               : "1F1B";
    fprintf(f, "  schedule    %s", kind);
    if (p->virtual_stages > 1) fprintf(f, " (%lld chunks per rank)", (long long)p->virtual_stages);
    fprintf(f, ": pp %lld x %lld data-parallel replica(s) of %lld GPUs, micro-batch %lld x %lld",
            (long long)p->pipeline_stages, (long long)p->data_parallel,
            (long long)p->gpus_per_replica, (long long)p->micro_batch,
            (long long)p->micro_batches);
    if (train && p->n_stages > 0)   /* one ZeRO stage for all stages */
        fprintf(f, ", ZeRO-%d", p->stages[0].zero);
    bool overlap = false;
    for (int32_t i = 0; i < p->n_stages; i++) overlap |= p->stages[i].tp_comm_overlap;
    if (overlap) fprintf(f, ", TP comm overlap");
    fprintf(f, "\n");
    if (train)
        fprintf(f, "  step        %.4g s   %.4g tokens/s   %.1f TFLOP/s per GPU   MFU %.1f%%\n",
                p->step_time_s, p->tokens_per_s, p->model_tflops_per_gpu, 100 * p->mfu);
    else
        fprintf(f, "  decode      %.4g s per token   %.4g tokens/s   %.1f TFLOP/s per GPU   MFU "
                   "%.1f%%\n",
                p->latency_per_token_s, p->tokens_per_s, p->model_tflops_per_gpu, 100 * p->mfu);
    const loom_step_breakdown *d = &p->breakdown;
    fprintf(f, "  breakdown   compute %.4g  tp-comm %.4g  bubble %.4g  p2p %.4g  grad-sync %.4g  "
               "optimizer %.4g  (s)\n",
            d->compute_s, d->tp_comm_s, d->bubble_s, d->p2p_s, d->grad_sync_s, d->optimizer_s);
    fprintf(f, "  memory      %s per GPU at most, of %s\n", gib(p->memory_per_gpu_bytes, a, sizeof a),
            gib(p->gpu_memory_bytes, b, sizeof b));
    if (p->cost_per_step_usd >= 0)
        fprintf(f, "  cost        $%.4g per step, $%.4g per million tokens\n", p->cost_per_step_usd,
                p->cost_per_mtoken_usd);
    if (p->energy_per_step_j >= 0)
        fprintf(f, "  energy      %.4g kJ per step, %.4g J per token\n", p->energy_per_step_j / 1e3,
                p->energy_per_token_j);
    if (p->gpus_per_node + p->idle_gpus_per_node > 8) nvlink_account(f, p);
    fprintf(f, "\n  %-5s %-4s %-13s %-13s %-5s %-13s %-4s %-4s %-4s %-4s %-3s %-9s %-9s %s\n",
            "stage", "rank", "layers", "GPUs (rep. 0)", "nodes", "parallel", "tp", "cp", "dp",
            "ep", "sp", "recompute", "time/mb", "memory/GPU");
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_stage *s = &p->stages[i];
        char layers[40], gpus[40], par[48];
        loom_plan_layers_label(p, s->first_layer, s->last_layer, layers, sizeof layers);
        if (s->n_gpus == 1) snprintf(gpus, sizeof gpus, "%lld", (long long)s->gpus[0]);
        else
            snprintf(gpus, sizeof gpus, "%lld-%lld", (long long)s->gpus[0],
                     (long long)s->gpus[s->n_gpus - 1]);
        loom_plan_roles ro;
        loom_plan_stage_roles(s, &ro);
        loom_plan_roles_label(&ro, s->mesh, par, sizeof par);
        /* partial recompute: the rank's first N blocks (--recompute-num-layers N) */
        char rc[32];
        if (s->recompute == LOOM_RECOMPUTE_FULL && s->recompute_layers > 0)
            snprintf(rc, sizeof rc, "first %lld", (long long)s->recompute_layers);
        else
            snprintf(rc, sizeof rc, "%s", loom_recompute_name(s->recompute));
        fprintf(f, "  %-5d %-4d %-13s %-13s %-5lld %-13s %-4lld %-4lld %-4lld %-4lld %-3s %-9s "
                   "%-9.4g %s\n",
                (int)i, (int)s->group, layers, gpus, (long long)s->submesh_nodes, par,
                (long long)ro.tp, (long long)ro.cp, (long long)ro.dp, (long long)ro.ep,
                s->sequence_parallel ? "yes" : "no", rc, s->time_s,
                gib(s->memory.total, a, sizeof a));
    }
    fprintf(f, "  (layers: the model's own block numbers, emb = embedding, head = final norm, "
               "head and loss;\n   parallel: what each mesh axis splits, tp = tensor, cp = "
               "context (sequence), dp = data, ep = expert)\n");
    fprintf(f, "\n  search      %s: %.2f s, %lld ILP solves, %lld DP runs, %lld configurations "
               "evaluated (%s)\n",
            p->algorithm, p->search_time_s, (long long)p->ilp_solves, (long long)p->dp_runs,
            (long long)p->configs_evaluated, p->search_status);
    if (p->measured_share > 0)
        fprintf(f, "  measured    %.0f%% of predicted compute time from the profile db\n",
                100 * p->measured_share);
}

char *loom_plan_table(const loom_plan *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    table(f, p);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
