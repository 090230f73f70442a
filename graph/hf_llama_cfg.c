/*
 * hf_llama_cfg.c — reading the config.json of the Llama-like families
 * (hf_llama.h): sizes, per-family switches, the per-layer attention span
 * (sliding window / chunk) and the per-layer MoE pattern.
 *
 * Which layers attend locally (HF modeling code, transformers 4.55):
 *   "layer_types" in the config     wins when present ("sliding_attention",
 *                                   "chunked_attention", "full_attention")
 *   mistral, mixtral, phi3          every layer, when sliding_window is set
 *   qwen2, qwen2_moe, qwen3(_moe)   layers i >= max_window_layers, only when
 *                                   use_sliding_window is true
 *   gemma2                          even layers (0, 2, …), window 4096
 *   gemma3_text                     all but every sliding_window_pattern-th
 *                                   layer ((i + 1) % 6 != 0), window 4096
 *   llama4_text                     RoPE layers: no_rope_layers[i] == 1, by
 *                                   default (i + 1) % 4 != 0; chunked
 *   gpt_oss                         its layer_types (even layers, window 128)
 *   glm4_moe                        none (full attention everywhere)
 * Which layers route to experts:
 *   mixtral, qwen3_moe, gpt_oss     every layer
 *   qwen2_moe, qwen3_moe            (i + 1) % decoder_sparse_step == 0 and i
 *                                   not in mlp_only_layers
 *   llama4_text                     (i + 1) % interleave_moe_layer_step == 0
 *   glm4_moe                        i >= first_k_dense_replace, with
 *                                   n_shared_experts ungated shared experts
 *                                   of moe_intermediate_size each (GLM-4.5)
 * partial_rotary_factor (GLM) rotates part of each head: only the rotary
 * element-wise work changes, well under 0.1% of a layer, so it is read and
 * not costed apart.
 *
 * Keys that change the cost and that a family does not model are never
 * dropped silently: a fixed list of such keys (math_keys) is checked against
 * what the family reads, and each one set in the config but not read becomes
 * a named graph warning.
 */
#include "graph/hf_llama.h"

#include "base/limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keys that change parameters, FLOPs or memory in some family. */
static const char *const math_keys[] = {
    "sliding_window", "use_sliding_window", "max_window_layers", "layer_types",
    "sliding_window_pattern", "attention_chunk_size", "no_rope_layers",
    "attn_logit_softcapping", "final_logit_softcapping", "rope_scaling", "quantization_config",
    "num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size",
    "shared_expert_intermediate_size", "n_shared_experts", "decoder_sparse_step",
    "mlp_only_layers", "interleave_moe_layer_step", "intermediate_size_mlp", "use_qk_norm",
    "head_dim", "attention_bias", "mlp_bias", "partial_rotary_factor", "moe_layer_freq",
    "first_k_dense_replace", "kv_lora_rank", "q_lora_rank", "parallel_attn",
    "use_parallel_residual", "rotary_pct", "alibi", "multi_query", NULL};

/* The families: loom arch (= HF model_type), what each reads of math_keys. */
static const struct {
    const char *arch;
    const char *reads;   /* " key key … " */
} fams[] = {
    {"llama", " head_dim attention_bias mlp_bias rope_scaling "},
    {"mistral", " head_dim sliding_window rope_scaling "},
    {"mixtral", " head_dim sliding_window num_local_experts rope_scaling "},
    {"qwen2", " sliding_window use_sliding_window max_window_layers layer_types rope_scaling "},
    {"qwen2_moe", " sliding_window use_sliding_window max_window_layers layer_types rope_scaling "
                  "num_experts moe_intermediate_size shared_expert_intermediate_size "
                  "decoder_sparse_step mlp_only_layers "},
    {"qwen3", " head_dim attention_bias sliding_window use_sliding_window max_window_layers "
              "layer_types rope_scaling "},
    {"qwen3_moe", " head_dim attention_bias sliding_window use_sliding_window max_window_layers "
                  "layer_types rope_scaling num_experts moe_intermediate_size "
                  "decoder_sparse_step mlp_only_layers "},
    {"phi3", " head_dim attention_bias sliding_window rope_scaling "},
    {"gemma2", " head_dim attention_bias sliding_window layer_types attn_logit_softcapping "
               "final_logit_softcapping rope_scaling "},
    {"gemma3_text", " head_dim attention_bias sliding_window sliding_window_pattern layer_types "
                    "attn_logit_softcapping final_logit_softcapping rope_scaling "},
    {"llama4_text", " head_dim attention_bias attention_chunk_size no_rope_layers use_qk_norm "
                    "num_local_experts interleave_moe_layer_step intermediate_size_mlp "
                    "rope_scaling "},
    {"gpt_oss", " head_dim attention_bias sliding_window layer_types num_local_experts "
                "rope_scaling quantization_config "},
    {"glm4_moe", " head_dim attention_bias partial_rotary_factor rope_scaling n_routed_experts "
                 "moe_intermediate_size n_shared_experts first_k_dense_replace use_qk_norm "},
};

