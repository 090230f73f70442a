/*
 * enumerate.h — the profile keys a model needs, without a planner run:
 * every op of the graph on its Megatron-style tensor-parallel shard for each
 * TP degree 1..max_tp that is a valid Megatron configuration of the model.
 *
 * TP degree t shards the dims named heads, kvh, f and v by t (house
 * convention: Megatron tensor parallelism shards exactly these; kvh is kept
 * whole, i.e. replicated, when t does not divide it). A degree is valid when
 * every op's sharded key can be formed (t divides heads, f and v). For t > 1
 * the norms and pointwise ops that the TP split leaves whole (layer norms,
 * residual adds) are also enumerated under Megatron sequence parallelism
 * (s split by t), the form they take in such runs.
 *
 * Plain C over graph/ and costs/ (no CUDA), so it runs and is tested without
 * a GPU; `loom-profile --emit-requests` writes its result as a requests file.
 */
#ifndef LOOM_GPU_ENUMERATE_H
#define LOOM_GPU_ENUMERATE_H

#include <stdbool.h>
#include <stdint.h>
#include "costs/profile_db.h"
#include "graph/graph.h"

/* Distinct keys (sorted) of all ops of g for TP degrees 1..max_tp; *out is
 * malloc'd. Ops that are free views are left out. *degrees (may be NULL)
 * receives a bitmask of the degrees used (bit t). */
loom_status loom_profile_enumerate(const loom_graph *g, int64_t max_tp, loom_profile_key **out,
                                   int32_t *n, uint64_t *degrees, loom_error *err);

/* The dims Megatron TP degree tp divides in g ({heads, f, v[, kvh]}, plus s
 * when sp): fills div (6 entries at most) and returns how many. */
int loom_profile_tp_divisors(const loom_graph *g, int64_t tp, bool sp, loom_dim *div);

/* The keys of one layer's ops at TP degree tp, in op order (views left out):
 * keys[i] belongs to op ids[i]. Arrays must hold loom_graph_layer_ops' count. */
loom_status loom_profile_layer_keys(const loom_graph *g, int32_t layer, int64_t tp,
                                    loom_profile_key *keys, int32_t *ids, int32_t *n,
                                    loom_error *err);

#endif
