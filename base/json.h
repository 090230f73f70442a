/*
 * json.h — the one place loom's readers turn cJSON into checked values.
 *
 * Every reader (HF config, loom graph, cluster, profile db, plan, calibration)
 * parses through loom_json_parse, which rejects what cJSON would accept
 * silently — duplicate keys, non-finite numbers (1e999), nesting deeper than
 * LOOM_JSON_MAX_DEPTH — and reports malformed JSON as FILE:LINE:COL. Field
 * getters take the JSON path of the object ("$.stages[2]") so an error reads
 *
 *     cluster.json: $.intra_node.bandwidth_GBps: expected a number > 0, found -3
 *
 * Integer getters reject fractions and values outside [lo, hi], which is where
 * user-given sizes get their overflow check.
 */
#ifndef LOOM_BASE_JSON_H
#define LOOM_BASE_JSON_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "base/limits.h"

#define LOOM_JSON_MAX_DEPTH 64

/* Context shared by one read: the file name used in every message. */
typedef struct {
    const char *file;
    loom_error *err;
} loom_jctx;

/* Parses text (len bytes) named `file`; on success *out owns the tree.
 * Exactly one JSON value: anything but whitespace after it is an error
 * (FILE:LINE:COL, "unexpected data after the JSON value"). Before cJSON
 * builds anything, one pass over the text refuses nesting deeper than
 * LOOM_JSON_MAX_DEPTH (FILE:LINE:COL) and more values than lim->max_values,
 * so the tree never costs more than the limit; lim NULL is
 * LOOM_JSON_LIMITS_DEFAULT (base/limits.h). */
loom_status loom_json_parse_limited(const char *file, const char *text, size_t len,
                                    const loom_json_limits *lim, cJSON **out, loom_error *err);
/* Reads (at most lim->max_bytes) and parses a file. */
loom_status loom_json_parse_file_limited(const char *path, const loom_json_limits *lim,
                                         cJSON **out, loom_error *err);
/* The same with LOOM_JSON_LIMITS_DEFAULT. */
loom_status loom_json_parse(const char *file, const char *text, size_t len, cJSON **out,
                            loom_error *err);
loom_status loom_json_parse_file(const char *path, cJSON **out, loom_error *err);

/* The string value of top-level member `key` of the object in text, found
 * without building a tree (O(len), no allocation): copied into out (n
 * bytes, escapes kept as written) and true; false when text is not an
 * object, has no such member or its value is not a string. Lets a reader
 * pick its limits (an HF config or a loom graph) before parsing. */
bool loom_json_peek_top_string(const char *text, size_t len, const char *key, char *out,
                               size_t n);

/* Field getters. `path` is the JSON path of obj; `key` the member. When
 * `required` is false and the member is absent (or null) *out is left as is
 * and LOOM_OK is returned. */
loom_status loom_json_get_int(const loom_jctx *c, const cJSON *obj, const char *path,
                              const char *key, bool required, int64_t lo, int64_t hi,
                              int64_t *out);
loom_status loom_json_get_num(const loom_jctx *c, const cJSON *obj, const char *path,
                              const char *key, bool required, double lo, double hi,
                              double *out);
loom_status loom_json_get_bool(const loom_jctx *c, const cJSON *obj, const char *path,
                               const char *key, bool required, bool *out);
/* *out points into the cJSON tree (valid while it lives). */
loom_status loom_json_get_str(const loom_jctx *c, const cJSON *obj, const char *path,
                              const char *key, bool required, const char **out);
/* Member that must be an object / array (NULL when optional and absent). */
loom_status loom_json_get_object(const loom_jctx *c, const cJSON *obj, const char *path,
                                 const char *key, bool required, const cJSON **out);
loom_status loom_json_get_array(const loom_jctx *c, const cJSON *obj, const char *path,
                                const char *key, bool required, const cJSON **out);

/* Fails naming the first member of obj not in `allowed` (NULL-terminated),
 * listing the allowed names. */
loom_status loom_json_check_keys(const loom_jctx *c, const cJSON *obj, const char *path,
                                 const char *const *allowed);

/* Error at a path: "FILE: PATH: message". */
loom_status loom_json_fail(const loom_jctx *c, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Short description of a JSON value's type for messages ("a string", "null"). */
const char *loom_json_type_name(const cJSON *v);

/* Adds number v to obj so that it reads back as exactly v. cJSON prints
 * 15 significant digits whenever they read back within one ulp, which
 * loses the last bit; such values are written with 17 digits instead.
 * Returns the item, NULL when out of memory. */
cJSON *loom_json_add_exact_number(cJSON *obj, const char *key, double v);

/* Serialises with stable formatting (2-space indent, keys in insertion
 * order; numbers as cJSON prints them, see loom_json_add_exact_number)
 * into a heap string ending in '\n'. */
char *loom_json_print(const cJSON *v);

#endif
