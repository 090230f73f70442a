/*
 * plan_svg.c — `loom plan --svg`: a picture of a plan.
 *
 * Top: the cluster as a grid, one row per node, one cell per GPU, coloured
 * by the pipeline rank that runs on it (replica 0 solid, the other
 * data-parallel replicas faded), labelled with the stage. Large clusters
 * show their first LOOM_SVG_MAX_NODES nodes and say how many are left out.
 *
 * Bottom: one training step's pipeline schedule, simulated: rank i runs
 * min(pp - i - 1, M) warm-up forwards, then alternates one forward and one
 * backward (1F1B), then drains its backwards (Narayanan et al. 2021, §2.2).
 * A forward of micro-batch k on rank i waits for rank i-1's forward of k; a
 * backward waits for rank i+1's backward of k. Forward is drawn as 1/3 of
 * the rank's per-micro-batch time and backward 2/3 (matmul backward = 2 ×
 * forward). Inference plans draw forwards only. Interleaved plans are drawn
 * per rank (all its chunks as one box). At most LOOM_SVG_MAX_MB micro-batches
 * are drawn.
 *
 * Output is deterministic text (fixed formatting, no timestamps).
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

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                      "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                      "#9c755f", "#bab0ac", "#1f77b4", "#8c564b"};
#define NPAL ((int)(sizeof palette / sizeof palette[0]))

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

/* ---- the device grid ------------------------------------------------------------ */

static int draw_grid(sbuf *b, const loom_plan *p, int y0)
{
    int64_t g = p->gpus_per_node, nodes = p->nodes;
    int64_t shown = nodes < LOOM_SVG_MAX_NODES ? nodes : LOOM_SVG_MAX_NODES;
    int cell = (int)(880 / (g > 0 ? g : 1));
    if (cell > 40) cell = 40;
    if (cell < 4) cell = 4;
    int64_t total = nodes * g, used = p->gpus_per_replica * p->data_parallel;
    /* owner of each GPU (shown nodes only): the first stage of its rank;
     * replica of each: to fade all but replica 0 */
    int64_t cells = shown * g;
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
    out(b, "<text x=\"10\" y=\"%d\" class=\"h\">Placement: %lld nodes x %lld GPUs", y0 + 14,
        (long long)nodes, (long long)g);
    if (shown < nodes) out(b, " (first %lld nodes shown)", (long long)shown);
    out(b, "</text>\n");
    int y = y0 + 24;
    for (int64_t n = 0; n < shown; n++) {
        out(b, "<text x=\"10\" y=\"%d\" class=\"s\">node %lld</text>\n", y + cell / 2 + 4,
            (long long)n);
        for (int64_t k = 0; k < g; k++) {
            int64_t id = n * g + k;
            int x = 80 + (int)k * cell;
            const char *fill = "#eeeeee";
            const char *op = "1";
            int32_t st = -1;
            st = owner[id];
            if (st >= 0) fill = palette[p->stages[st].group % NPAL];
            if (st >= 0 && replica[id] > 0) op = "0.35";
            out(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
                   "fill-opacity=\"%s\" stroke=\"#ffffff\"/>\n",
                x, y, cell, cell, fill, op);
            if (st >= 0 && cell >= 16)
                out(b, "<text x=\"%d\" y=\"%d\" class=\"c\">%d</text>\n", x + cell / 2,
                    y + cell / 2 + 4, (int)p->stages[st].group);
        }
        y += cell;
    }
    if (shown < nodes) {
        out(b, "<text x=\"80\" y=\"%d\" class=\"s\">… %lld more nodes", y + 14,
            (long long)(nodes - shown));
        out(b, "</text>\n");
        y += 20;
    }
    out(b, "<text x=\"80\" y=\"%d\" class=\"s\">%lld data-parallel replica(s) of %lld GPUs; "
           "replica 0 solid, the others faded; grey = unused (%lld of %lld)</text>\n",
        y + 16, (long long)p->data_parallel, (long long)p->gpus_per_replica,
        (long long)(total - used), (long long)total);
    y += 28;
    /* legend: one line per pipeline rank */
    for (int32_t i = 0; i < p->n_stages; i++) {
        const loom_plan_stage *s = &p->stages[i];
        if (s->group != i) continue;
        out(b, "<rect x=\"80\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", y,
            palette[s->group % NPAL]);
        out(b, "<text x=\"98\" y=\"%d\" class=\"s\">rank %d: layers", y + 10, (int)s->group);
        for (int32_t j = i; j < p->n_stages; j += (int32_t)p->pipeline_stages)
            out(b, " %d-%d", (int)p->stages[j].first_layer, (int)p->stages[j].last_layer);
        out(b, ", %lld GPUs, mesh %lldx%lld, tp %lld, %.2f GiB/GPU</text>\n",
            (long long)s->n_gpus, (long long)s->mesh[0], (long long)s->mesh[1],
            (long long)s->tensor_parallel,
            (double)loom_plan_rank_memory(p, s->group) / 1073741824.0);
        y += 16;
    }
    free(owner);
    free(replica);
    return y + 10;
}

