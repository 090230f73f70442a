/*
 * test_cluster.c — device presets, cluster presets by name, loom-cluster/1
 * files (good and bad), and loom-calib/1 round trips.
 *
 * Expected figures are the datasheet values of shared/data/hardware.json
 * (dense bf16 TFLOP/s, HBM GB/s, NVLink GB/s per direction) and the NIC
 * rates of DGX systems (200 Gb/s = 25 GB/s, 400 Gb/s = 50 GB/s per GPU).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "costs/calib.h"
#include "costs/cluster.h"
#include "base/fileio.h"

static char dir[64];

/* Writes text to DIR/name and returns the path (static buffer per call site). */
static const char *put(const char *name, const char *text, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
    return path;
}

static void devices(void)
{
    /* 6 + H800, H20, B200-NVL72, MI300X, MI325X, L40S, Grand Teton's H100 */
    CHECK_INT_EQ(loom_device_count(), 13);
    /* Grand Teton's H100: 96 GB of HBM2e at 2.4 TB/s (torchtitan's benchmark
     * pages), the SXM5's dense peaks */
    const loom_device *gt = loom_device_find("h100-96gb-hbm2e");
    CHECK(gt != NULL);
    if (gt) {
        CHECK_NEAR_REL(gt->hbm_bw_Bps, 2400e9, 1e-12);
        CHECK_NEAR_REL(gt->hbm_bytes, 96.0 * 1024 * 1024 * 1024, 1e-12);
        CHECK_NEAR_REL(gt->peak_flops[LOOM_DTYPE_BF16], 989.4e12, 1e-12);
    }
    const loom_device *h = loom_device_find("H100-SXM5-80GB");
    CHECK(h != NULL);
    CHECK(loom_device_find("h100") == h);
    /* issue #21 presets: H800's NVLink is 400 GB/s bidirectional (datasheet) */
    const loom_device *h8 = loom_device_find("h800");
    CHECK(h8 != NULL);
    if (h8) CHECK_NEAR_REL(h8->nvlink_Bps, 200e9, 1e-12);
    loom_cluster nvl;
    loom_error ce;
    CHECK_INT_EQ(loom_cluster_preset("GB200-NVL72-x4", &nvl, &ce), LOOM_OK);
    CHECK_INT_EQ(nvl.gpus_per_node, 72);
    CHECK_INT_EQ(loom_cluster_gpus(&nvl), 288);
    CHECK_NEAR_REL(nvl.intra.bandwidth_Bps, 900e9, 1e-12);
    CHECK_INT_EQ(loom_cluster_preset("pcie-l40s-x2", &nvl, &ce), LOOM_OK);
    CHECK_NEAR_REL(nvl.intra.bandwidth_Bps, 32e9, 1e-12);   /* PCIe Gen4 x16, no NVLink */
    CHECK(loom_device_find("H100-SXM") == h);
    CHECK(loom_device_find("H100-SXM-80GB") == h);   /* docs/design.md §4 spelling */
    CHECK(loom_device_find("NVIDIA H100 80GB HBM3") == h);
    CHECK(loom_device_find("TPU-v5") == NULL);
    CHECK(loom_device_find(NULL) == NULL);
    CHECK_NEAR_REL(h->peak_flops[LOOM_DTYPE_BF16], 989.4e12, 1e-12);
    CHECK_NEAR_REL(h->peak_flops[LOOM_DTYPE_FP8], 1978.9e12, 1e-12);
    CHECK_NEAR_REL(h->peak_flops[LOOM_DTYPE_FP32], 494.7e12, 1e-12);   /* TF32 */
    CHECK_NEAR_REL(h->hbm_bw_Bps, 3350e9, 1e-12);
    CHECK_INT_EQ(h->hbm_bytes, 80LL << 30);
    CHECK_NEAR_REL(h->nvlink_Bps, 450e9, 1e-12);   /* 900 GB/s bidirectional / 2 */
    CHECK_NEAR_REL(h->tdp_w, 700, 1e-12);

    const loom_device *a80 = loom_device_find("A100-80GB"), *a40 = loom_device_find("a100-40gb");
    CHECK(a80 && a40 && a80 != a40);
    CHECK_NEAR_REL(a80->peak_flops[LOOM_DTYPE_BF16], 312e12, 1e-12);
    CHECK(a80->peak_flops[LOOM_DTYPE_FP8] == 0);   /* no fp8 before Hopper */
    CHECK_NEAR_REL(a80->hbm_bw_Bps, 2039e9, 1e-12);
    CHECK_NEAR_REL(a40->hbm_bw_Bps, 1555e9, 1e-12);
    CHECK_NEAR_REL(loom_device_find("H200")->hbm_bw_Bps, 4800e9, 1e-12);
    CHECK_NEAR_REL(loom_device_find("B200")->peak_flops[LOOM_DTYPE_BF16], 2250e12, 1e-12);
    CHECK_NEAR_REL(loom_device_find("B200")->nvlink_Bps, 900e9, 1e-12);
    const loom_device *v = loom_device_find("V100");
    CHECK(v->peak_flops[LOOM_DTYPE_BF16] == 0);    /* Volta has no bf16 */
    CHECK_NEAR_REL(v->peak_flops[LOOM_DTYPE_FP16], 125e12, 1e-12);
    CHECK(loom_device_peak_flops(h, LOOM_DTYPE_INT64) == 0);
    char names[512];
    loom_device_list_names(names, sizeof names);
    for (size_t i = 0; i < loom_device_count(); i++)
        CHECK_STR_CONTAINS(names, loom_device_at(i)->name);
    CHECK(loom_device_at(loom_device_count()) == NULL);
}