static void warn(loom_hf_llama_cfg *lc, const char *fmt, const char *a, const char *b)
{
    if (lc->n_warn < LOOM_HF_LLAMA_MAX_WARN)
        snprintf(lc->warn[lc->n_warn++], LOOM_GRAPH_WARNING_MAX, fmt, a, b);
}

/* Set to something: not null, false, 0, "" or an empty array / object. */
static bool is_set(const cJSON *v)
{
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return false;
    if (cJSON_IsNumber(v)) return v->valuedouble != 0;
    if (cJSON_IsString(v)) return v->valuestring[0] != '\0';
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) return v->child != NULL;
    return true;
}

void loom_hf_llama_cfg_free(loom_hf_llama_cfg *lc)
{
    free(lc->local);
    free(lc->moe);
    lc->local = lc->moe = NULL;
}

/* rope_scaling: {"rope_type" | "type": name, "factor": x}. */
static loom_status read_rope(const loom_jctx *c, const cJSON *cfg, loom_hf_llama_cfg *lc)
{
    const cJSON *rs = NULL;
    loom_status s = loom_json_get_object(c, cfg, "$", "rope_scaling", false, &rs);
    if (s || !rs) return s;
    const char *t = NULL;
    if ((s = loom_json_get_str(c, rs, "$.rope_scaling", "rope_type", false, &t)) ||
        (!t && (s = loom_json_get_str(c, rs, "$.rope_scaling", "type", false, &t))) ||
        (s = loom_json_get_num(c, rs, "$.rope_scaling", "factor", false, 0, 1e9, &lc->rope_factor)))
        return s;
    lc->rope_type = t ? t : "unnamed";
    return LOOM_OK;
}

/* Marks local layers from "layer_types" when present; *found tells. */
static loom_status read_layer_types(const loom_jctx *c, const cJSON *cfg, loom_hf_llama_cfg *lc,
                                    bool *found)
{
    const cJSON *lt = NULL;
    *found = false;
    loom_status s = loom_json_get_array(c, cfg, "$", "layer_types", false, &lt);
    if (s || !lt) return s;
    if (cJSON_GetArraySize(lt) != (int)lc->m.layers)
        return loom_json_fail(c, "$.layer_types", "has %d entries for %lld layers",
                              cJSON_GetArraySize(lt), (long long)lc->m.layers);
    int i = 0;
    for (const cJSON *e = lt->child; e; e = e->next, i++) {
        const char *v = cJSON_IsString(e) ? e->valuestring : "";
        if (strcmp(v, "sliding_attention") == 0 || strcmp(v, "chunked_attention") == 0)
            lc->local[i] = 1;
        else if (strcmp(v, "full_attention") != 0) {
            char path[64];
            snprintf(path, sizeof path, "$.layer_types[%d]", i);
            return loom_json_fail(c, path, "expected \"full_attention\", \"sliding_attention\" or "
                                  "\"chunked_attention\"");
        }
    }
    *found = true;
    return LOOM_OK;
}

