/*
 * export_serve.h — serving plans (`loom plan --mode serve`, the
 * `loom-serving/1` section of docs/plan-format.md) as what an engine
 * launches: a `vllm serve --config` YAML file or an SGLang launch_server
 * script, for the one pool of an aggregated deployment or for either pool
 * of a disaggregated one (the KV-transfer settings of each engine's P/D
 * disaggregation included). docs/export.md names the engine commits whose
 * argument definitions every emitted name was checked against.
 *
 * One instance per file: the pool's instance count is said in the file and
 * as a note (vLLM's data-parallel-size carries the replicas of an
 * aggregated dense pool; SGLang's --dp-size likewise). Settings the plan
 * modelled for another engine (memory fraction, caps) are not carried over:
 * the target engine keeps its own defaults, and a note says so.
 *
 * Units: tokens, sequences, fractions.
 */
#ifndef LOOM_EXPORT_SERVE_H
#define LOOM_EXPORT_SERVE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "base/error.h"
#include "planner/export/export.h"

typedef enum {
    LOOM_SERVE_EXPORT_VLLM,
    LOOM_SERVE_EXPORT_SGLANG,
} loom_serve_export_engine;

/* One pool of the plan's deployment. */
typedef struct {
    char role[16];              /* "both", "prefill" or "decode" */
    int64_t instances, tp, pp, ep, attn_dp, gpus_per_instance;
    int64_t max_num_seqs, max_batched_tokens, block_size;
    double mem_fraction;
} loom_serve_export_pool;

/* What the exporters need of a serving plan. */
typedef struct {
    char model[256];            /* inputs.model as given (comments only) */
    char arch[64];
    char engine[16];            /* the engine whose policy the plan modelled */
    char weights[8], kv_dtype[8];
    int64_t experts, gpus_per_node;
    int64_t max_tokens;         /* the longest request: the engines' context length */
    bool disagg, kv_nvlink;
    int32_t n_pools;
    loom_serve_export_pool pool[2];
} loom_serve_export;

/* Whether the JSON file at path is a serving plan (has a `serving`
 * member); false for anything else, unreadable files included. */
bool loom_serve_export_is_serving(const char *path);

/* Reads a serving plan; errors name the file and JSON path. */
loom_status loom_serve_export_read(const char *path, loom_serve_export *out, loom_error *err);

/* Renders pool `pool` ("prefill", "decode"; NULL for an aggregated plan's
 * only pool) for engine e into a heap string (free() it); `source` names
 * the plan in the header. Usage problems (no --pool for a disaggregated
 * plan, a pool the plan does not have) fail with LOOM_ERR_INVALID naming
 * --pool; what the engine cannot run is appended to `obstacles` and fails
 * with LOOM_ERR_UNSUPPORTED. Notes go to `notes`. Deterministic. */
loom_status loom_serve_export_render(const loom_serve_export *x, loom_serve_export_engine e,
                                     const char *pool, const char *source, char **out,
                                     loom_export_list *notes, loom_export_list *obstacles,
                                     loom_error *err);

/* The renderers (export_serve_vllm.c, export_serve_sglang.c): check then write. */
void loom_serve_export_check_vllm(const loom_serve_export *x, const loom_serve_export_pool *p,
                                  loom_export_list *obstacles);
void loom_serve_export_write_vllm(const loom_serve_export *x, const loom_serve_export_pool *p,
                                  const char *source, FILE *f, loom_export_list *notes);
void loom_serve_export_check_sglang(const loom_serve_export *x, const loom_serve_export_pool *p,
                                    loom_export_list *obstacles);
void loom_serve_export_write_sglang(const loom_serve_export *x, const loom_serve_export_pool *p,
                                    const char *source, FILE *f, loom_export_list *notes);

#endif
