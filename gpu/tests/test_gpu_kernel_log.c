/*
 * test_gpu_kernel_log.c — joining CUPTI-style records by external
 * correlation id (no GPU needed): multi-kernel ops sum, records arrive in
 * any order, kernels outside any op are ignored, names are distinct and in
 * first-run order; quantiles match numpy's default (type 7) by hand; kernel
 * names demangle to their readable form.
 */
#include <string.h>

#include "check.h"
#include "gpu/demangle.h"
#include "gpu/kernel_log.h"

int main(void)
{
    loom_error err;
    loom_kernel_log *log;
    CHECK_INT_EQ(loom_kernel_log_create(&log, &err), LOOM_OK);

    /* Op 10 (fwd): permute [100,130) then gemm [135,300) — two API calls,
     * correlation ids 1 and 2. Op 11 (bwd): gemm [310,400), gemm [400,520),
     * correlation 3, 4. Correlation 5 is a kernel outside any op (an L2
     * flush). Kernel records arrive before their external records. */
    loom_kernel_log_add_kernel(log, 2, "gemm", 135, 300);
    loom_kernel_log_add_kernel(log, 5, "flush", 301, 309);
    loom_kernel_log_add_kernel(log, 1, "permute", 100, 130);
    loom_kernel_log_add_kernel(log, 4, "gemm_dw", 400, 520);
    loom_kernel_log_add_kernel(log, 3, "gemm", 310, 400);
    loom_kernel_log_add_external(log, 4, 11);
    loom_kernel_log_add_external(log, 1, 10);
    loom_kernel_log_add_external(log, 3, 11);
    loom_kernel_log_add_external(log, 2, 10);
    loom_kernel_log_resolve(log);

    loom_kernel_sum f = loom_kernel_log_sum(log, 10), b = loom_kernel_log_sum(log, 11);
    CHECK_INT_EQ(f.kernels, 2);
    CHECK_INT_EQ(f.busy_ns, 30 + 165);
    CHECK_INT_EQ(f.span_ns, 200);   /* 100 .. 300, the 5 ns gap included */
    CHECK_INT_EQ(b.kernels, 2);
    CHECK_INT_EQ(b.busy_ns, 90 + 120);
    CHECK_INT_EQ(b.span_ns, 210);
    loom_kernel_sum none = loom_kernel_log_sum(log, 12);
    CHECK_INT_EQ(none.kernels, 0);
    CHECK_INT_EQ(none.busy_ns, 0);

    char names[8][32];
    int n = loom_kernel_log_names(log, 10, 12, &names[0][0], 32, 8);
    CHECK_INT_EQ(n, 3);
    CHECK(n == 3 && !strcmp(names[0], "permute") && !strcmp(names[1], "gemm") &&
          !strcmp(names[2], "gemm_dw"));
    CHECK_INT_EQ(loom_kernel_log_names(log, 10, 12, &names[0][0], 32, 2), 2);
    CHECK_INT_EQ(loom_kernel_log_dropped(log), 0);
    loom_kernel_log_add_dropped(log, 3);
    CHECK_INT_EQ(loom_kernel_log_dropped(log), 3);

    /* Cleared: nothing left, and it can be refilled. */
    loom_kernel_log_clear(log);
    loom_kernel_log_resolve(log);
    CHECK_INT_EQ(loom_kernel_log_sum(log, 10).kernels, 0);
    CHECK_INT_EQ(loom_kernel_log_dropped(log), 0);
    for (uint32_t i = 0; i < 1000; i++) {
        loom_kernel_log_add_external(log, i, i / 10);
        loom_kernel_log_add_kernel(log, i, i % 2 ? "a" : "b", 1000 * i, 1000 * i + 7);
    }
    loom_kernel_log_resolve(log);
    CHECK_INT_EQ(loom_kernel_log_sum(log, 42).kernels, 10);
    CHECK_INT_EQ(loom_kernel_log_sum(log, 42).busy_ns, 70);
    CHECK_INT_EQ(loom_kernel_log_sum(log, 42).span_ns, 9007);
    loom_kernel_log_destroy(log);
    loom_kernel_log_destroy(NULL);

    /* numpy.quantile([4, 1, 3, 2], q): 0.5 -> 2.5, 0.1 -> 1.3, 0.9 -> 3.7. */
    double v[] = {4, 1, 3, 2};
    CHECK_NEAR_REL(loom_quantile(v, 4, 0.5), 2.5, 1e-12);
    CHECK_NEAR_REL(loom_quantile(v, 4, 0.1), 1.3, 1e-12);
    CHECK_NEAR_REL(loom_quantile(v, 4, 0.9), 3.7, 1e-12);
    CHECK_NEAR_REL(loom_quantile(v, 4, 1.0), 4.0, 1e-12);
    CHECK(v[0] == 4 && v[1] == 1);   /* input untouched */
    double one = 5;
    CHECK_NEAR_REL(loom_quantile(&one, 1, 0.9), 5.0, 1e-12);
    double big[1000];
    for (int i = 0; i < 1000; i++) big[i] = 999 - i;
    CHECK_NEAR_REL(loom_quantile(big, 1000, 0.5), 499.5, 1e-12);

    /* Kernel names as CUPTI reports them, made readable. */
    char nm[64];
    loom_demangle("_ZN12_GLOBAL__N_120loom_attn_fwd_kernelI13__nv_bfloat16EEvPKT_", nm, sizeof nm);
    CHECK(strcmp(nm, "loom_attn_fwd_kernel<__nv_bfloat16>") == 0);
    loom_demangle("_ZN7cutlass7Kernel2I3FooEEvNT_6ParamsE", nm, sizeof nm);
    CHECK(strcmp(nm, "cutlass::Kernel2<Foo>") == 0);
    loom_demangle("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", nm, sizeof nm);
    CHECK(strcmp(nm, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n") == 0);
    loom_demangle("_Zgarbage(", nm, sizeof nm);   /* not a valid mangling: kept */
    CHECK(strcmp(nm, "_Zgarbage(") == 0);
    loom_demangle(NULL, nm, sizeof nm);
    CHECK(strcmp(nm, "?") == 0);
    loom_demangle("_ZN7cutlass7Kernel2I3FooEEvNT_6ParamsE", nm, 8);   /* truncated, terminated */
    CHECK(strcmp(nm, "cutlass") == 0);
    return check_done();
}
