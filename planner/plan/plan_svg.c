/*
 * plan_svg.c — `loom plan --svg`: a picture of a plan that agrees with its
 * text.
 *
 * Top: where the plan runs. Up to LOOM_SVG_MAX_NODES nodes: the cluster as a
 * grid, one row per node, one cell per GPU, coloured by the pipeline rank
 * that runs on it (replica 0 solid, the other data-parallel replicas faded).
 * Larger clusters: data-parallel replica 0 in full, one row per pipeline rank
 * with one cell per node (or GPU) of its sub-mesh, and a bar summarising the
 * whole cluster (replica 0, the other replicas, unused GPUs). Every pipeline
 * rank has its own colour (hues spread evenly; none repeats). The legend
 * names each rank's layers in the model's numbering and its parallelism by
 * role (loom_plan_stage_roles: "cp32 x tp4"), as the table does.
 *
 * Bottom: the schedule the step model costs (costs/pipeline.c), simulated
 * event by event on replica 0, then drawn to the predicted step:
 *
 *   training  Megatron's 1F1B (Narayanan et al. 2021 §2.2): rank i runs
 *             min(pp-i-1, M) warm-up forwards, then one forward and one
 *             backward, then drains; interleaved (§2.2.2, v chunks per rank):
 *             (pp-i-1)·2 + (v-1)·pp warm-up forwards over chunks taken in
 *             groups of pp micro-batches. Chunk c of rank i is stage c·pp+i;
 *             its forward is 1/3 of its time, its backward 2/3 (matmul
 *             backward = 2 × forward), each plus one p2p transfer with
 *             1F1B (the interleaved schedule overlaps them). The
 *             simulated pipeline is scaled onto compute + tp-comm + bubble +
 *             p2p of the breakdown (equal for uniform stages; the factor is
 *             in a comment), and the exposed gradient sync and the optimizer
 *             step follow, so the drawing ends at the predicted step.
 *   serving   forward only, the steady state of one decode step: micro-batch
 *             k enters rank i at k·max t + Σ_{j<i}(t_j + p2p), modulo the
 *             decode step; every rank's work fits in one step by construction.
 *
 * More than LOOM_SVG_MAX_MB micro-batches: a rank's busy periods are merged
 * into bars. Output is deterministic text (fixed formatting, no timestamps).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "planner/plan/plan.h"

#define LOOM_SVG_MAX_NODES 32
#define LOOM_SVG_MAX_MB 96
#define LOOM_SVG_WIDTH 1000

/* Colour of pipeline rank i of n: hues spread evenly around the wheel,
 * alternate ranks darker and lighter so neighbours stand apart; distinct
 * for every i < n (n <= 360). */
static void rank_colour(int i, int n, char out[8])
{
    double h = 360.0 * (double)i / (double)(n > 0 ? n : 1), sat = 0.62;
    double l = n > 12 ? (i % 2 ? 0.60 : 0.40) : 0.48;
    double c = (1 - fabs(2 * l - 1)) * sat, hp = h / 60.0;
    double x = c * (1 - fabs(fmod(hp, 2.0) - 1)), m = l - c / 2, r = 0, g = 0, b = 0;
    if (hp < 1) r = c, g = x;
    else if (hp < 2) r = x, g = c;
    else if (hp < 3) g = c, b = x;
    else if (hp < 4) g = x, b = c;
    else if (hp < 5) r = x, b = c;
    else r = c, b = x;
    snprintf(out, 8, "#%02x%02x%02x", (int)lround((r + m) * 255), (int)lround((g + m) * 255),
             (int)lround((b + m) * 255));
}

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} sbuf;

static void out(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void out(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t nc = b->cap * 2 + (size_t)n + 1;
        char *nb = realloc(b->buf, nc);
        if (!nb) {
            b->oom = true;
            return;
        }
        b->buf = nb, b->cap = nc;
    }
}

/* Escapes text for an SVG text node. */
static void text(sbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') out(b, "&lt;");
        else if (*s == '>') out(b, "&gt;");
        else if (*s == '&') out(b, "&amp;");
        else out(b, "%c", *s);
    }
}

