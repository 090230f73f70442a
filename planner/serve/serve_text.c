/*
 * serve_text.c — a serving plan as the text `loom plan --mode serve` prints
 * (loom_serve_plan_text, serve_plan.h): the chosen deployment with its
 * simulated latencies and throughput, KV capacity, the deployments the
 * simulation compared, the Pareto fronts and what the search did.
 * Deterministic text; the search time as the plan has it.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "graph/graph.h"
#include "planner/serve/serve_plan.h"

static void slo_text(const loom_serve_slo *s, char *buf, size_t n)
{
    int k = 0;
    if (s->ttft_s > 0) k += snprintf(buf + k, n - (size_t)k, "TTFT ≤ %g ms", s->ttft_s * 1e3);
    if (s->tpot_s > 0)
        k += snprintf(buf + k, n - (size_t)k, "%sTPOT ≤ %g ms", k ? " and " : "", s->tpot_s * 1e3);
    if (k == 0) snprintf(buf, n, "no latency bound");
    else snprintf(buf + k, n - (size_t)k, " for %g%% of requests", s->attainment * 100);
}

static void what_text(const loom_serve_plan *p, char *buf, size_t n)
{
    const loom_serve_plan_request *r = &p->req;
    switch (r->objective) {
    case LOOM_SERVE_OBJ_GOODPUT:
        snprintf(buf, n, "goodput: the highest Poisson request rate per GPU within the SLOs");
        break;
    case LOOM_SERVE_OBJ_THROUGHPUT:
        if (r->work.load == LOOM_LOAD_CONCURRENCY)
            snprintf(buf, n, "throughput: output tokens/s of %lld concurrent clients on the cluster",
                     (long long)r->work.concurrency);
        else
            snprintf(buf, n, "throughput: output tokens/s per GPU at the highest rate whose mean "
                     "TTFT and TPOT meet the SLOs");
        break;
    case LOOM_SERVE_OBJ_LATENCY:
        if (r->work.load == LOOM_LOAD_QPS)
            snprintf(buf, n, "latency: the lowest mean end-to-end latency at %g requests/s",
                     r->work.rate);
        else
            snprintf(buf, n, "latency: the lowest mean end-to-end latency at %lld client%s%s",
                     (long long)p->load.concurrency, p->load.concurrency > 1 ? "s" : "",
                     r->work.load == LOOM_LOAD_OFFLINE ? " (assumed: no --qps or --concurrency)" : "");
        break;
    default:
        snprintf(buf, n, "gpus: the fewest GPUs that serve %g requests/s within the SLOs",
                 r->work.rate);
        break;
    }
}

static void pool_line(FILE *f, const loom_serve_plan *p, const char *role, int32_t shape,
                      int64_t count)
{
    const loom_serve_cand *c = &p->space.cand[shape];
    const loom_serve_memory *m = loom_serve_model_memory(c->m);
    const loom_serve_engine *e = loom_serve_model_engine(c->m);
    char lab[96];
    loom_serve_inst_label(&c->inst, lab, sizeof lab);
    fprintf(f, "  %-11s %lld × (%s), %lld GPU%s each: KV %.3g M tokens, at most %lld requests of "
               "%lld tokens at once (max_num_seqs %lld, %lld tokens per iteration)\n",
            role, (long long)count, lab, (long long)c->gpus, c->gpus > 1 ? "s" : "",
            (double)m->kv_capacity_tokens / 1e6, (long long)m->max_concurrency,
            (long long)p->req.space.seq_tokens, (long long)e->max_num_seqs,
            (long long)e->max_batched_tokens);
}

static bool has_slo(const loom_serve_plan *p)
{
    return p->req.slo.ttft_s > 0 || p->req.slo.tpot_s > 0;
}

static void figures(FILE *f, const loom_serve_plan *p, const loom_serve_option *o)
{
    const loom_serve_point *pt = &o->sim;
    double g = (double)o->dep.gpus;
    fprintf(f, "  predicted   %s at %.3g requests/s", pt->simulated ? "simulated" : "steady state",
            pt->rate_rps);
    if (pt->concurrency > 0)
        fprintf(f, " (%lld client%s)", (long long)pt->concurrency, pt->concurrency > 1 ? "s" : "");
    fprintf(f, ", %.3g per GPU", pt->rate_rps / g);
    bool means = p->req.objective == LOOM_SERVE_OBJ_THROUGHPUT && p->req.work.load == LOOM_LOAD_OFFLINE;
    if (has_slo(p) && means)
        fprintf(f, "; mean TTFT and TPOT within the SLOs (%.1f%% of requests within both)",
                100 * pt->attainment);
    else if (has_slo(p))
        fprintf(f, "; %.1f%% of requests within the SLOs", 100 * pt->attainment);
    fputc('\n', f);
    fprintf(f, "                         mean        p50        p90        p99\n");
    fprintf(f, "    TTFT (ms)      %10.1f %10.1f %10.1f %10.1f\n", pt->ttft.mean * 1e3,
            pt->ttft.p50 * 1e3, pt->ttft.p90 * 1e3, pt->ttft.p99 * 1e3);
    fprintf(f, "    TPOT (ms)      %10.2f %10.2f %10.2f %10.2f\n", pt->tpot.mean * 1e3,
            pt->tpot.p50 * 1e3, pt->tpot.p90 * 1e3, pt->tpot.p99 * 1e3);
    fprintf(f, "    E2E (s)        %10.3f %10.3f %10.3f %10.3f\n", pt->e2e.mean, pt->e2e.p50,
            pt->e2e.p90, pt->e2e.p99);
    fprintf(f, "  throughput  %.0f output tokens/s, %.1f per GPU, %.1f per user (1 / mean TPOT)\n",
            pt->output_tokens_per_s, pt->output_tokens_per_s / g,
            pt->tpot.mean > 0 ? 1 / pt->tpot.mean : 0);
}

/* printf pads by bytes; "×" is two: the width that shows w columns. */
static int pad(const char *s, int w)
{
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) == 0x80) w++;
    return w;
}

