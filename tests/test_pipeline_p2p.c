/*
 * test_pipeline_p2p.c — the exposed stage-to-stage transfers of
 * costs/pipeline.c against an event simulation of Megatron-Core's schedules
 * (megatron/core/pipeline_parallel/schedules.py and p2p_communication.py),
 * and a hand computation for a small interleaved schedule.
 *
 * The simulation runs every rank's program as Megatron issues it: compute
 * (one chunk's forward or backward), sends and receives posted on a channel
 * per neighbour and direction, and waits. The n-th send on a channel pairs
 * with its n-th receive; the transfer starts when both are posted and takes
 * p. A wait holds the rank until the awaited transfers are done. Programs:
 *
 *   1F1B (forward_backward_pipelining_without_interleaving): every exchange
 *   is waited on at once (recv_forward, send_forward_recv_backward, ...).
 *
 *   interleaved, overlap_p2p_comm (Megatron's default with v > 1): warm-up
 *   forwards and cool-down backwards exchange blocking
 *   (send_forward_recv_forward / send_backward_recv_backward without
 *   overlap); the last warm-up posts the first backward's receive; each
 *   steady iteration waits for its forward's receive, runs the forward,
 *   posts its send and the next forward's receive, waits for the backward's
 *   receive, runs the backward, posts its send and the next backward's
 *   receive; a send's handle is waited one iteration later.
 *
 *   interleaved, batch_p2p_comm (--no-overlap-p2p-communication): warm-up
 *   as above, each steady iteration one forward and one backward followed
 *   by one blocking exchange of all four tensors.
 *
 * The micro-batch order is Megatron's schedule table (groups of S
 * micro-batches per chunk), warm-up (S-r-1)·2 + (v-1)·S forwards on rank r,
 * and recv_tensor_from_previous_stage decides which iterations receive.
 */
#include "check.h"
#include "costs/pipeline.h"

#define MAXS 8
#define MAXOPS 8192
#define MAXMSG 2048
#define NONE (-1)

enum { SCHED_1F1B, SCHED_OVERLAP, SCHED_BATCHED };
typedef enum { OP_COMPUTE, OP_SEND, OP_RECV, OP_WAIT, OP_RECV_Q, OP_SEND_H, OP_WAIT_Q, OP_END } opkind;
typedef struct {
    opkind k;
    double dur;   /* OP_COMPUTE */
    int ch;       /* channel, or NONE (OP_SEND_H with nothing to send) */
    int q;        /* OP_RECV_Q / OP_WAIT_Q: 0 forward, 1 backward; OP_SEND_H: 0 next, 1 prev */
} op;

typedef struct {
    int S, M, v, T, sched;
    int chunk_of[MAXMSG];  /* schedule table: forward chunk of virtual micro-batch k */
    op prog[MAXS][MAXOPS];
    int n[MAXS];
} sched;

/* channels: activations rank r -> r+1 are r, gradients r -> r-1 are S + r */
static int act(const sched *s, int r) { return (r + s->S) % s->S; }
static int grad(const sched *s, int r) { return s->S + (r + s->S) % s->S; }

static void emit(sched *s, int r, op o)
{
    if (s->n[r] < MAXOPS) s->prog[r][s->n[r]++] = o;
}

static void compute(sched *s, int r, double d) { emit(s, r, (op){OP_COMPUTE, d, NONE, 0}); }

/* One blocking exchange: post the sends and receives given (NONE = absent),
 * wait for them all. */
static void exchange(sched *s, int r, int send1, int send2, int recv1, int recv2)
{
    int posted = 0;
    int sends[2] = {send1, send2}, recvs[2] = {recv1, recv2};
    for (int i = 0; i < 2; i++)
        if (sends[i] != NONE) emit(s, r, (op){OP_SEND, 0, sends[i], 0}), posted++;
    for (int i = 0; i < 2; i++)
        if (recvs[i] != NONE) emit(s, r, (op){OP_RECV, 0, recvs[i], 0}), posted++;
    if (posted) emit(s, r, (op){OP_WAIT, 0, NONE, 0});
}

static int chunk(const sched *s, int k, bool fwd)
{
    int c = s->chunk_of[k % s->T];
    return fwd ? c : s->v - 1 - c;
}

/* recv_tensor_from_previous_stage: whether rank r receives in iteration k */
static bool receives(const sched *s, int r, int k, bool fwd)
{
    bool lead = fwd ? r == 0 : r == s->S - 1;
    if (!lead) return true;
    if (k < s->S - 1) return false;
    return chunk(s, k - (s->S - 1), fwd) != (fwd ? s->v - 1 : 0);
}

