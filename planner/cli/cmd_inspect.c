/*
 * cmd_inspect.c — `loom inspect MODEL`: what the planner sees in a model.
 *
 * Prints parameter counts (total, embedding, per layer), FLOPs per token
 * (forward, and training = forward + backward), the ops of the first
 * transformer layer with their shapes and FLOPs, and the activation bytes
 * each layer saves for backward; --json prints the same as one object.
 *
 * FLOPs per token are the graph's FLOPs at the chosen batch and sequence
 * divided by batch · seq, so they include the attention's s-dependent term
 * (4·s·h per layer forward in Korthikanti et al.'s count), not just 2·params.
 * Activation bytes are those of one micro-batch of `batch` sequences.
 *
 * The sequence defaults to loom plan's and loom eval's (LOOM_CLI_DEFAULT_SEQ,
 * capped at a learned position table), the batch to one sequence; what was
 * assumed is printed first ("assumed: seq 4096, batch 1 …") and listed in
 * the JSON's "assumed". A loom graph fixes its own shapes: nothing assumed.
 */
#include <cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "base/json.h"
#include "graph/model.h"
#include "planner/cli/cli.h"

typedef struct {
    const char *model;
    loom_model_opts o;
    bool json, unfused, seq_opt, batch_opt, dtype_opt;
} inspect_args;

static void inspect_args_init(void *p)
{
    inspect_args *a = p;
    memset(a, 0, sizeof *a);
    loom_model_opts_init(&a->o);
}

static const loom_cli_choice dtype_choices[] = {{"bf16", LOOM_DTYPE_BF16, false},
                                                {"fp16", LOOM_DTYPE_FP16, false},
                                                {"fp32", LOOM_DTYPE_FP32, false},
                                                {"fp8", LOOM_DTYPE_FP8, false},
                                                {NULL, 0, false}};

static const char *supported(void) { return loom_model_supported(); }

#define F(m) LOOM_CLI_FIELD(inspect_args, m)
static const loom_cli_option inspect_opts[] = {
    {.name = "--seq", .kind = LOOM_CLI_SIZE, .field = F(o.seq), .given = F(seq_opt), .lo = 1,
     .hi = LOOM_MODEL_MAX_SEQ, .metavar = "N", .help = "sequence length",
     .def = "4096 as loom plan and loom eval, capped at n_positions (GPT-2)"},
    {.name = "--batch", .kind = LOOM_CLI_INT, .field = F(o.batch), .given = F(batch_opt), .lo = 1,
     .hi = LOOM_MODEL_MAX_BATCH, .metavar = "N", .help = "sequences per micro-batch", .def = "1"},
    {.name = "--dtype", .kind = LOOM_CLI_ENUM, .field = F(o.dtype), .given = F(dtype_opt),
     .choices = dtype_choices, .metavar = "T", .help = "weight and activation dtype"},
    {.name = "--unfused-attention", .kind = LOOM_CLI_FLAG, .field = F(unfused),
     .help = "eager attention (scores, softmax, dropout, context) instead of\n"
             "one fused flash-attention op: activations grow with s²"},
    {.name = "--json", .kind = LOOM_CLI_FLAG, .field = F(json), .help = "one JSON object on stdout"},
};

const loom_cli_spec loom_cli_spec_inspect = {
    .cmd = "inspect",
    .usage = "usage: loom inspect MODEL [--seq N] [--batch N] [--dtype bf16|fp16|fp32|fp8]\n"
             "                          [--unfused-attention] [--json]\n",
    .opts = inspect_opts,
    .n_opts = sizeof inspect_opts / sizeof inspect_opts[0],
    .pos = {.metavar = "MODEL", .field = F(model), .max = 1, .noun = "MODEL",
            .help = "a path or a bundled model name (examples/models/: gpt2, llama-3-8b, …):\n"
                    "an HF config.json or a loom graph (\"format\": \"loom-graph/1\")"},
    .epilogue = "Supported HF architectures: ",
    .epilogue_fn = supported,
    .args_size = sizeof(inspect_args),
    .init = inspect_args_init,
};
#undef F

