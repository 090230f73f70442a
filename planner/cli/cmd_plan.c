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
 * --time-limit S is a wall-clock deadline S seconds after the search is
 * started (a SIGALRM timer that raises the same stop flag): the search's own
 * limit only acts once it has a plan to return, but a first plan can take
 * longer than S. Past the deadline the best plan so far is the result
 * (search.status "time-limit"); with none, loom says so and exits 1.
 *
 * Exit codes: 0 planned, 1 bad input or failure, 2 usage, 3 no plan fits.
 */
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costs/cluster.h"
#include "base/clock.h"
#include "base/fileio.h"
#include "planner/cli/cli.h"
#include "planner/plan/plan_run.h"

/* ---- options ------------------------------------------------------------------ */

typedef struct {
    loom_plan_request req;
    const char *model, *cluster, *out, *svg;
    loom_plan_mode mode;             /* train or infer: req.problem.inference */
    loom_objective objective;        /* req.problem.objective once the mode is known */
    bool objective_given, json, no_timings, seq_given, gbs_given, zero_given;
    bool unfused;                    /* --unfused-attention: req.problem.flash_attention off */
} plan_args;

static void plan_args_init(void *p)
{
    plan_args *a = p;
    memset(a, 0, sizeof *a);
    loom_plan_request_init(&a->req);
    /* the defaults every command shares (cli.h) */
    a->req.problem.seq = LOOM_CLI_DEFAULT_SEQ;
    a->req.problem.gbs = LOOM_CLI_DEFAULT_GBS;
    a->req.search.zero = -1;   /* searched: ZeRO 1-3 (loom eval's default, ZeRO-1, is one of them) */
    a->mode = LOOM_PLAN_TRAIN;
    a->objective = a->req.problem.objective;
}

/* "serve" never reaches this table's parser: loom_cmd_plan hands it to
 * cmd_plan_serve.c first; it is listed so that the help and errors name it. */
static const loom_cli_choice mode_choices[] = {{"train", LOOM_PLAN_TRAIN, false},
                                               {"infer", LOOM_PLAN_INFER, false},
                                               {"serve", LOOM_PLAN_INFER, false},
                                               {NULL, 0, false}};
static const loom_cli_choice objective_choices[] = {
    {"time", LOOM_OBJ_TIME, false},       {"cost", LOOM_OBJ_COST, false},
    {"energy", LOOM_OBJ_ENERGY, false},   {"latency", LOOM_OBJ_LATENCY, false},
    {"throughput", LOOM_OBJ_THROUGHPUT, false}, {NULL, 0, false}};
static const loom_cli_choice space_choices[] = {
    {"full", false, false}, {"megatron", true, false}, {NULL, 0, false}};
static const loom_cli_choice dtype_choices[] = {{"bf16", LOOM_DTYPE_BF16, false},
                                                {"fp16", LOOM_DTYPE_FP16, false},
                                                {"fp8", LOOM_DTYPE_FP8, false},
                                                {NULL, 0, false}};

