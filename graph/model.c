/*
 * model.c — model sources: from a model file, parsed once, to finalized
 * graphs (model.h).
 *
 * A file is recognised by content, never by its name: a "format" member
 * selects a loom format (only "loom-graph/1" is a model); otherwise an
 * "architectures" list or a "model_type" string selects an HF family. The
 * table below is the single list of supported HF architectures; error
 * messages and `loom inspect --help` print it.
 */
#include "graph/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_json.h"
#include "graph/hf_build.h"
#include "base/json.h"
#include "base/fileio.h"

typedef enum { FAM_GPT2, FAM_LLAMA, FAM_DEEPSEEK } family;

static const struct {
    const char *hf_arch;      /* config.json "architectures"[i] */
    const char *model_type;   /* config.json "model_type" */
    family fam;
} families[] = {
    {"GPT2LMHeadModel", "gpt2", FAM_GPT2},
    {"LlamaForCausalLM", "llama", FAM_LLAMA},
    {"MistralForCausalLM", "mistral", FAM_LLAMA},
    {"Qwen2ForCausalLM", "qwen2", FAM_LLAMA},
    {"MixtralForCausalLM", "mixtral", FAM_LLAMA},
    {"Qwen2MoeForCausalLM", "qwen2_moe", FAM_LLAMA},
    {"Qwen3ForCausalLM", "qwen3", FAM_LLAMA},
    {"Qwen3MoeForCausalLM", "qwen3_moe", FAM_LLAMA},
    {"Phi3ForCausalLM", "phi3", FAM_LLAMA},
    {"Gemma2ForCausalLM", "gemma2", FAM_LLAMA},
    {"Gemma3ForCausalLM", "gemma3_text", FAM_LLAMA},
    {"Gemma3ForConditionalGeneration", "gemma3", FAM_LLAMA},
    {"Llama4ForCausalLM", "llama4_text", FAM_LLAMA},
    {"Llama4ForConditionalGeneration", "llama4", FAM_LLAMA},
    {"GptOssForCausalLM", "gpt_oss", FAM_LLAMA},
    {"Glm4MoeForCausalLM", "glm4_moe", FAM_LLAMA},
    {"DeepseekV2ForCausalLM", "deepseek_v2", FAM_DEEPSEEK},
    {"DeepseekV3ForCausalLM", "deepseek_v3", FAM_DEEPSEEK},
};
#define N_FAMILIES (sizeof families / sizeof families[0])

void loom_model_opts_init(loom_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seq = 2048;
    o->batch = 1;
    o->dtype = LOOM_DTYPE_BF16;
    o->flash_attention = true;
}

bool loom_model_builds_mtp(const char *model_type)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (strcmp(families[i].model_type, model_type) == 0) return families[i].fam == FAM_DEEPSEEK;
    return false;
}

const char *loom_model_supported(void)
{
    static char list[1024];
    if (list[0]) return list;
    size_t n = 0;
    for (size_t i = 0; i < N_FAMILIES; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s (%s)", i ? ", " : "",
                              families[i].hf_arch, families[i].model_type);
    return list;
}

/* Finds the family: the first "architectures" entry we know, else
 * "model_type". *idx is an index into families[]. */
static loom_status pick_family(const loom_jctx *c, const cJSON *cfg, size_t *idx)
{
    const cJSON *archs = NULL;
    const char *mt = NULL;
    loom_status s;
    if ((s = loom_json_get_array(c, cfg, "$", "architectures", false, &archs)) ||
        (s = loom_json_get_str(c, cfg, "$", "model_type", false, &mt)))
        return s;
    const char *seen = NULL;
    if (archs) {
        int k = 0;
        for (const cJSON *a = archs->child; a; a = a->next, k++) {
            if (!cJSON_IsString(a)) {
                char path[64];
                snprintf(path, sizeof path, "$.architectures[%d]", k);
                return loom_json_fail(c, path, "expected a string, found %s", loom_json_type_name(a));
            }
            if (!seen) seen = a->valuestring;
            for (size_t i = 0; i < N_FAMILIES; i++)
                if (strcmp(a->valuestring, families[i].hf_arch) == 0) {
                    *idx = i;
                    return LOOM_OK;
                }
        }
    }
    if (mt)
        for (size_t i = 0; i < N_FAMILIES; i++)
            if (strcmp(mt, families[i].model_type) == 0) {
                *idx = i;
                return LOOM_OK;
            }
    if (!seen && !mt)
        return loom_error_set(c->err, LOOM_ERR_INVALID,
                              "%s: not a model file: no \"format\": \"%s\" and no HF "
                              "\"architectures\" or \"model_type\" field",
                              c->file, LOOM_GRAPH_FORMAT);
    /* name the field that was read: the first architecture, else model_type */
    return loom_error_set(c->err, LOOM_ERR_UNSUPPORTED,
                          "%s: %s: unsupported architecture \"%s\" (supported: %s)", c->file,
                          seen ? "$.architectures[0]" : "$.model_type", seen ? seen : mt,
                          loom_model_supported());
}

