/*
 * megatron_args.h — the names of Megatron-LM's command-line arguments.
 *
 * loom writes Megatron-LM launch lines (`loom export --to megatron`) and reads
 * them back (`loom eval --from-megatron`). Both sides check every argument
 * name against one list, planner/export/megatron_args.txt, taken from
 * megatron/training/arguments.py at the commit named in that file (and in
 * loom_megatron_args_source). The list also records how many values each
 * argument takes, which is what lets the reader split a launch line the way
 * argparse does: `--sequence-parallel --micro-batch-size 1` is a flag
 * followed by an option with one value.
 *
 * The table is compiled in (megatron_args_table.h, generated from the .txt
 * by tools/gen_megatron_args.sh), sorted bytewise, so lookups are a binary
 * search and need no file at run time.
 */
#ifndef LOOM_MEGATRON_ARGS_H
#define LOOM_MEGATRON_ARGS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    LOOM_MARG_FLAG,    /* no value: store_true / store_false */
    LOOM_MARG_INT,     /* one integer */
    LOOM_MARG_FLOAT,   /* one number */
    LOOM_MARG_STR,     /* one word */
    LOOM_MARG_LIST,    /* zero or more words (nargs '*' / '+') */
} loom_megatron_arg_kind;

typedef struct {
    const char *name;              /* with the leading "--" */
    loom_megatron_arg_kind kind;
} loom_megatron_arg;

/* Where the list was taken from: repository, file and commit. */
extern const char loom_megatron_args_source[];

/* The argument called `name` ("--num-layers"), or NULL when Megatron-LM has
 * no such argument. Exact match: argparse runs with allow_abbrev=False. */
const loom_megatron_arg *loom_megatron_arg_find(const char *name);

/* The listed name closest to `name`, for "did you mean" hints: the one
 * sharing most dash-separated words with it, then the fewest edits (ties:
 * first in sorted order). Never NULL. */
const char *loom_megatron_arg_nearest(const char *name);

/* The whole table, sorted bytewise by name (tests walk it). */
size_t loom_megatron_arg_count(void);
const loom_megatron_arg *loom_megatron_arg_at(size_t i);

/* "flag", "int", "float", "str", "list". */
const char *loom_megatron_arg_kind_name(loom_megatron_arg_kind k);

#endif
