/*
 * export_vllm.c — a serving configuration as a vLLM YAML file for
 * `vllm serve MODEL --config FILE` (keys are the long option names without
 * the dashes, docs.vllm.ai "Server Arguments": the command line wins over
 * the file, so MODEL stays on the command line).
 *
 * Mapping (loom → vLLM engine arguments):
 *   TP, PP, DP        tensor-parallel-size, pipeline-parallel-size, data-parallel-size
 *   EP                enable-expert-parallel: vLLM's expert-parallel group is
 *                     all TP × DP ranks of a stage, so EP must be 1 or TP × DP
 *   batch             max-num-seqs = concurrent sequences of one replica,
 *                     max-model-len = sequence length,
 *                     max-num-batched-tokens = micro-batch × sequence (one
 *                     prefill step of the plan's micro-batch)
 *   uneven stages     VLLM_PP_LAYER_PARTITION="a,b,…" (an environment
 *                     variable, given as a comment and a note: YAML cannot
 *                     set it), written whenever the stages are not all equal
 *   dtype             bf16 → bfloat16, fp16 → float16, fp8 → bfloat16 with
 *                     quantization: fp8
 */
#include <string.h>

#include "planner/export/export_target.h"

void loom_export_check_vllm(const loom_runtime_config *c, const int32_t *chunks,
                            loom_export_list *obs)
{
    const loom_parallel *p = &c->par;
    const loom_model_info *m = &c->model;
    if (p->cp > 1)
        loom_export_list_add(obs,
                             "context parallelism (CP %lld): vLLM splits no sequence over GPUs",
                             (long long)p->cp);
    if (p->vpp > 1)
        loom_export_list_add(obs, "%lld virtual pipeline stages: vLLM runs one model chunk per "
                                  "pipeline rank",
                             (long long)p->vpp);
    if (m->heads % p->tp)
        loom_export_list_add(obs, "TP %lld does not divide the %lld attention heads",
                             (long long)p->tp, (long long)m->heads);
    /* vLLM replicates kv heads when TP exceeds them (TP a multiple of kvh),
     * else it shards them: either way one divides the other. */
    if (m->kv_heads > 0 && m->kv_heads % p->tp && p->tp % m->kv_heads)
        loom_export_list_add(obs, "TP %lld and the %lld key/value heads: neither divides the other",
                             (long long)p->tp, (long long)m->kv_heads);
    if (m->experts > 0 && p->ep > 1 && p->ep != p->tp * p->dp)
        loom_export_list_add(obs,
                             "EP %lld: vLLM's expert parallelism spans all TP x DP = %lld ranks "
                             "of a stage (enable-expert-parallel), or none",
                             (long long)p->ep, (long long)(p->tp * p->dp));
    if (m->experts > 0 && p->ep > 1 && p->etp > 1)
        loom_export_list_add(obs, "expert TP %lld: with expert parallelism vLLM keeps each "
                                  "expert whole (expert TP 1)",
                             (long long)p->etp);
    for (int64_t i = 0; i < p->pp; i++)
        if (chunks[i] == 0) {
            loom_export_list_add(obs,
                                 "pipeline stage %lld holds no transformer layer; "
                                 "VLLM_PP_LAYER_PARTITION gives every stage at least one",
                                 (long long)i);
            break;
        }
}

static const char *vllm_dtype(loom_dtype d)
{
    return d == LOOM_DTYPE_FP16 ? "float16" : "bfloat16";
}

loom_status loom_export_write_vllm(const loom_runtime_config *c, const int32_t *chunks,
                                   const char *source, FILE *f, loom_export_list *notes,
                                   loom_error *err)
{
    (void)err;
    const loom_parallel *p = &c->par;
    int64_t pp = p->pp;
    /* Any split but the all-equal one is spelt out rather than left to
     * vLLM's own rule for the remainder. */
    bool custom = !loom_export_chunks_even(chunks, (int32_t)pp);
    char partition[LOOM_EXPORT_ITEM_MAX] = "";
    if (custom) {
        size_t len = 0;
        for (int64_t i = 0; i < pp && len < sizeof partition; i++)
            len += (size_t)snprintf(partition + len, sizeof partition - len, "%s%d", i ? "," : "",
                                    (int)chunks[i]);
        loom_export_list_add(notes, "uneven stages: export VLLM_PP_LAYER_PARTITION=%s before "
                                    "vllm serve",
                             partition);
    }
    bool spans_nodes = p->tp * p->pp > c->gpus_per_node;
    if (spans_nodes)
        loom_export_list_add(notes,
                             "one replica spans %lld GPUs, more than a node: start a Ray cluster "
                             "over its nodes first",
                             (long long)(p->tp * p->pp));

    loom_export_header(f, "#", LOOM_EXPORT_VLLM, c, source);
    fprintf(f, "# Serve with:  vllm serve MODEL --config THIS_FILE\n");
    if (c->model_name[0]) {
        fputs("# (MODEL: the Hugging Face id or checkpoint directory of ", f);
        loom_export_put_comment_text(f, c->model_name);
        fputs(")\n", f);
    }
    for (int i = 0; notes && i < notes->n; i++) {
        fputs("# note: ", f);
        loom_export_put_comment_text(f, notes->item[i]);
        fputc('\n', f);
    }
    fprintf(f, "tensor-parallel-size: %lld\n", (long long)p->tp);
    fprintf(f, "pipeline-parallel-size: %lld\n", (long long)p->pp);
    fprintf(f, "data-parallel-size: %lld\n", (long long)p->dp);
    if (c->model.experts > 0 && p->ep > 1) fprintf(f, "enable-expert-parallel: true\n");
    if (spans_nodes) fprintf(f, "distributed-executor-backend: ray\n");
    fprintf(f, "max-num-seqs: %lld\n", (long long)c->max_num_seqs);
    fprintf(f, "max-num-batched-tokens: %lld\n", (long long)c->max_num_batched_tokens);
    fprintf(f, "max-model-len: %lld\n", (long long)c->max_model_len);
    fprintf(f, "gpu-memory-utilization: %.2f\n", c->gpu_memory_utilization);
    fprintf(f, "dtype: %s\n", vllm_dtype(p->dtype));
    if (p->dtype == LOOM_DTYPE_FP8) fprintf(f, "quantization: fp8\n");
    return LOOM_OK;
}
