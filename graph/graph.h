/*
 * graph.h — loom's operator graph: tensors with named dims, forward ops, layers.
 *
 * The graph is the model as the planner sees it (docs/design.md §3). It holds forward
 * ops only; backward work, its communication and its memory are derived per
 * op. Every tensor dim has a name ("b", "s", "h", "heads", "dh", "kvh", "f",
 * "v", "e", …) and a size, so sharding specs and reports speak in names.
 *
 * Ownership: a loom_graph (opaque) owns arrays of loom_tensor and loom_op,
 * referenced by int32_t ids. Ops and tensors are plain structs; read them
 * through loom_graph_op() / loom_graph_tensor().
 *
 * Layers: every op has a layer index. Index 0 is the embedding pseudo-layer,
 * 1..L the transformer blocks, L+1 the head and loss (when the model has
 * them). loom_graph_layer_count() returns L+2 for such models. Graphs read
 * from loom JSON may use any layer indices 0..n-1.
 *
 * Einsum operands: an einsum op's subscripts name its inputs first, then its
 * weights, then "->" and its one output: "bsh,hf->bsf" with in=[x], w=[W].
 * Letter k of an operand's subscript is that tensor's dim k, and a letter
 * names the same dim (same name, same size) in every operand. With
 * op.bias, the last weight is a bias outside the subscripts.
 *
 * Attention operands: q [b, s, heads, dqk], k [b, t, kvh, dqk],
 * v [b, t, kvh, dv] -> o [b, s, heads, dv] (dims by position; names free).
 *
 * Units: FLOPs and bytes are int64_t (per forward pass of the whole op at the
 * graph's batch and sequence); sizes are checked against overflow when the op
 * is added.
 */
#ifndef LOOM_GRAPH_H
#define LOOM_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include "base/dtype.h"
#include "base/error.h"

#define LOOM_MAX_DIMS 6
#define LOOM_MAX_IO 4        /* inputs, outputs or weights per op */
#define LOOM_NAME_MAX 96
#define LOOM_DIM_NAME_MAX 8
#define LOOM_EINSUM_MAX 48

typedef struct loom_graph loom_graph;

/* ---- op kinds (docs/design.md §3) ---------------------------------------------- */

#define LOOM_OP_KIND_LIST(X)                                                      \
    X(EINSUM,        "einsum")        /* any matmul, written as subscripts */      \
    X(ATTENTION,     "attention")     /* fused SDPA: (q, k, v) -> o */             \
    X(ELEMENTWISE,   "elementwise")   /* add, mul, gelu, silu, swiglu, dropout, rope */ \
    X(NORM,          "norm")          /* layernorm / rmsnorm over the last dim */  \
    X(SOFTMAX,       "softmax")       /* over the last dim */                      \
    X(EMBEDDING,     "embedding")     /* gather rows of a [v, h] table */          \
    X(CROSS_ENTROPY, "cross_entropy") /* loss over the vocab dim */                \
    X(MOE_ROUTE,     "moe_route")     /* top-k selection over router logits */     \
    X(MOE_DISPATCH,  "moe_dispatch")  /* tokens -> per-expert buffers */           \
    X(MOE_COMBINE,   "moe_combine")   /* per-expert outputs -> tokens (weighted) */\
    X(RESHAPE,       "reshape")       /* free view */                              \
    X(TRANSPOSE,     "transpose")     /* free view (permutation) */

typedef enum {
#define LOOM_X(n, s) LOOM_OP_##n,
    LOOM_OP_KIND_LIST(LOOM_X)
#undef LOOM_X
    LOOM_OP_KIND_COUNT
} loom_op_kind;

const char *loom_op_kind_name(loom_op_kind k);
bool loom_op_kind_parse(const char *s, loom_op_kind *out);

/* ---- tensors ------------------------------------------------------------ */

typedef struct {
    char name[LOOM_DIM_NAME_MAX];
    int64_t size;
} loom_dim;