static void build_1f1b(sched *s, int r, const double *f, const double *b)
{
    int S = s->S, M = s->M, w = S - r - 1 < M ? S - r - 1 : M, R = M - w;
    int prev_a = r > 0 ? act(s, r - 1) : NONE, next_g = r < S - 1 ? grad(s, r + 1) : NONE;
    int my_a = r < S - 1 ? act(s, r) : NONE, my_g = r > 0 ? grad(s, r) : NONE;
    for (int i = 0; i < w; i++) {
        exchange(s, r, NONE, NONE, prev_a, NONE);
        compute(s, r, f[r]);
        exchange(s, r, my_a, NONE, NONE, NONE);
    }
    if (R) exchange(s, r, NONE, NONE, prev_a, NONE);
    for (int i = 0; i < R; i++) {
        compute(s, r, f[r]);
        exchange(s, r, my_a, NONE, next_g, NONE);
        compute(s, r, b[r]);
        exchange(s, r, my_g, NONE, i == R - 1 ? NONE : prev_a, NONE);
    }
    for (int i = 0; i < w; i++) {
        exchange(s, r, NONE, NONE, next_g, NONE);
        compute(s, r, b[r]);
        exchange(s, r, my_g, NONE, NONE, NONE);
    }
}

static void build_interleaved(sched *s, int r, const double *f, const double *b)
{
    int S = s->S, v = s->v, T = s->T;
    int w = (S - r - 1) * 2 + (v - 1) * S;
    bool all_warm = w >= T;
    if (all_warm) w = T;
    int R = T - w, prev_a = act(s, r - 1), next_g = grad(s, r + 1);
    bool overlap = s->sched == SCHED_OVERLAP;
    if (r != 0) exchange(s, r, NONE, NONE, prev_a, NONE);
    for (int k = 0; k < w; k++) {
        compute(s, r, f[r]);
        bool rp = receives(s, r, k, true) && k != T - 1;
        bool out = !(chunk(s, k, true) == v - 1 && r == S - 1);
        bool last = k == w - 1 && !all_warm;
        int rn = r != S - 1 ? next_g : NONE;
        if (!overlap && last)   /* send_forward_backward_recv_forward_backward */
            exchange(s, r, out ? act(s, r) : NONE, NONE, rp ? prev_a : NONE, rn);
        else exchange(s, r, out ? act(s, r) : NONE, NONE, rp ? prev_a : NONE, NONE);
        if (overlap && last && rn != NONE) emit(s, r, (op){OP_RECV_Q, 0, rn, 1});
    }
    for (int i = 0; i < R; i++) {
        int fk = w + i, bk = i;
        bool out = !(chunk(s, fk, true) == v - 1 && r == S - 1);
        bool gout = !(chunk(s, bk, false) == 0 && r == 0);
        bool rp = receives(s, r, fk, true) && i != R - 1, rn = receives(s, r, bk, false);
        if (!overlap) {
            compute(s, r, f[r]);
            compute(s, r, b[r]);
            exchange(s, r, out ? act(s, r) : NONE, gout ? grad(s, r) : NONE, rp ? prev_a : NONE,
                     rn ? next_g : NONE);
            continue;
        }
        if (!(chunk(s, fk, true) == 0 && r == 0)) emit(s, r, (op){OP_WAIT_Q, 0, NONE, 0});
        compute(s, r, f[r]);
        emit(s, r, (op){OP_SEND_H, 0, out ? act(s, r) : NONE, 0});
        if (rp) emit(s, r, (op){OP_RECV_Q, 0, prev_a, 0});
        if (!(chunk(s, bk, false) == v - 1 && r == S - 1)) emit(s, r, (op){OP_WAIT_Q, 0, NONE, 1});
        compute(s, r, b[r]);
        emit(s, r, (op){OP_SEND_H, 0, gout ? grad(s, r) : NONE, 1});
        if (rn) emit(s, r, (op){OP_RECV_Q, 0, next_g, 1});
    }
    if (all_warm && r != S - 1) exchange(s, r, NONE, NONE, next_g, NONE);
    for (int k = R; k < T; k++) {
        if (overlap && !(chunk(s, k, false) == v - 1 && r == S - 1) && k != 0)
            emit(s, r, (op){OP_WAIT_Q, 0, NONE, 1});
        bool rn = receives(s, r, k, false) && k != T - 1;
        compute(s, r, b[r]);
        bool gout = !(chunk(s, k, false) == 0 && r == 0);
        exchange(s, r, gout ? grad(s, r) : NONE, NONE, rn ? next_g : NONE, NONE);
    }
}

