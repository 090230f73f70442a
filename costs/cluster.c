/*
 * cluster.c — built-in cluster presets ("dgx-h100-x16") and the dispatch
 * between a preset name and a loom-cluster/1 file (cluster_json.c).
 *
 * A preset is N DGX-style nodes of 8 GPUs (a GB200 NVL72 rack counts as one
 * node of 72: its NVLink domain, whose power-of-two tile of 64 the tile view
 * below uses):
 *   intra link = the GPU's NVLink per direction (device.c);
 *   inter link = one NIC per GPU: 200 Gb/s HDR = 25 GB/s on DGX A100
 *                (MLPerf v2.0 dgxa100 system JSON: "8x ConnectX-6 IB HDR
 *                200Gb/Sec"), 400 Gb/s NDR = 50 GB/s on DGX H100/H200/B200
 *                (MLPerf v4.0 Eos: "8x ConnectX-7 IB NDR 400Gb/s"); DGX-1
 *                V100 has 4 × 100 Gb/s EDR for 8 GPUs = 6.25 GB/s per GPU
 *                (DGX-1 system guide; not in hardware.json).
 * Latencies (alpha, per ring step): 3 us inside a node, 8 us across nodes —
 * NCCL's own tuning model (src/graph/tuning.cc, hwLat, ring) charges
 * 1.9 (LL128) to 3.4 (Simple) us per NVLink step and 4.0 to 9.6 us per
 * network step.
 *
 * Units: bytes/s, seconds.
 */
#include "costs/cluster.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define GBPS 1e9
#define INTRA_LATENCY_S 3e-6
#define INTER_LATENCY_S 8e-6
#define PRESET_GPUS_PER_NODE 8

static const struct {
    const char *prefix;    /* name before "-xN" */
    const char *device;
    double nic_per_gpu_Bps;
    int gpus_per_node;     /* 0 = PRESET_GPUS_PER_NODE */
} presets[] = {
    {"dgx-a100-80g", "A100-SXM4-80GB", 25 * GBPS, 0},
    {"dgx-a100-40g", "A100-SXM4-40GB", 25 * GBPS, 0},
    {"dgx-h100", "H100-SXM5-80GB", 50 * GBPS, 0},
    {"dgx-h200", "H200-SXM-141GB", 50 * GBPS, 0},
    {"dgx-b200", "B200-HGX-180GB", 50 * GBPS, 0},
    {"dgx1-v100", "V100-SXM2-16GB", 6.25 * GBPS, 0},
    /* docs/data/devices-new.json: 400 Gb/s ConnectX-7 per GPU on HGX H800,
     * HGX H20, MI300X / MI325X platforms and GB200 compute trays; L40S
     * boxes typically share 2 × 200 Gb/s among 8 GPUs (50 Gb/s each). */
    {"dgx-h800", "H800-SXM5-80GB", 50 * GBPS, 0},
    {"hgx-h20", "H20-96GB", 50 * GBPS, 0},
    {"mi300x", "MI300X-192GB", 50 * GBPS, 0},
    {"mi325x", "MI325X-256GB", 50 * GBPS, 0},
    {"pcie-l40s", "L40S-48GB", 6.25 * GBPS, 0},
    /* GB200 NVL72: one NVLink domain of 72 GPUs per rack; a "node" here is
     * the NVLink domain (docs/design-notes.md, "NVLink domains"). */
    {"gb200-nvl72", "B200-NVL72-186GB", 50 * GBPS, 72},
};

#define N_PRESETS (sizeof presets / sizeof presets[0])
#define PRESET_LIST                                                                   \
    "dgx-a100-80g-xN, dgx-a100-40g-xN, dgx-h100-xN, dgx-h200-xN, dgx-b200-xN, dgx1-v100-xN, " \
    "dgx-h800-xN, hgx-h20-xN, mi300x-xN, mi325x-xN, pcie-l40s-xN (N nodes of 8 GPUs), "      \
    "gb200-nvl72-xN (N racks of 72)"
/* L40S and other NVLink-less boards: GPU to GPU over PCIe Gen4 x16, 32 GB/s
 * per direction (devices-new.json), through the host or a PCIe switch. */
#define PCIE4_BPS (32 * GBPS)

/* Index of the preset whose prefix + "-x" starts name (case-insensitive), or
 * -1; *tail points at what follows "-x". */
static int match_prefix(const char *name, const char **tail)
{
    for (size_t i = 0; i < N_PRESETS; i++) {
        size_t n = strlen(presets[i].prefix);
        if (strncasecmp(name, presets[i].prefix, n) == 0 && (name[n] == '-') &&
            (name[n + 1] == 'x' || name[n + 1] == 'X')) {
            *tail = name + n + 2;
            return (int)i;
        }
    }
    return -1;
}

