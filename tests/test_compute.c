/*
 * test_compute.c — compute time of an op on its shard: the roofline against
 * hand computations (compute-bound and memory-bound), splits dividing FLOPs,
 * the GEMM roll-off, causal flash attention, unsupported dtypes, and the
 * profile db taking precedence over the roofline.
 *
 * The calibration is set to round values so the expected times can be
 * written from datasheet figures alone (H100 SXM: 989.4 TFLOP/s bf16,
 * 3,350 GB/s HBM, 66.9 TFLOP/s FP32 CUDA-core):
 *   gemm_eff_max 0.5, attn_eff 0.4, mem_eff 0.5, vector_eff 0.5,
 *   gemm_half_flops and attn_half_flops 0 (no roll-off), kernel_overhead 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "graph_tensor.h"
#include "op_time.h"
#include "costs/compute.h"

#define H100_BF16 989.4e12
#define H100_HBM 3350e9
#define H100_VEC 66.9e12

static loom_calib round_calib(const loom_cluster *c)
{
    loom_calib cal;
    loom_calib_default(&c->gpu, &cal);
    cal.gemm_eff_max = 0.5;
    cal.attn_eff = 0.4;
    cal.mem_eff = 0.5;
    cal.vector_eff = 0.5;
    cal.gemm_half_flops = 0;
    cal.attn_half_flops = 0;
    cal.kernel_overhead_s = 0;
    return cal;
}

static int32_t op(loom_graph *g, loom_op *o)
{
    int32_t id = -1;
    loom_error err;
    if (loom_graph_add_op(g, o, &id, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return id;
}

/* "NAME.SUFFIX" in buf (tensor names of a test op). */
static const char *nm(char *buf, const char *name, const char *suffix)
{
    snprintf(buf, 64, "%s.%s", name, suffix);
    return buf;
}

/* y[s,f] = x[s,h] · W[h,f] with bf16 (or dt) operands. */
static int32_t gemm(loom_graph *g, const char *name, loom_dtype dt, int64_t s, int64_t h,
                    int64_t f)
{
    char b[64];
    int32_t x = test_tensor(g, nm(b, name, "x"), dt, 2, "sh", (int64_t[]){s, h}, false);
    int32_t w = test_tensor(g, nm(b, name, "W"), dt, 2, "hf", (int64_t[]){h, f}, true);
    int32_t y = test_tensor(g, nm(b, name, "y"), dt, 2, "sf", (int64_t[]){s, f}, false);
    loom_op o = {.kind = LOOM_OP_EINSUM, .n_in = 1, .n_w = 1, .n_out = 1,
                 .in = {x}, .w = {w}, .out = {y}};
    snprintf(o.name, sizeof o.name, "%s", name);
    snprintf(o.einsum, sizeof o.einsum, "sh,hf->sf");
    return op(g, &o);
}

/* o = attention(q [b,s,n,d], k [b,t,n,d], v [b,t,n,d]); the letters are dim names. */
static int32_t attention(loom_graph *g, const char *name, int64_t s, int64_t t, bool causal)
{
    char b[64];
    const loom_dtype bf = LOOM_DTYPE_BF16;
    int32_t q = test_tensor(g, nm(b, name, "q"), bf, 4, "bsnd", (int64_t[]){1, s, 16, 128}, false);
    int32_t k = test_tensor(g, nm(b, name, "k"), bf, 4, "btnd", (int64_t[]){1, t, 16, 128}, false);
    int32_t v = test_tensor(g, nm(b, name, "v"), bf, 4, "btnd", (int64_t[]){1, t, 16, 128}, false);
    int32_t o = test_tensor(g, nm(b, name, "o"), bf, 4, "bsnd", (int64_t[]){1, s, 16, 128}, false);
    loom_op a = {.kind = LOOM_OP_ATTENTION, .n_in = 3, .n_out = 1, .in = {q, k, v}, .out = {o},
                 .causal = causal};
    snprintf(a.name, sizeof a.name, "%s", name);
    return op(g, &a);
}