#define F(m) LOOM_CLI_FIELD(plan_args, m)
static const loom_cli_option plan_opts[] = {
    {.name = "--cluster", .kind = LOOM_CLI_STR, .field = F(cluster), .metavar = "C",
     .help = "cluster preset or file (required with MODEL)"},
    {.name = "--gbs", .kind = LOOM_CLI_SIZE, .field = F(req.problem.gbs), .given = F(gbs_given), .lo = 1, .hi = (int64_t)1 << 30,
     .metavar = "N", .help = "training: global batch in sequences;\ninference: concurrent sequences"},
    {.name = "--seq", .kind = LOOM_CLI_SIZE, .field = F(req.problem.seq), .given = F(seq_given), .lo = 1, .hi = (int64_t)1 << 24,
     .metavar = "N", .help = "tokens per sequence / inference context"},
    {.name = "--mode", .kind = LOOM_CLI_ENUM, .field = F(mode), .choices = mode_choices,
     .help = "train; infer: one decode step of --gbs sequences;\n"
             "serve: a serving deployment under SLOs (loom plan --mode serve -h)"},
    {.name = "--objective", .kind = LOOM_CLI_ENUM, .field = F(objective),
     .given = F(objective_given), .choices = objective_choices, .metavar = "O",
     .help = "train: time|cost|energy (default time);\ninfer: latency|throughput (default latency)",
     .def = LOOM_CLI_NO_DEFAULT},
    {.name = "--memory-headroom", .kind = LOOM_CLI_NUM, .field = F(req.memory_headroom),
     .min = 0, .max = 1024, .metavar = "H", .help = "HBM left free: a fraction (< 1) or GiB (>= 1)", .def = "0.05 (the cluster's)"},
    {.name = "--latency-bound", .kind = LOOM_CLI_NUM, .field = F(req.problem.latency_bound_s),
     .min = 1e-9, .max = 1e6, .metavar = "S",
     .help = "infer throughput: per-token latency bound, seconds", .def = "none"},
    {.name = "--space", .kind = LOOM_CLI_ENUM, .field = F(req.search.megatron_only),
     .choices = space_choices, .help = "megatron: only plans Megatron-LM/vLLM can run"},
    {.name = "--dtype", .kind = LOOM_CLI_ENUM, .field = F(req.problem.dtype), .choices = dtype_choices,
     .help = "compute dtype"},
    {.name = "--profile", .kind = LOOM_CLI_STR, .field = F(req.profile_db_path), .metavar = "DB",
     .help = "measured op times (loom-profile db)"},
    {.name = "--calib", .kind = LOOM_CLI_STR, .field = F(req.calib_path), .metavar = "FILE",
     .help = "calibrated efficiencies (loom calibrate)"},
    {.name = "--time-limit", .kind = LOOM_CLI_NUM, .field = F(req.search.time_limit_s), .min = 1e-3,
     .max = 1e7, .metavar = "S", .help = "stop the search S seconds after it starts, with the best\nplan so far (none yet: exit 1)",
     .def = "none"},
    /* 0 in the request: the search's own default (loom_search_options_init) */
    {.name = "--max-mbs", .kind = LOOM_CLI_INT, .field = F(req.search.max_micro_batch), .lo = 1,
     .hi = 1024, .metavar = "N",
     .help = "largest micro-batch tried per pipeline replica; in training a one-stage\n"
             "replica also takes N x 2^k when its data-parallel mesh axis brings each\n"
             "GPU's share to N or fewer",
     .def = "8"},
    {.name = "--zero", .kind = LOOM_CLI_INT, .field = F(req.search.zero), .given = F(zero_given),
     .lo = 0, .hi = 3, .metavar = "N",
     .help = "ZeRO stage over the data-parallel group: the replicas and a stage's\n"
             "in-mesh data-parallel copies", .def = "searched, 1-3"},
    {.name = "--no-recompute", .kind = LOOM_CLI_FLAG, .field = F(req.search.no_recompute),
     .help = "do not consider activation recomputation"},
    {.name = "--unfused-attention", .kind = LOOM_CLI_FLAG, .field = F(unfused),
     .help = "eager attention (s² activations) instead of flash attention, as\n"
             "loom eval --unfused-attention (selective recompute is then searched)"},
    {.name = "--no-tp-comm-overlap", .kind = LOOM_CLI_FLAG,
     .field = F(req.search.no_tp_comm_overlap),
     .help = "Megatron's spaces without TP communication overlap\n(--tp-comm-overlap: needs Transformer Engine)"},
    {.name = "--no-cp", .kind = LOOM_CLI_FLAG, .field = F(req.search.no_context_parallel),
     .help = "no Megatron context parallelism"},
    /* pins: 0 = searched (loom_search_options) */
    {.name = "--tp", .kind = LOOM_CLI_INT, .field = F(req.search.pin_tp), .lo = 1, .hi = 1 << 20,
     .metavar = "N", .help = "pin the tensor-parallel size of every stage", .def = "searched"},
    {.name = "--pp", .kind = LOOM_CLI_INT, .field = F(req.search.pin_pp), .lo = 1, .hi = 1 << 20,
     .metavar = "N", .help = "pin the pipeline ranks (uniform stages)", .def = "searched"},
    {.name = "--dp", .kind = LOOM_CLI_INT, .field = F(req.search.pin_dp), .lo = 1, .hi = 1 << 30,
     .metavar = "N", .help = "pin the pipeline replicas", .def = "searched"},
    {.name = "--cp", .kind = LOOM_CLI_INT, .field = F(req.search.pin_cp), .lo = 1, .hi = 1 << 20,
     .metavar = "N", .help = "pin Megatron's context-parallel size (1: none)", .def = "searched"},
    {.name = "--ep", .kind = LOOM_CLI_INT, .field = F(req.search.pin_ep), .lo = 1, .hi = 1 << 20,
     .metavar = "N", .help = "pin the expert-parallel size of every stage with experts\n"
                             "(MoE models; Megatron's spaces)", .def = "searched"},
    {.name = "--etp", .kind = LOOM_CLI_INT, .field = F(req.search.pin_etp), .lo = 1, .hi = 1 << 20,
     .metavar = "N", .help = "pin the experts' tensor-parallel size: 1 (the experts\n"
                             "over the TP ranks) or the TP (MoE models; Megatron's spaces)",
     .def = "searched"},
    {.name = "--mbs", .kind = LOOM_CLI_INT, .field = F(req.search.pin_mbs), .lo = 1, .hi = 1 << 20,
     .metavar = "N", .help = "pin the micro-batch size", .def = "searched"},
    {.name = "--vpp", .kind = LOOM_CLI_INT, .field = F(req.search.pin_vpp), .lo = 1, .hi = 512,
     .metavar = "N", .help = "pin the model chunks per pipeline rank (1: no\ninterleaving)",
     .def = "searched"},
    {.name = "--top", .kind = LOOM_CLI_INT, .field = F(req.search.top), .lo = 1,
     .hi = LOOM_SEARCH_TOP_MAX, .metavar = "N",
     .help = "also list the N best distinct configurations", .def = "1"},
    {.short_name = "-o", .kind = LOOM_CLI_STR, .field = F(out), .metavar = "FILE",
     .help = "write the plan (loom-plan/1 JSON)"},
    {.name = "--svg", .kind = LOOM_CLI_STR, .field = F(svg), .metavar = "FILE",
     .help = "draw the placement and the pipeline schedule"},
    {.name = "--emit-profile-requests", .kind = LOOM_CLI_STR, .field = F(req.profile_requests_path),
     .metavar = "FILE", .help = "the op shapes the search evaluated, for loom-profile"},
    {.name = "--json", .kind = LOOM_CLI_FLAG, .field = F(json),
     .help = "print the plan JSON instead of the table"},
    {.name = "--no-timings", .kind = LOOM_CLI_FLAG, .field = F(no_timings),
     .help = "write search.time_s as 0 (also LOOM_DETERMINISTIC=1)"},
};

