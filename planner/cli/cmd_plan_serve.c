/*
 * cmd_plan_serve.c — `loom plan MODEL --cluster C --mode serve --isl N
 * --osl N [--qps R | --concurrency N] [--ttft S] [--tpot S] [--objective
 * goodput|throughput|latency|gpus] [--disagg auto|on|off]`: the serving
 * deployment planner (planner/serve/serve_plan.h). Prints the chosen
 * deployment, the deployments the simulation compared and the Pareto
 * fronts; -o writes the plan (loom-plan/1 with a serving section), --json
 * prints it, --svg draws the fronts and the chosen deployment (serve_svg.h). What the plan does to the asked load (clients beyond what an
 * instance runs at once) is said on stderr.
 *
 * Called by cmd_plan.c when argv has --mode serve; options in one table
 * (options.h), as every command. Exit codes: 0 planned, 1 bad input, 2
 * usage, 3 nothing fits or meets the SLOs.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"
#include "base/json.h"
#include "costs/calib.h"
#include "costs/cluster.h"
#include "graph/model.h"
#include "planner/cli/cli.h"
#include "planner/cli/serve_choices.h"
#include "planner/serve/serve_plan.h"
#include "planner/serve/serve_svg.h"

typedef struct {
    const char *model, *cluster, *calib, *serve_calib, *out, *svg;
    int mode;
    int64_t isl, osl, concurrency, seed, recheck;
    int len_dist;
    double len_spread, qps, ttft, tpot, attainment;
    int objective, disagg, engine, weights, kv_dtype, frontend, client;
    bool trt_engine, engine_given;
    bool json, no_timings;
    bool isl_given, osl_given, qps_given, conc_given, obj_given, weights_given, kv_given;
} plan_serve_args;

static void args_init(void *p)
{
    plan_serve_args *a = p;
    memset(a, 0, sizeof *a);
    a->mode = 1;
    a->attainment = 0.9;
    a->objective = LOOM_SERVE_OBJ_GOODPUT;
    a->disagg = LOOM_DISAGG_AUTO;
    a->engine = LOOM_ENGINE_VLLM;
    a->weights = LOOM_WEIGHTS_BF16;
    a->kv_dtype = LOOM_DTYPE_BF16;
    a->recheck = 3;
    /* a deployment serves users, each reading its own stream (no benchmark
     * client's serial parse) and not started together (loom eval --mode
     * serve defaults to python, to reproduce vllm bench serve) */
    a->client = LOOM_CLIENT_USERS;
}

static const loom_cli_choice mode_choices[] = {{"serve", 1, false}, {NULL, 0, false}};
static const loom_cli_choice obj_choices[] = {
    {"goodput", LOOM_SERVE_OBJ_GOODPUT, false}, {"throughput", LOOM_SERVE_OBJ_THROUGHPUT, false},
    {"latency", LOOM_SERVE_OBJ_LATENCY, false}, {"gpus", LOOM_SERVE_OBJ_GPUS, false},
    {NULL, 0, false}};
static const loom_cli_choice disagg_choices[] = {{"auto", LOOM_DISAGG_AUTO, false},
                                                 {"on", LOOM_DISAGG_ON, false},
                                                 {"off", LOOM_DISAGG_OFF, false},
                                                 {NULL, 0, false}};

