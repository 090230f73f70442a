/*
 * dp_sync.h — which collectives one training step's data-parallel gradient
 * synchronisation runs, by ZeRO stage. One rule for every caller: the
 * evaluator (eval.c, over Megatron's data-parallel group), the stage
 * search's replica sync and the ILP's per-op sync over mesh axes (solver/);
 * each prices the collectives on its own group.
 *
 *   ZeRO-0   all-reduce of the gradients                      once per step
 *   ZeRO-1   reduce-scatter of the gradients + all-gather of
 *            the updated weights (= Megatron's distributed
 *            optimizer)                                        once per step
 *   ZeRO-2   the reduce-scatter every micro-batch (no local
 *            accumulation of a partitioned gradient), the
 *            all-gather once                                   (DeepSpeed)
 *   ZeRO-3   also the weights gathered for each forward and
 *            backward, every micro-batch
 *
 * Gradients are reduced in fp32 (LOOM_MEM_GRAD_BYTES per parameter), as
 * Megatron-LM does for bf16 training, or in bf16 when asked; weights are
 * gathered in bf16 (LOOM_MEM_PARAM_BYTES).
 *
 * Hybrid sharding (HSDP: PyTorch FSDP's HYBRID_SHARD, FSDP2's dp_shard ×
 * dp_replicate mesh in torchtitan, MiCS, Megatron's distributed-optimizer
 * instances): the ZeRO-sharded state is divided over a shard group of
 * `shard` consecutive ranks of the data-parallel group (often a node) and
 * replicated over the dp / shard groups. The reduce-scatters and gathers
 * above then span the shard group, and the sharded gradients (1/shard of
 * them) are all-reduced over the replica group of dp / shard ranks, once
 * per step: on the last micro-batch's backward (FSDP2's
 * set_requires_all_reduce, "gradient accumulation with only reduce-scatter
 * but not all-reduce for HSDP"; one call per block or bucket, as the
 * reduce-scatter). shard 0 (or >= dp) is full sharding: no replica op.
 */
#ifndef LOOM_DP_SYNC_H
#define LOOM_DP_SYNC_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/collective.h"

typedef struct {
    loom_collective kind;
    double bytes;       /* the collective's buffer, per GPU (collective.h) */
    double per_step;    /* how many times a step runs it */
    double calls;       /* separate NCCL calls it is split into (buckets, blocks;
                           < 1 counts as 1): each pays the collective's latency */
    bool replica;       /* runs over HSDP's replica group (else the shard group,
                           which is the whole group without hybrid sharding) */
} loom_dp_sync_op;

#define LOOM_DP_SYNC_MAX_OPS 3

/* The collectives syncing n parameters under ZeRO stage `zero` (0..3) with
 * micro_batches per step (< 1 counts as 1); returns how many (<= 2). */
int loom_dp_sync_ops(double n, int zero, bool grad_bf16, int64_t micro_batches,
                     loom_dp_sync_op out[LOOM_DP_SYNC_MAX_OPS]);

/* What the framework-aware rule needs (loom_dp_sync_ops_ex). */
typedef struct {
    double params;           /* parameters synced over the group */
    int zero;                /* 0..3 (Megatron's distributed optimizer = 1) */
    int framework;           /* loom_framework (parallel.h) */
    bool grad_reduce_bf16;   /* Megatron --grad-reduce-in-bf16, FSDP reduce_dtype bf16 */
    bool full_recompute;     /* the backward reruns each block's forward */
    int64_t micro_batches;   /* per step (< 1 counts as 1) */
    int64_t blocks;          /* transformer blocks the params belong to (>= 1) */
    int64_t dp;              /* data-parallel degree (Megatron's bucket size grows with it) */
    bool pipelined;          /* pp > 1: torchtitan keeps FSDP's weights gathered */
    int64_t shard;           /* HSDP: ranks of the shard group, a divisor of dp
                                (0 or >= dp = all of it: full sharding) */
} loom_dp_sync_in;

/* HSDP's two groups inside data-parallel group grp (dp order: the shard
 * group's ranks consecutive, torchtitan's [dp_replicate, dp_shard] mesh
 * and FSDP1's intra-node shard group): the shard group of `shard` ranks,
 * min(shard, grp.ranks_per_node) of them in a node, and the replica group
 * of grp.ranks / shard ranks `shard` apart, grp.ranks_per_node / shard of
 * them in a node (1 when a shard group fills a node or more). shard 0 or
 * >= grp.ranks: the whole group and a one-rank replica group. */