static int32_t add(loom_graph *g, const char *name, int64_t s, int64_t h)
{
    char buf[64];
    const loom_dtype bf = LOOM_DTYPE_BF16;
    int32_t a = test_tensor(g, nm(buf, name, "a"), bf, 2, "sh", (int64_t[]){s, h}, false);
    int32_t b = test_tensor(g, nm(buf, name, "b"), bf, 2, "sh", (int64_t[]){s, h}, false);
    int32_t y = test_tensor(g, nm(buf, name, "y"), bf, 2, "sh", (int64_t[]){s, h}, false);
    loom_op o = {.kind = LOOM_OP_ELEMENTWISE, .n_in = 2, .n_out = 1, .in = {a, b}, .out = {y}};
    snprintf(o.name, sizeof o.name, "%s", name);
    snprintf(o.fn, sizeof o.fn, "add");
    return op(g, &o);
}

/* An einsum x·W -> y with the given dims (letters as dim names). */
static int32_t einsum3(loom_graph *g, const char *name, const char *sig, int nx, const char *xd,
                       const int64_t *xs, int nw, const char *wd, const int64_t *ws, int ny,
                       const char *yd, const int64_t *ys)
{
    char b[64];
    int32_t x = test_tensor(g, nm(b, name, "x"), LOOM_DTYPE_BF16, nx, xd, xs, false);
    int32_t w = test_tensor(g, nm(b, name, "W"), LOOM_DTYPE_BF16, nw, wd, ws, true);
    int32_t y = test_tensor(g, nm(b, name, "y"), LOOM_DTYPE_BF16, ny, yd, ys, false);
    loom_op o = {.kind = LOOM_OP_EINSUM, .n_in = 1, .n_w = 1, .n_out = 1,
                 .in = {x}, .w = {w}, .out = {y}};
    snprintf(o.name, sizeof o.name, "%s", name);
    snprintf(o.einsum, sizeof o.einsum, "%s", sig);
    return op(g, &o);
}

