/*
 * cmd_eval_serve.c — `loom eval MODEL --cluster C --mode serve --tp T …
 * --isl N --osl N (--qps R | --concurrency N | --offline)`: one serving
 * engine instance (costs/serve/) under a workload — TTFT, TPOT, ITL and
 * end-to-end latency (mean and percentiles) from the request-level
 * simulator, throughput, KV capacity and the memory of a GPU, with the
 * steady-state estimate beside it. `--from-vllm LINE` / `--from-sglang
 * LINE` read the deployment from an engine's launch line instead.
 *
 * Called by cmd_eval.c when argv has --mode serve, --from-vllm or
 * --from-sglang; options in one table (options.h), as every command.
 */
#include <cJSON.h>
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/serve/sim.h"
#include "costs/serve/steady.h"
#include "graph/model.h"
#include "planner/cli/cli.h"
#include "planner/cli/serve_choices.h"
#include "planner/import/serve_cmdline.h"

typedef struct {
    const char *model, *cluster, *calib, *serve_calib, *from_vllm, *from_sglang;
    int mode;
    int64_t tp, pp, ep, dp;
    bool dp_attention;
    int64_t isl, osl;
    int len_dist;
    double len_spread;
    double qps;
    int64_t concurrency, requests, seed;
    bool offline;
    int weights, kv_dtype, engine, frontend, client;
    bool trt_engine, chunked_context;
    int64_t max_num_seqs, max_batched_tokens, block_size, scheduler_steps;
    double mem_fraction, slo_ttft, slo_tpot;
    bool steady_only, json;
    bool tp_given, pp_given, ep_given, dp_given, isl_given, osl_given, qps_given, conc_given,
        engine_given, weights_given, kv_given, frontend_given;
} serve_args;

static void serve_args_init(void *p)
{
    serve_args *a = p;
    memset(a, 0, sizeof *a);
    a->mode = 1;
    a->tp = a->pp = a->ep = a->dp = 1;
    a->isl = 1024;
    a->osl = 128;
    a->weights = LOOM_WEIGHTS_BF16;
    a->kv_dtype = LOOM_DTYPE_BF16;
    a->engine = LOOM_ENGINE_VLLM;
}

static const loom_cli_choice mode_choices[] = {{"train", 0, false}, {"serve", 1, false},
                                               {NULL, 0, false}};

