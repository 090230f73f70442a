/*
 * serve_cmdline.c — vLLM and SGLang launch lines (serve_cmdline.h).
 *
 * One table per engine: the option, its aliases, whether it takes a value,
 * and what it sets (an enum: the field). Quantisation names map onto
 * loom's weight kinds: fp8 / fbgemm_fp8 / modelopt (FP8) → fp8; awq,
 * awq_marlin, gptq, gptq_marlin, marlin, w4a16 → int4; KV cache dtypes
 * fp8, fp8_e4m3, fp8_e5m2 → fp8, auto → the model's (bf16).
 */
#include "planner/import/serve_cmdline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/fileio.h"
#include "planner/import/shell_words.h"

typedef enum {
    K_IGNORE, K_MODEL, K_TP, K_PP, K_DP, K_EP, K_DP_ATTN, K_EXPERT_PAR, K_QUANT, K_KV,
    K_SEQS, K_TOKENS, K_BLOCK, K_MEM, K_LEN, K_GRAPH_BS, K_STEPS, K_NO_OVERLAP, K_OVERLAP, K_EAGER, K_CHUNKED, K_NO_CHUNKED,
    K_MIXED, K_DTYPE,
} field_t;

typedef struct {
    const char *name;
    bool value;   /* takes a value */
    field_t f;
} opt_t;

/* vLLM (vllm/engine/arg_utils.py, v0.8–0.10). */
static const opt_t vllm_opts[] = {
    {"--model", true, K_MODEL},
    {"--tensor-parallel-size", true, K_TP}, {"-tp", true, K_TP},
    {"--pipeline-parallel-size", true, K_PP}, {"-pp", true, K_PP},
    {"--data-parallel-size", true, K_DP}, {"-dp", true, K_DP},
    {"--enable-expert-parallel", false, K_EXPERT_PAR},
    {"--quantization", true, K_QUANT}, {"-q", true, K_QUANT},
    {"--kv-cache-dtype", true, K_KV},
    {"--max-num-seqs", true, K_SEQS},
    {"--max-num-batched-tokens", true, K_TOKENS},
    {"--block-size", true, K_BLOCK},
    {"--gpu-memory-utilization", true, K_MEM},
    {"--max-model-len", true, K_LEN},
    {"--enforce-eager", false, K_EAGER},
    {"--enable-chunked-prefill", false, K_CHUNKED},
    {"--no-enable-chunked-prefill", false, K_NO_CHUNKED},
    {"--dtype", true, K_DTYPE},
    /* accepted, no effect on the model */
    {"--host", true, K_IGNORE}, {"--port", true, K_IGNORE}, {"--api-key", true, K_IGNORE},
    {"--served-model-name", true, K_IGNORE}, {"--tokenizer", true, K_IGNORE},
    {"--trust-remote-code", false, K_IGNORE}, {"--download-dir", true, K_IGNORE},
    {"--seed", true, K_IGNORE}, {"--swap-space", true, K_IGNORE},
    {"--disable-log-requests", false, K_IGNORE}, {"--disable-log-stats", false, K_IGNORE},
    {"--enable-prefix-caching", false, K_IGNORE}, {"--no-enable-prefix-caching", false, K_IGNORE},
    {"--distributed-executor-backend", true, K_IGNORE}, {"--uvicorn-log-level", true, K_IGNORE},
    {"--max-seq-len-to-capture", true, K_IGNORE}, {"--compilation-config", true, K_IGNORE},
    {"-O", true, K_IGNORE}, {"--async-scheduling", false, K_OVERLAP},
    {"--load-format", true, K_IGNORE}, {"--revision", true, K_IGNORE},
    {"--tokenizer-mode", true, K_IGNORE}, {"--max-log-len", true, K_IGNORE},
    {"--num-scheduler-steps", true, K_STEPS}, {"--disable-custom-all-reduce", false, K_IGNORE},
    {"--generation-config", true, K_IGNORE}, {"--chat-template", true, K_IGNORE},
    {NULL, false, K_IGNORE},
};

