/*
 * test_gpu_enumerate.c — the keys loom-profile enumerates for a model (no
 * GPU needed), checked against shard shapes worked out by hand for
 * Llama-3-8B (hidden 4096, 32 heads, 8 kv heads, head dim 128, MLP 14336,
 * vocab 128256) at seq 4096, batch 1, bf16.
 *
 * Valid TP degrees <= 8: t must divide 32 heads, 14336 and 128256:
 * 1, 2, 4, 8 (3 and 6 fail 14336 = 2^11·7; 7 fails 32 heads; 5 all).
 * Distinct keys at TP 1 (by hand): rmsnorm {n 4096, d 4096} (both layer
 * norms and the final norm), q_proj, k_proj (= v_proj), q_rope, k_rope,
 * attention, o_proj, residual add (both), gate_proj (= up_proj), swiglu,
 * down_proj, embedding, lm_head, cross_entropy = 14. Each TP degree > 1
 * adds the 12 TP-sharded ones plus the sequence-parallel norm and add = 14,
 * but two rope keys coincide across degrees: q_rope has b·s·32/t rows and
 * k_rope b·s·8/t, so q_rope at TP 4 and 8 equals k_rope at TP 1 and 2.
 * Total 14 + 3·14 - 2 = 54.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu/enumerate.h"
#include "graph/model.h"
#include "gpu_test.h"

/* The key (op, sig, bf16, "names", sizes) if enumerated. */
static bool has(const loom_profile_key *keys, int32_t n, const char *op, const char *sig,
                const char *names, const int64_t *sizes)
{
    loom_profile_key q = test_key(op, sig, LOOM_DTYPE_BF16, names, sizes);
    for (int32_t i = 0; i < n; i++)
        if (loom_profile_key_equal(&keys[i], &q)) return true;
    return false;
}

int main(void)
{
    loom_error err;
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    mo.seq = 4096;
    mo.batch = 1;
    loom_graph *g = NULL;
    if (loom_model_load("examples/models/llama-3-8b.json", &mo, &g, &err)) {
        fprintf(stderr, "cannot load llama-3-8b: %s\n", err.msg);
        return 1;
    }
    loom_profile_key *keys = NULL;
    int32_t n = 0;
    uint64_t deg = 0;
    CHECK_INT_EQ(loom_profile_enumerate(g, 8, &keys, &n, &deg, &err), LOOM_OK);
    CHECK_INT_EQ(deg, (1u << 1) | (1u << 2) | (1u << 4) | (1u << 8));
    CHECK_INT_EQ(n, 54);
    for (int32_t i = 1; i < n; i++) CHECK(loom_profile_key_cmp(&keys[i - 1], &keys[i]) < 0);

    /* TP 8: q_proj n = 32/8 heads; k_proj k = 8/8 kv heads. */
    CHECK(has(keys, n, "einsum", "bsh,hnd->bsnd", "b s h n d", (int64_t[]){1, 4096, 4096, 4, 128}));
    CHECK(has(keys, n, "einsum", "bsh,hkd->bskd", "b s h k d", (int64_t[]){1, 4096, 4096, 1, 128}));
    CHECK(has(keys, n, "attention", "causal", "b s t heads kvh dqk dv",
              (int64_t[]){1, 4096, 4096, 4, 1, 128, 128}));
    CHECK(has(keys, n, "attention", "causal", "b s t heads kvh dqk dv",
              (int64_t[]){1, 4096, 4096, 32, 8, 128, 128}));
    CHECK(has(keys, n, "einsum", "bsh,hf->bsf", "b s h f", (int64_t[]){1, 4096, 4096, 14336 / 8}));
    /* q_rope: rows b·s·heads/tp = 4096·4 at TP 8; k_rope 4096·1. */
    CHECK(has(keys, n, "elementwise", "rope", "n d", (int64_t[]){16384, 128}));
    CHECK(has(keys, n, "elementwise", "rope", "n d", (int64_t[]){4096, 128}));
    CHECK(has(keys, n, "elementwise", "swiglu", "n d", (int64_t[]){4096, 1792}));
    /* Norms and residual adds: whole, and sequence-parallel at 4096/8 rows. */
    CHECK(has(keys, n, "norm", "rmsnorm", "n d", (int64_t[]){4096, 4096}));
    CHECK(has(keys, n, "norm", "rmsnorm", "n d", (int64_t[]){512, 4096}));
    CHECK(has(keys, n, "elementwise", "add", "n d", (int64_t[]){2048, 4096}));
    CHECK(!has(keys, n, "elementwise", "swiglu", "n d", (int64_t[]){512, 1792}));   /* no SP inside the MLP */
    /* Vocab-parallel embedding, lm_head (tied layout [v, h]) and loss. */
    CHECK(has(keys, n, "embedding", "", "n v h", (int64_t[]){4096, 128256 / 8, 4096}));
    CHECK(has(keys, n, "einsum", "bsh,vh->bsv", "b s h v", (int64_t[]){1, 4096, 4096, 128256 / 4}));
    CHECK(has(keys, n, "cross_entropy", "", "n v", (int64_t[]){4096, 128256}));
    CHECK(!has(keys, n, "einsum", "bsh,hf->bsf", "b s h f", (int64_t[]){1, 4096, 4096, 14336 / 3}));
    free(keys);

    /* One layer at TP 2: 15 ops (norm, q/k/v, 2 ropes, attention, o_proj,
     * add, norm, gate/up, swiglu, down, add), in graph order. */
    int32_t first, count, m = 0;
    loom_graph_layer_ops(g, 1, &first, &count);
    loom_profile_key *lk = calloc((size_t)count, sizeof *lk);
    int32_t *ids = calloc((size_t)count, sizeof *ids);
    CHECK_INT_EQ(loom_profile_layer_keys(g, 1, 2, lk, ids, &m, &err), LOOM_OK);
    CHECK_INT_EQ(m, 15);
    CHECK(m >= 7 && strcmp(lk[0].sig, "rmsnorm") == 0 && strcmp(lk[6].op, "attention") == 0);
    CHECK_INT_EQ(loom_profile_key_dim(&lk[6], "heads"), 16);
    CHECK_INT_EQ(ids[0], first);
    CHECK(loom_profile_layer_keys(g, 99, 2, lk, ids, &m, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "layer 99");
    /* TP 3 does not divide the model. */
    CHECK(loom_profile_layer_keys(g, 1, 3, lk, ids, &m, &err) == LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "cannot be split 3 ways");
    free(lk);
    free(ids);
    CHECK(loom_profile_enumerate(g, 0, &keys, &n, NULL, &err) == LOOM_ERR_INVALID);
    loom_graph_destroy(g);
    return check_done();
}