#define F(f) LOOM_CLI_FIELD(serve_args, f)
static const loom_cli_option serve_opts[] = {
    {.name = "--cluster", .kind = LOOM_CLI_STR, .field = F(cluster), .metavar = "C",
     .help = "a preset (dgx-h100-x1, dgx-h200-x1, …) or a cluster file"},
    {.name = "--mode", .kind = LOOM_CLI_ENUM, .field = F(mode), .choices = mode_choices,
     .metavar = "M", .help = "serve (this command); train: the training step"},
    {.name = "--tp", .kind = LOOM_CLI_INT, .field = F(tp), .given = F(tp_given), .lo = 1,
     .hi = 1 << 20, .metavar = "N", .help = "tensor-parallel degree of an instance"},
    {.name = "--pp", .kind = LOOM_CLI_INT, .field = F(pp), .given = F(pp_given), .lo = 1,
     .hi = 1 << 20, .metavar = "N", .help = "pipeline-parallel degree of an instance"},
    {.name = "--ep", .kind = LOOM_CLI_INT, .field = F(ep), .given = F(ep_given), .lo = 1,
     .hi = 1 << 20, .metavar = "N", .help = "expert-parallel degree (MoE)"},
    {.name = "--dp", .kind = LOOM_CLI_INT, .field = F(dp), .given = F(dp_given), .lo = 1,
     .hi = 1 << 20, .metavar = "N",
     .help = "data parallel: replicas, or attention-DP ranks of one instance\n"
             "for a MoE model with --ep > 1 or --dp-attention"},
    {.name = "--dp-attention", .kind = LOOM_CLI_FLAG, .field = F(dp_attention),
     .help = "attention data parallel inside the instance (SGLang --enable-dp-attention)"},
    {.name = "--isl", .kind = LOOM_CLI_SIZE, .field = F(isl), .given = F(isl_given), .lo = 1,
     .hi = LOOM_MODEL_MAX_SEQ, .metavar = "N", .help = "prompt tokens per request (mean)"},
    {.name = "--osl", .kind = LOOM_CLI_SIZE, .field = F(osl), .given = F(osl_given), .lo = 1,
     .hi = LOOM_MODEL_MAX_SEQ, .metavar = "N", .help = "output tokens per request (mean)"},
    {.name = "--len-dist", .kind = LOOM_CLI_ENUM, .field = F(len_dist), .choices = loom_serve_dist_choices,
     .metavar = "D", .help = "length distribution of prompts and outputs"},
    {.name = "--len-spread", .kind = LOOM_CLI_NUM, .field = F(len_spread), .min = 0, .max = 2.99,
     .metavar = "R", .help = "uniform: ±R of the mean (R < 1); lognormal: coefficient of variation\n(ShareGPT: about 1.3)"},
    {.name = "--qps", .kind = LOOM_CLI_NUM, .field = F(qps), .given = F(qps_given), .min = 0,
     .max = 1e7, .metavar = "R", .help = "Poisson arrivals, requests/s", .def = LOOM_CLI_NO_DEFAULT},
    {.name = "--concurrency", .kind = LOOM_CLI_INT, .field = F(concurrency),
     .given = F(conc_given), .lo = 0, .hi = 1 << 24, .metavar = "N",
     .help = "N closed-loop clients", .def = LOOM_CLI_NO_DEFAULT},
    {.name = "--offline", .kind = LOOM_CLI_FLAG, .field = F(offline),
     .help = "every request at time zero (throughput benchmark)"},
    {.name = "--requests", .kind = LOOM_CLI_INT, .field = F(requests), .lo = 0, .hi = 100000000,
     .metavar = "N", .help = "requests in the run, every one measured (genai-perf measures\n"
                             "max(10, 2 × concurrency) from its cold start by default)",
     .def = "60 s of arrivals, 10 × concurrency, at least 200"},
    {.name = "--seed", .kind = LOOM_CLI_INT, .field = F(seed), .lo = 0, .hi = INT64_MAX,
     .metavar = "S", .help = "seed of arrivals and lengths"},
    {.name = "--weights", .kind = LOOM_CLI_ENUM, .field = F(weights), .given = F(weights_given),
     .choices = loom_serve_weight_choices, .metavar = "W", .help = "stored weights: bf16, fp8, int4 (AWQ/GPTQ), mxfp4 (experts), nvfp4 (Blackwell)"},
    {.name = "--kv-dtype", .kind = LOOM_CLI_ENUM, .field = F(kv_dtype), .given = F(kv_given),
     .choices = loom_serve_kv_choices, .metavar = "T", .help = "KV cache dtype",
     .def = "fp8 under --frontend nim with --weights fp8 (NIM's fp8 profiles), else bf16"},
    {.name = "--engine", .kind = LOOM_CLI_ENUM, .field = F(engine), .given = F(engine_given),
     .choices = loom_serve_engine_choices, .metavar = "E", .help = "engine whose policy and defaults apply"},
    {.name = "--frontend", .kind = LOOM_CLI_ENUM, .field = F(frontend), .given = F(frontend_given),
     .choices = loom_serve_frontend_choices, .metavar = "F",
     .help = "what serves the requests: the engine's OpenAI server, NVIDIA NIM's\n"
             "(TensorRT-LLM; implies --trt-engine), or none (a harness calling the\n"
             "engine in-process with token ids, as MLPerf's)", .def = "server"},
    {.name = "--client", .kind = LOOM_CLI_ENUM, .field = F(client),
     .choices = loom_serve_client_choices, .metavar = "C",
     .help = "who sends and reads: one Python asyncio process (vllm bench serve,\n"
             "sglang bench_serving), whose per-chunk parse is a serial queue; parallel\n"
             "(genai-perf's C++ client, AIPerf's workers); both start their clients\n"
             "together; or users: parallel readers whose first requests are spread over\n"
             "one request's duration", .def = "python"},
    {.name = "--trt-engine", .kind = LOOM_CLI_FLAG, .field = F(trt_engine),
     .help = "TensorRT-LLM runs a built TensorRT engine from its C++ executor (releases\n"
             "before 1.0, NIM) instead of 1.x's PyTorch backend"},
    {.name = "--chunked-context", .kind = LOOM_CLI_FLAG, .field = F(chunked_context),
     .help = "TensorRT-LLM: split prompts longer than the token budget over iterations\n"
             "(enable_chunked_context, trtllm-serve's --enable_chunked_prefill; MLPerf's\n"
             "harness sets it; vLLM and SGLang always chunk)"},
    {.name = "--max-num-seqs", .kind = LOOM_CLI_INT, .field = F(max_num_seqs), .lo = 1,
     .hi = 1 << 24, .metavar = "N", .help = "running sequences at most", .def = "the engine's"},
    {.name = "--max-batched-tokens", .kind = LOOM_CLI_SIZE, .field = F(max_batched_tokens),
     .lo = 1, .hi = 1 << 26, .metavar = "N", .help = "token budget of an iteration (chunk size)",
     .def = "the engine's"},
    {.name = "--num-scheduler-steps", .kind = LOOM_CLI_INT, .field = F(scheduler_steps), .lo = 1,
     .hi = 1024, .metavar = "K", .help = "vLLM V0 multi-step scheduling (0.6-0.7): K decode steps per\n"
             "scheduling, streamed as one chunk; V0's policy with it (whole prompts\n"
             "in their own batches)", .def = "1"},
    {.name = "--block-size", .kind = LOOM_CLI_INT, .field = F(block_size), .lo = 1, .hi = 1 << 16,
     .metavar = "N", .help = "KV tokens per block", .def = "the engine's"},
    {.name = "--mem-fraction", .kind = LOOM_CLI_NUM, .field = F(mem_fraction), .min = 0,
     .max = 1, .metavar = "F", .help = "engine memory fraction", .def = "the engine's"},
    {.name = "--ttft", .kind = LOOM_CLI_NUM, .field = F(slo_ttft), .min = 1e-6, .max = 1e6,
     .metavar = "S", .help = "SLO: report the share of requests whose TTFT (seconds) and\n"
                             "TPOT (--tpot) are within bounds", .def = "none"},
    {.name = "--tpot", .kind = LOOM_CLI_NUM, .field = F(slo_tpot), .min = 1e-6, .max = 1e3,
     .metavar = "S", .help = "SLO: time per output token, seconds", .def = "none"},
    {.name = "--steady", .kind = LOOM_CLI_FLAG, .field = F(steady_only),
     .help = "the steady-state estimate only (no simulation)"},
    {.name = "--calib", .kind = LOOM_CLI_STR, .field = F(calib), .metavar = "FILE",
     .help = "training calibration (GEMM size roll-off)", .def = "shipped values"},
    {.name = "--serve-calib", .kind = LOOM_CLI_STR, .field = F(serve_calib), .metavar = "FILE",
     .help = "serving calibration (loom calibrate --serving)", .def = "shipped values"},
    {.name = "--json", .kind = LOOM_CLI_FLAG, .field = F(json), .help = "one JSON object on stdout"},
    {.name = "--from-vllm", .kind = LOOM_CLI_STR, .field = F(from_vllm), .metavar = "L",
     .help = "the deployment of a `vllm serve` line: the text, @FILE or a script"},
    {.name = "--from-sglang", .kind = LOOM_CLI_STR, .field = F(from_sglang), .metavar = "L",
     .help = "the deployment of an SGLang launch_server line"},
};

