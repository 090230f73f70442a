/*
 * cmd_plan.c — `loom plan`: the placement plan of a model on a cluster.
 *
 * Reads the options, runs loom_plan_run (plan_run.h) and prints a summary
 * table; writes the plan (-o, loom-plan/1), its picture (--svg) and the
 * profile requests (--emit-profile-requests), each atomically and only on
 * success. With no MODEL it plans the bundled example, Llama-3-8B on two
 * DGX H100 nodes. Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the search and
 * plan with the best configuration found so far; a second signal ends the
 * program at once and removes what this run was writing (the temporary of
 * the write in progress, loom_fileio_unlink_inflight) or had written, so
 * nothing partial is left.
 *
 * Exit codes: 0 planned, 1 bad input or failure, 2 usage, 3 no plan fits.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costs/cluster.h"
#include "base/clock.h"
#include "base/fileio.h"
#include "planner/cli/cli.h"
#include "planner/plan/plan_run.h"

static const char usage_text[] =
    "usage: loom plan [MODEL] [--cluster C] [--gbs N] [--seq N] [options]\n"
    "\n"
    "Plans MODEL (an HF config.json, a loom graph, or a bundled name such as\n"
    "llama-3-70b) on cluster C (a preset such as dgx-h100-x16 or a loom-cluster/1\n"
    "file): pipeline stages, their GPUs and logical meshes, every op's sharding,\n"
    "the schedule, and the predicted step time, throughput, MFU and memory.\n"
    "Without MODEL: the bundled example, llama-3-8b on dgx-h100-x2.\n"
    "\n"
    "  --cluster C            cluster preset or file (required with MODEL)\n"
    "  --gbs N                training: global batch in sequences (default 256);\n"
    "                         inference: concurrent sequences\n"
    "  --seq N                tokens per sequence / inference context (default 4096)\n"
    "  --mode train|infer     (default train)\n"
    "  --objective O          train: time|cost|energy (default time);\n"
    "                         infer: latency|throughput (default latency)\n"
    "  --latency-bound S      infer throughput: per-token latency bound, seconds\n"
    "  --space full|megatron  megatron: only plans Megatron-LM/vLLM can run\n"
    "  --dtype bf16|fp16|fp8  (default bf16)\n"
    "  --profile DB           measured op times (loom-profile db)\n"
    "  --calib FILE           calibrated efficiencies (loom calibrate)\n"
    "  --time-limit S         stop the search after S seconds with the best so far\n"
    "  --max-mbs N            largest micro-batch tried (default 8)\n"
    "  --zero N               ZeRO stage over the data-parallel group: the replicas and a stage's\n"
    "                         in-mesh data-parallel copies (default: the search tries 1-3;\n"
    "                         1 with one replica)\n"
    "  --no-recompute         do not consider activation recomputation\n"
    "  -o FILE                write the plan (loom-plan/1 JSON)\n"
    "  --svg FILE             draw the placement and the pipeline schedule\n"
    "  --emit-profile-requests FILE\n"
    "                         the op shapes the search evaluated, for loom-profile\n"
    "  --json                 print the plan JSON instead of the table\n"
    "  --no-timings           write search.time_s as 0 (also LOOM_DETERMINISTIC=1)\n";

static volatile sig_atomic_t interrupted;
static volatile int stop_flag;

/* The output files of this run, for the second signal: their paths, and
 * whether the file itself has been written by this run. */
#define MAX_OUTPUTS 3
static char out_path[MAX_OUTPUTS][4096];
static volatile sig_atomic_t out_written[MAX_OUTPUTS], n_outputs;

/* The signals that stop a search: Ctrl-C, kill's default, a closed terminal. */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_STOP_SIGNALS (int)(sizeof stop_signals / sizeof stop_signals[0])