/* ---- the placement ---------------------------------------------------------------- */

static const char *plural(int64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* The legend: one line per pipeline rank, its layers in the model's
 * numbering and its parallelism by role, as the table names them. */
static int draw_legend(sbuf *b, const loom_plan *p, int y)
{
    int S = (int)p->pipeline_stages;
    int step = S > 32 ? 12 : 16;
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_stage *s = &p->stages[i];
        if (s->group != i) continue;
        char col[8], lab[48], par[48];
        rank_colour(s->group, S, col);
        out(b, "<rect x=\"80\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>\n", y, col);
        out(b, "<text x=\"96\" y=\"%d\" class=\"s\">rank %d: layers", y + 9, (int)s->group);
        for (int32_t j = i; j < p->n_stages; j += (int32_t)p->pipeline_stages) {
            loom_plan_layers_label(p, p->stages[j].first_layer, p->stages[j].last_layer, lab,
                                   sizeof lab);
            out(b, " %s", lab);
        }
        loom_plan_roles ro;
        loom_plan_stage_roles(s, &ro);
        loom_plan_roles_label(&ro, s->mesh, par, sizeof par);
        out(b, "; %lld %s, %s", (long long)s->n_gpus, plural(s->n_gpus, "GPU", "GPUs"), par);
        if (ro.ep > 1) out(b, ", ep%lld", (long long)ro.ep);
        if (s->sequence_parallel) out(b, ", sp");
        out(b, "; %.2f GiB/GPU</text>\n",
            (double)loom_plan_rank_memory(p, s->group) / 1073741824.0);
        y += step;
    }
    return y;
}

/* The whole cluster, one row per node, one cell per GPU. */
static int draw_grid(sbuf *b, const loom_plan *p, int y0)
{
    int64_t g = p->gpus_per_node, nodes = p->nodes;
    int S = (int)p->pipeline_stages;
    int cell = (int)(880 / (g > 0 ? g : 1));
    if (cell > 40) cell = 40;
    if (cell < 4) cell = 4;
    int64_t total = nodes * g, used = p->gpus_per_replica * p->data_parallel;
    int64_t cells = total;
    int32_t *owner = malloc(sizeof *owner * (size_t)(cells > 0 ? cells : 1));
    int64_t *replica = malloc(sizeof *replica * (size_t)(cells > 0 ? cells : 1));
    if (!owner || !replica) {
        free(owner), free(replica);
        b->oom = true;
        return y0;
    }
    for (int64_t k = 0; k < cells; k++) owner[k] = -1, replica[k] = 0;
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_stage *st = &p->stages[i];
        for (int64_t r = 0; r < p->data_parallel; r++)
            for (int64_t k = 0; k < st->n_gpus; k++) {
                int64_t id = st->gpus[k] + r * st->replica_stride;
                if (id >= 0 && id < cells && owner[id] < 0) owner[id] = i, replica[id] = r;
            }
    }
    out(b, "<text x=\"10\" y=\"%d\" class=\"h\">Placement: %lld %s x %lld GPUs</text>\n", y0 + 14,
        (long long)nodes, plural(nodes, "node", "nodes"), (long long)g);
    int y = y0 + 24;
    for (int64_t n = 0; n < nodes; n++) {
        out(b, "<text x=\"10\" y=\"%d\" class=\"s\">node %lld</text>\n", y + cell / 2 + 4,
            (long long)n);
        for (int64_t k = 0; k < g; k++) {
            int64_t id = n * g + k;
            int x = 80 + (int)k * cell;
            char fill[8] = "#eeeeee";
            int32_t st = owner[id];
            if (st >= 0) rank_colour(p->stages[st].group, S, fill);
            out(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
                   "fill-opacity=\"%s\" stroke=\"#ffffff\"/>\n",
                x, y, cell, cell, fill, st >= 0 && replica[id] > 0 ? "0.35" : "1");
            if (st >= 0 && cell >= 16)
                out(b, "<text x=\"%d\" y=\"%d\" class=\"c\">%d</text>\n", x + cell / 2,
                    y + cell / 2 + 4, (int)p->stages[st].group);
        }
        y += cell;
    }
    out(b, "<text x=\"80\" y=\"%d\" class=\"s\">%lld data-parallel %s of %lld %s; "
           "replica 0 solid, the others faded; grey = unused (%lld of %lld)</text>\n",
        y + 16, (long long)p->data_parallel, plural(p->data_parallel, "replica", "replicas"),
        (long long)p->gpus_per_replica, plural(p->gpus_per_replica, "GPU", "GPUs"),
        (long long)(total - used), (long long)total);
    free(owner);
    free(replica);
    return draw_legend(b, p, y + 28) + 10;
}

