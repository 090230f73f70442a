/*
 * stage_dp.c — Alpa's inter-operator DP over a stage cost table (see the
 * essay in stage_dp.h), sub-mesh shapes, their placement and layer clustering.
 *
 * Layout of the work arrays:
 *   tab[((f * L + k) * L + j) * NM + m]  best time of layers k..j on sub-mesh m
 *                                        holding f+1 micro-batches (f < NF)
 *   F[(s * (L+1) + k) * (DU+1) + d]      least Σ t for layers k.. in s stages
 *                                        on d GPU units (one unit = gcd of sizes)
 * NF = the distinct in-flight counts min(s, M), s = 1..S (1 for inference).
 */
#include "solver/stage_dp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- sub-meshes ------------------------------------------------------------ */

int32_t loom_stage_submeshes(int64_t gpus_per_node, int64_t devices, int64_t max_nodes,
                             loom_submesh *out, int32_t cap)
{
    int32_t n = 0;
    if (gpus_per_node < 1 || devices < 1) return 0;
    for (int64_t p = 1; p < gpus_per_node && p <= devices && gpus_per_node % p == 0; p *= 2) {
        if (n < cap) out[n] = (loom_submesh){1, p};
        n++;
    }
    for (int64_t k = 1; k * gpus_per_node <= devices; k++) {
        if (max_nodes > 0 && k > max_nodes) break;
        if (n < cap) out[n] = (loom_submesh){k, gpus_per_node};
        n++;
    }
    return n;
}

int32_t loom_stage_logical_meshes(loom_submesh m, int64_t (*out)[2], int32_t cap)
{
    int32_t n = 0;
    int64_t total = loom_submesh_devices(m);
    for (int64_t p = 1; p <= m.gpus && m.gpus % p == 0; p *= 2) {
        if (n < cap) out[n][0] = total / p, out[n][1] = p;
        n++;
    }
    /* The node's full width when it is not a power of two (e.g. 6 GPUs). */
    int64_t last = n ? (n <= cap ? out[n - 1][1] : 0) : 0;
    if ((m.gpus & (m.gpus - 1)) != 0 && last != m.gpus) {
        if (n < cap) out[n][0] = total / m.gpus, out[n][1] = m.gpus;
        n++;
    }
    if (m.nodes > 1) {   /* one axis spanning the whole sub-mesh */
        if (n < cap) out[n][0] = 1, out[n][1] = total;
        n++;
    }
    return n;
}

/* First free aligned block for one mesh; -1 if none. Sub-node meshes (size p
 * dividing g) are aligned to p, so they never straddle a node; whole-node
 * meshes take `nodes` consecutive free nodes. */
static int64_t find_slot(const unsigned char *used, int64_t devices, int64_t g,
                         loom_submesh m)
{
    bool whole = m.gpus == g;
    int64_t size = loom_submesh_devices(m), step = whole ? g : m.gpus;
    for (int64_t at = 0; at + size <= devices; at += step) {
        int64_t k = 0;
        while (k < size && !used[at + k]) k++;
        if (k == size) return at;
    }
    return -1;
}

static bool place_in_order(const loom_submesh *meshes, const int32_t *order, int32_t n,
                           int64_t g, int64_t devices, unsigned char *used, int64_t *first)
{
    memset(used, 0, (size_t)devices);
    for (int32_t t = 0; t < n; t++) {
        int32_t i = order[t];
        int64_t at = find_slot(used, devices, g, meshes[i]);
        if (at < 0) return false;
        memset(used + at, 1, (size_t)loom_submesh_devices(meshes[i]));
        first[i] = at;
    }
    return true;
}

