/* fileio.c — whole-file reads and atomic temp+rename writes (see fileio.h). */
#include "base/fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int loom_fileio_fail_next_write = 0;

loom_status loom_read_file(const char *path, size_t max_bytes, char **out_data,
                           size_t *out_len, loom_error *err)
{
    if (max_bytes == 0) max_bytes = (size_t)256 << 20;
    *out_data = NULL;
    if (out_len) *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return loom_error_set(err, LOOM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf) goto nomem;
    for (;;) {
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (len > max_bytes) {
            free(buf);
            fclose(f);
            return loom_error_set(err, LOOM_ERR_INVALID, "%s: file larger than %zu bytes",
                                  path, max_bytes);
        }
        if (n == 0) break;
        if (len == cap) {
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) goto nomem;
            buf = nb;
        }
    }
    if (ferror(f)) {
        free(buf);
        fclose(f);
        return loom_error_set(err, LOOM_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    }
    fclose(f);
    buf[len] = '\0';
    *out_data = buf;
    if (out_len) *out_len = len;
    return LOOM_OK;
nomem:
    free(buf);
    fclose(f);
    return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory reading file", path);
}

loom_status loom_write_file_atomic(const char *path, const void *data, size_t len,
                                   loom_error *err)
{
    if (strcmp(path, "-") == 0) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
            return loom_error_set(err, LOOM_ERR_IO, "stdout: write failed: %s", strerror(errno));
        return LOOM_OK;
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", path);
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());

    FILE *f = fopen(tmp, "wb");
    if (!f) {
        loom_error_set(err, LOOM_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        free(tmp);
        return LOOM_ERR_IO;
    }
    int ok;
    if (loom_fileio_fail_next_write) {
        /* Simulated full disk: half the data reaches the temp file. */
        loom_fileio_fail_next_write = 0;
        fwrite(data, 1, len / 2, f);
        errno = ENOSPC;
        ok = 0;
    } else {
        ok = fwrite(data, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
    }
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok || rename(tmp, path) != 0) {
        if (ok) saved = errno;
        remove(tmp);
        free(tmp);
        return loom_error_set(err, LOOM_ERR_IO, "%s: write failed: %s (nothing was written)",
                              path, strerror(saved));
    }
    free(tmp);
    return LOOM_OK;
}
