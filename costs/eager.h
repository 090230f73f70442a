/*
 * eager.h — what an element-wise op costs when PyTorch runs it eagerly,
 * one kernel per primitive, instead of as one fused kernel.
 *
 * loom's graph has one op per element-wise step of a block (an RMSNorm, a
 * rotary embedding, SwiGLU's silu(gate)·up, a residual add), and prices
 * each as one pass over its operands: what Transformer Engine's and
 * Megatron's fused kernels (and torch.compile's Inductor) run. Eager
 * PyTorch (torchtitan without `training.compile`, its default) runs the
 * Python definitions of some of them as a chain of ATen kernels, each
 * reading and writing the whole activation in HBM, and in fp32 where the
 * definition upcasts. Their traffic, per element of the op's output, for
 * activations of a bytes (2 for bf16) and fp32 of 4 (casts are skipped
 * when the activation is already fp32: .float() and .type_as() return it):
 *
 *   rmsnorm  torchtitan's RMSNorm (models/norms.py) and Hugging Face's
 *            LlamaRMSNorm: x.float() a+4, pow(2) 8, mean(-1) 4,
 *            + eps and rsqrt (per row: no traffic), x·rsqrt 8,
 *            .type_as(x) 4+a, ·weight 2a:            4a + 28 bytes, 8 kernels
 *            (one fused kernel reads x and writes y: 2a);
 *   rope     torchtitan's apply_rotary_emb: x.float() a+4, complex ·
 *            freqs_cis 8 (the table is [s, d/2], broadcast), .type_as 4+a:
 *                                                    2a + 16 bytes, 3 kernels
 *            (Hugging Face's rotate_half form, q·cos + rotate_half(q)·sin
 *            with its slice-negate-concatenate, moves 10a: the same for
 *            bf16); fused: 2a;
 *   swiglu   F.silu(gate) 2a, · up 3a:               5a bytes, 2 kernels
 *            (fused: read gate and up, write y: 3a).
 * Every other element-wise op (add, gelu, silu alone, dropout, LayerNorm,
 * softmax, the loss) is one native ATen kernel in eager mode too and costs
 * the same either way.
 *
 * The backward is priced by compute.c's rule for memory-bound ops (about
 * twice the forward bytes), kernel for kernel: autograd runs one backward
 * node per forward primitive.
 *
 * A weight (RMSNorm's) is read once more, as by the fused kernel.
 *
 * Units: bytes per output element, kernels per op.
 */
#ifndef LOOM_EAGER_H
#define LOOM_EAGER_H

#include <stdbool.h>
#include "graph/graph.h"

/* How the element-wise ops of a block run: fused (one kernel per graph op:
 * Transformer Engine / Megatron fusions, torch.compile) or eager (PyTorch's
 * kernel per primitive). */
typedef enum { LOOM_ELEMENTWISE_FUSED, LOOM_ELEMENTWISE_EAGER } loom_elementwise_mode;

/* One op's eager kernels: HBM bytes per output element and their number. */
typedef struct {
    double bytes_per_elem;
    int kernels;
} loom_eager_chain;

/* The eager chain of op (an ELEMENTWISE or NORM op) whose activations are
 * elem_bytes wide; false when eager PyTorch runs it as one kernel, as the
 * fused pricing already assumes. */
bool loom_eager_chain_of(const loom_op *op, double elem_bytes, loom_eager_chain *out);

#endif
