/*
 * te_fp8.h — Transformer Engine's FP8 recipe: which of a graph's ops run on
 * fp8 tensor cores, for the compute model (costs/compute.c) and the memory
 * model (costs/memory.c) alike.
 *
 * Under TE's FP8 recipe (loom eval --dtype fp8, Megatron's --fp8-format)
 * the graph's precision is fp8 while its tensors stay in bf16/fp16. A
 * Linear layer's GEMMs (fprop, dgrad, wgrad) run on fp8 tensor cores, the
 * experts' grouped GEMMs (TEGroupedLinear) included; attention, norms,
 * activations, the vocabulary projection (Megatron's output layer is not a
 * TE module), the router's gate (Megatron's own router_gating_linear, bf16
 * or fp32) and all communication stay in bf16. Such a GEMM casts its input
 * to fp8 once and saves that fp8 copy for its backward (TE's Linear,
 * LayerNormLinear and GroupedLinear save the quantised input, 1 byte an
 * element, for the wgrad GEMM), not the 16-bit tensor.
 */
#ifndef LOOM_COSTS_TE_FP8_H
#define LOOM_COSTS_TE_FP8_H

#include "graph/graph.h"

#include <stdbool.h>

/* Whether g runs under TE's FP8 recipe: precision fp8, tensors stored in
 * `stored` (bf16 or fp16). */
bool loom_te_fp8_graph(const loom_graph *g, loom_dtype stored);

/* Whether op is a GEMM TE runs on fp8 tensor cores (see above). */
bool loom_te_fp8_gemm(const loom_graph *g, const loom_op *op, loom_dtype stored);

#endif
