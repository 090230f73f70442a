/*
 * parallel.h — a Megatron-style parallel configuration, as a plain value.
 *
 * This is the common language of `loom eval`, the `grid`/`genetic`/`rules`
 * search algorithms, `loom eval --from-megatron` and the exporters: the
 * degrees of each kind of parallelism plus batch, recompute and optimizer
 * sharding choices. The Alpa planner's plans are richer (per-op specs,
 * per-stage meshes); when such a plan is uniform it maps onto this struct.
 *
 * Invariant checked by loom_parallel_check: tp·pp·dp·cp = GPUs, ep divides
 * dp·cp (experts are spread over data-parallel ranks, as in Megatron), gbs is
 * a multiple of mbs·dp, and the model's heads, kv heads and layers divide.
 */
#ifndef LOOM_PARALLEL_H
#define LOOM_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>
#include "graph/graph.h"

typedef enum {
    LOOM_RECOMPUTE_NONE,
    LOOM_RECOMPUTE_SELECTIVE,   /* attention core only (Korthikanti et al.) */
    LOOM_RECOMPUTE_FULL,        /* every layer keeps only its input */
} loom_recompute;

typedef enum {
    LOOM_SCHED_1F1B,
    LOOM_SCHED_INTERLEAVED,     /* 1F1B with vpp virtual stages per device */
} loom_schedule;

/* The training framework a plan is for: the same degrees cost differently
 * (dp_sync.h, memory.h).
 *   megatron    fp32 main gradients, reduced in fp32 (unless
 *               --grad-reduce-in-bf16) in 40M-parameter buckets; bf16
 *               weights + fp32 master/Adam state (2 + 4 + 12 B/param)
 *   deepspeed   bf16/fp16 gradients reduced in 2 bytes in 5e8-element
 *               buckets; ZeRO-3 fetches each block's weights before its
 *               forward, backward and recomputed forward (2 + 2 + 12)
 *   torchtitan  FSDP2: fp32 sharded weights, gathered in bf16 per block with
 *               prefetch, reduce-scattered per block in fp32 (2 + 4 + 12);
 *               FSDP runs under pipeline parallelism (ZeRO-2/3 with pp) */
typedef enum {
    LOOM_FRAMEWORK_MEGATRON,
    LOOM_FRAMEWORK_DEEPSPEED,
    LOOM_FRAMEWORK_TORCHTITAN,
    LOOM_FRAMEWORK_COUNT
} loom_framework;

typedef struct {
    int64_t tp, pp, dp, cp, ep;  /* tensor, pipeline, data, context, expert degrees */
    int64_t etp;                 /* expert tensor-parallel degree (0 = same as tp) */
    int64_t vpp;                 /* virtual stages per pipeline rank (1 = plain 1F1B) */
    int64_t mbs, gbs;            /* micro-batch and global batch, in sequences */
    int64_t seq;                 /* sequence length, tokens */
    bool sp;                     /* Megatron sequence parallelism */
    loom_recompute recompute;
    int64_t recompute_layers;    /* full recompute: the first this many blocks of each
                                    virtual chunk recomputed (Megatron's block method;
                                    a rank's stage when vpp = 1); 0 = all */
    int64_t cpu_offload_layers;  /* Megatron's --cpu-offloading-num-layers: the activations of
                                    the first N blocks go to host memory in the forward and
                                    come back for the backward (Transformer Engine's offload
                                    context); pp 1, no recompute; 0 = none */
    uint32_t recompute_modules;  /* selective recompute: Megatron's --recompute-modules as
                                    LOOM_RC_* bits (recompute.h); 0 = its default, core_attn */
    int zero;                    /* ZeRO stage 0..3 */
    bool dist_opt;               /* Megatron distributed optimizer (= ZeRO-1) */
    loom_dtype dtype;            /* compute dtype: bf16, fp16, fp8 */
    bool flash;                  /* fused attention (no s² activations) */
    int64_t first_stage_layers;  /* uneven stages: layers on the first / last stage */
    int64_t last_stage_layers;   /* (0 = even split) */
    bool overlap_grad_reduce;    /* DP gradient reduction overlapped with backward (default on) */
    bool overlap_p2p;            /* Megatron's overlap_p2p_comm: the interleaved schedule's
                                    transfers overlapped with compute (default on, as
                                    Megatron with vpp > 1; --no-overlap-p2p-communication) */
    bool moe_a2a_overlap;        /* Megatron's --overlap-moe-expert-parallel-comm: one
                                    micro-batch's expert all-to-alls beside another's
                                    compute (costs/moe_overlap.h; default off) */
    bool moe_hybridep;           /* Megatron's flex token dispatcher with the HybridEP backend
                                    (--moe-token-dispatcher-type flex --moe-flex-dispatcher-
                                    backend hybridep): one kernel writes every peer's tokens
                                    directly, one latency per all-to-all (collective.h
                                    loom_group_all_to_all_direct_s); default off: NCCL's */
    bool tp_comm_overlap;        /* TP collectives overlapped with their GEMMs (needs sp) */
    bool grad_reduce_bf16;       /* DP gradients reduced in bf16 (Megatron --grad-reduce-in-bf16,
                                    FSDP reduce_dtype bf16; default fp32, as Megatron and
                                    torchtitan do for bf16 training) */
    loom_framework framework;    /* whose semantics (default megatron) */
    int64_t fsdp_shard;          /* hybrid sharding (HSDP): data-parallel ranks the ZeRO-
                                    sharded state is divided over, replicated over the
                                    dp / fsdp_shard groups (torchtitan's dp_shard, FSDP1's
                                    HYBRID_SHARD node); 0 = all of dp: full sharding */
} loom_parallel;

