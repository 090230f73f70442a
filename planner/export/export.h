/*
 * export.h — turning a plan into the configuration a runtime runs
 * (docs/design.md §7 "The plan and its exports").
 *
 * The common language is the runtime configuration, loom_runtime_config: a
 * Megatron-style loom_parallel (degrees, batch, recompute, ZeRO, dtype), the
 * model's shape (loom_model_info), and how the pipeline splits the layers.
 * Each target renders it in its own syntax:
 *
 *   megatron    a bash launch script: torchrun … pretrain_gpt.py --flags
 *               (every flag checked against planner/export/megatron_args.txt),
 *               with the model facts (graph.h loom_model_facts)
 *   vllm        a YAML file for `vllm serve MODEL --config FILE`
 *   deepspeed   a DeepSpeed JSON config
 *   torchtitan  a Python job config (loom_job() -> Trainer.Config) for
 *               torchtitan's Python config system
 *
 * A configuration that a target cannot run as planned is not rendered: the
 * renderer lists each obstacle (what the plan asks for, why the target cannot
 * do it) and fails with LOOM_ERR_UNSUPPORTED. Facts worth telling the user
 * that do not change the plan (an environment variable to set, code the model
 * must call) are notes; formats with comments carry them inline as well.
 *
 * Pipeline split: chunk_layers[c] is the number of transformer blocks in
 * pipeline chunk c, chunks in layer order, c = vpp_rank · pp + pp_rank (the
 * order of Megatron's --pipeline-model-parallel-layout). The embedding sits
 * in chunk 0 and the head in the last chunk; a chunk may hold no blocks (an
 * embedding-only first stage). n_chunks == 0 means the even split.
 *
 * Units: batch sizes in sequences, lengths in tokens, memory in bytes, time
 * in seconds.
 */
#ifndef LOOM_EXPORT_H
#define LOOM_EXPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "costs/parallel.h"
#include "base/error.h"
#include "graph/graph.h"
#include "graph/model.h"
#include "planner/plan/plan.h"

#define LOOM_EXPORT_TARGET_LIST(X)        \
    X(MEGATRON,   "megatron")             \
    X(VLLM,       "vllm")                 \
    X(DEEPSPEED,  "deepspeed")            \
    X(TORCHTITAN, "torchtitan")

typedef enum {
#define LOOM_X(n, s) LOOM_EXPORT_##n,
    LOOM_EXPORT_TARGET_LIST(LOOM_X)
#undef LOOM_X
    LOOM_EXPORT_TARGET_COUNT
} loom_export_target;

const char *loom_export_target_name(loom_export_target t);
bool loom_export_target_parse(const char *s, loom_export_target *out);

#define LOOM_EXPORT_MAX_CHUNKS 1024

typedef struct {
    loom_parallel par;           /* degrees, batch, seq, SP, recompute, ZeRO, dtype, vpp */
    loom_model_info model;       /* the model's shape (graph.h) */
    char model_name[256];        /* the MODEL argument / HF id, for comments ("" = unknown) */
    bool inference;              /* a serving plan (vLLM) rather than a training plan */
    int64_t gpus_per_node;       /* GPUs of one node (torchrun --nproc-per-node) */
    int64_t idle_gpus_per_node;  /* a plan on the tile of every NVLink domain: the
                                    domain's other GPUs, left idle (costs/cluster.h) */
    int32_t n_chunks;            /* pp · vpp, or 0 for the even split */
    int32_t chunk_layers[LOOM_EXPORT_MAX_CHUNKS];

    /* serving (vLLM): per data-parallel replica */
    int64_t max_num_seqs;             /* concurrent sequences */
    int64_t max_model_len;            /* tokens per sequence, prompt + output */
    int64_t max_num_batched_tokens;   /* tokens per engine step */
    double gpu_memory_utilization;    /* fraction of HBM vLLM may take */

    /* loom's prediction, quoted in comments (0 = none) */
    double predicted_step_s;
    int64_t predicted_memory_bytes;
} loom_runtime_config;

/* Empty configuration: loom_parallel_init defaults, 8 GPUs per node, even
 * split, gpu_memory_utilization 0.9. */
