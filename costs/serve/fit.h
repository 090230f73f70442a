/*
 * fit.h — fitting the serving calibration (calib.h) to published serving
 * runs (records.h), and predicting them (`loom calibrate --serving`,
 * bench/serve_accuracy.sh). The method is in fit.c.
 *
 * A case is a record with what the fit needs resolved by the caller (the
 * planner opens files, the fit takes values): the model's graph, built for
 * one token, and the cluster of the record's GPU.
 *
 * Units: seconds, tokens/s.
 */
#ifndef LOOM_SERVE_FIT_H
#define LOOM_SERVE_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/serve/calib.h"
#include "costs/serve/records.h"
#include "costs/serve/step.h"
#include "costs/serve/workload.h"
#include "graph/graph.h"

typedef struct {
    const loom_serve_record *rec;
    const loom_graph *graph;
    loom_cluster cluster;    /* ceil(num_gpus / 8) DGX nodes of the record's GPU */
    /* the simulator's mean TTFT over the steady-state estimate's, the
     * front end's fixed latency left out of both, at an anchor calibration
     * (loom_serve_cases_anchor; 0 = not set: 1) */
    double ttft_sim_ratio;
} loom_serve_case;

/* The model options (engine defaults with the record's settings, its
 * parallelism, its longest request) of a case under cal. */
void loom_serve_case_opts(const loom_serve_case *c, const loom_serve_calib *cal,
                          loom_serve_model_opts *o);

/* Predicted metrics of case c under cal: simulate (the request-level
 * simulator, what `loom eval` reports) or the steady-state estimate. */
loom_status loom_serve_case_predict(const loom_serve_case *c, const loom_serve_calib *cal,
                                    bool simulate, loom_serve_metrics *out, loom_error *err);

/* Sets every case's ttft_sim_ratio: the simulator's mean TTFT over the
 * steady-state estimate's, both under cal (the fit's prior, so that every
 * leave-one-source-out fold shares them and none sees a held-out record
 * through them). A case either cannot predict keeps 0. */
void loom_serve_cases_anchor(loom_serve_case *cases, size_t n, const loom_serve_calib *cal);

/* Fits cal (in: the starting point and prior; out: the fit) to the cases
 * with use[i] (NULL = all), on the steady-state estimate, its TTFT times
 * the case's ttft_sim_ratio. Cases whose prediction fails (a deployment
 * that does not fit) are skipped. */
loom_status loom_serve_fit(const loom_serve_case *cases, size_t n, const bool *use,
                           loom_serve_calib *cal, double *final_loss, loom_error *err);

#endif