/* ---- the schedule ---------------------------------------------------------------- */

typedef struct {
    double start, end;
} span;

/* Simulates 1F1B on S ranks with times t[i]; fills f[i*M+k], bw[i*M+k]. */
static void simulate(int S, int M, const double *t, bool train, span *f, span *bw)
{
    int *pos = calloc((size_t)S, sizeof *pos);
    int total_ops = train ? 2 * M : M;
    double *free_at = calloc((size_t)S, sizeof *free_at);
    if (!pos || !free_at) {
        free(pos);
        free(free_at);
        return;
    }
    for (int q = 0; q < S * M; q++) f[q].end = bw[q].end = -1;
    bool progress = true;
    while (progress) {
        progress = false;
        for (int i = 0; i < S; i++) {
            while (pos[i] < total_ops) {
                /* the pos-th op of rank i under 1F1B */
                int warm = S - i - 1 < M ? S - i - 1 : M, k;
                bool fwd;
                int q = pos[i];
                if (!train) fwd = true, k = q;
                else if (q < warm) fwd = true, k = q;
                else if (q < warm + 2 * (M - warm)) {
                    int r = q - warm;
                    fwd = r % 2 == 0;
                    k = fwd ? warm + r / 2 : r / 2;
                } else fwd = false, k = q - warm - (M - warm);
                double ready;
                if (fwd) {
                    if (i > 0 && f[(i - 1) * M + k].end < 0) break;
                    ready = i > 0 ? f[(i - 1) * M + k].end : 0;
                } else {
                    if (i < S - 1 && bw[(i + 1) * M + k].end < 0) break;
                    if (f[i * M + k].end < 0) break;
                    ready = i < S - 1 ? bw[(i + 1) * M + k].end : f[i * M + k].end;
                }
                double dur = train ? (fwd ? t[i] / 3 : 2 * t[i] / 3) : t[i];
                double st = ready > free_at[i] ? ready : free_at[i];
                span *sp = fwd ? &f[i * M + k] : &bw[i * M + k];
                sp->start = st, sp->end = st + dur;
                free_at[i] = sp->end;
                pos[i]++;
                progress = true;
            }
        }
    }
    free(pos);
    free(free_at);
}

static int draw_schedule(sbuf *b, const loom_plan *p, int y0)
{
    int S = (int)p->pipeline_stages;
    int M = (int)(p->micro_batches < LOOM_SVG_MAX_MB ? p->micro_batches : LOOM_SVG_MAX_MB);
    bool train = p->mode == LOOM_PLAN_TRAIN;
    double *t = calloc((size_t)S, sizeof *t);
    span *f = calloc((size_t)S * (size_t)M, sizeof *f);
    span *bw = calloc((size_t)S * (size_t)M, sizeof *bw);
    if (!t || !f || !bw) {
        free(t), free(f), free(bw);
        b->oom = true;
        return y0;
    }
    for (int32_t i = 0; i < p->n_stages; i++) t[p->stages[i].group] += p->stages[i].time_s;
    simulate(S, M, t, train, f, bw);
    double end = 0;
    for (int q = 0; q < S * M; q++) {
        if (f[q].end > end) end = f[q].end;
        if (train && bw[q].end > end) end = bw[q].end;
    }
    if (end <= 0) end = 1;
    out(b, "<text x=\"10\" y=\"%d\" class=\"h\">Pipeline schedule (%s, %d of %lld micro-batches, "
           "%.4g s): forward light, backward dark</text>\n",
        y0 + 14, train ? "1F1B" : "forward only", M, (long long)p->micro_batches, end);
    int row = S > 24 ? 12 : 20, y = y0 + 24, x0 = 80, w = LOOM_SVG_WIDTH - x0 - 20;
    for (int i = 0; i < S; i++) {
        out(b, "<text x=\"10\" y=\"%d\" class=\"s\">rank %d</text>\n", y + row / 2 + 4, i);
        for (int k = 0; k < M; k++)
            for (int pass = 0; pass < (train ? 2 : 1); pass++) {
                span sp = pass ? bw[i * M + k] : f[i * M + k];
                if (sp.end < 0) continue;
                double x = x0 + w * sp.start / end, wd = w * (sp.end - sp.start) / end;
                out(b, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
                       "fill-opacity=\"%s\" stroke=\"#ffffff\" stroke-width=\"0.5\"/>\n",
                    x, y, wd > 0.2 ? wd : 0.2, row - 2, palette[i % NPAL], pass ? "1" : "0.45");
            }
        y += row;
    }
    free(t), free(f), free(bw);
    return y + 10;
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
    y = draw_grid(&b, p, y + 30);
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
