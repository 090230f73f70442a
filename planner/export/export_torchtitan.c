/*
 * export_torchtitan.c — a training configuration as the [training],
 * [parallelism] and [activation_checkpoint] sections of a torchtitan TOML job
 * config (names from torchtitan/config/job_config.py, pytorch/torchtitan at
 * commit 000204a4a8bf3d0f31adc44fc29855fbb6ea13d8; merge them into a job file
 * that sets [model] name and flavor).
 *
 * Mapping (loom → torchtitan):
 *   DP, ZeRO-0     data_parallel_replicate_degree = DP (DDP)
 *   DP, ZeRO-3     data_parallel_shard_degree = DP (FSDP2)
 *   DP, ZeRO-2     the same with fsdp_reshard_after_forward = "never": the
 *                  parameters stay gathered from forward to backward
 *   TP, CP, PP     tensor/context/pipeline_parallel_degree; torchtitan's TP
 *                  always shards norms along the sequence (= Megatron SP)
 *   EP             expert_parallel_degree (borrowed from the FSDP × CP ranks)
 *   schedule       pipeline_parallel_schedule "1F1B" / "Interleaved1F1B",
 *                  split points "layers.k" at the first block of each chunk
 *                  (chunks in layer order, pp·vpp of them)
 *   batch          PP > 1: local_batch_size = mbs·M, microbatch size mbs
 *                  (one step, M micro-batches through the pipeline);
 *                  PP = 1: local_batch_size = mbs, global_batch_size = gbs
 *                  (torchtitan accumulates gbs / (mbs·DP) = M gradients)
 *   recompute      [activation_checkpoint] mode none / full / selective
 *                  ("op" policy); full on k of n layers per stage:
 *                  selective_ac_option = n/k (every (n/k)-th layer)
 *   precision      mixed_precision_param "bfloat16"; fp8 adds the float8
 *                  model converter
 */
#include "planner/export/export_target.h"

/* Layers per pipeline stage when the split is even (0 otherwise). */
static int64_t stage_layers(const loom_runtime_config *c, const int32_t *chunks)
{
    int32_t n = (int32_t)(c->par.pp * c->par.vpp);
    return loom_export_chunks_even(chunks, n) ? (int64_t)chunks[0] * c->par.vpp : 0;
}

void loom_export_check_torchtitan(const loom_runtime_config *c, const int32_t *chunks,
                                  loom_export_list *obs)
{
    const loom_parallel *p = &c->par;
    int32_t n = (int32_t)(p->pp * p->vpp);
    if (p->dtype == LOOM_DTYPE_FP16)
        loom_export_list_add(obs, "fp16: torchtitan's mixed precision is bfloat16 or float32");
    if (p->dist_opt && p->dp > 1)
        loom_export_list_add(obs, "ZeRO-1 (distributed optimizer): torchtitan has DDP (ZeRO-0) "
                                  "and FSDP (ZeRO-2/3), nothing that shards only the optimizer");
    if (p->vpp > 1 && p->pp < 2)
        loom_export_list_add(obs, "%lld virtual stages without pipeline parallelism",
                             (long long)p->vpp);
    if (c->model.experts > 0 && p->ep > 1) {
        if (p->zero < 2)
            loom_export_list_add(obs, "EP %lld with ZeRO-%d: torchtitan's expert parallelism "
                                      "borrows the FSDP ranks (data_parallel_shard_degree)",
                                 (long long)p->ep, loom_runtime_zero(c));
        else if ((p->dp * p->cp) % p->ep)
            loom_export_list_add(obs, "EP %lld does not divide the FSDP x CP ranks (%lld) it is "
                                      "carved from",
                                 (long long)p->ep, (long long)(p->dp * p->cp));
        if (p->etp > 0 && p->etp != p->tp)
            loom_export_list_add(obs, "expert TP %lld differs from TP %lld: torchtitan shards "
                                      "experts like the dense layers",
                                 (long long)p->etp, (long long)p->tp);
    }
    for (int32_t i = 1; i + 1 < n; i++)
        if (chunks[i] == 0) {
            loom_export_list_add(obs, "pipeline chunk %d holds no transformer layer: torchtitan "
                                      "splits at module names, one chunk per split point",
                                 (int)i);
            break;
        }
    if (p->recompute == LOOM_RECOMPUTE_FULL && p->recompute_layers > 0) {
        int64_t per = stage_layers(c, chunks);
        if (per == 0 || per % p->recompute_layers)
            loom_export_list_add(obs, "recompute of %lld layers per stage: torchtitan recomputes "
                                      "every N-th layer, which needs the stages' layers to be a "
                                      "multiple of it",
                                 (long long)p->recompute_layers);
    }
}

