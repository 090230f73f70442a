/*
 * model.c — loom_model_load: from a model file to a finalized graph.
 *
 * A file is recognised by content, never by its name: a "format" member
 * selects a loom format (only "loom-graph/1" is a model); otherwise an
 * "architectures" list or a "model_type" string selects an HF family. The
 * table below is the single list of supported HF architectures; error
 * messages and `loom inspect --help` print it.
 */
#include "graph/model.h"

#include <stdio.h>
#include <string.h>

#include "graph/graph_json.h"
#include "graph/hf_build.h"
#include "base/json.h"

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
    {"Qwen3ForCausalLM", "qwen3", FAM_LLAMA},
    {"Qwen3MoeForCausalLM", "qwen3_moe", FAM_LLAMA},
    {"MixtralForCausalLM", "mixtral", FAM_LLAMA},
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

const char *loom_model_supported(void)
{
    static char list[512];
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
    return loom_error_set(c->err, LOOM_ERR_UNSUPPORTED,
                          "%s: unsupported architecture \"%s\" (supported: %s)", c->file,
                          seen ? seen : mt, loom_model_supported());
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

loom_status loom_model_load(const char *path, const loom_model_opts *o, loom_graph **out,
                            loom_error *err)
{
    *out = NULL;
    cJSON *root = NULL;
    loom_status s = loom_json_parse_file(path, &root, err);
    if (s) return s;
    loom_jctx c = {path, err};
    const char *format = NULL;
    if (!cJSON_IsObject(root)) {
        s = loom_json_fail(&c, "$", "expected an object, found %s", loom_json_type_name(root));
    } else if ((s = loom_json_get_str(&c, root, "$", "format", false, &format)) == LOOM_OK) {
        if (format && strcmp(format, LOOM_GRAPH_FORMAT) == 0) {
            s = loom_graph_json_parse(path, root, out, err);
        } else if (format) {
            s = loom_json_fail(&c, "$.format", "\"%s\" is not a model format (expected \"%s\" "
                               "or an HF config.json)", format, LOOM_GRAPH_FORMAT);
        } else {
            char name[LOOM_NAME_MAX];
            base_name(path, name, sizeof name);
            s = loom_model_build_hf(path, root, name, o, out, err);
        }
    }
    cJSON_Delete(root);
    return s;
}
