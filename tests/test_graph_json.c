/*
 * test_graph_json.c — the loom-graph/1 reader and writer: byte-identical
 * round trips (hand-written file, HF-built graphs), and every kind of bad
 * input the schema rejects, each with the file and the JSON path (or
 * line:column) in the message and no graph (or output file) left behind.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "base/fileio.h"
#include "graph/graph.h"
#include "graph/graph_json.h"
#include "base/json.h"
#include "graph/model.h"

static char tmpdir[64];

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* dump -> parse -> dump must reproduce the first dump byte for byte, and the
 * re-read graph must have the same totals and signatures. */
static void round_trip(const loom_graph *g)
{
    loom_error err = {0};
    char *t1 = NULL, *t2 = NULL;
    cJSON *root = NULL;
    loom_graph *g2 = NULL;
    CHECK(loom_graph_json_dump(g, &t1, &err) == LOOM_OK);
    CHECK(loom_json_parse("rt.json", t1, strlen(t1), &root, &err) == LOOM_OK);
    CHECK(loom_graph_json_parse("rt.json", root, &g2, &err) == LOOM_OK);
    if (!g2) {
        fprintf(stderr, "%s\n", err.msg);
        goto done;
    }
    CHECK(loom_graph_json_dump(g2, &t2, &err) == LOOM_OK);
    CHECK(t2 && strcmp(t1, t2) == 0);
    loom_graph_totals a, b;
    loom_graph_totals_get(g, &a);
    loom_graph_totals_get(g2, &b);
    CHECK_INT_EQ(a.params, b.params);
    CHECK_INT_EQ(a.fwd_flops, b.fwd_flops);
    CHECK_INT_EQ(a.bwd_flops, b.bwd_flops);
    CHECK_INT_EQ(a.activation_bytes, b.activation_bytes);
    CHECK_INT_EQ(loom_graph_layer_count(g), loom_graph_layer_count(g2));
    for (int32_t l = 0; l < loom_graph_layer_count(g); l++)
        CHECK(loom_graph_layer_signature(g, l) == loom_graph_layer_signature(g2, l));
    CHECK(memcmp(loom_graph_info_c(g), loom_graph_info_c(g2), sizeof(loom_model_info)) == 0);
done:
    free(t1);
    free(t2);
    cJSON_Delete(root);
    loom_graph_destroy(g2);
}

static void test_round_trips(void)
{
    loom_error err = {0};
    loom_graph *g = NULL;
    CHECK(loom_graph_json_read("examples/models/tiny-gpt.graph.json", &g, &err) == LOOM_OK);
    if (g) {
        CHECK_INT_EQ(loom_graph_num_ops(g), 1 + 2 * 12 + 3);
        CHECK(strcmp(loom_graph_name(g), "tiny-gpt") == 0);
        CHECK_INT_EQ(loom_graph_info_c(g)->seq, 8);
        round_trip(g);
        /* through a file, atomically written */
        char path[128];
        snprintf(path, sizeof path, "%s/tiny.json", tmpdir);
        CHECK(loom_graph_json_write(g, path, &err) == LOOM_OK);
        loom_graph *g3 = NULL;
        CHECK(loom_model_load(path, NULL, &g3, &err) == LOOM_OK);
        if (g3) CHECK_INT_EQ(loom_graph_num_ops(g3), loom_graph_num_ops(g));
        loom_graph_destroy(g3);
        /* a failed write leaves no file behind */
        snprintf(path, sizeof path, "%s/partial.json", tmpdir);
        loom_fileio_fail_next_write = 1;
        CHECK(loom_graph_json_write(g, path, &err) != LOOM_OK);
        CHECK(access(path, F_OK) != 0);
        loom_fileio_fail_next_write = 0;
        loom_graph_destroy(g);
    }
    /* HF-built graphs of each family survive the round trip, unfused too */
    const char *models[] = {"gpt2", "mixtral-8x7b", "deepseek-v3"};
    for (size_t i = 0; i < 3; i++) {
        char path[128];
        snprintf(path, sizeof path, "examples/models/%s.json", models[i]);
        loom_model_opts o;
        loom_model_opts_init(&o);
        o.seq = 64;
        o.flash_attention = i != 0;
        CHECK(loom_model_load(path, &o, &g, &err) == LOOM_OK);
        if (g) round_trip(g);
        loom_graph_destroy(g);
    }
}

/* A minimal valid graph: x [b 2, h 4] -> einsum with w [h 4, f 8] -> y. */
#define TLIST                                                                          \
    "{\"name\": \"x\", \"dims\": [\"b\", \"h\"], \"shape\": [2, 4]},"                   \
    " {\"name\": \"w\", \"dims\": [\"h\", \"f\"], \"shape\": [4, 8], \"weight\": true}," \
    " {\"name\": \"y\", \"dims\": [\"b\", \"f\"], \"shape\": [2, 8]}"
