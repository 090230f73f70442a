/*
 * huber.h — Huber's loss, shared by the fits (costs/calib_fit.c,
 * costs/serve/fit.c): quadratic for |r| up to delta, linear beyond, with a
 * continuous slope, so that a few records the model cannot explain pull a
 * fit no harder than a median would.
 */
#ifndef LOOM_BASE_HUBER_H
#define LOOM_BASE_HUBER_H

#include <math.h>

static inline double loom_huber(double r, double delta)
{
    double a = fabs(r);
    return a <= delta ? a * a : delta * (2 * a - delta);
}

#endif