/* A large cluster: replica 0 in full, one row per pipeline rank (one cell
 * per node of its sub-mesh, or per GPU when it sits inside one node), then
 * the whole cluster as one bar. */
static int draw_replica(sbuf *b, const loom_plan *p, int y0)
{
    int64_t g = p->gpus_per_node, nodes = p->nodes, total = nodes * g;
    int64_t R = p->data_parallel, used = p->gpus_per_replica * R;
    int S = (int)p->pipeline_stages;
    out(b, "<text x=\"10\" y=\"%d\" class=\"h\">Placement: %lld nodes x %lld GPUs; "
           "data-parallel replica 0 of %lld in full (%lld GPUs), the rest summarised</text>\n",
        y0 + 14, (long long)nodes, (long long)g, (long long)R, (long long)p->gpus_per_replica);
    int y = y0 + 24, row = S > 32 ? 8 : 14, x0 = 80, w = LOOM_SVG_WIDTH - x0 - 170;
    int64_t widest = 1;   /* cells of the widest rank */
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_stage *s = &p->stages[i];
        int64_t c = s->submesh_nodes > 1 ? s->submesh_nodes : s->n_gpus;
        if (c > widest) widest = c;
    }
    double cw = (double)w / (double)widest;
    if (cw > 24) cw = 24;
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_stage *s = &p->stages[i];
        if (s->group != i) continue;
        char col[8];
        rank_colour(s->group, S, col);
        bool by_node = s->submesh_nodes > 1;
        int64_t c = by_node ? s->submesh_nodes : s->n_gpus;
        if (row >= 12 || i % 8 == 0)
            out(b, "<text x=\"10\" y=\"%d\" class=\"s\">rank %d</text>\n", y + row - 2, (int)i);
        for (int64_t k = 0; k < c; k++)
            out(b, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
                   "stroke=\"#ffffff\" stroke-width=\"%s\"/>\n",
                x0 + cw * (double)k, y, cw, row - 1, col, cw >= 3 ? "0.5" : "0");
        if (row >= 12 || i % 8 == 0)
            out(b, "<text x=\"%.0f\" y=\"%d\" class=\"s\">GPUs %lld-%lld (%lld %s)</text>\n",
                x0 + cw * (double)c + 6, y + row - 2, (long long)s->gpus[0],
                (long long)s->gpus[s->n_gpus - 1], (long long)c,
                by_node ? plural(c, "node", "nodes") : plural(c, "GPU", "GPUs"));
        y += row;
    }
    /* the whole cluster, to scale */
    y += 8;
    double bw = LOOM_SVG_WIDTH - x0 - 20, f0 = (double)p->gpus_per_replica / (double)total,
           f1 = (double)(used - p->gpus_per_replica) / (double)total;
    out(b, "<text x=\"10\" y=\"%d\" class=\"s\">cluster</text>\n", y + 11);
    out(b, "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"14\" fill=\"#555555\"/>\n", x0, y,
        bw * f0);
    out(b, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"14\" fill=\"#555555\" "
           "fill-opacity=\"0.35\"/>\n", x0 + bw * f0, y, bw * f1);
    out(b, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"14\" fill=\"#eeeeee\"/>\n",
        x0 + bw * (f0 + f1), y, bw * (1 - f0 - f1));
    y += 30;
    out(b, "<text x=\"80\" y=\"%d\" class=\"s\">replica 0 (dark): %lld GPUs as drawn above; "
           "replicas 1-%lld (faded): the same layout, stage GPUs + r x its stride; "
           "unused (grey): %lld of %lld GPUs</text>\n",
        y - 4, (long long)p->gpus_per_replica, (long long)(R - 1), (long long)(total - used),
        (long long)total);
    return draw_legend(b, p, y + 8) + 10;
}

