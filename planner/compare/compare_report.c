/*
 * compare_report.c — the human-facing forms of a comparison (compare.h):
 * markdown tables, CSV, and an SVG chart of plan quality against search
 * time.
 *
 * Markdown: (1) per case, each algorithm's predicted step time (per-token
 * latency for inference) and its gap to the case's best plan, the best in
 * bold; (2) per algorithm, how many cases it planned, how often it found
 * the best plan, its mean and worst gap and its total search time; (3)
 * search time and evaluations per case; (4) every plan in one line.
 * CSV: one row per (case, algorithm) with every field of the JSON report.
 * SVG: one dot per (case, algorithm): x = search wall time (log scale; the
 * number of evaluations when the report has no timings), y = gap to the
 * case's best (log(1 + gap %) scale), plans that do not fit on a band at
 * the top.
 *
 * All text goes through one memory stream (open_memstream), and every
 * number through fixed formats, so the same report gives the same bytes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/compare/compare.h"

#define GIB 1073741824.0

/* Three significant digits, trailing zeros kept: "3.30 s", "24.3 s", "107 ms". */
static void fmt_time(char *buf, size_t n, double s)
{
    const char *unit = "s";
    if (s < 1) s *= 1e3, unit = "ms";
    int decimals = s >= 100 ? 0 : s >= 10 ? 1 : 2;
    snprintf(buf, n, "%.*f %s", decimals, s, unit);
}

/* The objective's own quantity: time for time / latency, tokens per
 * second for throughput, dollars or joules per step for cost / energy. */
static void fmt_value(loom_objective o, const loom_compare_row *w, char *buf, size_t n)
{
    switch (o) {
    case LOOM_OBJ_THROUGHPUT:
        if (w->tokens_per_s >= 1e6) snprintf(buf, n, "%.3g M tok/s", w->tokens_per_s / 1e6);
        else if (w->tokens_per_s >= 1e3) snprintf(buf, n, "%.3g k tok/s", w->tokens_per_s / 1e3);
        else snprintf(buf, n, "%.3g tok/s", w->tokens_per_s);
        break;
    case LOOM_OBJ_COST: snprintf(buf, n, "$%.3g/step", w->score); break;
    case LOOM_OBJ_ENERGY: snprintf(buf, n, "%.3g kJ/step", w->score / 1e3); break;
    default: fmt_time(buf, n, w->step_s);
    }
}

static void fmt_cell(loom_objective o, const loom_compare_row *w, char *buf, size_t n)
{
    char t[32];
    if (w->status == LOOM_CMP_NONE) {
        if (w->memory_per_gpu_bytes > 0)
            snprintf(buf, n, "none (needs %.0f GiB)", w->memory_per_gpu_bytes / GIB);
        else snprintf(buf, n, "none");
        return;
    }
    if (w->status == LOOM_CMP_NO_FIT) {
        snprintf(buf, n, "no fit (%.0f GiB)", w->memory_per_gpu_bytes / GIB);
        return;
    }
    if (w->status == LOOM_CMP_OVER_BOUND) {
        fmt_time(t, sizeof t, w->step_s);
        snprintf(buf, n, "over bound (%s)", t);
        return;
    }
    fmt_value(o, w, t, sizeof t);
    if (w->gap <= 0) snprintf(buf, n, "**%s**", t);
    else snprintf(buf, n, "%s +%.1f%%", t, 100 * w->gap);
}

/* "| first | alg1 | … |" and its separator; `lead` columns in `first`. */
static void header_row(FILE *f, const loom_compare_report *r, const char *first, int lead)
{
    fprintf(f, "| %s |", first);
    for (int32_t k = 0; k < r->n_algos; k++) fprintf(f, " %s |", r->algos[k]);
    fprintf(f, "\n|");
    for (int i = 0; i < lead; i++) fprintf(f, "---|");
    for (int32_t k = 0; k < r->n_algos; k++) fprintf(f, "---:|");
    fprintf(f, "\n");
}

