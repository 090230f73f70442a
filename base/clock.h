/*
 * clock.h — the monotonic clock every timed loop reads (solve times, search
 * budgets, the plan's reported search time). Seconds as a double.
 */
#ifndef LOOM_BASE_CLOCK_H
#define LOOM_BASE_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC): only differences
 * mean anything. */
double loom_clock_s(void);

#endif
