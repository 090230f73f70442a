/*
 * workload.c — workload defaults and checks, and the seeded generator the
 * simulator draws arrivals and lengths from (workload.h).
 *
 * splitmix64 (Steele, Lea & Flood 2014) is a 64-bit generator with a
 * one-word state: the same seed gives the same run on every platform.
 * Normal deviates by Box–Muller; a log-normal of mean m and coefficient
 * of variation c has σ² = ln(1 + c²), μ = ln m − σ²/2.
 */
#include "costs/serve/workload.h"

#include <math.h>
#include <string.h>

void loom_serve_workload_init(loom_serve_workload *w)
{
    memset(w, 0, sizeof *w);
    w->isl = 1024;
    w->osl = 128;
    w->load = LOOM_LOAD_OFFLINE;
}

static int64_t max_len(int64_t mean, loom_len_dist d, double r)
{
    if (d == LOOM_LEN_UNIFORM) return (int64_t)ceil((double)mean * (1 + r));
    if (d == LOOM_LEN_LOGNORMAL) return (int64_t)ceil((double)mean * (1 + 4 * r));   /* the cap */
    return mean;
}

int64_t loom_serve_workload_max_isl(const loom_serve_workload *w)
{
    return max_len(w->isl, w->isl_dist, w->isl_spread);
}

int64_t loom_serve_workload_max_osl(const loom_serve_workload *w)
{
    return max_len(w->osl, w->osl_dist, w->osl_spread);
}

loom_status loom_serve_workload_check(const loom_serve_workload *w, int64_t max_context,
                                      loom_error *err)
{
    const int64_t big = (int64_t)1 << 24;
    if (w->isl < 1 || w->isl > big)
        return loom_error_set(err, LOOM_ERR_INVALID, "--isl: expected a prompt length in [1, %lld] "
                              "tokens, found %lld", (long long)big, (long long)w->isl);
    if (w->osl < 1 || w->osl > big)
        return loom_error_set(err, LOOM_ERR_INVALID, "--osl: expected an output length in [1, %lld] "
                              "tokens, found %lld", (long long)big, (long long)w->osl);
    /* uniform: ±r of the mean, r < 1; log-normal: a coefficient of variation */
    double hi_i = w->isl_dist == LOOM_LEN_LOGNORMAL ? 3 : 1, hi_o = w->osl_dist == LOOM_LEN_LOGNORMAL ? 3 : 1;
    if (!(w->isl_spread >= 0 && w->isl_spread < hi_i) || !(w->osl_spread >= 0 && w->osl_spread < hi_o))
        return loom_error_set(err, LOOM_ERR_INVALID, "length spread: expected a number in [0, %g) "
                              "(uniform: a share of the mean; log-normal: a coefficient of "
                              "variation below 3), found %g / %g", hi_i < hi_o ? hi_i : hi_o,
                              w->isl_spread, w->osl_spread);
    if (w->load == LOOM_LOAD_QPS && !(w->rate > 0 && w->rate < 1e7))
        return loom_error_set(err, LOOM_ERR_INVALID, "--qps: expected a request rate > 0 "
                              "requests/s, found %g", w->rate);
    if (w->load == LOOM_LOAD_CONCURRENCY && (w->concurrency < 1 || w->concurrency > big))
        return loom_error_set(err, LOOM_ERR_INVALID, "--concurrency: expected an integer in [1, "
                              "%lld], found %lld", (long long)big, (long long)w->concurrency);
    if (w->num_requests < 0 || w->num_requests > 100000000)
        return loom_error_set(err, LOOM_ERR_INVALID, "--requests: expected an integer in [1, "
                              "100000000], found %lld", (long long)w->num_requests);
    int64_t need = loom_serve_workload_max_isl(w) + loom_serve_workload_max_osl(w);
    if (max_context > 0 && need > max_context)
        return loom_error_set(err, LOOM_ERR_INVALID,
                              "--isl %lld + --osl %lld: a request needs up to %lld tokens of "
                              "context, beyond the model's %lld (max_position_embeddings)",
                              (long long)w->isl, (long long)w->osl, (long long)need,
                              (long long)max_context);
    return LOOM_OK;
}

int64_t loom_serve_workload_requests(const loom_serve_workload *w)
{
    if (w->num_requests > 0) return w->num_requests;
    int64_t n = 200;
    if (w->load == LOOM_LOAD_CONCURRENCY && 10 * w->concurrency > n) n = 10 * w->concurrency;
    if (w->load == LOOM_LOAD_QPS && 60 * w->rate > n) n = (int64_t)(60 * w->rate);
    return n;
}

void loom_serve_rng_seed(loom_serve_rng *r, uint64_t seed)
{
    r->s = seed ^ 0x9E3779B97F4A7C15ull;
}

static uint64_t next(loom_serve_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double loom_serve_rng_uniform(loom_serve_rng *r)
{
    return ((double)(next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double loom_serve_rng_normal(loom_serve_rng *r)
{
    double u = loom_serve_rng_uniform(r), v = loom_serve_rng_uniform(r);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

int64_t loom_serve_draw_len(loom_serve_rng *r, int64_t mean, loom_len_dist d, double spread)
{
    double x = (double)mean;
    if (d == LOOM_LEN_UNIFORM && spread > 0)
        x = (double)mean * (1 - spread + 2 * spread * loom_serve_rng_uniform(r));
    else if (d == LOOM_LEN_LOGNORMAL && spread > 0) {
        double s2 = log(1 + spread * spread);
        x = exp(log((double)mean) - s2 / 2 + sqrt(s2) * loom_serve_rng_normal(r));
        double cap = (double)mean * (1 + 4 * spread);
        if (x > cap) x = cap;
    }
    int64_t n = (int64_t)llround(x);
    return n < 1 ? 1 : n;
}
