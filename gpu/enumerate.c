/*
 * enumerate.c — Megatron-style shard keys of every op of a model
 * (enumerate.h).
 */
#include "gpu/enumerate.h"

#include <stdlib.h>
#include <string.h>

/* kvh is split only when every kvh dim of the graph divides by tp. */
static bool kvh_divides(const loom_graph *g, int64_t tp)
{
    for (int32_t i = 0; i < loom_graph_num_tensors(g); i++) {
        const loom_tensor *t = loom_graph_tensor(g, i);
        for (int d = 0; d < t->ndim; d++)
            if (!strcmp(t->dims[d].name, "kvh") && t->dims[d].size % tp) return false;
    }
    return true;
}

int loom_profile_tp_divisors(const loom_graph *g, int64_t tp, bool sp, loom_dim *div)
{
    static const char *const names[] = {"heads", "f", "v"};
    int n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        strcpy(div[n].name, names[i]);
        div[n++].size = tp;
    }
    if (kvh_divides(g, tp)) strcpy(div[n].name, "kvh"), div[n++].size = tp;
    if (sp) strcpy(div[n].name, "s"), div[n++].size = tp;
    return n;
}

static int key_qsort_cmp(const void *a, const void *b) { return loom_profile_key_cmp(a, b); }

loom_status loom_profile_enumerate(const loom_graph *g, int64_t max_tp, loom_profile_key **out,
                                   int32_t *n_out, uint64_t *degrees, loom_error *err)
{
    *out = NULL;
    *n_out = 0;
    if (degrees) *degrees = 0;
    if (max_tp < 1 || max_tp > 63)
        return loom_error_set(err, LOOM_ERR_INVALID, "TP degrees 1..%lld: expected 1..63",
                              (long long)max_tp);
    int32_t n_ops = loom_graph_num_ops(g);
    size_t cap = (size_t)n_ops * 2 * (size_t)max_tp + 1;
    loom_profile_key *keys = malloc(cap * sizeof *keys), *tmp = malloc((size_t)n_ops * 2 * sizeof *tmp);
    if (!keys || !tmp) {
        free(keys);
        free(tmp);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory enumerating profile keys");
    }
    size_t n = 0;
    for (int64_t tp = 1; tp <= max_tp; tp++) {
        loom_dim div[6], div_sp[6];
        int nd = loom_profile_tp_divisors(g, tp, false, div),
            nd_sp = loom_profile_tp_divisors(g, tp, true, div_sp);
        size_t m = 0;
        bool valid = true;
        for (int32_t id = 0; id < n_ops && valid; id++) {
            loom_error e;
            loom_status s = loom_profile_key_from_op(g, id, div, nd, &tmp[m], &e);
            if (s == LOOM_ERR_UNSUPPORTED) continue;   /* free views */
            if (s) {
                valid = false;                          /* tp does not divide this model */
                break;
            }
            m++;
            /* Sequence parallelism splits what TP leaves whole: norms and
             * pointwise ops outside the attention and MLP blocks. */
            loom_op_kind k = loom_graph_op(g, id)->kind;
            loom_profile_key whole;
            if (tp > 1 && (k == LOOM_OP_NORM || k == LOOM_OP_ELEMENTWISE) &&
                loom_profile_key_from_op(g, id, NULL, 0, &whole, &e) == LOOM_OK &&
                loom_profile_key_equal(&whole, &tmp[m - 1]) &&
                loom_profile_key_from_op(g, id, div_sp, nd_sp, &tmp[m], &e) == LOOM_OK &&
                !loom_profile_key_equal(&tmp[m], &tmp[m - 1]))
                m++;
        }
        if (!valid) continue;
        memcpy(keys + n, tmp, m * sizeof *tmp);
        n += m;
        if (degrees) *degrees |= UINT64_C(1) << tp;
    }
    free(tmp);
    if (n > 1) qsort(keys, n, sizeof *keys, key_qsort_cmp);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || loom_profile_key_cmp(&keys[u - 1], &keys[i]) != 0) keys[u++] = keys[i];
    *out = keys;
    *n_out = (int32_t)u;
    return LOOM_OK;
}

loom_status loom_profile_layer_keys(const loom_graph *g, int32_t layer, int64_t tp,
                                    loom_profile_key *keys, int32_t *ids, int32_t *n,
                                    loom_error *err)
{
    *n = 0;
    if (layer < 0 || layer >= loom_graph_layer_count(g))
        return loom_error_set(err, LOOM_ERR_INVALID, "layer %d: the model has layers 0..%d",
                              (int)layer, (int)loom_graph_layer_count(g) - 1);
    loom_dim div[6];
    int nd = loom_profile_tp_divisors(g, tp, false, div);
    int32_t first, count;
    loom_graph_layer_ops(g, layer, &first, &count);
    for (int32_t id = first; id < first + count; id++) {
        loom_status s = loom_profile_key_from_op(g, id, div, nd, &keys[*n], err);
        if (s == LOOM_ERR_UNSUPPORTED) continue;
        if (s) return s;
        ids[(*n)++] = id;
    }
    return LOOM_OK;
}