loom_status loom_export_write_torchtitan(const loom_runtime_config *c, const int32_t *chunks,
                                         const char *source, FILE *f, loom_export_list *notes,
                                         loom_error *err)
{
    (void)err;
    const loom_parallel *p = &c->par;
    int64_t M = loom_runtime_microbatches(c);
    int32_t n = (int32_t)(p->pp * p->vpp);

    if (p->tp > 1 && !p->sp)
        loom_export_list_add(notes, "torchtitan's tensor parallelism always shards norm and "
                                    "dropout activations along the sequence (Megatron's sequence "
                                    "parallelism): same communication, less memory than planned");
    if (p->recompute == LOOM_RECOMPUTE_SELECTIVE)
        loom_export_list_add(notes, "selective recompute runs as torchtitan's per-op policy, which "
                                    "keeps every other matmul output and recomputes the rest, "
                                    "not only attention");

    loom_export_header(f, "#", LOOM_EXPORT_TORCHTITAN, c, source);
    fprintf(f, "# Merge into a torchtitan job config that sets [model] name and flavor.\n");
    for (int i = 0; notes && i < notes->n; i++) {
        fputs("# note: ", f);
        loom_export_put_comment_text(f, notes->item[i]);
        fputc('\n', f);
    }

    fprintf(f, "\n[training]\n");
    fprintf(f, "local_batch_size = %lld\n", (long long)(p->pp > 1 ? p->mbs * M : p->mbs));
    fprintf(f, "global_batch_size = %lld\n", (long long)p->gbs);
    fprintf(f, "seq_len = %lld\n", (long long)p->seq);
    fprintf(f, "mixed_precision_param = \"bfloat16\"\n");

    fprintf(f, "\n[parallelism]\n");
    fprintf(f, "data_parallel_replicate_degree = %lld\n", (long long)(p->zero >= 2 ? 1 : p->dp));
    fprintf(f, "data_parallel_shard_degree = %lld\n", (long long)(p->zero >= 2 ? p->dp : 1));
    if (p->zero >= 2)
        fprintf(f, "fsdp_reshard_after_forward = \"%s\"\n", p->zero == 2 ? "never" : "default");
    fprintf(f, "tensor_parallel_degree = %lld\n", (long long)p->tp);
    fprintf(f, "context_parallel_degree = %lld\n", (long long)p->cp);
    if (c->model.experts > 0) fprintf(f, "expert_parallel_degree = %lld\n", (long long)p->ep);
    fprintf(f, "pipeline_parallel_degree = %lld\n", (long long)p->pp);
    if (p->pp > 1) {
        fprintf(f, "pipeline_parallel_schedule = \"%s\"\n",
                p->vpp > 1 ? "Interleaved1F1B" : "1F1B");
        fprintf(f, "pipeline_parallel_microbatch_size = %lld\n", (long long)p->mbs);
        /* chunk i starts at block sum(chunks[0..i)); an empty last chunk
         * holds only the final norm and output projection */
        fprintf(f, "pipeline_parallel_split_points = [");
        int64_t start = 0;
        for (int32_t i = 1; i < n; i++) {
            start += chunks[i - 1];
            if (start < c->model.layers)
                fprintf(f, "%s\"layers.%lld\"", i > 1 ? ", " : "", (long long)start);
            else
                fprintf(f, "%s\"norm\"", i > 1 ? ", " : "");
        }
        fprintf(f, "]\n");
    }

    fprintf(f, "\n[activation_checkpoint]\n");
    if (p->recompute == LOOM_RECOMPUTE_NONE) {
        fprintf(f, "mode = \"none\"\n");
    } else if (p->recompute == LOOM_RECOMPUTE_SELECTIVE) {
        fprintf(f, "mode = \"selective\"\nselective_ac_option = \"op\"\n");
    } else if (p->recompute_layers == 0) {
        fprintf(f, "mode = \"full\"\n");
    } else {
        fprintf(f, "mode = \"selective\"\nselective_ac_option = \"%lld\"\n",
                (long long)(stage_layers(c, chunks) / p->recompute_layers));
    }
    if (p->dtype == LOOM_DTYPE_FP8) fprintf(f, "\n[model]\nconverters = [\"float8\"]\n");
    return LOOM_OK;
}
