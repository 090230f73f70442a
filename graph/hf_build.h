/*
 * hf_build.h — the building blocks shared by the Hugging Face model families
 * (hf_gpt2.c, hf_llama.c, hf_deepseek.c): reading sizes from a config.json
 * and adding transformer pieces (norms, projections, attention, MLPs,
 * mixture-of-experts, embedding and head) to a graph with the house
 * conventions (graph.h, docs/design.md §3):
 *
 *   - op names are HF module paths; a weight is "<op>.weight" / "<op>.bias",
 *     an op's output tensor "<op>.out";
 *   - dims: b batch, s sequence, t key sequence (inside attention), h hidden,
 *     heads, kvh, dh head dim, f MLP hidden, v vocab, e experts, c tokens per
 *     expert; projections keep the head dim (q_proj is "bsh,hnd->bsnd");
 *   - saves (what backward needs, Korthikanti et al. 2022, §4.1): matmuls
 *     their activation input, fused attention q, k, v and its output, the
 *     unfused chain q and k / the softmax output / a dropout mask / the
 *     probabilities and v, activations and norms their input, dropout a
 *     1-byte mask. For a GPT-3 layer this gives sbh(34 + 5as/h) bytes.
 *
 * Internal to graph/: the symbols carry the loom_hf_ prefix but are not part
 * of the public API.
 */
#ifndef LOOM_HF_BUILD_H
#define LOOM_HF_BUILD_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include "graph/graph.h"
#include "base/json.h"
#include "graph/model.h"

/* State of one build: the graph, sizes every block needs, the error. */
typedef struct {
    loom_graph *g;
    loom_error *err;
    loom_dtype dt;      /* weights and activations */
    int64_t b, s;       /* batch and sequence */
    bool flash;         /* fused attention op */
} loom_hf_builder;

/* (ndim, dims) argument pair from a list of {name, size}:
 *   loom_hf_weight(hb, "x", "weight", LOOM_HF_DIMS({"h", H}, {"f", F}), &id) */
#define LOOM_HF_DIMS(...) \
    (int32_t)(sizeof((loom_dim[]){__VA_ARGS__}) / sizeof(loom_dim)), (loom_dim[]){__VA_ARGS__}

/* ---- config reading (errors are "FILE: $.key: ...") ---------------------- */

/* A positive size in [1, hi]; absent and not required leaves *out as is. */
loom_status loom_hf_size(const loom_jctx *c, const cJSON *cfg, const char *key, bool required,
                         int64_t hi, int64_t *out);
/* A probability in [0, 1) (dropout rates). */
loom_status loom_hf_prob(const loom_jctx *c, const cJSON *cfg, const char *key, double *out);
/* Checks that heads divide hidden (unless hidden_key is NULL: the config
 * gives head_dim) and that kv heads divide heads. */
loom_status loom_hf_heads(const loom_jctx *c, int64_t hidden, int64_t heads, int64_t kv_heads,
                          const char *hidden_key, const char *heads_key,
                          const char *kv_key);

/* ---- the decoder driver ------------------------------------------------------ */

/* A model family for loom_hf_build: its hyper-parameters and how to build its
 * embedding and one block. Every family is embedding (layer 0), L blocks
 * (layers 1..L), then final norm, lm_head and loss (layer L+1), followed in
 * layer L+1 by the multi-token-prediction depths when built (hf_build.c). */
