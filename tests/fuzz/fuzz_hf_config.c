/*
 * fuzz_hf_config.c — libFuzzer target for model loading (graph/model.c):
 * a Hugging Face config.json (GPT-2, Llama/Mistral/Qwen2/Mixtral,
 * DeepSeek-V2/V3 builders in graph/hf_*.c) or a loom graph, recognised by
 * content, read from a file as `loom inspect MODEL` reads it.
 *
 * Any input: no crash, no undefined behaviour, a failure naming the file.
 * The input's length picks fused or unfused attention and one of three
 * sequence lengths, so both attention builders and the n_positions cap see
 * inputs. An accepted model must give a graph with parameters whose
 * loom-graph/1 text reads back (the builders only make graphs the graph
 * reader accepts).
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "graph/graph_json.h"
#include "base/json.h"
#include "graph/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t seqs[3] = {0, 128, 4096};   /* 0 = the model's default */
    const char *path = fuzz_file(data, size);
    loom_model_opts o;
    loom_model_opts_init(&o);
    o.flash_attention = (size & 1) == 0;
    o.seq = seqs[(size >> 1) % 3];
    o.batch = 1 + (int64_t)((size >> 3) & 3);

    loom_error err = {0};
    loom_graph *g = NULL;
    loom_status s = loom_model_load(path, &o, &g, &err);
    fuzz_check_failure(s, &err, path);
    if (s != LOOM_OK) {
        if (g) fuzz_die("a failed load handed back a graph", err.msg);
        return 0;
    }

    loom_graph_totals t;
    loom_graph_totals_get(g, &t);
    if (t.params <= 0 || t.fwd_flops < 0 || t.bwd_flops < 0 || t.activation_bytes < 0)
        fuzz_die("implausible totals for a loaded model", loom_graph_name(g));

    /* The text round trip costs ~50x the build under the sanitizers: do it
     * for real model depths (Llama-3.1-405B has 126 blocks), so that the
     * fuzzer's 100000-layer mutants stay fast. */
    if (loom_graph_layer_count(g) > 130) {
        loom_graph_destroy(g);
        return 0;
    }
    char *text = NULL;
    if (loom_graph_json_dump(g, &text, &err) != LOOM_OK) fuzz_die("dump failed", err.msg);
    cJSON *root = NULL;
    loom_graph *g2 = NULL;
    if (loom_json_parse("dump.json", text, strlen(text), &root, &err) != LOOM_OK ||
        loom_graph_json_parse("dump.json", root, &g2, &err) != LOOM_OK)
        fuzz_die("a built model's graph does not read back", err.msg);
    cJSON_Delete(root);
    loom_graph_destroy(g2);
    free(text);
    loom_graph_destroy(g);
    return 0;
}
