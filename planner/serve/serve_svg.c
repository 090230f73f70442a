/*
 * serve_svg.c — the serving plan's picture (serve_svg.h): its Pareto fronts
 * and chosen deployment on one chart.
 *
 * Axes. y, output tokens/s per GPU, is linear from 0 to the first multiple
 * of its tick step (1, 2 or 5 × 10^k, about five ticks) 5% above the
 * largest point. x, output tokens/s per user, is logarithmic: a front runs
 * from a few tokens/s per user (the largest batches) to a few hundred (one
 * client on the widest instance), and on a linear axis its whole
 * high-throughput end would fall into the first few pixels. x runs 15%
 * beyond the outermost points (at least a decade), with ticks at 1, 2 and
 * 5 × 10^k inside. Every tick is written as a line and a text whose value
 * is its label, so that a reader (tests/plan_svg.sh) can recover the scale
 * from the picture alone.
 *
 * Points. Each front point is a circle with a <title> holding its figures
 * as the text's front tables print them (%.1f tokens/s, TTFT in whole ms)
 * and a short name, A1, A2, … on the aggregated front and D1, D2, … on the
 * disaggregated one, in the tables' order; aggregated names sit above left
 * and disaggregated ones below right of their points, as the two fronts
 * run close together. A key right of the plot gives every name its shape
 * as the tables label it ("(tp 2) at 16", "(tp 1) at 16, 0.14 × prefill
 * (tp 1)"): the shapes are too long to sit beside points that crowd the
 * low-throughput end of a front. The chosen deployment is the simulated
 * point (the figures the plan reports), so it can sit off the steady-state
 * fronts: it is drawn as a black ring, not on a front.
 *
 * Output is deterministic text (fixed formatting, no timestamps); text
 * nodes are XML-escaped (the model label comes from the command line).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "graph/graph.h"
#include "planner/serve/serve_svg.h"

#define MIN_W 1000
#define KEY_CHAR_W 6   /* a generous average width of a key character, pixels */
#define MIN_H 690
#define PLOT_X0 90    /* the plot area, pixels */
#define PLOT_X1 690
#define PLOT_Y0 104
#define PLOT_Y1 614
#define KEY_X 712     /* the key of point names, right of the plot */
#define KEY_ROW 13

static const char *const kind_colour[2] = {"#1f77b4", "#e4760b"};   /* blue, orange */
static const char *const kind_name[2] = {"aggregated", "disaggregated"};
static const char kind_letter[2] = {'A', 'D'};

/* Writes s as SVG text content. */
static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

/* The smallest 1, 2 or 5 × 10^k at or above v (v > 0). */
static double nice_up(double v)
{
    double e = pow(10, floor(log10(v)));
    for (int i = 0; i < 4; i++) {
        double m = (double[]){1, 2, 5, 10}[i] * e;
        if (m >= v * (1 - 1e-12)) return m;
    }
    return 10 * e;
}

typedef struct {
    double x_lo, x_hi;   /* tokens/s per user, log scale */
    double y_hi, y_step; /* tokens/s per GPU, linear from 0; y_hi a multiple of y_step */
} scale;

static double px(const scale *s, double x)
{
    return PLOT_X0 + (PLOT_X1 - PLOT_X0) * (log10(x) - log10(s->x_lo)) /
                         (log10(s->x_hi) - log10(s->x_lo));
}

static double py(const scale *s, double y)
{
    return PLOT_Y1 - (PLOT_Y1 - PLOT_Y0) * y / s->y_hi;
}

static double user_rate(const loom_serve_point *pt)
{
    return pt->tpot.mean > 0 ? 1 / pt->tpot.mean : 0;
}

/* The range of every point drawn: both fronts and the chosen deployment. */
static scale fit(const loom_serve_plan *p)
{
    double lo = INFINITY, hi = 0, ymax = 0;
    for (int k = 0; k < 2; k++)
        for (int32_t i = 0; i < p->n_front[k]; i++) {
            const loom_serve_front_point *q = &p->front[k][i];
            if (q->tokens_per_s_user <= 0) continue;
            lo = fmin(lo, q->tokens_per_s_user), hi = fmax(hi, q->tokens_per_s_user);
            ymax = fmax(ymax, q->tokens_per_s_gpu);
        }
    double ux = user_rate(&p->best.sim);
    if (ux > 0) {
        lo = fmin(lo, ux), hi = fmax(hi, ux);
        ymax = fmax(ymax, p->best.sim.output_tokens_per_s / (double)p->best.dep.gpus);
    }
    if (p->req.slo.tpot_s > 0) {
        lo = fmin(lo, 1 / p->req.slo.tpot_s), hi = fmax(hi, 1 / p->req.slo.tpot_s);
    }
    if (!(hi > 0)) lo = 1, hi = 10;   /* nothing to draw: an empty chart */
    /* x: 15% beyond the outermost points (a tenth of a decade and a bit) */
    scale s = {.x_lo = lo / 1.15, .x_hi = hi * 1.15};
    if (s.x_hi < s.x_lo * 10) {   /* at least a decade, so that two ticks fall inside */
        double mid = sqrt(s.x_lo * s.x_hi);
        s.x_lo = mid / sqrt(10), s.x_hi = mid * sqrt(10);
    }
    if (!(ymax > 0)) ymax = 1;
    s.y_step = nice_up(ymax / 5);
    s.y_hi = ceil(ymax * 1.05 / s.y_step) * s.y_step;
    return s;
}