#define F(f) LOOM_CLI_FIELD(plan_serve_args, f)
static const loom_cli_option opts[] = {
    {.name = "--cluster", .kind = LOOM_CLI_STR, .field = F(cluster), .metavar = "C",
     .help = "a preset (dgx-h100-x2, …) or a cluster file"},
    {.name = "--mode", .kind = LOOM_CLI_ENUM, .field = F(mode), .choices = mode_choices,
     .metavar = "M", .help = "serve (this planner; train and infer: loom plan -h)"},
    {.name = "--isl", .kind = LOOM_CLI_SIZE, .field = F(isl), .given = F(isl_given), .lo = 1,
     .hi = LOOM_MODEL_MAX_SEQ, .metavar = "N", .help = "prompt tokens per request (mean)",
     .def = LOOM_CLI_NO_DEFAULT},
    {.name = "--osl", .kind = LOOM_CLI_SIZE, .field = F(osl), .given = F(osl_given), .lo = 1,
     .hi = LOOM_MODEL_MAX_SEQ, .metavar = "N", .help = "output tokens per request (mean)",
     .def = LOOM_CLI_NO_DEFAULT},
    {.name = "--len-dist", .kind = LOOM_CLI_ENUM, .field = F(len_dist), .choices = loom_serve_dist_choices,
     .metavar = "D", .help = "length distribution of prompts and outputs"},
    {.name = "--len-spread", .kind = LOOM_CLI_NUM, .field = F(len_spread), .min = 0, .max = 2.99,
     .metavar = "R", .help = "uniform: ±R of the mean (R < 1); lognormal: coefficient of variation\n(ShareGPT: about 1.3)"},
    {.name = "--qps", .kind = LOOM_CLI_NUM, .field = F(qps), .given = F(qps_given), .min = 1e-6,
     .max = 1e7, .metavar = "R", .help = "the request rate to serve (Poisson), requests/s",
     .def = LOOM_CLI_NO_DEFAULT},
    {.name = "--concurrency", .kind = LOOM_CLI_INT, .field = F(concurrency),
     .given = F(conc_given), .lo = 1, .hi = 1 << 24, .metavar = "N",
     .help = "N closed-loop clients over the whole deployment", .def = LOOM_CLI_NO_DEFAULT},
    {.name = "--ttft", .kind = LOOM_CLI_NUM, .field = F(ttft), .min = 1e-6, .max = 1e6,
     .metavar = "S", .help = "SLO: time to first token, seconds", .def = "none"},
    {.name = "--tpot", .kind = LOOM_CLI_NUM, .field = F(tpot), .min = 1e-6, .max = 1e3,
     .metavar = "S", .help = "SLO: time per output token, seconds", .def = "none"},
    {.name = "--attainment", .kind = LOOM_CLI_NUM, .field = F(attainment), .min = 0.01, .max = 1,
     .metavar = "F", .help = "share of requests that must meet both SLOs"},
    {.name = "--objective", .kind = LOOM_CLI_ENUM, .field = F(objective), .given = F(obj_given),
     .choices = obj_choices, .metavar = "O",
     .help = "goodput: highest rate per GPU within the SLOs; throughput: tokens/s\n"
             "per GPU; latency: lowest mean end-to-end latency; gpus: fewest GPUs\n"
             "for --qps",
     .def = "goodput; throughput with --concurrency; gpus with --qps"},
    {.name = "--disagg", .kind = LOOM_CLI_ENUM, .field = F(disagg), .choices = disagg_choices,
     .metavar = "D", .help = "prefill/decode disaggregation: auto (the objective picks), on, off"},
    {.name = "--engine", .kind = LOOM_CLI_ENUM, .field = F(engine), .given = F(engine_given),
     .choices = loom_serve_engine_choices, .metavar = "E",
     .help = "engine whose policy and defaults apply"},
    {.name = "--frontend", .kind = LOOM_CLI_ENUM, .field = F(frontend),
     .choices = loom_serve_frontend_choices, .metavar = "F",
     .help = "what serves the requests: the engine's OpenAI server, NVIDIA NIM's\n"
             "(TensorRT-LLM; implies --trt-engine), or none (an in-process harness)",
     .def = "server"},
    {.name = "--client", .kind = LOOM_CLI_ENUM, .field = F(client),
     .choices = loom_serve_client_choices, .metavar = "C",
     .help = "who sends and reads: users (independent; a clients load starts spread\n"
             "over a request's duration), parallel (genai-perf, AIPerf: clients start\n"
             "together) or python (vllm bench serve: one asyncio process parsing every\n"
             "chunk)", .def = "users"},
    {.name = "--trt-engine", .kind = LOOM_CLI_FLAG, .field = F(trt_engine),
     .help = "TensorRT-LLM runs a built TensorRT engine from its C++ executor"},
    {.name = "--weights", .kind = LOOM_CLI_ENUM, .field = F(weights), .given = F(weights_given),
     .choices = loom_serve_weight_choices, .metavar = "W",
     .help = "stored weights: bf16, fp8, int4 (AWQ/GPTQ), mxfp4 (experts), nvfp4 (Blackwell)", .def = "the checkpoint's, else bf16"},
    {.name = "--kv-dtype", .kind = LOOM_CLI_ENUM, .field = F(kv_dtype), .given = F(kv_given),
     .choices = loom_serve_kv_choices, .metavar = "T", .help = "KV cache dtype",
     .def = "fp8 under --frontend nim with fp8 weights (NIM's fp8 profiles), else bf16"},
    {.name = "--recheck", .kind = LOOM_CLI_INT, .field = F(recheck), .lo = 1, .hi = 64,
     .metavar = "N", .help = "deployments of each kind re-checked by simulation"},
    {.name = "--seed", .kind = LOOM_CLI_INT, .field = F(seed), .lo = 0, .hi = INT64_MAX,
     .metavar = "S", .help = "seed of simulated arrivals and lengths"},
    {.name = "--calib", .kind = LOOM_CLI_STR, .field = F(calib), .metavar = "FILE",
     .help = "training calibration (GEMM size roll-off)", .def = "shipped values"},
    {.name = "--serve-calib", .kind = LOOM_CLI_STR, .field = F(serve_calib), .metavar = "FILE",
     .help = "serving calibration (loom calibrate --serving)", .def = "shipped values"},
    {.short_name = "-o", .kind = LOOM_CLI_STR, .field = F(out), .metavar = "FILE",
     .help = "write the plan (loom-plan/1 with a serving section)"},
    {.name = "--svg", .kind = LOOM_CLI_STR, .field = F(svg), .metavar = "FILE",
     .help = "draw the Pareto fronts and the chosen deployment"},
    {.name = "--json", .kind = LOOM_CLI_FLAG, .field = F(json),
     .help = "print the plan JSON instead of the text"},
    {.name = "--no-timings", .kind = LOOM_CLI_FLAG, .field = F(no_timings),
     .help = "write search.time_s as 0 (also LOOM_DETERMINISTIC=1)"},
};

