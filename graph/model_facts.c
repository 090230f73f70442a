/*
 * model_facts.c — loom_model_facts from an HF config and to/from JSON
 * (model_facts.h).
 *
 * HF names read: rms_norm_eps (Llama/Mistral/Qwen2/Mixtral/DeepSeek),
 * layer_norm_epsilon (GPT-2), rope_theta, rope_scaling {rope_type|type,
 * factor, low_freq_factor, high_freq_factor, original_max_position_embeddings,
 * beta_fast, beta_slow, mscale, mscale_all_dim}, num_nextn_predict_layers,
 * scoring_func, topk_method ("noaux_tc" = expert bias), norm_topk_prob,
 * routed_scaling_factor, n_group, topk_group, seq_aux, aux_loss_alpha,
 * router_aux_loss_coef, partial_rotary_factor. Router semantics by family
 * (their HF modeling code): Mixtral, Qwen2/3-MoE, gpt-oss softmax (top-k
 * renormalised as norm_topk_prob says: Mixtral and gpt-oss always, Qwen3
 * true, Qwen2-MoE false); GLM-4.5 (Glm4MoeTopkRouter) and DeepSeek-V3
 * sigmoid with an expert-bias (aux-loss-free) correction; Llama 4 sigmoid
 * of its top-1. Defaults are those of the transformers config
 * classes (LlamaConfig rope_theta 10000, rms_norm_eps 1e-6; GPT2Config
 * layer_norm_epsilon 1e-5).
 */
#include "graph/model_facts.h"

#include <stdio.h>
#include <string.h>

static loom_status copy_str(const loom_jctx *c, const cJSON *o, const char *path,
                            const char *key, char *out, size_t cap)
{
    const char *s = NULL;
    loom_status st = loom_json_get_str(c, o, path, key, false, &s);
    if (st || !s) return st;
    if (strlen(s) >= cap)
        return loom_json_fail(c, path, "field \"%s\": longer than %d characters", key,
                              (int)cap - 1);
    snprintf(out, cap, "%s", s);
    return LOOM_OK;
}