static void presets(void)
{
    loom_cluster c;
    loom_error err;
    CHECK_INT_EQ(loom_cluster_load("dgx-h100-x16", &c, &err), LOOM_OK);
    CHECK(strcmp(c.name, "dgx-h100-x16") == 0);
    CHECK_INT_EQ(c.nodes, 16);
    CHECK_INT_EQ(c.gpus_per_node, 8);
    CHECK_INT_EQ(loom_cluster_gpus(&c), 128);
    CHECK(strcmp(c.gpu.name, "H100-SXM5-80GB") == 0);
    CHECK_NEAR_REL(c.intra.bandwidth_Bps, 450e9, 1e-12);
    CHECK_NEAR_REL(c.inter.bandwidth_Bps, 50e9, 1e-12);   /* 400 Gb/s */
    CHECK(c.intra.latency_s > 0 && c.intra.latency_s < c.inter.latency_s);

    CHECK_INT_EQ(loom_cluster_load("DGX-A100-80G-X4", &c, &err), LOOM_OK);   /* any case */
    CHECK_INT_EQ(loom_cluster_gpus(&c), 32);
    CHECK(strcmp(c.gpu.name, "A100-SXM4-80GB") == 0);
    CHECK_NEAR_REL(c.inter.bandwidth_Bps, 25e9, 1e-12);   /* 200 Gb/s */
    CHECK_NEAR_REL(c.intra.bandwidth_Bps, 300e9, 1e-12);

    struct { const char *name, *gpu; double nic; } more[] = {
        {"dgx-a100-40g-x1", "A100-SXM4-40GB", 25e9}, {"dgx-h200-x2", "H200-SXM-141GB", 50e9},
        {"dgx-b200-x3", "B200-HGX-180GB", 50e9},     {"dgx1-v100-x2", "V100-SXM2-16GB", 6.25e9},
        {"dgx-h100-x1024", "H100-SXM5-80GB", 50e9},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        CHECK_INT_EQ(loom_cluster_load(more[i].name, &c, &err), LOOM_OK);
        CHECK(strcmp(c.gpu.name, more[i].gpu) == 0);
        CHECK_NEAR_REL(c.inter.bandwidth_Bps, more[i].nic, 1e-12);
        CHECK_NEAR_REL(c.intra.bandwidth_Bps, c.gpu.nvlink_Bps, 1e-12);
    }
    CHECK_INT_EQ(c.nodes, 1024);

    const char *bad[] = {"dgx-h100-x0", "dgx-h100-x", "dgx-h100-x2a", "dgx-h100-x-1",
                         "dgx-h100-x99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = '\0';
        CHECK_INT_EQ(loom_cluster_load(bad[i], &c, &err), LOOM_ERR_INVALID);
        CHECK_STR_CONTAINS(err.msg, bad[i]);
        CHECK_STR_CONTAINS(err.msg, "node count");
    }
    /* Neither a preset nor a file: says so and lists the presets. */
    CHECK_INT_EQ(loom_cluster_load("dgx-h1000-x2", &c, &err), LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "dgx-h1000-x2");
    CHECK_STR_CONTAINS(err.msg, "dgx-h100-xN");
    CHECK_STR_CONTAINS(err.msg, "dgx-a100-80g-xN");
}