const loom_cli_spec loom_cli_spec_plan_serve = {
    .cmd = "plan",
    .usage = "usage: loom plan MODEL --cluster C --mode serve --isl N --osl N\n"
             "                 [--qps R | --concurrency N] [--ttft S] [--tpot S]\n"
             "                 [--objective goodput|throughput|latency|gpus]\n"
             "                 [--engine vllm|sglang|trtllm] [--disagg auto|on|off] [-o FILE]\n"
             "                 [--svg FILE]\n",
    .about = "Plans a serving deployment of MODEL on cluster C: engine instances (tensor,\n"
             "pipeline, expert and attention-data parallel), their replicas, and whether\n"
             "prefill and decode run in separate pools joined by a KV-cache transfer. Every\n"
             "candidate is ranked by the steady-state estimate; the best few of each kind\n"
             "are simulated request by request, and the simulation decides. Prints the\n"
             "chosen deployment (TTFT and TPOT p50/p99, throughput per GPU and per user,\n"
             "KV capacity), the deployments compared, and the Pareto fronts of tokens/s per\n"
             "GPU against tokens/s per user for aggregated and disaggregated deployments\n"
             "(--svg draws them, with the chosen deployment marked).\n",
    .epilogue = "At most one load: --qps or --concurrency. SLOs in seconds (--tpot 0.03).\n",
    .opts = opts,
    .n_opts = sizeof opts / sizeof opts[0],
    .pos = {.metavar = "MODEL", .field = F(model), .max = 1, .noun = "MODEL",
            .help = "a path or bundled model name (examples/models/)"},
    .args_size = sizeof(plan_serve_args),
    .init = args_init,
};
#undef F

static int write_out(const plan_serve_args *a, const loom_serve_plan *p, bool no_timings)
{
    char *json = loom_serve_plan_to_json(p, a->model, no_timings);
    if (!json) {
        fprintf(stderr, "loom plan: out of memory\n");
        return LOOM_EXIT_FAIL;
    }
    loom_error err = {0};
    int rc = LOOM_EXIT_OK;
    if (a->out && loom_write_file_atomic(a->out, json, strlen(json), &err)) rc = loom_cli_fail(&err);
    if (!rc && a->json) fputs(json, stdout);
    free(json);
    return rc;
}

