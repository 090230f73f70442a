/*
 * cmd_compare.c — `loom compare` and `loom compare-merge`: search
 * algorithms side by side over a suite of cases (planner/compare/compare.h,
 * planner/compare/algo.h; docs/compare.md).
 *
 *   loom compare --suite FILE [--algos a,b,…] [--work N] [--budget S] [--evals N]
 *                [--seed N] [--format md|csv|json] [-o FILE] [--svg FILE]
 *                [--shard K/N] [--no-timings]
 *   loom compare-merge FILE… [--format md|csv|json] [-o FILE] [--svg FILE]
 *   (loom compare --merge FILE… is the same as compare-merge)
 *
 * Output files are written atomically and only when every case ran; with
 * --no-timings (or LOOM_DETERMINISTIC=1) search times are written as 0 so
 * that reruns are byte-identical. Progress goes to stderr when it is a
 * terminal. Exit codes: 0 done, 1 bad input or failure, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"
#include "planner/cli/cli.h"
#include "planner/compare/compare.h"

/* Budgets are in work (evaluations + ILP solves), which every machine
 * counts alike; a wall-clock cap only when the user asks for one. */
#define DEFAULT_MAX_WORK 20000

typedef enum { FMT_MD, FMT_CSV, FMT_JSON } out_format;

typedef struct {
    const char *suite, *out, *svg;
    const char *algos[LOOM_COMPARE_MAX_ALGOS];
    int n_algos;
    char algo_buf[512];
    double budget_s;
    int64_t work, evals, seed;
    int32_t shard_k, shard_n;
    out_format format;
    bool timings, no_timings;
    bool merge;
    const char *inputs[256];
    int n_inputs;
} args;

