/*
 * serve_choices.h — the serving options' value tables, shared by
 * `loom eval --mode serve` (cmd_eval_serve.c) and `loom plan --mode serve`
 * (cmd_plan_serve.c) so both accept the same words for the same things.
 */
#ifndef LOOM_CLI_SERVE_CHOICES_H
#define LOOM_CLI_SERVE_CHOICES_H

#include <stdbool.h>
#include "planner/cli/options.h"

extern const loom_cli_choice loom_serve_engine_choices[];   /* --engine */
extern const loom_cli_choice loom_serve_weight_choices[];   /* --weights */
extern const loom_cli_choice loom_serve_kv_choices[];       /* --kv-dtype */
extern const loom_cli_choice loom_serve_dist_choices[];     /* --len-dist */
extern const loom_cli_choice loom_serve_frontend_choices[]; /* --frontend */
extern const loom_cli_choice loom_serve_client_choices[];   /* --client */

/* --frontend nim and --trt-engine run TensorRT-LLM: nim picks it when
 * --engine was not given; either one with another engine is a usage error,
 * said on stderr as `loom CMD: …`. Returns false on that error. */
bool loom_cli_serve_runtime_check(const char *cmd, int frontend, bool trt_engine,
                                  bool engine_given, int *engine);

/* The checkpoint's own quantisation, which the engines load without a flag
 * (config.json "quantization_config": DeepSeek-V3 ships FP8, AWQ/GPTQ
 * checkpoints int4, gpt-oss mxfp4; NVIDIA's ModelOpt checkpoints say
 * "quant_method": "modelopt" with "quant_algo" FP8 or NVFP4). path: a
 * config.json; false (out untouched) when it states none loom reads. */
bool loom_cli_checkpoint_weights(const char *path, int *out);

#endif