const loom_cli_spec loom_cli_spec_eval_serve = {
    .cmd = "eval",
    .usage = "usage: loom eval MODEL --cluster C --mode serve --tp T [--pp P] [--ep E] [--dp D]\n"
             "                 --isl N --osl N (--qps R | --concurrency N | --offline) [--requests N]\n"
             "                 [--weights bf16|fp8|int4|mxfp4|nvfp4] [--kv-dtype bf16|fp8]\n"
             "                 [--engine vllm|sglang|trtllm] [--frontend server|nim|none]\n"
             "                 [--client python|parallel|users] [--trt-engine] [--max-num-seqs N]\n"
             "                 [--max-batched-tokens N] [--num-scheduler-steps K] [--json]\n"
             "       loom eval [MODEL] --cluster C --from-vllm \"vllm serve MODEL …\" --isl N …\n"
             "       loom eval [MODEL] --cluster C --from-sglang \"… sglang.launch_server …\" …\n",
    .about = "Predicts one serving deployment: replicas of an engine instance (vLLM, SGLang,\n"
             "TensorRT-LLM) under a workload. Time to first token, time per output token,\n"
             "inter-token and end-to-end latency (mean, p50, p90, p99) from a request-level\n"
             "simulation of the engine's continuous batching, throughput, KV-cache capacity and\n"
             "the memory of a GPU; the steady-state estimate beside them.\n",
    .epilogue = "Exactly one load: --qps, --concurrency or --offline.\n",
    .opts = serve_opts,
    .n_opts = sizeof serve_opts / sizeof serve_opts[0],
    .pos = {.metavar = "MODEL", .field = F(model), .max = 1, .noun = "MODEL",
            .help = "a path or bundled model name (examples/models/)"},
    .args_size = sizeof(serve_args),
    .init = serve_args_init,
};
#undef F

/* "meta-llama/Meta-Llama-3-70B-Instruct" → a bundled examples/models name. */
bool loom_cli_find_model_id(const char *id, char *path, size_t n)
{
    if (loom_cli_find_data(id, "models", path, n)) return true;
    const char *base = strrchr(id, '/');
    base = base ? base + 1 : id;
    char s[256];
    size_t k = 0;
    for (; base[k] && k + 1 < sizeof s; k++) s[k] = (char)tolower((unsigned char)base[k]);
    s[k] = '\0';
    if (!strncmp(s, "meta-", 5)) memmove(s, s + 5, strlen(s + 5) + 1);
    static const char *const sfx[] = {"-instruct", "-chat", "-hf", "-fp8", "-awq", "-gptq",
                                      "-int4", "-v0.1", "-v0.3", "-0528", "-dynamic", "-2507"};
    for (bool cut = true; cut;) {
        cut = false;
        for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
            size_t m = strlen(sfx[i]), l = strlen(s);
            char *at = l >= m ? strstr(s, sfx[i]) : NULL;
            if (at) {
                memmove(at, at + m, strlen(at + m) + 1);
                cut = true;
            }
        }
    }
    if (loom_cli_find_data(s, "models", path, n)) return true;
    /* the same architecture under another name */
    static const char *const alias[][2] = {{"deepseek-r1", "deepseek-v3"},
                                           {"llama-3.3-70b", "llama-3.1-70b"}};
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(s, alias[i][0]) && loom_cli_find_data(alias[i][1], "models", path, n)) return true;
    /* "llama-3.1-70b" when only "llama-3-70b" ships: the same architecture */
    char *dot = strstr(s, "3.1-");
    if (dot) {
        memmove(dot + 1, dot + 3, strlen(dot + 3) + 1);
        if (loom_cli_find_data(s, "models", path, n)) return true;
    }
    return false;
}

static double gib(int64_t b) { return (double)b / (double)((int64_t)1 << 30); }

static void print_dist(const char *name, const loom_serve_dist *d, double scale, const char *unit)
{
    printf("  %-22s %10.2f %10.2f %10.2f %10.2f  %s\n", name, d->mean * scale, d->p50 * scale,
           d->p90 * scale, d->p99 * scale, unit);
}

typedef struct {
    const loom_cluster *c;
    const loom_graph *g;
    const loom_serve_model *m;
    const loom_serve_workload *w;
    const loom_serve_steady_result *st;
    const loom_serve_sim_result *sim;   /* NULL: steady only */
    const char *load_text;
    double slo_ttft_s, slo_tpot_s;      /* 0: not given */
    double attainment;                  /* simulated share within both; < 0: not asked */
} report;

