/*
 * main.c — the `loom` command: dispatches to one subcommand per file
 * (planner/cmd_*.c). Only the CLI prints and chooses exit codes:
 * 0 success, 1 the input or the problem is bad (message on stderr),
 * 2 usage error, 3 no feasible plan.
 */
#include <stdio.h>
#include <string.h>

#include "planner/cli/cli.h"

static const loom_command commands[] = {
    {"inspect", loom_cmd_inspect, "parameter counts, FLOPs, ops and activation bytes of a model"},
    {"plan", loom_cmd_plan, "the placement plan of a model on a cluster (stage DP + intra-op ILP)"},
    {"export", loom_cmd_export, "a plan as Megatron-LM, vLLM, DeepSpeed or torchtitan configuration"},
    {"shard", loom_cmd_shard, "intra-operator sharding of one layer on a logical mesh (the ILP)"},
    {"eval", loom_cmd_eval, "step time, MFU and memory of one Megatron-style configuration"},
    {"calibrate", loom_cmd_calibrate, "fit the cost model's efficiencies to measured runs"},
    {"compare", loom_cmd_compare, "search algorithms side by side on a suite of cases, one evaluator"},
    {"compare-merge", loom_cmd_compare_merge, "join the JSON reports of `loom compare --shard` runs"},
    /* helpers: add one line per subcommand here, keep the order of the README */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: loom COMMAND [ARGS...]\n\ncommands:\n");
    int w = 0;   /* the longest name sets the column (compare-merge) */
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if ((int)strlen(commands[i].name) > w) w = (int)strlen(commands[i].name);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-*s  %s\n", w, commands[i].name, commands[i].help);
    fprintf(f, "\n`loom COMMAND --help` describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("loom %s\n", LOOM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "loom: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
