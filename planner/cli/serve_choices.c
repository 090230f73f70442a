/*
 * serve_choices.c — the serving options' value tables (serve_choices.h).
 * Aliases (the last field true) are accepted but not listed in --help.
 */
#include "planner/cli/serve_choices.h"

#include "costs/serve/engine.h"
#include "costs/serve/shape.h"
#include "costs/serve/workload.h"

#include <stdio.h>
#include <string.h>
#include <cJSON.h>
#include "base/json.h"

const loom_cli_choice loom_serve_engine_choices[] = {{"vllm", LOOM_ENGINE_VLLM, false},
                                                     {"sglang", LOOM_ENGINE_SGLANG, false},
                                                     {"trtllm", LOOM_ENGINE_TRTLLM, false},
                                                     {"tensorrt-llm", LOOM_ENGINE_TRTLLM, true},
                                                     {NULL, 0, false}};
const loom_cli_choice loom_serve_weight_choices[] = {
    {"bf16", LOOM_WEIGHTS_BF16, false}, {"fp8", LOOM_WEIGHTS_FP8, false},
    {"int4", LOOM_WEIGHTS_INT4, false}, {"mxfp4", LOOM_WEIGHTS_MXFP4, false},
    {"nvfp4", LOOM_WEIGHTS_NVFP4, false},
    {"fp16", LOOM_WEIGHTS_BF16, true},
    {"awq", LOOM_WEIGHTS_INT4, true},   {"gptq", LOOM_WEIGHTS_INT4, true},
    {NULL, 0, false}};
const loom_cli_choice loom_serve_kv_choices[] = {{"bf16", LOOM_DTYPE_BF16, false},
                                                 {"fp8", LOOM_DTYPE_FP8, false},
                                                 {"fp16", LOOM_DTYPE_BF16, true},
                                                 {"auto", LOOM_DTYPE_BF16, true},
                                                 {NULL, 0, false}};
const loom_cli_choice loom_serve_frontend_choices[] = {{"server", LOOM_FRONTEND_ENGINE, false},
                                                       {"nim", LOOM_FRONTEND_NIM, false},
                                                       {"none", LOOM_FRONTEND_NONE, false},
                                                       {NULL, 0, false}};
const loom_cli_choice loom_serve_client_choices[] = {{"python", LOOM_CLIENT_PYTHON, false},
                                                     {"parallel", LOOM_CLIENT_PARALLEL, false},
                                                     {"users", LOOM_CLIENT_USERS, false},
                                                     {"genai-perf", LOOM_CLIENT_PARALLEL, true},
                                                     {"aiperf", LOOM_CLIENT_PARALLEL, true},
                                                     {NULL, 0, false}};
const loom_cli_choice loom_serve_dist_choices[] = {{"fixed", LOOM_LEN_FIXED, false},
                                                   {"uniform", LOOM_LEN_UNIFORM, false},
                                                   {"lognormal", LOOM_LEN_LOGNORMAL, false},
                                                   {NULL, 0, false}};

bool loom_cli_serve_runtime_check(const char *cmd, int frontend, bool trt_engine,
                                  bool engine_given, int *engine)
{
    if (frontend == LOOM_FRONTEND_NIM && !engine_given) *engine = LOOM_ENGINE_TRTLLM;
    if ((frontend == LOOM_FRONTEND_NIM || trt_engine) && *engine != LOOM_ENGINE_TRTLLM) {
        fprintf(stderr, "loom %s: %s runs TensorRT-LLM, not %s: use --engine trtllm\n", cmd,
                trt_engine ? "--trt-engine" : "--frontend nim",
                loom_engine_name((loom_engine_kind)*engine));
        return false;
    }
    return true;
}

bool loom_cli_checkpoint_weights(const char *path, int *out)
{
    cJSON *root = NULL;
    loom_error ignore;
    if (loom_json_parse_file(path, &root, &ignore)) return false;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    const cJSON *m = q ? cJSON_GetObjectItemCaseSensitive(q, "quant_method") : NULL;
    const cJSON *algo = q ? cJSON_GetObjectItemCaseSensitive(q, "quant_algo") : NULL;
    loom_serve_weights w = LOOM_WEIGHTS_BF16;
    bool found = false;
    if (cJSON_IsString(m) && !strcmp(m->valuestring, "modelopt") && cJSON_IsString(algo))
        found = loom_serve_weights_parse(algo->valuestring, &w);
    else if (cJSON_IsString(m))
        found = loom_serve_weights_parse(m->valuestring, &w);
    cJSON_Delete(root);
    if (found) *out = (int)w;
    return found;
}