static void on_stop_signal(int sig)
{
    if (interrupted) {   /* second signal: give up at once, leave nothing */
        loom_fileio_unlink_inflight();   /* async-signal-safe (unlink) */
        for (int i = 0; i < n_outputs; i++)
            if (out_written[i]) unlink(out_path[i]);
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    interrupted = 1;
    stop_flag = 1;
}

/* Registers an output path before it is written. */
static int add_output(const char *path)
{
    if (!path || !strcmp(path, "-") || n_outputs >= MAX_OUTPUTS) return -1;
    int i = n_outputs;
    snprintf(out_path[i], sizeof out_path[i], "%s", path);
    out_written[i] = 0;
    n_outputs = i + 1;
    return i;
}

static void catch_stop_signals(struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_STOP_SIGNALS; i++) sigaddset(&sa.sa_mask, stop_signals[i]);
    for (int i = 0; i < N_STOP_SIGNALS; i++) sigaction(stop_signals[i], &sa, &old[i]);
}

static void restore_signals(const struct sigaction *old)
{
    for (int i = 0; i < N_STOP_SIGNALS; i++) sigaction(stop_signals[i], &old[i], NULL);
}

typedef struct {
    double start_s;
    bool tty, shown;
} progress_state;

static double since(double t0_s) { return loom_clock_s() - t0_s; }

/* Progress on a terminal only, and only once the search has taken a while. */
static void progress(void *ctx, double done, const char *what)
{
    progress_state *ps = ctx;
    if (!ps->tty || since(ps->start_s) < 1.0) return;
    fprintf(stderr, "\r\033[Ksearching: %3.0f%%  %s", 100 * done, what);
    fflush(stderr);
    ps->shown = true;
}

static const char *gib(int64_t bytes, char *buf, size_t n)
{
    snprintf(buf, n, "%.1f GiB", (double)bytes / 1073741824.0);
    return buf;
}

static void print_table(const loom_plan *p)
{
    char a[32], b[32];
    bool train = p->mode == LOOM_PLAN_TRAIN;
    printf("loom plan: %s on %s (%lld x %s), %s, %s %lld x seq %lld, %s, objective %s\n",
           p->model, p->cluster, (long long)(p->nodes * p->gpus_per_node), p->gpu,
           train ? "training" : "inference", train ? "gbs" : "sequences", (long long)p->gbs,
           (long long)p->seq, loom_dtype_name(p->dtype), loom_plan_objective_name(p->objective));
    printf("  schedule    %s: %lld pipeline stage(s)%s x %lld data-parallel replica(s) of %lld GPUs"
           ", micro-batch %lld x %lld",
           p->schedule_kind, (long long)p->pipeline_stages,
           p->virtual_stages > 1 ? " (interleaved)" : "", (long long)p->data_parallel,
           (long long)p->gpus_per_replica, (long long)p->micro_batch, (long long)p->micro_batches);
    if (train && p->n_stages > 0 && p->stages[0].zero > 0)   /* one ZeRO stage for all stages */
        printf(", ZeRO-%d", p->stages[0].zero);
    printf("\n");
    if (train)
        printf("  step        %.4g s   %.4g tokens/s   %.1f TFLOP/s per GPU   MFU %.1f%%\n",
               p->step_time_s, p->tokens_per_s, p->model_tflops_per_gpu, 100 * p->mfu);
    else
        printf("  decode      %.4g s per token   %.4g tokens/s   %.1f TFLOP/s per GPU   MFU %.1f%%\n",
               p->latency_per_token_s, p->tokens_per_s, p->model_tflops_per_gpu, 100 * p->mfu);
    const loom_plan_breakdown *d = &p->breakdown;
    printf("  breakdown   compute %.4g  tp-comm %.4g  bubble %.4g  p2p %.4g  grad-sync %.4g  "
           "optimizer %.4g  (s)\n",
           d->compute_s, d->tp_comm_s, d->bubble_s, d->p2p_s, d->grad_sync_s, d->optimizer_s);
    printf("  memory      %s per GPU at most, of %s\n", gib(p->memory_per_gpu_bytes, a, sizeof a),
           gib(p->gpu_memory_bytes, b, sizeof b));
    if (p->cost_per_step_usd >= 0)
        printf("  cost        $%.4g per step, $%.4g per million tokens\n", p->cost_per_step_usd,
               p->cost_per_mtoken_usd);
    if (p->energy_per_step_j >= 0)
        printf("  energy      %.4g kJ per step, %.4g J per token\n", p->energy_per_step_j / 1e3,
               p->energy_per_token_j);
    printf("\n  %-5s %-5s %-9s %-14s %-6s %-7s %-3s %-3s %-3s %-9s %-10s %s\n", "stage", "rank",
           "layers", "GPUs (rep. 0)", "nodes", "mesh", "tp", "dp", "sp", "recompute",
           "time/mb", "memory/GPU");
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_stage *s = &p->stages[i];
        char layers[24], gpus[40], mesh[24];
        snprintf(layers, sizeof layers, "%d-%d", (int)s->first_layer, (int)s->last_layer);
        if (s->n_gpus == 1) snprintf(gpus, sizeof gpus, "%lld", (long long)s->gpus[0]);
        else
            snprintf(gpus, sizeof gpus, "%lld-%lld", (long long)s->gpus[0],
                     (long long)s->gpus[s->n_gpus - 1]);
        snprintf(mesh, sizeof mesh, "%lldx%lld", (long long)s->mesh[0], (long long)s->mesh[1]);
        printf("  %-5d %-5d %-9s %-14s %-6lld %-7s %-3lld %-3lld %-3s %-9s %-10.4g %s\n", (int)i,
               (int)s->group, layers, gpus, (long long)s->submesh_nodes, mesh,
               (long long)s->tensor_parallel, (long long)s->data_parallel,
               s->sequence_parallel ? "yes" : "no", loom_recompute_name(s->recompute), s->time_s,
               gib(s->memory.total, a, sizeof a));
    }
    printf("\n  search      %s: %.2f s, %lld ILP solves, %lld DP runs, %lld configurations "
           "evaluated (%s)\n",
           p->algorithm, p->search_time_s, (long long)p->ilp_solves, (long long)p->dp_runs,
           (long long)p->configs_evaluated, p->search_status);
    if (p->measured_share > 0)
        printf("  measured    %.0f%% of predicted compute time from the profile db\n",
               100 * p->measured_share);
}