int main(void)
{
    loom_error err;
    loom_cluster c;
    CHECK_INT_EQ(loom_cluster_load("dgx-h100-x1", &c, &err), LOOM_OK);
    loom_calib cal = round_calib(&c);
    loom_cost_model *m = NULL;
    CHECK_INT_EQ(loom_cost_model_create(&c, &cal, NULL, &m, &err), LOOM_OK);
    CHECK(loom_cost_model_profile_db(m) == NULL);
    CHECK(strcmp(loom_cost_model_cluster(m)->name, "dgx-h100-x1") == 0);
    CHECK_NEAR_REL(loom_cost_model_calib(m)->gemm_eff_max, 0.5, 0);

    loom_graph *g = NULL;
    CHECK_INT_EQ(loom_graph_create("t", &g, &err), LOOM_OK);
    int32_t big = gemm(g, "big", LOOM_DTYPE_BF16, 4096, 4096, 16384);
    int32_t gemv = gemm(g, "gemv", LOOM_DTYPE_BF16, 1, 8192, 8192);
    int32_t ew = add(g, "add", 4096, 4096);
    int32_t full = attention(g, "attn", 2048, 2048, false);
    int32_t causal = attention(g, "causal", 2048, 2048, true);
    int32_t decode = attention(g, "decode", 1, 2048, true);

    /* Compute-bound GEMM: F = 2·4096·4096·16384 = 5.4976e11 FLOPs,
     * bytes = 2·(4096·4096 + 2·4096·16384) = 301,989,888.
     * compute 5.4976e11 / (989.4e12 · 0.5) = 1.1113 ms >> memory
     * 3.02e8 / (3350e9 · 0.5) = 0.18 ms. Backward: dX and dW, each F. */
    double F = 2.0 * 4096 * 4096 * 16384;
    double bytes = 2.0 * (4096.0 * 4096 + 2 * 4096.0 * 16384);
    CHECK_NEAR_REL((double)loom_graph_op(g, big)->bytes_moved, bytes, 0);
    double tc = F / (H100_BF16 * 0.5);
    CHECK(tc > bytes / (H100_HBM * 0.5) * 5);
    loom_op_time t = test_op_time(m, g, big, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, tc, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 2 * tc, 1e-12);
    CHECK_INT_EQ(t.source, LOOM_SRC_ROOFLINE);

    /* Splits divide the FLOPs: f into 4 (column-parallel), s into 2 and f
     * into 4, the contracted h into 2 (row-parallel); a dim the op does not
     * have changes nothing. Still compute-bound at 1/8. */
    t = test_op_time(m, g, big, (loom_dim_split[]){{"f", 4}}, 1);
    CHECK_NEAR_REL(t.fwd_s, tc / 4, 1e-12);
    t = test_op_time(m, g, big, (loom_dim_split[]){{"s", 2}, {"f", 4}}, 2);
    CHECK_NEAR_REL(t.fwd_s, tc / 8, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, tc / 4, 1e-12);
    t = test_op_time(m, g, big, (loom_dim_split[]){{"h", 2}}, 1);
    CHECK_NEAR_REL(t.fwd_s, tc / 2, 1e-12);
    t = test_op_time(m, g, big, (loom_dim_split[]){{"heads", 8}}, 1);
    CHECK_NEAR_REL(t.fwd_s, tc, 1e-12);
    /* A split that does not divide is an error naming the op and the dim. */
    loom_op_time bad;
    CHECK_INT_EQ(loom_cost_op_time(m, g, big, (loom_dim_split[]){{"f", 3}}, 1, &bad, &err),
                 LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "big");
    CHECK_STR_CONTAINS(err.msg, "\"f\"");
    CHECK_STR_CONTAINS(err.msg, "3 parts");
    CHECK_INT_EQ(loom_cost_op_time(m, g, big, (loom_dim_split[]){{"f", 0}}, 1, &bad, &err),
                 LOOM_ERR_INVALID);
    CHECK_INT_EQ(loom_cost_op_time(m, g, 99, NULL, 0, &bad, &err), LOOM_ERR_INVALID);

    /* Memory-bound GEMV: F = 2·8192² = 1.34e8 -> 0.27 us of compute; the
     * 8192² bf16 weight (134 MB) plus x and y take
     * 2·(8192 + 8192² + 8192) / (3350e9 · 0.5) = 80.2 us. */
    double gbytes = 2.0 * (8192 + 8192.0 * 8192 + 8192);
    t = test_op_time(m, g, gemv, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, gbytes / (H100_HBM * 0.5), 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 2 * gbytes / (H100_HBM * 0.5), 1e-12);
    /* Row-parallel split of h by 8 divides the weight bytes (x too; y not):
     * 2·(1024 + 1024·8192 + 8192). */
    t = test_op_time(m, g, gemv, (loom_dim_split[]){{"h", 8}}, 1);
    CHECK_NEAR_REL(t.fwd_s, 2.0 * (1024 + 1024.0 * 8192 + 8192) / (H100_HBM * 0.5), 1e-12);

    /* Pointwise add of two 4096² bf16 tensors: 16.8 MFLOP on CUDA cores
     * (0.5 us) vs 3 · 32 MiB = 100.7 MB through HBM (60.1 us): memory-bound.
     * Backward (linear): reads dy, writes two grads: 2× the bytes. */
    double ebytes = 3.0 * 4096 * 4096 * 2;
    CHECK(4096.0 * 4096 / (H100_VEC * 0.5) < ebytes / (H100_HBM * 0.5) / 50);
    t = test_op_time(m, g, ew, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, ebytes / (H100_HBM * 0.5), 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 2 * ebytes / (H100_HBM * 0.5), 1e-12);
    t = test_op_time(m, g, ew, (loom_dim_split[]){{"s", 4}}, 1);
    CHECK_NEAR_REL(t.fwd_s, ebytes / 4 / (H100_HBM * 0.5), 1e-12);

    /* Attention, full: 4·b·heads·s·t·d = 4·16·2048²·128 = 3.436e10 FLOPs,
     * compute 3.436e10 / (989.4e12 · 0.4) = 86.8 us (bytes 16.8 MB: 10 us).
     * Causal with 16 blocks of 128: the flash kernel computes 136 of 256
     * tiles = 17/32 of the work. Decoding one query sees every key. */
    double af = 4.0 * 16 * 2048 * 2048 * 128;
    CHECK_NEAR_REL((double)loom_graph_op(g, full)->fwd_flops, af, 0);
    CHECK_NEAR_REL((double)loom_graph_op(g, causal)->fwd_flops, af, 0);   /* model FLOPs */
    double ta = af / (H100_BF16 * 0.4);
    t = test_op_time(m, g, full, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, ta, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 2.5 * ta, 1e-12);
    t = test_op_time(m, g, causal, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, ta * 17 / 32, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 2.5 * ta * 17 / 32, 1e-12);
    /* Heads split 4 ways (tensor parallel): a quarter. */
    t = test_op_time(m, g, causal, (loom_dim_split[]){{"n", 4}}, 1);
    CHECK_NEAR_REL(t.fwd_s, ta * 17 / 32 / 4, 1e-12);
    /* Decode: 4·16·1·2048·128 FLOPs is tiny; memory dominates: bytes =
     * q + o (2·16·128·2) + k + v (2·2048·16·128·2). */
    double dbytes = 2.0 * (2 * 16 * 128) + 2.0 * (2 * 2048 * 16 * 128);
    t = test_op_time(m, g, decode, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, dbytes / (H100_HBM * 0.5), 1e-12);

    /* GEMM roll-off: with gemm_half_flops = F the GEMM reaches half of
     * gemm_eff_max, so it takes twice as long; kernel overhead adds per kernel
     * (1 forward, 2 backward). */
    loom_calib cal2 = cal;
    cal2.gemm_half_flops = F;
    cal2.kernel_overhead_s = 1e-6;
    loom_cost_model *m2 = NULL;
    CHECK_INT_EQ(loom_cost_model_create(&c, &cal2, NULL, &m2, &err), LOOM_OK);
    t = test_op_time(m2, g, big, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, 2 * tc + 1e-6, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 4 * tc + 2e-6, 1e-12);
    CHECK_NEAR_REL(loom_cost_gemm_time_s(m2, F, LOOM_DTYPE_BF16), 2 * tc + 1e-6, 1e-12);
    CHECK_NEAR_REL(loom_cost_memory_time_s(m2, 1e9), 1e9 / (H100_HBM * 0.5), 1e-12);
    /* A grouped GEMM of 8 experts, F in all: one kernel over the total work
     * (2·tc at the roll-off's half) plus 0.9 us per group, one launch:
     * 2·tc + 7.2 us + 1 us; a single group is a plain GEMM. */
    CHECK_NEAR_REL(loom_cost_grouped_gemm_time_s(m2, F, 8, LOOM_DTYPE_BF16), 2 * tc + 8 * 0.9e-6 + 1e-6,
                   1e-12);
    CHECK_NEAR_REL(loom_cost_grouped_gemm_time_s(m2, F, 1, LOOM_DTYPE_BF16), 2 * tc + 1e-6, 1e-12);
    /* Splitting f by 4 with the roll-off: F/4 at eff 0.5·(1/4)/(1/4 + 1) -> 5× the linear time. */
    t = test_op_time(m2, g, big, (loom_dim_split[]){{"f", 4}}, 1);
    CHECK_NEAR_REL(t.fwd_s, tc / 4 * 5 + 1e-6, 1e-12);
    loom_cost_model_destroy(m2);

    /* Attention's own roll-off: with attn_half_flops equal to the causal
     * kernel's computed work W = af·17/32 it reaches half of attn_eff (2×
     * the time; backward, 2.5·W, at 2.5/3.5 of it: 1.4×), plus 2 kernels of
     * overhead backward. The GEMM half does not apply to attention. */
    loom_calib cal3 = cal;
    cal3.attn_half_flops = af * 17 / 32;
    cal3.gemm_half_flops = 1e15;
    cal3.kernel_overhead_s = 1e-6;
    CHECK_INT_EQ(loom_cost_model_create(&c, &cal3, NULL, &m2, &err), LOOM_OK);
    t = test_op_time(m2, g, causal, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, 2 * ta * 17 / 32 + 1e-6, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 2.5 * ta * 17 / 32 * 1.4 + 2e-6, 1e-12);
    /* FlashAttention-2 (PyTorch SDPA) instead of the fused kernel: at
     * attn_fa2_frac of attn_eff, the H100's measured 0.56 by default. */
    CHECK_NEAR_REL(cal.attn_fa2_frac, 0.56, 0);
    CHECK_INT_EQ(loom_cost_model_attention(m), LOOM_ATTN_FUSED);
    loom_cost_model_set_attention(m, LOOM_ATTN_FA2);
    t = test_op_time(m, g, causal, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, ta * 17 / 32 / 0.56, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 2.5 * ta * 17 / 32 / 0.56, 1e-12);
    t = test_op_time(m, g, big, NULL, 0);   /* GEMMs are unchanged */
    CHECK_NEAR_REL(t.fwd_s, tc, 1e-12);
    /* flash-attn 2's varlen kernel behind its bert_padding (llm-foundry's
     * MPT): FA2's kernel time plus the gathers and scatters, plain ATen
     * kernels at eager_mem_eff (the H100 prior's 0.85; this calibration has
     * no kernel overhead). q, k, v and o are 2048·16·128·2 B = 8 MiB each:
     * forward gathers q, k, v (read + write: 2·24 MiB) and scatters o into
     * zeros (write, read + write: 3·8 MiB), 72 MiB; backward gathers o's
     * gradient (2·8) and scatters q's, k's and v's into zeros (3·24), 88
     * MiB. */
    CHECK_NEAR_REL(cal.eager_mem_eff, 0.85, 0);
    loom_cost_model_set_attention(m, LOOM_ATTN_FA2_UNPAD);
    t = test_op_time(m, g, causal, NULL, 0);
    const double mib = 1024.0 * 1024;
    CHECK_NEAR_REL(t.fwd_s, ta * 17 / 32 / 0.56 + 72 * mib / (H100_HBM * 0.85), 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 2.5 * ta * 17 / 32 / 0.56 + 88 * mib / (H100_HBM * 0.85), 1e-12);
    t = test_op_time(m, g, big, NULL, 0);   /* GEMMs are unchanged */
    CHECK_NEAR_REL(t.fwd_s, tc, 1e-12);
    loom_cost_model_set_attention(m, LOOM_ATTN_FUSED);
    loom_cost_model_destroy(m2);

    /* MoE. The router gate x[s,h]·W[h,e] has "e" in its weight only: one
     * GEMM, memory-bound here: (4096·2048 + 2048·128 + 4096·128)·2 B =
     * 17.83 MB / (3350e9 · 0.5) = 10.6 us (its 2.1 GFLOP take 4.3 us), not
     * 128 expert groups. The experts x[e,c,h]·W[e,h,f] (8 experts of 512
     * tokens, h 2048, f 1536) run as one grouped kernel: 25.77 GFLOP /
     * (989.4e12 · 0.5) = 52.1 us + 8 · 0.9 us, over memory (79.7 MB:
     * 47.6 us); backward two such kernels (dX, dW) of the same work each.
     * Expert-parallel over 2: 4 groups, half the work. */
    int32_t router = einsum3(g, "router", "sh,he->se", 2, "sh", (int64_t[]){4096, 2048}, 2, "he",
                             (int64_t[]){2048, 128}, 2, "se", (int64_t[]){4096, 128});
    int32_t experts = einsum3(g, "experts", "ech,ehf->ecf", 3, "ech", (int64_t[]){8, 512, 2048}, 3,
                              "ehf", (int64_t[]){8, 2048, 1536}, 3, "ecf", (int64_t[]){8, 512, 1536});
    double rbytes = 2.0 * (4096.0 * 2048 + 2048.0 * 128 + 4096.0 * 128);
    t = test_op_time(m, g, router, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, rbytes / (H100_HBM * 0.5), 1e-12);
    double xf = 2.0 * 8 * 512 * 2048 * 1536, xt = xf / (H100_BF16 * 0.5);
    CHECK(xt > 2.0 * (8.0 * 512 * 2048 + 8.0 * 2048 * 1536 + 8.0 * 512 * 1536) / (H100_HBM * 0.5));
    t = test_op_time(m, g, experts, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, xt + 8 * 0.9e-6, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 2 * (xt + 8 * 0.9e-6), 1e-12);
    t = test_op_time(m, g, experts, (loom_dim_split[]){{"e", 2}}, 1);
    CHECK_NEAR_REL(t.fwd_s, xt / 2 + 4 * 0.9e-6, 1e-12);

    /* Expert output biases (gpt-oss; Megatron-Core's TEGroupedMLP._apply_bias
     * adds them in eager PyTorch after fc2). In a graph whose model has
     * expert biases, the down projection y[e,c,h] = x[e,c,f]·W[e,f,h] (the
     * transpose of the experts above: the same 52.1 us + 8 · 0.9 us) adds
     * per expert b·p and t + b·p, then one cat: 6 passes of its output's
     * O = 8·512·2048·2 B = 16.78 MB, 2·8 + 1 kernels; backward g·p, its sum,
     * g·b, its sum and split's cat: 8 passes, 4·8 + 1 kernels. At 1 us per
     * kernel and eager_mem_eff 0.25 (838 GB/s): forward 52.1 + 7.2 + 1 (the
     * GEMM's launch) + 120.2 + 17 us, backward 2·(52.1 + 7.2) + 2 + 160.2 +
     * 33 us. The up projection (its
     * output has f: TE's grouped GEMM adds fc1's bias in its epilogue) and
     * a model without expert biases cost the GEMM alone. Expert-parallel
     * over 2 (the e split): half the rows and half the experts. */
    loom_calib calb = cal;
    calb.kernel_overhead_s = 1e-6;
    calb.eager_mem_eff = 0.25;   /* the bias kernels are plain ATen ones: eager_mem_eff */
    loom_cost_model *mb = NULL;
    CHECK_INT_EQ(loom_cost_model_create(&c, &calb, NULL, &mb, &err), LOOM_OK);
    loom_graph *gb = NULL;
    CHECK_INT_EQ(loom_graph_create("expert-bias", &gb, &err), LOOM_OK);
    int32_t down = einsum3(gb, "down", "ecf,efh->ech", 3, "ecf", (int64_t[]){8, 512, 1536}, 3, "efh",
                           (int64_t[]){8, 1536, 2048}, 3, "ech", (int64_t[]){8, 512, 2048});
    int32_t up = einsum3(gb, "up", "ech,ehf->ecf", 3, "ech", (int64_t[]){8, 512, 2048}, 3, "ehf",
                         (int64_t[]){8, 2048, 1536}, 3, "ecf", (int64_t[]){8, 512, 1536});
    double ob = 8.0 * 512 * 2048 * 2, hbm = H100_HBM * 0.25;
    double gf = xt + 8 * 0.9e-6 + 1e-6, gb_s = 2 * (xt + 8 * 0.9e-6) + 2e-6;
    t = test_op_time(mb, gb, down, NULL, 0);   /* no expert biases yet */
    CHECK_NEAR_REL(t.fwd_s, gf, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, gb_s, 1e-12);
    loom_graph_info(gb)->expert_bias = true;
    t = test_op_time(mb, gb, down, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, gf + 6 * ob / hbm + 17e-6, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, gb_s + 8 * ob / hbm + 33e-6, 1e-12);
    t = test_op_time(mb, gb, up, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, gf, 1e-12);
    t = test_op_time(mb, gb, down, (loom_dim_split[]){{"e", 2}}, 1);
    CHECK_NEAR_REL(t.fwd_s, xt / 2 + 4 * 0.9e-6 + 1e-6 + 3 * ob / hbm + 9e-6, 1e-12);
    /* Such a model also runs without Megatron's bias_dropout_fusion (TEGroupedMLP
     * refuses it with biases), so a row-parallel layer's bias (y[s,h] =
     * x[s,f]·W[f,h] + b[h]: 25.77 GFLOP + 8.39 MFLOP of bias, 52.1 us) is
     * added by a kernel of its own: 2 passes of y (16.78 MB, as O above)
     * forward and a 1-pass bias sum backward, one kernel each; a column-
     * parallel bias (y[s,f] = x[s,h]·W[h,f] + b[f]) stays in the GEMM. */
    int32_t rx = test_tensor(gb, "row.x", LOOM_DTYPE_BF16, 2, "sf", (int64_t[]){4096, 1536}, false);
    int32_t rw = test_tensor(gb, "row.W", LOOM_DTYPE_BF16, 2, "fh", (int64_t[]){1536, 2048}, true);
    int32_t rb = test_tensor(gb, "row.b", LOOM_DTYPE_BF16, 1, "h", (int64_t[]){2048}, true);
    int32_t ry = test_tensor(gb, "row.y", LOOM_DTYPE_BF16, 2, "sh", (int64_t[]){4096, 2048}, false);
    loom_op ro = {.kind = LOOM_OP_EINSUM, .n_in = 1, .n_w = 2, .n_out = 1, .in = {rx},
                  .w = {rw, rb}, .out = {ry}, .bias = true};
    snprintf(ro.name, sizeof ro.name, "row");
    snprintf(ro.einsum, sizeof ro.einsum, "sf,fh->sh");
    int32_t row = op(gb, &ro);
    int32_t cx = test_tensor(gb, "col.x", LOOM_DTYPE_BF16, 2, "sh", (int64_t[]){4096, 2048}, false);
    int32_t cw = test_tensor(gb, "col.W", LOOM_DTYPE_BF16, 2, "hf", (int64_t[]){2048, 1536}, true);
    int32_t cbias = test_tensor(gb, "col.b", LOOM_DTYPE_BF16, 1, "f", (int64_t[]){1536}, true);
    int32_t cy = test_tensor(gb, "col.y", LOOM_DTYPE_BF16, 2, "sf", (int64_t[]){4096, 1536}, false);
    loom_op co = {.kind = LOOM_OP_EINSUM, .n_in = 1, .n_w = 2, .n_out = 1, .in = {cx},
                  .w = {cw, cbias}, .out = {cy}, .bias = true};
    snprintf(co.name, sizeof co.name, "col");
    snprintf(co.einsum, sizeof co.einsum, "sh,hf->sf");
    int32_t col = op(gb, &co);
    double rt = (xf + 4096.0 * 2048) / (H100_BF16 * 0.5), ct = (xf + 4096.0 * 1536) / (H100_BF16 * 0.5);
    t = test_op_time(mb, gb, row, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, rt + 1e-6 + 2 * ob / hbm + 1e-6, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 2 * rt + 2e-6 + ob / hbm + 1e-6, 1e-12);
    t = test_op_time(mb, gb, col, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, ct + 1e-6, 1e-12);
    loom_graph_info(gb)->expert_bias = false;   /* a fused bias-dropout-add: the GEMM alone */
    t = test_op_time(mb, gb, row, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, rt + 1e-6, 1e-12);
    loom_graph_destroy(gb);
    loom_cost_model_destroy(mb);

    /* Embedding: token ids [s] gather rows of a [v, h] table into [s, h];
     * it reads only the gathered rows: bytes = 2 · |out| = 2·1024·4096·2.
     * A vocab-split table (Megatron's vocab-parallel embedding) still
     * writes every token's row, so splitting v changes nothing; splitting h
     * divides it. */
    int32_t ids = test_tensor(g, "emb.ids", LOOM_DTYPE_INT64, 1, "s", (int64_t[]){1024}, false);
    int32_t tab = test_tensor(g, "emb.W", LOOM_DTYPE_BF16, 2, "vh", (int64_t[]){32000, 4096}, true);
    int32_t eo = test_tensor(g, "emb.y", LOOM_DTYPE_BF16, 2, "sh", (int64_t[]){1024, 4096}, false);
    loom_op eop = {.kind = LOOM_OP_EMBEDDING, .n_in = 1, .n_w = 1, .n_out = 1, .in = {ids},
                   .w = {tab}, .out = {eo}};
    snprintf(eop.name, sizeof eop.name, "emb");
    int32_t emb = op(g, &eop);
    double emb_s = 2.0 * 1024 * 4096 * 2 / (H100_HBM * 0.5);
    t = test_op_time(m, g, emb, NULL, 0);
    CHECK_NEAR_REL(t.fwd_s, emb_s, 1e-12);
    t = test_op_time(m, g, emb, (loom_dim_split[]){{"v", 8}}, 1);
    CHECK_NEAR_REL(t.fwd_s, emb_s, 1e-12);
    t = test_op_time(m, g, emb, (loom_dim_split[]){{"h", 8}}, 1);
    CHECK_NEAR_REL(t.fwd_s, emb_s / 8, 1e-12);

    /* Views cost nothing. */
    int32_t src = test_tensor(g, "view.x", LOOM_DTYPE_BF16, 2, "sh", (int64_t[]){64, 64}, false);
    int32_t dst = test_tensor(g, "view.y", LOOM_DTYPE_BF16, 2, "hs", (int64_t[]){64, 64}, false);
    loom_op tr = {.kind = LOOM_OP_TRANSPOSE, .n_in = 1, .n_out = 1, .in = {src}, .out = {dst}};
    snprintf(tr.name, sizeof tr.name, "view");
    int32_t view = op(g, &tr);
    t = test_op_time(m, g, view, NULL, 0);
    CHECK(t.fwd_s == 0 && t.bwd_s == 0 && t.source == LOOM_SRC_ROOFLINE);

    /* fp8 on an A100: no fp8 tensor cores -> unsupported, named. */
    int32_t f8 = gemm(g, "f8", LOOM_DTYPE_FP8, 128, 128, 128);
    loom_cluster a100;
    CHECK_INT_EQ(loom_cluster_load("dgx-a100-80g-x1", &a100, &err), LOOM_OK);
    loom_cost_model *ma = NULL;
    CHECK_INT_EQ(loom_cost_model_create(&a100, NULL, NULL, &ma, &err), LOOM_OK);
    CHECK_INT_EQ(loom_cost_op_time(ma, g, f8, NULL, 0, &bad, &err), LOOM_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "f8");
    CHECK_STR_CONTAINS(err.msg, "fp8");
    CHECK_STR_CONTAINS(err.msg, "A100");
    /* …while the H100 runs it at its fp8 peak (1978.9 TFLOP/s). */
    t = test_op_time(m, g, f8, NULL, 0);
    double f8_flops = 2.0 * 128 * 128 * 128, f8_bytes = 3.0 * 128 * 128;
    double want = f8_flops / (1978.9e12 * 0.5);
    if (f8_bytes / (H100_HBM * 0.5) > want) want = f8_bytes / (H100_HBM * 0.5);
    CHECK_NEAR_REL(t.fwd_s, want, 1e-12);
    /* A100 defaults (NULL calib) are the device's own. */
    CHECK(strcmp(loom_cost_model_calib(ma)->device, "A100-SXM4-80GB") == 0);
    loom_cost_model_destroy(ma);

    /* Profile db: a measured shard wins over the roofline; other shards fall
     * back. The db is written with the profile-db API itself. */
    char dir[] = "/tmp/loom_test_compute_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char dbpath[128];
    snprintf(dbpath, sizeof dbpath, "%s/db.json", dir);
    loom_profile_db *db = NULL;
    CHECK_INT_EQ(loom_profile_db_create("NVIDIA H100 80GB HBM3", "13.0", "", "", &db, &err),
                 LOOM_OK);
    loom_profile_entry e;
    memset(&e, 0, sizeof e);
    CHECK_INT_EQ(loom_profile_key_from_op(g, big, (loom_dim[]){{"f", 4}}, 1, &e.key, &err),
                 LOOM_OK);
    e.fwd_ns = 123456;
    e.bwd_ns = 234567;
    CHECK_INT_EQ(loom_profile_db_put(db, &e, &err), LOOM_OK);
    CHECK_INT_EQ(loom_profile_db_save(db, dbpath, &err), LOOM_OK);
    loom_profile_db_destroy(db);
    loom_cost_model *mp = NULL;
    CHECK_INT_EQ(loom_cost_model_create(&c, &cal, dbpath, &mp, &err), LOOM_OK);
    CHECK(loom_cost_model_profile_db(mp) != NULL);
    t = test_op_time(mp, g, big, (loom_dim_split[]){{"f", 4}}, 1);
    CHECK_INT_EQ(t.source, LOOM_SRC_MEASURED);
    CHECK_NEAR_REL(t.fwd_s, 123456e-9, 1e-12);
    CHECK_NEAR_REL(t.bwd_s, 234567e-9, 1e-12);
    t = test_op_time(mp, g, big, (loom_dim_split[]){{"f", 8}}, 1);   /* not measured, no box */
    CHECK_INT_EQ(t.source, LOOM_SRC_ROOFLINE);
    CHECK_NEAR_REL(t.fwd_s, tc / 8, 1e-12);
    loom_cost_model_destroy(mp);
    /* …and a db from another GPU is refused, naming both. */
    loom_cost_model *mx = (loom_cost_model *)&err;   /* must be reset to NULL */
    CHECK_INT_EQ(loom_cost_model_create(&a100, NULL, dbpath, &mx, &err), LOOM_ERR_INVALID);
    CHECK(mx == NULL);
    CHECK_STR_CONTAINS(err.msg, "NVIDIA H100 80GB HBM3");
    CHECK_STR_CONTAINS(err.msg, "A100-SXM4-80GB");
    unlink(dbpath);
    rmdir(dir);

    loom_cost_model_destroy(NULL);
    loom_cost_model_destroy(m);
    loom_graph_destroy(g);
    return check_done();
}