/* ---- summaries ------------------------------------------------------------- */

typedef struct {
    int32_t first, last;        /* layer range with identical signature and totals */
    int32_t ops;
    uint64_t sig;
    loom_graph_totals t;
} layer_run;

/* The first transformer block: layer 1 when the graph has embedding and head
 * pseudo-layers around its blocks, else layer 0. */
static int32_t first_block(const loom_graph *g)
{
    return loom_graph_layer_count(g) >= 3 ? 1 : 0;
}

static int32_t distinct_signatures(const uint64_t *sig, int32_t n)
{
    int32_t d = 0;
    for (int32_t i = 0; i < n; i++) {
        bool seen = false;
        for (int32_t j = 0; j < i && !seen; j++) seen = sig[j] == sig[i];
        d += !seen;
    }
    return d;
}

/* ---- text output ---------------------------------------------------------------- */

static void fmt_count(char *b, size_t n, int64_t v)
{
    double x = (double)v;
    if (x >= 1e12) snprintf(b, n, "%.2f T", x / 1e12);
    else if (x >= 1e9) snprintf(b, n, "%.2f B", x / 1e9);
    else if (x >= 1e6) snprintf(b, n, "%.2f M", x / 1e6);
    else if (x >= 1e3) snprintf(b, n, "%.2f K", x / 1e3);
    else snprintf(b, n, "%" PRId64, v);
}

/* FLOPs with a unit that keeps 3-4 significant digits: "962.3 GFLOP". */
static void fmt_flops(char *b, size_t n, double f)
{
    static const char *const unit[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
    int u = 0;
    while (f >= 1000.0 && u < 5) f /= 1000.0, u++;
    snprintf(b, n, u ? "%.1f %s" : "%.0f %s", f, unit[u]);
}

/* Bytes in binary units: "272.0 MiB". */
static void fmt_bytes(char *b, size_t n, int64_t v)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)v;
    int u = 0;
    while (x >= 1024.0 && u < 4) x /= 1024.0, u++;
    snprintf(b, n, u ? "%.1f %s" : "%.0f %s", x, unit[u]);
}

/* "[b 1, s 2048, h 4096]" */
static void fmt_shape(char *b, size_t n, const loom_tensor *t)
{
    size_t k = (size_t)snprintf(b, n, "[");
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(b + k, n - k, "%s%s %" PRId64, d ? ", " : "", t->dims[d].name,
                              t->dims[d].size);
    if (k < n) snprintf(b + k, n - k, "]");
}

static void op_detail(char *b, size_t n, const loom_op *op)
{
    if (op->kind == LOOM_OP_EINSUM) snprintf(b, n, "%s%s", op->einsum, op->bias ? " +bias" : "");
    else if (op->fn[0]) snprintf(b, n, "%s", op->fn);
    else if (op->kind == LOOM_OP_ATTENTION && op->window)
        snprintf(b, n, "%swindow %lld", op->causal ? "causal " : "", (long long)op->window);
    else if (op->kind == LOOM_OP_ATTENTION && op->chunk)
        snprintf(b, n, "%schunk %lld", op->causal ? "causal " : "", (long long)op->chunk);
    else if (op->kind == LOOM_OP_ATTENTION) snprintf(b, n, "%s", op->causal ? "causal" : "");
    else if (op->topk) snprintf(b, n, "top-%d", (int)op->topk);
    else b[0] = '\0';
}

static int64_t op_params(const loom_graph *g, const loom_op *op)
{
    int64_t p = 0;
    for (int k = 0; k < op->n_w; k++) p += loom_tensor_numel(loom_graph_tensor(g, op->w[k]));
    return p;
}

/* Attention layers and those that attend locally (window or chunk). */
static void attention_layers(const loom_graph *g, int64_t *all, int64_t *local, int64_t *window,
                             int64_t *chunk)
{
    *all = *local = *window = *chunk = 0;
    for (int32_t i = 0; i < loom_graph_num_ops(g); i++) {
        const loom_op *op = loom_graph_op(g, i);
        if (op->kind != LOOM_OP_ATTENTION) continue;
        ++*all;
        if (op->window) ++*local, *window = op->window;
        if (op->chunk) ++*local, *chunk = op->chunk;
    }
}

