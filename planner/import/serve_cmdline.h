/*
 * serve_cmdline.h — the serving configuration of a vLLM or SGLang launch
 * line (`loom eval --from-vllm "vllm serve MODEL -tp 8 …"`, `--from-sglang
 * "python -m sglang.launch_server --model-path M --tp 8 …"`), read with the
 * bash word rules of shell_words.h: the text, @FILE or a script path.
 *
 * The command is the first one that runs the engine (`vllm serve`,
 * `python -m vllm.entrypoints.openai.api_server`, `sglang.launch_server`,
 * `python -m sglang.launch_server`); its options are matched against a
 * table per engine. Options that change the model of the instance are read
 * (parallel degrees, quantisation, KV dtype, caps, token budget, block size,
 * memory fraction, context length); options that do not (ports, logging,
 * tokenizer, prefix caching) are accepted and ignored; anything else is an
 * error naming the line and the option, so a typo cannot silently change
 * the answer.
 *
 * Units: as the engines' flags.
 */
#ifndef LOOM_SERVE_CMDLINE_H
#define LOOM_SERVE_CMDLINE_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "costs/serve/engine.h"

typedef struct {
    loom_engine_kind engine;
    char model[256];             /* the model the line serves (HF id or path; "" = none) */
    int64_t tp, pp, dp, ep;      /* 0 = not stated */
    bool dp_attention;           /* SGLang --enable-dp-attention */
    bool expert_parallel;        /* vLLM --enable-expert-parallel, SGLang --enable-ep-moe */
    char weights[16];            /* "fp8", "int4", "bf16" or "" (not stated) */
    char kv_dtype[16];           /* "fp8", "bf16" or "" */
    int64_t max_num_seqs, max_batched_tokens, block_size, max_model_len, cuda_graph_max_bs;
    double mem_fraction;         /* 0 = not stated */
    bool eager;                  /* --enforce-eager / --disable-cuda-graph */
    bool no_chunked_prefill;     /* chunked prefill turned off */
    bool mixed_chunk;            /* SGLang --enable-mixed-chunk */
    bool no_overlap;             /* SGLang --disable-overlap-schedule */
    bool overlap;                /* vLLM --async-scheduling: V1 schedules the next step
                                    while the GPU runs this one (engine.h overlap_host) */
    int64_t scheduler_steps;     /* vLLM V0 --num-scheduler-steps (0 = not stated) */
} loom_serve_launch;

/* Reads `arg` (the line, @FILE or a script path) as a launch of `engine`
 * (VLLM or SGLANG). `flag` names the CLI option in messages. */
loom_status loom_serve_launch_read(const char *flag, const char *arg, loom_engine_kind engine,
                                   loom_serve_launch *out, loom_error *err);

/* Applies the line's stated settings over engine defaults e. */
void loom_serve_launch_apply(const loom_serve_launch *l, loom_serve_engine *e);

#endif
