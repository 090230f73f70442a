/*
 * cmd_shard.c — `loom shard MODEL --mesh AxB`: the intra-operator plan of
 * one transformer layer on one logical mesh (solver/intra.h).
 *
 * Prints every op of the layer with its chosen strategy and the specs of its
 * inputs, weights and outputs in dim names ("b s@1 h": s split over mesh
 * axis 1), its compute and communication time per micro-batch, then the
 * ILP's size before and after follow-merging, its status and solve time,
 * and the layer's totals. --json prints the same as one object:
 *   { status, objective_s, solve_time_s, ilp: {variables, constraints,
 *     ops_before_merge, ops_after_merge, core_variables, core_constraints},
 *     ops: [{name, strategy,
 *     specs: {inputs, outputs, weights}, …}], comm_bytes_per_layer_fwd, … }
 * The layer is solved as part of its run of identical layers (periodic
 * boundary), so its time is the per-layer cost of the whole stack.
 *
 * Times are seconds per micro-batch (training: forward + backward); the
 * gradient sync is per step. Exit codes: 0, 1 bad input, 2 usage, 3 the
 * memory budget cannot be met.
 */
#include <cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/cluster.h"
#include "costs/compute.h"
#include "graph/graph.h"
#include "base/json.h"
#include "graph/model.h"
#include "planner/cli/cli.h"
#include "solver/intra.h"

typedef struct {
    const char *model, *cluster;
    loom_mesh_shape mesh;
    loom_model_opts mo;
    int64_t layer, micro_batches;
    double budget_gib, time_limit_s;
    bool inference, megatron, debug, json, layer_set, unfused;
    bool seq_given, batch_given;
    bool fixed_shapes;   /* a loom graph file: its own seq and batch, nothing assumed */
} shard_args;

static bool parse_mesh(const char *v, loom_mesh_shape *m)
{
    char *end;
    long long a = strtoll(v, &end, 10);
    if (end == v || (*end != 'x' && *end != 'X')) return false;
    const char *p = end + 1;
    long long b = strtoll(p, &end, 10);
    if (end == p || *end != '\0' || a < 1 || b < 1 || a > 65536 || b > 65536) return false;
    m->n0 = a, m->n1 = b;
    return true;
}

static bool parse_mesh_opt(const char *cmd, const char *opt, const char *v, void *p)
{
    shard_args *a = p;
    if (parse_mesh(v, &a->mesh)) return true;
    loom_cli_usage_error(cmd, "%s expects AxB with A, B >= 1 (e.g. 2x4), got '%s'", opt, v);
    return false;
}

static void shard_args_init(void *p)
{
    shard_args *a = p;
    memset(a, 0, sizeof *a);
    loom_model_opts_init(&a->mo);
    a->micro_batches = 1;
    a->time_limit_s = 10;
}

static const loom_cli_choice dtype_choices[] = {{"bf16", LOOM_DTYPE_BF16, false},
                                                {"fp16", LOOM_DTYPE_FP16, false},
                                                {"fp32", LOOM_DTYPE_FP32, false},
                                                {"fp8", LOOM_DTYPE_FP8, false},
                                                {NULL, 0, false}};

