/*
 * ingest_speed.c — how long model ingestion takes: for each bundled model,
 * loom_model_load (parse the config, build and finalize the graph, which
 * includes igraph's cycle check) and a loom-graph/1 dump + re-read of the
 * built graph. Prints figures (median of 5 runs); asserts nothing.
 * Run through bench/ingest_speed.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/graph_json.h"
#include "base/json.h"
#include "graph/model.h"

#define RUNS 5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const char *const def[] = {"gpt2", "llama-3-8b", "llama-3-70b", "llama-3.1-405b",
                                      "mixtral-8x7b", "qwen2-72b", "deepseek-v3", "gpt3-175b"};
    int n = argc > 1 ? argc - 1 : (int)(sizeof def / sizeof def[0]);
    printf("%-16s %6s %8s %12s %14s %10s\n", "model", "ops", "tensors", "load ms", "json round ms",
           "json KiB");
    for (int k = 0; k < n; k++) {
        const char *name = argc > 1 ? argv[k + 1] : def[k];
        char path[512];
        snprintf(path, sizeof path, "examples/models/%s.json", name);
        double t_load[RUNS], t_rt[RUNS];
        loom_graph *g = NULL;
        size_t kib = 0;
        loom_error err = {0};
        for (int r = 0; r < RUNS; r++) {
            loom_graph_destroy(g);
            double t0 = now_s();
            if (loom_model_load(path, NULL, &g, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            double t1 = now_s();
            char *text = NULL;
            cJSON *root = NULL;
            loom_graph *g2 = NULL;
            if (loom_graph_json_dump(g, &text, &err) ||
                loom_json_parse("dump.json", text, strlen(text), &root, &err) ||
                loom_graph_json_parse("dump.json", root, &g2, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            t_load[r] = t1 - t0;
            t_rt[r] = now_s() - t1;
            kib = strlen(text) / 1024;
            free(text);
            cJSON_Delete(root);
            loom_graph_destroy(g2);
        }
        qsort(t_load, RUNS, sizeof(double), cmp);
        qsort(t_rt, RUNS, sizeof(double), cmp);
        printf("%-16s %6d %8d %12.2f %14.2f %10zu\n", name, (int)loom_graph_num_ops(g),
               (int)loom_graph_num_tensors(g), 1e3 * t_load[RUNS / 2], 1e3 * t_rt[RUNS / 2], kib);
        loom_graph_destroy(g);
    }
    return 0;
}
