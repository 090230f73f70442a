/*
 * compute.h — compute time of one op on its shard (docs/design.md §4).
 *
 * A loom_cost_model (opaque; one per planning run) holds the cluster, the
 * calibrated efficiencies and, optionally, a profile db. loom_cost_op_time
 * divides the op's operand dims by the given splits and answers, in order:
 *   1. the profile db (costs/profile_db.h): exact shard shape (measured),
 *      else log-space interpolation between measured neighbours;
 *   2. the roofline: t = max(flops / (peak · eff_c), bytes / (hbm_bw · eff_m))
 *      + kernel overhead, with eff_c the size-dependent GEMM efficiency for
 *      einsums, the attention efficiency for fused attention, and the
 *      CUDA-core peak × vector_eff for pointwise / norm / softmax / loss
 *      (one kernel each, or eager PyTorch's chain of kernels, eager.h);
 *      the router's top-k and the MoE dispatch / combine as the kernels
 *      Megatron-Core runs for them (costs/moe.h), ops on routed tokens
 *      scaled by the busiest expert-parallel rank's load.
 * Causal attention: the graph counts full attention FLOPs (model FLOPs, as
 * in Korthikanti et al.); flash kernels skip the masked blocks, so the
 * roofline charges about half (compute.c).
 *
 * Units: seconds; the op's FLOPs and bytes come from graph.h.
 */
#ifndef LOOM_COMPUTE_H
#define LOOM_COMPUTE_H

#include <stdint.h>
#include "costs/calib.h"
#include "costs/cluster.h"
#include "costs/eager.h"
#include "costs/profile_db.h"
#include "graph/graph.h"

typedef struct {
    double fwd_s, bwd_s;
    loom_time_source source;
} loom_op_time;

/* Every operand dim with this name is divided into `parts` (must divide). */
typedef struct {
    const char *dim;
    int64_t parts;
} loom_dim_split;

typedef struct loom_cost_model loom_cost_model;

/* The attention kernel a run launches (calib.h: attn_eff, attn_fa2_frac):
 *   FUSED  Transformer Engine's fused attention (cuDNN; FA3 on Hopper), the
 *          default, and what Megatron-LM and NeMo run
 *   FA2    FlashAttention-2: PyTorch SDPA's flash backend (torchtitan, FSDP
 *          scripts, Hugging Face models under DeepSpeed) or flash-attn 2
 *   FA2_UNPAD  flash-attn 2's varlen kernel behind flash-attn's bert_padding
 *          (llm-foundry's MPT, attn_impl "flash": llmfoundry/models/layers/
 *          attention.py flash_attn_fn): q, k and v gathered into packed
 *          rows and the output scattered back, eager ATen kernels each a
 *          pass through HBM, forward and backward */
typedef enum { LOOM_ATTN_FUSED, LOOM_ATTN_FA2, LOOM_ATTN_FA2_UNPAD } loom_attn_kernel;

/* cal NULL = loom_calib_default(&c->gpu); profile_db_path NULL = none. The
 * model copies the cluster and calib. */
loom_status loom_cost_model_create(const loom_cluster *c, const loom_calib *cal,
                                   const char *profile_db_path, loom_cost_model **out,
                                   loom_error *err);
void loom_cost_model_destroy(loom_cost_model *m);
/* The same costs (calibration, attention kernel, profile db) on another
 * view of the same machine, e.g. its tile view (cluster.h): what the stage
 * search prices a tiled NVLink domain with. The profile db is base's,
 * borrowed: base must outlive the view. */
loom_status loom_cost_model_view(const loom_cost_model *base, const loom_cluster *c,
                                 loom_cost_model **out, loom_error *err);
const loom_cluster *loom_cost_model_cluster(const loom_cost_model *m);
const loom_calib *loom_cost_model_calib(const loom_cost_model *m);
/* The attention kernel priced (default LOOM_ATTN_FUSED). */
void loom_cost_model_set_attention(loom_cost_model *m, loom_attn_kernel k);
loom_attn_kernel loom_cost_model_attention(const loom_cost_model *m);
/* How element-wise ops run (default LOOM_ELEMENTWISE_FUSED): eager prices
 * RMSNorm, rotary embedding and SwiGLU as eager PyTorch's kernel chains
 * (eager.h). */
void loom_cost_model_set_elementwise(loom_cost_model *m, loom_elementwise_mode e);
loom_elementwise_mode loom_cost_model_elementwise(const loom_cost_model *m);
/* The profile db in use, or NULL. */
const loom_profile_db *loom_cost_model_profile_db(const loom_cost_model *m);

/* Time of op `op` of g when its dims are split as given (n_splits may be 0).
 * LOOM_ERR_INVALID when a split does not divide a dim it names or parts < 1;
 * LOOM_ERR_UNSUPPORTED when the device lacks the op's dtype (fp8 on A100). */
loom_status loom_cost_op_time(const loom_cost_model *m, const loom_graph *g, int32_t op,
                              const loom_dim_split *splits, int n_splits, loom_op_time *out,
                              loom_error *err);

/* The same with expert parallelism over `ep` ranks that the splits do not
 * show (costs/eval.c, whose graph holds one rank's tokens: a GPU owns E/ep
 * experts and receives ep ranks' tokens, the FLOPs of all E experts on its
 * own tokens with 1/ep of their weights). Ops on per-expert token buffers
 * ([e, c, …]: expert GEMMs, their activation, dispatch, combine) see
 * ep × the parts of "e" ranks: that many local expert groups, Megatron's
 * permutation kernels and the busiest rank's load (costs/moe.h). Every
 * other op ignores ep; loom_cost_op_time is ep = 1. */
loom_status loom_cost_op_time_ep(const loom_cost_model *m, const loom_graph *g, int32_t op,
                                 const loom_dim_split *splits, int n_splits, int64_t ep,
                                 loom_op_time *out, loom_error *err);

/* Roofline building blocks for callers outside the graph (step time,
 * optimizer, benches): */
/* One GEMM of `flops` in dtype t: flops / (peak_t · eff(flops)) + overhead. */
double loom_cost_gemm_time_s(const loom_cost_model *m, double flops, loom_dtype t);
/* A grouped GEMM (MoE experts): `groups` GEMMs of flops in all, in one
 * kernel: one GEMM of the total work plus 0.9 us per group (measured,
 * compute.c); one launch overhead. */
double loom_cost_grouped_gemm_time_s(const loom_cost_model *m, double flops, double groups,
                                     loom_dtype t);
/* Streaming `bytes` through HBM: bytes / (hbm_bw · mem_eff). */
double loom_cost_memory_time_s(const loom_cost_model *m, double bytes);

#endif