/* The cannot-fit message: how much a GPU would need, and what would help. */
static int cannot_fit(const loom_plan_request *req, const loom_plan_diag *dg, const loom_error *err)
{
    fprintf(stderr, "loom plan: %s\n", err->msg);
    if (dg->min_memory_bytes <= 0 || dg->gpu_memory_bytes <= 0) return LOOM_EXIT_INFEASIBLE;
    double need = (double)dg->min_memory_bytes, have = (double)dg->gpu_memory_bytes;
    fprintf(stderr, "  what would make it fit:\n");
    int64_t nodes = dg->gpus_per_node > 0 ? dg->gpus / dg->gpus_per_node : 1, more = 1;
    while ((double)more * have < need && more < (1 << 20)) more *= 2;
    fprintf(stderr, "    - more GPUs: about %lldx the memory, e.g. %lld nodes instead of %lld "
                    "(weights and optimizer state split further)\n",
            (long long)(more > 1 ? more : 2), (long long)(nodes * (more > 1 ? more : 2)),
            (long long)nodes);
    if (req->no_recompute)
        fprintf(stderr, "    - activation recomputation: drop --no-recompute\n");
    if (req->zero >= 0 && req->zero < 3 && req->mode == LOOM_PLAN_TRAIN)
        fprintf(stderr, "    - ZeRO-3 (--zero 3): shard the weights and gradients over the "
                        "replicas as well\n");
    if (req->seq > 512)
        fprintf(stderr, "    - a shorter sequence (--seq %lld): activations%s shrink with it\n",
                (long long)(req->seq / 2), req->mode == LOOM_PLAN_INFER ? " and KV cache" : "");
    if (req->mode == LOOM_PLAN_INFER && req->gbs > 1)
        fprintf(stderr, "    - fewer concurrent sequences (--gbs %lld)\n", (long long)(req->gbs / 2));
    return LOOM_EXIT_INFEASIBLE;
}

