/*
 * profile_db.c — the measured-kernel-time database: JSON read and atomic
 * write, exact and interpolated lookup, the requests file. (A graph op's key
 * is derived in profile_db_key.c.)
 *
 * Storage invariant: entries are kept sorted by loom_profile_key_cmp, which
 * compares op, sig, dtype, the dim NAMES (in name order) and only then the
 * sizes. So all entries that differ only in sizes (an interpolation "group")
 * are one contiguous run, an exact lookup is a binary search, and the
 * interpolation corners are binary searches inside the run.
 *
 * Interpolation (see profile_db.h): for a query q outside the db, the dims
 * measured at exactly q's size are held fixed (chosen greedily so that the
 * remaining entries form a box around q), and each of the other k dims gets
 * the nearest measured sizes lo_d < q_d < hi_d; it is interpolated with weight
 *     w_d = ln(q_d / lo_d) / ln(hi_d / lo_d)
 * and the 2^k box corners combine as ln t = Σ_c Π_d ω_{c,d} ln t_c, ω = w_d
 * on the hi side, 1 - w_d on the lo side. A time of 0 (an op without a
 * backward) cannot be logged; then that quantity is interpolated linearly
 * with the same weights. Units: ns in the file, seconds out of lookup.
 */
#include "costs/profile_db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/json.h"

struct loom_profile_db {
    char device[LOOM_PROFILE_META_MAX];
    char cuda[LOOM_PROFILE_META_MAX];
    char driver[LOOM_PROFILE_META_MAX];
    char clock_note[LOOM_PROFILE_META_MAX];
    loom_profile_entry *e;   /* sorted by loom_profile_key_cmp */
    int32_t n, cap;
};

const char *loom_time_source_name(loom_time_source s)
{
    switch (s) {
    case LOOM_SRC_MEASURED: return "measured";
    case LOOM_SRC_INTERPOLATED: return "interpolated";
    case LOOM_SRC_ROOFLINE: return "roofline";
    }
    return "?";
}

/* ---- keys ------------------------------------------------------------------ */