loom_status loom_stage_place(const loom_submesh *meshes, int32_t n, int64_t gpus_per_node,
                             int64_t devices, int64_t *first_gpu, loom_error *err)
{
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        loom_submesh m = meshes[i];
        bool ok = m.nodes >= 1 && m.gpus >= 1 &&
                  (m.gpus == gpus_per_node || (m.nodes == 1 && gpus_per_node % m.gpus == 0));
        if (!ok)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "stage %d: sub-mesh (%lld, %lld) is not a valid shape for "
                                  "nodes of %lld GPUs",
                                  (int)i, (long long)m.nodes, (long long)m.gpus,
                                  (long long)gpus_per_node);
        total += loom_submesh_devices(m);
    }
    if (total != devices)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "stages use %lld GPUs, expected exactly %lld", (long long)total,
                              (long long)devices);
    unsigned char *used = malloc((size_t)devices + 1);
    int32_t *order = malloc(sizeof *order * ((size_t)n + 1));
    if (!used || !order) {
        free(used);
        free(order);
        return loom_error_set(err, LOOM_ERR_NOMEM, "out of memory placing %d stages", (int)n);
    }
    /* Stage order keeps consecutive stages on neighbouring GPUs; if that
     * fragments, largest-first (buddy allocation) always tiles: every size
     * divides every larger one, and whole nodes go first. */
    for (int32_t i = 0; i < n; i++) order[i] = i;
    bool ok = place_in_order(meshes, order, n, gpus_per_node, devices, used, first_gpu);
    if (!ok) {
        for (int32_t a = 1; a < n; a++)   /* stable insertion sort, largest first */
            for (int32_t b = a; b > 0 && loom_submesh_devices(meshes[order[b]]) >
                                              loom_submesh_devices(meshes[order[b - 1]]);
                 b--) {
                int32_t t = order[b];
                order[b] = order[b - 1];
                order[b - 1] = t;
            }
        ok = place_in_order(meshes, order, n, gpus_per_node, devices, used, first_gpu);
    }
    free(used);
    free(order);
    if (!ok)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "the stages' sub-meshes do not tile %lld GPUs in nodes of %lld",
                              (long long)devices, (long long)gpus_per_node);
    return LOOM_OK;
}

/* ---- clustering -------------------------------------------------------------- */

/* Row c of the clustering DP for i in [lo, hi], knowing that the best cut
 * of every i lies in [jlo, jhi] (divide and conquer: the cost (Σw)² of a
 * segment of non-negative weights obeys the quadrangle inequality, so the
 * smallest best cut is non-decreasing in i; Galil & Park 1992). Each level
 * of the recursion scans O(n) cuts: O(n log n) per row instead of O(n²). */
static void cluster_row(const double *pre, double *C, int32_t *cut, int32_t n, int32_t c,
                        int32_t lo, int32_t hi, int32_t jlo, int32_t jhi)
{
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2, best = -1;
        double best_v = INFINITY;
        int32_t a = jlo > c - 1 ? jlo : c - 1, b = jhi < mid - 1 ? jhi : mid - 1;
        for (int32_t j = a; j <= b; j++) {
            double prev = C[(size_t)(c - 1) * (size_t)(n + 1) + (size_t)j];
            if (prev == INFINITY) continue;
            double w = pre[mid] - pre[j], v = prev + w * w;
            if (v < best_v) best_v = v, best = j;
        }
        size_t q = (size_t)c * (size_t)(n + 1) + (size_t)mid;
        C[q] = best_v, cut[q] = best;
        int32_t split = best >= 0 ? best : a;
        /* left half recursively (shorter), right half by iteration */
        cluster_row(pre, C, cut, n, c, lo, mid - 1, jlo, split);
        lo = mid + 1, jlo = split;
    }
}

/* Layers beyond which the O(k n²) exact scan gives way to cluster_row (the
 * same optimum; below it plans stay byte-identical to the scan's ties). */
#define CLUSTER_SCAN_MAX_LAYERS 1024