void loom_dp_sync_groups(loom_group grp, int64_t shard, loom_group *shard_grp,
                         loom_group *replica_grp);

/* Per framework (parallel.h's loom_framework):
 *   reduce dtype   megatron fp32 (bf16 if asked), deepspeed 2 bytes,
 *                  torchtitan fp32 (FSDP2 reduce_dtype, torchtitan's default;
 *                  bf16 if asked: mixed_precision_reduce, FMS-FSDP's bfSixteen)
 *   calls          ZeRO-3 / FSDP: one gather and one reduce-scatter per
 *                  block per pass (DeepSpeed's per-submodule fetches are
 *                  coalesced by its prefetch bucket into about one per
 *                  block); otherwise buckets: Megatron max(40M, 1M·dp)
 *                  parameters, DeepSpeed 5e8 elements, torchtitan (FSDP2
 *                  even at ZeRO-1/2) one per block
 *   ZeRO-3 gathers per micro-batch: forward + backward (2); DeepSpeed
 *                  refetches for the recomputed forward (3); FSDP2 gathers
 *                  once for recompute + backward. torchtitan under pipeline
 *                  parallelism gathers once per step and reduce-scatters once
 *                  per step: it sets reshard_after_forward=False with PP "to
 *                  avoid per-microbatch all-gathers" (parallelize_llama.py,
 *                  apply_fsdp), and PyTorch's pipeline stage turns gradient
 *                  sync and resharding off but for the last backward
 *                  (torch/distributed/pipelining/stage.py,
 *                  backward_maybe_with_nosync).
 * With hybrid sharding (in->shard < in->dp, ZeRO >= 1) a third op, the
 * replica all-reduce (replica = true). Returns how many (<= 3). */
int loom_dp_sync_ops_ex(const loom_dp_sync_in *in, loom_dp_sync_op out[LOOM_DP_SYNC_MAX_OPS]);

/* Seconds per step of the synchronisation `in` over group grp: each
 * collective split into its calls, every call paying the latency, over the
 * shard or the replica group (loom_dp_sync_groups). The one
 * price of a data-parallel sync: loom eval (eval.c) and the stage search's
 * replica sync (solver/stage_costs.c). 0 for one rank or no parameters. */
double loom_dp_sync_time_s(const loom_cluster *c, const loom_calib *cal, const loom_dp_sync_in *in,
                           loom_group grp);

/* ZeRO-3 / FSDP prefetch: the weights of block i+1 are gathered while
 * block i computes (FSDP2's implicit forward prefetch and explicit backward
 * prefetch, DeepSpeed's prefetch bucket, Megatron-FSDP's), and block i's
 * gradients are reduce-scattered while block i-1's backward runs. Only the
 * first gather of each forward (nothing runs before it) and the last
 * reduce-scatter of each backward (nothing runs after it) cannot hide:
 *     unhidden = micro_batches · (t_gather(one block) + t_scatter(one block))
 * (once per step, not per micro-batch, where the weights stay gathered:
 * torchtitan with pipelining, above); with hybrid sharding, plus the last
 * block's replica all-reduce, once per step (each block's runs while the
 * backward of the blocks before it does)
 * seconds per step; the rest of the sync hides while compute lasts
 * (pipeline.h's window). 0 below ZeRO-3 (those syncs hide up to the fitted
 * grad_sync_overlap) or for one rank.
 * DeepSpeed prefetches only stage3_prefetch_bucket_size parameter elements
 * ahead (LOOM_DEEPSPEED_PREFETCH_ELEMS, its documented default), fetching
 * the rest of a submodule when it runs: of every gather but the first, the
 * share beyond min(1, bucket / a block's parameters) is unhidden too. For
 * GPT-3 175B (1.8B parameters a block) 97% of the gathers are exposed. */
#define LOOM_DEEPSPEED_PREFETCH_ELEMS 5e7
double loom_dp_sync_unhidden_s(const loom_cluster *c, const loom_calib *cal,
                               const loom_dp_sync_in *in, loom_group grp);

/* Gradient bytes per parameter the framework keeps and reduces. */
double loom_dp_sync_grad_bytes(int framework, bool grad_reduce_bf16);

#endif
