/*
 * fuzz_calib_records.c — libFuzzer target for the measured-runs reader of
 * `loom calibrate` (costs/calib_fit.c: loom_calib_records_load, the
 * examples/calibration/published-runs.json format), and for what calibrate
 * then does with each record: its graph, its cluster and the cost model's
 * predicted iteration time (costs/eval.c).
 *
 * Any input: no crash, no undefined behaviour, a load failure naming the
 * file. A record the reader accepts must be one calibrate can evaluate:
 * its graph and cluster build, and its predicted time is finite and
 * positive (the fit takes logs of it).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "costs/calib_fit.h"
#include "fuzz_common.h"

#define MAX_RECORDS 4   /* evaluation is the slow part: a few records suffice */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    loom_error err = {0};
    loom_calib_record *recs = NULL;
    size_t n = 0;
    loom_status s = loom_calib_records_load(path, &recs, &n, &err);
    fuzz_check_failure(s, &err, path);
    if (s != LOOM_OK) {
        if (recs) fuzz_die("a failed load handed back records", err.msg);
        return 0;
    }
    if (n > MAX_RECORDS) n = MAX_RECORDS;
    for (size_t i = 0; i < n; i++) {
        loom_graph *g = NULL;
        loom_cluster c;
        if (recs[i].layers <= 130 && loom_calib_record_graph(&recs[i], &g, &err) != LOOM_OK)
            fuzz_die("an accepted record has no graph", err.msg);
        loom_graph_destroy(g);
        if (loom_calib_record_cluster(&recs[i], &c, &err) != LOOM_OK)
            fuzz_die("an accepted record has no cluster", err.msg);
    }
    double pred[MAX_RECORDS];
    if (loom_calib_predict(recs, n, NULL, pred, &err) != LOOM_OK)
        fuzz_die("accepted records cannot be evaluated", err.msg);
    for (size_t i = 0; i < n; i++)
        if (!(pred[i] > 0 && isfinite(pred[i]))) fuzz_die("predicted time not finite and > 0", recs[i].model);
    free(recs);
    return 0;
}
