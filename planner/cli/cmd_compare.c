/*
 * cmd_compare.c — `loom compare` and `loom compare-merge`: search
 * algorithms side by side over a suite of cases (planner/compare/compare.h,
 * planner/compare/algo.h; docs/compare.md).
 *
 *   loom compare --suite FILE [--algos a,b,…] [--budget S] [--evals N]
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

#define DEFAULT_BUDGET_S 10.0

static const char usage_text[] =
    "usage: loom compare --suite FILE [--algos a,b,...] [--budget S] [--evals N] [--seed N]\n"
    "                    [--format md|csv|json] [-o FILE] [--svg FILE] [--shard K/N]\n"
    "                    [--no-timings]\n"
    "       loom compare-merge FILE... [--format md|csv|json] [-o FILE] [--svg FILE]\n"
    "\n"
    "Runs search algorithms on every case of a suite (loom-suite/1, docs/compare.md) and\n"
    "reports each one's predicted step time (per-token latency for inference), its gap to\n"
    "the best plan found for the case, memory per GPU and fit, search wall time and\n"
    "evaluations. Every plan is scored by the same evaluator.\n"
    "\n"
    "  --suite FILE       the suite (e.g. examples/suites/standard.json)\n"
    "  --algos LIST       comma-separated algorithms (default: all of them)\n"
    "  --budget S         wall-clock cap per algorithm and case, seconds (default 10)\n"
    "  --evals N          evaluations for random and genetic (default 48)\n"
    "  --seed N           seed for random and genetic (default 1)\n"
    "  --format F         md (default), csv or json (json is what compare-merge reads)\n"
    "  -o FILE            write the report there instead of stdout\n"
    "  --svg FILE         chart: gap to the best plan vs search time\n"
    "  --shard K/N        only cases whose index i has i mod N = K (0 <= K < N)\n"
    "  --no-timings       search times written as 0: byte-identical reruns\n"
    "                     (also LOOM_DETERMINISTIC=1)\n"
    "  --merge FILE...    same as loom compare-merge FILE...\n"
    "\n"
    "compare-merge joins the JSON reports of all shards of one run into the report the\n"
    "unsharded run would have written.\n";

typedef enum { FMT_MD, FMT_CSV, FMT_JSON } out_format;

typedef struct {
    const char *suite, *out, *svg;
    const char *algos[LOOM_COMPARE_MAX_ALGOS];
    int n_algos;
    char algo_buf[512];
    double budget_s;
    int64_t evals, seed;
    int32_t shard_k, shard_n;
    out_format format;
    bool timings;
    bool merge;
    const char *inputs[256];
    int n_inputs;
} args;

static bool parse_format(const char *cmd, const char *v, out_format *f)
{
    if (!strcmp(v, "md") || !strcmp(v, "markdown")) *f = FMT_MD;
    else if (!strcmp(v, "csv")) *f = FMT_CSV;
    else if (!strcmp(v, "json")) *f = FMT_JSON;
    else {
        loom_cli_usage_error(cmd, "--format expects md, csv or json, got '%s'", v);
        return false;
    }
    return true;
}

static bool parse_algos(const char *cmd, const char *v, args *a)
{
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

static bool parse_shard(const char *cmd, const char *v, args *a)
{
    int k, n;
    char tail;
    if (sscanf(v, "%d/%d%c", &k, &n, &tail) != 2 || n < 1 || n > 100000 || k < 0 || k >= n) {
        loom_cli_usage_error(cmd, "--shard expects K/N with 0 <= K < N, got '%s'", v);
        return false;
    }
    a->shard_k = k, a->shard_n = n;
    return true;
}

/* 0: parsed; -1: --help printed; otherwise the exit code. */
static int parse_args(int argc, char **argv, bool merge_cmd, args *a)
{
    const char *cmd = argv[0];
    memset(a, 0, sizeof *a);
    a->budget_s = DEFAULT_BUDGET_S;
    a->evals = 48;
    a->seed = 1;
    a->shard_n = 1;
    a->timings = !(getenv("LOOM_DETERMINISTIC") && !strcmp(getenv("LOOM_DETERMINISTIC"), "1"));
    a->merge = merge_cmd;
    const char *v;
    for (int i = 1; i < argc;) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return -1;
        } else if (!strcmp(argv[i], "--no-timings")) {
            a->timings = false, i++;
        } else if (!strcmp(argv[i], "--merge")) {
            a->merge = true, i++;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--format", &v)) != 0) {
            if (r < 0 || !parse_format(cmd, v, &a->format)) return LOOM_EXIT_USAGE;
        } else if ((r = loom_cli_opt(argc, argv, &i, "-o", &v)) != 0) {
            if (r < 0) return LOOM_EXIT_USAGE;
            a->out = v;
        } else if ((r = loom_cli_opt(argc, argv, &i, "--svg", &v)) != 0) {
            if (r < 0) return LOOM_EXIT_USAGE;
            a->svg = v;
        } else if (!a->merge && (r = loom_cli_opt(argc, argv, &i, "--suite", &v)) != 0) {
            if (r < 0) return LOOM_EXIT_USAGE;
            a->suite = v;
        } else if (!a->merge && (r = loom_cli_opt(argc, argv, &i, "--algos", &v)) != 0) {
            if (r < 0 || !parse_algos(cmd, v, a)) return LOOM_EXIT_USAGE;
        } else if (!a->merge && (r = loom_cli_opt(argc, argv, &i, "--budget", &v)) != 0) {
            if (r < 0 || !loom_cli_num(cmd, "--budget", v, 0, 86400, &a->budget_s))
                return LOOM_EXIT_USAGE;
        } else if (!a->merge && (r = loom_cli_opt(argc, argv, &i, "--evals", &v)) != 0) {
            if (r < 0 || !loom_cli_int(cmd, "--evals", v, 1, 1 << 24, &a->evals))
                return LOOM_EXIT_USAGE;
        } else if (!a->merge && (r = loom_cli_opt(argc, argv, &i, "--seed", &v)) != 0) {
            if (r < 0 || !loom_cli_int(cmd, "--seed", v, 0, (int64_t)1 << 53, &a->seed))
                return LOOM_EXIT_USAGE;
        } else if (!a->merge && (r = loom_cli_opt(argc, argv, &i, "--shard", &v)) != 0) {
            if (r < 0 || !parse_shard(cmd, v, a)) return LOOM_EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return loom_cli_usage_error(cmd, "unknown option '%s'%s", argv[i],
                                        a->merge ? " (merging takes --format, -o, --svg)" : "");
        } else if (a->merge) {
            if (a->n_inputs == (int)(sizeof a->inputs / sizeof a->inputs[0]))
                return loom_cli_usage_error(cmd, "at most %d reports to merge",
                                            (int)(sizeof a->inputs / sizeof a->inputs[0]));
            a->inputs[a->n_inputs++] = argv[i++];
        } else {
            return loom_cli_usage_error(cmd, "unexpected argument '%s' (the suite is given "
                                        "with --suite)", argv[i]);
        }
    }
    if (a->merge && a->n_inputs == 0)
        return loom_cli_usage_error(cmd, "nothing to merge: give the JSON reports of the shards");
    if (!a->merge && !a->suite) return loom_cli_usage_error(cmd, "missing --suite FILE");
    if (!a->merge && a->n_algos == 0)
        for (size_t k = 0; k < loom_algo_count() && a->n_algos < LOOM_COMPARE_MAX_ALGOS; k++)
            a->algos[a->n_algos++] = loom_algo_at(k)->name;
    return 0;
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
    if (loom_compare_report_init(&r, &suite, a->algos, a->n_algos, a->budget_s, a->evals,
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
    if (rc) return rc < 0 ? LOOM_EXIT_OK : rc;
    if ((rc = check_paths(merge_cmd ? "compare-merge" : "compare", &a))) return rc;
    return a.merge ? run_merge(&a) : run_suite(&a);
}

int loom_cmd_compare(int argc, char **argv) { return compare_main(argc, argv, false); }

int loom_cmd_compare_merge(int argc, char **argv) { return compare_main(argc, argv, true); }