int loom_cmd_plan_serve(int argc, char **argv)
{
    const char *cmd = "plan";
    plan_serve_args a;
    int rc = loom_cli_parse(&loom_cli_spec_plan_serve, argc, argv, &a);
    if (rc != LOOM_CLI_RUN) return rc;
    if (!a.model) return loom_cli_usage_error(cmd, "--mode serve needs MODEL (a path or a bundled name)");
    if (!a.cluster) return loom_cli_usage_error(cmd, "--cluster is required with a model");
    if (!a.isl_given || !a.osl_given)
        return loom_cli_usage_error(cmd, "--mode serve needs --isl and --osl (prompt and output "
                                    "tokens per request)");
    if (a.qps_given && a.conc_given)
        return loom_cli_usage_error(cmd, "give at most one load: --qps or --concurrency");
    if (!a.obj_given)
        a.objective = a.qps_given    ? LOOM_SERVE_OBJ_GPUS
                      : a.conc_given ? LOOM_SERVE_OBJ_THROUGHPUT
                                     : LOOM_SERVE_OBJ_GOODPUT;
    char model_path[4096], cluster_path[4096];
    if (!loom_cli_find_data(a.model, "models", model_path, sizeof model_path))
        return loom_cli_no_model("loom plan", a.model);
    const char *cl = a.cluster;
    if (!loom_cluster_is_preset_name(cl) &&
        loom_cli_find_data(cl, "clusters", cluster_path, sizeof cluster_path))
        cl = cluster_path;
    const loom_cli_path ins[] = {{"MODEL", model_path},
                                 {"--cluster", loom_cluster_is_preset_name(cl) ? NULL : cl},
                                 {"--calib", a.calib}, {"--serve-calib", a.serve_calib}};
    const loom_cli_path outs[] = {{"-o", a.out}, {"--svg", a.svg}};
    int bad = loom_cli_check_outputs(cmd, ins, 4, outs, 2);
    if (bad) return bad;

    loom_error err = {0};
    loom_cluster cluster;
    if (loom_cluster_load(cl, &cluster, &err)) return loom_cli_fail(&err);
    loom_calib cal;
    if (a.calib && loom_calib_load(a.calib, &cal, &err)) return loom_cli_fail(&err);
    loom_serve_calib scal;
    if (a.serve_calib && loom_serve_calib_load(a.serve_calib, &scal, &err)) return loom_cli_fail(&err);
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    mo.seq = 1;
    mo.batch = 1;
    loom_graph *g = NULL;
    if (loom_model_load(model_path, &mo, &g, &err)) return loom_cli_fail(&err);

    if (!loom_cli_serve_runtime_check("plan", a.frontend, a.trt_engine, a.engine_given, &a.engine)) {
        loom_graph_destroy(g);
        return LOOM_EXIT_USAGE;
    }
    loom_serve_plan_request req = {0};
    req.space = (loom_serve_space_opts){.graph = g, .cluster = &cluster,
                                        .calib = a.calib ? &cal : NULL,
                                        .serve_calib = a.serve_calib ? &scal : NULL,
                                        .engine = (loom_engine_kind)a.engine,
                                        .frontend = (loom_serve_frontend)a.frontend,
                                        .client = (loom_serve_client)a.client,
                                        .trt_engine = a.trt_engine,
                                        .weights = (loom_serve_weights)a.weights,
                                        .kv_dtype = (loom_dtype)a.kv_dtype};
    if (!a.weights_given) {
        int w;
        if (loom_cli_checkpoint_weights(model_path, &w)) req.space.weights = (loom_serve_weights)w;
    }
    if (!a.kv_given)
        req.space.kv_dtype = loom_serve_default_kv_dtype(req.space.weights,
                                                         a.frontend == LOOM_FRONTEND_NIM);
    if (loom_serve_weights_check(req.space.weights, &cluster.gpu, &err)) {
        loom_graph_destroy(g);
        return loom_cli_fail(&err);
    }
    loom_serve_workload_init(&req.work);
    req.work.isl = a.isl;
    req.work.osl = a.osl;
    req.work.isl_dist = req.work.osl_dist = (loom_len_dist)a.len_dist;
    req.work.isl_spread = req.work.osl_spread = a.len_dist == LOOM_LEN_FIXED ? 0 : a.len_spread;
    req.work.seed = (uint64_t)a.seed;
    req.work.load = a.qps_given ? LOOM_LOAD_QPS : a.conc_given ? LOOM_LOAD_CONCURRENCY
                                                              : LOOM_LOAD_OFFLINE;
    req.work.rate = a.qps;
    req.work.concurrency = a.concurrency;
    req.slo = (loom_serve_slo){.ttft_s = a.ttft, .tpot_s = a.tpot, .attainment = a.attainment};
    req.objective = (loom_serve_objective)a.objective;
    req.disagg = (loom_serve_disagg_mode)a.disagg;
    req.recheck = (int32_t)a.recheck;

    loom_serve_plan *p = NULL;
    loom_status st = loom_serve_plan_run(&req, &p, &err);
    if (st) {
        rc = st == LOOM_ERR_INFEASIBLE ? (fprintf(stderr, "loom plan: %s\n", err.msg),
                                          LOOM_EXIT_INFEASIBLE)
                                       : loom_cli_fail(&err);
        goto done;
    }
    for (int32_t i = 0; i < p->n_notes; i++) fprintf(stderr, "loom plan: note: %s\n", p->notes[i]);
    bool no_timings = a.no_timings || loom_cli_deterministic();
    if (no_timings) p->time_s = 0;
    /* The picture first, then the plan: a failure of either leaves neither
     * (a directory that does not exist passes the early check) */
    if (a.svg && loom_serve_plan_svg_write(p, a.model, a.svg, &err)) {
        rc = loom_cli_fail(&err);
        goto done;
    }
    if ((a.out || a.json) && (rc = write_out(&a, p, no_timings))) {
        if (a.svg && strcmp(a.svg, "-")) unlink(a.svg);
        goto done;
    }
    if (!a.json) {
        char *text = loom_serve_plan_text(p, a.model);
        if (!text) {
            fprintf(stderr, "loom plan: out of memory\n");
            rc = LOOM_EXIT_FAIL;
            goto done;
        }
        fputs(text, stdout);
        free(text);
        if (a.out) printf("  plan        %s\n", a.out);
        if (a.svg) printf("  picture     %s\n", a.svg);
    }
    rc = LOOM_EXIT_OK;
done:
    loom_serve_plan_destroy(p);
    loom_graph_destroy(g);
    return rc;
}