/* ---- the schedule ---------------------------------------------------------------- */

typedef struct {
    double start, end;
} span;

typedef struct {
    bool fwd;
    int chunk, mb;
} sched_op;

/* The q-th forward (back: backward) pass of a rank: micro-batches in groups
 * of S, each group through chunk 0, 1, … v-1 (backwards v-1 … 0); a last
 * group of fewer than S micro-batches goes chunk by chunk the same way. */
static sched_op unit(int S, int M, int v, int q, bool back)
{
    int per = S * v, base = q / per * S, gs = M - base < S ? M - base : S;
    int in = q - base * v, c = in / gs, m = in % gs;
    return (sched_op){.fwd = !back, .chunk = back ? v - 1 - c : c, .mb = base + m};
}

/* Megatron's order of rank i's passes: 1F1B (v = 1) or interleaved. Fills
 * ops[2·M·v] (training) or ops[M·v] (forward only). */
static void rank_order(int S, int M, int v, int i, bool train, sched_op *ops)
{
    int n = M * v, k = 0;
    if (!train) {
        for (int q = 0; q < n; q++) ops[k++] = unit(S, M, v, q, false);
        return;
    }
    int warm = v == 1 ? S - i - 1 : (S - i - 1) * 2 + (v - 1) * S;
    if (warm > n) warm = n;
    int f = 0, bk = 0;
    for (; f < warm; f++) ops[k++] = unit(S, M, v, f, false);
    while (f < n) {
        ops[k++] = unit(S, M, v, f++, false);
        ops[k++] = unit(S, M, v, bk++, true);
    }
    while (bk < n) ops[k++] = unit(S, M, v, bk++, true);
}

/* Event simulation of the schedule on S ranks, v chunks, M micro-batches;
 * dur[(c·S + i)] is chunk c of rank i's forward+backward (+ its transfers).
 * fs/bs[((i·v + c)·M + m)] get the spans. Returns the makespan, or -1 when
 * the order deadlocks (it does not for Megatron's orders). */
static double simulate(int S, int M, int v, bool train, const double *dur, span *fs, span *bs)
{
    int per = (train ? 2 : 1) * M * v;
    sched_op *ops = malloc(sizeof *ops * (size_t)S * (size_t)per);
    int *pos = calloc((size_t)S, sizeof *pos);
    double *free_at = calloc((size_t)S, sizeof *free_at), end = 0;
    if (!ops || !pos || !free_at) {
        free(ops), free(pos), free(free_at);
        return -1;
    }
    for (int i = 0; i < S; i++) rank_order(S, M, v, i, train, ops + (size_t)i * (size_t)per);
    for (size_t q = 0; q < (size_t)S * (size_t)v * (size_t)M; q++) fs[q].end = bs[q].end = -1;
    #define AT(a, i, c, m) (a)[((size_t)(i) * (size_t)v + (size_t)(c)) * (size_t)M + (size_t)(m)]
    bool progress = true;
    int done = 0;
    while (progress) {
        progress = false;
        for (int i = 0; i < S; i++) {
            while (pos[i] < per) {
                sched_op o = ops[(size_t)i * (size_t)per + (size_t)pos[i]];
                double ready = 0, d = dur[o.chunk * S + i];
                span *dep = NULL;
                if (o.fwd) {
                    if (i > 0) dep = &AT(fs, i - 1, o.chunk, o.mb);
                    else if (o.chunk > 0) dep = &AT(fs, S - 1, o.chunk - 1, o.mb);
                } else {
                    span *own = &AT(fs, i, o.chunk, o.mb);
                    if (own->end < 0) break;
                    ready = own->end;
                    if (i < S - 1) dep = &AT(bs, i + 1, o.chunk, o.mb);
                    else if (o.chunk < v - 1) dep = &AT(bs, 0, o.chunk + 1, o.mb);
                }
                if (dep && dep->end < 0) break;
                if (dep && dep->end > ready) ready = dep->end;
                double st = ready > free_at[i] ? ready : free_at[i];
                span *sp = o.fwd ? &AT(fs, i, o.chunk, o.mb) : &AT(bs, i, o.chunk, o.mb);
                sp->start = st;
                sp->end = st + (train ? (o.fwd ? d / 3 : 2 * d / 3) : d);
                free_at[i] = sp->end;
                if (sp->end > end) end = sp->end;
                pos[i]++, done++;
                progress = true;
            }
        }
    }
    #undef AT
    free(ops), free(pos), free(free_at);
    return done == S * per ? end : -1;
}

