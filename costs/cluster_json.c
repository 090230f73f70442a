/*
 * cluster_json.c — reader of "loom-cluster/1" files (docs/cluster-format.md).
 *
 *   { "format": "loom-cluster/1", "name": "dgx-h100-x16",
 *     "nodes": 16, "gpus_per_node": 8,
 *     "gpu": "H100-SXM5-80GB" | { inline device },
 *     "intra_node": { "bandwidth_GBps": 450, "latency_us": 3 },
 *     "inter_node": { "bandwidth_GBps": 50,  "latency_us": 8 },
 *     "price_per_gpu_hour_usd": 2.5, "power_w": 700,
 *     "nvlink_domain_gpus": 72 }
 *
 * Bandwidths are per direction, per GPU, in GB/s (10^9 bytes/s); latencies
 * in microseconds. intra_node defaults to the GPU's NVLink bandwidth and
 * 3 us; inter_node is required when nodes > 1 (its latency defaults to 8 us).
 * Every error names the file and the JSON path; unknown fields are errors so
 * a typo never silently falls back to a default.
 *
 * nvlink_domain_gpus: GPUs that share one NVLink fabric when that is more
 * than a node (GB200 NVL72: 18 trays of 4 GPUs, one domain of 72). The cost
 * model and the search know one intra link, the node's; a domain is planned
 * as a node of that many GPUs (docs/design-notes.md, "NVLink domains larger
 * than a node"), so the reader folds trays into domains: gpus_per_node
 * becomes the domain, nodes the number of domains.
 *
 * A link bandwidth above the GPU's HBM bandwidth is an error: a GPU sends
 * what it reads from its memory and receives into it, so no link of one GPU
 * outruns its HBM (H100: NVLink 450 GB/s, a 400 Gb/s NIC 50 GB/s, HBM 3,350
 * GB/s). Values that are possible but unusual for the kind of link (a NIC's
 * Gb/s written as GB/s) are the CLI's warnings (planner/cli/cli.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/cluster.h"
#include "base/fileio.h"
#include "base/json.h"

#define DEFAULT_INTRA_LATENCY_US 3.0
#define DEFAULT_INTER_LATENCY_US 8.0
#define MAX_GBPS 1e6        /* 1 PB/s per GPU: far above any link or HBM */
#define MAX_TFLOPS 1e6
#define MAX_LATENCY_US 1e6

/* A number in (0, max] (or [0, max] when zero_ok); absent optional fields
 * leave *out as is. */
static loom_status get_pos(const loom_jctx *c, const cJSON *obj, const char *path,
                           const char *key, bool required, bool zero_ok, double max,
                           double *out)
{
    double v = NAN;
    loom_status s = loom_json_get_num(c, obj, path, key, required, -HUGE_VAL, HUGE_VAL, &v);
    if (s || isnan(v)) return s;
    if (v < 0 || (v == 0 && !zero_ok) || v > max) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s.%s", path, key);
        return loom_json_fail(c, sub, "expected a number %s 0 and <= %g, found %g",
                              zero_ok ? ">=" : ">", max, v);
    }
    *out = v;
    return LOOM_OK;
}

/* "gpu": {"name", "peak_tflops": {bf16, fp16, fp32, fp8, fp4}, "vector_tflops",
 * "hbm_GBps", "hbm_GB", "nvlink_GBps", "host_GBps", "tdp_w"}. */
