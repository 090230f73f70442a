/*
 * calib_records_json.c — reading the measured runs `loom calibrate` fits to
 * (loom_calib_records_load, calib_fit.h): a JSON file of records, each a
 * training run's model shape, configuration and iteration time. What a
 * record leaves out is assumed (Megatron's defaults) and named in
 * `assumed`, so that a fit says what it rests on.
 *
 * The file format's reader lives apart from the fit (calib_fit.c), which
 * reads no files. Errors name the file and the JSON path.
 *
 * Units: seconds.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/calib_fit.h"
#include "base/json.h"

static bool text_has(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

static void note(loom_calib_record *r, const char *what)
{
    size_t n = strlen(r->assumed);
    snprintf(r->assumed + n, sizeof r->assumed - n, "%s%s", n ? ", " : "", what);
}

/* Optional integer that, when absent or null, takes `dflt` and is noted. */
static loom_status opt_int(const loom_jctx *c, const cJSON *o, const char *path, const char *key,
                           int64_t dflt, const char *assumed, loom_calib_record *r, int64_t *out)
{
    *out = 0;
    loom_status s = loom_json_get_int(c, o, path, key, false, 1, (int64_t)1 << 30, out);
    if (s) return s;
    if (*out == 0) {
        *out = dflt;
        if (assumed) note(r, assumed);
    }
    return LOOM_OK;
}

static loom_status read_record(const loom_jctx *c, const cJSON *o, const char *path, size_t idx,
                               loom_calib_record *r)
{
    const int64_t big = (int64_t)1 << 30;
    memset(r, 0, sizeof *r);
    loom_parallel *p = &r->par;
    loom_parallel_init(p);
    if (!cJSON_IsObject(o))
        return loom_json_fail(c, path, "expected a record object, found %s", loom_json_type_name(o));
    const char *model = NULL, *gpu = NULL, *recompute = NULL, *precision = NULL, *source = NULL,
               *notes = NULL;
    int64_t kv = 0;
    double tok = 0;
    loom_status s;
    if ((s = loom_json_get_str(c, o, path, "model", false, &model)) ||
        (s = loom_json_get_str(c, o, path, "gpu", true, &gpu)) ||
        (s = loom_json_get_int(c, o, path, "layers", true, 1, big, &r->layers)) ||
        (s = loom_json_get_int(c, o, path, "hidden", true, 1, big, &r->hidden)) ||
        (s = loom_json_get_int(c, o, path, "heads", true, 1, big, &r->heads)) ||
        (s = loom_json_get_int(c, o, path, "kv_heads", false, 1, big, &kv)) ||
        (s = loom_json_get_int(c, o, path, "seq_len", true, 1, big, &p->seq)) ||
        (s = loom_json_get_int(c, o, path, "vocab", true, 1, big, &r->vocab)) ||
        (s = loom_json_get_int(c, o, path, "global_batch", true, 1, big, &p->gbs)) ||
        (s = loom_json_get_int(c, o, path, "num_gpus", true, 1, big, &r->gpus)) ||
        (s = loom_json_get_int(c, o, path, "tp", true, 1, big, &p->tp)) ||
        (s = loom_json_get_int(c, o, path, "pp", true, 1, big, &p->pp)) ||
        (s = loom_json_get_int(c, o, path, "dp", true, 1, big, &p->dp)) ||
        (s = opt_int(c, o, path, "ffn_hidden", 4 * r->hidden, "ffn 4h", r, &r->ffn)) ||
        (s = opt_int(c, o, path, "micro_batch", 1, "micro batch 1", r, &p->mbs)) ||
        (s = opt_int(c, o, path, "cp", 1, NULL, r, &p->cp)) ||
        (s = opt_int(c, o, path, "ep", 1, NULL, r, &p->ep)) ||
        (s = opt_int(c, o, path, "virtual_stages", 1, NULL, r, &p->vpp)) ||
        (s = loom_json_get_str(c, o, path, "recompute", false, &recompute)) ||
        (s = loom_json_get_str(c, o, path, "precision", false, &precision)) ||
        (s = loom_json_get_str(c, o, path, "source", false, &source)) ||
        (s = loom_json_get_str(c, o, path, "notes", false, &notes)) ||
        (s = loom_json_get_num(c, o, path, "iteration_time_s", false, 1e-6, 1e9, &r->measured_s)) ||
        (s = loom_json_get_num(c, o, path, "tokens_per_s_per_gpu", false, 1e-6, 1e12, &tok)))
        return s;
    snprintf(r->model, sizeof r->model, "%s", model ? model : "");
    if (!model) snprintf(r->model, sizeof r->model, "record %zu", idx);

    const loom_device *d = loom_device_find(gpu);
    if (!d) {
        char names[512];
        char sub[160];
        snprintf(sub, sizeof sub, "%s.gpu", path);
        return loom_json_fail(c, sub, "unknown GPU \"%s\" (known: %s)", gpu,
                              loom_device_list_names(names, sizeof names));
    }
    if (!loom_calib_record_has_preset(d->name)) {
        char names[256];
        char sub[160];
        snprintf(sub, sizeof sub, "%s.gpu", path);
        return loom_json_fail(c, sub, "GPU \"%s\" has no DGX preset to build the run's cluster "
                              "from (records take: %s)", gpu,
                              loom_calib_record_presets(names, sizeof names));
    }
    snprintf(r->gpu, sizeof r->gpu, "%s", d->name);
    if (kv > 0 && kv != r->heads) {
        char sub[160];
        snprintf(sub, sizeof sub, "%s.kv_heads", path);
        return loom_json_fail(c, sub, "grouped-query attention (%lld kv heads of %lld) is not a "
                              "GPT record; only kv_heads = heads (or null) is supported",
                              (long long)kv, (long long)r->heads);
    }
    if (r->measured_s == 0 && tok > 0)
        r->measured_s = (double)p->gbs * (double)p->seq / (tok * (double)r->gpus);
    if (!(r->measured_s > 0))
        return loom_json_fail(c, path, "record has no measured time: expected iteration_time_s "
                              "or tokens_per_s_per_gpu");

    /* sequence parallelism: Megatron-core recipes turn it on with TP */
    cJSON *spj = cJSON_GetObjectItemCaseSensitive(o, "sequence_parallel");
    if (spj && !cJSON_IsNull(spj)) {
        if ((s = loom_json_get_bool(c, o, path, "sequence_parallel", true, &p->sp))) return s;
    } else {
        p->sp = p->tp > 1;
        if (p->tp > 1) note(r, "sequence parallel");
    }
    if (!recompute || strncmp(recompute, "none", 4) == 0 || strncmp(recompute, "no", 2) == 0)
        p->recompute = LOOM_RECOMPUTE_NONE;
    else if (strncmp(recompute, "selective", 9) == 0) p->recompute = LOOM_RECOMPUTE_SELECTIVE;
    else if (strncmp(recompute, "full", 4) == 0) p->recompute = LOOM_RECOMPUTE_FULL;
    else {
        char sub[160];
        snprintf(sub, sizeof sub, "%s.recompute", path);
        return loom_json_fail(c, sub, "expected null, \"none\", \"selective…\" or \"full…\", "
                              "found \"%s\"", recompute);
    }
    p->dtype = LOOM_DTYPE_BF16;
    if (text_has(precision, "fp8")) p->dtype = LOOM_DTYPE_FP8;
    else if (precision && strncmp(precision, "fp16", 4) == 0) p->dtype = LOOM_DTYPE_FP16;
    if (!(d->peak_flops[p->dtype] > 0)) {   /* e.g. fp8 on an A100: eval would refuse it later */
        char sub[160];
        snprintf(sub, sizeof sub, "%s.precision", path);
        return loom_json_fail(c, sub, "\"%s\" on the %s, which has no %s tensor cores",
                              precision ? precision : "", d->name, loom_dtype_name(p->dtype));
    }

    /* overlap settings as the record's words state them */
    p->tp_comm_overlap = p->sp && (text_has(source, "tp-comm-overlap") || text_has(notes, "tp-comm-overlap"));
    p->dist_opt = text_has(source, "param-gather") || text_has(notes, "param-gather") ||
                  text_has(source, "distributed optimizer") || text_has(notes, "distributed optimizer");
    p->grad_reduce_bf16 = text_has(source, "grad-reduce-in-bf16") || text_has(notes, "grad-reduce-in-bf16");
    p->overlap_grad_reduce = true;
    /* p2p overlap of the interleaved schedule: Megatron's default since it
     * appeared (2023); a record of an older run says "overlap_p2p_comm": false */
    cJSON *p2pj = cJSON_GetObjectItemCaseSensitive(o, "overlap_p2p_comm");
    if (p2pj && !cJSON_IsNull(p2pj) &&
        (s = loom_json_get_bool(c, o, path, "overlap_p2p_comm", true, &p->overlap_p2p)))
        return s;
    /* attention: unfused for selective recompute (it exists to drop the
     * unfused s² tensors) and on pre-Hopper GPUs */
    bool pre_hopper = strncmp(r->gpu, "A100", 4) == 0 || strncmp(r->gpu, "V100", 4) == 0;
    p->flash = !(p->recompute == LOOM_RECOMPUTE_SELECTIVE || pre_hopper);

    loom_model_info mi = {.layers = r->layers, .heads = r->heads, .kv_heads = r->heads};
    if ((s = loom_parallel_check(p, &mi, r->gpus, c->err))) {
        loom_error_prefix(c->err, "%s: %s", c->file, path);
        return s;
    }
    /* Build the record's graph once, as calibrate will, so that a shape the
     * GPT builder rejects (heads not dividing hidden, sizes that overflow) is
     * reported here at the record's path rather than later without it. */
    loom_graph *g = NULL;
    if ((s = loom_calib_record_graph(r, &g, c->err))) {
        loom_error_prefix(c->err, "%s: %s", c->file, path);
        return s;
    }
    loom_graph_destroy(g);
    return LOOM_OK;
}