static void print_text(const report *r)
{
    const loom_serve_shape *s = loom_serve_model_shape(r->m);
    const loom_serve_memory *mem = loom_serve_model_memory(r->m);
    const loom_serve_engine *e = loom_serve_model_engine(r->m);
    const loom_serve_parallel *p = &s->par;
    const loom_serve_metrics *mt = r->sim ? &r->sim->m : &r->st->m;
    printf("%s on %s: %s, %lld × instance of tp %lld", loom_graph_name(r->g), r->c->name,
           loom_engine_name(e->kind), (long long)p->replicas, (long long)p->tp);
    if (p->attn_dp > 1) printf(" × attention-dp %lld", (long long)p->attn_dp);
    if (p->pp > 1) printf(" × pp %lld", (long long)p->pp);
    if (p->ep > 1) printf(", ep %lld", (long long)p->ep);
    printf(" (%lld GPUs, %s); weights %s, KV %s\n", (long long)(s->gpus * p->replicas),
           r->c->gpu.name, loom_serve_weights_name(p->weights), loom_dtype_name(p->kv_dtype));
    loom_serve_frontend fe = loom_serve_model_frontend(r->m);
    if (fe != LOOM_FRONTEND_ENGINE || e->compiled_runtime)
        printf("runtime: %s%s\n",
               fe == LOOM_FRONTEND_NIM ? "NIM's server in front of " : fe == LOOM_FRONTEND_NONE
                   ? "no server (in-process harness), " : "",
               e->compiled_runtime ? "a built TensorRT engine on the C++ executor" : "the engine");
    loom_serve_client cl = loom_serve_model_client(r->m);
    if (fe != LOOM_FRONTEND_NONE && cl == LOOM_CLIENT_PARALLEL)
        printf("client: parallel (no single process parses the streams)\n");
    if (fe != LOOM_FRONTEND_NONE && cl == LOOM_CLIENT_USERS)
        printf("client: independent users (no single process parses the streams; clients "
               "not started together)\n");
    printf("engine: max %lld sequences, %lld tokens per iteration, %s prefill%s, block %lld, "
           "memory fraction %.2f%s\n",
           (long long)e->max_num_seqs, (long long)e->max_batched_tokens,
           e->chunked_prefill ? "chunked" : "whole", e->mixed_batches ? " mixed with decodes" : " in its own batches",
           (long long)e->block_size, e->mem_fraction, e->mem_fraction_of_free ? " of free memory" : "");
    if (e->scheduler_steps > 1)
        printf("multi-step: %d decode steps per scheduling, streamed as one chunk\n",
               (int)e->scheduler_steps);
    if (e->overlap_host && !e->compiled_runtime)
        printf("host: the next iteration is scheduled while the GPU runs this one (overlap scheduler)\n");
    printf("workload: ISL %lld, OSL %lld, %s, %lld requests\n", (long long)r->w->isl,
           (long long)r->w->osl, r->load_text, (long long)loom_serve_workload_requests(r->w));
    printf("\nlatency (%s)            mean        p50        p90        p99\n",
           r->sim ? "simulated" : "steady-state");
    print_dist("time to first token", &mt->ttft, 1e3, "ms");
    print_dist("time per output token", &mt->tpot, 1e3, "ms");
    print_dist("inter-token latency", &mt->itl, 1e3, "ms");
    print_dist("end-to-end", &mt->e2e, 1, "s");
    if (r->attainment >= 0) {
        printf("within the SLOs       %9.1f%% of requests (", 100 * r->attainment);
        if (r->slo_ttft_s > 0) printf("TTFT ≤ %g ms%s", r->slo_ttft_s * 1e3, r->slo_tpot_s > 0 ? ", " : "");
        if (r->slo_tpot_s > 0) printf("TPOT ≤ %g ms", r->slo_tpot_s * 1e3);
        printf(")\n");
    }
    printf("\nthroughput           %10.0f output tokens/s (%.0f per GPU), %.2f requests/s\n",
           mt->output_tokens_per_s, mt->output_tokens_per_s / (double)(s->gpus * p->replicas),
           mt->requests_per_s);
    printf("per user             %10.1f tokens/s while decoding\n",
           mt->tpot.mean > 0 ? 1 / mt->tpot.mean : 0);
    printf("running sequences    %10.1f mean per instance; KV cache in use %.0f%% mean, %.0f%% "
           "peak; %lld preemptions\n",
           mt->mean_running, 100 * mt->kv_util_mean, 100 * mt->kv_util_peak,
           (long long)mt->preemptions);
    printf("steady-state         %10.0f output tokens/s, TPOT %.2f ms, TTFT %.1f ms; capacity "
           "%.2f requests/s%s\n",
           r->st->m.output_tokens_per_s, r->st->m.tpot.mean * 1e3, r->st->m.ttft.mean * 1e3,
           r->st->capacity_rps, r->st->m.saturated ? " — the offered load exceeds it" : "");
    loom_serve_iter it;
    loom_serve_batch b = {.n_decode = (int64_t)(r->st->batch + 0.5) > 0 ? (int64_t)(r->st->batch + 0.5) : 1};
    b.decode_ctx = (double)b.n_decode * ((double)r->w->isl + (double)r->w->osl / 2);
    b.n_sampled = b.n_decode;
    loom_serve_iter_time(r->m, &b, &it);
    printf("decode step at %lld   %10.2f ms: weights/GEMMs %.2f, attention %.2f, other %.2f, "
           "communication %.2f, engine %.2f\n",
           (long long)b.n_decode, it.total_s * 1e3, it.gemm_s * 1e3, it.attn_s * 1e3,
           it.other_s * 1e3, it.comm_s * 1e3, it.overhead_s * 1e3);
    printf("\nmemory per GPU (GiB; %s has %.1f)\n", r->c->gpu.name, gib(mem->capacity_bytes));
    const struct { const char *n; int64_t b; } rows[] = {
        {"weights", mem->weights_bytes},       {"KV cache", mem->kv_bytes},
        {"activations", mem->activation_bytes}, {"CUDA graphs", mem->cuda_graph_bytes},
        {"communication", mem->comm_bytes},    {"CUDA context", mem->context_bytes},
        {"total", mem->total_bytes}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        printf("  %-16s %8.2f\n", rows[i].n, gib(rows[i].b));
    printf("KV capacity          %10lld tokens per instance (%.0f bytes per token per GPU); "
           "max concurrency %lld at %lld tokens\n",
           (long long)mem->kv_capacity_tokens, mem->kv_bytes_per_token,
           (long long)mem->max_concurrency,
           (long long)(loom_serve_workload_max_isl(r->w) + loom_serve_workload_max_osl(r->w)));
}

static void add_dist(cJSON *o, const char *k, const loom_serve_dist *d)
{
    cJSON *x = cJSON_AddObjectToObject(o, k);
    cJSON_AddNumberToObject(x, "mean", d->mean);
    cJSON_AddNumberToObject(x, "p50", d->p50);
    cJSON_AddNumberToObject(x, "p90", d->p90);
    cJSON_AddNumberToObject(x, "p99", d->p99);
}

static cJSON *memory_json(const loom_serve_memory *mem)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "weights", (double)mem->weights_bytes);
    cJSON_AddNumberToObject(m, "kv_cache", (double)mem->kv_bytes);
    cJSON_AddNumberToObject(m, "activations", (double)mem->activation_bytes);
    cJSON_AddNumberToObject(m, "cuda_graphs", (double)mem->cuda_graph_bytes);
    cJSON_AddNumberToObject(m, "communication", (double)mem->comm_bytes);
    cJSON_AddNumberToObject(m, "cuda_context", (double)mem->context_bytes);
    cJSON_AddNumberToObject(m, "total", (double)mem->total_bytes);
    cJSON_AddNumberToObject(m, "capacity", (double)mem->capacity_bytes);
    return m;
}

