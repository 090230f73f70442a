/*
 * steady.c — steady-state serving estimate (steady.h).
 *
 * Let I and O be the mean prompt and output lengths and B the sequences
 * decoding. In steady state each decode round emits B tokens and, since a
 * sequence lives O rounds, admits B/O new requests, whose I·B/O prompt
 * tokens are spread over the round (continuous batching with chunked
 * prefill). A mixed engine runs one iteration per round:
 *     T(B) = iter(decodes B, context B·(I + O/2), prefill B·I/O tokens,
 *                 causal pairs B/O · I(I+1)/2, sampled B(1 + 1/O));
 * an alternating engine (SGLang) runs a decode iteration and, per admitted
 * request, its share of a prefill batch:
 *     T(B) = iter(decodes B) + B/O · iter(prefill I).
 * The batch is bounded by max_num_seqs, by the KV cache (a sequence holds
 * I + O/2 tokens on average; I + O when the engine reserves the whole output)
 * and by the token budget (B + B·I/O ≤ the iteration budget,
 * loom_serve_iter_budget: max_batched_tokens per pipeline stage).
 *
 * Load → batch.
 *   Poisson rate λ: Little's law on the decode phase, B = λ·O·T(B), solved by
 *     bisection (T grows with B); with no root below the bound the engine
 *     is saturated: B = B_max and the queue grows for the whole run.
 *   C clients: B = min(C, B_max); a client's cycle is TTFT + (O − 1)·T(B).
 *   Offline N requests: B = min(N, B_max); all prompts are prefilled first
 *     at the budget, then rounds drain the rest.
 * The client sees a round after the streaming queue has passed its B
 * tokens (c each, the slower of the server's stream_token_s and the Python
 * client's client_chunk_s): the observed round is max(T(B), B·c), and the
 * engine's token rate is capped at 1/c (sim.c has the two queues).
 * TPOT = ITL = the observed round. TTFT = the residual of the iteration in progress plus
 * the prompt's chunks, ceil(I / (budget − B)) iterations carrying B decodes
 * (one prefill iteration for the alternating engine), plus an M/D/1 wait
 * ρ/(2(1 − ρ)) · S for the prefill server of service S and load ρ = λ·S.
 * vLLM V0 multi-step rounds of k steps (engine.h) pay the host work once:
 * T(B) loses (1 − 1/k) of the iteration's overhead, and a prompt waits for
 * the k-step round in progress (k·T/2 instead of T/2).
 * Cached prompts (the decode instance of a disaggregated deployment,
 * workload prompt_cached): no prefill rides in the rounds, T(B) = iter(decodes
 * B); a request's first token is the next decode iteration, so TTFT = T/2 + T
 * with no prefill queue, and the budget bounds B alone.
 * A finite run of N requests lasts (N − 1)/λ + E2E (rate), N/C cycles
 * (clients), or the fill plus N/B rounds of O (offline); throughput is
 * N·O over it.
 */
#include "costs/serve/steady.h"

#include <math.h>
#include <string.h>

typedef struct {
    const loom_serve_model *m;
    const loom_serve_engine *e;
    double isl, osl;
    bool cached;   /* prompts arrive in the KV cache: decode only */
} ctx_t;

/* One decode round of n whole sequences, prefill amortised (see above). */
static double round_int(const ctx_t *c, int64_t n)
{
    double I = c->isl, O = c->osl, b = (double)n;
    const loom_serve_engine *e = c->e;
    loom_serve_batch d = {.n_decode = n, .decode_ctx = b * (I + O / 2), .n_sampled = n};
    loom_serve_iter bd;
    double t_dec = loom_serve_iter_time(c->m, &d, &bd);
    /* multi-step rounds of k steps pay the host work once */
    if (e->scheduler_steps > 1) t_dec -= bd.overhead_s * (1 - 1.0 / e->scheduler_steps);
    if (c->cached) return t_dec;
    /* P prompt tokens per round, in iterations of q tokens */
    double P = b * I / O;
    double room = (double)loom_serve_iter_budget(c->m) - (e->mixed_batches ? b : 0);
    if (room < 1) room = 1;
    double q = P > I ? P : I;
    if (q > room) q = room;
    /* the chunks of one iteration: a sequence's within one micro-batch's
     * budget (loom_serve_iter_budget), so under pp they spread over the
     * micro-batches */
    double seqs = fmax(ceil(q / I), ceil(q / (double)e->max_batched_tokens));
    loom_serve_batch p = {.n_prefill = (int64_t)llround(q), .prefill_pairs = q * (I + 1) / 2,
                          .prefill_prefix = q < I ? (I - q) / 2 : 0,
                          .n_sampled = (int64_t)ceil(q / I), .n_prefill_seqs = (int64_t)seqs};
    if (e->mixed_batches) {
        p.n_decode = d.n_decode;
        p.decode_ctx = d.decode_ctx;
        p.n_sampled += d.n_sampled;
        return t_dec + P / q * (loom_serve_iter_time(c->m, &p, NULL) - t_dec);
    }
    return t_dec + P / q * loom_serve_iter_time(c->m, &p, NULL);
}

