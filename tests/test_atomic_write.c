/*
 * test_atomic_write.c — no lost or partial output (issue 9).
 *
 * Every file loom writes goes through loom_write_file_atomic (temp file in
 * the same directory, fsync, rename; base/fileio.h). This test drives each
 * writer of the library — the raw call, loom-graph/1, the profile db, the
 * profile requests, loom-calib/1, loom-plan/1 and the plan SVG — into the
 * failures a user meets and checks the promise on the file system itself:
 *
 *   - a write that fails half way (loom_fileio_fail_next_write: half the
 *     bytes reach the temp file, then ENOSPC) leaves no file when there was
 *     none, leaves the previous file byte for byte when there was one, and
 *     leaves no temporary beside it;
 *   - a directory that does not exist, a "directory" that is a file, a
 *     target that is a directory, and a read-only directory all fail with a
 *     message naming the path, and leave the directory as it was.
 *
 *   - a symlink planted at the old predictable temporary name (PATH.tmp.PID)
 *     or anywhere else in the directory is never followed: its target
 *     survives byte for byte;
 *   - a FIFO, a character device, a symlink (to a device as /dev/stdout,
 *     or to a regular file) and a directory are refused as outputs and left
 *     as they were;
 *   - loom_same_file matches one file under two names (dev+inode) and two
 *     spellings of one path that does not exist yet.
 *
 * Root ignores permission bits, so when the test runs as root the read-only
 * case uses /proc (where nobody may create files) instead of chmod 0555.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "costs/calib.h"
#include "costs/profile_db.h"
#include "base/fileio.h"
#include "graph/graph_json.h"
#include "planner/plan/plan.h"

static char dir[64];
static loom_graph *graph;
static loom_profile_db *db;
static loom_plan *plan;

/* ---- the writers, behind one signature -------------------------------------- */

typedef loom_status (*writer_fn)(const char *path, loom_error *err);

static loom_status w_raw(const char *path, loom_error *err)
{
    static const char text[] = "{\"raw\": true}\n";
    return loom_write_file_atomic(path, text, sizeof text - 1, err);
}
static loom_status w_graph(const char *path, loom_error *err)
{
    return loom_graph_json_write(graph, path, err);
}
static loom_status w_profile(const char *path, loom_error *err)
{
    return loom_profile_db_save(db, path, err);
}
static loom_status w_requests(const char *path, loom_error *err)
{
    const loom_profile_entry *e = loom_profile_db_entry(db, 0);
    return loom_profile_requests_write(path, "test", &e->key, 1, err);
}
static loom_status w_calib(const char *path, loom_error *err)
{
    loom_calib c;
    loom_calib_default(NULL, &c);
    return loom_calib_save(path, &c, err);
}
static loom_status w_plan(const char *path, loom_error *err)
{
    return loom_plan_write(plan, path, LOOM_PLAN_JSON_NO_TIMINGS, err);
}
static loom_status w_svg(const char *path, loom_error *err)
{
    return loom_plan_svg_write(plan, path, err);
}

static const struct {
    const char *name;
    writer_fn fn;
} writers[] = {
    {"raw", w_raw},           {"graph", w_graph}, {"profile_db", w_profile},
    {"requests", w_requests}, {"calib", w_calib}, {"plan", w_plan},
    {"plan_svg", w_svg},
};
#define N_WRITERS (int)(sizeof writers / sizeof writers[0])

/* ---- file-system helpers ---------------------------------------------------------- */

/* Names in d other than . and .., joined with spaces, into out. */
static int list_dir(const char *d, char *out, size_t n)
{
    int count = 0;
    size_t used = 0;
    out[0] = '\0';
    DIR *h = opendir(d);
    if (!h) return -1;
    for (struct dirent *e; (e = readdir(h));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        count++;
        used += (size_t)snprintf(out + used, used < n ? n - used : 0, "%s ", e->d_name);
    }
    closedir(h);
    return count;
}

static char *slurp(const char *path)
{
    char *text = NULL;
    loom_error err;
    if (loom_read_file(path, 0, &text, NULL, &err) != LOOM_OK) return NULL;
    return text;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

/* A fresh empty directory dir/<kind>-<writer> in d, and out.json in it in
 * path. */
static void fresh(char *d, size_t n, char *path, size_t pn, const char *kind, int w)
{
    snprintf(d, n, "%s/%s-%s", dir, kind, writers[w].name);
    if (mkdir(d, 0755) != 0) {
        perror(d);
        exit(2);
    }
    snprintf(path, pn, "%s/out.json", d);
}

/* ---- the cases ---------------------------------------------------------------------- */

/* The writer succeeds normally; its output reads back non-empty. */
static void writes_normally(int w)
{
    char path[200];
    snprintf(path, sizeof path, "%s/ok-%s.out", dir, writers[w].name);
    loom_error err = {0};
    CHECK_INT_EQ(writers[w].fn(path, &err), LOOM_OK);
    char *text = slurp(path);
    CHECK(text && text[0]);
    free(text);
    remove(path);
}

/* A write that fails half way: no new file, no temporary. */
static void failed_write_leaves_nothing(int w)
{
    char d[160], path[200], names[512];
    fresh(d, sizeof d, path, sizeof path, "fail-new", w);
    loom_error err = {0};
    loom_fileio_fail_next_write = 1;
    loom_status s = writers[w].fn(path, &err);
    CHECK_INT_EQ(s, LOOM_ERR_IO);
    CHECK_INT_EQ(loom_fileio_fail_next_write, 0);   /* the hook fired in this writer */
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, "nothing was written");
    CHECK_INT_EQ(list_dir(d, names, sizeof names), 0);
    if (names[0]) fprintf(stderr, "  %s left: %s\n", writers[w].name, names);
}

