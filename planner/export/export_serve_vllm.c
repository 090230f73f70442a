/*
 * export_serve_vllm.c — one pool of a serving plan as a YAML file for
 * `vllm serve MODEL --config FILE` (export_serve.h). Keys are vLLM's long
 * option names, checked against vllm/engine/arg_utils.py (EngineArgs and
 * add_cli_args) and vllm/config/kv_transfer.py at the commits docs/export.md
 * names.
 *
 * Mapping (loom → vLLM):
 *   tp, pp                tensor-parallel-size, pipeline-parallel-size
 *   attention-DP ranks    data-parallel-size (MoE): vLLM's data-parallel
 *                         ranks each keep their own sequences while the MoE
 *                         layers span all of them, with
 *   ep = tp · dp          enable-expert-parallel (vLLM's EP group is every
 *                         TP × DP rank of a stage, or none)
 *   replicas              data-parallel-size for a dense model's aggregated
 *                         pool (vLLM balances requests over its DP engines);
 *                         otherwise separate servers, said in a note
 *   longest request       max-model-len
 *   KV fp8, weights fp8   kv-cache-dtype: fp8, quantization: fp8
 *   engine settings       max-num-seqs, max-num-batched-tokens, block-size,
 *                         gpu-memory-utilization — only when the plan
 *                         modelled vLLM's policy
 *   a P/D pool            kv-transfer-config: NixlConnector, kv_role kv_both
 *                         (the role vLLM's NIXL P/D runs on both sides)
 */
#include <string.h>

#include "planner/export/export_serve.h"
#include "planner/export/export_target.h"

/* The commit whose argument definitions the keys were checked against. */
#define VLLM_COMMIT "99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b"

void loom_serve_export_check_vllm(const loom_serve_export *x, const loom_serve_export_pool *p,
                                  loom_export_list *obstacles)
{
    if (p->ep > 1 && p->ep != p->tp * p->attn_dp)
        loom_export_list_add(obstacles, "EP %lld: vLLM's expert parallelism spans all TP x DP = "
                             "%lld ranks of a stage, or none", (long long)p->ep,
                             (long long)(p->tp * p->attn_dp));
    if (p->attn_dp > 1 && x->experts == 0)
        loom_export_list_add(obstacles, "attention data parallelism (%lld ranks) for a dense "
                             "model: vLLM's data-parallel ranks of one instance share MoE "
                             "layers, which %s has none of", (long long)p->attn_dp, x->arch);
}

void loom_serve_export_write_vllm(const loom_serve_export *x, const loom_serve_export_pool *p,
                                  const char *source, FILE *f, loom_export_list *notes)
{
    bool moe = x->experts > 0, same = !strcmp(x->engine, "vllm");
    bool pd = strcmp(p->role, "both") != 0;
    /* dense aggregated replicas ride in vLLM's data parallelism */
    int64_t dp = moe || pd ? p->attn_dp : p->instances;
    int64_t servers = moe || pd ? p->instances : 1;
    if (servers > 1)
        loom_export_list_add(notes, "start %lld servers with this file (the %s pool's instances) "
                             "behind one load balancer", (long long)servers,
                             pd ? p->role : "deployment");
    if (pd)
        loom_export_list_add(notes, "a proxy sends each request to a prefill server, then to a "
                             "decode server (vLLM's P/D proxy examples); the KV cache moves over "
                             "NIXL%s", x->kv_nvlink ? " inside the node" : " across nodes (RDMA)");
    bool ray = p->gpus_per_instance > x->gpus_per_node;
    if (ray)
        loom_export_list_add(notes, "one instance spans %lld GPUs, more than a node: start a Ray "
                             "cluster over its nodes first", (long long)p->gpus_per_instance);
    else if (dp > 1 && dp * p->tp * p->pp > x->gpus_per_node)
        loom_export_list_add(notes, "data-parallel-size %lld spans nodes: on each node add "
                             "--data-parallel-size-local and --data-parallel-address (the head "
                             "node)", (long long)dp);
    if (!same)
        loom_export_list_add(notes, "the plan modelled %s's policy: vLLM's own memory fraction "
                             "and batch caps apply (plan with --engine vllm for its figures)",
                             x->engine);
    if (!strcmp(x->weights, "int4"))
        loom_export_list_add(notes, "int4 weights: serve an AWQ or GPTQ checkpoint (vLLM reads "
                             "its method from the checkpoint)");
    if (!strcmp(x->weights, "nvfp4"))
        loom_export_list_add(notes, "nvfp4 weights: serve an NVFP4 checkpoint (ModelOpt; vLLM reads "
                             "its method from the checkpoint) on Blackwell GPUs");

    fprintf(f, "# Written by `loom export --to vllm` from ");
    loom_export_put_comment_text(f, source ? source : "a serving plan");
    fprintf(f, "\n# for vLLM (vllm-project/vllm %.8s): `vllm serve MODEL --config THIS_FILE`\n",
            VLLM_COMMIT);
    fprintf(f, "# (MODEL: the Hugging Face id or checkpoint directory of ");
    loom_export_put_comment_text(f, x->model);
    fprintf(f, ")\n# pool: %s, %lld instance%s of TP %lld x PP %lld", p->role,
            (long long)p->instances, p->instances > 1 ? "s" : "", (long long)p->tp,
            (long long)p->pp);
    if (p->attn_dp > 1) fprintf(f, " x attention-DP %lld", (long long)p->attn_dp);
    if (p->ep > 1) fprintf(f, ", EP %lld", (long long)p->ep);
    fprintf(f, " (%lld GPUs each)\n", (long long)p->gpus_per_instance);
    for (int i = 0; notes && i < notes->n; i++) {
        fputs("# note: ", f);
        loom_export_put_comment_text(f, notes->item[i]);
        fputc('\n', f);
    }
    fprintf(f, "tensor-parallel-size: %lld\n", (long long)p->tp);
    fprintf(f, "pipeline-parallel-size: %lld\n", (long long)p->pp);
    fprintf(f, "data-parallel-size: %lld\n", (long long)dp);
    if (moe && p->ep > 1) fprintf(f, "enable-expert-parallel: true\n");
    if (ray) fprintf(f, "distributed-executor-backend: ray\n");
    fprintf(f, "max-model-len: %lld\n", (long long)x->max_tokens);
    if (same) {
        fprintf(f, "max-num-seqs: %lld\n", (long long)p->max_num_seqs);
        fprintf(f, "max-num-batched-tokens: %lld\n", (long long)p->max_batched_tokens);
        fprintf(f, "block-size: %lld\n", (long long)p->block_size);
        fprintf(f, "gpu-memory-utilization: %.2f\n", p->mem_fraction);
    }
    if (!strcmp(x->kv_dtype, "fp8")) fprintf(f, "kv-cache-dtype: fp8\n");
    if (!strcmp(x->weights, "fp8")) fprintf(f, "quantization: fp8\n");
    if (pd) fprintf(f, "kv-transfer-config: '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'\n");
}