/* One rectangle of the schedule: [a, b) seconds on row y. */
static void bar(sbuf *b, double x0, double w, double total, double a, double e, int y, int h,
                const char *fill, const char *opacity)
{
    double x = x0 + w * a / total, wd = w * (e - a) / total;
    out(b, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
           "fill-opacity=\"%s\" stroke=\"#ffffff\" stroke-width=\"0.3\"/>\n",
        x, y, wd > 0.2 ? wd : 0.2, h, fill, opacity);
}

static int draw_schedule(sbuf *b, const loom_plan *p, int y0)
{
    int S = (int)p->pipeline_stages, v = (int)(p->virtual_stages > 0 ? p->virtual_stages : 1);
    int M = (int)p->micro_batches;
    bool train = p->mode == LOOM_PLAN_TRAIN;
    if (S < 1 || M < 1 || (int64_t)S * v != p->n_stages) return y0;
    const loom_step_breakdown *d = &p->breakdown;
    double step = p->step_time_s;
    /* one stage-to-stage transfer, back from the breakdown's total: training
     * the schedule's exposed transfers (pipeline.h; plans are Megatron's, which
     * overlaps the interleaved schedule's steady-state ones); a decode step
     * (S-1)·p2p when it is paced by the trip through the ranks */
    bool overlap = loom_pipeline_overlaps_p2p(v, true);
    double p2p = 0;
    if (S > 1 && d->p2p_s > 0)
        p2p = train ? d->p2p_s / loom_pipeline_exposed_transfers(S, M, v, overlap)
                    : d->p2p_s / (S - 1);
    double *dur = calloc((size_t)S * (size_t)v, sizeof *dur);
    double *rank_t = calloc((size_t)S, sizeof *rank_t);
    span *fs = calloc((size_t)S * (size_t)v * (size_t)M, sizeof *fs);
    span *bs = calloc((size_t)S * (size_t)v * (size_t)M, sizeof *bs);
    if (!dur || !rank_t || !fs || !bs) {
        free(dur), free(rank_t), free(fs), free(bs);
        b->oom = true;
        return y0;
    }
    for (int c = 0; c < v; c++)
        for (int i = 0; i < S; i++) {
            double t = p->stages[c * S + i].time_s;
            /* blocking: every chunk waits for its two transfers; overlapped:
             * the steady state hides them and the fill and drain's come in
             * through the scale onto the breakdown below */
            dur[c * S + i] = train ? t + (S > 1 && !overlap ? 2 * p2p : 0) : t;
            rank_t[i] += t;
        }
    double pipe = 0, scale = 1, sim = 0;
    if (train) {
        pipe = d->compute_s + d->tp_comm_s + d->bubble_s + d->p2p_s;
        sim = simulate(S, M, v, true, dur, fs, bs);
        if (sim > 0) scale = pipe / sim;
    } else {
        /* steady-state decode: micro-batch k enters rank i at k·tmax + o_i */
        double tmax = 0, o = 0;
        for (int i = 0; i < S; i++) tmax = rank_t[i] > tmax ? rank_t[i] : tmax;
        for (int i = 0; i < S; i++) {
            for (int k = 0; k < M; k++) {
                double st = fmod((double)k * tmax + o, step > 0 ? step : 1);
                fs[(size_t)i * (size_t)v * (size_t)M + (size_t)k] = (span){st, st + rank_t[i]};
            }
            o += rank_t[i] + p2p;
        }
        pipe = step;
        sim = step;
    }
    double total = step > 0 ? step : 1;
    int x0 = 80, w = LOOM_SVG_WIDTH - x0 - 20;
    bool merge = M > LOOM_SVG_MAX_MB;
    if (train) {
        out(b, "<!-- simulated pipeline %.6g s, drawn as the step model's %.6g s "
               "(x %.4f) -->\n", sim, pipe, scale);
        out(b, "<text x=\"10\" y=\"%d\" class=\"h\">Schedule: %s", y0 + 14,
            v > 1 ? "interleaved 1F1B" : "1F1B");
        if (v > 1) out(b, " with %d chunks per rank", v);
        out(b, ", %d micro-batches, step %.4g s", M, step);
        out(b, "</text>\n");
        out(b, "<text x=\"10\" y=\"%d\" class=\"s\">pipeline %.4g s (compute %.4g + tp-comm %.4g "
               "+ bubble %.4g + p2p %.4g), then gradient sync %.4g s and optimizer %.4g s; "
               "%s</text>\n",
            y0 + 30, pipe, d->compute_s, d->tp_comm_s, d->bubble_s, d->p2p_s, d->grad_sync_s,
            d->optimizer_s,
            merge ? "busy periods merged" : "forward light, backward dark");
    } else {
        out(b, "<text x=\"10\" y=\"%d\" class=\"h\">Schedule: forward only (decode), "
               "%d micro-batch%s of %lld sequences, decode step %.4g s</text>\n",
            y0 + 14, M, M == 1 ? "" : "es", (long long)p->micro_batch, step);
        out(b, "<text x=\"10\" y=\"%d\" class=\"s\">steady state: each micro-batch's next "
               "token passes every rank once per decode step</text>\n", y0 + 30);
    }
    int row = S > 24 ? (S > 48 ? 7 : 12) : 20, y = y0 + 40;
    for (int i = 0; i < S; i++) {
        char col[8];
        rank_colour(i, S, col);
        if (row >= 12 || i % 8 == 0)
            out(b, "<text x=\"10\" y=\"%d\" class=\"s\">rank %d</text>\n",
                y + (row >= 12 ? row / 2 + 4 : row), i);
        double busy_a = -1, busy_e = -1;
        for (int c = 0; c < v; c++)
            for (int k = 0; k < M && !merge; k++)
                for (int pass = 0; pass < (train ? 2 : 1); pass++) {
                    span sp = (pass ? bs : fs)[((size_t)i * (size_t)v + (size_t)c) * (size_t)M +
                                               (size_t)k];
                    if (sp.end < 0) continue;
                    double a = sp.start * scale, e = sp.end * scale;
                    if (!train && e > total) {   /* wraps round the decode step */
                        bar(b, x0, w, total, a, total, y, row - 2, col, "0.6");
                        a = 0, e -= total;
                    }
                    bar(b, x0, w, total, a, e, y, row - 2, col, pass ? "1" : "0.45");
                }
        if (merge) {   /* busy periods, in time order: merge spans closer than 1/4 px */
            size_t n = (size_t)v * (size_t)M * 2, q = 0;
            span *all = malloc(sizeof *all * n);
            if (!all) {
                b->oom = true;
                break;
            }
            for (int c = 0; c < v; c++)
                for (int k = 0; k < M; k++) {
                    size_t at = ((size_t)i * (size_t)v + (size_t)c) * (size_t)M + (size_t)k;
                    if (fs[at].end >= 0) all[q++] = fs[at];
                    if (train && bs[at].end >= 0) all[q++] = bs[at];
                }
            /* spans of one rank never overlap; sort by start (insertion: nearly sorted) */
            for (size_t u = 1; u < q; u++) {
                span t = all[u];
                size_t j = u;
                while (j > 0 && all[j - 1].start > t.start) all[j] = all[j - 1], j--;
                all[j] = t;
            }
            double gap = total / w / 4;
            for (size_t u = 0; u < q; u++) {
                double a = all[u].start * scale, e = all[u].end * scale;
                if (busy_a >= 0 && a - busy_e <= gap) {
                    busy_e = e;
                    continue;
                }
                if (busy_a >= 0) bar(b, x0, w, total, busy_a, busy_e, y, row - 1, col, "0.8");
                busy_a = a, busy_e = e;
            }
            if (busy_a >= 0) bar(b, x0, w, total, busy_a, busy_e, y, row - 1, col, "0.8");
            free(all);
        }
        if (train) {   /* exposed gradient sync, then the optimizer step */
            if (d->grad_sync_s > 0)
                bar(b, x0, w, total, pipe, pipe + d->grad_sync_s, y, row - 2, "#888888", "1");
            if (d->optimizer_s > 0)
                bar(b, x0, w, total, pipe + d->grad_sync_s, step, y, row - 2, "#333333", "1");
        }
        y += row;
    }
    /* the time axis: 0 and the step */
    out(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000000\"/>\n", x0, y + 2,
        x0 + w, y + 2);
    out(b, "<text x=\"%d\" y=\"%d\" class=\"s\">0 s</text>\n", x0, y + 16);
    out(b, "<text x=\"%d\" y=\"%d\" class=\"s\" text-anchor=\"end\">%.4g s</text>\n", x0 + w,
        y + 16, step);
    if (train)
        out(b, "<text x=\"%d\" y=\"%d\" class=\"s\">grey: gradient sync; black: optimizer"
               "</text>\n", x0 + 60, y + 16);
    free(dur), free(rank_t), free(fs), free(bs);
    return y + 26;
}