int32_t loom_stage_cluster(const double *weights, int32_t n, int32_t max_clusters,
                           int32_t *first)
{
    if (n <= 0) return 0;
    int32_t k = max_clusters < 1 ? 1 : max_clusters;
    if (k >= n) {
        for (int32_t i = 0; i <= n; i++) first[i] = i;
        return n;
    }
    /* C(c, i) = least Σ w² cutting layers 0..i-1 into c clusters. */
    size_t cells = (size_t)(k + 1) * (size_t)(n + 1);
    double *C = malloc(sizeof *C * cells);
    int32_t *cut = malloc(sizeof *cut * cells);
    double *pre = malloc(sizeof *pre * ((size_t)n + 1));
    if (!C || !cut || !pre) {   /* fall back to equal counts */
        free(C);
        free(cut);
        free(pre);
        for (int32_t c = 0; c <= k; c++) first[c] = (int32_t)((int64_t)c * n / k);
        return k;
    }
    pre[0] = 0;
    for (int32_t i = 0; i < n; i++) pre[i + 1] = pre[i] + weights[i];
    for (size_t q = 0; q < cells; q++) C[q] = INFINITY, cut[q] = -1;
    C[0] = 0;
    if (n > CLUSTER_SCAN_MAX_LAYERS) {
        for (int32_t c = 1; c <= k; c++) cluster_row(pre, C, cut, n, c, c, n - (k - c), 0, n);
    } else for (int32_t c = 1; c <= k; c++)
        for (int32_t i = c; i <= n - (k - c); i++)
            for (int32_t j = c - 1; j < i; j++) {
                double prev = C[(size_t)(c - 1) * (size_t)(n + 1) + (size_t)j];
                if (prev == INFINITY) continue;
                double w = pre[i] - pre[j], v = prev + w * w;
                size_t q = (size_t)c * (size_t)(n + 1) + (size_t)i;
                if (v < C[q]) C[q] = v, cut[q] = j;
            }
    first[k] = n;
    for (int32_t c = k, i = n; c > 0; c--) {
        i = cut[(size_t)c * (size_t)(n + 1) + (size_t)i];
        first[c - 1] = i;
    }
    free(C);
    free(cut);
    free(pre);
    return k;
}

/* ---- the DP -------------------------------------------------------------------- */

