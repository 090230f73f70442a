/*
 * fileio.h — whole-file reads and atomic writes.
 *
 * Every output file loom writes goes through loom_write_file_atomic: the data
 * is written to "PATH.tmp.<pid>" in the same directory, flushed, and renamed
 * over PATH, so a crash or a failed write never leaves a partial file behind.
 * The path "-" means standard output (written directly).
 */
#ifndef LOOM_BASE_FILEIO_H
#define LOOM_BASE_FILEIO_H

#include <stddef.h>
#include "base/error.h"

/* Reads the whole file into a NUL-terminated heap buffer (free() it).
 * Refuses files larger than max_bytes (0 = 256 MiB). */
loom_status loom_read_file(const char *path, size_t max_bytes, char **out_data,
                           size_t *out_len, loom_error *err);

/* Writes len bytes atomically (temp file + fsync + rename). */
loom_status loom_write_file_atomic(const char *path, const void *data, size_t len,
                                   loom_error *err);

/* Test hook: when set, the next atomic write fails after writing part of the
 * temporary file, as a full disk would. Used by tests only. */
extern int loom_fileio_fail_next_write;

#endif