static loom_status parse_device(const loom_jctx *c, const cJSON *o, const char *path,
                                loom_device *d)
{
    static const char *const keys[] = {"name",     "peak_tflops", "vector_tflops", "hbm_GBps",
                                       "hbm_GB",   "nvlink_GBps", "host_GBps",     "tdp_w",
                                       NULL};
    static const char *const peak_keys[] = {"bf16", "fp16", "fp32", "fp8", "fp4", NULL};
    static const loom_dtype peak_dt[] = {LOOM_DTYPE_BF16, LOOM_DTYPE_FP16, LOOM_DTYPE_FP32,
                                         LOOM_DTYPE_FP8};
    loom_status s = loom_json_check_keys(c, o, path, keys);
    if (s) return s;
    memset(d, 0, sizeof *d);
    const char *name = NULL;
    if ((s = loom_json_get_str(c, o, path, "name", true, &name))) return s;
    if (!*name || strlen(name) >= sizeof d->name)
        return loom_json_fail(c, path, "field \"name\": expected 1 to %zu characters, found %zu",
                              sizeof d->name - 1, strlen(name));
    snprintf(d->name, sizeof d->name, "%s", name);

    const cJSON *peaks = NULL;
    char sub[512];
    snprintf(sub, sizeof sub, "%s.peak_tflops", path);
    if ((s = loom_json_get_object(c, o, path, "peak_tflops", true, &peaks))) return s;
    if ((s = loom_json_check_keys(c, peaks, sub, peak_keys))) return s;
    double best = 0;
    for (int i = 0; peak_keys[i]; i++) {
        double v = 0;
        if ((s = get_pos(c, peaks, sub, peak_keys[i], false, true, MAX_TFLOPS, &v))) return s;
        /* fp4 (block-scaled NVFP4/MXFP4, Blackwell) is no loom_dtype: its own field */
        if (i == 4) {
            d->fp4_flops = v * 1e12;
            continue;
        }
        d->peak_flops[peak_dt[i]] = v * 1e12;
        if (v > best) best = v;
    }
    if (d->peak_flops[LOOM_DTYPE_BF16] <= 0 && d->peak_flops[LOOM_DTYPE_FP16] <= 0)
        return loom_json_fail(c, sub, "expected a bf16 or fp16 peak > 0 (dense tensor-core "
                                      "TFLOP/s), found neither");
    /* CUDA-core FP32 peak: given, else 1/16 of the largest tensor-core peak
     * (A100: 312/16 = 19.5 exactly; H100: 989/16 = 62 vs 67 quoted). */
    double vec = best / 16;
    if ((s = get_pos(c, o, path, "vector_tflops", false, false, MAX_TFLOPS, &vec))) return s;
    d->vector_flops = vec * 1e12;

    double hbm_GBps = 0, hbm_GB = 0, nvlink = 0, host = 0, tdp = 0;
    if ((s = get_pos(c, o, path, "hbm_GBps", true, false, MAX_GBPS, &hbm_GBps))) return s;
    if ((s = get_pos(c, o, path, "hbm_GB", true, false, 1e6, &hbm_GB))) return s;
    if ((s = get_pos(c, o, path, "nvlink_GBps", false, true, MAX_GBPS, &nvlink))) return s;
    if ((s = get_pos(c, o, path, "host_GBps", false, true, MAX_GBPS, &host))) return s;
    if ((s = get_pos(c, o, path, "tdp_w", false, true, 1e6, &tdp))) return s;
    if (nvlink > hbm_GBps) {
        char sub2[512];
        snprintf(sub2, sizeof sub2, "%s.nvlink_GBps", path);
        return loom_json_fail(c, sub2, "expected at most hbm_GBps = %g (no link of a GPU outruns "
                              "the memory it reads from), found %g", hbm_GBps, nvlink);
    }
    d->hbm_bw_Bps = hbm_GBps * 1e9;
    d->hbm_bytes = (int64_t)llround(hbm_GB * (double)(1 << 30));   /* GB read as GiB, as presets */
    d->nvlink_Bps = nvlink * 1e9;
    d->host_Bps = host * 1e9;
    d->tdp_w = tdp;
    return LOOM_OK;
}

static loom_status parse_gpu(const loom_jctx *c, const cJSON *root, loom_device *d)
{
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "gpu");
    if (!g || cJSON_IsNull(g)) return loom_json_fail(c, "$", "missing required field \"gpu\"");
    if (cJSON_IsObject(g)) return parse_device(c, g, "$.gpu", d);
    if (!cJSON_IsString(g))
        return loom_json_fail(c, "$.gpu", "expected a device name or a device object, found %s",
                              loom_json_type_name(g));
    const loom_device *p = loom_device_find(g->valuestring);
    if (!p) {
        char names[512];
        return loom_json_fail(c, "$.gpu",
                              "unknown device \"%s\" (known: %s; or give an inline device "
                              "object, see docs/cluster-format.md)",
                              g->valuestring, loom_device_list_names(names, sizeof names));
    }
    *d = *p;
    return LOOM_OK;
}