#define F(m) LOOM_CLI_FIELD(shard_args, m)
static const loom_cli_option shard_opts[] = {
    {.name = "--mesh", .kind = LOOM_CLI_CUSTOM, .parse = parse_mesh_opt, .metavar = "AxB",
     .help = "logical mesh, e.g. 1x8, 2x4, 4x8 (required)"},
    {.name = "--cluster", .kind = LOOM_CLI_STR, .field = F(cluster), .metavar = "C",
     .help = "cluster preset or file", .def = "dgx-h100-xN, N nodes enough for the mesh"},
    {.name = "--batch", .kind = LOOM_CLI_INT, .field = F(mo.batch), .given = F(batch_given),
     .lo = 1, .hi = LOOM_MODEL_MAX_BATCH, .metavar = "N", .help = "micro-batch size"},
    {.name = "--seq", .kind = LOOM_CLI_SIZE, .field = F(mo.seq), .given = F(seq_given), .lo = 1,
     .hi = LOOM_MODEL_MAX_SEQ, .metavar = "N", .help = "sequence length",
     .def = "4096 as loom plan, capped at n_positions (GPT-2)"},
    {.name = "--dtype", .kind = LOOM_CLI_ENUM, .field = F(mo.dtype), .choices = dtype_choices,
     .metavar = "T", .help = "bf16, fp16, fp32 or fp8"},
    {.name = "--unfused-attention", .kind = LOOM_CLI_FLAG, .field = F(unfused),
     .help = "eager attention (scores, softmax, context) instead of one fused op"},
    {.name = "--layer", .kind = LOOM_CLI_INT, .field = F(layer), .given = F(layer_set), .lo = 0,
     .hi = 1000000, .metavar = "N", .help = "the layer to show",
     .def = "the first transformer block"},
    {.name = "--micro-batches", .kind = LOOM_CLI_INT, .field = F(micro_batches), .lo = 1,
     .hi = 1 << 24, .metavar = "N", .help = "gradient sync amortised over N micro-batches"},
    {.name = "--inference", .kind = LOOM_CLI_FLAG, .field = F(inference),
     .help = "forward only: no backward, gradients or saved activations"},
    {.name = "--megatron", .kind = LOOM_CLI_FLAG, .field = F(megatron),
     .help = "only Megatron-expressible strategies (data parallel on axis 0,\n"
             "tensor/sequence parallel on axis 1)"},
    {.name = "--memory-budget", .kind = LOOM_CLI_NUM, .field = F(budget_gib), .min = 1e-6,
     .max = 1e9, .metavar = "GIB",
     .help = "per-GPU bytes for this layer's parameters, gradients, optimizer\n"
             "state and activations (exit 3 when it cannot be met)",
     .def = "none"},
    {.name = "--time-limit", .kind = LOOM_CLI_NUM, .field = F(time_limit_s), .min = 0.001,
     .max = 86400, .metavar = "S", .help = "ILP time limit in seconds"},
    {.name = "--debug", .kind = LOOM_CLI_FLAG, .field = F(debug),
     .help = "also write the ILP as loom-shard.L<layer>.lp (CPLEX LP format)"},
    {.name = "--json", .kind = LOOM_CLI_FLAG, .field = F(json), .help = "one JSON object on stdout"},
};

const loom_cli_spec loom_cli_spec_shard = {
    .cmd = "shard",
    .usage = "usage: loom shard MODEL --mesh AxB [--cluster C] [--batch N] [--seq N] [--dtype T]\n"
             "                  [--layer N] [--micro-batches N] [--inference] [--megatron]\n"
             "                  [--unfused-attention]\n"
             "                  [--memory-budget GIB] [--time-limit S] [--debug] [--json]\n",
    .about = "Chooses a sharding strategy for every op of one layer on the logical mesh A x B\n"
             "(axis 1, of size B, runs inside a node) with the intra-operator ILP, and prints\n"
             "each op's specs in dim names: \"b s@1 h\" = s split over axis 1, \"f@01\" = split\n"
             "over both axes, a plain name = replicated.\n",
    .opts = shard_opts,
    .n_opts = sizeof shard_opts / sizeof shard_opts[0],
    .pos = {.metavar = "MODEL", .field = F(model), .max = 1, .noun = "MODEL",
            .help = "a path or a bundled model name (examples/models/)"},
    .args_size = sizeof(shard_args),
    .init = shard_args_init,
};
#undef F

/* Returns LOOM_CLI_RUN when parsed, else the exit code. */
static int parse_args(int argc, char **argv, shard_args *a)
{
    int rc = loom_cli_parse(&loom_cli_spec_shard, argc, argv, a);
    if (rc != LOOM_CLI_RUN) return rc;
    if (a->unfused) a->mo.flash_attention = false;
    if (!a->model) return loom_cli_usage_error("shard", "missing MODEL (a path or a bundled name)");
    if (!a->mesh.n0) return loom_cli_usage_error("shard", "missing --mesh AxB");
    return LOOM_CLI_RUN;
}

