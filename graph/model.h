/*
 * model.h — loading a model file into an operator graph.
 *
 * A model file is read and parsed ONCE into a loom_model_source (an opaque
 * handle keeping the parsed JSON), from which graphs are built for as many
 * option sets as a caller needs — the planner builds one per micro-batch
 * size without going back to the disk. loom_model_load is open + build +
 * destroy for one-shot callers. The content decides what a file is:
 *
 *   "format": "loom-graph/1"      an explicit loom graph (graph_json.h;
 *                                 schema in docs/graph-format.md)
 *   "architectures" / "model_type" a Hugging Face config.json: the graph of
 *                                 the named family is built (hf_*.c)
 *
 * Sequence length, batch and dtype are not in a config.json; they come from
 * loom_model_opts (docs/design.md §3 "Ingestion"). A loom graph file carries its own
 * shapes, so the options do not apply to it.
 *
 * HF graphs follow the house conventions: layer 0 is the embedding
 * pseudo-layer, 1..L the transformer blocks, L+1 the final norm, lm_head and
 * loss; op names are HF module paths; loom_graph_info() holds the family's
 * hyper-parameters. Every error names the file, and the JSON field or
 * line:column where it applies.
 */
#ifndef LOOM_MODEL_H
#define LOOM_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <cJSON.h>
#include "base/error.h"
#include "graph/graph.h"

typedef struct {
    int64_t seq;            /* tokens per sequence; 0 = the model's default: 2048,
                               capped at n_positions for learned position tables */
    int64_t batch;          /* sequences per (micro-)batch */
    loom_dtype dtype;       /* precision; fp8 is Transformer Engine's recipe: tensors
                               stored in bf16, Linear GEMMs on fp8 tensor cores
                               (costs/compute.c), unless fp8_weights */
    bool flash_attention;   /* one fused attention op (else scores/softmax/context) */
    bool fp8_weights;       /* fp8: store weights and activations in fp8 too
                               (quantised inference), not only the GEMMs */
    bool mtp;               /* build the model's multi-token-prediction layers
                               (DeepSeek's num_nextn_predict_layers) into the head
                               layer: what Megatron-LM trains with --mtp-num-layers.
                               Training paths set it; serving leaves it off (vLLM and
                               SGLang load MTP only for speculative decoding) */
} loom_model_opts;

/* seq 2048, batch 1, bf16, flash attention, no multi-token prediction. */
void loom_model_opts_init(loom_model_opts *o);

/* Largest accepted seq and batch (their product must stay far from int64
 * overflow once multiplied by hidden sizes). */
#define LOOM_MODEL_MAX_SEQ   ((int64_t)1 << 24)
#define LOOM_MODEL_MAX_BATCH ((int64_t)1 << 20)

/* A parsed model file: its JSON tree, its name and its kind (loom graph or
 * HF config). Opaque; owned by its opener. */
typedef struct loom_model_source loom_model_source;

/* Reads and parses `path` once, and checks it is a model file (a loom graph
 * or an HF config.json; the HF family is checked when a graph is built).
 * Errors name the file (I/O, JSON line:column, "format"). On failure *out
 * is NULL. */
loom_status loom_model_open(const char *path, loom_model_source **out, loom_error *err);

/* Builds the finalized graph of src for options o (NULL: the defaults with
 * seq 0, the model's own default). A loom graph file has fixed shapes: o
 * does not apply to it. On failure *out is NULL. */
loom_status loom_model_source_build(const loom_model_source *src, const loom_model_opts *o,
                                    loom_graph **out, loom_error *err);

/* True when the graph does not depend on the options (a loom-graph/1 file:
 * its batch and seq are its own). */
bool loom_model_source_fixed_shapes(const loom_model_source *src);

/* The path it was opened from (for messages); lives as long as src. */
const char *loom_model_source_name(const loom_model_source *src);

/* NULL is a no-op. */
void loom_model_source_destroy(loom_model_source *src);

/* One shot: loom_model_open + loom_model_source_build + destroy. */
loom_status loom_model_load(const char *path, const loom_model_opts *o, loom_graph **out,
                            loom_error *err);

/* Builds the graph of an already-parsed HF config; `file` names it in errors
 * and `name` becomes the graph name. */
loom_status loom_model_build_hf(const char *file, const cJSON *config, const char *name,
                                const loom_model_opts *o, loom_graph **out, loom_error *err);

/* "GPT2LMHeadModel, LlamaForCausalLM, …": the architectures HF loading
 * supports, for messages and --help. */
const char *loom_model_supported(void);

/* Whether a training graph of a model of this model_type (loom_model_info
 * arch: "deepseek_v3") has its multi-token-prediction layers
 * (loom_model_opts.mtp): the DeepSeek family's do (hf_build.c); another
 * family's num_nextn_predict_layers (GLM-4.5's) is read but not built. */
bool loom_model_builds_mtp(const char *model_type);

#endif