static void print_text(const char *path, const loom_graph *g, const loom_graph_totals *tot,
                       const layer_run *runs, int32_t n_runs, int32_t n_sigs, int64_t tokens,
                       int64_t act_max)
{
    const loom_model_info *m = loom_graph_info_c(g);
    int32_t nl = loom_graph_layer_count(g), fb = first_block(g);
    char a[32], b[32], c[32];
    printf("model         %s  (%s)\n", loom_graph_name(g), path);
    if (m->arch[0]) {
        printf("architecture  %s: %" PRId64 " layers, hidden %" PRId64 ", %" PRId64 " heads (%" PRId64
               " kv, head dim %" PRId64 "), ffn %" PRId64 ", vocab %" PRId64 "\n",
               m->arch, m->layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn, m->vocab);
        if (m->experts)
            printf("experts       %" PRId64 " routed (top-%" PRId64 ", ffn %" PRId64 "), %" PRId64
                   " shared, first %" PRId64 " layers dense\n", m->experts, m->experts_topk,
                   m->moe_ffn, m->shared_experts, m->first_dense);
    }
    if (m->seq && m->batch)
        printf("shape         batch %" PRId64 " x seq %" PRId64 ", %s%s\n", m->batch, m->seq,
               loom_dtype_name(m->dtype),
               !m->arch[0] ? "" : m->flash_attention ? ", fused (flash) attention" : ", unfused attention");
    fmt_count(a, sizeof a, tot->params);
    fmt_count(b, sizeof b, tot->params_embedding);
    printf("\nparameters    %s total, %s in embeddings%s\n", a, b,
           m->arch[0] ? (m->tied_embeddings ? " (lm_head tied)" : " (lm_head untied)") : "");
    if (tot->params_active != tot->params) {
        /* Published "active" figures differ on the input embedding (a lookup,
         * no FLOPs): Qwen counts it, OpenAI's gpt-oss card does not. */
        fmt_count(a, sizeof a, tot->params_active);
        fmt_count(b, sizeof b, tot->params_active - (m->tied_embeddings ? 0 : tot->params_embedding));
        printf("active        %s per token (%s without the input embedding)\n", a, b);
    }
    int64_t n_attn, n_local, win, chunk;
    attention_layers(g, &n_attn, &n_local, &win, &chunk);
    if (n_local > 0)
        printf("attention     %lld of %lld layers local (%s %lld), %lld global\n",
               (long long)n_local, (long long)n_attn, win ? "sliding window" : "chunk",
               (long long)(win ? win : chunk), (long long)(n_attn - n_local));
    double per = tokens > 0 ? (double)tokens : 1.0;
    fmt_flops(a, sizeof a, (double)tot->fwd_flops / per);
    fmt_flops(b, sizeof b, (double)(tot->fwd_flops + tot->bwd_flops) / per);
    printf("%s%s forward, %s training (forward + backward)\n",
           tokens > 0 ? "FLOPs/token   " : "FLOPs/pass    ", a, b);
    fmt_bytes(a, sizeof a, act_max);
    fmt_bytes(b, sizeof b, tot->activation_bytes);
    printf("activations   %s saved per layer (largest block), %s for the whole model\n", a, b);
    printf("signatures    %d distinct over %d layer slots\n", (int)n_sigs, (int)nl);

    printf("\n%-14s %5s %12s %14s %12s  %s\n", "layer", "ops", "params", "forward", "saved",
           "signature");
    for (int32_t r = 0; r < n_runs; r++) {
        char range[32];
        if (runs[r].first == runs[r].last) snprintf(range, sizeof range, "%d", (int)runs[r].first);
        else
            snprintf(range, sizeof range, "%d-%d (x%d)", (int)runs[r].first, (int)runs[r].last,
                     (int)(runs[r].last - runs[r].first + 1));
        fmt_count(c, sizeof c, runs[r].t.params);
        fmt_flops(a, sizeof a, (double)runs[r].t.fwd_flops);
        fmt_bytes(b, sizeof b, runs[r].t.activation_bytes);
        printf("%-14s %5d %12s %14s %12s  %016" PRIx64 "\n", range, (int)runs[r].ops, c, a, b,
               runs[r].sig);
    }

    int32_t first, count;
    loom_graph_layer_ops(g, fb, &first, &count);
    int wname = 2, wdet = 6, wshape = 12;
    char det[64], shape[256];
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *op = loom_graph_op(g, i);
        op_detail(det, sizeof det, op);
        fmt_shape(shape, sizeof shape, loom_graph_tensor(g, op->out[0]));
        if ((int)strlen(op->name) > wname) wname = (int)strlen(op->name);
        if ((int)strlen(det) > wdet) wdet = (int)strlen(det);
        if ((int)strlen(shape) > wshape) wshape = (int)strlen(shape);
    }
    printf("\nops of layer %d (forward FLOPs of the whole batch; bytes saved for backward)\n", (int)fb);
    printf("%-*s  %-13s %-*s %-*s %10s %14s %12s\n", wname, "op", "kind", wdet, "detail", wshape,
           "output", "params", "forward", "saved");
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *op = loom_graph_op(g, i);
        op_detail(det, sizeof det, op);
        fmt_shape(shape, sizeof shape, loom_graph_tensor(g, op->out[0]));
        fmt_count(c, sizeof c, op_params(g, op));
        fmt_flops(a, sizeof a, (double)op->fwd_flops);
        fmt_bytes(b, sizeof b, loom_op_saved_bytes(g, i));
        printf("%-*s  %-13s %-*s %-*s %10s %14s %12s\n", wname, op->name,
               loom_op_kind_name(op->kind), wdet, det, wshape, shape, c, a, b);
    }
}

