/*
 * dp_sync.c — the data-parallel gradient sync per ZeRO stage (dp_sync.h).
 */
#include "costs/dp_sync.h"

#include <math.h>

#include "costs/memory.h"
#include "costs/parallel.h"

int loom_dp_sync_ops(double n, int zero, bool grad_bf16, int64_t micro_batches,
                     loom_dp_sync_op out[LOOM_DP_SYNC_MAX_OPS])
{
    double m = micro_batches > 0 ? (double)micro_batches : 1;
    double grads = (grad_bf16 ? 2 : LOOM_MEM_GRAD_BYTES) * n, weights = LOOM_MEM_PARAM_BYTES * n;
    if (zero <= 0) {
        out[0] = (loom_dp_sync_op){LOOM_COLL_ALL_REDUCE, grads, 1, 1, false};
        return 1;
    }
    out[0] = (loom_dp_sync_op){LOOM_COLL_REDUCE_SCATTER, grads, zero >= 2 ? m : 1, 1, false};
    out[1] = (loom_dp_sync_op){LOOM_COLL_ALL_GATHER, weights, zero >= 3 ? 2 * m : 1, 1, false};
    return 2;
}

double loom_dp_sync_grad_bytes(int framework, bool grad_reduce_bf16)
{
    if (framework == LOOM_FRAMEWORK_DEEPSPEED) return 2;
    /* Megatron --grad-reduce-in-bf16; FSDP's MixedPrecision(reduce_dtype=bf16)
     * (torchtitan's mixed_precision_reduce = "bfloat16", FMS-FSDP's bfSixteen) */
    if (grad_reduce_bf16) return 2;
    return LOOM_MEM_GRAD_BYTES;
}

/* Separate latency-paying calls outside ZeRO-3. Megatron's buckets
 * (max(40M, 1M·dp) parameters) are launched back to back on one stream as
 * the backward produces them and NCCL pipelines them, so one latency is
 * charged (the published Megatron-Core runs at dp 48 agree; charging 84
 * ring latencies per bucket sequence put the 32B run 7 points further
 * off). DeepSpeed's reduce_bucket_size (5e8 elements) and FSDP2's
 * per-block reduce-scatters are synchronised per call. */
static double buckets(const loom_dp_sync_in *in)
{
    double dp = in->dp > 0 ? (double)in->dp : 1, blocks = in->blocks > 0 ? (double)in->blocks : 1;
    switch (in->framework) {
    case LOOM_FRAMEWORK_DEEPSPEED: return ceil(in->params / 5e8);
    case LOOM_FRAMEWORK_TORCHTITAN: return blocks;
    default: (void)dp; return 1;
    }
}

/* torchtitan with pipelining: FSDP's weights gathered once and kept for
 * the whole step, gradients scattered once at its end (dp_sync.h). */
static bool stays_gathered(const loom_dp_sync_in *in)
{
    return in->zero >= 3 && in->framework == LOOM_FRAMEWORK_TORCHTITAN && in->pipelined;
}

void loom_dp_sync_groups(loom_group grp, int64_t shard, loom_group *shard_grp,
                         loom_group *replica_grp)
{
    int64_t n = shard > 0 && shard < grp.ranks ? shard : grp.ranks, per_node = grp.ranks_per_node;
    *shard_grp = (loom_group){n, per_node < n ? per_node : n};
    *replica_grp = (loom_group){n > 0 ? grp.ranks / n : 1, per_node > n ? per_node / n : 1};
}

/* HSDP: a shard group smaller than the data-parallel group, with the
 * optimizer state sharded (below ZeRO-1 nothing is sharded) */
static bool hybrid(const loom_dp_sync_in *in)
{
    return in->zero >= 1 && in->shard > 0 && in->shard < in->dp;
}

/* The replica group's all-reduce of the shard's gradients, once per step,
 * split into the reduce-scatter's calls; appended after ops [0, k). */
static int add_replica(const loom_dp_sync_in *in, loom_dp_sync_op *out, int k)
{
    if (!hybrid(in)) return k;
    out[k] = (loom_dp_sync_op){LOOM_COLL_ALL_REDUCE, out[0].bytes / (double)in->shard, 1,
                               out[0].calls, true};
    return k + 1;
}

