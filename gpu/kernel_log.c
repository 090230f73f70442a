/*
 * kernel_log.c — kernel records joined to external correlation ids.
 *
 * Storage: two growing arrays. resolve() sorts the external records by
 * correlation id, looks each kernel's correlation id up (binary search) and
 * then sorts the kernels by (external id, start), so a query for one
 * external id is a binary search for its run. Kernel names are interned:
 * an op has a handful of distinct kernels and the log is cleared per op.
 */
#include "gpu/kernel_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_EXT UINT64_MAX

typedef struct {
    uint32_t corr;
    uint64_t ext;
} ext_rec;

typedef struct {
    uint32_t corr;
    int32_t name;   /* index into names */
    uint64_t start, end;
    uint64_t ext;   /* set by resolve */
} kern_rec;

struct loom_kernel_log {
    ext_rec *ext;
    size_t n_ext, cap_ext;
    kern_rec *k;
    size_t n_k, cap_k;
    char **names;
    int32_t n_names, cap_names;
    size_t dropped;
};

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap * 2 : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

loom_status loom_kernel_log_create(loom_kernel_log **out, loom_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory creating the kernel log");
    return LOOM_OK;
}

void loom_kernel_log_destroy(loom_kernel_log *log)
{
    if (!log) return;
    for (int32_t i = 0; i < log->n_names; i++) free(log->names[i]);
    free(log->names);
    free(log->ext);
    free(log->k);
    free(log);
}

void loom_kernel_log_clear(loom_kernel_log *log)
{
    for (int32_t i = 0; i < log->n_names; i++) free(log->names[i]);
    log->n_names = 0;
    log->n_ext = log->n_k = 0;
    log->dropped = 0;
}

bool loom_kernel_log_add_external(loom_kernel_log *log, uint32_t correlation_id,
                                  uint64_t external_id)
{
    if (!grow((void **)&log->ext, &log->cap_ext, log->n_ext + 1, sizeof *log->ext)) {
        log->dropped++;
        return false;
    }
    log->ext[log->n_ext++] = (ext_rec){correlation_id, external_id};
    return true;
}

static int32_t intern(loom_kernel_log *log, const char *name)
{
    for (int32_t i = log->n_names - 1; i >= 0; i--)
        if (strcmp(log->names[i], name) == 0) return i;
    size_t cap = (size_t)log->cap_names;
    if (!grow((void **)&log->names, &cap, (size_t)log->n_names + 1, sizeof *log->names)) return -1;
    log->cap_names = (int32_t)cap;
    char *copy = malloc(strlen(name) + 1);
    if (!copy) return -1;
    strcpy(copy, name);
    log->names[log->n_names] = copy;
    return log->n_names++;
}

bool loom_kernel_log_add_kernel(loom_kernel_log *log, uint32_t correlation_id, const char *name,
                                uint64_t start_ns, uint64_t end_ns)
{
    int32_t id = intern(log, name ? name : "?");
    if (id < 0 || !grow((void **)&log->k, &log->cap_k, log->n_k + 1, sizeof *log->k)) {
        log->dropped++;
        return false;
    }
    log->k[log->n_k++] = (kern_rec){correlation_id, id, start_ns, end_ns < start_ns ? start_ns : end_ns,
                                    NO_EXT};
    return true;
}

void loom_kernel_log_add_dropped(loom_kernel_log *log, size_t n) { log->dropped += n; }
size_t loom_kernel_log_dropped(const loom_kernel_log *log) { return log->dropped; }

static int ext_cmp(const void *a, const void *b)
{
    uint32_t x = ((const ext_rec *)a)->corr, y = ((const ext_rec *)b)->corr;
    return x < y ? -1 : x > y;
}

static int kern_cmp(const void *a, const void *b)
{
    const kern_rec *x = a, *y = b;
    if (x->ext != y->ext) return x->ext < y->ext ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->corr < y->corr ? -1 : x->corr > y->corr;
}

void loom_kernel_log_resolve(loom_kernel_log *log)
{
    if (log->n_ext > 1) qsort(log->ext, log->n_ext, sizeof *log->ext, ext_cmp);
    for (size_t i = 0; i < log->n_k; i++) {
        size_t lo = 0, hi = log->n_ext;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (log->ext[mid].corr < log->k[i].corr) lo = mid + 1;
            else hi = mid;
        }
        log->k[i].ext = lo < log->n_ext && log->ext[lo].corr == log->k[i].corr ? log->ext[lo].ext
                                                                                 : NO_EXT;
    }
    if (log->n_k > 1) qsort(log->k, log->n_k, sizeof *log->k, kern_cmp);
}

/* First kernel index with ext >= e. */
static size_t first_of(const loom_kernel_log *log, uint64_t e)
{
    size_t lo = 0, hi = log->n_k;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (log->k[mid].ext < e) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

loom_kernel_sum loom_kernel_log_sum(const loom_kernel_log *log, uint64_t ext)
{
    loom_kernel_sum s = {0, 0, 0};
    uint64_t first = 0, last = 0;
    for (size_t i = first_of(log, ext); i < log->n_k && log->k[i].ext == ext; i++) {
        const kern_rec *r = &log->k[i];
        s.busy_ns += (int64_t)(r->end - r->start);
        if (s.kernels == 0 || r->start < first) first = r->start;
        if (s.kernels == 0 || r->end > last) last = r->end;
        s.kernels++;
    }
    s.span_ns = s.kernels ? (int64_t)(last - first) : 0;
    return s;
}

int loom_kernel_log_names(const loom_kernel_log *log, uint64_t lo, uint64_t hi, char *names,
                          int name_size, int max)
{
    /* Within [lo, hi) kernels are sorted by (ext, start); first-start order
     * across ops is the order of the first op that ran each kernel. */
    int n = 0;
    int32_t seen[64];
    for (size_t i = first_of(log, lo); i < log->n_k && log->k[i].ext < hi && n < max; i++) {
        bool dup = false;
        for (int j = 0; j < n && j < 64; j++) dup = dup || seen[j] == log->k[i].name;
        if (dup) continue;
        if (n < 64) seen[n] = log->k[i].name;
        snprintf(names + (size_t)n * (size_t)name_size, (size_t)name_size, "%s",
                 log->names[log->k[i].name]);
        n++;
    }
    return n;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double loom_quantile(const double *v, int n, double q)
{
    double stack[256], *s = n <= 256 ? stack : malloc((size_t)n * sizeof *s);
    if (!s) return v[0];   /* out of memory: any sample beats none */
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, dbl_cmp);
    double h = (n - 1) * (q < 0 ? 0 : q > 1 ? 1 : q);
    int i = (int)h;
    double r = i + 1 < n ? s[i] + (h - i) * (s[i + 1] - s[i]) : s[n - 1];
    if (s != stack) free(s);
    return r;
}