const loom_cli_spec loom_cli_spec_plan = {
    .cmd = "plan",
    .usage = "usage: loom plan [MODEL] [--cluster C] [--gbs N] [--seq N] [options]\n",
    .about = "Plans MODEL (an HF config.json, a loom graph, or a bundled name such as\n"
             "llama-3-70b) on cluster C (a preset such as dgx-h100-x16 or a loom-cluster/1\n"
             "file): pipeline stages, their GPUs and logical meshes, every op's sharding,\n"
             "the schedule, and the predicted step time, throughput, MFU and memory.\n"
             "Without MODEL: the bundled example, llama-3-8b on dgx-h100-x2.\n",
    .opts = plan_opts,
    .n_opts = sizeof plan_opts / sizeof plan_opts[0],
    .pos = {.metavar = "MODEL", .field = F(model), .max = 1, .noun = "model",
            .help = "model path or bundled name (default: llama-3-8b)",
            .too_many = "one model only (got '%s' and '%s')"},
    .args_size = sizeof(plan_args),
    .init = plan_args_init,
};
#undef F

static volatile sig_atomic_t interrupted;
/* The search polls *req.search.stop. */
static volatile sig_atomic_t stop_flag;

/* The output files of this run, for the second signal: their paths, and
 * whether the file itself has been written by this run. */
#define MAX_OUTPUTS 3
static char out_path[MAX_OUTPUTS][4096];
static volatile sig_atomic_t out_written[MAX_OUTPUTS], n_outputs;

/* Set by SIGALRM when --time-limit's deadline passes (also raises stop_flag). */
static volatile sig_atomic_t deadline_hit;

static void on_deadline(int sig)
{
    (void)sig;
    deadline_hit = 1;
    stop_flag = 1;
}

/* Arms a one-shot real-time timer for limit_s seconds (0: none); old gets
 * the previous SIGALRM action for disarm_deadline. SA_RESTART: file reads
 * under way when it fires carry on. */
static void arm_deadline(double limit_s, struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_deadline;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, old);
    if (limit_s <= 0) return;
    struct itimerval it = {{0, 0}, {0, 0}};
    it.it_value.tv_sec = (time_t)limit_s;
    it.it_value.tv_usec = (suseconds_t)((limit_s - (double)it.it_value.tv_sec) * 1e6);
    if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0) it.it_value.tv_usec = 1;
    setitimer(ITIMER_REAL, &it, NULL);
}

static void disarm_deadline(const struct sigaction *old)
{
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, old, NULL);
}

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