static void compared(FILE *f, const loom_serve_plan *p)
{
    fprintf(f, "\n  compared by simulation (the best of each kind by the steady-state estimate):\n");
    fprintf(f, "    %-46s %5s %8s %9s %9s %9s %9s %7s\n", "deployment", "GPUs", "req/s",
            "TTFT p99", "TPOT p99", "tok/s/GPU", "tok/s/usr", "in SLO");
    for (int32_t i = 0; i < p->n_checked; i++) {
        const loom_serve_option *o = &p->checked[i];
        char lab[256];
        loom_serve_deploy_label(&p->ctx, &o->dep, lab, sizeof lab);
        const loom_serve_point *pt = &o->sim;
        char in[16] = "-";
        if (has_slo(p)) snprintf(in, sizeof in, "%.1f%%", 100 * pt->attainment);
        fprintf(f, "    %-*s %5lld %8.3g %7.0f ms %6.1f ms %9.1f %9.1f %7s%s\n", pad(lab, 46), lab,
                (long long)o->dep.gpus, pt->rate_rps, pt->ttft.p99 * 1e3, pt->tpot.p99 * 1e3,
                pt->output_tokens_per_s / (double)o->dep.gpus,
                pt->tpot.mean > 0 ? 1 / pt->tpot.mean : 0, in, o->feasible ? "" : "  (misses)");
    }
}