loom_status loom_model_facts_from_hf(const loom_jctx *c, const cJSON *cfg, const char *arch,
                                     loom_model_facts *f)
{
    const double big = 1e12;
    loom_status s;
    bool gpt2 = strcmp(arch, "gpt2") == 0;
    bool moe = strcmp(arch, "mixtral") == 0 || strncmp(arch, "deepseek", 8) == 0 ||
               strcmp(arch, "qwen2_moe") == 0 || strcmp(arch, "qwen3_moe") == 0 ||
               strcmp(arch, "gpt_oss") == 0 || strcmp(arch, "glm4_moe") == 0 ||
               strcmp(arch, "llama4_text") == 0;
    memset(f, 0, sizeof *f);
    f->known = true;
    f->norm_eps = gpt2 ? 1e-5 : 1e-6;
    f->rope_theta = gpt2 ? 0 : 10000;
    if ((s = loom_json_get_num(c, cfg, "$", gpt2 ? "layer_norm_epsilon" : "rms_norm_eps", false,
                               1e-12, 1, &f->norm_eps)))
        return s;
    if (gpt2) return LOOM_OK;
    if ((s = loom_json_get_num(c, cfg, "$", "rope_theta", false, 1, big, &f->rope_theta)))
        return s;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(cfg, "rope_scaling");
    if (rs && cJSON_IsObject(rs)) {
        const char *P = "$.rope_scaling";
        char type[16] = "";
        if ((s = copy_str(c, rs, P, "rope_type", type, sizeof type)) ||
            (!type[0] && (s = copy_str(c, rs, P, "type", type, sizeof type))))
            return s;
        /* other types (linear, dynamic, longrope, ...) are kept by name: the
         * exporters that cannot express them refuse */
        if (strcmp(type, "default") != 0) {
            snprintf(f->rope_scaling, sizeof f->rope_scaling, "%s", type);
            f->rope_factor = 1;
            if (strcmp(type, "yarn") == 0) {   /* DeepseekV3YarnRotaryEmbedding defaults */
                f->yarn_beta_fast = 32;
                f->yarn_beta_slow = 1;
                f->yarn_mscale = 1;
            }
            if ((s = loom_json_get_num(c, rs, P, "factor", true, 1e-6, big, &f->rope_factor)) ||
                (s = loom_json_get_num(c, rs, P, "low_freq_factor", false, 0, big,
                                       &f->rope_low_freq)) ||
                (s = loom_json_get_num(c, rs, P, "high_freq_factor", false, 0, big,
                                       &f->rope_high_freq)) ||
                (s = loom_json_get_int(c, rs, P, "original_max_position_embeddings", false, 1,
                                       (int64_t)1 << 40, &f->rope_original_max)) ||
                (s = loom_json_get_num(c, rs, P, "beta_fast", false, 0, big, &f->yarn_beta_fast)) ||
                (s = loom_json_get_num(c, rs, P, "beta_slow", false, 0, big, &f->yarn_beta_slow)) ||
                (s = loom_json_get_num(c, rs, P, "mscale", false, 0, big, &f->yarn_mscale)) ||
                (s = loom_json_get_num(c, rs, P, "mscale_all_dim", false, 0, big,
                                       &f->yarn_mscale_all_dim)))
                return s;
        }
    }
    if ((s = loom_json_get_int(c, cfg, "$", "num_nextn_predict_layers", false, 0, 1000,
                               &f->mtp_layers)) ||
        (s = loom_json_get_num(c, cfg, "$", "partial_rotary_factor", false, 0, 1,
                               &f->rotary_fraction)))
        return s;
    if (f->rotary_fraction == 1) f->rotary_fraction = 0;
    if (!moe) return LOOM_OK;
    if (strcmp(arch, "qwen2_moe") == 0 || strcmp(arch, "qwen3_moe") == 0 ||
        strcmp(arch, "gpt_oss") == 0) {
        bool gpt_oss = strcmp(arch, "gpt_oss") == 0;
        snprintf(f->router_score, sizeof f->router_score, "softmax");
        f->router_norm_topk = gpt_oss || strcmp(arch, "qwen3_moe") == 0;   /* HF defaults */
        snprintf(f->router_balance, sizeof f->router_balance, "aux_loss");
        f->router_aux_coeff = 0.001;
        if ((!gpt_oss && (s = loom_json_get_bool(c, cfg, "$", "norm_topk_prob", false,
                                                 &f->router_norm_topk))) ||
            (s = loom_json_get_num(c, cfg, "$", "router_aux_loss_coef", false, 0, big,
                                   &f->router_aux_coeff)))
            return s;
        return LOOM_OK;
    }
    if (strcmp(arch, "llama4_text") == 0) {   /* Llama4TextMoe: sigmoid of the top-1 logit */
        snprintf(f->router_score, sizeof f->router_score, "sigmoid");
        return LOOM_OK;
    }
    if (strcmp(arch, "glm4_moe") == 0) {   /* Glm4MoeTopkRouter: sigmoid + correction bias */
        snprintf(f->router_score, sizeof f->router_score, "sigmoid");
        f->router_expert_bias = true;
        f->router_norm_topk = true;
        if ((s = loom_json_get_bool(c, cfg, "$", "norm_topk_prob", false, &f->router_norm_topk)) ||
            (s = loom_json_get_num(c, cfg, "$", "routed_scaling_factor", false, 0, big,
                                   &f->router_scaling)) ||
            (s = loom_json_get_int(c, cfg, "$", "n_group", false, 0, 1 << 20, &f->router_groups)) ||
            (s = loom_json_get_int(c, cfg, "$", "topk_group", false, 0, 1 << 20,
                                   &f->router_group_topk)))
            return s;
        if (f->router_groups <= 1) f->router_groups = f->router_group_topk = 0;
        return LOOM_OK;
    }
    if (strcmp(arch, "mixtral") == 0) {
        /* MixtralSparseMoeBlock: softmax over the experts, top-k, renormalised;
         * load balancing by the Switch auxiliary loss */
        snprintf(f->router_score, sizeof f->router_score, "softmax");
        f->router_norm_topk = true;
        snprintf(f->router_balance, sizeof f->router_balance, "aux_loss");
        f->router_aux_coeff = 0.001;
        return loom_json_get_num(c, cfg, "$", "router_aux_loss_coef", false, 0, big,
                                 &f->router_aux_coeff);
    }
    /* DeepSeek V2/V3 (modeling_deepseek.py MoEGate) */
    const char *topk_method = NULL;
    bool seq_aux = false;
    snprintf(f->router_score, sizeof f->router_score, "softmax");
    if ((s = copy_str(c, cfg, "$", "scoring_func", f->router_score, sizeof f->router_score)) ||
        (s = loom_json_get_str(c, cfg, "$", "topk_method", false, &topk_method)) ||
        (s = loom_json_get_bool(c, cfg, "$", "norm_topk_prob", false, &f->router_norm_topk)) ||
        (s = loom_json_get_num(c, cfg, "$", "routed_scaling_factor", false, 0, big,
                               &f->router_scaling)) ||
        (s = loom_json_get_int(c, cfg, "$", "n_group", false, 0, 1 << 20, &f->router_groups)) ||
        (s = loom_json_get_int(c, cfg, "$", "topk_group", false, 0, 1 << 20,
                               &f->router_group_topk)) ||
        (s = loom_json_get_bool(c, cfg, "$", "seq_aux", false, &seq_aux)) ||
        (s = loom_json_get_num(c, cfg, "$", "aux_loss_alpha", false, 0, big,
                               &f->router_aux_coeff)))
        return s;
    f->router_expert_bias = topk_method && strcmp(topk_method, "noaux_tc") == 0;
    snprintf(f->router_balance, sizeof f->router_balance, "%s",
             seq_aux ? "seq_aux_loss" : "aux_loss");
    if (f->router_groups <= 1) f->router_groups = f->router_group_topk = 0;
    return LOOM_OK;
}