/* Makespan of schedule `kind` with per-rank chunk forward f[r], backward
 * b[r] and transfer p; -1 on a deadlock (a schedule bug). */
static double simulate(int kind, int S, int M, int v, const double *f, const double *b, double p)
{
    static sched s;
    static double send_t[2 * MAXS][MAXMSG], recv_t[2 * MAXS][MAXMSG];
    int ns[2 * MAXS] = {0}, nr[2 * MAXS] = {0};
    memset(s.n, 0, sizeof s.n);
    s.S = S, s.M = M, s.v = kind == SCHED_1F1B ? 1 : v, s.T = M * s.v, s.sched = kind;
    for (int g = 0, k = 0; g < M; g += S) {   /* get_schedule_table */
        int hi = g + S >= M ? M : g + S;
        for (int c = 0; c < s.v; c++)
            for (int j = g; j < hi; j++) s.chunk_of[k++] = c;
    }
    for (int r = 0; r < S; r++) {
        if (kind == SCHED_1F1B) build_1f1b(&s, r, f, b);
        else build_interleaved(&s, r, f, b);
        emit(&s, r, (op){OP_END, 0, NONE, 0});
    }
    double clock[MAXS] = {0};
    int pc[MAXS] = {0}, pend[MAXS][4], npend[MAXS] = {0};
    int queue[MAXS][2][64], qhead[MAXS][2] = {{0}}, qtail[MAXS][2] = {{0}};
    int hsend[MAXS][2];
    for (int r = 0; r < S; r++) hsend[r][0] = hsend[r][1] = NONE;
/* completion of handle h (channel · MAXMSG + index), or -1 if not yet paired */
#define DONE(h) ((h) % MAXMSG < ns[(h) / MAXMSG] && (h) % MAXMSG < nr[(h) / MAXMSG]      \
                     ? fmax(send_t[(h) / MAXMSG][(h) % MAXMSG],                           \
                            recv_t[(h) / MAXMSG][(h) % MAXMSG]) + p                       \
                     : -1)
    for (bool progress = true; progress;) {
        progress = false;
        for (int r = 0; r < S; r++) {
            for (; pc[r] < s.n[r]; pc[r]++, progress = true) {
                const op *o = &s.prog[r][pc[r]];
                if (o->k == OP_COMPUTE) clock[r] += o->dur;
                else if (o->k == OP_SEND) {
                    pend[r][npend[r]++] = o->ch * MAXMSG + ns[o->ch];
                    send_t[o->ch][ns[o->ch]++] = clock[r];
                } else if (o->k == OP_RECV || o->k == OP_RECV_Q) {
                    int h = o->ch * MAXMSG + nr[o->ch];
                    recv_t[o->ch][nr[o->ch]++] = clock[r];
                    if (o->k == OP_RECV) pend[r][npend[r]++] = h;
                    else queue[r][o->q][qtail[r][o->q]++ % 64] = h;
                } else if (o->k == OP_WAIT) {
                    double t = clock[r];
                    bool known = true;
                    for (int i = 0; i < npend[r]; i++) {
                        double d = DONE(pend[r][i]);
                        if (d < 0) known = false;
                        t = fmax(t, d);
                    }
                    if (!known) break;
                    clock[r] = t, npend[r] = 0;
                } else if (o->k == OP_SEND_H) {
                    /* post the new send, then wait for the previous one */
                    int old = hsend[r][o->q];
                    double d = old == NONE ? clock[r] : DONE(old);
                    if (d < 0) break;
                    int h = NONE;
                    if (o->ch != NONE) {
                        h = o->ch * MAXMSG + ns[o->ch];
                        send_t[o->ch][ns[o->ch]++] = clock[r];
                    }
                    clock[r] = fmax(clock[r], d);
                    hsend[r][o->q] = h;
                } else if (o->k == OP_WAIT_Q) {
                    if (qhead[r][o->q] == qtail[r][o->q]) continue;
                    double d = DONE(queue[r][o->q][qhead[r][o->q] % 64]);
                    if (d < 0) break;
                    clock[r] = fmax(clock[r], d);
                    qhead[r][o->q]++;
                } else if (o->k == OP_END) {
                    double t = clock[r];
                    bool known = true;
                    for (int i = 0; i < 2; i++) {
                        if (hsend[r][i] == NONE) continue;
                        double d = DONE(hsend[r][i]);
                        if (d < 0) known = false;
                        t = fmax(t, d);
                    }
                    if (!known) break;
                    clock[r] = t;
                }
            }
        }
    }
