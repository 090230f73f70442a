/*
 * fuzz_common.h — what the libFuzzer targets (tests/fuzz/fuzz_*.c) share.
 *
 * Each target feeds arbitrary bytes to one reader and turns a broken promise
 * into a crash the fuzzer reports (abort), besides the crashes ASan and
 * UBSan catch on their own. The promises every reader makes on ANY input
 * (base/error.h, docs/design.md §3 "Bad input gets an error that names the file"):
 *
 *   - a failure returns a status other than LOOM_OK, records that status in
 *     err.status, and leaves a non-empty message naming the file;
 *   - a success hands back a value that survives its own writer: written
 *     and read again it writes the same bytes (checked per target).
 *
 * Readers that only take a path get the input through one per-process file
 * in $TMPDIR (default /tmp), rewritten for every input and removed at exit.
 */
#ifndef LOOM_FUZZ_COMMON_H
#define LOOM_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fileio.h"

/* [0] the input file, [1] a scratch output for round trips. */
static char fuzz_paths[2][4096];

static inline void fuzz_die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz invariant broken: %s\n  %s\n", what, detail ? detail : "");
    abort();
}

static inline void fuzz_cleanup(void)
{
    for (int i = 0; i < 2; i++)
        if (fuzz_paths[i][0]) remove(fuzz_paths[i]);
}

/* The per-process file of slot i (0 input, 1 output), created at first use and
 * removed at exit. */
static inline const char *fuzz_temp_name(int i)
{
    static const char *const suffix[2] = {"input.json", "output.json"};
    static int registered;
    if (!registered) {
        registered = 1;
        atexit(fuzz_cleanup);
    }
    if (!fuzz_paths[i][0]) {
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir) dir = "/tmp";
        snprintf(fuzz_paths[i], sizeof fuzz_paths[i], "%s/loom-fuzz-%ld-%s", dir,
                 (long)getpid(), suffix[i]);
    }
    return fuzz_paths[i];
}

/* Writes data[0..size) to the per-process input file; returns its path. */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
    const char *path = fuzz_temp_name(0);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        fuzz_die("cannot write the fuzz input file", path);
    return path;
}

/* A scratch path for writing a parsed value back out. */
static inline const char *fuzz_out_file(void) { return fuzz_temp_name(1); }

/* The whole of a file the value was just written to (free() it). */
static inline char *fuzz_slurp(const char *path)
{
    loom_error err = {0};
    char *text = NULL;
    if (loom_read_file(path, 0, &text, NULL, &err) != LOOM_OK) fuzz_die("read back", err.msg);
    return text;
}

/* The failure contract: status recorded, message non-empty and naming file. */
static inline void fuzz_check_failure(loom_status s, const loom_error *err, const char *file)
{
    if (s == LOOM_OK) return;
    if (s < 0 || s >= LOOM_STATUS_COUNT) fuzz_die("status out of range", err->msg);
    if (err->status != s) fuzz_die("err.status differs from the returned status", err->msg);
    if (!err->msg[0]) fuzz_die("empty error message", loom_status_str(s));
    if (!memchr(err->msg, '\0', sizeof err->msg)) fuzz_die("unterminated error message", "");
    if (!strstr(err->msg, file)) fuzz_die("error message does not name the file", err->msg);
}

/* Two writer outputs of the same value must be byte-identical. */
static inline void fuzz_check_same(const char *a, const char *b, const char *what)
{
    if (!a || !b) fuzz_die(what, "writer returned NULL");
    if (strcmp(a, b) != 0) {
        fprintf(stderr, "---- first\n%s\n---- second\n%s\n", a, b);
        fuzz_die(what, "round trip changed the text");
    }
}

#endif
