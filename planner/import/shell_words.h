/*
 * shell_words.h — the words of a launch script, as bash would pass them to
 * its commands, for reading Megatron-LM launch lines (megatron_import.c).
 *
 * Launch scripts are written for bash, so a faithful reading needs bash's
 * word rules, not a split on spaces. This is the subset that launch scripts
 * use, evaluated without running anything:
 *
 *   - commands end at a newline, `;`, `&`, `&&`, `||` or `|`; a backslash
 *     before a newline continues the line; `#` at a word's start comments
 *     to the end of the line;
 *   - quoting: '…' literal, "…" with \" \\ \$ \` escapes and expansion, \x
 *     outside quotes;
 *   - variables: NAME=value and NAME=( w1 w2 … ) (arrays, over several
 *     lines), also after export / declare / local / readonly; expansions
 *     $NAME, ${NAME}, ${NAME:-word}, ${NAME-word}, ${NAME:=word},
 *     ${NAME[@]} / ${NAME[*]} (array elements as separate words), and
 *     $(( arithmetic )) with + - * / % and parentheses;
 *   - unquoted expansions are split into words on blanks, as bash does.
 *
 * Variables start empty (the real environment is never read: the same text
 * gives the same words anywhere). What cannot be known without running the
 * script — an unset variable, $(command), `command`, $1 — expands to
 * nothing and marks the word `unresolved`, keeping the expansion as written
 * so a message can quote it. "$@" and "$*" (extra arguments passed to the
 * script) expand to no word at all.
 */
#ifndef LOOM_SHELL_WORDS_H
#define LOOM_SHELL_WORDS_H

#include <stdbool.h>
#include "base/error.h"

typedef struct {
    char *text;            /* the word after expansion and quote removal */
    int line;              /* 1-based line of the script where it starts */
    bool unresolved;       /* holds an expansion that could not be resolved */
    char raw[64];          /* that expansion as written ("$TP", "$(nproc)") */
} loom_sh_word;

typedef struct {
    int n_words;
    loom_sh_word *words;   /* assignments (NAME=value) are not words */
} loom_sh_command;

typedef struct loom_sh_script loom_sh_script;

/* Splits `text` into commands and words; `source` names it in messages
 * ("launch.sh:12: unterminated quote"). Fails only on malformed text:
 * unterminated quotes, ${ or $(( ; bad arithmetic. */
loom_status loom_sh_parse(const char *source, const char *text, loom_sh_script **out,
                          loom_error *err);
void loom_sh_destroy(loom_sh_script *s);

int loom_sh_command_count(const loom_sh_script *s);
const loom_sh_command *loom_sh_command_at(const loom_sh_script *s, int i);

/* A variable's value at the end of the script (arrays: elements joined by
 * spaces); NULL when never set. */
const char *loom_sh_var(const loom_sh_script *s, const char *name);

#endif
