/*
 * sim.c — the request-level simulator (sim.h).
 *
 * State. Each request carries its lengths, how much of its prompt is in the
 * KV cache (prefilled of prompt; after a preemption the prompt grows by the
 * tokens already produced, which are recomputed), the tokens produced, the
 * KV blocks it holds and its timestamps. The engine holds a FIFO of waiting
 * requests (preempted ones go back to its front), the running set in
 * admission order, and a pool of free KV blocks.
 *
 * An iteration. The policy (engine.h) forms a batch:
 *   mixed (vLLM, TensorRT-LLM): every running sequence's decode token, then
 *     the unfinished prompt chunks of running sequences, then new requests
 *     from the queue, until the token budget (one per pipeline micro-batch,
 *     iter_budget), max_num_seqs or the free blocks run out;
 *   alternating (SGLang): a prefill batch of chunks (continuing prompt
 *     first, then new requests) when one can be admitted, else a decode
 *     batch of every running sequence.
 * A decode that needs a block when none is free preempts the most recently
 * admitted running sequence (possibly itself). Admission under
 * reserve_full_output takes the blocks of the prompt and the whole output at
 * once; under decode_reserve_ratio it leaves room for that share of every
 * running request's remaining output. The iteration lasts
 * loom_serve_iter_time of the batch; then every decode emits a token, every
 * prompt that completed emits its first token, finished requests free their
 * blocks and, under a concurrency load, their client sends the next one.
 *
 * Independent users (engine.h LOOM_CLIENT_USERS). A benchmark starts its N
 * clients together; with fixed lengths every client's request then takes
 * the same time, so they finish, and send again, in the order they were
 * first served, and the queue the start built in front of the prefill is
 * carried from round to round: nothing in the loop spreads it (a client
 * that waits longer also starts decoding later). A benchmark sees that, and
 * its TTFT rises with N. Users do not start together: their first requests
 * are spread at random over one request's duration (the steady-state
 * estimate's end-to-end latency), and the rounds keep that spread. On NIM's
 * guide (Llama-3.3-70B fp8, 2 x H100, 5000 + 500 tokens, AIPerf) the spread
 * start gives TTFT 0.37-0.50 s at 5 clients, 0.49-0.59 at 25 and 0.62-0.71
 * at 50 over seeds 0-3, against the published 0.55, 0.69 and 0.84; the
 * together start 0.65, 1.09 and 1.56. genai-perf sweeps with outputs fixed
 * by ignore_eos (AWS's, the DLI course's) grow at least as fast as the
 * together start.
 *
 * The front end. A request passes the API server's serial queue
 * (request_overhead_s each) and a fixed hop (latency_<engine>_s) before the
 * engine sees it; every output token passes a serial streaming queue
 * (stream_token_s each: detokenise, SSE) and, in a Python benchmark
 * client, a second one in the client's process (client_chunk_s each: read
 * the SSE line, parse its JSON) before the client sees it, and the client's
 * clock is what the metrics use. The
 * engine does not wait for the stream (vLLM V1 and SGLang run the engine in
 * another process), so when it emits tokens faster than 1 / stream_token_s
 * the client falls behind: the regime of the offline "all requests at once"
 * runs with hundreds of streams.
 *
 * Metrics: TTFT, TPOT and E2E per request (sorted for percentiles); ITL
 * gaps into a log-spaced histogram (0.5% bins), since there is one per
 * output token; KV use and running sequences integrated over time.
 */
#include "costs/serve/sim.h"

#include "costs/serve/steady.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double arrival, ready, first, last_tok, finish;   /* ready: out of the API server */
    int64_t isl, osl, prompt, prefilled, generated, blocks;
    bool running;
} req_t;

#define HIST_BINS 4096
#define HIST_LO 1e-6
#define HIST_DECADES 9.0

typedef struct {
    double sum;
    int64_t n;
    int64_t bins[HIST_BINS];
} hist_t;

static void hist_add(hist_t *h, double v, int64_t count)
{
    h->sum += v * (double)count;
    h->n += count;
    int b = v <= HIST_LO ? 0 : (int)(log10(v / HIST_LO) / HIST_DECADES * HIST_BINS);
    if (b < 0) b = 0;
    if (b >= HIST_BINS) b = HIST_BINS - 1;
    h->bins[b] += count;
}