static int64_t sat_add(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }
static int64_t sat_mul(int64_t a, int64_t b)
{
    if (a == 0 || b == 0) return 0;
    return a > INT64_MAX / b ? INT64_MAX : a * b;
}
static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Buffers kept between solves (page-faulting fresh ones dominated the
 * search's profile). Slots: see WS_* below. */
#define WS_SLOTS 10
struct loom_stage_workspace {
    void *buf[WS_SLOTS];
    size_t cap[WS_SLOTS];
};
enum { WS_PT, WS_PN, WS_PS, WS_PA, WS_TAB, WS_TABOPT, WS_F, WS_FJ, WS_FM, WS_CAND };

loom_status loom_stage_workspace_create(loom_stage_workspace **out, loom_error *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? LOOM_OK : loom_error_set(err, LOOM_ERR_NOMEM, "stage DP: out of memory");
}

void loom_stage_workspace_destroy(loom_stage_workspace *w)
{
    if (!w) return;
    for (int i = 0; i < WS_SLOTS; i++) free(w->buf[i]);
    free(w);
}

/* A buffer of `bytes` from slot i of ws (grown as needed), or a fresh one. */
static void *grab(loom_stage_workspace *ws, int i, size_t bytes)
{
    if (!ws) return malloc(bytes ? bytes : 1);
    if (ws->cap[i] < bytes) {
        void *nb = realloc(ws->buf[i], bytes);
        if (!nb) return NULL;
        ws->buf[i] = nb, ws->cap[i] = bytes;
    }
    return ws->buf[i] ? ws->buf[i] : (ws->buf[i] = malloc(1));
}

/* The solver's working state for one problem. */
typedef struct {
    const loom_stage_problem *p;
    int32_t L, NM, NO, S, NF;
    int64_t unit, DU;
    int64_t units[LOOM_STAGE_MAX_MESHES];
    int64_t min_units, max_units;
    double *pt;         /* prefix sums [(m * NO + o) * (L+1) + l] of finite times, */
    int32_t *pn;        /* … of missing (infinite) entries, */
    int64_t *ps, *pa;   /* … of static and activation bytes */
    double *tab;        /* stage times, see the file header */
    int8_t *tab_opt;
    double *F;
    int32_t *F_j;       /* choice: last layer of the stage ... */
    int16_t *F_m;       /* ... and its sub-mesh */
} dp_state;

static int64_t in_flight_of(const dp_state *st, int32_t s)
{
    if (st->p->one_in_flight) return 1;
    return s < st->p->micro_batches ? s : st->p->micro_batches;
}

static size_t pidx(const dp_state *st, int32_t m, int32_t o, int32_t l)
{
    return ((size_t)m * (size_t)st->NO + (size_t)o) * (size_t)(st->L + 1) + (size_t)l;
}

static void range_cost(const dp_state *st, int32_t k, int32_t j, int32_t m, int32_t o,
                       int64_t in_flight, double *t, int64_t *mem)
{
    bool missing = st->pn[pidx(st, m, o, j + 1)] != st->pn[pidx(st, m, o, k)];
    *t = missing ? INFINITY : st->pt[pidx(st, m, o, j + 1)] - st->pt[pidx(st, m, o, k)];
    int64_t stat = st->ps[pidx(st, m, o, j + 1)] - st->ps[pidx(st, m, o, k)];
    int64_t act = st->pa[pidx(st, m, o, j + 1)] - st->pa[pidx(st, m, o, k)];
    int64_t once = st->p->stage_bytes ? st->p->stage_bytes[m * st->NO + o] : 0;
    *mem = sat_add(sat_add(once > 0 ? once : 0, stat), sat_mul(in_flight, act));
}

static size_t tidx(const dp_state *st, int32_t f, int32_t k, int32_t j, int32_t m)
{
    return (((size_t)f * (size_t)st->L + (size_t)k) * (size_t)st->L + (size_t)j) *
               (size_t)st->NM + (size_t)m;
}

static size_t fidx(const dp_state *st, int32_t s, int32_t k, int64_t d)
{
    return ((size_t)s * (size_t)(st->L + 1) + (size_t)k) * (size_t)(st->DU + 1) + (size_t)d;
}

static void state_free(dp_state *st)
{
    if (st->p && st->p->ws) return;   /* the workspace keeps them */
    free(st->pt);
    free(st->pn);
    free(st->ps);
    free(st->pa);
    free(st->tab);
    free(st->tab_opt);
    free(st->F);
    free(st->F_j);
    free(st->F_m);
}

static loom_status check_problem(const loom_stage_problem *p, loom_error *err)
{
    if (p->n_layers < 1 || p->n_layers > LOOM_STAGE_MAX)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "stage DP: %d layers, expected 1..%d (cluster them first)",
                              (int)p->n_layers, LOOM_STAGE_MAX);
    if (p->n_meshes < 1 || p->n_meshes > LOOM_STAGE_MAX_MESHES || p->n_options < 1 ||
        p->n_options > 127)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "stage DP: %d sub-meshes and %d options, expected 1..%d and 1..127",
                              (int)p->n_meshes, (int)p->n_options, LOOM_STAGE_MAX_MESHES);
    if (p->devices < 1 || p->micro_batches < 1 || !p->mesh_devices || !p->cost)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "stage DP: needs devices ≥ 1, micro-batches ≥ 1 and a cost table");
    for (int32_t m = 0; m < p->n_meshes; m++)
        if (p->mesh_devices[m] < 1 || p->mesh_devices[m] > p->devices)
            return loom_error_set(err, LOOM_ERR_INVALID,
                                  "stage DP: sub-mesh %d has %lld GPUs, expected 1..%lld",
                                  (int)m, (long long)p->mesh_devices[m],
                                  (long long)p->devices);
    return LOOM_OK;
}