size_t loom_cluster_preset_count(void) { return N_PRESETS; }

const char *loom_cluster_preset_prefix(size_t i)
{
    return i < N_PRESETS ? presets[i].prefix : NULL;
}

bool loom_cluster_is_preset_name(const char *name)
{
    const char *tail;
    return name && match_prefix(name, &tail) >= 0;
}

loom_status loom_cluster_preset(const char *name, loom_cluster *out, loom_error *err)
{
    const char *tail = NULL;
    int p = name ? match_prefix(name, &tail) : -1;
    if (p < 0)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "'%s' is not a cluster preset (expected one of: " PRESET_LIST ")",
                              name ? name : "(null)");
    /* N: plain decimal digits, 1..LOOM_CLUSTER_MAX_NODES (no sign, no overflow). */
    int64_t n = 0;
    const char *q = tail;
    for (; *q >= '0' && *q <= '9'; q++) {
        n = n * 10 + (*q - '0');
        if (n > LOOM_CLUSTER_MAX_NODES) break;
    }
    if (q == tail || *q != '\0' || n < 1 || n > LOOM_CLUSTER_MAX_NODES)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "cluster preset '%s': expected %s-xN with N a node count in [1, %d], "
                              "found \"%s\" after \"-x\"",
                              name, presets[p].prefix, LOOM_CLUSTER_MAX_NODES, tail);
    const loom_device *d = loom_device_find(presets[p].device);
    LOOM_ASSERT(d != NULL);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s-x%lld", presets[p].prefix, (long long)n);
    out->nodes = n;
    out->gpus_per_node = presets[p].gpus_per_node ? presets[p].gpus_per_node : PRESET_GPUS_PER_NODE;
    out->gpu = *d;
    out->intra = (loom_link){d->nvlink_Bps > 0 ? d->nvlink_Bps : PCIE4_BPS, INTRA_LATENCY_S};
    out->inter = (loom_link){presets[p].nic_per_gpu_Bps, INTER_LATENCY_S};
    out->memory_headroom = LOOM_CLUSTER_DEFAULT_HEADROOM;
    return LOOM_OK;
}

loom_status loom_cluster_load(const char *name_or_path, loom_cluster *out, loom_error *err)
{
    if (!name_or_path || !*name_or_path)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "no cluster given (expected a preset such as dgx-h100-x2 or a "
                              "loom-cluster/1 file)");
    if (loom_cluster_is_preset_name(name_or_path))
        return loom_cluster_preset(name_or_path, out, err);
    if (access(name_or_path, F_OK) != 0) {
        int e = errno;
        return loom_error_set(err, LOOM_ERR_IO,
                              "cluster '%s': no such preset, and cannot open it as a file (%s); "
                              "presets are " PRESET_LIST,
                              name_or_path, strerror(e));
    }
    return loom_cluster_load_file(name_or_path, out, err);
}

int64_t loom_cluster_gpus(const loom_cluster *c)
{
    return c ? c->nodes * c->gpus_per_node : 0;
}

int64_t loom_cluster_usable_bytes(const loom_cluster *c)
{
    double h = c->memory_headroom, hbm = (double)c->gpu.hbm_bytes;
    double keep = h <= 0 ? 0 : h < 1 ? h * hbm : h * 1073741824.0;
    return keep >= hbm ? 0 : (int64_t)(hbm - keep);
}

int64_t loom_cluster_hbm_for_usable(const loom_cluster *c, int64_t bytes)
{
    double h = c->memory_headroom;
    if (h <= 0) return bytes;
    if (h < 1) return (int64_t)((double)bytes / (1 - h) + 0.5);
    return bytes + (int64_t)(h * 1073741824.0);
}

int64_t loom_cluster_tile_gpus(const loom_cluster *c)
{
    int64_t g = c ? c->gpus_per_node : 0, t = 1;
    if (g <= 8 || (g & (g - 1)) == 0) return 0;
    while (2 * t < g) t *= 2;
    return t > 8 ? t : 0;
}

bool loom_cluster_tile(const loom_cluster *c, loom_cluster *out)
{
    int64_t t = loom_cluster_tile_gpus(c);
    if (t == 0) return false;
    *out = *c;
    out->idle_per_node = c->idle_per_node + (c->gpus_per_node - t);
    out->gpus_per_node = t;
    return true;
}

bool loom_cluster_job_view(const loom_cluster *c, int64_t gpus, loom_cluster *out)
{
    if (gpus == loom_cluster_gpus(c)) {
        *out = *c;
        return true;
    }
    loom_cluster t;
    if (!loom_cluster_tile(c, &t) || gpus != loom_cluster_gpus(&t)) return false;
    *out = t;
    return true;
}