static void axes(FILE *f, const scale *s)
{
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#444444\"/>\n",
            PLOT_X0, PLOT_Y0, PLOT_X1 - PLOT_X0, PLOT_Y1 - PLOT_Y0);
    /* y: 1, 2 or 5 × 10^k steps, about five of them */
    for (int i = 0; i * s->y_step <= s->y_hi * (1 + 1e-9); i++) {
        double v = i * s->y_step, y = py(s, v);
        fprintf(f, "<line class=\"ytick\" x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" "
                   "stroke=\"#dddddd\"/>\n", PLOT_X0, y, PLOT_X1, y);
        fprintf(f, "<text class=\"yt\" x=\"%d\" y=\"%.2f\" text-anchor=\"end\" "
                   "data-y=\"%.2f\">%g</text>\n", PLOT_X0 - 6, y + 4, y, v);
    }
    /* x: 1, 2, 5 × 10^k inside [x_lo, x_hi] */
    for (double e = pow(10, floor(log10(s->x_lo))); e <= s->x_hi; e *= 10)
        for (int m = 0; m < 3; m++) {
            double v = (double[]){1, 2, 5}[m] * e;
            if (v < s->x_lo * (1 - 1e-9) || v > s->x_hi * (1 + 1e-9)) continue;
            double x = px(s, v);
            fprintf(f, "<line class=\"xtick\" x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" "
                       "stroke=\"#dddddd\"/>\n", x, PLOT_Y0, x, PLOT_Y1);
            fprintf(f, "<text class=\"xt\" x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" "
                       "data-x=\"%.2f\">%g</text>\n", x, PLOT_Y1 + 16, x, v);
        }
    fprintf(f, "<text class=\"h\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">output tokens/s per "
               "user (1 / mean TPOT; log scale)</text>\n", (PLOT_X0 + PLOT_X1) / 2, PLOT_Y1 + 40);
    fprintf(f, "<text class=\"h\" transform=\"translate(%d %d) rotate(-90)\" "
               "text-anchor=\"middle\">output tokens/s per GPU</text>\n",
            PLOT_X0 - 60, (PLOT_Y0 + PLOT_Y1) / 2);
}

/* The shape of a front point as serve_text.c's front tables name it. */
static void point_label(const loom_serve_plan *p, const loom_serve_front_point *q, char *buf,
                        size_t n)
{
    char a[96], b[96];
    loom_serve_inst_label(&p->space.cand[q->shape].inst, a, sizeof a);
    int k = snprintf(buf, n, "(%s) at %lld", a, (long long)q->concurrency);
    if (q->prefill_shape >= 0 && k >= 0 && (size_t)k < n) {
        loom_serve_inst_label(&p->space.cand[q->prefill_shape].inst, b, sizeof b);
        snprintf(buf + k, n - (size_t)k, ", %.2f × prefill (%s)", q->prefill_per_decode, b);
    }
}

static void draw_front(FILE *f, const loom_serve_plan *p, const scale *s, int kind)
{
    const char *col = kind_colour[kind];
    int32_t n = p->n_front[kind];
    if (n == 0) return;
    fprintf(f, "<polyline class=\"front\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
               "points=\"", col);
    for (int32_t i = 0; i < n; i++) {
        const loom_serve_front_point *q = &p->front[kind][i];
        if (q->tokens_per_s_user > 0)
            fprintf(f, "%s%.2f,%.2f", i ? " " : "", px(s, q->tokens_per_s_user),
                    py(s, q->tokens_per_s_gpu));
    }
    fprintf(f, "\"/>\n");
    for (int32_t i = 0; i < n; i++) {
        const loom_serve_front_point *q = &p->front[kind][i];
        if (q->tokens_per_s_user <= 0) continue;
        double x = px(s, q->tokens_per_s_user), y = py(s, q->tokens_per_s_gpu);
        char lab[256];
        point_label(p, q, lab, sizeof lab);
        fprintf(f, "<circle class=\"pt %s\" cx=\"%.2f\" cy=\"%.2f\" r=\"3.5\" fill=\"%s\">"
                   "<title>%s ", kind ? "dis" : "agg", x, y, col, kind_name[kind]);
        esc(f, lab);
        fprintf(f, ": %.1f tok/s/user, %.1f tok/s/GPU, TTFT %.0f ms</title></circle>\n",
                q->tokens_per_s_user, q->tokens_per_s_gpu, q->ttft_s * 1e3);
        /* the point's name: above left for aggregated, below right for
         * disaggregated, so that the two fronts keep their names apart */
        fprintf(f, "<text class=\"n %s\" x=\"%.2f\" y=\"%.2f\" fill=\"%s\"%s>%c%d</text>\n",
                kind ? "dis" : "agg", x + (kind ? 4 : -4), y + (kind ? 12 : -6), col,
                kind ? "" : " text-anchor=\"end\"", kind_letter[kind], (int)i + 1);
    }
}

