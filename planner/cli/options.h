/*
 * options.h — table-driven option parsing for the `loom` subcommands.
 *
 * Each command declares one static table of its options (loom_cli_option)
 * and one spec (loom_cli_spec) that names the table, its positional
 * arguments, the struct the options fill and the function that fills that
 * struct with its defaults. loom_cli_parse reads argv against the table;
 * loom_cli_help prints `--help` from the same table, so the help and the
 * parser cannot disagree: every option the parser knows is listed, with its
 * metavariable, its help text and its default as the program really has it.
 *
 * A row says:
 *   name, short_name   "--gbs"; "-o" (either may be NULL, not both)
 *   kind               what the value is (below)
 *   field              LOOM_CLI_FIELD(args_type, member): where it goes
 *   given              optional LOOM_CLI_FIELD of a bool set when the option
 *                      appears (for defaults that depend on other options)
 *   lo, hi / min, max  the inclusive range of an INT or SIZE / NUM value
 *   choices            ENUM: {name, value} rows ending with {NULL};
 *                      hidden rows are accepted aliases left out of the help
 *   parse              CUSTOM: parses the value into args itself and prints
 *                      its own usage error (AxB meshes, K/N shards, lists)
 *   metavar, help      "N", "FILE"; help lines separated by '\n'
 *   def                the default the help shows: NULL shows the field's
 *                      value after spec.init (INT, SIZE, NUM, ENUM), a text
 *                      is shown as is ("GPUs / (tp·pp·cp)"), and
 *                      LOOM_CLI_NO_DEFAULT shows none
 *
 * Kinds and the fields they fill:
 *   FLAG    no value; bool = true ("--json"; "--json=x" is an error)
 *   INT     int32_t or int64_t (by the field's size) in [lo, hi]
 *   SIZE    as INT, and a K, M or G suffix multiplies by 1024, 1024², 1024³
 *           ("--seq 32K" = 32768); the help says so
 *   NUM     double, finite, in [min, max]
 *   STR     const char *, pointing into argv
 *   ENUM    an int-sized field (an enum) set to the chosen row's value
 *   CUSTOM  whatever parse() fills
 *
 * Syntax: "--name VALUE" and "--name=VALUE" (also "-o FILE", "-o=FILE");
 * "-h"/"--help" prints the help and ends parsing; any other argument that
 * starts with '-' (and is not "-" alone) is an option; the rest are
 * positional. An option given twice keeps its last value.
 *
 * Errors are usage errors (exit code 2, LOOM_EXIT_USAGE) printed as
 * "loom CMD: MESSAGE" plus "(see `loom CMD --help`)":
 *   unknown option '--gsb' (did you mean --gbs?)
 *   option --gbs needs a value
 *   --gbs expects an integer, got 'x'
 *   --zero must be in [0, 3], got '4'
 *   --mode expects train or infer, got 'serve'
 *   one MODEL expected, got 'a' and 'b'
 * The closest known option is the one at the smallest edit distance (at most
 * a third of the name, and 2 at least), or the only one the word begins.
 */
#ifndef LOOM_CLI_OPTIONS_H
#define LOOM_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    LOOM_CLI_FLAG,
    LOOM_CLI_INT,
    LOOM_CLI_SIZE,
    LOOM_CLI_NUM,
    LOOM_CLI_STR,
    LOOM_CLI_ENUM,
    LOOM_CLI_CUSTOM,
} loom_cli_kind;

/* Where a value goes: offset + 1 into the args struct (0: nowhere) and the
 * field's size, so that the parser writes an int32_t or an int64_t as the
 * field is, and loom_cli_spec_check can refuse a row whose kind does not
 * fit its field. */
typedef struct {
    size_t at;
    size_t size;
} loom_cli_field;

#define LOOM_CLI_FIELD(type, member) \
    { offsetof(type, member) + 1, sizeof(((type *)0)->member) }

typedef struct {
    const char *name;
    int value;
    bool hidden;   /* an alias: accepted, not listed */
} loom_cli_choice;

/* The text of `def` that shows no default. */
#define LOOM_CLI_NO_DEFAULT ""

typedef struct {
    const char *name, *short_name;
    loom_cli_kind kind;
    loom_cli_field field, given;
    int64_t lo, hi;
    double min, max;
    const loom_cli_choice *choices;
    /* CUSTOM: returns false after printing a usage error (loom_cli_usage_error). */
    bool (*parse)(const char *cmd, const char *opt, const char *value, void *args);
    const char *metavar, *help, *def;
} loom_cli_option;

/* The positional arguments: none (max 0), one (max 1: a const char *
 * field) or a list of at most max (a const char *[max] field and an int
 * count). Whether one is required is the command's check after parsing. */
typedef struct {
    const char *metavar;   /* "MODEL", "FILE..." */
    const char *help;
    loom_cli_field field, count;
    int max;
    const char *noun;      /* in "one NOUN expected, got …" / "at most N NOUN" */
    /* max 1: a printf format taking (first, extra) to use instead of
     * "one NOUN expected, got '%s' and '%s'"; max 0: a text appended to
     * "unexpected argument 'X'". */
    const char *too_many;
} loom_cli_positional;

typedef struct {
    const char *cmd;            /* "plan", as in "loom plan" */
    const char *usage;          /* the synopsis: "usage: loom plan [MODEL] …\n" */
    const char *about;          /* prose between the synopsis and the options */
    const char *epilogue;       /* prose after the options (optional) */
    const char *(*epilogue_fn)(void);   /* and text known only at run time (optional) */
    const loom_cli_option *opts;
    size_t n_opts;
    loom_cli_positional pos;
    size_t args_size;           /* sizeof the args struct */
    void (*init)(void *args);   /* fills the args struct with the defaults */
} loom_cli_spec;

/* What loom_cli_parse returns when the command should go on. */
#define LOOM_CLI_RUN (-1)

/* Fills args with spec->init, then reads argv[1..argc-1] (argv[0] is the
 * command name). Returns LOOM_CLI_RUN when parsed, LOOM_EXIT_OK after
 * printing --help to stdout, LOOM_EXIT_USAGE after printing a usage error. */
int loom_cli_parse(const loom_cli_spec *spec, int argc, char **argv, void *args);

/* Prints the help: synopsis, about, the positional and every option with
 * its default, epilogue. */
void loom_cli_help(const loom_cli_spec *spec, FILE *f);

/* The table's invariants, for tests: each row has a name, names are unique,
 * the kind fits the field, ranges are ordered, an ENUM has choices, a CUSTOM
 * has parse, every "--word" in the synopsis is an option of the table, and
 * the defaults the help shows are in range. On failure writes what is wrong
 * to msg and returns false. */
bool loom_cli_spec_check(const loom_cli_spec *spec, char *msg, size_t n);

#endif
