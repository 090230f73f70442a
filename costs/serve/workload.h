/*
 * workload.h — what a serving benchmark asks of an engine, and what it
 * measures (docs/design.md §11 "Workload → metrics").
 *
 * A workload is prompt (ISL) and output (OSL) lengths — fixed, uniform
 * around the mean (vLLM's benchmark "random" dataset with a range ratio) or
 * log-normal (chat traces such as ShareGPT) — and a load: a Poisson request
 * rate, a fixed number of clients each sending its next request when the
 * last one finishes (concurrency), or every request at time zero (offline,
 * and a static batch, which is offline with as many requests as the batch).
 * A workload can also be the decode half of a prefill/decode-disaggregated
 * deployment (prompt_cached): every request arrives with its prompt's KV
 * cache already transferred from a prefill instance, so the engine only
 * decodes (DistServe, Zhong et al., OSDI'24; vLLM's and SGLang's P/D
 * disaggregation run the decode instance this way).
 *
 * Metrics follow vLLM's benchmark_serving.py, which SGLang's bench_serving
 * and TensorRT-LLM's benchmarks copy:
 *   TTFT   arrival to first output token
 *   TPOT   per request (e2e − TTFT) / (output tokens − 1), then over requests
 *   ITL    every gap between consecutive output tokens, pooled
 *   E2E    arrival to last token
 *   output tokens/s and requests/s over the run (first arrival to last
 *   completion).
 *
 * Units: tokens, requests/s, seconds.
 */
#ifndef LOOM_SERVE_WORKLOAD_H
#define LOOM_SERVE_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>
#include "base/error.h"

typedef enum {
    LOOM_LEN_FIXED,
    LOOM_LEN_UNIFORM,     /* uniform on [L(1-r), L(1+r)] */
    LOOM_LEN_LOGNORMAL,   /* mean L, coefficient of variation r */
} loom_len_dist;

typedef enum {
    LOOM_LOAD_QPS,          /* Poisson arrivals at `rate` requests/s */
    LOOM_LOAD_CONCURRENCY,  /* `concurrency` closed-loop clients */
    LOOM_LOAD_OFFLINE,      /* all requests at t = 0 */
} loom_load_kind;

typedef struct {
    int64_t isl, osl;             /* mean prompt and output tokens */
    loom_len_dist isl_dist, osl_dist;
    double isl_spread, osl_spread;   /* r of the distribution (0 = fixed) */
    loom_load_kind load;
    double rate;                  /* QPS: requests/s */
    int64_t concurrency;          /* CONCURRENCY: clients */
    int64_t num_requests;         /* requests in the run (0 = a default: 10 × concurrency,
                                     at least 200; QPS: 60 s of arrivals, at least 200) */
    uint64_t seed;
    bool prompt_cached;           /* the prompt's KV arrives with the request: no prefill;
                                     TTFT is arrival to the first decoded token */
} loom_serve_workload;

/* isl 1024, osl 128, fixed lengths, offline, 0 requests (default), seed 0. */
void loom_serve_workload_init(loom_serve_workload *w);

/* Range checks; errors name the option at fault ("--qps: expected a rate > 0,
 * found 0"). max_context: the model's context length (0 = unchecked): prompt +
 * output (at their largest) must fit in it. */
loom_status loom_serve_workload_check(const loom_serve_workload *w, int64_t max_context,
                                      loom_error *err);

/* The number of requests the run will use (num_requests, or its default). */
int64_t loom_serve_workload_requests(const loom_serve_workload *w);

/* Largest prompt and output a request can have. */
int64_t loom_serve_workload_max_isl(const loom_serve_workload *w);
int64_t loom_serve_workload_max_osl(const loom_serve_workload *w);

typedef struct {
    double mean, p50, p90, p99;
} loom_serve_dist;

typedef struct {
    loom_serve_dist ttft, tpot, itl, e2e;   /* seconds */
    double requests_per_s, output_tokens_per_s, input_tokens_per_s;
    double duration_s;                       /* first arrival to last completion */
    int64_t completed;
    double mean_running;                     /* sequences decoding, time average */
    double kv_util_mean, kv_util_peak;       /* share of KV blocks in use */
    int64_t preemptions;
    bool saturated;                          /* the offered rate exceeds capacity */
} loom_serve_metrics;

/* A deterministic generator (splitmix64) for arrivals and lengths. */
typedef struct {
    uint64_t s;
} loom_serve_rng;

void loom_serve_rng_seed(loom_serve_rng *r, uint64_t seed);
double loom_serve_rng_uniform(loom_serve_rng *r);   /* in (0, 1) */
double loom_serve_rng_normal(loom_serve_rng *r);

/* One length drawn from (mean, dist, spread), at least 1. */
int64_t loom_serve_draw_len(loom_serve_rng *r, int64_t mean, loom_len_dist d, double spread);

#endif
