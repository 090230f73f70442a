/*
 * serve_pareto.h — the throughput/interactivity Pareto front of a serving
 * search (docs/design.md §12), as NVIDIA's AIConfigurator and the
 * InferenceMAX charts draw it: output tokens/s per GPU against output
 * tokens/s per user (1 / TPOT), one point per deployment shape and load.
 *
 * Aggregated: every instance shape at 1, 2, 4, … clients up to the most it
 * can run at once; tokens/s per GPU is the instance's output rate over its
 * GPUs. Disaggregated: every decode shape at the same concurrencies, fed
 * by the prefill shape that needs the fewest GPUs per request/s at the TTFT
 * bound; the pools are taken in their exact rate ratio (a fraction of a
 * prefill instance per decode instance), so the front is the envelope that
 * integer pool sizes approach on a large cluster. Points whose mean TTFT
 * misses the TTFT bound are left out; the TPOT bound is the front's
 * tokens/s-per-user axis, so the whole front is kept. All figures are
 * steady-state estimates.
 *
 * The front keeps the points no other point beats on both axes, in order
 * of falling tokens/s per user (rising tokens/s per GPU).
 *
 * Units: tokens/s.
 */
#ifndef LOOM_SERVE_PARETO_H
#define LOOM_SERVE_PARETO_H

#include "planner/serve/serve_plan.h"
#include "planner/serve/serve_pool.h"

/* The front of the aggregated (disagg false) or disaggregated deployments
 * of ctx's space; stats: serve_pool.h figures of every shape. *out is
 * malloc'd (NULL when empty). Errors: out of memory, the steady state's. */
loom_status loom_serve_pareto_build(const loom_serve_ctx *ctx, const loom_serve_pool_stats *stats,
                                    bool disagg, loom_serve_front_point **out, int32_t *n,
                                    loom_error *err);

/* Keeps the non-dominated points of pts[0..n) in place, sorted by falling
 * tokens/s per user; returns their number. */
int32_t loom_serve_pareto_front(loom_serve_front_point *pts, int32_t n);

#endif