int loom_cmd_plan(int argc, char **argv)
{
    const char *cmd = "plan", *model = NULL, *cluster = NULL, *out = NULL, *svg = NULL;
    const char *v, *mode = NULL, *objective = NULL;
    bool json = false, no_timings = false;
    loom_plan_request req;
    loom_plan_request_init(&req);
    for (int i = 1; i < argc;) {
        const char *a = argv[i];
        int r;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return LOOM_EXIT_OK;
        }
        if (!strcmp(a, "--json")) json = true, i++;
        else if (!strcmp(a, "--no-timings")) no_timings = true, i++;
        else if (!strcmp(a, "--no-recompute")) req.no_recompute = true, i++;
        else if ((r = loom_cli_opt(argc, argv, &i, "--cluster", &cluster))) {
            if (r < 0) return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--gbs", &v))) {
            if (r < 0 || !loom_cli_int(cmd, "--gbs", v, 1, (int64_t)1 << 30, &req.gbs))
                return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--seq", &v))) {
            if (r < 0 || !loom_cli_int(cmd, "--seq", v, 1, (int64_t)1 << 24, &req.seq))
                return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--mode", &mode))) {
            if (r < 0) return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--objective", &objective))) {
            if (r < 0) return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--latency-bound", &v))) {
            if (r < 0 || !loom_cli_num(cmd, "--latency-bound", v, 1e-9, 1e6, &req.latency_bound_s))
                return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--space", &v))) {
            if (r < 0) return LOOM_EXIT_USAGE;
            if (strcmp(v, "full") && strcmp(v, "megatron"))
                return loom_cli_usage_error(cmd, "--space expects full or megatron, got '%s'", v);
            req.megatron_space = !strcmp(v, "megatron");
        } else if ((r = loom_cli_opt(argc, argv, &i, "--dtype", &v))) {
            if (r < 0) return LOOM_EXIT_USAGE;
            if (!loom_dtype_parse(v, &req.dtype) ||
                (req.dtype != LOOM_DTYPE_BF16 && req.dtype != LOOM_DTYPE_FP16 &&
                 req.dtype != LOOM_DTYPE_FP8))
                return loom_cli_usage_error(cmd, "--dtype expects bf16, fp16 or fp8, got '%s'", v);
        } else if ((r = loom_cli_opt(argc, argv, &i, "--profile", &req.profile_db_path))) {
            if (r < 0) return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--calib", &req.calib_path))) {
            if (r < 0) return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--time-limit", &v))) {
            if (r < 0 || !loom_cli_num(cmd, "--time-limit", v, 1e-3, 1e7, &req.time_limit_s))
                return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--max-mbs", &v))) {
            if (r < 0 || !loom_cli_int(cmd, "--max-mbs", v, 1, 1024, &req.max_micro_batch))
                return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--zero", &v))) {
            int64_t z;
            if (r < 0 || !loom_cli_int(cmd, "--zero", v, 0, 3, &z)) return LOOM_EXIT_USAGE;
            req.zero = (int)z;
        } else if ((r = loom_cli_opt(argc, argv, &i, "-o", &out))) {
            if (r < 0) return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--svg", &svg))) {
            if (r < 0) return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--emit-profile-requests",
                                     &req.profile_requests_path))) {
            if (r < 0) return LOOM_EXIT_USAGE;
        } else if (a[0] == '-' && a[1]) {
            return loom_cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (!model) {
            model = a, i++;
        } else {
            return loom_cli_usage_error(cmd, "one model only (got '%s' and '%s')", model, a);
        }
    }
    if (mode && !loom_plan_mode_parse(mode, &req.mode))
        return loom_cli_usage_error(cmd, "--mode expects train or infer, got '%s'", mode);
    if (req.mode == LOOM_PLAN_INFER) req.objective = LOOM_OBJ_LATENCY;
    if (objective && !loom_plan_objective_parse(objective, &req.objective))
        return loom_cli_usage_error(cmd, "--objective expects time, cost, energy, latency or "
                                         "throughput, got '%s'", objective);
    bool infer_obj = req.objective == LOOM_OBJ_LATENCY || req.objective == LOOM_OBJ_THROUGHPUT;
    if (infer_obj != (req.mode == LOOM_PLAN_INFER))
        return loom_cli_usage_error(cmd, "--objective %s is for %s (use --mode %s)",
                                    loom_plan_objective_name(req.objective),
                                    infer_obj ? "inference" : "training",
                                    infer_obj ? "infer" : "train");
    if (!model) {   /* the bundled example */
        model = "llama-3-8b";
        if (!cluster) cluster = "dgx-h100-x2";
    }
    if (!cluster) return loom_cli_usage_error(cmd, "--cluster is required with a model");
    char model_path[4096], cluster_path[4096];
    if (!loom_cli_find_data(model, "models", model_path, sizeof model_path)) {
        fprintf(stderr, "loom plan: %s: no such file, and no bundled model of that name "
                        "(see examples/models)\n", model);
        return LOOM_EXIT_FAIL;
    }
    if (!loom_cluster_is_preset_name(cluster) &&
        loom_cli_find_data(cluster, "clusters", cluster_path, sizeof cluster_path))
        cluster = cluster_path;
    req.model_path = model_path;
    req.model_label = model;
    req.cluster = cluster;
    const loom_cli_path ins[] = {{"MODEL", model_path},
                                 {"--cluster", loom_cluster_is_preset_name(cluster) ? NULL : cluster},
                                 {"--profile", req.profile_db_path},
                                 {"--calib", req.calib_path}};
    const loom_cli_path outs[] = {{"-o", out}, {"--svg", svg},
                                  {"--emit-profile-requests", req.profile_requests_path}};
    int bad = loom_cli_check_outputs(cmd, ins, 4, outs, 3);
    if (bad) return bad;
    const char *det = getenv("LOOM_DETERMINISTIC");
    if (det && strcmp(det, "0") != 0 && det[0]) no_timings = true;

    progress_state ps = {.tty = isatty(2) != 0};
    ps.start_s = loom_clock_s();
    req.progress = progress;
    req.progress_ctx = &ps;
    req.stop = &stop_flag;
    int o_req = add_output(req.profile_requests_path), o_plan = add_output(out),
        o_svg = add_output(svg);
    struct sigaction old[N_STOP_SIGNALS];
    catch_stop_signals(old);

    loom_plan *plan = NULL;
    loom_plan_diag dg;
    loom_error err = {0};
    loom_status st = loom_plan_run(&req, &plan, &dg, &err);
    if (ps.shown) fprintf(stderr, "\r\033[K");
    if (st == LOOM_ERR_INFEASIBLE) {
        restore_signals(old);
        return cannot_fit(&req, &dg, &err);
    }
    if (st) goto fail;
    if (o_req >= 0) out_written[o_req] = 1;
    if (interrupted)
        fprintf(stderr, "loom plan: interrupted: the plan below is the best found so far\n");

    int flags = no_timings ? LOOM_PLAN_JSON_NO_TIMINGS : 0;
    if (no_timings) plan->search_time_s = 0;
    if (out && (st = loom_plan_write(plan, out, flags, &err))) goto fail;
    if (o_plan >= 0) out_written[o_plan] = 1;
    if (svg && (st = loom_plan_svg_write(plan, svg, &err))) goto fail;
    if (o_svg >= 0) out_written[o_svg] = 1;
    restore_signals(old);
    if (json) {
        char *text = loom_plan_to_json(plan, flags);
        if (!text) {
            st = loom_error_set(&err, LOOM_ERR_NOMEM, "out of memory printing the plan");
            goto fail;
        }
        fputs(text, stdout);
        free(text);
    } else {
        print_table(plan);
        if (out) printf("  plan        %s\n", out);
        if (svg) printf("  picture     %s\n", svg);
        if (req.profile_requests_path) printf("  requests    %s\n", req.profile_requests_path);
    }
    loom_plan_destroy(plan);
    return LOOM_EXIT_OK;
fail:
    restore_signals(old);
    loom_plan_destroy(plan);
    return loom_cli_fail(&err);
}
