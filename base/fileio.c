/* fileio.c — whole-file reads, output checks and atomic temp+rename writes
 * (see fileio.h). */
#define _XOPEN_SOURCE 700   /* realpath */
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

/* ---- atomic writes ---------------------------------------------------------- */

/* The temporary of the write in progress, for loom_fileio_unlink_inflight:
 * the name is complete before the flag is set and the flag is cleared
 * before the name changes, so a handler never sees half a name. */
static char inflight_tmp[PATH_MAX + 64];
static volatile sig_atomic_t inflight_set;

void loom_fileio_unlink_inflight(void)
{
    if (inflight_set) unlink(inflight_tmp);
}

static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

loom_status loom_output_check(const char *path, loom_error *err)
{
    if (strcmp(path, "-") == 0) return LOOM_OK;
    if (path[0] == '\0') return loom_error_set(err, LOOM_ERR_IO, "empty output path");
    struct stat lst, st;
    if (lstat(path, &lst) != 0) return LOOM_OK;   /* absent: created */
    if (S_ISREG(lst.st_mode)) return LOOM_OK;
    if (S_ISLNK(lst.st_mode)) {
        /* The rename would replace the link, not write where it points
         * (/dev/stdout, a file elsewhere): whatever it points to, refuse. */
        bool to = stat(path, &st) == 0;
        return loom_error_set(err, LOOM_ERR_IO,
                              "%s: cannot write: a symlink (to %s): loom replaces its outputs "
                              "by rename and would replace the link; give the target's own "
                              "path, or -o - for standard output",
                              path, !to ? "nothing" : S_ISREG(st.st_mode) ? "a regular file"
                                                                          : file_kind(st.st_mode));
    }
    return loom_error_set(err, LOOM_ERR_IO,
                          "%s: cannot write: %s, not a regular file (loom writes only regular "
                          "files; -o - writes to standard output)",
                          path, file_kind(lst.st_mode));
}

/* Lexically normalized absolute form of path: cwd prepended, "//", "/./"
 * and "x/.." removed; the longest existing directory prefix resolved with
 * realpath first, so that a/../b and a symlinked directory compare right. */
static bool normalize(const char *path, char *out, size_t n)
{
    char buf[2 * PATH_MAX];
    if (path[0] == '/') {
        if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return false;
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) return false;
        if (snprintf(buf, sizeof buf, "%s/%s", cwd, path) >= (int)sizeof buf) return false;
    }
    /* resolve the directory part when it exists */
    char *slash = strrchr(buf, '/');
    char dir[2 * PATH_MAX], real[PATH_MAX];
    if (slash && slash != buf) {
        size_t dl = (size_t)(slash - buf);
        memcpy(dir, buf, dl);
        dir[dl] = '\0';
        if (realpath(dir, real)) {
            char tail[2 * PATH_MAX];
            snprintf(tail, sizeof tail, "%s", slash);
            if (strlen(real) + strlen(tail) >= sizeof buf) return false;
            memcpy(buf, real, strlen(real));
            memcpy(buf + strlen(real), tail, strlen(tail) + 1);
        }
    }
    /* lexical clean-up of what remains */
    size_t len = 0;
    out[0] = '\0';
    for (char *s = buf; *s;) {
        while (*s == '/') s++;
        if (!*s) break;
        char *e = s;
        while (*e && *e != '/') e++;
        size_t cl = (size_t)(e - s);
        if (cl == 1 && s[0] == '.') {
        } else if (cl == 2 && s[0] == '.' && s[1] == '.') {
            while (len > 0 && out[len - 1] != '/') len--;
            if (len > 0) len--;
            out[len] = '\0';
        } else {
            if (len + 1 + cl + 1 > n) return false;
            out[len++] = '/';
            memcpy(out + len, s, cl);
            len += cl;
            out[len] = '\0';
        }
        s = e;
    }
    if (len == 0) snprintf(out, n, "/");
    return true;
}

bool loom_same_file(const char *a, const char *b)
{
    if (!a || !b || strcmp(a, "-") == 0 || strcmp(b, "-") == 0) return false;
    struct stat sa, sb;
    bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb) return false;
    char na[PATH_MAX], nb[PATH_MAX];
    if (!normalize(a, na, sizeof na) || !normalize(b, nb, sizeof nb)) return strcmp(a, b) == 0;
    return strcmp(na, nb) == 0;
}

