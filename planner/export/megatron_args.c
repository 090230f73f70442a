/*
 * megatron_args.c — lookup in the compiled list of Megatron-LM argument names
 * (see megatron_args.h). The table comes from megatron_args_table.h, which
 * tools/gen_megatron_args.sh writes from megatron_args.txt in bytewise order;
 * loom_megatron_arg_find binary-searches it with strcmp, which is bytewise.
 */
#include "planner/export/megatron_args.h"

#include <stdlib.h>
#include <string.h>

const char loom_megatron_args_source[] =
    "NVIDIA/Megatron-LM megatron/training/arguments.py @ "
    "d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22)";

static const loom_megatron_arg table[] = {
#define LOOM_MARG(name, kind) {name, LOOM_MARG_##kind},
#include "planner/export/megatron_args_table.h"
#undef LOOM_MARG
};

#define N_ARGS (sizeof table / sizeof table[0])

static int cmp_name(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const loom_megatron_arg *)elem)->name);
}

const loom_megatron_arg *loom_megatron_arg_find(const char *name)
{
    return bsearch(name, table, N_ARGS, sizeof table[0], cmp_name);
}

/* Levenshtein distance with one rolling row; names are short (< 64 bytes),
 * longer inputs are compared on their first 127 bytes. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 127) la = 127;
    if (lb > 127) lb = 127;
    size_t row[128];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* How many of name's dash-separated words ("tensor", "parallel") appear in
 * cand as whole words: a misremembered name usually keeps most of them. */
static int shared_words(const char *name, const char *cand)
{
    int n = 0;
    for (const char *w = name; *w;) {
        while (*w == '-') w++;
        size_t len = strcspn(w, "-");
        if (len == 0) break;
        for (const char *c = cand; *c;) {
            while (*c == '-') c++;
            size_t cl = strcspn(c, "-");
            if (cl == len && strncmp(c, w, len) == 0) {
                n++;
                break;
            }
            c += cl;
        }
        w += len;
    }
    return n;
}

const char *loom_megatron_arg_nearest(const char *name)
{
    /* most shared words first, then the smallest edit distance:
     * --tensor-parallel-size -> --tensor-model-parallel-size (3 words)
     * rather than --context-parallel-size (2 words, fewer edits) */
    const char *best = table[0].name;
    int best_w = -1;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < N_ARGS; i++) {
        int w = shared_words(name, table[i].name);
        size_t d = edit_distance(name, table[i].name);
        if (w > best_w || (w == best_w && d < best_d)) {
            best_w = w;
            best_d = d;
            best = table[i].name;
        }
    }
    return best;
}

size_t loom_megatron_arg_count(void) { return N_ARGS; }

const loom_megatron_arg *loom_megatron_arg_at(size_t i)
{
    return i < N_ARGS ? &table[i] : NULL;
}

static const char *const kind_names[] = {"flag", "int", "float", "str", "list"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == LOOM_MARG_LIST + 1,
               "kind name table out of step with the enum");

const char *loom_megatron_arg_kind_name(loom_megatron_arg_kind k)
{
    return (unsigned)k <= LOOM_MARG_LIST ? kind_names[k] : "?";
}
