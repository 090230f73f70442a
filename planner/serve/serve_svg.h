/*
 * serve_svg.h — `loom plan --mode serve --svg FILE`: a picture of a serving
 * plan that agrees with its text (serve_text.c) and JSON (serve_json.c).
 *
 * One chart: output tokens/s per GPU (linear, from 0) against output
 * tokens/s per user (1 / mean TPOT, log scale), the aggregated and the
 * disaggregated Pareto fronts (serve_pareto.h, steady state) in two colours,
 * each point named (A1…, D1…) and a key giving each name its shape as the
 * text's front tables label it ("(tp 2) at 16", "(tp 1) at 16, 0.14 ×
 * prefill (tp 1)"), a tooltip per point with its figures as the tables
 * print them; the TPOT bound as a
 * vertical line (tokens/s per user = 1 / TPOT); the chosen deployment's
 * simulated point marked, and named in the title with its predicted
 * requests/s, requests/s per GPU and share of requests within the SLOs.
 *
 * Units: tokens/s, requests/s, milliseconds in labels.
 */
#ifndef LOOM_SERVE_SVG_H
#define LOOM_SERVE_SVG_H

#include "base/error.h"
#include "planner/serve/serve_plan.h"

/* The picture as SVG text (malloc'd; NULL when out of memory);
 * model_label names the model (NULL: the graph's name). Deterministic. */
char *loom_serve_plan_svg(const loom_serve_plan *p, const char *model_label);

/* Draws the picture and writes it to path atomically (base/fileio.h): on
 * any error nothing is left at path. */
loom_status loom_serve_plan_svg_write(const loom_serve_plan *p, const char *model_label,
                                      const char *path, loom_error *err);

#endif