/* The local-attention pattern and span (see the table at the top). */
static loom_status read_spans(const loom_jctx *c, const cJSON *cfg, const char *arch,
                              loom_hf_llama_cfg *lc)
{
    const int64_t big = (int64_t)1 << 40;
    int64_t L = lc->m.layers;
    bool gemma2 = strcmp(arch, "gemma2") == 0, gemma3 = strcmp(arch, "gemma3_text") == 0;
    bool qwen = strncmp(arch, "qwen", 4) == 0, llama4 = strcmp(arch, "llama4_text") == 0;
    loom_status s;
    if (llama4) {
        if ((s = loom_hf_size(c, cfg, "attention_chunk_size", false, big, &lc->chunk))) return s;
        const cJSON *nr = NULL;
        if ((s = loom_json_get_array(c, cfg, "$", "no_rope_layers", false, &nr))) return s;
        bool given = nr && nr->child;   /* transformers fills an empty list with the default */
        if (given && cJSON_GetArraySize(nr) != (int)L)
            return loom_json_fail(c, "$.no_rope_layers", "has %d entries for %lld layers",
                                  cJSON_GetArraySize(nr), (long long)L);
        const cJSON *e = given ? nr->child : NULL;
        for (int64_t i = 0; i < L; i++, e = e ? e->next : NULL)   /* 1 = RoPE + chunked */
            lc->local[i] = lc->chunk > 0 && (given ? cJSON_IsNumber(e) && e->valuedouble != 0
                                                   : (i + 1) % 4 != 0);
        return LOOM_OK;
    }
    if (gemma2 || gemma3) lc->window = 4096;
    if ((s = loom_hf_size(c, cfg, "sliding_window", false, big, &lc->window))) return s;
    bool found;
    if ((s = read_layer_types(c, cfg, lc, &found))) return s;
    if (found || lc->window == 0) {
        if (found && lc->window == 0)
            return loom_json_fail(c, "$", "\"layer_types\" names sliding layers but "
                                  "\"sliding_window\" is not set");
        return LOOM_OK;
    }
    if (qwen) {
        bool use = false;
        int64_t from = 0;
        if ((s = loom_json_get_bool(c, cfg, "$", "use_sliding_window", false, &use)) ||
            (s = loom_json_get_int(c, cfg, "$", "max_window_layers", false, 0, big, &from)))
            return s;
        for (int64_t i = 0; i < L; i++) lc->local[i] = use && i >= from;
    } else if (gemma2) {
        for (int64_t i = 0; i < L; i++) lc->local[i] = i % 2 == 0;
    } else if (gemma3) {
        int64_t pat = 6;
        if ((s = loom_hf_size(c, cfg, "sliding_window_pattern", false, 100000, &pat))) return s;
        for (int64_t i = 0; i < L; i++) lc->local[i] = (i + 1) % pat != 0;
    } else {   /* mistral, mixtral, phi3: every layer */
        for (int64_t i = 0; i < L; i++) lc->local[i] = 1;
    }
    return LOOM_OK;
}