/* The key right of the plot: every point's name and shape, each front in
 * its colour and order (falling tokens/s per user, as the text's tables).
 * Returns the y below it; *width: the picture's width that holds it. */
static int key(FILE *f, const loom_serve_plan *p, int *width)
{
    int y = PLOT_Y0 + 4;
    *width = MIN_W;
    for (int k = 0; k < 2; k++) {
        fprintf(f, "<text class=\"h\" x=\"%d\" y=\"%d\" fill=\"%s\">%s front%s</text>\n",
                KEY_X, y, kind_colour[k], kind_name[k], p->n_front[k] ? "" : ": none");
        y += KEY_ROW + 2;
        for (int32_t i = 0; i < p->n_front[k]; i++, y += KEY_ROW) {
            char lab[256];
            point_label(p, &p->front[k][i], lab, sizeof lab);
            int chars = 5;   /* "D13 " */
            for (const char *c = lab; *c; c++) chars += ((unsigned char)*c & 0xC0) != 0x80;
            if (KEY_X + chars * KEY_CHAR_W + 10 > *width) *width = KEY_X + chars * KEY_CHAR_W + 10;
            fprintf(f, "<text class=\"k %s\" x=\"%d\" y=\"%d\" fill=\"%s\">%c%d ",
                    k ? "dis" : "agg", KEY_X, y, kind_colour[k], kind_letter[k], (int)i + 1);
            esc(f, lab);
            fprintf(f, "</text>\n");
        }
        y += 10;
    }
    return y;
}

static bool has_slo(const loom_serve_plan *p)
{
    return p->req.slo.ttft_s > 0 || p->req.slo.tpot_s > 0;
}

/* Title: the model, the cluster, the chosen deployment and its predicted
 * figures as the text's "predicted" line prints them. Returns the width the
 * deployment's line needs (a long pair of pools widens the picture). */
static int title(FILE *f, const loom_serve_plan *p, const char *model)
{
    const loom_serve_plan_request *r = &p->req;
    const loom_cluster *c = r->space.cluster;
    const loom_serve_option *b = &p->best;
    const loom_serve_point *pt = &b->sim;
    char dep[320];
    loom_serve_deploy_label(&p->ctx, &b->dep, dep, sizeof dep);
    fprintf(f, "<text class=\"t\" x=\"10\" y=\"22\">");
    esc(f, model);
    fprintf(f, " on ");
    esc(f, c->name);
    fprintf(f, " (%lld × ", (long long)loom_cluster_gpus(c));
    esc(f, c->gpu.name);
    fprintf(f, "), ISL %lld, OSL %lld</text>\n", (long long)r->work.isl, (long long)r->work.osl);
    fprintf(f, "<text class=\"h\" id=\"deployment\" x=\"10\" y=\"42\">chosen: %s ",
            b->dep.disagg ? "disaggregated" : "aggregated");
    esc(f, dep);
    int chars = 40;   /* "chosen: disaggregated " and " on N GPUs" */
    for (const char *q = dep; *q; q++) chars += ((unsigned char)*q & 0xC0) != 0x80;
    fprintf(f, " on %lld GPUs</text>\n", (long long)b->dep.gpus);
    fprintf(f, "<text class=\"s\" id=\"predicted\" x=\"10\" y=\"62\">predicted (%s): "
               "<tspan class=\"rps\">%.3g</tspan> requests/s, <tspan class=\"rpsg\">%.3g"
               "</tspan> per GPU",
            pt->simulated ? "simulated" : "steady state", pt->rate_rps,
            pt->rate_rps / (double)b->dep.gpus);
    if (has_slo(p))
        fprintf(f, ", <tspan class=\"att\">%.1f</tspan>%% of requests within the SLOs",
                100 * pt->attainment);
    fprintf(f, "; %.1f output tokens/s per GPU, %.1f per user</text>\n",
            pt->output_tokens_per_s / (double)b->dep.gpus, user_rate(pt));
    char slo[200] = "";
    int k = 0;
    if (r->slo.ttft_s > 0) k += snprintf(slo + k, sizeof slo - (size_t)k, "TTFT ≤ %g ms", r->slo.ttft_s * 1e3);
    if (r->slo.tpot_s > 0)
        k += snprintf(slo + k, sizeof slo - (size_t)k, "%sTPOT ≤ %g ms", k ? " and " : "",
                      r->slo.tpot_s * 1e3);
    if (k) snprintf(slo + k, sizeof slo - (size_t)k, " for %g%% of requests", 100 * r->slo.attainment);
    fprintf(f, "<text class=\"s\" x=\"10\" y=\"80\">SLO: %s; the Pareto fronts are "
               "steady-state estimates, the chosen deployment as simulated</text>\n",
            k ? slo : "none");
    return 10 + chars * 8 + 10;   /* 13px bold: about 8 px a character */
}

