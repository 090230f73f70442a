/*
 * test_eager.c — element-wise ops under eager PyTorch (costs/eager.h): the
 * op time of an RMSNorm, a rotary embedding and SwiGLU against a hand count
 * of the kernels torchtitan's Python definitions launch and the bytes each
 * moves, and ops that eager mode runs as one kernel left as they were.
 *
 * Calibration: H100 SXM (3,350 GB/s HBM, 66.9 TFLOP/s fp32 CUDA-core) with
 * mem_eff 0.25, eager_mem_eff 0.5, vector_eff 0.5 and a kernel overhead of
 * 1 us, so that a fused op takes
 *   t = bytes / 837.5 GB/s + kernels · 1 us
 * and an eager chain, plain ATen streaming kernels (calib.c eager_mem_eff),
 *   t = bytes / 1,675 GB/s + kernels · 1 us.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph_tensor.h"
#include "op_time.h"
#include "costs/compute.h"

#define HBM_S_PER_BYTE (1 / (3350e9 * 0.5))
#define FUSED_S_PER_BYTE (1 / (3350e9 * 0.25))
#define LAUNCH_S 1e-6

/* An op of kind / fn over in[] (and weight w, or -1) writing a tensor
 * shaped like in[0]. */
static int32_t pointwise(loom_graph *g, const char *name, loom_op_kind kind, const char *fn,
                         int n_in, const int32_t *in, int32_t w, int nd, const char *dims,
                         const int64_t *sizes)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s.y", name);
    int32_t y = test_tensor(g, buf, LOOM_DTYPE_BF16, nd, dims, sizes, false);
    loom_op o = {.kind = kind, .n_in = n_in, .n_out = 1, .out = {y}, .n_w = w >= 0 ? 1 : 0,
                 .w = {w}};
    for (int i = 0; i < n_in; i++) o.in[i] = in[i];
    snprintf(o.name, sizeof o.name, "%s", name);
    snprintf(o.fn, sizeof o.fn, "%s", fn);
    int32_t id = -1;
    loom_error err;
    if (loom_graph_add_op(g, &o, &id, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return id;
}

int main(void)
{
    loom_error err;
    loom_cluster c;
    CHECK_INT_EQ(loom_cluster_load("dgx-h100-x1", &c, &err), LOOM_OK);
    loom_calib cal;
    loom_calib_default(&c.gpu, &cal);
    cal.mem_eff = 0.25;
    cal.eager_mem_eff = 0.5;
    cal.vector_eff = 0.5;
    cal.kernel_overhead_s = LAUNCH_S;
    loom_cost_model *m = NULL;
    CHECK_INT_EQ(loom_cost_model_create(&c, &cal, NULL, &m, &err), LOOM_OK);
    CHECK_INT_EQ(loom_cost_model_elementwise(m), LOOM_ELEMENTWISE_FUSED);

    loom_graph *g = NULL;
    CHECK_INT_EQ(loom_graph_create("eager", &g, &err), LOOM_OK);
    /* x [s=1024, h=4096] bf16: n = 4,194,304 elements of 2 B */
    const int64_t s = 1024, h = 4096, f = 8192;
    const double n = (double)(s * h);
    int32_t x = test_tensor(g, "x", LOOM_DTYPE_BF16, 2, "sh", (int64_t[]){s, h}, false);
    int32_t nw = test_tensor(g, "norm.w", LOOM_DTYPE_BF16, 1, "h", (int64_t[]){h}, true);
    int32_t norm = pointwise(g, "norm", LOOM_OP_NORM, "rmsnorm", 1, &x, nw, 2, "sh",
                             (int64_t[]){s, h});
    /* q [b=1, s=1024, heads=32, d=128]: n elements too */
    int32_t q = test_tensor(g, "q", LOOM_DTYPE_BF16, 4, "bsnd", (int64_t[]){1, s, 32, 128}, false);
    int32_t rope = pointwise(g, "rope", LOOM_OP_ELEMENTWISE, "rope", 1, &q, -1, 4, "bsnd",
                             (int64_t[]){1, s, 32, 128});
    /* gate, up [s, f=8192] -> y [s, f]: 2n elements each */
    int32_t gu[2] = {test_tensor(g, "gate", LOOM_DTYPE_BF16, 2, "sf", (int64_t[]){s, f}, false),
                     test_tensor(g, "up", LOOM_DTYPE_BF16, 2, "sf", (int64_t[]){s, f}, false)};
    int32_t swiglu = pointwise(g, "act", LOOM_OP_ELEMENTWISE, "swiglu", 2, gu, -1, 2, "sf",
                               (int64_t[]){s, f});
    int32_t xr[2] = {x, test_tensor(g, "r", LOOM_DTYPE_BF16, 2, "sh", (int64_t[]){s, h}, false)};
    int32_t add = pointwise(g, "add", LOOM_OP_ELEMENTWISE, "add", 2, xr, -1, 2, "sh",
                            (int64_t[]){s, h});
    CHECK_INT_EQ(loom_graph_finalize(g, &err), LOOM_OK);

    /* Fused (the default): one pass over the operands, one launch.
     * RMSNorm reads x and writes y (2 B each) and reads the 4096-wide
     * weight: 4n + 8192 B. Backward twice the bytes, one launch per
     * operand gradient. */
    loom_op_time t = test_op_time(m, g, norm, NULL, 0);
    double fused_norm = (4 * n + 2 * h) * FUSED_S_PER_BYTE;
    CHECK_NEAR_REL(t.fwd_s, fused_norm + LAUNCH_S, 1e-9);
    CHECK_NEAR_REL(t.bwd_s, 2 * fused_norm + LAUNCH_S, 1e-9);
    loom_op_time fused_add = test_op_time(m, g, add, NULL, 0);

    /* Eager, torchtitan's RMSNorm: x.float() (read 2, write 4 B), pow(2)
     * (4 + 4), mean(-1) (read 4), + eps and rsqrt on 1024 rows (nothing to
     * speak of), x · rsqrt (4 + 4), .type_as(x) (4 + 2), · weight (2 + 2):
     * 6 + 8 + 4 + 8 + 6 + 4 = 36 B per element in 8 kernels, and the
     * weight's 8192 B. n = 4,194,304: 151,003,136 B = 90.15 us + 8 us
     * forward; backward twice the bytes and 16 kernels: 196.3 us. */
    loom_cost_model_set_elementwise(m, LOOM_ELEMENTWISE_EAGER);
    CHECK_INT_EQ(loom_cost_model_elementwise(m), LOOM_ELEMENTWISE_EAGER);
    t = test_op_time(m, g, norm, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, 151003136.0 * HBM_S_PER_BYTE + 8 * LAUNCH_S, 1e-9);
    CHECK_NEAR_REL(t.fwd_s, 98.15e-6, 1e-3);
    CHECK_NEAR_REL(t.bwd_s, 2 * 151003136.0 * HBM_S_PER_BYTE + 16 * LAUNCH_S, 1e-9);

    /* Rotary embedding (apply_rotary_emb): x.float() (2 + 4), the complex
     * product with freqs_cis (4 + 4), .type_as (4 + 2): 20 B per element,
     * 3 kernels, against 4 B fused. */
    t = test_op_time(m, g, rope, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, 20 * n * HBM_S_PER_BYTE + 3 * LAUNCH_S, 1e-9);
    CHECK_NEAR_REL(t.bwd_s, 40 * n * HBM_S_PER_BYTE + 6 * LAUNCH_S, 1e-9);

    /* SwiGLU on 2n outputs: F.silu(gate) (2 + 2), · up (2 + 2 + 2): 10 B per
     * element in 2 kernels, against gate + up + y = 6 B fused. */
    t = test_op_time(m, g, swiglu, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, 10 * 2 * n * HBM_S_PER_BYTE + 2 * LAUNCH_S, 1e-9);
    CHECK_NEAR_REL(t.bwd_s, 20 * 2 * n * HBM_S_PER_BYTE + 4 * LAUNCH_S, 1e-9);

    /* A residual add is one ATen kernel in eager mode too: unchanged. */
    t = test_op_time(m, g, add, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, fused_add.fwd_s, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, fused_add.bwd_s, 1e-12);

    /* The chains themselves: fp32 activations skip both casts (.float() and
     * .type_as() return their input): RMSNorm 8 + 4 + 8 + 8 = 28 B in 6
     * kernels, rope 8 B in 1. */
    loom_eager_chain ch;
    const loom_op *op = loom_graph_op(g, norm);
    CHECK(loom_eager_chain_of(op, 4, &ch));
    CHECK_NEAR_REL(ch.bytes_per_elem, 28, 1e-12);
    CHECK_INT_EQ(ch.kernels, 6);
    CHECK(loom_eager_chain_of(loom_graph_op(g, rope), 4, &ch));
    CHECK_NEAR_REL(ch.bytes_per_elem, 8, 1e-12);
    CHECK_INT_EQ(ch.kernels, 1);
    CHECK(!loom_eager_chain_of(loom_graph_op(g, add), 2, &ch));

    /* Megatron without RoPE fusion (position embedding "yarn" that is not
     * MLA: gpt-oss): fused mode prices rope_utils.py's eager
     * _apply_rotary_pos_emb_bshd, per element -x2 (2 B), cat (4), t·cos
     * (4), rot·sin (4), + (6), cat with the empty t_pass (4) = 24 B in 6
     * kernels, against 4 B in 1; backward g·sin (4), -g (2), chunk's cat
     * (4), g·cos (4), the sum of t's two gradients (6) = 20 B in 5. Plain
     * ATen kernels: eager_mem_eff. The same model with MLA (DeepSeek's
     * yarn) keeps the fused kernel. */
    loom_cost_model_set_elementwise(m, LOOM_ELEMENTWISE_FUSED);
    loom_op_time fused_rope = test_op_time(m, g, rope, NULL, 0);
    CHECK_NEAR_REL(fused_rope.fwd_s, 4 * n * FUSED_S_PER_BYTE + LAUNCH_S, 1e-9);
    loom_model_info *mi = loom_graph_info(g);
    snprintf(mi->facts.rope_scaling, sizeof mi->facts.rope_scaling, "yarn");
    t = test_op_time(m, g, rope, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, 24 * n * HBM_S_PER_BYTE + 6 * LAUNCH_S, 1e-9);
    CHECK_NEAR_REL(t.bwd_s, 20 * n * HBM_S_PER_BYTE + 5 * LAUNCH_S, 1e-9);
    t = test_op_time(m, g, add, NULL, 0);   /* only the rotary embedding */
    CHECK_NEAR_REL(t.fwd_s, fused_add.fwd_s, 1e-12);
    mi->kv_lora_rank = 512;
    t = test_op_time(m, g, rope, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, fused_rope.fwd_s, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, fused_rope.bwd_s, 1e-12);
    /* The shipped defaults: the H100 fit's mem_eff (0.400095) is an in-run
     * residual of Megatron steps; the chains keep the prior's 0.85
     * (calib.c). On Grand Teton's H100 (2,400 GB/s HBM2e, device.c) with the
     * default 2 us per kernel, the eager RMSNorm's forward is 151,003,136 B /
     * (2,400 GB/s · 0.85) + 8 · 2 us = 74.02 + 16 = 90.02 us. */
    loom_cost_model_destroy(m);
    m = NULL;
    const loom_device *gt = loom_device_find("H100-96GB-HBM2e");
    CHECK(gt != NULL);
    if (gt) {
        c.gpu = *gt;
        loom_calib_default(&c.gpu, &cal);
        CHECK_NEAR_REL(cal.mem_eff, 0.400095, 1e-9);
        CHECK_NEAR_REL(cal.eager_mem_eff, 0.85, 1e-12);
        CHECK_INT_EQ(loom_cost_model_create(&c, NULL, NULL, &m, &err), LOOM_OK);
        loom_cost_model_set_elementwise(m, LOOM_ELEMENTWISE_EAGER);
        t = test_op_time(m, g, norm, NULL, 0);
        CHECK_NEAR_REL(t.fwd_s, 151003136.0 / (2400e9 * 0.85) + 8 * 2e-6, 1e-9);
        CHECK_NEAR_REL(t.fwd_s, 90.02e-6, 1e-4);
    }

    loom_cost_model_destroy(m);
    loom_graph_destroy(g);
    return check_done();
}
