/*
 * validate.h — DAG checks on the operator graph (igraph lives behind this file).
 */
#ifndef LOOM_VALIDATE_H
#define LOOM_VALIDATE_H

#include "graph/graph.h"

/* Fails if the op graph (producer -> consumer edges) has a cycle, naming the
 * ops along one cycle in order: "cycle: a -> b -> c -> a". */
loom_status loom_graph_check_dag(const loom_graph *g, loom_error *err);

#endif