/* The cluster: the named one (resolved by loom_cli_cluster_arg), or the
 * smallest DGX H100 preset holding the mesh. */
static loom_status load_cluster(const shard_args *a, const char *named, loom_cluster *c,
                                loom_error *err)
{
    char name[64];
    int64_t gpus = a->mesh.n0 * a->mesh.n1;
    snprintf(name, sizeof name, "dgx-h100-x%lld", (long long)((gpus + 7) / 8));
    loom_status s = loom_cluster_load(named ? named : name, c, err);
    if (s) return s;
    if (gpus > loom_cluster_gpus(c))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "mesh %lldx%lld needs %lld GPUs but cluster %s has %lld",
                              (long long)a->mesh.n0, (long long)a->mesh.n1, (long long)gpus, c->name,
                              (long long)loom_cluster_gpus(c));
    return LOOM_OK;
}

/* "a, b" of the op's operand specs of one kind. */
static void join_specs(const loom_intra_result *r, const loom_graph *g, int32_t op, loom_operand w,
                       char *buf, size_t n)
{
    const loom_op *o = loom_graph_op(g, op);
    int cnt = w == LOOM_OPERAND_INPUT ? o->n_in : w == LOOM_OPERAND_WEIGHT ? o->n_w : o->n_out;
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 0; k < cnt && off < n; k++) {
        char s[96];
        loom_spec sp;
        bool have = loom_intra_op_spec(r, g, op, w, k, &sp);
        if (have) loom_spec_format(&sp, loom_graph_tensor(g, loom_intra_operand(g, op, w, k)), s, sizeof s);
        int len = snprintf(buf + off, n - off, "%s[%s]", k ? ", " : "", have ? s : "?");
        if (len < 0) break;
        off += (size_t)len;
    }
    if (!cnt) snprintf(buf, n, "-");
}

static void fmt_bytes(char *b, size_t n, double x)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (x >= 1024.0 && u < 4) x /= 1024.0, u++;
    snprintf(b, n, u ? "%.1f %s" : "%.0f %s", x, unit[u]);
}

