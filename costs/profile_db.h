/*
 * profile_db.h — measured per-operator kernel times (docs/design.md §4, §8).
 *
 * `loom-profile` (gpu/) times op slices on a real GPU and writes a profile db,
 * "format": "loom-profile/1". The cost model (costs/compute.c) asks it for the
 * forward and backward time of one op on its shard; when the db has nothing
 * usable the caller falls back to the roofline. Every answer says where it
 * came from (loom_time_source), so a plan can report how much of its predicted
 * compute time rests on measurement.
 *
 * A profile KEY is (op kind, sig, dtype, shape):
 *   op     the op kind name ("einsum", "attention", "norm", …; graph.h)
 *   sig    einsum: the subscripts ("bsh,hf->bsf"); elementwise / norm: the fn
 *          ("gelu", "rmsnorm"); attention: "causal" or "full"; moe_route:
 *          "top<k>"; other kinds: "".
 *   shape  named dim sizes of the shard, canonical per kind:
 *            einsum         one entry per distinct subscript letter, named by
 *                           the letter ("bsh,hnd->bsnd": b s h n d), so a key
 *                           is runnable without the graph it came from;
 *            attention      b s t heads kvh dqk dv (q [b,s,heads,dqk],
 *                           k [b,t,kvh,dqk], v [b,t,kvh,dv]);
 *            elementwise, norm, softmax
 *                           n (rows: product of all output dims but the
 *                           last) and d (the last dim: the normalised /
 *                           softmax / rope dim);
 *            embedding      n (tokens), v (table rows), h;
 *            cross_entropy  n (tokens), v;
 *            moe_route      n (tokens), e (experts);
 *            moe_dispatch, moe_combine
 *                           n (tokens), e, c (tokens per expert), h.
 *          Order does not matter for matching (dims are matched by name).
 * loom_profile_key_from_op builds the key of a graph op with some dims
 * divided by a degree (the Megatron-style shard), so the planner and the
 * profiler agree by construction.
 *
 * Lookup (loom_profile_db_lookup): an entry with the same key gives the
 * measured times. Otherwise, among entries with the same op, sig, dtype and
 * dim names, dims are held at q's size greedily (the dim that most remaining
 * entries measured at exactly q's size first, keeping only those entries);
 * each other dim is bracketed by the nearest sizes below and above it among
 * the entries left (lo_d < q_d < hi_d); when all 2^k corners
 * of that box are in the db (k <= LOOM_PROFILE_MAX_INTERP_DIMS), the time is
 * the multilinear interpolation of log(time) over log(size):
 *     w_d = (ln q_d - ln lo_d) / (ln hi_d - ln lo_d)
 *     ln t = Σ_corners Π_d (w_d or 1 - w_d) · ln t_corner
 * (for k = 1 this is the straight line through the two neighbours on a
 * log-log plot: a power law t ∝ size^α fitted locally, exact for the
 * t ∝ size behaviour of large GEMMs and pointwise kernels). There is no
 * extrapolation: a size outside the measured range falls back to the
 * roofline.
 *
 * Units: times in the file are integer nanoseconds (fwd_ns, bwd_ns); the
 * lookup returns seconds. spread is a dimensionless ratio.
 */
#ifndef LOOM_PROFILE_DB_H
#define LOOM_PROFILE_DB_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"
#include "graph/graph.h"

/* Where a predicted compute time came from (costs/compute.h reports it). */
typedef enum {
    LOOM_SRC_MEASURED,      /* exact shape in the profile db */
    LOOM_SRC_INTERPOLATED,  /* log-space interpolation between measured shapes */
    LOOM_SRC_ROOFLINE,      /* analytical fallback */
} loom_time_source;

const char *loom_time_source_name(loom_time_source s);   /* "measured", … */

#define LOOM_PROFILE_FORMAT "loom-profile/1"
#define LOOM_PROFILE_REQUESTS_FORMAT "loom-profile-requests/1"

#define LOOM_PROFILE_MAX_DIMS 10
#define LOOM_PROFILE_OP_MAX 24
#define LOOM_PROFILE_MAX_KERNELS 8
#define LOOM_PROFILE_KERNEL_NAME_MAX 160
#define LOOM_PROFILE_MAX_INTERP_DIMS 4
#define LOOM_PROFILE_META_MAX 160

/* What one measurement is of. A plain value: build it with designated
 * initialisers or loom_profile_key_from_op. */
typedef struct {
    char op[LOOM_PROFILE_OP_MAX];
    char sig[LOOM_EINSUM_MAX];
    loom_dtype dtype;
    int32_t n_dims;
    loom_dim shape[LOOM_PROFILE_MAX_DIMS];
} loom_profile_key;

