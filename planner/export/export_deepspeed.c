/*
 * export_deepspeed.c — a training configuration as a DeepSpeed JSON config
 * (deepspeed.initialize(config=FILE); key names from deepspeed.ai "DeepSpeed
 * Configuration JSON" and the AutoTP training tutorial).
 *
 * Written for deepspeedai/DeepSpeed edaa7221267243c7be7fb49c5d5f5c4fb97b4641
 * (master, 2026-08-22), and checked there with DeepSpeed's own config
 * parsing (tools/deepspeed_check); ZeRO-3 with AutoTP needs eec237ee8
 * (2026-08-02) or later, AutoEP 7c3fbdc0d (2026-06-11), AutoEP with ZeRO-3
 * 02663d6e5 (2026-06-26).
 *
 * Mapping (loom → DeepSpeed):
 *   batch        train_micro_batch_size_per_gpu = mbs,
 *                gradient_accumulation_steps = micro-batches M, and
 *                train_batch_size = mbs · M · DP only where DeepSpeed's
 *                world size for its batch check (runtime/config.py
 *                _batch_assertion: train_batch = mbs · GAS · world) is the
 *                DP size: without TP, or with PP (PipelineModule hands its
 *                grid in as the mpu). AutoTP builds its TP groups after the
 *                config is read and passes no mpu, so the check counts every
 *                rank (DP · TP): train_batch_size is then left out and
 *                DeepSpeed derives it (a note says so)
 *   ZeRO         zero_optimization.stage (dist-opt = stage 1)
 *   TP           tensor_parallel.autotp_size (AutoTP training: ZeRO 0-3,
 *                no sequence parallelism)
 *   EP           expert_parallel {enabled, autoep_size} (AutoEP: DeepSpeed
 *                replaces the HF model's MoE blocks, found by model_type:
 *                Mixtral, DeepSeek-V2/V3, Qwen3-MoE). Not deepspeed.moe's
 *                MoE layer: DeepSpeed refuses it under ZeRO-3 since
 *                02663d6e5 (engine.py _validate_zero3_moe_compatibility).
 *                AutoEP with AutoTP ("folding", auto_ep_folding.py
 *                validate_folding_global) runs ZeRO 0-2, no PP, EP > 1
 *   PP           not a config key: the model is wrapped in
 *                deepspeed.pipe.PipelineModule(num_stages=PP) (a note);
 *                DeepSpeed's pipeline engine runs ZeRO 0/1 and no
 *                interleaving
 *   recompute    full: activation_checkpointing section; with PP also
 *                pipeline.activation_checkpoint_interval = 1, which the
 *                pipeline engine hands to PipelineModule (pipe/engine.py),
 *                without PP a note (the model's code checkpoints each layer);
 *                selective: none
 *   precision    bf16.enabled / fp16.enabled (dynamic loss scale)
 *
 * The JSON is written directly (fixed keys, integers and booleans only), in
 * the 2-space layout of loom_json_print, so the output is byte-stable.
 */
#include "planner/export/export_target.h"

void loom_export_check_deepspeed(const loom_runtime_config *c, const int32_t *chunks,
                                 loom_export_list *obs)
{
    const loom_parallel *p = &c->par;
    if (p->cp > 1)
        loom_export_list_add(obs, "context parallelism (CP %lld): DeepSpeed's config has no "
                                  "context-parallel degree",
                             (long long)p->cp);
    if (p->vpp > 1)
        loom_export_list_add(obs, "%lld virtual pipeline stages: DeepSpeed's pipeline engine has "
                                  "no interleaved schedule",
                             (long long)p->vpp);
    if (p->pp > 1 && p->zero >= 2)
        loom_export_list_add(obs, "ZeRO-%d with pipeline parallelism: DeepSpeed's pipeline engine "
                                  "runs ZeRO stage 0 or 1 only",
                             p->zero);
    if (p->tp > 1 && p->pp > 1)
        loom_export_list_add(obs, "TP %lld with PP %lld: DeepSpeed AutoTP training composes with "
                                  "data parallelism and ZeRO, not with the pipeline engine",
                             (long long)p->tp, (long long)p->pp);
    if (p->tp > 1 && p->sp)
        loom_export_list_add(obs, "sequence parallelism: DeepSpeed AutoTP replicates norm and "
                                  "dropout activations over the TP group");
    if (p->recompute == LOOM_RECOMPUTE_SELECTIVE)
        loom_export_list_add(obs, "selective recompute (attention only): DeepSpeed activation "
                                  "checkpointing recomputes whole layers");
    if (p->recompute == LOOM_RECOMPUTE_FULL && p->recompute_layers > 0)
        loom_export_list_add(obs,
                             "recompute of %lld layers per stage: DeepSpeed checkpoints every "
                             "layer (or every k-th layer boundary), not a fixed count per stage",
                             (long long)p->recompute_layers);
    if (p->dtype == LOOM_DTYPE_FP8)
        loom_export_list_add(obs, "fp8 compute: DeepSpeed's config enables bf16 or fp16 only "
                                  "(fp8 comes from Transformer Engine in the model code)");
    if (c->model.experts > 0 && p->ep > 1 && p->etp > 1)
        loom_export_list_add(obs, "expert TP %lld with EP %lld: DeepSpeed AutoEP keeps each expert "
                                  "whole on its expert-parallel rank (expert_tensor_parallel_size "
                                  "1 only)",
                             (long long)p->etp, (long long)p->ep);
    if (c->model.experts > 0 && p->ep > 1 && p->tp > 1 && loom_runtime_zero(c) == 3)
        loom_export_list_add(obs, "EP %lld with TP %lld under ZeRO-3: DeepSpeed's AutoEP+AutoTP "
                                  "folding runs ZeRO stage 0-2 only",
                             (long long)p->ep, (long long)p->tp);
    if (p->pp > 1 && !loom_export_chunks_even(chunks, (int32_t)p->pp))
        loom_export_list_add(obs, "uneven pipeline stages: DeepSpeed's PipelineModule partitions "
                                  "by a method (uniform, parameters, type:regex), not by explicit "
                                  "layer counts");
}