static int print_json(const report *r)
{
    const loom_serve_shape *s = loom_serve_model_shape(r->m);
    const loom_serve_memory *mem = loom_serve_model_memory(r->m);
    const loom_serve_engine *e = loom_serve_model_engine(r->m);
    const loom_serve_metrics *mt = r->sim ? &r->sim->m : &r->st->m;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", loom_graph_name(r->g));
    cJSON_AddStringToObject(o, "cluster", r->c->name);
    cJSON_AddStringToObject(o, "gpu", r->c->gpu.name);
    cJSON_AddStringToObject(o, "mode", "serve");
    cJSON_AddStringToObject(o, "source", r->sim ? "simulator" : "steady-state");
    cJSON_AddNumberToObject(o, "ttft_s", mt->ttft.mean);
    cJSON_AddNumberToObject(o, "ttft_p99_s", mt->ttft.p99);
    cJSON_AddNumberToObject(o, "tpot_s", mt->tpot.mean);
    cJSON_AddNumberToObject(o, "itl_s", mt->itl.mean);
    cJSON_AddNumberToObject(o, "itl_p99_s", mt->itl.p99);
    cJSON_AddNumberToObject(o, "e2e_s", mt->e2e.mean);
    cJSON_AddNumberToObject(o, "output_tokens_per_s", mt->output_tokens_per_s);
    cJSON_AddNumberToObject(o, "requests_per_s", mt->requests_per_s);
    cJSON_AddNumberToObject(o, "input_tokens_per_s", mt->input_tokens_per_s);
    if (r->attainment >= 0) cJSON_AddNumberToObject(o, "slo_attainment", r->attainment);
    cJSON_AddNumberToObject(o, "kv_capacity_tokens", (double)mem->kv_capacity_tokens);
    cJSON_AddNumberToObject(o, "max_concurrency", (double)mem->max_concurrency);
    cJSON_AddNumberToObject(o, "kv_bytes_per_token", mem->kv_bytes_per_token);
    cJSON_AddBoolToObject(o, "fits", mem->fits);
    cJSON_AddNumberToObject(o, "gpus", (double)(s->gpus * s->par.replicas));
    cJSON *cfg = cJSON_AddObjectToObject(o, "config");
    cJSON_AddStringToObject(cfg, "engine", loom_engine_name(e->kind));
    cJSON_AddStringToObject(cfg, "frontend", loom_serve_frontend_name(loom_serve_model_frontend(r->m)));
    cJSON_AddStringToObject(cfg, "client", loom_serve_client_name(loom_serve_model_client(r->m)));
    cJSON_AddBoolToObject(cfg, "trt_engine", e->compiled_runtime);
    cJSON_AddNumberToObject(cfg, "tp", (double)s->par.tp);
    cJSON_AddNumberToObject(cfg, "pp", (double)s->par.pp);
    cJSON_AddNumberToObject(cfg, "ep", (double)s->par.ep);
    cJSON_AddNumberToObject(cfg, "attention_dp", (double)s->par.attn_dp);
    cJSON_AddNumberToObject(cfg, "replicas", (double)s->par.replicas);
    cJSON_AddStringToObject(cfg, "weights", loom_serve_weights_name(s->par.weights));
    cJSON_AddStringToObject(cfg, "kv_dtype", loom_dtype_name(s->par.kv_dtype));
    cJSON_AddNumberToObject(cfg, "max_num_seqs", (double)e->max_num_seqs);
    cJSON_AddNumberToObject(cfg, "max_batched_tokens", (double)e->max_batched_tokens);
    cJSON_AddBoolToObject(cfg, "chunked_prefill", e->chunked_prefill);
    cJSON_AddNumberToObject(cfg, "block_size", (double)e->block_size);
    cJSON_AddNumberToObject(cfg, "scheduler_steps", e->scheduler_steps > 1 ? e->scheduler_steps : 1);
    cJSON_AddBoolToObject(cfg, "overlap_host", e->overlap_host && !e->compiled_runtime);
    cJSON_AddNumberToObject(cfg, "mem_fraction", e->mem_fraction);
    cJSON *wl = cJSON_AddObjectToObject(o, "workload");
    cJSON_AddNumberToObject(wl, "isl", (double)r->w->isl);
    cJSON_AddNumberToObject(wl, "osl", (double)r->w->osl);
    cJSON_AddStringToObject(wl, "load", r->load_text);
    cJSON_AddNumberToObject(wl, "requests", (double)loom_serve_workload_requests(r->w));
    cJSON *met = cJSON_AddObjectToObject(o, "metrics");
    add_dist(met, "ttft_s", &mt->ttft);
    add_dist(met, "tpot_s", &mt->tpot);
    add_dist(met, "itl_s", &mt->itl);
    add_dist(met, "e2e_s", &mt->e2e);
    cJSON_AddNumberToObject(met, "duration_s", mt->duration_s);
    cJSON_AddNumberToObject(met, "mean_running", mt->mean_running);
    cJSON_AddNumberToObject(met, "kv_util_mean", mt->kv_util_mean);
    cJSON_AddNumberToObject(met, "kv_util_peak", mt->kv_util_peak);
    cJSON_AddNumberToObject(met, "preemptions", (double)mt->preemptions);
    cJSON *st = cJSON_AddObjectToObject(o, "steady_state");
    cJSON_AddNumberToObject(st, "ttft_s", r->st->m.ttft.mean);
    cJSON_AddNumberToObject(st, "tpot_s", r->st->m.tpot.mean);
    cJSON_AddNumberToObject(st, "output_tokens_per_s", r->st->m.output_tokens_per_s);
    cJSON_AddNumberToObject(st, "requests_per_s", r->st->m.requests_per_s);
    cJSON_AddNumberToObject(st, "batch", r->st->batch);
    cJSON_AddNumberToObject(st, "capacity_requests_per_s", r->st->capacity_rps);
    cJSON_AddBoolToObject(st, "saturated", r->st->m.saturated);
    cJSON_AddItemToObject(o, "memory_bytes", memory_json(mem));
    if (r->sim) {
        cJSON *tl = cJSON_AddArrayToObject(o, "kv_timeline");
        for (int32_t i = 0; i < r->sim->n_timeline; i++) {
            double pt[2] = {r->sim->timeline_t_s[i], r->sim->timeline_kv[i]};
            cJSON_AddItemToArray(tl, cJSON_CreateDoubleArray(pt, 2));
        }
    }
    char *text = loom_json_print(o);
    cJSON_Delete(o);
    if (!text) {
        fprintf(stderr, "loom eval: out of memory\n");
        return LOOM_EXIT_FAIL;
    }
    fputs(text, stdout);
    free(text);
    return LOOM_EXIT_OK;
}