/* SGLang (python/sglang/srt/server_args.py, v0.4.x). */
static const opt_t sglang_opts[] = {
    {"--model-path", true, K_MODEL}, {"--model", true, K_MODEL},
    {"--tp", true, K_TP}, {"--tp-size", true, K_TP}, {"--tensor-parallel-size", true, K_TP},
    {"--pp", true, K_PP}, {"--pp-size", true, K_PP},
    {"--dp", true, K_DP}, {"--dp-size", true, K_DP}, {"--data-parallel-size", true, K_DP},
    {"--ep", true, K_EP}, {"--ep-size", true, K_EP}, {"--expert-parallel-size", true, K_EP},
    {"--enable-dp-attention", false, K_DP_ATTN},
    {"--enable-ep-moe", false, K_EXPERT_PAR},
    {"--quantization", true, K_QUANT},
    {"--kv-cache-dtype", true, K_KV},
    {"--max-running-requests", true, K_SEQS},
    {"--chunked-prefill-size", true, K_TOKENS},
    {"--page-size", true, K_BLOCK},
    {"--mem-fraction-static", true, K_MEM},
    {"--context-length", true, K_LEN},
    {"--cuda-graph-max-bs", true, K_GRAPH_BS},
    {"--disable-cuda-graph", false, K_EAGER},
    {"--enable-mixed-chunk", false, K_MIXED},
    {"--dtype", true, K_DTYPE},
    {"--host", true, K_IGNORE}, {"--port", true, K_IGNORE}, {"--api-key", true, K_IGNORE},
    {"--served-model-name", true, K_IGNORE}, {"--tokenizer-path", true, K_IGNORE},
    {"--trust-remote-code", false, K_IGNORE}, {"--disable-radix-cache", false, K_IGNORE},
    {"--log-level", true, K_IGNORE}, {"--random-seed", true, K_IGNORE},
    {"--enable-torch-compile", false, K_IGNORE}, {"--attention-backend", true, K_IGNORE},
    {"--schedule-policy", true, K_IGNORE}, {"--max-prefill-tokens", true, K_IGNORE},
    {"--enable-metrics", false, K_IGNORE}, {"--load-format", true, K_IGNORE},
    {"--disable-overlap-schedule", false, K_NO_OVERLAP}, {"--nnodes", true, K_IGNORE},
    {"--node-rank", true, K_IGNORE}, {"--dist-init-addr", true, K_IGNORE},
    {"--enable-deepep-moe", false, K_IGNORE}, {"--moe-a2a-backend", true, K_IGNORE},
    {NULL, false, K_IGNORE},
};

static bool is_launch(const loom_sh_command *c, loom_engine_kind engine, int *first_opt)
{
    for (int i = 0; i < c->n_words; i++) {
        const char *w = c->words[i].text;
        if (engine == LOOM_ENGINE_VLLM) {
            if ((strcmp(w, "vllm") == 0 || (strlen(w) > 5 && !strcmp(w + strlen(w) - 5, "/vllm"))) &&
                i + 1 < c->n_words && strcmp(c->words[i + 1].text, "serve") == 0) {
                *first_opt = i + 2;
                return true;
            }
            if (strstr(w, "vllm.entrypoints")) {
                *first_opt = i + 1;
                return true;
            }
        } else if (strstr(w, "sglang.launch_server") ||
                   (strcmp(w, "sglang") == 0 && i + 1 < c->n_words &&
                    strcmp(c->words[i + 1].text, "serve") == 0)) {
            *first_opt = i + (strcmp(w, "sglang") == 0 ? 2 : 1);
            return true;
        }
    }
    return false;
}

static loom_status num_of(const char *src, int line, const char *opt, const char *v, double lo,
                          double hi, double *out, loom_error *err)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= lo && x <= hi))
        return loom_error_set(err, LOOM_ERR_INVALID, "%s:%d: %s expects a number in [%g, %g], "
                              "found '%s'", src, line, opt, lo, hi, v);
    *out = x;
    return LOOM_OK;
}