static void print_text(const shard_args *a, const char *path, const loom_graph *g,
                       const loom_cluster *c, int32_t layer, const loom_intra_result *r)
{
    const loom_model_info *m = loom_graph_info_c(g);
    int32_t first, count;
    loom_graph_layer_ops(g, layer, &first, &count);
    char as[64] = "";
    size_t n = 0;
    if (!a->seq_given && !a->fixed_shapes)
        n += (size_t)snprintf(as, sizeof as, "seq %lld", (long long)m->seq);
    if (!a->batch_given && !a->fixed_shapes)
        snprintf(as + n, sizeof as - n, "%sbatch %lld", n ? ", " : "", (long long)m->batch);
    if (as[0])
        printf("assumed: %s (loom's defaults; the sequence is loom plan's and loom eval's; "
               "--seq, --batch to change)\n", as);
    printf("model    %s (%s): batch %lld x seq %lld, %s\n", loom_graph_name(g), path,
           (long long)m->batch, (long long)m->seq, loom_dtype_name(m->dtype));
    printf("cluster  %s: %lld x %lld %s\n", c->name, (long long)c->nodes, (long long)c->gpus_per_node,
           c->gpu.name);
    printf("mesh     %lldx%lld (axis 1 of %lld %s a node)\n", (long long)a->mesh.n0,
           (long long)a->mesh.n1, (long long)a->mesh.n1,
           a->mesh.n1 <= c->gpus_per_node ? "inside" : "spanning more than");
    printf("layer    %d (%d ops), %s%s\n", (int)layer, (int)count,
           a->inference ? "inference (forward)" : "training (forward + backward)",
           a->megatron ? ", Megatron space" : "");
    printf("ILP      %s, %d variables, %d constraints; %d ops -> %d nodes after merging; "
           "solved in %.1f ms\n", loom_ilp_status_name(r->status), (int)r->n_vars, (int)r->n_cons,
           (int)r->ops_before_merge, (int)r->ops_after_merge, r->solve_time_s * 1e3);
    if (r->core_vars) printf("         GLPK core after exact elimination: %d variables, %d constraints\n",
                             (int)r->core_vars, (int)r->core_cons);
    else printf("         solved by exact elimination alone (no GLPK core left)\n");
    if (r->status == LOOM_ILP_FEASIBLE) printf("         time limit reached: gap %.3g%%\n", 100 * r->gap);
    if (r->status == LOOM_ILP_INFEASIBLE) return;

    int wn = 2, ws = 8, wi = 6, ww = 7, wo = 6;
    char ins[512], wts[512], outs[512];
    for (int pass = 0; pass < 2; pass++) {
        if (pass)
            printf("\n%-*s  %-*s  %-*s  %-*s  %-*s  %10s %10s\n", wn, "op", ws, "strategy", wi,
                   "inputs", ww, "weights", wo, "outputs", "compute", "comm");
        for (int32_t op = first; op < first + count; op++) {
            const char *name = loom_graph_op(g, op)->name, *st = loom_intra_op_strategy(r, g, op);
            join_specs(r, g, op, LOOM_OPERAND_INPUT, ins, sizeof ins);
            join_specs(r, g, op, LOOM_OPERAND_WEIGHT, wts, sizeof wts);
            join_specs(r, g, op, LOOM_OPERAND_OUTPUT, outs, sizeof outs);
            if (!pass) {
#define WIDEN(w, s) if ((int)strlen(s) > (w)) (w) = (int)strlen(s)
                WIDEN(wn, name); WIDEN(ws, st); WIDEN(wi, ins); WIDEN(ww, wts); WIDEN(wo, outs);
#undef WIDEN
                continue;
            }
            loom_intra_op_cost oc;
            loom_intra_op_cost_get(r, g, op, &oc);
            printf("%-*s  %-*s  %-*s  %-*s  %-*s  %7.3f ms %7.3f ms\n", wn, name, ws, st, wi, ins, ww,
                   wts, wo, outs, oc.compute_s * 1e3, oc.comm_s * 1e3);
        }
    }
    char b1[32], b2[32], b3[32];
    printf("\nper micro-batch  %.3f ms = compute %.3f ms + communication %.3f ms (of which "
           "resharding %.3f ms)\n", r->time_s * 1e3, r->compute_s * 1e3, r->comm_s * 1e3,
           r->reshard_s * 1e3);
    printf("gradient sync    %.3f ms per step over the mesh (ILP charges it / %lld micro-batches)\n",
           r->grad_sync_s * 1e3, (long long)a->micro_batches);
    fmt_bytes(b1, sizeof b1, (double)r->comm_bytes_fwd);
    printf("forward traffic  %s of collective buffers per GPU\n", b1);
    fmt_bytes(b1, sizeof b1, (double)r->param_bytes_per_gpu);
    fmt_bytes(b2, sizeof b2, (double)r->act_bytes_per_gpu);
    fmt_bytes(b3, sizeof b3, (double)r->memory_bytes_per_gpu);
    printf("memory per GPU   parameters %s, saved activations %s; with gradients and optimizer "
           "state %s\n", b1, b2, b3);
}

static cJSON *spec_array(const loom_intra_result *r, const loom_graph *g, int32_t op, loom_operand w)
{
    const loom_op *o = loom_graph_op(g, op);
    int cnt = w == LOOM_OPERAND_INPUT ? o->n_in : w == LOOM_OPERAND_WEIGHT ? o->n_w : o->n_out;
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < cnt; k++) {
        char s[96] = "";
        loom_spec sp;
        if (loom_intra_op_spec(r, g, op, w, k, &sp))
            loom_spec_format(&sp, loom_graph_tensor(g, loom_intra_operand(g, op, w, k)), s, sizeof s);
        cJSON_AddItemToArray(a, cJSON_CreateString(s));
    }
    return a;
}