/* "intra_node" / "inter_node": {"bandwidth_GBps", "latency_us"}; the
 * bandwidth at most the GPU's HBM bandwidth (gpu). *given: the object is in
 * the file. */
static loom_status parse_link(const loom_jctx *c, const cJSON *root, const char *key,
                              bool required, double def_Bps, double def_lat_us,
                              const loom_device *gpu, loom_link *out, bool *given)
{
    static const char *const keys[] = {"bandwidth_GBps", "latency_us", NULL};
    char path[64];
    snprintf(path, sizeof path, "$.%s", key);
    const cJSON *o = NULL;
    loom_status s = loom_json_get_object(c, root, "$", key, required, &o);
    if (s) return s;
    double bw_GBps = def_Bps / 1e9, lat_us = def_lat_us;
    if (o) {
        if ((s = loom_json_check_keys(c, o, path, keys))) return s;
        if ((s = get_pos(c, o, path, "bandwidth_GBps", def_Bps <= 0, false, MAX_GBPS, &bw_GBps)))
            return s;
        double hbm_GBps = gpu->hbm_bw_Bps / 1e9;
        if (bw_GBps > hbm_GBps) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s.bandwidth_GBps", path);
            return loom_json_fail(c, sub, "expected at most %g, the %s's HBM bandwidth in GB/s "
                                  "(no link of a GPU outruns the memory it reads from), found %g",
                                  hbm_GBps, gpu->name, bw_GBps);
        }
        if ((s = get_pos(c, o, path, "latency_us", false, true, MAX_LATENCY_US, &lat_us)))
            return s;
    }
    out->bandwidth_Bps = bw_GBps * 1e9;
    out->latency_s = lat_us * 1e-6;
    if (given) *given = o != NULL;
    return LOOM_OK;
}

/* Base name of path without directory and ".json", as the default name. */
static void default_name(const char *file, char *out, size_t n)
{
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    size_t len = strlen(b);
    if (len > 5 && strcmp(b + len - 5, ".json") == 0) len -= 5;
    if (len >= n) len = n - 1;
    memcpy(out, b, len);
    out[len] = '\0';
}