/* Dim indices of k in name order (n_dims <= LOOM_PROFILE_MAX_DIMS). */
static void name_order(const loom_profile_key *k, int *idx)
{
    for (int i = 0; i < k->n_dims; i++) {
        int j = i;
        while (j > 0 && strcmp(k->shape[idx[j - 1]].name, k->shape[i].name) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
}

/* Compares everything but the sizes: the interpolation group. */
static int group_cmp(const loom_profile_key *a, const int *ia, const loom_profile_key *b,
                     const int *ib)
{
    int c = strcmp(a->op, b->op);
    if (c) return c;
    if ((c = strcmp(a->sig, b->sig))) return c;
    if (a->dtype != b->dtype) return a->dtype < b->dtype ? -1 : 1;
    if (a->n_dims != b->n_dims) return a->n_dims < b->n_dims ? -1 : 1;
    for (int i = 0; i < a->n_dims; i++)
        if ((c = strcmp(a->shape[ia[i]].name, b->shape[ib[i]].name))) return c;
    return 0;
}

static int full_cmp(const loom_profile_key *a, const int *ia, const loom_profile_key *b,
                    const int *ib)
{
    int c = group_cmp(a, ia, b, ib);
    if (c) return c;
    for (int i = 0; i < a->n_dims; i++) {
        int64_t x = a->shape[ia[i]].size, y = b->shape[ib[i]].size;
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

int loom_profile_key_cmp(const loom_profile_key *a, const loom_profile_key *b)
{
    int ia[LOOM_PROFILE_MAX_DIMS], ib[LOOM_PROFILE_MAX_DIMS];
    name_order(a, ia);
    name_order(b, ib);
    return full_cmp(a, ia, b, ib);
}

bool loom_profile_key_equal(const loom_profile_key *a, const loom_profile_key *b)
{
    return loom_profile_key_cmp(a, b) == 0;
}

int64_t loom_profile_key_dim(const loom_profile_key *k, const char *name)
{
    for (int i = 0; i < k->n_dims; i++)
        if (strcmp(k->shape[i].name, name) == 0) return k->shape[i].size;
    return 0;
}

/* Checks a key's invariants; `where` prefixes the message. */
static loom_status key_check(const loom_profile_key *k, const char *where, loom_error *err)
{
    loom_op_kind kind;
    if (!loom_op_kind_parse(k->op, &kind))
        return loom_error_set(err, LOOM_ERR_INVALID, "%s: unknown op kind \"%s\"", where, k->op);
    if ((unsigned)k->dtype >= LOOM_DTYPE_COUNT)
        return loom_error_set(err, LOOM_ERR_INVALID, "%s: invalid dtype", where);
    if (k->n_dims < 1 || k->n_dims > LOOM_PROFILE_MAX_DIMS)
        return loom_error_set(err, LOOM_ERR_INVALID, "%s: %d dims (expected 1..%d)", where,
                              (int)k->n_dims, LOOM_PROFILE_MAX_DIMS);
    for (int i = 0; i < k->n_dims; i++) {
        if (!k->shape[i].name[0])
            return loom_error_set(err, LOOM_ERR_INVALID, "%s: dim %d has no name", where, i);
        if (k->shape[i].size < 1)
            return loom_error_set(err, LOOM_ERR_INVALID, "%s: dim \"%s\" is %lld (expected >= 1)",
                                  where, k->shape[i].name, (long long)k->shape[i].size);
        for (int j = 0; j < i; j++)
            if (strcmp(k->shape[i].name, k->shape[j].name) == 0)
                return loom_error_set(err, LOOM_ERR_INVALID, "%s: dim \"%s\" appears twice",
                                      where, k->shape[i].name);
    }
    return LOOM_OK;
}

/* ---- the db ------------------------------------------------------------------ */

static void copy_meta(char *dst, const char *src)
{
    snprintf(dst, LOOM_PROFILE_META_MAX, "%s", src ? src : "");
}

loom_status loom_profile_db_create(const char *device, const char *cuda, const char *driver,
                                   const char *clock_note, loom_profile_db **out,
                                   loom_error *err)
{
    *out = NULL;
    loom_profile_db *db = calloc(1, sizeof *db);
    if (!db) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory creating a profile db");
    copy_meta(db->device, device);
    copy_meta(db->cuda, cuda);
    copy_meta(db->driver, driver);
    copy_meta(db->clock_note, clock_note);
    *out = db;
    return LOOM_OK;
}

void loom_profile_db_destroy(loom_profile_db *db)
{
    if (!db) return;
    free(db->e);
    free(db);
}

const char *loom_profile_db_device(const loom_profile_db *db) { return db->device; }
const char *loom_profile_db_cuda(const loom_profile_db *db) { return db->cuda; }
const char *loom_profile_db_driver(const loom_profile_db *db) { return db->driver; }
const char *loom_profile_db_clock_note(const loom_profile_db *db) { return db->clock_note; }
int32_t loom_profile_db_count(const loom_profile_db *db) { return db ? db->n : 0; }

const loom_profile_entry *loom_profile_db_entry(const loom_profile_db *db, int32_t i)
{
    LOOM_ASSERT(db && i >= 0 && i < db->n);
    return &db->e[i];
}

/* First index whose key is >= k (exact order); *found when equal. */
static int32_t lower_bound(const loom_profile_db *db, const loom_profile_key *k, bool *found)
{
    int ik[LOOM_PROFILE_MAX_DIMS], ie[LOOM_PROFILE_MAX_DIMS];
    name_order(k, ik);
    int32_t lo = 0, hi = db->n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        name_order(&db->e[mid].key, ie);
        if (full_cmp(&db->e[mid].key, ie, k, ik) < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = false;
    if (lo < db->n) {
        name_order(&db->e[lo].key, ie);
        *found = full_cmp(&db->e[lo].key, ie, k, ik) == 0;
    }
    return lo;
}

const loom_profile_entry *loom_profile_db_find(const loom_profile_db *db,
                                               const loom_profile_key *key)
{
    if (!db || key->n_dims < 1 || key->n_dims > LOOM_PROFILE_MAX_DIMS) return NULL;
    bool found;
    int32_t i = lower_bound(db, key, &found);
    return found ? &db->e[i] : NULL;
}

loom_status loom_profile_db_put(loom_profile_db *db, const loom_profile_entry *src,
                                loom_error *err)
{
    loom_profile_entry e = *src;
    e.key.op[LOOM_PROFILE_OP_MAX - 1] = '\0';
    e.key.sig[LOOM_EINSUM_MAX - 1] = '\0';
    loom_status s = key_check(&e.key, "profile entry", err);
    if (s) return s;
    if (e.fwd_ns < 0 || e.bwd_ns < 0 || e.events_fwd_ns < 0 || e.events_bwd_ns < 0 ||
        e.peak_bytes < 0 || e.repeats < 0 || !(e.spread >= 0 && isfinite(e.spread)))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "profile entry %s %s: negative or non-finite measurement",
                              e.key.op, e.key.sig);
    if (e.n_kernels < 0 || e.n_kernels > LOOM_PROFILE_MAX_KERNELS)
        return loom_error_set(err, LOOM_ERR_INVALID, "profile entry %s: %d kernel names (at most %d)",
                              e.key.op, (int)e.n_kernels, LOOM_PROFILE_MAX_KERNELS);
    for (int i = 0; i < e.n_kernels; i++) e.kernels[i][LOOM_PROFILE_KERNEL_NAME_MAX - 1] = '\0';
    bool found;
    int32_t at = lower_bound(db, &e.key, &found);
    if (found) {
        db->e[at] = e;
        return LOOM_OK;
    }
    if (db->n == db->cap) {
        int32_t cap = db->cap ? db->cap * 2 : 64;
        loom_profile_entry *p = realloc(db->e, (size_t)cap * sizeof *p);
        if (!p) return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory growing the profile db");
        db->e = p;
        db->cap = cap;
    }
    memmove(&db->e[at + 1], &db->e[at], (size_t)(db->n - at) * sizeof *db->e);
    db->e[at] = e;
    db->n++;
    return LOOM_OK;
}

/* ---- lookup -------------------------------------------------------------------- */

/* Interpolates one quantity over the box corners (values in ns). */
static double interp(const double *v, const double *cw, int n_corners)
{
    bool all_pos = true;
    for (int c = 0; c < n_corners; c++) all_pos = all_pos && v[c] > 0;
    double acc = 0;
    for (int c = 0; c < n_corners; c++) acc += cw[c] * (all_pos ? log(v[c]) : v[c]);
    return all_pos ? exp(acc) : acc;
}

/* Entry key e (same group as q) has q's sizes on every dim marked exact
 * (flags in q's name order). */
static bool agrees(const loom_profile_key *e, const loom_profile_key *q, const int *iq,
                   const bool *exact)
{
    int ie[LOOM_PROFILE_MAX_DIMS];
    name_order(e, ie);
    for (int d = 0; d < q->n_dims; d++)
        if (exact[d] && e->shape[ie[d]].size != q->shape[iq[d]].size) return false;
    return true;
}

bool loom_profile_db_lookup(const loom_profile_db *db, const char *op_kind, const char *sig,
                            loom_dtype dt, const loom_dim *shape, int n_dims, double *fwd_s,
                            double *bwd_s, loom_time_source *src)
{
    if (!db || db->n == 0 || n_dims < 1 || n_dims > LOOM_PROFILE_MAX_DIMS) return false;
    loom_profile_key q = {.dtype = dt, .n_dims = n_dims};
    if (strlen(op_kind) >= sizeof q.op || strlen(sig) >= sizeof q.sig) return false;
    strcpy(q.op, op_kind);
    strcpy(q.sig, sig);
    for (int i = 0; i < n_dims; i++) {
        if (shape[i].size < 1) return false;
        q.shape[i] = shape[i];
    }
    bool found;
    int32_t first = lower_bound(db, &q, &found);
    if (found) {
        *fwd_s = (double)db->e[first].fwd_ns * 1e-9;
        *bwd_s = (double)db->e[first].bwd_ns * 1e-9;
        if (src) *src = LOOM_SRC_MEASURED;
        return true;
    }
    /* The group run [g0, g1): same op/sig/dtype/dim names. */
    int iq[LOOM_PROFILE_MAX_DIMS], ie[LOOM_PROFILE_MAX_DIMS];
    name_order(&q, iq);
    int32_t g0 = first, g1 = first;
    while (g0 > 0) {
        name_order(&db->e[g0 - 1].key, ie);
        if (group_cmp(&db->e[g0 - 1].key, ie, &q, iq) != 0) break;
        g0--;
    }
    while (g1 < db->n) {
        name_order(&db->e[g1].key, ie);
        if (group_cmp(&db->e[g1].key, ie, &q, iq) != 0) break;
        g1++;
    }
    if (g1 - g0 < 2) return false;
    /* Which dims to hold at q's size: greedily the dim that the most
     * remaining entries measured at exactly q's size (ties: name order),
     * keeping only those entries, until no dim matches. The rest are
     * interpolated, bracketed among the entries left. */
    bool exact[LOOM_PROFILE_MAX_DIMS] = {false};
    int64_t lo[LOOM_PROFILE_MAX_DIMS], hi[LOOM_PROFILE_MAX_DIMS];
    for (;;) {
        int best = -1;
        int32_t best_count = 0, count[LOOM_PROFILE_MAX_DIMS] = {0};
        for (int32_t i = g0; i < g1; i++) {
            if (!agrees(&db->e[i].key, &q, iq, exact)) continue;
            name_order(&db->e[i].key, ie);
            for (int d = 0; d < n_dims; d++)
                if (!exact[d] && db->e[i].key.shape[ie[d]].size == q.shape[iq[d]].size) count[d]++;
        }
        for (int d = 0; d < n_dims; d++)
            if (count[d] > best_count) best = d, best_count = count[d];
        if (best < 0) break;
        exact[best] = true;
    }
    for (int d = 0; d < n_dims; d++) lo[d] = 0, hi[d] = INT64_MAX;
    for (int32_t i = g0; i < g1; i++) {
        if (!agrees(&db->e[i].key, &q, iq, exact)) continue;
        name_order(&db->e[i].key, ie);
        for (int d = 0; d < n_dims; d++) {
            int64_t x = db->e[i].key.shape[ie[d]].size, want = q.shape[iq[d]].size;
            if (x < want && x > lo[d]) lo[d] = x;
            if (x > want && x < hi[d]) hi[d] = x;
        }
    }
    for (int d = 0; d < n_dims; d++)
        if (!exact[d] && (lo[d] == 0 || hi[d] == INT64_MAX)) return false;   /* no extrapolation */
    int ivar[LOOM_PROFILE_MAX_INTERP_DIMS], k = 0;
    double w[LOOM_PROFILE_MAX_INTERP_DIMS];
    for (int d = 0; d < n_dims; d++) {
        if (exact[d]) continue;
        if (k == LOOM_PROFILE_MAX_INTERP_DIMS) return false;
        ivar[k] = d;
        w[k] = log((double)q.shape[iq[d]].size / (double)lo[d]) / log((double)hi[d] / (double)lo[d]);
        k++;
    }
    if (k == 0) return false;   /* every size was measured, but not together */
    double fv[1 << LOOM_PROFILE_MAX_INTERP_DIMS], bv[1 << LOOM_PROFILE_MAX_INTERP_DIMS];
    double cw[1 << LOOM_PROFILE_MAX_INTERP_DIMS];
    for (int c = 0; c < (1 << k); c++) {
        loom_profile_key corner = q;
        cw[c] = 1;
        for (int j = 0; j < k; j++) {
            bool up = (c >> j) & 1;
            corner.shape[iq[ivar[j]]].size = up ? hi[ivar[j]] : lo[ivar[j]];
            cw[c] *= up ? w[j] : 1 - w[j];
        }
        const loom_profile_entry *e = loom_profile_db_find(db, &corner);
        if (!e) return false;
        fv[c] = (double)e->fwd_ns;
        bv[c] = (double)e->bwd_ns;
    }
    *fwd_s = interp(fv, cw, 1 << k) * 1e-9;
    *bwd_s = interp(bv, cw, 1 << k) * 1e-9;
    if (src) *src = LOOM_SRC_INTERPOLATED;
    return true;
}

/* ---- JSON: keys -------------------------------------------------------------------- */

/* Reads op / sig / dtype / shape of `obj` (at `path`) into *k. */
static loom_status read_key(const loom_jctx *c, const cJSON *obj, const char *path,
                            loom_profile_key *k)
{
    memset(k, 0, sizeof *k);
    const char *op = NULL, *sig = "", *dt = NULL;
    const cJSON *shape;
    loom_status s;
    char sub[512];
    if ((s = loom_json_get_str(c, obj, path, "op", true, &op)) ||
        (s = loom_json_get_str(c, obj, path, "sig", false, &sig)) ||
        (s = loom_json_get_str(c, obj, path, "dtype", true, &dt)) ||
        (s = loom_json_get_object(c, obj, path, "shape", true, &shape)))
        return s;
    loom_op_kind kind;
    if (strlen(op) >= sizeof k->op || !loom_op_kind_parse(op, &kind)) {
        snprintf(sub, sizeof sub, "%s.op", path);
        return loom_json_fail(c, sub, "unknown op kind \"%s\"", op);
    }
    strcpy(k->op, op);
    if (strlen(sig) >= sizeof k->sig) {
        snprintf(sub, sizeof sub, "%s.sig", path);
        return loom_json_fail(c, sub, "longer than %d characters", LOOM_EINSUM_MAX - 1);
    }
    strcpy(k->sig, sig);
    if (!loom_dtype_parse(dt, &k->dtype)) {
        snprintf(sub, sizeof sub, "%s.dtype", path);
        return loom_json_fail(c, sub, "unknown dtype \"%s\" (expected bf16, fp16, fp32, fp8, …)",
                              dt);
    }
    snprintf(sub, sizeof sub, "%s.shape", path);
    if (!shape->child) return loom_json_fail(c, sub, "expected at least one dim, found none");
    for (const cJSON *d = shape->child; d; d = d->next) {
        if (k->n_dims == LOOM_PROFILE_MAX_DIMS)
            return loom_json_fail(c, sub, "more than %d dims", LOOM_PROFILE_MAX_DIMS);
        if (!d->string[0] || strlen(d->string) >= LOOM_DIM_NAME_MAX)
            return loom_json_fail(c, sub, "dim name \"%s\" must have 1..%d characters", d->string,
                                  LOOM_DIM_NAME_MAX - 1);
        loom_dim *dim = &k->shape[k->n_dims++];
        strcpy(dim->name, d->string);
        if ((s = loom_json_get_int(c, shape, sub, d->string, true, 1, INT64_C(1) << 48,
                                   &dim->size)))
            return s;
    }
    return LOOM_OK;
}

/* Adds op / sig / dtype / shape members to obj. */
static bool write_key(cJSON *obj, const loom_profile_key *k)
{
    cJSON *shape;
    if (!cJSON_AddStringToObject(obj, "op", k->op) || !cJSON_AddStringToObject(obj, "sig", k->sig) ||
        !cJSON_AddStringToObject(obj, "dtype", loom_dtype_name(k->dtype)) ||
        !(shape = cJSON_AddObjectToObject(obj, "shape")))
        return false;
    for (int i = 0; i < k->n_dims; i++)
        if (!cJSON_AddNumberToObject(shape, k->shape[i].name, (double)k->shape[i].size))
            return false;
    return true;
}

/* Parses the file, checks "format", returns the root. */
static loom_status open_doc(const char *path, const char *format, cJSON **root, loom_jctx *c)
{
    loom_json_limits lim = LOOM_JSON_LIMITS_PROFILE;
    loom_status s = loom_json_parse_file_limited(path, &lim, root, c->err);
    if (s) return s;
    const char *fmt = NULL;
    if (!cJSON_IsObject(*root)) s = loom_json_fail(c, "$", "expected an object, found %s",
                                                   loom_json_type_name(*root));
    else if (!(s = loom_json_get_str(c, *root, "$", "format", true, &fmt)) && strcmp(fmt, format))
        s = loom_json_fail(c, "$.format", "expected \"%s\", found \"%s\"", format, fmt);
    if (s) {
        cJSON_Delete(*root);
        *root = NULL;
    }
    return s;
}

/* Serialises root and writes it atomically. Consumes root. */
static loom_status save_doc(cJSON *root, const char *path, loom_error *err)
{
    char *text = loom_json_print(root);
    cJSON_Delete(root);
    if (!text) return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory serialising", path);
    loom_status s = loom_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return s;
}

/* ---- JSON: the db ------------------------------------------------------------------- */

static loom_status read_entry(const loom_jctx *c, const cJSON *obj, const char *path,
                              loom_profile_entry *e)
{
    static const char *const keys[] = {"op", "sig", "dtype", "shape", "fwd_ns", "bwd_ns",
                                       "spread", "repeats", "events_fwd_ns", "events_bwd_ns",
                                       "peak_bytes", "kernels", NULL};
    if (!cJSON_IsObject(obj))
        return loom_json_fail(c, path, "expected an object, found %s", loom_json_type_name(obj));
    loom_status s = loom_json_check_keys(c, obj, path, keys);
    if (s || (s = read_key(c, obj, path, &e->key))) return s;
    const int64_t big = INT64_C(1) << 62;
    int64_t rep = 0;
    const cJSON *kern = NULL;
    if ((s = loom_json_get_int(c, obj, path, "fwd_ns", true, 0, big, &e->fwd_ns)) ||
        (s = loom_json_get_int(c, obj, path, "bwd_ns", true, 0, big, &e->bwd_ns)) ||
        (s = loom_json_get_num(c, obj, path, "spread", false, 0, 1e9, &e->spread)) ||
        (s = loom_json_get_int(c, obj, path, "repeats", false, 0, INT32_MAX, &rep)) ||
        (s = loom_json_get_int(c, obj, path, "events_fwd_ns", false, 0, big, &e->events_fwd_ns)) ||
        (s = loom_json_get_int(c, obj, path, "events_bwd_ns", false, 0, big, &e->events_bwd_ns)) ||
        (s = loom_json_get_int(c, obj, path, "peak_bytes", false, 0, big, &e->peak_bytes)) ||
        (s = loom_json_get_array(c, obj, path, "kernels", false, &kern)))
        return s;
    e->repeats = (int32_t)rep;
    int i = 0;
    for (const cJSON *k = kern ? kern->child : NULL; k; k = k->next, i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s.kernels[%d]", path, i);
        if (!cJSON_IsString(k))
            return loom_json_fail(c, sub, "expected a kernel name string, found %s",
                                  loom_json_type_name(k));
        if (i >= LOOM_PROFILE_MAX_KERNELS) continue;   /* kept: the first few names */
        snprintf(e->kernels[i], LOOM_PROFILE_KERNEL_NAME_MAX, "%s", k->valuestring);
        e->n_kernels = i + 1;
    }
    return LOOM_OK;
}

/* An entry as read from a file, with its position there. */
typedef struct {
    loom_profile_entry e;
    int pos;
} file_entry;

/* Key order, then file order (so equal keys sit in the order they came). */
static int file_entry_cmp(const void *a, const void *b)
{
    const file_entry *x = a, *y = b;
    int c = loom_profile_key_cmp(&x->e.key, &y->e.key);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

loom_status loom_profile_db_load(const char *path, loom_profile_db **out, loom_error *err)
{
    *out = NULL;
    loom_jctx c = {path, err};
    cJSON *root = NULL;
    loom_profile_db *db = NULL;
    file_entry *all = NULL;
    static const char *const keys[] = {"format", "device", "cuda", "driver", "clock_note",
                                       "entries", NULL};
    const char *meta[4] = {"", "", "", ""};
    const cJSON *entries;
    loom_status s = open_doc(path, LOOM_PROFILE_FORMAT, &root, &c);
    if (s) return s;
    if ((s = loom_json_check_keys(&c, root, "$", keys)) ||
        (s = loom_json_get_str(&c, root, "$", "device", true, &meta[0])) ||
        (s = loom_json_get_str(&c, root, "$", "cuda", false, &meta[1])) ||
        (s = loom_json_get_str(&c, root, "$", "driver", false, &meta[2])) ||
        (s = loom_json_get_str(&c, root, "$", "clock_note", false, &meta[3])) ||
        (s = loom_json_get_array(&c, root, "$", "entries", true, &entries)) ||
        (s = loom_profile_db_create(meta[0], meta[1], meta[2], meta[3], &db, err)))
        goto fail;
    /* All entries are read, then sorted once and put in key order, so each
     * put appends: inserting a large unsorted file one entry at a time moved
     * the whole array each time (20 000 entries in reverse took 11 s). */
    int n = cJSON_GetArraySize(entries), i = 0;
    if (n > 0 && !(all = calloc((size_t)n, sizeof *all))) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory reading %d entries", path, n);
        goto fail;
    }
    char path_i[64];
    for (const cJSON *it = entries->child; it; it = it->next, i++) {
        snprintf(path_i, sizeof path_i, "$.entries[%d]", i);
        all[i].pos = i;
        if ((s = read_entry(&c, it, path_i, &all[i].e))) goto fail;
        if ((s = key_check(&all[i].e.key, path_i, err))) {
            loom_error_prefix(err, "%s", path);
            goto fail;
        }
    }
    if (n > 1) qsort(all, (size_t)n, sizeof *all, file_entry_cmp);
    int dup = -1;   /* the first entry, in file order, whose key an earlier one has */
    for (i = 1; i < n; i++)
        if (loom_profile_key_cmp(&all[i - 1].e.key, &all[i].e.key) == 0 &&
            (dup < 0 || all[i].pos < dup))
            dup = all[i].pos;
    if (dup >= 0) {
        snprintf(path_i, sizeof path_i, "$.entries[%d]", dup);
        s = loom_json_fail(&c, path_i, "duplicate entry: the same op, sig, dtype and shape "
                                       "as an earlier entry");
        goto fail;
    }
    for (i = 0; i < n; i++)
        if ((s = loom_profile_db_put(db, &all[i].e, err))) goto fail;
    free(all);
    cJSON_Delete(root);
    *out = db;
    return LOOM_OK;
fail:
    free(all);
    cJSON_Delete(root);
    loom_profile_db_destroy(db);
    return s;
}

loom_status loom_profile_db_save(const loom_profile_db *db, const char *path, loom_error *err)
{
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    if (!root || !cJSON_AddStringToObject(root, "format", LOOM_PROFILE_FORMAT) ||
        !cJSON_AddStringToObject(root, "device", db->device) ||
        !cJSON_AddStringToObject(root, "cuda", db->cuda) ||
        !cJSON_AddStringToObject(root, "driver", db->driver) ||
        !cJSON_AddStringToObject(root, "clock_note", db->clock_note) ||
        !(arr = cJSON_AddArrayToObject(root, "entries")))
        goto nomem;
    for (int32_t i = 0; i < db->n; i++) {   /* already in key order */
        const loom_profile_entry *e = &db->e[i];
        cJSON *o = cJSON_CreateObject(), *kn;
        if (!o || !cJSON_AddItemToArray(arr, o) || !write_key(o, &e->key) ||
            !cJSON_AddNumberToObject(o, "fwd_ns", (double)e->fwd_ns) ||
            !cJSON_AddNumberToObject(o, "bwd_ns", (double)e->bwd_ns) ||
            !cJSON_AddNumberToObject(o, "spread", e->spread) ||
            !cJSON_AddNumberToObject(o, "repeats", e->repeats) ||
            !cJSON_AddNumberToObject(o, "events_fwd_ns", (double)e->events_fwd_ns) ||
            !cJSON_AddNumberToObject(o, "events_bwd_ns", (double)e->events_bwd_ns) ||
            !cJSON_AddNumberToObject(o, "peak_bytes", (double)e->peak_bytes) ||
            !(kn = cJSON_AddArrayToObject(o, "kernels")))
            goto nomem;
        for (int k = 0; k < e->n_kernels; k++) {
            cJSON *str = cJSON_CreateString(e->kernels[k]);
            if (!str || !cJSON_AddItemToArray(kn, str)) goto nomem;
        }
    }
    return save_doc(root, path, err);
nomem:
    cJSON_Delete(root);
    return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory building the profile db", path);
}

/* ---- the requests file -------------------------------------------------------------- */

static int key_qsort_cmp(const void *a, const void *b)
{
    return loom_profile_key_cmp(a, b);
}

loom_status loom_profile_requests_write(const char *path, const char *source,
                                        const loom_profile_key *keys, int32_t n,
                                        loom_error *err)
{
    loom_profile_key *sorted = NULL;
    loom_status s;
    for (int32_t i = 0; i < n; i++) {
        char where[48];
        snprintf(where, sizeof where, "profile request %d", (int)i);
        if ((s = key_check(&keys[i], where, err))) return s;
    }
    if (n > 0 && !(sorted = malloc((size_t)n * sizeof *sorted)))
        return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", path);
    if (n > 0) memcpy(sorted, keys, (size_t)n * sizeof *sorted);
    if (n > 1) qsort(sorted, (size_t)n, sizeof *sorted, key_qsort_cmp);
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    if (!root || !cJSON_AddStringToObject(root, "format", LOOM_PROFILE_REQUESTS_FORMAT) ||
        (source && !cJSON_AddStringToObject(root, "source", source)) ||
        !(arr = cJSON_AddArrayToObject(root, "requests")))
        goto nomem;
    for (int32_t i = 0; i < n; i++) {
        if (i > 0 && loom_profile_key_cmp(&sorted[i - 1], &sorted[i]) == 0) continue;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o) || !write_key(o, &sorted[i])) goto nomem;
    }
    free(sorted);
    return save_doc(root, path, err);
nomem:
    free(sorted);
    cJSON_Delete(root);
    return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory building requests", path);
}

loom_status loom_profile_requests_read(const char *path, loom_profile_key **out, int32_t *n,
                                       loom_error *err)
{
    *out = NULL;
    *n = 0;
    loom_jctx c = {path, err};
    cJSON *root = NULL;
    loom_profile_key *keys = NULL;
    static const char *const top[] = {"format", "source", "requests", NULL};
    static const char *const item[] = {"op", "sig", "dtype", "shape", NULL};
    const cJSON *reqs;
    const char *source = NULL;
    loom_status s = open_doc(path, LOOM_PROFILE_REQUESTS_FORMAT, &root, &c);
    if (s) return s;
    if ((s = loom_json_check_keys(&c, root, "$", top)) ||
        (s = loom_json_get_str(&c, root, "$", "source", false, &source)) ||
        (s = loom_json_get_array(&c, root, "$", "requests", true, &reqs)))
        goto fail;
    int count = cJSON_GetArraySize(reqs);
    if (count > 0 && !(keys = calloc((size_t)count, sizeof *keys))) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    int i = 0;
    for (const cJSON *it = reqs->child; it; it = it->next, i++) {
        char path_i[64];
        snprintf(path_i, sizeof path_i, "$.requests[%d]", i);
        if (!cJSON_IsObject(it)) {
            s = loom_json_fail(&c, path_i, "expected an object, found %s", loom_json_type_name(it));
            goto fail;
        }
        if ((s = loom_json_check_keys(&c, it, path_i, item)) ||
            (s = read_key(&c, it, path_i, &keys[i])))
            goto fail;
        if ((s = key_check(&keys[i], path_i, err))) {
            loom_error_prefix(err, "%s", path);
            goto fail;
        }
    }
    cJSON_Delete(root);
    *out = keys;
    *n = count;
    return LOOM_OK;
fail:
    cJSON_Delete(root);
    free(keys);
    return s;
}
