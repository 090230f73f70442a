/*
 * megatron_model_json.c — the model a Megatron-LM launch line describes, as
 * an operator graph (loom_megatron_build_model, megatron_import.h).
 *
 * The shape arguments are written out as the Hugging Face config.json of the
 * loom family they match and built by graph/model.c, so a launch line and a
 * config file of the same model give the same graph:
 *
 *   no --swiglu (LayerNorm, learned positions)   GPT2LMHeadModel
 *   --swiglu                                      LlamaForCausalLM
 *   --swiglu --add-qkv-bias --disable-bias-linear Qwen2ForCausalLM
 *   --num-experts                                 MixtralForCausalLM
 *   --num-experts with shared experts, dense first Glm4MoeForCausalLM
 *     layers, --qk-layernorm or --add-qkv-bias
 *   --swiglu --qk-layernorm                       Qwen3ForCausalLM
 *   --multi-latent-attention                      DeepseekV3ForCausalLM (V2 unless the
 *                                                 router is sigmoid / expert-biased)
 *     (q/kv LoRA ranks, qk head dims, v head dim, routed and shared
 *     experts, dense first layers, --mtp-num-layers as num_nextn_predict_layers)
 *
 */
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "planner/import/megatron_import.h"

loom_status loom_megatron_build_model(const loom_megatron_launch *l, const loom_model_opts *o,
                                      loom_graph **out, loom_error *err)
{
    *out = NULL;
    const loom_model_info *m = &l->config.model;
    const loom_megatron_shape *sh = &l->shape;
    if (!l->has_model_shape)
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                              "the launch line does not describe the whole model (it needs "
                              "--num-layers, --hidden-size, --num-attention-heads and "
                              "--vocab-size); give MODEL as well");
    char json[2048];
    int n;
    const char *tied = m->tied_embeddings ? "true" : "false";
    if (sh->mla) {
        n = snprintf(
            json, sizeof json,
            "{\"architectures\": [\"%s\"], \"hidden_size\": %lld, "
            "\"num_hidden_layers\": %lld, \"num_attention_heads\": %lld, "
            "\"intermediate_size\": %lld, \"vocab_size\": %lld, \"kv_lora_rank\": %lld, "
            "\"qk_nope_head_dim\": %lld, \"qk_rope_head_dim\": %lld, \"v_head_dim\": %lld, "
            "\"tie_word_embeddings\": %s",
            strcmp(m->arch, "deepseek_v2") ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM",
            (long long)m->hidden, (long long)m->layers, (long long)m->heads, (long long)m->ffn,
            (long long)m->vocab, (long long)sh->kv_lora, (long long)sh->qk_head,
            (long long)sh->qk_pos, (long long)sh->v_head, tied);
        if (sh->q_lora > 0)
            n += snprintf(json + n, sizeof json - (size_t)n, ", \"q_lora_rank\": %lld",
                          (long long)sh->q_lora);
        if (m->experts > 0)
            n += snprintf(json + n, sizeof json - (size_t)n,
                          ", \"n_routed_experts\": %lld, \"num_experts_per_tok\": %lld, "
                          "\"moe_intermediate_size\": %lld, \"n_shared_experts\": %lld, "
                          "\"first_k_dense_replace\": %lld",
                          (long long)m->experts, (long long)m->experts_topk, (long long)m->moe_ffn,
                          (long long)m->shared_experts, (long long)m->first_dense);
        /* --mtp-num-layers: the depths a training graph builds (hf_build.c) */
        if (m->facts.mtp_layers > 0)
            n += snprintf(json + n, sizeof json - (size_t)n, ", \"num_nextn_predict_layers\": %lld",
                          (long long)m->facts.mtp_layers);
    } else if (m->experts > 0 && strcmp(m->arch, "glm4_moe") == 0) {
        n = snprintf(json, sizeof json,
                     "{\"architectures\": [\"Glm4MoeForCausalLM\"], \"hidden_size\": %lld, "
                     "\"num_hidden_layers\": %lld, \"num_attention_heads\": %lld, "
                     "\"num_key_value_heads\": %lld, \"head_dim\": %lld, "
                     "\"intermediate_size\": %lld, \"vocab_size\": %lld, "
                     "\"n_routed_experts\": %lld, \"num_experts_per_tok\": %lld, "
                     "\"moe_intermediate_size\": %lld, \"n_shared_experts\": %lld, "
                     "\"first_k_dense_replace\": %lld, \"attention_bias\": %s, "
                     "\"use_qk_norm\": %s, \"tie_word_embeddings\": %s",
                     (long long)m->hidden, (long long)m->layers, (long long)m->heads,
                     (long long)m->kv_heads, (long long)m->head_dim, (long long)m->ffn,
                     (long long)m->vocab, (long long)m->experts, (long long)m->experts_topk,
                     (long long)m->moe_ffn, (long long)m->shared_experts,
                     (long long)m->first_dense, m->qkv_bias ? "true" : "false",
                     m->qk_norm ? "true" : "false", tied);
    } else if (m->experts > 0) {
        n = snprintf(json, sizeof json,
                     "{\"architectures\": [\"MixtralForCausalLM\"], \"hidden_size\": %lld, "
                     "\"num_hidden_layers\": %lld, \"num_attention_heads\": %lld, "
                     "\"num_key_value_heads\": %lld, \"head_dim\": %lld, "
                     "\"intermediate_size\": %lld, \"vocab_size\": %lld, "
                     "\"num_local_experts\": %lld, \"num_experts_per_tok\": %lld, "
                     "\"tie_word_embeddings\": %s",
                     (long long)m->hidden, (long long)m->layers, (long long)m->heads,
                     (long long)m->kv_heads, (long long)m->head_dim, (long long)m->moe_ffn,
                     (long long)m->vocab, (long long)m->experts, (long long)m->experts_topk, tied);
    } else if (m->gated_mlp) {
        bool qwen = strcmp(m->arch, "qwen2") == 0, qwen3 = strcmp(m->arch, "qwen3") == 0;
        n = snprintf(json, sizeof json,
                     "{\"architectures\": [\"%s\"], \"hidden_size\": %lld, "
                     "\"num_hidden_layers\": %lld, \"num_attention_heads\": %lld, "
                     "\"num_key_value_heads\": %lld, \"head_dim\": %lld, "
                     "\"intermediate_size\": %lld, \"vocab_size\": %lld, "
                     "\"tie_word_embeddings\": %s%s",
                     qwen3 ? "Qwen3ForCausalLM" : qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM",
                     (long long)m->hidden,
                     (long long)m->layers, (long long)m->heads, (long long)m->kv_heads,
                     (long long)m->head_dim, (long long)m->ffn, (long long)m->vocab, tied,
                     qwen3 && m->qkv_bias ? ", \"attention_bias\": true" : "");
    } else {
        if (m->kv_heads != m->heads || m->head_dim * m->heads != m->hidden)
            return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                  "a GPT-2-style model (no --swiglu) with grouped-query attention "
                                  "or --kv-channels matches no loom model family; give MODEL");
        n = snprintf(json, sizeof json,
                     "{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": %lld, "
                     "\"n_layer\": %lld, \"n_head\": %lld, \"n_inner\": %lld, "
                     "\"vocab_size\": %lld, \"resid_pdrop\": %.17g, \"attn_pdrop\": %.17g, "
                     "\"embd_pdrop\": %.17g, \"tie_word_embeddings\": %s",
                     (long long)m->hidden, (long long)m->layers, (long long)m->heads,
                     (long long)m->ffn, (long long)m->vocab, sh->hidden_dropout,
                     sh->attention_dropout, sh->hidden_dropout, tied);
    }
    /* the positions table (GPT-2) and the declared context */
    int64_t positions = m->max_positions > 0 ? m->max_positions : l->config.par.seq;
    n += snprintf(json + n, sizeof json - (size_t)n, ", \"%s\": %lld}",
                  m->gated_mlp || sh->mla || m->experts ? "max_position_embeddings" : "n_positions",
                  (long long)positions);
    if (n >= (int)sizeof json)
        return loom_error_set(err, LOOM_ERR_INVALID, "model description too long");

    cJSON *cfg = NULL;
    loom_status s = loom_json_parse("megatron launch line", json, (size_t)n, &cfg, err);
    if (s) return s;
    s = loom_model_build_hf("megatron launch line", cfg, m->arch[0] ? m->arch : "megatron", o,
                            out, err);
    cJSON_Delete(cfg);
    /* the facts are Megatron's, read from the line, not the HF defaults */
    if (s == LOOM_OK) loom_graph_info(*out)->facts = m->facts;
    return s;
}