typedef struct {
    loom_model_info info;      /* arch, sizes and flags from the config; seq, batch,
                                  dtype and flash_attention are set by the build */
    bool learned_positions;    /* info.max_positions bounds the sequence (GPT-2) */
    const char *final_norm;    /* module of the final norm: "model.norm" */
    const char *norm_fn;       /* "rmsnorm" or "layernorm" */
    /* Layer 0 from the token ids; NULL: "model.embed_tokens". *table is the
     * [v, h] token table (the lm_head weight when tied). */
    loom_status (*embed)(loom_hf_builder *hb, const void *cfg, int32_t ids, int32_t *table,
                         int32_t *x);
    /* Block with HF index i (loom layer i + 1) from x to *y. With mtp_layers,
     * indices L..L+D-1 are the multi-token-prediction depths' blocks (HF's
     * "model.layers.61" of DeepSeek-V3), whose ops go in the head layer L+1. */
    loom_status (*block)(loom_hf_builder *hb, const void *cfg, int64_t i, int32_t x, int32_t *y);
    int64_t mtp_layers;        /* multi-token-prediction depths D the block builds (DeepSeek's
                                  num_nextn_predict_layers); built when loom_model_opts.mtp */
    const void *cfg;           /* the family's parsed config, passed to embed and block */
    const char *rope_scaling;  /* the config's rope_scaling type ("yarn", "llama3", …), NULL
                                  when it has none: a sequence beyond max_positions is then
                                  an error, else a warning */
    double rope_factor;        /* its factor (0 = not given) */
    int n_warnings;            /* config warnings, copied into the graph */
    char (*warnings)[LOOM_GRAPH_WARNING_MAX];
} loom_hf_family;

/* Resolves opts.seq (0 = 2048, capped at max_positions), checks seq, batch
 * and dtype, builds and finalizes the graph. A seq beyond max_positions is an
 * error, or a graph warning naming the RoPE scaling when the config has one.
 * Graph errors are prefixed with the file name. */
loom_status loom_hf_build(const loom_jctx *c, const char *name, const loom_model_opts *o,
                          const loom_hf_family *f, loom_graph **out);

/* ---- tensors and generic ops ------------------------------------------------ */

/* Parameter tensor "<op>.<suffix>". */
loom_status loom_hf_weight(loom_hf_builder *hb, const char *op, const char *suffix, int32_t ndim,
                           const loom_dim *dims, int32_t *id);
/* Activation (or input) tensor of the given dtype. */
loom_status loom_hf_tensor(loom_hf_builder *hb, const char *name, loom_dtype dt, int32_t ndim,
                           const loom_dim *dims, int32_t *id);

/* Einsum op `name` with output "<name>.out", whose dims are named and sized
 * after the operand dims carrying the same letters. With bias_ndim > 0 a bias
 * "<name>.bias" over the output's last bias_ndim dims is added. */
loom_status loom_hf_einsum(loom_hf_builder *hb, const char *name, int32_t layer, const char *sub,
                           int32_t n_in, const int32_t *in, int32_t n_w, const int32_t *w,
                           int bias_ndim, uint32_t saves, int32_t *y);
/* A projection: creates "<name>.weight" with wdims, then an einsum saving its
 * input. */
loom_status loom_hf_linear(loom_hf_builder *hb, const char *name, int32_t layer, int32_t x,
                           const char *sub, int32_t wndim, const loom_dim *wdims, int bias_ndim,
                           int32_t *y);
/* Elementwise `fn` over in[0..n_in) with an output shaped like in[0]. */
loom_status loom_hf_elementwise(loom_hf_builder *hb, const char *name, int32_t layer,
                                const char *fn, int32_t n_in, const int32_t *in, uint32_t saves,
                                int32_t *y);
/* Residual connection "<block>.<what>_residual": *y = x + r. */
loom_status loom_hf_residual(loom_hf_builder *hb, const char *block, const char *what,
                             int32_t layer, int32_t x, int32_t r, int32_t *y);
/* Dropout with rate p (saves a 1-byte mask); p == 0 adds nothing, *y = x. */
loom_status loom_hf_dropout(loom_hf_builder *hb, const char *name, int32_t layer, double p,
                            int32_t x, int32_t *y);
/* layernorm (weight + bias) or rmsnorm (weight) over x's last dim. */
loom_status loom_hf_norm(loom_hf_builder *hb, const char *name, int32_t layer, const char *fn,
                         int32_t x, int32_t *y);
/* A free view (RESHAPE) of in[0..n_in) into n_out new tensors named
 * "<name>.out<i>" (".out" when n_out == 1) with the given dims. */
loom_status loom_hf_view(loom_hf_builder *hb, const char *name, int32_t layer, int32_t n_in,
                         const int32_t *in, int32_t n_out, const int32_t *out_ndim,
                         const loom_dim *const *out_dims, int32_t *out);

/* ---- transformer pieces ------------------------------------------------------- */

/* Which keys a query sees besides the causal mask: a sliding window or a
 * chunk (graph.h, loom_op.window / .chunk); NULL or zeros = all. */