/* Allocates the state and fills prefix sums; the table only when want_tab. */
static loom_status state_init(dp_state *st, const loom_stage_problem *p, bool want_tab,
                              loom_error *err)
{
    memset(st, 0, sizeof *st);
    loom_status s = check_problem(p, err);
    if (s) return s;
    st->p = p;
    st->L = p->n_layers, st->NM = p->n_meshes, st->NO = p->n_options;
    int64_t u = 0;
    for (int32_t m = 0; m < st->NM; m++) u = gcd64(u, p->mesh_devices[m]);
    if (p->devices % u)
        return loom_error_set(err, LOOM_ERR_INFEASIBLE,
                              "stage DP: %lld GPUs cannot be split into sub-meshes whose sizes "
                              "are multiples of %lld",
                              (long long)p->devices, (long long)u);
    st->unit = u, st->DU = p->devices / u;
    st->min_units = INT64_MAX, st->max_units = 0;
    for (int32_t m = 0; m < st->NM; m++) {
        st->units[m] = p->mesh_devices[m] / u;
        if (st->units[m] < st->min_units) st->min_units = st->units[m];
        if (st->units[m] > st->max_units) st->max_units = st->units[m];
    }
    int64_t S = st->DU / st->min_units;
    if (S > st->L) S = st->L;
    if (p->max_stages > 0 && S > p->max_stages) S = p->max_stages;
    st->S = (int32_t)S;
    st->NF = p->one_in_flight ? 1 : (int32_t)(S < p->micro_batches ? S : p->micro_batches);

    size_t npre = (size_t)st->NM * (size_t)st->NO * (size_t)(st->L + 1);
    size_t ntab = (size_t)st->NF * (size_t)st->L * (size_t)st->L * (size_t)st->NM;
    size_t nF = (size_t)(st->S + 1) * (size_t)(st->L + 1) * (size_t)(st->DU + 1);
    if (ntab > ((size_t)1 << 26) || nF > ((size_t)1 << 26))
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "stage DP too large: %d layers x %d sub-meshes x %lld GPU units; "
                              "cluster the layers or use the uniform-stage mode",
                              (int)st->L, (int)st->NM, (long long)st->DU);
    loom_stage_workspace *ws = p->ws;
    st->pt = grab(ws, WS_PT, sizeof *st->pt * npre);
    st->pn = grab(ws, WS_PN, sizeof *st->pn * npre);
    st->ps = grab(ws, WS_PS, sizeof *st->ps * npre);
    st->pa = grab(ws, WS_PA, sizeof *st->pa * npre);
    st->F = grab(ws, WS_F, sizeof *st->F * nF);
    st->F_j = grab(ws, WS_FJ, sizeof *st->F_j * nF);
    st->F_m = grab(ws, WS_FM, sizeof *st->F_m * nF);
    if (want_tab) {
        st->tab = grab(ws, WS_TAB, sizeof *st->tab * ntab);
        st->tab_opt = grab(ws, WS_TABOPT, ntab);
    }
    if (!st->pt || !st->pn || !st->ps || !st->pa || !st->F || !st->F_j || !st->F_m ||
        (want_tab && (!st->tab || !st->tab_opt))) {
        state_free(st);
        return loom_error_set(err, LOOM_ERR_NOMEM, "stage DP: out of memory");
    }
    for (int32_t m = 0; m < st->NM; m++)
        for (int32_t o = 0; o < st->NO; o++) {
            st->pt[pidx(st, m, o, 0)] = 0, st->ps[pidx(st, m, o, 0)] = 0;
            st->pn[pidx(st, m, o, 0)] = 0;
            st->pa[pidx(st, m, o, 0)] = 0;
            for (int32_t l = 0; l < st->L; l++) {
                const loom_stage_cost *c =
                    &p->cost[((size_t)l * (size_t)st->NM + (size_t)m) * (size_t)st->NO + (size_t)o];
                bool ok = c->time_s >= 0 && c->time_s < INFINITY;
                st->pt[pidx(st, m, o, l + 1)] = st->pt[pidx(st, m, o, l)] + (ok ? c->time_s : 0);
                st->pn[pidx(st, m, o, l + 1)] = st->pn[pidx(st, m, o, l)] + !ok;
                st->ps[pidx(st, m, o, l + 1)] =
                    sat_add(st->ps[pidx(st, m, o, l)], c->static_bytes > 0 ? c->static_bytes : 0);
                st->pa[pidx(st, m, o, l + 1)] =
                    sat_add(st->pa[pidx(st, m, o, l)], c->act_bytes > 0 ? c->act_bytes : 0);
            }
        }
    if (!want_tab) return LOOM_OK;
    /* Per (k, j, m): each option's time and the most micro-batches it can
     * hold, options in time order; as the in-flight count f+1 grows the
     * fastest option still fitting moves down that order, never up. */
    int32_t ord[128];
    double ot[128];
    int64_t olim[128];
    for (int32_t k = 0; k < st->L; k++)
        for (int32_t j = k; j < st->L; j++)
            for (int32_t m = 0; m < st->NM; m++) {
                int32_t n = 0;
                for (int32_t o = 0; o < st->NO; o++) {
                    double t;
                    int64_t base, with1;
                    range_cost(st, k, j, m, o, 0, &t, &base);
                    range_cost(st, k, j, m, o, 1, &t, &with1);
                    if (t == INFINITY || base > p->capacity_bytes) continue;
                    int64_t act = with1 - base;
                    ot[o] = t;
                    olim[o] = act > 0 ? (p->capacity_bytes - base) / act : INT64_MAX;
                    int32_t q = n++;   /* insertion by time, ties by option index */
                    while (q > 0 && ot[ord[q - 1]] > t) ord[q] = ord[q - 1], q--;
                    ord[q] = o;
                }
                int32_t q = 0;
                for (int32_t f = 0; f < st->NF; f++) {
                    int64_t fl = in_flight_of(st, f + 1);
                    while (q < n && olim[ord[q]] < fl) q++;
                    st->tab[tidx(st, f, k, j, m)] = q < n ? ot[ord[q]] : INFINITY;
                    st->tab_opt[tidx(st, f, k, j, m)] = q < n ? (int8_t)ord[q] : -1;
                }
            }
    return LOOM_OK;
}