char *loom_plan_svg(const loom_plan *p)
{
    sbuf b = {malloc(4096), 0, 4096, false};
    if (!b.buf) return NULL;
    b.buf[0] = '\0';
    /* Height is known only at the end: draw into a body, then wrap it. */
    int y = 10;
    out(&b, "<text x=\"10\" y=\"%d\" class=\"t\">", y + 16);
    text(&b, p->model);
    out(&b, " on ");
    text(&b, p->cluster);
    out(&b, " (%s): %d stage(s), %lld pipeline rank(s) x %lld replica(s), %s %.4g s</text>\n",
        loom_plan_mode_name(p->mode), (int)p->n_stages, (long long)p->pipeline_stages,
        (long long)p->data_parallel, p->mode == LOOM_PLAN_TRAIN ? "step" : "decode step",
        p->step_time_s);
    y = p->nodes <= LOOM_SVG_MAX_NODES ? draw_grid(&b, p, y + 30) : draw_replica(&b, p, y + 30);
    y = draw_schedule(&b, p, y);
    if (b.oom) {
        free(b.buf);
        return NULL;
    }
    sbuf h = {malloc(1024), 0, 1024, false};
    if (!h.buf) {
        free(b.buf);
        return NULL;
    }
    out(&h, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
        LOOM_SVG_WIDTH, y + 10, LOOM_SVG_WIDTH, y + 10);
    out(&h, "<style>.t{font-size:15px;font-weight:bold}.h{font-size:13px;font-weight:bold}"
            ".s{font-size:11px}.c{font-size:10px;text-anchor:middle;fill:#ffffff}</style>\n");
    out(&h, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
    out(&h, "%s</svg>\n", b.buf);
    free(b.buf);
    if (h.oom) {
        free(h.buf);
        return NULL;
    }
    return h.buf;
}

loom_status loom_plan_svg_write(const loom_plan *p, const char *path, loom_error *err)
{
    char *svg = loom_plan_svg(p);
    if (!svg) return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory drawing the plan", path);
    loom_status s = loom_write_file_atomic(path, svg, strlen(svg), err);
    free(svg);
    return s;
}