loom_status loom_cluster_parse(const char *file, const char *text, size_t len, loom_cluster *out,
                               loom_error *err)
{
    static const char *const keys[] = {"format",     "name",       "nodes",
                                       "gpus_per_node", "gpu",     "intra_node",
                                       "inter_node", "price_per_gpu_hour_usd", "power_w",
                                       "memory_headroom", "nvlink_domain_gpus", "about", NULL};
    cJSON *root = NULL;
    loom_jctx c = {file, err};
    loom_cluster cl;
    memset(&cl, 0, sizeof cl);
    loom_json_limits lim = LOOM_JSON_LIMITS_CLUSTER;
    loom_status s = loom_json_parse_limited(file, text, len, &lim, &root, err);
    if (s) return s;
    if (!cJSON_IsObject(root)) {
        s = loom_json_fail(&c, "$", "expected an object, found %s", loom_json_type_name(root));
        goto fail;
    }
    const char *fmt = NULL, *name = NULL;
    if ((s = loom_json_get_str(&c, root, "$", "format", true, &fmt))) goto fail;
    if (strcmp(fmt, LOOM_CLUSTER_FORMAT) != 0) {
        s = loom_json_fail(&c, "$.format", "expected \"" LOOM_CLUSTER_FORMAT "\", found \"%s\"",
                           fmt);
        goto fail;
    }
    if ((s = loom_json_check_keys(&c, root, "$", keys))) goto fail;
    if ((s = loom_json_get_str(&c, root, "$", "name", false, &name))) goto fail;
    if (name && strlen(name) >= sizeof cl.name) {
        s = loom_json_fail(&c, "$.name", "expected at most %zu characters, found %zu",
                           sizeof cl.name - 1, strlen(name));
        goto fail;
    }
    if (name && *name) snprintf(cl.name, sizeof cl.name, "%s", name);
    else default_name(file, cl.name, sizeof cl.name);
    if ((s = loom_json_get_int(&c, root, "$", "nodes", true, 1, LOOM_CLUSTER_MAX_NODES,
                               &cl.nodes)))
        goto fail;
    if ((s = loom_json_get_int(&c, root, "$", "gpus_per_node", true, 1,
                               LOOM_CLUSTER_MAX_GPUS_PER_NODE, &cl.gpus_per_node)))
        goto fail;
    /* one bound on the whole machine (base/limits.h), checked here rather
     * than after a search that cannot finish */
    if (cl.nodes * cl.gpus_per_node > LOOM_CLUSTER_MAX_GPUS) {
        s = loom_json_fail(&c, "$.nodes",
                           "%lld nodes x %lld GPUs per node = %lld GPUs: at most %lld GPUs",
                           (long long)cl.nodes, (long long)cl.gpus_per_node,
                           (long long)(cl.nodes * cl.gpus_per_node),
                           (long long)LOOM_CLUSTER_MAX_GPUS);
        goto fail;
    }
    /* trays folded into NVLink domains (see the top) */
    int64_t domain = 0;
    if ((s = loom_json_get_int(&c, root, "$", "nvlink_domain_gpus", false, 1,
                               LOOM_CLUSTER_MAX_GPUS_PER_NODE, &domain)))
        goto fail;
    if (domain > 0 && (domain % cl.gpus_per_node != 0 ||
                       (cl.nodes * cl.gpus_per_node) % domain != 0)) {
        s = loom_json_fail(&c, "$.nvlink_domain_gpus",
                           "expected a multiple of gpus_per_node = %lld that divides the %lld "
                           "GPUs, found %lld",
                           (long long)cl.gpus_per_node, (long long)(cl.nodes * cl.gpus_per_node),
                           (long long)domain);
        goto fail;
    }
    if (domain > cl.gpus_per_node) {
        cl.nodes = cl.nodes * cl.gpus_per_node / domain;
        cl.gpus_per_node = domain;
    }
    if ((s = parse_gpu(&c, root, &cl.gpu))) goto fail;
    /* The intra link defaults to the device's NVLink; a device without one
     * (nvlink 0) must state it when a node has several GPUs. */
    if ((s = parse_link(&c, root, "intra_node", cl.gpus_per_node > 1 && cl.gpu.nvlink_Bps <= 0,
                        cl.gpu.nvlink_Bps, DEFAULT_INTRA_LATENCY_US, &cl.gpu, &cl.intra,
                        &cl.intra_given)))
        goto fail;
    if ((s = parse_link(&c, root, "inter_node", cl.nodes > 1, 0, DEFAULT_INTER_LATENCY_US,
                        &cl.gpu, &cl.inter, NULL)))
        goto fail;
    if ((s = get_pos(&c, root, "$", "price_per_gpu_hour_usd", false, true, 1e6,
                     &cl.price_per_gpu_hour_usd)))
        goto fail;
    if ((s = get_pos(&c, root, "$", "power_w", false, true, 1e6, &cl.power_w))) goto fail;
    cl.memory_headroom = LOOM_CLUSTER_DEFAULT_HEADROOM;
    if ((s = get_pos(&c, root, "$", "memory_headroom", false, true, 1024, &cl.memory_headroom)))
        goto fail;
    *out = cl;
fail:
    cJSON_Delete(root);
    return s;
}

loom_status loom_cluster_load_file(const char *path, loom_cluster *out, loom_error *err)
{
    char *text = NULL;
    size_t len = 0;
    loom_status s = loom_read_file(path, LOOM_JSON_LIMITS_CLUSTER.max_bytes, &text, &len, err);
    if (s) return s;
    s = loom_cluster_parse(path, text, len, out, err);
    free(text);
    return s;
}