static void files(void)
{
    loom_cluster c;
    loom_error err;
    CHECK_INT_EQ(loom_cluster_load("examples/clusters/dgx-h100-x16.json", &c, &err), LOOM_OK);
    CHECK(strcmp(c.name, "dgx-h100-x16") == 0);
    CHECK_INT_EQ(loom_cluster_gpus(&c), 128);
    CHECK_NEAR_REL(c.price_per_gpu_hour_usd, 2.5, 1e-12);
    CHECK_NEAR_REL(c.power_w, 700, 1e-12);
    CHECK_NEAR_REL(c.inter.latency_s, 8e-6, 1e-12);
    /* The file and the preset of the same name describe the same machine. */
    loom_cluster p;
    CHECK_INT_EQ(loom_cluster_load("dgx-h100-x16", &p, &err), LOOM_OK);
    CHECK(memcmp(&p.gpu, &c.gpu, sizeof p.gpu) == 0);
    CHECK_NEAR_REL(p.intra.bandwidth_Bps, c.intra.bandwidth_Bps, 1e-12);
    CHECK_NEAR_REL(p.inter.bandwidth_Bps, c.inter.bandwidth_Bps, 1e-12);
    CHECK_INT_EQ(loom_cluster_load("examples/clusters/dgx-a100-80g-x4.json", &c, &err), LOOM_OK);
    CHECK_INT_EQ(loom_cluster_gpus(&c), 32);

    /* Inline device; missing vector_tflops defaults to 1/16 of the largest
     * tensor peak; absent intra_node defaults to the device's NVLink. */
    char path[256];
    put("inline.json",
        "{\"format\": \"loom-cluster/1\", \"nodes\": 1, \"gpus_per_node\": 4,\n"
        " \"gpu\": {\"name\": \"X1\", \"peak_tflops\": {\"bf16\": 320, \"fp8\": 640},\n"
        "         \"hbm_GBps\": 2000, \"hbm_GB\": 64, \"nvlink_GBps\": 200}}\n",
        path, sizeof path);
    CHECK_INT_EQ(loom_cluster_load(path, &c, &err), LOOM_OK);
    CHECK(strcmp(c.name, "inline") == 0);   /* from the file name */
    CHECK(strcmp(c.gpu.name, "X1") == 0);
    CHECK_NEAR_REL(c.gpu.peak_flops[LOOM_DTYPE_BF16], 320e12, 1e-12);
    CHECK(c.gpu.peak_flops[LOOM_DTYPE_FP16] == 0);
    CHECK_NEAR_REL(c.gpu.vector_flops, 640e12 / 16, 1e-12);
    CHECK_INT_EQ(c.gpu.hbm_bytes, 64LL << 30);
    CHECK_NEAR_REL(c.intra.bandwidth_Bps, 200e9, 1e-12);
    CHECK_NEAR_REL(c.intra.latency_s, 3e-6, 1e-12);
    CHECK(c.price_per_gpu_hour_usd == 0 && c.power_w == 0);
    CHECK_INT_EQ(loom_cluster_load("examples/clusters/pcie-h100-x2.json", &c, &err), LOOM_OK);
    CHECK_NEAR_REL(c.gpu.peak_flops[LOOM_DTYPE_BF16], 756e12, 1e-12);
    CHECK_NEAR_REL(c.intra.bandwidth_Bps, 64e9, 1e-12);
}

/* A bad file: non-zero status, and the message names the file and holds
 * each of the needles (JSON path, what was expected / found). */