#define TENSORS "\"tensors\": [" TLIST "]"
#define TENSORS_PLUS(extra) "\"tensors\": [" TLIST ", " extra "]"
#define OP "{\"name\": \"fc\", \"kind\": \"einsum\", \"layer\": 0, \"inputs\": [\"x\"], " \
           "\"weights\": [\"w\"], \"outputs\": [\"y\"], \"einsum\": \"bh,hf->bf\""
#define DOC(tensors, ops) "{\"format\": \"loom-graph/1\", " tensors ", \"ops\": [" ops "]}"

static void expect_bad(const char *text, const char *n1, const char *n2)
{
    loom_error err = {0};
    cJSON *root = NULL;
    loom_graph *g = (loom_graph *)1;
    loom_status s = loom_json_parse("bad.json", text, strlen(text), &root, &err);
    if (s == LOOM_OK) {
        s = loom_graph_json_parse("bad.json", root, &g, &err);
        CHECK(g == NULL);   /* nothing half-built is handed back */
    }
    CHECK(s != LOOM_OK);
    CHECK_STR_CONTAINS(err.msg, "bad.json");
    CHECK_STR_CONTAINS(err.msg, n1);
    if (n2) CHECK_STR_CONTAINS(err.msg, n2);
    cJSON_Delete(root);
}

