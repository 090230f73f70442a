/*
 * model_facts.h — loom_model_facts (graph.h) read from an HF config.json and
 * written to / read from the "facts" object that loom graph files and plans
 * carry under "model".
 *
 * These are the numbers a runtime needs to build the model a config names
 * (RoPE base and scaling, norm epsilon, multi-token prediction, router
 * settings) but that loom's cost model does not depend on. Without them an
 * exported launch script silently trains another model: Megatron-LM's RoPE
 * base defaults to 10000, Llama 3 uses 500000.
 *
 * JSON form (every member optional on read, all written in this order):
 *   {"norm_eps": 1e-05, "rope_theta": 500000, "rope_scaling": "llama3",
 *    "rope_factor": 8, "rope_low_freq": 1, "rope_high_freq": 4,
 *    "rope_original_max": 8192, "yarn_beta_fast": 32, ..., "mtp_layers": 1,
 *    "router_score": "sigmoid", "router_expert_bias": true, ...}
 */
#ifndef LOOM_MODEL_FACTS_H
#define LOOM_MODEL_FACTS_H

#include <cJSON.h>
#include "base/error.h"
#include "base/json.h"
#include "graph/graph.h"

/* Reads the facts from an HF config object (c names the file). Families
 * call it after their shape fields; absent keys keep the HF defaults
 * (rope_theta 10000, norm_eps 1e-6 for Llama-style, 1e-5 for GPT-2). */
loom_status loom_model_facts_from_hf(const loom_jctx *c, const cJSON *cfg, const char *arch,
                                     loom_model_facts *f);

/* The facts as a JSON object (NULL when out of memory). */
cJSON *loom_model_facts_to_json(const loom_model_facts *f);

/* Reads a "facts" object written by loom_model_facts_to_json; sets known. */
loom_status loom_model_facts_from_json(const loom_jctx *c, const cJSON *o, const char *path,
                                       loom_model_facts *f);

#endif
