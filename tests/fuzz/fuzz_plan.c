/*
 * fuzz_plan.c — libFuzzer target for the plan reader (planner/plan/plan_json.c,
 * "loom-plan/1"), which every exporter and `loom export` start from.
 *
 * Any input: no crash, no undefined behaviour, a failure naming the file.
 * An accepted plan has passed loom_plan_check (plan.h: the reader validates
 * before returning); it must survive its writer (to_json, parsed again,
 * to_json: the same bytes) and draw as SVG.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "planner/plan/plan.h"

#define FILE_NAME "fuzz-plan.json"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    loom_error err = {0};
    loom_plan *p = NULL, *p2 = NULL;
    loom_status s = loom_plan_parse(FILE_NAME, (const char *)data, size, &p, &err);
    fuzz_check_failure(s, &err, FILE_NAME);
    if (s != LOOM_OK) {
        if (p) fuzz_die("a failed read handed back a plan", err.msg);
        return 0;
    }
    if (loom_plan_check(p, FILE_NAME, &err) != LOOM_OK) fuzz_die("accepted plan fails its check", err.msg);
    char *first = loom_plan_to_json(p, 0);
    if (!first) fuzz_die("to_json failed", "");
    if (loom_plan_parse("again.json", first, strlen(first), &p2, &err) != LOOM_OK)
        fuzz_die("the writer's output does not read back", err.msg);
    char *second = loom_plan_to_json(p2, 0);
    fuzz_check_same(first, second, "plan to_json(parse(to_json(p))) != to_json(p)");
    char *svg = loom_plan_svg(p);
    if (!svg) fuzz_die("svg failed", "");
    free(svg);
    free(first);
    free(second);
    loom_plan_destroy(p2);
    loom_plan_destroy(p);
    return 0;
}