/* A failed overwrite keeps the previous file byte for byte. */
static void failed_overwrite_keeps_old(int w)
{
    char d[160], path[200], names[512];
    fresh(d, sizeof d, path, sizeof path, "fail-old", w);
    static const char old[] = "the previous output, which must survive\n";
    put(path, old);
    loom_error err = {0};
    loom_fileio_fail_next_write = 1;
    CHECK_INT_EQ(writers[w].fn(path, &err), LOOM_ERR_IO);
    char *text = slurp(path);
    CHECK(text && strcmp(text, old) == 0);
    free(text);
    CHECK_INT_EQ(list_dir(d, names, sizeof names), 1);   /* out.json only */
    CHECK_STR_CONTAINS(names, "out.json");
}

/* Paths that cannot be written: an error naming the path, nothing created. */
static void unwritable_paths(int w)
{
    char d[160], path[256], names[512];
    fresh(d, sizeof d, path, sizeof path, "unwritable", w);
    loom_error err = {0};

    /* the directory does not exist */
    snprintf(path, sizeof path, "%s/no/such/dir/out.json", d);
    CHECK_INT_EQ(writers[w].fn(path, &err), LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, "No such file or directory");

    /* the "directory" is a regular file */
    char file[200];
    snprintf(file, sizeof file, "%s/plain-file", d);
    put(file, "x");
    snprintf(path, sizeof path, "%s/out.json", file);
    CHECK_INT_EQ(writers[w].fn(path, &err), LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, path);

    /* the target is a directory: the rename fails, the temporary goes */
    char target[200];
    snprintf(target, sizeof target, "%s/a-directory", d);
    mkdir(target, 0755);
    CHECK_INT_EQ(writers[w].fn(target, &err), LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, target);
    CHECK_INT_EQ(list_dir(d, names, sizeof names), 2);   /* plain-file and a-directory */
    char inner[512];
    CHECK_INT_EQ(list_dir(target, inner, sizeof inner), 0);

    /* a read-only directory */
    char ro[200];
    if (geteuid() == 0) {
        snprintf(path, sizeof path, "/proc/loom-test-%ld.json", (long)getpid());
    } else {
        snprintf(ro, sizeof ro, "%s/read-only", d);
        mkdir(ro, 0555);
        snprintf(path, sizeof path, "%s/out.json", ro);
    }
    CHECK_INT_EQ(writers[w].fn(path, &err), LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, "cannot create");
    CHECK(access(path, F_OK) != 0);
    if (geteuid() != 0) {
        CHECK_INT_EQ(list_dir(ro, inner, sizeof inner), 0);
        chmod(ro, 0755);
    }
}

/* Symlinks planted where the temporary used to be (PATH.tmp.PID) and at
 * PATH.tmp: the victim file they point to survives, the output is written. */
static void planted_symlinks(int w)
{
    char d[160], path[200], victim[220], link1[260], link2[260];
    fresh(d, sizeof d, path, sizeof path, "symlink", w);
    snprintf(victim, sizeof victim, "%s/victim", d);
    static const char precious[] = "precious\n";
    put(victim, precious);
    snprintf(link1, sizeof link1, "%s.tmp.%ld", path, (long)getpid());
    snprintf(link2, sizeof link2, "%s.tmp", path);
    CHECK(symlink(victim, link1) == 0);
    CHECK(symlink(victim, link2) == 0);
    loom_error err = {0};
    CHECK_INT_EQ(writers[w].fn(path, &err), LOOM_OK);
    char *text = slurp(victim);
    CHECK(text && strcmp(text, precious) == 0);
    free(text);
    struct stat st;
    CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
    char names[512];
    CHECK_INT_EQ(list_dir(d, names, sizeof names), 4);   /* out.json, victim, 2 links */
    CHECK(strstr(names, "loom-tmp") == NULL);
}

