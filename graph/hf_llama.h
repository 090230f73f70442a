/*
 * hf_llama.h — the parsed config of the Llama-like decoder families
 * (internal to graph/; hf_llama_cfg.c reads it, hf_llama.c builds from it).
 *
 * One decoder covers Llama 1-3, Mistral, Mixtral, Qwen2/2.5, Qwen2-MoE,
 * Qwen3, Qwen3-MoE, Phi-3/4, Gemma 2/3, Llama 4 (text) and gpt-oss: they
 * differ only in switches (biases, QK-norm, sandwich norms, GeGLU, embedding
 * scale), in which layers attend locally (a sliding window or a chunk) and
 * which layers route to experts (with or without a shared expert).
 */
#ifndef LOOM_HF_LLAMA_H
#define LOOM_HF_LLAMA_H

#include "graph/hf_build.h"

#define LOOM_HF_LLAMA_MAX_WARN 6

typedef struct {
    loom_model_info m;          /* sizes and flags, copied into the graph */
    const char *names;          /* module naming: "llama", "qwen_moe", "llama4", "gpt_oss" */
    bool attn_bias, o_bias;     /* biases on q/k/v, on o_proj */
    bool mlp_bias;              /* Llama's mlp_bias */
    bool qk_norm;               /* RMSNorm over the head dim of q and k (Qwen3, Gemma 3) */
    bool sandwich;              /* Gemma: norms before and after attention and MLP */
    bool embed_scale;           /* Gemma: embeddings times sqrt(hidden) */
    bool geglu;                 /* gelu-gated MLP (Gemma) instead of SwiGLU */
    bool router_bias;           /* gpt-oss: router bias [e] */
    bool shared_gate;           /* Qwen2-MoE: sigmoid(Linear(h, 1)) scales the shared expert */
    int64_t shared_ffn;         /* width of the always-on shared expert (0 = none) */
    int64_t window, chunk;      /* span of the local layers (sliding window or chunk) */
    unsigned char *local;       /* [layers]: 1 = this layer attends within window/chunk */
    unsigned char *moe;         /* [layers]: 1 = this layer routes to experts */
    const char *rope_type;      /* rope_scaling's type, NULL without one */
    double rope_factor;
    double attn_softcap, final_softcap;   /* Gemma 2 logit soft-capping (0 = none) */
    int n_warn;
    char warn[LOOM_HF_LLAMA_MAX_WARN][LOOM_GRAPH_WARNING_MAX];
} loom_hf_llama_cfg;

/* Reads and checks the config (cfg is the text config: a nested
 * "text_config" for Llama 4 / Gemma 3). On success the caller frees with
 * loom_hf_llama_cfg_free. */
loom_status loom_hf_llama_cfg_read(const loom_jctx *c, const cJSON *cfg, const char *arch,
                                   loom_hf_llama_cfg *lc);
void loom_hf_llama_cfg_free(loom_hf_llama_cfg *lc);

#endif