/* Defaults: every degree 1, mbs 1, gbs 1, seq 2048, bf16, flash, 1F1B, no SP,
 * no recompute, ZeRO 0, gradient reduction and interleaved p2p overlapped, no
 * TP comm overlap. */
void loom_parallel_init(loom_parallel *p);

/* Megatron-Core's MoE parallel folding (parallel_state.py, the expert
 * RankGenerator over the tp · cp · dp ranks of a pipeline stage, in the
 * order etp-ep-edp): the expert layers' own tensor-parallel degree (etp,
 * or tp when unset) and the expert data-parallel degree
 * edp = tp · cp · dp / (etp · ep) over which each expert is replicated. */
int64_t loom_parallel_expert_tp(const loom_parallel *p);
int64_t loom_parallel_expert_dp(const loom_parallel *p);

/* HSDP (fsdp_shard): the ranks that a data-parallel group of `group`
 * ranks (dp·cp for the dense weights, the expert data-parallel group for
 * the experts) shards its ZeRO state over: group / r for r = dp /
 * fsdp_shard replicas (torchtitan's dp_replicate, which the expert mesh
 * shares); the whole group without hybrid sharding or when r does not
 * divide it (loom_parallel_check rejects that). */
int64_t loom_parallel_shard_ranks(const loom_parallel *p, int64_t group);

/* Megatron-Core's even split with --account-for-embedding/loss-in-pipeline-
 * split: U = L + e + l units (e, l = 1 when the embedding / the loss count
 * as a layer) over n chunks, U / n each, less e on chunk 0 and l on the
 * last (a chunk may hold only the embedding or the loss). False when n does
 * not divide U or a chunk would go negative. */
bool loom_parallel_units_split(int64_t L, int64_t e, int64_t l, int64_t n, int32_t *chunks);

/* Checks p against the model (m: heads, kv heads, layers, experts; zero
 * fields are not checked) and a cluster of `gpus` GPUs (0 = not checked):
 * tp·pp·dp·cp = gpus, heads and kv heads divisible by tp, pp (× vpp) dividing
 * the layers, gbs a multiple of mbs·dp, … Each error names the options and
 * values at fault (costs/parallel_check.c). */
loom_status loom_parallel_check(const loom_parallel *p, const loom_model_info *m, int64_t gpus,
                                loom_error *err);

const char *loom_recompute_name(loom_recompute r);
const char *loom_framework_name(loom_framework f);
bool loom_framework_parse(const char *s, loom_framework *out);
bool loom_recompute_parse(const char *s, loom_recompute *out);

#endif
