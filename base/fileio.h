/*
 * fileio.h — whole-file reads and atomic writes.
 *
 * Every output file loom writes goes through loom_write_file_atomic: the data
 * is written to a temporary ".NAME.XXXXXXXXXXXX.loom-tmp" in PATH's directory,
 * created exclusively (O_CREAT | O_EXCL | O_NOFOLLOW, 12 random characters, so
 * a symlink or file planted at a guessable name is never opened), fsynced and
 * renamed over PATH; a crash or a failed write never leaves a partial PATH.
 * A temporary left by SIGKILL is a hidden file that never has PATH's name or
 * extension, so nothing mistakes it for output. The path "-" means standard
 * output (written directly).
 *
 * Outputs must be regular files: a PATH that exists as a directory, FIFO,
 * device or socket, or as a symlink to anything (/dev/stdout, a file
 * elsewhere — the rename would replace the link, not write its target), is
 * refused and left as it is.
 */
#ifndef LOOM_BASE_FILEIO_H
#define LOOM_BASE_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include "base/error.h"

/* Reads the whole file into a NUL-terminated heap buffer (free() it).
 * Refuses files larger than max_bytes (0 = 256 MiB). */
loom_status loom_read_file(const char *path, size_t max_bytes, char **out_data,
                           size_t *out_len, loom_error *err);

/* Writes len bytes atomically (temp file + fsync + rename). */
loom_status loom_write_file_atomic(const char *path, const void *data, size_t len,
                                   loom_error *err);

/* Whether path may be written by loom_write_file_atomic: "-", a path that
 * does not exist yet, or a regular file (not a symlink). Otherwise
 * LOOM_ERR_IO naming the path and what it is ("a FIFO"). The CLI checks its
 * outputs with this before a long computation; the writer checks again. */
loom_status loom_output_check(const char *path, loom_error *err);

/* Whether a and b name the same file: the same device and inode when both
 * exist, else the same normalized path (absolute, the existing directory
 * part resolved, "." and ".." and repeated '/' removed). "-" is never the
 * same as anything. */
bool loom_same_file(const char *a, const char *b);

/* For a writer that must open the file itself (GLPK's glp_write_lp):
 * checks path as loom_output_check does and creates an empty temporary
 * beside it exclusively, as loom_write_file_atomic does; its name goes to
 * tmp (n >= PATH_MAX + 64 bytes). The caller writes it and renames it over
 * path, or removes it. */
loom_status loom_fileio_reserve_tmp(const char *path, char *tmp, size_t n, loom_error *err);

/* Async-signal-safe: removes the temporary file of a write in progress, if
 * any. A signal handler that ends the program calls it so that not even a
 * hidden temporary is left. */
void loom_fileio_unlink_inflight(void);

/* Test hook: when set, the next atomic write fails after writing part of the
 * temporary file, as a full disk would. Used by tests only. */
extern int loom_fileio_fail_next_write;

#endif