typedef struct {
    char name[LOOM_NAME_MAX];
    loom_dtype dtype;
    int32_t ndim;
    loom_dim dims[LOOM_MAX_DIMS];
    int32_t producer;   /* op id, or -1 for graph inputs and weights */
    bool is_weight;     /* a parameter (counted in params, gets gradients) */
} loom_tensor;

int64_t loom_tensor_numel(const loom_tensor *t);
int64_t loom_tensor_bytes(const loom_tensor *t);
/* Index of the dim called `name`, or -1. */
int loom_tensor_dim_index(const loom_tensor *t, const char *name);

/* ---- ops ---------------------------------------------------------------- */

/* Bits of loom_op.saves: which operands the op keeps for its backward pass.
 * Operand numbering: inputs 0..n_in-1, then outputs at LOOM_SAVE_OUT(i).
 * Weights are always available (they are parameters) and never counted. */
#define LOOM_SAVE_IN(i)  (1u << (i))
#define LOOM_SAVE_OUT(i) (1u << (8 + (i)))
#define LOOM_SAVE_MASK   (1u << 16)   /* a 1-byte-per-element mask of output 0 */

typedef struct {
    char name[LOOM_NAME_MAX];   /* HF module path, e.g. "model.layers.3.mlp.down_proj" */
    loom_op_kind kind;
    int32_t layer;
    int32_t n_in, n_out, n_w;
    int32_t in[LOOM_MAX_IO], out[LOOM_MAX_IO], w[LOOM_MAX_IO];

    /* kind-specific attributes */
    char einsum[LOOM_EINSUM_MAX]; /* EINSUM: "bsh,hf->bsf" (inputs, weights -> output) */
    char fn[16];                  /* ELEMENTWISE: add|mul|gelu|silu|swiglu|dropout|rope|scale;
                                     NORM: layernorm|rmsnorm */
    bool bias;                    /* EINSUM: the last weight is a bias added to the output,
                                     not named in the subscripts; its dims are the output's
                                     trailing dims */
    bool causal;                  /* ATTENTION */
    int64_t window;               /* ATTENTION: sliding window (Mistral, Gemma local layers,
                                     gpt-oss): query i sees keys (i - window, i]; 0 = none */
    int64_t chunk;                /* ATTENTION: chunked local attention (Llama 4): query i
                                     sees keys of its own chunk [⌊i/chunk⌋·chunk, i]; 0 = none */
    int32_t topk;                 /* MOE_ROUTE / MOE_DISPATCH / MOE_COMBINE */
    uint32_t saves;               /* LOOM_SAVE_* bits */

    /* derived by loom_graph_add_op from kind and shapes */
    int64_t fwd_flops;
    int64_t bwd_flops;
    int64_t bytes_moved;          /* operands read + written, forward */
} loom_op;

/* Keys one query of attention op `op` can see at most, out of t keys:
 * min(t, window or chunk); t without either. FLOPs, the KV cache and the
 * eager chain's score tensors all scale with it. */
int64_t loom_op_attention_span(const loom_op *op, int64_t t);

/* Bytes op `id` saves for backward (masks at 1 byte/element), counting each
 * tensor once even when several ops save it: a tensor is charged to the
 * first op (lowest id) that saves it. */
int64_t loom_op_saved_bytes(const loom_graph *g, int32_t id);

/* ---- model summary -------------------------------------------------------- */

/* What a runtime needs to build the same model but loom's costs do not
 * depend on: positional encoding, norm epsilon, multi-token prediction, the
 * MoE router. Read from the HF config (graph/hf_*.c); `known` is false for
 * hand-written graphs and for plans written before loom carried them. The
 * exporters emit them (planner/export/), JSON in graph/model_facts.h. */