/* Which inputs were assumed rather than given (the shared defaults, cli.h):
 * LOOM_PLAN_ASSUMED_* bits, for the header line and the plan's "assumed".
 * The ZeRO stage is searched unless --zero pins it, so it is never assumed. */
static unsigned assumed_inputs(const plan_args *a)
{
    return (a->seq_given ? 0u : LOOM_PLAN_ASSUMED_SEQ) | (a->gbs_given ? 0u : LOOM_PLAN_ASSUMED_GBS);
}

static void print_assumed(const plan_args *a, const loom_plan_request *req)
{
    char buf[256] = "";
    size_t n = 0;
    unsigned as = assumed_inputs(a);
    if (as & LOOM_PLAN_ASSUMED_SEQ)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%sseq %lld", n ? ", " : "",
                              (long long)req->problem.seq);
    if (as & LOOM_PLAN_ASSUMED_GBS)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s %lld", n ? ", " : "",
                              req->problem.inference ? "sequences" : "gbs",
                              (long long)req->problem.gbs);
    if (n)
        printf("assumed: %s (loom's defaults, the same for loom plan and loom eval; "
               "--seq, --gbs to change)\n", buf);
}

static int print_table(const loom_plan *p)
{
    char *text = loom_plan_table(p);
    if (!text) return -1;
    fputs(text, stdout);
    free(text);
    return 0;
}

/* The runners-up: the best distinct configurations the search saw. */
static void print_top(const loom_plan_diag *dg)
{
    char a[32];
    printf("\n  top %d     %-4s %-5s %-5s %-4s %-4s %-9s %-5s %-4s %-9s %-11s %s\n",
           (int)dg->n_top, "dp", "pp", "vpp", "tp", "cp", "mbs x M", "zero", "meg", "recompute",
           "step (s)", "memory/GPU");
    bool tiled = false;
    for (int32_t i = 0; i < dg->n_top; i++) {
        const loom_search_top *t = &dg->top[i];
        char dp[24], tp[24], cp[24], mb[48];
        snprintf(dp, sizeof dp, "%lld%s", (long long)t->dp, t->tiled ? "*" : "");
        tiled |= t->tiled;
        if (t->tp > 0) snprintf(tp, sizeof tp, "%lld", (long long)t->tp);
        else snprintf(tp, sizeof tp, "mix");
        if (t->cp > 0) snprintf(cp, sizeof cp, "%lld", (long long)t->cp);
        else snprintf(cp, sizeof cp, "mix");
        snprintf(mb, sizeof mb, "%lldx%lld", (long long)t->mbs, (long long)t->micro_batches);
        printf("  %-9d %-4s %-5lld %-5lld %-4s %-4s %-9s %-5d %-4s %-9d %-11.4g %s\n",
               (int)i + 1, dp, (long long)t->pp, (long long)t->vpp, tp, cp, mb, t->zero,
               t->megatron ? "yes" : "no", (int)t->recompute_stages, t->step_s,
               gib(t->memory_per_gpu_bytes, a, sizeof a));
    }
    if (tiled)
        printf("  (* on the power-of-two tile of each NVLink domain, the rest of it idle)\n");
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
    if (req->search.no_recompute)
        fprintf(stderr, "    - activation recomputation: drop --no-recompute\n");
    if (req->search.zero >= 0 && req->search.zero < 3 && !req->problem.inference)
        fprintf(stderr, "    - ZeRO-3 (--zero 3): shard the weights and gradients over the "
                        "replicas as well\n");
    if (req->problem.seq > 512)
        fprintf(stderr, "    - a shorter sequence (--seq %lld): activations%s shrink with it\n",
                (long long)(req->problem.seq / 2), req->problem.inference ? " and KV cache" : "");
    if (req->problem.inference && req->problem.gbs > 1)
        fprintf(stderr, "    - fewer concurrent sequences (--gbs %lld)\n", (long long)(req->problem.gbs / 2));
    return LOOM_EXIT_INFEASIBLE;
}

/* --mode serve belongs to the serving deployment planner (cmd_plan_serve.c). */
static bool wants_serve(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--mode=serve") ||
            (!strcmp(argv[i], "--mode") && i + 1 < argc && !strcmp(argv[i + 1], "serve")))
            return true;
    return false;
}

