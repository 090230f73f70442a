/*
 * serve_sim_speed.c — how fast the serving simulator and the steady-state
 * estimate run (costs/serve/): 10,000 requests of Llama-3-70B on TP 8 H100
 * (vLLM policy) at a Poisson rate of 80% of the capacity, then offline, and
 * the steady state's per-call time (what a deployment search pays per
 * candidate). Wall-clock on one core; prints one line per figure.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "costs/serve/sim.h"
#include "costs/serve/steady.h"
#include "graph/model.h"

int main(int argc, char **argv)
{
    const char *model = argc > 1 ? argv[1] : "examples/models/llama-3-70b.json";
    loom_error err = {0};
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    mo.seq = 1;
    mo.batch = 1;
    loom_graph *g = NULL;
    loom_cluster c;
    if (loom_model_load(model, &mo, &g, &err) || loom_cluster_load("dgx-h100-x1", &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    loom_serve_model_opts o = {.graph = g, .cluster = &c, .seq_tokens = 1536 + 384};
    loom_serve_parallel_init(&o.par);
    o.par.tp = 8;
    loom_serve_engine_defaults(LOOM_ENGINE_VLLM, &c.gpu, 8, &o.engine);
    loom_serve_model *m = NULL;
    if (loom_serve_model_create(&o, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    loom_serve_workload w;
    loom_serve_workload_init(&w);
    w.isl = 1024;
    w.osl = 256;
    w.isl_dist = w.osl_dist = LOOM_LEN_UNIFORM;
    w.isl_spread = w.osl_spread = 0.5;
    w.num_requests = 10000;
    loom_serve_steady_result st;
    double t0 = loom_clock_s();
    int calls = 0;
    for (; calls < 2000; calls++) loom_serve_steady(m, &w, &st, &err);
    double t_steady = (loom_clock_s() - t0) / calls;
    loom_serve_sim_result *r = malloc(sizeof *r);
    w.load = LOOM_LOAD_QPS;
    w.rate = 0.8 * st.capacity_rps;
    t0 = loom_clock_s();
    if (loom_serve_simulate(m, &w, r, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t_qps = loom_clock_s() - t0;
    printf("simulator, 10000 requests, Poisson %.1f req/s: %.3f s (%lld iterations, %.0f output "
           "tok/s, TPOT %.1f ms)\n", w.rate, t_qps, (long long)r->iterations,
           r->m.output_tokens_per_s, r->m.tpot.mean * 1e3);
    w.load = LOOM_LOAD_OFFLINE;
    t0 = loom_clock_s();
    if (loom_serve_simulate(m, &w, r, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t_off = loom_clock_s() - t0;
    printf("simulator, 10000 requests, offline: %.3f s (%lld iterations, %.0f output tok/s)\n",
           t_off, (long long)r->iterations, r->m.output_tokens_per_s);
    printf("steady-state estimate: %.1f us per call\n", t_steady * 1e6);
    free(r);
    loom_serve_model_destroy(m);
    loom_graph_destroy(g);
    return t_qps < 1 && t_off < 1 ? 0 : 1;
}