typedef struct {
    bool known;
    double norm_eps;            /* rms_norm_eps / layer_norm_epsilon */
    double rope_theta;          /* RoPE base (0 = no RoPE: learned positions) */
    double rotary_fraction;     /* partial_rotary_factor: share of a head rotated (0 = all) */
    char rope_scaling[16];      /* "" none, "llama3" (Llama 3.1), "yarn" (DeepSeek) */
    double rope_factor;         /* rope_scaling.factor */
    double rope_low_freq, rope_high_freq;   /* llama3: low/high_freq_factor */
    int64_t rope_original_max;  /* rope_scaling.original_max_position_embeddings */
    double yarn_beta_fast, yarn_beta_slow, yarn_mscale, yarn_mscale_all_dim;
    int64_t mtp_layers;         /* DeepSeek num_nextn_predict_layers (in the graph only when
                                   built for training: loom_model_info.mtp_params) */
    char router_score[16];      /* "softmax" / "sigmoid" ("" dense) */
    bool router_expert_bias;    /* V3 e_score_correction_bias (aux-loss-free balancing) */
    bool router_norm_topk;      /* top-k weights renormalised */
    double router_scaling;      /* routed_scaling_factor (0 = 1) */
    int64_t router_groups, router_group_topk;   /* group-limited routing (0 = off) */
    char router_balance[16];    /* "aux_loss" / "seq_aux_loss" ("" none) */
    double router_aux_coeff;    /* router_aux_loss_coef / aux_loss_alpha */
} loom_model_facts;

/* The transformer hyper-parameters, when the graph came from a model family
 * (HF config); zero for hand-written graphs. Megatron-style evaluation and the
 * exporters read these. */
typedef struct {
    char arch[32];          /* "gpt2", "llama", "mistral", "qwen2", "mixtral", "deepseek_v3" */
    int64_t layers;         /* transformer blocks L */
    int64_t hidden;
    int64_t heads;
    int64_t kv_heads;
    int64_t head_dim;
    int64_t ffn;            /* dense MLP hidden size */
    int64_t vocab;
    int64_t experts;        /* routed experts (0 = dense) */
    int64_t experts_topk;
    int64_t shared_experts;
    int64_t moe_ffn;        /* per-expert hidden size */
    int64_t first_dense;    /* DeepSeek first_k_dense_replace */
    int64_t q_lora_rank;    /* DeepSeek MLA: query / kv low-rank sizes, rope and */
    int64_t kv_lora_rank;   /* value head dims (0 for other families); the MLA */
    int64_t qk_rope_head_dim; /* KV cache holds kv_lora_rank + qk_rope_head_dim */
    int64_t v_head_dim;     /* numbers per token and layer */
    int64_t max_positions;  /* context length the config declares (0 = unknown) */
    int64_t seq;            /* sequence length the graph was built for */
    int64_t batch;          /* batch (micro-batch) the graph was built for */
    bool tied_embeddings;
    bool gated_mlp;         /* SwiGLU */
    bool qkv_bias;
    bool qk_norm;           /* RMSNorm of q and k per head (Qwen3, Gemma 3, GLM use_qk_norm) */
    bool expert_bias;       /* routed experts carry biases (gpt-oss: gate_up_proj_bias
                               [e, 2f], down_proj_bias [e, h]); not graph weights, but the
                               cost model prices how Megatron-Core adds the output one */
    bool flash_attention;   /* fused attention op (else scores/softmax/context) */
    int64_t mtp_params;     /* parameters the multi-token-prediction layers add in the
                               head layer L+1 (0 when not built, loom_model_opts.mtp):
                               of totals' params, params - mtp_params is the main model */
    loom_dtype dtype;
    loom_model_facts facts; /* what a runtime needs beyond the shape */
} loom_model_info;

/* ---- the graph ------------------------------------------------------------ */

loom_status loom_graph_create(const char *name, loom_graph **out, loom_error *err);
void loom_graph_destroy(loom_graph *g);

const char *loom_graph_name(const loom_graph *g);
loom_model_info *loom_graph_info(loom_graph *g);
const loom_model_info *loom_graph_info_c(const loom_graph *g);