/* Outputs that are not regular files are refused and left as they were. */
static void special_outputs(int w)
{
    char d[160], path[200], fifo[220], link[220], names[512];
    fresh(d, sizeof d, path, sizeof path, "special", w);
    loom_error err = {0};
    snprintf(fifo, sizeof fifo, "%s/fifo", d);
    CHECK(mkfifo(fifo, 0644) == 0);
    CHECK_INT_EQ(writers[w].fn(fifo, &err), LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, fifo);
    CHECK_STR_CONTAINS(err.msg, "a FIFO, not a regular file");
    struct stat st;
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));

    CHECK_INT_EQ(writers[w].fn("/dev/null", &err), LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "/dev/null: cannot write: a character device");
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));

    snprintf(link, sizeof link, "%s/stdout-link", d);
    CHECK(symlink("/dev/null", link) == 0);
    CHECK_INT_EQ(writers[w].fn(link, &err), LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "a symlink (to a character device)");
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    char reg[220], link2[220];
    snprintf(reg, sizeof reg, "%s/regular", d);
    snprintf(link2, sizeof link2, "%s/regular-link", d);
    put(reg, "kept\n");
    CHECK(symlink(reg, link2) == 0);
    CHECK_INT_EQ(writers[w].fn(link2, &err), LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "a symlink (to a regular file)");
    CHECK(lstat(link2, &st) == 0 && S_ISLNK(st.st_mode));
    char *kept = slurp(reg);
    CHECK(kept && strcmp(kept, "kept\n") == 0);
    free(kept);

    CHECK_INT_EQ(writers[w].fn(d, &err), LOOM_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "a directory, not a regular file");
    CHECK_INT_EQ(list_dir(d, names, sizeof names), 4);   /* fifo, 2 links, regular */
}

static void same_file(void)
{
    char a[200], b[200], c[260];
    snprintf(a, sizeof a, "%s/same-a.json", dir);
    snprintf(b, sizeof b, "%s/same-b.json", dir);
    put(a, "x");
    CHECK(link(a, b) == 0);
    CHECK(loom_same_file(a, b));                 /* one inode, two names */
    snprintf(c, sizeof c, "%s/sub", dir);
    mkdir(c, 0755);
    snprintf(c, sizeof c, "%s/./sub/../same-a.json", dir);
    CHECK(loom_same_file(a, c));                 /* another spelling of the path */
    CHECK(!loom_same_file(a, "-"));
    CHECK(!loom_same_file("-", "-"));
    char n1[200], n2[260];
    snprintf(n1, sizeof n1, "%s/not-yet.json", dir);
    snprintf(n2, sizeof n2, "%s//./not-yet.json", dir);
    CHECK(loom_same_file(n1, n2));               /* neither exists: normalized paths */
    snprintf(n2, sizeof n2, "%s/not-yet.sh", dir);
    CHECK(!loom_same_file(n1, n2));
    CHECK(loom_same_file("x/../y.json", "./y.json"));
    remove(a);
    remove(b);
}

/* ---- setup ---------------------------------------------------------------------------- */

static void setup(void)
{
    loom_error err = {0};
    if (loom_graph_json_read("examples/models/tiny-gpt.graph.json", &graph, &err) != LOOM_OK ||
        loom_profile_db_create("NVIDIA H100 80GB HBM3", "13.0", "", "", &db, &err) != LOOM_OK ||
        loom_plan_create(&plan, &err) != LOOM_OK) {
        fprintf(stderr, "setup: %s\n", err.msg);
        exit(2);
    }
    loom_profile_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.key.op, sizeof e.key.op, "einsum");
    snprintf(e.key.sig, sizeof e.key.sig, "bsh,hf->bsf");
    e.key.dtype = LOOM_DTYPE_BF16;
    e.key.n_dims = 4;
    const char *names[4] = {"b", "s", "h", "f"};
    const int64_t sizes[4] = {1, 4096, 8192, 3584};
    for (int i = 0; i < 4; i++) {
        snprintf(e.key.shape[i].name, LOOM_DIM_NAME_MAX, "%s", names[i]);
        e.key.shape[i].size = sizes[i];
    }
    e.fwd_ns = 400000;
    e.bwd_ns = 800000;
    if (loom_profile_db_put(db, &e, &err) != LOOM_OK) {
        fprintf(stderr, "setup: %s\n", err.msg);
        exit(2);
    }
}

/* rm -r of the scratch tree (the test made every entry itself). */
static void remove_tree(const char *d)
{
    DIR *h = opendir(d);
    if (!h) return;
    for (struct dirent *e; (e = readdir(h));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", d, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            chmod(p, 0755);
            remove_tree(p);
        } else {
            remove(p);
        }
    }
    closedir(h);
    rmdir(d);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/loom-atomic-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    setup();
    for (int w = 0; w < N_WRITERS; w++) {
        writes_normally(w);
        failed_write_leaves_nothing(w);
        failed_overwrite_keeps_old(w);
        unwritable_paths(w);
        planted_symlinks(w);
        special_outputs(w);
    }
    same_file();
    loom_plan_destroy(plan);
    loom_profile_db_destroy(db);
    loom_graph_destroy(graph);
    remove_tree(dir);
    return check_done();
}