static void front(FILE *f, const loom_serve_plan *p, int kind)
{
    if (p->n_front[kind] == 0) return;
    fprintf(f, "\n  Pareto front, %s (steady state):\n", kind ? "disaggregated" : "aggregated");
    fprintf(f, "    %10s %10s %10s  %s\n", "tok/s/user", "tok/s/GPU", "TTFT (ms)",
            kind ? "decode instance at clients, prefill instances per decode instance"
                 : "instance at clients");
    for (int32_t i = 0; i < p->n_front[kind]; i++) {
        const loom_serve_front_point *q = &p->front[kind][i];
        char a[96], b[96];
        loom_serve_inst_label(&p->space.cand[q->shape].inst, a, sizeof a);
        fprintf(f, "    %10.1f %10.1f %10.0f  (%s) at %lld", q->tokens_per_s_user,
                q->tokens_per_s_gpu, q->ttft_s * 1e3, a, (long long)q->concurrency);
        if (q->prefill_shape >= 0) {
            loom_serve_inst_label(&p->space.cand[q->prefill_shape].inst, b, sizeof b);
            fprintf(f, ", %.2f × prefill (%s)", q->prefill_per_decode, b);
        }
        fputc('\n', f);
    }
}

static void text(FILE *f, const loom_serve_plan *p, const char *model)
{
    const loom_serve_plan_request *r = &p->req;
    const loom_cluster *c = r->space.cluster;
    char buf[320], slo[160];
    const char *fe = r->space.frontend == LOOM_FRONTEND_NIM    ? " behind NIM's server"
                     : r->space.frontend == LOOM_FRONTEND_NONE ? " in-process (no server)"
                                                               : "";
    bool trt = r->space.trt_engine || r->space.frontend == LOOM_FRONTEND_NIM;
    fprintf(f, "loom plan: %s on %s (%lld × %s), serving with %s%s%s, weights %s, KV %s\n", model,
            c->name, (long long)loom_cluster_gpus(c), c->gpu.name, loom_engine_name(r->space.engine),
            trt ? " (a built TensorRT engine)" : "", fe, loom_serve_weights_name(r->space.weights),
            loom_dtype_name(r->space.kv_dtype));
    slo_text(&r->slo, slo, sizeof slo);
    fprintf(f, "  workload    ISL %lld, OSL %lld; SLO %s\n", (long long)r->work.isl,
            (long long)r->work.osl, slo);
    what_text(p, buf, sizeof buf);
    fprintf(f, "  objective   %s\n", buf);
    const loom_serve_option *b = &p->best;
    const loom_serve_deploy *d = &b->dep;
    loom_serve_deploy_label(&p->ctx, d, buf, sizeof buf);
    fprintf(f, "\n  chosen      %s: %s on %lld GPUs", d->disagg ? "disaggregated" : "aggregated",
            buf, (long long)d->gpus);
    if (d->gpus < loom_cluster_gpus(c))
        fprintf(f, " (of %lld%s)", (long long)loom_cluster_gpus(c),
                r->objective == LOOM_SERVE_OBJ_GPUS ? ""
                                                    : ": a larger one would do less per GPU");
    fputc('\n', f);
    if (d->disagg) {
        pool_line(f, p, "prefill", d->prefill, d->n_prefill);
        pool_line(f, p, "decode", d->decode, d->n_decode);
        fprintf(f, "  KV transfer %.3g GB per request over %s (%.3g GB/s): %.2f ms\n",
                d->kv_bytes / 1e9, d->kv_nvlink ? "NVLink" : "the NIC", d->kv_link_Bps / 1e9,
                d->kv_transfer_s * 1e3);
    } else {
        pool_line(f, p, "instances", d->agg, d->replicas);
    }
    figures(f, p, b);
    compared(f, p);
    front(f, p, 0);
    front(f, p, 1);
    fprintf(f, "\n  search      %d shapes of an instance (%d refused by the sharding rules, %d do "
               "not fit), %d aggregated and %d disaggregated deployments ranked by the "
               "steady-state estimate, %d re-checked by %d simulations: %.2f s\n",
            (int)p->space.tried, (int)p->space.refused, (int)p->space.no_fit, (int)p->n_ranked[0],
            (int)p->n_ranked[1], (int)p->n_checked, (int)p->ctx.sims, p->time_s);
}

char *loom_serve_plan_text(const loom_serve_plan *p, const char *model_label)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    text(f, p, model_label ? model_label : loom_graph_name(p->req.space.graph));
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