loom_status loom_export_write_deepspeed(const loom_runtime_config *c, const int32_t *chunks,
                                        const char *source, FILE *f, loom_export_list *notes,
                                        loom_error *err)
{
    (void)err;
    (void)source;
    const loom_parallel *p = &c->par;
    int64_t M = loom_runtime_microbatches(c);
    int zero = loom_runtime_zero(c);

    if (p->pp > 1)
        loom_export_list_add(notes,
                             "pipeline: wrap the model in deepspeed.pipe.PipelineModule(layers, "
                             "num_stages=%lld, partition_method='type:<decoder layer class>') so "
                             "each stage gets %d layers",
                             (long long)p->pp, (int)chunks[0]);
    if (p->recompute == LOOM_RECOMPUTE_FULL && p->pp == 1)
        loom_export_list_add(notes,
                             "full recompute: checkpoint every transformer layer in the model "
                             "code (deepspeed.checkpointing.checkpoint)");
    bool autoep = c->model.experts > 0 && p->ep > 1;
    if (autoep)
        loom_export_list_add(notes,
                             "expert parallelism: AutoEP (expert_parallel.autoep_size %lld) "
                             "replaces the MoE blocks of the HF model (Mixtral, DeepSeek-V2/V3, "
                             "Qwen3-MoE); needs DeepSpeed 7c3fbdc0d (2026-06-11) or later%s",
                             (long long)p->ep,
                             zero == 3 ? ", 02663d6e5 (2026-06-26) with ZeRO-3" : "");

    /* see the mapping above: AutoTP without a pipeline passes no mpu */
    bool world_is_dp = p->tp == 1 || p->pp > 1;
    if (!world_is_dp)
        loom_export_list_add(notes,
                             "batch: train_batch_size is left out; with AutoTP (TP %lld) and no "
                             "mpu DeepSpeed counts all %lld ranks in its batch check and derives "
                             "%lld; the model still sees %lld sequences per step (each TP group "
                             "reads one data-parallel shard)",
                             (long long)p->tp, (long long)(p->dp * p->tp),
                             (long long)(p->mbs * M * p->dp * p->tp), (long long)p->gbs);
    if (p->tp > 1 && zero == 3)
        loom_export_list_add(notes, "ZeRO-3 with AutoTP training needs DeepSpeed at eec237ee8 "
                                    "(2026-08-02) or later");
    fprintf(f, "{\n");
    if (world_is_dp) fprintf(f, "  \"train_batch_size\": %lld,\n", (long long)p->gbs);
    fprintf(f, "  \"train_micro_batch_size_per_gpu\": %lld,\n", (long long)p->mbs);
    fprintf(f, "  \"gradient_accumulation_steps\": %lld,\n", (long long)M);
    fprintf(f, "  \"gradient_clipping\": 1.0,\n");
    fprintf(f, "  \"bf16\": {\n    \"enabled\": %s\n  },\n",
            p->dtype == LOOM_DTYPE_FP16 ? "false" : "true");
    if (p->dtype == LOOM_DTYPE_FP16)
        fprintf(f, "  \"fp16\": {\n    \"enabled\": true,\n    \"loss_scale\": 0,\n"
                   "    \"initial_scale_power\": 16\n  },\n");
    else
        fprintf(f, "  \"fp16\": {\n    \"enabled\": false\n  },\n");
    fprintf(f, "  \"zero_optimization\": {\n    \"stage\": %d,\n    \"overlap_comm\": true,\n"
               "    \"contiguous_gradients\": true\n  },\n",
            zero);
    if (p->tp > 1)
        fprintf(f, "  \"tensor_parallel\": {\n    \"autotp_size\": %lld\n  },\n", (long long)p->tp);
    if (autoep)
        fprintf(f, "  \"expert_parallel\": {\n    \"enabled\": true,\n    \"autoep_size\": %lld\n  },\n",
                (long long)p->ep);
    if (p->recompute == LOOM_RECOMPUTE_FULL)
        fprintf(f, "  \"activation_checkpointing\": {\n    \"partition_activations\": false,\n"
                   "    \"contiguous_memory_optimization\": false,\n"
                   "    \"cpu_checkpointing\": false\n  },\n");
    if (p->recompute == LOOM_RECOMPUTE_FULL && p->pp > 1)
        fprintf(f, "  \"pipeline\": {\n    \"activation_checkpoint_interval\": 1\n  },\n");
    fprintf(f, "  \"steps_per_print\": 10,\n  \"wall_clock_breakdown\": false\n}\n");
    return LOOM_OK;
}
