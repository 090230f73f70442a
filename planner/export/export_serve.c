/*
 * export_serve.c — reading a serving plan's deployment and choosing the
 * pool to render (export_serve.h). The reader takes only what the
 * exporters use, each member checked for its type and range with its JSON
 * path in the message; the rest of the plan (figures, fronts) is the
 * planner's report and is not needed to launch anything.
 */
#define _POSIX_C_SOURCE 200809L
#include "planner/export/export_serve.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#define TRY(x)                  \
    do {                        \
        if ((s = (x))) return s; \
    } while (0)

bool loom_serve_export_is_serving(const char *path)
{
    cJSON *root = NULL;
    loom_error ignore = {0};
    if (loom_json_parse_file(path, &root, &ignore)) return false;
    bool yes = cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root, "serving") != NULL;
    cJSON_Delete(root);
    return yes;
}

static loom_status copy(const loom_jctx *c, const cJSON *o, const char *path, const char *key,
                        char *out, size_t n)
{
    const char *v = NULL;
    loom_status s = loom_json_get_str(c, o, path, key, true, &v);
    if (s) return s;
    if (strlen(v) >= n)
        return loom_json_fail(c, path, "field \"%s\": longer than %zu characters", key, n - 1);
    memcpy(out, v, strlen(v) + 1);
    return LOOM_OK;
}