#undef DONE
    double end = 0;
    for (int r = 0; r < S; r++) {
        if (pc[r] < s.n[r]) return -1;
        end = fmax(end, clock[r]);
    }
    return end;
}

/* loom's step for per-rank chunk times f, b (stage time v·(f + b)). */
static loom_pipeline_out model(int S, int M, int v, const double *f, const double *b, double p,
                               bool overlap)
{
    double t[MAXS], bw[MAXS];
    for (int r = 0; r < S; r++) t[r] = v * (f[r] + b[r]), bw[r] = v * b[r];
    loom_pipeline_in in = {.stages = S, .microbatches = M, .vpp = v, .stage_s = t, .bwd_s = bw,
                           .p2p_s = p, .overlap_p2p = overlap};
    loom_pipeline_out o;
    loom_error e;
    CHECK_INT_EQ(loom_pipeline_step(&in, &o, &e), LOOM_OK);
    return o;
}

/*
 * By hand: S = 2 ranks, v = 2 chunks, M = 2 micro-batches, a chunk's
 * forward 1 s and backward 2 s, one transfer p = 0.25 s. Virtual
 * micro-batches 0..3 are (chunk 0, mb 0), (0, 1), (1, 0), (1, 1). Rank 0
 * warms up with all four forwards ((2-0-1)·2 + 1·2 = 4), rank 1 with two.
 *   t=0-1     r0 F(0,0), then its send; r1's receive waits since 0: the
 *             transfer runs 1-1.25 and both ranks go on at 1.25.
 *   t=1.25    r0 F(0,1) to 2.25;  r1 F(0,0) 1.25-2.25; both exchange at 2.25
 *             (r0 -> r1: (0,1); r1 -> r0: (0,0) for chunk 1): done 2.5.
 *   t=2.5     r0 F(1,0) to 3.5;  r1 F(0,1) to 3.5; exchange done 3.75.
 *   t=3.75    r0 F(1,1) to 4.75, its send arrives at 5.0; r1 (steady)
 *             F(1,0) 3.75-4.75, B(1,0) 4.75-6.75, sends its gradient.
 *   r0's cool-down waits for that gradient: 6.75 + 0.25 = 7.0; B(1,0)
 *             7-9 while r1 runs F(1,1) 6.75-7.75 (its input came at 5.0),
 *             B(1,1) 7.75-9.75 and sends.
 *   r0 exchanges at 9 (gradient to r1's chunk 0, receives B(1,1)'s): 10.0.
 *   r1 B(0,0) 10-12; r0 B(1,1) 10-12; exchange done 12.25.
 *   r1 B(0,1) 12.25-14.25, sends: 14.5; r0 B(0,0) 12.25-14.25, waits to
 *             14.5, B(0,1) 14.5-16.5.
 * Step 16.5 s. Without transfers the schedule takes M·t + (S-1)·t/v =
 * 2·6 + 6/2 = 15 s, so 1.5 s = 6 transfers are exposed: the S·v - 1 = 3
 * chunk boundaries the first micro-batch crosses filling the pipeline, and
 * the 3 the last one crosses draining it; 2(S·v - 1)·p. The 1F1B charge,
 * every transfer of every chunk, would be 2(v·M + S - 1)·p = 2.5 s.
 */
static void test_hand_computed(void)
{
    const double f[2] = {1, 1}, b[2] = {2, 2};
    CHECK_NEAR_REL(simulate(SCHED_OVERLAP, 2, 2, 2, f, b, 0), 15.0, 1e-12);
    CHECK_NEAR_REL(simulate(SCHED_OVERLAP, 2, 2, 2, f, b, 0.25), 16.5, 1e-12);
    loom_pipeline_out o = model(2, 2, 2, f, b, 0.25, true);
    CHECK_NEAR_REL(o.p2p_s, 1.5, 1e-12);
    CHECK_NEAR_REL(o.step_s, 16.5, 1e-12);
    CHECK_NEAR_REL(model(2, 2, 2, f, b, 0.25, false).p2p_s, 2.5, 1e-12);
    CHECK_NEAR_REL(loom_pipeline_exposed_transfers(2, 2, 2, true), 6, 1e-12);
    CHECK_NEAR_REL(loom_pipeline_exposed_transfers(2, 2, 2, false), 10, 1e-12);
    /* the rule: Megatron interleaved overlaps; 1F1B and other frameworks do not */
    CHECK(loom_pipeline_overlaps_p2p(2, true));
    CHECK(!loom_pipeline_overlaps_p2p(1, true));
    CHECK(!loom_pipeline_overlaps_p2p(4, false));
}