/* Experts and the per-layer MoE pattern. */
static loom_status read_moe(const loom_jctx *c, const cJSON *cfg, const char *arch,
                            loom_hf_llama_cfg *lc)
{
    loom_model_info *m = &lc->m;
    bool qwen = strcmp(arch, "qwen2_moe") == 0 || strcmp(arch, "qwen3_moe") == 0;
    bool llama4 = strcmp(arch, "llama4_text") == 0, glm = strcmp(arch, "glm4_moe") == 0;
    const char *ekey = qwen ? "num_experts" : glm ? "n_routed_experts" : "num_local_experts";
    int64_t dense_first = 0;
    int64_t step = 1;
    loom_status s;
    if ((s = loom_hf_size(c, cfg, ekey, true, LOOM_MAX_EXPERTS, &m->experts)) ||
        (s = loom_hf_size(c, cfg, "num_experts_per_tok", false, LOOM_MAX_EXPERTS, &m->experts_topk)))
        return s;
    if (m->experts_topk == 0 &&
        (s = loom_hf_size(c, cfg, "experts_per_token", true, LOOM_MAX_EXPERTS, &m->experts_topk)))
        return s;
    if (m->experts_topk > m->experts)
        return loom_json_fail(c, "$", "num_experts_per_tok = %lld exceeds %s = %lld",
                              (long long)m->experts_topk, ekey, (long long)m->experts);
    m->moe_ffn = m->ffn;   /* Mixtral, Llama 4, gpt-oss: intermediate_size is each expert's */
    if (qwen) {
        if ((s = loom_hf_size(c, cfg, "moe_intermediate_size", true, LOOM_MAX_FFN, &m->moe_ffn)) ||
            (s = loom_json_get_int(c, cfg, "$", "shared_expert_intermediate_size", false, 0, LOOM_MAX_FFN,
                                   &lc->shared_ffn)) ||
            (s = loom_hf_size(c, cfg, "decoder_sparse_step", false, 100000, &step)))
            return s;
        lc->shared_gate = lc->shared_ffn > 0;
    } else if (glm) {
        int64_t n_shared = 0;
        if ((s = loom_hf_size(c, cfg, "moe_intermediate_size", true, LOOM_MAX_FFN, &m->moe_ffn)) ||
            (s = loom_json_get_int(c, cfg, "$", "n_shared_experts", false, 0, LOOM_MAX_EXPERTS,
                                   &n_shared)) ||
            (s = loom_json_get_int(c, cfg, "$", "first_k_dense_replace", false, 0, m->layers,
                                   &dense_first)))
            return s;
        lc->shared_ffn = n_shared * m->moe_ffn;   /* ungated, summed with the routed output */
        m->first_dense = dense_first;
    } else if (llama4) {
        lc->shared_ffn = m->ffn;   /* one shared expert as wide as a routed one */
        if ((s = loom_hf_size(c, cfg, "intermediate_size_mlp", false, LOOM_MAX_FFN, &m->ffn)) ||
            (s = loom_hf_size(c, cfg, "interleave_moe_layer_step", false, 100000, &step)))
            return s;
    }
    m->shared_experts = lc->shared_ffn > 0;
    for (int64_t i = 0; i < m->layers; i++) lc->moe[i] = (i + 1) % step == 0 && i >= dense_first;
    const cJSON *only = NULL;
    if (qwen && (s = loom_json_get_array(c, cfg, "$", "mlp_only_layers", false, &only))) return s;
    for (const cJSON *e = only ? only->child : NULL; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (double)m->layers)
            return loom_json_fail(c, "$.mlp_only_layers", "expected layer indices below %lld",
                                  (long long)m->layers);
        lc->moe[(int64_t)e->valuedouble] = 0;
    }
    return LOOM_OK;
}