static double hist_q(const hist_t *h, double q)
{
    if (h->n == 0) return 0;
    int64_t target = (int64_t)ceil(q * (double)h->n), acc = 0;
    if (target < 1) target = 1;
    for (int b = 0; b < HIST_BINS; b++) {
        acc += h->bins[b];
        if (acc >= target) return HIST_LO * pow(10, (b + 0.5) * HIST_DECADES / HIST_BINS);
    }
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

loom_serve_dist loom_serve_dist_of(double *v, int64_t n)
{
    loom_serve_dist d = {0};
    if (n <= 0) return d;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    d.mean = s / (double)n;
    const double qs[3] = {0.5, 0.9, 0.99};
    double *out[3] = {&d.p50, &d.p90, &d.p99};
    for (int k = 0; k < 3; k++) {
        double x = qs[k] * (double)(n - 1);
        int64_t i = (int64_t)x;
        double f = x - (double)i;
        *out[k] = i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[n - 1];
    }
    return d;
}

typedef struct {
    const loom_serve_model *m;
    const loom_serve_engine *e;
    bool cached;        /* prompts arrive in the KV cache (workload prompt_cached) */
    req_t *r;
    int64_t n;
    int64_t *wait;      /* ring buffer of request ids */
    int64_t w_head, w_len, w_cap;
    int64_t *run;       /* running ids, admission order */
    int64_t n_run;
    int64_t *sel, *chunk;   /* this iteration: ids and prefill chunk (0 = decode) */
    int64_t n_sel;
    int64_t free_blocks, total_blocks, bs;
    int64_t preemptions;
} engine_t;

static int64_t blocks_for(const engine_t *s, int64_t tokens)
{
    return (tokens + s->bs - 1) / s->bs;
}

static void wait_push_back(engine_t *s, int64_t id)
{
    s->wait[(s->w_head + s->w_len++) % s->w_cap] = id;
}

static void wait_push_front(engine_t *s, int64_t id)
{
    s->w_head = (s->w_head + s->w_cap - 1) % s->w_cap;
    s->wait[s->w_head] = id;
    s->w_len++;
}

static int64_t wait_front(const engine_t *s) { return s->wait[s->w_head]; }

static void wait_pop(engine_t *s)
{
    s->w_head = (s->w_head + 1) % s->w_cap;
    s->w_len--;
}

/* Preempts the last running sequence: its blocks go back, its prompt grows
 * by the tokens it produced (recomputed on readmission). */
static void preempt_last(engine_t *s)
{
    int64_t id = s->run[--s->n_run];
    req_t *q = &s->r[id];
    s->free_blocks += q->blocks;
    q->blocks = 0;
    q->running = false;
    q->prompt = q->isl + q->generated;
    q->prefilled = 0;
    s->preemptions++;
    wait_push_front(s, id);
}

/* KV tokens a request holds (prompt part plus decoded tokens after it). */
static int64_t kv_tokens(const req_t *q)
{
    return q->prefilled < q->prompt ? q->prefilled : q->prompt + (q->generated - (q->prompt - q->isl)) - 1;
}

/* Grows request id's blocks to hold `tokens`, preempting from the back of
 * the running set (never running[keep_upto] and before). false when id
 * itself was preempted or nothing can be freed. */
static bool grow(engine_t *s, int64_t pos, int64_t tokens)
{
    int64_t id = s->run[pos];
    req_t *q = &s->r[id];
    int64_t need = blocks_for(s, tokens) - q->blocks;
    while (need > s->free_blocks) {
        if (s->n_run - 1 == pos) {   /* the last one is this one */
            preempt_last(s);
            return false;
        }
        preempt_last(s);
    }
    if (need > 0) {
        s->free_blocks -= need;
        q->blocks += need;
    }
    return true;
}

/* SGLang's reservation: blocks kept for the running requests' future
 * decode tokens at decode_reserve_ratio. */
static int64_t reserved(const engine_t *s)
{
    if (s->e->decode_reserve_ratio <= 0) return 0;
    double t = 0;
    for (int64_t i = 0; i < s->n_run; i++) {
        const req_t *q = &s->r[s->run[i]];
        t += (double)(q->osl - q->generated) * s->e->decode_reserve_ratio;
    }
    return (int64_t)(t / (double)s->bs);
}

/* Blocks the running prompts still need to finish their prefill. */
static int64_t pending_prefill(const engine_t *s)
{
    int64_t b = 0;
    for (int64_t i = 0; i < s->n_run; i++) {
        const req_t *q = &s->r[s->run[i]];
        if (q->prefilled < q->prompt) b += blocks_for(s, q->prompt) - q->blocks;
    }
    return b > 0 ? b : 0;
}

static int64_t iter_budget(const engine_t *s) { return loom_serve_iter_budget(s->m); }

/* A sequence's prompt chunk this iteration: what is left, within the
 * budget and within one micro-batch's (a sequence lives in one). */
static int64_t chunk_of(const engine_t *s, int64_t left, int64_t budget)
{
    int64_t c = left < budget ? left : budget;
    return c < s->e->max_batched_tokens ? c : s->e->max_batched_tokens;
}

/* Admits from the queue while budget, seats and blocks last. A request is
 * admitted only when its whole prompt fits beside what the running prompts
 * still need (SGLang's PrefillAdder checks the same; without it, chunked
 * prompts that outgrow the pool preempt one another for ever). */
static void admit(engine_t *s, int64_t *budget)
{
    const loom_serve_engine *e = s->e;
    int64_t res = reserved(s) + pending_prefill(s);
    while (s->w_len > 0 && *budget > 0 && s->n_run < e->max_num_seqs) {
        int64_t id = wait_front(s);
        req_t *q = &s->r[id];
        int64_t left = q->prompt - q->prefilled;
        int64_t c = chunk_of(s, left, *budget);
        int64_t tokens = c > 0 ? c : 1;   /* a cached prompt decodes at once */
        bool whole_budget = *budget >= e->max_batched_tokens;
        if (!e->chunked_prefill && c < left && !whole_budget) break;
        int64_t need, total;
        if (e->reserve_full_output) need = total = blocks_for(s, q->prompt + q->osl - q->generated);
        else {
            need = blocks_for(s, q->prefilled + c) - q->blocks;
            total = blocks_for(s, q->prompt) - q->blocks;
        }
        int64_t extra = e->decode_reserve_ratio > 0
                            ? (int64_t)((double)(q->osl - q->generated) * e->decode_reserve_ratio /
                                        (double)s->bs)
                            : 0;
        if (total + res + extra > s->free_blocks && s->n_run > 0) break;
        if (total > s->free_blocks) break;
        wait_pop(s);
        s->free_blocks -= need;
        q->blocks += need;
        res += extra + (total - need);
        q->running = true;
        s->run[s->n_run++] = id;
        s->sel[s->n_sel] = id;
        s->chunk[s->n_sel++] = c;
        *budget -= tokens;
    }
}

/* Forms this iteration's batch into sel/chunk. */
static void schedule(engine_t *s)
{
    const loom_serve_engine *e = s->e;
    int64_t budget = iter_budget(s);
    s->n_sel = 0;
    bool prefill_only = false;
    /* with cached prompts there is no prefill batch to alternate with:
     * admission joins the decodes */
    bool mixed = e->mixed_batches || s->cached;
    if (!mixed) {
        /* SGLang: a prefill batch when a chunk is pending or a request can
         * be admitted */
        bool pending = false;
        for (int64_t i = 0; i < s->n_run && !pending; i++)
            pending = s->r[s->run[i]].prefilled < s->r[s->run[i]].prompt;
        prefill_only = pending || s->w_len > 0;
    }
    if (prefill_only) {
        for (int64_t i = 0; i < s->n_run && budget > 0; i++) {
            req_t *q = &s->r[s->run[i]];
            if (q->prefilled >= q->prompt) continue;
            int64_t left = q->prompt - q->prefilled, c = chunk_of(s, left, budget);
            if (!grow(s, i, q->prefilled + c)) break;
            s->sel[s->n_sel] = s->run[i];
            s->chunk[s->n_sel++] = c;
            budget -= c;
        }
        admit(s, &budget);
        if (s->n_sel > 0) goto keep;
        budget = iter_budget(s);   /* nothing admissible: decode instead */
    }
    /* decodes of every running sequence, then unfinished chunks */
    for (int64_t i = 0; i < s->n_run; i++) {
        req_t *q = &s->r[s->run[i]];
        if (q->prefilled < q->prompt) continue;
        if (budget <= 0) break;
        if (!e->reserve_full_output && !grow(s, i, kv_tokens(q) + 1)) continue;
        s->sel[s->n_sel] = s->run[i];
        s->chunk[s->n_sel++] = 0;
        budget--;
    }
    if (!mixed && s->n_sel > 0) goto keep;
    for (int64_t i = 0; i < s->n_run && budget > 0; i++) {
        req_t *q = &s->r[s->run[i]];
        if (q->prefilled >= q->prompt) continue;
        int64_t left = q->prompt - q->prefilled, c = chunk_of(s, left, budget);
        if (!e->chunked_prefill && c < left) continue;
        if (!e->reserve_full_output && !grow(s, i, q->prefilled + c)) break;
        s->sel[s->n_sel] = s->run[i];
        s->chunk[s->n_sel++] = c;
        budget -= c;
    }
    admit(s, &budget);
keep:;
    /* a preemption may have removed sequences selected earlier */
    int64_t k = 0;
    for (int64_t i = 0; i < s->n_sel; i++)
        if (s->r[s->sel[i]].running) s->sel[k] = s->sel[i], s->chunk[k++] = s->chunk[i];
    s->n_sel = k;
}

static int cmp_arrival(const void *a, const void *b)
{
    double x = ((const req_t *)a)->arrival, y = ((const req_t *)b)->arrival;
    return (x > y) - (x < y);
}

/* Independent users' first requests: at uniform random times over one
 * request's end-to-end latency (the steady-state estimate), in time order
 * (the requests are issued in index order). */
static loom_status spread_start(const loom_serve_model *m, const loom_serve_workload *w,
                                loom_serve_rng *rng, req_t *r, int64_t issued, double *late,
                                loom_error *err)
{
    loom_serve_steady_result est;
    loom_status st = loom_serve_steady(m, w, &est, err);
    if (st) return st;
    double span = est.m.e2e.mean, sum = 0;
    for (int64_t i = 0; i < issued; i++) {
        r[i].arrival = span * loom_serve_rng_uniform(rng);
        sum += r[i].arrival;
    }
    qsort(r, (size_t)issued, sizeof *r, cmp_arrival);
    *late = issued > 0 ? sum / (double)issued - r[0].arrival : 0;
    return LOOM_OK;
}

static loom_status run(const loom_serve_model *m, const loom_serve_workload *w,
                       loom_serve_sim_record *rec, loom_serve_sim_result *out, loom_error *err)
{
    loom_status st = LOOM_OK;
    const loom_serve_memory *mem = loom_serve_model_memory(m);
    engine_t s = {.m = m, .e = loom_serve_model_engine(m), .cached = w->prompt_cached};
    s.bs = s.e->block_size;
    s.total_blocks = s.free_blocks = mem->kv_capacity_tokens / s.bs;
    s.n = loom_serve_workload_requests(w);
    int64_t n = s.n;
    s.r = calloc((size_t)n, sizeof *s.r);
    s.wait = malloc((size_t)(n + 1) * sizeof *s.wait);
    s.run = malloc((size_t)(n + 1) * sizeof *s.run);
    s.sel = malloc((size_t)(n + 1) * sizeof *s.sel);
    s.chunk = malloc((size_t)(n + 1) * sizeof *s.chunk);
    double *ttft = malloc((size_t)n * sizeof *ttft), *tpot = malloc((size_t)n * sizeof *tpot);
    double *e2e = malloc((size_t)n * sizeof *e2e);
    hist_t *itl = calloc(1, sizeof *itl);
    s.w_cap = n + 1;
    if (!s.r || !s.wait || !s.run || !s.sel || !s.chunk || !ttft || !tpot || !e2e || !itl) {
        st = loom_error_set(err, LOOM_ERR_NOMEM, "serving simulator: out of memory (%lld requests)",
                            (long long)n);
        goto done;
    }
    loom_serve_rng rng;
    loom_serve_rng_seed(&rng, w->seed);
    double t = 0;
    for (int64_t i = 0; i < n; i++) {
        req_t *q = &s.r[i];
        q->isl = loom_serve_draw_len(&rng, w->isl, w->isl_dist, w->isl_spread);
        q->osl = loom_serve_draw_len(&rng, w->osl, w->osl_dist, w->osl_spread);
        q->prompt = q->isl;
        if (w->prompt_cached) q->prefilled = q->prompt;
        if (w->load == LOOM_LOAD_QPS) {
            if (i > 0) t += -log(loom_serve_rng_uniform(&rng)) / w->rate;
            q->arrival = t;
        }
        if (!w->prompt_cached && (st = loom_serve_engine_check_prompt(s.e, q->prompt, err)))
            goto done;
        int64_t need = blocks_for(&s, q->isl + q->osl);
        if (need > s.total_blocks) {
            st = loom_error_set(err, LOOM_ERR_INFEASIBLE,
                                "a request of %lld + %lld tokens needs %lld KV blocks, but the "
                                "instance holds %lld (%lld tokens)",
                                (long long)q->isl, (long long)q->osl, (long long)need,
                                (long long)s.total_blocks, (long long)mem->kv_capacity_tokens);
            goto done;
        }
    }
    /* issued requests: all (QPS, offline) or one per client; each passes
     * the API server, one request at a time, before the engine sees it */
    int64_t issued = n, next = 0, done_n = 0, iters = 0;
    if (w->load == LOOM_LOAD_CONCURRENCY) issued = w->concurrency < n ? w->concurrency : n;
    double late = 0;   /* users: how long after the first one the others come, on average */
    if (w->load == LOOM_LOAD_CONCURRENCY && loom_serve_model_client(m) == LOOM_CLIENT_USERS &&
        (st = spread_start(m, w, &rng, s.r, issued, &late, err)))
        goto done;
    const loom_serve_calib *sc = loom_serve_model_calib(m);
    const double front_s = sc->request_overhead_s,
                 hop_s = loom_serve_model_latency_s(m);
    const double stream_s = sc->stream_token_s, client_s = sc->client_chunk_s;
    double front_free = 0, stream_free = 0, client_free = 0;
    for (int64_t i = 0; i < issued; i++) {
        double start = s.r[i].arrival > front_free ? s.r[i].arrival : front_free;
        front_free = start + front_s;
        s.r[i].ready = front_free + hop_s;
    }
    t = 0;
    double busy_kv = 0, run_int = 0, kv_peak = 0, out_tokens = 0, in_tokens = 0, last_seen = 0;
    int64_t stride = 1;
    out->n_timeline = 0;
    while (done_n < n) {
        while (next < issued && s.r[next].ready <= t) wait_push_back(&s, next++);
        if (s.n_run == 0 && s.w_len == 0) {
            if (next >= issued) break;   /* cannot happen: completions issue more */
            t = s.r[next].ready;
            continue;
        }
        schedule(&s);
        if (s.n_sel == 0) {
            if (next < issued && s.n_run == 0) {
                t = s.r[next].ready > t ? s.r[next].ready : t;
                continue;
            }
            st = loom_error_set(err, LOOM_ERR_INFEASIBLE,
                                "serving simulator: the engine cannot schedule any request (KV "
                                "cache of %lld tokens too small for the batch)",
                                (long long)mem->kv_capacity_tokens);
            goto done;
        }
        loom_serve_batch b = {0};
        for (int64_t i = 0; i < s.n_sel; i++) {
            const req_t *q = &s.r[s.sel[i]];
            int64_t c = s.chunk[i];
            if (c == 0) {
                b.n_decode++;
                b.decode_ctx += (double)kv_tokens(q) + 1;
                b.n_sampled++;
            } else {
                b.n_prefill += c;
                b.n_prefill_seqs++;
                b.prefill_pairs += (double)c * ((double)q->prefilled + ((double)c + 1) / 2);
                b.prefill_prefix += (double)q->prefilled;
                if (q->prefilled + c == q->prompt) b.n_sampled++;
            }
        }
        loom_serve_iter bd;
        double dt = loom_serve_iter_time(m, &b, &bd);
        /* vLLM V0 multi-step: a decode-only batch runs `steps` forward
         * passes, the host work (scheduling, input preparation) paid once;
         * every sequence keeps its seat to the end of the round, and each
         * step's tokens need their KV slots up front (lookahead slots) — a
         * round those do not fit runs one step */
        int64_t steps = 1;
        if (s.e->scheduler_steps > 1 && b.n_prefill == 0) {
            int64_t k = s.e->scheduler_steps, need = 0;
            for (int64_t i = 0; i < s.n_sel; i++) {
                const req_t *q = &s.r[s.sel[i]];
                need += blocks_for(&s, kv_tokens(q) + k) - q->blocks;
            }
            if (need <= s.free_blocks) {
                steps = k;
                for (int64_t i = 0; i < s.n_sel; i++) {
                    req_t *q = &s.r[s.sel[i]];
                    int64_t more = blocks_for(&s, kv_tokens(q) + k) - q->blocks;
                    if (more > 0) s.free_blocks -= more, q->blocks += more;
                }
                for (int64_t j = 1; j < steps; j++) {
                    b.decode_ctx += (double)b.n_decode;
                    dt += loom_serve_iter_time(m, &b, &bd) - bd.overhead_s;
                }
            }
        }
        double used = s.total_blocks > 0
                          ? (double)(s.total_blocks - s.free_blocks) / (double)s.total_blocks
                          : 0;
        busy_kv += used * dt;
        run_int += (double)s.n_run * dt;
        if (used > kv_peak) kv_peak = used;
        if (iters % stride == 0) {
            if (out->n_timeline == LOOM_SERVE_TIMELINE_MAX) {
                for (int32_t i = 0; i < LOOM_SERVE_TIMELINE_MAX / 2; i++) {
                    out->timeline_t_s[i] = out->timeline_t_s[2 * i];
                    out->timeline_kv[i] = out->timeline_kv[2 * i];
                }
                out->n_timeline = LOOM_SERVE_TIMELINE_MAX / 2;
                stride *= 2;
            }
            if (iters % stride == 0) {
                out->timeline_t_s[out->n_timeline] = t;
                out->timeline_kv[out->n_timeline++] = used;
            }
        }
        t += dt;
        iters += steps;
        in_tokens += (double)b.n_prefill;
        for (int64_t i = 0; i < s.n_sel; i++) {
            req_t *q = &s.r[s.sel[i]];
            int64_t c = s.chunk[i];
            if (c > 0) {
                q->prefilled += c;
                if (q->prefilled < q->prompt) continue;
            }
            /* a multi-step round's tokens reach the client as one chunk */
            int64_t gen = q->osl - q->generated < steps ? q->osl - q->generated : steps;
            q->generated += gen;
            out_tokens += (double)gen;
            /* the client sees the token when the streaming queue has
             * passed it on (frontend: calib.h stream_token_s) */
            stream_free = (t > stream_free ? t : stream_free) + stream_s;
            /* then the benchmark client's own serial parse (client_chunk_s) */
            client_free = (stream_free > client_free ? stream_free : client_free) + client_s;
            double seen = client_free;
            if (q->generated == 1) q->first = seen;
            else hist_add(itl, seen - q->last_tok, 1);
            q->last_tok = seen;
            if (seen > last_seen) last_seen = seen;
            if (q->generated < q->osl) continue;
            q->finish = seen;
            q->running = false;   /* finished: removed below */
            s.free_blocks += q->blocks;
            q->blocks = 0;
            int64_t id = s.sel[i];
            ttft[done_n] = q->first - q->arrival;
            e2e[done_n] = q->finish - q->arrival;
            tpot[done_n] = q->osl > 1 ? (q->finish - q->first) / (double)(q->osl - 1) : 0;
            if (rec && id < rec->cap) {
                rec->ttft_s[id] = ttft[done_n];
                rec->tpot_s[id] = tpot[done_n];
            }
            done_n++;
            if (w->load == LOOM_LOAD_CONCURRENCY && issued < n) {
                req_t *nq = &s.r[issued++];
                nq->arrival = seen;
                front_free = (seen > front_free ? seen : front_free) + front_s;
                nq->ready = front_free + hop_s;
            }
        }
        int64_t k = 0;
        for (int64_t i = 0; i < s.n_run; i++)
            if (s.r[s.run[i]].running) s.run[k++] = s.run[i];
        s.n_run = k;
    }
    /* while users arrive, some are not in yet: the rates count the run from
     * the mean of their first arrivals (the client-time they were absent,
     * over the clients) */
    double start = s.r[0].arrival + late, dur = (last_seen > t ? last_seen : t) - start;
    loom_serve_metrics *mt = &out->m;
    memset(mt, 0, sizeof *mt);
    mt->completed = done_n;
    mt->duration_s = dur;
    mt->requests_per_s = dur > 0 ? (double)done_n / dur : 0;
    mt->output_tokens_per_s = dur > 0 ? out_tokens / dur : 0;
    mt->input_tokens_per_s = dur > 0 ? in_tokens / dur : 0;
    mt->ttft = loom_serve_dist_of(ttft, done_n);
    mt->e2e = loom_serve_dist_of(e2e, done_n);
    mt->tpot = loom_serve_dist_of(tpot, done_n);
    mt->itl.mean = itl->n ? itl->sum / (double)itl->n : 0;
    mt->itl.p50 = hist_q(itl, 0.5);
    mt->itl.p90 = hist_q(itl, 0.9);
    mt->itl.p99 = hist_q(itl, 0.99);
    mt->kv_util_mean = dur > 0 ? busy_kv / dur : 0;
    mt->kv_util_peak = kv_peak;
    mt->mean_running = dur > 0 ? run_int / dur : 0;
    mt->preemptions = s.preemptions;
    mt->saturated = w->load == LOOM_LOAD_QPS && mt->requests_per_s < 0.95 * w->rate &&
                    mt->ttft.p50 > 10 * (mt->tpot.mean > 0 ? mt->tpot.mean : 1e-3) * 10;
    out->iterations = iters;
    if (rec) rec->n = n < rec->cap ? n : rec->cap;
done:
    free(s.r);
    free(s.wait);
    free(s.run);
    free(s.sel);
    free(s.chunk);
    free(ttft);
    free(tpot);
    free(e2e);
    free(itl);
    return st;
}

loom_status loom_serve_simulate(const loom_serve_model *m, const loom_serve_workload *w,
                                loom_serve_sim_result *out, loom_error *err)
{
    return loom_serve_simulate_record(m, w, NULL, out, err);
}

loom_status loom_serve_simulate_record(const loom_serve_model *m, const loom_serve_workload *w,
                                       loom_serve_sim_record *rec, loom_serve_sim_result *out,
                                       loom_error *err)
{
    memset(out, 0, sizeof *out);
    if (rec) rec->n = 0;
    const loom_serve_shape *sh = loom_serve_model_shape(m);
    loom_status s = loom_serve_workload_check(w, sh->max_positions, err);
    if (s) return s;
    /* one replica's share of the load */
    int64_t rep = sh->par.replicas;
    loom_serve_workload one = *w;
    one.num_requests = (loom_serve_workload_requests(w) + rep - 1) / rep;
    if (w->load == LOOM_LOAD_QPS) one.rate = w->rate / (double)rep;
    if (w->load == LOOM_LOAD_CONCURRENCY) one.concurrency = (w->concurrency + rep - 1) / rep;
    if ((s = run(m, &one, rec, out, err))) return s;
    out->m.requests_per_s *= (double)rep;
    out->m.output_tokens_per_s *= (double)rep;
    out->m.input_tokens_per_s *= (double)rep;
    out->m.completed *= rep;
    return LOOM_OK;
}
