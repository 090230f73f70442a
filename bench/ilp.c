/*
 * ilp.c — how big and how fast the intra-operator ILP is on real layers.
 * For one transformer layer of each model on each logical mesh (a DGX H100
 * cluster large enough; batch 1, seq 4096, training) prints the ILP's size
 * (variables, constraints, the variables of the core left to GLPK after
 * exact elimination, ops before/after follow-merging), its status,
 * GLPK's solve time and the wall time of the whole loom_intra_solve call
 * (strategy enumeration + costing + merge + pruning + GLPK), median of 5
 * runs; then the wall time of solving EVERY layer of the model at once
 * (shared layers: it should not grow with depth). Asserts nothing; the
 * target (docs/design.md §10) is optimal in under 100 ms per layer and mesh on a
 * 2-core machine. Run through bench/ilp.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "costs/cluster.h"
#include "costs/compute.h"
#include "graph/model.h"
#include "solver/intra.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *models[] = {"examples/models/llama-3-70b.json", "examples/models/mixtral-8x7b.json",
                            "examples/models/llama-3-8b.json"};
    const loom_mesh_shape meshes[] = {{1, 8}, {2, 4}, {4, 8}, {2, 8}, {8, 1}};
    int n_models = argc > 1 ? argc - 1 : 3;
    loom_error err;
    loom_cluster cl;
    loom_cost_model *cm;
    if (loom_cluster_load("dgx-h100-x4", &cl, &err) ||
        loom_cost_model_create(&cl, NULL, NULL, &cm, &err)) {
        fprintf(stderr, "ilp bench: %s\n", err.msg);
        return 1;
    }
    printf("%-14s %-5s %-8s %6s %6s %6s %9s %9s %10s %12s\n", "model", "mesh", "status", "vars",
           "cons", "core", "ops", "glpk ms", "solve ms", "layer ms");
    for (int mi = 0; mi < n_models; mi++) {
        const char *path = argc > 1 ? argv[mi + 1] : models[mi];
        loom_model_opts mo;
        loom_model_opts_init(&mo);
        mo.seq = 4096;
        loom_graph *g;
        if (loom_model_load(path, &mo, &g, &err)) {
            fprintf(stderr, "ilp bench: %s\n", err.msg);
            return 1;
        }
        for (size_t k = 0; k < sizeof meshes / sizeof meshes[0]; k++) {
            double wall[5], glpk[5];
            loom_intra_result r = {0};
            for (int rep = 0; rep < 5; rep++) {
                loom_intra_opts o;
                loom_intra_opts_init(&o);
                loom_intra_result_free(&r);
                double t0 = now_s();
                if (loom_intra_solve(g, cm, 1, 1, meshes[k], &o, &r, &err)) {
                    fprintf(stderr, "ilp bench: %s\n", err.msg);
                    return 1;
                }
                wall[rep] = now_s() - t0;
                glpk[rep] = r.solve_time_s;
            }
            qsort(wall, 5, sizeof wall[0], cmp_d);
            qsort(glpk, 5, sizeof glpk[0], cmp_d);
            char mesh[16], ops[16];
            snprintf(mesh, sizeof mesh, "%lldx%lld", (long long)meshes[k].n0, (long long)meshes[k].n1);
            snprintf(ops, sizeof ops, "%d->%d", (int)r.ops_before_merge, (int)r.ops_after_merge);
            printf("%-14s %-5s %-8s %6d %6d %6d %9s %9.1f %10.1f %12.3f\n", loom_graph_name(g), mesh,
                   loom_ilp_status_name(r.status), (int)r.n_vars, (int)r.n_cons, (int)r.core_vars, ops,
                   glpk[2] * 1e3, wall[2] * 1e3, r.time_s * 1e3);
            loom_intra_result_free(&r);
        }
        /* every layer at once, with a cache: time should not grow with depth */
        loom_intra_cache *cache;
        if (loom_intra_cache_create(&cache, &err)) return 1;
        loom_intra_opts o;
        loom_intra_opts_init(&o);
        o.cache = cache;
        loom_intra_result r;
        double t0 = now_s();
        if (loom_intra_solve(g, cm, 0, loom_graph_layer_count(g) - 1, (loom_mesh_shape){2, 4}, &o,
                             &r, &err)) {
            fprintf(stderr, "ilp bench: %s\n", err.msg);
            return 1;
        }
        printf("%-14s all %d layers on 2x4: %d distinct solves, %.1f ms wall, %.3f ms per "
               "micro-batch\n", loom_graph_name(g), (int)loom_graph_layer_count(g), (int)r.n_solves,
               (now_s() - t0) * 1e3, r.time_s * 1e3);
        loom_intra_result_free(&r);
        loom_intra_cache_destroy(cache);
        loom_graph_destroy(g);
    }
    loom_cost_model_destroy(cm);
    return 0;
}
