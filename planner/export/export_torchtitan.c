/*
 * export_torchtitan.c — a training configuration as a torchtitan job config
 * in Python, the form torchtitan reads since 9810191b (2026-02-23, "Config
 * System Refactor: TOML to Python Dataclass Registry"; the last release that
 * reads TOML is v0.2.2). Written for pytorch/torchtitan
 * b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (main, 2026-08-21): names from
 * torchtitan/config/configs.py (TrainingConfig, ParallelismConfig),
 * torchtitan/distributed/activation_checkpoint.py (FullAC, SelectiveAC) and
 * the models' config_registry.py.
 *
 * The file defines loom_job() -> Trainer.Config: it starts from torchtitan's
 * own recipe for the model (llama3_8b / llama3_70b / llama3_405b,
 * deepseek_v3_671b), sets the model facts the recipe's flavor gets wrong for
 * the planned model (torchtitan's Llama-3 flavors are Llama 3.1's: RoPE
 * scaling on), and replaces the parallelism, batch and recompute settings:
 *
 *   torchrun ... -m torchtitan.train --module loom_job --config loom_job
 *
 * Mapping (loom → torchtitan):
 *   DP, ZeRO-0     data_parallel_replicate_degree = DP (DDP)
 *   DP, ZeRO-3     data_parallel_shard_degree = DP (FSDP2)
 *   DP, ZeRO-2     the same with fsdp_reshard_after_forward = "never"
 *   TP, CP, PP     tensor/context/pipeline_parallel_degree;
 *                  enable_sequence_parallel = SP
 *   EP             expert_parallel_degree (borrowed from the FSDP × CP ranks)
 *   schedule       pipeline_parallel_schedule "1F1B" / "Interleaved1F1B",
 *                  num_pp_microbatches = M, module_fqns_per_model_part: the
 *                  chunks in layer order, "tok_embeddings" in the first,
 *                  "norm", "lm_head" in the last
 *   batch          num_tokens_per_microbatch_per_dp_rank = mbs · seq, one
 *                  pipeline micro-batch (since 73aed7f6c the trainer reads
 *                  num_pp_microbatches such batches per step: T · M · DP ·
 *                  accumulation = num_tokens_per_train_step = gbs · seq),
 *                  max_context_length = seq; disable_cuda_graphs with PP or
 *                  EP (Trainer.Config._validate_cuda_graphs refuses PP, and
 *                  EP with a dispatcher that synchronises with the CPU)
 *   recompute      activation_checkpoint None / FullAC / SelectiveAC (per-op)
 *   element-wise   compile.enable = True, components model and loss: the
 *                  plan prices norms, RoPE and SwiGLU fused (eager runs them
 *                  as kernel chains: costs/eager.h)
 *   precision      mixed_precision_param "bfloat16"; the 405B recipe's
 *                  Float8 linear converter is dropped (the model spec is
 *                  rebuilt with model_registry("405B")): loom's plan is bf16
 *
 * Checked with torchtitan's own config code at that commit by
 * tools/torchtitan_check (ConfigManager loading, the config classes'
 * checks, ParallelDims, the model config's update_from_config, the
 * trainer's token rules).
 */
#include <string.h>

#include "planner/export/export_target.h"

/* torchtitan's recipe for the model: module and function, or NULL. */
static const char *recipe(const loom_model_info *m)
{
    bool llama = strcmp(m->arch, "llama") == 0 && m->vocab == 128256;
    if (llama && m->layers == 32 && m->hidden == 4096) return "llama3.config_registry:llama3_8b";
    if (llama && m->layers == 80 && m->hidden == 8192) return "llama3.config_registry:llama3_70b";
    if (llama && m->layers == 126 && m->hidden == 16384)
        return "llama3.config_registry:llama3_405b";
    if (strcmp(m->arch, "deepseek_v3") == 0 && m->layers == 61 && m->hidden == 7168)
        return "deepseek_v3.config_registry:deepseek_v3_671b";
    return NULL;
}

void loom_export_check_torchtitan(const loom_runtime_config *c, const int32_t *chunks,
                                  loom_export_list *obs)
{
    const loom_parallel *p = &c->par;
    int32_t n = (int32_t)(p->pp * p->vpp);
    if (p->dtype == LOOM_DTYPE_FP16)
        loom_export_list_add(obs, "fp16: torchtitan's mixed precision is bfloat16 or float32");
    if (p->dist_opt && p->dp * p->cp > 1)   /* the data-parallel group spans dp × cp */
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
    if (p->recompute == LOOM_RECOMPUTE_FULL && p->recompute_layers > 0)
        loom_export_list_add(obs, "recompute of %lld layers per stage: torchtitan (since "
                                  "114151ad4, 2026-03-23) recomputes every layer or per op, not "
                                  "every N-th layer",
                             (long long)p->recompute_layers);
    if (p->dtype == LOOM_DTYPE_FP8)
        loom_export_list_add(obs, "fp8: torchtitan's float8 is a model converter chosen in the "
                                  "recipe (Float8LinearConverter), which loom does not write");
    if (!recipe(&c->model))
        loom_export_list_add(obs, "%s: torchtitan at b5bcd76c has no model of this shape (its "
                                  "LLMs: llama3 8B/70B/405B, deepseek_v3 671B, qwen3, gpt_oss; "
                                  "no Mixtral)",
                             c->model.arch[0] ? c->model.arch : "this model");
}

