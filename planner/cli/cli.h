/*
 * cli.h — shared pieces of the `loom` command line: the subcommand table
 * entry, exit codes, usage errors, the LOOM_DETERMINISTIC rule and name
 * resolution for bundled models and clusters. Each subcommand lives in its
 * own planner/cli/cmd_*.c and reads its options with options.h.
 */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include "graph/graph.h"
#include <stdint.h>
#include "base/error.h"
#include "costs/cluster.h"
#include "planner/cli/options.h"

enum { LOOM_EXIT_OK = 0, LOOM_EXIT_FAIL = 1, LOOM_EXIT_USAGE = 2, LOOM_EXIT_INFEASIBLE = 3 };

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);   /* argv[0] is the subcommand name */
    const char *help;
} loom_command;

int loom_cmd_inspect(int argc, char **argv);
int loom_cmd_eval(int argc, char **argv);
int loom_cmd_eval_serve(int argc, char **argv);   /* eval --mode serve (cmd_eval_serve.c) */
int loom_cmd_calibrate_serve(int argc, char **argv);   /* calibrate --serving */
/* A model id of a launch line or a record ("meta-llama/Meta-Llama-3-70B-Instruct")
 * → the path of the bundled config of that architecture (examples/models). */
bool loom_cli_find_model_id(const char *id, char *path, size_t n);
int loom_cmd_calibrate(int argc, char **argv);
int loom_cmd_shard(int argc, char **argv);
int loom_cmd_plan(int argc, char **argv);
int loom_cmd_plan_serve(int argc, char **argv);   /* plan --mode serve (cmd_plan_serve.c) */
/* export of a serving plan (cmd_export_serve.c): to vLLM or SGLang (sglang
 * true), one pool (NULL: an aggregated plan's only one) to out_path or stdout */
int loom_cmd_export_serve(const char *plan_path, const char *out_path, bool sglang,
                          const char *pool);
int loom_cmd_export(int argc, char **argv);
int loom_cmd_compare(int argc, char **argv);
int loom_cmd_compare_merge(int argc, char **argv);

/* Each command's option table (options.h), for its --help and for tests. */
extern const loom_cli_spec loom_cli_spec_inspect, loom_cli_spec_eval, loom_cli_spec_calibrate,
    loom_cli_spec_shard, loom_cli_spec_plan, loom_cli_spec_export, loom_cli_spec_compare,
    loom_cli_spec_compare_merge, loom_cli_spec_eval_serve, loom_cli_spec_calibrate_serve,
    loom_cli_spec_plan_serve;

/* Prints "loom: MESSAGE" to stderr and returns the exit code for err. */
int loom_cli_fail(const loom_error *err);
/* Prints "loom CMD: MESSAGE" (usage problem) and returns LOOM_EXIT_USAGE. */
int loom_cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The defaults every command assumes when the option is not given (loom plan,
 * loom eval, loom compare's suites): tokens per sequence, sequences per
 * step, the ZeRO stage (1: optimizer state sharded over the data-parallel
 * group, Megatron's distributed optimizer). Each command prints the ones it
 * used in its header. */
#define LOOM_CLI_DEFAULT_SEQ 4096
#define LOOM_CLI_DEFAULT_GBS 256
#define LOOM_CLI_DEFAULT_ZERO 1

/* The default sequence for the model at path: LOOM_CLI_DEFAULT_SEQ, capped at
 * a learned position table (GPT-2's n_positions), which cannot go beyond
 * it. The one rule for loom plan and loom eval. */
int64_t loom_cli_default_seq(const char *model_path);

/* Warnings on stderr ("loom CMD: warning: …") for inputs that are legal but
 * probably a mistake: a link bandwidth outside what its kind of link has (a
 * NIC given in Gb/s as GB/s; named by cluster_file and its JSON field, or by
 * the preset when cluster_file is NULL), a training batch too small to feed
 * the cluster, a sequence beyond the model's declared positions
 * (max_positions 0: unknown). Returns how many it printed. */
int loom_cli_warn_inputs(const char *cmd, const char *cluster_file, const loom_cluster *c,
                         int64_t max_positions, int64_t gbs, int64_t seq, bool inference);

/* Whether LOOM_DETERMINISTIC asks for byte-identical output (search times
 * written as 0, as --no-timings): set, non-empty and not "0". The one rule
 * for every command. */
bool loom_cli_deterministic(void);

/* A file named on the command line: the option that named it ("-o",
 * "--svg", "MODEL") and the path (NULL: not given, skipped). */
typedef struct {
    const char *opt;
    const char *path;
} loom_cli_path;

/* Checks a run's output paths before any work is done: each is "-" or may
 * be written (base/fileio.h loom_output_check: a regular file or nothing,
 * never a device, FIFO, directory or a symlink to one), none is one of the
 * inputs, and no two name the same file (loom_same_file: device and inode
 * when the file exists, the normalized path otherwise). Prints a usage
 * error naming both options and returns LOOM_EXIT_USAGE; 0 when fine. */
int loom_cli_check_outputs(const char *cmd, const loom_cli_path *inputs, int n_inputs,
                           const loom_cli_path *outputs, int n_outputs);

/* Resolves a model or cluster argument: an existing path is used as is;
 * otherwise a bundled name ("llama-3-8b", "dgx-h100-x2.json") is looked up
 * under examples/<kind>/ in the source tree, then the installed data dir.
 * Returns false (out untouched) when nothing matched. */
bool loom_cli_find_data(const char *arg, const char *kind, char *out, size_t n);

/* For a name loom_cli_find_data did not find: "did you mean llama-3-70b?
 * known: …" — the nearest bundled names of `kind` (edit distance, case
 * ignored) and the sorted list, plus `extra` names (NULL-terminated, may be
 * NULL: cluster presets). */
void loom_cli_suggest(const char *arg, const char *kind, const char *const *extra, char *out,
                      size_t n);

/* Resolves a --cluster argument to what loom_cluster_load takes: a valid
 * preset name as given (case-insensitive), an existing file, or a bundled
 * cluster file (examples/clusters/, ".json" optional, case-insensitive), in
 * buf. NULL when it is none of these, after printing "<who>: cluster 'ARG':
 * not a preset, a file or a bundled cluster; did you mean dgx-h100-x16?
 * presets: …; bundled files: …". A preset's name with a bad node count is
 * returned as is, for loom_cluster_load's own message. */
const char *loom_cli_cluster_arg(const char *who, const char *arg, char *buf, size_t n);

/* Prints "<who>: ARG: no such file, and no bundled model of that name; did
 * you mean …? known: …" on stderr and returns LOOM_EXIT_FAIL. */
int loom_cli_no_model(const char *who, const char *arg);

/* Prints the graph's model warnings on stderr ("loom: warning: …"). */
void loom_cli_print_warnings(const loom_graph *g);

#endif
