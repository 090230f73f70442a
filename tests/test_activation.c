/*
 * test_activation.c — activation bytes saved for backward, per layer,
 * against Korthikanti et al., "Reducing Activation Recomputation in Large
 * Transformer Models" (MLSys 2023), §4.1, eq. (1):
 *
 *     bytes per layer = s·b·h·(34 + 5·a·s/h)
 *
 * for a GPT-3-style layer with eager (unfused) attention and dropout, 16-bit
 * activations and 1-byte dropout masks; with flash attention the 5as²b term
 * (softmax output, its dropout mask and the dropout output) disappears,
 * leaving 34·s·b·h. We check both on GPT-3 175B at two shapes and on a
 * small model where the s² term dominates, then a Llama layer (GQA, SwiGLU,
 * no dropout) against the same bookkeeping done by hand:
 *
 *     x 2h, norm out 2h, q 2h, k 2h·r, v 2h·r, attention out 2h,
 *     residual 2h, norm out 2h, gate and up 2·2f, SwiGLU out 2f
 *     = (12h + 4hr + 6f) bytes per token,  r = kv_heads / heads,
 *
 * plus 2·a·s per token for the softmax output when unfused.
 */
#include <stdint.h>

#include "check.h"
#include "graph/graph.h"
#include "graph/model.h"

static loom_graph *load(const char *name, int64_t seq, int64_t batch, bool flash, loom_dtype dt)
{
    char path[256];
    snprintf(path, sizeof path, "examples/models/%s.json", name);
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.seq = seq;
    o.batch = batch;
    o.flash_attention = flash;
    o.dtype = dt;
    loom_graph *g = NULL;
    loom_error err = {0};
    loom_status s = loom_model_load(path, &o, &g, &err);
    if (s) fprintf(stderr, "%s: %s\n", path, err.msg);
    CHECK(s == LOOM_OK);
    return g;
}

static int64_t layer_bytes(const loom_graph *g, int32_t layer)
{
    loom_graph_totals t;
    loom_graph_layer_totals(g, layer, &t);
    return t.activation_bytes;
}

/* Every transformer block of a uniform model saves the same bytes. */
static void check_uniform(const loom_graph *g)
{
    int32_t nl = loom_graph_layer_count(g);
    int64_t first = layer_bytes(g, 1);
    int bad = 0;
    for (int32_t l = 2; l < nl - 1; l++) bad += layer_bytes(g, l) != first;
    CHECK_INT_EQ(bad, 0);
}

static void check_gpt(const char *name, double h, double a, int64_t s, int64_t b)
{
    double sbh = (double)s * (double)b * h;
    loom_graph *g = load(name, s, b, false, LOOM_DTYPE_BF16);
    if (g) {
        CHECK_NEAR_REL(layer_bytes(g, 1), sbh * (34.0 + 5.0 * a * (double)s / h), 0.02);
        check_uniform(g);
        loom_graph_destroy(g);
    }
    g = load(name, s, b, true, LOOM_DTYPE_BF16);
    if (g) {
        CHECK_NEAR_REL(layer_bytes(g, 1), 34.0 * sbh, 0.02);
        check_uniform(g);
        loom_graph_destroy(g);
    }
}

static void test_gpt3(void)
{
    check_gpt("gpt3-175b", 12288, 96, 2048, 1);   /* 114·sbh: 5as/h = 80 */
    check_gpt("gpt3-175b", 12288, 96, 1024, 4);
    check_gpt("gpt2", 768, 12, 1024, 2);          /* 5as/h = 80 as well */
    check_gpt("gpt2", 768, 12, 128, 8);           /* 5as/h = 10 */
}

/* fp32 activations double the 2-byte terms; masks stay 1 byte. */
static void test_dtype(void)
{
    loom_graph *g = load("gpt3-175b", 2048, 1, true, LOOM_DTYPE_FP32);
    if (g) {
        double sbh = 2048.0 * 12288.0;
        /* 34 = 32 two-byte terms + 2 one-byte masks -> 64 + 2 */
        CHECK_NEAR_REL(layer_bytes(g, 1), 66.0 * sbh, 0.02);
        loom_graph_destroy(g);
    }
}

static void check_llama(const char *name, double h, double heads, double kvh, double f)
{
    const int64_t s = 4096, b = 2;
    double tokens = (double)s * (double)b, r = kvh / heads;
    double flash = tokens * (12 * h + 4 * h * r + 6 * f);
    loom_graph *g = load(name, s, b, true, LOOM_DTYPE_BF16);
    if (g) {
        CHECK_INT_EQ(layer_bytes(g, 1), (int64_t)flash);
        check_uniform(g);
        loom_graph_destroy(g);
    }
    g = load(name, s, b, false, LOOM_DTYPE_BF16);
    if (g) {
        CHECK_INT_EQ(layer_bytes(g, 1), (int64_t)(flash + tokens * 2 * heads * (double)s));
        loom_graph_destroy(g);
    }
}

static void test_llama(void)
{
    check_llama("llama-3-8b", 4096, 32, 8, 14336);
    check_llama("llama-2-7b", 4096, 32, 32, 11008);
}

int main(void)
{
    test_gpt3();
    test_dtype();
    test_llama();
    return check_done();
}
