/*
 * limits.h — the one set of size limits loom accepts, checked where the
 * input is read, so that the search's work is bounded before it starts.
 *
 * The sizes a user gives (cluster, model, batch) drive the search's cost:
 * it enumerates meshes over the GPUs of a node and pipeline splits over the
 * nodes and layers, so these bounds are what keep a plan within minutes.
 * Readers refuse more with an error naming the file and field; the plan
 * checker uses the same numbers, so nothing accepted at the door is refused
 * after a long search. The bounds are far above any machine or model built
 * so far (the largest training runs: ~10^5 GPUs, ~10^2 layers, 10^6 tokens).
 *
 * The JSON readers (base/json.h) bound the bytes they read and the values
 * they build (cJSON spends about 64 bytes per value, plus its strings), per
 * kind of file, so that a big unused array costs an error, not gigabytes;
 * docs/robustness.md lists them.
 */
#ifndef LOOM_BASE_LIMITS_H
#define LOOM_BASE_LIMITS_H

#include <stddef.h>
#include <stdint.h>

/* ---- cluster and model sizes ------------------------------------------------ */
#define LOOM_MAX_NODES         65536                  /* nodes of a cluster */
#define LOOM_MAX_GPUS_PER_NODE 1024                   /* GPUs of one node */
#define LOOM_MAX_GPUS          ((int64_t)1 << 20)     /* nodes x GPUs per node */
#define LOOM_MAX_LAYERS        100000                 /* transformer blocks */
#define LOOM_MAX_SEQ           ((int64_t)1 << 24)     /* tokens per sequence */
#define LOOM_MAX_BATCH         ((int64_t)1 << 30)     /* sequences per global batch */

/* One model dimension, as a config or a launch line states it. Each is about
 * 50 times the largest in a published model (hidden 18,432, FFN 73,728,
 * vocabulary 262,208, 384 experts), so that a typo or a unit slip is named by
 * its field instead of overflowing a product later. */
#define LOOM_MAX_WIDTH         ((int64_t)1 << 20)     /* hidden size, heads, head dims, LoRA ranks */
#define LOOM_MAX_FFN           ((int64_t)1 << 22)     /* MLP and expert widths (4 x the width) */
#define LOOM_MAX_VOCAB         ((int64_t)1 << 24)     /* vocabulary */
#define LOOM_MAX_EXPERTS       ((int64_t)1 << 16)     /* routed experts, and top-k */
/* The whole model: 2^50 = 1.1e15 parameters, 1,000 times the largest
 * published (DeepSeek-V3 671e9, Kimi K2 1.04e12); dimensions each within
 * their bound can still multiply past it, and then the reader names them. */
#define LOOM_MAX_PARAMS        ((double)((int64_t)1 << 50))

/* ---- JSON files: bytes read, values built ------------------------------------ */
typedef struct {
    size_t max_bytes;    /* file size */
    size_t max_values;   /* JSON values (scalars, arrays, objects, members) */
} loom_json_limits;

#define LOOM_JSON_LIMITS_HF_CONFIG ((loom_json_limits){(size_t)1 << 20, (size_t)1 << 16})
#define LOOM_JSON_LIMITS_GRAPH     ((loom_json_limits){(size_t)256 << 20, (size_t)16 << 20})
#define LOOM_JSON_LIMITS_CLUSTER   ((loom_json_limits){(size_t)1 << 20, (size_t)1 << 16})
#define LOOM_JSON_LIMITS_PLAN      ((loom_json_limits){(size_t)64 << 20, (size_t)4 << 20})
#define LOOM_JSON_LIMITS_PROFILE   ((loom_json_limits){(size_t)64 << 20, (size_t)4 << 20})
#define LOOM_JSON_LIMITS_CALIB     ((loom_json_limits){(size_t)1 << 20, (size_t)1 << 16})
#define LOOM_JSON_LIMITS_RECORDS   ((loom_json_limits){(size_t)16 << 20, (size_t)1 << 20})
#define LOOM_JSON_LIMITS_REPORT    ((loom_json_limits){(size_t)64 << 20, (size_t)4 << 20})
#define LOOM_JSON_LIMITS_DEFAULT   ((loom_json_limits){(size_t)256 << 20, (size_t)16 << 20})

#endif
