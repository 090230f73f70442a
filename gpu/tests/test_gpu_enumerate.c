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

static const loom_profile_key *find(const loom_profile_key *keys, int32_t n, const char *op,
                                    const char *sig, const char *const *names, const int64_t *sizes,
                                    int nd)
{
    loom_profile_key q;
    memset(&q, 0, sizeof q);
    strcpy(q.op, op);
    strcpy(q.sig, sig);
    q.dtype = LOOM_DTYPE_BF16;
    q.n_dims = nd;
    for (int i = 0; i < nd; i++) {
        strcpy(q.shape[i].name, names[i]);
        q.shape[i].size = sizes[i];
    }
    for (int32_t i = 0; i < n; i++)
        if (loom_profile_key_equal(&keys[i], &q)) return &keys[i];
    return NULL;
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

    static const char *const bshnd[] = {"b", "s", "h", "n", "d"}, *const nd[] = {"n", "d"};
    static const char *const att[] = {"b", "s", "t", "heads", "kvh", "dqk", "dv"};
    static const char *const bshf[] = {"b", "s", "h", "f"}, *const bshv[] = {"b", "s", "h", "v"};
    static const char *const nvh[] = {"n", "v", "h"}, *const nv[] = {"n", "v"};
    static const char *const bskd[] = {"b", "s", "h", "k", "d"};
    /* TP 8: q_proj n = 32/8 heads; k_proj k = 8/8 kv heads. */
    CHECK(find(keys, n, "einsum", "bsh,hnd->bsnd", bshnd, (int64_t[]){1, 4096, 4096, 4, 128}, 5));
    CHECK(find(keys, n, "einsum", "bsh,hkd->bskd", bskd, (int64_t[]){1, 4096, 4096, 1, 128}, 5));
    CHECK(find(keys, n, "attention", "causal", att, (int64_t[]){1, 4096, 4096, 4, 1, 128, 128}, 7));
    CHECK(find(keys, n, "attention", "causal", att, (int64_t[]){1, 4096, 4096, 32, 8, 128, 128}, 7));
    CHECK(find(keys, n, "einsum", "bsh,hf->bsf", bshf, (int64_t[]){1, 4096, 4096, 14336 / 8}, 4));
    /* q_rope: rows b·s·heads/tp = 4096·4 at TP 8; k_rope 4096·1. */
    CHECK(find(keys, n, "elementwise", "rope", nd, (int64_t[]){16384, 128}, 2));
    CHECK(find(keys, n, "elementwise", "rope", nd, (int64_t[]){4096, 128}, 2));
    CHECK(find(keys, n, "elementwise", "swiglu", nd, (int64_t[]){4096, 1792}, 2));
    /* Norms and residual adds: whole, and sequence-parallel at 4096/8 rows. */
    CHECK(find(keys, n, "norm", "rmsnorm", nd, (int64_t[]){4096, 4096}, 2));
    CHECK(find(keys, n, "norm", "rmsnorm", nd, (int64_t[]){512, 4096}, 2));
    CHECK(find(keys, n, "elementwise", "add", nd, (int64_t[]){2048, 4096}, 2));
    CHECK(!find(keys, n, "elementwise", "swiglu", nd, (int64_t[]){512, 1792}, 2));   /* no SP inside the MLP */
    /* Vocab-parallel embedding, lm_head (tied layout [v, h]) and loss. */
    CHECK(find(keys, n, "embedding", "", nvh, (int64_t[]){4096, 128256 / 8, 4096}, 3));
    CHECK(find(keys, n, "einsum", "bsh,vh->bsv", bshv, (int64_t[]){1, 4096, 4096, 128256 / 4}, 4));
    CHECK(find(keys, n, "cross_entropy", "", nv, (int64_t[]){4096, 128256}, 2));
    CHECK(!find(keys, n, "einsum", "bsh,hf->bsf", bshf, (int64_t[]){1, 4096, 4096, 14336 / 3}, 4));
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