static int print_json(const shard_args *a, const char *path, const loom_graph *g,
                      const loom_cluster *c, int32_t layer, const loom_intra_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", loom_graph_name(g));
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddStringToObject(o, "cluster", c->name);
    const loom_model_info *m = loom_graph_info_c(g);
    cJSON_AddNumberToObject(o, "seq", (double)m->seq);
    cJSON_AddNumberToObject(o, "batch", (double)m->batch);
    cJSON *as = cJSON_AddArrayToObject(o, "assumed");
    if (!a->seq_given && !a->fixed_shapes) cJSON_AddItemToArray(as, cJSON_CreateString("seq"));
    if (!a->batch_given && !a->fixed_shapes) cJSON_AddItemToArray(as, cJSON_CreateString("batch"));
    cJSON *mesh = cJSON_AddArrayToObject(o, "mesh");
    cJSON_AddItemToArray(mesh, cJSON_CreateNumber((double)a->mesh.n0));
    cJSON_AddItemToArray(mesh, cJSON_CreateNumber((double)a->mesh.n1));
    cJSON_AddNumberToObject(o, "layer", layer);
    cJSON_AddStringToObject(o, "mode", a->inference ? "inference" : "train");
    cJSON_AddStringToObject(o, "status", loom_ilp_status_name(r->status));
    bool ok = r->status != LOOM_ILP_INFEASIBLE;
    if (ok) cJSON_AddNumberToObject(o, "objective_s", r->objective_s);
    else cJSON_AddNullToObject(o, "objective_s");
    cJSON_AddNumberToObject(o, "gap", r->gap);
    cJSON_AddNumberToObject(o, "solve_time_s", r->solve_time_s);
    cJSON *ilp = cJSON_AddObjectToObject(o, "ilp");
    cJSON_AddNumberToObject(ilp, "variables", r->n_vars);
    cJSON_AddNumberToObject(ilp, "constraints", r->n_cons);
    cJSON_AddNumberToObject(ilp, "ops_before_merge", r->ops_before_merge);
    cJSON_AddNumberToObject(ilp, "ops_after_merge", r->ops_after_merge);
    cJSON_AddNumberToObject(ilp, "core_variables", r->core_vars);
    cJSON_AddNumberToObject(ilp, "core_constraints", r->core_cons);
    if (ok) {
        cJSON_AddNumberToObject(o, "time_s", r->time_s);
        cJSON_AddNumberToObject(o, "compute_s", r->compute_s);
        cJSON_AddNumberToObject(o, "comm_s", r->comm_s);
        cJSON_AddNumberToObject(o, "reshard_s", r->reshard_s);
        cJSON_AddNumberToObject(o, "grad_sync_s", r->grad_sync_s);
        cJSON_AddNumberToObject(o, "comm_bytes_per_layer_fwd", (double)r->comm_bytes_fwd);
        cJSON_AddNumberToObject(o, "param_bytes_per_gpu", (double)r->param_bytes_per_gpu);
        cJSON_AddNumberToObject(o, "act_bytes_per_gpu", (double)r->act_bytes_per_gpu);
        cJSON_AddNumberToObject(o, "memory_bytes_per_gpu", (double)r->memory_bytes_per_gpu);
        cJSON *ops = cJSON_AddArrayToObject(o, "ops");
        int32_t first, count;
        loom_graph_layer_ops(g, layer, &first, &count);
        for (int32_t op = first; op < first + count; op++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", loom_graph_op(g, op)->name);
            cJSON_AddStringToObject(e, "kind", loom_op_kind_name(loom_graph_op(g, op)->kind));
            cJSON_AddStringToObject(e, "strategy", loom_intra_op_strategy(r, g, op));
            cJSON *sp = cJSON_AddObjectToObject(e, "specs");
            cJSON_AddItemToObject(sp, "inputs", spec_array(r, g, op, LOOM_OPERAND_INPUT));
            cJSON_AddItemToObject(sp, "outputs", spec_array(r, g, op, LOOM_OPERAND_OUTPUT));
            cJSON_AddItemToObject(sp, "weights", spec_array(r, g, op, LOOM_OPERAND_WEIGHT));
            loom_intra_op_cost oc;
            loom_intra_op_cost_get(r, g, op, &oc);
            cJSON_AddNumberToObject(e, "compute_s", oc.compute_s);
            cJSON_AddNumberToObject(e, "comm_s", oc.comm_s);
            cJSON_AddNumberToObject(e, "comm_bytes_fwd", (double)oc.comm_bytes_fwd);
            cJSON_AddItemToArray(ops, e);
        }
    }
    char *text = loom_json_print(o);
    cJSON_Delete(o);
    if (!text) {
        fprintf(stderr, "loom shard: out of memory\n");
        return LOOM_EXIT_FAIL;
    }
    fputs(text, stdout);
    free(text);
    return LOOM_EXIT_OK;
}