static void bad_file(const char *name, const char *text, loom_status want, const char *n1,
                     const char *n2, const char *n3)
{
    char path[256];
    loom_cluster c;
    loom_error err;
    err.msg[0] = '\0';
    put(name, text, path, sizeof path);
    loom_status s = loom_cluster_load(path, &c, &err);
    CHECK_INT_EQ(s, want);
    CHECK_STR_CONTAINS(err.msg, path);
    if (n1) CHECK_STR_CONTAINS(err.msg, n1);
    if (n2) CHECK_STR_CONTAINS(err.msg, n2);
    if (n3) CHECK_STR_CONTAINS(err.msg, n3);
}

#define HEAD "{\"format\": \"loom-cluster/1\", "
#define LINKS "\"intra_node\": {\"bandwidth_GBps\": 450}, \"inter_node\": {\"bandwidth_GBps\": 50}"

static void bad_files(void)
{
    bad_file("missing.json", HEAD "\"gpus_per_node\": 8, \"gpu\": \"H100\", " LINKS "}",
             LOOM_ERR_INVALID, "\"nodes\"", "missing", NULL);
    bad_file("neg.json",
             HEAD "\"nodes\": 2, \"gpus_per_node\": 8, \"gpu\": \"H100\",\n"
                  " \"inter_node\": {\"bandwidth_GBps\": -3}}",
             LOOM_ERR_INVALID, "$.inter_node.bandwidth_GBps", "> 0", "-3");
    bad_file("gpu.json", HEAD "\"nodes\": 1, \"gpus_per_node\": 8, \"gpu\": \"H1000\"}",
             LOOM_ERR_INVALID, "$.gpu", "\"H1000\"", "A100-SXM4-40GB, A100-SXM4-80GB, H100");
    bad_file("field.json",
             HEAD "\"nodes\": 1, \"gpus_per_nodes\": 8, \"gpu\": \"H100\"}", LOOM_ERR_INVALID,
             "unknown field \"gpus_per_nodes\"", "gpus_per_node", NULL);
    bad_file("zero.json", HEAD "\"nodes\": 0, \"gpus_per_node\": 8, \"gpu\": \"H100\"}",
             LOOM_ERR_INVALID, "$.nodes", "found 0", NULL);
    bad_file("frac.json", HEAD "\"nodes\": 1.5, \"gpus_per_node\": 8, \"gpu\": \"H100\"}",
             LOOM_ERR_INVALID, "$.nodes", "integer", NULL);
    bad_file("nointer.json", HEAD "\"nodes\": 2, \"gpus_per_node\": 8, \"gpu\": \"H100\"}",
             LOOM_ERR_INVALID, "inter_node", "missing", NULL);
    bad_file("format.json",
             "{\"format\": \"loom-cluster/2\", \"nodes\": 1, \"gpus_per_node\": 8, \"gpu\": \"H100\"}",
             LOOM_ERR_INVALID, "$.format", "loom-cluster/1", "loom-cluster/2");
    bad_file("syntax.json", HEAD "\"nodes\": 1,\n \"gpus_per_node\": 8 \"gpu\": \"H100\"}",
             LOOM_ERR_PARSE, ":2:", NULL, NULL);
    bad_file("dup.json", HEAD "\"nodes\": 1, \"nodes\": 2, \"gpus_per_node\": 8, \"gpu\": \"H100\"}",
             LOOM_ERR_INVALID, "duplicate key \"nodes\"", NULL, NULL);
    bad_file("gputype.json", HEAD "\"nodes\": 1, \"gpus_per_node\": 8, \"gpu\": 7}",
             LOOM_ERR_INVALID, "$.gpu", "a number", NULL);
    bad_file("inline_bad.json",
             HEAD "\"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": {\"name\": \"X\",\n"
                  " \"peak_tflops\": {\"fp32\": 100}, \"hbm_GBps\": 1000, \"hbm_GB\": 16}}",
             LOOM_ERR_INVALID, "$.gpu.peak_tflops", "bf16 or fp16", NULL);
    bad_file("inline_key.json",
             HEAD "\"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": {\"name\": \"X\",\n"
                  " \"peak_tflops\": {\"bf16\": 100, \"int4\": 9}, \"hbm_GBps\": 1000, \"hbm_GB\": 16}}",
             LOOM_ERR_INVALID, "$.gpu.peak_tflops", "\"int4\"", NULL);
    bad_file("lat.json",
             HEAD "\"nodes\": 1, \"gpus_per_node\": 8, \"gpu\": \"H100\",\n"
                  " \"intra_node\": {\"latency_us\": \"3\"}}",
             LOOM_ERR_INVALID, "$.intra_node.latency_us", "a string", NULL);
    bad_file("price.json",
             HEAD "\"nodes\": 1, \"gpus_per_node\": 8, \"gpu\": \"H100\", \"price_per_gpu_hour_usd\": -1}",
             LOOM_ERR_INVALID, "$.price_per_gpu_hour_usd", "-1", NULL);
    bad_file("array.json", "[1, 2]", LOOM_ERR_INVALID, "$", "an object", NULL);
    /* faster than the GPU's memory (H100: 3,350 GB/s HBM3, datasheet): no
     * link can carry it, whatever its kind */
    bad_file("nic_hbm.json",
             HEAD "\"nodes\": 2, \"gpus_per_node\": 8, \"gpu\": \"H100\",\n"
                  " \"inter_node\": {\"bandwidth_GBps\": 3400}}",
             LOOM_ERR_INVALID, "$.inter_node.bandwidth_GBps", "at most 3350", "found 3400");
    bad_file("nvl_hbm.json",
             HEAD "\"nodes\": 1, \"gpus_per_node\": 8, \"gpu\": \"A100-40GB\",\n"
                  " \"intra_node\": {\"bandwidth_GBps\": 1600}}",
             LOOM_ERR_INVALID, "$.intra_node.bandwidth_GBps", "at most 1555", "A100-SXM4-40GB");
    bad_file("inline_nvl.json",
             HEAD "\"nodes\": 1, \"gpus_per_node\": 2, \"gpu\": {\"name\": \"X\",\n"
                  " \"peak_tflops\": {\"bf16\": 100}, \"hbm_GBps\": 1000, \"hbm_GB\": 16,"
                  " \"nvlink_GBps\": 1001}}",
             LOOM_ERR_INVALID, "$.gpu.nvlink_GBps", "at most hbm_GBps = 1000", "found 1001");
    /* exactly the HBM bandwidth is the bound, not beyond it */
    char path[256];
    loom_cluster c;
    loom_error err = {0};
    put("at_hbm.json",
        HEAD "\"nodes\": 2, \"gpus_per_node\": 8, \"gpu\": \"H100\",\n"
             " \"inter_node\": {\"bandwidth_GBps\": 3350}}", path, sizeof path);
    CHECK_INT_EQ(loom_cluster_load(path, &c, &err), LOOM_OK);
    CHECK(!c.intra_given);
    CHECK_NEAR_REL(c.intra.bandwidth_Bps, 450e9, 1e-12);   /* the H100's NVLink */
    /* a domain that is not whole trays, or does not tile the machine */
    bad_file("dom_tray.json",
             HEAD "\"nodes\": 72, \"gpus_per_node\": 4, \"nvlink_domain_gpus\": 70, "
                  "\"gpu\": \"GB200\", \"inter_node\": {\"bandwidth_GBps\": 50}}",
             LOOM_ERR_INVALID, "$.nvlink_domain_gpus", "multiple of gpus_per_node = 4", "found 70");
    bad_file("dom_tile.json",
             HEAD "\"nodes\": 20, \"gpus_per_node\": 4, \"nvlink_domain_gpus\": 72, "
                  "\"gpu\": \"GB200\", \"inter_node\": {\"bandwidth_GBps\": 50}}",
             LOOM_ERR_INVALID, "$.nvlink_domain_gpus", "divides the 80 GPUs", NULL);
}

/* GB200 NVL72 written as what it is, 18 trays of 4 GPUs per rack sharing one
 * NVLink domain of 72, is the preset gb200-nvl72-x4: 4 domains of 72 GPUs,
 * NVLink 5 (900 GB/s per direction) inside, the NIC across. */
static void nvlink_domains(void)
{
    char path[256];
    loom_cluster trays, preset;
    loom_error err = {0};
    put("nvl72.json",
        HEAD "\"nodes\": 72, \"gpus_per_node\": 4, \"nvlink_domain_gpus\": 72, "
             "\"gpu\": \"GB200\", \"inter_node\": {\"bandwidth_GBps\": 50}}",
        path, sizeof path);
    CHECK_INT_EQ(loom_cluster_load(path, &trays, &err), LOOM_OK);
    CHECK_INT_EQ(loom_cluster_load("gb200-nvl72-x4", &preset, &err), LOOM_OK);
    CHECK_INT_EQ(trays.nodes, 4);
    CHECK_INT_EQ(trays.gpus_per_node, 72);
    CHECK_INT_EQ(loom_cluster_gpus(&trays), 288);
    CHECK_INT_EQ(preset.nodes, trays.nodes);
    CHECK_INT_EQ(preset.gpus_per_node, trays.gpus_per_node);
    CHECK_NEAR_REL(trays.intra.bandwidth_Bps, 900e9, 1e-12);
    CHECK_NEAR_REL(trays.intra.bandwidth_Bps, preset.intra.bandwidth_Bps, 1e-12);
    CHECK_NEAR_REL(trays.inter.bandwidth_Bps, preset.inter.bandwidth_Bps, 1e-12);
    CHECK(strcmp(trays.gpu.name, preset.gpu.name) == 0);
    /* a domain no larger than the node changes nothing */
    put("dom8.json",
        HEAD "\"nodes\": 2, \"gpus_per_node\": 8, \"nvlink_domain_gpus\": 8, "
             "\"gpu\": \"H100\", \"inter_node\": {\"bandwidth_GBps\": 50}}",
        path, sizeof path);
    CHECK_INT_EQ(loom_cluster_load(path, &trays, &err), LOOM_OK);
    CHECK_INT_EQ(trays.nodes, 2);
    CHECK_INT_EQ(trays.gpus_per_node, 8);
}

/* The power-of-two tile of a node (cluster.h): 64 of NVL72's 72, 32 of a
 * 36-GPU domain; none for nodes that are their own tile (8, 16, 64) or
 * whose tile would hold no group an 8-GPU board lacks (12: tile 8). The
 * tile view keeps the device and links, numbers only the GPUs in use and
 * counts the rest idle; a job of all GPUs or of the tiles has a view, any
 * other count none. */
static void nvlink_tiles(void)
{
    loom_cluster c, t;
    loom_error err = {0};
    CHECK_INT_EQ(loom_cluster_preset("gb200-nvl72-x4", &c, &err), LOOM_OK);
    CHECK_INT_EQ(loom_cluster_tile_gpus(&c), 64);
    CHECK(loom_cluster_tile(&c, &t));
    CHECK_INT_EQ(t.nodes, 4);
    CHECK_INT_EQ(t.gpus_per_node, 64);
    CHECK_INT_EQ(t.idle_per_node, 8);
    CHECK_INT_EQ(loom_cluster_gpus(&t), 256);
    CHECK_NEAR_REL(t.intra.bandwidth_Bps, c.intra.bandwidth_Bps, 0);
    CHECK_NEAR_REL(t.inter.bandwidth_Bps, c.inter.bandwidth_Bps, 0);
    CHECK(strcmp(t.name, c.name) == 0 && strcmp(t.gpu.name, c.gpu.name) == 0);
    CHECK_INT_EQ(loom_cluster_tile_gpus(&t), 0);   /* a tile has no tile */
    CHECK(loom_cluster_job_view(&c, 288, &t) && t.gpus_per_node == 72 && t.idle_per_node == 0);
    CHECK(loom_cluster_job_view(&c, 256, &t) && t.gpus_per_node == 64 && t.idle_per_node == 8);
    CHECK(!loom_cluster_job_view(&c, 128, &t));
    const struct { int64_t gpn, tile; } sizes[] = {{72, 64}, {36, 32}, {144, 128}, {8, 0},
                                                   {16, 0}, {64, 0}, {12, 0}, {6, 0}, {1, 0}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        c.gpus_per_node = sizes[i].gpn;
        CHECK_INT_EQ(loom_cluster_tile_gpus(&c), sizes[i].tile);
        CHECK(loom_cluster_tile(&c, &t) == (sizes[i].tile > 0));
    }
    CHECK_INT_EQ(loom_cluster_preset("dgx-h100-x4", &c, &err), LOOM_OK);
    CHECK(!loom_cluster_job_view(&c, 16, &t));
    CHECK(loom_cluster_job_view(&c, 32, &t) && t.gpus_per_node == 8);
}

static void calib_files(void)
{
    loom_calib a, b;
    loom_error err;
    char path[256];
    loom_calib_default(loom_device_find("H100"), &a);
    CHECK(strcmp(a.device, "H100-SXM5-80GB") == 0);
    /* Half-efficiency point: gemm_half_flops = 3 us of peak work. */
    CHECK_NEAR_REL(a.gemm_half_flops, 3e-6 * 989.4e12, 1e-12);
    CHECK_NEAR_REL(loom_calib_gemm_eff(&a, a.gemm_half_flops), a.gemm_eff_max / 2, 1e-12);
    CHECK_INT_EQ(loom_calib_validate(&a, &err), LOOM_OK);
    a.gemm_eff_max = 0.71234567890123;
    a.kernel_overhead_s = 3.25e-6;
    snprintf(a.note, sizeof a.note, "test");
    snprintf(path, sizeof path, "%s/calib.json", dir);
    CHECK_INT_EQ(loom_calib_save(path, &a, &err), LOOM_OK);
    CHECK_INT_EQ(loom_calib_load(path, &b, &err), LOOM_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);   /* exact round trip */
    /* Deterministic: saving the loaded copy gives the same bytes. */
    char path2[256];
    snprintf(path2, sizeof path2, "%s/calib2.json", dir);
    CHECK_INT_EQ(loom_calib_save(path2, &b, &err), LOOM_OK);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", path, path2);
    CHECK_INT_EQ(system(cmd), 0);

    /* A partial file keeps the device's defaults for what it omits. */
    put("partial.json", "{\"format\": \"loom-calib/1\", \"device\": \"A100-80GB\", \"mem_eff\": 0.7}",
        path, sizeof path);
    CHECK_INT_EQ(loom_calib_load(path, &b, &err), LOOM_OK);
    loom_calib_default(loom_device_find("A100-80GB"), &a);
    CHECK_NEAR_REL(b.mem_eff, 0.7, 1e-12);
    CHECK_NEAR_REL(b.gemm_eff_max, a.gemm_eff_max, 1e-12);
    CHECK_NEAR_REL(b.gemm_half_flops, 3e-6 * 312e12, 1e-12);

    put("bad_eff.json", "{\"format\": \"loom-calib/1\", \"attn_eff\": 1.5}", path, sizeof path);
    CHECK_INT_EQ(loom_calib_load(path, &b, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, "$.attn_eff");
    CHECK_STR_CONTAINS(err.msg, "1.5");
    put("zero_eff.json", "{\"format\": \"loom-calib/1\", \"mem_eff\": 0}", path, sizeof path);
    CHECK_INT_EQ(loom_calib_load(path, &b, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "(0, 1]");
    put("bad_key.json", "{\"format\": \"loom-calib/1\", \"gemm_eff\": 0.5}", path, sizeof path);
    CHECK_INT_EQ(loom_calib_load(path, &b, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "unknown field \"gemm_eff\"");
    put("bad_dev.json", "{\"format\": \"loom-calib/1\", \"device\": \"Z9\"}", path, sizeof path);
    CHECK_INT_EQ(loom_calib_load(path, &b, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "$.device");
    CHECK_STR_CONTAINS(err.msg, "H100-SXM5-80GB");

    /* An invalid calibration is refused and leaves no file behind. */
    loom_calib_default(NULL, &a);
    a.inter_link_eff = -0.5;
    snprintf(path, sizeof path, "%s/never.json", dir);
    CHECK_INT_EQ(loom_calib_save(path, &a, &err), LOOM_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "inter_link_eff");
    CHECK(access(path, F_OK) != 0);
    /* A failed write (full disk) leaves neither the file nor a temp file. */
    loom_calib_default(NULL, &a);
    loom_fileio_fail_next_write = 1;
    CHECK(loom_calib_save(path, &a, &err) != LOOM_OK);
    CHECK(access(path, F_OK) != 0);
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp", dir);
    CHECK(system(cmd) != 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/loom_test_cluster_XXXXXX");
    check_tmpdir(dir);
    devices();
    presets();
    files();
    nvlink_domains();
    nvlink_tiles();
    bad_files();
    calib_files();
    check_tmpdir_remove(dir);
    return check_done();
}