/* Warnings the builder recorded about the model (config keys it reads but
 * does not model exactly, a sequence beyond the trained positions with RoPE
 * scaling). The library never prints; the CLI does. At most
 * LOOM_GRAPH_MAX_WARNINGS are kept. */
#define LOOM_GRAPH_MAX_WARNINGS 8
#define LOOM_GRAPH_WARNING_MAX 256
void loom_graph_warn(loom_graph *g, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
int32_t loom_graph_num_warnings(const loom_graph *g);
const char *loom_graph_warning(const loom_graph *g, int32_t i);   /* NULL out of range */

int32_t loom_graph_num_tensors(const loom_graph *g);
int32_t loom_graph_num_ops(const loom_graph *g);
const loom_tensor *loom_graph_tensor(const loom_graph *g, int32_t id);
const loom_op *loom_graph_op(const loom_graph *g, int32_t id);
/* Number of layer slots: max layer index + 1. */
int32_t loom_graph_layer_count(const loom_graph *g);
/* Ops of layer `layer` in id order: [*first, *first + *count). Ops are added
 * layer by layer, so each layer's ops are contiguous; loom_graph_finalize
 * checks it. */
void loom_graph_layer_ops(const loom_graph *g, int32_t layer, int32_t *first, int32_t *count);

/* Adds a tensor; dims are copied. Rejects non-positive sizes and element
 * counts that overflow int64. */
loom_status loom_graph_add_tensor(loom_graph *g, const char *name, loom_dtype dtype,
                                  int32_t ndim, const loom_dim *dims, bool is_weight,
                                  int32_t *out_id, loom_error *err);

/* Adds an op (copied); checks operand ids, that einsum subscripts agree with
 * operand ranks and sizes, sets each output's producer and computes FLOPs and
 * bytes. Fails if an output already has a producer. */
loom_status loom_graph_add_op(loom_graph *g, const loom_op *op, int32_t *out_id,
                              loom_error *err);

/* Convenience for builders: adds an einsum op and its output tensor, whose
 * dims are named after the input dims that carry the same letters. */
loom_status loom_graph_einsum(loom_graph *g, const char *name, int32_t layer,
                              const char *subscripts, int32_t n_in, const int32_t *in,
                              int32_t n_w, const int32_t *w, uint32_t saves,
                              int32_t *out_tensor, loom_error *err);

/* Whole-graph checks once building is done: layers contiguous, no dangling
 * tensors (every non-weight, non-input tensor has a producer; every tensor is
 * used), no cycles (naming the ops on one), consistent shapes. */
loom_status loom_graph_finalize(loom_graph *g, loom_error *err);

/* Signature of a layer: a hash of its ops' kinds, attributes, operand shapes
 * and wiring relative to the layer. Identical layers hash equal. */
uint64_t loom_graph_layer_signature(const loom_graph *g, int32_t layer);

/* Of a finalized graph: a hash of its op, tensor and layer counts and of
 * every layer's signature, computed once by finalize, so that a cache can
 * tell a graph rebuilt at the same address with other shapes apart. */
uint64_t loom_graph_fingerprint(const loom_graph *g);

/* ---- totals --------------------------------------------------------------- */

typedef struct {
    int64_t params;              /* all parameters (tied weights counted once) */
    int64_t params_embedding;    /* embedding tables (incl. position tables) */
    int64_t params_active;       /* used per token: routed-expert weights count topk/e of
                                    their size (= params for dense models) */
    int64_t fwd_flops;           /* whole graph, one forward pass */
    int64_t bwd_flops;
    int64_t activation_bytes;    /* saved for backward, whole graph */
} loom_graph_totals;

void loom_graph_totals_get(const loom_graph *g, loom_graph_totals *out);
/* Params, forward FLOPs and saved activation bytes of one layer. */
void loom_graph_layer_totals(const loom_graph *g, int32_t layer, loom_graph_totals *out);

#endif