int loom_cmd_shard(int argc, char **argv)
{
    shard_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != LOOM_CLI_RUN) return rc;
    char path[4096];
    if (!loom_cli_find_data(a.model, "models", path, sizeof path)) {
        return loom_cli_no_model("loom", a.model);
    }
    /* the shared default sequence (cli.h), as loom plan, eval and inspect */
    if (!a.seq_given) a.mo.seq = loom_cli_default_seq(path);
    {
        loom_model_source *src = NULL;
        loom_error e0 = {0};
        if (loom_model_open(path, &src, &e0) == LOOM_OK)
            a.fixed_shapes = loom_model_source_fixed_shapes(src);
        loom_model_source_destroy(src);
    }
    char cluster_path[4096];
    const char *named = NULL;
    if (a.cluster &&
        !(named = loom_cli_cluster_arg("loom shard", a.cluster, cluster_path, sizeof cluster_path)))
        return LOOM_EXIT_FAIL;
    loom_error err = {0};
    loom_cluster cluster;
    loom_graph *g = NULL;
    loom_cost_model *cm = NULL;
    loom_intra_result r = {0};
    if (load_cluster(&a, named, &cluster, &err) || loom_model_load(path, &a.mo, &g, &err) ||
        loom_cost_model_create(&cluster, NULL, NULL, &cm, &err)) {
        rc = loom_cli_fail(&err);
        goto done;
    }
    int32_t nl = loom_graph_layer_count(g);
    int32_t layer = a.layer_set ? (int32_t)a.layer : nl >= 3 ? 1 : 0;
    if (layer >= nl) {
        rc = loom_cli_usage_error("shard", "--layer %d: %s has layers 0..%d", (int)layer,
                                  loom_graph_name(g), (int)nl - 1);
        goto done;
    }
    loom_intra_opts o;
    loom_intra_opts_init(&o);
    o.train = !a.inference;
    o.time_limit_s = a.time_limit_s;
    o.micro_batches = a.micro_batches;
    o.megatron_only = a.megatron;
    o.memory_budget_bytes = (int64_t)llround(a.budget_gib * 1073741824.0);
    if (a.debug) o.debug_lp_path = "loom-shard";
    if (loom_intra_solve(g, cm, layer, layer, a.mesh, &o, &r, &err)) {
        rc = loom_cli_fail(&err);
        goto done;
    }
    if (a.debug) fprintf(stderr, "loom shard: wrote loom-shard.L%d.lp\n", (int)layer);
    rc = a.json ? print_json(&a, path, g, &cluster, layer, &r)
                : (print_text(&a, path, g, &cluster, layer, &r), LOOM_EXIT_OK);
    if (!rc && r.status == LOOM_ILP_INFEASIBLE) {
        fprintf(stderr, "loom: layer %d does not fit in %.3g GiB per GPU on mesh %lldx%lld\n",
                (int)layer, a.budget_gib, (long long)a.mesh.n0, (long long)a.mesh.n1);
        rc = LOOM_EXIT_INFEASIBLE;
    }
done:
    loom_intra_result_free(&r);
    loom_cost_model_destroy(cm);
    loom_graph_destroy(g);
    return rc;
}