static bool parse_algos(const char *cmd, const char *opt, const char *v, void *p)
{
    args *a = p;
    (void)opt;
    if (strlen(v) >= sizeof a->algo_buf) {
        loom_cli_usage_error(cmd, "--algos: list too long");
        return false;
    }
    snprintf(a->algo_buf, sizeof a->algo_buf, "%s", v);
    a->n_algos = 0;
    for (char *save = NULL, *t = strtok_r(a->algo_buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (!loom_algo_find(t)) {
            loom_cli_usage_error(cmd, "--algos: unknown algorithm '%s' (known: %s)", t,
                                 loom_algo_names());
            return false;
        }
        for (int i = 0; i < a->n_algos; i++)
            if (!strcmp(a->algos[i], t)) {
                loom_cli_usage_error(cmd, "--algos: '%s' is listed twice", t);
                return false;
            }
        if (a->n_algos == LOOM_COMPARE_MAX_ALGOS) {
            loom_cli_usage_error(cmd, "--algos: at most %d algorithms", LOOM_COMPARE_MAX_ALGOS);
            return false;
        }
        a->algos[a->n_algos++] = t;
    }
    if (a->n_algos == 0) {
        loom_cli_usage_error(cmd, "--algos: expected a comma-separated list of algorithms");
        return false;
    }
    return true;
}

static bool parse_shard(const char *cmd, const char *opt, const char *v, void *p)
{
    args *a = p;
    (void)opt;
    int k, n;
    char tail;
    if (sscanf(v, "%d/%d%c", &k, &n, &tail) != 2 || n < 1 || n > 100000 || k < 0 || k >= n) {
        loom_cli_usage_error(cmd, "--shard expects K/N with 0 <= K < N, got '%s'", v);
        return false;
    }
    a->shard_k = k, a->shard_n = n;
    return true;
}

static void args_init(void *p)
{
    args *a = p;
    memset(a, 0, sizeof *a);
    a->work = DEFAULT_MAX_WORK;
    a->evals = 48;
    a->seed = 1;
    a->shard_n = 1;
    a->format = FMT_MD;
}

static void merge_args_init(void *p)
{
    args_init(p);
    ((args *)p)->merge = true;
}

static const loom_cli_choice format_choices[] = {{"md", FMT_MD, false},
                                                 {"markdown", FMT_MD, true},
                                                 {"csv", FMT_CSV, false},
                                                 {"json", FMT_JSON, false},
                                                 {NULL, 0, false}};

#define F(m) LOOM_CLI_FIELD(args, m)
/* The options both commands take: the report's format and where it goes. */
#define OUTPUT_OPTIONS                                                                            \
    {.name = "--format", .kind = LOOM_CLI_ENUM, .field = F(format), .choices = format_choices,   \
     .metavar = "F", .help = "md, csv or json (json is what compare-merge reads)"},              \
    {.short_name = "-o", .kind = LOOM_CLI_STR, .field = F(out), .metavar = "FILE",                \
     .help = "write the report there instead of stdout"},                                        \
    {.name = "--svg", .kind = LOOM_CLI_STR, .field = F(svg), .metavar = "FILE",                   \
     .help = "chart: gap to the best plan vs search time"}

static const loom_cli_option compare_opts[] = {
    {.name = "--suite", .kind = LOOM_CLI_STR, .field = F(suite), .metavar = "FILE",
     .help = "the suite (e.g. examples/suites/standard.json)"},
    {.name = "--algos", .kind = LOOM_CLI_CUSTOM, .parse = parse_algos, .metavar = "LIST",
     .help = "comma-separated algorithms", .def = "all of them"},
    {.name = "--budget", .kind = LOOM_CLI_NUM, .field = F(budget_s), .min = 0, .max = 86400,
     .metavar = "S", .help = "wall-clock cap per algorithm and case, seconds\n"
                             "(results then depend on the machine's load)", .def = "none"},
    {.name = "--work", .kind = LOOM_CLI_INT, .field = F(work), .lo = 0, .hi = (int64_t)1 << 40,
     .metavar = "N", .help = "work cap per algorithm and case: evaluations + ILP\n"
                             "solves (0 = none); the same on every machine"},
    {.name = "--evals", .kind = LOOM_CLI_INT, .field = F(evals), .lo = 1, .hi = 1 << 24,
     .metavar = "N", .help = "evaluations for random and genetic"},
    {.name = "--seed", .kind = LOOM_CLI_INT, .field = F(seed), .lo = 0, .hi = (int64_t)1 << 53,
     .metavar = "N", .help = "seed for random and genetic"},
    OUTPUT_OPTIONS,
    {.name = "--shard", .kind = LOOM_CLI_CUSTOM, .parse = parse_shard, .metavar = "K/N",
     .help = "only cases whose index i has i mod N = K (0 <= K < N)"},
    {.name = "--no-timings", .kind = LOOM_CLI_FLAG, .field = F(no_timings),
     .help = "search times written as 0: byte-identical reruns\n(also LOOM_DETERMINISTIC=1)"},
    /* taken out of argv before parsing (parse_args); here for the help */
    {.name = "--merge", .kind = LOOM_CLI_FLAG, .field = F(merge),
     .help = "the rest of the line is `loom compare-merge`'s: FILE... [--format F]\n"
             "[-o FILE] [--svg FILE]"},
};

static const loom_cli_option merge_opts[] = {OUTPUT_OPTIONS};

const loom_cli_spec loom_cli_spec_compare = {
    .cmd = "compare",
    .usage = "usage: loom compare --suite FILE [--algos a,b,...] [--work N] [--budget S]\n"
             "                    [--evals N] [--seed N] [--format md|csv|json] [-o FILE]\n"
             "                    [--svg FILE] [--shard K/N] [--no-timings]\n"
             "       loom compare --merge FILE... (= loom compare-merge FILE...)\n",
    .about = "Runs search algorithms on every case of a suite (loom-suite/1, docs/compare.md) and\n"
             "reports each one's predicted step time (per-token latency for inference), its gap to\n"
             "the best plan found for the case, memory per GPU and fit, search wall time and\n"
             "evaluations. Every plan is scored by the same evaluator.\n",
    .epilogue = "`loom compare-merge --help` describes merging the reports of sharded runs.\n",
    .opts = compare_opts,
    .n_opts = sizeof compare_opts / sizeof compare_opts[0],
    .pos = {.max = 0, .too_many = " (the suite is given with --suite)"},
    .args_size = sizeof(args),
    .init = args_init,
};

const loom_cli_spec loom_cli_spec_compare_merge = {
    .cmd = "compare-merge",
    .usage = "usage: loom compare-merge FILE... [--format md|csv|json] [-o FILE] [--svg FILE]\n",
    .about = "Joins the JSON reports (`loom compare --format json`) of all shards of one\n"
             "`loom compare --shard K/N` run into the report the unsharded run would have\n"
             "written. `loom compare --merge FILE...` is the same command.\n",
    .opts = merge_opts,
    .n_opts = sizeof merge_opts / sizeof merge_opts[0],
    .pos = {.metavar = "FILE...", .help = "the JSON reports of the shards", .field = F(inputs),
            .count = F(n_inputs), .max = 256, .noun = "reports to merge"},
    .args_size = sizeof(args),
    .init = merge_args_init,
};
#undef F
#undef OUTPUT_OPTIONS

/* Parses argv with the table of `compare` or of `compare-merge`; `compare
 * --merge` is compare-merge with the rest of the words. Returns
 * LOOM_CLI_RUN or the exit code. */
static int parse_args(int argc, char **argv, bool merge_cmd, args *a)
{
    const char *cmd = argv[0];
    if (!merge_cmd)
        for (int i = 1; i < argc; i++)
            if (!strcmp(argv[i], "--merge")) {
                /* argv without the word, for the compare-merge table */
                for (int j = i; j + 1 < argc; j++) argv[j] = argv[j + 1];
                argc--;
                merge_cmd = true;
                break;
            }
    int rc = loom_cli_parse(merge_cmd ? &loom_cli_spec_compare_merge : &loom_cli_spec_compare,
                            argc, argv, a);
    if (rc != LOOM_CLI_RUN) return rc;
    a->timings = !a->no_timings && !loom_cli_deterministic();
    if (a->merge && a->n_inputs == 0)
        return loom_cli_usage_error(cmd, "nothing to merge: give the JSON reports of the shards");
    if (!a->merge && !a->suite) return loom_cli_usage_error(cmd, "missing --suite FILE");
    if (!a->merge && a->n_algos == 0)
        for (size_t k = 0; k < loom_algo_count() && a->n_algos < LOOM_COMPARE_MAX_ALGOS; k++)
            a->algos[a->n_algos++] = loom_algo_at(k)->name;
    return LOOM_CLI_RUN;
}

/* The outputs may be written, and overwrite no input and not each other. */
static int check_paths(const char *cmd, const args *a)
{
    enum { MAX_IN = sizeof a->inputs / sizeof a->inputs[0] + 1 };
    loom_cli_path ins[MAX_IN];
    int n = 0;
    if (a->suite) ins[n++] = (loom_cli_path){"--suite", a->suite};
    for (int i = 0; i < a->n_inputs && n < MAX_IN; i++) ins[n++] = (loom_cli_path){"REPORT", a->inputs[i]};
    const loom_cli_path outs[] = {{"-o", a->out}, {"--svg", a->svg}};
    return loom_cli_check_outputs(cmd, ins, n, outs, 2);
}

/* Renders the report and writes the requested files (atomically). */
static int emit(const args *a, const loom_compare_report *r)
{
    loom_error err = {0};
    char *text = a->format == FMT_JSON  ? loom_compare_json(r)
               : a->format == FMT_CSV   ? loom_compare_csv(r)
                                        : loom_compare_markdown(r);
    char *svg = a->svg ? loom_compare_svg(r) : NULL;
    int rc = LOOM_EXIT_OK;
    if (!text || (a->svg && !svg)) {
        loom_error_set(&err, LOOM_ERR_NOMEM, "compare: out of memory writing the report");
        rc = loom_cli_fail(&err);
    } else if (loom_write_file_atomic(a->out ? a->out : "-", text, strlen(text), &err) ||
               (svg && loom_write_file_atomic(a->svg, svg, strlen(svg), &err))) {
        rc = loom_cli_fail(&err);
    }
    free(text);
    free(svg);
    return rc;
}

static int run_merge(const args *a)
{
    loom_compare_report parts[256], merged;
    loom_error err = {0};
    int n = 0, rc;
    for (; n < a->n_inputs; n++)
        if (loom_compare_read(a->inputs[n], &parts[n], &err)) break;
    if (n < a->n_inputs) {
        rc = loom_cli_fail(&err);
    } else if (loom_compare_merge(parts, a->inputs, n, &merged, &err)) {
        rc = loom_cli_fail(&err);
    } else {
        rc = emit(a, &merged);
        loom_compare_report_free(&merged);
    }
    for (int i = 0; i < n; i++) loom_compare_report_free(&parts[i]);
    return rc;
}

static int run_suite(const args *a)
{
    loom_compare_suite suite;
    loom_compare_report r;
    loom_error err = {0};
    if (loom_compare_suite_read(a->suite, &suite, &err)) return loom_cli_fail(&err);
    int rc = LOOM_EXIT_OK;
    if (loom_compare_report_init(&r, &suite, a->algos, a->n_algos, a->budget_s, a->work, a->evals,
                                 (uint64_t)a->seed, a->timings, a->shard_k, a->shard_n, &err)) {
        loom_compare_suite_free(&suite);
        return loom_cli_fail(&err);
    }
    bool tty = isatty(STDERR_FILENO);
    for (int32_t i = 0; i < suite.n_cases && rc == LOOM_EXIT_OK; i++) {
        const loom_compare_case *c = &suite.cases[i];
        if (c->index % a->shard_n != a->shard_k) continue;
        if (tty) fprintf(stderr, "loom compare: case %d/%d %s\n", (int)i + 1, (int)suite.n_cases,
                         c->name);
        if (loom_compare_run_case(&r, c, &err)) rc = loom_cli_fail(&err);
    }
    if (rc == LOOM_EXIT_OK) rc = emit(a, &r);
    loom_compare_report_free(&r);
    loom_compare_suite_free(&suite);
    return rc;
}

static int compare_main(int argc, char **argv, bool merge_cmd)
{
    args a;
    int rc = parse_args(argc, argv, merge_cmd, &a);
    if (rc != LOOM_CLI_RUN) return rc;
    if ((rc = check_paths(merge_cmd ? "compare-merge" : "compare", &a))) return rc;
    return a.merge ? run_merge(&a) : run_suite(&a);
}

int loom_cmd_compare(int argc, char **argv) { return compare_main(argc, argv, false); }

int loom_cmd_compare_merge(int argc, char **argv) { return compare_main(argc, argv, true); }