static void test_bad_inputs(void)
{
    /* the valid base document parses */
    {
        loom_error err = {0};
        cJSON *root = NULL;
        loom_graph *g = NULL;
        const char *ok = DOC(TENSORS, OP "}");
        CHECK(loom_json_parse("ok.json", ok, strlen(ok), &root, &err) == LOOM_OK);
        CHECK(loom_graph_json_parse("ok.json", root, &g, &err) == LOOM_OK);
        if (g) CHECK_INT_EQ(loom_graph_op(g, 0)->fwd_flops, 2 * 2 * 4 * 8);
        loom_graph_destroy(g);
        cJSON_Delete(root);
    }
    expect_bad("{\"format\": \"loom-graph/1\",\n  \"tensors\": [}", "bad.json:2:", "malformed JSON");
    expect_bad("{\"format\": \"loom-graph/2\", \"tensors\": [], \"ops\": []}", "$.format",
               "expected \"loom-graph/1\"");
    expect_bad("{\"format\": \"loom-graph/1\", \"ops\": []}", "missing required field \"tensors\"", NULL);
    expect_bad(DOC("\"tensors\": [{\"name\": \"x\", \"dims\": [\"b\"]}]", OP "}"), "$.tensors[0]",
               "missing required field \"shape\"");
    expect_bad(DOC(TENSORS, "{\"kind\": \"einsum\", \"layer\": 0}"), "$.ops[0]",
               "missing required field \"name\"");
    expect_bad(DOC(TENSORS, OP ", \"color\": \"red\"}"), "$.ops[0]", "unknown field \"color\"");
    expect_bad("{\"format\": \"loom-graph/1\", \"extra\": 1, " TENSORS ", \"ops\": []}", "$:",
               "unknown field \"extra\"");
    expect_bad(DOC(TENSORS, "{\"name\": \"c\", \"kind\": \"conv2d\", \"layer\": 0, \"inputs\": [\"x\"], "
                            "\"outputs\": [\"y\"]}"),
               "$.ops[0].kind", "unknown op kind \"conv2d\"");
    expect_bad(DOC("\"tensors\": [{\"name\": \"x\", \"dims\": [\"b\", \"h\"], \"shape\": [0, 4]}]", OP "}"),
               "$.tensors[0].shape[0]", "positive integer");
    expect_bad(DOC("\"tensors\": [{\"name\": \"x\", \"dims\": [\"b\", \"h\"], \"shape\": [-2, 4]}]", OP "}"),
               "$.tensors[0].shape[0]", "found -2");
    expect_bad(DOC("\"tensors\": [{\"name\": \"x\", \"dims\": [\"b\", \"h\"], \"shape\": [1e300, 4]}]", OP "}"),
               "$.tensors[0].shape[0]", "at most 2^53");
    expect_bad(DOC("\"tensors\": [{\"name\": \"x\", \"dims\": [\"b\", \"h\"], \"shape\": [4294967296, 4294967296]}]",
                   OP "}"),
               "$.tensors[0]", "overflows");
    expect_bad(DOC("\"tensors\": [{\"name\": \"x\", \"dims\": [\"b\"], \"shape\": [2, 4]}]", OP "}"),
               "$.tensors[0]", "\"dims\" has 1 names but \"shape\" has 2");
    expect_bad(DOC(TENSORS_PLUS("{\"name\": \"x\", \"dims\": [], \"shape\": []}"), OP "}"), "$.tensors[3]",
               "declared twice");
    expect_bad(DOC(TENSORS, "{\"name\": \"fc\", \"kind\": \"einsum\", \"layer\": 0, \"inputs\": [\"x\"], "
                            "\"weights\": [\"W\"], \"outputs\": [\"y\"], \"einsum\": \"bh,hf->bf\"}"),
               "$.ops[0].weights[0]", "tensor \"W\" is not declared");
    /* shape disagreeing with the einsum: y is [2, 8] but the letters say f = 8 ... make w 4x6 */
    expect_bad(DOC("\"tensors\": [{\"name\": \"x\", \"dims\": [\"b\", \"h\"], \"shape\": [2, 4]},"
                   " {\"name\": \"w\", \"dims\": [\"h\", \"f\"], \"shape\": [4, 6], \"weight\": true},"
                   " {\"name\": \"y\", \"dims\": [\"b\", \"f\"], \"shape\": [2, 8]}]",
                   OP "}"),
               "$.ops[0]", "einsum letter 'f'");
    expect_bad(DOC(TENSORS, OP ", \"fn\": \"gelu\"}"), "$.ops[0]", "\"fn\" applies only to elementwise");
    expect_bad(DOC(TENSORS, OP ", \"saves\": [\"w\"]}"), "$.ops[0].saves[0]",
               "not one of this op's inputs or outputs");
    expect_bad(DOC(TENSORS_PLUS("{\"name\": \"lonely\", \"dims\": [\"b\"], \"shape\": [2]}"), OP "}"),
               "lonely", "dangling");
    /* a cycle: a reads t2 (written by b), b reads t1 (written by a) */
    expect_bad(DOC("\"tensors\": [{\"name\": \"t1\", \"dims\": [\"h\"], \"shape\": [4]},"
                   " {\"name\": \"t2\", \"dims\": [\"h\"], \"shape\": [4]}]",
                   "{\"name\": \"op_a\", \"kind\": \"elementwise\", \"fn\": \"gelu\", \"layer\": 0, "
                   "\"inputs\": [\"t2\"], \"outputs\": [\"t1\"]},"
                   " {\"name\": \"op_b\", \"kind\": \"elementwise\", \"fn\": \"silu\", \"layer\": 0, "
                   "\"inputs\": [\"t1\"], \"outputs\": [\"t2\"]}"),
               "cycle", "op_a -> op_b -> op_a");
    /* layers out of order */
    expect_bad(DOC("\"tensors\": [{\"name\": \"t0\", \"dims\": [\"h\"], \"shape\": [4]},"
                   " {\"name\": \"t1\", \"dims\": [\"h\"], \"shape\": [4]},"
                   " {\"name\": \"t2\", \"dims\": [\"h\"], \"shape\": [4]}]",
                   "{\"name\": \"a\", \"kind\": \"elementwise\", \"fn\": \"gelu\", \"layer\": 1, "
                   "\"inputs\": [\"t0\"], \"outputs\": [\"t1\"]},"
                   " {\"name\": \"b\", \"kind\": \"elementwise\", \"fn\": \"gelu\", \"layer\": 0, "
                   "\"inputs\": [\"t1\"], \"outputs\": [\"t2\"]}"),
               "layer by layer", NULL);
    expect_bad(DOC(TENSORS, OP ", \"layer\": 0}"), "$.ops[0].layer", "duplicate key");
    expect_bad("{\"format\": \"loom-graph/1\", \"model\": {\"layers\": -1}, " TENSORS ", \"ops\": []}",
               "$.model.layers", "found -1");
    expect_bad("{\"format\": \"loom-graph/1\", \"dtype\": \"fp12\", " TENSORS ", \"ops\": []}", "$",
               "unknown dtype \"fp12\"");
}

/* loom_model_load dispatches by content, and its malformed-JSON error
 * carries line:column. */
static void test_model_load_files(void)
{
    char path[128];
    loom_error err = {0};
    loom_graph *g = (loom_graph *)1;
    snprintf(path, sizeof path, "%s/broken.json", tmpdir);
    write_text(path, "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 4096,,\n}\n");
    CHECK(loom_model_load(path, NULL, &g, &err) == LOOM_ERR_PARSE);
    CHECK(g == NULL);
    char want[160];
    snprintf(want, sizeof want, "%s:3:", path);
    CHECK_STR_CONTAINS(err.msg, want);
    snprintf(path, sizeof path, "%s/other.json", tmpdir);
    write_text(path, "{\"format\": \"loom-cluster/1\"}");
    CHECK(loom_model_load(path, NULL, &g, &err) != LOOM_OK);
    CHECK_STR_CONTAINS(err.msg, "is not a model format");
    CHECK(loom_model_load("no/such/file.json", NULL, &g, &err) == LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "no/such/file.json");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/loom_test_graph_json.XXXXXX");
    check_tmpdir(tmpdir);
    test_round_trips();
    test_bad_inputs();
    test_model_load_files();
    check_tmpdir_remove(tmpdir);
    return check_done();
}