/* ---- JSON output ------------------------------------------------------------------- */

static cJSON *tensor_json(const loom_tensor *t)
{
    cJSON *o = cJSON_CreateObject(), *dims = cJSON_AddArrayToObject(o, "dims"),
          *shape = cJSON_AddArrayToObject(o, "shape");
    cJSON_AddStringToObject(o, "name", t->name);
    for (int d = 0; d < t->ndim; d++) {
        cJSON_AddItemToArray(dims, cJSON_CreateString(t->dims[d].name));
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->dims[d].size));
    }
    cJSON_AddStringToObject(o, "dtype", loom_dtype_name(t->dtype));
    return o;
}

static int print_json(const char *path, const loom_graph *g, const loom_graph_totals *tot,
                      const uint64_t *sig, int32_t n_sigs, int64_t tokens, int64_t act_max,
                      bool seq_assumed, bool batch_assumed)
{
    const loom_model_info *m = loom_graph_info_c(g);
    int32_t nl = loom_graph_layer_count(g), fb = first_block(g);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", loom_graph_name(g));
    cJSON_AddStringToObject(o, "file", path);
    if (m->arch[0]) cJSON_AddStringToObject(o, "arch", m->arch);
    cJSON_AddNumberToObject(o, "seq", (double)m->seq);
    cJSON_AddNumberToObject(o, "batch", (double)m->batch);
    cJSON *as = cJSON_AddArrayToObject(o, "assumed");
    if (seq_assumed) cJSON_AddItemToArray(as, cJSON_CreateString("seq"));
    if (batch_assumed) cJSON_AddItemToArray(as, cJSON_CreateString("batch"));
    cJSON_AddStringToObject(o, "dtype", loom_dtype_name(m->dtype));
    cJSON_AddBoolToObject(o, "flash_attention", m->flash_attention);
    cJSON_AddNumberToObject(o, "params", (double)tot->params);
    cJSON_AddNumberToObject(o, "params_embedding", (double)tot->params_embedding);
    cJSON_AddNumberToObject(o, "params_active", (double)tot->params_active);
    {
        int64_t n_attn, n_local, win, chunk;
        attention_layers(g, &n_attn, &n_local, &win, &chunk);
        cJSON_AddNumberToObject(o, "attention_layers", (double)n_attn);
        cJSON_AddNumberToObject(o, "attention_local_layers", (double)n_local);
        if (win) cJSON_AddNumberToObject(o, "attention_window", (double)win);
        if (chunk) cJSON_AddNumberToObject(o, "attention_chunk", (double)chunk);
    }
    cJSON_AddNumberToObject(o, "layers", (double)(m->layers ? m->layers : nl));
    cJSON_AddNumberToObject(o, "layer_slots", nl);
    cJSON_AddNumberToObject(o, "flops_fwd", (double)tot->fwd_flops);
    cJSON_AddNumberToObject(o, "flops_bwd", (double)tot->bwd_flops);
    if (tokens > 0) {
        cJSON_AddNumberToObject(o, "flops_per_token_fwd", (double)tot->fwd_flops / (double)tokens);
        cJSON_AddNumberToObject(o, "flops_per_token_train",
                                (double)(tot->fwd_flops + tot->bwd_flops) / (double)tokens);
    } else {
        cJSON_AddNullToObject(o, "flops_per_token_fwd");
        cJSON_AddNullToObject(o, "flops_per_token_train");
    }
    cJSON_AddNumberToObject(o, "activation_bytes_per_layer", (double)act_max);
    cJSON_AddNumberToObject(o, "activation_bytes", (double)tot->activation_bytes);
    cJSON_AddNumberToObject(o, "signatures", n_sigs);
    cJSON *pl = cJSON_AddArrayToObject(o, "per_layer");
    for (int32_t l = 0; l < nl; l++) {
        loom_graph_totals t;
        int32_t first, count;
        char hex[20];
        loom_graph_layer_totals(g, l, &t);
        loom_graph_layer_ops(g, l, &first, &count);
        snprintf(hex, sizeof hex, "%016" PRIx64, sig[l]);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "layer", l);
        cJSON_AddNumberToObject(e, "ops", count);
        cJSON_AddNumberToObject(e, "params", (double)t.params);
        cJSON_AddNumberToObject(e, "flops_fwd", (double)t.fwd_flops);
        cJSON_AddNumberToObject(e, "flops_bwd", (double)t.bwd_flops);
        cJSON_AddNumberToObject(e, "activation_bytes", (double)t.activation_bytes);
        cJSON_AddStringToObject(e, "signature", hex);
        cJSON_AddItemToArray(pl, e);
    }
    cJSON *ops = cJSON_AddArrayToObject(o, "first_layer_ops");
    int32_t first, count;
    loom_graph_layer_ops(g, fb, &first, &count);
    for (int32_t i = first; i < first + count; i++) {
        const loom_op *op = loom_graph_op(g, i);
        char det[64];
        op_detail(det, sizeof det, op);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", op->name);
        cJSON_AddStringToObject(e, "kind", loom_op_kind_name(op->kind));
        cJSON_AddStringToObject(e, "detail", det);
        cJSON_AddItemToObject(e, "output", tensor_json(loom_graph_tensor(g, op->out[0])));
        cJSON_AddNumberToObject(e, "params", (double)op_params(g, op));
        cJSON_AddNumberToObject(e, "flops_fwd", (double)op->fwd_flops);
        cJSON_AddNumberToObject(e, "flops_bwd", (double)op->bwd_flops);
        cJSON_AddNumberToObject(e, "saved_bytes", (double)loom_op_saved_bytes(g, i));
        cJSON_AddItemToArray(ops, e);
    }
    char *text = loom_json_print(o);
    cJSON_Delete(o);
    if (!text) {
        fprintf(stderr, "loom inspect: out of memory\n");
        return LOOM_EXIT_FAIL;
    }
    fputs(text, stdout);
    free(text);
    return LOOM_EXIT_OK;
}