typedef struct {
    int64_t window, chunk;
} loom_hf_span;

/* Attention core of module `prefix` ("model.layers.3.self_attn"):
 * q [b,s,heads,dh], k [b,s,kvh,dh], v [b,s,kvh,dv] -> o [b,s,heads,dv].
 * Fused: one ATTENTION op "<prefix>.sdpa". Unfused: "<prefix>.scores",
 * ".softmax", ".attn_dropout" (when p > 0), ".context", with free views that
 * name the key sequence t and group query heads per kv head (GQA). With a
 * span the fused op carries it and the eager chain's t is min(s, span). */
loom_status loom_hf_attention(loom_hf_builder *hb, const char *prefix, int32_t layer, int32_t q,
                              int32_t k, int32_t v, double attn_pdrop, const loom_hf_span *span,
                              int32_t *o);

/* SwiGLU MLP "<prefix>.{gate,up,down}" (names given): x [...,h] -> [...,h],
 * with hidden size f named `fdim`; `sub_in` / `sub_out` are the two einsums
 * ("bsh,hf->bsf", "bsf,fh->bsh" or the expert forms). wdims_* give weights. */
typedef struct {
    const char *gate, *up, *down, *act;   /* op names */
    const char *act_fn;                   /* "swiglu" (NULL) or "geglu" (Gemma) */
    const char *sub_in, *sub_out;
    int32_t wndim;
    const loom_dim *w_in;                 /* gate/up weight dims */
    const loom_dim *w_out;                /* down weight dims */
    int bias_ndim;                        /* 0, or the bias dims of each projection */
} loom_hf_swiglu;
loom_status loom_hf_swiglu_mlp(loom_hf_builder *hb, int32_t layer, const loom_hf_swiglu *m,
                               int32_t x, int32_t *y);

/* Mixture of experts with top-k routing over e experts of hidden size f:
 *   router  "<gate>"     einsum bsh,he->bse      (saves x)
 *   route   "<route>"    moe_route -> weights, indices [b,s,topk]
 *   dispatch "<dispatch>" x -> [e,c,h], c = ceil(b·s·topk / e)
 *   experts  SwiGLU "ech,ehf->ecf" / "ecf,efh->ech" on [e,c,·]
 *   combine "<combine>"  -> [b,s,h] (weighted sum of the top-k outputs)
 * route_bias (DeepSeek-V3's e_score_correction_bias) adds an [e] parameter. */
typedef struct {
    const char *gate, *route, *dispatch, *combine;
    const char *w_gate, *w_up, *w_down, *act;   /* expert op names */
    int64_t experts, topk, f;
    bool route_bias;
    bool gate_bias;    /* gpt-oss: the router projection has a bias [e] */
} loom_hf_moe;
loom_status loom_hf_moe_block(loom_hf_builder *hb, int32_t layer, const loom_hf_moe *m,
                              int32_t x, int32_t *y);

/* Embedding "<name>" of `ids` ([b,s] int64) in a [rows, h] table; rows is
 * named "v" for the vocabulary (sharded by tensor parallelism), "pos" for a
 * learned position table. */
loom_status loom_hf_embedding(loom_hf_builder *hb, const char *name, int32_t layer, int32_t ids,
                              loom_dim rows, int64_t h, int32_t *table, int32_t *y);
/* Token ids [b,s] (int64) named `name`. */
loom_status loom_hf_ids(loom_hf_builder *hb, const char *name, int32_t *id);

/* snprintf into a fixed op-name buffer. */
void loom_hf_name(char *dst, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The family builders, dispatched by model.c. `arch` is the loom arch name. */
loom_status loom_hf_build_gpt2(const loom_jctx *c, const cJSON *cfg, const char *name,
                               const loom_model_opts *o, loom_graph **out);
loom_status loom_hf_build_llama(const loom_jctx *c, const cJSON *cfg, const char *name,
                                const char *arch, const loom_model_opts *o, loom_graph **out);
loom_status loom_hf_build_deepseek(const loom_jctx *c, const cJSON *cfg, const char *name,
                                   const char *arch, const loom_model_opts *o, loom_graph **out);

#endif