static int32_t f_of(const dp_state *st, int32_t s)
{
    return st->p->one_in_flight ? 0 : (int32_t)(in_flight_of(st, s) - 1);
}

/* One run of F under the bound t_max. Returns min_s F(s, 0, DU) and that s. */
static double run_dp(dp_state *st, double t_max, int32_t *best_s)
{
    /* Only entries this run writes are ever read (the range checks below),
     * so F needs no initialisation between runs. */
    const int32_t L = st->L;
    double best = INFINITY;
    *best_s = 0;
    for (int32_t s = 1; s <= st->S; s++) {
        int32_t f = f_of(st, s);
        /* A suffix of s stages uses between s·min and s·max units. */
        int64_t dlo = (int64_t)s * st->min_units, dhi = (int64_t)s * st->max_units;
        int64_t rlo = (int64_t)(s - 1) * st->min_units, rhi = (int64_t)(s - 1) * st->max_units;
        if (dhi > st->DU) dhi = st->DU;
        for (int32_t k = L - s; k >= 0; k--)
            for (int64_t d = dlo; d <= dhi; d++) {
                double bestv = INFINITY;
                int32_t bj = -1;
                int16_t bm = -1;
                for (int32_t m = 0; m < st->NM; m++) {
                    int64_t rest = d - st->units[m];
                    if (rest < rlo || rest > rhi || rest > st->DU) continue;
                    /* j leaves at least s-1 layers for the other stages; the
                     * last stage must end at layer L-1 on exactly d units. */
                    int32_t jlo = s == 1 ? L - 1 : k;
                    for (int32_t j = k; j <= L - s; j++) {
                        double t = st->tab[tidx(st, f, k, j, m)];
                        if (t > t_max) break;   /* stage times grow with j */
                        if (j < jlo) continue;
                        double v = t + (s == 1 ? 0.0 : st->F[fidx(st, s - 1, j + 1, rest)]);
                        if (v < bestv) bestv = v, bj = j, bm = (int16_t)m;
                    }
                }
                size_t q = fidx(st, s, k, d);
                st->F[q] = bestv, st->F_j[q] = bj, st->F_m[q] = bm;
            }
        if (st->DU < dlo || st->DU > dhi) continue;
        double v = st->F[fidx(st, s, 0, st->DU)];
        if (v < best) best = v, *best_s = s;
    }
    return best;
}