loom_status loom_calib_records_load(const char *path, loom_calib_record **out, size_t *n,
                                    loom_error *err)
{
    *out = NULL;
    *n = 0;
    cJSON *root = NULL;
    loom_jctx c = {path, err};
    const cJSON *recs = NULL;
    loom_calib_record *r = NULL;
    loom_json_limits lim = LOOM_JSON_LIMITS_RECORDS;
    loom_status s = loom_json_parse_file_limited(path, &lim, &root, err);
    if (s) return s;
    if (!cJSON_IsObject(root)) {
        s = loom_json_fail(&c, "$", "expected an object with \"records\", found %s",
                           loom_json_type_name(root));
        goto fail;
    }
    if ((s = loom_json_get_array(&c, root, "$", "records", true, &recs))) goto fail;
    size_t count = (size_t)cJSON_GetArraySize(recs);
    if (count == 0) {
        s = loom_json_fail(&c, "$.records", "expected at least one record, found none");
        goto fail;
    }
    r = calloc(count, sizeof *r);
    if (!r) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    size_t i = 0;
    for (const cJSON *o = recs->child; o; o = o->next, i++) {
        char p[64];
        snprintf(p, sizeof p, "$.records[%zu]", i);
        if ((s = read_record(&c, o, p, i, &r[i]))) goto fail;
    }
    cJSON_Delete(root);
    *out = r;
    *n = count;
    return LOOM_OK;
fail:
    free(r);
    cJSON_Delete(root);
    return s;
}
