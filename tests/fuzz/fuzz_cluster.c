/*
 * fuzz_cluster.c — libFuzzer target for the cluster reader
 * (costs/cluster_json.c, "loom-cluster/1").
 *
 * Any input: no crash, no undefined behaviour, a failure naming the file.
 * An accepted cluster must be one the cost model can use: at least one GPU,
 * positive finite link bandwidths where links are used, and collective
 * times over its mesh axes that are finite and non-negative (docs/design.md §4: the
 * alpha-beta formulas divide by bandwidth and multiply by ranks).
 */
#include <math.h>
#include <stdint.h>

#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/collective.h"
#include "fuzz_common.h"

#define FILE_NAME "fuzz-cluster.json"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    loom_error err = {0};
    loom_cluster c;
    loom_status s = loom_cluster_parse(FILE_NAME, (const char *)data, size, &c, &err);
    fuzz_check_failure(s, &err, FILE_NAME);
    if (s != LOOM_OK) return 0;

    if (c.nodes < 1 || c.gpus_per_node < 1 || loom_cluster_gpus(&c) < 1)
        fuzz_die("a cluster without GPUs was accepted", c.name);
    if (!memchr(c.name, '\0', sizeof c.name)) fuzz_die("unterminated cluster name", "");
    if (c.gpus_per_node > 1 && !(c.intra.bandwidth_Bps > 0 && isfinite(c.intra.bandwidth_Bps)))
        fuzz_die("multi-GPU nodes without an intra-node bandwidth", c.name);
    if (c.nodes > 1 && !(c.inter.bandwidth_Bps > 0 && isfinite(c.inter.bandwidth_Bps)))
        fuzz_die("several nodes without an inter-node bandwidth", c.name);

    /* Every collective over each axis of the whole-cluster mesh that has at
     * least two ranks (a one-rank axis has no link to price). */
    loom_calib cal;
    loom_calib_default(&c.gpu, &cal);
    loom_mesh_shape m = {c.nodes, c.gpus_per_node};
    for (int axis = 0; axis < 2; axis++) {
        loom_group g = loom_mesh_axis_group(&c, m, axis);
        if (g.ranks < 2) continue;
        for (int k = 0; k < LOOM_COLL_COUNT; k++) {
            double t = loom_group_collective_time_s(&c, &cal, (loom_collective)k, g, 1e9);
            if (!(t >= 0 && isfinite(t))) fuzz_die("collective time not finite", c.name);
        }
    }
    return 0;
}