int loom_dp_sync_ops_ex(const loom_dp_sync_in *in, loom_dp_sync_op out[LOOM_DP_SYNC_MAX_OPS])
{
    double n = in->params, m = in->micro_batches > 0 ? (double)in->micro_batches : 1;
    double blocks = in->blocks > 0 ? (double)in->blocks : 1;
    double grads = loom_dp_sync_grad_bytes(in->framework, in->grad_reduce_bf16) * n;
    double weights = LOOM_MEM_PARAM_BYTES * n;
    double calls = fmax(1, buckets(in));
    if (in->zero <= 0) {
        out[0] = (loom_dp_sync_op){LOOM_COLL_ALL_REDUCE, grads, 1, calls, false};
        return 1;
    }
    if (in->zero < 3) {
        out[0] = (loom_dp_sync_op){LOOM_COLL_REDUCE_SCATTER, grads, in->zero >= 2 ? m : 1, calls,
                                   false};
        out[1] = (loom_dp_sync_op){LOOM_COLL_ALL_GATHER, weights, 1, calls, false};
        return add_replica(in, out, 2);
    }
    double gathers = in->framework == LOOM_FRAMEWORK_DEEPSPEED && in->full_recompute ? 3 : 2;
    if (stays_gathered(in)) m = 1, gathers = 1;
    out[0] = (loom_dp_sync_op){LOOM_COLL_REDUCE_SCATTER, grads, m, blocks, false};
    out[1] = (loom_dp_sync_op){LOOM_COLL_ALL_GATHER, weights, gathers * m, blocks, false};
    return add_replica(in, out, 2);
}

double loom_dp_sync_time_s(const loom_cluster *c, const loom_calib *cal, const loom_dp_sync_in *in,
                           loom_group grp)
{
    if (grp.ranks <= 1 || !(in->params > 0)) return 0;
    loom_dp_sync_op ops[LOOM_DP_SYNC_MAX_OPS];
    int k = loom_dp_sync_ops_ex(in, ops);
    loom_group sg, rg;
    loom_dp_sync_groups(grp, hybrid(in) ? in->shard : 0, &sg, &rg);
    double t = 0;
    for (int i = 0; i < k; i++) {
        double calls = ops[i].calls > 1 ? ops[i].calls : 1;
        t += ops[i].per_step * calls *
             loom_group_collective_time_s(c, cal, ops[i].kind, ops[i].replica ? rg : sg,
                                          ops[i].bytes / calls);
    }
    return t;
}

double loom_dp_sync_unhidden_s(const loom_cluster *c, const loom_calib *cal,
                               const loom_dp_sync_in *in, loom_group grp)
{
    if (in->zero < 3 || grp.ranks <= 1 || !(in->params > 0)) return 0;
    loom_dp_sync_op ops[LOOM_DP_SYNC_MAX_OPS];
    int k = loom_dp_sync_ops_ex(in, ops);
    double m = in->micro_batches > 0 && !stays_gathered(in) ? (double)in->micro_batches : 1, t = 0;
    /* the share of a block's gather that is fetched ahead of need */
    double block = in->params / (in->blocks > 0 ? (double)in->blocks : 1);
    double ahead = in->framework == LOOM_FRAMEWORK_DEEPSPEED
                       ? fmin(1, LOOM_DEEPSPEED_PREFETCH_ELEMS / block) : 1;
    loom_group sg, rg;
    loom_dp_sync_groups(grp, hybrid(in) ? in->shard : 0, &sg, &rg);
    for (int i = 0; i < k; i++) {   /* one call of each: a block's gather, a block's scatter */
        double calls = ops[i].calls > 1 ? ops[i].calls : 1;
        double one = loom_group_collective_time_s(c, cal, ops[i].kind, ops[i].replica ? rg : sg,
                                                  ops[i].bytes / calls);
        if (ops[i].replica) {   /* the last block's, once per step */
            t += one;
            continue;
        }
        t += m * one;
        if (ops[i].kind == LOOM_COLL_ALL_GATHER)   /* the rest of the other gathers */
            t += (ops[i].per_step * calls - m) * one * (1 - ahead);
    }
    return t;
}