/* n random characters of [A-Za-z0-9] from /dev/urandom, mixed with the
 * clock and pid when it cannot be read (the name must be hard to guess;
 * exclusive creation, not the name, is what makes the open safe). */
static void random_name(char *out, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static uint64_t counter;
    unsigned char r[32] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    bool got = false;
    if (fd >= 0) {
        got = read(fd, r, sizeof r) == (ssize_t)sizeof r;
        close(fd);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
                 ((uint64_t)getpid() << 40) ^ (++counter * 0x9E3779B97F4A7C15ull);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;   /* xorshift64 */
        unsigned v = got ? r[i % sizeof r] : (unsigned)(x >> 24);
        out[i] = alphabet[v % (sizeof alphabet - 1)];
    }
    out[n] = '\0';
}

/* Writes all of data to fd, retrying short writes and EINTR. */
static bool write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        data += w;
        len -= (size_t)w;
    }
    return true;
}

/* Creates the temporary ".BASE.RANDOM.loom-tmp" in path's directory,
 * exclusively; returns its descriptor (name in tmp), or -1 with err set. */
static int create_tmp(const char *path, char *tmp, size_t n, loom_error *err)
{
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dlen;
    if (dlen + strlen(base) + 40 > n || n > sizeof inflight_tmp) {
        loom_error_set(err, LOOM_ERR_IO, "%s: path too long", path);
        return -1;
    }
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        char rnd[13];
        random_name(rnd, 12);
        snprintf(tmp, n, "%.*s.%s.%s.loom-tmp", (int)dlen, path, base, rnd);
        /* named for loom_fileio_unlink_inflight before it exists: a signal
         * between the open and the bookkeeping would otherwise leave it */
        inflight_set = 0;
        memcpy(inflight_tmp, tmp, strlen(tmp) + 1);
        inflight_set = 1;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        inflight_set = 0;
        loom_error_set(err, LOOM_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    }
    return fd;
}

loom_status loom_fileio_reserve_tmp(const char *path, char *tmp, size_t n, loom_error *err)
{
    loom_status s = loom_output_check(path, err);
    if (s) return s;
    int fd = create_tmp(path, tmp, n, err);
    if (fd < 0) return LOOM_ERR_IO;
    close(fd);
    inflight_set = 0;   /* the caller's now */
    return LOOM_OK;
}

loom_status loom_write_file_atomic(const char *path, const void *data, size_t len,
                                   loom_error *err)
{
    if (strcmp(path, "-") == 0) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
            return loom_error_set(err, LOOM_ERR_IO, "stdout: write failed: %s", strerror(errno));
        return LOOM_OK;
    }
    loom_status s = loom_output_check(path, err);
    if (s) return s;
    char tmp[sizeof inflight_tmp];
    int fd = create_tmp(path, tmp, sizeof tmp, err);   /* in flight from here */
    if (fd < 0) return err ? err->status : LOOM_ERR_IO;

    bool ok;
    if (loom_fileio_fail_next_write) {
        /* Simulated full disk: half the data reaches the temp file. */
        loom_fileio_fail_next_write = 0;
        (void)write_all(fd, data, len / 2);
        errno = ENOSPC;
        ok = false;
    } else {
        ok = write_all(fd, data, len) && fsync(fd) == 0;
    }
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        unlink(tmp);
        inflight_set = 0;
        return loom_error_set(err, LOOM_ERR_IO, "%s: write failed: %s (nothing was written)",
                              path, strerror(saved));
    }
    inflight_set = 0;
    /* make the rename itself durable (best effort: not every file system
     * lets a directory be opened and synced) */
    const char *slash = strrchr(path, '/');
    int dlen = slash ? (int)(slash - path) + 1 : 0;
    char dir[sizeof inflight_tmp];
    snprintf(dir, sizeof dir, "%.*s", dlen ? dlen : 1, dlen ? path : ".");
    int dfd = open(dir, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return LOOM_OK;
}