/* Numbers and strings in a fixed order; zero / empty members are left out. */
#define FACT_NUMS(X)                                                                     \
    X(norm_eps) X(rope_theta) X(rotary_fraction) X(rope_factor) X(rope_low_freq) X(rope_high_freq)           \
    X(yarn_beta_fast) X(yarn_beta_slow) X(yarn_mscale) X(yarn_mscale_all_dim)             \
    X(router_scaling) X(router_aux_coeff)
#define FACT_INTS(X) X(rope_original_max) X(mtp_layers) X(router_groups) X(router_group_topk)
#define FACT_STRS(X) X(rope_scaling) X(router_score) X(router_balance)
#define FACT_BOOLS(X) X(router_expert_bias) X(router_norm_topk)

cJSON *loom_model_facts_to_json(const loom_model_facts *f)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
#define NUM(m) if (f->m != 0) cJSON_AddNumberToObject(o, #m, f->m);
#define INT(m) if (f->m != 0) cJSON_AddNumberToObject(o, #m, (double)f->m);
#define STR(m) if (f->m[0]) cJSON_AddStringToObject(o, #m, f->m);
#define BOOL(m) if (f->m) cJSON_AddBoolToObject(o, #m, 1);
    FACT_NUMS(NUM) FACT_INTS(INT) FACT_STRS(STR) FACT_BOOLS(BOOL)
#undef NUM
#undef INT
#undef STR
#undef BOOL
    return o;
}

loom_status loom_model_facts_from_json(const loom_jctx *c, const cJSON *o, const char *path,
                                       loom_model_facts *f)
{
    static const char *const keys[] = {
#define NAME(m) #m,
        FACT_NUMS(NAME) FACT_INTS(NAME) FACT_STRS(NAME) FACT_BOOLS(NAME)
#undef NAME
        NULL};
    loom_status s = loom_json_check_keys(c, o, path, keys);
    memset(f, 0, sizeof *f);
    f->known = true;
#define NUM(m) if (s == LOOM_OK) s = loom_json_get_num(c, o, path, #m, false, 0, 1e15, &f->m);
#define INT(m) \
    if (s == LOOM_OK) s = loom_json_get_int(c, o, path, #m, false, 0, (int64_t)1 << 40, &f->m);
#define STR(m) if (s == LOOM_OK) s = copy_str(c, o, path, #m, f->m, sizeof f->m);
#define BOOL(m) if (s == LOOM_OK) s = loom_json_get_bool(c, o, path, #m, false, &f->m);
    FACT_NUMS(NUM) FACT_INTS(INT) FACT_STRS(STR) FACT_BOOLS(BOOL)
#undef NUM
#undef INT
#undef STR
#undef BOOL
    return s;
}