static void summary(FILE *f, const loom_compare_report *r)
{
    fprintf(f, "\n| algorithm | plans that fit | best plan | mean gap | worst gap | search time | "
               "evaluations |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (int32_t k = 0; k < r->n_algos; k++) {
        int fit = 0, best = 0;
        double sum = 0, worst = 0, secs = 0;
        int64_t evals = 0;
        for (int32_t i = 0; i < r->n_cases; i++) {
            const loom_compare_row *w = &r->cases[i].rows[k];
            secs += w->search_s;
            evals += w->evals;
            if (w->status != LOOM_CMP_OK) continue;
            fit++;
            best += w->gap <= 0;
            sum += w->gap;
            worst = fmax(worst, w->gap);
        }
        fprintf(f, "| %s | %d/%d | %d | ", r->algos[k], fit, (int)r->n_cases, best);
        if (fit) fprintf(f, "%.1f%% | %.1f%% | ", 100 * sum / fit, 100 * worst);
        else fprintf(f, "- | - | ");
        if (r->timings) fprintf(f, "%.1f s | %lld |\n", secs, (long long)evals);
        else fprintf(f, "- | %lld |\n", (long long)evals);
    }
}

char *loom_compare_markdown(const loom_compare_report *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    fprintf(f, "## loom compare: suite `%s`\n\n", r->suite);
    fprintf(f, "%d cases, %d algorithms; budget ", (int)r->n_cases, (int)r->n_algos);
    if (r->max_work > 0) fprintf(f, "%lld units of work (evaluations + ILP solves)",
                                 (long long)r->max_work);
    else fprintf(f, "unlimited work");
    if (r->budget_s > 0) fprintf(f, " and %g s wall clock", r->budget_s);
    fprintf(f, " per algorithm and case; random and genetic: "
               "%lld evaluations, seed %llu. Every plan is scored by the same evaluator "
               "(planner/compare/algo.h).\n\n",
            (long long)r->max_evals, (unsigned long long)r->seed);
    fprintf(f, "Each algorithm's best plan by the case's objective — predicted step time "
               "(training), per-token latency or tokens/s (inference) — and its gap to the best "
               "plan of the case (**bold**). "
               "\"no fit (N GiB)\": its best plan needs N GiB per GPU; \"over bound (t)\": its "
               "best plan misses the latency bound; \"none\": no plan found; \"*\": the "
               "budget ran out.\n\n");
    /* every case says the batch and sequence it was planned for (the
     * suite's or its defaults'), as plan and eval print what they assume */
    header_row(f, r, "case | GPUs | mode: batch × seq", 3);
    for (int32_t i = 0; i < r->n_cases; i++) {
        const loom_compare_case_result *c = &r->cases[i];
        fprintf(f, "| %s | %lld× %s | %s: %lld × %lld |", c->name, (long long)c->gpus, c->gpu,
                loom_plan_mode_name(c->mode), (long long)c->gbs, (long long)c->seq);
        for (int32_t k = 0; k < c->n_rows; k++) {
            char cell[96];
            fmt_cell(c->objective, &c->rows[k], cell, sizeof cell);
            fprintf(f, " %s%s |", cell, c->rows[k].timed_out ? "*" : "");
        }
        fprintf(f, "\n");
    }
    summary(f, r);
    fprintf(f, "\nSearch time and evaluations:\n\n");
    header_row(f, r, "case", 1);
    for (int32_t i = 0; i < r->n_cases; i++) {
        const loom_compare_case_result *c = &r->cases[i];
        fprintf(f, "| %s |", c->name);
        for (int32_t k = 0; k < c->n_rows; k++) {
            const loom_compare_row *w = &c->rows[k];
            if (r->timings) fprintf(f, " %.2f s / %lld |", w->search_s, (long long)w->evals);
            else fprintf(f, " %lld |", (long long)w->evals);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\nPlans (step: training step or per-token latency; dp: pipeline replicas, "
               "pp: stages, v: interleaving / logical meshes, m = Megatron strategies / "
               "micro-batch size x count / ZeRO / stages recomputed):\n\n"
               "| case | algorithm | step | memory/GPU | MFU | plan |\n"
               "|---|---|---:|---:|---:|---|\n");
    for (int32_t i = 0; i < r->n_cases; i++) {
        const loom_compare_case_result *c = &r->cases[i];
        for (int32_t k = 0; k < c->n_rows; k++) {
            const loom_compare_row *w = &c->rows[k];
            if (w->status == LOOM_CMP_NONE) continue;
            char t[32];
            fmt_time(t, sizeof t, w->step_s);
            fprintf(f, "| %s | %s | %s | %.1f GiB | ", c->name, w->algorithm, t,
                    w->memory_per_gpu_bytes / GIB);
            if (c->mode == LOOM_PLAN_TRAIN) fprintf(f, "%.1f%% |", 100 * w->mfu);
            else fprintf(f, "- |");
            fprintf(f, " %s |\n", w->plan);
        }
    }
    if (fclose(f)) {
        free(text);
        return NULL;
    }
    return text;
}

/* ---- CSV ---------------------------------------------------------------------------------- */

/* RFC 4180: quoted, quotes doubled. */
static void csv_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

char *loom_compare_csv(const loom_compare_report *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    fprintf(f, "case_index,case,model,cluster,gpus,gpu,mode,objective,gbs,seq,dtype,algorithm,"
               "status,step_time_s,score,gap,memory_per_gpu_bytes,mfu,tokens_per_s,"
               "search_time_s,evals,space,timed_out,plan\n");
    for (int32_t i = 0; i < r->n_cases; i++) {
        const loom_compare_case_result *c = &r->cases[i];
        for (int32_t k = 0; k < c->n_rows; k++) {
            const loom_compare_row *w = &c->rows[k];
            fprintf(f, "%d,", (int)c->index);
            csv_str(f, c->name), fputc(',', f);
            csv_str(f, c->model), fputc(',', f);
            csv_str(f, c->cluster), fputc(',', f);
            fprintf(f, "%lld,%s,%s,%s,%lld,%lld,%s,%s,%s,%.9g,%.9g,", (long long)c->gpus, c->gpu,
                    loom_plan_mode_name(c->mode), loom_problem_objective_name(c->objective),
                    (long long)c->gbs, (long long)c->seq, loom_dtype_name(c->dtype), w->algorithm,
                    loom_compare_status_name(w->status), w->step_s, w->score);
            if (isfinite(w->gap)) fprintf(f, "%.9g", w->gap);
            fprintf(f, ",%lld,%.6g,%.9g,%.6g,%lld,%lld,%s,", (long long)w->memory_per_gpu_bytes,
                    w->mfu, w->tokens_per_s, w->search_s, (long long)w->evals,
                    (long long)w->space, w->timed_out ? "true" : "false");
            csv_str(f, w->plan);
            fputc('\n', f);
        }
    }
    if (fclose(f)) {
        free(text);
        return NULL;
    }
    return text;
}

/* ---- SVG ---------------------------------------------------------------------------------- */

#define W 820
#define H 500
#define L_MARGIN 70
#define R_MARGIN 170
#define T_MARGIN 50
#define B_MARGIN 60
#define FAIL_BAND 28   /* plans that do not fit: a band above the plot */

static const char *const colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                     "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
                                     "#1f77b4", "#8c564b", "#17becf", "#bcbd22", "#7f7f7f",
                                     "#d62728"};

static double x_value(const loom_compare_report *r, const loom_compare_row *w)
{
    double v = r->timings ? w->search_s : (double)w->evals;
    double floor_v = r->timings ? 1e-3 : 1;
    return v > floor_v ? v : floor_v;
}

char *loom_compare_svg(const loom_compare_report *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    double xmin = INFINITY, xmax = 0, gmax = 0;
    for (int32_t i = 0; i < r->n_cases; i++)
        for (int32_t k = 0; k < r->cases[i].n_rows; k++) {
            const loom_compare_row *w = &r->cases[i].rows[k];
            double x = x_value(r, w);
            xmin = fmin(xmin, x), xmax = fmax(xmax, x);
            if (w->status == LOOM_CMP_OK) gmax = fmax(gmax, 100 * w->gap);
        }
    if (!isfinite(xmin)) xmin = 1, xmax = 10;
    double lx0 = floor(log10(xmin)), lx1 = ceil(log10(xmax));
    if (lx1 <= lx0) lx1 = lx0 + 1;
    /* y: log10(1 + gap%) up to the next of 1, 3, 10, 30, … % */
    static const double gticks[] = {0, 1, 3, 10, 30, 100, 300, 1000, 3000, 10000};
    int nt = 2;
    while (nt < 10 && gticks[nt - 1] < gmax) nt++;
    double ly1 = log10(1 + gticks[nt - 1]);
    const double pw = W - L_MARGIN - R_MARGIN, ph = H - T_MARGIN - B_MARGIN - FAIL_BAND;
    const double y0 = T_MARGIN + FAIL_BAND;
#define PX(x) (L_MARGIN + pw * (log10(x) - lx0) / (lx1 - lx0))
#define PY(gp) (y0 + ph - ph * log10(1 + (gp)) / ly1)
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\">Plan quality vs search time, suite "
               "%s (%d cases)</text>\n", L_MARGIN, r->suite, (int)r->n_cases);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#f4e3e3\"/>\n",
            L_MARGIN, T_MARGIN, pw, FAIL_BAND - 4);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">no fit</text>\n", L_MARGIN - 6,
            T_MARGIN + 16);
    for (int t = 0; t < nt; t++) {
        double y = PY(gticks[t]);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                L_MARGIN, y, L_MARGIN + pw, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g%%</text>\n", L_MARGIN - 6,
                y + 4, gticks[t]);
    }
    for (double e = lx0; e <= lx1 + 1e-9; e++) {
        double x = L_MARGIN + pw * (e - lx0) / (lx1 - lx0);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                x, y0, x, y0 + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x,
                y0 + ph + 16, pow(10, e));
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
            L_MARGIN + pw / 2, H - 18,
            r->timings ? "search wall time per case (s, log scale)"
                       : "evaluations per case (log scale)");
    fprintf(f, "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.1f)"
               "\">gap to the best plan of the case</text>\n", y0 + ph / 2, y0 + ph / 2);
    for (int32_t k = 0; k < r->n_algos; k++) {
        const char *col = colors[k % (int)(sizeof colors / sizeof colors[0])];
        fprintf(f, "<g fill=\"%s\" stroke=\"%s\">\n", col, col);
        for (int32_t i = 0; i < r->n_cases; i++) {
            const loom_compare_row *w = &r->cases[i].rows[k];
            double x = PX(x_value(r, w));
            if (w->status == LOOM_CMP_OK)
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill-opacity=\"0.75\">"
                           "<title>%s, %s: +%.2f%%</title></circle>\n",
                        x, PY(100 * w->gap), r->cases[i].name, w->algorithm, 100 * w->gap);
            else {
                double y = T_MARGIN + (FAIL_BAND - 4) / 2.0;
                fprintf(f, "<path d=\"M%.1f %.1fl6 6m0 -6l-6 6\" fill=\"none\" "
                           "stroke-width=\"1.5\"><title>%s, %s: %s</title></path>\n",
                        x - 3, y - 3, r->cases[i].name, w->algorithm,
                        loom_compare_status_name(w->status));
            }
        }
        fprintf(f, "</g>\n");
        double ly = T_MARGIN + 10 + 20.0 * k;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n", L_MARGIN + pw + 20,
                ly, col);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", L_MARGIN + pw + 32, ly + 4,
                r->algos[k]);
    }
#undef PX
#undef PY
    fprintf(f, "</svg>\n");
    if (fclose(f)) {
        free(text);
        return NULL;
    }
    return text;
}