/* The same for a fractional batch: linear between the whole numbers, so
 * that the bisection below sees a continuous function. */
static double round_s(const ctx_t *c, double b)
{
    if (b <= 1) return round_int(c, 1);
    int64_t lo = (int64_t)floor(b);
    double f = b - (double)lo, t = round_int(c, lo);
    return f > 0 ? t + f * (round_int(c, lo + 1) - t) : t;
}

/* The slower of the two serial stream queues (server, client) paces the
 * tokens the client sees; the other only adds latency. */
static double stream_pace_s(const loom_serve_calib *sc)
{
    return sc->stream_token_s > sc->client_chunk_s ? sc->stream_token_s : sc->client_chunk_s;
}

/* The round as the client sees it: the stream passes b tokens a round. */
static double seen_s(const ctx_t *c, double b)
{
    const loom_serve_calib *sc = loom_serve_model_calib(c->m);
    double t = round_s(c, b), st = b * stream_pace_s(sc);
    return st > t ? st : t;
}

/* Iteration that carries b decodes and one prompt chunk of q tokens. */
static double chunk_s(const ctx_t *c, double b, double q, double prefix)
{
    loom_serve_batch d = {0};
    if (c->e->mixed_batches) {
        d.n_decode = (int64_t)llround(b);
        d.decode_ctx = (double)d.n_decode * (c->isl + c->osl / 2);
        d.n_sampled = d.n_decode;
    }
    d.n_prefill = (int64_t)q;
    d.n_prefill_seqs = 1;
    d.prefill_pairs = q * (prefix + (q + 1) / 2);
    d.prefill_prefix = prefix;
    d.n_sampled += 1;
    return loom_serve_iter_time(c->m, &d, NULL);
}

/* Time from a prompt's first scheduled iteration to its first token. */
static double prefill_service_s(const ctx_t *c, double b)
{
    if (c->cached) return round_s(c, b);   /* the next decode iteration */
    double room = (double)loom_serve_iter_budget(c->m) - (c->e->mixed_batches ? b : 0);
    if (room > (double)c->e->max_batched_tokens) room = (double)c->e->max_batched_tokens;
    if (room < 1) room = 1;
    double left = c->isl, prefix = 0, t = 0;
    while (left > 0) {
        double q = left < room ? left : room;
        t += chunk_s(c, b, q, prefix);
        prefix += q;
        left -= q;
    }
    return t;
}