/* The simulation with each request's times: the share of requests within
 * both SLO bounds of a (the first replica's requests, as simulated). */
static int simulate_slo(const loom_serve_model *m, const loom_serve_workload *w,
                        const serve_args *a, loom_serve_sim_result *sim, double *attainment)
{
    int64_t rep = loom_serve_model_shape(m)->par.replicas;
    int64_t n = (loom_serve_workload_requests(w) + rep - 1) / rep;
    loom_serve_sim_record rec = {.ttft_s = malloc((size_t)n * sizeof(double)),
                                 .tpot_s = malloc((size_t)n * sizeof(double)), .cap = n};
    loom_error err = {0};
    int rc = LOOM_EXIT_OK;
    if (!rec.ttft_s || !rec.tpot_s) {
        fprintf(stderr, "loom eval: out of memory\n");
        rc = LOOM_EXIT_FAIL;
    } else if (loom_serve_simulate_record(m, w, &rec, sim, &err)) {
        rc = loom_cli_fail(&err);
    } else {
        int64_t met = 0;
        for (int64_t i = 0; i < rec.n; i++)
            met += (a->slo_ttft <= 0 || rec.ttft_s[i] <= a->slo_ttft) &&
                   (a->slo_tpot <= 0 || rec.tpot_s[i] <= a->slo_tpot);
        *attainment = rec.n > 0 ? (double)met / (double)rec.n : 0;
    }
    free(rec.ttft_s);
    free(rec.tpot_s);
    return rc;
}

