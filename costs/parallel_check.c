/*
 * parallel_check.c — is a Megatron-style configuration possible at all?
 * (loom_parallel_check, declared in parallel.h.)
 *
 * The rules are Megatron-LM's own (megatron/training/arguments.py and
 * megatron/core/parallel_state.py) plus DeepSpeed's for ZeRO:
 *   - every degree, mbs, gbs, seq, vpp >= 1; zero in 0..3;
 *   - tp · pp · dp · cp = the cluster's GPUs (the world size);
 *   - heads % tp = 0; kv heads divisible by tp, or tp by kv heads (kv heads
 *     are then replicated);
 *   - pp <= layers, and layers divisible by pp (by pp · vpp when
 *     interleaving), unless the first / last stage sizes are given;
 *   - vpp > 1 needs pp > 1;
 *   - gbs % (mbs · dp) = 0 (micro-batches per step is an integer);
 *   - sequence parallelism shards s over tp (and context parallelism over
 *     cp, in 2·cp load-balanced chunks): seq % (tp · cp) = 0, seq % 2cp = 0;
 *   - context parallelism runs ring attention over a fused attention kernel;
 *   - experts: ep > 1 needs a MoE model, experts % ep = 0; with tp > 1 it
 *     needs sequence parallelism; the expert TP degree divides tp; and
 *     (tp·cp·dp) % (etp·ep) = 0: Megatron-Core folds the expert groups over
 *     the same ranks as attention's tp·cp·dp (MoE parallel folding), so an
 *     expert-parallel group may span tensor-parallel ranks when etp < tp;
 *   - ZeRO-2/3 cannot be combined with pipeline parallelism (DeepSpeed,
 *     Megatron; torchtitan runs FSDP under its pipeline schedules),
 *     and ZeRO (DeepSpeed) and Megatron's distributed optimizer are two
 *     names for one choice: pick one;
 *   - TP communication overlap needs sequence parallelism.
 * Each message names the options and their values, so the CLI can print it
 * as is.
 */
#include "costs/parallel.h"

#include <stdio.h>

static loom_status bad(loom_error *err, const char *fmt, const char *a, long long x)
{
    char buf[256];
    snprintf(buf, sizeof buf, fmt, a, x);
    return loom_error_set(err, LOOM_ERR_INVALID, "impossible configuration: %s", buf);
}

