/*
 * serve_choices.h — the serving options' value tables, shared by
 * `loom eval --mode serve` (cmd_eval_serve.c) and `loom plan --mode serve`
 * (cmd_plan_serve.c) so both accept the same words for the same things.
 */
#ifndef LOOM_CLI_SERVE_CHOICES_H
#define LOOM_CLI_SERVE_CHOICES_H

#include "planner/cli/options.h"

extern const loom_cli_choice loom_serve_engine_choices[];   /* --engine */
extern const loom_cli_choice loom_serve_weight_choices[];   /* --weights */
extern const loom_cli_choice loom_serve_kv_choices[];       /* --kv-dtype */
extern const loom_cli_choice loom_serve_dist_choices[];     /* --len-dist */
extern const loom_cli_choice loom_serve_frontend_choices[]; /* --frontend */

#endif
