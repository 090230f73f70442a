/*
 * megatron_split.h — how a Megatron-LM launch line splits the layers over
 * pipeline chunks (even, first/last stage sizes, or a layout string).
 * Internal to planner/import/.
 */
#ifndef LOOM_IMPORT_MEGATRON_SPLIT_H
#define LOOM_IMPORT_MEGATRON_SPLIT_H

#include "base/error.h"
#include "planner/export/export.h"
#include "planner/import/megatron_cmdline.h"

/* Reads the split arguments of c into cfg->n_chunks / chunk_layers (and the
 * first/last stage sizes of cfg->par), checked as validate_args would;
 * cfg->par's degrees and cfg->model.layers must already be read. */
loom_status loom_megatron_read_split(const loom_megatron_line *c, loom_runtime_config *cfg);

#endif