loom_status loom_export_write_torchtitan(const loom_runtime_config *c, const int32_t *chunks,
                                         const char *source, FILE *f, loom_export_list *notes,
                                         loom_error *err)
{
    (void)err;
    const loom_parallel *p = &c->par;
    const loom_model_facts *fa = &c->model.facts;
    int64_t M = loom_runtime_microbatches(c);
    int32_t n = (int32_t)(p->pp * p->vpp);
    char mod[96];
    const char *r = recipe(&c->model), *colon = strchr(r, ':');
    snprintf(mod, sizeof mod, "%.*s", (int)(colon - r), r);
    bool float8 = strcmp(colon + 1, "llama3_405b") == 0;   /* its recipe converts to fp8 */

    if (p->recompute == LOOM_RECOMPUTE_SELECTIVE)
        loom_export_list_add(notes, "selective recompute runs as torchtitan's per-op policy, which "
                                    "keeps every other matmul output and recomputes the rest, "
                                    "not only attention");
    if (float8)
        loom_export_list_add(notes, "the llama3_405b recipe trains its linear layers in float8; "
                                    "the model spec is rebuilt without that converter, as the "
                                    "plan is bf16");
    if (fa->mtp_layers > 0)
        loom_export_list_add(notes, "multi-token prediction: torchtitan's DeepSeek-V3 does not run "
                                    "MTP with pipeline parallelism (models/deepseek_v3/mtp.py); the "
                                    "recipe's own setting is kept (none in its DeepSeek-V3 "
                                    "recipes), and loom's figures for torchtitan leave MTP out");

    loom_export_header(f, "#", LOOM_EXPORT_TORCHTITAN, c, source);
    fprintf(f, "# torchtitan job config (Python; torchtitan reads no TOML since 9810191b,\n"
               "# 2026-02-23). Written for pytorch/torchtitan b5bcd76c (2026-08-21).\n"
               "# Put this file on PYTHONPATH and run\n"
               "#   torchrun ... -m torchtitan.train --module loom_job --config loom_job\n"
               "# (or MODULE=loom_job CONFIG=loom_job ./run_train.sh); data, optimizer and\n"
               "# checkpointing come from torchtitan's %s recipe.\n", colon + 1);
    for (int i = 0; notes && i < notes->n; i++) {
        fputs("# note: ", f);
        loom_export_put_comment_text(f, notes->item[i]);
        fputc('\n', f);
    }
    fprintf(f, "import dataclasses\n\n");
    fprintf(f, "from torchtitan.config import ParallelismConfig\n");
    fprintf(f, "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC\n");
    fprintf(f, "from torchtitan.models.%s import %s as recipe\n", mod, colon + 1);
    if (float8) fprintf(f, "from torchtitan.models.llama3 import model_registry\n");
    fprintf(f, "from torchtitan.models.common.nn_modules import RMSNorm\n");
    fprintf(f, "from torchtitan.models.common.rope import RoPE\n");
    fprintf(f, "from torchtitan.trainer import Trainer\n\n\n");
    fprintf(f, "def _set_all(cfg, cls, **values):\n"
               "    \"\"\"Sets values on every cls config inside cfg (one per layer).\"\"\"\n"
               "    seen = set()\n\n"
               "    def walk(o):\n"
               "        if id(o) in seen:\n"
               "            return\n"
               "        seen.add(id(o))\n"
               "        if isinstance(o, cls):\n"
               "            for k, v in values.items():\n"
               "                setattr(o, k, v)\n"
               "        if dataclasses.is_dataclass(o) and not isinstance(o, type):\n"
               "            for fld in dataclasses.fields(o):\n"
               "                walk(getattr(o, fld.name))\n"
               "        elif isinstance(o, (list, tuple)):\n"
               "            for x in o:\n"
               "                walk(x)\n\n"
               "    walk(cfg)\n\n\n");
    fprintf(f, "def loom_job() -> Trainer.Config:\n");
    fprintf(f, "    config = recipe()\n");
    if (float8)   /* the recipe's only precision change; the plan is bf16 */
        fprintf(f, "    config.model_spec = model_registry(\"405B\")  # without the recipe's "
                   "Float8 linear layers\n");
    /* model facts: the recipe's flavor is Llama 3.1 (RoPE scaling "llama") */
    fprintf(f, "    model = config.model_spec.model\n");
    if (fa->known) {
        fprintf(f, "    _set_all(model, RMSNorm.Config, eps=%.10g)\n", fa->norm_eps);
        if (strcmp(fa->rope_scaling, "yarn") != 0) {
            if (strcmp(fa->rope_scaling, "llama3") == 0)
                fprintf(f, "    _set_all(model, RoPE.Config, theta=%.10g, scaling=\"llama\", "
                           "scaling_factor=%.10g, low_freq_factor=%.10g, high_freq_factor=%.10g)\n",
                        fa->rope_theta, fa->rope_factor, fa->rope_low_freq, fa->rope_high_freq);
            else
                fprintf(f, "    _set_all(model, RoPE.Config, theta=%.10g, scaling=\"none\")\n",
                        fa->rope_theta);
        }
    }
    fprintf(f, "    t = config.training\n");
    fprintf(f, "    t.num_tokens_per_microbatch_per_dp_rank = %lld\n", (long long)(p->mbs * p->seq));
    fprintf(f, "    t.num_tokens_per_train_step = %lld\n", (long long)(p->gbs * p->seq));
    fprintf(f, "    t.max_context_length = %lld\n", (long long)p->seq);
    fprintf(f, "    t.mixed_precision_param = \"bfloat16\"\n");
    if (p->pp > 1 || (c->model.experts > 0 && p->ep > 1))
        fprintf(f, "    t.disable_cuda_graphs = True\n");
    fprintf(f, "    config.parallelism = ParallelismConfig(\n");
    fprintf(f, "        data_parallel_replicate_degree=%lld,\n", (long long)(p->zero >= 2 ? 1 : p->dp));
    fprintf(f, "        data_parallel_shard_degree=%lld,\n", (long long)(p->zero >= 2 ? p->dp : 1));
    if (p->zero >= 2)
        fprintf(f, "        fsdp_reshard_after_forward=\"%s\",\n", p->zero == 2 ? "never" : "default");
    fprintf(f, "        tensor_parallel_degree=%lld,\n", (long long)p->tp);
    if (p->tp > 1) fprintf(f, "        enable_sequence_parallel=%s,\n", p->sp ? "True" : "False");
    fprintf(f, "        context_parallel_degree=%lld,\n", (long long)p->cp);
    if (c->model.experts > 0) fprintf(f, "        expert_parallel_degree=%lld,\n", (long long)p->ep);
    fprintf(f, "        pipeline_parallel_degree=%lld,\n", (long long)p->pp);
    if (p->pp > 1) {
        fprintf(f, "        pipeline_parallel_schedule=\"%s\",\n",
                p->vpp > 1 ? "Interleaved1F1B" : "1F1B");
        fprintf(f, "        num_pp_microbatches=%lld,\n", (long long)M);
        fprintf(f, "        module_fqns_per_model_part=[\n");
        int64_t start = 0;
        for (int32_t i = 0; i < n; i++) {
            fprintf(f, "            [");
            const char *sep = "";
            if (i == 0) fprintf(f, "\"tok_embeddings\""), sep = ", ";
            for (int64_t k = start; k < start + chunks[i]; k++, sep = ", ")
                fprintf(f, "%s\"layers.%lld\"", sep, (long long)k);
            if (i == n - 1) fprintf(f, "%s\"norm\", \"lm_head\"", sep);
            fprintf(f, "],\n");
            start += chunks[i];
        }
        fprintf(f, "        ],\n");
    }
    fprintf(f, "    )\n");
    if (p->recompute == LOOM_RECOMPUTE_NONE)
        fprintf(f, "    config.activation_checkpoint = None\n");
    else if (p->recompute == LOOM_RECOMPUTE_SELECTIVE)
        fprintf(f, "    config.activation_checkpoint = SelectiveAC.Config()\n");
    else
        fprintf(f, "    config.activation_checkpoint = FullAC.Config()\n");
    /* the plan prices element-wise ops fused, as Inductor runs them; eager
     * torchtitan (its default, compile off) runs RMSNorm, RoPE and SwiGLU
     * as kernel chains (costs/eager.h), slower than planned */
    fprintf(f, "    config.compile.enable = True  # element-wise ops fused, as planned\n");
    fprintf(f, "    config.compile.components = [\"model\", \"loss\"]\n");
    fprintf(f, "    return config\n");
    return LOOM_OK;
}