/* One measured op: times are medians over the repeats. */
typedef struct {
    loom_profile_key key;
    int64_t fwd_ns;            /* CUPTI kernel time of the forward, summed over its kernels */
    int64_t bwd_ns;            /* backward (0 for ops without one) */
    double spread;             /* (p90 - p10) / median over repeats, the larger of fwd/bwd */
    int32_t repeats;           /* timed repetitions behind the medians (0 = unknown) */
    int64_t events_fwd_ns;     /* CUDA-event cross-check of fwd (0 = not taken) */
    int64_t events_bwd_ns;
    int64_t peak_bytes;        /* device memory the op's buffers needed (0 = unknown) */
    int32_t n_kernels;
    char kernels[LOOM_PROFILE_MAX_KERNELS][LOOM_PROFILE_KERNEL_NAME_MAX];  /* truncated */
} loom_profile_entry;

typedef struct loom_profile_db loom_profile_db;

/* ---- the db ---------------------------------------------------------------- */

/* An empty db for a device; metadata strings may be NULL (stored as ""). */
loom_status loom_profile_db_create(const char *device, const char *cuda, const char *driver,
                                   const char *clock_note, loom_profile_db **out,
                                   loom_error *err);
/* Reads and validates a "loom-profile/1" file. Errors name the file and the
 * JSON path ("db.json: $.entries[3].shape.h: expected an integer >= 1 …"). */
loom_status loom_profile_db_load(const char *path, loom_profile_db **out, loom_error *err);
void loom_profile_db_destroy(loom_profile_db *db);

/* Writes the db atomically. Entries are written sorted by key (op, sig,
 * dtype, dim names, sizes), so identical dbs give byte-identical files. */
loom_status loom_profile_db_save(const loom_profile_db *db, const char *path, loom_error *err);

const char *loom_profile_db_device(const loom_profile_db *db);
const char *loom_profile_db_cuda(const loom_profile_db *db);
const char *loom_profile_db_driver(const loom_profile_db *db);
const char *loom_profile_db_clock_note(const loom_profile_db *db);

int32_t loom_profile_db_count(const loom_profile_db *db);
const loom_profile_entry *loom_profile_db_entry(const loom_profile_db *db, int32_t i);

/* Adds an entry, replacing one with the same key. Validates it (known op
 * kind, positive sizes, distinct dim names, non-negative times). */
loom_status loom_profile_db_put(loom_profile_db *db, const loom_profile_entry *e,
                                loom_error *err);

/* The entry with exactly this key, or NULL. */
const loom_profile_entry *loom_profile_db_find(const loom_profile_db *db,
                                               const loom_profile_key *key);

/* Forward and backward seconds of op `op_kind`/`sig`/`dt` on a shard of
 * `shape` (n_dims named sizes): measured when the key is in the db,
 * interpolated when the shape lies inside a measured box (see above); else
 * returns false and leaves the outputs untouched (the caller uses the
 * roofline and LOOM_SRC_ROOFLINE). db may be NULL (always false). */
bool loom_profile_db_lookup(const loom_profile_db *db, const char *op_kind, const char *sig,
                            loom_dtype dt, const loom_dim *shape, int n_dims, double *fwd_s,
                            double *bwd_s, loom_time_source *src);

/* ---- keys -------------------------------------------------------------------- */

/* Two keys are the same measurement (same op, sig, dtype and dims by name). */
bool loom_profile_key_equal(const loom_profile_key *a, const loom_profile_key *b);
/* Total order used for sorting files: op, sig, dtype, dim names, sizes. */
int loom_profile_key_cmp(const loom_profile_key *a, const loom_profile_key *b);
/* Size of the dim called `name`, or 0. */
int64_t loom_profile_key_dim(const loom_profile_key *k, const char *name);

/* The key of op `op_id` of g on its shard: every operand dim whose NAME is
 * div[i].name is divided by div[i].size (e.g. {"heads", 8}, {"f", 8} for
 * TP 8). Fails (LOOM_ERR_INVALID) when a degree does not divide its dim, and
 * (LOOM_ERR_UNSUPPORTED) for kinds that are never profiled (reshape,
 * transpose: free views). */
loom_status loom_profile_key_from_op(const loom_graph *g, int32_t op_id, const loom_dim *div,
                                     int n_div, loom_profile_key *out, loom_error *err);

/* ---- the requests file ("loom-profile-requests/1") ---------------------------- */

/* Writes the distinct keys of keys[0..n) atomically, sorted, duplicates
 * dropped. `source` (may be NULL) is recorded as "source" (e.g. the model). */
loom_status loom_profile_requests_write(const char *path, const char *source,
                                        const loom_profile_key *keys, int32_t n,
                                        loom_error *err);
/* Reads a requests file: *out is a malloc'd array of *n keys (free() it). */
loom_status loom_profile_requests_read(const char *path, loom_profile_key **out, int32_t *n,
                                       loom_error *err);

#endif