static void legend(FILE *f)
{
    /* bottom left: below a front, which falls from top left to bottom right */
    int x = PLOT_X0 + 16, y = PLOT_Y1 - 56;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"196\" height=\"62\" fill=\"#ffffff\" "
               "stroke=\"#bbbbbb\"/>\n", x - 8, y - 14);
    for (int k = 0; k < 2; k++, y += 18) {
        fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"4\" fill=\"%s\"/>", x + 4, y - 4,
                kind_colour[k]);
        fprintf(f, "<text class=\"s\" x=\"%d\" y=\"%d\">%s (%c1, %c2, …)</text>\n", x + 14,
                y, kind_name[k], kind_letter[k], kind_letter[k]);
    }
    fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"6\" fill=\"none\" stroke=\"#000000\" "
               "stroke-width=\"2\"/>", x + 4, y - 4);
    fprintf(f, "<text class=\"s\" x=\"%d\" y=\"%d\">chosen deployment (simulated)</text>\n",
            x + 14, y);
}

static void chosen(FILE *f, const loom_serve_plan *p, const scale *s)
{
    const loom_serve_point *pt = &p->best.sim;
    double ux = user_rate(pt), gy = pt->output_tokens_per_s / (double)p->best.dep.gpus;
    if (ux <= 0) return;
    double x = px(s, ux), y = py(s, gy);
    fprintf(f, "<circle id=\"chosen\" cx=\"%.2f\" cy=\"%.2f\" r=\"8\" fill=\"none\" "
               "stroke=\"#000000\" stroke-width=\"2.5\"><title>chosen: %.1f tok/s/user, %.1f "
               "tok/s/GPU</title></circle>\n", x, y, ux, gy);
    fprintf(f, "<text class=\"h\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">chosen</text>\n",
            x - 10, y + 18);
}

static void tpot_bound(FILE *f, const loom_serve_plan *p, const scale *s)
{
    if (p->req.slo.tpot_s <= 0) return;
    double x = px(s, 1 / p->req.slo.tpot_s);
    fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#888888\" "
               "stroke-dasharray=\"5 4\"/>\n", x, PLOT_Y0, x, PLOT_Y1);
    fprintf(f, "<text class=\"s\" x=\"%.2f\" y=\"%d\" fill=\"#555555\">TPOT ≤ %g ms</text>\n",
            x + 4, PLOT_Y0 + 14, p->req.slo.tpot_s * 1e3);
}

char *loom_serve_plan_svg(const loom_serve_plan *p, const char *model_label)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    const char *model = model_label ? model_label : loom_graph_name(p->req.space.graph);
    scale s = fit(p);
    /* The key's length sets the height: draw the body first, then wrap it. */
    int title_w = title(f, p, model);
    axes(f, &s);
    tpot_bound(f, p, &s);
    draw_front(f, p, &s, 0);
    draw_front(f, p, &s, 1);
    chosen(f, p, &s);
    legend(f);
    int w, h = key(f, p, &w);
    if (h < MIN_H) h = MIN_H;
    if (title_w > w) w = title_w;
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    char *body = buf;
    buf = NULL, len = 0;
    f = open_memstream(&buf, &len);
    if (!f) {
        free(body);
        return NULL;
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n", w, h, w, h);
    fprintf(f, "<style>.t{font-size:15px;font-weight:bold}.h{font-size:13px;font-weight:bold}"
               ".s{font-size:12px}.n{font-size:9px}.k{font-size:10.5px}.xt,.yt{font-size:11px}"
               "</style>\n");
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
    fputs(body, f);
    free(body);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

loom_status loom_serve_plan_svg_write(const loom_serve_plan *p, const char *model_label,
                                      const char *path, loom_error *err)
{
    char *svg = loom_serve_plan_svg(p, model_label);
    if (!svg)
        return loom_error_set(err, LOOM_ERR_NOMEM, "%s: out of memory drawing the serving plan",
                              path);
    loom_status st = loom_write_file_atomic(path, svg, strlen(svg), err);
    free(svg);
    return st;
}
