/*
 * megatron_import.h — reading an existing Megatron-LM launch line into a
 * runtime configuration, so `loom eval --from-megatron` can predict what a
 * user runs today and compare it with loom's plan.
 *
 * Input is what users have: a command line (`torchrun --nproc-per-node 8 …
 * pretrain_gpt.py --tensor-model-parallel-size 8 …`), a whole launch script
 * (variables, arrays, backslash-newlines, quotes: shell_words.h), or bare
 * arguments. The training command is the one that runs a *.py script
 * (pretrain_*.py / train*.py preferred); the words before the script are the
 * launcher's (torchrun, python -m torch.distributed.run, deepspeed, srun),
 * the words after it Megatron-LM's, read as argparse would with the
 * argument table of megatron_args.h: exact names, the last occurrence wins,
 * `--name=value` or `--name value`.
 *
 * Errors name the source and line, the argument and what is wrong:
 *   launch.sh:14: unknown Megatron-LM argument --tensor-parallel-size
 *     (did you mean --tensor-model-parallel-size?)
 *   launch.sh:15: --sequence-parallel needs tensor parallelism, but
 *     --tensor-model-parallel-size is 1
 * Contradictions are the ones Megatron-LM itself would stop on (its
 * validate_args) plus what loom needs to evaluate: the world size must be
 * known and divisible by TP · PP · CP, the batch must divide, the layer
 * split must add up.
 *
 * World size: torchrun --nnodes × --nproc-per-node (deepspeed --num_nodes ×
 * --num_gpus, srun --nodes × --ntasks-per-node), or a WORLD_SIZE variable
 * set in the script; when the line states none, the caller's GPU count
 * (the cluster's) is used, and when both are known they must agree.
 */
#ifndef LOOM_MEGATRON_IMPORT_H
#define LOOM_MEGATRON_IMPORT_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "graph/graph.h"
#include "graph/model.h"
#include "planner/export/export.h"

/* Shape arguments beyond loom_model_info that building the graph needs. */
typedef struct {
    bool rmsnorm, rope, mla;
    int64_t q_lora, kv_lora, qk_head, qk_pos, v_head;   /* MLA dims (0 = not given) */
    double hidden_dropout, attention_dropout;            /* Megatron defaults 0.1 */
    int64_t vocab_stated;   /* --vocab-size as given; config.model.vocab is what Megatron pads it to */
} loom_megatron_shape;

enum {
    LOOM_MEGATRON_STATED_LAYERS = 1u << 0,
    LOOM_MEGATRON_STATED_HIDDEN = 1u << 1,
    LOOM_MEGATRON_STATED_HEADS = 1u << 2,
    LOOM_MEGATRON_STATED_GROUPS = 1u << 3,
    LOOM_MEGATRON_STATED_FFN = 1u << 4,
    LOOM_MEGATRON_STATED_VOCAB = 1u << 5,
    LOOM_MEGATRON_STATED_EXPERTS = 1u << 6,
};

typedef struct {
    loom_runtime_config config;   /* parallelism, batch, model shape, split (normalized) */
    int64_t world_size;           /* GPUs: the line's, else the caller's */
    bool world_from_line;         /* the launch line stated the world size */
    bool has_model_shape;         /* --num-layers, --hidden-size, --num-attention-heads,
                                     --vocab-size (or --padded-vocab-size) were all given */
    loom_megatron_shape shape;
    uint32_t stated;              /* LOOM_MEGATRON_STATED_* bits: shape arguments given */
    char script[128];             /* "pretrain_gpt.py"; "" for bare arguments */
    int n_args;                   /* Megatron-LM arguments read */
    loom_export_list notes;       /* what loom reads approximately */
} loom_megatron_launch;

/* Parses launch text. `source` names it in messages ("launch.sh",
 * "--from-megatron"). `gpus` is the cluster's GPU count (0 = unknown). */
loom_status loom_megatron_parse(const char *source, const char *text, int64_t gpus,
                                loom_megatron_launch *out, loom_error *err);

/* `arg` is "@FILE", the path of an existing file, or the launch text
 * itself; reads it and parses as above. */
loom_status loom_megatron_read(const char *arg, int64_t gpus, loom_megatron_launch *out,
                               loom_error *err);

/* Checks the shape arguments the line gives against a model loaded from a
 * file (MODEL given as well): each one stated must match. */
loom_status loom_megatron_check_model(const loom_megatron_launch *l, const loom_model_info *m,
                                      loom_error *err);

/* Builds the operator graph of the model the shape arguments describe (as
 * an HF config of the matching family: GPT-2, Llama, Qwen2, Mixtral,
 * DeepSeek-V3 with MLA), for one micro-batch of `o` (megatron_model_json.c).
 * LOOM_ERR_UNSUPPORTED when the arguments do not describe a whole model or
 * no loom family matches them. */
loom_status loom_megatron_build_model(const loom_megatron_launch *l, const loom_model_opts *o,
                                      loom_graph **out, loom_error *err);

/* What `loom eval --from-megatron ARG [MODEL]` needs: the launch line
 * (loom_megatron_read) for a cluster of `gpus` GPUs as *p, and the model
 * graph for one micro-batch of it — loaded from model_path and checked
 * against the line's shape arguments, or (model_path NULL) built from them.
 * The line's pipeline layout, if any, is chunk_layers[*n_chunks] (room for
 * LOOM_EXPORT_MAX_CHUNKS; for loom_eval_opts). What loom reads
 * approximately is appended to `notes` (may be NULL). */
loom_status loom_megatron_eval_setup(const char *arg, const char *model_path, int64_t gpus,
                                     loom_parallel *p, int32_t *chunk_layers, int32_t *n_chunks,
                                     loom_graph **g, loom_export_list *notes, loom_error *err);

#endif
