/*
 * export_target.h — the per-target halves of loom_export_check and
 * loom_export_render (export.h), one pair per export_<target>.c. Internal to
 * planner/: export.c dispatches to them; tests call the Megatron argument
 * builder directly to check every emitted name.
 *
 * A check appends what its target cannot run; a renderer is called only when
 * its check found nothing, with the resolved chunk split (pp · vpp entries),
 * and writes the whole file to f.
 */
#ifndef LOOM_EXPORT_TARGET_H
#define LOOM_EXPORT_TARGET_H

#include <stdio.h>
#include "planner/export/export.h"

#define LOOM_EXPORT_TARGET_FNS(name)                                                        \
    void loom_export_check_##name(const loom_runtime_config *c, const int32_t *chunks,      \
                                  loom_export_list *obstacles);                             \
    loom_status loom_export_write_##name(const loom_runtime_config *c, const int32_t *chunks, \
                                         const char *source, FILE *f, loom_export_list *notes, \
                                         loom_error *err);
LOOM_EXPORT_TARGET_FNS(megatron)
LOOM_EXPORT_TARGET_FNS(vllm)
LOOM_EXPORT_TARGET_FNS(deepspeed)
LOOM_EXPORT_TARGET_FNS(torchtitan)
#undef LOOM_EXPORT_TARGET_FNS

/* One Megatron-LM argument as emitted: name ("--tensor-model-parallel-size")
 * and value ("" for a flag). */
typedef struct {
    const char *name;
    char value[128];
} loom_megatron_kv;

#define LOOM_MEGATRON_MAX_ARGS 96

/* The Megatron-LM arguments for c in launch-script order; returns their
 * count (<= LOOM_MEGATRON_MAX_ARGS). */
int loom_export_megatron_args(const loom_runtime_config *c, const int32_t *chunks,
                              loom_megatron_kv *out);

/* Shared by the comment headers: "# loom export --to T" lines naming the
 * source plan, the model and loom's prediction, each line prefixed by
 * `comment` ("#" for bash/YAML/Python). */
void loom_export_header(FILE *f, const char *comment, loom_export_target t,
                        const loom_runtime_config *c, const char *source);

/* Writes text taken from an input (a model name, a file name) inside a
 * comment line of any target: printable ASCII is copied, every other byte —
 * newlines, carriage returns, other control bytes, DEL and all non-ASCII
 * bytes, among them YAML's line breaks NEL, U+2028 and U+2029 — is written
 * as \xNN. The comment therefore ends where loom ends it, in bash, YAML and
 * TOML alike, and the file stays printable ASCII (TOML forbids control bytes
 * in comments, YAML non-printable characters anywhere). */
void loom_export_put_comment_text(FILE *f, const char *s);

/* True when every chunk holds the same number of blocks. */
bool loom_export_chunks_even(const int32_t *chunks, int32_t n);

#endif
