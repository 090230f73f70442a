/*
 * costs_speed.c — how fast the hardware cost functions answer, and what the
 * roofline predicts for one real layer. Prints figures; asserts nothing.
 *
 *   1. loom_cost_op_time over every op of Llama-3-70B (seq 8192, batch 1,
 *      bf16) under Megatron TP 8 (heads, kvh, f, v split 8 ways) on a DGX
 *      H100: calls per second, and the predicted forward+backward time of
 *      one transformer layer with the implied model TFLOP/s per GPU;
 *   2. loom_group_collective_time_s: calls per second.
 * Run through bench/costs_speed.sh.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "costs/collective.h"
#include "costs/compute.h"
#include "graph/model.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *model = argc > 1 ? argv[1] : "examples/models/llama-3-70b.json";
    loom_error err;
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = 8192;
    loom_graph *g = NULL;
    loom_cluster c;
    loom_cost_model *m = NULL;
    if (loom_model_load(model, &o, &g, &err) || loom_cluster_load("dgx-h100-x1", &c, &err) ||
        loom_cost_model_create(&c, NULL, NULL, &m, &err)) {
        fprintf(stderr, "costs_speed: %s\n", err.msg);
        return 1;
    }
    const loom_dim_split tp[] = {{"heads", 8}, {"kvh", 8}, {"f", 8}, {"v", 8}};
    int32_t n = loom_graph_num_ops(g);

    /* One transformer block (layer 1): predicted fwd+bwd and TFLOP/s. */
    int32_t first, count;
    loom_graph_layer_ops(g, 1, &first, &count);
    double layer_s = 0, layer_flops = 0;
    for (int32_t i = first; i < first + count; i++) {
        loom_op_time t;
        if (loom_cost_op_time(m, g, i, tp, 4, &t, &err)) {
            fprintf(stderr, "costs_speed: %s\n", err.msg);
            return 1;
        }
        layer_s += t.fwd_s + t.bwd_s;
        const loom_op *op = loom_graph_op(g, i);
        layer_flops += (double)(op->fwd_flops + op->bwd_flops) / 8;
    }
    printf("model %s, seq %lld, TP 8 on %s (default calibration)\n", model, (long long)o.seq,
           c.gpu.name);
    printf("  layer 1: %d ops, fwd+bwd %.3f ms, %.0f model TFLOP/s per GPU (%.0f%% of bf16 peak)\n",
           (int)count, layer_s * 1e3, layer_flops / layer_s / 1e12,
           100 * layer_flops / layer_s / c.gpu.peak_flops[LOOM_DTYPE_BF16]);

    int reps = 0;
    double t0 = now_s(), sink = 0;
    while (now_s() - t0 < 1.0) {
        for (int32_t i = 0; i < n; i++) {
            loom_op_time t;
            if (loom_cost_op_time(m, g, i, tp, 4, &t, &err) == LOOM_OK) sink += t.fwd_s;
        }
        reps++;
    }
    double dt = now_s() - t0;
    printf("  loom_cost_op_time: %d ops x %d passes in %.2f s = %.2f M calls/s (%.0f ns/call)\n",
           (int)n, reps, dt, (double)n * reps / dt / 1e6, dt / ((double)n * reps) * 1e9);

    loom_cluster big;
    loom_cluster_load("dgx-h100-x128", &big, &err);
    long calls = 0;
    t0 = now_s();
    while (now_s() - t0 < 0.5)
        for (int64_t r = 2; r <= 1024; r *= 2, calls++)
            sink += loom_group_collective_time_s(&big, loom_cost_model_calib(m), LOOM_COLL_ALL_REDUCE,
                                                 (loom_group){r, 8}, 1e9);
    dt = now_s() - t0;
    printf("  loom_group_collective_time_s: %.1f M calls/s (checksum %g)\n", calls / dt / 1e6,
           sink > 0 ? 1.0 : 0.0);
    loom_cost_model_destroy(m);
    loom_graph_destroy(g);
    return 0;
}