static loom_status set(const char *src, int line, const opt_t *o, const char *name, const char *v,
                       loom_serve_launch *l, loom_error *err)
{
    double x = 0;
    loom_status s = LOOM_OK;
    int64_t *ints[] = {[K_TP] = &l->tp, [K_PP] = &l->pp, [K_DP] = &l->dp, [K_EP] = &l->ep,
                       [K_SEQS] = &l->max_num_seqs, [K_TOKENS] = &l->max_batched_tokens,
                       [K_BLOCK] = &l->block_size, [K_LEN] = &l->max_model_len,
                       [K_GRAPH_BS] = &l->cuda_graph_max_bs, [K_STEPS] = &l->scheduler_steps};
    switch (o->f) {
    case K_IGNORE: case K_DTYPE: break;
    case K_MODEL: snprintf(l->model, sizeof l->model, "%s", v); break;
    case K_TP: case K_PP: case K_DP: case K_EP: case K_SEQS: case K_TOKENS: case K_BLOCK:
    case K_LEN: case K_GRAPH_BS: case K_STEPS:
        if ((s = num_of(src, line, name, v, o->f == K_GRAPH_BS ? 0 : 1,
                        o->f == K_STEPS ? 1024 : 1 << 26, &x, err)))
            return s;
        if (x != (double)(int64_t)x)
            return loom_error_set(err, LOOM_ERR_INVALID, "%s:%d: %s expects an integer, found '%s'",
                                  src, line, name, v);
        *ints[o->f] = (int64_t)x;
        break;
    case K_MEM:
        if ((s = num_of(src, line, name, v, 0.01, 1, &l->mem_fraction, err))) return s;
        break;
    case K_DP_ATTN: l->dp_attention = true; break;
    case K_EXPERT_PAR: l->expert_parallel = true; break;
    case K_EAGER: l->eager = true; break;
    case K_CHUNKED: break;
    case K_NO_CHUNKED: l->no_chunked_prefill = true; break;
    case K_MIXED: l->mixed_chunk = true; break;
    case K_NO_OVERLAP: l->no_overlap = true; break;
    case K_OVERLAP: l->overlap = true; break;
    case K_QUANT: {
        static const char *const fp8[] = {"fp8", "fbgemm_fp8", "modelopt", "modelopt_fp8",
                                          "w8a8_fp8", "compressed-tensors", NULL};
        static const char *const int4[] = {"awq", "awq_marlin", "gptq", "gptq_marlin", "marlin",
                                           "w4a16", "int4", NULL};
        for (int i = 0; fp8[i]; i++)
            if (!strcasecmp(v, fp8[i])) snprintf(l->weights, sizeof l->weights, "fp8");
        for (int i = 0; int4[i]; i++)
            if (!strcasecmp(v, int4[i])) snprintf(l->weights, sizeof l->weights, "int4");
        if (!l->weights[0])
            return loom_error_set(err, LOOM_ERR_UNSUPPORTED,
                                  "%s:%d: %s %s: loom models fp8 (fp8, fbgemm_fp8, modelopt) and "
                                  "int4 weight-only (awq, gptq, marlin) quantisation",
                                  src, line, name, v);
        break;
    }
    case K_KV:
        if (!strncasecmp(v, "fp8", 3)) snprintf(l->kv_dtype, sizeof l->kv_dtype, "fp8");
        else if (!strcasecmp(v, "auto") || !strcasecmp(v, "bf16") || !strcasecmp(v, "bfloat16"))
            snprintf(l->kv_dtype, sizeof l->kv_dtype, "bf16");
        else
            return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "%s:%d: %s %s: expected auto, bf16 "
                                  "or fp8 (fp8_e4m3, fp8_e5m2)", src, line, name, v);
        break;
    }
    return LOOM_OK;
}

