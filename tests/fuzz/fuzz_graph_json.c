/*
 * fuzz_graph_json.c — libFuzzer target for the loom graph reader
 * (graph/graph_json.c, "loom-graph/1") behind the checked JSON parser
 * (base/json.c).
 *
 * Any input: no crash, no undefined behaviour, and a failure that names the
 * file. An accepted graph must survive its writer: write(g) read back and
 * written again gives the same bytes (graph_json.h promises
 * write(read(write(g))) == write(g)), and its totals are non-negative.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "graph/graph_json.h"
#include "base/json.h"

#define FILE_NAME "fuzz-graph.json"

/* Reads text as a loom graph; checks the failure contract. */
static loom_graph *read_graph(const char *text, size_t len)
{
    loom_error err = {0};
    cJSON *root = NULL;
    loom_graph *g = NULL;
    loom_status s = loom_json_parse(FILE_NAME, text, len, &root, &err);
    if (s == LOOM_OK) s = loom_graph_json_parse(FILE_NAME, root, &g, &err);
    cJSON_Delete(root);
    fuzz_check_failure(s, &err, FILE_NAME);
    if (s != LOOM_OK && g) fuzz_die("a failed read handed back a graph", err.msg);
    return g;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    loom_graph *g = read_graph((const char *)data, size);
    if (!g) return 0;

    loom_graph_totals t;
    loom_graph_totals_get(g, &t);
    if (t.params < 0 || t.fwd_flops < 0 || t.bwd_flops < 0 || t.activation_bytes < 0)
        fuzz_die("negative graph totals", loom_graph_name(g));

    loom_error err = {0};
    char *first = NULL, *second = NULL;
    if (loom_graph_json_dump(g, &first, &err) != LOOM_OK) fuzz_die("dump failed", err.msg);
    loom_graph *g2 = read_graph(first, strlen(first));
    if (!g2) fuzz_die("the writer's output does not read back", first);
    if (loom_graph_json_dump(g2, &second, &err) != LOOM_OK) fuzz_die("dump failed", err.msg);
    fuzz_check_same(first, second, "graph write(read(write(g))) != write(g)");
    free(first);
    free(second);
    loom_graph_destroy(g2);
    loom_graph_destroy(g);
    return 0;
}