loom_status loom_parallel_check(const loom_parallel *p, const loom_model_info *m, int64_t gpus,
                                loom_error *err)
{
    const struct { const char *name; int64_t v; } pos[] = {
        {"--tp", p->tp}, {"--pp", p->pp}, {"--dp", p->dp}, {"--cp", p->cp}, {"--ep", p->ep},
        {"--vpp", p->vpp}, {"--mbs", p->mbs}, {"--gbs", p->gbs}, {"--seq", p->seq},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v < 1)
            return bad(err, "%s must be >= 1, found %lld", pos[i].name, (long long)pos[i].v);
    if (p->etp < 0) return bad(err, "%s must be >= 0, found %lld", "expert tp", (long long)p->etp);
    if (p->zero < 0 || p->zero > 3) return bad(err, "%s must be 0, 1, 2 or 3, found %lld", "--zero", (long long)p->zero);
    if (p->recompute_layers < 0)
        return bad(err, "%s must be >= 0, found %lld", "recompute layers",
                   (long long)p->recompute_layers);

    int64_t world = p->tp * p->pp * p->dp * p->cp;
    if (gpus > 0 && world != gpus)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: tp %lld × pp %lld × dp %lld × cp %lld = "
                              "%lld GPUs, but the cluster has %lld",
                              (long long)p->tp, (long long)p->pp, (long long)p->dp,
                              (long long)p->cp, (long long)world, (long long)gpus);
    if (p->gbs % (p->mbs * p->dp) != 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: --gbs %lld is not a multiple of --mbs "
                              "%lld × --dp %lld = %lld",
                              (long long)p->gbs, (long long)p->mbs, (long long)p->dp,
                              (long long)(p->mbs * p->dp));
    if (p->fsdp_shard < 0 || (p->fsdp_shard > 0 && p->dp % p->fsdp_shard != 0))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: --fsdp-shard %lld must divide --dp %lld "
                              "(the shard groups tile the data-parallel group)",
                              (long long)p->fsdp_shard, (long long)p->dp);
    if (p->fsdp_shard > 0 && p->fsdp_shard < p->dp) {
        int64_t replicas = p->dp / p->fsdp_shard, edp = loom_parallel_expert_dp(p);
        if (p->zero < 1 && !p->dist_opt)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "impossible configuration: --fsdp-shard %lld shards the "
                                  "optimizer state, but --zero is 0 (use --zero 1..3 or "
                                  "--dist-opt)", (long long)p->fsdp_shard);
        if (edp % replicas != 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "impossible configuration: --fsdp-shard %lld makes %lld "
                                  "replicas, which do not divide the %lld expert data-parallel "
                                  "ranks", (long long)p->fsdp_shard, (long long)replicas,
                                  (long long)edp);
    }
    if (p->cpu_offload_layers < 0)
        return bad(err, "%s must be >= 0, found %lld", "--cpu-offload-layers",
                   (long long)p->cpu_offload_layers);
    if (p->cpu_offload_layers > 0) {
        /* Megatron-Core's TransformerConfig refuses the others */
        if (p->pp > 1)
            return bad(err, "%s works without pipeline parallelism only (Megatron-Core); found "
                            "--pp %lld", "CPU activation offloading", (long long)p->pp);
        if (p->recompute != LOOM_RECOMPUTE_NONE)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "impossible configuration: CPU activation offloading does not "
                                  "work with activation recomputation (Megatron-Core); found "
                                  "--recompute %s", loom_recompute_name(p->recompute));
        if (m && p->cpu_offload_layers >= m->layers)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "impossible configuration: --cpu-offload-layers %lld must be "
                                  "below the model's %lld layers (Megatron-Core keeps the last "
                                  "on the GPU)", (long long)p->cpu_offload_layers,
                                  (long long)m->layers);
    }
    if (p->vpp > 1 && p->pp < 2)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: --vpp %lld (interleaved schedule) needs "
                              "--pp >= 2, found %lld", (long long)p->vpp, (long long)p->pp);
    if (p->sp && p->seq % (p->tp * p->cp) != 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: --sp shards the sequence over tp × cp = "
                              "%lld ranks, but --seq %lld is not divisible by it",
                              (long long)(p->tp * p->cp), (long long)p->seq);
    if (p->cp > 1 && p->seq % (2 * p->cp) != 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: --cp %lld splits the sequence into 2·cp = "
                              "%lld chunks, but --seq %lld is not divisible by it",
                              (long long)p->cp, (long long)(2 * p->cp), (long long)p->seq);
    if (p->cp > 1 && !p->flash)
        return bad(err, "%s needs fused (flash) attention; found --cp %lld with unfused attention",
                   "context parallelism", (long long)p->cp);
    if (p->zero >= 2 && p->pp > 1 && p->framework != LOOM_FRAMEWORK_TORCHTITAN)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: --zero %d cannot be combined with "
                              "pipeline parallelism (--pp %lld); DeepSpeed allows ZeRO-0/1 with "
                              "pipelines", p->zero, (long long)p->pp);
    if (p->zero > 0 && p->dist_opt)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: --zero %d and --dist-opt both shard the "
                              "optimizer (DeepSpeed vs Megatron); pick one", p->zero);
    if (p->tp_comm_overlap && !p->sp)
        return loom_error_set(err, LOOM_ERR_INVALID, "impossible configuration: TP communication "
                              "overlap needs sequence parallelism (--sp)");
    if (p->ep > 1 && p->tp > 1 && !p->sp)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: expert parallelism (--ep %lld) with tensor "
                              "parallelism (--tp %lld) needs sequence parallelism (--sp), as in "
                              "Megatron-LM", (long long)p->ep, (long long)p->tp);
    if (p->etp > 0 && (p->etp > p->tp || p->tp % p->etp != 0))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: expert tensor parallelism --etp %lld must "
                              "divide --tp %lld", (long long)p->etp, (long long)p->tp);
    /* transformer_config.py's checks of overlap_moe_expert_parallel_comm */
    if (p->moe_a2a_overlap && p->ep < 2)
        return bad(err, "%s needs expert parallelism; found --ep %lld",
                   "expert-parallel all-to-all overlap", (long long)p->ep);
    if (p->moe_hybridep && p->ep < 2)
        return bad(err, "%s needs expert parallelism; found --ep %lld",
                   "the HybridEP token dispatcher", (long long)p->ep);
    if (p->moe_a2a_overlap && p->pp > 1 && p->vpp < 2)
        return bad(err, "%s with --pp %lld needs the interleaved schedule (--vpp > 1), as in "
                   "Megatron-LM", "expert-parallel all-to-all overlap", (long long)p->pp);
    if (p->moe_a2a_overlap && p->recompute == LOOM_RECOMPUTE_FULL)
        return loom_error_set(err, LOOM_ERR_INVALID, "impossible configuration: expert-parallel "
                              "all-to-all overlap cannot be combined with full recompute "
                              "(Megatron-LM refuses it)");
    if ((p->tp * p->dp * p->cp) % (loom_parallel_expert_tp(p) * p->ep) != 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: --ep %lld × expert TP %lld must divide "
                              "tp × dp × cp = %lld (Megatron-Core folds the expert groups over "
                              "those ranks)", (long long)p->ep, (long long)loom_parallel_expert_tp(p),
                              (long long)(p->tp * p->dp * p->cp));
    if (!m) return LOOM_OK;

    if (m->heads > 0 && m->heads % p->tp != 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: %lld attention heads are not divisible "
                              "by --tp %lld", (long long)m->heads, (long long)p->tp);
    if (m->kv_heads > 0 && m->kv_heads % p->tp != 0 && p->tp % m->kv_heads != 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: %lld kv heads neither divide nor are "
                              "divisible by --tp %lld", (long long)m->kv_heads, (long long)p->tp);
    if (p->ep > 1 && m->experts == 0)
        return bad(err, "%s needs a mixture-of-experts model; found --ep %lld on a dense model",
                   "expert parallelism", (long long)p->ep);
    if (m->experts > 0 && m->experts % p->ep != 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "impossible configuration: %lld experts are not divisible by --ep "
                              "%lld", (long long)m->experts, (long long)p->ep);
    if (m->layers > 0) {
        int64_t L = m->layers, ends = p->first_stage_layers + p->last_stage_layers;
        if (p->pp > L)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "impossible configuration: --pp %lld stages but the model has "
                                  "only %lld layers", (long long)p->pp, (long long)L);
        if (ends > 0) {
            int64_t mid = p->pp - (p->first_stage_layers > 0) - (p->last_stage_layers > 0);
            if (p->first_stage_layers < 0 || p->last_stage_layers < 0 || ends > L ||
                (mid > 0 ? (L - ends) % mid != 0 || L - ends < mid : L != ends))
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "impossible configuration: first/last stage layers %lld/%lld "
                                      "leave %lld layers that do not split evenly over the other "
                                      "%lld stages", (long long)p->first_stage_layers,
                                      (long long)p->last_stage_layers, (long long)(L - ends),
                                      (long long)mid);
            if (p->vpp > 1)
                return loom_error_set(err, LOOM_ERR_INVALID,
                                      "impossible configuration: --vpp cannot be combined with "
                                      "uneven first/last stages");
        } else if (L % (p->pp * p->vpp) != 0)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "impossible configuration: %lld layers do not split evenly into "
                                  "--pp %lld × --vpp %lld = %lld model chunks", (long long)L,
                                  (long long)p->pp, (long long)p->vpp,
                                  (long long)(p->pp * p->vpp));
    }
    return LOOM_OK;
}