void loom_runtime_config_init(loom_runtime_config *c);

/* Checks what every target needs: degrees and batch sizes >= 1, the global
 * batch a multiple of mbs · dp (training), a model with layers, a valid
 * split (loom_runtime_chunks). LOOM_ERR_INVALID naming the field. */
loom_status loom_runtime_config_validate(const loom_runtime_config *c, loom_error *err);

/* GPUs the configuration uses: tp · pp · dp · cp. */
int64_t loom_runtime_gpus(const loom_runtime_config *c);
/* Model options for one training micro-batch of p (batch = mbs, seq, dtype,
 * flash, the multi-token-prediction layers under Megatron-LM):
 * the graph costs/eval.h evaluates p on. */
void loom_runtime_model_opts(const loom_parallel *p, loom_model_opts *o);

/* The ZeRO stage: 1 for Megatron's distributed optimizer, else par.zero. */
int loom_runtime_zero(const loom_runtime_config *c);
/* Micro-batches per step per data-parallel replica: gbs / (mbs · dp). */
int64_t loom_runtime_microbatches(const loom_runtime_config *c);

/* Fills chunks[0 .. pp·vpp) with the blocks of each chunk: chunk_layers when
 * given, else the even split L / (pp·vpp). Fails (LOOM_ERR_INVALID, naming
 * the numbers) when the given chunks do not sum to the model's layers or
 * their count is not pp·vpp, or the even split does not divide. */
loom_status loom_runtime_chunks(const loom_runtime_config *c, int32_t *chunks, loom_error *err);

/* Canonical form, so that two configurations describing the same run
 * compare equal: chunk_layers cleared when the split is even; for vpp = 1
 * and a split whose middle stages are equal, par.first_stage_layers /
 * last_stage_layers set to the first and last stage's blocks (else 0);
 * ZeRO-1 written as dist_opt with zero 0 (costs/eval.h's form); etp = tp written as 0; SP off
 * when tp = 1, TP comm overlap off without SP, gradient-reduce overlap off
 * when dp = 1. */
loom_status loom_runtime_config_normalize(loom_runtime_config *c, loom_error *err);

/* ---- obstacles and notes -------------------------------------------------- */

#define LOOM_EXPORT_MAX_ITEMS 32
#define LOOM_EXPORT_ITEM_MAX 320

/* A list of one-sentence messages (obstacles or notes). */
typedef struct {
    int n;
    int dropped;            /* messages that did not fit */
    char item[LOOM_EXPORT_MAX_ITEMS][LOOM_EXPORT_ITEM_MAX];
} loom_export_list;

/* Appends a printf-formatted message (counted in `dropped` when full); l may
 * be NULL. */
void loom_export_list_add(loom_export_list *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- from a plan (export_plan.c) ---------------------------------------------- */

/* Reads plan p into c (normalized). What no Megatron-style runtime can run —
 * stage-wide choices that differ between stages, 2-D or otherwise
 * non-Megatron sharding of an op — is appended to `obstacles` (counted over
 * the ops, with a first example); c then describes stage 0's choices. */
loom_status loom_export_from_plan(const loom_plan *p, loom_runtime_config *c,
                                  loom_export_list *obstacles, loom_error *err);

/* ---- rendering -------------------------------------------------------------- */

/* What target t cannot run of c, appended to `obstacles` (none: c runs as
 * planned). Does not render. */
void loom_export_check(const loom_runtime_config *c, loom_export_target t,
                       loom_export_list *obstacles);

/* Renders c for target t into a NUL-terminated heap string (free() it);
 * `source` names the plan in the header comment (may be NULL). When target t
 * cannot run c, the obstacles are appended to `obstacles` (may be NULL), *out
 * is NULL and LOOM_ERR_UNSUPPORTED is returned with a message counting them.
 * Notes are appended to `notes` (may be NULL). Output is deterministic. */
loom_status loom_export_render(const loom_runtime_config *c, loom_export_target t,
                               const char *source, char **out, loom_export_list *notes,
                               loom_export_list *obstacles, loom_error *err);

#endif
