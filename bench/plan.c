/*
 * plan.c — how long `loom plan` takes (docs/design.md §10 targets, on a 2-core
 * machine: Llama-3-70B on 1,024 H100 under 2 s, Llama-3.1-405B on 16,384
 * H100 under 10 s, and a planning time that does not grow with the number of
 * identical layers). Prints figures; asserts nothing.
 *
 * Each case is planned end to end (loom_plan_run: graph building, ILP
 * solves, stage DPs, exact evaluation, plan assembly and validation) and
 * timed twice: wall clock, and the CPU time of this process (user + system),
 * which is what the targets mean when other work shares the machine.
 *
 * usage: plan [--layers-only] (run through bench/plan.sh)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "planner/plan/plan_run.h"

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

static int run(const char *label, const char *model, const char *cluster, int64_t gbs,
               int64_t seq, double target_s)
{
    loom_plan_request r;
    loom_plan_request_init(&r);
    r.model_path = model;
    r.cluster = cluster;
    r.problem.gbs = gbs;
    r.problem.seq = seq;
    loom_plan *p = NULL;
    loom_error err = {0};
    double w0 = wall_s(), c0 = cpu_s();
    loom_status st = loom_plan_run(&r, &p, NULL, &err);
    double w = wall_s() - w0, c = cpu_s() - c0;
    if (st) {
        printf("%-40s failed: %s\n", label, err.msg);
        return 1;
    }
    printf("%-40s wall %6.2f s  cpu %6.2f s", label, w, c);
    if (target_s > 0) printf("  (target < %g s)", target_s);
    printf("  | %lld ILP solves, %lld configs; %d stage(s) x %lld replica(s), step %.3g s, "
           "MFU %.1f%%\n",
           (long long)p->ilp_solves, (long long)p->configs_evaluated, (int)p->n_stages,
           (long long)p->data_parallel, p->step_time_s, 100 * p->mfu);
    loom_plan_destroy(p);
    return 0;
}

int main(int argc, char **argv)
{
    int bad = 0;
    double load[3] = {0};
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = 0;
        fclose(f);
    }
    printf("loom plan timings (load average %.2f: wall time counts other work, cpu time does "
           "not)\n\n", load[0]);
    bool layers_only = argc > 1 && strcmp(argv[1], "--layers-only") == 0;
    if (!layers_only) {
        bad |= run("llama-3-70b, 1,024 H100, gbs 2048 x 8192", "examples/models/llama-3-70b.json",
                   "dgx-h100-x128", 2048, 8192, 2);
        bad |= run("llama-3.1-405b, 16,384 H100, gbs 2048 x 8192",
                   "examples/models/llama-3.1-405b.json", "dgx-h100-x2048", 2048, 8192, 10);
    }
    printf("\nplanning time vs identical layers (Llama-3-8B shape, 64 H100, gbs 512 x 4096):\n");
    for (int i = 2; i < argc; i++) {
        char label[64];
        const char *base = strrchr(argv[i], '/');
        snprintf(label, sizeof label, "  %s", base ? base + 1 : argv[i]);
        bad |= run(label, argv[i], "dgx-h100-x8", 512, 4096, 0);
    }
    return bad;
}
