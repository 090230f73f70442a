/*
 * recompute.h — Megatron's selective recomputation by module
 * (--recompute-granularity selective --recompute-modules …): which of a
 * graph's ops rerun their forward in the backward, and so which tensors
 * they no longer keep. The compute model (eval.c), the memory model
 * (memory.c) and the planner's layer table (solver/stage_costs.c) ask here.
 *
 * Megatron-Core checkpoints each module separately; the graph's ops are
 * matched to them by their kind and by the HF module names loom's builders
 * give them (graph/hf_build.c):
 *   core_attn       the attention core: the unfused chain of ops on the
 *                   s×t scores (Korthikanti et al. 2022), or the fused
 *                   attention kernel, which reruns for nothing but the
 *                   softmax statistics it would keep (Megatron wraps
 *                   whichever core attention runs); Megatron's default
 *   layernorm       the norms on the residual stream (input_layernorm and
 *                   the pre-MLP norm): their outputs are dropped and
 *                   renormalised in the backward
 *   moe_act         the experts' activation (SwiGLU …): its output, the
 *                   down projection's input, is dropped
 *   mla_up_proj     MLA's query and key/value up-projections with their
 *                   rotary embedding: q, k, v of the attention are dropped
 *                   and rebuilt from the low-rank latents
 *   mlp             a dense layer's MLP: everything inside it, its input kept
 *   moe             a MoE layer: router, dispatch, experts, combine (and
 *                   shared experts); the all-to-alls rerun too
 *   shared_experts  a MoE layer's shared experts
 * What is then no longer kept: core_attn drops the s×t tensors only (its
 * checkpoint keeps the inputs q, k, v and the output); layernorm, moe_act
 * and mla_up_proj drop every tensor they produce (Megatron's
 * CheckpointWithoutOutput: the consumer's saved input is freed and rebuilt);
 * mlp, moe and shared_experts drop what they produce for their own ops,
 * keeping the module's output (a plain checkpoint).
 */
#ifndef LOOM_COSTS_RECOMPUTE_H
#define LOOM_COSTS_RECOMPUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "costs/parallel.h"
#include "graph/graph.h"

enum {
    LOOM_RC_CORE_ATTN = 1u << 0,
    LOOM_RC_LAYERNORM = 1u << 1,
    LOOM_RC_MOE_ACT = 1u << 2,
    LOOM_RC_MLA_UP_PROJ = 1u << 3,
    LOOM_RC_MLP = 1u << 4,
    LOOM_RC_MOE = 1u << 5,
    LOOM_RC_SHARED_EXPERTS = 1u << 6,
};
#define LOOM_RC_MODULES_ALL 0x7fu

/* Megatron's module names, in bit order ("core_attn", "layernorm", …). */
const char *loom_recompute_module_name(uint32_t bit);

/* Parses a comma- or space-separated list of Megatron module names into
 * bits; false (and *bad, the offending name, when not NULL) on an unknown
 * name or an empty list. */
bool loom_recompute_modules_parse(const char *list, uint32_t *bits, char *bad, size_t bad_len);

/* "core_attn,moe_act" — the names of bits, comma-separated, into buf. */
void loom_recompute_modules_format(uint32_t bits, char *buf, size_t len);

/* The modules p recomputes selectively: p->recompute_modules, or Megatron's
 * default (core_attn) when none is set; 0 unless p->recompute is selective. */
uint32_t loom_recompute_selected(const loom_parallel *p);

/* The modules of the graph op `op` belongs to (LOOM_RC_* bits; 0 for none).
 * Ops outside the transformer blocks belong to none but core_attn. */
uint32_t loom_recompute_op_modules(const loom_graph *g, int32_t op);

/* Whether op `op` is the attention core (core_attn): the fused attention
 * kernel or an op of the unfused chain on the s×t scores. */
bool loom_recompute_core_attn_op(const loom_graph *g, int32_t op);

/* Whether op `op` reruns its forward in the backward under p's selective
 * recompute. torchtitan's selective recompute is op-level (eval.c) and
 * keeps its fused attention: there only the unfused attention core reruns. */
bool loom_recompute_op_reruns(const loom_graph *g, const loom_parallel *p, int32_t op);

/* Whether the tensor `tensor`, which op `saver` keeps for its backward, is
 * dropped (and rebuilt in the backward) under p's selective recompute. */
bool loom_recompute_drops(const loom_graph *g, const loom_parallel *p, int32_t saver,
                          int32_t tensor);

#endif