loom_status loom_hf_llama_cfg_read(const loom_jctx *c, const cJSON *cfg, const char *arch,
                                   loom_hf_llama_cfg *lc)
{
    const int64_t big = (int64_t)1 << 40, max_layers = LOOM_MAX_LAYERS;
    loom_model_info *m = &lc->m;
    memset(lc, 0, sizeof *lc);
    size_t fam = 0;
    while (fam < sizeof fams / sizeof fams[0] && strcmp(fams[fam].arch, arch) != 0) fam++;
    LOOM_ASSERT(fam < sizeof fams / sizeof fams[0]);
    bool gemma = strncmp(arch, "gemma", 5) == 0, gemma3 = strcmp(arch, "gemma3_text") == 0;
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    m->gated_mlp = true;
    m->tied_embeddings = gemma;   /* Gemma ties by default; the others do not */
    if (gemma3) m->vocab = 262208, m->max_positions = 131072;   /* Gemma3TextConfig defaults */
    loom_status s;
    if ((s = loom_hf_size(c, cfg, "hidden_size", true, LOOM_MAX_WIDTH, &m->hidden)) ||
        (s = loom_hf_size(c, cfg, "num_hidden_layers", true, max_layers, &m->layers)) ||
        (s = loom_hf_size(c, cfg, "num_attention_heads", true, LOOM_MAX_WIDTH, &m->heads)) ||
        (s = loom_hf_size(c, cfg, "intermediate_size", true, LOOM_MAX_FFN, &m->ffn)) ||
        (s = loom_hf_size(c, cfg, "vocab_size", !gemma3, LOOM_MAX_VOCAB, &m->vocab)))
        return s;
    m->kv_heads = m->heads;
    if ((s = loom_hf_size(c, cfg, "num_key_value_heads", false, LOOM_MAX_WIDTH, &m->kv_heads)) ||
        (s = loom_hf_size(c, cfg, "head_dim", false, LOOM_MAX_WIDTH, &m->head_dim)) ||
        (s = loom_hf_size(c, cfg, "max_position_embeddings", false, big, &m->max_positions)) ||
        (s = loom_json_get_bool(c, cfg, "$", "tie_word_embeddings", false, &m->tied_embeddings)) ||
        (s = loom_json_get_bool(c, cfg, "$", "attention_bias", false, &lc->attn_bias)) ||
        (s = loom_json_get_bool(c, cfg, "$", "mlp_bias", false, &lc->mlp_bias)) ||
        (s = loom_json_get_num(c, cfg, "$", "attn_logit_softcapping", false, 0, 1e9,
                               &lc->attn_softcap)) ||
        (s = loom_json_get_num(c, cfg, "$", "final_logit_softcapping", false, 0, 1e9,
                               &lc->final_softcap)) ||
        (s = read_rope(c, cfg, lc)))
        return s;
    /* An explicit head_dim (Mistral-Nemo, Qwen3, Gemma) need not equal hidden/heads. */
    bool derive = m->head_dim == 0;
    if ((s = loom_hf_heads(c, m->hidden, m->heads, m->kv_heads, derive ? "hidden_size" : NULL,
                           "num_attention_heads", "num_key_value_heads")))
        return s;
    if (derive) m->head_dim = m->hidden / m->heads;

    lc->names = "llama";
    lc->o_bias = lc->attn_bias && strcmp(arch, "llama") == 0;   /* Llama's bias covers o_proj */
    lc->attn_bias = lc->attn_bias || strncmp(arch, "qwen2", 5) == 0;   /* Qwen2: q/k/v bias */
    lc->qk_norm = strncmp(arch, "qwen3", 5) == 0 || gemma3;
    if (strcmp(arch, "glm4_moe") == 0 &&
        (s = loom_json_get_bool(c, cfg, "$", "use_qk_norm", false, &lc->qk_norm)))
        return s;
    lc->sandwich = lc->embed_scale = lc->geglu = gemma;
    if (strcmp(arch, "gpt_oss") == 0) {
        lc->names = "gpt_oss";
        lc->o_bias = lc->attn_bias;
        lc->router_bias = true;
        m->expert_bias = true;   /* GptOssExperts: gate_up_proj_bias, down_proj_bias */
    }
    if (strcmp(arch, "llama4_text") == 0) lc->names = "llama4";
    if (strcmp(arch, "qwen2_moe") == 0 || strcmp(arch, "qwen3_moe") == 0 ||
        strcmp(arch, "glm4_moe") == 0)
        lc->names = "qwen_moe";   /* mlp.gate, mlp.experts, mlp.shared_expert(s) */
    m->qkv_bias = lc->attn_bias;
    m->qk_norm = lc->qk_norm;

    lc->local = calloc((size_t)m->layers, 1);
    lc->moe = calloc((size_t)m->layers, 1);
    if (!lc->local || !lc->moe) {
        loom_hf_llama_cfg_free(lc);
        return loom_error_set(c->err, LOOM_ERR_NOMEM, "%s: out of memory", c->file);
    }
    bool moe = strcmp(arch, "mixtral") == 0 || strcmp(arch, "qwen2_moe") == 0 ||
               strcmp(arch, "qwen3_moe") == 0 || strcmp(arch, "llama4_text") == 0 ||
               strcmp(arch, "gpt_oss") == 0 || strcmp(arch, "glm4_moe") == 0;
    if ((s = read_spans(c, cfg, arch, lc)) || (moe && (s = read_moe(c, cfg, arch, lc)))) {
        loom_hf_llama_cfg_free(lc);
        return s;
    }

    /* Math-changing keys this family does not read: named warnings. */
    for (const char *const *k = math_keys; *k; k++) {
        char pat[64];
        snprintf(pat, sizeof pat, " %s ", *k);
        if (is_set(cJSON_GetObjectItemCaseSensitive(cfg, *k)) && !strstr(fams[fam].reads, pat))
            warn(lc, "config key \"%s\" is not modelled for %s and is ignored: costs may be off",
                 *k, arch);
    }
    if (is_set(cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config")))
        warn(lc, "config key \"quantization_config\" (%s) is not modelled: weights are costed in "
             "the planning dtype%s", "checkpoint quantization", "");
    return LOOM_OK;
}
