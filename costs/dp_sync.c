/*
 * dp_sync.c — the data-parallel gradient sync per ZeRO stage (dp_sync.h).
 */
#include "costs/dp_sync.h"

#include "costs/memory.h"

int loom_dp_sync_ops(double n, int zero, bool grad_bf16, int64_t micro_batches,
                     loom_dp_sync_op out[LOOM_DP_SYNC_MAX_OPS])
{
    double m = micro_batches > 0 ? (double)micro_batches : 1;
    double grads = (grad_bf16 ? 2 : LOOM_MEM_GRAD_BYTES) * n, weights = LOOM_MEM_PARAM_BYTES * n;
    if (zero <= 0) {
        out[0] = (loom_dp_sync_op){LOOM_COLL_ALL_REDUCE, grads, 1};
        return 1;
    }
    out[0] = (loom_dp_sync_op){LOOM_COLL_REDUCE_SCATTER, grads, zero >= 2 ? m : 1};
    out[1] = (loom_dp_sync_op){LOOM_COLL_ALL_GATHER, weights, zero >= 3 ? 2 * m : 1};
    return 2;
}
