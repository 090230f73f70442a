/*
 * fuzz_calib.c — libFuzzer target for the calibration file reader
 * (costs/calib_json.c, "loom-calib/1").
 *
 * Any input: no crash, no undefined behaviour, a failure naming the file.
 * An accepted calibration must pass loom_calib_validate and survive its
 * writer: saved, loaded and saved again, the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>

#include "costs/calib.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    loom_error err = {0};
    loom_calib cal, cal2;
    loom_status s = loom_calib_load(path, &cal, &err);
    fuzz_check_failure(s, &err, path);
    if (s != LOOM_OK) return 0;
    if (loom_calib_validate(&cal, &err) != LOOM_OK) fuzz_die("loaded calib is invalid", err.msg);
    const char *out = fuzz_out_file();
    if (loom_calib_save(out, &cal, &err) != LOOM_OK) fuzz_die("save failed", err.msg);
    char *first = fuzz_slurp(out);
    if (loom_calib_load(out, &cal2, &err) != LOOM_OK) fuzz_die("saved calib does not load", err.msg);
    if (loom_calib_save(out, &cal2, &err) != LOOM_OK) fuzz_die("save failed", err.msg);
    char *second = fuzz_slurp(out);
    fuzz_check_same(first, second, "calib save(load(save(c))) != save(c)");
    free(first);
    free(second);
    return 0;
}
