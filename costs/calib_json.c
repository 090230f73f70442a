/*
 * calib_json.c — "loom-calib/1" files: read and atomic write.
 *
 *   { "format": "loom-calib/1", "device": "H100-SXM5-80GB",
 *     "note": "fitted by loom calibrate from calibration.json (17 records)",
 *     "gemm_eff_max": 0.78, "gemm_half_flops": 2968200000, "attn_eff": 0.5,
 *     "mem_eff": 0.85, "vector_eff": 0.5, "intra_link_eff": 0.8,
 *     "inter_link_eff": 0.9, "kernel_overhead_s": 2e-06,
 *     "grad_sync_overlap": 0 }
 *
 * Fields absent from a file keep loom_calib_default() of its "device" (a
 * device name loom knows, or generic defaults when absent), so a file may
 * override a single efficiency. Unknown fields are errors. The writer emits
 * every field in the order above, so equal calibrations give equal files.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/calib.h"
#include "base/fileio.h"
#include "base/json.h"

static loom_status get_field(const loom_jctx *c, const cJSON *root, const char *key, double lo,
                             double hi, bool lo_open, double *out)
{
    loom_status s = loom_json_get_num(c, root, "$", key, false, lo, hi, out);
    if (s) return s;
    if (lo_open && *out == lo) {
        char sub[128];
        snprintf(sub, sizeof sub, "$.%s", key);
        return loom_json_fail(c, sub, "expected a number in (%g, %g], found %g", lo, hi, *out);
    }
    return LOOM_OK;
}

loom_status loom_calib_load(const char *path, loom_calib *out, loom_error *err)
{
    static const char *const keys[] = {
        "format", "device", "note",
#define LOOM_X(name, lo, hi, open) #name,
        LOOM_CALIB_FIELDS(LOOM_X)
#undef LOOM_X
        NULL};
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    loom_jctx c = {path, err};
    loom_calib cal;
    loom_json_limits lim = LOOM_JSON_LIMITS_CALIB;
    loom_status s = loom_read_file(path, lim.max_bytes, &text, &len, err);
    if (s) return s;
    if ((s = loom_json_parse_limited(path, text, len, &lim, &root, err))) goto fail;
    if (!cJSON_IsObject(root)) {
        s = loom_json_fail(&c, "$", "expected an object, found %s", loom_json_type_name(root));
        goto fail;
    }
    const char *fmt = NULL, *device = NULL, *note = NULL;
    if ((s = loom_json_get_str(&c, root, "$", "format", true, &fmt))) goto fail;
    if (strcmp(fmt, LOOM_CALIB_FORMAT) != 0) {
        s = loom_json_fail(&c, "$.format", "expected \"" LOOM_CALIB_FORMAT "\", found \"%s\"", fmt);
        goto fail;
    }
    if ((s = loom_json_check_keys(&c, root, "$", keys))) goto fail;
    if ((s = loom_json_get_str(&c, root, "$", "device", false, &device))) goto fail;
    if ((s = loom_json_get_str(&c, root, "$", "note", false, &note))) goto fail;
    const loom_device *d = NULL;
    if (device && *device) {
        d = loom_device_find(device);
        if (!d) {
            char names[512];
            s = loom_json_fail(&c, "$.device", "unknown device \"%s\" (known: %s)", device,
                               loom_device_list_names(names, sizeof names));
            goto fail;
        }
    }
    loom_calib_default(d, &cal);
    if (note) snprintf(cal.note, sizeof cal.note, "%s", note);
#define LOOM_X(name, lo, hi, open) \
    if ((s = get_field(&c, root, #name, lo, hi, open, &cal.name))) goto fail;
    LOOM_CALIB_FIELDS(LOOM_X)
#undef LOOM_X
    if ((s = loom_calib_validate(&cal, err))) {
        loom_error_prefix(err, "%s", path);
        goto fail;
    }
    *out = cal;
fail:
    cJSON_Delete(root);
    free(text);
    return s;
}

loom_status loom_calib_save(const char *path, const loom_calib *cal, loom_error *err)
{
    loom_status s = loom_calib_validate(cal, err);
    if (s) return s;
    cJSON *root = cJSON_CreateObject();
    char *text = NULL;
    if (!root) return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", path);
    bool ok = cJSON_AddStringToObject(root, "format", LOOM_CALIB_FORMAT) &&
              cJSON_AddStringToObject(root, "device", cal->device) &&
              cJSON_AddStringToObject(root, "note", cal->note);
#define LOOM_X(name, lo, hi, open) ok = ok && cJSON_AddNumberToObject(root, #name, cal->name);
    LOOM_CALIB_FIELDS(LOOM_X)
#undef LOOM_X
    if (ok) text = loom_json_print(root);
    if (!text) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    s = loom_write_file_atomic(path, text, strlen(text), err);
fail:
    free(text);
    cJSON_Delete(root);
    return s;
}