loom_status loom_serve_steady(const loom_serve_model *m, const loom_serve_workload *w,
                              loom_serve_steady_result *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    const loom_serve_shape *sh = loom_serve_model_shape(m);
    const loom_serve_memory *mem = loom_serve_model_memory(m);
    loom_status s = loom_serve_workload_check(w, sh->max_positions, err);
    if (!s && !w->prompt_cached)
        s = loom_serve_engine_check_prompt(loom_serve_model_engine(m),
                                           loom_serve_workload_max_isl(w), err);
    if (s) return s;
    ctx_t c = {m, loom_serve_model_engine(m), (double)w->isl, (double)w->osl, w->prompt_cached};
    const loom_serve_engine *e = c.e;
    double rep = (double)sh->par.replicas;
    double N = ceil((double)loom_serve_workload_requests(w) / rep);
    double I = c.isl, O = c.osl;
    if ((double)mem->kv_capacity_tokens < I + O)
        return loom_error_set(err, LOOM_ERR_INFEASIBLE,
                              "a request of %g + %g tokens does not fit the KV cache of %lld "
                              "tokens", I, O, (long long)mem->kv_capacity_tokens);
    /* the batch bound */
    double per_seq = e->reserve_full_output ? I + O : I + O / 2 + e->decode_reserve_ratio * O / 2;
    double bmax = (double)e->max_num_seqs;
    double kvb = (double)mem->kv_capacity_tokens / per_seq;
    if (kvb < bmax) bmax = kvb;
    double iter_budget = (double)loom_serve_iter_budget(m);
    double budget_b = e->mixed_batches && !c.cached ? iter_budget * O / (O + I) : iter_budget;
    if (budget_b < bmax) bmax = budget_b;
    if (bmax < 1) bmax = 1;
    out->batch_max = bmax;
    double tmax = seen_s(&c, bmax);
    /* the API server: a serial queue of service F per request */
    const loom_serve_calib *sc = loom_serve_model_calib(m);
    double F = sc->request_overhead_s,
           hop = loom_serve_model_latency_s(m);
    double cap = bmax / (O * tmax);
    if (F > 0 && 1 / F < cap) cap = 1 / F;
    out->capacity_rps = cap * rep;

    double b = 0, T = 0, ttft = 0, dur = 0;
    double steps = e->scheduler_steps > 1 ? (double)e->scheduler_steps : 1;
    bool saturated = false;
    loom_serve_metrics *mt = &out->m;
    if (w->load == LOOM_LOAD_QPS) {
        double lam = w->rate / rep;
        if (lam * O * tmax >= bmax || lam * F >= 1) {
            saturated = true;
            b = bmax;
        } else {   /* bisection on f(b) = b − λ·O·T(b), f(0) < 0 < f(bmax) */
            double lo = 0, hi = bmax;
            for (int k = 0; k < 40; k++) {
                double mid = (lo + hi) / 2;
                if (mid - lam * O * seen_s(&c, mid) < 0) lo = mid;
                else hi = mid;
            }
            b = hi;
        }
        T = seen_s(&c, b);
        double S = prefill_service_s(&c, b);
        double rho = c.cached ? 0 : lam * S, rf = lam * F;
        double wait = rho < 0.98 ? rho / (2 * (1 - rho)) * S : 0;
        wait += rf < 0.98 ? rf / (2 * (1 - rf)) * F : 0;
        /* a prompt waits for the decode round in progress: k steps with
         * multi-step scheduling */
        ttft = F + T * steps / 2 + S + wait;
        double e2e = ttft + (O - 1) * T;
        if (saturated) {
            double mu = bmax / (O * T);
            if (F > 0 && 1 / F < mu) mu = 1 / F;
            double extra = (N / 2) * (1 / mu - 1 / lam);   /* mean queueing of the run */
            ttft += extra > 0 ? extra : 0;
            dur = N / mu + e2e;
        } else {
            dur = (N - 1) / lam + e2e;
        }
    } else if (w->load == LOOM_LOAD_CONCURRENCY) {
        double C = ceil((double)w->concurrency / rep);
        b = C < bmax ? C : bmax;
        T = seen_s(&c, b);
        ttft = F + prefill_service_s(&c, b);
        double cycle = ttft + (O - 1) * T;
        if (C > bmax) ttft += (C - bmax) / (bmax / cycle);   /* waiting for a seat */
        double per = C > bmax ? cycle * C / bmax : cycle;     /* a round of C requests */
        if (C * F > per) {   /* the API server is the bottleneck */
            ttft += C * F - per;
            per = C * F;
        }
        dur = ceil(N / C) * per;
    } else {
        b = N < bmax ? N : bmax;
        /* all prompts of the first wave at the budget, then rounds */
        double fill_tokens = b * I, budget = iter_budget;
        double iters = ceil(fill_tokens / budget);
        loom_serve_batch p = {.n_prefill = (int64_t)(fill_tokens / iters),
                              .prefill_pairs = fill_tokens / iters / I * I * (I + 1) / 2,
                              .n_sampled = (int64_t)(b / iters) + 1,
                              .n_prefill_seqs = (int64_t)(b / iters) + 1};
        double fill = c.cached ? 0 : iters * loom_serve_iter_time(m, &p, NULL);
        loom_serve_batch d = {.n_decode = (int64_t)ceil(b), .decode_ctx = ceil(b) * (I + O / 2),
                              .n_sampled = (int64_t)ceil(b)};
        if (N <= bmax) {
            T = loom_serve_iter_time(m, &d, NULL);
            if (b * stream_pace_s(sc) > T) T = b * stream_pace_s(sc);
            ttft = fill / 2 + N * F / 2;
            dur = (fill > N * F ? fill : N * F) + (O - 1) * T;
        } else {
            T = seen_s(&c, b);
            double mu = b / (O * T);
            if (F > 0 && 1 / F < mu) mu = 1 / F;
            dur = fill + (N - b) / mu + (O - 1) * T;
            double later = (N - b) / N;   /* share of requests queued behind the first wave */
            ttft = (1 - later) * fill / 2 + later * (fill + (N - b) / (2 * mu));
        }
    }
    ttft += hop;
    out->batch = b;
    out->round_s = T;
    mt->tpot = (loom_serve_dist){T, T, T, T};
    mt->itl = mt->tpot;
    mt->ttft = (loom_serve_dist){ttft, ttft, ttft, ttft};
    double e2e = ttft + (O - 1) * T;
    mt->e2e = (loom_serve_dist){e2e, e2e, e2e, e2e};
    mt->duration_s = dur;
    mt->completed = (int64_t)(N * rep);
    mt->requests_per_s = dur > 0 ? N / dur * rep : 0;
    mt->output_tokens_per_s = mt->requests_per_s * O;
    mt->input_tokens_per_s = mt->requests_per_s * I;
    mt->mean_running = b;
    mt->kv_util_mean = mem->kv_capacity_tokens > 0
                           ? b * (I + O / 2) / ((double)mem->kv_capacity_tokens)
                           : 0;
    if (mt->kv_util_mean > 1) mt->kv_util_mean = 1;
    mt->kv_util_peak = mt->kv_util_mean;
    mt->saturated = saturated;
    return LOOM_OK;
}