static loom_status parse_text(const char *src, const char *text, loom_engine_kind engine,
                              loom_serve_launch *l, loom_error *err)
{
    loom_sh_script *sh = NULL;
    loom_status s = loom_sh_parse(src, text, &sh, err);
    if (s) return s;
    const opt_t *table = engine == LOOM_ENGINE_SGLANG ? sglang_opts : vllm_opts;
    const char *ename = engine == LOOM_ENGINE_SGLANG ? "SGLang" : "vLLM";
    const loom_sh_command *c = NULL;
    int i = 0;
    for (int k = 0; k < loom_sh_command_count(sh) && !c; k++)
        if (is_launch(loom_sh_command_at(sh, k), engine, &i)) c = loom_sh_command_at(sh, k);
    if (!c) {
        s = loom_error_set(err, LOOM_ERR_PARSE, "%s: no %s launch found (expected %s)", src, ename,
                           engine == LOOM_ENGINE_SGLANG
                               ? "'python -m sglang.launch_server --model-path M …'"
                               : "'vllm serve MODEL …' or 'python -m vllm.entrypoints.openai.api_server …'");
        goto done;
    }
    for (; i < c->n_words; i++) {
        const loom_sh_word *w = &c->words[i];
        char name[128];
        const char *eq = strchr(w->text, '=');
        const char *v = NULL;
        if (w->text[0] != '-') {   /* vLLM's positional MODEL */
            if (engine == LOOM_ENGINE_VLLM && !l->model[0]) {
                snprintf(l->model, sizeof l->model, "%s", w->text);
                continue;
            }
            s = loom_error_set(err, LOOM_ERR_PARSE, "%s:%d: unexpected argument '%s'", src,
                               w->line, w->text);
            goto done;
        }
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - w->text) : (int)strlen(w->text), w->text);
        /* --opt_name and --opt-name are the same option to argparse-based engines */
        for (char *p = name + 2; *p; p++)
            if (*p == '_') *p = '-';
        const opt_t *o = NULL;
        for (int k = 0; table[k].name && !o; k++)
            if (!strcmp(table[k].name, name)) o = &table[k];
        /* argparse also takes an unambiguous abbreviation ("--tensor" for
         * --tensor-parallel-size in SGLang's own vLLM benchmark line) */
        size_t nl = strlen(name);
        for (int k = 0; table[k].name && !o && nl >= 6; k++)
            if (!strncmp(table[k].name, name, nl)) {
                const opt_t *hit = &table[k];
                for (int j = k + 1; table[j].name && hit; j++)
                    if (!strncmp(table[j].name, name, nl) && table[j].f != hit->f) hit = NULL;
                o = hit;
                break;
            }
        if (!o) {
            s = loom_error_set(err, LOOM_ERR_UNSUPPORTED, "%s:%d: unknown %s option '%s' (loom "
                               "reads the options that shape the deployment; see docs)",
                               src, w->line, ename, name);
            goto done;
        }
        if (o->value) {
            if (eq) v = eq + 1;
            else if (i + 1 < c->n_words) v = c->words[++i].text;
            else {
                s = loom_error_set(err, LOOM_ERR_PARSE, "%s:%d: %s needs a value", src, w->line, name);
                goto done;
            }
            if (c->words[i].unresolved && o->f != K_IGNORE) {
                s = loom_error_set(err, LOOM_ERR_INVALID, "%s:%d: %s %s cannot be known without "
                                   "running the script", src, w->line, name, c->words[i].raw);
                goto done;
            }
        }
        if ((s = set(src, w->line, o, name, v ? v : "", l, err))) goto done;
    }
done:
    loom_sh_destroy(sh);
    return s;
}

loom_status loom_serve_launch_read(const char *flag, const char *arg, loom_engine_kind engine,
                                   loom_serve_launch *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    out->engine = engine;
    const char *path = arg[0] == '@' ? arg + 1 : arg;
    bool is_file = arg[0] == '@';
    if (!is_file && !strchr(arg, '\n') && !strchr(arg, ' ')) {
        FILE *f = fopen(arg, "r");
        if (f) {
            fclose(f);
            is_file = true;
        }
    }
    if (!is_file) return parse_text(flag, arg, engine, out, err);
    char *text = NULL;
    size_t len = 0;
    loom_status s = loom_read_file(path, 1 << 22, &text, &len, err);
    if (s) return s;
    if (strlen(text) != len) {
        free(text);
        return loom_error_set(err, LOOM_ERR_PARSE, "%s: not a text file (NUL byte)", path);
    }
    s = parse_text(path, text, engine, out, err);
    free(text);
    return s;
}

void loom_serve_launch_apply(const loom_serve_launch *l, loom_serve_engine *e)
{
    if (l->scheduler_steps > 1)
        loom_serve_engine_multi_step(e, (int32_t)l->scheduler_steps, l->max_model_len);
    if (l->max_num_seqs) e->max_num_seqs = l->max_num_seqs;
    if (l->max_batched_tokens) e->max_batched_tokens = l->max_batched_tokens;
    if (l->block_size) e->block_size = l->block_size;
    if (l->mem_fraction > 0) e->mem_fraction = l->mem_fraction;
    if (l->cuda_graph_max_bs) e->cuda_graph_max_bs = l->cuda_graph_max_bs;
    if (l->eager) e->cuda_graph_max_bs = 0, e->cuda_graph_count = 0;
    if (l->no_chunked_prefill) e->chunked_prefill = false;
    if (l->mixed_chunk) e->mixed_batches = true;
    if (l->no_overlap) e->overlap_host = false;
    if (l->overlap) e->overlap_host = true;
}