/* The line's deployment into a; the options given on the command line win. */
static int apply_launch(serve_args *a, loom_serve_launch *l, char *path, size_t n)
{
    loom_error err = {0};
    bool vllm = a->from_vllm != NULL;
    if (loom_serve_launch_read(vllm ? "--from-vllm" : "--from-sglang",
                               vllm ? a->from_vllm : a->from_sglang,
                               vllm ? LOOM_ENGINE_VLLM : LOOM_ENGINE_SGLANG, l, &err))
        return loom_cli_fail(&err);
    if (!a->engine_given) a->engine = l->engine;
    int64_t tp = l->tp ? l->tp : 1, dp = l->dp ? l->dp : 1;
    if (!a->tp_given) a->tp = tp;
    if (!a->dp_given) a->dp = dp;
    if (!a->pp_given && l->pp) a->pp = l->pp;
    if (l->dp_attention) {   /* SGLang: --tp is the whole group, attention tp = tp / dp */
        a->dp_attention = true;
        if (!a->tp_given && dp > 1 && tp % dp == 0) a->tp = tp / dp;
    }
    if (!a->ep_given) {
        if (l->ep) a->ep = l->ep;
        else if (l->expert_parallel) a->ep = l->dp_attention ? tp : tp * dp;
    }
    if (!a->weights_given && l->weights[0]) {
        loom_serve_weights w;
        if (loom_serve_weights_parse(l->weights, &w)) a->weights = w;
    }
    if (!a->kv_given && !strcmp(l->kv_dtype, "fp8")) a->kv_dtype = LOOM_DTYPE_FP8, a->kv_given = true;
    if (!a->model) {
        if (!l->model[0] || !loom_cli_find_model_id(l->model, path, n)) {
            fprintf(stderr, "loom eval: the launch line serves '%s', which is not a bundled model; "
                    "give MODEL (its config.json)\n", l->model[0] ? l->model : "(no model)");
            return LOOM_EXIT_FAIL;
        }
        a->model = path;
    }
    return LOOM_CLI_RUN;
}

