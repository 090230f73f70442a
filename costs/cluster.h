/*
 * cluster.h — a GPU cluster: nodes × GPUs per node, the device, and the two
 * links the collectives run over (docs/design.md §4).
 *
 * A cluster comes from a built-in preset name or a "loom-cluster/1" JSON file
 * (docs/cluster-format.md). Presets (N = number of nodes, 8 GPUs per node):
 *   dgx-a100-80g-xN  A100-SXM4-80GB, NVLink3 300 GB/s/dir, 200 Gb/s HDR NIC per GPU
 *   dgx-a100-40g-xN  A100-SXM4-40GB, same fabric
 *   dgx-h100-xN      H100-SXM5-80GB, NVLink4 450 GB/s/dir, 400 Gb/s NDR NIC per GPU
 *   dgx-h200-xN      H200-SXM-141GB, as H100
 *   dgx-b200-xN      B200, NVLink5 900 GB/s/dir, 400 Gb/s NIC per GPU
 *   dgx1-v100-xN     V100-SXM2-16GB, NVLink2, 4 × 100 Gb/s EDR per 8 GPUs
 *
 * Links are per direction, per GPU: `intra` is what one GPU can push to its
 * peers inside a node (NVLink), `inter` what it can push to other nodes (its
 * share of the NICs). Bandwidth in bytes/s, latency in seconds.
 */
#ifndef LOOM_CLUSTER_H
#define LOOM_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "costs/device.h"
#include "base/error.h"
#include "base/limits.h"

typedef struct {
    double bandwidth_Bps;   /* per direction, per GPU */
    double latency_s;       /* per message step (alpha) */
} loom_link;

typedef struct {
    char name[64];
    int64_t nodes, gpus_per_node;
    loom_device gpu;
    loom_link intra, inter;                  /* NVLink inside a node; NIC per GPU across nodes */
    bool intra_given;         /* a file's "intra_node" was written (else the device's NVLink,
                                 or PCIe for a device without) */
    double price_per_gpu_hour_usd, power_w;  /* 0 when not given; power_w per GPU */
    double memory_headroom;   /* HBM a plan must leave free: a fraction of it when < 1,
                                 else GiB; 0 = none. Presets and files default to
                                 LOOM_CLUSTER_DEFAULT_HEADROOM ("memory_headroom") */
    int64_t idle_per_node;    /* GPUs of each node this value leaves idle: 0, except in a
                                 tile view (loom_cluster_tile), where a node's GPUs are
                                 gpus_per_node + idle_per_node */
} loom_cluster;

/* 5% of HBM (4 GiB of 80) beyond the modelled workspace and fragmentation
 * (memory.h): what the PyTorch caching allocator's growth, NCCL's
 * lazily created communicators and memory-use spikes (the loss's fp32
 * logits, checkpoint saves) take in practice; plans that sat at 78-79.5 of
 * 80 GiB OOM'd. */
#define LOOM_CLUSTER_DEFAULT_HEADROOM 0.05

/* Bytes of HBM a plan may use: hbm_bytes minus the headroom. */
int64_t loom_cluster_usable_bytes(const loom_cluster *c);
/* The HBM a GPU would need for `bytes` to be usable under this cluster's
 * headroom (the inverse of loom_cluster_usable_bytes): what "it would fit with
 * GPUs of at least N GiB" quotes. */
int64_t loom_cluster_hbm_for_usable(const loom_cluster *c, int64_t bytes);

#define LOOM_CLUSTER_FORMAT "loom-cluster/1"
#define LOOM_CLUSTER_MAX_NODES LOOM_MAX_NODES                   /* base/limits.h */
#define LOOM_CLUSTER_MAX_GPUS_PER_NODE LOOM_MAX_GPUS_PER_NODE
#define LOOM_CLUSTER_MAX_GPUS LOOM_MAX_GPUS                     /* nodes x GPUs per node */

/* A preset name (see above; N >= 1) or a loom-cluster/1 file. A name that is
 * neither gets an error listing the preset patterns. */
loom_status loom_cluster_load(const char *name_or_path, loom_cluster *out, loom_error *err);

/* Fills out from a preset name; LOOM_ERR_INVALID when the name is not one. */
loom_status loom_cluster_preset(const char *name, loom_cluster *out, loom_error *err);
/* True when name has the form of a preset ("dgx-h100-x16"). */
bool loom_cluster_is_preset_name(const char *name);
/* The presets' names before "-xN" ("dgx-h100"), i < loom_cluster_preset_count();
 * NULL past the end. For listings and "did you mean" suggestions. */
size_t loom_cluster_preset_count(void);
const char *loom_cluster_preset_prefix(size_t i);

/* Reads a loom-cluster/1 file (cluster_json.c); errors name the file and the
 * JSON path. */
loom_status loom_cluster_load_file(const char *path, loom_cluster *out, loom_error *err);
/* Parses loom-cluster/1 text; `file` is used in messages. */
loom_status loom_cluster_parse(const char *file, const char *text, size_t len, loom_cluster *out,
                               loom_error *err);

/* nodes × gpus_per_node. */
int64_t loom_cluster_gpus(const loom_cluster *c);

/* ---- power-of-two tiles of an NVLink domain ----------------------------------
 *
 * Heads, query groups and experts come in powers of two, so a tensor- or
 * expert-parallel group is 2^k GPUs, and a group stays on NVLink only when
 * it stays inside a node (an NVLink domain: 72 GPUs on GB200 NVL72). A
 * domain of 72 = 8 · 9 GPUs tiles into groups of 8 at most: 16, 32 and 64
 * do not divide it. The tile of such a node is its largest power of two
 * (64 of 72): a job that wants TP or EP groups of 16, 32 or 64 inside the
 * domain runs on the tile of every domain and leaves the rest idle (two
 * trays of four on NVL72). The tile view is an ordinary cluster of nodes of
 * tile GPUs (so every cost, placement and plan reads it unchanged) with
 * idle_per_node saying what it leaves out; GPU ids in it number the GPUs in
 * use: node · tile + k is GPU k < tile of that node. */

/* The tile of c's nodes: the largest power of two below gpus_per_node when
 * that is not a power of two and the tile exceeds 8 GPUs (the groups an
 * 8-GPU board already has); 0 when c has none (every 8-GPU box, and nodes
 * of 16, 32 or 64, which are their own tile). */
int64_t loom_cluster_tile_gpus(const loom_cluster *c);

/* The tile view of c: nodes × tile GPUs, idle_per_node = the rest, the same
 * name, device and links. False (out untouched) when c has no tile. */
bool loom_cluster_tile(const loom_cluster *c, loom_cluster *out);

/* The cluster a job of `gpus` GPUs runs on: c itself when gpus is all of
 * them, its tile view when gpus = nodes × tile. False otherwise. */
bool loom_cluster_job_view(const loom_cluster *c, int64_t gpus, loom_cluster *out);

#endif