static loom_status read_pool(const loom_jctx *c, const cJSON *o, const char *path,
                             loom_serve_export_pool *p)
{
    loom_status s;
    const int64_t big = (int64_t)1 << 24;
    TRY(copy(c, o, path, "role", p->role, sizeof p->role));
    if (strcmp(p->role, "both") && strcmp(p->role, "prefill") && strcmp(p->role, "decode"))
        return loom_json_fail(c, path, "field \"role\": expected both, prefill or decode, found "
                              "\"%s\"", p->role);
    struct { const char *k; int64_t *v; } ints[] = {
        {"instances", &p->instances}, {"tp", &p->tp}, {"pp", &p->pp}, {"ep", &p->ep},
        {"attention_dp", &p->attn_dp}, {"gpus_per_instance", &p->gpus_per_instance}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        TRY(loom_json_get_int(c, o, path, ints[i].k, true, 1, big, ints[i].v));
    if (p->gpus_per_instance != p->tp * p->attn_dp * p->pp)
        return loom_json_fail(c, path, "gpus_per_instance %lld is not tp %lld × attention_dp %lld "
                              "× pp %lld", (long long)p->gpus_per_instance, (long long)p->tp,
                              (long long)p->attn_dp, (long long)p->pp);
    const cJSON *e;
    char sub[96];
    TRY(loom_json_get_object(c, o, path, "engine", true, &e));
    snprintf(sub, sizeof sub, "%s.engine", path);
    TRY(loom_json_get_int(c, e, sub, "max_num_seqs", true, 1, big, &p->max_num_seqs));
    TRY(loom_json_get_int(c, e, sub, "max_batched_tokens", true, 1, (int64_t)1 << 26,
                          &p->max_batched_tokens));
    TRY(loom_json_get_int(c, e, sub, "block_size", true, 1, 1 << 16, &p->block_size));
    TRY(loom_json_get_num(c, e, sub, "mem_fraction", true, 1e-3, 1, &p->mem_fraction));
    return LOOM_OK;
}

static loom_status read_root(const loom_jctx *c, const cJSON *root, loom_serve_export *x)
{
    loom_status s;
    const cJSON *in, *mo, *hw, *sv, *w, *dep, *pools;
    TRY(loom_json_get_object(c, root, "$", "inputs", true, &in));
    TRY(copy(c, in, "$.inputs", "model", x->model, sizeof x->model));
    TRY(loom_json_get_object(c, root, "$", "model", true, &mo));
    TRY(copy(c, mo, "$.model", "arch", x->arch, sizeof x->arch));
    TRY(loom_json_get_int(c, mo, "$.model", "experts", true, 0, 1 << 20, &x->experts));
    TRY(loom_json_get_object(c, root, "$", "hardware", true, &hw));
    TRY(loom_json_get_int(c, hw, "$.hardware", "gpus_per_node", true, 1, 1 << 16,
                          &x->gpus_per_node));
    TRY(loom_json_get_object(c, root, "$", "serving", true, &sv));
    const char *fmt = NULL;
    TRY(loom_json_get_str(c, sv, "$.serving", "format", true, &fmt));
    if (strcmp(fmt, "loom-serving/1"))
        return loom_json_fail(c, "$.serving.format", "expected \"loom-serving/1\", found \"%s\"", fmt);
    TRY(copy(c, sv, "$.serving", "engine", x->engine, sizeof x->engine));
    TRY(copy(c, sv, "$.serving", "weights", x->weights, sizeof x->weights));
    TRY(copy(c, sv, "$.serving", "kv_dtype", x->kv_dtype, sizeof x->kv_dtype));
    TRY(loom_json_get_object(c, sv, "$.serving", "workload", true, &w));
    TRY(loom_json_get_int(c, w, "$.serving.workload", "max_tokens", true, 2, (int64_t)1 << 25,
                          &x->max_tokens));
    TRY(loom_json_get_object(c, sv, "$.serving", "deployment", true, &dep));
    const char *kind = NULL;
    TRY(loom_json_get_str(c, dep, "$.serving.deployment", "kind", true, &kind));
    if (strcmp(kind, "aggregated") && strcmp(kind, "disaggregated"))
        return loom_json_fail(c, "$.serving.deployment", "field \"kind\": expected aggregated or "
                              "disaggregated, found \"%s\"", kind);
    x->disagg = !strcmp(kind, "disaggregated");
    TRY(loom_json_get_array(c, dep, "$.serving.deployment", "pools", true, &pools));
    int n = cJSON_GetArraySize(pools);
    if (n != (x->disagg ? 2 : 1))
        return loom_json_fail(c, "$.serving.deployment.pools", "expected %d pool%s for a%s "
                              "deployment, found %d", x->disagg ? 2 : 1, x->disagg ? "s" : "",
                              x->disagg ? " disaggregated" : "n aggregated", n);
    x->n_pools = n;
    int i = 0;
    for (const cJSON *p = pools->child; p; p = p->next, i++) {
        char sub[64];
        snprintf(sub, sizeof sub, "$.serving.deployment.pools[%d]", i);
        if (!cJSON_IsObject(p)) return loom_json_fail(c, sub, "expected an object");
        TRY(read_pool(c, p, sub, &x->pool[i]));
        const char *want = !x->disagg ? "both" : i == 0 ? "prefill" : "decode";
        if (strcmp(x->pool[i].role, want))
            return loom_json_fail(c, sub, "field \"role\": expected %s, found \"%s\"", want,
                                  x->pool[i].role);
    }
    if (x->disagg) {
        const cJSON *kv;
        const char *link = NULL;
        TRY(loom_json_get_object(c, dep, "$.serving.deployment", "kv_transfer", true, &kv));
        TRY(loom_json_get_str(c, kv, "$.serving.deployment.kv_transfer", "link", true, &link));
        x->kv_nvlink = !strcmp(link, "nvlink");
    }
    return LOOM_OK;
}

loom_status loom_serve_export_read(const char *path, loom_serve_export *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    loom_status s = loom_json_parse_file(path, &root, err);
    if (s) return s;
    loom_jctx c = {path, err};
    s = cJSON_IsObject(root) ? read_root(&c, root, out)
                             : loom_json_fail(&c, "$", "expected an object");
    cJSON_Delete(root);
    return s;
}

loom_status loom_serve_export_render(const loom_serve_export *x, loom_serve_export_engine e,
                                     const char *pool, const char *source, char **out,
                                     loom_export_list *notes, loom_export_list *obstacles,
                                     loom_error *err)
{
    *out = NULL;
    const loom_serve_export_pool *p = NULL;
    if (!x->disagg) {
        if (pool)
            return loom_error_set(err, LOOM_ERR_INVALID, "--pool %s: the plan is aggregated (one "
                                  "pool of instances that prefill and decode); drop --pool", pool);
        p = &x->pool[0];
    } else {
        if (!pool)
            return loom_error_set(err, LOOM_ERR_INVALID, "the plan is disaggregated: export each "
                                  "pool, --pool prefill and --pool decode");
        for (int32_t i = 0; i < x->n_pools; i++)
            if (!strcmp(x->pool[i].role, pool)) p = &x->pool[i];
        if (!p)
            return loom_error_set(err, LOOM_ERR_INVALID, "--pool %s: expected prefill or decode",
                                  pool);
    }
    loom_export_list found = {0};
    if (e == LOOM_SERVE_EXPORT_VLLM) loom_serve_export_check_vllm(x, p, &found);
    else loom_serve_export_check_sglang(x, p, &found);
    if (found.n > 0) {
        for (int i = 0; i < found.n; i++) loom_export_list_add(obstacles, "%s", found.item[i]);
        return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "%s cannot run this deployment (%d "
                              "obstacle%s)", e == LOOM_SERVE_EXPORT_VLLM ? "vLLM" : "SGLang",
                              found.n, found.n > 1 ? "s" : "");
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return loom_error_set(err, LOOM_ERR_NOMEM, "export: out of memory");
    if (e == LOOM_SERVE_EXPORT_VLLM) loom_serve_export_write_vllm(x, p, source, f, notes);
    else loom_serve_export_write_sglang(x, p, source, f, notes);
    if (fclose(f) != 0) {
        free(buf);
        return loom_error_set(err, LOOM_ERR_NOMEM, "export: out of memory");
    }
    *out = buf;
    return LOOM_OK;
}
