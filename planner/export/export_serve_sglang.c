/*
 * export_serve_sglang.c — one pool of a serving plan as a bash script that
 * runs SGLang's server (`python3 -m sglang.launch_server`, export_serve.h).
 * Flags are ServerArgs' (python/sglang/srt/server_args.py at the commit
 * docs/export.md names); the model path, port and multi-node rank come from
 * the environment, so the script is the same on every host.
 *
 * Mapping (loom → SGLang):
 *   tp · attention-DP     --tp-size: SGLang's TP group is the whole stage;
 *                         with --enable-dp-attention --dp-size d the
 *                         attention runs TP tp/d in d ranks
 *   replicas              --dp-size of an aggregated pool without DP
 *                         attention (SGLang's data-parallel controller
 *                         balances requests); otherwise separate servers
 *   ep                    --ep-size (equal to --tp-size, as SGLang requires)
 *   pp                    --pp-size
 *   longest request       --context-length
 *   KV fp8, weights fp8   --kv-cache-dtype fp8_e4m3, --quantization fp8
 *   engine settings       --mem-fraction-static, --max-running-requests,
 *                         --chunked-prefill-size, --page-size — only when
 *                         the plan modelled SGLang's policy
 *   a P/D pool            --disaggregation-mode prefill|decode with the
 *                         mooncake transfer backend (SGLang's default); a
 *                         router (sglang_router.launch_router
 *                         --pd-disaggregation) fronts both pools
 *   > one node            --nnodes, --node-rank, --dist-init-addr
 */
#include <string.h>

#include "planner/export/export_serve.h"
#include "planner/export/export_target.h"

#define SGLANG_COMMIT "001067fffe33427bee0ed2f007fb7551a1d76b44"

void loom_serve_export_check_sglang(const loom_serve_export *x, const loom_serve_export_pool *p,
                                    loom_export_list *obstacles)
{
    if (p->ep > 1 && p->ep != p->tp * p->attn_dp)
        loom_export_list_add(obstacles, "EP %lld: SGLang's --ep-size equals its --tp-size (%lld, "
                             "the whole stage)", (long long)p->ep, (long long)(p->tp * p->attn_dp));
    if (p->attn_dp > 1 && x->experts == 0)
        loom_export_list_add(obstacles, "attention data parallelism (%lld ranks) for a dense "
                             "model: SGLang's --enable-dp-attention pairs it with tensor-parallel "
                             "FFN/MoE layers of MoE models", (long long)p->attn_dp);
}

void loom_serve_export_write_sglang(const loom_serve_export *x, const loom_serve_export_pool *p,
                                    const char *source, FILE *f, loom_export_list *notes)
{
    bool same = !strcmp(x->engine, "sglang"), pd = strcmp(p->role, "both") != 0;
    bool dpa = p->attn_dp > 1;
    int64_t dp = dpa ? p->attn_dp : pd ? 1 : p->instances;
    int64_t servers = dpa || pd ? p->instances : 1;
    int64_t nodes = (p->gpus_per_instance + x->gpus_per_node - 1) / x->gpus_per_node;
    if (servers > 1)
        loom_export_list_add(notes, "run this script for each of the %lld %s instances (PORT, "
                             "and NODE_RANK / DIST_INIT_ADDR when an instance spans nodes)",
                             (long long)servers, pd ? p->role : "deployment");
    if (pd)
        loom_export_list_add(notes, "front both pools with python3 -m sglang_router.launch_router "
                             "--pd-disaggregation --prefill http://HOST:PORT 8998 (each prefill "
                             "server, its bootstrap port) --decode http://HOST:PORT (each decode "
                             "server)");
    if (dpa)
        loom_export_list_add(notes, "--enable-dp-attention: SGLang lists DeepSeek and Qwen MoE "
                             "models as supported");
    if (!same)
        loom_export_list_add(notes, "the plan modelled %s's policy: SGLang's own memory fraction "
                             "and batch caps apply (plan with --engine sglang for its figures)",
                             x->engine);
    if (!strcmp(x->weights, "int4"))
        loom_export_list_add(notes, "int4 weights: serve an AWQ or GPTQ checkpoint (SGLang reads "
                             "its method from the checkpoint)");
    if (!strcmp(x->weights, "nvfp4"))
        loom_export_list_add(notes, "nvfp4 weights: serve an NVFP4 checkpoint (ModelOpt; SGLang reads "
                             "its method from the checkpoint) on Blackwell GPUs");

    fprintf(f, "#!/usr/bin/env bash\n# Written by `loom export --to sglang` from ");
    loom_export_put_comment_text(f, source ? source : "a serving plan");
    fprintf(f, "\n# for SGLang (sgl-project/sglang %.8s).\n# model: ", SGLANG_COMMIT);
    loom_export_put_comment_text(f, x->model);
    fprintf(f, "\n# pool: %s, %lld instance%s of TP %lld x PP %lld", p->role, (long long)p->instances,
            p->instances > 1 ? "s" : "", (long long)p->tp, (long long)p->pp);
    if (dpa) fprintf(f, " x attention-DP %lld", (long long)p->attn_dp);
    if (p->ep > 1) fprintf(f, ", EP %lld", (long long)p->ep);
    fprintf(f, " (%lld GPUs each)\n", (long long)p->gpus_per_instance);
    for (int i = 0; notes && i < notes->n; i++) {
        fputs("# note: ", f);
        loom_export_put_comment_text(f, notes->item[i]);
        fputc('\n', f);
    }
    fprintf(f, "set -euo pipefail\n"
               ": \"${MODEL:?set MODEL to the Hugging Face id or checkpoint directory}\"\n"
               "PORT=${PORT:-30000}\n");
    if (nodes > 1)
        fprintf(f, ": \"${NODE_RANK:?set NODE_RANK (0 .. %lld) on each node of the instance}\"\n"
                   ": \"${DIST_INIT_ADDR:?set DIST_INIT_ADDR to HOST:PORT of node 0}\"\n",
                (long long)(nodes - 1));
    fprintf(f, "args=(\n  --model-path \"$MODEL\" --port \"$PORT\"\n");
    fprintf(f, "  --tp-size %lld --pp-size %lld", (long long)(p->tp * p->attn_dp), (long long)p->pp);
    if (dp > 1) fprintf(f, " --dp-size %lld", (long long)dp);
    if (dpa) fprintf(f, " --enable-dp-attention");
    if (p->ep > 1) fprintf(f, " --ep-size %lld", (long long)p->ep);
    fprintf(f, "\n  --context-length %lld\n", (long long)x->max_tokens);
    if (same)
        fprintf(f, "  --mem-fraction-static %.2f --max-running-requests %lld\n"
                   "  --chunked-prefill-size %lld --page-size %lld\n",
                p->mem_fraction, (long long)p->max_num_seqs, (long long)p->max_batched_tokens,
                (long long)p->block_size);
    if (!strcmp(x->kv_dtype, "fp8")) fprintf(f, "  --kv-cache-dtype fp8_e4m3\n");
    if (!strcmp(x->weights, "fp8")) fprintf(f, "  --quantization fp8\n");
    if (pd)
        fprintf(f, "  --disaggregation-mode %s --disaggregation-transfer-backend mooncake\n",
                p->role);
    if (nodes > 1)
        fprintf(f, "  --nnodes %lld --node-rank \"$NODE_RANK\" --dist-init-addr \"$DIST_INIT_ADDR\"\n",
                (long long)nodes);
    fprintf(f, ")\nexec python3 -m sglang.launch_server \"${args[@]}\" \"$@\"\n");
}
