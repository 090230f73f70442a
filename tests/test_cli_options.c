/*
 * test_cli_options.c — the option-table parser (planner/cli/options.h) on a
 * table of every kind, and the tables of all `loom` commands.
 *
 * On the test table: "--n V" and "--n=V", flags, short names, int32 and
 * int64 fields, K/M/G sizes (4K = 4096, 1G = 2^30, none on a plain INT),
 * ranges, enums with a hidden alias, custom values, positional lists, and
 * the usage errors (exit 2) with the words they must say: the option, the
 * value, the range, the closest known option. On every command's table:
 * loom_cli_spec_check holds (field sizes, names, defaults in range, the
 * synopsis names only known options) and the generated --help lists every
 * option. Also the LOOM_DETERMINISTIC rule.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "planner/cli/cli.h"
#include "planner/cli/options.h"
#include "check.h"

typedef struct {
    int64_t n, size;
    int32_t small;
    double x;
    const char *s, *out;
    int color;
    bool on, small_given;
    int pair[2];
    const char *files[3];
    int n_files;
} targs;

static void targs_init(void *p)
{
    targs *a = p;
    memset(a, 0, sizeof *a);
    a->n = 7;
    a->small = 3;
    a->x = 0.5;
    a->color = 2;
}

/* "A+B" */
static bool parse_pair(const char *cmd, const char *opt, const char *v, void *p)
{
    targs *a = p;
    if (sscanf(v, "%d+%d", &a->pair[0], &a->pair[1]) == 2) return true;
    loom_cli_usage_error(cmd, "%s expects A+B, got '%s'", opt, v);
    return false;
}

static const loom_cli_choice colors[] = {
    {"red", 1, false}, {"green", 2, false}, {"verde", 2, true}, {"blue", 3, false}, {NULL, 0, false}};

#define F(m) LOOM_CLI_FIELD(targs, m)
static const loom_cli_option topts[] = {
    {.name = "--count", .kind = LOOM_CLI_INT, .field = F(n), .lo = 1, .hi = 100, .metavar = "N",
     .help = "a count"},
    {.name = "--size", .kind = LOOM_CLI_SIZE, .field = F(size), .lo = 0, .hi = (int64_t)1 << 40,
     .metavar = "N", .help = "a size", .def = LOOM_CLI_NO_DEFAULT},
    {.name = "--small", .kind = LOOM_CLI_INT, .field = F(small), .given = F(small_given), .lo = -5,
     .hi = 5, .metavar = "K", .help = "an int32"},
    {.name = "--ratio", .kind = LOOM_CLI_NUM, .field = F(x), .min = 0, .max = 1, .metavar = "R",
     .help = "a number"},
    {.name = "--name", .kind = LOOM_CLI_STR, .field = F(s), .metavar = "S", .help = "a string"},
    {.name = "--output", .short_name = "-o", .kind = LOOM_CLI_STR, .field = F(out),
     .metavar = "FILE", .help = "a file"},
    {.name = "--color", .kind = LOOM_CLI_ENUM, .field = F(color), .choices = colors,
     .help = "an enum\nof two lines"},
    {.name = "--on", .kind = LOOM_CLI_FLAG, .field = F(on), .help = "a flag"},
    {.name = "--pair", .kind = LOOM_CLI_CUSTOM, .parse = parse_pair, .metavar = "A+B",
     .help = "a custom value"},
};

static const loom_cli_spec tspec = {
    .cmd = "test",
    .usage = "usage: loom test FILE... [--count N] [-o FILE] [--color red|green|blue]\n",
    .about = "A table with one option of every kind.\n",
    .opts = topts,
    .n_opts = sizeof topts / sizeof topts[0],
    .pos = {.metavar = "FILE...", .help = "inputs", .field = F(files), .count = F(n_files),
            .max = 3, .noun = "inputs"},
    .args_size = sizeof(targs),
    .init = targs_init,
};
#undef F

/* Runs the parser on a NULL-terminated word list with stderr captured into
 * err (stdout too, for --help, into out). Returns the parser's result. */
static char err[4096], out[16384];

static int run(targs *a, const char *w0, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"test";
    va_list ap;
    va_start(ap, w0);
    for (const char *w = w0; w && argc < 31; w = va_arg(ap, const char *)) argv[argc++] = (char *)w;
    va_end(ap);
    argv[argc] = NULL;
    fflush(stderr);
    fflush(stdout);
    FILE *fe = tmpfile(), *fo = tmpfile();
    int saved_err = dup(2), saved_out = dup(1);
    dup2(fileno(fe), 2);
    dup2(fileno(fo), 1);
    int rc = loom_cli_parse(&tspec, argc, argv, a);
    fflush(stderr);
    fflush(stdout);
    dup2(saved_err, 2);
    dup2(saved_out, 1);
    close(saved_err);
    close(saved_out);
    rewind(fe);
    rewind(fo);
    size_t ne = fread(err, 1, sizeof err - 1, fe), no = fread(out, 1, sizeof out - 1, fo);
    err[ne] = out[no] = '\0';
    fclose(fe);
    fclose(fo);
    return rc;
}