int loom_cmd_eval_serve(int argc, char **argv)
{
    serve_args a;
    int rc = loom_cli_parse(&loom_cli_spec_eval_serve, argc, argv, &a);
    if (rc != LOOM_CLI_RUN) return rc;
    if (a.mode != 1 && !a.from_vllm && !a.from_sglang)
        return loom_cli_usage_error("eval", "this is the serving evaluator: --mode serve");
    if (a.from_vllm && a.from_sglang)
        return loom_cli_usage_error("eval", "give --from-vllm or --from-sglang, not both");
    char mpath[4096];
    loom_serve_launch line;
    bool have_line = a.from_vllm || a.from_sglang;
    if (have_line && (rc = apply_launch(&a, &line, mpath, sizeof mpath)) != LOOM_CLI_RUN) return rc;
    if (!a.model) return loom_cli_usage_error("eval", "missing MODEL (a path or a bundled name)");
    if (!a.cluster) return loom_cli_usage_error("eval", "missing --cluster (a preset or a file)");
    if (!a.isl_given || !a.osl_given)
        return loom_cli_usage_error("eval", "--mode serve needs --isl and --osl (prompt and output "
                                    "tokens per request)");
    int loads = (a.qps_given ? 1 : 0) + (a.conc_given ? 1 : 0) + (a.offline ? 1 : 0);
    if (loads != 1)
        return loom_cli_usage_error("eval", "--mode serve needs exactly one load: --qps R, "
                                    "--concurrency N or --offline (got %d)", loads);

    loom_error err = {0};
    loom_cluster cluster;
    char path[4096];
    const char *cl = loom_cli_find_data(a.cluster, "clusters", path, sizeof path) &&
                             !loom_cluster_is_preset_name(a.cluster)
                         ? path
                         : a.cluster;
    if (loom_cluster_load(cl, &cluster, &err)) return loom_cli_fail(&err);
    loom_calib cal;
    if (a.calib && loom_calib_load(a.calib, &cal, &err)) return loom_cli_fail(&err);
    loom_serve_calib scal;
    if (a.serve_calib && loom_serve_calib_load(a.serve_calib, &scal, &err)) return loom_cli_fail(&err);
    if (a.model != mpath && !loom_cli_find_data(a.model, "models", path, sizeof path)) {
        fprintf(stderr, "loom: %s: no such file, and no bundled model of that name "
                "(see examples/models/)\n", a.model);
        return LOOM_EXIT_FAIL;
    }
    const char *model_path = a.model == mpath ? mpath : path;
    loom_model_opts mo;
    loom_model_opts_init(&mo);
    mo.seq = 1;
    mo.batch = 1;
    loom_graph *g = NULL;
    if (loom_model_load(model_path, &mo, &g, &err)) return loom_cli_fail(&err);
    const loom_model_info *mi = loom_graph_info_c(g);

    loom_serve_workload w;
    loom_serve_workload_init(&w);
    w.isl = a.isl;
    w.osl = a.osl;
    w.isl_dist = w.osl_dist = (loom_len_dist)a.len_dist;
    w.isl_spread = w.osl_spread = a.len_dist == LOOM_LEN_FIXED ? 0 : a.len_spread;
    w.load = a.qps_given ? LOOM_LOAD_QPS : a.conc_given ? LOOM_LOAD_CONCURRENCY : LOOM_LOAD_OFFLINE;
    w.rate = a.qps;
    w.concurrency = a.concurrency;
    w.num_requests = a.requests;
    w.seed = (uint64_t)a.seed;
    char load_text[64];
    if (w.load == LOOM_LOAD_QPS) snprintf(load_text, sizeof load_text, "Poisson %g requests/s", a.qps);
    else if (w.load == LOOM_LOAD_CONCURRENCY)
        snprintf(load_text, sizeof load_text, "%lld concurrent clients", (long long)a.concurrency);
    else snprintf(load_text, sizeof load_text, "offline (all at once)");

    if (!loom_cli_serve_runtime_check("eval", a.frontend, a.trt_engine, a.engine_given, &a.engine)) {
        loom_graph_destroy(g);
        return LOOM_EXIT_USAGE;
    }
    loom_serve_model_opts o = {.graph = g, .cluster = &cluster, .calib = a.calib ? &cal : NULL,
                               .serve_calib = a.serve_calib ? &scal : NULL};
    loom_serve_parallel_init(&o.par);
    o.par.tp = a.tp;
    o.par.pp = a.pp;
    o.par.ep = a.ep;
    bool attn_dp = a.dp_attention || (mi->experts > 0 && a.ep > 1 && a.dp > 1);
    if (attn_dp) o.par.attn_dp = a.dp;
    else o.par.replicas = a.dp;
    o.par.weights = (loom_serve_weights)a.weights;
    if (!a.weights_given) {
        int qw;
        if (loom_cli_checkpoint_weights(model_path, &qw)) o.par.weights = (loom_serve_weights)qw;
    }
    o.par.kv_dtype = a.kv_given ? (loom_dtype)a.kv_dtype
                                : loom_serve_default_kv_dtype(o.par.weights,
                                                              a.frontend == LOOM_FRONTEND_NIM);
    loom_serve_engine_defaults((loom_engine_kind)a.engine, &cluster.gpu, a.tp * o.par.attn_dp,
                               &o.engine);
    if (have_line) loom_serve_launch_apply(&line, &o.engine);
    if (a.scheduler_steps > 1 && o.engine.kind != LOOM_ENGINE_VLLM) {
        fprintf(stderr, "loom eval: --num-scheduler-steps is vLLM's (V0 multi-step scheduling); "
                "the engine here is %s\n", loom_engine_name(o.engine.kind));
        loom_graph_destroy(g);
        return LOOM_EXIT_USAGE;
    }
    if (a.scheduler_steps > 1)
        loom_serve_engine_multi_step(&o.engine, (int32_t)a.scheduler_steps,
                                     have_line ? line.max_model_len : 0);
    if (a.chunked_context && o.engine.kind != LOOM_ENGINE_TRTLLM) {
        fprintf(stderr, "loom eval: --chunked-context is TensorRT-LLM's (%s always chunks "
                "prompts)\n", loom_engine_name(o.engine.kind));
        loom_graph_destroy(g);
        return LOOM_EXIT_USAGE;
    }
    if (a.chunked_context) o.engine.chunked_prefill = true;
    if (a.max_num_seqs) o.engine.max_num_seqs = a.max_num_seqs;
    if (a.max_batched_tokens) o.engine.max_batched_tokens = a.max_batched_tokens;
    if (a.block_size) o.engine.block_size = a.block_size;
    if (a.mem_fraction > 0) o.engine.mem_fraction = a.mem_fraction;
    o.frontend = (loom_serve_frontend)a.frontend;
    o.client = (loom_serve_client)a.client;
    o.engine.compiled_runtime = a.trt_engine || o.frontend == LOOM_FRONTEND_NIM;
    o.seq_tokens = loom_serve_workload_max_isl(&w) + loom_serve_workload_max_osl(&w);
    if (have_line && line.max_model_len > 0 && o.seq_tokens > line.max_model_len) {
        fprintf(stderr, "loom eval: --isl %lld + --osl %lld exceeds the launch line's "
                "--max-model-len %lld\n", (long long)a.isl, (long long)a.osl,
                (long long)line.max_model_len);
        loom_graph_destroy(g);
        return LOOM_EXIT_FAIL;
    }

    loom_serve_model *m = NULL;
    loom_serve_steady_result st;
    loom_serve_sim_result *sim = NULL;
    double attainment = -1;
    if (loom_serve_model_create(&o, &m, &err)) {
        rc = loom_cli_fail(&err);
        goto done;
    }
    if (loom_serve_workload_check(&w, mi->max_positions, &err)) {
        rc = loom_cli_fail(&err);
        goto done;
    }
    const loom_serve_memory *mem = loom_serve_model_memory(m);
    if (!mem->fits) {
        fprintf(stderr, "loom eval: does not fit: %s needs %.1f GiB of weights per GPU; %s has "
                "%.1f GiB and the engine leaves no KV cache for a request of %lld tokens\n",
                loom_graph_name(g), gib(mem->weights_bytes), cluster.gpu.name,
                gib(mem->capacity_bytes), (long long)o.seq_tokens);
        rc = LOOM_EXIT_INFEASIBLE;
        goto done;
    }
    if (loom_serve_steady(m, &w, &st, &err)) {
        rc = loom_cli_fail(&err);
        goto done;
    }
    if (!a.steady_only) {
        sim = malloc(sizeof *sim);
        if (!sim) {
            fprintf(stderr, "loom eval: out of memory\n");
            rc = LOOM_EXIT_FAIL;
            goto done;
        }
        if ((a.slo_ttft > 0 || a.slo_tpot > 0) &&
            (rc = simulate_slo(m, &w, &a, sim, &attainment)) != LOOM_EXIT_OK)
            goto done;
        if (attainment < 0 && loom_serve_simulate(m, &w, sim, &err)) {
            rc = loom_cli_fail(&err);
            goto done;
        }
    }
    report r = {&cluster, g, m, &w, &st, sim, load_text, a.slo_ttft, a.slo_tpot, attainment};
    rc = LOOM_EXIT_OK;
    if (a.json) rc = print_json(&r);
    else print_text(&r);
done:
    free(sim);
    loom_serve_model_destroy(m);
    loom_graph_destroy(g);
    return rc;
}