/* Reads the stages of the last run_dp back out of the choice arrays. */
static void reconstruct(const dp_state *st, int32_t S, loom_stage_solution *out)
{
    int32_t k = 0;
    int64_t d = st->DU;
    out->n_stages = S;
    out->sum_s = 0, out->max_s = 0;
    for (int32_t i = 0; i < S; i++) {
        int32_t s = S - i;
        size_t q = fidx(st, s, k, d);
        int32_t j = st->F_j[q], m = st->F_m[q], f = f_of(st, s);
        loom_stage_choice *c = &out->stages[i];
        c->first = k, c->last = j, c->mesh = m;
        c->option = st->tab_opt[tidx(st, f, k, j, m)];
        c->in_flight = in_flight_of(st, s);
        range_cost(st, k, j, m, c->option, c->in_flight, &c->time_s, &c->mem_bytes);
        out->sum_s += c->time_s;
        if (c->time_s > out->max_s) out->max_s = c->time_s;
        k = j + 1;
        d -= st->units[m];
    }
    out->step_s = out->sum_s + (double)(st->p->micro_batches - 1) * out->max_s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

loom_status loom_stage_dp_solve(const loom_stage_problem *p, loom_stage_solution *out,
                                loom_error *err)
{
    memset(out, 0, sizeof *out);
    dp_state st;
    loom_status s = state_init(&st, p, true, err);
    if (s) return s;
    double *cand = NULL;
    const double M1 = (double)(p->micro_batches - 1);

    /* Candidate bounds: the distinct finite stage times. */
    size_t ntab = (size_t)st.NF * (size_t)st.L * (size_t)st.L * (size_t)st.NM, nc = 0;
    cand = grab(p->ws, WS_CAND, sizeof *cand * (ntab + 1));
    if (!cand) {
        s = loom_error_set(err, LOOM_ERR_NOMEM, "stage DP: out of memory");
        goto fail;
    }
    /* A (k, j, m) entry changes with the in-flight count only when its
     * option does: collect each distinct value once before sorting. */
    for (int32_t k = 0; k < st.L; k++)
        for (int32_t j = k; j < st.L; j++)
            for (int32_t m = 0; m < st.NM; m++)
                for (int32_t f = 0; f < st.NF; f++) {
                    double v = st.tab[tidx(&st, f, k, j, m)];
                    if (v == INFINITY) break;   /* more in flight never fits better */
                    if (f == 0 || v != st.tab[tidx(&st, f - 1, k, j, m)]) cand[nc++] = v;
                }
    qsort(cand, nc, sizeof *cand, cmp_double);
    size_t nu = 0;
    for (size_t q = 0; q < nc; q++)
        if (nu == 0 || cand[q] != cand[nu - 1]) cand[nu++] = cand[q];
    out->tmax_candidates = (int64_t)nu;

    /* F(∞): the least Σ t with no bound — a lower bound for every F and, with
     * its own max stage, the first incumbent. */
    int32_t S_best;
    double f_inf = nu ? run_dp(&st, INFINITY, &S_best) : INFINITY;
    out->dp_runs = 1;
    if (f_inf == INFINITY) {
        s = loom_error_set(err, LOOM_ERR_INFEASIBLE,
                           "no split of %d layers over %lld GPUs fits in %.2f GiB per GPU",
                           (int)st.L, (long long)p->devices,
                           (double)p->capacity_bytes / (1024.0 * 1024 * 1024));
        goto fail;
    }
    reconstruct(&st, S_best, out);
    double best = out->step_s, best_t = INFINITY;

    /* Smallest feasible bound by bisection: feasibility is monotone in t_max. */
    size_t lo = 0, hi = nu - 1;
    while (lo < hi) {
        if (p->stop && *p->stop) break;
        size_t mid = lo + (hi - lo) / 2;
        int32_t sb;
        double v = run_dp(&st, cand[mid], &sb);
        out->dp_runs++;
        if (v < INFINITY) {
            hi = mid;
            if (v + M1 * cand[mid] < best) best = v + M1 * cand[mid], best_t = cand[mid];
        } else {
            lo = mid + 1;
        }
    }
    /* Scan upwards, stopping once (M-1)·t_max + F(∞) cannot beat the best. */
    double last = -1;
    for (size_t q = lo; q < nu; q++) {
        double t = cand[q];
        if (M1 * t + f_inf >= best) break;
        if (p->stop && *p->stop) {
            out->stopped = true;
            break;
        }
        if (last >= 0 && p->tmax_rel_gap > 0 && t <= last * (1 + p->tmax_rel_gap)) continue;
        last = t;
        int32_t sb;
        double v = run_dp(&st, t, &sb);
        out->dp_runs++;
        if (v + M1 * t < best) best = v + M1 * t, best_t = t;
    }
    if (p->stop && *p->stop) out->stopped = true;
    if (best_t < INFINITY) {   /* rebuild the winner's choices */
        int32_t sb;
        run_dp(&st, best_t, &sb);
        out->dp_runs++;
        int64_t cands = out->tmax_candidates, runs = out->dp_runs;
        bool stopped = out->stopped;
        reconstruct(&st, sb, out);
        out->tmax_candidates = cands, out->dp_runs = runs, out->stopped = stopped;
    }
    s = LOOM_OK;
fail:
    if (!p->ws) free(cand);
    state_free(&st);
    return s;
}

int64_t loom_stage_dp_min_memory(const loom_stage_problem *p)
{
    dp_state st;
    loom_error err;
    if (state_init(&st, p, false, &err)) return INT64_MAX;
    /* G(s, k, d): least over partitions of the largest stage memory, each
     * stage with its least-memory option (no capacity). Stored in F as a
     * double; bytes below 2^53 are exact. */
    const int32_t L = st.L;
    size_t nF = (size_t)(st.S + 1) * (size_t)(L + 1) * (size_t)(st.DU + 1);
    for (size_t q = 0; q < nF; q++) st.F[q] = INFINITY;
    st.F[fidx(&st, 0, L, 0)] = 0;
    double best = INFINITY;
    for (int32_t s = 1; s <= st.S; s++) {
        int64_t fl = in_flight_of(&st, s);
        int64_t dlo = (int64_t)s * st.min_units, dhi = (int64_t)s * st.max_units;
        if (dhi > st.DU) dhi = st.DU;
        for (int32_t k = L - s; k >= 0; k--)
            for (int64_t d = dlo; d <= dhi; d++) {
                double bv = INFINITY;
                for (int32_t m = 0; m < st.NM; m++) {
                    int64_t rest = d - st.units[m];
                    if (rest < 0) continue;
                    for (int32_t j = k; j <= L - s; j++) {
                        double tail = st.F[fidx(&st, s - 1, j + 1, rest)];
                        if (tail == INFINITY) continue;
                        for (int32_t o = 0; o < st.NO; o++) {
                            double t;
                            int64_t mem;
                            range_cost(&st, k, j, m, o, fl, &t, &mem);
                            if (t == INFINITY) continue;
                            double v = (double)mem > tail ? (double)mem : tail;
                            if (v < bv) bv = v;
                        }
                    }
                }
                st.F[fidx(&st, s, k, d)] = bv;
            }
        double v = st.F[fidx(&st, s, 0, st.DU)];
        if (v < best) best = v;
    }
    state_free(&st);
    return best == INFINITY || best >= 9.2e18 ? INT64_MAX : (int64_t)best;
}

void loom_stage_range_cost(const loom_stage_problem *p, int32_t first, int32_t last,
                           int32_t mesh, int32_t option, int64_t in_flight, double *time_s,
                           int64_t *mem_bytes)
{
    double t = 0;
    int64_t stat = 0, act = 0;
    for (int32_t l = first; l <= last; l++) {
        const loom_stage_cost *c =
            &p->cost[((size_t)l * (size_t)p->n_meshes + (size_t)mesh) * (size_t)p->n_options +
                     (size_t)option];
        t += c->time_s >= 0 && !isnan(c->time_s) ? c->time_s : INFINITY;
        stat = sat_add(stat, c->static_bytes > 0 ? c->static_bytes : 0);
        act = sat_add(act, c->act_bytes > 0 ? c->act_bytes : 0);
    }
    int64_t once = p->stage_bytes ? p->stage_bytes[mesh * p->n_options + option] : 0;
    *time_s = t;
    *mem_bytes = sat_add(sat_add(once > 0 ? once : 0, stat), sat_mul(in_flight, act));
}
