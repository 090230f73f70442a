/*
 * megatron_cmdline.h — a Megatron-LM launch command read the way argparse
 * reads it, before any meaning is given to it (megatron_import.c does that).
 *
 * Of a launch script's commands (shell_words.h) the training command is the
 * one running a *.py script (pretrain_*.py / train*.py preferred, the last
 * such otherwise); text without one must be bare Megatron-LM arguments. The
 * words before the script are the launcher's: its node count and processes
 * per node are read from torchrun (--nnodes, --nproc-per-node /
 * --nproc_per_node, --standalone), deepspeed (--num_nodes, --num_gpus) and
 * srun (-N / --nodes, --ntasks-per-node). The words after it are Megatron-LM
 * arguments, each checked against megatron_args.h and given its values: a
 * flag none, int / float / str one (`--name value` or `--name=value`), a
 * list every word up to the next `--name`; the last occurrence wins. Values
 * of int and float arguments are checked as such.
 *
 * Messages read "SOURCE:LINE: …", LINE being where the argument (or the
 * training command) starts in the text.
 */
#ifndef LOOM_MEGATRON_CMDLINE_H
#define LOOM_MEGATRON_CMDLINE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "planner/import/shell_words.h"

/* The last value given for one argument. */
typedef struct {
    bool set;
    const char *value;       /* NULL for a flag; a list's words joined by spaces */
    char *owned;             /* list values are built, not borrowed */
    int line;
    bool unresolved;         /* the value holds an unknowable expansion */
    const char *raw;         /* that expansion as written */
} loom_megatron_given;

typedef struct {
    const char *source;
    loom_error *err;
    loom_megatron_given *given;   /* [loom_megatron_arg_count()], by table index */
    int line;                     /* where the training command (script) is */
    char script[128];             /* its basename; "" for bare arguments */
    int64_t nodes, per_node;      /* launcher's; 0 = not stated */
    int n_args;                   /* Megatron-LM arguments read */
} loom_megatron_line;

/* Reads the training command of sh (the words of `source`). On failure the
 * line is freed already. Free with loom_megatron_line_free. */
loom_status loom_megatron_line_read(const char *source, const loom_sh_script *sh,
                                    loom_megatron_line *out, loom_error *err);
void loom_megatron_line_free(loom_megatron_line *l);

/* "SOURCE:LINE: message" (line 0 = the training command's); returns
 * LOOM_ERR_INVALID. */
loom_status loom_megatron_line_fail(const loom_megatron_line *l, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
loom_status loom_megatron_line_vfail(const loom_megatron_line *l, int line, const char *fmt,
                                     va_list ap);

/* Whether argument `name` (listed in megatron_args.txt) was given, and the
 * line of its last occurrence (the command's line when absent). */
bool loom_megatron_line_has(const loom_megatron_line *l, const char *name);
int loom_megatron_line_at(const loom_megatron_line *l, const char *name);

/* Typed values, dflt when absent. Fail naming the argument when the value
 * is not of the type, out of [lo, hi], or unresolved. */
loom_status loom_megatron_line_int(const loom_megatron_line *l, const char *name, int64_t dflt,
                                   int64_t lo, int64_t hi, int64_t *out);
loom_status loom_megatron_line_num(const loom_megatron_line *l, const char *name, double dflt,
                                   double *out);
loom_status loom_megatron_line_str(const loom_megatron_line *l, const char *name, const char *dflt,
                                   const char **out);

/* Strict decimal integer (the whole string). */
bool loom_megatron_parse_i64(const char *s, int64_t *out);

#endif