/* ---- the command ---------------------------------------------------------------------- */

int loom_cmd_inspect(int argc, char **argv)
{
    inspect_args args;
    int prc = loom_cli_parse(&loom_cli_spec_inspect, argc, argv, &args);
    if (prc != LOOM_CLI_RUN) return prc;
    loom_model_opts o = args.o;
    if (args.unfused) o.flash_attention = false;
    const char *model = args.model;
    bool json = args.json, seq_opt = args.seq_opt, batch_opt = args.batch_opt,
         dtype_opt = args.dtype_opt;
    if (!model) return loom_cli_usage_error("inspect", "missing MODEL (a path or a bundled name)");
    char path[4096];
    if (!loom_cli_find_data(model, "models", path, sizeof path)) {
        return loom_cli_no_model("loom", model);
    }

    /* the shared default sequence (cli.h), as loom plan and loom eval */
    if (!seq_opt) o.seq = loom_cli_default_seq(path);
    loom_error err = {0};
    loom_graph *g = NULL;
    loom_model_source *src = NULL;
    if (loom_model_open(path, &src, &err) || loom_model_source_build(src, &o, &g, &err)) {
        loom_model_source_destroy(src);
        return loom_cli_fail(&err);
    }
    bool fixed = loom_model_source_fixed_shapes(src);   /* a loom graph: its own shapes */
    loom_model_source_destroy(src);
    loom_cli_print_warnings(g);
    const loom_model_info *m = loom_graph_info_c(g);
    bool seq_assumed = !fixed && !seq_opt, batch_assumed = !fixed && !batch_opt;
    /* A loom graph carries its own shapes; say so rather than ignore the options silently. */
    if ((seq_opt && m->seq != o.seq) || (batch_opt && m->batch != o.batch) ||
        (dtype_opt && m->dtype != o.dtype))
        fprintf(stderr, "loom inspect: note: %s fixes its own shapes (seq %lld, batch %lld, %s); "
                "--seq, --batch and --dtype do not apply to it\n", path, (long long)m->seq,
                (long long)m->batch, loom_dtype_name(m->dtype));

    int32_t nl = loom_graph_layer_count(g);
    loom_graph_totals tot;
    loom_graph_totals_get(g, &tot);
    uint64_t *sig = malloc((size_t)nl * sizeof *sig);
    layer_run *runs = malloc((size_t)nl * sizeof *runs);
    if (!sig || !runs) {
        free(sig);
        free(runs);
        loom_graph_destroy(g);
        fprintf(stderr, "loom inspect: out of memory\n");
        return LOOM_EXIT_FAIL;
    }
    /* Runs of consecutive layers with one signature print as one row. */
    int32_t n_runs = 0;
    int64_t act_max = 0;
    int32_t fb = first_block(g), lb = nl >= 3 ? nl - 2 : nl - 1;
    for (int32_t l = 0; l < nl; l++) {
        loom_graph_totals t;
        int32_t first, count;
        sig[l] = loom_graph_layer_signature(g, l);
        loom_graph_layer_totals(g, l, &t);
        loom_graph_layer_ops(g, l, &first, &count);
        if (l >= fb && l <= lb && t.activation_bytes > act_max) act_max = t.activation_bytes;
        if (n_runs && runs[n_runs - 1].sig == sig[l] && l != nl - 1 && runs[n_runs - 1].first != 0) {
            runs[n_runs - 1].last = l;
        } else {
            runs[n_runs++] = (layer_run){l, l, count, sig[l], t};
        }
    }
    int32_t n_sigs = distinct_signatures(sig, nl);
    int64_t tokens = m->seq * m->batch;
    int rc = LOOM_EXIT_OK;
    if (json) {
        rc = print_json(path, g, &tot, sig, n_sigs, tokens, act_max, seq_assumed, batch_assumed);
    } else {
        char buf[64] = "";
        size_t n = 0;
        if (seq_assumed) n += (size_t)snprintf(buf, sizeof buf, "seq %lld", (long long)m->seq);
        if (batch_assumed)
            snprintf(buf + n, sizeof buf - n, "%sbatch %lld", n ? ", " : "", (long long)m->batch);
        if (buf[0])
            printf("assumed: %s (loom's defaults; the sequence is loom plan's and loom eval's; "
                   "--seq, --batch to change)\n", buf);
        print_text(path, g, &tot, runs, n_runs, n_sigs, tokens, act_max);
    }
    free(sig);
    free(runs);
    loom_graph_destroy(g);
    return rc;
}