/* Uniform stages: exact while a transfer fits behind the shorter chunk pass;
 * beyond, loom charges the steady state's excess e = p - min(f, b) for each
 * of the last rank's v·M - (v-1)·S iterations, at most one e above the
 * schedule. */
static void test_overlap_against_simulation(void)
{
    const int Ss[] = {2, 3, 4, 8}, vs[] = {2, 3, 4};
    const double ps[] = {0.05, 0.5, 1.0, 1.5, 2.5, 4.0};
    double f[MAXS], b[MAXS];
    for (size_t si = 0; si < 4; si++)
        for (size_t vi = 0; vi < 3; vi++)
            for (int mult = 1; mult <= 4; mult *= 2)
                for (size_t pi = 0; pi < 6; pi++) {
                    int S = Ss[si], v = vs[vi], M = S * mult;
                    for (int r = 0; r < S; r++) f[r] = 1, b[r] = 2;
                    double p = ps[pi], sim = simulate(SCHED_OVERLAP, S, M, v, f, b, p);
                    double loom = model(S, M, v, f, b, p, true).step_s;
                    CHECK(sim > 0);
                    if (p <= 1.0) {
                        CHECK_NEAR_REL(loom, sim, 1e-12);
                    } else {
                        double e = p - 1.0;
                        CHECK(loom >= sim - 1e-9 && loom <= sim + e + 1e-9);
                    }
                }
}

/* Blocking exchanges. 1F1B: exact (2M + 2S - 5 transfers, M + 1 with two
 * stages, 2(S - 1) with one micro-batch). Megatron's interleaved schedule
 * with --no-overlap-p2p-communication batches a forward's and a backward's
 * transfers into one exchange per iteration, so loom's blocking charge (two
 * per iteration) is an upper bound on it. */
static void test_blocking_against_simulation(void)
{
    const int Ss[] = {2, 3, 4, 8};
    double f[MAXS], b[MAXS];
    for (size_t si = 0; si < 4; si++)
        for (int M = 1; M <= 32; M *= 2) {
            int S = Ss[si];
            for (int r = 0; r < S; r++) f[r] = 1, b[r] = 2;
            double p = 0.01, base = simulate(SCHED_1F1B, S, M, 1, f, b, 0);
            double sim = simulate(SCHED_1F1B, S, M, 1, f, b, p);
            double n = M == 1 ? 2.0 * (S - 1) : S == 2 ? M + 1.0 : 2.0 * M + 2.0 * S - 5;
            CHECK_NEAR_REL(sim - base, n * p, 1e-9);
            loom_pipeline_out o = model(S, M, 1, f, b, p, true);   /* v = 1: never overlapped */
            CHECK_NEAR_REL(o.step_s, sim, 1e-12);
            CHECK_NEAR_REL(o.p2p_s, n * p, 1e-12);
            for (int v = 2; v <= 4; v++) {
                /* Megatron requires pp > 2 without the overlap, and whole
                 * groups of pp micro-batches */
                if (S == 2 || M % S) continue;
                for (double q = 0.1; q < 4; q *= 5) {
                    double bs = simulate(SCHED_BATCHED, S, M, v, f, b, q);
                    double lb = model(S, M, v, f, b, q, false).step_s;
                    CHECK(bs > 0 && lb >= bs - 1e-9);
                }
            }
        }
}

/* Unequal stages: loom's bubble counts the whole fill and drain of the
 * slow rank (test_pipeline.c), which covers the extra waits unequal ranks
 * add to the transfers: loom stays an upper bound, 3.8% over at most for a
 * 1.5x slow rank and 3.6% for a 10% slow one (p from 0.1 to 0.9 of a chunk
 * forward). */
static void test_unequal_stages(void)
{
    const double f1[4] = {1, 1.5, 1, 1}, b1[4] = {2, 3, 2, 2};
    const double f2[4] = {1, 1.1, 1, 1.05}, b2[4] = {2, 2.2, 2, 2.1};
    const double *fs[2] = {f1, f2}, *bs[2] = {b1, b2};
    const double tol[2] = {0.06, 0.04};
    for (int k = 0; k < 2; k++)
        for (double p = 0.1; p < 1.2; p += 0.4) {
            double sim = simulate(SCHED_OVERLAP, 4, 16, 2, fs[k], bs[k], p);
            double loom = model(4, 16, 2, fs[k], bs[k], p, true).step_s;
            CHECK(loom >= sim - 1e-9);
            CHECK_NEAR_REL(loom, sim, tol[k]);
        }
}

int main(void)
{
    test_hand_computed();
    test_overlap_against_simulation();
    test_blocking_against_simulation();
    test_unequal_stages();
    return check_done();
}
