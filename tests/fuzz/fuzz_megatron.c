/*
 * fuzz_megatron.c — libFuzzer target for the Megatron-LM launch-line reader
 * (planner/import/megatron_import.c over the shell-word splitter of
 * planner/import/shell_words.c): the text `loom eval --from-megatron` accepts,
 * from bare arguments to whole launch scripts with variables, arrays,
 * quoting and $(( arithmetic )).
 *
 * Any input: no crash, no undefined behaviour (the arithmetic evaluator
 * meets INT64_MIN / -1 and friends here), a failure naming the source.
 * An accepted launch line must describe a runnable layout: every degree
 * >= 1, tp · pp · cp · dp equal to the world size, and the global batch a
 * multiple of micro-batch × dp (megatron_import.h: the contradictions
 * Megatron-LM itself stops on). When it states a whole small model, the
 * model must build.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "graph/model.h"
#include "planner/import/megatron_import.h"

#define SOURCE "fuzz-launch.sh"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t gpus_of[4] = {0, 8, 64, 1024};   /* 0 = the line must say */
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    loom_error err = {0};
    loom_megatron_launch *l = calloc(1, sizeof *l);
    if (!l) fuzz_die("out of memory", "");
    loom_status s = loom_megatron_parse(SOURCE, text, gpus_of[size % 4], l, &err);
    fuzz_check_failure(s, &err, SOURCE);
    if (s == LOOM_OK) {
        const loom_parallel *p = &l->config.par;
        if (p->tp < 1 || p->pp < 1 || p->cp < 1 || p->dp < 1 || p->mbs < 1 || p->gbs < 1 ||
            l->world_size < 1)
            fuzz_die("an accepted launch line has a degree below 1", text);
        if (p->tp * p->pp * p->cp * p->dp != l->world_size)
            fuzz_die("tp * pp * cp * dp != world size", text);
        if (p->gbs % (p->mbs * p->dp) != 0) fuzz_die("gbs not a multiple of mbs * dp", text);
        if (l->has_model_shape && l->config.model.layers <= 64) {
            loom_model_opts o;
            loom_model_opts_init(&o);
            o.seq = p->seq <= 4096 ? p->seq : 4096;
            loom_graph *g = NULL;
            loom_status b = loom_megatron_build_model(l, &o, &g, &err);
            if (b != LOOM_OK && b != LOOM_ERR_UNSUPPORTED && b != LOOM_ERR_INVALID)
                fuzz_die("building the stated model failed unexpectedly", err.msg);
            if (b == LOOM_OK && !g) fuzz_die("build succeeded without a graph", text);
            loom_graph_destroy(g);
        }
    }
    free(l);
    free(text);
    return 0;
}