static void values(void)
{
    targs a;
    CHECK_INT_EQ(run(&a, NULL), LOOM_CLI_RUN);   /* the defaults */
    CHECK_INT_EQ(a.n, 7);
    CHECK_INT_EQ(a.small, 3);
    CHECK_INT_EQ(a.color, 2);
    CHECK(!a.on && !a.small_given && a.n_files == 0);

    CHECK_INT_EQ(run(&a, "--count", "12", "--small=-4", "--ratio", "0.25", "--name=x=y", "-o",
                     "f.json", "--color", "blue", "--on", "--pair", "3+4", "in1", "in2", NULL),
                 LOOM_CLI_RUN);
    CHECK_INT_EQ(a.n, 12);
    CHECK_INT_EQ(a.small, -4);
    CHECK(a.small_given);
    CHECK(a.x == 0.25);
    CHECK(a.s && !strcmp(a.s, "x=y"));   /* only the first '=' splits */
    CHECK(a.out && !strcmp(a.out, "f.json"));
    CHECK_INT_EQ(a.color, 3);
    CHECK(a.on);
    CHECK_INT_EQ(a.pair[0], 3);
    CHECK_INT_EQ(a.pair[1], 4);
    CHECK_INT_EQ(a.n_files, 2);
    CHECK(!strcmp(a.files[1], "in2"));
    CHECK_INT_EQ(err[0], 0);   /* nothing printed */

    /* long and short names, the last value wins, "-" is positional, hidden aliases */
    CHECK_INT_EQ(run(&a, "--output=a", "-o=b", "--count", "5", "--count", "6", "-", "--color",
                     "verde", NULL),
                 LOOM_CLI_RUN);
    CHECK(!strcmp(a.out, "b"));
    CHECK_INT_EQ(a.n, 6);
    CHECK(a.n_files == 1 && !strcmp(a.files[0], "-"));
    CHECK_INT_EQ(a.color, 2);

    /* sizes: K, M, G multiply by 1024, and only on a SIZE */
    CHECK_INT_EQ(run(&a, "--size", "4K", NULL), LOOM_CLI_RUN);
    CHECK_INT_EQ(a.size, 4096);
    CHECK_INT_EQ(run(&a, "--size=3m", NULL), LOOM_CLI_RUN);
    CHECK_INT_EQ(a.size, 3 << 20);
    CHECK_INT_EQ(run(&a, "--size", "1G", NULL), LOOM_CLI_RUN);
    CHECK_INT_EQ(a.size, (int64_t)1 << 30);
    CHECK_INT_EQ(run(&a, "--size", "2048G", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--size must be in [0, 1099511627776], got '2048G'");
    CHECK_INT_EQ(run(&a, "--size", "4KB", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--size expects an integer (K, M or G suffix allowed), got '4KB'");
    CHECK_INT_EQ(run(&a, "--count", "1K", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--count expects an integer, got '1K'");
}

static void errors(void)
{
    targs a;
    CHECK_INT_EQ(run(&a, "--cuont", "3", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "loom test: unknown option '--cuont' (did you mean --count?)");
    CHECK_STR_CONTAINS(err, "(see `loom test --help`)");
    CHECK_INT_EQ(run(&a, "--col=red", NULL), LOOM_EXIT_USAGE);   /* a prefix of one option */
    CHECK_STR_CONTAINS(err, "unknown option '--col=red' (did you mean --color?)");
    CHECK_INT_EQ(run(&a, "--frobnicate", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "unknown option '--frobnicate'\n");   /* nothing close */
    CHECK_INT_EQ(run(&a, "--count", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "option --count needs a value");
    CHECK_INT_EQ(run(&a, "--count", "0", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--count must be in [1, 100], got '0'");
    CHECK_INT_EQ(run(&a, "--count", "", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--count expects an integer, got ''");
    CHECK_INT_EQ(run(&a, "--count", "99999999999999999999", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--count expects an integer");
    CHECK_INT_EQ(run(&a, "--small", "6", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--small must be in [-5, 5], got '6'");
    CHECK_INT_EQ(run(&a, "--ratio", "1.5", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--ratio must be in [0, 1], got '1.5'");
    CHECK_INT_EQ(run(&a, "--ratio", "nan", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--ratio expects a number, got 'nan'");
    CHECK_INT_EQ(run(&a, "--color", "pink", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--color expects red, green or blue, got 'pink'");
    CHECK_INT_EQ(run(&a, "--on=yes", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "option --on takes no value");
    CHECK_INT_EQ(run(&a, "--pair", "3", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--pair expects A+B, got '3'");
    CHECK_INT_EQ(run(&a, "a", "b", "c", "d", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "at most 3 inputs");
    /* the first bad word is the one reported */
    CHECK_INT_EQ(run(&a, "--count", "0", "--bogus", NULL), LOOM_EXIT_USAGE);
    CHECK_STR_CONTAINS(err, "--count must be in");
}

static void help(void)
{
    targs a;
    CHECK_INT_EQ(run(&a, "--count", "3", "--help", "--bogus", NULL), LOOM_EXIT_OK);
    CHECK_STR_CONTAINS(out, "usage: loom test FILE...");
    CHECK_STR_CONTAINS(out, "A table with one option of every kind.");
    CHECK_STR_CONTAINS(out, "  FILE...");
    /* defaults come from init (not from the --count 3 before --help) */
    CHECK_STR_CONTAINS(out, "--count N");
    CHECK_STR_CONTAINS(out, "a count (default 7)");
    CHECK_STR_CONTAINS(out, "an int32 (default 3)");
    CHECK_STR_CONTAINS(out, "a number (default 0.5)");
    CHECK_STR_CONTAINS(out, "-o, --output FILE");
    CHECK_STR_CONTAINS(out, "--color red|green|blue");
    CHECK_STR_CONTAINS(out, "of two lines (default green)");
    CHECK_STR_CONTAINS(out, "a K, M or G suffix multiplies by 1024");
    CHECK(!strstr(out, "verde"));
    CHECK(!strstr(out, "a size (default"));
    CHECK_INT_EQ(run(&a, "-h", NULL), LOOM_EXIT_OK);
    CHECK_STR_CONTAINS(out, "usage: loom test");
    char msg[256];
    CHECK(loom_cli_spec_check(&tspec, msg, sizeof msg));
    /* a synopsis naming an option the table lacks is caught */
    loom_cli_spec bad = tspec;
    bad.usage = "usage: loom test [--count N] [--nope X]\n";
    CHECK(!loom_cli_spec_check(&bad, msg, sizeof msg));
    CHECK_STR_CONTAINS(msg, "--nope");
    /* so is a default outside the range the help would show */
    loom_cli_option rows[sizeof topts / sizeof topts[0]];
    memcpy(rows, topts, sizeof rows);
    rows[0].lo = 10;   /* --count defaults to 7 */
    bad = tspec;
    bad.opts = rows;
    CHECK(!loom_cli_spec_check(&bad, msg, sizeof msg));
    CHECK_STR_CONTAINS(msg, "--count");
}

/* Every command's table is sound and its help lists each option. */
static void commands(void)
{
    const loom_cli_spec *specs[] = {&loom_cli_spec_inspect, &loom_cli_spec_plan,
                                    &loom_cli_spec_export,  &loom_cli_spec_shard,
                                    &loom_cli_spec_eval,    &loom_cli_spec_eval_serve, &loom_cli_spec_plan_serve, &loom_cli_spec_calibrate_serve, &loom_cli_spec_calibrate,
                                    &loom_cli_spec_compare, &loom_cli_spec_compare_merge};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        const loom_cli_spec *s = specs[k];
        char msg[256] = "";
        bool ok = loom_cli_spec_check(s, msg, sizeof msg);
        CHECK(ok);
        if (!ok) fprintf(stderr, "  %s\n", msg);
        FILE *f = tmpfile();
        loom_cli_help(s, f);
        rewind(f);
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = '\0';
        fclose(f);
        char head[64];
        snprintf(head, sizeof head, "usage: loom %s", s->cmd);
        CHECK_STR_CONTAINS(out, head);
        for (size_t i = 0; i < s->n_opts; i++) {
            char lab[80];
            const loom_cli_option *o = &s->opts[i];
            snprintf(lab, sizeof lab, "\n  %s%s%s", o->short_name ? o->short_name : "",
                     o->short_name && o->name ? ", " : "", o->name ? o->name : "");
            CHECK_STR_CONTAINS(out, lab);
        }
    }
    /* compare-merge has its own help, not compare's */
    FILE *f = tmpfile();
    loom_cli_help(&loom_cli_spec_compare_merge, f);
    rewind(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    CHECK_STR_CONTAINS(out, "usage: loom compare-merge FILE...");
    CHECK(!strstr(out, "--suite"));
}

static void deterministic(void)
{
    unsetenv("LOOM_DETERMINISTIC");
    CHECK(!loom_cli_deterministic());
    setenv("LOOM_DETERMINISTIC", "", 1);
    CHECK(!loom_cli_deterministic());
    setenv("LOOM_DETERMINISTIC", "0", 1);
    CHECK(!loom_cli_deterministic());
    setenv("LOOM_DETERMINISTIC", "1", 1);
    CHECK(loom_cli_deterministic());
    setenv("LOOM_DETERMINISTIC", "yes", 1);
    CHECK(loom_cli_deterministic());
    unsetenv("LOOM_DETERMINISTIC");
}

int main(void)
{
    values();
    errors();
    help();
    commands();
    deterministic();
    return check_done();
}
