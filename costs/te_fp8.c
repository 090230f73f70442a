/*
 * te_fp8.c — which ops Transformer Engine's FP8 recipe runs in fp8
 * (te_fp8.h).
 */
#include "costs/te_fp8.h"

bool loom_te_fp8_graph(const loom_graph *g, loom_dtype stored)
{
    return loom_graph_info_c(g)->dtype == LOOM_DTYPE_FP8 &&
           (stored == LOOM_DTYPE_BF16 || stored == LOOM_DTYPE_FP16);
}

bool loom_te_fp8_gemm(const loom_graph *g, const loom_op *op, loom_dtype stored)
{
    if (op->kind != LOOM_OP_EINSUM || op->n_w < 1 || op->n_in < 1) return false;
    if (!loom_te_fp8_graph(g, stored)) return false;
    const loom_tensor *w0 = loom_graph_tensor(g, op->w[0]);
    if (loom_tensor_dim_index(w0, "v") >= 0) return false;   /* the output layer */
    bool router = loom_tensor_dim_index(w0, "e") >= 0 &&
                  loom_tensor_dim_index(loom_graph_tensor(g, op->in[0]), "e") < 0;
    return !router;
}