loom_status loom_model_build_hf(const char *file, const cJSON *config, const char *name,
                                const loom_model_opts *o, loom_graph **out, loom_error *err)
{
    loom_model_opts def;
    if (!o) {
        loom_model_opts_init(&def);
        def.seq = 0;   /* the model's default (GPT-2: n_positions) */
        o = &def;
    }
    *out = NULL;
    loom_jctx c = {file, err};
    if (!cJSON_IsObject(config))
        return loom_json_fail(&c, "$", "expected an object, found %s", loom_json_type_name(config));
    size_t i = 0;
    loom_status s = pick_family(&c, config, &i);
    if (s) return s;
    const char *arch = families[i].model_type;
    /* Multimodal wrappers (Gemma 3, Llama 4) keep the language model in
     * "text_config"; its model_type names the text family. The vision tower
     * is not part of the plan (a warning says so). */
    const cJSON *text = NULL;
    if ((s = loom_json_get_object(&c, config, "$", "text_config", false, &text))) return s;
    if (text && (strcmp(arch, "gemma3") == 0 || strcmp(arch, "llama4") == 0)) {
        arch = strcmp(arch, "gemma3") == 0 ? "gemma3_text" : "llama4_text";
        loom_jctx tc = {file, err};
        config = text;
        c = tc;
    } else if (strcmp(arch, "gemma3") == 0 || strcmp(arch, "llama4") == 0) {
        return loom_json_fail(&c, "$", "%s config without \"text_config\"", families[i].hf_arch);
    }
    switch (families[i].fam) {
    case FAM_GPT2: return loom_hf_build_gpt2(&c, config, name, o, out);
    case FAM_LLAMA: return loom_hf_build_llama(&c, config, name, arch, o, out);
    case FAM_DEEPSEEK: return loom_hf_build_deepseek(&c, config, name, arch, o, out);
    }
    return loom_error_set(err, LOOM_ERR_UNSUPPORTED, "%s: unsupported family", file);
}

/* "examples/models/llama-3-8b.json" -> "llama-3-8b". */
static void base_name(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, n, "%s", b);
    size_t len = strlen(out);
    if (len > 5 && strcmp(out + len - 5, ".json") == 0) out[len - 5] = '\0';
}

struct loom_model_source {
    cJSON *root;
    bool graph_file;                  /* "format": "loom-graph/1" (fixed shapes) */
    char *path;
    char name[LOOM_NAME_MAX];         /* the graph name of an HF config: the file's base name */
};

void loom_model_source_destroy(loom_model_source *src)
{
    if (!src) return;
    cJSON_Delete(src->root);
    free(src->path);
    free(src);
}

loom_status loom_model_open(const char *path, loom_model_source **out, loom_error *err)
{
    *out = NULL;
    loom_model_source *src = calloc(1, sizeof *src);
    size_t n = strlen(path) + 1;
    if (!src || !(src->path = malloc(n))) {
        free(src);
        return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(src->path, path, n);
    /* A loom graph may be large, an HF config.json is tens of KB: the
     * format member, found before parsing, picks the limits (limits.h). */
    char *text = NULL, fmt[32] = "";
    size_t len = 0;
    loom_json_limits lim = LOOM_JSON_LIMITS_GRAPH;
    loom_status s = loom_read_file(path, lim.max_bytes, &text, &len, err);
    if (s) goto fail;
    if (!loom_json_peek_top_string(text, len, "format", fmt, sizeof fmt) ||
        strcmp(fmt, LOOM_GRAPH_FORMAT) != 0)
        lim = LOOM_JSON_LIMITS_HF_CONFIG;
    s = loom_json_parse_limited(path, text, len, &lim, &src->root, err);
    free(text);
    if (s) goto fail;
    loom_jctx c = {path, err};
    const char *format = NULL;
    if (!cJSON_IsObject(src->root)) {
        s = loom_json_fail(&c, "$", "expected an object, found %s", loom_json_type_name(src->root));
        goto fail;
    }
    if ((s = loom_json_get_str(&c, src->root, "$", "format", false, &format))) goto fail;
    if (format && strcmp(format, LOOM_GRAPH_FORMAT) != 0) {
        s = loom_json_fail(&c, "$.format", "\"%s\" is not a model format (expected \"%s\" "
                           "or an HF config.json)", format, LOOM_GRAPH_FORMAT);
        goto fail;
    }
    src->graph_file = format != NULL;
    base_name(path, src->name, sizeof src->name);
    *out = src;
    return LOOM_OK;
fail:
    loom_model_source_destroy(src);
    return s;
}

loom_status loom_model_source_build(const loom_model_source *src, const loom_model_opts *o,
                                    loom_graph **out, loom_error *err)
{
    *out = NULL;
    if (src->graph_file) return loom_graph_json_parse(src->path, src->root, out, err);
    return loom_model_build_hf(src->path, src->root, src->name, o, out, err);
}

bool loom_model_source_fixed_shapes(const loom_model_source *src) { return src->graph_file; }

const char *loom_model_source_name(const loom_model_source *src) { return src->path; }

loom_status loom_model_load(const char *path, const loom_model_opts *o, loom_graph **out,
                            loom_error *err)
{
    *out = NULL;
    loom_model_source *src;
    loom_status s = loom_model_open(path, &src, err);
    if (s) return s;
    s = loom_model_source_build(src, o, out, err);
    loom_model_source_destroy(src);
    return s;
}