int loom_cmd_plan(int argc, char **argv)
{
    if (wants_serve(argc, argv)) return loom_cmd_plan_serve(argc, argv);
    const char *cmd = "plan";
    plan_args args;
    int rc = loom_cli_parse(&loom_cli_spec_plan, argc, argv, &args);
    if (rc != LOOM_CLI_RUN) return rc;
    loom_plan_request req = args.req;
    const char *model = args.model, *cluster = args.cluster, *out = args.out, *svg = args.svg;
    bool json = args.json, no_timings = args.no_timings;
    req.problem.inference = args.mode == LOOM_PLAN_INFER;
    if (args.unfused) req.problem.flash_attention = false;
    if (req.problem.inference)
        fprintf(stderr, "loom plan: note: --mode infer prices one decode step of --gbs sequences "
                "with the training planner (micro-batches capped by --max-mbs); --mode serve plans "
                "a serving deployment under SLOs (loom plan --mode serve -h)\n");
    if (req.problem.inference) req.problem.objective = LOOM_OBJ_LATENCY;
    if (args.objective_given) req.problem.objective = args.objective;
    bool infer_obj = req.problem.objective == LOOM_OBJ_LATENCY ||
                     req.problem.objective == LOOM_OBJ_THROUGHPUT;
    if (infer_obj != req.problem.inference)
        return loom_cli_usage_error(cmd, "--objective %s is for %s (use --mode %s)",
                                    loom_problem_objective_name(req.problem.objective),
                                    infer_obj ? "inference" : "training",
                                    infer_obj ? "infer" : "train");
    if (!model) {   /* the bundled example */
        model = "llama-3-8b";
        if (!cluster) cluster = "dgx-h100-x2";
    }
    if (!cluster) return loom_cli_usage_error(cmd, "--cluster is required with a model");
    char model_path[4096], cluster_path[4096];
    if (!loom_cli_find_data(model, "models", model_path, sizeof model_path)) {
        return loom_cli_no_model("loom plan", model);
    }
    cluster = loom_cli_cluster_arg("loom plan", cluster, cluster_path, sizeof cluster_path);
    if (!cluster) return LOOM_EXIT_FAIL;
    if (!args.seq_given) req.problem.seq = loom_cli_default_seq(model_path);
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
    if (loom_cli_deterministic()) no_timings = true;

    progress_state ps = {.tty = isatty(2) != 0};
    ps.start_s = loom_clock_s();
    req.search.progress = progress;
    req.search.progress_ctx = &ps;
    req.search.stop = &stop_flag;
    int o_req = add_output(req.profile_requests_path), o_plan = add_output(out),
        o_svg = add_output(svg);
    struct sigaction old[N_STOP_SIGNALS], old_alarm;
    catch_stop_signals(old);

    loom_plan *plan = NULL;
    loom_plan_diag dg;
    loom_error err = {0};
    double limit_s = req.search.time_limit_s;
    arm_deadline(limit_s, &old_alarm);
    loom_status st = loom_plan_run(&req, &plan, &dg, &err);
    disarm_deadline(&old_alarm);
    if (ps.shown) fprintf(stderr, "\r\033[K");
    if (st == LOOM_ERR_LIMIT && deadline_hit && !interrupted) {
        restore_signals(old);
        fprintf(stderr, "loom plan: the search was stopped by --time-limit %g s before it found "
                        "a plan (%.2f s in); nothing written; give it more time\n",
                limit_s, since(ps.start_s));
        return LOOM_EXIT_FAIL;
    }
    if (st == LOOM_OK && deadline_hit && !interrupted)
        snprintf(plan->search_status, sizeof plan->search_status, "time-limit");
    if (st == LOOM_ERR_INFEASIBLE) {
        restore_signals(old);
        return cannot_fit(&req, &dg, &err);
    }
    if (st) goto fail;
    if (o_req >= 0) out_written[o_req] = 1;
    {
        loom_cluster cl;
        loom_error e2 = {0};
        if (loom_cluster_load(cluster, &cl, &e2) == LOOM_OK)
            loom_cli_warn_inputs(cmd, loom_cluster_is_preset_name(cluster) ? NULL : cluster, &cl,
                                 plan->model_info.max_positions, plan->gbs, plan->seq,
                                 req.problem.inference);
    }
    if (interrupted)
        fprintf(stderr, "loom plan: interrupted: the plan below is the best found so far\n");

    int flags = no_timings ? LOOM_PLAN_JSON_NO_TIMINGS : 0;
    if (no_timings) plan->search_time_s = 0;
    plan->assumed = assumed_inputs(&args);
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
        print_assumed(&args, &req);
        if (print_table(plan)) {
            st = loom_error_set(&err, LOOM_ERR_NOMEM, "out of memory printing the plan");
            goto fail;
        }
        if (dg.n_top > 1) print_top(&dg);
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
